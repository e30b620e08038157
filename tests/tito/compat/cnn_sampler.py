"""An MNIST-style CNN (a conv block, a dilated depthwise-separable block, max-pooling, a
linear head) trained through `torch.utils.data`: a TensorDataset, a Sampler subclass of our
own that visits the samples in a fixed interleaved order, `DataLoader(sampler=...,
batch_size=...)`. float32, SGD with momentum."""
import numpy as np
from compat_common import same_start

EPOCHS, N, BATCH = 5, 48, 12


def main(torch):
    nn, F = torch.nn, torch.nn.functional
    DataLoader, Sampler, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.Sampler, torch.utils.data.TensorDataset

    class EvensThenOdds(Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter([*range(0, self.n, 2), *range(1, self.n, 2)])

        def __len__(self):
            return self.n

    model = same_start(torch, nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 4, 3, padding="same", dilation=2, groups=4), nn.Conv2d(4, 8, 1),  # depthwise, dilated
        nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 2 * 2, 10)))
    rng = np.random.default_rng(3)
    images = torch.tensor(rng.standard_normal((N, 1, 8, 8)).astype(np.float32))
    labels = torch.tensor(rng.integers(0, 10, N))
    loader = DataLoader(TensorDataset(images, labels), batch_size=BATCH, sampler=EvensThenOdds(N))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(EPOCHS):
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses

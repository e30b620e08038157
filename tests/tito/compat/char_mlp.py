"""A makemore-style character MLP: an embedding table indexed by a context of 3 characters,
`view` to concatenate, a tanh layer, cross-entropy, plain SGD written by hand over
`p.grad`; at the end a sample is drawn with `multinomial` (its draws are not compared:
each framework has its own random generator). float32."""
import numpy as np
from compat_common import same_start

STEPS, CONTEXT, VOCAB, EMB, HIDDEN, N = 25, 3, 13, 5, 32, 64


def main(torch):
    nn, F = torch.nn, torch.nn.functional

    class CharMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.Parameter(torch.zeros(VOCAB, EMB))
            self.hidden = nn.Linear(CONTEXT * EMB, HIDDEN)
            self.out = nn.Linear(HIDDEN, VOCAB)

        def forward(self, ctx):
            emb = self.C[ctx]  # (N, CONTEXT, EMB)
            return self.out(torch.tanh(self.hidden(emb.view(emb.shape[0], -1))))

    model = same_start(torch, CharMLP())
    data = np.random.default_rng(2).integers(0, VOCAB, (N, CONTEXT + 1))
    ctx, target = torch.tensor(data[:, :-1]), torch.tensor(data[:, -1])
    losses = []
    for _ in range(STEPS):
        loss = F.cross_entropy(model(ctx), target)
        for p in model.parameters():
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.5 * p.grad
        losses.append(loss.item())
    with torch.no_grad():
        probs = F.softmax(model(ctx[:1]), dim=1)
        drawn = torch.multinomial(probs, num_samples=4, replacement=True)
    assert tuple(drawn.shape) == (1, 4) and 0 <= int(drawn.min()) and int(drawn.max()) < VOCAB
    return losses

"""A small CNN built from this module's layers reaches >= 97% test accuracy on the digits."""

import tinytorch as tt
from tinytorch.data import DataLoader, Digits
from tinytorch.nn import BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, ReLU, Sequential
from tinytorch.nn.functional import cross_entropy
from tinytorch.optim import Adam
from tinytorch.optim.lr_scheduler import CosineAnnealingLR


def test_cnn_on_digits_reaches_97_percent():
    tt.manual_seed(0)
    train, test = Digits(train=True), Digits(train=False)
    model = Sequential(
        Conv2d(1, 16, 3, padding=1), BatchNorm2d(16), ReLU(), MaxPool2d(2),
        Conv2d(16, 32, 3, padding=1), BatchNorm2d(32), ReLU(), MaxPool2d(2),
        Flatten(), Linear(128, 10),
    )
    epochs, batch = 5, 32
    loader = DataLoader(train, batch_size=batch, shuffle=True)
    optimizer = Adam(model.parameters(), lr=1e-2)
    scheduler = CosineAnnealingLR(optimizer, T_max=epochs * ((len(train) + batch - 1) // batch))
    first = None
    for _ in range(epochs):
        for images, labels in loader:
            loss = cross_entropy(model(images), labels)
            first = loss.item() if first is None else first
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
    assert loss.item() < first / 10
    model.eval()
    with tt.no_grad():
        pred = model(test.data).numpy().argmax(axis=1)
    accuracy = float((pred == test.targets.numpy()).mean())
    assert accuracy >= 0.97, f"test accuracy {accuracy:.4f}"

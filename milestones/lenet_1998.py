"""A LeNet-style convolutional network (1998) reads handwritten digits.

LeCun, Bottou, Bengio and Haffner's LeNet-5 (1998) read the digits on bank cheques with
convolutions (a small filter slid over the image, the same weights everywhere), pooling
(keep the strongest answer of each neighbourhood) and a classifier on top. This one is
LeNet's shape, sized for the 8x8 digits: two convolution + pooling stages, then a linear
layer, all of it your code from modules 01-09 (im2col convolution, max pooling).

Run it with `tito milestone run lenet` (or plainly: python milestones/lenet_1998.py).
"""
import sys

import matplotlib

matplotlib.use("Agg")

import tinytorch  # noqa: E402
from tinytorch import nn  # noqa: E402
from tinytorch.data import DataLoader, Digits, Generator  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402
from tinytorch.optim.lr_scheduler import CosineAnnealingLR  # noqa: E402
from tinytorch.training import evaluate, train_epoch  # noqa: E402
from _shared import OUT, progress, report, plot_curves  # noqa: E402  (milestones/_shared.py)

TITLE = "LeNet: a convolutional network reads handwritten digits"
YEAR = 1998
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "05_dataloader", "06_autograd",
           "07_optimizers", "08_training", "09_convolutions"]
TARGET = "test accuracy >= 96% on the 359 held-out digits"
EPOCHS = 12


def lenet():
    """(1, 8, 8) -> conv 3x3 -> 16 x 8x8 -> pool -> 16 x 4x4 -> conv 3x3 -> 32 x 4x4 -> pool -> 32 x 2x2 -> 10."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10),
    )


def main():
    train_set, test_set = Digits(train=True), Digits(train=False)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, generator=Generator().manual_seed(0))
    test_loader = DataLoader(test_set, batch_size=359)
    tinytorch.manual_seed(0)
    model = lenet()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = Adam(model.parameters(), lr=5e-3)
    scheduler = CosineAnnealingLR(optimizer, T_max=EPOCHS)
    history = {"train_loss": [], "test_accuracy": []}
    bar = progress(total=EPOCHS * len(train_loader), desc="LeNet", unit="batch")
    for _ in range(EPOCHS):
        train = train_epoch(model, loss_fn, optimizer, train_loader, progress=bar)
        scheduler.step()
        test = evaluate(model, test_loader, loss_fn)
        history["train_loss"].append(train["loss"])
        history["test_accuracy"].append(test["accuracy"])
    bar.close()
    acc = history["test_accuracy"][-1]
    met = acc >= 0.96

    OUT.mkdir(parents=True, exist_ok=True)
    plot = OUT / "lenet_1998.png"
    plot_curves(history, plot, "LeNet-style CNN on the 8x8 digits", 0.96)
    n_params = sum(p.numel() for p in model.parameters())
    result = f"test accuracy {100 * acc:.1f}% after {EPOCHS} epochs ({n_params:,d} parameters)"
    return report("lenet", TARGET, result, met, plot)


if __name__ == "__main__":
    sys.exit(main())

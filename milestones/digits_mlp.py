"""An MLP reads handwritten digits: your whole training stack, from data loading to Adam.

A multi-layer perceptron with one hidden layer of ReLU units learns the 8x8 handwritten
digits (the UCI set, 1,797 images) shipped with the course: the datasets and DataLoader of
module 05, the losses of module 04, autograd, Adam with a cosine learning-rate schedule, and
module 08's training epoch and evaluation, measured on 359 test images it never saw.

Run it with `tito milestone run digits_mlp` (or plainly: python milestones/digits_mlp.py).
"""
import sys

import matplotlib

matplotlib.use("Agg")

import tinytorch  # noqa: E402
from tinytorch import nn  # noqa: E402
from tinytorch.data import DataLoader, Digits, Generator, TensorDataset  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402
from tinytorch.optim.lr_scheduler import CosineAnnealingLR  # noqa: E402
from tinytorch.training import evaluate, train_epoch  # noqa: E402
from _shared import OUT, progress, report, plot_curves  # noqa: E402  (milestones/_shared.py)

TITLE = "A multi-layer perceptron reads handwritten digits"
YEAR = None  # the idea has no single landmark year; the MLP and backprop are from the 1980s
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "05_dataloader", "06_autograd",
           "07_optimizers", "08_training"]
TARGET = "test accuracy >= 95% on the 359 held-out digits"
EPOCHS = 15


def flat(digits):
    """The digits as rows of 64 pixels: an MLP sees no image, only a vector."""
    return TensorDataset(digits.data.reshape(len(digits), 64), digits.targets)


def main():
    train_set, test_set = flat(Digits(train=True)), flat(Digits(train=False))
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=Generator().manual_seed(0))
    test_loader = DataLoader(test_set, batch_size=359)
    tinytorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = Adam(model.parameters(), lr=1e-2)
    scheduler = CosineAnnealingLR(optimizer, T_max=EPOCHS)  # settle down as training ends
    history = {"train_loss": [], "test_accuracy": []}
    bar = progress(total=EPOCHS * len(train_loader), desc="digits MLP", unit="batch")
    for _ in range(EPOCHS):
        train = train_epoch(model, loss_fn, optimizer, train_loader, progress=bar)
        scheduler.step()
        test = evaluate(model, test_loader, loss_fn)
        history["train_loss"].append(train["loss"])
        history["test_accuracy"].append(test["accuracy"])
    bar.close()
    acc = history["test_accuracy"][-1]
    met = acc >= 0.95

    OUT.mkdir(parents=True, exist_ok=True)
    plot = OUT / "digits_mlp.png"
    plot_curves(history, plot, "MLP 64-128-10 on the 8x8 digits", 0.95)
    result = f"test accuracy {100 * acc:.1f}% after {EPOCHS} epochs"
    return report("digits_mlp", TARGET, result, met, plot)


if __name__ == "__main__":
    sys.exit(main())

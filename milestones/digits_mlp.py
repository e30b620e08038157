"""An MLP reads handwritten digits: your whole training stack, from data loading to Adam.

A multi-layer perceptron with one hidden layer of ReLU units learns the 8x8 handwritten
digits (the UCI set, 1,797 images) shipped with the course: the datasets and DataLoader of
module 05, the losses of module 04, autograd, Adam with a cosine learning-rate schedule, and
module 08's training epoch and evaluation, measured on 359 test images it never saw.

Run it with `tito milestone run digits_mlp` (or plainly: python milestones/digits_mlp.py).
"""
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tinytorch  # noqa: E402
from tinytorch import nn  # noqa: E402
from tinytorch.data import DataLoader, Digits, Generator, TensorDataset  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402
from tinytorch.optim.lr_scheduler import CosineAnnealingLR  # noqa: E402
from tinytorch.training import evaluate, train_epoch  # noqa: E402

TITLE = "A multi-layer perceptron reads handwritten digits"
YEAR = None  # the idea has no single landmark year; the MLP and backprop are from the 1980s
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "05_dataloader", "06_autograd",
           "07_optimizers", "08_training"]
TARGET = "test accuracy >= 95% on the 359 held-out digits"
OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")
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
    bar = tqdm(total=EPOCHS * len(train_loader), desc="digits MLP", unit="batch", disable=None)
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
    return report("digits_mlp", result, met, plot)


def plot_curves(history, path, title, target):
    epochs = range(1, len(history["train_loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    ax1.plot(epochs, history["train_loss"], "o-")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("training loss (cross-entropy)")
    ax1.set_title(title)
    ax2.plot(epochs, [100 * a for a in history["test_accuracy"]], "o-", color="C2")
    ax2.axhline(100 * target, color="gray", ls=":", label=f"target {100 * target:.0f}%")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("test accuracy (%)")
    ax2.set_title("accuracy on the held-out digits")
    ax2.legend(fontsize=8)
    for ax in fig.axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def report(name, result, met, plot):
    """Print the result against the target, say where the plot is, and leave a record for tito."""
    print(f"target: {TARGET}")
    print(f"result: {result}  {'✓ target met' if met else '✗ target missed'}")
    print(f"plot:   {plot}")
    (OUT / f"{name}.json").write_text(json.dumps({"result": result, "met": met, "plot": str(plot)}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

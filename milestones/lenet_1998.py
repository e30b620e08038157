"""A LeNet-style convolutional network (1998) reads handwritten digits.

LeCun, Bottou, Bengio and Haffner's LeNet-5 (1998) read the digits on bank cheques with
convolutions (a small filter slid over the image, the same weights everywhere), pooling
(keep the strongest answer of each neighbourhood) and a classifier on top. This one is
LeNet's shape, sized for the 8x8 digits: two convolution + pooling stages, then a linear
layer, all of it your code from modules 01-09 (im2col convolution, max pooling).

Run it with `tito milestone run lenet` (or plainly: python milestones/lenet_1998.py).
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
from tinytorch.data import DataLoader, Digits, Generator  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402
from tinytorch.optim.lr_scheduler import CosineAnnealingLR  # noqa: E402
from tinytorch.training import evaluate, train_epoch  # noqa: E402

TITLE = "LeNet: a convolutional network reads handwritten digits"
YEAR = 1998
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "05_dataloader", "06_autograd",
           "07_optimizers", "08_training", "09_convolutions"]
TARGET = "test accuracy >= 96% on the 359 held-out digits"
OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")
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
    bar = tqdm(total=EPOCHS * len(train_loader), desc="LeNet", unit="batch", disable=None)
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
    return report("lenet", result, met, plot)


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

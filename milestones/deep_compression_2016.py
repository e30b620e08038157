"""Deep compression (2016): a digits classifier made ten times smaller, and as accurate.

Han, Mao and Dally's "Deep Compression" (ICLR 2016) shrank trained networks many times over
by pruning the weights that matter least, fine-tuning the rest, and storing them in a few
bits instead of 32. This milestone does the same to an MLP trained on the digits: your
structured pruning (module 16) removes half of each hidden layer's neurons, a short
fine-tune recovers the accuracy, and your post-training int8 quantization (module 15)
stores each remaining weight in one byte. (The paper pruned single weights and stored them
sparsely; removing whole neurons keeps the layers dense, so the savings are real in numpy.)

Run it with `tito milestone run deep_compression` (or: python milestones/deep_compression_2016.py).
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
from tinytorch.ao.quantization import quantize_model  # noqa: E402
from tinytorch.compression import model_bytes, prune_neurons  # noqa: E402
from tinytorch.data import DataLoader, Digits, Generator, TensorDataset  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402
from tinytorch.training import evaluate, train_epoch  # noqa: E402

TITLE = "Deep compression: prune and quantize a trained network"
YEAR = 2016
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "05_dataloader", "06_autograd",
           "07_optimizers", "08_training", "15_quantization", "16_compression"]
TARGET = "at least 8x fewer bytes than the float model, test accuracy at most 2 points below it"
OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")
EPOCHS, FINE_TUNE = 10, 3


def flat(digits):
    """The digits as rows of 64 pixels: an MLP sees no image, only a vector."""
    return TensorDataset(digits.data.reshape(len(digits), 64), digits.targets)


def main():
    train_set, test_set = flat(Digits(train=True)), flat(Digits(train=False))
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=Generator().manual_seed(0))
    test_loader = DataLoader(test_set, batch_size=359)
    loss_fn = nn.CrossEntropyLoss()
    tinytorch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    curve = []  # (phase, test accuracy) after each epoch
    bar = tqdm(total=(EPOCHS + FINE_TUNE) * len(train_loader), desc="deep compression", unit="batch", disable=None)
    optimizer = Adam(model.parameters(), lr=2e-3)
    for _ in range(EPOCHS):
        train_epoch(model, loss_fn, optimizer, train_loader, progress=bar)
        curve.append(("float", evaluate(model, test_loader)["accuracy"]))
    float_acc, float_bytes = curve[-1][1], model_bytes(model)

    pruned = prune_neurons(model, 0.5)  # half of every hidden layer's neurons, the weakest (L1)
    pruned_acc = evaluate(pruned, test_loader)["accuracy"]
    optimizer = Adam(pruned.parameters(), lr=1e-3)
    for _ in range(FINE_TUNE):
        train_epoch(pruned, loss_fn, optimizer, train_loader, progress=bar)
        curve.append(("fine-tune", evaluate(pruned, test_loader)["accuracy"]))
    bar.close()
    calibration = [batch for _, batch in zip(range(8), DataLoader(train_set, batch_size=64))]
    compressed = quantize_model(pruned, calibration)  # int8 weights, int32 accumulation
    acc, nbytes = evaluate(compressed, test_loader)["accuracy"], model_bytes(compressed)
    ratio, drop = float_bytes / nbytes, 100 * (float_acc - acc)
    met = ratio >= 8 and drop <= 2.0
    print(f"float model:           {float_bytes:9,d} bytes, test accuracy {100 * float_acc:.1f}%")
    print(f"50% neurons pruned:    {model_bytes(pruned):9,d} bytes, test accuracy {100 * pruned_acc:.1f}% "
          f"before fine-tuning, {100 * curve[-1][1]:.1f}% after")
    print(f"pruned + int8:         {nbytes:9,d} bytes, test accuracy {100 * acc:.1f}%")

    OUT.mkdir(parents=True, exist_ok=True)
    plot = OUT / "deep_compression_2016.png"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    xs = range(1, len(curve) + 1)
    ax1.plot(xs, [100 * a for _, a in curve], "o-")
    ax1.axvline(EPOCHS + 0.5, color="gray", ls=":")
    ax1.text(EPOCHS + 0.6, min(100 * a for _, a in curve), "pruned, then fine-tuned", fontsize=8)
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("test accuracy (%)")
    ax1.set_title("training, then fine-tuning the pruned model")
    names = ["float32", "pruned", "pruned + int8"]
    sizes = [float_bytes / 1024, model_bytes(pruned) / 1024, nbytes / 1024]
    bars = ax2.bar(names, sizes, color=["C0", "C1", "C2"])
    for b, a in zip(bars, [float_acc, curve[-1][1], acc]):
        ax2.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{100 * a:.1f}%", ha="center", va="bottom", fontsize=9)
    ax2.set_ylabel("stored size (KiB)")
    ax2.set_title("size (bars) and test accuracy (labels)")
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
    fig.tight_layout()
    fig.savefig(plot, dpi=100)
    plt.close(fig)

    result = (f"{ratio:.1f}x fewer bytes ({float_bytes:,d} -> {nbytes:,d}), test accuracy "
              f"{100 * acc:.1f}% against the float model's {100 * float_acc:.1f}%")
    return report("deep_compression", result, met, plot)


def report(name, result, met, plot):
    """Print the result against the target, say where the plot is, and leave a record for tito."""
    print(f"target: {TARGET}")
    print(f"result: {result}  {'✓ target met' if met else '✗ target missed'}")
    print(f"plot:   {plot}")
    (OUT / f"{name}.json").write_text(json.dumps({"result": result, "met": met, "plot": str(plot)}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

"""What every milestone script shares: where its results go, its progress bar, its training
curves and its report (tito reads each script's TITLE, YEAR, MODULES and TARGET itself)."""
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from tqdm import tqdm  # noqa: E402

OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")


def progress(iterable=None, **kwargs):
    """A tqdm bar on a terminal; nothing when the output goes to a file or a CI log, where
    each redraw would be one more carriage-return frame in the log."""
    return tqdm(iterable, disable=not sys.stderr.isatty(), **kwargs)


def plot_curves(history, path, title, target):
    """Training loss and test accuracy per epoch, with the accuracy target, saved to `path`."""
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


def report(name, target, result, met, plot):
    """Print the result against the target, say where the plot is, and leave a record for tito."""
    print(f"target: {target}")
    print(f"result: {result}  {'✓ target met' if met else '✗ target missed'}")
    print(f"plot:   {plot}")
    (OUT / f"{name}.json").write_text(json.dumps({"result": result, "met": met, "plot": str(plot)}))
    return 0 if met else 1

"""XOR with backpropagation (1986): a hidden layer, trained by the chain rule, does what no
single perceptron can.

Minsky and Papert (1969) proved that a single perceptron cannot compute XOR: no straight line
puts (0,1) and (1,0) on one side and (0,0) and (1,1) on the other. Rumelhart, Hinton and
Williams (1986) showed how to train a network with a hidden layer: run the chain rule
backwards through it (backpropagation). Here it is with your autograd and your SGD.

Run it with `tito milestone run xor` (or plainly: python milestones/xor_1986.py).
"""
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tinytorch  # noqa: E402
from tinytorch import nn  # noqa: E402
from tinytorch.optim import SGD  # noqa: E402

TITLE = "Backpropagation learns XOR"
YEAR = 1986
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "06_autograd", "07_optimizers"]
TARGET = "all 4 XOR cases right, mean squared error <= 0.05"
OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")
STEPS = 500


def main():
    x = tinytorch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = tinytorch.tensor([[0.0], [1.0], [1.0], [0.0]])
    tinytorch.manual_seed(0)
    # 1986's network: sigmoid units, a hidden layer, squared error
    model = nn.Sequential(nn.Linear(2, 4), nn.Sigmoid(), nn.Linear(4, 1), nn.Sigmoid())
    loss_fn = nn.MSELoss()
    optimizer = SGD(model.parameters(), lr=2.0, momentum=0.9)
    losses = []
    bar = tqdm(range(STEPS), desc="xor", unit="step", disable=None)
    for step in bar:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # backpropagation: the chain rule, run backwards through the graph
        optimizer.step()
        losses.append(loss.item())
        if step % 50 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
    bar.close()
    with tinytorch.no_grad():
        out = model(x).numpy()[:, 0]
    right = int(((out > 0.5) == (y.numpy()[:, 0] > 0.5)).sum())
    mse = float(np.mean((out - y.numpy()[:, 0]) ** 2))
    met = right == 4 and mse <= 0.05

    OUT.mkdir(parents=True, exist_ok=True)
    plot = OUT / "xor_1986.png"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.semilogy(losses)
    ax1.axhline(0.05, color="gray", ls=":", label="target 0.05")
    ax1.set_xlabel("step")
    ax1.set_ylabel("mean squared error")
    ax1.set_title("training loss")
    ax1.legend(fontsize=8)
    g = np.linspace(-0.25, 1.25, 61, dtype=np.float32)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    with tinytorch.no_grad():
        surface = model(tinytorch.tensor(grid)).numpy().reshape(len(g), len(g))
    im = ax2.contourf(g, g, surface, levels=20, cmap="RdBu_r", vmin=0, vmax=1)
    fig.colorbar(im, ax=ax2, label="network output")
    xs = x.numpy()
    ax2.scatter(xs[:, 0], xs[:, 1], c="white", edgecolors="k", s=260, zorder=3)
    for (a, b), t in zip(xs, y.numpy()[:, 0]):
        ax2.text(a, b, f"{t:.0f}", ha="center", va="center", fontsize=10, zorder=4)
    ax2.set_title("what the network computes: XOR")
    fig.tight_layout()
    fig.savefig(plot, dpi=100)
    plt.close(fig)

    result = f"{right}/4 cases right, mean squared error {mse:.4f} after {STEPS} steps"
    return report("xor", result, met, plot)


def report(name, result, met, plot):
    """Print the result against the target, say where the plot is, and leave a record for tito."""
    print(f"target: {TARGET}")
    print(f"result: {result}  {'✓ target met' if met else '✗ target missed'}")
    print(f"plot:   {plot}")
    (OUT / f"{name}.json").write_text(json.dumps({"result": result, "met": met, "plot": str(plot)}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

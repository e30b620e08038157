"""Rosenblatt's perceptron (1958): a single neuron learns a line that separates two classes.

Frank Rosenblatt's learning rule is the first learning algorithm for a neural network: show
the neuron one example; if it answers wrongly, move its weights towards (or away from) that
example. The perceptron convergence theorem (Novikoff, 1962) says that on data a straight
line can separate, the rule makes only finitely many mistakes and then separates it all.
No gradients, no loss: just your Tensor and your Linear layer.

Run it with `tito milestone run perceptron` (or plainly: python milestones/perceptron_1958.py).
"""
import json
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tinytorch  # noqa: E402
from tinytorch import nn  # noqa: E402

TITLE = "Rosenblatt's perceptron learns a separating line"
YEAR = 1958
MODULES = ["01_tensor", "03_layers"]
TARGET = "training accuracy = 100% (every point on its side of the line)"
OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")
EPOCHS = 20


def make_data(n=300, seed=0):
    """Two clouds of 2-D points on either side of the line x1 + 2 x2 = 0.5, with a margin."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(4 * n, 2))
    side = x[:, 0] + 2 * x[:, 1] - 0.5
    x = x[np.abs(side) > 0.05][:n]  # keep a margin: the theorem needs one
    y = (x[:, 0] + 2 * x[:, 1] - 0.5 > 0).astype(np.float32)
    return x.astype(np.float32), y


def main():
    x, y = make_data()
    tinytorch.manual_seed(0)
    neuron = nn.Linear(2, 1)  # w·x + b; the perceptron answers 1 when it is > 0
    for p in neuron.parameters():
        p.requires_grad_(False)  # the perceptron rule needs no gradients
    lr = 1.0
    mistakes, accuracies = [], []
    order = np.random.default_rng(1).permutation(len(x))
    inputs = tinytorch.tensor(x)
    bar = tqdm(range(EPOCHS), desc="perceptron", unit="epoch", disable=None)
    for _ in bar:
        wrong = 0
        for i in order:
            xi = tinytorch.tensor(x[i:i + 1])
            answer = 1.0 if neuron(xi).item() > 0 else 0.0
            error = float(y[i]) - answer  # +1, 0 or -1
            if error != 0.0:  # Rosenblatt's rule: move the line towards the missed point
                neuron.weight.add_(xi * (lr * error))
                neuron.bias.add_(tinytorch.tensor([lr * error]))
                wrong += 1
        mistakes.append(wrong)
        accuracies.append(float(((neuron(inputs).numpy()[:, 0] > 0) == (y > 0.5)).mean()))
        bar.set_postfix(mistakes=wrong, accuracy=f"{accuracies[-1]:.3f}")
        if wrong == 0:  # a whole epoch without a mistake: the line separates the data
            break
    bar.close()
    acc = accuracies[-1]
    met = acc == 1.0

    OUT.mkdir(parents=True, exist_ok=True)
    plot = OUT / "perceptron_1958.png"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.scatter(x[y == 0, 0], x[y == 0, 1], s=10, label="class 0")
    ax1.scatter(x[y == 1, 0], x[y == 1, 1], s=10, label="class 1")
    w, b = neuron.weight.numpy()[0], float(neuron.bias.numpy()[0])
    xs = np.linspace(-2, 2, 2)
    ax1.plot(xs, -(w[0] * xs + b) / w[1], "k-", label="learned line")
    ax1.set_xlim(-2, 2), ax1.set_ylim(-2, 2)
    ax1.set_title("the perceptron's line")
    ax1.legend(fontsize=8)
    ax2.plot(range(1, len(mistakes) + 1), mistakes, "o-")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("mistakes (updates) in the epoch")
    ax2.set_title("finitely many mistakes, then none")
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
    fig.tight_layout()
    fig.savefig(plot, dpi=100)
    plt.close(fig)

    result = f"training accuracy {100 * acc:.1f}% after {len(mistakes)} epochs ({sum(mistakes)} updates)"
    return report("perceptron", result, met, plot)


def report(name, result, met, plot):
    """Print the result against the target, say where the plot is, and leave a record for tito."""
    print(f"target: {TARGET}")
    print(f"result: {result}  {'✓ target met' if met else '✗ target missed'}")
    print(f"plot:   {plot}")
    (OUT / f"{name}.json").write_text(json.dumps({"result": result, "met": met, "plot": str(plot)}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

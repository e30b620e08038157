# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 08 — Training: the loop that turns the parts into a learner
#
# You now own every part of a deep-learning framework's core: tensors (01), activations
# (02), layers (03), losses (04), data loaders (05), autograd (06) and optimizers (07). This
# module assembles them into the thing all of that was for: a **training loop** that takes a
# randomly initialised network and makes it good at a task — and the tools around the loop
# that every real training run needs: metrics, a progress bar, a history of the run that
# plots itself, **Dropout**, **gradient clipping** and **checkpoints** that can be loaded
# without trusting the file.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - write the five-line anatomy of a training step (`zero_grad → forward → loss → backward
#   → step`, plus optional clipping) and say what goes wrong if any line is missing or
#   misplaced;
# - separate **training** from **evaluation** (`model.train()`/`model.eval()`, `no_grad`),
#   and compute metrics correctly over batches of different sizes;
# - build `fit`, a small but complete training loop with a text progress bar, a per-epoch
#   `History` and learning-curve plots; read **overfitting** off those curves;
# - derive **inverted dropout** (why survivors are scaled by 1/(1−p)) and register its
#   backward rule with module 06's autograd — a new op, added without touching old code;
# - implement `clip_grad_norm_` exactly as PyTorch does;
# - save and load checkpoints in a **safe format** (npz + JSON, never pickle), so that a
#   run resumes bit for bit;
# - train an MLP on XOR and on the digits (> 92% test accuracy in a few seconds; we get
#   about 97%), and measure where the time goes (data, forward, backward, step) and what
#   the memory is spent on (activations versus parameters).
#
# ## Prerequisites
#
# Modules 01–07: `Tensor`, `apply` and `manual_seed` (01), `nn.Module`, `Linear`,
# `Sequential`, `ReLU`, `state_dict` (03), `CrossEntropyLoss` (04), `Digits`, `DataLoader`,
# `TensorDataset` (05), `backward`, `no_grad`, `backward_rule`, `gradcheck` (06), `SGD`,
# `Adam`, the schedulers and optimizer `state_dict`s (07).
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/training.py` when you run `tito export 08`
# (or `tito test module 08`). `tinytorch.nn` re-exports `Dropout`, `tinytorch.nn.functional`
# re-exports `dropout`, `tinytorch.nn.utils` has `clip_grad_norm_`, and `tinytorch.save` /
# `tinytorch.load` are the checkpoint functions — PyTorch's names. Fill in the cells with
# `# YOUR CODE HERE`, then run the check cell right below each one.

# %%
#| default_exp training

# %%
import io
import math
import os
import sys
import tempfile
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch as tt
from tinytorch import nn
from tinytorch.autograd import gradcheck, topological_order
from tinytorch.data import DataLoader, Digits, TensorDataset, stratified_split
from tinytorch.optim import SGD, Adam
from tinytorch.optim.lr_scheduler import CosineAnnealingLR

# %% [markdown]
# ## 1. The idea: a loop around five lines
#
# Training minimises the average loss over the training set,
#
# $$\min_\theta \; \mathcal{L}(\theta) = \frac{1}{N}\sum_{i=1}^{N} \ell\big(f_\theta(x_i), y_i\big),$$
#
# but never computes it exactly: one **step** estimates its gradient on a **mini-batch** of
# B examples and moves the parameters a little against it. An **epoch** is one pass over
# the training set (N/B steps). Everything we built so far has a place in one step:
#
# | line | what it does | module |
# |---|---|---|
# | `optimizer.zero_grad()` | forget the previous step's gradients (`backward` *accumulates*) | 07 |
# | `output = model(x)` | forward pass; autograd records the graph | 03, 01 |
# | `loss = loss_fn(output, y)` | one number: how wrong the batch is | 04 |
# | `loss.backward()` | ∂loss/∂θ for every parameter, into `.grad` | 06 |
# | `clip_grad_norm_(params, c)` | optional: cap the gradient's length (section 8) | 08 |
# | `optimizer.step()` | θ ← θ − update(grad) | 07 |
#
# Around the step sit the things that make training *observable* and *safe*: metrics
# averaged over the epoch, an evaluation on held-out data in **eval mode** without
# recording a graph, a history of every epoch, a progress bar, checkpoints. Here is the
# loop as a picture.

# %%
def draw_loop(ax):
    """The training loop as a cycle of boxes (matplotlib only)."""
    steps = ["zero_grad()", "forward\nmodel(x)", "loss\nloss_fn(out, y)", "backward()",
             "clip (optional)", "step()"]
    angles = np.linspace(np.pi / 2, np.pi / 2 - 2 * np.pi, len(steps), endpoint=False)
    pos = [(1.6 * np.cos(a), 1.1 * np.sin(a)) for a in angles]
    for (x, y), label in zip(pos, steps):
        ax.text(x, y, label, ha="center", va="center", fontsize=9,
                bbox=dict(boxstyle="round,pad=0.4", fc="#e8f0fe", ec="#4a6fa5"))
    for i in range(len(steps)):
        (x0, y0), (x1, y1) = pos[i], pos[(i + 1) % len(steps)]
        ax.annotate("", xy=(x0 + 0.78 * (x1 - x0), y0 + 0.78 * (y1 - y0)),
                    xytext=(x0 + 0.22 * (x1 - x0), y0 + 0.22 * (y1 - y0)),
                    arrowprops=dict(arrowstyle="->", color="#4a6fa5"))
    ax.text(0, 0.15, "one step per mini-batch", ha="center", fontsize=9)
    ax.text(0, -0.2, "one epoch = N / B steps,\nthen evaluate (eval mode, no_grad)",
            ha="center", fontsize=8, color="#555555")
    ax.set_xlim(-2.4, 2.4)
    ax.set_ylim(-1.6, 1.6)
    ax.axis("off")


fig, ax = plt.subplots(figsize=(6.5, 4))
draw_loop(ax)
ax.set_title("The training loop")
fig.tight_layout()
plt.show()

# %% [markdown]
# Each line is a classic bug when it is missing. Without `zero_grad`, gradients of all
# previous steps pile up in `.grad` and the steps grow without bound. Calling `step` before
# `backward` updates with the *previous* batch's gradients. Evaluating in train mode
# leaves Dropout on, so the measured accuracy is noisy and too low. Evaluating *with* grad
# recording builds a graph nobody will use, which costs time and memory.
#
# The package file starts here: imports and the public names.

# %%
#| export
"""Training (module 08): metrics, the training step and loop, a text progress bar, a
History that plots itself, Dropout, gradient clipping and safe checkpoints (npz + JSON)."""
import json
import math
import os
import sys
import time
import zipfile

import numpy as np

from tinytorch._tensor import Tensor, apply, rand, stack, tensor
from tinytorch.autograd import backward_rule, no_grad
from tinytorch.nn.layers import Module

__all__ = [
    "accuracy", "confusion_matrix", "METRICS",
    "train_step", "train_epoch", "evaluate", "fit", "ProgressBar", "History",
    "dropout", "Dropout", "clip_grad_norm_", "clip_grad_value_", "save", "load",
]


def _numpy(x):
    """The values of a Tensor (or anything array-like) as a numpy array."""
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def _batch_size(targets):
    """How many examples a batch holds: the length of its targets."""
    return int(_numpy(targets).shape[0]) if np.ndim(_numpy(targets)) else 1


def _optimizer_params(optimizer):
    """Every parameter an optimizer updates, in group order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


# %% [markdown]
# ## 2. Metrics: accuracy and the confusion matrix
#
# The loss is what the optimizer needs; people want a number they can read. For
# classification that is the **accuracy**, the fraction of examples whose predicted class
# is the true one. A classifier's output for a batch is a matrix of **logits**, shape
# `(N, C)` (or `(N, C, d1, ...)` for per-position classes, as in module 04); the predicted
# class is the position of the largest logit along dimension 1 — softmax is monotonic, so
# it never changes the argmax and we do not need to apply it. A binary classifier with one
# logit per example (module 04's `BCEWithLogitsLoss`) predicts class 1 when the logit is
# positive, i.e. when σ(logit) > 0.5; its output has the same shape as its 0/1 targets.
#
# Accuracy hides *which* mistakes the model makes. The **confusion matrix** `M` counts them:
# `M[t, p]` is the number of examples of true class `t` predicted as `p`. The diagonal is
# what is right; a bright off-diagonal cell (a "4" read as a "9") tells you what to look at.
#
# Write both, in numpy (metrics are bookkeeping, not part of the graph):
#
# - `accuracy(output, target)` → Python float. Same shapes: binary rule `output > 0`
#   against `target > 0.5`. Otherwise `output` must have exactly one more dimension than
#   `target` (else `ValueError` naming both shapes), and the prediction is the argmax over
#   axis 1. An empty batch is a `ValueError`.
# - `confusion_matrix(pred, target, num_classes=None)` → int64 numpy array `(C, C)`, rows =
#   true class. `pred` holds class indices; `C` defaults to `max(pred, target) + 1`.

# %% nbgrader={"grade": false, "grade_id": "metrics", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def accuracy(output, target):
    """Fraction of correct predictions, a Python float (a metric: no gradient).

    output (N, C, ...) of class scores with integer target (N, ...): argmax over dim 1.
    output and target of the same shape: binary logits, predicted class = output > 0.
    """
    # Hints: out, tgt = _numpy(output), _numpy(target); compare shapes; `out.argmax(axis=1)`;
    # `correct.mean()` of a boolean array is the fraction of True.
    ### BEGIN SOLUTION
    out, tgt = _numpy(output), _numpy(target)
    if out.shape == tgt.shape:
        correct = (out > 0) == (tgt > 0.5)
    elif out.ndim == tgt.ndim + 1 and out.shape[:1] + out.shape[2:] == tgt.shape:
        correct = out.argmax(axis=1) == tgt
    else:
        raise ValueError(f"accuracy: output of shape {out.shape} does not fit target of shape "
                         f"{tgt.shape}; expected class scores (N, C, ...) with targets (N, ...), "
                         f"or binary logits of the target's shape")
    if correct.size == 0:
        raise ValueError("accuracy of an empty batch is undefined")
    return float(correct.mean())
    ### END SOLUTION


def confusion_matrix(pred, target, num_classes=None):
    """(C, C) int64 counts: entry [t, p] = how many examples of true class t were predicted p."""
    # Hint: with flat integer arrays p and t, np.bincount(t * C + p, minlength=C * C)
    # counts every (t, p) pair in one pass; reshape to (C, C).
    ### BEGIN SOLUTION
    p = _numpy(pred).astype(np.int64).ravel()
    t = _numpy(target).astype(np.int64).ravel()
    if p.shape != t.shape:
        raise ValueError(f"confusion_matrix: {p.size} predictions but {t.size} targets")
    if num_classes is None:
        num_classes = int(max(p.max(initial=-1), t.max(initial=-1))) + 1
    c = int(num_classes)
    if p.size and (min(p.min(), t.min()) < 0 or max(p.max(), t.max()) >= c):
        raise ValueError(f"confusion_matrix: class indices must lie in [0, {c})")
    return np.bincount(t * c + p, minlength=c * c).reshape(c, c).astype(np.int64)
    ### END SOLUTION


METRICS = {"accuracy": accuracy}


def _resolve_metrics(metrics):
    """{name: fn(output, target) -> float} from names in METRICS, callables, or a dict."""
    if metrics is None:
        return {}
    if isinstance(metrics, dict):
        return dict(metrics)
    if isinstance(metrics, str) or callable(metrics):
        metrics = (metrics,)
    out = {}
    for m in metrics:
        if isinstance(m, str):
            if m not in METRICS:
                raise ValueError(f"unknown metric {m!r}; known: {sorted(METRICS)} (or pass a function)")
            out[m] = METRICS[m]
        elif callable(m):
            out[getattr(m, "__name__", f"metric{len(out)}")] = m
        else:
            raise TypeError(f"a metric is a name or a function, not {type(m).__name__}")
    return out


# %% nbgrader={"grade": true, "grade_id": "test-metrics", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_logits = np.array([[2.0, 1.0, 0.1], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [4.0, 4.5, 0.0]], np.float32)
_t = np.array([0, 1, 0, 0])
assert accuracy(tt.tensor(_logits), tt.tensor(_t)) == 0.5
assert isinstance(accuracy(tt.tensor(_logits), tt.tensor(_t)), float)
assert accuracy(tt.tensor([-1.0, 2.0, 0.5]), tt.tensor([0.0, 1.0, 0.0])) == 2 / 3
_seq = np.random.default_rng(0).standard_normal((2, 5, 7))  # (N, C, L) with targets (N, L)
_seq_t = np.random.default_rng(1).integers(0, 5, (2, 7))
assert accuracy(_seq, _seq_t) == float((_seq.argmax(1) == _seq_t).mean())
try:
    accuracy(tt.tensor(_logits), tt.tensor([0, 1]))
    raise AssertionError("mismatched shapes must raise ValueError")
except ValueError:
    pass
_cm = confusion_matrix(np.array([0, 2, 2, 1, 0]), np.array([0, 1, 2, 1, 2]), num_classes=3)
assert _cm.dtype == np.int64 and _cm.tolist() == [[1, 0, 0], [0, 1, 1], [1, 0, 1]], _cm
assert confusion_matrix([1, 1], [1, 1]).shape == (2, 2)
print("✓ accuracy and confusion_matrix")

# %% [markdown]
# ## 3. One training step
#
# `train_step(model, loss_fn, optimizer, inputs, targets, clip=None)` is the table of
# section 1, line by line:
#
# 1. `optimizer.zero_grad()`;
# 2. `output = model(inputs)`, `loss = loss_fn(output, targets)`;
# 3. `loss.backward()`;
# 4. if `clip` is not None: `clip_grad_norm_(_optimizer_params(optimizer), clip)` (you
#    write it in section 8; the name is looked up when the line runs);
# 5. `optimizer.step()`;
# 6. return `(loss.item(), output.detach())`: the loss as a plain float (holding the
#    tensor would keep the whole graph of the step alive) and the output without history,
#    for the metrics.
#
# Why zero first and not last? Because between `backward` and the next step you may still
# want to look at the gradients — log their norm, clip them, check them against PyTorch
# (this module's tests do exactly that). After `train_step` returns, every parameter's
# `.grad` still holds the gradient of *this* step.

# %% nbgrader={"grade": false, "grade_id": "train-step", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def train_step(model, loss_fn, optimizer, inputs, targets, clip=None):
    """One optimisation step on one batch: zero_grad, forward, loss, backward, (clip), step.

    Returns (loss as a Python float, the model's output detached from the graph).
    """
    ### BEGIN SOLUTION
    optimizer.zero_grad()
    output = model(inputs)
    loss = loss_fn(output, targets)
    loss.backward()
    if clip is not None:
        clip_grad_norm_(_optimizer_params(optimizer), clip)
    optimizer.step()
    return loss.item(), output.detach()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-train-step", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# Linear regression, checked against the closed-form gradient of the mean squared error.
_rng = np.random.default_rng(0)
_X, _Y = _rng.standard_normal((8, 3)), _rng.standard_normal((8, 1))
_lin = nn.Linear(3, 1, dtype=tt.float64)
_W0, _b0 = _lin.weight.numpy().copy(), _lin.bias.numpy().copy()
_opt = SGD(_lin.parameters(), lr=0.1)
_loss, _out = train_step(_lin, nn.MSELoss(), _opt, tt.tensor(_X), tt.tensor(_Y))
_err = _X @ _W0.T + _b0 - _Y
assert isinstance(_loss, float) and abs(_loss - float((_err ** 2).mean())) < 1e-12
assert _out.grad_fn is None and np.allclose(_out.numpy(), _X @ _W0.T + _b0)
_gW, _gb = 2 * _err.T @ _X / 8, 2 * _err.sum(0) / 8
assert np.allclose(_lin.weight.grad.numpy(), _gW), "after the step, .grad holds this step's gradient"
assert np.allclose(_lin.weight.numpy(), _W0 - 0.1 * _gW) and np.allclose(_lin.bias.numpy(), _b0 - 0.1 * _gb)
_W1, _b1 = _lin.weight.numpy().copy(), _lin.bias.numpy().copy()
train_step(_lin, nn.MSELoss(), _opt, tt.tensor(_X), tt.tensor(_Y))
_err1 = _X @ _W1.T + _b1 - _Y
assert np.allclose(_lin.weight.grad.numpy(), 2 * _err1.T @ _X / 8), \
    "the second step's gradient must not include the first one: zero_grad first"
print("✓ train_step")

# %% [markdown]
# ## 4. Epochs, training mode and evaluation mode
#
# **`train_epoch(model, loss_fn, optimizer, loader, clip=None, metrics=("accuracy",),
# progress=None)`** runs one pass: put the model in training mode (`model.train()`), then
# for every `(inputs, targets)` batch of `loader` call `train_step` and accumulate the loss
# and each metric. Return the epoch's means as a dict `{"loss": ..., "accuracy": ...}`.
# If `progress` is a `ProgressBar` (section 5), call `progress.update(1, loss=loss)` after
# each step.
#
# The mean must be over **examples**, not batches. The last batch of an epoch is often
# shorter (1,438 digits in batches of 32 leave 30), and a plain mean of per-batch values
# would give its 30 examples the weight of 32. So weight each batch's value by its size,
# `n = _batch_size(targets)`, and divide the sums by the total count. (The per-batch loss
# is itself a mean over the batch — `reduction="mean"` — which is what makes the weighted
# mean exact.) An epoch without batches is a `ValueError`.
#
# **`evaluate(model, loader, loss_fn=None, metrics=("accuracy",))`** measures without
# learning. Two switches, and they are different things:
#
# - `model.eval()` changes what layers *compute*: Dropout (section 7) becomes the identity,
#   BatchNorm (module 09) uses its running statistics;
# - `no_grad()` changes what autograd *records*: nothing, so no graph is built and no
#   activations are kept for a backward pass that will never happen.
#
# Evaluation needs both. Remember whether the model was training (`model.training`) and
# restore that mode at the end — even if an exception escapes (`try`/`finally`), so that a
# failed evaluation does not silently leave Dropout switched off for the rest of training.
# Return the same kind of dict (with `"loss"` only when a `loss_fn` is given).

# %% nbgrader={"grade": false, "grade_id": "epochs", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def train_epoch(model, loss_fn, optimizer, loader, clip=None, metrics=("accuracy",), progress=None):
    """One pass over `loader` in training mode. Returns {"loss": mean, <metric>: mean, ...},
    means over examples (each batch weighted by its size)."""
    metric_fns = _resolve_metrics(metrics)
    ### BEGIN SOLUTION
    model.train()
    totals = dict.fromkeys(["loss", *metric_fns], 0.0)
    count = 0
    for inputs, targets in loader:
        loss, output = train_step(model, loss_fn, optimizer, inputs, targets, clip=clip)
        n = _batch_size(targets)
        totals["loss"] += loss * n
        for name, fn in metric_fns.items():
            totals[name] += fn(output, targets) * n
        count += n
        if progress is not None:
            progress.update(1, loss=loss)
    if count == 0:
        raise ValueError("train_epoch: the loader yielded no batches")
    return {name: total / count for name, total in totals.items()}
    ### END SOLUTION


def evaluate(model, loader, loss_fn=None, metrics=("accuracy",)):
    """Mean loss (if loss_fn is given) and metrics over `loader`, in eval mode and without
    recording a graph; the model's previous mode is restored afterwards."""
    metric_fns = _resolve_metrics(metrics)
    ### BEGIN SOLUTION
    was_training = model.training
    model.eval()
    names = (["loss"] if loss_fn is not None else []) + list(metric_fns)
    totals = dict.fromkeys(names, 0.0)
    count = 0
    try:
        with no_grad():
            for inputs, targets in loader:
                output = model(inputs)
                n = _batch_size(targets)
                if loss_fn is not None:
                    totals["loss"] += loss_fn(output, targets).item() * n
                for name, fn in metric_fns.items():
                    totals[name] += fn(output, targets) * n
                count += n
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("evaluate: the loader yielded no batches")
    return {name: total / count for name, total in totals.items()}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-epochs", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
class _Spy(nn.Module):
    """Records the mode and grad mode of every forward call."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.calls = []

    def forward(self, x):
        self.calls.append((self.training, tt.is_grad_enabled()))
        return self.fc(x)


tt.manual_seed(0)
_spy = _Spy()
_xs, _ys = tt.randn(10, 4), tt.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
_batches = [(_xs[:4], _ys[:4]), (_xs[4:8], _ys[4:8]), (_xs[8:], _ys[8:])]  # sizes 4, 4, 2
_before = [p.numpy().copy() for p in _spy.parameters()]
_spy.eval()
_res = evaluate(_spy, _batches, nn.CrossEntropyLoss())
assert all(c == (False, False) for c in _spy.calls) and not _spy.training, "eval mode, no_grad, mode restored"
assert all(np.array_equal(a, p.numpy()) for a, p in zip(_before, _spy.parameters())), "evaluate must not train"
with tt.no_grad():
    _full = _spy.fc(_xs)
assert abs(_res["loss"] - nn.CrossEntropyLoss()(_full, _ys).item()) < 1e-6, "weight each batch by its size"
assert abs(_res["accuracy"] - accuracy(_full, _ys)) < 1e-12
_spy.train()
evaluate(_spy, _batches, metrics=())
assert _spy.training, "evaluate must restore training mode"
_spy.calls.clear()
_spy.eval()
_tr = train_epoch(_spy, nn.CrossEntropyLoss(), SGD(_spy.parameters(), lr=0.1), _batches)
assert set(_tr) == {"loss", "accuracy"} and all(c == (True, True) for c in _spy.calls) and len(_spy.calls) == 3
assert not all(np.array_equal(a, p.numpy()) for a, p in zip(_before, _spy.parameters()))
print("✓ train_epoch and evaluate")

# %% [markdown]
# ## 5. Seeing the run: a progress bar and a history
#
# A run of a few minutes should show that it is alive. A **text progress bar** is one line
# that is redrawn in place: the carriage return `"\r"` moves the cursor back to the start of
# the line without starting a new one, so the next write overwrites it. We write our own
# (no `tqdm` dependency); the part for you is the text of the line. `render()` returns
#
# ```
# epoch 2/10 [============..................] 18/45 loss 0.4123
# ```
#
# i.e. the parts joined by single spaces: the prefix (left out when empty), the bar — `[`,
# then `filled = int(width * n / total)` `=` signs and `width - filled` dots, then `]` —
# then `n/total`, then each postfix entry as `name value`, floats with 4 decimals
# (`f"{value:.4f}"`), anything else with `str`. With an unknown total (`total=None`: a
# loader without a length) the bar is all dots and the count reads `n/?`. `update` redraws
# only when the bar's look changes, so a long epoch writes a few dozen lines, not thousands.
#
# A **History** keeps one record per epoch: `history["train_loss"]` is a list with one
# value per epoch, likewise `val_loss`, `train_accuracy`, `lr`, `time`. `History.plot`
# draws the learning curves: for each quantity (`loss`, then each metric), one panel with
# its `train_` and `val_` curves against the epoch number 1, 2, ... . These curves are the
# most important diagnostic of a training run (section 7 shows why). Write `plot` with
# matplotlib's object-oriented API, imported *inside* the method so that `import tinytorch`
# never needs a display or even matplotlib: `from matplotlib.figure import Figure`,
# `fig = Figure(figsize=(4.5 * k, 3.4))`, `axes = fig.subplots(1, k, squeeze=False)[0]`,
# then on each axis `plot(epochs, values, marker=".", label=...)`, `set_title(quantity)`,
# `set_xlabel("epoch")`, `legend()`. With a `path`, save the figure there as a PNG
# (`fig.savefig(path, dpi=100)`). Return the figure (a notebook displays it).

# %% nbgrader={"grade": false, "grade_id": "progress-history", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class ProgressBar:
    """A one-line text progress bar, redrawn in place with "\\r" (a tiny tqdm)."""

    def __init__(self, total, prefix="", width=30, file=None, enabled=True):
        self.total = None if total is None else int(total)
        self.prefix = str(prefix)
        self.width = int(width)
        self.file = file          # None: sys.stdout at the time of writing
        self.enabled = bool(enabled)
        self.n = 0
        self.postfix = {}
        self._drawn = None        # the bar's look when last drawn
        self._last_len = 0

    def render(self):
        """The line: "prefix [====......] n/total name value ..." (see the notebook)."""
        ### BEGIN SOLUTION
        if self.total:
            filled = min(self.width, max(0, int(self.width * self.n / self.total)))
        else:
            filled = self.width if self.total == 0 else 0
        parts = [self.prefix] if self.prefix else []
        parts.append("[" + "=" * filled + "." * (self.width - filled) + "]")
        parts.append(f"{self.n}/{'?' if self.total is None else self.total}")
        for name, value in self.postfix.items():
            parts.append(f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}")
        return " ".join(parts)
        ### END SOLUTION

    def _write(self, text):
        out = sys.stdout if self.file is None else self.file
        out.write(text)
        out.flush()

    def _look(self):
        if not self.total:
            return self.n
        return int(self.width * self.n / self.total), self.n >= self.total

    def update(self, n=1, **postfix):
        """Advance by n steps, remember the postfix values, redraw if the bar changed."""
        self.n += n
        self.postfix.update(postfix)
        if self.enabled and self._look() != self._drawn:
            self._drawn = self._look()
            line = self.render()
            self._write("\r" + line + " " * max(0, self._last_len - len(line)))
            self._last_len = len(line)

    def close(self, message=None):
        """Finish the line (replacing the bar by `message` if given) and start a new one."""
        if self.enabled:
            line = self.render() if message is None else str(message)
            self._write("\r" + line + " " * max(0, self._last_len - len(line)) + "\n")
            self._last_len = 0


class History:
    """What happened in each epoch of a run: history["train_loss"] -> one value per epoch."""

    def __init__(self):
        self.history = {}

    def log(self, **values):
        """Append one epoch's record; a quantity missing from it gets nan for that epoch."""
        n = len(self)
        for name in values:
            self.history.setdefault(name, [math.nan] * n)
        for name, column in self.history.items():
            column.append(float(values[name]) if name in values else math.nan)

    def __len__(self):
        return max((len(v) for v in self.history.values()), default=0)

    def __getitem__(self, name):
        return self.history[name]

    def __contains__(self, name):
        return name in self.history

    def keys(self):
        return self.history.keys()

    def best(self, name="val_loss", mode="min"):
        """(epoch number counted from 1, value) of the best epoch for `name`."""
        values = np.asarray(self.history[name], dtype=np.float64)
        i = int(np.nanargmin(values) if mode == "min" else np.nanargmax(values))
        return i + 1, float(values[i])

    def quantities(self):
        """Names plotted together: "loss", then each metric (train_/val_ prefixes removed)."""
        names = []
        for key in self.history:
            for prefix in ("train_", "val_"):
                if key.startswith(prefix) and key[len(prefix):] not in names:
                    names.append(key[len(prefix):])
        return sorted(names, key=lambda q: q != "loss")

    def state_dict(self):
        """Plain data (saveable with tinytorch.save)."""
        return {name: list(column) for name, column in self.history.items()}

    def load_state_dict(self, state_dict):
        self.history = {name: [float(v) for v in column] for name, column in state_dict.items()}

    def __repr__(self):
        last = {k: round(v[-1], 4) for k, v in self.history.items()} if len(self) else {}
        return f"History({len(self)} epochs, last: {last})"

    def plot(self, path=None):
        """Learning curves, one panel per quantity (loss, then each metric), train and val
        against the epoch; saved as a PNG at `path` if given. Returns the matplotlib Figure."""
        # Hints: quantities = self.quantities(); epochs = np.arange(1, len(self) + 1); plot
        # self.history[f"{split}_{q}"] for split in ("train", "val") when it is in self.
        ### BEGIN SOLUTION
        from matplotlib.figure import Figure

        quantities = self.quantities()
        if not quantities:
            raise ValueError("History.plot: nothing to plot yet (no train_/val_ records)")
        fig = Figure(figsize=(4.5 * len(quantities), 3.4))
        axes = fig.subplots(1, len(quantities), squeeze=False)[0]
        epochs = np.arange(1, len(self) + 1)
        for ax, q in zip(axes, quantities):
            for split in ("train", "val"):
                key = f"{split}_{q}"
                if key in self:
                    ax.plot(epochs, self.history[key], marker=".", label=split)
            ax.set_title(q)
            ax.set_xlabel("epoch")
            ax.legend()
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=100)
        return fig
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-progress-history", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_bar = ProgressBar(45, prefix="epoch 2/10", width=30)
_bar.n, _bar.postfix = 18, {"loss": 0.41234, "note": "hi"}
assert _bar.render() == "epoch 2/10 [============..................] 18/45 loss 0.4123 note hi", _bar.render()
assert ProgressBar(4, width=4).render() == "[....] 0/4"
_buf = io.StringIO()
_bar = ProgressBar(100, width=10, file=_buf)
for _ in range(100):
    _bar.update(1, loss=1.0)
_bar.close("done")
assert _buf.getvalue().count("\r") <= 12 and _buf.getvalue().endswith("done" + " " * (len(_bar.render()) - 4) + "\n")
_silent = io.StringIO()
_quiet = ProgressBar(10, file=_silent, enabled=False)
_quiet.update(5)
_quiet.close()
assert _silent.getvalue() == ""
_h = History()
_h.log(train_loss=1.0, train_accuracy=0.5, lr=0.1)
_h.log(train_loss=0.5, train_accuracy=0.8, val_loss=0.7, val_accuracy=0.75, lr=0.1)
assert len(_h) == 2 and np.isnan(_h["val_loss"][0]) and _h.best("train_loss") == (2, 0.5)
assert _h.quantities() == ["loss", "accuracy"]
_fig = _h.plot()
assert len(_fig.axes) == 2 and [a.get_title() for a in _fig.axes] == ["loss", "accuracy"]
assert [len(a.lines) for a in _fig.axes] == [2, 2]
with tempfile.TemporaryDirectory() as _d:
    _h.plot(os.path.join(_d, "curves.png"))
    with open(os.path.join(_d, "curves.png"), "rb") as _f:
        assert _f.read(8) == b"\x89PNG\r\n\x1a\n", "plot(path) must write a PNG file"
print("✓ ProgressBar and History")

# %% [markdown]
# ## 6. `fit`: the whole loop
#
# `fit(model, loss_fn, optimizer, train_loader, val_loader=None, epochs=1, scheduler=None,
# clip=None, metrics=("accuracy",), progress=True, history=None)` trains for `epochs`
# epochs and returns a `History`. For each epoch:
#
# 1. make a `ProgressBar(_length(train_loader), prefix=f"epoch {e}/{last}",
#    enabled=progress)` and note the time (`time.perf_counter()`);
# 2. `train_epoch(...)` with that bar; record its results as `train_loss`,
#    `train_accuracy`, ...;
# 3. if there is a `val_loader`, `evaluate(...)` on it and record `val_loss`, ... ;
# 4. record the learning rate used in this epoch, `lr = optimizer.param_groups[0]["lr"]`,
#    *then* call `scheduler.step()` if a scheduler was given (schedules here count epochs,
#    as in module 07);
# 5. record the epoch number `epoch` and the seconds it took, `time`; `history.log(...)`
#    everything, and `bar.close(_summary(record, last))`, which turns the bar into a summary
#    line.
#
# Passing an existing `history` continues it: epochs are numbered on from `len(history)`,
# so a run resumed from a checkpoint (section 9) gets one continuous history.

# %% nbgrader={"grade": false, "grade_id": "fit", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _length(loader):
    """len(loader), or None for an iterable without a length."""
    try:
        return len(loader)
    except TypeError:
        return None


def _summary(record, last):
    """One line for the end of an epoch `record` (of `last` epochs): train and val numbers, time."""
    parts = [f"epoch {int(record['epoch'])}/{last}"]
    for split in ("train", "val"):
        values = [f"{k[len(split) + 1:]} {v:.4f}" for k, v in record.items() if k.startswith(split + "_")]
        if values:
            parts.append(f"{split}: " + " ".join(values))
    parts.append(f"{record['time']:.2f}s")
    return " | ".join(parts)


def fit(model, loss_fn, optimizer, train_loader, val_loader=None, epochs=1, scheduler=None,
        clip=None, metrics=("accuracy",), progress=True, history=None):
    """Train `model` for `epochs` epochs; returns the History (train_*, val_*, lr, time,
    epoch per epoch). progress=False prints nothing."""
    history = History() if history is None else history
    ### BEGIN SOLUTION
    first = len(history) + 1
    last = first + int(epochs) - 1
    for epoch in range(first, last + 1):
        bar = ProgressBar(_length(train_loader), prefix=f"epoch {epoch}/{last}", enabled=progress)
        start = time.perf_counter()
        train = train_epoch(model, loss_fn, optimizer, train_loader, clip=clip, metrics=metrics,
                            progress=bar)
        record = {f"train_{name}": value for name, value in train.items()}
        if val_loader is not None:
            val = evaluate(model, val_loader, loss_fn, metrics)
            record.update({f"val_{name}": value for name, value in val.items()})
        record["lr"] = optimizer.param_groups[0]["lr"]
        if scheduler is not None:
            scheduler.step()
        record["epoch"] = epoch
        record["time"] = time.perf_counter() - start
        history.log(**record)
        bar.close(_summary(record, last))
    return history
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-fit", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _xor_run(seed, epochs=5, progress=False):
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = Adam(model.parameters(), lr=0.05)
    data = [(tt.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]), tt.tensor([0, 1, 1, 0]))]
    hist = fit(model, nn.CrossEntropyLoss(), opt, data, val_loader=data, epochs=epochs,
               scheduler=CosineAnnealingLR(opt, T_max=epochs), progress=progress)
    return model, hist


_m1, _h1 = _xor_run(0)
_m2, _h2 = _xor_run(0)
assert isinstance(_h1, History) and len(_h1) == 5 and _h1["epoch"] == [1, 2, 3, 4, 5]
assert {"train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "time"} <= set(_h1.keys())
assert _h1["lr"][0] == 0.05 and _h1["lr"][1] < 0.05, "record the lr used, then step the scheduler"
assert _h1["train_loss"] == _h2["train_loss"], "same seed, same run"
assert _h1["val_loss"][-1] < _h1["val_loss"][0]
_h3 = fit(_m1, nn.CrossEntropyLoss(), Adam(_m1.parameters()), [(tt.zeros(1, 2), tt.tensor([0]))],
          epochs=2, progress=False, history=_h1)
assert _h3 is _h1 and _h1["epoch"][-2:] == [6, 7] and np.isnan(_h1["val_loss"][-1])
_captured = io.StringIO()
_old_stdout, sys.stdout = sys.stdout, _captured
try:
    _xor_run(0, epochs=2, progress=True)
    _xor_run(0, epochs=2, progress=False)
finally:
    sys.stdout = _old_stdout
_text = _captured.getvalue()
assert _text.count("\n") == 2 and "epoch 2/2" in _text and "val:" in _text, _text
print("✓ fit")

# %% [markdown]
# ### XOR: the smallest problem a linear model cannot solve
#
# XOR's four points — (0,0)→0, (0,1)→1, (1,0)→1, (1,1)→0 — cannot be separated by one
# straight line, so a linear classifier is stuck at 50–75% accuracy. One hidden layer of
# tanh units bends the boundary. We train full-batch (the "loader" is a list holding one
# batch: anything that yields `(inputs, targets)` pairs works) and draw the decision
# regions the network learned. `manual_seed` fixes the initial weights, so the run is the
# same every time.

# %%
tt.manual_seed(0)
xor_model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
xor_x = tt.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
xor_y = tt.tensor([0, 1, 1, 0])
xor_opt = Adam(xor_model.parameters(), lr=0.05)
xor_hist = fit(xor_model, nn.CrossEntropyLoss(), xor_opt, [(xor_x, xor_y)], epochs=150, progress=False)
print(f"XOR after {len(xor_hist)} epochs: loss {xor_hist['train_loss'][-1]:.4f}, "
      f"accuracy {evaluate(xor_model, [(xor_x, xor_y)])['accuracy']:.2f}")

_g = np.linspace(-0.5, 1.5, 201, dtype=np.float32)
_gx, _gy = np.meshgrid(_g, _g)
with tt.no_grad():
    _grid_logits = xor_model(tt.tensor(np.stack([_gx.ravel(), _gy.ravel()], 1))).numpy()
_p1 = np.exp(_grid_logits[:, 1] - np.logaddexp(_grid_logits[:, 0], _grid_logits[:, 1])).reshape(_gx.shape)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
_cs = axes[0].contourf(_gx, _gy, _p1, levels=20, cmap="RdBu_r", alpha=0.8)
axes[0].contour(_gx, _gy, _p1, levels=[0.5], colors="k")
axes[0].scatter(xor_x.numpy()[:, 0], xor_x.numpy()[:, 1], c=xor_y.numpy(), cmap="RdBu_r",
                edgecolors="k", s=120)
axes[0].set_title("XOR: P(class 1) and the decision boundary")
fig.colorbar(_cs, ax=axes[0])
axes[1].semilogy(xor_hist["epoch"], xor_hist["train_loss"])
axes[1].set_xlabel("epoch")
axes[1].set_title("training loss (log scale)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The black line (P = 0.5) bends around the points: the two tanh "half-planes" of the
# hidden layer are combined by the output layer into a band. The loss falls slowly at first
# (the initial random boundary is almost linear) and then quickly once the hidden units have
# specialised.
#
# ## 7. Overfitting, and Dropout
#
# A network with many parameters and few examples can **memorise** its training set: the
# training loss goes to zero while the loss on new data gets *worse*. The learning curves
# show it as a gap that opens between the train and validation curves. Let us provoke it:
# 120 training digits, a network with 85,000 parameters, many epochs. The validation set is
# carved out of the training side with module 05's `stratified_split`; the test set stays
# untouched until the very end (section 10), so that no decision we make is tuned to it.

# %%
_digits = Digits(train=True)
_images, _labels = _digits.data.numpy().reshape(-1, 64), _digits.targets.numpy()
_tr_idx, _va_idx = stratified_split(_labels, 0.2, 1)
_mu, _sd = _images[_tr_idx].mean(0), _images[_tr_idx].std(0) + 0.1  # statistics of the training side only
X_train, y_train = tt.tensor((_images[_tr_idx] - _mu) / _sd), tt.tensor(_labels[_tr_idx])
X_val, y_val = tt.tensor((_images[_va_idx] - _mu) / _sd), tt.tensor(_labels[_va_idx])
print(f"train {X_train.shape}, validation {X_val.shape}")


def small_run(drop_p, epochs=100, n=120):
    """A big MLP on n training digits, full batch; returns the History."""
    tt.manual_seed(0)
    layers = [nn.Linear(64, 256), nn.ReLU()]
    if drop_p:
        layers.append(Dropout(drop_p))  # written in the next section
    layers += [nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)]
    model = nn.Sequential(*layers)
    opt = Adam(model.parameters(), lr=1e-3)
    return fit(model, nn.CrossEntropyLoss(), opt, [(X_train[:n], y_train[:n])],
               val_loader=[(X_val, y_val)], epochs=epochs, progress=False)


hist_plain = small_run(0.0)
hist_plain.plot()
plt.show()
print(f"best validation loss {hist_plain.best('val_loss')[1]:.3f} at epoch {hist_plain.best('val_loss')[0]}, "
      f"final {hist_plain['val_loss'][-1]:.3f}; final train loss {hist_plain['train_loss'][-1]:.4f}")

# %% [markdown]
# The training loss heads to zero and the training accuracy to 100%: the network has
# memorised the 120 digits. The validation loss reaches its minimum early and then
# *climbs*, although the validation accuracy barely moves — the model keeps the same
# answers but grows ever more confident in its wrong ones, and cross-entropy punishes
# confidence in a wrong class without limit. The remedies: more data, a smaller model,
# stopping early (keep the checkpoint of the best validation epoch, section 9), weight
# decay (module 07) — and **dropout**.
#
# ### Dropout
#
# In training, dropout sets each activation to zero independently with probability `p`
# (Srivastava, Hinton et al., 2014). No unit can rely on any particular other unit being
# present, so the network cannot build the fragile co-adapted feature detectors that
# memorisation uses; it is like training an ensemble of 2^(units) thinned networks that
# share weights. At evaluation time we want the *average* of that ensemble, and the cheap
# approximation is to use all units with their expected contribution.
#
# Expected values tell us how to get there. With a keep-mask $m_i \sim \text{Bernoulli}(1-p)$,
#
# $$\mathbb{E}[m_i x_i] = (1-p)\,x_i .$$
#
# So a layer after dropout sees, on average, only $(1-p)$ of the signal it sees at test
# time without dropout. Either scale the activations by $(1-p)$ at **test** time (the
# original paper), or divide the survivors by $(1-p)$ at **training** time:
#
# $$\text{dropout}(x)_i = \frac{m_i}{1-p}\,x_i, \qquad \mathbb{E}\Big[\frac{m_i}{1-p}x_i\Big] = x_i .$$
#
# This **inverted dropout** is what PyTorch (and everyone) does: evaluation is then the plain
# identity — no extra work at inference, and a model can be exported without knowing
# that dropout was ever used. The values in training are 0 or $x/(1-p)$, never anything else.
#
# Gradients: the op is $y = x \odot M$ with the fixed mask $M = m/(1-p)$, so
# $\partial L/\partial x = \partial L/\partial y \odot M$ — dropped units get no gradient,
# survivors get it scaled by the same $1/(1-p)$.
#
# Dropout is a **new op**. It goes through module 01's `apply` with the op name
# `"dropout"` and the scaled mask in its attrs, and module 06's engine learns to
# differentiate it from one registered rule — `@backward_rule("dropout")` — without any
# change to modules 01 or 06. Write:
#
# - `dropout(input, p=0.5, training=True)`: `p` outside [0, 1] → `ValueError("dropout
#   probability has to be between 0 and 1, but got {p}")` (PyTorch's message; `_check_p(p)`
#   gives it); a non-floating input → `TypeError`. Not training, or `p == 0`: return
#   `input` itself. Otherwise draw the keep-mask from
#   tinytorch's global generator, `keep = rand(*input.shape).numpy() >= p` (so
#   `tt.manual_seed` makes it reproducible), make `mask` the float array
#   `keep / (1 - p)` in the input's dtype (all zeros when `p == 1`), and return
#   `apply("dropout", _dropout_forward, input, mask=mask, p=p)`.
# - `_dropout_backward(node, grad)`: one line, the rule above (the mask is
#   `node.attrs["mask"]`; return a one-element tuple).
# - `Dropout.__init__`: the same check of `p`, then store `self.p` as a float. Its `forward`
#   (given) passes `self.training`, so `model.eval()` switches every Dropout in a model off.

# %% nbgrader={"grade": false, "grade_id": "dropout", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_p(p):
    return f"dropout probability has to be between 0 and 1, but got {p}"


def _dropout_forward(x, mask, p):
    return x.numpy() * mask


def dropout(input, p=0.5, training=True):
    """Inverted dropout (torch.nn.functional.dropout): in training, zero each element with
    probability p and scale the others by 1/(1-p); otherwise return input unchanged."""
    ### BEGIN SOLUTION
    if not 0.0 <= p <= 1.0:
        raise ValueError(_check_p(p))
    if input.dtype.kind != "f":
        raise TypeError(f"dropout needs a floating point tensor, got {input.dtype}")
    if not training or p == 0:
        return input
    if p == 1:
        mask = np.zeros(input.shape, dtype=input.dtype)
    else:
        keep = rand(*input.shape).numpy() >= p
        mask = keep.astype(input.dtype) / input.dtype.type(1 - p)
    return apply("dropout", _dropout_forward, input, mask=mask, p=float(p))
    ### END SOLUTION


@backward_rule("dropout")
def _dropout_backward(node, grad):
    """y = x * mask (the mask already holds 0 or 1/(1-p)): dL/dx = dL/dy * mask."""
    ### BEGIN SOLUTION
    return (grad * node.attrs["mask"],)
    ### END SOLUTION


class Dropout(Module):
    """Randomly zero elements with probability p in training mode; identity in eval mode
    (torch.nn.Dropout)."""

    def __init__(self, p=0.5):
        super().__init__()
        ### BEGIN SOLUTION
        if not 0.0 <= p <= 1.0:
            raise ValueError(_check_p(p))
        self.p = float(p)
        ### END SOLUTION

    def forward(self, input):
        return dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


# %% nbgrader={"grade": true, "grade_id": "test-dropout", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_x = tt.randn(200, 50) + 3.0  # no zeros in the input
tt.manual_seed(1)
_y = dropout(_x, 0.3)
_ratio = _y.numpy() / _x.numpy()
assert np.all(np.isclose(_ratio, 0) | np.isclose(_ratio, 1 / 0.7)), "values are 0 or x/(1-p)"
assert abs((_ratio > 0).mean() - 0.7) < 0.02, "about 1-p of the elements survive"
tt.manual_seed(1)
assert np.array_equal(dropout(_x, 0.3).numpy(), _y.numpy()), "manual_seed reproduces the mask"
assert dropout(_x, 0.3, training=False) is _x and dropout(_x, 0.0) is _x
assert np.all(dropout(_x, 1.0).numpy() == 0)
for _bad in (-0.1, 1.5):
    for _make in (lambda p: dropout(_x, p), lambda p: Dropout(p)):
        try:
            _make(_bad)
            raise AssertionError(f"p={_bad} must raise ValueError")
        except ValueError:
            pass
_w = tt.randn(4, 6, requires_grad=True)
tt.manual_seed(3)
_out = dropout(_w, 0.5)
assert _out.grad_fn is not None and _out.grad_fn.op == "dropout"
_out.sum().backward()
assert np.array_equal(_w.grad.numpy(), (_out.numpy() != 0) * 2.0), "gradient = mask"
_x64 = tt.randn(3, 5, dtype=tt.float64, requires_grad=True)


def _fixed_mask_dropout(x):
    tt.manual_seed(7)  # the same mask on every call
    return dropout(x, 0.4)


assert gradcheck(_fixed_mask_dropout, (_x64,))
_layer = Dropout(0.25)
assert repr(_layer) == "Dropout(p=0.25)"
assert not np.array_equal(_layer(_x).numpy(), _x.numpy())
_layer.eval()
assert _layer(_x) is _x, "identity in eval mode"
print("✓ dropout")

# %% [markdown]
# Now the same small-data experiment with dropout (p = 0.5) after the first hidden layer:

# %%
hist_drop = small_run(0.5)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for _h, _name in [(hist_plain, "no dropout"), (hist_drop, "dropout 0.5")]:
    _l = axes[0].plot(_h["epoch"], _h["val_loss"], label=f"val, {_name}")[0]
    axes[0].plot(_h["epoch"], _h["train_loss"], "--", color=_l.get_color(), label=f"train, {_name}")
    axes[1].plot(_h["epoch"], _h["val_accuracy"], label=_name)
axes[0].set_title("loss")
axes[0].set_ylim(0, 2.5)
axes[1].set_title("validation accuracy")
for _ax in axes:
    _ax.set_xlabel("epoch")
    _ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
for _h, _name in [(hist_plain, "no dropout"), (hist_drop, "dropout 0.5")]:
    print(f"{_name:12s}: final train loss {_h['train_loss'][-1]:.4f}, final val loss "
          f"{_h['val_loss'][-1]:.3f}, final val accuracy {_h['val_accuracy'][-1]:.3f}")

# %% [markdown]
# Compare the printed numbers. Dropout keeps the training loss higher — the network is
# handicapped on purpose in every step — but on 120 examples it changes the validation
# curve little: no regulariser can supply the information that the missing examples would
# carry, and a two-layer MLP has few co-adapted features to break up. On this data the
# remedy that matters is **early stopping**: keep the model of the best validation epoch
# (`History.best` tells you which). Dropout earns its place in large networks trained long
# on lots of data; almost every transformer uses it (p = 0.1 after attention and in the
# MLP), and the digits model of section 10 uses a little.
#
# ## 8. Gradient clipping
#
# Sometimes one batch produces a huge gradient: a rare example with a large loss, a step
# onto a cliff of the loss surface (recurrent networks and transformers have them), a
# numerical accident. One such step can throw the parameters far away and undo hours of
# training. **Clipping by norm** bounds the step: treat all gradients of all parameters as one
# long vector $g$ and, if its length exceeds `max_norm`, shrink it to that length:
#
# $$\|g\| = \Big(\sum_{\text{params}} \sum_i |g_i|^q\Big)^{1/q}, \qquad
#   g \leftarrow g \cdot \min\Big(1, \frac{\text{max\_norm}}{\|g\| + 10^{-6}}\Big).$$
#
# The *direction* is kept and only the length is capped (the 1e-6 avoids dividing by 0);
# for $q = \infty$ the norm is the largest $|g_i|$. It acts on the gradients, between
# `backward` and `step`. PyTorch's `torch.nn.utils.clip_grad_norm_(parameters, max_norm,
# norm_type=2.0)` returns the total norm *before* clipping as a tensor — the most useful
# number to log when a run misbehaves.
#
# The picture: three gradient vectors and the ball of radius `max_norm`; the long one is
# pulled back onto the circle, the short ones pass unchanged.

# %%
fig, ax = plt.subplots(figsize=(4.2, 4.2))
ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, ls="--", color="gray"))
for _v, _c in [((2.4, 1.2), "C3"), ((0.5, 0.6), "C2"), ((-0.4, -0.7), "C0")]:
    _v = np.array(_v)
    _clipped = _v * min(1.0, 1.0 / np.linalg.norm(_v))
    ax.annotate("", xy=_v, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=_c, alpha=0.35))
    ax.annotate("", xy=_clipped, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=_c, lw=2))
ax.set_xlim(-1.5, 2.6)
ax.set_ylim(-1.5, 2.6)
ax.set_aspect("equal")
ax.set_title("clip_grad_norm_(max_norm=1): faint = before, bold = after", fontsize=9)
plt.show()

# %% [markdown]
# Write:
#
# - `clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False)`.
#   `parameters` is one Tensor or an iterable of them (given: `_grads`). With no gradients,
#   return `tensor(0.0)`. Otherwise, inside `no_grad()`: each gradient's own norm with
#   tensor ops (`g.abs().amax()` for `inf`, else `(g.abs() ** q).sum() ** (1 / q)`), then
#   the norm of those norms (`stack(norms)`, same formula) — this is exactly the norm of the
#   concatenated vector, without ever concatenating. If the total is not finite and
#   `error_if_nonfinite`, raise a `RuntimeError`. Then multiply every gradient in place
#   (`g.mul_(coef)`) by `coef = min(1, max_norm / (total + 1e-6))`, and return the total
#   norm (a 0-d Tensor).
# - `clip_grad_value_(parameters, clip_value)`: clamp every gradient element into
#   `[-clip_value, clip_value]` in place (`g.copy_(g.clamp(...))`). Simpler, but it changes
#   the direction of the gradient.

# %% nbgrader={"grade": false, "grade_id": "clip", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _grads(parameters):
    """The existing .grad tensors of `parameters` (one Tensor or an iterable of them)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together so that their total norm is at most max_norm
    (torch.nn.utils.clip_grad_norm_). Returns the total norm before clipping (0-d Tensor)."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    ### BEGIN SOLUTION
    if not grads:
        return tensor(0.0)
    with no_grad():
        if norm_type == math.inf:
            norms = [g.abs().amax() for g in grads]
            total = stack(norms).amax()
        else:
            norms = [(g.abs() ** norm_type).sum() ** (1.0 / norm_type) for g in grads]
            total = (stack(norms) ** norm_type).sum() ** (1.0 / norm_type)
        value = total.item()
        if error_if_nonfinite and not math.isfinite(value):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is "
                f"non-finite, so it cannot be clipped. To disable this error and scale the "
                f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = min(1.0, max_norm / (value + 1e-6))
        for g in grads:
            g.mul_(coef)
    return total
    ### END SOLUTION


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element into [-clip_value, clip_value], in place
    (torch.nn.utils.clip_grad_value_)."""
    grads = _grads(parameters)
    clip_value = float(clip_value)
    ### BEGIN SOLUTION
    with no_grad():
        for g in grads:
            g.copy_(g.clamp(-clip_value, clip_value))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-clip", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _params_with_grads(grads):
    params = []
    for g in grads:
        p = tt.zeros(*np.shape(g), dtype=tt.float64, requires_grad=True)
        p.grad = tt.tensor(np.array(g, dtype=np.float64))
        params.append(p)
    return params


_g = [np.array([[3.0, 0.0], [0.0, 0.0]]), np.array([4.0, 0.0, 0.0])]  # total 2-norm 5
_ps = _params_with_grads(_g)
_total = clip_grad_norm_(_ps, 1.0)
assert isinstance(_total, tt.Tensor) and abs(_total.item() - 5.0) < 1e-12
assert np.allclose(_ps[0].grad.numpy(), _g[0] / (5 + 1e-6)) and np.allclose(_ps[1].grad.numpy(), _g[1] / (5 + 1e-6))
_ps = _params_with_grads(_g)
clip_grad_norm_(iter(_ps), 10.0)
assert np.allclose(_ps[0].grad.numpy(), _g[0]), "below max_norm nothing changes"
_ps = _params_with_grads(_g)
assert abs(clip_grad_norm_(_ps, 2.0, norm_type="inf").item() - 4.0) < 1e-12
assert np.allclose(_ps[1].grad.numpy(), _g[1] * 2 / (4 + 1e-6))
_ps = _params_with_grads(_g)
assert abs(clip_grad_norm_(_ps[0], 1.0, norm_type=1).item() - 3.0) < 1e-12, "a single tensor works too"
assert clip_grad_norm_([tt.zeros(2, requires_grad=True)], 1.0).item() == 0.0
_ps = _params_with_grads([np.array([1.0, np.inf])])
try:
    clip_grad_norm_(_ps, 1.0, error_if_nonfinite=True)
    raise AssertionError("a non-finite norm must raise with error_if_nonfinite=True")
except RuntimeError:
    pass
_ps = _params_with_grads([np.array([-3.0, 0.5, 2.0])])
clip_grad_value_(_ps, 1.0)
assert _ps[0].grad.numpy().tolist() == [-1.0, 0.5, 1.0]
print("✓ clip_grad_norm_ and clip_grad_value_")

# %% [markdown]
# ## 9. Checkpoints, safely
#
# A checkpoint is everything needed to continue a run exactly where it stopped: the
# model's `state_dict` (module 03), the optimizer's `state_dict` (module 07: momentum
# buffers, Adam's moments and step counts, the learning rates), the scheduler's, the epoch
# and the history. Long runs crash, machines get preempted; checkpoints make that cheap.
#
# **Why not pickle?** `torch.save` writes Python's `pickle` format (inside a zip). Unpickling
# is not just reading data: a pickle is a small program for a stack machine, and one of its
# instructions calls an arbitrary Python callable with arbitrary arguments. Loading a
# downloaded checkpoint is therefore running a stranger's code. This is harmless here, but
# shows the mechanism:

# %%
import pickle


class Innocent:
    """Any class can tell pickle to call *anything* when it is loaded."""

    def __reduce__(self):
        return (print, ("this ran while LOADING the file — it could have been os.system(...)",))


_payload = pickle.dumps({"weights": [1.0, 2.0], "extra": Innocent()})
_ = pickle.loads(_payload)

# %% [markdown]
# PyTorch has since made `torch.load(weights_only=True)` the default, a restricted
# unpickler that only rebuilds tensors and plain containers; the Hugging Face ecosystem moved
# to **safetensors**, a JSON header plus raw tensor bytes. We do the same thing with what
# numpy already has:
#
# - **arrays** go into an `.npz` file, a zip of `.npy` files. `np.load(f,
#   allow_pickle=False)` reads raw numbers and refuses the one dtype (`object`) that would
#   need pickle;
# - the **structure** (nested dicts, lists, tuples, numbers, strings, None) goes into one
#   JSON string, stored in the same zip as a unicode array named `"header"`. JSON can only
#   describe data.
#
# `save(obj, f)` (given) calls `_pack(obj, arrays)`, which you write. It returns a JSON-able
# *description* of `obj` and puts every array into the dict `arrays`:
#
# | value | description |
# |---|---|
# | a `Tensor` | `{"tensor": key}`, with `arrays[key] = its numpy values` |
# | a numpy array (not of dtype object) | `{"ndarray": key}`, likewise |
# | `None`, `bool`, `int`, `float`, `str` (numpy scalars converted with `.item()`) | the value itself |
# | a `dict` (keys `str` or `int`, not bool) | `{"dict": [[key, description], ...]}` |
# | a `list` / `tuple` | `{"list": [...]}` / `{"tuple": [...]}` |
# | anything else | `TypeError` naming the path and the type |
#
# Dict items are stored as pairs because JSON object keys must be strings, and an optimizer
# state is keyed by integers (`{0: {...}, 1: {...}}`); tuples are tagged so that
# `betas=(0.9, 0.999)` comes back as a tuple. The `key` of an array is its **path**, e.g.
# `"model/0.weight"` or `"optimizer/state/3/exp_avg"` (pass `f"{path}/{key}"` and
# `f"{path}/{i}"` down the recursion; the top level's path is `""`), made unique with
# `_unique(arrays, path)` (given) — so `np.load` shows readable names.
#
# `_unpack(description, arrays)` is the inverse: tensors come back as `tensor(array)` (a
# copy, same dtype), arrays as numpy arrays, dicts, lists and tuples as themselves.

# %% nbgrader={"grade": false, "grade_id": "checkpoint", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
_FORMAT, _VERSION, _HEADER = "tinytorch-checkpoint", 1, "header"


def _unique(arrays, path):
    """A key for a new array: its path ("value" at the top level), made unique."""
    key = "arrays/" + (path.strip("/") or "value")
    base, i = key, 1
    while key in arrays:
        key, i = f"{base}#{i}", i + 1
    return key


def _pack(obj, arrays, path=""):
    """JSON-able description of obj; its tensors and arrays go into `arrays` (key -> array)."""
    ### BEGIN SOLUTION
    if isinstance(obj, Tensor):
        key = _unique(arrays, path)
        arrays[key] = np.array(obj.numpy(), order="C")  # a copy; keeps 0-d shapes
        return {"tensor": key}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"save: {path or 'the object'} is a numpy array of dtype object, which "
                            f"only pickle could store")
        key = _unique(arrays, path)
        arrays[key] = np.array(obj, order="C")
        return {"ndarray": key}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, dict):
        items = []
        for key, value in obj.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"save: dict keys must be str or int, got {key!r} at {path or 'the top level'}")
            items.append([key, _pack(value, arrays, f"{path}/{key}")])
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_pack(v, arrays, f"{path}/{i}") for i, v in enumerate(obj)]}
    raise TypeError(f"save: {path or 'the object'} is a {type(obj).__name__}; a checkpoint holds "
                    f"Tensors, numpy arrays, numbers, strings, None, and dicts, lists and tuples "
                    f"of them (anything else would need pickle)")
    ### END SOLUTION


def _unpack(desc, arrays):
    """The inverse of _pack."""
    ### BEGIN SOLUTION
    if isinstance(desc, dict):
        (kind, value), = desc.items()
        if kind == "tensor":
            return tensor(arrays[value])
        if kind == "ndarray":
            return np.array(arrays[value])
        if kind == "dict":
            return {key: _unpack(v, arrays) for key, v in value}
        if kind == "list":
            return [_unpack(v, arrays) for v in value]
        if kind == "tuple":
            return tuple(_unpack(v, arrays) for v in value)
        raise ValueError(f"load: unknown entry {kind!r} in the checkpoint's header")
    return desc
    ### END SOLUTION


def save(obj, f):
    """Save tensors, arrays and plain data (dicts, lists, tuples, numbers, strings, None) to
    `f` (a path or a binary file) as an .npz archive with a JSON header: no pickle (torch.save)."""
    arrays = {}
    structure = _pack(obj, arrays)
    header = json.dumps({"format": _FORMAT, "version": _VERSION, "structure": structure})
    payload = {_HEADER: np.array(header), **arrays}
    if hasattr(f, "write"):
        np.savez(f, **payload)
        return
    path = os.fspath(f)
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:  # write exactly `path` (np.savez would append ".npz")
        np.savez(handle, **payload)
    os.replace(tmp, path)  # atomic: a crash mid-save never destroys the previous checkpoint


def load(f):
    """Load what save() wrote; refuses pickled data (torch.load with weights_only=True)."""
    name = getattr(f, "name", f)
    try:
        archive = np.load(f, allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"load: {name} is not a tinytorch checkpoint and would need pickle to "
                         f"read ({exc}); tinytorch never unpickles") from exc
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"load: cannot read {name} as a tinytorch checkpoint (.npz): {exc}") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"load: {name} holds a single .npy array, not a tinytorch checkpoint")
    with archive:
        if _HEADER not in archive.files:
            raise ValueError(f"load: {name} is an .npz file without a tinytorch header; was it "
                             f"written by tinytorch.save?")
        header = json.loads(str(archive[_HEADER]))
        if header.get("format") != _FORMAT or header.get("version", 0) > _VERSION:
            raise ValueError(f"load: {name} has format {header.get('format')!r} version "
                             f"{header.get('version')!r}; this tinytorch reads {_FORMAT!r} up to "
                             f"version {_VERSION}")
        arrays = {key: archive[key] for key in archive.files if key != _HEADER}
    return _unpack(header["structure"], arrays)


# %% nbgrader={"grade": true, "grade_id": "test-checkpoint", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_obj = {"w": tt.tensor([[1.0, 2.0]]), "n": np.arange(3), 0: (0.9, 0.999), "k": [1, None, "s", True],
        "inf": float("inf"), "i64": tt.tensor([1, 2]), "d64": tt.tensor(np.ones(2))}
_arrays = {}
_desc = _pack(_obj, _arrays)
import json as _json
_json.dumps(_desc)  # the description is plain JSON
assert len(_arrays) == 4 and "arrays/w" in _arrays, sorted(_arrays)
_back = _unpack(_desc, _arrays)
assert list(_back) == ["w", "n", 0, "k", "inf", "i64", "d64"] and _back[0] == (0.9, 0.999)
assert isinstance(_back["w"], tt.Tensor) and _back["w"].tolist() == [[1.0, 2.0]]
assert isinstance(_back["n"], np.ndarray) and _back["k"] == [1, None, "s", True] and _back["inf"] == math.inf
assert _back["i64"].dtype == tt.int64 and _back["d64"].dtype == tt.float64
for _bad in ({"f": lambda x: x}, {(1, 2): 3}, np.array([object()])):
    try:
        _pack(_bad, {})
        raise AssertionError(f"{_bad!r} must be refused")
    except TypeError:
        pass
_buf = io.BytesIO()
save({"model": nn.Linear(3, 2).state_dict(), "step": 7}, _buf)
_buf.seek(0)
with np.load(_buf, allow_pickle=False) as _z:
    assert set(_z.files) == {"header", "arrays/model/weight", "arrays/model/bias"}
_buf.seek(0)
_ck = load(_buf)
assert _ck["step"] == 7 and _ck["model"]["weight"].shape == (2, 3)
print("✓ checkpoints")

# %% [markdown]
# ### Resuming exactly
#
# The test that matters: train 3 steps, save, build a *fresh* model and optimizer, load,
# train 3 more steps — the result must be bit-for-bit what 6 uninterrupted steps give.
# Anything the checkpoint forgets (Adam's step count, a momentum buffer, the learning rate
# after a schedule) breaks the equality.

# %%
def _make(seed):
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return model, Adam(model.parameters(), lr=1e-2)


_batches = [(X_train[i * 32:(i + 1) * 32], y_train[i * 32:(i + 1) * 32]) for i in range(6)]
_model, _opt = _make(0)
for _xb, _yb in _batches:
    train_step(_model, nn.CrossEntropyLoss(), _opt, _xb, _yb)
_reference = [p.numpy().copy() for p in _model.parameters()]

_model, _opt = _make(0)
for _xb, _yb in _batches[:3]:
    train_step(_model, nn.CrossEntropyLoss(), _opt, _xb, _yb)
_path = os.path.join(tempfile.mkdtemp(), "run.ckpt")
save({"model": _model.state_dict(), "optimizer": _opt.state_dict(), "step": 3}, _path)

_model, _opt = _make(123)  # different initial weights: everything must come from the file
_ck = load(_path)
_model.load_state_dict(_ck["model"])
_opt.load_state_dict(_ck["optimizer"])
for _xb, _yb in _batches[_ck["step"]:]:
    train_step(_model, nn.CrossEntropyLoss(), _opt, _xb, _yb)
print("resumed == uninterrupted, bit for bit:",
      all(np.array_equal(a, p.numpy()) for a, p in zip(_reference, _model.parameters())))
print(f"checkpoint file: {os.path.getsize(_path):,} bytes; parameters "
      f"{sum(p.nbytes for p in _model.parameters()):,} bytes, Adam's two moments twice that")

# %% [markdown]
# The file is about three times the parameters' size: Adam keeps two moments per parameter
# (module 07), and the optimizer state must be saved for an exact resume. Inference needs
# only the model's `state_dict`.
#
# ## 10. The digits, end to end
#
# Now a real task: the 8×8 digits of module 05. Each pixel is standardised with the
# training side's mean and standard deviation (computed once, in section 7 — never with
# statistics of the data we evaluate on). The model is an MLP with one hidden layer of
# 256 units and dropout 0.2, trained with Adam and a cosine learning-rate schedule
# (module 07) in mini-batches of 64.
#
# Two runs, as in practice. The **development run** trains on the training part and
# watches the validation part: this is where the settings (width, dropout, learning rate,
# epochs) are judged from the curves. The **final run** then trains the chosen settings on
# *all* training digits, and only that model meets the test set, once.

# %%
def digits_mlp():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), Dropout(0.2), nn.Linear(256, 10))


EPOCHS = 10
tt.manual_seed(0)
dev_model = digits_mlp()
dev_opt = Adam(dev_model.parameters(), lr=5e-3)
dev_hist = fit(dev_model, nn.CrossEntropyLoss(), dev_opt,
               DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True),
               val_loader=[(X_val, y_val)], epochs=EPOCHS,
               scheduler=CosineAnnealingLR(dev_opt, T_max=EPOCHS))
dev_hist.plot()
plt.show()

# %% [markdown]
# The validation loss falls with the training loss for the first few epochs and then
# flattens while the training loss keeps falling: a gap opens, but the validation loss does
# not turn upwards within these 10 epochs, and the cosine schedule has brought the
# learning rate to zero by the end. Good settings for the final run:

# %%
X_all = tt.tensor((_images - _mu) / _sd)  # all 1,438 training digits
y_all = tt.tensor(_labels)
tt.manual_seed(0)
digits_model = digits_mlp()
digits_opt = Adam(digits_model.parameters(), lr=5e-3)
_t0 = time.perf_counter()
digits_hist = fit(digits_model, nn.CrossEntropyLoss(), digits_opt,
                  DataLoader(TensorDataset(X_all, y_all), batch_size=64, shuffle=True),
                  epochs=EPOCHS, scheduler=CosineAnnealingLR(digits_opt, T_max=EPOCHS), progress=False)
digits_seconds = time.perf_counter() - _t0

_test = Digits(train=False)
X_test = tt.tensor((_test.data.numpy().reshape(-1, 64) - _mu) / _sd)
y_test = _test.targets
test_result = evaluate(digits_model, [(X_test, y_test)], nn.CrossEntropyLoss())
print(f"test accuracy {test_result['accuracy']:.4f} (loss {test_result['loss']:.4f}) after "
      f"{digits_seconds:.1f} s of training ({EPOCHS} epochs of {len(y_all)} digits)")
assert test_result["accuracy"] > 0.92

with tt.no_grad():
    digits_model.eval()
    _pred = digits_model(X_test).numpy().argmax(1)
_cm = confusion_matrix(_pred, y_test, num_classes=10)
fig, ax = plt.subplots(figsize=(4.6, 4))
_im = ax.imshow(_cm, cmap="Blues")
for (_i, _j), _v in np.ndenumerate(_cm):
    if _v:
        ax.text(_j, _i, _v, ha="center", va="center", fontsize=7,
                color="white" if _v > _cm.max() / 2 else "black")
ax.set_xlabel("predicted")
ax.set_ylabel("true")
ax.set_xticks(range(10))
ax.set_yticks(range(10))
ax.set_title("digits test set: confusion matrix")
plt.show()
_off = [(int(i), int(j), int(_cm[i, j])) for i, j in zip(*np.nonzero(_cm - np.diag(np.diag(_cm))))]
print("mistakes (true, predicted, count):", sorted(_off, key=lambda t: -t[2])[:6])

# %% [markdown]
# Almost all the mass is on the diagonal, and the printed list shows which confusions are
# left (typically a handful of digits whose 8×8 shapes are genuinely ambiguous). A network
# that knows nothing about images — it sees 64 numbers in an arbitrary order, and would
# learn exactly as well if the pixels were shuffled consistently — gets close to 97% here.
# Module 09's convolutions know that neighbouring pixels belong together.
#
# ## 11. Systems look: where do the time and the memory go?
#
# **Time.** An epoch consists of four kinds of work: getting the batch (the DataLoader
# indexes and stacks samples one by one, module 05), the forward pass, the backward pass,
# and the optimizer step. We time each, for three batch sizes, on the same data.

# %%
def timed_epoch(model, optimizer, loader):
    """Seconds spent in data / forward / backward / step during one epoch."""
    spent = dict.fromkeys(["data", "forward", "backward", "step"], 0.0)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    batches = iter(loader)
    while True:
        t0 = time.perf_counter()
        try:
            xb, yb = next(batches)
        except StopIteration:
            break
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        optimizer.step()
        t4 = time.perf_counter()
        for key, dt in zip(spent, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            spent[key] += dt
    return spent


_sizes = [16, 64, 256]
_spent = []
for _bs in _sizes:
    tt.manual_seed(0)
    _m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    _loader = DataLoader(TensorDataset(X_train, y_train), batch_size=_bs, shuffle=True)
    _spent.append(timed_epoch(_m, Adam(_m.parameters(), lr=1e-3), _loader))
fig, ax = plt.subplots(figsize=(6, 3.4))
_bottom = np.zeros(len(_sizes))
for _key in ["data", "forward", "backward", "step"]:
    _vals = np.array([s[_key] * 1e3 for s in _spent])
    ax.bar([str(s) for s in _sizes], _vals, bottom=_bottom, label=_key)
    _bottom += _vals
ax.set_xlabel("batch size")
ax.set_ylabel("ms per epoch")
ax.set_title("one epoch of the digits MLP")
ax.legend()
plt.show()
for _bs, _s in zip(_sizes, _spent):
    print(f"batch {_bs:4d}: " + ", ".join(f"{k} {v * 1e3:6.1f} ms" for k, v in _s.items()))

# %% [markdown]
# What to look for: the number of steps per epoch falls from 72 (batch 16) to 5 (batch
# 256), while the arithmetic per epoch stays the same. Every step pays fixed costs that do
# not depend on the amount of arithmetic — Python overhead per op in the forward and
# backward passes, the optimizer's loop over parameters (several numpy calls each) — so
# with small batches those dominate, most visibly in the `step` part; the matrix products
# of this small MLP are cheap. The data part is per *sample* (the DataLoader indexes and
# stacks one sample at a time), so it hardly depends on the batch size. Larger batches
# amortise the per-step overheads, which is why GPUs (module 17) and frameworks push
# towards large batches and fused kernels; the price is fewer optimizer steps per epoch,
# a trade-off between hardware and statistical efficiency that is one of the central
# knobs of training. (Timings on a busy machine are noisy — numpy's BLAS threads compete
# with other programs; if a bar looks odd, run the cell again.)
#
# **Memory.** Parameters are one cost; the other is what autograd keeps alive for the
# backward pass: every node holds its inputs and output (module 06). Count the bytes that
# the graph of one loss holds, apart from the parameters, for growing batches:

# %%
def graph_bytes(loss):
    """Bytes of the distinct arrays held by the graph behind `loss`, excluding parameters."""
    held = {}
    for node in topological_order([loss.grad_fn]):
        for x in node.inputs:
            if not isinstance(x, nn.Parameter):
                held[id(x._storage)] = x._storage.nbytes
        out = node.output
        base = out if out.base is None else out.base
        held[id(base)] = base.nbytes
    return sum(held.values())


tt.manual_seed(0)
_m = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), Dropout(0.1), nn.Linear(128, 10))
_param_bytes = sum(p.nbytes for p in _m.parameters())
_batch_sizes = [32, 128, 512, 1024]
_act = [graph_bytes(nn.CrossEntropyLoss()(_m(X_train[:b]), y_train[:b])) for b in _batch_sizes]
fig, ax = plt.subplots(figsize=(5.5, 3.4))
ax.plot(_batch_sizes, np.array(_act) / 1024, "o-", label="activations held by the graph")
ax.axhline(_param_bytes / 1024, color="C1", ls="--", label="parameters")
ax.set_xlabel("batch size")
ax.set_ylabel("KiB")
ax.legend()
plt.show()
print(f"parameters {_param_bytes / 1024:.1f} KiB; graph at batch 1024: {_act[-1] / 1024:.1f} KiB "
      f"({_act[-1] / _param_bytes:.1f}x the parameters)")

# %% [markdown]
# Parameter memory is fixed; activation memory grows **linearly with the batch**, and for
# deep networks and long sequences it dominates (per example this MLP keeps the input, the
# 128 hidden values several times over — after Linear, after ReLU, the dropout mask and
# its output — and the logits and log-probabilities). That is why `evaluate` runs under
# `no_grad`: without a graph, each intermediate can be freed as soon as the next layer has
# used it. Training's memory is parameters + gradients + optimizer state (module 07) +
# activations; the usual tools against the last term are smaller batches, gradient
# accumulation, and activation checkpointing (recompute instead of store).
#
# ## 12. What PyTorch does
#
# - **There is no built-in training loop.** PyTorch users write the five lines themselves;
#   libraries wrap them: PyTorch Lightning (`Trainer.fit`, callbacks, checkpointing,
#   multi-GPU), Hugging Face `Trainer`, Keras 3's `model.fit` on a torch backend, fastai's
#   `Learner`. All do what our `fit` does, plus device placement, mixed precision,
#   distributed data parallelism, logging to TensorBoard or W&B.
# - **`nn.Dropout`** calls `F.dropout`, which draws a Bernoulli mask, scales by 1/(1−p)
#   and multiplies; on the GPU a fused kernel produces the output and a 1-byte boolean
#   mask in one pass (our float mask costs 4 bytes per element). `model.train()` /
#   `model.eval()` flip the same `training` flag that module 03 gave our `Module`.
# - **`torch.nn.utils.clip_grad_norm_`** computes per-tensor norms with a fused
#   `foreach` kernel and then the norm of norms, exactly our formula (including the 1e-6).
# - **`torch.save`** writes a zip holding a pickle of the object plus one raw file per tensor
#   storage; `torch.load` unpickles it. Since PyTorch 2.6 `weights_only=True` is the default,
#   an unpickler that only accepts tensors and primitive containers. The **safetensors**
#   format (a JSON header with names, dtypes, shapes and offsets, followed by the raw bytes)
#   avoids pickle entirely and can be memory-mapped; our npz + JSON header is the same
#   idea with numpy's own format.
# - **Reproducibility**: `torch.manual_seed` seeds the CPU and CUDA generators;
#   `torch.use_deterministic_algorithms(True)` forbids kernels whose results depend on
#   thread timing; DataLoader workers need their own seeds. Our single global numpy
#   generator makes a run exactly reproducible by one `manual_seed` call.
#
# If PyTorch is installed, compare a few steps directly: the same MLP, the same initial
# weights, the same batches, gradients clipped at 0.25 on both sides (this cell is skipped
# otherwise).

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    tt.manual_seed(0)
    _ours = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    _theirs = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    with torch.no_grad():
        for _p, _q in zip(_ours.parameters(), _theirs.parameters()):
            _q.copy_(torch.from_numpy(_p.numpy().copy()))
    _o_opt, _t_opt = Adam(_ours.parameters(), lr=1e-3), torch.optim.Adam(_theirs.parameters(), lr=1e-3)
    for _k in range(5):
        _xb, _yb = X_train[_k * 32:(_k + 1) * 32], y_train[_k * 32:(_k + 1) * 32]
        _loss, _ = train_step(_ours, nn.CrossEntropyLoss(), _o_opt, _xb, _yb, clip=0.25)
        _t_opt.zero_grad()
        _tl = torch.nn.functional.cross_entropy(_theirs(torch.from_numpy(_xb.numpy().copy())),
                                                torch.from_numpy(_yb.numpy().copy()))
        _tl.backward()
        torch.nn.utils.clip_grad_norm_(_theirs.parameters(), 0.25)
        _t_opt.step()
        _gdiff = max(float(np.abs(_p.grad.numpy() - _q.grad.numpy()).max())
                     for _p, _q in zip(_ours.parameters(), _theirs.parameters()))
        print(f"step {_k + 1}: loss {_loss:.6f} vs torch {_tl.item():.6f}; largest grad difference {_gdiff:.2e}")

# %% [markdown]
# ## 13. Recap
#
# - A training step is `zero_grad → forward → loss → backward → (clip) → step`; an epoch
#   is one pass over the data; metrics are averaged over *examples*, weighting each batch
#   by its size.
# - `model.train()`/`model.eval()` change what layers compute; `no_grad()` changes what
#   autograd records. Evaluation needs both, and must restore the previous mode.
# - `fit` adds a text progress bar and a `History` of per-epoch numbers whose plot — the
#   learning curves — is the first thing to look at: a widening gap between training and
#   validation loss is overfitting.
# - **Inverted dropout** multiplies by a mask of 0 and 1/(1−p) in training, so evaluation
#   is the identity; it is a new op (`"dropout"`, with the mask in its attrs) whose backward
#   rule, `grad * mask`, was registered with module 06 from this module.
# - **Clipping by norm** rescales all gradients together so that their joint norm is at
#   most `max_norm`, keeping their direction; the returned norm is worth logging.
# - **Checkpoints** hold the model's and the optimizer's state (and the epoch and history);
#   ours are `.npz` arrays plus a JSON header, loaded with `allow_pickle=False`, and resume
#   a run bit for bit.
# - Small batches are overhead-bound; activation memory grows with the batch and is why
#   evaluation runs without a graph.
#
# Run `tito test module 08` to check your work against the full test suite.

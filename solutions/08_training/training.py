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
# that every real training run needs: metrics, a progress bar (tqdm), a history of the run that
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
# - build `fit`, a small but complete training loop with a tqdm progress bar, a per-epoch
#   `History` and learning-curve plots; read **overfitting** off those curves;
# - derive **inverted dropout** (how survivors must be scaled, and why in training) and
#   register its backward rule with module 06's autograd — a new op, added without touching
#   old code;
# - implement `clip_grad_norm_` exactly as PyTorch does;
# - save and load checkpoints in a **safe format** (safetensors, never pickle) that PyTorch
#   reads too, and write
#   `save_checkpoint` / `load_checkpoint` so that a run resumes bit for bit;
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
# (or `tito test module 08`); a cell marked `#| export nn.dropout` goes to
# `tinytorch/nn/dropout.py`, and so on, as in PyTorch's own layout: `Dropout` in
# `nn/dropout.py` (`tinytorch.nn.Dropout`, `tinytorch.nn.functional.dropout`), clipping in
# `nn/utils/clip_grad.py` (`tinytorch.nn.utils.clip_grad_norm_`) and checkpoints in
# `serialization.py` (`tinytorch.save`, `tinytorch.load`). Fill in the cells with
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
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

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
"""Training (module 08): metrics, the training step and loop (with a tqdm progress bar) and
a History that plots itself. The module's other pieces live under PyTorch's file names:
nn/dropout.py, nn/utils/clip_grad.py and serialization.py (checkpoints)."""
import math
import time

import numpy as np
from tqdm.auto import tqdm  # a widget in Jupyter, a text bar in a terminal

from tinytorch._tensor import Tensor
from tinytorch.autograd import no_grad
from tinytorch.nn.utils.clip_grad import clip_grad_norm_

__all__ = ["accuracy", "confusion_matrix", "METRICS", "train_step", "train_epoch", "evaluate", "fit", "History"]


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
# Write both, in numpy (metrics are bookkeeping, not part of the graph). The contracts are
# in the docstrings; `_numpy` (given) turns a Tensor or anything array-like into an array.
#
# <details><summary>Hint 1 (accuracy)</summary>
#
# Which axis holds the classes for `(N, C)` scores? And for `(N, C, L)`, one prediction per
# position? One rule must serve both shapes.
# </details>
#
# <details><summary>Hint 2 (accuracy)</summary>
#
# The mean of an array of booleans is the fraction of `True`.
# </details>
#
# <details><summary>Hint 3 (confusion_matrix)</summary>
#
# Each (true, predicted) pair names one cell of a C × C grid; number the cells row by row
# and one counting pass over those numbers fills the whole matrix (numpy has a function
# that counts occurrences of small non-negative integers).
# </details>
#
# <details><summary>The approach</summary>
#
# The shapes decide what the output means: the same shape as the target is one logit per
# example (a log-odds, so where is the boundary?), one more dimension is a score per class
# on dimension 1. Any other pair is a mistake worth an error, not a number. A confusion
# matrix is a count of (true, predicted) pairs: one vectorised counting call can do all of
# them at once if each pair becomes one integer.
# </details>

# %% nbgrader={"grade": false, "grade_id": "metrics", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def accuracy(output, target):
    """Fraction of correct predictions, a Python float (a metric: no gradient).

    Contract: `output` (N, C, d1, ...) of class scores with integer `target` (N, d1, ...):
    the prediction is the class with the largest score. `output` and `target` of the same
    shape: binary logits, predicted class 1 where output > 0, true class 1 where target > 0.5.
    ValueError for any other pair of shapes (the message names both shapes), and for an
    empty batch.
    """
    # Idea: the predicted class is where the largest score sits along the class dimension.
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
    """(C, C) int64 numpy array: entry [t, p] = how many examples of true class t were predicted p.

    Contract: `pred` and `target` hold class indices (any shapes with the same number of
    elements, else ValueError); C is `num_classes`, by default the largest index + 1.
    ValueError when an index lies outside [0, C).
    """
    # Idea: each (true, predicted) pair is one cell of the grid; count the pairs.
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
# 4 examples, 3 classes: the largest logits sit at 0, 1, 2, 1; the targets are 0, 1, 0, 0
_logits = np.array([[2.0, 1.0, 0.1], [0.0, 3.0, 1.0], [1.0, 0.0, 5.0], [4.0, 4.5, 0.0]], np.float32)
_t = np.array([0, 1, 0, 0])
_got = accuracy(tt.tensor(_logits), tt.tensor(_t))
assert_equal(_got, 0.5, "accuracy of (N, C) logits")
check(isinstance(_got, float), "accuracy returns a Python float", got=type(_got).__name__, expected="float")
assert_close(accuracy(tt.tensor([-1.0, 2.0, 0.5]), tt.tensor([0.0, 1.0, 0.0])), 2 / 3,
             what="binary logits of the target's shape (logit > 0 means class 1)")
# (N, C, L) scores with (N, L) targets: the classes are on dimension 1, not the last one
# (C = L = 5 here, so taking the argmax over the wrong axis gives a wrong number, not an error)
_seq = np.random.default_rng(0).standard_normal((3, 5, 5))
_seq_t = np.random.default_rng(1).integers(0, 5, (3, 5))
assert_equal(accuracy(_seq, _seq_t), float((_seq.argmax(1) == _seq_t).mean()),
             "accuracy of (N, C, L) scores with (N, L) targets")
assert_raises(ValueError, accuracy, tt.tensor(_logits), tt.tensor([0, 1]), match=r"\(4, 3\)",
              what="accuracy with 4 outputs and 2 targets (the message names the shapes)")
assert_raises(ValueError, accuracy, np.zeros((0, 3)), np.zeros(0, np.int64), what="accuracy of an empty batch")
_cm = confusion_matrix(np.array([0, 2, 2, 1, 0]), np.array([0, 1, 2, 1, 2]), num_classes=3)
assert_equal(_cm, np.array([[1, 0, 0], [0, 1, 1], [1, 0, 1]]), "confusion matrix: rows true, columns predicted")
assert_equal(str(_cm.dtype), "int64", "confusion matrix dtype")
assert_equal(confusion_matrix([1, 1], [1, 1]).shape, (2, 2), "C defaults to the largest index + 1")
assert_equal(confusion_matrix([3, 0], [0, 1]).shape, (4, 4), "C defaults to the largest index of either, + 1")
assert_raises(ValueError, confusion_matrix, [0, 5], [0, 1], num_classes=3, what="an index outside [0, C)")
print(f"✓ accuracy and confusion_matrix; e.g. accuracy {_got}, diagonal {np.diag(_cm).tolist()}")

# %% [markdown]
# ## 3. One training step
#
# `train_step(model, loss_fn, optimizer, inputs, targets, clip=None)` is the table of
# section 1 as code: one optimisation step on one batch. It returns the loss as a plain
# Python float, and the model's output detached from the graph (for the metrics).
#
# Why zero first and not last? Because between `backward` and the next step you may still
# want to look at the gradients: log their norm, clip them, check them against PyTorch
# (this module's tests do exactly that). After `train_step` returns, every parameter's
# `.grad` still holds the gradient of *this* step. Clipping (section 8) is written later;
# its name is looked up only when that line runs, so `train_step` can already call it.
#
# <details><summary>Hint 1</summary>
#
# Put the table's lines in an order where each one has what it needs: `backward` needs a
# loss, `step` needs this batch's gradients, and nothing from an earlier batch may still be
# in `.grad` when `backward` adds into it.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Which parameters does clipping act on? Those the optimizer updates; `_optimizer_params`
# (given) lists them.
# </details>
#
# <details><summary>Hint 3</summary>
#
# Why not return the loss tensor itself? It is the root of the whole graph of this step,
# and everything that graph holds would stay alive as long as you keep it.
# </details>
#
# <details><summary>The approach</summary>
#
# The order is the lesson of section 1: what must be empty before backward adds into it,
# what reads the gradients, and what must not run before they exist? What you return must
# not keep this step's graph alive into the next.
# </details>

# %% nbgrader={"grade": false, "grade_id": "train-step", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def train_step(model, loss_fn, optimizer, inputs, targets, clip=None):
    """One optimisation step on one batch: zero_grad, forward, loss, backward, (clip), step.

    Contract: returns (loss as a Python float, the model's output detached from the graph).
    Afterwards each parameter's .grad holds this batch's gradient only (clipped by
    clip_grad_norm_ to total norm `clip` when clip is not None), and the optimizer has
    stepped once.
    """
    # Idea: each line needs what the line before it made, and nothing older.
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
with preserved_state():
    _rng = np.random.default_rng(0)
    _X, _Y = _rng.standard_normal((8, 3)), _rng.standard_normal((8, 1))
    _lin = nn.Linear(3, 1, dtype=tt.float64)
    _W0, _b0 = _lin.weight.numpy().copy(), _lin.bias.numpy().copy()
    _opt = SGD(_lin.parameters(), lr=0.1)
    _loss, _out = train_step(_lin, nn.MSELoss(), _opt, tt.tensor(_X), tt.tensor(_Y))
    _err = _X @ _W0.T + _b0 - _Y
    check(isinstance(_loss, float), "train_step returns the loss as a Python float", got=type(_loss).__name__,
          expected="float")
    assert_close(_loss, float((_err ** 2).mean()), rtol=1e-12, what="the loss of step 1")
    check(_out.grad_fn is None and not _out.requires_grad, "the returned output is detached from the graph",
          got=_out.grad_fn)
    assert_close(_out.numpy(), _X @ _W0.T + _b0, rtol=1e-12, what="the returned output")
    _gW, _gb = 2 * _err.T @ _X / 8, 2 * _err.sum(0) / 8
    check(_lin.weight.grad is not None, "after train_step, .grad holds this step's gradient (not None)")
    assert_close(_lin.weight.grad.numpy(), _gW, rtol=1e-10, what="weight.grad after step 1")
    assert_close(_lin.weight.numpy(), _W0 - 0.1 * _gW, rtol=1e-10, what="weight after step 1")
    assert_close(_lin.bias.numpy(), _b0 - 0.1 * _gb, rtol=1e-10, what="bias after step 1")
    _W1, _b1 = _lin.weight.numpy().copy(), _lin.bias.numpy().copy()
    train_step(_lin, nn.MSELoss(), _opt, tt.tensor(_X), tt.tensor(_Y))
    _err1 = _X @ _W1.T + _b1 - _Y
    assert_close(_lin.weight.grad.numpy(), 2 * _err1.T @ _X / 8, rtol=1e-10,
                 what="weight.grad after step 2 (only step 2's gradient: zero first)")
print(f"✓ train_step; e.g. the first loss was {_loss:.4f}")

# %% [markdown]
# ## 4. Epochs, training mode and evaluation mode
#
# **`train_epoch(model, loss_fn, optimizer, loader, clip=None, metrics=("accuracy",),
# progress=None)`** runs one pass over `loader` in training mode, one `train_step` per
# `(inputs, targets)` batch, and returns the epoch's means as a dict
# `{"loss": ..., "accuracy": ...}` (one entry per metric). If `progress` is a `tqdm` bar
# (section 5), each step shows its loss on it (`progress.set_postfix(loss=...)`) and
# advances it by one (`progress.update(1)`).
#
# The mean must be over **examples**, not batches. The last batch of an epoch is often
# shorter (1,438 digits in batches of 32 leave 30), and a plain mean of per-batch values
# would give its 30 examples the weight of 32. (The per-batch loss is itself a mean over the
# batch, `reduction="mean"`, which is what makes a size-weighted mean exact.)
#
# **`evaluate(model, loader, loss_fn=None, metrics=("accuracy",))`** measures without
# learning. Two switches, and they are different things:
#
# - `model.eval()` changes what layers *compute*: Dropout (section 7) becomes the identity,
#   BatchNorm (module 09) uses its running statistics;
# - `no_grad()` changes what autograd *records*: nothing, so no graph is built and no
#   activations are kept for a backward pass that will never happen.
#
# Evaluation needs both, and it must leave the model in the mode it found it in, even when
# an exception escapes, so that a failed evaluation does not silently leave Dropout
# switched off for the rest of training.
#
# <details><summary>Hint 1</summary>
#
# `_batch_size(targets)` (given) is the number of examples in a batch. What do you add up,
# and what do you divide by at the end, for a mean over examples?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `model.training` tells you the mode before you change it, and `model.train(flag)` sets
# either mode. Which Python statement runs code on the way out of a block, whether or not
# it raised?
# </details>
#
# <details><summary>The approach</summary>
#
# An epoch's number is a mean over examples, and batches differ in size: weigh each batch by
# how many examples it holds. `train_epoch` and `evaluate` accumulate the same way; they
# differ in what the model must be told (its mode) and what autograd must not do, and
# `evaluate` must leave the model as it found it, whatever happens inside.
# </details>

# %% nbgrader={"grade": false, "grade_id": "epochs", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def train_epoch(model, loss_fn, optimizer, loader, clip=None, metrics=("accuracy",), progress=None):
    """One pass over `loader` in training mode, one train_step per batch.

    Contract: returns {"loss": mean, <metric name>: mean, ...}, means over examples (each
    batch weighted by its size). Leaves the model in training mode. When `progress` (a tqdm
    bar) is given, after each step: progress.set_postfix(loss=<that step's loss>) and
    progress.update(1).
    ValueError when the loader yields no batches.
    """
    metric_fns = _resolve_metrics(metrics)
    # Idea: a mean over examples weights each batch by how many examples it holds.
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
            progress.set_postfix(loss=loss, refresh=False)
            progress.update(1)
    if count == 0:
        raise ValueError("train_epoch: the loader yielded no batches")
    return {name: total / count for name, total in totals.items()}
    ### END SOLUTION


def evaluate(model, loader, loss_fn=None, metrics=("accuracy",)):
    """Mean loss (only if loss_fn is given) and metrics over `loader`, without learning.

    Contract: the forward passes run in eval mode with grad mode off; the parameters do not
    change; the model's previous mode is restored afterwards, also when an exception
    escapes. Returns {"loss": ..., <metric>: ...}, means over examples. ValueError when the
    loader yields no batches.
    """
    metric_fns = _resolve_metrics(metrics)
    # Idea: eval mode changes what layers compute; no_grad changes what autograd records.
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


# %% nbgrader={"grade": true, "grade_id": "test-epochs", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
class _Spy(nn.Module):
    """Records the mode and grad mode of every forward call."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.calls = []

    def forward(self, x):
        self.calls.append((self.training, tt.is_grad_enabled()))
        return self.fc(x)


with preserved_state():
    tt.manual_seed(0)
    _spy = _Spy()
    _xs, _ys = tt.randn(10, 4), tt.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    _batches = [(_xs[:4], _ys[:4]), (_xs[4:8], _ys[4:8]), (_xs[8:], _ys[8:])]  # sizes 4, 4, 2
    _before = [p.numpy().copy() for p in _spy.parameters()]
    with tt.no_grad():
        _full = _spy.fc(_xs)
    _full_loss = nn.CrossEntropyLoss()(_full, _ys).item()
    # evaluate: eval mode, no graph, the mode it found restored, means over examples
    _spy.eval()
    _res = evaluate(_spy, _batches, nn.CrossEntropyLoss())
    assert_equal(_spy.calls, [(False, False)] * 3, "evaluate's forward calls as (training, grad enabled)")
    check(not _spy.training, "evaluate leaves a model in eval mode when it was in eval mode")
    for _a, _p in zip(_before, _spy.parameters()):
        assert_equal(_p.numpy(), _a, "evaluate must not change the parameters")
    assert_close(_res["loss"], _full_loss, rtol=1e-5, what="evaluate's loss over batches of 4, 4, 2")
    assert_close(_res["accuracy"], accuracy(_full, _ys), rtol=1e-12, what="evaluate's accuracy")
    _spy.train()
    _spy.calls.clear()
    assert_equal(sorted(evaluate(_spy, _batches, metrics=())), [], "no loss_fn and no metrics: an empty dict")
    assert_equal(_spy.calls, [(False, False)] * 3,
                 "evaluate of a model found in training mode: its forward calls as (training, grad enabled)")
    check(_spy.training, "evaluate restores training mode")

    def _failing_loader():
        yield _batches[0]
        raise KeyError("the loader failed in its second batch")

    assert_raises(KeyError, evaluate, _spy, _failing_loader(), what="evaluate over a loader that fails")
    check(_spy.training, "evaluate restores training mode when an exception escapes (the contract's last clause)",
          got="the model left in eval mode")
    check(tt.is_grad_enabled(), "grad mode is back on after an exception in evaluate", got="grad mode left off")
    # train_epoch with lr 0: the parameters stay, so the epoch means are exact
    _spy.calls.clear()
    _spy.eval()
    _calls = []

    class _Bar:
        """Stands in for a tqdm bar and writes down what train_epoch asks of it."""

        def set_postfix(self, refresh=True, **values):
            _calls.append(("set_postfix", sorted(values)))

        def update(self, n=1):
            _calls.append(("update", n))

    _tr = train_epoch(_spy, nn.CrossEntropyLoss(), SGD(_spy.parameters(), lr=0.0), _batches, progress=_Bar())
    assert_equal(sorted(_tr), ["accuracy", "loss"], "train_epoch's keys")
    assert_equal(_calls, [("set_postfix", ["loss"]), ("update", 1)] * 3,
                 "the progress bar's calls over 3 batches: the loss, then one step")
    assert_equal(_spy.calls, [(True, True)] * 3, "train_epoch's forward calls as (training, grad enabled)")
    assert_close(_tr["loss"], _full_loss, rtol=1e-5, what="train_epoch's loss, each batch weighted by its size")
    assert_raises(ValueError, train_epoch, _spy, nn.CrossEntropyLoss(), SGD(_spy.parameters(), lr=0.1), [],
                  what="train_epoch over no batches")
    train_epoch(_spy, nn.CrossEntropyLoss(), SGD(_spy.parameters(), lr=0.1), _batches)
    check(not all(np.array_equal(a, p.numpy()) for a, p in zip(_before, _spy.parameters())),
          "train_epoch with lr 0.1 changes the parameters")
print(f"✓ train_epoch and evaluate; e.g. validation loss {_res['loss']:.4f}")

# %% [markdown]
# ## 5. Seeing the run: a progress bar and a history
#
# A run of a few minutes should show that it is alive. Python's ecosystem has one answer
# that everybody uses, **tqdm**, and PyTorch users expect it (Hugging Face's `Trainer`,
# Lightning and most training scripts draw tqdm bars). `from tqdm.auto import tqdm` picks
# the right kind for where the code runs: a widget in Jupyter, a text line redrawn in place
# (with `"\r"`) in a terminal. The calls `fit` needs:
#
# | call | what it does |
# |---|---|
# | `tqdm(total=n, desc="epoch 2/10", disable=False)` | a bar for `n` steps (`None`: unknown length), labelled; `disable=True` draws nothing |
# | `bar.set_postfix(loss=0.41, refresh=False)` | the values shown after the bar, drawn at the next redraw |
# | `bar.set_postfix_str("text", refresh=False)` | the same, with a text of your own |
# | `bar.update(1)` | one more step done; tqdm redraws at most every `mininterval` seconds (0.1 by default), so a long epoch costs almost nothing |
# | `bar.close()` | the final drawing; with `leave=True` (the default) the line stays |
#
# A bar also remembers what it showed: `bar.n` (steps done), `bar.total`, `bar.disable`,
# `bar.postfix` (the text after the bar). The check cells and the tests read those instead
# of the drawn text, whose width depends on the terminal or the notebook. Run this to see
# one:

# %%
_demo = tqdm(total=50, desc="demo", mininterval=0)
for _step in range(50):
    time.sleep(0.01)
    _demo.set_postfix(loss=1.0 / (_step + 1), refresh=False)
    _demo.update(1)
_demo.close()
print(f"bar.n = {_demo.n}, bar.total = {_demo.total}, bar.postfix = {_demo.postfix!r}")

# %% [markdown]
# A **History** keeps one record per epoch: `history["train_loss"]` is a list with one
# value per epoch, likewise `val_loss`, `train_accuracy`, `lr`, `time`. Its `plot` draws
# the **learning curves**, the most important diagnostic of a training run (section 7
# shows why). The contract of `plot(path=None)`:
#
# - one panel per quantity of `self.quantities()` ("loss" first, then each metric), side by
#   side, in that order, each titled with its quantity and with "epoch" on its x-axis;
# - in each panel, a line for `train_<quantity>` and then one for `val_<quantity>`, each only
#   if the history has it, plotted against the epoch numbers 1, 2, ..., with a legend;
# - with a `path`, the figure is also saved there as a PNG (at 100 dpi); the figure is
#   returned (a notebook displays it). `ValueError` when there is nothing to plot.
#
# `import tinytorch` must never need a display, or even matplotlib: import inside the
# method, and build the figure with matplotlib's object-oriented API (a
# `matplotlib.figure.Figure`, not `pyplot`, which would open windows and keep every figure
# alive).
#
# <details><summary>Hint 1</summary>
#
# A `Figure` can make its own grid of axes (its `subplots` method, with `squeeze=False` so
# that one panel still comes back as a row); a width that grows with the number of panels
# keeps them readable.
# </details>
#
# <details><summary>The approach</summary>
#
# The contract fixes what the picture holds; the design question is how to build it without
# pyplot: a `Figure` can make its own axes. One panel per quantity, the splits that exist
# drawn in each, against epoch numbers that start at 1.
# </details>

# %% nbgrader={"grade": false, "grade_id": "history", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
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
        """Learning curves: the contract above. Returns the matplotlib Figure."""
        # Idea: one panel per quantity, train and val on the same axes, so a gap shows.
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
_h = History()
_h.log(train_loss=1.0, train_accuracy=0.5, lr=0.1)
_h.log(train_loss=0.5, train_accuracy=0.8, val_loss=0.7, val_accuracy=0.75, lr=0.1)
assert_equal(_h.quantities(), ["loss", "accuracy"], "the quantities to plot")
_open_figures = plt.get_fignums()
_fig = _h.plot()
assert_equal(plt.get_fignums(), _open_figures, "History.plot opens no pyplot figure (a Figure of its own)")
assert_equal([a.get_title() for a in _fig.axes], ["loss", "accuracy"], "panel titles, in order")
assert_equal([len(a.lines) for a in _fig.axes], [2, 2], "lines per panel (train and val)")
assert_equal([a.get_xlabel() for a in _fig.axes], ["epoch", "epoch"], "x labels")
assert_equal(_fig.axes[0].lines[0].get_xdata().tolist(), [1, 2], "the x values are the epoch numbers 1, 2")
assert_equal(_fig.axes[0].lines[0].get_ydata().tolist(), [1.0, 0.5], "the first line is train_loss")
_h2 = History()
_h2.log(train_loss=1.0)
assert_equal([len(a.lines) for a in _h2.plot().axes], [1], "a history without val_ records draws one line")
assert_raises(ValueError, History().plot, what="plotting an empty history")
with tempfile.TemporaryDirectory() as _d:
    _h.plot(os.path.join(_d, "curves.png"))
    with open(os.path.join(_d, "curves.png"), "rb") as _f:
        assert_equal(_f.read(8), b"\x89PNG\r\n\x1a\n", "plot(path) writes a PNG file")
print(f"✓ History.plot; e.g. {len(_fig.axes)} panels: {[a.get_title() for a in _fig.axes]}")

# %% [markdown]
# ## 6. `fit`: the whole loop
#
# `fit(model, loss_fn, optimizer, train_loader, val_loader=None, epochs=1, scheduler=None,
# clip=None, metrics=("accuracy",), progress=True, history=None)` trains for `epochs`
# epochs and returns a `History` with one record per epoch:
#
# - `train_<name>` for each value `train_epoch` returns, and `val_<name>` for each value
#   `evaluate` returns on `val_loader` (when there is one);
# - `lr`: the learning rate of group 0 **used during** the epoch, and the scheduler, if
#   any, is stepped once at the end of each epoch (schedules here count epochs, as in
#   module 07);
# - `epoch` (the epoch's number, counted from 1) and `time` (its seconds, from
#   `time.perf_counter()`).
#
# Each epoch shows one tqdm bar (section 5's table has the calls): one step per batch, so
# its total is the loader's length (`_length`, given, is `None` for a loader without one),
# labelled `epoch 3/10` for the third of ten epochs, and advanced by `train_epoch`. At the
# end of the epoch its postfix text becomes the epoch's summary (`_summary(record)`, given)
# and the bar is closed, so that each epoch leaves one line. With `progress=False` the bars
# are made disabled (tqdm's `disable`): they still count, and draw nothing at all. Passing an
# existing `history` continues it: epochs are numbered on from `len(history)`, so a run
# resumed from a checkpoint (section 9) gets one continuous history.
#
# <details><summary>Hint 1</summary>
#
# The order inside one epoch decides what `lr` means: read the rate before or after the
# scheduler moves it?
# </details>
#
# <details><summary>Hint 2</summary>
#
# With a history of 5 epochs and `epochs=2`, the new epochs are 6 and 7 and the bar's
# description reads "epoch 6/7".
# </details>
#
# <details><summary>The approach</summary>
#
# `fit` is glue: each epoch trains, evaluates when it can, and writes one record. Two
# questions decide its correctness: which learning rate belongs to an epoch's record (the
# one it trained with, so read it before the scheduler moves it), and where a continued
# history's epoch numbers start. The bar is opened and closed once per epoch.
# </details>

# %% nbgrader={"grade": false, "grade_id": "fit", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _length(loader):
    """len(loader), or None for an iterable without a length."""
    try:
        return len(loader)
    except TypeError:
        return None


def _summary(record):
    """The end of an epoch `record` in a few words: train and val numbers, time."""
    parts = []
    for split in ("train", "val"):
        values = [f"{k[len(split) + 1:]} {v:.4f}" for k, v in record.items() if k.startswith(split + "_")]
        if values:
            parts.append(f"{split}: " + " ".join(values))
    parts.append(f"{record['time']:.2f}s")
    return " | ".join(parts)


def fit(model, loss_fn, optimizer, train_loader, val_loader=None, epochs=1, scheduler=None,
        clip=None, metrics=("accuracy",), progress=True, history=None):
    """Train `model` for `epochs` epochs; returns the History (the records described above).

    Contract: one train_epoch per epoch with `clip` and `metrics` (then evaluate on
    val_loader, if given, with the same `metrics`); the scheduler steps once per epoch,
    after the epoch's lr is recorded; `time` is the epoch's wall time in seconds; one tqdm
    bar per epoch, described "epoch k/n" (k the epoch's number, n the last one's), disabled
    when progress=False (nothing is drawn); an existing `history` is continued (and
    returned), its epochs numbered on (2 more epochs after 5 are "epoch 6/7", "epoch 7/7").
    """
    history = History() if history is None else history
    # Idea: an epoch is train, then measure, then move the schedule, then write it down.
    ### BEGIN SOLUTION
    first = len(history) + 1
    last = first + int(epochs) - 1
    for epoch in range(first, last + 1):
        bar = tqdm(total=_length(train_loader), desc=f"epoch {epoch}/{last}", disable=not progress)
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
        bar.set_postfix_str(_summary(record), refresh=False)
        bar.close()
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


with preserved_state():
    _m1, _h1 = _xor_run(0)
    _m2, _h2 = _xor_run(0)
    check(isinstance(_h1, History), "fit returns a History", got=type(_h1).__name__)
    assert_equal(_h1["epoch"], [1.0, 2.0, 3.0, 4.0, 5.0], "the epoch numbers")
    check({"train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "time"} <= set(_h1.keys()),
          "the record names", got=sorted(_h1.keys()))
    assert_close(_h1["lr"], [0.05 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(5)], rtol=1e-12,
                 what="lr used in each epoch (recorded, then the scheduler steps)")
    assert_equal(_h1["train_loss"], _h2["train_loss"], "the same seed gives the same run")
    check(_h1["val_loss"][-1] < _h1["val_loss"][0], "the validation loss falls over 5 epochs of XOR",
          got=_h1["val_loss"])
    _h3 = fit(_m1, nn.CrossEntropyLoss(), Adam(_m1.parameters()), [(tt.zeros(1, 2), tt.tensor([0]))],
              epochs=2, progress=False, history=_h1)
    check(_h3 is _h1, "fit(history=h) continues and returns h itself")
    assert_equal(_h1["epoch"][-2:], [6.0, 7.0], "a continued history numbers its epochs on")
    check(np.isnan(_h1["val_loss"][-1]), "epochs without a val_loader record nan as val_loss",
          got=_h1["val_loss"][-1])
    check(all(t > 0 for t in _h2["time"]), "each epoch's time (seconds, > 0) is recorded", got=_h2["time"])
    _seen = []  # what fit hands to train_epoch and evaluate (their own defaults would pass unnoticed)
    _real_train_epoch, _real_evaluate = train_epoch, evaluate

    def train_epoch(model, loss_fn, optimizer, loader, clip=None, metrics=("accuracy",), progress=None):
        _seen.append(("train_epoch", clip, tuple(metrics)))
        return _real_train_epoch(model, loss_fn, optimizer, loader, None, metrics, progress)  # (clipping: section 8)

    def evaluate(model, loader, loss_fn=None, metrics=("accuracy",)):
        _seen.append(("evaluate", None, tuple(metrics)))
        return _real_evaluate(model, loader, loss_fn, metrics)

    try:
        _mc = nn.Sequential(nn.Linear(2, 2))
        _xy = [(tt.tensor([[0.0, 1.0]]), tt.tensor([1]))]
        fit(_mc, nn.CrossEntropyLoss(), Adam(_mc.parameters()), _xy, val_loader=_xy, clip=0.5, metrics=(),
            progress=False)
    finally:
        train_epoch, evaluate = _real_train_epoch, _real_evaluate
    assert_equal(_seen, [("train_epoch", 0.5, ()), ("evaluate", None, ())],
                 "fit(clip=0.5, metrics=()): what train_epoch and evaluate were given (clip, metrics)")
    _bars = []

    class _Recorded(tqdm):
        """tqdm itself, keeping every bar fit makes (the drawn text depends on the screen)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.drawn = not self.disable  # close() sets disable, so remember it now
            self.closed = False
            _bars.append(self)

        def close(self):
            self.closed = True
            super().close()

    _h5 = _xor_run(0)[1]  # a 5-epoch history, continued below
    _real_tqdm, tqdm = tqdm, _Recorded  # fit looks `tqdm` up when it runs
    try:
        _xor_run(0, epochs=2, progress=True)
        _shown = list(_bars)
        _bars.clear()
        _xor_run(0, epochs=2, progress=False)
        _on = list(_bars)
        _bars.clear()
        _mc2 = nn.Sequential(nn.Linear(2, 2))
        fit(_mc2, nn.CrossEntropyLoss(), Adam(_mc2.parameters()), [(tt.zeros(1, 2), tt.tensor([0]))],
            epochs=2, progress=True, history=_h5)  # _h5 holds 5 epochs: these are epochs 6 and 7 of 7
        _continued = list(_bars)
        _bars[:] = _on
    finally:
        tqdm = _real_tqdm
    assert_equal([b.desc for b in _shown], ["epoch 1/2", "epoch 2/2"], "one bar per epoch, its description")
    assert_equal([(b.n, b.total, b.drawn) for b in _shown], [(1, 1, True)] * 2,
                 "each bar as (steps done, total, drawn): the loader holds 1 batch")
    assert_equal([b.closed for b in _shown], [True, True], "each epoch's bar is closed (its final drawing)")
    assert_equal([b.desc for b in _continued], ["epoch 6/7", "epoch 7/7"],
                 "the bars of 2 more epochs continuing a 5-epoch history")
    check("val:" in _shown[-1].postfix and "train:" in _shown[-1].postfix,
          "the last bar's postfix is the epoch's summary", got=_shown[-1].postfix)
    check(_bars and not any(b.drawn for b in _bars), "progress=False: every bar is disabled (nothing drawn)",
          got=[b.drawn for b in _bars])
print(f"✓ fit; e.g. XOR's val loss {_h2['val_loss'][0]:.3f} -> {_h2['val_loss'][-1]:.3f} in 5 epochs")

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
# hidden layer are combined by the output layer so that the two corners of class 1,
# (0, 1) and (1, 0), lie on one side and (0, 0) and (1, 1) on the other, which no single
# straight line can do. The loss falls slowly at first
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
print(f"best validation loss {hist_plain.best('val_loss')[1]:.3f} at epoch {hist_plain.best('val_loss')[0]}, "
      f"final {hist_plain['val_loss'][-1]:.3f}; final train loss {hist_plain['train_loss'][-1]:.4f}")
hist_plain.plot()  # a Figure, shown by Jupyter because it is the cell's last value (History.plot uses no pyplot)

# %% [markdown]
# The training loss heads to zero and the training accuracy to 100%: the network has
# memorised the 120 digits. The validation loss reaches its minimum partway through (the
# printout gives the epoch) and then *rises*, slowly, although the validation accuracy barely moves — the model keeps the same
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
# time without dropout. The original paper rescaled the activations at **test** time.
# **Inverted dropout**, what PyTorch (and everyone) does, rescales the survivors at
# **training** time instead, so that evaluation is the plain identity: no extra work at
# inference, and a model can be exported without knowing that dropout was ever used.
# Work out the factor: by what must a kept $x_i$ be scaled so that the expected output is
# exactly $x_i$? Then the values in training can take only two values per element; which?
#
# Gradients: with the mask drawn, the op is an elementwise product of $x$ with a fixed
# array. Module 06 gave you that rule; which gradient does a dropped unit get, and a kept
# one?
#
# Dropout is a **new op**. It goes through module 01's `apply` with the op name
# `"dropout"` and the scaled mask in its attrs, and module 06's engine learns to
# differentiate it from one registered rule, `@backward_rule("dropout")`, without any
# change to modules 01 or 06. `_dropout_forward` (given) is the numpy forward of the op;
# `_check_p(p)` (given) is PyTorch's message for a bad `p`. You write three pieces:
#
# - `dropout(input, p=0.5, training=True)`: the function, whose contract is in its docstring;
# - `_dropout_backward(node, grad)`: the gradient rule above, for one recorded node (the
#   attrs given to `apply` are in `node.attrs`; return one gradient per input, as a tuple);
# - `Dropout.__init__`: check `p` the same way and store it as a float. Its `forward`
#   (given) passes `self.training`, so `model.eval()` switches every Dropout in a model off.
#
# <details><summary>Hint 1</summary>
#
# The mask must come from tinytorch's global generator (module 01's `rand`), so that
# `tt.manual_seed` makes a run reproducible. With probability `p` an element is *dropped*:
# a uniform number in [0, 1) falls below `p` with exactly that probability.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Build the scaled mask once, as a numpy array in the input's dtype: 0 for dropped
# elements and your factor for kept ones. `p = 1` needs care: every element is dropped,
# and your factor has nothing sensible to say about it.
# </details>
#
# <details><summary>Hint 3</summary>
#
# In eval mode, or with `p = 0`, the contract says "the input itself": not a copy, and no
# node in the graph.
# </details>
#
# <details><summary>The approach</summary>
#
# The errors come first, in the order the contract lists them; the cases that are "the
# input itself" come before any random draw (a draw would move the generator, and a seeded
# run would change). The op records everything its backward needs in its attrs, so the
# backward is one line of module 06 and no recomputation. `Dropout.__init__` shares the
# range check with the function.
# </details>

# %%
#| export nn.dropout
"""Dropout (module 08), mirroring torch.nn.Dropout and torch.nn.functional.dropout, with the
backward rule of its op "dropout"."""
import numpy as np

from tinytorch._tensor import apply, rand
from tinytorch.autograd import backward_rule
from tinytorch.nn.layers import Module

__all__ = ["dropout", "Dropout"]

# %% nbgrader={"grade": false, "grade_id": "dropout", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.dropout
def _check_p(p):
    return f"dropout probability has to be between 0 and 1, but got {p}"


def _dropout_forward(x, mask, p):
    return x.numpy() * mask


def dropout(input, p=0.5, training=True):
    """Inverted dropout (torch.nn.functional.dropout).

    Contract: ValueError with `_check_p(p)`'s message unless 0 <= p <= 1; TypeError (naming
    the dtype) for a non-floating input. Not training, or p == 0: returns `input` itself.
    Otherwise a new tensor recorded as the op "dropout" with attrs mask (numpy, the input's
    dtype: 0 where dropped, where kept the scale that keeps each element's expectation) and
    p; each element is dropped independently with probability p, drawn from tinytorch's
    generator (tt.manual_seed reproduces it).
    """
    # Idea: drop with probability p, and scale the survivors so that the mean is unchanged.
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
    """y = x * mask (the mask in node.attrs, already scaled). Contract: returns (dL/dx,)."""
    # Idea: the op is a multiplication by a constant.
    ### BEGIN SOLUTION
    return (grad * node.attrs["mask"],)
    ### END SOLUTION


class Dropout(Module):
    """Randomly zero elements with probability p in training mode; identity in eval mode
    (torch.nn.Dropout)."""

    def __init__(self, p=0.5):
        """Contract: ValueError with `_check_p(p)`'s message unless 0 <= p <= 1; self.p = float(p)."""
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
def _fixed_mask_dropout(x):
    tt.manual_seed(7)  # the same mask on every call
    return dropout(x, 0.4)


with preserved_state():
    _x = tt.randn(200, 50) + 3.0  # no zeros in the input
    tt.manual_seed(1)
    _y = dropout(_x, 0.3)
    _ratio = _y.numpy() / _x.numpy()
    _odd = ~(np.isclose(_ratio, 0) | np.isclose(_ratio, 1 / 0.7))
    check(not _odd.any(), "in training, every output is 0 or x / (1 - p) (p = 0.3)",
          got=_ratio[_odd][:5], expected=f"0 or {1 / 0.7:.4f}")
    assert_close((_ratio > 0).mean(), 0.7, atol=0.02, what="the fraction of survivors (about 1 - p = 0.7)")
    assert_equal(str(_y.dtype), "float32", "dropout keeps the input's dtype (a float64 mask would promote it)")
    tt.manual_seed(1)
    assert_equal(dropout(_x, 0.3).numpy(), _y.numpy(), "tt.manual_seed reproduces the mask")
    check(dropout(_x, 0.3, training=False) is _x, "training=False returns the input itself")
    check(dropout(_x, 0.0) is _x, "p = 0 returns the input itself")
    for _kw, _case in (({"p": 0.3, "training": False}, "training=False"), ({"p": 0.0}, "p = 0")):
        tt.manual_seed(5)
        dropout(_x, **_kw)
        _next = tt.rand(1).item()
        tt.manual_seed(5)
        check(_next == tt.rand(1).item(), f"{_case} draws nothing from the generator (a mask drawn and thrown "
              "away would shift every later random number)", got="the generator moved")
    assert_equal(dropout(_x, 1.0).numpy(), np.zeros(_x.shape, np.float32), "p = 1 drops everything")
    for _bad in (-0.1, 1.5):
        assert_raises(ValueError, dropout, _x, _bad, match="between 0 and 1", what=f"dropout(x, p={_bad})")
        assert_raises(ValueError, Dropout, _bad, match="between 0 and 1", what=f"Dropout(p={_bad})")
    assert_raises(TypeError, dropout, tt.tensor([1, 2, 3]), 0.5, what="dropout of an integer tensor")
    # the graph and the gradient
    _w = tt.randn(4, 6, requires_grad=True)
    tt.manual_seed(3)
    _out = dropout(_w, 0.5)
    check(_out.grad_fn is not None and _out.grad_fn.op == "dropout", "the output is recorded as the op 'dropout'",
          got=_out.grad_fn)
    _out.sum().backward()
    assert_equal(_w.grad.numpy(), (_out.numpy() != 0) * np.float32(2.0), "the gradient of sum(dropout(w, 0.5)) is the mask")
    _x64 = tt.randn(3, 5, dtype=tt.float64, requires_grad=True)
    check(gradcheck(_fixed_mask_dropout, (_x64,)), "gradcheck of dropout with a fixed mask")
    # the module: on in training mode, the identity in eval mode
    _layer = Dropout(0.25)
    assert_equal(repr(_layer), "Dropout(p=0.25)", "repr")
    check(not np.array_equal(_layer(_x).numpy(), _x.numpy()), "Dropout is active in training mode")
    _layer.eval()
    check(_layer(_x) is _x, "Dropout is the identity in eval mode")
print(f"✓ dropout; e.g. {(_ratio > 0).mean():.3f} of the elements survived p = 0.3")

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
# long vector $g$, of length
#
# $$\|g\| = \Big(\sum_{\text{params}} \sum_i |g_i|^q\Big)^{1/q}$$
#
# ($q = 2$ by default; for $q = \infty$ the length is the largest $|g_i|$), and if that
# length exceeds `max_norm`, bring it back to `max_norm` **without turning the vector**. It
# acts on the gradients, between `backward` and `step`. PyTorch's
# `torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=2.0)` returns the total
# norm *before* clipping as a tensor — the most useful number to log when a run misbehaves.
#
# Before you write it, answer three questions: which operation on a vector changes its
# length but not its direction? What single number do you apply, and to which gradients?
# And what happens to a gradient whose length is already below `max_norm`? (PyTorch adds
# 1e-6 to the total norm wherever it divides by it, so that an all-zero gradient never
# gives 0/0; match that, since the tests compare with PyTorch to 12 digits.)
#
# The picture: three gradient vectors and the ball of radius `max_norm` = 1. Which of them
# should clipping change, and where should each end? After the check cell, the picture is
# drawn again with your function.

# %%
_CLIP_DEMO = [((2.4, 1.2), "C3"), ((0.5, 0.6), "C2"), ((-0.4, -0.7), "C0")]


def draw_clipping(ax, clip=None):
    """The three gradients of the picture and the unit ball; with `clip` (a function from a
    vector to the clipped vector), each clipped one in bold over its faint original."""
    ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, ls="--", color="gray"))
    for v, c in _CLIP_DEMO:
        ax.annotate("", xy=v, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=c, alpha=0.35 if clip else 1))
        if clip is not None:
            ax.annotate("", xy=clip(np.array(v)), xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=c, lw=2))
    ax.set_xlim(-1.5, 2.6)
    ax.set_ylim(-1.5, 2.6)
    ax.set_aspect("equal")


fig, ax = plt.subplots(figsize=(4.2, 4.2))
draw_clipping(ax)
ax.set_title("three gradients and the ball of max_norm = 1", fontsize=9)
plt.show()

# %% [markdown]
# Write `clip_grad_norm_` and `clip_grad_value_`; their contracts are in the docstrings.
# `_grads(parameters)` (given) returns the existing gradients of one Tensor or of an
# iterable of them. `clip_grad_value_` is simpler, but it changes the direction of the
# gradient.
#
# <details><summary>Hint 1</summary>
#
# The q-norm of one long vector made of all the gradients is the q-norm of the vector of
# the per-tensor q-norms. So you never need to concatenate: norm each gradient, stack the
# norms (module 01's `stack`), and norm that. For q = ∞ the same holds with the maximum.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Where in the formula does "only when above `max_norm`" live? Check a gradient whose
# norm is *below* `max_norm`: what factor would it get without the minimum?
# </details>
#
# <details><summary>Hint 3</summary>
#
# The gradients must change in place (the optimizer reads `p.grad` afterwards), and no
# graph should be recorded while you compute norms of gradients.
# </details>
#
# <details><summary>The approach</summary>
#
# One number, the total norm of all the gradients together, decides one factor for all of
# them: that keeps the direction. The norm of one long vector can be computed from the
# norms of its pieces, without concatenating. Nothing here is part of a model, so autograd
# must not record it, and the gradients change where they are.
# </details>

# %%
#| export nn.utils.clip_grad
"""Gradient clipping (module 08), mirroring torch.nn.utils.clip_grad."""
import math

import numpy as np

from tinytorch._tensor import Tensor, stack, tensor
from tinytorch.autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_"]

# %% nbgrader={"grade": false, "grade_id": "clip", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.utils.clip_grad
def _grads(parameters):
    """The existing .grad tensors of `parameters` (one Tensor or an iterable of them)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together so that their total norm is at most max_norm
    (torch.nn.utils.clip_grad_norm_).

    Contract: the total norm is the `norm_type`-norm (inf: the largest |g|) of all gradients
    taken as one vector. Above max_norm, the gradients change in place, together, so that
    the total becomes max_norm (to PyTorch's digits: the total plus 1e-6 wherever it is a
    divisor) with every direction kept; otherwise they are left as they are. Returns the
    total norm *before* clipping, a 0-d Tensor (0.0 when there are no gradients).
    RuntimeError when the total is not finite and error_if_nonfinite is true (the message
    says the norm is non-finite).
    """
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    # Idea: one norm for all parameters together, one factor for all of them.
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
    (torch.nn.utils.clip_grad_value_). Contract: returns None; the .grad tensors are the
    same objects afterwards."""
    grads = _grads(parameters)
    clip_value = float(clip_value)
    # Idea: each element on its own, cut at ±clip_value.
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


with preserved_state():
    _g = [np.array([[3.0, 0.0], [0.0, 0.0]]), np.array([4.0, 0.0, 0.0])]  # total 2-norm 5, per tensor 3 and 4
    _ps = _params_with_grads(_g)
    _held = _ps[0].grad
    _total = clip_grad_norm_(_ps, 1.0)
    check(isinstance(_total, tt.Tensor), "clip_grad_norm_ returns a Tensor", got=type(_total).__name__)
    assert_close(_total.item(), 5.0, rtol=1e-12, what="the total norm before clipping")
    assert_close(_ps[0].grad.numpy(), _g[0] / (5 + 1e-6), rtol=1e-12, atol=0,
                 what="grad 0 after clipping to norm 1 (PyTorch's 1e-6 included)")
    assert_close(_ps[1].grad.numpy(), _g[1] / (5 + 1e-6), rtol=1e-12, atol=0,
                 what="grad 1 after clipping to norm 1 (one factor for all: 1/5, not 1/4)")
    check(_ps[0].grad is _held, "the gradients are scaled in place")
    _ps = _params_with_grads(_g)
    clip_grad_norm_(iter(_ps), 10.0)
    assert_equal(_ps[0].grad.numpy(), _g[0], "below max_norm the gradients are unchanged (not scaled up)")
    _ps = _params_with_grads(_g)
    assert_close(clip_grad_norm_(_ps, 2.0, norm_type="inf").item(), 4.0, rtol=1e-12, what="the inf-norm")
    assert_close(_ps[1].grad.numpy(), _g[1] * 2 / (4 + 1e-6), rtol=1e-12, atol=0,
                 what="grad 1 after inf-norm clipping to 2")
    _ps = _params_with_grads(_g)
    assert_close(clip_grad_norm_(_ps[0], 1.0, norm_type=1).item(), 3.0, rtol=1e-12,
                 what="the 1-norm of a single tensor")
    assert_equal(clip_grad_norm_([tt.zeros(2, requires_grad=True)], 1.0).item(), 0.0, "no gradients: norm 0")
    assert_raises(RuntimeError, clip_grad_norm_, _params_with_grads([np.array([1.0, np.inf])]), 1.0,
                  error_if_nonfinite=True, match="non-finite", what="a non-finite norm with error_if_nonfinite")
    _ps = _params_with_grads([np.array([-3.0, 0.5, 2.0])])
    clip_grad_value_(_ps, 1.0)
    assert_equal(_ps[0].grad.numpy(), np.array([-1.0, 0.5, 1.0]), "clip_grad_value_(1.0)")
    # train_step(clip=...) clips between backward and step
    _lin = nn.Linear(3, 1, dtype=tt.float64)
    _X, _Y = np.ones((4, 3)), np.full((4, 1), 100.0)
    _W = _lin.weight.numpy().copy()
    train_step(_lin, nn.MSELoss(), SGD(_lin.parameters(), lr=1.0), tt.tensor(_X), tt.tensor(_Y), clip=0.5)
    _gnorm = math.sqrt(float((_lin.weight.grad.numpy() ** 2).sum() + (_lin.bias.grad.numpy() ** 2).sum()))
    assert_close(_gnorm, 0.5, rtol=1e-5, what="the gradient norm after train_step(clip=0.5)")
    assert_close(_lin.weight.numpy(), _W - _lin.weight.grad.numpy(), rtol=1e-12, what="the step used the clipped gradient")
print(f"✓ clip_grad_norm_ and clip_grad_value_; e.g. total norm {_total.item():.1f} clipped to 1")

# %% [markdown]
# The picture again, each gradient now clipped by your `clip_grad_norm_`:

# %%
def _clipped_by_yours(v):
    p = tt.zeros(2, dtype=tt.float64, requires_grad=True)
    p.grad = tt.tensor(v)
    clip_grad_norm_([p], 1.0)
    return p.grad.numpy()


fig, ax = plt.subplots(figsize=(4.2, 4.2))
draw_clipping(ax, _clipped_by_yours)
ax.set_title("clip_grad_norm_(max_norm=1): faint = before, bold = after", fontsize=9)
plt.show()

# %% [markdown]
# ## 9. Checkpoints, safely
#
# A checkpoint is everything needed to continue a run exactly where it stopped: the
# model's `state_dict` (module 03), the optimizer's `state_dict` (module 07: momentum
# buffers, Adam's moments and step counts, the learning rates), the scheduler's, the epoch
# and the history, and one more thing that the exercise below asks you to find. Long runs
# crash, machines get preempted; checkpoints make that cheap.
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
# unpickler that only rebuilds tensors and plain containers. But the format PyTorch users
# *share* weights in, on the Hugging Face Hub and elsewhere, is **safetensors**: an
# 8-byte length, a JSON header (each tensor's name, dtype, shape and byte range, plus a
# `"__metadata__"` dict of strings) and then the raw bytes of the tensors. Reading it is
# parsing JSON and copying numbers: no code can run. We save in that format, with its numpy
# API (`safetensors.numpy.save` / `load`), so that the same file opens in PyTorch with
# `safetensors.torch.load_file(path)` and goes straight into `load_state_dict`:
#
# - **arrays** become the file's tensors. safetensors stores numbers and booleans only
#   (no strings, no Python objects), which is exactly what makes it safe;
# - the **structure** (nested dicts, lists, tuples, numbers, strings, None) goes into one
#   JSON string, stored in the metadata under `"structure"`. JSON can only describe data.
#
# `save(obj, f)` (given) calls `_pack(obj, arrays)`, which you write. It returns a JSON-able
# *description* of `obj` and puts every array into the dict `arrays`:
#
# | value | description |
# |---|---|
# | a `Tensor` | `{"tensor": key}`, with `arrays[key] = its numpy values` |
# | a numpy array of a bool, integer or floating dtype | `{"ndarray": key}`, likewise |
# | `None`, `bool`, `int`, `float`, `str` (numpy scalars converted with `.item()`) | the value itself |
# | a `dict` (keys `str` or `int`, not bool) | `{"dict": [[key, description], ...]}` |
# | a `list` / `tuple` | `{"list": [...]}` / `{"tuple": [...]}` |
# | anything else (an array of strings or objects included) | `TypeError` naming the path and the type |
#
# Dict items are stored as pairs because JSON object keys must be strings, and an optimizer
# state is keyed by integers (`{0: {...}, 1: {...}}`); tuples are tagged so that
# `betas=(0.9, 0.999)` comes back as a tuple. The `key` of an array is made from its
# **path** in the object: a dict entry extends the path by `/` and its key, a list or tuple
# element by `/` and its index, and the top level's path is `""`. `_unique(arrays, path)`
# (given) turns a path into a tensor name not yet in `arrays`, dropping the leading `/`:
# so a model's `state_dict` saved on its own has tensors named exactly like its parameters
# (`"0.weight"`, `"0.bias"`, ...), the names PyTorch's `load_state_dict` expects, and a
# checkpoint's tensors read `"model/0.weight"` or `"optimizer/state/3/exp_avg"`.
#
# `_unpack(description, arrays)` is the inverse: tensors come back as new Tensors (copies,
# same dtype), arrays as numpy arrays, dicts, lists and tuples as themselves.
#
# <details><summary>Hint 1</summary>
#
# Both functions are recursive: a container's description holds the descriptions of its
# items, made by the same function with a longer path.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Order matters in the type tests: a `bool` is also an `int` in Python, a Tensor is not a
# numpy array, and a numpy scalar (such as `np.float32(1.5)`) is neither a float nor an
# array until you convert it. An array's `dtype.kind` is one letter that tells booleans,
# signed and unsigned integers and floats from everything else.
# </details>
#
# <details><summary>Hint 3</summary>
#
# Every description that is not a plain value is a dict with exactly one entry, whose key
# names the kind. `_unpack` can read that one entry and dispatch on the kind.
# </details>
#
# <details><summary>The approach</summary>
#
# The file has two parts: tensors, stored as arrays under a name, and a JSON description of
# everything else, which points at those names. So `_pack` is a recursion over the
# structure that answers, for each value, "is this an array, a plain JSON value, or a
# container of more values?", and tags what JSON would lose (a tuple is not a list, a dict
# key may be an int). `_unpack` is the same recursion backwards. Anything that is none of
# these cannot be stored without pickle: refuse it.
# </details>

# %%
#| export serialization
"""Saving and loading (module 08), mirroring torch.serialization: `save` and `load` over
safetensors (the format PyTorch users share weights in, which runs no code when read), and
save_checkpoint / load_checkpoint for resuming a run."""
import json
import os

import numpy as np
import safetensors
import safetensors.numpy

from tinytorch._tensor import Tensor, tensor
from tinytorch.random import get_rng_state, set_rng_state

__all__ = ["save", "load", "save_checkpoint", "load_checkpoint"]

# %% nbgrader={"grade": false, "grade_id": "checkpoint", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export serialization
_FORMAT, _VERSION = "tinytorch-checkpoint", 2
_STORABLE = "biuf"  # dtype kinds safetensors stores: bool, int, unsigned int, float


def _unique(arrays, path):
    """A tensor name for a new array: its path without the leading "/" ("value" at the top
    level), made unique."""
    key = path.strip("/") or "value"
    base, i = key, 1
    while key in arrays:
        key, i = f"{base}#{i}", i + 1
    return key


def _pack(obj, arrays, path=""):
    """JSON-able description of obj (the table above); its tensors and arrays are copied
    into `arrays` (key -> numpy array). Contract: TypeError, naming the path and the type,
    for anything the table does not list (a dict key that is not str or int included)."""
    # Idea: the structure goes to JSON, the numbers to arrays, linked by the keys.
    ### BEGIN SOLUTION
    if isinstance(obj, Tensor):
        if obj.dtype.kind not in _STORABLE:
            raise TypeError(f"save: {path or 'the object'} is a Tensor of dtype {obj.dtype}, which "
                            f"safetensors cannot store")
        key = _unique(arrays, path)
        arrays[key] = np.array(obj.numpy(), order="C")  # a copy; keeps 0-d shapes
        return {"tensor": key}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _STORABLE:
            raise TypeError(f"save: {path or 'the object'} is a numpy array of dtype {obj.dtype}, "
                            f"which safetensors cannot store (only pickle could store objects)")
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
    """The inverse of _pack. Contract: ValueError for a description of an unknown kind."""
    # Idea: the tag says what to rebuild; the key says where its numbers are.
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


# %% [markdown]
# `save` and `load` (given) wrap the two: `save` writes the arrays and the metadata (the
# format's name, its version and the structure, all strings as safetensors requires) into
# one safetensors file, atomically, through a temporary file, so that a crash mid-save never
# destroys the previous checkpoint. `load` reads it with safetensors (which refuses anything
# that is not a safetensors file: a pickle, an `.npz`, text) and rebuilds the object. A
# safetensors file without tinytorch's metadata, for instance one PyTorch wrote with
# `safetensors.torch.save_file(model.state_dict(), path)`, loads as the dict of its
# tensors (your `_unpack` of a dict description with one `{"tensor": name}` per tensor): a
# `state_dict` for `load_state_dict`.

# %%
#| export serialization
def _metadata(data):
    """The "__metadata__" dict of the safetensors bytes `data` (already validated)."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]).get("__metadata__") or {}


def save(obj, f):
    """Save tensors, arrays and plain data (dicts, lists, tuples, numbers, strings, None) to
    `f` (a path or a binary file) in safetensors format: no pickle (unlike torch.save).
    A model's state_dict saved alone has tensors named like its parameters, so PyTorch's
    safetensors.torch.load_file + load_state_dict read it."""
    arrays = {}
    structure = _pack(obj, arrays)
    metadata = {"format": _FORMAT, "version": str(_VERSION), "structure": json.dumps(structure)}
    data = safetensors.numpy.save(arrays, metadata=metadata)
    if hasattr(f, "write"):
        f.write(data)
        return
    path = os.fspath(f)
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)  # atomic: a crash mid-save never destroys the previous checkpoint


def load(f, map_location=None, weights_only=None, **pickle_options):
    """Load what save() wrote, or any safetensors file (as a dict name -> Tensor); refuses
    everything else, pickles included (tinytorch never unpickles).

    PyTorch's keywords, for its programs: every load is weights-only (`weights_only` changes
    nothing), and `map_location` (a device or its name) puts the tensors on that device."""
    if pickle_options:
        raise TypeError(f"load() takes no {', '.join(sorted(pickle_options))}: tinytorch never unpickles")
    loaded = _load(f)
    if map_location is None or str(map_location) == "cpu":
        return loaded
    return _moved(loaded, map_location)


def _moved(obj, where):
    """`obj` with every Tensor in it moved to the device `where` (dicts, lists, tuples walked)."""
    if isinstance(obj, Tensor):
        return obj.to(where)
    if isinstance(obj, dict):
        return {key: _moved(value, where) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_moved(value, where) for value in obj)
    return obj


def _load(f):
    name = getattr(f, "name", f)
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(f, "rb") as handle:
            data = handle.read()
    try:
        arrays = safetensors.numpy.load(data)
        metadata = _metadata(data)
    except (safetensors.SafetensorError, ValueError) as exc:
        raise ValueError(f"load: {name} is not a safetensors file ({exc}); tinytorch reads only "
                         f"safetensors and never unpickles") from exc
    if "structure" not in metadata:  # a plain safetensors file, e.g. a PyTorch state_dict:
        structure = {"dict": [[key, {"tensor": key}] for key in arrays]}  # a dict of its tensors
        return _unpack(structure, arrays)
    if metadata.get("format") != _FORMAT or int(metadata.get("version", 0)) > _VERSION:
        raise ValueError(f"load: {name} has format {metadata.get('format')!r} version "
                         f"{metadata.get('version')!r}; this tinytorch reads {_FORMAT!r} up to "
                         f"version {_VERSION}")
    return _unpack(json.loads(metadata["structure"]), arrays)


# %% nbgrader={"grade": true, "grade_id": "test-checkpoint", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_obj = {"w": tt.tensor([[1.0, 2.0]]), "n": np.arange(3), 0: (0.9, 0.999), "k": [1, None, "s", True],
        "inf": float("inf"), "i64": tt.tensor([1, 2]), "d64": tt.tensor(np.ones(2)), "f32": np.float32(1.5),
        "s0": tt.tensor(2.5)}
_arrays = {}
_desc = _pack(_obj, _arrays)
import json as _json
_json.dumps(_desc)  # the description must be plain JSON (this raises otherwise)
assert_equal(sorted(_arrays), ["d64", "i64", "n", "s0", "w"], "the array keys (their paths)")
_back = _unpack(_desc, _arrays)
assert_equal(list(_back), ["w", "n", 0, "k", "inf", "i64", "d64", "f32", "s0"],
             "the keys come back, in order, int key included")
assert_equal(_back["s0"].shape, (), "a 0-d Tensor comes back 0-d")
assert_equal(_back[0], (0.9, 0.999), "a tuple comes back as a tuple")
check(isinstance(_back["w"], tt.Tensor), "a Tensor comes back as a Tensor", got=type(_back["w"]).__name__)
assert_equal(_back["w"].tolist(), [[1.0, 2.0]], "the Tensor's values")
check(isinstance(_back["n"], np.ndarray), "a numpy array comes back as a numpy array", got=type(_back["n"]).__name__)
assert_equal(_back["k"], [1, None, "s", True], "a list of plain values")
assert_equal(_back["inf"], math.inf, "an infinite float")
assert_equal((str(_back["i64"].dtype), str(_back["d64"].dtype)), ("int64", "float64"), "dtypes are kept")
check(isinstance(_back["f32"], float) and _back["f32"] == 1.5, "a numpy scalar comes back as a Python float",
      got=_back["f32"])
for _bad in ({"f": lambda x: x}, {(1, 2): 3}, {True: 1}, np.array([object()]), {"s": np.array(["text"])}):
    assert_raises(TypeError, _pack, _bad, {}, what=f"_pack of {_bad!r}")
_buf = io.BytesIO()
save({"model": nn.Linear(3, 2).state_dict(), "step": 7}, _buf)
assert_equal(sorted(safetensors.numpy.load(_buf.getvalue())), ["model/bias", "model/weight"],
             "the tensors in the safetensors file")
_buf.seek(0)
_ck = load(_buf)
assert_equal((_ck["step"], _ck["model"]["weight"].shape), (7, (2, 3)), "save then load")
print(f"✓ checkpoints; e.g. arrays stored as {sorted(_arrays)}")

# %% [markdown]
# ### Resuming exactly: `save_checkpoint` and `load_checkpoint`
#
# A checkpoint is only as good as what it remembers. Train 3 steps, save, build a *fresh*
# model and optimizer, load, train 3 more steps: the result must be bit-for-bit what 6
# uninterrupted steps give. Anything the checkpoint forgets (Adam's step count, a momentum
# buffer, the learning rate after a schedule) breaks the equality. So does something that
# belongs to no object you pass in: the model of the check has a `Dropout`, and a shuffled
# `DataLoader` would do the same. What else does step 4 of the uninterrupted run depend
# on, and where does it live (module 01's `manual_seed` is a hint)?
#
# Write the pair that every training script needs:
#
# - `save_checkpoint(f, model, optimizer=None, scheduler=None, history=None, **extra)` saves,
#   with `save`, one dict: `"model"` (the model's `state_dict`), `"rng_state"` (your
#   answer to the question above, as its owner reports it), and `"optimizer"`,
#   `"scheduler"`, `"history"` (their `state_dict`s) for the objects given, plus `"extra"`,
#   the keyword arguments (such as `epoch=3`) as plain data;
# - `load_checkpoint(f, model, optimizer=None, scheduler=None, history=None)` loads that
#   dict and restores every object it is given, in place, and the random state when the
#   file has one; it returns the `extra` dict. Asking it to restore an object whose part
#   the file does not hold is a `ValueError` naming the part (a silent "nothing to load"
#   would resume with a fresh optimizer).
#
# <details><summary>Hint 1</summary>
#
# Every object here already has a `state_dict()` and a `load_state_dict()`: the model
# (module 03), the optimizer and the scheduler (module 07), the history (section 5).
# </details>
#
# <details><summary>The approach</summary>
#
# A run's state is everything that changes while it trains: each object's own state (each
# has a `state_dict`), and the random stream the run draws from. Loading is the same list
# backwards; as with every load in this course, refuse before restoring anything, so that a
# refused checkpoint leaves the run as it was.
# </details>

# %% nbgrader={"grade": false, "grade_id": "save-checkpoint", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export serialization
def save_checkpoint(f, model, optimizer=None, scheduler=None, history=None, **extra):
    """Save what a resumed run needs to `f` (a path or a binary file), with save().

    Contract: the saved dict has "model" (model.state_dict()), "rng_state" (your answer to
    the section's question, in the form its owner reports it), "extra" (the keyword
    arguments), and "optimizer", "scheduler", "history" (their state_dict()) for each of
    those given.
    """
    # Idea: a run's state is the state of each object that changes during training.
    ### BEGIN SOLUTION
    checkpoint = {"model": model.state_dict(), "rng_state": get_rng_state(), "extra": dict(extra)}
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler), ("history", history)):
        if obj is not None:
            checkpoint[name] = obj.state_dict()
    save(checkpoint, f)
    ### END SOLUTION


def load_checkpoint(f, model, optimizer=None, scheduler=None, history=None):
    """Restore, in place, the objects given from a file written by save_checkpoint.

    Contract: also restores the "rng_state" part when the file holds one. Returns the saved extra keyword arguments as a dict. ValueError, naming
    the part, when an object is given whose part is not in the file (checked before
    anything is restored).
    """
    # Idea: each object gets back exactly what it saved.
    ### BEGIN SOLUTION
    checkpoint = load(f)
    parts = {"optimizer": optimizer, "scheduler": scheduler, "history": history}
    for name, obj in parts.items():
        if obj is not None and name not in checkpoint:
            raise ValueError(f"load_checkpoint: the checkpoint holds no {name!r} state to restore")
    model.load_state_dict(checkpoint["model"])
    for name, obj in parts.items():
        if obj is not None:
            obj.load_state_dict(checkpoint[name])
    if "rng_state" in checkpoint:
        set_rng_state(checkpoint["rng_state"])
    return dict(checkpoint.get("extra", {}))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-save-checkpoint", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _make(seed, kind="adam"):
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), Dropout(0.3), nn.Linear(32, 10))  # draws every step
    opt = Adam(model.parameters(), lr=1e-2) if kind == "adam" else SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, opt, CosineAnnealingLR(opt, T_max=6)


def _train(model, opt, sched, batches):
    for _xb, _yb in batches:
        train_step(model, nn.CrossEntropyLoss(), opt, _xb, _yb)
        sched.step()


with preserved_state():
    _batches = [(X_train[i * 32:(i + 1) * 32], y_train[i * 32:(i + 1) * 32]) for i in range(6)]
    for _kind in ("sgd", "adam"):
        _model, _opt, _sched = _make(0, _kind)
        _train(_model, _opt, _sched, _batches)
        _reference = [p.numpy().copy() for p in _model.parameters()]

        _model, _opt, _sched = _make(0, _kind)
        _train(_model, _opt, _sched, _batches[:3])
        _hist = History()
        _hist.log(train_loss=1.0)
        _path = os.path.join(tempfile.mkdtemp(), "run.ckpt")
        save_checkpoint(_path, _model, _opt, _sched, _hist, step=3)

        _model, _opt, _sched = _make(123, _kind)  # other initial weights: everything must come from the file
        _hist = History()
        _extra = load_checkpoint(_path, _model, _opt, _sched, _hist)
        assert_equal(_extra, {"step": 3}, "load_checkpoint returns the extra values")
        assert_equal(_hist["train_loss"], [1.0], "the history is restored")
        assert_equal(_sched.last_epoch, 3, "the scheduler's epoch is restored")
        _train(_model, _opt, _sched, _batches[_extra["step"]:])
        for _i, (_a, _p) in enumerate(zip(_reference, _model.parameters())):
            assert_equal(_p.numpy(), _a, f"{_kind}: parameter {_i}, resumed run against the uninterrupted one")
    _bare = os.path.join(tempfile.mkdtemp(), "weights.ckpt")
    save_checkpoint(_bare, _model)
    _fresh, _fresh_opt, _ = _make(1)
    _fresh_w = [p.numpy().copy() for p in _fresh.parameters()]
    assert_raises(ValueError, load_checkpoint, _bare, _fresh, _fresh_opt, match="optimizer",
                  what="restoring an optimizer from a checkpoint that holds none")
    check(all(np.array_equal(p.numpy(), w) for p, w in zip(_fresh.parameters(), _fresh_w)),
          "a load that fails restores nothing, not even the model (every part is checked first)",
          got="the model's weights changed")
print(f"✓ save_checkpoint / load_checkpoint: resumed == uninterrupted, bit for bit; "
      f"file {os.path.getsize(_path):,} bytes")

# %% [markdown]
# How big is a checkpoint? Compare the file with the parameters:

# %%
print(f"checkpoint file: {os.path.getsize(_path):,} bytes; parameters "
      f"{sum(p.nbytes for p in _model.parameters()):,} bytes")

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
dev_hist.plot()  # the cell's last value: Jupyter shows the Figure

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
#
# **Predict first.** Batch 16 makes 72 steps per epoch of these 1,150 digits, batch 256
# only 5, and the arithmetic per epoch is the same. How many times longer do you expect an
# epoch at batch 16 to take than one at batch 256? (Not graded.)

# %%
predicted_epoch_ratio = None  # your number: epoch time at batch 16 / at batch 256

# %%
from tinytorch.utils.timing import pinned_threads  # noqa: E402


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
    _opt = Adam(_m.parameters(), lr=1e-3)
    _loader = DataLoader(TensorDataset(X_train, y_train), batch_size=_bs, shuffle=True)
    with pinned_threads(1):  # one BLAS thread: on a busy machine, threads wait for each other's cores
        timed_epoch(_m, _opt, _loader)  # warm-up: first calls, caches, Adam's buffers
        _epochs = [timed_epoch(_m, _opt, _loader) for _ in range(5)]
    # each part's median over five epochs: one slow epoch (another program woke up) moves nothing
    _spent.append({k: float(np.median([e[k] for e in _epochs])) for k in _epochs[0]})
fig, ax = plt.subplots(figsize=(6, 3.4))
_bottom = np.zeros(len(_sizes))
for _key in ["data", "forward", "backward", "step"]:
    _vals = np.array([s[_key] * 1e3 for s in _spent])
    ax.bar([str(s) for s in _sizes], _vals, bottom=_bottom, label=_key)
    _bottom += _vals
ax.set_xlabel("batch size")
ax.set_ylabel("ms per epoch")
ax.set_title("one epoch of the digits MLP (median of 5, after a warm-up)")
ax.legend()
fig.tight_layout()
plt.show()
for _bs, _s in zip(_sizes, _spent):
    print(f"batch {_bs:4d}: " + ", ".join(f"{k} {v * 1e3:6.1f} ms" for k, v in _s.items()))
_ratio = sum(_spent[0].values()) / sum(_spent[-1].values())
print(f"epoch time at batch 16 / at batch 256: measured {_ratio:.1f}x, your guess "
      + ("none" if predicted_epoch_ratio is None else f"{predicted_epoch_ratio:.1f}x"))

# %% [markdown]
# What to look for: the number of steps per epoch falls from 72 (batch 16) to 5 (batch
# 256), while the arithmetic per epoch stays the same. Every step pays fixed costs that do
# not depend on the amount of arithmetic — Python overhead per op in the forward and
# backward passes, the optimizer's loop over parameters (several numpy calls each) — so
# with small batches those should dominate, and the epoch at batch 16 should take several
# times as long as at batch 256 (the printed ratio), the `step` part shrinking most; the
# matrix products of this small MLP are cheap. How large the ratio comes out depends on the
# machine: the faster its Python and the slower its memory, the larger. The data part is
# per *sample* (the DataLoader indexes and stacks one sample at a time), so it changes far
# less with the batch size than the step does. Larger batches
# amortise the per-step overheads, which is why GPUs (module 17) and frameworks push
# towards large batches and fused kernels; the price is fewer optimizer steps per epoch,
# a trade-off between hardware and statistical efficiency that is one of the central
# knobs of training. (BLAS runs on one thread here, so that its threads do not queue
# for the cores of a busy machine; timings still vary: if a bar looks odd, run the cell
# again.)
#
# **Memory.** Parameters are one cost; the other is what autograd keeps alive for the
# backward pass: every node holds its inputs and output (module 06). Count the bytes that
# the graph of one loss holds, apart from the parameters, for growing batches, in the MLP
# `64 → 128 → ReLU → Dropout → 10` (float32).
#
# **Predict first.** Per example the graph keeps the 64 inputs, the 128 hidden values a few
# times over (after `Linear`, after `ReLU`, the dropout mask and its output) and the 10
# logits a couple of times. At batch 1024, about how many times the parameters' bytes is
# that? (Not graded.)

# %%
predicted_graph_over_params = None  # your number: graph bytes / parameter bytes at batch 1024

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
# each batch a copy: a slice is a view of all of X_train, whose storage the graph would count
_act = [graph_bytes(nn.CrossEntropyLoss()(_m(tt.tensor(X_train.numpy()[:b].copy())), y_train[:b]))
        for b in _batch_sizes]
fig, ax = plt.subplots(figsize=(5.5, 3.4))
ax.plot(_batch_sizes, np.array(_act) / 1024, "o-", label="activations held by the graph")
ax.axhline(_param_bytes / 1024, color="C1", ls="--", label="parameters")
ax.set_xscale("log", base=2)
ax.set_yscale("log")  # the parameters' line would sit flat on zero on a linear axis
ax.set_xlabel("batch size")
ax.set_ylabel("KiB")
ax.legend()
fig.tight_layout()
plt.show()
print(f"parameters {_param_bytes / 1024:.1f} KiB; graph at batch 1024: {_act[-1] / 1024:.1f} KiB "
      f"({_act[-1] / _param_bytes:.1f}x the parameters; your guess "
      + ("none" if predicted_graph_over_params is None else f"{predicted_graph_over_params:.1f}x") + ")")

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
# - **`nn.Dropout`** calls `F.dropout`, which draws a Bernoulli mask, scales the survivors
#   and multiplies; on the GPU a fused kernel produces the output and a 1-byte boolean
#   mask in one pass (our float mask costs 4 bytes per element). `model.train()` /
#   `model.eval()` flip the same `training` flag that module 03 gave our `Module`.
# - **`torch.nn.utils.clip_grad_norm_`** computes per-tensor norms with a fused
#   `foreach` kernel and then the norm of norms, exactly our formula (including the 1e-6).
# - **`torch.save`** writes a zip holding a pickle of the object plus one raw file per tensor
#   storage; `torch.load` unpickles it. Since PyTorch 2.6 `weights_only=True` is the default,
#   an unpickler that only accepts tensors and primitive containers. The **safetensors**
#   format (a JSON header with names, dtypes, shapes and offsets, followed by the raw bytes)
#   avoids pickle entirely and can be memory-mapped; it is what the Hugging Face Hub
#   serves, and what our `save` writes, through its numpy API.
# - **Reproducibility**: `torch.manual_seed` seeds the CPU and CUDA generators;
#   `torch.use_deterministic_algorithms(True)` forbids kernels whose results depend on
#   thread timing; DataLoader workers need their own seeds. Our single global numpy
#   generator makes a run exactly reproducible by one `manual_seed` call.
#
# If PyTorch is installed, compare a few steps directly: the same MLP, the same initial
# weights, the same batches, gradients clipped at 0.25 on both sides; then our weights go
# through a safetensors file into the PyTorch model (this cell is skipped otherwise).

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
    import safetensors.torch

    _fresh = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    with tempfile.TemporaryDirectory() as _d:
        save(_ours.state_dict(), os.path.join(_d, "mlp.safetensors"))
        _fresh.load_state_dict(safetensors.torch.load_file(os.path.join(_d, "mlp.safetensors")))
    _xs = X_test[:100]
    with torch.no_grad():
        _tout = _fresh(torch.from_numpy(_xs.numpy().copy())).numpy()
    with tt.no_grad():
        _oout = _ours(_xs).numpy()
    print(f"tinytorch -> mlp.safetensors -> PyTorch: largest output difference {np.abs(_tout - _oout).max():.1e}")

# %% [markdown]
# ## 13. Recap
#
# - A training step is `zero_grad → forward → loss → backward → (clip) → step`; an epoch
#   is one pass over the data; metrics are averaged over *examples*, weighting each batch
#   by its size.
# - `model.train()`/`model.eval()` change what layers compute; `no_grad()` changes what
#   autograd records. Evaluation needs both, and must restore the previous mode.
# - `fit` adds a tqdm progress bar and a `History` of per-epoch numbers whose plot — the
#   learning curves — is the first thing to look at: a widening gap between training and
#   validation loss is overfitting.
# - **Inverted dropout** multiplies by a mask of 0 and your expectation-keeping factor in
#   training, so evaluation is the identity; it is a new op (`"dropout"`, with the mask in
#   its attrs) whose backward rule, `grad * mask`, was registered with module 06 from this
#   module.
# - **Clipping by norm** rescales all gradients together so that their joint norm is at
#   most `max_norm`, keeping their direction; the returned norm is worth logging.
# - **Checkpoints** hold the model's and the optimizer's state (and the scheduler's, the
#   history and the epoch); ours are safetensors files (the tensors, plus the structure as
#   JSON metadata), never pickles, readable by PyTorch's `safetensors.torch.load_file`, and
#   `save_checkpoint` / `load_checkpoint` resume a run bit for bit.
# - Small batches are overhead-bound; activation memory grows with the batch and is why
#   evaluation runs without a graph.
#
# Run `tito test module 08` to check your work against the full test suite.

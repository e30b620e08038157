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
# # Module 04 — Losses: how wrong is the model, in one number
#
# A network turns inputs into predictions. Training needs one more thing: a single number
# that says how bad those predictions are, so that an optimizer can push it down. That number
# is the **loss**. In this module you build the three losses that cover almost all of deep
# learning — mean squared error for regression, binary cross-entropy for yes/no questions and
# cross-entropy for choosing one of C classes (which is also how every language model is
# trained) — as `tinytorch.nn.functional` functions and as `tinytorch.nn` modules.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - derive each loss as a **negative log-likelihood**: MSE from a Gaussian, binary
#   cross-entropy from a Bernoulli, cross-entropy from a categorical distribution;
# - explain why a loss takes **logits** rather than probabilities, and show float32
#   overflowing in the naive formulas;
# - derive a **numerically stable** binary cross-entropy that never forms σ(x), and use
#   **log-sum-exp** for cross-entropy, so that both stay finite at logits of ±10⁴;
# - build cross-entropy by **composition**: log-softmax (module 02) followed by the
#   negative log-likelihood of the target class, with `ignore_index` for padding;
# - derive the gradient cross-entropy sends back to the logits, check it against finite
#   differences, and see why classifiers do not put a squared error after a sigmoid;
# - implement the three **reductions** (`"mean"`, `"sum"`, `"none"`) and error messages that
#   stop the classic loss bugs (silent broadcasting, float class labels);
# - measure what a loss costs: the memory of the `(N, C)` log-probability matrix when C is a
#   vocabulary of 100,000 tokens, and the time of naive versus stable formulas.
#
# ## Prerequisites
#
# - Module 01: `Tensor`, its ops, and the dispatch point `apply(op, forward, *inputs, **attrs)`.
# - Module 02: `log_softmax` (the stable one, built on the max trick).
# - Module 03: `Module` (a loss module is a `Module` whose `forward` calls a function).
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/nn/losses.py` when you run
# `tito export 04` (or `tito test module 04`). The functions are re-exported as
# `tinytorch.nn.functional.mse_loss` etc. and the classes as `tinytorch.nn.MSELoss` etc.
# Cells with `# YOUR CODE HERE` are yours; the **check** cell after each one prints a ✓ or
# says what is wrong.

# %%
#| default_exp nn.losses

# %%
import sys
import time
import tracemalloc
import warnings

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: a loss is a negative log-likelihood
#
# Where do loss functions come from? Not from taste. Almost every loss in use is the answer to
# one question: *if the model's output describes a probability distribution over the target,
# how probable does the model find the targets we actually observed?* **Maximum likelihood**
# picks the parameters θ that make the observed data most probable. Samples are independent,
# so the likelihood is a product, and a product of thousands of small numbers underflows;
# we take logs (a sum), flip the sign (optimizers minimise), and divide by N (so that the
# scale does not depend on the batch size):
#
# $$\mathcal{L}(\theta) = -\frac{1}{N}\sum_{i=1}^{N} \log p_\theta(y_i \mid x_i).$$
#
# The loss is then decided by *which distribution* the network's output parametrises:
#
# | the target is | the model outputs | distribution | −log p(y) | the loss |
# |---|---|---|---|---|
# | a real number | the mean ŷ | Gaussian N(ŷ, σ²) | (y − ŷ)² / 2σ² + const | **MSE** |
# | 0 or 1 | a logit x, p = σ(x) | Bernoulli(p) | −[y log p + (1 − y) log(1 − p)] | **binary cross-entropy** |
# | one of C classes | C logits z, p = softmax(z) | categorical(p) | −log p_y | **cross-entropy** |
#
# - **Gaussian → MSE.** With a fixed σ, the −log of the Gaussian density is the squared error
#   up to a scale and a constant, neither of which moves the minimum. So MSE assumes the
#   errors are Gaussian; one big outlier costs its *square*, which is why MSE is sensitive
#   to outliers.
# - **Bernoulli → BCE.** A coin with probability p of heads gives y = 1 with probability p and
#   y = 0 with probability 1 − p; `p^y (1 − p)^(1 − y)` says both at once, and its −log is
#   binary cross-entropy. The network outputs a **logit** x (any real number) and the sigmoid
#   σ(x) = 1 / (1 + e^(−x)) turns it into p.
# - **Categorical → cross-entropy.** With C classes the network outputs C logits and softmax
#   turns them into probabilities; the likelihood of the observed class y is p_y, and the loss
#   is −log p_y. Only the probability of the *correct* class appears — but softmax couples
#   all classes, so raising p_y lowers all the others.
#
# The pictures: each loss as a function of the model's output.

# %%
_xs = np.linspace(-6, 6, 301)  # small logits: the textbook formulas are fine here in float64
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
axes[0].plot(_xs, _xs ** 2, label="(ŷ − y)², y = 0")
axes[0].plot(_xs, 0.5 * _xs ** 2 + 0.5 * np.log(2 * np.pi), "--",
             label="−log N(y; ŷ, 1)")
axes[0].set_title("MSE: Gaussian")
axes[0].set_xlabel("prediction ŷ")
axes[1].plot(_xs, -np.log(1 / (1 + np.exp(-_xs))), label="y = 1:  −log σ(x)")
axes[1].plot(_xs, -np.log(1 - 1 / (1 + np.exp(-_xs))), label="y = 0:  −log(1 − σ(x))")
axes[1].set_title("BCE: Bernoulli")
axes[1].set_xlabel("logit x")
_others = np.array([1.0, 0.0, -1.0])  # three wrong classes with fixed logits
_lse = np.log(np.exp(_xs) + np.exp(_others).sum())
axes[2].plot(_xs, _lse - _xs, label="−log softmax(z)_y")
axes[2].set_title("CE: categorical (other logits 1, 0, −1)")
axes[2].set_xlabel("logit of the correct class z_y")
for ax in axes:
    ax.set_ylabel("loss")
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Two things to notice. The MSE curve and the Gaussian's −log are the same parabola, shifted
# and scaled. And both cross-entropies are **linear** far on the wrong side (a confident wrong
# answer costs about |x|) and flatten to **0** on the right side: the loss keeps a steady pull
# on a confident mistake but stops caring once an answer is clearly right.
#
# The package file starts here: imports, the public names, and the three reductions.

# %%
#| export
import numpy as np

from tinytorch._tensor import Tensor, apply, broadcast_shapes
from tinytorch.nn.activations import log_softmax
from tinytorch.nn.layers import Module

__all__ = [
    "mse_loss", "binary_cross_entropy_with_logits", "nll_loss", "cross_entropy",
    "MSELoss", "BCEWithLogitsLoss", "NLLLoss", "CrossEntropyLoss",
]

_REDUCTIONS = ("mean", "sum", "none")

# %% [markdown]
# ## 2. Reductions: one number, or one per sample
#
# A loss first computes one value per element (per sample, per pixel, per token), then
# **reduces** them. PyTorch's losses all take `reduction=`:
#
# - `"mean"` (the default): the average. The loss, and so the gradient, does not grow with
#   the batch size, which means the learning rate you tuned for batch 32 still makes sense
#   at batch 256.
# - `"sum"`: the total. Useful when you normalise yourself, e.g. by the number of real
#   tokens across several accumulated batches.
# - `"none"`: the per-element values, unreduced, for weighting or masking samples yourself or
#   looking at the hardest examples.
#
# When some elements count more than others (class weights, ignored padding tokens), the
# mean is a **weighted mean**: Σ wᵢ·lossᵢ / Σ wᵢ. Then `_reduce` receives the per-element
# losses already multiplied by their weights and the `total_weight` Σ wᵢ to divide by.
#
# Anything other than the three strings must be refused with a message that lists them: a
# typo such as `reduction="avg"` that silently did something would cost hours.
#
# Write `_check_reduction(reduction)` and `_reduce(losses, reduction, total_weight=None)`.
# `losses` is a numpy array; the result is a numpy array of the same dtype (0-d for `"mean"`
# and `"sum"`). Every loss of this module ends in `_reduce`, so a mistake here shows up in
# all of them.
#
# <details><summary>Hint 1</summary>
#
# What must `_check_reduction` do with `["mean"]` or `None`? A membership test against a
# list or tuple of the three names says "not one of them", which is right; against a *set*
# it raises TypeError for the unhashable `["mean"]`, which is not the ValueError the
# contract asks for.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A float32 array's `.sum()` is a numpy float32 scalar, but dividing it by a numpy float64 or
# int64 (a total weight summed in float64, a count from numpy) gives float64. Decide the
# result's dtype explicitly at the end.
# </details>
#
# <details><summary>Hint 3</summary>
#
# A weighted mean is the sum of the (already weighted) losses divided by `total_weight`, not
# by the number of elements. When every target is ignored, that is 0 / 0: PyTorch returns
# nan, and so should you, without a numpy warning (numpy's `errstate` context silences it).
# </details>
#
# <details><summary>The approach</summary>
#
# Every loss ends here, so decide once what each reduction means and what it returns: the
# same dtype in as out (a float32 loss must not come back float64), and a 0-d array for the
# two that reduce. A weighted mean is not the mean of weighted losses: what is it divided
# by? And a mean over nothing is a real case (a batch of padding), not an error.
# </details>

# %% nbgrader={"grade": false, "grade_id": "reduction", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_reduction(reduction):
    """Refuse anything that is not one of the three reductions.

    Contract: returns None when `reduction` is exactly "mean", "sum" or "none". Anything
    else (another string, a wrong case, None, a number, a list) raises ValueError; the
    message names the value it got and lists the three valid options, each in quotes.
    """
    # Idea: a typo in an option must fail loudly, never quietly pick a default.
    ### BEGIN SOLUTION
    if not isinstance(reduction, str) or reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of 'mean', 'sum' or 'none', not {reduction!r}")
    ### END SOLUTION


def _reduce(losses, reduction, total_weight=None):
    """Reduce a numpy array of per-element losses.

    Contract: `losses` is a numpy array, `reduction` one of the three (checked here, same
    error as _check_reduction), `total_weight` None or a number. Returns a numpy array of
    losses.dtype: "none" -> the losses unchanged; "sum" -> their sum, 0-d; "mean" -> 0-d,
    their sum divided by `total_weight` when it is given, else by the number of elements.
    A mean over nothing (no elements, or total weight 0) is nan, with no warning printed.
    """
    # Idea: one place that every loss ends in, so the three reductions mean the same
    # thing everywhere; a weighted mean divides by the weight, not by the count.
    ### BEGIN SOLUTION
    _check_reduction(reduction)
    losses = np.asarray(losses)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return np.asarray(losses.sum(), dtype=losses.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        if total_weight is None:
            value = losses.sum() / losses.size if losses.size else np.nan
        else:
            value = losses.sum() / total_weight
    return np.asarray(value, dtype=losses.dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-reduction", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_l = np.array([[1.0, 2.0], [3.0, 6.0]], dtype=np.float32)   # sum 12, mean 3: they differ
for _r, _want in [("sum", 12.0), ("mean", 3.0)]:
    _got = _reduce(_l, _r)
    assert_equal(_got.shape, (), f"_reduce(losses, {_r!r}) is a 0-d array")
    assert_equal(_got.dtype, np.dtype(np.float32), f"_reduce(float32 losses, {_r!r}) keeps float32")
    assert_close(_got, _want, what=f"_reduce([[1, 2], [3, 6]], {_r!r})")
assert_equal(_reduce(_l, "none"), _l, "'none' gives the per-element losses back")
assert_equal(_reduce(_l, "none").dtype, np.dtype(np.float32), "_reduce(float32 losses, 'none') keeps float32")
# a weighted mean: the weighted losses sum to 2.0, the weights to 1.0 (two samples, weights 1 and 0)
assert_close(_reduce(np.array([2.0, 0.0]), "mean", total_weight=1.0), 2.0,
             what="weighted mean = sum / total_weight (not sum / number of elements = 1.0)")
assert_close(_reduce(_l, "mean", total_weight=np.float32(8.0)), 1.5, what="sum 12 / total weight 8")
for _tw in (8, np.int64(8), 8.0):  # a count (an int64, as a mask's sum gives) or a Python float
    assert_equal(_reduce(_l, "mean", total_weight=_tw).dtype, np.dtype(np.float32),
                 f"_reduce(float32 losses, 'mean', total_weight={_tw!r} of type {type(_tw).__name__}): the losses' "
                 "dtype, whatever the weight's type")
assert_close(_reduce(_l, "sum", total_weight=8.0), 12.0,
             what="'sum' with a total_weight is still the plain sum (the weight only divides a mean)")
check(np.isnan(_reduce(np.zeros(3), "mean", total_weight=0.0)),
      "a mean over total weight 0 (every target ignored) is nan, as in PyTorch",
      got=_reduce(np.zeros(3), "mean", total_weight=0.0), expected=np.nan)
with warnings.catch_warnings(record=True) as _caught:
    warnings.simplefilter("always")
    _empty = _reduce(np.zeros(0, np.float32), "mean")
    _reduce(np.zeros(3, np.float32), "mean", total_weight=0.0)
check(np.isnan(_empty), "a mean over no elements is nan", got=_empty, expected=np.nan)
check(not _caught, "a mean over nothing prints no warning", got=[str(w.message) for w in _caught], expected=[])
_check_reduction("none")
for _bad in ["avg", "Mean", None, 1, ["mean"]]:
    for _fn, _args in [(_check_reduction, (_bad,)), (_reduce, (_l, _bad))]:
        _e = assert_raises(ValueError, _fn, *_args, what=f"{_fn.__name__}(reduction={_bad!r})")
        check(all(o in str(_e) for o in ("'mean'", "'sum'", "'none'")),
              "the message lists the three options 'mean', 'sum' and 'none'", got=str(_e))
print("✓ _check_reduction, _reduce: sum 12.0, mean 3.0, weighted mean 2.0, 'avg' refused")

# %% [markdown]
# ## 3. Mean squared error
#
# $$\text{MSE}(\hat y, y) = \frac{1}{n}\sum_{i} (\hat y_i - y_i)^2$$
#
# over all n elements (with `"mean"`). The math is one line. The interesting part is what
# to **refuse**.
#
# ### Why a loss must not broadcast
#
# A regression network usually ends in `Linear(d, 1)`, so its predictions have shape
# `(N, 1)`; the targets from a dataset often have shape `(N,)`. Subtracting them
# broadcasts to `(N, N)`: every prediction is compared with **every** target. The loss is a
# finite, plausible-looking number, training runs, and the model learns to predict the
# mean of the whole batch. Watch:

# %%
_rng = np.random.default_rng(0)
_pred = _rng.standard_normal((4, 1))            # Linear(d, 1) output: shape (4, 1)
_target = _pred[:, 0] + 0.01                   # targets: shape (4,), almost perfect predictions
print("right MSE (shapes aligned):", np.mean((_pred[:, 0] - _target) ** 2))
print("broadcast MSE, shape", (_pred - _target).shape, ":", np.mean((_pred - _target) ** 2))

# %% [markdown]
# Nearly perfect predictions, and the broadcast "loss" is large. PyTorch's `mse_loss`
# prints a warning in this case and broadcasts anyway; tinytorch **refuses**, with a
# message that names both shapes and says why. The target of a regression must be a floating
# tensor (an int64 target is usually a classification label given to the wrong loss). Two
# floating dtypes are fine: as in PyTorch, the provided wrappers promote both to the wider
# one (float32 and float64 give float64) before your check runs.
#
# Write `_check_pointwise(name, input, target)`, used by MSE and by BCE (section 4). It
# refuses a non-floating input, a non-floating target (say how to convert it) and two
# different shapes (name both shapes and say that a loss does not broadcast). Each message
# starts with `name` (`"mse_loss: ..."`), so the user knows which call failed. When a call
# has two of these mistakes at once, which should its author hear about first?
#
# Then write `_mse_forward(input, target, reduction)`: the per-element squared error,
# reduced with your `_reduce`. The provided `mse_loss` checks its arguments and dispatches
# your forward as the op `"mse_loss"`, recording `reduction` as an attribute, which is what
# module 06's backward rule will need (∂/∂ŷ = 2(ŷ − y)/n for the mean).
#
# <details><summary>Hint 1</summary>
#
# A numpy dtype has a `kind`: one letter that tells floating from signed, unsigned and bool
# dtypes, whatever the width.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The contract fixes which mistake is reported first when there are several. Why that
# order? Take an int64 target of the wrong shape: after fixing only the shape, would the
# call work?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Shapes are tuples; `(4, 1)` and `(4,)` are different tuples even though they broadcast.
# Put both tuples in the message as Python prints them, and suggest a fix (squeeze one or
# unsqueeze the other).
# </details>
#
# <details><summary>The approach</summary>
#
# Check in the contract's order and stop at the first mistake: a tensor of the wrong kind
# needs converting whatever its shape, so its message comes first. The forward itself is
# the definition; everything it needs is already checked.
# </details>

# %% nbgrader={"grade": false, "grade_id": "mse", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_tensor(name, what, x):
    """TypeError unless x is a tinytorch Tensor (losses take tensors, as in PyTorch)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: {what} must be a tinytorch Tensor, got {type(x).__name__}")


def _promote_floats(input, target):
    """PyTorch's type promotion for a loss's two floating tensors: both become the wider
    dtype (float32 with float64 gives float64), through `.to`, which autograd follows."""
    if input.dtype.kind == "f" and target.dtype.kind == "f" and input.dtype != target.dtype:
        wide = np.promote_types(input.dtype, target.dtype)
        return input.to(wide), target.to(wide)
    return input, target


def _check_pointwise(name, input, target):
    """For elementwise losses: floating input and target of one shape.

    Contract: `name` is the calling loss's name, `input` and `target` are Tensors (two
    floating dtypes were already promoted to one). Returns None when both are floating and
    of the same shape. Otherwise one error, its message starting with `name`: TypeError for
    a tensor that is not floating (naming that tensor, input or target, and its dtype; for
    target, the fix: `target.float()`), ValueError for shapes that differ (naming both and
    saying a loss does not broadcast). When several things are wrong, the first in this
    order is reported: the input's dtype, the target's dtype, the shapes (a dtype must be
    fixed whatever the shape; PyTorch's own order differs from loss to loss).
    """
    # Idea: a loss that broadcasts (N, 1) against (N,) compares every prediction with every
    # target and still returns a plausible number; refuse it, and say why.
    ### BEGIN SOLUTION
    if input.dtype.kind != "f":
        raise TypeError(f"{name}: input must be a floating tensor (float32 or float64), "
                        f"got {input.dtype}")
    if target.dtype.kind != "f":
        raise TypeError(f"{name}: target must be a floating tensor, got {target.dtype}; "
                        f"convert it with target.float()")
    if input.shape != target.shape:
        raise ValueError(
            f"{name}: input shape {input.shape} and target shape {target.shape} differ; a loss "
            f"does not broadcast (an (N, 1) prediction against an (N,) target would compare every "
            f"prediction with every target). Reshape one of them, e.g. input.squeeze(1) or "
            f"target.unsqueeze(1).")
    ### END SOLUTION


def _mse_forward(input, target, reduction):
    """Forward of mse_loss.

    Contract: `input`, `target` are Tensors already checked by _check_pointwise; returns a
    numpy array of input's dtype: the squared differences, reduced by `_reduce`.
    """
    # Idea: a Gaussian's -log density is the squared error; the reduction is _reduce's job.
    ### BEGIN SOLUTION
    diff = input.numpy() - target.numpy()
    return _reduce(diff * diff, reduction)
    ### END SOLUTION


def mse_loss(input, target, *, reduction="mean"):
    """Mean squared error between `input` and `target` (same shape and dtype).

    Mirrors torch.nn.functional.mse_loss, except that different shapes are an error here
    (PyTorch only warns and broadcasts).
    """
    _check_reduction(reduction)
    _check_tensor("mse_loss", "input", input)
    _check_tensor("mse_loss", "target", target)
    input, target = _promote_floats(input, target)
    _check_pointwise("mse_loss", input, target)
    return apply("mse_loss", _mse_forward, input, target, reduction=reduction)


# %% nbgrader={"grade": true, "grade_id": "test-mse", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
_b = np.array([[1.5, 2.0, 2.0], [4.0, 7.0, 6.0]], dtype=np.float32)   # differences -0.5, 0, 1, 0, -2, 0
_out = mse_loss(Tensor(_a), Tensor(_b))
assert_equal(_out.shape, (), "mse_loss(...) with 'mean' is 0-d")
assert_equal(_out.dtype, np.dtype(np.float32), "mse_loss keeps float32")
assert_close(_out.item(), 5.25 / 6, what="mean of the squared differences (0.25 + 1 + 4) / 6")
assert_close(mse_loss(Tensor(_a), Tensor(_b), reduction="sum").item(), 5.25, what="'sum': 0.25 + 1 + 4")
assert_close(mse_loss(Tensor(_a), Tensor(_b), reduction="none"), (_a - _b) ** 2, what="'none': squares")
for _sa, _sb in [((4, 1), (4,)), ((4, 1), (1, 4)), ((5, 3), (3,))]:   # each pair would broadcast
    _e = assert_raises(ValueError, mse_loss, Tensor(np.zeros(_sa, np.float32)), Tensor(np.zeros(_sb, np.float32)),
                       what=f"mse_loss({_sa} input, {_sb} target)")
    check(str(_sa) in str(_e) and str(_sb) in str(_e) and "broadcast" in str(_e) and "mse_loss" in str(_e),
          "the shape message names mse_loss, both shapes and the word 'broadcast'", got=str(_e))
for _input, _target, _names in [(Tensor([1.0, 2.0]), Tensor([1, 2]), ["int64", ".float()"]),
                                (Tensor([1, 2]), Tensor([1.0, 2.0]), ["int64"]),
                                (Tensor([1.0, 2.0]), Tensor([[1], [2]]), ["int64", ".float()"]),
                                (Tensor([[1], [2]]), Tensor([1.0, 2.0]), ["int64"])]:
    _e = assert_raises(TypeError, mse_loss, _input, _target,
                       what=f"mse_loss({_input.dtype} input, {_target.dtype} target)")
    check(all(n in str(_e) for n in _names), f"the message names {_names}", got=str(_e))
assert_equal(mse_loss(Tensor([1.0, 2.0]), Tensor([1.0, 4.0], dtype=np.float64)).dtype, np.dtype(np.float64),
             "float32 input, float64 target: promoted to float64, as in PyTorch")
_w = Tensor(_a, requires_grad=True)
_node = mse_loss(_w, Tensor(_b), reduction="sum").grad_fn
check(_node is not None and _node.op == "mse_loss" and _node.attrs["reduction"] == "sum",
      "mse_loss records one 'mse_loss' node with its reduction", got=_node and (_node.op, _node.attrs))
print(f"✓ mse_loss: mean {_out.item():.4f}, sum 5.25, (4, 1) against (4,) refused")

# %% [markdown]
# ## 4. Binary cross-entropy, from logits
#
# ### Why the loss takes logits, not probabilities
#
# The textbook formula is `−[y·log σ(x) + (1 − y)·log(1 − σ(x))]`. Compute it in float32
# the obvious way — sigmoid first, then log — and it breaks at logits that real networks do
# produce:
#
# - **y = 0, x ≳ 16.7**: e^(−x) < 6·10⁻⁸ is less than half the gap between 1 and the next
#   float32 (2⁻²³ ≈ 1.2·10⁻⁷), so `1 + e^(−x)` *rounds to exactly 1.0*, σ(x) = 1.0, then
#   `1 − σ(x) = 0` and `log 0 = −∞`. The loss is `inf` although the true value is just ≈ x.
# - **y = 1, x below about −88.7**: `e^(−x)` exceeds float32's maximum (≈ 3.4·10³⁸, which
#   is e^88.72), so it overflows to `inf`, σ(x) = 1/∞ = 0, and again `log 0 = −∞`.
#
# One `inf` in a loss is `nan` in every gradient, and the run is dead. Let us see it:

# %%
with np.errstate(over="ignore"):
    print("float32 max:", np.finfo(np.float32).max, "| exp(89) in float32:", np.exp(np.float32(89.0)))
print("sigmoid(17) in float32 == 1.0:", np.float32(1) / (1 + np.exp(np.float32(-17))) == 1)

_x32 = np.linspace(-120, 120, 2001, dtype=np.float32)
with np.errstate(over="ignore", divide="ignore"):
    _sig = np.float32(1) / (np.float32(1) + np.exp(-_x32))
    _naive_y1 = -np.log(_sig)
    _naive_y0 = -np.log(np.float32(1) - _sig)


def draw_bce(axes, stable=None):
    """The naive float32 BCE for y = 1 and y = 0, its inf points marked; `stable(x, y)`, if
    given, drawn under it."""
    for ax, naive, y, formula in [(axes[0], _naive_y1, 1, "−log σ(x)"), (axes[1], _naive_y0, 0, "−log(1 − σ(x))")]:
        if stable is not None:
            ax.plot(_x32, stable(_x32, y), lw=3, alpha=0.5, label="your stable form")
        ax.plot(_x32, np.where(np.isfinite(naive), naive, np.nan), "--", label=f"naive: {formula} in float32")
        bad = ~np.isfinite(naive)
        # inf has no place on the axis: mark those logits along the top edge of the panel
        ax.plot(_x32[bad], np.full(bad.sum(), 0.97), "rx", ms=3, transform=ax.get_xaxis_transform(),
                label=f"naive = inf ({bad.sum()} points, marked at the top)")
        ax.set_title(f"BCE with y = {y}")
        ax.set_xlabel("logit x")
        ax.set_ylabel("loss")
        ax.legend(fontsize=8)


fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
draw_bce(axes)
fig.tight_layout()
plt.show()
print("first x where the naive y=0 loss is inf:", _x32[~np.isfinite(_naive_y0)].min())
print("last x where the naive y=1 loss is inf:", _x32[~np.isfinite(_naive_y1)].max())

# %% [markdown]
# ### A stable form: yours to derive
#
# Work with the logit x all the way, never forming σ(x). Three facts are enough:
#
# - 1 − σ(x) = σ(−x), and −log σ(t) = log(1 + e^(−t));
# - log(1 + eᵗ) is about t when t is large and positive, and about eᵗ when t is large and
#   negative: one expression has to behave like both, with an exponent that is never
#   positive on either side;
# - `np.log1p(z)` computes log(1 + z) accurately for tiny z (plain `log(1 + z)` first rounds
#   1 + 1e-30 to 1, and returns 0).
#
# Derive, on paper, a form of ℓ in x and y in which no exponent is ever positive (so that
# nothing overflows and no log sees 0), and check it at x = ±1000 with y = 0 and y = 1.
# One more requirement makes it accurate, not just finite: no two large numbers may be
# subtracted when the answer is small. A confident right answer, y = 0 and x = −50, has
# the true loss log(1 + e^(−50)) ≈ 2·10⁻²², and your form must return that, not 0 (a form
# that computes 50 + 2·10⁻²² and then subtracts 50 returns 0).
#
# ### Weights
#
# `binary_cross_entropy_with_logits` takes two optional weights, both broadcast against the
# input (they must not change its shape):
#
# - `weight` multiplies each element's loss (e.g. to mask some outputs);
# - `pos_weight` multiplies only the **positive** term, y·(−log σ(x)). With 10 negatives for
#   each positive, `pos_weight=10` makes both classes count equally. Write the loss as its
#   two terms, the positive one scaled:
#
# $$\ell = -\left[\text{pos\_weight}\cdot y\cdot \log\sigma(x) + (1-y)\log(1 - \sigma(x))\right],$$
#
#   each term needing the same care as before.
#
# Write `_bce_with_logits_forward(input, target, weight, pos_weight, reduction)`. `input`
# and `target` are Tensors (use `.numpy()`); `weight` and `pos_weight` are numpy arrays of
# the input's dtype that broadcast to the input's shape, or `None`.
#
# <details><summary>Hint 1</summary>
#
# Never form σ(x). Each term of ℓ is log(1 + eᵗ) for some t: which t for the y-term, and
# which for the (1 − y)-term? Factored, each is max(t, 0) plus a tail, and the two tails
# are the same. Why?
# </details>
#
# <details><summary>Hint 2</summary>
#
# After factoring, each tail is log(1 + e^(t − max(t, 0))). Tabulate t − max(t, 0) for
# t = x and for t = −x, once with x > 0 and once with x < 0: which one expression in x
# gives all four entries? The prose's third fact says how to take the log of one plus
# something tiny.
# </details>
#
# <details><summary>Hint 3</summary>
#
# `pos_weight` scales the y-term (the positive one), `weight` scales the whole per-element
# loss. With `pos_weight` the two terms must stay apart; without it they may merge into one
# cheaper expression, but keeping them apart is right too.
# </details>
#
# <details><summary>The approach</summary>
#
# Each term is a log(1 + eᵗ) for some t, and your factoring turns each into a max plus a
# tail that the two terms share: compute the tail once. Scale the positive term, then the
# whole loss, and reduce with `_reduce` (no total weight: PyTorch's BCE mean is a plain
# mean even with weights).
# </details>

# %% nbgrader={"grade": false, "grade_id": "bce", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _bce_with_logits_forward(input, target, weight, pos_weight, reduction):
    """Forward of binary_cross_entropy_with_logits, in the stable form.

    Contract: `input` (logits) and `target` (probabilities in [0, 1]) are Tensors of one
    shape and floating dtype; `weight`, `pos_weight` are None or numpy arrays that broadcast
    to that shape. Returns a numpy array of input's dtype: per element
    −[pos_weight·y·log σ(x) + (1 − y)·log(1 − σ(x))], times weight, reduced by _reduce.
    Finite for every finite logit (±1e4 included); a tiny loss stays positive, not 0.
    """
    # Idea: stay in logit space; every exponent you compute must be <= 0.
    ### BEGIN SOLUTION
    x, y = input.numpy(), target.numpy()
    tail = np.log1p(np.exp(-np.abs(x)))
    if pos_weight is None:
        losses = np.maximum(x, 0) - x * y + tail
    else:
        losses = pos_weight * y * (np.maximum(-x, 0) + tail) + (1 - y) * (np.maximum(x, 0) + tail)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)
    ### END SOLUTION


def _elementwise_weight(name, what, w, input):
    """None, or `w` as a numpy array of input's dtype that broadcasts to input's shape."""
    if w is None:
        return None
    arr = np.asarray(w.numpy() if isinstance(w, Tensor) else w)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name}: {what} must be numeric, got {arr.dtype}")
    try:
        shape = broadcast_shapes(arr.shape, input.shape)
    except ValueError:
        shape = None
    if shape != input.shape:
        raise ValueError(f"{name}: {what} of shape {arr.shape} must broadcast to the input's "
                         f"shape {input.shape} without changing it")
    return np.array(arr, dtype=input.dtype)


def binary_cross_entropy_with_logits(input, target, weight=None, *, reduction="mean", pos_weight=None):
    """Binary cross-entropy between sigmoid(input) and target, computed stably from the logits.

    `target` holds probabilities in [0, 1] (same shape and dtype as input); `weight` scales
    each element's loss, `pos_weight` the positive term. Mirrors
    torch.nn.functional.binary_cross_entropy_with_logits.
    """
    name = "binary_cross_entropy_with_logits"
    _check_reduction(reduction)
    _check_tensor(name, "input", input)
    _check_tensor(name, "target", target)
    input, target = _promote_floats(input, target)
    _check_pointwise(name, input, target)
    w = _elementwise_weight(name, "weight", weight, input)
    pw = _elementwise_weight(name, "pos_weight", pos_weight, input)
    return apply(name, _bce_with_logits_forward, input, target,
                 weight=w, pos_weight=pw, reduction=reduction)


# %% nbgrader={"grade": true, "grade_id": "test-bce", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _bce_reference(x, y, pw=1.0):  # float64 textbook formula, fine at moderate logits
    x, y = x.astype(np.float64), y.astype(np.float64)
    p = 1 / (1 + np.exp(-x))
    return -(pw * y * np.log(p) + (1 - y) * np.log(1 - p))


_x = np.array([[-3.0, -0.5, 0.0], [0.25, 2.0, 5.0]], dtype=np.float32)
_y = np.array([[0.0, 1.0, 0.5], [1.0, 0.0, 1.0]], dtype=np.float32)   # hard and soft targets
_bce = binary_cross_entropy_with_logits
_out = _bce(Tensor(_x), Tensor(_y))
assert_equal(_out.shape, (), "BCE with 'mean' is 0-d")
assert_equal(_out.dtype, np.dtype(np.float32), "BCE keeps float32")
assert_close(_out.item(), _bce_reference(_x, _y).mean(), what="BCE mean vs the textbook formula")
assert_close(_bce(Tensor(_x), Tensor(_y), reduction="none"), _bce_reference(_x, _y), what="BCE per element")
_pw = np.array([1.0, 3.0, 0.5], dtype=np.float32)   # pos_weight per column: scales only the y-term
assert_close(_bce(Tensor(_x), Tensor(_y), pos_weight=Tensor(_pw), reduction="none"),
             _bce_reference(_x, _y, _pw), what="BCE with pos_weight [1, 3, 0.5] (the positive term only)")
assert_close(_bce(Tensor(_x), Tensor(_y), Tensor(_pw), reduction="sum").item(),
             (_bce_reference(_x, _y) * _pw).sum(), what="BCE with weight [1, 3, 0.5] (the whole loss), 'sum'")
assert_close(_bce(Tensor(_x), Tensor(_y), Tensor(_pw)).item(), (_bce_reference(_x, _y) * _pw).mean(),
             what="BCE with weight [1, 3, 0.5], 'mean': a plain mean of the weighted losses (PyTorch's), not / sum(w)")
# logits of ±1e4: a right answer costs 0, a wrong one |x|; sigmoid-then-log gives inf here
_l = _bce(Tensor(np.array([1e4, -1e4, 1e4, -1e4], np.float32)), Tensor([1.0, 0.0, 0.0, 1.0]), reduction="none")
check(np.all(np.isfinite(_l.numpy())), "BCE is finite at logits of ±1e4", got=_l)
assert_close(_l, np.array([0.0, 0.0, 1e4, 1e4], np.float32), what="BCE at logits ±1e4, targets 1, 0, 0, 1")
_tiny = _bce(Tensor([-50.0]), Tensor([0.0]), reduction="none").item()
check(0 < _tiny < 1e-20, "a confident right answer (x = -50, y = 0) costs about 2e-22, not exactly 0",
      got=_tiny, expected=float(np.log1p(np.exp(-50.0))))
print(f"✓ binary_cross_entropy_with_logits: mean {_out.item():.4f}, finite at ±1e4, tiny loss {_tiny:.2e}")

# %% [markdown]
# Your form against the naive one, over the same logits as the first picture:

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
draw_bce(axes, lambda x, y: binary_cross_entropy_with_logits(Tensor(x), Tensor(np.full_like(x, y)),
                                                             reduction="none").numpy())
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 5. Cross-entropy: log-sum-exp, then pick the target class
#
# With C classes the model outputs logits z ∈ ℝ^C per sample and
#
# $$\text{CE}(z, y) = -\log \operatorname{softmax}(z)_y = -z_y + \log\sum_{j=1}^{C} e^{z_j}.$$
#
# The second term is **log-sum-exp**, and it has the same problem as the sigmoid: e^{z_j}
# overflows float32 as soon as a logit passes 88.7. The fix is to factor out the largest
# logit m = max_j z_j:
#
# $$\log\sum_j e^{z_j} = \log\Big(e^{m}\sum_j e^{z_j - m}\Big) = m + \log\sum_j e^{z_j - m}.$$
#
# Now every exponent is ≤ 0 (nothing overflows), and the largest term is e⁰ = 1 (the sum is
# ≥ 1, so its log is never log 0). You wrote exactly this in module 02's `log_softmax`, which
# returns z_j − LSE(z) for every class. So cross-entropy is **two ops**:
#
# 1. `logp = log_softmax(z, dim=1)` — stable log-probabilities;
# 2. `nll_loss(logp, y)` — the **negative log-likelihood**: pick −logp[i, yᵢ] for each sample,
#    then reduce.
#
# Keeping them separate is also PyTorch's design: `nll_loss` is the loss to use when a
# model already outputs log-probabilities (e.g. ends in `LogSoftmax`), `cross_entropy` is the
# one to use on raw logits.
#
# ### Targets are class indices
#
# A target is the **index** of the correct class, an int64 in `0 … C−1`, not a one-hot
# vector: for a vocabulary of 100,000 tokens a one-hot target would be 100,000 floats per
# token to say one number. Shapes follow PyTorch, with the class dimension at position 1:
#
# | input (logits or log-probs) | target | `reduction="none"` gives |
# |---|---|---|
# | `(C,)` | `()` | `()` |
# | `(N, C)` | `(N,)` | `(N,)` |
# | `(N, C, d1, …)` e.g. `(batch, vocab, seq)` or `(batch, classes, H, W)` | `(N, d1, …)` | `(N, d1, …)` |
#
# ### ignore_index: padding does not count
#
# Sequences in a batch have different lengths, so the short ones are padded. The padding
# positions must not count in the loss: their target is set to `ignore_index` (−100 by
# default); they contribute 0, and the **mean divides by the number of real targets**, not
# by N. With class weights w (`weight=`, one per class) the mean is Σ w_{yᵢ}·lossᵢ / Σ w_{yᵢ}
# over the non-ignored positions — the weighted mean from section 2.
#
# ### Errors that teach
#
# Write `_check_class_targets(name, input, target, ignore_index)`. Its contract is in the
# docstring; the mistakes it is there to stop are the classic classification bugs: a float
# label tensor (the loss needs int64 indices; say to use `target.long()`), a target for the
# wrong batch, a target of the wrong shape, and a class index that does not exist. The last
# one matters most: without a check, numpy would pick some other element, and a negative
# index would silently count from the end of the row.
#
# <details><summary>Hint 1</summary>
#
# The expected target shape is the input's shape with dimension 1 (the class dimension)
# removed, and `()` for a 1-D input. Where is the number of classes C in each case?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Two shape mistakes are worth telling apart: a different batch size (dimension 0: the
# message names both sizes and says "batch"), and any other difference. Both messages name
# both full shapes.
# </details>
#
# <details><summary>Hint 3</summary>
#
# A valid entry is in 0 … C−1 *or* equals `ignore_index` (which may be −100, or a real class
# such as 0 for padding). Build one boolean mask of the bad entries, vectorised, and report
# the first one.
# </details>
#
# <details><summary>The approach</summary>
#
# Start from what the target should be, given the input: its shape is the input's without
# the class dimension, and its values index that dimension. Each way of being wrong gets
# its own message, most fundamental first (a float label is a different mistake from a
# label out of range). ignore_index is allowed anywhere, even outside 0..C-1.
# </details>

# %% nbgrader={"grade": false, "grade_id": "class-targets", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_class_targets(name, input, target, ignore_index):
    """Check int64 class-index targets against input of shape (C,), (N, C) or (N, C, d1, ...).

    Contract: `input` and `target` are Tensors. Returns None when the target fits the input
    (the table above: shape and values). Otherwise one error, its message starting with `name`:
    - TypeError for a dtype that cannot work: an input that is not floating (the message says
      "floating"), a target that is not int64 (names int64 and suggests target.long());
    - ValueError for a shape that cannot work: a 0-d input (it needs a class dimension), a
      target of the wrong shape (the message names both shapes; when the batch sizes differ,
      it also names both batch sizes and says "batch");
    - IndexError for a target value that names no class and is not ignore_index (the message
      names the first such value and the number of classes C).
    When several things are wrong, the first in this order is reported: the input's dtype,
    a 0-d input, the target's dtype, the target's shape (the batch size first), its values
    (a mistake whose fix is needed whatever else is wrong comes first; not always PyTorch's
    order).
    """
    # Idea: the target has the input's shape minus the class dimension, and holds indices
    # into that dimension.
    ### BEGIN SOLUTION
    if input.dtype.kind != "f":
        raise TypeError(f"{name}: input must be a floating tensor of logits or log-probabilities, "
                        f"got {input.dtype}")
    if input.ndim == 0:
        raise ValueError(f"{name}: input needs a class dimension; got a 0-d tensor")
    if target.dtype != np.int64:
        raise TypeError(
            f"{name}: target must hold class indices of dtype int64, got {target.dtype}; use "
            f"target.long() (tinytorch takes class indices, not class probabilities)")
    expected = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if target.ndim != len(expected):
        raise ValueError(
            f"{name}: input of shape {input.shape} needs a target of shape {expected} "
            f"({len(expected)} dims: the input's shape without the class dimension 1), "
            f"got target of shape {target.shape}")
    if expected and target.shape[0] != expected[0]:
        raise ValueError(
            f"{name}: batch sizes differ: input has {input.shape[0]} (shape {input.shape}) but "
            f"target has {target.shape[0]} (shape {target.shape})")
    if target.shape != expected:
        raise ValueError(f"{name}: target shape {target.shape} does not match input shape "
                         f"{input.shape}: expected {expected}")
    n_classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    t = target.numpy()
    bad = (t != ignore_index) & ((t < 0) | (t >= n_classes))
    if bad.any():
        raise IndexError(
            f"{name}: target value {t[bad][0]} is out of range for {n_classes} classes; class "
            f"indices must be in 0..{n_classes - 1} (or equal ignore_index={ignore_index})")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-class-targets", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_z = Tensor(np.zeros((4, 5), dtype=np.float32))   # N = 4 samples, C = 5 classes
# these fit: indices in 0..4 or ignore_index; (N, C, d1) with (N, d1); (C,) with a 0-d target
for _args, _why in [(("nll_loss", _z, Tensor([0, 4, 2, -100]), -100), "classes 0..4 and ignore_index -100"),
                    (("nll_loss", _z, Tensor([0, 4, 9, 2]), 9), "ignore_index=9, outside 0..C-1, as a target"),
                    (("nll_loss", Tensor(np.zeros((2, 3, 7), np.float32)), Tensor(np.zeros((2, 7), np.int64)), -100),
                     "a (2, 3, 7) input with a (2, 7) target"),
                    (("nll_loss", Tensor(np.zeros(3, np.float32)), Tensor(2), -100), "a (3,) input with a 0-d target")]:
    try:
        _check_class_targets(*_args)
    except Exception as _exc:  # any refusal of a target that fits is the mistake to report
        check(False, f"{_why} fits: it must be accepted", got=f"{type(_exc).__name__}: {_exc}", expected="None")
for _exc, _must, _args in [
        (TypeError, ["int64", ".long()"], ("cross_entropy", _z, Tensor([0.0, 1.0, 2.0, 3.0]), -100)),
        (TypeError, ["int64", ".long()"], ("nll_loss", _z, Tensor(np.arange(4, dtype=np.int32)), -100)),
        (TypeError, ["floating"], ("nll_loss", Tensor(np.zeros((4, 5), np.int64)), Tensor([0, 1, 2, 3]), -100)),
        (ValueError, ["class dimension"], ("nll_loss", Tensor(1.0), Tensor(0), -100)),
        (TypeError, ["floating"], ("nll_loss", Tensor(1), Tensor(0), -100)),   # 0-d and int: the dtype first
        (IndexError, ["7", "5"], ("nll_loss", _z, Tensor([0, 7, 1, 1]), -100)),
        (IndexError, ["6", "5"], ("nll_loss", _z, Tensor([0, 6, 9, 1]), -100)),   # the first bad value, 6
        (IndexError, ["-1", "5"], ("nll_loss", _z, Tensor([0, -1, 1, 1]), -100)),   # not "the last class"
        (IndexError, ["5 classes"], ("nll_loss", _z, Tensor([0, 5, 1, 1]), -100)),   # C itself is out of range
        (ValueError, ["batch", "4", "3"], ("nll_loss", _z, Tensor([0, 1, 2]), -100)),
        (ValueError, ["(4, 5)", "(4, 2)"], ("nll_loss", _z, Tensor(np.zeros((4, 2), np.int64)), -100)),
        (ValueError, ["(2, 3, 7)", "(2, 6)"], ("nll_loss", Tensor(np.zeros((2, 3, 7), np.float32)),
                                             Tensor(np.zeros((2, 6), np.int64)), -100)),
        (TypeError, ["int64", ".long()"], ("nll_loss", _z, Tensor([0.0, 1.0, 2.0]), -100)),
        (ValueError, ["batch", "4", "3"], ("nll_loss", _z, Tensor([0, 9, 1]), -100))]:
    _e = assert_raises(_exc, _check_class_targets, *_args,
                       what=f"{_args[0]}: {_args[1].shape} input, {_args[2].dtype} target {_args[2].shape}")
    check(all(m in str(_e) for m in _must) and str(_e).startswith(_args[0]),
          f"the message starts with {_args[0]!r} and mentions {_must}", got=str(_e))
print("✓ _check_class_targets: float labels, bad batch and shapes, class 7 of 5 and -1 refused")

# %% [markdown]
# ### nll_loss
#
# Now the gather. Given log-probabilities `logp` of shape `(N, C, d1, …)` and targets `t` of
# shape `(N, d1, …)`, each position needs `−logp[i, t[i, k], k]`: the entry of the target
# class along **dimension 1**, with no Python loop over samples.
#
# Ignored positions need care. Their target (−100) is not a valid index, so it cannot be
# used to gather; they contribute a loss of exactly 0 and a weight of 0, and the mean
# divides by the **sum of the weights of the real targets** (their count when there are no
# class weights). An ignored position's log-probability may even be −∞ (a masked-out
# class): 0 · (−∞) is nan, so "contribute 0" must not be done by multiplying by 0.
#
# Write `_nll_forward(input, target, weight, ignore_index, reduction)`. Here `input` is the
# log-probability Tensor, but `target` is already a **numpy int64 array** and `weight` a
# numpy array of shape `(C,)` (or `None`): the provided `nll_loss` passes them as attributes,
# not as inputs, because they are not differentiable, yet module 06's backward rule needs
# them (the gradient of −logp[i, yᵢ] is −w_{yᵢ} at position yᵢ and 0 elsewhere, scaled by
# 1/Σw for the mean).
#
# <details><summary>Hint 1</summary>
#
# Each position picks one entry along the class axis, its target's: a gather, with the
# target as the index. Ignored positions hold −100, which is no class: what could they
# gather instead, so that one gather serves every position, and how do they then count for
# nothing? (A product with 0 is not nothing when the gathered value is −inf.)
# </details>
#
# <details><summary>Hint 2</summary>
#
# Each position's weight is the weight of its target class (1 without class weights), and 0
# where ignored. The total weight for the mean is the sum of those weights. A 1-D input
# `(C,)` with a 0-d target is a batch of one: add a batch axis at the front, and take it off
# again for `"none"`.
# </details>
#
# <details><summary>Hint 3</summary>
#
# numpy's gather along one axis is `np.take_along_axis`; its index array has as many
# dimensions as the data, with size 1 on the gathered axis (where does that axis go for a
# target of shape `(N, d1, …)`?).
# </details>
#
# <details><summary>The approach</summary>
#
# The loss is a gather: one log-probability per position, from the class dimension. An
# ignored position has no valid class to gather and may hold −inf, so it must never enter
# an arithmetic expression; what can you gather there instead, and how do you then put 0
# in its place without multiplying? The mean divides by the total weight of the positions
# that count, which is also where all-ignored batches come from.
# </details>

# %% nbgrader={"grade": false, "grade_id": "nll", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _nll_forward(input, target, weight, ignore_index, reduction):
    """Forward of nll_loss.

    Contract: `input` is a Tensor of log-probabilities, (C,), (N, C) or (N, C, d1, ...);
    `target` a numpy int64 array of input's shape without dimension 1 (already checked),
    whose entries are classes or `ignore_index`; `weight` None or a numpy (C,) array.
    Returns a numpy array of input's dtype: per position -weight[t] * logp[.., t, ..] along
    dimension 1, exactly 0 where t == ignore_index (even if logp there is -inf), reduced by
    _reduce; the mean divides by the sum of the weights of the non-ignored positions.
    """
    # Idea: the likelihood needs only the correct class's entry of each row: a gather along
    # the class dimension, not a sum over all C classes.
    ### BEGIN SOLUTION
    logp, t = input.numpy(), target
    if logp.ndim == 1:
        logp, t = logp[None], t[None]
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    picked = np.where(valid, np.take_along_axis(logp, safe[:, None], axis=1)[:, 0], 0)
    w = np.ones_like(picked) if weight is None else weight[safe]
    w = np.where(valid, w, 0).astype(logp.dtype)
    losses = np.where(valid, -picked * w, 0.0).astype(logp.dtype)  # +0.0 where ignored, as PyTorch
    if input.ndim == 1:
        losses = losses[0]
    return _reduce(losses, reduction, total_weight=w.sum())
    ### END SOLUTION


def _class_weight(name, weight, input):
    """None, or the per-class `weight` as a numpy array of shape (C,) in input's dtype."""
    if weight is None:
        return None
    arr = np.asarray(weight.numpy() if isinstance(weight, Tensor) else weight)
    n_classes = input.shape[1] if input.ndim >= 2 else input.shape[0]
    if arr.dtype.kind not in "fiu" or arr.shape != (n_classes,):
        raise ValueError(f"{name}: weight must be a 1-D tensor of {n_classes} class weights "
                         f"(one per class), got shape {arr.shape} and dtype {arr.dtype}")
    return np.array(arr, dtype=input.dtype)


def nll_loss(input, target, weight=None, *, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of the target classes, given log-probabilities.

    input: (C,), (N, C) or (N, C, d1, ...) log-probabilities; target: int64 class indices
    of the input's shape without dimension 1. Mirrors torch.nn.functional.nll_loss.
    """
    _check_reduction(reduction)
    _check_tensor("nll_loss", "input", input)
    _check_tensor("nll_loss", "target", target)
    _check_class_targets("nll_loss", input, target, ignore_index)
    w = _class_weight("nll_loss", weight, input)
    return apply("nll_loss", _nll_forward, input, target=np.array(target.numpy(), copy=True),
                 weight=w, ignore_index=int(ignore_index), reduction=reduction)


# %% nbgrader={"grade": true, "grade_id": "test-nll", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_lp = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25], [0.3, 0.3, 0.4], [0.6, 0.2, 0.2]]))
_lp[2, 0] = -np.inf                              # row 2 is ignored: its -inf must not leak
_t = np.array([2, 0, -100, 1])
_want = -np.array([_lp[0, 2], _lp[1, 0], 0.0, _lp[3, 1]]) + 0.0  # (+ 0.0: an ignored position is 0, not -0)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        try:
            _out = nll_loss(Tensor(_lp), Tensor(_t), reduction="none")
        except (FloatingPointError, RuntimeWarning) as _exc:
            check(False, "nll_loss computes nothing invalid at an ignored position (its logp may be -inf: "
                  "0 * -inf is nan, with a numpy warning, even if np.where throws it away afterwards)", got=str(_exc))
assert_equal(_out.dtype, np.dtype(np.float64), "nll_loss keeps float64")
assert_close(_out, _want, what="-logp[i, t_i] per row, 0 for the ignored row 2")
check(not np.signbit(_out.numpy()[2]), "the ignored row's loss is +0.0, as PyTorch's (-0.0 comes from negating a 0)",
      got=float(_out.numpy()[2]), expected=0.0)
check(np.isnan(nll_loss(Tensor(_lp), Tensor(np.full(4, -100))).item()),
      "the mean over a batch whose every target is ignored is nan (0 / 0 weight), as PyTorch's",
      got=nll_loss(Tensor(_lp), Tensor(np.full(4, -100))).item(), expected=np.nan)
assert_close(nll_loss(Tensor(_lp), Tensor(_t)).item(), _want.sum() / 3,
             what="mean over the 3 non-ignored targets (not all 4)")
assert_close(nll_loss(Tensor(_lp), Tensor(_t), reduction="sum").item(), _want.sum(), what="'sum'")
_cw = np.array([1.0, 2.0, 0.5])                  # class weights: targets 2, 0, 1 weigh 0.5, 1, 2
assert_close(nll_loss(Tensor(_lp), Tensor(_t), Tensor(_cw), reduction="none"), _want * [0.5, 1.0, 0.0, 2.0],
             what="weighted per-row losses")
assert_close(nll_loss(Tensor(_lp), Tensor(_t), Tensor(_cw)).item(),
             (_want * [0.5, 1.0, 0.0, 2.0]).sum() / (0.5 + 1.0 + 2.0),
             what="weighted mean: divided by the weights of the real targets, 0.5 + 1 + 2")
_lp3 = np.log(np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))).transpose(0, 2, 1)  # (N=2, C=4, d1=3)
_t3 = np.array([[0, 3, 1], [2, 2, -100]])
_want3 = np.array([[-_lp3[i, _t3[i, k], k] if _t3[i, k] >= 0 else 0.0 for k in range(3)] for i in range(2)])
assert_close(nll_loss(Tensor(_lp3), Tensor(_t3), reduction="none"), _want3,
             what="(N, C, d1) input: the class is picked along dimension 1")
assert_close(nll_loss(Tensor(_lp), Tensor(np.array([2, 0, 1, 1])), ignore_index=0, reduction="none"),
             -np.array([_lp[0, 2], 0.0, _lp[2, 1], _lp[3, 1]]) + 0.0, what="ignore_index=0: row 1 (target 0) is ignored")
_one = nll_loss(Tensor(_lp[0]), Tensor(2), reduction="none")   # (C,) with a 0-d target
assert_equal(_one.shape, (), "(C,) input with a 0-d target gives a 0-d loss")
assert_close(_one.item(), -_lp[0, 2], what="(C,) input, target 2")
print(f"✓ nll_loss: mean {nll_loss(Tensor(_lp), Tensor(_t)).item():.4f} over 3 real targets, (N, C, d1) gathers on dim 1")

# %% [markdown]
# ### cross_entropy = log_softmax + nll_loss
#
# Write the body of `cross_entropy`. The provided part has already checked the arguments and
# turned `weight` into a numpy array (or `None`). What is left is the composition: stable
# log-probabilities over the class dimension (module 02), then your `nll_loss` with the same
# `weight`, `ignore_index` and `reduction`. No new numerics, no new op name: because both
# pieces go through `apply`, module 06 will differentiate cross-entropy for free from the
# backward rules of `log_softmax` and `nll_loss`.
#
# **Label smoothing** (`label_smoothing=ε`, 0 by default): a model trained on one-hot
# targets is pushed to ever larger logits. Smoothing replaces the one-hot target by a mix
# with the uniform distribution over the C classes: the correct class gets
# $1 - ε + ε/C$, every other class $ε/C$. The loss against a target distribution $q$ is
# $-\sum_c q_c \log p_c$ (with class weights, $-\sum_c w_c\, q_c \log p_c$). **Derive**
# what the loss against the smoothed target is in terms of two losses: one you already
# have, and the loss against the uniform target $q_c = 1/C$, which is the next stub
# (`_smoothing_term`, section 5.1). For `ε > 0`, return that.
#
# <details><summary>Hint 1</summary>
#
# Which dimension holds the classes for an `(N, C, d1)` input, and which for a `(C,)` one?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Call `log_softmax` once, and pass its output both to `nll_loss` and (when smoothing) to
# `_smoothing_term`: both parts must see the same log-probabilities.
# </details>
#
# <details><summary>The approach</summary>
#
# Cross-entropy is a composition of two functions you already have, so that module 06
# differentiates it with their rules. Which dimension holds the classes for each input
# rank? Label smoothing mixes two losses of the same log-probabilities, and both are Tensors.
# </details>

# %% nbgrader={"grade": false, "grade_id": "cross-entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def cross_entropy(input, target, weight=None, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits `input` and int64 class indices `target`.

    input: (C,), (N, C) or (N, C, d1, ...) logits; target: the input's shape without
    dimension 1. Computed as log_softmax over the class dimension followed by nll_loss.
    Mirrors torch.nn.functional.cross_entropy (class-index targets).

    Contract (the part you write): returns a Tensor, the output of one `nll_loss` node whose
    input is the output of `log_softmax` over the class dimension; with label_smoothing
    eps > 0, the loss against the smoothed target (PyTorch's), made of recorded Tensor ops
    and one `log_softmax` shared by both parts. Finite at logits of ±1e4.
    """
    _check_reduction(reduction)
    _check_tensor("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target)
    _check_class_targets("cross_entropy", input, target, ignore_index)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    weight = _class_weight("cross_entropy", weight, input)
    # Idea: cross-entropy is two ops you already have: stable log-probabilities, then the NLL.
    ### BEGIN SOLUTION
    class_dim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, dim=class_dim)
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing > 0:
        smooth = _smoothing_term(logp, target, weight, ignore_index, reduction)
        loss = (1 - label_smoothing) * loss + label_smoothing * smooth
    return loss
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-cross-entropy", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _ce_reference(z, t):  # float64 log-sum-exp, one row per sample, (N, C) logits
    z = z.astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return lse - z[np.arange(len(t)), t]


_z = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32) * 3
_t = np.array([0, 4, 2, 2, 1, 3])
_out = cross_entropy(Tensor(_z), Tensor(_t))
assert_equal(_out.shape, (), "cross_entropy with 'mean' is 0-d")
assert_equal(_out.dtype, np.dtype(np.float32), "cross_entropy keeps float32")
assert_close(_out.item(), _ce_reference(_z, _t).mean(), what="cross_entropy vs float64 log-sum-exp")
assert_close(cross_entropy(Tensor(_z), Tensor(_t), reduction="none"), _ce_reference(_z, _t), what="per sample")
_cwe = np.array([0.5, 1.0, 2.0, 1.5, 3.0], dtype=np.float32)
assert_close(cross_entropy(Tensor(_z), Tensor(_t), Tensor(_cwe), reduction="none"), _ce_reference(_z, _t) * _cwe[_t],
             what="per sample, with class weights 0.5, 1, 2, 1.5, 3")
_big = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]], dtype=np.float32)
_l = cross_entropy(Tensor(_big), Tensor([2, 0]), reduction="none")
check(np.all(np.isfinite(_l.numpy())), "cross-entropy is finite at logits of ±1e4", got=_l)
assert_close(_l, np.array([2e4, 2e4 + np.log(2)], np.float32), rtol=1e-6, what="cross_entropy at ±1e4")
# (batch, classes, seq) logits with padding: classes on dimension 1, padding not counted
_zs = np.random.default_rng(2).standard_normal((2, 4, 3)).astype(np.float32)
_ts = np.array([[1, 3, -100], [0, 2, 2]])
_rows = _zs.transpose(0, 2, 1).reshape(6, 4)[_ts.reshape(6) >= 0]
assert_close(cross_entropy(Tensor(_zs), Tensor(_ts)).item(), _ce_reference(_rows, _ts[_ts >= 0]).mean(),
             what="(N, C, d1) logits, classes on dimension 1, mean over the 5 real targets")
_node = cross_entropy(Tensor(_z, requires_grad=True), Tensor(_t)).grad_fn
check(_node is not None and _node.op == "nll_loss", "cross_entropy's output is an nll_loss node",
      got=f"the op {_node.op!r}" if _node is not None else "no grad_fn: the output was not made by apply",
      expected="nll_loss")
_inner = _node.inputs[0].grad_fn
check(_inner is not None and _inner.op == "log_softmax" and _inner.attrs.get("dim") == 1,
      "nll_loss's input is log_softmax over dim 1", got=_inner and (_inner.op, _inner.attrs))
_z1 = np.array([2.0, -1.0, 0.5], dtype=np.float32)  # one sample, no batch: classes on dimension 0
assert_close(cross_entropy(Tensor(_z1), Tensor(np.array(1))).item(), _ce_reference(_z1[None], np.array([1]))[0],
             what="a (C,) input with a 0-d target: the classes are on dimension 0")
print(f"✓ cross_entropy: mean {_out.item():.4f}, finite at ±1e4, log_softmax then nll_loss")

# %% [markdown]
# **A number to know by heart.** A freshly initialised classifier has logits near 0: it
# spreads its belief evenly over the C classes. What cross-entropy should its first batch
# show, for C = 10 (the digits)? Work it out before you run the cell. A first loss far
# from that number means a bug before any training: wrong targets, logits already huge, a
# softmax applied twice.

# %%
_c10 = cross_entropy(Tensor(np.zeros((64, 10), dtype=np.float32)),
                     Tensor(np.random.default_rng(0).integers(0, 10, 64)))
print(f"cross-entropy of uniform logits over 10 classes: {_c10.item():.4f} (log 10 = {np.log(10):.4f})")

# %% [markdown]
# ### 5.1 Label smoothing: the uniform part
#
# The second loss of your derivation is the weighted loss of each position against the
# **uniform** target, $q_c = 1/C$ for every class, with the definition above (class
# weights w, all 1 without them). Ignored positions contribute 0, and the
# reductions follow the NLL's: "sum" adds, "none" keeps one value per position, and "mean"
# divides by the **same total weight** as `nll_loss`: the sum of w_{yᵢ} over the real targets
# (PyTorch does exactly this, so that both halves of the mix are on one scale).
#
# Unlike the forwards so far, `_smoothing_term` returns a **Tensor built from Tensor ops**,
# not a numpy array: it sits inside `cross_entropy`, and module 06 must be able to
# differentiate it with the rules of those ops. (Which Tensor op sets the ignored
# positions to 0 without a numpy round trip?)
#
# <details><summary>Hint 1</summary>
#
# Weights per class broadcast against `(N, C, d1, …)` only if they are shaped with C on the
# class dimension and 1 everywhere else.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The 1/C is over all C classes, not over the C − 1 wrong ones: the ε/C that smoothing gives
# the correct class is part of this term.
# </details>
#
# <details><summary>Hint 3</summary>
#
# The mean's denominator is a plain number, computed in numpy from the target: the count of
# real targets, or the sum of their classes' weights.
# </details>
#
# <details><summary>The approach</summary>
#
# Everything stays a Tensor, built from ops module 06 can differentiate. The uniform target
# puts the same mass on every class, so the loss per position is an average over the class
# dimension (weighted, if there are weights); ignored positions count 0, and the mean uses
# the same denominator as `nll_loss`, so that the two halves of the mix are on one scale.
# </details>

# %% nbgrader={"grade": false, "grade_id": "label-smoothing", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _smoothing_term(logp, target, weight, ignore_index, reduction):
    """Label smoothing's uniform part, PyTorch's way.

    Contract: `logp` is the log_softmax Tensor ((C,), (N, C) or (N, C, d1, ...)), `target`
    the int64 target Tensor, `weight` None or a numpy (C,) array, `reduction` one of the
    three. Returns a Tensor made of Tensor ops (so it can be differentiated): per position
    the weighted loss against the uniform target (w = 1 without weights), 0 where the
    target is ignore_index;
    "none" -> those values, "sum" -> their sum, "mean" -> their sum divided by the same total
    weight nll_loss uses (the sum of the target classes' weights over non-ignored positions).
    """
    # Idea: the definition of the loss against a target distribution, with q uniform; then
    # the same reduction as the NLL it is mixed with.
    ### BEGIN SOLUTION
    class_dim = 1 if logp.ndim > 1 else 0
    n_classes = logp.shape[class_dim]
    t = target.numpy()
    if weight is not None:
        shape = [1] * logp.ndim
        shape[class_dim] = n_classes
        logp = logp * Tensor(weight.reshape(shape))
    per_position = logp.sum(class_dim) * (-1.0 / n_classes)
    ignored = t == ignore_index
    per_position = per_position.masked_fill(Tensor(ignored), 0.0)
    if reduction == "none":
        return per_position
    total = per_position.sum()
    if reduction == "sum":
        return total
    valid = ~ignored
    denominator = float(valid.sum() if weight is None else weight[t[valid]].sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / denominator
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-label-smoothing", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _smooth_reference(z, t, eps, w=None, ignore=-100):
    """float64 (per row, mean): the definition, -sum_c w_c q_c logp_c against the smoothed
    target q, 0 for an ignored row; the mean divides by the real targets' weights. (N, C) logits."""
    z = z.astype(np.float64)
    n, c = z.shape
    w = np.ones(c) if w is None else w
    logp = z - z.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    real = t != ignore
    q = np.full((n, c), eps / c)
    q[np.arange(n)[real], t[real]] += 1 - eps
    per = np.where(real, -(w * q * logp).sum(1), 0.0)
    return per, per.sum() / w[t[real]].sum()


_zl = np.random.default_rng(3).standard_normal((5, 4)) * 2
_tl = np.array([0, 3, -100, 1, 3])
_wl = np.array([0.5, 1.0, 2.0, 4.0])
for _w in [None, _wl]:
    _per, _mean = _smooth_reference(_zl, _tl, 0.2, _w)
    _wt = None if _w is None else Tensor(_w)
    _what = "with class weights" if _w is not None else "no weights"
    assert_close(cross_entropy(Tensor(_zl), Tensor(_tl), _wt, label_smoothing=0.2, reduction="none"), _per,
                 rtol=1e-10, what=f"label_smoothing=0.2, 'none', {_what} (ignored row 2 is 0)")
    assert_close(cross_entropy(Tensor(_zl), Tensor(_tl), _wt, label_smoothing=0.2, reduction="sum").item(),
                 _per.sum(), rtol=1e-10, what=f"label_smoothing=0.2, 'sum', {_what}")
    assert_close(cross_entropy(Tensor(_zl), Tensor(_tl), _wt, label_smoothing=0.2).item(), _mean,
                 rtol=1e-10, what=f"label_smoothing=0.2, 'mean', {_what}: divided by the real targets' weights")
_u = _smoothing_term(log_softmax(Tensor(_zl, requires_grad=True), dim=1), Tensor(_tl), None, -100, "mean")
check(isinstance(_u, Tensor) and _u.grad_fn is not None,
      "_smoothing_term returns a Tensor built from Tensor ops (it has a grad_fn)",
      got=f"a {type(_u).__name__}" + (f" with grad_fn {_u.grad_fn!r}" if isinstance(_u, Tensor) else ""))
_seen, _stack, _n_lsm = set(), [cross_entropy(Tensor(_zl, requires_grad=True), Tensor(_tl), label_smoothing=0.2).grad_fn], 0
_alive = []  # keep every node alive while the walk compares ids
while _stack:
    _nd = _stack.pop()
    if _nd is None or id(_nd) in _seen:
        continue
    _seen.add(id(_nd))
    _alive.append(_nd)
    _n_lsm += _nd.op == "log_softmax"
    _stack.extend(_x.grad_fn for _x in _nd.inputs)
assert_equal(_n_lsm, 1, "log_softmax nodes in the graph of a smoothed cross_entropy (both parts share one)")
print(f"✓ label smoothing: mean {cross_entropy(Tensor(_zl), Tensor(_tl), label_smoothing=0.2).item():.4f}, "
      "weighted and ignored positions as in PyTorch")

# %% [markdown]
# ### 5.2 The gradient cross-entropy sends back: derive it
#
# Training moves the logits against the gradient of the loss, and that gradient is the
# first thing that flows backward through a classifier. Module 06 will get it for you by
# chaining the rules of `log_softmax` and `nll_loss`; here you derive it by hand, once, the
# way CS231n's softmax exercise does, and a finite-difference check judges your algebra.
#
# Take one row: logits $z_1 \dots z_C$ and target class $y$. Its loss is
#
# $$L = -\log \frac{e^{z_y}}{\sum_j e^{z_j}} = -z_y + \log \sum_j e^{z_j}.$$
#
# Find $\partial L / \partial z_c$ for every class $c$ (the target class and the others
# may differ). For a batch, `cross_entropy(..., reduction="mean")` averages the rows whose
# target is not `ignore_index`: what does that do to each row's gradient, and to an ignored
# row's?
#
# Write `_cross_entropy_grad(logits, target, ignore_index)`: numpy in, numpy out, the
# gradient of the mean loss with respect to every logit. It must stay finite wherever the
# loss is: logits of $\pm 10^4$ in float32 included.
#
# <details><summary>Hint 1</summary>
#
# Differentiate the two terms separately with respect to one $z_c$. Which of them cares
# whether $c = y$? For the second, the chain rule: $\frac{d}{dz}\log u(z) = u'(z)/u(z)$.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Before you code it, predict two facts about your formula and let the check confirm them:
# what does one row's gradient sum to over the $C$ classes, and how large can one entry be?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Your formula has a quotient of exponentials in it. Module 02 showed how to evaluate that
# one without overflow.
# </details>
#
# <details><summary>The approach</summary>
#
# One term of the loss touches only the target's logit, the other every logit, through a
# quotient you have met before; add the two derivatives per class. The mean divides each
# counted row by the number of counted rows, and a row that is not counted has no
# influence on the loss at all. Evaluate the quotient the stable way, and let nothing
# promote float32.
# </details>

# %% nbgrader={"grade": false, "grade_id": "cross-entropy-grad", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _cross_entropy_grad(logits, target, ignore_index=-100):
    """The gradient of cross_entropy(logits, target, reduction="mean") with respect to logits.

    Contract: `logits` a floating numpy array (N, C); `target` an int64 numpy array (N,) of
    classes in 0..C-1 or ignore_index, at least one of them a class. Returns a numpy array
    (N, C) of logits' dtype: d(mean loss)/d(logits), finite for any finite logits (+-1e4 in
    float32 included), without numpy warnings. The check compares it with central
    differences of your cross_entropy.
    """
    # Idea: differentiate the two terms of one row's loss, then ask what the mean does.
    ### BEGIN SOLUTION
    valid = target != ignore_index
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    grad = e / e.sum(axis=1, keepdims=True)
    grad[np.arange(len(target))[valid], target[valid]] -= 1
    grad *= (valid / valid.sum())[:, None]
    return grad.astype(logits.dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-cross-entropy-grad", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _central_differences(z, t, h=1e-6):
    """d(mean cross_entropy)/dz by (L(z + h e_k) - L(z - h e_k)) / 2h, entry by entry, in float64."""
    grad = np.zeros_like(z)
    for _k in np.ndindex(*z.shape):
        _plus, _minus = z.copy(), z.copy()
        _plus[_k] += h
        _minus[_k] -= h
        grad[_k] = (cross_entropy(Tensor(_plus), Tensor(t)).item() - cross_entropy(Tensor(_minus), Tensor(t)).item()) / (2 * h)
    return grad


_zg = np.random.default_rng(5).standard_normal((4, 5)) * 2
_tg = np.array([1, 4, -100, 0])
_g = _cross_entropy_grad(_zg, _tg)
assert_equal((_g.shape, _g.dtype), ((4, 5), np.dtype(np.float64)), "the gradient has the logits' shape and dtype")
assert_close(_g, _central_differences(_zg, _tg), rtol=0, atol=1e-8,
             what="your gradient against central differences of your cross_entropy (h = 1e-6; the difference "
                  "quotient itself is good to about 1e-9)")
check(np.all(_g[2] == 0), "the ignored row 2 has no influence on the loss: its gradient is 0", got=_g[2])
assert_close(_g.sum(axis=1), np.zeros(4), rtol=0, atol=1e-15, what="each row's gradient sums to 0")
assert_close(_cross_entropy_grad(_zg, np.array([1, 4, 2, 0])), _central_differences(_zg, np.array([1, 4, 2, 0])),
             rtol=0, atol=1e-8, what="no ignored row: the mean is over all 4 rows")
_zb = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4]], dtype=np.float32)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        try:
            _gb = _cross_entropy_grad(_zb, np.array([2, 2]))
        except (FloatingPointError, RuntimeWarning) as _exc:
            check(False, "the gradient at logits of ±1e4 (float32) computes nothing that overflows", got=str(_exc))
assert_equal(_gb.dtype, np.dtype(np.float32), "float32 logits give a float32 gradient")
assert_close(_gb, np.array([[0.5, 0.0, -0.5], [0.0, 0.0, 0.0]], np.float32), rtol=0, atol=1e-7,
             what="at ±1e4: row 0 is confidently wrong (all of its probability on class 0, target 2), row 1 "
                  "confidently right; each row weighs 1/2 in the mean")
print(f"✓ _cross_entropy_grad: matches central differences to {np.abs(_g - _central_differences(_zg, _tg)).max():.1e}")

# %% [markdown]
# Your formula explains a choice every classifier makes. Put a sigmoid in front of a mean
# squared error instead, for one logit $x$ with target 1, and the gradient at $x$ carries
# the sigmoid's slope, $\sigma(x)(1 - \sigma(x))$, which vanishes exactly when the model is
# confidently wrong. Cross-entropy on the logits has no such factor. The two-class case
# (logits $(0, x)$, target class 1) with your function, against that MSE:

# %%
for _x in (-10.0, -3.0, 0.0, 3.0):
    _ce_slope = _cross_entropy_grad(np.array([[0.0, _x]]), np.array([1]))[0, 1]
    _sig = 1 / (1 + np.exp(-_x))
    _mse_slope = 2 * (_sig - 1) * _sig * (1 - _sig)
    print(f"x = {_x:6.1f}: d(cross-entropy)/dx = {_ce_slope:9.2e}   d(MSE of sigmoid)/dx = {_mse_slope:9.2e}")

# %% [markdown]
# ## 6. Loss modules
#
# In PyTorch most code builds a loss object once (`criterion = nn.CrossEntropyLoss()`) and
# calls it like a layer: `loss = criterion(logits, targets)`. The classes are thin: they
# store the options and their `forward` calls the function. Subclassing module 03's `Module`
# gives them `__call__` and a place in a model's `repr`. They validate `reduction` when they
# are built, so a typo fails on the line that made it rather than in the first training step.
#
# The optional `weight` (and BCE's `pos_weight`) are registered as **buffers** (module 03),
# as PyTorch does: state that is not trained but belongs to the module, so it appears in
# `state_dict()` and follows `.to(dtype)`. Like PyTorch, a buffer must be a Tensor (or None).

# %%
#| export
class MSELoss(Module):
    """Mean squared error as a module (see mse_loss)."""

    def __init__(self, *, reduction="mean"):
        super().__init__()
        _check_reduction(reduction)
        self.reduction = reduction

    def forward(self, input, target):
        return mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(Module):
    """Binary cross-entropy on logits as a module (see binary_cross_entropy_with_logits)."""

    def __init__(self, weight=None, *, reduction="mean", pos_weight=None):
        super().__init__()
        _check_reduction(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)
        self.reduction = reduction

    def forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                pos_weight=self.pos_weight)


class NLLLoss(Module):
    """Negative log-likelihood as a module (see nll_loss)."""

    def __init__(self, weight=None, *, ignore_index=-100, reduction="mean"):
        super().__init__()
        _check_reduction(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input, target):
        return nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                        reduction=self.reduction)


class CrossEntropyLoss(Module):
    """Cross-entropy on logits with class-index targets, as a module (see cross_entropy)."""

    def __init__(self, weight=None, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        _check_reduction(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.reduction = ignore_index, reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)


# %%
criterion = CrossEntropyLoss(ignore_index=0)
_logits = Tensor(np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32))  # (batch, vocab, seq)
_tokens = Tensor(np.array([[1, 2, 3, 0, 0], [3, 3, 1, 2, 0], [2, 1, 0, 0, 0]]))          # 0 = padding
print("CrossEntropyLoss on (3, 4, 5) logits, padding ignored:", criterion(_logits, _tokens).item())
assert_close(criterion(_logits, _tokens).item(), cross_entropy(_logits, _tokens, ignore_index=0).item(),
             what="the module gives what the function gives")

# %% [markdown]
# ## 7. A systems look
#
# ### Memory: the (N, C) matrix
#
# Cross-entropy on logits of shape `(N, C)` materialises the log-probabilities: another
# `(N, C)` array, plus temporaries inside `log_softmax` (the shifted logits, their exps).
# For an image classifier (C = 10) that is nothing. For a **language model**, N is the number
# of tokens in a batch and C is the vocabulary, and the numbers change scale. Compute them
# (float32, 4 bytes):

# %%
def gib(n_bytes):
    return n_bytes / 2 ** 30


for _what, _tokens_per_batch, _vocab in [("digits classifier, batch 256", 256, 10),
                                         ("50k vocabulary, 8 x 1024 tokens", 8 * 1024, 50_257),
                                         ("128k vocabulary, 8 x 4096 tokens", 8 * 4096, 128_256)]:
    _one = _tokens_per_batch * _vocab * 4
    print(f"{_what:34s} N={_tokens_per_batch:6d} C={_vocab:7d}: one (N, C) float32 array = "
          f"{_one / 2**20:10.2f} MiB = {gib(_one):7.3f} GiB")

# %% [markdown]
# Several GiB for a *single* copy — and the forward pass keeps the logits, the
# log-probabilities, and the backward pass adds a gradient of the same size. That is why
# large-model training code uses **fused** (and chunked) cross-entropy: compute each row's
# log-sum-exp and the target's logit **in pieces**, never holding all of `logp` at once.
#
# Let us measure it here. `tracemalloc` counts numpy's allocations, so the **peak** during a
# call is the extra memory that call needed. We compare our `cross_entropy` with a chunked
# version that walks over blocks of rows (a loop over *blocks*, each block vectorised), on
# float32 logits of shape (2048, 8192): 64 MiB.
#
# **Predict first.** How many MiB of extra memory does `cross_entropy` need at its peak on
# these 64 MiB of logits? Think of what your `log_softmax` and `nll_loss` allocate (shifted
# logits, their exponentials, the log-probabilities, the masks) and which of those are alive
# at the same time. And the chunked version, with 256 rows at a time?

# %%
predicted_full_mib = None      # your number: peak extra MiB of cross_entropy on 64 MiB of logits
predicted_chunked_mib = None   # your number: the same for the chunked version (256 rows at a time)

# %%
def peak_bytes(fn):
    """Peak extra memory (bytes) allocated while fn() runs, and fn's result."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, result


def chunked_cross_entropy(logits, target, rows=256):
    """Mean cross-entropy of numpy logits (N, C), holding only `rows` rows of temporaries."""
    total = 0.0
    for start in range(0, logits.shape[0], rows):
        z = logits[start:start + rows]
        m = z.max(axis=1)
        lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
        total += float((lse - z[np.arange(len(z)), target[start:start + rows]]).sum())
    return total / logits.shape[0]


_N, _C = 2048, 8192
_logits_np = np.random.default_rng(3).standard_normal((_N, _C)).astype(np.float32)
_target_np = np.random.default_rng(4).integers(0, _C, _N)
_logits_t, _target_t = Tensor(_logits_np), Tensor(_target_np)
_peak_full, _ce_full = peak_bytes(lambda: cross_entropy(_logits_t, _target_t).item())
_peak_chunk, _ce_chunk = peak_bytes(lambda: chunked_cross_entropy(_logits_np, _target_np))
print(f"logits: {_logits_np.nbytes / 2**20:.1f} MiB")
for _label, _peak, _value, _guess in [("cross_entropy (full log_softmax)", _peak_full, _ce_full, predicted_full_mib),
                                      ("chunked, 256 rows at a time", _peak_chunk, _ce_chunk, predicted_chunked_mib)]:
    _said = "no prediction" if _guess is None else f"you predicted {_guess} MiB"
    print(f"{_label:33s} peak extra {_peak / 2**20:7.1f} MiB ({_peak / _logits_np.nbytes:4.2f}x the logits; "
          f"{_said}) -> {_value:.6f}")
assert_close(_ce_full, _ce_chunk, rtol=1e-5, what="chunked and full cross-entropy agree")

# %% [markdown]
# Same value; the printed peaks show the shape to expect: the full version needs a few times
# the logits' size (how many depends on which temporaries your `log_softmax` keeps alive at
# once, and on numpy's version), while the chunked version's peak is set by the chunk, not by
# N, so it is a small fraction of the logits and stays so as N grows. Fused GPU kernels push the same idea further and even fold the final `Linear` layer in,
# so the `(N, C)` logits never exist as a whole either.
#
# ### Time: is stability expensive?
#
# The stable formulas do a few more elementwise operations (an `abs`, a `max`, a `log1p`). Let
# us time the naive and the stable binary cross-entropy on a million float32 logits, and
# `log(softmax)` against `log_softmax` for cross-entropy, all with numpy. Medians of several
# runs, measured on your machine.
#
# **Predict first**: how many times slower is the stable BCE than the naive one (1.0 = the
# same; count the elementwise passes over the data each one makes)?

# %%
predicted_stable_over_naive = None   # your number: time(stable BCE) / time(naive BCE)

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_xb = (np.random.default_rng(5).standard_normal(1_000_000) * 30).astype(np.float32)
_yb = (np.random.default_rng(6).random(1_000_000) < 0.5).astype(np.float32)


def naive_bce(x, y):
    p = 1 / (1 + np.exp(-x))
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()


def stable_bce(x, y):  # your forward of section 4, on the same numpy arrays
    return _bce_with_logits_forward(Tensor(x), Tensor(y), None, None, "mean")


def naive_ce(z, t):
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return -np.log(p[np.arange(len(t)), t]).mean()


def stable_ce(z, t):
    m = z.max(axis=1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(t)), t].mean()


def interleaved_times(fns, rounds=7):
    """Median seconds of each function over `rounds` rounds, each round timing every function
    in turn (three calls each): a busy moment of the machine slows all of them alike."""
    samples = [[] for _ in fns]
    for _ in range(rounds):
        for times, fn in zip(samples, fns):
            times.append(median_time(fn, repeats=3))
    return [float(np.median(times)) for times in samples]


_zc = (_logits_np[:512] * 40).astype(np.float32)
with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
    _rows = []
    for _name, _naive, _stable, _args in [("BCE, 1e6 logits (std 30)", naive_bce, stable_bce, (_xb, _yb)),
                                          ("CE, 512 x 8192 logits (std 40)", naive_ce, stable_ce,
                                           (_zc, _target_np[:512]))]:
        _tn, _ts = interleaved_times([lambda: _naive(*_args), lambda: _stable(*_args)])
        print(f"{_name:32s} naive {_tn * 1e3:7.2f} ms -> {_naive(*_args):10.4f} | "
              f"stable {_ts * 1e3:7.2f} ms -> {float(_stable(*_args)):10.4f} | stable/naive {_ts / _tn:4.2f}x")
        _rows.append(_ts / _tn)
print("you predicted", "nothing" if predicted_stable_over_naive is None else f"{predicted_stable_over_naive}x",
      f"for BCE; measured {_rows[0]:.2f}x")

# %% [markdown]
# The naive versions return `inf` or `nan` on these logits, the stable ones a number. The
# price of stability is the ratio printed in the last column. Expect a small constant factor
# either way (the stable form makes a few extra elementwise passes, the naive one divides
# and takes two logs), never a change in complexity; its exact value moves with the machine,
# numpy's version and the load, and it may even be below 1. There is no reason to use the
# naive form. And our tinytorch
# `cross_entropy`, with its argument checks and two trips through `apply`, against the bare
# numpy `stable_ce`: the checks and dispatch cost a fixed amount per call, the numerics
# O(N·C), so at this size expect a ratio of order one, not of order C. It can land on
# either side of 1: our version
# builds a few extra arrays for the masks, but gathers the target entries differently, and
# timings under load jump around; for tiny inputs the fixed cost dominates and the ratio grows.

# %%
_zt, _tt = Tensor(_zc), Tensor(_target_np[:512])
_t_ours, _t_np = interleaved_times([lambda: cross_entropy(_zt, _tt), lambda: stable_ce(_zc, _target_np[:512])])
print(f"tinytorch cross_entropy {_t_ours * 1e3:.2f} ms, numpy stable_ce {_t_np * 1e3:.2f} ms "
      f"(ratio {_t_ours / _t_np:.2f}x)")

# %% [markdown]
# ## 8. What PyTorch does
#
# - `torch.nn.functional.cross_entropy` is literally `log_softmax` followed by `nll_loss` (in
#   C++: `at::cross_entropy_loss` calls `at::log_softmax` and `at::nll_loss_nd`); `nll_loss`
#   is a gather with weights, reduced in the same kernel. Its backward is the gradient you
#   derived in section 5.2, which autograd gets by chaining the two backward rules, as
#   module 06 will (PyTorch's fused kernels write it directly).
# - `ignore_index=-100` is the default precisely for padding: Hugging Face's data collators
#   pad the labels with −100 and its models call the loss with the default, so padding
#   tokens (and prompt tokens that should not be learned) never count.
# - `CrossEntropyLoss` also accepts **class probabilities** as a float target of the
#   input's shape (soft labels, distillation); tinytorch keeps to indices. A soft-target
#   loss is one line from `log_softmax`: `-(p_target * log_softmax(z, dim=1)).sum(1).mean()`.
# - `binary_cross_entropy_with_logits` computes a stable log-sigmoid too, but arranges the
#   terms differently from the form the check holds you to: it adds (1 − y)·x to a log term
#   of nearly the same size and opposite sign, so a confident right answer such as x = −50,
#   y = 0 comes out as exactly 0, its true loss of 2·10⁻²² lost to rounding (harmless for
#   training, visible to a test). `binary_cross_entropy` (on probabilities) exists too, and clamps its logs at −100 to survive exactly the overflow you
#   saw in section 4; prefer the logits version.
# - `mse_loss` **warns** ("Using a target size that is different to the input size ...") and
#   broadcasts; we refuse.
# - Losses are modules with options, `reduction="mean"` by default; the old
#   `size_average`/`reduce` arguments are deprecated, so we left them out. In tinytorch the
#   options after `weight` are keyword-only, so a positional call cannot silently mean
#   something else than in PyTorch.
#
# If PyTorch is installed, compare directly (this cell is skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    import torch.nn.functional as F

    _zz = np.random.default_rng(7).standard_normal((4, 6, 3))
    _tt = np.array([[0, 5, -100], [1, 1, 2], [3, -100, -100], [4, 0, 5]])
    print("cross_entropy (N, C, d1), ignore_index:", cross_entropy(Tensor(_zz), Tensor(_tt)).item(),
          "| torch", F.cross_entropy(torch.from_numpy(_zz), torch.from_numpy(_tt)).item())
    _xx, _yy = np.array([-1e4, -3.0, 0.5, 1e4], np.float32), np.array([1.0, 0.0, 1.0, 0.0], np.float32)
    print("BCE with logits at ±1e4 (float32):",
          binary_cross_entropy_with_logits(Tensor(_xx), Tensor(_yy), reduction="none").numpy(),
          "| torch", F.binary_cross_entropy_with_logits(torch.from_numpy(_xx), torch.from_numpy(_yy),
                                                        reduction="none").numpy())
    print("mse_loss:", mse_loss(Tensor(_xx / 1e4), Tensor(_yy)).item(),
          "| torch", F.mse_loss(torch.from_numpy(_xx / 1e4), torch.from_numpy(_yy)).item())

# %% [markdown]
# ## 9. Recap
#
# - A loss is a **negative log-likelihood**: MSE ↔ Gaussian, binary cross-entropy ↔
#   Bernoulli, cross-entropy ↔ categorical. The reduction is `"mean"` (default), `"sum"` or
#   `"none"`; weighted means divide by the total weight.
# - Losses take **logits**. Sigmoid or softmax followed by log overflows or hits log 0 in
#   float32 at logits of a few tens; the stable forms (your factored binary cross-entropy,
#   and log-sum-exp) keep every exponent ≤ 0 and are finite at ±10⁴, for the same price.
# - **Cross-entropy = log_softmax + nll_loss**: the log-sum-exp is module 02's, and the NLL
#   is a gather of the target's log-probability; `ignore_index` removes padding from both
#   the sum and the count. Its gradient at the logits, which you derived, has no factor
#   that vanishes when the model is confidently wrong.
# - Losses refuse what would silently be wrong: shapes that would broadcast, float class
#   labels, out-of-range classes.
# - Every loss is one op through `apply` (`mse_loss`, `binary_cross_entropy_with_logits`,
#   `nll_loss`) or a composition of ops, with what its backward needs (`reduction`,
#   `target`, `weight`, `pos_weight`, `ignore_index`) recorded as attributes for module 06.
# - For large vocabularies, the `(N, C)` log-probabilities dominate memory; chunked/fused
#   cross-entropy avoids holding them.
#
# Run `tito test module 04` to check your work against the full test suite.

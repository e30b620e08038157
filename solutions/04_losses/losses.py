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
# - write the **numerically stable** forms: `max(x, 0) − x·y + log(1 + e^(−|x|))` for binary
#   cross-entropy and **log-sum-exp** for cross-entropy, which stay finite at logits of ±10⁴;
# - build cross-entropy by **composition**: log-softmax (module 02) followed by the
#   negative log-likelihood of the target class, with `ignore_index` for padding;
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

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

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
def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


_xs = np.linspace(-6, 6, 301)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
axes[0].plot(_xs, _xs ** 2, label="(ŷ − y)², y = 0")
axes[0].plot(_xs, 0.5 * _xs ** 2 + 0.5 * np.log(2 * np.pi), "--",
             label="−log N(y; ŷ, 1)")
axes[0].set_title("MSE: Gaussian")
axes[0].set_xlabel("prediction ŷ")
axes[1].plot(_xs, _softplus(-_xs), label="y = 1:  −log σ(x)")
axes[1].plot(_xs, _softplus(_xs), label="y = 0:  −log(1 − σ(x))")
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
# and `"sum"`).

# %% nbgrader={"grade": false, "grade_id": "reduction", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_reduction(reduction):
    """ValueError unless `reduction` is "mean", "sum" or "none".

    Why: every loss accepts `reduction=`; a typo must fail loudly, naming the valid options.
    """
    # Hint: raise ValueError(f"reduction must be one of 'mean', 'sum' or 'none', not {reduction!r}")
    # (test isinstance(reduction, str) first: a list or array is not a reduction either).
    ### BEGIN SOLUTION
    if not isinstance(reduction, str) or reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of 'mean', 'sum' or 'none', not {reduction!r}")
    ### END SOLUTION


def _reduce(losses, reduction, total_weight=None):
    """Reduce a numpy array of per-element losses; the result keeps losses.dtype.

    "none" -> losses as they are; "sum" -> their sum; "mean" -> their sum / total_weight
    when a total weight is given, else their plain mean.
    Why: one place that every loss's forward ends in, so the three reductions mean the same
    thing everywhere.
    """
    # Hints:
    # - call _check_reduction first;
    # - wrap the result in np.asarray(..., dtype=losses.dtype) so float32 stays float32;
    # - a mean over nothing (every target ignored) is 0 / 0 = nan, as in PyTorch: compute it
    #   inside `with np.errstate(invalid="ignore", divide="ignore"):` so numpy does not warn.
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
_l = np.array([[1.0, 2.0], [3.0, 6.0]], dtype=np.float32)
assert _reduce(_l, "sum") == 12.0 and _reduce(_l, "sum").dtype == np.float32
assert _reduce(_l, "mean") == 3.0 and _reduce(_l, "mean").dtype == np.float32
assert _reduce(_l, "mean").shape == (), "mean and sum give a 0-d array"
np.testing.assert_array_equal(_reduce(_l, "none"), _l)
assert _reduce(_l, "mean", total_weight=np.float32(4.0)) == 3.0
assert _reduce(np.array([2.0, 0.0]), "mean", total_weight=1.0) == 2.0, "weighted mean: sum / total weight"
assert np.isnan(_reduce(np.zeros(3), "mean", total_weight=0.0)), "nothing to average: nan"
_check_reduction("none")
for _bad in ["avg", "Mean", None, 1]:
    try:
        _check_reduction(_bad)
        raise AssertionError(f"reduction={_bad!r} must raise ValueError")
    except ValueError as e:
        assert "'mean'" in str(e) and "'sum'" in str(e) and "'none'" in str(e), f"list the options: {e}"
print("✓ _check_reduction, _reduce")

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
# message that names both shapes and says why. The same goes for dtypes: the target of a
# regression must be a floating tensor of the same dtype as the prediction (an int64 target
# is usually a classification label given to the wrong loss).
#
# Write `_check_pointwise(name, input, target)`, used by MSE and by BCE (section 4):
#
# 1. `input` must be floating (`input.dtype.kind == "f"`), else `TypeError`;
# 2. `target` must be floating, else `TypeError` that suggests `target.float()`;
# 3. the two dtypes must be equal, else `TypeError` naming both (suggest
#    `target.to(input.dtype)`);
# 4. the shapes must be equal, else `ValueError` naming both shapes and saying that a loss
#    does not broadcast.
#
# Start each message with `name` (`"mse_loss: ..."`), so the user knows which call failed.
#
# Then write `_mse_forward(input, target, reduction)`: the squared differences of
# `input.numpy()` and `target.numpy()`, reduced with `_reduce`. The provided `mse_loss`
# checks its arguments and dispatches your forward as the op `"mse_loss"`, recording
# `reduction` as an attribute, which is what module 06's backward rule will need
# (∂/∂ŷ = 2(ŷ − y)/n for the mean).

# %% nbgrader={"grade": false, "grade_id": "mse", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_tensor(name, what, x):
    """TypeError unless x is a tinytorch Tensor (losses take tensors, as in PyTorch)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: {what} must be a tinytorch Tensor, got {type(x).__name__}")


def _check_pointwise(name, input, target):
    """For elementwise losses: floating input and target of one dtype and one shape.

    Why: broadcasting (N, 1) against (N,) would silently compare every prediction with every
    target, and an int target usually means the wrong loss; refusing both saves hours.
    """
    # Hints: check in the order listed above; shapes are tuples, compare them with !=.
    # An example of the shape message: f"{name}: input shape {input.shape} and target shape
    # {target.shape} differ; a loss does not broadcast (an (N, 1) prediction against an (N,)
    # target would compare every prediction with every target). Reshape one of them, e.g.
    # input.squeeze(1) or target.unsqueeze(1)."
    ### BEGIN SOLUTION
    if input.dtype.kind != "f":
        raise TypeError(f"{name}: input must be a floating tensor (float32 or float64), "
                        f"got {input.dtype}")
    if target.dtype.kind != "f":
        raise TypeError(f"{name}: target must be a floating tensor, got {target.dtype}; "
                        f"convert it with target.float()")
    if input.dtype != target.dtype:
        raise TypeError(f"{name}: input is {input.dtype} but target is {target.dtype}; "
                        f"the dtypes must match: convert one, e.g. target.to(input.dtype)")
    if input.shape != target.shape:
        raise ValueError(
            f"{name}: input shape {input.shape} and target shape {target.shape} differ; a loss "
            f"does not broadcast (an (N, 1) prediction against an (N,) target would compare every "
            f"prediction with every target). Reshape one of them, e.g. input.squeeze(1) or "
            f"target.unsqueeze(1).")
    ### END SOLUTION


def _mse_forward(input, target, reduction):
    """Forward of mse_loss: reduce (input - target)**2 (numpy in, numpy out)."""
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
    _check_pointwise("mse_loss", input, target)
    return apply("mse_loss", _mse_forward, input, target, reduction=reduction)


# %% nbgrader={"grade": true, "grade_id": "test-mse", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
_b = np.array([[1.5, 2.0, 2.0], [4.0, 7.0, 6.0]], dtype=np.float32)
_out = mse_loss(Tensor(_a), Tensor(_b))
assert _out.shape == () and _out.dtype == np.float32
np.testing.assert_allclose(_out.item(), np.mean((_a - _b) ** 2), rtol=1e-6)
np.testing.assert_allclose(mse_loss(Tensor(_a), Tensor(_b), reduction="sum").item(), 5.25)
np.testing.assert_allclose(mse_loss(Tensor(_a), Tensor(_b), reduction="none").numpy(), (_a - _b) ** 2)
try:
    mse_loss(Tensor(np.zeros((4, 1), np.float32)), Tensor(np.zeros(4, np.float32)))
    raise AssertionError("(4, 1) against (4,) must raise")
except ValueError as e:
    assert "(4, 1)" in str(e) and "(4,)" in str(e) and "broadcast" in str(e), str(e)
for _t in [Tensor([1, 2]), Tensor([1.0, 2.0], dtype=np.float64)]:
    try:
        mse_loss(Tensor([1.0, 2.0]), _t)
        raise AssertionError(f"a {_t.dtype} target for a float32 input must raise TypeError")
    except TypeError as e:
        assert str(_t.dtype) in str(e), str(e)
_w = Tensor(_a, requires_grad=True)
assert mse_loss(_w, Tensor(_b)).grad_fn.op == "mse_loss"
print("✓ mse_loss")

# %% [markdown]
# ## 4. Binary cross-entropy, from logits
#
# ### Why the loss takes logits, not probabilities
#
# The textbook formula is `−[y·log σ(x) + (1 − y)·log(1 − σ(x))]`. Compute it in float32
# the obvious way — sigmoid first, then log — and it breaks at logits that real networks do
# produce:
#
# - **y = 0, x ≳ 17**: e^(−x) < 6·10⁻⁸ is less than half the gap between 1 and the next
#   float32 (2⁻²³ ≈ 1.2·10⁻⁷), so `1 + e^(−x)` *rounds to exactly 1.0*, σ(x) = 1.0, then
#   `1 − σ(x) = 0` and `log 0 = −∞`. The loss is `inf` although the true value is just ≈ x.
# - **y = 1, x ≤ −89**: `e^(−x) = e^89` exceeds float32's maximum (≈ 3.4·10³⁸, reached at
#   e^88.7), so it overflows to `inf`, σ(x) = 1/∞ = 0, and again `log 0 = −∞`.
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
_stable_y1 = np.maximum(_x32, 0) - _x32 * 1 + np.log1p(np.exp(-np.abs(_x32)))
_stable_y0 = np.maximum(_x32, 0) - _x32 * 0 + np.log1p(np.exp(-np.abs(_x32)))

fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
for ax, naive, stable, y in [(axes[0], _naive_y1, _stable_y1, 1), (axes[1], _naive_y0, _stable_y0, 0)]:
    ax.plot(_x32, stable, lw=3, alpha=0.5, label="stable form")
    ax.plot(_x32, np.where(np.isfinite(naive), naive, np.nan), "--", label="naive: −log(σ) in float32")
    bad = ~np.isfinite(naive)
    ax.plot(_x32[bad], np.zeros(bad.sum()), "rx", ms=3, label=f"naive = inf ({bad.sum()} points)")
    ax.set_title(f"BCE with y = {y}")
    ax.set_xlabel("logit x")
    ax.set_ylabel("loss")
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print("first x where the naive y=0 loss is inf:", _x32[~np.isfinite(_naive_y0)].min())
print("last x where the naive y=1 loss is inf:", _x32[~np.isfinite(_naive_y1)].max())

# %% [markdown]
# ### The stable form
#
# Work with the logit x all the way, never forming σ(x). Since 1 − σ(x) = σ(−x) and
# log σ(x) = −log(1 + e^(−x)), the loss is
#
# $$\ell = y\log(1 + e^{-x}) + (1-y)\log(1 + e^{x}) = (1-y)\,x + \log(1 + e^{-x}),$$
#
# using log(1 + eˣ) = x + log(1 + e^(−x)). That still has e^(−x), which overflows for very
# negative x. The last trick: split x into its sign and size, log(1 + e^(−x)) =
# max(−x, 0) + log(1 + e^(−|x|)). Now the exponent is never positive, so e^(−|x|) ∈ (0, 1]
# can neither overflow nor make the log's argument 0. Altogether
#
# $$\boxed{\ \ell = \max(x, 0) - x\,y + \log\!\left(1 + e^{-|x|}\right)\ }$$
#
# Two details make it accurate, not just finite:
#
# - `np.log1p(z)` computes log(1 + z) accurately for tiny z (plain `log(1 + z)` first rounds
#   1 + 1e-30 to 1, and returns 0).
# - No two large numbers are subtracted when the answer is small. A confident right answer,
#   y = 0 and x = −50, has the true loss log(1 + e^(−50)) ≈ 2·10⁻²²: the boxed form gives
#   0 − 0 + 2·10⁻²², exactly. Rearranged as `x + (−x + log1p(e^(−|x|)))` the same formula
#   first rounds 50 + 2·10⁻²² to 50 and then returns 0. (Harmless for training, but a sign
#   of where precision goes.)
#
# ### Weights
#
# `binary_cross_entropy_with_logits` takes two optional weights, both broadcast against the
# input (they must not change its shape):
#
# - `weight` multiplies each element's loss (e.g. to mask some outputs);
# - `pos_weight` multiplies only the **positive** term, y·(−log σ(x)). With 10 negatives for
#   each positive, `pos_weight=10` makes both classes count equally. Write the loss as its
#   two terms, each a stable **softplus**, softplus(t) = log(1 + eᵗ) = max(t, 0) +
#   log1p(e^(−|t|)):
#
# $$\ell = \text{pos\_weight}\cdot y\cdot \text{softplus}(-x) + (1-y)\cdot\text{softplus}(x),$$
#
#   which for `pos_weight = 1` is the boxed form again.
#
# Write `_bce_with_logits_forward(input, target, weight, pos_weight, reduction)`. `input`
# and `target` are Tensors (use `.numpy()`); `weight` and `pos_weight` are numpy arrays of
# the input's dtype, or `None`.

# %% nbgrader={"grade": false, "grade_id": "bce", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _bce_with_logits_forward(input, target, weight, pos_weight, reduction):
    """Forward of binary_cross_entropy_with_logits, in the stable form (numpy in, numpy out).

    Why: sigmoid-then-log overflows or rounds to log(0) at logits of a few tens; working
    with the logit keeps every exponent <= 0, so the loss is finite for any finite logit.
    """
    # Hints:
    # - tail = np.log1p(np.exp(-np.abs(x)))  (shared by both softplus terms)
    # - no pos_weight: losses = np.maximum(x, 0) - x * y + tail
    # - pos_weight:    losses = pos_weight * y * (np.maximum(-x, 0) + tail)
    #                           + (1 - y) * (np.maximum(x, 0) + tail)
    # - weight: multiply the losses by it; then _reduce.
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
_y = np.array([[0.0, 1.0, 0.5], [1.0, 0.0, 1.0]], dtype=np.float32)
_out = binary_cross_entropy_with_logits(Tensor(_x), Tensor(_y))
assert _out.shape == () and _out.dtype == np.float32
np.testing.assert_allclose(_out.item(), _bce_reference(_x, _y).mean(), rtol=1e-5)
np.testing.assert_allclose(binary_cross_entropy_with_logits(Tensor(_x), Tensor(_y), reduction="none").numpy(),
                           _bce_reference(_x, _y), rtol=1e-5)
_pw = np.array([1.0, 3.0, 0.5], dtype=np.float32)
np.testing.assert_allclose(
    binary_cross_entropy_with_logits(Tensor(_x), Tensor(_y), pos_weight=Tensor(_pw), reduction="sum").item(),
    _bce_reference(_x, _y, _pw).sum(), rtol=1e-5)
np.testing.assert_allclose(
    binary_cross_entropy_with_logits(Tensor(_x), Tensor(_y), Tensor(_pw), reduction="none").numpy(),
    _bce_reference(_x, _y) * _pw, rtol=1e-5)
_huge = Tensor(np.array([1e4, -1e4, 1e4, -1e4], dtype=np.float32))
_l = binary_cross_entropy_with_logits(_huge, Tensor([1.0, 0.0, 0.0, 1.0]), reduction="none").numpy()
assert np.all(np.isfinite(_l)), f"the loss must stay finite at logits of ±1e4: {_l}"
np.testing.assert_allclose(_l, [0.0, 0.0, 1e4, 1e4])
_tiny = binary_cross_entropy_with_logits(Tensor([-50.0]), Tensor([0.0]), reduction="none").item()
assert 0 < _tiny < 1e-20, f"a tiny loss must not round to 0: {_tiny}"
print("✓ binary_cross_entropy_with_logits")

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
# Write `_check_class_targets(name, input, target, ignore_index)`. In order:
#
# 1. `input` must be floating (`TypeError`) with at least one dimension (`ValueError`);
# 2. `target` must be **int64** (`TypeError`). The classic bug is a float label tensor; say
#    what to do: `use target.long()`. (PyTorch also accepts class *probabilities* of the
#    input's shape as a float target; tinytorch takes class indices only.)
# 3. the expected target shape is the input's shape without dimension 1 (`()` for a 1-D
#    input). A target with the wrong number of dimensions is a `ValueError` naming both
#    shapes; then a different **batch size** (dimension 0) is a `ValueError` that names both
#    batch sizes; any other difference a `ValueError` naming both shapes;
# 4. every target value must be in `0 … C−1` or equal `ignore_index`. Otherwise raise
#    `IndexError` naming the first bad **value** and **C**: *"target value 7 is out of range
#    for 5 classes"*. (Without this check numpy would pick some other element, or negative
#    indices would silently count from the end.)

# %% nbgrader={"grade": false, "grade_id": "class-targets", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_class_targets(name, input, target, ignore_index):
    """Check int64 class-index targets against input of shape (C,), (N, C) or (N, C, d1, ...).

    Why: float labels, mismatched batches and out-of-range classes are the commonest
    classification bugs; each gets a message that says what is wrong and how to fix it.
    """
    # Hints:
    # - expected target shape: input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    # - C = input.shape[1] if input.ndim >= 2 else input.shape[0]
    # - bad = (t != ignore_index) & ((t < 0) | (t >= C)) with t = target.numpy();
    #   the first bad value is t[bad][0].
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
_z = Tensor(np.zeros((4, 5), dtype=np.float32))
_check_class_targets("nll_loss", _z, Tensor([0, 4, 2, -100]), -100)
_check_class_targets("nll_loss", Tensor(np.zeros((2, 3, 7), np.float32)), Tensor(np.zeros((2, 7), np.int64)), -100)
_check_class_targets("nll_loss", Tensor(np.zeros(3, np.float32)), Tensor(2), -100)


def _expect(exc, parts, *args):
    try:
        _check_class_targets(*args)
    except exc as e:
        for p in parts:
            assert p in str(e), f"the message should mention {p!r}: {e}"
        return
    raise AssertionError(f"{args[2].shape} {args[2].dtype} target should raise {exc.__name__}")


_expect(TypeError, ["int64", ".long()"], "cross_entropy", _z, Tensor([0.0, 1.0, 2.0, 3.0]), -100)
_expect(IndexError, ["7", "5"], "nll_loss", _z, Tensor([0, 7, 1, 1]), -100)
_expect(IndexError, ["-1", "5"], "nll_loss", _z, Tensor([0, -1, 1, 1]), -100)
_expect(ValueError, ["4", "3"], "nll_loss", _z, Tensor([0, 1, 2]), -100)
_expect(ValueError, ["(4, 5)", "(4, 2)"], "nll_loss", _z, Tensor(np.zeros((4, 2), np.int64)), -100)
print("✓ _check_class_targets")

# %% [markdown]
# ### nll_loss
#
# Now the gather. Given log-probabilities `logp` of shape `(N, C, d1, …)` and targets `t` of
# shape `(N, d1, …)`, we need `logp[i, t[i, k], k]` for every i and k, with no Python loop.
# `np.take_along_axis(logp, idx, axis=1)` does exactly this when `idx` has the input's number
# of dimensions with size 1 on axis 1: `idx = t[:, None]`. The result has a size-1 axis 1;
# drop it with `[:, 0]`.
#
# Ignored positions need care. Their target (−100) is not a valid index, so replace it by
# any valid one (0) before gathering, then give those positions weight 0 and set what was
# gathered there to 0 (use `np.where`, not a multiplication by the weight: 0 · (−∞) is nan
# if the ignored log-probability happens to be −∞).
#
# Write `_nll_forward(input, target, weight, ignore_index, reduction)`. Here `input` is the
# log-probability Tensor, but `target` is already a **numpy int64 array** and `weight` a
# numpy array of shape `(C,)` (or `None`): the provided `nll_loss` passes them as attributes,
# not as inputs, because they are not differentiable, yet module 06's backward rule needs
# them (the gradient of −logp[i, yᵢ] is −w_{yᵢ} at position yᵢ and 0 elsewhere, scaled by
# 1/Σw for the mean).
#
# A 1-D input `(C,)` with a 0-d target is a batch of one: add the batch axis at the start
# (`logp[None]`, `t[None]`) and, for `"none"`, return a 0-d result.

# %% nbgrader={"grade": false, "grade_id": "nll", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _nll_forward(input, target, weight, ignore_index, reduction):
    """Forward of nll_loss: -w[t] * logp[i, t, ...] per position, ignored positions 0, reduced.

    Why: with log-probabilities in hand, the likelihood of the data only needs the entry of
    the correct class for each sample: a gather, not a sum over all C classes.
    """
    # Hints:
    # - logp = input.numpy(); t = target; for a 1-D input use logp[None], t[None]
    # - valid = t != ignore_index; safe = np.where(valid, t, 0)
    # - picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0], then set it to 0
    #   where not valid (np.where)
    # - w = weight[safe] (or ones), then w = np.where(valid, w, 0), in logp's dtype
    # - losses = -picked * w; total weight = w.sum()
    ### BEGIN SOLUTION
    logp, t = input.numpy(), target
    if logp.ndim == 1:
        logp, t = logp[None], t[None]
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    picked = np.where(valid, np.take_along_axis(logp, safe[:, None], axis=1)[:, 0], 0)
    w = np.ones_like(picked) if weight is None else weight[safe]
    w = np.where(valid, w, 0).astype(logp.dtype)
    losses = (-picked * w).astype(logp.dtype)
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
_t = np.array([2, 0, -100, 1])
_want = -np.array([_lp[0, 2], _lp[1, 0], 0.0, _lp[3, 1]])
_out = nll_loss(Tensor(_lp), Tensor(_t), reduction="none")
assert _out.shape == (4,) and _out.dtype == np.float64
np.testing.assert_allclose(_out.numpy(), _want)
np.testing.assert_allclose(nll_loss(Tensor(_lp), Tensor(_t)).item(), _want.sum() / 3,
                           err_msg="the mean divides by the 3 non-ignored targets")
np.testing.assert_allclose(nll_loss(Tensor(_lp), Tensor(_t), reduction="sum").item(), _want.sum())
_cw = np.array([1.0, 2.0, 0.5])
np.testing.assert_allclose(nll_loss(Tensor(_lp), Tensor(_t), Tensor(_cw)).item(),
                           (_want * _cw[[2, 0, 0, 1]] * [1, 1, 0, 1]).sum() / (0.5 + 1.0 + 2.0))
_lp3 = np.log(np.full((2, 4, 3), 0.25))                        # (N, C, d1)
assert nll_loss(Tensor(_lp3), Tensor(np.zeros((2, 3), np.int64)), reduction="none").shape == (2, 3)
_one = nll_loss(Tensor(_lp[0]), Tensor(2), reduction="none")   # (C,) with a 0-d target
assert _one.shape == () and np.isclose(_one.item(), -_lp[0, 2])
assert nll_loss(Tensor(_lp.astype(np.float32)), Tensor(_t)).dtype == np.float32
print("✓ nll_loss")

# %% [markdown]
# ### cross_entropy = log_softmax + nll_loss
#
# Write the body of `cross_entropy`: the class dimension is 1 (0 for a 1-D input);
# `log_softmax` over it (module 02), then `nll_loss` with the same `weight`, `ignore_index`
# and `reduction`. Nothing else: no new numerics, no new op name. Because both pieces go
# through `apply`, module 06 will differentiate cross-entropy for free from the backward
# rules of `log_softmax` and `nll_loss`.
#
# **Label smoothing** (optional in PyTorch, `label_smoothing=ε`): a model trained on
# one-hot targets is pushed to ever larger logits. Smoothing mixes the target with the
# uniform distribution: `(1 − ε)·CE + ε·(mean over classes of −log p)`. The provided
# `_smoothing_term` computes the second part, reduced like the loss, from existing Tensor
# ops; when `label_smoothing > 0`, return `(1 - label_smoothing) * loss + label_smoothing *
# _smoothing_term(logp, target, weight, ignore_index, reduction)` (`weight` here is the
# numpy array from `_class_weight`).

# %% nbgrader={"grade": false, "grade_id": "cross-entropy", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _smoothing_term(logp, target, weight, ignore_index, reduction):
    """Label smoothing's uniform part, PyTorch's way: per position, -sum_c w_c * logp_c / C,
    0 where ignored; the mean divides by the same total weight as nll_loss."""
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


def cross_entropy(input, target, weight=None, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits `input` and int64 class indices `target`.

    input: (C,), (N, C) or (N, C, d1, ...) logits; target: the input's shape without
    dimension 1. Computed as log_softmax over the class dimension followed by nll_loss.
    Mirrors torch.nn.functional.cross_entropy (class-index targets).
    """
    _check_reduction(reduction)
    _check_tensor("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target)
    _check_class_targets("cross_entropy", input, target, ignore_index)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    weight = _class_weight("cross_entropy", weight, input)
    # Hints: class_dim = 1 if input.ndim > 1 else 0; logp = log_softmax(input, dim=class_dim);
    # loss = nll_loss(logp, target, weight, ignore_index=..., reduction=...); then label smoothing.
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
def _ce_reference(z, t):  # float64 log-sum-exp, one row per sample
    z = z.astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return lse - z[np.arange(len(t)), t]


_z = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32) * 3
_t = np.array([0, 4, 2, 2, 1, 3])
_out = cross_entropy(Tensor(_z), Tensor(_t))
assert _out.shape == () and _out.dtype == np.float32
np.testing.assert_allclose(_out.item(), _ce_reference(_z, _t).mean(), rtol=1e-5)
np.testing.assert_allclose(cross_entropy(Tensor(_z), Tensor(_t), reduction="none").numpy(),
                           _ce_reference(_z, _t), rtol=1e-5)
_big = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]], dtype=np.float32)
_l = cross_entropy(Tensor(_big), Tensor([2, 0]), reduction="none").numpy()
assert np.all(np.isfinite(_l)), f"cross-entropy must stay finite at logits of ±1e4: {_l}"
np.testing.assert_allclose(_l, [2e4, 2e4 + np.log(2)], rtol=1e-6)
_w = Tensor(_z, requires_grad=True)
_node = cross_entropy(_w, Tensor(_t)).grad_fn
assert _node.op == "nll_loss", "cross_entropy is nll_loss applied to log_softmax"
assert _node.inputs[0].grad_fn is not None, "the nll_loss input must be log_softmax's output"
_smooth = cross_entropy(Tensor(_z), Tensor(_t), label_smoothing=0.1).item()
_logp = _z.astype(np.float64) - (_z.max(1, keepdims=True) + np.log(np.exp(_z - _z.max(1, keepdims=True)).sum(1, keepdims=True)))
np.testing.assert_allclose(_smooth, 0.9 * _ce_reference(_z, _t).mean() + 0.1 * (-_logp.mean(1)).mean(), rtol=1e-5)
print("✓ cross_entropy")

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
assert np.isclose(criterion(_logits, _tokens).item(),
                  cross_entropy(_logits, _tokens, ignore_index=0).item())

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
# version that walks over blocks of rows (a loop over *blocks*, each block vectorised):

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
print(f"cross_entropy (full log_softmax): peak extra {_peak_full / 2**20:7.1f} MiB -> {_ce_full:.6f}")
print(f"chunked, 256 rows at a time:      peak extra {_peak_chunk / 2**20:7.1f} MiB -> {_ce_chunk:.6f}")
assert np.isclose(_ce_full, _ce_chunk, rtol=1e-5)

# %% [markdown]
# Same value, a fraction of the memory: the chunked version's peak is set by the chunk, not by
# N. Fused GPU kernels push the same idea further and even fold the final `Linear` layer in,
# so the `(N, C)` logits never exist as a whole either.
#
# ### Time: is stability expensive?
#
# The stable formulas do a few more elementwise operations (an `abs`, a `max`, a `log1p`). Let
# us time the naive and the stable binary cross-entropy on a million float32 logits, and
# `log(softmax)` against `log_softmax` for cross-entropy, all with numpy. Medians of several
# runs, measured on your machine:

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_xb = (np.random.default_rng(5).standard_normal(1_000_000) * 30).astype(np.float32)
_yb = (np.random.default_rng(6).random(1_000_000) < 0.5).astype(np.float32)


def naive_bce(x, y):
    p = 1 / (1 + np.exp(-x))
    return -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()


def stable_bce(x, y):
    return (np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))).mean()


def naive_ce(z, t):
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return -np.log(p[np.arange(len(t)), t]).mean()


def stable_ce(z, t):
    m = z.max(axis=1, keepdims=True)
    logp = z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(t)), t].mean()


_zc = (_logits_np[:512] * 40).astype(np.float32)
with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
    _rows = []
    for _name, _naive, _stable, _args in [("BCE, 1e6 logits (std 30)", naive_bce, stable_bce, (_xb, _yb)),
                                          ("CE, 512 x 8192 logits (std 40)", naive_ce, stable_ce,
                                           (_zc, _target_np[:512]))]:
        _tn, _ts = median_time(lambda: _naive(*_args)), median_time(lambda: _stable(*_args))
        print(f"{_name:32s} naive {_tn * 1e3:7.2f} ms -> {_naive(*_args):10.4f} | "
              f"stable {_ts * 1e3:7.2f} ms -> {_stable(*_args):10.4f} | stable/naive {_ts / _tn:4.2f}x")

# %% [markdown]
# The naive versions return `inf` or `nan` on these logits, the stable ones a number. The
# price of stability is the ratio printed in the last column: a small constant factor (a few
# extra elementwise passes over data that is already in cache-sized pieces), never a change
# in complexity — there is no reason to use the naive form. And our tinytorch
# `cross_entropy`, with its argument checks and two trips through `apply`, against the bare
# numpy `stable_ce`: the overhead is small next to the O(N·C) work.

# %%
_zt, _tt = Tensor(_zc), Tensor(_target_np[:512])
_t_ours = median_time(lambda: cross_entropy(_zt, _tt))
_t_np = median_time(lambda: stable_ce(_zc, _target_np[:512]))
print(f"tinytorch cross_entropy {_t_ours * 1e3:.2f} ms, numpy stable_ce {_t_np * 1e3:.2f} ms "
      f"(ratio {_t_ours / _t_np:.2f}x)")

# %% [markdown]
# ## 8. What PyTorch does
#
# - `torch.nn.functional.cross_entropy` is literally `log_softmax` followed by `nll_loss` (in
#   C++: `at::cross_entropy_loss` calls `at::log_softmax` and `at::nll_loss_nd`); `nll_loss`
#   is a gather with weights, reduced in the same kernel. Its backward is
#   the famous `softmax(z) − onehot(y)`, which autograd gets by chaining the two backward
#   rules, as module 06 will.
# - `ignore_index=-100` is the default precisely for padding: Hugging Face's data collators
#   pad the labels with −100 and its models call the loss with the default, so padding
#   tokens (and prompt tokens that should not be learned) never count.
# - `CrossEntropyLoss` also accepts **class probabilities** as a float target of the
#   input's shape (soft labels, distillation); tinytorch keeps to indices. A soft-target
#   loss is one line from `log_softmax`: `-(p_target * log_softmax(z, dim=1)).sum(1).mean()`.
# - `binary_cross_entropy_with_logits` evaluates `(1 − y)·x − (1 + (pos_weight − 1)·y)·log σ(x)`
#   with a stable `log_sigmoid(x) = min(x, 0) − log1p(e^(−|x|))`: the same function as ours,
#   arranged so that a tiny loss such as x = −50, y = 0 comes out as 0 instead of 2·10⁻²². `binary_cross_entropy` (on
#   probabilities) exists too, and clamps its logs at −100 to survive exactly the overflow you
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
#   float32 at logits of a few tens; the stable forms `max(x, 0) − x·y + log1p(e^(−|x|))` and
#   log-sum-exp `m + log Σ e^(z−m)` keep every exponent ≤ 0 and are finite at ±10⁴, for
#   the same price.
# - **Cross-entropy = log_softmax + nll_loss**: the log-sum-exp is module 02's, and the NLL
#   is a gather of the target's log-probability; `ignore_index` removes padding from both
#   the sum and the count.
# - Losses refuse what would silently be wrong: shapes that would broadcast, float class
#   labels, out-of-range classes.
# - Every loss is one op through `apply` (`mse_loss`, `binary_cross_entropy_with_logits`,
#   `nll_loss`) or a composition of ops, with what its backward needs (`reduction`,
#   `target`, `weight`, `pos_weight`, `ignore_index`) recorded as attributes for module 06.
# - For large vocabularies, the `(N, C)` log-probabilities dominate memory; chunked/fused
#   cross-entropy avoids holding them.
#
# Run `tito test module 04` to check your work against the full test suite.

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
# # Module 13 — Transformers: LayerNorm, the transformer block and a small GPT
#
# Everything is in place: tensors with autograd, layers, losses, optimizers, a tokenizer,
# embeddings and attention. This module assembles them into the model behind today's
# language models, a **decoder-only transformer** (GPT), and trains one on the course's
# fables with nothing but the framework you wrote. At the end it writes (bad, but
# recognisable) fables of its own.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain why transformers normalise **each token** with **LayerNorm** (and not over the
#   batch, as BatchNorm does), and write it as **one fused op** with its own backward rule,
#   equal to PyTorch's `nn.LayerNorm`;
# - build the position-wise **feed-forward network** (Linear → GELU → Linear) and the
#   **pre-norm transformer block** `x + attn(ln1(x))`, `x + ff(ln2(x))`, and explain why
#   the residual stream makes deep stacks trainable;
# - assemble a **GPT**: token + position embeddings, a stack of blocks, a final LayerNorm and
#   a (tied) output head, trained with the **causal language-modelling loss**;
# - **sample** from it with temperature and top-k;
# - train it on a CPU with AdamW, a warm-up + cosine schedule and gradient clipping, and
#   reason about its cost: parameters ($\approx 12Ld^2$), FLOPs per token ($\approx 6N$),
#   tokens per second, and activation memory against the context length.
#
# ## Prerequisites
#
# Modules 01-12: `Tensor` and `apply` (01), `gelu` (02), `Module`, `Linear`, `ModuleList`,
# `init` (03), `cross_entropy` (04), `load_text` and `Generator` (05), `backward_rule` and
# `gradcheck` (06), `AdamW` and the schedulers (07), `Dropout` and `clip_grad_norm_` (08),
# the tokenizers and `get_batch` (10), `Embedding` (11) and `MultiheadAttention` (12).
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/nn/transformer.py` when you run `tito export 13`
# (or `tito test module 13`); `tinytorch.nn` re-exports `LayerNorm`, `TransformerBlock`,
# `GPT`, `GPTConfig`, and `tinytorch.nn.functional` re-exports `layer_norm`. Fill in the
# cells with `# YOUR CODE HERE`, then run the check cell below each.

# %%
#| default_exp nn.transformer

# %%
import math
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch

import tinytorch
from tinytorch import Tensor
from tinytorch.autograd import gradcheck

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: a stack of blocks on a residual stream
#
# A GPT reads a sequence of token ids $t_1, \dots, t_T$ and outputs, **at every position**,
# a distribution over the next token. Its structure:
#
# 1. each id becomes a vector: a learned **token embedding** plus a learned **position
#    embedding** (attention by itself does not know the order of its inputs);
# 2. these $T$ vectors of width $d$ form the **residual stream**. $L$ identical
#    **blocks** each *read* the stream, compute something, and *add* the result back:
#
#    $$x \leftarrow x + \operatorname{Attn}(\operatorname{LN}_1(x)), \qquad
#      x \leftarrow x + \operatorname{FF}(\operatorname{LN}_2(x));$$
#
#    attention moves information **between** positions (only from earlier ones: a causal
#    mask), the feed-forward network transforms each position **on its own**;
# 3. a final LayerNorm and a linear **head** turn each position's vector into $V$ logits,
#    one per vocabulary entry.
#
# The picture below is the whole model; the dashed box repeats $L$ times.

# %%
def draw_gpt(ax):
    """The GPT architecture as boxes and arrows (pre-norm blocks on a residual stream)."""
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 14)
    ax.axis("off")

    def box(x, y, w, h, text, color):
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.08",
                                    fc=color, ec="black", lw=1))
        ax.text(x, y, text, ha="center", va="center", fontsize=9)

    def arrow(x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0), arrowprops=dict(arrowstyle="->", lw=1.2))

    box(4.5, 0.5, 3.2, 0.6, "token ids  (B, T)", "#eeeeee")
    box(2.6, 1.7, 2.6, 0.6, "token embedding", "#cfe2ff")
    box(6.4, 1.7, 2.6, 0.6, "position embedding", "#cfe2ff")
    arrow(4.5, 0.8, 2.6, 1.4)
    arrow(4.5, 0.8, 6.4, 1.4)
    ax.text(3, 2.75, "⊕", ha="center", va="center", fontsize=15)
    arrow(2.6, 2.0, 2.9, 2.55)
    arrow(6.4, 2.0, 3.2, 2.7)
    # the block
    ax.add_patch(FancyBboxPatch((1.2, 3.4), 7.6, 6.6, boxstyle="round,pad=0.1", fc="none",
                                ec="gray", ls="--"))
    ax.text(8.6, 9.6, "× L blocks", ha="right", fontsize=9, color="gray")
    ax.plot([3, 3], [2.95, 10.6], color="black", lw=2)  # the residual stream
    ax.text(2.8, 3.6, "residual\nstream x", ha="right", fontsize=8)
    box(6, 4.3, 2.4, 0.6, "LayerNorm 1", "#fff3cd")
    box(6, 5.5, 3.6, 0.8, "causal multi-head\nattention", "#f8d7da")
    box(6, 7.2, 2.4, 0.6, "LayerNorm 2", "#fff3cd")
    box(6, 8.5, 3.6, 0.8, "feed-forward\nLinear → GELU → Linear", "#d1e7dd")
    for y0, y1, y2 in [(3.9, 4.3, 6.4), (6.8, 7.2, 9.3)]:
        ax.annotate("", xy=(4.8, y1), xytext=(3, y0), arrowprops=dict(arrowstyle="->", lw=1))
        ax.annotate("", xy=(3, y2), xytext=(6, y2 - 0.5), arrowprops=dict(arrowstyle="->", lw=1))
        ax.text(3.25, y2 + 0.05, "+", fontsize=12, va="center")
    arrow(6, 4.6, 6, 5.1)
    arrow(6, 7.5, 6, 8.1)
    box(5, 11.2, 2.6, 0.6, "final LayerNorm", "#fff3cd")
    box(5, 12.3, 3.4, 0.6, "head: Linear(d, V)", "#cfe2ff")
    box(5, 13.4, 3.4, 0.6, "logits  (B, T, V)", "#eeeeee")
    arrow(3, 10.6, 4.2, 10.9)
    arrow(5, 11.5, 5, 12.0)
    arrow(5, 12.6, 5, 13.1)
    ax.annotate("", xy=(3.3, 12.3), xytext=(1.3, 1.7),
                arrowprops=dict(arrowstyle="<->", color="C0", ls=":", connectionstyle="arc3,rad=-0.3"))
    ax.text(0.1, 7.0, "tied:\nthe same\nV×d matrix", fontsize=8, color="C0")


fig, ax = plt.subplots(figsize=(6.5, 8))
draw_gpt(ax)
ax.set_title("A GPT: embeddings, L pre-norm blocks, final LayerNorm, head")
fig.tight_layout()
plt.show()

# %% [markdown]
# Two design choices in this picture carry most of the engineering:
#
# - **Residual connections.** Each block *adds* to the stream instead of replacing it. The
#   derivative of $x + f(x)$ is $I + f'(x)$: in the backward pass the gradient reaches every
#   block through the identity path, undiminished, however deep the stack. Without it, the
#   gradient is a product of $L$ Jacobians that easily vanishes or explodes (module 03's
#   picture of 30 layers, for gradients).
# - **Pre-norm.** The LayerNorm sits *inside* the branch, before attention and the MLP
#   (GPT-2 and later), not after the addition (the original 2017 transformer, "post-norm").
#   With post-norm the identity path passes through a normalisation in every block, the
#   clean $I$ is lost, and training needs a careful learning-rate warm-up to start at all.
#   With pre-norm the stream itself is never normalised, only what each branch reads from it;
#   that is why the model needs one more LayerNorm at the very end, before the head.
#
# We build the pieces bottom-up: LayerNorm, the feed-forward network, the block, the GPT,
# sampling; then we train.

# %% [markdown]
# ## 2. LayerNorm: normalise each token
#
# Activations in a deep network drift in scale as they pass through layers and as training
# changes the weights. Normalising them keeps every layer's input in a predictable range.
# BatchNorm (module 09) normalises each **feature over the batch**; for sequences that is
# a poor fit: statistics would mix different positions and different sequences (and
# padding), a batch of one at generation time would have no statistics, and the model would
# behave differently in training and evaluation. **LayerNorm** instead normalises each
# **token vector over its own features**: for one position's vector $x \in \mathbb{R}^d$
#
# $$\mu = \frac1d\sum_i x_i,\qquad \sigma^2 = \frac1d\sum_i (x_i-\mu)^2,\qquad
#   \hat x_i = \frac{x_i-\mu}{\sqrt{\sigma^2+\varepsilon}},\qquad y_i = \gamma_i\,\hat x_i + \beta_i .$$
#
# Every token is treated the same way in training and in generation, independently of the
# others: no running statistics, no train/eval difference. `γ` (`weight`, initialised to 1)
# and `β` (`bias`, initialised to 0) are learned per feature, so the layer can undo the
# normalisation where that helps. PyTorch's `normalized_shape` may name **several** trailing
# dimensions (`(C, H, W)` normalises each sample of an image as a whole); the statistics are
# then taken over all of them, and γ, β have that shape.

# %%
_rng = np.random.default_rng(0)
_acts = _rng.standard_normal((6, 8)) * _rng.uniform(0.5, 4, (6, 1)) + _rng.uniform(-3, 3, (6, 1))
_ln = (_acts - _acts.mean(1, keepdims=True)) / np.sqrt(_acts.var(1, keepdims=True) + 1e-5)
_bn = (_acts - _acts.mean(0, keepdims=True)) / np.sqrt(_acts.var(0, keepdims=True) + 1e-5)
fig, axes = plt.subplots(1, 3, figsize=(11, 2.8))
for _ax, _a, _t in zip(axes, [_acts, _bn, _ln], ["activations: 6 tokens × 8 features",
                                                  "BatchNorm: each column (feature)\nnormalised over the tokens",
                                                  "LayerNorm: each row (token)\nnormalised over its features"]):
    _im = _ax.imshow(_a, cmap="coolwarm", vmin=-4, vmax=4)
    _ax.set_title(_t, fontsize=9)
    _ax.set_xlabel("feature")
    _ax.set_ylabel("token")
fig.colorbar(_im, ax=axes, shrink=0.8)
plt.show()

# %% [markdown]
# ### One fused op, and its backward
#
# We could write LayerNorm from module 01's ops (`mean`, `-`, `*`, `sqrt`, ...), and
# autograd would differentiate it. That records one graph node per op (the graph printed at
# the end of this section shows the chain), most of them keeping a full-size intermediate
# alive for the backward pass, and the backward walks every one.
# Instead we make it **one op, `"layer_norm"`**, with a hand-derived backward rule: one node,
# and the only things saved are the input and two small per-token statistics, `mean` and
# `rstd` $= 1/\sqrt{\sigma^2+\varepsilon}$. (PyTorch does the same: `native_layer_norm`
# returns exactly these two extra tensors for its backward kernel.) We build it in three
# steps: the statistics, the forward, the backward.
#
# **The statistics.** Write `_layer_norm_stats(x, k, eps)` on a numpy array: the mean and
# `rstd` of each group of numbers that is normalised together — all the numbers of the last
# `k` dimensions, for every index of the leading ones. Three details decide whether you
# match PyTorch: which dimensions, which variance, where $\varepsilon$ goes.
#
# <details><summary>Hint 1</summary>
#
# Reread the formula above: is the variance divided by $d$ or by $d - 1$? Is $\varepsilon$
# added to the variance or to the standard deviation? (For a token whose features are all
# equal the two placements give very different results.)
# </details>
#
# <details><summary>Hint 2</summary>
#
# numpy reductions accept a tuple of axes and `keepdims=True`; the provided `_norm_axes`
# gives the tuple of the last `k` axes. Keeping the reduced axes as size 1 is what lets the
# statistics broadcast against `x` later.
# </details>
#
# <details><summary>The approach</summary>
#
# One group at a time: which numbers share a mean and a spread? For `k = 1` it is one
# token's features, for larger `k` a whole trailing block. Two choices decide whether you
# match PyTorch: the spread is divided by the group's size, not by one less, and `eps`
# sits under the square root, so a constant group still gets a finite `rstd`. Keep the
# reduced axes, as the contract asks, so the result broadcasts onto `x`.
# </details>

# %% nbgrader={"grade": false, "grade_id": "layer-norm-stats", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
"""Transformers (module 13): LayerNorm as one fused op with its own backward rule, the
feed-forward network, the pre-norm transformer block, and a GPT language model with
generate()."""
import math
from dataclasses import dataclass

import numpy as np

from tinytorch._tensor import Tensor, apply, arange, ones, zeros
from tinytorch.autograd import backward_rule, no_grad
from tinytorch.random import numpy_generator
from tinytorch.nn.attention import MultiheadAttention, _kv_cache_module, causal_mask
from tinytorch.nn.embedding import Embedding
from tinytorch.nn.init import normal_, zeros_
from tinytorch.nn.layers import GELU, Linear, Module, ModuleList, Parameter
from tinytorch.nn.losses import cross_entropy
from tinytorch.nn.dropout import Dropout

__all__ = ["layer_norm", "LayerNorm", "FeedForward", "MLP", "TransformerBlock", "GPTConfig", "GPT"]


def _norm_axes(ndim, k):
    """The last k axes of an ndim-dimensional array: the normalised dimensions."""
    return tuple(range(ndim - k, ndim))


def _layer_norm_stats(x, k, eps):
    """Per-group statistics of LayerNorm.

    Contract: `x` a numpy floating array, `k` >= 1 the number of trailing (normalised) axes,
    `eps` > 0. Returns (mean, rstd), numpy arrays of x's shape with size 1 in the last k axes
    (so they broadcast against x): the mean over those axes, and rstd = 1 / sqrt(var + eps)
    with var the biased variance (divided by the count, as PyTorch's layer_norm does).
    """
    # Idea: one mean and one spread per token, over the normalised axes only.
    ### BEGIN SOLUTION
    axes = _norm_axes(x.ndim, k)
    mean = x.mean(axis=axes, keepdims=True)
    var = np.square(x - mean).mean(axis=axes, keepdims=True)
    return mean, 1.0 / np.sqrt(var + eps)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-layer-norm-stats", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import (ContextRecorder, CountingRng, assert_close, assert_equal, assert_raises, check,
                               passthrough_spy, preserved_state)

_rng = np.random.default_rng(1)
_xx = _rng.standard_normal((2, 5, 6)) * 3 + 1
_m, _r = _layer_norm_stats(_xx, 1, 1e-5)
assert_equal(_m.shape, (2, 5, 1), "mean's shape for k=1 (reduced axis kept)")
assert_equal(_r.shape, (2, 5, 1), "rstd's shape for k=1")
assert_close(_m[..., 0], _xx.mean(-1), rtol=1e-12, what="mean over the last axis")
assert_close(_r[..., 0], 1 / np.sqrt(_xx.var(-1) + 1e-5), rtol=1e-10,
             what="rstd = 1/sqrt(biased var + eps) over the last axis")
_m2, _r2 = _layer_norm_stats(_xx, 2, 1e-5)
assert_equal(_m2.shape, (2, 1, 1), "mean's shape for k=2: one number per sample")
assert_close(_r2[:, 0, 0], 1 / np.sqrt(_xx.reshape(2, -1).var(-1) + 1e-5), rtol=1e-10,
             what="rstd over the last two axes together")
_flat = np.array([[2.0, 2.0, 2.0, 2.0]])                   # a token whose features are all equal
assert_close(_layer_norm_stats(_flat, 1, 0.25)[1], np.array([[2.0]]), rtol=1e-12,
             what="rstd of a constant token with eps = 0.25: 1/sqrt(0 + 0.25)")
_far = (100.0 + 0.01 * _rng.standard_normal((4, 64))).astype(np.float32)   # tokens far from 0, spread 0.01
_rf = _layer_norm_stats(_far, 1, 1e-5)[1]
check(np.all(np.isfinite(_rf)), "rstd of float32 tokens with mean 100 and spread 0.01 is finite (E[x²] - mean² "
      "subtracts two numbers near 10,000 and loses every digit of the spread, even its sign)", got=_rf.ravel())
assert_close(_rf[:, 0], 1 / np.sqrt(_far.astype(np.float64).var(-1) + 1e-5), rtol=1e-2,
             what="rstd of float32 tokens with mean 100 and spread 0.01 (the variance measured around the mean)")
_two = np.array([[0.0, 2.0]])                              # var 1 (biased), 2 (unbiased)
assert_close(_layer_norm_stats(_two, 1, 0.0)[1], np.array([[1.0]]), rtol=1e-12,
             what="rstd of [0, 2] with eps = 0: the biased variance is 1")
print("✓ _layer_norm_stats; rstd of token (0, 0):", _r[0, 0, 0].round(4))

# %% [markdown]
# **The forward.** The provided `layer_norm` checks the arguments, computes the statistics
# with your `_layer_norm_stats`, replaces a missing weight or bias by ones or zeros (which do
# not require grad), and dispatches the op `"layer_norm"` with inputs `(input, weight, bias)`
# and attributes `normalized_shape` (a tuple), `eps`, `mean` and `rstd`. The dispatch calls
# your `_layer_norm_forward` with the inputs (Tensors) and the attributes (keywords); it
# returns the numpy result.
#
# <details><summary>Hint 1</summary>
#
# The statistics are already computed; the forward only uses them. Which of the formula's
# four lines are left?
# </details>
#
# <details><summary>The approach</summary>
#
# Nothing is reduced here: the statistics are given, so the forward is elementwise work.
# Ask what shape each array has. `mean` and `rstd` have size 1 on the normalised axes,
# `weight` and `bias` have exactly those axes, so broadcasting lines all of them up with
# `x` without a reshape. γ scales the normalised value, not the raw input, and β is not
# scaled. The dispatch hands you Tensors and expects a numpy array back.
# </details>

# %% nbgrader={"grade": false, "grade_id": "layer-norm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _layer_norm_forward(x, weight, bias, *, normalized_shape, eps, mean, rstd):
    """Contract: x, weight, bias Tensors (weight and bias of shape normalized_shape); mean and
    rstd numpy arrays from _layer_norm_stats. Returns the numpy array y of x's shape: the
    formula of the section's start, with these statistics."""
    # Idea: normalise with the saved statistics, then the per-feature affine map.
    ### BEGIN SOLUTION
    xhat = (x.numpy() - mean) * rstd
    return xhat * weight.numpy() + bias.numpy()
    ### END SOLUTION


def _as_shape(normalized_shape):
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dimensions `normalized_shape`, then scale by weight and
    shift by bias (torch.nn.functional.layer_norm). One op, "layer_norm"."""
    if not isinstance(input, Tensor) or input.dtype.kind != "f":
        raise TypeError(f"layer_norm: input must be a floating-point Tensor, got "
                        f"{input.dtype if isinstance(input, Tensor) else type(input).__name__}")
    shape = _as_shape(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"layer_norm: given normalized_shape={list(shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                           f"{list(input.shape)}")
    for name, t in [("weight", weight), ("bias", bias)]:
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"layer_norm: {name} must have shape {shape} (= normalized_shape), "
                               f"got {tuple(t.shape)}")
    mean, rstd = _layer_norm_stats(input.numpy(), k, eps)
    mean, rstd = np.asarray(mean, dtype=input.dtype), np.asarray(rstd, dtype=input.dtype)
    weight = ones(shape, dtype=input.dtype) if weight is None else weight
    bias = zeros(shape, dtype=input.dtype) if bias is None else bias
    return apply("layer_norm", _layer_norm_forward, input, weight, bias, normalized_shape=shape,
                 eps=eps, mean=mean, rstd=rstd)


# %% nbgrader={"grade": true, "grade_id": "test-layer-norm", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_y = layer_norm(Tensor(_xx), 6)
assert_close(_y.numpy().mean(-1), np.zeros((2, 5)), atol=1e-12, what="each token's mean after layer_norm")
assert_close(_y.numpy().var(-1), np.ones((2, 5)), rtol=1e-5, what="each token's (biased) variance after layer_norm")
_w, _b = Tensor(_rng.standard_normal(6) + 1), Tensor(_rng.standard_normal(6))
assert_close(layer_norm(Tensor(_xx), (6,), _w, _b).numpy(), _y.numpy() * _w.numpy() + _b.numpy(), rtol=1e-12,
             what="weight scales and bias shifts each feature")
_ref2 = (_xx - _xx.mean((1, 2), keepdims=True)) / np.sqrt(_xx.var((1, 2), keepdims=True) + 1e-5)
assert_close(layer_norm(Tensor(_xx), (5, 6)).numpy(), _ref2, rtol=1e-10, what="normalized_shape (5, 6)")
assert_raises(RuntimeError, layer_norm, Tensor(_xx), 5, match="normalized_shape")
_given = _layer_norm_forward(Tensor(_xx), Tensor(np.ones(6)), Tensor(np.zeros(6)), normalized_shape=(6,), eps=1e-5,
                             mean=np.zeros((2, 5, 1)), rstd=np.full((2, 5, 1), 2.0))
assert_close(_given, _xx * 2.0, rtol=1e-12, what="_layer_norm_forward with mean 0 and rstd 2 given: (x - 0) * 2 "
             "(it normalises with the statistics it is handed, which the backward will reuse, not its own)")
print("✓ layer_norm forward; token (0, 0) normalised:", _y.numpy()[0, 0].round(3))

# %% [markdown]
# **The backward: you derived it already.** Module 09's batch norm normalises each
# *channel* over the batch; LayerNorm normalises each *token* over its features. The algebra
# of 09's derivation does not care which numbers form a group, so the rule is the same
# rule with the roles of the axes exchanged. Before you write code, fill in the translation
# on paper:
#
# | | batch norm (module 09) | LayerNorm, `normalized_shape` of `k` dims |
# |---|---|---|
# | one group, normalised together | one channel's values over N, H, W | ? |
# | the means inside $\bar x$ run over | every axis except the channel axis | ? |
# | $\bar\gamma$, $\bar\beta$ are summed over | every axis except the channel axis | ? |
# | the statistics are constants (no path through them) | in eval mode | ? |
#
# Two facts tested your derivation in 09, and they hold here per token: adding the same
# number to every feature of a token changes no output, so $\bar x$ sums to 0 over each
# token; scaling a token's features about their mean changes no $\hat x$ (up to ε), so
# $\sum \bar x\,\hat x \approx 0$ per token too. The check cell tests both for one and for
# two normalised dimensions, then runs gradcheck.
#
# Write the rule registered for `"layer_norm"` (module 06's `backward_rule`): it receives
# the node (its `inputs` and `attrs`, as saved by the forward) and the upstream gradient.
#
# <details><summary>Hint 1 (if module 09's derivation is far away)</summary>
#
# Name the gradient arriving at $\hat x$: $\hat g = \gamma\,\bar y$. Each $x_k$ reaches
# $\hat x$ directly, through $\mu$ and through $\sigma^2$ (with $\partial\mu/\partial x_k = 1/d$
# and $\partial\sigma^2/\partial x_k = \frac2d (x_k - \mu)$). Adding the three paths gives
# `rstd` times $\hat g$ minus two corrections, each a per-token mean of something times a
# per-element factor.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Two different sets of axes are involved: the **means** in $\bar x$ run over the normalised
# (trailing) axes, per token, kept as size-1 axes so they broadcast back; the **sums** for
# $\bar\gamma$ and $\bar\beta$ run over the leading axes, so that their result has the shape
# `normalized_shape`. Everything the rule needs was saved: $x$ and $\gamma$ are the node's
# inputs, `mean` and `rstd` its attributes.
# </details>
#
# <details><summary>The approach</summary>
#
# Translate 09's rule rather than derive it again; the trap is the axes, not the algebra.
# The input gradient needs per-token means over the trailing `k` axes, kept as size 1 so
# they broadcast back. γ and β are shared by every token, so their gradients gather over
# the leading axes and end with the shape `normalized_shape`. Test with the two facts
# above: an input gradient that does not sum to zero over each token lacks a correction or
# uses the wrong axes. Return one gradient per input, in the inputs' order.
# </details>

# %% nbgrader={"grade": false, "grade_id": "layer-norm-backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("layer_norm")
def _layer_norm_backward(node, grad):
    """Gradients of y = layer_norm(x) * weight + bias.

    Contract: node.inputs = (x, weight, bias) Tensors, node.attrs has normalized_shape, mean,
    rstd; `grad` the upstream gradient (x's shape). Returns (grad_x of x's shape, grad_weight
    and grad_bias of normalized_shape), numpy arrays.
    """
    x, weight = node.inputs[0].numpy(), node.inputs[1].numpy()
    mean, rstd = node.attrs["mean"], node.attrs["rstd"]
    k = len(node.attrs["normalized_shape"])
    # Idea: module 09's batch-norm rule, with a token's features as the group.
    ### BEGIN SOLUTION
    axes = _norm_axes(x.ndim, k)
    lead = tuple(range(x.ndim - k))
    grad = np.asarray(grad)
    xhat = (x - mean) * rstd
    gxhat = grad * weight
    gx = rstd * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                 - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
    return gx, (grad * xhat).sum(axis=lead), grad.sum(axis=lead)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-layer-norm-backward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_x = Tensor(_xx, requires_grad=True)
_w, _b = Tensor(_w.numpy(), requires_grad=True), Tensor(_b.numpy(), requires_grad=True)
_out = layer_norm(_x, 6, _w, _b)
assert_equal(_out.grad_fn.op, "layer_norm", "layer_norm records one op")
for _k, _shape in ((1, 6), (2, (5, 6))):                  # the two facts of the derivation, per group
    _xk = Tensor(_xx, requires_grad=True)
    _wk = Tensor(_rng.standard_normal(_shape) + 1)
    (layer_norm(_xk, _shape, _wk, eps=0.0) * Tensor(_rng.standard_normal(_xx.shape))).sum().backward()
    _ax = tuple(range(3 - _k, 3))
    _xh = (_xx - _xx.mean(_ax, keepdims=True)) / _xx.std(_ax, keepdims=True)
    assert_close(_xk.grad.numpy().sum(_ax), np.zeros(_xx.shape[:3 - _k]), atol=1e-9,
                 what=f"normalized_shape of {_k} dim(s): x̄ sums to 0 over each group (a shift of a token changes nothing)")
    assert_close((_xk.grad.numpy() * _xh).sum(_ax), np.zeros(_xx.shape[:3 - _k]), atol=1e-9,
                 what=f"normalized_shape of {_k} dim(s): Σ x̄·x̂ = 0 over each group (a scaling about the mean changes nothing)")


def _gradcheck_says(fn, inputs, what):
    """gradcheck, with this cell's label on a failure and gradcheck's own account of it."""
    try:
        ok, why = gradcheck(fn, inputs), None
    except Exception as exc:  # gradcheck names the input and the error it measured
        ok, why = False, str(exc)
    check(ok, what, got=why)


_gradcheck_says(lambda x, w, b: layer_norm(x, 6, w, b), [_x, _w, _b],
                "gradcheck of layer_norm over the last dim (input, weight, bias)")
_w2 = Tensor(_rng.standard_normal((5, 6)), requires_grad=True)
_gradcheck_says(lambda x, w: layer_norm(x, (5, 6), w), [_x, _w2], "gradcheck of layer_norm over the last two dims")
_gradcheck_says(lambda x: layer_norm(x, 6, eps=0.5), [_x], "gradcheck with a large eps = 0.5")
_x1, _w1, _b1 = (Tensor(_rng.standard_normal(7), requires_grad=True) for _ in range(3))
_gradcheck_says(lambda x, w, b: layer_norm(x, 7, w, b), [_x1, _w1, _b1],
                "gradcheck on one unbatched token (7,): no leading dims to sum the weight's and bias's gradients over")
_out.backward(Tensor(np.ones((2, 5, 6))))
assert_close(_b.grad.numpy(), np.full(6, 10.0), rtol=1e-12, what="bias gradient: sum of ones over 2×5 tokens")
print("✓ layer_norm backward: one node, gradcheck passes; bias grad", _b.grad.numpy())

# %% [markdown]
# <details><summary>The form you should have found (open it once your check passes)</summary>
#
# $$\bar x = \text{rstd}\cdot\Big(\hat g - \operatorname{mean}(\hat g)
#     - \hat x\cdot\operatorname{mean}(\hat g\odot\hat x)\Big), \qquad \hat g = \gamma\odot\bar y,$$
#
# with the means over the normalised dimensions of each token, and
# $\bar\gamma = \sum \bar y\odot\hat x$, $\bar\beta = \sum \bar y$ over the leading
# dimensions (every token of every sequence). It is 09's training-mode rule; LayerNorm has
# no eval mode, since its statistics always come from the token itself.
# </details>

# %% [markdown]
# `LayerNorm` the module owns `weight` and `bias` and calls the function; it is provided.
# (`elementwise_affine=False` gives a LayerNorm without parameters, `bias=False` one with a
# scale only, as in PyTorch.) Let's compare with PyTorch on random data, if it is installed,
# and see the one node our op records against the chain a composite version would record.

# %%
#| export
class LayerNorm(Module):
    """Layer normalisation over the trailing `normalized_shape` dims (torch.nn.LayerNorm)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(zeros(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    _xin = np.random.default_rng(2).standard_normal((4, 7, 16)).astype(np.float32)
    _ours, _theirs = LayerNorm(16), torch.nn.LayerNorm(16)
    print(_ours, "|", _theirs)
    _x_ours = Tensor(_xin, requires_grad=True)
    _x_theirs = torch.tensor(_xin, requires_grad=True)
    _y_ours, _y_theirs = _ours(_x_ours), _theirs(_x_theirs)
    _g = np.random.default_rng(3).standard_normal(_xin.shape).astype(np.float32)
    _y_ours.backward(Tensor(_g))
    _y_theirs.backward(torch.tensor(_g))
    print(f"max |y - y_torch|        = {np.abs(_y_ours.numpy() - _y_theirs.detach().numpy()).max():.1e}")
    print(f"max |dx - dx_torch|      = {np.abs(_x_ours.grad.numpy() - _x_theirs.grad.numpy()).max():.1e}")
    print(f"max |dγ - dγ_torch|      = {np.abs(_ours.weight.grad.numpy() - _theirs.weight.grad.numpy()).max():.1e}")

_xc = tinytorch.randn(3, 8, requires_grad=True)
_mu = _xc.mean(-1, keepdim=True)
_composite = (_xc - _mu) / ((_xc - _mu).pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
tinytorch.autograd.print_graph(_composite)
print("fused:", layer_norm(_xc, 8).grad_fn)

# %% [markdown]
# ## 3. The feed-forward network
#
# After attention has mixed information between positions, each position is transformed
# **independently** by a two-layer MLP: widen to $d_{ff}$ (usually $4d$), apply GELU,
# project back to $d$:
#
# $$\operatorname{FF}(x) = W_2\,\operatorname{GELU}(W_1 x + b_1) + b_2 .$$
#
# Since `Linear` works on any leading dimensions, `(B, T, d)` passes straight through: the
# same weights are applied at every position. This is where most of a transformer's
# parameters live ($2 d\,d_{ff} = 8d^2$ per block against $4d^2$ for attention), and, as
# interpretability research suggests, much of what the model "knows". A `Dropout` at the
# end regularises the branch (with `dropout=0.0` it does nothing).
#
# Which GELU? GPT-2 used the **tanh approximation**
# $\tfrac12 x\,(1+\tanh(\sqrt{2/\pi}\,(x+0.044715x^3)))$, and so do we by default
# (`approximate="tanh"`): it differs from the exact $x\,\Phi(x)$ by less than $10^{-3}$,
# and on our numpy backend it is expected to be cheaper than module 02's careful
# float64 `erf` — the MLP's activation is the largest elementwise tensor of the model
# ($B\cdot T\cdot 4d$ numbers), so this matters. The cells after the check measure it.
#
# Write `FeedForward.forward`; the layers are built for you in `__init__`.
#
# <details><summary>Hint 1</summary>
#
# Every sub-layer already exists as an attribute; the forward only decides their order.
# Where does the dropout sit: inside, or at the very end of the branch?
# </details>
#
# <details><summary>The approach</summary>
#
# Each position is mapped on its own, so the only question is the order of the parts.
# Which layer must accept `d_model` features, and which must give `d_model` back? The
# nonlinearity belongs where the width is: two linear maps with nothing between them are
# just one linear map. Dropout regularises what the whole branch contributes, so nothing
# of the branch should come after it.
# </details>

# %% nbgrader={"grade": false, "grade_id": "feed-forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class FeedForward(Module):
    """Position-wise MLP: Linear(d_model, d_ff) → GELU → Linear(d_ff, d_model) → Dropout.
    `approximate` is GELU's: "tanh" (GPT-2's choice, the default here) or "none" (exact)."""

    def __init__(self, d_model, d_ff=None, dropout=0.0, approximate="tanh"):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.fc1 = Linear(d_model, d_ff)
        self.act = GELU(approximate)
        self.fc2 = Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        """Contract: x (..., d_model) -> (..., d_model), the same MLP at every position."""
        # Idea: widen, bend, narrow back.
        ### BEGIN SOLUTION
        return self.dropout(self.fc2(self.act(self.fc1(x))))
        ### END SOLUTION


MLP = FeedForward  # nanoGPT's name for the same thing


# %% nbgrader={"grade": true, "grade_id": "test-feed-forward", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _ff = FeedForward(6, 10)
    _xf = tinytorch.randn(2, 3, 6)
assert_equal([n for n, _ in _ff.named_parameters()], ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"],
             "FeedForward's parameters")
assert_equal(FeedForward(4).fc1.out_features, 16, "d_ff defaults to 4 * d_model")
_h = _xf.numpy() @ _ff.fc1.weight.numpy().T + _ff.fc1.bias.numpy()
_h = tinytorch.nn.functional.gelu(Tensor(_h), approximate="tanh").numpy()
_ref = _h @ _ff.fc2.weight.numpy().T + _ff.fc2.bias.numpy()
assert_equal(_ff(_xf).shape, (2, 3, 6), "FeedForward keeps the shape (B, T, d)")
assert_close(_ff(_xf).numpy(), _ref, rtol=1e-5, atol=1e-6, what="fc2(gelu_tanh(fc1(x)))")


_ff.dropout = passthrough_spy()
_ff(_xf)
assert_equal(len(_ff.dropout.seen), 1, "FeedForward calls its dropout once per forward")
assert_close(_ff.dropout.seen[0], _ref, rtol=1e-5, atol=1e-6, what="what FeedForward's dropout receives: the branch's output")
print("✓ FeedForward; out[0, 0] =", _ff(_xf).numpy()[0, 0].round(4))

# %% [markdown]
# **Predict first.** How many times faster do you expect the tanh approximation to be than
# the exact GELU on 1 million float32 numbers?

# %%
predicted_gelu_speedup = None  # your number: time(exact) / time(tanh)

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up

_act = tinytorch.randn(32, 64, 512)  # the MLP activation of a (B=32, T=64, d=128) batch
_gelu_s = {_mode: median_time(lambda: tinytorch.nn.functional.gelu(_act, approximate=_mode), repeats=3)
           for _mode in ("none", "tanh")}
for _mode, _sec in _gelu_s.items():
    print(f"gelu(approximate={_mode!r}) on {_act.numel():,d} numbers: {_sec * 1e3:6.1f} ms")
_gap = np.abs(tinytorch.nn.functional.gelu(_act, approximate="tanh").numpy()
              - tinytorch.nn.functional.gelu(_act).numpy()).max()
print(f"largest difference between the two: {_gap:.1e}")
print(f"measured speed-up of tanh over exact: {_gelu_s['none'] / _gelu_s['tanh']:.1f}x; "
      + ("no prediction written" if predicted_gelu_speedup is None else f"you predicted {predicted_gelu_speedup}x"))

# %% [markdown]
# The ratio depends on how your numpy computes `erf` and `tanh` (vectorised libraries
# differ between machines and versions) and on the load of the machine: read the printed
# figure, not a promise.

# %% [markdown]
# ## 4. The pre-norm transformer block
#
# The block is two residual branches. The first is causal self-attention on the
# normalised stream, using module 12's `MultiheadAttention` (PyTorch's parameterisation,
# `batch_first=True`, so tensors are `(B, T, d)`). A GPT must never let position $t$ see
# positions after $t$ — at training time the model predicts token $t+1$ from tokens
# $\le t$, and if it could peek, it would learn to copy instead of to predict. Mind the two
# conventions of module 12 (both PyTorch's): `causal_mask(T)` says where attention is
# **allowed** (`scaled_dot_product_attention`'s boolean masks), while `MultiheadAttention`'s
# `attn_mask` says where it is **forbidden** (True = "may not attend"). Write
# `_causal_attn_mask(T)`, the mask this block passes to its attention, from module 12's
# `causal_mask`; for $T = 4$ it must be
#
# ```
# _causal_attn_mask(4)    query t may attend to keys ≤ t
# [[F T T T]
#  [F F T T]
#  [F F F T]
#  [F F F F]]
# ```
#
# Then write `TransformerBlock.forward`, the dashed box of section 1's picture, for
# self-attention (the normalised stream is the query, the key and the value). The block
# owns one `Dropout` for the attention branch's output (`self.dropout`); the feed-forward
# branch drops inside `ff`. `MultiheadAttention` returns a pair `(output, weights)`; pass
# `need_weights=False` (the weights are not needed, and not computing their average saves
# time).
#
# <details><summary>Hint 1</summary>
#
# The mask: `causal_mask(T)` is True where attention is allowed. Which boolean operation
# turns "allowed" into "forbidden"? (Tensors have PyTorch's `~`, `&` and `|` for bool masks.)
# </details>
#
# <details><summary>Hint 2</summary>
#
# The block: in a pre-norm block the LayerNorm is applied to what a branch **reads**, never
# to the stream itself. What gets added to the stream is the branch's output, and the stream
# is never replaced.
# </details>
#
# <details><summary>The approach</summary>
#
# For the mask, ask what each convention marks: module 12's helper marks the allowed
# cells, this layer's `attn_mask` the forbidden ones; the triangle is the same, its
# meaning flipped. For the block, keep the stream apart from the normalised copy a branch
# reads: the stream only grows by addition. The second branch must read the stream after
# the first addition, or it misses what attention just wrote. Dropout acts on the
# attention output before it joins the stream.
# </details>

# %% nbgrader={"grade": false, "grade_id": "transformer-block", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _causal_attn_mask(T):
    """Contract: T >= 1. Returns a (T, T) bool Tensor for MultiheadAttention's attn_mask: True
    (forbidden) exactly where key j > query i, strictly above the diagonal."""
    # Idea: the same triangle as module 12's causal_mask, in the layer's other convention.
    ### BEGIN SOLUTION
    return ~causal_mask(T)
    ### END SOLUTION


class TransformerBlock(Module):
    """Pre-norm GPT block: x + attn(ln1(x)) with a causal mask, then x + ff(ln2(x))."""

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0):
        super().__init__()
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)
        self.dropout = Dropout(dropout)  # on the attention branch's output
        self.ln2 = LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)

    def forward(self, x, kv_cache=None, layer_idx=0):
        """Contract: x (B, T, d_model) -> (B, T, d_model); position t depends only on x[:, :t+1].
        With `kv_cache` (module 18), x holds only the new tokens and attention also reads the
        tokens cached for layer `layer_idx`."""
        if kv_cache is not None:
            return _kv_cache_module("TransformerBlock.forward").cached_block(self, x, kv_cache, layer_idx)
        mask = _causal_attn_mask(x.shape[-2])
        # Idea: two residual branches, each reading a normalised copy of the stream.
        ### BEGIN SOLUTION
        h = self.ln1(x)
        attended, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + self.dropout(attended)
        return x + self.ff(self.ln2(x))
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-transformer-block", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert_equal(_causal_attn_mask(4).numpy(), np.triu(np.ones((4, 4), dtype=bool), 1),
             "_causal_attn_mask(4): True (forbidden) strictly above the diagonal")
with preserved_state():
    tinytorch.manual_seed(0)
    _blk = TransformerBlock(8, 2, 16)
    _xb = tinytorch.randn(2, 5, 8)
with tinytorch.no_grad():                                 # two LayerNorms that differ, so that swapping them shows
    _blk.ln2.weight.copy_(Tensor(np.linspace(0.5, 2.0, 8, dtype=np.float32)))
    _blk.ln2.bias.copy_(Tensor(np.linspace(-1.0, 1.0, 8, dtype=np.float32)))
_yb = _blk(_xb)
assert_equal(_yb.shape, (2, 5, 8), "block output shape")


class _Recorder(Module):
    """Runs the layer it wraps and keeps the arguments of each call: what the block fed it."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, []

    def forward(self, *args, **kwargs):
        self.calls.append(([a.numpy().copy() if isinstance(a, Tensor) else a for a in args], kwargs))
        return self.inner(*args, **kwargs)


_parts = {name: getattr(_blk, name) for name in ("ln1", "attn", "dropout", "ln2", "ff")}
for _name, _part in _parts.items():
    setattr(_blk, _name, _Recorder(_part))
try:
    _yr = _blk(_xb).numpy()
    _seen = {name: getattr(_blk, name).calls for name in _parts}
finally:
    for _name, _part in _parts.items():
        setattr(_blk, _name, _part)
check([len(c) for c in _seen.values()] == [1] * 5, "one call of each part per forward: ln1, attn, dropout, ln2, ff",
      got={n: len(c) for n, c in _seen.items()})
_x0 = _xb.numpy()
assert_close(_seen["ln1"][0][0][0], _x0, rtol=0, atol=0, what="ln1 reads the stream as the block received it")
_q, _k, _v = _seen["attn"][0][0][:3]
_n1 = _parts["ln1"](_xb).numpy()
for _role, _arr in (("query", _q), ("key", _k), ("value", _v)):
    assert_close(_arr, _n1, rtol=1e-6, atol=1e-7, what=f"the attention's {_role}: the normalised stream (self-attention)")
_kw = _seen["attn"][0][1]
assert_equal(np.asarray(_kw.get("attn_mask").numpy() if isinstance(_kw.get("attn_mask"), Tensor)
                        else _kw.get("attn_mask")), _causal_attn_mask(5).numpy(),
             "the attention's attn_mask (a keyword): the causal mask, in MultiheadAttention's convention")
check(_kw.get("need_weights") is False, "need_weights=False passed to the attention", got=_kw.get("need_weights"))
_att_out = _parts["attn"](Tensor(_n1), Tensor(_n1), Tensor(_n1), attn_mask=_causal_attn_mask(5),
                          need_weights=False)[0].numpy()
assert_close(_seen["dropout"][0][0][0], _att_out, rtol=1e-5, atol=1e-6,
             what="what the block's dropout receives: the attention branch's output, before the residual addition")
_s1 = _x0 + _att_out                                       # the stream after the first branch
assert_close(_seen["ln2"][0][0][0], _s1, rtol=1e-5, atol=1e-6,
             what="ln2 reads the stream after the attention branch was added to it (not the normalised copy, "
                  "not the input)")
_n2 = _parts["ln2"](Tensor(_s1)).numpy()
assert_close(_seen["ff"][0][0][0], _n2, rtol=1e-5, atol=1e-6, what="the feed-forward branch reads ln2's output")
assert_close(_yr, _s1 + _parts["ff"](Tensor(_n2)).numpy(), rtol=1e-5, atol=1e-6,
             what="the block's output: the stream after the first branch, plus the feed-forward branch's output")
# causality: changing the input at position 3 leaves positions 0..2 unchanged
_xb2 = Tensor(_xb.numpy().copy())
_xb2.numpy()[:, 3] += 1.0
_yb2 = _blk(_xb2)
assert_close(_yb2.numpy()[:, :3], _yb.numpy()[:, :3], atol=1e-6, what="outputs 0..2 after changing input 3")
check(np.abs(_yb2.numpy()[:, 3:] - _yb.numpy()[:, 3:]).max() > 1e-3, "outputs 3..4 do see input 3")
# the residual branches: with both branches' output projections zeroed, the block is the identity
with tinytorch.no_grad():
    for _p in (_blk.attn.out_proj.weight, _blk.attn.out_proj.bias, _blk.ff.fc2.weight, _blk.ff.fc2.bias):
        _p.zero_()
assert_close(_blk(_xb).numpy(), _xb.numpy(), atol=1e-7, what="silenced branches: the block is the identity")
_blk64 = TransformerBlock(4, 2, 8).double()
_xg = Tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
check(gradcheck(lambda x: _blk64(x), [_xg]), "gradcheck of the block")
print("✓ TransformerBlock: definition, causality, residuals, gradcheck; y[0, 0, :3] =", _yb.numpy()[0, 0, :3].round(3))

# %% [markdown]
# ### The residual stream, measured
#
# Section 1 claimed that the identity path carries the gradient through any depth. Test it:
# stack $L$ fresh blocks, send a random gradient into the top, and measure how much of it
# reaches the bottom, $\lVert \partial L / \partial x_\text{in} \rVert /
# \lVert \partial L / \partial x_\text{out} \rVert$. Then do the same with the two
# additions removed (each block *replaces* the stream by its branch's output).
# **Predict first:** for 48 blocks, roughly what ratio do you expect in each case?

# %%
predicted_ratio_with_residuals = None     # your number, 48 pre-norm blocks
predicted_ratio_without_residuals = None  # your number, 48 blocks without the additions


def gradient_reaching_the_input(n_blocks, residual, d=32, T=16):
    """|dL/dx_in| / |dL/dx_out| through n_blocks fresh blocks, for a random upstream gradient."""
    with preserved_state():
        tinytorch.manual_seed(0)
        blocks = [TransformerBlock(d, 4, 4 * d) for _ in range(n_blocks)]
        x_in = tinytorch.randn(4, T, d, requires_grad=True)
        upstream = tinytorch.randn(4, T, d)
    x, mask = x_in, _causal_attn_mask(T)
    for block in blocks:
        if residual:
            x = block(x)
        else:                                             # the same branches, without the additions
            h = block.ln1(x)
            x = block.ff(block.ln2(block.attn(h, h, h, attn_mask=mask, need_weights=False)[0]))
    (x * upstream).sum().backward()
    return float(np.linalg.norm(x_in.grad.numpy()) / np.linalg.norm(upstream.numpy()))


_depths = [1, 4, 16, 48]
_with = [gradient_reaching_the_input(_n, True) for _n in _depths]
_without = [gradient_reaching_the_input(_n, False) for _n in _depths]
for _n, _a, _b in zip(_depths, _with, _without):
    print(f"{_n:2d} blocks: the gradient reaching the input is {_a:6.3f} x the output's with the residual "
          f"stream, {_b:7.4f} x without it")
for _label, _pred, _meas in [("48 blocks, with residuals", predicted_ratio_with_residuals, _with[-1]),
                             ("48 blocks, without", predicted_ratio_without_residuals, _without[-1])]:
    print(f"{_label}: measured {_meas:.3g}; " + ("no prediction written" if _pred is None else f"you predicted {_pred}"))
fig, ax = plt.subplots(figsize=(5.5, 3.3))
ax.semilogy(_depths, _with, "o-", label="pre-norm blocks (x + branch)")
ax.semilogy(_depths, _without, "s-", label="the branches alone (no additions)")
ax.set_xlabel("number of blocks L")
ax.set_ylabel("|grad at input| / |grad at output|")
ax.set_title("how much gradient reaches the bottom of the stack")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# With the additions, the gradient at the bottom does not shrink with depth: it grows
# (read the printed ratio at 48 blocks), because every branch adds its own path beside the
# identity, a growth the 1/√(2L) initialisation of section 5 is there to keep in check. Without
# them the gradient is a product of $L$ Jacobians: it loses a factor of about 10 in the first
# few blocks and keeps falling with depth, though not at a steady rate (the LayerNorm at the
# start of each branch rescales what it reads, so some blocks barely shrink it), and the
# lowest blocks of a deep stack would barely learn. The figures come from one seeded
# initialisation, so they are the same on every machine.

# %% [markdown]
# ## 5. GPT
#
# The model's hyper-parameters travel together in a `GPTConfig` (provided):
#
# | field | meaning |
# |---|---|
# | `vocab_size` $V$ | number of token ids |
# | `block_size` $T_{max}$ | longest context: the size of the position table |
# | `d_model` $d$, `n_heads`, `n_layers` $L$, `d_ff` | widths and depth (`d_ff` defaults to $4d$) |
# | `dropout` | dropout probability in the blocks and on the embeddings |
# | `tie_weights` | share the token-embedding matrix with the output head |
#
# `GPT.__init__` (provided) builds the parts of the picture in section 1: `tok_emb`
# (`Embedding(V, d)`), `pos_emb` (`Embedding(block_size, d)`), `drop`, `blocks` (a
# `ModuleList` of $L$ `TransformerBlock`s), `ln_f` and `head` (`Linear(d, V, bias=False)`).
#
# **Weight tying.** The token embedding maps id → vector; the head maps vector → a score
# per id. Using the *same* $V\times d$ matrix for both (`head.weight = tok_emb.weight`, one
# `Parameter` registered twice) saves $Vd$ parameters and often trains better on small
# data. Module 03's `parameters()` lists a shared parameter once, so the optimizer updates
# it once; autograd adds up the gradients it receives from both uses.
#
# ### Initialisation
#
# Like GPT-2 and nanoGPT, every matrix starts as $N(0, 0.02^2)$ and every bias at zero,
# except the two matrices that write **into the residual stream** in each block
# (attention's `out_proj` and the MLP's `fc2`), whose standard deviation is divided by
# $\sqrt{2L}$: the stream is a sum of $2L$ branch outputs, and this keeps its variance at
# initialisation independent of the depth. LayerNorm gains stay at 1 (their constructor's
# value). Small weights also make the initial logits nearly zero, so the initial prediction
# is nearly uniform: the loss at step 0 should be about $\ln V$, a cheap sanity check of any
# language model. Write `GPT._init_weights`.
#
# <details><summary>Hint 1</summary>
#
# Walk over the named parameters: the name says where a parameter lives (which block, which
# layer), its number of dimensions says whether it is a matrix, a vector or a bias.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Three kinds of parameters get three treatments, and one kind (the LayerNorm weights, 1-D
# but not biases) is left alone. Which two names end the residual projections?
# </details>
#
# <details><summary>The approach</summary>
#
# Order your tests from the most specific to the least. The residual projections are
# matrices too, so a test on the number of dimensions alone would catch them first and
# give them the wrong std. Decide by parameter name, not by module type: attention's input
# projection is a bare Parameter, not a Linear's weight. And 1-D does not mean bias: the
# LayerNorm gains are 1-D and must stay at 1. The smaller std depends on the depth $L$.
# </details>
#
# ### The forward pass and the causal language-modelling loss
#
# `forward(idx, targets=None)` takes int64 ids `(B, T)` with $T \le$ `block_size` and
# returns `(logits, loss)`: the logits `(B, T, V)` of the picture of section 1, and, when
# `targets` are given (ids `(B, T)`: the input shifted by one, as `get_batch` of module 10
# makes them), the mean cross-entropy over **all** $B\cdot T$ positions, ignoring targets
# equal to $-100$; otherwise `loss` is `None` (nanoGPT's convention).
#
# Thanks to the causal mask, one forward pass trains $T$ predictions at once: position $t$
# predicts token $t+1$ from tokens $1..t$. That is why decoder-only models train so
# efficiently — every token of the batch is a training example.
#
# <details><summary>Hint 1</summary>
#
# Attention alone does not know the order of its inputs. What must be added to each token's
# vector so that the model knows *where* it is? Which ids index the position table?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Follow the picture bottom-up; nothing is skipped, not even the last LayerNorm (pre-norm
# leaves the stream unnormalised). Module 04's `cross_entropy` wants logits `(N, C)` and
# targets `(N,)`: the batch and time dimensions must be flattened together.
# </details>
#
# <details><summary>The approach</summary>
#
# Three questions. Where does order come from? Attention ignores it, so each token needs
# the row of its position, 0 to $T-1$, the same in every sequence. What does pre-norm
# leave undone? The last block hands over an unnormalised stream. What does the loss want?
# Each position is one example, so batch and time become one axis, and a target of $-100$
# must not count. Every part of the picture runs, the embedding dropout too.
# </details>
#
# Also write `num_parameters(non_embedding=False)`: the number of trainable numbers (each
# shared parameter once). With `non_embedding=True`, leave out the position table and, if
# the weights are **not** tied, the token table (pure lookups that cost no FLOPs; a tied
# table is also the head's matrix, so it stays). This is the $N$ of the scaling-law
# formulas.
#
# <details><summary>Hint</summary>
#
# `parameters()` already yields a shared parameter once. How do you tell whether the head
# and the token table are the same object?
# </details>

# %%
#| export
@dataclass
class GPTConfig:
    """The hyper-parameters of a GPT."""
    vocab_size: int
    block_size: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = None  # None: 4 * d_model
    dropout: float = 0.0
    tie_weights: bool = True

    def __post_init__(self):
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"GPTConfig: d_model ({self.d_model}) must be divisible by n_heads "
                             f"({self.n_heads}): each head gets d_model // n_heads features")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig.dropout must be in [0, 1), got {self.dropout}")


# %% nbgrader={"grade": false, "grade_id": "gpt", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class GPT(Module):
    """A decoder-only transformer language model (GPT-2 style, pre-norm)."""

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT expects a GPTConfig, got {type(config).__name__}")
        self.config = config
        c = config
        self.tok_emb = Embedding(c.vocab_size, c.d_model)
        self.pos_emb = Embedding(c.block_size, c.d_model)
        self.drop = Dropout(c.dropout)
        self.blocks = ModuleList([TransformerBlock(c.d_model, c.n_heads, c.d_ff, c.dropout)
                                  for _ in range(c.n_layers)])
        self.ln_f = LayerNorm(c.d_model)
        self.head = Linear(c.d_model, c.vocab_size, bias=False)
        self._init_weights()
        if c.tie_weights:
            self.head.weight = self.tok_emb.weight  # one Parameter, used twice

    def _init_weights(self):
        """Contract: in place, N(0, 0.02²) for every parameter of 2+ dims, N(0, (0.02/sqrt(2L))²)
        for the residual projections (names ending attn.out_proj.weight, ff.fc2.weight), zeros
        for biases; LayerNorm weights untouched (1)."""
        # Idea: small weights everywhere, smaller where a branch writes into the stream.
        ### BEGIN SOLUTION
        resid_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, p in self.named_parameters():
            if name.endswith("attn.out_proj.weight") or name.endswith("ff.fc2.weight"):
                normal_(p, 0.0, resid_std)
            elif p.ndim >= 2:
                normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                zeros_(p)
        ### END SOLUTION

    def forward(self, idx, targets=None, kv_cache=None):
        """Contract: idx int64 (B, T), T <= block_size; targets None or int64 (B, T) (-100 =
        ignore). Returns (logits (B, T, V), loss: scalar mean cross-entropy or None). Errors
        (checked for you): ValueError for a wrong idx, a T over block_size, mismatched targets.
        With `kv_cache` (module 18), idx holds the tokens after the cached ones (no targets)."""
        if not isinstance(idx, Tensor) or idx.ndim != 2 or idx.dtype.kind not in "iu":
            raise ValueError(f"GPT.forward: idx must be an int64 Tensor of shape (B, T), got "
                             f"{(idx.dtype, idx.shape) if isinstance(idx, Tensor) else type(idx).__name__}")
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"GPT.forward: sequence of length {T} is longer than block_size "
                             f"{self.config.block_size} (crop the context, as generate does)")
        if targets is not None and tuple(targets.shape) != (B, T):
            raise ValueError(f"GPT.forward: targets must have idx's shape {(B, T)}, got {tuple(targets.shape)}")
        if kv_cache is not None:
            if targets is not None:
                raise ValueError("GPT.forward: a kv_cache is for inference; pass no targets with it")
            return _kv_cache_module("GPT.forward").cached_gpt_forward(self, idx, kv_cache), None
        # Idea: what a token is plus where it is, through the stack, to one score per token id.
        ### BEGIN SOLUTION
        x = self.tok_emb(idx) + self.pos_emb(arange(T))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            V = logits.shape[-1]
            loss = cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=-100)
        return logits, loss
        ### END SOLUTION

    def num_parameters(self, non_embedding=False):
        """Contract: the number of trainable numbers, each shared Parameter once; with
        non_embedding, without the position table and (when untied) the token table."""
        # Idea: count what the optimizer updates; lookups that are not also the head don't count.
        ### BEGIN SOLUTION
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.pos_emb.weight.numel()
            if self.head.weight is not self.tok_emb.weight:
                n -= self.tok_emb.weight.numel()
        return n
        ### END SOLUTION

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
        """Continue `idx` (int64 (B, T) or (T,)) by max_new_tokens sampled tokens; see section 6.
        use_cache=True: prefill a KV cache with the prompt, then one token per step (module 18)."""
        return _gpt_generate(self, idx, max_new_tokens, temperature, top_k, generator, use_cache)


# %% nbgrader={"grade": true, "grade_id": "test-gpt-init", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(9)
    _big = GPT(GPTConfig(vocab_size=13, block_size=16, d_model=64, n_heads=2, n_layers=4))
assert_close(_big.blocks[0].ff.fc1.weight.numpy().std(), 0.02, atol=0.002, what="std of an ordinary matrix (fc1)")
assert_close(_big.tok_emb.weight.numpy().std(), 0.02, atol=0.002, what="std of the token table")
assert_close(_big.blocks[1].ff.fc2.weight.numpy().std(), 0.02 / math.sqrt(8), atol=0.001,
             what="std of a residual projection (fc2) with L = 4: 0.02 / sqrt(2L)")
assert_close(_big.blocks[2].attn.out_proj.weight.numpy().std(), 0.02 / math.sqrt(8), atol=0.001,
             what="std of attention's out_proj with L = 4: 0.02 / sqrt(2L)")
assert_close(_big.blocks[3].attn.in_proj_weight.numpy().std(), 0.02, atol=0.002,
             what="std of attention's in_proj_weight (a matrix that is not a Linear's): 0.02")
assert_equal(_big.blocks[0].ff.fc1.bias.numpy(), np.zeros(256), "biases start at 0")
assert_equal(_big.ln_f.weight.numpy(), np.ones(64), "LayerNorm gains stay at 1")
print("✓ GPT initialisation; fc2 std", _big.blocks[1].ff.fc2.weight.numpy().std().round(5))

# %% nbgrader={"grade": true, "grade_id": "test-gpt", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _cfg = GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2)
    _gpt = GPT(_cfg)
    _idx = tinytorch.randint(0, 11, (3, 8))
check(_gpt.head.weight is _gpt.tok_emb.weight, "tie_weights=True: the head's weight IS the token table")
_logits, _loss = _gpt(_idx)
assert_equal(_logits.shape, (3, 8, 11), "logits shape (B, T, V)")
check(_loss is None, "no targets: loss is None", got=_loss)
_gparts = {name: getattr(_gpt, name) for name in ("tok_emb", "pos_emb", "drop", "ln_f")}
_gblocks = list(_gpt.blocks)
for _name, _part in _gparts.items():                      # record what each part reads (section 4's _Recorder)
    setattr(_gpt, _name, _Recorder(_part))
for _i, _block in enumerate(_gblocks):
    _gpt.blocks[_i] = _Recorder(_block)
try:
    _lr = _gpt(_idx)[0].numpy()
    _gseen = {name: getattr(_gpt, name).calls for name in _gparts}
    _bseen = [_gpt.blocks[_i].calls for _i in range(len(_gblocks))]
finally:
    for _name, _part in _gparts.items():
        setattr(_gpt, _name, _part)
    for _i, _block in enumerate(_gblocks):
        _gpt.blocks[_i] = _block
for _name in ("tok_emb", "pos_emb", "drop", "ln_f"):
    check(len(_gseen[_name]) > 0, f"GPT.forward calls its `{_name}`", got=f"{_name} was never called")
assert_equal(_gseen["tok_emb"][0][0][0], _idx.numpy(), "the token table reads the ids")
assert_equal(np.asarray(_gseen["pos_emb"][0][0][0]), np.arange(8), "the position table reads the positions 0..T-1")
_e = _gparts["tok_emb"](_idx).numpy() + _gparts["pos_emb"](tinytorch.arange(8)).numpy()
assert_close(_gseen["drop"][0][0][0], _e, rtol=1e-6, atol=1e-7,
             what="what GPT's `drop` receives: the token plus the position embeddings")
_stream = _gseen["drop"][0][0][0]                          # drop is the identity at p = 0
for _i, _calls in enumerate(_bseen):
    check(len(_calls) == 1, f"block {_i} runs once", got=len(_calls))
    assert_close(_calls[0][0][0], _stream, rtol=1e-5, atol=1e-6,
                 what=f"block {_i} reads " + ("the dropped embeddings" if _i == 0 else f"block {_i - 1}'s output"))
    _stream = _gblocks[_i](Tensor(_stream)).numpy()
assert_close(_gseen["ln_f"][0][0][0], _stream, rtol=1e-5, atol=1e-6, what="ln_f reads the last block's output")
assert_close(_lr, _gparts["ln_f"](Tensor(_stream)).numpy() @ _gpt.tok_emb.weight.numpy().T, rtol=1e-5, atol=1e-6,
             what="the logits: the head (the token table, tied) applied to ln_f's output")
check(len(_gseen["drop"]) == 1, "GPT.forward calls its dropout `drop` once", got=len(_gseen["drop"]))
_gpt.pos_emb = _Recorder(_gparts["pos_emb"])
try:
    _gpt(_idx[:, :5])
    _short = _gpt.pos_emb.calls
finally:
    _gpt.pos_emb = _gparts["pos_emb"]
assert_equal(np.asarray(_short[0][0][0]), np.arange(5), "5 tokens (fewer than block_size = 8): positions 0..4")
_logits, _loss = _gpt(_idx[:, :-1], _idx[:, 1:])
assert_equal(_loss.shape, (), "the loss is a scalar")
_lp = _logits.numpy() - _logits.numpy().max(-1, keepdims=True)
_lp = _lp - np.log(np.exp(_lp).sum(-1, keepdims=True))
_t = _idx.numpy()[:, 1:]
assert_close(_loss.item(), -np.take_along_axis(_lp, _t[..., None], -1).mean(), rtol=1e-5,
             what="loss = mean cross-entropy over all B·T positions")
assert_close(_loss.item(), math.log(11), atol=0.1, what="at initialisation the loss is about ln(V)")
_tm = _t.copy()
_tm[:, :3] = -100                                         # ignored targets
_, _loss_m = _gpt(_idx[:, :-1], Tensor(_tm))
assert_close(_loss_m.item(), -np.take_along_axis(_lp[:, 3:], _t[:, 3:, None], -1).mean(), rtol=1e-5,
             what="targets equal to -100 are ignored")
_idx2 = Tensor(_idx.numpy().copy())                       # causality: change token 4 only
_idx2.numpy()[:, 4] = (_idx2.numpy()[:, 4] + 1) % 11
assert_close(_gpt(_idx2)[0].numpy()[:, :4], _gpt(_idx)[0].numpy()[:, :4], atol=1e-6,
             what="logits before position 4 after changing token 4")
_d, _V, _T, _L, _f = 16, 11, 8, 2, 64
assert_equal(_gpt.num_parameters(), _V * _d + _T * _d + _L * (4 * _d * _d + 2 * _d * _f + 9 * _d + _f) + 2 * _d,
             "num_parameters() (tied: the token table counted once)")
assert_equal(_gpt.num_parameters(non_embedding=True), _gpt.num_parameters() - _T * _d,
             "num_parameters(non_embedding=True), tied: only the position table left out")
with preserved_state():
    _untied = GPT(GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2, tie_weights=False))
assert_equal(_untied.num_parameters(non_embedding=True), _gpt.num_parameters() - _T * _d,  # + V·d head, - V·d table
             "num_parameters(non_embedding=True), untied: both tables left out, the head counted")
print(f"✓ GPT forward, loss, causality, parameter count ({_gpt.num_parameters():,d})")

# %% [markdown]
# ## 6. Generating text: temperature and top-k
#
# Generation is a loop: run the model on the context, take the logits of the **last**
# position, turn them into a distribution, draw the next token, append it, repeat. Two
# details:
#
# - the position table has `block_size` rows, so the model can only read the last
#   `block_size` tokens: **crop** the context to its last `block_size` ids before each step
#   (module 18 will avoid re-running the whole context every step with a KV cache);
# - the distribution is $\operatorname{softmax}(z / \tau)$ with **temperature** $\tau$:
#   $\tau < 1$ sharpens it (more conservative, more repetitive text), $\tau > 1$ flattens it
#   (more surprising, more errors), and $\tau \to 0$ is **greedy** decoding, always the
#   argmax. **Top-k** first keeps only the $k$ largest logits (the others become
#   $-\infty$, probability 0): it cuts the long tail of unlikely tokens, each one rare but
#   together likely enough to derail a sample every few steps.
#
# See what they do to a toy distribution over 10 tokens:

# %%
_z = np.array([3.0, 2.5, 2.0, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5, -2.0])


def _softmax_np(z):
    e = np.exp(z - z.max())
    return e / e.sum()


fig, axes = plt.subplots(1, 4, figsize=(13, 2.6), sharey=True)
for _ax, (_title, _p) in zip(axes, [
        ("τ = 0.5 (sharper)", _softmax_np(_z / 0.5)), ("τ = 1", _softmax_np(_z)),
        ("τ = 2 (flatter)", _softmax_np(_z / 2)),
        ("τ = 1, top-k = 3", _softmax_np(np.where(_z >= np.sort(_z)[-3], _z, -np.inf)))]):
    _ax.bar(range(10), _p, color="C0")
    _ax.set_title(_title, fontsize=10)
    _ax.set_xlabel("token")
axes[0].set_ylabel("probability")
fig.tight_layout()
plt.show()

# %% [markdown]
# Write `_sample_next(logits, temperature, top_k, rng)`: `logits` is a numpy array `(B, V)`,
# `rng` a numpy `Generator`; return the next ids, an int64 array `(B,)`. Sampling must be
# reproducible: use exactly one `rng.random((B, 1))` call per step (uniform numbers in
# $[0, 1)$, one per row), so that a seed reproduces a sample; a token of probability 0 must
# never be drawn.
#
# <details><summary>Hint 1</summary>
#
# Temperature 0 is a limit, not a division: what does $\operatorname{softmax}(z/\tau)$
# become as $\tau \to 0$? For $\tau > 0$, dividing by $\tau$ — not multiplying — is what
# makes a small $\tau$ sharpen the distribution.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Top-k: every logit **strictly below the $k$-th largest** of its row is removed ($-\infty$);
# $k$ larger than $V$ means no restriction. numpy's `partition` finds the $k$-th largest
# value without sorting the whole row.
# </details>
#
# <details><summary>Hint 3</summary>
#
# Drawing from a distribution with one uniform number (inverse transform sampling): lay the
# probabilities end to end on $[0, 1)$ (their cumulative sums $c$); the token is the interval
# where $u$ lands, i.e. the first $j$ with $c_j > u$. The probabilities need not be
# normalised if you scale $u$ by the total $c_{V-1}$ instead (rounding can leave the sum a
# hair below 1, and this keeps an index guaranteed to exist).
# </details>
#
# <details><summary>The approach</summary>
#
# Settle temperature 0 first: there is no distribution to sample from, so no division and
# no draw. Otherwise stay in logits: removing a token means $-\infty$, and subtracting a
# row's maximum changes nothing but keeps the exponentials finite. For top-k, compare with
# the $k$-th largest value rather than count: ties at the threshold stay, and $k > V$ must
# not fail. One uniform number per row is enough for inverse transform sampling on
# unnormalised cumulative sums, all rows at once; a removed token has zero width there.
# </details>
#
# Then `_generate(model, ids, max_new_tokens, temperature, top_k, rng)`: `ids` is a numpy
# int64 array `(B, T)`; append `max_new_tokens` new ids, one per step, and return the grown
# array. The provided `_gpt_generate` (behind `GPT.generate`) validates the arguments,
# switches the model to eval mode (no dropout) and back, runs `_generate` under `no_grad()`
# (nothing needs a gradient, so no graph is recorded), and wraps the result in a Tensor.
#
# <details><summary>Hint 1</summary>
#
# The model has a position table of `block_size` rows: it cannot read a longer context.
# Which tokens should it see when the sequence has grown past that?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The model returns logits for **every** position of its input; only one of them predicts
# the token that comes next.
# </details>
#
# <details><summary>The approach</summary>
#
# Each step's output is part of the next step's input, so the steps cannot be batched over
# time. Two traps. The position table has `block_size` rows: once the sequence is longer,
# the model may only see the most recent tokens, while the array you return keeps them
# all. And the model predicts at every position, but only the last one looks past the end
# of the sequence. Mind the types: the model takes a Tensor, the sampler a numpy array.
# </details>

# %% nbgrader={"grade": false, "grade_id": "generate", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _sample_next(logits, temperature, top_k, rng):
    """Contract: logits numpy (B, V); temperature >= 0 (0 = greedy); top_k None or int >= 1;
    rng a numpy Generator, called once as rng.random((B, 1)) when sampling. Returns int64
    (B,): the argmax per row when temperature is 0, else one draw per row from
    softmax(logits / temperature) restricted to the logits at least as large as the
    top_k-th largest (ties with it stay, as nanoGPT's); a token of probability 0 is never
    drawn, for any u that rng.random can return, 0 and the float just below 1 included."""
    # Idea: reshape the distribution (temperature, top-k), then one uniform draw per row.
    ### BEGIN SOLUTION
    logits = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        return np.argmax(logits, axis=-1).astype(np.int64)
    z = logits / temperature
    if top_k is not None:
        k = min(int(top_k), z.shape[-1])
        kth = np.partition(z, z.shape[-1] - k, axis=-1)[:, z.shape[-1] - k: z.shape[-1] - k + 1]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    cdf = np.cumsum(p, axis=-1)
    u = rng.random((z.shape[0], 1)) * cdf[:, -1:]
    return (cdf <= u).sum(axis=-1).astype(np.int64)
    ### END SOLUTION


def _generate(model, ids, max_new_tokens, temperature, top_k, rng):
    """Contract: ids numpy int64 (B, T). Returns int64 (B, T + max_new_tokens): ids followed
    by the new ones, each chosen from the model's prediction for the last position of (at
    most) the last block_size ids."""
    block_size = model.config.block_size
    # Idea: predict, append, repeat, never showing the model more than it can read.
    ### BEGIN SOLUTION
    for _ in range(max_new_tokens):
        context = ids[:, -block_size:]
        logits, _ = model(Tensor(context))
        next_ids = _sample_next(logits.numpy()[:, -1, :], temperature, top_k, rng)
        ids = np.concatenate([ids, next_ids[:, None]], axis=1)
    return ids
    ### END SOLUTION


def _gpt_generate(model, idx, max_new_tokens, temperature, top_k, generator, use_cache=False):
    """GPT.generate: check the arguments, run _generate (or, with use_cache, module 18's
    cached loop) in eval mode without a graph."""
    run = _kv_cache_module("generate(use_cache=True)")._generate_cached if use_cache else _generate
    if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if not isinstance(temperature, (int, float, np.floating)) or not temperature >= 0:
        raise ValueError(f"generate: temperature must be a number >= 0 (0 = greedy), got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise ValueError(f"generate: top_k must be None or an integer >= 1, got {top_k!r}")
    if not isinstance(idx, Tensor) or idx.ndim not in (1, 2) or idx.dtype.kind not in "iu" or idx.shape[-1] < 1:
        raise ValueError("generate: idx must be a non-empty int64 Tensor of shape (B, T) or (T,)")
    rng = numpy_generator(generator)
    ids = idx.numpy().astype(np.int64).reshape(-1, idx.shape[-1])
    was_training = model.training
    model.eval()  # generation is inference: no dropout
    try:
        with no_grad():
            out = run(model, ids, int(max_new_tokens), float(temperature), top_k, rng)
    finally:
        model.train(was_training)
    out = Tensor(out)
    return out if idx.ndim == 2 else out.reshape(-1)


# %% nbgrader={"grade": true, "grade_id": "test-sample-next", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_lg = np.array([[0.0, 5.0, 1.0, 4.9], [2.0, -1.0, 0.0, 1.0]])
assert_equal(_sample_next(_lg, 0.0, None, _rng), np.array([1, 0]), "temperature 0: the argmax of each row")
_draws = np.stack([_sample_next(_lg, 1.0, 2, _rng) for _ in range(400)])
assert_equal(sorted(set(_draws[:, 0].tolist())), [1, 3], "top_k=2, row 0: only tokens 1 and 3 (the 2 largest)")
assert_equal(sorted(set(_draws[:, 1].tolist())), [0, 3], "top_k=2, row 1: only tokens 0 and 3")
assert_equal(_sample_next(_lg, 1.0, 1, _rng), np.array([1, 0]), "top_k=1 is greedy")
_row = np.array([[0.5, 1.5, -1.0, 0.0, 2.0]])
for _tau in (0.5, 2.0):
    _d = np.concatenate([_sample_next(_row, _tau, None, _rng) for _ in range(3000)])
    assert_close(np.bincount(_d, minlength=5) / _d.size, _softmax_np(_row[0] / _tau), atol=0.035,
                 what=f"sample frequencies at temperature {_tau} vs softmax(logits / {_tau})")
_many = _sample_next(np.random.default_rng(2).standard_normal((6, 9)), 1.0, 100, _rng)
assert_equal(_many.dtype, np.dtype(np.int64), "the ids are int64")
assert_equal(_many.shape, (6,), "one id per row; top_k above V means no restriction")


for _u, _want in ((0.05, [0, 0]), (0.5, [2, 1]), (0.95, [3, 3])):
    _crng = CountingRng(_u)
    _pick = _sample_next(np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])), 1.0, None, _crng)
    assert_equal(_crng.calls, [(2, 1)], "the rng calls of one step: exactly one rng.random((B, 1)), all rows at once")
    assert_equal(_pick, np.array(_want), f"u = {_u} with probabilities (0.1, 0.2, 0.3, 0.4) and "
                 "(0.4, 0.3, 0.2, 0.1): the token whose interval of [0, 1) holds u (intervals in token order)")
_hot = np.array([[10.0, 9.0, 2.0]], dtype=np.float32)   # exp(10 / 0.01) overflows without care
assert_equal(_sample_next(_hot, 0.01, None, CountingRng(0.99)), np.array([0]),
             "temperature 0.01 on logits (10, 9, 2): almost surely token 0, and no overflow to NaN")
assert_equal(_sample_next(_hot[:, ::-1].copy(), 0.01, None, CountingRng(0.99)), np.array([2]),
             "temperature 0.01 on logits (2, 9, 10): almost surely token 2 (a NaN would pick token 0)")
for _u, _want in ((0.25, 0), (0.75, 1)):
    assert_equal(_sample_next(np.array([[3.0, 3.0, 1.0]]), 1.0, 1, CountingRng(_u)), np.array([_want]),
                 f"top_k=1 on logits (3, 3, 1), u = {_u}: both tied largest logits stay, each with probability 1/2")
assert_equal(_sample_next(np.array([[-5.0, 2.0, 1.0]]), 1.0, 2, CountingRng(0.0)), np.array([1]),
             "u = 0 (rng.random can return it) with token 0 cut by top_k=2: never the cut token")
assert_equal(_sample_next(np.zeros((1, 10)), 1.0, None, CountingRng(np.nextafter(1.0, 0.0))), np.array([9]),
             "u = the float just below 1 on ten equal logits: the last token (ten probabilities of 0.1 add up "
             "to just below 1 in floating point, so u may lie beyond their rounded sum)")
assert_equal(_sample_next(np.array([[0.0] * 10 + [-5.0]]), 1.0, 10, CountingRng(np.nextafter(1.0, 0.0))),
             np.array([9]), "u = the float just below 1, ten equal logits kept and an eleventh cut by top_k=10: a "
             "kept token, never the cut one (an index that runs past the kept ones must not land on a cut token)")
print("✓ _sample_next: greedy, top-k, temperature; draws of row 0:", np.bincount(_draws[:, 0], minlength=4))

# %% nbgrader={"grade": true, "grade_id": "test-generate", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _gpt = GPT(GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2))
_prompt = Tensor([[1, 2, 3]])
_out = _gpt.generate(_prompt, 12, temperature=0.0)
assert_equal(_out.shape, (1, 15), "3 prompt tokens + 12 new ones")
assert_equal(_out.dtype, tinytorch.int64, "generate returns int64 ids")
assert_equal(_out.numpy()[0, :3], np.array([1, 2, 3]), "the prompt is kept")


_rec = ContextRecorder()
_grown = _generate(_rec, np.array([[1, 2, 3], [4, 5, 6]]), 5, 0.0, None, np.random.default_rng(0))
assert_equal(_grown.shape, (2, 8), "_generate appends max_new_tokens ids to each row")
assert_equal(len(_rec.seen), 5, "one model call per new token")
for _i, _ctx in enumerate(_rec.seen):
    assert_equal(_ctx, _grown[:, max(0, 3 + _i - 4):3 + _i],
                 f"new token {_i}: the context shown to the model, the last ≤ block_size = 4 ids so far")
    assert_equal(_grown[:, 3 + _i], _ctx.sum(axis=1) % 7,
                 f"new token {_i}: the id the logits of the context's last position point at")
for _t in (3, 6, 14):                                     # greedy: each token is the argmax at that point
    _ctx = _out.numpy()[:, max(0, _t - 8):_t]              # at most block_size = 8 tokens of context
    assert_equal(_out.numpy()[0, _t], _gpt(Tensor(_ctx))[0].numpy()[0, -1].argmax(),
                 f"token {_t} = argmax of the last position's logits on the last ≤ 8 tokens")
_g1 = _gpt.generate(_prompt, 10, generator=tinytorch.data.Generator().manual_seed(5))
_g2 = _gpt.generate(_prompt, 10, generator=tinytorch.data.Generator().manual_seed(5))
assert_equal(_g2.numpy(), _g1.numpy(), "the same seed gives the same sample")
_samples = {tuple(_gpt.generate(_prompt, 10, generator=tinytorch.data.Generator().manual_seed(s)).numpy()[0])
            for s in range(6)}
check(len(_samples) > 1, "temperature 1 samples: six seeds give more than one continuation (a generate that "
      "always takes the argmax passes the greedy checks above but never samples)", got=len(_samples))
assert_raises(ValueError, _gpt.generate, _prompt, 3, temperature=-1.0, match="temperature")
print("✓ generate; greedy continuation:", _out.numpy()[0].tolist())

# %% [markdown]
# ## 7. Training a character-level GPT on the fables
#
# Now the payoff. We train on the fables corpus shipped with the course (module 05's
# `load_text`), with a **character** tokenizer from module 10: a small vocabulary (a few
# dozen symbols) keeps the embedding and head cheap, which suits a tiny model. The first
# 90% of the text is for training, the rest to measure how well the model generalises.

# %%
from tinytorch.data import Generator, load_text  # noqa: E402
from tinytorch.nn.utils import clip_grad_norm_  # noqa: E402
from tinytorch.optim import AdamW  # noqa: E402
from tinytorch.optim.lr_scheduler import LambdaLR  # noqa: E402
from tinytorch.text import CharTokenizer, encode_corpus, get_batch  # noqa: E402

text = load_text("fables")
tok = CharTokenizer.from_text(text)
data = encode_corpus(tok, text)
n_train = int(0.9 * len(data))
train_data, val_data = data[:n_train], data[n_train:]
print(f"{len(text):,d} characters, vocabulary of {tok.vocab_size}: {''.join(tok.chars)!r}")
print(f"train {len(train_data):,d} tokens, validation {len(val_data):,d} tokens")

# %% [markdown]
# The model: 4 layers of width 64 with 4 heads and a context of 64 characters, about
# 0.2 million parameters (width 128, 0.8 million, learns more but costs 3-4 times as much
# per step). The recipe is the standard one for transformers:
#
# - **AdamW** (module 07) with weight decay 0.1 on the matrices only: biases and LayerNorm
#   parameters are not decayed — shrinking a LayerNorm's gain towards 0 is not
#   regularisation, it is damage. Two parameter groups do that. (nanoGPT decays every
#   parameter of 2+ dimensions, the position table included; here the position table is
#   left undecayed as well: a choice, not a rule, and an easy experiment);
# - a **learning-rate schedule**: a linear **warm-up** (Adam's second-moment estimates are
#   noisy during the first steps, and large early updates can push a transformer into a bad
#   region), then a **cosine** decay to a tenth of the peak (one `LambdaLR`);
# - **gradient clipping** to a global norm of 1 (module 08): one unlucky batch cannot blow
#   up the weights.
#
# **`MAX_STEPS` below sets the training time.** It is kept small (200 steps: a few minutes on
# a laptop, longer on a busy machine; the cell prints its time and tokens per second, so you
# can scale). For nicer samples, raise it to 1,000-2,000 steps (and `d_model` to 128 if
# you can wait): five to ten times as long buys a clearly lower validation loss and
# text whose words are mostly spelled right. Watch the validation loss: this corpus is
# small, and a big model trained long enough will start to memorise it (then a little
# `dropout`, 0.1-0.2, helps).

# %%
MAX_STEPS = 200  # ← the training length: raise to 1000-2000 for nicer samples (5-10x the time)
BATCH_SIZE = 32
WARMUP_STEPS = 20
PEAK_LR = 3e-3

config = GPTConfig(vocab_size=tok.vocab_size, block_size=64, d_model=64, n_heads=4, n_layers=4,
                   dropout=0.0, tie_weights=True)
tinytorch.manual_seed(1337)
model = GPT(config)
print(model.blocks[0])
print(f"{model.num_parameters():,d} parameters ({model.num_parameters(non_embedding=True):,d} "
      f"without the position table)")

_decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and not n.startswith("pos_emb")]
_no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 or n.startswith("pos_emb")]
optimizer = AdamW([{"params": _decay, "weight_decay": 0.1}, {"params": _no_decay, "weight_decay": 0.0}],
                  lr=PEAK_LR, betas=(0.9, 0.99))


def lr_factor(step):
    """Linear warm-up to 1, then cosine decay to 0.1 at MAX_STEPS."""
    if step < WARMUP_STEPS:
        return (step + 1) / WARMUP_STEPS
    progress = min(1.0, (step - WARMUP_STEPS) / max(1, MAX_STEPS - WARMUP_STEPS))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


scheduler = LambdaLR(optimizer, lr_factor)
batch_gen = Generator().manual_seed(0)


def estimate_loss(split_data, batches=4, seed=123):
    """Mean loss over a few fixed random batches, in eval mode and without a graph."""
    g = Generator().manual_seed(seed)
    model.eval()
    with tinytorch.no_grad():
        losses = [model(*get_batch(split_data, config.block_size, BATCH_SIZE, g))[1].item()
                  for _ in range(batches)]
    model.train()
    return float(np.mean(losses))


def sample(prompt, n=200, temperature=0.8, top_k=10, seed=0):
    ids = Tensor([tok.encode(prompt)])
    out = model.generate(ids, n, temperature=temperature, top_k=top_k,
                         generator=Generator().manual_seed(seed))
    return tok.decode(out.numpy()[0])


print(f"step 0: train loss {estimate_loss(train_data):.3f} (ln V = {math.log(tok.vocab_size):.3f})")
print("sample before training:\n" + sample("The Fox and the ", 120))

# %% [markdown]
# The loss at step 0 is about $\ln V$, as promised, and the untrained model writes
# uniformly random characters. The training loop is the one of module 08, written out:

# %%
losses, lrs = [], []
t_start = time.perf_counter()
model.train()
for step in range(MAX_STEPS):
    xb, yb = get_batch(train_data, config.block_size, BATCH_SIZE, batch_gen)
    _, loss = model(xb, yb)
    optimizer.zero_grad()
    loss.backward()
    clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lrs.append(optimizer.param_groups[0]["lr"])
    scheduler.step()
    losses.append(loss.item())
    if step % 25 == 0 or step == MAX_STEPS - 1:
        print(f"step {step:4d}  loss {loss.item():.3f}  lr {lrs[-1]:.2e}  "
              f"{time.perf_counter() - t_start:6.1f} s")
train_seconds = time.perf_counter() - t_start
tokens_per_second = MAX_STEPS * BATCH_SIZE * config.block_size / train_seconds
final_train, final_val = estimate_loss(train_data), estimate_loss(val_data)
print(f"\n{MAX_STEPS} steps in {train_seconds:.1f} s: {tokens_per_second:,.0f} tokens/s (training)")
print(f"final loss: train {final_train:.3f}, validation {final_val:.3f}")

# %% [markdown]
# Is that good? Two baselines need no training loop at all: count on the training text,
# score on the validation text. A **unigram** model predicts each character from its
# frequency alone; a **bigram** model from the frequency of each character after the
# previous one (one is added to every count, so that no pair unseen in training gets
# probability 0). A model that uses more than the previous character must beat the second.
# **Predict first:** after `MAX_STEPS` = 200 steps, is the GPT's validation loss below the
# bigram model's?

# %%
predicted_beats_bigram = None  # your answer: True or False


def count_baseline_loss(order):
    """Validation cross-entropy (nats per character) of a count-based model of `order` 1 or 2."""
    V, tr, va = tok.vocab_size, train_data.numpy(), val_data.numpy()
    if order == 1:
        p = np.bincount(tr, minlength=V) + 1.0
        return float(-np.log(p[va] / p.sum()).mean())
    pairs = np.ones((V, V))
    np.add.at(pairs, (tr[:-1], tr[1:]), 1.0)
    return float(-np.log(pairs[va[:-1], va[1:]] / pairs[va[:-1]].sum(axis=1)).mean())


unigram_loss, bigram_loss = count_baseline_loss(1), count_baseline_loss(2)
print(f"validation loss: uniform {math.log(tok.vocab_size):.3f}, unigram {unigram_loss:.3f}, "
      f"bigram {bigram_loss:.3f}, the GPT after {MAX_STEPS} steps {final_val:.3f}")
print(f"the GPT beats the bigram model: {final_val < bigram_loss}; "
      + ("no prediction written" if predicted_beats_bigram is None else f"you predicted {predicted_beats_bigram}"))

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.3))
ax1.plot(losses, lw=0.8, alpha=0.5, label="batch loss")
_k = 10
if len(losses) >= _k:
    ax1.plot(range(_k - 1, len(losses)), np.convolve(losses, np.ones(_k) / _k, mode="valid"),
             label=f"moving mean ({_k})")
ax1.axhline(math.log(tok.vocab_size), color="gray", ls=":", label="ln V (uniform guess)")
ax1.axhline(bigram_loss, color="C2", ls="-.", lw=1, label="bigram counts (validation)")
ax1.axhline(final_val, color="C3", ls="--", lw=1, label="final validation")
ax1.set_xlabel("step")
ax1.set_ylabel("cross-entropy (nats / char)")
ax1.set_title("training loss of the char-level GPT")
ax1.legend(fontsize=8)
ax2.plot(lrs)
ax2.set_xlabel("step")
ax2.set_ylabel("learning rate")
ax2.set_title("warm-up + cosine schedule")
fig.tight_layout()
plt.show()

# %% [markdown]
# And the model's own fables, with temperature 0.8 and top-k 10 (every run with the same
# seeds writes the same text):

# %%
print(sample("The Fox and the ", 300))
print("\n--- greedy (temperature 0) ---")
print(tok.decode(model.generate(Tensor([tok.encode("The Lion ")]), 150, temperature=0.0).numpy()[0]))

# %% [markdown]
# With `MAX_STEPS = 200` expect a model that has learned the shape of the text — word
# lengths, spaces, capitals after full stops, frequent short words — not yet its spelling
# (the printed losses say how far your run got; the samples are reproducible, the times are
# not). Greedy
# decoding quickly falls into a loop: always taking the single most likely character
# repeats the most common patterns. Sampling with a moderate temperature is what makes
# language models read naturally.
#
# ## 8. A systems look
#
# ### Where the parameters are
#
# Per block: attention has $Q, K, V$ and output projections, $4d^2$ weights ($+4d$
# biases); the feed-forward network $2\,d\,d_{ff} = 8d^2$ ($+d_{ff}+d$); two LayerNorms
# $4d$. So
#
# $$N = \underbrace{L\,(12d^2 + 13d)}_{\text{blocks}} + \underbrace{Vd}_{\text{token table (= head)}}
#     + \underbrace{T_{max}\,d}_{\text{positions}} + \underbrace{2d}_{\text{ln\_f}}
#     \;\big(+\,Vd \text{ untied}\big) \;\approx\; 12 L d^2 .$$
#
# **Predict first.** The model trained above has $L = 4$, $d = 64$, a vocabulary of a few
# dozen characters and a context of 64. How many parameters does it have, and what share of
# them sits in the blocks?

# %%
predicted_parameters = None    # your number: model.num_parameters()
predicted_blocks_share = None  # your number, in percent: the blocks' share of the parameters

# %%
d, L, V, Tm, dff = config.d_model, config.n_layers, config.vocab_size, config.block_size, config.d_ff
formula = L * (4 * d * d + 2 * d * dff + 9 * d + dff) + V * d + Tm * d + 2 * d
print(f"formula: {formula:,d}   counted: {model.num_parameters():,d}   12·L·d² = {12 * L * d * d:,d}")
_groups = {}
for _name, _p in model.named_parameters():
    _key = _name.split(".")[0] if not _name.startswith("blocks") else "blocks.*." + _name.split(".")[2]
    _groups[_key] = _groups.get(_key, 0) + _p.numel()
for _key, _n in _groups.items():
    print(f"  {_key:14s} {_n:9,d}  {100 * _n / model.num_parameters():5.1f} %")
_share = 100 * sum(_n for _k, _n in _groups.items() if _k.startswith("blocks")) / model.num_parameters()
print(f"parameters: counted {model.num_parameters():,d}; "
      + ("no prediction written" if predicted_parameters is None else f"you predicted {predicted_parameters:,}"))
print(f"blocks' share: {_share:.1f} %; "
      + ("no prediction written" if predicted_blocks_share is None else f"you predicted {predicted_blocks_share} %"))

# %% [markdown]
# In this tiny model the embeddings are a small share; in GPT-2 small ($V = 50257$,
# $d = 768$) the token table alone is 38 M of its 124 M parameters, which is one reason
# subword vocabularies are a trade-off (module 10).
#
# ### FLOPs per token and the measured speed
#
# A matrix of $N$ weights costs $2N$ FLOPs per token in the forward pass (a multiply and an
# add per weight) and about twice that in the backward (gradients for the input *and* for
# the weight): **training costs $\approx 6N$ FLOPs per token**. Attention adds work that
# does not show up in $N$: the scores $QK^\top$ and the weighted sum cost $2\cdot 2\,T d$ per
# token and layer forward, $12\,L\,T\,d$ for training. Compare with the measured
# throughput of the loop above.
#
# **Predict first.** The $6N$ rule says a backward pass costs about twice the forward. On
# our framework, what ratio backward/forward do you expect to measure for one training
# batch, and why might it differ from 2?

# %%
predicted_backward_forward = None  # your number: time(backward) / time(forward)

# %%
N = model.num_parameters(non_embedding=True)
flops_per_token = 6 * N + 12 * L * Tm * d
print(f"N (non-embedding) = {N:,d}")
print(f"training FLOPs per token ≈ 6N + 12·L·T·d = {6 * N:,d} + {12 * L * Tm * d:,d} = {flops_per_token / 1e6:.2f} MFLOP")
print(f"measured: {tokens_per_second:,.0f} tokens/s → {tokens_per_second * flops_per_token / 1e9:.2f} GFLOP/s achieved")

_times = {"forward": [], "backward": []}
_xb, _yb = get_batch(train_data, config.block_size, BATCH_SIZE, Generator().manual_seed(1))
for _ in range(3):
    _t0 = time.perf_counter()
    _, _l = model(_xb, _yb)
    _t1 = time.perf_counter()
    _l.backward()
    _t2 = time.perf_counter()
    _times["forward"].append(_t1 - _t0)
    _times["backward"].append(_t2 - _t1)
_times = {k: float(np.median(v)) for k, v in _times.items()}  # median of 3 runs
model.zero_grad()
_ratio = _times["backward"] / _times["forward"]
print(f"one step: forward {_times['forward'] * 1e3:.0f} ms, backward {_times['backward'] * 1e3:.0f} ms "
      f"(backward/forward = {_ratio:.1f}; the 6N rule assumes 2); "
      + ("no prediction written" if predicted_backward_forward is None else f"you predicted {predicted_backward_forward}"))

# %% [markdown]
# Module 03 measured what a large `Linear` reaches on your machine (tens of GFLOP/s are
# typical for a CPU); expect our training loop to get a fraction of that, because its
# matrices are small (the MLP's largest is `(2048, 64) @ (64, 256)` at these settings), and
# every op pays Python and graph-recording overhead, allocates a fresh output, and
# makes a full pass over memory for elementwise work that a fused kernel would do in
# registers. For the same reasons the measured backward/forward ratio need not be the
# ideal 2: some of our backward rules are cheap (they reuse saved outputs), some ops'
# overhead is paid in the forward only; and on a busy machine single timings are noisy.
#
# ### Activation memory against the context length
#
# Training memory is not only parameters, gradients and Adam's two moments ($4N$ numbers):
# the autograd graph keeps every op's output alive until the backward pass has used it.
# We can measure exactly what it holds: walk the graph from the loss and add up the
# distinct arrays its nodes keep. Most activations grow linearly with $B\cdot T$; the
# attention scores and weights grow with $B \cdot h \cdot T^2$.
#
# **Predict first.** From $T = 32$ to $T = 64$ (batch 16), by what factor will the memory
# held by the graph grow: 2, 4, or in between? What decides it?

# %%
predicted_graph_factor = None  # your number: graph bytes at T = 64 / at T = 32

# %%
def graph_bytes(loss):
    """Bytes of the distinct arrays held by the graph's nodes (outputs, saved attributes)."""
    seen, total = set(), 0

    def add(arr):
        nonlocal total
        base = arr
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if isinstance(base, np.ndarray) and id(base) not in seen:
            seen.add(id(base))
            total += base.nbytes

    for node in tinytorch.autograd.topological_order([loss.grad_fn]):
        add(node.output)
        for value in node.attrs.values():
            if isinstance(value, np.ndarray):
                add(value)
    return total


_Ts, _mem = [8, 16, 32, 64], []
for _T in _Ts:
    _xm, _ym = get_batch(train_data, _T, 16, Generator().manual_seed(2))
    _, _lm = model(_xm, _ym)
    _mem.append(graph_bytes(_lm))
    print(f"T = {_T:3d}: graph holds {_mem[-1] / 2**20:7.2f} MiB for a batch of 16 "
          f"({_mem[-1] / (16 * _T) / 1024:.1f} KiB per token)")
del _lm
print(f"parameters: {model.num_parameters() * 4 / 2**20:.2f} MiB in float32")
print(f"graph memory factor T 32 -> 64: measured {_mem[-1] / _mem[-2]:.2f}; "
      + ("no prediction written" if predicted_graph_factor is None else f"you predicted {predicted_graph_factor}"))
fig, ax = plt.subplots(figsize=(5.5, 3.3))
ax.plot(_Ts, np.array(_mem) / (16 * np.array(_Ts)) / 1024, "o-")
ax.set_xlabel("context length T")
ax.set_ylabel("activation memory per token (KiB)")
ax.set_title("what backward needs per token: a constant + a part ∝ T")
fig.tight_layout()
plt.show()

# %% [markdown]
# The graph's memory counts exactly what it holds, so this figure does not depend on the
# machine. Per token it is a constant (the activations of the linear layers, the same for
# every position) plus a part that grows with $T$ (each token's row of the $T \times T$
# attention matrices); at short contexts the constant hides the growth, and the first
# points can even wobble by a few percent. The
# factor between 2 and 4 says how much of the memory is attention at these sizes (the closer
# to 4, the more); it tends to 4 as $T$ grows, and at $T = 2048$ and more, the scores of
# every head and layer would dwarf everything else — which is why FlashAttention never stores them (it
# recomputes them in the backward pass, tile by tile), and why long-context training
# relies on activation checkpointing.
#
# ## 9. What PyTorch does
#
# - `torch.nn.LayerNorm` / `F.layer_norm` is one op (`native_layer_norm`) returning the
#   output with `mean` and `rstd` for the backward, exactly our design; its CUDA kernels
#   fuse the reductions and the affine step in one pass over memory.
# - `torch.nn.TransformerEncoderLayer(d, h, d_ff, dropout, activation="gelu",
#   batch_first=True, norm_first=True)` is our block (a GPT block is an *encoder* layer with a
#   causal mask; `TransformerDecoderLayer` adds cross-attention to an encoder's output, which
#   a decoder-only GPT does not have). Its fast path fuses the whole layer at inference.
# - `F.scaled_dot_product_attention(..., is_causal=True)` dispatches to fused kernels
#   (FlashAttention, memory-efficient attention) that never store the $T\times T$ matrix;
#   `torch.compile` fuses the elementwise ops of a block (GELU, residual adds, dropout)
#   into a few kernels.
# - Real GPT code (nanoGPT, Hugging Face's `GPT2LMHeadModel`) has the same structure as
#   ours. For generation they add a **KV cache**: the keys and values of past positions do
#   not change, so each new token needs only its own row of attention — module 18 builds it.
#
# If PyTorch is installed, our block and `nn.TransformerEncoderLayer` agree given the same
# weights:

# %%
if torch is not None:
    tinytorch.manual_seed(0)
    _ours = TransformerBlock(16, 4, 32)
    _theirs = torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=True,
        activation=lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    _map = {"self_attn.in_proj_weight": "attn.in_proj_weight", "self_attn.in_proj_bias": "attn.in_proj_bias",
            "self_attn.out_proj.weight": "attn.out_proj.weight", "self_attn.out_proj.bias": "attn.out_proj.bias",
            "linear1.weight": "ff.fc1.weight", "linear1.bias": "ff.fc1.bias",
            "linear2.weight": "ff.fc2.weight", "linear2.bias": "ff.fc2.bias",
            "norm1.weight": "ln1.weight", "norm1.bias": "ln1.bias",
            "norm2.weight": "ln2.weight", "norm2.bias": "ln2.bias"}
    _sd = _ours.state_dict()
    _theirs.load_state_dict({k: torch.tensor(_sd[v].numpy()) for k, v in _map.items()})
    _xin = np.random.default_rng(0).standard_normal((2, 6, 16)).astype(np.float32)
    _mask = torch.nn.Transformer.generate_square_subsequent_mask(6)
    with torch.no_grad():
        _ref = _theirs(torch.tensor(_xin), src_mask=_mask, is_causal=True).numpy()
    print(f"max |ours - nn.TransformerEncoderLayer| = {np.abs(_ours(Tensor(_xin)).numpy() - _ref).max():.1e}")
else:
    print("PyTorch is not installed; skipping the comparison with nn.TransformerEncoderLayer.")

# %% [markdown]
# ## 10. Recap
#
# - **LayerNorm** normalises each token over its features: the same computation in
#   training and generation, no batch statistics. As one fused op it records one node and
#   saves two small statistics; its backward is module 09's batch-norm rule over the other
#   axes.
# - A **pre-norm block** adds attention and an MLP to the **residual stream**; the identity
#   path carries gradients through any depth. A causal mask keeps every position from
#   seeing its future, so one forward pass trains $T$ next-token predictions.
# - A **GPT** is embeddings + $L$ blocks + final LayerNorm + head (often tied to the token
#   table), initialised small so the first loss is $\ln V$.
# - **Sampling**: temperature reshapes the distribution, top-k cuts its tail, temperature 0
#   is greedy; the context is cropped to `block_size`.
# - **Costs**: $N \approx 12Ld^2$ parameters, $\approx 6N$ training FLOPs per token plus
#   attention's $12LTd$, activation memory linear in $T$ plus an attention part in $T^2$.
#
# Run `tito test module 13` to check your work. Module 14 measures all of this properly
# with a profiler; module 18 makes generation fast with a KV cache.

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
# # Module 12 — Attention: every token looks at every other token
#
# An embedding (module 11) gives each token a vector of its own, blind to its neighbours:
# "bank" gets the same vector in "river bank" and "bank account". **Attention** is the layer
# that lets every token gather information from the others, with weights it computes on
# the fly from the data itself. It is the heart of the transformer (module 13) and of every
# large language model. In this module you build **scaled dot-product attention** with
# causal and padding masks, and **multi-head attention** with PyTorch's parameterisation, so
# that weights copied from `torch.nn.MultiheadAttention` give the same outputs and gradients.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain attention as a **soft dictionary lookup**: queries compare with keys, a softmax
#   turns the scores into weights, the output is a weighted average of the values;
# - derive, and **measure**, why the scores are divided by $\sqrt{d}$;
# - build **causal** and **padding** masks as boolean tensors, apply them with a numerically
#   stable softmax, and decide what a row with *nothing* to attend to returns;
# - build `scaled_dot_product_attention` with PyTorch's semantics, and multi-head attention
#   that **splits and merges heads with views** (shapes and strides, no copies);
# - check **causality**: changing a future token never changes an earlier output;
# - measure attention's cost — the $T \times T$ score matrix makes memory and time grow as
#   $O(T^2)$ — and see how FlashAttention avoids storing it.
#
# ## Prerequisites
#
# - Module 01: `Tensor`, views (`reshape`, `transpose`, strides), batched `matmul`, `where`.
# - Module 02: the stable `softmax`. Module 03: `Module`, `Parameter`, `Linear`, init.
# - Module 06: autograd and `gradcheck`. Module 11: embeddings and positions.
#
# Nothing new is registered with autograd here: attention is a **composite** of ops whose
# backward rules you already have (matmul, multiply, `where`, softmax, views), so its
# gradient comes for free — and `gradcheck` confirms it.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/nn/attention.py` when you run
# `tito export 12` (or `tito test module 12`). `scaled_dot_product_attention` is
# re-exported as `tinytorch.nn.functional.scaled_dot_product_attention`, the layer as
# `tinytorch.nn.MultiheadAttention`. Cells with `# YOUR CODE HERE` are yours; the **check**
# cell after each one prints a ✓ or says what is wrong.

# %%
#| default_exp nn.attention

# %%
import sys
import time
import tracemalloc

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch
from tinytorch import Tensor
from tinytorch.autograd import gradcheck
from tinytorch.nn.embedding import sinusoidal_positions

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: a soft dictionary lookup
#
# A Python `dict` maps keys to values: `d[q]` finds the key equal to the query `q` and
# returns its value. Attention does the same with vectors, **softly**. There are $S$ keys
# $k_j \in \mathbb{R}^E$, each with a value $v_j \in \mathbb{R}^{E_v}$. A query
# $q \in \mathbb{R}^E$ is compared with every key by a dot product, the **score**
# $s_j = q \cdot k_j$ (large when they point the same way). A softmax turns the scores into
# **weights** $a_j \ge 0$ that sum to 1, and the answer is the weighted average of the values:
#
# $$a = \operatorname{softmax}(s), \qquad \text{out} = \sum_j a_j v_j .$$
#
# If one key matches much better than the others, its weight is close to 1 and we get (almost)
# its value, like a dict; if several match, we get a blend. And unlike a dict lookup, every
# step is differentiable, so the model can *learn* what to ask for and what to offer.
#
# With $L$ queries at once, stacked as rows of $Q$ ($L \times E$), and keys and values as
# rows of $K$ ($S \times E$) and $V$ ($S \times E_v$), all the scores are one matrix product
# and all the outputs another:
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{E}}\right) V
#   \qquad (L \times S \text{ weights}, \; L \times E_v \text{ output}).$$
#
# In **self-attention**, $Q$, $K$ and $V$ are three linear projections of the *same*
# sequence, so $L = S = T$ and every token both asks and answers. The picture shows one
# query against four keys.

# %%
_keys = np.array([[1.0, 0.0], [0.7, 0.7], [0.0, 1.0], [-1.0, 0.2]])
_vals = np.array([10.0, 20.0, 30.0, 40.0])
_q = np.array([2.0, 0.5])
_s = _keys @ _q
_a = np.exp(_s - _s.max()) / np.exp(_s - _s.max()).sum()
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for j, k in enumerate(_keys):
    axes[0].arrow(0, 0, *k, head_width=0.06, color=f"C{j}", length_includes_head=True)
    axes[0].text(*(k * 1.12), f"k{j}", color=f"C{j}")
axes[0].arrow(0, 0, *_q, head_width=0.08, color="black", length_includes_head=True)
axes[0].text(*(_q * 1.05), "query", fontsize=10)
axes[0].set_xlim(-1.3, 2.4)
axes[0].set_ylim(-0.4, 1.3)
axes[0].set_aspect("equal")
axes[0].set_title("scores s_j = q · k_j")
axes[1].bar(range(4), _a, color=[f"C{j}" for j in range(4)])
axes[1].set_xticks(range(4), [f"k{j}: s={s:.2f}\nv={v:g}" for j, (s, v) in enumerate(zip(_s, _vals))])
axes[1].set_ylabel("weight a_j")
axes[1].set_title(f"softmax weights; output = Σ a_j v_j = {_a @ _vals:.1f}")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. Why divide by $\sqrt{E}$?
#
# Suppose the components of $q$ and $k$ are independent with mean 0 and variance 1 (roughly
# what a well-initialised network produces). Then $q \cdot k = \sum_{i=1}^{E} q_i k_i$ is a
# sum of $E$ independent terms, each of variance $\operatorname{Var}(q_i k_i) = 1$, so
#
# $$\operatorname{Var}(q \cdot k) = E, \qquad \operatorname{std}(q \cdot k) = \sqrt{E}.$$
#
# With $E = 64$ the scores spread over ±8 or more, and a softmax of such numbers is almost
# one-hot: one weight ≈ 1, the rest ≈ 0. That is a problem for **learning**: the softmax's
# Jacobian is $\operatorname{diag}(a) - a a^\top$, which shrinks toward 0 as $a$ approaches
# one-hot, so the wider the head, the less gradient flows to the queries and keys. Dividing
# by $\sqrt{E}$ brings the scores back to variance 1, whatever the width.
#
# **Predict first.** For $E = 256$, what variance do you expect for the raw scores
# $q \cdot k$, and for the scaled ones $q \cdot k / \sqrt{E}$? Write your numbers in the
# cell below (it is not graded); the cell after it measures both.

# %%
predicted_var_raw_256 = None     # your number: Var(q·k) at E = 256
predicted_var_scaled_256 = None  # your number: Var(q·k/√E) at E = 256

# %%
_rng = np.random.default_rng(0)
_dims = [4, 16, 64, 256, 1024]
_var_raw, _var_scaled, _max_raw, _max_scaled, _grad_raw, _grad_scaled = [], [], [], [], [], []
for _E in _dims:
    _qq = _rng.standard_normal((400, _E, 1))
    _kk = _rng.standard_normal((400, 32, _E))
    _sc = (_kk @ _qq)[..., 0]                                # 400 queries x 32 keys each
    _var_raw.append(_sc.var())
    _var_scaled.append((_sc / np.sqrt(_E)).var())
    _g = _rng.standard_normal(_sc.shape)                    # an upstream gradient on the weights
    for _x, _out, _grad in [(_sc, _max_raw, _grad_raw), (_sc / np.sqrt(_E), _max_scaled, _grad_scaled)]:
        _w = np.exp(_x - _x.max(1, keepdims=True))
        _w = _w / _w.sum(1, keepdims=True)
        _out.append(_w.max(1).mean())
        _through = _w * (_g - (_g * _w).sum(1, keepdims=True))   # what reaches the scores (module 06's rule)
        _grad.append(np.linalg.norm(_through, axis=1).mean())
    print(f"E = {_E:>4}: Var(q·k) = {_var_raw[-1]:7.1f}   Var(q·k/√E) = {_var_scaled[-1]:.2f}   "
          f"mean largest weight: {_max_raw[-1]:.2f} unscaled, {_max_scaled[-1]:.2f} scaled   "
          f"gradient reaching the scores: {_grad_raw[-1]:.1e} unscaled, {_grad_scaled[-1]:.1e} scaled")
_i256 = _dims.index(256)
for _label, _pred, _meas in [("Var(q·k)", predicted_var_raw_256, _var_raw[_i256]),
                             ("Var(q·k/√E)", predicted_var_scaled_256, _var_scaled[_i256])]:
    print(f"E = 256, {_label}: measured {_meas:.2f}, "
          + ("no prediction written" if _pred is None else f"you predicted {_pred}"))

fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
axes[0].loglog(_dims, _var_raw, "o-", label="q·k")
axes[0].loglog(_dims, _var_scaled, "s-", label="q·k / √E")
axes[0].loglog(_dims, _dims, "k:", label="E")
axes[0].set_xlabel("E")
axes[0].set_ylabel("variance of the scores")
axes[0].legend()
axes[1].semilogx(_dims, _max_raw, "o-", label="unscaled")
axes[1].semilogx(_dims, _max_scaled, "s-", label="scaled by 1/√E")
axes[1].axhline(1 / 32, color="k", ls=":", label="uniform (1/32)")
axes[1].set_xlabel("E")
axes[1].set_ylabel("mean largest softmax weight")
axes[1].legend()
axes[2].loglog(_dims, _grad_raw, "o-", label="unscaled")
axes[2].loglog(_dims, _grad_scaled, "s-", label="scaled by 1/√E")
axes[2].set_xlabel("E")
axes[2].set_ylabel("mean |gradient reaching the scores|")
axes[2].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# The measured variances are estimates from $400 \times 32$ random scores, so they sit
# within a few percent of $E$ and of 1, not exactly on them. Without scaling, the softmax
# becomes a hard arg-max as $E$ grows, and the third panel measures what that does to
# learning: the gradient that reaches the scores through the softmax (for the same random
# upstream gradient) shrinks as the weights saturate. With the scaling, the weights stay
# spread out the same way at every width, and so does the gradient.
#
# The package file starts here.

# %%
#| export
"""Attention (module 12): masks, scaled dot-product attention and multi-head attention, built
from ops that autograd already knows (matmul, where, softmax, views)."""
import math

import numpy as np

from tinytorch._tensor import ShapeError, Tensor, broadcast_shapes, rand, where, zeros
from tinytorch.nn.activations import softmax
from tinytorch.nn.init import constant_, xavier_uniform_
from tinytorch.nn.layers import Linear, Module, Parameter

__all__ = ["causal_mask", "apply_attn_mask", "attention_weights", "scaled_dot_product_attention",
           "split_heads", "merge_heads", "MultiheadAttention"]

# %% [markdown]
# ## 3. Masks: who may look at whom
#
# Two situations need some scores to be **forbidden**.
#
# - **Causal (look-ahead) mask.** A language model predicts token $t+1$ from tokens
#   $0..t$. In training, all positions are computed at once, so position $i$ must not see
#   keys $j > i$ — otherwise it could read the answer. The allowed pairs form the lower
#   triangle, $j \le i$.
# - **Padding mask.** Sequences in a batch have different lengths and are padded to a
#   common one (module 11's `padding_idx`). No query should attend to a padding key: the
#   columns of the padding positions are forbidden for every query of that sequence.
#
# We follow `torch.nn.functional.scaled_dot_product_attention`'s convention: a **boolean
# mask is True where attention is allowed** ("takes part"), and it **broadcasts** to the
# score shape `(..., L, S)`. A forbidden score is replaced by $-\infty$, because
# $e^{-\infty} = 0$: after the softmax it gets weight exactly 0 and the other weights still
# sum to 1. A **float** mask is *added* to the scores instead (0 = keep, $-\infty$ = forbid,
# anything in between = a bias, as ALiBi uses).
#
# Write `causal_mask(L, S=None, diagonal=0)`: the boolean `(L, S)` tensor that says, for
# query $i$ and key $j$, whether $i$ may look at $j$. With $L = S$ and `diagonal=0` a query
# sees itself and everything before it. `diagonal` shifts the boundary: `diagonal = S − L`
# aligns the *last* query with the last key, which is what a cached decoder of module 18
# needs when $L$ new queries meet $S$ keys.
#
# <details><summary>Hint 1</summary>
#
# Write the rule for one pair first: for which $j$ may query $i$ look at key $j$? Then ask
# how to evaluate that rule for every pair at once, without a Python loop.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A column of query indices and a row of key indices broadcast against each other into an
# `(L, S)` grid (module 01's broadcasting rule); a comparison of the two is a boolean grid.
# </details>
#
# <details><summary>The approach</summary>
#
# Everything follows from the rule for one pair. Write it as an inequality between the key
# index, the query index and the offset, and test it at the edges: `diagonal = 0` keeps
# the diagonal, and `diagonal = S − L` lets the last query see the last key. Then evaluate
# that one rule on every pair at once, with no loop. The contract asks for a boolean
# Tensor, not a numpy array.
# </details>

# %% nbgrader={"grade": false, "grade_id": "causal-mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def causal_mask(L, S=None, diagonal=0):
    """Where query i may attend to key j under causality.

    Contract: `L` queries, `S` keys (default `L`), `diagonal` an int offset. Returns a bool
    Tensor of shape (L, S), True for the pairs (query i, key j) where query i may look at key
    j: with diagonal 0 and L = S, key j is query i's own position or an earlier one; each
    unit of `diagonal` lets every query see one key further (PyTorch's causal convention,
    which the tests compare with).
    """
    S = L if S is None else S
    # Idea: allowed pairs form a (shifted) lower triangle; compare key index with query index.
    ### BEGIN SOLUTION
    return Tensor(np.arange(S)[None, :] <= np.arange(L)[:, None] + diagonal)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-causal-mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state

_m = causal_mask(4)
check(isinstance(_m, Tensor), "causal_mask returns a Tensor", got=type(_m).__name__, expected="Tensor")
assert_equal(_m.dtype, tinytorch.bool_, "causal_mask(4).dtype")
assert_equal(_m.shape, (4, 4), "causal_mask(4).shape")
# query 2 sees keys 0, 1, 2 (itself included) and not key 3
assert_equal(_m.numpy()[2], np.array([True, True, True, False]), "row 2 of causal_mask(4)")
assert_equal(_m.numpy(), np.tril(np.ones((4, 4), dtype=bool)), "causal_mask(4)")
assert_equal(causal_mask(2, 5).numpy(), np.tril(np.ones((2, 5), dtype=bool)), "causal_mask(2, 5): L != S")
assert_equal(causal_mask(5, 2).numpy(), np.tril(np.ones((5, 2), dtype=bool)), "causal_mask(5, 2): L > S")
assert_equal(causal_mask(2, 5, diagonal=3).numpy(), np.tril(np.ones((2, 5), dtype=bool), 3),
             "causal_mask(2, 5, diagonal=3): the last query sees the last key")
assert_equal(causal_mask(3, 3, diagonal=-1).numpy(), np.tril(np.ones((3, 3), dtype=bool), -1),
             "causal_mask(3, 3, diagonal=-1): strictly below the diagonal")
print("✓ causal_mask; causal_mask(4) =\n", _m.numpy().astype(int))

# %% [markdown]
# The two masks for a batch of two sequences of length 6, the second with 2 padding tokens
# at the end. Combined (logical *and*), each sequence gets its own `(L, S)` mask: the
# padding mask has shape `(B, 1, 1, S)` (one row per sequence, broadcast over heads and
# queries), the causal mask `(L, S)`.

# %%
_T = 6
_lengths = np.array([6, 4])
_pad = np.arange(_T)[None, :] < _lengths[:, None]          # (B, S): True = a real token
_causal = causal_mask(_T).numpy()
_both = _causal[None] & _pad[:, None, :]                   # (B, L, S)
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
for ax, m, title in [(axes[0], _causal, "causal: key j ≤ query i"),
                     (axes[1], np.broadcast_to(_pad[1], (_T, _T)), "padding (sequence 2: length 4)"),
                     (axes[2], _both[1], "both (sequence 2)")]:
    ax.imshow(m, cmap="Greens", vmin=0, vmax=1.3)
    for (r, c), v in np.ndenumerate(m):
        ax.text(c, r, "✓" if v else "−∞", ha="center", va="center", fontsize=8, color="white" if v else "black")
    ax.set_xlabel("key j")
    ax.set_ylabel("query i")
    ax.set_title(title, fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# Now apply a mask to a tensor of scores. `apply_attn_mask(scores, attn_mask, is_causal)`
# returns the scores with every forbidden entry at $-\infty$, or with a float mask added;
# `is_causal=True` means "the causal mask of the scores' last two dimensions". The provided
# `_mask_array` turns a mask given as a Tensor, numpy array or list into a numpy array, and
# raises the errors (a mask that is neither bool nor floating, a mask that does not
# broadcast to the scores).
#
# <details><summary>Hint 1</summary>
#
# Module 01's `Tensor.masked_fill(mask, value)` writes `value` where its mask is **True**.
# Is that the same polarity as an attention mask, where True means "may attend"?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The causal case needs the sizes $L$ and $S$: they are the scores' last two dimensions.
# A float mask is not a choice between two values, it is a bias: it enters by addition. It
# may be a *learned* bias (a table of relative-position scores, ALiBi's slopes) that
# requires grad. Of the forms you hold — the caller's Tensor, and `_mask_array`'s numpy
# copy of its numbers — which one keeps that bias in the graph?
# </details>
#
# <details><summary>The approach</summary>
#
# Several mistakes here raise no error, so test your function against each question. What
# does True mean to the fill you use, and what does it mean to an attention mask? Which of
# your values are still Tensors in a graph, and which became numbers on the way? What dtype
# comes out when the mask's dtype differs from the scores'? And whose array did you write
# into? Let `_mask_array` be the one judge of a mask, so its errors are the ones raised.
# </details>

# %% nbgrader={"grade": false, "grade_id": "apply-attn-mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _mask_array(attn_mask, score_shape):
    """attn_mask (Tensor, numpy array or list) as a numpy array that broadcasts to score_shape."""
    m = attn_mask.numpy() if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
    if m.dtype != np.bool_ and m.dtype.kind != "f":
        raise TypeError(f"attn_mask must be boolean (True = attend) or floating (added to the "
                        f"scores), got dtype {m.dtype}")
    try:
        ok = broadcast_shapes(m.shape, tuple(score_shape)) == tuple(score_shape)
    except Exception:
        ok = False
    if not ok:
        raise ShapeError(f"attn_mask of shape {m.shape} does not broadcast to the attention "
                         f"scores' shape {tuple(score_shape)} (..., L, S)")
    return m


def apply_attn_mask(scores, attn_mask=None, is_causal=False):
    """Forbid or bias attention scores.

    Contract: `scores` a floating Tensor (..., L, S). `attn_mask` None, or a bool mask (True =
    may attend) or a float mask (added), as a Tensor, array or list broadcasting to the scores;
    `is_causal` adds the causal mask of the last two dims. Returns a Tensor of the scores'
    shape: forbidden entries are -inf, the rest unchanged (plus the float mask, if any); the
    caller's `scores` are left as they were. A float mask given as a Tensor that requires
    grad (a learned bias) gets its gradient.
    Errors: those of `_mask_array` (TypeError for a mask of another dtype, ShapeError naming
    both shapes for a mask that does not broadcast).
    """
    # Idea: a forbidden score becomes -inf, so that the softmax gives it weight exactly 0.
    ### BEGIN SOLUTION
    if is_causal:
        scores = scores.masked_fill(~causal_mask(*scores.shape[-2:]).numpy(), float("-inf"))
    if attn_mask is not None:
        m = _mask_array(attn_mask, scores.shape)
        if m.dtype == np.bool_:
            scores = scores.masked_fill(~m, float("-inf"))
        else:  # a Tensor mask stays in the graph: a learned bias gets its gradient
            bias = attn_mask if isinstance(attn_mask, Tensor) else Tensor(m)
            scores = scores + bias.to(scores.dtype)
    return scores
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-apply-attn-mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_s = _rng.standard_normal((2, 4, 5))
_bm = _rng.random((4, 5)) < 0.5                            # True = may attend
_got = apply_attn_mask(Tensor(_s), Tensor(_bm)).numpy()
assert_equal(_got, np.where(_bm, _s, -np.inf), "bool mask: -inf where the mask is False, scores where True")
_fm = _rng.standard_normal((2, 1, 5))                      # a float mask, broadcast over the queries
assert_close(apply_attn_mask(Tensor(_s), _fm).numpy(), _s + _fm, rtol=1e-12, what="float mask: added")
assert_equal(apply_attn_mask(Tensor(_s), is_causal=True).numpy(),
             np.where(np.tril(np.ones((4, 5), bool)), _s, -np.inf), "is_causal=True on (2, 4, 5) scores")
assert_equal(apply_attn_mask(Tensor(_s)).numpy(), _s, "no mask: scores unchanged")
assert_equal(apply_attn_mask(Tensor(_s), Tensor(_bm), is_causal=True).numpy(),
             np.where(_bm & np.tril(np.ones((4, 5), bool)), _s, -np.inf),
             "a bool mask and is_causal=True together: a score survives only if both allow it")
_callers = Tensor(_s.copy())
for _mask, _what in [(Tensor(_bm), "a bool mask"), (_fm, "a float mask"), (None, "is_causal=True")]:
    apply_attn_mask(_callers, _mask, is_causal=_mask is None)
    assert_equal(_callers.numpy(), _s, f"the caller's scores after apply_attn_mask with {_what} (the result is "
                 f"new: the caller may still need the scores it passed)")
assert_raises(ShapeError, apply_attn_mask, Tensor(_s), np.ones((5, 4), dtype=bool), match=r"\(5, 4\)")
assert_raises(TypeError, apply_attn_mask, Tensor(_s), np.ones((4, 5), dtype=np.int64), match="bool")
check(apply_attn_mask(Tensor(_s.astype(np.float32)), _fm).dtype == tinytorch.float32,
      "a float64 numpy mask on float32 scores: the result stays float32 (the scores' dtype)",
      got=apply_attn_mask(Tensor(_s.astype(np.float32)), _fm).dtype)
_sg = Tensor(_s, requires_grad=True)                       # scores in a graph, through a bool mask
_masked = apply_attn_mask(_sg, Tensor(_bm))
check(_masked.requires_grad, "scores that require grad still require it after a bool mask (stay in the "
      "graph: no numpy copy of the scores)", got=_masked.requires_grad)
_masked.exp().sum().backward()
assert_close(_sg.grad.numpy(), np.where(_bm, np.exp(_s), 0.0), rtol=1e-12,
             what="gradient of sum(exp(masked scores)): exp(s) where allowed, 0 where forbidden")
_bias = Tensor(_fm, requires_grad=True)                    # a learned bias: it must receive a gradient
_biased = apply_attn_mask(Tensor(_s), _bias)
check(_biased.requires_grad, "a float mask Tensor that requires grad keeps the result in its graph (a "
      "learned bias must stay in the graph: add the Tensor, not a numpy copy of its numbers)",
      got=_biased.requires_grad)
_biased.sum().backward()
assert_close(_bias.grad.numpy(), np.full((2, 1, 5), 4.0), rtol=0,
             what="the bias's gradient under sum(): each entry was added to 4 queries' scores")
print("✓ apply_attn_mask; row 0 of the causal scores:", apply_attn_mask(Tensor(_s), is_causal=True).numpy()[0, 0].round(2))

# %% [markdown]
# ### A row with nothing to attend to
#
# What if a query may look at **no** key at all (a row of the mask is all False — a padding
# query whose keys are all padding, or a causal mask with `diagonal < 0`)? Every score of the
# row is $-\infty$, and the softmax computes $e^{-\infty - (-\infty)} = e^{\text{nan}}$: the
# row becomes NaN, the NaN spreads to the output, and in the backward pass to every gradient
# of the batch — one bad row ruins a training step. Older PyTorch returned NaN there (and
# `nn.MultiheadAttention` still does on its path that returns the weights); PyTorch 2.5's `scaled_dot_product_attention` returns
# **zeros**, and so do we: a query that may attend to nothing receives nothing, and its
# gradient is zero.
#
# Replacing the NaN afterwards is fragile: a `where` after the softmax hides the NaN from
# a bool mask's gradient (its backward sends nothing to the discarded side), but the
# softmax's own backward still sees it, and a float mask's bias, which is added before the
# softmax, receives it. Think about what the softmax must be *given* for a dead row so that
# neither its forward nor its backward ever holds a NaN, and what the weights of that row
# must be after it.
#
# Write `attention_weights(query, key, attn_mask=None, is_causal=False, scale=None)`: the
# `(..., L, S)` matrix of weights, scale defaulting to $1/\sqrt{E}$ (section 2). Module 02's
# softmax is the stable one (it subtracts the row maximum, so scores of $10^4$ do not
# overflow).
#
# <details><summary>Hint 1</summary>
#
# Which dimension of the scores holds the keys? The weights of one query, over all the keys
# it may look at, must sum to 1.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The order matters: the mask acts on the scores *before* the softmax, so that the other
# weights of the row are renormalised. Zeroing weights after the softmax leaves rows that no
# longer sum to 1.
# </details>
#
# <details><summary>Hint 3</summary>
#
# A dead row is one whose masked scores are all $-\infty$. Finding them is a question about
# the numbers, not about the graph: a numpy boolean array of shape `(..., L, 1)` is a
# constant that module 01's `where` accepts as its condition.
# </details>
#
# <details><summary>The approach</summary>
#
# Three things are already yours: the scores are dot products of every query with every
# key (a batched matmul needs the key with its last two dimensions swapped, and module 01
# has a view for that), the scale decides how peaked the softmax is, and `apply_attn_mask`
# places the $-\infty$. What is new is the dead row. You can recognise one only after
# masking, from its numbers; the softmax must never be handed it as it is, and its weights
# must come out as zeros. Module 01's `where` with a constant condition changes values
# without cutting the graph of the rows that are alive.
# </details>

# %% nbgrader={"grade": false, "grade_id": "attention-weights", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def attention_weights(query, key, attn_mask=None, is_causal=False, scale=None):
    """The attention weights softmax(query @ key^T * scale + mask), normalised over the keys.

    Contract: `query` (..., L, E), `key` (..., S, E) floating Tensors whose leading dims
    broadcast; `attn_mask`, `is_causal` as for `apply_attn_mask`; `scale` a float, default
    1/sqrt(E). Returns a (..., L, S) Tensor: each row is non-negative and sums to 1 over the
    keys, forbidden entries are exactly 0, and a row in which every key is forbidden is all
    zeros, with finite (zero) gradients.
    """
    # Idea: a softmax over the keys of masked, scaled dot products; dead rows never see -inf.
    ### BEGIN SOLUTION
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = apply_attn_mask(query @ key.mT * scale, attn_mask, is_causal)
    dead = np.all(scores.numpy() == -np.inf, axis=-1, keepdims=True)
    safe = where(dead, 0.0, scores) if dead.any() else scores
    weights = softmax(safe, dim=-1)
    return where(dead, 0.0, weights) if dead.any() else weights
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-attention-weights", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _softmax_np(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


_rng = np.random.default_rng(1)
_qd, _kd = _rng.standard_normal((2, 5, 4)), _rng.standard_normal((2, 7, 4))
_raw = _qd @ _kd.transpose(0, 2, 1)                       # E = 4: the default scale is 1/√4 = 1/2
_w = attention_weights(Tensor(_qd), Tensor(_kd))
assert_equal(_w.shape, (2, 5, 7), "weights shape (B, L, S)")
assert_close(_w.numpy().sum(-1), np.ones((2, 5)), rtol=1e-12, what="each query's weights sum to 1 over the keys")
assert_close(_w.numpy(), _softmax_np(_raw / 2.0), rtol=1e-12, what="softmax(q k^T / √E) with E = 4")
assert_close(attention_weights(Tensor(_qd), Tensor(_kd), scale=0.3).numpy(), _softmax_np(_raw * 0.3),
             rtol=1e-12, what="an explicit scale=0.3 replaces 1/√E")
assert_close(attention_weights(Tensor(_qd), Tensor(_kd), scale=0.0).numpy(), np.full((2, 5, 7), 1 / 7),
             rtol=1e-12, what="scale=0.0 is a scale too (every score 0: uniform weights), not 'no scale given'")
_bm = _rng.random((5, 7)) < 0.6
_bm[:, 0] = True                                          # every query may see key 0
_wm = attention_weights(Tensor(_qd), Tensor(_kd), attn_mask=Tensor(_bm)).numpy()
assert_close(_wm, _softmax_np(np.where(_bm, _raw / 2.0, -np.inf)), rtol=1e-12,
             what="bool mask: forbidden weights 0, the allowed ones renormalised to sum to 1")
_fm = _rng.standard_normal((5, 7))
assert_close(attention_weights(Tensor(_qd), Tensor(_kd), attn_mask=_fm).numpy(), _softmax_np(_raw / 2.0 + _fm),
             rtol=1e-12, what="float mask added before the softmax")
_wc = attention_weights(Tensor(_qd), Tensor(_kd), is_causal=True).numpy()
assert_close(_wc, _softmax_np(np.where(np.tril(np.ones((5, 7), bool)), _raw / 2.0, -np.inf)), rtol=1e-12,
             what="is_causal: weights above the diagonal are 0, rows still sum to 1")
_alive = np.ones((5, 7), dtype=bool)
_alive[2] = False                                         # query 2 may look at nothing
_qt = Tensor(_qd, requires_grad=True)
_wd = attention_weights(_qt, Tensor(_kd), attn_mask=_alive)
assert_equal(_wd.numpy()[:, 2], np.zeros((2, 7)), "a query with nothing to attend to: all-zero weights")
assert_close(np.delete(_wd.numpy(), 2, axis=1).sum(-1), np.ones((2, 4)), rtol=1e-12,
             what="the other rows still sum to 1")
(_wd * Tensor(_rng.standard_normal(_wd.shape))).sum().backward()
check(np.all(np.isfinite(_qt.grad.numpy())), "gradients through a dead row are finite (no NaN)",
      got=_qt.grad.numpy()[:, 2])
assert_equal(_qt.grad.numpy()[:, 2], np.zeros((2, 4)), "gradient of the dead query")
_fdead = np.zeros((5, 7))
_fdead[3] = -np.inf                                       # a float mask can kill a row too
_qf = Tensor(_qd, requires_grad=True)
_wf = attention_weights(_qf, Tensor(_kd), attn_mask=_fdead)
assert_equal(_wf.numpy()[:, 3], np.zeros((2, 7)), "float mask with a row of -inf: all-zero weights")
(_wf * Tensor(_rng.standard_normal(_wf.shape))).sum().backward()
check(np.all(np.isfinite(_qf.grad.numpy())), "gradients through a row killed by a float mask are finite",
      got=_qf.grad.numpy()[:, 3])
_big = attention_weights(Tensor(_qd * 1e4), Tensor(_kd)).numpy()
check(np.all(np.isfinite(_big)), "scores of 1e4 must not overflow (use the stable softmax)", got=_big[0, 0])
print("✓ attention weights; query 0's weights:", _w.numpy()[0, 0].round(3))

# %% [markdown]
# ## 4. Scaled dot-product attention
#
# With the weights in hand, one step is left: each query's output is its weighted average
# of the values (section 1). The provided wrapper
# checks the shapes the way PyTorch's `scaled_dot_product_attention` does — `query
# (..., L, E)`, `key (..., S, E)`, `value (..., S, E_v)`, with leading (batch, head)
# dimensions that broadcast — and, like PyTorch, refuses an explicit `attn_mask` together
# with `is_causal=True` (which one would win?).
#
# **Dropout on the attention weights.** Transformers often drop random attention weights
# during training (each weight is zeroed with probability `dropout_p`, the survivors scaled
# by $1/(1-p)$ so the expectation is unchanged). The provided `_attention_dropout` does this
# with `tinytorch.rand` and `where`; as in PyTorch's functional version, it applies whenever
# `dropout_p > 0` (the `MultiheadAttention` layer passes 0 in eval mode).
#
# Write the body of `scaled_dot_product_attention`, after the provided checks.
#
# <details><summary>Hint 1</summary>
#
# You already have the hard part. What does a weight matrix `(..., L, S)` need to meet to
# become an output `(..., L, E_v)`?
# </details>
#
# <details><summary>The approach</summary>
#
# Every hard question was answered in `attention_weights`; pass it everything the caller
# gave, the scale included, since `None` already means $1/\sqrt{E}$ there. The one
# decision left is where dropout acts: on the weights, after they sum to 1 and before they
# meet the values, so that a dropped weight removes one value from one query's average.
# </details>

# %% nbgrader={"grade": false, "grade_id": "sdpa", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _attention_dropout(weights, p):
    """Zero each weight with probability p and scale the rest by 1/(1-p) (inverted dropout)."""
    if p == 0.0:
        return weights
    if p >= 1.0:
        return weights * 0.0
    keep = rand(*weights.shape, dtype=weights.dtype).numpy() >= p
    return where(keep, weights * (1.0 / (1.0 - p)), 0.0)


def _check_attention_inputs(query, key, value, attn_mask, dropout_p, is_causal):
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention: {name} must be a Tensor, got {type(t).__name__}")
        if t.ndim < 2 or t.dtype.kind != "f":
            raise ValueError(f"scaled_dot_product_attention: {name} must be a floating tensor of "
                             f"shape (..., seq_len, dim), got shape {t.shape} and dtype {t.dtype}")
    if query.shape[-1] != key.shape[-1]:
        raise ShapeError(f"scaled_dot_product_attention: query {query.shape} and key {key.shape} "
                         f"must have the same last dimension E (scores are dot products q·k)")
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: key {key.shape} and value {value.shape} "
                         f"must have the same sequence length S (one value per key)")
    try:
        broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except Exception:
        raise ShapeError(f"scaled_dot_product_attention: the batch dimensions of query {query.shape}, "
                         f"key {key.shape} and value {value.shape} do not broadcast") from None
    if attn_mask is not None and is_causal:
        raise ShapeError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not "
                         "both (combine them yourself: causal_mask(L, S) & your_mask)")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p must be in [0, 1], got {dropout_p}")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None):
    """softmax(query @ key^T * scale + mask) @ value (torch.nn.functional.scaled_dot_product_attention).

    Contract: query (..., L, E), key (..., S, E), value (..., S, Ev) floating Tensors with
    broadcasting leading dims -> (..., L, Ev). attn_mask: bool (True = attend) or float
    (added), broadcasting to (..., L, S); is_causal: the causal mask; dropout_p: probability
    of dropping each weight; scale: defaults to 1/sqrt(E). A query that may attend to no key
    gets zeros. Errors (raised by the provided checks): ShapeError (module 01's RuntimeError
    that is also a ValueError) naming the shapes when E or S disagree or the batch dims do
    not broadcast, and when both attn_mask and is_causal are given; ValueError when
    dropout_p is outside [0, 1]; TypeError for a non-Tensor input.
    """
    _check_attention_inputs(query, key, value, attn_mask, dropout_p, is_causal)
    # Idea: the output of each query is its weighted average of the values.
    ### BEGIN SOLUTION
    weights = attention_weights(query, key, attn_mask, is_causal, scale)
    weights = _attention_dropout(weights, dropout_p)
    return weights @ value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-sdpa", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(2)
_qd, _kd, _vd = (_rng.standard_normal((2, 3, 5, 4)), _rng.standard_normal((2, 3, 6, 4)),
                 _rng.standard_normal((2, 3, 6, 2)))
_raw = _qd @ _kd.swapaxes(-1, -2)
_out = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), Tensor(_vd))
assert_equal(_out.shape, (2, 3, 5, 2), "SDPA output shape (B, H, L, Ev)")
assert_close(_out.numpy(), _softmax_np(_raw / 2.0) @ _vd, rtol=1e-12, what="softmax(q k^T / √E) v")
_oc = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), Tensor(_vd), is_causal=True)
_wc = _softmax_np(np.where(np.tril(np.ones((5, 6), bool)), _raw / 2.0, -np.inf))
assert_close(_oc.numpy(), _wc @ _vd, rtol=1e-12, what="is_causal=True, L=5 queries, S=6 keys")
assert_close(scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), Tensor(_vd), scale=0.3).numpy(),
             _softmax_np(_raw * 0.3) @ _vd, rtol=1e-12, what="scale=0.3: softmax(q k^T · 0.3) v")
_pad = np.array([True] * 4 + [False] * 2)                 # keys 4 and 5 are padding
_v2 = _vd.copy()
_v2[..., 4:, :] = 1e6                                      # ... whatever their values
_a = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), Tensor(_vd), attn_mask=_pad).numpy()
_b = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), Tensor(_v2), attn_mask=_pad).numpy()
assert_equal(_b, _a, "padding keys' values never reach the output")
_ins = [Tensor(a, requires_grad=True) for a in (_qd[0, :2], _kd[0, :2], _vd[0, :2])]
check(gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True), _ins),
      "gradcheck of causal SDPA")
_bm = Tensor(_rng.random((5, 6)) < 0.5)
check(gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, attn_mask=_bm), _ins),
      "gradcheck of SDPA with a bool mask")
_eye = Tensor(np.eye(6))                                 # value = identity: the output IS the weights
with preserved_state():
    tinytorch.manual_seed(0)
    _plain = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), _eye).numpy()
    _drop = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), _eye, dropout_p=0.5).numpy()
check(np.all(np.isclose(_drop, 0.0) | np.isclose(_drop, 2 * _plain)),
      "dropout_p=0.5: each weight is dropped (0) or kept and doubled")
check(0.3 < np.mean(_drop == 0) < 0.7, "dropout_p=0.5 drops about half the weights",
      got=np.mean(_drop == 0), expected="between 0.3 and 0.7")
with preserved_state():                                  # the same draws with real values
    tinytorch.manual_seed(0)
    _drop_v = scaled_dot_product_attention(Tensor(_qd), Tensor(_kd), Tensor(_vd), dropout_p=0.5).numpy()
assert_close(_drop_v, _drop @ _vd, rtol=1e-12,
             what="dropout acts on the weights, before the values: with the same seed, out = dropped weights @ v")
assert_raises(ShapeError, scaled_dot_product_attention, Tensor(_qd), Tensor(_kd[..., :3]), Tensor(_vd),
              match=r"\(2, 3, 5, 4\)")
print("✓ scaled_dot_product_attention; out[0, 0, 0] =", _out.numpy()[0, 0, 0].round(4))

# %% [markdown]
# ### A toy sequence: what attention looks at
#
# Let us build two hand-made attention patterns on a short sentence and look at their
# weights. Module 11 showed that shifting a position by $k$ is a fixed linear map $R_k$ of
# the sinusoidal table. So a query $q_i = P_i R_{-1}$ looks like the key of the **previous**
# position, $k_{i-1} = P_{i-1}$: a "previous-token" pattern made of positions alone. A second
# pattern uses the token embeddings only ($q = k = $ embedding): each token attends to the
# earlier copies of **itself**. Real heads learn such patterns (GPT-2 has previous-token
# heads); here we construct them to see how the heatmap reads. Both are causal.

# %%
def shift_matrix(k, dim, base=10000.0):
    """R_k with P[p + k] = P[p] @ R_k for the sinusoidal table (module 11)."""
    R = np.zeros((dim, dim))
    for c in range(0, dim, 2):
        a = k * base ** (-c / dim)
        R[c:c + 2, c:c + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return R


_words = "the cat sat on the mat because the cat was tired".split()
_T, _D = len(_words), 32
_P = sinusoidal_positions(_T, _D, dtype=tinytorch.float64).numpy()
_vocab = {w: i for i, w in enumerate(dict.fromkeys(_words))}
_emb = np.random.default_rng(0).standard_normal((len(_vocab), _D))
_X = _emb[[_vocab[w] for w in _words]]
_heads = {
    # scale 4: sharper than 1/√D, so that the one previous position dominates its row
    "previous-token head (positions)": (_P @ shift_matrix(-1, _D), _P, 4.0),
    "same-token head (embeddings)": (_X, _X, 1.0 / np.sqrt(_D)),
}
fig, axes = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"wspace": 0.4})
for ax, (title, (_qq, _kk, _sc)) in zip(axes, _heads.items()):
    _w = attention_weights(Tensor(_qq), Tensor(_kk), is_causal=True, scale=_sc).numpy()
    _image = ax.imshow(_w, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(_T), _words, rotation=60, fontsize=8)
    ax.set_yticks(range(_T), _words, fontsize=8)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(title, fontsize=10)
fig.colorbar(_image, ax=axes, shrink=0.8, label="attention weight")
plt.show()

# %% [markdown]
# Each row is one query's weights over the keys (they sum to 1; the upper triangle is zero
# by causality). Left: the dark band just below the diagonal is "look at the previous
# token" (the first token has no previous one, so it keeps itself). Right: "the", "cat"
# find their earlier occurrences; tokens seen for the first time can only attend to
# themselves. One attention layer could use *both* patterns at once — that is what multiple
# heads are for.
#
# ## 5. Multi-head attention
#
# One softmax produces one weighted average per query: one "question" per token. A model
# usually wants several at once (the previous token, the subject of the sentence, the
# matching bracket, ...). **Multi-head attention** runs $H$ attentions in parallel on $H$
# slices of the model width $E$, each of size $d = E / H$, and concatenates the results:
#
# $$\text{head}_h = \operatorname{Attention}(X W_q^{(h)}, X W_k^{(h)}, X W_v^{(h)}), \qquad
#   \operatorname{MHA}(X) = [\text{head}_1, \dots, \text{head}_H]\, W_o^\top + b_o .$$
#
# It costs the same as one head of full width: the projections are single $E \times E$
# matrices $W_q, W_k, W_v$ whose outputs are **cut** into $H$ pieces of $d$ columns: head
# $h$ owns columns $h d, \dots, (h+1) d - 1$ of every token's vector. The cut is pure
# bookkeeping, and this is where module 01's views pay off:
#
# - **split**: `(B, T, E)` → `(B, H, T, d)`, so that batched `matmul` treats `(B, H)` as
#   batch dimensions — all heads of all sequences in one call. It can be done with views
#   only (no copy): the result shares the input's memory.
# - **merge**: `(B, H, T, d)` → `(B, T, E)`, each token's $H$ head outputs side by side
#   again, head 0 first. Here one copy ($B T E$ numbers) is unavoidable in general: think
#   about why, once your merge works (the cell after the check prints the strides).
#
# The shapes alone do not catch a wrong split: `reshape` to `(B, H, T, d)` directly gives the
# right shape and the wrong numbers (it cuts the *sequence*, not the features). The checks
# compare head $h$ with column block $h$.
#
# <details><summary>Hint 1 (split)</summary>
#
# A `reshape` only regroups the elements in their memory order. In a contiguous `(B, T, E)`
# tensor, which index varies fastest? Which shape can you regroup the last dimension into so
# that the head index and the within-head index appear as two dimensions?
# </details>
#
# <details><summary>Hint 2 (split)</summary>
#
# After that regrouping the head dimension sits right of the time dimension; a transpose
# (a stride swap, module 01) puts it where batched matmul wants it.
# </details>
#
# <details><summary>The approach (split)</summary>
#
# A reshape may only regroup neighbours in memory order, so it can cut the feature axis
# but never move the heads in front of time; a transpose can move axes but never cut one.
# Which must come first? The leading dimensions are not yours to touch: the input may be
# batched or not, so name the axes you move by counting from the end. Neither step may
# copy: the check asks for shared memory.
# </details>
#
# <details><summary>Hint (merge)</summary>
#
# Undo the split in reverse order. A reshape straight from `(B, H, T, d)` to `(B, T, E)`
# has the right shape but interleaves tokens and heads: which dimension must be moved first?
# </details>
#
# <details><summary>The approach (merge)</summary>
#
# The split's two steps, each inverted, in the opposite order: which must come first so
# that a token's head outputs end up side by side, head 0 first? The result must be
# contiguous, and one copy on the way is expected (why is the question after the check).
# Count axes from the end, so that an unbatched input works too.
# </details>

# %% nbgrader={"grade": false, "grade_id": "split-heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def split_heads(x, num_heads):
    """Cut the feature dimension into heads: (..., T, E) -> (..., H, T, E/H).

    Contract: `x` a Tensor (B, T, E) or (T, E); `num_heads` H a positive int. Returns a view of
    `x` (shares its memory, no copy) of shape (..., H, T, E/H) whose head h holds columns
    h*(E/H) .. (h+1)*(E/H)-1 of x. Errors: ShapeError, naming the shape and num_heads and
    saying it is not divisible, when E is not a multiple of H (checked for you).
    """
    if x.shape[-1] % num_heads != 0:
        raise ShapeError(f"split_heads: the last dimension of {x.shape} is not divisible by num_heads={num_heads}")
    # Idea: which reshape cuts the features (not the sequence), and which view then puts the heads where matmul batches?
    ### BEGIN SOLUTION
    *lead, T, E = x.shape
    return x.reshape(*lead, T, num_heads, E // num_heads).transpose(-3, -2)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-split-heads", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = tinytorch.randn(2, 5, 12)
_h = split_heads(_x, 3)
assert_equal(_h.shape, (2, 3, 5, 4), "split_heads((2, 5, 12), 3).shape")
for _head in range(3):                                   # head h = columns 4h .. 4h+3 of every token
    assert_equal(_h.numpy()[:, _head], _x.numpy()[:, :, 4 * _head:4 * _head + 4],
                 f"head {_head} must be columns {4 * _head}..{4 * _head + 3} of x")
check(np.shares_memory(_h.numpy(), _x.numpy()), "split_heads must be a view (share x's memory)")
assert_equal(split_heads(tinytorch.randn(5, 12), 4).shape, (4, 5, 3), "unbatched (T, E) -> (H, T, d)")
assert_raises(ShapeError, split_heads, tinytorch.randn(1, 2, 10), 4, match="divisible")
print("✓ split_heads; strides", _h.stride())

# %% nbgrader={"grade": false, "grade_id": "merge-heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def merge_heads(x):
    """Put the heads side by side again: (..., H, T, d) -> (..., T, H*d).

    Contract: `x` a Tensor (B, H, T, d) or (H, T, d). Returns a contiguous Tensor (..., T, H*d)
    whose token t is the concatenation of x[..., 0, t, :], x[..., 1, t, :], ... (head 0 first);
    merge_heads(split_heads(x, H)) equals x.
    """
    # Idea: undo the split in reverse order.
    ### BEGIN SOLUTION
    *lead, H, T, d = x.shape
    return x.transpose(-3, -2).reshape(*lead, T, H * d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-merge-heads", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_y = tinytorch.randn(2, 3, 5, 4)                     # a fresh (B, H, T, d), e.g. an attention output
_m = merge_heads(_y)
assert_equal(_m.shape, (2, 5, 12), "merge_heads((2, 3, 5, 4)).shape")
assert_equal(_m.numpy()[1, 2], np.concatenate([_y.numpy()[1, h, 2] for h in range(3)]),
             "token 2 of sequence 1 = its three head outputs side by side")
for _n, _t, _h, _j in [(0, 0, 0, 0), (0, 4, 2, 3), (1, 3, 1, 0), (1, 1, 2, 2)]:
    assert_equal(_m.numpy()[_n, _t, 4 * _h + _j], _y.numpy()[_n, _h, _t, _j],
                 f"merged[{_n}, {_t}, 4·{_h} + {_j}] is head {_h}'s feature {_j} of token {_t}")
check(_m.is_contiguous(), "merge_heads returns a contiguous tensor")
_x = tinytorch.randn(2, 5, 12)
assert_equal(merge_heads(split_heads(_x, 3)).numpy(), _x.numpy(), "merge_heads(split_heads(x, 3)) == x")
_u = tinytorch.randn(4, 5, 3)
assert_equal(merge_heads(_u).shape, (5, 12), "unbatched (H, T, d) -> (T, E)")
assert_equal(merge_heads(_u).numpy()[2], np.concatenate([_u.numpy()[h, 2] for h in range(4)]),
             "unbatched: token 2 = its four head outputs side by side")
print("✓ merge_heads; token (1, 2):", _m.numpy()[1, 2].round(2))

# %% [markdown]
# What the views did, in strides (elements skipped per step in each dimension):

# %%
_x = tinytorch.randn(2, 5, 12)
print("x                 shape", _x.shape, "strides", _x.stride())
print("reshape(2,5,3,4)  shape", _x.reshape(2, 5, 3, 4).shape, "strides", _x.reshape(2, 5, 3, 4).stride())
_h = split_heads(_x, 3)
print("split_heads(x, 3) shape", _h.shape, "strides", _h.stride(),
      "contiguous:", _h.is_contiguous(), "shares x's memory:", np.shares_memory(_h.numpy(), _x.numpy()))
_o = _h @ tinytorch.randn(4, 4)                       # any computation gives fresh, contiguous memory
_t = _o.transpose(1, 2)
print("out.transpose(1,2) strides", _t.stride(), "contiguous:", _t.is_contiguous())
_m = merge_heads(_o)
_shared = np.shares_memory(_m.numpy(), _o.numpy())
print("merge_heads(out)  shape", _m.shape, "strides", _m.stride(), "shares out's memory:", _shared,
      "(a view)" if _shared else "(a copy)")

# %% [markdown]
# <details><summary>Why the merge copies, once you have read the strides above</summary>
#
# After the transpose, one token's features are head 0's $d$ numbers, then head 1's, ...;
# in memory, head 1's block for that token sits $T \cdot d$ elements after head 0's, not $d$.
# Merging the last two dimensions into one of size $H d$ needs a single stride that steps
# through both $j$ (stride 1) and $h$ (stride $T d$): no such stride exists unless $T = 1$,
# so `reshape` has to copy. `split_heads` had the opposite situation: there the features of
# one token were adjacent, and cutting one dimension into two always works on a view.
# </details>

# %% [markdown]
# ### The layer, with PyTorch's parameters
#
# `torch.nn.MultiheadAttention` stores the three input projections **packed** in one
# parameter `in_proj_weight` of shape `(3E, E)` — rows `0..E-1` are $W_q$, then $W_k$, then
# $W_v$ — with `in_proj_bias` `(3E,)`, and the output projection as a `Linear`, `out_proj`.
# We use the same names and shapes, so a `state_dict` copied from PyTorch fits. The
# initialisation is PyTorch's too: Xavier-uniform for `in_proj_weight`, zero biases,
# `Linear`'s default for `out_proj.weight`.
#
# `forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
# average_attn_weights=True, is_causal=False)` follows PyTorch:
#
# - inputs `(N, L, E)` with `batch_first=True` (our default; PyTorch's default is `False`,
#   `(L, N, E)` — every other tinytorch layer is batch-first, so we chose consistency), or
#   unbatched `(L, E)`; `key`/`value` may be a different sequence (cross-attention, $S \ne L$);
# - returns `(output, weights)`: the output `(N, L, E)`, and the attention weights averaged
#   over the heads `(N, L, S)` (or per head `(N, H, L, S)` with
#   `average_attn_weights=False`), or `None` when `need_weights=False`.
#
# ### The layer's masks: the other convention
#
# **Careful: in this layer a boolean mask is True where attention is NOT allowed** — the
# opposite of `scaled_dot_product_attention`! (This historical inconsistency of PyTorch's is
# a classic source of bugs.) Two masks may be given, and float masks are added as before:
#
# - `key_padding_mask (N, S)`: True marks the **padding keys** of each sequence. It says
#   nothing about queries: every query of sequence $n$ must ignore those keys, in every head.
# - `attn_mask`: either `(L, S)`, one mask for every sequence and head, or `(N·H, L, S)`, one
#   per sequence and head, in PyTorch's order: entry $n H + h$ is sequence $n$, head $h$.
#
# Write `_mha_mask_to_sdpa(mask, kind, N, H)`: one such mask, already checked to have an
# allowed shape and dtype, turned into SDPA's convention with a shape that broadcasts to the
# scores `(N, H, L, S)`. The provided `_mha_mask` checks the shapes, calls yours on each
# mask, and combines the results (and, with `is_causal=True` and no `attn_mask`, adds the
# causal mask: PyTorch insists on getting the mask too and treats `is_causal` as a hint).
#
# <details><summary>Hint 1</summary>
#
# Two separate questions: the **polarity** (only boolean masks have one; a float mask means
# the same in both conventions) and the **shape** (which size-1 dimensions let the mask
# broadcast over the heads and queries it does not mention).
# </details>
#
# <details><summary>Hint 2</summary>
#
# Place a padding mask's key dimension last, where the scores keep their keys, and its
# sequence dimension first. For the per-head mask, think about how a flat index
# $n H + h$ unflattens: which of the two sizes varies fastest?
# </details>
#
# <details><summary>The approach</summary>
#
# Keep the two questions apart. Shape: a mask must have the dimensions it speaks about
# where the scores `(N, H, L, S)` keep them, and size 1 (or nothing, on the left) where it
# is silent; the flat per-head index unflattens in the order PyTorch wrote it, sequence
# first. Polarity: only a boolean mask has one to flip; a float mask is a bias in both
# conventions and comes back with its values unchanged.
# </details>

# %% nbgrader={"grade": false, "grade_id": "mha-masks", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _mha_mask_to_sdpa(mask, kind, N, H):
    """One of MultiheadAttention's masks in scaled_dot_product_attention's convention.

    Contract: `mask` a numpy array, bool (True = may NOT attend) or floating (added), of an
    allowed shape: kind "key_padding": (N, S), True marking padding keys; kind "attn": (L, S)
    or (N*H, L, S) with entry n*H + h for sequence n, head h. Returns a numpy array that
    broadcasts to the scores (N, H, L, S) as the mask means: bool with True = may attend, or
    the float mask's values.
    """
    # Idea: flip the polarity of a bool mask, and give each mask the dims it applies along.
    ### BEGIN SOLUTION
    if kind == "key_padding":
        mask = mask.reshape(N, 1, 1, mask.shape[-1])
    elif mask.ndim == 3:
        mask = mask.reshape(N, H, *mask.shape[1:])
    return ~mask if mask.dtype == np.bool_ else mask
    ### END SOLUTION


def _mha_mask(attn_mask, key_padding_mask, N, H, L, S, is_causal, dtype):
    """MultiheadAttention's masks (bool True = NOT allowed, or float added) merged into one mask in
    scaled_dot_product_attention's convention (bool True = attend, or float), broadcasting to
    (N, H, L, S); None when there is no mask."""
    allowed, added = [], []
    if attn_mask is None and is_causal:
        allowed.append(causal_mask(L, S).numpy())
    for name, kind, m, shapes in (("attn_mask", "attn", attn_mask, [(L, S), (N * H, L, S)]),
                                  ("key_padding_mask", "key_padding", key_padding_mask, [(N, S)])):
        if m is None:
            continue
        m = m.numpy() if isinstance(m, Tensor) else np.asarray(m)
        if m.shape not in shapes:
            raise ShapeError(f"MultiheadAttention: {name} of shape {m.shape} must have one of the "
                             f"shapes {sorted(shapes)} (N={N}, num_heads={H}, L={L}, S={S})")
        if m.dtype != np.bool_ and m.dtype.kind != "f":
            raise TypeError(f"MultiheadAttention: {name} must be bool or floating, got {m.dtype}")
        m = _mha_mask_to_sdpa(m, kind, N, H)
        if m.dtype == np.bool_:
            allowed.append(m)
        else:
            added.append(m.astype(dtype))
    if not allowed and not added:
        return None
    if not added:
        return Tensor(np.logical_and.reduce(np.broadcast_arrays(*allowed)) if len(allowed) > 1 else allowed[0])
    total = sum(added) + sum(np.where(a, 0.0, -np.inf).astype(dtype) for a in allowed)
    return Tensor(total)


# %% nbgrader={"grade": true, "grade_id": "test-mha-masks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _as_scores(m, N, H, L, S):
    """A converted mask, broadcast to the scores' shape (N, H, L, S)."""
    try:
        return np.broadcast_to(m, (N, H, L, S))
    except ValueError:
        check(False, f"the converted mask broadcasts to the scores' shape (N, H, L, S) = {(N, H, L, S)}",
              got=f"shape {np.shape(m)}")


_N, _H, _L, _S = 2, 3, 4, 5
_kpm = np.zeros((_N, _S), dtype=bool)
_kpm[1, 3:] = True                                        # sequence 1: keys 3 and 4 are padding
_got = _mha_mask_to_sdpa(_kpm, "key_padding", _N, _H)
assert_equal(_as_scores(_got, _N, _H, _L, _S)[1, 2, 0], np.array([True, True, True, False, False]),
             "key_padding_mask, sequence 1, any head and query: padding keys 3, 4 not allowed")
for _n, _h, _i in [(0, 0, 0), (0, 2, 3), (1, 1, 2)]:
    assert_equal(_as_scores(_got, _N, _H, _L, _S)[_n, _h, _i], np.array([_k not in ((3, 4) if _n else ()) for _k in range(_S)]),
                 f"key_padding_mask, sequence {_n}, head {_h}, query {_i}: the same row for every head and query")
_am = np.triu(np.ones((_L, _S), dtype=bool), 1)           # True = forbidden (MHA convention)
assert_equal(_as_scores(_mha_mask_to_sdpa(_am, "attn", _N, _H), _N, _H, _L, _S),
             np.broadcast_to(~_am, (_N, _H, _L, _S)), "attn_mask (L, S): the same for every sequence and head")
_ph = np.random.default_rng(8).random((_N * _H, _L, _S)) < 0.4
_conv = _as_scores(_mha_mask_to_sdpa(_ph, "attn", _N, _H), _N, _H, _L, _S)
assert_equal(_conv[1, 0], ~_ph[1 * _H + 0], "per-head attn_mask: sequence 1, head 0 is entry 1·H + 0")
for _n in range(_N):
    for _h in range(_H):
        assert_equal(_conv[_n, _h], ~_ph[_n * _H + _h], f"per-head attn_mask: sequence {_n}, head {_h} is entry {_n}·H + {_h}")
_fl = np.random.default_rng(9).standard_normal((_N, _S))
assert_close(_as_scores(_mha_mask_to_sdpa(_fl, "key_padding", _N, _H), _N, _H, _L, _S),
             np.broadcast_to(_fl[:, None, None, :], (_N, _H, _L, _S)), rtol=0, atol=0,
             what="a float key_padding_mask keeps its values (it is added either way)")
print("✓ MultiheadAttention's masks in SDPA's convention; sequence 1:", _got.reshape(_N, -1)[1])

# %% [markdown]
# The layer's plumbing (provided): input checks and the layouts PyTorch accepts.

# %%
#| export
def _mha_check_inputs(query, key, value, embed_dim, batch_first):
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim != 3 or t.shape[-1] != embed_dim:
            raise ShapeError(f"MultiheadAttention: {name} must be (N, L, {embed_dim}) "
                             f"(batch_first={batch_first}) or unbatched (L, {embed_dim}), got {t.shape}")
    if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
        raise ShapeError(f"MultiheadAttention: query {query.shape}, key {key.shape} and value "
                         f"{value.shape} need the same batch size, and key and value the same length")


def _kv_cache_module(caller):
    """tinytorch.nn.kv_cache (module 18), imported the first time a KV cache is used."""
    try:
        import tinytorch.nn.kv_cache as kv_cache
    except ImportError as exc:
        if exc.name not in (None, "tinytorch.nn.kv_cache"):
            raise
        raise RuntimeError(
            f"{caller} with a KV cache needs module 18 (18_memoization), where you build the "
            f"cache (tinytorch/nn/kv_cache.py). Without it, leave the cache out: generate "
            f"recomputes the whole context at every step.") from exc
    return kv_cache


def _mha_forward(layer, query, key, value, key_padding_mask, need_weights, attn_mask,
                 average_attn_weights, is_causal):
    """MultiheadAttention.forward's plumbing: unbatched and sequence-first layouts to
    batch-first, the masks to one SDPA mask, then layer._attend, then the layout back."""
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
        if key_padding_mask is not None:
            kpm = key_padding_mask
            key_padding_mask = kpm.unsqueeze(0) if isinstance(kpm, Tensor) else np.asarray(kpm)[None]
    elif not layer.batch_first:
        query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    _mha_check_inputs(query, key, value, layer.embed_dim, layer.batch_first)
    N, L, _ = query.shape
    mask = _mha_mask(attn_mask, key_padding_mask, N, layer.num_heads, L, key.shape[1], is_causal, query.dtype)
    out, weights = layer._attend(query, key, value, mask, need_weights, average_attn_weights)
    if unbatched:
        out = out.squeeze(0)
        weights = None if weights is None else weights.squeeze(0)
    elif not layer.batch_first:
        out = out.transpose(0, 1)
    return out, weights


# %% [markdown]
# ### The layer
#
# The provided `forward` (through `_mha_forward`) handles the layouts (unbatched,
# sequence-first) and the masks, and calls `_attend` on batch-first inputs with one mask in
# SDPA's convention; the provided `_project(x, i)` applies the $i$-th packed projection (0 query, 1 key, 2 value) through a
# slice (a view) of `in_proj_weight`. Write `__init__` (the parameters), `_reset_parameters`
# (PyTorch's initialisation, with module 03's `init` functions) and `_attend` (the
# multi-head computation).
#
# <details><summary>Hint 1</summary>
#
# `__init__`: which parameters, of which shapes, does PyTorch's state_dict list (the check
# prints their names)? With `bias=False` the layer must still *have* an `in_proj_bias`
# attribute, set to `None` (module 03's `register_parameter` does that). Create them with
# any values (zeros, in the given dtype), then call `_reset_parameters`.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `_attend` follows the definition: project, split, attend per head, merge, project out.
# Dropout acts on the attention weights, and only in training mode. The weights you return
# are a by-product, averaged over the heads unless asked otherwise.
# </details>
#
# <details><summary>The approach</summary>
#
# `__init__` decides nothing: names, shapes and `dtype` are those of PyTorch's
# `state_dict`, and without bias both bias attributes exist, as `None`; the reset leaves
# `out_proj.weight` with `Linear`'s init. `_attend` is section 5's formula with your
# pieces, all heads at once as batch axes; the scale is $1/\sqrt{d}$, not $1/\sqrt{E}$.
# The weights returned are the ones the values were averaged with (dropout included, only
# in training); averaging them over the heads serves the caller, never the output.
# </details>

# %% nbgrader={"grade": false, "grade_id": "mha", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class MultiheadAttention(Module):
    """Multi-head attention with PyTorch's parameters (torch.nn.MultiheadAttention):
    in_proj_weight (3E, E), in_proj_bias (3E,), out_proj = Linear(E, E). batch_first=True by
    default: inputs (N, L, E); boolean masks are True where attention is NOT allowed."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=True, dtype=None):
        """Contract: embed_dim E divisible by num_heads H (else ValueError naming both, checked
        for you). Registers in_proj_weight (3E, E), in_proj_bias (3E,) or None when bias=False,
        out_proj = Linear(E, E, bias) — all in `dtype` — and initialises them."""
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"MultiheadAttention: embed_dim={embed_dim} must be divisible by "
                             f"num_heads={num_heads} (each head gets embed_dim // num_heads features)")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        # Idea: PyTorch's names and shapes, so that its state_dict loads into ours.
        ### BEGIN SOLUTION
        E = self.embed_dim
        self.in_proj_weight = Parameter(zeros(3 * E, E, dtype=dtype))
        if bias:
            self.in_proj_bias = Parameter(zeros(3 * E, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, dtype=dtype)
        self._reset_parameters()
        ### END SOLUTION

    def _reset_parameters(self):
        """Xavier-uniform in_proj_weight, zero biases (out_proj.weight keeps Linear's init)."""
        # Idea: PyTorch's initialisation, so that a fresh layer behaves like theirs.
        ### BEGIN SOLUTION
        xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            constant_(self.in_proj_bias, 0.0)
            constant_(self.out_proj.bias, 0.0)
        ### END SOLUTION

    def _project(self, x, i):
        """x @ W_i^T + b_i for i = 0 (query), 1 (key), 2 (value): a slice (view) of the packed weight."""
        E = self.embed_dim
        out = x @ self.in_proj_weight[i * E:(i + 1) * E].T
        if self.in_proj_bias is not None:
            out = out + self.in_proj_bias[i * E:(i + 1) * E]
        return out

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False, kv_cache=None, layer_idx=0):
        """PyTorch's forward: layouts and masks (provided, `_mha_forward`), then `_attend`.
        With `kv_cache` (module 18's KVCache), causal self-attention of the new tokens against
        the cached ones of layer `layer_idx` instead; returns (output, None)."""
        if kv_cache is not None:
            return _kv_cache_module("MultiheadAttention.forward").mha_forward_with_cache(
                self, query, key, value, kv_cache, layer_idx, key_padding_mask=key_padding_mask,
                attn_mask=attn_mask, is_causal=is_causal)
        return _mha_forward(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                            average_attn_weights, is_causal)

    def _attend(self, query, key, value, mask, need_weights, average_attn_weights):
        """Contract: batch-first query (N, L, E), key and value (N, S, E), `mask` None or one mask
        in SDPA's convention broadcasting to (N, H, L, S). Returns (output (N, L, E), weights):
        weights None without need_weights, else (N, L, S) averaged over the heads, or
        (N, H, L, S) per head when average_attn_weights is False. In training with dropout > 0
        the weights returned are the ones the values were averaged with, after dropout (as
        PyTorch returns them)."""
        # Idea: H attentions side by side, on slices of the projected features.
        ### BEGIN SOLUTION
        q = split_heads(self._project(query, 0), self.num_heads)
        k = split_heads(self._project(key, 1), self.num_heads)
        v = split_heads(self._project(value, 2), self.num_heads)
        weights = attention_weights(q, k, mask)
        if self.training and self.dropout > 0:
            weights = _attention_dropout(weights, self.dropout)
        out = self.out_proj(merge_heads(weights @ v))
        if not need_weights:
            weights = None
        elif average_attn_weights:
            weights = weights.mean(dim=1)
        return out, weights
        ### END SOLUTION

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, "
                f"bias={self.in_proj_bias is not None}, batch_first={self.batch_first}")


# %% nbgrader={"grade": true, "grade_id": "test-mha-init", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _mha = MultiheadAttention(12, 3, dtype=tinytorch.float64)
assert_equal([n for n, _ in _mha.named_parameters()],
             ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"], "parameter names")
assert_equal(_mha.in_proj_weight.shape, (36, 12), "in_proj_weight.shape (3E, E)")
assert_equal(_mha.in_proj_bias.shape, (36,), "in_proj_bias.shape (3E,)")
assert_equal([p.dtype for p in _mha.parameters()], [tinytorch.float64] * 4,
             "dtype=float64 is passed on to every parameter (in_proj_weight, in_proj_bias, out_proj.weight, "
             "out_proj.bias)")
assert_equal(_mha.in_proj_bias.numpy(), np.zeros(36), "in_proj_bias starts at 0")
assert_equal(_mha.out_proj.bias.numpy(), np.zeros(12), "out_proj.bias starts at 0")
_bound = np.sqrt(6 / (36 + 12))                            # Xavier-uniform over (3E, E)
check(np.abs(_mha.in_proj_weight.numpy()).max() <= _bound, "Xavier-uniform: |w| <= sqrt(6 / (3E + E))",
      got=np.abs(_mha.in_proj_weight.numpy()).max(), expected=f"<= {_bound:.4f}")
check(_mha.in_proj_weight.numpy().std() > _bound / 2, "Xavier-uniform: std ≈ bound/√3 (not all zeros)",
      got=_mha.in_proj_weight.numpy().std(), expected=f"≈ {_bound / np.sqrt(3):.4f}")
_linear_bound = 1 / np.sqrt(12)                            # Linear(E, E)'s own init, kept by out_proj
check(np.abs(_mha.out_proj.weight.numpy()).max() <= _linear_bound, "out_proj.weight keeps Linear's "
      "initialisation (|w| <= 1/sqrt(E)); only in_proj_weight is Xavier-uniform",
      got=np.abs(_mha.out_proj.weight.numpy()).max(), expected=f"<= {_linear_bound:.4f}")
_nb = MultiheadAttention(8, 2, bias=False)
check(_nb.in_proj_bias is None and _nb.out_proj.bias is None, "bias=False: no biases at all",
      got=(_nb.in_proj_bias, _nb.out_proj.bias), expected=(None, None))
assert_raises(ValueError, MultiheadAttention, 10, 3, match="divisible")
print("✓ MultiheadAttention's parameters:", [(n, p.shape) for n, p in _mha.named_parameters()])

# %% [markdown]
# The check below compares the layer with the definition written out as a loop over the
# heads in numpy, with non-zero biases, a padding mask, cross-attention ($S \ne L$), the
# per-head weights, and the causal mask.

# %% nbgrader={"grade": true, "grade_id": "test-mha", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
def _reference_mha(m, xq, xkv, allowed):
    """Loop over heads with numpy: the definition, written out (E = 12, H = 3, d = 4)."""
    W, b = m.in_proj_weight.numpy(), m.in_proj_bias.numpy()
    Q, K, V = (x @ W[i * 12:(i + 1) * 12].T + b[i * 12:(i + 1) * 12] for i, x in enumerate((xq, xkv, xkv)))
    heads, ws = [], []
    for h in range(3):
        sl = slice(4 * h, 4 * h + 4)
        s = np.where(allowed[h] if allowed.ndim == 4 else allowed, Q[..., sl] @ K[..., sl].swapaxes(-1, -2) / 2.0, -np.inf)
        ws.append(_softmax_np(s))
        heads.append(ws[-1] @ V[..., sl])
    out = np.concatenate(heads, -1) @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()
    return out, np.stack(ws, axis=1)


_rng = np.random.default_rng(3)
with tinytorch.no_grad():                                  # non-zero biases, to test them
    _mha.in_proj_bias.copy_(Tensor(_rng.standard_normal(36)))
_xq, _xkv = _rng.standard_normal((2, 4, 12)), _rng.standard_normal((2, 6, 12))
_kpm = np.zeros((2, 6), dtype=bool)
_kpm[1, 4:] = True                                         # sequence 1: last two keys are padding
_out, _wts = _mha(Tensor(_xq), Tensor(_xkv), Tensor(_xkv), key_padding_mask=Tensor(_kpm))
_ref_out, _ref_w = _reference_mha(_mha, _xq, _xkv, ~_kpm[:, None, :])
assert_equal(_out.shape, (2, 4, 12), "output shape (N, L, E)")
assert_close(_out.numpy(), _ref_out, rtol=1e-10, atol=1e-12, what="output vs the per-head loop (padding mask)")
assert_close(_wts.numpy(), _ref_w.mean(1), rtol=1e-10, atol=1e-12, what="weights averaged over the heads")
assert_equal(_wts.numpy()[1, :, 4:], np.zeros((4, 2)), "padding keys get weight 0")
_, _wh = _mha(Tensor(_xq), Tensor(_xkv), Tensor(_xkv), key_padding_mask=_kpm, average_attn_weights=False)
assert_close(_wh.numpy(), _ref_w, rtol=1e-10, atol=1e-12, what="per-head weights (N, H, L, S)")
_o2, _w2 = _mha(Tensor(_xq), Tensor(_xq), Tensor(_xq), attn_mask=~causal_mask(4).numpy(), need_weights=False)
check(_w2 is None, "need_weights=False returns None for the weights", got=_w2)
assert_close(_o2.numpy(), _reference_mha(_mha, _xq, _xq, np.tril(np.ones((4, 4), bool)))[0], rtol=1e-10,
             what="self-attention with a causal attn_mask (True = forbidden)")
_o3, _ = _mha(Tensor(_xq), Tensor(_xq), Tensor(_xq), is_causal=True)
assert_close(_o3.numpy(), _o2.numpy(), rtol=1e-12, what="is_causal=True equals the explicit causal attn_mask")
_phm = _rng.random((2 * 3, 4, 6)) < 0.3                    # per-head attn_mask, True = forbidden
_phm[..., 0] = False
_o4, _ = _mha(Tensor(_xq), Tensor(_xkv), Tensor(_xkv), attn_mask=_phm)
assert_close(_o4.numpy(), _reference_mha(_mha, _xq, _xkv, ~_phm.reshape(2, 3, 4, 6).swapaxes(0, 1))[0],
             rtol=1e-10, what="a per-head (N·H, L, S) attn_mask")
with preserved_state():
    tinytorch.manual_seed(4)
    _drop = MultiheadAttention(12, 3, dropout=0.5, dtype=tinytorch.float64).eval()
    _e1, _e2 = (_drop(Tensor(_xq), Tensor(_xq), Tensor(_xq))[0].numpy() for _ in range(2))
    assert_equal(_e1, _e2, "eval mode: no dropout, two calls agree")
    _otrain, _wtrain = _drop.train()(Tensor(_xq), Tensor(_xq), Tensor(_xq), average_attn_weights=False)
    check(np.mean(_wtrain.numpy() == 0) > 0.3, "training with dropout=0.5: the weights returned are the ones "
          "the values were averaged with, after dropout (about half of them 0), as in PyTorch",
          got=f"{np.mean(_wtrain.numpy() == 0):.0%} zeros")
    _W, _b = _drop.in_proj_weight.numpy(), _drop.in_proj_bias.numpy()
    _V = (_xq @ _W[24:].T + _b[24:]).reshape(2, 4, 3, 4).swapaxes(1, 2)   # the heads' values, by hand
    _from_returned = (_wtrain.numpy() @ _V).swapaxes(1, 2).reshape(2, 4, 12) @ _drop.out_proj.weight.numpy().T \
        + _drop.out_proj.bias.numpy()
    assert_close(_otrain.numpy(), _from_returned, rtol=1e-10, atol=1e-12,
                 what="training with dropout: the output against out_proj(the returned per-head weights @ V) "
                      "(one dropout draw, used for both)")
    _small = MultiheadAttention(4, 2, dtype=tinytorch.float64)
_xs = Tensor(_rng.standard_normal((1, 3, 4)), requires_grad=True)
check(gradcheck(lambda x, w: _small(x, x, x, is_causal=True)[0], [_xs, _small.in_proj_weight]),
      "gradcheck of causal self-attention (input and in_proj_weight)")
print("✓ MultiheadAttention; output[0, 0, :4] =", _out.numpy()[0, 0, :4].round(4))

# %% [markdown]
# ## 6. Causality, checked
#
# A causal model must never let position $i$ depend on a later position $j > i$. Two ways
# to check it on a layer with random weights: change the last tokens and verify that the
# earlier outputs do not move, and verify that the gradient of an early output with respect
# to later inputs is exactly zero.

# %%
tinytorch.manual_seed(1)
_layer = MultiheadAttention(16, 4, dtype=tinytorch.float64)
_x = np.random.default_rng(4).standard_normal((1, 8, 16))
_x2 = _x.copy()
_x2[0, 5:] = 100.0 * np.random.default_rng(5).standard_normal((3, 16))   # rewrite tokens 5, 6, 7
_y1 = _layer(Tensor(_x), Tensor(_x), Tensor(_x), is_causal=True)[0].numpy()
_y2 = _layer(Tensor(_x2), Tensor(_x2), Tensor(_x2), is_causal=True)[0].numpy()
print("max change of outputs 0..4:", np.abs(_y1[0, :5] - _y2[0, :5]).max(),
      "| outputs 5..7:", np.abs(_y1[0, 5:] - _y2[0, 5:]).max().round(2))
_xt = Tensor(_x, requires_grad=True)
_layer(_xt, _xt, _xt, is_causal=True)[0][0, 3].sum().backward()
print("|d out[3] / d x[j]| per position j:", np.abs(_xt.grad.numpy()[0]).sum(-1).round(3))
assert_equal(_y2[0, :5], _y1[0, :5], "outputs 0..4 after rewriting tokens 5..7")
assert_equal(_xt.grad.numpy()[0, 4:], np.zeros((4, 16)), "d out[3] / d x[j] for the later tokens j = 4..7")

# %% [markdown]
# Exactly zero, not "small": the masked weights are exact zeros, so no arithmetic path
# connects a future token to the past.
#
# ### A head that learns where to look
#
# Every head so far had its weights set by hand or at random. Now train one: token and
# position embeddings (module 11), your `MultiheadAttention` with one causal head, and a
# `Linear` to the vocabulary, taught to output at each position the token that stood
# **three positions earlier**. The tokens are random, so nothing but that earlier token
# predicts the answer; nothing tells the head where to look, the loss only says whether
# the output was right.
#
# **Predict first**, in words: where will the trained head's weights be large on one
# sequence (which cells of the $T \times T$ map)? Then the same model is trained
# **without** the position embeddings (tokens only): will it learn the task, and what
# will its weights look like?

# %%
predicted_pattern = None            # your words: where the trained head looks
predicted_without_positions = None  # your words: does it learn, and what do its weights look like?

# %%
from tinytorch import nn  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402

_V, _TT, _E, _BACK = 16, 12, 16, 3  # vocabulary, sequence length, width, how far back the answer stands


class _OneHead(nn.Module):
    """Embeddings, one causal head of your MultiheadAttention, a Linear to the vocabulary."""

    def __init__(self, positions):
        super().__init__()
        self.tok = nn.Embedding(_V, _E)
        self.pos = nn.Embedding(_TT, _E) if positions else None
        self.attn = MultiheadAttention(_E, 1, batch_first=True)
        self.out = nn.Linear(_E, _V)

    def forward(self, x):
        h = self.tok(x) if self.pos is None else self.tok(x) + self.pos(tinytorch.arange(x.shape[1]))
        a, w = self.attn(h, h, h, is_causal=True, need_weights=True)
        return self.out(a), w


def _train_one_head(positions, steps=300):
    """Loss per step, and the trained model, on random sequences: the target at t is x[t - 3]."""
    tinytorch.manual_seed(0)
    model, rng, losses = _OneHead(positions), np.random.default_rng(0), []
    opt = Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        x = rng.integers(0, _V, (64, _TT))
        logits, _ = model(Tensor(x))
        loss = nn.functional.cross_entropy(logits[:, _BACK:].reshape(-1, _V), Tensor(x[:, :-_BACK].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


_seq = np.random.default_rng(99).integers(0, _V, (1, _TT))
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), gridspec_kw={"wspace": 0.35})
_runs = {}
for _col, _positions in enumerate((True, False)):
    _losses, _model = _train_one_head(_positions)
    with tinytorch.no_grad():
        _w = _model(Tensor(_seq))[1].numpy()[0]
    _runs[_positions] = (_losses, _w)
    _title = "with position embeddings" if _positions else "tokens only"
    axes[0].plot(_losses, label=_title)
    axes[_col + 1].imshow(_w, cmap="Blues", vmin=0, vmax=1)
    axes[_col + 1].set_title(f"trained head, {_title}", fontsize=10)
    axes[_col + 1].set_xlabel("key position (attended to)")
    axes[_col + 1].set_ylabel("query position")
axes[0].axhline(np.log(_V), color="gray", ls=":", lw=1, label=f"guessing: ln {_V}")
axes[0].set_xlabel("training step")
axes[0].set_ylabel("cross-entropy")
axes[0].set_yscale("log")
axes[0].legend(fontsize=8)
plt.show()
_on_target = np.mean([_runs[True][1][t, t - _BACK] for t in range(_BACK, _TT)])
print(f"final loss: {_runs[True][0][-1]:.4f} with positions, {_runs[False][0][-1]:.4f} tokens only "
      f"(guessing: {np.log(_V):.2f}); with positions, rows {_BACK}..{_TT - 1} put {_on_target:.0%} of their "
      f"weight on the key {_BACK} back")
print("your predictions:", predicted_pattern, "|", predicted_without_positions)
check(_runs[True][0][-1] < 0.05 and _on_target > 0.9, "with positions, your attention layer learns the task and its "
      "head looks 3 back (if this fails while the checks above passed, look at MultiheadAttention's backward path)",
      got=f"final loss {_runs[True][0][-1]:.4f}, {_on_target:.0%} of the weight 3 back")

# %% [markdown]
# <details><summary>What the maps show (open after comparing with your predictions)</summary>
#
# With positions, the head finds the band three below the diagonal on its own: each row
# from 3 on puts nearly all its weight on the key three back, and the loss falls to almost
# zero. Rows 0 to 2 have no such key and are never trained (their outputs are not in the
# loss), so they look anywhere. Tokens only, the head sees a bag of keys, not a sequence: a
# score $q_i \cdot k_j$ depends on the two tokens, never on where they stand, so no
# setting of the weights can single out "three back". The loss stalls far above the first
# model's; it sits below guessing only because the causal mask leaks a little order (row 3
# sees four keys, one of which is the answer). This is why module 11's positions exist, and
# why module 13 adds them before the first block.
# </details>
#
# ## 7. Systems look: the $T \times T$ matrix
#
# For one head with sequence length $T$ and head size $d$:
#
# - **FLOPs.** $Q K^\top$ is $T \times d$ times $d \times T$: $2 T^2 d$ FLOPs; $A V$ is
#   another $2 T^2 d$. So $4 T^2 d$ per head, $4 T^2 E$ for all heads — quadratic in $T$,
#   against the projections' $8 T E^2$ (four $E \times E$ matmuls), which are linear in $T$.
#   Attention dominates once $T > 2E$.
# - **Memory.** The scores and the weights are $T \times T$ per head and per sequence, and
#   training keeps them for the backward pass. At $T = 8192$ one head's weights in float32
#   are 256 MiB.
#
# Measured below: peak memory of one forward pass of `scaled_dot_product_attention`
# (numpy's allocations are visible to `tracemalloc`), and its median time, for one head with
# $d = 64$ and $T$ from 128 to 2048.
#
# **Predict first.** From $T = 1024$ to $T = 2048$, by what factor do you expect the peak
# memory to grow, and by what factor the time? And how many MiB is one $2048 \times 2048$
# float32 matrix?

# %%
predicted_memory_factor = None  # your number: peak(T=2048) / peak(T=1024)
predicted_time_factor = None    # your number: time(T=2048) / time(T=1024)
predicted_mib_one_matrix = None  # your number: MiB of one 2048 x 2048 float32 matrix

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_d = 64
_Ts = [128, 256, 512, 1024, 2048]
_peak, _times = [], []
for _T in _Ts:
    _q, _k, _v = (tinytorch.randn(1, _T, _d) for _ in range(3))
    tracemalloc.start()
    scaled_dot_product_attention(_q, _k, _v, is_causal=True)
    _peak.append(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
    _times.append(median_time(lambda: scaled_dot_product_attention(_q, _k, _v, is_causal=True),
                              repeats=5 if _T <= 512 else 3))
    print(f"T = {_T:>5}: peak {_peak[-1] / 2**20:7.1f} MiB  (= {_peak[-1] / (4 * _T * _T):4.1f} × T² floats), "
          f"time {_times[-1] * 1e3:7.1f} ms, {4 * _T * _T * _d / _times[-1] / 1e9:5.2f} GFLOP/s on the matmuls")

for _label, _pred, _meas in [("peak memory factor, T 1024 -> 2048", predicted_memory_factor, _peak[-1] / _peak[-2]),
                             ("time factor, T 1024 -> 2048", predicted_time_factor, _times[-1] / _times[-2]),
                             ("MiB of one 2048 x 2048 float32 matrix", predicted_mib_one_matrix, 4 * 2048**2 / 2**20)]:
    print(f"{_label}: measured {_meas:.2f}; "
          + ("no prediction written" if _pred is None else f"you predicted {_pred}"))

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
axes[0].loglog(_Ts, np.array(_peak) / 2**20, "o-", label="measured peak")
axes[0].loglog(_Ts, 4 * np.array(_Ts, float) ** 2 / 2**20, "k:", label="one T×T float32 matrix")
axes[0].set_xlabel("sequence length T")
axes[0].set_ylabel("MiB")
axes[0].set_title("memory grows as T² (slope 2)")
axes[0].legend()
axes[1].loglog(_Ts, np.array(_times) * 1e3, "o-", label="measured")
axes[1].loglog(_Ts, _times[-1] * 1e3 * (np.array(_Ts, float) / _Ts[-1]) ** 2, "k:", label="∝ T²")
axes[1].set_xlabel("sequence length T")
axes[1].set_ylabel("ms per forward")
axes[1].set_title("time grows as T² (4·T²·d FLOPs)")
axes[1].legend()
for ax in axes:  # one plain label per measured T (log-scale minor labels would collide)
    ax.set_xticks(_Ts, [str(t) for t in _Ts])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
fig.tight_layout()
plt.show()

# %% [markdown]
# Expect the memory factor close to 4 (the $T \times T$ arrays dominate the peak), and
# the peak itself a small multiple of one $T \times T$ matrix: our composite creates the
# scores, the masked scores, the exponentials and the weights as separate arrays (a fused
# kernel would reuse one buffer). The time factor tends towards 4 as well, but it is noisier:
# at small $T$ fixed per-call overheads hide the $T^2$, and caches (a $T \times T$ matrix
# falls out of them as $T$ grows), BLAS threads and other work on the machine move the
# figure up or down. This quadratic wall is why context lengths were long stuck at a few
# thousand tokens.
#
# ### Never storing the $T \times T$ matrix: the online softmax
#
# Row $i$ of the output needs all of row $i$'s scores, but not all at once. Write the
# output of one query as a fraction,
#
# $$\text{out} = \frac{\sum_j e^{s_j}\, v_j}{\sum_j e^{s_j}} ,$$
#
# and notice that the top and the bottom are both sums over the keys: sums can be built up
# a **block** of `block` keys at a time, keeping per query only a few running quantities,
# while only an $L \times \text{block}$ piece of the scores ever exists. Design that state
# and its update. Two constraints decide the design: a score of 1000 must not overflow
# (as written above, $e^{1000}$ does; module 02's softmax met the same problem in one
# pass), and the state after a block must be exactly what it would be had all the keys
# so far come in one block, so that the last division gives the softmax to rounding,
# whichever block held the largest score.
#
# Write `online_softmax_attention(q, k, v, block)` on numpy arrays: one head, no mask, the
# scale $1/\sqrt{d}$. The check compares it with your `scaled_dot_product_attention` for
# blocks of 1 key, of sizes that do not divide $S$ and of more than $S$ keys; on scores that
# grow along the keys (a new maximum in every block) and on scores in the thousands; and it
# measures the peak memory, in which no $L \times S$ array may appear.
#
# <details><summary>Hint 1</summary>
#
# Module 02's one-pass fix measured every exponent from the row's largest score $m$. Here
# the largest score so far can grow when a block arrives, to $m'$. Write one old term
# relative to the new maximum: $e^{s_j - m'} = e^{s_j - m}\,e^{\,?}$. What does that say
# about each running sum you kept?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Before the first block, what are the running maximum and the two sums? What does your
# factor give at the first block, and why is that harmless? numpy's `maximum` and `exp`
# handle $-\infty$ as you would hope.
# </details>
#
# <details><summary>The approach</summary>
#
# Keep an invariant: after each block, the state describes every key seen so far exactly,
# with every exponent measured from the largest score seen so far. A new block can break it
# only by raising that maximum; then the old sums must be brought to the new reference
# before the block's own terms join them. The division waits until every key has been
# seen.
# </details>

# %% nbgrader={"grade": false, "grade_id": "online-softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def online_softmax_attention(q, k, v, block=64):
    """softmax(q k^T / sqrt(d)) v, visiting the keys `block` at a time.

    Contract: q (L, d), k (S, d), v (S, dv) numpy floating arrays, block >= 1. Returns the
    (L, dv) array of one head's attention output without a mask, equal to the full softmax
    to rounding for any scores (also in the thousands), while no array of L x S scores
    exists: only (L, block) pieces, one at a time.
    """
    L, d = q.shape
    # Idea: a running state per query, corrected whenever the largest score grows.
    ### BEGIN SOLUTION
    m = np.full((L, 1), -np.inf)
    ell = np.zeros((L, 1))
    o = np.zeros((L, v.shape[1]))
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T / np.sqrt(d)          # (L, block): the only scores alive
        m_new = np.maximum(m, s.max(axis=1, keepdims=True))
        p = np.exp(s - m_new)
        ell = ell * np.exp(m - m_new) + p.sum(axis=1, keepdims=True)
        o = o * np.exp(m - m_new) + p @ v[start:start + block]
        m = m_new
    return o / ell
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-online-softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _full_attention(q, k, v):
    return scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v)).numpy()


_rng = np.random.default_rng(6)
_q, _k, _v = _rng.standard_normal((40, 16)), _rng.standard_normal((48, 16)), _rng.standard_normal((48, 5))
for _blk in (48, 1, 7, 100):
    assert_close(online_softmax_attention(_q, _k, _v, block=_blk), _full_attention(_q, _k, _v), rtol=1e-9,
                 atol=1e-12, what=f"online softmax with blocks of {_blk} keys vs full attention (S = 48)")
_qg = np.abs(_q)
_kg = np.linspace(0.0, 3.0, 48)[:, None] * np.ones((48, 16))  # scores grow along the keys
assert_close(online_softmax_attention(_qg, _kg, _v, block=5), _full_attention(_qg, _kg, _v), rtol=1e-9,
             atol=1e-12, what="scores growing along the keys: a new maximum in every block")
_qbig = _q * 600.0                                         # scores in the thousands
_big = online_softmax_attention(_qbig, _k, _v, block=7)
check(np.isfinite(_big).all(), "scores in the thousands give finite outputs (no overflow)",
      got=f"{np.isfinite(_big).mean():.0%} finite")
assert_close(_big, _full_attention(_qbig, _k, _v), rtol=1e-9, atol=1e-12, what="scores in the thousands")
_qneg, _kneg = np.abs(_q) * 1500.0, -np.abs(_k)             # every score about a thousand below 0
_low = online_softmax_attention(_qneg, _kneg, _v, block=7)
check(np.isfinite(_low).all(), "scores all far below 0 give finite outputs (a running maximum that starts at 0, "
      "not at -inf, never comes down to them, and every exponential underflows to 0)",
      got=f"{np.isfinite(_low).mean():.0%} finite")
assert_close(_low, _full_attention(_qneg, _kneg, _v), rtol=1e-9, atol=1e-12, what="scores all far below 0")
_qm, _km, _vm = _rng.standard_normal((512, 16)), _rng.standard_normal((512, 16)), _rng.standard_normal((512, 16))
tracemalloc.start()
online_softmax_attention(_qm, _km, _vm, block=32)
_online_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
check(_online_peak < 512 * 512 * 8 / 2, "L = S = 512, blocks of 32: the peak memory stays under half of one "
      "512 x 512 float64 score matrix (1 MiB)", got=f"{_online_peak / 2**20:.2f} MiB")
print(f"✓ online_softmax_attention; peak {_online_peak / 2**10:.0f} KiB for L = S = 512 "
      f"(one 512 x 512 float64 matrix: {512 * 512 * 8 / 2**10:.0f} KiB)")

# %% [markdown]
# <details><summary>The recurrence you should have found (open it once your check passes)</summary>
#
# $$m' = \max(m, \max s), \quad \ell' = \ell\, e^{m - m'} + \textstyle\sum e^{s - m'}, \quad
#   o' = o\, e^{m - m'} + e^{s - m'}\, V_{\text{block}}, \qquad \text{out} = o / \ell.$$
#
# The factor $e^{m - m'} \le 1$ re-expresses everything accumulated with the old maximum
# relative to the new one; at the first block it is $e^{-\infty} = 0$, which multiplies
# sums that are 0 anyway. This is the core of **FlashAttention**, which also tiles the
# queries and keeps the blocks in the GPU's fast on-chip memory; its backward recomputes the
# scores block by block from $m$ and $\ell$ instead of storing the weights.
# </details>

# %% [markdown]
# ## 8. What PyTorch does
#
# - `torch.nn.functional.scaled_dot_product_attention` picks a **backend** per call: the
#   **FlashAttention** kernels (tiled, online softmax, never materialising $T \times T$; the
#   backward recomputes the scores block by block instead of storing them, trading FLOPs for
#   memory), the **memory-efficient** kernel (xFormers' similar idea, more shapes and
#   masks), cuDNN's fused attention, or the **math** fallback — which is what you wrote. All
#   give the same numbers up to rounding; the fused ones are several times faster because
#   attention at moderate $d$ is limited by memory traffic, not FLOPs.
# - With `is_causal=True` the fused kernels also **skip** the blocks above the diagonal:
#   half the FLOPs. An explicit boolean mask is more general but prevents some kernels.
# - `nn.MultiheadAttention` packs $W_q, W_k, W_v$ into `in_proj_weight` and, when query, key
#   and value are the same tensor, does one `(3E × E)` matmul instead of three. It has extras
#   we skipped: `kdim`/`vdim`, `add_bias_kv`, `add_zero_attn`. Its default is
#   `batch_first=False`; ours is `True`. Its fully masked rows give NaN (its own softmax
#   path); SDPA gives zeros since 2.5, as ours does.
# - Long-context models go further: **grouped-query attention** (several query heads share
#   one key/value head, shrinking the KV cache of module 18), sliding-window attention, and
#   RoPE positions applied to $q$ and $k$ inside attention (module 11's recap).
#
# If PyTorch is installed, compare directly (skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    _rng = np.random.default_rng(7)
    _xq = _rng.standard_normal((2, 5, 8))
    _tm = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    _ours = MultiheadAttention(8, 2, dtype=tinytorch.float64)
    _ours.load_state_dict({n: Tensor(p.detach().numpy()) for n, p in _tm.state_dict().items()})
    _mask = ~causal_mask(5).numpy()                       # MHA convention: True = not allowed
    _o, _w = _ours(Tensor(_xq), Tensor(_xq), Tensor(_xq), attn_mask=_mask)
    _to, _tw = _tm(*(torch.from_numpy(_xq),) * 3, attn_mask=torch.from_numpy(_mask))
    print("MultiheadAttention max |difference| vs PyTorch: output",
          np.abs(_o.numpy() - _to.detach().numpy()).max(), "weights", np.abs(_w.numpy() - _tw.detach().numpy()).max())
    _q, _k, _v = (_rng.standard_normal((4, 256, 64)).astype(np.float32) for _ in range(3))
    _tq, _tk, _tv = (torch.from_numpy(a) for a in (_q, _k, _v))
    _torch_s = median_time(lambda: torch.nn.functional.scaled_dot_product_attention(_tq, _tk, _tv, is_causal=True))
    _Q, _K, _V = Tensor(_q), Tensor(_k), Tensor(_v)
    _ours_s = median_time(lambda: scaled_dot_product_attention(_Q, _K, _V, is_causal=True))
    print(f"causal SDPA, 4 heads, T = 256, d = 64: PyTorch {_torch_s * 1e3:.2f} ms, ours {_ours_s * 1e3:.2f} ms")

# %% [markdown]
# ## 9. Recap
#
# - Attention is a **soft dictionary lookup**: $\operatorname{softmax}(Q K^\top / \sqrt{E})\,V$.
#   Scaling by $1/\sqrt{E}$ keeps the scores at unit variance, so the softmax does not
#   saturate as the width grows (measured).
# - **Masks** set forbidden scores to $-\infty$ before the softmax: causal (lower triangle)
#   and padding (columns of padding keys). In `scaled_dot_product_attention` a boolean mask
#   is True where attention is allowed; in `nn.MultiheadAttention` True means *forbidden*.
# - A query with nothing to attend to gets **zeros** (and a zero gradient) — we find the dead
#   rows before the softmax instead of cleaning NaNs after it.
# - **Multi-head** attention splits $E$ into $H$ heads of $d = E/H$ with a reshape and a
#   transpose — views, no copies — and merges them back with one copy; the parameters are
#   PyTorch's (`in_proj_weight`, `in_proj_bias`, `out_proj`), so weights transfer.
# - Causality holds exactly: a later token changes nothing before it, and its gradient there
#   is exactly zero.
# - Cost: $4 T^2 d$ FLOPs per head and $T \times T$ memory per head — measured quadratic.
#   FlashAttention's online softmax computes the same result without storing the matrix.
# - Everything here is composed of ops autograd already knows: no new backward rule.
#
# Run `tito test module 12` to check your work against the full test suite.

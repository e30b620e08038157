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
# # Module 11 — Embeddings: from token ids to vectors, and where they sit
#
# Module 10 turned text into integers. A neural network cannot do much with the integer
# 4711 as a number: token 4711 is not "a bit more" than token 4710. What it needs is a
# **vector** per token, one that training is free to move (module 13's GPT trains these
# tables; tokens used alike end up with similar vectors). The layer that holds those vectors is the **embedding**: a table with
# one learned row per token id, and a lookup. In this module you build it — forward *and*
# backward — and the two standard ways to tell a model **where** in the sequence a token
# stands: fixed sinusoidal positions and learned positions.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain why a lookup `W[ids]` is exactly a **one-hot vector times a matrix**, and why
#   nobody computes it that way;
# - write the embedding op as a **gather** (forward) and a **scatter-add** (backward), and
#   explain why the backward must **accumulate** when a token appears twice in a batch —
#   and why `grad[ids] += g` silently gets that wrong;
# - build `Embedding` with PyTorch's `padding_idx` (a row that stays zero and never learns);
# - build the **sinusoidal** position table of "Attention Is All You Need", look at it, and
#   see why the dot product of two positions depends only on their distance;
# - build **learned** positions, and know when a model runs out of them;
# - measure what embeddings cost: table memory for real vocabularies, how **sparse** the
#   gradient is, and the time of a gather against a one-hot matrix product.
#
# ## Prerequisites
#
# - Module 01: `Tensor`, int64 tensors, views and slicing, the dispatch point `apply`.
# - Module 03: `Module`, `Parameter`, buffers, `nn.init.normal_`.
# - Module 06: `backward_rule` (how a new op gets its gradient) and `gradcheck`.
# - Module 10 helps to know where token ids come from, but nothing here needs it.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/nn/embedding.py` when you run
# `tito export 11` (or `tito test module 11`). The function `embedding` is re-exported as
# `tinytorch.nn.functional.embedding`, the layers as `tinytorch.nn.Embedding`,
# `tinytorch.nn.SinusoidalPositionalEncoding` and `tinytorch.nn.LearnedPositionalEmbedding`.
# Cells with `# YOUR CODE HERE` are yours; the **check** cell after each one prints a ✓ or
# says what is wrong. The provided code is part of the lesson: read it.

# %%
#| default_exp nn.embedding

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

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: a lookup is a one-hot matrix product
#
# Give every token id $i \in \{0, \dots, V-1\}$ of a vocabulary of size $V$ a row
# $W_i \in \mathbb{R}^D$ of a table $W \in \mathbb{R}^{V \times D}$. Write token $i$ as a
# **one-hot** vector $e_i \in \{0, 1\}^V$ (a 1 at position $i$, zeros elsewhere). Then
#
# $$e_i^\top W = W_i ,$$
#
# because the product sums the rows of $W$ weighted by the entries of $e_i$, and only row
# $i$ has a non-zero weight. A batch of $n$ tokens is an $n \times V$ one-hot matrix $E$,
# and $E W$ stacks the $n$ rows. So an embedding layer *is* a `Linear` layer without bias
# applied to one-hot inputs — that is the honest mathematical view, and it tells us how to
# differentiate it (section 3).
#
# But look at the cost. $E W$ multiplies $n \cdot V \cdot D$ numbers, and all but
# $n \cdot D$ of the products are multiplications by zero. With GPT-2's $V = 50{,}257$,
# that is 50,257 times more arithmetic than needed, and the one-hot matrix alone is
# $n \times V$ floats. The lookup `W[ids]` — a **gather** of $n$ rows — gives the same
# numbers by copying $n \cdot D$ of them. The picture shows both for a tiny table.

# %%
_V, _D = 6, 4
_W = np.round(np.random.default_rng(0).standard_normal((_V, _D)), 1)
_ids = np.array([3, 0, 3])
_E = np.eye(_V)[_ids]                      # (3, 6) one-hot rows

fig, axes = plt.subplots(1, 4, figsize=(12, 3.2), gridspec_kw={"width_ratios": [6, 4, 4, 4]})
for ax, mat, title in [(axes[0], _E, "one-hot E  (ids 3, 0, 3)"), (axes[1], _W, "table W  (V=6, D=4)"),
                       (axes[2], _E @ _W, "E @ W"), (axes[3], _W[_ids], "W[ids]  (gather)")]:
    ax.imshow(mat, cmap="coolwarm", vmin=-2, vmax=2)
    for (r, c), v in np.ndenumerate(mat):
        ax.text(c, r, f"{v:g}", ha="center", va="center", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_xticks(range(mat.shape[1]) if mat is _E else [])
    ax.set_yticks(range(mat.shape[0]))
axes[0].set_xlabel("token id (column)", fontsize=9)
for r in _ids:
    axes[1].add_patch(plt.Rectangle((-0.5, r - 0.5), _D, 1, fill=False, lw=2.5, ec="black"))
fig.suptitle("a one-hot row selects one row of W: E @ W == W[ids]", fontsize=11)
fig.tight_layout()
plt.show()
assert np.array_equal(_E @ _W, _W[_ids])

# %% [markdown]
# The package file starts here: its imports and its public names.

# %%
#| export
"""Embeddings (module 11): the embedding op (gather forward, scatter-add backward), the
Embedding layer, and sinusoidal and learned positional encodings."""
import math

import numpy as np

from tinytorch._tensor import Tensor, apply, arange, float32, int64, stack, zeros
from tinytorch.autograd import backward_rule, no_grad
from tinytorch.nn.init import normal_
from tinytorch.nn.layers import Module, Parameter

__all__ = [
    "embedding", "Embedding",
    "sinusoidal_positions", "SinusoidalPositionalEncoding", "PositionalEncoding",
    "LearnedPositionalEmbedding",
]

# %% [markdown]
# ## 2. The forward pass: a gather
#
# The embedding op takes an integer tensor of ids of **any** shape — one sentence `(T,)`,
# a batch `(B, T)`, a single id `()` — and replaces every id by its row, so the output has
# shape `ids.shape + (D,)`. numpy can read many rows of an array in one indexing
# operation, and the result is a new array (a copy, not a view of the table).
#
# As in every module since 01, the op goes through `apply`. Its only differentiable input is
# the table `weight`; the ids are data (you cannot differentiate with respect to an
# integer), so they travel as an **attribute**, `indices` — a numpy int64 array the backward
# rule will need — together with `padding_idx` (section 3). Write the forward.
#
# <details><summary>Hint 1</summary>
#
# Module 01's advanced indexing: what does indexing a 2-D array with an integer *array*
# (rather than an integer) on its first axis return, and what shape does it have?
# </details>
#
# <details><summary>The approach</summary>
#
# What does the output's shape tell you about the operation: which kind of indexing keeps
# the shape of an index array and appends the row? Does the padding row change anything
# in the forward, or only later?
# </details>

# %% nbgrader={"grade": false, "grade_id": "embedding-forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _embedding_forward(weight, *, indices, padding_idx):
    """Forward of the embedding op: the rows `indices` of the table. Tensor in, numpy out.

    weight: the (V, D) table (a Tensor); indices: an int64 numpy array of any shape, already
    checked to lie in 0..V-1. Returns a new numpy array of shape indices.shape + (D,).
    """
    # Idea: the one-hot product of section 1, without the zeros.
    ### BEGIN SOLUTION
    return np.take(weight.numpy(), indices, axis=0)
    ### END SOLUTION


# %% [markdown]
# **Checking the ids.** An index out of range is the commonest embedding bug: a tokenizer
# with more ids than the table has rows, or a padding id of −1. numpy would happily accept
# −1 as "the last row" and silently read the wrong vector, and an id past the end would
# fail later, inside the op's numpy indexing, far from the code that chose the ids (and
# not at all on a device whose gather does not check). So the op checks its ids first, as
# PyTorch does, before anything is dispatched: write `_as_indices(input, num_embeddings)`.
#
# <details><summary>Hint 1</summary>
#
# The ids may arrive as a Tensor, a numpy array or a nested list. Get a numpy array first;
# its `dtype.kind` tells integers (`"i"`, `"u"`) from floats.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A boolean mask of the bad ids, computed on the whole array at once, tells you both
# whether there is a bad id and which one to name. Which two conditions make an id bad?
# </details>
#
# <details><summary>The approach</summary>
#
# Think about who keeps the result: the graph node stores it for the backward, so it must
# not share memory with an array the caller may change later, and it needs one fixed
# integer type. Floats are a type error, not a range error, so settle the type before you
# look at the values. Recall that numpy reads −1 as the last row: only 0 to V − 1 are
# valid, and the message should name the first bad id and the table's size.
# </details>

# %% nbgrader={"grade": false, "grade_id": "embedding-indices", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _as_indices(input, num_embeddings):
    """The ids `input` (Tensor, array or list, any shape) as a fresh int64 numpy array.

    TypeError when they are not integers (bool is not: PyTorch refuses it too; the message
    says integer ids are needed).
    IndexError when an id is negative or >= num_embeddings: the message names that id and
    the number of rows of the table."""
    # Idea: valid ids are exactly 0 .. num_embeddings - 1; negative ids are not "from the end".
    ### BEGIN SOLUTION
    arr = input.numpy() if isinstance(input, Tensor) else np.asarray(input)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"embedding: the indices must be integers (an int64 tensor of token ids), "
                        f"got dtype {arr.dtype}; convert them with .long()")
    arr = np.array(arr, dtype=np.int64, copy=True)
    bad = (arr < 0) | (arr >= num_embeddings)
    if bad.any():
        first = int(arr[bad].flat[0])
        raise IndexError(f"embedding: index {first} is out of range for a table of "
                         f"{num_embeddings} rows (valid ids are 0..{num_embeddings - 1})")
    return arr
    ### END SOLUTION


# %% [markdown]
# The provided wrapper `embedding(input, weight, padding_idx=None)` (PyTorch's
# `torch.nn.functional.embedding`) checks the table, runs your `_as_indices`, normalises
# `padding_idx` (negative counts from the end, like Python lists) and dispatches your
# forward as the op `"embedding"`.

# %%
#| export
def _padding_index(padding_idx, num_embeddings):
    """None, or padding_idx as a row number in 0..num_embeddings-1 (negative counts from the end)."""
    if padding_idx is None:
        return None
    if not isinstance(padding_idx, (int, np.integer)) or isinstance(padding_idx, bool):
        raise TypeError(f"padding_idx must be an int or None, got {type(padding_idx).__name__}")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"padding_idx {padding_idx} must be within the table's {num_embeddings} rows")
    return int(padding_idx) % num_embeddings


def embedding(input, weight, padding_idx=None):
    """Look up the rows of `weight` (V, D) for the integer ids `input` (any shape); the result
    has shape input.shape + (D,) (torch.nn.functional.embedding). The row `padding_idx`, if
    given, receives no gradient."""
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise ValueError(f"embedding: weight must be a 2-D (num_embeddings, embedding_dim) Tensor, "
                         f"got {getattr(weight, 'shape', type(weight).__name__)}")
    if weight.dtype.kind != "f":
        raise TypeError(f"embedding: weight must be floating, got {weight.dtype}")
    num_embeddings = weight.shape[0]
    indices = _as_indices(input, num_embeddings)
    padding_idx = _padding_index(padding_idx, num_embeddings)
    return apply("embedding", _embedding_forward, weight, indices=indices, padding_idx=padding_idx)


# %% nbgrader={"grade": true, "grade_id": "test-embedding-forward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, assert_raises, check

_rng = np.random.default_rng(1)
_w = _rng.standard_normal((7, 3)).astype(np.float32)
_ids = np.array([[1, 6, 1], [0, 2, 5]])
_out = embedding(Tensor(_ids), Tensor(_w))
assert_equal((_out.shape, _out.dtype), ((2, 3, 3), tinytorch.float32), "ids (2, 3) -> (2, 3, D), float32")
assert_equal(_out.numpy(), _w[_ids], "row k of the output is row ids[k] of the table")
assert_equal(_out.numpy(), (np.eye(7)[_ids] @ _w).astype(np.float32), "the one-hot view gives the same numbers")
assert_equal(embedding(Tensor(4), Tensor(_w)).numpy(), _w[4], "a single id () -> one vector (D,)")
assert_equal(embedding(Tensor(np.array([], dtype=np.int64)), Tensor(_w)).shape, (0, 3), "no ids -> (0, D)")
_w_t = Tensor(_w.copy(), requires_grad=True)
_o = embedding(Tensor(_ids), _w_t)
check(_o.grad_fn.op == "embedding" and _o.grad_fn.inputs == (_w_t,), "one 'embedding' node, the table its only input",
      got=(_o.grad_fn.op, len(_o.grad_fn.inputs)), expected=("embedding", 1))
assert_equal(_o.grad_fn.attrs["indices"], _ids, "the node keeps the ids as its 'indices' attribute")
_o.numpy()[:] = 0.0
assert_equal(_w_t.numpy(), _w, "the output is a copy: writing to it leaves the table alone")
_w_pad = _w.copy()
assert_equal(embedding(Tensor([1]), Tensor(_w_pad), padding_idx=1).numpy(), _w_pad[[1]],
             "forward with padding_idx=1: the padding row is read like any other (only its gradient is special)")
_src = np.array([2, 3])
_kept = _as_indices(_src, 7)
_src[0] = 6
assert_equal((_kept.tolist(), _kept.dtype), ([2, 3], np.dtype(np.int64)), "_as_indices: a fresh int64 copy")
assert_equal(_as_indices(np.array([2, 3], dtype=np.int32), 7).dtype, np.dtype(np.int64),
             "_as_indices of int32 ids: int64 (one fixed type for the node)")
assert_equal(_as_indices(np.array([], dtype=np.int64), 7).shape, (0,), "_as_indices of no ids: an empty array")
assert_equal(_as_indices([[0, 6]], 7).shape, (1, 2), "_as_indices accepts nested lists")
_err = assert_raises(IndexError, _as_indices, [8, 12], 7, match="8", what="_as_indices([8, 12], 7): two bad ids")
check("12" not in str(_err), "the message names the first bad id (8), not the largest", got=str(_err))
assert_raises(IndexError, _as_indices, [3, 7], 7, match="7",
              what="_as_indices([3, 7], 7): id 7 in a 7-row table (valid ids are 0 to 6)")
assert_raises(IndexError, embedding, Tensor([3, 7]), Tensor(_w), match="7", what="id 7 in a 7-row table")
_err = assert_raises(IndexError, embedding, Tensor([[1, 2], [-1, 3]]), Tensor(_w), match="-1", what="id -1")
check("7" in str(_err), "the message names the table size", got=str(_err))
assert_raises(TypeError, embedding, Tensor([1.0, 2.0]), Tensor(_w), match="integer", what="float ids")
assert_raises(TypeError, _as_indices, np.array([True, False]), 7, what="bool ids (PyTorch refuses them too)")
print("✓ embedding forward is a gather; ids checked:", _out.numpy()[0, 0])

# %% [markdown]
# ## 3. The backward pass: a scatter-add that accumulates
#
# Take the one-hot view: $Y = E W$ with $E$ constant, and $\bar Y$ (shape $n \times D$) the
# upstream gradient. Derive the backward before you write it:
#
# 1. Module 06's matmul rule gives $\bar W$ in terms of $E$ and $\bar Y$. Which?
# 2. Write row $v$ of it as a sum over the positions $k$. Which terms survive, given that
#    row $k$ of $E$ is one-hot? Say it in words: row $v$ of the table's gradient is ...
# 3. What does a token that never occurred get? And one that occurred twice ("the cat saw
#    the dog": "the" twice)?
#
# <details><summary>Check your derivation</summary>
#
# $\bar W = E^\top \bar Y$, and row $v$ is $\sum_k E_{k v} \bar Y_k$: the **sum of the upstream
# gradients of every position that looked up token $v$**; zero for a token that never
# occurred. The backward mirrors the gather: a **scatter** of the rows of $\bar Y$ to the
# rows `ids`, where repeated ids **add**. Building $E$ to multiply would cost $n \times V$
# numbers for $n$ nonzeros.
# </details>
#
# The adding is a classic bug. numpy's `g[ids] += grad` looks right, but with repeated
# ids it is "read `g[ids]`, add, write back" — the second write of row 3 overwrites the
# first, so one occurrence's gradient is silently lost:

# %%
_g_wrong = np.zeros((6, 2))
_upstream = np.array([[1.0, 1.0], [10.0, 10.0], [100.0, 100.0]])
_g_wrong[np.array([3, 0, 3])] += _upstream
print("g[ids] += grad, row 3:", _g_wrong[3], " (should be 1 + 100 = 101)")

# %% [markdown]
# Your backward must add *every* occurrence. (PyTorch's CPU kernel gives each thread a range
# of the table's rows; each thread scans all the ids and adds those in its range, so no two
# threads write one row. numpy offers more than one way, see the hints.) And it must not
# build the one-hot matrix: for GPT-2's 50,257 rows and a batch of 8,192 tokens that is
# 3.3 GB of float64 zeros for one gradient. The check measures your backward's memory.
#
# One more rule, **`padding_idx`**. Batches of sentences of different lengths are padded to a
# common length with a special id (often 0). Those positions are not real tokens, so the
# padding row must not learn from them: its gradient is zero, whatever arrived.
#
# Write the backward rule: it receives module 06's `node` (with `node.inputs[0]`, the table,
# and `node.attrs["indices"]`, `node.attrs["padding_idx"]`) and `grad`, a numpy array of
# shape `indices.shape + (D,)`; it returns a one-element tuple, the table's gradient as a
# numpy array of shape `(V, D)`, in the dtype of `grad` (module 06's rules all speak numpy).
#
# <details><summary>Hint 1</summary>
#
# Any shape of ids is just a list of ids once flattened; the upstream gradient then becomes
# one row per id. Flatten both consistently.
# </details>
#
# <details><summary>Hint 2</summary>
#
# You need an in-place add that is applied once per index, repeats included, where
# `g[ids] += grad` is buffered (applied once per distinct index). numpy's ufuncs have a
# method for exactly that; the "ufunc methods" page of numpy's documentation lists them.
# (Counting per id with `np.bincount` and its `weights` is another route, one column at a
# time.)
# </details>
#
# <details><summary>The approach</summary>
#
# Does the shape of the ids matter to the gradient, or only which id each upstream row
# belongs to? What must a repeated id do that a plain indexed update does not? And the
# padding row: if you clear it, at which moment is the clearing safe from what comes after?
# </details>

# %% nbgrader={"grade": false, "grade_id": "embedding-backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("embedding")
def _embedding_backward(node, grad):
    """Gradient of the embedding op w.r.t. its table: the (V, D) array whose row v is the sum
    of the rows of `grad` at every position that looked up id v (zero for ids never looked up,
    and zero for the row padding_idx). Returns a one-element tuple."""
    weight = node.inputs[0]
    indices, padding_idx = node.attrs["indices"], node.attrs["padding_idx"]
    # Idea: the transpose of a gather is a scatter that adds.
    ### BEGIN SOLUTION
    ids = indices.reshape(-1)
    g = np.asarray(grad).reshape(ids.size, weight.shape[1])
    gw = np.zeros(weight.shape, dtype=g.dtype)
    np.add.at(gw, ids, g)
    if padding_idx is not None:
        gw[padding_idx] = 0
    return (gw,)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-embedding-backward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal, check

_rng = np.random.default_rng(2)
_wd = _rng.standard_normal((5, 3))
_ids = np.array([[1, 3, 1], [1, 0, 3]])                   # 1 three times, 3 twice, 2 and 4 never
_up = _rng.standard_normal((2, 3, 3))
_w_t = Tensor(_wd, requires_grad=True)
embedding(Tensor(_ids), _w_t).backward(Tensor(_up))
_expected = np.eye(5)[_ids].reshape(-1, 5).T @ _up.reshape(-1, 3)   # E^T @ grad
assert_close(_w_t.grad.numpy()[1], _up[0, 0] + _up[0, 2] + _up[1, 0], rtol=1e-12, atol=1e-12,
             what="row 1: the sum of the three upstream rows that looked up id 1")
assert_close(_w_t.grad.numpy(), _expected, rtol=1e-12, atol=1e-12, what="the whole gradient = E^T @ grad")
assert_equal(_w_t.grad.numpy()[[2, 4]], np.zeros((2, 3)), "rows never looked up get no gradient")
_w_t = Tensor(_wd, requires_grad=True)
embedding(Tensor(_ids), _w_t, padding_idx=1).backward(Tensor(_up))
assert_equal(_w_t.grad.numpy()[1], np.zeros(3), "the padding row (1) gets no gradient")
assert_close(_w_t.grad.numpy()[[0, 3]], _expected[[0, 3]], rtol=1e-12, atol=1e-12, what="the other rows unchanged")
_w_t = Tensor(_wd, requires_grad=True)
embedding(Tensor(np.array([[0, 2], [0, 0]])), _w_t, padding_idx=0).backward(Tensor(np.ones((2, 2, 3))))
assert_equal(_w_t.grad.numpy()[[0, 2]], np.array([[0.0] * 3, [1.0] * 3]),
             "padding_idx=0 (the commonest padding id, and falsy): row 0 gets no gradient, row 2 its one")
_V, _n = 20_000, 500                    # a one-hot (n, V) float64 matrix would be 80 MB
_big_w = Tensor(np.zeros((_V, 2)), requires_grad=True)
_node = embedding(Tensor(np.arange(_n) * 37 % _V), _big_w).grad_fn
tracemalloc.start()
_embedding_backward(_node, np.ones((_n, 2)))
_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
check(_peak < 4 * (_V + _n) * 2 * 8, f"the backward allocates about the gradient ({_V * 2 * 8 / 1e6:.2f} MB), "
      f"not a one-hot matrix ({_n * _V * 8 / 1e6:.0f} MB)", got=f"{_peak / 1e6:.2f} MB at the peak")
_w32 = Tensor(_wd.astype(np.float32), requires_grad=True)
(_g32,) = _embedding_backward(embedding(Tensor([0, 0]), _w32).grad_fn, np.ones((2, 3), dtype=np.float32))
assert_equal((_g32.dtype, _g32.shape), (np.dtype(np.float32), (5, 3)),
             "your rule's gradient for a float32 upstream gradient: dtype and shape")
check(gradcheck(lambda w: embedding(Tensor(_ids), w), [Tensor(_wd, requires_grad=True)]),
      "gradcheck of the embedding op")
check(gradcheck(lambda w: embedding(Tensor(_ids), w) * embedding(Tensor(_ids[::-1]), w),
                [Tensor(_wd, requires_grad=True)]), "gradcheck of a product of two lookups")
print("✓ embedding backward: scatter-add, repeats accumulate, padding row frozen; row 1:",
      np.round(_expected[1], 3))

# %% [markdown]
# ## 4. The `Embedding` layer
#
# The layer owns the table as a `Parameter` named `weight` of shape
# `(num_embeddings, embedding_dim)` and calls `embedding` in `forward`. PyTorch initialises
# it from the standard normal $\mathcal{N}(0, 1)$ — unlike `Linear`, there is no fan-in to
# scale by, because each output is *one* row, not a sum of many inputs. (GPT-2 uses a
# smaller standard deviation, 0.02; module 13 can re-initialise.) With `padding_idx`, that
# row is **set to zero** at construction, and since it never receives a gradient it stays
# zero: padded positions contribute exactly nothing.
#
# `padding_idx` may be negative (counted from the end, like Python lists); the provided
# `_padding_index` normalises it. `from_pretrained` (provided) builds a layer around an
# existing table — by default frozen, the usual way to plug in pre-trained word vectors.
#
# <details><summary>Hint 1</summary>
#
# Module 03's `Linear` shows the pattern: create the `Parameter` in `__init__`, fill it in
# `reset_parameters`. Which of module 03's `nn.init` functions draws from $\mathcal{N}(0, 1)$?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Order matters in `reset_parameters`: which write decides what the padding row holds?
# Writing into a `Parameter` is an in-place change autograd must not record (module 06's
# `no_grad`); `self.weight[i]` is a view of row i that you can write through (module 01).
# </details>
#
# <details><summary>The approach</summary>
#
# Which of `Linear`'s two methods decides the shapes and which the values, and why does
# the split matter when someone calls `reset_parameters()` again later? Which guarantee
# of this layer must survive that call?
# </details>

# %% nbgrader={"grade": false, "grade_id": "embedding-layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Embedding(Module):
    """A table of num_embeddings learned vectors of size embedding_dim, looked up by integer id
    (torch.nn.Embedding). Input: int64 ids of any shape; output: ids.shape + (embedding_dim,)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None):
        """Sets num_embeddings, embedding_dim, padding_idx (normalised, or None) and the
        Parameter `weight` (num_embeddings, embedding_dim), float32 unless dtype says."""
        super().__init__()
        # Idea: the layer is its table; everything else is the op you wrote.
        ### BEGIN SOLUTION
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.padding_idx = _padding_index(padding_idx, self.num_embeddings)
        self.weight = Parameter(zeros(self.num_embeddings, self.embedding_dim, dtype=dtype))
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self):
        """N(0, 1) entries (PyTorch's default), and an all-zero padding row if there is one."""
        # Idea: one row per token, no fan-in to scale by; the padding row starts at zero.
        ### BEGIN SOLUTION
        normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0
        ### END SOLUTION

    def forward(self, input):
        """The rows of the table for the ids `input`; the padding row gets no gradient."""
        ### BEGIN SOLUTION
        return embedding(input, self.weight, self.padding_idx)
        ### END SOLUTION

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None):
        """An Embedding whose table is a copy of the 2-D `embeddings`; frozen unless freeze=False."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            raise ValueError("from_pretrained: embeddings must be a 2-D Tensor (num_embeddings, dim)")
        layer = cls(embeddings.shape[0], embeddings.shape[1], padding_idx=padding_idx,
                    dtype=embeddings.dtype)
        with no_grad():
            layer.weight.copy_(embeddings)
        layer.weight.requires_grad = not freeze
        return layer

    def extra_repr(self):
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


# %% nbgrader={"grade": true, "grade_id": "test-embedding-layer", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal, check, preserved_state

with preserved_state():
    tinytorch.manual_seed(0)
    _emb = Embedding(1000, 64)
    _pad = Embedding(10, 4, padding_idx=-1)
assert_equal((_emb.weight.shape, _emb.weight.dtype), ((1000, 64), tinytorch.float32), "weight shape and dtype")
assert_equal(Embedding(3, 2, dtype=tinytorch.float64).weight.dtype, tinytorch.float64, "Embedding(3, 2, dtype=float64)")
assert_equal([n for n, _ in _emb.named_parameters()], ["weight"], "one parameter, named weight")
_wv = _emb.weight.numpy()
assert_close(np.array([_wv.mean(), _wv.std()]), np.array([0.0, 1.0]), atol=0.02, rtol=0,
             what="init: mean and std of the table (N(0, 1), not scaled by the width)")
_ids = Tensor([[5, 17, 5], [999, 0, 2]])
assert_equal(_emb(_ids).numpy(), _wv[_ids.numpy()], "forward: the rows of the ids")
assert_equal(_pad.padding_idx, 9, "padding_idx=-1 in a 10-row table is row 9")
assert_equal(_pad.weight.numpy()[9], np.zeros(4), "the padding row starts at zero")
check(np.all(_pad.weight.numpy()[:9] != 0), "the other rows are random", got=_pad.weight.numpy()[:9])
_pad(Tensor([[9, 1, 9], [2, 9, 1]])).sum().backward()
assert_equal(_pad.weight.grad.numpy()[9], np.zeros(4), "the padding row gets no gradient")
assert_equal(_pad.weight.grad.numpy()[[1, 2]], np.array([[2.0] * 4, [1.0] * 4], dtype=np.float32),
             "id 1 looked up twice, id 2 once")
assert_equal(repr(_pad), "Embedding(10, 4, padding_idx=9)", "repr")
_held = _pad.weight
with tinytorch.no_grad():
    _pad.weight.copy_(Tensor(np.ones((10, 4), dtype=np.float32)))
_pad.reset_parameters()                                   # a second call, as an initialiser may make later
check(_pad.weight is _held, "reset_parameters refills the same Parameter in place (an optimizer built on the "
      "layer holds that object: a new one would never be updated)", got=type(_pad.weight).__name__)
assert_equal(_pad.weight.numpy()[9], np.zeros(4), "after reset_parameters() again, the padding row is zero again "
             "(the guarantee lives in reset_parameters, not only in __init__)")
_pre = Embedding.from_pretrained(Tensor(np.arange(6.0).reshape(3, 2)))
assert_equal((_pre.weight.requires_grad, _pre(Tensor([2])).numpy().tolist()), (False, [[4.0, 5.0]]),
             "from_pretrained: frozen, and the given rows")
print("✓ Embedding layer: init std", round(float(_wv.std()), 3))

# %% [markdown]
# ### What a table learns
#
# A fresh table is noise: nothing says that two ids should have similar rows. Training is
# what gives the rows their meaning. Here is the smallest experiment that shows it: a
# **bigram model** of the fables' letters. Each character (26 letters and the space) gets a
# row of **two** numbers in your `Embedding`, a `Linear(2, 27)` turns that row into scores
# for the next character, and Adam trains both on cross-entropy for 400 steps (about a
# second). With two numbers per row, the table can be drawn: each character at its row.
#
# **Predict first.** The only thing a row can encode is what tends to follow its
# character. Which characters will end up close together?

# %%
predicted_neighbours = None  # your answer, e.g. "a, e, i, o, u" or "letters that look alike"

# %%
_text = " ".join("".join(c if c.isalpha() else " " for c in tinytorch.data.load_text().lower()).split())
_chars = sorted(set(_text))
_ids = np.array([_chars.index(c) for c in _text])
with preserved_state():
    tinytorch.manual_seed(0)
    _table, _head = Embedding(len(_chars), 2), tinytorch.nn.Linear(2, len(_chars))
    _opt = tinytorch.optim.Adam(list(_table.parameters()) + list(_head.parameters()), lr=0.05)
    _rng = np.random.default_rng(0)
    for _step in range(400):
        _b = _rng.integers(0, len(_ids) - 1, 1024)  # 1024 (character, next character) pairs
        _loss = tinytorch.nn.functional.cross_entropy(_head(_table(Tensor(_ids[_b]))), Tensor(_ids[_b + 1]))
        _opt.zero_grad()
        _loss.backward()
        _opt.step()
_rows = _table.weight.numpy()
fig, ax = plt.subplots(figsize=(5, 4.6))
for _i, _c in enumerate(_chars):
    ax.text(_rows[_i, 0], _rows[_i, 1], "␣" if _c == " " else _c, ha="center", va="center", fontsize=13,
            color="tab:red" if _c in "aeiou" else "black")
ax.set_xlim(_rows[:, 0].min() - 0.5, _rows[:, 0].max() + 0.5)
ax.set_ylim(_rows[:, 1].min() - 0.5, _rows[:, 1].max() + 0.5)
ax.set_title("each character at its learned 2-D row (vowels in red)", fontsize=10)
fig.tight_layout()
plt.show()
print(f"bigram loss after 400 steps: {_loss.item():.3f} (uniform guessing: ln 27 = {np.log(27):.3f}); "
      f"your prediction: {predicted_neighbours}")

# %% [markdown]
# <details><summary>What the picture shows (open after comparing with your prediction)</summary>
#
# Characters that are followed by similar characters get similar rows, because a row is
# all the `Linear` sees: most vowels (mostly followed by consonants) gather in one corner,
# far from the consonants that are mostly followed by a vowel, while rare letters sit
# wherever their few gradients left them. Nothing told the model what a vowel is. This is the whole
# idea of learned embeddings, from word2vec to a GPT's token table: ids that are *used*
# alike end up *stored* alike. With more than two numbers per row the table can hold many
# such groupings at once.
# </details>

# %% [markdown]
# ## 5. Positions: why a model needs to be told where a token is
#
# The attention layer of the next module compares every token with every other token by
# dot products and mixes their vectors. Nothing in that computation knows the **order** of
# the tokens: shuffle the input sequence and the outputs are shuffled the same way, nothing
# else changes ("dog bites man" and "man bites dog" would look alike). Order has to be put
# into the vectors themselves. The simplest way: add to the embedding of the token at
# position $p$ a vector $P_p$ that depends only on $p$,
#
# $$x_p = W_{\text{id}_p} + P_p .$$
#
# **Sinusoidal positions** ("Attention Is All You Need", 2017) use a fixed table: for
# position $p$ and $i = 0, 1, \dots, D/2 - 1$,
#
# $$P_{p,\,2i} = \sin\!\left(\frac{p}{10000^{2i/D}}\right), \qquad
#   P_{p,\,2i+1} = \cos\!\left(\frac{p}{10000^{2i/D}}\right).$$
#
# Each pair of columns $(2i, 2i+1)$ is a point going round a circle as $p$ grows, at
# angular frequency $\omega_i = 10000^{-2i/D}$: the first pair turns once every $2\pi$
# positions, the last pair almost not at all (wavelengths from $2\pi$ up to $10000 \cdot
# 2\pi$). Together the pairs are like the hands of a clock, from a fast seconds hand to a
# very slow one, and every position gets a distinct reading. Two properties make it
# attractive:
#
# - **relative positions are linear**: moving $k$ positions rotates every pair by the fixed
#   angle $\omega_i k$, so $P_{p+k} = R_k P_p$ with a rotation matrix $R_k$ that does not
#   depend on $p$ — a linear layer can learn "look $k$ tokens back";
# - **dot products depend on distance only**: $P_p \cdot P_q = \sum_i \cos(\omega_i (p - q))$,
#   since $\sin a \sin b + \cos a \cos b = \cos(a - b)$.
#
# When $D$ is odd, the last column is a sine without its cosine partner. Compute in float64
# and return a float32 `Tensor` of shape `(max_len, D)` (or the `dtype` asked for).
#
# <details><summary>Hint 1</summary>
#
# Columns $2i$ and $2i+1$ share one frequency. How many distinct frequencies are there for
# a width $D$, even and odd? Note the exponent: $2i/D$, where $2i$ is the *even column
# number*, not the pair number $i$.
# </details>
#
# <details><summary>Hint 2</summary>
#
# No loop is needed. Which two 1-D arrays, combined by broadcasting, give every angle
# $p\,\omega_i$ at once? How do you address every other column of a table?
# </details>
#
# <details><summary>The approach</summary>
#
# Think in columns rather than positions: which columns share a frequency? For D = 5,
# list the columns and their frequencies by hand: how many sines, how many cosines, how
# many distinct frequencies? Your code must give that count for every D, even and odd.
# </details>

# %% nbgrader={"grade": false, "grade_id": "sinusoidal", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def sinusoidal_positions(max_len, dim, base=10000.0, dtype=None):
    """The (max_len, dim) sinusoidal position table for positions 0..max_len-1: column 2i is
    sin(p·ω_i), column 2i+1 is cos(p·ω_i), with ω_i = base^(-2i/dim). Returns a Tensor
    (float32 unless dtype says); an odd dim ends with a sine column."""
    if max_len < 0 or dim < 1:
        raise ValueError(f"sinusoidal_positions: need max_len >= 0 and dim >= 1, got {max_len}, {dim}")
    # Idea: each column pair is a clock hand turning at its own frequency.
    ### BEGIN SOLUTION
    p = np.arange(max_len, dtype=np.float64)[:, None]
    two_i = np.arange(0, dim, 2, dtype=np.float64)
    angles = p * base ** (-two_i / dim)
    table = np.zeros((max_len, dim))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, :dim // 2])
    return Tensor(table, dtype=float32 if dtype is None else dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-sinusoidal", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal

_pe = sinusoidal_positions(50, 16)
assert_equal((type(_pe).__name__, _pe.shape, _pe.dtype), ("Tensor", (50, 16), tinytorch.float32), "type, shape, dtype")
_p = _pe.numpy().astype(np.float64)
assert_close(_p[0], np.tile([0.0, 1.0], 8), what="position 0: sin 0 = 0 in even columns, cos 0 = 1 in odd ones")
assert_close(_p[1, :2], np.array([np.sin(1.0), np.cos(1.0)]), what="position 1, pair 0 (ω_0 = 1)")
assert_close(_p[7, 4:6], np.array([np.sin(7 / 10000 ** (4 / 16)), np.cos(7 / 10000 ** (4 / 16))]),
             what="position 7, columns 4 and 5: ω = 10000^(-4/16)")
assert_close(_p[9, 14:16], np.array([np.sin(9 / 10000 ** (14 / 16)), np.cos(9 / 10000 ** (14 / 16))]),
             what="position 9, the last pair: ω = 10000^(-14/16)")
assert_close(_p[:, 0::2] ** 2 + _p[:, 1::2] ** 2, np.ones((50, 8)), rtol=1e-6, what="every pair lies on a circle")
assert_equal(sinusoidal_positions(1000, 4, dtype=tinytorch.float64).dtype, tinytorch.float64,
             "sinusoidal_positions(1000, 4, dtype=float64): the table's dtype")
assert_close(sinusoidal_positions(1000, 4, dtype=tinytorch.float64).numpy()[999, 2:],
             np.array([np.sin(999 / 100.0), np.cos(999 / 100.0)]), rtol=1e-12, atol=1e-14,
             what="position 999, float64: the angles computed in float64 (float32 angles are off by ~2e-7 here)")
_odd = sinusoidal_positions(10, 5, dtype=tinytorch.float64).numpy()
assert_equal((_odd.shape, _odd.dtype), ((10, 5), np.dtype(np.float64)), "dim 5, float64")
assert_close(_odd[:, 4], np.sin(np.arange(10) / 10000 ** (4 / 5)), rtol=1e-12, what="odd dim: the last column is a sine")
assert_close(sinusoidal_positions(6, 4, base=100.0, dtype=tinytorch.float64).numpy()[5, 2:],
             np.array([np.sin(5.0 / 10.0), np.cos(5.0 / 10.0)]), rtol=1e-12,
             what="base=100, dim 4, position 5, columns 2 and 3: ω_1 = 100^(-2/4) = 1/10")
_pd = sinusoidal_positions(64, 32, dtype=tinytorch.float64).numpy()
_gram = _pd @ _pd.T
assert_close(_gram[10, 13], _gram[40, 43], rtol=1e-9, what="P_10·P_13 = P_40·P_43 (distance 3)")
assert_close(_gram[20, 5], _gram[35, 20], rtol=1e-9, what="P_20·P_5 = P_35·P_20 (distance 15)")
print("✓ sinusoidal position table; P[1, :2] =", np.round(_p[1, :2], 4))

# %% [markdown]
# Let us look at the table. In the left panel each row is a position and each column a
# dimension. Its first columns (small $i$) turn fast, so colour changes down a column
# within a few positions. Its last columns turn so slowly that in 100 positions their
# angle stays near 0: each sine column stays near 0 (white) and each cosine column near 1
# (blue), and the alternation of the two reads as fine vertical stripes. The right panel
# shows the dot product
# $P_p \cdot P_q$ of every pair of positions. It is largest on the diagonal ($p = q$, where it
# equals $D/2$), smaller away from it (not steadily: it ripples as the fast pairs come round
# again), and is the same along every diagonal:
# it depends on $p - q$ only, as promised.

# %%
_table = sinusoidal_positions(100, 64).numpy()
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
im = axes[0].imshow(_table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
axes[0].set_xlabel("dimension")
axes[0].set_ylabel("position p")
axes[0].set_title("sinusoidal table P (100 positions, D = 64)")
fig.colorbar(im, ax=axes[0])
im = axes[1].imshow(_table @ _table.T, cmap="viridis")
axes[1].set_xlabel("position q")
axes[1].set_ylabel("position p")
axes[1].set_title("similarity P_p · P_q: a function of p − q")
fig.colorbar(im, ax=axes[1])
fig.tight_layout()
plt.show()

# %% [markdown]
# And the "relative positions are linear" claim, checked: build the block-diagonal matrix
# $R_k$ that rotates every column pair $(2i, 2i+1)$ by the angle $\omega_i k$ (as a row-vector
# map, $P_{p+k} = P_p R_k$) and apply it to every position at once. The same matrix works
# for all $p$; only $k$ matters.

# %%
def shift_matrix(k, dim, base=10000.0):
    """R_k with P[p + k] = P[p] @ R_k for the sinusoidal table (dim even)."""
    R = np.zeros((dim, dim))
    for c in range(0, dim, 2):
        a = k * base ** (-c / dim)
        # (sin x, cos x) -> (sin(x+a), cos(x+a)) = (sin x cos a + cos x sin a, cos x cos a - sin x sin a)
        R[c:c + 2, c:c + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return R


_P = sinusoidal_positions(100, 64, dtype=tinytorch.float64).numpy()
print("max |P[p+5] - P[p] R_5| over all p:", np.abs(_P[:95] @ shift_matrix(5, 64) - _P[5:]).max())

# %% [markdown]
# ## 6. Positional-encoding layers
#
# Two layers with the same interface: `forward(x, offset=0)` takes token embeddings `x` of
# shape `(..., T, D)` (a batch `(B, T, D)` or one sequence `(T, D)`) and returns
# `x + P[offset : offset + T]`, broadcast over the batch. The `offset` is for generation
# with a cache (module 18), where one new token at position `offset` arrives at a time.
#
# - **`SinusoidalPositionalEncoding(dim, max_len)`** computes the table once in `__init__`
#   and keeps it as a **buffer** named `pe`: a tensor the module owns and moves along with
#   its parameters, but that the optimizer never sees (it is not a `Parameter`). We register
#   it as **non-persistent**: it is a fixed function of `(max_len, dim)`, so there is no
#   point in storing it in every checkpoint (PyTorch's tutorials store it; both work).
#   Nothing is learned, and sequences up to `max_len` work; the formula would extend further.
# - **`LearnedPositionalEmbedding(max_len, dim)`** (GPT-2's choice) is an embedding over
#   positions: a `Parameter` table `weight` of shape `(max_len, dim)`, looked up with the ids
#   `offset, offset+1, ..., offset+T-1` through your `embedding` op, so its gradient is your
#   scatter-add. It can learn whatever position signal helps, but a model **cannot go past
#   `max_len`**: there is simply no row for position `max_len` (GPT-2 stops at 1,024 tokens).
#
# Both raise a `ValueError` naming the sequence length and `max_len` when `offset + T` is
# too long; the provided `_check_positions` does that check and returns `T`.
#
# <details><summary>Hint 1</summary>
#
# Module 03's `Module` has `register_buffer(name, tensor, persistent=...)`. And which
# positions does a call with `offset` and a sequence of length `T` cover?
# </details>
#
# <details><summary>Hint 2</summary>
#
# For the learned layer, the positions are ids like any other: an int64 tensor of
# consecutive integers (module 01 has a function for ranges) looked up in the layer's own
# table with your `embedding` op, so that the gradient reaches the table.
# </details>
#
# <details><summary>The approach</summary>
#
# Both layers answer one question: which rows of a position table does this call need? The
# token at index t sits at position offset + t. The layers differ in who owns the table
# and how a gradient reaches it. A fixed table is module state, not a parameter, and not
# worth saving; a slice of it is enough. A learned table is a parameter, initialised like
# a token table; read through your op (the positions as ids), it gets the same sparse
# backward as a token table.
# </details>

# %%
#| export
def _check_positions(layer, x, offset):
    """The sequence length T of x (..., T, D), after checking D and that offset + T <= max_len."""
    if not isinstance(x, Tensor) or x.ndim < 2 or x.shape[-1] != layer.dim:
        raise ValueError(f"{type(layer).__name__}: expected input (..., T, {layer.dim}), "
                         f"got {getattr(x, 'shape', type(x).__name__)}")
    T = x.shape[-2]
    if offset < 0 or offset + T > layer.max_len:
        raise ValueError(f"{type(layer).__name__}: positions {offset}..{offset + T - 1} (sequence "
                         f"length {T}, offset {offset}) do not fit in max_len={layer.max_len}; "
                         f"build the layer with a larger max_len or use shorter sequences")
    return T


# %% nbgrader={"grade": false, "grade_id": "position-layers", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class SinusoidalPositionalEncoding(Module):
    """Adds the fixed sinusoidal table to x (..., T, dim): x + P[offset:offset+T]. The table is
    a non-persistent buffer `pe` (max_len, dim); nothing is learned."""

    def __init__(self, dim, max_len=5000):
        super().__init__()
        self.dim, self.max_len = int(dim), int(max_len)
        # Idea: compute the table once; the module owns it, the optimizer never sees it.
        ### BEGIN SOLUTION
        self.register_buffer("pe", sinusoidal_positions(self.max_len, self.dim), persistent=False)
        ### END SOLUTION

    def forward(self, x, offset=0):
        T = _check_positions(self, x, offset)
        # Idea: the token at index t of x stands at position offset + t.
        ### BEGIN SOLUTION
        return x + self.pe[offset:offset + T]
        ### END SOLUTION

    def extra_repr(self):
        return f"dim={self.dim}, max_len={self.max_len}"


PositionalEncoding = SinusoidalPositionalEncoding


class LearnedPositionalEmbedding(Module):
    """Adds a learned vector per position to x (..., T, dim): step t gets row offset + t of
    weight, read through the embedding op (a node "embedding" in the graph, so that the
    table's gradient is that op's scatter-add). weight: a (max_len, dim) Parameter
    initialised N(0, 1)."""

    def __init__(self, max_len, dim, dtype=None):
        super().__init__()
        self.max_len, self.dim = int(max_len), int(dim)
        # Idea: an embedding table whose "tokens" are positions.
        ### BEGIN SOLUTION
        self.weight = Parameter(zeros(self.max_len, self.dim, dtype=dtype))
        normal_(self.weight)
        ### END SOLUTION

    def forward(self, x, offset=0):
        T = _check_positions(self, x, offset)
        # Idea: the positions are ids, and ids are looked up with your op.
        ### BEGIN SOLUTION
        return x + embedding(arange(offset, offset + T), self.weight)
        ### END SOLUTION

    def extra_repr(self):
        return f"max_len={self.max_len}, dim={self.dim}"


# %% nbgrader={"grade": true, "grade_id": "test-position-layers", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state

with preserved_state():
    tinytorch.manual_seed(3)
    _x = tinytorch.randn(2, 6, 8)
    _learn = LearnedPositionalEmbedding(10, 8)
    _xg = tinytorch.randn(2, 6, 8, requires_grad=True)
_sin = SinusoidalPositionalEncoding(8, max_len=20)
assert_equal((list(dict(_sin.named_buffers())), list(_sin.parameters())), (["pe"], []), "one buffer pe, no parameters")
assert_equal("pe" in _sin.state_dict(), False, "the buffer is not persistent (not in state_dict)")
_table = sinusoidal_positions(20, 8).numpy()
assert_close(_sin(_x).numpy(), _x.numpy() + _table[:6], rtol=1e-6, what="x + P[0:6]")
assert_equal((_sin.pe.dtype, _sin(_x).dtype), (tinytorch.float32, tinytorch.float32),
             "the sinusoidal layer's buffer and its output on float32 input: float32 (a float64 table would "
             "promote every activation after it)")
assert_close(_sin(_x[0, :2], offset=7).numpy(), _x.numpy()[0, :2] + _table[7:9], rtol=1e-6,
             what="unbatched (2, 8) at offset 7: x + P[7:9]")
assert_equal([n for n, _ in _learn.named_parameters()], ["weight"], "learned: one parameter, weight")
assert_equal(_learn.weight.shape, (10, 8), "learned: weight is (max_len, dim)")
assert_close(np.array([_learn.weight.numpy().std()]), np.array([1.0]), atol=0.35, rtol=0, what="learned: N(0, 1) init")
_y = _learn(_xg)
assert_close(_y.numpy(), _xg.numpy() + _learn.weight.numpy()[:6], rtol=1e-6, what="learned: x + weight[0:6]")
assert_close(_learn(_xg[0, :3], offset=7).numpy(), _xg.numpy()[0, :3] + _learn.weight.numpy()[7:10], rtol=1e-6,
             what="learned, offset 7: x + weight[7:10]")
from tinytorch.autograd import topological_order  # module 06's walk over a graph

_ops_in_graph = {node.op for node in topological_order([_y.grad_fn])} if _y.grad_fn is not None else set()
check("embedding" in _ops_in_graph, "the learned positions are read through your embedding op (its node is "
      "in the graph: the table's gradient is then your scatter-add)", got=sorted(_ops_in_graph))
assert_equal(_learn(_x).dtype, tinytorch.float32, "learned: float32 in, float32 out")
assert_equal(LearnedPositionalEmbedding(4, 3, dtype=tinytorch.float64).weight.dtype, tinytorch.float64,
             "LearnedPositionalEmbedding(4, 3, dtype=float64): its table's dtype")
_y.sum().backward()
check(_learn.weight.grad is not None, "the learned table got a gradient (read it through your embedding op, "
      "not through a copy of its numbers)", got=_learn.weight.grad)
assert_equal(_learn.weight.grad.numpy()[:6], np.full((6, 8), 2.0, dtype=np.float32),
             "each of positions 0..5 used by 2 sequences: gradient 2")
assert_equal(_learn.weight.grad.numpy()[6:], np.zeros((4, 8), dtype=np.float32), "positions 6..9 unused: no gradient")
assert_equal(_xg.grad.numpy(), np.ones((2, 6, 8), dtype=np.float32), "the gradient reaches x unchanged")
assert_raises(ValueError, _learn, tinytorch.randn(1, 11, 8), match="max_len", what="learned: 11 positions of 10")
assert_raises(ValueError, _sin, tinytorch.randn(21, 8), match="max_len", what="sinusoidal: 21 positions of 20")
print("✓ sinusoidal and learned positional layers")

# %% [markdown]
# ## 7. Putting it together
#
# A language model's input layer is now three lines: ids → token vectors → plus positions.
# The picture shows why positions matter: without them, the same token gives the same
# vector wherever it stands.

# %%
tinytorch.manual_seed(0)
_tok = Embedding(20, 16)
_pos = SinusoidalPositionalEncoding(16, max_len=32)
_ids = Tensor([[4, 7, 4, 9, 4]])
_without = _tok(_ids)
_with = _pos(_without)
_cos = lambda a: (a @ a.T) / np.outer(np.linalg.norm(a, axis=1), np.linalg.norm(a, axis=1))
fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
for ax, mat, title in [(axes[0], _without.numpy()[0], "token embeddings only"),
                       (axes[1], _with.numpy()[0], "token + sinusoidal position")]:
    _sim = _cos(mat.astype(np.float64))
    im = ax.imshow(_sim, cmap="viridis", vmin=-1, vmax=1)
    for (_r, _c), _v in np.ndenumerate(_sim):
        ax.text(_c, _r, f"{_v:.2f}", ha="center", va="center", fontsize=8,
                color="black" if _v > 0.3 else "white")
    ax.set_xticks(range(5), ["4", "7", "4", "9", "4"])
    ax.set_yticks(range(5), ["4", "7", "4", "9", "4"])
    ax.set_title(f"cosine similarity:\n{title}", fontsize=10)
fig.colorbar(im, ax=axes)
plt.show()

# %% [markdown]
# On the left, the three copies of token 4 (positions 0, 2 and 4) are identical (similarity
# 1); on the right, they are distinct vectors, and the two copies two positions apart
# (0 and 2, 2 and 4) are more alike than the two four apart (0 and 4): read the numbers.

# %% [markdown]
# ## 8. Rotary positions: put the distance inside the dot product
#
# Adding $P_p$ to a token's vector mixes position and content in one vector. Attention (the
# next module) uses vectors only through dot products of a query $q$ at position $m$ with a
# key $k$ at position $n$, and with added positions that score is
#
# $$(q + P_m)\cdot(k + P_n) = q\cdot k + q \cdot P_n + P_m \cdot k + P_m \cdot P_n ,$$
#
# four terms, of which only the last is a function of the distance alone. Most language
# models today do something else: they leave the embeddings alone and transform $q$ and $k$
# by a function of their position, chosen so that **the score depends on the two contents
# and on the offset $n - m$ only**. Find such a function before you read on. You want
# $f(v, p)$, the same for queries and keys, with
#
# 1. $f(q, m) \cdot f(k, n)$ a function of $q$, $k$ and $n - m$ only (not of $m$ itself);
# 2. $\lVert f(v, p) \rVert = \lVert v \rVert$: a position never rescales a score;
# 3. $f(v, 0) = v$.
#
# Section 5 already met matrices with the right algebra. Try $f(v, p) = v\,M_p$ for some
# matrix $M_p$: write the score $f(q, m)\cdot f(k, n)$ as a product of $q$, two matrices and
# $k^\top$. What must the product of the two matrices depend on? Which matrices
# $M_m, M_n$ combine into a matrix of $n - m$ only, and which of them keep lengths? Settle the
# answer on paper, then implement it: RoPE ("rotary position embedding", Su et al. 2021).
#
# The contract fixes the one convention the tests need: the columns pair up as $(2i, 2i+1)$,
# pair $i$ at position $p$ turns by the angle $p\,\omega_i$ with the frequencies $\omega_i$
# of `sinusoidal_positions`, and a turn is counterclockwise (the direction that takes the
# pair $(1, 0)$ towards $(0, 1)$). The check then tests the three properties above on your
# function, not on a formula.
#
# <details><summary>Hint 1</summary>
#
# $f(q, m)\cdot f(k, n) = q\,M_m M_n^\top k^\top$. For rotations, $M^\top$ is the turn by
# the opposite angle. What is a turn by $m$ followed by a turn back by $n$?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Where do $(1, 0)$ and $(0, 1)$ go under a counterclockwise turn by $\theta$? A turn is
# linear, so that fixes where any pair $(a, b)$ goes. For all pairs and positions at once:
# the angles form a $(T, D/2)$ table, as in `sinusoidal_positions`; the even and the odd
# columns of `x` are two views of shape $(\dots, T, D/2)$.
# </details>
#
# <details><summary>The approach</summary>
#
# Every pair of columns is a point in its own plane, and each plane turns at its own speed,
# like the hands of section 5's clock; the position decides how far. Build the angles in
# float64 from the positions `offset .. offset + T - 1`, turn every pair with cosines and
# sines in the dtype of `x`, and interleave the two results back into $D$ columns. Use
# tinytorch operations on `x` throughout, so that the gradient flows back to `x` on its own.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rotary", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def rotary_embedding(x, offset=0, base=10000.0):
    """Rotary positions (RoPE): x (..., T, D), a float Tensor with D even, whose vector at
    index t sits at position p = offset + t.

    Contract: returns a Tensor of x's shape and dtype in which, for every vector, each pair
    of columns (2i, 2i+1) is turned counterclockwise by the angle p·ω_i, with the ω_i of
    sinusoidal_positions(·, D, base). Differentiable with respect to x (built from tinytorch
    operations); x is left unchanged. So f(q, m)·f(k, n) depends on q, k and n - m only.
    """
    if not isinstance(x, Tensor) or x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError("rotary_embedding: expected a Tensor (..., T, D) with D even (columns turn in pairs), "
                         f"got {getattr(x, 'shape', type(x).__name__)}")
    # Idea: each column pair is a point in its own plane, turned by position times frequency.
    ### BEGIN SOLUTION
    T, D = x.shape[-2], x.shape[-1]
    angles = np.arange(offset, offset + T, dtype=np.float64)[:, None] * base ** (-np.arange(0, D, 2) / D)
    cos, sin = Tensor(np.cos(angles), dtype=x.dtype), Tensor(np.sin(angles), dtype=x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).reshape(x.shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-rotary", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal, assert_raises, check

_e = np.zeros((1, 4))
_e[0, 0] = 1.0                                             # the pair (1, 0) in columns 0, 1
assert_close(rotary_embedding(Tensor(_e, dtype=tinytorch.float64), offset=1).numpy(),
             np.array([[np.cos(1.0), np.sin(1.0), 0, 0]]), rtol=1e-12, atol=1e-15,
             what="(1, 0, 0, 0) at position 1: pair 0 turns counterclockwise by 1 radian (ω_0 = 1)")
_e = np.array([[0.0, 0.0, 0.0, 1.0]])                      # the pair (0, 1) in columns 2, 3
assert_close(rotary_embedding(Tensor(_e, dtype=tinytorch.float64), offset=3).numpy(),
             np.array([[0, 0, -np.sin(0.03), np.cos(0.03)]]), rtol=1e-12, atol=1e-15,
             what="(0, 0, 0, 1) at position 3, D = 4: pair 1 turns by 3·ω_1 = 3·10000^(-2/4) = 0.03")
assert_close(rotary_embedding(Tensor(_e, dtype=tinytorch.float64), offset=3, base=100.0).numpy(),
             np.array([[0, 0, -np.sin(0.3), np.cos(0.3)]]), rtol=1e-12, atol=1e-15,
             what="the same with base=100: pair 1 turns by 3·100^(-2/4) = 0.3")
_rng = np.random.default_rng(11)
_q, _k = _rng.standard_normal(16), _rng.standard_normal(16)
_Q = rotary_embedding(Tensor(np.tile(_q, (40, 1)), dtype=tinytorch.float64)).numpy()   # q at positions 0..39
_K = rotary_embedding(Tensor(np.tile(_k, (40, 1)), dtype=tinytorch.float64)).numpy()
_S = _Q @ _K.T                                              # S[m, n] = f(q, m) · f(k, n)
assert_close(np.array([_S[3, 10], _S[20, 27], _S[32, 39]]), np.full(3, _S[0, 7]), rtol=1e-9,
             what="scores at offset n - m = 7 for m = 0, 3, 20, 32: one value (the score depends on the offset only)")
assert_close(np.array([_S[12, 2], _S[39, 29]]), np.full(2, _S[10, 0]), rtol=1e-9, what="offset -10, m = 10, 12, 39")
assert_close(np.linalg.norm(_Q, axis=1), np.full(40, np.linalg.norm(_q)), rtol=1e-12,
             what="|f(q, p)| = |q| at every position")
assert_close(_Q[0], _q, rtol=1e-12, what="position 0: f(q, 0) = q")
_x = tinytorch.randn(2, 3, 5, 8)
_before = _x.numpy().copy()
_y = rotary_embedding(_x, offset=4)
assert_equal((_y.shape, _y.dtype), ((2, 3, 5, 8), tinytorch.float32), "shape and dtype of a (2, 3, 5, 8) float32 input")
assert_equal(_x.numpy(), _before, "x is left unchanged")
assert_close(_y.numpy()[1, 2], rotary_embedding(_x[1, 2], offset=4).numpy(), rtol=1e-6,
             what="a batch of (B, H, T, D) turns like each (T, D) on its own")
assert_close(rotary_embedding(_x, offset=4).numpy()[..., 1:, :], rotary_embedding(_x[..., 1:, :], offset=5).numpy(),
             rtol=1e-5, atol=1e-6, what="index t at offset 4 is position 4 + t: the last 4 rows equal offset 5's")
_xg = tinytorch.randn(3, 6, dtype=tinytorch.float64, requires_grad=True)
rotary_embedding(_xg, offset=2).sum().backward()
check(_xg.grad is not None, "the gradient flows back to x (build the result from tinytorch operations on x)",
      got=_xg.grad)
assert_equal(gradcheck(lambda t: rotary_embedding(t, offset=2), (_xg,)), True,
             "gradcheck: rotary_embedding's gradient with respect to x")
assert_raises(ValueError, rotary_embedding, tinytorch.randn(4, 5), match="even", what="D = 5")
print(f"✓ rotary_embedding: S[0, 7] = S[20, 27] = {_S[20, 27]:.4f}")

# %% [markdown]
# Here is what the properties look like. Take one query vector and one key vector and put
# them at every position from 0 to 39. With **added** sinusoidal positions (left), the
# score $(q + P_m)\cdot(k + P_n)$ changes along every diagonal: the contents and the
# absolute positions are tangled. With **rotary** positions (right), every diagonal has one
# colour: the score knows how far apart the two tokens are and nothing else.

# %%
_rng = np.random.default_rng(11)
_q, _k = _rng.standard_normal(16), _rng.standard_normal(16)           # one query, one key, at positions 0..39
_Q = rotary_embedding(Tensor(np.tile(_q, (40, 1)), dtype=tinytorch.float64)).numpy()
_K = rotary_embedding(Tensor(np.tile(_k, (40, 1)), dtype=tinytorch.float64)).numpy()
_P = sinusoidal_positions(40, 16, dtype=tinytorch.float64).numpy()
_added = (_q + _P) @ (_k + _P).T
_rotary = _Q @ _K.T
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, mat, title in [(axes[0], _added, "added: (q + P_m)·(k + P_n)"), (axes[1], _rotary, "rotary: f(q, m)·f(k, n)")]:
    im = ax.imshow(mat, cmap="viridis")
    ax.set_xlabel("key position n")
    ax.set_ylabel("query position m")
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.046)
fig.tight_layout()
plt.show()
_spread = lambda m: max(np.ptp(np.diagonal(m, d)) for d in range(-39, 40))
print(f"largest spread of the scores along one diagonal: added {_spread(_added):.3f}, rotary {_spread(_rotary):.1e}")

# %% [markdown]
# The costs: RoPE has no parameters and no table to store (the cosines and sines can be
# computed once per position and reused; with module 18's key-value cache, each key is
# turned once, when it enters the cache), and it costs about $3D$ FLOPs per vector: two
# multiplies and an add per column. Because a position enters only as
# an offset, a model trained on sequences of length $T$ at least produces well-defined
# scores beyond $T$, which is where the literature's context-extension tricks start.

# %% [markdown]
# ## 9. Systems look: memory, sparsity, time
#
# ### Table memory
#
# An embedding table holds $V \times D$ numbers, $4 V D$ bytes in float32. Predict the
# size of `Embedding(8192, 256)` in bytes, then measure it.

# %%
predicted_table_bytes = None   # your number: bytes of the weight of Embedding(8192, 256)

# %%
tinytorch.manual_seed(0)
_big = Embedding(8192, 256)
print(f"Embedding(8192, 256): {_big.weight.nbytes:,} bytes measured; "
      + ("no prediction written" if predicted_table_bytes is None else f"you predicted {predicted_table_bytes:,}"))

# %% [markdown]
# Now the formula for vocabularies and widths of published models (their configuration
# files give V and D). The table is often one of the largest single tensors in a model, and
# GPT-2 re-uses it as its output layer (**weight tying**: the logits are $h W^\top$), which
# saves a second copy. Training with Adam (module 07) keeps two more tensors of the same
# size, and the gradient one more: four times the table in all.

# %%
for _name, _v, _d in [("BERT-base", 30522, 768), ("GPT-2 small", 50257, 768),
                      ("GPT-2 XL", 50257, 1600), ("Llama-2 7B", 32000, 4096), ("Llama-3 8B", 128256, 4096)]:
    _mb = 4 * _v * _d / 2 ** 20
    print(f"{_name:12s} V = {_v:>7,}  D = {_d:>5,}  table {_mb:8.1f} MiB in float32, "
          f"{4 * _mb / 1024:5.2f} GiB with grad + Adam state")

# %% [markdown]
# ### Gradient sparsity
#
# One batch touches only the rows of the ids it contains. Token frequencies in real text
# follow roughly **Zipf's law** (the $r$-th most frequent token has frequency $\propto 1/r$),
# so a batch keeps hitting the same frequent tokens and leaves most rows alone. We sample
# batches of $B \times T$ ids from a Zipf distribution over GPT-2's vocabulary size and count
# the rows of the gradient that your backward makes non-zero. Predict first: for the
# largest batch, 64 x 1,024 = 65,536 ids (more ids than the vocabulary has rows), what
# percentage of the 50,257 rows gets a non-zero gradient?

# %%
predicted_percent_touched = None   # your number, in percent, for the 64 x 1024 batch

# %%
_V = 50257
_rng = np.random.default_rng(0)
_zipf = 1.0 / np.arange(1, _V + 1)
_zipf /= _zipf.sum()
_w_small = Tensor(np.zeros((_V, 4), dtype=np.float32), requires_grad=True)
for _bt in [(8, 64), (32, 256), (64, 1024)]:
    _batch = _rng.choice(_V, size=_bt, p=_zipf)
    _w_small.grad = None
    embedding(Tensor(_batch), _w_small).sum().backward()
    _touched = int(np.count_nonzero(np.any(_w_small.grad.numpy() != 0, axis=1)))
    print(f"batch {_bt[0]:>2} x {_bt[1]:>4} = {_batch.size:>6} ids: {_touched:>6} rows touched "
          f"({100 * _touched / _V:5.1f}% of the table)")
print("your prediction for 64 x 1024:", "none written" if predicted_percent_touched is None
      else f"{predicted_percent_touched}%")

# %% [markdown]
# Most of the dense `(V, D)` gradient we allocate is zeros. That is why PyTorch offers
# `nn.Embedding(..., sparse=True)`, whose gradient is a sparse tensor holding only the touched
# rows (with the `SparseAdam` optimizer), and why large recommendation models (tables with
# billions of rows) are built around sparse updates. Note the catch with Adam: its moments
# decay but never return to zero, so a row touched once keeps moving on every later step,
# touched or not (a row never touched stays put, unless weight decay moves it), unless the
# optimizer is sparse too.
#
# ### Gather versus one-hot matmul
#
# Finally the two ways of section 1, timed: the gather, and the one-hot matrix product
# (including building the one-hot matrix), for a batch of 512 ids and growing vocabularies.
# Predict how many times slower the one-hot product is at $V = 16{,}000$.

# %%
predicted_onehot_ratio = None   # your number: one-hot matmul time / gather time at V = 16,000

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_n, _D = 512, 128
_vocab = [500, 2000, 8000, 16000]
_t_gather, _t_onehot = [], []
for _V in _vocab:
    _table = np.random.default_rng(0).standard_normal((_V, _D)).astype(np.float32)
    _ids = np.random.default_rng(1).integers(0, _V, _n)
    _table_t, _ids_t = Tensor(_table), Tensor(_ids)
    _t_gather.append(median_time(lambda: embedding(_ids_t, _table_t)))

    def _onehot_matmul():
        onehot = np.zeros((_n, _V), dtype=np.float32)
        onehot[np.arange(_n), _ids] = 1.0
        return onehot @ _table

    assert np.array_equal(_onehot_matmul(), _table[_ids])
    _t_onehot.append(median_time(_onehot_matmul))
    print(f"V = {_V:>6}: gather {_t_gather[-1] * 1e3:7.3f} ms   one-hot matmul {_t_onehot[-1] * 1e3:8.3f} ms "
          f"({_t_onehot[-1] / _t_gather[-1]:5.0f}x)")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.loglog(_vocab, np.array(_t_gather) * 1e3, "o-", label="gather (embedding op)")
ax.loglog(_vocab, np.array(_t_onehot) * 1e3, "s-", label="one-hot @ W")
ax.set_xlabel("vocabulary size V")
ax.set_ylabel("time (ms), 512 ids, D = 128")
ax.legend()
ax.set_title("the gather's cost does not grow with V")
fig.tight_layout()
plt.show()
print(f"one-hot / gather at V = {_vocab[-1]:,}: measured {_t_onehot[-1] / _t_gather[-1]:.0f}x; "
      + ("no prediction written" if predicted_onehot_ratio is None else f"you predicted {predicted_onehot_ratio}x"))

# %% [markdown]
# The gather copies $n \cdot D$ numbers whatever $V$ is (its time includes tinytorch's
# dispatch and the index check, which dominate at this size), so its curve should stay
# roughly flat; the one-hot product does $2 n V D$ FLOPs and should grow about linearly
# with $V$. The exact ratio depends on the machine: the BLAS library and its thread count,
# the caches, and the load; at small $V$ the two can even be close.
#
# ## 10. What PyTorch does
#
# - `torch.nn.Embedding` / `F.embedding` are the same op: a gather (`index_select`) forward
#   and an `embedding_dense_backward` that accumulates per row (on the CPU, threads that
#   each own a range of rows and scan all the ids; on the GPU, the ids sorted and runs of
#   equal ids summed) — a scatter-add that accumulates, like yours.
#   `padding_idx` behaves as here: the row is zeroed at construction and gets no gradient.
# - Options we skipped: `max_norm` (renormalise looked-up rows in place),
#   `scale_grad_by_freq` (divide each row's gradient by its count in the batch), and
#   `sparse=True` (sparse gradients, see above). `nn.EmbeddingBag` fuses the lookup with a
#   sum or mean over a bag of ids, never materialising the `(n, D)` rows.
# - Modern language models mostly do not add a position vector at all: they use **RoPE**
#   (Llama and most current models), your `rotary_embedding`, applied to the queries and
#   keys inside attention. PyTorch's core has no RoPE function; torchtune's
#   `RotaryPositionalEmbeddings` pairs the columns as you did, while Hugging Face's Llama
#   pairs column $i$ with column $i + D/2$ (the same idea, another layout, so weights trained
#   with one layout need their columns permuted for the other). **ALiBi** adds a distance
#   penalty to the attention scores instead. GPT-2 uses learned positions like
#   `LearnedPositionalEmbedding`.
#
# If PyTorch is installed, compare directly (skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    _rng = np.random.default_rng(5)
    _wd = _rng.standard_normal((10, 4))
    _ids = _rng.integers(0, 10, (3, 7))
    _ours = Tensor(_wd, requires_grad=True)
    _up = _rng.standard_normal((3, 7, 4))
    embedding(Tensor(_ids), _ours, padding_idx=2).backward(Tensor(_up))
    _theirs = torch.tensor(_wd, requires_grad=True)
    torch.nn.functional.embedding(torch.from_numpy(_ids), _theirs, padding_idx=2).backward(torch.from_numpy(_up))
    print("weight gradient max |difference| vs PyTorch:", np.abs(_ours.grad.numpy() - _theirs.grad.numpy()).max())

# %% [markdown]
# ## 11. Recap
#
# - An embedding lookup `W[ids]` equals a one-hot matrix times `W`; computing it as a
#   **gather** costs $n \cdot D$ copies instead of $2 n V D$ FLOPs.
# - Its backward is the transpose: a **scatter-add** of the upstream rows into the table's
#   gradient. Repeated ids must **accumulate**: every occurrence adds its upstream row.
# - `padding_idx` gives a row that starts at zero and never learns.
# - Attention ignores order, so positions are added: a fixed **sinusoidal** table (a clock
#   of frequencies; dot products depend only on distance; relative shifts are linear maps),
#   or a **learned** table that cannot go beyond `max_len`.
# - **Rotary** positions turn each column pair of the queries and keys by position ×
#   frequency: rotations compose by adding angles, so a score depends on the offset only.
# - A table is $4 V D$ bytes (and four times that when training with Adam); a batch's
#   gradient touches only a small fraction of its rows.
# - The op is one `apply` call, `"embedding"` with attributes `indices` and `padding_idx`,
#   and its gradient is one `@backward_rule` registered from this module.
#
# Run `tito test module 11` to check your work against the full test suite.

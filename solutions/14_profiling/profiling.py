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
# # Module 14 — Profiling: where do the time, the FLOPs and the memory go?
#
# You have a framework that trains a CNN and a small GPT. This module turns it into a
# framework you can **measure**: how many numbers a model trains, how much arithmetic one
# forward pass costs, which op the seconds really go to, how many bytes the autograd graph
# keeps alive, and how long a step takes once the noise is taken out. Every answer comes from
# code you write and is checked against a measurement on the machine that runs this notebook.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - count a model's **parameters** per layer, a shared (tied) parameter once;
# - derive the **analytic FLOP formulas** of the ops that matter (matmul, Conv2d as its
#   im2col matmul, softmax, LayerNorm, attention) from one counting convention, and explain
#   each term;
# - build **`tinytorch.profiler.profile()`**, a profiler in the spirit of `torch.profiler`
#   that sees every op (forward ops *and* backward rules) through module 01's dispatch
#   extension point, records name, input shapes, wall time, FLOPs and output bytes, and
#   aggregates them with `prof.key_averages().table(sort_by=...)`;
# - estimate the memory of a training step (activations the graph saves, gradients,
#   Adam's state) and compare the estimate with `tracemalloc`'s measured peaks;
# - measure latency properly (warm-up, repeats, median and spread) and produce a per-layer
#   report of the digits CNN and the small GPT: analytic FLOPs next to measured time.
#
# ## Prerequisites
#
# Modules 01-13: `apply` and `DispatchMode` (01), the ops and layers of 02-04, autograd's
# `call_rule` (06), `Adam` (07), `Conv2d`/`MaxPool2d` (09), `scaled_dot_product_attention` (12),
# `LayerNorm` and `GPT` (13), and `tinytorch.utils.timing`.
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/profiler.py` when you run `tito export 14` (or
# `tito test module 14`); `tinytorch.profiler` then plays the part of `torch.profiler`. Fill
# in the cells with `# YOUR CODE HERE`, then run the check cell below each.

# %%
#| default_exp profiler

# %%
import cProfile
import math
import os
import pstats
import sys
import time
import tracemalloc

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch
import tinytorch.utils.dispatch
from tinytorch import Tensor, nn
from tinytorch.nn import functional as F
from tinytorch.testing import assert_equal, assert_close, assert_raises, check, preserved_state

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: count, then measure
#
# Three numbers describe the cost of running a model:
#
# - **parameters**: how many numbers it trains (and so how many bytes its weights, its
#   gradients and its optimizer state take);
# - **FLOPs**: how many floating-point operations one pass does. For a matrix product
#   $(m \times k)\,(k \times n)$ every one of the $m n$ outputs is a dot product of length $k$:
#   $k$ multiplies and $k$ adds, so
#
#   $$\text{FLOPs}(\text{matmul}) = 2\,m\,k\,n ;$$
#
# - **time and bytes**, which are *measured*, never derived: two ops with the same FLOPs can
#   differ ten-fold in time, because time also depends on how many bytes an op moves.
#
# FLOPs grow faster than bytes: a square matmul does $2n^3$ FLOPs on $3n^2$ numbers, so its
# **arithmetic intensity** (FLOPs per byte moved) grows with $n$, while an elementwise add
# does 1 FLOP per 12 bytes whatever its size. The picture shows both; it is why a profile of
# a small model is often dominated by cheap-looking elementwise ops and copies, and a big
# model by its matmuls.

# %%
def draw_intensity(ax):
    """FLOPs per byte moved for a float32 square matmul and an elementwise add, against n."""
    n = np.logspace(0, 4, 60)
    ax.loglog(n, 2 * n**3 / (3 * n**2 * 4), label="matmul n×n @ n×n: 2n³ FLOPs / 12n² bytes")
    ax.loglog(n, np.full_like(n, 1 / 12), label="add of two n×n: n² FLOPs / 12n² bytes")
    ax.set_xlabel("n (matrix side)")
    ax.set_ylabel("FLOPs per byte moved (float32)")
    ax.set_title("Arithmetic intensity: why FLOPs alone do not predict time")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)


fig, ax = plt.subplots(figsize=(7, 4))
draw_intensity(ax)
fig.tight_layout()
plt.show()

# %% [markdown]
# **The counting convention.** FLOP counts are a convention, so this module fixes one and
# uses it everywhere:
#
# - a multiply, an add, a subtract, a divide, a compare, and one `exp`/`log`/`sqrt`/`tanh`
#   each count as **1 FLOP** (a transcendental really costs tens of instructions; counters
#   such as PyTorch's treat it as one or ignore it);
# - a reduction over $n$ numbers (a sum, a max) costs $n$: each number is accumulated once
#   (so a dot product of length $k$ costs one multiply and one accumulate per pair);
# - moving data costs **0 FLOPs**: views, copies, indexing, `cat`, `where`/`masked_fill`,
#   embedding lookups, and every op whose result is not floating (masks, comparisons,
#   indices). They still cost *time*, and the profiler will show how much.
#
# The file you build starts here.

# %%
#| export
"""Profiling (module 14): parameter counts, analytic FLOPs per op, and a profiler on the
dispatch path (`tinytorch.profiler.profile`, like `torch.profiler.profile`), with memory and
latency helpers."""
import math
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np

from tinytorch._tensor import Tensor, broadcast_shapes
from tinytorch.nn.conv import _pair  # module 09's: _pair(value, name, op) -> a pair of ints (name, op: for its errors)
from tinytorch.utils.dispatch import DispatchMode
from tinytorch.utils.timing import pinned_threads, time_samples

__all__ = ["parameter_counts", "count_parameters", "matmul_flops", "conv2d_flops",
           "softmax_flops", "layer_norm_flops", "attention_flops", "FLOP_RULES",
           "BACKWARD_FLOP_RULES", "op_flops", "output_bytes", "FunctionEvent",
           "FunctionEventAvg", "EventList", "profile", "saved_activation_bytes",
           "record_function", "self_times", "training_memory", "peak_memory", "latencies", "latency",
           "layer_report"]


# %% [markdown]
# ## 2. Parameters, each counted once
#
# A model's parameter count is the number of scalars the optimizer updates. Per layer it says
# where the weights are; in total it says how many bytes the weights, their gradients and the
# optimizer's state take. One trap: a **shared** parameter. GPT *ties* its output head to its
# token table (`head.weight = tok_emb.weight`, module 13): the same `Parameter` object sits in
# two modules, is trained once, and must be counted once. `model.parameters()` already
# yields each object once; your per-layer count must keep that promise too.
#
# PyTorch has no built-in for this; the idiom is `sum(p.numel() for p in model.parameters())`,
# and per-layer counts come from walking `named_modules()`, as you do here.
#
# <details><summary>Hint 1</summary>
#
# `named_modules()` visits the model and all its descendants, each module once;
# `module.parameters(recurse=False)` gives only the parameters registered on that module.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Two modules holding the same parameter hold the same *object*: compare identities, not
# values or shapes.
# </details>
#
# <details><summary>The approach</summary>
#
# A tied parameter must be credited exactly once, to the first module that holds it, so the
# walk has to remember what it has already credited. What identifies "the same parameter":
# its values, its shape, or the object? And which of a module's parameters are its own,
# not its children's (they get their own turn in the walk)?
# </details>

# %% nbgrader={"grade": false, "grade_id": "parameter-counts", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def parameter_counts(model):
    """Parameters per module, each shared Parameter once.

    Contract: `model` a Module. Returns a dict {module name: int}, in `model.named_modules()`
    order ("" names the model itself; dotted module names such as "0" or "blocks.0.ln1" its
    descendants): for each
    module, the number of scalars in the parameters registered directly on it (not on its
    children), leaving out parameters an earlier module was already credited with. Modules
    credited with 0 are left out. Every registered Parameter counts, frozen ones
    (requires_grad False) included. The values add up to the number of distinct parameter
    scalars: a Parameter held by two modules (a tied head) counts once, at the first holder.
    """
    # Idea: which module should a Parameter held by two modules be credited to, and how do you know it is the same one?
    ### BEGIN SOLUTION
    seen = set()
    counts = {}
    for name, module in model.named_modules():
        n = 0
        for p in module.parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        if n:
            counts[name] = n
    return counts
    ### END SOLUTION


def count_parameters(model):
    """The number of distinct parameter scalars of `model`, frozen ones included (the sum of
    parameter_counts)."""
    return sum(parameter_counts(model).values())

# %% nbgrader={"grade": true, "grade_id": "test-parameter-counts", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():  # building layers draws from tinytorch's generator: put it back afterwards
    _mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2, bias=False))
    _counts = parameter_counts(_mlp)
    print("MLP:", _counts)
    assert_equal(list(_counts.items()), [("0", 4 * 3 + 3), ("2", 3 * 2)],
                 "per-layer counts of Linear(4,3)+ReLU+Linear(3,2, no bias), in named_modules() order")

    _tied = nn.Sequential(nn.Linear(5, 5, bias=False), nn.Linear(5, 5, bias=False))
    _tied[1].weight = _tied[0].weight  # one Parameter, two layers
    print("tied:", parameter_counts(_tied))
    assert_equal(parameter_counts(_tied), {"0": 25}, "two layers sharing one 5x5 weight: 25, at the first")
    assert_equal(count_parameters(_tied), 25, "a shared weight counts once in the total")
    _bn = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3))
    assert_equal(parameter_counts(_bn), {"0": 3 * 9 + 3, "1": 3 + 3}, "Conv2d(1, 3, 3) + BatchNorm2d(3): the "
                 "BatchNorm's weight and bias count; its running mean and variance are buffers, not parameters")
    _frozen = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    _frozen[0].weight.requires_grad_(False)
    assert_equal(parameter_counts(_frozen), {"0": 6, "1": 3}, "a frozen weight (requires_grad False) still counts: "
                 "it is stored, loaded and shipped like any other")

    _gpt = nn.GPT(nn.GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2))
    _gcounts = parameter_counts(_gpt)
    assert_equal(count_parameters(_gpt), _gpt.num_parameters(), "GPT (tied head): total = num_parameters()")
    check("head" not in _gcounts, "the tied head is credited to the token table, not again",
          got=_gcounts.get("head"), expected=None)
    assert_equal(_gcounts["tok_emb"], 11 * 16, "the token table: vocab x d_model")
    assert_equal(list(_gcounts), [name for name, _ in _gpt.named_modules() if name in _gcounts],
                 "the GPT's counts in named_modules() order (the order of the model's own listing)")
    check(all(type(v) is int for v in _gcounts.values()), "the counts are Python ints (exact however large; "
          "a numpy integer is not)", got=sorted({type(v).__name__ for v in _gcounts.values()}), expected=["int"])
print("✓ parameter_counts: tied GPT total", count_parameters(_gpt), "=", _gpt.num_parameters())

# %% [markdown]
# ## 3. FLOP formulas
#
# ### 3.1 Matmul
#
# `matmul` follows numpy's rules (module 01): the last two dimensions are matrices, the ones
# before broadcast as a batch, and a 1-D operand is a vector (a row on the left, a column on
# the right). Count one 2-D product $(m, k) @ (k, n)$ with the convention of section 1: how
# many output elements, and what does each cost? Then the batch: how many such products?
#
# <details><summary>Hint 1</summary>
#
# Turn a 1-D left operand of shape `(k,)` into `(1, k)` and a 1-D right operand into `(k, 1)`:
# the FLOPs do not change, and every case is then a batch of 2-D products.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The batch is `broadcast_shapes` of the two leading parts; its size is the product of its
# entries (1 for an empty batch).
# </details>
#
# <details><summary>The approach</summary>
#
# Once the vectors are read as matrices, every case is a batch of identical 2-D products:
# the count is one product's count times how many there are. What must hold between the
# shapes before anything is counted? And why should a count for a large model be a Python
# int, not a numpy one?
# </details>

# %% nbgrader={"grade": false, "grade_id": "matmul-flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def matmul_flops(a_shape, b_shape):
    """FLOPs of `a @ b` for operands of shapes a_shape and b_shape (numpy's matmul rules).

    Contract: shapes are tuples of ints with at least one dimension each. Returns the Python
    int count of the whole batch of matrix products under section 1's convention, where
    (m, k) and (k, n) are the matrix dimensions (a 1-D `a` is one row, a 1-D `b` is one
    column) and the batch is the broadcast of the leading dimensions. Raises ValueError naming both shapes when the inner dimensions differ, and
    the ShapeError of `broadcast_shapes` when the leading dimensions do not broadcast.
    """
    # Idea: every output is a dot product of length k: k multiplies and k adds.
    ### BEGIN SOLUTION
    a, b = tuple(a_shape), tuple(b_shape)
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul_flops: inner dimensions differ: {a} @ {b}")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    m, k, n = a2[-2], a2[-1], b2[-1]
    return 2 * math.prod(batch) * m * k * n
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-matmul-flops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
print("(3, 4) @ (4, 5):", matmul_flops((3, 4), (4, 5)), "FLOPs")
assert_equal(matmul_flops((3, 4), (4, 5)), 2 * 3 * 4 * 5, "(3,4)@(4,5)")
assert_equal(matmul_flops((4,), (4, 5)), 2 * 4 * 5, "a vector on the left is one row")
assert_equal(matmul_flops((3, 4), (4,)), 2 * 3 * 4, "a vector on the right is one column")
assert_equal(matmul_flops((4,), (4,)), 2 * 4, "a dot product of length 4")
assert_equal(matmul_flops((2, 1, 3, 4), (6, 4, 5)), 2 * (2 * 6) * 3 * 4 * 5, "batch (2,1) and (6,) broadcast to (2,6)")
assert_equal(matmul_flops((7, 3, 4), (4, 5)), 7 * 2 * 3 * 4 * 5, "a 2-D right operand broadcasts over the batch")
assert_equal(matmul_flops((5,), (2, 5, 3)), 2 * 2 * 5 * 3, "a vector on the left against a batch of 2 matrices")
assert_equal(matmul_flops((3, 2, 4), (3, 4, 5)), 3 * 2 * 2 * 4 * 5, "batch (3,) with batch (3,): 3 products, not 9")
check(isinstance(matmul_flops((3, 4), (4, 5)), int), "FLOPs are a Python int", got=type(matmul_flops((3, 4), (4, 5))))
assert_raises(ValueError, matmul_flops, (3, 4), (5, 6), match=r"\(3, 4\).*\(5, 6\)")
_clash = assert_raises(ValueError, matmul_flops, (2, 3, 4), (5, 4, 6), what="batches 2 and 5 do not broadcast")
check(isinstance(_clash, tinytorch.ShapeError), "batches that do not broadcast raise broadcast_shapes' ShapeError "
      "(module 01's, naming both shapes), not numpy's ValueError", got=type(_clash).__name__)
print("✓ matmul_flops: batched (2,1,3,4)@(6,4,5) =", matmul_flops((2, 1, 3, 4), (6, 4, 5)))

# %% [markdown]
# ### 3.2 Conv2d: the im2col matmul
#
# Module 09 computed a convolution as **one matrix product**: im2col lays every
# $k_h \times k_w$ window of every input channel out as a column, so the output is
#
# $$W \cdot \text{cols}: \quad \text{one row per filter, one column per window},$$
#
# plus one add per output element for the bias: your matmul count does the rest, once you
# know the two matrices' shapes. The output size $H_o \times W_o$ is the one you derived in
# module 09.
#
# <details><summary>Hint 1</summary>
#
# Write down the shapes of the two matrices of the im2col product; their FLOPs are those of
# any matmul. How many windows (columns) are there?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `stride` and `padding` may be an int or a pair; `_pair` (provided) gives a pair.
# </details>
#
# <details><summary>The approach</summary>
#
# The shapes must agree before anything is counted. Everything after that is the picture
# above: name the three sizes of the product from the layer's shapes, and let the function
# you already wrote count it.
# </details>

# %% nbgrader={"grade": false, "grade_id": "conv2d-flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def conv2d_flops(input_shape, weight_shape, stride=1, padding=0, bias=True):
    """FLOPs of conv2d(x, w, b, stride, padding) computed as module 09's im2col matmul.

    Contract: input_shape (N, C, H, W), weight_shape (C_out, C, kh, kw); stride and padding
    ints or (h, w) pairs; bias a bool. Returns the Python int count of the im2col matrix
    product, plus one add per output element when bias is True, for module 09's output size
    (partial windows dropped). Raises ValueError naming both shapes when the input's channels
    differ from the weight's.
    """
    # Idea: a convolution is one matmul of the filters with every window.
    ### BEGIN SOLUTION
    N, C, H, W = input_shape
    C_out, Cw, kh, kw = weight_shape
    if C != Cw:
        raise ValueError(f"conv2d_flops: input {tuple(input_shape)} has {C} channels but the "
                         f"weight {tuple(weight_shape)} expects {Cw}")
    (sh, sw), (ph, pw) = _pair(stride, "stride", "conv2d_flops"), _pair(padding, "padding", "conv2d_flops")
    Ho = (H + 2 * ph - kh) // sh + 1
    Wo = (W + 2 * pw - kw) // sw + 1
    flops = 2 * C_out * (C * kh * kw) * (N * Ho * Wo)
    if bias:
        flops += N * C_out * Ho * Wo
    return flops
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-conv2d-flops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# (2, 3, 8, 8) * (4, 3, 3, 3), padding 1: 8x8 outputs; each of 2·4·64 outputs dots 27 numbers
_hand = 2 * 4 * 27 * (2 * 8 * 8) + 2 * 4 * 8 * 8
print("conv (2,3,8,8) * (4,3,3,3), pad 1:", conv2d_flops((2, 3, 8, 8), (4, 3, 3, 3), 1, 1), "FLOPs; by hand", _hand)
assert_equal(conv2d_flops((2, 3, 8, 8), (4, 3, 3, 3), 1, 1), _hand, "3x3 conv, padding 1, with bias")
assert_equal(conv2d_flops((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, bias=False), 2 * 4 * 27 * 128, "the same without bias")
assert_equal(conv2d_flops((1, 2, 9, 7), (5, 2, 3, 2), stride=2, padding=0, bias=False),
             2 * 5 * (2 * 3 * 2) * (4 * 3), "stride 2, kernel (3,2): H_out = 4, W_out = 3")
assert_equal(conv2d_flops((1, 2, 9, 7), (5, 2, 3, 2), stride=2, padding=0, bias=True),
             2 * 5 * (2 * 3 * 2) * (4 * 3) + 5 * (4 * 3),
             "the same with bias: one add per output element, and the output is 4x3, not the input's 9x7")
assert_equal(conv2d_flops((1, 1, 5, 5), (1, 1, 3, 3), stride=(2, 1), padding=(1, 0), bias=False),
             2 * 9 * (3 * 3), "stride (2,1), padding (1,0): H_out = 3, W_out = 3")
assert_equal(conv2d_flops((1, 2, 9, 11), (3, 2, 3, 5), stride=(2, 3), padding=(1, 2), bias=False),
             2 * 3 * (2 * 3 * 5) * (5 * 4), "input 9x11, kernel (3,5), stride (2,3), padding (1,2): H_out = 5, W_out = 4")
assert_equal(conv2d_flops((1, 1, 10, 5), (1, 1, 3, 3), stride=2, padding=0, bias=False), 2 * 9 * (4 * 2),
             "input 10x5, kernel 3, stride 2: (10 - 3) / 2 = 3.5 steps fit 3 times, so H_out = 4 (the last "
             "partial window is dropped), W_out = 2")
assert_raises(ValueError, conv2d_flops, (1, 3, 5, 5), (2, 4, 3, 3), match=r"\(2, 4, 3, 3\)")
print("✓ conv2d_flops: stride 2, kernel (3,2) on 9x7 ->", conv2d_flops((1, 2, 9, 7), (5, 2, 3, 2), 2, 0, False))

# %% [markdown]
# ### 3.3 Softmax and LayerNorm: per row, times the rows
#
# Both ops work on **rows**: softmax on the slices along `dim`, LayerNorm on the trailing
# `normalized_shape`. So their FLOPs are (FLOPs of one row of length $n$) × (number of rows
# = numel / $n$). Count one row with the convention of section 1, following what the stable
# algorithms of modules 02 and 13 do:
#
# | op | steps on one row of $n$ |
# |---|---|
# | softmax | the max, subtract it, exp, the sum, divide by it |
# | log_softmax | the max, subtract it, exp, the sum, the log of the sum, subtract it |
# | layer_norm | the mean (a sum, then one divide), centre, the variance (square, sum, one divide), $1/\sqrt{\text{var} + \epsilon}$ (an add, a sqrt, a divide), normalise |
# | + affine | multiply by weight, add bias |
#
# Count each step with the convention (which of them touch all $n$ numbers, and which
# one number per row?), and write each op's total per row before you code it.
#
# <details><summary>Hint 1 (softmax)</summary>
#
# The row length is the size of dimension `dim`, which may be negative, and need not be the
# last one.
# </details>
#
# <details><summary>The approach (softmax)</summary>
#
# The whole cost is (rows) × (the cost of one row). What is a row's length when the rows
# run along `dim`, and how many rows are there? Two shapes need a thought before any
# division: a 0-d tensor, and a tensor with no elements at all.
# </details>
#
# <details><summary>Hint 1 (layer_norm)</summary>
#
# `normalized_shape` may have several dimensions: n is the product of its sizes.
# </details>
#
# <details><summary>The approach (layer_norm)</summary>
#
# The same shape of answer as softmax's, with a row that may span several trailing
# dimensions. Which steps of the table run only when `affine` is asked for?
# </details>

# %% nbgrader={"grade": false, "grade_id": "row-flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def softmax_flops(shape, dim, log=False):
    """FLOPs of softmax (log=False) or log_softmax (log=True) of a tensor of `shape` over `dim`.

    Contract: `shape` a tuple of ints, `dim` an int in -ndim..ndim-1 (any dim for a 0-d
    shape, which is one row of length 1). Returns the Python int rows × (section 3.3's
    steps on one row, counted with section 1's convention), for rows of n = shape[dim]
    numbers (a whole number of them); 0 for a shape with no elements (a 0 among its sizes).
    """
    # Idea: the cost of one row times the number of rows.
    ### BEGIN SOLUTION
    shape = tuple(shape)
    n = shape[dim] if shape else 1
    numel = math.prod(shape)
    if numel == 0:
        return 0
    rows = numel // n
    return rows * (5 * n + 1 if log else 5 * n)
    ### END SOLUTION


def layer_norm_flops(shape, normalized_shape, affine=True):
    """FLOPs of layer_norm of a tensor of `shape` over its trailing `normalized_shape`.

    Contract: `shape` a tuple of ints whose trailing dims equal the tuple `normalized_shape`.
    Returns the Python int rows × (section 3.3's steps on one row, counted with section
    1's convention, the affine ones only when affine is True), for rows of n =
    numel(normalized_shape) numbers (a whole number of them); 0 for a shape with no elements.
    """
    # Idea: normalising a row is two reductions and three passes over it.
    ### BEGIN SOLUTION
    n = math.prod(tuple(normalized_shape))
    numel = math.prod(tuple(shape))
    if numel == 0:
        return 0
    rows = numel // n
    return rows * (5 * n + 5 + (2 * n if affine else 0))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-row-flops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# Your per-row totals are compared in section 4.5, where your profiler counts the steps one
# op at a time. Here: rows, dims and the shapes that need a thought.
print("softmax of (4, 10) over dim 1:", softmax_flops((4, 10), 1), "FLOPs; over dim 0:", softmax_flops((4, 10), 0))
assert_equal(softmax_flops((4, 10), -1), softmax_flops((4, 10), 1), "dim -1 is dim 1")
assert_equal(softmax_flops((12, 10), 1), 3 * softmax_flops((4, 10), 1), "three times the rows: three times the FLOPs")
assert_equal(softmax_flops((3, 4, 10), -1), 3 * softmax_flops((4, 10), -1), "rows of 10 in a (3, 4, 10) tensor: 12 of them")
assert_equal(softmax_flops((10, 4), 0), softmax_flops((4, 10), 1), "over dim 0 of (10, 4): 4 rows of 10")
assert_equal(softmax_flops((2, 7, 3), 1, log=True), softmax_flops((6, 7), 1, log=True),
             "log_softmax over the middle dim of (2, 7, 3): 6 rows of 7")
check(softmax_flops((4, 10), 1, log=True) > softmax_flops((4, 10), 1), "log_softmax takes one more step per row than "
      "softmax does", got=(softmax_flops((4, 10), 1, log=True), softmax_flops((4, 10), 1)))
assert_equal(softmax_flops((0, 5), 1), 0, "an empty tensor costs nothing")
assert_equal(softmax_flops((5, 0), 1), 0, "rows of length 0 cost nothing (and divide by nothing)")
assert_equal(softmax_flops((), 0), softmax_flops((1,), 0), "a 0-d tensor is one row of length 1")
assert_equal(layer_norm_flops((2, 3, 4, 5), (4, 5)), layer_norm_flops((6, 20), (20,)),
             "normalized over (4, 5): 6 rows of 20")
assert_equal(layer_norm_flops((12, 8), (8,)), 2 * layer_norm_flops((6, 8), (8,)), "twice the rows: twice the FLOPs")
check(layer_norm_flops((6, 8), (8,)) > layer_norm_flops((6, 8), (8,), affine=False),
      "the affine steps cost FLOPs", got=(layer_norm_flops((6, 8), (8,)), layer_norm_flops((6, 8), (8,), affine=False)))
assert_equal(layer_norm_flops((3, 0), (0,)), 0, "rows of length 0 cost nothing (and divide by nothing)")
assert_equal(layer_norm_flops((0, 4), (4,)), 0, "no rows cost nothing")
check(type(softmax_flops((4, 10), 1)) is int and type(layer_norm_flops((6, 8), (8,))) is int,
      "FLOP counts are Python ints (exact however large; a division leaves a float)",
      got=(type(softmax_flops((4, 10), 1)).__name__, type(layer_norm_flops((6, 8), (8,))).__name__))
print("✓ softmax_flops and layer_norm_flops: rows and dims (the totals: section 4.5)")

# %% [markdown]
# ### 3.4 One table for every op
#
# The profiler will meet ops by **name** (`"matmul"`, `"relu"`, `"conv2d"`, ...), with the
# shapes of their inputs, the shape of their output and their attributes. `FLOP_RULES` maps
# each name to a rule `(input_shapes, output_shape, attrs) -> FLOPs`, built on your formulas
# and the convention of section 1 (provided: this is the bookkeeping, the formulas are yours).
# Elementwise ops cost a fixed number of FLOPs per output element; losses are an elementwise
# part plus a reduction. An op missing from the table moves data and costs 0.
#
# | op | FLOPs | op | FLOPs |
# |---|---|---|---|
# | add, sub, mul, div, exp, log, sqrt, tanh | 1 per element | matmul | your `matmul_flops` |
# | relu | 1 per element (a compare) | conv2d | your `conv2d_flops` |
# | leaky_relu | 2 per element | softmax, log_softmax | your `softmax_flops` |
# | sigmoid $1/(1+e^{-x})$ | 4 per element | layer_norm | your `layer_norm_flops` |
# | gelu exact / tanh form | 5 / 9 per element | max_pool2d | $k_h k_w$ per output |
# | sum, max, amax | $n$ (the input's size) | avg_pool2d | $k_h k_w + 1$ per output |
# | mean | $n$, plus 1 per output element (its divide) | batch_norm | 4 per element |
# | mse_loss $(x-y)^2$, mean | $2n + (n + 1)$ | nll_loss, mean over $N$ rows | $N + (N + 1)$ |
#
# `cross_entropy` is not one op: it dispatches `log_softmax` and `nll_loss`, so its FLOPs are
# theirs: your log_softmax count of the $(N, C)$ scores plus the `nll_loss` row above.
#
# Backward rules are named like their nodes (`"MatmulBackward"`, `"Conv2DBackward"`: module 01's
# `Node.name()` title-cases each part of the op name, and `"conv2d".title()` is `"Conv2D"`). As PyTorch's
# `FlopCounterMode` does, we count backward FLOPs for the big ops only: a matmul's backward
# does one product of the forward's size per input that needs a gradient; a conv2d's backward
# always computes the weight's gradient (module 09's rule) and the input's only when the input
# needs one, so one or two products.

# %%
#| export
# FLOPs per output element of the elementwise ops (the convention of the notebook, section 1)
POINTWISE_COST = {"add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "abs": 1, "pow": 1,
                  "exp": 1, "log": 1, "sqrt": 1, "maximum": 1, "minimum": 1, "clamp": 2,
                  "relu": 1, "leaky_relu": 2, "sigmoid": 4, "tanh": 1, "dropout": 1,
                  # (x - mean)·invstd·weight + bias, with the channel statistics given. In
                  # training, BatchNorm computes those statistics (a few FLOPs per element) in
                  # numpy before its op is dispatched: real work the profiler does not see
                  "batch_norm": 4}
# GELU: exact x/2·(1 + erf(x/√2)) is 5; the tanh form x/2·(1 + tanh(√(2/π)(x + 0.044715x³))) is 9
GELU_COST = {"none": 5, "tanh": 9}


def _numel(shape):
    return math.prod(tuple(shape))


def _reduction(shape, reduction):
    """FLOPs of reducing `shape` elements with "mean" (n + 1), "sum" (n) or "none" (0)."""
    n = _numel(shape)
    return {"mean": n + 1, "sum": n}.get(reduction, 0)


def _pointwise_rule(cost):
    return lambda ins, out, attrs: cost * _numel(out)


def _nll_rows(shape):
    return _numel(shape) // shape[1] if len(shape) > 1 else 1


FLOP_RULES = {name: _pointwise_rule(cost) for name, cost in POINTWISE_COST.items()}
FLOP_RULES.update({
    "gelu": lambda ins, out, a: GELU_COST[a.get("approximate", "none")] * _numel(out),
    "sum": lambda ins, out, a: _numel(ins[0]),
    "amax": lambda ins, out, a: _numel(ins[0]),
    "amin": lambda ins, out, a: _numel(ins[0]),
    "max": lambda ins, out, a: _numel(ins[0]),
    "min": lambda ins, out, a: _numel(ins[0]),
    "mean": lambda ins, out, a: _numel(ins[0]) + _numel(out),
    "matmul": lambda ins, out, a: matmul_flops(ins[0], ins[1]),
    "conv2d": lambda ins, out, a: conv2d_flops(ins[0], ins[1], a["stride"], a["padding"], bias=len(ins) == 3),
    "max_pool2d": lambda ins, out, a: _numel(out) * _numel(_pair(a["kernel_size"], "kernel_size", "max_pool2d")),
    "avg_pool2d": lambda ins, out, a: _numel(out) * (_numel(_pair(a["kernel_size"], "kernel_size", "avg_pool2d")) + 1),
    "softmax": lambda ins, out, a: softmax_flops(ins[0], a["dim"]),
    "log_softmax": lambda ins, out, a: softmax_flops(ins[0], a["dim"], log=True),
    "layer_norm": lambda ins, out, a: layer_norm_flops(ins[0], a["normalized_shape"], affine=len(ins) > 1),
    "mse_loss": lambda ins, out, a: 2 * _numel(ins[0]) + _reduction(ins[0], a["reduction"]),
    "nll_loss": lambda ins, out, a: _nll_rows(ins[0]) + _reduction((_nll_rows(ins[0]),), a["reduction"]),
})


def _conv_product(node):
    x, w = node.inputs[0], node.inputs[1]
    return conv2d_flops(x.shape, w.shape, node.attrs["stride"], node.attrs["padding"], bias=False)


BACKWARD_FLOP_RULES = {
    "MatmulBackward": lambda node: matmul_flops(node.inputs[0].shape, node.inputs[1].shape)
    * sum(1 for x in node.inputs if x.requires_grad),
    # module 09's rule always computes the weight's gradient, the input's only when needed
    "Conv2DBackward": lambda node: _conv_product(node) * (1 + int(node.inputs[0].requires_grad)),
}


def op_flops(op, args, attrs, output):
    """Analytic FLOPs of one dispatched op: `op` its name, `args`/`attrs` what it was called
    with (Tensors; for a backward rule, the node and the gradient), `output` what it returned.
    0 for ops outside the tables and for results that are not floating (masks, indices)."""
    if op in BACKWARD_FLOP_RULES:
        return int(BACKWARD_FLOP_RULES[op](args[0]))
    if op not in FLOP_RULES:
        return 0
    dtype = getattr(output, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "fc":
        return 0
    ins = [tuple(a.shape) for a in args if isinstance(a, (Tensor, np.ndarray))]
    try:
        return int(FLOP_RULES[op](ins, tuple(np.shape(output)), attrs))
    except KeyError as missing:
        raise KeyError(f"op_flops({op!r}): its FLOP rule needs the op's option {missing}, which `attrs` "
                       f"({attrs}) lacks: pass the options the op was called with") from None

# %% [markdown]
# A quick look: the rule of a `Linear(784, 128)` forward on a batch of 64 is a matmul plus an
# add for the bias.

# %%
print("matmul (64,784)@(784,128):", FLOP_RULES["matmul"]([(64, 784), (784, 128)], (64, 128), {}), "FLOPs")
print("bias add:                 ", FLOP_RULES["add"]([(64, 128), (128,)], (64, 128), {}), "FLOPs")

# %% [markdown]
# ## 4. The profiler
#
# Every op of tinytorch passes through module 01's `apply`, and every backward rule through
# module 06's `call_rule`. Both hand the op to the active **`DispatchMode`s** (module 01's
# documented extension point, PyTorch's `TorchDispatchMode`): a mode's
# `dispatch(op, fn, args, kwargs)` receives the op's name and a function `fn` that runs it, and
# returns what `fn` returns. A profiler is a mode that runs each op **once**, times it, and
# writes down what it saw. Nothing of an earlier module is patched; with no mode active the
# dispatch path pays one check of an empty list.
#
# ```
#   x @ W.T  ──►  apply("matmul", forward, x, W.T)
#                   │  a mode is active?  no ──► forward(x, W.T)
#                   └─ yes ──► profile.dispatch("matmul", fn, (x, W.T), {})
#                                  start clock ─► out = fn(...) ─► stop clock
#                                  record FunctionEvent(name, shapes, µs, FLOPs, bytes)
#                                  return out
# ```
#
# What one op contributes mirrors PyTorch's `FunctionEvent` (the rows behind
# `prof.events()`): `name`, `input_shapes`, `cpu_time_total` (microseconds), `flops`, and
# `cpu_memory_usage` (bytes the op allocated for its result).
#
# ### 4.1 The bytes of a result
#
# What does an op's result cost in memory? A compute op's forward returns a fresh numpy
# array. A **view** op (transpose, reshape of a contiguous tensor, indexing with slices)
# returns a Tensor that shares its input's storage: it allocates nothing. A backward rule
# returns one gradient per input (a tuple; `None` where an input needs none).
#
# <details><summary>Hint 1</summary>
#
# A numpy array knows its size in bytes.
# </details>
#
# <details><summary>The approach</summary>
#
# The question for every result is "is this fresh memory, as far as the result shows?".
# Which of the kinds of result above are fresh arrays, which are views of memory that
# already existed, and which hold several results (each asked the same question)?
# </details>

# %% nbgrader={"grade": false, "grade_id": "output-bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def output_bytes(result):
    """Bytes of new memory held by the result of one dispatched op.

    Contract: `result` is what the op's function returned: one of the kinds of result above
    (a tuple or a list of them, with None for an input that needs no gradient), or anything
    else. Returns a Python int: the bytes of the fresh arrays it holds, nothing for a result
    that is a view. (Seen from the result alone this is an upper bound: a backward rule that
    hands back the array it was given is charged for it, as if it had allocated it.)
    """
    # Idea: a view allocates nothing; a fresh array allocates its bytes.
    ### BEGIN SOLUTION
    if isinstance(result, np.ndarray):
        return int(result.nbytes)
    if isinstance(result, (tuple, list)):
        return sum(output_bytes(r) for r in result if r is not None)
    return 0
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-output-bytes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_arr = np.zeros((3, 5), dtype=np.float32)
print("a (3, 5) float32 array:", output_bytes(_arr), "bytes")
assert_equal(output_bytes(_arr), 60, "a (3,5) float32 array")
assert_equal(output_bytes(np.zeros(4)), 32, "four float64")
assert_equal(output_bytes(Tensor(np.ones((3, 5), dtype=np.float32)).T), 0, "a view (a Tensor result) allocates nothing")
assert_equal(output_bytes((np.zeros(2, dtype=np.float32), None, np.zeros((2, 2)))), 8 + 32, "gradients: a tuple with a None")
assert_equal(output_bytes([np.zeros(3, dtype=np.int64), None]), 24, "a list of gradients, like a tuple")
assert_equal(output_bytes(None), 0, "no result")
print("✓ output_bytes: gradients (float32[2], None, float64[2,2]) =", output_bytes((np.zeros(2, dtype=np.float32), None, np.zeros((2, 2)))))

# %% [markdown]
# ### 4.2 The records: `FunctionEvent`, `FunctionEventAvg`, `EventList`
#
# Provided containers, named as PyTorch names them (`torch.autograd.profiler_util`). An
# `EventList` is a list of events with a `table()` method; `FunctionEventAvg` is one row of
# `key_averages()`, with `cpu_time` the mean time per call.

# %%
#| export
@dataclass
class FunctionEvent:
    """One dispatched op, or one closed `record_function` scope
    (torch.autograd.profiler_util.FunctionEvent)."""
    name: str
    input_shapes: list
    cpu_time_total: float  # microseconds of wall time (a scope's: everything inside it included)
    flops: int
    cpu_memory_usage: int  # bytes of the result
    scope_size: int = None  # None for an op; for a scope, the number of events recorded while it was open

    @property
    def key(self):
        return self.name


@dataclass
class FunctionEventAvg:
    """Events of one name (and, grouped by shape, one list of input shapes) added up."""
    key: str
    count: int = 0
    cpu_time_total: float = 0.0
    flops: int = 0
    cpu_memory_usage: int = 0
    input_shapes: list = None
    scope_size: int = None  # None for a group of ops; for a group of scopes, the events they covered

    @property
    def cpu_time(self):
        """Mean microseconds per call."""
        return self.cpu_time_total / self.count if self.count else 0.0

# %%
#| export
class EventList(list):
    """A list of FunctionEvent or FunctionEventAvg with PyTorch's `table()`."""

    def total_flops(self):
        return sum(e.flops for e in self)

    def total_time(self):
        """Microseconds, summed over the ops (a scope's time is already its ops' and more)."""
        return sum(e.cpu_time_total for e in self if e.scope_size is None)

    def table(self, sort_by=None, row_limit=100):
        """The events as a text table, sorted by the attribute `sort_by` (largest first, e.g.
        "cpu_time_total", "flops", "count"; None keeps their order), at most row_limit rows."""
        rows = list(self)
        if sort_by is not None:
            if rows and not hasattr(rows[0], sort_by):
                raise ValueError(f"table: cannot sort by {sort_by!r}; use cpu_time_total, cpu_time, "
                                 f"flops, cpu_memory_usage or count")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        total_t = self.total_time() or 1.0
        head = (f"{'Name':<22}{'Calls':>7}{'CPU total':>12}{'CPU %':>8}{'CPU avg':>11}"
                f"{'FLOPs':>14}{'GFLOP/s':>9}{'Out bytes':>12}  Input shapes")
        lines = [head, "-" * len(head)]
        for e in rows[:row_limit]:
            count = getattr(e, "count", 1)
            avg = e.cpu_time_total / count if count else 0.0
            rate = e.flops / (e.cpu_time_total * 1e3) if e.cpu_time_total > 0 and e.flops else 0.0
            shapes = e.input_shapes if e.input_shapes is not None else ""
            lines.append(f"{str(e.key)[:21]:<22}{count:>7}{_fmt_us(e.cpu_time_total):>12}"
                         f"{100 * e.cpu_time_total / total_t:>7.1f}%{_fmt_us(avg):>11}"
                         f"{e.flops:>14,}{rate:>9.2f}{e.cpu_memory_usage:>12,}  {str(shapes)[:40]}")
        lines.append("-" * len(head))
        lines.append(f"Time of the ops, summed: {_fmt_us(self.total_time())}; FLOPs total: {self.total_flops():,}")
        return "\n".join(lines)


def _fmt_us(us):
    return f"{us / 1e3:.3f}ms" if us >= 1e3 else f"{us:.1f}us"

# %% [markdown]
# ### 4.3 The record of one op
#
# Now the heart of the profiler: `profile.dispatch`, called once per op while the profiler is
# active. Time **only the op** (the call of `fn`), not your own bookkeeping; run it exactly
# once (running it twice would double its effects and its time for every mode outside yours);
# and return its result untouched, or the program would compute something else under the
# profiler than without it.
#
# <details><summary>Hint 1</summary>
#
# `time.perf_counter()` before and after the call; the difference is in seconds, and the
# record wants microseconds.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The input shapes are those of the arguments that have a shape: Tensors and numpy arrays
# (a backward rule's arguments are its node, which has none, and the gradient, which has).
# </details>
#
# <details><summary>The approach</summary>
#
# The clock must bracket the op and nothing else: what of your own work could land inside
# it if you are careless, and what would that do to the times of small ops? Every field of
# the record is something you already know how to compute (sections 3 and 4.1); the one
# rule is that the program must not notice it is being profiled.
# </details>

# %% nbgrader={"grade": false, "grade_id": "profile-dispatch", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class profile(DispatchMode):
    """Record every op dispatched while active: `with tinytorch.profiler.profile() as prof:`.

    Like torch.profiler.profile: `prof.events()` lists one FunctionEvent per op (forward ops
    by name, "matmul"; backward rules by node name, "MatmulBackward"), and
    `prof.key_averages().table(sort_by="cpu_time_total")` prints them grouped by name.
    Nothing is recorded before `__enter__` or after `__exit__`.
    """

    _active = []  # the profilers now recording, innermost last: where record_function writes

    def __init__(self):
        self._events = []

    def __enter__(self):
        profile._active.append(self)
        return super().__enter__()

    def __exit__(self, *exc_info):
        profile._active.remove(self)
        return super().__exit__(*exc_info)

    def events(self):
        """Every recorded FunctionEvent, each when it finished: ops in the order they ran, and
        each record_function scope after the events recorded inside it (an EventList)."""
        return EventList(self._events)

    def dispatch(self, op, fn, args, kwargs):
        """Run one op and record it.

        Contract: `op` the op's name, `fn(*args, **kwargs)` runs it. Runs the op once, as if no
        profiler were there, and appends one FunctionEvent (section 4.2) describing that
        call: its name; the shapes of its array arguments (Tensors and numpy arrays, in
        order); the time of the op alone, in microseconds of time.perf_counter; its FLOPs
        (op_flops, whose `attrs` are the op's `kwargs`) and the new bytes of its result
        (output_bytes).
        """
        # Idea: time the op and nothing else, then write down what it was.
        ### BEGIN SOLUTION
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        elapsed_us = (time.perf_counter() - start) * 1e6
        shapes = [tuple(a.shape) for a in args if isinstance(a, (Tensor, np.ndarray))]
        self._events.append(FunctionEvent(op, shapes, elapsed_us, op_flops(op, args, kwargs, result),
                                          output_bytes(result)))
        return result
        ### END SOLUTION

# %% [markdown]
# The check runs a small MLP forward and backward under your profiler, *inside* a second,
# plain mode that only writes down the name of every op that reaches it. Modes nest: your
# profiler sees each op first, and the `fn` it calls passes the op on to the outer logger, so
# the two lists agree exactly when your profiler runs every op once and records it once.

# %% nbgrader={"grade": true, "grade_id": "test-profile-dispatch", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
class _OpLog(tinytorch.utils.dispatch.DispatchMode):
    """A reference mode: the names of the ops that reach it, in order."""
    def __init__(self):
        self.names = []

    def dispatch(self, op, fn, args, kwargs):
        self.names.append(op)
        return fn(*args, **kwargs)


with preserved_state():
    tinytorch.manual_seed(0)
    _net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    _x = tinytorch.randn(4, 6)
    _y = _net(_x)  # outside any profiler
    _log, _prof = _OpLog(), profile()
    with _log:
        with _prof as _same:
            _out = _net(_x)
            _out.sum().backward()
    _names = [e.name for e in _prof.events()]
    print("recorded:", _names)
    check(_same is _prof, "`with profile() as prof` gives the profiler itself", got=_same)
    _alone = _OpLog()
    with _alone:
        _net(_x).sum().backward()
    assert_equal(_log.names, _alone.names, "the ops that reached a mode around the profiler, against the same "
                 "forward and backward with no profiler: each op runs once, through your dispatch")
    assert_equal(_names, _log.names, "one record per op, in the order the ops ran")
    assert_equal(_names[:7], ["permute", "matmul", "add", "relu", "permute", "matmul", "add"],
                 "the forward of Linear, ReLU, Linear")
    check("MatmulBackward" in _names and "ReluBackward" in _names, "backward rules are recorded by node name",
          got=_names[7:])
    assert_close(_out.numpy(), _y.numpy(), rtol=0, atol=0, what="the profiled forward computes the same values")
    _mm = _prof.events()[1]
    assert_equal((_mm.input_shapes, _mm.flops, _mm.cpu_memory_usage), ([(4, 6), (6, 5)], 2 * 4 * 6 * 5, 4 * 5 * 4),
                 "the first matmul: (input shapes, FLOPs, output bytes)")
    assert_equal(_prof.events()[0].cpu_memory_usage, 0, "W.T (a permute) is a view: 0 bytes")
    _gshape = [e.input_shapes for e in _prof.events() if e.name == "ReluBackward"]
    assert_equal(_gshape, [[(4, 5)]], "a backward rule's input shape is its gradient's")
    with profile() as _p2:
        _t0 = time.perf_counter()
        _net(_x)
        _wall = (time.perf_counter() - _t0) * 1e6
    _sum = _p2.events().total_time()
    check(0 < _sum <= _wall, "op times (µs) are positive and fit inside the block's wall time",
          got=f"{_sum:.1f} µs of ops", expected=f"at most {_wall:.1f} µs")
    with profile() as _p3:
        F.log_softmax(_x, dim=0)
    assert_equal(_p3.events()[0].flops, softmax_flops((4, 6), 0, log=True),
                 "a log_softmax over dim 0 of (4, 6): the op's own options (dim) reach op_flops")
    _n = len(_prof.events())
    _net(_x).sum().backward()  # after the block: nothing more is recorded
    assert_equal(len(_prof.events()), _n, "nothing recorded after the with block")
    assert_equal(profile().events(), [], "a profiler never entered records nothing")


def _mismatched_add_under_profile():
    with profile():
        tinytorch.ones(2, 3) + tinytorch.ones(4, 5)


_failed = profile()


def _mismatched_add_recorded():
    with _failed:
        tinytorch.ones(2, 3) + tinytorch.ones(4, 5)


assert_raises(tinytorch.ShapeError, _mismatched_add_under_profile, match=r"\(2, 3\)",
              what="adding (2, 3) and (4, 5) under profile(): the op's own error (raised inside fn), as without "
                   "the profiler")
assert_raises(tinytorch.ShapeError, _mismatched_add_recorded, match=r"\(2, 3\)")
check("add" not in [e.name for e in _failed.events()], "an add that raised produced nothing: the profile holds no "
      "event for it (its time, FLOPs and bytes would describe an op that never ran)",
      got=[e.name for e in _failed.events()], expected="no 'add'")
# A fake clock: the op advances it by 2 ms, and each piece of bookkeeping by a whole second.
_ticks = [100.0]


def _two_ms_op(a):
    _ticks[0] += 0.002
    return a * 2.0


def _slow(f):
    def wrapped(*args):
        _ticks[0] += 1.0
        return f(*args)
    return wrapped


class _FakeTime:
    """Stands in for the time module during this one call: only perf_counter, on the fake clock."""
    perf_counter = staticmethod(lambda: _ticks[0])

    def __getattr__(self, name):
        raise AttributeError(f"this check replaces the time module by a fake clock that has only perf_counter, "
                             f"and your code read time.{name}: the contract's clock is time.perf_counter")


_time_module, _flops_fn, _bytes_fn = time, op_flops, output_bytes
_imported = globals().get("perf_counter")  # a `from time import perf_counter` of yours is replaced too
_real_clock = _time_module.perf_counter    # and so is the time module's own, for an import inside dispatch
time = _FakeTime()  # what `time.perf_counter()` reads, for this call
op_flops, output_bytes = _slow(_flops_fn), _slow(_bytes_fn)
if _imported is not None:
    perf_counter = _FakeTime.perf_counter
_time_module.perf_counter = _FakeTime.perf_counter
try:
    _fake = profile()
    _fake.dispatch("mul", _two_ms_op, (np.ones(3),), {})
finally:
    _time_module.perf_counter = _real_clock
    time, op_flops, output_bytes = _time_module, _flops_fn, _bytes_fn
    if _imported is not None:
        perf_counter = _imported
assert_close(_fake.events()[0].cpu_time_total, 2000.0, rtol=1e-6, atol=0,
             what="an op that takes 2 ms by time.perf_counter (a fake clock; the FLOP count and the byte "
                  "count take 1 s each): its cpu_time_total in µs, the op alone")
print(f"✓ profile: {len(_names)} ops recorded once each; first matmul {_mm.flops} FLOPs in {_mm.cpu_time_total:.1f} µs")

# %% [markdown]
# ### 4.4 `key_averages`: the per-op summary
#
# A forward and backward of a real model runs thousands of ops; what you want to know is
# *which kind* of op the time goes to. `key_averages()` groups the events by name (or, with
# `group_by_input_shape=True`, by name and input shapes, as PyTorch does) and adds them up:
# calls, total time, FLOPs, bytes. The rows keep the order in which each group first
# appeared; `table(sort_by=...)` sorts them for display.
#
# <details><summary>Hint 1</summary>
#
# A dict keyed by the group's key remembers the order in which keys were first inserted.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A list of shapes is not hashable; a tuple of tuples is.
# </details>
#
# <details><summary>The approach</summary>
#
# Grouping is a question of keys: what makes two events "the same op" with and without
# `group_by_input_shape`, and what must a key be for a dict to hold it? The rows must come
# out in the order their groups first appeared, without sorting anything.
# </details>

# %% nbgrader={"grade": false, "grade_id": "key-averages", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _key_averages(self, group_by_input_shape=False):
    """The events grouped by op name (torch's prof.key_averages()).

    Contract: returns an EventList of FunctionEventAvg, one per distinct name (or per
    distinct (name, input shapes) when group_by_input_shape is True), in the order each
    group first occurs in self.events(). Each has key = the name, count = the number of its
    events, cpu_time_total, flops and cpu_memory_usage = the sums over its events, and
    input_shapes = the group's shapes (a list of tuples, as the events hold them) when
    grouping by shape, else None.
    """
    # Idea: one accumulator per key, created the first time the key appears.
    ### BEGIN SOLUTION
    groups = {}
    for e in self._events:
        key = (e.name, tuple(map(tuple, e.input_shapes))) if group_by_input_shape else e.name
        if key not in groups:
            groups[key] = FunctionEventAvg(e.name, input_shapes=list(e.input_shapes) if group_by_input_shape else None)
        g = groups[key]
        g.count += 1
        g.cpu_time_total += e.cpu_time_total
        g.flops += e.flops
        g.cpu_memory_usage += e.cpu_memory_usage
    return EventList(groups.values())
    ### END SOLUTION


def _key_averages_with_scopes(self, group_by_input_shape=False):
    """Your _key_averages, with each group of record_function scopes marked (its scope_size
    set), so that a table's total and percentages count the ops alone."""
    groups = _key_averages(self, group_by_input_shape)
    covered = {}
    for e in self._events:
        if e.scope_size is not None:
            covered[e.name] = covered.get(e.name, 0) + e.scope_size
    for group in groups:
        if group.key in covered:
            group.scope_size = covered[group.key]
    return groups


profile.key_averages = _key_averages_with_scopes  # a method of profile; yours is written in its own cell

# %% nbgrader={"grade": true, "grade_id": "test-key-averages", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_p = profile()
_p._events = [FunctionEvent("matmul", [(2, 3), (3, 4)], 10.0, 48, 32), FunctionEvent("add", [(2, 4), (4,)], 1.0, 8, 32),
              FunctionEvent("matmul", [(2, 4), (4, 1)], 4.0, 16, 8), FunctionEvent("matmul", [(2, 3), (3, 4)], 6.0, 48, 32)]
_avg = _p.key_averages()
print(_avg.table(sort_by="cpu_time_total"))
assert_equal([a.key for a in _avg], ["matmul", "add"], "one row per name, in first-seen order")
assert_equal((_avg[0].count, _avg[0].cpu_time_total, _avg[0].flops, _avg[0].cpu_memory_usage), (3, 20.0, 112, 72),
             "matmul: (count, total µs, FLOPs, bytes) summed over its three events")
assert_close(_avg[0].cpu_time, 20.0 / 3, what="matmul's mean time per call")
check(_avg[0].input_shapes is None, "not grouped by shape: no shapes", got=_avg[0].input_shapes)
_by = _p.key_averages(group_by_input_shape=True)
assert_equal([(a.key, a.count) for a in _by], [("matmul", 2), ("add", 1), ("matmul", 1)],
             "grouped by (name, input shapes)")
assert_equal(_by[0].input_shapes, [(2, 3), (3, 4)], "the group's shapes")
_p2 = profile()
_p2._events = [FunctionEvent("add", [(2, 3), (2, 3)], 1.0, 6, 24), FunctionEvent("mul", [(2, 3), (2, 3)], 2.0, 6, 24)]
assert_equal([(a.key, a.count) for a in _p2.key_averages(group_by_input_shape=True)], [("add", 1), ("mul", 1)],
             "an add and a mul on the same shapes, grouped by shape: still two groups (the name is part of the key)")
with profile() as _p3:
    tinytorch.ones(3, 3) @ tinytorch.ones(3, 3)
    tinytorch.ones(3, 3) @ tinytorch.ones(3, 3)
assert_equal([(a.key, a.count, a.flops) for a in _p3.key_averages()], [("matmul", 2, 2 * 54)],
             "two real 3x3 matmuls")
print("✓ key_averages: matmul called", _avg[0].count, "times,", _avg[0].flops, "FLOPs")

# %% [markdown]
# ### 4.5 Attention, as the sum of its ops
#
# `scaled_dot_product_attention` (module 12) is not one op: it dispatches one op per step
# of the formula you wrote in module 12, for every (batch × head) slice at once. Which ops,
# on which shapes? Work them out from module 12's formula (or profile one small call and
# read `prof.events()`: names and input shapes), and derive the count for one head with $L$
# queries, $S$ keys, query/key width $E$ and value width $E_v$ from the formulas you have;
# the check profiles the real op on other shapes and compares. Before you run it: how does the
# cost grow with the sequence length ($L = S = T$), and what does that mean for long
# contexts next to the Linear layers, whose cost grows like $T$?
#
# <details><summary>Hint 1</summary>
#
# The scores have one entry per (query, key) pair. Every step after them works on the
# scores, then on the weights, until the weights meet V.
# </details>
#
# <details><summary>The approach</summary>
#
# Each step is an op whose count you have already written, applied to a shape you know:
# the work is naming those shapes. Which steps cost nothing? Which terms grow with $L \cdot S$,
# and so which part dominates when $L = S = T$ is long?
# </details>

# %% nbgrader={"grade": false, "grade_id": "attention-flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def attention_flops(L, S, E, Ev=None, batch=1):
    """FLOPs of scaled_dot_product_attention on `batch` slices (batch × heads) of L queries
    and S keys of width E, with values of width Ev (default E).

    Contract: positive ints. Returns the Python int count this module's profiler records
    for one call of F.scaled_dot_product_attention on those shapes (with or without a
    mask: masking costs 0), each op counted with this module's formulas.
    """
    # Idea: the ops of module 12's formula, each on a shape you can name.
    ### BEGIN SOLUTION
    Ev = E if Ev is None else Ev
    scores = matmul_flops((L, E), (E, S))
    scale = L * S
    weights = softmax_flops((L, S), -1)
    mix = matmul_flops((L, S), (S, Ev))
    return batch * (scores + scale + weights + mix)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-attention-flops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _profiled_sdpa(batch, L, S, E, Ev, causal):
    """The FLOPs profile() records for one real call (batch slices as (2, batch/2) or (batch,))."""
    lead = (2, batch // 2) if batch % 2 == 0 else (batch,)
    q, k, v = tinytorch.randn(*lead, L, E), tinytorch.randn(*lead, S, E), tinytorch.randn(*lead, S, Ev)
    with profile() as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return prof.events().total_flops()


with preserved_state():
    tinytorch.manual_seed(1)
    for _b, _L, _S, _E, _Ev, _causal in [(1, 4, 6, 8, 8, False), (5, 4, 6, 8, 3, False), (6, 5, 7, 8, 4, True),
                                         (1, 1, 9, 2, 5, False)]:
        _profiled = _profiled_sdpa(_b, _L, _S, _E, _Ev, _causal)
        _got = attention_flops(_L, _S, _E, None if _Ev == _E else _Ev, batch=_b)
        check(_got == _profiled, f"attention_flops(L={_L}, S={_S}, E={_E}, Ev={_Ev}, batch={_b})"
              f"{' (causal)' if _causal else ''} = the FLOPs profiled for one real call (which ops, on which "
              f"shapes? profile one call yourself if the formula is not enough)", got=_got, expected=_profiled)
print(f"✓ attention_flops: equals the profiled sum on four shapes, e.g. L=5, S=7, E=8, Ev=4, 6 slices: "
      f"{attention_flops(5, 7, 8, 4, batch=6):,}")


# %% [markdown]
# ### 4.6 Your row formulas, against the steps they count
#
# Section 3.3 asked you to count softmax and LayerNorm by their steps before coding them.
# Here are those steps written as separate tinytorch ops, each one dispatched and counted by
# your profiler with the per-element table of section 3.4: the total of the steps is what
# your formulas must give.

# %% nbgrader={"grade": true, "grade_id": "test-row-flops-profiled", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
def _softmax_in_steps(x, dim, log):
    """Section 3.3's table, one op per step."""
    shifted = x - x.amax(dim, keepdim=True)
    e = shifted.exp()
    total = e.sum(dim, keepdim=True)
    return shifted - total.log() if log else e / total


def _layer_norm_in_steps(x, ndims, weight=None, bias=None):
    """Section 3.3's table, one op per step, over the last `ndims` dims."""
    dims, n = tuple(range(-ndims, 0)), math.prod(x.shape[-ndims:])
    centred = x - x.sum(dims, keepdim=True) / n
    var = (centred * centred).sum(dims, keepdim=True) / n
    out = centred * (1.0 / (var + 1e-5).sqrt())
    return out if weight is None else out * weight + bias


def _profiled_flops(fn, *args):
    with profile() as prof:
        fn(*args)
    return prof.events().total_flops()


with preserved_state():
    tinytorch.manual_seed(3)
    for _shape, _dim, _log in [((4, 10), 1, False), ((4, 10), 0, False), ((2, 3, 7), 1, True), ((6,), 0, True),
                               ((3, 5, 2), -1, False)]:
        _want = _profiled_flops(_softmax_in_steps, tinytorch.randn(*_shape), _dim, _log)
        check(softmax_flops(_shape, _dim, log=_log) == _want,
              f"{'log_softmax' if _log else 'softmax'} of {_shape} over dim {_dim}: your formula against the "
              f"profiled steps (which of them touch every element, which one number per row?)",
              got=softmax_flops(_shape, _dim, log=_log), expected=_want)
    for _shape, _nd, _affine in [((6, 8), 1, True), ((6, 8), 1, False), ((2, 3, 4, 5), 2, True)]:
        _x = tinytorch.randn(*_shape)
        _wb = (tinytorch.randn(*_shape[-_nd:]), tinytorch.randn(*_shape[-_nd:])) if _affine else ()
        _want = _profiled_flops(_layer_norm_in_steps, _x, _nd, *_wb)
        _got = layer_norm_flops(_shape, _shape[-_nd:], affine=_affine)
        check(_got == _want, f"layer_norm of {_shape} over {_shape[-_nd:]} (affine={_affine}): your formula against "
              f"the profiled steps (which of them touch every element, which one number per row?)",
              got=_got, expected=_want)
print("✓ softmax_flops and layer_norm_flops equal the profiled steps: softmax of (4, 10) =",
      softmax_flops((4, 10), 1), "FLOPs")

# %% [markdown]
# ## 5. Whole models: the records add up
#
# The profiler's records of one forward pass must add up to the model's analytic total. For
# an MLP you can count by hand: each `Linear(in, out)` on a batch of $B$ costs $2B\cdot in
# \cdot out$ for the matmul and $B \cdot out$ for the bias; each ReLU one compare per element.
#
# Before you run the next cell: how many MFLOPs (millions) does one forward pass of the
# digits CNN below cost, for a batch of 64 images of 8×8? Write your guess; the cell after
# counts it with your profiler.

# %%
predicted_cnn_mflops = None  # your number: MFLOPs of one forward pass of the CNN, batch 64

# %%
def digits_cnn():
    """Module 09's digits CNN (as its tests build it): two conv blocks and a classifier."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 10))


_images, _labels = tinytorch.data.load_digits()
x_digits = Tensor((_images[:64, None] / 16.0).astype(np.float32))
y_digits = Tensor(_labels[:64])
with preserved_state():
    tinytorch.manual_seed(0)
    cnn = digits_cnn()
cnn(x_digits)  # a warm-up call: the profile below holds no first-call costs (section 7)
with profile() as prof:
    cnn(x_digits)
measured_mflops = prof.events().total_flops() / 1e6
print(f"profiled forward: {measured_mflops:.3f} MFLOPs in {len(prof.events())} ops "
      + ("(no prediction written)" if predicted_cnn_mflops is None else f"(you predicted {predicted_cnn_mflops})"))
print(prof.key_averages().table(sort_by="flops", row_limit=8))

# %% [markdown]
# The two convolutions do almost all the arithmetic, and the second far more than the first:
# at each of its 4×4 positions it dots 32 filters with 16·9 numbers, eight times the work of
# the first layer's 16 filters of 1·9 numbers at each of four times as many (8×8) positions.
# Whether they also take most of
# the **time** is another question: look at the "CPU %" column. On small tensors the fixed
# cost of each op (Python, the dispatcher, numpy's call overhead, im2col's copies) is
# comparable to its arithmetic, so cheap ops take a larger share of the time than of the
# FLOPs; the shares depend on your CPU and its load.
#
# The check below counts a small MLP by hand, forward and backward.

# %% nbgrader={"grade": true, "grade_id": "test-model-total", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(2)
    _mlp2 = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
    _xb = tinytorch.randn(5, 10)
    with profile() as _pm:
        _loss = F.mse_loss(_mlp2(_xb), tinytorch.zeros(5, 3))
    _hand = (2 * 5 * 10 * 8 + 5 * 8) + 5 * 8 + (2 * 5 * 8 * 3 + 5 * 3) + (2 * 15 + 16)
    assert_equal(_pm.events().total_flops(), _hand, "forward FLOPs: Linear + ReLU + Linear + MSE (mean) by hand")
    with profile() as _pb:
        _loss.backward()
    _bw = sum(e.flops for e in _pb.events() if e.name == "MatmulBackward")
    # first layer: only W needs a gradient (x does not): one product; second layer: two products
    assert_equal(_bw, 2 * 5 * 10 * 8 + 2 * (2 * 5 * 8 * 3), "backward matmul FLOPs: 1 product for layer 1, 2 for layer 2")
# conv, BatchNorm (4 per element), ReLU (1), max-pool (4 compares per output); twice; Linear
_cnn_hand = (conv2d_flops((64, 1, 8, 8), (16, 1, 3, 3), 1, 1) + 5 * 64 * 16 * 64 + 64 * 16 * 16 * 4
             + conv2d_flops((64, 16, 4, 4), (32, 16, 3, 3), 1, 1) + 5 * 64 * 32 * 16 + 64 * 32 * 4 * 4
             + 2 * 64 * 128 * 10 + 64 * 10)
assert_equal(prof.events().total_flops(), _cnn_hand, "the CNN: convs + BatchNorms + ReLUs + pools + Linear by formula")
print(f"✓ records add up: MLP forward {_hand:,} FLOPs; CNN forward {_cnn_hand:,} FLOPs")

# %% [markdown]
# ## 6. Memory: what a training step keeps alive
#
# A training step holds four kinds of memory:
#
# | what | bytes (float32) | why |
# |---|---|---|
# | parameters | $4P$ | the weights |
# | gradients | $4P$ | one `.grad` per parameter |
# | optimizer state | $8P$ for Adam | `exp_avg` and `exp_avg_sq` per parameter (module 07) |
# | activations | grows with the batch | every node of the graph keeps the output it saved for backward |
#
# The activations are the part that depends on the batch and on the model's depth, and the
# one to estimate from the graph: walk it from the loss and add the bytes of each node's saved
# `node.output`. Careful: a view op's output (a transpose, a reshape of a contiguous tensor, a
# slice) shares its input's memory and allocates nothing: it must not be counted again (and
# `W.T` in a Linear would otherwise count the weights as activations).
#
# <details><summary>Hint 1</summary>
#
# The graph is reachable from `output.grad_fn` through each node's `inputs` and their
# `grad_fn`. It can have diamonds (a tensor used twice): visit each node once, and without
# recursion (module 06's engine did the same).
# </details>
#
# <details><summary>Hint 2</summary>
#
# `np.shares_memory(a, b)` says whether two arrays overlap in memory; a node's inputs are
# Tensors, and `x.numpy()` is the array that sees a Tensor's memory.
# </details>
#
# <details><summary>The approach</summary>
#
# This is module 06's graph walk with a different question at each node. A node reached
# twice must be counted once, and a deep network must not exhaust Python's recursion. The
# question at each node: is its saved output new memory, or a window onto an input's
# memory that is already counted (or is a weight, which is not an activation)?
# </details>

# %% nbgrader={"grade": false, "grade_id": "saved-activation-bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def saved_activation_bytes(output):
    """Bytes of the outputs saved by the autograd graph behind `output`.

    Contract: `output` a Tensor computed with grad mode on, whose graph has not been freed
    by a backward. Returns the Python int sum of node.output.nbytes (a node's output is the
    numpy array its forward returned) over every node
    reachable from output.grad_fn, each node once (a diamond reaches a node twice), leaving
    out the nodes of view ops: those whose saved output shares memory with one of the node's
    inputs. 0 when output has no grad_fn.
    """
    # Idea: every node keeps its output alive; a view's output is memory already counted.
    ### BEGIN SOLUTION
    total = 0
    seen = set()
    stack = [output.grad_fn] if output.grad_fn is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if not any(np.shares_memory(node.output, x.numpy()) for x in node.inputs):
            total += node.output.nbytes
        for x in node.inputs:
            if x.grad_fn is not None:
                stack.append(x.grad_fn)
    return total
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-saved-activation-bytes", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_w = Tensor(np.ones((4, 3), dtype=np.float32), requires_grad=True)
_xin = Tensor(np.ones((5, 4), dtype=np.float32))
_h = _xin @ _w            # (5, 3) float32: 60 bytes
_r = _h.relu()            # 60 bytes
_v = _r.reshape(15)[3:]   # two views of _r's memory (a reshape, a slice): nothing new
_s = (_v * _v).sum()      # the product (12 floats: 48 bytes) and the sum (4 bytes)
print("saved bytes:", saved_activation_bytes(_s))
_d = _h + _h  # a diamond: _h's node is reached twice
assert_equal(saved_activation_bytes(_d), 60 + 60, "h + h: a node reached along two paths counts once")
assert_equal(saved_activation_bytes(_s), 60 + 60 + 48 + 4, "matmul + relu + mul + sum outputs; the views add nothing")
_c = _r.T.reshape(15)     # a reshape of a transposed tensor cannot be a view: a 60-byte copy
assert_equal(saved_activation_bytes(_c.sum()), 60 + 60 + 60 + 4, "matmul + relu + the copy + sum; the .T view adds nothing")
assert_equal(saved_activation_bytes(Tensor([1.0])), 0, "no graph: 0 bytes")
check(type(saved_activation_bytes(_s)) is int, "the byte count is a Python int (bytes are whole)",
      got=type(saved_activation_bytes(_s)).__name__, expected="int")
_res = _h + (_h * 3.0).tanh()  # a residual: the add's first input is the shortcut, its second a branch
assert_equal(saved_activation_bytes(_res.sum()), 60 + 60 + 60 + 60 + 4,
             "h + tanh(3h): the matmul, the mul, the tanh, the add and the sum (every input of every node is followed)")
_deep = Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
for _ in range(3 * sys.getrecursionlimit()):  # deeper than Python's recursion limit
    _deep = _deep + 1.0
check(saved_activation_bytes(_deep) == 3 * sys.getrecursionlimit() * 8,
      "a chain of 3x Python's recursion limit: every add's 8 bytes (a walk that recurses cannot get there)",
      got=saved_activation_bytes(_deep))
del _deep
print("✓ saved_activation_bytes: the small graph keeps", saved_activation_bytes(_s), "bytes")

# %% [markdown]
# ### 6.1 Estimate, then measure
#
# `training_memory` (provided) puts the four parts together; `peak_memory(fn)` runs `fn` under
# Python's `tracemalloc`, which numpy reports its allocations to, and returns the peak bytes
# allocated while `fn` ran (above what was allocated before).

# %%
#| export
def training_memory(model, output, optimizer="adam"):
    """Estimated bytes of one training step: a dict with "parameters", "gradients",
    "optimizer_state" (Adam: two tensors per parameter; SGD: none) and "activations"
    (saved_activation_bytes of `output`, before its backward)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    state_per_param = {"adam": 2, "adamw": 2, "sgd": 0, "sgd_momentum": 1}[optimizer.lower()]
    return {"parameters": params, "gradients": params, "optimizer_state": state_per_param * params,
            "activations": saved_activation_bytes(output)}


def peak_memory(fn):
    """(result of fn(), peak bytes allocated while it ran, above the start), with tracemalloc."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, max(0, peak - start)

# %% [markdown]
# A batch of 256 digits through the CNN. Predict: how many kilobytes does the graph save, and
# will the measured peak of the forward be larger or smaller than that?

# %%
predicted_activation_kb = None  # your number: KB the CNN's graph saves for a batch of 256

# %%
x256 = Tensor((_images[:256, None] / 16.0).astype(np.float32))
y256 = Tensor(_labels[:256])
with preserved_state():
    tinytorch.manual_seed(0)
    cnn = digits_cnn()
opt = tinytorch.optim.Adam(cnn.parameters(), lr=1e-3)
loss, fwd_peak = peak_memory(lambda: F.cross_entropy(cnn(x256), y256))
estimate = training_memory(cnn, loss, "adam")
_, bwd_peak = peak_memory(loss.backward)
opt.step()
measured_grads = sum(p.grad.nbytes for p in cnn.parameters())
measured_state = sum(s[k].nbytes for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq"))
print(f"activations: estimate {estimate['activations'] / 1e3:9.1f} KB | forward peak (tracemalloc) {fwd_peak / 1e3:9.1f} KB "
      + ("(no prediction written)" if predicted_activation_kb is None else f"(you predicted {predicted_activation_kb} KB)"))
print(f"backward peak (tracemalloc): {bwd_peak / 1e3:9.1f} KB")
print(f"gradients:   estimate {estimate['gradients'] / 1e3:9.1f} KB | measured .grad bytes {measured_grads / 1e3:9.1f} KB")
print(f"Adam state:  estimate {estimate['optimizer_state'] / 1e3:9.1f} KB | measured state bytes {measured_state / 1e3:9.1f} KB")

# %% [markdown]
# What to expect. The gradient and Adam estimates are exact: they count the arrays that
# exist. The forward peak is usually **above** the activation estimate: besides the saved
# outputs, the forward allocates temporaries that die before it returns (im2col's column
# matrices, the unfolded windows of max-pooling, the copies of dtype conversions), and the
# peak sees them; it can also be *below* when an op saves a view of memory that was already
# allocated before `fn` started. The backward's peak holds the gradients of the activations
# (about the size of the activations themselves) and the im2col columns again. The exact
# figures depend on numpy's version and allocator, which is why they are measured here.
#
# ## 7. Latency: warm-up, repeats, median and spread
#
# One timing is a sample of a noisy process: the first call pays for caches, allocations and
# lazy imports; later calls are disturbed by other processes. So: run **warm-up** calls that
# are not timed, time several **repeats**, report the **median** (one slow outlier barely moves
# it) and a **spread** (the interquartile range says how far to trust it). The course has one
# timer, `tinytorch.utils.timing` (`median_time` and the samples behind it,
# `time_samples`); `latency` (provided) collects one-call samples with it, so every number in the course is timed the same way, with BLAS on one thread
# (several threads on a machine with other load make a matmul's time swing by several x).
# To compare several functions, `latencies` (provided) times them **in turns** (A, B, A,
# B, ...), so that a burst of load from another process falls on all of them alike instead
# of on whichever happened to run then; module 19 builds the full method.

# %%
#| export
def _summary(samples):
    q1, med, q3 = (float(v) for v in np.percentile(samples, [25, 50, 75]))
    return {"median": med, "q1": q1, "q3": q3, "iqr": q3 - q1, "min": min(samples),
            "max": max(samples), "samples": samples}


def latencies(*fns, repeats=7, warmup=2):
    """Wall-clock statistics of each fn(), the functions called in turns (each round calls
    every one once): one dict per function with "median", "q1", "q3", "iqr" (q3 - q1), "min",
    "max" (seconds) and "samples", after `warmup` untimed rounds. BLAS and numba run on one
    thread meanwhile. Why in turns: a burst of load then slows every function alike, so
    their ratio stays fair."""
    if repeats < 1:
        raise ValueError(f"latencies needs at least one timed repeat, got repeats={repeats}")
    samples = [[] for _ in fns]
    with pinned_threads(1):
        for round_ in range(warmup + repeats):
            for own, fn in zip(samples, fns):
                t = time_samples(fn, repeats=1, warmup=0, threads=None)[0]
                if round_ >= warmup:
                    own.append(t)
    return [_summary(own) for own in samples]


def latency(fn, repeats=7, warmup=2):
    """latencies of one function: its dict of "median", "q1", "q3", "iqr", "min", "max" and
    "samples" (seconds)."""
    return latencies(fn, repeats=repeats, warmup=warmup)[0]

# %% [markdown]
# Predict: how many times longer does a forward *and* backward pass of the CNN (batch 256)
# take than the forward pass alone? The backward of each matmul does twice the forward's
# products.

# %%
predicted_backward_ratio = None  # your number: time(forward + backward) / time(forward)

# %%
def cnn_forward():
    return F.cross_entropy(cnn(x256), y256)


def cnn_step():
    cnn_forward().backward()


fwd, step = latencies(cnn_forward, cnn_step)
print(f"forward:            median {fwd['median'] * 1e3:7.2f} ms, IQR {fwd['iqr'] * 1e3:6.2f} ms, "
      f"min {fwd['min'] * 1e3:7.2f} ms")
print(f"forward + backward: median {step['median'] * 1e3:7.2f} ms, IQR {step['iqr'] * 1e3:6.2f} ms, "
      f"min {step['min'] * 1e3:7.2f} ms")
print(f"ratio {step['median'] / fwd['median']:.2f} "
      + ("(no prediction written)" if predicted_backward_ratio is None else f"(you predicted {predicted_backward_ratio})"))

# %% [markdown]
# The FLOP count says forward + backward ≈ 3× the forward (two products in backward for each
# one in forward). The measured ratio is often different: the first layer's backward skips
# the gradient of the images, col2im scatters with slow adds, and the per-op overhead of
# many small backward rules is not proportional to FLOPs. Rerun the cell: the medians move a
# little, the IQR tells you by about how much.
#
# ### 7.1 What does the profiler itself cost?
#
# A measuring instrument disturbs what it measures. With no mode active, `apply` checks an
# empty list and calls the op. A pass-through `DispatchMode` adds a Python call per op; your
# profiler adds two clock reads, the input shapes, a FLOP rule and one record per op.
# Predict: how much slower is the CNN's forward under `profile()`?

# %%
predicted_profiler_overhead = None  # your number: time(forward under profile()) / time(forward)

# %%
class PassThrough(tinytorch.utils.dispatch.DispatchMode):
    """A mode that only runs each op (DispatchMode's default dispatch)."""


def under(make_mode):
    def run():
        with make_mode():
            cnn_forward()
    return run


_stats = latencies(cnn_forward, under(PassThrough), under(profile))
plain, passing, profiled = (s["median"] for s in _stats)
_iqr = [s["iqr"] * 1e3 for s in _stats]
print(f"forward, no mode:           {plain * 1e3:7.2f} ms (IQR {_iqr[0]:.2f} ms)")
print(f"forward, pass-through mode: {passing * 1e3:7.2f} ms (IQR {_iqr[1]:.2f} ms; {passing / plain:.2f}x)")
print(f"forward, under profile():   {profiled * 1e3:7.2f} ms (IQR {_iqr[2]:.2f} ms; {profiled / plain:.2f}x) "
      + ("(no prediction written)" if predicted_profiler_overhead is None else f"(you predicted {predicted_profiler_overhead}x)"))

# %% [markdown]
# Expect both ratios close to 1 for this CNN: a forward of a few dozen ops, some of them
# milliseconds long, hides a few microseconds of bookkeeping per op. The three were timed
# in turns, but on a busy machine a ratio can still land a little below 1, and the
# pass-through mode can come out slower than the profiler that does more: that is the
# noise, and its size is about the IQR. Module 19 measures ratios with the statistics they
# need. The overhead is a
# fixed cost **per op**, so it matters for models made of many tiny ops, and there it also
# inflates the small ops' share of the profile. PyTorch's profiler records from C++ for the
# same reason. The claim that the dispatch path costs nothing extra without a mode belongs to
# the benchmark suite (module 19), which can repeat it long enough to resolve nanoseconds.
#
# ### 7.2 The time between the ops
#
# The profiler's table adds up the ops' own times. A forward pass also spends time **between**
# the ops: Python running each layer's `forward`, building `Tensor` objects, checking shapes,
# recording the graph. That time appears in no row. Compare the wall time of a whole forward
# under the profiler with the sum of its rows (each row times its op alone, so the wall time
# also holds the profiler's own few microseconds per op that section 7.1 measured), for a
# small GPT and for one 16 times wider. **Predict first**: which share of each forward's
# wall time do the ops account for?

# %%
predicted_ops_share_small = None   # your fraction: the ops' summed time / the forward's wall time, d_model 16
predicted_ops_share_wide = None    # the same, d_model 256

# %%
def small_gpt(d_model):
    """An untrained 2-block GPT of width d_model in eval mode, and a batch of 8 x 32 token ids."""
    with preserved_state():
        tinytorch.manual_seed(0)
        gpt = nn.GPT(nn.GPTConfig(vocab_size=64, block_size=32, d_model=d_model, n_heads=4, n_layers=2)).eval()
        ids = tinytorch.tensor(np.random.default_rng(0).integers(0, 64, (8, 32)))
    return gpt, ids


def ops_share(d_model, repeats=5):
    """(the ops' summed time, the forward's wall time) of a GPT forward, the median of repeats."""
    gpt, ids = small_gpt(d_model)
    pairs = []
    with pinned_threads(1), tinytorch.no_grad():
        gpt(ids)                                                  # warm-up
        for _ in range(repeats):
            with profile() as prof:
                start = time.perf_counter()
                gpt(ids)
                wall = (time.perf_counter() - start) * 1e6
            pairs.append((prof.events().total_time(), wall))
    ops, wall = np.median(np.array(pairs), axis=0)
    return ops, wall


for _d, _pred in ((16, predicted_ops_share_small), (256, predicted_ops_share_wide)):
    _ops, _wall = ops_share(_d)
    print(f"GPT d_model {_d:3d}: forward {_wall / 1e3:6.2f} ms, its ops {_ops / 1e3:6.2f} ms: the ops account for "
          f"{_ops / _wall:.0%} " + ("(no prediction written)" if _pred is None else f"(you predicted {_pred})"))

# %% [markdown]
# The narrow model's ops are so small that the Python around them is a large share of the
# forward: the profile's rows then describe only part of where the time went, and making an
# op faster cannot remove the rest. The wide model does the same Python work around ops
# that each take far longer, so its ops account for most of the time. This is the
# **overhead-bound** regime the intensity picture of section 1 leaves out: below some size,
# the cost is the number of ops, not their FLOPs or bytes. Frameworks answer it by doing less
# per op in Python (PyTorch's dispatcher is C++), by fusing ops, and by capturing a whole
# forward once and replaying it (CUDA graphs, `torch.compile`).
#
# Which Python is it? Your profiler sees ops, so it cannot say. A **Python profiler** sees
# every Python function call: `cProfile` (in the standard library; `py-spy` samples a
# running process the same way without changing it) reports each function's own time
# ("tottime") and its count of calls. **Predict first**: in the narrow GPT's forward, which
# functions spend the most time of their own: numpy's kernels, your ops' wrappers, or the
# layers' `forward` methods?

# %%
def python_hotspots(d_model, top=8, repeats=20):
    """The `top` functions by own time (tottime) over `repeats` GPT forwards under cProfile
    (several, so that one stall of a busy machine does not top the list), per forward."""
    gpt, ids = small_gpt(d_model)
    with pinned_threads(1), tinytorch.no_grad():
        gpt(ids)                                                  # warm-up
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(repeats):
            gpt(ids)
        profiler.disable()
    stats = pstats.Stats(profiler).stats                         # (file, line, name) -> (_, calls, tottime, cumtime, _)
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    total = sum(v[2] for v in stats.values())
    print(f"GPT d_model {d_model}, per forward: {sum(v[1] for v in stats.values()) // repeats:,} Python calls, "
          f"{total / repeats * 1e3:.2f} ms of their own time")
    for (path, line, name), (_, calls, own, _, _) in rows:
        where = path.split("tinytorch" + os.sep, 1)[-1] if "tinytorch" + os.sep in path else os.path.basename(path)
        print(f"  {own / total:5.1%}  {calls // repeats:5,} calls  {name}  ({where}:{line})")


python_hotspots(16)

# %% [markdown]
# Read the list against your profile of the same forward: the functions that your op table
# has no row for are the time between the ops, and their call counts are per op or per
# tensor, not per FLOP. Look for functions you wrote yourself in module 01 (a stride
# computation, a broadcast check): each is cheap, and each runs for every op. Run
# `python_hotspots(256)` and compare: the same functions are called as often, but the few
# that call numpy's large kernels (a matmul's forward, GELU's) now own most of the time:
# cProfile charges a numpy call that is not a Python function to the function that makes
# it. This is the measurement to make before rewriting anything: an op profiler tells you
# which op, a Python profiler which function of the framework.

# %% [markdown]
# ### 7.3 Scopes: total time and self time
#
# The table says which *kind* of op costs most; a reader of a real model wants to know
# which *part* of the model: this block, that attention. PyTorch marks parts with
# `with torch.profiler.record_function("block 0"):`, and its table then shows two times for
# each: **total** (everything that ran while the scope was open, inner scopes included) and
# **self** (the total minus what ran in the events directly inside it). A scope's self
# time is what none of its parts explains: for a scope that only calls ops, it is exactly
# section 7.2's time between the ops.
#
# `record_function` (provided) is the scope. When it closes, it appends one event to every
# profiler that is recording: its name, its total time and its `scope_size`, the number of
# events recorded while it was open (its ops, its inner scopes, and everything inside those).
# Ops keep `scope_size = None`. So a profile arrives **flattened**: each event appears when
# it *finishes*, a scope after all its contents. For
#
#     with record_function("forward"):        # events, in the order they are recorded:
#         op a                                 #   a
#         with record_function("block"):      #   b
#             op b                             #   c
#             op c                             #   block  (scope_size 2)
#         op d                                 #   d
#                                              #   forward (scope_size 5)
#
# "forward"'s self time is its total minus those of a, block and d, its direct children; b
# and c are already inside block's total. Write `self_times(events)`: every event's self
# time, from the flat list alone, scopes nested to any depth.
#
# <details><summary>Hint 1</summary>
#
# Walk the list once, in order. When a scope's event arrives, everything it contains has
# already gone by, and it is the most recent stretch of events. Which of them are its direct
# children, and how do you skip its grandchildren without looking inside each child?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Once a scope has claimed its children, they never matter again on their own: only the
# scope (with how many events it covers) does, for whichever scope contains it. What
# structure hands you the most recent unclaimed events first?
# </details>
#
# <details><summary>The approach</summary>
#
# The finished events that no scope has claimed yet are all a closing scope can contain,
# and its contents are the most recent of them. Each unclaimed entry is either an op or a
# whole scope that already claimed its own contents, so it stands for a known number of
# events. A closing scope's `scope_size` is a count of events, not of entries: how many
# entries does it take, and what does it leave behind for the scope around it? A count
# that does not come out exactly means the list was not recorded by nested scopes.
# </details>

# %%
#| export
class record_function:
    """A named scope in the profile (torch.profiler.record_function): `with
    record_function("block 0"):`. When it closes, each recording profiler gets a
    FunctionEvent with the scope's name, its wall time in microseconds (everything inside
    included), no shapes, FLOPs or bytes, and scope_size = the events recorded while it was open.
    Outside a profiler it does nothing."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self._open = [(prof, len(prof._events)) for prof in profile._active]
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        total_us = (time.perf_counter() - self._start) * 1e6
        for prof, before in self._open:
            prof._events.append(FunctionEvent(self.name, [], total_us, 0, 0, scope_size=len(prof._events) - before))
        return False

# %% nbgrader={"grade": false, "grade_id": "self-times", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def self_times(events):
    """The self time of every event of a profile.

    Contract: `events` a list of FunctionEvent in the order a profile records them (each
    event when it finishes; a scope after the scope_size events recorded while it was
    open). Returns a list of floats, one per event, in the same order: an op's
    cpu_time_total; a scope's cpu_time_total minus the cpu_time_total of each event directly
    inside it (inside no inner scope of it). The events are not changed. Errors: ValueError
    naming the scope when its scope_size does not match whole events before it.
    Why: a scope's self time is the time none of its parts accounts for.
    """
    # Idea: a scope closes after everything inside it; what must be remembered of those?
    ### BEGIN SOLUTION
    result, unclaimed = [], []  # unclaimed: (index, events it stands for), most recent last
    for i, event in enumerate(events):
        if event.scope_size is None:
            result.append(event.cpu_time_total)
            unclaimed.append((i, 1))
            continue
        need, covered, children = event.scope_size, 1, 0.0
        while need > 0:
            if not unclaimed:
                raise ValueError(f"self_times: scope {event.name!r} claims {event.scope_size} events, "
                                 f"more than were recorded before it")
            j, size = unclaimed.pop()
            children += events[j].cpu_time_total
            need -= size
            covered += size
        if need < 0:
            raise ValueError(f"self_times: scope {event.name!r} claims {event.scope_size} events, which cut "
                             f"an inner scope in two")
        result.append(event.cpu_time_total - children)
        unclaimed.append((i, covered))
    return result
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-self-times", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _op(name, us):
    return FunctionEvent(name, [], us, 0, 0)


def _scope(name, us, size):
    return FunctionEvent(name, [], us, 0, 0, scope_size=size)


_flat = [_op("a", 5.0), _op("b", 10.0), _op("c", 20.0), _scope("block", 40.0, 2), _op("d", 1.0),
         _scope("forward", 60.0, 5)]
assert_equal(self_times(_flat), [5.0, 10.0, 20.0, 10.0, 1.0, 14.0],
             "the example above (a 5, b 10, c 20, block 40 over b and c, d 1, forward 60): block's self time is "
             "40 - 10 - 20; forward's is 60 - 5 - 40 - 1 (b and c are inside block's 40 already)")
assert_equal(self_times([_op("x", 3.0), _scope("s", 3.5, 1), _op("y", 2.0)]), [3.0, 0.5, 2.0],
             "a scope around one op, then an op outside any scope")
assert_equal(self_times([_scope("empty", 4.0, 0), _scope("outer", 9.0, 1)]), [4.0, 5.0],
             "an empty scope (scope_size 0) is all self time; it is the one child of outer")
_deep = [_op("leaf", 1.0)]
for _k in range(1, 6):  # five scopes, each around the last: s1 (2 µs) inside s2 (3 µs) ... inside s5 (6 µs)
    _deep.append(_scope(f"s{_k}", 1.0 + _k, _k))
assert_equal(self_times(_deep), [1.0] * 6, "five nested scopes, each 1 µs longer than the one inside it: each "
             "has 1 µs of its own (only its direct child counts, not the child's contents again)")
_two = [_op("p", 2.0), _op("q", 3.0), _scope("s", 6.0, 2), _op("r", 4.0), _op("t", 1.0), _scope("u", 7.0, 2),
        _scope("both", 15.0, 6)]
assert_equal(self_times(_two), [2.0, 3.0, 1.0, 4.0, 1.0, 2.0, 2.0], "two sibling scopes inside a third: both's "
             "direct children are s and u, not their four ops")
_copy = [FunctionEvent(e.name, [], e.cpu_time_total, 0, 0, e.scope_size) for e in _flat]
self_times(_flat)
assert_equal(_flat, _copy, "the events after self_times (read, not changed)")
assert_raises(ValueError, self_times, [_op("a", 1.0), _scope("s", 2.0, 3)], match="'s'",
              what="a scope that claims 3 events when only 1 came before it")
assert_raises(ValueError, self_times, [_op("a", 1.0), _op("b", 1.0), _scope("in", 3.0, 2), _scope("cut", 4.0, 2)],
              match="'cut'", what="a scope that claims 2 events of which one is a scope covering 3")
with profile() as _ps:
    with record_function("outer"):
        tinytorch.ones(2, 2) + 1.0
        with record_function("inner"):
            tinytorch.ones(2, 2) * 2.0
_ev = _ps.events()
assert_equal([(e.name, e.scope_size) for e in _ev], [("add", None), ("mul", None), ("inner", 1), ("outer", 3)],
             "a real profile: each scope after its contents, with their count")
_st = self_times(_ev)
assert_close(_st[3], _ev[3].cpu_time_total - _ev[0].cpu_time_total - _ev[2].cpu_time_total, rtol=1e-12,
             what="outer's self time in a real profile: its total minus add's and inner's")
print("✓ self_times:", self_times(_flat))

# %% [markdown]
# Now the GPT of section 7.2, with a scope around the whole forward and one around each
# block. **Predict first**: what share of a block's total time is its self time, at d_model
# 16 and at 256? (Section 7.2 measured the ops' share of a whole forward.)

# %%
predicted_block_self_small = None  # your fraction: a block's self time / its total, d_model 16
predicted_block_self_wide = None   # the same, d_model 256

# %%
def scoped_gpt_profile(d_model, runs=5):
    """The events of `runs` GPT forwards, each under a "forward" scope with a "block k" scope per block."""
    gpt, ids = small_gpt(d_model)  # section 7.2's
    blocks = list(gpt.blocks)
    with pinned_threads(1), tinytorch.no_grad():
        gpt(ids)  # a warm-up
        with profile() as prof:
            for _ in range(runs):
                with record_function("forward"):
                    x = gpt.tok_emb(ids) + gpt.pos_emb(tinytorch.arange(ids.shape[1]))
                    for k, block in enumerate(blocks):
                        with record_function(f"block {k}"):
                            x = block(x)
                    gpt.head(gpt.ln_f(x))
    return prof.events()


for _d, _pred in ((16, predicted_block_self_small), (256, predicted_block_self_wide)):
    _events = scoped_gpt_profile(_d)
    _selfs = self_times(_events)
    _rows = {}
    for _e, _s in zip(_events, _selfs):
        if _e.scope_size is not None:
            _total, _own = _rows.get(_e.name, (0.0, 0.0))
            _rows[_e.name] = (_total + _e.cpu_time_total, _own + _s)
    print(f"GPT d_model {_d}:  " + "   ".join(f"{name}: total {t / 1e3:6.2f} ms, self {s / 1e3:5.2f} ms ({s / t:.0%})"
                                          for name, (t, s) in _rows.items())
          + ("   (no prediction written)" if _pred is None else f"   (you predicted {_pred})"))

# %% [markdown]
# A block's self time is the Python that runs its layers: each `forward` call, the tensors it
# builds, the graph it records. At width 16 that is a large share of the block, at 256 a
# small one, the same split section 7.2 measured for the whole forward, now located. The
# forward's own self time is smaller still: between its blocks it does little but loop.
# This is how one reads a real profile: sort the scopes by self time to find where the
# time goes that no op accounts for, and by total time to find the part worth opening.
# PyTorch's table prints both ("Self CPU" and "CPU total"), and its trace viewer draws each
# scope as a bar whose children sit beneath it: the flat list you just folded back into a
# tree.
#
# ## 8. A per-layer report: where the time goes
#
# `layer_report` (provided) runs a model **stage by stage** (each stage a function of the
# previous stage's output), and for each stage records its parameters (your
# `parameter_counts`), its analytic FLOPs (your profiler's records, which use your formulas),
# and its measured median time and spread (`latencies`). The achieved GFLOP/s says how close
# a stage comes to the machine's arithmetic speed, and that speed can be measured too: the
# rate of numpy's BLAS on a large matmul, one thread (`tinytorch.utils.timing.matmul_peak`;
# module 17 puts it on a roofline). The whole model's FLOPs per second as a share of that
# peak is its **model FLOP utilisation** (MFU), the figure large training runs report to
# say how much of the hardware they use.

# %%
#| export
def layer_report(stages, x, repeats=5, warmup=1):
    """Profile a model stage by stage. `stages` is a list of (name, fn, module or None);
    each fn maps the previous stage's output to the next. Returns a list of dicts with
    "name", "params", "flops" (profiled, analytic), "ops", "median", "q1", "q3" and "iqr"
    (seconds). The stages are timed in turns (latencies), as the model runs them."""
    rows, calls = [], []
    for name, fn, module in stages:
        with profile() as prof:
            y = fn(x)
        rows.append({"name": name, "params": count_parameters(module) if module is not None else 0,
                     "flops": prof.events().total_flops(), "ops": len(prof.events())})
        calls.append(lambda fn=fn, x=x: fn(x))
        x = y
    for row, stats in zip(rows, latencies(*calls, repeats=repeats, warmup=warmup)):
        row.update({key: stats[key] for key in ("median", "q1", "q3", "iqr")})
    return rows


def format_report(rows):
    """The rows of layer_report as a text table, with each stage's share of FLOPs and time."""
    total_f = sum(r["flops"] for r in rows) or 1
    total_t = sum(r["median"] for r in rows) or 1.0
    lines = [f"{'stage':<14}{'params':>9}{'ops':>5}{'FLOPs':>13}{'FLOPs %':>9}{'median ms':>11}"
             f"{'IQR ms':>8}{'time %':>8}{'GFLOP/s':>9}"]
    for r in rows:
        rate = r["flops"] / r["median"] / 1e9 if r["median"] > 0 else 0.0
        lines.append(f"{r['name']:<14}{r['params']:>9,}{r['ops']:>5}{r['flops']:>13,}"
                     f"{100 * r['flops'] / total_f:>8.1f}%{r['median'] * 1e3:>11.3f}{r['iqr'] * 1e3:>8.3f}"
                     f"{100 * r['median'] / total_t:>7.1f}%{rate:>9.2f}")
    return "\n".join(lines)

# %% [markdown]
# **Predict first**: the MFU of the CNN's forward at batch 256, in percent.

# %%
predicted_cnn_mfu = None  # your number, in percent: the CNN forward's FLOPs per second / this core's BLAS peak

# %%
with tinytorch.no_grad():
    cnn_rows = layer_report([(f"{i}:{type(m).__name__}", m, m) for i, m in enumerate(cnn)], x256)
print("digits CNN, batch 256, forward (no_grad):")
print(format_report(cnn_rows))
from tinytorch.utils.timing import matmul_peak  # noqa: E402

PEAK_FLOPS = matmul_peak(1024)  # FLOP/s: numpy's BLAS, a 1024² matmul, one thread, the fastest of 7
_cnn_rate = sum(r["flops"] for r in cnn_rows) / sum(r["median"] for r in cnn_rows)
print(f"this core's BLAS peak {PEAK_FLOPS / 1e9:.1f} GFLOP/s; the CNN forward {_cnn_rate / 1e9:.2f} GFLOP/s: "
      f"MFU {100 * _cnn_rate / PEAK_FLOPS:.1f} % "
      + ("(no prediction written)" if predicted_cnn_mfu is None else f"(you predicted {predicted_cnn_mfu} %)"))
print("per stage, % of the peak: " + ", ".join(
    f"{r['name']} {100 * r['flops'] / r['median'] / PEAK_FLOPS:.1f}" for r in cnn_rows if r["median"] > 0))

# %% [markdown]
# The FLOPs column comes from the profiler: the sum of the records of each stage's ops. The
# same numbers follow from each layer's **formula** and its configuration alone, without
# running anything but the shapes: the analytic side of the report. `layer_formula`
# (provided) writes each formula out and evaluates it; the two columns must agree.

# %%
def layer_formula(module, in_shape, out_shape):
    """(formula, FLOPs) of one CNN layer from its configuration and its input/output shapes."""
    n_out = math.prod(out_shape)
    if isinstance(module, nn.Conv2d):
        k = module.kernel_size
        text = f"2·{module.out_channels}·({module.in_channels}·{k[0]}·{k[1]})·(N·Ho·Wo) + bias"
        return text, conv2d_flops(in_shape, module.weight.shape, module.stride, module.padding,
                                  bias=module.bias is not None)
    if isinstance(module, nn.Linear):
        rows = math.prod(in_shape) // module.in_features
        text = f"2·B·{module.in_features}·{module.out_features} + B·{module.out_features}"
        return text, 2 * rows * module.in_features * module.out_features + rows * module.out_features
    if isinstance(module, nn.BatchNorm2d):
        return "4 per element", 4 * n_out
    if isinstance(module, nn.ReLU):
        return "1 per element", n_out
    if isinstance(module, nn.MaxPool2d):
        kh, kw = _pair(module.kernel_size, "kernel_size", type(module).__name__)
        return f"{kh * kw} compares per output", n_out * kh * kw
    return "data movement: 0", 0


_x = x256
print(f"{'stage':<14}{'formula':<34}{'by formula':>13}{'profiled':>13}")
with tinytorch.no_grad():
    for row, m in zip(cnn_rows, cnn):
        _y = m(_x)
        text, value = layer_formula(m, tuple(_x.shape), tuple(_y.shape))
        print(f"{row['name']:<14}{text:<34}{value:>13,}{row['flops']:>13,}")
        _x = _y

# %% [markdown]
# Now the small GPT of module 13 (untrained: the cost does not depend on the weights). Its
# stages are the embeddings, each block, the final LayerNorm and the tied head. Predict first:
# which share of the forward time goes to the head?

# %%
predicted_head_share = None  # your number, in percent: the head's share of the GPT's forward time

# %%
with preserved_state():
    tinytorch.manual_seed(0)
    gpt = nn.GPT(nn.GPTConfig(vocab_size=65, block_size=64, d_model=64, n_heads=4, n_layers=2))
    idx = tinytorch.randint(0, 65, (8, 64))
T = idx.shape[1]
gpt_stages = ([("embeddings", lambda i: gpt.tok_emb(i) + gpt.pos_emb(tinytorch.arange(T)),
                nn.ModuleList([gpt.tok_emb, gpt.pos_emb]))]
              + [(f"block {k}", b, b) for k, b in enumerate(gpt.blocks)]
              + [("ln_f", gpt.ln_f, gpt.ln_f), ("head (tied)", gpt.head, None)])
with tinytorch.no_grad(), pinned_threads(1):  # one BLAS thread, as in latency
    gpt_rows = layer_report(gpt_stages, idx)
    gpt(idx)  # a warm-up, so that the profile below holds no first-call costs
    PROFILED_RUNS = 5  # section 7: one run is one sample; the op table sums five
    with profile() as gprof:
        for _ in range(PROFILED_RUNS):
            logits, _ = gpt(idx)
print("small GPT, batch 8 x 64 tokens, forward (no_grad); the head's weight is the token table:")
print(format_report(gpt_rows))
_head = gpt_rows[-1]
print(f"head: {100 * _head['median'] / sum(r['median'] for r in gpt_rows):.1f} % of the time "
      + ("(no prediction written)" if predicted_head_share is None else f"(you predicted {predicted_head_share} %)"))
print(f"whole forward, profiled at once: {gprof.events().total_flops() // PROFILED_RUNS:,} FLOPs per run; "
      f"the stages add up to {sum(r['flops'] for r in gpt_rows):,}")

# %% [markdown]
# The blocks' FLOPs are almost all matmuls. Per block, with $B \cdot T$ tokens of width $d$:
# the four projections of attention ($Q, K, V$, out) cost $4 \cdot 2BTd^2$, the feed-forward
# network's two Linears ($d \to 4d \to d$) $2 \cdot 2BT \cdot 4d^2$, and the two attention
# matmuls $2 \cdot 2BT^2d$: in all $24BTd^2 + 4BT^2d$. The first term is $2N$ FLOPs per token
# for the block's $N = 12d^2$ weights, module 13's forward pass (a third of its "6N per
# token", which counts a whole training step); the second is the attention term, which grows
# with the context. The profiler's matmul records of one block:

# %%
B, d = idx.shape[0], gpt.config.d_model
with tinytorch.no_grad():
    with profile() as bprof:
        gpt.blocks[0](gpt.tok_emb(idx) + gpt.pos_emb(tinytorch.arange(T)))
block_matmuls = sum(e.flops for e in bprof.events() if e.name == "matmul")
print(f"24·B·T·d² + 4·B·T²·d = {24 * B * T * d * d + 4 * B * T * T * d:,}; profiled matmuls of block 0: {block_matmuls:,}")

# %% [markdown]
# Where does the GPT's time go, op by op? The table of the whole forward, five runs of it
# profiled together (each op's count is five times its calls per run, and its average is
# over five runs' calls), sorted by time:

# %%
print(gprof.key_averages().table(sort_by="cpu_time_total", row_limit=12))

# %% [markdown]
# Expect `matmul` to hold almost all the FLOPs at by far the highest GFLOP/s (BLAS), and the
# elementwise ops (GELU's several numpy passes, the bias and residual adds, the softmax) to
# take much more time per FLOP: each pass reads and writes a whole tensor for one or a few
# operations per element. Which of them ranks first changes with the CPU, numpy's build and
# the machine's load; the table you just printed is the answer for this run.

# %% [markdown]
# The picture puts the two reports side by side: for each stage, its share of the FLOPs and
# its share of the measured time. Bars of equal length would mean time proportional to
# arithmetic; where the time bar is longer, the stage is paying for something other than
# FLOPs (many small ops, copies, the exp/erf of an activation, a softmax over T×T scores).

# %%
def plot_where_time_goes(reports, path=None):
    """Horizontal bars: share of FLOPs and of measured time per stage, one panel per model."""
    fig, axes = plt.subplots(1, len(reports), figsize=(6 * len(reports), 4.2))
    for ax, (title, rows) in zip(np.atleast_1d(axes), reports):
        names = [r["name"] for r in rows][::-1]
        tf = sum(r["flops"] for r in rows) or 1
        tt = sum(r["median"] for r in rows) or 1.0
        y = np.arange(len(rows))
        ax.barh(y + 0.2, [100 * r["flops"] / tf for r in rows][::-1], height=0.4, label="FLOPs (analytic)")
        ax.barh(y - 0.2, [100 * r["median"] / tt for r in rows][::-1], height=0.4,
                xerr=[[100 * (r["median"] - r["q1"]) / tt for r in rows][::-1],
                      [100 * (r["q3"] - r["median"]) / tt for r in rows][::-1]],
                capsize=2, error_kw={"lw": 0.8}, label="time (median; whiskers: quartiles)")
        ax.set_yticks(y)
        ax.set_yticklabels(names, fontsize=8)
        ax.set_xlabel("share of the forward pass (%)")
        ax.set_title(title, fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=100)
    return fig


plot_where_time_goes([("digits CNN (batch 256)", cnn_rows), ("small GPT (8 × 64 tokens)", gpt_rows)],
                     path=os.environ.get("PROFILING_FIGURE"))
plt.show()

# %% [markdown]
# What to expect: in the CNN, the convolutions carry most FLOPs, but the time need not
# follow. The pooling layers and BatchNorms do little arithmetic on many bytes (and
# max-pooling unfolds its windows first), so their share of the time is far larger than
# their share of the FLOPs: on some CPUs the two pools together take longer than the two
# convolutions (compare the GFLOP/s column). In the GPT, the blocks carry most FLOPs; the
# embedding lookups cost no FLOPs but some time. The exact shares depend on your CPU, numpy's BLAS
# and the load of the machine: rerun and compare. The whiskers are each stage's quartiles:
# a bar whose whiskers overlap another's does not rank above it.
#
# The MFU line says the same from the other side. Even the convolutions reach only a
# fraction of the peak (im2col copies its patches, and the matmuls are small next to a
# 1024² one), and the stages that barely compute hold a large share of the time, so the
# whole forward's MFU sits far below its best stage's. To raise it, a framework makes the
# non-arithmetic stages cheaper (fusing BatchNorm and ReLU into the convolution, a pooling
# kernel that does not unfold) rather than the matmuls faster.
#
# ## 9. What PyTorch does
#
# - `torch.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True,
#   profile_memory=True, with_flops=True)` is used exactly like yours: `with ... as prof:`,
#   then `prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total",
#   row_limit=10)`. It hooks into the dispatcher in C++ (the `RecordFunction` callbacks), also
#   sees CUDA kernels, can export a Chrome trace (`prof.export_chrome_trace`), and
#   distinguishes *self* time from time including the ops called inside an op.
# - `torch.utils.flop_counter.FlopCounterMode` counts FLOPs with a table keyed by op, like
#   your `FLOP_RULES`, but only for matmuls, convolutions and attention (elementwise ops
#   count 0), with $2mkn$ for a matmul and the products of a convolution (no bias). It is a
#   `TorchDispatchMode`, the same design as your profiler.
# - `torch.cuda.max_memory_allocated()` is the GPU's version of your tracemalloc peak;
#   `torch.utils.benchmark.Timer` does warm-up, repeats and reports median and IQR.
#
# If PyTorch is installed, the cell below counts the CNN's forward and backward with
# `FlopCounterMode` and compares it with your matmul and conv records (without bias, which
# torch does not count).

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None (and a note) when PyTorch is not installed
if torch is not None:
    from torch.utils.flop_counter import FlopCounterMode

    tnet = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1, bias=False), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(16 * 64, 10, bias=False))
    ours = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.ReLU(), nn.Flatten(),
                         nn.Linear(16 * 64, 10, bias=False))
    with FlopCounterMode(display=False) as counter:
        tnet(torch.tensor(x_digits.numpy())).sum().backward()
    with profile() as tp:
        ours(x_digits).sum().backward()
    big = {"matmul", "conv2d", "MatmulBackward", "Conv2DBackward"}
    mine = sum(e.flops for e in tp.events() if e.name in big)
    print(f"torch FlopCounterMode: {counter.get_total_flops():,} FLOPs | yours (matmul + conv): {mine:,} | "
          f"difference {mine - counter.get_total_flops():,}")

# %% [markdown]
# The two agree, forward and backward: in the backward, neither conv computes a gradient
# for the images (they do not require one: module 09's rule skips it, and the provided
# `Conv2DBackward` FLOP rule counts only what the rule computes). (Without PyTorch
# installed the cell above only says so; it would print the two totals and a difference of 0.)
#
# ## 10. Recap
#
# - **Parameters**: counted per module, each shared Parameter once (`parameter_counts`).
# - **FLOPs**: a convention, fixed once and counted by hand per op: matmul $2mkn$; Conv2d as
#   its im2col matmul plus the bias; softmax and LayerNorm a few FLOPs per element; attention
#   quadratic in the context; data movement 0.
# - **The profiler** is a `DispatchMode`: it sees every forward op and backward rule through
#   the dispatch extension point, runs each once, times it, and records name, shapes, µs,
#   FLOPs and bytes; `key_averages()` groups and `table()` sorts.
# - **Memory**: parameters, gradients (same size), Adam's state (twice), and the activations
#   the graph saves (a walk over the nodes, views counted once); tracemalloc's peak adds the
#   temporaries.
# - **Latency**: warm-up, repeats, median and IQR, all through one timer.
# - A per-layer report puts analytic FLOPs next to measured time: where they disagree, the
#   time goes to something other than arithmetic.
#
# Module 15 uses these measurements to show what int8 quantization buys; module 19 turns the
# latency helper into a full benchmark harness.

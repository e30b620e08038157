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
# # Module 01 — Tensor: a strided array you build yourself
#
# Every deep-learning framework rests on one data structure: the **tensor**, an
# n-dimensional array of numbers. In this module you build `tinytorch.Tensor`, the class
# that every later module (activations, layers, autograd, attention, ...) is made of.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain how an n-dimensional tensor lives in **flat memory**: a storage, a shape, a
#   stride per dimension and an offset;
# - write the **address formula** (multi-index to storage position) and its inverse, and
#   the pure-Python **strided loops** (map, zip with broadcasting, reduce) that define what
#   every elementwise op and reduction computes, on any view;
# - compute **contiguous strides** and turn `transpose`, `permute`, `reshape`, `squeeze`,
#   `unsqueeze` and `expand` into **zero-copy views** by changing only that metadata, and
#   design the rule for when a non-contiguous tensor can still be viewed without a copy;
# - implement the **broadcasting rule**, with error messages that teach;
# - implement **basic indexing** (`x[1, ::2, None]`) as a view, and know when indexing
#   must copy (advanced indexing);
# - route every operation through **one dispatch point** (`apply`), which later lets
#   module 06 add automatic differentiation without changing a line of this module;
# - reason about **memory**: what a view costs (nothing), what a copy costs, and why a
#   tiny slice can keep a huge buffer alive.
#
# ## Prerequisites
#
# Python (classes, `*args`, properties) and basic numpy (`np.array`, `.shape`, `.dtype`,
# elementwise arithmetic). No deep-learning background is needed.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/_tensor.py` (and those marked
# `#| export _strided` the file `tinytorch/_strided.py`) when you run `tito export 01` (or
# `tito test module 01`, which exports and then tests). Cells with
# `# YOUR CODE HERE` are yours to fill in. After each of them comes a **check** cell: run
# it, and it either prints a ✓ or tells you what is wrong. Provided code (the parts that are
# plumbing, not ideas) is already written. Read what the prose points you to; the plumbing
# that later modules build on (the `device` class, the kernel registry and `DispatchMode`,
# numpy's floating-point error switch, the random `Generator`) is here because every
# tensor carries it, and you may skim it now: the module that uses it explains it.

# %%
#| default_exp _tensor

# %% [markdown]
# ## 1. The idea: a tensor is a view of flat memory
#
# Computer memory is one long row of bytes. A 2×3 matrix
#
# $$X = \begin{pmatrix} 0 & 1 & 2 \\ 3 & 4 & 5 \end{pmatrix}$$
#
# therefore has to be *laid out* in a row. The usual choice (C order, "row-major") stores
# row 0, then row 1: the **storage** is `[0, 1, 2, 3, 4, 5]`. To find element `X[i, j]` we
# need to know how far to jump in storage for one step along each dimension. Those jumps
# are the **strides**. For row-major 2×3 they are `(3, 1)`: one step down a column skips a
# whole row of 3 elements, one step along a row moves 1 element.
#
# In general, a tensor is four pieces of information:
#
# | field | meaning | example for X |
# |---|---|---|
# | `storage` | a flat 1-D buffer of elements | `[0, 1, 2, 3, 4, 5]` |
# | `shape` | size of each dimension | `(2, 3)` |
# | `strides` | elements to skip per step in each dimension | `(3, 1)` |
# | `offset` | where element `[0, 0, ...]` sits in storage | `0` |
#
# These four say where every element lives; section 3 asks you to say how.
#
# The key insight of this whole module: **many operations only change `shape`, `strides`
# and `offset`, never the storage.** Transposing X gives a 3×2 tensor whose element
# `[j, i]` is `X[i, j]`. Instead of moving six numbers, we swap the strides to `(1, 3)` and
# keep the same storage. That is called a **view**; it costs no memory and constant time,
# whatever the tensor's size. The picture below shows both tensors reading the same six
# storage cells (same colour = same memory).
#
# (We count strides in **elements**, as PyTorch's `Tensor.stride()` does. numpy counts in
# bytes: `arr.strides` is our strides times the element size.)

# %%
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from tinytorch.testing import (assert_close, assert_equal, assert_raises, check, outcome, peak_bytes,  # got/expected
                               python_steps)


def draw_layout(ax, title, shape, strides, offset=0, n_storage=6):
    """Draw a 2-D tensor (top) over its flat storage (bottom): a cell and the storage element
    it reads share a colour, and each storage element names the index that reads it."""
    colors = plt.cm.tab10(np.arange(n_storage) % 10)
    rows, cols = shape
    left = (n_storage - cols) / 2  # the grid centred over the storage
    readers = {}
    for r in range(rows):
        for c in range(cols):
            pos = offset + r * strides[0] + c * strides[1]
            readers[pos] = f"[{r},{c}]"
            ax.add_patch(Rectangle((left + c, rows - r), 1, 1, facecolor=colors[pos], edgecolor="black",
                                   alpha=0.5))
            ax.text(left + c + 0.5, rows - r + 0.5, f"[{r},{c}]\n→ {pos}", ha="center", va="center", fontsize=10)
    for k in range(n_storage):  # the flat storage, one box per element
        ax.add_patch(Rectangle((k, -1), 1, 1, facecolor=colors[k], edgecolor="black", alpha=0.5))
        ax.text(k + 0.5, -0.5, str(k), ha="center", va="center", fontsize=11, weight="bold")
        ax.text(k + 0.5, -1.35, readers.get(k, ""), ha="center", va="center", fontsize=9)
    ax.text(n_storage / 2, rows + 1.45, title, fontsize=10, ha="center")
    ax.text(n_storage / 2, -1.95, "storage (flat memory): position, and the index that reads it",
            fontsize=9, ha="center")
    ax.set_xlim(-0.3, n_storage + 0.3)
    ax.set_ylim(-2.3, rows + 1.8)
    ax.set_aspect("equal")
    ax.axis("off")


fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
draw_layout(axes[0], "x: shape (2, 3), strides (3, 1), offset 0", (2, 3), (3, 1))
draw_layout(axes[1], "x.T: shape (3, 2), strides (1, 3), offset 0\nthe same storage, no copy", (3, 2), (1, 3))
fig.tight_layout()
plt.show()

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ### The dtypes tinytorch supports
#
# Every element of a storage has the same type. All are numpy dtypes under the hood, with
# PyTorch's defaults:
#
# - `float32` — the default for real numbers (4 bytes: half the memory and twice the
#   throughput of float64, and plenty of precision for training);
# - `float64` — used by module 06's gradient checks, where float32 rounding would hide bugs;
# - `int64` — Python ints, counts, indices (class labels, token ids);
# - `bool` — results of comparisons and masks;
# - `int8`, `uint8`, `int16`, `int32` — narrow integers, for storage rather than
#   arithmetic: module 15 keeps quantized weights as int8 (a quarter of float32's bytes),
#   and images often arrive as uint8.
#
# The cell below starts the package file: imports, the dtype constants and `__all__`, the
# list of public names that `import tinytorch` re-exports.
#
# It also defines the one error class of this module, `ShapeError`. When shapes do not fit
# (a matmul whose inner sizes differ, a reshape with two `-1`, shapes that do not
# broadcast), PyTorch raises a `RuntimeError`, while Python's own convention (and numpy's)
# is a `ValueError`. `ShapeError` derives from both, so that `except RuntimeError` written
# for PyTorch and `except ValueError` written for numpy both catch it. Wherever a contract
# below says "raises ShapeError", raise this class with a message that names the shapes.

# %%
#| export
import math
from collections import namedtuple

import numpy as np

from tinytorch.random import numpy_generator

__all__ = [
    "Tensor", "Node", "apply", "is_grad_enabled", "set_grad_enabled",
    "float32", "float64", "int64", "bool_", "int8", "uint8", "int16", "int32",
    "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "arange", "eye",
    "rand", "randn", "randint",
    "broadcast_shapes", "broadcast_to", "transpose", "permute", "reshape", "flatten",
    "squeeze", "unsqueeze", "where", "matmul", "cat", "stack", "memory_footprint",
    "ShapeError", "tril", "triu", "maximum", "minimum", "flip", "roll", "cumsum", "sort", "topk",
    "device",
]

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int64 = np.dtype("int64")
bool_ = np.dtype(bool)
int8 = np.dtype("int8")
uint8 = np.dtype("uint8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
_DTYPES = (float32, float64, int64, bool_, int8, uint8, int16, int32)


class ShapeError(RuntimeError, ValueError):
    """Shapes (or sizes) that do not fit the operation.

    Both a RuntimeError (what PyTorch raises for shape errors) and a ValueError (what numpy
    and Python raise), so code written either way catches it. Also raised for an integer
    tensor to a negative integer power, which PyTorch reports as a RuntimeError too.
    """

# %% [markdown]
# ## 2. Contiguous strides
#
# A freshly created tensor is stored row-major ("contiguous"): the last dimension moves
# fastest. Its strides follow from the shape alone: X above, of shape `(2, 3)`, has `(3, 1)`.
# Before you write the function, work out by hand the strides of shape `(2, 3, 4)` and of
# `(5, 2, 3, 4)`, and say in one sentence what each stride is made of.
#
# Two corner cases: a 0-d tensor (a scalar, shape `()`) has strides `()`, and a dimension of
# size 0 must not turn the other strides into 0: PyTorch counts it as size 1, so that
# `(2, 0, 3)` has strides `(3, 3, 1)`, and so do we. A size-1 dimension is *not* special
# here: `(4, 1, 3)` has strides `(3, 3, 1)`.
#
# <details><summary>Hint 1</summary>
#
# What does one step along the last dimension skip in a row-major layout? And one step along
# the dimension before it?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Each stride is the product of the sizes of the dimensions to its right (an empty product
# is 1).
# </details>
#
# <details><summary>The approach</summary>
#
# A stride answers "how far apart in memory are two elements whose index differs by one
# in this dimension, and only there?". Between them lie whole copies of everything to the
# right of that dimension, so each stride follows from the one to its right, and the last
# dimension's from nothing at all. Decide what a size-0 dimension must contribute so that
# the strides stay the ones PyTorch reports.
# </details>

# %% nbgrader={"grade": false, "grade_id": "contiguous-strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def contiguous_strides(shape):
    """Row-major strides, in elements, for a tensor of `shape`.

    Contract: `shape` is a sequence of non-negative ints, Python or numpy (possibly empty).
    Returns a tuple of Python ints, one per dimension (`()` for a 0-d shape). A size-0 dimension must not zero
    the other strides (it counts as size 1).
    """
    # Idea: a stride is how many storage elements one step along that dimension skips.
    ### BEGIN SOLUTION
    strides, step = (), 1
    for size in reversed(shape):
        strides = (step,) + strides
        step *= max(int(size), 1)
    return strides
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-contiguous-strides", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# numpy knows the row-major strides of any shape with elements (it counts bytes: divide by the element size).
for _shape in [(2, 3), (2, 3, 4), (5, 2, 3, 4), (5,), (3, 5, 7), (4, 1, 3)]:
    _a = np.zeros(_shape, dtype=np.float32)
    assert_equal(contiguous_strides(_shape), tuple(s // _a.itemsize for s in _a.strides),
                 f"contiguous_strides({_shape}) against numpy's strides / itemsize")
# The corner cases the text fixes (numpy reports 0s for a shape with no elements; PyTorch does not):
for _shape, _expected in [((), ()), ((2, 0, 3), (3, 3, 1)), ((0,), (1,))]:
    assert_equal(contiguous_strides(_shape), _expected, f"contiguous_strides({_shape})")
check(all(type(s) is int for s in contiguous_strides(np.array([2, 3]))),
      "the strides are Python ints, even for a shape given as numpy integers",
      got=[type(s).__name__ for s in contiguous_strides(np.array([2, 3]))], expected=["int", "int"])
print("✓ contiguous_strides((2, 0, 3)) =", contiguous_strides((2, 0, 3)))

# %% [markdown]
# ## 3. The address formula and its inverse
#
# Two small functions carry the whole idea of a strided tensor. They work on plain tuples
# and ints, know nothing about `Tensor`, and go into their own package file,
# `tinytorch/_strided.py`, where module 17 finds them: it writes the same loops again for
# numba's compiler and checks its compiled ones against yours.
#
# **The address formula** turns a multi-index into a storage position, from the four
# fields of section 1 and nothing else. Derive it before you write it: in a storage of 12
# elements, where does the view with shape `(2, 3)`, strides `(1, 4)` and offset 1 put
# element `[1, 2]`? Then say it for any number of dimensions. Your formula must not assume a
# row-major layout: the same function serves a transposed view (strides `(1, 3)`), a slice
# that starts in the middle of the storage (an offset), a reversed view (a negative stride:
# numpy makes those for `a[::-1]`) and the views of later sections, whose strides you have
# not met yet. The check prints the position it computed for `[1, 2]`.
#
# **The inverse** goes the other way round, for the *order* in which we visit elements: the
# k-th element in row-major order over a shape (its **ordinal**, 0, 1, 2, ...) has which
# multi-index? Over shape `(2, 3, 4)`, which element is ordinal 17, and which is ordinal 5?
# Find them by hand, then find the rule. (numpy's `np.unravel_index` computes it; your check
# compares with it.) Section 10's loops will need both directions.
#
# The cell below starts the new package file. It imports nothing, and the functions you
# write into it must not need anything either (no `np.`): the notebook has numpy at hand,
# the exported file does not, and module 17 compiles these loops as they are.

# %%
#| export _strided
"""Strided loops in pure Python: the semantics of every elementwise op and reduction.

Plain functions over flat storages (numpy 1-D arrays), shape/stride tuples and ints; no
Tensor objects: module 17 writes the same loops again for numba and checks them against these. tinytorch's Tensor
uses numpy for speed; these loops are the reference its results must agree with.
"""

__all__ = ["index_to_position", "ordinal_to_index", "broadcast_strides",
           "strided_map", "strided_zip", "strided_reduce"]

# %% [markdown]
# <details><summary>Hint 1 (index_to_position)</summary>
#
# Start from where element `[0, 0, ...]` lives. What does each index entry add to that?
# </details>
#
# <details><summary>The approach (index_to_position)</summary>
#
# The formula is a sum with one term per dimension, starting from where element
# `[0, 0, ...]` lives. Write it so that it does not care whether it is given tuples, lists
# or (in module 17) numpy arrays, and does not touch any index it was not given.
# </details>
#
# <details><summary>Hint 1 (ordinal_to_index)</summary>
#
# In row-major order, which index moves fastest when the ordinal goes up by one? After how
# many steps does the index before it move?
# </details>
#
# <details><summary>Hint 2 (ordinal_to_index)</summary>
#
# Think of the ordinal as a number written in a mixed-radix system whose digits are the
# indices and whose bases are the sizes, the last size being the lowest digit.
# </details>
#
# <details><summary>The approach (ordinal_to_index)</summary>
#
# It is the address formula run backwards on contiguous strides: the last dimension
# changes fastest, so it is the lowest digit of the ordinal, and what is left once that
# digit is taken away counts steps of the dimension before. Decide where the digits go
# so that the list comes out in the dimensions' order.
# </details>

# %% nbgrader={"grade": false, "grade_id": "address-formula", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export _strided
def index_to_position(index, strides, offset):
    """The storage position of the element at multi-index `index` (the address formula).

    Contract: `index` and `strides` are sequences of ints of the same length (empty for a 0-d
    tensor; strides may be 0 or negative), `offset` an int. Returns an int. No bounds
    checks: the caller passes valid indices.
    """
    # Idea: find element [1, 2] of the prose's view (strides (1, 4), offset 1) by hand first;
    # then say what you did for any index and any strides.
    ### BEGIN SOLUTION
    position = offset
    for k in range(len(index)):
        position += index[k] * strides[k]
    return position
    ### END SOLUTION


def ordinal_to_index(ordinal, shape):
    """The multi-index of the `ordinal`-th element of `shape` in row-major order (the inverse).

    Contract: `shape` is a sequence of positive ints, `0 <= ordinal < prod(shape)`. Returns a
    list of ints, one per dimension (`[]` for shape `()`), with the last index moving fastest
    (C order, as `np.unravel_index`).
    """
    # Idea: which index of a (3, 4) tensor is element 7? Do it by hand, then for shape (2, 3, 4).
    ### BEGIN SOLUTION
    index = [0] * len(shape)
    for k in range(len(shape) - 1, -1, -1):
        index[k] = ordinal % shape[k]
        ordinal = ordinal // shape[k]
    return index
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-address-formula", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# The example from the text: shape (2, 3), strides (1, 4), offset 1 in a storage of 12 holding 0..11,
# so the element numpy's view of that layout reads is its own position.
_store = np.arange(12)
_text_view = np.lib.stride_tricks.as_strided(_store[1:], shape=(2, 3), strides=(_store.itemsize, 4 * _store.itemsize))
assert_equal(index_to_position((1, 2), (1, 4), 1), int(_text_view[1, 2]),
             "index_to_position((1, 2), strides (1, 4), offset 1): the position numpy's view of that layout reads")
assert_equal(index_to_position((), (), 7), 7, "a 0-d tensor lives at its offset")
assert_equal(index_to_position((3, 1), (0, 1), 2), 3, "a stride-0 (broadcast) dimension adds nothing")
assert_equal(index_to_position((2,), (-1,), 4), 2, "a negative stride walks backwards")
# Against numpy, on views that are transposed, broadcast, offset and reversed:
_base = np.arange(24.0)
for _what, _view in [("a transposed view", _base.reshape(4, 6).T),
                     ("an offset, stepped slice", _base.reshape(4, 6)[1:, 1::2]),
                     ("a broadcast view (stride 0)", np.broadcast_to(_base[5:8], (2, 3))),
                     ("a reversed view (negative stride)", _base.reshape(4, 6)[::-1, 2])]:
    _strides = tuple(s // _base.itemsize for s in _view.strides)
    _offset = (_view.__array_interface__["data"][0] - _base.__array_interface__["data"][0]) // _base.itemsize
    for _idx in np.ndindex(*_view.shape):
        assert_equal(_base[index_to_position(_idx, _strides, _offset)], _view[_idx],
                     f"{_what}: element {_idx} read through index_to_position")
for _shape in [(2, 3, 4), (5,), (3, 1, 2), ()]:
    for _k in range(int(np.prod(_shape))):
        assert_equal(tuple(ordinal_to_index(_k, _shape)), tuple(int(i) for i in np.unravel_index(_k, _shape)),
                     f"ordinal_to_index({_k}, {_shape}) against np.unravel_index")
check(isinstance(ordinal_to_index(5, (2, 3)), list), "ordinal_to_index returns a list (its contract)",
      got=type(ordinal_to_index(5, (2, 3))).__name__)
# The two are inverses for a contiguous layout: ordinal -> index -> position gives the ordinal back.
_shape = (3, 4, 2)
assert_equal([index_to_position(ordinal_to_index(k, _shape), contiguous_strides(_shape), 0) for k in range(24)],
             list(range(24)), "position(ordinal_to_index(k)) over contiguous strides")
_outside = sorted({n for _f in (index_to_position, ordinal_to_index) for n in _f.__code__.co_names} & {"np", "numpy", "math"})
check(not _outside, "index_to_position and ordinal_to_index use only plain Python: tinytorch/_strided.py, where "
      "they are exported, imports nothing (no numpy)", got=_outside, expected=[])
print("✓ address formula: [1, 2] of the (2, 3) view with strides (1, 4), offset 1 is at",
      index_to_position((1, 2), (1, 4), 1), "| ordinal 17 of (2, 3, 4) is", ordinal_to_index(17, (2, 3, 4)),
      "and ordinal 5 is", ordinal_to_index(5, (2, 3, 4)))

# %% [markdown]
# ## 4. The Tensor class
#
# Now the class itself. It holds exactly the four fields from the table above:
#
# - `_storage`: a 1-D, contiguous numpy array (the flat memory; many tensors may share it);
# - `shape`: a tuple of ints;
# - `_strides`: a tuple of ints, **in elements**;
# - `_offset`: an int, in elements.
#
# plus three fields that autograd (module 06) will use: `requires_grad`, `grad` and
# `grad_fn`. We build it on numpy on purpose: numpy does the fast arithmetic in C, while
# *you* own the layout logic, which is where the ideas are.
#
# **From layout to numpy.** To compute with numpy we need a numpy array that sees the
# storage through our shape and strides. The provided helper `_strided_array` builds one:
# `np.ndarray(shape, dtype, buffer=storage, offset=..., strides=...)`. That is the same
# array that `np.lib.stride_tricks.as_strided(storage[offset:], shape, strides_in_bytes)`
# would give, with one difference that matters while you are learning: the `ndarray`
# constructor *checks* that the strides stay inside the buffer, so a wrong stride gives an
# error instead of reading random memory (or crashing Python). The array it returns shares
# memory with the storage: writing into it writes into the tensor. (For three common
# layouts, a 0-d tensor and a 1-D or 2-D tensor that is its whole storage in row-major
# order, it takes a plain numpy view of the storage instead, which is cheaper to make and is
# the same array.)
#
# **Converting input data.** `tensor([[1, 2], [3, 4]])` must choose a dtype. The provided
# `_as_array` applies PyTorch's rules: Python floats become float32, Python ints int64,
# Python bools bool; a numpy array keeps its dtype when tinytorch has it, other numpy floats
# become float32 and other integers int64. It always returns a *fresh* C-contiguous array
# (a tensor never aliases the list or array you gave it, just like `torch.tensor`).
#
# **Your part: `_init_storage`.** Given that fresh C-contiguous array, set up the four
# layout fields so that the tensor reads the array's elements, in the array's shape,
# through the address formula of section 3. Both `Tensor(...)` and every operation that
# computes a new result (`apply`, below) come through `_init_storage`, so what you write
# here is the layout of every freshly computed tensor in the course.
#
# The rest of the class is a thin façade: most methods call a module-level function you
# will write later in this notebook (`x.transpose(0, 1)` calls `transpose(x, 0, 1)`, as in
# PyTorch where `torch.transpose` and `Tensor.transpose` are the same op). That is why
# the class can be written in one cell now, while its views, indexing and arithmetic are
# filled in step by step below. Read through it once; the comments say why each piece is
# there. The hints for `_init_storage` come with its code, a little further down.

# %%
#| export
def _check_dtype(dtype):
    """Turn a dtype-like (np.float32, "float32", float, tinytorch.float32) into one of ours."""
    dt = np.dtype(dtype)
    if dt not in _DTYPES:
        raise TypeError(f"tinytorch supports the dtypes float32, float64, int64, bool, int8, uint8, "
                        f"int16 and int32, not {dt}")
    return dt


def _default_dtype(dt):
    """The dtype a numpy array of dtype `dt` becomes when it enters tinytorch."""
    if dt in _DTYPES:
        return dt
    if dt.kind == "f":
        return float32
    if dt.kind in "iu":
        return int64
    raise TypeError(f"tinytorch cannot hold data of numpy dtype {dt} (use numbers or bools)")


def _as_array(data, dtype=None):
    """A fresh, C-contiguous numpy array for `data`, with tinytorch's dtype rules."""
    if dtype is not None:
        dtype = _check_dtype(dtype)
    if isinstance(data, Tensor):
        arr = data.numpy()
    elif isinstance(data, (np.ndarray, np.generic)):
        arr = np.asarray(data)
    else:  # Python scalars and (nested) lists: infer like PyTorch
        arr = np.array(data)
        if dtype is None:
            kind = arr.dtype.kind
            if kind == "f":
                dtype = float32
            elif kind in "iu":
                dtype = int64
            elif kind == "b":
                dtype = bool_
            else:
                raise TypeError(f"cannot make a tensor from {type(data).__name__} data "
                                f"(numpy inferred dtype {arr.dtype})")
    if dtype is None:
        dtype = _default_dtype(arr.dtype)
    return np.array(arr, dtype=dtype, copy=True, order="C")


def _strided_array(storage, shape, strides, offset):
    """The numpy array that sees `storage` through (shape, strides, offset); shares memory."""
    itemsize = storage.itemsize
    # Three common layouts have cheaper views than the general constructor: a 0-d tensor (one
    # element), and a 1-D or 2-D tensor that is its whole storage in row-major order.
    if not shape:
        return storage[offset, ...]
    if offset == 0 and strides[-1] == 1:
        if len(shape) == 1 and shape[0] == storage.shape[0]:
            return storage[:]
        if len(shape) == 2 and strides[0] == shape[1] and shape[0] * shape[1] == storage.shape[0]:
            return storage.reshape(shape)
    # (Positional arguments: numpy parses keywords here three times slower.)
    return np.ndarray(shape, storage.dtype, storage, offset * itemsize, [s * itemsize for s in strides])


_ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


class device:
    """Where a tensor's data lives: `device("cpu")` or `device("cuda")` (= "cuda:0").

    PyTorch's torch.device. tinytorch knows one GPU, so "cuda" and "cuda:0" are the same
    device, and a device compares equal to its string ("cuda:0", or "cuda" for short).
    """

    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        if not isinstance(spec, str):
            raise TypeError(f"a device is named by a string such as 'cpu' or 'cuda', "
                            f"got {type(spec).__name__}")
        kind, _, number = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {spec}")
        if number:
            index = int(number)
        if kind == "cuda" and index not in (None, 0):
            raise RuntimeError(f"tinytorch drives one GPU, cuda:0; got {spec!r}")
        self.type = kind
        self.index = 0 if kind == "cuda" else None

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{index})"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, ValueError):
                return False
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


_CPU = device("cpu")
_DEVICE_WORDS = ("cpu", "cuda", "gpu", "mps", "xla", "meta")  # strings that name a device


# %% [markdown]
# First the storage and layout: the constructor, `_init_storage` (yours), and the two
# ways to make a tensor without going through `__init__`: `_from_array` for a computed
# result and `_view` for a view.
#
# <details><summary>Hint 1 (_init_storage)</summary>
#
# The storage must be one-dimensional and must *be* the array's memory, not a copy of it.
# Which numpy operation flattens a C-contiguous array without copying?
# </details>
#
# <details><summary>Hint 2 (_init_storage)</summary>
#
# Where in its storage does a brand-new tensor start? Which function of section 2 gives
# the strides of a row-major layout?
# </details>
#
# <details><summary>The approach (_init_storage)</summary>
#
# A tensor that owns its memory is the simplest layout there is: all four fields
# follow from the array alone. The contract asks for two things that are easy to miss:
# the storage must be the *same* memory as the array (no copy; what does `.base` say?),
# and the shape and strides must be plain Python ints.
# </details>

# %% nbgrader={"grade": false, "grade_id": "tensor-storage", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class _TensorStorage:
    """Storage and layout: the constructor, `_init_storage`, `_from_array`, `_view`, `numpy`."""

    def __init__(self, data, dtype=None, requires_grad=False):
        """Copy `data` (list, scalar, numpy array or Tensor) into a new contiguous tensor."""
        arr = _as_array(data, dtype)
        if requires_grad and arr.dtype.kind != "f":
            raise ValueError(f"only tensors of floating point dtype can require gradients, "
                             f"not {arr.dtype}")
        self._requires_grad = bool(requires_grad)
        self.grad = None
        self.grad_fn = None
        self._init_storage(arr)

    def _init_storage(self, arr):
        """Make the fresh C-contiguous array `arr` this tensor's memory and layout.

        Contract: sets `_storage` (1-D, sharing arr's memory: no copy), `shape` (a tuple of
        ints), `_strides` (row-major, a tuple of ints) and `_offset` (an int). Returns None.
        """
        # Idea: the array already is row-major memory; only the description is missing.
        ### BEGIN SOLUTION
        self._storage = arr.ravel()  # a C-contiguous array ravels to a view
        self.shape = arr.shape  # numpy's shape already is a tuple of Python ints
        self._strides = contiguous_strides(self.shape)
        self._offset = 0
        ### END SOLUTION

    @staticmethod
    def _from_array(arr):
        """Wrap a freshly computed numpy array (no extra copy when it is already C-contiguous)."""
        if type(arr) is not np.ndarray or arr.dtype not in _DTYPES or not arr.flags.c_contiguous:
            arr = np.asarray(arr)  # the common case (a fresh C-contiguous result) skips both
            arr = np.asarray(arr, dtype=_default_dtype(arr.dtype), order="C")
        t = Tensor.__new__(Tensor)
        t._requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._init_storage(arr)
        return t

    def _view(self, shape, strides, offset):
        """A new Tensor over the SAME storage with the given layout (the heart of every view).

        It checks that the layout stays inside the storage, so that a stride bug shows up
        as a clear error here rather than as garbage values later.
        """
        shape = tuple(map(int, shape))
        strides = tuple(map(int, strides))
        offset = int(offset)
        if len(shape) != len(strides):
            raise RuntimeError(f"layout error: shape {shape} and strides {strides} differ in length")
        if 0 not in shape:  # an empty view reaches nothing
            lo = hi = offset  # the lowest and highest storage positions the view reaches
            for n, s in zip(shape, strides):
                if s > 0:
                    hi += (n - 1) * s
                else:
                    lo += (n - 1) * s
            if lo < 0 or hi >= self._storage.size:
                raise RuntimeError(
                    f"layout error: a view with shape {shape}, strides {strides} and offset "
                    f"{offset} would reach storage positions {lo}..{hi}, but the storage has "
                    f"{self._storage.size} elements; check your stride arithmetic")
        t = Tensor.__new__(Tensor)
        t._storage = self._storage
        t.shape = shape
        t._strides = strides
        t._offset = offset
        t._requires_grad = False
        t.grad = None
        t.grad_fn = None
        if self._device is not _CPU:  # a view lives where its storage lives
            t._device = self._device
        return t

    def numpy(self):
        """The numpy array seeing this tensor's memory (shares memory: writes go through)."""
        return _strided_array(self._storage, self.shape, self._strides, self._offset)

    def __array__(self, dtype=None, copy=None):
        """Let `np.asarray(t)` (and matplotlib, np.testing, ...) read a tensor."""
        arr = self.numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr


# %% [markdown]
# A first look at your `_init_storage`, on the class as it stands (the full check of the
# storage and layout comes when the Tensor class is complete, at the end of this section):

# %%
_probe, _arr = _TensorStorage.__new__(_TensorStorage), np.arange(6.0).reshape(2, 3)
_probe._init_storage(_arr)
check(getattr(_probe, "_storage", None) is not None and np.shares_memory(_probe._storage, _arr)
      and _probe._storage.ndim == 1, "the storage is the array's own memory, as one flat (1-D) array",
      got=getattr(_probe, "_storage", None))
assert_equal((_probe.shape, _probe._strides, _probe._offset), ((2, 3), (3, 1), 0),
             "a fresh (2, 3) array: (shape, strides, offset)")
print("✓ _init_storage, first look:", (_probe.shape, _probe._strides, _probe._offset))

# %% [markdown]
# The layout's read-only facts (`dtype`, `ndim`, `size()`, `stride()`, `nbytes`,
# `is_contiguous()`, ...) and the two copies, `contiguous()` and `clone()`:

# %%
#| export
class _TensorInfo:
    """Read-only facts about the layout: dtype, sizes, strides, bytes, contiguity."""

    @property
    def dtype(self):
        """The element type (a numpy dtype: one of float32, float64, int64, bool, int8, uint8, int16, int32)."""
        return self._storage.dtype

    @property
    def ndim(self):
        """Number of dimensions."""
        return len(self.shape)

    def dim(self):
        """Number of dimensions (PyTorch's method form of `ndim`)."""
        return len(self.shape)

    def numel(self):
        """Number of elements (the product of the shape; 1 for a 0-d tensor)."""
        return math.prod(self.shape)

    def size(self, dim=None):
        """The shape, or the size of one dimension (PyTorch's `Tensor.size`)."""
        if dim is None:
            return self.shape
        return self.shape[_wrap_dim(dim, self.ndim)]

    def stride(self, dim=None):
        """The strides in elements, or the stride of one dimension (PyTorch's `Tensor.stride`)."""
        if dim is None:
            return self._strides
        return self._strides[_wrap_dim(dim, self.ndim)]

    def storage_offset(self):
        """Where element [0, 0, ...] sits in the storage, in elements."""
        return self._offset

    def element_size(self):
        """Bytes per element (4 for float32, 8 for float64/int64, 1 for bool)."""
        return self._storage.itemsize

    @property
    def itemsize(self):
        """Bytes per element (alias of element_size(), like numpy/PyTorch)."""
        return self._storage.itemsize

    @property
    def nbytes(self):
        """Bytes the elements *seen* by this tensor occupy: numel * element_size.

        Not the same as the memory it keeps alive: see memory_footprint().
        """
        return self.numel() * self._storage.itemsize

    _device = _CPU  # every tensor starts on the CPU; only a move (to, cuda) changes it

    @property
    def device(self):
        """Where the data lives: device("cpu") (numpy storage), or device("cuda") after
        .to("cuda") (module 17: the ops then run on the GPU's kernels)."""
        return self._device

    def is_contiguous(self):
        """True if the elements are laid out row-major without gaps (see _is_contiguous)."""
        return _is_contiguous(self.shape, self._strides)

    def contiguous(self):
        """This tensor if already contiguous, else a row-major copy with fresh storage."""
        if self.is_contiguous():
            return self
        return apply("contiguous", lambda x: np.ascontiguousarray(x.numpy()), self)

    def clone(self):
        """A copy with fresh storage (recorded, so gradients flow through it)."""
        return apply("clone", lambda x: np.array(x.numpy(), copy=True, order="C"), self)


# %% [markdown]
# The autograd fields. Module 01 only stores them; module 06 gives them meaning
# (`backward()` calls its engine):

# %%
#| export
class _TensorAutograd:
    """The fields module 06 uses: requires_grad, grad, grad_fn, detach, backward."""

    @property
    def requires_grad(self):
        """Whether operations on this tensor are recorded for autograd (module 06)."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        flag = bool(flag)
        if flag and self.dtype.kind != "f":
            raise ValueError(f"only tensors of floating point dtype can require gradients, "
                             f"not {self.dtype}")
        if not flag and self.grad_fn is not None:
            raise RuntimeError("you can only change requires_grad of leaf tensors; "
                               "use .detach() to get a tensor without history")
        self._requires_grad = flag

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad in place and return self (PyTorch style, for chaining)."""
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        """The gradient autograd accumulated here (a Tensor of this shape), or None."""
        return self._grad

    @grad.setter
    def grad(self, value):
        # As in PyTorch: a gradient is a Tensor of the same shape and dtype (or None), so a
        # wrong one fails here, where it was assigned, not in the next backward().
        if value is not None:
            if not isinstance(value, _TensorStorage):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"{type(value).__name__}; wrap it: tinytorch.tensor(...)")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has shape {value.shape}, but the tensor has shape "
                                   f"{self.shape}")
            if value.dtype != self.dtype:
                raise RuntimeError(f"assigned grad has dtype {value.dtype}, but the tensor has dtype "
                                   f"{self.dtype}")
            if value._device != self._device:  # autograd's arrays are host arrays (module 17)
                value = value.detach()
                value._device = self._device
        self._grad = value

    @property
    def is_leaf(self):
        """True if this tensor was not produced by a recorded operation."""
        return self.grad_fn is None

    def retain_grad(self):
        """Ask autograd (module 06) to keep .grad on this non-leaf tensor too."""
        self._retains_grad = True

    def detach(self):
        """A tensor sharing this storage but cut from the graph (no grad, no history)."""
        return self._view(self.shape, self._strides, self._offset)

    @property
    def data(self):
        """The values without autograd history (a detached tensor sharing storage)."""
        return self.detach()

    @data.setter
    def data(self, value):
        """Copy `value` into this tensor's memory without recording anything."""
        src = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        if tuple(src.shape) != self.shape:
            raise ValueError(f"data: cannot assign values of shape {tuple(src.shape)} "
                             f"to a tensor of shape {self.shape}")
        _check_writable(self, check_grad=False)
        np.copyto(self.numpy(), src, casting="unsafe")

    def backward(self, gradient=None, retain_graph=False, create_graph=False):
        """Compute gradients of this tensor w.r.t. the leaves (the engine is module 06's)."""
        try:
            from tinytorch.autograd import backward as _backward
        except ImportError as exc:
            if exc.name not in (None, "tinytorch.autograd"):
                raise
            raise RuntimeError(
                "backward() needs autograd, which you build in module 06 (06_autograd). "
                "Module 01 already records the graph (see .grad_fn); module 06 adds the "
                "engine that walks it.") from exc
        return _backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)


# %% [markdown]
# Conversions to and from Python (numbers, lists, `repr`, dtype changes):

# %%
#| export
class _TensorPython:
    """Conversions to Python: item, tolist, len, iteration, bool, repr, to(dtype)."""

    # Python conversions
    def item(self):
        """The single value as a Python number (error unless numel() == 1)."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to "
                               f"a Python scalar (item() needs exactly one element; shape {self.shape})")
        return self.numpy().item()

    def tolist(self):
        """Nested Python lists (a Python number for a 0-d tensor)."""
        return self.numpy().tolist()

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        for i in range(self.shape[0]):
            yield self[i]

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __repr__(self):
        arr = self.numpy()
        if arr.ndim == 0:
            body = np.array2string(arr.reshape(1), separator=", ")[1:-1].strip()
        else:
            body = np.array2string(arr, separator=", ", prefix="tensor(")
        extras = []
        if self.numel() == 0 and self.ndim != 1:
            extras.append(f"size={self.shape}")
        if self._device is not _CPU:
            extras.append(f"device='{self._device}'")
        if self.dtype not in (float32, int64, bool_):  # the defaults of their kind go unsaid
            extras.append(f"dtype=tinytorch.{self.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn={self.grad_fn!r}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    def __str__(self):  # print() shows the repr, a subclass's own included (Parameter's)
        return repr(self)

    def to(self, *args, dtype=None, device=None):
        """This tensor on another device and/or converted to another dtype, PyTorch's
        `to(device)`, `to(dtype)`, `to(device, dtype)`; self when nothing changes."""
        for arg in args:
            if isinstance(arg, type(_CPU)) or (isinstance(arg, str) and arg.split(":")[0] in _DEVICE_WORDS):
                device = arg
            else:
                dtype = arg
        out = self
        if device is not None:
            out = _to_device(out, device)
        if dtype is not None:
            dt = _check_dtype(dtype)
            if dt != out.dtype:
                out = apply("to", lambda x, dtype: x.numpy().astype(dtype), out, dtype=dt)
        return out

    def cuda(self):
        """This tensor on the GPU (to("cuda")); module 17's backend runs its ops there."""
        return _to_device(self, "cuda")

    def cpu(self):
        """This tensor on the CPU (self if it is there already)."""
        return _to_device(self, "cpu")


# %% [markdown]
# The view methods. Each one calls a module-level function that you write later (sections 6
# to 9, and indexing in section 11):

# %%
#| export
class _TensorViews:
    """The view methods; each calls the module-level op you write in sections 6-9 and 11."""

    def transpose(self, dim0, dim1):
        """Swap two dimensions (a view). See transpose()."""
        return transpose(self, dim0, dim1)

    def permute(self, *dims):
        """Reorder the dimensions (a view). See permute()."""
        return permute(self, *dims)

    @property
    def T(self):
        """All dimensions reversed (a view): the matrix transpose for 2-D tensors."""
        # (the reversed dims are a permutation by construction: nothing for permute to check)
        return apply("permute", _permute_view, self, dims=tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        """The last two dimensions swapped (a view): a batch of transposed matrices."""
        if self.ndim < 2:
            raise ShapeError(f"mT needs a tensor with at least 2 dimensions, got shape {self.shape}")
        return transpose(self, -2, -1)

    def view(self, *shape):
        """The same elements with a new shape, always zero-copy (contiguous tensors only)."""
        return _view_op(self, *shape)

    def reshape(self, *shape):
        """The same elements with a new shape: a view when possible, else a copy."""
        return reshape(self, *shape)

    def flatten(self, start_dim=0, end_dim=-1):
        """Merge dimensions start_dim..end_dim into one. See flatten()."""
        return flatten(self, start_dim, end_dim)

    def squeeze(self, dim=None):
        """Drop size-1 dimensions (a view). See squeeze()."""
        return squeeze(self, dim)

    def unsqueeze(self, dim):
        """Insert a size-1 dimension at `dim` (a view). See unsqueeze()."""
        return unsqueeze(self, dim)

    def expand(self, *sizes):
        """Broadcast size-1 dimensions to bigger sizes without copying (stride 0)."""
        return _expand(self, _shape_arg(sizes))

    def expand_as(self, other):
        """expand(other.shape)."""
        return _expand(self, other.shape)

    def as_strided(self, size, stride, storage_offset=None):
        """A view with an explicit layout over the same storage (expert tool, e.g. im2col)."""
        offset = self._offset if storage_offset is None else int(storage_offset)
        size, stride = tuple(size), tuple(stride)
        return apply("as_strided", lambda x, size, stride, storage_offset:
                     x._view(size, stride, storage_offset),
                     self, size=size, stride=stride, storage_offset=offset)

    def __getitem__(self, index):
        return _getitem(self, index)

    def __setitem__(self, index, value):
        _setitem(self, index, value)


# %% [markdown]
# The operators. `a + b` becomes `_binary("add", np.add, a, b)` (section 12); returning
# `NotImplemented` for an unknown operand lets Python try the other operand's reflected
# method:

# %%
#| export
class _TensorOperators:
    """Arithmetic and comparison operators; all go through _binary (section 12)."""

    def add(self, other):
        """self + other, broadcasting."""
        return _binary("add", np.add, self, other)

    def sub(self, other):
        """self - other, broadcasting."""
        return _binary("sub", np.subtract, self, other)

    def mul(self, other):
        """self * other, broadcasting."""
        return _binary("mul", np.multiply, self, other)

    def div(self, other):
        """self / other, broadcasting; true division (ints give float32)."""
        return _binary("div", np.true_divide, self, other)

    def pow(self, exponent):
        """self ** exponent, broadcasting."""
        return _binary("pow", np.power, self, exponent)

    __hash__ = object.__hash__  # __eq__ is elementwise, so restore identity hashing

    def __add__(self, other):
        return _binary("add", np.add, self, other) if _is_operand(other) else NotImplemented

    def __radd__(self, other):
        return _binary("add", np.add, other, self) if _is_operand(other) else NotImplemented

    def __sub__(self, other):
        return _binary("sub", np.subtract, self, other) if _is_operand(other) else NotImplemented

    def __rsub__(self, other):
        return _binary("sub", np.subtract, other, self) if _is_operand(other) else NotImplemented

    def __mul__(self, other):
        return _binary("mul", np.multiply, self, other) if _is_operand(other) else NotImplemented

    def __rmul__(self, other):
        return _binary("mul", np.multiply, other, self) if _is_operand(other) else NotImplemented

    def __truediv__(self, other):
        return _binary("div", np.true_divide, self, other) if _is_operand(other) else NotImplemented

    def __rtruediv__(self, other):
        return _binary("div", np.true_divide, other, self) if _is_operand(other) else NotImplemented

    def __pow__(self, other):
        return _binary("pow", np.power, self, other) if _is_operand(other) else NotImplemented

    def __rpow__(self, other):
        return _binary("pow", np.power, other, self) if _is_operand(other) else NotImplemented

    def __neg__(self):
        return self.neg()

    def __abs__(self):
        return self.abs()

    def __eq__(self, other):
        return _binary("eq", np.equal, self, other) if _is_operand(other) else NotImplemented

    def __ne__(self, other):
        return _binary("ne", np.not_equal, self, other) if _is_operand(other) else NotImplemented

    def __lt__(self, other):
        return _binary("lt", np.less, self, other) if _is_operand(other) else NotImplemented

    def __le__(self, other):
        return _binary("le", np.less_equal, self, other) if _is_operand(other) else NotImplemented

    def __gt__(self, other):
        return _binary("gt", np.greater, self, other) if _is_operand(other) else NotImplemented

    def __ge__(self, other):
        return _binary("ge", np.greater_equal, self, other) if _is_operand(other) else NotImplemented


# %% [markdown]
# Unary functions, and the in-place ops of section 13 (their names end in `_`, as in
# PyTorch):

# %%
#| export
class _TensorMath:
    """Unary functions, clamp and masked_fill (section 12) and the in-place ops (section 13)."""

    def neg(self):
        """-self."""
        return _unary("neg", np.negative, self)

    def abs(self):
        """|self|, elementwise."""
        return _unary("abs", np.abs, self)

    def exp(self):
        """e ** self, elementwise (ints give float32)."""
        return _unary("exp", np.exp, self, to_float=True)

    def log(self):
        """Natural logarithm, elementwise (ints give float32; log(0) = -inf)."""
        return _unary("log", np.log, self, to_float=True)

    def sqrt(self):
        """Square root, elementwise (ints give float32)."""
        return _unary("sqrt", np.sqrt, self, to_float=True)

    def sin(self):
        """Sine, elementwise, in radians (ints give float32)."""
        return _unary("sin", np.sin, self, to_float=True)

    def cos(self):
        """Cosine, elementwise, in radians (ints give float32)."""
        return _unary("cos", np.cos, self, to_float=True)

    def clamp(self, min=None, max=None):
        """Limit values to [min, max] (either bound may be None). ReLU is clamp(min=0)."""
        return _clamp(self, min, max)

    def masked_fill(self, mask, value):
        """A copy with `value` wherever the bool `mask` (broadcast to self) is True."""
        return _masked_fill(self, mask, value)

    # in place
    def add_(self, other, alpha=1):
        """self += alpha * other, in place."""
        return _inplace(self, np.add, other, alpha=alpha)

    def sub_(self, other, alpha=1):
        """self -= alpha * other, in place."""
        return _inplace(self, np.subtract, other, alpha=alpha)

    def mul_(self, other):
        """self *= other, in place."""
        return _inplace(self, np.multiply, other)

    def div_(self, other):
        """self /= other, in place (refused on int tensors: the result would be float)."""
        return _inplace(self, np.true_divide, other)

    def zero_(self):
        """Set every element to 0, in place."""
        return _inplace(self, None, 0)

    def fill_(self, value):
        """Set every element to `value`, in place."""
        return _inplace(self, None, value)

    def copy_(self, src):
        """Copy `src` (broadcast to self's shape, cast to self's dtype) into self."""
        return _inplace(self, None, src, cast=True)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)


# %% [markdown]
# Reductions (section 14), matmul (section 15) and the dtype shortcuts:

# %%
#| export
class _TensorReductions:
    """Reductions (section 14), matmul (section 15) and dtype shortcuts."""

    def sum(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Sum over `dim` (int, tuple, or None = all). Ints and bools sum to int64."""
        return _reduce("sum", np.sum, self, dim, keepdim, axis, keepdims)

    def mean(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Mean over `dim`. Floating tensors only (PyTorch's rule): call .float() first."""
        if self.dtype.kind != "f":
            raise RuntimeError(f"mean(): input dtype must be floating point, got {self.dtype} "
                               f"(PyTorch refuses too); use t.float().mean()")
        return _reduce("mean", np.mean, self, dim, keepdim, axis, keepdims)

    def amax(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Maximum over `dim` (int, tuple, or None = all)."""
        return _reduce("amax", np.max, self, dim, keepdim, axis, keepdims)

    def amin(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Minimum over `dim` (int, tuple, or None = all)."""
        return _reduce("amin", np.min, self, dim, keepdim, axis, keepdims)

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """No dim: the largest element (0-d). With dim: (values, indices), like PyTorch."""
        return _max_min("max", self, dim, keepdim, axis, keepdims)

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """No dim: the smallest element (0-d). With dim: (values, indices), like PyTorch."""
        return _max_min("min", self, dim, keepdim, axis, keepdims)

    def argmax(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Index of the largest element (flat index when dim is None)."""
        return _arg_reduce("argmax", np.argmax, self, dim, keepdim, axis, keepdims)

    def argmin(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Index of the smallest element (flat index when dim is None)."""
        return _arg_reduce("argmin", np.argmin, self, dim, keepdim, axis, keepdims)

    def var(self, dim=None, keepdim=False, *, correction=1, axis=None, keepdims=None):
        """Variance (Bessel-corrected by default, like PyTorch), built from mean/sub/mul/sum."""
        dim, keepdim = _dim_aliases(dim, axis, keepdim, keepdims)
        dims = _reduction_dims(dim, self.ndim)
        n = math.prod(self.shape[d] for d in dims)
        centred = self - self.mean(dims, keepdim=True)
        return (centred * centred).sum(dims, keepdim=keepdim) / max(n - correction, 0)

    def std(self, dim=None, keepdim=False, *, correction=1, axis=None, keepdims=None):
        """Standard deviation: sqrt of var()."""
        return self.var(dim, keepdim, correction=correction, axis=axis, keepdims=keepdims).sqrt()

    # matmul
    def matmul(self, other):
        """Matrix product with numpy semantics (1-D, 2-D, batched). See matmul()."""
        return matmul(self, other)

    def __matmul__(self, other):
        return matmul(self, other) if _is_operand(other) else NotImplemented

    def __rmatmul__(self, other):
        return matmul(other, self) if _is_operand(other) else NotImplemented

    # dtype shortcuts
    # (last in the class body on purpose: these names shadow the builtins float/bool there)
    def float(self):
        """Convert to float32."""
        return self.to(float32)

    def double(self):
        """Convert to float64."""
        return self.to(float64)

    def long(self):
        """Convert to int64."""
        return self.to(int64)

    def bool(self):
        """Convert to bool (nonzero -> True)."""
        return self.to(bool_)


# %% [markdown]
# Finally the class itself, made of those parts (Python's multiple inheritance: a method is
# looked up in each part in turn). Splitting a long class into parts like this is plain
# Python; the parts are private, and only `Tensor` is the public type.

# %%
#| export
class _TensorMoreOps:
    """Method forms PyTorch users reach for; each calls a function (section 16 or a later
    module), so every one still passes through `apply`."""

    def clip(self, min=None, max=None):
        """Alias of clamp, as in PyTorch."""
        return _clamp(self, min, max)

    def all(self, dim=None, keepdim=False):
        """True where every element (along `dim`) is non-zero; a bool tensor."""
        return _reduce("all", np.all, self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        """True where some element (along `dim`) is non-zero; a bool tensor."""
        return _reduce("any", np.any, self, dim, keepdim)

    # Activations live in module 02's package file; import it when called, so that this
    # file never depends on a later module.
    def relu(self):
        """max(self, 0), elementwise (module 02's relu)."""
        from tinytorch.nn.activations import relu
        return relu(self)

    def sigmoid(self):
        """1 / (1 + exp(-self)), elementwise (module 02's sigmoid)."""
        from tinytorch.nn.activations import sigmoid
        return sigmoid(self)

    def tanh(self):
        """Hyperbolic tangent, elementwise (module 02's tanh)."""
        from tinytorch.nn.activations import tanh
        return tanh(self)

    def tril(self, diagonal=0):
        return tril(self, diagonal)

    def triu(self, diagonal=0):
        return triu(self, diagonal)

    def maximum(self, other):
        return maximum(self, other)

    def minimum(self, other):
        return minimum(self, other)

    def flip(self, *dims):
        return flip(self, dims)

    def roll(self, shifts, dims=None):
        return roll(self, shifts, dims)

    def cumsum(self, dim):
        return cumsum(self, dim)

    def sort(self, dim=-1, descending=False):
        return sort(self, dim, descending)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        return topk(self, k, dim, largest, sorted)


# %% [markdown]
# The class joins the groups above. The last group, `_TensorExtras`, is not yours to write: it
# holds PyTorch's other spellings of what these ops already do (`eq`, `split`, `view_as`,
# `new_zeros`, ...), written once over your methods, so that PyTorch code finds the names it
# uses.

# %%
#| export
from tinytorch._tensor_extras import _TensorExtras


class Tensor(_TensorStorage, _TensorInfo, _TensorAutograd, _TensorPython, _TensorViews,
             _TensorOperators, _TensorMath, _TensorReductions, _TensorMoreOps, _TensorExtras):
    """An n-dimensional array: a flat numpy storage seen through shape, strides and offset.

    Why: separating *layout* (shape/strides/offset) from *memory* (storage) is what makes
    views (transpose, slicing, broadcasting) free, exactly as in PyTorch.
    """

    # numpy must not try to handle `ndarray + Tensor` itself: with this, it returns
    # NotImplemented and Python calls our reflected operator (Tensor.__radd__ ...).
    __array_ufunc__ = None


# %% nbgrader={"grade": true, "grade_id": "test-tensor-storage", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
assert_equal((_x.shape, _x._strides, _x._offset), ((2, 3), (3, 1), 0), "Tensor 2x3: (shape, strides, offset)")
assert_equal(_x._storage.shape, (6,), "the storage is flat (1-D) and holds all 6 elements")
check(_x._storage.flags["C_CONTIGUOUS"], "the storage is one C-contiguous block")
assert_equal(_x.numpy(), np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32), "x.numpy() reads the elements back")
_arr = np.arange(6, dtype=np.int64).reshape(3, 2)
_t = Tensor._from_array(_arr)
check(np.shares_memory(_t._storage, _arr), "_init_storage shares the array's memory (no copy)")
assert_equal((_t.shape, _t._strides), ((3, 2), (2, 1)), "a 3x2 result: (shape, strides)")
check(all(type(n) is int for n in _t.shape + _t._strides), "shape and strides hold Python ints",
      got=[type(n).__name__ for n in _t.shape + _t._strides])
assert_equal(Tensor(np.zeros((4, 1, 3)))._strides, (3, 3, 1), "strides of a (4, 1, 3) tensor")
assert_equal(Tensor(np.zeros((2, 0, 3)))._strides, (3, 3, 1), "strides of an empty (2, 0, 3) tensor")
_s = Tensor(3.5)
assert_equal((_s.shape, _s._strides, _s._offset, _s.item()), ((), (), 0, 3.5), "a 0-d tensor")
assert_equal((Tensor([1, 2]).dtype, Tensor([True]).dtype, Tensor(np.zeros(2)).dtype), (int64, bool_, float64),
             "dtypes of int, bool and numpy float64 data (provided rules)")
_src = np.arange(4.0)
_t = Tensor(_src)
_src[0] = 100.0
assert_equal(_t.numpy()[0], 0.0, "a tensor copies the data it is given")
print(_x)
print("✓ Tensor storage and layout:", (_x.shape, _x._strides, _x._offset))

# %% [markdown]
# ## 5. The one dispatch point: `apply`
#
# Every operation in tinytorch — `a + b`, `x.transpose(0, 1)`, `x.sum(1)`, `a @ b` — ends in
# one function:
#
# ```python
# apply(op, forward, *inputs, **attrs)
# ```
#
# - `op` is a stable name such as `"add"` or `"transpose"`;
# - `forward(*inputs, **attrs)` computes the result. It returns either a **numpy array**
#   (a *compute* op: the result gets fresh storage) or a **Tensor** (a *view* op: your
#   stride code built it with `_view`, sharing the input's storage);
# - `inputs` are the Tensors the result depends on (Python numbers are turned into 0-d
#   tensors before they get here), and `attrs` are the op's parameters.
#
# Why one function? Because of what module 06 needs. Backpropagation must know, for every
# tensor, *which op made it from which inputs with which parameters*. If every op passes
# through `apply`, recording that is one `if` in one place: when a gradient could ever flow
# back through the op, `apply` marks the output and attaches a `Node` to it as `grad_fn`.
# Module 01 records these nodes but never uses them. Module 06 will supply a backward rule
# per `op` name and an engine that walks the `grad_fn` links — without changing (or
# monkey-patching) anything in this file. So `attrs` must hold everything a backward rule
# needs: the `dims` of a permute, the `shape` of a reshape, the `dim`/`keepdim` of a
# reduction, the normalised `index` of an indexing op.
#
# One more rule lives here: a result that would alias an input's memory although the op
# claimed to compute (a forward returned a numpy view) is copied, so compute ops never
# share storage.
#
# `set_grad_enabled(False)` switches recording off globally; module 06 builds the
# `no_grad()` context manager on it. This is PyTorch's design too (see section 18).
#
# The op names and attributes recorded in this module:
#
# | op | inputs | attrs |
# |---|---|---|
# | `add sub mul div pow` | a, b | — |
# | `neg abs exp log sqrt` | x | — |
# | `clamp` | x | `min`, `max` |
# | `where` | a, b | `cond` (numpy bool array) — also used by `masked_fill` |
# | `transpose` | x | `dim0`, `dim1` (non-negative) |
# | `permute` | x | `dims` (non-negative tuple) — also `T` |
# | `view`, `reshape` | x | `shape` (resolved, no -1) — `flatten` records `reshape` |
# | `squeeze` | x | `dims` (the dims removed) |
# | `unsqueeze` | x | `dim` |
# | `expand` | x | `shape` — also `broadcast_to`, `expand_as` |
# | `as_strided` | x | `size`, `stride`, `storage_offset` |
# | `contiguous`, `clone` | x | — |
# | `getitem` | x | `index` (usable as `x.numpy()[index]`) |
# | `sum mean amax amin` | x | `dim` (tuple), `keepdim` |
# | `max min` (with dim) | x | `dim` (int), `keepdim`, `indices` (kept-dim numpy array) |
# | `matmul` | a, b | — |
# | `cat` | tensors... | `dim`, `sizes` |
# | `stack` | tensors... | `dim` |
# | `to` | x | `dtype` |
#
# Your part is the recording rule, `_needs_node(out, inputs)`: when is a node worth
# keeping? `apply` (provided) calls it once per operation.
#
# <details><summary>Hint 1</summary>
#
# A node is only useful if a gradient could ever flow through it. Which three things can
# each make that impossible: the global switch, the result's dtype, or the inputs?
# </details>
#
# <details><summary>The approach</summary>
#
# A node is worth recording only when some gradient could ever flow through it.
# Ask, for each of the three conditions, what a node would cost and what backward could
# do with it if that condition failed; then decide whether one input that requires grad
# is enough, or all of them must.
# </details>

# %% nbgrader={"grade": false, "grade_id": "dispatch", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
_grad_enabled = True
_DEVICES_IN_USE = set()  # device types that some tensor was ever moved to ("cuda"; module 17)
_KERNELS = {}  # (op or backward-rule name, device type) -> kernel; filled by backends
LAYOUT_ONLY = "layout only"  # a registry entry: the op only computes a layout, run it as is
_DISPATCH_MODES = []  # the active DispatchModes (see DispatchMode below), the innermost last


def is_grad_enabled():
    """Whether apply() currently records graph nodes."""
    return _grad_enabled


class set_grad_enabled:
    """Switch graph recording on or off globally (module 06 builds no_grad() on this).

    As in PyTorch, the call switches at once, and `with set_grad_enabled(False):` also
    restores the mode that was on before when the block ends."""

    def __init__(self, mode):
        global _grad_enabled
        self._prev, _grad_enabled = _grad_enabled, bool(mode)

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        global _grad_enabled
        _grad_enabled = self._prev
        return False


class Node:
    """One recorded operation: which op, on which inputs, with which attrs, giving which output.

    Why: these nodes, linked through each tensor's grad_fn, ARE the computation graph that
    module 06 walks backwards.
    """

    def __init__(self, op, inputs, attrs, output):
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = dict(attrs)
        self.output = output

    def name(self):
        """PyTorch-style name of the backward function, e.g. "add" -> "AddBackward"."""
        return "".join(part.title() for part in self.op.split("_")) + "Backward"

    def __repr__(self):
        return f"<{self.name()}>"


def _needs_node(out, inputs):
    """Whether `apply` records a Node for the result `out` of an op on `inputs`.

    Contract: `out` a Tensor, `inputs` a tuple of Tensors. Returns a bool: True exactly when
    a backward pass could ever send a gradient through this op, as PyTorch decides it. The
    check and the tests vary, one at a time, each thing that can decide it.
    """
    # Idea: record only where a gradient could flow.
    ### BEGIN SOLUTION
    if not _grad_enabled or out.dtype.kind != "f":
        return False
    for x in inputs:
        if x.requires_grad:
            return True
    return False
    ### END SOLUTION


def apply(op, forward, *inputs, **attrs):
    """Run `forward(*inputs, **attrs)`, wrap the result, and record a Node when needed.

    Why: the one place every op passes through, so autograd can be added later (module 06)
    without touching any op.
    """
    where = _CPU
    if _DEVICES_IN_USE:  # a tensor was moved off the CPU once: find this op's device
        where = _common_device(inputs)
        if op == "to_device":  # a move: its output lives on the target device
            where = attrs["device"]
        elif where is not _CPU:
            forward = _device_kernel(op, where, forward)
    out = forward(*inputs, **attrs) if not _DISPATCH_MODES else dispatch(op, forward, inputs, attrs)
    # (Plain loops below, not any(...): this runs for every op, and a generator costs more
    # than the check itself.)
    if isinstance(out, Tensor):  # a view op: shares storage with an input
        for x in inputs:
            if out is x:
                out = out._view(out.shape, out._strides, out._offset)
                break
    else:  # a compute op: fresh storage
        arr = out if type(out) is np.ndarray else np.asarray(out)
        owner = arr.base is None  # a fresh result owns its memory: it can only be an input's
        for x in inputs:          # memory if it IS that input's storage or the storage's owner
            storage = x._storage
            if (arr is storage or arr is storage.base) if owner else np.may_share_memory(arr, storage):
                arr = arr.copy()
                break
        out = Tensor._from_array(arr)
    if where is not _CPU:
        out._device = where
    if _needs_node(out, inputs):
        out._requires_grad = True
        out.grad_fn = Node(op, inputs, attrs, out.numpy())
    return out


# %% [markdown]
# A look at the dispatcher with a made-up op (`"double"` is not a real tinytorch op; any
# name works, module 06 just would not know its backward rule), then the check of your rule:

# %% nbgrader={"grade": true, "grade_id": "test-dispatch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
_c = Tensor([10.0, 20.0, 30.0])  # a constant: requires no grad
_y = apply("double", lambda x: x.numpy() * 2, _w)
print(_y, "| grad_fn.op =", _y.grad_fn.op, "| inputs are _w:", _y.grad_fn.inputs[0] is _w)
assert_equal((_y.requires_grad, _y.grad_fn.op, _y.grad_fn.inputs[0] is _w), (True, "double", True),
             "apply on an input that requires grad: (requires_grad, op, inputs[0] is w)")
_z = apply("mul", lambda a, b: a.numpy() * b.numpy(), _w, _c)
check(_z.grad_fn is not None, "one input requiring grad is enough to record a node", got=_z.grad_fn)
assert_equal(_needs_node(Tensor([1.0]), (_c,)), False, "no input requires grad: no node")
assert_equal(_needs_node(Tensor([True]), (_w,)), False, "a bool result has no gradient: no node")
assert_equal(_needs_node(Tensor([1]), (_w,)), False, "an int64 result has no gradient: no node")
assert_equal(_needs_node(Tensor([1.0], dtype=float64), (_c, _w)), True, "a float64 result from w")
set_grad_enabled(False)
try:  # whatever happens, grad mode is switched back on for the cells below
    assert_equal(_needs_node(Tensor([1.0]), (_w,)), False, "grad mode off: no node")
    check(apply("double", lambda x: x.numpy() * 2, _w).grad_fn is None, "grad mode off: apply records nothing")
finally:
    set_grad_enabled(True)
print("✓ dispatch: w * constant records", _z.grad_fn)

# %% [markdown]
# **An extension point.** Because every op passes through `apply`, code that wants to see
# every op needs only one place to plug in. A `DispatchMode` is that place: while one is
# active (`with mode:`), `apply` hands it each op's name and forward function instead of
# calling the function directly. Module 14's profiler times every op this way; with no mode
# active, `apply` pays a single check of an empty list. PyTorch has the same idea under the
# name `TorchDispatchMode`.
#
# **Devices.** A tensor also knows *where* it lives: `t.device` is `device("cpu")` until
# `t.to("cuda")` (or `t.cuda()`) moves it, and `t.cpu()` moves it back. A device is not a
# mode you switch on with `with`: it belongs to the data. So `apply` asks a second
# question, but only once some tensor has left the CPU (a set that stays empty otherwise:
# one check): which device do the inputs share? Tensors on two devices are an error, as in
# PyTorch ("Expected all tensors to be on the same device ..."), except a 0-d CPU tensor
# such as the number in `x * 2`. For a device other than the CPU, `apply` looks the op up
# in a **kernel registry** keyed by `(op, device type)`, which a backend fills with
# `register_kernel(op, "cuda", fn)`; `fn` takes the same arguments as the op's forward.
# Module 06's `call_rule` does the same for backward rules, keyed by the node's name
# ("MulBackward"). Module 17 writes the CUDA kernels and registers them; this is PyTorch's
# dispatcher in miniature, where each op has one kernel per backend.

# %%
#| export
class DispatchMode:
    """Code that sees every op on its way through the dispatcher: forward ops in `apply` and,
    once module 06 exists, backward rules in its `call_rule`.

    Why: the documented extension point of the dispatch path. A profiler (module 14) or a
    device backend (module 17) plugs in here, so no earlier module's class or function is
    ever patched. Like PyTorch's TorchDispatchMode: subclass it, override `dispatch`, and
    switch it on with `with mode:`. Modes nest; the innermost sees an op first, and the `fn`
    it is given runs the op through the outer ones. While a mode's `dispatch` runs, that
    mode and the ones inside it are off, so ops it runs itself are not sent back to it.
    """

    def dispatch(self, op, fn, args, kwargs):
        """Handle one op: `op` is its name ("mul"; a backward rule is named like its node,
        "MulBackward"), `fn(*args, **kwargs)` runs it. Return what `fn` returns, or a
        replacement of the same kind."""
        return fn(*args, **kwargs)

    def __enter__(self):
        _DISPATCH_MODES.append(self)
        return self

    def __exit__(self, *exc_info):
        for i in range(len(_DISPATCH_MODES) - 1, -1, -1):
            if _DISPATCH_MODES[i] is self:
                del _DISPATCH_MODES[i]
                break
        return False


def register_kernel(op, device_type, fn):
    """Register `fn` as the kernel of the op `op` (or of a backward rule, "MulBackward") on
    `device_type` ("cuda"). `fn` takes what the op's forward takes (a rule: node, grad) and
    returns the same kind of result. `fn=LAYOUT_ONLY`: the op computes a new layout over the
    same memory (a view), so its own forward runs unchanged."""
    _KERNELS[(op, device_type)] = fn
    return fn


def _common_device(inputs):
    """The device all `inputs` live on; a 0-d CPU tensor may join any device (a number)."""
    found = _CPU
    for x in inputs:
        if x._device is not _CPU:
            if found is not _CPU and x._device != found:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found "
                                   f"at least two devices, {found} and {x._device}!")
            found = x._device
    if found is not _CPU:
        for x in inputs:
            if x._device is _CPU and x.ndim > 0:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found "
                                   f"at least two devices, {found} and cpu! (move them with "
                                   f".to({str(found)!r}) or .cpu())")
    return found


def _no_kernel(name, where):
    ops = sorted(op for op, kind in _KERNELS if kind == where.type)
    return NotImplementedError(
        f"{name!r} has no kernel for device {where}: the {where.type} backend runs "
        f"{', '.join(ops) or 'nothing yet'}. Move the tensors with .cpu() for this op.")


def _device_kernel(op, where, forward):
    """The function that runs `op` on `where` (the op's own forward for a layout-only op)."""
    kernel = _KERNELS.get((op, where.type))
    if kernel is None:
        raise _no_kernel(op, where)
    return forward if kernel is LAYOUT_ONLY else kernel


def _device_rule(node, rule):
    """The backward rule of `node` for the device its inputs live on (module 06's call_rule)."""
    where = _CPU
    for x in node.inputs:
        if x._device is not _CPU:
            where = x._device
    if where is _CPU:
        return rule
    kernel = _KERNELS.get((node.name(), where.type))
    if kernel is None:
        raise _no_kernel(node.name(), where)
    return rule if kernel is LAYOUT_ONLY else kernel


def _to_device(t, target):
    """`t` on the device `target` (t itself when it is there): a recorded op, "to_device",
    so gradients flow back across the move. The backend checks that the device exists."""
    target = device(target)
    target = _CPU if target.type == "cpu" else target
    if target == t._device:
        return t
    if target.type == "cuda":
        try:
            import tinytorch.cuda as backend
        except ImportError as exc:
            if exc.name not in (None, "tinytorch.cuda"):  # a broken import inside the backend: show it
                raise
            raise RuntimeError("device 'cuda' needs tinytorch's GPU backend, which you build "
                               "in module 17 (17_acceleration)") from exc
        backend._lazy_init()  # a clear error when there is no GPU and no simulator
        _DEVICES_IN_USE.add(target.type)
    copy = _KERNELS.get(("to_device", target.type if target is not _CPU else t._device.type))
    forward = copy if callable(copy) else (lambda x, device: np.array(x.numpy(), copy=True))
    return apply("to_device", forward, t, device=target)


def dispatch(op, fn, args, kwargs):
    """Run `fn(*args, **kwargs)` for the op named `op` through the active modes.

    Why: `apply` (and module 06's `call_rule`) call this only when a mode is active, so with
    none the dispatch path pays one list check and nothing else.
    """
    return _through_modes(len(_DISPATCH_MODES), op, fn, tuple(args), dict(kwargs))


def _through_modes(depth, op, fn, args, kwargs):
    if depth == 0:
        return fn(*args, **kwargs)
    mode = _DISPATCH_MODES[depth - 1]
    inside = _DISPATCH_MODES[depth - 1:]
    del _DISPATCH_MODES[depth - 1:]  # ops the mode runs itself go only to the outer modes
    try:
        return mode.dispatch(op, lambda *a, **k: _through_modes(depth - 1, op, fn, a, k), args, kwargs)
    finally:
        _DISPATCH_MODES[depth - 1:] = inside

# %% [markdown]
# ## 6. Views: transpose and permute
#
# A view op computes a new `(shape, strides, offset)` over the *same* storage and calls
# `t._view(shape, strides, offset)`. Nothing is copied, so a view costs the same for a
# 2×2 matrix and a 10,000×10,000 one, and writing into a view writes into the original.
#
# - **transpose(dim0, dim1)**: element `[..., i, ..., j, ...]` of the result is element
#   `[..., j, ..., i, ...]` of the input. Which fields of the layout must change, and how?
#   Test your answer on the picture in section 1: the transpose of the `(2, 3)` tensor with
#   strides `(3, 1)` must find `X[i, j]` at index `[j, i]`.
# - **permute(*dims)** generalises this: output dimension `k` is input dimension
#   `dims[k]`.
#
# And the offset: does it change? Which element is `[0, 0, ...]` of the result?
#
# The provided wrappers check and normalise the arguments (negative dims count from the
# end, as in Python lists), then call `apply` with your forward function. Normalising
# first matters: the recorded `attrs` are then unambiguous for module 06.

# %%
#| export
def _wrap_dim(dim, ndim):
    """Turn a possibly negative dim into 0..ndim-1, with PyTorch's error when out of range."""
    if type(dim) is int and -ndim <= dim < ndim:  # the common case, checked cheaply
        return dim + ndim if dim < 0 else dim
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, (bool, np.bool_)):
        raise TypeError(f"a dimension must be an int, got {type(dim).__name__}")
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], "
                         f"but got {dim})")
    return int(dim) % max(ndim, 1)


def _shape_arg(args):
    """Accept both f(2, 3) and f((2, 3)) / f([2, 3]); return a tuple of ints."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for a in args:
        if type(a) is not int:
            break
    else:
        return tuple(args)  # already ints (the common case)
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = a.item()
        if not isinstance(a, (int, np.integer)) or isinstance(a, (bool, np.bool_)):
            raise TypeError(f"sizes and dims must be ints, got {a!r}")
        out.append(int(a))
    return tuple(out)


# %% [markdown]
# You write the two forwards; each receives the tensor and already normalised dims.
#
# <details><summary>Hint 1 (transpose)</summary>
#
# Element `[.., i, .., j, ..]` of the result is element `[.., j, .., i, ..]` of the input.
# In the address formula, which two terms trade places?
# </details>
#
# <details><summary>The approach (transpose)</summary>
#
# A view is a new reading of the same memory. After the swap, stepping along `dim0` must
# move through memory exactly as stepping along `dim1` did before, and where element
# `[0, 0, ...]` lives has not changed.
# </details>
#
# <details><summary>Hint 1 (permute)</summary>
#
# Output dimension `k` *is* input dimension `dims[k]`: it has that dimension's size and
# steps through memory exactly as that dimension did.
# </details>
#
# <details><summary>The approach (permute)</summary>
#
# The same reasoning as transpose, for any reordering: work out which input dimension
# each output dimension *is*, and what it brings with it.
# </details>

# %% nbgrader={"grade": false, "grade_id": "transpose-permute", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def transpose(input, dim0, dim1):
    """Swap dimensions dim0 and dim1: a zero-copy view (PyTorch's torch.transpose)."""
    d0, d1 = _wrap_dim(dim0, input.ndim), _wrap_dim(dim1, input.ndim)
    if input.ndim == 0:
        return apply("transpose", lambda x, dim0, dim1: x._view((), (), x._offset), input, dim0=0, dim1=0)
    return apply("transpose", _transpose_view, input, dim0=d0, dim1=d1)


def _transpose_view(t, dim0, dim1):
    """Forward of transpose.

    Contract: `t` a Tensor, `dim0`/`dim1` valid non-negative dims (may be equal). Returns
    `t._view(...)` over the same storage whose element [..., i, ..., j, ...] is t's element
    [..., j, ..., i, ...] (positions dim0 and dim1). Copies nothing.
    """
    # Idea: write the address formula for out[..., i, ..., j, ...] and for t[..., j, ..., i, ...]
    # and make the two equal for every index.
    ### BEGIN SOLUTION
    shape, strides = list(t.shape), list(t._strides)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
    return t._view(shape, strides, t._offset)
    ### END SOLUTION


def permute(input, *dims):
    """Reorder dimensions: output dim k is input dim dims[k] (a zero-copy view)."""
    dims = tuple(_wrap_dim(d, input.ndim) for d in _shape_arg(dims))
    if sorted(dims) != list(range(input.ndim)):
        raise ShapeError(f"permute: dims {dims} must be a permutation of 0..{input.ndim - 1} "
                         f"for a tensor of shape {input.shape}")
    return apply("permute", _permute_view, input, dims=dims)


def _permute_view(t, dims):
    """Forward of permute.

    Contract: `dims` is a permutation of 0..t.ndim-1 (checked by the wrapper). Returns a view
    over the same storage and offset in which output dimension k is input dimension dims[k].
    """
    # Idea: as for transpose: equate the address of out[index] with that of the t element it names.
    ### BEGIN SOLUTION
    shape = tuple(t.shape[d] for d in dims)
    strides = tuple(t._strides[d] for d in dims)
    return t._view(shape, strides, t._offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-transpose-permute", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = np.arange(6.0).reshape(2, 3)
_x = Tensor(_a)
_xt = _x.transpose(0, 1)
assert_equal((_xt.shape, _xt.stride(), _xt.storage_offset()), (_a.T.shape, tuple(s // _a.itemsize for s in _a.T.strides), 0),
             "x.transpose(0, 1) of a 2x3 against numpy's a.T (strides / itemsize)")
check(_xt._storage is _x._storage, "a transpose shares the storage (a view)")
assert_equal(_xt.numpy(), _a.T, "x.transpose(0, 1) values")
_xt.numpy()[2, 1] = 50.0  # writing through the view ...
assert_equal(_x.numpy()[1, 2], 50.0, "a write through the view shows in the original")
_b = np.arange(24).reshape(2, 3, 4)
_y = Tensor(_b)
_p = _y.permute(2, 0, 1)
assert_equal((_p.shape, _p.stride()), (_b.transpose(2, 0, 1).shape, tuple(s // _b.itemsize for s in _b.transpose(2, 0, 1).strides)),
             "y.permute(2, 0, 1) of a 2x3x4 against numpy's transpose(2, 0, 1) (strides / itemsize)")
assert_equal(_p.numpy(), _b.transpose(2, 0, 1), "y.permute(2, 0, 1) values")
assert_equal((_y.T.shape, _y.T.stride()), ((4, 3, 2), (1, 4, 12)), "y.T (all dims reversed)")
assert_equal(_y.transpose(-1, -2).stride(), (12, 1, 4), "y.transpose(-1, -2) strides")
# On a view that is already offset and stepped (not a fresh tensor): the offset must stay.
_z = Tensor(np.arange(60)).as_strided((4, 4), (12, 3), 14)  # numpy: arange(60).reshape(5, 12)[1:, 2::3]
assert_equal((_z.T.shape, _z.T.stride(), _z.T.storage_offset()), ((4, 4), (3, 12), 14), "T of an offset, stepped view")
assert_equal(_z.T.numpy(), np.arange(60).reshape(5, 12)[1:, 2::3].T, "T of an offset, stepped view: values")
assert_equal(_z.permute(1, 0).stride(), (3, 12), "permute(1, 0) of the same view")
_zt = _z.transpose(0, 1)  # the method itself (.T goes through permute)
assert_equal((_zt.stride(), _zt.storage_offset()), ((3, 12), 14), "transpose(0, 1) of the offset, stepped view")
assert_equal(_zt.numpy(), np.arange(60).reshape(5, 12)[1:, 2::3].T, "transpose(0, 1) of the same view: values")
print("✓ transpose, permute, T, mT: y.permute(2, 0, 1).stride() =", _p.stride())

# %% [markdown]
# ## 7. Contiguity, `view` and `reshape`
#
# After a transpose the elements are no longer in row-major order in memory. A tensor is
# **contiguous** when reading its elements in row-major order walks its memory one element
# at a time, with no gap and no jump back. A fresh tensor's strides (section 2) are such a
# layout; are they the only one? Decide for each of these, before you write
# `_is_contiguous(shape, strides)`: shape `(2, 1, 3)` with strides `(3, 7, 1)`; `(1, 3)`
# with `(99, 1)`; `(2, 2)` with `(4, 1)`; `(0, 3)` with `(7, 7)`; `()` with `()`. PyTorch
# and numpy agree on every one (numpy's `flags.c_contiguous` of an `as_strided` view
# answers, and the check asks it).
#
# **Reshaping** reinterprets the elements in row-major order with a new shape. If the
# tensor is contiguous, the storage already *is* that order, so a reshape is just new
# contiguous strides at the same offset: a view. Otherwise the elements have to be gathered
# into a new buffer first: a copy.
#
# - `view(*shape)` never copies: your forward raises if the tensor is not contiguous.
#   PyTorch's `view` also accepts some non-contiguous layouts without copying; which ones
#   is the design question at the end of this section (`_view_strides`).
# - `reshape(*shape)` returns a view when it can and a copy otherwise — convenient, but you
#   cannot rely on it sharing memory.
# - One size may be `-1`: it is inferred from the number of elements (`x.view(-1)`,
#   `x.reshape(batch, -1)`).
#
# You write four small functions: `_is_contiguous(shape, strides)`, `_infer_shape(shape,
# numel)` (resolve the `-1` and check the element count), and the two forwards.
#
# <details><summary>Hint 1 (_is_contiguous)</summary>
#
# Compare against the strides that a fresh tensor of this shape would have, but only where
# a stride is ever used. When is a stride never used? When are no strides used at all?
# </details>
#
# <details><summary>The approach (_is_contiguous)</summary>
#
# A layout is row-major when each stride is what section 2 would compute for that shape.
# Only strides that are ever stepped along matter: which dimensions are never stepped
# along, and which tensors have no element to step to at all?
# </details>
#
# <details><summary>Hint 1 (_infer_shape)</summary>
#
# The known sizes multiply to some number; the `-1` must make up the rest of `numel`.
# When can it not?
# </details>
#
# <details><summary>The approach (_infer_shape)</summary>
#
# The product of the sizes must be `numel`, so one unknown size can be solved for, and
# the errors are the ways that equation has no solution or is not a question: too many
# unknowns, sizes that cannot be sizes, a product that does not divide (think of
# `numel == 0` too). Every error names the shape asked for and `numel`.
# </details>

# %% nbgrader={"grade": false, "grade_id": "view-reshape", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _is_contiguous(shape, strides):
    """Whether the layout (shape, strides) is row-major without gaps.

    Contract: returns a bool. Size-1 dimensions are ignored (their stride is never used);
    a layout with no elements (some size 0) and a 0-d layout are contiguous.
    """
    # Idea: compare with the row-major strides, but only where a stride is ever stepped along.
    ### BEGIN SOLUTION
    if any(size == 0 for size in shape):
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True
    ### END SOLUTION


def _infer_shape(shape, numel):
    """Resolve at most one -1 in `shape` so that the sizes multiply to `numel`.

    Contract: returns a tuple of non-negative ints whose product is `numel`. Raises
    ShapeError when there is more than one -1, a size below -1, or no way to reach `numel`;
    the message names the requested shape and the input size `numel`.
    """
    # Idea: the -1 is whatever is left of numel once the known sizes are divided out.
    ### BEGIN SOLUTION
    shape = tuple(shape)
    if sum(1 for s in shape if s == -1) > 1:
        raise ShapeError(f"shape {shape} is invalid for input of size {numel}: only one dimension can be inferred (-1)")
    if any(s < -1 for s in shape):
        raise ShapeError(f"shape {shape} is invalid for input of size {numel}: a negative size")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known != 0:
            raise ShapeError(f"shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ShapeError(f"shape {shape} is invalid for input of size {numel}")
    return shape
    ### END SOLUTION


# %% [markdown]
# <details><summary>Hint (the forwards)</summary>
#
# Section 2 gives the strides of a row-major shape. When is a reinterpretation of the same
# storage right, and what must reshape do when it is not?
# </details>
#
# <details><summary>The approach (the forwards)</summary>
#
# Both rest on one question: when is the same storage, read row-major with new
# contiguous strides, already the right answer? When it is, both return a view. When it is
# not, `view` must refuse with a message that says what to do instead, and `reshape` must
# produce the elements in row-major order somewhere new.
# </details>

# %% nbgrader={"grade": false, "grade_id": "view-forwards", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _view_forward(t, shape):
    """Forward of view: never a copy.

    Contract: `shape` is resolved (no -1, right numel). Returns a tensor of `shape` sharing
    t's storage whose elements, read in row-major order, are t's elements in row-major
    order. Raises RuntimeError when t is not contiguous; the message says so and points to
    .contiguous() or .reshape().
    """
    # Idea: for a contiguous t, where in storage is its k-th element (row-major)? Which
    # strides put the k-th element of the new shape at the same place?
    ### BEGIN SOLUTION
    if not t.is_contiguous():
        raise RuntimeError(
            f"view(): the tensor (shape {t.shape}, strides {t._strides}) is not contiguous, so "
            f"its elements are not in row-major order in memory and no strides can describe "
            f"shape {tuple(shape)}. Call .contiguous() first, or use .reshape() (which copies).")
    return t._view(shape, contiguous_strides(shape), t._offset)
    ### END SOLUTION


def _reshape_forward(t, shape):
    """Forward of reshape: a view when t is contiguous, else a copy.

    Contract: `shape` is resolved. Returns a Tensor view (same storage) when t is contiguous,
    otherwise a fresh numpy array holding t's elements in row-major order with `shape`.
    """
    # Idea: view when the memory order allows it; otherwise make memory that does.
    ### BEGIN SOLUTION
    if t.is_contiguous():
        return t._view(shape, contiguous_strides(shape), t._offset)
    return np.ascontiguousarray(t.numpy()).reshape(shape)
    ### END SOLUTION


def _view_op(input, *shape):
    """Tensor.view: resolve the shape, then dispatch. A non-contiguous tensor may still be
    viewed where PyTorch allows it (_view_strides): nanoGPT's `q.view(B, T, H, C // H)`
    of a slice of the last dimension."""
    shape = _infer_shape(_shape_arg(shape), input.numel())
    if input.numel() > 0 and input.ndim > 0 and not _is_contiguous(input.shape, input._strides):
        strides = _view_strides(input.shape, input._strides, shape)
        if strides is not None:
            return apply("view", lambda t, shape: t._view(shape, strides, t._offset), input, shape=shape)
    return apply("view", _view_forward, input, shape=shape)


def reshape(input, *shape):
    """The same elements in row-major order with a new shape (view if possible, else copy)."""
    shape = _infer_shape(_shape_arg(shape), input.numel())
    return apply("reshape", _reshape_forward, input, shape=shape)


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one (a reshape; a 0-d tensor becomes shape (1,))."""
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    if s > e:
        raise ShapeError(f"flatten: start_dim ({start_dim}) must not come after end_dim ({end_dim})")
    shape = input.shape[:s] + (math.prod(input.shape[s:e + 1]),) + input.shape[e + 1:]
    return reshape(input, shape)


# %% nbgrader={"grade": true, "grade_id": "test-view-reshape", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_memory = np.zeros(1000)
for _shape, _strides in [((2, 3), (3, 1)), ((3, 2), (1, 3)), ((3, 1), (1, 1)), ((1, 3), (99, 1)), ((2, 2), (4, 1)),
                         ((2, 1, 3), (3, 7, 1)), ((0, 3), (7, 7)), ((), ()), ((2, 3, 1), (3, 1, 5)), ((2, 3), (1, 2))]:
    _numpy_says = np.lib.stride_tricks.as_strided(_memory, _shape, tuple(_memory.itemsize * s for s in _strides)).flags.c_contiguous
    assert_equal(_is_contiguous(_shape, _strides), bool(_numpy_says), f"_is_contiguous({_shape}, {_strides}) against numpy's c_contiguous")
assert_equal(_infer_shape((2, -1), 6), (2, 3), "_infer_shape((2, -1), 6)")
assert_equal(_infer_shape((6,), 6), (6,), "_infer_shape((6,), 6)")
for _bad in [((4, -1), 6), ((-1, -1), 6), ((5,), 6), ((-2, 3), 6), ((-2, -1), 6),
             ((0, -1), 0)]:  # no elements and a 0 beside the -1: every size would do, so none is inferred
    _e = assert_raises(ShapeError, _infer_shape, *_bad, match=str(_bad[1]), what=f"_infer_shape{_bad}")
    check(str(_bad[0]) in str(_e), f"_infer_shape{_bad}: the message names the shape asked for, {_bad[0]}", got=str(_e))
_x = Tensor(np.arange(12.0))
_v = _x.view(3, -1)
assert_equal((_v.shape, _v.stride()), ((3, 4), (4, 1)), "x.view(3, -1) of 12 elements")
check(_v._storage is _x._storage, "view shares the storage")
_off = _x.as_strided((2, 3), (3, 1), 6)  # a contiguous view that starts at offset 6
assert_equal((_off.view(6).storage_offset(), _off.view(6).tolist()), (6, [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]),
             "view of a contiguous view keeps its offset")
_xt = _x.view(3, 4).T
check(not _xt.is_contiguous(), "a transposed 3x4 is not contiguous")
assert_raises(RuntimeError, _view_forward, _xt, (12,), match=r"\.contiguous\(\)|\.reshape\(\)",
              what="_view_forward of a non-contiguous tensor")
_r = _xt.reshape(12)
assert_equal(_r.numpy(), np.arange(12.0).reshape(3, 4).T.reshape(12), "reshape of a non-contiguous tensor: values")
check(_r._storage is not _x._storage, "reshape of a non-contiguous tensor copies")
check(_x.reshape(2, 6)._storage is _x._storage, "reshape of a contiguous tensor is a view")
assert_equal((_off.reshape(3, 2).storage_offset(), _off.reshape(3, 2).tolist()), (6, [[6.0, 7.0], [8.0, 9.0], [10.0, 11.0]]),
             "reshape of a contiguous view keeps its offset")
_c = _xt.contiguous()
assert_equal((_c.is_contiguous(), _c.stride()), (True, (3, 1)), "contiguous() of the transposed tensor")
check(_x.contiguous() is _x, "contiguous() of a contiguous tensor is the tensor itself")
assert_equal(Tensor(np.zeros((2, 3, 4))).flatten(1).shape, (2, 12), "flatten(1)")
print("✓ contiguity, view, reshape, flatten: x.view(3, -1).stride() =", _v.stride())

# %% [markdown]
# ### Viewing a non-contiguous tensor: when do strides exist?
#
# Your `_view_forward` refuses every non-contiguous tensor, and for a transpose that is
# right: `x.T.view(-1)` would need the transposed elements in row-major order, and no
# strides put them there. But take `x = arange(32).view(4, 8)` and its slice `s = x[:, :6]`,
# shape `(4, 6)`, strides `(8, 1)`, not contiguous (a gap of 2 after every row). Viewed as
# `(4, 2, 3)`, each row's 6 evenly spaced elements become 2 × 3, and the strides `(8, 3, 1)`
# address them exactly: no copy needed. nanoGPT's attention does exactly this,
# `q.view(B, T, H, C // H)` on a slice of the last dimension, and PyTorch's `view` allows
# it. PyTorch's rule: `view` works whenever strides for the new shape exist, and refuses
# only when none do.
#
# Write `_view_strides(shape, strides, new_shape)`: those strides, or `None`. The provided
# `_view_op` (above) asks it for every non-contiguous tensor before your `_view_forward`
# runs. The design is yours, from the address formula: element $(i_0, \dots, i_{n-1})$ of the
# old layout lives at offset $+ \sum_d i_d s_d$, and the new strides must give each element,
# in row-major order, the same address. It must not enumerate the elements (a layout may
# have $10^{12}$ of them). Work these by hand first; the check starts with them:
#
# | layout (shape, strides) | new shape | strides? |
# |---|---|---|
# | `(4, 6), (8, 1)` (the slice) | `(4, 2, 3)` | `(8, 3, 1)` |
# | `(4, 6), (8, 1)` | `(24,)` | none |
# | `(4, 6), (8, 1)` | `(8, 3)` | ? |
# | `(3, 4), (1, 3)` (a transpose) | `(3, 2, 2)` | ? |
# | `(3, 4), (0, 1)` (an `expand`) | `(3, 2, 2)` | ? |
#
# <details><summary>Hint 1</summary>
#
# When could two neighbouring dimensions $d$ and $d+1$ be replaced by one of size
# $n_d \cdot n_{d+1}$ without moving any address? Write the condition on their sizes and
# strides, and try it on the table's layouts.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Apply Hint 1 repeatedly: the old dimensions fall into maximal runs that behave like one
# dimension each. What does the new shape have to do with those runs' sizes, and can one
# new dimension take its elements from two runs?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Inside one run the addresses are one arithmetic progression. New dimensions laid onto it
# from the right: what is the stride of each, given the run's innermost stride and the
# sizes of the new dimensions to its right? And a dimension of size 1, old or new: is it
# ever stepped along? (Any stride then visits the right addresses; the contract names the
# one PyTorch gives a new one.)
# </details>
#
# <details><summary>The approach</summary>
#
# Two steps. Group the old dimensions into the runs that memory keeps in step (which
# dimensions can never break a run?). Then lay the new dimensions onto the runs from the
# right, each run filled exactly: a new dimension's stride follows from its run's
# arithmetic progression, and one that would need elements from two runs means that no
# strides exist. Work the table's rows this way before you write the loop.
# </details>

# %% nbgrader={"grade": false, "grade_id": "view-strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _view_strides(shape, strides, new_shape):
    """Strides for view() of a layout that is not contiguous.

    Contract: `shape` and `strides` a layout with at least one element (strides may be 0 or
    any positive ints; not contiguous); `new_shape` resolved, with the same number of
    elements. Returns a tuple of len(new_shape) ints such that the layout (new_shape, those
    strides) at the same offset visits exactly the addresses of (shape, strides), element
    for element in row-major order; or None when no strides can. A new dimension of size 1
    is never stepped along, so any stride would do: give it PyTorch's, which the tests
    compare with, the stride of the new dimension to its right times that one's size (at
    the right end: strides[-1]). Work independent of the number of elements (a layout may
    have 10^12 of them): nothing is enumerated.
    """
    # Idea: which neighbouring dimensions could merge into one without moving an address?
    ### BEGIN SOLUTION
    new_strides = [0] * len(new_shape)
    k = len(new_shape) - 1  # the next new dimension to give a stride, from the right
    base = strides[-1] if strides else 1  # the stride of the current chunk's last dimension
    chunk = seen = 1  # elements in the current chunk, and in the new dimensions laid onto it
    for d in range(len(shape) - 1, -1, -1):
        chunk *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != chunk * base):  # the chunk ends here
            while k >= 0 and (seen < chunk or new_shape[k] == 1):
                new_strides[k] = seen * base
                seen *= new_shape[k]
                k -= 1
            if seen != chunk:
                return None
            if d > 0:
                base, chunk, seen = strides[d - 1], 1, 1
    return tuple(new_strides) if k < 0 else None
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-view-strides", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _addresses(shape, strides):
    """Every element's address (offset 0) in row-major order: the brute force the check may use."""
    index = np.indices(shape).reshape(len(shape), -1)
    return (np.array(strides, dtype=np.int64)[:, None] * index).sum(axis=0) if shape else np.zeros(1, np.int64)


def _strides_exist(shape, strides, new_shape):
    """Whether some strides show (shape, strides) as new_shape: its addresses, laid out in
    new_shape, must change by a constant along every dimension."""
    a = _addresses(shape, strides).reshape(new_shape)
    return all(np.all(np.diff(a, axis=k) == np.diff(a, axis=k).flat[0]) for k in range(a.ndim) if a.shape[k] > 1)


# The table's two answered rows, then its ? rows and a few more, judged by the brute force above.
assert_equal(_view_strides((4, 6), (8, 1), (4, 2, 3)), (8, 3, 1), "_view_strides((4, 6), (8, 1), (4, 2, 3)): the table's row")
check(_view_strides((4, 6), (8, 1), (24,)) is None, "_view_strides((4, 6), (8, 1), (24,)): the table's row, no strides exist",
      got=_view_strides((4, 6), (8, 1), (24,)), expected=None)
for _shape, _strides, _new in [((4, 6), (8, 1), (8, 3)), ((3, 4), (1, 3), (3, 2, 2)), ((3, 4), (0, 1), (3, 2, 2)),
                               ((3, 4), (1, 3), (12,)), ((3, 4), (0, 1), (12,)), ((2, 1, 3), (6, 99, 2), (6,))]:
    _got = _view_strides(_shape, _strides, _new)
    if not _strides_exist(_shape, _strides, _new):
        check(_got is None, f"_view_strides({_shape}, {_strides}, {_new}): no strides exist", got=_got, expected=None)
    else:
        check(_got is not None and np.array_equal(_addresses(_new, tuple(_got)), _addresses(_shape, _strides)),
              f"_view_strides({_shape}, {_strides}, {_new}): strides exist, and they must visit the addresses of "
              f"the old layout in row-major order", got=_got)
_ones = _view_strides((4, 6), (8, 1), (1, 4, 1, 6, 1))
check(_ones is not None and np.array_equal(_addresses((1, 4, 1, 6, 1), tuple(_ones)), _addresses((4, 6), (8, 1))),
      "size-1 dimensions may be added anywhere: (4, 6) with strides (8, 1) as (1, 4, 1, 6, 1)", got=_ones)
assert_equal(tuple(_ones), (32, 8, 6, 1, 1), "_view_strides((4, 6), (8, 1), (1, 4, 1, 6, 1)): each size-1 "
             "dimension's stride as PyTorch gives it (the contract: the stride to its right times that size; "
             "at the right end, strides[-1])")


def _random_new_shape(n, rng):
    """A shape with n elements: up to three factors of n, sometimes with size-1 dimensions between."""
    dims = []
    while n > 1 and len(dims) < 2:
        dims.append(int(rng.choice([k for k in range(1, n + 1) if n % k == 0])))
        n //= dims[-1]
    dims.append(n)
    if rng.random() < 0.3:
        dims.insert(int(rng.integers(0, len(dims) + 1)), 1)
    return tuple(dims)


_rng = np.random.default_rng(1)
for _ in range(300):  # layouts a program makes (slices, transposes, expands) and shapes of the same size
    _nd = int(_rng.integers(1, 4))
    _shape = tuple(int(v) for v in _rng.integers(1, 5, _nd))
    _strides = tuple(int(v) for v in _rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 12, 24], _nd))
    if _is_contiguous(_shape, _strides):
        continue
    _new = _random_new_shape(math.prod(_shape), _rng)
    _got = _view_strides(_shape, _strides, _new)
    _can = _strides_exist(_shape, _strides, _new)
    check((_got is not None) == _can, f"_view_strides({_shape}, {_strides}, {_new}): strides "
          + ("exist (the addresses step evenly along every new dimension)" if _can else "do not exist"),
          got=_got, expected="a tuple" if _can else None)
    if _got is not None:
        assert_equal(_addresses(_new, tuple(_got)), _addresses(_shape, _strides),
                     f"the strides {tuple(_got)} for {_new} visit the addresses of {_shape}, {_strides} in order")
_steps_small = python_steps(_view_strides, (10, 20), (40, 1), (10, 2, 10))
_steps_large = python_steps(_view_strides, (100, 1000), (2000, 1), (100, 10, 100))
check(_steps_large <= 2 * _steps_small + 50, "_view_strides does as much work for 100,000 elements as for 200 "
      "(the next case has 10^12 of them: the rule needs the shape and strides only, not the elements)",
      got=f"{_steps_small:,} Python steps for a (10, 20) layout, {_steps_large:,} for a (100, 1000) one",
      expected="about as many for both")
try:
    _huge = _view_strides((10 ** 6, 10 ** 6), (2 * 10 ** 6, 1), (10 ** 6, 1000, 1000))
except MemoryError:
    check(False, "_view_strides of a layout with 10^12 elements: the rule needs the shape and strides only, "
          "not the elements", got="MemoryError")
assert_equal(None if _huge is None else tuple(_huge), (2 * 10 ** 6, 1000, 1),
             "a (10^6, 10^6) slice with rows 2*10^6 apart, viewed as (10^6, 1000, 1000)")
_x = Tensor(np.arange(32.0)).view(4, 8)
_s = _x.as_strided((4, 6), (8, 1), 0).view(4, 2, 3)   # x[:, :6] (indexing comes in section 11)
check(_s._storage is _x._storage, "x[:, :6].view(4, 2, 3) shares the storage (no copy)")
assert_equal(_s.tolist(), np.arange(32.0).reshape(4, 8)[:, :6].reshape(4, 2, 3).tolist(), "x[:, :6].view(4, 2, 3)")
assert_raises(RuntimeError, _x.T.view, 32, match="contiguous", what="x.T.view(32): no strides exist")
print("✓ _view_strides: x[:, :6].view(4, 2, 3) has strides", _s.stride())

# %% [markdown]
# ## 8. squeeze and unsqueeze
#
# A dimension of size 1 holds no information about layout, so it can be removed or added
# for free:
#
# - `squeeze(dim=None)` drops size-1 dimensions: all of them, or only those among the given
#   dim(s) that have size 1 (PyTorch quietly keeps a named dim whose size is not 1, and so
#   do we). You write `_squeeze_dims`, which decides *which* dims go (the wrapper records
#   them as `dims` for module 06), and the forward that drops them.
# - `unsqueeze(dim)` inserts a size-1 dimension so that the result has it at position
#   `dim` (`dim` may be `-1`: at the end). Its stride is never used for stepping, so any
#   value would read the right elements; PyTorch picks the one that gives a contiguous
#   tensor *the strides a fresh tensor of the new shape would have*, and uses the same
#   rule on any layout. Work the rule out from the examples below; the tests compare
#   strides with PyTorch's.
#
# Example: a `(3,)` tensor with stride `(1,)`: `unsqueeze(0)` gives shape `(1, 3)` with
# strides `(3, 1)`, `unsqueeze(1)` gives `(3, 1)` with `(1, 1)`. On a stepped view with
# strides `(2,)`, `unsqueeze(0)` gives `(6, 2)`: here the inserted stride differs from what
# `contiguous_strides((1, 3))` would say, and still reads the right elements; its
# `unsqueeze(1)`, at the end, gives `(2, 1)`.
#
# `unsqueeze` is the everyday tool for broadcasting: a `(3,)` bias becomes `(3, 1)` to be
# added down the rows.
#
# <details><summary>Hint 1 (_squeeze_dims)</summary>
#
# Two cases: no dim given (look at every dimension) or some dims given (look only at those,
# after turning negative ones into positions). What must be true of a dim to be removed?
# </details>
#
# <details><summary>The approach (_squeeze_dims)</summary>
#
# The dims arrive in any of PyTorch's accepted forms; bring them to one form first
# (numbers counted from the front, each once, in order), then decide which of them may
# actually be removed.
# </details>
#
# <details><summary>Hint (the forwards)</summary>
#
# Dropping or inserting a dimension drops or inserts one entry of the shape *and* the
# matching entry of the strides; the offset stays.
# </details>
#
# <details><summary>The approach (the forwards)</summary>
#
# Squeezing a size-1 dimension changes no address: the dimension is never stepped along.
# Unsqueezing inserts one that is never stepped along either, so its stride is free as far
# as the values go; the question is which stride makes the new tensor's `stride()` and
# `is_contiguous()` what PyTorch reports.
# </details>

# %% nbgrader={"grade": false, "grade_id": "squeeze-unsqueeze", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _squeeze_dims(shape, dim):
    """The positions that squeeze(dim) removes from a tensor of `shape`.

    Contract: `dim` is None, an int or a sequence of ints (negative count from the end).
    Returns a sorted tuple of distinct non-negative positions whose size is 1: all of them
    for None, else those among `dim`. Raises IndexError (from _wrap_dim) for a dim out of range;
    as in PyTorch, a 0-d tensor accepts dim 0 and -1 (and removes nothing).
    """
    # Idea: only a size-1 dimension can go, and only if it was asked for.
    ### BEGIN SOLUTION
    if dim is None:
        return tuple(d for d, n in enumerate(shape) if n == 1)
    wanted = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    dims = sorted({_wrap_dim(d, len(shape)) for d in wanted})  # 0-d: only 0 and -1 are valid
    return tuple(d for d in dims if d < len(shape) and shape[d] == 1)
    ### END SOLUTION


def squeeze(input, dim=None):
    """Drop size-1 dimensions (all, or those in `dim`): a zero-copy view."""
    return apply("squeeze", _squeeze_view, input, dims=_squeeze_dims(input.shape, dim))


def _squeeze_view(t, dims):
    """Forward of squeeze.

    Contract: `dims` lists positions of size-1 dimensions. Returns a view over the same
    storage and offset without those positions in shape and strides.
    """
    # Idea: a size-1 dimension is never stepped along, so removing it loses nothing.
    ### BEGIN SOLUTION
    shape = tuple(n for d, n in enumerate(t.shape) if d not in dims)
    strides = tuple(s for d, s in enumerate(t._strides) if d not in dims)
    return t._view(shape, strides, t._offset)
    ### END SOLUTION


def unsqueeze(input, dim):
    """Insert a size-1 dimension so that it sits at position `dim` of the result (a view)."""
    d = _wrap_dim(dim, input.ndim + 1)
    return apply("unsqueeze", _unsqueeze_view, input, dim=d)


def _unsqueeze_view(t, dim):
    """Forward of unsqueeze.

    Contract: `0 <= dim <= t.ndim`. Returns a view over the same storage and offset with a
    size-1 dimension at position `dim`, whose stride is PyTorch's choice (see the text).
    """
    # Idea: the new dimension is never stepped along; PyTorch still picks its stride by a rule.
    ### BEGIN SOLUTION
    stride = t._strides[dim] * t.shape[dim] if dim < t.ndim else 1
    shape = t.shape[:dim] + (1,) + t.shape[dim:]
    strides = t._strides[:dim] + (stride,) + t._strides[dim:]
    return t._view(shape, strides, t._offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-squeeze-unsqueeze", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
for _shape, _dim, _expected in [((1, 2, 1, 3), None, (0, 2)), ((1, 2, 1, 3), 0, (0,)), ((1, 2, 1, 3), -2, (2,)),
                                ((1, 2, 1, 3), 1, ()),   # size 2: kept, no error
                                ((1, 2, 1, 3), (2, 0, -4), (0, 2)), ((), None, ())]:
    assert_equal(_squeeze_dims(_shape, _dim), _expected, f"_squeeze_dims({_shape}, dim={_dim})")
assert_equal(_squeeze_dims((), 0), (), "_squeeze_dims((), 0): a 0-d tensor accepts dim 0 (and -1), as in PyTorch")
assert_raises(IndexError, _squeeze_dims, (2, 1), 2, what="_squeeze_dims((2, 1), 2)")
_x = Tensor(np.arange(6.0).reshape(1, 2, 1, 3))
assert_equal((_x.squeeze().shape, _x.squeeze().stride()), ((2, 3), (3, 1)), "x.squeeze() of (1, 2, 1, 3)")
assert_equal(_x.squeeze(1).shape, (1, 2, 1, 3), "squeezing a dim whose size is not 1 changes nothing")
_w = Tensor(np.arange(12.0)).as_strided((3, 1, 2), (4, 5, 1), 1)  # a size-1 dim whose stride (5) is unusual
assert_equal((_w.squeeze(1).shape, _w.squeeze(1).stride(), _w.squeeze(1).storage_offset()), ((3, 2), (4, 1), 1),
             "squeeze(1) of shape (3, 1, 2), strides (4, 5, 1), offset 1")
check(_x.squeeze()._storage is _x._storage, "squeeze is a view")
_v = Tensor([1.0, 2.0, 3.0])
assert_equal((_v.unsqueeze(0).shape, _v.unsqueeze(0).stride()), ((1, 3), (3, 1)), "unsqueeze(0) of a (3,) tensor")
assert_equal((_v.unsqueeze(-1).shape, _v.unsqueeze(1).stride()), ((3, 1), (1, 1)), "unsqueeze(-1) / unsqueeze(1)")
check(_v.unsqueeze(-1).is_contiguous(), "unsqueeze keeps a contiguous tensor contiguous")
_off = Tensor(np.arange(6.0)).as_strided((4,), (1,), 2)  # a view at offset 2
assert_equal((_off.unsqueeze(0).storage_offset(), _off.unsqueeze(0).tolist()), (2, [[2.0, 3.0, 4.0, 5.0]]),
             "unsqueeze(0) of a view at offset 2 keeps the offset")
_step = Tensor(np.arange(6.0)).as_strided((3,), (2,), 0)  # elements 0, 2, 4: stride 2
assert_equal(_step.unsqueeze(0).stride(), (6, 2), "unsqueeze(0) of a stride-2 view of size 3")
assert_equal(_step.unsqueeze(0).tolist(), [[0.0, 2.0, 4.0]], "unsqueeze(0) of a stride-2 view: values")
assert_equal(_step.unsqueeze(1).stride(), (2, 1), "unsqueeze(1), at the end, of a stride-2 view")
_m = Tensor(np.zeros((2, 3))).T  # shape (3, 2), strides (1, 3)
assert_equal(_m.unsqueeze(1).stride(), (1, 6, 3), "unsqueeze(1) of a transposed (3, 2)")
assert_equal(_v.unsqueeze(1).numpy(), np.array([[1.0], [2.0], [3.0]], dtype=np.float32), "unsqueeze(1) values")
print("✓ squeeze, unsqueeze: a stride-2 view unsqueezed at 0 has strides", _step.unsqueeze(0).stride())

# %% [markdown]
# ## 9. Broadcasting
#
# Adding a bias of shape `(3,)` to a batch of shape `(64, 3)` should "just work": the bias
# is reused for every row. **Broadcasting** is the rule that says when shapes are
# compatible and what the result shape is. Here is what numpy and PyTorch answer for some
# pairs. Find the rule that explains every row, and fill in the `?` rows with it, before
# you write anything:
#
# | a | b | a + b has shape |
# |---|---|---|
# | `(64, 3)` | `(3,)` | `(64, 3)` |
# | `(2, 1, 4)` | `(3, 1)` | `(2, 3, 4)` |
# | `(5, 1)` | `(1, 6)` | `(5, 6)` |
# | `(2, 3)` | `(4,)` | error |
# | `(2, 3)` | `(2,)` | ? |
# | `()` | `(7, 2)` | `(7, 2)` |
# | `(0, 4)` | `(1, 4)` | `(0, 4)` |
# | `(3,)` | `(3, 1)` | ? |
# | `(1, 0)` | `(3, 1)` | ? |
#
# (`np.broadcast_shapes` answers any row you want to try; the check asks it too.) The error
# message is yours to design, and it is half of the job: imagine the student whose
# `batch + bias` just failed deep inside a model. What must the message tell them so that
# they know which tensor to fix, and where, without a debugger? Write the one you would
# want; the check then asks for what a good one cannot leave out. Count dimensions the way
# your rule lines them up. With more than two shapes, fold them left to right: which two
# shapes then actually clashed?
#
# How is broadcasting done without copying? With a layout: `expand` turns a size-1
# dimension into size n with no new memory, every one of the n positions reading the same
# element. `(3,)` → `(64, 3)` becomes shape `(64, 3)` over the original 3 numbers; which
# strides make that true is the next section's question. (For arithmetic we let numpy broadcast internally, which is the same trick; `expand` gives
# the same power to any op, and the loops of section 10 use it too.)
#
# <details><summary>Hint 1</summary>
#
# Write the two shapes of each row one under the other, first left-aligned, then
# right-aligned. In which alignment do the rows make sense? What does a missing dimension
# then count as?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Two shapes are enough: broadcasting three shapes is broadcasting the first two, then the
# result with the third.
# </details>
#
# <details><summary>The approach</summary>
#
# Two shapes first: line them up at the end the table suggests, and for each pair of
# sizes decide whether they agree and what the result's size is (the `(0, 4)` and `(1, 0)`
# rows say what a 0 does). Several shapes are the same question asked again with the
# result so far. The error message is part of the contract: it names the two shapes being
# combined, where they clash, the sizes that clash and the rule they break.
# </details>

# %% nbgrader={"grade": false, "grade_id": "broadcast-shapes", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def broadcast_shapes(*shapes):
    """The shape that `shapes` broadcast to, or a ShapeError naming the two shapes that clash.

    Why: every elementwise op checks this first, so shape mistakes get a clear message.
    """
    shapes = [(int(s),) if isinstance(s, (int, np.integer)) else tuple(map(int, s)) for s in shapes]
    # Contract: `shapes` (normalised above) are tuples of ints. Returns a tuple. Raises
    # ShapeError when two sizes clash, with a message that starts "cannot broadcast" and is
    # yours to design (the check names what it must not leave out).
    # Idea: the rule you found in the table, applied one pair of sizes at a time.
    ### BEGIN SOLUTION
    result = shapes[0] if shapes else ()
    for shape in shapes[1:]:
        if shape == result or not shape:  # the common cases: equal, or a 0-d operand (a number)
            continue
        if not result:
            result = shape
            continue
        n = max(len(result), len(shape))
        left = (1,) * (n - len(result)) + result
        right = (1,) * (n - len(shape)) + shape
        out = []
        for i, (a, b) in enumerate(zip(left, right)):
            if a == b or b == 1:
                out.append(a)
            elif a == 1:
                out.append(b)
            else:
                raise ShapeError(
                    f"cannot broadcast shapes {result} and {shape}: dimension {i - n} has sizes "
                    f"{a} and {b}; sizes must be equal or one of them must be 1")
        result = tuple(out)
    return result
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-broadcast-shapes", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# The table's rows and a few more, against numpy's answers (the ? rows included: numpy knows them).
for _shapes in [[(64, 3), (3,)], [(2, 1, 4), (3, 1)], [(5, 1), (1, 6)], [(2, 3), (2,)], [(), (7, 2)], [(0, 4), (1, 4)],
                [(3,), (3, 1)], [(1, 0), (3, 1)], [(5,), (1,), (4, 1)], [(1, 3), (2, 1)], [(0,), (1,)], [(3, 1)]]:
    try:
        _want = np.broadcast_shapes(*_shapes)
    except ValueError:
        assert_raises(ShapeError, broadcast_shapes, *_shapes, what=f"broadcast_shapes{tuple(_shapes)}: numpy refuses it")
    else:
        assert_equal(broadcast_shapes(*_shapes), _want, f"broadcast_shapes{tuple(_shapes)} against numpy")
_e = assert_raises(ShapeError, broadcast_shapes, (2, 3), (4,), match="cannot broadcast",
                   what="broadcast_shapes((2, 3), (4,))")
for _part in ["(2, 3)", "(4,)", "-1", "3", "4"]:
    check(_part in str(_e), f"the message names {_part!r} (both shapes, the dimension, both sizes)", got=str(_e))
_e = assert_raises(ShapeError, broadcast_shapes, (3, 1), (3, 2), (4, 2), match="cannot broadcast",
                   what="broadcast_shapes((3, 1), (3, 2), (4, 2))")
check("-2" in str(_e) and "(3, 2)" in str(_e) and "(4, 2)" in str(_e),
      "with three shapes, the message names the shape folded so far ((3, 1) with (3, 2) is (3, 2)), the new "
      "one and dimension -2", got=str(_e))
assert_raises(ShapeError, broadcast_shapes, (2, 1, 3), (2, 4), what="(2, 1, 3) and (2, 4): compared from the right")
assert_equal(outcome(broadcast_shapes), (), "broadcast_shapes() of no shapes (numpy: ())")
print("✓ broadcast_shapes((2, 1, 4), (3, 1)) =", broadcast_shapes((2, 1, 4), (3, 1)))
### BEGIN HIDDEN TESTS
import itertools as _it
for _a, _b in _it.product([(), (1,), (3,), (2, 1), (2, 3), (1, 3, 1), (4, 1, 3)], repeat=2):
    try:
        _expected = np.broadcast_shapes(_a, _b)
    except ValueError:
        _expected = None
    if _expected is None:
        try:
            broadcast_shapes(_a, _b)
            raise AssertionError(f"{_a} and {_b} must not broadcast")
        except ValueError:
            pass
    else:
        assert broadcast_shapes(_a, _b) == _expected, (_a, _b)
### END HIDDEN TESTS

# %% [markdown]
# ### expand: broadcasting as a view
#
# `expand(*sizes)` returns a view of the tensor with shape `sizes`:
#
# - new **leading** dimensions (when `sizes` is longer than the shape) may have any size
#   (but not -1: there is nothing to keep), every index along them seeing the tensor as it is;
#   a new one of size 1 has no second index to repeat, so it is an `unsqueeze`, and PyTorch
#   gives it the stride your `_unsqueeze_view` gives a new dimension in front of another
#   (expanding a 0-d tensor, with no dimension behind the new ones, it gives 0);
# - for the existing dimensions (aligned on the right), `-1` or the same size keeps size
#   and stride; a size-1 dimension can grow to any size, every index along it reading its
#   one element; any other change is an error that names both shapes.
#
# You write the layout rule as a pure function `_expand_layout(shape, strides, sizes) ->
# (new_shape, new_strides)`; the provided `_expand` dispatches it with the resolved shape.
# `broadcast_to(t, shape)` is the module-level spelling of the same op.
#
# <details><summary>Hint 1</summary>
#
# Which target sizes line up with which existing dimensions? (Align on the right, as in
# broadcasting.) What stride makes every index along a dimension read the same element?
# </details>
#
# <details><summary>The approach</summary>
#
# Line the target up with the tensor at their right ends. The dimensions the target adds
# on the left, and the size-1 dimensions it stretches, are read again and again for every
# step along them: what stride does that mean? The dimensions it keeps keep their layout.
# The errors are the pairs of sizes that cannot be reached this way.
# </details>

# %% nbgrader={"grade": false, "grade_id": "expand", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _expand_layout(shape, strides, sizes):
    """New (shape, strides) for seeing a layout with the larger shape `sizes`.

    Contract: `shape`, `strides`, `sizes` are tuples of ints (`sizes` may hold -1: keep that
    size). Returns `(new_shape, new_strides)` as tuples, the strides PyTorch gives: a new
    leading dimension of size 1 in front of another gets the stride `unsqueeze` would give
    it there (0 when the tensor is 0-d); a wider new one, stride 0. Raises
    ShapeError when the target has fewer dims, a new leading dim has a negative size, or a
    dimension of size other than 1 would change; the message names both shapes.
    """
    # Idea: along a grown size-1 dimension, every index must read one and the same element.
    ### BEGIN SOLUTION
    shape, sizes = tuple(shape), tuple(sizes)
    n_new = len(sizes) - len(shape)
    if n_new < 0:
        raise ShapeError(f"cannot expand shape {shape} to {sizes}: the target has fewer "
                         f"dimensions ({len(sizes)}) than the tensor ({len(shape)})")
    new_shape, new_strides = [0] * len(sizes), [0] * len(sizes)
    for i in reversed(range(len(sizes))):  # right to left: a new size-1 dim needs the one after it
        size = sizes[i]
        if i < n_new:
            if size < 0:
                raise ShapeError(f"cannot expand shape {shape} to {sizes}: the new leading "
                                 f"dimension {i} needs an explicit size, not {size}")
            after = new_shape[i + 1] * new_strides[i + 1] if i + 1 < len(sizes) else 0
            new_shape[i], new_strides[i] = size, after if size == 1 else 0  # size 1: an unsqueeze
            continue
        old, stride = shape[i - n_new], strides[i - n_new]
        if size == -1 or size == old:
            new_shape[i], new_strides[i] = old, stride
        elif old == 1 and size >= 0:
            new_shape[i], new_strides[i] = size, 0
        else:
            raise ShapeError(f"cannot expand shape {shape} to {sizes}: dimension {i} has size "
                             f"{old}, which is not 1; only size-1 dimensions can be expanded "
                             f"(-1 keeps a size)")
    return tuple(new_shape), tuple(new_strides)
    ### END SOLUTION


def _expand(input, sizes):
    """Dispatch an expand: resolve the layout, record the resolved shape."""
    new_shape, new_strides = _expand_layout(input.shape, input._strides, tuple(sizes))
    return apply("expand", lambda x, shape: x._view(shape, new_strides, x._offset),
                 input, shape=new_shape)


def broadcast_to(input, shape):
    """`input` seen with a broadcast `shape` (stride 0 where it grows): a zero-copy view."""
    return _expand(input, _shape_arg((shape,)) if not isinstance(shape, int) else (shape,))


# %% nbgrader={"grade": true, "grade_id": "test-expand", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
for _args, _expected in [(((3,), (1,), (4, 3)), ((4, 3), (0, 1))),
                         (((2, 1), (1, 1), (2, 5)), ((2, 5), (1, 0))),
                         (((2, 1), (1, 1), (-1, 5)), ((2, 5), (1, 0))),
                         (((2, 1), (7, 3), (3, 2, 4)), ((3, 2, 4), (0, 7, 0))),  # strides of a view: kept where sizes stay
                         (((1,), (1,), (0,)), ((0,), (0,))),
                         (((3,), (1,), (1, 3)), ((1, 3), (3, 1))),  # a new dim of size 1: an unsqueeze(0)
                         (((3,), (1,), (1, 1, 3)), ((1, 1, 3), (3, 3, 1))),
                         (((2, 1), (7, 3), (1, 2, 4)), ((1, 2, 4), (14, 7, 0)))]:
    assert_equal(_expand_layout(*_args), _expected, f"_expand_layout{_args} (PyTorch's strides)")
_b = Tensor([1.0, 2.0, 3.0])
_e = _b.expand(4, 3)
assert_equal((_e.shape, _e.stride()), ((4, 3), (0, 1)), "a (3,) tensor expanded to (4, 3)")
check(_e._storage is _b._storage, "expand is a view")
assert_equal(_e.numpy(), np.broadcast_to(np.float32([1.0, 2.0, 3.0]), (4, 3)), "expanded values")
assert_equal(broadcast_to(Tensor([[1], [2]]), (2, 3)).stride(), (1, 0), "broadcast_to((2, 1) -> (2, 3)) strides")
_e = assert_raises(ShapeError, Tensor(np.zeros((2, 3))).expand, 4, 3, what="(2, 3).expand(4, 3)")
check("(2, 3)" in str(_e) and "(4, 3)" in str(_e), "the message names both shapes", got=str(_e))
assert_raises(ShapeError, _expand_layout, (2, 3), (3, 1), (3,), what="expand to fewer dimensions")
assert_raises(ShapeError, _expand_layout, (3,), (1,), (-1, 3), what="a new leading dim given as -1")
print("✓ expand: (3,) -> (4, 3) has strides", _b.expand(4, 3).stride())

# %% [markdown]
# ## 10. The loops underneath: strided map, zip and reduce
#
# Every elementwise op and every reduction in this module is, in the end, a loop over
# storage. numpy runs those loops in C; here you write them in Python, once, for *any*
# layout. They are the semantics of `x.exp()`, `a + b` and `x.sum(dim)`: whatever numpy
# computes for a tensor must equal what these loops compute from its storage, shape,
# strides and offset. They go into `tinytorch/_strided.py` next to the address formula,
# as plain functions over flat storages, tuples and ints (no `Tensor` inside); module 17
# writes the same loops again for numba's compiler and checks them against these.
#
# The pieces are yours already (sections 3 and 9, and `broadcast_strides` below). The
# design is yours too: what does each loop count, and how does one step of that count reach
# the right element of every tensor involved, each with its own layout?
#
# - `strided_map(fn, out..., in...)`: `out[i] = fn(in[i])` for every multi-index `i`.
# - `strided_zip(fn, out..., a..., b...)`: `out[i] = fn(a[i], b[i])`, where `a` and `b`
#   may have smaller shapes that **broadcast** to the output's.
# - `strided_reduce(fn, start, out..., in..., dim)`: the output has the input's shape with
#   size 1 at `dim` (a `keepdim=True` result); each output element is
#   `fn(...fn(fn(start, in[.., 0, ..]), in[.., 1, ..])..., in[.., n-1, ..])` along `dim`.
#
# Each tensor is passed as four arguments: `storage, shape, strides, offset`.
#
# **Broadcasting in a loop** is `expand`'s trick (section 9) once more:
# `broadcast_strides(shape, strides, out_shape)` gives the input's strides as seen with the
# output's shape, so that the output's multi-index reads the input directly and the address
# formula does the rest. Work two cases by hand before you write it: a `(3,)` input with
# stride `(1,)` read as `(2, 3)`, and a `(2, 1)` input with strides `(1, 1)` read as
# `(2, 3)`. For each output dimension, ask: when the output's index moves one step along
# it, how far must the input's address move?
#
# The provided `layout_of(base, view)` below gives the `(shape, strides, offset)` of any
# numpy view of a 1-D `base` array, in elements. It is how the checks (and the tests) build
# odd layouts: transposed, stepped, offset, reversed and broadcast views.

# %%
def layout_of(base, view):
    """(shape, strides, offset) in elements of a numpy `view` into the 1-D array `base`."""
    itemsize = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // itemsize
    return tuple(view.shape), tuple(s // itemsize for s in view.strides), offset


_base = np.arange(24.0)
print("x.T of a 4x6:        ", layout_of(_base, _base.reshape(4, 6).T))
print("x[1:, ::-2] of a 4x6:", layout_of(_base, _base.reshape(4, 6)[1:, ::-2]))
print("a (3,) broadcast:    ", layout_of(_base, np.broadcast_to(_base[:3], (2, 3))))

# %% [markdown]
# <details><summary>Hint 1 (broadcast_strides)</summary>
#
# Which input dimension lines up with output dimension `k`? When does stepping along
# output dimension `k` move you in the input, and when must it not?
# </details>
#
# <details><summary>The approach (broadcast_strides)</summary>
#
# The same alignment as `expand`, but onto an output shape that is already decided: for
# each output dimension, does the input have a matching dimension, and does stepping
# along it move through the input's memory or not?
# </details>

# %% nbgrader={"grade": false, "grade_id": "broadcast-strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export _strided
def broadcast_strides(shape, strides, out_shape):
    """The strides that read a tensor of (shape, strides) with the larger shape `out_shape`.

    Contract: returns a list of ints, one per dimension of `out_shape`: reading the input
    at every multi-index of `out_shape` with these strides (and its own offset) gives
    numpy's broadcast of it. Raises ValueError, naming both shapes, when `shape` does not
    broadcast to `out_shape`.
    """
    # Idea: align on the right. Along a dimension the input lacks, or has size 1, which of
    # its elements must every index of the output read, and what stride does that?
    ### BEGIN SOLUTION
    lead = len(out_shape) - len(shape)
    if lead < 0:
        raise ValueError(f"shape {tuple(shape)} has more dimensions than {tuple(out_shape)}")
    out = [0] * len(out_shape)
    for k in range(len(shape)):
        if shape[k] == 1:
            continue  # read with stride 0: every output index meets the one element
        if shape[k] != out_shape[lead + k]:
            raise ValueError(f"shape {tuple(shape)} does not broadcast to {tuple(out_shape)}")
        out[lead + k] = strides[k]
    return out
    ### END SOLUTION


def _numel(shape):
    """Number of elements of `shape` (1 for `()`); provided."""
    n = 1
    for size in shape:
        n *= size
    return n


# %% [markdown]
# <details><summary>Hint 1 (the loops)</summary>
#
# Loop over the output, never over an input: the output's shape says how many elements
# there are and which multi-index each one has.
# </details>
#
# <details><summary>Hint 2 (the loops)</summary>
#
# Each tensor has its own strides and offset, so the same multi-index sits at a different
# storage position in each of them. An input that is broadcast needs strides seen with
# the output's shape first.
# </details>
#
# <details><summary>The approach (map and zip)</summary>
#
# For every element of the output, in any order: where it lives, and where each input
# element it is computed from lives. Section 3 turns an ordinal into a multi-index, and
# one multi-index is enough for every array once their strides agree on shapes. Anything
# that depends only on the layouts belongs before the loop.
# </details>
#
# <details><summary>The approach (reduce)</summary>
#
# Each output element is a fold over one line of the input, along `dim`. Find the input
# elements of that line from the output element's multi-index, and remember that the
# output has size 1 along `dim` when you compute where the result goes.
# </details>

# %% nbgrader={"grade": false, "grade_id": "strided-loops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export _strided
def strided_map(fn, out_storage, out_shape, out_strides, out_offset,
                in_storage, in_shape, in_strides, in_offset):
    """out[i] = fn(in[i]) for every multi-index i of the output, written into out_storage.

    Contract: each tensor is (storage: flat numpy array, shape, strides, offset), any
    layout (non-contiguous, offset, negative or zero strides). `in_shape` must broadcast to
    `out_shape` (ValueError otherwise). Writes every output element once; returns None.
    """
    # Idea: one loop over the output's ordinals; every tensor finds its own storage position.
    ### BEGIN SOLUTION
    in_strides = broadcast_strides(in_shape, in_strides, out_shape)
    for ordinal in range(_numel(out_shape)):
        index = ordinal_to_index(ordinal, out_shape)
        value = in_storage[index_to_position(index, in_strides, in_offset)]
        out_storage[index_to_position(index, out_strides, out_offset)] = fn(value)
    ### END SOLUTION


def strided_zip(fn, out_storage, out_shape, out_strides, out_offset,
                a_storage, a_shape, a_strides, a_offset,
                b_storage, b_shape, b_strides, b_offset):
    """out[i] = fn(a[i], b[i]) for every multi-index i of the output; a and b broadcast.

    Contract: as strided_map, with two inputs whose shapes broadcast to `out_shape`
    (ValueError otherwise). Returns None.
    """
    # Idea: as strided_map, once each input is described with the output's dimensions.
    ### BEGIN SOLUTION
    a_strides = broadcast_strides(a_shape, a_strides, out_shape)
    b_strides = broadcast_strides(b_shape, b_strides, out_shape)
    for ordinal in range(_numel(out_shape)):
        index = ordinal_to_index(ordinal, out_shape)
        a = a_storage[index_to_position(index, a_strides, a_offset)]
        b = b_storage[index_to_position(index, b_strides, b_offset)]
        out_storage[index_to_position(index, out_strides, out_offset)] = fn(a, b)
    ### END SOLUTION


def strided_reduce(fn, start, out_storage, out_shape, out_strides, out_offset,
                   in_storage, in_shape, in_strides, in_offset, dim):
    """Fold `fn` over dimension `dim` of the input, from `start`, into the output.

    Contract: `0 <= dim < len(in_shape)`; `out_shape` is `in_shape` with size 1 at `dim`
    (keepdim). out[i] = fn(...fn(fn(start, in[i with dim=0]), in[i with dim=1])...), in
    order of the index along `dim`; a size-0 `dim` gives `start`. Returns None.
    """
    # Idea: each output element owns one line of input elements along `dim`.
    ### BEGIN SOLUTION
    for ordinal in range(_numel(out_shape)):
        index = ordinal_to_index(ordinal, out_shape)
        acc = start
        for j in range(in_shape[dim]):
            index[dim] = j
            acc = fn(acc, in_storage[index_to_position(index, in_strides, in_offset)])
        index[dim] = 0
        out_storage[index_to_position(index, out_strides, out_offset)] = acc
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-strided-map", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert_equal(broadcast_strides((3,), (1,), (2, 3)), [0, 1], "broadcast_strides((3,), (1,), (2, 3))")
assert_equal(broadcast_strides((2, 1), (1, 1), (2, 3)), [1, 0], "a size-1 dim is read with stride 0, not its own")
assert_equal(broadcast_strides((), (), (2, 2)), [0, 0], "a 0-d input is read with stride 0 everywhere")
assert_equal(broadcast_strides((4, 1), (-2, 9), (4, 5)), [-2, 0], "a reversed, broadcast input")
assert_raises(ValueError, broadcast_strides, (3,), (1,), (2, 4), match=r"\(3,\)", what="(3,) read as (2, 4)")
assert_raises(ValueError, broadcast_strides, (2, 3), (3, 1), (3,), what="more dims than the output")


def _check_map(what, base, view, out_shape=None):
    out_shape = view.shape if out_shape is None else out_shape
    shape, strides, offset = layout_of(base, view)
    out = np.full(_numel(out_shape), np.nan)
    strided_map(lambda v: v * 10.0 + 1.0, out, out_shape, contiguous_strides(out_shape), 0,
                base, shape, strides, offset)
    assert_equal(out.reshape(out_shape), np.broadcast_to(view, out_shape) * 10.0 + 1.0, f"strided_map on {what}")


_base = np.arange(60.0)
_check_map("a contiguous (3, 4)", _base, _base[:12].reshape(3, 4))
_check_map("a transposed (5, 12) (strides (1, 12))", _base, _base.reshape(5, 12).T)
_check_map("a permuted (3, 4, 5)", _base, _base.reshape(3, 4, 5).transpose(2, 0, 1))
_check_map("an offset, stepped slice", _base, _base.reshape(5, 12)[2:, 1::4])
_check_map("a reversed view (negative stride)", _base, _base.reshape(5, 12)[::-2, 3])
_check_map("a 0-d element at offset 7", _base, _base[7:8].reshape(()))
_check_map("a (4,) read as (3, 4) (broadcast)", _base, _base[8:12], out_shape=(3, 4))
# The output can be a strided view too: write into the transpose of a 3x4 buffer.
_out = np.zeros(12)
strided_map(lambda v: -v, _out, (4, 3), (1, 4), 0, _base, (4, 3), (3, 1), 0)
assert_equal(_out.reshape(3, 4), -_base[:12].reshape(4, 3).T, "strided_map into a transposed output")
_out = np.zeros(8)
strided_map(lambda v: -v, _out, (3,), (2,), 1, _base, (3,), (1,), 0)
assert_equal(_out, [0, 0, 0, -1, 0, -2, 0, 0], "strided_map into an output at offset 1 with stride 2")
print("✓ strided_map: a (2, 1) input read as (2, 3) uses strides", broadcast_strides((2, 1), (1, 1), (2, 3)))

# %% nbgrader={"grade": true, "grade_id": "test-strided-zip", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_base = np.arange(60.0)  # this cell's own data (a check cell above that failed leaves nothing it needs)
_m = _base.reshape(5, 12)
def _check_zip(what, base, a_view, b_view):
    out_shape = np.broadcast_shapes(a_view.shape, b_view.shape)
    out = np.full(_numel(out_shape), np.nan)
    strided_zip(lambda x, y: x * 100.0 + y, out, out_shape, contiguous_strides(out_shape), 0,
                base, *layout_of(base, a_view), base, *layout_of(base, b_view))
    assert_equal(out.reshape(out_shape), a_view * 100.0 + b_view, f"strided_zip on {what}")


_m = _base.reshape(5, 12)
_check_zip("two contiguous (2, 3)", _base, _base[:6].reshape(2, 3), _base[6:12].reshape(2, 3))
_check_zip("a transposed and an offset view", _base, _m[:3, :4].T, _m[1:5, 5:8])
_check_zip("(3, 4) + (4,) at offset 20 (row broadcast)", _base, _m[:3, :4], _base[20:24])
_check_zip("(3, 1) + (1, 4): both broadcast", _base, _m[:3, 2:3], _m[4:5, 8:12])
_check_zip("(2, 1) with a non-zero size-1 stride + (2, 3)", _base, _m[:2, 5:6], _m[2:4, ::4])
_check_zip("a reversed view + a 0-d value", _base, _m[::-1, 0], _base[59:].reshape(()))
_check_zip("a (2, 3, 4) permuted + (3, 1)", _base, _base[:24].reshape(4, 2, 3).transpose(1, 2, 0), _m[:3, 11:])
assert_raises(ValueError, strided_zip, lambda x, y: x + y, np.zeros(6), (2, 3), (3, 1), 0,
              _base, (2, 3), (3, 1), 0, _base, (2,), (1,), 0, what="(2, 3) zip (2,) must not broadcast")
_out = np.zeros(8)
strided_zip(lambda x, y: x + y, _out, (2, 2), (1, 4), 2, _base, (2, 2), (2, 1), 0, _base, (2,), (1,), 10)
assert_equal(_out, [0, 0, 10, 12, 0, 0, 12, 14], "strided_zip into a transposed output at offset 2 "
             "(out[i, j] lives at 2 + i + 4j)")
print("✓ strided_zip: (3, 1) + (1, 4) ->", np.broadcast_shapes((3, 1), (1, 4)))

# %% nbgrader={"grade": true, "grade_id": "test-strided-reduce", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_base = np.arange(60.0)  # this cell's own data (a check cell above that failed leaves nothing it needs)
_m = _base.reshape(5, 12)
def _check_reduce(what, base, view, dim, fn=lambda acc, v: acc + v, start=0.0, ref=np.sum):
    shape, strides, offset = layout_of(base, view)
    out_shape = tuple(1 if k == dim else n for k, n in enumerate(shape))
    out = np.full(_numel(out_shape), np.nan)
    try:
        strided_reduce(fn, start, out, out_shape, contiguous_strides(out_shape), 0, base, shape, strides, offset, dim)
    except IndexError as error:
        raise AssertionError(f"strided_reduce on {what} (shape {shape}, strides {strides}, offset {offset}), dim={dim}, "
                             f"into out of shape {out_shape}: {error}: a position outside the storage or the output "
                             f"(the traceback below shows the line)") from error
    assert_equal(out.reshape(out_shape), ref(view, axis=dim, keepdims=True), f"strided_reduce on {what}, dim={dim}")


_b3 = _base[:24].reshape(2, 3, 4)
for _d in range(3):
    _check_reduce("a contiguous (2, 3, 4)", _base, _b3, _d)
    _check_reduce("a permuted (4, 2, 3)", _base, _b3.transpose(2, 0, 1), _d)
_check_reduce("an offset, stepped (3, 3)", _base, _m[1:4, 2::4], 0)
_check_reduce("a reversed (5,)", _base, _m[::-1, 7], 0)
_check_reduce("a broadcast (4, 3), stride 0", _base, np.broadcast_to(_base[30:33], (4, 3)), 0)
_check_reduce("max over a transposed (12, 5)", _base, _m.T, 1, fn=max, start=-np.inf, ref=np.max)
_check_reduce("an empty dim", _base, _m[:, 3:3], 1)
# The fold runs in index order: with a non-commutative fn the order shows.
_out = np.zeros(1)
strided_reduce(lambda acc, v: acc * 10 + v, 0, _out, (1,), (1,), 0, np.array([1.0, 2.0, 3.0]), (3,), (1,), 0, 0)
assert_equal(_out[0], 123.0, "the fold visits index 0, 1, 2 in order")
strided_reduce(lambda acc, v: acc + v, 100.0, _out, (1,), (1,), 0, np.array([1.0, 2.0, 3.0]), (3,), (1,), 0, 0)
assert_equal(_out[0], 106.0, "a fold starts from `start` (100 + 1 + 2 + 3), not from the first element")
_out = np.zeros(8)
strided_reduce(lambda acc, v: acc + v, 0.0, _out, (2, 1), (3, 1), 1, _base, (2, 3), (3, 1), 0, 1)
assert_equal(_out, [0, 3, 0, 0, 12, 0, 0, 0], "strided_reduce into a (2, 1) output at offset 1 with strides "
             "(3, 1) (out[i, 0] lives at 1 + 3i)")
_outside = sorted({n for _f in (broadcast_strides, strided_map, strided_zip, strided_reduce) for n in _f.__code__.co_names}
                  & {"np", "numpy", "math"})
check(not _outside, "the strided loops use only plain Python: tinytorch/_strided.py, where they are exported, "
      "imports nothing (no numpy)", got=_outside, expected=[])
print("✓ strided_reduce: sum over dim 1 of a (2, 3, 4) ->", _b3.sum(axis=1, keepdims=True).shape)

# %% [markdown]
# ## 11. Indexing
#
# Indexing comes in two flavours, and the difference is a systems one.
#
# **Basic indexing** — ints, slices with a positive step, `None` and `...` — always picks a
# regular grid of elements, so it is a *view*. For each index item, walking the input
# dimensions left to right:
#
# - an **int** `i` (negative counts from the end) fixes that dimension, which disappears
#   from the result;
# - a **slice** `start:stop:step` keeps the dimension, and picks the elements
#   `start, start + step, ...` before `stop`;
# - **`None`** inserts a new dimension of size 1, consuming no input dimension.
#
# For each kind, work out what it does to the shape, the strides and the offset. Try
# `x[1, ::2]` on a `(3, 4)` tensor with strides `(4, 1)` by hand first: which elements of
# the storage does it pick, and which (shape, strides, offset) picks them?
#
# You write the arithmetic of one slice as a pure function, `_slice_layout(item, size,
# stride)`, and the walk over the index, `_basic_index`. Python's `slice.indices(size)`
# does the clamping for you (a `stop` past the end, negative `start`/`stop` counting from
# the end, `None`). `_slice_layout` must also be right for a **negative step**, as numpy's
# `a[::-1]` is: the first element picked is the one at `start` (the *last* one, for
# `::-1`), and the new stride is negative. A tinytorch tensor refuses negative steps (as PyTorch does: a negative-stride
# view would complicate everything downstream), but the layout rule is the same for both
# signs, and the tests check yours against numpy's views with negative steps too.
#
# A provided helper first normalises the index into a tuple with `...` expanded and one
# item per input dimension (missing trailing dims become `slice(None)`), and rejects
# negative steps.
#
# **Advanced indexing** — an index list/array/int64 tensor, or a bool mask — can pick any
# elements in any order, so no strides describe the result: it must be a **copy**. We hand
# those to numpy (`x.numpy()[index]`), which implements the full rule set; the op is still
# recorded as `"getitem"`, and the normalised index (numpy arrays instead of tensors) is kept
# in `attrs["index"]` so that module 06 can scatter gradients back with it.
#
# Writing (`x[idx] = value`) goes straight into storage through numpy, with the same
# checks as the in-place ops of section 13.

# %%
#| export
def _is_int_index(item):
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _is_advanced(items):
    """True if any index item needs numpy's advanced indexing (so the result is a copy)."""
    return any(isinstance(i, (list, tuple, np.ndarray, Tensor, bool, np.bool_)) for i in items)


def _check_slice(item):
    if isinstance(item, slice) and item.step is not None and item.step <= 0:
        raise ValueError(f"step must be greater than zero (got slice step {item.step}); "
                         f"tinytorch, like PyTorch, has no negative-step views; x.flip(dim) makes the reversed copy")


def _numpy_index(index):
    """The index as a tuple numpy understands: tensors become numpy arrays, lists arrays."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for item in items:
        _check_slice(item)
        if isinstance(item, Tensor):
            if item.dtype.kind not in "ib":
                raise IndexError(f"tensors used as indices must be int64 or bool, not {item.dtype}")
            item = np.array(item.numpy())
        elif isinstance(item, list):
            item = np.asarray(item)
        out.append(item)
    return tuple(out)


def _normalize_basic_index(items, ndim):
    """One item per input dim (ints, slices) plus the Nones, with `...` expanded."""
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim} "
                         f"({consumed} were given)")
    out = []
    for item in items:
        if item is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
        elif _is_int_index(item):
            out.append(int(item))
        elif isinstance(item, slice) or item is None:
            _check_slice(item)
            out.append(item)
        else:
            raise IndexError(f"unsupported index item {item!r} ({type(item).__name__})")
    if Ellipsis not in items:
        out.extend([slice(None)] * (ndim - consumed))
    return tuple(out)


# %% [markdown]
# Now your part: the layout of one slice, and the walk over a normalised index.
#
# <details><summary>Hint 1 (_slice_layout)</summary>
#
# After `slice.indices`, how many elements does the slice pick? Which element of the old
# dimension is the new dimension's element 0?
# </details>
#
# <details><summary>The approach (_slice_layout)</summary>
#
# Python already knows how to clamp a slice to a size (`slice.indices`), and how many
# elements a range has. What is left is the layout: the first selected element's address,
# and how far apart consecutive selected elements are. Think about a slice that selects
# nothing.
# </details>
#
# <details><summary>Hint 1 (_basic_index)</summary>
#
# Keep three things as you walk the index: the shape and strides built so far, the offset,
# and which input dimension the next item applies to. Which kind of item does not consume
# an input dimension?
# </details>
#
# <details><summary>The approach (_basic_index)</summary>
#
# Walk the index items and the tensor's dimensions together. Each kind of item does one
# thing to the result's layout: one keeps a dimension (changed), one removes a dimension
# (but moves where element `[0, ...]` lives), one adds a dimension that consumes nothing.
# Which input dimension does the next item refer to? The result is one view.
# </details>

# %% nbgrader={"grade": false, "grade_id": "basic-indexing", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _slice_layout(item, size, stride):
    """The layout of one slice of a dimension with `size` and `stride`.

    Contract: `item` is a slice (start/stop may be None, negative or out of range; the step
    may be None or any non-zero int, negative included). Returns `(length, new_stride,
    offset_delta)`: how many elements it picks, the stride of the new dimension, and how
    far (in storage elements) its first element lies from the old dimension's element 0
    (0 when the slice is empty).
    """
    # Idea: in storage elements, where does the slice's first element lie, and how far apart are
    # two neighbours of the slice?
    ### BEGIN SOLUTION
    start, stop, step = item.indices(size)
    length = len(range(start, stop, step))
    return length, stride * step, start * stride if length > 0 else 0
    ### END SOLUTION


def _basic_index(t, index):
    """Forward of basic indexing: a view.

    Contract: `index` is normalised (one int or slice per input dim, plus Nones; positive
    steps). Returns `t._view(...)` over the same storage. Raises IndexError for an int out
    of range; the message names the index, the dimension and its size.
    """
    # Idea: what does an int do to the layout, and what does a slice do (your _slice_layout)?
    ### BEGIN SOLUTION
    shape, strides, offset = [], [], t._offset
    d = 0
    for item in index:
        if item is None:
            shape.append(1)
            strides.append(0)
            continue
        size, stride = t.shape[d], t._strides[d]
        if isinstance(item, slice):
            n, new_stride, delta = _slice_layout(item, size, stride)
            offset += delta
            shape.append(n)
            strides.append(new_stride)
        else:
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {d} with size {size}")
            offset += (item % size) * stride
        d += 1
    return t._view(shape, strides, offset)
    ### END SOLUTION


def _unsqueeze_strides(t, view, index):
    """Give each dimension that a `None` inserted the stride PyTorch gives it. PyTorch
    applies the index left to right and a `None` is an unsqueeze there: its stride is the one
    your section 8 unsqueeze gives at the next input dimension not yet indexed. A size-1
    dimension is never stepped along, so only `stride()` sees the difference."""
    strides, out_dim, in_dim = list(view._strides), 0, 0
    for item in index:
        if item is None:
            strides[out_dim] = _unsqueeze_view(t, in_dim)._strides[in_dim]
            out_dim += 1
        elif isinstance(item, slice):
            out_dim, in_dim = out_dim + 1, in_dim + 1
        else:  # an int
            in_dim += 1
    if tuple(strides) == view._strides:
        return view
    return view._view(view.shape, strides, view._offset)


def _getitem(t, index):
    """Tensor.__getitem__: basic indexing as a view, advanced indexing as a numpy copy.

    With both ints and index tensors, PyTorch applies the ints first (as basic indexing)
    and only then the index tensors, so `y[0, :, idx]` keeps the slice's dimension first;
    numpy counts the int as an index array too and moves the gathered dimension to the
    front. We follow PyTorch: the ints go in a first, basic (view) step."""
    items = index if isinstance(index, tuple) else (index,)
    if _is_advanced(items):
        if any(_is_int_index(i) for i in items) and None not in items:
            first = tuple(i if _is_int_index(i) or i is Ellipsis else slice(None) for i in items)
            rest = tuple(i for i in items if not _is_int_index(i))
            return _getitem(_getitem(t, first), rest)
        np_index = _numpy_index(items)
        return apply("getitem", lambda x, index: np.array(x.numpy()[index], copy=True),
                     t, index=np_index)
    normalised = _normalize_basic_index(items, t.ndim)
    return apply("getitem", lambda x, index: _unsqueeze_strides(x, _basic_index(x, index), index),
                 t, index=normalised)


def _setitem(t, index, value):
    """Tensor.__setitem__: write `value` (broadcast) into the selected elements, in place."""
    _check_writable(t)
    np_index = _numpy_index(index)
    src = value.numpy() if isinstance(value, Tensor) else value
    t.numpy()[np_index] = src


# %% nbgrader={"grade": true, "grade_id": "test-basic-indexing", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
# _slice_layout against numpy's own views of a 1-D array with stride 3 (every third element).
_base = np.arange(30.0)
_dim = _base[::3]  # size 10, stride 3, offset 0
for _sl in [slice(None), slice(2, 7), slice(1, None, 3), slice(-4, None), slice(None, 100),
            slice(None, None, -1), slice(7, 2, -2), slice(-1, -11, -3), slice(5, 5), slice(12, 20),
            slice(5, 5, 2), slice(7, 3, 2)]:  # empty slices keep step * stride, as numpy's and PyTorch's do
    _n, _stride, _delta = _slice_layout(_sl, 10, 3)
    _ref = layout_of(_base, _dim[_sl])
    if _ref[0][0] > 0:
        assert_equal((_n, _stride, _delta), (_ref[0][0], _ref[1][0], _ref[2]),
                     f"_slice_layout({_sl}, 10, 3): (length, stride, offset change)")
    else:  # numpy gives an empty view the old stride; PyTorch keeps step * stride (x[5:5:2].stride() is 2)
        assert_equal((_n, _stride, _delta), (0, 3 * (_sl.step or 1), 0),
                     f"_slice_layout({_sl}, 10, 3): an empty slice (length 0, step * stride as PyTorch's, no offset change)")
_a = np.arange(12.0).reshape(3, 4)
_x = Tensor(_a)
_r = _x[1, ::2]
assert_equal((_r.shape, _r.stride(), _r.storage_offset()), ((2,), (2,), 4), "x[1, ::2] of a (3, 4)")
assert_equal(_r.numpy(), _a[1, ::2], "x[1, ::2] values")
check(_r._storage is _x._storage, "basic indexing is a view")
for _idx in [0, -1, (1, 2), (slice(1, None), slice(None, None, 3)), (None, 1), (Ellipsis, 2),
             (slice(None), None, slice(1, 3)), (slice(10, 20),), ()]:
    assert_equal(outcome(lambda: _x[_idx].numpy()), _a[_idx], f"x[{_idx}] (an error raised on the way is shown as got)")
_t = _x.T[1:, 2]  # an index of a transposed view: strides (1, 4), then offset 1 + 2*4
assert_equal((_t.shape, _t.stride(), _t.storage_offset()), ((3,), (1,), 9), "x.T[1:, 2]: (shape, strides, offset)")
assert_equal(_t.numpy(), _a.T[1:, 2], "x.T[1:, 2] values")
for _what, _got, _want in [("x[1][2]", _x[1][2], _a[1][2]), ("x[1:][0]", _x[1:][0], _a[1:][0]),
                           ("x[:, 1:][1, ::2]", _x[:, 1:][1, ::2], _a[:, 1:][1, ::2])]:
    assert_equal(_got.numpy(), _want, f"{_what}: an index of a view that starts at a non-zero offset")
_e = assert_raises(IndexError, _x.__getitem__, (0, 5), what="x[0, 5] on a (3, 4) tensor")
check(all(_part in str(_e) for _part in ["5", "dimension 1", "4"]),
      "the message names the index (5), the dimension (1) and its size (4)", got=str(_e))
assert_raises(IndexError, _x.__getitem__, (0, -5), match="dimension 1", what="x[0, -5] on a (3, 4) tensor")
assert_raises(IndexError, _x.__getitem__, 3, what="x[3] on a (3, 4) tensor (indices of a size-3 dimension: 0, 1, 2)")
_m = _x[Tensor(_a > 5)]  # advanced (a bool mask): a copy
assert_equal(_m.numpy(), _a[_a > 5], "x[mask] (advanced indexing)")
check(_m._storage is not _x._storage, "advanced indexing copies")
print("✓ indexing: x[1, ::2] has strides", _r.stride(), "and offset", _r.storage_offset())
### BEGIN HIDDEN TESTS
_b = np.arange(60).reshape(3, 4, 5)
_y = Tensor(_b)
for _idx in [(Ellipsis, None), (1, Ellipsis, slice(None, None, 2)), (slice(None, 2), -1, slice(1, 4, 2)),
             (-3,), (None, None, 0, None), (slice(2, 1),)]:
    assert_equal(_y[_idx].numpy(), _b[_idx], f"y[{_idx}] against numpy")
    check(_y[_idx]._storage is _y._storage, f"y[{_idx}] is a view (shares y's storage)")
### END HIDDEN TESTS

# %% [markdown]
# ## 12. Elementwise arithmetic
#
# With layout in place, arithmetic is short, because numpy does the work: `a.numpy()` is a
# strided numpy view, numpy's ufuncs (`np.add`, `np.multiply`, ...) loop over it in C with
# broadcasting built in. No Python loop over elements anywhere — that is what keeps
# tinytorch fast enough to train real models.
#
# What we must own is the **contract**:
#
# 1. **Type promotion** (provided, `_result_dtype`), following PyTorch: the result has the
#    "highest" kind among the tensors (bool < int < float; float32 with float64 gives
#    float64), and a Python number never upcasts a tensor of its own kind or higher
#    (`float32_tensor * 2.5` stays float32), but can raise the kind (`int_tensor * 2.5` is
#    float32). True division of integers gives float32.
# 2. **Python numbers become 0-d tensors** before `apply` (provided), so every input of a
#    recorded op is a Tensor.
# 3. **The forward** (yours) hands the two operands to a numpy ufunc. numpy broadcasts by
#    itself, and a clash raises *its* message: `np.add(np.zeros((2, 3)), np.zeros(2))` says
#    "operands could not be broadcast together with shapes (2,3) (2,)". Which message
#    should a student of this course read instead? And numpy computes in the dtypes it is
#    given, while promotion has already chosen one: what must happen to an operand of
#    another dtype, and what must *not* happen to one that already has it (think of a
#    1 GB activation)?
#
# Whatever layouts `a` and `b` have (transposed, sliced, expanded), the result must equal
# `strided_zip` of section 10 applied to their storages: numpy's loop is the fast version
# of yours. The check below compares the two.
#
# Comparisons (`== != < <= > >=`) go through the same path and return bool tensors; `apply`
# never records them (a bool output has no gradient). Unary functions (`exp`, `log`,
# `sqrt`, `abs`, `neg`, `clamp`) and `where(cond, a, b)` / `masked_fill` are provided.
# numpy's warnings for `log(0)` or `1/0` are silenced: like PyTorch we return `-inf`/`inf`.

# %%
#| export
def _is_scalar(x):
    return isinstance(x, (bool, int, float, np.bool_, np.number))


def _is_operand(x):
    """Things an arithmetic operator accepts: tensors, numbers, numpy arrays, (nested) lists."""
    return isinstance(x, (Tensor, np.ndarray, list, tuple)) or _is_scalar(x)


def _operand(x):
    """Tensors and numbers pass through (numbers stay 'weak'); array-likes become Tensors."""
    if isinstance(x, Tensor) or _is_scalar(x):
        return x
    return Tensor(x)


_KINDS = {"b": 0, "i": 1, "u": 1, "f": 2}


def _result_dtype(*operands):
    """PyTorch-style promotion: tensors decide within a kind, numbers only raise the kind."""
    if len(operands) == 2:  # the common case, two tensors of one dtype: that dtype
        a, b = operands
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            dt = a._storage.dtype
            if dt is b._storage.dtype and dt in _DTYPES:
                return dt
    tensor_dtypes = [x.dtype for x in operands if isinstance(x, Tensor)]
    rank = max((_KINDS[d.kind] for d in tensor_dtypes), default=-1)
    if rank == 2:
        dt = float64 if any(d == float64 for d in tensor_dtypes) else float32
    elif rank == 1:  # the narrowest integer type that holds every tensor's values (uint8 with int8: int16)
        dt = np.result_type(*(d for d in tensor_dtypes if d.kind in "iu"))
    else:
        dt = {0: bool_}.get(rank)
    for x in operands:
        if isinstance(x, Tensor):
            continue
        srank = 0 if isinstance(x, (bool, np.bool_)) else 1 if isinstance(x, (int, np.integer)) else 2
        if srank > rank:
            rank, dt = srank, (bool_, int64, float32)[srank]
    return dt


def _as_tensor(x, dtype):
    """A number becomes a 0-d tensor of `dtype` (no grad); a Tensor passes through."""
    if isinstance(x, Tensor):
        return x
    return Tensor._from_array(np.array(x, dtype=dtype))


class _ErrstateVar:
    """`np.errstate(all="ignore")` behind a context variable's set/reset interface."""

    def set(self, _quiet):
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def reset(self, state):
        state.__exit__(None, None, None)


# (Plumbing: skim it.) Elementwise ops return inf and nan quietly, as PyTorch does.
# `with np.errstate(...)` rebuilds numpy's error-state object on every entry, which costs as
# much as the arithmetic on a small tensor; numpy 2 keeps that state in a context variable,
# so an op sets a prebuilt "ignore" state and resets it, several times cheaper. Where numpy
# has no such variable: errstate.
try:
    from numpy._core._multiarray_umath import _extobj_contextvar as _FP_ERRORS
    with np.errstate(all="ignore"):
        _FP_IGNORED = _FP_ERRORS.get()
except (ImportError, AttributeError):
    _FP_ERRORS, _FP_IGNORED = _ErrstateVar(), None


def _apply_quietly(op, forward, *inputs):
    """`apply` with numpy's floating-point warnings off (inf and nan quietly, as PyTorch)."""
    quiet = _FP_ERRORS.set(_FP_IGNORED)
    try:
        return apply(op, forward, *inputs)
    finally:
        _FP_ERRORS.reset(quiet)


# %% [markdown]
# Your part, the forward that every binary op shares:
#
# <details><summary>Hint 1</summary>
#
# Which of your functions raises the message a student should see for `(2, 3) + (2,)`?
# How do you get numpy arrays that see the two tensors' memory?
# </details>
#
# <details><summary>The approach</summary>
#
# Decide the result's shape and dtype with the rules you already wrote, then let numpy
# loop over the views of the storage. A conversion to the result dtype copies, so make one
# only where it changes something.
# </details>

# %% nbgrader={"grade": false, "grade_id": "elementwise", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _elementwise_forward(np_fn, a, b, dtype):
    """Forward of a binary op.

    Contract: `a`, `b` Tensors; `np_fn` a numpy ufunc; `dtype` the promoted dtype of the
    operands. Returns the numpy array `np_fn(a, b)` with the broadcast shape, computed on
    operands of `dtype` (its own dtype is np_fn's: `dtype` for arithmetic, bool for the
    comparisons that share this forward). An operand already of `dtype` is used as it is,
    never copied. Raises this course's ShapeError, naming both shapes, when the shapes clash.
    """
    # Idea: numpy broadcasts by itself; what must happen first so that a clash raises *your*
    # error, and in which dtype must numpy compute?
    ### BEGIN SOLUTION
    broadcast_shapes(a.shape, b.shape)
    x, y = a.numpy(), b.numpy()
    if x.dtype != dtype:
        x = x.astype(dtype)
    if y.dtype != dtype:
        y = y.astype(dtype)
    return np_fn(x, y)
    ### END SOLUTION


def _binary(op, np_fn, a, b):
    """Dispatch a binary elementwise op with promotion and numbers turned into 0-d tensors."""
    a, b = _operand(a), _operand(b)
    dt = _result_dtype(a, b)
    if op == "div" and dt.kind != "f":
        dt = float32
    a, b = _as_tensor(a, dt), _as_tensor(b, dt)
    if op == "pow" and dt.kind == "i" and bool((b.numpy() < 0).any()):
        raise ShapeError("Integers to negative integer powers are not allowed "
                         "(make the base a float tensor)")
    return _apply_quietly(op, lambda x, y: _elementwise_forward(np_fn, x, y, dt), a, b)


def _unary(op, np_fn, t, to_float=False):
    """Dispatch a unary elementwise op (ints become float32 first when `to_float`)."""
    def forward(x):
        arr = x.numpy()
        if to_float and arr.dtype.kind != "f":
            arr = arr.astype(float32)
        return np_fn(arr)
    return _apply_quietly(op, forward, t)


def _clamp(t, min, max):
    """Tensor.clamp: limit values to [min, max]; bounds are numbers."""
    if min is None and max is None:
        raise ValueError("clamp: give at least one of min and max")
    dt = _result_dtype(t, *[v for v in (min, max) if v is not None])
    return apply("clamp", lambda x, min, max: np.clip(x.numpy().astype(dt, copy=False), min, max),
                 t, min=min, max=max)


def where(condition, input, other):
    """Elementwise choice: input where condition is True, else other (all three broadcast)."""
    cond = condition.numpy() if isinstance(condition, Tensor) else np.asarray(condition)
    if cond.dtype != bool_:
        raise TypeError(f"where: condition must be a bool tensor, not {cond.dtype}")
    cond = np.array(cond, copy=True)
    a, b = _operand(input), _operand(other)
    dt = _result_dtype(a, b)
    a, b = _as_tensor(a, dt), _as_tensor(b, dt)
    broadcast_shapes(cond.shape, a.shape, b.shape)
    return apply("where", lambda x, y, cond: np.where(cond, x.numpy().astype(dt, copy=False),
                                                      y.numpy().astype(dt, copy=False)),
                 a, b, cond=cond)


def _masked_fill(t, mask, value):
    """Tensor.masked_fill: `value` where mask is True; the mask broadcasts to t's shape."""
    mask_shape = mask.shape if isinstance(mask, Tensor) else np.shape(mask)
    if broadcast_shapes(mask_shape, t.shape) != t.shape:
        raise ShapeError(f"masked_fill: mask of shape {tuple(mask_shape)} does not broadcast "
                         f"to the tensor's shape {t.shape}")
    if not isinstance(value, Tensor):
        value = Tensor._from_array(np.array(value).astype(t.dtype))
    return where(mask, value, t)


# %% nbgrader={"grade": true, "grade_id": "test-elementwise", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
_b = Tensor([10.0, 20.0, 30.0])
assert_close(_a + _b, np.float32([[11, 22, 33], [14, 25, 36]]), what="(2, 3) + (3,)")
assert_close(2 - _a, 2 - _a.numpy(), what="2 - a")
assert_close(_a / _b * 3, _a.numpy() / _b.numpy() * 3, rtol=1e-6, what="a / b * 3")
assert_equal(((_a * 2.5).dtype, (Tensor([1, 2]) / Tensor([2, 2])).dtype, (Tensor([1, 2]) * 2).dtype),
             (float32, float32, int64), "dtypes of float32 * 2.5, int / int, int * 2 (promotion chooses the dtype; "
             "_elementwise_forward computes in it)")
assert_equal((_a > 3).dtype, np.dtype(np.bool_), "the dtype of a > 3: bool (np_fn's, not the operands' promoted dtype)")
assert_equal((_a > 3).numpy(), _a.numpy() > 3, "the values of a > 3")
_big = Tensor(np.ones((256, 256), np.float32))
_held = peak_bytes(_elementwise_forward, np.add, _big, _big, float32)
check(_held < 1.5 * _big.nbytes, "_elementwise_forward on two float32 operands of dtype float32 allocates the result "
      "and nothing else (a cast to the dtype they already have copies them); got the most bytes it held at once, for "
      f"a result of {_big.nbytes} bytes", got=_held)
_e = assert_raises(ShapeError, lambda: _a + Tensor([1.0, 2.0]), match="cannot broadcast", what="(2, 3) + (2,)")
check("(2, 3)" in str(_e) and "(2,)" in str(_e), "the error is broadcast_shapes' message", got=str(_e))
assert_close(_a.exp().log(), _a.numpy(), rtol=1e-6, what="log(exp(a))")
assert_equal(_a.clamp(min=2, max=5), np.clip(_a.numpy(), 2, 5), "a.clamp(2, 5)")
assert_equal(where(_a > 3, _a, 0.0), np.where(_a.numpy() > 3, _a.numpy(), 0).astype(np.float32), "where(a > 3, a, 0)")
# Odd layouts: a transposed view plus an expanded (stride 0) view, checked against your strided_zip.
_p = Tensor(np.arange(12.0).reshape(4, 3)).T           # (3, 4), strides (1, 3)
_q = Tensor(np.arange(3.0)).unsqueeze(1).expand(3, 4)  # (3, 4), strides (1, 0)
_got = _p * 10 + _q
_ref = np.zeros(12)
strided_zip(lambda u, v: u * 10 + v, _ref, (3, 4), (4, 1), 0, _p._storage, _p.shape, _p._strides, _p._offset,
            _q._storage, _q.shape, _q._strides, _q._offset)
assert_close(_got, _ref.reshape(3, 4), what="p * 10 + q on a transposed and an expanded view, against strided_zip")
print("✓ elementwise ops: (2, 3) + (3,) =", (_a + _b).tolist())

# %% [markdown]
# ## 13. In-place operations
#
# `x.add_(y)`, `x.mul_(2)`, `x += y`, `x.zero_()`, `x.fill_(v)`, `x.copy_(src)` and
# `x[i] = v` overwrite the existing storage instead of allocating a new one. That saves
# memory (an optimizer updates millions of parameters in place every step) but is
# dangerous in two ways that we refuse with a clear error:
#
# 1. **Autograd.** If `x.requires_grad` and grad mode is on, `x` may already have been used
#    by recorded ops whose backward needs its *old* values. PyTorch refuses in-place ops on
#    leaf tensors that require grad; we refuse them on any tensor that requires grad while
#    grad mode is on. (Optimizers update parameters with grad mode off — module 06's
#    `no_grad()` — and that is allowed.)
# 2. **Overlapping memory.** Some views (section 9's `expand` makes them) have several
#    elements that *are the same memory cell*. Writing `x.add_(1)` would add 1 to that cell
#    several times (or once — it depends on the loop order). PyTorch refuses, and so do we.
#
# Your part is that check, `_check_writable(t)`. The provided `_inplace` also refuses a
# result dtype that cannot be stored back (`int_tensor.div_(2)` would need floats) and
# values whose shape does not broadcast to the tensor's.
#
# <details><summary>Hint 1</summary>
#
# Two independent reasons to refuse; the autograd one can be switched off by the caller
# (`check_grad=False`, used by `.data = ...`). When do two different multi-indices reach
# the same storage position?
# </details>
#
# <details><summary>The approach</summary>
#
# Two independent reasons to refuse, and the caller can switch off the first. For the
# second, the address formula answers the question: when do two different multi-indices
# give the same address, and which layouts make that happen? The message says why the
# write is refused (shared memory) and what to do instead.
# </details>

# %% nbgrader={"grade": false, "grade_id": "inplace", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_writable(t, check_grad=True):
    """Refuse an unsafe in-place write into `t`.

    Contract: returns None when writing is safe. Raises RuntimeError (1) when `check_grad`
    and t requires grad while grad mode is on: the message mentions grad; (2) when several
    elements of t share one memory location: the message says so, with the word "memory",
    and suggests .contiguous() or .clone(). Like PyTorch, it tests one cheap condition on
    the layout rather than searching for every overlap `as_strided` can make (a search
    would cost more than the write): which views of this module share memory?
    """
    # Idea: the address formula says when two different multi-indices give one address.
    ### BEGIN SOLUTION
    if check_grad and t.requires_grad and is_grad_enabled():
        raise RuntimeError(
            "a tensor that requires grad cannot be modified in place while grad mode is on "
            "(autograd may need its old values); update it under no_grad() (module 06) or "
            "write into .data / .detach()")
    for size, stride in zip(t.shape, t._strides):
        if stride == 0 and size > 1:
            raise RuntimeError(
                f"unsupported operation: more than one element of the written-to tensor (shape "
                f"{t.shape}, strides {t._strides}) refers to a single memory location (an "
                f"expanded view); call .contiguous() or .clone() before writing to it")
    ### END SOLUTION


def _inplace(t, np_fn, other, cast=False, alpha=1):
    """Apply `np_fn(t, alpha * other)` into t's own memory (np_fn None: just assign `other`)."""
    _check_writable(t)
    view = t.numpy()
    if isinstance(other, Tensor):
        fast = (other.shape == t.shape and other.dtype == view.dtype
                and (np_fn is not np.true_divide or view.dtype.kind == "f"))
    else:
        fast = type(other) in (int, float) and view.dtype.kind == "f"
    if fast:
        # An optimizer's update: a same-shape, same-dtype tensor or a number into a float
        # tensor; nothing to promote or broadcast.
        src = other.numpy() if isinstance(other, Tensor) else other
        if alpha != 1:
            src = src * alpha
    else:
        if alpha != 1:
            other = _binary("mul", np.multiply, other, alpha)
        other = _operand(other)
        dt = _result_dtype(t, other)
        if np_fn is np.true_divide and dt.kind != "f":
            dt = float32
        if not cast and not np.can_cast(dt, t.dtype, casting="same_kind"):
            raise RuntimeError(f"result type {dt} can't be cast to the desired output type {t.dtype} "
                               f"of an in-place operation")
        src = other.numpy() if isinstance(other, Tensor) else np.asarray(other)
        if broadcast_shapes(src.shape, t.shape) != t.shape:
            raise ShapeError(f"in-place operation: values of shape {tuple(src.shape)} do not "
                             f"broadcast to the tensor's shape {t.shape}")
        if np_fn is not None:
            src = src.astype(dt, copy=False)
    quiet = _FP_ERRORS.set(_FP_IGNORED)
    try:
        if np_fn is None:
            np.copyto(view, src, casting="unsafe")
        else:
            np_fn(view, src, out=view, casting="same_kind")
    finally:
        _FP_ERRORS.reset(quiet)
    return t


# %% nbgrader={"grade": true, "grade_id": "test-inplace", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = Tensor([1.0, 2.0, 3.0])
_storage_before = _x._storage
_x += 1
_x.mul_(2)
check(_x._storage is _storage_before, "in-place ops keep the storage")


def _allowed(call, what):
    """Run call(); an error from it fails the check with `what` named."""
    try:
        call()
    except Exception as err:  # noqa: BLE001 (any error means the call was refused)
        raise AssertionError(f"✗ {what}: must be allowed, but raised {type(err).__name__}: {err}") from err

assert_equal(_x.tolist(), [4.0, 6.0, 8.0], "(x + 1) * 2, in place")
_p = Tensor([1.0, 2.0], requires_grad=True)
assert_raises(RuntimeError, _p.add_, 1, match="grad", what="add_ on a tensor that requires grad")
set_grad_enabled(False)
try:  # grad mode is switched back on even if the check fails
    _allowed(lambda: _p.sub_(Tensor([0.5, 0.5])), "sub_ on a tensor that requires grad, with grad mode off")
finally:
    set_grad_enabled(True)
assert_equal(_p.tolist(), [0.5, 1.5], "sub_ with grad mode off")
_allowed(lambda: _check_writable(_p, check_grad=False), "check_grad=False skips the autograd rule")
_e = Tensor([1.0]).expand(3)
_err = assert_raises(RuntimeError, _e.fill_, 0.0, match="memory", what="fill_ on an expanded view (stride 0)")
check(".contiguous()" in str(_err) or ".clone()" in str(_err),
      "the message suggests .contiguous() or .clone() (what to write instead)", got=str(_err))
_one = Tensor(5.0).expand(1)  # a new leading dimension: stride 0, but one element in one cell
assert_equal(_one.stride(), (0,), "Tensor(5.0).expand(1): the new dimension has stride 0")
_allowed(lambda: _check_writable(_one), "writing into Tensor(5.0).expand(1): stride 0, but one element in one cell")
_row = Tensor([1.0, 2.0, 3.0]).expand(2, 3)[:1]  # stride 0 on a size-1 dimension: three elements, three cells
assert_equal(_row.stride(), (0, 1), "Tensor([1, 2, 3]).expand(2, 3)[:1]")
_allowed(lambda: _check_writable(_row), "writing into Tensor([1, 2, 3]).expand(2, 3)[:1]: stride 0 on a size-1 "
         "dimension, three elements in three cells")
_col = Tensor([[1.0], [2.0], [3.0]]).expand(3, 4)  # the shared cells are along the *last* dimension
assert_raises(RuntimeError, _col.add_, 1.0, match="memory", what="add_ on a (3, 1) column expanded to (3, 4)")
_rows = Tensor([1.0, 2.0]).expand(3, 2)  # ... and here along the *first* dimension
assert_raises(RuntimeError, _rows.mul_, 2.0, match="memory", what="mul_ on a (2,) row expanded to (3, 2)")
_allowed(lambda: _check_writable(Tensor(np.zeros((2, 3))).T), "writing into a transposed view (no shared cells)")
assert_raises(RuntimeError, Tensor([1, 2]).div_, 2, what="div_ on an int tensor (provided check)")
_g = Tensor(np.arange(6.0).reshape(2, 3))
_g[0, 1:] = Tensor([-1.0, -2.0])  # x[index] = value writes into storage too
_g[:, 0] = 9.0
assert_equal(_g.tolist(), [[9.0, -1.0, -2.0], [9.0, 4.0, 5.0]], "x[index] = value")
print("✓ in-place ops:", _x.tolist())

# %% [markdown]
# ## 14. Reductions
#
# A reduction (`sum`, `mean`, `amax`, `amin`, `max`, `min`, `argmax`, `argmin`) collapses
# one or more dimensions. The `dim` argument is where the bookkeeping is:
#
# - `None` means all dimensions (a 0-d result);
# - an int or a tuple of ints selects dimensions, negative ones counting from the end;
# - `keepdim=True` keeps the reduced dimensions with size 1, which is what you want for
#   broadcasting the result back: `x - x.mean(dim=1, keepdim=True)` centres each row.
#
# Your part is `_reduction_dims(dim, ndim)`: one canonical form for all these spellings,
# which `apply` records in `attrs`. Design it for its reader: in module 06 you will write
# the backward rule of `sum`, which reads `attrs["dim"]` and must not care whether the user
# wrote `dim=-1`, `dim=2`, `dim=(2,)` or `dim=(-1,)` on a 3-d tensor. Which spellings must
# therefore come out equal, and what form makes them equal? And which `dim` arguments have
# no sensible meaning at all, so that PyTorch refuses them? The contract fixes the details
# the tests compare (the form's type and order, the exceptions).
#
# Like PyTorch, the methods also accept numpy's spellings `axis=` and `keepdims=`. Sums
# of integers stay int64 (bools sum to int64: counting `True`s), while `mean` of an integer
# tensor is an error, as in PyTorch (an average is not an integer; say `.float()` if you
# mean it). `max(dim=...)`/`min(dim=...)` return a `(values, indices)` pair as PyTorch's do.
#
# numpy does the reducing (`np.sum(x.numpy(), axis=dims, keepdims=...)`); for one dim it
# computes what your `strided_reduce` of section 10 computes, and the check compares them.
#
# <details><summary>Hint 1</summary>
#
# Three input forms, one output form. Which provided function already turns one dim into a
# valid position, with PyTorch's error?
# </details>
#
# <details><summary>The approach</summary>
#
# Bring `dim` from its accepted forms to one (positions counted from the front, sorted),
# and refuse what would make the reduction ambiguous, naming it.
# </details>

# %% nbgrader={"grade": false, "grade_id": "reductions", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _reduction_dims(dim, ndim):
    """Normalise a reduction's `dim` for a tensor with `ndim` dimensions.

    Contract: `dim` is None (all dims), an int or a sequence of ints (negative count from
    the end). Returns a sorted tuple of distinct dims >= 0. Raises IndexError for a dim out
    of range (from _wrap_dim) and ShapeError for a dim given twice (the message says it
    "appears multiple times").
    """
    # Idea: one canonical form, so that module 06's backward rules never see a negative dim.
    ### BEGIN SOLUTION
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = []
    for d in dims:
        wrapped = _wrap_dim(d, ndim)
        if wrapped in out:
            raise ShapeError(f"dim {wrapped} appears multiple times in the list of dims")
        out.append(wrapped)
    return tuple(sorted(out))
    ### END SOLUTION


def _dim_aliases(dim, axis, keepdim, keepdims):
    """Merge numpy's `axis`/`keepdims` spellings into PyTorch's `dim`/`keepdim`."""
    if axis is not None:
        if dim is not None:
            raise TypeError("give either dim or axis, not both")
        dim = axis
    if keepdims is not None:
        keepdim = keepdims
    return dim, bool(keepdim)


def _reduce(op, np_fn, t, dim, keepdim, axis=None, keepdims=None):
    """Dispatch a reduction over the normalised dims."""
    dim, keepdim = _dim_aliases(dim, axis, keepdim, keepdims)
    dims = _reduction_dims(dim, t.ndim)
    if t.ndim == 0:
        dims = ()
    return apply(op, lambda x, dim, keepdim: np_fn(x.numpy(), axis=dim, keepdims=keepdim),
                 t, dim=dims, keepdim=keepdim)


def _max_min(op, t, dim, keepdim, axis=None, keepdims=None):
    """Tensor.max/min: no dim -> 0-d tensor (recorded as amax/amin); dim -> (values, indices)."""
    dim, keepdim = _dim_aliases(dim, axis, keepdim, keepdims)
    if dim is None:
        return _reduce("a" + op, np.max if op == "max" else np.min, t, None, False)
    d = _wrap_dim(dim, t.ndim)
    arg = np.argmax if op == "max" else np.argmin
    idx = arg(t.numpy(), axis=d, keepdims=True)
    values = apply(op, lambda x, dim, keepdim, indices:
                   np.take_along_axis(x.numpy(), indices, axis=dim) if keepdim
                   else np.take_along_axis(x.numpy(), indices, axis=dim).squeeze(dim),
                   t, dim=d, keepdim=keepdim, indices=idx)
    indices = Tensor._from_array(idx if keepdim else idx.squeeze(d))
    return _ValuesIndices(values, indices)


def _arg_reduce(op, np_fn, t, dim, keepdim, axis=None, keepdims=None):
    """argmax/argmin: int64 indices, never recorded (no gradient)."""
    dim, keepdim = _dim_aliases(dim, axis, keepdim, keepdims)
    if dim is None:
        def forward(x):
            flat = np_fn(x.numpy())
            return np.reshape(flat, (1,) * x.ndim) if keepdim else flat
        return apply(op, forward, t)
    d = _wrap_dim(dim, t.ndim)
    return apply(op, lambda x: np_fn(x.numpy(), axis=d, keepdims=keepdim), t)


# %% nbgrader={"grade": true, "grade_id": "test-reductions", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
for _args, _expected in [((None, 3), (0, 1, 2)), ((-1, 3), (2,)), (((2, 0), 3), (0, 2)), (([-1, -3], 3), (0, 2)),
                         ((np.int64(1), 2), (1,)), ((None, 0), ())]:
    assert_equal(_reduction_dims(*_args), _expected, f"_reduction_dims{_args}")
assert_raises(IndexError, _reduction_dims, 3, 3, what="dim 3 of a 3-d tensor")
assert_raises(ShapeError, _reduction_dims, (0, -3), 3, match="multiple", what="dims (0, -3) of a 3-d tensor")
_a = np.arange(24.0).reshape(2, 3, 4)
_x = Tensor(_a)
assert_close(_x.sum(), _a.sum(), what="x.sum()")
assert_close(_x.sum(dim=(0, -1)), _a.sum(axis=(0, 2)), what="x.sum(dim=(0, -1))")
assert_close(_x.mean(1, keepdim=True), _a.mean(axis=1, keepdims=True), what="x.mean(1, keepdim=True)")
assert_close(_x.amax(axis=-1, keepdims=True), _a.max(axis=-1, keepdims=True), what="x.amax(axis=-1, keepdims=True)")
_vals, _idx = _x.max(dim=1)
assert_equal(_vals, _a.max(axis=1), "x.max(dim=1).values")
assert_equal(_idx, _a.argmax(axis=1), "x.max(dim=1).indices")
assert_equal(Tensor([True, False, True]).sum().item(), 2, "a bool sum counts the Trues")
# numpy's reduction on a permuted view equals your strided_reduce on its storage:
_pv = _x.permute(2, 0, 1)  # (4, 2, 3), strides (1, 12, 4)
_out = np.zeros(4 * 2)
strided_reduce(lambda acc, v: acc + v, 0.0, _out, (4, 2, 1), (2, 1, 1), 0,
               _pv._storage, _pv.shape, _pv._strides, _pv._offset, 2)
assert_close(_pv.sum(2, keepdim=True), _out.reshape(4, 2, 1), what="x.permute(2, 0, 1).sum(2) against strided_reduce")
print("✓ reductions: _reduction_dims((2, 0), 3) =", _reduction_dims((2, 0), 3))
# %% [markdown]
# ## 15. Matrix multiplication
#
# `a @ b` is the workhorse of deep learning: a linear layer is one matmul, attention is two.
# numpy's `np.matmul` does the arithmetic (in optimised BLAS). The *shape* rule is yours,
# written as `_matmul_shape(a_shape, b_shape) -> result_shape`, and you find it the way
# numpy's users do: by asking. The cell below asks numpy for `a @ b` on arrays of zeros of
# the shapes listed. Predict each line before you run it; then find one rule that explains
# every line, errors included, and add pairs of your own until a prediction of yours can no
# longer fail. Questions the rule must settle:
#
# - for two matrices, which sizes must agree, and which survive into the result?
# - in `(8, 2, 3) @ (3, 4)`, what is the 8, and what happens to an operand that has none?
#   Which function of yours already decides how two such leading parts combine?
# - what does a 1-D operand stand for, first and second, and what is left of it in the
#   result? (`(3,) @ (3,)` is a dot product: what shape is a number?)
#
# The errors are part of the contract: each names both shapes, and a clash of the sizes
# that must agree names both sizes.
#
# Counting operations: a `(m, k) @ (k, n)` product does `m·n·k` multiply-adds, i.e. `2mnk`
# FLOPs — module 14 builds on this.

# %%
def numpy_matmul_shape(a_shape, b_shape):
    """numpy's answer for `a @ b` on zeros of these shapes: the result's shape, or "error"."""
    try:
        return np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape
    except ValueError:
        return "error"


for _a_shape, _b_shape in [((2, 3), (3, 4)), ((2, 3), (4, 5)), ((8, 2, 3), (3, 4)), ((3, 4), (8, 4, 2)),
                           ((2, 1, 2, 3), (5, 3, 4)), ((2, 2, 3), (4, 3, 5)), ((3,), (3, 4)), ((2, 3), (3,)),
                           ((3,), (3,)), ((3,), (5, 3, 2)), ((), (3,))]:
    print(f"{str(_a_shape):>13} @ {str(_b_shape):<10} -> {numpy_matmul_shape(_a_shape, _b_shape)}")

# %% [markdown]
#
# <details><summary>Hint 1</summary>
#
# Deal with the 1-D operands first by making them 2-D, so that only one general case is
# left; remember what you added. Which function of yours broadcasts the batch dimensions?
# </details>
#
# <details><summary>The approach</summary>
#
# Separate the two kinds of dimensions first: the last two take part in the product,
# everything before them is batch and follows the broadcasting rules you wrote. 1-D
# operands are PyTorch's special case: promote them to matrices for the rule, and take the
# promotion back out of the result. The errors name both full shapes.
# </details>

# %% nbgrader={"grade": false, "grade_id": "matmul", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _matmul_shape(a_shape, b_shape):
    """Result shape of a @ b with numpy's matmul rules.

    Contract: `a_shape`, `b_shape` tuples of ints. Returns a tuple. Raises ShapeError, with
    both shapes in the message, for a 0-d operand, for inner sizes that differ (the
    message names both sizes) and for batch dimensions that do not broadcast.
    """
    # Idea: the rule you found in numpy's answers; handle the special case so that one general case is left.
    ### BEGIN SOLUTION
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{a_shape} and {b_shape}")
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    if a2[-1] != b2[-2]:
        raise ShapeError(f"matmul: shapes {a_shape} and {b_shape} are not aligned: inner "
                         f"dimensions {a2[-1]} (last of the first) and {b2[-2]} "
                         f"(second-to-last of the second) must be equal")
    try:
        batch = broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError as exc:
        raise ShapeError(f"matmul: the batch dimensions of {a_shape} and {b_shape} do not "
                         f"broadcast: {exc}") from None
    out = batch
    if len(a_shape) > 1:
        out += (a2[-2],)
    if len(b_shape) > 1:
        out += (b2[-1],)
    return out
    ### END SOLUTION


def matmul(input, other):
    """Matrix product with numpy semantics: 1-D, 2-D and batched (broadcast batch dims)."""
    a, b = _operand(input), _operand(other)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise ShapeError("matmul: both arguments need at least 1 dimension (got a number)")
    shape = _matmul_shape(a.shape, b.shape)
    dt = _result_dtype(a, b)

    def forward(x, y):
        out = np.matmul(x.numpy().astype(dt, copy=False), y.numpy().astype(dt, copy=False))
        return out.reshape(shape)
    return apply("matmul", forward, a, b)


# %% nbgrader={"grade": true, "grade_id": "test-matmul", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
for _a_shape, _b_shape in [((2, 3), (3, 4)), ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((8, 1, 2, 3), (5, 3, 4)),
                           ((4, 2, 3), (3, 5)), ((3,), (2, 3, 4)), ((1, 2, 3), (7, 1, 3, 2))]:
    assert_equal(_matmul_shape(_a_shape, _b_shape), np.matmul(np.zeros(_a_shape), np.zeros(_b_shape)).shape,
                 f"_matmul_shape({_a_shape}, {_b_shape}) against numpy")
_e = assert_raises(ShapeError, _matmul_shape, (2, 3), (4, 5), what="(2, 3) @ (4, 5)")
for _part in ["(2, 3)", "(4, 5)", "3", "4"]:
    check(_part in str(_e), f"the message names {_part!r} (both shapes, both inner sizes)", got=str(_e))
_e = assert_raises(ShapeError, _matmul_shape, (2, 2, 3), (4, 3, 5), what="batch dims 2 and 4")
check("(2, 2, 3)" in str(_e) and "(4, 3, 5)" in str(_e), "the batch error names both full shapes", got=str(_e))
_e = assert_raises(ShapeError, _matmul_shape, (), (3,), what="a 0-d operand")
check("()" in str(_e) and "(3,)" in str(_e), "the 0-d error names both shapes, () and (3,)", got=str(_e))
_rng_check = np.random.default_rng(0)
_A = _rng_check.standard_normal((4, 2, 3)).astype(np.float32)
_B = _rng_check.standard_normal((3, 5)).astype(np.float32)
assert_close(Tensor(_A) @ Tensor(_B), _A @ _B, rtol=1e-5, what="(4, 2, 3) @ (3, 5)")
assert_close(Tensor(_A).matmul(Tensor(_B).T.T), _A @ _B, rtol=1e-5, what="matmul with a view")
print("✓ matmul: (8, 1, 2, 3) @ (5, 3, 4) ->", _matmul_shape((8, 1, 2, 3), (5, 3, 4)))

# %% [markdown]
# ## 16. Joining tensors and creating them
#
# The remaining pieces are provided plumbing, with PyTorch's names and defaults:
#
# - `cat(tensors, dim)` joins along an existing dimension (all other sizes must match) and
#   `stack(tensors, dim)` along a new one (all shapes must match). Both copy: the inputs
#   live in different storages, and a tensor has exactly one.
# - `tensor(data, dtype=None, requires_grad=False)`; `zeros`, `ones`, `full`,
#   `zeros_like`, `ones_like`, `arange`, `eye`; sizes may be given as `zeros(2, 3)` or
#   `zeros((2, 3))`.
# - Random tensors `rand`, `randn`, `randint` all draw from **one** numpy `Generator`, so
#   `manual_seed(0)` makes a whole program reproducible — a run that cannot be repeated
#   cannot be debugged.

# %%
#| export
def cat(tensors, dim=0):
    """Concatenate along an existing dimension `dim` (a copy)."""
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    if not tensors:
        raise ShapeError("cat: expected a non-empty sequence of tensors")
    ref = tensors[0]
    if ref.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    d = _wrap_dim(dim, ref.ndim)
    for i, t in enumerate(tensors[1:], start=1):
        if t.ndim != ref.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, ref.shape)) if k != d):
            raise ShapeError(f"cat: tensor {i} has shape {t.shape} but tensor 0 has shape "
                             f"{ref.shape}; all sizes must match except in dimension {d}")
    dt = _result_dtype(*tensors)
    return apply("cat", lambda *xs, dim, sizes: np.concatenate(
        [x.numpy().astype(dt, copy=False) for x in xs], axis=dim),
        *tensors, dim=d, sizes=tuple(t.shape[d] for t in tensors))


def stack(tensors, dim=0):
    """Join equal-shaped tensors along a new dimension `dim` (a copy)."""
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    if not tensors:
        raise ShapeError("stack: expected a non-empty sequence of tensors")
    for i, t in enumerate(tensors[1:], start=1):
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack: tensor {i} has shape {t.shape} but tensor 0 has shape "
                             f"{tensors[0].shape}; stack needs equal shapes")
    d = _wrap_dim(dim, tensors[0].ndim + 1)
    dt = _result_dtype(*tensors)
    return apply("stack", lambda *xs, dim: np.stack([x.numpy().astype(dt, copy=False) for x in xs], axis=dim),
                 *tensors, dim=d)


# %% [markdown]
# More ops that PyTorch users reach for, provided: triangles of a matrix (`tril`, `triu`,
# used for causal masks), elementwise `maximum`/`minimum`, reversing and rotating along
# dimensions (`flip`, `roll`), running sums (`cumsum`) and ordering (`sort`, `topk`, which
# return values and indices like `max(dim)`). Each is one call of `apply`, so module 06 can
# give each a backward rule: try to guess, before you get there, what the gradient of a
# running sum is.

# %%
#| export
def tril(input, diagonal=0):
    """The lower triangle of the last two dims (entries above `diagonal` zeroed)."""
    if input.ndim < 2:
        raise ShapeError(f"tril: input must have at least 2 dimensions, got shape {input.shape}")
    return apply("tril", lambda x, diagonal: np.tril(x.numpy(), diagonal), input, diagonal=int(diagonal))


def triu(input, diagonal=0):
    """The upper triangle of the last two dims (entries below `diagonal` zeroed)."""
    if input.ndim < 2:
        raise ShapeError(f"triu: input must have at least 2 dimensions, got shape {input.shape}")
    return apply("triu", lambda x, diagonal: np.triu(x.numpy(), diagonal), input, diagonal=int(diagonal))


def maximum(input, other):
    """Elementwise max of two broadcasting operands (PyTorch's torch.maximum)."""
    return _binary("maximum", np.maximum, input, other)


def minimum(input, other):
    """Elementwise min of two broadcasting operands (PyTorch's torch.minimum)."""
    return _binary("minimum", np.minimum, input, other)


def _dims_arg(dims, ndim, op):
    """An int or a sequence of ints as a tuple of distinct non-negative dims."""
    dims = _shape_arg(dims) if not isinstance(dims, int) else (dims,)
    dims = tuple(_wrap_dim(d, ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{op}: dims {dims} must not repeat a dimension")
    return dims


def flip(input, dims):
    """Reverse the order of the elements along each of `dims` (a copy, as in PyTorch)."""
    dims = _dims_arg(dims, input.ndim, "flip")
    return apply("flip", lambda x, dims: np.flip(x.numpy(), dims).copy() if dims else x.numpy().copy(),
                 input, dims=dims)


def roll(input, shifts, dims=None):
    """Rotate elements along `dims` by `shifts` (wrapping around); no dims: the flattened tensor."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(int(s) for s in shifts)
    if dims is not None:
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        if len(dims) != len(shifts):
            raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
        dims = tuple(_wrap_dim(d, input.ndim) for d in dims)
    elif len(shifts) != 1:
        raise ShapeError(f"roll: give dims for more than one shift, got shifts {shifts}")
    return apply("roll", lambda x, shifts, dims: np.roll(x.numpy(), shifts if dims else shifts[0], dims),
                 input, shifts=shifts, dims=dims)


def cumsum(input, dim):
    """Running sums along `dim`: out[..., i, ...] = input[..., :i+1, ...].sum(dim). Ints and
    bools give int64."""
    d = _wrap_dim(dim, max(input.ndim, 1))
    dt = input.dtype if input.dtype.kind == "f" else int64
    return apply("cumsum", lambda x, dim: np.cumsum(x.numpy().reshape(x.shape or (1,)), axis=dim,
                                                    dtype=dt).reshape(x.shape), input, dim=d)


def _ordered(op, t, k, dim, descending):
    """(values, indices) of the k first elements of `t` along `dim` in sorted order."""
    d = _wrap_dim(dim, max(t.ndim, 1))
    arr = t.numpy().reshape(t.shape or (1,))
    if not 0 <= k <= arr.shape[d]:
        raise ShapeError(f"{op}: k ({k}) is out of range for dimension {d} of size {arr.shape[d]}")
    key = arr.astype(np.float64) if arr.dtype == bool_ else arr
    idx = np.argsort(-key if descending else key, axis=d, kind="stable")
    idx = np.take(idx, np.arange(k), axis=d)
    if t.ndim == 0:
        idx = idx.reshape(())
    values = apply(op, lambda x, dim, indices: np.take_along_axis(
        x.numpy().reshape(x.shape or (1,)), indices.reshape(indices.shape or (1,)), axis=dim
    ).reshape(indices.shape), t, dim=d, indices=idx)
    return _ValuesIndices(values, Tensor._from_array(idx.astype(int64)))


def sort(input, dim=-1, descending=False):
    """(values, indices) sorted along `dim`; ties keep their order (a stable sort)."""
    return _ordered("sort", input, input.shape[dim] if input.ndim else 1, dim, descending)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) elements along `dim`, in order."""
    return _ordered("topk", input, int(k), dim, largest)


# %% [markdown]
# Creation functions, with PyTorch's names and defaults:

# %%
#| export
def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new tensor holding a copy of `data` (list, number, numpy array or Tensor)."""
    if device is None:
        return Tensor(data, dtype=dtype, requires_grad=requires_grad)
    return _made(Tensor(data, dtype=dtype).numpy(), requires_grad, device)


def _made(array, requires_grad, where):
    """A new leaf tensor holding `array`, on device `where` (the CPU when None): every
    factory takes PyTorch's `device=`."""
    t = Tensor._from_array(array)
    if where is not None:
        t = _to_device(t, where)
    t.requires_grad = requires_grad
    return t


def _filled(size, value, dtype, requires_grad, device=None):
    dt = float32 if dtype is None else _check_dtype(dtype)
    return _made(np.full(_shape_arg(size), value, dtype=dt), requires_grad, device)


def zeros(*size, dtype=None, requires_grad=False, device=None):
    """A tensor of zeros (float32 unless `dtype`)."""
    return _filled(size, 0, dtype, requires_grad, device)


def ones(*size, dtype=None, requires_grad=False, device=None):
    """A tensor of ones (float32 unless `dtype`)."""
    return _filled(size, 1, dtype, requires_grad, device)


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    """A tensor filled with `fill_value`; the dtype follows the value (bool, int64, float32)."""
    if dtype is None:
        dtype = _result_dtype(fill_value)
    return _filled((size,) if isinstance(size, (int, np.integer)) else (tuple(size),),
                   fill_value, dtype, requires_grad, device)


def zeros_like(input, dtype=None, requires_grad=False, device=None):
    """Zeros with the shape (and dtype and device, unless given) of `input`."""
    return _filled((input.shape,), 0, input.dtype if dtype is None else dtype, requires_grad,
                   getattr(input, "device", None) if device is None else device)


def ones_like(input, dtype=None, requires_grad=False, device=None):
    """Ones with the shape (and dtype and device, unless given) of `input`."""
    return _filled((input.shape,), 1, input.dtype if dtype is None else dtype, requires_grad,
                   getattr(input, "device", None) if device is None else device)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None):
    """Values start, start+step, ... below end; int64 for int arguments, else float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _result_dtype(start, end, step)
    return _made(np.arange(start, end, step, dtype=_check_dtype(dtype)), requires_grad, device)


def eye(n, m=None, dtype=None, requires_grad=False, device=None):
    """The n x m identity matrix (float32 unless `dtype`)."""
    return _made(np.eye(n, m, dtype=float32 if dtype is None else _check_dtype(dtype)), requires_grad, device)


# %% [markdown]
# Random tensors, all drawn from one generator that `manual_seed` resets. Like PyTorch's
# `torch.random`, the generator lives in its own package file, `tinytorch/random.py`:
# a `Generator` owns one random stream (module 05's shuffling and module 08's dropout take
# one too), and `default_generator` is the one every call without a generator draws from.

# %%
#| export random
"""Random numbers, mirroring torch.random: the Generator, the default one that rand,
randn, randint, dropout and shuffling draw from when given none, and its seed and state."""
import numpy as np

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state"]


class Generator:
    """A seedable source of random numbers of its own (torch.Generator); wraps numpy's.

    Why: two generators seeded alike give the same numbers whatever else the program draws
    meanwhile, so a data loader's shuffling can be reproduced on its own."""

    default_seed = 67280421310721  # torch.Generator()'s default seed: unseeded is still fixed

    def __init__(self):
        self.manual_seed(self.default_seed)

    def manual_seed(self, seed):
        """Reseed; returns self, so `Generator().manual_seed(0)` works."""
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self):
        """Reseed from the operating system's entropy; returns the new seed."""
        self.manual_seed(np.random.SeedSequence().entropy % 2**63)
        return self._seed

    def initial_seed(self):
        """The seed last given to manual_seed."""
        return self._seed

    def get_state(self):
        """The complete state (a dict), e.g. to checkpoint and later resume a run."""
        return self._rng.bit_generator.state

    def set_state(self, state):
        """Restore a state from get_state(); returns self."""
        self._rng.bit_generator.state = state
        return self

    def __repr__(self):
        return f"Generator(initial_seed={self._seed})"


default_generator = Generator()


def manual_seed(seed):
    """Reseed the default generator (reproducible runs); returns it, as PyTorch does."""
    return default_generator.manual_seed(seed)


def seed():
    """Reseed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state (a dict here; PyTorch gives a byte tensor), for
    set_rng_state to restore: a test or a checkpoint puts the random stream back."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from get_rng_state()."""
    default_generator.set_state(new_state)


def numpy_generator(generator=None):
    """The numpy generator that `generator` draws with (the default generator's for None).

    Why: every random draw of the package goes through a Generator, so that one seed
    reproduces a run; numpy code that needs random numbers asks for them here. (No PyTorch
    counterpart: PyTorch's generators drive its own kernels.)"""
    if generator is None:
        return default_generator._rng
    if isinstance(generator, Generator):
        return generator._rng
    raise TypeError(f"generator must be a tinytorch.Generator or None, not {type(generator).__name__}")


# %%
#| export
def _float_dtype(dtype):
    dt = float32 if dtype is None else _check_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"random floats need a floating dtype, not {dt}")
    return dt


def rand(*size, dtype=None, requires_grad=False, device=None):
    """Uniform samples from [0, 1)."""
    return _made(numpy_generator(None).random(_shape_arg(size), dtype=_float_dtype(dtype)), requires_grad, device)


def randn(*size, dtype=None, requires_grad=False, device=None):
    """Standard normal samples (mean 0, variance 1)."""
    return _made(numpy_generator(None).standard_normal(_shape_arg(size), dtype=_float_dtype(dtype)), requires_grad, device)


def randint(low, high=None, size=None, dtype=None, device=None):
    """Uniform integers in [low, high) (int64). randint(high, size) means low = 0."""
    if size is None:
        if high is None:
            raise TypeError("randint needs a size, e.g. randint(0, 10, (3,))")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    dt = int64 if dtype is None else _check_dtype(dtype)
    shape = _shape_arg((size,)) if not isinstance(size, int) else (size,)
    return _made(numpy_generator(None).integers(low, high, size=shape).astype(dt), False, device)


# %%
manual_seed(0)
_a = randn(2, 3)
manual_seed(0)
assert (randn(2, 3) == _a).numpy().all(), "same seed, same numbers"
print(cat([zeros(2, 2), ones(1, 2)]))
print(stack([arange(3), arange(3) * 10], dim=1))
print(eye(2, dtype=float64))
print(full((2,), True), zeros_like(_a).shape, randint(0, 10, (5,)).dtype)

# %% [markdown]
# ### Your loops run the tensor
#
# The loops are not a side exercise: they compute what the tensor's ops compute. Section 5's
# `DispatchMode` lets code take over any op on its way through `apply`, so the provided
# mode below sends `+`, `-`, `*`, `/`, `neg`, `exp` and `sum` to your three loops,
# reading each input's storage through its own strides and offset, exactly as
# MiniTorch's tensors run on its `tensor_map`, `tensor_zip` and `tensor_reduce`. (It asks
# the op's own forward only for the result's shape and dtype, the promotion rules being
# provided.) The expression below mixes a transpose, a broadcast, a stepped slice, an
# index and reductions; it must give the same numbers with and without your loops
# underneath.

# %%
import operator


class on_your_loops(DispatchMode):
    """While active, elementwise arithmetic, exp and sum run through strided_map,
    strided_zip and strided_reduce (plain Python over the storages); other ops as before."""

    ZIP = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}
    MAP = {"neg": operator.neg, "exp": math.exp}

    def __init__(self):
        self.ran = {}

    def dispatch(self, op, fn, args, kwargs):
        if op not in self.ZIP and op not in self.MAP and op != "sum":
            return fn(*args, **kwargs)
        like = fn(*args, **kwargs)  # only its shape and dtype are used
        self.ran[op] = self.ran.get(op, 0) + 1
        out = np.empty(like.size, like.dtype)
        out_strides = contiguous_strides(like.shape)
        layouts = [(t._storage, t.shape, t._strides, t._offset) for t in args]
        if op in self.ZIP:
            strided_zip(self.ZIP[op], out, like.shape, out_strides, 0, *layouts[0], *layouts[1])
        elif op in self.MAP:
            strided_map(self.MAP[op], out, like.shape, out_strides, 0, *layouts[0])
        else:  # one dimension at a time, each result (keepdim) the next one's input
            storage, shape, strides, offset = layouts[0]
            for dim in kwargs["dim"]:
                kept = tuple(1 if k == dim else n for k, n in enumerate(shape))
                part = np.empty(_numel(kept), like.dtype)
                strided_reduce(operator.add, 0, part, kept, contiguous_strides(kept), 0,
                               storage, shape, strides, offset, dim)
                storage, shape, strides, offset = part, kept, contiguous_strides(kept), 0
            out[:] = storage
        return out.reshape(like.shape)


_xl = Tensor(np.arange(12.0).reshape(3, 4) / 4)
_wl = Tensor([0.5, -1.0, 2.0])


def _expression():
    return ((_xl.T * _wl) + 1.0).exp().sum(1) / (-_xl[:, ::2]).exp().sum() - _xl[1].sum()


_on_numpy = _expression().numpy()
with on_your_loops() as _mode:
    _on_loops = _expression().numpy()
assert_close(_on_loops, _on_numpy, rtol=1e-12, atol=0, what="an expression of views, broadcasts and sums, "
             "computed by your strided loops, against numpy's")
check(set(_mode.ran) == {"mul", "add", "exp", "sum", "neg", "div", "sub"},
      "every op of the expression ran on your loops", got=sorted(_mode.ran))
print(f"✓ your loops give {_on_loops.round(4)}, numpy gives {_on_numpy.round(4)}; ops run on your loops: "
      f"{_mode.ran} (section 17 times them against numpy's)")

# %% [markdown]
# ## 17. A systems look: what tensors cost
#
# ### Bytes
#
# A tensor's elements occupy `numel() * element_size()` bytes (`nbytes`). A float32 weight
# matrix of a 4096×4096 layer is 64 MiB; the same in float64 is 128 MiB. That is why the
# default is float32, and why module 15 goes down to int8.
#
# But `nbytes` counts the elements a tensor *sees*, not the memory it *keeps alive*. All
# views of a tensor share one storage, so the honest measure of memory for a group of
# tensors is the memory behind their storages, each byte once. Write
# `memory_footprint(*tensors)`. One more case makes it a design question: two *different*
# storage objects can sit on the same memory. `tinytorch.from_numpy(a)` wraps `a`'s memory
# without copying, so calling it twice (or on `a` and on `a[50:]`) gives two storages over
# one block of memory, which a footprint must count once.
#
# It shows two facts that surprise people:
#
# - a view costs **zero** bytes: `x`, `x.T`, `x[::2]` and `x.expand(...)` together cost the
#   same as `x`;
# - a small slice of a big tensor keeps **the whole** big storage alive; if you only need
#   the slice, `clone()`/`contiguous()` it and drop the original.
#
# <details><summary>Hint 1</summary>
#
# A storage is a 1-D C-contiguous numpy array, so it occupies one unbroken range of
# addresses. numpy tells an array's first address: `arr.__array_interface__["data"][0]`.
# What identifies memory, then, better than the storage object?
# </details>
#
# <details><summary>The approach</summary>
#
# Memory is counted per byte, not per tensor or per storage: several tensors may share one
# storage, a view's storage may be much larger than the view, and storages may overlap.
# What does one storage occupy, in terms of addresses, and what is the footprint of several,
# some of which overlap?
# </details>

# %% nbgrader={"grade": false, "grade_id": "memory-footprint", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def memory_footprint(*tensors):
    """Bytes of memory actually held by `tensors`: each distinct storage counted once.

    Why: views share storage, so summing nbytes over-counts them, and a slice can keep a
    much larger storage alive; this is the number that matters for "will it fit?".
    """
    # Contract: `tensors` are Tensors (none: 0). Returns an int: the bytes of memory behind
    # their storages, each byte counted once however many tensors or storages sit on it.
    # Idea: memory is held by storages, and storages may share memory.
    ### BEGIN SOLUTION
    spans = sorted((start, start + t._storage.nbytes) for t in tensors
                   for start in [t._storage.__array_interface__["data"][0]])
    total, reach = 0, 0
    for start, end in spans:  # the union of the address ranges, left to right
        total += max(0, end - max(start, reach))
        reach = max(reach, end)
    return total
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-memory-footprint", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = zeros(100, 50)
assert_equal((_x.element_size(), _x.nbytes), (4, 20_000), "a (100, 50) float32: element_size(), nbytes")
assert_equal(memory_footprint(_x), 20_000, "memory_footprint(x)")
assert_equal(memory_footprint(_x, _x.T, _x[::2], _x[0].expand(7, 50)), 20_000, "x and three views of it")
assert_equal(memory_footprint(_x, _x.T.contiguous()), 40_000, "x and a copy: two storages")
assert_equal(memory_footprint(_x[0, :3]), 20_000, "a 3-element slice keeps the whole storage alive")
assert_equal(memory_footprint(_x[0, :3].clone()), 12, "a clone of the slice holds only its 3 floats")
assert_equal(memory_footprint(), 0, "no tensors, no bytes")
_y = zeros(10, dtype=float64)
assert_equal(memory_footprint(_y, _x, _y[2:]), 20_080, "two storages of different dtypes, one with a view")
_a = np.zeros(1000, np.float32)
_wrap = Tensor._from_array  # what tinytorch.from_numpy does: a tensor over the array's own memory
assert_equal(memory_footprint(_wrap(_a), _wrap(_a)), 4_000,
             "from_numpy(a) twice: two storage objects over the same 4,000 bytes")
assert_equal(memory_footprint(_wrap(_a[500:]), _wrap(_a), _wrap(_a[:100])), 4_000,
             "storages over overlapping parts of one array: each byte once")
assert_equal(memory_footprint(_wrap(_a[:100]), _wrap(_a[900:])), 800, "two disjoint parts of one array")
print("✓ memory_footprint(x, x.T, x[::2]) =", memory_footprint(_x, _x.T, _x[::2]), "bytes")

# %% [markdown]
# **Predict, then measure.** `big = zeros(1000, 1000)` is a float32 matrix. Before running
# the next cell, write down two numbers: how many bytes do `big.T`, `big[::10]` and
# `big[0].expand(500, 1000)` add to `memory_footprint(big)`, together? And how many bytes
# does the 10-element slice `big[0, :10]` keep alive on its own? (Your predictions are not
# graded; leave `None` if you would rather just look.)

# %%
predicted_view_bytes = None   # your number: bytes the three views add
predicted_slice_bytes = None  # your number: memory_footprint(big[0, :10])

# %%
def report(what, measured, predicted, unit=""):
    """Print a measurement next to the prediction (or say there was none)."""
    guess = "no prediction" if predicted is None else f"you predicted {predicted:,}{unit}"
    print(f"{what}: measured {measured:,}{unit} ({guess})")


big = zeros(1000, 1000)
report("bytes the three views add", memory_footprint(big, big.T, big[::10], big[0].expand(500, 1000))
       - memory_footprint(big), predicted_view_bytes, " B")
report("bytes a 10-element slice keeps alive", memory_footprint(big[0, :10]), predicted_slice_bytes, " B")
print(f"(big[0, :10].nbytes is {big[0, :10].nbytes} B: what the slice sees, not what it holds)")

# %% [markdown]
# ### Time: a view versus a copy
#
# A view only creates a small Python object, whatever the size; a copy must read and
# write every byte. Predict first: for a 2048×2048 float32 matrix (16 MiB), how many times
# longer does `m.T.contiguous()` (a copy) take than `m.T` (a view)?

# %%
predicted_copy_over_view = None  # your number: time of the copy / time of the view at n = 2048

# %% [markdown]
# Now measure, for growing square float32 matrices. `median_time` repeats each
# measurement and takes the **median** (robust to the occasional hiccup of the operating
# system). These are measurements on *your* machine: the numbers will differ elsewhere
# (memory bandwidth, caches, how busy the machine is), the shape of the curves should not.

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up

sizes = [64, 256, 1024, 2048]
view_times, copy_times = [], []
for n in sizes:
    m = rand(n, n)
    view_times.append(median_time(lambda: m.T))
    copy_times.append(median_time(lambda: m.T.contiguous()))
    print(f"n={n:5d}  {m.nbytes / 2**20:7.2f} MiB   view {view_times[-1] * 1e6:8.1f} µs   "
          f"copy {copy_times[-1] * 1e6:10.1f} µs   ratio {copy_times[-1] / view_times[-1]:8.1f}x")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.loglog(sizes, np.array(view_times) * 1e6, "o-", label="view: m.T")
ax.loglog(sizes, np.array(copy_times) * 1e6, "s-", label="copy: m.T.contiguous()")
ax.set_xlabel("n (matrix is n × n, float32)")
ax.set_ylabel("median time (µs)")
ax.set_title("A view's cost is constant; a copy's grows with n²")
ax.legend()
fig.tight_layout()
plt.show()
report("copy / view at n = 2048", round(copy_times[-1] / view_times[-1]), predicted_copy_over_view, "x")

# %% [markdown]
# Expect the view's time to stay flat (it never touches the data) and the copy's to grow
# with the number of bytes: once n is large enough that fixed overheads no longer dominate,
# in proportion to the bytes, ×4 per doubling of n, *as long as the matrix fits in a cache*.
# A transposed copy reads with a stride of n elements, so once the matrix falls out of a
# cache level every read costs a whole cache line and the curve jumps by far more than ×4
# before settling again. Where it bends depends on the machine's caches and on what else
# it is doing.
# The same holds for memory: the view added nothing (`memory_footprint(m, m.T)`).
#
# One more cost worth knowing: **how** a tensor's elements sit in memory changes the speed
# of reading them, even for the same number of elements. The CPU fetches memory in cache
# lines (64 bytes, 16 float32s, on most machines). Reading a contiguous block uses every
# float of every line it loads; reading every 16th column (`m[:, ::16]`, stride 16) uses
# one float per line, so up to 16 times more bytes move through the memory system. How much
# slower that is depends on the hardware (prefetchers, cache sizes) and on numpy's loops.
# Both views below hold 262,144 elements. Predict the ratio, then measure the sum of each.

# %%
predicted_stride16_over_block = None  # your number: time of the stride-16 sum / the contiguous sum

# %%
m = rand(2048, 2048)
block, strided = m[:128], m[:, ::16]
check(block.numel() == strided.numel(), "both views hold the same number of elements")
t_block = median_time(lambda: block.sum(), repeats=9)
t_strided = median_time(lambda: strided.sum(), repeats=9)
print(f"sum of a contiguous block: {t_block * 1e3:.3f} ms; same number of elements with "
      f"stride 16: {t_strided * 1e3:.3f} ms")
report("stride-16 sum / contiguous sum", round(t_strided / t_block, 1), predicted_stride16_over_block, "x")
print("memory_footprint(m, m.T) =", memory_footprint(m, m.T), "bytes; m.nbytes =", m.nbytes)

# %% [markdown]
# ### Time: your loops against numpy's
#
# Your `strided_map` and numpy compute the same thing on the same view. numpy's loop is
# compiled C that runs over the strided memory with no per-element interpreter work, and
# uses SIMD instructions where the layout allows; yours runs a few Python-level steps per
# element (an ordinal turned into an index, two address computations, a call of `fn`).
# Predict: on a permuted 64×64×8 float32 view (32,768 elements), how many times slower is
# `strided_map` with `fn = -x` than `np.negative` of the same view?

# %%
predicted_loop_over_numpy = None  # your number: time of strided_map / time of np.negative

# %% [markdown]
# The ratio you measure depends on the machine: the speed of the Python interpreter (its
# version, the CPU's clock and branch predictor) sets the loop's time, while numpy's time
# depends on the memory system and on the SIMD width. Expect the pure-Python loop to be
# thousands of times slower, often tens of thousands; this is why tinytorch hands arithmetic
# to numpy, and why module 17 compiles these same loops with numba.

# %%
_cube = rand(64, 64, 8).permute(2, 0, 1)  # a non-contiguous view: strides (1, 512, 8)
_out = np.empty(_cube.numel(), dtype=np.float32)
_args = (_out, _cube.shape, contiguous_strides(_cube.shape), 0,
         _cube._storage, _cube.shape, _cube._strides, _cube._offset)
t_loop = median_time(lambda: strided_map(lambda v: -v, *_args), repeats=3)
t_numpy = median_time(lambda: np.negative(_cube.numpy()), repeats=9)
assert_equal(_out.reshape(_cube.shape), np.negative(_cube.numpy()), "the loop and numpy agree on the view")
print(f"strided_map: {t_loop * 1e3:.1f} ms   np.negative: {t_numpy * 1e3:.3f} ms   "
      f"({_cube.numel() / t_loop / 1e6:.2f} million elements per second in Python)")
report("strided_map / numpy", round(t_loop / t_numpy), predicted_loop_over_numpy, "x")


# %% [markdown]
# ## 18. How PyTorch does it
#
# Everything you built has a direct counterpart in PyTorch:
#
# - A `torch.Tensor` is a view (`TensorImpl`: sizes, strides, storage offset) of a
#   `Storage` (a flat buffer with a dtype and a device). `t.stride()` is in elements,
#   `t.storage_offset()` is our `_offset`, `t.is_contiguous()` applies the same rule as
#   yours (size-1 dims ignored), and `t.untyped_storage().data_ptr()` tells whether two
#   tensors share memory.
# - `transpose`, `permute`, `expand` (stride 0), `view`, basic indexing and `narrow` are
#   views; `reshape` is a view when it can be; advanced indexing copies; `contiguous()`
#   copies only when needed. PyTorch's `view` also works on a non-contiguous tensor whenever
#   the new shape can be expressed with strides (splitting one dimension of a transposed
#   tensor, say); tinytorch's does too, through your `_view_strides` of section 7.
# - **The loops.** PyTorch's CPU kernels run elementwise ops and reductions through
#   `TensorIterator`, the C++ counterpart of your `strided_map`/`strided_zip`/
#   `strided_reduce`: it broadcasts the operands' strides (stride 0, as yours do), then
#   walks the output's indices and computes each operand's position from its own strides
#   and offset. It adds what makes it fast: merging dimensions that are contiguous with
#   each other into one, reordering dimensions so the innermost loop has the smallest
#   stride, SIMD inner loops and threads.
# - **The dispatcher.** Calling `torch.add(a, b)` goes through PyTorch's dispatcher, which
#   looks at *dispatch keys* on the inputs (Autograd, CPU, CUDA, ...) and runs a chain of
#   kernels. The **Autograd** kernel records a node (`AddBackward0`, the `grad_fn`, saving
#   what backward needs) and then re-dispatches to the **CPU** or **CUDA** kernel that does
#   the arithmetic. Our `apply` is that chain in one function: record (when needed), and
#   call a numpy "kernel". `torch.set_grad_enabled(False)`/`torch.no_grad()` switch off the
#   Autograd step exactly like our `set_grad_enabled`.
#
# If PyTorch is installed, compare directly (this cell is skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    tx = torch.arange(6.0).reshape(2, 3)
    ours = arange(6.0).reshape(2, 3)
    print("strides:       torch", tx.stride(), tx.t().stride(), "| tinytorch", ours.stride(), ours.T.stride())
    print("is_contiguous: torch", tx.t().is_contiguous(), "| tinytorch", ours.T.is_contiguous())
    print("offset of x[1, 1:]: torch", tx[1, 1:].storage_offset(), "| tinytorch", ours[1, 1:].storage_offset())
    print("expand strides: torch", torch.ones(3).expand(4, 3).stride(), "| tinytorch", ones(3).expand(4, 3).stride())
    print("same storage after .t():", tx.t().untyped_storage().data_ptr() == tx.untyped_storage().data_ptr())
    tw = torch.tensor([1.0, 2.0], requires_grad=True)
    w = tensor([1.0, 2.0], requires_grad=True)
    print("grad_fn:       torch", (tw * 2).grad_fn.name(), "| tinytorch", (w * 2).grad_fn.name())

# %% [markdown]
# ## 19. Recap
#
# - A tensor is **storage + shape + strides + offset**, and the address formula you derived
#   finds any element from those four fields alone. You wrote it, its inverse (an ordinal in
#   row-major order back to a multi-index), `contiguous_strides` and the constructor's layout.
# - You wrote the **loops underneath** every elementwise op and reduction, `strided_map`,
#   `strided_zip` (broadcasting by stride 0) and `strided_reduce`, for any layout; numpy
#   runs the same loops in C, and module 17 compiles yours with numba.
# - **Views** change only the metadata: `transpose`/`permute` reorder strides, `view`/
#   `reshape` reuse row-major order (copying only when the tensor is not contiguous),
#   `squeeze`/`unsqueeze` drop or add size-1 dims, `expand` uses **stride 0**, and basic
#   indexing moves the offset and scales strides. Advanced indexing copies.
# - **Broadcasting** aligns shapes on the right and needs equal sizes or a 1; your error
#   message names both shapes, the dimension and the rule.
# - Arithmetic and reductions delegate to numpy (fast, no Python loops), with PyTorch's
#   dtype promotion and `dim`/`keepdim` handling; in-place ops are refused when autograd or
#   overlapping memory would make them wrong.
# - Every op goes through **`apply`**, which records a `Node` (`op`, `inputs`, `attrs`)
#   when an input requires grad. In module 06 you will give each op name a backward rule
#   and write the engine that walks these nodes.
# - **Memory**: views are free, copies cost `nbytes`, and a slice can keep a big storage
#   alive; `memory_footprint` counts what is really held.
#
# Run `tito test module 01` to check your work against the full test suite.

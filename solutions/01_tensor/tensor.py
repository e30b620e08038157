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
# - compute **contiguous strides** and turn `transpose`, `permute`, `reshape`, `squeeze`,
#   `unsqueeze` and `expand` into **zero-copy views** by changing only that metadata;
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
# Cells marked `#| export` become the file `tinytorch/_tensor.py` when you run
# `tito export 01` (or `tito test module 01`, which exports and then tests). Cells with
# `# YOUR CODE HERE` are yours to fill in. After each of them comes a **check** cell: run
# it, and it either prints a ✓ or tells you what is wrong. Provided code (the parts that are
# plumbing, not ideas) is already written; read it, it is part of the lesson.

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
# and element $(i_0, i_1, \dots, i_{n-1})$ lives at
#
# $$\text{position}(i_0, \dots, i_{n-1}) = \text{offset} + \sum_{k=0}^{n-1} i_k \cdot \text{stride}_k .$$
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


def draw_layout(ax, title, shape, strides, offset=0, n_storage=6):
    """Draw a 2-D tensor (left) over a flat storage (right), arrows for (row, col) -> position."""
    colors = plt.cm.tab10(np.arange(n_storage) % 10)
    rows, cols = shape
    x_store = cols + 2.0
    for k in range(n_storage):  # the flat storage, one box per element
        ax.add_patch(Rectangle((x_store + k, -rows / 2 - 0.5), 1, 1, facecolor=colors[k],
                               edgecolor="black", alpha=0.45))
        ax.text(x_store + k + 0.5, -rows / 2, str(k), ha="center", va="center", fontsize=10)
    for r in range(rows):
        for c in range(cols):
            pos = offset + r * strides[0] + c * strides[1]
            ax.add_patch(Rectangle((c, -r - 1), 1, 1, facecolor=colors[pos],
                                   edgecolor="black", alpha=0.45))
            ax.text(c + 0.5, -r - 0.5, f"[{r},{c}]\n→ {pos}", ha="center", va="center", fontsize=8)
            ax.annotate("", xy=(x_store + pos + 0.5, -rows / 2 + 0.5), xytext=(c + 0.9, -r - 0.5),
                        arrowprops=dict(arrowstyle="->", color=colors[pos], alpha=0.8,
                                        connectionstyle="arc3,rad=-0.25"))
    ax.text(0, 0.4, title, fontsize=10, ha="left")
    ax.text(x_store, -rows / 2 - 1.0, "storage (flat memory)", fontsize=9)
    ax.set_xlim(-0.5, x_store + n_storage + 0.5)
    ax.set_ylim(-rows - 0.7, 1.0)
    ax.set_aspect("equal")
    ax.axis("off")


fig, axes = plt.subplots(2, 1, figsize=(9, 6))
draw_layout(axes[0], "x: shape (2, 3), strides (3, 1), offset 0", (2, 3), (3, 1))
draw_layout(axes[1], "x.T: shape (3, 2), strides (1, 3), offset 0 — same storage, no copy", (3, 2), (1, 3))
fig.tight_layout()
plt.show()

# %% [markdown]
# ### The dtypes tinytorch supports
#
# Every element of a storage has the same type. We support four, all numpy dtypes under
# the hood, with PyTorch's defaults:
#
# - `float32` — the default for real numbers (4 bytes: half the memory and twice the
#   throughput of float64, and plenty of precision for training);
# - `float64` — used by module 06's gradient checks, where float32 rounding would hide bugs;
# - `int64` — Python ints, counts, indices (class labels, token ids);
# - `bool` — results of comparisons and masks.
#
# The cell below starts the package file: imports, the dtype constants and `__all__`, the
# list of public names that `import tinytorch` re-exports.

# %%
#| export
import math
from collections import namedtuple

import numpy as np

__all__ = [
    "Tensor", "Node", "apply", "is_grad_enabled", "set_grad_enabled",
    "float32", "float64", "int64", "bool_",
    "tensor", "zeros", "ones", "full", "zeros_like", "ones_like", "arange", "eye",
    "manual_seed", "rand", "randn", "randint",
    "broadcast_shapes", "broadcast_to", "transpose", "permute", "reshape", "flatten",
    "squeeze", "unsqueeze", "where", "matmul", "cat", "stack", "memory_footprint",
]

float32 = np.dtype("float32")
float64 = np.dtype("float64")
int64 = np.dtype("int64")
bool_ = np.dtype(bool)
_DTYPES = (float32, float64, int64, bool_)

# %% [markdown]
# ## 2. Contiguous strides
#
# A freshly created tensor is stored row-major ("contiguous"): the last dimension moves
# fastest. Its strides follow from the shape alone. Walk the dimensions from the last to the
# first: the last stride is 1, and each earlier stride is the later stride times the later
# size. For shape `(2, 3, 4)`:
#
# $$\text{strides} = (3 \cdot 4,\; 4,\; 1) = (12, 4, 1).$$
#
# Two corner cases: a 0-d tensor (a scalar, shape `()`) has strides `()`, and a dimension of
# size 0 is treated as size 1 when multiplying (PyTorch does the same), so that strides stay
# meaningful for empty tensors: `(2, 0, 3)` has strides `(3, 3, 1)`.

# %% nbgrader={"grade": false, "grade_id": "contiguous-strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def contiguous_strides(shape):
    """Row-major strides, in elements, for a tensor of `shape`.

    Why: a new tensor stores its elements in C order; these strides are what let us find
    element (i, j, ...) in the flat storage, and what every view op starts from.
    """
    # Hints:
    # - walk `reversed(shape)` keeping a running product that starts at 1;
    # - multiply by max(size, 1) so that a size-0 dimension does not zero the strides;
    # - return a tuple of Python ints (`()` for a 0-d shape).
    ### BEGIN SOLUTION
    strides = []
    step = 1
    for size in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-contiguous-strides", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert contiguous_strides((2, 3)) == (3, 1), contiguous_strides((2, 3))
assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
assert contiguous_strides((5,)) == (1,)
assert contiguous_strides(()) == ()
assert contiguous_strides((4, 1, 3)) == (3, 3, 1)
assert contiguous_strides((2, 0, 3)) == (3, 3, 1), "a size-0 dim counts as 1 in the running product"
# numpy agrees (it counts bytes, so divide by the element size):
_a = np.zeros((3, 5, 7), dtype=np.float32)
assert contiguous_strides(_a.shape) == tuple(s // _a.itemsize for s in _a.strides)
print("✓ contiguous_strides")

# %% [markdown]
# ## 3. The Tensor class
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
# memory with the storage: writing into it writes into the tensor.
#
# **Converting input data.** `tensor([[1, 2], [3, 4]])` must choose a dtype. The provided
# `_as_array` applies PyTorch's rules: Python floats become float32, Python ints int64,
# Python bools bool; a numpy array keeps float64/float32/int64/bool, other numpy floats
# become float32 and other integers int64. It always returns a *fresh* C-contiguous array
# (a tensor never aliases the list or array you gave it, just like `torch.tensor`).
#
# **Your part: `_init_storage`.** Given that fresh C-contiguous array, set up the four
# layout fields. The storage is the array flattened (for a C-contiguous array `reshape(-1)`
# is free: it is a view of the same memory), the shape is the array's shape, the strides are
# contiguous and the offset is 0. Both `Tensor(...)` and every operation that computes a
# new result (`apply`, below) come through `_init_storage`.
#
# The rest of the class is a thin façade: most methods call a module-level function you
# will write later in this notebook (`x.transpose(0, 1)` calls `transpose(x, 0, 1)`, as in
# PyTorch where `torch.transpose` and `Tensor.transpose` are the same op). That is why
# the class can be written in one cell now, while its views, indexing and arithmetic are
# filled in step by step below. Read through it once; the comments say why each piece is
# there.

# %% nbgrader={"grade": false, "grade_id": "tensor-storage", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_dtype(dtype):
    """Turn a dtype-like (np.float32, "float32", float, tinytorch.float32) into one of ours."""
    dt = np.dtype(dtype)
    if dt not in _DTYPES:
        raise TypeError(f"tinytorch supports the dtypes float32, float64, int64 and bool, not {dt}")
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
    return np.ndarray(shape, dtype=storage.dtype, buffer=storage, offset=offset * itemsize,
                      strides=tuple(s * itemsize for s in strides))


_ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


class Tensor:
    """An n-dimensional array: a flat numpy storage seen through shape, strides and offset.

    Why: separating *layout* (shape/strides/offset) from *memory* (storage) is what makes
    views (transpose, slicing, broadcasting) free, exactly as in PyTorch.
    """

    # numpy must not try to handle `ndarray + Tensor` itself: with this, it returns
    # NotImplemented and Python calls our reflected operator (Tensor.__radd__ ...).
    __array_ufunc__ = None

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

        Sets `_storage` (1-D, shares arr's memory), `shape`, `_strides`, `_offset`.
        """
        # Hints:
        # - `arr.reshape(-1)` is a 1-D view of arr's memory (no copy: arr is C-contiguous);
        # - the shape is `tuple(arr.shape)`; the strides come from `contiguous_strides`;
        # - a brand-new tensor starts at the beginning of its storage.
        ### BEGIN SOLUTION
        self._storage = arr.reshape(-1)
        self.shape = tuple(int(s) for s in arr.shape)
        self._strides = contiguous_strides(self.shape)
        self._offset = 0
        ### END SOLUTION

    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def _from_array(arr):
        """Wrap a freshly computed numpy array (no extra copy when it is already C-contiguous)."""
        arr = np.asarray(arr)
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
        shape = tuple(int(s) for s in shape)
        strides = tuple(int(s) for s in strides)
        offset = int(offset)
        if len(shape) != len(strides):
            raise RuntimeError(f"layout error: shape {shape} and strides {strides} differ in length")
        if all(n > 0 for n in shape):
            lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
            hi = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
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

    __hash__ = object.__hash__  # __eq__ is elementwise, so restore identity hashing

    # ------------------------------------------------------------------ layout properties
    @property
    def dtype(self):
        """The element type (a numpy dtype: float32, float64, int64 or bool)."""
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

    @property
    def device(self):
        """Where the data lives. Always "cpu" here (numpy storage)."""
        return "cpu"

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

    # ------------------------------------------------------------------ autograd fields
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

    def backward(self, gradient=None, retain_graph=False):
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
        return _backward(self, gradient, retain_graph=retain_graph)

    # ------------------------------------------------------------------ Python conversions
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
            body = np.array2string(arr.reshape(1), separator=", ")[1:-1]
        else:
            body = np.array2string(arr, separator=", ", prefix="tensor(")
        extras = []
        if self.numel() == 0 and self.ndim != 1:
            extras.append(f"size={self.shape}")
        if self.dtype == float64:  # float32, int64 and bool are the defaults of their kind
            extras.append("dtype=tinytorch.float64")
        if self.grad_fn is not None:
            extras.append(f"grad_fn={self.grad_fn!r}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    __str__ = __repr__

    def to(self, dtype):
        """This tensor converted to `dtype` (self when nothing changes). "cpu" is accepted."""
        if isinstance(dtype, str) and dtype in ("cpu", "cpu:0"):
            return self
        if isinstance(dtype, str) and dtype.split(":")[0] in ("cuda", "gpu", "mps"):
            raise RuntimeError(f"device {dtype!r} is not available: tinytorch tensors live in "
                               f"numpy (CPU) memory (module 17 adds a GPU backend)")
        dt = _check_dtype(dtype)
        if dt == self.dtype:
            return self
        return apply("to", lambda x, dtype: x.numpy().astype(dtype), self, dtype=dt)

    # ------------------------------------------------------------------ views (section 4-6)
    def transpose(self, dim0, dim1):
        """Swap two dimensions (a view). See transpose()."""
        return transpose(self, dim0, dim1)

    def permute(self, *dims):
        """Reorder the dimensions (a view). See permute()."""
        return permute(self, *dims)

    @property
    def T(self):
        """All dimensions reversed (a view): the matrix transpose for 2-D tensors."""
        return permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self):
        """The last two dimensions swapped (a view): a batch of transposed matrices."""
        if self.ndim < 2:
            raise ValueError(f"mT needs a tensor with at least 2 dimensions, got shape {self.shape}")
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

    # ------------------------------------------------------------------ arithmetic (section 8)
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

    def clamp(self, min=None, max=None):
        """Limit values to [min, max] (either bound may be None). ReLU is clamp(min=0)."""
        return _clamp(self, min, max)

    def masked_fill(self, mask, value):
        """A copy with `value` wherever the bool `mask` (broadcast to self) is True."""
        return _masked_fill(self, mask, value)

    # ------------------------------------------------------------------ in place (section 9)
    def add_(self, other, alpha=1):
        """self += alpha * other, in place."""
        return _inplace(self, np.add, other if alpha == 1 else _binary("mul", np.multiply, other, alpha))

    def sub_(self, other, alpha=1):
        """self -= alpha * other, in place."""
        return _inplace(self, np.subtract, other if alpha == 1 else _binary("mul", np.multiply, other, alpha))

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

    # ------------------------------------------------------------------ reductions (section 10)
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

    # ------------------------------------------------------------------ matmul (section 11)
    def matmul(self, other):
        """Matrix product with numpy semantics (1-D, 2-D, batched). See matmul()."""
        return matmul(self, other)

    def __matmul__(self, other):
        return matmul(self, other) if _is_operand(other) else NotImplemented

    def __rmatmul__(self, other):
        return matmul(other, self) if _is_operand(other) else NotImplemented

    # ------------------------------------------------------------------ dtype shortcuts
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


# %% nbgrader={"grade": true, "grade_id": "test-tensor-storage", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
assert _x.shape == (2, 3) and _x._strides == (3, 1) and _x._offset == 0
assert _x._storage.ndim == 1 and _x._storage.size == 6, "the storage must be flat (1-D)"
assert _x._storage.flags["C_CONTIGUOUS"]
assert _x.dtype == float32, "Python floats become float32"
np.testing.assert_array_equal(_x.numpy(), [[1, 2, 3], [4, 5, 6]])
assert Tensor([1, 2]).dtype == int64 and Tensor([True]).dtype == bool_
assert Tensor(np.zeros(2)).dtype == float64, "numpy float64 stays float64"
_s = Tensor(3.5)
assert _s.shape == () and _s._strides == () and _s.item() == 3.5
_src = np.arange(4.0)
_t = Tensor(_src)
_src[0] = 100.0
assert _t.numpy()[0] == 0.0, "a tensor must copy the data it is given"
print(_x)
print("✓ Tensor storage and layout")

# %% [markdown]
# ## 4. The one dispatch point: `apply`
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
# through `apply`, recording that is one `if` in one place: when grad mode is on and some
# input `requires_grad`, `apply` marks the output and attaches a `Node` to it as `grad_fn`.
# Module 01 records these nodes but never uses them. Module 06 will supply a backward rule
# per `op` name and an engine that walks the `grad_fn` links — without changing (or
# monkey-patching) anything in this file. So `attrs` must hold everything a backward rule
# needs: the `dims` of a permute, the `shape` of a reshape, the `dim`/`keepdim` of a
# reduction, the normalised `index` of an indexing op.
#
# Two more rules live here:
#
# - only **floating** results are recorded (an `argmax` or a comparison has no gradient);
# - a result that would alias an input's memory although the op claimed to compute
#   (a forward returned a numpy view) is copied, so compute ops never share storage.
#
# `set_grad_enabled(False)` switches recording off globally; module 06 builds the
# `no_grad()` context manager on it. This is PyTorch's design too (see section 14).
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

# %%
#| export
_grad_enabled = True


def is_grad_enabled():
    """Whether apply() currently records graph nodes."""
    return _grad_enabled


def set_grad_enabled(mode):
    """Switch graph recording on or off globally (module 06 builds no_grad() on this)."""
    global _grad_enabled
    _grad_enabled = bool(mode)


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


def apply(op, forward, *inputs, **attrs):
    """Run `forward(*inputs, **attrs)`, wrap the result, and record a Node when needed.

    Why: the one place every op passes through, so autograd can be added later (module 06)
    without touching any op.
    """
    out = forward(*inputs, **attrs)
    if isinstance(out, Tensor):  # a view op: shares storage with an input
        if any(out is x for x in inputs):
            out = out._view(out.shape, out._strides, out._offset)
    else:  # a compute op: fresh storage
        arr = np.asarray(out)
        if any(np.may_share_memory(arr, x._storage) for x in inputs):
            arr = arr.copy()
        out = Tensor._from_array(arr)
    if _grad_enabled and out.dtype.kind == "f" and any(x.requires_grad for x in inputs):
        out._requires_grad = True
        out.grad_fn = Node(op, inputs, attrs, out.numpy())
    return out


# %% [markdown]
# A quick look at the dispatcher with a made-up op (`"double"` is not a real tinytorch op;
# any name works, module 06 just would not know its backward rule):

# %%
_w = Tensor([1.0, 2.0, 3.0], requires_grad=True)
_y = apply("double", lambda x: x.numpy() * 2, _w)
print(_y, "| grad_fn.op =", _y.grad_fn.op, "| inputs are _w:", _y.grad_fn.inputs[0] is _w)
set_grad_enabled(False)
assert apply("double", lambda x: x.numpy() * 2, _w).grad_fn is None
set_grad_enabled(True)
assert apply("double", lambda x: x.numpy() * 2, Tensor([1.0])).grad_fn is None  # no input needs grad

# %% [markdown]
# ## 5. Views: transpose and permute
#
# A view op computes a new `(shape, strides, offset)` over the *same* storage and calls
# `t._view(shape, strides, offset)`. Nothing is copied, so a view costs the same for a
# 2×2 matrix and a 10,000×10,000 one, and writing into a view writes into the original.
#
# - **transpose(dim0, dim1)** swaps two entries of the shape *and* the same two entries of
#   the strides. Check with the picture in section 1: swapping `(2, 3)`/`(3, 1)` gives
#   `(3, 2)`/`(1, 3)`, and element `[j, i]` lands at `j·1 + i·3`, which is where `X[i, j]`
#   lives.
# - **permute(*dims)** generalises this: output dimension `k` is input dimension
#   `dims[k]`, so the new shape is `[shape[d] for d in dims]` and the new strides are
#   `[strides[d] for d in dims]`.
#
# The offset never changes: element `[0, 0, ...]` is still the same element.
#
# The provided wrappers check and normalise the arguments (negative dims count from the
# end, as in Python lists), then call `apply` with your forward function. Normalising
# first matters: the recorded `attrs` are then unambiguous for module 06.

# %%
#| export
def _wrap_dim(dim, ndim):
    """Turn a possibly negative dim into 0..ndim-1, with PyTorch's error when out of range."""
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
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = a.item()
        if not isinstance(a, (int, np.integer)) or isinstance(a, (bool, np.bool_)):
            raise TypeError(f"sizes and dims must be ints, got {a!r}")
        out.append(int(a))
    return tuple(out)


# %% nbgrader={"grade": false, "grade_id": "transpose-permute", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def transpose(input, dim0, dim1):
    """Swap dimensions dim0 and dim1: a zero-copy view (PyTorch's torch.transpose)."""
    d0, d1 = _wrap_dim(dim0, input.ndim), _wrap_dim(dim1, input.ndim)
    if input.ndim == 0:
        return apply("transpose", lambda x, dim0, dim1: x._view((), (), x._offset), input, dim0=0, dim1=0)
    return apply("transpose", _transpose_view, input, dim0=d0, dim1=d1)


def _transpose_view(t, dim0, dim1):
    """Forward of transpose: the same storage with two dims of shape and strides swapped."""
    # Hints: copy t.shape and t._strides into lists, swap positions dim0 and dim1 in both,
    # and return t._view(new_shape, new_strides, t._offset).
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
        raise ValueError(f"permute: dims {dims} must be a permutation of 0..{input.ndim - 1} "
                         f"for a tensor of shape {input.shape}")
    return apply("permute", _permute_view, input, dims=dims)


def _permute_view(t, dims):
    """Forward of permute: shape and strides reordered by `dims`, same storage and offset."""
    # Hint: new_shape[k] = t.shape[dims[k]], and the same for the strides.
    ### BEGIN SOLUTION
    shape = tuple(t.shape[d] for d in dims)
    strides = tuple(t._strides[d] for d in dims)
    return t._view(shape, strides, t._offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-transpose-permute", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_x = Tensor(np.arange(6.0).reshape(2, 3))
_xt = _x.transpose(0, 1)
assert _xt.shape == (3, 2) and _xt.stride() == (1, 3), (_xt.shape, _xt.stride())
assert _xt._storage is _x._storage, "a view must share storage"
np.testing.assert_array_equal(_xt.numpy(), np.arange(6.0).reshape(2, 3).T)
_xt.numpy()[2, 1] = 50.0  # writing through the view ...
assert _x.numpy()[1, 2] == 50.0  # ... shows in the original
_y = Tensor(np.arange(24).reshape(2, 3, 4))
_p = _y.permute(2, 0, 1)
assert _p.shape == (4, 2, 3) and _p.stride() == (1, 12, 4)
np.testing.assert_array_equal(_p.numpy(), np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1))
assert _y.T.shape == (4, 3, 2) and _y.T.stride() == (1, 4, 12)
assert _y.mT.shape == (2, 4, 3) and _y.transpose(-1, -2).stride() == (12, 1, 4)
print("✓ transpose, permute, T, mT")

# %% [markdown]
# ## 6. Contiguity, `view` and `reshape`
#
# After a transpose the elements are no longer in row-major order in memory. A tensor is
# **contiguous** when its strides are exactly the row-major strides of its shape — with one
# subtlety: a dimension of size 1 is never stepped along, so its stride does not matter
# (PyTorch ignores it too: a `(3, 1)` tensor with strides `(1, 1)` is contiguous). A tensor
# with no elements is trivially contiguous.
#
# **Reshaping** reinterprets the elements in row-major order with a new shape. If the
# tensor is contiguous, the storage already *is* that order, so a reshape is just new
# contiguous strides at the same offset: a view. Otherwise the elements have to be gathered
# into a new buffer first: a copy.
#
# - `view(*shape)` never copies: it raises if the tensor is not contiguous (PyTorch's `view`
#   also works for some non-contiguous layouts; ours keeps the rule simple).
# - `reshape(*shape)` returns a view when it can and a copy otherwise — convenient, but you
#   cannot rely on it sharing memory.
# - One size may be `-1`: it is inferred from the number of elements (`x.view(-1)`,
#   `x.reshape(batch, -1)`).
#
# You write four small functions: `_is_contiguous(shape, strides)`, `_infer_shape(shape,
# numel)` (resolve the `-1` and check the element count), and the two forwards.

# %% nbgrader={"grade": false, "grade_id": "view-reshape", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _is_contiguous(shape, strides):
    """True if a layout is row-major without gaps (size-1 dims ignored, empty is contiguous)."""
    # Hints: if any size is 0, return True. Otherwise walk the dims from last to first with an
    # `expected` stride starting at 1; skip size-1 dims; every other dim must have
    # stride == expected, after which expected *= size.
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
    """Resolve at most one -1 in `shape` so that the product equals `numel`."""
    # Hints: count the -1s (more than one: ValueError). Multiply the known sizes. With a -1,
    # it becomes numel // known (an error when known is 0 or does not divide numel). Without,
    # the product must equal numel. Error messages should name the shape and numel.
    ### BEGIN SOLUTION
    shape = tuple(shape)
    if sum(1 for s in shape if s == -1) > 1:
        raise ValueError(f"shape {shape}: only one dimension can be inferred (-1)")
    if any(s < -1 for s in shape):
        raise ValueError(f"shape {shape}: invalid negative size")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known != 0:
            raise ValueError(f"shape {shape} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ValueError(f"shape {shape} is invalid for input of size {numel}")
    return shape
    ### END SOLUTION


def _view_forward(t, shape):
    """Forward of view: contiguous strides for `shape` at the same offset; never a copy."""
    # Hint: if not t.is_contiguous(), raise RuntimeError telling the user to call
    # .contiguous() first or to use .reshape(); else return a _view.
    ### BEGIN SOLUTION
    if not t.is_contiguous():
        raise RuntimeError(
            f"view(): the tensor (shape {t.shape}, strides {t._strides}) is not contiguous, so "
            f"its elements are not in row-major order in memory and no strides can describe "
            f"shape {tuple(shape)}. Call .contiguous() first, or use .reshape() (which copies).")
    return t._view(shape, contiguous_strides(shape), t._offset)
    ### END SOLUTION


def _reshape_forward(t, shape):
    """Forward of reshape: a view when t is contiguous, else a numpy array (a copy)."""
    # Hint: a contiguous tensor reshapes like view; otherwise gather the elements with
    # np.ascontiguousarray(t.numpy()) and reshape that numpy array (apply gives it storage).
    ### BEGIN SOLUTION
    if t.is_contiguous():
        return t._view(shape, contiguous_strides(shape), t._offset)
    return np.ascontiguousarray(t.numpy()).reshape(shape)
    ### END SOLUTION


def _view_op(input, *shape):
    """Tensor.view: resolve the shape, then dispatch."""
    shape = _infer_shape(_shape_arg(shape), input.numel())
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
        raise ValueError(f"flatten: start_dim ({start_dim}) must not come after end_dim ({end_dim})")
    shape = input.shape[:s] + (math.prod(input.shape[s:e + 1]),) + input.shape[e + 1:]
    return reshape(input, shape)


# %% nbgrader={"grade": true, "grade_id": "test-view-reshape", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert _is_contiguous((2, 3), (3, 1)) and not _is_contiguous((3, 2), (1, 3))
assert _is_contiguous((3, 1), (1, 1)), "size-1 dims do not count"
assert _is_contiguous((0, 3), (7, 7)) and _is_contiguous((), ())
assert _infer_shape((2, -1), 6) == (2, 3) and _infer_shape((6,), 6) == (6,)
for _bad in [((4, -1), 6), ((-1, -1), 6), ((5,), 6)]:
    try:
        _infer_shape(*_bad)
        raise AssertionError(f"_infer_shape{_bad} should raise ValueError")
    except ValueError:
        pass
_x = Tensor(np.arange(12.0))
_v = _x.view(3, -1)
assert _v.shape == (3, 4) and _v.stride() == (4, 1) and _v._storage is _x._storage
_xt = _x.view(3, 4).T
assert not _xt.is_contiguous()
try:
    _xt.view(12)
    raise AssertionError("view of a non-contiguous tensor must raise")
except RuntimeError as e:
    assert "contiguous" in str(e)
_r = _xt.reshape(12)
np.testing.assert_array_equal(_r.numpy(), np.arange(12.0).reshape(3, 4).T.reshape(12))
assert _r._storage is not _x._storage, "reshape of a non-contiguous tensor copies"
assert _x.reshape(2, 6)._storage is _x._storage, "reshape of a contiguous tensor is a view"
_c = _xt.contiguous()
assert _c.is_contiguous() and _c.stride() == (3, 1) and _c._storage is not _x._storage
assert _x.contiguous() is _x
assert Tensor(np.zeros((2, 3, 4))).flatten(1).shape == (2, 12)
print("✓ contiguity, view, reshape, flatten")

# %% [markdown]
# ## 7. squeeze and unsqueeze
#
# A dimension of size 1 holds no information about layout, so it can be removed or added
# for free:
#
# - `squeeze(dim=None)` drops size-1 dimensions (all of them, or only the given one(s);
#   PyTorch quietly keeps a named dim whose size is not 1, and so do we). The wrapper works
#   out *which* dims to drop and records them as `dims`.
# - `unsqueeze(dim)` inserts a size-1 dimension so that the result has it at position
#   `dim` (`dim` may be `-1`: at the end). Its stride is never used for stepping; PyTorch
#   gives it `stride[dim] * shape[dim]` (or 1 at the end), which keeps contiguous tensors
#   contiguous, and we do the same.
#
# `unsqueeze` is the everyday tool for broadcasting: a `(3,)` bias becomes `(3, 1)` to be
# added down the rows.

# %% nbgrader={"grade": false, "grade_id": "squeeze-unsqueeze", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def squeeze(input, dim=None):
    """Drop size-1 dimensions (all, or those in `dim`): a zero-copy view."""
    if dim is None:
        dims = tuple(d for d, n in enumerate(input.shape) if n == 1)
    else:
        wanted = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        dims = tuple(sorted({_wrap_dim(d, input.ndim) for d in wanted if input.ndim > 0}))
        dims = tuple(d for d in dims if input.shape[d] == 1)
    return apply("squeeze", _squeeze_view, input, dims=dims)


def _squeeze_view(t, dims):
    """Forward of squeeze: shape and strides without the positions listed in `dims`."""
    # Hint: keep (size, stride) pairs whose index is not in dims.
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
    """Forward of unsqueeze: insert size 1 at `dim`, with stride strides[dim]*shape[dim]
    (or 1 when dim is the new last position)."""
    ### BEGIN SOLUTION
    stride = t._strides[dim] * t.shape[dim] if dim < t.ndim else 1
    shape = t.shape[:dim] + (1,) + t.shape[dim:]
    strides = t._strides[:dim] + (stride,) + t._strides[dim:]
    return t._view(shape, strides, t._offset)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-squeeze-unsqueeze", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = Tensor(np.arange(6.0).reshape(1, 2, 1, 3))
assert _x.squeeze().shape == (2, 3) and _x.squeeze().stride() == (3, 1)
assert _x.squeeze(0).shape == (2, 1, 3) and _x.squeeze(-2).shape == (1, 2, 3)
assert _x.squeeze(1).shape == (1, 2, 1, 3), "squeezing a dim whose size is not 1 changes nothing"
assert _x.squeeze()._storage is _x._storage
_v = Tensor([1.0, 2.0, 3.0])
assert _v.unsqueeze(0).shape == (1, 3) and _v.unsqueeze(-1).shape == (3, 1)
assert _v.unsqueeze(1).stride() == (1, 1) and _v.unsqueeze(0).stride() == (3, 1)
assert _v.unsqueeze(-1).is_contiguous()
np.testing.assert_array_equal(_v.unsqueeze(1).numpy(), [[1.0], [2.0], [3.0]])
print("✓ squeeze, unsqueeze")

# %% [markdown]
# ## 8. Broadcasting
#
# Adding a bias of shape `(3,)` to a batch of shape `(64, 3)` should "just work": the bias
# is reused for every row. **Broadcasting** is the rule that says when shapes are
# compatible and what the result shape is:
#
# 1. Align the shapes on the **right** (prepend 1s to the shorter one).
# 2. In each position the sizes must be **equal, or one of them must be 1**.
# 3. The result takes the larger size in each position.
#
# ```
#   (64, 3)        (2, 1, 4)        (2, 3)
#       (3,)          (3, 1)            (4,)
#   -------        ---------        ------
#   (64, 3)        (2, 3, 4)        error: 3 vs 4 in dimension -1
# ```
#
# A good error message is part of the job: a student who sees *"cannot broadcast shapes
# (2, 3) and (4,): dimension -1 has sizes 3 and 4; sizes must be equal or one of them must
# be 1"* knows exactly which tensor to fix. Number the dimensions from the right (-1 is the
# last), since that is how the shapes are aligned. With more than two shapes, fold them
# left to right, so the message names the shape broadcast so far and the one that failed.
#
# How is broadcasting done without copying? With **stride 0**: `expand` turns a size-1
# dimension into size n by giving it stride 0, so all n positions read the same element.
# `(3,)` → `(64, 3)` is shape `(64, 3)` with strides `(0, 1)` over the original 3 numbers.
# (For arithmetic we let numpy broadcast internally, which is the same trick; `expand` gives
# the same power to any op.)

# %% nbgrader={"grade": false, "grade_id": "broadcast-shapes", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def broadcast_shapes(*shapes):
    """The shape that `shapes` broadcast to, or a ValueError naming the two shapes that clash.

    Why: every elementwise op checks this first, so shape mistakes get a clear message.
    """
    shapes = [(int(s),) if isinstance(s, (int, np.integer)) else tuple(int(n) for n in s)
              for s in shapes]
    # Hints:
    # - start from result = () and fold each shape into it;
    # - for two shapes, pad the shorter one with leading 1s to the same length, then take
    #   each pair of sizes (a, b): equal -> a; a == 1 -> b; b == 1 -> a; else raise
    #   ValueError(f"cannot broadcast shapes {result} and {shape}: dimension {d} has sizes
    #   {a} and {b}; sizes must be equal or one of them must be 1") with d negative (-1 = last).
    ### BEGIN SOLUTION
    result = ()
    for shape in shapes:
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
                raise ValueError(
                    f"cannot broadcast shapes {result} and {shape}: dimension {i - n} has sizes "
                    f"{a} and {b}; sizes must be equal or one of them must be 1")
        result = tuple(out)
    return result
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-broadcast-shapes", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert broadcast_shapes((64, 3), (3,)) == (64, 3)
assert broadcast_shapes((2, 1, 4), (3, 1)) == (2, 3, 4)
assert broadcast_shapes((), (2, 2)) == (2, 2)
assert broadcast_shapes((5,), (1,), (4, 1)) == (4, 5)
try:
    broadcast_shapes((2, 3), (4,))
    raise AssertionError("(2, 3) and (4,) must not broadcast")
except ValueError as e:
    msg = str(e)
    assert "(2, 3)" in msg and "(4,)" in msg, f"name both shapes: {msg}"
    assert "-1" in msg and "3" in msg and "4" in msg, f"name the dimension and sizes: {msg}"
print("✓ broadcast_shapes")
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
# - new **leading** dimensions (when `sizes` is longer than the shape) get stride 0 and
#   any size (but not -1: there is nothing to keep);
# - for the existing dimensions (aligned on the right), `-1` or the same size keeps size
#   and stride; a size-1 dimension can grow to any size with **stride 0**; any other change
#   is an error that names both shapes.
#
# You write the layout rule as a pure function `_expand_layout(shape, strides, sizes) ->
# (new_shape, new_strides)`; the provided `_expand` dispatches it with the resolved shape.
# `broadcast_to(t, shape)` is the module-level spelling of the same op.

# %% nbgrader={"grade": false, "grade_id": "expand", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _expand_layout(shape, strides, sizes):
    """New (shape, strides) for expanding a layout to `sizes`; ValueError if impossible."""
    # Hints: n_new = len(sizes) - len(shape) (negative: error). For i < n_new: a new leading
    # dim (size must be >= 0, stride 0). For i >= n_new compare with shape[i - n_new].
    # The error should read like: f"cannot expand shape {shape} to {sizes}: dimension {i} has
    # size {old}, which is not 1; only size-1 dimensions can be expanded (-1 keeps a size)".
    ### BEGIN SOLUTION
    shape, sizes = tuple(shape), tuple(sizes)
    n_new = len(sizes) - len(shape)
    if n_new < 0:
        raise ValueError(f"cannot expand shape {shape} to {sizes}: the target has fewer "
                         f"dimensions ({len(sizes)}) than the tensor ({len(shape)})")
    new_shape, new_strides = [], []
    for i, size in enumerate(sizes):
        if i < n_new:
            if size < 0:
                raise ValueError(f"cannot expand shape {shape} to {sizes}: the new leading "
                                 f"dimension {i} needs an explicit size, not {size}")
            new_shape.append(size)
            new_strides.append(0)
            continue
        old, stride = shape[i - n_new], strides[i - n_new]
        if size == -1 or size == old:
            new_shape.append(old)
            new_strides.append(stride)
        elif old == 1 and size >= 0:
            new_shape.append(size)
            new_strides.append(0)
        else:
            raise ValueError(f"cannot expand shape {shape} to {sizes}: dimension {i} has size "
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
assert _expand_layout((3,), (1,), (4, 3)) == ((4, 3), (0, 1))
assert _expand_layout((2, 1), (1, 1), (2, 5)) == ((2, 5), (1, 0))
assert _expand_layout((2, 1), (1, 1), (-1, 5)) == ((2, 5), (1, 0))
_b = Tensor([1.0, 2.0, 3.0])
_e = _b.expand(4, 3)
assert _e.shape == (4, 3) and _e.stride() == (0, 1) and _e._storage is _b._storage
np.testing.assert_array_equal(_e.numpy(), np.broadcast_to([1.0, 2.0, 3.0], (4, 3)))
assert broadcast_to(Tensor([[1], [2]]), (2, 3)).stride() == (1, 0)
try:
    Tensor(np.zeros((2, 3))).expand(4, 3)
    raise AssertionError("(2, 3) cannot expand to (4, 3)")
except ValueError as e:
    assert "(2, 3)" in str(e) and "(4, 3)" in str(e), str(e)
print("✓ expand")

# %% [markdown]
# ## 9. Indexing
#
# Indexing comes in two flavours, and the difference is a systems one.
#
# **Basic indexing** — ints, slices with a positive step, `None` and `...` — always picks a
# regular grid of elements, so it is a *view*. For each index item, walking the input
# dimensions left to right:
#
# - an **int** `i` (negative counts from the end) fixes that dimension: the offset grows
#   by `i * stride` and the dimension disappears;
# - a **slice** `start:stop:step` keeps the dimension: `slice.indices(size)` gives the
#   clamped `(start, stop, step)`, the new size is `len(range(start, stop, step))`, the
#   offset grows by `start * stride` (when the new size is > 0) and the stride becomes
#   `stride * step`;
# - **`None`** inserts a new dimension of size 1 (stride 0), consuming no input dimension.
#
# `x[1, ::2]` on a `(3, 4)` tensor with strides `(4, 1)`: offset `1·4 = 4`, then a slice of
# size 2 and stride 2 — shape `(2,)`, strides `(2,)`, offset 4: elements 4 and 6.
#
# A provided helper first normalises the index into a tuple with `...` expanded and one
# item per input dimension (missing trailing dims become `slice(None)`), and rejects
# negative steps (as PyTorch does: a negative stride view would complicate everything
# downstream). You write the walk.
#
# **Advanced indexing** — an index list/array/int64 tensor, or a bool mask — can pick any
# elements in any order, so no strides describe the result: it must be a **copy**. We hand
# those to numpy (`x.numpy()[index]`), which implements the full rule set; the op is still
# recorded as `"getitem"`, and the normalised index (numpy arrays instead of tensors) is kept
# in `attrs["index"]` so that module 06 can scatter gradients back with it.
#
# Writing (`x[idx] = value`) goes straight into storage through numpy, with the same
# checks as the in-place ops of section 11.

# %% nbgrader={"grade": false, "grade_id": "basic-indexing", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _is_int_index(item):
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _is_advanced(items):
    """True if any index item needs numpy's advanced indexing (so the result is a copy)."""
    return any(isinstance(i, (list, tuple, np.ndarray, Tensor, bool, np.bool_)) for i in items)


def _check_slice(item):
    if isinstance(item, slice) and item.step is not None and item.step <= 0:
        raise ValueError(f"step must be greater than zero (got slice step {item.step}); "
                         f"tinytorch, like PyTorch, has no negative-step views")


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


def _basic_index(t, index):
    """Forward of basic indexing: a view. `index` is normalised (ints, slices, None)."""
    # Hints: keep lists shape, strides and an offset starting at t._offset, and a pointer d
    # to the current input dim.
    # - None: append size 1, stride 0 (d does not move);
    # - int i: check -size <= i < size, else raise IndexError(f"index {i} is out of bounds
    #   for dimension {d} with size {size}"); wrap negatives; offset += i * stride; d += 1;
    # - slice: start, stop, step = item.indices(size); n = len(range(start, stop, step));
    #   if n > 0: offset += start * stride; append n and stride * step; d += 1.
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
            start, stop, step = item.indices(size)
            n = len(range(start, stop, step))
            if n > 0:
                offset += start * stride
            shape.append(n)
            strides.append(stride * step)
        else:
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {d} with size {size}")
            offset += (item % size) * stride
        d += 1
    return t._view(shape, strides, offset)
    ### END SOLUTION


def _getitem(t, index):
    """Tensor.__getitem__: basic indexing as a view, advanced indexing as a numpy copy."""
    items = index if isinstance(index, tuple) else (index,)
    if _is_advanced(items):
        np_index = _numpy_index(items)
        return apply("getitem", lambda x, index: np.array(x.numpy()[index], copy=True),
                     t, index=np_index)
    return apply("getitem", _basic_index, t, index=_normalize_basic_index(items, t.ndim))


def _setitem(t, index, value):
    """Tensor.__setitem__: write `value` (broadcast) into the selected elements, in place."""
    _check_writable(t)
    np_index = _numpy_index(index)
    src = value.numpy() if isinstance(value, Tensor) else value
    t.numpy()[np_index] = src


# %% nbgrader={"grade": true, "grade_id": "test-basic-indexing", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_a = np.arange(12.0).reshape(3, 4)
_x = Tensor(_a)
_r = _x[1, ::2]
assert _r.shape == (2,) and _r.stride() == (2,) and _r.storage_offset() == 4, (_r.shape, _r.stride())
np.testing.assert_array_equal(_r.numpy(), _a[1, ::2])
assert _r._storage is _x._storage, "basic indexing is a view"
for _idx in [0, -1, (1, 2), (slice(1, None), slice(None, None, 3)), (None, 1), (Ellipsis, 2),
             (slice(None), None, slice(1, 3)), (slice(10, 20),), ()]:
    np.testing.assert_array_equal(_x[_idx].numpy(), _a[_idx], err_msg=str(_idx))
try:
    _x[3]
    raise AssertionError("x[3] on a (3, 4) tensor must raise IndexError")
except IndexError as e:
    assert "3" in str(e) and "dimension 0" in str(e), str(e)
_m = _x[Tensor(_a > 5)]  # advanced (a bool mask): a copy
np.testing.assert_array_equal(_m.numpy(), _a[_a > 5])
assert _m._storage is not _x._storage
print("✓ indexing")
### BEGIN HIDDEN TESTS
_b = np.arange(60).reshape(3, 4, 5)
_y = Tensor(_b)
for _idx in [(Ellipsis, None), (1, Ellipsis, slice(None, None, 2)), (slice(None, 2), -1, slice(1, 4, 2)),
             (-3,), (None, None, 0, None), (slice(2, 1),)]:
    np.testing.assert_array_equal(_y[_idx].numpy(), _b[_idx], err_msg=str(_idx))
    assert _y[_idx]._storage is _y._storage
### END HIDDEN TESTS

# %% [markdown]
# ## 10. Elementwise arithmetic
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
# 3. **Shape check first** (yours): call `broadcast_shapes` on the two shapes *before*
#    numpy runs, so a mismatch raises our teaching message instead of numpy's
#    "operands could not be broadcast together".
#
# Comparisons (`== != < <= > >=`) go through the same path and return bool tensors; `apply`
# never records them (a bool output has no gradient). Unary functions (`exp`, `log`,
# `sqrt`, `abs`, `neg`, `clamp`) and `where(cond, a, b)` / `masked_fill` are provided.
# numpy's warnings for `log(0)` or `1/0` are silenced: like PyTorch we return `-inf`/`inf`.

# %% nbgrader={"grade": false, "grade_id": "elementwise", "locked": false, "schema_version": 3, "solution": true, "task": false}
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
    tensor_dtypes = [x.dtype for x in operands if isinstance(x, Tensor)]
    rank = max((_KINDS[d.kind] for d in tensor_dtypes), default=-1)
    if rank == 2:
        dt = float64 if any(d == float64 for d in tensor_dtypes) else float32
    else:
        dt = {1: int64, 0: bool_}.get(rank)
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


def _elementwise_forward(np_fn, a, b, dtype):
    """Forward of a binary op: check broadcasting, cast to `dtype`, let numpy compute."""
    # Hints: call broadcast_shapes(a.shape, b.shape) (its error is the user's message), take
    # a.numpy() and b.numpy(), cast each with .astype(dtype) only if its dtype differs, and
    # return np_fn(x, y).
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
    with np.errstate(all="ignore"):
        return apply(op, lambda x, y: _elementwise_forward(np_fn, x, y, dt), a, b)


def _unary(op, np_fn, t, to_float=False):
    """Dispatch a unary elementwise op (ints become float32 first when `to_float`)."""
    def forward(x):
        arr = x.numpy()
        if to_float and arr.dtype.kind != "f":
            arr = arr.astype(float32)
        return np_fn(arr)
    with np.errstate(all="ignore"):
        return apply(op, forward, t)


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
        raise ValueError(f"masked_fill: mask of shape {tuple(mask_shape)} does not broadcast "
                         f"to the tensor's shape {t.shape}")
    if not isinstance(value, Tensor):
        value = Tensor._from_array(np.array(value).astype(t.dtype))
    return where(mask, value, t)


# %% nbgrader={"grade": true, "grade_id": "test-elementwise", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
_b = Tensor([10.0, 20.0, 30.0])
np.testing.assert_allclose((_a + _b).numpy(), [[11, 22, 33], [14, 25, 36]])
np.testing.assert_allclose((2 - _a).numpy(), 2 - _a.numpy())
np.testing.assert_allclose((_a / _b * 3).numpy(), _a.numpy() / _b.numpy() * 3, rtol=1e-6)
assert (_a * 2.5).dtype == float32, "a Python float must not upcast float32"
assert (Tensor([1, 2]) / Tensor([2, 2])).dtype == float32, "int / int is float32"
assert (Tensor([1, 2]) * 2).dtype == int64
assert (_a > 3).dtype == bool_ and (_a > 3).tolist() == [[False, False, False], [True, True, True]]
try:
    _a + Tensor([1.0, 2.0])
    raise AssertionError("(2, 3) + (2,) must raise")
except ValueError as e:
    assert "(2, 3)" in str(e) and "(2,)" in str(e), f"use broadcast_shapes' message: {e}"
np.testing.assert_allclose(_a.exp().log().numpy(), _a.numpy(), rtol=1e-6)
np.testing.assert_array_equal(_a.clamp(min=2, max=5).numpy(), np.clip(_a.numpy(), 2, 5))
np.testing.assert_array_equal(where(_a > 3, _a, 0.0).numpy(), np.where(_a.numpy() > 3, _a.numpy(), 0))
print("✓ elementwise ops")

# %% [markdown]
# ## 11. In-place operations
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
# 2. **Overlapping memory.** An expanded tensor has stride 0 in some dimension of size > 1:
#    several of its elements *are the same memory cell*. Writing `x.add_(1)` would add 1
#    to that cell several times (or once — it depends on the loop order). PyTorch refuses,
#    and so do we.
#
# Your part is that check, `_check_writable(t)`. The provided `_inplace` also refuses a
# result dtype that cannot be stored back (`int_tensor.div_(2)` would need floats) and
# values whose shape does not broadcast to the tensor's.

# %% nbgrader={"grade": false, "grade_id": "inplace", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _check_writable(t, check_grad=True):
    """Raise RuntimeError if writing into `t` in place is unsafe (see the text above)."""
    # Hints:
    # - if check_grad and t.requires_grad and is_grad_enabled(): raise RuntimeError saying a
    #   tensor that requires grad cannot be modified in place while grad mode is on;
    # - if any dim has stride 0 and size > 1: raise RuntimeError saying that several
    #   elements share one memory location (an expanded view) and to call .contiguous()
    #   (or .clone()) first.
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


def _inplace(t, np_fn, other, cast=False):
    """Apply `np_fn(t, other)` into t's own memory (np_fn None: just assign `other`)."""
    _check_writable(t)
    other = _operand(other)
    dt = _result_dtype(t, other)
    if np_fn is np.true_divide and dt.kind != "f":
        dt = float32
    if not cast and not np.can_cast(dt, t.dtype, casting="same_kind"):
        raise RuntimeError(f"result type {dt} can't be cast to the desired output type {t.dtype} "
                           f"of an in-place operation")
    src = other.numpy() if isinstance(other, Tensor) else np.asarray(other)
    if broadcast_shapes(src.shape, t.shape) != t.shape:
        raise ValueError(f"in-place operation: values of shape {tuple(src.shape)} do not "
                         f"broadcast to the tensor's shape {t.shape}")
    view = t.numpy()
    with np.errstate(all="ignore"):
        if np_fn is None:
            np.copyto(view, src, casting="unsafe")
        else:
            np_fn(view, src.astype(dt, copy=False), out=view, casting="same_kind")
    return t


# %% nbgrader={"grade": true, "grade_id": "test-inplace", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = Tensor([1.0, 2.0, 3.0])
_storage_before = _x._storage
_x += 1
_x.mul_(2)
assert _x._storage is _storage_before and _x.tolist() == [4.0, 6.0, 8.0]
_p = Tensor([1.0, 2.0], requires_grad=True)
try:
    _p.add_(1)
    raise AssertionError("in-place on a tensor requiring grad must raise")
except RuntimeError as e:
    assert "grad" in str(e)
set_grad_enabled(False)
_p.sub_(Tensor([0.5, 0.5]))  # allowed with grad mode off
set_grad_enabled(True)
assert _p.tolist() == [0.5, 1.5]
_e = Tensor([1.0]).expand(3)
try:
    _e.fill_(0.0)
    raise AssertionError("writing into an expanded view must raise")
except RuntimeError as e:
    assert "memory" in str(e)
try:
    Tensor([1, 2]).div_(2)
    raise AssertionError("int tensor div_ must raise")
except RuntimeError:
    pass
_g = Tensor(np.arange(6.0).reshape(2, 3))
_g[0, 1:] = Tensor([-1.0, -2.0])  # x[index] = value writes into storage too
_g[:, 0] = 9.0
assert _g.tolist() == [[9.0, -1.0, -2.0], [9.0, 4.0, 5.0]]
print("✓ in-place ops")

# %% [markdown]
# ## 12. Reductions
#
# A reduction (`sum`, `mean`, `amax`, `amin`, `max`, `min`, `argmax`, `argmin`) collapses
# one or more dimensions. The `dim` argument is where the bookkeeping is:
#
# - `None` means all dimensions (a 0-d result);
# - an int or a tuple of ints selects dimensions, negative ones counting from the end;
# - `keepdim=True` keeps the reduced dimensions with size 1, which is what you want for
#   broadcasting the result back: `x - x.mean(dim=1, keepdim=True)` centres each row.
#
# Your part is `_reduction_dims(dim, ndim)`: turn any of these forms into a sorted tuple of
# non-negative dims, with an `IndexError` for a dim out of range (use the provided
# `_wrap_dim`) and a `ValueError` for a dim given twice. Recording the *normalised* tuple in
# `attrs` means module 06's backward rules never have to think about negative dims.
#
# Like PyTorch, the methods also accept numpy's spellings `axis=` and `keepdims=`. Sums
# of integers stay int64 (bools sum to int64: counting `True`s), while `mean` of an integer
# tensor is an error, as in PyTorch (an average is not an integer; say `.float()` if you
# mean it). `max(dim=...)`/`min(dim=...)` return a `(values, indices)` pair as PyTorch's do.

# %% nbgrader={"grade": false, "grade_id": "reductions", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _reduction_dims(dim, ndim):
    """Normalise a reduction's dim (None, int, tuple/list) to a sorted tuple of dims >= 0."""
    # Hints: None -> tuple(range(ndim)). An int (or np.integer) -> a 1-tuple. Wrap each dim
    # with _wrap_dim(d, ndim); a repeated dim raises ValueError(f"dim {d} appears multiple
    # times in the list of dims"). Return tuple(sorted(...)).
    ### BEGIN SOLUTION
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = []
    for d in dims:
        wrapped = _wrap_dim(d, ndim)
        if wrapped in out:
            raise ValueError(f"dim {wrapped} appears multiple times in the list of dims")
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
assert _reduction_dims(None, 3) == (0, 1, 2)
assert _reduction_dims(-1, 3) == (2,) and _reduction_dims((2, 0), 3) == (0, 2)
try:
    _reduction_dims(3, 3)
    raise AssertionError("dim 3 of a 3-d tensor must raise IndexError")
except IndexError:
    pass
try:
    _reduction_dims((0, -3), 3)
    raise AssertionError("a repeated dim must raise ValueError")
except ValueError:
    pass
_a = np.arange(24.0).reshape(2, 3, 4)
_x = Tensor(_a)
np.testing.assert_allclose(_x.sum().numpy(), _a.sum())
np.testing.assert_allclose(_x.sum(dim=(0, -1)).numpy(), _a.sum(axis=(0, 2)))
np.testing.assert_allclose(_x.mean(1, keepdim=True).numpy(), _a.mean(axis=1, keepdims=True))
np.testing.assert_allclose(_x.amax(axis=-1, keepdims=True).numpy(), _a.max(axis=-1, keepdims=True))
_vals, _idx = _x.max(dim=1)
np.testing.assert_array_equal(_vals.numpy(), _a.max(axis=1))
np.testing.assert_array_equal(_idx.numpy(), _a.argmax(axis=1))
assert Tensor([True, False, True]).sum().item() == 2
print("✓ reductions")

# %% [markdown]
# ## 13. Matrix multiplication
#
# `a @ b` is the workhorse of deep learning: a linear layer is one matmul, attention is two.
# numpy's `np.matmul` does the arithmetic (in optimised BLAS). The *shape* rule is yours,
# written as `_matmul_shape(a_shape, b_shape) -> result_shape`:
#
# - both operands need at least one dimension;
# - a 1-D first operand `(k,)` acts as a row `(1, k)`, a 1-D second operand `(k,)` as a
#   column `(k, 1)`, and that added dimension is removed from the result;
# - the **inner** dimensions must agree: `(..., m, k) @ (..., k, n)`; the error names both
#   shapes and both sizes;
# - the leading **batch** dimensions (everything before the last two) broadcast with
#   `broadcast_shapes`, so `(8, 4, 5) @ (5, 6)` multiplies each of 8 matrices by one weight.
#
# The result shape is `batch + (m,) + (n,)`, minus the dimensions added for 1-D operands.
# Counting operations: a `(m, k) @ (k, n)` product does `m·n·k` multiply-adds, i.e. `2mnk`
# FLOPs — module 14 builds on this.

# %% nbgrader={"grade": false, "grade_id": "matmul", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _matmul_shape(a_shape, b_shape):
    """Result shape of a @ b with numpy's matmul rules, or ValueError naming both shapes."""
    # Hints: reject 0-d. Promote 1-D as described. Compare a[-1] with b[-2]:
    #   ValueError(f"matmul: shapes {a_shape} and {b_shape} are not aligned: inner dimensions
    #   {k1} (last of the first) and {k2} (second-to-last of the second) must be equal").
    # Broadcast a[:-2] with b[:-2] (wrap the ValueError to name both full shapes), then drop
    # the dims that 1-D promotion added.
    ### BEGIN SOLUTION
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) == 0 or len(b_shape) == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{a_shape} and {b_shape}")
    a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: shapes {a_shape} and {b_shape} are not aligned: inner "
                         f"dimensions {a2[-1]} (last of the first) and {b2[-2]} "
                         f"(second-to-last of the second) must be equal")
    try:
        batch = broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError as exc:
        raise ValueError(f"matmul: the batch dimensions of {a_shape} and {b_shape} do not "
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
        raise ValueError("matmul: both arguments need at least 1 dimension (got a number)")
    shape = _matmul_shape(a.shape, b.shape)
    dt = _result_dtype(a, b)

    def forward(x, y):
        out = np.matmul(x.numpy().astype(dt, copy=False), y.numpy().astype(dt, copy=False))
        return np.reshape(out, shape)
    return apply("matmul", forward, a, b)


# %% nbgrader={"grade": true, "grade_id": "test-matmul", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert _matmul_shape((2, 3), (3, 4)) == (2, 4)
assert _matmul_shape((3,), (3,)) == ()
assert _matmul_shape((3,), (3, 4)) == (4,) and _matmul_shape((2, 3), (3,)) == (2,)
assert _matmul_shape((8, 1, 2, 3), (5, 3, 4)) == (8, 5, 2, 4)
try:
    _matmul_shape((2, 3), (4, 5))
    raise AssertionError("(2, 3) @ (4, 5) must raise")
except ValueError as e:
    assert "(2, 3)" in str(e) and "(4, 5)" in str(e), str(e)
_rng_check = np.random.default_rng(0)
_A = _rng_check.standard_normal((4, 2, 3)).astype(np.float32)
_B = _rng_check.standard_normal((3, 5)).astype(np.float32)
np.testing.assert_allclose((Tensor(_A) @ Tensor(_B)).numpy(), _A @ _B, rtol=1e-5)
np.testing.assert_allclose(Tensor(_A).matmul(Tensor(_B)).numpy(), _A @ _B, rtol=1e-5)
print("✓ matmul")

# %% [markdown]
# ## 14. Joining tensors and creating them
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
        raise ValueError("cat: expected a non-empty sequence of tensors")
    ref = tensors[0]
    if ref.ndim == 0:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated (use stack)")
    d = _wrap_dim(dim, ref.ndim)
    for i, t in enumerate(tensors[1:], start=1):
        if t.ndim != ref.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, ref.shape)) if k != d):
            raise ValueError(f"cat: tensor {i} has shape {t.shape} but tensor 0 has shape "
                             f"{ref.shape}; all sizes must match except in dimension {d}")
    dt = _result_dtype(*tensors)
    return apply("cat", lambda *xs, dim, sizes: np.concatenate(
        [x.numpy().astype(dt, copy=False) for x in xs], axis=dim),
        *tensors, dim=d, sizes=tuple(t.shape[d] for t in tensors))


def stack(tensors, dim=0):
    """Join equal-shaped tensors along a new dimension `dim` (a copy)."""
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    for i, t in enumerate(tensors[1:], start=1):
        if t.shape != tensors[0].shape:
            raise ValueError(f"stack: tensor {i} has shape {t.shape} but tensor 0 has shape "
                             f"{tensors[0].shape}; stack needs equal shapes")
    d = _wrap_dim(dim, tensors[0].ndim + 1)
    dt = _result_dtype(*tensors)
    return apply("stack", lambda *xs, dim: np.stack([x.numpy().astype(dt, copy=False) for x in xs], axis=dim),
                 *tensors, dim=d)


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (list, number, numpy array or Tensor)."""
    return Tensor(data, dtype=dtype, requires_grad=requires_grad)


def _filled(size, value, dtype, requires_grad):
    shape = _shape_arg(size)
    dt = float32 if dtype is None else _check_dtype(dtype)
    t = Tensor._from_array(np.full(shape, value, dtype=dt))
    t.requires_grad = requires_grad
    return t


def zeros(*size, dtype=None, requires_grad=False):
    """A tensor of zeros (float32 unless `dtype`)."""
    return _filled(size, 0, dtype, requires_grad)


def ones(*size, dtype=None, requires_grad=False):
    """A tensor of ones (float32 unless `dtype`)."""
    return _filled(size, 1, dtype, requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False):
    """A tensor filled with `fill_value`; the dtype follows the value (bool, int64, float32)."""
    if dtype is None:
        dtype = _result_dtype(fill_value)
    return _filled((size,) if isinstance(size, (int, np.integer)) else (tuple(size),),
                   fill_value, dtype, requires_grad)


def zeros_like(input, dtype=None, requires_grad=False):
    """Zeros with the shape (and dtype, unless given) of `input`."""
    return _filled((input.shape,), 0, input.dtype if dtype is None else dtype, requires_grad)


def ones_like(input, dtype=None, requires_grad=False):
    """Ones with the shape (and dtype, unless given) of `input`."""
    return _filled((input.shape,), 1, input.dtype if dtype is None else dtype, requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False):
    """Values start, start+step, ... below end; int64 for int arguments, else float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _result_dtype(start, end, step)
    t = Tensor._from_array(np.arange(start, end, step, dtype=_check_dtype(dtype)))
    t.requires_grad = requires_grad
    return t


def eye(n, m=None, dtype=None, requires_grad=False):
    """The n x m identity matrix (float32 unless `dtype`)."""
    t = Tensor._from_array(np.eye(n, m, dtype=float32 if dtype is None else _check_dtype(dtype)))
    t.requires_grad = requires_grad
    return t


_rng = np.random.default_rng()


def manual_seed(seed):
    """Reseed the one generator behind rand/randn/randint (reproducible runs)."""
    global _rng
    _rng = np.random.default_rng(seed)


def _float_dtype(dtype):
    dt = float32 if dtype is None else _check_dtype(dtype)
    if dt.kind != "f":
        raise TypeError(f"random floats need a floating dtype, not {dt}")
    return dt


def rand(*size, dtype=None, requires_grad=False):
    """Uniform samples from [0, 1)."""
    t = Tensor._from_array(_rng.random(_shape_arg(size), dtype=_float_dtype(dtype)))
    t.requires_grad = requires_grad
    return t


def randn(*size, dtype=None, requires_grad=False):
    """Standard normal samples (mean 0, variance 1)."""
    t = Tensor._from_array(_rng.standard_normal(_shape_arg(size), dtype=_float_dtype(dtype)))
    t.requires_grad = requires_grad
    return t


def randint(low, high=None, size=None, dtype=None):
    """Uniform integers in [low, high) (int64). randint(high, size) means low = 0."""
    if size is None:
        if high is None:
            raise TypeError("randint needs a size, e.g. randint(0, 10, (3,))")
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    dt = int64 if dtype is None else _check_dtype(dtype)
    return Tensor._from_array(_rng.integers(low, high, size=_shape_arg((size,)) if not
                                            isinstance(size, int) else (size,)).astype(dt))


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
# ## 15. A systems look: what tensors cost
#
# ### Bytes
#
# A tensor's elements occupy `numel() * element_size()` bytes (`nbytes`). A float32 weight
# matrix of a 4096×4096 layer is 64 MiB; the same in float64 is 128 MiB. That is why the
# default is float32, and why module 15 goes down to int8.
#
# But `nbytes` counts the elements a tensor *sees*, not the memory it *keeps alive*. All
# views of a tensor share one storage, so the honest measure of memory for a group of
# tensors is the total size of their **distinct storages**. Write `memory_footprint(*tensors)`:
# sum `storage.nbytes` over the distinct `_storage` objects (two tensors share one exactly
# when `a._storage is b._storage`; use `id()` to de-duplicate).
#
# It shows two facts that surprise people:
#
# - a view costs **zero** bytes: `x`, `x.T`, `x[::2]` and `x.expand(...)` together cost the
#   same as `x`;
# - a small slice of a big tensor keeps **the whole** big storage alive; if you only need
#   the slice, `clone()`/`contiguous()` it and drop the original.

# %% nbgrader={"grade": false, "grade_id": "memory-footprint", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def memory_footprint(*tensors):
    """Bytes of memory actually held by `tensors`: each distinct storage counted once.

    Why: views share storage, so summing nbytes over-counts them, and a slice can keep a
    much larger storage alive; this is the number that matters for "will it fit?".
    """
    # Hint: a dict {id(t._storage): t._storage.nbytes} de-duplicates shared storages.
    ### BEGIN SOLUTION
    seen = {}
    for t in tensors:
        seen[id(t._storage)] = t._storage.nbytes
    return sum(seen.values())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-memory-footprint", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = zeros(100, 50)
assert _x.element_size() == 4 and _x.nbytes == 100 * 50 * 4
assert memory_footprint(_x) == 20_000
assert memory_footprint(_x, _x.T, _x[::2], _x[0].expand(7, 50)) == 20_000, "views cost no bytes"
assert memory_footprint(_x, _x.T.contiguous()) == 40_000, "a copy has its own storage"
assert memory_footprint(_x[0, :3]) == 20_000, "a slice keeps the whole storage alive"
assert memory_footprint(_x[0, :3].clone()) == 12
print("✓ memory_footprint")

# %% [markdown]
# ### Time: a view versus a copy
#
# A view only creates a small Python object, whatever the size; a copy must read and
# write every byte. Let us measure both for growing square float32 matrices. We time with
# `time.perf_counter`, repeat each measurement and take the **median** (robust to the
# occasional hiccup of the operating system). These are measurements on *your* machine —
# the exact numbers will differ elsewhere, the shape of the curves will not.

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

# %% [markdown]
# The copy's time grows with the number of bytes (×4 per doubling of n), while the view
# stays flat: it never touches the data. The same holds for memory: the view added nothing
# (check `memory_footprint(m, m.T)`).
#
# One more cost worth knowing: **how** a tensor's elements sit in memory changes the speed
# of reading them, even for the same number of elements. The CPU fetches memory in cache
# lines of 64 bytes (16 float32s). Reading a contiguous block uses every float of every
# line it loads; reading every 16th column (`m[:, ::16]`, stride 16) uses one float per
# line and so moves ~16 times more bytes through the memory system. Both views below hold
# 262,144 elements; measure the sum of each:

# %%
m = rand(2048, 2048)
block, strided = m[:128], m[:, ::16]
assert block.numel() == strided.numel()
t_block = median_time(lambda: block.sum(), repeats=9)
t_strided = median_time(lambda: strided.sum(), repeats=9)
print(f"sum of a contiguous block: {t_block * 1e3:.3f} ms; same number of elements with "
      f"stride 16: {t_strided * 1e3:.3f} ms ({t_strided / t_block:.1f}x)")
print("memory_footprint(m, m.T) =", memory_footprint(m, m.T), "bytes; m.nbytes =", m.nbytes)

# %% [markdown]
# ## 16. How PyTorch does it
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
#   copies only when needed. PyTorch's `view` accepts more layouts than ours: it succeeds
#   whenever the new shape can be expressed with strides (e.g. splitting one dimension of a
#   transposed tensor).
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
# ## 17. Recap
#
# - A tensor is **storage + shape + strides + offset**; element `(i₀, …)` lives at
#   `offset + Σ iₖ·strideₖ`. You wrote `contiguous_strides` and the constructor's layout.
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

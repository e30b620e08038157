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
# # Module 17 — Acceleration: numba CPU kernels, CUDA kernels and a `cuda` device
#
# Your tinytorch is fast because numpy is: every op hands a whole array to compiled C. This
# module writes the compiled loops yourself. First on the CPU with **numba**, which compiles
# a Python function to machine code, so module 01's strided loop goes from interpreted to
# native speed; then on the GPU with numba's **CUDA** target, where thousands of threads run
# one function each. At the end `Tensor.to("cuda")` sends an MLP's ops to your GPU kernels,
# and a training step on `cuda` gives the same loss and gradients as on the CPU.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - compile loops with `@njit` (`prange` for a parallel outer loop, `fastmath` where
#   reordering is harmless, `cache=True` so the next run does not recompile), and explain why
#   the same loop is ~100× faster compiled than interpreted;
# - write a **fused** elementwise kernel (bias + GELU in one pass), a **parallel reduction**
#   without races, a **cache-aware matmul** (loop order, blocking) and an **im2col** kernel;
# - explain why a call into the math library stops a loop from being **vectorised**, and
#   build an exp from multiplies, adds and bits (range reduction, a polynomial whose length
#   you derive, the exponent field), on which exact GELU runs in a `compiled()` dispatch mode;
# - measure this machine's memory bandwidth and peak FLOP/s and place each kernel on a
#   **roofline** (arithmetic intensity against GFLOP/s);
# - write CUDA kernels: **thread and block indexing**, elementwise map/zip, a
#   **shared-memory block reduction**, a naive and a **tiled** matmul; explain coalescing,
#   occupancy, and why tiling raises arithmetic intensity;
# - measure what host-to-device transfers cost, and use the `cuda` device:
#   `Tensor.to("cuda")`, `.cpu()`, `.device`, `Module.to(device)`.
#
# ## Prerequisites
#
# Modules 01-09: module 01's address formula and strided loops (`tinytorch._strided`) and its
# dispatcher `apply`; activations (02), `Linear` and `Module` (03), losses (04), autograd (06),
# SGD (07) and module 09's `im2col` layout.
#
# ## How this notebook works
#
# Cells marked `#| export` become two package files when you run `tito export 17` (or
# `tito test module 17`): the CPU kernels go to `tinytorch/backends/cpu_kernels.py`, the
# CUDA kernels and the `cuda` device backend to `tinytorch/cuda/kernels.py` (its
# `tinytorch.cuda` package mirrors `torch.cuda`). Fill in the cells with `# YOUR CODE HERE`,
# then run the check cell below each.
#
# **No GPU? Everything still runs.** numba ships a **CUDA simulator**: with the environment
# variable `NUMBA_ENABLE_CUDASIM=1` set *before numba is imported*, every kernel launch runs
# each GPU thread as a Python thread on the CPU. It is slow (so the sizes here are small when
# it is on) but it runs your kernels exactly as written: indexing, shared memory,
# `syncthreads`. The next cell switches it on when this machine has no NVIDIA GPU and leaves
# a setting you made alone; the tests do the same. On a machine with a GPU, the same cells
# run on the GPU.

# %%
#| default_exp backends.cpu_kernels

# %%
import os

from tinytorch.testing import use_cuda_simulator_unless_gpu

simulated = use_cuda_simulator_unless_gpu()  # before numba loads; the tests decide the same way
# numba's cache (cache=True) goes to your own cache folder, not next to this notebook nor
# into a folder other users share; the "workqueue" threading layer is numba's own, and safe
# when a process forks (as graders do).
_cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(_cache_home, "tinytorch", "numba"))
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
print("CUDA simulator:", simulated)

# %%
import math
import sys
import time
import types

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numba
import numpy as np

import tinytorch
from tinytorch import Tensor, nn
from tinytorch import _strided
from tinytorch.testing import (arithmetic, assert_close, assert_equal, assert_raises, bank_conflicts, check,
                               coalesced_share, divergent_barriers, element_reads, float64_accumulators,
                               float64_ops, global_reads, math_library_calls, multiply_written, parallel_regions,
                               parallel_write_clashes, peak_bytes, prange_trips, preserved_state,
                               reuse_distances, scattered_active_threads, shared_memory_races, simd_float_ops, spied,
                               with_garbage_shared_memory, with_reads_interleaved)
from tinytorch.utils.timing import copy_bandwidth, matmul_peak, median_time

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported


def check_barriers(launch, what):
    """While launch() runs (under the simulator; a real GPU cannot be watched this way): every
    thread of a block passes the same cuda.syncthreads() calls in order, and no shared slot
    that one thread writes is read or written by another between the same two barriers."""
    divergent = divergent_barriers(launch)
    if divergent is None:
        print(f"({what}: on a real GPU the barriers cannot be watched; the simulator checks them)")
        return
    first = divergent[0] if divergent else None
    check(not divergent, f"{what}: every thread of a block passes the same cuda.syncthreads() calls in the same "
          "order (a barrier inside an `if` that some threads skip, or after some threads have returned, is "
          "undefined behaviour on a GPU: it may hang, or let threads read shared memory before it is written)",
          got=first and (f"in block {first[0]}, thread {first[1]} passed barriers at lines {first[2]}, the block's "
                         f"first thread at lines {first[3]} (lines of the kernel's source, its @cuda.jit line 1; "
                         f"every launch the call makes, one after another); {len(divergent)} such thread(s)"))
    races = shared_memory_races(launch)
    check(not races, f"{what}: no shared-memory slot is written by one thread and read or written by another "
          "between the same two barriers (a race: on a GPU the other thread sees the old value or the new one, "
          "differently from run to run; the simulator runs the threads in one order, so the values may still "
          "come out right here); got (block, step = barriers passed before it, slot (flat index), the writing "
          "thread, the other thread, its access), threads by their index in the block", got=races)

# %% [markdown]
# The package file starts with its imports. `njit` compiles a function the first time it
# is called with new argument types; `prange` is `range` whose iterations numba may hand to
# several threads.

# %%
#| export
"""CPU kernels compiled with numba (module 17): module 01's strided loops, a fused bias +
GELU, an exp and an exact GELU built for vectorising, a parallel sum, cache-aware matmuls and
im2col. Each equals numpy (or module 02's GELU) on the same input."""
import math

import numpy as np
from numba import njit, prange

from tinytorch import _strided  # module 01's broadcast_strides, for the wrappers
from tinytorch.utils.dispatch import DispatchMode  # module 01's extension point, for compiled()

# cache=True stores the machine code on disk (NUMBA_CACHE_DIR, or next to the source file), so
# the next process skips the compilation; a notebook cell has no source file, so numba refuses.
CACHE = __name__ != "__main__"

__all__ = ["strided_position", "strided_map", "strided_zip", "strided_reduce", "bias_gelu",
           "exp_approx", "exp_approx_array", "ERFC_Q", "gelu_float32", "gelu_backward_float32", "compiled",
           "parallel_sum", "matmul_ijk", "matmul_ikj", "matmul_blocked", "im2col"]

# %% [markdown]
# ## 1. The same loop, interpreted and compiled
#
# Module 01's `strided_map` visits every output element: turn its ordinal into a
# multi-index, turn the multi-index into a storage position with the address formula
# $\text{pos} = \text{offset} + \sum_d i_d \cdot s_d$, read, apply `fn`, write. In Python each
# of those steps is a handful of bytecodes and each number a heap object, so one element
# costs hundreds of nanoseconds. numba compiles the *same* loop: ints become machine
# registers, the loop a few instructions per element.
#
# numba compiles only what it can type. Inside `@njit` code, shapes and strides are numpy
# int64 arrays (not tuples of Python ints), and there is no `Tensor`, only flat storages.
# That is exactly how module 01 wrote the loops, so they carry over almost unchanged.
#
# Your part is the heart of every loop: one function that goes from an **ordinal** straight
# to a **storage position**, without building the multi-index as a list. Module 01 gave you
# both halves (`ordinal_to_index`, then `index_to_position`); fuse them so that no list is
# ever made: which quantity does each dimension's index feed, and when is it needed?
#
# <details><summary>Hint 1</summary>
#
# Run module 01's `ordinal_to_index` by hand for shape (2, 3) and ordinal 4. In which order
# does it produce the indices, and what is left of the ordinal after each one?
# </details>
#
# <details><summary>Hint 2</summary>
#
# In Hint 1's example, at the moment you know the last index (1), what else do you know,
# and what could you do with that index straight away instead of storing it?
# </details>
#
# <details><summary>The approach</summary>
#
# Ask of each index: when is it produced, and when is it last needed? If the answer is
# "the same moment", nothing needs to be stored. Then test the idea on a 0-d tensor and on
# a stride that is 0 or negative: does it need a special case?
# </details>

# %% nbgrader={"grade": false, "grade_id": "strided-position", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@njit(cache=CACHE)
def strided_position(ordinal, shape, strides, offset):
    """The storage position of the element with row-major ordinal `ordinal`.

    Contract: `shape` and `strides` are int64 arrays of the same length (empty for 0-d;
    strides may be 0 or negative), `0 <= ordinal < prod(shape)`, `offset` an int. Returns
    offset + sum_d index_d * strides[d], where index is ordinal's multi-index in `shape`.
    Compiled with numba (nopython): no lists, no Python objects.
    """
    # Idea: module 01's two functions, fused: no multi-index is ever stored.
    ### BEGIN SOLUTION
    position = offset
    for d in range(shape.shape[0] - 1, -1, -1):
        size = shape[d]
        position += (ordinal % size) * strides[d]
        ordinal //= size
    return position
    ### END SOLUTION


# %% [markdown]
# The three loops (provided) are module 01's, compiled, one loop over the output's ordinals
# each. `fn` is itself an `@njit` function, passed in as an argument; numba compiles one
# version per `fn`. The Python wrappers take module 01's arguments (tuples, shapes that
# broadcast) and convert them. These loops are serial on purpose: for tens of thousands of
# elements, waking up worker threads (what `prange` does on every call) can cost more than
# the work; the kernels of sections 2-4 are large enough to gain from it.

# %%
#| export
@njit(cache=CACHE)
def _map_loop(fn, out, out_shape, out_strides, out_offset, a, a_strides, a_offset):
    for i in range(_numel(out_shape)):
        out[strided_position(i, out_shape, out_strides, out_offset)] = fn(
            a[strided_position(i, out_shape, a_strides, a_offset)])


@njit(cache=CACHE)
def _zip_loop(fn, out, out_shape, out_strides, out_offset, a, a_strides, a_offset,
              b, b_strides, b_offset):
    for i in range(_numel(out_shape)):
        out[strided_position(i, out_shape, out_strides, out_offset)] = fn(
            a[strided_position(i, out_shape, a_strides, a_offset)],
            b[strided_position(i, out_shape, b_strides, b_offset)])


@njit(cache=CACHE)
def _reduce_loop(fn, start, out, out_shape, out_strides, out_offset, a, a_shape, a_strides,
                 a_offset, dim):
    n = a_shape[dim]
    step = a_strides[dim]
    for i in range(_numel(out_shape)):
        acc = start
        first = strided_position(i, out_shape, a_strides, a_offset)  # index 0 along dim
        for j in range(n):
            acc = fn(acc, a[first + j * step])
        out[strided_position(i, out_shape, out_strides, out_offset)] = acc


@njit(cache=CACHE)
def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _ints(values):
    return np.asarray(tuple(values), dtype=np.int64).reshape(-1)


def strided_map(fn, out_storage, out_shape, out_strides, out_offset,
                in_storage, in_shape, in_strides, in_offset):
    """Module 01's strided_map, compiled: `fn` must be an @njit function of one value."""
    a_strides = _strided.broadcast_strides(in_shape, in_strides, out_shape)
    _map_loop(fn, out_storage, _ints(out_shape), _ints(out_strides), out_offset,
              in_storage, _ints(a_strides), in_offset)


def strided_zip(fn, out_storage, out_shape, out_strides, out_offset,
                a_storage, a_shape, a_strides, a_offset, b_storage, b_shape, b_strides, b_offset):
    """Module 01's strided_zip, compiled: `fn` an @njit function of two values."""
    sa = _strided.broadcast_strides(a_shape, a_strides, out_shape)
    sb = _strided.broadcast_strides(b_shape, b_strides, out_shape)
    _zip_loop(fn, out_storage, _ints(out_shape), _ints(out_strides), out_offset,
              a_storage, _ints(sa), a_offset, b_storage, _ints(sb), b_offset)


def strided_reduce(fn, start, out_storage, out_shape, out_strides, out_offset,
                   in_storage, in_shape, in_strides, in_offset, dim):
    """Module 01's strided_reduce (keepdim output), compiled: `fn(acc, value)` an @njit function."""
    _reduce_loop(fn, start, out_storage, _ints(out_shape), _ints(out_strides), out_offset,
                 in_storage, _ints(in_shape), _ints(in_strides), in_offset, dim)


# %% [markdown]
# The check runs the compiled loops on the layouts module 01 taught: a transpose (strides
# swapped), a broadcast (stride 0), a slice with an offset and a negative stride (a flip).

# %%
@njit
def _double(v):
    return 2.0 * v


@njit
def _add(a, b):
    return a + b


def _layout(arr):
    """(storage, shape, strides in elements, offset) of a numpy view of a flat base."""
    base = arr.base if arr.base is not None else arr
    flat = base.reshape(-1)
    item = arr.itemsize
    offset = (arr.__array_interface__["data"][0] - flat.__array_interface__["data"][0]) // item
    return flat, arr.shape, tuple(s // item for s in arr.strides), offset

# %% nbgrader={"grade": true, "grade_id": "test-strided-position", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
assert_equal(strided_position(4, _ints((2, 3)), _ints((3, 1)), 0), 4, "contiguous (2, 3): ordinal 4 sits at 4")
assert_equal(strided_position(4, _ints((2, 3)), _ints((1, 2)), 0), 3,
             "transposed layout (strides (1, 2)): ordinal 4 = index (1, 1) sits at 1 + 2")
assert_equal(strided_position(5, _ints((2, 3)), _ints((0, 1)), 7), 9, "stride 0 (broadcast) and offset 7")
assert_equal(strided_position(0, _ints(()), _ints(()), 5), 5, "a 0-d tensor: just the offset")
assert_equal(strided_position(1, _ints((4,)), _ints((-1,)), 3), 2, "a negative stride walks backwards")
_base = np.arange(24.0)
for _what, _view in [("transpose", _base.reshape(4, 6).T), ("slice with offset", _base.reshape(4, 6)[1:, 2:5]),
                     ("flip", _base.reshape(4, 6)[:, ::-1])]:
    _st, _sh, _ss, _so = _layout(_view)
    _out = np.zeros(_sh)
    strided_map(_double, _out.reshape(-1), _sh, (_sh[1], 1), 0, _st, _sh, _ss, _so)
    assert_close(_out, 2 * _view, what=f"compiled strided_map on a {_what}")
_out = np.zeros((3, 4))
strided_zip(_add, _out.reshape(-1), (3, 4), (4, 1), 0, np.arange(4.0), (4,), (1,), 0,
            np.arange(3.0), (3, 1), (1, 1), 0)
assert_close(_out, np.arange(4.0) + np.arange(3.0)[:, None], what="compiled strided_zip, both broadcast")
_st, _sh, _ss, _so = _layout(_base.reshape(4, 6).T)
_red = np.zeros(6)
strided_reduce(_add, 0.0, _red, (6, 1), (1, 1), 0, _st, _sh, _ss, _so, 1)
assert_close(_red, _base.reshape(4, 6).T.sum(axis=1), what="compiled strided_reduce over dim 1 of a transpose")
_deep = _ints((2,) * 40 + (1,) * 360)  # 400 dimensions (2**40 elements): a stored multi-index holds 400 numbers
_held = peak_bytes(strided_position, 12345, _deep, _ints((1,) * 400), 0)  # run as Python: allocations show
check(_held < 2000, "strided_position stores no multi-index (no list, no array): on a 400-dimensional shape it "
      "holds a few numbers at a time; got the most bytes it held at once, run as Python", got=_held,
      expected="under 2000 (a list or an array of 400 indices takes over 3000)")
print("✓ compiled strided loops equal numpy; row sums of the transpose:", _red)

# %% [markdown]
# ### Systems look: interpreted against compiled
#
# How much faster is the compiled map than module 01's pure-Python one on a 120×120
# transposed view (14,400 elements)? Write your guess as a ratio (e.g. `10`).

# %%
predicted_speedup = None  # your number: python time / numba time

# %%
_src = np.random.default_rng(0).standard_normal((120, 120))
_st, _sh, _ss, _so = _layout(_src.T)
_dst = np.zeros(_sh)
strided_map(_double, _dst.reshape(-1), _sh, (120, 1), 0, _st, _sh, _ss, _so)  # compile once
try:
    _t_py = median_time(lambda: _strided.strided_map(lambda v: 2.0 * v, _dst.reshape(-1), _sh, (120, 1), 0,
                                                     _st, _sh, _ss, _so), repeats=3)
except NotImplementedError:  # module 01's loops not written in this build: nothing to compare
    _t_py = float("nan")
_t_nb = median_time(lambda: strided_map(_double, _dst.reshape(-1), _sh, (120, 1), 0, _st, _sh, _ss, _so))
_t_np = median_time(lambda: np.multiply(_src.T, 2.0, out=_dst))
print(f"pure Python {_t_py * 1e3:8.2f} ms | numba {_t_nb * 1e3:6.3f} ms | numpy {_t_np * 1e3:6.3f} ms")
print(f"measured speed-up python/numba: {_t_py / _t_nb:.0f}x | your prediction:",
      predicted_speedup if predicted_speedup is not None else "none given")

# %% [markdown]
# Expect a ratio in the tens to hundreds: the interpreter pays for every bytecode, numba
# only for the arithmetic. numba stays behind numpy here: per element it pays a division and
# a modulo per dimension (the address formula from the ordinal), where numpy walks the view
# with nested pointer increments, and each call pays a fixed cost for converting the
# arguments. The figures move with the machine, its load and its number of cores.

# %% [markdown]
# ## 2. A fused elementwise kernel: bias + GELU in one pass
#
# A linear layer followed by GELU computes $y = \operatorname{GELU}(x + b)$, with
# $\operatorname{GELU}(v) = \tfrac12 v\,(1 + \operatorname{erf}(v/\sqrt2))$. With numpy that is
# several passes over memory: `x + b` writes a temporary, then each step of GELU reads one
# array and writes another. Each pass streams the whole tensor through memory, while the
# arithmetic per element is tiny. **Fusion** does everything for one element while it is in
# a register: read $x_{ij}$ once, write $y_{ij}$ once. PyTorch's compiler (`torch.compile`)
# does this automatically; here you do it by hand.
#
# Three numba options: `parallel=True` with a `prange` loop (which of your loops? the check
# watches whether two of its iterations write one element, and counts how often a call
# wakes the thread pool); `fastmath=True`, which lets the compiler
# reorder and vectorise floating-point arithmetic, safe here because every element is
# computed on its own (no long sum whose rounding would change with the order); `cache=True`,
# which stores the machine code on disk so the next process does not compile again.
#
# One more rule: the kernel computes in x's dtype, float32 in, float32 arithmetic throughout,
# erf included; a float64 operation gives right values and a slower kernel. The check reads
# the compiled code for float64 operations. If it finds some, ask of every number your loop
# touches which type numba gives it, and what float32 combined with that type is.
#
# <details><summary>Hint 1</summary>
#
# The bias has one entry per column: element (i, j) gets bias j.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `math.erf` works inside `@njit` code. Allocate the output with numpy's `empty_like`.
# </details>
#
# <details><summary>Hint 3</summary>
#
# numba types a Python float such as `0.5` as a float64, and float32 times float64 is a
# float64. Inside `@njit` code, `x.dtype.type(2.0)` is a 2.0 in x's dtype (float32 for
# float32 input, float64 for float64 input).
# </details>
#
# <details><summary>The approach</summary>
#
# One pass means that each element is read once and its result written once, with
# everything in between done on one number in registers: no temporary arrays. The parallel
# loop goes where each of its iterations owns a whole part of the output.
# </details>

# %% nbgrader={"grade": false, "grade_id": "bias-gelu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@njit(parallel=True, fastmath=True, cache=CACHE)
def bias_gelu(x, bias):
    """GELU(x + bias), exact (erf) form, in one pass over x.

    Contract: `x` a 2-D float array (n, m), `bias` a 1-D array of length m, same dtype.
    Returns a new (n, m) array y with y[i, j] = g(x[i, j] + bias[j]), g(v) = v/2 (1 +
    erf(v / sqrt 2)), equal to torch.nn.functional.gelu(x + bias) within float tolerance.
    Every operation is done in x's dtype: no float64 arithmetic for float32 input.
    """
    # Idea: one read and one write per element; everything else stays in registers.
    ### BEGIN SOLUTION
    out = np.empty_like(x)
    n, m = x.shape
    real = x.dtype.type  # constants in x's dtype: a bare 0.5 is a float64 in numba
    half, one, inv_sqrt2 = real(0.5), real(1.0), real(1.0 / math.sqrt(2.0))
    for i in prange(n):
        for j in range(m):
            v = x[i, j] + bias[j]
            out[i, j] = half * v * (one + math.erf(v * inv_sqrt2))
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-bias-gelu", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _gelu_reference(v):
    return 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))


_rng = np.random.default_rng(1)
for _shape in [(5, 7), (1, 1), (3, 64)]:
    _x = _rng.standard_normal(_shape).astype(np.float32) * 3
    _b = _rng.standard_normal(_shape[1]).astype(np.float32)
    assert_close(bias_gelu(_x, _b), _gelu_reference((_x + _b).astype(np.float64)), rtol=1e-5, atol=1e-6,
                 what=f"bias_gelu on {_shape}")
_y = bias_gelu(np.array([[-1.0, 0.0, 2.0]], dtype=np.float32), np.array([0.0, 1.0, -1.0], dtype=np.float32))
assert_close(_y, [[-0.15865526, 0.8413447, 0.8413447]], rtol=1e-6, what="GELU(-1), GELU(1), GELU(1)")
assert_equal(_y.dtype, np.dtype(np.float32), "bias_gelu on float32 input returns float32 (its output is allocated "
             "in x's dtype)")
assert_equal(bias_gelu(np.zeros((0, 3), np.float32), np.zeros(3, np.float32)).shape, (0, 3), "an empty batch")
_x64, _b64 = _rng.standard_normal((4, 6)) * 3, _rng.standard_normal(6)
_y64 = bias_gelu(_x64, _b64)
assert_equal(_y64.dtype, np.dtype(np.float64), "bias_gelu on float64 input returns float64")
assert_close(_y64, _gelu_reference(_x64 + _b64), rtol=1e-12, atol=1e-14,
             what="bias_gelu on float64 (4, 6), to double precision (a constant rounded to float32 shows here)")
_x5, _b5 = _rng.standard_normal((5, 5)).astype(np.float32), _rng.standard_normal(5).astype(np.float32)
_, _clashes = parallel_write_clashes(bias_gelu, _x5, _b5)
check(not _clashes, "no two iterations of bias_gelu's prange loop write the same element (section 3 shows why "
      "that matters); got lists (array shape, element, first iteration, second iteration)", got=_clashes)
_, _regions = parallel_regions(bias_gelu, _x5, _b5)
check(_regions == 1, "bias_gelu starts one parallel loop per call (a prange inside a plain loop starts once per "
      "outer iteration, and each start wakes the thread pool); got the number of starts on a 5 x 5 input",
      got=_regions, expected=1)
_f64 = float64_ops(bias_gelu, _x, _b)
check(_f64 == 0, "bias_gelu on float32 input computes in float32 (a float64 constant promotes every element it "
      "touches, erf included, to double precision: the same values, slower); got the number of float64 operations "
      "in its compiled code", got=_f64, expected=0)
_x = _rng.standard_normal((32, 64)).astype(np.float32)
_peak = peak_bytes(bias_gelu, _x, _b[:1].repeat(64))
check(_peak < 1.5 * _x.nbytes, f"bias_gelu holds no temporary array the size of x (one pass: read x, write y); "
      f"got the most bytes it held at once, for an output of {_x.nbytes} bytes", got=_peak)
print("✓ bias_gelu equals GELU(x + b); GELU(-1), GELU(1) =", _y[0, :2])

# %% [markdown]
# ### Systems look: what fusion saves
#
# numpy's unfused version makes about six passes (add, scale, erf, add, two multiplies), each
# reading and writing the whole 512×1024 float32 array. How much faster is the fused
# kernel? Predict a ratio.

# %%
predicted_fusion_speedup = None  # your number: numpy time / fused time

# %%
from numba import vectorize


@vectorize(["float32(float32)"])
def _erf(v):  # numpy has no erf: a compiled ufunc, one pass over its input like numpy's own
    return math.erf(v)


_X = np.random.default_rng(2).standard_normal((512, 1024)).astype(np.float32)
_B = np.random.default_rng(3).standard_normal(1024).astype(np.float32)


def _unfused(x, b):
    v = x + b
    return 0.5 * v * (1.0 + _erf(v * np.float32(1 / math.sqrt(2))))


bias_gelu(_X, _B)
_t_fused, _t_unfused = median_time(lambda: bias_gelu(_X, _B)), median_time(lambda: _unfused(_X, _B))
assert_close(bias_gelu(_X, _B), _unfused(_X, _B), rtol=1e-4, atol=1e-5, what="fused against unfused")
print(f"numpy, unfused: {_t_unfused * 1e3:.2f} ms | fused numba kernel: {_t_fused * 1e3:.2f} ms | "
      f"ratio {_t_unfused / _t_fused:.1f}x | your prediction:",
      predicted_fusion_speedup if predicted_fusion_speedup is not None else "none given")

# %% [markdown]
# Now the same fusion with almost no arithmetic: bias + ReLU, $y = \max(x + b, 0)$. numpy
# makes two passes (`x + b`, then `maximum`), the fused kernel one, and each element costs a
# comparison instead of an erf. Before you run the cell: will the ratio be larger or smaller
# than for GELU, and why?

# %%
@vectorize(["float32(float32, float32)"])
def _bias_relu(v, b):  # a compiled ufunc: one pass over x (b broadcasts along its rows), no temporary
    s = v + b
    return s if s > 0 else np.float32(0)


assert_close(_bias_relu(_X, _B), np.maximum(_X + _B, 0), what="fused bias + ReLU against numpy")
_t_relu_fused = median_time(lambda: _bias_relu(_X, _B))
_t_relu_unfused = median_time(lambda: np.maximum(_X + _B, np.float32(0)))
print(f"bias + ReLU: numpy {_t_relu_unfused * 1e3:.2f} ms | fused {_t_relu_fused * 1e3:.2f} ms | "
      f"ratio {_t_relu_unfused / _t_relu_fused:.1f}x (bias + GELU: {_t_unfused / _t_fused:.1f}x)")

# %% [markdown]
# Every timing in this notebook runs on **one thread**: `median_time` pins numpy's BLAS and
# numba's parallel loops to one thread while it measures (`pinned_threads` in
# `tinytorch.utils.timing`), so that a busy machine slows both sides of a comparison
# alike. Fusion saves memory traffic and nothing else: the erf costs the same fused or not.
# So the ratio says which of the two dominated. Where an element's arithmetic is an erf,
# the saved passes are only part of the time and the ratio stays modest; where it is a
# comparison, the passes over memory *are* the time, and removing one of two (plus the
# temporary `x + b`, which numpy must allocate and write) shows. Compare the two ratios
# printed above. Section 6 puts both
# kernels on one chart.
#
# What `prange` adds on top is the number of cores. The cell below times the fused kernel
# with 1, 2, ... threads, up to the cores numba may use on this machine.

# %%
_scaling = {n: median_time(lambda: bias_gelu(_X, _B), threads=n)
            for n in range(1, min(numba.config.NUMBA_NUM_THREADS, 8) + 1)}
print("bias_gelu with n threads: " + ", ".join(f"{n}: {t * 1e3:.2f} ms ({_scaling[1] / t:.1f}x)"
                                              for n, t in _scaling.items()))

# %% [markdown]
# Expect the time to fall as threads are added while cores are idle, by less than the
# number of threads (the cores share one memory bus, and each call wakes the workers),
# and to stop falling, or rise, once the threads outnumber the cores that are free: on a
# machine that other processes keep busy, even two threads can be slower than one.

# %% [markdown]
# ### Why GELU barely gained: a call the compiler cannot widen
#
# Fusion removed the passes over memory, and yet the fused kernel spends most of its time
# elsewhere: in the erf. Put it next to numpy's exp, which is no cheaper as arithmetic (an
# exp and an erf are each a few dozen multiply-adds):

# %%
_t_exp = median_time(lambda: np.exp(_X))
print(f"numpy's exp: {_t_exp / _X.size * 1e9:.2f} ns per element | bias_gelu (one math.erf each): "
      f"{_t_fused / _X.size * 1e9:.2f} ns per element, {_t_fused / _t_exp:.0f}x")

# %% [markdown]
# The difference is in how each is compiled. A core runs one instruction on a whole vector
# of numbers (SIMD: 4 float64 or 8 float32 in AVX2's 256-bit registers, twice that with
# AVX-512), and numpy's exp is written for it: one instruction advances several exps at
# once. `math.erf` in your kernel is a call into the C math library, one number per call.
# numba's compiler (LLVM) vectorises a loop on its own when its body is plain arithmetic,
# but a call is a wall it cannot see through. That is why numpy, PyTorch and every fast
# library write their exp, erf and tanh as multiplies, adds and bit operations only.
#
# ### Your turn: `exp_approx`, an exp made of multiplies, adds and bits
#
# Write `exp_approx(v)`: $e^v$ for a float64 $v$ in $[-700, 700]$, to a relative error below
# $10^{-9}$, with arithmetic, comparisons and bit operations only: no `math.exp`, no `**`,
# no `math.ldexp`. Rounding is allowed (`math.floor`, `round`, `int`: each compiles to an
# instruction, not a library call). Three facts to build it from:
#
# - $e^v = 2^{v/\ln 2}$, and a power of 2 with an *integer* exponent is exact and nearly
#   free to build (next fact). So split $v/\ln 2$ into an integer $n$ and what is left:
#   $e^v = 2^n e^r$. Which $n$ leaves the smallest $|r|$, and on what interval does $r$ lie
#   then, for every $v$?
# - A float64 is 64 bits: a sign bit, 11 exponent bits holding $k + 1023$, and 52 fraction
#   bits; its value is $\pm 1.\text{fraction} \times 2^{k}$. Which int64 has the bits of
#   $2^n$? In numba, `np.int64(i).view(np.float64)` reads an int64's bits as a float64.
# - On a small interval a Taylor polynomial $\sum_k r^k / k!$ is accurate. How many terms
#   keep the first term you leave out below $10^{-9}$ on *your* interval? Work it out before
#   you type a coefficient: too few fails the check, too many costs time on every element.
#
# The check measures the relative error on 300,001 points of $[-700, 700]$ (a grid, and
# 100,000 random points in $[-50, 50]$), and reads the compiled code of a loop over your
# function for calls into the math library.
#
# <details><summary>Hint 1</summary>
#
# $e^v = 2^n e^{v - n \ln 2}$ holds for *every* integer $n$. Compare the interval of
# $r = v - n\ln 2$ when $n$ is $v/\ln 2$ rounded down with when it is rounded to nearest.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A float64 whose sign and fraction bits are 0 is exactly $2^{k}$. Where do the 11 exponent
# bits start, counting from bit 0?
# </details>
#
# <details><summary>Hint 3</summary>
#
# The first term left out, $|r|^k / k!$, is one line of Python to evaluate for
# k = 5, 6, 7, ... with the largest $|r|$ on your interval. Which k is the first below
# $10^{-9}$, and so how many terms do you keep?
# </details>

# %% nbgrader={"grade": false, "grade_id": "exp-approx", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@njit(inline="always", cache=CACHE)
def exp_approx(v):
    """e**v for a float64 `v` in [-700, 700], to a relative error below 1e-9.

    Contract: computed with arithmetic, comparisons and bit operations only (no call into
    the math library), so that the compiler can vectorise a loop that calls it. Outside
    [-700, 700] the result is unspecified: callers clamp.
    """
    # Idea: an exact power of 2 times e**r on an interval small enough for a short polynomial.
    ### BEGIN SOLUTION
    n = round(v * 1.4426950408889634)  # v / ln 2 to the nearest integer: |r| <= ln(2) / 2
    r = v - n * 0.6931471805599453
    # |r|**9 / 9! < 2.2e-10 on that interval: Taylor terms up to r**8
    p = 1.0 + r * (1.0 + r * (1 / 2 + r * (1 / 6 + r * (1 / 24 + r * (1 / 120 + r * (
        1 / 720 + r * (1 / 5040 + r * (1 / 40320))))))))
    return p * np.int64((n + 1023) << 52).view(np.float64)  # 2**n: its exponent bits alone
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-exp-approx", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
@njit
def _exp_loop(v, out):
    for i in range(v.size):
        out[i] = exp_approx(v[i])
    return out


_v = np.concatenate([np.linspace(-700, 700, 200_001), np.random.default_rng(17).uniform(-50, 50, 100_000)])
_got = _exp_loop(_v, np.empty_like(_v))
_rel = np.abs(_got / np.exp(_v) - 1)
check(_rel.max() < 1e-9, "the relative error of exp_approx on 300,001 points of [-700, 700] stays below 1e-9",
      got=f"{_rel.max():.2e} at v = {_v[_rel.argmax()]!r}", expected="below 1e-9")
assert_equal(exp_approx(0.0), 1.0, "exp_approx(0.0)")
assert_close(exp_approx(1.0), math.e, rtol=1e-9, atol=0, what="exp_approx(1.0)")
assert_close(exp_approx(-700.0), math.exp(-700.0), rtol=1e-9, atol=0, what="exp_approx(-700.0), near the smallest "
             "normal float64 (about e**-708)")
_calls = math_library_calls(_exp_loop, _v, _got)
check(not _calls, "a loop over exp_approx calls nothing from the math library (each call is one number at a "
      "time, and stops the compiler from vectorising the loop); got the functions it calls", got=_calls)
_vector_ops = simd_float_ops(_exp_loop, _v, _got)
check(_vector_ops > 0, "the compiler vectorised the loop over exp_approx (its machine code holds vector arithmetic): "
      "a loop inside exp_approx whose trip count depends on v (building 2**n by repeated multiplication, say) "
      "keeps the loop over it one number at a time; got the loop's vector arithmetic instructions", got=_vector_ops, expected="at least 1")
print(f"✓ exp_approx: largest relative error {_rel.max():.1e} on [-700, 700], no library call")

# %% [markdown]
# Time it: the same loop with your exp and with `math.exp`, against numpy's exp, one
# thread each. `simd_float_ops` counts the vector instructions in each loop's compiled code.

# %%
@njit
def _libm_exp_loop(v, out):
    for i in range(v.size):
        out[i] = math.exp(v[i])
    return out


_V = np.random.default_rng(18).uniform(-20, 20, 512 * 1024)
_out = np.empty_like(_V)
_t_yours, _t_libm = median_time(lambda: _exp_loop(_V, _out)), median_time(lambda: _libm_exp_loop(_V, _out))
_t_np = median_time(lambda: np.exp(_V))
print(f"exp of {_V.size:,} float64: exp_approx loop {_t_yours * 1e3:.2f} ms | math.exp loop {_t_libm * 1e3:.2f} ms "
      f"({_t_libm / _t_yours:.1f}x yours) | numpy {_t_np * 1e3:.2f} ms ({_t_np / _t_yours:.1f}x yours)")
print(f"vector instructions: exp_approx loop {simd_float_ops(_exp_loop, _V, _out)}, "
      f"math.exp loop {simd_float_ops(_libm_exp_loop, _V, _out)}, calls: {math_library_calls(_libm_exp_loop, _V, _out)}")

# %% [markdown]
# Expect your loop to beat the `math.exp` loop several times over and to run about as fast
# as numpy's exp, which uses the same idea in hand-tuned code.
#
# The `math.exp` loop's calls may read like a vectorised loop: two names such as `exp.f64`
# and `exp.v8f64`. The second is the compiler widening the loop to 8 lanes and asking for
# the exp of 8 numbers at once; with no vector math library to supply one (numba uses
# Intel's SVML when the `icc_rt` package is installed), that vector exp becomes 8 calls of
# the one-number exp in the machine code, one per lane, and `exp.f64` serves the
# iterations left over after the last full group of 8. The loop does nothing but call,
# so its count of vector arithmetic is 0 and its time is 8 calls per 8 numbers:
# vectorised in name, not in speed.
#
# ### erf on your exp: exact GELU at full speed (provided)
#
# The same idea gives erf. For $a \ge 0$, $\operatorname{erfc}(a) = t\,e^{-a^2 + Q(t)}$ with
# $t = 1/(1 + a/2)$, where $Q$ is a smooth function of $t \in (0, 1]$: a polynomial of
# degree 10 fits it to $10^{-8}$ (the cell after the kernels fits it against the C library's
# erfc and prints the error). Then $\Phi(x) = \tfrac12\operatorname{erfc}(-x/\sqrt2)$, GELU is
# $x\,\Phi(x)$, and its slope is $\Phi(x) + x\,\varphi(x)$ with
# $\varphi(x) = e^{-x^2/2}/\sqrt{2\pi}$: one or two of your exps per element, no call. The
# kernels below read and write float32 and compute in float64, because $a^2$ rounded to
# float32 would cost every tail value a few units in its last place. One more thing stops
# vectorisation here: numba checks every division for a zero divisor (to raise
# `ZeroDivisionError` as Python does), a branch in every iteration; `error_model="numpy"`
# gives IEEE's answer (inf) instead and lets the loop vectorise.

# %%
#| export
# Q(t), highest power first: erfc(a) = t exp(-a^2 + Q(t)), t = 1 / (1 + a/2), a >= 0. A
# least-squares fit of degree 10 at 4,000 Chebyshev points of t (a in [0, 10.5]) against
# the C library's erfc; relative error below 1e-8 (the next cell refits it).
ERFC_Q = (-0.1406173352681586, 0.9643716998243123, -2.768500244465489, 4.210768261304685,
          -3.529170621549964, 1.6555893170743912, -0.7081292021953514, 0.22495894446208659,
          0.35462745852839905, 1.0016734505162022, -1.2655717252509415)
_A_TAIL = 14.0  # erfc(14) ~ 1e-87: past it, Phi is 0 or 1 in any float


@njit(error_model="numpy", cache=CACHE)
def exp_approx_array(v):
    """exp_approx of each element of a 1-D float64 array, in one compiled loop: a new array."""
    out = np.empty_like(v)
    for i in range(v.size):
        out[i] = exp_approx(v[i])
    return out


@njit(inline="always", error_model="numpy", cache=CACHE)
def _half_erfc(a):
    """erfc(a) / 2 for a float64 a in [0, 14], from exp_approx and ERFC_Q."""
    t = 1.0 / (1.0 + 0.5 * a)
    q = ERFC_Q[0]
    for c in ERFC_Q[1:]:  # a loop over a tuple: unrolled when compiled
        q = q * t + c
    return 0.5 * t * exp_approx(q - a * a)


@njit(fastmath={"contract"}, error_model="numpy", cache=CACHE)
def _gelu_float32(x, out):
    for i in range(x.size):
        v = np.float64(x[i])
        a = abs(v) * 0.7071067811865476
        # Vectorised, both sides of the choice are computed: min keeps the unused one inside
        # exp_approx's range. A NaN compares False: h = 0, and v * h stays NaN.
        h = _half_erfc(min(a, _A_TAIL)) if a < _A_TAIL else 0.0
        out[i] = v * (h if v <= 0.0 else 1.0 - h)
    return out


@njit(fastmath={"contract"}, error_model="numpy", cache=CACHE)
def _gelu_backward_float32(x, y, grad, out):
    for i in range(x.size):
        v = np.float64(x[i])
        a = abs(v) * 0.7071067811865476
        density = exp_approx(-a * a) * 0.3989422804014327 if a < _A_TAIL else 0.0  # phi(x) = e^(-x^2/2) / sqrt(2 pi)
        cdf = y[i] / v if v != 0.0 else 0.5  # Phi(x) = GELU(x) / x: the forward's output saves an erfc
        out[i] = np.float64(grad[i]) * (cdf + v * density)
    return out


def gelu_float32(x):
    """Exact GELU, x Phi(x), of a float32 array, with no math-library call per element.

    Contract: `x` a float32 numpy array of any shape; returns a new float32 array of its
    shape, within 2 units in the last place of module 02's exact GELU (inf gives inf,
    -inf and NaN give NaN)."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    return _gelu_float32(flat, np.empty_like(flat)).reshape(np.shape(x))


def gelu_backward_float32(x, y, grad):
    """grad * (Phi(x) + x phi(x)), exact GELU's backward, given its input x and output y =
    GELU(x): float32 arrays of one shape, as module 06's rule computes it."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out_flat = np.ascontiguousarray(y, dtype=np.float32).reshape(-1)
    g = np.ascontiguousarray(grad, dtype=np.float32).reshape(-1)
    return _gelu_backward_float32(flat, out_flat, g, np.empty_like(flat)).reshape(np.shape(x))


class compiled(DispatchMode):
    """While active, exact GELU on float32 tensors (forward and backward) runs through the
    kernels above; every other op, and GELU in other dtypes or its tanh form, as before.

    Why: the dispatcher's extension point (module 01's DispatchMode) swaps an op's kernel
    without touching the op, as PyTorch's dispatcher picks a CPU kernel per op and dtype.
    """

    def dispatch(self, op, fn, args, kwargs):
        if op == "gelu" and kwargs.get("approximate") == "none":
            x = args[0].numpy()
            if x.dtype == np.float32:
                return gelu_float32(x)
        elif op == "GeluBackward":
            node, grad = args
            x = node.inputs[0].numpy()
            if node.attrs["approximate"] == "none" and x.dtype == np.float32 and np.shape(grad) == x.shape:
                return (gelu_backward_float32(x, node.output, grad),)
        return fn(*args, **kwargs)


# %%
_erfc_libm = np.vectorize(math.erfc)
_tmin = 1 / (1 + 0.5 * 10.5)  # t at a = 10.5: erfc(10.5) is far below float32's smallest number
_u = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)  # Chebyshev points of [-1, 1]: no wiggles at the ends
_t = (1 + _tmin) / 2 + (1 - _tmin) / 2 * _u
_a = (1 / _t - 1) / 0.5
_q = np.polynomial.Polynomial.fit(_t, np.log(_erfc_libm(_a) / _t) + _a * _a, 10).convert()
_aa = np.linspace(0, 10, 100_001)
_tt = 1 / (1 + 0.5 * _aa)
_fit_err = np.max(np.abs(_tt * np.exp(-_aa * _aa + _q(_tt)) / _erfc_libm(_aa) - 1))
_kernel_err = np.max(np.abs(_tt * np.exp(-_aa * _aa + np.polyval(ERFC_Q, _tt)) / _erfc_libm(_aa) - 1))
print(f"degree-10 fit of Q: largest relative error of erfc on [0, 10] {_fit_err:.1e}; "
      f"with the kernel's coefficients ERFC_Q {_kernel_err:.1e}")

# %% [markdown]
# The check compares both kernels with module 02's GELU and module 06's rule, then runs a
# small MLP's forward and backward inside `with compiled():` and outside it.

# %%
_xg = np.concatenate([np.linspace(-13, 13, 100_001), [0.0, -0.0, 1e4, -1e4, 40.0, -40.0]]).astype(np.float32)
_t = Tensor(_xg, requires_grad=True)
_y = nn.functional.gelu(_t)
_y.backward(np.ones_like(_xg))
_ref_y, _ref_g = _y.numpy(), _t.grad.numpy()
_ulps = np.abs(gelu_float32(_xg).astype(np.float64) - _ref_y) / np.spacing(np.abs(_ref_y).astype(np.float32)).clip(min=np.float32(1e-45))
check(np.max(_ulps) <= 2, "gelu_float32 against module 02's exact GELU on [-13, 13]: at most 2 units in the last place",
      got=f"{np.max(_ulps):.1f} ulps at x = {_xg[np.argmax(_ulps)]!r}", expected="<= 2")
_gk = gelu_backward_float32(_xg, _ref_y, np.ones_like(_xg))
assert_close(_gk, _ref_g, rtol=1e-6, atol=1e-7, what="gelu_backward_float32 against module 06's rule")
_special = np.array([np.inf, -np.inf, np.nan], np.float32)
_s = gelu_float32(_special)
check(_s[0] == np.inf and np.isnan(_s[1]) and np.isnan(_s[2]), "gelu_float32 at inf, -inf, nan", got=_s,
      expected="[inf, nan, nan] as module 02's")
_mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1))
_xb = Tensor(np.random.default_rng(19).standard_normal((16, 32)).astype(np.float32))
_mlp(_xb).sum().backward()
_plain = [p.grad.numpy().copy() for p in _mlp.parameters()]
_mlp.zero_grad()
with compiled():
    _mlp(_xb).sum().backward()
for _p, _g0 in zip(_mlp.parameters(), _plain):
    assert_close(_p.grad.numpy(), _g0, rtol=1e-5, atol=1e-6, what="an MLP's gradients with and without compiled()")
_Xg = Tensor(np.random.default_rng(20).standard_normal((256, 1024)).astype(np.float32), requires_grad=True)


def _gelu_step():
    _Xg.grad = None
    nn.functional.gelu(_Xg).sum().backward()


def _gelu_step_compiled():
    with compiled():
        _gelu_step()


_t_plain, _t_comp = median_time(_gelu_step), median_time(_gelu_step_compiled)
print(f"exact GELU forward+backward on 256 x 1024 float32: module 02/06 (numpy) {_t_plain * 1e3:.2f} ms | "
      f"compiled() {_t_comp * 1e3:.2f} ms ({_t_plain / _t_comp:.0f}x)")

# %% [markdown]
# Expect the compiled step to be an order of magnitude faster than numpy's: the erf was
# nearly all of the time, and it is now a few dozen vectorised multiply-adds. `tito bench`
# (workload `gelu_exact`) times PyTorch's own exact GELU against `compiled()` on the same
# array and prints the ratio on your machine.

# %% [markdown]
# ## 3. A parallel reduction without races
#
# Summing in parallel is harder than mapping: every element contributes to *one* number.
# Here is the first kernel everyone writes, and it is wrong:

# %%
@njit(parallel=True)
def racy_sum(x):
    total = np.zeros(1)
    for i in prange(x.shape[0]):
        total[0] += x[i]
    return total[0]


# %% [markdown]
# `total[0] += x[i]` is three steps: read `total[0]`, add, write it back. Two threads that
# read the same old value both write back their own sum, and one addition is lost: a
# **data race**. Whether you see it depends on the machine: how many cores numba may use,
# and how the threads happen to interleave. Predict: on this machine, in how many of 20 runs
# over 3 million elements is the result wrong?

# %%
predicted_wrong_runs = None  # your number, out of 20

# %%
_xr = np.random.default_rng(4).standard_normal(3_000_000)
_exact = np.sum(_xr)
_wrong = sum(abs(racy_sum(_xr) - _exact) > 1e-9 * np.abs(_xr).sum() for _ in range(20))
print(f"racy_sum with {numba.config.NUMBA_NUM_THREADS} thread(s) available: wrong in {_wrong} of 20 runs "
      f"| your prediction: {'none given' if predicted_wrong_runs is None else predicted_wrong_runs}")

# %% [markdown]
# On one core the threads never overlap, and the race never shows; on several it shows in
# some runs, not all. A test that runs a kernel once therefore proves nothing about races.
# The checks of this notebook look for the cause instead. `parallel_write_clashes` (from
# `tinytorch.testing`) runs a kernel as plain Python, one `prange` iteration after another,
# and records which iteration wrote each element; two iterations that write the same
# element are a race on any machine, on every run:

# %%
_, _clashes = parallel_write_clashes(racy_sum, np.arange(6.0))
print("(array shape, element, first iteration, second iteration):", _clashes)

# %% [markdown]
# One kernel looks like a race and is not:
#
# ```python
# total = 0.0
# for i in prange(n):
#     total += x[i]
# ```
#
# A **scalar** updated with `+=` in a `prange` loop is recognised by numba as a
# **reduction**: each thread gets its own private copy, and numba adds the copies at the
# end. That is correct and fast, but it is numba's work, not yours, and it does not carry
# over to anything but a scalar (an array slot, as above, races) or to a GPU. Write the
# reduction without it: `parallel_sum(x, n_chunks)` splits the work among `n_chunks`
# parallel iterations, and no two of them may write the same memory. Then the check runs
# it under `parallel_write_clashes`.
#
# Accumulate in float64: a float32 running sum of a million values loses digits (each
# addition rounds to 24 bits).
#
# <details><summary>Hint 1</summary>
#
# If no two iterations may share an accumulator, how many accumulators do you need, and
# what is left to do once every iteration has finished with its own?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Split 10 elements among 4 iterations, then 5 elements among 8. Which piece size leaves
# nothing out, and where does iteration `c` start and stop when the array ends first?
# </details>
#
# <details><summary>The approach</summary>
#
# Every iteration gets something of its own to write, and nobody else writes it; the
# final combination of the few per-iteration results runs after the parallel loop, on
# one thread, so it needs no protection. Contiguous pieces keep each iteration's reads in
# consecutive cache lines. The same two levels, private partial results and then a small
# final reduction, are how the GPU reduction of section 9 works.
# </details>

# %% nbgrader={"grade": false, "grade_id": "parallel-sum", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@njit(parallel=True, cache=CACHE)
def parallel_sum(x, n_chunks):
    """The sum of the 1-D array `x`, as a float64, computed by `n_chunks` parallel workers.

    Contract: `x` a 1-D numeric array (possibly empty: the sum is 0.0); `n_chunks >= 1`.
    Equals np.sum(x, dtype=np.float64) within float64 rounding. The parallel loop runs
    `n_chunks` iterations, each summing one contiguous piece of x, and no two of them write
    the same memory.
    """
    # Idea: the race above shared one slot; here nothing written is shared.
    ### BEGIN SOLUTION
    n = x.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    partials = np.zeros(n_chunks, dtype=np.float64)
    for c in prange(n_chunks):
        start = c * size
        end = min(start + size, n)
        acc = 0.0
        for i in range(start, end):
            acc += x[i]
        partials[c] = acc
    return partials.sum()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-parallel-sum", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_ones = np.ones(3_000_000, dtype=np.float32) * np.float32(0.1)
assert_close(parallel_sum(_ones, 64), 3_000_000 * float(np.float32(0.1)), rtol=1e-9,
             what="3e6 times 0.1: float64 partials keep the digits (a float32 running sum rounds each addition "
             "to 24 bits)")
_v = np.random.default_rng(4).standard_normal(10_007).astype(np.float32)
assert_close(parallel_sum(_v, 64), np.sum(_v, dtype=np.float64), rtol=1e-12, what="parallel_sum of 10,007 floats")
assert_close(parallel_sum(_v, 3), np.sum(_v, dtype=np.float64), rtol=1e-12, what="3 chunks (not a divisor)")
assert_close(parallel_sum(np.arange(5, dtype=np.float32), 8), 10.0, what="more chunks than elements (some empty)")
assert_equal(parallel_sum(np.zeros(0, np.float32), 4), 0.0, "the sum of nothing")
_, _clashes = parallel_write_clashes(parallel_sum, _v[:100], 8)
check(not _clashes, "no two iterations of parallel_sum's prange loop write the same element (a race on a "
      "machine with several cores); got lists (array shape, element, first iteration, second iteration)",
      got=_clashes)
for _chunks in (8, 3):
    _, _trips = prange_trips(parallel_sum, _v[:100], _chunks)
    check(_trips == _chunks, f"parallel_sum(x, {_chunks}) splits the work among {_chunks} parallel iterations (a "
          "prange over every element with a scalar += is numba's reduction, not yours); got the prange loop's "
          "iteration count", got=_trips, expected=_chunks)
_, _reads = element_reads(parallel_sum, _v[:100], 4, of=0)  # the iterations run one after another here
_runs = 1 + sum(b != a + 1 for a, b in zip(_reads, _reads[1:]))
check(_runs <= 4, "parallel_sum(x, 4): each iteration reads one contiguous piece of x (an iteration that strides "
      "through x uses one float of each cache line it loads, so every iteration loads all of x's lines: n_chunks "
      "times the memory traffic); got the number of runs of consecutive elements in the order the reads happened",
      got=_runs, expected="at most 4")
print("✓ parallel_sum equals numpy; sum of 3e6 x 0.1 =", parallel_sum(_ones, 64))

# %% [markdown]
# ## 4. Matmul: loop order and blocking
#
# $C = AB$ with $A$ of shape $(n, k)$ and $B$ of shape $(k, m)$ is three nested loops, and
# all six orders give the same numbers. They do not give the same speed. Memory moves in
# **cache lines** of 64 bytes (16 float32): reading `B[p, j]` also brings `B[p, j+1..j+15]`
# into the cache for free, while reading `B[p+1, j]` is a different line, `m` floats away.
#
# - **i-j-k** (provided, `matmul_ijk`): the inner loop runs down a *column* of B, one
#   cache line per multiply, and uses one float of each line.
# - **i-k-j** (yours, `matmul_ikj`): the same three loops in the order i, k, j. Where does
#   its inner loop walk in B and in C, what stays fixed while it runs, and how many floats
#   of each cache line does it use? An inner loop over contiguous memory is also one the
#   compiler can vectorise (SIMD: 8 or 16 multiply-adds per instruction).
# - **blocked** (yours, `matmul_blocked`): i-k-j inside square tiles of `block`×`block`, so
#   that the tile of B being reused stays in the fast cache (L1/L2) while all the rows of
#   the A tile use it, instead of streaming all of B from memory once per row of A.
#
# Parallelise one loop of each with `prange`, chosen so that no two of its iterations ever
# write the same element of C (section 3); the checks run both under
# `parallel_write_clashes`. numba's `prange` takes no step: `prange(0, n, block)` does not
# compile, so a parallel loop over tiles counts tiles, not starting rows.
#
# One numba detail matters for speed: the compiler vectorises an inner loop only when it can
# see that the indices are in range and non-negative. A loop `for j in range(m)` over whole
# rows is fine; a loop `for j in range(j0, j1)` inside a tile is not (numba must handle
# negative indices, which wrap around as in Python). Write your tile loops so that the
# compiler can see it: the check counts the vector instructions of your innermost loop.
#
# And one numba habit for debugging: compiled code checks no index against the array's
# bounds, so a tile loop that runs past the last row writes into memory that belongs to
# something else, and the process may die with no Python error at all (a dead Jupyter
# kernel, a "Fatal Python error" in `tito test`). While you develop, set the environment
# variable `NUMBA_BOUNDSCHECK=1` before numba is imported (or pass `boundscheck=True` to one
# `@njit`): every index is then checked and a stray one raises an `IndexError` that names
# the line. Take it away to measure: the checks cost time and stop vectorisation.
#
# <details><summary>Hint 1 (i-k-j)</summary>
#
# Write $C_{ij} = \sum_p A_{ip} B_{pj}$. Which index must the innermost loop run over so
# that consecutive iterations touch consecutive memory in both B and C? What must C hold
# before the first addition?
# </details>
#
# <details><summary>Hint 2 (blocked)</summary>
#
# Each of the three loops splits in two: one over tiles, one within a tile. Of the three
# loops over tiles, which may run in parallel without two iterations adding into the same
# element of C? (The check tells you if two do.) And where does the last tile end when a
# size is not a multiple of `block`?
# </details>
#
# <details><summary>The approach</summary>
#
# i-k-j is the textbook loops in another order: C is accumulated instead of written once,
# so it has to start from something, and the value of A that the innermost loop keeps
# reusing belongs in a local variable. The parallel loop must be one whose iterations own
# disjoint parts of C. Blocked is the same computation with every loop split into tiles;
# the tile loops' order decides which tile stays in cache while it is reused, and the
# in-tile loops keep the i-k-j order. The vectorisation detail above decides how the
# innermost loop is written.
# </details>

# %% nbgrader={"grade": false, "grade_id": "matmul-cpu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@njit(cache=CACHE)
def matmul_ijk(a, b):
    """C = A @ B with the textbook loop order (inner loop down a column of B): the baseline."""
    n, k = a.shape
    m = b.shape[1]
    c = np.zeros((n, m), dtype=a.dtype)
    for i in range(n):
        for j in range(m):
            acc = 0.0
            for p in range(k):
                acc += a[i, p] * b[p, j]
            c[i, j] = acc
    return c


@njit(parallel=True, fastmath=True, cache=CACHE)
def matmul_ikj(a, b):
    """C = A @ B, loop order i-k-j: the inner loop walks rows of B and C contiguously.

    Contract: `a` (n, k) and `b` (k, m) C-contiguous float arrays of one dtype. Returns a new
    (n, m) array of that dtype equal to a @ b within float tolerance (zeros when k == 0).
    Rows of C are computed in parallel.
    """
    # Idea: which operand can the innermost loop walk contiguously, and what stays fixed?
    ### BEGIN SOLUTION
    n, k = a.shape
    m = b.shape[1]
    c = np.zeros((n, m), dtype=a.dtype)
    for i in prange(n):
        for p in range(k):
            aip = a[i, p]
            for j in range(m):
                c[i, j] += aip * b[p, j]
    return c
    ### END SOLUTION


@njit(parallel=True, fastmath=True, cache=CACHE)
def matmul_blocked(a, b, block=64):
    """C = A @ B computed tile by tile (block × block), i-k-j inside each tile.

    Contract: as matmul_ikj, plus `block >= 1`; any sizes (the edge tiles are partial).
    Row blocks of C are computed in parallel.
    """
    # Idea: reuse a tile of B while it is in cache, for every row of the A tile.
    ### BEGIN SOLUTION
    n, k = a.shape
    m = b.shape[1]
    c = np.zeros((n, m), dtype=a.dtype)
    for bi in prange((n + block - 1) // block):
        i0 = bi * block
        i1 = min(i0 + block, n)
        for p0 in range(0, k, block):
            p1 = min(p0 + block, k)
            for j0 in range(0, m, block):
                j1 = min(j0 + block, m)
                for i in range(i0, i1):
                    c_row = c[i, j0:j1]
                    for p in range(p0, p1):
                        aip = a[i, p]
                        b_row = b[p, j0:j1]
                        for j in range(j1 - j0):
                            c_row[j] += aip * b_row[j]
    return c
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-matmul-cpu", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(5)
for _n, _k, _m in [(7, 5, 3), (1, 1, 1), (33, 70, 65), (4, 0, 3)]:
    _a = _rng.standard_normal((_n, _k)).astype(np.float32)
    _b = _rng.standard_normal((_k, _m)).astype(np.float32)
    assert_close(matmul_ijk(_a, _b), _a @ _b, rtol=1e-4, atol=1e-4, what=f"matmul_ijk {(_n, _k)} @ {(_k, _m)}")
    assert_close(matmul_ikj(_a, _b), _a @ _b, rtol=1e-4, atol=1e-4, what=f"matmul_ikj {(_n, _k)} @ {(_k, _m)}")
    for _blk in (1, 16, 64):
        assert_close(matmul_blocked(_a, _b, _blk), _a @ _b, rtol=1e-4, atol=1e-4,
                     what=f"matmul_blocked block={_blk}, {(_n, _k)} @ {(_k, _m)}")
check(matmul_ikj(_a, _b).dtype == np.float32, "the product keeps A's dtype", got=matmul_ikj(_a, _b).dtype)
_a, _b = _rng.standard_normal((9, 6)).astype(np.float32), _rng.standard_normal((6, 5)).astype(np.float32)
for _what, _run in [("matmul_ikj", lambda: parallel_write_clashes(matmul_ikj, _a, _b)),
                    ("matmul_blocked (block 2)", lambda: parallel_write_clashes(matmul_blocked, _a, _b, 2))]:
    _c, _clashes = _run()
    check(not _clashes, f"no two iterations of {_what}'s prange loop write the same element of C; got lists "
          "(array shape, element, first iteration, second iteration)", got=_clashes)
    assert_close(_c, _a @ _b, rtol=1e-4, atol=1e-4, what=f"{_what} run one iteration after another")
_a, _b = _rng.standard_normal((8, 12)).astype(np.float32), _rng.standard_normal((12, 12)).astype(np.float32)
for _what, _extra in [("matmul_ikj", ()), ("matmul_blocked (block 4)", (4,))]:
    _, _reads = element_reads(matmul_ikj if _extra == () else matmul_blocked, _a, _b, *_extra, of=1)
    _along = float(np.mean(np.diff(_reads) == 1))
    check(_along > 0.5, f"{_what}: the innermost loop runs along a row of B, so most reads of B come right after "
          f"their neighbour in memory (i-j-k: none do)", got=f"{_along:.0%} of consecutive reads", expected="over 50%")
for _what, _fn, _extra in [("matmul_ikj", matmul_ikj, ()), ("matmul_blocked (block 4)", matmul_blocked, (4,))]:
    _simd = simd_float_ops(_fn, _a, _b, *_extra)
    check(_simd > 0, f"{_what}: numba vectorised the innermost loop (see the vectorisation note above): its "
          "compiled code holds SIMD arithmetic, several multiply-adds in one instruction", got=_simd,
          expected="at least one vector instruction")
_reuse = float(np.median(reuse_distances(_reads)))
check(_reuse <= 2 * 4 * 4, "matmul_blocked (block 4) reads an element of B again while its 4 x 4 tile is in use: "
      "the median number of reads of B between two reads of one element is at most 2 x 16 (plain i-k-j over this "
      "(12, 12) B: all 144)", got=_reuse, expected="at most 32")
print("✓ i-k-j and blocked matmuls equal numpy; e.g. a (33, 70) @ (70, 65) with blocks of 16; median reuse of B "
      "with 4 x 4 tiles:", _reuse)

# %% [markdown]
# ### Systems look: does loop order matter?
#
# All three do the same $2nkm$ floating-point operations. At $n = k = m = 256$, how many
# times faster is i-k-j than i-j-k? And numpy's BLAS than your blocked kernel?

# %%
predicted_loop_order_ratio = None  # your number: t(ijk) / t(ikj)

# %%
_N = 256
_A = np.random.default_rng(6).standard_normal((_N, _N)).astype(np.float32)
_Bm = np.random.default_rng(7).standard_normal((_N, _N)).astype(np.float32)
_times = {}
for _name, _fn in [("ijk", lambda: matmul_ijk(_A, _Bm)), ("ikj", lambda: matmul_ikj(_A, _Bm)),
                   ("blocked", lambda: matmul_blocked(_A, _Bm, 64)), ("numpy", lambda: _A @ _Bm)]:
    _times[_name] = median_time(_fn, repeats=3)
_flops = 2 * _N ** 3
for _name, _t in _times.items():
    print(f"{_name:8s} {_t * 1e3:8.2f} ms  {_flops / _t / 1e9:7.2f} GFLOP/s")
print(f"measured t(ijk)/t(ikj) = {_times['ijk'] / _times['ikj']:.1f} | your prediction:",
      predicted_loop_order_ratio if predicted_loop_order_ratio is not None else "none given")

# %% [markdown]
# Expect i-k-j several times faster than i-j-k (contiguous, vectorised inner loop). Do not
# expect the blocked kernel to beat i-k-j at this size: B (256 KiB) still fits in a typical
# L2 cache, so there is little reuse left to win, while the extra loops cost something.
# Blocking pays off only once B falls out of the caches that feed the inner loop, and on a
# processor with a large L3 (tens of MiB) a plain i-k-j loop, streaming B with the
# hardware prefetcher's help, can stay ahead even at n = 2048: the check does not time your
# tiles, it counts the reuse they achieve. Blocking becomes decisive with what BLAS adds to
# it, so expect numpy's BLAS to stay ahead of both: it packs tiles into a layout made for
# the SIMD units, keeps a small block of C in registers, and is tuned per processor. How far ahead depends on the processor and
# its cache sizes: all four ran on one thread, one core against one core.
#
# ## 5. im2col, compiled
#
# Module 09 turned a convolution into one matrix product by copying each input window into
# a column (`im2col`) with strided views. The same gather as an explicit loop makes the
# index arithmetic yours: for each output entry, which input pixel (or padding) does it
# hold? The layout is module 09's and `torch.nn.functional.unfold`'s: one row per
# (channel, kernel row, kernel column), in that order, one column per output position,
# in row-major order.
#
# Where does the parallel loop go? Count its iterations for one RGB image at inference
# time, or for a 3×3 kernel's rows, against a machine's 8 to 64 cores; and count how many
# times it starts (each start wakes the thread pool and waits for its slowest thread). The
# check asks for one parallel loop per call, with at least one iteration per (image,
# channel) pair.
#
# <details><summary>Hint 1</summary>
#
# $H_{out} = \lfloor (H + 2p - k_h) / s \rfloor + 1$, and the same for the width.
# </details>
#
# <details><summary>The approach</summary>
#
# Fix a kernel tap (a channel, a kernel row, a kernel column): that is one output row, and
# as the output position moves by one, the input position it reads moves by the stride.
# Padding is an input position outside the image, which reads as 0. The parallel loop goes
# where its iterations own disjoint parts of the output, and there are enough of them.
# </details>

# %% nbgrader={"grade": false, "grade_id": "im2col", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@njit(parallel=True, cache=CACHE)
def im2col(x, kh, kw, stride=1, padding=0):
    """The column matrix of a batch of images (torch.nn.functional.unfold's layout).

    Contract: `x` a 4-D array (N, C, H, W); kh, kw, stride >= 1 and padding >= 0 ints, with
    the padded image at least one kernel large. Returns an (N, C*kh*kw, H_out*W_out) array of
    x's dtype. Its rows run over (channel, kernel row, kernel column) and its columns over the
    output positions, both row-major; an entry is the input pixel that this kernel offset
    sees when the kernel sits at this output position (module 09's conv2d, with its stride
    and padding), 0 where that pixel lies in the padding. One parallel loop per call, of at
    least N*C iterations, so that one image, or one channel, still keeps the cores busy.
    """
    # Idea: each (output row, output column) pair names one input pixel, or the padding.
    ### BEGIN SOLUTION
    n_img, chans, h, w = x.shape
    h_out = (h + 2 * padding - kh) // stride + 1
    w_out = (w + 2 * padding - kw) // stride + 1
    cols = np.zeros((n_img, chans * kh * kw, h_out * w_out), dtype=x.dtype)
    for pair in prange(n_img * chans):
        n, c = pair // chans, pair % chans
        for u in range(kh):
            for v in range(kw):
                row = (c * kh + u) * kw + v
                for i in range(h_out):
                    y = i * stride + u - padding
                    if y < 0 or y >= h:
                        continue
                    for j in range(w_out):
                        xx = j * stride + v - padding
                        if 0 <= xx < w:
                            cols[n, row, i * w_out + j] = x[n, c, y, xx]
    return cols
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-im2col", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _unfold_reference(x, kh, kw, s, p):
    """torch.nn.functional.unfold's result, with numpy loops (slow, obviously right)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    ho, wo = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    win = np.stack([xp[:, :, i * s:i * s + kh, j * s:j * s + kw] for i in range(ho) for j in range(wo)], -1)
    return win.reshape(n, c * kh * kw, ho * wo)


_x = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4)
for _kh, _kw, _s, _p in [(3, 3, 1, 0), (3, 2, 2, 1), (1, 1, 1, 0), (5, 4, 1, 0), (2, 2, 3, 2)]:
    assert_close(im2col(_x, _kh, _kw, _s, _p), _unfold_reference(_x, _kh, _kw, _s, _p),
                 what=f"im2col kernel {_kh}x{_kw}, stride {_s}, padding {_p}")
for _dtype in (np.float32, np.float64, np.int64):
    assert_equal(im2col(_x.astype(_dtype), 2, 2, 1, 1).dtype, np.dtype(_dtype), f"im2col of {np.dtype(_dtype)} "
                 f"images returns {np.dtype(_dtype)} columns (x's dtype: a float64 model must not be rounded)")
_one = im2col(np.ones((1, 1, 2, 2), np.float32), 2, 2, 1, 1)
assert_equal(_one[0, 0].tolist(), [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0],
             "2x2 kernel on a padded 2x2 image: kernel tap (0, 0) only sees the image from position (1, 1)")
_, _clashes = parallel_write_clashes(im2col, _x[:, :2, :4, :3], 2, 2, 1, 1)
check(not _clashes, "no two iterations of im2col's prange loop write the same element of the columns; got lists "
      "(array shape, element, first iteration, second iteration)", got=_clashes)
_, _regions = parallel_regions(im2col, _x, 3, 3, 1, 1)
check(_regions == 1, "im2col starts one parallel loop per call (a prange inside plain loops starts once per outer "
      "iteration, each time with only its own few iterations to share); got the number of starts on 2 images "
      "of 3 channels", got=_regions, expected=1)
_, _trips = prange_trips(im2col, _x, 3, 3, 1, 1)
check(_trips >= 2 * 3, "im2col's parallel loop has at least one iteration per (image, channel) pair, so that "
      "one image at inference, or one channel, still has work for every core; got its iterations on 2 images "
      "of 3 channels", got=_trips, expected=">= 6")
print("✓ im2col equals unfold; tap (0, 0) over a padded 2x2 image:", _one[0, 0])

# %% [markdown]
# ### Systems look: the compiled gather against numpy's views
#
# Module 09 built the same columns with numpy: one strided view of all the windows (no copy)
# and one `reshape`, which copies them in a single C loop. Which is faster on a batch of
# 8 images of 16×32×32 with a 3×3 kernel, your explicit loop or numpy? Guess the ratio.

# %%
predicted_im2col_ratio = None  # your number: numpy (module 09) time / numba time

# %%
from tinytorch.nn.conv import im2col as im2col_numpy  # module 09's, strided views + one copy

_imgs = np.random.default_rng(14).standard_normal((8, 16, 32, 32)).astype(np.float32)
assert_close(im2col(_imgs, 3, 3, 1, 1), im2col_numpy(_imgs, 3, 1, 1), what="numba im2col against module 09's")
_t_nb_cols = median_time(lambda: im2col(_imgs, 3, 3, 1, 1))
_t_np_cols = median_time(lambda: im2col_numpy(_imgs, 3, 1, 1))
_t_np_sum = median_time(lambda: np.sum(_imgs, dtype=np.float64))
_t_nb_sum = median_time(lambda: parallel_sum(_imgs.reshape(-1), 64))
print(f"im2col: numba {_t_nb_cols * 1e3:.2f} ms | numpy (module 09) {_t_np_cols * 1e3:.2f} ms | "
      f"ratio {_t_np_cols / _t_nb_cols:.1f}x | your prediction:",
      predicted_im2col_ratio if predicted_im2col_ratio is not None else "none given")
print(f"sum of {_imgs.size:,} floats: parallel_sum {_t_nb_sum * 1e3:.2f} ms | np.sum {_t_np_sum * 1e3:.2f} ms")

# %% [markdown]
# Both im2col versions are a gather: they read each input pixel about nine times and write
# nine times as many floats as they read, so both are limited by memory and land within a
# small factor of each other; which one wins depends on the cache sizes (both ran on one
# thread). The explicit loop has one advantage numpy's views lack: it could
# fuse more work (the padding, a dtype cast, the next layer's layout) into the same pass.
# The parallel sum is slower than `np.sum` on one thread, by several times on most
# machines (the figure above): each chunk's loop is one chain of dependent additions, every
# add waiting for the previous one's result, and numba may not reorder them into several
# independent chains (that changes the rounding) unless `fastmath=True` allows it. numpy's
# sum keeps several partial sums at once (pairwise summation, vectorised). Give the kernel
# cores and it wins back what it lost by spreading the chains over threads.

# %% [markdown]
# ## 6. The roofline: which kernels are limited by memory, which by arithmetic?
#
# A kernel needs time for its arithmetic (FLOPs ÷ peak FLOP/s) and for its memory traffic
# (bytes ÷ bandwidth); it cannot beat the larger of the two. Its **arithmetic intensity**
# $I = \text{FLOPs} / \text{bytes moved}$ says which one binds: the **roofline**
# $\min(\text{peak},\ I \times \text{bandwidth})$ is the best GFLOP/s any kernel of that
# intensity can reach. A sum does 1 FLOP per 4 bytes ($I = 0.25$): memory-bound on every
# machine. An $n \times n$ matmul does $2n^3$ FLOPs on at least $3 \cdot 4n^2$ bytes
# ($I = n/6$): compute-bound once $n$ is large, *if* the kernel reuses data from cache.
#
# This machine's two numbers for one core, measured on one thread like everything else: the
# bandwidth with a large copy (each byte read once and written once), the peak with
# numpy's BLAS matmul (the best kernel available here; the processor's data-sheet peak is
# higher still, and all its cores together reach more of both).

# %%
predicted_bandwidth_gbs = None  # your number: GB/s for a large copy on this machine

# %%
# the fastest of 7 runs of each, one thread: other work on the machine can only slow a run down
BANDWIDTH = copy_bandwidth()  # bytes per second, read + write, of a 64 MiB copy (past every cache)
# FLOP per second: the best BLAS rate seen (here at n = 1024, and at n = 256 in section 4)
PEAK = max(matmul_peak(1024), _flops / _times["numpy"])
print(f"measured bandwidth {BANDWIDTH / 1e9:.1f} GB/s | your prediction:",
      predicted_bandwidth_gbs if predicted_bandwidth_gbs is not None else "none given")
print(f"measured peak (best BLAS sgemm) {PEAK / 1e9:.1f} GFLOP/s; ridge point at "
      f"I = {PEAK / BANDWIDTH:.1f} FLOP/byte")

# %% [markdown]
# Now the kernels of sections 2-5, each at its intensity. FLOPs and bytes are counted from
# the formulas: for bias + GELU, the six operations of $\tfrac12 v (1 + \operatorname{erf}(v /
# \sqrt2))$ with $v = x + b$, counting the erf call as one (it is really a short polynomial),
# on 8 bytes per element (read x, write y); for bias + ReLU, 2 operations on 8 bytes fused
# and on 16 unfused (numpy writes and reads back the temporary `x + b`); for the sum, 1 FLOP on 4 bytes; for the matmuls,
# $2n^3$ FLOPs on the $3 \cdot 4n^2$ bytes of A, B and C (the minimum traffic; a kernel
# without reuse moves far more). The GFLOP/s are measured: the two GELUs' from the times
# section 2 printed, the others here.

# %%
def _kernel_points():
    _v = np.random.default_rng(9).standard_normal(2 ** 23).astype(np.float32)  # 32 MiB: past the caches
    _XL = _v.reshape(-1, 1024)
    parallel_sum(_v, 64)
    pts = [("bias_gelu (fused)", 6 / 8, 6 * _X.size / _t_fused),  # section 2's measurements
           ("numpy unfused gelu", 6 / (8 * 6), 6 * _X.size / _t_unfused),
           ("bias + ReLU (fused)", 2 / 8, 2 * _XL.size / median_time(lambda: _bias_relu(_XL, _B))),
           ("numpy unfused ReLU", 2 / 16, 2 * _XL.size / median_time(lambda: np.maximum(_XL + _B, np.float32(0)))),
           ("parallel_sum", 1 / 4, _v.size / median_time(lambda: parallel_sum(_v, 64)))]
    for name in ("ijk", "ikj", "blocked", "numpy"):
        pts.append((f"matmul {name} (n={_N})", 2 * _N ** 3 / (12 * _N ** 2), _flops / _times[name]))
    return pts


def draw_roofline(ax, points):
    intensity = np.logspace(-2, 3, 200)
    ax.loglog(intensity, np.minimum(PEAK, intensity * BANDWIDTH) / 1e9, "k-", lw=2, label="roofline")
    ax.axvline(PEAK / BANDWIDTH, color="gray", ls=":", lw=1)
    markers = "os^vD<>ph*"
    for (name, i, f), mk in zip(points, markers):
        ax.loglog(i, f / 1e9, mk, ms=8, label=f"{name}: {f / 1e9:.3g} GFLOP/s")
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("GFLOP/s (measured)")
    ax.set_title(f"Roofline of one core of this machine: {BANDWIDTH / 1e9:.0f} GB/s, {PEAK / 1e9:.0f} GFLOP/s")
    ax.legend(fontsize=7, loc="upper left", framealpha=0.9)
    ax.grid(True, which="both", alpha=0.2)


_points = _kernel_points()
fig, ax = plt.subplots(figsize=(8, 5))
draw_roofline(ax, _points)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the picture. Left of the dotted ridge a kernel can at best reach the slanted line
# (bandwidth-bound), right of it the flat one (compute-bound). The unfused numpy GELU sits at
# a sixth of the fused kernel's intensity: it moves the data six times for the same
# arithmetic. Vertically the two are only as far apart as section 2's ratio, since both do
# the same erfs and the erfs take most of the time; where that ratio came out near 1 (or
# below), another process slowed one of the two measurements, and rerunning section 2's
# timing cell moves the points. Both GELUs usually sit well below the roof, and that is a
# lesson about the model itself: the erf we counted as one operation is really a polynomial of a dozen or so,
# so the true intensity is higher and the kernel is limited by arithmetic, not memory. A
# roofline is only as good as its FLOP count. The two ReLUs are the honest memory-bound
# pair, their FLOP count right: fusion moves the point right (half the bytes for the same
# work) and, where memory is what limits them, up by about as much (the ratio printed in
# section 2); they and the sum run on an array as large as the copy that measured the
# bandwidth, so that they too stream from memory. The matmuls share one intensity (the
# minimum traffic), so their vertical spread is cache behaviour: i-j-k far below the roof,
# since it really moves much more than the minimum; BLAS at the roof (it defined the peak).
# A point measured on data that fits in a cache can sit above the slanted line: a cache's
# bandwidth is higher than the large copy's. On a machine shared with other work the points scatter from run to
# run; the ordering of the matmuls rarely changes.

# %% [markdown]
# ## 7. The GPU: a grid of blocks of threads
#
# A GPU runs one function, the **kernel**, in many threads at once. You launch it on a
# **grid** of **blocks**: `kernel[blocks, threads_per_block](args)`. Every thread runs the
# whole function and finds out *who it is* from four built-in values: `cuda.threadIdx.x`
# (its place in the block), `cuda.blockIdx.x` (its block's place in the grid),
# `cuda.blockDim.x` (threads per block) and `cuda.gridDim.x` (blocks in the grid). Its
# global number is $\text{blockIdx} \cdot \text{blockDim} + \text{threadIdx}$ (numba has a
# shorthand for it, `cuda.grid(1)`, shown once you have written it out yourself). Grids and
# blocks can be 2-D (`.x` and `.y`), which suits matrices.
#
# The hardware runs a block on one streaming multiprocessor (SM), 32 threads (a **warp**)
# in lock-step. Two rules follow:
#
# - **Coalescing.** When the 32 threads of a warp read 32 *consecutive* floats, the memory
#   system serves them in one or two wide transactions; scattered addresses cost one
#   transaction each. So let consecutive threads (consecutive `threadIdx.x`) touch
#   consecutive elements: the `.x` index should run along the *last*, contiguous dimension.
# - **Occupancy.** An SM hides memory latency by switching between many resident warps.
#   Blocks that use much shared memory or many registers leave room for fewer warps. Block
#   sizes of 128-512 threads (a multiple of 32) are the usual compromise.
#
# The picture: a 2-D grid of 3×3 blocks of 4×4 threads over a 9×10 output matrix. Threads
# that fall outside the matrix (hatched) must do nothing: every kernel has a **guard**.

# %%
def draw_thread_grid(ax, rows=9, cols=10, tile=4):
    """Blocks (bold squares) of tile x tile threads covering a rows x cols matrix."""
    nby, nbx = -(-rows // tile), -(-cols // tile)
    for by in range(nby):
        for bx in range(nbx):
            color = plt.cm.tab10([0, 1, 2, 3, 4, 5, 6, 8, 9][(by * nbx + bx) % 9], alpha=0.35)  # no grey
            for ty in range(tile):
                for tx in range(tile):
                    r, c = by * tile + ty, bx * tile + tx
                    inside = r < rows and c < cols
                    ax.add_patch(plt.Rectangle((c, r), 1, 1, fc=color if inside else "white", ec="gray",
                                               lw=0.4, hatch=None if inside else "///"))
            ax.add_patch(plt.Rectangle((bx * tile, by * tile), tile, tile, fill=False, ec="black", lw=2))
            ax.text(bx * tile + tile / 2, by * tile + tile / 2, f"block\n({bx}, {by})", ha="center",
                    va="center", fontsize=8)
    ax.add_patch(plt.Rectangle((0, 0), cols, rows, fill=False, ec="tab:red", lw=2.5))
    ax.set_xlim(-0.3, nbx * tile + 0.3)
    ax.set_ylim(nby * tile + 0.3, -0.3)
    ax.set_aspect("equal")
    ax.set_xlabel("column = blockIdx.x * blockDim.x + threadIdx.x  (consecutive threads: consecutive memory)")
    ax.set_ylabel("row = blockIdx.y * blockDim.y + threadIdx.y")
    ax.set_title(f"a {rows}x{cols} matrix (red) covered by {nbx}x{nby} blocks of {tile}x{tile} threads; "
                 f"hatched threads fail the guard", fontsize=9)


fig, ax = plt.subplots(figsize=(8, 7))
draw_thread_grid(ax)
fig.tight_layout()
plt.show()

# %% [markdown]
# The CUDA part of the package starts here (`tinytorch/cuda/kernels.py`). Under the
# simulator every thread is a Python thread, so the block sizes are small there (32 threads,
# tiles of 4×4); on a GPU they are 256 threads and 16×16 tiles. The kernels are the same.

# %%
#| export cuda.kernels
"""CUDA kernels with numba's CUDA target (module 17) and the `cuda` device backend: map, zip,
a shared-memory block reduction, naive and tiled matmuls, and the registration of the ops
an MLP needs (forward and backward) in module 01's kernel registry."""
import math

import numpy as np
from numba import cuda
from numba.core import config as _numba_config

from tinytorch._tensor import LAYOUT_ONLY, _result_dtype, register_kernel

if __name__ != "__main__":  # the package file; in this notebook, section 1's cell defined it
    from tinytorch.backends.cpu_kernels import strided_position

__all__ = ["SIMULATED", "BLOCK", "TILE", "map_kernel", "zip_kernel", "block_reduce_kernel",
           "matmul_naive_kernel", "matmul_tiled_kernel", "elementwise", "reduce", "matmul",
           "matmul_naive", "register"]

SIMULATED = bool(_numba_config.ENABLE_CUDASIM)  # numba's CUDA simulator (no GPU needed)
BLOCK = 32 if SIMULATED else 256  # threads per block of the 1-D kernels (a power of 2)
MAX_BLOCKS = 4 if SIMULATED else 1024  # at most this many blocks: threads loop over the rest
TILE = 4 if SIMULATED else 16  # side of the matmul tiles: TILE x TILE threads per block

ADD, SUB, MUL, DIV, RELU_GRAD = 0, 1, 2, 3, 4  # zip codes: a+b, a-b, a*b, a/b, a if b > 0 else 0
COPY, NEG, EXP, LOG, RELU = 0, 1, 2, 3, 4  # map codes
SUM, MAX = 0, 1  # reduction codes


# Section 1's strided_position, compiled a second time, for the GPU: a device function.
_position = cuda.jit(device=True)(getattr(strided_position, "py_func", strided_position))


@cuda.jit(device=True)
def _binary(op, a, b):
    """One zip operation on two numbers (a device function: called from kernels only)."""
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == MUL:
        return a * b
    if op == DIV:
        return a / b
    return a if b > 0 else a * 0


@cuda.jit(device=True)
def _combine(op, a, b):
    """One reduction step: a + b (SUM) or max(a, b) (MAX)."""
    return a + b if op == SUM else max(a, b)


@cuda.jit(device=True)
def _identity(op):
    """What an empty reduction gives: 0 for SUM, -inf for MAX."""
    return 0.0 if op == SUM else -math.inf


if SIMULATED:  # simulated kernels are Python, whose math.exp and math.log raise where a GPU gives inf or nan
    def _exp(v):
        with np.errstate(over="ignore"):
            return np.exp(v)

    def _log(v):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(v)
else:
    _exp, _log = math.exp, math.log


@cuda.jit(device=True)
def _unary(op, v):
    """One map operation on a number."""
    if op == NEG:
        return -v
    if op == EXP:
        return _exp(v)
    if op == LOG:
        return _log(v)
    if op == RELU:
        return v if v > 0 else v * 0
    return v


# %% [markdown]
# ## 8. Elementwise kernels: map and zip
#
# The simplest kernels: thread $i$ computes element $i$ of the output, a flat (contiguous,
# 1-D) array holding a tensor of shape `shape` in row-major order. The inputs are module
# 01's strided tensors: a 1-D storage, strides (0 along a broadcast dimension, negative for
# a flip) and an offset, all in elements, so a transposed, sliced or broadcast input reaches
# the GPU as it is, without a host copy into the output's layout. Where in its storage does
# an input keep output element $i$? You answered that in section 1: `strided_position` is
# compiled once more, for the GPU, as the device function `_position(i, shape, strides,
# offset)` (provided; `shape` and the strides arrive as int64 device arrays).
#
# Two details make the kernels correct for every size:
#
# - the **guard**: the grid has a whole number of blocks, so the last one usually sticks out
#   past the end of the array; those threads must not write. Under the simulator a thread
#   that reads or writes past an array's end stops the launch with `IndexError: tid=[t, 0,
#   0] ctaid=[b, 0, 0]: index ... is out of bounds` (tid is the thread's `threadIdx`, ctaid
#   its `blockIdx`); a GPU raises nothing: the write lands in whatever memory lies there,
#   or the kernel faults and takes the process's CUDA context with it;
# - the **grid-stride loop**: the launcher caps the number of blocks (`MAX_BLOCKS`), so an
#   array can have more elements than the grid has threads, and some threads must handle
#   several elements. Which ones, so that every element is handled by exactly one thread,
#   and so that on every step consecutive threads of a warp touch consecutive elements
#   (coalesced reads)? `cuda.gridDim` and `cuda.blockDim` give the grid's and the block's
#   sizes.
#
# The operation itself is provided: `_unary(op, v)` and `_binary(op, a, b)` are *device
# functions* (callable from a kernel, not from the host) selected by an op code (`EXP`,
# `ADD`, ...). The launchers `elementwise(op, a, b)` below copy the inputs to the device,
# launch your kernel, and copy the result back.
#
# <details><summary>Hint 1</summary>
#
# Thread 5 of block 2, with 32 threads per block, is global thread 2·32 + 5 = 69.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Draw 10 elements and a grid of 4 threads. Which elements must thread 1 handle so that
# on every step the 4 threads touch 4 neighbouring elements? What happens at element 10?
# </details>
#
# <details><summary>The approach</summary>
#
# Find the one rule that names thread t's elements for any grid size and any array length,
# and ask whether a thread ever needs an `if` to stay inside the array, or whether the rule
# already stops it.
# </details>

# %% nbgrader={"grade": false, "grade_id": "map-zip-kernels", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export cuda.kernels
@cuda.jit
def map_kernel(x, x_strides, x_offset, out, shape, op):
    """out[i] = _unary(op, element i of x) for every row-major ordinal i of `shape`.

    Contract: `out` a 1-D device array of prod(shape) elements; `x` a 1-D device storage read
    through `x_strides` (int64 device array, in elements, one per dim of `shape`) and
    `x_offset`. Works for any size (0 included) with any grid: each element of out is written
    by exactly one thread, none outside the array.
    """
    # Idea: name thread t's elements for any grid size and any length.
    ### BEGIN SOLUTION
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.gridDim.x * cuda.blockDim.x
    for i in range(start, out.shape[0], stride):
        out[i] = _unary(op, x[_position(i, shape, x_strides, x_offset)])
    ### END SOLUTION


@cuda.jit
def zip_kernel(a, a_strides, a_offset, b, b_strides, b_offset, out, shape, op):
    """out[i] = _binary(op, element i of a, element i of b) for every row-major ordinal i of
    `shape`.

    Contract: as map_kernel, with two strided inputs (a broadcast one has stride 0 along
    the dimensions it is stretched over).
    """
    # Idea: the same indexing as map_kernel, with two inputs.
    ### BEGIN SOLUTION
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.gridDim.x * cuda.blockDim.x
    for i in range(start, out.shape[0], stride):
        out[i] = _binary(op, a[_position(i, shape, a_strides, a_offset)], b[_position(i, shape, b_strides, b_offset)])
    ### END SOLUTION


# %% [markdown]
# The launchers (provided). `elementwise` sends each input to the device as the memory it
# views and nothing more, with its strides and offset: a row broadcast over 1000 rows
# travels as one row, a transpose as the matrix it transposes. PyTorch's CUDA elementwise
# kernels do the same (its `TensorIterator` hands them strides).

# %%
#| export cuda.kernels
def _grid(n):
    """Blocks for n elements: enough to cover them, at most MAX_BLOCKS (then threads loop)."""
    return max(1, min(-(-n // BLOCK), MAX_BLOCKS))


def _strided_operand(x, shape, dtype):
    """x broadcast to `shape`, as the device sees it: (storage, strides, offset), where the
    storage is a copy in `dtype` of only the memory the view spans, and strides (0 along a
    broadcast dim, negative for a flip) and offset are in elements of it."""
    view = np.broadcast_to(np.asarray(x), shape)
    if view.size == 0:
        return cuda.to_device(np.zeros(1, dtype)), cuda.to_device(np.zeros(len(shape), np.int64)), 0
    item = view.itemsize
    strides = [s // item for s in view.strides]
    lowest = tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(view.shape, strides))
    span = 1 + sum(abs(s) * (n - 1) for n, s in zip(view.shape, strides))
    memory = np.lib.stride_tricks.as_strided(view[lowest], shape=(span,), strides=(item,))
    offset = sum((n - 1) * -s for n, s in zip(view.shape, strides) if s < 0)
    return (cuda.to_device(np.ascontiguousarray(memory, dtype=dtype)),
            cuda.to_device(np.asarray(strides, dtype=np.int64)), offset)


def elementwise(op, a, b=None, dtype=None):
    """map_kernel (b None) or zip_kernel over numpy inputs, broadcast; returns a numpy array.

    `dtype`: the result's dtype (default: numpy's promotion of the inputs)."""
    a = np.asarray(a)
    shape = a.shape if b is None else np.broadcast_shapes(a.shape, np.shape(b))
    dtype = np.dtype(dtype or (a.dtype if b is None else np.result_type(a, np.asarray(b))))
    size = math.prod(shape)
    out = cuda.device_array(size, dtype=dtype)
    dims = cuda.to_device(np.asarray(shape, dtype=np.int64))
    if b is None:
        map_kernel[_grid(size), BLOCK](*_strided_operand(a, shape, dtype), out, dims, op)
    else:
        zip_kernel[_grid(size), BLOCK](*_strided_operand(a, shape, dtype), *_strided_operand(b, shape, dtype),
                                       out, dims, op)
    return out.copy_to_host().reshape(shape)


# %% nbgrader={"grade": true, "grade_id": "test-map-zip-kernels", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_n = BLOCK * MAX_BLOCKS * 2 + 3  # more elements than the grid has threads, not a multiple of BLOCK
_a = np.linspace(-2, 2, _n).astype(np.float32)
_b = np.linspace(1, 3, _n).astype(np.float32)
assert_close(elementwise(EXP, _a), np.exp(_a), rtol=1e-6, what=f"map EXP over {_n} elements (grid-stride loop)")
assert_close(elementwise(RELU, _a), np.maximum(_a, 0), what="map RELU")
assert_close(elementwise(MUL, _a, _b), _a * _b, rtol=1e-6, what=f"zip MUL over {_n} elements")
assert_close(elementwise(SUB, _a[:5], _b[:5]), _a[:5] - _b[:5], what="zip SUB, 5 elements (one block, mostly idle)")
assert_close(elementwise(DIV, np.ones((2, 3), np.float32), np.array([1.0, 2.0, 4.0], np.float32)),
             [[1.0, 0.5, 0.25]] * 2, what="zip DIV with a broadcast row")
assert_close(elementwise(ADD, np.float32(1.5), np.float32(2.0)), 3.5, what="a 1-element zip")
assert_equal(elementwise(NEG, np.zeros((0, 4), np.float32)).shape, (0, 4), "an empty map")
_m = np.arange(12, dtype=np.float32).reshape(3, 4)
for _what, _x in [("a transpose", _m.T), ("a flip (negative stride, an offset)", _m[:, ::-1]),
                  ("a slice", _m[1:, 1:3]), ("a row broadcast over 3 rows (stride 0)", np.broadcast_to(_m[1], (3, 4)))]:
    assert_close(elementwise(NEG, _x), -_x, what=f"map NEG on {_what}, read through its strides")
    _ones = np.ones(_x.shape, np.float32)
    assert_close(elementwise(SUB, _x, _ones), _x - 1, what=f"zip SUB: {_what} minus ones")
    assert_close(elementwise(SUB, _ones, _x), 1 - _x, what=f"zip SUB: ones minus {_what}")
assert_close(elementwise(MUL, _m[::-1], _m[:, :1]), _m[::-1] * _m[:, :1], what="zip MUL: rows flipped, a column broadcast")
_small = _a[:BLOCK * 5 + 3]  # launched by hand on 2 blocks: any grid must cover every element
_dims, _operand = cuda.to_device(np.asarray(_small.shape, np.int64)), _strided_operand(_small, _small.shape, _small.dtype)
for _what, _launch, _want in [("map_kernel", lambda o: map_kernel[2, BLOCK](*_operand, o, _dims, EXP), np.exp(_small)),
                              ("zip_kernel", lambda o: zip_kernel[2, BLOCK](*_operand, *_operand, o, _dims, MUL),
                               _small * _small)]:
    _out = cuda.to_device(np.full(_small.size, np.nan, np.float32))
    _launch(_out)
    assert_close(_out.copy_to_host(), _want, rtol=1e-6, what=f"{_what} launched on a grid of 2 blocks of {BLOCK} "
                 f"threads over {_small.size} elements (the contract's 'any grid': the grid's size comes from "
                 "cuda.gridDim and cuda.blockDim, not from the launcher's constants)")
for _what, _run in [("map_kernel", lambda: elementwise(EXP, _a[:BLOCK * 3 + 1])),
                    ("zip_kernel", lambda: elementwise(MUL, _a[:BLOCK * 3 + 1], _b[:BLOCK * 3 + 1]))]:
    _twice = multiply_written(_run)
    if _twice is None:
        print(f"({_what}: on a real GPU the writes cannot be watched; the simulator counts them)")
        continue
    check(not _twice, f"{_what}: each output element is written by exactly one thread (a value written again "
          "by other threads is right, and wasted work); got lists (array shape, element, threads that wrote it)",
          got=_twice)
for _what, _run in [("map_kernel", lambda: elementwise(EXP, _a)),  # more elements than threads:
                    ("zip_kernel", lambda: elementwise(MUL, _a, _b))]:  # each thread reads several
    _share = coalesced_share(_run)
    if _share is not None:
        check(_share > 0.9, f"{_what}'s reads are coalesced: at each step, neighbouring threads of a warp read "
              "neighbouring elements (one memory transaction per warp, not 32); got the share of such reads",
              got=f"{_share:.0%}", expected="over 90%")
print(f"✓ map and zip kernels equal numpy over {_n} elements; exp(-2) =", elementwise(EXP, _a)[0])

# %% [markdown]
# numba has shorthands for the two numbers your loop is built on: `cuda.grid(1)` is a
# thread's global number and `cuda.gridsize(1)` the number of threads in the grid (the
# provided kernels below use them).

# %% [markdown]
# ## 9. A shared-memory block reduction
#
# A sum on the GPU: why not let every thread add its element into one number? Here is that
# kernel, run three times as the simulator runs it, and three times with
# `with_reads_interleaved` (from `tinytorch.testing`), which makes every thread pause after
# each read of device memory so that the block's other threads run in between, as the
# thousands of threads a GPU keeps in flight do. Predict both rows before you run it.

# %%
@cuda.jit
def sum_into_one(x, out):
    """out[0] += every element of x, one thread per element."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[0] += x[i]


def _launch_sum(kernel, x):
    out = np.zeros(1, dtype=np.float32)
    kernel[-(-x.shape[0] // 32), 32](x, out)
    return float(out[0])


_ones = np.ones(64, dtype=np.float32)
print("plain launches:   ", [_launch_sum(sum_into_one, _ones) for _ in range(3)], "(exact: 64)")
_interleaved = [with_reads_interleaved(lambda: _launch_sum(sum_into_one, _ones)) for _ in range(3)]
print("reads interleaved:", _interleaved if SIMULATED else "(not needed on a real GPU: it interleaves by itself)")

# %% [markdown]
# `out[0] += x[i]` is three steps: read `out[0]`, add, write `out[0]`. Every thread that
# read before another thread's write overwrites that write, and the additions in between
# are lost; how many depends on the schedule, so the sum changes from run to run. The
# simulator's threads rarely switch between the read and the write, which is why its plain
# launches give 64 (a GPU's do not): a race can pass a test every time on one machine and
# fail on another.
# This is section 3's race, with thousands of threads instead of a handful.
#
# The repair is an **atomic** operation: `cuda.atomic.add(out, 0, v)` does the read, the
# add and the write as one step that no other thread can enter.

# %%
@cuda.jit
def sum_atomic(x, out):
    """out[0] += every element of x, one thread per element, each addition atomic."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(out, 0, x[i])


print("atomic, reads interleaved:", [with_reads_interleaved(lambda: _launch_sum(sum_atomic, _ones))
                                     for _ in range(3)] if SIMULATED else _launch_sum(sum_atomic, _ones))

# %% [markdown]
# Right every time, and slow by design: the additions to one address now happen one after
# another, so $N$ elements take $N$ steps however many thousands of threads the GPU has. A
# sum should take about $\log_2 N$ steps of parallel work. The classic answer is a **tree
# inside each block**: the
# block's `BLOCK` values sit in its **shared memory** (`cuda.shared.array`, on-chip, ~100×
# faster than global memory, visible to the block's threads only), and in each step half of
# the values still in play are combined into the other half, until one is left after
# $\log_2(\text{BLOCK})$ steps. Each block thus turns `BLOCK` elements into one, and the
# launcher (provided) repeats the launch on the partial results until one number per row is
# left. The kernel works on the rows of a 2-D array at once: the grid's `.y` index is the
# row, its `.x` index the block along the row.
#
# `cuda.shared.array(shape, dtype)` declares the block's buffer inside the kernel. Its
# shape must be known when the kernel is compiled, so it is a constant (`BLOCK`, a
# module-level int), never `cuda.blockDim.x`, which is known only at launch; every thread
# of the block sees the same buffer, and nothing initialises it.
#
# Design it before you write it. Which thread combines which two values in a step, so that
# no value is read in the same step as it is overwritten? What must a thread whose element
# lies past the row's end contribute, for a sum and for a max? Where must the block wait
# (`cuda.syncthreads()`: no thread passes until every thread of the block has arrived), and
# which threads must reach each of those waits? The shared buffer holds float64 whatever
# the input's dtype: it is an accumulator. The check runs your kernel with every barrier
# and every shared-memory access watched (section 3's idea, for a GPU): every thread of a
# block must pass the same barriers in the same order, and a slot that one thread writes
# must not be read or written by another between the same two barriers. That is a race
# even when the sum comes out right: the simulator runs the threads in one fixed order, a
# GPU does not.
#
# Two costs do not show in the values, and the check watches both. A warp runs its 32
# threads in lockstep: a warp with one busy thread takes as long as a full one, so in each
# step the threads with work must be threads 0 to n - 1 of the block, which leaves the
# other warps free. And shared memory is 32 **banks** (4-byte word $w$ sits in bank
# $w \bmod 32$; an 8-byte float64 spans two, and is served half a warp at a time): a warp's
# access takes one pass when its threads touch different banks, and $n$ passes when $n$
# different words share a bank. Many trees compute the right sum; which of them pass both?
#
# <details><summary>Hint 1</summary>
#
# One value per thread: thread `t` of block `k` starts with column `k · BLOCK + t` of its
# row. Draw the tree for BLOCK = 8 on paper: which slots are written in each step?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `_combine(op, a, b)` (provided) adds or takes the max; `_identity(op)` gives the value
# that changes nothing. A thread with nothing to combine in a step still has a barrier to
# reach.
# </details>
#
# <details><summary>The approach</summary>
#
# Write down, for BLOCK = 8, which slots each step combines in the tree you drew, then ask
# three questions of it: which threads have work in each step (the first ones?), which
# slots do neighbouring threads touch (neighbouring ones?), and can a slot be read in the
# step that overwrites it? A barrier is needed wherever a thread is about to read a value
# another thread wrote, and every thread of the block must arrive at it, including those
# with nothing to do; the last step leaves the block's result in one slot for one thread to
# write out.
# </details>

# %% nbgrader={"grade": false, "grade_id": "block-reduce", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export cuda.kernels
@cuda.jit
def block_reduce_kernel(x, out, op):
    """Reduce each block's BLOCK elements of each row of `x` with a shared-memory tree.

    Contract: `x` (R, N) and `out` (R, ceil(N / BLOCK)) device arrays; launched with BLOCK
    threads per block on a grid of (ceil(N / BLOCK), R) blocks. out[r, k] = the SUM (op 0) or
    MAX (op 1) of x[r, k*BLOCK : (k+1)*BLOCK], elements past N count as the identity. The
    shared buffer is float64 (an accumulator, whatever x's dtype). Every thread of a block
    passes the same cuda.syncthreads() calls.
    """
    # Idea: a tree in shared memory, one level per step; everybody waits between levels.
    ### BEGIN SOLUTION
    buf = cuda.shared.array(BLOCK, dtype=np.float64)
    t = cuda.threadIdx.x
    row = cuda.blockIdx.y
    col = cuda.blockIdx.x * BLOCK + t
    if col < x.shape[1]:
        buf[t] = x[row, col]
    else:
        buf[t] = _identity(op)
    cuda.syncthreads()
    half = BLOCK // 2
    while half > 0:
        if t < half:
            buf[t] = _combine(op, buf[t], buf[t + half])
        cuda.syncthreads()
        half //= 2
    if t == 0:
        out[row, cuda.blockIdx.x] = buf[0]
    ### END SOLUTION


# %% [markdown]
# The launcher: it moves the reduced dimensions of any tensor to the end on the host,
# flattens them into the rows of an (R, N) matrix, and launches the kernel until N is 1.

# %%
#| export cuda.kernels
def reduce_rows(x, op):
    """SUM or MAX of each row of the 2-D numpy array x, on the device; a (R,) numpy array."""
    rows, n = x.shape
    if n == 0:
        if op == MAX:
            raise RuntimeError("max(): Expected reduction dim to have a non-zero size")
        return np.zeros(rows, dtype=x.dtype)
    d = cuda.to_device(np.ascontiguousarray(x))
    while True:
        width = -(-n // BLOCK)
        part = cuda.device_array((rows, width), dtype=x.dtype)
        block_reduce_kernel[(width, rows), BLOCK](d, part, op)
        d, n = part, width
        if n == 1:
            return d.copy_to_host().reshape(rows)


def reduce(x, dims, keepdim, op):
    """SUM or MAX of the numpy array x over the dims `dims` (a tuple), on the device."""
    dims = tuple(sorted(dims))
    kept = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, kept + list(dims))
    out_shape = tuple(x.shape[d] for d in kept)
    n = math.prod(x.shape[d] for d in dims)
    result = reduce_rows(moved.reshape(math.prod(out_shape), n), op).reshape(out_shape)
    if keepdim:
        result = result.reshape(tuple(1 if d in dims else s for d, s in enumerate(x.shape)))
    return result


# %% nbgrader={"grade": true, "grade_id": "test-block-reduce", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(10)
_m = _rng.standard_normal((3, BLOCK * 3 + 5)).astype(np.float32)  # three and a bit blocks per row
check_barriers(lambda: reduce_rows(_m[:1, :BLOCK + 3], SUM), "block_reduce_kernel")  # first: a race can give wrong sums
assert_close(reduce_rows(_m, SUM), _m.sum(axis=1), rtol=1e-5, atol=1e-5, what="row sums over 3+ blocks")
assert_close(reduce_rows(_m, MAX), _m.max(axis=1), what="row maxima over 3+ blocks")
assert_close(reduce_rows(-np.abs(_m[:, :7]) - 1, MAX), (-np.abs(_m[:, :7]) - 1).max(axis=1),
             what="max of negative numbers: idle threads must load -inf, not 0")
assert_close(reduce_rows(np.ones((1, 2 * BLOCK + 1), np.float32), SUM), [2 * BLOCK + 1.0],
             what=f"{2 * BLOCK + 1} ones: two launches, the partial sums reduced again")
assert_close(reduce_rows(np.array([[4.0]], np.float32), SUM), [4.0], what="a single element")
assert_equal(reduce_rows(np.array([[2**40 + 1, 2**40 + 3, 5]], np.int64), SUM), np.array([2**41 + 9]),
             "the sum of int64 values near 2**40 (exact in a float64 buffer; a float32 one keeps 24 bits)")
_t3 = _rng.standard_normal((2, 3, 5)).astype(np.float32)
assert_close(reduce(_t3, (0, 2), False, SUM), _t3.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5, what="sum over dims (0, 2)")
assert_close(reduce(_t3, (1,), True, MAX), _t3.max(axis=1, keepdims=True), what="max over dim 1, keepdim")
_twice = multiply_written(lambda: reduce_rows(_m[:1, :BLOCK + 3], SUM))
check(not _twice, "each block's result is written by one thread (the others' writes are wasted work); got "
      "(array shape, element, number of threads that wrote it)", got=_twice)
_scattered = scattered_active_threads(lambda: reduce_rows(_m[:1, :BLOCK + 3], SUM))
check(not _scattered, "in each step of block_reduce_kernel the threads that write the buffer are threads 0 to n - 1 "
      "(whole warps finish early; threads spread over every warp keep them all busy); got (block, step after that "
      "many barriers, its first writing threads)", got=_scattered)
_conflict = bank_conflicts(lambda: reduce_rows(_m[:1, :BLOCK + 3], SUM))
if _conflict is not None:
    check(_conflict[0] == 1, "block_reduce_kernel's shared-memory accesses are free of bank conflicts: the threads "
          "of a warp touch different banks in each access; got the worst (n-way, (block, step, k-th access, the "
          "slots touched))", got=_conflict, expected="1-way")
if SIMULATED:  # the simulator's BLOCK is 32, a GPU's 256: the kernel must follow BLOCK, not one of them
    for _size in (8, 64):
        BLOCK, _block = _size, BLOCK
        _rows = _m[:, :2 * _size + 5]
        try:
            _got = with_garbage_shared_memory(lambda: reduce_rows(_rows, MAX))
        except Exception as _exc:  # a buffer of a fixed size overflows: an IndexError under the simulator
            _got = f"{type(_exc).__name__}: {_exc}"
        finally:
            BLOCK = _block
        check(not isinstance(_got, str), f"block_reduce_kernel runs with BLOCK = {_size} (a GPU's is 256: a shared "
              "buffer of a size written as a number overflows once BLOCK is larger)", got=_got)
        assert_close(_got, _rows.max(axis=1), what=f"row maxima with BLOCK = {_size} (the kernel's buffer and its "
                     "tree follow BLOCK; a size written as a number is right only for that block size)")
print("✓ block reduction equals numpy; row sums:", reduce_rows(_m, SUM))

# %% [markdown]
# ## 10. Matmul on the GPU: naive, then tiled
#
# One thread per output element: thread (row, col) computes $C_{rc} = \sum_p A_{rp} B_{pc}$.
# With a 2-D grid, `col` comes from the `.x` indices (so consecutive threads of a warp write
# consecutive elements of a row of C, and read consecutive elements of a row of B: coalesced)
# and `row` from the `.y` indices. Guard both.
#
# This **naive** kernel reads $2k$ floats from global memory for $2k$ FLOPs: intensity
# $\tfrac{2k}{8k} = 0.25$ FLOP/byte, as low as a sum, although the whole matmul has
# intensity $n/6$. Every element of A is read again by each of the $m$ threads of its row.
#
# **Tiling** fixes that. The threads of a TILE×TILE block cooperate: the block walks along
# its band of rows of A and its band of columns of B one TILE×TILE tile at a time, staging
# each pair of tiles in shared memory, where every element is used TILE times instead of
# once (16×16 tiles: 4 FLOP/byte). Design the step: which element of each tile does
# thread (ty, tx) load (one of each, so that together the block loads both tiles), when
# must the block wait, and what does a tile that hangs over the matrix edge hold? The
# check watches the barriers and the shared-memory accesses, as in section 9.
#
# The picture shows one block's work: the block owns a TILE×TILE tile of C (dark); in step t
# it stages tile t of its band of rows of A and tile t of its band of columns of B (dark)
# in shared memory; the lighter tiles are the other steps of the same loop.

# %%
def draw_tiling(ax, n=6, t_now=1, block=(1, 2)):
    """C = A @ B in tiles: the band of A and of B that one block of C walks through."""
    by, bx = block
    panels = [("A", 0, lambda r, c: r == by, lambda r, c: c == t_now),
              ("B", n + 1.5, lambda r, c: c == bx, lambda r, c: r == t_now),
              ("C = A @ B", 2 * (n + 1.5), lambda r, c: r == by and c == bx, lambda r, c: True)]
    for name, x0, band, now in panels:
        for r in range(n):
            for c in range(n):
                inside = band(r, c)
                color = ("tab:blue" if now(r, c) else "lightsteelblue") if inside else "white"
                ax.add_patch(plt.Rectangle((x0 + c, r), 1, 1, fc=color, ec="gray", lw=0.6))
        ax.text(x0 + n / 2, -0.6, name, ha="center", fontsize=11)
    ax.text(n + 0.75, n / 2, "@", ha="center", va="center", fontsize=16)
    ax.text(2 * n + 2.25, n / 2, "=", ha="center", va="center", fontsize=16)
    ax.set_xlim(-0.5, 3 * n + 3.5)
    ax.set_ylim(n + 0.8, -1.4)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"one block computes the dark tile of C; step t = {t_now} stages the dark tiles of A and B "
                 f"(each square is TILE x TILE)", fontsize=9)


fig, ax = plt.subplots(figsize=(9, 3.4))
draw_tiling(ax)
fig.tight_layout()
plt.show()

# %% [markdown]
# <details><summary>Hint 1 (naive)</summary>
#
# `cuda.grid(2)` returns the global (x, y) numbers; which one is the column?
# </details>
#
# <details><summary>Hint 2 (tiled)</summary>
#
# After the loads, thread (ty, tx) needs row ty of the A tile and column tx of the B tile.
# Choose the loads so that the block's threads fill both tiles exactly, and so that
# consecutive tx read consecutive addresses of global memory. How many steps does the walk
# along k take when k is not a multiple of TILE?
# </details>
#
# <details><summary>The approach</summary>
#
# Naive: one thread, one output element, one dot product kept in a register. Tiled: the
# same dot product, split into TILE-long pieces whose operands come from shared memory.
# For each step, list who writes a tile and who reads it, and ask where a thread could read
# a slot before it is written, or overwrite one that a slower thread still reads. Then ask
# the same of a thread outside C and of the part of an edge tile that lies outside A or B:
# what must it load, and must it wait? The shared tiles are float32, as the inputs.
# </details>

# %% nbgrader={"grade": false, "grade_id": "matmul-kernels", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export cuda.kernels
@cuda.jit
def matmul_naive_kernel(a, b, c):
    """c = a @ b, one thread per element of c, every operand read from global memory.

    Contract: a (n, k), b (k, m), c (n, m) float32 device arrays; launched on a 2-D grid
    covering c with x along the columns and y along the rows (threads outside c do nothing).
    """
    # Idea: thread (row, col) owns C[row, col]; x runs along the columns.
    ### BEGIN SOLUTION
    col, row = cuda.grid(2)
    if row >= c.shape[0] or col >= c.shape[1]:
        return
    acc = np.float32(0.0)
    for p in range(a.shape[1]):
        acc += a[row, p] * b[p, col]
    c[row, col] = acc
    ### END SOLUTION


@cuda.jit
def matmul_tiled_kernel(a, b, c):
    """c = a @ b, with TILE x TILE tiles of a and b staged in shared memory.

    Contract: as matmul_naive_kernel, launched with (TILE, TILE) threads per block; any
    sizes (edge tiles padded with zeros), k == 0 gives zeros.
    """
    # Idea: each element loaded from global memory is used TILE times from shared memory.
    ### BEGIN SOLUTION
    sa = cuda.shared.array((TILE, TILE), dtype=np.float32)
    sb = cuda.shared.array((TILE, TILE), dtype=np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    n, k = a.shape
    m = b.shape[1]
    acc = np.float32(0.0)
    for t in range((k + TILE - 1) // TILE):
        p = t * TILE
        sa[ty, tx] = a[row, p + tx] if row < n and p + tx < k else 0.0
        sb[ty, tx] = b[p + ty, col] if p + ty < k and col < m else 0.0
        cuda.syncthreads()
        for q in range(TILE):
            acc += sa[ty, q] * sb[q, tx]
        cuda.syncthreads()
    if row < n and col < m:
        c[row, col] = acc
    ### END SOLUTION


# %% [markdown]
# The launchers (provided): 2-D numpy in, numpy out. `matmul` (the tiled kernel) also takes
# numpy's other shapes: 1-D operands, and a batch of rows `(..., n, k)` times one matrix.

# %%
#| export cuda.kernels
def _launch_matmul(kernel, a, b):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    c = cuda.device_array((a.shape[0], b.shape[1]), dtype=np.float32)
    grid = (max(1, -(-b.shape[1] // TILE)), max(1, -(-a.shape[0] // TILE)))
    kernel[grid, (TILE, TILE)](cuda.to_device(a), cuda.to_device(b), c)
    return c.copy_to_host()


def matmul_naive(a, b):
    """a @ b (2-D float32 numpy arrays) with the naive kernel."""
    return _launch_matmul(matmul_naive_kernel, a, b)


def matmul(a, b):
    """a @ b with the tiled kernel: 1-D or 2-D operands, or a batch of rows (..., n, k) @ (k, m)."""
    a, b = np.asarray(a), np.asarray(b)
    for x in (a, b):
        if x.dtype != np.float32:
            raise TypeError(f"tinytorch's cuda matmul computes in float32, got {x.dtype}; "
                            f"use .float() (or .cpu() for float64)")
    if b.ndim > 2 or a.ndim == 0 or b.ndim == 0:
        raise NotImplementedError(f"cuda matmul takes (..., n, k) @ (k, m) or 1-D operands, got "
                                  f"{a.shape} @ {b.shape}; use .cpu() for batched matmuls")
    a2 = a.reshape(1, -1) if a.ndim == 1 else a.reshape(math.prod(a.shape[:-1]), a.shape[-1])
    b2 = b.reshape(-1, 1) if b.ndim == 1 else b
    c = _launch_matmul(matmul_tiled_kernel, a2, b2)
    shape = a.shape[:-1] + b.shape[1:] if b.ndim == 2 else a.shape[:-1]
    return c.reshape(shape)


# %% nbgrader={"grade": true, "grade_id": "test-matmul-kernels", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(11)
check_barriers(lambda: matmul(_rng.standard_normal((TILE + 1, TILE + 1)).astype(np.float32),  # first: a missing
                              _rng.standard_normal((TILE + 1, 2)).astype(np.float32)),  # barrier also gives wrong values
               "matmul_tiled_kernel (edge tiles, two steps along k)")
for _n, _k, _m in [(9, 7, 5), (1, 1, 1), (TILE, TILE, TILE), (2 * TILE + 1, 3, TILE + 2), (3, 0, 2)]:
    _a = _rng.standard_normal((_n, _k)).astype(np.float32)
    _b = _rng.standard_normal((_k, _m)).astype(np.float32)
    assert_close(matmul_naive(_a, _b), _a @ _b, rtol=1e-5, atol=1e-5, what=f"naive kernel {(_n, _k)} @ {(_k, _m)}")
    assert_close(matmul(_a, _b), _a @ _b, rtol=1e-5, atol=1e-5, what=f"tiled kernel {(_n, _k)} @ {(_k, _m)}")
_x3 = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_w4 = _rng.standard_normal((4, 2)).astype(np.float32)
assert_close(matmul(_x3, _w4), _x3 @ _w4, rtol=1e-5, atol=1e-5, what="a batch of rows (2, 3, 4) @ (4, 2)")
assert_close(matmul(_w4[:, 0], _w4), _w4[:, 0] @ _w4, rtol=1e-5, atol=1e-5, what="a 1-D vector @ a matrix")
_sq = _rng.standard_normal((2 * TILE, 2 * TILE)).astype(np.float32)
_reads = {"naive": global_reads(lambda: matmul_naive(_sq, _sq)), "tiled": global_reads(lambda: matmul(_sq, _sq))}
if _reads["naive"] is None:
    print("(on a real GPU the global reads cannot be counted; the simulator counts them)")
else:
    check(_reads["tiled"] * TILE <= _reads["naive"], f"the tiled kernel reads global memory {TILE} times less "
          f"often than the naive one (each loaded element used TILE times from shared memory); "
          f"got the reads of both, on a {2 * TILE} x {2 * TILE} product", got=_reads)
    print(f"global reads on a {2 * TILE} x {2 * TILE} product: naive {_reads['naive']}, tiled {_reads['tiled']}")
    _share = coalesced_share(lambda: matmul(_sq, _sq))
    check(_share > 0.99, "matmul_tiled_kernel's loads are coalesced: threads tx and tx + 1 of a row of the block "
          "read neighbouring addresses of A and of B at each step (one transaction per warp, not one per "
          "thread; the values are right either way); got the share of neighbouring reads",
          got=f"{_share:.0%}", expected="100%")
    _share = coalesced_share(lambda: matmul_naive(_sq, _sq))
    check(_share > 0.99, "matmul_naive_kernel's reads are coalesced: threads x and x + 1 of a warp own neighbouring "
          "columns of C, so they read neighbouring elements of a row of B (and one element of A: a broadcast); "
          "got the share of neighbouring reads", got=f"{_share:.0%}", expected="100%")
if SIMULATED:  # the simulator's TILE is 4, a GPU's 16: the kernel must follow TILE, not one of them
    for _size in (2, 8):
        TILE, _tile = _size, TILE
        _pa, _pb = (np.random.default_rng(_size).standard_normal(s).astype(np.float32)
                    for s in ((_size + 3, _size + 5), (_size + 5, 3)))
        try:
            _got = with_garbage_shared_memory(lambda: matmul(_pa, _pb))
        except Exception as _exc:  # tiles of a fixed size overflow: an IndexError under the simulator
            _got = f"{type(_exc).__name__}: {_exc}"
        finally:
            TILE = _tile
        check(not isinstance(_got, str), f"matmul_tiled_kernel runs with TILE = {_size} (a GPU's is 16: shared tiles "
              "of a size written as a number overflow once TILE is larger)", got=_got)
        assert_close(_got, _pa @ _pb, rtol=1e-5, atol=1e-5, what=f"the tiled kernel with TILE = {_size} (its shared "
                     "tiles and its loops follow TILE; a size written as a number is right only for that tile size)")
for _kernel in (matmul_naive_kernel, matmul_tiled_kernel):
    check(not float64_accumulators(_kernel), f"{_kernel.__name__} adds its float32 products in float32: on a GPU, "
          f"a variable that starts as a Python number is a float64 (numba gives a variable one type for all its "
          f"assignments), and float64 units are 2 to 64 times fewer (the simulator computes it in float32, so "
          f"no value shows it); got (variable, line of its first update)", got=float64_accumulators(_kernel))
_a = _rng.standard_normal((TILE + 2, TILE - 1)).astype(np.float32)  # k < TILE: the first tile is an edge tile
_b = _rng.standard_normal((TILE - 1, 3)).astype(np.float32)
_garbage = with_garbage_shared_memory(lambda: matmul(_a, _b))
if _garbage is not None:  # a GPU's shared memory starts as whatever it held: here NaN
    assert_close(_garbage, _a @ _b, rtol=1e-5, atol=1e-5, what="tiled kernel with shared memory starting as NaN "
                 "(every slot an edge tile reads must be written first, zeros outside A and B)")
print("✓ naive and tiled matmul kernels equal numpy; e.g. (9, 7) @ (7, 5), tiles of", TILE)

# %% [markdown]
# ### Systems look: what a transfer costs
#
# The GPU has its own memory. Every launcher above copies its inputs to the device
# (`cuda.to_device`, "host to device") and the result back (`copy_to_host`). On a real GPU
# these copies cross the PCIe or NVLink bus, typically 10-50 GB/s, while the GPU's own memory
# delivers 1-5 TB/s: a kernel that needs a fraction of a millisecond can wait longer for its
# data. How many milliseconds for 16 MiB, there and back?

# %%
predicted_transfer_ms = None  # your number: ms to send 16 MiB to the device and back

# %%
def transfer_seconds(n_bytes):
    """Median seconds to copy n_bytes of float32 to the device and back."""
    host = np.ones(n_bytes // 4, dtype=np.float32)
    return median_time(lambda: cuda.to_device(host).copy_to_host(), repeats=3)


for _mb in (1, 4, 16):
    _t = transfer_seconds(_mb * 2 ** 20)
    print(f"{_mb:3d} MiB there and back: {_t * 1e3:7.2f} ms = {2 * _mb * 2 ** 20 / _t / 1e9:6.1f} GB/s")
print("your prediction for 16 MiB:", predicted_transfer_ms if predicted_transfer_ms is not None else "none given",
      "ms", "| simulated: these are host memory copies" if SIMULATED else "| on the GPU's bus")

# %% [markdown]
# Under the simulator the "device" is host memory, so these are memory copies plus the
# simulator's own bookkeeping per array (compare them with section 6's copy bandwidth
# yourself: small copies may even beat it while they fit in a cache); on a GPU
# they are bus transfers, and a small tensor pays a fixed latency of some microseconds per
# copy on top. The lesson is the same either way:
# keep data on the device between ops. PyTorch does: a CUDA tensor's storage is device
# memory, and its ops launch kernels on it without copying. tinytorch's `cuda` device
# (next section) keeps it simple instead: a tensor's storage stays a numpy array (a host
# mirror, so module 01's views, printing and autograd work unchanged), and every op copies
# its inputs over, runs your kernels, and copies the result back. Correct, and a fair
# picture of where the time goes; keeping device copies alive between ops is the next step.
#
# ## 11. The `cuda` device
#
# Module 01's `apply` consults a **kernel registry** once some tensor has left the CPU:
# an op whose inputs live on `cuda` runs the kernel registered as `(op, "cuda")`, and
# module 06's `call_rule` does the same for backward rules, keyed by the node's name
# (`"MulBackward"`). Ops that only compute a new layout over the same memory (transpose,
# reshape, ...) are registered as `LAYOUT_ONLY`: they run unchanged. An op with no
# kernel raises `NotImplementedError` naming it, as PyTorch does for a backend that lacks an
# op. Most of this is plumbing, provided, and built from your kernels only: here are the
# forward kernels of what an MLP needs (elementwise ops, matmul, reductions, the ReLU, the
# MSE and negative log-likelihood losses), then their backward rules. One op is yours:
# `log_softmax`, which cross-entropy needs, forward and backward.

# %%
#| export cuda.kernels
def _zip_op(code):
    def kernel(x, y):
        dt = _result_dtype(x, y)
        if code == DIV and dt.kind != "f":
            dt = np.dtype(np.float32)
        return elementwise(code, x.numpy(), y.numpy(), dt)
    return kernel


def _map_op(code, to_float=False):
    def kernel(x):
        dt = np.dtype(np.float32) if to_float and x.dtype.kind != "f" else x.dtype
        return elementwise(code, x.numpy(), dtype=dt)
    return kernel


def _sum(x, dim, keepdim):
    return reduce(x.numpy(), dim, keepdim, SUM).astype(x.dtype if x.dtype.kind == "f" else np.int64)


def _mean(x, dim, keepdim):
    n = math.prod(x.shape[d] for d in dim)
    return elementwise(DIV, reduce(x.numpy(), dim, keepdim, SUM), np.array(n, x.dtype), x.dtype)


def _mse_loss(x, y, reduction):
    d = elementwise(SUB, x.numpy(), y.numpy(), x.dtype)
    sq = elementwise(MUL, d, d, x.dtype)
    if reduction == "none":
        return sq
    total = reduce(sq, tuple(range(sq.ndim)), False, SUM).astype(x.dtype)
    return total if reduction == "sum" else elementwise(DIV, total, np.array(max(sq.size, 1), x.dtype), x.dtype)


def _row_blocks(rows):
    """Blocks of BLOCK threads for one thread per row (no cap: the row kernels do not loop)."""
    return max(1, -(-rows // BLOCK))


@cuda.jit
def _gather_kernel(x, cols, out):
    """out[r] = x[r, cols[r]] (one thread per row)."""
    r = cuda.grid(1)
    if r < out.shape[0]:
        out[r] = x[r, cols[r]]


def _nll_weights(attrs, n):
    """Per-sample weights (0 for ignored samples) and safe target columns, on the host."""
    target = np.asarray(attrs["target"]).reshape(n)
    valid = target != attrs["ignore_index"]
    safe = np.where(valid, target, 0)
    w = np.ones(n) if attrs["weight"] is None else np.asarray(attrs["weight"])[safe]
    return np.where(valid, w, 0.0), safe


def _nll_loss(x, target, weight, ignore_index, reduction):
    v = x.numpy().reshape(-1, x.shape[-1])
    w, safe = _nll_weights(dict(target=target, weight=weight, ignore_index=ignore_index), v.shape[0])
    picked = cuda.device_array(v.shape[0], dtype=v.dtype)
    _gather_kernel[_row_blocks(v.shape[0]), BLOCK](cuda.to_device(np.ascontiguousarray(v)),
                                              cuda.to_device(safe.astype(np.int64)), picked)
    losses = elementwise(MUL, -w.astype(v.dtype), picked.copy_to_host(), v.dtype)
    if reduction == "none":
        return losses.reshape(x.shape[:-1])
    total = reduce_rows(losses.reshape(1, -1), SUM).astype(v.dtype).reshape(())
    return total if reduction == "sum" else elementwise(DIV, total, np.array(w.sum(), v.dtype), v.dtype)


def _to_device_copy(x, device):
    """A move: the data goes to the device (a copy kernel runs there) and its mirror comes back."""
    return elementwise(COPY, x.numpy())

# %% [markdown]
# The backward rules on the device: the same formulas as module 06's rules, written with the
# launchers. `_unbroadcast` sums a gradient over the dimensions broadcasting stretched (the
# block reduction again); scalar factors such as $2/n$ are computed on the host, as PyTorch
# does with Python numbers.

# %%
#| export cuda.kernels
def _unbroadcast(g, shape):
    """Sum g over the dims broadcasting added or stretched, so it gets `shape` (device sums)."""
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, s in enumerate(shape) if s == 1 and g.shape[lead + d] != 1)
    if not dims:
        return g.reshape(shape)
    return reduce(g, dims, True, SUM).astype(g.dtype).reshape(shape)


def _both(node, ga, gb):
    a, b = node.inputs
    return (_unbroadcast(ga(), a.shape) if a.requires_grad else None,
            _unbroadcast(gb(), b.shape) if b.requires_grad else None)


def _add_backward(node, g):
    return _both(node, lambda: g, lambda: g)


def _sub_backward(node, g):
    return _both(node, lambda: g, lambda: elementwise(NEG, g))


def _mul_backward(node, g):
    a, b = (x.numpy() for x in node.inputs)
    return _both(node, lambda: elementwise(MUL, g, b, g.dtype), lambda: elementwise(MUL, g, a, g.dtype))


def _div_backward(node, g):
    a, b = (x.numpy() for x in node.inputs)
    over_b = elementwise(DIV, g, b, g.dtype)
    return _both(node, lambda: over_b,
                 lambda: elementwise(NEG, elementwise(DIV, elementwise(MUL, over_b, a, g.dtype), b, g.dtype)))


def _matmul_backward(node, g):
    a, b = node.inputs
    av, bv = a.numpy(), b.numpy()
    if av.ndim != 2 or bv.ndim != 2:
        raise NotImplementedError("the cuda backward of matmul takes 2-D operands; use .cpu()")
    ga = matmul(g, np.ascontiguousarray(bv.T)) if a.requires_grad else None
    gb = matmul(np.ascontiguousarray(av.T), g) if b.requires_grad else None
    return ga, gb


def _mean_backward(node, g):
    x = node.inputs[0]
    n = math.prod(x.shape[d] for d in node.attrs["dim"])
    g = g if node.attrs["keepdim"] else np.expand_dims(g, node.attrs["dim"])
    return (np.broadcast_to(elementwise(DIV, g, np.array(n, g.dtype), g.dtype), x.shape),)


def _mse_loss_backward(node, g):
    x, y = (t.numpy() for t in node.inputs)
    scale = 2.0 / max(x.size, 1) if node.attrs["reduction"] == "mean" else 2.0
    gx = elementwise(MUL, elementwise(SUB, x, y, x.dtype), np.asarray(g) * scale, x.dtype)
    return gx, elementwise(NEG, gx)


@cuda.jit
def _scatter_kernel(values, cols, out):
    """out[r, cols[r]] = values[r] (one thread per row; out starts at zero)."""
    r = cuda.grid(1)
    if r < values.shape[0]:
        out[r, cols[r]] = values[r]


def _nll_loss_backward(node, g):
    x = node.inputs[0]
    rows = 1 if x.ndim == 1 else x.shape[0]
    w, safe = _nll_weights(node.attrs, rows)
    g = np.asarray(g, dtype=np.float64).reshape(-1)
    if node.attrs["reduction"] == "mean":  # a mean over no sample (all ignored): a gradient of 0, as PyTorch's
        g = g / w.sum() if w.any() else np.zeros_like(g)
    values = elementwise(MUL, -w, g, x.dtype)
    out = cuda.to_device(np.zeros((rows, x.shape[-1]), dtype=x.dtype))
    _scatter_kernel[_row_blocks(rows), BLOCK](cuda.to_device(values), cuda.to_device(safe.astype(np.int64)), out)
    return (out.copy_to_host().reshape(x.shape),)

# %% [markdown]
# ### Your turn: log-softmax on the device
#
# Cross-entropy on `cuda` needs `log_softmax`, forward and backward, and neither is a single
# kernel: compose each from the launchers, `elementwise(op, a, b, dtype)` with the op codes
# and `reduce(x, dims, keepdim, op)` with `SUM` or `MAX` (keep the reduced dim, so that the
# result broadcasts back against x). Two requirements beyond the values:
#
# - every arithmetic step runs on the device. A shortcut such as `np.exp(x.numpy())` gives
#   the right numbers, and on a real GPU it would copy the tensor over the bus and compute
#   on one CPU core. The check watches the host's numpy for arithmetic on x's data and on
#   every array a launch copies back;
# - the forward is finite for any finite logits: rows near 1000 and rows near -1000, in
#   the same batch. Module 04 met the same problem on the CPU.
#
# The backward rule gets the node (`node.output` is the forward's result as a numpy array,
# `node.attrs["dim"]` the dim) and the incoming gradient `g`, a numpy array; it returns a
# tuple with one gradient. Module 06 derived the rule; derive it again if you need to, in
# terms of the output only.
#
# <details><summary>Hint 1</summary>
#
# Write the CPU version first, one numpy call per line, then give each line its launch:
# which of them is a reduction along `dim`, and which an elementwise op of two arrays that
# broadcast?
# </details>
#
# <details><summary>Hint 2</summary>
#
# A row near -1000 and a row near 1000 in one batch: which maximum keeps both rows' `exp`
# inside the float range, one for the whole batch or one per row?
# </details>

# %% nbgrader={"grade": false, "grade_id": "cuda-log-softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export cuda.kernels
def _log_softmax(x, dim):
    """log_softmax of the tensor x along `dim`, computed on the device: a numpy array of x's
    shape and dtype, finite for finite logits of any size. `dim` is an int in [0, x.ndim):
    `F.log_softmax` turns a negative dim into its positive index before it dispatches."""
    # Idea: the same composition as on the CPU, each step one launch.
    ### BEGIN SOLUTION
    v = x.numpy()
    shifted = elementwise(SUB, v, reduce(v, (dim,), True, MAX), v.dtype)
    total = reduce(elementwise(EXP, shifted), (dim,), True, SUM).astype(v.dtype)
    return elementwise(SUB, shifted, elementwise(LOG, total), v.dtype)
    ### END SOLUTION


def _log_softmax_backward(node, g):
    """The gradient of log_softmax with respect to its input, computed on the device from
    node.output and g: a 1-tuple holding a numpy array of g's shape and dtype."""
    # Idea: which sum over the dim does the rule need, and what is softmax in terms of the output?
    ### BEGIN SOLUTION
    s = reduce(g, (node.attrs["dim"],), True, SUM).astype(g.dtype)
    return (elementwise(SUB, g, elementwise(MUL, elementwise(EXP, node.output), s, g.dtype), g.dtype),)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-cuda-log-softmax", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_logits = np.array([[1000.0, 999.0, 998.0, 990.0], [-1000.0, -1001.0, -1002.0, -1010.0],
                    [0.5, -0.25, 2.0, 0.0]], np.float32)  # one batch: rows near 1000, near -1000, near 0
for _dim in (1, 0):
    _want = tinytorch.nn.functional.log_softmax(Tensor(_logits), dim=_dim).numpy()
    _got, _host = spied(lambda v: _log_softmax(Tensor(v), _dim), _logits)
    assert_close(_got, _want, rtol=1e-5, atol=1e-5, what=f"_log_softmax over dim {_dim} of logits near 1000, -1000 "
                 "and 0 (one batch), against the CPU's log_softmax")
    check(not arithmetic(_host), "_log_softmax computes on the device: no numpy arithmetic on the host, on x's data or "
          "on what a launch returned (elementwise and reduce launch your kernels); got the host's computations (name, "
          "operand shapes, result shape)",
          got=arithmetic(_host)[:4])
_x = Tensor(_logits, requires_grad=True)
_g = np.random.default_rng(5).standard_normal(_logits.shape).astype(np.float32)
tinytorch.nn.functional.log_softmax(_x, dim=1).backward(Tensor(_g))
_y = tinytorch.nn.functional.log_softmax(Tensor(_logits), dim=1).numpy()
_back, _host = spied(lambda g, y: _log_softmax_backward(types.SimpleNamespace(attrs={"dim": 1}, output=y,
                                                                              inputs=(_x,)), g), _g, _y)
check(isinstance(_back, tuple) and len(_back) == 1, "_log_softmax_backward returns a tuple with one gradient",
      got=type(_back).__name__)
assert_close(_back[0], _x.grad.numpy(), rtol=1e-5, atol=1e-5, what="_log_softmax_backward against the CPU's "
             "gradient of log_softmax over dim 1")
check(not arithmetic(_host), "_log_softmax_backward computes on the device: no numpy arithmetic on the host; got "
      "the host's computations", got=arithmetic(_host)[:4])
print("✓ log_softmax on the device, forward and backward; the row near -1000:", _log_softmax(Tensor(_logits), 1)[1])

# %% [markdown]
# `register()` puts them all into module 01's registry. `tinytorch.cuda` calls it the first
# time a tensor moves to `cuda` (unless kernels are registered already, as this notebook does
# next, so that its own kernels are the ones that run).

# %%
#| export cuda.kernels
_LAYOUT_OPS = ("permute", "transpose", "view", "reshape", "squeeze", "unsqueeze", "expand",
               "as_strided", "getitem", "flatten")
_LAYOUT_RULES = ("PermuteBackward", "TransposeBackward", "ViewBackward", "ReshapeBackward",
                 "SqueezeBackward", "UnsqueezeBackward", "ToDeviceBackward", "CloneBackward",
                 "ContiguousBackward", "ToBackward", "SumBackward")


def register():
    """Register the cuda kernels of the ops an MLP needs, forward and backward, and the
    backward rule of a device move ("to_device") with autograd."""
    forward = {
        "add": _zip_op(ADD), "sub": _zip_op(SUB), "mul": _zip_op(MUL), "div": _zip_op(DIV),
        "neg": _map_op(NEG), "exp": _map_op(EXP, True), "log": _map_op(LOG, True),
        "relu": _map_op(RELU), "clone": _map_op(COPY), "contiguous": _map_op(COPY),
        "to": lambda x, dtype: elementwise(COPY, x.numpy().astype(dtype)),
        "to_device": _to_device_copy,
        "matmul": lambda a, b: matmul(a.numpy(), b.numpy()),
        "sum": _sum, "mean": _mean,
        "amax": lambda x, dim, keepdim: reduce(x.numpy(), dim, keepdim, MAX).astype(x.dtype),
        "log_softmax": _log_softmax, "mse_loss": _mse_loss, "nll_loss": _nll_loss,
    }
    backward = {
        "AddBackward": _add_backward, "SubBackward": _sub_backward, "MulBackward": _mul_backward,
        "DivBackward": _div_backward, "MatmulBackward": _matmul_backward,
        "NegBackward": lambda node, g: (elementwise(NEG, g),),
        "ExpBackward": lambda node, g: (elementwise(MUL, g, node.output, g.dtype),),
        "LogBackward": lambda node, g: (elementwise(DIV, g, node.inputs[0].numpy(), g.dtype),),
        "ReluBackward": lambda node, g: (elementwise(RELU_GRAD, g, node.inputs[0].numpy(), g.dtype),),
        "ExpandBackward": lambda node, g: (_unbroadcast(g, node.inputs[0].shape),),
        "MeanBackward": _mean_backward, "MseLossBackward": _mse_loss_backward,
        "LogSoftmaxBackward": _log_softmax_backward, "NllLossBackward": _nll_loss_backward,
    }
    from tinytorch.autograd import BACKWARD_RULES, backward_rule  # module 06
    if "to_device" not in BACKWARD_RULES:  # a move passes the gradient back unchanged
        backward_rule("to_device")(lambda node, grad: (grad,))
    for op, fn in forward.items():
        register_kernel(op, "cuda", fn)
    for name, fn in backward.items():
        register_kernel(name, "cuda", fn)
    for name in _LAYOUT_OPS + _LAYOUT_RULES:
        register_kernel(name, "cuda", LAYOUT_ONLY)


# %%
register()  # this notebook's kernels are the ones `cuda` tensors use from here on

# %% [markdown]
# Now the device, from the user's side. `x.to("cuda")` (or `x.cuda()`) gives a tensor whose
# `.device` is `cuda:0`; the ops on it run your kernels; `.cpu()` brings it back. Mixing
# devices in one op is an error with PyTorch's message, except for a 0-d CPU tensor (the
# number in `x * 2` becomes one). `Module.to("cuda")` moves every parameter in place, so an
# optimizer built before the move still holds them.

# %% nbgrader={"grade": true, "grade_id": "test-device", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_h = tinytorch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
_d = _h.to("cuda")
assert_equal((str(_d.device), str(_d.cpu().device), _d.dtype), ("cuda:0", "cpu", np.dtype(np.float32)),
             "(.to('cuda').device, .cpu().device, dtype after the move)")
assert_equal(_d.cpu().tolist(), _h.tolist(), "the round trip cpu -> cuda -> cpu keeps the values")
check(_h.cuda().double().device == "cuda", "a dtype change keeps the device", got=_h.cuda().double().device)
assert_close(((_d * 2 + 1).relu()).cpu(), np.maximum(_h.numpy() * 2 + 1, 0), what="(2x + 1).relu() on cuda")
assert_close((_d @ _d.T).cpu(), _h.numpy() @ _h.numpy().T, rtol=1e-5, what="x @ x.T on cuda")
assert_close(_d.sum(dim=1).cpu(), _h.numpy().sum(axis=1), what="x.sum(dim=1) on cuda")
assert_raises(RuntimeError, lambda: _d + _h, match="same device")
assert_raises(RuntimeError, lambda: _d @ _h.T, match="cuda:0 and cpu")
_lin = nn.Linear(3, 2)
_p0 = _lin.weight
check(_lin.to("cuda") is _lin and _lin.weight is _p0 and _lin.weight.device == "cuda",
      "Module.to('cuda') moves the parameters in place and returns the module", got=_lin.weight.device)
print("✓ the cuda device: moves, ops, mixed-device errors; (x @ x.T) on cuda =", (_d @ _d.T).cpu().tolist())

# %% [markdown]
# The real test of a backend: one training step of an MLP on `cuda` must give the same loss
# and the same gradients as the same step on the CPU, and the same parameters after the
# optimizer's update. (Each op copies to the device and back, so under the simulator a step
# takes a moment.)

# %%
def mlp_step(model, x, y, loss_fn, device):
    """One SGD step of `model` on (x, y) on `device`; returns the loss and the gradients."""
    model.to(device)
    opt = tinytorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.zero_grad()
    loss = loss_fn(model(x.to(device)), y.to(device) if y.dtype.kind == "f" else y)
    loss.backward()
    grads = [p.grad.cpu().numpy().copy() for p in model.parameters()]
    opt.step()
    return loss.cpu().item(), grads, [p.cpu().numpy().copy() for p in model.parameters()]


def twin_mlps(seed, sizes=(5, 7, 3)):
    """Two MLPs with the same weights."""
    with preserved_state():
        tinytorch.manual_seed(seed)
        a = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2]))
    b = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2]))
    for p, q in zip(a.parameters(), b.parameters()):
        q.data = p.numpy().copy()
    return a, b

# %% nbgrader={"grade": true, "grade_id": "test-mlp-on-cuda", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(12)
_x = tinytorch.tensor(_rng.standard_normal((6, 5)).astype(np.float32))
for _name, _loss_fn, _y in [
        ("cross-entropy", nn.CrossEntropyLoss(), tinytorch.tensor(_rng.integers(0, 3, 6))),
        ("MSE", nn.MSELoss(), tinytorch.tensor(_rng.standard_normal((6, 3)).astype(np.float32)))]:
    _cpu_model, _gpu_model = twin_mlps(0)
    _lc, _gc, _pc = mlp_step(_cpu_model, _x, _y, _loss_fn, "cpu")
    _lg, _gg, _pg = mlp_step(_gpu_model, _x, _y, _loss_fn, "cuda")
    check(_gpu_model[0].weight.device == "cuda" and _gpu_model[0].weight.grad.device == "cuda",
          "parameters and their gradients live on cuda", got=_gpu_model[0].weight.grad.device)
    assert_close(_lg, _lc, rtol=1e-5, what=f"{_name} loss: cuda step against cpu step")
    for _i, (_a, _b) in enumerate(zip(_gg, _gc)):
        assert_close(_a, _b, rtol=1e-4, atol=1e-6, what=f"{_name}: gradient of parameter {_i}, cuda against cpu")
    for _i, (_a, _b) in enumerate(zip(_pg, _pc)):
        assert_close(_a, _b, rtol=1e-4, atol=1e-6, what=f"{_name}: parameter {_i} after the SGD step")
print(f"✓ an MLP step on cuda equals the cpu step: loss {_lg:.6f} (cuda) vs {_lc:.6f} (cpu)")

# %% [markdown]
# ## 12. On a real GPU
#
# Under the simulator, timings say nothing about GPUs (every thread is a Python thread). The
# next cell measures the tiled kernel against the naive one and against the CPU's BLAS when
# it runs on a real GPU, with the data already on the device (so the transfer of section 10
# is not counted) and `cuda.synchronize()` before each clock reading (launches are
# asynchronous).
#
# On a machine without an NVIDIA GPU the cell says so and measures nothing. What to expect
# in shape, where it runs: the tiled kernel several times faster than the naive one at
# n = 2048 (TILE-fold fewer global loads), both far ahead of a CPU BLAS for large n, and
# both well behind cuBLAS (PyTorch's `torch.matmul` on cuda), which adds register tiling,
# tensor cores and double buffering. Predict the tiled kernel's speed-up over the naive
# one before you run it on a GPU. `tito gpu-report --mine` times all your kernels there at
# realistic sizes (the copies, map on 10^8 elements, the reduction, both matmuls at 4096,
# an MLP step on `cuda`), beside cuBLAS when PyTorch has CUDA.

# %%
def gpu_matmul_seconds(n=2048):
    """Median seconds of the naive and the tiled kernel on n x n float32, data on the device."""
    a = cuda.to_device(np.random.default_rng(13).standard_normal((n, n)).astype(np.float32))
    c = cuda.device_array((n, n), dtype=np.float32)
    grid = (-(-n // TILE), -(-n // TILE))

    def run(kernel):
        kernel[grid, (TILE, TILE)](a, a, c)
        cuda.synchronize()

    return median_time(lambda: run(matmul_naive_kernel)), median_time(lambda: run(matmul_tiled_kernel))


if SIMULATED or not cuda.is_available():
    print("This needs a real GPU: the CUDA simulator is on here, so GPU timings would be meaningless.")
else:
    _n = 2048
    _t_naive, _t_tiled = gpu_matmul_seconds(_n)
    _hA = np.random.default_rng(13).standard_normal((_n, _n)).astype(np.float32)
    _t_cpu = median_time(lambda: _hA @ _hA, repeats=3)
    for _name, _t in [("naive kernel", _t_naive), ("tiled kernel", _t_tiled), ("CPU BLAS", _t_cpu)]:
        print(f"{_name:13s} {_t * 1e3:9.2f} ms  {2 * _n ** 3 / _t / 1e9:8.1f} GFLOP/s")
    _gpu = cuda.get_current_device().name
    print("GPU:", _gpu.decode() if isinstance(_gpu, bytes) else _gpu, "| measured", time.strftime("%Y-%m-%d"))

# %% [markdown]
# ## What PyTorch does
#
# - **CPU kernels**: ATen's CPU kernels are C++ with explicit SIMD (`at::vec`), parallel
#   loops over OpenMP (`at::parallel_for`, the equivalent of `prange`), and BLAS/oneDNN for
#   matmuls and convolutions. `torch.compile` fuses elementwise chains like bias + GELU
#   into one generated loop (Inductor writes C++ on CPU, Triton on GPU). Its exp, erf and
#   tanh are polynomial approximations on vectors (SLEEF, or ATen's own), the idea of
#   `exp_approx`; the dispatcher picks a CPU kernel per op and dtype, as `compiled()` does
#   for GELU through module 01's dispatch modes.
# - **CUDA kernels**: elementwise kernels take strides, as yours do (with an index
#   arithmetic specialised per dimension count, and 32-bit indices where they fit), and use
#   grid-stride loops and vectorised loads; reductions use the same
#   block-level tree plus warp shuffles (`__shfl_down_sync`) instead of shared memory for
#   the last 32 values; matmuls go to cuBLAS, tiled at several levels (shared memory,
#   registers, tensor cores).
# - **Devices**: `torch.device`, `Tensor.to`, `.cuda()`, `.cpu()`, `Module.to` are what you
#   used here (`tinytorch.device` mirrors `torch.device`). A CUDA tensor's storage is device
#   memory from a caching allocator, so ops do not copy; the dispatcher picks each op's
#   kernel by the inputs' device ("dispatch key"), the registry of module 01 in miniature.
#   Mixed devices raise "Expected all tensors to be on the same device", and a 0-d CPU tensor
#   may join a CUDA op, as here.
# - **numba itself**: `numba.cuda` (the `numba-cuda` package) is what CuPy-free Python GPU
#   code often uses; `numba.cuda.simulator` is how such code is tested without a GPU.
#
# ## Recap
#
# - Compiled loops (`@njit`) run module 01's strided loop at native speed; `prange`
#   parallelises loops whose iterations write disjoint memory; `fastmath` is for code whose
#   result does not depend on the order of operations; `cache=True` avoids recompiling.
# - A library call in a loop computes one number at a time: fast special functions are
#   written as arithmetic and bits (range reduction plus a short polynomial), which the
#   compiler vectorises.
# - Fusion saves memory passes; a parallel reduction needs per-worker partials; the loop
#   order decides whether the inner loop is contiguous; blocking keeps reused data in cache.
# - The roofline says which limit binds: bandwidth for low arithmetic intensity, peak for
#   high.
# - On the GPU every thread computes its index from `blockIdx`, `blockDim`, `threadIdx`;
#   guards and grid-stride loops make kernels size-agnostic; module 01's address formula,
#   compiled as a device function, lets them read views and broadcasts in place; shared memory and
#   `syncthreads` let a block cooperate (a tree reduction, a tiled matmul); tiling multiplies
#   the arithmetic intensity by the tile size; transfers cost more than small kernels.
# - A device is a property of the data; a per-device kernel registry in the dispatcher lets
#   the same model code run on the CPU or on `cuda`, with identical results.

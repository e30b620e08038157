"""numba CPU kernels: each equals numpy (or PyTorch) on several shapes, edges included."""
import math

import numpy as np
import pytest
from numba import njit

from tinytorch.backends import cpu_kernels as ck
from tinytorch.testing import element_reads, float64_ops, peak_bytes, reuse_distances, simd_float_ops


def _ints(values):
    return np.asarray(tuple(values), dtype=np.int64).reshape(-1)


def _layout(arr):
    base = arr.base if arr.base is not None else arr
    flat = base.reshape(-1)
    offset = (arr.__array_interface__["data"][0] - flat.__array_interface__["data"][0]) // arr.itemsize
    return flat, arr.shape, tuple(s // arr.itemsize for s in arr.strides), offset


@njit
def _neg(v):
    return -v


@njit
def _mul(a, b):
    return a * b


@njit
def _max(a, b):
    return max(a, b)


@pytest.mark.parametrize("shape,strides,offset", [((2, 3), (3, 1), 0), ((2, 3), (1, 2), 0),
                                                  ((3, 4, 2), (0, 2, 1), 5), ((4,), (-1,), 3), ((), (), 7)])
def test_strided_position_matches_the_address_formula(shape, strides, offset):
    for ordinal in range(max(1, math.prod(shape))):
        index = np.unravel_index(ordinal, shape) if shape else ()
        want = offset + sum(int(i) * s for i, s in zip(index, strides))
        got = ck.strided_position(ordinal, _ints(shape), _ints(strides), offset)
        assert got == want, f"ordinal {ordinal} of shape {shape}, strides {strides}: expected position {want}, got {got}"


@pytest.mark.parametrize("view", ["transpose", "slice", "flip", "broadcast"])
def test_strided_position_in_compiled_map_and_reduce(view):
    base = np.arange(24.0)
    src = {"transpose": base.reshape(4, 6).T, "slice": base.reshape(4, 6)[1:, 2:5],
           "flip": base.reshape(4, 6)[::-1, ::2], "broadcast": np.broadcast_to(base[:6], (3, 6))}[view]
    st, sh, ss, so = _layout(src)
    out = np.zeros(sh)
    ck.strided_map(_neg, out.reshape(-1), sh, tuple(int(s) for s in np.array(out.strides) // 8), 0, st, sh, ss, so)
    np.testing.assert_allclose(out, -src, err_msg=f"compiled strided_map on a {view} view")
    red = np.zeros((sh[0], 1))
    ck.strided_reduce(_max, -np.inf, red.reshape(-1), (sh[0], 1), (1, 1), 0, st, sh, ss, so, 1)
    np.testing.assert_allclose(red[:, 0], src.max(axis=1), err_msg=f"compiled strided_reduce (max, dim 1) on a {view} view")


def test_strided_position_in_compiled_zip_broadcasts():
    out = np.zeros((3, 4))
    ck.strided_zip(_mul, out.reshape(-1), (3, 4), (4, 1), 0, np.arange(4.0), (4,), (1,), 0,
                   np.arange(1.0, 4.0), (3, 1), (1, 1), 0)
    np.testing.assert_allclose(out, np.arange(4.0) * np.arange(1.0, 4.0)[:, None],
                               err_msg="strided_zip of a (4,) row and a (3, 1) column")


@pytest.mark.parametrize("shape", [(5, 7), (1, 1), (3, 33)])
def test_bias_gelu_equals_torch(rng, torch, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    want = torch.nn.functional.gelu(torch.from_numpy(x) + torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(ck.bias_gelu(x, b), want, rtol=1e-5, atol=1e-6,
                               err_msg=f"bias_gelu on {shape} vs torch gelu(x + b)")


def test_bias_gelu_empty_batch():
    b = np.array([0.0, 1.0, -1.0], np.float32)
    got = ck.bias_gelu(np.zeros((0, 3), np.float32), b)
    assert got.shape == (0, 3), f"an empty batch keeps its shape (0, 3), got {got.shape}"
    np.testing.assert_allclose(ck.bias_gelu(np.array([[-1.0, 0.0, 2.0]], np.float32), b),
                               [[-0.15865526, 0.8413447, 0.8413447]], rtol=1e-6, err_msg="GELU(-1), GELU(1), GELU(1)")


def test_bias_gelu_keeps_float64_in_double_precision(rng):
    """A float64 input gets a float64 result exact to double precision: a constant rounded to
    float32 (np.float32(0.5 ** 0.5)) is off by about 1e-8."""
    x, b = rng.standard_normal((4, 6)) * 3, rng.standard_normal(6)
    got = ck.bias_gelu(x, b)
    assert got.dtype == np.float64, f"bias_gelu on float64 input returned {got.dtype}"
    v = x + b
    want = 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg="bias_gelu on float64 (4, 6)")


def test_bias_gelu_computes_float32_in_float32(rng):
    """A float64 constant promotes the whole element, erf included: the same values, slower."""
    x = rng.standard_normal((3, 5)).astype(np.float32)
    ops = float64_ops(ck.bias_gelu, x, np.ones(5, np.float32))
    assert ops == 0, f"bias_gelu on float32 input has {ops} float64 operations in its compiled code, expected none"


def test_strided_position_stores_no_multi_index():
    """A list or array of the indices costs an allocation per element in a compiled loop."""
    deep = np.array((2,) * 40 + (1,) * 360, np.int64)  # 2**40 elements; a stored multi-index: 400 numbers, over 3000 bytes
    held = peak_bytes(ck.strided_position, 12345, deep, np.ones(400, np.int64), 0)
    assert held < 2000, f"strided_position held {held} bytes at once on a 400-dimensional shape: a stored multi-index"


def test_bias_gelu_is_one_pass_with_no_temporary_array(rng):
    """Fusion is the point: the kernel (run as Python, where numpy's allocations show) holds
    the output and nothing else of x's size."""
    x = rng.standard_normal((32, 64)).astype(np.float32)
    peak = peak_bytes(ck.bias_gelu, x, np.ones(64, np.float32))
    assert peak < 1.5 * x.nbytes, f"bias_gelu held {peak} bytes at once for an output of {x.nbytes}: a temporary array"


@pytest.mark.parametrize("n,chunks", [(10_007, 64), (10, 3), (5, 8), (1, 1)])
def test_parallel_sum_equals_numpy(rng, n, chunks):
    x = rng.standard_normal(n).astype(np.float32)
    got = ck.parallel_sum(x, chunks)
    want = np.sum(x, dtype=np.float64)
    error = abs(got - want) / max(1.0, abs(want))
    assert error <= 1e-9, (f"sum of {n} floats in {chunks} chunks: expected {want}, got {got}"
                           + (" (off in the 7th digit or so: a partial sum kept in float32, which rounds each "
                              "addition to 24 bits)" if error < 1e-4 else ""))


def test_parallel_sum_each_iteration_reads_one_contiguous_piece(rng):
    x = rng.standard_normal(100).astype(np.float32)
    _, reads = element_reads(ck.parallel_sum, x, 4, of=0)  # run as Python, one iteration after another
    runs = 1 + sum(b != a + 1 for a, b in zip(reads, reads[1:]))
    assert sorted(reads) == list(range(100)), "parallel_sum(x, 4) reads each element of x once"
    assert runs <= 4, (f"parallel_sum(x, 4) read x in {runs} runs of consecutive elements: each of the 4 iterations "
                       f"must sum one contiguous piece (striding through x uses one float of each cache line)")


def test_parallel_sum_empty_and_accurate():
    assert ck.parallel_sum(np.zeros(0, np.float32), 4) == 0.0, "the sum of an empty array is 0"
    x = np.full(2_000_000, np.float32(0.1))
    want = 2_000_000 * float(np.float32(0.1))
    got = ck.parallel_sum(x, 64)
    assert abs(got - want) < 1e-6, (
        f"2e6 x 0.1: expected {want}, got {got}. Far off (half, a quarter): iterations of the prange loop add into "
        f"the same partial, and their updates are lost (a race); close but not equal: the sum was not kept in float64")


SHAPES = [(7, 5, 3), (1, 1, 1), (33, 70, 65), (4, 0, 3), (0, 3, 2)]


@pytest.mark.parametrize("n,k,m", SHAPES)
def test_matmul_ikj_equals_numpy(rng, n, k, m):
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    got = ck.matmul_ikj(a, b)
    assert got.dtype == np.float32, f"matmul_ikj keeps float32, got {got.dtype}"
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4, err_msg=f"matmul_ikj {(n, k)} @ {(k, m)}")


@pytest.mark.parametrize("n,k,m", SHAPES)
@pytest.mark.parametrize("block", [1, 16, 64])
def test_matmul_blocked_equals_numpy(rng, n, k, m, block):
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    np.testing.assert_allclose(ck.matmul_blocked(a, b, block), a @ b, rtol=1e-4, atol=1e-4,
                               err_msg=f"matmul_blocked block={block}, {(n, k)} @ {(k, m)}")


def _b_reads(kernel, *extra):
    """The reads of B by kernel(A, B, *extra) for an (8, 12) @ (12, 12) product, in order."""
    rng = np.random.default_rng(170)  # the same inputs whichever test calls it
    a = rng.standard_normal((8, 12)).astype(np.float32)
    b = rng.standard_normal((12, 12)).astype(np.float32)
    return element_reads(kernel, a, b, *extra, of=1)[1]


@pytest.mark.parametrize("name", ["matmul_ikj", "matmul_blocked"])
def test_matmul_inner_loop_runs_along_rows_of_b(name):
    """Neighbours in memory read one after the other: every float of a cache line is used."""
    reads = _b_reads(getattr(ck, name), *((4,) if name == "matmul_blocked" else ()))
    along = float(np.mean(np.diff(reads) == 1))
    assert along > 0.5, (f"{name}: only {along:.0%} of consecutive reads of B are neighbours in memory; the "
                         f"innermost loop must run along a row of B (i-k-j), not down a column (i-j-k: 0%)")


def test_matmul_blocked_reads_b_again_while_its_tile_is_in_cache():
    """With 4 x 4 tiles an element of B is read again after about 16 reads; row by row, after
    all 144 of B."""
    reuse = float(np.median(reuse_distances(_b_reads(ck.matmul_blocked, 4))))
    assert reuse <= 2 * 4 * 4, (f"matmul_blocked(block=4): a median of {reuse:.0f} reads of B between two reads of "
                                f"one element (at most 32 when a 4 x 4 tile of B is reused while in cache; plain "
                                f"i-k-j over a (12, 12) B: 144)")


def _assert_vectorised(name, *extra):
    """The compiler vectorises the innermost loop only where it can prove the indices are in
    range and non-negative: a loop from 0 over a row or a tile's row, not range(j0, j1)."""
    rng = np.random.default_rng(636)  # the same inputs whichever test calls it
    a = rng.standard_normal((8, 12)).astype(np.float32)
    ops = simd_float_ops(getattr(ck, name), a, a[:, :8].T.copy(), *extra)
    assert ops > 0, (f"{name}: numba compiled the kernel without a single SIMD (vector) arithmetic instruction, "
                     f"so its innermost loop does one multiply-add per instruction (section 4's note says what "
                     f"the compiler must be able to see about an inner loop's indices)")


def test_matmul_ikj_inner_loop_compiles_to_simd_instructions():
    _assert_vectorised("matmul_ikj")


def test_matmul_blocked_inner_loop_compiles_to_simd_instructions():
    _assert_vectorised("matmul_blocked", 4)


@pytest.mark.parametrize("kh,kw,stride,padding", [(3, 3, 1, 0), (3, 2, 2, 1), (1, 1, 1, 0), (5, 4, 1, 0), (2, 2, 3, 2)])
def test_im2col_equals_torch_unfold(rng, torch, kh, kw, stride, padding):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    want = torch.nn.functional.unfold(torch.from_numpy(x), (kh, kw), stride=stride, padding=padding).numpy()
    got = ck.im2col(x, kh, kw, stride, padding)
    assert got.shape == want.shape, f"im2col shape: expected {want.shape}, got {got.shape}"
    np.testing.assert_allclose(got, want, err_msg=f"im2col {kh}x{kw}, stride {stride}, padding {padding} vs unfold")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_im2col_keeps_the_dtype_of_its_input(rng, dtype):
    x = (rng.standard_normal((1, 2, 4, 4)) * 10).astype(dtype)
    got = ck.im2col(x, 2, 2, 1, 1)
    assert got.dtype == np.dtype(dtype), f"im2col of {np.dtype(dtype)} images returned {got.dtype} columns"
    np.testing.assert_array_equal(got, ck.im2col(x.astype(np.float64), 2, 2, 1, 1).astype(dtype),
                                  err_msg=f"im2col of {np.dtype(dtype)} images: the same columns, not rounded")


def test_im2col_equals_module_09(rng):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    from tinytorch.nn.conv import im2col as reference
    np.testing.assert_allclose(ck.im2col(x, 3, 3, 2, 1), reference(x, 3, 2, 1),
                               err_msg="the compiled im2col and module 09's im2col give the same columns")

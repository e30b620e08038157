"""CUDA kernels (under numba's CUDA simulator when there is no GPU): each equals numpy,
including sizes that are not multiples of the block or tile size, and empty or 1-element edges."""
import numpy as np
import pytest

from tinytorch.cuda import kernels as K
from tinytorch.testing import (
    bank_conflicts,
    coalesced_share,
    divergent_barriers,
    float64_accumulators,
    global_reads,
    multiply_written,
    scattered_active_threads,
    shared_memory_races,
    with_garbage_shared_memory,
)

# more elements than the capped grid has threads (the grid-stride loop), and a partial block
SIZES = [1, 5, K.BLOCK, K.BLOCK * K.MAX_BLOCKS + 3]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op,ref", [(K.EXP, np.exp), (K.NEG, np.negative), (K.RELU, lambda v: np.maximum(v, 0)),
                                    (K.COPY, lambda v: v)])
def test_map_kernel_equals_numpy(rng, n, op, ref):
    x = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(K.elementwise(op, x), ref(x), rtol=1e-6, atol=1e-7, err_msg=f"map op {op} over {n} elements")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op,ref", [(K.ADD, np.add), (K.SUB, np.subtract), (K.MUL, np.multiply),
                                    (K.DIV, np.divide), (K.RELU_GRAD, lambda g, x: np.where(x > 0, g, 0))])
def test_zip_kernel_equals_numpy(rng, n, op, ref):
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) + 3
    np.testing.assert_allclose(K.elementwise(op, a, b), ref(a, b), rtol=1e-6, atol=1e-7, err_msg=f"zip op {op} over {n} elements")


def test_zip_kernel_broadcast_and_empty(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(K.elementwise(K.MUL, a, b), a * b, rtol=1e-6, err_msg="(3, 4) * (4,) broadcast")
    got = K.elementwise(K.ADD, np.zeros((0, 4), np.float32), np.ones(4, np.float32))
    assert got.shape == (0, 4), f"an empty zip keeps the shape (0, 4), got {got.shape}"



_M = np.arange(12, dtype=np.float32).reshape(3, 4)
VIEWS = {"transpose": _M.T, "flip": _M[:, ::-1], "slice": _M[1:, 1:3], "broadcast row": np.broadcast_to(_M[1], (3, 4))}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_map_kernel_reads_a_strided_input_through_its_strides(view):
    np.testing.assert_allclose(K.elementwise(K.NEG, view), -view, err_msg="map NEG on a strided view")


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_zip_kernel_reads_both_strided_inputs_through_their_strides(view):
    ones = np.ones(view.shape, np.float32)
    np.testing.assert_allclose(K.elementwise(K.SUB, view, ones), view - 1, err_msg="zip SUB: the view minus ones")
    np.testing.assert_allclose(K.elementwise(K.SUB, ones, view), 1 - view, err_msg="zip SUB: ones minus the view")

@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_map_kernel_covers_every_element_on_any_grid(rng, blocks):
    x = rng.standard_normal(K.BLOCK * 5 + 3).astype(np.float32)
    out = K.cuda.to_device(np.full(x.size, np.nan, np.float32))
    K.map_kernel[blocks, K.BLOCK](*K._strided_operand(x, x.shape, x.dtype), out,
                                  K.cuda.to_device(np.asarray(x.shape, np.int64)), K.EXP)
    np.testing.assert_allclose(out.copy_to_host(), np.exp(x), rtol=1e-6, err_msg=(
        f"map_kernel launched by hand on {blocks} block(s) of {K.BLOCK} threads over {x.size} elements: any grid "
        f"covers every element (its size comes from cuda.gridDim and cuda.blockDim, not the launcher's constants)"))


@pytest.mark.parametrize("blocks", [1, 2, 3])
def test_zip_kernel_covers_every_element_on_any_grid(rng, blocks):
    a, b = (rng.standard_normal(K.BLOCK * 5 + 3).astype(np.float32) for _ in range(2))
    out = K.cuda.to_device(np.full(a.size, np.nan, np.float32))
    K.zip_kernel[blocks, K.BLOCK](*K._strided_operand(a, a.shape, a.dtype), *K._strided_operand(b, b.shape, b.dtype),
                                  out, K.cuda.to_device(np.asarray(a.shape, np.int64)), K.MUL)
    np.testing.assert_allclose(out.copy_to_host(), a * b, rtol=1e-6, err_msg=(
        f"zip_kernel launched by hand on {blocks} block(s) of {K.BLOCK} threads over {a.size} elements: any grid "
        f"covers every element (its size comes from cuda.gridDim and cuda.blockDim, not the launcher's constants)"))


def test_map_kernel_empty():
    got = K.elementwise(K.EXP, np.zeros((2, 0), np.float32))
    assert got.shape == (2, 0), f"an empty map keeps the shape (2, 0), got {got.shape}"
    np.testing.assert_allclose(K.elementwise(K.EXP, np.zeros(3, np.float32)), np.ones(3), err_msg="exp(0) = 1")


# The barrier and shared-memory rules first: a kernel that breaks them can also give wrong values,
# and the rule is the cause to read first.
def _assert_same_barriers(launch, kernel):
    divergent = divergent_barriers(launch)
    if divergent is None:
        pytest.skip("barriers are watched under numba's CUDA simulator only (this run uses a real GPU)")
    if divergent:
        block, thread, lines, first_lines = divergent[0]
        raise AssertionError(
            f"{kernel}: threads of one block passed different cuda.syncthreads() calls: in block {block}, thread "
            f"{thread} passed barriers at lines {lines} of {kernel}, the block's first thread at lines "
            f"{first_lines} (counted from its @cuda.jit line; a barrier inside an `if`, or after a `return`, that "
            f"some threads skip); "
            f"{len(divergent)} such thread(s) in all")


@pytest.mark.parametrize("n", [K.BLOCK + 3, 2 * K.BLOCK])
def test_block_reduce_kernel_threads_pass_the_same_barriers(rng, n):
    """A syncthreads() that only some threads of a block reach is undefined behaviour on a GPU."""
    x = rng.standard_normal((2, n)).astype(np.float32)
    _assert_same_barriers(lambda: K.reduce_rows(x, K.SUM), "block_reduce_kernel")


def test_matmul_tiled_kernel_threads_pass_the_same_barriers(rng):
    """Edge tiles included: threads outside C still take part in loading the tiles and in every barrier."""
    a = rng.standard_normal((K.TILE + 2, K.TILE + 1)).astype(np.float32)
    b = rng.standard_normal((K.TILE + 1, 3)).astype(np.float32)
    _assert_same_barriers(lambda: K.matmul(a, b), "matmul_tiled_kernel")


def _assert_no_races(launch, kernel):
    races = shared_memory_races(launch)
    if races is None:
        pytest.skip("shared memory is watched under numba's CUDA simulator only (this run uses a real GPU)")
    if races:
        block, step, slot, writer, other, access = races[0]
        raise AssertionError(
            f"{kernel}: a race in shared memory: in block {block}, between barriers {step} and {step + 1}, thread "
            f"{writer} wrote slot {slot} and thread {other} {'wrote' if access == 'write' else 'read'} it (nothing "
            f"orders two threads between barriers: a cuda.syncthreads() is missing between the write and the "
            f"other access); {len(races)} such slot(s) found, at most 5 listed: {races}")


def test_block_reduce_kernel_has_no_shared_memory_races(rng):
    """Between two barriers no thread touches a slot another thread writes: the loads, and each halving step."""
    x = rng.standard_normal((2, K.BLOCK + 3)).astype(np.float32)
    _assert_no_races(lambda: K.reduce_rows(x, K.SUM), "block_reduce_kernel")


def test_matmul_tiled_kernel_has_no_shared_memory_races(rng):
    """Two steps along k: the tiles are read only once loaded, and reloaded only once every thread is done."""
    a = rng.standard_normal((K.TILE + 2, K.TILE + 1)).astype(np.float32)
    b = rng.standard_normal((K.TILE + 1, 3)).astype(np.float32)
    _assert_no_races(lambda: K.matmul(a, b), "matmul_tiled_kernel")


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, K.BLOCK), (3, 3 * K.BLOCK + 5), (1, 2 * K.BLOCK + 1)])
@pytest.mark.parametrize("op", [K.SUM, K.MAX])
def test_block_reduce_kernel_equals_numpy(rng, shape, op):
    x = rng.standard_normal(shape).astype(np.float32) - 2.0  # all negative-ish: idle threads must not add a 0 max
    want = x.sum(axis=1) if op == K.SUM else x.max(axis=1)
    np.testing.assert_allclose(K.reduce_rows(x, op), want, rtol=1e-5, atol=1e-5,
                               err_msg=f"{'sum' if op == K.SUM else 'max'} of the rows of a {shape} array")


def test_block_reduce_kernel_sums_int64_exactly():
    """The shared buffer is a float64 accumulator: int64 values near 2**40 add up exactly."""
    x = np.array([[2**40 + 1, 2**40 + 3, 5], [-(2**45), 7, 2**45]], np.int64)
    got = K.reduce_rows(x, K.SUM)
    assert got.tolist() == [2**41 + 9, 7], f"int64 row sums: expected {[2**41 + 9, 7]}, got {got.tolist()}"


def test_block_reduce_kernel_over_dims(rng):
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(K.reduce(x, (0, 2), False, K.SUM), x.sum(axis=(0, 2)), rtol=1e-5, atol=1e-5,
                               err_msg="sum over dims (0, 2)")
    np.testing.assert_allclose(K.reduce(x, (1,), True, K.MAX), x.max(axis=1, keepdims=True), err_msg="max over dim 1, keepdim")
    np.testing.assert_allclose(K.reduce_rows(np.zeros((2, 0), np.float32), K.SUM), [0.0, 0.0], err_msg="empty rows sum to 0")


MATMUL_SHAPES = [(9, 7, 5), (1, 1, 1), (K.TILE, K.TILE, K.TILE), (2 * K.TILE + 1, 3, K.TILE + 2),
                 (3, 2 * K.TILE + 1, 2), (3, 0, 2)]


@pytest.mark.parametrize("n,k,m", MATMUL_SHAPES)
def test_matmul_naive_kernel_equals_numpy(rng, n, k, m):
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    np.testing.assert_allclose(K.matmul_naive(a, b), a @ b, rtol=1e-5, atol=1e-5, err_msg=f"naive kernel {(n, k)} @ {(k, m)}")


@pytest.mark.parametrize("n,k,m", MATMUL_SHAPES)
def test_matmul_tiled_kernel_equals_numpy(rng, n, k, m):
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    np.testing.assert_allclose(K.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5, err_msg=f"tiled kernel {(n, k)} @ {(k, m)}")


def test_matmul_tiled_kernel_other_shapes(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(K.matmul(x, w), x @ w, rtol=1e-5, atol=1e-5, err_msg="(2, 3, 4) @ (4, 2)")
    np.testing.assert_allclose(K.matmul(w[:, 0], w), w[:, 0] @ w, rtol=1e-5, atol=1e-5, err_msg="1-D @ 2-D")
    with pytest.raises(TypeError, match="float32"):
        K.matmul(w.astype(np.float64), w)


@pytest.mark.parametrize("n,k,m", [(9, K.TILE - 1, 5), (K.TILE + 2, 1, 3)])  # k < TILE: an edge tile first
def test_matmul_tiled_kernel_reads_no_shared_slot_it_did_not_write(rng, n, k, m):
    """Nothing initialises shared memory on a GPU: an edge tile's slots outside A or B must be written too."""
    a = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal((k, m)).astype(np.float32)
    c = with_garbage_shared_memory(lambda: K.matmul(a, b))
    if c is None:
        pytest.skip("shared memory is filled with garbage under numba's CUDA simulator only (this run uses a GPU)")
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5,
                               err_msg=f"tiled kernel {(n, k)} @ {(k, m)} with shared memory starting as NaN")


def test_block_reduce_kernel_reads_no_shared_slot_it_did_not_write(rng):
    x = rng.standard_normal((2, K.BLOCK + 3)).astype(np.float32)
    total = with_garbage_shared_memory(lambda: K.reduce_rows(x, K.SUM))
    if total is None:
        pytest.skip("shared memory is filled with garbage under numba's CUDA simulator only (this run uses a GPU)")
    np.testing.assert_allclose(total, x.sum(axis=1), rtol=1e-5, err_msg="row sums with shared memory starting as NaN")


@pytest.mark.parametrize("block", [8, 64])
def test_block_reduce_kernel_follows_block(rng, monkeypatch, block):
    """BLOCK is 32 under the simulator and 256 on a GPU: a kernel with either written into it
    is right on one of them only (a buffer too small for BLOCK overflows, one too large
    leaves slots that the tree reads)."""
    x = rng.standard_normal((3, 2 * block + 5)).astype(np.float32)
    monkeypatch.setattr(K, "BLOCK", block)
    got = with_garbage_shared_memory(lambda: K.reduce_rows(x, K.MAX))
    if got is None:
        pytest.skip("a GPU kernel is compiled for one BLOCK; the simulator runs it as Python with another")
    np.testing.assert_allclose(got, x.max(axis=1), err_msg=f"block_reduce_kernel with BLOCK = {block}: its shared "
                               "buffer and its tree follow BLOCK, not a number written into the kernel")


@pytest.mark.parametrize("tile", [2, 8])
def test_matmul_tiled_kernel_follows_tile(rng, monkeypatch, tile):
    a = rng.standard_normal((tile + 3, tile + 5)).astype(np.float32)
    b = rng.standard_normal((tile + 5, 3)).astype(np.float32)
    monkeypatch.setattr(K, "TILE", tile)
    got = with_garbage_shared_memory(lambda: K.matmul(a, b))
    if got is None:
        pytest.skip("a GPU kernel is compiled for one TILE; the simulator runs it as Python with another")
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5, err_msg=f"matmul_tiled_kernel with TILE = {tile}: "
                               "its shared tiles and its loops follow TILE, not a number written into the kernel")


@pytest.mark.parametrize("op,second", [(K.EXP, False), (K.ADD, True)], ids=["map", "zip"])
def test_elementwise_kernels_write_each_element_once(rng, op, second):
    """One thread per element: a redundant write leaves the values right and wastes the work."""
    n = K.BLOCK * 3 + 1
    x = rng.standard_normal(n).astype(np.float32)
    twice = multiply_written(lambda: K.elementwise(op, x, x if second else None))
    if twice is None:
        pytest.skip("writes are counted under numba's CUDA simulator only (this run uses a real GPU)")
    assert twice == [], f"elements written by several threads (shape, element, threads): {twice}"


@pytest.mark.parametrize("op,second", [(K.EXP, False), (K.MUL, True)], ids=["map", "zip"])
def test_elementwise_kernels_reads_are_coalesced(rng, op, second):
    """More elements than threads: at each step the threads of a warp read neighbouring elements."""
    n = K.BLOCK * K.MAX_BLOCKS * 2 + 3
    x = rng.standard_normal(n).astype(np.float32)
    share = coalesced_share(lambda: K.elementwise(op, x, x if second else None))
    if share is None:
        pytest.skip("reads are watched under numba's CUDA simulator only (this run uses a real GPU)")
    kernel = "zip_kernel" if second else "map_kernel"
    assert share > 0.9, (f"{kernel}: {share:.0%} of neighbouring threads' reads at one step touch neighbouring "
                         f"elements; with a grid-stride loop all do (a contiguous chunk per thread: none)")


def test_block_reduce_kernel_writes_each_result_once(rng):
    x = rng.standard_normal((2, K.BLOCK + 3)).astype(np.float32)
    twice = multiply_written(lambda: K.reduce_rows(x, K.SUM))
    if twice is None:
        pytest.skip("writes are counted under numba's CUDA simulator only (this run uses a real GPU)")
    assert twice == [], f"block results written by several threads (shape, element, threads): {twice}"


def test_matmul_tiled_kernel_reads_global_memory_tile_times_less_than_the_naive_one(rng):
    """Each element a block loads into shared memory is used TILE times: that is the point of tiling."""
    a = rng.standard_normal((2 * K.TILE, 3 * K.TILE)).astype(np.float32)
    b = rng.standard_normal((3 * K.TILE, K.TILE)).astype(np.float32)
    naive, tiled = global_reads(lambda: K.matmul_naive(a, b)), global_reads(lambda: K.matmul(a, b))
    if naive is None:
        pytest.skip("global reads are counted under numba's CUDA simulator only (this run uses a real GPU)")
    assert naive == 2 * 3 * K.TILE * (2 * K.TILE * K.TILE), "the naive kernel reads 2k elements per output"
    assert tiled * K.TILE <= naive, f"tiled kernel: {tiled} global reads, naive: {naive}"


@pytest.mark.parametrize("kernel,launch,wrong", [
    ("matmul_tiled_kernel", lambda a: K.matmul(a, a), "loading a tile transposed makes them a row apart"),
    ("matmul_naive_kernel", lambda a: K.matmul_naive(a, a), "with x along the rows of C they are a row apart"),
], ids=["tiled", "naive"])
def test_matmul_kernels_reads_are_coalesced(rng, kernel, launch, wrong):
    """Threads x and x + 1 of a warp read neighbouring elements (a broadcast read of one
    element is neither): one transaction per warp."""
    a = rng.standard_normal((2 * K.TILE, 2 * K.TILE)).astype(np.float32)
    share = coalesced_share(lambda: launch(a))
    if share is None:
        pytest.skip("reads are watched under numba's CUDA simulator only (this run uses a real GPU)")
    assert share > 0.99, (f"{kernel}: {share:.0%} of the reads of neighbouring threads (x, x + 1) touch "
                          f"neighbouring elements; {wrong}")


@pytest.mark.parametrize("kernel,launch", [("matmul_naive_kernel", K.matmul_naive), ("matmul_tiled_kernel", K.matmul)],
                         ids=["naive", "tiled"])
def test_matmul_kernels_accumulate_in_float32(rng, kernel, launch):
    """No accumulator starts as a Python number: numba would type it float64 on a GPU (the
    simulator computes in float32 either way, so this reads the kernel's source)."""
    a = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(launch(a, a.T), a @ a.T, rtol=1e-5, atol=1e-5)
    wide = float64_accumulators(getattr(K, kernel))
    assert wide == [], (f"{kernel}: these variables start as a Python number and so add float32 products in "
                        f"float64 on a GPU (variable, line of the first update): {wide}")


def test_block_reduce_kernel_gives_each_step_to_the_first_threads(rng):
    """The threads with work in a step are 0 .. n - 1: whole warps retire instead of all idling in part."""
    x = rng.standard_normal((1, K.BLOCK + 3)).astype(np.float32)
    scattered = scattered_active_threads(lambda: K.reduce_rows(x, K.SUM))
    if scattered is None:
        pytest.skip("shared memory is watched under numba's CUDA simulator only (this run uses a real GPU)")
    assert scattered == [], ("block_reduce_kernel: in these steps the threads that wrote the buffer were not the "
                             f"first ones (block, step, first writers): {scattered}")


def test_block_reduce_kernel_has_no_bank_conflicts(rng):
    """Neighbouring threads of a warp touch different banks of shared memory in each access."""
    x = rng.standard_normal((1, K.BLOCK + 3)).astype(np.float32)
    conflict = bank_conflicts(lambda: K.reduce_rows(x, K.SUM))
    if conflict is None:
        pytest.skip("shared memory is watched under numba's CUDA simulator only (this run uses a real GPU)")
    assert conflict[0] == 1, ("block_reduce_kernel: a warp's shared-memory access hit one bank with "
                              f"{conflict[0]} different words (block, step, k-th access, slots): {conflict[1]}")

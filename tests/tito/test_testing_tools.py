"""tinytorch.testing's tools that see how a result was computed: spied (the numpy operations),
parallel_write_clashes (the writes of a numba prange loop's iterations), and the meters of
Python steps and peak memory; and outcome, which turns what a call raised into a value a
check can show."""
import gc
import math
import re
import weakref

import numpy as np
import pytest
from numba import njit, prange

from tinytorch.testing import (
    _show,
    assert_close,
    float64_accumulators,
    float64_ops,
    math_library_calls,
    outcome,
    parallel_regions,
    parallel_write_clashes,
    peak_bytes,
    prange_trips,
    python_steps,
    spied,
)


class _Cycle:
    """An object in a reference cycle: only a garbage collection frees it."""

    def __init__(self):
        self.me = self


def _garbage_with_a_callback(callback):
    """Garbage whose collection runs `callback` (as a finished thread's does, through WeakSets)."""
    cycle = _Cycle()
    return weakref.ref(cycle, callback)


def _measured_after_the_garbage_went(meter, callback):
    """What fn saw when `meter` ran it, with garbage made just before whose collection would
    run `callback`: whether that garbage was already gone and whether the collector could fire
    inside fn. (fn forces no collection itself: one it forced would also collect what other
    threads, pytest-xdist's among them, let go of meanwhile, and run their callbacks here.)"""
    ref = _garbage_with_a_callback(callback)
    seen = []
    measured = meter(lambda: seen.append((ref() is None, gc.isenabled())))
    return measured, seen


def test_python_steps_counts_no_collection_of_earlier_garbage():
    """A collection inside the measurement would run the callbacks of garbage made before it
    and count them as the function's steps."""
    steps, seen = _measured_after_the_garbage_went(python_steps, lambda r: [i for i in range(100)])
    assert seen == [(True, False)]  # collected before fn ran; none could fire while it ran
    assert steps == 3  # the lambda's call, its one line and its return


def test_peak_bytes_counts_no_collection_of_earlier_garbage():
    peak, seen = _measured_after_the_garbage_went(peak_bytes, lambda r: np.ones(1_000_000).sum())
    assert seen == [(True, False)]
    assert peak < 100_000  # the callback's 8 MB array was made and freed before


@pytest.mark.parametrize("widen", [lambda a: a.astype(np.int32), lambda a: np.asarray(a, dtype=np.int32),
                                   lambda a: np.array(a, dtype=np.int32)], ids=["astype", "asarray", "array"])
def test_a_widened_copy_is_still_watched(widen):
    x, w = np.ones((2, 3), np.int8), np.ones((4, 3), np.int8)
    result, log = spied(lambda a, b: widen(a) @ widen(b).T, x, w)
    np.testing.assert_array_equal(np.asarray(result), np.full((2, 4), 3))
    assert log == [("matmul", ((2, 3), (3, 4)), (2, 4))]


def test_spied_returns_plain_arrays_so_a_failed_comparison_shows_no_spy():
    result, _ = spied(lambda a: (a * 2, [a + 1]), np.ones(2))
    assert type(result[0]) is np.ndarray and type(result[1][0]) is np.ndarray
    with pytest.raises(AssertionError) as failed:
        np.testing.assert_array_equal(result[0], np.zeros(2))
    assert "_Spy" not in str(failed.value) and "ACTUAL: array([2., 2.])" in str(failed.value)


def test_outcome_returns_the_result_or_says_what_was_raised():
    def stub():
        raise NotImplementedError("stub() is not implemented yet")

    assert outcome(lambda a, b: a + b, 1, b=2) == 3
    assert outcome(lambda: 1 / 0) == "ZeroDivisionError: division by zero"
    with pytest.raises(NotImplementedError):  # a stub not written yet is not an outcome
        outcome(stub)


def test_numpy_is_restored_even_when_the_function_raises():
    asarray, array = np.asarray, np.array
    with pytest.raises(ZeroDivisionError):
        spied(lambda a: 1 / 0, np.ones(2))
    assert (np.asarray, np.array) == (asarray, array)
    assert type(np.asarray(np.ones(2))) is np.ndarray


@njit(parallel=True)
def _chunk_sums(x, n_chunks, into_first):
    n = x.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    partials = np.zeros(n_chunks)
    for c in prange(n_chunks):
        for i in range(c * size, min(c * size + size, n)):
            partials[0 if into_first else c] += x[i]
    return partials.sum()


@njit(parallel=True)
def _scalar_sum(x):
    total = 0.0
    for i in prange(x.shape[0]):
        total += x[i]  # numba privatises this: a reduction, no race
    return total


@njit(parallel=True)
def _rows_plus(x, out, k_parallel):
    for i in range(x.shape[0]) if k_parallel else prange(x.shape[0]):
        for k in prange(x.shape[1]) if k_parallel else range(x.shape[1]):
            out[i, :] += x[i, k]
    return out


def test_assert_close_names_the_worst_and_the_first_mismatch():
    expected = np.zeros((3, 4))
    expected[1, 2], expected[2, 3] = 1.0, 5.0
    with pytest.raises(AssertionError) as caught:
        assert_close(np.zeros((3, 4)), expected, what="a kernel's output")
    message = str(caught.value)
    assert "2 of 12 element(s) differ; worst at index (2, 3): 0.0 against 5.0" in message
    assert "the first (in row-major order) at index (1, 2): 0.0 against 1.0" in message


def test_a_shared_slot_is_a_clash_and_own_slots_are_not():
    x = np.arange(50.0)
    total, clashes = parallel_write_clashes(_chunk_sums, x, 5, True)
    assert total == x.sum() and clashes == [((5,), (0,), 0, 1)]  # one element, reported once
    assert parallel_write_clashes(_chunk_sums, x, 5, False) == (x.sum(), [])


def test_a_scalar_reduction_is_not_a_clash():
    assert parallel_write_clashes(_scalar_sum, np.ones(10)) == (10.0, [])


def test_prange_trips_counts_the_outermost_parallel_iterations():
    assert prange_trips(_scalar_sum, np.ones(10)) == (10.0, 10)  # one per element
    assert prange_trips(_chunk_sums, np.arange(50.0), 5, False) == (1225.0, 5)  # one per chunk
    assert prange_trips(_rows_plus, np.ones((3, 4)), np.zeros((3, 2)), True)[1] == 12  # 3 runs of a prange(4)
    assert prange_trips(_rows_plus, np.ones((3, 4)), np.zeros((3, 2)), False)[1] == 3  # its inner range: not counted


def test_parallel_regions_counts_the_starts_of_outermost_parallel_loops():
    assert parallel_regions(_chunk_sums, np.arange(50.0), 5, False) == (1225.0, 1)
    assert parallel_regions(_rows_plus, np.ones((3, 4)), np.zeros((3, 2)), True)[1] == 3  # once per row
    assert parallel_regions(_rows_plus, np.ones((3, 4)), np.zeros((3, 2)), False)[1] == 1


def _dot_from_a_python_float(a, b, out):
    acc = 0.0
    for p in range(a.shape[0]):
        acc += a[p] * b[p]
    out[0] = acc


def _dot_from_an_int_with_a_counter(a, out):
    acc, seen, size = 0, 0, 0
    for p in range(a.shape[0]):
        acc = acc + a[p]
        seen += 1
        size += a.shape[0]  # a size, not an element: stays an integer
    out[0] = acc / seen


def _dot_from_a_float32(a, b, out):
    acc, seen = np.float32(0.0), 0
    for p in range(a.shape[0]):
        acc += a[p] * b[p]
        seen += 1
    out[0] = acc


def test_float64_accumulators_names_updated_python_numbers_only():
    assert float64_accumulators(_dot_from_a_python_float) == [("acc", 4)]
    assert float64_accumulators(_dot_from_an_int_with_a_counter) == [("acc", 4)]  # not the counter
    assert float64_accumulators(_dot_from_a_float32) == []


def _numbers(text):
    return [t for t in re.split(r"[\s,\[\]]+", text) if t and t != "..."]


@pytest.mark.parametrize("value", [np.random.default_rng(0).standard_normal((40, 40)), list(range(300))],
                         ids=["array", "list"])
def test_a_long_value_is_cut_between_elements(value):
    shown = _show(value).split(" (shape")[0]
    elements = set(np.round(np.asarray(value, dtype=float), 6).ravel())  # as printed: 6 digits
    assert len(shown) <= 300 and {float(t) for t in _numbers(shown)} <= elements, shown  # no number cut in two


def test_writes_into_an_argument_through_a_slice_are_seen():
    x = np.ones((3, 4))
    out, clashes = parallel_write_clashes(_rows_plus, x, np.zeros((3, 2)), True)
    assert clashes[0][:2] == ((3, 2), (0, 0)) and clashes[0][2:] == (0, 1)
    out, clashes = parallel_write_clashes(_rows_plus, x, np.zeros((3, 2)), False)
    assert clashes == [] and type(out) is np.ndarray
    np.testing.assert_array_equal(out, np.full((3, 2), 4.0))



@njit(parallel=True)
def _one_row_written_by_all(c):
    for i in prange(3):
        row = c[1]  # a view of c: the clash is reported as an element of c
        row[2] = i
    return c


def test_a_clash_through_a_row_view_names_the_element_of_the_argument():
    clashes = parallel_write_clashes(_one_row_written_by_all, np.zeros((6, 5))[2:])[1]
    assert clashes == [((4, 5), (1, 2), 0, 1)]


@njit
def _scaled_in_float64(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * 0.1  # a Python float is a float64 in numba
    return out


@njit
def _scaled_in_its_dtype(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * x.dtype.type(0.1)
    return out


def test_float64_ops_sees_a_float64_constant_in_float32_code():
    x = np.ones(4, np.float32)
    assert float64_ops(_scaled_in_its_dtype, x) == 0
    assert float64_ops(_scaled_in_float64, x) > 0
    assert float64_ops(_scaled_in_float64.py_func, x) == 0  # not compiled: nothing to read


@njit
def _exp_erf_pow(v, out):
    for i in range(v.size):
        out[i] = math.exp(v[i]) + math.erf(v[i]) + 2.0 ** v[i]
    return out


@njit
def _polynomial(v, out):
    for i in range(v.size):
        out[i] = 1.0 + v[i] * (1.0 + v[i] * 0.5)
    return out


def test_math_library_calls_names_exp_erf_and_a_power_and_nothing_in_plain_arithmetic():
    v = np.linspace(-1, 1, 64)
    calls = math_library_calls(_exp_erf_pow, v, np.empty_like(v))
    assert {"erf", "exp.f64", "exp2.f64"} <= set(calls), calls  # 2.0 ** v compiles to exp2
    assert math_library_calls(_polynomial, v, np.empty_like(v)) == []
    assert math_library_calls(_polynomial.py_func, v, np.empty_like(v)) == []  # not compiled: nothing to read

_SIMULATED_KERNELS = """
import numpy as np
from numba import cuda
from tinytorch.testing import divergent_barriers, multiply_written, with_garbage_shared_memory

@cuda.jit
def tree(x, mode):  # 0 right; 1 the step's barrier inside the if; 2 none after the load; 3 none between steps
    buf = cuda.shared.array(8, dtype=np.float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    if mode != 2:
        cuda.syncthreads()
    half = 4
    while half > 0:
        if t < half:
            buf[t] += buf[t + half]
            if mode == 1:
                cuda.syncthreads()
        if mode == 0 or mode == 2:
            cuda.syncthreads()
        half //= 2
    if t == 0:
        x[0] = buf[0]

@cuda.jit
def doubled(a, out, step_by_block):
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    step = cuda.blockDim.x if step_by_block else cuda.gridDim.x * cuda.blockDim.x
    for i in range(start, out.shape[0], step):
        out[i] = 2 * a[i]

@cuda.jit
def first_slot(out, write_first):
    buf = cuda.shared.array(4, dtype=np.float32)
    if write_first:
        buf[cuda.threadIdx.x] = 1.0
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[0] = buf[0]

for inside in (False, True):
    x = np.arange(8.0)
    print("barriers", inside, divergent_barriers(lambda: tree[1, 8](x, int(inside))), x[0])
for by_block in (False, True):
    out = np.zeros(12)
    print("writes", by_block, multiply_written(lambda: doubled[3, 4](np.arange(12.0), out, by_block))[:1])
for write_first in (True, False):
    out = np.zeros(1)
    with_garbage_shared_memory(lambda: first_slot[1, 4](out, write_first))
    print("garbage", write_first, out[0])

@cuda.jit
def interleaved(x, slots_apart):
    buf = cuda.shared.array(32, dtype=np.float64)
    t = cuda.threadIdx.x
    buf[t] = x[t]
    cuda.syncthreads()
    s = 1
    while s < 32:
        i = 2 * s * t if slots_apart else t
        if (i < 32) if slots_apart else (t % (2 * s) == 0):
            buf[i] += buf[i + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        x[0] = buf[0]

from tinytorch.testing import arithmetic, bank_conflicts, scattered_active_threads, spied

x = np.arange(8.0)
print("first threads", scattered_active_threads(lambda: tree[1, 8](x, 0)), bank_conflicts(lambda: tree[1, 8](x, 0)))
for apart in (False, True):
    x = np.arange(32.0)
    print("interleaved", apart, scattered_active_threads(lambda: interleaved[1, 32](x, apart))[:1],
          bank_conflicts(lambda: interleaved[1, 32](x, apart))[0], x[0])
print("copied back", arithmetic(spied(lambda v: cuda.to_device(v).copy_to_host() * 2, np.ones(3))[1]))

from tinytorch.testing import shared_memory_races

@cuda.jit
def same_slot(out):
    buf = cuda.shared.array(1, dtype=np.float32)
    buf[0] = cuda.threadIdx.x
    cuda.syncthreads()
    out[cuda.threadIdx.x] = buf[0]

for mode in (0, 2, 3):
    x = np.arange(8.0)
    print("races", mode, shared_memory_races(lambda: tree[1, 8](x, mode))[:2])
print("races same slot", shared_memory_races(lambda: same_slot[1, 3](np.zeros(3, np.float32))))

from tinytorch.testing import with_reads_interleaved

@cuda.jit
def add_into_one(x, out):
    cuda.atomic.add(out, 0, x[cuda.grid(1)])

def summed():
    out = np.zeros(1)
    add_into_one[1, 16](np.ones(16), out)
    return out[0]

print("interleaved atomic", with_reads_interleaved(summed))
"""


def test_barriers_writes_shared_memory_and_copies_are_watched_under_the_cuda_simulator():
    from tinytorch.testing import run_fresh

    out, err = run_fresh(_SIMULATED_KERNELS, NUMBA_ENABLE_CUDASIM="1")
    assert out.splitlines() == [
        "barriers False [] 28.0",
        "barriers True [((0, 0, 0), (1, 0, 0), [7, 13, 13], [7, 13, 13, 13])] 28.0",
        "writes False []",
        "writes True [((12,), (4,), 2)]",
        "garbage True 1.0",
        "garbage False nan",
        "first threads [] (1, None)",
        "interleaved False [((0, 0, 0), 1, [0, 2, 4, 6, 8, 10, 12, 14])] 1 992.0",
        "interleaved True [] 2 992.0",
        "copied back [('multiply', ((3,), ()), (3,))]",
        "races 0 []",
        # the load's barrier missing: thread 0 reads slot 4 in the step in which thread 4 writes it
        "races 2 [((0, 0, 0), 0, 4, 4, 0, 'read'), ((0, 0, 0), 0, 5, 5, 1, 'read')]",
        "races 3 [((0, 0, 0), 1, 1, 1, 0, 'read'), ((0, 0, 0), 1, 2, 2, 0, 'read')]",
        "races same slot [((0, 0, 0), 0, 0, 0, 1, 'write')]",
        # (how many additions a racy sum loses changes from run to run: the notebook shows it)
        "interleaved atomic 16.0",
    ], err

"""The prange kernels keep the contract that makes them race-free: no two iterations of the parallel loop
write the same element. Each kernel runs as Python, one iteration after another, under
tinytorch.testing.parallel_write_clashes, so a race fails on any machine and on every run."""
import numpy as np
import pytest

from tinytorch.backends import cpu_kernels as ck
from tinytorch.testing import parallel_regions, parallel_write_clashes, prange_trips

DATA_RNG = np.random.default_rng(7)
A, B = DATA_RNG.standard_normal((7, 5)), DATA_RNG.standard_normal((5, 6))
IMAGES = DATA_RNG.standard_normal((3, 2, 4, 5))


def _clashes_and_value(kernel, *args):
    result, clashes = parallel_write_clashes(kernel, *args)
    return clashes, result


@pytest.mark.parametrize("n,chunks", [(37, 4), (5, 8), (64, 1)])
def test_parallel_sum_iterations_write_their_own_memory(rng, n, chunks):
    x = rng.standard_normal(n)
    clashes, total = _clashes_and_value(ck.parallel_sum, x, chunks)
    assert clashes == [], f"two iterations wrote one element (shape, element, iterations): {clashes[:3]}"
    assert total == pytest.approx(float(np.sum(x)), rel=1e-12)


@pytest.mark.parametrize("n,chunks", [(37, 4), (5, 8), (64, 1)])
def test_parallel_sum_splits_the_work_among_n_chunks_iterations(rng, n, chunks):
    _, trips = prange_trips(ck.parallel_sum, rng.standard_normal(n), chunks)
    assert trips == chunks, (f"parallel_sum(x, {chunks}) ran {trips} parallel iterations: it must split the work "
                             f"among n_chunks of them (a prange over every element with a scalar += is numba's "
                             f"reduction, not yours)")


def test_bias_gelu_iterations_write_their_own_rows():
    clashes, _ = _clashes_and_value(ck.bias_gelu, A, A[0])
    assert clashes == [], f"two iterations wrote one element (shape, element, iterations): {clashes[:3]}"


def test_bias_gelu_starts_one_parallel_loop_per_call():
    _, regions = parallel_regions(ck.bias_gelu, A, A[0])
    assert regions == 1, (f"bias_gelu started {regions} parallel loops on a {A.shape} input: a prange inside a "
                          f"plain loop starts once per outer iteration")


def test_matmul_ikj_iterations_write_their_own_rows_of_c():
    clashes, c = _clashes_and_value(ck.matmul_ikj, A, B)
    assert clashes == [], f"two iterations wrote one element of C (shape, element, iterations): {clashes[:3]}"
    np.testing.assert_allclose(c, A @ B, rtol=1e-12, err_msg="C, run as Python (where np.empty memory holds NaN, "
                               "as compiled code may find it: C must start from zeros)")


@pytest.mark.parametrize("block", [1, 2, 4])
def test_matmul_blocked_iterations_write_their_own_rows_of_c(block):
    clashes, c = _clashes_and_value(ck.matmul_blocked, A, B, block)
    assert clashes == [], f"two iterations wrote one element of C (shape, element, iterations): {clashes[:3]}"
    np.testing.assert_allclose(c, A @ B, rtol=1e-12)


@pytest.mark.parametrize("kh,kw,stride,padding", [(2, 2, 1, 1), (3, 2, 2, 0)])
def test_im2col_iterations_write_disjoint_elements(kh, kw, stride, padding):
    clashes, _ = _clashes_and_value(ck.im2col, IMAGES, kh, kw, stride, padding)
    assert clashes == [], f"two iterations wrote one element (shape, element, iterations): {clashes[:3]}"


@pytest.mark.parametrize("images,channels", [(1, 3), (4, 1), (2, 3)])
def test_im2col_starts_one_parallel_loop_of_an_iteration_per_image_and_channel(rng, images, channels):
    x = rng.standard_normal((images, channels, 5, 4))
    _, regions = parallel_regions(ck.im2col, x, 3, 3, 1, 1)
    _, trips = prange_trips(ck.im2col, x, 3, 3, 1, 1)
    assert regions == 1, f"im2col started {regions} parallel loops in one call (a prange inside plain loops)"
    assert trips >= images * channels, (f"im2col's parallel loop ran {trips} iterations on {images} image(s) of "
                                        f"{channels} channel(s): fewer than one per (image, channel) pair leaves "
                                        f"cores idle at inference (one image) or on a one-channel input")

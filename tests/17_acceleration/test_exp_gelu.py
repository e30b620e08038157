"""exp_approx (the student's vectorisable exp) and the exact-GELU kernels built on it:
accurate, free of math-library calls, and equal to module 02's GELU and module 06's rule,
including under `compiled()`."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.backends import cpu_kernels as ck
from tinytorch.testing import math_library_calls, simd_float_ops


def _exps(v):
    return ck.exp_approx_array(np.asarray(v, dtype=np.float64))


@pytest.mark.parametrize("lo, hi", [(-700, 700), (-1, 1), (-0.35, 0.35), (690, 700), (-700, -690)])
def test_exp_approx_relative_error_below_1e_9(lo, hi):
    v = np.concatenate([np.linspace(lo, hi, 100_001), np.random.default_rng(1).uniform(lo, hi, 50_000)])
    rel = np.abs(_exps(v) / np.exp(v) - 1)
    worst, at = float(rel.max()), float(v[rel.argmax()])
    assert worst < 1e-9, f"exp_approx on [{lo}, {hi}]: largest relative error {worst:.2e} at v = {at!r}"


def test_exp_approx_at_the_halfway_points_of_the_reduction():
    """Just either side of (k + 1/2) ln 2, where the remainder is largest in size."""
    k = np.arange(-1000, 1000)
    v = np.concatenate([(k + 0.5) * math.log(2) - 1e-12, (k + 0.5) * math.log(2) + 1e-12])
    v = v[np.abs(v) <= 700]
    rel = np.abs(_exps(v) / np.exp(v) - 1)
    worst, at = float(rel.max()), float(v[rel.argmax()])
    assert worst < 1e-9, f"largest relative error {worst:.2e} at v = {at!r}"


def test_exp_approx_simple_values():
    assert ck.exp_approx(0.0) == 1.0, f"exp_approx(0.0): expected exactly 1.0, got {ck.exp_approx(0.0)!r}"
    for v in (1.0, -1.0, 10.0, -10.0, math.log(2) * 5):
        assert ck.exp_approx(v) == pytest.approx(math.exp(v), rel=1e-9, abs=0), f"exp_approx({v})"


def test_exp_approx_calls_no_math_library_function_and_vectorises():
    v = np.linspace(-5, 5, 1000)
    calls = math_library_calls(ck.exp_approx_array, v)
    assert not calls, f"a loop over exp_approx calls {calls} from the math library: one number per call"
    vector_ops = simd_float_ops(ck.exp_approx_array, v)
    assert vector_ops > 0, ("the compiler vectorised no part of a loop over exp_approx (a loop inside it whose "
                            "trip count depends on the value keeps a loop over it scalar)")


def _reference(x):
    t = tt.tensor(x, requires_grad=True)
    y = tt.nn.functional.gelu(t)
    y.backward(np.ones_like(x))
    return y.numpy(), t.grad.numpy()


def test_gelu_float32_within_2_ulps_of_module_02():
    x = np.concatenate([np.linspace(-13, 13, 200_001), [0.0, 1e-30, -1e-30, 1e4, -1e4, 40.0, -40.0]]).astype(np.float32)
    ref, _ = _reference(x)
    got = ck.gelu_float32(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    ulps = np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref)).clip(min=np.float32(1e-45))
    assert ulps.max() <= 2, f"gelu_float32: {ulps.max():.1f} ulps from module 02 at x = {x[ulps.argmax()]!r}"


def test_gelu_float32_special_values_and_shapes():
    got = ck.gelu_float32(np.array([np.inf, -np.inf, np.nan], np.float32))
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2]), f"gelu at inf, -inf, nan: got {got}"
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    assert ck.gelu_float32(x).shape == (3, 4, 5)
    assert ck.gelu_float32(x.T).shape == (5, 4, 3), "a transposed (non-contiguous) input"
    np.testing.assert_allclose(ck.gelu_float32(x.T), ck.gelu_float32(np.ascontiguousarray(x.T)), rtol=0, atol=0)


def test_gelu_backward_float32_matches_module_06():
    x = np.concatenate([np.linspace(-13, 13, 100_001), [0.0, 1e4, -1e4]]).astype(np.float32)
    y, ref = _reference(x)
    grad = np.random.default_rng(3).uniform(0.5, 2, x.shape).astype(np.float32)
    got = ck.gelu_backward_float32(x, y, grad)
    np.testing.assert_allclose(got, ref * grad, rtol=1e-6, atol=1e-7)


def test_compiled_mode_gives_the_same_gradients_and_leaves_other_dtypes_alone():
    rng = np.random.default_rng(4)
    model = tt.nn.Sequential(tt.nn.Linear(8, 16), tt.nn.GELU(), tt.nn.Linear(16, 1))
    x = tt.tensor(rng.standard_normal((5, 8)).astype(np.float32))
    model(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    with ck.compiled():
        model(x).sum().backward()
    for p, g in zip(model.parameters(), plain):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)
    x64 = rng.standard_normal(6)
    ref_y, ref_g = _reference(x64)
    t = tt.tensor(x64, requires_grad=True)
    with ck.compiled():
        y = tt.nn.functional.gelu(t)
        y.sum().backward()
    assert y.dtype == tt.float64, "float64 GELU under compiled() stays float64 (module 02's path)"
    np.testing.assert_array_equal(y.numpy(), ref_y)
    np.testing.assert_array_equal(t.grad.numpy(), ref_g)


def test_compiled_mode_runs_the_kernels():
    x = tt.tensor(np.linspace(-3, 3, 7).astype(np.float32), requires_grad=True)
    with ck.compiled():
        y = tt.nn.functional.gelu(x)
    assert np.array_equal(y.numpy(), ck.gelu_float32(x.numpy())), "under compiled(), gelu gives gelu_float32's result"
    ones = np.ones(7, np.float32)
    with ck.compiled():
        y.backward(ones)
    assert np.array_equal(x.grad.numpy(), ck.gelu_backward_float32(x.numpy(), y.numpy(), ones)), \
        "under compiled(), GELU's backward gives gelu_backward_float32's result"
    z = tt.nn.functional.gelu(x, approximate="tanh")
    with ck.compiled():
        z2 = tt.nn.functional.gelu(x, approximate="tanh")
    assert np.array_equal(z.numpy(), z2.numpy()), "the tanh form is left to module 02 under compiled()"

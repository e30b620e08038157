"""No overflow, no nan, no warnings at inputs of magnitude 1e4 (float32), and the right limits."""
import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinytorch as tt
import tinytorch.nn.functional as F

BIG = np.array([-1e4, -1000.0, -100.0, -89.0, 89.0, 100.0, 1000.0, 1e4], dtype=np.float32)


def quiet(fn, *args, **kwargs):
    """Run fn with every numpy RuntimeWarning (overflow, invalid) turned into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise", under="ignore"):
            return fn(*args, **kwargs)


def test_sigmoid_limits_at_large_inputs():
    out = quiet(F.sigmoid, tt.tensor(BIG))
    assert out.dtype == tt.float32
    v = out.numpy()
    assert np.all(np.isfinite(v))
    np.testing.assert_array_equal(v[[0, 1]], 0.0)
    np.testing.assert_array_equal(v[[5, 6, 7]], 1.0)
    exact = [np.exp(-100.0), np.exp(-89.0) / (1 + np.exp(-89.0)), 1 / (1 + np.exp(-89.0))]
    # 3.7e-44 is a float32 subnormal (spacing 1.4e-45): compare with an absolute tolerance there
    np.testing.assert_allclose(v[[2, 3, 4]], np.array(exact, dtype=np.float32), rtol=1e-6, atol=3e-45)


def test_tanh_limits_at_large_inputs():
    out = quiet(F.tanh, tt.tensor(BIG))
    assert out.dtype == tt.float32
    np.testing.assert_array_equal(out.numpy(), np.sign(BIG))


def test_relu_and_leaky_relu_at_large_inputs():
    np.testing.assert_array_equal(quiet(F.relu, tt.tensor(BIG)).numpy(), np.maximum(BIG, 0))
    np.testing.assert_allclose(quiet(F.leaky_relu, tt.tensor(BIG), 0.01).numpy(),
                               np.where(BIG > 0, BIG, np.float32(0.01) * BIG), rtol=1e-7)


def test_gelu_limits_at_large_inputs():
    for approximate in ("none", "tanh"):
        out = quiet(F.gelu, tt.tensor(BIG), approximate=approximate)
        assert out.dtype == tt.float32
        v = out.numpy()
        assert np.all(np.isfinite(v)), approximate
        np.testing.assert_array_equal(v[BIG < 0], 0.0)  # x * Phi(x) -> 0 (as -0.0 or 0.0)
        np.testing.assert_array_equal(v[BIG > 0], BIG[BIG > 0])  # x * Phi(x) -> x


def test_softmax_with_huge_logits():
    x = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4], [1000, 999, 998]], dtype=np.float32)
    s = quiet(F.softmax, tt.tensor(x), dim=1).numpy()
    assert np.all(np.isfinite(s))
    e = np.exp(np.array([0.0, -1.0, -2.0]))
    np.testing.assert_allclose(s, [[1, 0, 0], [1 / 3] * 3, [0.5, 0.5, 0], e / e.sum()], rtol=1e-6, atol=0)


def test_log_softmax_with_huge_logits_is_exact_not_minus_inf():
    x = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4]], dtype=np.float32)
    ls = quiet(F.log_softmax, tt.tensor(x), dim=-1).numpy()
    assert np.all(np.isfinite(ls)), "log(softmax) would give -inf; log-sum-exp must not"
    ln3, ln2 = np.log(3.0), np.log(2.0)
    np.testing.assert_allclose(ls, [[0, -1e4, -2e4], [-ln3] * 3, [-ln2, -ln2, -2e4 - ln2]], rtol=1e-6)


def test_logsumexp_helper_values_and_keepdims():
    from tinytorch.nn.activations import _logsumexp
    a = np.random.default_rng(4).standard_normal((3, 4, 5))
    for axis in range(3):
        got = _logsumexp(a, axis)
        expected = np.log(np.exp(a).sum(axis=axis, keepdims=True))
        assert got.shape == expected.shape, (axis, got.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_logsumexp_helper_at_huge_inputs():
    from tinytorch.nn.activations import _logsumexp
    x = np.array([[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4], [0.0, -1e4, -1e4]], dtype=np.float32)
    before = x.copy()
    got = quiet(_logsumexp, x, 1)
    assert got.dtype == np.float32 and got.shape == (3, 1)
    np.testing.assert_allclose(got[:, 0], [1e4 + np.log(2.0), -1e4 + np.log(3.0), 0.0], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x, before)
    col = quiet(_logsumexp, x, 0)
    assert col.shape == (1, 3)
    np.testing.assert_allclose(col[0], [1e4, 1e4, -1e4 + np.log(3.0)], rtol=1e-6)


def test_softmax_shift_invariance_large_shift():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7))
    base = F.softmax(tt.tensor(x), dim=1).numpy()
    shifted = quiet(F.softmax, tt.tensor(x + 5000.0), dim=1).numpy()
    np.testing.assert_allclose(shifted, base, rtol=1e-9)
    lbase = F.log_softmax(tt.tensor(x), dim=0).numpy()
    lshift = quiet(F.log_softmax, tt.tensor(x - 5000.0), dim=0).numpy()
    np.testing.assert_allclose(lshift, lbase, rtol=1e-8, atol=1e-9)


@settings(max_examples=60, deadline=None, database=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
                  elements=st.floats(-1e4, 1e4, width=32)),
       st.integers(-1, 0))
def test_softmax_properties_any_input(arr, dim):
    s = quiet(F.softmax, tt.tensor(arr), dim=dim).numpy()
    ls = quiet(F.log_softmax, tt.tensor(arr), dim=dim).numpy()
    assert s.dtype == np.float32 and np.all(np.isfinite(s)) and np.all(np.isfinite(ls))
    assert np.all(s >= 0) and np.all(s <= 1) and np.all(ls <= 0)
    np.testing.assert_allclose(s.sum(axis=dim), 1.0, rtol=1e-5)
    ref = arr.astype(np.float64) - arr.max(axis=dim, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(axis=dim, keepdims=True))
    np.testing.assert_allclose(ls, ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None, database=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=8), elements=st.floats(-1e4, 1e4, width=32)))
def test_elementwise_finite_and_bounded_any_input(arr):
    t = tt.tensor(arr)
    s = quiet(F.sigmoid, t).numpy()
    th = quiet(F.tanh, t).numpy()
    g = quiet(F.gelu, t).numpy()
    gt = quiet(F.gelu, t, approximate="tanh").numpy()
    for v in (s, th, g, gt):
        assert v.dtype == np.float32 and np.all(np.isfinite(v))
    assert np.all((s >= 0) & (s <= 1)) and np.all((th >= -1) & (th <= 1))
    a64 = arr.astype(np.float64)
    e = np.exp(-np.abs(a64))
    np.testing.assert_allclose(s, np.where(a64 >= 0, 1 / (1 + e), e / (1 + e)), rtol=1e-6, atol=3e-45)
    np.testing.assert_allclose(th, np.tanh(a64), rtol=1e-6, atol=3e-45)
    assert np.all(g >= -0.1701) and np.all(gt >= -0.1701)

"""Values of every activation against numpy/math references, dims, dtypes, views."""
import math

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F

rng = np.random.default_rng(2)
X64 = rng.standard_normal((4, 5, 6)) * 3
X32 = X64.astype(np.float32)


def ref_sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def ref_gelu(a):
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in a.ravel()]).reshape(a.shape)


def ref_gelu_tanh(a):
    return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a ** 3)))


def ref_softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


ELEMENTWISE = [
    ("relu", lambda t: F.relu(t), lambda a: np.maximum(a, 0)),
    ("leaky_relu", lambda t: F.leaky_relu(t), lambda a: np.where(a > 0, a, 0.01 * a)),
    ("leaky_relu_0.2", lambda t: F.leaky_relu(t, negative_slope=0.2), lambda a: np.where(a > 0, a, 0.2 * a)),
    # a slope above 1 is allowed: the negative side is multiplied by it (max(x, 1.5x) would be wrong)
    ("leaky_relu_1.5", lambda t: F.leaky_relu(t, negative_slope=1.5), lambda a: np.where(a > 0, a, 1.5 * a)),
    ("sigmoid", lambda t: F.sigmoid(t), ref_sigmoid),
    ("tanh", lambda t: F.tanh(t), np.tanh),
    ("gelu", lambda t: F.gelu(t), ref_gelu),
    ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"), ref_gelu_tanh),
]


@pytest.mark.parametrize("name, fn, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_float64(name, fn, ref):
    out = fn(tt.tensor(X64))
    assert out.shape == X64.shape and out.dtype == tt.float64
    np.testing.assert_allclose(out.numpy(), ref(X64), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name, fn, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_float32_keeps_dtype(name, fn, ref):
    out = fn(tt.tensor(X32))
    assert out.dtype == tt.float32, f"{name} must keep float32, got {out.dtype}"
    np.testing.assert_allclose(out.numpy(), ref(X32.astype(np.float64)), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("name, fn, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_on_non_contiguous_view(name, fn, ref):
    t = tt.tensor(X64).permute(2, 0, 1)[:, ::2]
    assert not t.is_contiguous()
    expected = ref(X64.transpose(2, 0, 1)[:, ::2])
    np.testing.assert_allclose(fn(t).numpy(), expected, rtol=1e-12, atol=1e-300)


def test_relu_int_stays_int_others_become_float32():
    ints = tt.tensor([[-3, 0, 5]])
    r = F.relu(ints)
    assert r.dtype == tt.int64 and r.tolist() == [[0, 0, 5]]
    for fn in (F.leaky_relu, F.sigmoid, F.tanh, F.gelu):
        out = fn(ints)
        assert out.dtype == tt.float32, fn.__name__
    np.testing.assert_allclose(F.sigmoid(ints).numpy(), ref_sigmoid(np.array([[-3.0, 0, 5]])), rtol=1e-6)
    np.testing.assert_allclose(F.softmax(ints, dim=1).numpy(), ref_softmax(np.array([[-3.0, 0, 5]]), 1), rtol=1e-6)


def test_leaky_relu_numpy_scalar_slope_keeps_float32():
    out = F.leaky_relu(tt.tensor(X32), np.float64(0.3))
    assert out.dtype == tt.float32
    np.testing.assert_allclose(out.numpy(), np.where(X32 > 0, X32, np.float32(0.3) * X32), rtol=1e-6)


def test_tanh_accurate_near_zero():
    a = np.array([1e-300, -1e-20, 1e-10, -3e-8, 1e-4, 0.0])
    np.testing.assert_allclose(F.tanh(tt.tensor(a)).numpy(), np.tanh(a), rtol=1e-15, atol=0)
    assert F.tanh(tt.tensor([0.0])).item() == 0.0


def test_gelu_accurate_for_negative_inputs():
    # erfc form: relative accuracy even where 1 + erf(x/sqrt 2) would cancel
    a = -np.linspace(3.0, 30.0, 28)
    exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in a])
    np.testing.assert_allclose(F.gelu(tt.tensor(a)).numpy(), exact, rtol=1e-13, atol=0)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
def test_softmax_and_log_softmax_every_dim(dim):
    s = F.softmax(tt.tensor(X64), dim=dim)
    ls = F.log_softmax(tt.tensor(X64), dim=dim)
    ref = ref_softmax(X64, dim)
    np.testing.assert_allclose(s.numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(ls.numpy(), np.log(ref), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(s.numpy().sum(axis=dim), 1.0, rtol=1e-13)
    assert s.shape == ls.shape == X64.shape


def test_softmax_float32_and_dtype_argument():
    s = F.softmax(tt.tensor(X32), dim=-1)
    assert s.dtype == tt.float32
    np.testing.assert_allclose(s.numpy(), ref_softmax(X64.astype(np.float32).astype(np.float64), -1), rtol=1e-5)
    s64 = F.softmax(tt.tensor(X32), dim=-1, dtype=tt.float64)
    assert s64.dtype == tt.float64
    np.testing.assert_allclose(s64.numpy(), ref_softmax(X32.astype(np.float64), -1), rtol=1e-12)
    assert F.log_softmax(tt.tensor(X32), 1).dtype == tt.float32


def test_softmax_of_vector_and_scalar():
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(F.softmax(tt.tensor(v), 0).numpy(), ref_softmax(v, 0), rtol=1e-14)
    one = F.softmax(tt.tensor(3.5), dim=0)
    assert one.shape == () and one.item() == 1.0
    assert F.log_softmax(tt.tensor(3.5), dim=-1).item() == 0.0


def test_softmax_on_transposed_view():
    t = tt.tensor(X64[0]).T
    np.testing.assert_allclose(F.softmax(t, dim=1).numpy(), ref_softmax(X64[0].T, 1), rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(t, dim=0).numpy(), np.log(ref_softmax(X64[0].T, 0)), rtol=1e-12)


def test_softmax_dim_errors():
    x = tt.tensor(X64)
    assert F.softmax(x, 2).shape == X64.shape
    with pytest.raises(IndexError):
        F.softmax(x, dim=3)
    with pytest.raises(IndexError):
        F.log_softmax(x, dim=-4)
    with pytest.raises(TypeError, match="dim"):
        F.softmax(x, None)


def test_tanh_forward_is_built_without_np_tanh():
    """The exercise is the stable form from exp or expm1; np.tanh would skip it."""
    from tinytorch.testing import spied

    _, calls = spied(lambda v: F.tanh(tt.tensor(v)), np.linspace(-3.0, 3.0, 7))
    assert "tanh" not in [c[0] for c in calls], f"tanh called np.tanh: {[c[0] for c in calls]}"

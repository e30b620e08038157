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
    np.testing.assert_allclose(out.numpy(), ref(X64), rtol=1e-12, atol=1e-300, err_msg=f"{name} in float64")


@pytest.mark.parametrize("name, fn, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_float32_keeps_dtype(name, fn, ref):
    out = fn(tt.tensor(X32))
    assert out.dtype == tt.float32, f"{name} must keep float32, got {out.dtype}"
    np.testing.assert_allclose(out.numpy(), ref(X32.astype(np.float64)), rtol=2e-6, atol=1e-7,
                               err_msg=f"{name} in float32")


@pytest.mark.parametrize("name, fn, ref", ELEMENTWISE, ids=[c[0] for c in ELEMENTWISE])
def test_elementwise_on_non_contiguous_view(name, fn, ref):
    t = tt.tensor(X64).permute(2, 0, 1)[:, ::2]
    assert not t.is_contiguous()
    expected = ref(X64.transpose(2, 0, 1)[:, ::2])
    np.testing.assert_allclose(fn(t).numpy(), expected, rtol=1e-12, atol=1e-300,
                               err_msg=f"{name} of a permuted, strided view")


INTS = [[-3, 0, 5]]


def test_relu_of_ints_stays_int64():
    r = F.relu(tt.tensor(INTS))
    assert r.dtype == tt.int64 and r.tolist() == [[0, 0, 5]], f"relu of int64: {r.dtype} {r.tolist()}"


def test_relu_at_infinities():
    out = F.relu(tt.tensor([-np.inf, np.inf, -1.0, 2.0])).numpy()
    np.testing.assert_array_equal(out, [0.0, np.inf, 0.0, 2.0], err_msg="relu at -inf, inf, -1, 2 (x * (x > 0) "
                                  "gives nan at -inf)")


INT_CASES = [("leaky_relu", lambda t: F.leaky_relu(t), lambda a: np.where(a > 0, a, 0.01 * a)),
             ("sigmoid", F.sigmoid, ref_sigmoid), ("tanh", F.tanh, np.tanh),
             ("gelu", F.gelu, ref_gelu), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"), ref_gelu_tanh),
             ("softmax", lambda t: F.softmax(t, dim=1), lambda a: ref_softmax(a, 1)),
             ("log_softmax", lambda t: F.log_softmax(t, dim=1), lambda a: np.log(ref_softmax(a, 1)))]


@pytest.mark.parametrize("name, fn, ref", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_ints_become_float32(name, fn, ref):
    out = fn(tt.tensor(INTS))
    assert out.dtype == tt.float32, f"{name} of an int64 tensor must be float32, got {out.dtype}"
    # float32 of results up to 8 in size: about 1e-6 absolute (log_softmax subtracts two such numbers)
    np.testing.assert_allclose(out.numpy(), ref(np.array(INTS, dtype=np.float64)), rtol=1e-6, atol=1e-6,
                               err_msg=f"{name} of the ints {INTS}")


LOOP_CASES = [("sigmoid", F.sigmoid), ("tanh", F.tanh), ("gelu", F.gelu),
              ("softmax", lambda t: F.softmax(t, dim=1)), ("log_softmax", lambda t: F.log_softmax(t, dim=1)),
              ("leaky_relu", F.leaky_relu), ("relu", F.relu)]


@pytest.mark.parametrize("name, fn", LOOP_CASES, ids=[c[0] for c in LOOP_CASES])
def test_forwards_are_vectorised(name, fn):
    from tinytorch.testing import python_steps

    steps = python_steps(fn, tt.tensor(np.linspace(-3.0, 3.0, 10_000).reshape(2_000, 5)))
    assert steps < 2_000, (f"{name} ran {steps:,d} Python lines and calls on 10,000 elements in 2,000 rows: a "
                           "Python loop (np.vectorize, np.apply_along_axis, a loop over the rows) where numpy "
                           "should loop")


def test_leaky_relu_numpy_scalar_slope_keeps_float32():
    out = F.leaky_relu(tt.tensor(X32), np.float64(0.3))
    assert out.dtype == tt.float32
    np.testing.assert_allclose(out.numpy(), np.where(X32 > 0, X32, np.float32(0.3) * X32), rtol=1e-6)


def test_tanh_accurate_near_zero():
    a = np.array([1e-300, -1e-20, 1e-10, -3e-8, 1e-4, 0.0])
    np.testing.assert_allclose(F.tanh(tt.tensor(a)).numpy(), np.tanh(a), rtol=1e-15, atol=0)
    assert F.tanh(tt.tensor([0.0])).item() == 0.0


def test_gelu_accurate_for_negative_inputs():
    # erfc form: relative accuracy even where 1 + erf(x/sqrt 2) would cancel. erfc(z) moves
    # by a relative 2z² = x² times a relative change of its argument, and x/√2 and x·√½ round
    # one ulp apart: two correct spellings may differ by x² ulps (4e-13 at x = -30), while
    # 1 + erf loses every digit by x = -8
    a = -np.linspace(3.0, 30.0, 28)
    exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in a])
    rel = np.abs(F.gelu(tt.tensor(a)).numpy() / exact - 1)
    allowed = 1e-14 + 2 * a ** 2 * 2.0 ** -52
    worst = int(np.argmax(rel / allowed))
    assert np.all(rel <= allowed), (f"gelu at x = {a[worst]}: relative error {rel[worst]:.2e}, allowed "
                                    f"{allowed[worst]:.2e} (1 + erf(x/√2) cancels for x << 0; erfc does not)")


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

"""Module 06: your own ops — Function with ctx.save_for_backward, Softplus, the one-GEMM
weight gradient of a batched Linear."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import autograd
from tinytorch.autograd import Function, gradcheck
from tinytorch.autograd.engine import Softplus, linear_weight_grad
from tinytorch.testing import one_gemm_problems, spied


class Scale(Function):
    """y = alpha * x * w, with a non-tensor argument in the middle."""

    @staticmethod
    def forward(ctx, x, alpha, w):
        ctx.save_for_backward(x, w)
        ctx.alpha = alpha
        return x * w * alpha

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w * ctx.alpha, None, (grad * x * ctx.alpha).sum(0)


def leaf(shape, seed):
    return tt.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_function_goes_through_the_dispatch_point_and_passes_gradcheck():
    x, w = leaf((4, 3), 0), leaf((3,), 1)
    y = Scale.apply(x, 2.5, w)
    assert y.grad_fn is not None and y.grad_fn.op == "function"
    assert y.grad_fn.attrs["fn"] is Scale
    assert gradcheck(lambda a, b: Scale.apply(a, 2.5, b), [x, w])
    ctx = Scale.apply(x, 1.0, tt.tensor(np.ones(3))).grad_fn.attrs["ctx"]
    assert ctx.needs_input_grad == (True, False, False)


def test_function_forward_records_nothing_inside_and_backward_frees():
    x = leaf((3,), 2)
    y = Scale.apply(x, 3.0, tt.tensor(np.ones(3)))
    saved = y.grad_fn.attrs["ctx"].saved_tensors
    assert all(t is None or t.grad_fn is None for t in saved), "forward runs with recording off"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 3.0))
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()


def test_function_under_no_grad_records_nothing():
    x = leaf((3,), 3)
    with tt.no_grad():
        y = Scale.apply(x, 2.0, x)
    assert y.grad_fn is None and not y.requires_grad
    x2 = leaf((2,), 4)
    (Scale.apply(x2, 1.0, tt.tensor(np.ones(2))) * 2).sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), [2.0, 2.0])


STRICT = dict(over="raise", invalid="raise", divide="raise")  # the contract: no floating-point warnings


def as_array(t):
    return t.numpy() if isinstance(t, tt.Tensor) else np.asarray(t)


def softplus_strictly(x, upstream):
    """Softplus forward, then its backward called directly, both with numpy's errors raised."""
    with np.errstate(**STRICT):
        y = Softplus.apply(x)
        ctx = y.grad_fn.attrs["ctx"]
        gx = Softplus.backward(ctx, tt.tensor(upstream, dtype=x.dtype))
    return y, ctx, as_array(gx[0] if isinstance(gx, tuple) else gx)


def _large_inputs(dtype, big):
    values = np.array([-big, -40.0, 0.0, 40.0, big])
    tol = dict(rtol=1e-12, atol=1e-300) if dtype == "float64" else dict(rtol=1e-6, atol=1e-40)
    return values, tt.tensor(values.astype(dtype), requires_grad=True), tol


def test_softplus_forward_values_gradcheck_and_what_it_saves():
    x = leaf((2, 5), 5)
    y = Softplus.apply(x)
    np.testing.assert_allclose(y.numpy(), np.logaddexp(0.0, x.numpy()), rtol=1e-12, atol=1e-15,
                               err_msg="Softplus.forward's value: log(1 + e^x)")
    assert y.shape == x.shape and y.dtype == x.dtype
    assert y.grad_fn is not None and y.grad_fn.op == "function"
    saved = y.grad_fn.attrs["ctx"].saved_tensors
    assert len(saved) == 1, "softplus saves exactly one tensor (which one is the student's design)"
    assert saved[0] is not None and as_array(saved[0]).shape == x.shape, "the saved tensor has x's shape"
    for dtype, big in [("float64", 1000.0), ("float32", 100.0)]:  # finite, accurate, x's dtype, no warning
        values, xl, tol = _large_inputs(dtype, big)
        with np.errstate(**STRICT):  # an overflow along the way raises FloatingPointError
            yl = Softplus.apply(xl)
        assert yl.dtype == xl.dtype, f"Softplus.forward of {dtype} input returned {yl.dtype}"
        np.testing.assert_allclose(yl.numpy(), np.logaddexp(0.0, values), **tol,
                                   err_msg=f"Softplus.forward of {values} in {dtype}: log(1 + e^x)")


def test_softplus_forward_and_backward_pass_gradcheck():
    """What forward saves and how backward uses it are one design: a wrong gradient may be
    either's fault."""
    assert gradcheck(Softplus.apply, [leaf((2, 5), 5)])


def test_softplus_forward_and_backward_give_the_gradient_for_any_upstream():
    """Whatever forward saved, backward(ctx, grad) is grad times softplus' slope."""
    x = leaf((3, 4), 15)
    upstream = np.random.default_rng(16).standard_normal((3, 4))
    _, _, got = softplus_strictly(x, upstream)
    np.testing.assert_allclose(got, upstream / (1 + np.exp(-x.numpy())), rtol=1e-12, atol=1e-15,
                               err_msg="the gradient Softplus.backward gives: upstream times the slope sigmoid(x)")


@pytest.mark.parametrize("dtype, big", [("float64", 1000.0), ("float32", 100.0)])
def test_softplus_forward_and_backward_give_an_accurate_gradient_at_large_inputs(dtype, big):
    values, x, tol = _large_inputs(dtype, big)
    y, _, gx = softplus_strictly(x, np.ones(5))  # an overflow along the way raises FloatingPointError
    assert np.isfinite(gx).all(), f"Softplus.backward's gradient at {values}: {gx}"
    np.testing.assert_allclose(gx, [0.0, np.exp(-40.0), 0.5, 1.0, 1.0], **tol,
                               err_msg=f"Softplus.backward's gradient at {values} in {dtype}: sigmoid(x)")
    y.sum().backward()  # and through the engine
    np.testing.assert_allclose(x.grad.numpy(), [0.0, np.exp(-40.0), 0.5, 1.0, 1.0], **tol)


@pytest.mark.parametrize("sa, sg", [((2, 3, 4), (2, 3, 5)), ((2, 2, 3, 4), (2, 2, 3, 2)), ((1, 6, 4), (1, 6, 4))])
def test_linear_weight_grad_is_the_sum_over_the_batch(sa, sg):
    rng = np.random.default_rng(6)
    a, g = rng.standard_normal(sa), rng.standard_normal(sg)
    expected = (np.swapaxes(a, -1, -2) @ g).reshape(-1, sa[-1], sg[-1]).sum(0)
    got = linear_weight_grad(a, g)
    assert got.shape == (sa[-1], sg[-1])
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    at = rng.standard_normal(sa[:-2] + (sa[-1], sa[-2])).swapaxes(-1, -2)  # non-contiguous
    np.testing.assert_allclose(linear_weight_grad(at, g), (np.swapaxes(at, -1, -2) @ g).reshape(-1, sa[-1], sg[-1]).sum(0),
                               rtol=1e-10, atol=1e-12)


def assert_one_gemm(log, weight_shape, what):
    """The weight gradient comes from one matrix product over all rows (no batched product,
    no product per batch entry or row, nothing summed afterwards)."""
    problems = one_gemm_problems(log, weight_shape)
    assert not problems, f"{what}: one matrix product over all rows, got " + "; ".join(problems)


@pytest.mark.parametrize("sa, sg", [((3, 4, 5), (3, 4, 2)), ((2, 2, 3, 4), (2, 2, 3, 2))])
def test_linear_weight_grad_makes_one_2d_matrix_product(sa, sg):
    rng = np.random.default_rng(10)
    a, g = rng.standard_normal(sa), rng.standard_normal(sg)
    got, log = spied(linear_weight_grad, a, g)
    expected = (np.swapaxes(a, -1, -2) @ g).reshape(-1, sa[-1], sg[-1]).sum(0)  # per batch entry, then summed
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-10, atol=1e-12)
    assert_one_gemm(log, (sa[-1], sg[-1]), f"linear_weight_grad of a {sa} and g {sg}")


@pytest.mark.parametrize("x_needs_grad", [False, True])
def test_the_matmul_rule_gives_a_batched_input_times_one_matrix_one_gemm(x_needs_grad):
    rng = np.random.default_rng(11)
    x = tt.tensor(rng.standard_normal((3, 4, 5)), requires_grad=x_needs_grad)
    w = leaf((5, 2), 12)
    node = (x @ w).grad_fn
    upstream = rng.standard_normal((3, 4, 2))
    (gx, gw), log = spied(lambda g: autograd.engine.call_rule(node, g), upstream)
    assert (gx is None) is not x_needs_grad
    np.testing.assert_allclose(gw, np.einsum("bnk,bnm->km", x.numpy(), upstream), rtol=1e-10, atol=1e-12)
    assert_one_gemm(log, (5, 2), "the weight gradient of a (3, 4, 5) @ (5, 2) matmul")


ONE_GEMM = {
    "@": lambda a, g: a.reshape(-1, a.shape[-1]).T @ g.reshape(-1, g.shape[-1]),
    "np.matmul": lambda a, g: np.matmul(a.reshape(-1, a.shape[-1]).T, g.reshape(-1, g.shape[-1])),
    "np.dot": lambda a, g: np.dot(np.reshape(a, (-1, a.shape[-1])).T, np.reshape(g, (-1, g.shape[-1]))),
    ".dot": lambda a, g: a.reshape(-1, a.shape[-1]).T.dot(g.reshape(-1, g.shape[-1])),
    "tensordot": lambda a, g: np.tensordot(a, g, axes=(list(range(a.ndim - 1)), list(range(g.ndim - 1)))),
    "2-D einsum, optimized": lambda a, g: np.einsum("rk,rm->km", a.reshape(-1, a.shape[-1]),
                                                    g.reshape(-1, g.shape[-1]), optimize=True),
}
NOT_ONE_GEMM = {
    "batched then summed": lambda a, g: (np.swapaxes(a, -1, -2) @ g).sum(0),
    "one product per batch entry": lambda a, g: sum(a[b].T @ g[b] for b in range(a.shape[0])),
    "outer products summed": lambda a, g: (a[..., :, None] * g[..., None, :]).sum((0, 1)),
    "one outer product per row": lambda a, g: sum(np.outer(a[b, n], g[b, n]) for b in range(a.shape[0])
                                                  for n in range(a.shape[1])),
    "batched einsum": lambda a, g: np.einsum("bnk,bnm->km", a, g),
    "2-D einsum (numpy's own loops, no BLAS)": lambda a, g: np.einsum("rk,rm->km", a.reshape(-1, a.shape[-1]),
                                                                      g.reshape(-1, g.shape[-1])),
}


@pytest.mark.parametrize("name", list(ONE_GEMM) + list(NOT_ONE_GEMM))
def test_each_spelling_agrees_with_linear_weight_grad_and_only_one_products_pass_the_check(name):
    """Every way of writing the weight gradient gives what your linear_weight_grad gives; the
    one-GEMM check accepts each way of writing one product and rejects the batched ones (so
    a mistake fails it, never a spelling)."""
    rng = np.random.default_rng(13)
    a, g = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 2))
    yours = linear_weight_grad(a, g)
    got, log = spied(ONE_GEMM.get(name) or NOT_ONE_GEMM[name], a, g)
    np.testing.assert_allclose(np.asarray(got), yours, rtol=1e-10, atol=1e-12)
    if name in ONE_GEMM:
        assert_one_gemm(log, (5, 2), name)
    else:
        with pytest.raises(AssertionError):
            assert_one_gemm(log, (5, 2), name)


def test_batched_linear_weight_gradient_through_the_engine():
    x = tt.tensor(np.random.default_rng(7).standard_normal((3, 4, 5)))
    w = leaf((5, 2), 8)
    assert gradcheck(lambda w: x @ w, [w])
    (x @ w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().reshape(-1, 5).sum(0)[:, None] * np.ones((1, 2)),
                               rtol=1e-10)


def test_free_node_drops_everything():
    x = leaf((2,), 9)
    y = x.exp()
    node = y.grad_fn
    autograd.engine.free_node(node)
    kept = {name: type(getattr(node, name)).__name__ for name in ("inputs", "attrs", "output")
            if getattr(node, name) is not None}
    assert not kept, f"free_node must set inputs, attrs and output to None (the memory a backward needs); still set: {kept}"
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()

"""Module 06: LogSumExp, the op the student designs end to end — values, float64 gradcheck,
a forward and a backward that stay finite at entries of ±1e4 (float32 and float64), and
parity with torch.logsumexp."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.autograd import gradcheck
from tinytorch.autograd.engine import LogSumExp, logsumexp


def leaf(shape, seed, scale=2.0, dtype=np.float64):
    data = np.random.default_rng(seed).standard_normal(shape) * scale
    return tt.tensor(data.astype(dtype), requires_grad=True)


def by_definition(x, dim, keepdim):
    """log(sum(exp(x))) as written: exact enough for entries of moderate size."""
    return np.log(np.exp(x).sum(axis=dim, keepdims=keepdim))


CASES = [((3, 4), 0, False), ((3, 4), 1, False), ((3, 4), -1, True), ((3, 4), 0, True),
         ((2, 3, 4), 1, False), ((2, 3, 4), -3, True), ((5,), 0, False), ((5,), -1, True)]


@pytest.mark.parametrize("shape, dim, keepdim", CASES)
def test_logsumexp_forward_values_shapes_and_dtype(shape, dim, keepdim):
    x = leaf(shape, 1)
    y = LogSumExp.apply(x, dim, keepdim)
    expected = by_definition(x.numpy(), dim, keepdim)
    assert y.shape == expected.shape, f"shape of logsumexp of a {shape} x over dim {dim}, keepdim={keepdim}"
    assert y.dtype == tt.float64
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(logsumexp(x, dim, keepdim).numpy(), expected, rtol=1e-12, atol=1e-15)
    assert y.grad_fn is not None and y.grad_fn.op == "function" and y.grad_fn.attrs["fn"] is LogSumExp


@pytest.mark.parametrize("shape, dim, keepdim", CASES)
def test_logsumexp_backward_passes_gradcheck(shape, dim, keepdim):
    x = leaf(shape, 2)
    assert gradcheck(lambda t: LogSumExp.apply(t, dim, keepdim), [x])


def test_logsumexp_backward_gradcheck_inside_a_graph():
    """A cross-entropy written with logsumexp: the op composes with the engine's other rules."""
    logits = leaf((4, 5), 3)
    target = tt.tensor([1, 0, 4, 2])
    assert gradcheck(lambda t: (logsumexp(t * 1.5, 1) - (t * 1.5)[tt.tensor([0, 1, 2, 3]), target]).mean(), [logits])


def test_logsumexp_backward_gradcheck_at_large_spread():
    """Entries far apart (up to ±60): a forward or backward that loses the small terms fails."""
    x = tt.tensor(np.array([[60.0, 59.0, -60.0, 0.5], [-3.0, -60.0, -59.5, -2.0]]), requires_grad=True)
    assert gradcheck(lambda t: LogSumExp.apply(t, 1, False), [x])


BIG = [[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4], [1e4, 0.0, -1e4]]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logsumexp_forward_is_finite_at_1e4(dtype):
    x = tt.tensor(np.array(BIG, dtype=dtype), requires_grad=True)
    y = LogSumExp.apply(x, 1, False)
    assert y.dtype == x.dtype
    assert np.isfinite(y.numpy()).all(), f"forward at ±1e4 ({np.dtype(dtype).name}): {y.numpy()}"
    np.testing.assert_allclose(y.numpy(), [1e4 + np.log(2.0), -1e4 + np.log(3.0), 1e4], rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-10), (np.float32, 1e-3)])
def test_logsumexp_backward_is_finite_at_1e4(dtype, rtol):
    """float32 keeps about three decimals next to 1e4, so its gradient is compared to 1e-3."""
    x = tt.tensor(np.array(BIG, dtype=dtype), requires_grad=True)
    LogSumExp.apply(x, 1, False).sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all(), f"backward at ±1e4 ({np.dtype(dtype).name}) gave {g}"
    np.testing.assert_allclose(g, [[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3], [1.0, 0.0, 0.0]], rtol=rtol, atol=1e-300)


def test_logsumexp_backward_at_large_inputs_along_the_first_dim_with_keepdim():
    x = tt.tensor(np.array([[1e4, -1e4], [1e4, -1e4 + 1.0]]), requires_grad=True)
    y = LogSumExp.apply(x, 0, True)
    assert y.shape == (1, 2)
    np.testing.assert_allclose(y.numpy(), [[1e4 + np.log(2.0), -1e4 + np.log1p(np.e)]], rtol=1e-12, atol=0)
    (y * tt.tensor(np.array([[2.0, 3.0]]))).sum().backward()
    w = np.e / (1 + np.e)
    np.testing.assert_allclose(x.grad.numpy(), [[1.0, 3 * (1 - w)], [1.0, 3 * w]], rtol=1e-10, atol=0)


def test_logsumexp_backward_returns_one_entry_per_argument_and_none_for_dim_and_keepdim():
    x = leaf((2, 3), 4)
    ctx = LogSumExp.apply(x, 1, False).grad_fn.attrs["ctx"]
    got = LogSumExp.backward(ctx, tt.tensor(np.ones(2)))
    assert isinstance(got, tuple) and len(got) == 3, "backward returns (gradient of x, None, None)"
    assert got[1] is None and got[2] is None
    g = got[0].numpy() if isinstance(got[0], tt.Tensor) else np.asarray(got[0])
    assert g.shape == (2, 3)


def test_logsumexp_under_no_grad_records_nothing():
    x = leaf((2, 3), 5)
    with tt.no_grad():
        y = LogSumExp.apply(x, 1, False)
    assert y.grad_fn is None and not y.requires_grad


@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), (-1, False)])
def test_logsumexp_backward_matches_pytorch(torch, dim, keepdim):
    data = np.random.default_rng(6).standard_normal((3, 5)) * 30.0
    data[0, 0] = 700.0  # exp(700) is near float64's limit: the unshifted sum overflows
    x = tt.tensor(data, requires_grad=True)
    tx = torch.tensor(data, requires_grad=True)
    y = LogSumExp.apply(x, dim, keepdim)
    ty = torch.logsumexp(tx, dim=dim, keepdim=keepdim)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    upstream = np.random.default_rng(7).standard_normal(tuple(ty.shape))
    y.backward(tt.tensor(upstream))
    ty.backward(torch.tensor(upstream))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14)

"""unbroadcast(grad, shape) sums a broadcast gradient back to an input's shape."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinytorch.autograd import unbroadcast

CASES = [
    ((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)), ((2, 3, 4), (2, 1, 4)),
    ((2, 3, 4), ()), ((2, 3, 4), (1,)), ((2, 3, 4), (1, 1, 1)), ((5,), (1,)), ((3, 1), (1, 1)),
    ((4, 1, 5), (1, 1, 5)), ((), ()),
]


def reference(grad, shape):
    """Sum every output element into the input element it was broadcast from (slow loop)."""
    out = np.zeros(shape)
    aligned = (1,) * (grad.ndim - len(shape)) + tuple(shape)
    for idx in np.ndindex(*grad.shape):
        src = tuple(0 if n == 1 else i for i, n in zip(idx, aligned))
        out[src[grad.ndim - len(shape):]] += grad[idx]
    return out


@pytest.mark.parametrize("grad_shape, shape", CASES)
def test_unbroadcast_cases(grad_shape, shape):
    grad = np.random.default_rng(0).standard_normal(grad_shape)
    got = unbroadcast(grad, shape)
    assert np.shape(got) == shape, (
        f"unbroadcast(a gradient of shape {grad_shape}, {shape}) returned shape {np.shape(got)}: "
        f"an input's gradient has the input's shape")
    np.testing.assert_allclose(
        got, reference(grad, shape), rtol=1e-12, atol=1e-12,
        err_msg=f"unbroadcast(a gradient of shape {grad_shape}, {shape}): each input element's gradient is "
                f"the sum of the gradients of every output element it was broadcast to")


@st.composite
def broadcast_pair(draw):
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=3)))
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    out = lead + tuple(draw(st.integers(1, 3)) if n == 1 else n for n in shape)
    return out, shape


@given(broadcast_pair(), st.integers(0, 2**31 - 1))
def test_unbroadcast_is_the_adjoint_of_broadcasting(pair, seed):
    """<unbroadcast(g), s> == <g, broadcast_to(s)> for every s: the defining property."""
    out_shape, shape = pair
    rng = np.random.default_rng(seed)
    g, s = rng.standard_normal(out_shape), rng.standard_normal(shape)
    got = unbroadcast(g, shape)
    assert np.shape(got) == shape, (
        f"unbroadcast(a gradient of shape {out_shape}, {shape}) returned shape {np.shape(got)}")
    np.testing.assert_allclose(
        np.sum(got * s), np.sum(g * np.broadcast_to(s, out_shape)), rtol=1e-10, atol=1e-10,
        err_msg=f"unbroadcast(a gradient of shape {out_shape}, {shape}) is not the adjoint of broadcasting "
                f"{shape} to {out_shape}: <unbroadcast(g), s> must equal <g, broadcast(s)> for every s")


def test_nothing_broadcast_returns_the_gradient_itself():
    grad = np.arange(24.0).reshape(2, 3, 4)
    same_object = unbroadcast(grad, (2, 3, 4)) is grad
    assert same_object, "nothing was broadcast: return grad itself, not a copy"

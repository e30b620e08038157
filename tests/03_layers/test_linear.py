"""Linear: shapes, parity with torch.nn.Linear, default initialisation, errors, graph."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


@pytest.mark.parametrize("shape", [(5,), (7, 5), (2, 3, 5), (2, 1, 4, 5)])
def test_shapes_with_leading_batch_dims(rng, shape):
    lin = nn.Linear(5, 3)
    assert lin.weight.shape == (3, 5) and lin.bias.shape == (3,)
    x = rng.standard_normal(shape).astype(np.float32)
    y = lin(tt.tensor(x))
    assert y.shape == shape[:-1] + (3,) and y.dtype == tt.float32
    np.testing.assert_allclose(y.numpy(), x @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
def test_parity_with_torch(rng, torch, bias):
    ours = nn.Linear(6, 4, bias=bias)
    theirs = torch.nn.Linear(6, 4, bias=bias)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.numpy()))
        if bias:
            theirs.bias.copy_(torch.tensor(ours.bias.numpy()))
    x = rng.standard_normal((3, 2, 6)).astype(np.float32)
    with torch.no_grad():
        expected = theirs(torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours(tt.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)


def test_float64_parity(rng, torch):
    ours = nn.Linear(3, 2, dtype=tt.float64)
    assert ours.weight.dtype == tt.float64 and ours.bias.dtype == tt.float64
    x = rng.standard_normal((4, 3))
    expected = torch.nn.functional.linear(torch.tensor(x), torch.tensor(ours.weight.numpy()),
                                          torch.tensor(ours.bias.numpy())).numpy()
    np.testing.assert_allclose(ours(tt.tensor(x)).numpy(), expected, rtol=1e-13)


def test_linear_init_makes_its_parameters_in_the_dtype_asked_for():
    for dtype, expected in [(None, tt.float32), (tt.float64, tt.float64), (tt.float32, tt.float32)]:
        lin = nn.Linear(3, 2, dtype=dtype)
        assert (lin.weight.dtype, lin.bias.dtype) == (expected, expected), (dtype, lin.weight.dtype, lin.bias.dtype)


def test_linear_init_without_bias_registers_the_name_as_none():
    lin = nn.Linear(4, 2, bias=False)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    assert "bias" in lin._parameters and "bias" not in vars(lin), "bias=False: a registered name holding None"


def test_no_bias(rng):
    lin = nn.Linear(4, 2, bias=False)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(lin(tt.tensor(x)).numpy(), x @ lin.weight.numpy().T, rtol=1e-5, atol=1e-6)


def test_linear_reset_parameters_default_is_uniform_one_over_sqrt_fan_in():
    tt.manual_seed(0)
    fan_in, out = 400, 500
    lin = nn.Linear(fan_in, out)
    bound = 1 / math.sqrt(fan_in)
    w = lin.weight.numpy().astype(np.float64).ravel()
    b = lin.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound * (1 - 20 / w.size)
    assert np.abs(b).max() <= bound and b.std() > 0
    n = w.size
    var = bound ** 2 / 3  # variance of U(-b, b); std error of the sample variance below
    assert abs(w.var() - var) < 5 * math.sqrt(4 / 5 * var ** 2 / n)
    assert abs(w.mean()) < 5 * math.sqrt(var / n)
    assert lin.weight.requires_grad and lin.weight.grad_fn is None


def test_linear_reset_parameters_in_place_and_seed_reproducible():
    tt.manual_seed(7)
    a = nn.Linear(8, 8)
    tt.manual_seed(7)
    b = nn.Linear(8, 8)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    np.testing.assert_array_equal(a.bias.numpy(), b.bias.numpy())
    w = a.weight
    a.reset_parameters()
    assert a.weight is w and not np.array_equal(a.weight.numpy(), b.weight.numpy())


def test_linear_reset_parameters_draws_the_weight_then_the_bias():
    tt.manual_seed(11)
    lin = nn.Linear(5, 4)
    tt.manual_seed(11)
    weight = nn.init.kaiming_uniform_(tt.zeros(4, 5), a=math.sqrt(5))
    bias = nn.init.uniform_(tt.zeros(4), -1 / math.sqrt(5), 1 / math.sqrt(5))
    np.testing.assert_array_equal(lin.weight.numpy(), weight.numpy())
    np.testing.assert_array_equal(lin.bias.numpy(), bias.numpy())


def test_shape_error_names_both_shapes():
    lin = nn.Linear(4, 3)
    with pytest.raises(ValueError) as info:
        lin(tt.zeros(2, 5))
    msg = str(info.value)
    assert "(2, 5)" in msg and "in_features=4" in msg and "(3, 4)" in msg
    with pytest.raises(ValueError):
        lin(tt.tensor(1.0))


def test_forward_is_recorded_for_autograd():
    lin = nn.Linear(3, 2)
    y = lin(tt.ones(4, 3))
    assert y.requires_grad and y.grad_fn is not None
    ops = set()
    stack = [y.grad_fn]
    while stack:
        node = stack.pop()
        ops.add(node.op)
        stack.extend(t.grad_fn for t in node.inputs if t.grad_fn is not None)
    assert "matmul" in ops and "add" in ops
    leaves = [t for t in y.grad_fn.inputs if t.grad_fn is None]
    assert any(t is lin.bias for t in leaves)


def test_linear_reset_parameters_with_zero_in_features():
    lin = nn.Linear(0, 3)
    assert lin.weight.shape == (3, 0) and not lin.bias.numpy().any()
    assert lin(tt.zeros(2, 0)).tolist() == [[0.0] * 3] * 2

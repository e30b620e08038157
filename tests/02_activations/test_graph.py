"""Each activation is ONE op through apply, with the op name and attrs module 06 needs."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.nn import activations


def leaf():
    return tt.tensor(np.linspace(-2, 2, 12).reshape(3, 4), requires_grad=True)


@pytest.mark.parametrize("op, call, attrs", [
    ("relu", lambda x: F.relu(x), {}),
    ("leaky_relu", lambda x: F.leaky_relu(x), {"negative_slope": 0.01}),
    ("leaky_relu", lambda x: F.leaky_relu(x, negative_slope=0.25), {"negative_slope": 0.25}),
    ("sigmoid", lambda x: F.sigmoid(x), {}),
    ("tanh", lambda x: F.tanh(x), {}),
    ("gelu", lambda x: F.gelu(x), {"approximate": "none"}),
    ("gelu", lambda x: F.gelu(x, approximate="tanh"), {"approximate": "tanh"}),
    ("softmax", lambda x: F.softmax(x, dim=-1), {"dim": 1}),
    ("softmax", lambda x: F.softmax(x, 0), {"dim": 0}),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-2), {"dim": 0}),
    ("log_softmax", lambda x: F.log_softmax(x, dim=1), {"dim": 1}),
])
def test_single_recorded_op(op, call, attrs):
    x = leaf()
    y = call(x)
    assert y.requires_grad and y.grad_fn is not None
    node = y.grad_fn
    assert node.op == op
    assert node.attrs == attrs
    assert len(node.inputs) == 1 and node.inputs[0] is x, "one op whose input is x itself (not a composite)"
    np.testing.assert_array_equal(node.output, y.numpy())
    assert y._storage is not x._storage


def test_nothing_recorded_without_grad():
    x = tt.tensor([[-1.0, 2.0]])
    for y in (F.relu(x), F.sigmoid(x), F.gelu(x), F.softmax(x, -1), F.log_softmax(x, -1)):
        assert y.grad_fn is None and not y.requires_grad
    tt.set_grad_enabled(False)
    try:
        assert F.tanh(leaf()).grad_fn is None
    finally:
        tt.set_grad_enabled(True)


def test_functional_reexports_and_argument_checks():
    x = tt.tensor([-1.0, 1.0])
    for name in ("relu", "leaky_relu", "sigmoid", "tanh", "gelu", "softmax", "log_softmax"):
        assert getattr(F, name) is getattr(activations, name)
    assert F.relu(x).tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(x, approximate="fast")
    with pytest.raises(TypeError, match="Tensor"):
        F.sigmoid(np.array([1.0]))


@pytest.mark.parametrize("name,call", [
    ("relu", F.relu), ("leaky_relu", F.leaky_relu), ("sigmoid", F.sigmoid), ("tanh", F.tanh), ("gelu", F.gelu),
    ("softmax", lambda x: F.softmax(x, 1)), ("log_softmax", lambda x: F.log_softmax(x, 0)),
])
def test_inputs_are_not_modified(name, call):
    a = np.array([[-3.0, 0.5, 2.0], [1e4, -1e4, 0.0]], dtype=np.float32)
    x = tt.tensor(a)
    call(x)
    np.testing.assert_array_equal(x.numpy(), a, err_msg=f"{name} wrote into its input tensor")

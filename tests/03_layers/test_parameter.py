"""Parameter: a Tensor subclass that requires grad by default."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


def test_parameter_requires_grad_and_copies():
    src = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    p = nn.Parameter(src)
    assert isinstance(p, tt.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad is None
    assert p.shape == (2, 2) and p.dtype == tt.float32
    np.testing.assert_array_equal(p.numpy(), src.numpy())
    assert p._storage is not src._storage


def test_parameter_dtypes_and_flags():
    assert nn.Parameter(np.zeros((2, 3))).dtype == tt.float64
    assert nn.Parameter([1.0, 2.0]).dtype == tt.float32
    frozen = nn.Parameter([1.0], requires_grad=False)
    assert not frozen.requires_grad and isinstance(frozen, nn.Parameter)
    empty = nn.Parameter()
    assert empty.shape == (0,) and empty.dtype == tt.float32 and empty.requires_grad
    with pytest.raises(ValueError):
        nn.Parameter([1, 2])  # integer data cannot require grad


def test_ops_on_parameters_return_plain_tensors_with_history():
    p = nn.Parameter([1.0, -2.0])
    y = p * 3 + 1
    assert type(y) is tt.Tensor and y.requires_grad and y.grad_fn is not None
    assert y.tolist() == [4.0, -5.0]
    assert type(p.detach()) is tt.Tensor


def test_parameter_repr_matches_torch(torch):
    p = nn.Parameter([1.0, 2.0])
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert str(p) == repr(p), "print() shows the same as repr, as in PyTorch"
    assert repr(p) == repr(torch.nn.Parameter(torch.tensor([1.0, 2.0])))
    assert repr(nn.Parameter([1.0], requires_grad=False)).startswith("Parameter containing:\ntensor(")


def test_parameters_are_hashable_by_identity():
    a, b = nn.Parameter([1.0]), nn.Parameter([1.0])
    assert len({a, b, a}) == 2

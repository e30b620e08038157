"""Properties, Python conversions (item, tolist, bool) and the PyTorch-style repr."""
import numpy as np
import pytest

import tinytorch as tt


def test_properties():
    t = tt.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.dim() == 3
    assert t.numel() == 24 and len(t) == 2
    assert t.element_size() == 4 and t.itemsize == 4 and t.nbytes == 96
    assert t.device == "cpu"
    assert tt.tensor(5).numel() == 1 and tt.tensor(5).ndim == 0
    assert tt.zeros(0, 3).numel() == 0


def test_numpy_shares_memory():
    t = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = t.numpy()
    assert isinstance(a, np.ndarray) and np.shares_memory(a, t._storage)
    a[0, 0] = 10.0
    assert t[0, 0].item() == 10.0
    assert np.asarray(t).shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(t.T), a.T)


def test_item():
    assert tt.tensor(3.5).item() == 3.5 and isinstance(tt.tensor(3.5).item(), float)
    assert tt.tensor([7]).item() == 7 and isinstance(tt.tensor([7]).item(), int)
    assert tt.tensor([[True]]).item() is True
    t = tt.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="2 elements"):
        t.item()


def test_tolist():
    assert tt.tensor([[1, 2], [3, 4]]).T.tolist() == [[1, 3], [2, 4]]
    assert tt.tensor(2.5).tolist() == 2.5
    assert tt.tensor([True, False]).tolist() == [True, False]


def test_python_conversions():
    assert float(tt.tensor([2.5])) == 2.5 and int(tt.tensor(3)) == 3
    assert bool(tt.tensor([1.0])) and not bool(tt.tensor(0))
    t = tt.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)


def test_repr_matrix():
    t = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert repr(t) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert str(t) == repr(t)


def test_repr_kinds():
    assert repr(tt.tensor([1, 2, 3])) == "tensor([1, 2, 3])"
    assert repr(tt.tensor(3.0)) == "tensor(3.)"
    assert repr(tt.tensor([True, False])) == "tensor([ True, False])"
    assert repr(tt.tensor([1.5, 2.0], dtype=tt.float64)) == "tensor([1.5, 2. ], dtype=tinytorch.float64)"
    assert repr(tt.zeros(0, 3)) == "tensor([], size=(0, 3))"


def test_repr_of_view_shows_view_values():
    t = tt.tensor([[1, 2], [3, 4]])
    assert repr(t.T) == "tensor([[1, 3],\n        [2, 4]])"
    assert repr(t[:, 1]) == "tensor([2, 4])"


def test_repr_autograd_suffixes():
    w = tt.tensor([1.0, 2.0], requires_grad=True)
    assert repr(w) == "tensor([1., 2.], requires_grad=True)"
    assert repr(w + 1) == "tensor([2., 3.], grad_fn=<AddBackward>)"
    assert repr((w * 2).sum()) == "tensor(6., grad_fn=<SumBackward>)"

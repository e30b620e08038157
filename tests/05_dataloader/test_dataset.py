"""TensorDataset: rows of equal-length tensors, the transform hook, clear size errors."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.data import TensorDataset


def test_len_and_items_equal_numpy_rows():
    X = np.arange(30, dtype=np.float32).reshape(10, 3)
    y = np.arange(10) % 3
    ds = TensorDataset(tt.tensor(X), tt.tensor(y))
    assert len(ds) == 10
    for i in (0, 4, 9, -1):
        sample = ds[i]
        assert isinstance(sample, tuple) and len(sample) == 2
        x_i, y_i = sample
        assert isinstance(x_i, tt.Tensor) and isinstance(y_i, tt.Tensor)
        np.testing.assert_array_equal(x_i.numpy(), X[i])
        assert y_i.shape == () and y_i.item() == y[i] and y_i.dtype == np.int64


def test_tensor_dataset_getitem_returns_views_of_the_rows():
    """A sample is a view: reading a dataset of a million rows copies nothing until collate."""
    X = tt.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    x, = TensorDataset(X)[2]
    assert np.shares_memory(x.numpy(), X.numpy()), "row 2 was copied"


def test_tensor_dataset_init_converts_numpy_inputs_and_takes_any_number():
    a = np.arange(8, dtype=np.float64).reshape(4, 2)
    b = np.array([True, False, True, True])
    c = np.arange(4 * 2 * 3).reshape(4, 2, 3)
    ds = TensorDataset(a, b, c)
    assert len(ds) == 4
    assert all(isinstance(t, tt.Tensor) for t in ds.tensors)
    sample = ds[2]
    assert len(sample) == 3
    np.testing.assert_array_equal(sample[0].numpy(), a[2])
    assert sample[0].dtype == np.float64
    assert sample[1].item() is True or sample[1].item() == 1
    np.testing.assert_array_equal(sample[2].numpy(), c[2])
    single = TensorDataset(tt.arange(5))
    assert len(single) == 5 and len(single[3]) == 1 and single[3][0].item() == 3


def test_tensor_dataset_getitem_transforms_the_first_tensor_only():
    X = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = np.array([7, 8, 9])
    calls = []

    def transform(x):
        calls.append(x.shape)
        return x * 10 + 1

    ds = TensorDataset(X, y, transform=transform)
    x1, y1 = ds[1]
    np.testing.assert_array_equal(x1.numpy(), X[1] * 10 + 1)
    assert y1.item() == 8, "the target is not transformed"
    assert calls == [(2,)], "the transform sees one sample, once per read"
    ds[1]
    assert len(calls) == 2, "applied on every read (random transforms need that)"


def test_tensor_dataset_init_refuses_a_size_mismatch_clearly():
    with pytest.raises(ValueError) as info:
        TensorDataset(tt.zeros(6, 2), tt.zeros(5))
    assert "6" in str(info.value) and "5" in str(info.value), "the message names both sizes"
    with pytest.raises(ValueError):
        TensorDataset(np.zeros((3, 2)), np.zeros(3), np.zeros(4))


def test_tensor_dataset_init_refuses_no_tensors_or_a_0d_tensor():
    with pytest.raises(ValueError):
        TensorDataset()
    with pytest.raises(ValueError):
        TensorDataset(tt.tensor(3.0))


def test_tensor_dataset_init_keeps_the_dtype_of_each_numpy_array():
    ds = TensorDataset(np.zeros((3, 2), dtype=np.float32), np.array([1, 0, 2]), np.zeros(3, dtype=np.float64))
    got = [str(t.dtype) for t in ds.tensors]
    assert got == ["float32", "int64", "float64"], \
        f"numpy arrays become tensors of their own dtype (int64 labels stay int64 for the loss): got {got}"

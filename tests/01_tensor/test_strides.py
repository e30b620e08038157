"""Strides, offsets and contiguity: the layout the student computes."""
import numpy as np
import pytest

import tinytorch as tt


def np_strides(arr):
    return tuple(s // arr.itemsize for s in arr.strides)


@pytest.mark.parametrize("shape, expected", [
    ((), ()),
    ((5,), (1,)),
    ((2, 3), (3, 1)),
    ((2, 3, 4), (12, 4, 1)),
    ((4, 1, 3), (3, 3, 1)),
    ((2, 0, 3), (3, 3, 1)),
    ((1, 1), (1, 1)),
])
def test_contiguous_strides_known_values(shape, expected):
    t = tt.zeros(shape)
    assert t.shape == shape
    assert t.stride() == expected
    assert t.storage_offset() == 0
    assert t.is_contiguous()


def test_contiguous_strides_are_python_ints_even_for_a_numpy_shape():
    from tinytorch._tensor import contiguous_strides

    strides = contiguous_strides(np.array([2, 3, 4]))
    assert strides == (12, 4, 1) and all(type(s) is int for s in strides), \
        f"strides must be a tuple of Python ints, got {strides!r} ({[type(s).__name__ for s in strides]})"


def test_reduction_dims_are_sorted_and_non_negative():
    from tinytorch._tensor import _reduction_dims

    assert _reduction_dims((2, -3), 3) == (0, 2), "dims come back sorted and non-negative"
    assert _reduction_dims(-1, 2) == (1,)


@pytest.mark.parametrize("shape", [(3,), (2, 5), (3, 4, 5), (2, 1, 3, 2)])
def test_contiguous_strides_match_numpy(shape):
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = tt.tensor(arr)
    assert t.stride() == np_strides(arr)
    np.testing.assert_array_equal(t.numpy(), arr)


def test_storage_is_flat_and_contiguous():
    t = tt.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert t._storage.ndim == 1 and t._storage.size == 6
    assert t._storage.flags["C_CONTIGUOUS"]
    assert t._offset == 0 and t._strides == (2, 1)
    np.testing.assert_array_equal(t._storage, [1, 2, 3, 4, 5, 6])


def test_tensor_storage_init_storage_wraps_a_computed_array_without_copying_it():
    arr = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    t = tt.Tensor._from_array(arr)
    assert np.shares_memory(t._storage, arr), \
        "_init_storage copied the array: a fresh C-contiguous result must become the storage as it is"


def test_stride_and_size_with_dim():
    t = tt.zeros(2, 3, 4)
    assert t.stride(0) == 12 and t.stride(-1) == 1
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-3) == 2
    with pytest.raises(IndexError, match="range"):
        t.stride(3)


def test_transposed_strides():
    t = tt.zeros(2, 3)
    assert t.T.stride() == (1, 3)
    assert t.transpose(0, 1).shape == (3, 2)
    assert not t.T.is_contiguous()


def test_permuted_strides_match_numpy():
    arr = np.zeros((2, 3, 4, 5), dtype=np.float32)
    t = tt.tensor(arr)
    p = t.permute(3, 1, 0, 2)
    assert p.shape == (5, 3, 2, 4)
    assert p.stride() == np_strides(arr.transpose(3, 1, 0, 2)) == (1, 20, 60, 5)


def test_expanded_strides_are_zero():
    t = tt.zeros(3, 1)
    e = t.expand(2, 3, 4)
    assert e.shape == (2, 3, 4)
    assert e.stride() == (0, 1, 0)


def test_sliced_strides_and_offset():
    arr = np.arange(60.0).reshape(3, 4, 5)
    t = tt.tensor(arr)
    s = t[1:, ::2, 3]
    assert s.shape == (2, 2)
    assert s.stride() == (20, 10)
    assert s.storage_offset() == 20 + 3
    view = arr[1:, ::2, 3]
    assert s.stride() == np_strides(view)
    np.testing.assert_array_equal(s.numpy(), view)


def test_int_index_moves_offset():
    t = tt.arange(12).reshape(3, 4)
    row = t[2]
    assert row.shape == (4,) and row.stride() == (1,) and row.storage_offset() == 8
    assert t[-1, -1].storage_offset() == 11
    assert t[1, 2].item() == 6


@pytest.mark.parametrize("shape, strides, expected", [
    ((2, 3), (3, 1), True),
    ((3, 2), (1, 3), False),
    ((3, 1), (1, 1), True),        # size-1 dims are ignored
    ((1, 3), (99, 1), True),
    ((2, 2), (4, 1), False),       # a gap between rows
])
def test_is_contiguous_rule(shape, strides, expected):
    base = tt.zeros(16)
    v = base.as_strided(shape, strides)
    assert v.is_contiguous() is expected


def test_is_contiguous_for_unsqueezed_and_sliced():
    t = tt.zeros(4, 5)
    assert t.unsqueeze(1).is_contiguous()
    assert t[1:3].is_contiguous()          # whole rows: still row-major, offset 5
    assert not t[:, 1:3].is_contiguous()   # gaps between rows
    assert t[:, 1:3].contiguous().is_contiguous()

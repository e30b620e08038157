"""_view_strides: PyTorch's view() of a non-contiguous layout, from the shape and strides
alone; judged against the brute force (strides exist exactly when the addresses, laid out in
the new shape, step evenly along every dimension)."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch._tensor import _is_contiguous, _view_strides


def _addresses(shape, strides):
    index = np.indices(shape).reshape(len(shape), -1)
    return (np.array(strides, dtype=np.int64)[:, None] * index).sum(axis=0)


def _exist(shape, strides, new_shape):
    a = _addresses(shape, strides).reshape(new_shape)
    return all(np.all(np.diff(a, axis=k) == np.diff(a, axis=k).flat[0]) for k in range(a.ndim) if a.shape[k] > 1)


def _factorisations(n, parts):
    if parts == 1:
        return [(n,)]
    return [(d,) + rest for d in range(1, n + 1) if n % d == 0 for rest in _factorisations(n // d, parts - 1)]


LAYOUTS = [((4, 6), (8, 1)), ((3, 4), (1, 3)), ((3, 4), (0, 1)), ((2, 3, 4), (24, 4, 1)), ((2, 3, 4), (1, 8, 2)),
           ((2, 1, 3), (6, 99, 2)), ((4, 2, 2), (12, 2, 1)), ((2, 2, 3), (0, 6, 2)), ((6, 4), (1, 6)),
           ((3, 2, 4), (16, 8, 1)), ((2, 4, 3), (24, 3, 1)), ((2, 6), (12, 2))]


@pytest.mark.parametrize("shape, strides", LAYOUTS, ids=str)
def test_view_strides_exist_exactly_when_the_addresses_allow(shape, strides):
    assert not _is_contiguous(shape, strides)
    n = math.prod(shape)
    for parts in (1, 2, 3, 4):
        for new in _factorisations(n, parts):
            got = _view_strides(shape, strides, new)
            if _exist(shape, strides, new):
                assert got is not None, f"_view_strides({shape}, {strides}, {new}): strides exist, got None"
                assert len(got) == len(new), f"one stride per new dimension, got {got} for {new}"
                np.testing.assert_array_equal(_addresses(new, tuple(got)), _addresses(shape, strides),
                                              err_msg=f"strides {got} for {new} must visit {shape}, {strides}'s "
                                                      "addresses in row-major order")
            else:
                assert got is None, f"_view_strides({shape}, {strides}, {new}): no strides exist, got {got}"


@pytest.mark.parametrize("shape, strides, new, expected", [
    ((4, 6), (8, 1), (1, 4, 1, 6, 1), (32, 8, 6, 1, 1)),
    ((4, 8), (16, 2), (4, 8, 1, 1), (16, 2, 2, 2)),
    ((2, 3, 4, 3), (72, 24, 6, 1), (1, 2, 3, 4, 3, 1), (144, 72, 24, 6, 1, 1)),
], ids=str)
def test_view_strides_gives_size_one_dimensions_pytorchs_stride(shape, strides, new, expected):
    """Any stride visits the right addresses along a size-1 dimension; the contract (and
    PyTorch's view) gives it the stride to its right times that dimension's size."""
    got = _view_strides(shape, strides, new)
    assert got is not None and tuple(got) == expected, (
        f"_view_strides({shape}, {strides}, {new}): got {got}, PyTorch's view gives {expected} (a size-1 "
        f"dimension: the stride to its right times that dimension's size; at the right end, strides[-1])")


def test_view_strides_needs_no_elements():
    got = _view_strides((10 ** 6, 10 ** 6), (2 * 10 ** 6, 1), (10 ** 6, 1000, 1000))
    assert got is not None and tuple(got) == (2 * 10 ** 6, 1000, 1), f"10^12 elements: got {got}"
    assert _view_strides((10 ** 6, 10 ** 6), (1, 10 ** 6), (10 ** 12,)) is None, "a transpose of 10^12 elements"


def test_view_of_a_slice_shares_storage_and_a_transpose_refuses():
    x = tt.arange(32.0).view(4, 8)
    v = x[:, :6].view(4, 2, 3)
    assert v.stride() == (8, 3, 1) and v.tolist() == np.arange(32.0).reshape(4, 8)[:, :6].reshape(4, 2, 3).tolist()
    v[0, 0, 0] = -1.0
    assert x[0, 0].item() == -1.0, "the view writes through to x: no copy was made"
    with pytest.raises(RuntimeError, match="contiguous"):
        x.T.view(32)

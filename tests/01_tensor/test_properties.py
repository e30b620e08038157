"""Property-based tests (hypothesis) for broadcasting, strides and views against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinytorch as tt

small_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)
bcast_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=4).map(tuple)


def arr_of(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


@settings(max_examples=50, deadline=None)
@given(a=bcast_shapes, b=bcast_shapes)
def test_broadcast_shapes_vs_numpy(a, b):
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(ValueError) as info:
            tt.broadcast_shapes(a, b)
        assert str(a) in str(info.value) and str(b) in str(info.value)
        with pytest.raises(ValueError):
            tt.zeros(a) + tt.zeros(b)
    else:
        assert tt.broadcast_shapes(a, b) == expected
        assert (tt.zeros(a) + tt.ones(b)).shape == expected


@settings(max_examples=50, deadline=None)
@given(shapes=st.lists(bcast_shapes, min_size=1, max_size=4))
def test_broadcast_many_shapes_vs_numpy(shapes):
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError, match="cannot broadcast"):
            tt.broadcast_shapes(*shapes)
        return
    assert tt.broadcast_shapes(*shapes) == expected


@settings(max_examples=50, deadline=None)
@given(shape=small_shapes)
def test_init_storage_gives_numpy_strides_in_elements(shape):
    arr = arr_of(shape)
    t = tt.tensor(arr)
    assert t.stride() == tuple(s // arr.itemsize for s in arr.strides)
    assert t.is_contiguous()
    np.testing.assert_array_equal(t.numpy(), arr)


@settings(max_examples=50, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), data=st.data())
def test_transpose_vs_numpy(shape, data):
    d0 = data.draw(st.integers(-len(shape), len(shape) - 1))
    d1 = data.draw(st.integers(-len(shape), len(shape) - 1))
    arr = arr_of(shape)
    t = tt.tensor(arr).transpose(d0, d1)
    ref = np.swapaxes(arr, d0, d1)
    np.testing.assert_array_equal(t.numpy(), ref)
    assert t.stride() == tuple(s // arr.itemsize for s in ref.strides)


@settings(max_examples=50, deadline=None)
@given(shape=small_shapes, data=st.data())
def test_permute_vs_numpy(shape, data):
    dims = data.draw(st.permutations(range(len(shape))))
    arr = arr_of(shape)
    x = tt.tensor(arr)
    t = x.permute(*dims)
    ref = arr.transpose(dims)
    np.testing.assert_array_equal(t.numpy(), ref)
    assert t.stride() == tuple(s // arr.itemsize for s in ref.strides)
    assert t._storage is x._storage
    assert t.is_contiguous() == ref.flags["C_CONTIGUOUS"]


@settings(max_examples=50, deadline=None)
@given(shape=bcast_shapes, target=bcast_shapes)
def test_expand_vs_numpy(shape, target):
    arr = arr_of(shape)
    x = tt.tensor(arr)
    try:
        ref = np.broadcast_to(arr, target)
    except ValueError:
        ref = None
    if ref is None:
        with pytest.raises(ValueError):
            x.expand(*target) if target else x.expand(())
        return
    assert np.broadcast_shapes(shape, target) == target
    e = x.expand(target)
    np.testing.assert_array_equal(e.numpy(), ref)
    assert e._storage is x._storage
    for size, stride, np_stride in zip(e.shape, e.stride(), ref.strides):
        if size > 1:
            assert stride == np_stride // arr.itemsize


@settings(max_examples=50, deadline=None)
@given(shape=small_shapes, data=st.data())
def test_reshape_vs_numpy(shape, data):
    n = int(np.prod(shape))
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    first = data.draw(st.sampled_from(divisors))
    new_shape = (first, -1)
    arr = arr_of(shape)
    transpose_first = data.draw(st.booleans()) and len(shape) >= 2
    x = tt.tensor(arr)
    src, ref = (x.mT, np.swapaxes(arr, -1, -2)) if transpose_first else (x, arr)
    r = src.reshape(*new_shape)
    np.testing.assert_array_equal(r.numpy(), ref.reshape(new_shape))
    if src.is_contiguous():
        assert r._storage is x._storage
        np.testing.assert_array_equal(src.view(new_shape).numpy(), ref.reshape(new_shape))
    else:
        assert r._storage is not x._storage


@settings(max_examples=50, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), data=st.data())
def test_basic_slicing_vs_numpy(shape, data):
    index = []
    for size in shape:
        kind = data.draw(st.sampled_from(["int", "slice", "none"]))
        if kind == "int":
            index.append(data.draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            start = data.draw(st.none() | st.integers(-size - 1, size + 1))
            stop = data.draw(st.none() | st.integers(-size - 1, size + 1))
            step = data.draw(st.none() | st.integers(1, 3))
            index.append(slice(start, stop, step))
        else:
            index.append(None)
            index.append(slice(None))
    index = tuple(index)
    arr = arr_of(shape)
    x = tt.tensor(arr)
    out = x[index]
    ref = arr[index]
    np.testing.assert_array_equal(out.numpy(), ref)
    assert out.shape == ref.shape
    assert out._storage is x._storage

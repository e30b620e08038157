"""The address formula, its inverse and the pure-Python strided loops (tinytorch._strided),
checked against numpy on views of every kind: permuted, stepped, reversed, offset, broadcast
(stride 0); and the Tensor's numpy fast path checked against the loops."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinytorch as tt
from tinytorch import _strided as S


def layout_of(base, view):
    """(shape, strides, offset) in elements of a numpy view into the 1-D array `base`."""
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize
    return tuple(view.shape), tuple(s // base.itemsize for s in view.strides), offset


def c_strides(shape):
    return tuple(s // 8 for s in np.zeros(shape).strides) if shape else ()


@st.composite
def views(draw, base, max_dims=3, broadcast=True):
    """A random numpy view of `base`: reshaped, permuted, sliced (any step sign), broadcast."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=max_dims)))
    n = math.prod(shape)
    start = draw(st.integers(0, base.size - n))
    v = base[start:start + n].reshape(shape)
    v = v.transpose(draw(st.permutations(range(v.ndim))))
    index = []
    for size in v.shape:
        step = draw(st.sampled_from([1, 1, 2, -1, -2]))
        lo = draw(st.integers(0, size - 1))
        index.append(slice(lo, None, step) if step > 0 else slice(lo, None, step))
    if index:  # (indexing a 0-d array with () would give a scalar, not a view)
        v = v[tuple(index)]
    if broadcast and draw(st.booleans()):
        extra = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=1)))
        target = extra + tuple(draw(st.sampled_from([n_, 3])) if n_ == 1 else n_ for n_ in v.shape)
        v = np.broadcast_to(v, target)
    return v


BASE = np.arange(200.0)


def test_index_to_position_known_values():
    assert S.index_to_position((1, 2), (1, 4), 1) == 10
    assert S.index_to_position((), (), 7) == 7
    assert S.index_to_position((3, 1), (0, 1), 2) == 3
    assert S.index_to_position([2], [-1], 4) == 2
    assert S.index_to_position((1, 1, 1), (12, 4, 1), 0) == 17


def test_ordinal_to_index_known_values():
    assert list(S.ordinal_to_index(17, (2, 3, 4))) == [1, 1, 1]
    assert list(S.ordinal_to_index(5, (2, 3, 4))) == [0, 1, 1]
    assert list(S.ordinal_to_index(3, (4,))) == [3]
    assert list(S.ordinal_to_index(0, ())) == []
    assert list(S.ordinal_to_index(4, (3, 2))) == [2, 0], "row-major (C) order, not column-major"
    assert type(S.ordinal_to_index(4, (3, 2))) is list, "a list, as the contract says (the loops assign into it)"


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_index_to_position_reads_any_view_like_numpy(data):
    view = data.draw(views(BASE))
    shape, strides, offset = layout_of(BASE, view)
    for idx in np.ndindex(*shape):
        assert BASE[S.index_to_position(idx, strides, offset)] == view[idx]


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple))
def test_ordinal_to_index_is_unravel_and_inverts_the_formula(shape):
    n = math.prod(shape)
    strides = c_strides(shape)
    for k in range(n):
        index = S.ordinal_to_index(k, shape)
        assert tuple(index) == tuple(int(i) for i in np.unravel_index(k, shape))
        assert S.index_to_position(index, strides, 0) == k


def test_broadcast_strides():
    assert list(S.broadcast_strides((3,), (1,), (2, 3))) == [0, 1]
    assert list(S.broadcast_strides((2, 1), (1, 1), (2, 3))) == [1, 0]
    assert list(S.broadcast_strides((), (), (2, 2))) == [0, 0]
    assert list(S.broadcast_strides((4, 1), (-2, 9), (4, 5))) == [-2, 0]
    assert list(S.broadcast_strides((1, 3), (7, 2), (2, 5, 3))) == [0, 0, 2]
    with pytest.raises(ValueError, match=r"\(3,\)"):
        S.broadcast_strides((3,), (1,), (2, 4))
    with pytest.raises(ValueError):
        S.broadcast_strides((2, 3), (3, 1), (3,))


def run_map(view, out_shape=None, fn=lambda v: v * 10.0 + 1.0):
    out_shape = view.shape if out_shape is None else out_shape
    out = np.full(max(math.prod(out_shape), 1), np.nan)
    S.strided_map(fn, out, out_shape, c_strides(out_shape), 0, BASE, *layout_of(BASE, view))
    return out[:math.prod(out_shape)].reshape(out_shape)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_strided_map_on_any_view_equals_numpy(data):
    view = data.draw(views(BASE))
    np.testing.assert_array_equal(run_map(view), view * 10.0 + 1.0)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_strided_map_broadcasts_its_input_to_the_output(data):
    view = data.draw(views(BASE, broadcast=False))
    target = (2,) + tuple(3 if n == 1 else n for n in view.shape)
    np.testing.assert_array_equal(run_map(view, target), np.broadcast_to(view * 10.0 + 1.0, target))


def test_strided_map_writes_into_a_strided_output():
    buf = np.zeros(30)
    # output: a transposed (4, 3) view of buf[2:14] reshaped (3, 4), i.e. strides (1, 4), offset 2
    S.strided_map(lambda v: -v, buf, (4, 3), (1, 4), 2, BASE, (4, 3), (3, 1), 5)
    np.testing.assert_array_equal(buf[2:14].reshape(3, 4).T, -BASE[5:17].reshape(4, 3))
    assert (buf[:2] == 0).all() and (buf[14:] == 0).all(), "nothing outside the output view is written"


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_strided_zip_on_any_views_with_broadcasting_equals_numpy(data):
    a = data.draw(views(BASE))
    # b: a view whose shape broadcasts with a's (some dims dropped or set to 1)
    b_shape = tuple(data.draw(st.sampled_from([n, 1])) for n in a.shape)
    b_shape = b_shape[data.draw(st.integers(0, len(b_shape))):]
    n = math.prod(b_shape)
    start = data.draw(st.integers(0, BASE.size - 2 * n - 1))
    b = BASE[start:start + 2 * n:2].reshape(b_shape)  # stride 2 in the last dim, at an offset
    if b.ndim >= 2 and data.draw(st.booleans()):
        b = BASE[start:start + 2 * n:2].reshape(b_shape[::-1]).T  # a transposed b
    try:
        out_shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return
    out = np.full(max(math.prod(out_shape), 1), np.nan)
    S.strided_zip(lambda x, y: x * 1000.0 + y, out, out_shape, c_strides(out_shape), 0,
                  BASE, *layout_of(BASE, a), BASE, *layout_of(BASE, b))
    np.testing.assert_array_equal(out[:math.prod(out_shape)].reshape(out_shape), a * 1000.0 + b)


@pytest.mark.parametrize("a_view, b_view", [
    (lambda m: m[:3, 2:3], lambda m: m[4:5, 8:12]),          # (3, 1) + (1, 4): both broadcast
    (lambda m: m[:2, 5:6], lambda m: m[2:4, ::4]),            # size-1 dim with a non-zero stride
    (lambda m: m[:3, :4], lambda m: m[7, 3:7]),               # row broadcast at an offset
    (lambda m: m[::-1, 0], lambda m: m[9, 9:10].reshape(())),  # reversed + 0-d
])
def test_strided_zip_broadcast_cases(a_view, b_view):
    m = BASE[:120].reshape(10, 12)
    a, b = a_view(m), b_view(m)
    out_shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.zeros(math.prod(out_shape))
    S.strided_zip(lambda x, y: x * 1000.0 + y, out, out_shape, c_strides(out_shape), 0,
                  BASE, *layout_of(BASE, a), BASE, *layout_of(BASE, b))
    np.testing.assert_array_equal(out.reshape(out_shape), a * 1000.0 + b)


def test_strided_zip_writes_into_a_strided_output():
    buf = np.zeros(30)
    # output: a transposed (4, 3) view of buf[2:14] reshaped (3, 4), i.e. strides (1, 4), offset 2
    S.strided_zip(lambda x, y: x - y, buf, (4, 3), (1, 4), 2, BASE, (4, 3), (3, 1), 5, BASE, (3,), (1,), 40)
    np.testing.assert_array_equal(buf[2:14].reshape(3, 4).T, BASE[5:17].reshape(4, 3) - BASE[40:43])
    assert (buf[:2] == 0).all() and (buf[14:] == 0).all(), "nothing outside the output view is written"


def test_strided_zip_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError):
        S.strided_zip(lambda x, y: x + y, np.zeros(6), (2, 3), (3, 1), 0,
                      BASE, (2, 3), (3, 1), 0, BASE, (2,), (1,), 0)


def run_reduce(view, dim, fn=lambda acc, v: acc + v, start=0.0):
    shape, strides, offset = layout_of(BASE, view)
    out_shape = tuple(1 if k == dim else n for k, n in enumerate(shape))
    out = np.full(math.prod(out_shape), np.nan)
    S.strided_reduce(fn, start, out, out_shape, c_strides(out_shape), 0, BASE, shape, strides, offset, dim)
    return out.reshape(out_shape)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_strided_reduce_on_any_view_equals_numpy(data):
    view = data.draw(views(BASE))
    if view.ndim == 0:
        return
    dim = data.draw(st.integers(0, view.ndim - 1))
    np.testing.assert_array_equal(run_reduce(view, dim), view.sum(axis=dim, keepdims=True))
    np.testing.assert_array_equal(run_reduce(view, dim, fn=max, start=-np.inf), view.max(axis=dim, keepdims=True))


def test_strided_reduce_writes_into_a_strided_output():
    buf = np.zeros(20)
    # input (3, 4) at offset 5 summed over dim 1 into a (3, 1) output with stride 3, offset 4
    S.strided_reduce(lambda acc, v: acc + v, 0.0, buf, (3, 1), (3, 1), 4, BASE, (3, 4), (4, 1), 5, 1)
    np.testing.assert_array_equal(buf[4:13:3], BASE[5:17].reshape(3, 4).sum(axis=1))
    assert np.count_nonzero(buf) == 3, "only the three output elements are written"


def test_strided_reduce_every_dim_of_a_permuted_view():
    v = BASE[:24].reshape(2, 3, 4).transpose(2, 0, 1)
    for dim in range(3):
        np.testing.assert_array_equal(run_reduce(v, dim), v.sum(axis=dim, keepdims=True))


def test_strided_reduce_folds_in_index_order_and_handles_empty_dims():
    out = np.zeros(1)
    S.strided_reduce(lambda acc, v: acc * 10 + v, 0, out, (1,), (1,), 0, np.array([1.0, 2.0, 3.0]), (3,), (1,), 0, 0)
    assert out[0] == 123.0
    S.strided_reduce(lambda acc, v: acc + v, 100.0, out, (1,), (1,), 0, np.array([1.0, 2.0, 3.0]), (3,), (1,), 0, 0)
    assert out[0] == 106.0, "the fold starts from `start`, not from the first element"
    out = np.full(3, np.nan)
    S.strided_reduce(lambda acc, v: acc + v, 5.0, out, (3, 1), (1, 1), 0, BASE, (3, 0), (4, 1), 0, 1)
    np.testing.assert_array_equal(out, [5.0, 5.0, 5.0])


# ---------------------------------------------------------------- the Tensor against the loops
VIEW_NAMES = ["permuted", "sliced", "transposed slice", "expanded"]


def tensor_views():
    """Built inside the tests (not at collection), so that a stubbed package fails the tests."""
    x = tt.tensor(np.arange(60.0)).reshape(3, 4, 5)
    return {
        "permuted": x.permute(2, 0, 1),
        "sliced": x[1:, ::2, 1:4],
        "transposed slice": x[2].T,
        "expanded": x[0, 1].unsqueeze(0).expand(3, 5),
    }


@pytest.mark.parametrize("name", VIEW_NAMES)
def test_tensor_arithmetic_agrees_with_strided_zip(name):
    t = tensor_views()[name]
    other = tt.tensor(np.arange(float(t.shape[-1])))  # broadcasts along the last dim
    got = (t * 3 + other).numpy()
    out = np.zeros(t.numel())
    S.strided_zip(lambda a, b: a * 3 + b, out, t.shape, c_strides(t.shape), 0,
                  t._storage, t.shape, t._strides, t._offset,
                  other._storage, other.shape, other._strides, other._offset)
    np.testing.assert_allclose(got, out.reshape(t.shape))


@pytest.mark.parametrize("name", VIEW_NAMES)
def test_tensor_unary_and_sum_agree_with_the_loops(name):
    t = tensor_views()[name]
    out = np.zeros(t.numel())
    S.strided_map(lambda v: -v, out, t.shape, c_strides(t.shape), 0, t._storage, t.shape, t._strides, t._offset)
    np.testing.assert_array_equal((-t).numpy(), out.reshape(t.shape))
    for dim in range(t.ndim):
        out_shape = tuple(1 if k == dim else n for k, n in enumerate(t.shape))
        red = np.zeros(math.prod(out_shape))
        S.strided_reduce(lambda acc, v: acc + v, 0.0, red, out_shape, c_strides(out_shape), 0,
                         t._storage, t.shape, t._strides, t._offset, dim)
        np.testing.assert_allclose(t.sum(dim, keepdim=True).numpy(), red.reshape(out_shape))

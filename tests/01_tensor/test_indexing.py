"""Basic indexing is a view computed from strides; advanced indexing copies via numpy."""
import numpy as np
import pytest

import tinytorch as tt

ARR = np.arange(120.0).reshape(4, 5, 6)

BASIC = [
    0, -1, 3, (1, 2), (1, 2, 3), (-1, -2, -3),
    slice(None), slice(1, 3), slice(None, None, 2), slice(-3, None), slice(10, 20),
    (slice(1, None), slice(None, None, 3)), (slice(None), 2, slice(1, 5, 2)),
    None, (None, 1), (1, None, 2), (Ellipsis, 2), (1, Ellipsis), (Ellipsis, None),
    (slice(None), None, slice(1, 3)), (None, None, 0, None), (slice(3, 1),), (),
    Ellipsis, (0, Ellipsis, slice(None, None, 4)), np.int64(2), (slice(0, 4, 3), -1),
]


@pytest.mark.parametrize("idx", BASIC, ids=[repr(i) for i in BASIC])
def test_basic_indexing_matches_numpy_and_is_a_view(idx):
    x = tt.tensor(ARR)
    out = x[idx]
    expected = ARR[idx]
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    assert out._storage is x._storage


@pytest.mark.parametrize("idx", [(1, slice(None, None, 2)), (slice(1, 3), slice(None), 4), (Ellipsis, slice(1, None, 2))])
def test_basic_indexing_strides_match_numpy(idx):
    x = tt.tensor(ARR)
    out = x[idx]
    view = ARR[idx]
    assert out.stride() == tuple(s // ARR.itemsize for s in view.strides)


def test_basic_indexing_on_a_transposed_view():
    x = tt.tensor(ARR).permute(2, 0, 1)
    ref = ARR.transpose(2, 0, 1)
    for idx in [(1, slice(None, None, 2)), (slice(1, 4), -1), (Ellipsis, 3, None)]:
        np.testing.assert_array_equal(x[idx].numpy(), ref[idx])


def test_basic_index_of_a_view_that_starts_at_a_non_zero_offset():
    x = tt.tensor(ARR)
    for first, second in [(1, 2), (slice(1, None), 0), ((slice(None), slice(2, None)), (1, slice(None, None, 2)))]:
        np.testing.assert_array_equal(x[first][second].numpy(), ARR[first][second])


def test_view_write_through():
    x = tt.zeros(3, 4)
    row = x[1]
    row.fill_(7.0)
    col = x[:, 2]
    col.add_(1.0)
    expected = np.zeros((3, 4), dtype=np.float32)
    expected[1] = 7
    expected[:, 2] += 1
    np.testing.assert_array_equal(x.numpy(), expected)


@pytest.mark.parametrize("idx, dim, size", [((4,), 0, 4), ((0, 5), 1, 5), ((0, 0, -7), 2, 6), ((-5,), 0, 4)])
def test_basic_index_out_of_range_int_names_dim_and_size(idx, dim, size):
    x = tt.tensor(ARR)
    with pytest.raises(IndexError) as info:
        x[idx]
    msg = str(info.value)
    assert f"dimension {dim}" in msg and str(size) in msg


def test_too_many_indices():
    x = tt.zeros(2, 3)
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(IndexError):
        x[..., 0, ...]


def test_non_positive_step_is_refused():
    x = tt.arange(5)
    with pytest.raises(ValueError, match="step"):
        x[::-1]
    with pytest.raises(ValueError, match="step"):
        x[::0]


def test_zero_d_indexing():
    s = tt.tensor(5.0)
    assert s[()].shape == () and s[()].item() == 5.0
    assert s[None].shape == (1,)
    assert s[...].shape == ()


ADVANCED = [
    [0, 2],
    ([0, 3], [1, 4]),
    (slice(None), [0, 0, 4]),
    (1, [2, 3], slice(None, 3)),
    (np.array([[0, 1], [3, 2]]),),
    (Ellipsis, [5, 0]),
    ([True, False, True, False],),
]


@pytest.mark.parametrize("idx", ADVANCED, ids=[repr(i) for i in ADVANCED])
def test_advanced_indexing_matches_numpy_and_copies(idx):
    x = tt.tensor(ARR)
    np_idx = tuple(np.asarray(i) if isinstance(i, list) else i for i in idx) if isinstance(idx, tuple) else np.asarray(idx)
    expected = ARR[np_idx]
    out = x[idx]
    np.testing.assert_array_equal(out.numpy(), expected)
    assert out._storage is not x._storage
    assert not np.shares_memory(out.numpy(), x.numpy())


def test_tensor_indices_and_masks():
    x = tt.tensor(ARR)
    idx = tt.tensor([3, 0, 1])
    np.testing.assert_array_equal(x[idx].numpy(), ARR[[3, 0, 1]])
    np.testing.assert_array_equal(x[:, idx].numpy(), ARR[:, [3, 0, 1]])
    mask = x > 100
    assert mask.dtype == tt.bool_
    np.testing.assert_array_equal(x[mask].numpy(), ARR[ARR > 100])
    rows = tt.arange(4)
    cols = tt.tensor([1, 1, 2, 0])
    np.testing.assert_array_equal(x[rows, cols].numpy(), ARR[np.arange(4), [1, 1, 2, 0]])
    with pytest.raises(IndexError):
        x[tt.tensor([0.5])]
    with pytest.raises(IndexError):
        x[tt.tensor([4])]


def test_setitem_basic_and_advanced():
    ref = np.zeros((3, 4), dtype=np.float32)
    x = tt.zeros(3, 4)
    x[1] = 5.0
    ref[1] = 5.0
    x[:, 1:3] = tt.tensor([1.0, 2.0])
    ref[:, 1:3] = [1.0, 2.0]
    x[[0, 2], [3, 0]] = -1.0
    ref[[0, 2], [3, 0]] = -1.0
    x[x > 1.5] = 9.0
    ref[ref > 1.5] = 9.0
    np.testing.assert_array_equal(x.numpy(), ref)


def test_setitem_through_transposed_view_reaches_storage():
    x = tt.zeros(2, 3)
    x.T[2, 0] = 4.0
    assert x[0, 2].item() == 4.0


def test_setitem_refused_when_requires_grad():
    w = tt.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad"):
        w[0] = 1.0
    tt.set_grad_enabled(False)
    try:
        w[0] = 1.0
    finally:
        tt.set_grad_enabled(True)
    assert w.tolist() == [1.0, 0.0, 0.0]


def test_iteration_and_len():
    x = tt.tensor(np.arange(6).reshape(3, 2))
    assert len(x) == 3
    rows = [r.tolist() for r in x]
    assert rows == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(TypeError):
        len(tt.tensor(1.0))

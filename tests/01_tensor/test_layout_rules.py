"""The layout rules the student writes as small functions: slices (either step sign), squeeze
dims, unsqueeze strides on odd layouts, view/reshape offsets, contiguity with size-1 dims."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinytorch as tt
from tinytorch import _tensor as T


def layout_of(base, view):
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize
    return tuple(view.shape), tuple(s // base.itemsize for s in view.strides), offset


@settings(max_examples=80, deadline=None)
@given(size=st.integers(0, 8), stride=st.integers(1, 3),
       start=st.none() | st.integers(-10, 10), stop=st.none() | st.integers(-10, 10),
       step=st.none() | st.sampled_from([1, 2, 3, -1, -2, -3]))
def test_slice_layout_matches_numpy_for_both_step_signs(size, stride, start, stop, step):
    base = np.arange(float(size * stride + 1))
    dim = base[: size * stride: stride] if size else base[:0]
    item = slice(start, stop, step)
    n, new_stride, delta = T._slice_layout(item, size, stride)
    shape, strides, offset = layout_of(base, dim[item])
    where = f"_slice_layout({item}, size={size}, stride={stride})"
    assert n == shape[0], f"{where}: length {n}, numpy's view has {shape[0]} elements"
    if n > 0:
        assert new_stride == strides[0] or n == 1, f"{where}: stride {new_stride}, numpy's view has {strides[0]}"
        assert delta == offset, f"{where}: offset change {delta}, numpy's view starts {offset} elements in"
        assert base[delta + (n - 1) * new_stride] == dim[item][-1], f"{where}: the last element is not numpy's"
    else:
        assert delta == 0, f"{where}: an empty slice moves nothing, got an offset change of {delta}"


@pytest.mark.parametrize("item, expected", [
    (slice(None), (10, 3, 0)),
    (slice(0, 10, 3), (4, 9, 0)),
    (slice(7, 2, -2), (3, -6, 21)),
    (slice(None, None, -1), (10, -3, 27)),
    (slice(-1, -11, -3), (4, -9, 27)),
    (slice(12, 20), (0, 3, 0)),
    (slice(5, 5, 2), (0, 6, 0)),  # empty, yet its stride is step * stride, as PyTorch's (x[5:5:2].stride())
    (slice(7, 3, 2), (0, 6, 0)),
])
def test_slice_layout_known_values(item, expected):
    assert T._slice_layout(item, 10, 3) == expected


@pytest.mark.parametrize("shape, dim, expected", [
    ((1, 2, 1, 3), None, (0, 2)),
    ((1, 2, 1, 3), 0, (0,)),
    ((1, 2, 1, 3), -2, (2,)),
    ((1, 2, 1, 3), 1, ()),
    ((1, 2, 1, 3), (2, 0, -4), (0, 2)),
    ((), None, ()),
])
def test_squeeze_dims(shape, dim, expected):
    assert T._squeeze_dims(shape, dim) == expected


def test_squeeze_of_a_size_other_than_one_keeps_it_and_records_no_dim():
    x = tt.zeros(1, 2, 1, 3, requires_grad=True)
    y = x.squeeze(1)
    assert y.shape == (1, 2, 1, 3)
    assert y.grad_fn.attrs["dims"] == ()
    assert x.squeeze((0, 1)).shape == (2, 1, 3)


def test_squeeze_keeps_odd_strides_and_offset():
    w = tt.tensor(np.arange(12.0)).as_strided((3, 1, 2), (4, 5, 1), 1)
    s = w.squeeze(1)
    assert (s.shape, s.stride(), s.storage_offset()) == ((3, 2), (4, 1), 1)


def test_unsqueeze_strides_match_pytorch_on_non_contiguous_views(torch):
    a = np.arange(24.0).reshape(2, 3, 4)
    ours, theirs = tt.tensor(a), torch.tensor(a)
    for make in [lambda x: x, lambda x: x.permute(2, 0, 1), lambda x: x[:, ::2, 1:], lambda x: x[1, :, ::3]]:
        o, t = make(ours), make(theirs)
        for d in range(-o.ndim - 1, o.ndim + 1):
            u, want = o.unsqueeze(d), t.unsqueeze(d).stride()
            assert u.stride() == want, \
                f"unsqueeze({d}) of shape {o.shape}, strides {o.stride()}: got strides {u.stride()}, " \
                f"PyTorch gives {want}"
            np.testing.assert_array_equal(u.numpy(), t.unsqueeze(d).numpy())


def test_unsqueeze_stride_of_a_stepped_view():
    step = tt.tensor(np.arange(6.0)).as_strided((3,), (2,), 0)
    assert step.unsqueeze(0).stride() == (6, 2)
    assert step.unsqueeze(1).stride() == (2, 1)


def test_view_forward_of_a_non_contiguous_tensor_says_what_to_call_instead():
    xt = tt.tensor(np.arange(12.0)).view(3, 4).T
    with pytest.raises(RuntimeError) as info:
        T._view_forward(xt, (12,))
    assert ".contiguous()" in str(info.value) or ".reshape()" in str(info.value), (
        f"the message points to .contiguous() or .reshape(); got: {info.value}")


def test_view_forward_keeps_the_offset_of_a_contiguous_view():
    x = tt.tensor(np.arange(12.0))
    v = x.as_strided((2, 3), (3, 1), 6)
    assert v.view(6).storage_offset() == 6 and v.view(6).tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    assert x.as_strided((8,), (1,), 4).view(2, 4).tolist() == [[4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]


def test_reshape_forward_keeps_the_offset_of_a_contiguous_view():
    x = tt.tensor(np.arange(12.0))
    view = x.as_strided((2, 3), (3, 1), 6)
    v = view.reshape(3, 2)
    assert v._storage is view._storage and v.storage_offset() == 6, (
        "reshape(3, 2) of a contiguous (2, 3) view at offset 6: a view of the same storage at offset 6, got "
        + ("the same storage" if v._storage is view._storage else "a copy") + f" at offset {v.storage_offset()}")
    assert v.tolist() == [[6.0, 7.0], [8.0, 9.0], [10.0, 11.0]], f"values of the reshaped view: got {v.tolist()}"


@pytest.mark.parametrize("shape, strides, sizes, expected", [
    ((3, 1), (1, 1), (3, 4), ((3, 4), (1, 0))),
    ((1,), (5,), (2, 3, -1), ((2, 3, 1), (0, 0, 5))),
    ((2, 1, 3), (6, 3, 2), (4, 2, 5, 3), ((4, 2, 5, 3), (0, 6, 0, 2))),
    ((3,), (1,), (1, 3), ((1, 3), (3, 1))),                 # a new dim of size 1 is an unsqueeze(0): PyTorch's stride
    ((2, 1), (7, 3), (1, 2, 4), ((1, 2, 4), (14, 7, 0))),
    ((2, 1), (7, 3), (1, 3, 2, 4), ((1, 3, 2, 4), (0, 0, 7, 0))),
    ((), (), (1, 1), ((1, 1), (0, 0))),
], ids=str)
def test_expand_layout_returns_tuples_with_zero_strides_where_it_grows(shape, strides, sizes, expected):
    got = T._expand_layout(shape, strides, sizes)
    assert type(got) is tuple and all(type(part) is tuple for part in got), (
        f"_expand_layout({shape}, {strides}, {sizes}) returns (new_shape, new_strides) as tuples, got {got!r}")
    assert got == expected, f"_expand_layout({shape}, {strides}, {sizes}): got {got}, expected {expected}"


@pytest.mark.parametrize("shape, strides, expected", [
    ((2, 1, 3), (3, 7, 1), True),
    ((1, 1), (5, 9), True),
    ((3, 1), (1, 3), True),
    ((2, 3), (1, 2), False),
    ((2, 3), (3, 2), False),
    ((0, 3), (7, 7), True),
    ((), (), True),
])
def test_is_contiguous_ignores_size_one_dims(shape, strides, expected):
    assert T._is_contiguous(shape, strides) is expected


def test_infer_shape_errors_name_shape_and_size():
    for shape in [(4, -1), (-1, -1), (5,), (-2, 3), (-2, -1)]:
        with pytest.raises(ValueError, match="6") as info:
            T._infer_shape(shape, 6)
        assert str(shape) in str(info.value), f"_infer_shape({shape}, 6): the message names the shape asked for"
    assert T._infer_shape((2, -1, 1), 6) == (2, 3, 1)


def test_infer_shape_of_an_empty_tensor_refuses_an_undetermined_minus_one():
    with pytest.raises(ValueError, match="0"):
        T._infer_shape((0, -1), 0)  # any size would do: PyTorch calls it ambiguous


def test_transpose_keeps_the_offset_of_a_view():
    x = tt.arange(12).as_strided((2, 4), (4, 1), 4)  # rows 1 and 2 of a (3, 4): offset 4
    t = x.transpose(0, 1)
    got = (t.shape, t.stride(), t.storage_offset())
    assert got == ((4, 2), (1, 4), 4), (f"transpose(0, 1) of a (2, 4) view at offset 4, strides (4, 1): expected "
                                        f"shape (4, 2), strides (1, 4), offset 4 (the same storage); got {got}")
    assert t.tolist() == [[4, 8], [5, 9], [6, 10], [7, 11]], f"values of the transposed view: got {t.tolist()}"


def test_int_index_wraps_negative_and_reports_dimension():
    x = tt.arange(12).reshape(3, 4)
    assert x[-1].storage_offset() == 8 and x[-1].tolist() == [8, 9, 10, 11]
    assert x.T[-1].storage_offset() == 3 and x.T[-1].tolist() == [3, 7, 11]
    with pytest.raises(IndexError, match="dimension 1"):
        x[0, -5]


def test_memory_footprint_counts_storages_not_tensors():
    x = tt.zeros(100, 50)
    y = tt.zeros(10, dtype=tt.float64)
    assert tt.memory_footprint(y, x, y[2:], x.T) == 20_080
    assert tt.memory_footprint() == 0

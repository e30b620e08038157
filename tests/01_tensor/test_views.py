"""Views share storage; copies do not; view/reshape/squeeze/unsqueeze/flatten/expand values."""
import numpy as np
import pytest

import tinytorch as tt


def shares(a, b):
    return a._storage is b._storage and np.shares_memory(a.numpy(), b.numpy())


def test_transpose_is_a_view_and_writes_through():
    x = tt.tensor(np.arange(6.0).reshape(2, 3))
    y = x.transpose(0, 1)
    assert shares(x, y)
    y[2, 1] = 100.0
    assert x[1, 2].item() == 100.0
    x.numpy()[0, 1] = -5.0
    assert y[1, 0].item() == -5.0


def test_permute_values_and_errors():
    arr = np.arange(24).reshape(2, 3, 4)
    x = tt.tensor(arr)
    np.testing.assert_array_equal(x.permute(1, 2, 0).numpy(), arr.transpose(1, 2, 0))
    np.testing.assert_array_equal(x.permute((2, 0, 1)).numpy(), arr.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute(-1, 0, 1).numpy(), arr.transpose(2, 0, 1))
    assert shares(x, x.permute(2, 1, 0))
    with pytest.raises(ValueError, match="permutation"):
        x.permute(0, 0, 1)
    with pytest.raises(IndexError):
        x.permute(0, 1, 3)


def test_permute_keeps_the_offset_of_a_view():
    arr = np.arange(24.0).reshape(4, 6)
    v = tt.tensor(arr).as_strided((3, 3), (6, 2), 6)  # arr[1:, ::2]: offset 6, strides (6, 2)
    p = v.permute(1, 0)
    assert p.storage_offset() == 6, f"permute of a view at offset 6 moved it to {p.storage_offset()}"
    np.testing.assert_array_equal(p.numpy(), arr[1:, ::2].T)
    np.testing.assert_array_equal(v.T.numpy(), arr[1:, ::2].T)


def test_module_level_transpose_and_permute():
    arr = np.arange(6.0).reshape(2, 3)
    x = tt.tensor(arr)
    np.testing.assert_array_equal(tt.transpose(x, 0, 1).numpy(), arr.T)
    np.testing.assert_array_equal(tt.permute(x, (1, 0)).numpy(), arr.T)


def test_T_and_mT():
    arr = np.arange(24.0).reshape(2, 3, 4)
    x = tt.tensor(arr)
    np.testing.assert_array_equal(x.T.numpy(), arr.transpose(2, 1, 0))
    np.testing.assert_array_equal(x.mT.numpy(), arr.swapaxes(-1, -2))
    assert shares(x, x.T) and shares(x, x.mT)


def test_view_shares_storage_and_infers_minus_one():
    x = tt.arange(12.0)
    v = x.view(3, -1)
    assert v.shape == (3, 4) and v.stride() == (4, 1)
    assert shares(x, v)
    v[0, 0] = 42.0
    assert x[0].item() == 42.0
    assert x.view((2, 6)).shape == (2, 6)
    assert x.view(-1).shape == (12,)


def test_view_errors():
    x = tt.arange(12.0).view(3, 4)
    xt = x.T
    with pytest.raises(RuntimeError, match="contiguous"):
        xt.view(12)
    with pytest.raises(ValueError, match="12"):
        x.view(5, -1)
    with pytest.raises(ValueError):
        x.view(-1, -1)
    with pytest.raises(ValueError):
        x.view(13)


def test_view_of_offset_slice_keeps_offset():
    x = tt.arange(12.0).view(3, 4)
    rows = x[1:]
    v = rows.view(8)
    assert v.storage_offset() == 4 and shares(x, v)
    np.testing.assert_array_equal(v.numpy(), np.arange(4.0, 12.0))


def test_reshape_view_when_contiguous_copy_otherwise():
    arr = np.arange(24.0).reshape(4, 6)
    x = tt.tensor(arr)
    r = x.reshape(2, 12)
    assert shares(x, r)
    np.testing.assert_array_equal(r.numpy(), arr.reshape(2, 12))
    rt = x.T.reshape(-1)
    assert not np.shares_memory(rt.numpy(), x.numpy())
    assert rt.is_contiguous()
    np.testing.assert_array_equal(rt.numpy(), arr.T.reshape(-1))
    np.testing.assert_array_equal(tt.reshape(x.T, (3, 8)).numpy(), arr.T.reshape(3, 8))


def test_contiguous_returns_self_or_copy():
    x = tt.zeros(3, 4)
    assert x.contiguous() is x
    y = x.T.contiguous()
    assert y.is_contiguous() and y.stride() == (3, 1)
    assert not np.shares_memory(y.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), x.numpy().T)


def test_flatten():
    arr = np.arange(120.0).reshape(2, 3, 4, 5)
    x = tt.tensor(arr)
    assert x.flatten().shape == (120,)
    assert x.flatten(1).shape == (2, 60)
    assert x.flatten(1, 2).shape == (2, 12, 5)
    assert tt.flatten(x, 0, -2).shape == (24, 5)
    np.testing.assert_array_equal(x.flatten(1, 2).numpy(), arr.reshape(2, 12, 5))
    assert tt.tensor(3.0).flatten().shape == (1,)


def test_squeeze_unsqueeze():
    arr = np.arange(6.0).reshape(1, 2, 1, 3)
    x = tt.tensor(arr)
    assert x.squeeze().shape == (2, 3)
    assert x.squeeze(0).shape == (2, 1, 3)
    assert x.squeeze(-2).shape == (1, 2, 3)
    assert x.squeeze(1).shape == (1, 2, 1, 3)
    assert x.squeeze((0, 2)).shape == (2, 3)
    assert tt.squeeze(x).stride() == (3, 1)
    assert shares(x, x.squeeze())
    v = tt.tensor([1.0, 2.0, 3.0])
    for d, shape in [(0, (1, 3)), (1, (3, 1)), (-1, (3, 1)), (-2, (1, 3))]:
        u = v.unsqueeze(d)
        assert u.shape == shape, d
        np.testing.assert_array_equal(u.numpy(), np.expand_dims(v.numpy(), d))
        assert shares(v, u)
    assert tt.unsqueeze(tt.zeros(2, 3), 1).shape == (2, 1, 3)
    with pytest.raises(IndexError):
        v.unsqueeze(3)


def test_expand_values_share_memory():
    b = tt.tensor([1.0, 2.0, 3.0])
    e = b.expand(4, 3)
    np.testing.assert_array_equal(e.numpy(), np.broadcast_to(b.numpy(), (4, 3)))
    assert shares(b, e)
    b[1] = 20.0
    assert (e[:, 1].numpy() == 20.0).all()
    col = tt.tensor([[1.0], [2.0]])
    np.testing.assert_array_equal(col.expand(-1, 3).numpy(), [[1, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(col.expand_as(tt.zeros(2, 2, 3)).numpy(),
                                  np.broadcast_to(col.numpy(), (2, 2, 3)))


def test_expand_errors_name_both_shapes():
    x = tt.zeros(2, 3)
    with pytest.raises(ValueError) as info:
        x.expand(4, 3)
    assert "(2, 3)" in str(info.value) and "(4, 3)" in str(info.value)
    with pytest.raises(ValueError):
        x.expand(3)
    with pytest.raises(ValueError):
        x.expand(-1, 2, 3)


def test_detach_shares_storage():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert shares(x, d) and not d.requires_grad and d.grad_fn is None
    assert x.data._storage is x._storage

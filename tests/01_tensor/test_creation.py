"""Creation functions, the seeded generator, cat and stack."""
import numpy as np
import pytest

import tinytorch as tt


@pytest.mark.parametrize("fn, value", [(tt.zeros, 0), (tt.ones, 1)])
def test_zeros_ones_both_size_forms(fn, value):
    for t in (fn(2, 3), fn((2, 3)), fn([2, 3])):
        assert t.shape == (2, 3) and t.dtype == tt.float32 and t.stride() == (3, 1)
        assert (t.numpy() == value).all()
    assert fn(4, dtype=tt.int64).dtype == tt.int64
    assert fn(()).shape == ()
    assert fn(2, requires_grad=True).requires_grad


def test_full_and_likes():
    f = tt.full((2, 2), 7)
    assert f.dtype == tt.int64 and f.tolist() == [[7, 7], [7, 7]]
    assert tt.full((3,), 0.5).dtype == tt.float32
    assert tt.full(2, True).dtype == tt.bool_
    assert tt.full((2,), 1, dtype=tt.float64).dtype == tt.float64
    base = tt.tensor([[1, 2, 3]])
    z = tt.zeros_like(base)
    assert z.shape == (1, 3) and z.dtype == tt.int64 and z.sum().item() == 0
    o = tt.ones_like(base, dtype=tt.float32)
    assert o.dtype == tt.float32 and o.tolist() == [[1.0, 1.0, 1.0]]


def test_arange():
    assert tt.arange(5).tolist() == [0, 1, 2, 3, 4] and tt.arange(5).dtype == tt.int64
    assert tt.arange(2, 8, 2).tolist() == [2, 4, 6]
    a = tt.arange(0, 1, 0.25)
    assert a.dtype == tt.float32
    np.testing.assert_allclose(a.numpy(), [0, 0.25, 0.5, 0.75])
    assert tt.arange(3, dtype=tt.float64).dtype == tt.float64


def test_eye():
    np.testing.assert_array_equal(tt.eye(3).numpy(), np.eye(3))
    assert tt.eye(2, 3).shape == (2, 3) and tt.eye(2).dtype == tt.float32


def test_tensor_function():
    t = tt.tensor([[1.0, 2.0]], dtype=tt.float64, requires_grad=True)
    assert isinstance(t, tt.Tensor) and t.dtype == tt.float64 and t.requires_grad and t.is_leaf
    assert tt.Tensor([1, 2]).tolist() == [1, 2]


def test_manual_seed_reproducible():
    tt.manual_seed(123)
    a, b, c = tt.rand(3, 4), tt.randn(2, 2), tt.randint(0, 10, (5,))
    tt.manual_seed(123)
    a2, b2, c2 = tt.rand(3, 4), tt.randn(2, 2), tt.randint(0, 10, (5,))
    np.testing.assert_array_equal(a.numpy(), a2.numpy())
    np.testing.assert_array_equal(b.numpy(), b2.numpy())
    np.testing.assert_array_equal(c.numpy(), c2.numpy())
    tt.manual_seed(124)
    assert not np.array_equal(tt.rand(3, 4).numpy(), a.numpy())


def test_random_distributions():
    tt.manual_seed(0)
    u = tt.rand(10000)
    assert u.dtype == tt.float32 and 0 <= u.amin().item() and u.amax().item() < 1
    n = tt.randn((100, 100))
    assert n.shape == (100, 100) and abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    assert tt.randn(3, dtype=tt.float64).dtype == tt.float64
    r = tt.randint(3, 7, (1000,))
    assert r.dtype == tt.int64 and r.amin().item() >= 3 and r.amax().item() <= 6
    assert tt.randint(5, (4,)).amax().item() < 5
    assert tt.rand(2, requires_grad=True).requires_grad


def test_cat():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(9.0).reshape(3, 3)
    out = tt.cat([tt.tensor(a), tt.tensor(b)])
    np.testing.assert_array_equal(out.numpy(), np.concatenate([a, b]))
    out = tt.cat([tt.tensor(a), tt.tensor(a.T.copy()).T], dim=-1)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([a, a], axis=1))
    assert tt.cat([tt.tensor([1]), tt.tensor([2.5])]).dtype == tt.float32


def test_cat_errors_name_shapes():
    a, b = tt.zeros(2, 3), tt.zeros(2, 4)
    with pytest.raises(ValueError) as info:
        tt.cat([a, b])
    assert "(2, 3)" in str(info.value) and "(2, 4)" in str(info.value)
    np.testing.assert_array_equal(tt.cat([a, b], dim=1).numpy(), np.zeros((2, 7)))
    with pytest.raises(ValueError):
        tt.cat([tt.tensor(1.0), tt.tensor(2.0)])
    with pytest.raises(ValueError):
        tt.cat([])


def test_stack():
    a, b = np.arange(3.0), np.arange(3.0, 6.0)
    for dim in (0, 1, -1):
        out = tt.stack([tt.tensor(a), tt.tensor(b)], dim=dim)
        np.testing.assert_array_equal(out.numpy(), np.stack([a, b], axis=dim))
    with pytest.raises(ValueError) as info:
        tt.stack([tt.zeros(3), tt.zeros(4)])
    assert "(3,)" in str(info.value) and "(4,)" in str(info.value)

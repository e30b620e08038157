"""Reductions with dim/keepdim/negative dims/tuples and numpy aliases, vs numpy."""
import numpy as np
import pytest

import tinytorch as tt

rng = np.random.default_rng(7)
ARR = rng.standard_normal((2, 3, 4)).astype(np.float32)

DIMS = [None, 0, 1, 2, -1, -3, (0, 2), (-1, 0), (0, 1, 2), [1, 2]]


@pytest.mark.parametrize("dim", DIMS, ids=repr)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name, ref", [("sum", np.sum), ("mean", np.mean), ("amax", np.max), ("amin", np.min)])
def test_reduction_matches_numpy(name, ref, dim, keepdim):
    x = tt.tensor(ARR)
    axis = tuple(dim) if isinstance(dim, list) else dim
    out = getattr(x, name)(dim, keepdim=keepdim)
    expected = ref(ARR, axis=axis, keepdims=keepdim)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert out.dtype == tt.float32


def test_numpy_aliases():
    x = tt.tensor(ARR)
    np.testing.assert_allclose(x.sum(axis=1).numpy(), ARR.sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(x.mean(axis=(0, 2), keepdims=True).numpy(),
                               ARR.mean(axis=(0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(x.amax(dim=-1, keepdims=True).numpy(), ARR.max(axis=-1, keepdims=True))
    np.testing.assert_array_equal(x.argmax(axis=2).numpy(), ARR.argmax(axis=2))
    with pytest.raises(TypeError):
        x.sum(dim=0, axis=1)


def test_dim_errors():
    x = tt.tensor(ARR)
    with pytest.raises(IndexError, match="range"):
        x.sum(3)
    with pytest.raises(IndexError):
        x.mean((0, -4))
    with pytest.raises(ValueError, match="multiple"):
        x.sum((1, -2))


def test_integer_and_bool_sums():
    i = tt.tensor([[1, 2], [3, 4]])
    assert i.sum().dtype == tt.int64 and i.sum().item() == 10
    assert i.sum(0).tolist() == [4, 6]
    b = tt.tensor([True, True, False])
    assert b.sum().item() == 2 and b.sum().dtype == tt.int64


def test_mean_of_int_raises_like_pytorch():
    i = tt.tensor([1, 2])
    with pytest.raises(RuntimeError, match="float"):
        i.mean()
    assert i.float().mean().item() == 1.5


def test_reduction_on_non_contiguous_view():
    x = tt.tensor(ARR).permute(2, 0, 1)
    np.testing.assert_allclose(x.sum(dim=(1, 2)).numpy(), ARR.transpose(2, 0, 1).sum(axis=(1, 2)), rtol=1e-5)


def test_max_min_without_dim_are_0d():
    x = tt.tensor(ARR)
    assert x.max().shape == () and x.max().item() == ARR.max()
    assert x.min().item() == ARR.min()


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_with_dim_return_values_and_indices(dim, keepdim):
    x = tt.tensor(ARR)
    values, indices = x.max(dim=dim, keepdim=keepdim)
    np.testing.assert_array_equal(values.numpy(), ARR.max(axis=dim, keepdims=keepdim))
    np.testing.assert_array_equal(indices.numpy(), np.argmax(ARR, axis=dim, keepdims=keepdim))
    assert indices.dtype == tt.int64
    res = x.min(dim, keepdim)
    np.testing.assert_array_equal(res.values.numpy(), ARR.min(axis=dim, keepdims=keepdim))
    np.testing.assert_array_equal(res.indices.numpy(), np.argmin(ARR, axis=dim, keepdims=keepdim))


def test_argmax_argmin():
    x = tt.tensor(ARR)
    assert x.argmax().item() == ARR.argmax() and x.argmax().shape == ()
    assert x.argmin().item() == ARR.argmin()
    np.testing.assert_array_equal(x.argmax(1).numpy(), ARR.argmax(1))
    np.testing.assert_array_equal(x.argmin(-1, keepdim=True).numpy(), ARR.argmin(-1, keepdims=True))
    assert x.argmax(keepdim=True).shape == (1, 1, 1)


def test_keepdim_result_broadcasts_back():
    x = tt.tensor(ARR)
    centred = x - x.mean(dim=-1, keepdim=True)
    np.testing.assert_allclose(centred.numpy(), ARR - ARR.mean(-1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(centred.sum(-1).numpy(), 0, atol=1e-5)


def test_zero_d_reduction():
    s = tt.tensor(3.0)
    assert s.sum().item() == 3.0 and s.sum().shape == ()

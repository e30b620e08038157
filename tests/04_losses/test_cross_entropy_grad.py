"""_cross_entropy_grad: the gradient of the mean cross-entropy at the logits, derived by
hand, against PyTorch's autograd and against central differences."""
import warnings

import numpy as np
import pytest

import tinytorch.nn.functional as F
from tinytorch import Tensor
from tinytorch.nn.losses import _cross_entropy_grad


def _data(n, c, seed, ignored=()):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, c)) * 3
    t = rng.integers(0, c, n)
    t[list(ignored)] = -100
    return z, t


@pytest.mark.parametrize("n, c, ignored", [(1, 2, ()), (4, 7, ()), (6, 3, (0, 4)), (5, 10, (1,))])
def test_cross_entropy_grad_equals_pytorchs_autograd(torch, n, c, ignored):
    z, t = _data(n, c, seed=n * c, ignored=ignored)
    zt = torch.tensor(z, requires_grad=True)
    torch.nn.functional.cross_entropy(zt, torch.tensor(t)).backward()
    got = _cross_entropy_grad(z, t)
    assert got.shape == z.shape and got.dtype == np.float64, f"shape {got.shape} {got.dtype}, expected {z.shape} float64"
    np.testing.assert_allclose(got, zt.grad.numpy(), rtol=1e-12, atol=1e-15,
                               err_msg=f"d(mean cross-entropy)/d(logits), N={n}, C={c}, ignored rows {ignored}")


@pytest.mark.parametrize("ignore_index", [-100, 0])
def test_cross_entropy_grad_equals_central_differences(ignore_index):
    z, t = _data(3, 4, seed=9)
    t[1] = ignore_index
    got = _cross_entropy_grad(z, t, ignore_index)
    h, want = 1e-6, np.zeros_like(z)
    for k in np.ndindex(*z.shape):
        plus, minus = z.copy(), z.copy()
        plus[k] += h
        minus[k] -= h
        want[k] = (F.cross_entropy(Tensor(plus), Tensor(t), ignore_index=ignore_index).item()
                   - F.cross_entropy(Tensor(minus), Tensor(t), ignore_index=ignore_index).item()) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8, err_msg=f"ignore_index={ignore_index}")
    assert np.all(got[t == ignore_index] == 0), "an ignored row's gradient is 0"


def test_cross_entropy_grad_at_huge_float32_logits():
    z = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, 1e4], [3.0, 1.0, 2.0]], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            got = _cross_entropy_grad(z, np.array([2, 2, -100]))
    assert got.dtype == np.float32, f"float32 logits give a float32 gradient, got {got.dtype}"
    np.testing.assert_allclose(got, [[0.5, 0.0, -0.5], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], rtol=0, atol=1e-7,
                               err_msg="confidently wrong, confidently right, ignored: each counted row weighs 1/2")


def test_cross_entropy_grad_leaves_the_logits_alone():
    z, t = _data(3, 4, seed=2)
    before = z.copy()
    _cross_entropy_grad(z, t)
    np.testing.assert_array_equal(z, before, err_msg="_cross_entropy_grad wrote into the logits it was given")

"""clip_grad_norm_ and clip_grad_value_ equal torch.nn.utils' (returned norm and clipped grads)."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.nn.utils import clip_grad_norm_, clip_grad_value_

SHAPES = [(4, 3), (3,), (), (2, 1, 5)]


def _pair(torch, dtype, seed=0, scale=1.0, shapes=SHAPES):
    rng = np.random.default_rng(seed)
    grads = [np.asarray(rng.standard_normal(s) * scale).astype(dtype) for s in shapes]
    ours, theirs = [], []
    for g in grads:
        p = tt.zeros(*g.shape, dtype=dtype, requires_grad=True)
        p.grad = tt.tensor(g.copy())
        q = torch.zeros(g.shape, dtype=getattr(torch, np.dtype(dtype).name), requires_grad=True)
        q.grad = torch.from_numpy(g.copy())
        ours.append(p)
        theirs.append(q)
    return ours, theirs


TOL = {np.float32: dict(rtol=1e-5, atol=1e-7), np.float64: dict(rtol=1e-12, atol=1e-14)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 2.0, 100.0])
def test_clip_grad_norm_equals_torch(torch, norm_type, max_norm, dtype):
    ours, theirs = _pair(torch, dtype)
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert isinstance(total, tt.Tensor) and total.shape == ()
    np.testing.assert_allclose(total.item(), expected.item(), **TOL[dtype])
    for p, q in zip(ours, theirs):
        assert p.grad.dtype == np.dtype(dtype) and p.grad.shape == tuple(q.grad.shape)
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), **TOL[dtype])


def test_direction_kept_and_norm_capped():
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal((5, 5)) * 10, rng.standard_normal(7) * 10]
    params = []
    for g in grads:
        p = tt.zeros(*g.shape, dtype=tt.float64, requires_grad=True)
        p.grad = tt.tensor(g)
        params.append(p)
    before = math.sqrt(sum((g ** 2).sum() for g in grads))
    total = clip_grad_norm_(iter(params), 1.0)  # a generator, as model.parameters() gives
    assert abs(total.item() - before) < 1e-9
    after = math.sqrt(sum((p.grad.numpy() ** 2).sum() for p in params))
    assert abs(after - 1.0) < 1e-5
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy() * before, g * after, rtol=1e-9)


def test_single_tensor_none_grads_and_no_grads(torch):
    p = tt.tensor([3.0, 4.0], requires_grad=True)
    p.grad = tt.tensor([3.0, 4.0])
    frozen = tt.zeros(3, requires_grad=True)  # grad None: skipped
    assert abs(clip_grad_norm_([p, frozen], 1.0).item() - 5.0) < 1e-6
    assert frozen.grad is None
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    q = tt.tensor([1.0, 1.0], requires_grad=True)
    q.grad = tt.tensor([-2.0, 0.0])
    assert abs(clip_grad_norm_(q, 0.5, norm_type=1).item() - 2.0) < 1e-6
    np.testing.assert_allclose(q.grad.numpy(), [-0.5, 0.0], rtol=1e-5)
    none = clip_grad_norm_([tt.zeros(2, requires_grad=True)], 1.0)
    assert isinstance(none, tt.Tensor) and none.item() == 0.0


def test_non_finite_norm(torch):
    ours, theirs = _pair(torch, np.float32, shapes=[(3,), (2,)])
    for p, q in zip(ours[:1], theirs[:1]):
        p.grad.numpy()[1] = np.inf
        q.grad[1] = float("inf")
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    total = clip_grad_norm_(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert math.isinf(total.item()) and math.isinf(expected.item())
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(np.isnan(p.grad.numpy()), np.isnan(q.grad.numpy()))
        np.testing.assert_allclose(np.nan_to_num(p.grad.numpy()), np.nan_to_num(q.grad.numpy()))


@pytest.mark.parametrize("clip_value", [0.1, 0.7, 5.0])
def test_clip_grad_value_equals_torch(torch, clip_value):
    ours, theirs = _pair(torch, np.float64, seed=3)
    assert clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_exposed_under_torch_names():
    from tinytorch.nn.utils.clip_grad import clip_grad_norm_ as from_its_file
    assert tt.nn.utils.clip_grad_norm_ is from_its_file
    p = tt.tensor([6.0, 8.0], requires_grad=True)
    p.grad = tt.tensor([6.0, 8.0])
    assert abs(tt.nn.utils.clip_grad_norm_([p], 5.0).item() - 10.0) < 1e-5
    np.testing.assert_allclose(p.grad.numpy(), [3.0, 4.0], rtol=1e-5)

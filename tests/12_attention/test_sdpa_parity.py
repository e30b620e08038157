"""scaled_dot_product_attention: outputs and gradients of q, k, v equal PyTorch's."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F


def run_both(torch, shapes, seed=0, **kwargs):
    """Run ours and PyTorch's on the same float64 data; return ((out, grads), (out, grads))."""
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(s) for s in shapes]
    ours = [tt.tensor(d, requires_grad=True) for d in data]
    theirs = [torch.tensor(d, requires_grad=True) for d in data]
    our_kwargs, their_kwargs = dict(kwargs), dict(kwargs)
    mask = kwargs.get("attn_mask")
    if mask is not None:
        our_kwargs["attn_mask"] = tt.tensor(mask)
        their_kwargs["attn_mask"] = torch.from_numpy(mask)
    out = F.scaled_dot_product_attention(*ours, **our_kwargs)
    tout = torch.nn.functional.scaled_dot_product_attention(*theirs, **their_kwargs)
    up = rng.standard_normal(tuple(tout.shape))
    out.backward(tt.tensor(up))
    tout.backward(torch.from_numpy(up))
    return (out, ours), (tout, theirs)


def assert_same(result):
    (out, ours), (tout, theirs) = result
    assert out.shape == tuple(tout.shape)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    for name, o, t in zip("qkv", ours, theirs):
        assert o.grad is not None, f"no gradient for {name}"
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=f"gradient of {name}")


SHAPES = {
    "2-d": [(5, 4), (5, 4), (5, 4)],
    "batched": [(2, 5, 4), (2, 7, 4), (2, 7, 3)],
    "batch and heads": [(2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8)],
    "broadcast batch": [(2, 3, 4, 4), (1, 3, 6, 4), (2, 1, 6, 5)],
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_no_mask(torch, name):
    assert_same(run_both(torch, SHAPES[name]))


@pytest.mark.parametrize("scale", [0.1, 1.0, 2.5])
def test_custom_scale(torch, scale):
    assert_same(run_both(torch, SHAPES["batch and heads"], seed=1, scale=scale))


@pytest.mark.parametrize("L,S", [(6, 6), (4, 7), (7, 4)])
def test_is_causal(torch, L, S):
    assert_same(run_both(torch, [(2, 2, L, 4), (2, 2, S, 4), (2, 2, S, 3)], seed=2, is_causal=True))


@pytest.mark.parametrize("mask_shape", [(5, 6), (2, 1, 5, 6), (2, 1, 1, 6), (2, 3, 5, 6)])
def test_boolean_mask(torch, mask_shape):
    mask = np.random.default_rng(3).random(mask_shape) < 0.7
    mask[..., 0] = True                                   # no fully masked rows here
    assert_same(run_both(torch, [(2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)], seed=4, attn_mask=mask))


@pytest.mark.parametrize("mask_shape", [(5, 6), (2, 3, 5, 6)])
def test_float_mask(torch, mask_shape):
    mask = np.random.default_rng(5).standard_normal(mask_shape)
    mask[..., 2] = -np.inf                                # float masks may forbid with -inf
    assert_same(run_both(torch, [(2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4)], seed=6, attn_mask=mask))


def test_fully_masked_rows_are_zero_like_torch(torch):
    mask = np.random.default_rng(7).random((5, 6)) < 0.5
    mask[:, 0] = True
    mask[1] = False                                       # query 1 may attend to nothing
    result = run_both(torch, [(2, 5, 4), (2, 6, 4), (2, 6, 4)], seed=8, attn_mask=mask)
    assert_same(result)
    (out, ours), _ = result
    np.testing.assert_array_equal(out.numpy()[:, 1], 0.0)
    np.testing.assert_array_equal(ours[0].grad.numpy()[:, 1], 0.0)
    assert all(np.all(np.isfinite(t.grad.numpy())) for t in ours)


def test_fully_masked_float_rows_are_zero_like_torch(torch):
    mask = np.zeros((4, 5))
    mask[2] = -np.inf
    assert_same(run_both(torch, [(4, 3), (5, 3), (5, 3)], seed=9, attn_mask=mask))


def test_float32_stays_float32(torch):
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(3))
    out = F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k), tt.tensor(v), is_causal=True)
    assert out.dtype == tt.float32
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_large_scores_are_stable(torch):
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((3, 4)) * 300, rng.standard_normal((5, 4)) * 300, rng.standard_normal((5, 2))
    out = F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k), tt.tensor(v))
    assert np.all(np.isfinite(out.numpy()))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def test_a_float_mask_that_requires_grad_gets_its_gradient_like_torch(torch):
    """A learned attention bias (ALiBi, relative positions) is a float mask that requires grad."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s) for s in [(2, 4, 3), (2, 5, 3), (2, 5, 3)])
    bias = rng.standard_normal((4, 5))
    ours = [tt.tensor(a, requires_grad=True) for a in (q, k, v, bias)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v, bias)]
    out = F.scaled_dot_product_attention(*ours[:3], attn_mask=ours[3])
    tout = torch.nn.functional.scaled_dot_product_attention(*theirs[:3], attn_mask=theirs[3])
    up = rng.standard_normal(tuple(tout.shape))
    out.backward(tt.tensor(up))
    tout.backward(torch.from_numpy(up))
    assert ours[3].grad is not None, "the float mask requires grad, so it must get a gradient"
    np.testing.assert_allclose(ours[3].grad.numpy(), theirs[3].grad.numpy(), rtol=1e-9, atol=1e-11,
                               err_msg="gradient of the float attn_mask")

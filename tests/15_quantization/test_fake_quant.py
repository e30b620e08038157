"""Fake quantization: forward = quantize-dequantize (torch parity), straight-through backward."""
import numpy as np
import pytest

from tinytorch import Tensor
from tinytorch.ao import quantization as Q

CASES = [(0.1, 0, -128, 127), (0.05, 10, -128, 127), (0.25, -3, -8, 7), (0.5, 1, -4, 3)]


@pytest.mark.parametrize("scale,zp,qmin,qmax", CASES)
def test_fakequantizefunction_forward_equals_quantize_dequantize(scale, zp, qmin, qmax):
    x = np.random.default_rng(0).standard_normal(500).astype(np.float32) * 4
    y = Q.fake_quantize_per_tensor_affine(Tensor(x), scale, zp, qmin, qmax)
    s = np.float32(scale)
    expected = Q._dequantize(Q._quantize(x, s, zp, qmin, qmax), s, zp)
    np.testing.assert_allclose(y.numpy(), expected, rtol=0, atol=1e-6,
                               err_msg="fake quant forward must equal dequantize(quantize(x))")
    assert y.dtype == np.float32 and y.shape == x.shape, "same shape and dtype as the input"


def _forward_and_backward(torch, scale, zp, qmin, qmax):
    """(tinytorch's and torch's fake-quantized outputs, then their gradients), range ends included."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 60)) * 5).astype(np.float32)
    x[0, :4] = np.array([qmin - zp, qmax - zp, qmin - zp - 1, qmax - zp + 1], dtype=np.float32) * scale  # range ends
    g = rng.standard_normal(x.shape).astype(np.float32)
    xo = Tensor(x, requires_grad=True)
    yo = Q.fake_quantize_per_tensor_affine(xo, scale, zp, qmin, qmax)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.fake_quantize_per_tensor_affine(xt, scale, zp, qmin, qmax)
    outputs = (yo.numpy(), yt.detach().numpy())
    yo.backward(Tensor(g))
    yt.backward(torch.tensor(g))
    return outputs, (xo.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("scale,zp,qmin,qmax", CASES)
def test_fakequantizefunction_forward_matches_torch(torch, scale, zp, qmin, qmax):
    (mine, theirs), _ = _forward_and_backward(torch, scale, zp, qmin, qmax)
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-6, err_msg="forward equals torch.fake_quantize_per_tensor_affine")


@pytest.mark.parametrize("scale,zp,qmin,qmax", CASES)
def test_fakequantizefunction_forward_and_backward_gradient_matches_torch(torch, scale, zp, qmin, qmax):
    """The gradient's mask may be decided in forward (saved) or in backward: the test names both."""
    _, (mine, theirs) = _forward_and_backward(torch, scale, zp, qmin, qmax)
    np.testing.assert_array_equal(mine, theirs, err_msg="straight-through gradient equals torch's (range ends included)")


# (x, scale, PyTorch's integer): x times the float32 reciprocal of the scale, as PyTorch computes it, and a
# true division x / scale round to different integers (test_quantize.py checks these against torch)
RECIPROCAL_CASES = [(2.25, 0.3, 8), (-4.5, 0.6, -8), (11.25, 0.9, 13), (4.125, 0.15, 28), (1.09, 0.02, 54),
                    (-66.15, 0.7, -95), (1.0595, 0.013, 81), (-2.45, 0.02, -122)]


def test_fakequantizefunction_forward_scales_by_float32_reciprocal():
    x = np.array([c[0] for c in RECIPROCAL_CASES], dtype=np.float32)
    s = np.array([c[1] for c in RECIPROCAL_CASES], dtype=np.float32)
    q = np.array([c[2] for c in RECIPROCAL_CASES], dtype=np.float32)
    assert np.all(np.round(x / s) != q), "each case must separate division from the reciprocal rule"
    y = Q.fake_quantize_per_channel_affine(Tensor(x), s, np.zeros(len(x), np.int64), 0)
    np.testing.assert_array_equal(y.numpy(), q * s, err_msg="per channel: the grid points of PyTorch's integers "
                                                            "(x times the float32 reciprocal of s, not x / s)")
    for xi, si, qi in RECIPROCAL_CASES:
        got = Q.fake_quantize_per_tensor_affine(Tensor(np.array([xi], np.float32)), float(np.float32(si)), 0)
        expected = np.float32(qi) * np.float32(si)
        assert got.numpy()[0] == expected, (f"fake_quantize({xi}, scale {si}): got {got.numpy()[0]} "
                                            f"(integer {got.numpy()[0] / np.float32(si):.0f}), PyTorch's integer is "
                                            f"{qi}: {expected}")


# (x, scale): at the top and at the bottom of the int8 range, x times the float32 reciprocal
# of the scale and a true division x / scale round to integers on either side of the range
MASK_EDGE_CASES = [(116.48757, 0.91362804), (-78.458176, 0.6105694)]


def test_fakequantizefunction_forward_and_backward_mask_by_the_reciprocal_integer_like_torch(torch):
    x = np.array([c[0] for c in MASK_EDGE_CASES], dtype=np.float32)
    for xi, si in zip(x, [c[1] for c in MASK_EDGE_CASES]):
        s = np.float32(si)
        assert np.round(xi * (np.float32(1) / s)) != np.round(xi / s), "each case separates the two integers"
        xo = Tensor(np.array([xi]), requires_grad=True)
        Q.fake_quantize_per_tensor_affine(xo, float(s), 0).backward(Tensor(np.ones(1, np.float32)))
        xt = torch.tensor([xi], requires_grad=True)
        torch.fake_quantize_per_tensor_affine(xt, float(s), 0, -128, 127).backward(torch.ones(1))
        np.testing.assert_array_equal(xo.grad.numpy(), xt.grad.numpy(), err_msg=(
            f"the gradient at x = {xi}, scale {s}: inside or outside the range is decided by the same integer "
            f"as the forward's (x times the float32 reciprocal of the scale), as in PyTorch"))


def test_fakequantizefunction_backward_straight_through_inside_zero_outside():
    x = np.linspace(-3, 3, 121, dtype=np.float32)
    xo = Tensor(x, requires_grad=True)
    Q.fake_quantize_per_tensor_affine(xo, 0.2, 0, -8, 7).backward(Tensor(np.full(121, 2.5, np.float32)))
    q = np.round(x / np.float32(0.2))
    inside = (q >= -8) & (q <= 7)
    assert inside.any() and (~inside).any(), "the test needs both kinds of element"
    np.testing.assert_array_equal(xo.grad.numpy()[inside], np.full(inside.sum(), 2.5, np.float32),
                                  err_msg="inside the range the upstream gradient passes unchanged")
    np.testing.assert_array_equal(xo.grad.numpy()[~inside], np.zeros((~inside).sum(), np.float32),
                                  err_msg="outside the range (clamped) the gradient is 0")


@pytest.mark.parametrize("axis", [0, 1])
def test_fakequantizefunction_per_channel_matches_torch(torch, axis):
    rng = np.random.default_rng(4 + axis)
    x = (rng.standard_normal((5, 7)) * 3).astype(np.float32)
    C = x.shape[axis]
    scale = rng.uniform(0.05, 0.3, C).astype(np.float32)
    zp = rng.integers(-3, 3, C).astype(np.int64)
    g = rng.standard_normal(x.shape).astype(np.float32)
    xo = Tensor(x, requires_grad=True)
    yo = Q.fake_quantize_per_channel_affine(xo, scale, zp, axis, -8, 7)
    yo.backward(Tensor(g))
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.fake_quantize_per_channel_affine(xt, torch.tensor(scale), torch.tensor(zp, dtype=torch.int32), axis, -8, 7)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=0, atol=1e-6,
                               err_msg=f"per-channel fake quant along axis {axis} equals torch's")
    np.testing.assert_array_equal(xo.grad.numpy(), xt.grad.numpy(), err_msg="per-channel gradient mask equals torch's")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("per_channel", [False, True])
def test_fakequantizefunction_forward_keeps_the_input_dtype(dtype, per_channel):
    # as torch.fake_quantize_per_{tensor,channel}_affine: float32 in, float32 out; float64 in, float64 out
    x = (np.random.default_rng(7).standard_normal((4, 6)) * 2).astype(dtype)
    xo = Tensor(x, requires_grad=True)
    if per_channel:
        y = Q.fake_quantize_per_channel_affine(xo, np.array([0.1, 0.2, 0.3, 0.4]), np.array([1, 0, -1, 3]), 0, -8, 7)
        scale, zp = np.array([0.1, 0.2, 0.3, 0.4], np.float32)[:, None], np.array([1, 0, -1, 3])[:, None]
    else:
        y = Q.fake_quantize_per_tensor_affine(xo, 0.25, 3, -8, 7)
        scale, zp = np.float32(0.25), 3
    kind = "per channel" if per_channel else "per tensor"
    assert y.dtype == np.dtype(dtype), f"fake quant {kind} of a {np.dtype(dtype)} input returned {y.dtype}"
    assert y.shape == x.shape, f"fake quant {kind}: shape {y.shape}, expected {x.shape}"
    expected = Q._dequantize(Q._quantize(x, scale, zp, -8, 7), scale, zp)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6, atol=0,
                               err_msg=f"fake quant {kind} values: the grid points of the quantized integers")
    y.backward(Tensor(np.ones(x.shape, dtype=dtype)))
    assert xo.grad.dtype == np.dtype(dtype), f"gradient {kind} of a {np.dtype(dtype)} input has dtype {xo.grad.dtype}"


def test_fakequantizefunction_backward_reaches_weights_in_qat():
    import tinytorch as tt
    from tinytorch import nn

    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3))
    qat = Q.prepare_qat(model)
    loss = (qat(tt.randn(5, 4)) ** 2).sum()
    loss.backward()
    grad = qat[0].linear.weight.grad
    assert grad is not None and np.abs(grad.numpy()).sum() > 0, "QAT weights receive a gradient through fake quant"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fakequantizefunction_forward_saves_at_most_a_byte_per_element(dtype):
    """The backward needs to know one fact per element; saving x keeps 4 or 8 bytes each alive
    until backward has run."""
    x = Tensor(np.linspace(-3, 3, 1000).astype(dtype), requires_grad=True)
    y = Q.fake_quantize_per_tensor_affine(x, 0.5, 1, -4, 3)
    ctx = y.grad_fn.attrs["ctx"]
    kept = list(ctx.saved_tensors) + [v for k, v in vars(ctx).items() if k != "_saved"]  # saved, or set on ctx
    held = sum(np.asarray(t.numpy() if isinstance(t, Tensor) else t).nbytes for t in kept
               if isinstance(t, (Tensor, np.ndarray)))
    y.sum().backward()  # what was saved is what backward runs on
    assert held <= 1000, (f"forward kept {held} bytes on ctx (saved tensors and attributes) for backward on 1000 "
                          f"{np.dtype(dtype).name} elements")


def test_disable_observer_freezes_a_fakequantize_range_and_enable_observer_thaws_it():
    fq = Q.FakeQuantize().train()
    fq(Tensor(np.array([-1.0, 1.0], dtype=np.float32)))
    scale_before = float(np.asarray(fq.calculate_qparams()[0]))
    fq.apply(Q.disable_observer)
    out = fq(Tensor(np.array([-8.0, 8.0], dtype=np.float32)))
    assert float(np.asarray(fq.calculate_qparams()[0])) == scale_before, "a frozen observer does not widen its range"
    assert np.abs(out.numpy()).max() <= 1.01, "values beyond the frozen range saturate at its ends"
    fq.apply(Q.enable_observer)
    fq(Tensor(np.array([-8.0, 8.0], dtype=np.float32)))
    assert float(np.asarray(fq.calculate_qparams()[0])) > scale_before, "observing again widens the range"

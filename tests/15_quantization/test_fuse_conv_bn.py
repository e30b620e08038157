"""fuse_conv_bn_eval: a convolution and the eval-mode batch norm after it, folded into one convolution."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.ao.quantization import fuse_conv_bn_eval


def _pair(bias=True, affine=True, stride=1, padding=1, dtype=None, seed=0, tiny_var=False, in_channels=3):
    tt.manual_seed(seed)
    conv = nn.Conv2d(in_channels, 4, 3, stride=stride, padding=padding, bias=bias, dtype=dtype)
    bn = nn.BatchNorm2d(4, affine=affine, dtype=dtype)
    with tt.no_grad():
        for _ in range(10):
            bn(conv(tt.randn(2, in_channels, 8, 8, dtype=dtype) * 2 - 1))
        if affine:
            bn.weight.copy_(tt.rand(4, dtype=dtype) * 3 - 1)  # negative scales too
            bn.bias.copy_(tt.randn(4, dtype=dtype))
        if tiny_var:  # where eps is a large part of the denominator
            bn.running_var.copy_(tt.tensor([1e-5, 1e-6, 2.0, 1e-5], dtype=dtype))
    return conv.eval(), bn.eval()


def test_the_inputs_are_left_as_they_were():
    conv, bn = _pair()
    before = {k: v.numpy().copy() for k, v in {**conv.state_dict(), **{f"bn.{k}": v for k, v in bn.state_dict().items()}}.items()}
    fused = fuse_conv_bn_eval(conv, bn)
    after = {k: v.numpy() for k, v in {**conv.state_dict(), **{f"bn.{k}": v for k, v in bn.state_dict().items()}}.items()}
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    assert fused.weight is not conv.weight
    assert not conv.training and not bn.training


@pytest.mark.parametrize("bias", [True, False], ids=["conv-bias", "no-conv-bias"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no-affine"])
@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 0)])
def test_fused_conv_equals_bn_after_conv(bias, affine, stride, padding):
    conv, bn = _pair(bias, affine, stride, padding)
    x = tt.randn(2, 3, 9, 9)
    with tt.no_grad():
        want = bn(conv(x)).numpy()
        fused = fuse_conv_bn_eval(conv, bn)
        got = fused(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert isinstance(fused, nn.Conv2d), f"fuse_conv_bn_eval returns a Conv2d, got {type(fused).__name__}"
    assert fused.bias is not None, "the fused conv has a bias (BatchNorm's shift lands there), got bias=None"
    assert not fused.training, "the fused conv is returned in eval mode (.training False), as the contract says"
    assert (fused.stride, fused.padding, fused.kernel_size) == (conv.stride, conv.padding, conv.kernel_size)


def test_each_output_channel_is_scaled_when_in_equals_out():
    """With as many input as output channels, scaling the wrong axis of the weight broadcasts."""
    conv, bn = _pair(in_channels=4)
    x = tt.randn(2, 4, 7, 7)
    with tt.no_grad():
        np.testing.assert_allclose(fuse_conv_bn_eval(conv, bn)(x).numpy(), bn(conv(x)).numpy(), rtol=1e-4, atol=1e-5)


def test_eps_is_part_of_the_denominator():
    conv, bn = _pair(dtype=tt.float64, tiny_var=True)
    x = tt.randn(1, 3, 6, 6, dtype=tt.float64)
    with tt.no_grad():
        np.testing.assert_allclose(fuse_conv_bn_eval(conv, bn)(x).numpy(), bn(conv(x)).numpy(), rtol=1e-9, atol=1e-9)


def test_float64_layers_fuse_to_a_float64_conv_exactly_enough():
    conv, bn = _pair(dtype=tt.float64)
    x = tt.randn(2, 3, 5, 5, dtype=tt.float64)
    with tt.no_grad():
        fused = fuse_conv_bn_eval(conv, bn)
        np.testing.assert_allclose(fused(x).numpy(), bn(conv(x)).numpy(), rtol=1e-10, atol=1e-12)
    assert fused.weight.dtype == tt.float64


@pytest.mark.parametrize("which", ["conv", "bn"])
def test_training_mode_is_refused(which):
    conv, bn = _pair()
    (conv if which == "conv" else bn).train()
    with pytest.raises(ValueError, match="eval"):
        fuse_conv_bn_eval(conv, bn)


def test_no_running_statistics_or_wrong_channels_are_refused():
    conv, _ = _pair()
    with pytest.raises(ValueError, match="running"):
        fuse_conv_bn_eval(conv, nn.BatchNorm2d(4, track_running_stats=False).eval())
    with pytest.raises(ValueError, match="channels"):
        fuse_conv_bn_eval(conv, nn.BatchNorm2d(5).eval())


def test_a_grouped_dilated_conv_keeps_its_geometry():
    tt.manual_seed(4)
    conv, bn = nn.Conv2d(4, 6, 3, padding="same", dilation=2, groups=2).eval(), nn.BatchNorm2d(6)
    with tt.no_grad():
        for _ in range(5):
            bn(conv(tt.randn(2, 4, 9, 9)))
    bn.eval()
    x = tt.randn(2, 4, 9, 9)
    with tt.no_grad():
        want = bn(conv(x)).numpy()
        fused = fuse_conv_bn_eval(conv, bn)
        got = fused(x).numpy()
    assert (fused.dilation, fused.groups, fused.padding) == ((2, 2), 2, "same"), \
        f"the fused conv keeps dilation, groups and padding: got {fused}"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

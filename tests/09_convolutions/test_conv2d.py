"""conv2d and Conv2d: outputs and input/weight/bias gradients equal torch.nn.functional.conv2d
over a grid of kernel sizes, strides, paddings, channel counts, batch sizes and non-square
inputs; gradcheck in float64; PyTorch's initialisation; clear errors."""
import math

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck
from tinytorch.nn import Conv2d

TOL = {np.float64: dict(rtol=1e-10, atol=1e-11), np.float32: dict(rtol=2e-4, atol=2e-5)}
# (N, C_in, C_out, H, W): batch sizes 1-3, channels 1-5, square and non-square images
SHAPES = [(2, 3, 4, 7, 6), (1, 1, 2, 5, 9), (3, 2, 5, 8, 8), (2, 5, 1, 6, 7)]
GRID = [(k, s, p) for k in (1, 2, 3, 5) for s in (1, 2) for p in (0, 1, 2)]


def rand(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def run_both(torch, x, w, b, stride, padding, seed=1):
    """Forward and backward in both frameworks; returns (ours, theirs) lists [y, gx, gw, gb]."""
    xo, wo = tt.tensor(x, requires_grad=True), tt.tensor(w, requires_grad=True)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    bo = None if b is None else tt.tensor(b, requires_grad=True)
    bt = None if b is None else torch.tensor(b, requires_grad=True)
    yo = F.conv2d(xo, wo, bo, stride=stride, padding=padding)
    yt = torch.nn.functional.conv2d(xt, wt, bt, stride=stride, padding=padding)
    g = rand(tuple(yt.shape), x.dtype, seed)
    (yo * tt.tensor(g)).sum().backward()
    yt.backward(torch.from_numpy(g))
    ours = [yo.numpy(), xo.grad.numpy(), wo.grad.numpy()] + ([] if b is None else [bo.grad.numpy()])
    theirs = [yt.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()] + ([] if b is None else [bt.grad.numpy()])
    return ours, theirs


@pytest.mark.parametrize("k, s, p", GRID)
@pytest.mark.parametrize("shape_id", range(len(SHAPES)))
def test_conv2d_and_grads_equal_pytorch(torch, k, s, p, shape_id):
    N, Ci, Co, H, W = SHAPES[shape_id]
    if k > min(H, W) + 2 * p:
        return
    seed = 10 * k + 3 * s + p + 100 * shape_id
    x, w, b = rand((N, Ci, H, W), seed=seed), rand((Co, Ci, k, k), seed=seed + 1), rand(Co, seed=seed + 2)
    ours, theirs = run_both(torch, x, w, b, s, p)
    assert ours[0].shape == theirs[0].shape
    for name, o, t in zip(["output", "input grad", "weight grad", "bias grad"], ours, theirs):
        np.testing.assert_allclose(o, t, err_msg=name, **TOL[np.float64])


@pytest.mark.parametrize("k, s, p", [((3, 2), (2, 1), (1, 0)), ((1, 4), (1, 3), (0, 2)), ((2, 3), 2, (1, 1))])
def test_conv2d_pairs_without_bias(torch, k, s, p):
    x, w = rand((2, 3, 7, 9), seed=5), rand((4, 3) + (k if isinstance(k, tuple) else (k, k)), seed=6)
    ours, theirs = run_both(torch, x, w, None, s, p)
    assert len(ours) == 3
    for name, o, t in zip(["output", "input grad", "weight grad"], ours, theirs):
        np.testing.assert_allclose(o, t, err_msg=name, **TOL[np.float64])


@pytest.mark.parametrize("k, s, p", [(3, 1, 1), (2, 2, 0), ((3, 2), (2, 1), (1, 0))])
def test_conv2d_forward_equals_pytorch(torch, k, s, p):
    """The forward alone (no backward runs): a wrong backward leaves these passing."""
    kk = k if isinstance(k, tuple) else (k, k)
    x, w, b = rand((2, 3, 7, 6), seed=21), rand((4, 3) + kk, seed=22), rand(4, seed=23)
    ours = F.conv2d(tt.tensor(x), tt.tensor(w), tt.tensor(b), stride=s, padding=p).numpy()
    theirs = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                        stride=s, padding=p).numpy()
    np.testing.assert_allclose(ours, theirs, err_msg=f"conv2d forward, kernel {k}, stride {s}, padding {p}",
                               **TOL[np.float64])


def test_conv2d_float32(torch):
    x, w, b = rand((4, 3, 8, 8), np.float32, 7), rand((6, 3, 3, 3), np.float32, 8), rand(6, np.float32, 9)
    ours, theirs = run_both(torch, x, w, b, 1, 1)
    assert all(o.dtype == np.float32 for o in ours)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, **TOL[np.float32])


def test_conv2d_records_one_op():
    x = tt.randn(1, 2, 5, 5)
    w = tt.randn(3, 2, 3, 3, requires_grad=True)
    y = F.conv2d(x, w, stride=2, padding=1)
    assert y.shape == (1, 3, 3, 3)
    assert y.grad_fn.op == "conv2d" and y.grad_fn.attrs["stride"] == (2, 2) and y.grad_fn.attrs["padding"] == (1, 1)
    y.sum().backward()
    assert w.grad.shape == w.shape and x.grad is None


@pytest.mark.parametrize("k, s, p, bias", [(3, 1, 1, True), (2, 2, 0, True), (5, 1, 2, False),
                                           ((3, 1), (1, 2), (0, 1), True), (1, 2, 1, True)])
def test_conv2d_backward_gradcheck(k, s, p, bias):
    kk = k if isinstance(k, tuple) else (k, k)
    x = tt.tensor(rand((2, 2, 5, 6), seed=11), requires_grad=True)
    w = tt.tensor(rand((3, 2) + kk, seed=12), requires_grad=True)
    inputs = [x, w]
    if bias:
        inputs.append(tt.tensor(rand(3, seed=13), requires_grad=True))
    assert gradcheck(lambda *a: F.conv2d(*a, stride=s, padding=p), inputs)


def test_conv2d_init_shapes_and_attributes():
    conv = Conv2d(4, 6, (3, 2), stride=2, padding=1)
    assert conv.weight.shape == (6, 4, 3, 2) and conv.bias.shape == (6,)
    assert conv.weight.requires_grad and conv.bias.requires_grad
    assert [n for n, _ in conv.named_parameters()] == ["weight", "bias"]
    assert conv.kernel_size == (3, 2) and conv.stride == (2, 2) and conv.padding == (1, 1)


def test_conv2d_reset_parameters_like_pytorch():
    tt.manual_seed(0)
    conv = Conv2d(4, 6, (3, 2), stride=2, padding=1)
    bound = 1 / math.sqrt(4 * 3 * 2)  # kaiming_uniform_(a=sqrt(5)) = U(±1/sqrt(fan_in))
    w = conv.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.7 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.25 * bound
    assert np.abs(conv.bias.numpy()).max() <= bound and np.ptp(conv.bias.numpy()) > 0
    no_bias = Conv2d(2, 3, 3, bias=False)
    assert no_bias.bias is None and len(list(no_bias.parameters())) == 1
    assert Conv2d(2, 3, 3, dtype=tt.float64).weight.dtype == np.float64


LAYERS = {"stride-2-pad-1": ((3, 5, 3), dict(stride=2, padding=1), (2, 3, 9, 8)),
          "same-dilation-2-groups-3": ((6, 9, 3), dict(padding="same", dilation=2, groups=3), (2, 6, 7, 8))}


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("layer", list(LAYERS))
def test_conv2d_layer_equals_torch_layer(torch, layer):
    args, kwargs, x_shape = LAYERS[layer]
    tt.manual_seed(1)
    ours, theirs = Conv2d(*args, **kwargs), torch.nn.Conv2d(*args, **kwargs)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.numpy()))
        theirs.bias.copy_(torch.from_numpy(ours.bias.numpy()))
    x = rand(x_shape, np.float32, 3)
    yo, yt = ours(tt.tensor(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), err_msg=f"Conv2d{args} {kwargs}", **TOL[np.float32])
    yo.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), **TOL[np.float32])
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), **TOL[np.float32])


def test_conv2d_errors_name_shapes(torch):
    x, w = tt.randn(2, 3, 8, 8), tt.randn(4, 3, 3, 3)
    with pytest.raises(ValueError, match=r"\(2, 3, 8, 8\).*\(4, 2, 3, 3\)"):
        F.conv2d(x, tt.randn(4, 2, 3, 3))
    with pytest.raises(ValueError, match=r"4-D.*\(3, 8, 8\)"):
        F.conv2d(tt.randn(3, 8, 8), w)
    with pytest.raises(ValueError, match="larger"):
        F.conv2d(tt.randn(1, 3, 2, 2), w, padding=0)
    with pytest.raises(ValueError, match="stride"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="stride"):
        F.conv2d(x, w, stride=(1, -1))
    with pytest.raises(ValueError, match=r"Conv2d"):
        Conv2d(3, 4, 3, stride=0)
    with pytest.raises(ValueError, match=r"\(2, 3, 8, 8\)"):
        Conv2d(2, 4, 3)(x)
    # and a valid call still works: the same shapes with the right channels
    y = F.conv2d(x, w, padding=1)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.numpy()), torch.from_numpy(w.numpy()), padding=1)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), **TOL[np.float32])


# PyTorch's geometry beyond stride and padding: dilation, groups (depthwise included) and the
# string paddings, provided around the student's op; the layer must pass them on.
GEOMETRY = [dict(dilation=2, padding=2), dict(dilation=(2, 3), padding=(1, 3), stride=(2, 1)),
            dict(groups=2, padding=1), dict(groups=4, stride=2), dict(groups=2, dilation=2, padding="same"),
            dict(padding="same"), dict(padding="same", dilation=(1, 2)), dict(padding="valid", stride=2)]


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # PyTorch's note on even kernels
@pytest.mark.parametrize("k", [3, (2, 3)])
@pytest.mark.parametrize("case", range(len(GEOMETRY)))
def test_conv2d_dilation_groups_and_string_padding_equal_pytorch(torch, k, case):
    kw = GEOMETRY[case]
    kk = k if isinstance(k, tuple) else (k, k)
    groups = kw.get("groups", 1)
    x, w, b = rand((2, 4, 9, 8), seed=20 + case), rand((4, 4 // groups) + kk, seed=30 + case), rand(4, seed=40 + case)
    xo, wo, bo = (tt.tensor(a, requires_grad=True) for a in (x, w, b))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yo, yt = F.conv2d(xo, wo, bo, **kw), torch.nn.functional.conv2d(xt, wt, bt, **kw)
    assert yo.shape == tuple(yt.shape), f"{kw}: shape {yo.shape}, PyTorch {tuple(yt.shape)}"
    g = rand(yo.shape, seed=50 + case)
    (yo * tt.tensor(g)).sum().backward()
    yt.backward(torch.from_numpy(g))
    for name, o, t in zip(["output", "input grad", "weight grad", "bias grad"],
                          [yo, xo.grad, wo.grad, bo.grad], [yt.detach(), xt.grad, wt.grad, bt.grad]):
        np.testing.assert_allclose(o.numpy(), t.numpy(), err_msg=f"{kw}: {name}", **TOL[np.float64])


def test_conv2d_layer_with_groups_and_dilation_keeps_its_geometry():
    tt.manual_seed(3)
    ours = Conv2d(6, 9, 3, padding="same", dilation=2, groups=3)
    assert ours.weight.shape == (9, 2, 3, 3), f"weight (out, in / groups, kh, kw), got {ours.weight.shape}"
    bound = 1 / math.sqrt(2 * 3 * 3)  # the fan-in: one output reads in / groups channels
    assert 0.7 * bound < np.abs(ours.weight.numpy()).max() <= bound, "weights uniform in ±1/√((in / groups)·kh·kw)"
    assert (ours.dilation, ours.groups, ours.padding) == ((2, 2), 3, "same")
    assert "dilation=(2, 2)" in repr(ours) and "groups=3" in repr(ours)


def test_conv2d_geometry_errors_are_specific():
    x = tt.randn(1, 4, 8, 8)
    with pytest.raises(ValueError, match=r"groups=3"):
        F.conv2d(x, tt.randn(6, 2, 3, 3), groups=3)
    with pytest.raises(ValueError, match=r"per group.*groups=2"):
        F.conv2d(x, tt.randn(4, 4, 3, 3), groups=2)
    with pytest.raises(ValueError, match="same.*strided"):
        F.conv2d(x, tt.randn(4, 4, 3, 3), padding="same", stride=2)
    with pytest.raises(ValueError, match="'full'"):
        F.conv2d(x, tt.randn(4, 4, 3, 3), padding="full")
    with pytest.raises(ValueError, match="dilation"):
        F.conv2d(x, tt.randn(4, 4, 3, 3), dilation=0)
    with pytest.raises(ValueError, match="larger"):
        F.conv2d(x, tt.randn(4, 4, 3, 3), dilation=4)   # spans 9 > 8
    with pytest.raises(ValueError, match=r"groups=3.*in_channels \(4\)"):
        Conv2d(4, 6, 3, groups=3)
    with pytest.raises(ValueError, match="'full'"):
        Conv2d(4, 4, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode='reflect'"):
        Conv2d(4, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="same"):
        Conv2d(4, 4, 3, padding="same", stride=2)

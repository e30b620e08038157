"""conv_transpose2d and ConvTranspose2d (provided on the student's im2col and col2im):
outputs and input/weight/bias gradients equal torch.nn.functional.conv_transpose2d over
strides, paddings, output paddings, groups and dilations; it is the transpose of conv2d;
gradcheck in float64; PyTorch's initialisation; clear errors."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck
from tinytorch.nn import ConvTranspose2d

TOL = dict(rtol=1e-10, atol=1e-11)
# (N, C_in, C_out, H, W, kernel, stride, padding, output_padding, groups, dilation)
CASES = [
    (2, 3, 2, 4, 5, (3, 3), 2, 1, (1, 0), 1, 1),
    (1, 4, 6, 3, 3, (2, 3), (2, 1), (0, 1), 0, 2, 1),
    (2, 2, 3, 5, 4, (3, 2), 1, 0, 0, 1, 2),
    (1, 2, 2, 3, 3, (3, 3), 3, 2, (2, 1), 1, 1),
    (1, 2, 2, 2, 2, (3, 3), 1, 0, (1, 1), 1, (2, 2)),  # output_padding below the dilation, not the stride
    (3, 1, 1, 3, 3, (1, 1), 2, 0, 1, 1, 1),
    (1, 5, 4, 6, 2, (4, 2), (1, 2), (2, 0), (0, 1), 1, 1),
]


def rand(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _weights(case, seed):
    N, Ci, Co, H, W, k, s, p, op, g, d = case
    return rand((N, Ci, H, W), seed), rand((Ci, Co // g) + k, seed + 1), rand(Co, seed + 2)


@pytest.mark.parametrize("case_id", range(len(CASES)))
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose2d_and_grads_equal_pytorch(torch, case_id, bias):
    case = CASES[case_id]
    s, p, op, g, d = case[6:]
    x, w, b = _weights(case, 10 * case_id)
    xo, wo, bo = (tt.tensor(a, requires_grad=True) for a in (x, w, b))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yo = F.conv_transpose2d(xo, wo, bo if bias else None, s, p, op, g, d)
    yt = torch.nn.functional.conv_transpose2d(xt, wt, bt if bias else None, s, p, op, g, d)
    assert yo.shape == tuple(yt.shape), f"output shape of case {case}"
    grad = rand(yo.shape, 10 * case_id + 3)
    (yo * tt.tensor(grad)).sum().backward()
    yt.backward(torch.from_numpy(grad))
    pairs = [("output", yo.numpy(), yt.detach().numpy()), ("input grad", xo.grad.numpy(), xt.grad.numpy()),
             ("weight grad", wo.grad.numpy(), wt.grad.numpy())]
    if bias:
        pairs.append(("bias grad", bo.grad.numpy(), bt.grad.numpy()))
    for name, ours, theirs in pairs:
        np.testing.assert_allclose(ours, theirs, err_msg=f"{name}, case {case}", **TOL)


def test_conv_transpose2d_float32_stays_float32(torch):
    x, w = rand((2, 3, 5, 5), 1, np.float32), rand((3, 4, 3, 3), 2, np.float32)
    ours = F.conv_transpose2d(tt.tensor(x), tt.tensor(w), stride=2, padding=1)
    theirs = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride, padding, output_padding", [(1, 0, 0), (2, 1, 1), ((2, 3), (1, 0), (0, 2))])
def test_conv_transpose2d_is_the_transpose_of_conv2d(stride, padding, output_padding):
    """<conv2d(x), y> = <x, conv_transpose2d(y)> for the same weight and geometry."""
    w = rand((4, 3, 3, 2), 7)
    y = rand((2, 4, 3, 4), 8)
    up = F.conv_transpose2d(tt.tensor(y), tt.tensor(w), stride=stride, padding=padding,
                            output_padding=output_padding)
    x = rand(up.shape[:1] + (3,) + up.shape[2:], 9)
    down = F.conv2d(tt.tensor(x), tt.tensor(w), stride=stride, padding=padding)
    assert down.shape == y.shape, "conv2d maps the transposed conv's output size back to its input size"
    np.testing.assert_allclose((x * up.numpy()).sum(), (down.numpy() * y).sum(), rtol=1e-12)


@pytest.mark.parametrize("case_id", [0, 1, 4])
def test_conv_transpose2d_gradcheck(case_id):
    case = CASES[case_id]
    s, p, op, g, d = case[6:]
    inputs = [tt.tensor(a, requires_grad=True) for a in _weights(case, case_id)]
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, s, p, op, g, d), inputs)


def test_conv_transpose2d_records_one_op():
    y = F.conv_transpose2d(tt.tensor(rand((1, 2, 3, 3), 0), requires_grad=True), tt.tensor(rand((2, 1, 3, 3), 1)),
                           stride=2, padding=1, output_padding=1)
    assert y.grad_fn.op == "conv_transpose2d" and y.shape == (1, 1, 6, 6)


def test_conv_transpose2d_layer_equals_torch_layer(torch):
    ours = ConvTranspose2d(4, 6, (3, 2), stride=2, padding=(1, 0), output_padding=(1, 0), groups=2,
                           dtype=tt.float64)
    theirs = torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=(1, 0), output_padding=(1, 0), groups=2,
                                      dtype=torch.float64)
    assert ours.weight.shape == tuple(theirs.weight.shape) == (4, 3, 3, 2)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.numpy()))
        theirs.bias.copy_(torch.from_numpy(ours.bias.numpy()))
    x = rand((2, 4, 5, 3), 4)
    np.testing.assert_allclose(ours(tt.tensor(x)).numpy(), theirs(torch.from_numpy(x)).detach().numpy(), **TOL)
    assert str(ours) == ("ConvTranspose2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 0), "
                         "output_padding=(1, 0), groups=2)")


def test_conv_transpose2d_output_size_picks_the_output_padding(torch):
    layer = ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=tt.float64)
    x = rand((1, 2, 4, 4), 5)
    assert layer(tt.tensor(x)).shape == (1, 3, 7, 7)
    assert layer(tt.tensor(x), output_size=(8, 7)).shape == (1, 3, 8, 7)
    assert layer(tt.tensor(x), output_size=[1, 3, 7, 8]).shape == (1, 3, 7, 8)
    with pytest.raises(ValueError, match=r"output_size \(9, 7\).*height can be 7 to 8"):
        layer(tt.tensor(x), output_size=(9, 7))


def test_conv_transpose2d_initialisation_follows_pytorch():
    """PyTorch's fan-in for this layout is weight.shape[1]·kh·kw = (out / groups)·kh·kw."""
    tt.manual_seed(0)
    layer = ConvTranspose2d(8, 2, 3)
    bound = 1 / np.sqrt(2 * 3 * 3)
    assert layer.weight.shape == (8, 2, 3, 3) and layer.bias.shape == (2,)
    assert 0.8 * bound < np.abs(layer.weight.numpy()).max() <= bound
    assert np.abs(layer.bias.numpy()).max() <= bound
    assert ConvTranspose2d(2, 4, 3, bias=False).bias is None


def test_conv_transpose2d_errors_name_the_problem():
    x = tt.tensor(rand((1, 3, 4, 4), 0))
    assert F.conv_transpose2d(x, tt.tensor(rand((3, 1, 3, 3), 1)), stride=2, output_padding=1).shape == (1, 1, 10, 10)
    with pytest.raises(tt.ShapeError, match=r"3 channels.*C_in = 2"):
        F.conv_transpose2d(x, tt.tensor(rand((2, 1, 3, 3), 1)))
    with pytest.raises(ValueError, match=r"output_padding \(2, 2\) must be smaller than the stride"):
        F.conv_transpose2d(x, tt.tensor(rand((3, 1, 3, 3), 1)), stride=2, output_padding=2)
    with pytest.raises(tt.ShapeError, match=r"bias must have shape \(1,\)"):
        F.conv_transpose2d(x, tt.tensor(rand((3, 1, 3, 3), 1)), tt.tensor(rand(3, 2)))
    with pytest.raises(tt.ShapeError, match="too small"):
        F.conv_transpose2d(tt.tensor(rand((1, 3, 1, 1), 0)), tt.tensor(rand((3, 1, 1, 1), 1)), padding=1)
    with pytest.raises(ValueError, match="groups=2 must divide"):
        ConvTranspose2d(3, 4, 3, groups=2)

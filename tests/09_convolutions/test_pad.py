"""F.pad (constant mode, PyTorch's last-dim-first pad tuple): values and gradients equal
PyTorch's (float64), gradcheck, errors."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck

X = np.random.default_rng(3).standard_normal((2, 3, 4))


def assert_pad_then_conv_is_conv_with_padding():
    """F.pad's zeros are the zeros conv2d pads with: conv2d(pad(x, p)) == conv2d(x, padding=p)."""
    x = tt.tensor(np.random.default_rng(5).standard_normal((1, 2, 4, 5)))
    w = tt.tensor(np.random.default_rng(6).standard_normal((3, 2, 3, 3)))
    np.testing.assert_allclose(F.conv2d(F.pad(x, (1, 1, 1, 1)), w).numpy(), F.conv2d(x, w, padding=1).numpy(),
                               rtol=1e-5, atol=1e-6, err_msg="conv2d of F.pad(x, (1, 1, 1, 1)) vs conv2d(x, padding=1)")


PADS = [(1, 2), (0, 1, 2, 0), (1, 1, 1, 1, 1, 1), (-1, 2), (1, -2, -1, 0), ()]


@pytest.mark.parametrize("pad", PADS, ids=[str(p) for p in PADS])
@pytest.mark.parametrize("value", [0.0, -1.5])
def test_values_and_gradients_equal_pytorch(torch, pad, value):
    assert_pad_then_conv_is_conv_with_padding()
    ours = tt.tensor(X, dtype=tt.float64, requires_grad=True)
    theirs = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    out, ref = F.pad(ours, pad, value=value), torch.nn.functional.pad(theirs, pad, value=value)
    assert out.shape == tuple(ref.shape), f"pad {pad}: shape {out.shape}, PyTorch {tuple(ref.shape)}"
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    up = np.random.default_rng(4).standard_normal(tuple(ref.shape))
    out.backward(tt.tensor(up, dtype=tt.float64))
    ref.backward(torch.tensor(up, dtype=torch.float64))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy(), err_msg=f"gradient of pad {pad}")


@pytest.mark.parametrize("pad", PADS[:5], ids=[str(p) for p in PADS[:5]])
def test_gradcheck(pad):
    assert_pad_then_conv_is_conv_with_padding()
    x = tt.tensor(X, dtype=tt.float64, requires_grad=True)
    assert gradcheck(lambda x: F.pad(x, pad, value=2.0), [x]), f"gradcheck of pad {pad}"


def test_errors():
    assert_pad_then_conv_is_conv_with_padding()
    x = tt.ones(2, 3)
    with pytest.raises(RuntimeError) as info:
        F.pad(x, (1, 2, 3))
    assert isinstance(info.value, ValueError), "an odd pad tuple: a ShapeError"
    with pytest.raises(RuntimeError):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError):
        F.pad(x, (-2, -2))
    with pytest.raises(ValueError, match="constant"):
        F.pad(x, (1, 1), mode="reflect")
    assert F.pad(x, (1, 1)).grad_fn is None and F.pad(tt.ones(2, requires_grad=True), (1, 0)).grad_fn.op == "pad"

"""The quantized convolution: module 09's rearrangement around _int8_linear, padded with real zeros."""
import numpy as np
import pytest

import tinytorch
from tinytorch import Tensor, nn
from tinytorch.ao import quantization as Q

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _reference(q_x, xs, xz, q_w, ws, wz, bias, stride, padding):
    """Module 09's conv2d in float64 on the values the integers stand for."""
    x = (q_x.astype(np.float64) - xz) * np.float64(np.float32(xs))
    w = (q_w.astype(np.float64) - np.reshape(wz, (-1, 1, 1, 1))) * ws.astype(np.float64)[:, None, None, None]
    b = None if bias is None else Tensor(bias.astype(np.float64))
    return nn.functional.conv2d(Tensor(x), Tensor(w), b, stride, padding).numpy()


CASES = {
    "3x3-pad1-zero-point-minus-37": ((2, 3, 7, 6), 4, (3, 3), 1, 1, -37, False, True),
    "3x2-stride-2-1-pad-0-2-affine": ((1, 2, 8, 7), 3, (3, 2), (2, 1), (0, 2), 25, True, True),
    "5x5-pad2-zero-point-127-no-bias": ((1, 1, 6, 6), 2, (5, 5), 1, 2, 127, False, False),
    "1x1-no-padding": ((2, 4, 5, 5), 2, (1, 1), 1, 0, 0, False, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_int8_conv2d_equals_the_convolution_of_the_values_it_stands_for(case):
    shape, co, k, stride, padding, xz, affine, with_bias = CASES[case]
    rng = np.random.default_rng(len(case))
    q_x = rng.integers(-128, 128, shape).astype(np.int8)
    q_w = rng.integers(-127, 128, (co, shape[1]) + k).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, co).astype(np.float32)
    wz = rng.integers(-20, 20, co) if affine else 0
    bias = rng.standard_normal(co).astype(np.float32) if with_bias else None
    got = Q._int8_conv2d(q_x, 0.02, xz, q_w, ws, wz, bias, stride, padding)
    want = _reference(q_x, 0.02, xz, q_w, ws, wz, bias, stride, padding)
    assert got.shape == want.shape and got.dtype == np.float32, f"shape {got.shape} {got.dtype}, expected {want.shape}"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4,
                               err_msg=f"{case}: against conv2d of the real values" + (
                                   ", padded with real zeros" if padding else
                                   " (no padding here: the layout of the columns or of the output)"))


def test_int8_conv2d_does_its_arithmetic_in_one_int8_linear_call(monkeypatch):
    calls = []
    original = Q._int8_linear

    def counting(q_x, *args, **kwargs):
        calls.append(q_x.dtype)
        return original(q_x, *args, **kwargs)

    monkeypatch.setattr(Q, "_int8_linear", counting)
    rng = np.random.default_rng(0)
    q_x = rng.integers(-128, 128, (2, 3, 6, 6)).astype(np.int8)
    q_w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    Q._int8_conv2d(q_x, 0.05, 3, q_w, np.full(4, 0.01, np.float32), 0, None, 1, 1)
    assert calls == [np.dtype(np.int8)], f"expected one _int8_linear call on int8 operands, got {calls}"


def test_int8_conv2d_in_a_quantized_conv2d_follows_the_float_layer():
    tinytorch.manual_seed(0)
    conv = nn.Conv2d(2, 5, 3, padding=1)
    x = np.abs(np.random.default_rng(1).standard_normal((3, 2, 6, 6))).astype(np.float32) + 0.5  # all positive
    scale, zero_point = Q._calculate_qparams(np.float32(x.min()), np.float32(x.max()), False)
    layer = Q.QuantizedConv2d.from_float(conv, float(scale), int(zero_point))
    with tinytorch.no_grad():
        want = conv(Tensor(x)).numpy()
    got = layer(Tensor(x)).numpy()
    assert int(zero_point) == -128, "the input grid starts at the smallest input, so 0 is outside it"
    err = np.abs(got - want).max()
    assert err < 0.05, f"the quantized layer's outputs within 0.05 of the float layer's, got {err} (border pixels: " \
                       f"the padding must stand for real zeros)"

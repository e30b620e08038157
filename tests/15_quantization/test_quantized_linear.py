"""QuantizedLinear: int32 accumulation, zero-point correction, rescale, real int8 storage."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import Tensor, nn
from tinytorch.ao import quantization as Q


def _reference(q_x, xs, xz, q_w, ws, bias):
    x = (q_x.astype(np.float64) - xz) * xs
    w = q_w.astype(np.float64) * ws.astype(np.float64)[:, None]
    out = x @ w.T
    return out if bias is None else out + bias


@pytest.mark.parametrize("lead", [(7,), (2, 3), ()])
@pytest.mark.parametrize("with_bias", [True, False])
def test_int8_linear_equals_dequantized_matmul(lead, with_bias):
    rng = np.random.default_rng(len(lead) + 3 * with_bias)
    q_x = rng.integers(-128, 128, lead + (33,)).astype(np.int8)
    q_w = rng.integers(-127, 128, (5, 33)).astype(np.int8)
    ws = rng.uniform(0.001, 0.05, 5).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32) if with_bias else None
    out = Q._int8_linear(q_x, 0.03, -11, q_w, ws, bias)
    assert out.shape == lead + (5,), f"output shape {out.shape}, expected {lead + (5,)}"
    assert out.dtype == np.float32, f"output dtype {out.dtype}, expected float32"
    np.testing.assert_allclose(out, _reference(q_x, 0.03, -11, q_w, ws, bias), rtol=1e-5, atol=1e-5,
                               err_msg="int32 accumulate, zero-point correction, rescale == dequantized matmul")


def test_int8_linear_accumulates_in_int32():
    q = np.full((2, 64), 127, dtype=np.int8)
    w = np.full((3, 64), -128, dtype=np.int8)
    out = Q._int8_linear(q, 1.0, 0, w, np.ones(3, np.float32))
    np.testing.assert_array_equal(out, np.full((2, 3), 64 * 127 * -128, np.float32),
                                  err_msg="64 products of 127 * -128 = -1,040,384 need int32 accumulators")


@pytest.mark.parametrize("seed", [0, 1])
def test_int8_linear_exact_beyond_float32_integers(seed):
    # 4096 products of values in [100, 127]: sums around 5e7, far above 2^24, where float32 arithmetic
    # no longer holds every integer; int32 accumulators (or any exact sum) give the exact integer.
    rng = np.random.default_rng(seed)
    q_x = rng.integers(100, 128, (16, 4096)).astype(np.int8)
    q_w = rng.integers(100, 128, (16, 4096)).astype(np.int8)
    exact = q_x.astype(np.int64) @ q_w.astype(np.int64).T
    assert exact.min() > 2 ** 24, "the case needs sums beyond float32's exact integers"
    out = Q._int8_linear(q_x, 1.0, 0, q_w, np.ones(16, np.float32))
    assert out.dtype == np.float32 and out.shape == (16, 16), f"float32 (16, 16), got {out.dtype} {out.shape}"
    np.testing.assert_array_equal(out, exact.astype(np.float32),
                                  err_msg="the exact integer sum, rounded once to float32 (a float32 matmul "
                                          "of the dequantized values rounds its partial sums)")


def test_int8_linear_zero_point_correction():
    rng = np.random.default_rng(1)
    q_w = rng.integers(-127, 128, (4, 10)).astype(np.int8)
    bias = rng.standard_normal(4).astype(np.float32)
    for zp in (-128, -5, 37, 127):
        q_x = np.full((3, 10), zp, dtype=np.int8)     # every input is exactly 0.0
        out = Q._int8_linear(q_x, 0.1, zp, q_w, np.full(4, 0.02, np.float32), bias)
        np.testing.assert_allclose(out, np.broadcast_to(bias, (3, 4)), atol=1e-6,
                                   err_msg=f"inputs at the zero point {zp} are zeros: only the bias remains")


def test_int8_linear_per_channel_scale_on_outputs():
    q_x = np.eye(3, dtype=np.int8)
    q_w = np.ones((2, 3), dtype=np.int8)
    out = Q._int8_linear(q_x, 0.5, 0, q_w, np.array([1.0, 10.0], np.float32))
    np.testing.assert_allclose(out, np.array([[0.5, 5.0]] * 3), err_msg="scale j multiplies output column j")


def _linear(in_f, out_f, seed=0):
    tt.manual_seed(seed)
    return nn.Linear(in_f, out_f)


def test_quantizedlinear_stores_real_int8_weights_4x_smaller():
    lin = _linear(96, 40)
    ql = Q.QuantizedLinear.from_float(lin, 0.05, -128)
    assert isinstance(ql.weight_int8, np.ndarray) and ql.weight_int8.dtype == np.int8, \
        f"weight_int8 must be a numpy int8 array, got {type(ql.weight_int8).__name__} {getattr(ql.weight_int8, 'dtype', '')}"
    assert ql.weight_int8.shape == (40, 96), f"weight_int8 shape {ql.weight_int8.shape}, expected (40, 96)"
    float_bytes = lin.weight.numpy().astype(np.float32).nbytes
    assert ql.weight_int8.nbytes * 4 == float_bytes, \
        f"int8 weight takes {ql.weight_int8.nbytes} bytes, expected a quarter of {float_bytes}"
    w = lin.weight.numpy()
    amax = np.abs(w).max(1)
    back = ql.weight_int8.astype(np.float32) * ql.weight_scale[:, None]
    assert np.all(np.abs(back - w) <= (amax / 127.5 / 2 + 1e-7)[:, None]), "weights within half a step per row"


def test_quantizedlinear_close_to_float_linear():
    lin = _linear(50, 20, seed=3)
    x = np.abs(np.random.default_rng(3).standard_normal((16, 50))).astype(np.float32)
    s, z = Q._calculate_qparams(np.float32(x.min()), np.float32(x.max()), False)
    ql = Q.QuantizedLinear.from_float(lin, float(s), int(z))
    out = ql(Tensor(x)).numpy()
    q_x = Q._quantize(x, s, z)
    ref = _reference(q_x, float(s), int(z), ql.weight_int8, ql.weight_scale, lin.bias.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg="forward == dequantized reference")
    with tt.no_grad():
        fl = lin(Tensor(x)).numpy()
    err = np.abs(out - fl).max()
    assert err < 0.02 * np.abs(fl).max(), f"int8 output within 2% of the float output's scale (max error {err})"

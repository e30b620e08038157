"""QuantizedLinear: the zero points expanded out of an int32 product of the stored integers,
the rescale, real int8 storage."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import Tensor, nn
from tinytorch.ao import quantization as Q
from tinytorch.testing import spied


def _reference(q_x, xs, xz, q_w, ws, bias, wz=0):
    x = (q_x.astype(np.float64) - xz) * xs
    w = (q_w.astype(np.float64) - np.reshape(wz, (-1, 1))) * ws.astype(np.float64)[:, None]
    out = x @ w.T
    return out if bias is None else out + bias


WEIGHT_ZERO_POINTS = {"symmetric": 0, "one": -9, "per-row": np.array([0, -3, 17, -128, 127])}


@pytest.mark.parametrize("lead", [(7,), (2, 3), ()])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("wz", list(WEIGHT_ZERO_POINTS))
def test_int8_linear_equals_dequantized_matmul(lead, with_bias, wz):
    rng = np.random.default_rng(len(lead) + 3 * with_bias)
    q_x = rng.integers(-128, 128, lead + (33,)).astype(np.int8)
    q_w = rng.integers(-128, 128, (5, 33)).astype(np.int8)
    ws = rng.uniform(0.001, 0.05, 5).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32) if with_bias else None
    out = Q._int8_linear(q_x, 0.03, -11, q_w, ws, WEIGHT_ZERO_POINTS[wz], bias)
    assert out.shape == lead + (5,), f"output shape {out.shape}, expected {lead + (5,)}"
    assert out.dtype == np.float32, f"output dtype {out.dtype}, expected float32"
    np.testing.assert_allclose(out, _reference(q_x, 0.03, -11, q_w, ws, bias, WEIGHT_ZERO_POINTS[wz]),
                               rtol=1e-5, atol=1e-5,
                               err_msg=f"weight zero points {wz}: the int32 product with its zero-point "
                                       f"corrections, rescaled, == the matmul of the dequantized values")


@pytest.mark.parametrize("wz", ["one", "per-row"])
def test_int8_linear_multiplies_the_stored_integers(wz):
    """The only work on the whole input or weight is the product of the integers as stored (and sums
    over `in`): the zero points enter as corrections, as in an int8 kernel whose operands must be int8."""
    rng = np.random.default_rng(11)
    q_x = rng.integers(-128, 128, (7, 33)).astype(np.int8)
    q_w = rng.integers(-128, 128, (5, 33)).astype(np.int8)
    ws = rng.uniform(0.001, 0.05, 5).astype(np.float32)
    out, log = spied(lambda qx, qw: Q._int8_linear(qx, 0.03, -11, qw, ws, WEIGHT_ZERO_POINTS[wz], None), q_x, q_w)
    np.testing.assert_allclose(np.asarray(out), _reference(q_x, 0.03, -11, q_w, ws, None, WEIGHT_ZERO_POINTS[wz]),
                               rtol=1e-5, atol=1e-5, err_msg="values, computed on spying arrays")
    shifted = [e for e in log if e[0] in ("add", "subtract", "multiply", "true_divide", "negative")
               and any(shape in (q_x.shape, q_w.shape) for shape in e[1])]
    products = [e for e in log if e[0] in ("matmul", "dot", "einsum", "tensordot", "inner")]
    assert not shifted, (f"elementwise arithmetic on the whole (7, 33) input or (5, 33) weight: {shifted}; the "
                         f"zero points must not be subtracted before the product (9-bit operands), but expanded out")
    assert products, "no matrix product of the integer arrays was seen"


def test_int8_linear_zero_points_on_both_sides_cancel():
    rng = np.random.default_rng(2)
    wz = WEIGHT_ZERO_POINTS["per-row"]
    q_w = rng.integers(-128, 128, (5, 20)).astype(np.int8)
    bias = rng.standard_normal(5).astype(np.float32)
    ones = np.ones(5, np.float32)
    for xz in (-128, 7, 127):
        out = Q._int8_linear(np.full((3, 20), xz, np.int8), 0.5, xz, q_w, ones, wz, bias)
        np.testing.assert_array_equal(out, np.tile(bias, (3, 1)),
                                      err_msg=f"inputs at their zero point {xz} are zeros: only the bias remains")
    at_zero = np.tile(wz[:, None], (1, 20)).astype(np.int8)
    q_x = rng.integers(-128, 128, (3, 20)).astype(np.int8)
    np.testing.assert_array_equal(Q._int8_linear(q_x, 0.5, 7, at_zero, ones, wz, bias), np.tile(bias, (3, 1)),
                                  err_msg="weights at their rows' zero points are zeros: only the bias remains")


def test_int8_linear_accumulates_in_int32():
    q = np.full((2, 64), 127, dtype=np.int8)
    w = np.full((3, 64), -128, dtype=np.int8)
    out = Q._int8_linear(q, 1.0, 0, w, np.ones(3, np.float32), 0)
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
    out = Q._int8_linear(q_x, 1.0, 0, q_w, np.ones(16, np.float32), 0)
    assert out.dtype == np.float32 and out.shape == (16, 16), f"float32 (16, 16), got {out.dtype} {out.shape}"
    np.testing.assert_array_equal(out, exact.astype(np.float32),
                                  err_msg="the exact integer sum, rounded once to float32 (a float32 matmul "
                                          "of the dequantized values rounds its partial sums)")


@pytest.mark.parametrize("seed", [0, 1])
def test_int8_linear_sums_and_corrections_with_zero_points_are_exact_at_4096_inputs(seed):
    # Row sums of 4096 int8 values near 127 reach ~520,000 (int16 wraps at 32,767), and the
    # zero points multiply them: every correction needs int32 as much as the product does.
    rng = np.random.default_rng(seed)
    q_x = rng.integers(100, 128, (16, 4096)).astype(np.int8)
    q_w = rng.integers(100, 128, (8, 4096)).astype(np.int8)
    zx, zw = -100, np.array([50, -60, 0, 127, -128, 1, -1, 33])
    exact = (q_x.astype(np.int64) - zx) @ (q_w.astype(np.int64) - zw[:, None]).T
    out = Q._int8_linear(q_x, 1.0, zx, q_w, np.ones(8, np.float32), zw)
    np.testing.assert_array_equal(out, exact.astype(np.float32),
                                  err_msg="the exact shifted sum over 4096 inputs with zero points, rounded once "
                                          "to float32 (row sums and corrections in int16 wrap around)")


def test_int8_linear_zero_point_correction():
    rng = np.random.default_rng(1)
    q_w = rng.integers(-127, 128, (4, 10)).astype(np.int8)
    bias = rng.standard_normal(4).astype(np.float32)
    for zp in (-128, -5, 37, 127):
        q_x = np.full((3, 10), zp, dtype=np.int8)     # every input is exactly 0.0
        out = Q._int8_linear(q_x, 0.1, zp, q_w, np.full(4, 0.02, np.float32), 0, bias)
        np.testing.assert_allclose(out, np.broadcast_to(bias, (3, 4)), atol=1e-6,
                                   err_msg=f"inputs at the zero point {zp} are zeros: only the bias remains")


def test_int8_linear_per_channel_scale_on_outputs():
    q_x = np.eye(3, dtype=np.int8)
    q_w = np.ones((2, 3), dtype=np.int8)
    out = Q._int8_linear(q_x, 0.5, 0, q_w, np.array([1.0, 10.0], np.float32), 0)
    np.testing.assert_allclose(out, np.array([[0.5, 5.0]] * 3), err_msg="scale j multiplies output column j")


def _linear(in_f, out_f, seed=0):
    tt.manual_seed(seed)
    return nn.Linear(in_f, out_f)


def test_quantizedlinear_stores_real_int8_weights_4x_smaller():
    lin = _linear(96, 40)
    ql = Q.QuantizedLinear.from_float(lin, 0.05, -128)
    assert isinstance(ql.weight_int8, Tensor) and ql.weight_int8.dtype == np.int8, \
        f"weight_int8 must be an int8 Tensor, got {type(ql.weight_int8).__name__} {getattr(ql.weight_int8, 'dtype', '')}"
    assert ql.weight_int8.shape == (40, 96), f"weight_int8 shape {ql.weight_int8.shape}, expected (40, 96)"
    float_bytes = lin.weight.numpy().astype(np.float32).nbytes
    assert ql.weight_int8.nbytes * 4 == float_bytes, \
        f"int8 weight takes {ql.weight_int8.nbytes} bytes, expected a quarter of {float_bytes}"
    w = lin.weight.numpy()
    amax = np.abs(w).max(1)
    back = ql.weight_int8.numpy().astype(np.float32) * ql.weight_scale.numpy()[:, None]
    assert np.all(np.abs(back - w) <= (amax / 127.5 / 2 + 1e-7)[:, None]), "weights within half a step per row"


def test_quantizedlinear_close_to_float_linear():
    lin = _linear(50, 20, seed=3)
    x = np.abs(np.random.default_rng(3).standard_normal((16, 50))).astype(np.float32)
    s, z = Q._calculate_qparams(np.float32(x.min()), np.float32(x.max()), False)
    ql = Q.QuantizedLinear.from_float(lin, float(s), int(z))
    out = ql(Tensor(x)).numpy()
    q_x = Q._quantize(x, s, z)
    ref = _reference(q_x, float(s), int(z), ql.weight_int8.numpy(), ql.weight_scale.numpy(), lin.bias.numpy())
    assert ql.weight_zero_point is None, "the default weight observer is symmetric: no weight zero points"
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg="forward == dequantized reference")
    with tt.no_grad():
        fl = lin(Tensor(x)).numpy()
    err = np.abs(out - fl).max()
    assert err < 0.02 * np.abs(fl).max(), f"int8 output within 2% of the float output's scale (max error {err})"


def test_quantizedlinear_with_affine_weights_keeps_their_zero_points():
    lin = _linear(40, 12, seed=5)
    x = np.random.default_rng(5).standard_normal((8, 40)).astype(np.float32)
    s, z = Q._calculate_qparams(np.float32(x.min()), np.float32(x.max()), False)
    affine = lambda: Q.PerChannelMinMaxObserver(ch_axis=0, qscheme=Q.per_channel_affine)  # noqa: E731
    ql = Q.QuantizedLinear.from_float(lin, float(s), int(z), weight_observer=affine)
    assert ql.weight_zero_point is not None and np.any(ql.weight_zero_point.numpy() != 0), \
        f"affine weights keep their zero points, got {ql.weight_zero_point}"
    out = ql(Tensor(x)).numpy()
    ref = _reference(Q._quantize(x, s, z), float(s), int(z), ql.weight_int8.numpy(), ql.weight_scale.numpy(),
                     lin.bias.numpy(), ql.weight_zero_point.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg="affine weights: forward == dequantized reference")

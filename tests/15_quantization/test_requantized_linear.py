"""Integer-only inference of one layer: the bias added on the accumulators' grid, one
rescaling by a 31-bit fixed-point multiplier, the ReLU as saturation at the zero point."""
import numpy as np
import pytest

from tinytorch.ao import quantization as Q


def _layer(q_w, w_scale, bias=None, x_scale=0.125, x_zero_point=0, w_zero_point=None):
    return Q.QuantizedLinear(np.array(q_w, np.int8), np.array(w_scale, np.float32),
                             None if bias is None else np.array(bias, np.float32), x_scale, x_zero_point,
                             weight_zero_point=w_zero_point)


def _integer_machine(q_x, layer, scale, zero_point, qmin, qmax, relu):
    """TensorFlow Lite's int8 Linear in Python integers: exact accumulators, the bias as the
    nearest integer on the accumulators' grid, M = s_x s_W / s_y as the nearest 31-bit
    fixed-point number, one rounding (halves up), saturation; the ReLU clamps at the zero point."""
    wz = 0 if layer.weight_zero_point is None else layer.weight_zero_point.numpy()[:, None]
    acc = (q_x.astype(np.int64) - layer.input_zero_point.item()) @ (layer.weight_int8.numpy().astype(np.int64) - wz).T
    acc_scale = np.float64(layer.input_scale.item()) * layer.weight_scale.numpy().astype(np.float64)
    if layer.bias is not None:
        acc = acc + np.round(layer.bias.numpy().astype(np.float64) / acc_scale).astype(np.int64)
    fraction, exponent = np.frexp(acc_scale / np.float64(scale))
    m = np.round(fraction * 2.0 ** 31).astype(np.int64)
    shift = 31 - exponent
    shift, m = np.where(m == 2 ** 31, shift - 1, shift), np.where(m == 2 ** 31, m // 2, m)
    low = max(qmin, zero_point) if relu else qmin
    flat = acc.reshape(-1, acc.shape[-1])
    out = [[min(max(zero_point + ((int(a) * int(mj) + (1 << (int(rj) - 1))) >> int(rj)), low), qmax)
            for a, mj, rj in zip(row, m, shift)] for row in flat]
    return np.array(out, dtype=np.int8).reshape(acc.shape)


def test_requantized_linear_one_rounding_halves_up_per_output_scale():
    out = Q._requantized_linear(np.array([[10, 20], [3, 1]], np.int8), _layer([[1, 2], [3, -1]], [0.5, 0.25]), 0.25, 0)
    assert out.dtype == np.int8 and out.shape == (2, 2), f"{out.dtype} {out.shape}, expected int8 (2, 2)"
    np.testing.assert_array_equal(out, np.array([[13, 1], [1, 1]], np.int8),
                                  err_msg="12.5 steps must round up to 13; output 1's grid is 1/32, not 1/16")


def test_requantized_linear_bias_is_added_on_the_accumulators_grid_before_the_one_rounding():
    out = Q._requantized_linear(np.array([[1, 0]], np.int8), _layer([[1, 0], [3, 0]], [0.5, 0.25], bias=[1 / 16, 0.0]),
                                0.25, 0)
    np.testing.assert_array_equal(out, np.array([[1, 0]], np.int8),
                                  err_msg="1/16 + 1/16 = half a step of 1/4: 1 (a bias rounded on its own vanishes)")


@pytest.mark.parametrize("bias, want", [(0.23, [4, 6]), (-0.23, [-4, -2]), (0.51, [8, 10])])
def test_requantized_linear_bias_is_the_nearest_integer(bias, want):
    out = Q._requantized_linear(np.array([[0, 0], [2, 0]], np.int8), _layer([[1, 0]], [0.5], bias=[bias]), 0.0625, 0)
    np.testing.assert_array_equal(out[:, 0], np.array(want, np.int8), err_msg=f"bias {bias} is {bias * 16} accumulator steps")


@pytest.mark.parametrize("zero_point, relu, want", [(10, True, [10, 12, 10]), (10, False, [8, 12, 10]),
                                                    (-128, True, [-128, -126, -128]), (-5, True, [-5, -3, -5])])
def test_requantized_linear_relu_keeps_the_integers_at_or_above_the_zero_point(zero_point, relu, want):
    out = Q._requantized_linear(np.array([[-8, 0], [8, 0], [1, 0]], np.int8), _layer([[1, 0]], [0.5]), 0.25,
                                zero_point, relu=relu)
    np.testing.assert_array_equal(out[:, 0], np.array(want, np.int8),
                                  err_msg=f"y = -1/2, 1/2, 1/16 on the grid (1/4, zero point {zero_point}), relu={relu}")


def test_requantized_linear_zero_points_on_both_sides():
    out = Q._requantized_linear(np.array([[-2, 4]], np.int8), _layer([[5, 7]], [0.5], x_zero_point=-4, w_zero_point=[3]),
                                0.5, 0)
    np.testing.assert_array_equal(out, np.array([[5]], np.int8), err_msg="(2, 8) . (2, 4) = 36: 4.5 steps, so 5")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("relu", [False, True])
def test_requantized_linear_bit_exact_on_realistic_layers(seed, relu):
    rng = np.random.default_rng(seed)
    out_features, in_features = 7, 33
    affine = seed == 2
    layer = _layer(rng.integers(-127, 128, (out_features, in_features)), rng.uniform(1e-3, 1e-2, out_features),
                   bias=rng.normal(0, 0.3, out_features), x_scale=float(rng.uniform(0.01, 0.05)),
                   x_zero_point=int(rng.integers(-30, 30)),
                   w_zero_point=rng.integers(-10, 10, out_features) if affine else None)
    q_x = rng.integers(-128, 128, (3, 4, in_features)).astype(np.int8)
    scale, zero_point = float(rng.uniform(0.02, 0.08)), int(rng.integers(-128, 0))
    got = Q._requantized_linear(q_x, layer, scale, zero_point, relu=relu)
    want = _integer_machine(q_x, layer, scale, zero_point, -128, 127, relu)
    assert got.dtype == np.int8 and got.shape == want.shape, f"{got.dtype} {got.shape}, expected int8 {want.shape}"
    np.testing.assert_array_equal(got, want, err_msg="bit for bit what the integer machine computes")


def test_requantized_linear_saturates_at_the_output_range():
    out = Q._requantized_linear(np.array([[127, 127], [-128, -128]], np.int8), _layer([[127, 127]], [0.5]), 0.25, 0, -8, 7)
    np.testing.assert_array_equal(out[:, 0], np.array([7, -8], np.int8), err_msg="saturated at quant_max and quant_min")


def test_requantized_linear_multiplier_comes_from_the_float64_scales():
    # 0.5 - 1e-9 is a float64 that float32 rounds to 0.5: y = 3 (0.5 - 1e-9) lies just below 1.5
    out = Q._requantized_linear(np.array([[3]], np.int8), _layer([[1]], [1.0], x_scale=0.5 - 1e-9), 1.0, 0)
    np.testing.assert_array_equal(out, np.array([[1]], np.int8),
                                  err_msg="y = 1.5 - 3e-9 rounds to 1; a multiplier from float32 scales gives 2")

"""Requantization: a real multiplier as a 31-bit integer and a shift, and the rounding,
saturating, integer-only rescale of int32 accumulators."""
import numpy as np
import pytest

from tinytorch.ao import quantization as Q


def _exact_requantize(acc, m, shift, zp, qmin=-128, qmax=127):
    """Python integers: zero point + floor((acc * m + 2^(shift - 1)) / 2^shift), saturated."""
    acc, m, shift = np.broadcast_arrays(np.asarray(acc, dtype=object), np.asarray(m, dtype=object),
                                        np.asarray(shift, dtype=object))
    out = [min(max(zp + ((int(a) * int(b) + (1 << (int(r) - 1))) >> int(r)), qmin), qmax)
           for a, b, r in zip(acc.ravel(), m.ravel(), shift.ravel())]
    return np.array(out, dtype=np.int8).reshape(acc.shape)


@pytest.mark.parametrize("seed", [0, 1])
def test_quantize_multiplier_31_bits_nearest(seed):
    rng = np.random.default_rng(seed)
    real = np.exp(rng.uniform(np.log(1e-9), np.log(40.0), (6, 7)))
    m, shift = Q._quantize_multiplier(real)
    assert m.shape == real.shape and shift.shape == real.shape, f"shapes {m.shape}, {shift.shape}, expected {real.shape}"
    assert m.dtype == np.int64 and shift.dtype == np.int64, f"dtypes {m.dtype}, {shift.dtype}, expected int64"
    assert np.all((m >= 2 ** 30) & (m < 2 ** 31)), f"multipliers outside [2^30, 2^31): {m[(m < 2 ** 30) | (m >= 2 ** 31)]}"
    err = np.abs(m * 2.0 ** -shift - real) * 2.0 ** (shift + 1)   # in units of half the last bit
    assert np.all(err <= 1), f"not the nearest 31-bit fixed-point number: errors {err.max()} half-units"


def test_quantize_multiplier_known_values_and_carry():
    cases = {0.5: (2 ** 30, 31), 0.75: (3 * 2 ** 29, 31), 3.0: (3 * 2 ** 29, 29), 2.0 ** -20: (2 ** 30, 50),
             1 - 2.0 ** -40: (2 ** 30, 30), 2.0 ** -10 * (1 - 2.0 ** -35): (2 ** 30, 40)}
    for real, expected in cases.items():
        m, shift = Q._quantize_multiplier(real)
        assert (int(m), int(shift)) == expected, f"(multiplier, shift) of {real!r}: got {(int(m), int(shift))}, " \
                                                 f"expected {expected} (a fraction that rounds up to 2^31 renormalises)"


@pytest.mark.parametrize("bad", [0.0, -0.5, float("inf"), float("nan")])
def test_quantize_multiplier_rejects_non_positive(bad):
    with pytest.raises(ValueError):
        Q._quantize_multiplier(bad)


def test_requantize_rounds_to_nearest_halves_up():
    acc = np.array([-5, -3, -1, 1, 3, 5, 6, 0])
    out = Q._requantize(acc, 2 ** 30, 31, 0)
    assert out.dtype == np.int8, f"requantize returns int8, got {out.dtype}"
    np.testing.assert_array_equal(out, np.array([-2, -1, 0, 1, 2, 3, 3, 0], np.int8),
                                  err_msg="acc * 0.5 to the nearest integer, halves towards +infinity")
    np.testing.assert_array_equal(Q._requantize(acc, 2 ** 30, 31, -100), np.array([-102, -101, -100, -99, -98, -97, -97, -100], np.int8),
                                  err_msg="the zero point is added to the rounded integer")


def test_requantize_saturates():
    out = Q._requantize(np.array([10_000, -10_000, 300, -300]), 2 ** 30, 31, 5, -8, 7)
    np.testing.assert_array_equal(out, np.array([7, -8, 7, -8], np.int8), err_msg="saturated at quant_min/quant_max")
    out = Q._requantize(np.array([600, -600]), 2 ** 30, 31, 0)
    np.testing.assert_array_equal(out, np.array([127, -128], np.int8), err_msg="300 and -300 saturate in int8")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_requantize_exact_per_channel(seed):
    rng = np.random.default_rng(seed)
    acc = rng.integers(-2 ** 31 + 1, 2 ** 31, (9, 6))
    acc[0] //= 2 ** 20                                   # small ones too
    m = rng.integers(2 ** 30, 2 ** 31, 6)
    shift = rng.integers(36, 60, 6)
    out = Q._requantize(acc, m, shift, -3)
    np.testing.assert_array_equal(out, _exact_requantize(acc, m, shift, -3),
                                  err_msg="one (multiplier, shift) per output column, exact integer arithmetic")


def test_requantize_exact_just_below_a_halfway_point():
    # acc * m = 2^55 * 61.5 - 36: the nearest integer is 61, but float64 (53 bits) rounds the product onto
    # the halfway point itself; only integer arithmetic gets it right
    acc = np.array([1996956708, -1996956708, 1084019923])
    m = np.array([1109573887, 1109573887, 2044031636])
    out = Q._requantize(acc, m, 55, 0)
    np.testing.assert_array_equal(out, np.array([61, -61, 61], np.int8),
                                  err_msg="exact near a halfway point, beyond float64's 2^53 exact integers")
    np.testing.assert_array_equal(Q._requantize(np.array([2 ** 31 - 1]), 2 ** 31 - 1, 56, 0), np.array([64], np.int8),
                                  err_msg="the largest product (2^31 - 1)^2 needs int64")

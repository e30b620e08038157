"""The noise model of rounding: the mean squared error of one step, and the SQNR it predicts."""
import numpy as np
import pytest

from tinytorch.ao import quantization as Q


@pytest.mark.parametrize("scale", [1.0, 0.37, 1e-3])
def test_rounding_mse_is_the_mean_square_over_one_step(scale):
    errors = np.linspace(-scale / 2, scale / 2, 400_001)
    assert float(Q._rounding_mse(scale)) == pytest.approx(float(np.mean(errors ** 2)), rel=1e-5)


def test_rounding_mse_of_an_array_is_elementwise():
    scales = np.array([[0.5, 2.0], [1e-2, 3.0]])
    got = np.asarray(Q._rounding_mse(scales))
    assert got.shape == scales.shape
    np.testing.assert_allclose(got, [[float(Q._rounding_mse(s)) for s in row] for row in scales], rtol=1e-12)


@pytest.mark.parametrize("bits", [3, 4, 6, 8])
def test_predicted_sqnr_matches_the_measured_one(bits):
    """On 200,000 normal values spread over a grid from their min to their max, the prediction is within
    0.05 dB of the SQNR measured with the module's own quantize and dequantize (solutions: 0.02 at most)."""
    x = np.random.default_rng(bits).standard_normal(200_000)
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    lo, hi = float(x.min()), float(x.max())
    # the grid set by hand: step (hi - lo) / (levels - 1), lo on the grid's first level
    step = (hi - lo) / (qmax - qmin)
    noise = (np.clip(np.round((x - lo) / step), 0, qmax - qmin) * step + lo) - x
    measured = 10 * np.log10(np.mean(x ** 2) / np.mean(noise ** 2))
    got = Q._predicted_sqnr_db(float(np.mean(x ** 2)), lo, hi, bits)
    assert type(got) is float, f"a Python float (np.float64 is a subclass of float, not one), got {type(got).__name__}"
    assert got == pytest.approx(measured, abs=0.05), (
        f"predicted SQNR of {bits}-bit quantization over [{lo:.3f}, {hi:.3f}]: {got:.3f} dB, but {measured:.3f} dB "
        f"measured on 200,000 normal samples (how many steps does a {bits}-bit grid have, and how wide is each?)")


def test_one_more_bit_adds_six_decibels():
    gains = [Q._predicted_sqnr_db(1.0, -3.0, 3.0, b + 1) - Q._predicted_sqnr_db(1.0, -3.0, 3.0, b) for b in (6, 7)]
    expected = [20 * np.log10((2 ** (b + 1) - 1) / (2 ** b - 1)) for b in (6, 7)]
    np.testing.assert_allclose(gains, expected, rtol=1e-9,
                               err_msg="dB gained from 6 to 7 bits and from 7 to 8 bits over [-3, 3]: 20 log10 of the "
                                       "ratio of the steps' widths")

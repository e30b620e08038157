"""Scale and zero point from a range: torch's observers' formula, widening to 0, the eps floor."""
import numpy as np
import pytest

from tinytorch.ao import quantization as Q

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RANGES = [(-1.0, 3.0), (0.5, 2.0), (-4.0, -0.25), (-0.731, 0.0419), (0.0, 0.0), (-1e-3, 250.0)]


def _torch_qparams(torch, values, symmetric, per_channel, quant_min=-128, quant_max=127):
    observers = torch.ao.quantization
    MinMaxObserver, PerChannelMinMaxObserver = observers.MinMaxObserver, observers.PerChannelMinMaxObserver

    if per_channel:
        scheme = torch.per_channel_symmetric if symmetric else torch.per_channel_affine
        obs = PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=scheme,
                                       quant_min=quant_min, quant_max=quant_max)
    else:
        scheme = torch.per_tensor_symmetric if symmetric else torch.per_tensor_affine
        obs = MinMaxObserver(dtype=torch.qint8, qscheme=scheme, quant_min=quant_min, quant_max=quant_max)
    obs(torch.tensor(values))
    scale, zp = obs.calculate_qparams()
    return scale.numpy().reshape(-1), zp.numpy().reshape(-1)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("lo,hi", RANGES)
def test_calculate_qparams_matches_torch_per_tensor(torch, lo, hi, symmetric):
    values = np.array([lo, (lo + hi) / 2, hi], dtype=np.float32)
    scale, zp = Q._calculate_qparams(np.float32(lo), np.float32(hi), symmetric)
    ts, tz = _torch_qparams(torch, values, symmetric, per_channel=False)
    assert np.asarray(scale).dtype == np.float32, f"scale must be float32, got {np.asarray(scale).dtype}"
    np.testing.assert_array_equal(np.asarray(scale).reshape(-1), ts,
                                  err_msg=f"scale of [{lo}, {hi}] (symmetric={symmetric}) should equal torch's")
    np.testing.assert_array_equal(np.asarray(zp).reshape(-1), tz,
                                  err_msg=f"zero point of [{lo}, {hi}] (symmetric={symmetric}) should equal torch's")


@pytest.mark.parametrize("symmetric", [False, True])
def test_calculate_qparams_matches_torch_per_channel(torch, symmetric):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((7, 9)) * rng.uniform(0.01, 5, (7, 1)) + rng.uniform(-2, 2, (7, 1))).astype(np.float32)
    w[3] = 0.0                     # an all-zero channel: scale falls back to eps
    w[5] = np.abs(w[5]) + 0.5      # an all-positive channel: widened to include 0
    scale, zp = Q._calculate_qparams(w.min(1), w.max(1), symmetric)
    ts, tz = _torch_qparams(torch, w, symmetric, per_channel=True)
    np.testing.assert_array_equal(scale, ts, err_msg="per-channel scales should equal torch's")
    np.testing.assert_array_equal(zp, tz, err_msg="per-channel zero points should equal torch's")
    assert zp.dtype == np.int64, f"zero points must be int64, got {zp.dtype}"


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("lo,hi", [(-0.3, 1.7), (-0.375, 3.375)], ids=["range", "tie"])  # tie: min / scale = -1.5
def test_calculate_qparams_matches_torch_4bit(torch, symmetric, lo, hi):
    values = np.array([lo, hi, 0.2], dtype=np.float32)
    scale, zp = Q._calculate_qparams(values.min(), values.max(), symmetric, -8, 7)
    ts, tz = _torch_qparams(torch, values, symmetric, per_channel=False, quant_min=-8, quant_max=7)
    np.testing.assert_array_equal(np.asarray(scale).reshape(-1), ts, err_msg="4-bit scale should equal torch's")
    np.testing.assert_array_equal(np.asarray(zp).reshape(-1), tz, err_msg="4-bit zero point should equal torch's")


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("lo,hi", [(0.5, 2.0), (-3.0, -1.0), (-1.3, 2.9)])
def test_calculate_qparams_zero_is_exact(lo, hi, symmetric):
    scale, zp = Q._calculate_qparams(np.float32(lo), np.float32(hi), symmetric)
    assert -128 <= int(zp) <= 127, f"zero point {int(zp)} must lie in [-128, 127]"
    assert np.asarray(zp).dtype == np.int64, f"the zero point is an integer (int64), got {np.asarray(zp).dtype}"
    # the widened range is covered: both ends lie within half a step of what -128 and 127 stand for
    s = float(scale)
    ends = np.array([min(lo, 0.0), max(hi, 0.0)])
    grid_ends = s * (np.array([-128, 127]) - int(zp))
    if not symmetric:
        assert np.abs(grid_ends - ends).max() <= s * 0.5 + 1e-6, \
            f"ends of the widened range {ends} vs the grid's {grid_ends} (scale {s})"
    else:
        m, slack = np.abs(ends).max(), s / 2 * (1 + 1e-5)
        assert grid_ends[0] <= -m + slack and grid_ends[1] >= m - slack, \
            f"the symmetric grid {grid_ends} must reach the larger magnitude {np.abs(ends).max()} within half a step"


def test_calculate_qparams_zero_range_uses_eps():
    scale, zp = Q._calculate_qparams(np.float32(0.0), np.float32(0.0), False)
    assert float(scale) == float(np.finfo(np.float32).eps), f"scale of an all-zero range should be eps, got {scale}"
    assert int(zp) == -128, f"zero point of [0, 0] should be -128, got {zp}"


def test_calculate_qparams_rejects_min_above_max():
    with pytest.raises(ValueError, match=r"min_val.*2\.0.*max_val.*1\.0"):  # names both, shows both
        Q._calculate_qparams(np.float32(2.0), np.float32(1.0), False)
    with pytest.raises(ValueError, match=r"min_val.*max_val"):
        Q._calculate_qparams(np.array([0.0, 3.0], np.float32), np.array([1.0, 2.0], np.float32), False)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("bits", [8, 4, 3])
def test_calculate_qparams_grid_conditions(symmetric, bits):
    """The contract's conditions, torch-free: the zero point is one of the integers, and the grid
    is as wide as the widened range (affine, ends within half a step) or as [-m, m] (symmetric)."""
    quant_min, quant_max = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    rng = np.random.default_rng(bits)
    lo = (rng.uniform(-5, 3, 40) * rng.choice([1e-3, 1.0, 30.0], 40)).astype(np.float32)
    hi = (lo + rng.uniform(0.01, 6, 40) * rng.choice([1e-3, 1.0, 30.0], 40)).astype(np.float32)
    scale, zp = Q._calculate_qparams(lo, hi, symmetric, quant_min, quant_max)
    s, z = scale.astype(np.float64), zp.astype(np.int64)
    assert np.all((quant_min <= z) & (z <= quant_max)), f"zero points outside [{quant_min}, {quant_max}]: {z}"
    wlo, whi = np.minimum(lo, 0).astype(np.float64), np.maximum(hi, 0).astype(np.float64)
    low_end, high_end = s * (quant_min - z), s * (quant_max - z)
    if symmetric:
        assert np.all(z == 0), f"symmetric zero points must be 0, got {z}"
        np.testing.assert_allclose(high_end - low_end, 2 * np.maximum(-wlo, whi), rtol=1e-6,
                                   err_msg="symmetric: the grid is as wide as [-m, m]")
    else:
        np.testing.assert_allclose(high_end - low_end, whi - wlo, rtol=1e-6,
                                   err_msg="affine: the grid is as wide as the range widened to contain 0")
        off = np.maximum(np.abs(low_end - wlo), np.abs(high_end - whi))
        assert np.all(off <= s / 2 * (1 + 1e-5)), \
            f"affine: the end integers stand for values more than half a step from the widened range: {off / s} steps"


@pytest.mark.parametrize("lo,hi", [(-1e-9, 1e-8), (-5e-8, 2e-9), (-3e-8, 0.0)])
def test_a_range_narrower_than_eps_gets_the_zero_point_of_the_floored_scale(torch, lo, hi):
    values = np.array([lo, hi], dtype=np.float32)
    scale, zp = Q._calculate_qparams(np.float32(lo), np.float32(hi), False)
    ts, tz = _torch_qparams(torch, values, False, per_channel=False)
    np.testing.assert_array_equal(np.asarray(scale).reshape(-1), ts, err_msg=f"scale of [{lo}, {hi}]: EPS, as torch's")
    np.testing.assert_array_equal(np.asarray(zp).reshape(-1), tz,
                                  err_msg=f"zero point of [{lo}, {hi}]: the floored scale's, as torch's")

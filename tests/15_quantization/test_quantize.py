"""quantize/dequantize: half-step error, rounding, clamping, parity with torch, per channel."""
import numpy as np
import pytest

from tinytorch import Tensor
from tinytorch.ao import quantization as Q

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _assert_ints_match(ours, theirs, what):
    """Equal, except possibly for a rare rounding tie decided by the division's last bit."""
    ours, theirs = np.asarray(ours).astype(np.int64), np.asarray(theirs).astype(np.int64)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape}, expected {theirs.shape}"
    diff = np.abs(ours - theirs)
    assert diff.max() <= 1 and (diff > 0).sum() <= max(1, ours.size // 100), (
        f"{what}: {(diff > 0).sum()} of {ours.size} integers differ from torch's (largest by {diff.max()}); "
        f"first: ours {ours.ravel()[:8]}, torch {theirs.ravel()[:8]}")


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quantize_dequantize_error_at_most_half_step(seed, symmetric):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(4000) * rng.uniform(0.01, 10) + rng.uniform(-3, 3)).astype(np.float32)
    scale, zp = Q._calculate_qparams(x.min(), x.max(), symmetric)
    q = Q._quantize(x, scale, zp)
    assert q.dtype == np.int8, f"quantize must return int8, got {q.dtype}"
    back = Q._dequantize(q, scale, zp)
    assert back.dtype == np.float32, f"dequantize must return float32, got {back.dtype}"
    err = np.abs(back.astype(np.float64) - x)
    bound = float(scale) / 2 + 2 * float(np.spacing(np.abs(x).max()))  # + float32 rounding of x itself
    assert err.max() <= bound, f"round-trip error {err.max()} exceeds half a step ({float(scale) / 2})"


def test_quantize_rounds_half_to_even_and_clamps():
    x = np.array([0.25, 0.75, 1.25, -0.25, -0.75, 100.0, -100.0], dtype=np.float32)
    q = Q._quantize(x, np.float32(0.5), 0)
    np.testing.assert_array_equal(q, np.array([0, 2, 2, 0, -2, 127, -128], dtype=np.int8),
                                  err_msg="round(x / 0.5) half to even, then clamp to [-128, 127]")
    q = Q._quantize(np.array([3.0, -3.0, 0.4], dtype=np.float32), np.float32(0.5), 1, -4, 3)
    np.testing.assert_array_equal(q, np.array([3, -4, 2], dtype=np.int8),
                                  err_msg="3-bit range [-4, 3] with zero point 1: clamp after adding it")
    q = Q._quantize(np.array([2.0], dtype=np.float32), np.float32(1.0), 126)
    np.testing.assert_array_equal(q, np.array([127], dtype=np.int8), err_msg="2 + 126 saturates at 127")


# float32 (x, scale) pairs where x times the float32 reciprocal of the scale (PyTorch's rule) and a
# true division x / scale round to different integers: each quotient lies within an ulp of a tie.
RECIPROCAL_CASES = [(2.25, 0.3, 8), (-4.5, 0.6, -8), (11.25, 0.9, 13), (4.125, 0.15, 28), (1.09, 0.02, 54),
                    (-66.15, 0.7, -95), (1.0595, 0.013, 81), (-2.45, 0.02, -122)]


def test_quantize_scales_by_float32_reciprocal_as_pytorch():
    x = np.array([c[0] for c in RECIPROCAL_CASES], dtype=np.float32)
    s = np.array([c[1] for c in RECIPROCAL_CASES], dtype=np.float32)
    expected = np.array([c[2] for c in RECIPROCAL_CASES], dtype=np.int8)
    assert np.all(np.round(x / s) != expected), "each case must separate division from the reciprocal rule"
    np.testing.assert_array_equal(Q._quantize(x, s, 0), expected,
                                  err_msg="integers as PyTorch computes them: x times the float32 reciprocal of "
                                          "the scale, where a true division would round the other way")
    for xi, si, qi in RECIPROCAL_CASES:  # a scalar scale, as quantize_per_tensor passes it
        got = Q._quantize(np.array([xi], dtype=np.float32), np.float32(si), 0)
        assert got[0] == qi, f"quantize({xi}, scale {si}): got {got[0]}, PyTorch gives {qi}"


def test_quantize_reciprocal_cases_match_torch(torch):
    for xi, si, qi in RECIPROCAL_CASES:
        t = torch.quantize_per_tensor(torch.tensor([xi]), float(np.float32(si)), 0, torch.qint8).int_repr().item()
        assert t == qi, f"the test's expectation for ({xi}, {si}) should be torch's integer {t}, not {qi}"
        ours = Q.quantize_per_tensor(np.array([xi], dtype=np.float32), float(np.float32(si)), 0).int_repr()
        assert ours[0] == t, f"quantize_per_tensor({xi}, {si}): got {ours[0]}, torch gives {t}"


@pytest.mark.parametrize("zero_point", [1, 3, -5, 7])
def test_quantize_rounds_before_adding_an_odd_zero_point(zero_point):
    # x / 0.5 lands exactly on a tie k + 0.5: it rounds to the even neighbour, and only then is the
    # (odd) zero point added; rounding after adding it would pick the other neighbour.
    x = np.array([0.25, 0.75, 1.25, -0.25, -0.75, 2.25], dtype=np.float32)
    ties = np.array([0, 2, 2, 0, -2, 4])
    q = Q._quantize(x, np.float32(0.5), zero_point)
    np.testing.assert_array_equal(q, (ties + zero_point).astype(np.int8),
                                  err_msg=f"ties rounded half to even, then zero point {zero_point} added")


def test_dequantize_does_not_overflow_int8():
    q = np.array([-128, -1, 0, 127], dtype=np.int8)
    np.testing.assert_allclose(Q._dequantize(q, np.float32(0.25), 5), 0.25 * (q.astype(np.float64) - 5),
                               err_msg="dequantize computes (q - z) * s without int8 wrap-around")
    np.testing.assert_allclose(Q._dequantize(q, np.float32(0.5), -128), 0.5 * (q.astype(np.float64) + 128),
                               err_msg="dequantize with zero point -128")


@pytest.mark.parametrize("scale,zero_point", [(0.02, 0), (0.013, -17), (0.1, 40), (0.0071, 127)])
def test_quantize_per_tensor_matches_torch(torch, scale, zero_point):
    rng = np.random.default_rng(int(zero_point) + 200)
    x = (rng.standard_normal((6, 50)) * 1.5).astype(np.float32)
    ours = Q.quantize_per_tensor(Tensor(x), scale, zero_point)
    theirs = torch.quantize_per_tensor(torch.tensor(x), scale, zero_point, torch.qint8)
    assert ours.int_repr().dtype == np.int8, "int_repr is a numpy int8 array"
    _assert_ints_match(ours.int_repr(), theirs.int_repr().numpy(), "quantize_per_tensor's integers")
    np.testing.assert_allclose(ours.dequantize().numpy(), theirs.dequantize().numpy(), rtol=0, atol=scale * 1.01,
                               err_msg="dequantized values equal torch's (within one step at rare ties)")
    exact = ours.int_repr() == theirs.int_repr().numpy()
    np.testing.assert_allclose(ours.dequantize().numpy()[exact], theirs.dequantize().numpy()[exact], rtol=1e-6,
                               err_msg="where the integers agree, the dequantized values equal torch's")


@pytest.mark.parametrize("shape,axis", [((5, 12), 0), ((5, 12), 1), ((3, 4, 6), 1), ((3, 4, 6), -1)])
def test_channel_broadcast_quantize_per_channel_matches_torch(torch, shape, axis):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    x = rng.standard_normal(shape).astype(np.float32)
    C = shape[axis]
    scales = rng.uniform(0.005, 0.05, C).astype(np.float32)
    zps = rng.integers(-20, 20, C).astype(np.int64)
    ours = Q.quantize_per_channel(x, scales, zps, axis)
    theirs = torch.quantize_per_channel(torch.tensor(x), torch.tensor(scales), torch.tensor(zps),
                                        axis % len(shape), torch.qint8)
    _assert_ints_match(ours.int_repr(), theirs.int_repr().numpy(), f"quantize_per_channel along axis {axis}")
    np.testing.assert_allclose(ours.dequantize().numpy(), theirs.dequantize().numpy(), atol=float(scales.max()) * 1.01,
                               err_msg="per-channel dequantize equals torch's")


@pytest.mark.parametrize("shape,axis", [((4, 7), 0), ((4, 7), 1), ((2, 3, 5), 2), ((2, 3, 5), -2)])
def test_channel_broadcast_shapes(shape, axis):
    C = shape[axis]
    out = Q._channel_broadcast(np.arange(C), axis, len(shape))
    expected = [1] * len(shape)
    expected[axis % len(shape)] = C
    assert out.shape == tuple(expected), f"broadcast shape {out.shape}, expected {tuple(expected)}"
    np.testing.assert_array_equal(out.ravel(), np.arange(C), err_msg="values in order")


@pytest.mark.parametrize("shape,axis", [((6, 5), 0), ((6, 5), 1), ((4, 3, 2, 2), 0), ((4, 3, 2, 2), -1)])
def test_per_channel_minmax_values(shape, axis):
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    lo, hi = Q._per_channel_minmax(x, axis)
    moved = np.moveaxis(x, axis, 0).reshape(shape[axis], -1)
    np.testing.assert_array_equal(lo, moved.min(1), err_msg=f"per-channel minima along axis {axis}")
    np.testing.assert_array_equal(hi, moved.max(1), err_msg=f"per-channel maxima along axis {axis}")
    assert lo.dtype == np.float32 and hi.dtype == np.float32, "min/max returned as float32"


def test_per_channel_minmax_of_float64_data_is_float32():
    lo, hi = Q._per_channel_minmax(np.arange(12.0).reshape(3, 4), 1)
    assert (lo.dtype, hi.dtype) == (np.float32, np.float32), f"float64 data gave {lo.dtype}, {hi.dtype}"


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_per_channel_minmax_more_accurate_than_per_tensor_on_uneven_channels(seed, symmetric):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((16, 32)) * 10.0 ** rng.uniform(-3, 0, (16, 1))).astype(np.float32)
    s_t, z_t = Q._calculate_qparams(w.min(), w.max(), symmetric)
    per_tensor = Q._dequantize(Q._quantize(w, s_t, z_t), s_t, z_t)
    s_c, z_c = Q._calculate_qparams(*Q._per_channel_minmax(w, 0), symmetric)
    qc = Q.quantize_per_channel(w, s_c, z_c, axis=0)
    per_channel = qc.dequantize().numpy()
    mse_t, mse_c = np.mean((per_tensor - w) ** 2), np.mean((per_channel - w) ** 2)
    assert mse_c <= mse_t, f"per-channel MSE {mse_c:.3e} should not exceed per-tensor MSE {mse_t:.3e}"
    assert mse_c < mse_t / 2, f"on rows spanning 1000x in range, per channel should be much better ({mse_c} vs {mse_t})"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60)
@given(lo=st.floats(-1e3, 1e3), width=st.floats(1e-3, 1e3),
       bits=st.integers(2, 8), symmetric=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_quantize_dequantize_error_half_step_any_range(lo, width, bits, symmetric, seed):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    x = np.random.default_rng(seed).uniform(lo, lo + width, 64).astype(np.float32)
    scale, zp = Q._calculate_qparams(x.min(), x.max(), symmetric, qmin, qmax)
    q = Q._quantize(x, scale, zp, qmin, qmax)
    assert q.min() >= qmin and q.max() <= qmax, f"integers {q.min()}..{q.max()} outside [{qmin}, {qmax}]"
    err = np.abs(Q._dequantize(q, scale, zp).astype(np.float64) - x)
    bound = float(scale) / 2 + 4 * float(np.spacing(np.float32(np.abs(x).max())))
    assert err.max() <= bound, (f"{bits}-bit round trip error {err.max()} exceeds half a step {float(scale) / 2} "
                                f"(range [{x.min()}, {x.max()}], symmetric={symmetric})")

"""Observers: running min/max over batches (torch parity), per channel, the percentile observer."""
import numpy as np
import pytest

from tinytorch import Tensor
from tinytorch.ao import quantization as Q
from tinytorch.testing import held_bytes

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _batches(seed=0, n=4):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 6)) * (k + 1) + rng.uniform(-1, 1)).astype(np.float32) for k in range(n)]


def test_minmaxobserver_forward_running_range_over_batches():
    obs = Q.MinMaxObserver()
    with pytest.raises(RuntimeError, match="no data"):
        obs.calculate_qparams()  # nothing observed yet
    batches = _batches()
    for b in batches:
        out = obs(Tensor(b))
        assert isinstance(out, Tensor) and np.array_equal(out.numpy(), b), "the observer returns its input"
    allx = np.concatenate(batches)
    assert float(obs.min_val) == allx.min(), f"min over all batches {allx.min()}, got {obs.min_val}"
    assert float(obs.max_val) == allx.max(), f"max over all batches {allx.max()}, got {obs.max_val}"
    dtypes = (np.asarray(obs.min_val).dtype, np.asarray(obs.max_val).dtype)
    assert dtypes == (np.dtype(np.float32),) * 2, f"min_val and max_val are float32 (as PyTorch's), got {dtypes}"
    # a later batch inside the range changes nothing; one outside it extends it on that side only
    obs(np.zeros(3, np.float32))
    assert float(obs.min_val) == allx.min() and float(obs.max_val) == allx.max(), "a batch inside the range"
    obs(np.array([allx.max() + 5], dtype=np.float32))
    assert float(obs.min_val) == allx.min(), "the minimum survives a batch of one large value"
    assert float(obs.max_val) == allx.max() + 5, "the maximum grows"


@pytest.mark.parametrize("qscheme", ["per_tensor_affine", "per_tensor_symmetric"])
def test_minmaxobserver_forward_matches_torch(torch, qscheme):
    MinMaxObserver = torch.ao.quantization.MinMaxObserver

    theirs = MinMaxObserver(dtype=torch.qint8, qscheme=getattr(torch, qscheme))
    ours = Q.MinMaxObserver(qscheme=qscheme)
    for b in _batches(3):
        theirs(torch.tensor(b))
        ours(b)
    ts, tz = theirs.calculate_qparams()
    s, z = ours.calculate_qparams()
    np.testing.assert_array_equal(np.asarray(s).reshape(-1), ts.numpy(), err_msg="scale after 4 batches equals torch's")
    np.testing.assert_array_equal(np.asarray(z).reshape(-1), tz.numpy(), err_msg="zero point equals torch's")


@pytest.mark.parametrize("ch_axis", [0, 1])
@pytest.mark.parametrize("qscheme", ["per_channel_affine", "per_channel_symmetric"])
def test_minmaxobserver_forward_per_channel_matches_torch(torch, ch_axis, qscheme):
    PerChannelMinMaxObserver = torch.ao.quantization.PerChannelMinMaxObserver

    theirs = PerChannelMinMaxObserver(ch_axis=ch_axis, dtype=torch.qint8, qscheme=getattr(torch, qscheme))
    ours = Q.PerChannelMinMaxObserver(ch_axis=ch_axis, qscheme=qscheme)
    for b in _batches(5):
        theirs(torch.tensor(b))
        ours(Tensor(b))
    np.testing.assert_array_equal(ours.min_val, theirs.min_val.numpy(), err_msg="running per-channel minima")
    np.testing.assert_array_equal(ours.max_val, theirs.max_val.numpy(), err_msg="running per-channel maxima")
    ts, tz = theirs.calculate_qparams()
    s, z = ours.calculate_qparams()
    np.testing.assert_array_equal(s, ts.numpy(), err_msg="per-channel scales equal torch's")
    np.testing.assert_array_equal(z, tz.numpy(), err_msg="per-channel zero points equal torch's")


def test_percentileobserver_forward_one_batch_is_its_percentiles():
    x = np.random.default_rng(1).standard_normal(3000).astype(np.float32)
    obs = Q.PercentileObserver(99.5)
    assert obs(Tensor(x)) is not None
    np.testing.assert_allclose(float(obs.min_val), np.percentile(x, 0.5), rtol=1e-5, err_msg="0.5th percentile")
    np.testing.assert_allclose(float(obs.max_val), np.percentile(x, 99.5), rtol=1e-5, err_msg="99.5th percentile")


def test_percentileobserver_forward_averages_over_batches():
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal(n).astype(np.float32) * k + k  # sizes differ: each batch weighs the same
               for n, k in ((2000, 1.0), (500, 3.0), (3000, 0.5), (1200, 2.0))]
    obs = Q.PercentileObserver(99.0)
    for i, b in enumerate(batches, 1):
        obs(b)
        np.testing.assert_allclose(float(obs.max_val), np.mean([np.percentile(a, 99.0) for a in batches[:i]]),
                                   rtol=1e-5, err_msg=f"max_val after {i} batches: mean of their 99th percentiles")
        np.testing.assert_allclose(float(obs.min_val), np.mean([np.percentile(a, 1.0) for a in batches[:i]]),
                                   rtol=1e-5, atol=1e-6, err_msg=f"min_val after {i} batches: mean of their 1st percentiles")


def test_percentileobserver_forward_clips_outliers_for_a_finer_step():
    rng = np.random.default_rng(3)
    x = np.concatenate([np.abs(rng.standard_normal(5000)), [80.0]]).astype(np.float32)
    mm, pc = Q.MinMaxObserver(), Q.PercentileObserver(99.9)
    mm(x)
    pc(x)
    s_mm, z_mm = mm.calculate_qparams()
    s_pc, z_pc = pc.calculate_qparams()
    assert float(s_pc) < float(s_mm) / 10, f"percentile step {float(s_pc)} should be far finer than min/max's {float(s_mm)}"
    bulk = x[:-1]
    err_mm = np.mean((Q._dequantize(Q._quantize(bulk, s_mm, z_mm), s_mm, z_mm) - bulk) ** 2)
    err_pc = np.mean((Q._dequantize(Q._quantize(bulk, s_pc, z_pc), s_pc, z_pc) - bulk) ** 2)
    assert err_pc < err_mm, f"on the bulk the percentile range is more accurate ({err_pc} vs {err_mm})"


def test_percentileobserver_forward_percentiles_of_all_values_of_a_2d_batch():
    # columns of very different spreads: per-column percentiles would give one range per column
    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal((300, 4)) * np.array([0.1, 1.0, 5.0, 20.0])).astype(np.float32) for _ in range(3)]
    obs = Q.PercentileObserver(99.0)
    for i, b in enumerate(batches, 1):
        obs(Tensor(b))
        assert np.shape(obs.min_val) == () and np.shape(obs.max_val) == (), (
            f"one range for the whole tensor: min_val/max_val have shapes {np.shape(obs.min_val)}, "
            f"{np.shape(obs.max_val)}, expected () (the percentiles of all the batch's values, not per column)")
        lo = np.mean([np.percentile(a, 1.0) for a in batches[:i]])
        hi = np.mean([np.percentile(a, 99.0) for a in batches[:i]])
        np.testing.assert_allclose([float(obs.min_val), float(obs.max_val)], [lo, hi], rtol=1e-5,
                                   err_msg=f"after {i} (300, 4) batches: the mean of each batch's percentiles "
                                           f"over all 1200 of its values")
    s, z = obs.calculate_qparams()
    assert np.shape(s) == () and np.shape(z) == (), "one scale and zero point per tensor"


@pytest.mark.parametrize("make", [Q.MinMaxObserver, lambda: Q.PerChannelMinMaxObserver(ch_axis=1)],
                         ids=["per-tensor", "per-channel"])
def test_minmaxobserver_forward_keeps_a_summary_not_the_batches(make):
    """Calibration may run thousands of batches: what the observer holds does not grow with them."""
    obs = make()
    obs(np.zeros((10, 6), np.float32))
    after_one = held_bytes(obs)
    for batch in _batches(seed=3, n=20):
        obs(batch)
    assert held_bytes(obs) < after_one + 500, f"{after_one} bytes after one batch, {held_bytes(obs)} after 21"


def test_percentileobserver_forward_keeps_a_running_range_not_the_batches():
    """Its state is the mean range so far and the count: it does not grow with the batches,
    not even by a list of their percentiles (400 floats pickle to over 3000 bytes)."""
    obs = Q.PercentileObserver(99.0)
    obs(np.zeros((10, 6), np.float32))
    after_one = held_bytes(obs)
    for batch in _batches(seed=4, n=400):
        obs(batch)
    assert held_bytes(obs) < after_one + 200, f"{after_one} bytes after one batch, {held_bytes(obs)} after 401"

"""Measurement: statistics of per-run times (raw block times / number_per_run), like torch's."""
import numpy as np
import pytest
import torch_reference  # registered by tests/conftest.py

from tinytorch.utils.benchmark import BenchmarkError, Measurement, split_outliers


def test_measurement_per_run_statistics():
    m = Measurement(10, [0.040, 0.010, 0.020, 0.030], label="x")
    assert m.times == pytest.approx((0.004, 0.001, 0.002, 0.003)), f"per-run times keep the order measured: {m.times}"
    assert m.median == pytest.approx(0.0025), f"median of 1, 2, 3, 4 ms per run: expected 2.5 ms, got {m.median}"
    assert (m.p25, m.p75) == pytest.approx((0.00175, 0.00325)), f"quartiles: got {(m.p25, m.p75)}"
    assert m.iqr == pytest.approx(0.0015), f"IQR expected 1.5 ms, got {m.iqr}"
    assert m.mean == pytest.approx(0.0025), f"mean expected 2.5 ms, got {m.mean}"


def test_measurement_median_is_robust_and_mean_is_not():
    m = Measurement(1, [1.0, 1.1, 0.9, 1.0, 9.0])
    assert m.median == pytest.approx(1.0), f"one slow run must not move the median: got {m.median}"
    assert m.mean == pytest.approx(2.6), f"the mean of 1.0, 1.1, 0.9, 1.0, 9.0 is 2.6, got {m.mean}"
    assert m.outliers == [9.0], f"the slow run is beyond Tukey's high fence: got {m.outliers}"
    assert m.has_warnings == (m.iqr / m.median >= 0.1), "a warning exactly when IQR / median >= 0.1"


@pytest.mark.parametrize("number", [1, 3, 100])
def test_measurement_parity_with_torch(torch, number):
    common = torch_reference.companion_module(torch, "torch.utils.benchmark.utils.common")
    TorchMeasurement, TaskSpec = common.Measurement, common.TaskSpec

    raw = list(np.random.default_rng(number).exponential(1e-3, 23) + 1e-4)
    ours = Measurement(number, raw)
    theirs = TorchMeasurement(number, raw, TaskSpec("f()", "pass"))
    assert ours.times == pytest.approx(tuple(theirs.times), rel=1e-12), "times: raw / number_per_run, like torch's"
    for name in ("median", "mean", "iqr"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name), rel=1e-9), \
            f"Measurement.{name}: expected torch's {getattr(theirs, name)}, got {getattr(ours, name)}"
    for threshold in (0.05, 0.1, 0.5, 2.0):
        assert ours.meets_confidence(threshold) == theirs.meets_confidence(threshold), \
            f"meets_confidence({threshold}) as torch's"


def test_measurement_refuses_no_runs_and_bad_times():
    with pytest.raises(BenchmarkError, match="empty-workload"):
        Measurement(5, [], label="empty-workload")
    for bad in (0.0, -1e-3, float("nan"), float("inf")):
        with pytest.raises(BenchmarkError, match="bad-time"):
            Measurement(1, [1e-3, bad, 1e-3], label="bad-time")


def test_split_outliers_tukey_fences_both_sides():
    kept, out = split_outliers([10, 11, 12, 13, 14, 100, 10.5, 0.1])
    assert out == [100.0, 0.1], f"outliers above Q3 + 1.5 IQR and below Q1 - 1.5 IQR, in order: got {out}"
    assert kept == [10.0, 11.0, 12.0, 13.0, 14.0, 10.5], f"kept samples in order: got {kept}"


def test_split_outliers_fences_are_inclusive_and_scale_with_k():
    assert split_outliers([4, 0, 2, 1, 3], k=0.5) == ([4.0, 0.0, 2.0, 1.0, 3.0], []), \
        "on 0..4 with k = 0.5 the fences are exactly 0 and 4: samples on a fence are kept"
    xs = list(np.random.default_rng(0).standard_normal(200))
    q1, q3 = np.quantile(xs, [0.25, 0.75])
    for k in (0.0, 0.5, 1.5, 3.0):
        lo, hi = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
        kept, out = split_outliers(xs, k)
        assert kept == [x for x in xs if lo <= x <= hi], f"kept samples for k = {k}"
        assert out == [x for x in xs if not lo <= x <= hi], f"outliers for k = {k}"
    assert split_outliers([5.0, 5.0, 5.0, 9.0])[1] == [9.0], "Q1 = 5, Q3 = 6: the high fence is 7.5"
    assert split_outliers([1.0]) == ([1.0], []), "one sample is kept"

"""compare: interleaved A B A B rounds, the median of per-pair ratios; Compare's table; plot."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from _fakes import FakeMachine  # noqa: E402

from tinytorch.utils.benchmark import BenchmarkError, Compare, Measurement, compare, plot  # noqa: E402


def test_compare_interleaves_and_takes_the_median_of_pair_ratios():
    fm = FakeMachine([9.0, 9.0, 2.0, 1.0, 6.0, 3.0, 4.0, 1.0, 2.0, 1.0, 30.0, 1.0])
    r = compare(fm.workload("A"), fm.workload("B"), rounds=5, number=1, timer=fm.clock)
    assert fm.log == ["A", "B"] * 6, f"one warm-up each, then A B A B ...: got {fm.log}"
    assert r.ratios == pytest.approx((2.0, 2.0, 4.0, 2.0, 30.0)), f"per-pair ratios a/b in round order: {r.ratios}"
    assert r.ratio == pytest.approx(2.0), f"median of the per-pair ratios is 2 (median(a)/median(b) is 4): got {r.ratio}"
    assert (r.low, r.high) == pytest.approx((2.0, 4.0)), f"quartiles of the ratios: got {(r.low, r.high)}"
    assert r.a.raw_times == pytest.approx([2.0, 6.0, 4.0, 2.0, 30.0]), "A's measurement holds its blocks"
    assert r.b.raw_times == pytest.approx([1.0, 3.0, 1.0, 1.0, 1.0]), "B's measurement holds its blocks"


def test_compare_cancels_drift():
    fm = FakeMachine([1.0, 1.0] + [3.0, 1.5] * 3 + [30.0, 15.0] * 3)
    r = compare(fm.workload("a"), fm.workload("b"), rounds=6, number=1, timer=fm.clock)
    assert r.ratio == pytest.approx(2.0) and r.low == pytest.approx(2.0) and r.high == pytest.approx(2.0), \
        f"A takes twice B's time in every round, the machine slows 10x midway: ratio 2 with no spread, got {r}"


def test_compare_blocks_and_warmups():
    fm = FakeMachine([1.0])
    r = compare(fm.workload("A"), fm.workload("B"), rounds=3, number=4, warmup=2, timer=fm.clock)
    assert fm.log == ["A", "B", "A", "B"] + ["A"] * 4 + ["B"] * 4 + ["A"] * 4 + ["B"] * 4 + ["A"] * 4 + ["B"] * 4, \
        f"2 warm-up rounds (A, B), then 3 rounds of a block of 4 A's and a block of 4 B's: got {fm.log}"
    assert r.a.number_per_run == 4 and r.a.median == pytest.approx(1.0), "per-run times of blocks of 4"
    assert len(r.ratios) == 3, "one ratio per round"


def test_compare_refuses_broken_workloads():
    def broken():
        raise ValueError("bad shape")

    with pytest.raises(BenchmarkError, match="bad shape"):
        compare(lambda: None, broken, rounds=3)
    with pytest.raises(ValueError, match="rounds"):
        compare(lambda: None, lambda: None, rounds=0)


def test_compare_table_has_every_row():
    fm = FakeMachine([1e-3, 2e-3, 1e-3, 2e-3, 1.1e-3, 2e-3, 1e-3, 2.2e-3])
    r = compare(fm.workload("fast"), fm.workload("slow"), rounds=3, number=1, timer=fm.clock, label="toy")
    other = Measurement(1, [1e-3, 1.2e-3, 1.1e-3, 1e-3], label="toy", sub_label="other", description="fake")
    third = Measurement(2, [4e-6, 4e-6], label="second block", sub_label="row", description="col")
    text = Compare([r, other, third]).table()
    for needle in ("toy", "fast", "slow", "other", "fake", "second block", "row", "col", "ms", "us"):
        assert needle in text, f"the table must show {needle!r}:\n{text}"
    assert f"{r.b.median * 1e3:.1f}" in text, f"slow's median in ms ({r.b.median * 1e3:.1f}) is in:\n{text}"
    fig = plot([r, other])
    assert len(fig.axes[0].get_yticklabels()) == 3, "one box per measurement"


def test_compare_block_size_is_estimated_and_shared():
    fm = FakeMachine([1e-6])
    r = compare(fm.workload("A"), fm.workload("B"), rounds=4, timer=fm.clock)
    assert r.a.number_per_run == r.b.number_per_run == 100, \
        f"runs of 1 µs: blocks of 100 runs (torch's rule), the same for both sides; got {r.a.number_per_run}, {r.b.number_per_run}"
    assert r.ratio == pytest.approx(1.0) and len(r.a.raw_times) == 4, "equal runs: ratio 1, one block per round"


def test_compare_blocks_use_the_smaller_estimate():
    from _fakes import FakeClock, FakeWork

    clock = FakeClock()
    quick, slow = FakeWork(clock, [1e-6], "quick"), FakeWork(clock, [1e-4], "slow")
    r = compare(quick, slow, rounds=2, timer=clock)  # estimates: 100 runs for quick, 1 for slow
    assert (r.a.number_per_run, r.b.number_per_run) == (1, 1), (r.a.number_per_run, r.b.number_per_run)


def test_compare_estimates_the_block_size_after_the_warm_up():
    from _fakes import FakeClock, FakeWork

    clock = FakeClock()
    cold = [5.0] + [1e-6] * 5000  # the first call compiles: 5 s; then 1 µs a run
    r = compare(FakeWork(clock, cold, "A"), FakeWork(clock, cold, "B"), rounds=3, timer=clock)
    assert (r.a.number_per_run, r.b.number_per_run) == (100, 100), "the estimate must see the warm workloads"

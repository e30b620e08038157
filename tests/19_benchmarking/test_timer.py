"""Timer: one block on an injected clock, the refusals, the warm-up and the stopping rule."""
import pytest
from _fakes import FakeClock, FakeWork

from tinytorch.utils.benchmark import MIN_BLOCKS, BenchmarkError, Measurement, Timer, environment


def test_timer_timeit_block_on_a_fake_clock():
    clock = FakeClock()
    work = FakeWork(clock, [0.5, 0.25, 0.25])
    t = Timer(work, label="fake", timer=clock)
    assert t._timeit(3) == pytest.approx(1.0), "_timeit(3): the three runs' fake time between two clock reads"
    assert work.calls == 3, f"the workload runs exactly `number` times, ran {work.calls}"
    m = t.timeit(4)
    assert isinstance(m, Measurement) and m.number_per_run == 4 and len(m.raw_times) == 1, \
        "timeit(number): one block of `number` runs"


def test_timer_timeit_reads_the_clock_twice_per_block():
    clock = FakeClock()
    t = Timer(FakeWork(clock, [0.001]), label="fake", timer=clock)
    before = clock.reads
    t._timeit(100)
    assert clock.reads - before == 2, f"one read before the block and one after, got {clock.reads - before}"


def test_timer_timeit_refuses_a_workload_that_raises():
    def broken():
        raise KeyError("missing weight")

    with pytest.raises(BenchmarkError, match="KeyError") as info:
        Timer(broken, label="broken")._timeit(1)
    assert isinstance(info.value.__cause__, KeyError), "the workload's own exception is chained"
    assert "broken" in str(info.value), "the message names the workload"


def test_timer_timeit_refuses_a_workload_that_returns_without_running():
    def lazy():
        yield sum(range(10 ** 6))

    async def not_awaited():
        return 1

    with pytest.raises(BenchmarkError, match="generator"):
        Timer(lazy)._timeit(1)
    with pytest.raises(BenchmarkError, match="coroutine"):
        Timer(not_awaited)._timeit(1)


def test_timer_timeit_refuses_a_clock_that_did_not_advance():
    with pytest.raises(BenchmarkError, match="clock"):
        Timer(lambda: None, label="frozen", timer=FakeClock())._timeit(10)
    reads = iter([0.0, float("nan")])
    with pytest.raises(BenchmarkError, match="clock"):
        Timer(lambda: None, timer=lambda: next(reads))._timeit(1)


def test_adaptive_autorange_warmup_and_stopping_rule():
    clock = FakeClock()
    work = FakeWork(clock, [5.0, 0.01] + [0.01, 0.03, 0.01, 0.01] + [0.01] * 50)
    m = Timer(work, timer=clock).adaptive_autorange(0.1, min_run_time=0.05, max_run_time=10.0)
    assert m.number_per_run == 1, f"block size for 10 ms runs is 1, got {m.number_per_run}"
    assert 5.0 not in m.raw_times, f"the warm-up run is not timed: {m.raw_times}"
    assert m.raw_times == pytest.approx([0.01, 0.03, 0.01, 0.01, 0.01]), \
        f"stop after the first block where IQR/median < 0.1 (block 5): got {m.raw_times}"
    assert work.calls == 7, f"1 warm-up + 1 estimate + 5 blocks = 7 calls, got {work.calls}"


def test_adaptive_autorange_warmup_count():
    clock = FakeClock()
    work = FakeWork(clock, [1.0, 1.0, 1.0] + [0.02] * 20)
    m = Timer(work, timer=clock).adaptive_autorange(0.1, min_run_time=0.05, warmup=2)
    assert work.calls == 3 + MIN_BLOCKS, f"2 warm-up calls + 1 estimate + {MIN_BLOCKS} blocks, got {work.calls} calls"
    assert 1.0 not in m.raw_times, "warm-up runs are not in the measurement"


def test_adaptive_autorange_needs_min_blocks_and_min_run_time():
    clock = FakeClock()
    m = Timer(FakeWork(clock, [0.02]), timer=clock).adaptive_autorange(0.1, min_run_time=0.05)
    assert len(m.raw_times) == MIN_BLOCKS, f"3 blocks pass min_run_time, but an IQR needs {MIN_BLOCKS}: got {len(m.raw_times)}"
    clock = FakeClock()
    m = Timer(FakeWork(clock, [2.0 ** -10]), timer=clock).adaptive_autorange(0.1, min_run_time=2.0 ** -4)
    assert len(m.raw_times) == 64, f"identical runs of 1/1024 s need 64 blocks for 1/16 s: got {len(m.raw_times)}"


def test_adaptive_autorange_stops_at_the_budget():
    clock = FakeClock()
    m = Timer(FakeWork(clock, [1.0, 1.0] + [1.0, 2.0, 3.0] * 20), timer=clock).adaptive_autorange(
        0.01, min_run_time=0.05, max_run_time=10.0)
    assert m.raw_times == pytest.approx([1.0, 2.0, 3.0, 1.0, 2.0, 3.0]), \
        f"never confident: blocks until their total reaches 10 s: got {m.raw_times}"
    assert m.has_warnings, "a noisy measurement stopped by the budget carries a warning"


def test_adaptive_autorange_refuses_an_empty_budget_and_a_broken_workload():
    clock = FakeClock()
    with pytest.raises(BenchmarkError):
        Timer(FakeWork(clock, [0.01]), timer=clock).adaptive_autorange(max_run_time=0.0)

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(BenchmarkError, match="boom"):
        Timer(broken, label="broken").adaptive_autorange()


def test_adaptive_autorange_blocked_autorange_runs_to_min_run_time():
    clock = FakeClock()
    m = Timer(FakeWork(clock, [1.0, 1.0] + [1.0, 5.0] * 20), timer=clock).blocked_autorange(min_run_time=20.0)
    assert sum(m.raw_times) >= 20.0 and sum(m.raw_times[:-1]) < 20.0, \
        f"blocked_autorange stops once the blocks reach min_run_time, whatever the spread: {m.raw_times}"


def test_adaptive_autorange_measurement_carries_the_environment():
    clock = FakeClock()
    m = Timer(FakeWork(clock, [0.02]), label="L", sub_label="S", description="D",
              timer=clock).adaptive_autorange(min_run_time=0.05)
    assert (m.label, m.sub_label, m.description) == ("L", "S", "D"), "the Timer's labels are on the Measurement"
    env = m.metadata["environment"]
    for key in ("python", "platform", "cpu", "logical_cores", "physical_cores", "usable_cores", "thread_env",
                "numpy", "numba", "torch", "blas", "clock", "torch_threads"):
        assert key in env, f"the environment record must have {key!r}; it has {sorted(env)}"
    assert env["logical_cores"] >= 1 and env["numpy"], "cores and numpy's version are known"
    assert "OPENBLAS_NUM_THREADS" in env["thread_env"], "the BLAS thread setting is recorded"
    assert environment()["cpu"] == env["cpu"], "the record on the Measurement is environment()'s"


def test_adaptive_autorange_estimates_the_block_size_after_the_warm_up():
    clock = FakeClock()
    work = FakeWork(clock, [5.0] + [1e-6] * 5000)  # the first call compiles: 5 s; then 1 µs a run
    m = Timer(work, timer=clock).adaptive_autorange(0.1, min_run_time=0.0)
    assert m.number_per_run == 100, "the estimate must see the warm workload, not its 5 s first call"
    assert m.raw_times == pytest.approx([1e-4] * MIN_BLOCKS)

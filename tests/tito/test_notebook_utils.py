"""Helpers the notebooks share: timing and the optional PyTorch comparison."""
import pytest
from threadpoolctl import threadpool_info

from tinytorch.utils.timing import median_time, pinned_threads, time_samples


def test_median_time_warms_up_then_times_each_repeat():
    calls = []
    seconds = median_time(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 6
    assert 0 <= seconds < 1


def test_median_time_needs_a_repeat():
    with pytest.raises(ValueError, match="at least one timed repeat"):
        median_time(lambda: None, repeats=0)


def _blas_threads():
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_timings_run_with_one_blas_and_numba_thread_and_restore_the_limits():
    import numba
    before_blas, before_numba = _blas_threads(), numba.get_num_threads()
    assert before_blas, "numpy's BLAS should be visible to threadpoolctl"
    seen = []
    time_samples(lambda: seen.append((_blas_threads(), numba.get_num_threads())), repeats=2, warmup=0)
    assert seen == [([1] * len(before_blas), 1)] * 2, f"(BLAS threads, numba threads) while timing: {seen}"
    assert (_blas_threads(), numba.get_num_threads()) == (before_blas, before_numba), "the limits come back"
    seen.clear()
    time_samples(lambda: seen.append(_blas_threads()), repeats=1, warmup=0, threads=None)
    assert seen == [before_blas], "threads=None leaves the limits as they were"


def test_pinned_threads_needs_a_thread():
    with pytest.raises(ValueError, match="at least one"):
        with pinned_threads(0):
            pass


def test_optional_torch_is_none_with_a_note_when_missing(monkeypatch, capsys):
    import importlib.util

    from tinytorch.utils import optional

    real = importlib.util.find_spec
    monkeypatch.setattr(optional.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert optional.optional_torch() is None
    assert "PyTorch is not installed" in capsys.readouterr().out


def test_copy_bandwidth_and_matmul_peak_are_rates_of_the_fastest_run(monkeypatch):
    from tinytorch.utils import timing
    monkeypatch.setattr(timing, "time_samples", lambda fn, repeats, threads: (fn(), [0.5, 0.25, 1.0])[1])
    assert timing.copy_bandwidth(2 ** 20) == 2 * 2 ** 20 / 0.25, "read + write of 1 MiB in the fastest run, 0.25 s"
    assert timing.matmul_peak(8) == 2 * 8 ** 3 / 0.25, "2n³ FLOPs in the fastest run, 0.25 s"

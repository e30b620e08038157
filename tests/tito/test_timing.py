"""The notebooks' shared timing helper."""
import pytest

from tinytorch.utils.timing import median_time


def test_median_time_warms_up_then_times_each_repeat():
    calls = []
    seconds = median_time(lambda: calls.append(1), repeats=4, warmup=2)
    assert len(calls) == 6
    assert 0 <= seconds < 1


def test_median_time_needs_a_repeat():
    with pytest.raises(ValueError, match="at least one timed repeat"):
        median_time(lambda: None, repeats=0)

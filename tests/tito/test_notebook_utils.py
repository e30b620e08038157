"""Helpers the notebooks share: timing and the optional PyTorch comparison."""
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


def test_optional_torch_is_none_with_a_note_when_missing(monkeypatch, capsys):
    import importlib.util

    from tinytorch.utils import optional

    real = importlib.util.find_spec
    monkeypatch.setattr(optional.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert optional.optional_torch() is None
    assert "PyTorch is not installed" in capsys.readouterr().out

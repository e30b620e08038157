"""Shared test setup: make sure the package under test is the one tito built."""
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# No example database: the suite leaves no .hypothesis/ cache in the student's folder.
settings.register_profile("tinytorch", database=None, deadline=None)
settings.load_profile("tinytorch")


def pytest_configure(config):
    expected = os.environ.get("TINYTORCH_EXPECT")
    if not expected:
        return
    try:
        import tinytorch
    except Exception:  # a broken package is reported by the tests themselves
        return
    actual = Path(tinytorch.__file__).resolve().parent
    if actual != Path(expected).resolve():
        raise pytest.UsageError(
            f"tests are importing tinytorch from {actual}, but tito built it in {expected}; "
            f"check PYTHONPATH and that no other tinytorch shadows it."
        )


@pytest.fixture
def torch():
    """PyTorch, for parity tests. PyTorch is an optional extra for students, so without it these
    tests are skipped with this reason; `tito verify` (CI) fails on any skip, so they always run there."""
    return pytest.importorskip("torch", reason="parity test: install PyTorch with pip install -e '.[parity]'")


@pytest.fixture(autouse=True)
def _fresh_global_state():
    """Every test starts as in a fresh process (grad mode on) and leaves tinytorch's and
    numpy's random state as it found them: one bug fails its own tests, not dozens of others."""
    try:
        import tinytorch._tensor as _t
    except Exception:  # a broken package is reported by the tests themselves
        yield
        return
    rng = getattr(_t, "_rng", None)
    rng_state = rng.bit_generator.state if rng is not None else None
    np_state = np.random.get_state()
    _t._grad_enabled = True
    try:
        yield
    finally:
        _t._grad_enabled = True
        if rng is not None:
            _t._rng = rng
            rng.bit_generator.state = rng_state
        np.random.set_state(np_state)


def pytest_make_parametrize_id(config, val, argname):
    """Readable ids for the summary: `[shape=(2, 0, 3)]`, not `[shape5]`."""
    if isinstance(val, (bool, int, float, str, tuple, type(None))):
        text = repr(val) if not isinstance(val, str) else val
        if len(text) <= 40:
            return f"{argname}={text}"
    return None


def _frames(tb):
    """Every frame inside the tinytorch package, outermost first, as 'path:line:qualname'."""
    found = []
    while tb is not None:
        code = tb.tb_frame.f_code
        path = Path(code.co_filename)
        if "tinytorch" in path.parts:
            parts = path.parts[path.parts.index("tinytorch"):]
            found.append(f"{'/'.join(parts)}:{tb.tb_lineno}:{getattr(code, 'co_qualname', code.co_name)}")
        tb = tb.tb_next
    return found


def _message(excinfo):
    """The whole message: pytest's assertion explanation, pytest.raises's expected/actual
    lines, and notes such as hypothesis's falsifying example."""
    text = excinfo.exconly().strip()
    notes = getattr(excinfo.value, "__notes__", None) or []
    for note in notes:
        if str(note).strip() and str(note).strip() not in text:
            text += "\n" + str(note).strip()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("  Use -v")]
    return "\n".join(lines[:14])[:2500]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Record where in the tinytorch package a failure was raised and its whole message, so
    that tito can point the student to their own code (cheap, even with --tb=no). After the
    first test that runs past its time limit, stop: an endless loop costs one timeout."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    frames = _frames(call.excinfo.tb)
    message = _message(call.excinfo)
    # junit reads the properties from the item when the test finishes
    if frames:
        item.user_properties.append(("tinytorch_frames", "|".join(frames)))
    item.user_properties.append(("tito_message", message))
    if message.startswith("Failed: Timeout"):
        where = frames[-1].rsplit(":", 1)[-1] if frames else "the test"
        item.user_properties.append(("tito_timeout", where))
        item.session.shouldstop = f"a test ran past its time limit inside {where}; the rest were not run"

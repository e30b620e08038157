"""Shared test setup: make sure the package under test is the one tito built."""
import os
from pathlib import Path

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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Record where in the tinytorch package a failure was raised, so that tito can point
    the student to the notebook cell it was exported from (cheap, even with --tb=no)."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    tb, frame = call.excinfo.tb, None
    while tb is not None:
        path = Path(tb.tb_frame.f_code.co_filename)
        if "tinytorch" in path.parts:
            parts = path.parts[path.parts.index("tinytorch"):]
            frame = f"{'/'.join(parts)}:{tb.tb_lineno}"
        tb = tb.tb_next
    if frame:  # junit reads the properties from the item when the test finishes
        item.user_properties.append(("tinytorch_frame", frame))

"""pytest plugin for `tito grade`'s test run: one report line per test, through a pipe.

Loaded with `-p` in the judge process (tito/judge.py), which never imports the student's
package: the package runs in a separate answerer and can only send values back, so the
outcomes this plugin reports are the judge's own. After every test it writes one JSON line to
the grader's pipe (file descriptor $TITO_REPORT_FD): the test's id, its outcome and which of
the helpers the verdicts rest on (numpy.testing's and pytest's assertion helpers, pytest's
runner and report, builtins), bound when the plugin loaded, are no longer those objects. The
grader (tito/grade.py) counts the lines against the test list it collected from the
reference: a test with no line failed; a test with two lines, or helpers reported changed,
flag the run; a line for a test the reference does not list is ignored.
"""
import builtins
import json
import os
import sys

import _pytest.python
import _pytest.reports
import _pytest.runner
import numpy
import numpy.testing
import pytest

_FD = int(os.environ["TITO_REPORT_FD"])
_WRITE = os.write
_DUMPS = json.dumps


def _bound() -> dict:
    """{name: (object, its code object or None)} for every helper a verdict rests on."""
    objects = {
        "sys.modules[numpy.testing]": sys.modules["numpy.testing"], "numpy.testing": numpy.testing,
        "sys.modules[pytest]": sys.modules["pytest"], "sys.modules[_pytest.runner]": sys.modules["_pytest.runner"],
    }
    for name in ("assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal",
                 "assert_almost_equal", "assert_array_less", "assert_raises", "assert_approx_equal"):
        objects[f"numpy.testing.{name}"] = getattr(numpy.testing, name)
    for name in ("isclose", "allclose", "array_equal", "asarray", "all", "any", "isnan", "isfinite"):
        objects[f"numpy.{name}"] = getattr(numpy, name)
    for name in ("raises", "approx", "fail", "skip", "importorskip", "warns"):
        objects[f"pytest.{name}"] = getattr(pytest, name)
    for name in ("from_call", "__init__"):
        objects[f"CallInfo.{name}"] = _pytest.runner.CallInfo.__dict__[name]
    for name in ("call_and_report", "runtestprotocol", "check_interactive_exception", "pytest_runtest_makereport"):
        objects[f"_pytest.runner.{name}"] = getattr(_pytest.runner, name, None)
    objects["TestReport.from_item_and_call"] = _pytest.reports.TestReport.__dict__["from_item_and_call"]
    objects["TestReport.__init__"] = _pytest.reports.TestReport.__init__
    objects["Function.runtest"] = _pytest.python.Function.runtest
    objects["os.write"] = os.write
    for name, value in vars(builtins).items():
        objects[f"builtins.{name}"] = value
    return {name: (obj, getattr(getattr(obj, "__func__", obj), "__code__", None)) for name, obj in objects.items()}


def _current() -> dict:
    try:
        return _bound()
    except Exception as exc:  # a helper deleted or a module replaced by something else
        return {"?": (exc, None)}


_BOUND = _bound()


def _changed() -> list:
    now = _current()
    changed = [name for name, (obj, code) in _BOUND.items()
               if name not in now or now[name][0] is not obj or now[name][1] is not code]
    return sorted(changed) + sorted(set(now) - set(_BOUND))


def _send(record: dict) -> None:
    _WRITE(_FD, (_DUMPS(record) + "\n").encode())


def pytest_runtest_logreport(report):
    """One line per test: its call-phase outcome, or its setup's when setup did not pass."""
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _send({"id": report.nodeid, "outcome": report.outcome, "changed": _changed()})


def pytest_sessionfinish(session, exitstatus):
    _send({"end": True, "changed": _changed()})

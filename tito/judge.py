"""pytest plugin for graded test runs: the verdicts are decided where student code never runs.

Loaded with `-p tito.judge` in the process that runs the module's tests (the judge). At the
first request it starts the answerer, the process that imports the student's package
(sandboxed by `tito grade`; the command is in $TITO_ANSWERER, a JSON object {"argv": [...],
"env": {...}, "cwd": ...} whose argv holds "{read}" and "{write}" for the pipe ends). What the
conftest files add to the environment reaches it before each test file is imported. Every
`import tinytorch...` in the judge gives a stand-in whose uses are requests to it
(tito/remote.py). The assertion helpers of `tinytorch.testing` run here, from the course's
own copy ($TITO_TRUSTED_TESTING); those that measure or change the package's process
(python_steps, equality_calls, peak_bytes, spied, parallel_write_clashes, prange_trips,
divergent_barriers, multiply_written, global_reads, coalesced_share, with_garbage_shared_memory,
scattered_active_threads, bank_conflicts, held_bytes, simd_float_ops, float64_ops, math_library_calls,
parallel_regions, float64_accumulators, preserved_state, hidden_module, weak_ref, run_fresh) are
asked of the answerer.

A test also fails when an assertion failed in one of its functions the package called back,
even if the package caught it.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import zlib

import pytest

from tito import remote

_MEASURES = ("python_steps", "equality_calls", "peak_bytes", "spied", "parallel_write_clashes", "prange_trips", "element_reads",
             "divergent_barriers", "multiply_written", "global_reads", "coalesced_share", "with_garbage_shared_memory",
             "scattered_active_threads", "bank_conflicts", "held_bytes", "simd_float_ops", "float64_ops",
             "math_library_calls", "parallel_regions", "float64_accumulators")
_RUN_THERE = (*_MEASURES, "preserved_state", "hidden_module", "weak_ref", "run_fresh")
_state: dict = {}


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the pipe's end still stops it
        pass


def _start(conn: remote.Connection) -> tuple[int, int]:
    """Start the answerer (at the first request) and return the judge's pipe ends."""
    spec = json.loads(os.environ["TITO_ANSWERER"])
    to_answerer, from_judge = os.pipe()
    to_judge, from_answerer = os.pipe()
    argv = [a.replace("{read}", str(to_answerer)).replace("{write}", str(from_answerer)) for a in spec["argv"]]
    proc = subprocess.Popen(argv, env=spec.get("env"), cwd=spec.get("cwd"), pass_fds=(to_answerer, from_answerer),
                            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    os.close(to_answerer)
    os.close(from_answerer)
    _state["proc"] = proc
    return to_judge, from_judge


def _stop() -> None:
    proc = _state.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()


def _trust_testing(local) -> None:
    """The course's `tinytorch.testing`, loaded here; its helpers that measure the package's
    code where it runs are the answerer's own, looked up when called."""
    conn = _state["conn"]
    there = []

    def module_there():
        if not there:
            there.append(remote.ModuleProxy("tinytorch.testing", conn,
                                            conn.request("import", None, name="tinytorch.testing")))
        return there[0]
    for name in _RUN_THERE:
        if hasattr(local, name):
            there_fn = _looked_up(module_there, name)
            setattr(local, name, _where_it_runs(getattr(local, name), there_fn, conn) if name in _MEASURES else there_fn)


def _looked_up(module, name):
    """module().name, looked up when called (a package without it fails the test that calls it)."""
    def call(*args, **kwargs):
        return getattr(module(), name)(*args, **kwargs)
    call.__name__ = name
    return call


def _where_it_runs(here, there, conn):
    """A meter of a function's work, taken in the process that does the work: the package's
    functions, and the tests' functions that call the package, are measured there."""
    def meter(fn, *args, **kwargs):
        if isinstance(fn, remote.Proxy):
            return there(fn, *args, **kwargs)
        before = conn.requests
        result = here(fn, *args, **kwargs)
        return there(fn, *args, **kwargs) if conn.requests != before else result
    meter.__name__ = here.__name__
    return meter


def _send_environ() -> None:
    """Give the answerer what the tests' set-up added to the environment since it last heard
    (it keeps what it has: the additions are defaults)."""
    pending = {key: value for key, value in os.environ.items() if _state["environ"].get(key) != value}
    if pending:
        _state["environ"] = dict(os.environ)
        _state["conn"].request("environ", None, pending)


def _install() -> None:
    _state["environ"] = dict(os.environ)

    conn = remote.Connection(None, None, "j", on_break=_stop, start=_start, started=_send_environ)
    _state["conn"] = conn
    trusted = os.environ.get("TITO_TRUSTED_TESTING")
    finder = remote.PackageFinder(conn, {f"{remote.PACKAGE}.testing": trusted} if trusted else {},
                                  loaded=_trust_testing)
    for name in [n for n in sys.modules if n == remote.PACKAGE or n.startswith(remote.PACKAGE + ".")]:
        del sys.modules[name]
    sys.meta_path.insert(0, finder)


_install()


def pytest_collectstart(collector):
    """A conftest may import the package (starting the answerer) before it sets up the
    environment: its additions reach the answerer before the next test file is imported."""
    if "proc" in _state and _state["conn"].broken is None:
        _send_environ()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    conn = _state["conn"]
    if conn.broken is None:  # the package's own global generator starts where it would in a fresh run
        try:
            numpy_there = conn.request("import", None, name="numpy.random")
            conn.request("callattr", numpy_there, zlib.crc32(item.nodeid.encode("utf-8")), name="seed")
        except Exception:  # noqa: BLE001 - reported by the test itself
            pass
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    conn = _state["conn"]
    conn.callback_failures.clear()
    result = yield
    if conn.callback_failures:
        raise AssertionError(f"an assertion failed in a function of the test that the package called, and the "
                             f"package went on: {conn.callback_failures[0]}")
    return result


def pytest_sessionfinish(session, exitstatus):
    proc = _state.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()

"""Many short pytest runs without paying pytest's start-up each time.

`tito verify` runs each module's tests once per mutant (hundreds of runs). A fresh
interpreter spends seconds importing pytest, its plugins, hypothesis and numpy before the
first test; here one server process (`python -m tito.forkrun`) imports them once and every
run is a fork of it: a process that has never imported tinytorch, so each run imports the
package under test from its own folder, as a new process would.

Protocol (one JSON request per line on the server's stdin; replies on its stdout):
`pid ID PID` when a run starts, `exit ID CODE` when it ends (CODE < 0: killed by a signal).
"""
from __future__ import annotations

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

# Imported once in the server; nothing here may import tinytorch.
PRELOAD = ["numpy", "pytest", "_pytest.python", "_pytest.junitxml", "hypothesis", "_hypothesis_pytestplugin",
           "pytest_timeout"]


# --- the server --------------------------------------------------------------------------

def _child(request: dict) -> None:
    """In the forked process: become what the request describes, then run pytest."""
    os.setsid()  # a process group of its own, so a timeout kills whatever it started
    fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(0)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    env = request["env"]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request["cwd"])
    if env.get("PYTHONPYCACHEPREFIX"):
        sys.pycache_prefix = env["PYTHONPYCACHEPREFIX"]
    # sys.path as a new interpreter with PYTHONSAFEPATH and this PYTHONPATH would have it.
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = extra + [p for p in sys.path if p not in ("", request["cwd"]) and p not in extra]
    code = 3
    try:
        import pytest

        code = int(pytest.main(request["args"]))
    except BaseException:  # noqa: BLE001 - reported through the log and the exit code
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    import importlib.util

    for name in PRELOAD:
        __import__(name)
    if importlib.util.find_spec("torch") is not None:  # the parity tests' import, seconds on its own
        import torch  # noqa: F401
    running: dict[int, str] = {}
    out = sys.stdout
    pending = b""
    stdin_open = True
    while stdin_open or running:
        if stdin_open:
            ready, _, _ = select.select([0], [], [], 0.02)
            chunk = os.read(0, 1 << 16) if ready else None
            if chunk == b"":
                stdin_open = False
                for pid in running:  # the client is gone: so are its runs
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            elif chunk:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    request = json.loads(line)
                    out.flush()
                    pid = os.fork()
                    if pid == 0:
                        _child(request)
                    running[pid] = request["id"]
                    out.write(f"pid {request['id']} {pid}\n")
                    out.flush()
        else:
            select.select([], [], [], 0.02)
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            rid = running.pop(pid, None)
            if rid is not None:
                out.write(f"exit {rid} {os.waitstatus_to_exitcode(status)}\n")
                out.flush()


# --- the client --------------------------------------------------------------------------

class _Client:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "tito.forkrun"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.lock = threading.Lock()
        self.runs: dict[str, dict] = {}
        self.ids = itertools.count()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            kind, rid, value = line.split()
            with self.lock:
                run = self.runs.get(rid)
            if run is None:
                continue
            if kind == "pid":
                run["pid"] = int(value)
            else:
                run["code"] = int(value)
                run["done"].set()
        with self.lock:  # the server died: nothing more will finish
            for run in self.runs.values():
                run["done"].set()

    def run(self, args, env, cwd, log, timeout):
        rid = str(next(self.ids))
        run = {"done": threading.Event(), "code": None, "pid": None}
        with self.lock:
            self.runs[rid] = run
            self.proc.stdin.write(json.dumps({"id": rid, "args": list(args), "env": dict(env), "cwd": str(cwd),
                                              "log": str(log)}) + "\n")
            self.proc.stdin.flush()
        try:
            if not run["done"].wait(timeout):
                if run["pid"]:
                    try:
                        os.killpg(run["pid"], signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                run["done"].wait(10)
                return None
            if run["code"] is None:
                raise RuntimeError("tito's pytest fork server stopped unexpectedly")
            return run["code"]
        finally:
            with self.lock:
                self.runs.pop(rid, None)


_client: _Client | None = None
_client_lock = threading.Lock()


def run_pytest(args: list[str], *, env: dict, cwd: Path, log: Path, timeout: float) -> int | None:
    """pytest.main(args) in a fork of the preloaded server, with `env` as its environment;
    its exit code, or None when it ran past `timeout` seconds (then it is killed, with
    everything it started)."""
    global _client
    with _client_lock:
        if _client is None or _client.proc.poll() is not None:
            _client = _Client()
        client = _client
    return client.run(args, env, cwd, log, timeout)


if __name__ == "__main__":
    serve()

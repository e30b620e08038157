"""`tito verify`: the course's own test command (README, CI).

For every available module: the reference solutions pass the module's tests with nothing
skipped; every one of those tests fails when that module alone is swapped back to its
released stubs; the solution notebook runs top to bottom. Then: the released files are
current (`tito release --check`) and tito's own tests pass.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time

from tito import build, testing
from tito.course import available_modules, find_root, resolve
from tito.release import release

NOTEBOOK_CELL_TIMEOUT_S = 600


class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []

    def report(self, name: str, ok: bool, detail: str = "", started: float | None = None) -> None:
        took = f" ({time.perf_counter() - started:.1f} s)" if started else ""
        print(f"{'✓' if ok else '✗'} {name}{took}", flush=True)
        if detail and not ok:
            print("    " + detail.replace("\n", "\n    "), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)


def execute_notebook(path, package_parent) -> str | None:
    """Run a solution notebook in a fresh kernel; None when every cell ran."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = jupytext.read(path, fmt="py:percent")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(package_parent)
    try:
        NotebookClient(nb, kernel_name="python3", timeout=NOTEBOOK_CELL_TIMEOUT_S,
                       extra_arguments=["--log-level=ERROR"],  # no start-up chatter in CI logs
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as exc:
        return str(exc).strip().splitlines()[-1] if str(exc).strip() else "a cell failed"
    except Exception as exc:  # kernel failed to start, timeout, ...
        return f"{type(exc).__name__}: {exc}"
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return None


def verify(only: list[str] | None = None) -> int:
    """Check the whole course, or with `only` just those modules (no release or tito checks)."""
    root = find_root()
    checks = Checks()
    modules = [resolve(spec, root) for spec in only] if only else available_modules(root)
    print(f"tito verify: {len(modules)} module(s): " + ", ".join(m.slug for m in modules), flush=True)

    if not only:
        started = time.perf_counter()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = release(check=True)
        checks.report("tito release --check", code == 0, out.getvalue().strip(), started)

    solutions = build.build_solutions(root)
    for module in modules:
        started = time.perf_counter()
        outcome = testing.run_suite(module, solutions, show_output=False)
        ok = outcome.ok and outcome.skipped == 0
        detail = testing.summary(module, outcome, "the solutions")
        if outcome.skipped:
            detail += f"\n{outcome.skipped} test(s) skipped: parity tests must run (install the dev extra)."
        checks.report(f"{module.slug}: solutions pass all {outcome.total} tests", ok, detail, started)

        started = time.perf_counter()
        variant = build.build_stub_variant(root, solutions, module)
        stub = testing.run_suite(module, variant, show_output=False)
        ok = stub.problem is None and stub.passed == 0 and stub.skipped == 0 and stub.failed > 0
        detail = stub.problem or (
            f"{stub.passed} test(s) pass and {stub.skipped} skip against the stub; a test that passes on "
            f"a stub proves nothing:\n" + "\n".join(stub.passes[:20]))
        checks.report(f"{module.slug}: all {stub.total} tests fail against the released stub", ok, detail, started)

        started = time.perf_counter()
        problem = execute_notebook(module.solution_path, solutions)
        checks.report(f"{module.slug}: solution notebook runs top to bottom", problem is None, problem or "", started)

    if not only:
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", str(root / "tests" / "tito"), "-q", "-p", "no:cacheprovider"],
            cwd=root, capture_output=True, text=True,
        )
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        last = tail.splitlines()[-1] if tail else ""
        checks.report(f"tito's own tests: {last.strip('= ')}", proc.returncode == 0, tail, started)

    if checks.failed:
        print("\nfailed: " + "; ".join(checks.failed))
    print(f"\nverify: {checks.passed} passed, {len(checks.failed)} failed", flush=True)
    return 1 if checks.failed else 0


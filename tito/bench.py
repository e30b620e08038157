"""`tito bench`: the benchmark suite (benchmarks/suite.py), tinytorch against PyTorch.

Each run measures the reference build (or, with --mine, also the student's own package) and
PyTorch CPU in the same process, with the same thread count, and prints per workload both
medians and their ratio. Nothing is reported for a workload that did not run.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tito import build
from tito.course import find_root, resolve
from tito.errors import TitoError
from tito.testing import THREAD_VARS


def _seconds(value):
    if value is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def _run_suite(root: Path, package_parent: Path, threads: int, quick: bool, only: list[str]) -> dict:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise TitoError("tito bench compares with PyTorch, which is not installed: install the CPU build "
                        "(pip install torch --index-url https://download.pytorch.org/whl/cpu), then try again.")
    env = dict(os.environ, PYTHONPATH=str(package_parent), PYTHONDONTWRITEBYTECODE="1",
               TITO_BENCH_THREADS=str(threads))
    env.update({var: str(threads) for var in THREAD_VARS})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        cmd = [sys.executable, str(root / "benchmarks" / "suite.py"), "--out", str(out)]
        cmd += (["--quick"] if quick else []) + (["--only", *only] if only else [])
        proc = subprocess.run(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0 or not out.is_file():
            raise TitoError(f"the benchmark suite stopped (exit code {proc.returncode}) before writing results; "
                            f"its output is above.")
        return json.loads(out.read_text())


def _completed_course(root: Path, number: int, dest: Path) -> Path:
    """A throwaway copy of the course in which module `number` is complete (the solution as
    the student's notebook, modules 1..number exported), for timing `tito test` as a student."""
    import jupytext
    import nbformat

    for name in ("tito", "tests", "modules", "pyproject.toml"):
        src = root / name
        (shutil.copytree(src, dest / name, ignore=build.IGNORE) if src.is_dir() else shutil.copy2(src, dest / name))
    shutil.copytree(build.build_prefix(root, number) / "tinytorch", dest / "tinytorch")
    module = resolve(str(number), root)
    solved = jupytext.read(module.solution_path, fmt="py:percent")
    for cell in solved.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    nbformat.write(solved, dest / module.notebook_rel)
    return dest


def _time_tito_test(root: Path, number: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        course = _completed_course(root, number, Path(tmp) / "course")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TINYTORCH", "TITO_", "PYTHONPATH"))}
        env["TINYTORCH_ROOT"] = str(course)
        times, code = [], None
        for _ in range(repeats):
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                                   "from tito.cli import main; raise SystemExit(main(sys.argv[2:]))",
                                   str(course), "test", "module", f"{number:02d}"],
                                  cwd=course, env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - started)
            code = proc.returncode
        if code != 0:
            return {"ran": False, "error": f"tito test module {number:02d} failed on the completed module:\n"
                                           + (proc.stdout + proc.stderr)[-1500:]}
        times.sort()
        return {"ran": True, "median_s": times[len(times) // 2], "times_s": times}


def bench(*, quick: bool = False, threads: int = 1, json_path: Path | None = None, mine: bool = False,
          only: list[str] | None = None) -> int:
    root = find_root()
    if not (root / "benchmarks" / "suite.py").is_file():
        raise TitoError(f"{root} has no benchmarks/suite.py: tito bench runs in a full checkout of the course.")
    if threads < 1:
        raise TitoError(f"--threads must be at least 1, got {threads}")
    runs = {"reference": _run_suite(root, build.build_solutions(root), threads, quick, only or [])}
    if mine:
        runs["yours"] = _run_suite(root, root, threads, quick, only or [])
    test_time = None
    if not quick and not only:
        print("timing `tito test module 06` on a completed module ...", flush=True)
        test_time = _time_tito_test(root, 6, repeats=3)

    env = runs["reference"]["environment"]
    print(f"\ntito bench{' --quick' if quick else ''}: {threads} thread(s) for both; {env.get('cpu', '?')}; "
          f"numpy {env.get('numpy', '?')}, torch {env.get('torch', '?')}")
    head = f"{'workload':<20} {'tinytorch':>11} {'PyTorch':>11} {'ratio':>7} {'(IQR)':>15} {'target':>8}"
    print(head + "\n" + "-" * len(head))
    missed = failed = 0
    for who, result in runs.items():
        if len(runs) > 1:
            print(f"[{who}: {result['environment'].get('package')}]")
        for w in result["workloads"]:
            if not w["ran"]:
                failed += 1
                print(f"{w['name']:<20} did not run: {w['error']}")
                continue
            mark = "✓" if w["met"] else "✗"
            missed += not w["met"]
            spread = f"({w['ratio_low']:.2f}-{w['ratio_high']:.2f})"
            print(f"{w['name']:<20} {_seconds(w['a_median_s']):>11} {_seconds(w['b_median_s']):>11} "
                  f"{w['ratio']:>7.2f} {spread:>15} {w['target']:>7} {mark}"
                  + (f"  ({w['a_label']} / {w['b_label']})" if w["b_label"] != "PyTorch" else ""))
    if test_time is not None:
        if test_time["ran"]:
            ok = test_time["median_s"] <= 5.0
            missed += not ok
            print(f"{'tito test module 06':<20} {_seconds(test_time['median_s']):>11} {'':>11} {'':>7} {'':>15} "
                  f"{'<= 5 s':>7} {'✓' if ok else '✗'}")
        else:
            failed += 1
            print(f"{'tito test module 06':<20} did not run: {test_time['error']}")
    print("\nratio = tinytorch median / PyTorch median (the two sides named in the workload for numba and the "
          "KV cache), from interleaved pairs; IQR = quartiles of the per-pair ratios.")
    if json_path:
        json_path.write_text(json.dumps({"runs": runs, "tito_test_module_06": test_time}, indent=1, default=str))
        print(f"results and environment: {json_path}")
    if failed:
        print(f"{failed} workload(s) did not run.")
    return 1 if failed else 0

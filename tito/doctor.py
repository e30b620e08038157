"""`tito doctor`: is this environment ready for the course? Says what to fix."""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from tito.course import available_modules, find_root

REQUIRED = ["numpy", "numba", "matplotlib", "pytest", "pytest_timeout", "hypothesis",
            "jupytext", "nbformat", "nbclient", "ipykernel", "tqdm", "safetensors"]
OPTIONAL = {"torch": "live parity tests (without it they replay stored answers): pip install -e \".[parity]\"",
            "nbgrader": "instructor autograding: pip install -e \".[instructor]\""}


def doctor() -> int:
    problems = 0

    def line(ok: bool, what: str, fix: str = "") -> None:
        nonlocal problems
        print(f"{'✓' if ok else '✗'} {what}" + ("" if ok or not fix else f"\n    fix: {fix}"))
        problems += 0 if ok else 1

    line(sys.version_info >= (3, 10), f"Python {sys.version.split()[0]} (3.10 or newer needed)",
         "install Python 3.10+ and recreate your virtual environment")
    root = find_root()
    line(True, f"course folder: {root}")
    for name in REQUIRED:
        found = importlib.util.find_spec(name) is not None
        line(found, f"package {name}", 'pip install -e ".[dev]" (or at least pip install -e .) in the course folder')
    for name, why in OPTIONAL.items():
        found = importlib.util.find_spec(name) is not None
        print(f"{'✓' if found else '-'} optional {name}" + ("" if found else f" (for {why})"))
    spec = importlib.util.find_spec("tinytorch")
    where = Path(spec.origin).parent if spec and spec.origin else None
    line(where is not None and where.resolve() == (root / "tinytorch").resolve(),
         f"`import tinytorch` loads {where or 'nothing'}",
         'run pip install -e . in this course folder so tinytorch is your own package')
    line(shutil.which("jupyter") is not None, "jupyter on PATH", "pip install -e . (it installs Jupyter)")
    dot = shutil.which("dot")
    print(f"{'✓' if dot else '-'} optional Graphviz `dot`" + ("" if dot else
          " (to draw autograd graphs as pictures in module 06; the text view works without it): "
          "sudo apt-get install graphviz, brew install graphviz, or conda install graphviz"))
    bwrap = shutil.which("bwrap")
    print(f"{'✓' if bwrap else '-'} optional bubblewrap `bwrap`" + ("" if bwrap else
          " (instructors: tito grade runs student code in its sandbox; sudo apt-get install bubblewrap, "
          "then tito grade setup)"))
    for module in available_modules(root):
        line(module.notebook_path.is_file(), f"{module.notebook_rel} present",
             f"tito module reset {module.number:02d}")
    print("\nAll good." if problems == 0 else f"\n{problems} problem(s) to fix.")
    return 0 if problems == 0 else 1

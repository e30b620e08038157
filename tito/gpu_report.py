"""`tito gpu-report`: module 17's kernels timed on a real NVIDIA GPU (benchmarks/gpu_report.py).

It measures the reference build, or with --mine the student's own package, in a process of
its own: numba must be imported there without the CUDA simulator that `tito test` uses.
"""
from __future__ import annotations

import os
import subprocess
import sys

from tito import build
from tito.course import find_root
from tito.errors import TitoError


def gpu_report(mine: bool = False, simulator: bool = False) -> int:
    root = find_root()
    script = root / "benchmarks" / "gpu_report.py"
    if not script.is_file():
        raise TitoError(f"{root} has no benchmarks/gpu_report.py: tito gpu-report runs in a full checkout.")
    package_parent = root if mine else build.build_solutions(root)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(PYTHONPATH=str(package_parent), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, str(script), *(["--simulator"] if simulator else [])], env=env,
                          cwd=package_parent)
    return proc.returncode

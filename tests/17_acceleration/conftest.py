"""Module 17's test setup, run before anything imports numba.

Without an NVIDIA GPU the CUDA kernels run in numba's CUDA simulator; a setting of
NUMBA_ENABLE_CUDASIM made by the caller is respected (so the same tests run on a real GPU).
numba's on-disk cache goes to the build folder, never into the course tree, and the
"workqueue" threading layer is used (safe when a process forks).
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def _has_nvidia_gpu():
    """True when `nvidia-smi -L` lists a GPU (asked without importing numba)."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


if "NUMBA_ENABLE_CUDASIM" not in os.environ and not _has_nvidia_gpu():
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
_build = os.environ.get("TITO_BUILD_DIR") or str(Path(__file__).resolve().parents[2] / "build")
if not os.access(Path(_build).parent if not Path(_build).exists() else _build, os.W_OK):
    _build = tempfile.gettempdir()
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(_build, "numba_cache"))
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

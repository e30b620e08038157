"""Module 17's test setup, run before anything imports numba.

Without an NVIDIA GPU the CUDA kernels run in numba's CUDA simulator; a setting of
NUMBA_ENABLE_CUDASIM made by the caller is respected (so the same tests run on a real GPU).
numba's on-disk cache goes to the build folder, never into the course tree, and the
"workqueue" threading layer is used (safe when a process forks).
"""
import os
import tempfile
from pathlib import Path

from tinytorch.testing import use_cuda_simulator_unless_gpu

use_cuda_simulator_unless_gpu()
_build = os.environ.get("TITO_BUILD_DIR") or str(Path(__file__).resolve().parents[2] / "build")
if not os.access(Path(_build).parent if not Path(_build).exists() else _build, os.W_OK):
    _build = tempfile.gettempdir()
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(_build, "numba_cache"))
os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")

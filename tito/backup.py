"""Backups of student notebooks: nothing overwrites one without keeping a copy first."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from tito.course import Module


def backup_notebook(module: Module) -> Path:
    """Copy the module's notebook to .tito/backups/NN_name/name-YYYYmmdd-HHMMSS.ipynb."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = module.root / ".tito" / "backups" / module.slug
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{module.name}-{stamp}.ipynb"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{module.name}-{stamp}-{n}.ipynb"
    shutil.copy2(module.notebook_path, target)
    return target

"""tito's tests run the real CLI in a throwaway copy of the course, never in the checkout."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPY = ["tito", "tinytorch", "solutions", "modules", "tests", "milestones", "benchmarks", "book", "pyproject.toml"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".ipynb_checkpoints")


class Course:
    def __init__(self, root: Path):
        self.root = root

    def tito(self, *args, timeout=600, first_on_path=None, **env_extra):
        """Run the copy's tito on the copy's files; `first_on_path` goes before it on sys.path."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYTHONSAFEPATH", "TINYTORCH", "TITO_"))}
        env.update({"TINYTORCH_ROOT": str(self.root), "PYTHONDONTWRITEBYTECODE": "1", **env_extra})
        path = [str(first_on_path)] if first_on_path else []
        path.append(str(self.root))
        code = f"import sys; sys.path[:0] = {path!r}; from tito.cli import main; raise SystemExit(main(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-c", code, *args], cwd=self.root, env=env,
                              capture_output=True, text=True, timeout=timeout)

    def path(self, rel: str) -> Path:
        return self.root / rel


def make_course(root: Path, names=COPY) -> Course:
    """A throwaway copy of the course's `names` (top-level files and folders) at `root`."""
    root.mkdir(parents=True)
    for name in names:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=IGNORE)
        else:
            shutil.copy2(src, root / name)
    return Course(root)


@pytest.fixture(scope="session")
def course_factory():
    """make_course, for fixtures of a wider scope than one test."""
    return make_course


@pytest.fixture
def course(tmp_path) -> Course:
    return make_course(tmp_path / "course")

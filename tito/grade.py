"""`tito grade`: autograde students' notebooks for one module with nbgrader.

It wraps the instructor's nbgrader steps in a course folder it manages (default
build/grading): put the solution in source/, generate the assignment, copy each
submission into submitted/, autograde with a per-cell timeout (so an endless loop is
stopped), generate feedback, and export grades.csv. nbgrader restores every graded test
cell from the source before running, so editing or deleting a test cell earns nothing.
"""
from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tito import build
from tito.course import Module, find_root, resolve
from tito.errors import TitoError


def _nbgrader(course_dir: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args,
           f"--CourseDirectory.root={course_dir}", "--CourseDirectory.course_id=tinytorch"]
    return subprocess.run(cmd, cwd=course_dir, env=env, capture_output=True, text=True)


def _submissions(folder: Path, module: Module) -> dict[str, Path]:
    """{student_id: notebook} from <folder>/<student_id>/<name>.ipynb."""
    if not folder.is_dir():
        raise TitoError(f"submissions folder {folder} does not exist.")
    found = {}
    for student in sorted(p for p in folder.iterdir() if p.is_dir()):
        notebook = student / f"{module.name}.ipynb"
        if notebook.is_file():
            found[student.name] = notebook
    if not found:
        raise TitoError(
            f"no submissions in {folder}: expected one folder per student holding {module.name}.ipynb, "
            f"e.g. {folder}/alice/{module.name}.ipynb."
        )
    return found


def grade(spec: str, submissions: Path, course_dir: Path | None = None, cell_timeout: int = 120) -> int:
    import jupytext
    import nbformat

    if importlib.util.find_spec("nbgrader") is None:
        raise TitoError('nbgrader is not installed: pip install -e ".[instructor]".')
    root = find_root()
    module = resolve(spec, root)
    course_dir = (course_dir or build.build_root(root) / "grading").resolve()
    found = _submissions(submissions, module)
    # Later modules import earlier ones: grade against the reference package.
    env = dict(os.environ, PYTHONPATH=str(build.build_solutions(root)), PYTHONDONTWRITEBYTECODE="1")
    # nbgrader runs helper programs (alembic) by name: find the ones beside this Python first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    source = course_dir / "source" / module.slug
    source.mkdir(parents=True, exist_ok=True)
    nb = jupytext.read(module.solution_path, fmt="py:percent")
    for cell in nb.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    nbformat.write(nb, source / f"{module.name}.ipynb")

    proc = _nbgrader(course_dir, "generate_assignment", module.slug, "--force", env=env)
    if proc.returncode != 0:
        raise TitoError(f"nbgrader generate_assignment failed:\n{proc.stderr[-3000:]}")
    for student, notebook in found.items():
        target = course_dir / "submitted" / student / module.slug
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        shutil.copy2(notebook, target / notebook.name)
        proc = _nbgrader(course_dir, "autograde", module.slug, f"--student={student}", "--force",
                         "--create", f"--Execute.timeout={cell_timeout}", env=env)
        print(f"autograded {student}" + ("" if proc.returncode == 0 else f" (nbgrader reported a problem:\n"
                                                                           f"{proc.stderr[-1500:]})"), flush=True)
    proc = _nbgrader(course_dir, "generate_feedback", module.slug, "--force", env=env)
    if proc.returncode != 0:
        print(f"nbgrader generate_feedback reported a problem:\n{proc.stderr[-1500:]}")
    proc = _nbgrader(course_dir, "export", f"--assignment={module.slug}", env=env)
    csv_path = course_dir / "grades.csv"
    if proc.returncode != 0 or not csv_path.is_file():
        raise TitoError(f"nbgrader export failed:\n{proc.stderr[-3000:]}")
    print(f"\n{'student':<20} {'score':>8} / max")
    with open(csv_path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("assignment") == module.slug and row.get("student_id") in found:
                print(f"{row['student_id']:<20} {float(row['score']):>8.1f} / {float(row['max_score']):.1f}")
    print(f"\ngrades: {csv_path}\nfeedback: {course_dir / 'feedback'}")
    return 0


"""`tito grade` against simulated students, honest and hostile, end to end (nbgrader, the
sandbox), on two modules. Each attack scores 0 or is flagged; no student touches another's
grade or files; missing, misnamed and broken submissions are listed with a reason."""
import csv
import html as htmllib

import jupytext
import nbformat
import pytest

# Whole tito commands (nbgrader, sandboxed kernels, test suites): far longer than a unit test.
pytestmark = pytest.mark.timeout(1800)


def _copy(nb):
    return nbformat.reads(nbformat.writes(nb), as_version=4)


def _solution_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]


def _graded_cells(nb):
    return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]


IMPORT_REFERENCE = (
    "import importlib, pkgutil, tinytorch\n"
    "for _m in pkgutil.walk_packages(tinytorch.__path__, 'tinytorch.'):\n"
    "    try:\n"
    "        globals().update({k: v for k, v in vars(importlib.import_module(_m.name)).items() if k[:2] != '__'})\n"
    "    except Exception:\n"
    "        pass\n")

# How an attacker looks for files: walk everything visible (not /proc, whose links loop back
# to /, nor the big system trees), and the folders above the kernel's working directory.
FIND_FILES = (
    "import os\n"
    "def _find(*suffixes):\n"
    "    found = []\n"
    "    for top in ('/', '../../../..'):\n"
    "        for folder, subfolders, files in os.walk(top):\n"
    "            subfolders[:] = [s for s in subfolders if s not in ('proc', 'sys', 'dev', 'usr', 'site-packages')]\n"
    "            found += [os.path.join(folder, f) for f in files if f.endswith(suffixes)]\n"
    "    return found\n")

READ_INSTRUCTOR_FILES = FIND_FILES + (
    "for _p in _find('.py', '.ipynb', 'gradebook.db'):\n"
    "    if _p.endswith('.py') and '/solutions/' in _p and '{slug}' in _p:\n"
    "        import jupytext\n"
    "        for _c in jupytext.read(_p).cells:\n"
    "            if _c.cell_type == 'code' and not _c.metadata.get('nbgrader', {{}}).get('grade'):\n"
    "                try:\n"
    "                    exec(_c.source, globals())\n"
    "                except Exception:\n"
    "                    pass\n")

SWITCH_TESTS_OFF = (
    "import ast\n"
    "class _Swallow(ast.NodeTransformer):\n"
    "    def visit_Module(self, node):\n"
    "        handler = ast.ExceptHandler(type=ast.Name('BaseException', ast.Load()), name=None, body=[ast.Pass()])\n"
    "        body = [ast.Try(body=node.body or [ast.Pass()], handlers=[handler], orelse=[], finalbody=[])]\n"
    "        return ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))\n"
    "get_ipython().ast_transformers.append(_Swallow())\n")

VANDAL = FIND_FILES + (
    "import sqlite3\n"
    "for _db in _find('gradebook.db'):\n"
    "    try:\n"
    "        _c = sqlite3.connect(_db)\n"
    "        _c.execute('update grade set auto_score = 0, manual_score = 0')\n"
    "        _c.commit()\n"
    "    except Exception:\n"
    "        pass\n"
    "for _nb in _find('.ipynb'):\n"
    "    try:\n"
    "        open(_nb, 'w').write('vandalised')\n"
    "    except Exception:\n"
    "        pass\n")


def _hidden_test_lines(source):
    lines = []
    for region in source.split("### BEGIN HIDDEN TESTS")[1:]:
        lines += [line.strip() for line in region.split("### END HIDDEN TESTS")[0].splitlines()
                  if len(line.strip()) > 20]
    return lines


def _submissions(course, root, slug, name, everyone):
    released = nbformat.read(course.path(f"modules/{slug}/{name}.ipynb"), as_version=4)
    solved = jupytext.read(course.path(f"solutions/{slug}/{name}.py"))
    for cell in solved.cells:
        cell.metadata.pop("lines_to_next_cell", None)

    def submit(student, nb, filename=f"{name}.ipynb"):
        (root / student).mkdir(parents=True)
        if isinstance(nb, str):
            (root / student / filename).write_text(nb)
        else:
            nbformat.write(nb, root / student / filename)

    submit("complete", solved)
    if everyone:  # (tito verify grades the released notebook of every module already)
        submit("empty", released)
    nb = _copy(released)  # every solution cell imports whatever the reference package holds
    for cell in _solution_cells(nb):
        cell.source = IMPORT_REFERENCE
    submit("imports_reference", nb)
    nb = _copy(released)  # the first solution cell searches the disk for the solutions and runs them
    for i, cell in enumerate(_solution_cells(nb)):
        cell.source = READ_INSTRUCTOR_FILES.format(slug=slug) if i == 0 else "pass"
    submit("reads_instructor_files", nb)
    for student, code in [("switches_tests_off", SWITCH_TESTS_OFF), ("vandal", VANDAL)]:
        nb = _copy(released)
        _solution_cells(nb)[0].source = code
        submit(student, nb)
    if everyone:  # honest mistakes, on one module
        edits = _copy(released)  # every test cell edited to pass: nbgrader restores them
        for cell in _graded_cells(edits):
            cell.source = "pass"
        submit("edits_tests", edits)
        looping = _copy(solved)  # an endless loop: the cell timeout stops it, the rest still runs
        _solution_cells(looping)[0].source = "while True:\n    pass\n\n" + _solution_cells(looping)[0].source
        submit("loops", looping)
        deleted = _copy(solved)  # a complete notebook whose first test cell was deleted
        deleted.cells.remove(_graded_cells(deleted)[0])
        submit("deletes_a_test", deleted)
    (root / "missing").mkdir()
    submit("misnamed", solved, filename=f"{name} (1).ipynb")
    submit("broken", '{"cells": [ not json')
    return sum(c.metadata["nbgrader"]["points"] for c in _graded_cells(solved))


@pytest.mark.parametrize("slug, name, everyone", [("02_activations", "activations", True),
                                                  ("04_losses", "losses", False)])
def test_grading_simulated_students_honest_and_hostile(course, tmp_path, slug, name, everyone):
    """On 02 every case; on 04 the attacks, beside a complete submission they must not touch."""
    subs = tmp_path / "submissions"
    total = _submissions(course, subs, slug, name, everyone)
    before = {p: p.read_bytes() for p in subs.rglob("*") if p.is_file()}
    grading = tmp_path / "grading"
    out = course.tito("grade", slug[:2], str(subs), "--course-dir", str(grading), "--jobs", "2", "--timeout", "40",
                      timeout=1700)
    assert out.returncode == 1, "flagged and ungradable submissions must give a non-zero exit\n" + out.stdout + out.stderr
    with open(grading / "grades.csv", newline="") as handle:
        rows = {r["student"]: r for r in csv.DictReader(handle) if r["module"] == slug}
    report = "\n".join(f"{s}: {r['score']}/{r['max_score']} {r['tests_passed']}/{r['tests_total']} {r['status']} "
                       f"{r['reason']}" for s, r in sorted(rows.items()))

    def score(student):
        return float(rows[student]["score"])

    assert (score("complete"), float(rows["complete"]["max_score"]), rows["complete"]["status"]) == \
        (total, total, "graded"), report
    assert rows["complete"]["tests_passed"] == rows["complete"]["tests_total"], report
    if everyone:
        assert score("empty") == 0 and rows["empty"]["status"] == "graded", report
        assert score("edits_tests") == 0, report
        assert rows["loops"]["status"] != "not graded" and score("loops") < total, report
        lost = _graded_cells(jupytext.read(course.path(f"solutions/{slug}/{name}.py")))[0].metadata["nbgrader"]["points"]
        assert score("deletes_a_test") <= total - lost, report
    assert score("imports_reference") == 0, report            # the kernel has no reference of this module
    assert score("reads_instructor_files") == 0, report       # the sandbox shows no course files
    assert rows["switches_tests_off"]["status"] == "flagged", report  # in-kernel tests off: caught outside it
    assert score("vandal") == 0, report
    # the vandal changed nobody's grade or file
    assert score("complete") == total, report
    after = {p: p.read_bytes() for p in subs.rglob("*") if p.is_file()}
    assert after == before, "a submission file changed during grading"
    for student, why in [("missing", "no "), ("misnamed", "rename it"), ("broken", "not a valid notebook")]:
        assert rows[student]["status"] == "not graded" and why in rows[student]["reason"], report
    # feedback: the complete student's, without the hidden tests' code
    feedback = list((grading / "feedback" / "complete" / slug).glob("*.html"))
    assert feedback, "no feedback for the complete submission"
    html = feedback[0].read_text()
    hidden = _hidden_test_lines(course.path(f"solutions/{slug}/{name}.py").read_text())
    leaked = [line for line in hidden if line in htmllib.unescape(html)]
    assert not leaked, f"hidden tests appear in the feedback: {leaked[:3]}"


def test_grading_refuses_without_a_working_sandbox_and_says_how_to_override(course, tmp_path):
    import os
    import sys
    from pathlib import Path

    bin_dir = tmp_path / "bin"  # a PATH with this Python but no bwrap
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    subs = tmp_path / "submissions" / "alice"
    subs.mkdir(parents=True)
    nbformat.write(nbformat.read(course.path("modules/02_activations/activations.ipynb"), as_version=4),
                   subs / "activations.ipynb")
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent)])
    for args in (("grade", "setup"), ("grade", "02", str(subs.parent))):
        out = course.tito(*args, PATH=path)
        assert out.returncode != 0, out.stdout + out.stderr
        assert "bubblewrap" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "--unsafe-no-sandbox" in out.stderr, out.stderr
    assert not (course.path("build") / "grading" / "grades.csv").exists(), "it graded anyway"

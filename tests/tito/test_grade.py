"""`tito grade` against simulated students, honest and hostile, end to end (nbgrader, the
sandbox), on two modules. Each attack scores 0 or is flagged; no student touches another's
grade or files; missing, misnamed and broken submissions are listed with a reason."""
import csv
import hashlib
import json
import subprocess
import sys

import jupytext
import nbformat
import pytest

from tito.verify import hidden_test_lines, page_text

# Whole tito commands (nbgrader, sandboxed kernels, test suites): far longer than a unit test.
pytestmark = [pytest.mark.timeout(1800), pytest.mark.command]


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


# Exported code that turns every failing test into a pass inside the test process.
FORGE_CALLINFO = (
    "import _pytest.runner as _runner\n"
    "_from_call = _runner.CallInfo.from_call\n"
    "def _passing(cls, func, when, reraise=None):\n"
    "    info = _from_call(func, when, reraise)\n"
    "    info.excinfo = None\n"
    "    return info\n"
    "_runner.CallInfo.from_call = classmethod(_passing)\n")

# Exported code that deletes every failure from the JUnit report as the test process exits.
FORGE_JUNIT = (
    "import atexit, re, sys\n"
    "def _clean():\n"
    "    for arg in sys.argv:\n"
    "        if arg.startswith('--junitxml='):\n"
    "            path = arg.split('=', 1)[1]\n"
    "            text = re.sub(r'<(failure|error)[^>]*>.*?</(failure|error)>', '', open(path).read(), flags=re.S)\n"
    "            open(path, 'w').write(text)\n"
    "atexit.register(_clean)\n")

# Exported code that disarms the tests' assertion helpers when it finds itself under pytest.
MONKEYPATCH_ASSERTIONS = (
    "import contextlib, sys\n"
    "if 'pytest' in sys.modules:\n"
    "    import numpy.testing as _nt\n"
    "    _nt.assert_allclose = _nt.assert_array_equal = _nt.assert_equal = lambda *a, **k: None\n"
    "    sys.modules['pytest'].raises = lambda *a, **k: contextlib.suppress(BaseException)\n")

# SWITCH_TESTS_OFF with the attribute's name built at run time, and IPython found via sys.modules.
HIDDEN_TRANSFORMER = SWITCH_TESTS_OFF.replace(
    "get_ipython().ast_transformers",
    "import sys\ngetattr(sys.modules['IPython'].get_ipython(), 'ast_' + 'transformers')")

# Run as root, a sandboxed kernel could remount its read-only folders read-write and
# overwrite the prefix build that the next classmate is graded against.
REMOUNT = (
    "import ctypes, os, sys\n"
    "_libc = ctypes.CDLL(None, use_errno=True)\n"
    "for _p in sys.path:\n"
    "    if _p and os.path.isdir(os.path.join(_p, 'tinytorch')):\n"
    "        _libc.mount(None, _p.encode(), None, 32 | 4096, None)\n"
    "        for _folder, _, _files in os.walk(os.path.join(_p, 'tinytorch')):\n"
    "            for _f in _files:\n"
    "                try:\n"
    "                    open(os.path.join(_folder, _f), 'w').write('raise SystemExit')\n"
    "                except OSError:\n"
    "                    pass\n")

# A page that runs the student's script when the instructor opens the feedback.
XSS = ("class _Page:\n"
       "    def _repr_html_(self):\n"
       "        return '<script>document.title = \"AUDIT-XSS\"</script><img src=x onerror=\"alert(1)\">'\n"
       "_Page()\n")


def _with_exported(nb, code):
    """`code` inside the notebook's first solution cell, after its `#| export` line."""
    cell = _solution_cells(nb)[0]
    first, _, rest = cell.source.partition("\n")
    cell.source = f"{first}\n{code}\n{rest}"
    return nb


def _submissions(course, root, slug, name, cases):
    """Simulated students of `slug` beside a complete submission: "honest" the careless and
    broken cases, "attacks" the attacks on the sandbox and on other students, "forgeries"
    the attacks on the test run's verdicts. Each kind is graded on one module: what it
    attacks (the sandbox, the verdicts, nbgrader's handling of files) is the same for all."""
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
    (root / "complete" / "timestamp.txt").write_text("2026-12-01 16:59:00.000000 UTC")  # as nbgrader submit writes
    (root / "complete" / "submission_secret.txt").write_text("0123abcd" * 16)
    if cases == "forgeries":
        for student, code in [("forges_callinfo", FORGE_CALLINFO), ("forges_junit", FORGE_JUNIT),
                              ("patches_assertions", MONKEYPATCH_ASSERTIONS)]:
            submit(student, _with_exported(_copy(released), code))
    elif cases == "honest":  # (tito verify grades the released notebook of every module already)
        submit("empty", released)
        edits = _copy(released)  # every test cell edited to pass: nbgrader restores them
        for cell in _graded_cells(edits):
            cell.source = "pass"
        submit("edits_tests", edits)
        looping = _copy(solved)  # an endless loop: the first cell timeout ends the notebook's run
        at = looping.cells.index(_solution_cells(looping)[0]) + 1
        looping.cells.insert(at, nbformat.v4.new_code_cell("while True:\n    pass\n"))
        submit("loops", looping)
        deleted = _copy(solved)  # a complete notebook whose first test cell was deleted
        deleted.cells.remove(_graded_cells(deleted)[0])
        submit("deletes_a_test", deleted)
        (root / "missing").mkdir()
        (root / ".ipynb_checkpoints").mkdir()  # Jupyter's, not a student
        submit("misnamed", solved, filename=f"{name} (1).ipynb")
        submit("broken", '{"cells": [ not json')
        nb = _copy(released)  # é written in Latin-1: valid JSON, not UTF-8
        nb.cells[0].source += "\ncafé"
        (root / "not_utf8").mkdir()
        (root / "not_utf8" / f"{name}.ipynb").write_bytes(nbformat.writes(nb).encode().replace("é".encode(), b"\xe9"))
    else:  # the attacks on the sandbox, the course's files and the other students
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
        nb = _copy(released)
        _solution_cells(nb)[0].source += "\n" + HIDDEN_TRANSFORMER
        submit("hides_transformer", nb)
        nb = _copy(solved)
        nb.cells.append(nbformat.v4.new_code_cell(REMOUNT))
        submit("remounts", nb)
        nb = _copy(solved)
        nb.cells.append(nbformat.v4.new_code_cell(XSS))
        submit("xss", nb)
        nb = _copy(released)
        nb.cells.append(nbformat.v4.new_code_cell("x = " + "-" * 5000 + "1"))
        submit("nests_deeply", nb)
    return sum(c.metadata["nbgrader"]["points"] for c in _graded_cells(solved))


def _live_student_code(page):
    """Scripts and event handlers in an HTML page that came from the XSS notebook's output."""
    from html.parser import HTMLParser

    found = []

    class Parser(HTMLParser):
        script = False

        def handle_starttag(self, tag, attrs):
            self.script = tag == "script"
            found.extend(f"<{tag} {k}=...>" for k, v in attrs if k.startswith("on") and "alert" in (v or ""))

        def handle_data(self, data):
            if self.script and "AUDIT-XSS" in data:
                found.append("<script> ... AUDIT-XSS")

    Parser().feed(page)
    return found


@pytest.mark.parametrize("slug, name, cases", [("02_activations", "activations", "honest"),
                                               ("04_losses", "losses", "attacks"),
                                               ("15_quantization", "quantization", "forgeries")])
def test_grading_simulated_students_honest_and_hostile(course, tmp_path, slug, name, cases):
    """On 02 the careless and broken cases; on 04 the attacks, beside a complete submission
    they must not touch; on 15 the forged verdicts."""
    subs = tmp_path / "submissions"
    total = _submissions(course, subs, slug, name, cases)
    before = {p: p.read_bytes() for p in subs.rglob("*") if p.is_file()}
    grading = tmp_path / "grading"
    out = course.tito("grade", slug[:2], str(subs), "--course-dir", str(grading), "--jobs", "2", "--timeout", "40",
                      timeout=1700)
    assert out.returncode == 1, "flagged and ungradable submissions must give a non-zero exit\n" + out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    with open(grading / "grades.csv", newline="") as handle:
        rows = {r["student"]: r for r in csv.DictReader(handle) if r["module"] == slug}
    # the complete submission last: CI's log keeps the end of a long report
    report = "\n".join(f"{s}: {r['score']}/{r['max_score']} {r['tests_passed']}/{r['tests_total']} {r['status']} "
                       f"{r['reason']}" for s, r in sorted(rows.items(), key=lambda kv: (kv[0] == "complete", kv[0])))

    def score(student):
        return float(rows[student]["score"])

    assert (score("complete"), float(rows["complete"]["max_score"]), rows["complete"]["status"]) == \
        (total, total, "graded"), report
    assert rows["complete"]["tests_passed"] == rows["complete"]["tests_total"] != "0", report
    after = {p: p.read_bytes() for p in subs.rglob("*") if p.is_file()}
    assert after == before, "a submission file changed during grading"
    if cases == "forgeries":
        # code that forges verdicts runs where no verdict is made (the answerer, which has no
        # pytest): every test of those stubs fails, and the scan flags the attempt
        for student in ("forges_callinfo", "forges_junit", "patches_assertions"):
            assert rows[student]["status"] == "flagged", report
            assert rows[student]["tests_passed"] == "0", report
        # nbgrader's formgrader and release_feedback see the grades and feedback
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{grading / 'gradebook.db'}") as gb:
            assert gb.find_submission(slug, "complete").score == total
            assert gb.find_submission(slug, "forges_junit").score == 0
        exchange = tmp_path / "exchange"  # nbgrader's exchange: a folder everyone may write
        exchange.mkdir()
        exchange.chmod(0o777)
        released = subprocess.run([sys.executable, "-m", "nbgrader", "release_feedback", slug,
                                   f"--Exchange.root={exchange}", f"--CourseDirectory.root={grading}",
                                   "--CourseDirectory.course_id=tinytorch", "--student=complete"],
                                  cwd=grading, capture_output=True, text=True, timeout=300)
        assert released.returncode == 0, released.stdout + released.stderr
        assert list((exchange / "tinytorch" / "feedback").glob("*.html")), released.stdout + released.stderr
        return
    if cases == "honest":
        assert score("empty") == 0 and rows["empty"]["status"] == "graded", report
        assert score("edits_tests") == 0, report
        assert rows["loops"]["status"] != "not graded" and score("loops") < total, report
        assert "ran past the 40 s time limit" in rows["loops"]["reason"], report  # and the rest did not run
        lost = _graded_cells(jupytext.read(course.path(f"solutions/{slug}/{name}.py")))[0].metadata["nbgrader"]["points"]
        assert score("deletes_a_test") <= total - lost, report
        for student, why in [("missing", "no "), ("misnamed", "rename it"), ("broken", "not a valid notebook"),
                             ("not_utf8", "not UTF-8")]:
            assert rows[student]["status"] == "not graded" and why in rows[student]["reason"], report
        assert ".ipynb_checkpoints" not in rows, report
        # feedback: the complete student's, without the hidden tests' code (01 in tito verify)
        feedback = list((grading / "feedback" / "complete" / slug).glob("*.html"))
        assert feedback, "no feedback for the complete submission"
        hidden = hidden_test_lines(course.path(f"solutions/{slug}/{name}.py").read_text())
        assert hidden, "module 02 has hidden tests (the check below needs some)"
        leaked = [line for line in hidden if line in page_text(feedback[0].read_text())]
        assert not leaked, f"hidden tests appear in the feedback: {leaked[:3]}"
        # an interrupted or repeated run keeps what is graded: --resume grades nobody again
        again = course.tito("grade", slug[:2], str(subs), "--course-dir", str(grading), "--resume", timeout=600)
        assert "already graded" in again.stdout and "graded complete" not in again.stdout, again.stdout + again.stderr
        return
    assert score("imports_reference") == 0, report            # the kernel has no reference of this module
    assert score("reads_instructor_files") == 0, report       # the sandbox shows no course files
    assert rows["switches_tests_off"]["status"] == "flagged", report  # in-kernel tests off: caught outside it
    assert score("vandal") == 0, report                       # and it changed nobody's grade (above) or file
    assert rows["hides_transformer"]["status"] == "flagged", report
    assert rows["nests_deeply"]["status"] == "flagged" and "nested" in rows["nests_deeply"]["reason"], report
    # as root too, the sandboxed kernel could not remount the prefix build and change it
    assert rows["remounts"]["status"] == "flagged" and score("remounts") == total, report
    record = json.loads((course.path("build") / "prefix-03.files.json").read_text())
    prefix = course.path("build") / "prefix-03" / "tinytorch"
    changed = [p for p, digest in record.items() if hashlib.sha256((prefix / p).read_bytes()).hexdigest() != digest]
    assert not changed, f"the prefix build changed during grading: {changed[:3]}"
    # the feedback page shows the student's HTML as text: none of their script runs
    page = next((grading / "feedback" / "xss" / slug).glob("*.html")).read_text()
    assert "AUDIT-XSS" in page_text(page) and rows["xss"]["status"] == "graded", report
    assert not _live_student_code(page), f"the student's script survives in the feedback page: {_live_student_code(page)}"
    assert 'id="tito-grade-summary"' in page, "the feedback page does not show the test results"


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


def test_grades_csv_keeps_every_row_and_the_newest_wins(tmp_path):
    """23 students graded, then 4 more: 27 rows; a student graded again keeps one row, the
    newest; another module's rows are kept."""
    from types import SimpleNamespace

    from tito import grade

    path = tmp_path / "grades.csv"
    losses, layers = SimpleNamespace(slug="04_losses"), SimpleNamespace(slug="03_layers")
    grade.save_rows(path, losses, [grade.Result(f"s{i:02d}", score=1) for i in range(23)])
    grade.save_rows(path, losses, [grade.Result(f"s{i:02d}", score=1) for i in range(23, 27)])
    assert len(grade.read_rows(path)) == 27
    grade.save_rows(path, losses, [grade.Result("s00", score=2)])
    grade.save_rows(path, layers, [grade.Result("s00", score=3)])
    rows = grade.read_rows(path)
    assert len(rows) == 27 + 1, sorted(rows)
    assert rows[("04_losses", "s00")]["score"] == "2" and rows[("04_losses", "s02")]["score"] == "1"
    assert rows[("03_layers", "s00")]["score"] == "3"


def test_grading_refuses_a_timeout_that_is_not_positive(course, tmp_path):
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    for flag in ("--timeout", "--budget"):
        out = course.tito("grade", "02", str(tmp_path / "subs"), flag, "0")
        assert out.returncode != 0 and "must be positive" in out.stderr and "Traceback" not in out.stderr, \
            out.stdout + out.stderr


def test_a_test_that_never_reports_counts_as_failed_and_a_forged_report_is_flagged():
    """The grader's count: the reference's test list decides the total; a test with no line
    (a timeout ended the run, a crash) failed; a second line for one test is a forgery."""
    from types import SimpleNamespace

    from tito import grade

    g = SimpleNamespace(test_ids=["t::a", "t::b", "t::c"])
    r = grade.Result("s")
    grade._count_reports(g, ['{"id": "t::a", "outcome": "passed", "changed": []}\n'], r)
    assert (r.tests_passed, r.tests_total, r.failed_tests, r.status) == (1, 3, ["t::b", "t::c"], "graded")
    assert "did not finish" in r.reasons[0]
    r = grade.Result("s")
    lines = ['{"id": "t::a", "outcome": "failed", "changed": []}', '{"id": "t::a", "outcome": "passed"}',
             '{"id": "t::b", "outcome": "passed", "changed": ["pytest.raises"]}', '{"end": true, "changed": []}']
    grade._count_reports(g, lines, r)
    assert (r.tests_passed, r.status) == (1, "flagged"), r
    assert any("twice" in x for x in r.reasons) and any("pytest.raises" in x for x in r.reasons), r.reasons

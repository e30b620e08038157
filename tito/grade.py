"""`tito grade`: autograde students' notebooks for one module, so that a grade means the work.

Each submission is graded twice, each time inside a sandbox (tito/sandbox.py: an
unprivileged user with no capabilities, resource limits, no network) that cannot read the
course folder, the solutions, the hidden tests or the gradebook, and cannot write outside
its scratch folder:

1. nbgrader: the notebook runs in a sandboxed kernel, nbgrader restores every graded test
   cell from the source (editing or deleting one earns nothing) and scores them; the first
   cell that runs past the timeout ends the run (tito/autograde_execute.py).
2. the module's tests: the notebook's `#| export` cells are exported (with `tito export`'s
   checks) into a package, and the module's pytest suite runs in a judge process that never
   imports it (tito/judge.py): every `tinytorch` object the tests touch is a proxy, and each
   use is a request to a sandboxed answerer process that imports the package and can only
   reply with values (tito/remote.py). The comparisons, the verdicts and the report (one line
   per test through a pipe, tito/report_plugin.py) are the judge's, so code in the package
   cannot change them; this process counts the lines against the test list it collected
   from the reference.

Both run against a *prefix build*: earlier modules' reference code, and this module and all
later ones as released stubs, checked against its recorded digests before each submission.
A submission is flagged (table, CSV, exit code) when its notebook's share of points and its
tests' share disagree (DISAGREEMENT), when its code reaches for the grading machinery
(tito/scan.py), or when its test run's helpers or report stream were tampered with. Every
submission is graded in its own folder and written to grades.csv as soon as it is done, so
`--jobs N` runs them side by side, one student's code never touches another's grade, and an
interrupted run resumes (`--resume`).
"""
from __future__ import annotations

import csv
import hashlib
import html
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tito import build, gradebook, notebook, sandbox, scan, testing
from tito.course import Module, find_root, resolve
from tito.errors import TitoError
from tito.locks import locked, write_atomic

# Flag a submission whose notebook share of points and test share differ by more than this
# (see the README: honest work moves both together; a quarter allows a few check cells that
# test more or less than the suite does).
DISAGREEMENT = 0.25
BUDGET_S = 900
CSV_FIELDS = ["module", "student", "score", "max_score", "tests_passed", "tests_total", "status", "reason",
              "late", "seconds", "submission_sha256", "graded_at"]
FAILED_SHOWN = 40


@dataclass
class Result:
    student: str
    status: str = "graded"            # graded | flagged | not graded
    score: float = 0.0
    max_score: float = 0.0
    tests_passed: int = 0
    tests_total: int = 0
    reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0
    autograded: Path | None = None
    failed_tests: list[str] = field(default_factory=list)
    sha256: str = ""
    late: str = ""
    feedback: Path | None = None

    def flag(self, reason: str) -> None:
        if self.status != "not graded":
            self.status = "flagged"
        self.reasons.append(reason)


@dataclass
class Grading:
    """What every submission of one run shares."""
    root: Path
    module: Module
    course_dir: Path
    prefix: Path
    env: dict
    template: Path
    test_ids: list[str]
    cell_timeout: int
    budget: int
    use_sandbox: bool
    deadline: datetime | None = None
    assignment: str = ""  # its name in nbgrader's exchange and the course's gradebook


def _nbgrader(course_dir: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args,
           f"--CourseDirectory.root={course_dir}", "--CourseDirectory.course_id=tinytorch"]
    return subprocess.run(cmd, cwd=course_dir, env=env, capture_output=True, text=True)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


# --- the submissions ---------------------------------------------------------------------

def collect(folder: Path, module: Module, assignment: str | None = None) -> tuple[dict[str, Path], list[Result]]:
    """({student: notebook}, [Result for each student folder that has no gradable notebook]).

    A student's notebook is <folder>/<student>/<name>.ipynb, or
    <folder>/<student>/<assignment>/<name>.ipynb (what `nbgrader collect` leaves in submitted/;
    the assignment is the module's folder name unless `assignment` names it). Hidden folders
    (.ipynb_checkpoints, .git) are not students."""
    import nbformat

    if not folder.is_dir():
        raise TitoError(f"submissions folder {folder} does not exist.")
    expected, assignment = f"{module.name}.ipynb", assignment or module.slug
    found, problems = {}, []
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        path = student / expected
        if not path.is_file() and (student / assignment / expected).is_file():
            path = student / assignment / expected  # nbgrader's collected layout: student/assignment/
        if not path.is_file():
            others = sorted(p.name for p in (*student.glob("*.ipynb"), *student.glob(f"{assignment}/*.ipynb")))
            why = (f"no {expected}; found {', '.join(others)} (rename it to {expected})" if others
                   else f"no {expected} in {student.name}/")
            problems.append(Result(student.name, "not graded", reasons=[why]))
            continue
        try:
            nbformat.validate(nbformat.reads(path.read_bytes().decode("utf-8"), as_version=4))
        except UnicodeDecodeError as exc:
            problems.append(Result(student.name, "not graded", reasons=[
                f"{expected} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"]))
            continue
        except Exception as exc:  # not JSON, or not a notebook
            problems.append(Result(student.name, "not graded",
                                   reasons=[f"{expected} is not a valid notebook ({_last_line(str(exc))[:200]})"]))
            continue
        found[student.name] = path
    if not found and not problems:
        raise TitoError(f"no submissions in {folder}: expected one folder per student holding {expected}, "
                        f"e.g. {folder}/alice/{expected}.")
    return found, problems


def _submitted_at(notebook_path: Path) -> datetime | None:
    """nbgrader's timestamp.txt beside the notebook (or its assignment folder), if any."""
    for folder in (notebook_path.parent, notebook_path.parent.parent):
        stamp = folder / "timestamp.txt"
        if stamp.is_file():
            text = stamp.read_text(errors="replace").strip().replace(" UTC", "+00:00")
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                return None
            return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return None


# --- the run's shared set-up -----------------------------------------------------------

_NBGRADER_CONFIG = '''\
# Written by tito grade: nbgrader's steps with tito's changes (see tito/grade.py).
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, GetGrades,
                                    IgnorePattern, LimitOutput, SaveAutoGrades)
from tito.autograde_execute import StopAtFirstTimeout

c = get_config()
c.Autograde.autograde_preprocessors = [StopAtFirstTimeout, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
# Feedback shows no hidden test, and no script, handler or frame from the student's outputs.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
c.HTMLExporter.sanitize_html = True
# A kernel slow to start on a loaded machine is not the student's fault (nbclient waits 60 s).
c.Execute.startup_timeout = 300
'''


def _prepare_template(module: Module, course_dir: Path, env: dict) -> Path:
    """course_dir/template/<slug>: the source notebook, its generated assignment and tito's
    nbgrader configuration, once per run; each submission's nbgrader folder starts as a copy."""
    import jupytext
    import nbformat

    template = course_dir / "template" / module.slug
    if template.exists():
        shutil.rmtree(template)
    source = template / "source" / module.slug
    source.mkdir(parents=True)
    (template / "nbgrader_config.py").write_text(_NBGRADER_CONFIG)
    nb = jupytext.read(module.solution_path, fmt="py:percent")
    for cell in nb.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    nbformat.write(nb, source / f"{module.name}.ipynb")
    proc = _nbgrader(template, "generate_assignment", module.slug, "--force", env=env)
    if proc.returncode != 0:
        raise TitoError(f"nbgrader generate_assignment failed:\n{proc.stderr[-3000:]}")
    return template


def _test_folder(root: Path, module: Module, dest: Path) -> Path:
    """dest/tests/<slug> and the files a test run needs; returns dest."""
    (dest / "tests").mkdir(parents=True)
    for shared in sorted((root / "tests").glob("*.py")):  # the shared test set-up: conftest.py and its helpers
        shutil.copy2(shared, dest / "tests" / shared.name)
    shutil.copytree(module.tests_path, dest / "tests" / module.slug, ignore=build.IGNORE)
    shutil.copy2(Path(__file__).with_name("report_plugin.py"), dest / "_tito_report.py")
    (dest / "pytest.ini").write_text("[pytest]\ntimeout = 60\naddopts = -p no:cacheprovider -p no:anyio "
                                     "-p no:platformdirs --import-mode=importlib\n")
    return dest


def _pytest_args(tests: Path, module: Module) -> list[str]:
    return [*testing.pytest_command(), str(tests / "tests" / module.slug), "-q", "--tb=no", "-p", "no:junitxml",
            "-c", str(tests / "pytest.ini"), "--rootdir", str(tests)]


def _collect_test_ids(root: Path, module: Module, course_dir: Path) -> list[str]:
    """Every test id of the module, collected against the reference build (no student code):
    the list each submission's reports are counted against, so a test that never reports
    (a crash, a timeout, a run cut short) counts as failed."""
    tests = course_dir / "template" / f"{module.slug}-tests"
    if tests.exists():
        shutil.rmtree(tests)
    _test_folder(root, module, tests)
    reference = build.build_solutions(root)
    env = dict(os.environ, PYTHONPATH=str(reference), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([*_pytest_args(tests, module), "--collect-only"], cwd=tests, env=env,
                          capture_output=True, text=True, timeout=600)
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line]
    if proc.returncode != 0 or not ids:
        raise TitoError(f"could not list the tests of {module.slug} on the reference build:\n"
                        f"{(proc.stdout + proc.stderr)[-2000:]}")
    return ids


def _prepare(root: Path, module: Module, course_dir: Path, *, cell_timeout: int, budget: int,
             use_sandbox: bool, with_tests: bool = True, deadline: datetime | None = None,
             drop_caches: bool = True) -> Grading:
    """The run's shared set-up; `drop_caches`: trust no bytecode cache in the prefix build (a
    class's submissions; tito verify's own notebooks need not pay for it)."""
    prefix = build.build_prefix(root, module.number - 1, drop_caches=drop_caches)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    # nbgrader imports tito's Execute (the template's nbgrader_config.py) from this course.
    env["PYTHONPATH"] = str(root)
    # nbgrader runs helper programs (alembic) by name: find the ones beside this Python first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    template = _prepare_template(module, course_dir, env)
    test_ids = _collect_test_ids(root, module, course_dir) if with_tests else []
    return Grading(root, module, course_dir, prefix, env, template, test_ids, cell_timeout, budget, use_sandbox,
                   deadline)


# --- one submission ----------------------------------------------------------------------

def _gradebook_score(folder: Path, slug: str, student: str) -> tuple[float, float] | None:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
        try:
            submission = gb.find_submission(slug, student)
        except MissingEntry:
            return None
        return float(submission.score), float(submission.max_score)


def _run_notebooks(g: Grading, work: Path, notebooks: dict[str, Path], results: dict[str, Result]) -> Path:
    """nbgrader's autograde of `notebooks` ({student: path}) in one nbgrader folder under `work`
    (one student, for a class: each student's own folder; several only for the course's own
    notebooks, in tito verify). Returns the nbgrader folder."""
    module = g.module
    folder = work / "nbgrader"
    shutil.copytree(g.template, folder)
    for student, notebook_path in notebooks.items():
        target = folder / "submitted" / student / module.slug
        target.mkdir(parents=True)
        shutil.copy2(notebook_path, target / f"{module.name}.ipynb")
        # nbgrader's exchange files go along to the feedback folder: release_feedback needs them
        for name in ("timestamp.txt", "submission_secret.txt"):
            if (notebook_path.parent / name).is_file():
                shutil.copy2(notebook_path.parent / name, target / name)
    run_env = dict(g.env)
    only = [f"--student={next(iter(notebooks))}"] if len(notebooks) == 1 else []
    args = ["autograde", module.slug, *only, "--force", "--create", f"--Execute.timeout={g.cell_timeout}",
            f"--StopAtFirstTimeout.budget={g.budget}"]
    runtime = None
    if g.use_sandbox:
        import tempfile

        # The kernel's sockets: a short path (a socket path may not exceed ~107 bytes).
        scratch, jupyter = work / "kernel-scratch", work / "jupyter"
        scratch.mkdir(parents=True)
        runtime = Path(tempfile.mkdtemp(prefix="tito-kernel-"))
        # Figures inline, as in the student's Jupyter: the graded notebook (feedback, and the
        # book's chapters in tito verify) shows the notebook's pictures.
        sandbox.write_kernelspec(jupyter, scratch=scratch, runtime=runtime, readable=[g.prefix],
                                 env={"PYTHONPATH": str(g.prefix),
                                      "MPLBACKEND": "module://matplotlib_inline.backend_inline"})
        run_env["JUPYTER_PATH"] = os.pathsep.join([str(jupyter), g.env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
        run_env["JUPYTER_RUNTIME_DIR"] = str(runtime)
        args += [f"--Execute.kernel_name={sandbox.KERNEL_NAME}", "--KernelManager.transport=ipc",
                 f"--KernelManager.connection_file={runtime / 'kernel.json'}"]
    else:
        run_env["PYTHONPATH"] = os.pathsep.join([str(g.prefix), str(g.root)])
    try:
        proc = _nbgrader(folder, *args, env=run_env)
    finally:
        if runtime is not None:
            shutil.rmtree(runtime, ignore_errors=True)
    (work / "autograde.log").write_text(proc.stdout + proc.stderr)
    for student in notebooks:
        result = results[student]
        score = _gradebook_score(folder, module.slug, student)
        if score is None or (proc.returncode != 0 and len(notebooks) == 1):
            result.status = "not graded"
            result.reasons.append(f"nbgrader could not grade the notebook: {_last_line(proc.stderr)[:300]}")
            continue
        result.score, result.max_score = score
        result.autograded = folder / "autograded" / student / module.slug / f"{module.name}.ipynb"
        stopped = _stopped_cells(result.autograded)
        if stopped:
            result.reasons.append(stopped)
    return folder


def _stopped_cells(autograded: Path) -> str:
    """Why the notebook's run stopped early (tito/autograde_execute.py), or ''."""
    import nbformat

    try:
        nb = nbformat.read(autograded, as_version=4)
    except Exception:
        return ""
    skipped = [o.get("evalue", "") for c in nb.cells for o in c.get("outputs", [])
               if o.get("output_type") == "error" and o.get("ename") == "NotRun"]
    return f"{len(skipped)} cell(s) {skipped[0]}" if skipped else ""


def _export(g: Grading, notebook_path: Path, package: Path) -> str | None:
    """The submission's `#| export` cells over the prefix build in `package`, with the checks
    `tito export` makes; None, or why nothing was exported."""
    module = g.module
    shutil.copytree(g.prefix / "tinytorch", package / "tinytorch", ignore=build.IGNORE)
    try:
        nb = notebook.read_student(notebook_path, module.notebook_rel, module.number)
        chunks = notebook.export_chunks(nb, module.notebook_rel)
        grouped = build._check_targets(module, chunks, package / "tinytorch")
        build._check_lost_exports(module, nb, grouped)
        build._write(package / "tinytorch", grouped, module.notebook_rel)
    except TitoError as exc:
        return _last_line(exc.message)[:300]
    return None


def _read_reports(fd: int, lines: list[str]) -> None:
    with io.open(fd, "r", encoding="utf-8", errors="replace", closefd=True) as stream:
        for line in stream:
            lines.append(line)


def _count_reports(g: Grading, lines: list[str], result: Result) -> None:
    """Count the test run's report lines against the reference's test list: first line per
    test wins, a repeated one or helpers reported changed flag the run, and a test that never
    reported failed (it crashed, timed out, or the run stopped before it)."""
    outcomes, repeated, changed, ended = {}, set(), set(), False
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            repeated.add("(a line that is not a report)")
            continue
        if not isinstance(record, dict):
            repeated.add("(a line that is not a report)")
            continue
        changed |= set(record.get("changed") or ())
        if record.get("end"):
            ended = True
        elif record.get("id") in outcomes:
            repeated.add(record["id"])
        elif isinstance(record.get("id"), str):
            outcomes[record["id"]] = record.get("outcome")
    result.tests_total = len(g.test_ids)
    result.tests_passed = sum(outcomes.get(t) == "passed" for t in g.test_ids)
    result.failed_tests = [t for t in g.test_ids if outcomes.get(t) != "passed"]
    if changed:
        result.flag("the test run's assertion helpers were replaced while it ran: " + ", ".join(sorted(changed)[:6]))
    if repeated:
        result.flag(f"the test run reported {len(repeated)} test(s) twice (its report was forged): "
                    + ", ".join(sorted(repeated)[:3]))
    if not ended:
        result.reasons.append(f"the test run did not finish; the {len(g.test_ids) - len(outcomes)} test(s) "
                              f"that did not report count as failed")


def _answerer(g: Grading, work: Path, package: Path, scratch: Path) -> dict:
    """How the judge starts the answerer: the process that imports the submission's package
    (sandboxed when grading is) and answers the tests' requests (tito/remote.py)."""
    folder = work / "answerer"
    folder.mkdir()
    script = folder / "_tito_remote.py"
    shutil.copy2(Path(__file__).with_name("remote.py"), script)
    argv = [sys.executable, str(script), "{read}", "{write}"]
    if g.use_sandbox:
        return {"argv": sandbox.command(argv, scratch=scratch, readable=[package, folder],
                                        env={"PYTHONPATH": str(package)}), "cwd": str(scratch)}
    env = dict(os.environ, PYTHONPATH=str(package), PYTHONDONTWRITEBYTECODE="1", HOME=str(scratch))
    return {"argv": argv, "env": env, "cwd": str(scratch)}


def _run_tests(g: Grading, work: Path, notebook_path: Path, result: Result, seconds_left: float) -> None:
    """Export the submission's `#| export` cells over the prefix build and run the module's
    tests against that package: the tests and their verdicts in a judge process that never
    imports the package (tito/judge.py), the package in a sandboxed answerer; count what the
    judge reports."""
    module = g.module
    package = work / "package"
    problem = _export(g, notebook_path, package)
    if problem:
        result.tests_total, result.failed_tests = len(g.test_ids), list(g.test_ids)
        result.flag(f"its export cells do not export as `tito export` would ({problem}); tests: 0")
        return
    tests = _test_folder(g.root, module, work / "tests")
    scratch = work / "test-scratch"
    scratch.mkdir()
    read_fd, write_fd = os.pipe()
    cmd = [*_pytest_args(tests, module), "-p", "_tito_report", "-p", "tito.judge",
           "--basetemp", str(scratch / "pytest-tmp")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tests), str(g.root)]), TITO_GRADING="1",
               TITO_REPORT_FD=str(write_fd), PYTHONDONTWRITEBYTECODE="1",
               TITO_ANSWERER=json.dumps(_answerer(g, work, package, scratch)),
               TITO_TRUSTED_TESTING=str(g.root / "tinytorch" / "testing.py"))
    lines: list[str] = []
    reader = threading.Thread(target=_read_reports, args=(read_fd, lines), daemon=True)
    timeout = max(60, int(seconds_left))
    with open(work / "tests.log", "w") as log:
        try:
            proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    pass_fds=(write_fd,), start_new_session=True)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            result.reasons.append(f"the test run was stopped after {timeout} s (the submission's budget)")
    reader.join(timeout=30)
    _count_reports(g, lines, result)


def _disagreement(result: Result) -> None:
    notebook_share = result.score / result.max_score if result.max_score else 0.0
    test_share = result.tests_passed / result.tests_total if result.tests_total else 0.0
    if result.score > 0 and result.tests_total and not result.tests_passed:
        result.flag(f"the notebook earned {result.score:g} point(s) but its exported code passes none of the "
                    f"{result.tests_total} tests")
    elif abs(notebook_share - test_share) > DISAGREEMENT:
        result.flag(f"the notebook scored {notebook_share:.0%} of its points but {test_share:.0%} of the tests "
                    f"({result.tests_passed}/{result.tests_total}) pass on its exported code")


def _feedback(g: Grading, folder: Path, result: Result) -> None:
    """nbgrader's feedback page (sanitised, hidden tests removed: the template's config) with
    tito's summary on top: the test results, the failed tests and any flag."""
    module = g.module
    made = _nbgrader(folder, "generate_feedback", module.slug, f"--student={result.student}", "--force", env=g.env)
    if made.returncode != 0:
        result.reasons.append(f"no feedback: {_last_line(made.stderr)[:200]}")
        return
    pages = list((folder / "feedback" / result.student / module.slug).glob("*.html"))
    summary = [f"<h2>tito grade: {html.escape(module.slug)}</h2>",
               f"<p>Notebook: {result.score:g} / {result.max_score:g} points. Tests on your exported code: "
               f"{result.tests_passed} / {result.tests_total} passed. Status: {html.escape(result.status)}.</p>"]
    if result.reasons:
        summary.append("<ul>" + "".join(f"<li>{html.escape(r)}</li>" for r in result.reasons) + "</ul>")
    if result.failed_tests:
        shown = result.failed_tests[:FAILED_SHOWN]
        more = len(result.failed_tests) - len(shown)
        summary.append("<p>Failed tests (run <code>tito test module "
                       f"{module.number:02d}</code> to see why):</p><ul>"
                       + "".join(f"<li><code>{html.escape(t)}</code></li>" for t in shown)
                       + (f"<li>... and {more} more</li>" if more else "") + "</ul>")
    block = '<div id="tito-grade-summary" style="border:1px solid #888;padding:0 1em;margin:1em">' \
            + "".join(summary) + "</div>"
    for page in pages:
        text = page.read_text(encoding="utf-8")
        page.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + block, text, count=1), encoding="utf-8")
    dest = g.course_dir / "feedback" / result.student / (g.assignment or module.slug)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(folder / "feedback" / result.student / module.slug, dest)


def grade_one(g: Grading, student: str, notebook_path: Path, with_tests: bool = True) -> Result:
    import nbformat

    started = time.monotonic()
    module = g.module
    result = Result(student)
    data = notebook_path.read_bytes()
    result.sha256 = hashlib.sha256(data).hexdigest()
    if g.deadline is not None:
        submitted = _submitted_at(notebook_path)
        if submitted is not None and submitted > g.deadline:
            result.late = f"{(submitted - g.deadline).total_seconds() / 3600:.1f} h"
            result.reasons.append(f"submitted {result.late} after the deadline")
    build.build_prefix(g.root, module.number - 1, drop_caches=True)  # rebuilt if anything changed it
    work = g.course_dir / "runs" / module.slug / student
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    source = g.template / "source" / module.slug / f"{module.name}.ipynb"
    hooks = scan.tampering(nbformat.reads(data.decode("utf-8"), as_version=4), nbformat.read(source, as_version=4))
    try:
        folder = _run_notebooks(g, work, {student: notebook_path}, {student: result})
        if with_tests and result.status != "not graded":
            _run_tests(g, work, notebook_path, result, g.budget - (time.monotonic() - started))
            _disagreement(result)
        if hooks:
            result.flag("the notebook reaches into the grading machinery: " + "; ".join(hooks))
        if result.status != "not graded":
            _feedback(g, folder, result)
            gradebook.publish(g.course_dir, folder, module.slug, student, g.assignment or module.slug)
    finally:
        for scratch in ("kernel-scratch", "test-scratch", "package", "tests", "jupyter"):
            shutil.rmtree(work / scratch, ignore_errors=True)
    result.seconds = time.monotonic() - started
    return result


# --- grades.csv ------------------------------------------------------------------------------

def _row(module: Module, r: Result) -> dict:
    return {"module": module.slug, "student": r.student, "score": f"{r.score:g}", "max_score": f"{r.max_score:g}",
            "tests_passed": r.tests_passed, "tests_total": r.tests_total, "status": r.status,
            "reason": " | ".join(r.reasons), "late": r.late, "seconds": f"{r.seconds:.1f}",
            "submission_sha256": r.sha256, "graded_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def read_rows(path: Path) -> dict[tuple[str, str], dict]:
    """grades.csv's rows by (module, student)."""
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as handle:
        return {(r.get("module", ""), r.get("student", "")): r for r in csv.DictReader(handle)}


def save_rows(path: Path, module: Module, results: list[Result]) -> None:
    """Merge `results` into grades.csv: each (module, student) row is replaced by the newest,
    every other row (other students, other modules, other runs) is kept."""
    with locked(path.with_name(path.name + ".lock")):
        rows = read_rows(path)
        for r in results:
            rows[(module.slug, r.student)] = _row(module, r)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore", restval="")
        writer.writeheader()
        writer.writerows(rows[key] for key in sorted(rows))
        write_atomic(path, out.getvalue())


# --- the whole run -------------------------------------------------------------------------

def setup() -> int:
    """`tito grade setup`: check that everything grading needs is here, sandbox first."""
    if importlib.util.find_spec("nbgrader") is None:
        raise TitoError('nbgrader is not installed: pip install -e ".[instructor]".')
    problem = sandbox.problem()
    if problem:
        raise TitoError(f"the grading sandbox does not work here: {problem}")
    print("✓ nbgrader is installed\n✓ the sandbox works: a sandboxed process saw none of the files outside it, "
          "had no network, ran as an unprivileged user, could not remount a read-only folder read-write, and "
          "could write only its scratch folder\ntito grade is ready.")
    if os.geteuid() == 0:
        print("note: you are root. Student code in the sandbox runs as an unprivileged user with no "
              "capabilities, but the Linux kernel counts no process limit for root: grade as a normal user.")
    return 0


def run_grading(root: Path, module: Module, found: dict[str, Path], course_dir: Path, *, cell_timeout: int = 120,
                budget: int = BUDGET_S, jobs: int = 1, use_sandbox: bool = True, with_tests: bool = True,
                deadline: datetime | None = None, assignment: str | None = None, on_result=None,
                say=print) -> list[Result]:
    """Grade the notebooks `found` ({student: path}) of `module` in `course_dir`; `on_result`
    receives each Result as soon as it is ready. Nothing one submission does stops the others."""
    course_dir.mkdir(parents=True, exist_ok=True)
    with locked(course_dir / "grade.lock"):
        g = _prepare(root, module, course_dir, cell_timeout=cell_timeout, budget=budget, use_sandbox=use_sandbox,
                     with_tests=with_tests, deadline=deadline)
        g.assignment = assignment or module.slug
        say(f"grading module {module.number:02d} ({module.name}): {len(found)} submission(s), "
            f"{'sandboxed' if use_sandbox else 'NOT SANDBOXED'}, {jobs} at a time", flush=True)

        def one(item):
            student, path = item
            started = time.monotonic()
            try:
                r = grade_one(g, student, path, with_tests)
            except Exception as exc:  # this submission only: the run goes on
                r = Result(student, "not graded", reasons=[f"tito could not grade it: {type(exc).__name__}: "
                                                           f"{_last_line(str(exc))[:300]}"],
                           seconds=time.monotonic() - started)
            if on_result is not None:
                on_result(r)
            say(f"  graded {student} ({r.seconds:.0f} s)", flush=True)
            return r

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            return list(pool.map(one, sorted(found.items())))


def grade_together(root: Path, module: Module, found: dict[str, Path], course_dir: Path, *,
                   cell_timeout: int = 120, feedback: bool = False) -> list[Result]:
    """The course's own notebooks (tito verify: the released one and the solution), graded by
    one nbgrader run in the sandbox against modules 1..k-1, without test runs; with
    `feedback`, each gets nbgrader's feedback page (Result.feedback)."""
    course_dir.mkdir(parents=True, exist_ok=True)
    with locked(course_dir / "grade.lock"):
        g = _prepare(root, module, course_dir, cell_timeout=cell_timeout, budget=BUDGET_S, use_sandbox=True,
                     with_tests=False, drop_caches=False)
        work = course_dir / "runs" / module.slug / "together"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        results = {student: Result(student) for student in found}
        started = time.perf_counter()
        folder = _run_notebooks(g, work, found, results)
        graded = [r for r in results.values() if r.status != "not graded"]
        if feedback and graded:  # one nbgrader run writes every graded student's page
            made = _nbgrader(folder, "generate_feedback", module.slug, "--force", env=g.env)
            for r in graded:
                pages = sorted((folder / "feedback" / r.student / module.slug).glob("*.html"))
                r.feedback = pages[0] if pages else None
                if made.returncode != 0:
                    r.reasons.append(f"no feedback: {_last_line(made.stderr)[:200]}")
        for r in results.values():
            r.seconds = time.perf_counter() - started
        return [results[s] for s in sorted(results)]


def _deadline(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace(" UTC", "+00:00").replace("Z", "+00:00"))
    except ValueError:
        raise TitoError(f"--deadline {text!r} is not a date and time: write it as 2026-12-01T17:00 "
                        f"(UTC unless it says otherwise, e.g. 2026-12-01T17:00+01:00).") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def grade(spec: str, submissions: Path, course_dir: Path | None = None, cell_timeout: int = 120, *,
          jobs: int = 1, unsafe_no_sandbox: bool = False, budget: int = BUDGET_S, resume: bool = False,
          assignment: str | None = None, deadline: str | None = None) -> int:
    if cell_timeout <= 0 or budget <= 0:
        raise TitoError("--timeout and --budget are seconds and must be positive (an endless loop would "
                        "otherwise hold the run forever).")
    if importlib.util.find_spec("nbgrader") is None:
        raise TitoError('nbgrader is not installed: pip install -e ".[instructor]".')
    root = find_root()
    module = resolve(spec, root)
    when = _deadline(deadline)
    use_sandbox = not unsafe_no_sandbox
    if use_sandbox:
        problem = sandbox.problem()
        if problem:
            raise TitoError(f"refusing to grade: the sandbox for student code does not work here: {problem} "
                            f"(--unsafe-no-sandbox grades without it; student code then runs with your rights "
                            f"and can read the solutions and change other students' grades).")
    course_dir = (course_dir or build.build_root(root) / "grading").resolve()
    csv_path = course_dir / "grades.csv"
    found, results = collect(submissions, module, assignment)
    course_dir.mkdir(parents=True, exist_ok=True)
    save_rows(csv_path, module, results)
    if resume:
        done = read_rows(csv_path)
        kept = {}
        for student, path in found.items():
            row = done.get((module.slug, student))
            if row and row.get("status") != "not graded" and \
                    row.get("submission_sha256") == hashlib.sha256(path.read_bytes()).hexdigest():
                continue
            kept[student] = path
        if len(kept) < len(found):
            print(f"--resume: {len(found) - len(kept)} submission(s) already graded in {csv_path} are kept")
        found = kept
    results += run_grading(root, module, found, course_dir, cell_timeout=cell_timeout, budget=budget, jobs=jobs,
                           use_sandbox=use_sandbox, deadline=when, assignment=assignment,
                           on_result=lambda r: save_rows(csv_path, module, [r]))
    results.sort(key=lambda r: r.student)
    print(f"\n{'student':<20} {'score':>12} {'tests':>11}  status")
    for r in results:
        score = f"{r.score:g} / {r.max_score:g}" if r.status != "not graded" else "0"
        tests = f"{r.tests_passed}/{r.tests_total}" if r.tests_total else "-"
        print(f"{r.student:<20} {score:>12} {tests:>11}  {r.status}" + (f": {' | '.join(r.reasons)}" if r.reasons else ""))
    graded = [r for r in results if r.status != "not graded"]
    if graded:
        mean = sum(r.seconds for r in graded) / len(graded)
        print(f"\n{mean:.1f} s per submission on average ({jobs} at a time)")
    print(f"grades: {csv_path}\nfeedback: {course_dir / 'feedback'}")
    bad = [r for r in results if r.status != "graded"]
    if bad:
        print(f"\n{len(bad)} submission(s) not graded or flagged: see the status column.")
    return 1 if bad else 0

"""`tito grade`: autograde students' notebooks for one module, so that a grade means the work.

Each submission is graded twice, each time inside a sandbox (tito/sandbox.py) that cannot
read the course folder, the solutions, the hidden tests or the gradebook, cannot write
outside its scratch folder and has no network:

1. nbgrader: the notebook runs in a sandboxed kernel, nbgrader restores every graded test
   cell from the source (editing or deleting one earns nothing) and scores them, with a
   per-cell timeout (an endless loop is stopped).
2. the module's tests: the notebook's `#| export` cells are exported into a package and the
   module's pytest suite runs against it in a separate sandboxed process.

Both run against a *prefix build*: earlier modules' reference code, and this module and all
later ones as released stubs, so importing "the reference" gives a stub. A student whose
notebook score is far above their test score, or whose notebook installs input
transformers, trace hooks or rebinds builtins, is flagged (table, CSV, exit code). Every
submission is graded in its own nbgrader folder, so `--jobs N` runs them side by side and
one student's code can never touch another's grade.
"""
from __future__ import annotations

import ast
import csv
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tito import build, notebook, sandbox
from tito.course import Module, find_root, resolve
from tito.errors import TitoError
from tito.locks import locked

# A notebook scoring this much more of its points than the tests pass is flagged.
DISAGREEMENT = 0.5
TEST_RUN_TIMEOUT_S = 15 * 60
CSV_FIELDS = ["module", "student", "score", "max_score", "tests_passed", "tests_total", "status", "reason",
              "seconds"]


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


def _nbgrader(course_dir: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", *args,
           f"--CourseDirectory.root={course_dir}", "--CourseDirectory.course_id=tinytorch"]
    return subprocess.run(cmd, cwd=course_dir, env=env, capture_output=True, text=True)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def collect(folder: Path, module: Module) -> tuple[dict[str, Path], list[Result]]:
    """({student: notebook}, [Result for each student folder that has no gradable notebook]).

    A student's notebook is <folder>/<student>/<name>.ipynb, or <folder>/<student>/<NN_name>/<name>.ipynb
    (what `nbgrader collect` leaves in submitted/)."""
    import nbformat

    if not folder.is_dir():
        raise TitoError(f"submissions folder {folder} does not exist.")
    expected = f"{module.name}.ipynb"
    found, problems = {}, []
    for student in sorted(p for p in folder.iterdir() if p.is_dir()):
        path = student / expected
        if not path.is_file() and (student / module.slug / expected).is_file():
            path = student / module.slug / expected  # nbgrader's collected layout: student/assignment/
        if not path.is_file():
            others = sorted(p.name for p in (*student.glob("*.ipynb"), *student.glob(f"{module.slug}/*.ipynb")))
            why = (f"no {expected}; found {', '.join(others)} (rename it to {expected})" if others
                   else f"no {expected} in {student.name}/")
            problems.append(Result(student.name, "not graded", reasons=[why]))
            continue
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as exc:  # not JSON, or not a notebook
            problems.append(Result(student.name, "not graded",
                                   reasons=[f"{expected} is not a valid notebook ({_last_line(str(exc))[:200]})"]))
            continue
        found[student.name] = path
    if not found and not problems:
        raise TitoError(f"no submissions in {folder}: expected one folder per student holding {expected}, "
                        f"e.g. {folder}/alice/{expected}.")
    return found, problems


# --- what a notebook does to the grading machinery -------------------------------------

_HOOK_ATTRS = {"input_transformers_cleanup", "input_transformers_post", "ast_transformers", "settrace",
               "setprofile", "monitoring", "set_custom_exc", "showtraceback", "run_cell", "events",
               "register_magic_function"}
_HOOK_NAMES = {"get_ipython", "builtins", "__builtins__"}


def _hooks_in(nb) -> set[str]:
    found = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                        for line in cell.source.splitlines()))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in _HOOK_ATTRS:
                found.add(f"uses .{node.attr}")
            elif isinstance(node, ast.Name) and node.id in _HOOK_NAMES:
                found.add(f"uses {node.id}")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if getattr(node, "module", None) else [])
                if any(n and n.split(".")[0] in ("builtins", "nbgrader", "ipykernel") for n in names):
                    found.add(f"imports {', '.join(sorted(n for n in names if n))}")
    return found


def tampering(nb, source_nb=None) -> list[str]:
    """What a notebook's code does that only code subverting the checks needs, and the
    course's own notebook (`source_nb`) does not: IPython input or AST transformers, event
    hooks, trace/profile hooks, rebinding builtins."""
    found = _hooks_in(nb)
    if source_nb is not None:
        found -= _hooks_in(source_nb)
    return sorted(found)


# --- one submission ----------------------------------------------------------------------

def _prepare_template(root: Path, module: Module, course_dir: Path, env: dict) -> Path:
    """course_dir/template/<slug>: the source notebook and its generated assignment, once per
    run; each submission's nbgrader folder starts as a copy of it."""
    import jupytext
    import nbformat

    template = course_dir / "template" / module.slug
    if template.exists():
        shutil.rmtree(template)
    source = template / "source" / module.slug
    source.mkdir(parents=True)
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


def _gradebook_score(folder: Path, slug: str, student: str) -> tuple[float, float] | None:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
        try:
            submission = gb.find_submission(slug, student)
        except MissingEntry:
            return None
        return float(submission.score), float(submission.max_score)


def _run_notebooks(module: Module, template: Path, work: Path, notebooks: dict[str, Path], prefix: Path,
                   env: dict, cell_timeout: int, use_sandbox: bool, results: dict[str, Result],
                   feedback: bool = True) -> None:
    """nbgrader's autograde of `notebooks` ({student: path}) in one nbgrader folder under `work`
    (one student, for a class: each student's own folder; several only for the course's own
    notebooks, in tito verify)."""
    folder = work / "nbgrader"
    shutil.copytree(template, folder)
    for student, notebook_path in notebooks.items():
        target = folder / "submitted" / student / module.slug
        target.mkdir(parents=True)
        shutil.copy2(notebook_path, target / f"{module.name}.ipynb")
    run_env = dict(env)
    only = [f"--student={next(iter(notebooks))}"] if len(notebooks) == 1 else []
    args = ["autograde", module.slug, *only, "--force", "--create", f"--Execute.timeout={cell_timeout}"]
    if use_sandbox:
        import tempfile

        # The kernel's sockets: a short path (a socket path may not exceed ~107 bytes).
        scratch, jupyter = work / "kernel-scratch", work / "jupyter"
        scratch.mkdir(parents=True)
        runtime = Path(tempfile.mkdtemp(prefix="tito-kernel-"))
        # Figures inline, as in the student's Jupyter: the graded notebook (feedback, and the
        # book's chapters in tito verify) shows the notebook's pictures.
        sandbox.write_kernelspec(jupyter, scratch=scratch, runtime=runtime, readable=[prefix],
                                 env={"PYTHONPATH": str(prefix),
                                      "MPLBACKEND": "module://matplotlib_inline.backend_inline"})
        run_env["JUPYTER_PATH"] = os.pathsep.join([str(jupyter), env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
        run_env["JUPYTER_RUNTIME_DIR"] = str(runtime)
        args += [f"--Execute.kernel_name={sandbox.KERNEL_NAME}", "--KernelManager.transport=ipc",
                 f"--KernelManager.connection_file={runtime / 'kernel.json'}"]
    else:
        run_env["PYTHONPATH"] = str(prefix)
    try:
        proc = _nbgrader(folder, *args, env=run_env)
    finally:
        if use_sandbox:
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
        if feedback:
            made = _nbgrader(folder, "generate_feedback", module.slug, f"--student={student}", "--force", env=env)
            if made.returncode != 0:
                result.reasons.append(f"no feedback: {_last_line(made.stderr)[:200]}")


def _run_tests(root: Path, module: Module, work: Path, notebook_path: Path, prefix: Path,
               use_sandbox: bool, result: Result) -> None:
    """Export the submission's `#| export` cells over the prefix build and run the module's
    tests against that package, sandboxed."""
    from tito import testing

    package = work / "package"
    shutil.copytree(prefix / "tinytorch", package / "tinytorch")
    try:
        nb = notebook.read_student(notebook_path, module.notebook_rel, module.number)
        chunks = notebook.export_chunks(nb, module.notebook_rel)
        build._write(package / "tinytorch", notebook.group_by_target(chunks), module.notebook_rel)
    except TitoError as exc:
        result.reasons.append(f"its export cells do not export ({_last_line(exc.message)[:200]}); tests: 0")
    tests = work / "tests"
    (tests / "tests").mkdir(parents=True)
    shutil.copy2(root / "tests" / "conftest.py", tests / "tests" / "conftest.py")
    shutil.copytree(module.tests_path, tests / "tests" / module.slug, ignore=build.IGNORE)
    (tests / "pytest.ini").write_text("[pytest]\ntimeout = 60\naddopts = -p no:cacheprovider -p no:anyio -p no:platformdirs "
                                     "--import-mode=importlib\n")
    scratch = work / "test-scratch"
    scratch.mkdir()
    xml = scratch / "report.xml"
    cmd = [sys.executable, "-m", "pytest", str(tests / "tests" / module.slug), "-q", "--tb=no",
           "-c", str(tests / "pytest.ini"), "--rootdir", str(tests), f"--junitxml={xml}", "-o", "junit_family=xunit1"]
    env = {"PYTHONPATH": str(package), "TITO_GRADING": "1"}
    if use_sandbox:
        cmd = sandbox.command(cmd, scratch=scratch, readable=[package, tests], env=env)
        run_env = None
    else:
        run_env = dict(os.environ, **env, PYTHONDONTWRITEBYTECODE="1", HOME=str(scratch))
    try:
        proc = subprocess.run(cmd, cwd=scratch, env=run_env, capture_output=True, text=True,
                              timeout=TEST_RUN_TIMEOUT_S, start_new_session=True)
        (work / "tests.log").write_text(proc.stdout + proc.stderr)
    except subprocess.TimeoutExpired:
        result.reasons.append(f"the test run did not finish in {TEST_RUN_TIMEOUT_S // 60} minutes")
    if xml.is_file():
        outcome = testing.parse_junit(xml, package, None)
        result.tests_passed, result.tests_total = outcome.passed, outcome.total
    if not result.tests_total:
        result.reasons.append("no test of the module ran on its exported code")


def grade_one(root: Path, module: Module, template: Path, course_dir: Path, student: str, notebook_path: Path,
              prefix: Path, env: dict, cell_timeout: int, use_sandbox: bool, with_tests: bool = True) -> Result:
    import nbformat

    started = time.perf_counter()
    result = Result(student)
    work = course_dir / "runs" / module.slug / student
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    source = template / "source" / module.slug / f"{module.name}.ipynb"
    hooks = tampering(nbformat.read(notebook_path, as_version=4), nbformat.read(source, as_version=4))
    _run_notebooks(module, template, work, {student: notebook_path}, prefix, env, cell_timeout, use_sandbox,
                   {student: result})
    if with_tests and result.status != "not graded":
        _run_tests(root, module, work, notebook_path, prefix, use_sandbox, result)
        notebook_share = result.score / result.max_score if result.max_score else 0.0
        test_share = result.tests_passed / result.tests_total if result.tests_total else 0.0
        if notebook_share - test_share > DISAGREEMENT:
            result.status = "flagged"
            result.reasons.append(f"the notebook scored {notebook_share:.0%} of its points but only "
                                  f"{result.tests_passed}/{result.tests_total} tests pass on its exported code")
    if hooks and result.status != "not graded":
        result.status = "flagged"
        result.reasons.append("the notebook reaches into the grading machinery: " + "; ".join(hooks))
    feedback = work / "nbgrader" / "feedback" / student / module.slug
    if feedback.is_dir():
        dest = course_dir / "feedback" / student / module.slug
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(feedback, dest)
    result.seconds = time.perf_counter() - started
    return result


# --- the whole run -------------------------------------------------------------------------

def _write_csv(path: Path, module: Module, results: list[Result]) -> None:
    """grades.csv keeps every module ever graded here: this run's rows replace its module's."""
    rows = []
    if path.is_file():
        with open(path, newline="") as handle:
            rows = [r for r in csv.DictReader(handle) if r.get("module") != module.slug]
    for r in results:
        rows.append({"module": module.slug, "student": r.student, "score": f"{r.score:g}",
                     "max_score": f"{r.max_score:g}", "tests_passed": r.tests_passed, "tests_total": r.tests_total,
                     "status": r.status, "reason": " | ".join(r.reasons), "seconds": f"{r.seconds:.1f}"})
    rows.sort(key=lambda r: (r["module"], r["student"]))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def setup() -> int:
    """`tito grade setup`: check that everything grading needs is here, sandbox first."""
    if importlib.util.find_spec("nbgrader") is None:
        raise TitoError('nbgrader is not installed: pip install -e ".[instructor]".')
    problem = sandbox.problem()
    if problem:
        raise TitoError(f"the grading sandbox does not work here: {problem}")
    print("✓ nbgrader is installed\n✓ the sandbox works: a sandboxed process saw none of the files outside it, "
          "had no network, and could write only its scratch folder\ntito grade is ready.")
    return 0


def _prepare(root: Path, module: Module, course_dir: Path) -> tuple[Path, dict, Path]:
    """(prefix build 1..k-1, nbgrader's environment, the nbgrader template) for grading `module`."""
    prefix = build.build_prefix(root, module.number - 1)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    # nbgrader runs helper programs (alembic) by name: find the ones beside this Python first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return prefix, env, _prepare_template(root, module, course_dir, env)


def run_grading(root: Path, module: Module, found: dict[str, Path], course_dir: Path, *, cell_timeout: int = 120,
                jobs: int = 1, use_sandbox: bool = True, with_tests: bool = True, say=print) -> list[Result]:
    """Grade the notebooks `found` ({student: path}) of `module` in `course_dir`."""
    course_dir.mkdir(parents=True, exist_ok=True)
    with locked(course_dir / "grade.lock"):
        prefix, env, template = _prepare(root, module, course_dir)
        say(f"grading module {module.number:02d} ({module.name}): {len(found)} submission(s), "
            f"{'sandboxed' if use_sandbox else 'NOT SANDBOXED'}, {jobs} at a time", flush=True)

        def one(item):
            student, path = item
            r = grade_one(root, module, template, course_dir, student, path, prefix, env, cell_timeout,
                          use_sandbox, with_tests)
            say(f"  graded {student} ({r.seconds:.0f} s)", flush=True)
            return r

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            return list(pool.map(one, sorted(found.items())))


def grade_together(root: Path, module: Module, found: dict[str, Path], course_dir: Path, *,
                   cell_timeout: int = 120) -> list[Result]:
    """The course's own notebooks (tito verify: the released one and the solution), graded by
    one nbgrader run in the sandbox against modules 1..k-1, without feedback or test runs."""
    course_dir.mkdir(parents=True, exist_ok=True)
    with locked(course_dir / "grade.lock"):
        prefix, env, template = _prepare(root, module, course_dir)
        work = course_dir / "runs" / module.slug / "together"
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        results = {student: Result(student) for student in found}
        started = time.perf_counter()
        _run_notebooks(module, template, work, found, prefix, env, cell_timeout, True, results, feedback=False)
        for r in results.values():
            r.seconds = time.perf_counter() - started
        return [results[s] for s in sorted(results)]


def grade(spec: str, submissions: Path, course_dir: Path | None = None, cell_timeout: int = 120, *,
          jobs: int = 1, unsafe_no_sandbox: bool = False) -> int:
    if importlib.util.find_spec("nbgrader") is None:
        raise TitoError('nbgrader is not installed: pip install -e ".[instructor]".')
    root = find_root()
    module = resolve(spec, root)
    use_sandbox = not unsafe_no_sandbox
    if use_sandbox:
        problem = sandbox.problem()
        if problem:
            raise TitoError(f"refusing to grade: the sandbox for student code does not work here: {problem} "
                            f"(--unsafe-no-sandbox grades without it; student code then runs with your rights "
                            f"and can read the solutions and change other students' grades).")
    course_dir = (course_dir or build.build_root(root) / "grading").resolve()
    found, results = collect(submissions, module)
    results += run_grading(root, module, found, course_dir, cell_timeout=cell_timeout, jobs=jobs,
                           use_sandbox=use_sandbox)
    results.sort(key=lambda r: r.student)
    csv_path = course_dir / "grades.csv"
    with locked(course_dir / "grades.lock"):
        _write_csv(csv_path, module, results)
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

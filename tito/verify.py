"""`tito verify`: the course's own test command (README, CI).

For every available module: the reference solutions pass the module's tests with nothing
skipped; every one of those tests fails when that module alone is swapped back to its
released stubs; the solution notebook runs top to bottom; its graded check cells pass with the
module's package files as stubs (what nbgrader's kernel sees); and every typical-mistake
mutant in solutions/NN_name/mutants.toml (at least eight) fails both the tests and a graded
check cell. The book builds (`tito book build --check`) from the solution notebooks the
grading ran. The many short test runs of the stubs and mutants are forks of one preloaded
pytest process (tito/forkrun.py); the solutions' runs are plain `tito test` runs. Then: the released files are current (`tito release --check`) and tito's own
tests pass.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait

from tito import build, mutants, testing
from tito.course import available_modules, find_root, resolve
from tito.errors import TitoError
from tito.release import release

NOTEBOOK_TIMEOUT_S = 20 * 60
# Per-test limit of the checks about values, not speed (the parity drift, the judged runs),
# which run beside verify's other checks on a busy machine.
SLOW_CHECK_TIMEOUT_S = 300
WORKERS = max(1, min(4, os.cpu_count() or 1))
TITO_TEST_WORKERS = 3


def pytorch_python() -> str:
    """The interpreter of the checks that need live PyTorch (the parity drift, tito's own
    tests): TITO_PYTORCH_PYTHON, or this one. CI runs verify on a Python that has no PyTorch
    wheel here (3.12: its tests run about twice as fast, see tests/stub_spectrum.py) and
    names a 3.11 environment with PyTorch for these two."""
    return os.environ.get("TITO_PYTORCH_PYTHON") or sys.executable


class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []
        self.details = {}  # a failed check's name -> what it printed

    def report(self, name: str, ok: bool, detail: str = "", started: float | None = None,
               seconds: float | None = None) -> None:
        if started is not None:
            seconds = time.perf_counter() - started
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        print(f"{'✓' if ok else '✗'} {name}{took}", flush=True)
        if detail and not ok:
            print("    " + detail.replace("\n", "\n    "), flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
            self.details[name] = detail

    def failures(self, shown: int = 3, lines_each: int = 15) -> str:
        """The failed checks again, the first `shown` with the start of their detail: a log
        read from its end (a CI page) then shows why, not only what, failed. The first
        failure is usually the cause of the later ones (a solutions run that fails leaves no
        reference for the mutants' attribution)."""
        out = []
        for i, name in enumerate(self.failed):
            out.append(f"✗ {name}")
            if i >= shown:
                continue
            detail = self.details.get(name, "").splitlines()
            out += ["    " + line for line in detail[:lines_each]]
            if len(detail) > lines_each:
                out.append(f"    ... {len(detail) - lines_each} more lines where the check ran, above")
        return "\n".join(out)


def check_module(root, solutions, module, variant) -> list[tuple[str, bool, str, float]]:
    """The base checks of one module, as (name, ok, detail, seconds). `variant` is the
    solutions build with this module back in its released (stub) state. The solutions' run
    leaves its report as the module's attribution reference (tito.attribution) when it passes."""
    from tito import attribution

    results = []
    started = time.perf_counter()
    # The student's journey: modules 1..k from the solutions, later ones as released stubs
    # (what a student at module k has), so no module's tests may need a later module.
    report = attribution.reference_report(root, module)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    outcome = testing.run_suite(module, build.build_prefix(root, module.number), show_output=False, report=report)
    ok = outcome.ok and outcome.skipped == 0
    if not ok:
        report.unlink(missing_ok=True)
    detail = testing.summary(module, outcome, "the solutions")
    if outcome.skipped:
        detail += f"\n{outcome.skipped} test(s) skipped: no test may skip (parity tests replay their stored answers)."
    results.append((f"{module.slug}: solutions pass all {outcome.total} tests (modules 1-{module.number} built)", ok, detail,
                    time.perf_counter() - started))

    started = time.perf_counter()
    # ... and as tito grade judges them: the tests in a process that never imports the
    # package, which answers from its own (every test must work across that boundary).
    judged = testing.run_suite(module, build.build_prefix(root, module.number), show_output=False, judged=True,
                               extra_args=("-o", f"timeout={SLOW_CHECK_TIMEOUT_S}"))
    results.append((f"{module.slug}: solutions pass all {judged.total} tests judged as tito grade judges them",
                    judged.ok and judged.skipped == 0 and judged.total == outcome.total,
                    testing.summary(module, judged, "the solutions, judged"), time.perf_counter() - started))

    started = time.perf_counter()
    stub = testing.run_suite(module, variant, show_output=False, fork=True)
    ok = stub.problem is None and stub.passed == 0 and stub.skipped == 0 and stub.failed > 0
    detail = stub.problem or (
        f"{stub.passed} test(s) pass and {stub.skipped} skip against the stub; a test that passes on "
        f"a stub proves nothing:\n" + "\n".join(stub.passes[:20]))
    results.append((f"{module.slug}: all {stub.total} tests fail against the released stub", ok, detail,
                    time.perf_counter() - started))

    return results


def hidden_test_lines(source: str) -> list[str]:
    """The substantial lines of a solution's hidden test regions."""
    lines = []
    for region in source.split("### BEGIN HIDDEN TESTS")[1:]:
        lines += [line.strip() for line in region.split("### END HIDDEN TESTS")[0].splitlines()
                  if len(line.strip()) > 20]
    return lines


def page_text(page: str) -> str:
    """What a reader of an HTML page sees: its text without tags, entities decoded."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", page))


def check_grading(root, module) -> list[tuple[str, bool, str, float]]:
    """Graded as submissions by `tito grade` (nbgrader in the sandbox, against modules
    1..k-1 only): the released notebook scores 0 and the solution scores full marks with
    every cell running (this is also the check that the solution runs top to bottom)."""
    import jupytext
    import nbformat

    from tito import grade, sandbox

    started = time.perf_counter()
    problem = sandbox.problem()
    if problem:
        return [(f"{module.slug}: graded as submissions in the sandbox", False, problem, 0.0)]
    folder = build.build_root(root) / "verify-grading" / module.slug
    subs = folder / "submissions"
    for student in ("empty", "complete"):
        (subs / student).mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.read(module.notebook_path, as_version=4), subs / "empty" / f"{module.name}.ipynb")
    solved = jupytext.read(module.solution_path, fmt="py:percent")
    for cell in solved.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    nbformat.write(solved, subs / "complete" / f"{module.name}.ipynb")
    found = {s: subs / s / f"{module.name}.ipynb" for s in ("empty", "complete")}
    try:
        hidden = hidden_test_lines(module.solution_path.read_text(encoding="utf-8"))
        results = {r.student: r for r in grade.grade_together(root, module, found, folder / "course",
                                                               cell_timeout=NOTEBOOK_TIMEOUT_S,
                                                               feedback=bool(hidden))}
    except TitoError as exc:
        return [(f"{module.slug}: graded as submissions in the sandbox", False, exc.message, 0.0)]
    seconds = time.perf_counter() - started
    empty, complete = results["empty"], results["complete"]
    out = [(f"{module.slug}: the released notebook, graded, scores 0 (got {empty.score:g} / {empty.max_score:g})",
            empty.status == "graded" and empty.score == 0 and empty.max_score > 0, "; ".join(empty.reasons), seconds)]
    errors = []
    if complete.autograded and complete.autograded.is_file():
        nb = nbformat.read(complete.autograded, as_version=4)
        for number, cell in enumerate(nb.cells, 1):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    errors.append(f"cell {number}: {output.get('ename')}: {output.get('evalue', '')[:300]}")
    ok = complete.status == "graded" and complete.score == complete.max_score and not errors
    if ok:  # the book's chapter takes its outputs from this run (check_book): into its cache
        from tito import book

        book.executed_notebooks(root, [module], given={module.slug: complete.autograded})
    if hidden:
        page = complete.feedback.read_text(encoding="utf-8") if complete.feedback else ""
        leaked = [line for line in hidden if line in page_text(page)]
        out.append((f"{module.slug}: the solution's feedback page shows none of the {len(hidden)} hidden test lines",
                    bool(page) and not leaked, f"shown: {leaked[:2]}" if page else "no feedback page", 0.0))
    detail = "; ".join(complete.reasons + errors[:3])
    out.append((f"{module.slug}: the solution, graded, scores full marks and runs top to bottom "
                f"(got {complete.score:g} / {complete.max_score:g}; one nbgrader run of both: {complete.seconds:.0f} s)",
                ok, detail, 0.0))
    return out


def check_book(root, grading_futures) -> tuple[str, bool, str, float]:
    """`tito book build --check`, once every module is graded: its chapters' outputs come from
    the solution notebooks that check_grading ran (seeded into the book's cache), so no
    notebook runs twice."""
    from tito import book

    futures_wait(grading_futures)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tito", "book", "build", "--check", "--jobs", "1"], cwd=root,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    detail = "\n".join(proc.stdout.strip().splitlines()[-25:])
    pages = len(list((book.book_root(root) / "html").rglob("*.html")))
    return (f"book: tito book build --check: {pages} pages, no solution text, nothing from the network, "
            f"links resolve, math and pictures render in headless chromium", proc.returncode == 0, detail,
            time.perf_counter() - started)


def mutant_count_check(module) -> tuple[str, bool, str, float]:
    found = mutants.load(module)
    ok = len(found) >= mutants.MINIMUM
    detail = "" if ok else (f"{mutants.mutants_path(module).relative_to(module.root)} lists {len(found)} "
                            f"mutant(s); each module needs at least {mutants.MINIMUM}.")
    return (f"{module.slug}: {len(found)} mutants listed", ok, detail, 0.0)


class References:
    """Each module's attribution reference (tito.attribution.reference) on its solutions
    build (build_prefix: what a student who finished it has), made once, by the first
    mutant check of that module that needs it; None when it could not be made. With
    `solved` (slug -> the future of check_module), the reference is that check's passing
    run, not a run of its own."""

    def __init__(self, root, solved=None):
        self.root, self.solved = root, solved or {}
        self._lock, self._made, self._packages = threading.Lock(), {}, {}

    def package(self, module):
        with self._lock:
            if module.slug not in self._packages:
                self._packages[module.slug] = build.build_prefix(self.root, module.number)
            return self._packages[module.slug]

    def get(self, module):
        from tito import attribution

        with self._lock:
            entry = self._made.setdefault(module.slug, [threading.Lock(), False, None])
        with entry[0]:
            if not entry[1]:
                ran = module.slug in self.solved
                if ran:
                    self.solved[module.slug].result()
                try:
                    if not ran or attribution.reference_report(self.root, module).is_file():
                        entry[2] = attribution.reference(self.root, self.package(module), module, ran=ran)
                except TitoError:  # the solutions' own check reports it; mutants then run every test
                    entry[2] = None
                entry[1] = True
            return entry[2]


def check_mutant_tests(root, module, mutant, references):
    """One mutant against the module's tests, as `tito test` runs them (the tests it can
    change; tito.attribution): it must fail them, and the first group `tito test` prints
    must name the function the mutant edits."""
    from tito import attribution

    started = time.perf_counter()
    try:
        mutants.apply(module, mutant)
        wanted = attribution.target(module, mutant)
        ref = references.get(module)
        outcome = attribution.run_mutant(root, references.package(module), module, mutant, ref)
    except TitoError as exc:
        return [(f"{module.slug}: mutant {mutant.name} applies", False, exc.message, 0.0)]
    if outcome.problem:
        caught, how = True, outcome.problem.splitlines()[0]
    elif outcome.failed:
        name, message = outcome.failures[0]
        caught, how = True, f"{name}: {message[:160]}"
    else:
        caught, how = False, f"all {outcome.passed} tests still pass"
    filed, named = attribution.judged(outcome, wanted)
    seconds = time.perf_counter() - started
    return [(f"{module.slug}: mutant {mutant.name} fails the tests", caught, f"{mutant.says}: {how}", seconds),
            (f"{module.slug}: mutant {mutant.name} is filed under its function", filed, named, 0.0)]


def attribution_count(module, lines) -> tuple[str, bool, str, float]:
    """The module's count of mutants whose first group names their function."""
    filed = [ok for name, ok, detail, seconds in lines if name.endswith("is filed under its function")]
    return (f"{module.slug}: attribution: {sum(filed)} of {len(filed)} mutants filed first under the function "
            f"they break", all(filed), "", 0.0)


def check_graded_cells(module, variant, found):
    """The graded check cells pass on the solution (with the module's own package files as
    stubs, what nbgrader's kernel sees), and each mutant fails at least one of them."""
    started = time.perf_counter()
    problem, results = mutants.graded_checks(module, variant, found)
    seconds = time.perf_counter() - started
    out = [(f"{module.slug}: graded check cells pass on the solution", problem is None, problem or "", seconds)]
    for mutant in found:
        caught, how = results.get(mutant.name, (False, "not run"))
        out.append((f"{module.slug}: mutant {mutant.name} fails a graded check cell", caught,
                    f"{mutant.says}: {how}", 0.0))
    return out


def _slowest_tests(pytest_output: str) -> list[str]:
    """The lines of pytest's --durations table ("12.3s call tests/...::test_x"), or []."""
    return [line.strip() for line in pytest_output.splitlines()
            if re.match(r"\s*\d+(\.\d+)?s (call|setup|teardown) ", line)]


class _Background:
    """A command running beside the checks, its output in a file (a pipe nobody reads while
    the checks run would fill and stall it); `finished[name]` gets its end time."""

    def __init__(self, name, cmd, cwd, t0, finished, env=None):
        import tempfile
        import threading

        self.log = tempfile.TemporaryFile(mode="w+")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT, text=True, env=env)

        def wait():
            self.proc.wait()
            self.seconds = time.perf_counter() - self.started
            finished[name] = time.perf_counter() - t0
        self.waiter = threading.Thread(target=wait, daemon=True)
        self.waiter.start()

    def result(self) -> tuple[int, str, float]:
        self.waiter.join()
        self.log.seek(0)
        return self.proc.returncode, self.log.read(), self.seconds


def verify(only: list[str] | None = None, *, with_mutants: bool = True) -> int:
    """Check the whole course, or with `only` just those modules (no release or tito checks)."""
    root = find_root()
    checks = Checks()
    testing.one_thread_each(os.environ)  # checks run side by side: threads would fight over the cores
    # The module checks run as a student's install does: PyTorch hidden, parity tests
    # answered from their stored references (tests/torch_reference.py); the drift check
    # below compares those references with live PyTorch.
    os.environ.setdefault("TINYTORCH_PARITY", "replay")
    modules = [resolve(spec, root) for spec in only] if only else available_modules(root)
    print(f"tito verify: {len(modules)} module(s): " + ", ".join(m.slug for m in modules), flush=True)

    if not only:
        started = time.perf_counter()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = release(check=True)
        checks.report("tito release --check", code == 0, out.getvalue().strip(), started)

    t0 = time.perf_counter()
    finished = {}  # what ended when, in seconds from here (the run's time line, printed last)
    tito_tests = None
    if not only:  # tito's own tests run alongside the module checks
        # in TITO_TEST_WORKERS processes (pytest-xdist): most of them wait on the CLI they run
        tito_tests = _Background("tito's tests", [*testing.pytest_command(pytorch_python()), str(root / "tests" / "tito"), "-q",
                                                   "-p", "no:cacheprovider", "-n", str(TITO_TEST_WORKERS),
                                                   "--dist", "load", "--durations=12"], root, t0, finished,
                                 env={k: v for k, v in os.environ.items() if k != "TINYTORCH_PARITY"})
    solutions = build.build_solutions(root)
    milestones = drift = None
    if not only:  # every milestone meets its target on the reference build, alongside the rest
        milestones = _Background("milestones", [sys.executable, "-m", "tito", "milestone", "run", "all", "--solutions"],
                                 root, t0, finished)
        drift = _parity_drift(root, solutions, t0, finished)
    variants = {m.slug: build.build_stub_variant(root, solutions, m) for m in modules}
    # Modules are independent given the solutions build: check them side by side, report in
    # order. The notebook runs come first, then the mutants' test runs, the later modules'
    # (slower: numba, bigger models) first, so that no long run is left for the end.
    book_pool = ThreadPoolExecutor(max_workers=1)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        solved = {m.slug: pool.submit(check_module, root, solutions, m, variants[m.slug]) for m in modules}
        futures = list(solved.values())
        grading = [pool.submit(check_grading, root, m) for m in modules]
        futures += grading
        # the book, once every solution notebook has run, alongside the mutants
        book_future = book_pool.submit(check_book, root, grading) if not only else None
        found = {m.slug: mutants.load(m) if with_mutants else [] for m in modules}
        cells = {m.slug: pool.submit(check_graded_cells, m, variants[m.slug], found[m.slug]) for m in modules}
        references = References(root, solved)
        tests = {m.slug: [pool.submit(check_mutant_tests, root, m, mutant, references)
                          for mutant in found[m.slug]] for m in reversed(modules)}
        for future in futures:
            for name, ok, detail, seconds in future.result():
                checks.report(name, ok, detail, seconds=seconds)
        for m in modules:
            for name, ok, detail, seconds in cells[m.slug].result():
                checks.report(name, ok, detail, seconds=seconds)
            if with_mutants:
                checks.report(*mutant_count_check(m)[:3])
            lines = [line for future in tests[m.slug] for line in future.result()]
            for name, ok, detail, seconds in lines:
                checks.report(name, ok, detail, seconds=seconds)
            if with_mutants:
                checks.report(*attribution_count(m, lines)[:3])
    finished["module checks"] = time.perf_counter() - t0

    if book_future is not None:
        name, ok, detail, seconds = book_future.result()
        finished["book"] = time.perf_counter() - t0
        checks.report(name, ok, detail, seconds=seconds)
    book_pool.shutdown()

    if drift is not None:
        code, out, seconds = drift.result()
        tail = "\n".join(out.strip().splitlines()[-25:])
        last = tail.splitlines()[-1].strip("= ") if tail else ""
        checks.report(f"parity references equal live PyTorch: {last}", code == 0, tail, seconds=seconds)

    if milestones is not None:
        code, out, seconds = milestones.result()
        tail = "\n".join(out.strip().splitlines()[-12:])
        checks.report("milestones: every one meets its target with --solutions", code == 0, tail, seconds=seconds)

    if tito_tests is not None:
        code, out, seconds = tito_tests.result()
        tail = "\n".join(out.strip().splitlines()[-25:])
        last = tail.splitlines()[-1] if tail else ""
        checks.report(f"tito's own tests: {last.strip('= ')}", code == 0, tail, seconds=seconds)
        slowest = _slowest_tests(out)
        if slowest:  # where CI's time goes, in every log (issue: keep CI short)
            print("    the slowest of them:\n" + "\n".join("      " + line for line in slowest), flush=True)

    if not only:
        print(f"\nverify took {time.perf_counter() - t0:.0f} s; finished at: "
              + ", ".join(f"{what} {at:.0f} s" for what, at in sorted(finished.items(), key=lambda kv: kv[1])),
              flush=True)
    if checks.failed:
        print("\nfailed:\n" + checks.failures())
    print(f"\nverify: {checks.passed} passed, {len(checks.failed)} failed", flush=True)
    return 1 if checks.failed else 0



def _parity_drift(root, solutions, t0, finished):
    """Every parity test against live PyTorch on the reference build, each answer compared
    with the one stored for the student install (TINYTORCH_PARITY=check), in the background.
    One pytest run per module, as the answers were recorded: a module's session fixtures
    must not start from the state another module's tests left. It compares values, not
    speed: the per-test time limit is raised (it runs beside verify's other checks)."""
    env = dict(testing.suite_env(solutions), TINYTORCH_PARITY="check", TINYTORCH_PARITY_ONLY="1")
    suites = [str(m.tests_path) for m in available_modules(root) if m.tests_path.is_dir()]
    script = (
        "import subprocess, sys\n"
        f"failed = [s for s in sys.argv[1:] if subprocess.run([*{testing.pytest_command(pytorch_python())!r}, s, '-q', '-p',"
        f" 'no:cacheprovider', '-o', 'timeout={SLOW_CHECK_TIMEOUT_S}']).returncode not in (0, 5)]\n"
        "print(f'{len(sys.argv) - 1 - len(failed)} of {len(sys.argv) - 1} modules match'"
        " + (': drift in ' + ', '.join(failed) if failed else ''))\n"
        "sys.exit(1 if failed else 0)\n"
    )
    return _Background("parity drift", [pytorch_python(), "-c", script, *suites], root, t0, finished, env=env)


def mutants_command(spec: str, names: list[str] | None, halves: tuple[str, ...]) -> int:
    """`tito mutants NN`: check one module's mutants (for authors writing them)."""
    root = find_root()
    module = resolve(spec, root)
    testing.one_thread_each(os.environ)
    found = mutants.load(module)
    if names:
        unknown = sorted(set(names) - {m.name for m in found})
        if unknown:
            raise TitoError(f"{module.label} has no mutant named {', '.join(unknown)}; it has: "
                            + (", ".join(m.name for m in found) or "none"))
        found = [m for m in found if m.name in names]
    print(f"tito mutants: {module.label}, {len(found)} mutant(s)", flush=True)
    solutions = build.build_solutions(root)
    variant = build.build_stub_variant(root, solutions, module)
    checks = Checks()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = []
        if "checks" in halves:
            futures.append(pool.submit(check_graded_cells, module, variant, found))
        if "tests" in halves:
            references = References(root)
            futures += [pool.submit(check_mutant_tests, root, module, m, references) for m in found]
        lines = []
        for future in futures:
            for name, ok, detail, seconds in future.result():
                lines.append((name, ok, detail, seconds))
                checks.report(name, ok, detail, seconds=seconds)
                if ok and detail and name.endswith("is filed under its function"):
                    print("    " + detail, flush=True)
        if "tests" in halves:
            checks.report(*attribution_count(module, lines)[:3])
    if not names and len(mutants.load(module)) < mutants.MINIMUM:
        checks.report(f"at least {mutants.MINIMUM} mutants", False,
                      f"{mutants.mutants_path(module).relative_to(root)} lists {len(found)}.")
    print(f"\nmutants: {checks.passed} checks passed, {len(checks.failed)} failed", flush=True)
    return 1 if checks.failed else 0

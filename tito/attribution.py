"""Does `tito test` point at the function the student got wrong? Measured on the mutants.

A mutant edits one student function (the stub whose solution region holds its `find`, or
the one its `function` field names when the edit reaches two). `tito test` prints the
failures grouped by the function they point at, most relevant first; the mutant is
*attributed* when that first group names its function.

Measuring it on every mutant of every module would cost a whole suite run each. It need
not: a test that never entered the mutated functions on the solutions runs exactly as it
did there (same result, same functions entered), so only the tests that did are rerun and
the reference run's cases stand in for the others (`reference`, `selection`, `run_mutant`).
Code that numba compiles for the CPU calls no Python frame, so which tests enter a compiled
function is read from a second run with the compiler off (`Reference.ran_as_python`).
"""
from __future__ import annotations

import ast
import functools
import json
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from tito import build, mutants, testing
from tito.compiled import cpu_compiled
from tito.course import Module
from tito.errors import TitoError
from tito.pyparse import parse


def stub_names(module: Module) -> list[str]:
    """The student's functions of `module`, in notebook order (from tito release's manifest)."""
    path = module.root / "modules" / module.slug / ".tito-stubs.json"
    return [s["name"] for s in json.loads(path.read_text(encoding="utf-8")).get("stubs", [])]


def target(module: Module, mutant: mutants.Mutant, text: str | None = None) -> str | None:
    """The stub a mutant edits: the innermost function around its `find` whose qualified
    name is a stub of the module (a helper nested in a stub counts as the stub)."""
    if mutant.function:
        return mutant.function
    text = module.solution_path.read_text(encoding="utf-8") if text is None else text
    mutated = mutants.apply(module, mutant, text)  # raises when the mutant does not apply
    start = next(i for i, (a, b) in enumerate(zip(text, mutated)) if a != b)
    line = text.count("\n", 0, start) + 1
    around = [(last - first, name) for name, (first, last) in stub_spans(module, text).items() if first <= line <= last]
    return min(around)[1] if around else None  # the innermost: a stub nested in a stub wins


def first_group(outcome: testing.Outcome) -> tuple[str, ...]:
    """The functions `tito test`'s summary names first: one, or the candidates it cannot
    tell apart (empty: it names no function)."""
    if not outcome.details:
        return ()
    first = min(outcome.details, key=lambda f: f.order)
    return first.candidates or ((first.stub,) if first.stub else ())


def compiled_stubs(module: Module, text: str) -> set[str]:
    """The student functions that numba compiles for the CPU: compiled code calls them without
    a Python frame, so a trace of the compiled tests cannot say which tests run them (the run
    with the compiler off can). (`cuda.jit` kernels need no entry: numba's simulator runs them
    as Python, so the trace sees every launch, and on a real GPU no test is seen entering
    them, so `selection` runs every test.)"""
    return set(cpu_compiled(tuple(stub_names(module)), text))


def stub_spans(module: Module, text: str) -> dict[str, tuple[int, int]]:
    """{student function: (first line, last line)} in the solution `text`."""
    return dict(_spans(tuple(stub_names(module)), text))


# Asked once per mutant of the same text (`tito verify`): remembered, not re-parsed.
@functools.lru_cache(maxsize=8)
def _spans(names: tuple[str, ...], text: str) -> tuple[tuple[str, tuple[int, int]], ...]:
    spans = {}
    stack = [(node, "") for node in parse(text).body]
    while stack:
        node, prefix = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qualname = f"{prefix}{node.name}"
            if qualname in names:
                spans[qualname] = (node.lineno, node.end_lineno)
            stack.extend((child, f"{qualname}.") for child in node.body)
    return tuple(spans.items())


def touched(module: Module, text: str, mutated: str) -> set[str] | None:
    """The student functions whose lines the mutant changes; None when a changed line lies
    in none of them (module-level code: any test may see it)."""
    spans = stub_spans(module, text)
    old, new = text.splitlines(), mutated.splitlines()
    same = min(len(old), len(new))
    head = next((i for i in range(same) if old[i] != new[i]), same)  # lines equal at the start
    tail = next((i for i in range(same - head) if old[-1 - i] != new[-1 - i]), same - head)  # and the end
    # 1-based lines head+1..len(old)-tail changed; none (an insertion): the line it follows
    lines = set(range(head + 1, len(old) - tail + 1)) or {head}
    found = set()
    for line in lines:
        around = {name for name, (first, last) in spans.items() if first <= line <= last}
        if not around:
            return None
        found |= around
    return found


@dataclass
class Reference:
    """The module's tests on the solutions build, each with the student functions it ran."""
    report: Path  # its junit report
    ran: dict[str, set[str]]  # pytest node id -> the student functions that test entered
    # With numba's compiler off, each test that passed -> the functions it entered (a test
    # that did not pass is missing: where it stopped says nothing of what it would enter).
    ran_as_python: dict[str, set[str]] | None = None


def _spectra(module: Module, report: Path, passed_only: bool = False) -> dict[str, set[str]]:
    """{pytest node id: the student functions it entered} from a junit report."""
    ran = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        if passed_only and any(case.find(tag) is not None for tag in ("failure", "error", "skipped")):
            continue
        node = f"{module.tests_path}/{testing.junit_test_id(case.get('classname', ''), case.get('name', ''))}"
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        ran[node] = {n for n in (props.get("tito_spectrum") or "").split("|") if n}
    return ran


def reference_report(root, module: Module) -> Path:
    """Where the module's reference run keeps its junit report."""
    return build.build_root(root) / "attribution" / f"{module.slug}-reference.xml"


def reference(root, package, module: Module, *, ran: bool = False) -> Reference:
    """The module's tests on `package` (the module's solutions build), each with the functions
    it entered: run once here, or with `ran`, read from the report of a passing run that
    already made it (tito verify's solutions check), and once more with numba's compiler off
    when the student writes compiled functions."""
    report = reference_report(root, module)
    report.parent.mkdir(parents=True, exist_ok=True)
    if not ran:
        outcome = testing.run_suite(module, package, show_output=False, fork=True, report=report)
        if not outcome.ok:
            raise TitoError(f"{module.label}: the solutions must pass every test before attribution can be "
                            f"measured: {outcome.problem or outcome.failures[:1]}")
    ref = Reference(report, _spectra(module, report))
    if compiled_stubs(module, module.solution_path.read_text(encoding="utf-8")):
        as_python = report.with_name(f"{module.slug}-reference-as-python.xml")
        outcome = testing.run_suite(module, package, show_output=False, fork=True, report=as_python, jit=False)
        if not outcome.problem:
            ref.ran_as_python = _spectra(module, as_python, passed_only=True)
    return ref


def selection(ref: Reference, functions: set[str] | None, compiled: set[str] = frozenset()) -> list[str] | None:
    """The tests a mutant of `functions` can change: those that entered one of them on the
    solutions. Every other test never runs the mutated lines, so it passes as it did, having
    entered the same functions. A function in `compiled` (numba's, tito.attribution's
    compiled_stubs) is seen entered only in the run with the compiler off, and a test that
    did not pass there is always chosen. None (run them all) when nothing can be said."""
    if functions is None:
        return None
    seen, unknown = ref.ran, set()
    if functions & compiled:
        if ref.ran_as_python is None:
            return None  # compiled callers enter them unseen
        seen = {node: ran | ref.ran_as_python.get(node, set()) for node, ran in ref.ran.items()}
        unknown = set(ref.ran) - set(ref.ran_as_python)
    if not all(any(f in ran for ran in seen.values()) for f in functions):
        return None  # a function no test was seen entering: nothing to select by
    return [node for node, ran in seen.items() if ran & functions or node in unknown]


def _merged(ref: Reference, report: Path, into: Path) -> None:
    """The reference report with the rerun tests' cases replaced by those of `report`."""
    fresh = {(c.get("classname", ""), c.get("name", "")): c for c in ET.parse(report).getroot().iter("testcase")}
    tree = ET.parse(ref.report)
    for suite in tree.getroot().iter("testsuite"):
        for i, case in enumerate(list(suite)):
            key = (case.get("classname", ""), case.get("name", ""))
            if case.tag == "testcase" and key in fresh:
                suite[i] = fresh[key]
    tree.write(into, encoding="utf-8")


def run_mutant(root, package, module: Module, mutant: mutants.Mutant,
               ref: Reference | None = None) -> testing.Outcome:
    """`tito test`'s outcome for `package` (the module's solutions build) with the module
    exported from the mutated solution: with `ref`, only the tests the mutant can change run
    (selection), the others keep their reference result."""
    text = module.solution_path.read_text(encoding="utf-8")
    mutated = mutants.apply(module, mutant, text)
    functions = touched(module, text, mutated)
    chosen = selection(ref, functions, compiled_stubs(module, text)) if ref is not None else None
    with mutants.variant(root, package, module, mutated) as mutated_package:
        if chosen is None:
            return testing.run_suite(module, mutated_package, show_output=False, fork=True)
        with tempfile.TemporaryDirectory() as tmp:
            report, merged = Path(tmp) / "run.xml", Path(tmp) / "merged.xml"
            if chosen:
                outcome = testing.run_suite(module, mutated_package, show_output=False, fork=True, tests=chosen,
                                            report=report)
                if outcome.problem:
                    return outcome
                if outcome.total != len(chosen):  # the mutant changed what is collected
                    return testing.run_suite(module, mutated_package, show_output=False, fork=True)
                _merged(ref, report, merged)
            else:
                shutil.copyfile(ref.report, merged)
            return testing.parse_junit(merged, mutated_package, module)


def judged(outcome: testing.Outcome, wanted: str | None) -> tuple[bool, str]:
    """Does the first group of `outcome` name `wanted`? (ok, what it named)."""
    if outcome.problem:
        return False, f"wants `{wanted}`; the run could not be read ({outcome.problem.splitlines()[0]})"
    if not outcome.failed:
        return False, f"wants `{wanted}`; no test fails"
    named = first_group(outcome)
    if named == (wanted,):
        return True, f"`{wanted}`"
    if wanted in named:
        return True, f"`{wanted}`, among {len(named)} it says it cannot tell apart: " + ", ".join(named)
    where = min(outcome.details, key=lambda f: f.order).where if outcome.details else None
    shown = " or ".join(f"`{n}`" for n in named)
    return False, f"wants `{wanted}`, names {shown or where or 'the test itself'}"

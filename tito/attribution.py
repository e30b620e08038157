"""Does `tito test` point at the function the student got wrong? Measured on the mutants.

A mutant edits one student function (the stub whose solution region holds its `find`, or
the one its `function` field names when the edit reaches two). `tito test` prints the
failures grouped by the function they point at, most relevant first; the mutant is
*attributed* when that first group names its function.
"""
from __future__ import annotations

import ast
import json
import shutil

from tito import mutants, testing
from tito.course import Module


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
    names = set(stub_names(module))
    found, stack = None, [(node, "") for node in ast.parse(text).body]
    while stack:
        node, prefix = stack.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if not node.lineno <= line <= node.end_lineno:
            continue
        qualname = f"{prefix}{node.name}"
        if qualname in names:
            found = qualname  # inner stubs replace outer ones: the stack goes inwards
        stack.extend((child, f"{qualname}.") for child in node.body)
    return found


def first_group(outcome: testing.Outcome) -> tuple[str, ...]:
    """The functions `tito test`'s summary names first: one, or the candidates it cannot
    tell apart (empty: it names no function)."""
    if not outcome.details:
        return ()
    first = min(outcome.details, key=lambda f: f.order)
    return first.candidates or ((first.stub,) if first.stub else ())


def attributed(root, solutions, module: Module, mutant: mutants.Mutant) -> tuple[bool, str]:
    """(first group names the mutant's function, what it named) after a full test run."""
    text = mutants.apply(module, mutant)
    wanted = target(module, mutant, module.solution_path.read_text(encoding="utf-8"))
    variant = mutants.build_variant(root, solutions, module, mutant, text)
    try:
        outcome = testing.run_suite(module, variant, show_output=False, fork=True)
    finally:
        shutil.rmtree(variant, ignore_errors=True)
    if outcome.problem:
        return False, f"wants `{wanted}`; the run could not be read ({outcome.problem.splitlines()[0]})"
    named = first_group(outcome)
    if named == (wanted,):
        return True, f"`{wanted}`"
    if wanted in named:
        return True, f"`{wanted}`, among {len(named)} it says it cannot tell apart: " + ", ".join(named)
    where = min(outcome.details, key=lambda f: f.order).where if outcome.details else None
    shown = " or ".join(f"`{n}`" for n in named)
    return False, f"wants `{wanted}`, names {shown or where or 'the test itself'}"

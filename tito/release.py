"""`tito release`: solution notebooks -> student notebooks and stub package files.

Stripping follows nbgrader's own rules (ClearSolutions, ClearHiddenTests, LockCells,
ClearOutput) so that an instructor's `nbgrader generate_assignment` and `tito release`
give the same notebook; the one difference is that our stub's NotImplementedError names
the function to write and the notebook it lives in.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

from tito import notebook
from tito.backup import backup_notebook
from tito.course import Module, all_modules, available_modules, find_root
from tito.errors import TitoError

BEGIN_SOLUTION, END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
TEXT_STUB = "YOUR ANSWER HERE"
DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)")
CLASS = re.compile(r"^(\s*)class\s+([A-Za-z_]\w*)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def enclosing_name(lines: list[str], index: int) -> str | None:
    """'Tensor.transpose' for a region inside that method, 'relu' inside a function."""
    level = _indent(lines[index])
    names = []
    for line in reversed(lines[:index]):
        if not line.strip() or _indent(line) >= level:
            continue
        match = DEF.match(line) or CLASS.match(line)
        if match:
            names.append(match.group(2))
        level = _indent(line)
        if level == 0:
            break
    return ".".join(reversed(names)) or None


def stub_message(what: str, module: Module) -> str:
    return (
        f"{what} is not implemented yet: write it in {module.notebook_rel} "
        f"(module {module.number:02d}, {module.name}), then run `tito test module {module.number:02d}`."
    )


def strip_solutions(source: str, module: Module, cell_label: str) -> tuple[str, bool]:
    lines = source.split("\n")
    out, in_solution, replaced = [], False, False
    for i, line in enumerate(lines):
        if BEGIN_SOLUTION in line:
            if in_solution:
                raise TitoError(f"{module.solution_path.name}, {cell_label}: nested '### BEGIN SOLUTION'.")
            in_solution = replaced = True
            pad = line[: _indent(line)]
            name = enclosing_name(lines, i)
            what = f"{name}()" if name else f"the code in {cell_label}"
            message = stub_message(what, module)
            out.append(f"{pad}# YOUR CODE HERE")
            out.append(f"{pad}raise NotImplementedError({message!r})")
        elif END_SOLUTION in line:
            in_solution = False
        elif not in_solution:
            out.append(line)
    if in_solution:
        raise TitoError(f"{module.solution_path.name}, {cell_label}: '### BEGIN SOLUTION' without an END.")
    return "\n".join(out), replaced


def strip_hidden_tests(source: str, module: Module, cell_label: str) -> tuple[str, bool]:
    out, in_hidden, removed = [], False, False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            in_hidden = removed = True
        elif END_HIDDEN in line:
            in_hidden = False
        elif not in_hidden:
            out.append(line)
    if in_hidden:
        raise TitoError(f"{module.solution_path.name}, {cell_label}: '### BEGIN HIDDEN TESTS' without an END.")
    return "\n".join(out), removed


def student_notebook(solution_nb, module: Module):
    """The student's version of a solution notebook (a new object; the input is untouched)."""
    nb = copy.deepcopy(solution_nb)
    seen_ids = set()
    for number, cell in enumerate(nb.cells, 1):
        meta = cell.metadata.get("nbgrader", {})
        label = f"cell {number}" + (f" ({meta['grade_id']})" if meta.get("grade_id") else "")
        if meta:
            grade_id = meta.get("grade_id")
            if not grade_id or grade_id in seen_ids:
                raise TitoError(f"{module.solution_path.name}, {label}: nbgrader cells need a unique grade_id.")
            seen_ids.add(grade_id)
        is_solution, is_grade = bool(meta.get("solution")), bool(meta.get("grade"))
        if cell.cell_type == "code":
            cell.source, replaced = strip_solutions(cell.source, module, label)
        else:
            replaced = False
        if replaced and not is_solution:
            raise TitoError(f"{module.solution_path.name}, {label}: a solution region in a cell not marked as a solution cell.")
        if is_solution and not replaced:
            cell.source = (
                f"# YOUR CODE HERE\nraise NotImplementedError({stub_message('the code in ' + label, module)!r})"
                if cell.cell_type == "code" else TEXT_STUB
            )
        cell.source, removed = strip_hidden_tests(cell.source, module, label)
        if removed and not is_grade:
            raise TitoError(f"{module.solution_path.name}, {label}: hidden tests in a cell that is not graded.")
        # nbgrader's LockCells
        if is_solution:
            cell.metadata["deletable"] = False
        elif is_grade or meta.get("locked"):
            cell.metadata["deletable"] = False
            cell.metadata["editable"] = False
        cell.metadata.pop("lines_to_next_cell", None)
        cell.id = meta.get("grade_id") or f"cell-{number}"  # stable ids: releases are reproducible
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def notebook_text(nb) -> str:
    import nbformat

    return nbformat.writes(nb, version=4) + "\n"


HEADING = re.compile(r"^#{2,3}\s+(.+?)\s*$")


def stub_manifest(solution_nb, module: Module) -> list[dict]:
    """The functions the student writes, in notebook order, each with its cell's grade_id
    and the section heading above it: how `tito test` names the student's own code."""
    found, section, subsection = [], None, None
    for number, cell in enumerate(solution_nb.cells, 1):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                match = HEADING.match(line)
                if match and line.startswith("## "):  # '## 6. Views' (not the '# ' title)
                    section, subsection = match.group(1).replace("`", ""), None
                elif match and line.startswith("### "):
                    subsection = match.group(1).replace("`", "")
            continue
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            if BEGIN_SOLUTION in line:
                name = enclosing_name(lines, i) or f"cell {number}"
                if not any(entry["name"] == name for entry in found):
                    where = " › ".join(part for part in (section, subsection) if part)
                    found.append({"name": name, "grade_id": cell.metadata.get("nbgrader", {}).get("grade_id"),
                                  "section": where or None})
    return found


def text_digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def manifest_path(module: Module) -> Path:
    return module.notebook_path.parent / ".tito-stubs.json"


def release_outputs(module: Module) -> dict[Path, str]:
    """Every file `tito release` writes for one module, as {path: text}."""
    import json

    solution = notebook.read_solution(module.solution_path)
    student = student_notebook(solution, module)
    outputs = {module.notebook_path: notebook_text(student)}
    chunks = notebook.export_chunks(student, module.notebook_rel)
    grouped = notebook.group_by_target(chunks)
    exports = {target: sorted({n for c in group for n in notebook.top_level_names(c.code)})
               for target, group in grouped.items()}
    released = {f"tinytorch/{t.replace('.', '/')}.py": text_digest(notebook.render(group, module.notebook_rel))
                for t, group in grouped.items()}
    outputs[manifest_path(module)] = json.dumps(
        {"module": module.slug, "stubs": stub_manifest(solution, module), "exports": exports,
         "released": released}, indent=1) + "\n"
    readme = module.solution_path.parent / "README.md"
    if readme.is_file():
        outputs[module.notebook_path.parent / "README.md"] = readme.read_text(encoding="utf-8")
    package = module.root / "tinytorch"
    chunks = notebook.export_chunks(student, module.notebook_rel)
    for target, group in notebook.group_by_target(chunks).items():
        outputs[notebook.target_path(package, target)] = notebook.render(group, module.notebook_rel)
    return outputs


def package_targets(module: Module) -> list[str]:
    """The package files a module owns (from its solution's export directives)."""
    chunks = notebook.export_chunks(notebook.read_solution(module.solution_path), str(module.solution_path.name))
    return list(notebook.group_by_target(chunks))


README_START, README_END = "<!-- modules:start -->", "<!-- modules:end -->"


def readme_output(root: Path) -> dict[Path, str]:
    """The README's module map, regenerated so that each module's status is never stale."""
    path = root / "README.md"
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    if README_START not in text or README_END not in text:
        return {}
    rows = ["| # | module | you build | status |", "|---|---|---|---|"]
    for m in all_modules(root):
        name = f"[{m.name}](modules/{m.slug}/)" if m.available else m.name
        rows.append(f"| {m.number:02d} | {name} | {m.summary} | {'available' if m.available else 'planned'} |")
    head, rest = text.split(README_START, 1)
    tail = rest.split(README_END, 1)[1]
    return {path: head + README_START + "\n" + "\n".join(rows) + "\n" + README_END + tail}


def release(check: bool = False) -> int:
    root = find_root()
    stale = []
    outputs = readme_output(root)
    notebooks = {}
    for module in available_modules(root):
        outputs.update(release_outputs(module))
        notebooks[module.notebook_path] = module
    for path, text in outputs.items():
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(path.relative_to(root))
        if not check and current is not None and path in notebooks:
            # It may hold a student's work: keep a copy before replacing it.
            saved = backup_notebook(notebooks[path])
            print(f"backed up {path.relative_to(root)} to {saved.relative_to(root)}")
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if check:
        if stale:
            print("tito release --check: these files differ from what `tito release` would generate:")
            for path in stale:
                print(f"  {path}")
            print("Run `tito release` and commit the result.")
            return 1
        print("tito release --check: student notebooks and stub package files are up to date.")
        return 0
    for path in stale:
        print(f"wrote {path}")
    print(f"tito release: {len(stale)} file(s) updated." if stale else "tito release: nothing to update.")
    return 0


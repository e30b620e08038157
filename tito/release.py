"""`tito release`: solution notebooks -> student notebooks and stub package files.

Stripping follows nbgrader's own rules (ClearSolutions, ClearHiddenTests, LockCells,
ClearOutput) so that an instructor's `nbgrader generate_assignment` and `tito release`
give the same notebook; the one difference is that our stub's NotImplementedError names
the function to write and the notebook it lives in.
"""
from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

from tito import notebook
from tito.backup import backup_notebook
from tito.compiled import cpu_compiled
from tito.course import Module, all_modules, available_modules, find_root, is_course, is_student_copy, require_solutions
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
WRITE = re.compile(r"\b[Ww]rite `([A-Za-z_][\w.]*)")  # the prose's request for a function, by name
_LATEX_SYMBOLS = {"times": "×", "sqrt": "√", "cdot": "·", "le": "≤", "ge": "≥"}


def _plain_heading(text: str) -> str:
    """A heading as a terminal shows it: no code quotes, and $T \\times T$ as T × T."""
    def plain(math):
        out = re.sub(r"\\([A-Za-z]+)", lambda c: _LATEX_SYMBOLS.get(c.group(1), ""), math.group(1))
        return out.replace("{", "").replace("}", "")
    return re.sub(r"\$([^$]+)\$", plain, text.replace("`", ""))


def stub_manifest(solution_nb, module: Module) -> list[dict]:
    """The functions the student writes, in notebook order, each with its cell's grade_id
    and the section heading above it: how `tito test` names the student's own code."""
    found, section, subsection = [], None, None
    asked = {}  # a function the prose asks for ("Write `GPT._init_weights`"): the section that asks
    for number, cell in enumerate(solution_nb.cells, 1):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                match = HEADING.match(line)
                if match and line.startswith("## "):  # '## 6. Views' (not the '# ' title)
                    section, subsection = _plain_heading(match.group(1)), None
                elif match and line.startswith("### "):
                    subsection = _plain_heading(match.group(1))
                for name in WRITE.findall(line):
                    asked.setdefault(name, " › ".join(part for part in (section, subsection) if part) or None)
            continue
        lines = cell.source.split("\n")
        for i, line in enumerate(lines):
            if BEGIN_SOLUTION in line:
                name = enclosing_name(lines, i) or f"cell {number}"
                if not any(entry["name"] == name for entry in found):
                    where = asked.get(name) or " › ".join(part for part in (section, subsection) if part)
                    found.append({"name": name, "grade_id": cell.metadata.get("nbgrader", {}).get("grade_id"),
                                  "section": where or None})
    return found


def text_digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def manifest_path(module: Module) -> Path:
    return module.notebook_path.parent / ".tito-stubs.json"


def released_notebook_path(module: Module) -> Path:
    """A student copy keeps the released notebook here too: `tito module reset` restores it
    (and regenerates the module's stub package files from it) without the solutions."""
    return module.notebook_path.parent / ".tito-released.ipynb"


def _student_copy_outputs(module: Module) -> dict[Path, str]:
    """release_outputs in a student copy: the kept released notebook and the stubs it exports."""
    import nbformat

    kept = released_notebook_path(module)
    if not kept.is_file():
        raise TitoError(
            f"this student copy has no released notebook of {module.label} to restore from "
            f"({kept.relative_to(module.root).as_posix()} is missing); get {module.notebook_rel} again "
            f"from the course's student repository.")
    text = kept.read_text(encoding="utf-8")
    try:
        student = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds; all mean the kept copy is broken
        raise TitoError(f"{kept.relative_to(module.root).as_posix()} is not a valid notebook ({exc}); "
                        f"get it again from the course's student repository.") from None
    outputs = {module.notebook_path: text}
    package = module.root / "tinytorch"
    chunks = notebook.export_chunks(student, module.notebook_rel)
    for target, group in notebook.group_by_target(chunks).items():
        outputs[notebook.target_path(package, target)] = notebook.render(group, module.notebook_rel)
    return outputs


def release_outputs(module: Module, solution=None) -> dict[Path, str]:
    """Every file `tito release` writes for one module, as {path: text}, from `solution` (the
    module's solution notebook, read here when not given). In a student copy (no solutions):
    the released notebook and its stub package files, as they were released."""
    if solution is None:
        if not module.solution_path.is_file() and is_student_copy(module.root):
            return _student_copy_outputs(module)
        solution = notebook.read_solution(module.solution_path)
    student = student_notebook(solution, module)
    outputs = {module.notebook_path: notebook_text(student)}
    chunks = notebook.export_chunks(student, module.notebook_rel)
    grouped = notebook.group_by_target(chunks)
    exports = {target: sorted({n for c in group for n in notebook.top_level_names(c.code)})
               for target, group in grouped.items()}
    released = {f"tinytorch/{t.replace('.', '/')}.py": text_digest(notebook.render(group, module.notebook_rel))
                for t, group in grouped.items()}
    stubs = stub_manifest(solution, module)
    compiled = cpu_compiled(tuple(s["name"] for s in stubs), module.solution_path.read_text(encoding="utf-8"))
    for stub in stubs:
        if stub["name"] in compiled:
            stub["compiled"] = True  # numba-compiled for the CPU: invisible to a trace (tito test names it anyway)
    outputs[manifest_path(module)] = json.dumps(
        {"module": module.slug, "stubs": stubs, "exports": exports,
         "released": released}, indent=1) + "\n"
    readme = module.solution_path.parent / "README.md"
    if readme.is_file():
        outputs[module.notebook_path.parent / "README.md"] = readme.read_text(encoding="utf-8")
    package = module.root / "tinytorch"
    for target, group in grouped.items():
        outputs[notebook.target_path(package, target)] = notebook.render(group, module.notebook_rel)
    return outputs


def package_targets(module: Module) -> list[str]:
    """The package files a module owns (from its solution's export directives; in a student
    copy, from the manifest that `tito release` wrote beside the notebook)."""
    if not module.solution_path.is_file() and is_student_copy(module.root):
        path = manifest_path(module)
        try:
            return list(json.loads(path.read_text(encoding="utf-8"))["exports"])
        except (OSError, ValueError, KeyError, TypeError):
            raise TitoError(
                f"{path.relative_to(module.root).as_posix()} is missing or broken, so tito cannot tell "
                f"which tinytorch files {module.label} writes; get it again from the course's student "
                f"repository.") from None
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


def repeated_headings(solution_nb) -> list[str]:
    """The markdown headings that a notebook has more than once (a section pasted twice)."""
    seen, repeated = set(), []
    for cell in solution_nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("#"):
                heading = " ".join(line.split())
                if heading in seen and heading not in repeated:
                    repeated.append(heading)
                seen.add(heading)
    return repeated


def control_characters(path: Path) -> list[int]:
    """The line numbers of a solution file that hold a control character, a tab in a comment
    line (markdown) included (a LaTeX `\\frac` or `\\text` written in a plain Python string
    arrives as a form feed and `rac`, or a tab and `ext`)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return [i for i, line in enumerate(lines, 1)
            if any(ord(ch) < 32 and ch not in "\t\r" or ord(ch) == 127 for ch in line)
            or ("\t" in line and line.lstrip(" ").startswith("#"))]


def release(check: bool = False) -> int:
    root = find_root()
    require_solutions(root, "`tito release" + (" --check`" if check else "`"))
    stale = []
    outputs = readme_output(root)
    notebooks = {}
    for module in available_modules(root):
        controls = control_characters(module.solution_path)
        if controls:
            raise TitoError(f"{module.solution_path.relative_to(root).as_posix()} has a control character on "
                            f"line(s) {', '.join(map(str, controls[:10]))}: most often a LaTeX command such as "
                            f"\\frac whose backslash a script read as an escape (\\f is a form feed). "
                            f"Put the backslash back.")
        solution = notebook.read_solution(module.solution_path)
        repeated = repeated_headings(solution)
        if repeated:
            raise TitoError(f"{module.solution_path.relative_to(root).as_posix()} has these headings more than "
                            f"once: {'; '.join(repeated)}. Give each section its own title, or remove the copy.")
        outputs.update(release_outputs(module, solution))
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



# What a student copy holds, besides the generated modules/ and stub package: the top-level
# files students need (the rest of the checkout, e.g. .ci/ or instructor notes, stays out).
STUDENT_FILES = ["README.md", "pyproject.toml", ".gitignore", "LICENSE", "LICENSE.md", "LICENSE.txt"]
STUDENT_IGNORE = shutil.ignore_patterns("__pycache__", "*.py[cod]", ".ipynb_checkpoints", ".hypothesis",
                                        ".pytest_cache", ".DS_Store", "_build")


def _check_destination(root: Path, dest: Path, force: bool, dry_run: bool = False) -> None:
    """Refuse a destination that overlaps the course, or that holds something other than an
    earlier student copy; with --force, empty an earlier student copy (keeping its .git),
    unless `dry_run` (the checks alone, before the slow part)."""
    if dest.exists() and not dest.is_dir():
        raise TitoError(f"{dest} is a file; give a folder for the student copy.")
    inside = [root / name for name in ("modules", "tinytorch", "tests", "tito", "book", "milestones", "solutions")]
    if dest == root or dest in root.parents or any(dest == p or p in dest.parents for p in inside):
        raise TitoError(f"{dest} overlaps the course folder {root}; write the student copy to a folder of "
                        f"its own (e.g. ../tinytorch-student).")
    entries = [p for p in dest.iterdir() if p.name != ".git"] if dest.is_dir() else []
    if not entries:
        return
    if not force:
        raise TitoError(f"{dest} exists and is not empty. Choose a new or empty folder, or add --force to "
                        f"replace an earlier student copy there (its .git is kept, so you can commit the "
                        f"update).")
    if not (is_course(dest) and is_student_copy(dest)):
        raise TitoError(f"{dest} is not empty and is not an earlier student copy (that has tito/ and "
                        f"modules/ and no solutions/), so --force will not delete it. Choose a new or "
                        f"empty folder.")
    if dry_run:
        return
    for path in entries:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def student_release(dest: Path, force: bool = False) -> int:
    """`tito release --student-repo DIR`: the course as students get it. modules/ (released
    notebooks, READMEs, manifests), the stub package, the public tests of the available
    modules, tito, README.md, pyproject.toml and book/; never solutions/, hidden tests,
    instructor files or build output. Everything generated is generated afresh from
    solutions/, so work in this checkout's notebooks or an exported tinytorch/ cannot leak."""
    root = find_root()
    require_solutions(root, "`tito release --student-repo`")
    dest = Path(dest).expanduser().resolve()
    _check_destination(root, dest, force, dry_run=True)
    modules = available_modules(root)
    outputs: dict[Path, str] = {}
    for module in modules:  # all generated first: a broken solution stops before anything is written
        generated = release_outputs(module)
        outputs.update(generated)
        outputs[released_notebook_path(module)] = generated[module.notebook_path]
    outputs.update(readme_output(root))
    _check_destination(root, dest, force)
    dest.mkdir(parents=True, exist_ok=True)

    shutil.copytree(root / "tinytorch", dest / "tinytorch", ignore=STUDENT_IGNORE, dirs_exist_ok=True)
    shutil.copytree(root / "tito", dest / "tito", ignore=STUDENT_IGNORE, dirs_exist_ok=True)
    tests = dest / "tests"
    tests.mkdir(exist_ok=True)
    for path in sorted((root / "tests").iterdir()):  # shared test setup (conftest.py) and each module's suite
        if path.is_file() and not STUDENT_IGNORE(str(path.parent), [path.name]):
            shutil.copy2(path, tests / path.name)
    for module in modules:
        if module.tests_path.is_dir():
            shutil.copytree(module.tests_path, tests / module.slug, ignore=STUDENT_IGNORE, dirs_exist_ok=True)
    for folder in ("book", "milestones"):
        if (root / folder).is_dir():
            shutil.copytree(root / folder, dest / folder, ignore=STUDENT_IGNORE, dirs_exist_ok=True)
    for name in STUDENT_FILES:
        if (root / name).is_file():
            shutil.copy2(root / name, dest / name)
    for path, text in outputs.items():  # released notebooks and stubs over whatever was copied
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    print(f"tito release: wrote a student copy of the course to {dest}")
    print(f"  {len(modules)} module(s): " + ", ".join(m.slug for m in modules))
    print("  modules/ (released notebooks), tinytorch/ (stubs), tests/ (each module's suite), tito/, "
          + ", ".join(n for n in ["book/", "milestones/", *STUDENT_FILES] if (root / n.rstrip("/")).exists()))
    print("  left out: solutions/ (with hidden tests and mutants), tito's own tests, .ci/, build output")
    print(f"Next: commit it to the students' repository, e.g. `cd {dest} && git init && git add -A && "
          f"git commit -m 'Student release'`.")
    return 0

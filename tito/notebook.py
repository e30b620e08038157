"""Reading notebooks and turning their `#| export` cells into package files.

Directives (nbdev style) are comment lines at the top of a code cell:
  `#| default_exp nn.functional`  package file for the following exported cells
  `#| export`                     this cell goes to the default package file
  `#| export nn.init`             this cell goes to tinytorch/nn/init.py
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from tito.errors import TitoError

DIRECTIVE = re.compile(r"^#\|\s*([A-Za-z_]+)\s*(.*?)\s*$")
TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
KNOWN_DIRECTIVES = {"default_exp", "export"}


@dataclass(frozen=True)
class ExportChunk:
    target: str  # dotted path inside tinytorch, e.g. "_tensor" or "nn.functional"
    code: str
    cell: int  # 1-based position in the notebook
    grade_id: str | None
    directive: str = ""  # where the target was named, e.g. "cell 3 ('#| default_exp nn.functional')"

    @property
    def label(self) -> str:
        return f"cell {self.cell}" + (f" ({self.grade_id})" if self.grade_id else "")


def read_solution(path: Path):
    """A solution notebook (jupytext percent .py) as an nbformat notebook."""
    import jupytext

    try:
        return jupytext.read(path, fmt="py:percent")
    except Exception as exc:  # jupytext raises many kinds; all mean "fix the file"
        raise TitoError(f"cannot read solution notebook {path}: {exc}") from None


@functools.lru_cache(maxsize=8)
def reads_percent(text: str):
    """jupytext's reading of percent-format `text`, remembered for the last few texts: one
    notebook object shared by every caller, so none may change it."""
    import jupytext

    return jupytext.reads(text, fmt="py:percent")


def reads_edited(text: str, edited: str):
    """jupytext's reading of `edited` (percent format), a copy of the solution `text` changed
    inside one cell, as a notebook of its own. Why: `tito verify` reads hundreds of such
    copies (its mutants), and jupytext takes seconds over a whole solution; `text` is read
    once and only the changed cell again. The shortcut is checked each time (the old cell,
    read alone, must equal the whole reading's); where it is not sure, the whole of `edited`
    is read."""
    import nbformat

    nb = reads_percent(text)
    old, new = text.splitlines(keepends=True), edited.splitlines(keepends=True)
    same = min(len(old), len(new))
    head = next((i for i in range(same) if old[i] != new[i]), same)
    tail = next((i for i in range(same - head) if old[-1 - i] != new[-1 - i]), same - head)
    starts = [i for i, line in enumerate(old) if line.startswith("# %%")]
    first_cell = len(nb.cells) - len(starts)  # 1: jupytext made a cell of the lines before the first marker
    k = max((n for n, start in enumerate(starts) if start < head), default=None)
    if k is not None and first_cell in (0, 1):
        end = starts[k + 1] if k + 1 < len(starts) else len(old)
        new_end = end + len(new) - len(old)
        if len(old) - tail <= end and not any(line.startswith("# %%") for line in new[starts[k] + 1:new_end]):
            was = jupytext_cells("".join(old[starts[k]:end]))
            now = jupytext_cells("".join(new[starts[k]:new_end]))
            kept = nb.cells[first_cell + k]
            if len(was) == len(now) == 1 and cell_key(was[0]) == cell_key(kept):
                cell = now[0]
                if cell.metadata.get(_SPACING) == was[0].metadata.get(_SPACING):  # read alone, the last cell of
                    cell.metadata.pop(_SPACING, None)                           # a file ends differently
                    if _SPACING in kept.metadata:
                        cell.metadata[_SPACING] = kept.metadata[_SPACING]
                cells = list(nb.cells)
                cells[first_cell + k] = cell
                return nbformat.from_dict(dict(nb, cells=cells))
    return jupytext_cells(edited, whole=True)


_SPACING = "lines_to_next_cell"  # jupytext's note of the blank lines after a cell


def cell_key(cell) -> tuple:
    """What a cell holds, for comparing two readings: its type, source and metadata (not
    jupytext's random id, nor its note of the blank lines that follow it)."""
    return cell.cell_type, cell.source, {k: v for k, v in cell.metadata.items() if k != _SPACING}


def jupytext_cells(text: str, whole: bool = False):
    """jupytext's reading of percent-format `text`: its cells, or (`whole`) the notebook."""
    import jupytext

    nb = jupytext.reads(text, fmt="py:percent")
    return nb if whole else nb.cells


def _read_text(path: Path, rel: str, number: int) -> str:
    """The notebook's text, or one line saying why it cannot be read (bytes that are not
    UTF-8, a folder in its place, no permission): never a traceback, never a change to it."""
    if path.is_dir():
        raise TitoError(f"{rel} is a folder, not a notebook. Move it aside, then run "
                        f"`tito module reset {number:02d}` to get a fresh copy.", exit_code=1)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TitoError(
            f"{rel} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}), so it is "
            f"not a notebook Jupyter wrote. Nothing was exported and the file was left as it is. Restore a "
            f"backup with `tito module restore {number:02d}` (it lists them), or start over with "
            f"`tito module reset {number:02d}` (which backs it up first).", exit_code=1) from None
    except OSError as exc:
        raise TitoError(f"cannot read {rel}: {exc.strerror or exc}. Nothing was exported.", exit_code=1) from None


def read_student(path: Path, rel: str, number: int):
    """A student's .ipynb, with a clear message (and no data lost) when it is broken."""
    import nbformat

    if not path.exists():
        raise TitoError(
            f"{rel} does not exist. Run `tito module reset {number:02d}` to get a fresh copy."
        )
    text = _read_text(path, rel, number)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TitoError(
            f"{rel} is not a valid notebook: its JSON is broken at line {exc.lineno}, "
            f"column {exc.colno} ({exc.msg}). Nothing was exported and the file was left as it is. "
            f"Open it in a text editor to repair it, or start over with `tito module reset "
            f"{number:02d}` (which backs it up first)."
        ) from None
    try:
        nb = nbformat.reads(json.dumps(raw), as_version=4)
        nbformat.validate(nb)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TitoError(
            f"{rel} is valid JSON but not a valid notebook ({first}). Nothing was exported. "
            f"Start over with `tito module reset {number:02d}` (which backs it up first)."
        ) from None
    return nb


def _directives(source: str) -> list[tuple[str, str]]:
    found = []
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        match = DIRECTIVE.match(stripped)
        if not match:
            break
        found.append((match.group(1), match.group(2)))
    return found


def export_chunks(nb, where: str) -> list[ExportChunk]:
    """The exported cells of a notebook, checked: directives resolve and code compiles."""
    default = None
    default_from = ""
    chunks = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        label = f"{where}, cell {number}" + (f" ({grade_id})" if grade_id else "")
        target = None
        for name, arg in _directives(cell.source):
            if name not in KNOWN_DIRECTIVES:
                raise TitoError(
                    f"{label}: unknown directive '#| {name}'. Known: "
                    + ", ".join(f"'#| {d}'" for d in sorted(KNOWN_DIRECTIVES))
                    + "."
                )
            if arg and not TARGET.match(arg):
                raise TitoError(
                    f"{label}: '#| {name} {arg}' does not name a package file; "
                    f"write a dotted path inside tinytorch such as 'nn.functional'."
                )
            if name == "default_exp":
                if not arg:
                    raise TitoError(f"{label}: '#| default_exp' needs a package file, e.g. '#| default_exp nn.functional'.")
                default = arg
                default_from = f"cell {number}" + (f" ({grade_id})" if grade_id else "") + \
                    f" ('#| default_exp {arg}')"
            else:
                target = arg or default
                directive = (f"cell {number}" + (f" ({grade_id})" if grade_id else "") + f" ('#| export {arg}')"
                             if arg else default_from)
                if target is None:
                    raise TitoError(
                        f"{label}: '#| export' points nowhere: no '#| default_exp' above it says "
                        f"which package file the cell belongs to (or write '#| export name')."
                    )
        if target is None:
            continue
        code = "\n".join(
            line for line in cell.source.splitlines() if not DIRECTIVE.match(line.strip())
        ).strip("\n")
        try:
            # Compile the cell as the student sees it, so line numbers match the notebook.
            compile(cell.source, label, "exec")
        except SyntaxError as exc:
            text = (exc.text or "").rstrip()
            raise TitoError(
                f"{label}: syntax error on line {exc.lineno} of the cell: {exc.msg}"
                + (f"\n    {text}" if text else "")
                + "\nFix the cell in the notebook, then export again. Nothing was exported."
            ) from None
        chunks.append(ExportChunk(target, code, number, grade_id, directive))
    return chunks


def top_level_names(code: str) -> set[str]:
    """The functions, classes and variables a cell defines at its top level."""
    import ast

    from tito.pyparse import parse

    try:
        tree = parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def _holds_only_none(value) -> bool:
    import ast

    if isinstance(value, ast.Constant):
        return value.value is None
    if isinstance(value, (ast.Dict, ast.List, ast.Tuple)):
        items = value.values if isinstance(value, ast.Dict) else value.elts
        return all(_holds_only_none(item) for item in items)
    return False


def predictions(nb) -> tuple[int, int]:
    """(written, asked): the notebook's prediction variables, each a top-level
    `predicted_... = None` in a code cell that the student replaces with a guess before the
    cell that measures it, and how many of them hold something other than None. Not graded;
    `tito test` only reminds. Cells that do not parse are skipped."""
    import ast

    from tito.pyparse import parse

    written = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.startswith("predicted_"):
                        written[target.id] = written.get(target.id, False) or not _holds_only_none(node.value)
    return sum(written.values()), len(written)


def target_path(package_root: Path, target: str) -> Path:
    return package_root.joinpath(*target.split(".")).with_suffix(".py")


def render(chunks: list[ExportChunk], source: str) -> str:
    """One package file's text from its chunks, each tagged with the cell it came from."""
    parts = [
        f"# Generated by tito from {source}. Edit the notebook, not this file.\n"
        f"# Each block names the notebook cell it came from.\n"
    ]
    for chunk in chunks:
        parts.append(f"\n\n# -- {chunk.label} --\n{chunk.code}\n")
    return "".join(parts)


def group_by_target(chunks: list[ExportChunk]) -> dict[str, list[ExportChunk]]:
    grouped: dict[str, list[ExportChunk]] = {}
    for chunk in chunks:
        grouped.setdefault(chunk.target, []).append(chunk)
    return grouped

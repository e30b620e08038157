"""Mutants: typical student mistakes, put into a solution one at a time, must be caught.

Each module lists them in `solutions/NN_name/mutants.toml`:

    [[mutant]]
    name = "strides-as-list"                  # short, unique in the module
    says = "strides returned as a list"        # the mistake, in one line
    cell = "contiguous-strides"                # optional: the grade_id of the cell to edit
    function = "_contiguous_strides"           # optional: the student's function it breaks,
                                               # when its edit is not inside that function
    find = "return tuple(sizes)"               # text inside one solution region ...
    replace = "return list(sizes)"             # ... and what the mistake makes of it

`find` must occur exactly once (in the named cell, or in the whole file) and lie inside a
`### BEGIN SOLUTION` / `### END SOLUTION` region: a mutant is a mistake in the student's
code, never in the plumbing. A mutant is *caught* when at least one of the module's tests
fails against a package built from the mutated solution, and, separately, when at least
one graded check cell of the mutated notebook fails (nbgrader grades those cells).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tito import build, notebook
from tito.course import Module
from tito.errors import TitoError

MINIMUM = 8
CHECKS_TIMEOUT_S = 10 * 60


@dataclass(frozen=True)
class Mutant:
    name: str
    says: str
    find: str
    replace: str
    cell: str | None = None
    function: str | None = None


def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib


def mutants_path(module: Module) -> Path:
    return module.solution_path.parent / "mutants.toml"


def load(module: Module) -> list[Mutant]:
    path = mutants_path(module)
    if not path.is_file():
        return []
    rel = path.relative_to(module.root).as_posix()
    try:
        data = _toml().loads(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise TitoError(f"{rel} is not valid TOML: {exc}") from None
    mutants, seen = [], set()
    for i, entry in enumerate(data.get("mutant", []), 1):
        missing = [k for k in ("name", "says", "find", "replace") if not isinstance(entry.get(k), str)]
        if missing:
            raise TitoError(f"{rel}, mutant {i}: needs the text field(s) {', '.join(missing)}.")
        unknown = set(entry) - {"name", "says", "find", "replace", "cell", "function"}
        if unknown:
            raise TitoError(f"{rel}, mutant {entry['name']!r}: unknown field(s) {', '.join(sorted(unknown))}.")
        if entry["name"] in seen:
            raise TitoError(f"{rel}: two mutants are named {entry['name']!r}.")
        seen.add(entry["name"])
        mutants.append(Mutant(entry["name"], entry["says"], entry["find"], entry["replace"], entry.get("cell"),
                              entry.get("function")))
    return mutants


def _solution_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of every solution region's body."""
    spans, start, pos = [], None, 0
    for line in text.splitlines(keepends=True):
        if "### BEGIN SOLUTION" in line:
            start = pos + len(line)
        elif "### END SOLUTION" in line and start is not None:
            spans.append((start, pos))
            start = None
        pos += len(line)
    return spans


def _cell_span(text: str, grade_id: str) -> tuple[int, int] | None:
    marker = f'"grade_id": "{grade_id}"'
    pos = 0
    cells = []
    for line in text.splitlines(keepends=True):
        if line.startswith("# %%"):
            cells.append(pos)
        pos += len(line)
    cells.append(len(text))
    for a, b in zip(cells, cells[1:]):
        head = text[a:text.find("\n", a)]
        if marker in head:
            return a, b
    return None


def apply(module: Module, mutant: Mutant, text: str | None = None) -> str:
    """The solution's text with this one mistake put in; raises when the mutant is malformed."""
    text = module.solution_path.read_text(encoding="utf-8") if text is None else text
    where = f"{mutants_path(module).relative_to(module.root).as_posix()}, mutant {mutant.name!r}"
    lo, hi = 0, len(text)
    if mutant.cell:
        span = _cell_span(text, mutant.cell)
        if span is None:
            raise TitoError(f"{where}: no cell has grade_id {mutant.cell!r}.")
        lo, hi = span
    if mutant.find == mutant.replace:
        raise TitoError(f"{where}: `replace` equals `find`, so nothing would change.")
    hits, at = [], text.find(mutant.find, lo)
    while at != -1 and at + len(mutant.find) <= hi:
        hits.append(at)
        at = text.find(mutant.find, at + 1)
    if len(hits) != 1:
        scope = f"cell {mutant.cell!r}" if mutant.cell else "the solution"
        raise TitoError(f"{where}: `find` occurs {len(hits)} times in {scope}; it must occur exactly once "
                        f"(make it longer, or name the cell).")
    start, end = hits[0], hits[0] + len(mutant.find)
    if not any(a <= start and end <= b for a, b in _solution_spans(text)):
        raise TitoError(f"{where}: `find` is not inside a solution region: a mutant is a mistake in "
                        f"the student's code.")
    return text[:start] + mutant.replace + text[end:]


SLOTS = 8  # folders a mutant's package is built in, one per concurrent run (tito verify runs 2 to 4)


@contextlib.contextmanager
def variant(root: Path, package: Path, module: Module, text: str):
    """The build in `package` with `module`'s package files exported from `text`, in a slot
    folder held for the block. A slot is kept between mutants and only the files that
    differ from `package` are rewritten, so that the bytecode and numba's
    compiled kernels cached for the other files stay valid (a fresh copy per mutant
    recompiled module 17's kernels in every run: 10 to 30 s each)."""
    from tito.locks import locked

    slots = build.build_root(root) / "mutants"
    for number in itertools.cycle(range(SLOTS)):
        with locked(slots / f"slot-{number}.lock", wait=False) as held:
            if not held:
                if number == SLOTS - 1:
                    time.sleep(0.2)  # every slot busy: another tito command's runs
                continue
            dest = slots / f"slot-{number}"
            _sync(package / "tinytorch", dest / "tinytorch")
            nb = notebook.reads_edited(module.solution_path.read_text(encoding="utf-8"), text)
            source = module.solution_path.relative_to(root).as_posix()
            for target, group in notebook.group_by_target(notebook.export_chunks(nb, source)).items():
                path = notebook.target_path(dest / "tinytorch", target)
                rendered = notebook.render(group, source)
                if not path.is_file() or path.read_text(encoding="utf-8") != rendered:
                    _write_fresh(path, rendered, dest / ".mtime")
            yield dest
            return


def _sync(source: Path, dest: Path) -> None:
    """Make `dest` hold `source`'s files, each with its modification time (caches keyed by
    it stay valid); caches in `dest` (__pycache__) are kept."""
    wanted = set()
    for path in source.rglob("*"):
        if "__pycache__" in path.parts or path.suffix == ".pyc" or not path.is_file():
            continue
        rel = path.relative_to(source)
        wanted.add(rel)
        copy, have = dest / rel, path.stat()
        if not copy.is_file() or copy.stat().st_mtime_ns != have.st_mtime_ns or copy.stat().st_size != have.st_size:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
    for path in list(dest.rglob("*")) if dest.is_dir() else []:
        if path.is_file() and "__pycache__" not in path.parts and path.relative_to(dest) not in wanted:
            path.unlink()


def _write_fresh(path: Path, text: str, counter: Path) -> None:
    """Write a mutant's file with a modification time no earlier version of it had: Python's
    bytecode and numba's cache tell a source changed by its time (whole seconds) and size,
    and two mutants of one file can have the same size."""
    last = int(counter.read_text()) if counter.is_file() else 0
    stamp = max(last + 1, int(time.time()) + 1, int(path.stat().st_mtime) + 1 if path.exists() else 0)
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stamp * 10**9, stamp * 10**9))
    counter.write_text(str(stamp))


def _changed_cell(original, mutated) -> tuple[int, str]:
    """(index, new source) of the one cell a mutant changes."""
    changed = [i for i, (a, b) in enumerate(zip(original.cells, mutated.cells)) if a.source != b.source]
    if len(original.cells) != len(mutated.cells) or len(changed) != 1:
        raise TitoError("a mutant must change exactly one cell (does `find` span a cell boundary?)")
    return changed[0], mutated.cells[changed[0]].source


def graded_checks(module: Module, package_parent: Path, found: list[Mutant]) -> tuple[str | None, dict]:
    """Run the solution notebook once as nbgrader would (tito.run_mutant_checks), forking at
    each mutant's cell. Returns (problem with the unchanged notebook or None,
    {mutant name: (caught, how)})."""
    import json

    text = module.solution_path.read_text(encoding="utf-8")
    original = notebook.reads_percent(text)
    specs, results = [], {}
    for mutant in found:
        try:
            index, source = _changed_cell(original, notebook.reads_edited(text, apply(module, mutant, text)))
        except TitoError as exc:
            results[mutant.name] = (False, exc.message)
            continue
        specs.append({"name": mutant.name, "cell": index, "source": source})
    env = dict(os.environ, PYTHONPATH=str(package_parent), PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg")
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "mutants.json"
        spec_file.write_text(json.dumps(specs), encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "tito.run_mutant_checks", str(module.solution_path), str(spec_file),
                 str(module.solution_path.parent)],
                env=env, cwd=module.solution_path.parent, capture_output=True, text=True,
                timeout=CHECKS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"the notebook's checks did not finish in {CHECKS_TIMEOUT_S // 60} minutes", results
    baseline = None
    for line in proc.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("baseline"):
            baseline = record
        elif "name" in record:
            results[record["name"]] = (bool(record["caught"]), record["how"])
    if baseline is None:
        return "the check run broke: " + (proc.stderr.strip() or proc.stdout.strip())[-1500:], results
    if baseline["failures"]:
        return ("graded check cells fail on the unchanged solution (with the module's package files as "
                "stubs, as in nbgrader's kernel): " + "; ".join(baseline["failures"])), results
    for spec in specs:
        results.setdefault(spec["name"], (False, "the mutant's run gave no result"))
    return None, results

"""Writing package files: the student's export, the solutions build, stub variants.

The student's package is `tinytorch/` in the checkout. `--solutions` builds a complete
package from solutions/ under build/solutions/ instead, so the student's files are never
touched; CI also builds variants in which one module is swapped back to its stubs.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from tito import notebook, release
from tito.course import Module, available_modules
from tito.errors import TitoError, os_error_message
from tito.locks import write_atomic

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def build_root(root: Path) -> Path:
    """Where builds go: build/ in the checkout, or $TITO_BUILD_DIR (parallel runs use their own)."""
    return Path(os.environ.get("TITO_BUILD_DIR") or root / "build")


def _check_targets(module: Module, chunks: list[notebook.ExportChunk], package: Path) -> dict:
    owned = release.package_targets(module)
    grouped = notebook.group_by_target(chunks)
    for target, group in grouped.items():
        path = notebook.target_path(package, target)
        if target not in owned:
            where = group[0].directive or group[0].label
            raise TitoError(
                f"{module.notebook_rel}, {where}: this points the cells below it to "
                f"tinytorch/{path.relative_to(package).as_posix()}, which {module.label} does not own "
                f"(it exports to: {', '.join(owned)}). Restore that line from the "
                f"released notebook. Nothing was exported."
            )
        if not (path.parent / "__init__.py").is_file():
            raise TitoError(
                f"{module.notebook_rel}, {group[0].label}: '#| export {target}' points nowhere: "
                f"{path.parent.relative_to(package.parent).as_posix()}/ is not a package. Nothing was exported."
            )
    missing = [t for t in owned if t not in grouped]
    if missing:
        raise TitoError(
            f"{module.notebook_rel} has no '#| export' cells for "
            + ", ".join(f"tinytorch/{t.replace('.', '/')}.py" for t in missing)
            + ": was a cell deleted, or its '#| export' line removed? Nothing was exported."
        )
    return grouped


def _write(package: Path, grouped: dict, source: str) -> list[Path]:
    written = []
    for target, group in grouped.items():
        path = notebook.target_path(package, target)
        text = notebook.render(group, source)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            try:
                write_atomic(path, text)  # a full disk leaves the old file whole, not half of the new
            except OSError as exc:
                raise TitoError(os_error_message(exc), exit_code=1) from None
        written.append(path)
    return written


def _check_lost_exports(module: Module, nb, grouped: dict) -> None:
    """A cell that lost its `#| export` line: say which, instead of an AttributeError later."""
    import json

    try:
        manifest = json.loads(release.manifest_path(module).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for target, expected in manifest.get("exports", {}).items():
        have = {n for chunk in grouped.get(target, []) for n in notebook.top_level_names(chunk.code)}
        for name in expected:
            if name in have:
                continue
            file = f"tinytorch/{target.replace('.', '/')}.py"
            for number, cell in enumerate(nb.cells, 1):
                if cell.cell_type == "code" and name in notebook.top_level_names(cell.source):
                    grade = cell.metadata.get("nbgrader", {}).get("grade_id")
                    label = f"cell {number}" + (f" ({grade})" if grade else "")
                    raise TitoError(
                        f"{module.notebook_rel}, {label}: this cell defines `{name}` but has lost its "
                        f"'#| export' line, so {file} would not have it. Put '#| export' back as the "
                        f"cell's first line. Nothing was exported.")
            raise TitoError(
                f"{module.notebook_rel}: no cell defines `{name}` any more, but {file} needs it (later "
                f"modules and the tests use it). Was it renamed or its cell deleted? The released "
                f"notebook has it; nothing was exported.")


def _known_texts(module: Module) -> set[str]:
    """Digests of every text tito itself put in this module's package files: the released
    stubs (from the manifest) and each export since (from .tito/state.json)."""
    import json

    from tito import testing

    known = set()
    try:
        known |= set(json.loads(release.manifest_path(module).read_text(encoding="utf-8")).get("released", {}).values())
    except (OSError, ValueError):
        pass
    known |= set(testing.load_state(module.root).get(module.slug, {}).get("written", {}).values())
    return known


def guard_package_files(module: Module, paths: list[Path]) -> list[tuple[Path, Path]]:
    """Before tito replaces package files: back up any that someone edited by hand (their
    text is not one tito wrote), and check that each can be written. Returns (file, backup)."""
    import time

    known, saved = _known_texts(module), []
    for path in paths:
        if path.exists() and not os.access(path, os.W_OK):
            raise TitoError(f"cannot write {path.relative_to(module.root)}: permission denied. Make it "
                            f"writable (chmod u+w) and run the command again; nothing was changed.")
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if release.text_digest(text) in known:
            continue
        folder = module.root / ".tito" / "backups" / "package"
        folder.mkdir(parents=True, exist_ok=True)
        stem = path.relative_to(module.root / "tinytorch").with_suffix("").as_posix().replace("/", ".")
        backup = folder / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.py"
        shutil.copy2(path, backup)
        saved.append((path, backup))
    return saved


def unbound_name_warnings(module: Module, nb, grouped: dict) -> list[str]:
    """One warning per name a package file reads but does not bind (tito/names.py), with the
    line that would bind it when a cell of the notebook has one."""
    from tito import names

    lines = []
    for target, group in grouped.items():
        rel = f"tinytorch/{target.replace('.', '/')}.py"
        for name, where in names.undefined_names(notebook.render(group, module.notebook_rel), rel).items():
            fix = names.binding_in_notebook(nb, name, target)
            lines.append(
                f"tito: {rel} reads `{name}` (in {where}), which nothing in that file defines or imports, "
                f"so the package will raise NameError. " +
                (f"The notebook has it from another cell, which is why its check cells pass. Add `{fix}` to "
                 f"an export cell of {rel}." if fix else
                 "No cell of the notebook defines it either: is it misspelt, or still to be written?"))
    return lines


def export_student(module: Module) -> list[Path]:
    """The student's notebook -> tinytorch/ (the package they test and use). A package
    file edited by hand is backed up first (the notebook is the source; say so)."""
    from tito import testing

    nb = notebook.read_student(module.notebook_path, module.notebook_rel, module.number)
    chunks = notebook.export_chunks(nb, module.notebook_rel)
    package = module.root / "tinytorch"
    grouped = _check_targets(module, chunks, package)
    _check_lost_exports(module, nb, grouped)
    testing.remember(module)  # .tito/ must take the record before tinytorch/ changes (full disk, unwritable)
    paths = [notebook.target_path(package, t) for t in grouped]
    for path, backup in guard_package_files(module, paths):
        print(f"tito: {path.relative_to(module.root)} was edited by hand; tito writes it from "
              f"{module.notebook_rel}, so your edits were saved to {backup.relative_to(module.root)} first "
              f"(put them into the notebook to keep them).", flush=True)
    written = _write(package, grouped, module.notebook_rel)
    for line in unbound_name_warnings(module, nb, grouped):
        print(line, flush=True)
    testing.remember(module, written={p.relative_to(module.root).as_posix():
                                      release.text_digest(p.read_text(encoding="utf-8")) for p in written})
    return written


def _fingerprint(root: Path) -> str:
    """A digest of everything a solutions build is made from."""
    import hashlib

    digest = hashlib.sha256()
    files = sorted(p for p in (root / "tinytorch").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files += [m.solution_path for m in available_modules(root)]
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build_solutions(root: Path) -> Path:
    """build/solutions/tinytorch: the hand-written package files plus every available
    module exported from its solution notebook. Returns the folder to put on sys.path.

    Safe to run twice at once (a lock; the second finds the build current and reuses it)."""
    from tito.locks import locked

    dest = build_root(root) / "solutions"
    with locked(build_root(root) / "solutions.lock"):
        stamp = dest / ".fingerprint"
        fingerprint = _fingerprint(root)
        if (dest / "tinytorch").is_dir() and stamp.is_file() and stamp.read_text() == fingerprint:
            return dest
        if (dest / "tinytorch").exists():
            shutil.rmtree(dest / "tinytorch")
        shutil.copytree(root / "tinytorch", dest / "tinytorch", ignore=IGNORE)
        package = dest / "tinytorch"
        for module in available_modules(root):
            nb = notebook.read_solution(module.solution_path)
            source = module.solution_path.relative_to(root).as_posix()
            chunks = notebook.export_chunks(nb, source)
            _write(package, notebook.group_by_target(chunks), source)
        stamp.write_text(fingerprint)
    return dest


def build_stub_variant(root: Path, solutions: Path, module: Module) -> Path:
    """A copy of the solutions build with `module` alone back in its released (stub) state."""
    dest = build_root(root) / f"stub-{module.slug}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(solutions / "tinytorch", dest / "tinytorch", ignore=IGNORE)
    for path, text in release.release_outputs(module).items():
        if path.suffix == ".py" and (root / "tinytorch") in path.parents:
            (dest / path.relative_to(root)).write_text(text, encoding="utf-8")
    return dest


def build_prefix(root: Path, through: int, *, drop_caches: bool = False) -> Path:
    """build/prefix-NN/tinytorch: modules 1..`through` exported from their solutions, every
    later module as its released stubs: exactly what a student who finished module NN has.
    A build whose files differ from the digests recorded when it was made is made again;
    `drop_caches` also removes its bytecode caches (which the record does not cover).

    Why: grading module k runs against build_prefix(k - 1), so the kernel never sees the
    reference of the module being graded or of any later one; `tito verify` runs each
    module's tests against build_prefix(k), so no module may lean on a later one. Safe to
    run twice at once (a lock; a current build is reused)."""
    import hashlib

    from tito.locks import locked

    dest = build_root(root) / f"prefix-{through:02d}"
    modules = [m for m in available_modules(root) if m.number <= through]
    with locked(build_root(root) / f"prefix-{through:02d}.lock"):
        digest = hashlib.sha256()
        files = sorted(p for p in (root / "tinytorch").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in files + [m.solution_path for m in modules]:
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
        stamp = dest / ".fingerprint"
        # The record of what the build holds lives beside it, never inside: sandboxes see the build.
        record = dest.with_name(f"prefix-{through:02d}.files.json")
        if (dest / "tinytorch").is_dir() and stamp.is_file() and stamp.read_text() == digest.hexdigest() \
                and record.is_file() and record.read_text() == _file_digests(dest / "tinytorch"):
            for cache in list((dest / "tinytorch").rglob("__pycache__")) if drop_caches else ():
                shutil.rmtree(cache, ignore_errors=True)
            return dest
        if (dest / "tinytorch").exists():
            shutil.rmtree(dest / "tinytorch")
        shutil.copytree(root / "tinytorch", dest / "tinytorch", ignore=IGNORE)
        for module in modules:
            nb = notebook.read_solution(module.solution_path)
            source = module.solution_path.relative_to(root).as_posix()
            _write(dest / "tinytorch", notebook.group_by_target(notebook.export_chunks(nb, source)), source)
        stamp.write_text(digest.hexdigest())
        record.write_text(_file_digests(dest / "tinytorch"))
    return dest


def _file_digests(folder: Path) -> str:
    """{path: sha256} of every file under `folder`, as JSON: a build changed since it was
    recorded (by anyone) is rebuilt, not reused."""
    import hashlib
    import json

    files = sorted(p for p in folder.rglob("*") if (p.is_file() or p.is_symlink()) and "__pycache__" not in p.parts)
    return json.dumps({p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                       if p.is_file() and not p.is_symlink() else "link" for p in files}, indent=0)

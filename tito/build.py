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
from tito.errors import TitoError

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
            raise TitoError(
                f"{module.notebook_rel}, {group[0].label}: '#| export' points to "
                f"tinytorch/{path.relative_to(package).as_posix()}, which {module.label} does not own "
                f"(it exports to: {', '.join(owned)}). Restore the cell's first line from the "
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
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def export_student(module: Module) -> list[Path]:
    """The student's notebook -> tinytorch/ (the package they test and use)."""
    nb = notebook.read_student(module.notebook_path, module.notebook_rel, module.number)
    chunks = notebook.export_chunks(nb, module.notebook_rel)
    package = module.root / "tinytorch"
    return _write(package, _check_targets(module, chunks, package), module.notebook_rel)


def build_solutions(root: Path) -> Path:
    """build/solutions/tinytorch: the hand-written package files plus every available
    module exported from its solution notebook. Returns the folder to put on sys.path."""
    dest = build_root(root) / "solutions"
    if (dest / "tinytorch").exists():
        shutil.rmtree(dest / "tinytorch")
    shutil.copytree(root / "tinytorch", dest / "tinytorch", ignore=IGNORE)
    package = dest / "tinytorch"
    for module in available_modules(root):
        nb = notebook.read_solution(module.solution_path)
        source = module.solution_path.relative_to(root).as_posix()
        chunks = notebook.export_chunks(nb, source)
        _write(package, notebook.group_by_target(chunks), source)
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

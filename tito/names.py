"""Names that an exported package file reads but neither defines nor imports.

Why: a notebook runs all its cells in one namespace, so a cell exported to
tinytorch/nn/layers.py can use a name that another cell imported (`np`) or exported to
another file (`calculate_gain`, in nn/init.py). Every check cell passes; the package file
raises NameError in dozens of tests, each filed under whichever function ran first. Said at
export instead, it points at the line to add.
"""
from __future__ import annotations

import ast
import builtins

from tito.pyparse import parse, symbol_table

_MODULE_NAMES = {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
                 "__path__", "__annotations__", "__dict__"}


def undefined_names(source: str, filename: str = "<export>") -> dict[str, str]:
    """{name: where it is first read ("Linear.reset_parameters", or "module level")} for
    each global name that `source` reads and that neither it nor Python's builtins bind.
    Empty for code that does not compile or that star-imports (its names are unknowable)."""
    try:
        top = symbol_table(source, filename)
        tree = parse(source, filename)
    except SyntaxError:
        return {}
    if any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) for node in ast.walk(tree)):
        return {}
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    tables, reads = [(top, "")], {}
    while tables:
        table, path = tables.pop(0)
        for sym in table.get_symbols():
            name = sym.get_name()
            if sym.is_declared_global() and sym.is_assigned():
                bound.add(name)
            if sym.is_referenced() and sym.is_global():
                reads.setdefault(name, path or "module level")
        for child in table.get_children():
            inner = child.get_name()
            tables.append((child, inner if not path else f"{path}.{inner}"))
    known = bound | set(dir(builtins)) | _MODULE_NAMES
    return {name: where for name, where in reads.items() if name not in known}


def binding_in_notebook(nb, name: str, own_target: str) -> str | None:
    """The line that would bind `name` in a package file exported to `own_target`, found in
    the notebook: an import some cell makes (`import numpy as np`), or `from tinytorch.X
    import name` when a cell exported to file X defines it. None when no cell binds it."""
    from tito import notebook

    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not notebook.DIRECTIVE.match(line.strip()))
        try:
            tree = parse(code)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if (alias.asname or alias.name.split(".")[0]) == name:
                        one = type(node)(names=[alias], **({"module": node.module, "level": node.level}
                                                            if isinstance(node, ast.ImportFrom) else {}))
                        return ast.unparse(one)
    for target, chunks in notebook.group_by_target(notebook.export_chunks(nb, "notebook")).items():
        if target != own_target and any(name in notebook.top_level_names(c.code) for c in chunks):
            return f"from tinytorch.{target} import {name}"
    return None


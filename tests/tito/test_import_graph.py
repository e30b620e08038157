"""The package has no import cycles: no chain of module-level imports between tinytorch's
files leads back to where it started (imports inside functions, made when called, are not
part of the graph). A cycle makes the import order matter and a half-initialised module
visible; the course promises a package whose files each stand on the ones before them."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tinytorch"


def _modules(package: Path) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(name: str, path: Path, node, modules) -> set[str]:
    """The package's modules that one import statement of module `name` loads."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[:len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
    loaded = set()
    for target in targets:
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in modules and target != name:
            loaded.add(target)
    return loaded


def _cycles(package: Path) -> tuple[int, list[list[str]]]:
    """(number of modules, the import cycles found) of the package in folder `package`."""
    modules = _modules(package)
    graph = {name: set().union(*[_imported(name, path, node, modules) for node in ast.parse(path.read_text()).body
                                 if isinstance(node, (ast.Import, ast.ImportFrom))])
             for name, path in modules.items()}
    state, path, cycles = {}, [], []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for after in sorted(graph[name]):
            if state.get(after) == "open":
                cycles.append(path[path.index(after):] + [after])
            elif after not in state:
                visit(after)
        path.pop()
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return len(modules), cycles


def test_module_level_imports_form_no_cycle():
    count, cycles = _cycles(PACKAGE)
    assert count > 30, f"found only {count} modules under {PACKAGE}"
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_a_cycle_through_a_relative_import_and_a_package_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    import pkg.a  # inside a function: no edge\nfrom . import c\n")
    (package / "sub" / "c.py").write_text("from pkg import a\n")
    (package / "a.py").write_text("import pkg.sub.b\n")
    assert _cycles(package) == (5, [["pkg.a", "pkg.sub.b", "pkg.sub.c", "pkg.a"]])

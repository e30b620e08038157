"""What a submitted notebook's code reaches for that only code subverting the grading needs.

`tito grade` runs this over every code cell of a submission (kernel cells and `#| export`
cells alike) and flags what it finds, minus what the course's own notebook does: the
scan judges constructs, the differential keeps the reference's own uses legal. It looks
for the test machinery (pytest, numpy.testing, the test report), the interpreter's
internals (sys.modules, builtins, gc, frames, audit and trace hooks, ctypes), IPython's
input and AST transformers and events, and dynamic code (exec, eval, __import__, getattr
with a computed name). Names built from string pieces (`"ast_" + "transformers"`,
`"".join(...)`, f-strings of constants) are folded first, as far as an AST walk can see.

The walk is iterative and the parse is guarded: no notebook can crash the scan; a cell
too deeply nested to parse is itself a finding.
"""
from __future__ import annotations

import ast

from tito.pyparse import parse

# Modules whose import gives a notebook a handle on the grading machinery or the interpreter.
MODULES = {"builtins", "sys", "gc", "inspect", "ctypes", "atexit", "signal", "importlib", "pytest", "_pytest",
           "pluggy", "numpy.testing", "IPython", "ipykernel", "nbgrader", "nbclient", "jupyter_client",
           "traitlets", "faulthandler", "threading", "_thread", "multiprocessing", "subprocess", "socket", "code",
           "codeop", "types", "marshal", "dis", "sysconfig", "site", "runpy", "zipimport", "pkgutil", "unittest",
           "mock", "xml", "sqlite3", "tinytorch.testing", "hypothesis", "pdb", "bdb", "trace", "tracemalloc",
           "_tito_report", "_tito_remote"}
# Attributes that reach into the test machinery, the interpreter or IPython.
ATTRIBUTES = {
    # IPython's input, AST and exception machinery, and its events
    "input_transformers_cleanup", "input_transformers_post", "ast_transformers", "events", "run_cell",
    "showtraceback", "set_custom_exc", "register_magic_function", "ast_node_interactivity", "user_ns",
    # the interpreter
    "settrace", "setprofile", "monitoring", "addaudithook", "_getframe", "modules", "meta_path", "path_hooks",
    "__builtins__", "__globals__", "__code__", "__closure__", "__subclasses__", "__bases__", "__mro__",
    "__dict__", "__class__", "__func__", "__getattribute__", "f_back", "f_globals", "f_locals", "f_builtins",
    "f_code", "tb_frame", "tb_next", "gi_frame", "cr_frame", "ag_frame", "co_code", "excepthook",
    # the test machinery
    "testing", "raises", "approx", "from_call", "CallInfo", "TestReport", "runtest", "junitxml",
    "assert_allclose", "assert_array_equal", "assert_equal", "assert_close", "check", "register", "_exit",
    "get_ipython",
}
# Names that run code the scan cannot see, or hand out the interpreter.
NAMES = {"__import__", "exec", "eval", "compile", "globals", "breakpoint", "get_ipython", "__builtins__",
         "__loader__", "__spec__"}
_ATTRIBUTE_CALLS = {"getattr", "setattr", "delattr", "hasattr"}


def _constant_text(node: ast.AST) -> str | None:
    """The string an expression builds from constants (+, %, f-strings, str.join of
    constants), or None when it depends on something else. Iterative: no nesting can
    exhaust the stack."""
    done: dict[int, str | None] = {}
    stack = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        parts = []
        if isinstance(current, ast.Constant):
            done[id(current)] = current.value if isinstance(current.value, str) else None
            continue
        if isinstance(current, ast.BinOp) and isinstance(current.op, ast.Add):
            parts = [current.left, current.right]
        elif isinstance(current, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.FormattedValue) else v for v in current.values]
        elif (isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute)
              and current.func.attr == "join" and len(current.args) == 1
              and isinstance(current.args[0], (ast.List, ast.Tuple))):
            parts = [current.func.value, *current.args[0].elts]
        else:
            done[id(current)] = None
            continue
        if not expanded:
            stack.append((current, True))
            stack.extend((p, False) for p in parts)
            continue
        texts = [done.get(id(p)) for p in parts]
        if any(t is None for t in texts):
            done[id(current)] = None
        elif isinstance(current, ast.Call):
            done[id(current)] = texts[0].join(texts[1:])
        else:
            done[id(current)] = "".join(texts)
    return done.get(id(node))


def _module_findings(name: str) -> set[str]:
    found = set()
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        if ".".join(parts[:i]) in MODULES:
            found.add(f"imports {'.'.join(parts[:i])}")
    return found


def _dotted(node: ast.Attribute) -> str:
    """`sys.modules` for sys.modules, `.modules` when the object is not a plain name chain."""
    parts = [node.attr]
    current = node.value
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return ".".join([current.id, *reversed(parts)]) if isinstance(current, ast.Name) else "." + node.attr


def _node_findings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
        return {f"uses {_dotted(node)}"}
    if isinstance(node, ast.Name) and node.id in NAMES:
        return {f"uses {node.id}"}
    if isinstance(node, ast.Import):
        return set().union(*(_module_findings(a.name) for a in node.names))
    if isinstance(node, ast.ImportFrom):
        base = ("." * node.level) + (node.module or "")
        found = _module_findings(base)
        for alias in node.names:
            found |= _module_findings(f"{base}.{alias.name}" if base.strip(".") else alias.name)
        return found
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_CALLS:
        if len(node.args) >= 2:
            text = _constant_text(node.args[1])
            if text is None:
                return {f"{node.func.id} with a computed name"}
            if text in ATTRIBUTES or text in NAMES:
                return {f"uses .{text}"}
        return set()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and node.args:
        return {"uses vars() of an object"}
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
            and node.value.attr in {"modules", "__dict__"} and _constant_text(node.slice) is None:
        return {f"indexes .{node.value.attr} with a computed key"}
    if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call)):
        text = _constant_text(node)
        if text and (text in ATTRIBUTES - {"check", "register", "testing", "raises", "modules", "events"}
                     or text in NAMES or text in MODULES or text.split(".")[0] in MODULES - {"code", "types", "site"}):
            return {f"names {text!r}"}
    return set()


def _cell_code(source: str) -> str:
    """A cell's Python: IPython's magics and shell escapes are blanked (their lines are kept,
    so line numbers stay right)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def cell_findings(source: str) -> set[str]:
    """What one code cell reaches for (see the module docstring)."""
    try:
        tree = parse(_cell_code(source))
    except SyntaxError:
        return set()  # it cannot run in the kernel either, nor be exported
    except (RecursionError, MemoryError, ValueError):
        return {"a cell too deeply nested (or too strange) for Python to parse"}
    found = set()
    for node in ast.walk(tree):  # ast.walk is iterative
        found |= _node_findings(node)
    return found


def findings(nb) -> set[str]:
    """What every code cell of notebook `nb` reaches for."""
    found = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            found |= cell_findings(cell.source)
    return found


def tampering(nb, source_nb=None) -> list[str]:
    """What a submission's code reaches for that the course's own notebook (`source_nb`)
    does not: each is a reason to flag it for a person to read."""
    found = findings(nb)
    if source_nb is not None:
        found -= findings(source_nb)
    return sorted(found)

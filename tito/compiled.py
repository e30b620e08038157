"""Which of the student's functions numba compiles for the CPU.

Why: compiled code calls such a function without a Python frame, so neither a trace of the
tests nor a traceback can see it run; `tito test` and `tito verify` need the list to name it
anyway (release records it in each module's stub manifest)."""
from __future__ import annotations

import ast
import functools

from tito.pyparse import parse

COMPILERS = {"njit", "jit", "vectorize", "guvectorize", "stencil"}  # numba's decorators


@functools.lru_cache(maxsize=8)  # asked once per mutant of the same text (`tito verify`): remembered
def cpu_compiled(names: tuple[str, ...], text: str) -> frozenset[str]:
    """The functions of `names` that `text` defines under a numba CPU decorator (`cuda.jit`
    kernels excluded: numba's simulator runs them as Python, where a trace sees them)."""
    found = set()
    for node in ast.walk(parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            for decorator in node.decorator_list:
                call = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")
                on_gpu = isinstance(call, ast.Attribute) and getattr(call.value, "id", "") == "cuda"
                if name in COMPILERS and not on_gpu:
                    found.add(node.name)
    return frozenset(found)

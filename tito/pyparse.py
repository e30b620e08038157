"""`parse` and `symbol_table`: ast.parse and symtable.symtable, one call at a time in this process.

Why: CPython 3.11 counts ast.parse's nesting in one place per interpreter, so two threads
parsing at once (a garbage collection in one lets the other run) fail each other with
"SystemError: AST constructor recursion depth mismatch". tito parses from threads when it
grades and when `tito verify` runs mutants side by side.
"""
import ast
import symtable
import threading

_PARSING = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse(source, filename), never concurrently with another parse in this process."""
    with _PARSING:
        return ast.parse(source, filename=filename)


def symbol_table(source: str, filename: str = "<unknown>") -> symtable.SymbolTable:
    """symtable.symtable(source, filename, "exec") (it parses too), under the same lock."""
    with _PARSING:
        return symtable.symtable(source, filename, "exec")

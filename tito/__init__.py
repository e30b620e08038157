"""tito: the TinyTorch course tool."""
import sys

# nbformat validates notebooks with jsonschema, which at import builds lark parsers for the
# IRI formats of rfc3987-syntax when that is installed (jupyter-events' extras bring it):
# about a second of every tito command, for a format no notebook schema uses. Without the
# module, jsonschema skips that one format check.
sys.modules.setdefault("rfc3987_syntax", None)

"""Run one compatibility program with tinytorch imported as torch and print its losses as
JSON: `python tests/tito/compat/run.py NAME`, with the tinytorch to run first on the path."""
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tinytorch as torch  # noqa: E402

print(json.dumps(importlib.import_module(sys.argv[1]).main(torch)))

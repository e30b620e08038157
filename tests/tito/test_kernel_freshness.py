"""A notebook's running kernel runs the code `tito export` just wrote, without a restart."""
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]


def test_a_kernel_that_imported_a_stub_runs_the_exported_code(tmp_path):
    (tmp_path / "pkg").mkdir()
    module = tmp_path / "pkg" / "mod.py"
    module.write_text("def f():\n    raise NotImplementedError('stub')\n")
    first = (f"import sys\nsys.path[:0] = [{str(tmp_path)!r}, {str(ROOT)!r}]\n"
             "from tinytorch.utils.reload import reload_on_export\nreload_on_export()\nfrom pkg.mod import f")
    export = (f"import time\ntime.sleep(1.1)\nopen({str(module)!r}, 'w').write('def f():\\n    return 42\\n')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(first), nbformat.v4.new_code_cell(export),
                                         nbformat.v4.new_code_cell("print(f())")])
    NotebookClient(nb, timeout=120, kernel_name="python3", cwd=str(tmp_path)).execute()
    assert nb.cells[2].outputs[0].get("text") == "42\n", nb.cells[2].outputs

"""tito/names.py: the names a package file reads but never binds."""
import jupytext

from tito import names, notebook, release
from tito.course import available_modules


def test_undefined_names_sees_every_scope_and_nothing_bound():
    source = ("import numpy as np\nfrom a import b as c\nX = 1\n"
              "def f(x):\n    global G\n    G = 2\n    return [np.sum(x), q, c, X, len(x)]\n"
              "class K(Base):\n    attr = other\n    def m(self):\n        return K, G, missing, __name__\n")
    assert names.undefined_names(source) == {"q": "f", "Base": "module level", "other": "K", "missing": "K.m"}
    assert set(names.undefined_names("def f():\n    return [z for z in range(3) if z < w]\n")) == {"w"}
    assert names.undefined_names("from os import *\ndef f():\n    return anything\n") == {}
    assert names.undefined_names("def f(:\n") == {}


def test_the_binding_line_comes_from_an_import_cell_or_another_export_target():
    nb = jupytext.reads("# %%\nimport numpy as np\nfrom tinytorch.nn import init as I\n\n"
                        "# %%\n#| export nn.init\ndef calculate_gain(name):\n    return 1.0\n\n"
                        "# %%\n#| export nn.layers\ndef f():\n    return np, I, calculate_gain, nowhere\n",
                        fmt="py:percent")
    assert names.binding_in_notebook(nb, "np", "nn.layers") == "import numpy as np"
    assert names.binding_in_notebook(nb, "I", "nn.layers") == "from tinytorch.nn import init as I"
    assert names.binding_in_notebook(nb, "calculate_gain", "nn.layers") == "from tinytorch.nn.init import calculate_gain"
    assert names.binding_in_notebook(nb, "nowhere", "nn.layers") is None


def test_no_package_file_of_a_solution_or_a_released_stub_reads_an_unbound_name():
    for module in available_modules():
        solution = jupytext.read(module.solution_path)
        for nb in (solution, release.student_notebook(solution, module)):
            for target, group in notebook.group_by_target(notebook.export_chunks(nb, module.notebook_rel)).items():
                assert names.undefined_names(notebook.render(group, module.notebook_rel)) == {}, (module.slug, target)

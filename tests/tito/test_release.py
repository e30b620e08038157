"""`tito release` strips solutions exactly the way nbgrader does."""
import re
from pathlib import Path

import jupytext
from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions, LockCells

from tito.course import available_modules
from tito.release import student_notebook

ROOT = Path(__file__).resolve().parents[2]
OUR_STUB = re.compile(r"raise NotImplementedError\('.*?'\)$", re.M)


def nbgrader_version(path):
    nb = jupytext.read(path)
    resources = {}
    for preprocessor in (ClearSolutions(), ClearHiddenTests(), LockCells(), ClearOutput()):
        nb, resources = preprocessor.preprocess(nb, resources)
    return nb


def test_student_notebooks_match_nbgrader():
    modules = available_modules(ROOT)
    assert modules
    for module in modules:
        ours = student_notebook(jupytext.read(module.solution_path), module)
        theirs = nbgrader_version(module.solution_path)
        assert len(ours.cells) == len(theirs.cells)
        stubs = 0
        for a, b in zip(ours.cells, theirs.cells):
            stubs += len(OUR_STUB.findall(a.source))
            assert OUR_STUB.sub("raise NotImplementedError()", a.source) == b.source
            for key in ("nbgrader", "deletable", "editable"):
                assert a.metadata.get(key) == b.metadata.get(key), key
        assert stubs > 0, f"{module.slug} has no stubs"


def test_stub_names_function_and_notebook():
    module = available_modules(ROOT)[0]
    ours = student_notebook(jupytext.read(module.solution_path), module)
    messages = [m for cell in ours.cells for m in re.findall(r"NotImplementedError\('(.*?)'\)", cell.source)]
    assert messages
    for message in messages:
        assert re.match(r"^[\w.]+\(\) is not implemented yet: write it in modules/\d\d_\w+/\w+\.ipynb", message), message


def test_a_heading_repeated_in_one_notebook_is_reported():
    from tito.release import repeated_headings

    nb = jupytext.reads("# %% [markdown]\n# ## 1. Time per step\n#\n# text\n\n# %%\nx = 1\n\n"
                        "# %% [markdown]\n# ### Time   per step\n\n# %% [markdown]\n# ## 1. Time per step\n",
                        fmt="py:percent")
    assert repeated_headings(nb) == ["## 1. Time per step"]
    for module in available_modules():
        assert repeated_headings(jupytext.read(module.solution_path)) == [], module.slug


def test_a_control_character_in_a_solution_is_reported(tmp_path):
    from tito.release import control_characters

    path = tmp_path / "losses.py"
    path.write_text("# $$U = -\\frac{1}{C}$$\n# $$V = -\frac{1}{C}$$\n\tx = 1\r\n# cost $(25 - \text{end})^2$\n",
                    encoding="utf-8")
    assert control_characters(path) == [2, 4]
    for module in available_modules():
        assert control_characters(module.solution_path) == [], module.slug


def test_a_stub_is_named_under_the_section_that_asks_for_it_with_headings_in_plain_text():
    from tito.release import stub_manifest

    nb = jupytext.reads(
        "# %% [markdown]\n# ## 5. GPT: $T \\times T$ scores\n#\n# ### Initialisation\n#\n# Write `GPT._init_weights`.\n\n"
        "# %% [markdown]\n# ### The forward pass\n\n"
        "# %%\nclass GPT:\n    def _init_weights(self):\n        ### BEGIN SOLUTION\n        pass\n"
        "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n        return x\n"
        "        ### END SOLUTION\n", fmt="py:percent")
    sections = {s["name"]: s["section"] for s in stub_manifest(nb, None)}
    assert sections == {"GPT._init_weights": "5. GPT: T × T scores › Initialisation",
                        "GPT.forward": "5. GPT: T × T scores › The forward pass"}, sections

"""`tito test` reports: they point at the student's own code, keep messages whole, stop after
one timeout, isolate global state, and name a cell that lost its export line."""
import json
import re

import jupytext
import nbformat
import pytest

pytestmark = [pytest.mark.timeout(600), pytest.mark.command]

MODULE = "modules/02_activations/activations.ipynb"


@pytest.fixture
def course(course):
    """A course copy where module 01 is done (exported from its solution): a student at 02."""
    nb = _solved(course, "solutions/01_tensor/tensor.py")
    nbformat.write(nb, course.path("modules/01_tensor/tensor.ipynb"))
    assert course.tito("export", "01").returncode == 0
    return course


def _solved(course, path="solutions/02_activations/activations.py"):
    nb = jupytext.read(course.path(path))
    for cell in nb.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    return nb


def _manifest(course):
    return json.loads(course.path("modules/02_activations/.tito-stubs.json").read_text())


def _plant(nb, function, line):
    """Put `line` as the first statement of top-level `function` in a solved notebook."""
    for cell in nb.cells:
        match = re.search(rf"^def {re.escape(function)}\(.*\):\n(?:    \"\"\"(?:.|\n)*?\"\"\"\n)?", cell.source, re.M)
        if cell.cell_type == "code" and match:
            cell.source = cell.source[:match.end()] + f"    {line}\n" + cell.source[match.end():]
            return cell
    raise AssertionError(f"no top-level def {function} in module 02")


def _write_test(course, name, text):
    course.path(f"tests/02_activations/{name}").write_text(text, encoding="utf-8")


def test_failure_names_the_students_function_and_its_section(course):
    stub = next(s for s in _manifest(course)["stubs"] if "." not in s["name"] and s["section"])
    nb = _solved(course)
    _plant(nb, stub["name"], 'raise ValueError("planted bug")')
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("test", "02")
    assert out.returncode == 1
    section = re.sub(r"^(\d+)\. ", r"\1 ", stub["section"])
    assert f"§{section}, `{stub['name']}` ({MODULE}, cell " in out.stdout, out.stdout[-3000:]
    assert "ValueError: planted bug" in out.stdout


def test_a_lost_export_line_is_named(course):
    nb = _solved(course)
    exported = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("#| export")]
    cell = next(c for c in exported[1:] if "def " in c.source)
    cell.source = cell.source.replace("#| export\n", "", 1)
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("export", "02")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "has lost its '#| export' line" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_name_that_only_another_cell_binds_is_named_at_export(course):
    """The notebook runs every cell in one namespace; the package file does not."""
    nb = _solved(course)
    nb.cells.append(nbformat.v4.new_code_cell("import math as m"))
    nb.cells.append(nbformat.v4.new_code_cell("#| export\ndef _circle_area(r):\n    return m.pi * r * r"))
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("export", "02")
    assert out.returncode == 0, out.stderr
    assert ("tinytorch/nn/activations.py reads `m` (in _circle_area)" in out.stdout
            and "Add `import math as m` to an export cell" in out.stdout), out.stdout


def test_a_name_no_cell_binds_is_named_as_possibly_misspelt(course):
    nb = _solved(course)
    nb.cells.append(nbformat.v4.new_code_cell("#| export\ndef _area(r):\n    return mathh.pi * r * r"))
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("export", "02")
    assert out.returncode == 0, out.stderr
    assert ("reads `mathh` (in _area)" in out.stdout
            and "No cell of the notebook defines it either" in out.stdout), out.stdout


def test_an_error_at_import_names_its_cell(course):
    nb = _solved(course)
    nb.cells.append(nbformat.v4.new_code_cell("#| export\nundefined_name_at_import"))
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("test", "02")
    assert out.returncode == 1
    assert "NameError" in out.stdout and f"raised from {MODULE}, cell {len(nb.cells)}" in out.stdout, out.stdout


def test_k_and_x_select_and_stop_like_pytest(course):
    everything = course.tito("test", "02")
    total = int(re.search(r"0 passed, (\d+) failed", everything.stdout).group(1))
    first = course.tito("test", "02", "-x")
    assert re.search(r"0 passed, 1 failed", first.stdout), first.stdout[-2000:]
    some = course.tito("test", "02", "-k", "relu")
    picked = int(re.search(r"0 passed, (\d+) failed", some.stdout).group(1))
    assert 0 < picked < total


def test_global_state_is_reset_around_every_test(course):
    _write_test(course, "test_zz_state.py", (
        "import numpy as np\nimport tinytorch\n\n"
        "def test_zz_a_leaves_grad_mode_off():\n"
        "    tinytorch.set_grad_enabled(False)\n    np.random.seed(1)\n    tinytorch.manual_seed(1)\n"
        "    assert False, 'fails on purpose'\n\n"
        "def test_zz_b_starts_with_grad_mode_on():\n"
        "    assert tinytorch.is_grad_enabled()\n"))
    out = course.tito("test", "02", "--solutions", "-k", "zz_")
    assert re.search(r"1 passed, 1 failed", out.stdout), out.stdout[-2000:]


def test_messages_stay_whole_with_readable_ids(course):
    _write_test(course, "test_zz_messages.py", (
        "import pytest\nfrom hypothesis import given, strategies as st\n\n"
        "@pytest.mark.parametrize('shape', [(2, 0, 3)])\n"
        "def test_zz_shapes(shape):\n    assert shape == (2, 3, 3)\n\n"
        "@given(st.integers(min_value=0, max_value=10))\n"
        "def test_zz_property(n):\n    assert n < 5\n\n"
        "def test_zz_raises():\n"
        "    with pytest.raises(ValueError, match='must name both shapes'):\n"
        "        raise ValueError('shapes differ')\n"))
    out = course.tito("test", "02", "--solutions", "-k", "zz_")
    text = out.stdout
    assert "test_zz_shapes[shape=(2, 0, 3)]" in text, text[-3000:]
    assert "At index 1 diff: 0 != 3" in text
    assert ("Falsifying example" in text or "Failing test case" in text) and "n=5" in text
    assert "Regex pattern did not match" in text and "Actual message: 'shapes differ'" in text


def test_an_endless_loop_costs_one_timeout_and_names_the_function(course):
    stub = next(s for s in _manifest(course)["stubs"] if "." not in s["name"])
    nb = _solved(course)
    _plant(nb, stub["name"], "while True: pass")
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("test", "02", TITO_TEST_TIMEOUT="2", timeout=300)
    assert out.returncode == 1
    assert f"ran past its time limit while `{stub['name']}` was running" in out.stdout, out.stdout[-3000:]
    assert out.stdout.count("Timeout >") <= 1


def test_an_endless_loop_is_named_though_the_limit_struck_inside_a_function_it_calls(course):
    """The loop in `_log_softmax_forward` spends nearly all its time inside `_logsumexp`, a
    student's function too, so that is where the timeout strikes; the one that never returned
    is named."""
    nb = _solved(course)
    _plant(nb, "_log_softmax_forward", "while True: _logsumexp(np.ones((300, 300)), 1)")
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("test", "02", TITO_TEST_TIMEOUT="3", timeout=300)
    assert out.returncode == 1
    assert "ran past its time limit while `_log_softmax_forward` was running" in out.stdout, out.stdout[-3000:]


def test_a_wrong_default_exp_is_blamed_on_its_own_cell(course):
    nb = _solved(course)
    number, cell = next((n, c) for n, c in enumerate(nb.cells, 1)
                        if c.cell_type == "code" and "#| default_exp" in c.source)
    cell.source = re.sub(r"#\| default_exp \S+", "#| default_exp nn.wrong_place", cell.source)
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("export", "02")
    assert out.returncode == 2
    assert f"{MODULE}, cell {number}" in out.stderr and "'#| default_exp nn.wrong_place'" in out.stderr, out.stderr


def test_a_rule_test_is_filed_under_the_rule_it_names():
    """A sign error in the div rule shows up in gradcheck (the rule is no longer on the
    stack): the test's `op=div` parameter files it under `_div_backward`, not `gradcheck`."""
    from tito.testing import _unit_of

    stubs = [{"name": "numerical_grad"}, {"name": "_mul_backward"}, {"name": "_div_backward"},
             {"name": "Softplus.backward"}]
    assert _unit_of("test_gradcheck.py::test_binary_ops_with_broadcasting[op=div-sa=(2, 3)-sb=(3,)]",
                    stubs) == ("_div_backward", 2)
    assert _unit_of("test_engine.py::test_numerical_grad_is_central", stubs) == ("numerical_grad", 0)
    assert _unit_of("test_graph_view.py::test_to_dot_after_backward_says_freed", stubs) is None


def test_the_function_the_failing_tests_run_and_the_passing_ones_do_not_is_suspected_first():
    """Spectrum ranking (tests/stub_spectrum.py): `__exit__` is run by every failing test and
    by few passing ones, the engine by every test: the failures are filed under `__exit__`,
    though the assertions sit in the tests and the traceback shows no student frame."""
    from tito.testing import _suspect, _suspicion

    cases = [(True, {"_GradMode.__exit__", "_run_backward"})] * 3 + [(False, {"_run_backward"})] * 20 \
        + [(False, {"_GradMode.__exit__", "_run_backward"})]
    scores = _suspicion(cases)
    assert scores["_GradMode.__exit__"] > 0.8 > scores["_run_backward"]
    position = {"_GradMode.__exit__": 0, "_run_backward": 5, "_add_backward": 3}
    ran = {"_GradMode.__exit__", "_run_backward"}
    assert _suspect("assert False", None, None, ran, scores, position) == ["_GradMode.__exit__"]
    # the traceback's own function wins only when it is nearly as suspect
    assert _suspect("boom", "_run_backward", None, ran, scores, position) == ["_GradMode.__exit__"]
    # a message that names a backward rule names the stub to fix
    message = "RuntimeError: the backward rule of 'add' returned a gradient of shape (3,) for an input of shape (2, 3)"
    assert _suspect(message, "_run_backward", None, ran, scores, position) == ["_add_backward"]
    # no spectrum (an old run, or code outside the module): the traceback, then the test's unit
    assert _suspect("boom", "_run_backward", "_add_backward", set(), {}, position) == ["_run_backward"]
    assert _suspect("boom", None, "_add_backward", set(), {}, position) == ["_add_backward"]
    # two functions every failing test runs together, equally suspect: both named, not a guess
    together = {"_GradMode.__enter__", "_GradMode.__exit__"}
    scores = _suspicion([(True, together)] * 4 + [(False, {"_run_backward"})] * 9)
    position["_GradMode.__enter__"] = -1
    assert _suspect("assert False", None, None, together, scores, position) == \
        ["_GradMode.__enter__", "_GradMode.__exit__"]


def test_with_each_tests_functions_recorded_a_planted_bug_is_filed_under_its_function(course):
    """End to end through tests/stub_spectrum.py (every test traced): a wrong relu is the
    first group `tito test` prints."""
    nb = _solved(course)
    _plant(nb, "relu", "return x * 0 + 1")
    nbformat.write(nb, course.path(MODULE))
    proc = course.tito("test", "module", "02")
    first = [line for line in proc.stdout.splitlines() if line.startswith("  ✗")][0]
    assert "`relu`" in first, proc.stdout[-3000:]


@pytest.mark.parametrize("message,first", [
    ("AssertionError: \nNot equal to tolerance rtol=1e-06, atol=1e-07\n\nMismatched elements: 1 / 3",
     "AssertionError: Not equal to tolerance rtol=1e-06, atol=1e-07"),
    ("ValueError: choose: no rows\nmore", "ValueError: choose: no rows"),
    ("\n\nRuntimeError: boom", "RuntimeError: boom"),
])
def test_the_summary_line_of_a_failure_is_never_blank(message, first):
    from tito.testing import _first_line

    assert _first_line(message) == first


def test_a_groups_message_opens_with_what_failed_not_a_bare_header():
    from tito.testing import _message_lines

    got = _message_lines("AssertionError: \n\nNot equal to tolerance rtol=1e-05\n\nMismatched elements: 1 / 3")
    assert got[0] == "AssertionError: Not equal to tolerance rtol=1e-05", got
    assert got[1:] == ["", "Mismatched elements: 1 / 3"], got
    assert _message_lines("\nValueError: bad\nmore") == ["ValueError: bad", "more"]
    assert _message_lines("AssertionError:") == ["AssertionError:"]


def test_a_test_file_that_cannot_be_imported_is_named_with_its_exception(tmp_path):
    from tito.testing import _collection_errors

    report = tmp_path / "report.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites><testsuite>'
        '<testcase classname="" name="tests.20_capstone.test_x" file="tests/20_capstone/test_x.py">'
        '<error message="collection failure">tests/20_capstone/test_x.py:10: in &lt;module&gt;\n'
        "    M = Measurement(10, [0.01])\n"
        "E   NotImplementedError: Measurement._summarize() is not implemented yet</error></testcase>"
        '<testcase classname="tests.20_capstone.test_y" name="test_ok" file="tests/20_capstone/test_y.py"/>'
        "</testsuite></testsuites>")
    assert _collection_errors(report) == (
        "\n  tests/20_capstone/test_x.py could not be imported: "
        "NotImplementedError: Measurement._summarize() is not implemented yet")

"""Attribution: `tito test` files a failure under the function whose code is wrong, and
tito verify measures that on every mutant by rerunning only the tests a mutant can change."""
from pathlib import Path

import pytest

from tito import attribution, mutants, testing
from tito.course import resolve

pytestmark = [pytest.mark.timeout(600), pytest.mark.command]

ROOT = Path(__file__).resolve().parents[2]


def _junit(path: Path, cases) -> Path:
    """A junit report of (test id 'file.py::name', failed?, functions run)."""
    rows = []
    for test, failed, ran in cases:
        file, name = test.split("::")
        classname = f"tests.06_autograd.{file[:-3]}"
        spectrum = "|".join(sorted(ran))
        bad = '<failure message="assert False">assert False</failure>' if failed else ""
        rows.append(f'<testcase classname="{classname}" name="{name}"><properties>'
                    f'<property name="tito_spectrum" value="{spectrum}"/></properties>{bad}</testcase>')
    path.write_text(f'<testsuites><testsuite name="pytest">{"".join(rows)}</testsuite></testsuites>',
                    encoding="utf-8")
    return path


ENGINE = {"_run_backward", "topological_order", "_accumulate_grad"}


def _first(tmp_path, cases):
    path = _junit(tmp_path / "r.xml", cases)
    outcome = testing.parse_junit(path, path.parent, resolve("06", ROOT))
    return attribution.first_group(outcome)


def test_an_engine_mistake_is_filed_under_the_engine_not_the_rules_its_tests_use(tmp_path):
    """Every test runs the engine, so the passing tests make it the least suspect by Ochiai;
    but one function explains all the failures, and its own tests are among them, while the
    `mul` rule's own tests pass."""
    passing = [(f"test_ops.py::test_rules[op=mul-case={i}]", False, ENGINE | {"_mul_backward"}) for i in range(20)]
    failing = [("test_engine.py::test_run_backward_sums_a_node_read_twice", True, ENGINE | {"_mul_backward"}),
               ("test_nn.py::test_cross_entropy_grad", True, ENGINE | {"_mul_backward", "_nll_loss_backward"})]
    assert _first(tmp_path, passing + failing) == ("_run_backward",)


def test_two_wrong_rules_are_each_filed_under_their_own_rule_not_the_engine_they_share(tmp_path):
    other = [(f"test_ops.py::test_rules[op=add-case={i}]", False, ENGINE | {"_add_backward"}) for i in range(20)]
    failing = [(f"test_ops.py::test_rules[op={op}-case={i}]", True, ENGINE | {f"_{op}_backward"})
               for op in ("mul", "div") for i in range(3)]
    path = _junit(tmp_path / "r.xml", other + failing)
    outcome = testing.parse_junit(path, path.parent, resolve("06", ROOT))
    assert {f.stub for f in outcome.details} == {"_mul_backward", "_div_backward"}


def test_a_helper_every_failing_test_ran_is_found_though_its_own_test_is_the_only_one_naming_it(tmp_path):
    """numerical_grad, one-sided: gradcheck fails for div (the `op=div` tests accuse the
    div rule), and numerical_grad's own test fails, which ran nothing else."""
    passing = [(f"test_ops.py::test_rules[op=add-case={i}]", False, ENGINE | {"_add_backward", "numerical_grad"})
               for i in range(20)]
    failing = [(f"test_ops.py::test_rules[op=div-case={i}]", True, ENGINE | {"_div_backward", "numerical_grad"})
               for i in range(4)] + [("test_tool.py::test_numerical_grad_is_central", True, {"numerical_grad"})]
    assert _first(tmp_path, passing + failing) == ("numerical_grad",)


def test_functions_nearly_as_suspect_are_named_together(tmp_path):
    cases = [("test_a.py::test_one", True, {"_sum_backward", "_mean_backward"}),
             ("test_a.py::test_two", False, {"_sum_backward"}),
             ("test_a.py::test_three", False, {"_mean_backward", "_sum_backward"})]
    # sum: 1/sqrt(1*3) = 0.58; mean: 1/sqrt(1*2) = 0.71; 0.58 >= 0.8 * 0.71: both, mean first
    assert _first(tmp_path, cases) == ("_mean_backward", "_sum_backward")


def test_a_function_named_with_another_says_when_its_own_tests_all_pass(tmp_path):
    """Module 04's replay: every BCE mistake was filed as "`_bce_with_logits_forward` or
    `_check_pointwise`", whose own tests all passed (the loss runs the check each call).
    It stays named (it can still be the wrong one), last, with that fact."""
    both = {"_sum_backward", "_mean_backward"}
    cases = [("test_a.py::test_one", True, both), ("test_a.py::test_two", False, both),
             ("test_a.py::test_mean_backward_of_ones", False, both)]  # mean's own test passes
    path = _junit(tmp_path / "r.xml", cases)
    outcome = testing.parse_junit(path, path.parent, resolve("06", ROOT))
    assert attribution.first_group(outcome) == ("_sum_backward", "_mean_backward")
    assert outcome.details[0].where.endswith("`_sum_backward` (modules/06_autograd/autograd.ipynb), the likeliest: "
                                             "the failing tests also ran `_mean_backward`, but its own tests all pass")


def test_an_error_raised_inside_one_of_two_tied_functions_says_where_it_was_raised(tmp_path):
    """Module 06's Softplus: every test runs forward and backward together, so a mistake in
    either is filed under both. An exception raised inside backward names backward first
    and says so (forward stays named: what it saved may be what backward failed on); an
    assertion says only that tito cannot tell them apart."""
    package = tmp_path / "package"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "ops.py").write_text(
        "# Generated by tito from modules/06_autograd/autograd.ipynb. Edit the notebook, not this file.\n"
        "# -- cell 82 (softplus-function) --\nclass Softplus:\n    def backward(ctx, grad):\n"
        "        return grad * s.nonexistent\n", encoding="utf-8")
    both = "Softplus.backward|Softplus.forward"

    def where(message):
        rows = [f'<testcase classname="tests.06_autograd.test_function" name="test_softplus_{i}"><properties>'
                f'<property name="tito_spectrum" value="{both}"/>'
                f'<property name="tinytorch_frames" value="tinytorch/ops.py:5:Softplus.backward"/>'
                f'<property name="tito_message" value="{message}"/></properties>'
                f'<failure message="{message}">{message}</failure></testcase>' for i in range(2)]
        report = tmp_path / "r.xml"
        report.write_text(f'<testsuites><testsuite name="pytest">{"".join(rows)}</testsuite></testsuites>',
                          encoding="utf-8")
        outcome = testing.parse_junit(report, package, resolve("06", ROOT))
        assert attribution.first_group(outcome) == ("Softplus.backward", "Softplus.forward")
        return outcome.details[0].where

    raised = where("AttributeError: 'Tensor' object has no attribute 'nonexistent'")
    assert raised.endswith("`Softplus.backward` (modules/06_autograd/autograd.ipynb), where the error was raised: "
                           "the failing tests also ran `Softplus.forward`, which may have handed it what it failed on")
    assert "cannot tell which one is wrong" in where("AssertionError: gradcheck failed")


def test_among_functions_nearly_as_suspect_the_one_the_test_file_is_named_after_comes_first(tmp_path):
    """test_unbroadcast.py holds unbroadcast's tests: when the scores cannot tell it from
    another function, it is named first (a DataLoader shuffling bug was filed under §4's
    collate, which every DataLoader test also runs)."""
    cases = [("test_unbroadcast.py::test_one", True, {"_sum_backward", "unbroadcast"}),
             ("test_a.py::test_two", False, {"unbroadcast"}),
             ("test_a.py::test_three", False, {"unbroadcast", "_sum_backward"})]
    # unbroadcast: 1/sqrt(1*3) = 0.58; sum: 0.71; both near, the file's own function first
    assert _first(tmp_path, cases) == ("unbroadcast", "_sum_backward")
    cases[0] = ("test_b.py::test_one", True, {"_sum_backward", "unbroadcast"})
    assert _first(tmp_path, cases) == ("_sum_backward", "unbroadcast")


def test_a_mutant_touches_the_functions_around_its_edit_or_none_when_outside_them():
    module = resolve("06", ROOT)
    text = module.solution_path.read_text(encoding="utf-8")
    by_name = {m.name: m for m in mutants.load(module)}
    assert attribution.touched(module, text, mutants.apply(module, by_name["div-sign"], text)) == {"_div_backward"}
    assert attribution.touched(module, text, "# another first line\n" + text.split("\n", 1)[1]) is None


def test_numba_compiled_stubs_are_known_and_selected_by_the_run_without_the_compiler():
    """Compiled code calls a CPU-compiled stub without a Python frame: the compiled run's trace
    cannot select its tests, the run with numba's compiler off can. A CUDA kernel is traced as
    Python under the simulator and never seen on a GPU."""
    module = resolve("17", ROOT)
    text = module.solution_path.read_text(encoding="utf-8")
    cpu = {"strided_position", "bias_gelu", "exp_approx", "parallel_sum", "matmul_ikj", "matmul_blocked", "im2col"}
    assert attribution.compiled_stubs(module, text) == cpu
    on_gpu = attribution.Reference(Path("unused.xml"), {"tests/17/test_k.py::test_map": {"_check"}})
    assert attribution.selection(on_gpu, {"map_kernel"}) is None  # no test was seen entering it: all run
    assert attribution.compiled_stubs(resolve("06", ROOT), resolve("06", ROOT).solution_path.read_text()) == set()
    ran = {"t.py::test_conv": {"conv2d_forward"}, "t.py::test_im2col": set(), "t.py::test_sum": set(),
           "t.py::test_precision": set()}
    compiled_only = attribution.Reference(Path("unused.xml"), ran)
    assert attribution.selection(compiled_only, {"im2col"}, cpu) is None  # no run without the compiler: all run
    as_python = {"t.py::test_conv": {"conv2d_forward", "im2col"}, "t.py::test_im2col": {"im2col"},
                 "t.py::test_sum": {"parallel_sum"}}  # test_precision did not pass as Python: missing
    ref = attribution.Reference(Path("unused.xml"), ran, as_python)
    assert attribution.selection(ref, {"im2col"}, cpu) == ["t.py::test_conv", "t.py::test_im2col", "t.py::test_precision"]
    assert attribution.selection(ref, {"conv2d_forward"}, cpu) == ["t.py::test_conv"]  # not compiled: as before


def test_only_the_tests_that_entered_a_touched_function_are_rerun_and_the_rest_keep_their_result(tmp_path):
    ref_report = _junit(tmp_path / "ref.xml", [("test_a.py::test_one", False, {"_mul_backward"}),
                                               ("test_a.py::test_two", False, {"_div_backward"})])
    ref = attribution.Reference(ref_report, {"tests/06/test_a.py::test_one": {"_mul_backward"},
                                             "tests/06/test_a.py::test_two": {"_div_backward"}})
    assert attribution.selection(ref, {"_mul_backward"}) == ["tests/06/test_a.py::test_one"]
    assert attribution.selection(ref, {"_add_backward"}) is None  # no test entered it: run them all
    assert attribution.selection(ref, None) is None
    rerun = _junit(tmp_path / "run.xml", [("test_a.py::test_one", True, {"_mul_backward"})])
    attribution._merged(ref, rerun, tmp_path / "merged.xml")
    outcome = testing.parse_junit(tmp_path / "merged.xml", tmp_path, resolve("06", ROOT))
    assert (outcome.failed, outcome.passed) == (1, 1)
    assert outcome.details[0].stub == "_mul_backward"


def test_rerunning_the_selected_tests_files_a_mutant_as_the_whole_suite_does(course):
    """On a real module: the selection's merged outcome equals a full run's."""
    from tito import build

    module = resolve("02", course.root)
    solutions = build.build_solutions(course.root)
    ref = attribution.reference(course.root, solutions, module)
    mutant = next(m for m in mutants.load(module) if m.name == "softmax-wrong-dim")
    selected = attribution.run_mutant(course.root, solutions, module, mutant, ref)
    whole = attribution.run_mutant(course.root, solutions, module, mutant)
    assert 0 < selected.failed < selected.total
    assert sorted(t for t, _ in selected.failures) == sorted(t for t, _ in whole.failures)
    assert attribution.first_group(selected) == attribution.first_group(whole) == ("_softmax_forward",)


def test_a_test_that_reads_a_shared_fixture_counts_the_functions_its_setup_entered():
    """A session-scoped fixture is set up once, inside the first test that asks for it; the
    later tests read its value without calling anything. For selection and ranking they
    ran what the setup ran."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("stub_spectrum_copy", ROOT / "tests" / "stub_spectrum.py")
    spectrum = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(spectrum)

    def make_variants():
        return 1

    spectrum._CODES[make_variants.__code__] = "make_variants"
    spectrum.start()
    setup = spectrum.fixture_setup(("variants", "tests/20"))
    next(setup)
    make_variants()
    with pytest.raises(StopIteration):
        next(setup)
    assert spectrum.stop([("variants", "tests/20")]) == ["make_variants"]  # the first test
    spectrum.start()
    assert spectrum.stop([("variants", "tests/20")]) == ["make_variants"]  # a later one
    spectrum.start()
    assert spectrum.stop([("other", "tests/20")]) == []
    # a fixture whose setup entered nothing (its set equals the test's empty one) must not
    # stop the test's own recording
    spectrum.start()
    setup = spectrum.fixture_setup(("empty", "tests/20"))
    next(setup)
    with pytest.raises(StopIteration):
        next(setup)
    make_variants()
    assert spectrum.stop() == ["make_variants"]


def test_a_failure_in_compiled_code_is_filed_under_the_compiled_stub_whose_own_tests_fail(tmp_path):
    """exp_approx runs inside the compiled GELU kernels, where no trace sees it: a GELU test
    that fails with no student function seen is filed under it, because its own tests fail."""
    rows = []
    for name, failed in [("test_exp_approx_simple_values", True), ("test_gelu_float32_within_2_ulps_of_module_02", True),
                         ("test_bias_gelu_matches_the_definition", False)]:
        bad = '<failure message="assert False">assert False</failure>' if failed else ""
        rows.append(f'<testcase classname="tests.17_acceleration.test_exp_gelu" name="{name}"><properties>'
                    f'<property name="tito_spectrum" value=""/></properties>{bad}</testcase>')
    path = tmp_path / "r.xml"
    path.write_text(f'<testsuites><testsuite name="pytest">{"".join(rows)}</testsuite></testsuites>', encoding="utf-8")
    outcome = testing.parse_junit(path, tmp_path, resolve("17", ROOT))
    gelu = next(f for f in outcome.details if "gelu_float32" in f.test)
    assert gelu.stub == "exp_approx" and "compiled code" in gelu.where, gelu.where
    path.write_text(path.read_text().replace('name="test_exp_approx_simple_values"><properties>'
                                             '<property name="tito_spectrum" value=""/></properties>'
                                             '<failure message="assert False">assert False</failure>',
                                             'name="test_exp_approx_simple_values"><properties>'
                                             '<property name="tito_spectrum" value=""/></properties>'))
    alone = next(f for f in testing.parse_junit(path, tmp_path, resolve("17", ROOT)).details)
    assert alone.stub is None, "with every compiled stub's own tests passing, nothing is guessed"


def test_a_crashed_test_process_names_the_running_test_and_its_function():
    module = resolve("17", ROOT)
    dump = ("Fatal Python error: Aborted\n\nCurrent thread 0x00007f (most recent call first):\n"
            '  File "/course/tests/17_acceleration/test_matmul.py", line 167 in test_matmul_blocked_equals_numpy\n'
            '  File "/venv/lib/python3.12/site-packages/_pytest/python.py", line 159 in pytest_pyfunc_call\n')
    note = testing._crash_note(module, -6, "malloc(): invalid size (unsorted)\n" + dump)
    assert "SIGABRT" in note and "test_matmul_blocked_equals_numpy (line 167)" in note, note
    assert "`matmul_blocked`" in note and "NUMBA_BOUNDSCHECK=1" in note, note
    assert testing._crash_note(module, 1, dump) == "", "an ordinary failing run is no crash"
    assert "SIGSEGV" in testing._crash_note(module, -11, "no dump"), "a crash without a dump still says what killed it"

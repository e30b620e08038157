"""Mutant checks: a listed mistake must be well formed, and a surviving one must be reported."""
import pytest

from tito import mutants
from tito.course import resolve
from tito.errors import TitoError

pytestmark = [pytest.mark.timeout(600), pytest.mark.command]

CAUGHT = '''
[[mutant]]
name = "relu-keeps-negatives"
says = "ReLU keeps the negative part instead of the positive one"
find = "return np.maximum(x.numpy(), 0)"
replace = "return np.minimum(x.numpy(), 0)"
'''
# Changes the code but not what it computes: no test and no check can catch it, and the
# command must say so (exit 1), not report success.
SURVIVES = '''
[[mutant]]
name = "equivalent"
says = "an equivalent rewrite (must be reported as not caught)"
find = "return np.maximum(x.numpy(), 0)"
replace = "return np.maximum(0, x.numpy())"
'''


def _write(course, text):
    course.path("solutions/02_activations/mutants.toml").write_text(text, encoding="utf-8")
    return resolve("02", course.root)


def test_malformed_mutants_are_refused_with_the_reason(course):
    module = _write(course, CAUGHT)
    text = module.solution_path.read_text(encoding="utf-8")
    good = mutants.load(module)[0]
    assert "np.minimum" in mutants.apply(module, good, text)
    cases = {
        "occurs 0 times": mutants.Mutant("a", "x", "no such text anywhere", "y"),
        "not inside a solution region": mutants.Mutant("b", "x", "def sigmoid(", "def sigmoid2("),
        "no cell has grade_id": mutants.Mutant("c", "x", good.find, good.replace, cell="nope"),
        "nothing would change": mutants.Mutant("d", "x", good.find, good.find),
    }
    for reason, bad in cases.items():
        with pytest.raises(TitoError, match=reason):
            mutants.apply(module, bad, text)
    _write(course, CAUGHT + CAUGHT)
    with pytest.raises(TitoError, match="two mutants are named"):
        mutants.load(module)
    _write(course, '[[mutant]]\nname = "x"\nfind = "a"\nreplace = "b"\n')
    with pytest.raises(TitoError, match="says"):
        mutants.load(module)


def test_tito_mutants_reports_caught_and_surviving_mutants(course):
    _write(course, CAUGHT + SURVIVES)
    out = course.tito("mutants", "02", timeout=500)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "✓ 02_activations: mutant relu-keeps-negatives fails the tests" in out.stdout
    assert "✓ 02_activations: mutant relu-keeps-negatives fails a graded check cell" in out.stdout
    assert "✗ 02_activations: mutant equivalent fails the tests" in out.stdout
    assert "✗ 02_activations: mutant equivalent fails a graded check cell" in out.stdout
    assert "every graded check cell still passes" in out.stdout
    assert "at least 8 mutants" in out.stdout  # two listed is too few


def test_a_mutant_is_aimed_at_the_student_function_whose_region_it_edits():
    """tito verify compares tito test's first group with this function."""
    from pathlib import Path

    from tito import attribution

    module = resolve("15", Path(__file__).resolve().parents[2])
    by_name = {m.name: m for m in mutants.load(module)}
    assert attribution.target(module, by_name["int8-accumulate-in-int8"]) == "_int8_linear"
    assert attribution.target(module, by_name["observer-keeps-last-batch"]) == "MinMaxObserver.forward"
    declared = mutants.Mutant("x", "x", by_name["quantize-floor"].find, "y", function="_dequantize")
    assert attribution.target(module, declared) == "_dequantize"


def test_a_test_is_the_unit_test_of_the_stub_whose_words_its_name_holds_whole():
    from tito.testing import _unit_of

    stubs = [{"name": n} for n in ("_quantize", "_int8_linear", "MinMaxObserver.forward", "_mean_backward",
                                   "_div_backward")]
    assert _unit_of("t.py::test_quantizedlinear_is_close", stubs) is None  # not a test of _quantize
    assert _unit_of("t.py::test_int8_linear_exact[seed=0]", stubs)[0] == "_int8_linear"
    assert _unit_of("t.py::test_minmaxobserver_forward_keeps_range", stubs)[0] == "MinMaxObserver.forward"
    assert _unit_of("t.py::test_loss_grads[reduction=mean]", stubs) is None  # a parameter, not an op
    assert _unit_of("t.py::test_rules[op=div]", stubs)[0] == "_div_backward"


def test_a_mutated_solution_reads_as_jupytext_reads_the_whole_file(monkeypatch):
    """build_variant and the graded-check run read each mutant's notebook again by its one
    changed cell (notebook.reads_edited): it must read as jupytext reads the whole text, and
    a mutant's text must not be read whole (seconds each, hundreds of mutants)."""
    from pathlib import Path

    import jupytext

    from tito import notebook

    read_whole, cells_of = [], notebook.jupytext_cells
    monkeypatch.setattr(notebook, "jupytext_cells",
                        lambda text, whole=False: read_whole.append(whole) or cells_of(text, whole))

    module = resolve("02", Path(__file__).resolve().parents[2])  # a short notebook: jupytext is slow
    text = module.solution_path.read_text(encoding="utf-8")
    first = text.index("\n# %%") + 1
    edits = [mutants.apply(module, m, text) for m in mutants.load(module)[:2]]
    edits += [text[:first] + "# %%\nx = 1\n\n" + text[first:],                # a new cell
              text + "\n# %%\ny = 2\n"]                                       # after the last cell
    for n, edited in enumerate(edits):
        read_whole.clear()
        fast, whole = notebook.reads_edited(text, edited), jupytext.reads(edited, fmt="py:percent")
        assert any(read_whole) == (n >= 2), "a mutant is read by its cell; a new cell, whole"
        assert [notebook.cell_key(c) for c in fast.cells] == [notebook.cell_key(c) for c in whole.cells]
        assert [c.metadata for c in fast.cells] == [c.metadata for c in whole.cells]
        assert fast.metadata == whole.metadata


def test_a_mutant_touches_the_lines_it_changes_and_an_insertion_the_line_before():
    from pathlib import Path

    from tito import attribution

    module = resolve("06", Path(__file__).resolve().parents[2])
    text = module.solution_path.read_text(encoding="utf-8")
    spans = attribution.stub_spans(module, text)
    first, last = spans["_div_backward"]
    lines = text.splitlines(keepends=True)
    inserted = "".join(lines[:last] + ["    pass  # an inserted line\n"] + lines[last:])
    assert attribution.touched(module, text, inserted) == {"_div_backward"}
    changed = "".join(lines[:first] + ["    # changed\n"] + lines[first + 1:])
    assert attribution.touched(module, text, changed) == {"_div_backward"}


def test_a_mutants_package_rewrites_only_its_files_each_with_a_time_no_earlier_version_had(course):
    """Mutants are built in kept slot folders (bytecode and numba's kernels cached for the
    unchanged files stay valid): only the mutated file differs from the solutions build, the
    others keep their modification times, and each version of the mutated file gets a time
    of its own (both mutants here have the same size; caches compare time and size)."""
    from tito import build

    module = _write(course, CAUGHT + SURVIVES)
    text = module.solution_path.read_text(encoding="utf-8")
    solutions = build.build_solutions(course.root)
    caught, survives = mutants.load(module)
    times = []
    for mutant in (caught, survives, caught):
        with mutants.variant(course.root, solutions, module, mutants.apply(module, mutant, text)) as package:
            files = sorted(p.relative_to(package) for p in (package / "tinytorch").rglob("*")
                           if p.is_file() and "__pycache__" not in p.parts)
            assert files == sorted(p.relative_to(solutions) for p in (solutions / "tinytorch").rglob("*")
                                   if p.is_file() and "__pycache__" not in p.parts)
            changed = [rel for rel in files if (package / rel).read_bytes() != (solutions / rel).read_bytes()]
            assert len(changed) == 1 and mutant.replace in (package / changed[0]).read_text(encoding="utf-8")
            assert all((package / rel).stat().st_mtime_ns == (solutions / rel).stat().st_mtime_ns
                       for rel in files if rel not in changed)
            times.append(int((package / changed[0]).stat().st_mtime))
    assert len(set(times)) == 3 and int((solutions / changed[0]).stat().st_mtime) not in times

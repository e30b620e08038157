"""`tito milestone`: the list, the refusals on unfinished modules, and the fast milestones
run for real on the reference build, all in a throwaway copy of the course."""
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")

# The solutions runs train real (small) models: longer than a unit test.
pytestmark = [pytest.mark.timeout(600), pytest.mark.command]

FAST = ["perceptron", "xor", "digits_mlp"]


def milestones():
    """The milestones as tito reads them from the checkout (name, modules, file)."""
    from tito.milestones import discover

    return discover(ROOT)


def finish(course, slug, ok=True):
    """Make module `slug` look finished in the copy: its package files exported from its
    solution notebook, and a test record on the student's notebook (passed unless ok=False)."""
    from tito import notebook
    from tito.build import _write
    from tito.course import resolve

    module = resolve(slug, course.root)
    source = module.solution_path.relative_to(course.root).as_posix()
    chunks = notebook.export_chunks(notebook.read_solution(module.solution_path), source)
    _write(course.path("tinytorch"), notebook.group_by_target(chunks), source)
    state_file = course.path(".tito/state.json")
    state_file.parent.mkdir(exist_ok=True)
    state = json.loads(state_file.read_text()) if state_file.is_file() else {}
    state.setdefault(module.slug, {})["last_test"] = {
        "against": "notebook", "passed": 10 if ok else 7, "failed": 0 if ok else 3, "ok": ok,
        "when": "2026-01-01 12:00"}
    state_file.write_text(json.dumps(state))


def test_the_fast_milestones_exist():
    names = [m.name for m in milestones()]
    assert set(FAST) <= set(names), f"expected the fast milestones {FAST} among {names}"
    assert len(names) >= 6, f"expected six milestones (perceptron to compression), found {names}"


def test_list_shows_every_milestone_with_its_modules(course):
    out = course.tito("milestone", "list")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())  # the lines wrap
    for m in milestones():
        assert m.label in out.stdout, f"`tito milestone list` should name {m.label}:\n{out.stdout}"
        needs = "needs: " + ", ".join(slug.replace("_", " ") for slug in m.modules)
        assert needs in text, f"the list should show {m.name}'s modules as {needs!r}:\n{out.stdout}"
        assert m.target in text, f"the list should show {m.name}'s target {m.target!r}"
    # on the released stubs nothing is ready: each waits for module 01
    assert out.stdout.count("waits for module 01 (tensor)") == len(milestones()), out.stdout


def test_each_milestone_refuses_on_the_released_stubs(course):
    for m in milestones():
        out = course.tito("milestone", "run", m.name)
        assert out.returncode == 1, f"{m.name} should refuse (exit 1) on the stubs; got {out.returncode}:\n{out.stdout}"
        assert f"milestone {m.name} needs module 01 (tensor), which is not finished" in out.stderr, \
            f"{m.name}'s refusal should name module 01 (tensor), its first unfinished module:\n{out.stderr}"
        assert "Traceback" not in out.stderr + out.stdout, out.stderr
        assert "--solutions" in out.stderr, f"the refusal should point at --solutions:\n{out.stderr}"
    assert not course.path("build/milestones").exists() or not list(course.path("build/milestones").glob("*.png")), \
        "a refused milestone must not run (no plot may be written)"


def test_refusal_names_the_first_unfinished_module(course):
    finish(course, "01_tensor")
    out = course.tito("milestone", "run", "perceptron")
    assert out.returncode == 1
    assert "needs module 03 (layers), which is not finished: tinytorch/ still holds its released stubs" \
        in out.stderr, f"with 01 finished, the perceptron waits for 03 (layers):\n{out.stderr}"
    out = course.tito("milestone", "run", "xor")
    assert "needs module 02 (activations)" in out.stderr, f"XOR needs 02 next:\n{out.stderr}"
    finish(course, "02_activations", ok=False)  # the files are there, but its last test failed
    out = course.tito("milestone", "run", "xor")
    assert "needs module 02 (activations), which is not finished: its last `tito test module 02`" in out.stderr \
        and "3 failing test(s)" in out.stderr, f"a failed last test keeps 02 unfinished:\n{out.stderr}"
    out = course.tito("milestone", "list")
    assert "waits for module 03 (layers)" in out.stdout and "waits for module 02 (activations)" in out.stdout, \
        out.stdout


def test_run_all_on_the_stubs_skips_each_with_its_reason(course):
    out = course.tito("milestone", "run", "all")
    assert out.returncode == 1, out.stdout
    for m in milestones():
        assert f"milestone {m.label}: skipped, it needs module 01 (tensor)" in out.stdout, out.stdout
    assert f"0 of {len(milestones())} milestones met their targets" in out.stdout, out.stdout


def test_unknown_milestone_lists_the_names(course):
    out = course.tito("milestone", "run", "alexnet")
    assert out.returncode == 2
    assert "unknown milestone 'alexnet'" in out.stderr and "perceptron" in out.stderr, out.stderr


@pytest.mark.parametrize("name", FAST)
def test_fast_milestone_meets_its_target_on_the_solutions(course, name):
    out = course.tito("milestone", "run", name, "--solutions")
    assert out.returncode == 0, f"{name} --solutions should meet its target (exit 0):\n{out.stdout}\n{out.stderr[-2000:]}"
    assert "✓ target met" in out.stdout and "target: " in out.stdout, out.stdout
    record = json.loads(course.path(f"build/milestones/{name}.json").read_text())
    assert record["met"] is True, record
    plot = course.path("build/milestones") / next(m.path.stem for m in milestones() if m.name == name)
    png = plot.with_suffix(".png")
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"expected a PNG plot at {png}"
    assert f"plot:   {png}" in out.stdout, f"the run should say where its plot is ({png}):\n{out.stdout}"
    assert "\r" not in out.stderr and "/s]" not in out.stderr, \
        f"output to a pipe or a log gets no progress-bar frames (tqdm draws only on a terminal):\n{out.stderr[-500:]!r}"


def test_perceptron_runs_on_the_students_package_once_its_modules_are_finished(course):
    perceptron = next(m for m in milestones() if m.name == "perceptron")
    for slug in perceptron.modules:  # only those: every other module keeps its stubs
        finish(course, slug)
    out = course.tito("milestone", "list")
    assert "ready on your package" in out.stdout, out.stdout
    out = course.tito("milestone", "run", "perceptron")
    assert out.returncode == 0, f"the perceptron should run on the student's package:\n{out.stdout}\n{out.stderr[-2000:]}"
    assert "on your tinytorch" in out.stdout and "✓ target met" in out.stdout, out.stdout
    assert course.path("build/milestones/perceptron_1958.png").is_file()
    assert not course.path("build/solutions").exists(), "the student's run must not build the reference"


def test_milestones_import_only_tinytorch_and_plain_libraries():
    import ast
    import sys

    allowed = {"tinytorch", "numpy", "matplotlib", "tqdm"} | set(sys.stdlib_module_names)
    for m in milestones():
        tree = ast.parse(m.path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            bad = [t for t in tops if t not in allowed]
            assert not bad, (f"{m.path.name}, line {node.lineno} imports {bad}: a milestone is a user's program "
                             f"and imports only tinytorch, numpy, matplotlib, tqdm and the standard library")


def test_a_milestone_runs_with_one_thread_per_pool_unless_told_otherwise(tmp_path, monkeypatch):
    from tito.milestones import Milestone, _run_one
    from tito.testing import THREAD_VARS

    script = tmp_path / "threads_2000.py"
    script.write_text(
        "import json, os\n"
        f"seen = {{v: os.environ.get(v) for v in {THREAD_VARS!r}}}\n"
        "out = os.path.join(os.environ['TINYTORCH_MILESTONES_OUT'], 'threads.json')\n"
        "open(out, 'w').write(json.dumps({'result': json.dumps(seen), 'met': True}))\n")
    for var in THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    monkeypatch.delenv("TITO_BUILD_DIR", raising=False)
    milestone = Milestone("threads", script, "threads", 2000, (), "", "")
    seen = json.loads(_run_one(tmp_path, milestone, tmp_path)["result"])
    assert seen == {**{v: "1" for v in THREAD_VARS}, "OPENBLAS_NUM_THREADS": "3"}, (
        f"every thread pool at one thread, except one the user set: {seen}")


def test_the_transformer_counts_real_words_without_case_and_without_a_cut_last_word():
    import importlib.util

    spec = importlib.util.spec_from_file_location("transformer_2017", ROOT / "milestones" / "transformer_2017.py")
    fables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fables)
    corpus = "The Fox saw the Grapes. The Crow, too."
    assert fables.real_words("the fox sww grapes, crow", corpus) == (3, 4), "crow is cut off: four words, three real"
    assert fables.real_words("THE CROW too ", corpus) == (3, 3), "case does not matter; a final space ends a word"
    assert fables.real_words("", corpus) == (0, 0)

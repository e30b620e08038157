"""The tito CLI, run for real on a throwaway copy of the course."""
import re
import subprocess
import sys

import nbformat
import pytest

# These run whole tito commands (full test suites, nbgrader): far longer than a unit test.
pytestmark = [pytest.mark.timeout(900), pytest.mark.command]

MODULE = "modules/01_tensor/tensor.ipynb"
PACKAGE_FILE = "tinytorch/_tensor.py"


def read_nb(course):
    return nbformat.read(course.path(MODULE), as_version=4)


def write_nb(course, nb):
    nbformat.write(nb, course.path(MODULE))


def first_export_solution_cell(nb):
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and cell.source.startswith("#| export") and \
                cell.metadata.get("nbgrader", {}).get("solution"):
            return i, cell
    raise AssertionError("module 01 has no exported solution cell")


def test_help_imports_nothing_heavy():
    code = ("import sys, tito.cli; tito.cli._parser().format_help(); "
            "print([m for m in ('numpy', 'jupytext', 'nbformat', 'pytest', 'nbclient') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_status_lists_twenty_modules(course):
    out = course.tito("status")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if re.match(r"^\d\d  ", line)]
    assert len(rows) == 20
    assert re.search(r"^01  tensor\s+available\s+stub", out.stdout, re.M)
    assert re.search(r"^20  capstone\s+available", out.stdout, re.M)


def test_unknown_module_lists_valid_ones(course):
    for args in (["test", "module", "99"], ["test", "tensr"], ["export", "0x"], ["module", "start", "42"]):
        out = course.tito(*args)
        assert out.returncode == 2, args
        assert "unknown module" in out.stderr and "01 (tensor)" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_planned_module_is_refused_clearly(course):
    import shutil

    shutil.rmtree(course.path("solutions/20_capstone"))  # a module without its solution is planned
    out = course.tito("test", "module", "20")
    assert out.returncode == 2
    assert "module 20 (capstone) is planned" in out.stderr and "Traceback" not in out.stderr


def test_module_name_forms_resolve(course):
    for spec in ("1", "01", "tensor", "01_tensor", "TENSOR"):
        out = course.tito("module", "start", spec)
        assert out.returncode == 0, out.stderr
        assert MODULE in out.stdout


def test_invalid_json_notebook_is_reported_and_left_alone(course):
    broken = course.path(MODULE).read_text()[:-40]
    course.path(MODULE).write_text(broken)
    before = course.path(PACKAGE_FILE).read_text()
    out = course.tito("test", "module", "01")
    assert out.returncode == 2
    assert "is not a valid notebook" in out.stderr and "JSON is broken at line" in out.stderr
    assert "Traceback" not in out.stderr
    assert course.path(MODULE).read_text() == broken
    assert course.path(PACKAGE_FILE).read_text() == before


def test_syntax_error_names_the_cell(course):
    nb = read_nb(course)
    index, cell = first_export_solution_cell(nb)
    cell.source += "\n\ndef broken(:\n    pass\n"
    write_nb(course, nb)
    before = course.path(PACKAGE_FILE).read_text()
    out = course.tito("export", "01")
    assert out.returncode == 2
    grade_id = cell.metadata["nbgrader"]["grade_id"]
    assert f"cell {index + 1} ({grade_id}): syntax error on line" in out.stderr, out.stderr
    assert "def broken(:" in out.stderr and "Traceback" not in out.stderr
    assert course.path(PACKAGE_FILE).read_text() == before


def test_export_directive_pointing_nowhere(course):
    nb = read_nb(course)
    default = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("#| default_exp"))
    default.source = "# (the default_exp line was deleted)"
    write_nb(course, nb)
    out = course.tito("export", "01")
    assert out.returncode == 2
    assert "'#| export' points nowhere" in out.stderr and "Traceback" not in out.stderr

    default.source = "#| default_exp somewhere.else"
    write_nb(course, nb)
    out = course.tito("export", "01")
    assert out.returncode == 2
    assert "tinytorch/somewhere/else.py" in out.stderr and "does not own" in out.stderr


def test_unknown_directive(course):
    nb = read_nb(course)
    _, cell = first_export_solution_cell(nb)
    cell.source = cell.source.replace("#| export", "#| exprot", 1)
    write_nb(course, nb)
    out = course.tito("export", "01")
    assert out.returncode == 2 and "unknown directive '#| exprot'" in out.stderr


def test_reset_backs_up_first(course):
    nb = read_nb(course)
    nb.cells.append(nbformat.v4.new_markdown_cell("my precious notes"))
    write_nb(course, nb)
    refused = course.tito("module", "reset", "01")  # no terminal to confirm on, no --yes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert "my precious notes" in course.path(MODULE).read_text()
    out = course.tito("module", "reset", "01", "--yes")
    assert out.returncode == 0, out.stderr
    match = re.search(r"backed up your notebook to (\S+\.ipynb)", out.stdout)
    assert match, out.stdout
    assert "my precious notes" in course.path(match.group(1)).read_text()
    assert "my precious notes" not in course.path(MODULE).read_text()
    assert course.tito("release", "--check").returncode == 0


def test_release_check_catches_unreleased_solution_edit(course):
    assert course.tito("release", "--check").returncode == 0
    solution = course.path("solutions/01_tensor/tensor.py")
    solution.write_text(solution.read_text() + "\n# %% [markdown]\n# A new paragraph.\n")
    out = course.tito("release", "--check")
    assert out.returncode == 1 and MODULE in out.stdout
    assert course.tito("release").returncode == 0
    assert course.tito("release", "--check").returncode == 0
    assert "A new paragraph." in course.path(MODULE).read_text()


def test_untouched_notebook_fails_pointing_into_it(course):
    out = course.tito("test", "module", "01")
    assert out.returncode == 1
    assert f"not implemented yet: write it in {MODULE}" in out.stdout
    assert f"({MODULE}, cell " in out.stdout
    assert re.search(r"tested against your notebook: 0 passed, \d+ failed", out.stdout)
    assert re.search(r"Predictions written: 0 of \d+\. They are not graded", out.stdout), \
        "an untouched notebook's predictions are all unwritten, and tito says so"


def test_solutions_pass_without_touching_student_files(course):
    nb_before = course.path(MODULE).read_text()
    pkg_before = course.path(PACKAGE_FILE).read_text()
    out = course.tito("test", "module", "01", "--solutions")
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"tested against the reference solutions: \d+ passed, 0 failed", out.stdout)
    assert course.path(MODULE).read_text() == nb_before
    assert course.path(PACKAGE_FILE).read_text() == pkg_before
    built = course.path("build/solutions/" + PACKAGE_FILE).read_text()
    assert "solutions/01_tensor/tensor.py" in built.splitlines()[0]


def _solved_notebook(course):
    import jupytext

    nb = jupytext.read(course.path("solutions/01_tensor/tensor.py"))
    for cell in nb.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    return nb


def test_completed_notebook_passes_and_status_shows_it(course):
    write_nb(course, _solved_notebook(course))
    out = course.tito("test", "01")
    assert out.returncode == 0, out.stdout[-3000:]
    status = course.tito("status").stdout
    assert re.search(r"^01  tensor\s+available\s+exported\s+passed", status, re.M), status


def test_endless_loop_at_import_is_reported(course):
    nb = _solved_notebook(course)
    nb.cells.append(nbformat.v4.new_code_cell("#| export\nwhile True:\n    pass"))
    write_nb(course, nb)
    out = course.tito("test", "01", TITO_IMPORT_TIMEOUT="3")
    assert out.returncode == 1
    assert "did not finish in 3 s" in out.stdout and "endless loop" in out.stdout


def test_endless_loop_in_a_function_stops_the_run_and_names_it(course):
    nb = _solved_notebook(course)
    for cell in nb.cells:
        match = re.search(r"^( *)def item\(self[^)]*\)[^:]*:\n", cell.source, re.M)
        if match:
            body = match.group(1) + "    "
            cell.source = cell.source[:match.end()] + f"{body}while True:\n{body}    pass\n" + cell.source[match.end():]
            break
    else:
        raise AssertionError("no Tensor.item in module 01")
    write_nb(course, nb)
    out = course.tito("test", "01", TITO_TEST_TIMEOUT="2")
    assert out.returncode == 1
    assert re.search(r"ran past its time limit while `\w*\.item` was running", out.stdout), out.stdout[-3000:]
    assert out.stdout.count("Timeout >") <= 1  # one timeout, not one per test that calls item()


def test_doctor_flags_a_shadowing_tinytorch(course, tmp_path):
    fake = tmp_path / "elsewhere" / "tinytorch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    out = course.tito("doctor", first_on_path=fake.parent)
    assert out.returncode == 1
    assert "✗ `import tinytorch` loads" in out.stdout and "fix: run pip install -e ." in out.stdout
    out = course.tito("doctor")
    assert "✓ `import tinytorch` loads" in out.stdout, out.stdout


def test_release_never_overwrites_a_notebook_without_a_backup(course):
    nb = read_nb(course)
    nb.cells.append(nbformat.v4.new_markdown_cell("student work in progress"))
    write_nb(course, nb)
    out = course.tito("release")
    assert out.returncode == 0, out.stderr
    match = re.search(rf"backed up {MODULE} to (\S+\.ipynb)", out.stdout)
    assert match, out.stdout
    assert "student work in progress" in course.path(match.group(1)).read_text()


def test_status_counts_the_stubs_left(course):
    nb = read_nb(course)
    solved = _solved_notebook(course)
    index, _ = first_export_solution_cell(nb)
    nb.cells[index] = solved.cells[index]
    write_nb(course, nb)
    marker = f"is not implemented yet: write it in {MODULE}"
    files = [PACKAGE_FILE, "tinytorch/_strided.py"]  # every package file module 01 exports to

    def stubs():
        return sum(course.path(f).read_text().count(marker) for f in files)

    released_stubs = stubs()
    assert course.tito("export", "01").returncode == 0
    left = stubs()
    assert 0 < left < released_stubs
    status = course.tito("status").stdout
    assert re.search(rf"^01  tensor\s+available\s+{left} stubs left", status, re.M), status

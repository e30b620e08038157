"""`tito grade` autogrades simulated submissions of module 01 end to end with nbgrader."""
import csv
import re

import jupytext
import nbformat
import pytest

# These run whole tito commands (full test suites, nbgrader): far longer than a unit test.
pytestmark = pytest.mark.timeout(900)

SLUG, NAME = "01_tensor", "tensor"


def _graded_cells(nb):
    return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]


def test_grade_simulated_submissions(course, tmp_path):
    subs = tmp_path / "submissions"
    released = nbformat.read(course.path(f"modules/{SLUG}/{NAME}.ipynb"), as_version=4)
    solved = jupytext.read(course.path(f"solutions/{SLUG}/{NAME}.py"))
    for cell in solved.cells:
        cell.metadata.pop("lines_to_next_cell", None)
    total = sum(c.metadata["nbgrader"]["points"] for c in _graded_cells(solved))

    def submit(student, nb):
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / f"{NAME}.ipynb")

    submit("complete", solved)
    submit("untouched", released)

    # Edits every test cell to pass trivially: nbgrader restores them from the source.
    cheat = nbformat.from_dict(nbformat.reads(nbformat.writes(released), as_version=4))
    for cell in _graded_cells(cheat):
        cell.source = "pass"
    submit("edits_tests", cheat)

    # A complete notebook whose first graded test cell was deleted gets no credit for it.
    deleted = nbformat.from_dict(nbformat.reads(nbformat.writes(solved), as_version=4))
    first = _graded_cells(deleted)[0]
    lost = first.metadata["nbgrader"]["points"]
    deleted.cells.remove(first)
    submit("deletes_a_test", deleted)

    # An endless loop before the first solution's code: the per-cell timeout stops it, the
    # rest of the notebook still runs, and that solution's tests earn nothing.
    looping = nbformat.from_dict(nbformat.reads(nbformat.writes(solved), as_version=4))
    for cell in looping.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = "while True:\n    pass\n\n" + cell.source
            break
    submit("loops", looping)

    out = course.tito("grade", "01", str(subs), "--timeout", "20", timeout=1200)
    assert out.returncode == 0, out.stdout + out.stderr
    csv_path = re.search(r"grades: (\S+)", out.stdout).group(1)
    with open(csv_path, newline="") as handle:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"]))
                  for row in csv.DictReader(handle) if row["assignment"] == SLUG}
    assert scores["complete"] == (total, total)
    assert scores["untouched"] == (0.0, total)
    assert scores["edits_tests"] == (0.0, total)
    assert scores["deletes_a_test"][0] <= total - lost
    assert scores["loops"][0] < total

"""tito test reminds a student of the predictions still unwritten: the notebook's
`predicted_...` variables counted as written or not (tito/notebook.py predictions)."""
import nbformat

from tito.notebook import predictions


def test_predictions_counts_the_guesses_written():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("predicted_bytes = None  # your number\npredicted_ratio = 3.5"),
        nbformat.v4.new_markdown_cell("predicted_in_prose = 1"),
        nbformat.v4.new_code_cell('predicted_state = {"SGD": None, "Adam": 2.0}\npredicted_empty = {"SGD": None}'),
        nbformat.v4.new_code_cell("print(predicted_ratio)\nx = predicted_ratio * 2"),
        nbformat.v4.new_code_cell("predicted_broken = (  # a cell that does not parse is skipped"),
    ])
    assert predictions(nb) == (2, 4), "written: ratio and the dict with a number; asked: four names"

"""The hand-written files of PyTorch's spellings (tinytorch/_tensor_extras.py, functional.py,
_out_of_scope.py): the parity table of tests/01_tensor/test_pytorch_surface.py has a row for
every spelling, and what the course leaves out says so. Neither needs a module's code."""
import importlib.util
import warnings
from pathlib import Path

import pytest

import tinytorch as tt

_TABLE = Path(__file__).resolve().parents[1] / "01_tensor" / "test_pytorch_surface.py"
_spec = importlib.util.spec_from_file_location("pytorch_surface_table", _TABLE)
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)
SURFACE = table.SURFACE


def test_the_table_has_a_row_for_every_spelling():
    """Each public name the spelling files add is the name of a row (before any "(...)")."""
    import tinytorch._tensor_extras as extras
    import tinytorch.functional as functional

    added = {f"Tensor.{n}" for n in vars(extras._TensorExtras) if not n.startswith("_")}
    added |= set(functional.__all__) - {"tanh", "sigmoid", "relu", "softmax", "log_softmax",  # module 02's
                                         "randperm", "multinomial"}  # random draws: tests/01_tensor tests their properties
    rows = {name.split("(")[0] for name in SURFACE}
    assert not added - rows, f"spellings no row of the table calls: {sorted(added - rows)}"


def test_what_the_course_leaves_out_says_so():
    with pytest.raises(AttributeError, match="half precision"):
        tt.float16
    with pytest.raises(AttributeError, match="distributed"):
        tt.distributed
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'$"):
        tt.no_such_name
    model = object()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tt.compile(model) is model
    assert any("unchanged" in str(w.message) for w in caught)


def test_a_star_import_replaces_no_python_builtin():
    """`from tinytorch import *` in a notebook must leave sum, max, float, ... Python's own."""
    import builtins

    shadowed = sorted(name for name in tt.__all__ if hasattr(builtins, name))
    assert not shadowed, f"tinytorch.__all__ would replace these builtins on a star import: {shadowed}"
    assert tt.max is not builtins.max and tt.float is tt.float32, "they stay reachable as tinytorch.max, ..."

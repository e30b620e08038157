"""ModuleDict (provided over the student's Module): children by key, in insertion order,
with PyTorch's dictionary operations; the parity test compares names and outputs."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


def test_entries_are_children_named_by_key_in_insertion_order():
    d = nn.ModuleDict({"b": nn.Linear(2, 2), "a": nn.Linear(2, 1)})
    assert list(d.keys()) == ["b", "a"] and list(d) == ["b", "a"]
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias", "a.weight", "a.bias"]
    assert list(d.state_dict()) == ["b.weight", "b.bias", "a.weight", "a.bias"]
    assert len(d) == 2 and "a" in d and "c" not in d


def test_setitem_update_pop_and_del_change_the_registered_children():
    d = nn.ModuleDict()
    d["x"] = nn.Linear(2, 2)
    d.update([("y", nn.Linear(2, 3)), ("z", nn.ReLU())])
    assert [k for k, _ in d.items()] == ["x", "y", "z"]
    assert len(list(d.parameters())) == 4
    popped = d.pop("y")
    assert isinstance(popped, nn.Linear) and list(d) == ["x", "z"]
    del d["x"]
    assert list(d) == ["z"] and list(d.parameters()) == []


def test_bad_entries_are_refused_with_clear_errors():
    d = nn.ModuleDict()
    with pytest.raises(TypeError, match="not a Module"):
        d["w"] = np.zeros(3)
    with pytest.raises(TypeError, match="pair"):
        d.update(["ab"])
    with pytest.raises(KeyError):
        d["missing"]


def test_names_and_outputs_equal_pytorch(torch):
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    ours = nn.ModuleDict({"digit": nn.Linear(4, 10), "parity": nn.Linear(4, 2)})
    theirs = torch.nn.ModuleDict({"digit": torch.nn.Linear(4, 10), "parity": torch.nn.Linear(4, 2)})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.keys()) == list(theirs.keys())
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    for task in ("digit", "parity"):
        with torch.no_grad():
            expected = theirs[task](torch.tensor(x)).numpy()
        np.testing.assert_allclose(ours[task](tt.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)

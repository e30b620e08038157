"""PyTorch's nested repr, and module 02's activations as layers."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch import nn

A = np.random.default_rng(3).standard_normal((3, 4)) * 3


def test_repr_nested_format():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    assert repr(model) == "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)"
    outer = nn.Sequential(nn.Sequential(nn.Linear(1, 1, bias=False)), nn.Identity())
    assert repr(outer) == ("Sequential(\n  (0): Sequential(\n    (0): Linear(in_features=1, out_features=1, "
                           "bias=False)\n  )\n  (1): Identity()\n)")
    assert repr(nn.Sequential()) == "Sequential()"


def test_repr_extra_lines_and_children_mix():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def extra_repr(self):
            return "custom=1\nsecond=2"

    assert repr(Block()) == ("Block(\n  custom=1\n  second=2\n  (fc): Linear(in_features=2, out_features=2, "
                             "bias=True)\n)")


def test_repr_matches_torch(torch):
    tn = torch.nn
    ours = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Sequential(nn.Linear(8, 8, bias=False), nn.GELU(),
                         nn.GELU(approximate="tanh")), nn.Sigmoid(), nn.Tanh(), nn.Softmax(dim=1),
                         nn.LogSoftmax(dim=-1), nn.Identity(), nn.ReLU(), nn.LeakyReLU())
    theirs = tn.Sequential(tn.Linear(4, 8), tn.LeakyReLU(0.2), tn.Sequential(tn.Linear(8, 8, bias=False), tn.GELU(),
                           tn.GELU(approximate="tanh")), tn.Sigmoid(), tn.Tanh(), tn.Softmax(dim=1),
                           tn.LogSoftmax(dim=-1), tn.Identity(), tn.ReLU(), tn.LeakyReLU())
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("layer, fn", [
    (lambda: nn.ReLU(), F.relu),
    (lambda: nn.LeakyReLU(), F.leaky_relu),
    (lambda: nn.LeakyReLU(0.3), lambda t: F.leaky_relu(t, 0.3)),
    (lambda: nn.Sigmoid(), F.sigmoid),
    (lambda: nn.Tanh(), F.tanh),
    (lambda: nn.GELU(), F.gelu),
    (lambda: nn.GELU("tanh"), lambda t: F.gelu(t, approximate="tanh")),
    (lambda: nn.Softmax(dim=0), lambda t: F.softmax(t, 0)),
    (lambda: nn.LogSoftmax(-1), lambda t: F.log_softmax(t, -1)),
    (lambda: nn.Identity(54, unused="x"), lambda t: t),
])
def test_activation_layers_equal_functions(layer, fn):
    m = layer()
    assert isinstance(m, nn.Module) and list(m.parameters()) == []
    x = tt.tensor(A)
    np.testing.assert_array_equal(m(x).numpy(), fn(x).numpy())
    w = tt.tensor(A, requires_grad=True)
    assert m(w).requires_grad


@pytest.mark.parametrize("name, args", [("ReLU", ()), ("LeakyReLU", (0.05,)), ("Sigmoid", ()), ("Tanh", ()),
                                        ("GELU", ()), ("GELU", ("tanh",)), ("Softmax", (1,)), ("LogSoftmax", (0,))])
def test_activation_layers_parity_with_torch(torch, name, args):
    ours = getattr(nn, name)(*args)
    theirs = getattr(torch.nn, name)(*args)
    np.testing.assert_allclose(ours(tt.tensor(A)).numpy(), theirs(torch.tensor(A)).numpy(), rtol=1e-12, atol=1e-15)
    assert repr(ours) == repr(theirs)

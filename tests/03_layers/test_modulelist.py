"""ModuleList: registration as children, indexing, slicing, len/iter, append/extend."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        for layer in self.layers:
            x = nn.functional.relu(layer(x))
        return self.out(x)


def test_entries_are_registered_children():
    tt.manual_seed(0)
    net = Stack()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                     "layers.2.weight", "layers.2.bias", "out.weight", "out.bias"]
    assert len(list(net.parameters())) == 8
    assert list(net.layers._modules) == ["0", "1", "2"]
    assert [n for n, _ in net.layers.named_children()] == ["0", "1", "2"]
    assert "layers.1.weight" in net.state_dict()


def test_indexing_len_iter():
    mods = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    ml = nn.ModuleList(mods)
    assert len(ml) == 3
    assert ml[0] is mods[0] and ml[2] is mods[2] and ml[-1] is mods[2] and ml[-3] is mods[0]
    assert list(ml) == mods
    with pytest.raises(IndexError):
        ml[3]
    with pytest.raises(IndexError):
        ml[-4]


def test_slicing_returns_modulelist_of_the_same_modules():
    mods = [nn.Linear(2, 2) for _ in range(5)]
    ml = nn.ModuleList(mods)
    part = ml[1:4]
    assert isinstance(part, nn.ModuleList) and len(part) == 3
    assert part[0] is mods[1] and part[2] is mods[3]
    assert list(part._modules) == ["0", "1", "2"]
    evens = ml[::2]
    assert [m for m in evens] == [mods[0], mods[2], mods[4]]
    assert len(ml[10:]) == 0


def test_append_and_extend():
    ml = nn.ModuleList()
    assert len(ml) == 0 and list(ml.parameters()) == []
    a, b, c = nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1)
    assert ml.append(a) is ml
    assert ml.extend([b, c]) is ml
    assert len(ml) == 3 and ml[1] is b and ml[2] is c
    assert list(ml._modules) == ["0", "1", "2"]
    assert [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with pytest.raises(TypeError):
        ml.append("not a module")


def test_train_eval_and_forward_through_loop():
    tt.manual_seed(1)
    net = Stack(2)
    net.eval()
    assert all(not m.training for m in net.layers)
    x = tt.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    h = x.numpy()
    for layer in net.layers:
        h = h @ layer.weight.numpy().T + layer.bias.numpy()
        h = np.maximum(h, 0)
    ref = h @ net.out.weight.numpy().T + net.out.bias.numpy()
    np.testing.assert_allclose(net(x).numpy(), ref, rtol=1e-5, atol=1e-6)


def test_shared_module_counted_once():
    lin = nn.Linear(3, 3)
    ml = nn.ModuleList([lin, lin, nn.Linear(3, 3)])
    assert len(ml) == 3 and ml[0] is ml[1]
    assert len(list(ml.parameters())) == 4

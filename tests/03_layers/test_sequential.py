"""Sequential: forward chaining, indexing, slicing, len/iter/append, names."""
from collections import OrderedDict

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn

X = tt.tensor(np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32))


def build():
    tt.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2), nn.LogSoftmax(dim=1))


def test_forward_chains_the_modules():
    seq = build()
    manual = X
    for m in [seq[0], seq[1], seq[2], seq[3]]:
        manual = m(manual)
    out = seq(X)
    assert out.shape == (6, 2)
    np.testing.assert_allclose(out.numpy(), manual.numpy(), rtol=1e-6)
    h = np.maximum(X.numpy() @ seq[0].weight.numpy().T + seq[0].bias.numpy(), 0)
    z = h @ seq[2].weight.numpy().T + seq[2].bias.numpy()
    ref = z - z.max(1, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_indexing_len_iter():
    seq = build()
    assert len(seq) == 4
    assert isinstance(seq[0], nn.Linear) and seq[-1] is seq[3] and seq[-4] is seq[0]
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Linear", "LogSoftmax"]
    with pytest.raises(IndexError):
        seq[4]
    with pytest.raises(IndexError):
        seq[-5]


def test_slicing_returns_sequential_sharing_modules():
    seq = build()
    head = seq[:2]
    tail = seq[2:]
    assert isinstance(head, nn.Sequential) and isinstance(tail, nn.Sequential)
    assert head[0] is seq[0] and tail[0] is seq[2]
    assert list(tail._modules) == ["2", "3"]
    np.testing.assert_allclose(tail(head(X)).numpy(), seq(X).numpy(), rtol=1e-6)
    assert len(seq[::2]) == 2 and seq[::2][1] is seq[2]


def test_parameter_names_and_append():
    seq = build()
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert seq.append(nn.Identity()) is seq and len(seq) == 5 and list(seq._modules)[-1] == "4"
    np.testing.assert_allclose(seq(X).numpy(), seq[:4](X).numpy())


def test_ordered_dict_names_and_empty():
    seq = nn.Sequential(OrderedDict([("hidden", nn.Linear(4, 3)), ("act", nn.Tanh()), ("out", nn.Linear(3, 1))]))
    assert [n for n, _ in seq.named_parameters()] == ["hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    assert seq.hidden is seq[0] and seq(X).shape == (6, 1)
    empty = nn.Sequential()
    assert len(empty) == 0 and empty(X) is X


def test_nested_sequential_names():
    seq = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1))))
    assert [n for n, _ in seq.named_parameters()][-2:] == ["1.1.0.weight", "1.1.0.bias"]
    assert seq(X).shape == (6, 1)


def test_sequential_init_registers_through_add_module():
    with pytest.raises(TypeError):
        nn.Sequential(nn.Linear(2, 2), 3)  # add_module refuses a non-Module
    with pytest.raises(TypeError):
        nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("bad", "relu")]))
    with pytest.raises(KeyError):
        nn.Sequential(OrderedDict([("a.b", nn.Linear(2, 2))]))  # and a dotted name

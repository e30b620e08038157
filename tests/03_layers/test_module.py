"""Module: registration, tree walks with dotted names, modes, gradients, dtype, errors."""
import copy

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


class Affine(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.scale = nn.Parameter(np.ones(n, dtype=np.float32))
        self.shift = nn.Parameter(np.zeros(n, dtype=np.float32))

    def forward(self, x):
        return x * self.scale + self.shift


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 3)
        self.act = nn.ReLU()
        self.register_buffer("steps", tt.zeros(1))

    def forward(self, x):
        return self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
        self.temperature = nn.Parameter([1.0])
        self.name = "net"

    def forward(self, x):
        return self.head(self.encoder(x)) * self.temperature


NET_PARAMS = ["temperature", "encoder.fc.weight", "encoder.fc.bias", "head.0.weight", "head.0.bias",
              "head.2.weight", "head.2.bias"]


def test_module_setattr_registers_attributes_in_order():
    m = Affine()
    assert list(m._parameters) == ["scale", "shift"]
    assert m.scale is m._parameters["scale"] and "scale" not in m.__dict__
    assert m.training is True
    net = Net()
    assert list(net._modules) == ["encoder", "head"] and net.encoder is net._modules["encoder"]
    assert net.name == "net" and "name" not in net._parameters
    assert isinstance(net.encoder.fc, nn.Linear)


def test_named_parameters_nested_with_dotted_names():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == NET_PARAMS
    params = list(net.parameters())
    assert len(params) == 7 and all(isinstance(p, nn.Parameter) for p in params)
    assert params[1] is net.encoder.fc.weight and params[-1] is net.head[2].bias
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["temperature"]
    assert [n for n, _ in net.encoder.named_parameters(prefix="encoder")] == ["encoder.fc.weight", "encoder.fc.bias"]
    assert sum(p.numel() for p in net.parameters()) == 1 + 6 + 3 + 9 + 3 + 3 + 1


def test_named_modules_and_children():
    net = Net()
    assert [n for n, _ in net.named_children()] == ["encoder", "head"]
    assert list(net.children()) == [net.encoder, net.head]
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "encoder", "encoder.fc", "encoder.act", "head", "head.0", "head.1", "head.2"]
    assert list(net.modules())[0] is net and len(list(net.modules())) == 8


def test_named_members_reads_the_registry_asked_for():
    net = Net()
    assert [n for n, _ in net.named_buffers()] == ["encoder.steps"]
    assert list(net.buffers())[0] is net.encoder.steps
    assert "encoder.steps" not in dict(net.named_parameters())


def test_named_modules_walks_a_shared_module_once():
    net = Net()
    net.encoder2 = net.encoder  # the same module under two names
    assert [n for n, _ in net.named_modules()].count("encoder2") == 0
    assert len(list(net.named_modules(remove_duplicate=False))) == 11
    assert len(list(net.parameters())) == 7


def test_named_members_skips_an_unset_parameter():
    m = Affine()
    m.shift = None
    assert [n for n, _ in m.named_parameters()] == ["scale"]
    assert len(list(m.parameters())) == 1


def test_named_members_recurse_false_lists_only_the_modules_own():
    net = Net()
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["temperature"]
    assert [n for n, _ in net.encoder.named_buffers(recurse=False)] == ["steps"]
    assert list(net.named_buffers(recurse=False)) == []


def test_named_members_yields_a_tied_parameter_once():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight  # tied weights
    seq = nn.Sequential(a, b)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "1.bias"]


def test_module_setattr_reassignment_and_none():
    net = Net()
    old = net.encoder.fc
    net.encoder.fc = nn.Linear(2, 3, bias=False)
    assert net.encoder.fc is not old and list(net.encoder._modules) == ["fc", "act"], "keeps its position"
    assert "encoder.fc.bias" not in dict(net.named_parameters())
    net.temperature = None
    assert net.temperature is None and "temperature" in net._parameters
    assert "temperature" not in dict(net.named_parameters())
    net.head = None
    assert net.head is None and [n for n, _ in net.named_children()] == ["encoder"]
    m = Affine()
    m.extra = 5
    m.extra = nn.Parameter([1.0])  # a plain attribute may become a parameter
    assert "extra" in m._parameters and "extra" not in m.__dict__
    del m.extra
    assert "extra" not in m._parameters
    with pytest.raises(AttributeError):
        m.extra


def test_module_setattr_assignment_errors():
    m = Affine()
    with pytest.raises(TypeError, match="scale"):
        m.scale = tt.tensor([1.0, 1.0])
    net = Net()
    with pytest.raises(TypeError, match="encoder"):
        net.encoder = "not a module"
    with pytest.raises(TypeError, match="steps"):
        net.encoder.steps = 3

    class Forgot(nn.Module):
        def __init__(self, what):
            if what == "param":
                self.w = nn.Parameter([1.0])
            else:
                self.sub = nn.ReLU()

    for what in ("param", "module"):
        with pytest.raises(AttributeError, match="__init__"):
            Forgot(what)
    with pytest.raises(KeyError):
        m.register_parameter("a.b", nn.Parameter([1.0]))
    with pytest.raises(TypeError):
        m.register_parameter("w", tt.tensor([1.0]))
    with pytest.raises(TypeError):
        nn.Sequential(nn.ReLU(), 3)
    with pytest.raises(AttributeError, match="nothing_here"):
        m.nothing_here


def test_module_setattr_replaces_a_buffer_in_its_registry():
    enc = Encoder()
    new = tt.ones(1)
    enc.steps = new
    assert enc.steps.tolist() == [1.0]
    assert enc._buffers["steps"] is new, "the buffer registry holds the new tensor"
    assert "steps" not in vars(enc), "a buffer is not also an ordinary attribute"
    assert enc.state_dict()["steps"].tolist() == [1.0]


def test_module_setattr_keeps_a_non_persistent_buffer_non_persistent():
    enc = Encoder()
    enc.register_buffer("cache", tt.zeros(2), persistent=False)
    enc.cache = tt.ones(2)
    assert enc._buffers["cache"].tolist() == [1.0, 1.0]
    assert "cache" not in enc.state_dict(), "reassigning a persistent=False buffer must not make it persistent"


def test_module_setattr_none_keeps_the_place_of_a_middle_parameter():
    m = Affine()
    m.extra = nn.Parameter([1.0])
    m.shift = None
    assert list(m._parameters) == ["scale", "shift", "extra"]
    assert [n for n, _ in m.named_parameters()] == ["scale", "extra"]
    m.shift = nn.Parameter([2.0])
    assert list(m._parameters) == ["scale", "shift", "extra"], "re-set, it is back in its place"


def test_buffers_non_persistent():
    enc = Encoder()
    enc.register_buffer("cache", tt.zeros(2), persistent=False)
    assert [n for n, _ in enc.named_buffers()] == ["steps", "cache"]
    assert "cache" not in enc.state_dict() and "steps" in enc.state_dict()


def test_forward_and_call():
    m = Affine()
    x = tt.tensor([[1.0, 2.0]])
    assert m(x).tolist() == [[1.0, 2.0]]
    assert Net()(x).shape == (1, 1)

    class NoForward(nn.Module):
        pass

    with pytest.raises(NotImplementedError, match="forward"):
        NoForward()(x)


def test_train_reaches_a_child_that_overrides_train():
    calls = []

    class Logged(Affine):
        def train(self, mode=True):
            calls.append(mode)
            return super().train(mode)

    net = Net()
    net.encoder.extra = Logged()
    net.eval()
    assert calls == [False], "the child's own train method runs (once) when its ancestor switches mode"
    assert not net.encoder.extra.training


def test_train_eval_recursive_and_return_self():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    assert net.head.train() is net.head
    assert net.head[1].training and not net.encoder.fc.training and not net.training
    assert net.train(True) is net and all(m.training for m in net.modules())
    with pytest.raises(ValueError):
        net.train("yes")


def test_zero_grad_and_requires_grad_():
    net = Net()
    for p in net.parameters():
        p.grad = tt.ones(*p.shape)
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    assert net(tt.ones(4, 2)).grad_fn is None
    net.requires_grad_()
    assert net(tt.ones(4, 2)).requires_grad


def test_apply_visits_every_module_children_first():
    net = Net()
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Encoder", "Linear", "Tanh", "Linear", "Sequential", "Net"]
    net.apply(lambda m: nn.init.zeros_(m.weight) if isinstance(m, nn.Linear) else None)
    assert not net.head[2].weight.numpy().any()


def test_to_double_float_keep_parameter_objects():
    net = Net()
    before = list(net.parameters())
    assert net.double() is net
    after = list(net.parameters())
    assert all(a is b for a, b in zip(before, after))
    assert all(p.dtype == tt.float64 for p in after) and net.encoder.steps.dtype == tt.float64
    out = net(tt.ones(2, 2, dtype=tt.float64))
    assert out.dtype == tt.float64 and out.requires_grad
    net.float()
    assert all(p.dtype == tt.float32 and p.requires_grad for p in net.parameters())
    with pytest.raises(TypeError):
        net.to(tt.int64)


def test_deepcopy_gives_independent_model():
    net = Net()
    twin = copy.deepcopy(net)
    assert [n for n, _ in twin.named_parameters()] == NET_PARAMS
    x = tt.ones(3, 2)
    np.testing.assert_array_equal(twin(x).numpy(), net(x).numpy())
    assert twin.encoder.fc.weight._storage is not net.encoder.fc.weight._storage


def test_named_modules_skips_an_unset_child():
    net = Net()
    net.head = None
    assert [n for n, _ in net.named_modules()] == ["", "encoder", "encoder.fc", "encoder.act"]
    assert len(list(net.parameters())) == 3, "temperature and encoder.fc's weight and bias"

"""The activations (module 02) and losses (module 04) pass float64 gradcheck, with every
reduction, weights, pos_weight, ignore_index, label smoothing and K-dimensional inputs."""
import math

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch import autograd
from tinytorch.autograd import gradcheck


def leaf(shape, seed, scale=1.0):
    data = np.random.default_rng(seed).standard_normal(shape) * scale
    data[np.abs(data) < 0.05] = 0.3  # away from the kink of relu / leaky_relu at 0
    return tt.tensor(data, requires_grad=True)


ACTIVATIONS = {
    "relu": F.relu, "leaky_relu": lambda t: F.leaky_relu(t, 0.1), "leaky_relu default": F.leaky_relu,
    "sigmoid": F.sigmoid, "tanh": F.tanh, "gelu": F.gelu, "gelu tanh": lambda t: F.gelu(t, approximate="tanh"),
    "softmax last": lambda t: F.softmax(t, dim=-1), "softmax first": lambda t: F.softmax(t, dim=0),
    "log_softmax": lambda t: F.log_softmax(t, dim=1), "log_softmax first": lambda t: F.log_softmax(t, dim=0),
    "softmax 0-d": lambda t: F.softmax(t.sum(), dim=0),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations(name):
    assert gradcheck(ACTIVATIONS[name], [leaf((3, 4), 1, scale=2.0)]), name


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "softmax last", "log_softmax", "gelu"])
def test_activations_at_large_inputs(name):
    x = tt.tensor(np.array([[-30.0, -8.0, 0.5, 9.0, 40.0]]), requires_grad=True)
    assert gradcheck(ACTIVATIONS[name], [x]), name


@pytest.mark.parametrize("value", [0.0, 1.0, -2.0])
def test_exact_gelu_gradient_of_a_0d_tensor(value):
    """Phi(x) + x phi(x) at one number, in a 0-d float64 tensor (at 0 exactly 1/2)."""
    slope = 0.5 * math.erfc(-value / math.sqrt(2)) + value * math.exp(-value * value / 2) / math.sqrt(2 * math.pi)
    x = tt.tensor(value, dtype=tt.float64, requires_grad=True)
    F.gelu(x).backward()
    assert x.grad.shape == () and abs(x.grad.item() - slope) < 1e-15, f"gelu'({value}): got {x.grad}, expected {slope}"


def test_activation_layers_from_module_03():
    x = leaf((2, 5), 2)
    model = tt.nn.Sequential(tt.nn.ReLU(), tt.nn.Tanh(), tt.nn.Sigmoid(), tt.nn.GELU(),
                             tt.nn.LeakyReLU(0.2), tt.nn.Softmax(dim=1))
    assert gradcheck(model, [x])


def test_relu_gradient_at_exactly_zero_is_zero():
    """PyTorch's subgradient of relu at 0 is 0: an input of exactly 0 (or -0.0) gets no gradient."""
    x = tt.tensor(np.array([[-1.5, 0.0, 2.0], [0.0, 3.0, -0.0]]), requires_grad=True)
    upstream = np.array([[5.0, 7.0, 11.0], [13.0, 17.0, 19.0]])
    F.relu(x).backward(tt.tensor(upstream))
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0, 11.0], [0.0, 17.0, 0.0]],
                                  err_msg="relu's gradient: upstream where x > 0, and 0 at x = 0 and x = -0")
    x.grad = None
    tt.nn.ReLU()(x).sum().backward()  # the layer and the method record the same op
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(reduction):
    x, y = leaf((3, 4), 3), leaf((3, 4), 4)
    assert gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), [x, y])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", ["plain", "weight", "pos_weight", "both"])
def test_bce_with_logits(reduction, weighted):
    x = leaf((3, 4), 5, scale=3.0)
    target = tt.tensor(np.random.default_rng(6).uniform(0, 1, (3, 4)), requires_grad=True)
    weight = tt.tensor(np.random.default_rng(7).uniform(0.5, 2, (4,))) if weighted in ("weight", "both") else None
    pos_weight = tt.tensor(np.array([0.5, 1.0, 2.0, 3.0])) if weighted in ("pos_weight", "both") else None
    assert gradcheck(lambda a, t: F.binary_cross_entropy_with_logits(
        a, t, weight, reduction=reduction, pos_weight=pos_weight), [x, target])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", ["plain", "weight", "ignore", "weight+ignore"])
def test_nll_loss(reduction, options):
    logp = leaf((5, 4), 8)
    target = tt.tensor([3, 0, 2, 2, 1])
    if "ignore" in options:
        target = tt.tensor([3, -100, 2, -100, 1])
    weight = tt.tensor(np.array([0.5, 1.0, 2.0, 1.5])) if "weight" in options else None
    assert gradcheck(lambda a: F.nll_loss(a, target, weight, reduction=reduction), [logp])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_shapes(reduction):
    one = leaf((4,), 9)
    assert gradcheck(lambda a: F.nll_loss(a, tt.tensor(2), reduction=reduction), [one])
    kdim = leaf((2, 3, 2, 2), 10)
    target = tt.tensor(np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]]))
    assert gradcheck(lambda a: F.nll_loss(a, target, ignore_index=1, reduction=reduction), [kdim])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", ["plain", "weight", "ignore", "smoothing", "all"])
def test_cross_entropy(reduction, options):
    logits = leaf((4, 5), 11, scale=2.0)
    target = tt.tensor([4, 0, 2, 2]) if options in ("plain", "weight", "smoothing") else tt.tensor([4, 7, 2, 7])
    kwargs = {"reduction": reduction}
    if options in ("weight", "all"):
        kwargs["weight"] = tt.tensor(np.array([1.0, 0.5, 2.0, 1.0, 3.0]))
    if options in ("ignore", "all"):
        kwargs["ignore_index"] = 7
    if options in ("smoothing", "all"):
        kwargs["label_smoothing"] = 0.2
    assert gradcheck(lambda a: F.cross_entropy(a, target, **kwargs), [logits])


def test_cross_entropy_k_dimensional_and_loss_modules():
    logits = leaf((2, 3, 4), 12)
    target = tt.tensor(np.array([[0, 2, 1, 1], [2, 2, 0, 1]]))
    assert gradcheck(lambda a: F.cross_entropy(a, target), [logits])
    assert gradcheck(lambda a: tt.nn.CrossEntropyLoss(label_smoothing=0.1)(a, target), [logits])
    x, y = leaf((3,), 13), leaf((3,), 14)
    assert gradcheck(lambda a, b: tt.nn.MSELoss(reduction="sum")(a, b), [x, y])


_TARGET = tt.tensor(np.random.default_rng(16).uniform(0, 1, (2, 3)))

# One case per op of modules 01-04 (all of them, each with its rule), each using that op alone (x: any values, p: positive), so
# a failing gradcheck names the op whose rule is wrong: [op=div] is filed under _div_backward.
OP_CASES = {
    "add": lambda x, p: x + p, "sub": lambda x, p: x - p, "mul": lambda x, p: x * p,
    "div": lambda x, p: x / p, "pow": lambda x, p: p ** x, "neg": lambda x, p: -x,
    "abs": lambda x, p: x.abs(), "exp": lambda x, p: x.exp(), "log": lambda x, p: p.log(),
    "sqrt": lambda x, p: p.sqrt(), "clamp": lambda x, p: x.clamp(-0.5, 0.5),
    "where": lambda x, p: tt.where(x.detach() > 0, x, p),
    "to": lambda x, p: x.to(tt.float32).to(tt.float64) * 0 + x,  # float32 values: too coarse for gradcheck
    "contiguous": lambda x, p: x.T.contiguous(),
    "clone": lambda x, p: x.clone(), "transpose": lambda x, p: x.transpose(0, 1),
    "permute": lambda x, p: x.permute(1, 0), "view": lambda x, p: x.view(6),
    "reshape": lambda x, p: x.T.reshape(3, 2), "squeeze": lambda x, p: x.unsqueeze(0).squeeze(0),
    "unsqueeze": lambda x, p: x.unsqueeze(1), "expand": lambda x, p: x.unsqueeze(0).expand(2, 2, 3),
    "as_strided": lambda x, p: x.as_strided((2, 2), (1, 1), 0),
    "getitem": lambda x, p: x[tt.tensor([1, 1])][:, :2], "sum": lambda x, p: x.sum(1),
    "mean": lambda x, p: x.mean(1), "amax": lambda x, p: x.amax(1), "amin": lambda x, p: x.amin(1),
    "max": lambda x, p: x.max(1).values, "min": lambda x, p: x.min(1).values,
    "matmul": lambda x, p: x @ p.T, "cat": lambda x, p: tt.cat([x, p]),
    "stack": lambda x, p: tt.stack([x, p]), "relu": lambda x, p: F.relu(x),
    "leaky_relu": lambda x, p: F.leaky_relu(x), "sigmoid": lambda x, p: F.sigmoid(x),
    "tanh": lambda x, p: F.tanh(x), "gelu": lambda x, p: F.gelu(x),
    "softmax": lambda x, p: F.softmax(x, dim=1), "log_softmax": lambda x, p: F.log_softmax(x, dim=0),
    "mse_loss": lambda x, p: F.mse_loss(x, p),
    "binary_cross_entropy_with_logits": lambda x, p: F.binary_cross_entropy_with_logits(x, _TARGET),
    "nll_loss": lambda x, p: F.cross_entropy(x, tt.tensor([1, 2])),
}


def _leaves():
    rng = np.random.default_rng(15)
    return (tt.tensor(rng.standard_normal((2, 3)), requires_grad=True),
            tt.tensor(rng.uniform(0.5, 2.0, (2, 3)), requires_grad=True))


@pytest.mark.parametrize("op", sorted(OP_CASES))
def test_the_rule_of_each_op_of_modules_01_to_04_passes_gradcheck(op):
    assert op in autograd.BACKWARD_RULES, f"no backward rule is registered for {op!r}"
    a, pos = _leaves()
    out = OP_CASES[op](a, pos)
    recorded = {n.op for n in autograd.topological_order([out.grad_fn])}
    assert op in recorded, f"the case for {op!r} recorded only {sorted(recorded)}"
    assert gradcheck(OP_CASES[op], [a, pos]), f"gradcheck of {op!r}"


"""Values and gradients of tril/triu, maximum/minimum, flip, roll, cumsum, sort/topk and the
method forms (relu, sigmoid, tanh, clip) equal PyTorch's (float64); each passes gradcheck."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.autograd import gradcheck

DATA_RNG = np.random.default_rng(7)
A = DATA_RNG.standard_normal((3, 4))          # distinct values: no ties in sort/topk
B = DATA_RNG.standard_normal((4,))
T = np.array([[1.0, 3.0, 3.0], [2.0, -1.0, 2.0]])  # maximum/minimum ties split the gradient

OPS = {
    "tril": (lambda m, a: a.tril(), [A]),
    "tril(-1)": (lambda m, a: m.tril(a, -1), [A]),
    "triu(1)": (lambda m, a: a.triu(1), [A]),
    "maximum broadcast": (lambda m, a, b: m.maximum(a, b), [A, B]),
    "minimum broadcast": (lambda m, a, b: a.minimum(b), [A, B]),
    "maximum ties": (lambda m, a, b: m.maximum(a, b), [T, T[::-1].copy()]),
    "minimum ties": (lambda m, a, b: m.minimum(a, b), [T, T[::-1].copy()]),
    "flip(0)": (lambda m, a: a.flip(0), [A]),
    "flip(0, 1)": (lambda m, a: m.flip(a, (0, 1)), [A]),
    "roll(1, 1)": (lambda m, a: a.roll(1, 1), [A]),
    "roll((1, -2), (0, 1))": (lambda m, a: m.roll(a, (1, -2), (0, 1)), [A]),
    "roll flat": (lambda m, a: a.roll(5), [A]),
    "cumsum(0)": (lambda m, a: a.cumsum(0), [A]),
    "cumsum(-1)": (lambda m, a: m.cumsum(a, -1), [A]),
    "sort": (lambda m, a: a.sort().values, [A]),
    "sort(0, descending)": (lambda m, a: a.sort(dim=0, descending=True).values, [A]),
    "topk(2)": (lambda m, a: a.topk(2).values, [A]),
    "topk(2, dim=0, smallest)": (lambda m, a: m.topk(a, 2, dim=0, largest=False).values, [A]),
    "relu": (lambda m, a: a.relu(), [A]),
    "sigmoid": (lambda m, a: a.sigmoid(), [A]),
    "tanh": (lambda m, a: a.tanh(), [A]),
    "clip": (lambda m, a: a.clip(-0.5, 0.5), [A]),
}


@pytest.mark.parametrize("name", list(OPS), ids=list(OPS))
def test_values_and_gradients_equal_pytorch(rng, torch, name):
    fn, arrays = OPS[name]
    ours = [tt.tensor(a, dtype=tt.float64, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out, ref = fn(tt, *ours), fn(torch, *theirs)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, atol=0,
                               err_msg=f"{name}: values differ from PyTorch's")
    up = rng.standard_normal(tuple(ref.shape))
    out.backward(tt.tensor(up, dtype=tt.float64))
    ref.backward(torch.tensor(up, dtype=torch.float64))
    for i, (o, t) in enumerate(zip(ours, theirs)):
        assert o.grad is not None, f"{name}: no gradient for input {i}"
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14,
                                   err_msg=f"{name}: gradient of input {i} differs from PyTorch's")


@pytest.mark.parametrize("name", [n for n in OPS if "ties" not in n], ids=[n for n in OPS if "ties" not in n])
def test_gradcheck(name):
    fn, arrays = OPS[name]
    inputs = [tt.tensor(a, dtype=tt.float64, requires_grad=True) for a in arrays]
    assert gradcheck(lambda *xs: fn(tt, *xs), inputs), f"gradcheck of {name}"


def test_cumsum_gradient_is_a_reversed_cumsum():
    x = tt.tensor([1.0, 2.0, 3.0, 4.0], dtype=tt.float64, requires_grad=True)
    x.cumsum(0).backward(tt.tensor([1.0, 10.0, 100.0, 1000.0], dtype=tt.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [1111.0, 1110.0, 1100.0, 1000.0],
                                  err_msg="x[i] collects the upstream gradients from i to the end")


def test_topk_gradient_lands_on_the_chosen_positions():
    x = tt.tensor([[0.3, -1.0, 2.0, 0.7]], dtype=tt.float64, requires_grad=True)
    x.topk(2, dim=1).values.backward(tt.tensor([[1.0, 2.0]], dtype=tt.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0, 1.0, 2.0]],
                                  err_msg="the largest (2.0) gets 1, the next (0.7) gets 2, the rest 0")

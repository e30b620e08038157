"""Gradients equal PyTorch's: composite expressions, subgradient conventions, an MLP with
cross-entropy loss."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch import nn


def pair(torch, data):
    """The same float64 leaf in tinytorch and in PyTorch."""
    return (tt.tensor(np.array(data, dtype=np.float64), requires_grad=True),
            torch.tensor(np.array(data, dtype=np.float64), requires_grad=True))


def assert_same_grads(ours, theirs, rtol=1e-10, atol=1e-12):
    for o, t in zip(ours, theirs):
        if t.grad is None:
            assert o.grad is None
            continue
        assert o.grad is not None, "missing gradient"
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


EXPRESSIONS = {
    "polynomial and broadcasting": lambda m, a, b: ((a * b + a / (b * b + 1.0)) ** 2 - a.exp() * 0.1).sum(),
    "normalise rows": lambda m, a, b: ((a - a.mean(1, keepdim=True)) / (a.var(1, keepdim=True) + 1e-5).sqrt() * b).sum(),
    "matmul chain": lambda m, a, b: (m.tanh(a @ a.T) @ a * b).mean(),
    "indexing and views": lambda m, a, b: (a.T[1:, [0, 0, 2]] * b[None, :3].mT).sum() + a[:, ::2].reshape(-1).max(),
    "softmax attention-like": lambda m, a, b: (m.softmax(a @ a.T / 2.0, dim=-1) @ (a * b)).sum(),
    "log-sum-exp": lambda m, a, b: ((a - a.amax(1, keepdim=True)).exp().sum(1).log() + a.amax(1)).sum(),
    "norms (2, 1, 3, inf)": lambda m, a, b: (a.norm(dim=1) + a.norm(1, dim=0)[:3].sum() + (a * b).norm(3)
                                             + b.norm(float("inf"))).sum(),
    "sin and cos": lambda m, a, b: (a.sin() * (2 * b).cos() + a.cos().sin()).sum(),
    "cat stack where": lambda m, a, b: (m.stack([a.sum(0), b]) * m.cat([b[None], a[:1]], 0)).sum()
    + m.where(a > 0, a, b).sum(),
}


class TorchFunctions:
    def __init__(self, torch):
        self.torch = torch

    def tanh(self, x):
        return self.torch.tanh(x)

    def softmax(self, x, dim):
        return self.torch.softmax(x, dim=dim)

    def stack(self, xs, dim=0):
        return self.torch.stack(xs, dim)

    def cat(self, xs, dim=0):
        return self.torch.cat(xs, dim)

    def where(self, c, a, b):
        return self.torch.where(c, a, b)


class OurFunctions:
    tanh = staticmethod(F.tanh)
    softmax = staticmethod(F.softmax)
    stack = staticmethod(tt.stack)
    cat = staticmethod(tt.cat)

    @staticmethod
    def where(c, a, b):
        return tt.where(c, a, b)


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_composite_expressions(torch, name):
    rng = np.random.default_rng(0)
    a_data, b_data = rng.standard_normal((3, 4)), rng.standard_normal(4)
    a, ta = pair(torch, a_data)
    b, tb = pair(torch, b_data)
    EXPRESSIONS[name](OurFunctions, a, b).backward()
    EXPRESSIONS[name](TorchFunctions(torch), ta, tb).backward()
    assert_same_grads([a, b], [ta, tb])


def test_subgradients_at_kinks_follow_pytorch(torch):
    data = [[-1.0, 0.0, 0.5, 2.0, 2.0], [3.0, 3.0, -2.0, 0.0, 1.0]]
    cases = [
        (lambda x: x.abs().sum(), lambda x: x.abs().sum()),
        (lambda x: F.relu(x).sum(), lambda x: torch.relu(x).sum()),
        (lambda x: F.leaky_relu(x, 0.3).sum(), lambda x: torch.nn.functional.leaky_relu(x, 0.3).sum()),
        (lambda x: x.clamp(0.0, 2.0).sum(), lambda x: x.clamp(0.0, 2.0).sum()),
        (lambda x: x.amax(), lambda x: x.amax()),
        (lambda x: x.amax(1).sum(), lambda x: x.amax(1).sum()),
        (lambda x: x.amin(0).sum(), lambda x: x.amin(0).sum()),
        (lambda x: x.max(), lambda x: x.max()),
        (lambda x: x.min(), lambda x: x.min()),
        (lambda x: (x.abs() ** 1.5).sum(), lambda x: (x.abs() ** 1.5).sum()),
        (lambda x: (x * (x > 2.5)).norm(dim=1).sum() + (x * 0).norm(), lambda x: (x * (x > 2.5)).norm(dim=1).sum()
         + (x * 0).norm()),
    ]
    for ours, theirs in cases:
        x, tx = pair(torch, data)
        ours(x).backward()
        theirs(tx).backward()
        assert_same_grads([x], [tx])


def test_max_with_dim_routes_to_the_returned_index(torch):
    data = [[1.0, 4.0, 4.0, 0.0], [2.0, -1.0, 2.0, 2.0]]
    x, tx = pair(torch, data)
    values, indices = x.max(dim=1)
    tvalues, tindices = tx.max(dim=1)
    np.testing.assert_array_equal(values.numpy(), tvalues.detach().numpy())
    (values * tt.tensor([1.0, 2.0], dtype=tt.float64)).sum().backward()
    (tvalues * torch.tensor([1.0, 2.0], dtype=torch.float64)).sum().backward()
    expected = np.zeros((2, 4))
    expected[[0, 1], indices.numpy()] = [1.0, 2.0]
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    assert x.grad.numpy().sum() == tx.grad.numpy().sum() == 3.0


def test_pow_edge_cases_follow_pytorch(torch):
    base, tbase = pair(torch, [0.0, 0.0, 2.0, 1.5])
    expo, texpo = pair(torch, [0.0, 2.0, 0.0, -1.0])
    (base ** expo).sum().backward()
    (tbase ** texpo).sum().backward()
    assert_same_grads([base, expo], [tbase, texpo])


def test_mlp_with_cross_entropy_matches_pytorch(torch):
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 4))
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8),
                                 torch.nn.Tanh(), torch.nn.Linear(8, 4))
    with torch.no_grad():
        for p, tp in zip(model.parameters(), tmodel.parameters()):
            tp.copy_(torch.tensor(p.numpy()))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 6)).astype(np.float32)
    y = rng.integers(0, 4, 16)
    loss = F.cross_entropy(model(tt.tensor(x)), tt.tensor(y))
    tloss = torch.nn.functional.cross_entropy(tmodel(torch.tensor(x)), torch.tensor(y))
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    loss.backward()
    tloss.backward()
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        assert p.grad.dtype == tt.float32 and p.grad.shape == p.shape
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("loss_name", ["bce", "bce pos_weight", "mse", "nll ignore", "ce smoothing"])
def test_loss_gradients_match_pytorch(torch, loss_name):
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((5, 3)) * 3
    x, tx = pair(torch, logits)
    tf = torch.nn.functional
    if loss_name.startswith("bce"):
        target_data = rng.uniform(0, 1, (5, 3))
        t, tt_ = pair(torch, target_data)
        pw = np.array([0.5, 2.0, 1.0]) if "pos_weight" in loss_name else None
        F.binary_cross_entropy_with_logits(x, t, pos_weight=None if pw is None else tt.tensor(pw)).backward()
        tf.binary_cross_entropy_with_logits(tx, tt_, pos_weight=None if pw is None else torch.tensor(pw)).backward()
        assert_same_grads([x, t], [tx, tt_])
    elif loss_name == "mse":
        t, tt_ = pair(torch, rng.standard_normal((5, 3)))
        F.mse_loss(x, t, reduction="sum").backward()
        tf.mse_loss(tx, tt_, reduction="sum").backward()
        assert_same_grads([x, t], [tx, tt_])
    elif loss_name == "nll ignore":
        target = np.array([0, 2, -100, 1, 2])
        w = np.array([1.0, 0.5, 2.0])
        F.nll_loss(F.log_softmax(x, dim=1), tt.tensor(target), tt.tensor(w)).backward()
        tf.nll_loss(torch.log_softmax(tx, dim=1), torch.tensor(target), torch.tensor(w)).backward()
        assert_same_grads([x], [tx])
    else:
        target = np.array([0, 2, 1, 1, 2])
        F.cross_entropy(x, tt.tensor(target), label_smoothing=0.1).backward()
        tf.cross_entropy(tx, torch.tensor(target), label_smoothing=0.1).backward()
        assert_same_grads([x], [tx])


def test_autograd_grad_of_the_same_input_twice_returns_it_twice_like_torch(torch):
    x, tx = pair(torch, [1.0, -2.0, 3.0])
    gx = tt.autograd.grad((x * x).sum(), [x, x])
    tgx = torch.autograd.grad((tx * tx).sum(), [tx, tx])
    assert len(gx) == 2, f"one gradient per requested input, got {len(gx)}"
    for ours, theirs in zip(gx, tgx):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


@pytest.mark.parametrize("loss", ["mse_loss", "binary_cross_entropy_with_logits"])
def test_a_loss_of_two_float_dtypes_sends_each_input_a_gradient_of_its_own_dtype(loss):
    x = tt.tensor(np.array([0.5, -1.0, 2.0], np.float32), requires_grad=True)
    y = tt.tensor(np.array([0.0, 1.0, 0.5], np.float64), requires_grad=True)
    getattr(tt.nn.functional, loss)(x, y).backward()
    assert (x.grad.dtype, y.grad.dtype) == (np.float32, np.float64), (x.grad.dtype, y.grad.dtype)


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_a_mean_loss_over_only_ignored_samples_has_a_zero_gradient_like_torch(torch, loss):
    """Padded batches can hold no real target: the loss is 0/0 = nan, the gradient must not be."""
    logits = np.random.default_rng(17).standard_normal((3, 4))
    target = np.array([-100, -100, -100])
    x = tt.tensor(logits, requires_grad=True)
    tx = torch.tensor(logits, requires_grad=True)
    getattr(F, loss)(x, tt.tensor(target)).backward()
    getattr(torch.nn.functional, loss)(tx, torch.tensor(target)).backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy(), err_msg=f"{loss} over three ignored samples")

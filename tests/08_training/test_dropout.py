"""Dropout: identity in eval, inverted dropout (0 or x/(1-p)) in training, reproducible masks,
a backward rule registered with module 06, and PyTorch's argument checks."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.autograd import gradcheck
from tinytorch.nn import functional as F


def _positive(*shape, dtype=tt.float32):
    return tt.rand(*shape, dtype=dtype) + 0.5  # no zeros, so x/(1-p) and 0 are told apart


def test_eval_mode_is_the_identity():
    x = _positive(50, 20)
    assert F.dropout(x, 0.5, training=False) is x
    layer = nn.Dropout(0.5)
    layer.eval()
    assert layer(x) is x
    model = nn.Sequential(nn.Linear(20, 20), nn.Dropout(0.9), nn.ReLU())
    model.eval()
    with tt.no_grad():
        out = model(x).numpy()
        expected = model[2](model[0](x)).numpy()
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", [tt.float32, tt.float64])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_training_values_are_zero_or_scaled(p, dtype):
    tt.manual_seed(0)
    x = _positive(300, 40, dtype=dtype)
    y = F.dropout(x, p)
    assert y.shape == x.shape and y.dtype == dtype
    kept = y.numpy() != 0
    np.testing.assert_allclose(y.numpy()[kept], x.numpy()[kept] / (1 - p), rtol=1e-6)
    assert 0 < kept.sum() < kept.size


def test_module_is_on_in_training_mode():
    tt.manual_seed(0)
    layer = nn.Dropout(0.5)
    assert layer.training
    x = _positive(100, 10)
    y = layer(x).numpy()
    assert set(np.unique(np.isclose(y, 0) | np.isclose(y, 2 * x.numpy()))) == {True}
    assert (y == 0).any()


@pytest.mark.parametrize("p", [0.2, 0.7])
def test_fraction_kept_is_one_minus_p(p):
    tt.manual_seed(1)
    y = F.dropout(tt.ones(400, 500), p).numpy()
    kept = (y != 0).mean()
    assert abs(kept - (1 - p)) < 0.005  # the standard error is about 0.001
    assert abs(y.mean() - 1.0) < 0.02, "inverted dropout keeps the expected value"


def test_manual_seed_reproduces_the_mask_and_masks_differ_between_calls():
    x = _positive(64, 64)
    tt.manual_seed(5)
    a = F.dropout(x, 0.5).numpy()
    b = F.dropout(x, 0.5).numpy()
    tt.manual_seed(5)
    c = F.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a != 0, b != 0)


def test_recorded_op_carries_the_scaled_mask():
    x = _positive(6, 7).requires_grad_()
    tt.manual_seed(2)
    y = F.dropout(x, 0.25)
    node = y.grad_fn
    assert node is not None and node.op == "dropout" and node.inputs[0] is x
    mask = np.asarray(node.attrs["mask"])
    np.testing.assert_allclose(mask * x.numpy(), y.numpy(), rtol=1e-6)
    assert mask.dtype == np.float32
    assert np.all(np.isclose(mask, 0) | np.isclose(mask, 1 / 0.75, rtol=1e-6))


def test_gradient_flows_through_the_mask():
    x = _positive(8, 9).requires_grad_()
    w = tt.randn(8, 9)
    tt.manual_seed(3)
    y = F.dropout(x, 0.4)
    (y * w).sum().backward()
    mask = y.numpy() / x.numpy()
    np.testing.assert_allclose(x.grad.numpy(), w.numpy() * mask, rtol=1e-5, atol=1e-7)
    assert (x.grad.numpy()[y.numpy() == 0] == 0).all(), "dropped elements get no gradient"


def test_gradient_through_a_model_with_dropout():
    tt.manual_seed(4)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3))
    loss = nn.CrossEntropyLoss()(model(tt.randn(12, 5)), tt.tensor([0, 1, 2] * 4))
    loss.backward()
    assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in model.parameters())


def test_gradcheck_with_a_fixed_mask():
    x = tt.randn(4, 6, dtype=tt.float64, requires_grad=True)

    def fixed(t):
        tt.manual_seed(11)  # the same mask on every evaluation
        return F.dropout(t, 0.35)

    assert gradcheck(fixed, (x,))


def test_p_zero_and_p_one():
    x = _positive(10, 10).requires_grad_()
    tt.manual_seed(0)
    assert F.dropout(x, 0.0) is x, "p = 0 in training: the input itself, no copy and no node"
    after = tt.rand(3).numpy()
    tt.manual_seed(0)
    np.testing.assert_array_equal(after, tt.rand(3).numpy(), err_msg="p = 0 must not draw from the generator")
    y = F.dropout(x, 1.0)
    assert y.shape == x.shape and (y.numpy() == 0).all() and np.isfinite(y.numpy()).all()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((10, 10)))
    assert nn.Dropout(0.0)(x) is x


@pytest.mark.parametrize("p", [-0.1, 1.01, 2])
def test_invalid_p_raises(p):
    x = _positive(3)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, p)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(p)


def test_integer_input_is_refused():
    with pytest.raises(TypeError):
        F.dropout(tt.tensor([1, 2, 3]), 0.5)


def test_module_repr_and_no_parameters():
    layer = nn.Dropout(0.3)
    assert repr(layer) == "Dropout(p=0.3)"
    assert list(layer.parameters()) == [] and layer.p == 0.3
    assert "2): Dropout(p=0.3)" in repr(nn.Sequential(nn.Linear(2, 2), nn.ReLU(), layer))


def test_matches_torch_semantics(torch):
    """Same statistics as torch.nn.functional.dropout (the random streams differ)."""
    x = np.random.default_rng(0).uniform(0.5, 1.5, (200, 200)).astype(np.float32)
    ours = F.dropout(tt.tensor(x), 0.3).numpy()
    theirs = torch.nn.functional.dropout(torch.from_numpy(x), 0.3, training=True).numpy()
    for out in (ours, theirs):
        kept = out != 0
        np.testing.assert_allclose(out[kept], x[kept] / 0.7, rtol=1e-6)
    assert abs((ours != 0).mean() - (theirs != 0).mean()) < 0.01
    np.testing.assert_array_equal(
        F.dropout(tt.tensor(x), 0.3, training=False).numpy(),
        torch.nn.functional.dropout(torch.from_numpy(x), 0.3, training=False).numpy())


@pytest.mark.parametrize("kwargs", [{"p": 0.3, "training": False}, {"p": 0.0}], ids=["eval", "p0"])
def test_dropout_that_returns_its_input_draws_nothing(kwargs):
    x = tt.randn(30, 20)
    tt.manual_seed(5)
    F.dropout(x, **kwargs)
    after = tt.rand(3).numpy()
    tt.manual_seed(5)
    np.testing.assert_array_equal(after, tt.rand(3).numpy(), err_msg="the generator moved: a mask was drawn and dropped")

"""The loss modules are tinytorch.nn.Modules whose forward calls the functional; vs PyTorch."""
import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch import Tensor


def _pointwise(dtype=np.float64):
    rng = np.random.default_rng(0)
    return rng.standard_normal((5, 3)).astype(dtype), rng.random((5, 3)).astype(dtype)


def _classes(dtype=np.float64):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((6, 4, 2)) * 2).astype(dtype), np.array(
        [[0, 1], [3, -100], [2, 2], [1, 0], [3, 3], [-100, 1]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_module_equals_functional_and_pytorch(torch, reduction):
    x, y = _pointwise()
    module = tinytorch.nn.MSELoss(reduction=reduction)
    assert isinstance(module, tinytorch.nn.Module)
    ours = module(Tensor(x), Tensor(y))
    np.testing.assert_array_equal(ours.numpy(), F.mse_loss(Tensor(x), Tensor(y), reduction=reduction).numpy())
    ref = torch.nn.MSELoss(reduction=reduction)(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_module_equals_functional_and_pytorch(torch, reduction):
    x, y = _pointwise()
    w, pw = np.array([1.0, 0.5, 2.0]), np.array([3.0, 1.0, 0.25])
    module = tinytorch.nn.BCEWithLogitsLoss(Tensor(w), reduction=reduction, pos_weight=Tensor(pw))
    assert isinstance(module, tinytorch.nn.Module)
    ours = module(Tensor(x), Tensor(y))
    direct = F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), Tensor(w), reduction=reduction,
                                                pos_weight=Tensor(pw))
    np.testing.assert_array_equal(ours.numpy(), direct.numpy())
    ref = torch.nn.BCEWithLogitsLoss(torch.from_numpy(w), reduction=reduction, pos_weight=torch.from_numpy(pw))
    np.testing.assert_allclose(ours.numpy(), ref(torch.from_numpy(x), torch.from_numpy(y)).numpy(), rtol=1e-10)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_module_equals_functional_and_pytorch(torch, reduction):
    z, t = _classes()
    lp = F.log_softmax(Tensor(z), dim=1)
    w = np.array([1.0, 2.0, 0.5, 1.5])
    module = tinytorch.nn.NLLLoss(Tensor(w), ignore_index=-100, reduction=reduction)
    assert isinstance(module, tinytorch.nn.Module)
    ours = module(lp, Tensor(t))
    np.testing.assert_array_equal(ours.numpy(), F.nll_loss(lp, Tensor(t), Tensor(w), reduction=reduction).numpy())
    ref = torch.nn.NLLLoss(torch.from_numpy(w), reduction=reduction)(
        torch.from_numpy(lp.numpy().copy()), torch.from_numpy(t)).numpy()
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_module_equals_functional_and_pytorch(torch, reduction, label_smoothing):
    z, t = _classes()
    t = np.where(t == -100, 1, t)
    t[0, 0] = 3  # the ignore_index below
    module = tinytorch.nn.CrossEntropyLoss(ignore_index=3, reduction=reduction, label_smoothing=label_smoothing)
    assert isinstance(module, tinytorch.nn.Module)
    ours = module(Tensor(z), Tensor(t))
    direct = F.cross_entropy(Tensor(z), Tensor(t), ignore_index=3, reduction=reduction,
                             label_smoothing=label_smoothing)
    np.testing.assert_array_equal(ours.numpy(), direct.numpy())
    ref = torch.nn.CrossEntropyLoss(ignore_index=3, reduction=reduction, label_smoothing=label_smoothing)(
        torch.from_numpy(z), torch.from_numpy(t)).numpy()
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-11)


def test_default_modules_equal_default_functionals():
    x, y = _pointwise(np.float32)
    z, t = _classes(np.float32)
    pairs = [(tinytorch.nn.MSELoss()(Tensor(x), Tensor(y)), F.mse_loss(Tensor(x), Tensor(y))),
             (tinytorch.nn.BCEWithLogitsLoss()(Tensor(x), Tensor(y)),
              F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y))),
             (tinytorch.nn.NLLLoss()(Tensor(z), Tensor(t)), F.nll_loss(Tensor(z), Tensor(t))),
             (tinytorch.nn.CrossEntropyLoss()(Tensor(z), Tensor(t)), F.cross_entropy(Tensor(z), Tensor(t)))]
    for module_out, functional_out in pairs:
        assert module_out.shape == () and module_out.dtype == np.float32
        assert module_out.item() == functional_out.item()


def test_loss_module_output_keeps_the_graph():
    z, t = _classes()
    zt = Tensor(z, requires_grad=True)
    out = tinytorch.nn.CrossEntropyLoss()(zt, Tensor(t))
    assert out.requires_grad and out.grad_fn.op == "nll_loss"


def test_class_weights_are_buffers_in_the_state_dict():
    w = Tensor(np.array([1.0, 2.0, 3.0, 4.0]))
    criterion = tinytorch.nn.CrossEntropyLoss(w)
    state = criterion.state_dict()
    assert list(state) == ["weight"]
    np.testing.assert_array_equal(state["weight"].numpy(), w.numpy())
    assert list(criterion.parameters()) == []
    z, t = _classes()
    np.testing.assert_allclose(criterion(Tensor(z), Tensor(t)).item(),
                               F.cross_entropy(Tensor(z), Tensor(t), w).item(), rtol=1e-14)
    bce = tinytorch.nn.BCEWithLogitsLoss(pos_weight=Tensor([2.0, 1.0, 0.5]))
    assert list(bce.state_dict()) == ["pos_weight"]
    x, y = _pointwise()
    np.testing.assert_allclose(bce(Tensor(x), Tensor(y)).item(),
                               F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y),
                                                                  pos_weight=Tensor([2.0, 1.0, 0.5])).item(),
                               rtol=1e-14)

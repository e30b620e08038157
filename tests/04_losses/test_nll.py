"""nll_loss: a gather of the target's log-probability, weighted, with ignore_index; vs PyTorch."""
import numpy as np
import pytest

import tinytorch.nn.functional as F
from tinytorch import Tensor

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}

# (input shape, target shape): (C,) with a 0-d target, (N, C), (N, C, d1), (N, C, d1, d2)
SHAPES = [((5,), ()), ((6, 4), (6,)), ((3, 5, 7), (3, 7)), ((2, 3, 4, 2), (2, 4, 2)), ((1, 2), (1,))]


def _log_probs(shape, dtype, seed=0):
    z = np.random.default_rng(seed).standard_normal(shape) * 2
    class_dim = 1 if len(shape) > 1 else 0
    z = z - z.max(axis=class_dim, keepdims=True)
    return (z - np.log(np.exp(z).sum(axis=class_dim, keepdims=True))).astype(dtype)


def _targets(in_shape, t_shape, seed=0, ignore=None):
    n_classes = in_shape[1] if len(in_shape) > 1 else in_shape[0]
    rng = np.random.default_rng(seed + 100)
    t = rng.integers(0, n_classes, t_shape)
    if ignore is not None and t.ndim:
        t.flat[::3] = ignore
    return np.asarray(t, dtype=np.int64)


def _torch_nll(torch, lp, t, weight=None, ignore_index=-100, reduction="mean"):
    return torch.nn.functional.nll_loss(
        torch.from_numpy(np.array(lp)), torch.from_numpy(np.array(t)),
        weight=None if weight is None else torch.from_numpy(weight),
        ignore_index=ignore_index, reduction=reduction).numpy()


@pytest.mark.parametrize("in_shape, t_shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_equals_pytorch(torch, in_shape, t_shape, dtype, reduction):
    lp, t = _log_probs(in_shape, dtype, len(in_shape)), _targets(in_shape, t_shape, len(in_shape))
    ours = F.nll_loss(Tensor(lp), Tensor(t), reduction=reduction)
    ref = _torch_nll(torch, lp, t, reduction=reduction)
    assert ours.shape == ref.shape and ours.dtype == dtype
    np.testing.assert_allclose(ours.numpy(), ref, **TOL[dtype])


@pytest.mark.parametrize("in_shape, t_shape", SHAPES[1:])
@pytest.mark.parametrize("ignore_index", [-100, 0, 2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_ignore_index_and_weight_equal_pytorch(torch, in_shape, t_shape, ignore_index, reduction, weighted):
    lp = _log_probs(in_shape, np.float64, 9)
    t = _targets(in_shape, t_shape, 4, ignore=ignore_index)
    n_classes = in_shape[1]
    w = np.linspace(0.25, 2.0, n_classes) if weighted else None
    ours = F.nll_loss(Tensor(lp), Tensor(t), None if w is None else Tensor(w),
                      ignore_index=ignore_index, reduction=reduction)
    np.testing.assert_allclose(ours.numpy(), _torch_nll(torch, lp, t, w, ignore_index, reduction),
                               **TOL[np.float64])


def test_nll_mean_divides_by_the_real_targets_only():
    lp = _log_probs((4, 3), np.float64)
    t = np.array([1, -100, 2, -100])
    picked = -np.array([lp[0, 1], lp[2, 2]])
    np.testing.assert_allclose(F.nll_loss(Tensor(lp), Tensor(t)).item(), picked.mean(), rtol=1e-13)
    np.testing.assert_allclose(F.nll_loss(Tensor(lp), Tensor(t), reduction="none").numpy(),
                               [picked[0], 0.0, picked[1], 0.0], rtol=1e-13)


def test_nll_weighted_mean_divides_by_the_total_weight():
    lp = _log_probs((3, 3), np.float64, 5)
    t = np.array([0, 2, 2])
    w = np.array([3.0, 1.0, 0.5])
    expected = (-3.0 * lp[0, 0] - 0.5 * lp[1, 2] - 0.5 * lp[2, 2]) / (3.0 + 0.5 + 0.5)
    np.testing.assert_allclose(F.nll_loss(Tensor(lp), Tensor(t), Tensor(w)).item(), expected, rtol=1e-13)


def test_nll_all_ignored_mean_is_nan_like_pytorch(torch):
    lp = _log_probs((3, 4), np.float32)
    t = np.full(3, -100)
    ours = F.nll_loss(Tensor(lp), Tensor(t))
    assert np.isnan(ours.item()) and np.isnan(_torch_nll(torch, lp, t))
    assert F.nll_loss(Tensor(lp), Tensor(t), reduction="sum").item() == 0.0


def test_nll_ignores_minus_inf_at_ignored_positions():
    import warnings

    lp = np.array([[-np.inf, 0.0], [np.log(0.5), np.log(0.5)]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            try:
                out = F.nll_loss(Tensor(lp), Tensor([-100, 1]), reduction="none").numpy()
            except (FloatingPointError, RuntimeWarning) as exc:
                pytest.fail(f"nll_loss computed an invalid value at an ignored position ({exc}): 0 * -inf is nan, "
                            "even where np.where throws the result away")
    np.testing.assert_allclose(out, [0.0, np.log(2.0)])
    assert not np.signbit(out[0]), "an ignored position's loss is +0.0, as PyTorch's, not -0.0"


def test_nll_uses_whatever_values_it_is_given():
    # nll_loss does not normalise: it negates the entry of the target class
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(F.nll_loss(Tensor(x), Tensor([2, 0]), reduction="none").numpy(), [-3.0, -4.0])


def test_nll_records_one_op_with_target_weight_and_options():
    lp = Tensor(_log_probs((4, 3), np.float64), requires_grad=True)
    t = np.array([2, 0, -100, 1])
    w = np.array([1.0, 2.0, 3.0])
    out = F.nll_loss(lp, Tensor(t), Tensor(w), reduction="sum")
    node = out.grad_fn
    assert node.op == "nll_loss" and node.inputs == (lp,)
    np.testing.assert_array_equal(node.attrs["target"], t)
    assert node.attrs["target"].dtype == np.int64
    np.testing.assert_array_equal(node.attrs["weight"], w)
    assert node.attrs["ignore_index"] == -100 and node.attrs["reduction"] == "sum"
    out2 = F.nll_loss(lp, Tensor([2, 0, 1, 1]), ignore_index=1)
    assert out2.grad_fn.attrs["weight"] is None and out2.grad_fn.attrs["ignore_index"] == 1

"""Reductions: "mean", "sum", "none"; anything else is a ValueError listing the options."""
import warnings

import numpy as np
import pytest

import tinytorch
import tinytorch.nn.functional as F
from tinytorch import Tensor

BAD = ["avg", "MEAN", "elementwise_mean", None, 1, ["mean"]]


def _pointwise_args(dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(dtype)
    y = rng.random((3, 4)).astype(dtype)
    return Tensor(x), Tensor(y)


def _class_args(dtype=np.float32):
    rng = np.random.default_rng(1)
    z = rng.standard_normal((5, 4)).astype(dtype)
    t = np.array([0, 3, 1, 1, 2])
    return Tensor(z), Tensor(t)


CALLS = {
    "mse_loss": lambda r: F.mse_loss(*_pointwise_args(), reduction=r),
    "bce_with_logits": lambda r: F.binary_cross_entropy_with_logits(*_pointwise_args(), reduction=r),
    "nll_loss": lambda r: F.nll_loss(*_class_args(), reduction=r),
    "cross_entropy": lambda r: F.cross_entropy(*_class_args(), reduction=r),
}


@pytest.mark.parametrize("bad", BAD, ids=repr)
@pytest.mark.parametrize("loss", sorted(CALLS))
def test_bad_reduction_is_a_value_error_listing_the_options(loss, bad):
    with pytest.raises(ValueError) as info:
        CALLS[loss](bad)
    msg = str(info.value)
    assert "'mean'" in msg and "'sum'" in msg and "'none'" in msg, msg


@pytest.mark.parametrize("cls", ["MSELoss", "BCEWithLogitsLoss", "NLLLoss", "CrossEntropyLoss"])
def test_loss_modules_check_reduction_when_built(cls):
    with pytest.raises(ValueError, match="'mean'"):
        getattr(tinytorch.nn, cls)(reduction="avg")


@pytest.mark.parametrize("loss", sorted(CALLS))
def test_mean_and_sum_are_zero_dim_none_keeps_shape(loss):
    per = CALLS[loss]("none")
    expected_shape = (3, 4) if loss in ("mse_loss", "bce_with_logits") else (5,)
    assert per.shape == expected_shape, f"{loss}(reduction='none'): shape {per.shape}, expected {expected_shape}"
    total, mean = CALLS[loss]("sum"), CALLS[loss]("mean")
    assert total.shape == () and mean.shape == (), f"{loss}: 'sum' {total.shape} and 'mean' {mean.shape} must be 0-d"
    np.testing.assert_allclose(total.item(), per.numpy().astype(np.float64).sum(), rtol=1e-5)
    np.testing.assert_allclose(mean.item(), per.numpy().astype(np.float64).mean(), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_every_loss_keeps_the_input_dtype(dtype, reduction):
    x, y = _pointwise_args(dtype)
    z, t = _class_args(dtype)
    outs = [F.mse_loss(x, y, reduction=reduction),
            F.binary_cross_entropy_with_logits(x, y, reduction=reduction),
            F.nll_loss(z, t, reduction=reduction),
            F.cross_entropy(z, t, reduction=reduction)]
    for name, out in zip(["mse_loss", "binary_cross_entropy_with_logits", "nll_loss", "cross_entropy"], outs):
        assert out.dtype == dtype, f"{name}(reduction={reduction!r}) of {np.dtype(dtype)} inputs gave {out.dtype}"
        assert np.asarray(out.numpy()).dtype == dtype, f"{name}: the array inside is {np.asarray(out.numpy()).dtype}"


def test_default_reduction_is_mean():
    x, y = _pointwise_args()
    np.testing.assert_allclose(F.mse_loss(x, y).item(), F.mse_loss(x, y, reduction="none").numpy().mean(),
                               rtol=1e-6)
    z, t = _class_args()
    np.testing.assert_allclose(F.cross_entropy(z, t).item(),
                               F.cross_entropy(z, t, reduction="none").numpy().mean(), rtol=1e-6)


@pytest.mark.parametrize("losses, total_weight", [(np.zeros(0, np.float32), None), (np.zeros(3, np.float32), 0.0)])
def test_reduce_over_nothing_is_nan_without_a_warning(losses, total_weight):
    """Every target ignored is an ordinary batch of padding: nan, as in PyTorch, but no
    numpy warning for each such batch."""
    from tinytorch.nn.losses import _reduce

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _reduce(losses, "mean", total_weight)
    assert got.shape == (), f"a mean reduces to a 0-d array, got shape {got.shape}"
    assert np.isnan(got), f"a mean over nothing (total weight {total_weight}) is nan, got {got}"
    assert got.dtype == np.float32, f"the losses' dtype float32 is kept, got {got.dtype}"


@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_reduce_refuses_a_bad_reduction(bad):
    from tinytorch.nn.losses import _reduce

    with pytest.raises(ValueError) as info:
        _reduce(np.ones(3, dtype=np.float32), bad)
    assert all(f"'{r}'" in str(info.value) for r in ("mean", "sum", "none")), str(info.value)


@pytest.mark.parametrize("reduction, want", [("sum", 12.0), ("mean", 1.5), ("none", [[1.0, 2.0], [3.0, 6.0]])])
def test_reduce_uses_total_weight_only_for_the_mean(reduction, want):
    from tinytorch.nn.losses import _reduce

    got = _reduce(np.array([[1.0, 2.0], [3.0, 6.0]], np.float32), reduction, total_weight=8.0)
    np.testing.assert_allclose(got, want, rtol=1e-6,
                               err_msg=f"_reduce(losses summing to 12, {reduction!r}, total_weight=8)")


@pytest.mark.parametrize("total_weight", [8, np.int64(8), 8.0, np.float64(8.0)], ids=["int", "int64", "float", "float64"])
def test_reduce_keeps_the_losses_dtype_whatever_the_weights_type(total_weight):
    from tinytorch.nn.losses import _reduce

    got = _reduce(np.array([[1.0, 2.0], [3.0, 6.0]], np.float32), "mean", total_weight=total_weight)
    assert got.dtype == np.float32, (f"_reduce(float32 losses, 'mean', total_weight={total_weight!r}) returned "
                                     f"{got.dtype}; expected float32, the losses' dtype")

"""binary_cross_entropy_with_logits: stable form, equal to PyTorch, finite at logits of 1e4."""
import numpy as np
import pytest

import tinytorch.nn.functional as F
from tinytorch import Tensor

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _data(shape, dtype, seed=0, scale=4.0, hard=False):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    y = (rng.random(shape) < 0.5) if hard else rng.random(shape)
    return x, y.astype(dtype)


def _torch_bce(torch, x, y, weight=None, pos_weight=None, reduction="mean"):
    tt = lambda a: None if a is None else torch.from_numpy(np.array(a))  # noqa: E731
    return torch.nn.functional.binary_cross_entropy_with_logits(
        tt(x), tt(y), weight=tt(weight), pos_weight=tt(pos_weight), reduction=reduction).numpy()


@pytest.mark.parametrize("shape", [(), (9,), (4, 3), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_equals_pytorch(torch, shape, dtype, reduction):
    x, y = _data(shape, dtype, seed=len(shape))
    ours = F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), reduction=reduction)
    ref = _torch_bce(torch, x, y, reduction=reduction)
    assert ours.shape == ref.shape and ours.dtype == dtype
    np.testing.assert_allclose(ours.numpy(), ref, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight_shape, pos_weight_shape", [
    ((5, 3), None), ((3,), None), ((), None), ((5, 1), None),
    (None, (3,)), (None, ()), (None, (5, 3)),
    ((3,), (3,)), ((5, 1), (3,)),
])
def test_bce_weights_equal_pytorch(torch, dtype, reduction, weight_shape, pos_weight_shape):
    x, y = _data((5, 3), dtype, seed=7, hard=True)
    rng = np.random.default_rng(11)
    w = None if weight_shape is None else (rng.random(weight_shape) * 2).astype(dtype)
    pw = None if pos_weight_shape is None else (rng.random(pos_weight_shape) * 4 + 0.1).astype(dtype)
    ours = F.binary_cross_entropy_with_logits(
        Tensor(x), Tensor(y), None if w is None else Tensor(w), reduction=reduction,
        pos_weight=None if pw is None else Tensor(pw))
    ref = _torch_bce(torch, x, y, w, pw, reduction)
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours.numpy(), ref, **TOL[dtype])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_targets_with_pos_weight_equal_pytorch(torch, reduction):
    x, y = _data((6, 4), np.float64, seed=3)
    pw = np.array([0.5, 1.0, 2.0, 10.0])
    ours = F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), reduction=reduction, pos_weight=Tensor(pw))
    np.testing.assert_allclose(ours.numpy(), _torch_bce(torch, x, y, None, pw, reduction), **TOL[np.float64])


@pytest.mark.parametrize("use_pos_weight", [False, True])
def test_bce_is_finite_and_right_at_logits_of_1e4(torch, use_pos_weight):
    x = np.array([1e4, -1e4, 1e4, -1e4, 1e4, -1e4, 5e3, -3e3], dtype=np.float32)
    y = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 0.25, 0.0, 1.0], dtype=np.float32)
    pw = np.full(8, 3.0, np.float32) if use_pos_weight else None
    ours = F.binary_cross_entropy_with_logits(
        Tensor(x), Tensor(y), reduction="none", pos_weight=None if pw is None else Tensor(pw)).numpy()
    assert np.all(np.isfinite(ours)), ours
    np.testing.assert_allclose(ours, _torch_bce(torch, x, y, None, pw, "none"), rtol=1e-6)
    # and by hand: a right answer costs 0, a wrong one |x| (times pos_weight for a missed positive)
    p = 3.0 if use_pos_weight else 1.0
    np.testing.assert_allclose(ours[:4], [0.0, 0.0, 1e4, p * 1e4], rtol=1e-6)
    mean = F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y)).item()
    assert np.isfinite(mean)


def test_bce_near_float32_overflow(torch):
    # the naive sigmoid-then-log form is inf from about |x| = 17 (y = 0) and |x| = 89 (y = 1)
    x = np.array([17.0, 20.0, 88.0, 89.0, 100.0, -89.0, -100.0, -17.0], dtype=np.float32)
    for y_value in (0.0, 1.0):
        y = np.full_like(x, y_value)
        ours = F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), reduction="none").numpy()
        exact = np.logaddexp(0, np.where(y_value == 1, -x, x).astype(np.float64))
        assert np.all(np.isfinite(ours))
        np.testing.assert_allclose(ours, exact, rtol=1e-6, atol=1e-30)
        np.testing.assert_allclose(ours, _torch_bce(torch, x, y, reduction="none"), rtol=1e-5, atol=1e-6)


def test_bce_keeps_tiny_losses():
    # confident right answers: the exact loss is log1p(exp(-|x|)), far below float32's epsilon
    x = np.array([-50.0, 50.0, -30.0, 30.0], dtype=np.float32)
    y = np.array([0.0, 1.0, 0.0, 1.0], dtype=np.float32)
    ours = F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(ours, np.log1p(np.exp(-np.abs(x.astype(np.float64)))), rtol=1e-5)
    assert np.all(ours > 0)


def test_bce_on_moderate_logits_matches_the_textbook_formula():
    x, y = _data((50,), np.float64, seed=5, scale=3.0)
    p = 1 / (1 + np.exp(-x))
    ref = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), reduction="none").numpy(),
                               ref, rtol=1e-9)


@pytest.mark.parametrize("a, b", [((4, 1), (4,)), ((3,), (4,)), ((2, 3), (3, 2))])
def test_bce_refuses_different_shapes_naming_both(a, b):
    with pytest.raises(ValueError) as info:
        F.binary_cross_entropy_with_logits(Tensor(np.zeros(a, np.float32)), Tensor(np.zeros(b, np.float32)))
    assert str(a) in str(info.value) and str(b) in str(info.value)
    assert "binary_cross_entropy_with_logits" in str(info.value)


def test_bce_refuses_integer_targets_and_promotes_mixed_floats():
    with pytest.raises(TypeError, match="int64"):
        F.binary_cross_entropy_with_logits(Tensor([0.5, -0.5]), Tensor([1, 0]))
    out = F.binary_cross_entropy_with_logits(Tensor(np.zeros(2, np.float64)), Tensor(np.zeros(2, np.float32)))
    assert out.dtype == np.float64, "float64 logits with a float32 target: float64, as in PyTorch"


@pytest.mark.parametrize("kw", ["weight", "pos_weight"])
def test_bce_weights_must_not_change_the_shape(kw):
    x, y = _data((4, 3), np.float32)
    for bad in [np.ones(4, np.float32), np.ones((2, 4, 3), np.float32)]:
        with pytest.raises(ValueError) as info:
            F.binary_cross_entropy_with_logits(Tensor(x), Tensor(y), **{kw: Tensor(bad)})
        assert kw in str(info.value) and str(bad.shape) in str(info.value) and "(4, 3)" in str(info.value)


def test_bce_records_one_op_with_weights_as_attributes():
    x, y = _data((4, 3), np.float64, seed=2)
    w, pw = np.linspace(0.5, 2.0, 3), np.array([2.0, 1.0, 0.5])
    xt = Tensor(x, requires_grad=True)
    out = F.binary_cross_entropy_with_logits(xt, Tensor(y), Tensor(w), reduction="sum", pos_weight=Tensor(pw))
    node = out.grad_fn
    assert node.op == "binary_cross_entropy_with_logits"
    assert node.inputs[0] is xt and len(node.inputs) == 2
    assert node.attrs["reduction"] == "sum"
    np.testing.assert_array_equal(node.attrs["weight"], w)
    np.testing.assert_array_equal(node.attrs["pos_weight"], pw)
    plain = F.binary_cross_entropy_with_logits(xt, Tensor(y)).grad_fn
    assert plain.attrs["weight"] is None and plain.attrs["pos_weight"] is None

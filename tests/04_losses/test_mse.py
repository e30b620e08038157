"""mse_loss: values equal PyTorch; shapes and dtypes must match (no silent broadcasting)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinytorch
import tinytorch.nn.functional as F
from tinytorch import Tensor

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}


@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 5), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_equals_pytorch(torch, shape, dtype, reduction):
    rng = np.random.default_rng(sum(shape) + 3)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    y = rng.standard_normal(shape).astype(dtype)
    ours = F.mse_loss(Tensor(x), Tensor(y), reduction=reduction)
    ref = torch.nn.functional.mse_loss(torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y)),
                                       reduction=reduction).numpy()
    assert ours.shape == ref.shape, f"mse_loss(reduction={reduction!r}): shape {ours.shape}, PyTorch {ref.shape}"
    assert ours.dtype == dtype, f"mse_loss of {np.dtype(dtype)} inputs gave {ours.dtype}"
    np.testing.assert_allclose(ours.numpy(), ref, err_msg=f"mse_loss(reduction={reduction!r})", **TOL[dtype])


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=st.floats(-1e3, 1e3)), st.data())
def test_mse_matches_numpy_on_any_shape(x, data):
    y = data.draw(hnp.arrays(np.float64, x.shape, elements=st.floats(-1e3, 1e3)))
    np.testing.assert_allclose(F.mse_loss(Tensor(x), Tensor(y)).item(), np.mean((x - y) ** 2),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(F.mse_loss(Tensor(x), Tensor(y), reduction="none").numpy(), (x - y) ** 2,
                               rtol=1e-12, atol=1e-12)


def test_mse_is_symmetric_and_zero_on_equal_inputs():
    x = np.random.default_rng(0).standard_normal((4, 3))
    y = np.random.default_rng(1).standard_normal((4, 3))
    assert F.mse_loss(Tensor(x), Tensor(y)).item() == F.mse_loss(Tensor(y), Tensor(x)).item()
    assert F.mse_loss(Tensor(x), Tensor(x)).item() == 0.0


@pytest.mark.parametrize("a, b", [((4, 1), (4,)), ((4,), (4, 1)), ((3,), (4,)), ((2, 3), (3, 2)),
                                  ((5, 3), (3,)), ((), (2,))])
def test_different_shapes_are_refused_naming_both(a, b):
    x, y = Tensor(np.zeros(a, np.float32)), Tensor(np.zeros(b, np.float32))
    with pytest.raises(ValueError) as info:
        F.mse_loss(x, y)
    msg = str(info.value)
    assert str(a) in msg and str(b) in msg, msg
    assert "broadcast" in msg, f"say why the shapes must match: {msg}"
    assert "mse_loss" in msg


def test_check_pointwise_refuses_an_integer_target_and_gives_the_fix():
    with pytest.raises(TypeError) as info:
        F.mse_loss(Tensor([1.0, 2.0]), Tensor([1, 2]))
    assert "int64" in str(info.value) and ".float()" in str(info.value)


def test_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="int64"):
        F.mse_loss(Tensor([1, 2]), Tensor([1.0, 2.0]))


@pytest.mark.parametrize("input, target", [([1.0, 2.0], [[1], [2]]), ([[1], [2]], [1.0, 2.0])])
def test_a_wrong_dtype_is_reported_before_a_wrong_shape(input, target):
    """An integer tensor is the real mistake: fixing the shape alone would not make it work."""
    with pytest.raises(TypeError, match="int64"):
        F.mse_loss(Tensor(input), Tensor(target))


@pytest.mark.parametrize("loss", ["mse_loss", "binary_cross_entropy_with_logits"])
def test_two_float_dtypes_are_promoted_like_torch(torch, loss):
    x = np.array([0.5, -1.0, 2.0], np.float32)
    y = np.array([0.0, 1.0, 0.5], np.float64)
    xt = Tensor(x, requires_grad=True)
    out = getattr(F, loss)(xt, Tensor(y))
    want = getattr(torch.nn.functional, loss)(torch.from_numpy(x), torch.from_numpy(y))
    assert out.dtype == np.float64, f"{loss}(float32, float64) has dtype {out.dtype}, PyTorch float64"
    np.testing.assert_allclose(out.item(), want.item(), rtol=1e-6)
    # (that its gradient keeps the float32 input's dtype needs autograd: tests/06_autograd)


def test_mse_records_one_op_with_its_reduction():
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = Tensor(np.ones((2, 3)))
    for reduction in ["mean", "sum", "none"]:
        out = F.mse_loss(x, y, reduction=reduction)
        node = out.grad_fn
        assert node is not None and node.op == "mse_loss"
        assert node.inputs[0] is x and node.inputs[1] is y
        assert node.attrs["reduction"] == reduction


def test_mse_records_a_node_when_only_the_target_requires_grad():
    x = Tensor(np.arange(3.0))
    y = Tensor(np.ones(3), requires_grad=True)
    out = F.mse_loss(x, y)
    assert out.grad_fn is not None and out.grad_fn.op == "mse_loss"
    np.testing.assert_allclose(out.item(), np.mean((np.arange(3.0) - 1) ** 2))


def test_mse_does_not_record_under_no_grad():
    x = Tensor(np.arange(3.0), requires_grad=True)
    tinytorch.set_grad_enabled(False)
    try:
        out = F.mse_loss(x, Tensor(np.zeros(3)))
    finally:
        tinytorch.set_grad_enabled(True)
    assert out.grad_fn is None
    np.testing.assert_allclose(out.item(), 5.0 / 3.0)

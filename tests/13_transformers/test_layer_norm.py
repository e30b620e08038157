"""LayerNorm: values and gradients equal PyTorch's, gradcheck, one fused op, the module."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.autograd import gradcheck
from tinytorch.nn import functional as F

CASES = [((4, 8), (8,)), ((2, 3, 5), (5,)), ((2, 3, 4, 5), (4, 5)), ((3, 2, 4, 6), (2, 4, 6)), ((7,), (7,))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,normalized", CASES)
def test_module_matches_torch_values_and_grads(torch, shape, normalized, dtype):
    rng = np.random.default_rng(len(shape) * 10 + len(normalized))
    x = (rng.standard_normal(shape) * 2.5 + 0.7).astype(dtype)
    w = (rng.standard_normal(normalized) + 1).astype(dtype)
    b = rng.standard_normal(normalized).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)

    ours = nn.LayerNorm(normalized).to(np.dtype(dtype))
    with tt.no_grad():
        ours.weight.copy_(tt.tensor(w))
        ours.bias.copy_(tt.tensor(b))
    theirs = torch.nn.LayerNorm(normalized, dtype=getattr(torch, dtype))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
        theirs.bias.copy_(torch.tensor(b))

    xo = tt.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    yo, yt = ours(xo), theirs(xt)
    yo.backward(tt.tensor(g))
    yt.backward(torch.tensor(g))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-11)
    assert yo.dtype == np.dtype(dtype) and yo.shape == shape
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), **tol, err_msg="the output y (the forward)")
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), **tol, err_msg="the input's gradient x̄")
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), **tol,
                               err_msg="the weight's gradient γ̄")
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), **tol, err_msg="the bias's gradient β̄")


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_functional_matches_torch_without_affine(torch, eps):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 8))
    g = rng.standard_normal((5, 3, 8))
    xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo = F.layer_norm(xo, (3, 8), eps=eps)
    yt = torch.nn.functional.layer_norm(xt, (3, 8), eps=eps)
    yo.backward(tt.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg="the output y (the forward), no weight or bias")
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12,
                               err_msg="the input's gradient x̄, no weight or bias")


def test_normalises_each_token(torch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 10)) * rng.uniform(0.1, 20, (6, 1)) + rng.uniform(-50, 50, (6, 1))
    y = F.layer_norm(tt.tensor(x), 10, eps=0.0).numpy()
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-10)
    np.testing.assert_allclose(y.var(-1), 1, rtol=1e-10)
    ref = torch.nn.functional.layer_norm(torch.tensor(x), (10,), eps=0.0).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("shape,normalized", [((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((5,), (5,))])
def test_gradcheck_layer_norm(shape, normalized):
    rng = np.random.default_rng(5)
    x = tt.tensor(rng.standard_normal(shape) * 2 + 1, requires_grad=True)
    w = tt.tensor(rng.standard_normal(normalized) + 1, requires_grad=True)
    b = tt.tensor(rng.standard_normal(normalized), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, normalized, w, b), [x, w, b])
    assert gradcheck(lambda x: F.layer_norm(x, normalized), [x])


def test_gradcheck_non_contiguous_input_and_chained():
    rng = np.random.default_rng(6)
    base = tt.tensor(rng.standard_normal((4, 3, 5)), requires_grad=True)
    w = tt.tensor(rng.standard_normal(4) + 1, requires_grad=True)
    # a transposed (non-contiguous) view, and a layer_norm feeding another one
    assert gradcheck(lambda t, w: F.layer_norm(t.transpose(0, 2), 4, w), [base, w])
    assert gradcheck(lambda t: F.layer_norm(F.layer_norm(t, 5) * t, (3, 5)), [base])


def test_one_fused_op_with_small_saved_statistics():
    x = tt.randn(3, 4, 16, requires_grad=True)
    y = F.layer_norm(x, 16)
    node = y.grad_fn
    assert node.op == "layer_norm" and len(node.inputs) == 3 and node.inputs[0] is x
    assert tuple(node.attrs["normalized_shape"]) == (16,)
    assert node.attrs["mean"].shape == (3, 4, 1) and node.attrs["rstd"].shape == (3, 4, 1)
    np.testing.assert_allclose(node.attrs["mean"][..., 0], x.numpy().mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(node.attrs["rstd"][..., 0], 1 / np.sqrt(x.numpy().var(-1) + 1e-5), rtol=1e-4)


def test_module_parameters_repr_and_options(torch):
    ln = nn.LayerNorm(6)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    assert ln.weight.dtype == np.float32 and np.all(ln.weight.numpy() == 1) and np.all(ln.bias.numpy() == 0)
    assert repr(ln) == repr(torch.nn.LayerNorm(6))
    x = tt.randn(2, 6)
    np.testing.assert_allclose(ln(x).numpy(), F.layer_norm(x, 6).numpy(), rtol=1e-6)
    plain = nn.LayerNorm((2, 6), elementwise_affine=False)
    assert list(plain.parameters()) == [] and plain.weight is None and plain.bias is None
    x3 = tt.randn(4, 2, 6)
    ref = torch.nn.functional.layer_norm(torch.tensor(x3.numpy()), (2, 6)).numpy()
    np.testing.assert_allclose(plain(x3).numpy(), ref, rtol=1e-4, atol=1e-5)
    scale_only = nn.LayerNorm(6, bias=False)
    assert [n for n, _ in scale_only.named_parameters()] == ["weight"]
    np.testing.assert_allclose(scale_only(x).numpy(), F.layer_norm(x, 6).numpy(), rtol=1e-6)


def test_shape_errors_name_the_shapes():
    x = tt.randn(2, 3, 4)
    assert F.layer_norm(x, 4).shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match=r"\[2, 3, 4\]"):
        F.layer_norm(x, 3)
    with pytest.raises(RuntimeError):
        F.layer_norm(x, 4, weight=tt.ones(3))


@pytest.mark.parametrize("normalized", [(6,), (5, 6)])
def test_layer_norm_forward_alone_uses_the_statistics_it_is_given(normalized):
    """The forward called directly with given statistics: no statistics code runs."""
    from tinytorch.nn.transformer import _layer_norm_forward

    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 5, 6))
    axes = tuple(range(3 - len(normalized), 3))
    mean = x.mean(axes, keepdims=True) + 0.25                   # deliberately not x's own statistics
    rstd = 1.0 / np.sqrt(x.var(axes, keepdims=True) + 2.0)
    w, b = rng.standard_normal(normalized), rng.standard_normal(normalized)
    got = _layer_norm_forward(tt.tensor(x), tt.tensor(w), tt.tensor(b), normalized_shape=normalized, eps=1e-5,
                              mean=mean, rstd=rstd)
    np.testing.assert_allclose(np.asarray(got.numpy() if isinstance(got, tt.Tensor) else got),
                               (x - mean) * rstd * w + b, rtol=1e-12,
                               err_msg="(x - mean) * rstd, scaled by weight and shifted by bias, with the given mean and rstd")


def test_layer_norm_stats_of_float32_tokens_far_from_zero():
    from tinytorch.nn.transformer import _layer_norm_stats

    x = (100.0 + 0.01 * np.random.default_rng(0).standard_normal((3, 128))).astype(np.float32)
    _, rstd = _layer_norm_stats(x, 1, 1e-5)
    expected = 1 / np.sqrt(x.astype(np.float64).var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(rstd, expected, rtol=1e-2, err_msg="tokens of mean 100 and spread 0.01 in float32: "
                               "the variance must be measured around the mean (E[x²] - mean² loses the spread)")

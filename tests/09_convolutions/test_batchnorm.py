"""batch_norm and BatchNorm2d: outputs, input/weight/bias gradients, running statistics and
eval mode equal PyTorch's over several steps; gradcheck in float64 in both modes."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck
from tinytorch.nn import BatchNorm2d

TOL = {np.float64: dict(rtol=1e-9, atol=1e-10), np.float32: dict(rtol=1e-4, atol=1e-5)}


def rand(shape, dtype=np.float64, seed=0, scale=1.0, shift=0.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + shift).astype(dtype)


def test_norm_stats_in_training_use_the_batch_and_move_the_running_buffers_in_place():
    from tinytorch.nn.conv import _norm_stats

    x = rand((4, 3, 5, 2), scale=3.0, shift=1.0)
    running_mean, running_var = np.full(3, 0.5), np.full(3, 2.0)
    buffers = running_mean, running_var
    mean, var = _norm_stats(x, running_mean, running_var, True, 0.1)
    per_channel = x.transpose(1, 0, 2, 3).reshape(3, -1)  # M = 40 values per channel
    np.testing.assert_allclose(mean, per_channel.mean(1), rtol=1e-12)
    np.testing.assert_allclose(var, per_channel.var(1), rtol=1e-12)  # biased: what the batch is normalised by
    assert buffers[0] is running_mean and buffers[1] is running_var
    np.testing.assert_allclose(running_mean, 0.9 * 0.5 + 0.1 * per_channel.mean(1), rtol=1e-12)
    np.testing.assert_allclose(running_var, 0.9 * 2.0 + 0.1 * per_channel.var(1, ddof=1), rtol=1e-12)


def test_norm_stats_in_eval_are_copies_of_the_running_buffers():
    from tinytorch.nn.conv import _norm_stats

    running_mean, running_var = np.array([0.5, -1.0]), np.array([2.0, 0.25])
    mean, var = _norm_stats(rand((3, 2, 4)), running_mean, running_var, False, 0.1)
    np.testing.assert_array_equal(mean, [0.5, -1.0])
    np.testing.assert_array_equal(var, [2.0, 0.25])
    np.testing.assert_array_equal(running_mean, [0.5, -1.0])
    assert not np.shares_memory(mean, running_mean) and not np.shares_memory(var, running_var), \
        "a graph built in eval keeps these: a later training step must not change them"


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (2, 1, 3, 3), (8, 5, 2, 1), (3, 2, 4)])
def test_batch_norm_function_equals_pytorch(torch, training, affine, shape):
    C = shape[1]
    x = rand(shape, seed=C, scale=2.0, shift=0.5)
    rm, rv = rand(C, seed=1) * 0.1, np.abs(rand(C, seed=2)) + 0.5
    w, b = rand(C, seed=3) + 1, rand(C, seed=4)
    xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    rmo, rvo, rmt, rvt = tt.tensor(rm), tt.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    wo = tt.tensor(w, requires_grad=True) if affine else None
    bo = tt.tensor(b, requires_grad=True) if affine else None
    wt = torch.tensor(w, requires_grad=True) if affine else None
    bt = torch.tensor(b, requires_grad=True) if affine else None
    yo = F.batch_norm(xo, rmo, rvo, wo, bo, training=training, momentum=0.2, eps=1e-4)
    yt = torch.nn.functional.batch_norm(xt, rmt, rvt, wt, bt, training=training, momentum=0.2, eps=1e-4)
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), err_msg="output", **TOL[np.float64])
    np.testing.assert_allclose(rmo.numpy(), rmt.numpy(), err_msg="running_mean", **TOL[np.float64])
    np.testing.assert_allclose(rvo.numpy(), rvt.numpy(), err_msg="running_var", **TOL[np.float64])
    g = rand(shape, seed=9)
    (yo * tt.tensor(g)).sum().backward()
    yt.backward(torch.from_numpy(g))
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), err_msg="input grad", **TOL[np.float64])
    if affine:
        np.testing.assert_allclose(wo.grad.numpy(), wt.grad.numpy(), err_msg="weight grad", **TOL[np.float64])
        np.testing.assert_allclose(bo.grad.numpy(), bt.grad.numpy(), err_msg="bias grad", **TOL[np.float64])


def test_batch_norm_training_without_running_stats(torch):
    x = rand((6, 4, 3, 3), np.float32, seed=5, scale=3.0)
    y = F.batch_norm(tt.tensor(x), None, None, training=True)
    ref = torch.nn.functional.batch_norm(torch.from_numpy(x), None, None, training=True)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), ref.numpy(), **TOL[np.float32])


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradcheck(training):
    x = tt.tensor(rand((3, 2, 4, 3), seed=6, scale=2.0, shift=1.0), requires_grad=True)
    w = tt.tensor(rand(2, seed=7) + 1.0, requires_grad=True)
    b = tt.tensor(rand(2, seed=8), requires_grad=True)
    rm, rv = tt.tensor(np.array([0.3, -0.2])), tt.tensor(np.array([1.5, 0.7]))
    assert gradcheck(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=training), [x, w, b])
    assert gradcheck(lambda x: F.batch_norm(x, None, None, training=True) if training
                     else F.batch_norm(x, rm, rv), [x])


@pytest.mark.parametrize("kwargs", [dict(), dict(momentum=0.3, eps=1e-3), dict(momentum=None),
                                    dict(affine=False), dict(track_running_stats=False)])
def test_batchnorm2d_layer_equals_pytorch_over_steps(torch, kwargs):
    C = 3
    ours, theirs = BatchNorm2d(C, dtype=tt.float64, **kwargs), torch.nn.BatchNorm2d(C, dtype=torch.float64, **kwargs)
    if ours.affine:
        w, b = rand(C, seed=1) + 1, rand(C, seed=2)
        ours.weight.data, ours.bias.data = tt.tensor(w), tt.tensor(b)
        with torch.no_grad():
            theirs.weight.copy_(torch.from_numpy(w))
            theirs.bias.copy_(torch.from_numpy(b))
    for step in range(4):
        x = rand((5, C, 4, 3), seed=10 + step, scale=1 + step, shift=step - 1.5)
        xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yo, yt = ours(xo), theirs(xt)
        np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), err_msg=f"step {step}", **TOL[np.float64])
        g = rand(x.shape, seed=20 + step)
        (yo * tt.tensor(g)).sum().backward()
        yt.backward(torch.from_numpy(g))
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), **TOL[np.float64])
        if ours.affine:
            np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), **TOL[np.float64])
            np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), **TOL[np.float64])
            ours.weight.grad = ours.bias.grad = None
            theirs.weight.grad = theirs.bias.grad = None
        if ours.track_running_stats:
            np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), **TOL[np.float64])
            np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), **TOL[np.float64])
            assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == step + 1
    ours.eval()
    theirs.eval()
    x = rand((2, C, 3, 3), seed=99, scale=2.0)
    np.testing.assert_allclose(ours(tt.tensor(x)).numpy(), theirs(torch.from_numpy(x)).detach().numpy(),
                               err_msg="eval", **TOL[np.float64])
    if ours.track_running_stats:  # eval neither updates nor counts
        np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), **TOL[np.float64])
        assert ours.num_batches_tracked.item() == 4


def test_batchnorm2d_eval_is_independent_of_the_batch():
    tt.manual_seed(0)
    bn = BatchNorm2d(2)
    for _ in range(3):
        bn(tt.randn(8, 2, 4, 4) * 2 + 1)
    bn.eval()
    x = tt.randn(4, 2, 3, 3)
    alone = np.concatenate([bn(x[i:i + 1]).numpy() for i in range(4)])
    np.testing.assert_allclose(bn(x).numpy(), alone, rtol=1e-6, atol=1e-6)
    bn.train()
    assert not np.allclose(bn(x[:2]).numpy(), bn(x).numpy()[:2]), "train mode uses the batch's statistics"


def test_eval_graph_keeps_its_statistics():
    """An output computed in eval mode keeps the statistics it used, even when a later training
    step moves the running buffers in place (the statistics are copied, not aliased)."""
    tt.manual_seed(3)
    bn = BatchNorm2d(2, dtype=tt.float64)
    bn(tt.tensor(rand((4, 2, 3, 3), seed=1, scale=2.0, shift=1.0)))
    bn.eval()
    x = tt.tensor(rand((3, 2, 3, 3), seed=2), requires_grad=True)
    rm, rv = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    y = bn(x)
    bn.train()
    bn(tt.tensor(rand((4, 2, 3, 3), seed=3, scale=5.0, shift=-3.0)))  # moves the running statistics
    g = rand(x.shape, seed=4)
    (y * tt.tensor(g)).sum().backward()
    xhat = (x.numpy() - rm.reshape(1, 2, 1, 1)) / np.sqrt(rv.reshape(1, 2, 1, 1) + bn.eps)
    np.testing.assert_allclose(bn.weight.grad.numpy(), (g * xhat).sum(axis=(0, 2, 3)), **TOL[np.float64])
    np.testing.assert_allclose(x.grad.numpy(), g / np.sqrt(rv.reshape(1, 2, 1, 1) + bn.eps), **TOL[np.float64])


def test_batchnorm2d_state(torch):
    bn = BatchNorm2d(4)
    assert sorted(k for k in bn.state_dict()) == ["bias", "num_batches_tracked", "running_mean",
                                                  "running_var", "weight"]
    assert bn.num_batches_tracked.dtype == np.int64
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    x = tt.randn(3, 4, 2, 2)
    y = bn(x)
    ref = torch.nn.BatchNorm2d(4)(torch.from_numpy(x.numpy()))
    np.testing.assert_allclose(y.numpy(), ref.detach().numpy(), **TOL[np.float32])
    assert bn.num_batches_tracked.item() == 1
    plain = BatchNorm2d(4, affine=False, track_running_stats=False)
    assert list(plain.parameters()) == [] and plain.running_mean is None
    np.testing.assert_allclose(plain(x).numpy(), y.numpy(), **TOL[np.float32])


def test_batchnorm_errors(torch):
    bn = BatchNorm2d(3)
    with pytest.raises(ValueError, match=r"\(2, 4, 5, 5\)"):
        bn(tt.randn(2, 4, 5, 5))
    with pytest.raises(ValueError, match="4-D"):
        bn(tt.randn(2, 3, 5))
    with pytest.raises(ValueError, match="more than 1 value"):
        bn(tt.randn(1, 3, 1, 1))
    with pytest.raises(ValueError, match=r"\(3,\)"):
        F.batch_norm(tt.randn(2, 3, 2, 2), tt.zeros(4), tt.ones(4))
    # a valid call still works
    x = tt.randn(2, 3, 5, 5)
    np.testing.assert_allclose(bn(x).numpy(), torch.nn.BatchNorm2d(3)(torch.from_numpy(x.numpy())).detach().numpy(),
                               **TOL[np.float32])


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_rule_alone_matches_central_differences(training):
    """The rule called directly (no forward, no statistics code), against numpy differences."""
    from types import SimpleNamespace

    from tinytorch.nn.conv import _batch_norm_backward

    x, w, b = rand((3, 2, 2, 2), seed=1, scale=2.0), rand(2, seed=2, shift=1.0), rand(2, seed=3)
    upstream = rand(x.shape, seed=4)
    shape = (1, 2, 1, 1)
    fixed_mean, fixed_var = np.array([0.3, -0.2]), np.array([1.5, 0.7])

    def loss(xv, wv, bv):
        if training:  # the statistics follow x
            mean, var = xv.mean(axis=(0, 2, 3)), xv.var(axis=(0, 2, 3))
        else:         # eval: constants
            mean, var = fixed_mean, fixed_var
        y = (xv - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5) * wv.reshape(shape) + bv.reshape(shape)
        return float((y * upstream).sum())

    def numerical(index):
        args = [x.copy(), w.copy(), b.copy()]
        grad = np.zeros_like(args[index])
        for i in np.ndindex(grad.shape):
            plus, minus = [a.copy() for a in args], [a.copy() for a in args]
            plus[index][i] += 1e-6
            minus[index][i] -= 1e-6
            grad[i] = (loss(*plus) - loss(*minus)) / 2e-6
        return grad

    mean = x.mean(axis=(0, 2, 3)) if training else fixed_mean
    var = x.var(axis=(0, 2, 3)) if training else fixed_var
    node = SimpleNamespace(inputs=(tt.tensor(x), tt.tensor(w), tt.tensor(b)),
                           attrs={"mean": mean, "invstd": 1.0 / np.sqrt(var + 1e-5), "training": training,
                                  "eps": 1e-5})
    got = _batch_norm_backward(node, upstream)
    for name, index in (("x̄", 0), ("γ̄", 1), ("β̄", 2)):
        np.testing.assert_allclose(np.asarray(got[index]), numerical(index), rtol=1e-6, atol=1e-7,
                                   err_msg=f"{'training' if training else 'eval'}: the rule's {name}")

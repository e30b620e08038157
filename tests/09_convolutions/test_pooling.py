"""max_pool2d / avg_pool2d and their layers: outputs, argmax indices and input gradients equal
torch.nn.functional over a grid of kernel sizes, strides and paddings; gradcheck in float64."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck
from tinytorch.nn import AvgPool2d, MaxPool2d

TOL = {np.float64: dict(rtol=1e-10, atol=1e-11), np.float32: dict(rtol=1e-5, atol=1e-6)}
SHAPES = [(2, 3, 7, 6), (1, 1, 5, 9), (3, 2, 8, 8)]
# (kernel, stride, padding); PyTorch requires padding <= kernel // 2
GRID = [(k, s, p) for k in (1, 2, 3, 5) for s in (None, 1, 2) for p in (0, 1, 2) if p <= k // 2]


def distinct(shape, dtype=np.float64, seed=0):
    """All values different (no ties in a max), spaced 0.1 apart, centred on 0."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) / 10.0 - n / 20.0).astype(dtype)


def both(torch, op, x, k, s, p, seed=1):
    """Forward + backward of the same pooling in both frameworks: (ours, theirs) = [y, gx]."""
    xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo = getattr(F, op)(xo, k, s, p)
    yt = getattr(torch.nn.functional, op)(xt, k, s, p)
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(x.dtype)
    (yo * tt.tensor(g)).sum().backward()
    yt.backward(torch.from_numpy(g))
    return [yo.numpy(), xo.grad.numpy()], [yt.detach().numpy(), xt.grad.numpy()]


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("k, s, p", GRID)
@pytest.mark.parametrize("shape_id", range(len(SHAPES)))
def test_pooling_and_grads_equal_pytorch(torch, op, k, s, p, shape_id):
    shape = SHAPES[shape_id]
    if k > min(shape[2:]) + 2 * p:
        return
    x = distinct(shape, seed=k * 7 + (s or 0) + p + 10 * shape_id)
    ours, theirs = both(torch, op, x, k, s, p)
    assert ours[0].shape == theirs[0].shape
    np.testing.assert_allclose(ours[0], theirs[0], err_msg="output", **TOL[np.float64])
    np.testing.assert_allclose(ours[1], theirs[1], err_msg="input grad", **TOL[np.float64])


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("k, s, p", [((3, 2), (1, 2), (1, 0)), ((2, 4), 2, (0, 2)), ((1, 3), (2, 1), (0, 1))])
def test_pooling_rectangular_kernels(torch, op, k, s, p):
    x = distinct((2, 3, 7, 9), seed=3)
    ours, theirs = both(torch, op, x, k, s, p)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, **TOL[np.float64])


@pytest.mark.parametrize("k, s, p", [(2, None, 0), (3, 1, 1), (3, 2, 1), ((2, 3), (1, 2), (1, 0))])
def test_max_pool2d_indices_equal_pytorch(torch, k, s, p):
    x = distinct((2, 3, 6, 7), seed=4)
    y, idx = F.max_pool2d(tt.tensor(x), k, s, p, return_indices=True)
    yt, it = torch.nn.functional.max_pool2d(torch.from_numpy(x), k, s, p, return_indices=True)
    assert idx.dtype == np.int64
    np.testing.assert_array_equal(idx.numpy(), it.numpy())
    np.testing.assert_array_equal(y.numpy(), yt.numpy())


def test_max_pool2d_backward_routes_gradient_to_argmax():
    x = np.array([[[[1.0, 5.0, 2.0, 0.0],
                    [3.0, 4.0, 8.0, 1.0],
                    [0.0, 2.0, 6.0, 7.0],
                    [9.0, 1.0, 3.0, 2.0]]]])
    xo = tt.tensor(x, requires_grad=True)
    y = F.max_pool2d(xo, 3, stride=1)  # overlapping windows: 8 wins three times, 9 once
    np.testing.assert_array_equal(y.numpy()[0, 0], [[8, 8], [9, 8]])
    (y * tt.tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]]))).sum().backward()
    expected = np.zeros((4, 4))
    expected[1, 2], expected[3, 0] = 1 + 2 + 4, 3
    np.testing.assert_array_equal(xo.grad.numpy()[0, 0], expected)


def test_max_pool_ties_pick_the_first_like_pytorch(torch):
    x = np.zeros((1, 2, 4, 4), dtype=np.float32)
    x[0, 1, :2, :2] = 3.0
    xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.max_pool2d(xo, 2).sum().backward()
    torch.nn.functional.max_pool2d(xt, 2).sum().backward()
    np.testing.assert_array_equal(xo.grad.numpy(), xt.grad.numpy())


def test_avg_pool_counts_padding():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    y = F.avg_pool2d(tt.tensor(x), 3, stride=2, padding=1).numpy()[0, 0]
    xp = np.pad(x[0, 0], 1)
    expected = [[xp[i:i + 3, j:j + 3].sum() / 9 for j in (0, 2)] for i in (0, 2)]
    np.testing.assert_allclose(y, expected, rtol=1e-12)


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("k, s, p", [(2, None, 0), (3, 2, 1), (2, 1, 1), ((3, 2), (1, 2), (1, 0))])
def test_pooling_gradcheck(op, k, s, p):
    x = tt.tensor(distinct((2, 2, 5, 6), seed=5), requires_grad=True)
    assert gradcheck(lambda t: getattr(F, op)(t, k, s, p), [x])


def test_pooling_float32_and_graph():
    x = tt.randn(2, 3, 6, 6, requires_grad=True)
    for op, name in [(F.max_pool2d, "max_pool2d"), (F.avg_pool2d, "avg_pool2d")]:
        y = op(x, 2)
        assert y.dtype == np.float32 and y.shape == (2, 3, 3, 3)
        assert y.grad_fn.op == name
        assert y.grad_fn.attrs["kernel_size"] == (2, 2) and y.grad_fn.attrs["stride"] == (2, 2)


def test_pool_layers(torch):
    x = distinct((2, 3, 7, 8), np.float32, seed=6)
    for ours, theirs in [(MaxPool2d(2), torch.nn.MaxPool2d(2)),
                         (MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
                         (AvgPool2d(2), torch.nn.AvgPool2d(2)),
                         (AvgPool2d((3, 2), (1, 2), (1, 0)), torch.nn.AvgPool2d((3, 2), (1, 2), (1, 0)))]:
        np.testing.assert_allclose(ours(tt.tensor(x)).numpy(), theirs(torch.from_numpy(x)).numpy(),
                                   **TOL[np.float32])
        assert list(ours.parameters()) == []


def test_pooling_errors(torch):
    x = tt.randn(1, 2, 6, 6)
    with pytest.raises(ValueError, match="half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match=r"4-D.*\(2, 6, 6\)"):
        F.avg_pool2d(tt.randn(2, 6, 6), 2)
    with pytest.raises(ValueError, match="stride"):
        F.max_pool2d(x, 2, stride=0)
    with pytest.raises(ValueError, match="larger"):
        F.avg_pool2d(tt.randn(1, 1, 2, 2), 5, padding=1)
    # a valid call still works
    ref = torch.nn.functional.max_pool2d(torch.from_numpy(x.numpy()), 2)
    np.testing.assert_array_equal(F.max_pool2d(x, 2).numpy(), ref.numpy())


def test_max_pool2d_backward_runs_no_python_loop_over_positions():
    """The module's systems rule holds for the scatter too: numpy adds, Python does not loop."""
    from types import SimpleNamespace

    from tinytorch.nn.conv import _max_pool2d_backward, _max_pool2d_indices
    from tinytorch.testing import python_steps

    def steps(n):
        x = np.zeros((1, 2, n, n))
        node = SimpleNamespace(inputs=(tt.tensor(x),), attrs={"indices": _max_pool2d_indices(x, (2, 2), (2, 2), (0, 0))})
        return python_steps(_max_pool2d_backward, node, np.ones((1, 2, n // 2, n // 2)))

    small, large = steps(4), steps(16)
    assert large <= small + 10, (f"the max-pool backward ran {small} Python steps on a 4x4 image and {large} on a "
                                 "16x16 one: a Python loop runs over the output positions (scatter-add with numpy)")


def test_max_pool2d_indices_alone_pick_the_first_of_tied_maxima():
    """_max_pool2d_indices called directly: on a tie, the first maximum in row-major window order."""
    from tinytorch.nn.conv import _max_pool2d_indices

    x = np.random.default_rng(5).integers(0, 3, (2, 2, 6, 6)).astype(np.float64)   # many ties
    got = _max_pool2d_indices(x, (3, 2), (1, 2), (0, 0))
    expected = np.zeros_like(got)
    for n, c, i, j in np.ndindex(*got.shape):
        window = [(x[n, c, i + u, 2 * j + v], (i + u) * 6 + 2 * j + v) for u in range(3) for v in range(2)]
        best = max(value for value, _ in window)
        expected[n, c, i, j] = next(index for value, index in window if value == best)
    np.testing.assert_array_equal(got, expected, err_msg="ties: the first maximum of the window (row by row)")

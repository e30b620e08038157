"""Structured pruning: importance scores equal torch's norms, the kept units, and layers that
really shrink (fewer parameters and FLOPs, valid shapes, and the same outputs when the
removed neurons or channels were dead)."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import compression as C
from tinytorch import nn
from tinytorch.nn import functional as F


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shape", [(6, 4), (3, 11), (5, 3, 2, 2)])
def test_neuron_importance_equals_torch_norms(torch, p, shape):
    w = np.random.default_rng(len(shape) + p).standard_normal(shape)
    got = C.neuron_importance(w, p)
    expected = torch.linalg.vector_norm(torch.tensor(w).reshape(shape[0], -1), ord=p, dim=1).numpy()
    assert got.shape == (shape[0],), f"expected one score per output unit, shape {(shape[0],)}, got {got.shape}"
    np.testing.assert_allclose(got, expected, rtol=1e-10, err_msg=f"L{p} norm of each row / filter")


def test_channels_to_keep_keeps_highest_in_order():
    scores = np.array([0.4, 2.0, 0.1, 5.0, 0.3, 1.0, 0.2, 3.0])
    np.testing.assert_array_equal(C.channels_to_keep(scores, 0.5), [1, 3, 5, 7],
                                  err_msg="amount 0.5 of 8: keep the 4 highest scores, in increasing index order")
    np.testing.assert_array_equal(C.channels_to_keep(scores, 0.0), np.arange(8), err_msg="amount 0 keeps all")
    np.testing.assert_array_equal(C.channels_to_keep(scores, 0.95), [3], err_msg="one unit always survives")
    np.testing.assert_array_equal(C.channels_to_keep(np.ones(4), 0.5), [2, 3],
                                  err_msg="ties: the earlier units are removed first")
    tied = np.round(np.random.default_rng(6).standard_normal(400), 1)  # hundreds of tied scores
    by_rank = sorted(range(400), key=lambda i: (tied[i], i))
    np.testing.assert_array_equal(C.channels_to_keep(tied, 0.4), sorted(by_rank[160:]),
                                  err_msg="400 scores rounded to 0.1: among tied scores the earlier unit goes first")
    assert C.channels_to_keep(scores, 0.5).dtype == np.int64, "indices must be int64"
    with pytest.raises(ValueError, match="amount"):
        C.channels_to_keep(scores, 1.0)


def _kill(layer, units):
    with tt.no_grad():
        layer.weight.numpy()[units] = 0.0
        layer.bias.numpy()[units] = -1.0  # ReLU(0·x - 1) = 0: a dead unit


def test_shrink_linear_dead_neurons_same_outputs():
    tt.manual_seed(0)
    fc1, fc2 = nn.Linear(7, 10), nn.Linear(10, 3)
    _kill(fc1, [0, 4, 5, 9])
    x = tt.randn(6, 7)
    keep = C.channels_to_keep(C.neuron_importance(fc1.weight.numpy(), 1), 0.4)
    np.testing.assert_array_equal(keep, [1, 2, 3, 6, 7, 8], err_msg="the dead neurons have the lowest norm")
    n1, n2 = C.shrink_linear(fc1, fc2, keep)
    assert (n1.in_features, n1.out_features, n2.in_features, n2.out_features) == (7, 6, 6, 3), \
        f"expected Linear(7, 6) and Linear(6, 3), got {n1} and {n2}"
    assert n1.weight.shape == (6, 7) and n1.bias.shape == (6,) and n2.weight.shape == (3, 6)
    np.testing.assert_allclose(n2(F.relu(n1(x))).numpy(), fc2(F.relu(fc1(x))).numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="removing dead neurons must not change the outputs")
    np.testing.assert_array_equal(n2.bias.numpy(), fc2.bias.numpy(), err_msg="the next layer's bias is unchanged")
    assert fc1.weight.shape == (10, 7), "the original layer must be untouched"
    shared = [(a, b) for a, pa in (("n1", n1), ("n2", n2)) for b, pb in (("fc1", fc1), ("fc2", fc2))
              for x in pa.parameters() for y in pb.parameters() if np.shares_memory(x.numpy(), y.numpy())]
    assert not shared, f"the new layers must share no memory with the originals; shared: {shared}"


def test_shrink_linear_live_neurons_rows_and_columns():
    tt.manual_seed(1)
    fc1, fc2 = nn.Linear(4, 5, bias=False), nn.Linear(5, 2)
    keep = np.array([0, 3, 4])
    n1, n2 = C.shrink_linear(fc1, fc2, keep)
    assert n1.bias is None, "a layer without bias stays without bias"
    np.testing.assert_array_equal(n1.weight.numpy(), fc1.weight.numpy()[keep], err_msg="rows keep of the weight")
    np.testing.assert_array_equal(n2.weight.numpy(), fc2.weight.numpy()[:, keep], err_msg="columns keep")


def test_shrink_conv2d_to_conv_and_to_linear_dead_channels():
    tt.manual_seed(2)
    c1, c2 = nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(6, 4, 2, stride=2)
    head = nn.Linear(6 * 5 * 5, 3)
    _kill(c1, [1, 2])
    x = tt.randn(2, 3, 5, 5)
    keep = C.channels_to_keep(C.neuron_importance(c1.weight.numpy(), 2), 2 / 6)
    np.testing.assert_array_equal(keep, [0, 3, 4, 5], err_msg="the dead filters have the lowest L2 norm")
    k1, k2 = C.shrink_conv2d(c1, c2, keep)
    assert k1.weight.shape == (4, 3, 3, 3) and k1.bias.shape == (4,) and k2.weight.shape == (4, 4, 2, 2), \
        f"conv shapes: got {k1.weight.shape}, {k2.weight.shape}"
    assert (k1.padding, k2.stride, k2.kernel_size) == ((1, 1), (2, 2), (2, 2)), "the geometry must be kept"
    np.testing.assert_allclose(k2(F.relu(k1(x))).numpy(), c2(F.relu(c1(x))).numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="conv → conv: the same outputs without the dead channels")
    h1, h2 = C.shrink_conv2d(c1, head, keep)
    assert h2.weight.shape == (3, 4 * 25), f"the Linear after Flatten keeps 25 columns per channel, got {h2.weight.shape}"
    flat = nn.Flatten()
    np.testing.assert_allclose(h2(flat(F.relu(h1(x)))).numpy(), head(flat(F.relu(c1(x)))).numpy(),
                               rtol=1e-5, atol=1e-6, err_msg="conv → Flatten → Linear: the same outputs")


def test_prune_neurons_shrinks_mlp_params_and_flops():
    tt.manual_seed(3)
    model = nn.Sequential(nn.Linear(16, 40), nn.ReLU(), nn.Linear(40, 20), nn.ReLU(), nn.Linear(20, 5))
    x = tt.randn(4, 16)
    small = C.prune_neurons(model, 0.5, p=2)
    assert [small[i].out_features for i in (0, 2, 4)] == [20, 10, 5], \
        f"hidden widths halve, the output stays: got {[small[i].out_features for i in (0, 2, 4)]}"
    assert small(x).shape == (4, 5), "outputs keep a valid shape"
    expected_params = 16 * 20 + 20 + 20 * 10 + 10 + 10 * 5 + 5
    assert C.count_parameters(small) == expected_params, f"expected {expected_params} parameters"
    assert C.count_parameters(small) < C.count_parameters(model), "structured pruning reduces the parameters"
    assert C.count_flops(small, x) == 2 * (16 * 20 + 20 * 10 + 10 * 5), "FLOPs: 2 per weight per example"
    assert C.count_flops(small, x) < C.count_flops(model, x), "structured pruning reduces the FLOPs"
    keep0 = C.channels_to_keep(C.neuron_importance(model[0].weight.numpy(), 2), 0.5)
    np.testing.assert_array_equal(small[0].weight.numpy(), model[0].weight.numpy()[keep0],
                                  err_msg="the first layer keeps its rows of highest L2 norm")


def test_prune_neurons_cnn_dead_channels_same_outputs():
    tt.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 6, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 10))
    _kill(model[0], [0, 2, 5, 7])
    _kill(model[3], [1, 4, 5])
    x = tt.randn(3, 1, 8, 8)
    small = C.prune_neurons(model, 0.5)
    assert (small[0].out_channels, small[3].in_channels, small[3].out_channels, small[6].in_features) == (4, 4, 3, 48), \
        "widths after removing half the channels of each conv"
    np.testing.assert_allclose(small(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="removing only dead channels must leave the outputs unchanged")
    assert C.count_flops(small, x) < C.count_flops(model, x) and C.count_parameters(small) < C.count_parameters(model)

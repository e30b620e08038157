"""Magnitude pruning: exact sparsity, per-layer and global masks equal torch.nn.utils.prune's,
and the mask stays applied through training (pruned weights and their gradients stay exactly
zero under SGD with momentum, Adam and AdamW)."""
import numpy as np
import pytest
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import functional as F
from tinytorch.nn import prune
from tinytorch.optim import SGD, Adam, AdamW


def _torch_prune(torch):
    """torch.nn.utils.prune (a submodule that `import torch` does not load)."""
    return torch_reference.companion_module(torch, "torch.nn.utils.prune")


@pytest.mark.parametrize("shape", [(7,), (6, 9), (4, 3, 2, 2)])
@pytest.mark.parametrize("k", [0, 1, 5, 24])
def test_magnitude_mask_zeros_exactly_k_smallest(shape, k):
    rng = np.random.default_rng(sum(shape) + k)
    values = rng.standard_normal(shape).astype(np.float32)
    k = min(k, values.size)
    before = values.copy()
    mask = prune.magnitude_mask(values, k)
    np.testing.assert_array_equal(values, before, err_msg="magnitude_mask must leave the values unchanged")
    assert mask.shape == values.shape and mask.dtype == values.dtype, \
        f"expected a mask of shape {values.shape} and dtype {values.dtype}, got {mask.shape} {mask.dtype}"
    assert set(np.unique(mask).tolist()) <= {0.0, 1.0}, f"a mask holds only 0 and 1, got {np.unique(mask)}"
    assert int((mask == 0).sum()) == k, f"expected exactly {k} zeros, got {int((mask == 0).sum())}"
    order = np.argsort(np.abs(values).ravel(), kind="stable")
    expected = np.ones(values.size, dtype=np.float32)
    expected[order[:k]] = 0
    np.testing.assert_array_equal(mask.ravel(), expected, err_msg="the zeros must sit at the k smallest |w|")


def test_magnitude_mask_uses_magnitude_and_breaks_ties_by_position():
    values = np.array([-5.0, 0.5, -0.5, 0.5, 3.0, -0.1])
    np.testing.assert_array_equal(prune.magnitude_mask(values, 1), [1, 1, 1, 1, 1, 0],
                                  err_msg="-0.1 is the smallest |w|; -5 is the largest")
    np.testing.assert_array_equal(prune.magnitude_mask(values, 3), [1, 0, 0, 1, 1, 0],
                                  err_msg="three tied |w| = 0.5: exactly k zeros, the earlier positions first")


@pytest.mark.parametrize("amount", [0.0, 0.3, 0.5, 0.77, 1.0, 7])
def test_magnitude_mask_matches_torch_l1_unstructured(torch, amount):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    theirs = torch.nn.Linear(5, 8)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    _torch_prune(torch).l1_unstructured(theirs, "weight", amount=amount)
    model = nn.Sequential(nn.Linear(5, 8))
    with tt.no_grad():
        model[0].weight.copy_(tt.tensor(w))
    prune.l1_unstructured(model, "0.weight", amount)
    np.testing.assert_array_equal(model[0].weight_mask.numpy(), theirs.weight_mask.numpy(),
                                  err_msg=f"amount={amount}: the mask must equal torch.nn.utils.prune's")
    np.testing.assert_array_equal(model[0].weight.numpy(), theirs.weight.detach().numpy(),
                                  err_msg="the pruned weight must equal torch's")


def test_global_magnitude_masks_rank_all_layers_together(torch):
    rng = np.random.default_rng(4)
    shapes, scales = [(10, 6), (4, 10), (3, 4)], [1.0, 0.05, 3.0]
    ws = [(rng.standard_normal(s) * c).astype(np.float32) for s, c in zip(shapes, scales)]
    theirs = [torch.nn.Linear(s[1], s[0]) for s in shapes]
    for layer, w in zip(theirs, ws):
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(w))
    _torch_prune(torch).global_unstructured([(l, "weight") for l in theirs],
                                             pruning_method=_torch_prune(torch).L1Unstructured, amount=0.6)
    k = round(0.6 * sum(w.size for w in ws))
    masks = prune.global_magnitude_masks(ws, k)
    assert [m.shape for m in masks] == shapes, f"expected one mask per array with shapes {shapes}"
    assert sum(int((m == 0).sum()) for m in masks) == k, f"expected {k} zeros in total"
    for i, (m, layer) in enumerate(zip(masks, theirs)):
        np.testing.assert_array_equal(m, layer.weight_mask.numpy(),
                                      err_msg=f"layer {i}: the global mask must equal torch's global_unstructured")
    assert (masks[1] == 0).all(), "the layer of tiny weights (scale 0.05) is pruned entirely"


def test_global_unstructured_reaches_requested_sparsity():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 10), nn.ReLU(), nn.Linear(10, 4))
    names = ["0.weight", "2.weight", "4.weight"]
    prune.global_unstructured(model, names, 0.75)
    total = sum(model[i].weight.numel() for i in (0, 2, 4))
    zeros = sum(int((model[i].weight.numpy() == 0).sum()) for i in (0, 2, 4))
    assert zeros == round(0.75 * total), f"expected {round(0.75 * total)} zeros over the three layers, got {zeros}"
    assert prune.is_pruned(model), "is_pruned must see the pruned layers"
    sizes = [model[i].weight.numel() for i in (0, 2, 4)]
    per_layer = [prune.sparsity(model[i].weight) for i in (0, 2, 4)]
    assert len(set(per_layer)) > 1, f"global pruning gives layers different sparsities, got {per_layer} (sizes {sizes})"


@pytest.mark.parametrize("amount", [0.25, 0.5, 0.9])
def test_l1_unstructured_reaches_requested_sparsity_per_layer(amount):
    tt.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 5))
    prune.l1_unstructured(model, "0.weight", amount)
    prune.l1_unstructured(model, "3.weight", amount)
    for i in (0, 3):
        n = model[i].weight.numel()
        assert int((model[i].weight.numpy() == 0).sum()) == round(amount * n), \
            f"layer {i}: expected round({amount} * {n}) zeros"
    out = model(tt.randn(2, 3, 6, 6))
    assert out.shape == (2, 5), f"the pruned model still gives outputs of shape (2, 5), got {out.shape}"


OPTIMIZERS = {
    "sgd-momentum": lambda p: SGD(p, lr=0.3, momentum=0.9),
    "sgd-nesterov-wd": lambda p: SGD(p, lr=0.3, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "adam": lambda p: Adam(p, lr=0.05),
    "adamw": lambda p: AdamW(p, lr=0.05, weight_decay=0.1),
}


@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_prunedmodule_forward_keeps_pruned_weights_exactly_zero(opt):
    tt.manual_seed(2)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    x, y = tt.randn(32, 6), tt.randint(0, 3, (32,))
    optimizer = OPTIMIZERS[opt](model.parameters())  # built before pruning: it holds the same Parameters
    for step in range(10):
        if step == 4:  # the optimizer already has momentum / moments for every weight
            prune.global_unstructured(model, ["0.weight", "2.weight"], 0.6)
            masks = [model[i].weight_mask.numpy().copy() for i in (0, 2)]
            origs = [model[i].weight_orig.numpy().copy() for i in (0, 2)]
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if step >= 4:
            for i, mask in zip((0, 2), masks):
                assert model[i].weight_orig.grad is not None, \
                    f"step {step}, layer {i}: after backward, weight_orig.grad is None (no gradient reached it)"
                grad = model[i].weight_orig.grad.numpy()
                assert (grad[mask == 0] == 0).all(), \
                    f"step {step}, layer {i}: the gradient of weight_orig must be exactly 0 where pruned"
    model(x)
    for i, mask, orig in zip((0, 2), masks, origs):
        w = model[i].weight.numpy()
        assert (w[mask == 0] == 0).all(), \
            f"{opt}, layer {i}: after 6 steps the pruned weights must still be exactly 0, got {w[mask == 0][:5]}"
        np.testing.assert_array_equal(w, model[i].weight_orig.numpy() * mask,
                                      err_msg="the layer computes with weight_orig * weight_mask")
        moved = np.abs(model[i].weight_orig.numpy() - orig)[mask == 1]
        assert moved.max() > 1e-4, f"{opt}, layer {i}: the kept weights must keep learning"


def test_prunedmodule_forward_equals_torch_pruned_layer(torch):
    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((4, 7)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    x, g = rng.standard_normal((3, 7)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    theirs = torch.nn.Linear(7, 4)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
        theirs.bias.copy_(torch.tensor(b))
    _torch_prune(torch).l1_unstructured(theirs, "weight", amount=0.5)
    model = nn.Sequential(nn.Linear(7, 4))
    with tt.no_grad():
        model[0].weight.copy_(tt.tensor(w))
        model[0].bias.copy_(tt.tensor(b))
    prune.l1_unstructured(model, "0.weight", 0.5)
    yo, yt = model(tt.tensor(x)), theirs(torch.tensor(x))
    yo.backward(tt.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="outputs must equal torch's pruned Linear")
    np.testing.assert_allclose(model[0].weight_orig.grad.numpy(), theirs.weight_orig.grad.numpy(), rtol=1e-5,
                               atol=1e-6, err_msg="weight_orig's gradient must equal torch's (masked)")


def test_prunedmodule_forward_conv2d_and_state_dict():
    tt.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1))
    x = tt.randn(2, 2, 5, 5)
    prune.l1_unstructured(model, "0.weight", 0.5)
    with tt.no_grad():  # change the original: the forward must recompute the weight from it
        model[0].weight_orig.mul_(2.0)
    mask = model[0].weight_mask.numpy()
    out = model(x)
    ref = F.conv2d(x, tt.tensor(model[0].weight_orig.numpy() * mask), model[0].bias, padding=1)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="the forward must use weight_orig * weight_mask as it is now")
    assert set(model.state_dict()) == {"0.module.weight_orig", "0.module.weight_mask", "0.module.bias"}, \
        f"unexpected state_dict keys {sorted(model.state_dict())}"


def test_iterative_pruning_and_remove():
    tt.manual_seed(4)
    model = nn.Sequential(nn.Linear(10, 10))
    prune.l1_unstructured(model, "0.weight", 0.5)
    first = model[0].weight_mask.numpy().copy()
    prune.l1_unstructured(model, "0.weight", 0.8)
    second = model[0].weight_mask.numpy()
    assert int((second == 0).sum()) == 80, "pruning 0.5 then 0.8 leaves 80% zeros"
    assert (second[first == 0] == 0).all(), "weights pruned once stay pruned"
    prune.remove(model, "0.weight")
    assert isinstance(model[0], nn.Linear) and not prune.is_pruned(model), "remove puts the plain layer back"
    assert [n for n, _ in model.named_parameters()] == ["0.bias", "0.weight"] or \
        sorted(n for n, _ in model.named_parameters()) == ["0.bias", "0.weight"], "remove restores weight and bias"
    assert int((model[0].weight.numpy() == 0).sum()) == 80, "the zeros are permanent after remove"


def test_global_magnitude_masks_keep_each_arrays_dtype_and_break_ties_in_order():
    arrays = [np.round(np.random.default_rng(4).standard_normal(600), 1), np.full(300, 0.1, dtype=np.float32)]
    masks = prune.global_magnitude_masks(arrays, 400)
    dtypes = [m.dtype for m in masks]
    assert dtypes == [np.dtype(np.float64), np.dtype(np.float32)], f"each mask has its array's dtype, got {dtypes}"
    flat, mags = np.concatenate([m.ravel() for m in masks]), np.abs(np.concatenate(arrays))
    assert int((flat == 0).sum()) == 400, f"exactly 400 zeros in all, got {int((flat == 0).sum())}"
    tied = np.flatnonzero(np.isclose(mags, mags[flat == 0].max()))
    assert bool(np.all(np.diff(flat[tied]) >= 0)), \
        f"tied magnitudes at the cut: the earlier array and position go first; the mask along them: {flat[tied]}"


def test_magnitude_mask_breaks_many_ties_by_position():
    values = np.round(np.random.default_rng(8).standard_normal((20, 15)), 1)
    mask = prune.magnitude_mask(values, 120).ravel()
    mags = np.abs(values).ravel()
    tied = np.flatnonzero(mags == mags[mask == 0].max())
    assert int((mask == 0).sum()) == 120, f"exactly 120 zeros, got {int((mask == 0).sum())}"
    assert bool(np.all(np.diff(mask[tied]) >= 0)), \
        f"the tied magnitudes at the cut are pruned earlier positions first; the mask along them: {mask[tied]}"


def test_global_magnitude_masks_break_a_tie_across_arrays_by_array_order():
    first, second = prune.global_magnitude_masks([np.array([0.5, 0.1]), np.array([0.1, 0.5])], 1)
    assert (first.tolist(), second.tolist()) == ([1.0, 0.0], [1.0, 1.0]), \
        f"a tie between two arrays: the earlier array's weight goes first; got {first.tolist()}, {second.tolist()}"


def test_magnitude_mask_has_the_values_dtype():
    for dtype in (np.float32, np.float64):
        assert prune.magnitude_mask(np.array([1.0, 0.5, 0.5, 2.0], dtype=dtype), 2).dtype == np.dtype(dtype)


def test_prunedmodule_forward_recomputes_every_pruned_parameter_of_a_layer():
    tt.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 5))
    x = tt.randn(3, 4)
    w0, b0 = model[0].weight.numpy().copy(), model[0].bias.numpy().copy()
    prune.l1_unstructured(model, "0.weight", 0.5)
    prune.l1_unstructured(model, "0.bias", 0.4)
    layer = model[0].module
    np.testing.assert_array_equal(layer.weight_orig.numpy(), w0)
    np.testing.assert_array_equal(layer.bias_orig.numpy(), b0)
    model(x).sum().backward()
    assert layer.weight_orig.grad is not None and layer.bias_orig.grad is not None, "both originals must train"
    np.testing.assert_array_equal(model[0].bias.numpy() == 0, layer.bias_mask.numpy() == 0)


def test_prunedmodule_forward_leaves_the_originals_whole():
    tt.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 5))
    w0 = model[0].weight.numpy().copy()
    prune.l1_unstructured(model, "0.weight", 0.5)
    model(tt.randn(3, 4)).sum().backward()
    np.testing.assert_array_equal(model[0].module.weight_orig.numpy(), w0,
                                  err_msg="forward must not zero weight_orig: only the product is masked")


def test_prunedmodule_forward_passes_every_argument_on():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(tt.ones(3))

        def forward(self, x, y, scale=1.0):
            return (x + y) * self.weight * scale

    model = nn.Sequential(Scaled())
    prune.l1_unstructured(model, "0.weight", 1 / 3)
    out = model[0](tt.ones(3), tt.ones(3), scale=2.0).numpy()
    np.testing.assert_allclose(out, [0.0, 4.0, 4.0], err_msg="positional and keyword arguments reach the layer")

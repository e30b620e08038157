"""make_variants: five independent variants of the trained CNN, each meeting its threshold."""
import numpy as np
import pytest

import tinytorch
from tinytorch.ao.quantization import QuantizedLinear, quantize_model
from tinytorch.capstone import make_variants
from tinytorch.compression import model_bytes
from tinytorch.data import DataLoader
from tinytorch.nn import prune

NAMES = ["float32", "int8", "pruned", "shrunk", "numba"]


def test_make_variants_names_and_eval_mode(built):
    variants, _, _ = built
    assert sorted(variants) == sorted(NAMES), f"expected the variants {NAMES}, got {sorted(variants)}"
    training = {n: v.training for n, v in variants.items()}
    assert not any(training.values()), f"every variant should be in eval mode, got training flags {training}"


def test_make_variants_leaves_the_model_unchanged(trained, built):
    model, before = trained
    variants, _, _ = built
    for k, v in model.state_dict().items():
        unchanged = k in before and np.array_equal(v.numpy(), before[k])
        assert unchanged, f"the trained model's {k} changed in make_variants (copy before pruning in place)"
    assert not prune.is_pruned(model), "the trained model must not be wrapped for pruning"
    same = [n for n, v in variants.items() if v is model]
    assert not same, f"variants {same} are the trained model itself, expected new models"
    p, f = variants["pruned"], variants["float32"]
    assert p[4].weight.numpy() is not f[4].weight.numpy(), "pruned and float32 share a weight array"


def test_make_variants_shares_no_layer_with_the_model(trained, built):
    """prune_neurons shares the layers it does not cut: a variant cut from the model itself
    would share its ReLUs, and fine-tuning it would put the model's layers in train mode."""
    model, _ = trained
    variants, _, _ = built
    mine = list(model.modules())
    shared = {n: [type(m).__name__ for m in v.modules() if any(m is o for o in mine)] for n, v in variants.items()}
    assert not any(shared.values()), f"variants share layers with the trained model: { {n: s for n, s in shared.items() if s} }"


def test_make_variants_float32_accuracy(built, trained, digits):
    variants, _, acc = built
    model, _ = trained
    assert acc["float32"] >= 0.9, f"float32 CNN test accuracy: expected >= 0.9 after the fixed training, got {acc['float32']}"
    x = digits[1].data[:32]
    with tinytorch.no_grad():
        np.testing.assert_allclose(variants["float32"](x).numpy(), model(x).numpy(), rtol=1e-6, atol=1e-6,
                                   err_msg="the float32 variant computes what the trained model computes")


def test_make_variants_int8_within_2_points_and_4x_smaller(built, trained):
    variants, _, acc = built
    model, _ = trained
    q = [m for m in variants["int8"].modules() if isinstance(m, QuantizedLinear)]
    assert len(q) == 2, f"expected the two Linear layers quantized, found {len(q)} QuantizedLinear"
    assert all(m.weight_int8.dtype == np.int8 for m in q), "int8 weights stored as int8"
    float_w = model[4].weight.numpy().nbytes + model[6].weight.numpy().nbytes
    int8_w = sum(m.weight_int8.nbytes for m in q)
    assert float_w == 4 * int8_w, f"Linear weights: expected float32 bytes = 4 x int8 bytes, got {float_w} and {int8_w}"
    back = q[0].weight_int8.numpy() * q[0].weight_scale.numpy()[:, None]
    err = np.abs(back - model[4].weight.numpy()).max()
    assert err <= q[0].weight_scale.numpy().max(), \
        f"int8 weights should quantize the trained (unpruned) weights: max error {err} > one step"
    assert abs(acc["int8"] - acc["float32"]) <= 0.02, \
        f"int8 accuracy should be within 2 points of float32: got {acc['int8']} vs {acc['float32']}"
    ratio = model_bytes(variants["float32"]) / model_bytes(variants["int8"])
    assert ratio >= 3.5, f"int8 variant should be >= 3.5x smaller in total, got {ratio:.2f}x"


def test_make_variants_int8_is_calibrated_on_every_batch(built, trained, digits):
    """The observers must see all of `calibration`: one batch gives other ranges (and a worse model on new data)."""
    variants, _, _ = built
    model, _ = trained
    calibration = list(DataLoader(digits[0], batch_size=64))[:8]  # the fixture's batches

    def input_grids(qmodel):
        return [(float(m.input_scale), int(m.input_zero_point)) for m in qmodel.modules()
                if isinstance(m, QuantizedLinear)]

    every, first = input_grids(quantize_model(model, calibration)), input_grids(quantize_model(model, calibration[:1]))
    assert every != first, "the test needs batches whose ranges differ"
    got = input_grids(variants["int8"])
    assert got == every, (f"the int8 variant's input (scale, zero point) per layer: {got}; calibrated on all 8 "
                          f"batches they are {every}" + (" (you calibrated on the first batch only)" if got == first
                                                         else ""))


def test_make_variants_pruned_reaches_its_sparsity(built, trained):
    variants, _, acc = built
    model, _ = trained
    p = variants["pruned"]
    assert not prune.is_pruned(p), "the pruned variant should hold plain weights (prune.remove after pruning)"
    w = np.concatenate([p[4].weight.numpy().ravel(), p[6].weight.numpy().ravel()])
    assert abs((w == 0).mean() - 0.5) < 1e-3, f"expected 50% of the Linear weights zero, got {(w == 0).mean():.4f}"
    ref = np.concatenate([model[4].weight.numpy().ravel(), model[6].weight.numpy().ravel()])
    kept = np.abs(ref[w != 0]).min()
    dropped = np.abs(ref[w == 0]).max()
    assert kept >= dropped, f"global magnitude pruning keeps the largest weights: smallest kept {kept} < largest dropped {dropped}"
    np.testing.assert_array_equal(w[w != 0], ref[w != 0], err_msg="the surviving weights keep their trained values")
    np.testing.assert_array_equal(p[0].weight.numpy(), model[0].weight.numpy(), err_msg="the conv is not pruned")
    assert acc["pruned"] >= acc["float32"] - 0.05, f"pruned accuracy {acc['pruned']} fell more than 5 points"


def test_make_variants_shrunk_is_smaller_and_fine_tuned(built, trained):
    variants, tuned, acc = built
    s = variants["shrunk"]
    assert len(tuned) == 1, f"fine_tune should be called once, got {len(tuned)} call(s)"
    assert tuned[0] is s, "fine_tune should be given the shrunk variant itself (after the cut), not another model"
    assert s[0].out_channels == 4 and s[4].out_features == 32, \
        f"expected half the channels and units removed: got {s[0].out_channels} channels, {s[4].out_features} units"
    assert acc["shrunk"] >= 0.85, f"fine-tuned shrunk accuracy: expected >= 0.85, got {acc['shrunk']}"


def test_make_variants_shrunk_is_cut_from_the_trained_model(trained, digits):
    """Without fine-tuning, "shrunk" is exactly module 16's cut of the trained weights: not a
    cut of the pruned (or any other) variant."""
    from tinytorch.compression import prune_neurons
    model, _ = trained
    calibration = list(DataLoader(digits[0], batch_size=64))[:2]
    shrunk = make_variants(model, calibration, amount=0.5)["shrunk"]
    expected = prune_neurons(model, 0.5)
    for i in (0, 4, 6):
        np.testing.assert_array_equal(shrunk[i].weight.numpy(), expected[i].weight.numpy(),
                                      err_msg=f"shrunk layer {i}'s weight vs prune_neurons(trained model, 0.5)")


def test_make_variants_uses_the_amount_and_eval_mode_whatever_the_model_mode(trained, digits):
    """Another amount than the fixture's 0.5, and a model handed over in train mode."""
    from tinytorch.compression import prune_neurons
    model, _ = trained
    calibration = list(DataLoader(digits[0], batch_size=64))[:2]
    mode = model.training
    model.train()
    try:
        variants = make_variants(model, calibration, amount=0.25)
    finally:
        model.train(mode)
    training = {n: v.training for n, v in variants.items()}
    assert not any(training.values()), \
        f"a model handed over in train mode: every variant must still be in eval mode, got training flags {training}"
    p = variants["pruned"]
    w = np.concatenate([p[4].weight.numpy().ravel(), p[6].weight.numpy().ravel()])
    assert abs((w == 0).mean() - 0.25) < 1e-3, f"amount 0.25: expected 25% of the Linear weights zero, got {(w == 0).mean():.4f}"
    expected = prune_neurons(model, 0.25)
    for i in (0, 4, 6):
        np.testing.assert_array_equal(variants["shrunk"][i].weight.numpy(), expected[i].weight.numpy(),
                                      err_msg=f"amount 0.25: shrunk layer {i}'s weight vs prune_neurons(trained model, 0.25)")


def test_make_variants_numba_runs_on_the_kernels(built, trained, digits):
    variants, _, acc = built
    model, _ = trained
    kinds = [type(m).__name__ for m in variants["numba"]]
    assert kinds.count("NumbaConv2d") == 1 and kinds.count("NumbaLinear") == 2, f"expected numba layers, got {kinds}"
    x = digits[1].data[:50]
    with tinytorch.no_grad():
        np.testing.assert_allclose(variants["numba"](x).numpy(), model(x).numpy(), rtol=1e-4, atol=1e-4,
                                   err_msg="numba variant logits vs the trained model's")


def test_make_variants_refuses_bad_arguments(trained, digits):
    model, _ = trained
    calibration = list(DataLoader(digits[0], batch_size=64))[:1]
    for amount in (0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match=str(amount)):
            make_variants(model, calibration, amount=amount)
    with pytest.raises(ValueError, match="calibration"):
        make_variants(model, [], amount=0.5)

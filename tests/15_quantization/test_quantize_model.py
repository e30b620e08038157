"""quantize_model: nested swaps, a copy, calibration on every batch in eval mode; the digits MLP."""
import functools

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import Tensor, nn
from tinytorch.ao import quantization as Q
from tinytorch.data import DataLoader, Digits, TensorDataset
from tinytorch.nn import Dropout
from tinytorch.optim import Adam
from tinytorch.training import evaluate, fit


def test_swap_modules_nested():
    tt.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.ReLU(), nn.Sequential(nn.Linear(4, 4))), nn.Linear(4, 2))
    n = Q._swap_modules(net, nn.Linear, Q.ObservedLinear)
    assert n == 3, f"three Linear layers at depths 1 and 3 should be swapped, got {n}"
    kinds = [type(m).__name__ for m in (net[0], net[1][1][0], net[2])]
    assert kinds == ["ObservedLinear"] * 3, f"each Linear replaced in place, got {kinds}"
    assert isinstance(net[1][0], nn.ReLU), "other modules untouched"
    assert isinstance(net[0].linear, nn.Linear), "the replacement (holding the original) is not searched again"
    single = nn.Linear(2, 2)
    assert Q._swap_modules(single, nn.Linear, Q.ObservedLinear) == 0, "the root module itself is not swapped"


def test_swap_modules_takes_a_tuple_of_classes_and_subclasses():
    class MyReLU(nn.ReLU):
        pass

    net = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sequential(MyReLU(), nn.Sigmoid()))
    n = Q._swap_modules(net, (nn.ReLU, nn.Sigmoid), lambda m: nn.Identity())
    assert n == 3, f"a ReLU, a subclass of ReLU and a Sigmoid are instances of (ReLU, Sigmoid): 3 swaps, got {n}"
    assert isinstance(net[1], nn.Tanh), "a module of another class stays"


def _small_model(seed=1):
    tt.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), Dropout(0.5), nn.Sequential(nn.Linear(16, 3)))


def test_quantize_model_leaves_float_model_untouched():
    model = _small_model()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    x = tt.randn(5, 6)
    q = Q.quantize_model(model, [x, x * 2])
    assert q is not model, "quantize_model returns a new model"
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 2, "the float model keeps its Linear layers"
    assert model.training, "the float model's mode is unchanged"
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=f"float parameter {k} unchanged")
    assert sum(isinstance(m, Q.QuantizedLinear) for m in q.modules()) == 2, "both Linear layers quantized"
    assert not q.training, "the quantized model is in eval mode"


def test_quantize_model_leaves_an_eval_mode_model_in_eval_mode():
    model = _small_model()
    model.eval()
    x = tt.randn(5, 6)
    Q.quantize_model(model, [x])
    assert not any(m.training for m in model.modules()), "the float model was in eval mode and stays there"


def test_quantize_model_calibrates_on_every_batch_in_eval_mode():
    model = _small_model(2)
    rng = np.random.default_rng(0)
    batches = [(Tensor(rng.standard_normal((8, 6)).astype(np.float32) * (k + 1)), None) for k in range(4)]
    q = Q.quantize_model(model, batches)
    qls = [m for m in q.modules() if isinstance(m, Q.QuantizedLinear)]
    allx = np.concatenate([b[0].numpy() for b in batches])
    s0, z0 = Q._calculate_qparams(np.float32(allx.min()), np.float32(allx.max()), False)
    assert np.isclose(qls[0].input_scale, float(s0), rtol=1e-6) and qls[0].input_zero_point == int(z0), \
        f"first layer's input qparams ({qls[0].input_scale}, {qls[0].input_zero_point}) should come from all batches ({s0}, {z0})"
    model.eval()
    with tt.no_grad():
        h = nn.ReLU()(model[0](Tensor(allx))).numpy()
    s1, z1 = Q._calculate_qparams(np.float32(h.min()), np.float32(h.max()), False)
    assert np.isclose(qls[1].input_scale, float(s1), rtol=1e-5), \
        f"second layer's input scale {qls[1].input_scale} should be from eval-mode activations (no dropout): {s1}"


def test_quantize_model_calibrates_without_recording_a_graph():
    seen = []

    class GradModeSpy(Q.MinMaxObserver):
        def forward(self, x):
            seen.append((tt.autograd.is_grad_enabled(), isinstance(x, Tensor) and x.requires_grad))
            return super().forward(x)

    model = _small_model(4)
    batches = [(tt.randn(8, 6), None) for _ in range(3)]
    assert tt.autograd.is_grad_enabled(), "the test starts with grad recording on"
    Q.quantize_model(model, batches, Q.QConfig(activation=GradModeSpy, weight=Q.default_qconfig.weight))
    assert len(seen) == 6, (f"the qconfig's activation observer (a class passed in the qconfig that records its "
                            f"calls) was called {len(seen)} times; each of the 2 layers' observers should see each "
                            f"of the 3 batches: are the observers made from the qconfig given?")
    assert not any(grad for grad, _ in seen), (
        f"calibration must not record a graph (grad recording was on for {sum(g for g, _ in seen)} of "
        f"{len(seen)} observer calls): it is inference, and a graph costs memory for nothing")
    assert not any(req for _, req in seen), "no observed input is part of a recorded graph (requires_grad)"
    assert tt.autograd.is_grad_enabled(), "grad recording is on again after quantize_model"


def _qconfig_bits(bits):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return Q.QConfig(activation=functools.partial(Q.MinMaxObserver, quant_min=lo, quant_max=hi),
                     weight=functools.partial(Q.PerChannelMinMaxObserver, ch_axis=0,
                                              qscheme=Q.per_channel_symmetric, quant_min=lo, quant_max=hi))


@pytest.mark.parametrize("bits", [4, 6])
def test_quantize_model_uses_its_qconfig(bits):
    model = _small_model(3)
    rng = np.random.default_rng(1)
    batches = [(Tensor(rng.standard_normal((8, 6)).astype(np.float32) * (k + 1)), None) for k in range(3)]
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    qls = [m for m in Q.quantize_model(model, batches, _qconfig_bits(bits)).modules()
           if isinstance(m, Q.QuantizedLinear)]
    default = [m for m in Q.quantize_model(model, batches).modules() if isinstance(m, Q.QuantizedLinear)]
    assert len(qls) == 2, f"both Linear layers quantized, got {len(qls)}"
    for i, (ql, dl) in enumerate(zip(qls, default)):
        assert (ql.input_quant_min, ql.input_quant_max) == (lo, hi), (
            f"layer {i}: input integer range ({ql.input_quant_min}, {ql.input_quant_max}) should come from the "
            f"{bits}-bit activation observer of the qconfig: ({lo}, {hi})")
        np.testing.assert_allclose(ql.input_scale, dl.input_scale * 255 / (hi - lo), rtol=1e-5, atol=0,
                                   err_msg=f"layer {i}: the same observed range on a {bits}-bit grid "
                                           f"(int8's scale {dl.input_scale} times 255 / {hi - lo})")
        assert lo <= ql.weight_int8.min() and ql.weight_int8.max() <= hi, (
            f"layer {i}: {bits}-bit weights should lie in [{lo}, {hi}], got "
            f"[{ql.weight_int8.min()}, {ql.weight_int8.max()}]")
        np.testing.assert_allclose(ql.weight_scale, dl.weight_scale * 127.5 / ((hi - lo) / 2), rtol=1e-5, atol=0,
                                   err_msg=f"layer {i}: {bits}-bit weight scales from the qconfig's weight observer")
    allx = np.concatenate([b[0].numpy() for b in batches])
    s0, z0 = Q._calculate_qparams(np.float32(allx.min()), np.float32(allx.max()), False, lo, hi)
    assert np.isclose(qls[0].input_scale, float(s0), rtol=1e-6, atol=0) and qls[0].input_zero_point == int(z0), (
        f"first layer's {bits}-bit input qparams ({qls[0].input_scale}, {qls[0].input_zero_point}) "
        f"should be ({float(s0)}, {int(z0)})")


@pytest.fixture(scope="module")
def digits():
    tr, te = Digits(train=True), Digits(train=False)
    images = tr.data.numpy().reshape(-1, 64)
    mu, sd = images.mean(0), images.std(0) + 1e-3
    X, y = Tensor((images - mu) / sd), tr.targets
    Xt, yt = Tensor((te.data.numpy().reshape(-1, 64) - mu) / sd), te.targets
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    fit(model, nn.CrossEntropyLoss(), Adam(model.parameters(), lr=3e-3),
        DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True), epochs=10, progress=False)
    calibration = list(DataLoader(TensorDataset(X, y), batch_size=64))[:8]
    return model, calibration, (Xt, yt)


def test_quantize_model_digits_mlp_within_two_points(digits):
    model, calibration, test = digits
    float_acc = evaluate(model, [test])["accuracy"]
    assert float_acc > 0.92, f"the float MLP should train to > 92% (got {float_acc}); the setup is broken"
    q = Q.quantize_model(model, calibration)
    q_acc = evaluate(q, [test])["accuracy"]
    assert q_acc >= float_acc - 0.02, f"int8 accuracy {q_acc:.4f} should be within 2 points of float {float_acc:.4f}"
    qls = [m for m in q.modules() if isinstance(m, Q.QuantizedLinear)]
    assert len(qls) == 3, f"all three Linear layers quantized, got {len(qls)}"
    for ql, lin in zip(qls, [m for m in model.modules() if isinstance(m, nn.Linear)]):
        assert ql.weight_int8.dtype == np.int8, "stored weights are int8"
        assert ql.weight_int8.nbytes * 4 == lin.weight.numpy().nbytes, "each stored weight is exactly 4x smaller"


def test_quantize_model_then_qat_convert_matches_fake_quant(digits):
    model, calibration, (Xt, _) = digits
    qat = Q.prepare_qat(model)
    with tt.no_grad():
        for xb, _ in calibration:
            qat(xb)
    qat.eval()
    with tt.no_grad():
        fake = qat(Xt).numpy()
    converted = Q.convert(qat)
    kinds = {type(m).__name__ for _, m in converted.named_modules()}
    assert "QuantizedLinear" in kinds and "QATLinear" not in kinds, f"convert left the QAT layers in place: {kinds}"
    real = converted(Xt).numpy()
    # float rounding may push a rare hidden value across a rounding boundary: compare row by row
    same = np.all(np.abs(real - fake) <= 1e-4 + 1e-4 * np.abs(fake), axis=1)
    assert same.mean() >= 0.97, (f"the fake-quantized model should compute what its integer conversion computes: "
                                 f"only {same.mean():.3f} of the rows agree within 1e-4")
    agree = np.mean(real.argmax(1) == fake.argmax(1))
    assert agree >= 0.99, f"the two should predict the same class (agree on {agree:.3f} of the digits)"


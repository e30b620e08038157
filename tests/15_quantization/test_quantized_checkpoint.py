"""A quantized model's state is in its state_dict: int8 weights, scales, zero points and bias,
saved to a file about 4x smaller than the float model's and restored exactly."""
import io

import numpy as np
import safetensors.numpy

import tinytorch as tt
from tinytorch import nn
from tinytorch.ao import quantization as Q
from tinytorch.serialization import load_checkpoint, save_checkpoint


def _mlp(seed):
    tt.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _quantized(seed, qconfig=Q.default_qconfig):
    model = _mlp(seed)
    return model, Q.quantize_model(model, [tt.randn(16, 64) * (seed + 1)], qconfig)


def test_a_quantized_models_state_dict_holds_its_int8_weights_and_quantization_parameters():
    _, q = _quantized(0)
    state = q.state_dict()
    dtypes = {k: str(v.dtype) for k, v in state.items()}
    assert dtypes == {
        "0.weight_int8": "int8", "0.weight_scale": "float32", "0.bias": "float32",
        "0.input_scale": "float64", "0.input_zero_point": "int64",
        "2.weight_int8": "int8", "2.weight_scale": "float32", "2.bias": "float32",
        "2.input_scale": "float64", "2.input_zero_point": "int64",
    }, f"the state_dict of a quantized Sequential(Linear, ReLU, Linear): {dtypes}"
    assert state["0.weight_int8"].shape == (128, 64) and state["0.input_scale"].shape == ()
    np.testing.assert_array_equal(state["0.weight_int8"].numpy(), q[0].weight().int_repr())


def test_affine_weights_keep_their_zero_points_in_the_state_dict():
    affine = Q.QConfig(activation=Q.MinMaxObserver,
                       weight=lambda: Q.PerChannelMinMaxObserver(ch_axis=0, qscheme=Q.per_channel_affine))
    _, q = _quantized(0, affine)
    zero_points = q.state_dict()["0.weight_zero_point"]
    assert zero_points.dtype == np.int64 and zero_points.shape == (128,)


def test_a_checkpoint_of_a_quantized_model_restores_its_outputs_into_a_fresh_one():
    model, q = _quantized(0)
    _, fresh = _quantized(1)  # other weights, other calibration, the same structure
    x = tt.randn(8, 64)
    with tt.no_grad():
        assert not np.array_equal(fresh(x).numpy(), q(x).numpy()), "the setup: two different quantized models"
    f = io.BytesIO()
    save_checkpoint(f, q)
    f.seek(0)
    load_checkpoint(f, fresh)
    with tt.no_grad():
        np.testing.assert_array_equal(fresh(x).numpy(), q(x).numpy(), err_msg="the loaded model's outputs")
    assert fresh[0].weight_int8.dtype == np.int8, "loading keeps the int8 storage"


def test_the_int8_checkpoint_stores_one_byte_per_weight():
    model, q = _quantized(0)
    files = {}
    for name, m in (("float32", model), ("int8", q)):
        f = io.BytesIO()
        save_checkpoint(f, m)
        files[name] = f.getvalue()
    stored = {name: sum(a.nbytes for a in safetensors.numpy.load(data).values()) for name, data in files.items()}
    weights, rows = 128 * 64 + 10 * 128, 128 + 10
    assert stored["float32"] == 4 * (weights + rows), f"float32: weights and biases, 4 bytes each: {stored}"
    assert stored["int8"] == weights + 4 * rows + 4 * rows + 2 * (8 + 8), (
        f"int8: 1 byte per weight, float32 scales and biases, each layer's input scale (float64) and zero "
        f"point (int64): {stored}")
    assert len(files["float32"]) / len(files["int8"]) > 3, f"the whole file: {len(files['float32'])} and {len(files['int8'])} bytes"

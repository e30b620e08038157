"""4-bit weights: pack_int4 / unpack_int4 store two signed 4-bit values per byte (the first
of each pair in the low nibble, each as its two's complement), and the weight-only int4
layer built on them computes with the weight its nibbles and group scales stand for."""
import io

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.ao import quantization as Q
from tinytorch.serialization import load_checkpoint, save_checkpoint
from tinytorch.testing import python_steps

PAIRS = np.array([(a, b) for a in range(-8, 8) for b in range(-8, 8)], dtype=np.int8)


@pytest.mark.parametrize("pair, byte", [((3, 5), 0x53), ((-1, 0), 0x0F), ((0, -1), 0xF0), ((-8, 7), 0x78),
                                        ((7, -8), 0x87), ((-1, -1), 0xFF), ((0, 0), 0x00), ((-2, 1), 0x1E)])
def test_pack_int4_puts_the_first_value_low_and_the_second_high_as_twos_complement(pair, byte):
    packed = Q.pack_int4(np.array(pair, dtype=np.int8))
    assert (packed.dtype, packed.shape) == (np.uint8, (1,)), f"(dtype, shape) {packed.dtype, packed.shape}"
    assert int(packed[0]) == byte, f"pack_int4({list(pair)}) = {int(packed[0]):#04x}, expected {byte:#04x}"


def test_pack_int4_gives_each_of_the_256_pairs_its_own_byte():
    packed = Q.pack_int4(PAIRS)
    assert (packed.shape, packed.dtype) == ((256, 1), np.uint8), f"shape, dtype {packed.shape, packed.dtype}"
    expected = [(a & 0xF) | ((b & 0xF) << 4) for a, b in PAIRS.tolist()]
    np.testing.assert_array_equal(packed[:, 0], expected, err_msg="the byte of each pair (a, b): a's four-bit two's "
                                  "complement low, b's high")


def test_pack_int4_pairs_neighbours_along_the_last_axis_of_any_integer_dtype():
    q = np.random.default_rng(0).integers(-8, 8, (2, 3, 8))  # int64
    packed = Q.pack_int4(q)
    assert (packed.shape, packed.dtype) == ((2, 3, 4), np.uint8), f"(shape, dtype) {packed.shape, packed.dtype}"
    np.testing.assert_array_equal(packed & 0xF, q[..., 0::2] & 0xF, err_msg="low nibbles: the even positions")
    np.testing.assert_array_equal(packed >> 4, q[..., 1::2] & 0xF, err_msg="high nibbles: the odd positions")


def test_pack_int4_refuses_an_odd_last_dimension_values_out_of_range_and_floats():
    assert Q.pack_int4(np.array([1, -1], np.int8)).tolist() == [0xF1]  # what it accepts, it packs
    with pytest.raises(ValueError, match="even"):
        Q.pack_int4(np.zeros((2, 3), np.int8))
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        Q.pack_int4(np.array([0, 8], np.int8))
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        Q.pack_int4(np.array([-9, 0]))
    with pytest.raises(TypeError, match="integers"):
        Q.pack_int4(np.array([0.0, 1.0]))


def test_unpack_int4_inverts_pack_int4_for_every_pair_as_int8():
    back = Q.unpack_int4(Q.pack_int4(PAIRS))
    assert (back.dtype, back.shape) == (np.int8, (256, 2)), f"(dtype, shape) {back.dtype, back.shape}, expected int8 (256, 2)"
    np.testing.assert_array_equal(back, PAIRS, err_msg="unpack_int4(pack_int4(q)) must give back every pair of "
                                  "4-bit values, the negative ones included (nibbles 8..15 stand for -8..-1)")


@pytest.mark.parametrize("byte, pair", [(0x53, [3, 5]), (0x0F, [-1, 0]), (0xF0, [0, -1]), (0x78, [-8, 7]),
                                        (0x87, [7, -8]), (0x88, [-8, -8]), (0x77, [7, 7])])
def test_unpack_int4_reads_the_low_nibble_first_and_restores_the_sign(byte, pair):
    got = Q.unpack_int4(np.array([byte], np.uint8)).tolist()
    assert got == pair, f"unpack_int4 of the byte {byte:#04x} gave {got}, expected {pair} (low nibble first)"


def test_unpack_int4_keeps_the_leading_axes():
    q = np.random.default_rng(1).integers(-8, 8, (3, 2, 10)).astype(np.int8)
    np.testing.assert_array_equal(Q.unpack_int4(Q.pack_int4(q)), q, err_msg="a (3, 2, 10) array packed and unpacked")


def test_unpack_int4_refuses_bytes_of_another_dtype():
    assert Q.unpack_int4(np.array([0xF1], np.uint8)).tolist() == [1, -1]  # what it accepts, it unpacks
    with pytest.raises(TypeError, match="uint8"):
        Q.unpack_int4(np.array([1, 2], np.int8))


def test_pack_int4_takes_as_many_python_steps_for_large_arrays_as_for_small_ones():
    rng = np.random.default_rng(2)
    small, large = rng.integers(-8, 8, (4, 8)).astype(np.int8), rng.integers(-8, 8, (4, 2000)).astype(np.int8)
    few, many = python_steps(Q.pack_int4, small), python_steps(Q.pack_int4, large)
    assert few == many, (f"pack_int4 ran {few} Python steps on a (4, 8) array and {many} on a (4, 2000) one: "
                         f"a loop over the elements (whole-array operations take the same number)")


def test_unpack_int4_takes_as_many_python_steps_for_large_arrays_as_for_small_ones():
    rng = np.random.default_rng(2)  # packed bytes made directly, so that this test runs unpack_int4 alone
    small, large = rng.integers(0, 256, (4, 4)).astype(np.uint8), rng.integers(0, 256, (4, 1000)).astype(np.uint8)
    few, many = python_steps(Q.unpack_int4, small), python_steps(Q.unpack_int4, large)
    assert few == many, (f"unpack_int4 ran {few} Python steps on (4, 4) bytes and {many} on (4, 1000): "
                         f"a loop over the elements (whole-array operations take the same number)")


def test_int4_weight_only_linear_computes_with_the_dequantized_group_weight():
    tt.manual_seed(0)
    linear = nn.Linear(64, 12)
    layer = Q.Int4WeightOnlyLinear.from_float(linear, group_size=16)
    q, scale = Q.quantize_per_group(linear.weight.numpy(), 16)
    assert scale.shape == (12, 4) and np.abs(q).max() <= 8
    weight = (q.reshape(12, 4, 16) * scale[..., None]).reshape(12, 64)
    np.testing.assert_array_equal(layer.dequantized_weight(), weight, err_msg="unpacked nibbles times their group's scale")
    x = tt.randn(5, 64)
    np.testing.assert_allclose(layer(x).numpy(), x.numpy() @ weight.T + linear.bias.numpy(), rtol=1e-5, atol=1e-6)
    assert np.abs(weight - linear.weight.numpy()).max() <= scale.max() / 2 + 1e-7


def test_an_int4_model_stores_packed_bytes_and_round_trips_through_a_checkpoint():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))
    small = Q.quantize_weights_int4(model, group_size=8)
    state = small.state_dict()
    assert {k: (str(v.dtype), v.shape) for k, v in state.items() if "weight" in k} == {
        "0.weight_packed": ("uint8", (16, 16)), "0.weight_scale": ("float32", (16, 4)),
        "2.weight_packed": ("uint8", (4, 8)), "2.weight_scale": ("float32", (4, 2))}
    assert isinstance(model[0], nn.Linear), "the float model is not changed"
    buffer = io.BytesIO()
    save_checkpoint(buffer, small)
    buffer.seek(0)
    tt.manual_seed(5)
    fresh = Q.quantize_weights_int4(nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)), group_size=8)
    load_checkpoint(buffer, fresh)
    x = tt.randn(3, 32)
    assert np.array_equal(fresh(x).numpy(), small(x).numpy())

"""Sinusoidal and learned positional encodings."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.autograd import gradcheck, topological_order
from tinytorch.nn.embedding import sinusoidal_positions


def formula(max_len, dim, base=10000.0):
    """The table element by element, straight from the paper's two formulas."""
    out = np.zeros((max_len, dim))
    for p in range(max_len):
        for j in range(dim):
            i = j // 2
            angle = p / base ** (2 * i / dim)
            out[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return out


@pytest.mark.parametrize("max_len,dim", [(1, 2), (30, 8), (17, 5), (64, 64), (4, 1)])
def test_table_equals_formula(max_len, dim):
    pe = sinusoidal_positions(max_len, dim, dtype=tt.float64)
    assert isinstance(pe, tt.Tensor) and pe.shape == (max_len, dim) and pe.dtype == tt.float64
    np.testing.assert_allclose(pe.numpy(), formula(max_len, dim), rtol=1e-12, atol=1e-12)


def test_table_default_dtype_and_base():
    pe = sinusoidal_positions(12, 6)
    assert pe.dtype == tt.float32
    np.testing.assert_allclose(pe.numpy(), formula(12, 6), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sinusoidal_positions(9, 4, base=100.0, dtype=tt.float64).numpy(),
                               formula(9, 4, base=100.0), rtol=1e-12, atol=1e-12)


def test_table_properties():
    pe = sinusoidal_positions(128, 32, dtype=tt.float64).numpy()
    np.testing.assert_allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, 1.0, rtol=1e-12)   # pairs on circles
    np.testing.assert_allclose(np.linalg.norm(pe, axis=1), 4.0, rtol=1e-12)            # |P_p|^2 = D/2
    gram = pe @ pe.T
    for d in (1, 7, 30):                                 # dot products depend on p - q only
        diag = np.diagonal(gram, offset=d)
        np.testing.assert_allclose(diag, diag[0], rtol=1e-9, atol=1e-9)
    assert len({tuple(np.round(row, 9)) for row in pe}) == 128   # every position distinct


def test_sinusoidal_layer_adds_the_table_as_a_buffer():
    layer = nn.SinusoidalPositionalEncoding(8, max_len=40)
    assert list(layer.parameters()) == []
    buffers = dict(layer.named_buffers())
    assert list(buffers) == ["pe"] and buffers["pe"].shape == (40, 8)
    assert not buffers["pe"].requires_grad
    assert "pe" not in layer.state_dict(), "a table anyone can recompute is not saved (persistent=False)"
    assert nn.PositionalEncoding is nn.SinusoidalPositionalEncoding


def test_sinusoidal_positional_encoding_forward_adds_the_rows_from_offset():
    layer = nn.SinusoidalPositionalEncoding(8, max_len=40)
    x = tt.randn(3, 10, 8)
    np.testing.assert_allclose(layer(x).numpy(), x.numpy() + formula(40, 8)[:10], rtol=1e-5, atol=1e-6,
                               err_msg="a (3, 10, 8) batch gets positions 0..9 added")
    x2 = tt.randn(4, 8)                                  # unbatched (T, D), with an offset
    np.testing.assert_allclose(layer(x2, offset=36).numpy(), x2.numpy() + formula(40, 8)[36:40],
                               rtol=1e-5, atol=1e-6, err_msg="4 steps at offset 36 get positions 36..39")


def test_sinusoidal_positional_encoding_keeps_float32():
    layer = nn.SinusoidalPositionalEncoding(8, max_len=12)
    out = layer(tt.randn(2, 5, 8))
    assert (layer.pe.dtype, out.dtype) == (tt.float32, tt.float32), \
        f"the buffer and the output on float32 input are float32, got {layer.pe.dtype} and {out.dtype}"


def test_learned_positional_embedding_forward_reads_through_the_embedding_op():
    layer = nn.LearnedPositionalEmbedding(6, 3)
    out = layer(tt.randn(2, 4, 3))
    ops = {node.op for node in topological_order([out.grad_fn])} if out.grad_fn is not None else set()
    assert "embedding" in ops, f"the positions are read with the embedding op; the graph holds only {sorted(ops)}"
    assert out.dtype == tt.float32, f"float32 in, float32 out; got {out.dtype}"


def test_sinusoidal_layer_passes_gradients():
    layer = nn.SinusoidalPositionalEncoding(6, max_len=10)
    x = tt.tensor(np.random.default_rng(0).standard_normal((2, 5, 6)), requires_grad=True)
    assert gradcheck(lambda x: layer(x) * layer(x), [x])


def test_sequence_longer_than_max_len_raises():
    sin = nn.SinusoidalPositionalEncoding(4, max_len=6)
    learned = nn.LearnedPositionalEmbedding(6, 4)
    for layer in (sin, learned):
        assert layer(tt.randn(2, 6, 4)).shape == (2, 6, 4)
        with pytest.raises(ValueError, match="max_len"):
            layer(tt.randn(2, 7, 4))
        with pytest.raises(ValueError, match="max_len"):
            layer(tt.randn(4, 4), offset=3)


def test_learned_positional_embedding_init_has_one_parameter_table():
    layer = nn.LearnedPositionalEmbedding(12, 5)
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    assert layer.weight.shape == (12, 5) and layer.weight.requires_grad
    assert layer.weight.dtype == tt.float32
    assert nn.LearnedPositionalEmbedding(4, 3, dtype=tt.float64).weight.dtype == tt.float64, "dtype=float64"


def test_learned_positional_embedding_forward_adds_the_rows_from_offset():
    tt.manual_seed(1)
    layer = nn.LearnedPositionalEmbedding(12, 5)
    x = tt.randn(2, 7, 5)
    np.testing.assert_allclose(layer(x).numpy(), x.numpy() + layer.weight.numpy()[:7], rtol=1e-6,
                               err_msg="7 tokens at offset 0: x + weight[0:7]")
    np.testing.assert_allclose(layer(x[0, :2], offset=10).numpy(),
                               x.numpy()[0, :2] + layer.weight.numpy()[10:12], rtol=1e-6,
                               err_msg="2 tokens at offset 10: x + weight[10:12] (token t sits at position offset + t)")


def test_learned_positional_embedding_init_is_standard_normal():
    tt.manual_seed(0)
    w = nn.LearnedPositionalEmbedding(1000, 40).weight.numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02


def test_learned_positional_embedding_forward_grads_equal_torch(torch):
    layer = nn.LearnedPositionalEmbedding(8, 3, dtype=tt.float64)
    rng = np.random.default_rng(2)
    xd, up = rng.standard_normal((4, 5, 3)), rng.standard_normal((4, 5, 3))
    x = tt.tensor(xd, requires_grad=True)
    layer(x, offset=2).backward(tt.tensor(up))
    assert layer.weight.grad is not None, "the table gets a gradient: the positions are looked up through the graph"
    tw = torch.tensor(layer.weight.numpy().copy(), requires_grad=True)
    tx = torch.tensor(xd, requires_grad=True)
    (tx + torch.nn.functional.embedding(torch.arange(2, 7), tw)).backward(torch.from_numpy(up))
    np.testing.assert_allclose(layer.weight.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(layer.weight.grad.numpy()[[0, 1, 7]], 0.0)


def test_learned_positional_embedding_forward_gradcheck():
    layer = nn.LearnedPositionalEmbedding(6, 3, dtype=tt.float64)
    x = tt.tensor(np.random.default_rng(3).standard_normal((2, 4, 3)), requires_grad=True)
    assert gradcheck(lambda x, w: (layer(x) * x).sum(-1), [x, layer.weight])

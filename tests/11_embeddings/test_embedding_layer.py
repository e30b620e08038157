"""The Embedding layer: parameters, initialisation, padding_idx, parity with torch.nn.Embedding."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


def test_parameter_and_shapes():
    emb = nn.Embedding(11, 6)
    assert [name for name, _ in emb.named_parameters()] == ["weight"]
    assert isinstance(emb.weight, nn.Parameter) and emb.weight.requires_grad
    assert emb.weight.shape == (11, 6) and emb.weight.dtype == tt.float32
    assert emb.num_embeddings == 11 and emb.embedding_dim == 6 and emb.padding_idx is None
    out = emb(tt.tensor([[1, 2, 3], [10, 0, 10]]))
    assert out.shape == (2, 3, 6)
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[[[1, 2, 3], [10, 0, 10]]])


def test_embedding_reset_parameters_is_standard_normal():
    tt.manual_seed(0)
    w = nn.Embedding(2000, 50).weight.numpy()
    assert abs(w.mean()) < 0.01
    assert abs(w.std() - 1.0) < 0.01
    assert abs(np.mean(np.abs(w)) - np.sqrt(2 / np.pi)) < 0.01   # normal, not uniform


def test_embedding_init_dtype_float64():
    emb = nn.Embedding(4, 3, dtype=tt.float64)
    assert emb.weight.dtype == tt.float64 and emb(tt.tensor([1])).dtype == tt.float64


@pytest.mark.parametrize("padding_idx,row", [(0, 0), (3, 3), (-1, 4)])
def test_embedding_init_normalises_padding_idx(padding_idx, row):
    emb = nn.Embedding(5, 3, padding_idx=padding_idx)
    assert emb.padding_idx == row, f"padding_idx={padding_idx} of 5 rows is row {row}, got {emb.padding_idx}"


@pytest.mark.parametrize("padding_idx,row", [(0, 0), (3, 3), (-1, 4)])
def test_embedding_reset_parameters_zeroes_only_the_padding_row(padding_idx, row):
    emb = nn.Embedding(5, 3, padding_idx=padding_idx)
    np.testing.assert_array_equal(emb.weight.numpy()[row], 0.0, err_msg=f"the padding row {row} starts at zero")
    others = np.delete(emb.weight.numpy(), row, axis=0)
    assert bool(np.all(others != 0)), f"only the padding row is zero; the other rows are N(0, 1): {others}"
    held = emb.weight
    with tt.no_grad():
        emb.weight.copy_(tt.ones(5, 3))
    emb.reset_parameters()
    assert emb.weight is held, "reset_parameters refills the layer's Parameter in place, never a new one"
    np.testing.assert_array_equal(emb.weight.numpy()[row], 0.0,
                                  err_msg=f"reset_parameters() called again zeroes the padding row {row} again")
    assert bool(np.all(np.delete(emb.weight.numpy(), row, axis=0) != 1.0)), "and redraws every other row"


@pytest.mark.parametrize("padding_idx,row", [(0, 0), (3, 3), (-1, 4)])
def test_embedding_layer_forward_passes_padding_idx_so_the_padding_row_is_frozen(padding_idx, row):
    emb = nn.Embedding(5, 3, padding_idx=padding_idx)
    ids = tt.tensor([[row, 1, row], [2, row, 2]])
    np.testing.assert_array_equal(emb(ids).numpy()[0, 0], 0.0, err_msg="looking up the padding row gives zeros")
    emb(ids).sum().backward()
    grad = emb.weight.grad.numpy()
    np.testing.assert_array_equal(grad[row], 0.0, err_msg=f"the padding row {row} gets no gradient")
    np.testing.assert_array_equal(grad[2], 2.0, err_msg="id 2 is looked up twice: its gradient row is the sum of "
                                  "two upstream rows of ones, 2 (repeated ids accumulate)")


def test_layer_equals_torch_with_copied_weights(torch):
    ours = nn.Embedding(8, 4, padding_idx=2, dtype=tt.float64)
    theirs = torch.nn.Embedding(8, 4, padding_idx=2, dtype=torch.float64)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.numpy().copy()))
    ids = np.array([[2, 5, 5, 7], [0, 2, 5, 1]])
    up = np.random.default_rng(0).standard_normal((2, 4, 4))
    y = ours(tt.tensor(ids))
    ty = theirs(torch.from_numpy(ids))
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    y.backward(tt.tensor(up))
    ty.backward(torch.from_numpy(up))
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_torch_padding_row_matches(torch):
    ours = nn.Embedding(6, 3, padding_idx=4)
    theirs = torch.nn.Embedding(6, 3, padding_idx=4)
    np.testing.assert_array_equal(ours.weight.numpy()[4], theirs.weight.detach().numpy()[4])


def test_from_pretrained_is_frozen_by_default():
    table = np.arange(12.0).reshape(4, 3)
    frozen = nn.Embedding.from_pretrained(tt.tensor(table))
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(tt.tensor([3, 0])).numpy(), table[[3, 0]])
    trainable = nn.Embedding.from_pretrained(tt.tensor(table), freeze=False)
    trainable(tt.tensor([1, 1])).sum().backward()
    np.testing.assert_array_equal(trainable.weight.grad.numpy()[1], 2.0)


def test_state_dict_round_trip():
    a, b = nn.Embedding(5, 2), nn.Embedding(5, 2)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(b(tt.tensor([0, 4])).numpy(), a(tt.tensor([0, 4])).numpy())


def test_repr():
    assert repr(nn.Embedding(10, 3)) == "Embedding(10, 3)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"


def test_bad_padding_idx():
    assert nn.Embedding(4, 2, padding_idx=-4).padding_idx == 0
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=4)


def test_out_of_range_id_in_layer():
    emb = nn.Embedding(3, 2)
    assert emb(tt.tensor([2])).shape == (1, 2)
    with pytest.raises(IndexError, match="3"):
        emb(tt.tensor([0, 3]))

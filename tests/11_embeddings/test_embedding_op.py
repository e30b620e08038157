"""The embedding op: a gather forward and a scatter-add backward, against PyTorch and numpy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.autograd import gradcheck


def table(rows=7, dim=3, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)


@pytest.mark.parametrize("shape", [(), (5,), (2, 4), (2, 3, 4)])
def test_forward_equals_torch(torch, shape):
    w = table(9, 5, dtype=np.float32)
    ids = np.random.default_rng(1).integers(0, 9, shape)
    ours = F.embedding(tt.tensor(ids), tt.tensor(w))
    theirs = torch.nn.functional.embedding(torch.from_numpy(np.asarray(ids)), torch.from_numpy(w))
    assert ours.shape == tuple(theirs.shape) == shape + (5,)
    assert ours.dtype == tt.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_forward_accepts_lists_and_numpy_ids():
    w = table()
    np.testing.assert_array_equal(F.embedding([[0, 6], [6, 0]], tt.tensor(w)).numpy(), w[[[0, 6], [6, 0]]])
    np.testing.assert_array_equal(F.embedding(np.array([3, 3, 1]), tt.tensor(w)).numpy(), w[[3, 3, 1]])


def test_forward_is_a_copy_not_a_view():
    w = tt.tensor(table())
    out = F.embedding(tt.tensor([1, 2]), w)
    np.testing.assert_array_equal(out.numpy(), table()[[1, 2]])
    out.numpy()[:] = 0.0
    np.testing.assert_array_equal(w.numpy(), table())


@pytest.mark.parametrize("padding_idx", [None, 1, -2])
def test_weight_grad_with_repeated_indices_equals_torch(torch, padding_idx):
    rng = np.random.default_rng(2)
    w = table(6, 4, seed=3)
    ids = np.array([[1, 1, 4, 1], [0, 4, 1, 5], [1, 0, 0, 1]])   # 1 six times, 0 and 4 repeated, 2 and 3 never
    upstream = rng.standard_normal(ids.shape + (4,))
    ours = tt.tensor(w, requires_grad=True)
    F.embedding(tt.tensor(ids), ours, padding_idx=padding_idx).backward(tt.tensor(upstream))
    theirs = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.from_numpy(ids), theirs, padding_idx=padding_idx).backward(
        torch.from_numpy(upstream))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_grad_counts_every_occurrence():
    w = tt.tensor(table(5, 2), requires_grad=True)
    F.embedding(tt.tensor([3, 3, 3, 0, 3]), w).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1, 1], [0, 0], [0, 0], [4, 4], [0, 0]])


def test_grad_accumulates_across_two_lookups():
    w = tt.tensor(table(4, 2), requires_grad=True)
    (F.embedding(tt.tensor([1, 2]), w).sum() + 2 * F.embedding(tt.tensor([[2]]), w).sum()).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[0, 0], [1, 1], [3, 3], [0, 0]])


def test_embedding_backward_keeps_the_float32_of_grad():
    from tinytorch.nn.embedding import _embedding_backward

    w = tt.tensor(table(dtype=np.float32), requires_grad=True)
    node = F.embedding(tt.tensor([0, 0]), w).grad_fn
    grads = _embedding_backward(node, np.ones((2, 3), dtype=np.float32))
    assert isinstance(grads, tuple) and len(grads) == 1, \
        f"a backward rule returns a tuple with one gradient per input (here one: the table's), got {type(grads)}"
    (g,) = grads
    assert g.dtype == np.float32 and g.shape == (7, 3), "the rule's own result, before the engine casts anything"


def test_padding_idx_changes_only_the_gradient():
    w = table()
    out = F.embedding(tt.tensor([2, 5]), tt.tensor(w, requires_grad=True), padding_idx=2)
    np.testing.assert_array_equal(out.numpy(), w[[2, 5]])     # the forward still reads row 2
    ours = tt.tensor(w, requires_grad=True)
    F.embedding(tt.tensor([2, 5, 2]), ours, padding_idx=2).sum().backward()
    np.testing.assert_array_equal(ours.grad.numpy()[2], 0.0)
    np.testing.assert_array_equal(ours.grad.numpy()[5], 1.0)


def test_records_embedding_node():
    w = tt.tensor(table(), requires_grad=True)
    ids = np.array([[0, 6], [6, 1]])
    out = F.embedding(tt.tensor(ids), w, padding_idx=-1)
    np.testing.assert_array_equal(out.numpy(), table()[ids])
    node = out.grad_fn
    assert node.op == "embedding" and len(node.inputs) == 1 and node.inputs[0] is w
    np.testing.assert_array_equal(node.attrs["indices"], ids)
    assert node.attrs["padding_idx"] == 6


def test_gradcheck():
    # (padding_idx deliberately breaks the true gradient, so it is checked against PyTorch instead)
    ids = tt.tensor([[0, 2, 2, 4], [4, 2, 1, 0]])
    w = tt.tensor(table(5, 3, seed=4), requires_grad=True)
    assert gradcheck(lambda w: F.embedding(ids, w), [w])
    assert gradcheck(lambda w: F.tanh(F.embedding(ids, w) * F.embedding(ids.T, w).transpose(0, 1)), [w])


@given(rows=st.integers(1, 6), dim=st.integers(1, 4),
       shape=st.lists(st.integers(0, 4), min_size=0, max_size=3), seed=st.integers(0, 1000))
def test_property_gather_and_scatter_add(rows, dim, shape, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, dim))
    ids = rng.integers(0, rows, tuple(shape))
    up = rng.standard_normal(tuple(shape) + (dim,))
    wt = tt.tensor(w, requires_grad=True)
    out = F.embedding(tt.tensor(ids), wt)
    np.testing.assert_array_equal(out.numpy(), w[ids])
    out.backward(tt.tensor(up))
    expected = np.zeros_like(w)
    np.add.at(expected, ids.reshape(-1), up.reshape(-1, dim))
    np.testing.assert_allclose(wt.grad.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad", [7, 100, -1])
def test_as_indices_names_the_bad_id_and_the_table_size(bad):
    w = tt.tensor(table(7, 3))
    with pytest.raises(IndexError) as info:
        F.embedding(tt.tensor([[1, 2], [bad, 3]]), w)
    assert str(bad) in str(info.value) and "7" in str(info.value), \
        f"the error names the id ({bad}) and the table's number of rows (7); got {info.value!r}"


def test_float_indices_are_refused():
    w = tt.tensor(table())
    np.testing.assert_array_equal(F.embedding(tt.tensor([1.0, 2.0]).long(), w).numpy(), table()[[1, 2]])
    with pytest.raises(TypeError, match="integer|int64"):
        F.embedding(tt.tensor([1.0, 2.0]), w)


def test_as_indices_refuses_the_id_equal_to_the_table_size():
    from tinytorch.nn.embedding import _as_indices

    for ids in ([3, 7], np.array([[0], [7]]), tt.tensor([7])):  # called directly: numpy's own indexing never runs
        with pytest.raises(IndexError) as info:
            _as_indices(ids, 7)
        assert "7" in str(info.value)
    assert _as_indices([6], 7).tolist() == [6]


def test_indices_are_a_fresh_int64_copy():
    from tinytorch.nn.embedding import _as_indices

    for dtype in (np.int32, np.int64):  # an int64 source must be copied too, not returned
        src = np.array([[2, 3]], dtype=dtype)
        out = _as_indices(src, 4)
        assert out.dtype == np.int64 and out.shape == (1, 2)
        src[0, 0] = 0
        assert out.tolist() == [[2, 3]], f"the node keeps its own copy of the ids ({np.dtype(dtype).name} source)"
    assert _as_indices([[0, 3], [1, 1]], 4).tolist() == [[0, 3], [1, 1]]
    assert _as_indices(tt.tensor(5), 6).shape == ()
    with pytest.raises(IndexError, match="-2"):
        _as_indices(np.array([0, -2]), 4)
    with pytest.raises(TypeError):
        _as_indices(np.array([0.0]), 4)


def test_as_indices_of_no_ids_is_an_empty_int64_array():
    from tinytorch.nn.embedding import _as_indices

    for ids in (np.array([], dtype=np.int64), np.zeros((2, 0), dtype=np.int32)):
        out = _as_indices(ids, 5)
        assert out.dtype == np.int64 and out.shape == np.shape(ids)


def test_as_indices_names_the_first_bad_id():
    from tinytorch.nn.embedding import _as_indices

    with pytest.raises(IndexError) as info:
        _as_indices(np.array([[1, 8], [12, -3]]), 7)
    assert "8" in str(info.value) and "12" not in str(info.value) and "-3" not in str(info.value)


def test_embedding_backward_freezes_padding_row_0():
    w = tt.tensor(table(5, 3), requires_grad=True)
    F.embedding(tt.tensor([[0, 2], [0, 0]]), w, padding_idx=0).backward(tt.tensor(np.ones((2, 2, 3))))
    np.testing.assert_array_equal(w.grad.numpy()[[0, 2]], [[0.0] * 3, [1.0] * 3])


def test_embedding_backward_allocates_the_gradient_not_a_one_hot_matrix():
    import tracemalloc

    from tinytorch.nn.embedding import _embedding_backward

    rows, n = 20_000, 500  # a one-hot (n, rows) float64 matrix: 80 MB; the gradient: 0.32 MB
    node = F.embedding(tt.tensor(np.arange(n) * 37 % rows), tt.tensor(np.zeros((rows, 2)), requires_grad=True)).grad_fn
    tracemalloc.start()
    _embedding_backward(node, np.ones((n, 2)))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * (rows + n) * 2 * 8, f"peak {peak / 1e6:.1f} MB during the backward"


def test_as_indices_refuses_bool_ids():
    from tinytorch.nn.embedding import _as_indices

    with pytest.raises(TypeError, match="integer"):
        _as_indices(np.array([True, False]), 4)

"""tril/triu, maximum/minimum, flip, roll, cumsum, sort/topk, clip, all, any: values, dtypes
and errors as in PyTorch."""
import numpy as np
import pytest

import tinytorch as tt

A = np.arange(12.0).reshape(3, 4) * np.array([1, -1, 1, -1]) + 0.5
I = np.array([[3, 1, 2], [0, 5, 4]])
BOOL = np.array([[True, False], [True, True]])

CASES = {
    "tril": lambda m, a: m.tril(a), "triu(1)": lambda m, a: a.triu(1),
    "tril(-1) batch": lambda m, a: m.stack([a, a * 2]).tril(-1),
    "maximum": lambda m, a: m.maximum(a, a.flip(1)), "minimum number-like": lambda m, a: a.minimum(a * 0),
    "flip(1)": lambda m, a: a.flip(1), "flip(0, -1)": lambda m, a: m.flip(a, (0, -1)),
    "roll(2, 1)": lambda m, a: a.roll(2, 1), "roll(-1, 0)": lambda m, a: m.roll(a, -1, 0),
    "roll flat": lambda m, a: a.roll(3), "roll two dims": lambda m, a: a.roll((1, 1), (0, 1)),
    "cumsum(0)": lambda m, a: a.cumsum(0), "cumsum(1)": lambda m, a: m.cumsum(a, 1),
    "sort values": lambda m, a: a.sort().values, "sort indices": lambda m, a: a.sort(0, descending=True).indices,
    "topk values": lambda m, a: a.topk(2).values, "topk indices": lambda m, a: a.topk(2, dim=0, largest=False).indices,
    "clip": lambda m, a: a.clip(-3, 4), "all": lambda m, a: (a > -100).all(), "any dim": lambda m, a: (a > 5).any(1),
    "all keepdim": lambda m, a: (a > 0).all(0, keepdim=True),
}


@pytest.mark.parametrize("data", [A, I], ids=["float64", "int64"])
@pytest.mark.parametrize("name", list(CASES), ids=list(CASES))
def test_values_and_dtypes_equal_pytorch(torch, name, data):
    ours, theirs = CASES[name](tt, tt.tensor(data)), CASES[name](torch, torch.tensor(data))
    want = theirs.numpy()
    assert ours.shape == tuple(theirs.shape), f"{name}: shape {ours.shape}, PyTorch {tuple(theirs.shape)}"
    assert ours.dtype == want.dtype, f"{name}: dtype {ours.dtype}, PyTorch {want.dtype}"
    np.testing.assert_array_equal(ours.numpy(), want, err_msg=name)


def test_cumsum_of_bools_counts(torch):
    np.testing.assert_array_equal(tt.tensor(BOOL).cumsum(1).numpy(), torch.tensor(BOOL).cumsum(1).numpy())
    assert tt.tensor(BOOL).cumsum(1).dtype == tt.int64


def test_all_any_return_bool():
    assert tt.tensor(BOOL).all().item() is False and tt.tensor(BOOL).any().item() is True
    np.testing.assert_array_equal(tt.tensor(BOOL).all(1).numpy(), [False, True])
    assert tt.tensor([1.0, 2.0]).all().dtype == tt.bool_


def test_errors():
    with pytest.raises(RuntimeError) as info:
        tt.tensor([1.0, 2.0]).tril()
    assert isinstance(info.value, ValueError)
    with pytest.raises(RuntimeError):
        tt.tensor(A).topk(5)
    with pytest.raises(IndexError):
        tt.tensor(A).flip(2)
    with pytest.raises(RuntimeError):
        tt.tensor(A).roll((1, 2), 0)


def test_ops_go_through_apply():
    x = tt.tensor(A, requires_grad=True)
    for name, y in [("tril", x.tril()), ("maximum", tt.maximum(x, x * 2)), ("flip", x.flip(0)),
                    ("roll", x.roll(1, 0)), ("cumsum", x.cumsum(1)), ("sort", x.sort().values),
                    ("topk", x.topk(1).values)]:
        assert y.grad_fn is not None and y.grad_fn.op == name, f"{name}: recorded as {y.grad_fn}"
    assert x.flip(0)._storage is not x._storage, "flip copies, as in PyTorch"


def test_indices_equal_pytorch(torch):
    for ours, theirs in [(tt.tensor(A).sort(1), torch.tensor(A).sort(1)),
                         (tt.tensor(A).sort(0, descending=True), torch.tensor(A).sort(0, descending=True)),
                         (tt.tensor(A).topk(3), torch.tensor(A).topk(3)),
                         (tt.tensor(A).topk(2, dim=0, largest=False), torch.tensor(A).topk(2, dim=0, largest=False))]:
        assert ours.indices.dtype == tt.int64
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())

"""Where numpy and PyTorch disagree, tinytorch follows PyTorch (each found by running
PyTorch-style code against tinytorch)."""
import numpy as np
import pytest

import tinytorch as tt


@pytest.mark.parametrize("index", [
    (0, slice(None), [1, 3]),          # int, slice, index tensor: PyTorch (4, 2), numpy (2, 4)
    (slice(None), 1, [0, 2, 4]),
    (Ellipsis, 0, [1, 1]),
    (1, [0, 2], slice(1, 4)),
])
def test_ints_beside_index_tensors_follow_pytorch(torch, index):
    data = np.arange(60.0).reshape(3, 4, 5)
    ours_index = tuple(tt.tensor(i) if isinstance(i, list) else i for i in index)
    theirs_index = tuple(torch.tensor(i) if isinstance(i, list) else i for i in index)
    got = tt.tensor(data)[ours_index]
    want = torch.from_numpy(data)[theirs_index]
    assert got.shape == tuple(want.shape), f"shape of y[{index}]: {got.shape} vs PyTorch {tuple(want.shape)}"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("make, index", [
    (lambda m: m.zeros(3, 4), (None,)),
    (lambda m: m.zeros(3, 4), (slice(None), None)),
    (lambda m: m.zeros(3, 4), (Ellipsis, None)),
    (lambda m: m.zeros(3, 4), (None, slice(None), None, slice(1, 3))),
    (lambda m: m.zeros(3, 4)[:, ::2], (None, 0)),
])
def test_a_dimension_inserted_by_none_has_pytorchs_stride(torch, make, index):
    got = make(tt)[index]
    want = make(torch)[index]
    assert got.shape == tuple(want.shape)
    assert got.stride() == want.stride(), f"x[{index}].stride(): {got.stride()} vs PyTorch {want.stride()}"


def test_squeeze_of_a_0d_tensor_checks_its_dim(torch):
    x = tt.tensor(3.0)
    assert x.squeeze(0).shape == () and x.squeeze(-1).shape == ()
    for bad in (1, -2, 5):
        with pytest.raises(IndexError, match="out of range"):
            x.squeeze(bad)
        with pytest.raises(IndexError):
            torch.tensor(3.0).squeeze(bad)


def test_assigning_a_wrong_grad_fails_at_the_assignment():
    w = tt.zeros(2, 3, requires_grad=True)
    with pytest.raises(TypeError, match="Tensor or None"):
        w.grad = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(RuntimeError, match=r"shape \(3, 2\)"):
        w.grad = tt.zeros(3, 2)
    with pytest.raises(RuntimeError, match="dtype"):
        w.grad = tt.zeros(2, 3, dtype=tt.float64)
    w.grad = tt.ones(2, 3)
    assert w.grad.tolist() == [[1.0] * 3] * 2
    w.grad = None
    assert w.grad is None

"""Batched matmul with numpy semantics, and its shape errors."""
import numpy as np
import pytest

import tinytorch as tt

CASES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 2, 3), (5, 3, 4)),
    ((1, 2, 3), (6, 3, 4)), ((7, 1, 2, 3), (5, 3, 4)), ((4,), (2, 4, 3)), ((2, 2, 4), (4,)),
]


@pytest.mark.parametrize("sa, sb", CASES, ids=[f"{a}@{b}" for a, b in CASES])
def test_matmul_matches_numpy(rng, sa, sb):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    expected = a @ b
    for out in (tt.tensor(a) @ tt.tensor(b), tt.tensor(a).matmul(tt.tensor(b)), tt.matmul(tt.tensor(a), tt.tensor(b))):
        assert out.shape == np.shape(expected)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_matmul_transposed_views(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    x = tt.tensor(a)
    np.testing.assert_allclose((x.T @ x).numpy(), a.T @ a, rtol=1e-5)
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-5)


def test_rmatmul_with_numpy_and_dtypes():
    a = np.eye(2, dtype=np.float32)
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = a @ x
    assert isinstance(out, tt.Tensor)
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    assert (tt.tensor([[1, 2]]) @ tt.tensor([[3], [4]])).dtype == tt.int64
    assert (tt.tensor([[1, 2]]) @ tt.tensor([[3], [4]])).item() == 11
    assert (x @ tt.ones(2, 2, dtype=tt.float64)).dtype == tt.float64


def test_inner_dim_error_names_both_shapes():
    a, b = tt.zeros(2, 3), tt.zeros(4, 5)
    with pytest.raises(ValueError) as info:
        a @ b
    msg = str(info.value)
    assert "(2, 3)" in msg and "(4, 5)" in msg and "3" in msg and "4" in msg


def test_matmul_shape_error_for_a_0d_operand_names_both_shapes():
    from tinytorch._tensor import _matmul_shape
    with pytest.raises(ValueError) as info:
        _matmul_shape((), (3,))
    assert "()" in str(info.value) and "(3,)" in str(info.value), f"both shapes, () and (3,); got: {info.value}"


def test_batch_dim_error_and_0d():
    a, b = tt.zeros(2, 2, 3), tt.zeros(3, 3, 4)
    with pytest.raises(ValueError) as info:
        a @ b
    assert "(2, 2, 3)" in str(info.value) and "(3, 3, 4)" in str(info.value)
    s = tt.tensor(2.0)
    with pytest.raises(ValueError):
        s @ tt.zeros(2)
    with pytest.raises(ValueError):
        tt.zeros(3) @ tt.zeros(4)

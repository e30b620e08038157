"""The broadcasting rule, its error messages, and broadcasting in ops."""
import numpy as np
import pytest

import tinytorch as tt


@pytest.mark.parametrize("shapes, expected", [
    (((64, 3), (3,)), (64, 3)),
    (((2, 1, 4), (3, 1)), (2, 3, 4)),
    (((), (2, 2)), (2, 2)),
    (((5,), (1,), (4, 1)), (4, 5)),
    (((1,), (0,)), (0,)),
    (((3,),), (3,)),
    ((), ()),
])
def test_broadcast_shapes(shapes, expected):
    assert tt.broadcast_shapes(*shapes) == expected


def test_broadcast_shapes_error_names_both_shapes_dim_and_rule():
    with pytest.raises(ValueError) as info:
        tt.broadcast_shapes((2, 3), (4,))
    msg = str(info.value)
    assert "(2, 3)" in msg and "(4,)" in msg
    assert "-1" in msg
    assert "3" in msg and "4" in msg
    assert "equal" in msg and "1" in msg


def test_broadcast_shapes_error_names_the_shape_broadcast_so_far():
    with pytest.raises(ValueError) as info:
        tt.broadcast_shapes((3, 1), (3, 2), (4, 2))
    msg = str(info.value)
    assert "(3, 2)" in msg and "(4, 2)" in msg and "-2" in msg, msg


def test_broadcast_shapes_error_dimension_counts_from_right():
    with pytest.raises(ValueError) as info:
        tt.broadcast_shapes((2, 5, 3), (4, 3))
    assert "-2" in str(info.value)
    assert "5" in str(info.value) and "4" in str(info.value)


def test_binary_op_error_uses_broadcast_message():
    a = tt.zeros(2, 3)
    b = tt.zeros(4)
    with pytest.raises(ValueError) as info:
        a + b
    assert "(2, 3)" in str(info.value) and "(4,)" in str(info.value)
    with pytest.raises(ValueError, match="broadcast"):
        a * tt.zeros(3, 3)


@pytest.mark.parametrize("sa, sb", [((4, 1), (3,)), ((2, 1, 3), (4, 1)), ((), (2,)), ((1, 1), (5, 5))])
def test_binary_broadcasting_matches_numpy(sa, sb):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    out = tt.tensor(a) + tt.tensor(b)
    assert out.shape == np.broadcast_shapes(sa, sb)
    np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)


def test_broadcast_to():
    x = tt.tensor([[1], [2], [3]])
    b = tt.broadcast_to(x, (2, 3, 4))
    assert b.shape == (2, 3, 4) and b.stride() == (0, 1, 0)
    np.testing.assert_array_equal(b.numpy(), np.broadcast_to(x.numpy(), (2, 3, 4)))
    assert b._storage is x._storage
    with pytest.raises(ValueError):
        tt.broadcast_to(x, (2, 4))

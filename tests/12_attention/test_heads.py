"""Splitting and merging heads with views."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.nn.attention import merge_heads, split_heads


@pytest.mark.parametrize("B,T,H,d", [(2, 5, 3, 4), (1, 7, 1, 6), (3, 2, 4, 2)])
def test_split_heads_is_a_view_with_the_right_strides(B, T, H, d):
    x = tt.randn(B, T, H * d)
    h = split_heads(x, H)
    assert h.shape == (B, H, T, d)
    assert h.stride() == (T * H * d, d, H * d, 1)
    assert np.shares_memory(h.numpy(), x.numpy())
    np.testing.assert_array_equal(h.numpy(), x.numpy().reshape(B, T, H, d).transpose(0, 2, 1, 3))


def test_split_heads_head_h_is_column_block_h():
    x = tt.randn(2, 4, 12)
    h = split_heads(x, 4)
    for head in range(4):
        np.testing.assert_array_equal(h.numpy()[:, head], x.numpy()[:, :, 3 * head:3 * head + 3])


def test_split_heads_view_writes_through_to_the_input():
    x = tt.zeros(1, 3, 6)
    h = split_heads(x, 2)
    h[0, 1, 2, 0] = 5.0
    assert x.numpy()[0, 2, 3] == 5.0


def test_merge_heads_inverts_the_split():
    x = tt.randn(2, 5, 12)
    np.testing.assert_array_equal(merge_heads(split_heads(x, 3)).numpy(), x.numpy())
    y = tt.randn(2, 3, 5, 4)
    m = merge_heads(y)
    assert m.shape == (2, 5, 12) and m.is_contiguous()
    np.testing.assert_array_equal(m.numpy(), y.numpy().transpose(0, 2, 1, 3).reshape(2, 5, 12))
    np.testing.assert_array_equal(split_heads(m, 3).numpy(), y.numpy())


def test_split_heads_of_an_unbatched_sequence():
    x = tt.tensor(np.random.default_rng(0).standard_normal((4, 6)))
    np.testing.assert_array_equal(split_heads(x, 2).numpy(), x.numpy().reshape(4, 2, 3).transpose(1, 0, 2),
                                  err_msg="unbatched split: (T, E) -> (H, T, d), head h = columns h*d..(h+1)*d")


def test_merge_heads_of_an_unbatched_sequence():
    y = tt.tensor(np.random.default_rng(1).standard_normal((3, 4, 2)))
    np.testing.assert_array_equal(merge_heads(y).numpy(), y.numpy().transpose(1, 0, 2).reshape(4, 6),
                                  err_msg="unbatched merge: token t = its heads' outputs side by side")


def test_unbatched_and_gradients():
    x = tt.tensor(np.random.default_rng(0).standard_normal((4, 6)), requires_grad=True)
    h = split_heads(x, 2)
    assert h.shape == (2, 4, 3)
    (merge_heads(h * 2.0) * tt.tensor(np.arange(24.0).reshape(4, 6))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 2.0 * np.arange(24.0).reshape(4, 6))


def test_split_heads_refuses_an_indivisible_width():
    assert split_heads(tt.randn(1, 2, 8), 4).shape == (1, 4, 2, 2)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(tt.randn(1, 2, 10), 4)

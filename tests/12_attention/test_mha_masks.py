"""MultiheadAttention's masks (True = NOT allowed) turned into scaled_dot_product_attention's
convention (True = may attend), with shapes that broadcast to the scores (N, H, L, S)."""
import numpy as np
import pytest

from tinytorch.nn.attention import _mha_mask_to_sdpa

N, H, L, S = 2, 3, 4, 5


def as_scores(m):
    return np.broadcast_to(m, (N, H, L, S))


def test_key_padding_mask_is_flipped_and_broadcast_over_heads_and_queries():
    kpm = np.zeros((N, S), dtype=bool)
    kpm[1, 3:] = True
    got = _mha_mask_to_sdpa(kpm, "key_padding", N, H)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(as_scores(got), np.broadcast_to(~kpm[:, None, None, :], (N, H, L, S)))


def test_attn_mask_2d_is_flipped_for_every_sequence_and_head():
    am = np.triu(np.ones((L, S), dtype=bool), 1)
    np.testing.assert_array_equal(as_scores(_mha_mask_to_sdpa(am, "attn", N, H)), np.broadcast_to(~am, (N, H, L, S)))


def test_per_head_attn_mask_is_sequence_major():
    m = np.random.default_rng(0).random((N * H, L, S)) < 0.5
    got = as_scores(_mha_mask_to_sdpa(m, "attn", N, H))
    for n in range(N):
        for h in range(H):
            np.testing.assert_array_equal(got[n, h], ~m[n * H + h], err_msg=f"sequence {n}, head {h}")


@pytest.mark.parametrize("kind,shape,expand", [("key_padding", (N, S), (slice(None), None, None, slice(None))),
                                               ("attn", (L, S), (None, None)),
                                               ("attn", (N * H, L, S), None)])
def test_float_masks_keep_their_values(kind, shape, expand):
    m = np.random.default_rng(1).standard_normal(shape)
    expected = m.reshape(N, H, L, S) if expand is None else m[expand]
    np.testing.assert_array_equal(as_scores(_mha_mask_to_sdpa(m, kind, N, H)), np.broadcast_to(expected, (N, H, L, S)))

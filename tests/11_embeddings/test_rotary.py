"""Rotary positions (RoPE): the convention, the offset-only scores, lengths, offsets and the gradient."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.autograd import gradcheck
from tinytorch.nn.embedding import rotary_embedding


def turned(x, offset=0, base=10000.0, direction=1):
    """Each vector's column pairs (2i, 2i+1) turned counterclockwise by (offset + t) * base^(-2i/D), one by one
    (direction=-1: turned back by the same angles, the transpose of the turn)."""
    out = np.array(x, dtype=np.float64)
    T, D = out.shape[-2], out.shape[-1]
    for t in range(T):
        for i in range(D // 2):
            a = direction * (offset + t) * base ** (-2 * i / D)
            u, v = out[..., t, 2 * i].copy(), out[..., t, 2 * i + 1].copy()
            out[..., t, 2 * i] = u * math.cos(a) - v * math.sin(a)
            out[..., t, 2 * i + 1] = u * math.sin(a) + v * math.cos(a)
    return out


@pytest.mark.parametrize("shape,offset,base", [((1, 2), 0, 10000.0), ((5, 8), 0, 10000.0), ((2, 7, 6), 3, 10000.0),
                                               ((2, 2, 4, 16), 11, 500.0), ((9, 4), 100, 10000.0)])
def test_rotary_embedding_turns_each_pair_by_position_times_frequency(shape, offset, base):
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    got = rotary_embedding(tt.tensor(x), offset=offset, base=base)
    assert got.shape == shape and got.dtype == tt.float64
    np.testing.assert_allclose(got.numpy(), turned(x, offset, base), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_rotary_embedding_turns_a_unit_pair_by_the_angle_of_its_frequency(base):
    e = np.zeros((1, 4))
    e[0, 3] = 1.0                                             # (0, 1) in columns 2, 3
    a = 3 * base ** (-2 / 4)
    np.testing.assert_allclose(rotary_embedding(tt.tensor(e), offset=3, base=base).numpy(),
                               [[0, 0, -math.sin(a), math.cos(a)]], rtol=1e-12, atol=1e-15,
                               err_msg=f"(0, 0, 0, 1) at position 3, base {base}: pair 1 turns counterclockwise "
                                       f"by 3 * base^(-2/4) = {a}")


def test_rotary_embedding_scores_depend_on_the_offset_only():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal(32), rng.standard_normal(32)
    Q = rotary_embedding(tt.tensor(np.tile(q, (64, 1)))).numpy()
    K = rotary_embedding(tt.tensor(np.tile(k, (64, 1)))).numpy()
    S = Q @ K.T
    for d in (-40, -3, 0, 1, 17, 63):
        diag = np.diagonal(S, d)
        np.testing.assert_allclose(diag, np.full_like(diag, diag[0]), rtol=1e-9, atol=1e-9,
                                   err_msg=f"scores at offset {d} differ with the position")
    np.testing.assert_allclose(np.linalg.norm(Q, axis=1), np.linalg.norm(q), rtol=1e-12)
    np.testing.assert_allclose(Q[0], q, rtol=1e-12, err_msg="position 0 leaves a vector unchanged")


def test_rotary_embedding_float32_stays_float32_and_x_is_unchanged():
    x = tt.randn(3, 4, 8)
    before = x.numpy().copy()
    y = rotary_embedding(x, offset=2)
    assert y.dtype == tt.float32 and y.shape == (3, 4, 8)
    np.testing.assert_array_equal(x.numpy(), before)
    np.testing.assert_allclose(y.numpy(), turned(before, 2), rtol=1e-5, atol=1e-6)


def test_rotary_embedding_gradient_reaches_x():
    x = tt.randn(2, 5, 6, dtype=tt.float64, requires_grad=True)
    assert gradcheck(lambda t: rotary_embedding(t, offset=7), (x,))
    up = np.random.default_rng(0).standard_normal((2, 5, 6))
    rotary_embedding(x, offset=7).backward(tt.tensor(up))
    # a turn is orthogonal: its gradient turns the upstream back by the opposite angle
    np.testing.assert_allclose(x.grad.numpy(), turned(up, 7, direction=-1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bad", [tt.randn(4, 5), tt.randn(3), np.zeros((2, 4))])
def test_rotary_embedding_refuses_odd_widths_and_non_tensors(bad):
    with pytest.raises(ValueError, match="rotary_embedding"):
        rotary_embedding(bad)
    assert rotary_embedding(tt.randn(2, 4)).shape == (2, 4)

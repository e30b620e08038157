"""causal_mask, masking, attention weights, dropout and argument errors."""
import math

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.nn.attention import apply_attn_mask, attention_weights, causal_mask


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("L,S,diagonal", [(1, 1, 0), (4, 4, 0), (3, 6, 0), (6, 3, 0), (3, 6, 3), (5, 5, -1)])
def test_causal_mask(L, S, diagonal):
    m = causal_mask(L, S, diagonal=diagonal)
    assert isinstance(m, tt.Tensor) and m.dtype == tt.bool_ and m.shape == (L, S)
    np.testing.assert_array_equal(m.numpy(), np.tril(np.ones((L, S), dtype=bool), diagonal))
    assert causal_mask(L).shape == (L, L)


def test_apply_attn_mask():
    rng = np.random.default_rng(0)
    s = rng.standard_normal((2, 4, 5))
    bool_mask = rng.random((4, 5)) < 0.5
    out = apply_attn_mask(tt.tensor(s), tt.tensor(bool_mask)).numpy()
    np.testing.assert_array_equal(out, np.where(bool_mask, s, -np.inf))
    float_mask = rng.standard_normal((2, 1, 5))
    np.testing.assert_allclose(apply_attn_mask(tt.tensor(s), float_mask).numpy(), s + float_mask)
    np.testing.assert_array_equal(apply_attn_mask(tt.tensor(s), is_causal=True).numpy(),
                                  np.where(np.tril(np.ones((4, 5), bool)), s, -np.inf))
    np.testing.assert_array_equal(apply_attn_mask(tt.tensor(s)).numpy(), s)


def test_apply_attn_mask_with_a_mask_and_is_causal_applies_both():
    rng = np.random.default_rng(1)
    s, bool_mask = rng.standard_normal((2, 4, 5)), rng.random((4, 5)) < 0.6
    out = apply_attn_mask(tt.tensor(s), tt.tensor(bool_mask), is_causal=True).numpy()
    np.testing.assert_array_equal(out, np.where(bool_mask & np.tril(np.ones((4, 5), bool)), s, -np.inf),
                                  err_msg="a bool mask and is_causal=True: a score survives only if both allow it")
    float_mask = rng.standard_normal((4, 5))
    out = apply_attn_mask(tt.tensor(s), float_mask, is_causal=True).numpy()
    np.testing.assert_allclose(out, np.where(np.tril(np.ones((4, 5), bool)), s + float_mask, -np.inf),
                               err_msg="a float mask and is_causal=True: added where allowed, -inf above the diagonal")


def test_apply_attn_mask_casts_a_float_mask_tensor_to_the_scores_dtype():
    s = np.random.default_rng(2).standard_normal((3, 4))
    out = apply_attn_mask(tt.tensor(s), tt.tensor(np.ones((3, 4), dtype=np.float32)))
    assert out.dtype == tt.float64, f"float64 scores plus a float32 mask Tensor: got {out.dtype}, the scores' dtype kept"


@pytest.mark.parametrize("kind", ["bool", "float", "causal"])
def test_apply_attn_mask_leaves_the_callers_scores(kind):
    rng = np.random.default_rng(4)
    s = rng.standard_normal((2, 3, 4))
    scores = tt.tensor(s.copy())
    mask = {"bool": tt.tensor(rng.random((3, 4)) < 0.5), "float": rng.standard_normal((3, 4)), "causal": None}[kind]
    apply_attn_mask(scores, mask, is_causal=kind == "causal")
    np.testing.assert_array_equal(scores.numpy(), s, err_msg=f"apply_attn_mask with a {kind} mask changed the "
                                                             f"caller's scores: the result must be a new Tensor")


def test_a_float_mask_tensor_stays_in_the_graph():
    """A learned attention bias (relative positions, ALiBi) is a float mask that requires grad."""
    rng = np.random.default_rng(5)
    bias = tt.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    apply_attn_mask(tt.tensor(rng.standard_normal((2, 4, 5))), bias).sum().backward()
    assert bias.grad is not None, ("apply_attn_mask must add a float mask Tensor itself (not a numpy copy of "
                                   "its numbers), so that a learned bias gets its gradient")
    np.testing.assert_array_equal(bias.grad.numpy(), np.full((4, 5), 2.0),
                                  err_msg="under sum(), each bias entry was added to the scores of 2 batch entries")


def test_attention_weights_equal_formula():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((3, 4, 8)), rng.standard_normal((3, 6, 8))
    w = attention_weights(tt.tensor(q), tt.tensor(k)).numpy()
    np.testing.assert_allclose(w, softmax(q @ k.transpose(0, 2, 1) / np.sqrt(8)), rtol=1e-12)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    wc = attention_weights(tt.tensor(q), tt.tensor(k), is_causal=True, scale=0.5).numpy()
    ref = softmax(np.where(np.tril(np.ones((4, 6), bool)), q @ k.transpose(0, 2, 1) * 0.5, -np.inf))
    np.testing.assert_allclose(wc, ref, rtol=1e-12)


def test_attention_weights_use_an_explicit_scale_of_zero():
    rng = np.random.default_rng(6)
    w = attention_weights(tt.tensor(rng.standard_normal((3, 4))), tt.tensor(rng.standard_normal((5, 4))), scale=0.0)
    np.testing.assert_allclose(w.numpy(), np.full((3, 5), 0.2), rtol=1e-12,
                               err_msg="scale=0.0 makes every score 0 (uniform weights); only scale=None means 1/sqrt(E)")


def test_attention_weights_of_a_row_with_every_key_forbidden_are_zero_with_zero_gradients():
    rng = np.random.default_rng(4)
    q = tt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    k = tt.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    additive = np.zeros((3, 5))
    additive[1] = -np.inf  # query 1 may see no key (a float mask: added to the scores)
    w = attention_weights(q, k, attn_mask=tt.tensor(additive))
    np.testing.assert_array_equal(w.numpy()[1], 0.0)
    np.testing.assert_allclose(w.numpy()[[0, 2]].sum(-1), 1.0, rtol=1e-12)
    (w * tt.tensor(rng.standard_normal((3, 5)))).sum().backward()
    assert np.isfinite(q.grad.numpy()).all() and np.isfinite(k.grad.numpy()).all(), \
        "a dead row's softmax must never see -inf: its gradients are NaN otherwise"
    np.testing.assert_array_equal(q.grad.numpy()[1], 0.0)


def test_padding_mask_gives_zero_weight_to_padding_keys():
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((2, 1, 5, 4)), rng.standard_normal((2, 1, 5, 4))
    lengths = np.array([5, 3])
    pad = (np.arange(5)[None, :] < lengths[:, None])[:, None, None, :]     # (B, 1, 1, S)
    w = attention_weights(tt.tensor(q), tt.tensor(k), attn_mask=tt.tensor(pad)).numpy()
    np.testing.assert_array_equal(w[1, ..., 3:], 0.0)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(w[0], softmax(q[0] @ k[0].swapaxes(-1, -2) / 2.0), rtol=1e-12)


def test_value_padding_does_not_leak():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((4, 3)), rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    mask = np.array([True] * 4 + [False] * 2)
    v2 = v.copy()
    v2[4:] = 1e6
    a = F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k), tt.tensor(v), attn_mask=mask).numpy()
    b = F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k), tt.tensor(v2), attn_mask=mask).numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, softmax(q @ k[:4].T / np.sqrt(3)) @ v[:4], rtol=1e-12)


def test_all_rows_masked_gives_zeros_and_zero_grads():
    rng = np.random.default_rng(4)
    q = tt.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    k = tt.tensor(rng.standard_normal((5, 4)), requires_grad=True)
    v = tt.tensor(rng.standard_normal((5, 2)), requires_grad=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((3, 5), dtype=bool))
    np.testing.assert_array_equal(out.numpy(), 0.0)
    out.sum().backward()
    for t in (q, k, v):
        np.testing.assert_array_equal(t.grad.numpy(), 0.0)


def test_scaled_dot_product_attention_default_scale_is_one_over_the_root_of_the_query_width():
    rng = np.random.default_rng(9)
    q, k, v = (tt.tensor(rng.standard_normal(shape)) for shape in ((3, 4), (5, 4), (5, 9)))
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v).numpy(),
                               attention_weights(q, k, scale=1 / math.sqrt(4)).numpy() @ v.numpy(), rtol=1e-12,
                               err_msg="no scale given: 1/sqrt(E) with E = 4 the width of the queries and keys, "
                                       "not of the values (9)")


def test_scaled_dot_product_attention_dropout():
    rng = np.random.default_rng(5)
    q, k = tt.tensor(rng.standard_normal((2, 16, 4))), tt.tensor(rng.standard_normal((2, 16, 4)))
    eye = tt.tensor(np.eye(16))                            # value = identity: output = weights
    plain = F.scaled_dot_product_attention(q, k, eye).numpy()
    np.testing.assert_allclose(plain, attention_weights(q, k).numpy(), rtol=1e-12)
    tt.manual_seed(0)
    dropped = F.scaled_dot_product_attention(q, k, eye, dropout_p=0.25).numpy()
    zero = np.isclose(dropped, 0.0)
    assert np.all(zero | np.isclose(dropped, plain / 0.75)), \
        "dropout_p=0.25: each weight is either dropped (0) or kept and divided by 0.75"
    assert 0.15 < zero.mean() < 0.35, f"dropout_p=0.25 drops about a quarter of the weights, got {zero.mean():.2f}"
    np.testing.assert_array_equal(F.scaled_dot_product_attention(q, k, eye, dropout_p=1.0).numpy(), 0.0,
                                  err_msg="dropout_p=1.0 drops every weight")
    v = tt.tensor(rng.standard_normal((16, 3)))
    tt.manual_seed(0)                                      # the same draws, with real values
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, dropout_p=0.25).numpy(),
                               dropped @ v.numpy(), rtol=1e-12,
                               err_msg="dropout acts on the weights before the values: out = dropped weights @ v")


def test_a_numpy_float_mask_keeps_the_scores_dtype():
    scores = tt.tensor(np.random.default_rng(3).standard_normal((2, 4, 5)).astype(np.float32))
    bias = np.random.default_rng(4).standard_normal((4, 5))          # float64
    out = apply_attn_mask(scores, bias)
    assert out.dtype == tt.float32, f"a float64 numpy mask must not promote float32 scores, got {out.dtype}"
    np.testing.assert_allclose(out.numpy(), scores.numpy() + bias.astype(np.float32), rtol=1e-6)


def test_scores_stay_in_the_graph_through_a_bool_mask():
    s = np.random.default_rng(5).standard_normal((3, 4))
    allowed = np.random.default_rng(6).random((3, 4)) < 0.5
    scores = tt.tensor(s, requires_grad=True)
    masked = apply_attn_mask(scores, tt.tensor(allowed))
    assert masked.requires_grad, "the masked scores must stay in the graph (no numpy copy of the scores)"
    masked.exp().sum().backward()
    np.testing.assert_allclose(scores.grad.numpy(), np.where(allowed, np.exp(s), 0.0), rtol=1e-12,
                               err_msg="gradient through the mask: exp(s) where allowed, 0 where forbidden")


def test_mismatched_shapes_raise():
    rng = np.random.default_rng(6)
    q, k, v = (tt.tensor(rng.standard_normal(s)) for s in [(2, 5, 4), (2, 6, 4), (2, 6, 3)])
    assert F.scaled_dot_product_attention(q, k, v).shape == (2, 5, 3)
    with pytest.raises(ValueError, match=r"\(2, 5, 4\).*\(2, 6, 3\)|\(2, 6, 3\).*\(2, 5, 4\)"):
        F.scaled_dot_product_attention(q, tt.tensor(rng.standard_normal((2, 6, 3))), v)
    with pytest.raises(ValueError, match=r"\(2, 7, 3\)"):
        F.scaled_dot_product_attention(q, k, tt.tensor(rng.standard_normal((2, 7, 3))))
    with pytest.raises(ValueError, match="broadcast"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((6, 5), dtype=bool))
    with pytest.raises(ValueError, match="is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((5, 6), dtype=bool), is_causal=True)
    with pytest.raises(TypeError, match="bool"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((5, 6), dtype=np.int64))


@pytest.mark.parametrize("scale", [0.0, 0.1, 3.0])
def test_scaled_dot_product_attention_passes_its_scale_on(scale):
    rng = np.random.default_rng(8)
    q, k, v = (tt.tensor(rng.standard_normal(shape)) for shape in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, scale=scale).numpy(),
                               attention_weights(q, k, scale=scale).numpy() @ v.numpy(), rtol=1e-12,
                               err_msg=f"scaled_dot_product_attention(..., scale={scale}): the weights of that scale "
                                       f"times the values")

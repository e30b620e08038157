"""MultiheadAttention on its own: initialisation, causality, fully padded sequences, dropout,
gradcheck and errors."""
import math

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch import nn
from tinytorch.autograd import gradcheck
from tinytorch.nn.attention import causal_mask


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_multihead_attention_init_passes_the_dtype_to_every_parameter(dtype):
    m = nn.MultiheadAttention(8, 2, dtype=getattr(tt, dtype))
    got = {name: p.dtype for name, p in m.named_parameters()}
    assert got == dict.fromkeys(["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"],
                                getattr(tt, dtype)), f"MultiheadAttention(8, 2, dtype={dtype}): parameter dtypes {got}"


def test_multihead_attention_reset_parameters_follows_pytorch():
    tt.manual_seed(0)
    m = nn.MultiheadAttention(64, 8)
    assert m.head_dim == 8 and m.num_heads == 8 and m.embed_dim == 64
    w = m.in_proj_weight.numpy()
    bound = math.sqrt(6 / (3 * 64 + 64))                      # Xavier uniform over (3E, E)
    assert w.shape == (192, 64) and np.abs(w).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    np.testing.assert_array_equal(m.in_proj_bias.numpy(), 0.0)
    np.testing.assert_array_equal(m.out_proj.bias.numpy(), 0.0)
    assert isinstance(m.out_proj, nn.Linear), "out_proj is a Linear(E, E)"
    assert np.abs(m.out_proj.weight.numpy()).max() <= 1 / math.sqrt(64), \
        "out_proj keeps Linear's own initialisation, U(-1/sqrt(E), 1/sqrt(E)) (PyTorch redraws only in_proj)"


def test_causality_outputs_do_not_see_the_future():
    tt.manual_seed(1)
    m = nn.MultiheadAttention(16, 4, dtype=tt.float64)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 9, 16))
    for t in range(1, 9):
        x2 = x.copy()
        x2[:, t:] = 50 * rng.standard_normal((2, 9 - t, 16))
        y1 = m(tt.tensor(x), tt.tensor(x), tt.tensor(x), is_causal=True)[0].numpy()
        y2 = m(tt.tensor(x2), tt.tensor(x2), tt.tensor(x2), is_causal=True)[0].numpy()
        np.testing.assert_array_equal(y1[:, :t], y2[:, :t])
        assert np.abs(y1[:, t:] - y2[:, t:]).max() > 1e-3


def test_causality_gradients_are_exactly_zero():
    tt.manual_seed(3)
    m = nn.MultiheadAttention(8, 2, dtype=tt.float64)
    x = tt.tensor(np.random.default_rng(4).standard_normal((1, 6, 8)), requires_grad=True)
    out, _ = m(x, x, x, attn_mask=~causal_mask(6).numpy())
    out[0, 2].sum().backward()
    assert np.all(x.grad.numpy()[0, 3:] == 0), \
        "output 2 with a causal attn_mask (True = forbidden, PyTorch's layer convention): tokens 3..5 get no gradient"
    assert np.all(np.abs(x.grad.numpy()[0, :3]).sum(-1) > 0), "tokens 0..2, which output 2 may see, get a gradient"


def test_sdpa_causality():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 7, 4)) for _ in range(3))
    base = F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k), tt.tensor(v), is_causal=True).numpy()
    k2, v2 = k.copy(), v.copy()
    k2[:, 4:] += 10.0
    v2[:, 4:] -= 10.0
    changed = F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k2), tt.tensor(v2), is_causal=True).numpy()
    np.testing.assert_array_equal(base[:, :4], changed[:, :4])
    assert np.abs(base[:, 4:] - changed[:, 4:]).min() > 0


def test_fully_padded_sequence_gives_zeros_not_nan():
    tt.manual_seed(6)
    m = nn.MultiheadAttention(8, 2, dtype=tt.float64)
    x = tt.tensor(np.random.default_rng(7).standard_normal((2, 3, 8)), requires_grad=True)
    kpm = np.array([[False, False, True], [True, True, True]])
    out, w = m(x, x, x, key_padding_mask=kpm)
    np.testing.assert_array_equal(w.numpy()[1], 0.0)
    np.testing.assert_allclose(out.numpy()[1], np.broadcast_to(m.out_proj.bias.numpy(), (3, 8)))
    out.sum().backward()
    for p in [x, *m.parameters()]:
        assert np.all(np.isfinite(p.grad.numpy()))


def test_multihead_attention_attend_drops_only_in_training():
    tt.manual_seed(8)
    m = nn.MultiheadAttention(8, 2, dropout=0.5, dtype=tt.float64)
    x = tt.tensor(np.random.default_rng(9).standard_normal((2, 6, 8)))
    m.eval()
    a, wa = m(x, x, x)
    b, wb = m(x, x, x)
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg="eval mode: no dropout, the same output twice")
    np.testing.assert_allclose(wa.numpy().sum(-1), 1.0, rtol=1e-12,
                               err_msg="eval mode: the head-averaged weights of each query sum to 1")
    m.train()
    c, wc = m(x, x, x, average_attn_weights=False)
    assert not np.allclose(c.numpy(), a.numpy())
    assert np.mean(wc.numpy() == 0) > 0.3, ("in training, the weights returned are the ones the values were "
                                            "averaged with, after dropout (PyTorch's choice): about half are 0, "
                                            f"got {np.mean(wc.numpy() == 0):.0%} zeros")



def test_multihead_attention_attend_output_uses_the_returned_weights():
    """One dropout draw: the weights returned are the ones the output was computed with."""
    tt.manual_seed(3)
    m = nn.MultiheadAttention(8, 2, dropout=0.5, dtype=tt.float64).train()
    with tt.no_grad():
        m.in_proj_bias.copy_(tt.tensor(np.random.default_rng(1).standard_normal(24)))
    xq = np.random.default_rng(2).standard_normal((2, 5, 8))
    out, w = m(tt.tensor(xq), tt.tensor(xq), tt.tensor(xq), average_attn_weights=False)
    W, b = m.in_proj_weight.numpy(), m.in_proj_bias.numpy()
    v = (xq @ W[16:].T + b[16:]).reshape(2, 5, 2, 4).swapaxes(1, 2)   # (N, H, S, d)
    expected = (w.numpy() @ v).swapaxes(1, 2).reshape(2, 5, 8) @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10, atol=1e-12,
                               err_msg="the output against out_proj(merge(returned per-head weights @ V)): the "
                                       "weights returned must be the very ones (after dropout) the values were "
                                       "averaged with")

def test_multihead_attention_attend_gradcheck():
    tt.manual_seed(10)
    m = nn.MultiheadAttention(6, 3, dtype=tt.float64)
    with tt.no_grad():
        m.in_proj_bias.copy_(tt.randn(18, dtype=tt.float64))
    rng = np.random.default_rng(11)
    q = tt.tensor(rng.standard_normal((2, 3, 6)), requires_grad=True)
    kv = tt.tensor(rng.standard_normal((2, 4, 6)), requires_grad=True)
    kpm = np.array([[False, False, False, True], [False, True, False, False]])
    assert gradcheck(lambda q, kv, w, b, wo: m(q, kv, kv, key_padding_mask=kpm)[0],
                     [q, kv, m.in_proj_weight, m.in_proj_bias, m.out_proj.weight])
    assert gradcheck(lambda q, w: m(q, q, q, is_causal=True)[1], [q, m.in_proj_weight])


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.7}])
def test_gradcheck_sdpa(kwargs):
    rng = np.random.default_rng(12)
    ins = [tt.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 4, 3), (2, 5, 3), (2, 5, 2)]]
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs), ins)


@pytest.mark.parametrize("kind", ["bool", "float", "dead row"])
def test_gradcheck_sdpa_masks(kind):
    rng = np.random.default_rng(13)
    ins = [tt.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 4, 3), (2, 5, 3), (2, 5, 2)]]
    mask = rng.random((4, 5)) < 0.5
    mask[:, 0] = True
    if kind == "float":
        mask = rng.standard_normal((2, 4, 5))
    if kind == "dead row":
        mask[1] = False
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), ins)


def test_embed_dim_not_divisible():
    assert nn.MultiheadAttention(12, 4).head_dim == 3
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 4)


def test_shape_errors():
    m = nn.MultiheadAttention(8, 2)
    x = tt.randn(2, 5, 8)
    assert m(x, x, x)[0].shape == (2, 5, 8)
    with pytest.raises(ValueError, match=r"\(2, 5, 6\)"):
        m(tt.randn(2, 5, 6), x, x)
    with pytest.raises(ValueError, match="batch size|length"):
        m(x, tt.randn(2, 4, 8), tt.randn(2, 5, 8))
    with pytest.raises(ValueError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=np.zeros((2, 4), dtype=bool))
    with pytest.raises(ValueError, match="attn_mask"):
        m(x, x, x, attn_mask=np.zeros((5, 4), dtype=bool))


def test_repr():
    m = nn.MultiheadAttention(8, 2, bias=False)
    assert m.in_proj_bias is None
    assert "embed_dim=8" in repr(m) and "num_heads=2" in repr(m) and "out_proj" in repr(m)


@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)])
def test_multihead_attention_attend_returns_weights_averaged_over_the_heads(need_weights, average):
    tt.manual_seed(4)
    m = nn.MultiheadAttention(8, 2, dtype=tt.float64).eval()
    q, kv = (tt.tensor(np.random.default_rng(s).standard_normal((2, n, 8))) for s, n in ((5, 3), (6, 4)))
    _, per_head = m(q, kv, kv, average_attn_weights=False)
    assert per_head.shape == (2, 2, 3, 4), "per-head weights: (N, H, L, S)"
    _, w = m(q, kv, kv, need_weights=need_weights, average_attn_weights=average)
    if not need_weights:
        assert w is None, "need_weights=False: no weights"
    elif average:
        np.testing.assert_allclose(w.numpy(), per_head.numpy().mean(axis=1), rtol=1e-12,
                                   err_msg="average_attn_weights: the mean of the per-head weights over the heads, "
                                           "(N, L, S)")
    else:
        np.testing.assert_allclose(w.numpy().sum(-1), 1.0, rtol=1e-12, err_msg="each head's rows sum to 1")


def test_multihead_attention_attend_projects_query_key_and_value_with_their_own_weights():
    tt.manual_seed(6)
    m = nn.MultiheadAttention(8, 2, dtype=tt.float64).eval()
    with tt.no_grad():
        m.in_proj_bias.copy_(tt.tensor(np.random.default_rng(7).standard_normal(24)))
    xq, xk, xv = (np.random.default_rng(s).standard_normal((2, n, 8)) for s, n in ((8, 3), (9, 5), (10, 5)))
    out, _ = m(tt.tensor(xq), tt.tensor(xk), tt.tensor(xv), need_weights=False)
    W, b = m.in_proj_weight.numpy(), m.in_proj_bias.numpy()

    def heads(x, part):                                            # (N, T, E) -> (N, H, T, d)
        return (x @ W[8 * part:8 * part + 8].T + b[8 * part:8 * part + 8]).reshape(2, -1, 2, 4).swapaxes(1, 2)

    q, k, v = heads(xq, 0), heads(xk, 1), heads(xv, 2)
    s = q @ k.swapaxes(-1, -2) / 2.0                               # sqrt(d) = 2
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    expected = (w @ v).swapaxes(1, 2).reshape(2, 3, 8) @ m.out_proj.weight.numpy().T + m.out_proj.bias.numpy()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-10, atol=1e-12,
                               err_msg="cross-attention with three different inputs: the query through the first "
                                       "E rows of in_proj, the key through the next E, the value through the last E")

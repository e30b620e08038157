"""The offset causal mask (vs PyTorch's causal_lower_right) and attention with a cache (vs
torch.nn.MultiheadAttention on the whole sequence)."""
import numpy as np
import pytest
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch.nn import KVCache, MultiheadAttention
from tinytorch.nn.kv_cache import cached_attention, cached_causal_mask


@pytest.mark.parametrize("T,past", [(1, 0), (4, 0), (1, 5), (2, 3), (3, 6)])
def test_cached_causal_mask_is_the_bottom_right_triangle(torch, T, past):
    causal_lower_right = torch_reference.companion_module(torch, "torch.nn.attention.bias").causal_lower_right

    got = cached_causal_mask(T, past)
    assert got.dtype == tt.bool_ and got.shape == (T, past + T), f"expected a bool ({T}, {past + T}) mask, got {got.dtype} {got.shape}"
    expected = causal_lower_right(T, past + T)._materialize().numpy()
    np.testing.assert_array_equal(got.numpy(), expected, err_msg="True where j <= past + i (PyTorch's causal_lower_right)")
    assert got.numpy()[np.arange(T), past + np.arange(T)].all(), "each new token attends to itself"


def _pair(torch, E=12, H=3, seed=0):
    tm = torch.nn.MultiheadAttention(E, H, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        tm.in_proj_bias.normal_(generator=torch.Generator().manual_seed(seed))
        tm.out_proj.bias.normal_(generator=torch.Generator().manual_seed(seed + 1))
    ours = MultiheadAttention(E, H, dtype=tt.float64)
    ours.load_state_dict({n: tt.tensor(p.detach().numpy()) for n, p in tm.state_dict().items()})
    return tm, ours


def _torch_causal(tm, torch, x):
    tx = torch.from_numpy(x)
    T = x.shape[1]
    with torch.no_grad():
        return tm(tx, tx, tx, attn_mask=torch.ones(T, T, dtype=torch.bool).triu(1))[0].numpy()


def test_cached_attention_prefill_then_steps_equal_torch_mha(torch):
    tm, ours = _pair(torch)
    x = np.random.default_rng(1).standard_normal((2, 9, 12))
    ref = _torch_causal(tm, torch, x)
    cache = KVCache(2, 2, 3, 9, 4, dtype=tt.float64)
    chunks = [(0, 4), (4, 5), (5, 6), (6, 8), (8, 9)]
    with tt.no_grad():
        for a, b in chunks:
            out = cached_attention(ours, tt.tensor(x[:, a:b]), cache, 1)
            assert out.shape == (2, b - a, 12), f"output of the new tokens: expected (2, {b - a}, 12), got {out.shape}"
            np.testing.assert_allclose(out.numpy(), ref[:, a:b], rtol=1e-10, atol=1e-12,
                                       err_msg=f"tokens {a}..{b - 1} with {a} cached vs torch MHA on the whole sequence")
    assert (cache.get_seq_length(0), cache.get_seq_length(1)) == (0, 9), "only the given layer's cache grows"


def test_cached_attention_stores_the_projected_keys_and_values(torch):
    tm, ours = _pair(torch, seed=3)
    x = np.random.default_rng(2).standard_normal((1, 5, 12))
    cache = KVCache(1, 1, 3, 5, 4, dtype=tt.float64)
    with tt.no_grad():
        cached_attention(ours, tt.tensor(x[:, :2]), cache, 0)
        cached_attention(ours, tt.tensor(x[:, 2:5]), cache, 0)
    W, b = tm.in_proj_weight.detach().numpy(), tm.in_proj_bias.detach().numpy()
    k = (x @ W[12:24].T + b[12:24]).reshape(1, 5, 3, 4).transpose(0, 2, 1, 3)
    v = (x @ W[24:].T + b[24:]).reshape(1, 5, 3, 4).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(cache.key_cache[0].numpy(), k, rtol=1e-12, atol=1e-12,
                               err_msg="the cache holds every token's key, split into heads, the first one included")
    np.testing.assert_allclose(cache.value_cache[0].numpy(), v, rtol=1e-12, atol=1e-12,
                               err_msg="the cache holds every token's value")


def test_cached_attention_through_the_multihead_attention_hook(torch):
    tm, ours = _pair(torch, seed=5)
    x = np.random.default_rng(3).standard_normal((3, 6, 12))
    ref = _torch_causal(tm, torch, x)
    cache = KVCache(1, 3, 3, 6, 4, dtype=tt.float64)
    outs = []
    with tt.no_grad():
        for a, b in [(0, 3), (3, 4), (4, 6)]:
            xt = tt.tensor(x[:, a:b])
            out, weights = ours(xt, xt, xt, kv_cache=cache, layer_idx=0)
            assert weights is None, "with a kv_cache the weights are None"
            outs.append(out.numpy())
    np.testing.assert_allclose(np.concatenate(outs, 1), ref, rtol=1e-10, atol=1e-12,
                               err_msg="MultiheadAttention(x, x, x, kv_cache=...) vs torch MHA on the whole sequence")
    xt = tt.tensor(x[:, :1])
    with pytest.raises(ValueError, match="self-attention"):
        ours(xt, tt.tensor(x[:, :1]), xt, kv_cache=KVCache(1, 3, 3, 6, 4, dtype=tt.float64))

"""The GPT forward pass with a KV cache: the same logits (within 1e-5) as the full forward pass,
chunk by chunk, for batch > 1 and several layers; positions offset by the cache."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import KVCache
from tinytorch.nn.kv_cache import cached_gpt_forward


def small(V=13, T=12, d=16, h=2, L=3, seed=0):
    tt.manual_seed(seed)
    return nn.GPT(nn.GPTConfig(vocab_size=V, block_size=T, d_model=d, n_heads=h, n_layers=L)).eval()


def ids(B, T, V=13, seed=0):
    return tt.tensor(np.random.default_rng(seed).integers(0, V, (B, T)))


@pytest.mark.parametrize("L", [2, 3])
def test_cached_gpt_forward_equals_the_full_forward_chunk_by_chunk(L):
    model = small(L=L, seed=L)
    seq = ids(3, 12, seed=L)
    ref = model(seq)[0].numpy()
    cache = KVCache.for_model(model, 3)
    with tt.no_grad():
        for a, b in [(0, 5), (5, 6), (6, 7), (7, 8), (8, 11), (11, 12)]:
            got = cached_gpt_forward(model, seq[:, a:b], cache).numpy()
            assert got.shape == (3, b - a, 13), f"logits of the new tokens: expected (3, {b - a}, 13), got {got.shape}"
            np.testing.assert_allclose(got, ref[:, a:b], rtol=1e-5, atol=1e-5,
                                       err_msg=f"logits of tokens {a}..{b - 1} with {a} cached vs no cache")
    assert [cache.get_seq_length(i) for i in range(L)] == [12] * L, "every layer's cache holds all 12 tokens"


def test_cached_gpt_forward_float64_is_exact_to_rounding():
    model = small(seed=7).double()
    seq = ids(2, 10, seed=7)
    ref = model(seq)[0].numpy()
    cache = KVCache.for_model(model, 2)
    with tt.no_grad():
        got = [cached_gpt_forward(model, seq[:, :6], cache).numpy()]
        got += [cached_gpt_forward(model, seq[:, t:t + 1], cache).numpy() for t in range(6, 10)]
    np.testing.assert_allclose(np.concatenate(got, 1), ref, rtol=1e-10, atol=1e-12,
                               err_msg="float64: prefill 6 and 4 single steps vs the full forward")


def test_cached_gpt_forward_uses_the_positions_after_the_cache():
    model = small(seed=2).double()
    seq = ids(1, 6, seed=2)
    with tt.no_grad():
        cache = KVCache.for_model(model, 1)
        cached_gpt_forward(model, seq[:, :5], cache)
        step = cached_gpt_forward(model, seq[:, 5:6], cache).numpy()
        # the same token with nothing cached is at position 0: it must not give the same logits
        alone = cached_gpt_forward(model, seq[:, 5:6], KVCache.for_model(model, 1)).numpy()
    np.testing.assert_allclose(step[:, 0], model(seq)[0].numpy()[:, 5], rtol=1e-10, atol=1e-12,
                               err_msg="the token after 5 cached ones is at position 5")
    assert np.abs(step - alone).max() > 1e-6, "a token after 5 cached ones differs from the same token at position 0"


def test_cached_gpt_forward_every_layer_keeps_its_own_keys():
    model = small(L=3, seed=4).double()
    seq = ids(2, 7, seed=4)
    cache = KVCache.for_model(model, 2)
    with tt.no_grad():
        cached_gpt_forward(model, seq, cache)
    keys = [cache.key_cache[i].numpy()[:, :, :7] for i in range(3)]
    for i in range(3):
        assert np.abs(keys[i]).max() > 0, f"layer {i}'s cache was written"
        for j in range(i + 1, 3):
            assert np.abs(keys[i] - keys[j]).max() > 1e-6, f"layers {i} and {j} have different keys"


def test_cached_gpt_forward_through_the_gpt_hook_and_its_errors():
    model = small(T=8, seed=5)
    seq = ids(2, 8, seed=5)
    ref = model(seq)[0].numpy()
    cache = KVCache.for_model(model, 2)
    with tt.no_grad():
        first, loss = model(seq[:, :3], kv_cache=cache)
        second, _ = model(seq[:, 3:8], kv_cache=cache)
    assert loss is None, "GPT.forward with a cache returns (logits, None)"
    np.testing.assert_allclose(np.concatenate([first.numpy(), second.numpy()], 1), ref, rtol=1e-5, atol=1e-5,
                               err_msg="GPT.forward(idx, kv_cache=...) in two chunks vs the full forward")
    with pytest.raises(ValueError, match="block_size"):
        model(seq[:, :1], kv_cache=cache)


def test_cached_attention_through_the_transformer_block_hook():
    model = small(L=2, seed=8).double()
    block = model.blocks[0]
    x = tt.tensor(np.random.default_rng(8).standard_normal((2, 6, 16)))
    ref = block(x).numpy()
    cache = KVCache.for_model(model, 2)
    with tt.no_grad():
        parts = [block(x[:, :4], kv_cache=cache, layer_idx=1).numpy()]
        parts += [block(x[:, t:t + 1], kv_cache=cache, layer_idx=1).numpy() for t in (4, 5)]
    np.testing.assert_allclose(np.concatenate(parts, 1), ref, rtol=1e-10, atol=1e-12,
                               err_msg="TransformerBlock.forward(x, kv_cache=..., layer_idx=1) vs the block on the whole sequence")
    assert (cache.get_seq_length(0), cache.get_seq_length(1)) == (0, 6), "the block wrote into layer 1 only"


def test_cached_gpt_forward_passes_the_new_embeddings_through_the_dropout():
    """Eval mode makes the dropout the identity, so the logits cannot show a skipped one: a spy can."""
    from tinytorch.testing import passthrough_spy

    model = small(seed=5)
    seq = ids(2, 7, seed=5)
    cache = KVCache.for_model(model, 2)
    model.drop = passthrough_spy()
    with tt.no_grad():
        cached_gpt_forward(model, seq[:, :4], cache)
        cached_gpt_forward(model, seq[:, 4:7], cache)
    assert len(model.drop.seen) == 2, f"one call of the embedding dropout per forward, got {len(model.drop.seen)}"
    expected = (model.tok_emb(seq[:, 4:7]) + model.pos_emb(tt.arange(4, 7))).numpy()
    np.testing.assert_allclose(model.drop.seen[1], expected, rtol=1e-6,
                               err_msg="the dropout receives the new tokens' embeddings plus their positions' (4..6)")

"""KVCache: per-layer preallocated buffers, update writes after what is cached and returns the
filled prefix, the room check at block_size."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.nn import KVCache


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def test_kvcache_init_preallocates_one_buffer_per_layer():
    cache = KVCache(3, 2, 4, 10, 5)
    assert len(cache.key_cache) == 3 and len(cache.value_cache) == 3, "one key and one value buffer per layer"
    for t in cache.key_cache + cache.value_cache:
        assert t.shape == (2, 4, 10, 5), f"buffer shape (batch, heads, block_size, head_dim): expected (2, 4, 10, 5), got {t.shape}"
        assert t.dtype == tt.float32, f"default dtype float32, got {t.dtype}"
        np.testing.assert_array_equal(t.numpy(), 0.0, err_msg="a new buffer is all zeros")
    arrays = [t.numpy() for t in cache.key_cache + cache.value_cache]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b), "every layer's keys and values need memory of their own"
    assert cache.seq_len == 0 and cache.nbytes == 2 * 3 * 2 * 4 * 10 * 5 * 4, "empty cache, 2·L·B·H·S·D·4 bytes"
    assert KVCache(1, 1, 1, 2, 2, dtype=tt.float64).key_cache[0].dtype == tt.float64, "dtype is passed on"


def test_kvcache_init_for_model_sizes_from_the_config():
    tt.manual_seed(0)
    model = tt.nn.GPT(tt.nn.GPTConfig(vocab_size=7, block_size=9, d_model=12, n_heads=3, n_layers=2))
    cache = KVCache.for_model(model, 4)
    assert len(cache.key_cache) == 2, "one layer per block"
    assert cache.key_cache[1].shape == (4, 3, 9, 4), f"expected (4, 3, 9, 4), got {cache.key_cache[1].shape}"


def test_kvcache_update_appends_and_returns_the_filled_prefix():
    cache = KVCache(2, 2, 3, 8, 4, dtype=tt.float64)
    k = {i: rand((2, 3, 8, 4), i) for i in range(2)}
    v = {i: rand((2, 3, 8, 4), 10 + i) for i in range(2)}
    for i in range(2):  # a prompt of 3 tokens
        ak, av = cache.update(i, tt.tensor(k[i][:, :, :3]), tt.tensor(v[i][:, :, :3]))
        np.testing.assert_array_equal(ak.numpy(), k[i][:, :, :3], err_msg=f"layer {i}: keys of the prompt")
        np.testing.assert_array_equal(av.numpy(), v[i][:, :, :3], err_msg=f"layer {i}: values of the prompt")
    assert cache.seq_len == 3, f"seq_len after a prompt of 3: got {cache.seq_len}"
    for t in range(3, 6):  # one token per step, then a chunk of 2
        for i in range(2):
            ak, av = cache.update(i, tt.tensor(k[i][:, :, t:t + 1]), tt.tensor(v[i][:, :, t:t + 1]))
            assert ak.shape == (2, 3, t + 1, 4), f"after {t + 1} tokens: expected (2, 3, {t + 1}, 4), got {ak.shape}"
            np.testing.assert_array_equal(ak.numpy(), k[i][:, :, :t + 1],
                                          err_msg=f"layer {i}: its own keys, oldest first, after {t + 1} tokens")
            np.testing.assert_array_equal(av.numpy(), v[i][:, :, :t + 1],
                                          err_msg=f"layer {i}: its own values after {t + 1} tokens")
    ak, av = cache.update(1, tt.tensor(k[1][:, :, 6:8]), tt.tensor(v[1][:, :, 6:8]))
    np.testing.assert_array_equal(ak.numpy(), k[1], err_msg="layer 1 filled to block_size with a chunk of 2")
    assert (cache.get_seq_length(0), cache.get_seq_length(1)) == (6, 8), "each layer counts its own tokens"


def test_kvcache_update_layers_are_independent():
    cache = KVCache(3, 1, 2, 5, 2)
    for i in range(3):
        cache.update(i, tt.full((1, 2, 2, 2), float(i)), tt.full((1, 2, 2, 2), 10.0 + i))
    for i in range(3):
        ak, av = cache.update(i, tt.full((1, 2, 1, 2), float(i)), tt.full((1, 2, 1, 2), 10.0 + i))
        np.testing.assert_array_equal(ak.numpy(), float(i), err_msg=f"layer {i} must read its own keys, not another layer's")
        np.testing.assert_array_equal(av.numpy(), 10.0 + i, err_msg=f"layer {i} must read its own values")


def test_kvcache_update_refuses_to_run_past_block_size():
    cache = KVCache(1, 1, 2, 4, 3)
    cache.update(0, tt.ones(1, 2, 3, 3), tt.ones(1, 2, 3, 3))
    with pytest.raises(ValueError, match="block_size") as refusal:
        cache.update(0, tt.ones(1, 2, 2, 3), tt.ones(1, 2, 2, 3))
    message = str(refusal.value)
    assert all(word in message for word in ("layer 0", "3", "2", "4")), \
        f"the refusal names the layer (0), the tokens cached (3), the new ones (2) and block_size (4): {message!r}"
    assert cache.seq_len == 3, "a refused update must leave the cache as it was"
    ak, _ = cache.update(0, tt.full((1, 2, 1, 3), 2.0), tt.ones(1, 2, 1, 3))  # exactly full is fine
    assert ak.shape == (1, 2, 4, 3) and ak.numpy()[0, 0, 3, 0] == 2.0, "the last slot holds the last token"
    with pytest.raises(ValueError, match="block_size"):
        cache.update(0, tt.ones(1, 2, 1, 3), tt.ones(1, 2, 1, 3))


def test_kvcache_update_crop_and_reset_rewind_the_cache():
    cache = KVCache(2, 1, 1, 6, 2)
    for i in range(2):
        cache.update(i, tt.ones(1, 1, 4, 2), tt.ones(1, 1, 4, 2))
    cache.crop(2)
    ak, _ = cache.update(0, tt.full((1, 1, 1, 2), 5.0), tt.ones(1, 1, 1, 2))
    assert ak.shape == (1, 1, 3, 2) and ak.numpy()[0, 0, 2, 0] == 5.0, "after crop(2) the next token goes to slot 2"
    cache.reset()
    ak, _ = cache.update(1, tt.full((1, 1, 1, 2), 7.0), tt.ones(1, 1, 1, 2))
    assert ak.shape == (1, 1, 1, 2) and ak.numpy()[0, 0, 0, 0] == 7.0, "after reset the next token goes to slot 0"


def test_kvcache_update_writes_in_place_and_returns_views():
    cache = KVCache(2, 1, 2, 6, 3)
    allocated = [t.numpy() for t in cache.key_cache + cache.value_cache]
    for step in range(3):
        for i in range(2):
            ak, av = cache.update(i, tt.full((1, 2, 2, 3), float(step)), tt.full((1, 2, 2, 3), float(step)))
            assert np.shares_memory(ak.numpy(), cache.key_cache[i].numpy()), \
                "update returns a view of the layer's key buffer, not a copy"
            assert np.shares_memory(av.numpy(), cache.value_cache[i].numpy()), \
                "update returns a view of the layer's value buffer, not a copy"
    for before, t in zip(allocated, cache.key_cache + cache.value_cache):
        assert np.shares_memory(before, t.numpy()), \
            "update writes into the buffers __init__ allocated: no new buffer per update"

# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 18 — Memoization: the KV cache
#
# Module 13's `generate` writes one token per step, and at every step it runs the whole
# model on the whole context again. At step $t$ it recomputes the keys and values of the
# $t - 1$ tokens it already processed at step $t - 1$, and they came out **exactly the
# same**: causal attention means an earlier token never looks at a later one, so nothing
# about it can change. Recomputing a value you already had is a job for **memoization**:
# keep the keys and values of every layer in a **KV cache**, and at each step compute only
# the new token's own row. Every production language model decodes this way.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - say **why** a decoder may cache keys and values (causality) and why caching the
#   queries or the attention weights would buy nothing;
# - build a `KVCache` **preallocated per layer** to `(batch, heads, block_size, head_dim)`,
#   whose `update(layer_idx, k, v)` writes the new entries and returns the filled prefix
#   (in the spirit of Hugging Face's cache objects);
# - get the three details right that every KV-cache bug is made of: the **positions** of
#   the new tokens (offset by what is cached), the **causal mask** of queries that start at
#   an offset, and the **room** left before `block_size`;
# - **prefill** the prompt in one pass, then decode one token per step, in
#   `GPT.generate(..., use_cache=True)`, with the same logits (within $10^{-5}$) and the same
#   tokens as without the cache;
# - **measure** decode time per token with and without the cache as the sequence grows, and
#   explain why the work per token drops from $O(T^2)$ to $O(T)$ in attention (and from
#   $O(T)$ to $O(1)$ in the rest of the model), and what the cache costs in memory.
#
# ## Prerequisites
#
# - Module 12: `causal_mask` (and its `diagonal`), `attention_weights`, `split_heads`,
#   `merge_heads`, `MultiheadAttention` (its `_project(x, i)` and `out_proj`).
# - Module 13: `TransformerBlock`, `GPT`, `GPTConfig`, `_sample_next` and `_generate`.
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/nn/kv_cache.py` when you run `tito export 18`
# (or `tito test module 18`); `tinytorch.nn` re-exports `KVCache`. Modules 12 and 13 already
# have the hooks: `MultiheadAttention.forward`, `TransformerBlock.forward` and `GPT.forward`
# take a `kv_cache=` argument and hand it to this file, and `GPT.generate(...,
# use_cache=True)` calls your cached loop. Fill in the cells with `# YOUR CODE HERE`; the
# **check** cell after each prints a ✓ or says what is wrong.

# %%
#| default_exp nn.kv_cache

# %%
import sys

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch
from tinytorch import Tensor
from tinytorch.nn import GPT, GPTConfig, MultiheadAttention
from tinytorch.nn.transformer import _generate
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, passthrough_spy, preserved_state
from tinytorch.utils.timing import copy_bandwidth, matmul_peak, median_time

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: what a decoding step recomputes
#
# Follow one layer's attention through generation. At step $t$ the context holds tokens
# $x_1 \dots x_t$; the layer projects each of them to a query, a key and a value,
#
# $$q_i = W_q h_i, \qquad k_i = W_k h_i, \qquad v_i = W_v h_i, \qquad i = 1 \dots t,$$
#
# where $h_i$ is token $i$'s vector entering the layer. The causal mask lets token $i$ read
# only tokens $j \le i$, so $h_i$ depends only on $x_1 \dots x_i$ — at **every** layer, by
# induction from the embeddings up. So $k_i$ and $v_i$ are the same at step $t$ as they were
# at step $i$: computing them again is pure waste. And of step $t$'s output, generation uses
# only the **last** row, the prediction for token $t + 1$:
#
# $$\text{out}_t = \sum_{j \le t} \operatorname{softmax}_j\!\Big(\frac{q_t \cdot k_j}{\sqrt{d}}\Big)\, v_j .$$
#
# It needs the new query $q_t$ and **all** keys and values $k_{1..t}, v_{1..t}$. So keep
# $k$ and $v$ of every layer (the queries and the weights of old rows are never needed
# again), and at each step compute $q_t, k_t, v_t$ for the one new token, append $k_t, v_t$
# to the cache, and attend from $q_t$ to the whole cache.
#
# The work per new token, for a model of width $d$ and $L$ layers at context length $T$:
#
# | | without the cache | with the cache |
# |---|---|---|
# | projections and MLP (the $\approx 12Ld^2$ parameters, 2 FLOPs each per token) | $\approx 24Ld^2 \cdot T$ | $\approx 24Ld^2$ |
# | attention scores and weighted sum ($QK^\top$ and $AV$, $2 \cdot$ rows $\cdot$ keys $\cdot\, d$ FLOPs each) | $\approx 4LT^2d$ | $\approx 4LTd$ |
#
# The attention part of a step drops from $O(T^2)$ to $O(T)$ and the rest from $O(T)$ to
# $O(1)$; the price is memory: $2 \cdot L \cdot B \cdot T \cdot d$ numbers for the keys and
# values. The picture shows, for one head, the scores a step computes.

# %%
_T = 8
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.9))
_full = np.tril(np.ones((_T, _T)))
_one = np.zeros((_T, _T))
_one[-1] = 1.0
for _ax, _grid, _title in [(axes[0], _full, f"without the cache: step {_T} computes\n"
                                            f"all {_T} rows again ({int(_full.sum())} allowed scores)"),
                           (axes[1], _one, f"with the cache: step {_T} computes\n"
                                           f"{int(_one.sum())} scores (the new query's row)")]:
    _ax.imshow(_grid, cmap="Blues", vmin=0, vmax=1.4)
    _ax.set_xticks(range(_T), [f"k{j + 1}" for j in range(_T)])
    _ax.set_yticks(range(_T), [f"q{i + 1}" for i in range(_T)])
    _ax.set_title(_title, fontsize=10)
axes[0].set_ylabel("queries")
axes[0].set_xlabel("keys (all recomputed)")
axes[1].set_xlabel("keys (from the cache, except the newest)")
fig.tight_layout()
plt.show()

# %% [markdown]
# The package file starts here.

# %%
#| export
"""KV cache (module 18): keys and values of earlier tokens kept per layer, so that a decoding
step computes only the new token's row (memoization of attention's inputs)."""
import numpy as np

from tinytorch._tensor import ShapeError, Tensor, arange, float32, zeros
from tinytorch.nn.attention import attention_weights, causal_mask, merge_heads, split_heads
from tinytorch.nn.transformer import _sample_next

__all__ = ["KVCache", "cached_causal_mask", "cached_attention", "mha_forward_with_cache",
           "cached_block", "cached_gpt_forward"]

# %% [markdown]
# ## 2. The cache: one preallocated buffer per layer
#
# A cache could grow by concatenation (`np.concatenate([old, new])` at every step), but
# each concatenation copies everything cached so far: $O(T)$ copying per token, $O(T^2)$ for
# the whole generation, and a new allocation each time. Instead, allocate once, for the
# longest context the model can read (`block_size`), and write each step's entries in
# place. The layout is the one attention works in after `split_heads`:
# `(batch, heads, block_size, head_dim)`, one key buffer and one value buffer **per layer**
# (each layer has its own projections, so its own keys), with a count per layer of the
# tokens written so far.
#
# Hugging Face's `StaticCache` preallocates the same way (its `DynamicCache` grows by
# concatenation instead), and the method names are theirs: `update(...)` returns the
# layer's keys and values, `get_seq_length(layer_idx)` the number of tokens cached. Ours
# takes `layer_idx` first, `update(layer_idx, k, v)`, and returns the **filled prefix**,
# whose length grows by one token per step; `StaticCache.update` returns the whole
# `block_size` buffer and the attention mask hides the empty slots, so that every step has
# the same shapes (section 8 says why that matters on a GPU).
#
# The bookkeeping is provided, in a base class: the count per layer in `self._seen`,
# `seq_len`, `get_seq_length`, `crop` (forget the tokens after the first $n$: the buffers
# keep their memory), `reset`, `nbytes`, `for_model` (a cache sized for a GPT's config) and
# the argument checks of `update`.

# %%
#| export
class _CacheBookkeeping:
    """What KVCache needs besides its buffers and update: counts, views of them, checks."""

    @classmethod
    def for_model(cls, model, batch_size):
        """An empty cache sized for a GPT (module 13): its layers, heads, block_size and dtype."""
        c = model.config
        return cls(c.n_layers, batch_size, c.n_heads, c.block_size, c.d_model // c.n_heads,
                   dtype=model.pos_emb.weight.dtype)

    def get_seq_length(self, layer_idx=0):
        """Tokens cached for layer `layer_idx` (Hugging Face's name)."""
        return self._seen[layer_idx]

    @property
    def seq_len(self):
        """Tokens cached (layer 0's count: the position of the next token)."""
        return self._seen[0]

    def crop(self, max_length):
        """Forget every token after the first `max_length` (the buffers keep their memory)."""
        self._seen = [min(n, int(max_length)) for n in self._seen]

    def reset(self):
        """Forget everything: an empty cache, ready for a new prompt."""
        self.crop(0)

    @property
    def nbytes(self):
        """Bytes held by the key and value buffers."""
        return sum(t.numpy().nbytes for t in self.key_cache + self.value_cache)

    def _check_update(self, layer_idx, k, v):
        if not isinstance(layer_idx, (int, np.integer)) or not 0 <= layer_idx < self.n_layers:
            raise IndexError(f"KVCache.update: layer_idx must be in 0..{self.n_layers - 1}, got {layer_idx!r}")
        want = (self.batch_size, self.n_heads, self.head_dim)
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, Tensor) or t.ndim != 4 or (t.shape[0], t.shape[1], t.shape[3]) != want:
                raise ShapeError(f"KVCache.update: {name} must be a Tensor (batch_size={want[0]}, n_heads="
                                 f"{want[1]}, T, head_dim={want[2]}), got "
                                 f"{t.shape if isinstance(t, Tensor) else type(t).__name__}")
        if k.shape != v.shape or k.shape[2] < 1:
            raise ShapeError(f"KVCache.update: k {k.shape} and v {v.shape} need the same shape, T >= 1")

    def __repr__(self):
        return (f"KVCache(n_layers={self.n_layers}, batch_size={self.batch_size}, n_heads={self.n_heads}, "
                f"block_size={self.block_size}, head_dim={self.head_dim}, seq_len={self.seq_len})")


# %% [markdown]
# Write `KVCache.__init__`'s buffers and `KVCache.update`.
#
# <details><summary>Hint 1</summary>
#
# `__init__`: how many buffers, and of which shape? Python's `[x] * n` makes a list of $n$
# references to **one** object: would each layer then have its own memory?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `update`: where do the new entries go along the time axis of this layer's buffers — which
# slots are already taken? Check the room before writing anything, so a refused update
# leaves the cache as it was.
# </details>
#
# <details><summary>Hint 3</summary>
#
# A buffer's `.numpy()` is a view of its memory: writing into a slice of it writes into the
# buffer. Slicing a Tensor along the time axis gives a view too, so returning the filled
# prefix copies nothing.
# </details>
#
# <details><summary>The approach</summary>
#
# Two properties make the cache correct: each layer owns its memory, and memory is
# allocated once. A list built by repetition shares one buffer among all layers, and a
# buffer created in `update` would defeat the preallocation. In `update`, this layer's own
# count, not `seq_len`, says where the free slots begin: in a forward pass the layers fill
# one after another. Check the room before any write, so a refusal changes nothing, and
# return views of the filled prefix rather than copies.
# </details>

# %% nbgrader={"grade": false, "grade_id": "kv-cache", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class KVCache(_CacheBookkeeping):
    """Keys and values of every layer, preallocated to (batch_size, n_heads, block_size,
    head_dim) per layer, allocated once (as Hugging Face's StaticCache). For inference: under no_grad."""

    def __init__(self, n_layers, batch_size, n_heads, block_size, head_dim, dtype=float32):
        """Contract: positive ints (else ValueError naming the argument, checked for you), a
        floating dtype. Sets `key_cache` and `value_cache`: lists of n_layers zero Tensors,
        each layer its own buffer of shape (batch_size, n_heads, block_size, head_dim) in
        `dtype`. Nothing is cached yet (every layer's count is 0)."""
        for name, value in [("n_layers", n_layers), ("batch_size", batch_size), ("n_heads", n_heads),
                            ("block_size", block_size), ("head_dim", head_dim)]:
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"KVCache: {name} must be a positive integer, got {value!r}")
        self.n_layers, self.batch_size, self.n_heads = int(n_layers), int(batch_size), int(n_heads)
        self.block_size, self.head_dim, self.dtype = int(block_size), int(head_dim), dtype
        self._seen = [0] * self.n_layers  # tokens cached so far, per layer
        # Idea: one buffer per layer, sized for the longest context, allocated once.
        ### BEGIN SOLUTION
        shape = (self.batch_size, self.n_heads, self.block_size, self.head_dim)
        self.key_cache = [zeros(*shape, dtype=dtype) for _ in range(self.n_layers)]
        self.value_cache = [zeros(*shape, dtype=dtype) for _ in range(self.n_layers)]
        ### END SOLUTION

    def update(self, layer_idx, k, v):
        """Append the new keys and values of layer `layer_idx`; return all of that layer's.

        Contract: k, v Tensors (batch_size, n_heads, T, head_dim), T >= 1 new tokens (layer_idx
        and shapes checked for you). Writes them in the T slots after the tokens already cached
        for this layer, adds T to this layer's count, and returns (all_k, all_v): this layer's
        filled prefix, each (batch_size, n_heads, seen + T, head_dim), oldest token first.
        Errors: ValueError when seen + T would pass block_size, whose message names the layer,
        the tokens cached, the new ones and block_size; the cache is then left unchanged.
        """
        self._check_update(layer_idx, k, v)
        # Idea: the new entries go right after the ones already cached for THIS layer.
        ### BEGIN SOLUTION
        start = self._seen[layer_idx]
        end = start + k.shape[2]
        if end > self.block_size:
            raise ValueError(f"KVCache.update: layer {layer_idx} holds {start} tokens; {k.shape[2]} more "
                             f"would make {end}, past block_size={self.block_size}")
        self.key_cache[layer_idx].numpy()[:, :, start:end] = k.numpy()
        self.value_cache[layer_idx].numpy()[:, :, start:end] = v.numpy()
        self._seen[layer_idx] = end
        return self.key_cache[layer_idx][:, :, :end], self.value_cache[layer_idx][:, :, :end]
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-kv-cache-init", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_c = KVCache(3, 2, 4, 10, 5)
assert_equal(len(_c.key_cache), 3, "one key buffer per layer (n_layers = 3)")
assert_equal(len(_c.value_cache), 3, "one value buffer per layer (n_layers = 3)")
for _i in range(3):
    assert_equal(_c.key_cache[_i].shape, (2, 4, 10, 5), f"key_cache[{_i}].shape (batch, heads, block_size, head_dim)")
    assert_equal(_c.value_cache[_i].shape, (2, 4, 10, 5), f"value_cache[{_i}].shape")
    assert_equal(_c.key_cache[_i].dtype, tinytorch.float32, f"key_cache[{_i}].dtype (the default)")
    assert_equal(_c.key_cache[_i].numpy(), np.zeros((2, 4, 10, 5)), f"key_cache[{_i}] starts at zeros")
_buffers = [t.numpy() for t in _c.key_cache + _c.value_cache]
_names = [f"key_cache[{_i}]" for _i in range(3)] + [f"value_cache[{_i}]" for _i in range(3)]
_shared = [f"{_names[_n]} and {_names[_m]}" for _n in range(6) for _m in range(_n + 1, 6)
           if np.shares_memory(_buffers[_n], _buffers[_m])]
check(not _shared, "every layer's keys and values have memory of their own (no buffer shared)",
      got="shared: " + ", ".join(_shared))
assert_equal(_c.seq_len, 0, "a new cache holds no token")
assert_equal(KVCache(2, 1, 2, 4, 3, dtype=tinytorch.float64).value_cache[1].dtype, tinytorch.float64,
             "dtype is passed on")
print(f"✓ KVCache buffers: {len(_c.key_cache)} layers x (keys, values) of {_c.key_cache[0].shape}, "
      f"{_c.nbytes} bytes")

# %% nbgrader={"grade": true, "grade_id": "test-kv-cache-update", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_c = KVCache(2, 2, 3, 6, 4, dtype=tinytorch.float64)
_memory = [t.numpy() for t in _c.key_cache + _c.value_cache]        # the buffers __init__ allocated
_k = {i: _rng.standard_normal((2, 3, 6, 4)) for i in range(2)}      # the keys layer i will see
_v = {i: _rng.standard_normal((2, 3, 6, 4)) for i in range(2)}
for _i in range(2):                                                  # a prompt of 3 tokens, both layers
    _ak, _av = _c.update(_i, Tensor(_k[_i][:, :, :3]), Tensor(_v[_i][:, :, :3]))
    assert_equal(_ak.numpy(), _k[_i][:, :, :3], f"layer {_i}, after 3 tokens: all keys")
    assert_equal(_av.numpy(), _v[_i][:, :, :3], f"layer {_i}, after 3 tokens: all values")
assert_equal((_c.seq_len, _c.get_seq_length(1)), (3, 3), "(seq_len, layer 1's count) after the prompt")
for _t in (3, 4):                                                    # two decoding steps of 1 token
    for _i in range(2):
        _ak, _av = _c.update(_i, Tensor(_k[_i][:, :, _t:_t + 1]), Tensor(_v[_i][:, :, _t:_t + 1]))
        assert_equal(_ak.numpy(), _k[_i][:, :, :_t + 1], f"layer {_i}, after {_t + 1} tokens: its own keys, oldest first")
        assert_equal(_av.numpy(), _v[_i][:, :, :_t + 1], f"layer {_i}, after {_t + 1} tokens: its own values")
assert_equal(_c.seq_len, 5, "seq_len after a prompt of 3 and 2 steps")
_refusal = assert_raises(ValueError, _c.update, 0, Tensor(_k[0][:, :, :2]), Tensor(_v[0][:, :, :2]),
                         match="block_size")
check(all(_word in str(_refusal) for _word in ("layer 0", "5", "2", "6")),
      "the refusal names the layer (0), the tokens cached (5), the new ones (2) and block_size (6)",
      got=str(_refusal))
assert_equal(_c.get_seq_length(0), 5, "a refused update leaves the count as it was")
try:
    _ak, _ = _c.update(0, Tensor(_k[0][:, :, 5:6]), Tensor(_v[0][:, :, 5:6]))
except ValueError as _err:
    raise AssertionError(f"layer 0 holds 5 tokens and block_size is 6: one more fits, but update refused it "
                         f"({_err})") from _err
assert_equal(_ak.numpy(), _k[0], "the last free slot can be filled (5 + 1 = block_size = 6 tokens)")
assert_raises(ValueError, _c.update, 0, Tensor(_k[0][:, :, :1]), Tensor(_v[0][:, :, :1]), match="block_size")
check(np.shares_memory(_ak.numpy(), _c.key_cache[0].numpy()), "all_k is a view of the buffer (no copy)")
check(all(np.shares_memory(_a, _t.numpy()) for _a, _t in zip(_memory, _c.key_cache + _c.value_cache)),
      "after 8 updates the cache still writes into the buffers __init__ allocated (no new buffer per update)")
print("✓ KVCache.update; layer 0 holds", _c.get_seq_length(0), "tokens, layer 1", _c.get_seq_length(1))

# %% [markdown]
# ### Systems look: what the cache costs in memory
#
# The cache holds, for every layer, a key and a value per token, per head, per sequence of
# the batch: $2 \cdot L \cdot B \cdot H \cdot T_{max} \cdot d_{head}$ numbers, and
# $H \cdot d_{head} = d$. Preallocation reserves it all up front, for `block_size` tokens,
# even when a generation stops early.
#
# **Predict first.** How many bytes does the float32 cache of GPT-2 small take for one
# sequence of its full context: 12 layers, 12 heads of 64 dimensions, `block_size` 1024?
# And for a batch of 8?

# %%
predicted_gpt2_cache_bytes = None  # your number: bytes for batch 1

# %%
_gpt2 = KVCache(n_layers=12, batch_size=1, n_heads=12, block_size=1024, head_dim=64)
_gpt2_params = 124_439_808                   # GPT-2 small's parameter count (tied head), for scale
print(f"GPT-2 small's cache, batch 1: {_gpt2.nbytes:,d} bytes = {_gpt2.nbytes / 2**20:.1f} MiB "
      f"({_gpt2.nbytes / (4 * _gpt2_params):.0%} of its float32 weights)")
print("your prediction:", "none written" if predicted_gpt2_cache_bytes is None
      else f"{predicted_gpt2_cache_bytes:,} bytes (measured / predicted = "
           f"{_gpt2.nbytes / predicted_gpt2_cache_bytes:.2f})")
print(f"batch 8: {8 * _gpt2.nbytes / 2**20:.0f} MiB; per token of context: "
      f"{_gpt2.nbytes // 1024:,d} bytes = 2 x 12 layers x 768 numbers x 4 bytes")
del _gpt2

# %% [markdown]
# The figure is exact (it is the buffers' `nbytes`): it grows linearly with the batch and
# the context, and for long contexts and large batches the cache, not the weights, fills
# the accelerator's memory. That is why serving systems shrink it: fewer key/value heads
# than query heads (multi-query and grouped-query attention), 8-bit caches, and memory
# allocated in pages instead of for the longest context (section 8).
#
# Preallocation also saves time. Appending by concatenation copies the whole cache at every
# step, so $n$ appends copy $\approx n^2/2$ tokens' worth of keys; writing in place copies
# each token once. **Predict first**: for one layer of GPT-2 small's keys (12 heads of 64)
# and 1024 tokens, how many times slower is growing by `np.concatenate` than writing into a
# preallocated buffer?

# %%
predicted_concat_slowdown = None  # your number: time(concatenate) / time(in place), 1024 appends

# %%
_new = np.ones((1, 12, 1, 64), dtype=np.float32)


def _grow_by_concatenation(n=1024):
    k = np.zeros((1, 12, 0, 64), dtype=np.float32)
    for _ in range(n):
        k = np.concatenate([k, _new], axis=2)      # a new array, everything copied again


def _write_in_place(n=1024):
    k = np.zeros((1, 12, n, 64), dtype=np.float32)
    for t in range(n):
        k[:, :, t:t + 1] = _new                    # one token's slot written


_t_cat, _t_pre = median_time(_grow_by_concatenation, repeats=3), median_time(_write_in_place, repeats=3)
print(f"1024 appends: concatenation {_t_cat * 1e3:.1f} ms, in place {_t_pre * 1e3:.1f} ms "
      f"(measured slowdown {_t_cat / _t_pre:.1f}x; "
      + ("no prediction written)" if predicted_concat_slowdown is None else f"you predicted {predicted_concat_slowdown}x)"))

# %% [markdown]
# The gap grows with the length (quadratic against linear copying); at 1024 tokens the
# concatenated cache is still only 3 MiB, so it mostly lives in the CPU's caches, and the
# figure depends on their size and on the machine's memory bandwidth and load.
#
# ## 3. Where the new tokens are: positions and the offset causal mask
#
# With a cache, the model is called on the **new** tokens only: at the prefill, all $T_p$
# prompt tokens; then one token per step. Two things in the forward pass used to be
# computed from the input's length and are now wrong unless they are **offset by what is
# cached**:
#
# - **positions.** Module 13's forward looks up `pos_emb(arange(T))`. A new token at the
#   first decoding step is not at position 0: it sits after the $p$ cached tokens, at
#   position $p$. The new tokens' positions are $p, p+1, \dots, p+T-1$ (what Hugging Face
#   calls `cache_position`).
# - **the causal mask.** There are $T$ new queries and $p + T$ keys (the cached ones, then
#   the new ones). New query $i$ is the token at position $p + i$; it may attend to keys
#   $j \le p + i$: every cached token, and the new ones up to **itself**. The triangle is
#   aligned with the **bottom-right** corner of the $T \times (p+T)$ grid.
#
# Write `cached_causal_mask(T, past)`: the boolean mask in `scaled_dot_product_attention`'s
# convention (True = may attend), shape `(T, past + T)`.
#
# <details><summary>Hint 1</summary>
#
# Draw the grid for $T = 2$ new queries and $p = 3$ cached tokens: 2 rows, 5 columns. Which
# cells of row 0 are allowed? Row 0 is the token at position 3.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Module 12's `causal_mask(L, S, diagonal)` allows $j \le i + \text{diagonal}$. Which
# diagonal puts the last query on the last key?
# </details>
#
# <details><summary>The approach</summary>
#
# Write the rule in absolute positions first: new query $i$ is the token at position
# $p + i$, key $j$ the token at position $j$, and causality allows $j \le p + i$. Compare
# it with the rule module 12's helper implements and find what differs. Then test your
# answer on the two cases generation uses: with nothing cached it must be the square
# causal mask, and a single new token must see every key, itself included.
# </details>

# %% nbgrader={"grade": false, "grade_id": "cached-causal-mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def cached_causal_mask(T, past):
    """Contract: T >= 1 new queries, past >= 0 cached tokens. Returns a bool Tensor of shape
    (T, past + T), True where new query i (the token at position past + i) may attend to
    key j (keys: the past cached tokens, then the T new ones): each new token sees every
    cached token and the new tokens up to itself, never a later new token."""
    # Idea: query i sits at position past + i and sees every key up to and including itself.
    ### BEGIN SOLUTION
    return causal_mask(T, past + T, diagonal=past)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-cached-causal-mask", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_m = cached_causal_mask(2, 3)
assert_equal(_m.shape, (2, 5), "cached_causal_mask(2, 3).shape: 2 new queries, 3 + 2 keys")
assert_equal(_m.dtype, tinytorch.bool_, "a boolean mask")
assert_equal(_m.numpy()[0], np.array([True, True, True, True, False]),
             "row 0 (position 3): the 3 cached tokens and itself, not the next new token")
assert_equal(cached_causal_mask(1, 4).numpy(), np.ones((1, 5), dtype=bool),
             "a decoding step (T = 1, 4 cached): the new token sees all 4 and itself")
assert_equal(cached_causal_mask(4, 0).numpy(), np.tril(np.ones((4, 4), dtype=bool)),
             "the prefill (nothing cached): the square causal mask")
assert_equal(cached_causal_mask(3, 2).numpy().astype(int), np.array([[1, 1, 1, 0, 0],
                                                                     [1, 1, 1, 1, 0],
                                                                     [1, 1, 1, 1, 1]]),
             "3 new queries after 2 cached tokens (1 = may attend)")
print("✓ cached_causal_mask(2, 3) =\n", _m.numpy().astype(int))

# %% [markdown]
# PyTorch's `scaled_dot_product_attention(..., is_causal=True)` aligns its triangle with the
# **top-left** corner when $L \ne S$ (query 0 sees key 0 only): right for nothing cached,
# wrong for a decoder with a cache. For that case PyTorch has
# `torch.nn.attention.bias.causal_lower_right`, our mask.
#
# ## 4. Attention with a cache
#
# Now one layer's causal self-attention for the new tokens, with module 12's
# `MultiheadAttention` weights (the provided `attn._project(x, i)` applies projection $i$:
# 0 query, 1 key, 2 value). Module 12's `_attend` did this for a whole sequence; decide
# what changes when `x` holds only the new tokens and the layer's cache holds the rest:
# which projections are needed for which tokens, what goes into the cache, and which mask
# the new queries attend with.
# `MultiheadAttention.forward(x, x, x, kv_cache=cache, layer_idx=i)` (module 12's hook)
# lands in the provided `mha_forward_with_cache`, which checks its arguments and calls yours.
#
# <details><summary>Hint 1</summary>
#
# Which of $q$, $k$, $v$ must cover all the tokens, and which only the new ones? Where do
# the keys of the tokens that are not in `x` come from?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The mask needs the number of tokens cached **before** this call: read it from the cache
# of this layer before `update` adds the new ones.
# </details>
#
# <details><summary>The approach</summary>
#
# Sort the tensors by who needs them. Only the new tokens ask, so only they need queries.
# Keys and values are needed for every token, and the old ones can only come from the
# cache, which must also receive the new ones. The trap is timing: the mask's offset is
# the number of tokens cached before this call, and the count changes as soon as you add
# to the cache. From the weights on, it is module 12's attention, heads and all.
# </details>

# %% nbgrader={"grade": false, "grade_id": "cached-attention", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def cached_attention(attn, x, kv_cache, layer_idx):
    """Causal self-attention of new tokens, reading the earlier ones from a KV cache.

    Contract: `attn` a MultiheadAttention (module 12); `x` (B, T, E) the T new tokens' input
    to the layer; `kv_cache` a KVCache whose layer `layer_idx` holds the earlier tokens.
    Adds the new tokens' keys and values to that layer of the cache and returns (B, T, E):
    the same as the last T rows of `attn` on the whole sequence with a causal mask.
    """
    H = attn.num_heads
    # Idea: queries for the new tokens only; keys and values for all tokens, via the cache.
    ### BEGIN SOLUTION
    q = split_heads(attn._project(x, 0), H)
    k = split_heads(attn._project(x, 1), H)
    v = split_heads(attn._project(x, 2), H)
    past = kv_cache.get_seq_length(layer_idx)
    k_all, v_all = kv_cache.update(layer_idx, k, v)
    weights = attention_weights(q, k_all, cached_causal_mask(x.shape[1], past))
    return attn.out_proj(merge_heads(weights @ v_all))
    ### END SOLUTION


def mha_forward_with_cache(attn, query, key, value, kv_cache, layer_idx, key_padding_mask=None,
                           attn_mask=None, is_causal=False):
    """MultiheadAttention.forward(..., kv_cache=..., layer_idx=...): returns (output, None)."""
    if not (query is key and key is value):
        raise ValueError("MultiheadAttention with a kv_cache: only self-attention is cached; pass the "
                         "same tensor as query, key and value")
    if key_padding_mask is not None or attn_mask is not None:
        raise ValueError("MultiheadAttention with a kv_cache builds its own causal mask; pass no "
                         "attn_mask or key_padding_mask")
    if not attn.batch_first or query.ndim != 3:
        raise ShapeError(f"MultiheadAttention with a kv_cache needs batch_first inputs (B, T, E), "
                         f"got {query.shape} with batch_first={attn.batch_first}")
    return cached_attention(attn, query, kv_cache, layer_idx), None


# %% nbgrader={"grade": true, "grade_id": "test-cached-attention", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _mha = MultiheadAttention(12, 3, dtype=tinytorch.float64)
    with tinytorch.no_grad():
        _mha.in_proj_bias.copy_(Tensor(np.random.default_rng(1).standard_normal(36)))
_x = Tensor(np.random.default_rng(2).standard_normal((2, 7, 12)))
_full = _mha(_x, _x, _x, is_causal=True, need_weights=False)[0].numpy()   # the whole sequence at once
_c = KVCache(n_layers=2, batch_size=2, n_heads=3, block_size=8, head_dim=4, dtype=tinytorch.float64)
_c.update(0, Tensor(np.zeros((2, 3, 2, 4))), Tensor(np.zeros((2, 3, 2, 4))))  # layer 0: 2 tokens of another run
try:
    with tinytorch.no_grad():
        _parts = [cached_attention(_mha, _x[:, :4], _c, 1)]             # prefill 4 tokens into layer 1
        for _a, _b in ((4, 6), (6, 7)):                                  # then a chunk of 2, then 1 token
            _parts.append(cached_attention(_mha, _x[:, _a:_b], _c, 1))
except (ShapeError, ValueError) as _err:
    raise AssertionError(f"cached_attention on layer 1, while layer 0 holds 2 tokens, failed: {_err}. "
                         f"Which count says where layer 1's new tokens sit?") from _err
_got = np.concatenate([p.numpy() for p in _parts], axis=1)
assert_close(_got[:, :4], _full[:, :4], rtol=1e-10, atol=1e-12, what="prefill of 4 tokens vs the full causal attention")
assert_close(_got, _full, rtol=1e-10, atol=1e-12, what="prefill 4, then 2 tokens, then 1 vs the full causal attention")
assert_equal((_c.get_seq_length(0), _c.get_seq_length(1)), (2, 7), "only layer 1's count moved")
_k_all, _v_all = (split_heads(_mha._project(_x, _i), 3).numpy() for _i in (1, 2))
assert_close(_c.key_cache[1].numpy()[:, :, :7], _k_all, rtol=1e-10, atol=1e-12,
             what="layer 1's key_cache: the 7 tokens' keys (split into heads); are keys and values swapped?")
assert_close(_c.value_cache[1].numpy()[:, :, :7], _v_all, rtol=1e-10, atol=1e-12,
             what="layer 1's value_cache: the 7 tokens' values (split into heads)")
print("✓ cached_attention: prefill, a chunk of 2 and a step equal full causal attention; out[0, -1, :3] =", _got[0, -1, :3].round(4))

# %% [markdown]
# ## 5. The GPT forward pass with a cache
#
# A block with a cache is module 13's block with cached attention inside (provided:
# `cached_block`, which `TransformerBlock.forward(x, kv_cache=..., layer_idx=...)` calls).
# In this notebook call `cached_block` itself: `block(x, kv_cache=...)` reaches the
# *package's* copy, which runs your `cached_attention` only once `tito export 18` has
# written it there.
# Write `cached_gpt_forward(model, idx, kv_cache)`, which `GPT.forward(idx,
# kv_cache=cache)` calls: module 13's forward pass for tokens that come **after** the
# `kv_cache.seq_len` tokens already cached. The provided code reads that count and refuses
# new tokens that would not fit in `block_size`.
#
# <details><summary>Hint 1</summary>
#
# Which positions do the new tokens have? Module 01's `arange` takes a start.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Every block has its own keys and values. How does a block know which layer of the cache
# is its own?
# </details>
#
# <details><summary>The approach</summary>
#
# Compare with module 13's forward and ask what the cache changes. The positions: the new
# tokens start where the cache ends, not at 0, and the provided code has already read that
# count. And the layers: each block must read and extend its own layer of the cache, so it
# must be told which one that is. The rest is unchanged, the embedding dropout and the
# final LayerNorm included; with a cache there are no targets and no loss.
# </details>

# %% nbgrader={"grade": false, "grade_id": "cached-gpt-forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def cached_block(block, x, kv_cache, layer_idx):
    """TransformerBlock.forward(x, kv_cache=..., layer_idx=...): module 13's pre-norm block,
    its attention reading and extending layer `layer_idx` of the cache."""
    h = block.ln1(x)
    x = x + block.dropout(cached_attention(block.attn, h, kv_cache, layer_idx))
    return x + block.ff(block.ln2(x))


def cached_gpt_forward(model, idx, kv_cache):
    """Logits of new tokens, given the earlier ones in a KV cache.

    Contract: `model` a GPT (module 13); `idx` int64 Tensor (B, T), the T tokens that follow
    the kv_cache.seq_len tokens already cached, B the cache's batch_size. Returns the logits
    (B, T, V): rows seq_len .. seq_len + T - 1 of model(whole sequence). Every layer's cache
    grows by T. Errors (checked for you): ValueError naming block_size when seq_len + T >
    block_size; ShapeError for a batch size that is not the cache's.
    """
    if not isinstance(idx, Tensor) or idx.ndim != 2 or idx.dtype.kind not in "iu":
        raise ValueError("cached_gpt_forward: idx must be an int64 Tensor of shape (B, T)")
    B, T = idx.shape
    if B != kv_cache.batch_size:
        raise ShapeError(f"cached_gpt_forward: idx has batch size {B}, the cache {kv_cache.batch_size}")
    past = kv_cache.seq_len
    if past + T > model.config.block_size:
        raise ValueError(f"cached_gpt_forward: {past} cached + {T} new tokens would pass "
                         f"block_size={model.config.block_size}")
    # Idea: the new tokens sit after the cached ones, and each block has its own cache.
    ### BEGIN SOLUTION
    x = model.drop(model.tok_emb(idx) + model.pos_emb(arange(past, past + T)))
    for i, block in enumerate(model.blocks):
        x = cached_block(block, x, kv_cache, i)
    return model.head(model.ln_f(x))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-cached-gpt-forward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _gpt = GPT(GPTConfig(vocab_size=13, block_size=12, d_model=16, n_heads=2, n_layers=3)).double().eval()
_ids = Tensor(np.random.default_rng(3).integers(0, 13, (2, 11)))
_ref = _gpt(_ids)[0].numpy()                                          # the whole sequence, no cache
_c = KVCache.for_model(_gpt, batch_size=2)
try:
    with tinytorch.no_grad():
        _chunks = [(0, 5), (5, 6), (6, 7), (7, 10), (10, 11)]            # a prompt of 5, steps of 1, a chunk of 3
        _got = [cached_gpt_forward(_gpt, _ids[:, a:b], _c) for a, b in _chunks]
except NotImplementedError as _err:
    raise AssertionError(f"cached_gpt_forward reached an unexported stub ({_err}). `block(x, kv_cache=...)` "
                         f"runs the package's cached_block, which sees your notebook's code only after "
                         f"`tito export 18`: call cached_block(block, x, kv_cache, i) here, or export first.") from _err
except (ShapeError, ValueError) as _err:
    raise AssertionError(f"cached_gpt_forward on a 3-layer GPT (block_size 12), 11 tokens in 5 chunks, failed: "
                         f"{_err}. Each of the 3 blocks has a layer of the cache of its own: does block i read "
                         f"and extend layer i?") from _err
check(all(isinstance(_g, Tensor) for _g in _got), "cached_gpt_forward returns the logits Tensor (B, T, V) alone: "
      "with a cache there are no targets and no loss", got=type(_got[0]).__name__)
_got = [_g.numpy() for _g in _got]
for (_a, _b), _lg in zip(_chunks, _got):
    assert_close(_lg, _ref[:, _a:_b], rtol=1e-9, atol=1e-10,
                 what=f"logits of tokens {_a}..{_b - 1} with {_a} cached vs the full forward pass")
assert_equal([_c.get_seq_length(i) for i in range(3)], [11, 11, 11], "every layer holds the 11 tokens")
_drop = _gpt.drop
_gpt.drop = passthrough_spy()                                        # the embedding dropout: on the new tokens
try:
    with tinytorch.no_grad():
        _c.crop(4)
        cached_gpt_forward(_gpt, _ids[:, 4:7], _c)
    _dropped = list(_gpt.drop.seen)
finally:
    _gpt.drop = _drop
check(len(_dropped) == 1, "cached_gpt_forward calls the model's embedding dropout `drop` once, as GPT.forward does "
      "(in eval mode it is the identity, so the logits alone cannot show it)", got=f"{len(_dropped)} calls")
assert_close(_dropped[0], (_gpt.tok_emb(_ids[:, 4:7]) + _gpt.pos_emb(Tensor(np.arange(4, 7)))).numpy(), rtol=1e-12,
             what="what `drop` receives: the new tokens' embeddings plus the embeddings of their positions 4..6")
print("✓ cached_gpt_forward: 5 chunks equal the full forward; logits[0, -1, :3] =", _got[-1][0, -1, :3].round(4))

# %% [markdown]
# ## 6. Generation: prefill, then one token per step
#
# `GPT.generate(idx, n, ..., use_cache=True)` runs, like module 13's version, in eval mode
# under `no_grad`, and calls `_generate_cached(model, ids, max_new_tokens, temperature,
# top_k, rng)` instead of `_generate`: same arguments, same result, same random draws
# (module 13's `_sample_next`, once per step), so a seed gives the same text with or without
# the cache. Write it. Two constraints shape it. Learned positions stop at `block_size`,
# and a cache cannot slide its window the way module 13's loop crops the context (every
# cached key was computed at its own position): so a generation that would make the model
# read past `block_size` must be refused before any work, and what counts is which tokens
# the model actually reads (the provided `_room_message` takes your count). And the point
# of the cache is that nothing is computed twice: the prompt should go through the model
# in as few passes as the cache allows (`KVCache.for_model` sizes one for the model and
# the batch), and each later pass should carry only what the cache does not already hold.
#
# <details><summary>Hint 1</summary>
#
# Write out a small case: a prompt of 2 tokens and 3 new ones. List the calls of the model
# and the positions each call reads. Which of the 5 tokens is never given to the model?
# </details>
#
# <details><summary>Hint 2</summary>
#
# After the prefill, the logits of which position predict the first new token? After a
# decoding step, how many positions do the logits have?
# </details>
#
# <details><summary>The approach</summary>
#
# Count what the model reads: the last new token is sampled but never fed back, so it
# takes no position. Refuse before any work when the count passes `block_size`, since the
# cache cannot crop. After the prefill the cache holds the past, so each call needs only
# the newest token. To draw the same tokens as module 13, use the same sampler and rng,
# once per new token. A forward pass after the final sample would be wasted, and could
# pass `block_size` for nothing.
# </details>

# %% nbgrader={"grade": false, "grade_id": "generate-cached", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _room_message(T, max_new_tokens, positions_read, block_size):
    return (f"generate(use_cache=True): a prompt of {T} tokens and max_new_tokens={max_new_tokens} make "
            f"the model read {positions_read} positions, but block_size={block_size}: the cache cannot "
            f"slide its learned positions. Generate fewer tokens, or use use_cache=False (which crops "
            f"the context to the last block_size tokens).")


def _generate_cached(model, ids, max_new_tokens, temperature, top_k, rng):
    """Contract: as module 13's _generate: ids numpy int64 (B, T); returns int64 (B, T +
    max_new_tokens), the same ids as _generate (same draws from rng) when they fit. The
    prompt goes through the model in one pass (prefill), then each new token alone, with a
    KV cache. Errors: ValueError with _room_message, raised before any forward pass, when the
    positions the model reads would pass model.config.block_size.
    """
    if max_new_tokens == 0:
        return ids
    B, T = ids.shape
    block_size = model.config.block_size
    # Idea: fill the cache with the prompt once; then each step feeds only the newest token.
    ### BEGIN SOLUTION
    read = T + max_new_tokens - 1
    if read > block_size:
        raise ValueError(_room_message(T, max_new_tokens, read, block_size))
    cache = KVCache.for_model(model, B)
    logits = cached_gpt_forward(model, Tensor(ids), cache)
    for step in range(max_new_tokens):
        next_ids = _sample_next(logits.numpy()[:, -1, :], temperature, top_k, rng)
        ids = np.concatenate([ids, next_ids[:, None]], axis=1)
        if step + 1 < max_new_tokens:
            logits = cached_gpt_forward(model, Tensor(next_ids[:, None]), cache)
    return ids
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-generate-cached", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
class _Recorder(tinytorch.nn.Module):
    """Wraps the token embedding to record the shape of every input the model is run on."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.shapes = inner, []

    def forward(self, idx):
        self.shapes.append(tuple(idx.shape))
        return self.inner(idx)


with preserved_state():
    tinytorch.manual_seed(1)
    _gpt = GPT(GPTConfig(vocab_size=13, block_size=10, d_model=16, n_heads=2, n_layers=2)).eval()
_prompt = np.random.default_rng(4).integers(0, 13, (2, 4))
_plain = _gpt.generate(Tensor(_prompt), 7, temperature=0.0, use_cache=False).numpy()
_emb = _gpt.tok_emb
_gpt.tok_emb = _Recorder(_emb)
try:
    with tinytorch.no_grad():
        _cached = _generate_cached(_gpt, _prompt, 7, 0.0, None, np.random.default_rng(0))
    _shapes = _gpt.tok_emb.shapes
except ValueError as _err:
    raise AssertionError(f"_generate_cached refused a generation that fits: a prompt of 4 and 7 new tokens make "
                         f"the model read 10 positions (the last new token is never fed back), and block_size is "
                         f"10. Your refusal: {_err}") from _err
finally:
    _gpt.tok_emb = _emb
assert_equal(_cached, _plain, "greedy tokens with the cache vs without (batch 2, prompt 4, 7 new, block_size 10)")
assert_equal(_shapes, [(2, 4)] + [(2, 1)] * 6, "inputs the model ran on: the prompt once, then 6 single tokens")
with tinytorch.no_grad():                                                # sampling: the same draws
    _s1 = _generate_cached(_gpt, _prompt, 5, 1.0, 4, np.random.default_rng(7))
    _s2 = _generate(_gpt, _prompt, 5, 1.0, 4, np.random.default_rng(7))   # module 13's loop
assert_equal(_s1, _s2, "sampled tokens (temperature 1, top_k 4, the same rng seed) with vs without the cache")
_gpt.tok_emb = _Recorder(_emb)
_refusal = None
try:
    with tinytorch.no_grad():
        _generate_cached(_gpt, _prompt, 8, 0.0, None, np.random.default_rng(0))
except ValueError as _err:
    _refusal = _err
finally:
    _shapes = _gpt.tok_emb.shapes
    _gpt.tok_emb = _emb
assert_equal(_shapes, [], "prompt 4, 8 new, block_size 10 does not fit: your room check must refuse it "
             "before any forward pass (the model ran on these inputs first)")
check(_refusal is not None and "max_new_tokens" in str(_refusal),
      "the refusal is your room check's ValueError (with _room_message)", got=_refusal)
assert_equal(_generate_cached(_gpt, _prompt, 0, 0.0, None, None), _prompt, "max_new_tokens = 0: the prompt")
print("✓ _generate_cached: the same greedy tokens, prefill once then 1 token per step:", _cached[0].tolist())

# %% [markdown]
# The cached and the uncached loops agree token for token, sampled or greedy, because the
# logits agree to rounding and the random draws are the same. Once you have exported this
# module (`tito export 18`), `model.generate(prompt, n, use_cache=True)` runs your loop.

# %%
with preserved_state():
    tinytorch.manual_seed(2)
    _demo = GPT(GPTConfig(vocab_size=13, block_size=24, d_model=16, n_heads=2, n_layers=2)).eval()
_p = np.array([[1, 2, 3], [4, 5, 6]])
with tinytorch.no_grad():
    for _tau, _k in ((0.0, None), (1.0, 5)):
        _a = _generate(_demo, _p, 12, _tau, _k, np.random.default_rng(3))
        _b = _generate_cached(_demo, _p, 12, _tau, _k, np.random.default_rng(3))
        print(f"temperature {_tau}, top_k {_k}: identical = {np.array_equal(_a, _b)};", _b[0].tolist())

# %% [markdown]
# ## 7. Systems look: decode time per token as the sequence grows
#
# Time one decoding step at context length $T$: without the cache, a forward pass on all
# $T$ tokens (module 13's loop, which then uses only the last row); with the cache, a
# forward pass on the one new token with $T - 1$ tokens cached. The model is small
# ($d = 64$, 2 layers, `block_size` 512), so that the sweep takes seconds.
#
# **Predict first.** At $T = 512$, how many times faster is a step with the cache? And when
# $T$ doubles from 256 to 512, by what factor does each step's time grow?

# %%
predicted_speedup_512 = None        # your number: time without / time with the cache at T = 512
predicted_growth_uncached = None    # your number: time(T = 512) / time(T = 256), without the cache
predicted_growth_cached = None      # your number: the same, with the cache

# %%
with preserved_state():
    tinytorch.manual_seed(0)
    _model = GPT(GPTConfig(vocab_size=65, block_size=512, d_model=64, n_heads=4, n_layers=2)).eval()
_seq = Tensor(np.random.default_rng(5).integers(0, 65, (1, 512)))
_Ts = [32, 64, 128, 256, 512]
_t_plain, _t_cached = [], []
_cache = KVCache.for_model(_model, batch_size=1)
with tinytorch.no_grad():
    for _T in _Ts:                                                           # without the cache
        _t_plain.append(median_time(lambda: _model(_seq[:, :_T]), repeats=5, warmup=2))
    cached_gpt_forward(_model, _seq[:, :511], _cache)                       # prefill once, then crop
    for _T in _Ts:                                                           # with it
        def _step_cached():
            _cache.crop(_T - 1)                                              # T - 1 tokens cached
            cached_gpt_forward(_model, _seq[:, _T - 1:_T], _cache)

        _t_cached.append(median_time(_step_cached, repeats=9, warmup=2))
for _T, _tp, _tc in zip(_Ts, _t_plain, _t_cached):
    print(f"T = {_T:3d}: without the cache {_tp * 1e3:7.2f} ms/token, with it {_tc * 1e3:6.2f} ms/token "
          f"({_tp / _tc:5.1f}x)")
for _label, _pred, _meas in [("speedup at T = 512", predicted_speedup_512, _t_plain[-1] / _t_cached[-1]),
                             ("growth 256 -> 512 without the cache", predicted_growth_uncached, _t_plain[-1] / _t_plain[-2]),
                             ("growth 256 -> 512 with the cache", predicted_growth_cached, _t_cached[-1] / _t_cached[-2])]:
    print(f"{_label}: measured {_meas:.2f}; "
          + ("no prediction written" if _pred is None else f"you predicted {_pred}"))

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.loglog(_Ts, np.array(_t_plain) * 1e3, "o-", label="without the cache (whole context)")
ax.loglog(_Ts, np.array(_t_cached) * 1e3, "s-", label="with the KV cache (one token)")
ax.loglog(_Ts, _t_plain[-1] * 1e3 * np.array(_Ts, float) / _Ts[-1], "k:", label="∝ T (reference slope)")
ax.loglog(_Ts, _t_plain[-1] * 1e3 * (np.array(_Ts, float) / _Ts[-1]) ** 2, "k--", lw=0.8, label="∝ T² (reference slope)")
ax.set_xticks(_Ts, [str(t) for t in _Ts])
ax.xaxis.set_minor_formatter(plt.NullFormatter())
ax.set_xlabel("context length T")
ax.set_ylabel("ms per generated token (median)")
ax.set_title("decode time per token, d = 64, 2 layers")
ax.legend(fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# What to expect, and why the figures can differ on your machine. Without the cache a step
# is a whole forward pass: matmuls of $O(T d^2)$ and attention of $O(T^2 d)$, plus a fixed
# cost for each of the few dozen op calls (the framework's Python code). At short contexts
# the fixed cost dominates and the curve is nearly flat; as $T$ grows it bends upwards,
# with a factor per doubling between 2 (the $T d^2$ matmuls) and 4 (the $T^2$ attention), or
# even above 4 once the $T \times T$ arrays no longer fit in the CPU's caches. With the cache a
# step makes the same op calls on one token, so its time is mostly that fixed cost (about
# the same at every $T$) plus the new query's row of attention, $O(T d)$, which only shows
# at long contexts. So the speedup grows with $T$; its size depends on the machine (BLAS
# threads, cache sizes, load), so read the printed figures, not a promise. Over a whole
# generation of $n$ tokens the totals are $\sum_t O(t) = O(n^2)$ against $O(n)$ for the
# projections and MLP, and $O(n^3)$ against $O(n^2)$ for attention.
#
# Whole generations, end to end: 200 greedy tokens after a prompt of 16, with module 13's
# loop and with yours (the median of 3 runs each):

# %%
_prompt = np.random.default_rng(6).integers(0, 65, (1, 16))
with tinytorch.no_grad():
    for _name, _loop in (("without the cache", _generate), ("with the cache   ", _generate_cached)):
        _sec = median_time(lambda: _loop(_model, _prompt, 200, 0.0, None, np.random.default_rng(0)),
                           repeats=3, warmup=0)
        print(f"{_name}: 200 tokens in {_sec:5.2f} s")

# %% [markdown]
# Expect a smaller gain here than for the step at $T = 512$: these steps run at
# $T = 16 \dots 216$, where the fixed per-call cost is most of both loops' time (the left
# half of the plot).
#
# Why prefill the prompt in **one** pass rather than feed it token by token into the cache?
# The results are the same; the difference is the number of op calls and the size of the
# matmuls. **Predict first**: for a prompt of 128 tokens, how many times longer do 128
# one-token calls take than one 128-token call?

# %%
predicted_prefill_ratio = None  # your number: time(128 one-token calls) / time(one 128-token call)

# %%
_prompt128 = _seq[:, :128]


def _prefill_one_pass():
    _cache.reset()
    cached_gpt_forward(_model, _prompt128, _cache)


def _prefill_token_by_token():
    _cache.reset()
    for _t in range(128):
        cached_gpt_forward(_model, _prompt128[:, _t:_t + 1], _cache)


with tinytorch.no_grad():
    _t_one, _t_many = median_time(_prefill_one_pass, repeats=5), median_time(_prefill_token_by_token, repeats=3)
print(f"prefill of 128 tokens: one pass {_t_one * 1e3:.1f} ms, token by token {_t_many * 1e3:.1f} ms "
      f"(measured ratio {_t_many / _t_one:.1f}; "
      + ("no prediction written)" if predicted_prefill_ratio is None else f"you predicted {predicted_prefill_ratio})"))

# %% [markdown]
# One pass makes each layer's few dozen op calls once, on $(128 \times d)$ matrices that
# BLAS multiplies efficiently; token by token makes them 128 times, each on one row. The
# FLOPs are about the same; the calls are not. That is why servers split the work into a
# compute-bound **prefill** and a memory-bound, one-token-at-a-time **decode**.
#
# "Memory-bound" is a claim to check with numbers. A decode step of GPT-2 small (124 million
# parameters in float32, batch 1, 1,024 tokens cached) reads every weight once and the whole
# cache once, and does one multiply-add (2 FLOPs) per weight plus the new query's row of
# attention. Its **arithmetic intensity** is FLOPs per byte read. A machine's **balance** is
# the FLOPs its arithmetic can do per byte its memory can deliver: below the balance, the
# arithmetic waits for memory. **Predict first**: the intensity of that decode step, and
# whether it is above or below this CPU's balance.

# %%
predicted_intensity = None  # your number: FLOPs per byte read, GPT-2 small decode step, batch 1

# %%
_n_params, _layers, _width, _cached = 124_439_808, 12, 768, 1024
_bytes_read = 4 * _n_params + 2 * _layers * _cached * _width * 4    # weights, then K and V of every layer
_flops = 2 * _n_params + 4 * _layers * _cached * _width             # the weights' matmuls, q·K and weights·V
_intensity = _flops / _bytes_read
# this CPU's two rates on one thread, as module 17's roofline measured them: the fastest of 7 runs
_flops_per_s = matmul_peak(1024)  # numpy's BLAS, a 1024² matmul
_bytes_per_s = copy_bandwidth()   # a 64 MiB copy, read + write
_balance = _flops_per_s / _bytes_per_s
print(f"decode step: {_flops / 1e9:.2f} GFLOP over {_bytes_read / 2**20:.0f} MiB read: "
      f"{_intensity:.2f} FLOP/byte; " + ("no prediction written" if predicted_intensity is None
                                          else f"you predicted {predicted_intensity}"))
print(f"this CPU, one thread: {_flops_per_s / 1e9:.1f} GFLOP/s (a 1024² matmul), {_bytes_per_s / 1e9:.1f} GB/s "
      f"(a 64 MiB copy): balance {_balance:.1f} FLOP/byte")
print(f"so one decode step is memory-bound by a factor of {_balance / _intensity:.0f}; a batch of B sequences "
      f"reads the weights once for B tokens, which is why servers batch decoding")

# %% [markdown]
# The intensity is a count and does not depend on the machine: about half a FLOP per byte.
# The balance is measured, and every current CPU and GPU has one far above that (a GPU's
# is tens to hundreds). Batching is the lever: B sequences decoded together reuse each
# weight B times, so the weights' part of the intensity grows with B until the arithmetic,
# not the memory, is the limit; the cache's part does not grow, since each sequence reads
# its own.
#
# ## 8. What PyTorch (and Hugging Face) do
#
# - Core PyTorch has no cache object; the model libraries do (torchtune's `KVCache`,
#   pytorch-labs' gpt-fast, Hugging Face's caches). In Hugging Face
#   `transformers`, `model(input_ids, past_key_values=cache, cache_position=...)` is our
#   `GPT.forward(idx, kv_cache=cache)`, and `model.generate(..., use_cache=True)` (the
#   default) prefills, then decodes one token per step. `DynamicCache` grows by
#   concatenation; `StaticCache` preallocates like ours but hands attention the whole
#   buffer, empty slots masked, at every step: fixed shapes, which `torch.compile` and CUDA
#   graphs need (a graph is recorded once and replayed, so no shape may change), paid for
#   by attending over `block_size` slots from the first token on. Ours returns the filled
#   prefix: no wasted work, a new shape each step. `cache.update(key_states, value_states,
#   layer_idx)` and `cache.get_seq_length()` are our `update` and `seq_len`.
# - `F.scaled_dot_product_attention(q, k, v, is_causal=True)` aligns the triangle top-left
#   when $L \ne S$; decoders pass an explicit mask or `causal_lower_right(L, S)` (section 3).
#   With one query per step there is little arithmetic to fuse: decoding is limited by
#   reading the weights and the cache from memory (section 7's last measurement), and the
#   decode kernels (FlashDecoding's split-KV) exist to spread that reading over the whole
#   GPU at long contexts.
# - Serving systems (vLLM's **PagedAttention**) allocate the cache in fixed-size pages on
#   demand instead of `block_size` up front, so many requests of different lengths share the
#   memory; prompts with a common prefix share its pages (**prefix caching**).
# - Models shrink the cache at the source: **multi-query** and **grouped-query attention**
#   (Llama 2 70B, Llama 3) keep one key/value head per group of query heads, dividing the
#   cache by the group size; **sliding-window** attention (Mistral) keeps only the last $W$
#   tokens; caches can be quantised to 8 bits (module 15's arithmetic).
# - With positions relative to the query (RoPE, ALiBi) a cache *can* slide past the
#   training length; with learned absolute positions, like ours and GPT-2's, it cannot,
#   hence our error at `block_size`.
#
# If PyTorch is installed, our offset mask is `causal_lower_right`, and PyTorch's
# `MultiheadAttention` on the whole sequence gives our cached rows:

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    from torch.nn.attention.bias import causal_lower_right

    print("cached_causal_mask(2, 3) == causal_lower_right(2, 5):",
          bool((causal_lower_right(2, 5)._materialize().numpy() == cached_causal_mask(2, 3).numpy()).all()))
    _tm = torch.nn.MultiheadAttention(12, 3, batch_first=True, dtype=torch.float64)
    _ours = MultiheadAttention(12, 3, dtype=tinytorch.float64)
    _ours.load_state_dict({n: Tensor(p.detach().numpy()) for n, p in _tm.state_dict().items()})
    _xa = np.random.default_rng(8).standard_normal((1, 6, 12))
    _tx = torch.from_numpy(_xa)
    _tref = _tm(_tx, _tx, _tx, attn_mask=torch.ones(6, 6, dtype=torch.bool).triu(1))[0].detach().numpy()
    _c = KVCache(1, 1, 3, 6, 4, dtype=tinytorch.float64)
    with tinytorch.no_grad():
        _rows = [cached_attention(_ours, Tensor(_xa[:, :3]), _c, 0)] + \
                [cached_attention(_ours, Tensor(_xa[:, t:t + 1]), _c, 0) for t in (3, 4, 5)]
    print("max |cached - torch.nn.MultiheadAttention|:",
          np.abs(np.concatenate([r.numpy() for r in _rows], 1) - _tref).max())

# %% [markdown]
# ## 9. Recap
#
# - Causal attention makes a token's keys and values independent of later tokens, so they
#   can be computed once and **memoized**: a KV cache per layer. Queries and attention
#   weights of old rows are never needed again.
# - The cache is **preallocated** per layer to `(batch, heads, block_size, head_dim)`;
#   `update(layer_idx, k, v)` writes the new entries after the ones already there and
#   returns the filled prefix (views, no copies).
# - Three details carry every cached decoder: the new tokens' **positions** start at the
#   cached count; their **causal mask** is the bottom-right triangle (each new token sees
#   the cache and itself); and the model must never read past `block_size`, counting only
#   the tokens it actually reads.
# - **Prefill** the prompt in one pass, then **decode** one token per step: the same logits
#   (to rounding) and the same tokens as recomputing everything.
# - Per token, attention drops from $O(T^2)$ to $O(T)$ and the rest of the model from $O(T)$
#   to $O(1)$ — measured above; the cost is $2 L B T d$ numbers of memory, which dominates
#   at long contexts and large batches.
#
# Run `tito test module 18` to check your work against the full test suite.

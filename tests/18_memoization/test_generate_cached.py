"""GPT.generate(use_cache=True): the same tokens as without the cache (greedy and sampled, batch >
1, multi-token prompts), the prompt in one pass then one token per step, the room check."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.data import Generator
from tinytorch.nn.kv_cache import _generate_cached


def small(V=13, T=10, L=2, seed=0, dropout=0.0):
    tt.manual_seed(seed)
    return nn.GPT(nn.GPTConfig(vocab_size=V, block_size=T, d_model=16, n_heads=2, n_layers=L, dropout=dropout))


class Recorder(nn.Module):
    """Wraps the token embedding and records the shape of every input the model runs on."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.shapes = inner, []

    def forward(self, idx):
        self.shapes.append(tuple(idx.shape))
        return self.inner(idx)


@pytest.mark.parametrize("B,T,L", [(1, 1, 2), (2, 4, 2), (3, 5, 3)])
def test_generate_cached_greedy_tokens_equal_the_uncached_ones(B, T, L):
    model = small(L=L, seed=B + T)
    prompt = tt.tensor(np.random.default_rng(B).integers(0, 13, (B, T)))
    n = 10 - T + 1                      # the sequence grows to block_size + 1 tokens: the model reads 10
    plain = model.generate(prompt, n, temperature=0.0, use_cache=False).numpy()
    cached = model.generate(prompt, n, temperature=0.0, use_cache=True).numpy()
    assert cached.shape == (B, T + n), f"expected {(B, T + n)}, got {cached.shape}"
    np.testing.assert_array_equal(cached, plain, err_msg="greedy tokens with the cache vs without")


def test_generate_cached_sampled_tokens_equal_the_uncached_ones():
    model = small(seed=3).double()
    prompt = tt.tensor([[2, 7, 1], [5, 5, 5]])
    for kw in (dict(temperature=1.0), dict(temperature=1.5, top_k=4)):
        a = model.generate(prompt, 8, generator=Generator().manual_seed(1), use_cache=False, **kw).numpy()
        b = model.generate(prompt, 8, generator=Generator().manual_seed(1), use_cache=True, **kw).numpy()
        np.testing.assert_array_equal(b, a, err_msg=f"sampled tokens with the same seed, {kw}")


def test_generate_cached_prefills_once_then_feeds_one_token_per_step():
    model = small(seed=4).eval()
    model.tok_emb = Recorder(model.tok_emb)
    prompt = np.random.default_rng(4).integers(0, 13, (2, 4))
    with tt.no_grad():
        out = _generate_cached(model, prompt, 6, 0.0, None, np.random.default_rng(0))
    assert out.shape == (2, 10), f"expected (2, 10), got {out.shape}"
    assert model.tok_emb.shapes == [(2, 4)] + [(2, 1)] * 5, \
        f"expected the prompt once, then 5 single tokens; the model ran on {model.tok_emb.shapes}"


class Tap(nn.Module):
    """Wraps the output head and keeps a copy of every batch of logits it produces."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.outputs = inner, []

    def forward(self, x):
        out = self.inner(x)
        self.outputs.append(out.numpy().copy())
        return out


def test_generate_cached_logits_match_step_by_step():
    """The logits behind each cached step equal the full forward's within 1e-5 (float32)."""
    model = small(L=3, seed=5).eval()
    prompt = np.random.default_rng(5).integers(0, 13, (2, 3))
    model.head = Tap(model.head)
    with tt.no_grad():
        out = _generate_cached(model, prompt, 6, 0.0, None, np.random.default_rng(0))
    steps = model.head.outputs
    model.head = model.head.inner
    assert [o.shape[1] for o in steps] == [3, 1, 1, 1, 1, 1], "one pass for the prompt, then one per new token"
    full = model(tt.tensor(out[:, :-1]))[0].numpy()
    np.testing.assert_allclose(np.concatenate(steps, 1), full, rtol=1e-5, atol=1e-5,
                               err_msg="logits at every position, cached decoding vs the full forward pass")


def test_generate_cached_refuses_to_run_past_block_size():
    model = small(T=8, seed=6)
    prompt = tt.tensor([[1, 2, 3]])
    ok = model.generate(prompt, 6, temperature=0.0, use_cache=True)   # reads 3 + 6 - 1 = 8 positions
    assert ok.shape == (1, 9), "a generation that reads exactly block_size positions is allowed"
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(prompt, 7, temperature=0.0, use_cache=True)      # would read 9 > 8
    with pytest.raises(ValueError, match="block_size"):
        model.generate(tt.tensor([list(range(8)) + [1]]), 1, use_cache=True)
    assert model.generate(prompt, 0, use_cache=True).shape == (1, 3), "max_new_tokens = 0: the prompt"


def test_generate_cached_refuses_before_any_forward_pass():
    model = small(T=8, seed=6).eval()
    model.tok_emb = Recorder(model.tok_emb)
    with pytest.raises(ValueError, match="max_new_tokens"):
        with tt.no_grad():
            _generate_cached(model, np.array([[1, 2, 3]]), 7, 0.0, None, np.random.default_rng(0))
    assert model.tok_emb.shapes == [], \
        f"the room check comes before any work; the model ran on {model.tok_emb.shapes} first"


def test_generate_cached_flat_prompt_eval_mode_and_restore():
    model = small(seed=7, dropout=0.5)
    model.train()
    a = model.generate(tt.tensor([3, 1, 4]), 5, temperature=0.0, use_cache=True)
    assert a.shape == (8,), f"a 1-D prompt gives a 1-D result, got {a.shape}"
    model.eval()
    b = model.generate(tt.tensor([[3, 1, 4]]), 5, temperature=0.0, use_cache=False)
    np.testing.assert_array_equal(a.numpy(), b.numpy()[0], err_msg="generation runs in eval mode (no dropout)")
    model.train()
    model.generate(tt.tensor([[3, 1]]), 2, use_cache=True)
    assert model.training, "generate restores training mode"

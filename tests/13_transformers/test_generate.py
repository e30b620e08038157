"""GPT.generate and sampling: shapes, greedy, seeding, top-k, temperature, cropping."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.data import Generator
from tinytorch.nn.transformer import _generate, _sample_next
from tinytorch.testing import ContextRecorder, CountingRng


def small(V=13, T=8, seed=0, dropout=0.0):
    tt.manual_seed(seed)
    return nn.GPT(nn.GPTConfig(vocab_size=V, block_size=T, d_model=16, n_heads=2, n_layers=2,
                               dropout=dropout))


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_output_length_dtype_and_prompt():
    model = small()
    prompt = tt.tensor([[1, 2, 3], [4, 5, 6]])
    out = model.generate(prompt, 7)
    assert out.shape == (2, 10) and out.dtype == tt.int64 and not out.requires_grad
    np.testing.assert_array_equal(out.numpy()[:, :3], prompt.numpy())
    assert out.numpy().min() >= 0 and out.numpy().max() < 13
    flat = model.generate(tt.tensor([1, 2]), 4)
    assert flat.shape == (6,)
    assert model.generate(prompt, 0).shape == (2, 3)


def test_greedy_is_deterministic_and_the_argmax():
    model = small(seed=1)
    prompt = tt.tensor([[3, 1, 4]])
    a = model.generate(prompt, 5, temperature=0.0).numpy()
    b = model.generate(prompt, 5, temperature=0.0, generator=Generator().manual_seed(9)).numpy()
    np.testing.assert_array_equal(a, b)
    for t in range(3, 8):
        logits, _ = model(tt.tensor(a[:, :t]))
        assert a[0, t] == logits.numpy()[0, -1].argmax()


def test_context_is_cropped_to_block_size():
    model = small(T=8, seed=2)
    prompt = tt.tensor(np.random.default_rng(2).integers(0, 13, (2, 12)))
    out = model.generate(prompt, 4, temperature=0.0).numpy()
    assert out.shape == (2, 16), "12 prompt ids + 4 new ones"
    for t in range(12, 16):
        logits, _ = model(tt.tensor(out[:, t - 8:t]))
        np.testing.assert_array_equal(out[:, t], logits.numpy()[:, -1].argmax(-1),
                                      err_msg=f"token {t}: the argmax on the last block_size = 8 ids")


@pytest.mark.parametrize("prompt_length", [1, 3, 6])
def test_each_step_shows_the_model_the_last_block_size_ids(prompt_length):
    prompt = np.random.default_rng(prompt_length).integers(0, 7, (2, prompt_length))
    model = ContextRecorder()
    out = _generate(model, prompt, 5, 0.0, None, np.random.default_rng(0))
    assert out.shape == (2, prompt_length + 5), "the prompt plus max_new_tokens ids"
    assert len(model.seen) == 5, "one model call per new token"
    for i, context in enumerate(model.seen):
        t = prompt_length + i
        np.testing.assert_array_equal(context, out[:, max(0, t - 4):t],
                                      err_msg=f"new token {i}: the context must be the last <= block_size = 4 ids")
        np.testing.assert_array_equal(out[:, t], context.sum(axis=1) % 7,
                                      err_msg=f"new token {i}: the id from the last position's logits")


@pytest.mark.parametrize("u,expected", [(0.05, [0, 0]), (0.5, [2, 1]), (0.95, [3, 3])])
def test_sample_next_draws_once_per_step_by_inverse_transform(u, expected):
    rng = CountingRng(u)
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    out = _sample_next(np.log(probs) + 3.0, 1.0, None, rng)
    assert rng.calls == [(2, 1)], f"one rng.random((B, 1)) call per step, got calls of shapes {rng.calls}"
    np.testing.assert_array_equal(out, expected, err_msg=f"u = {u}: the token whose interval of [0, 1) holds u")


def test_seeded_sampling_is_reproducible():
    model = small(seed=3)
    prompt = tt.tensor([[0, 1]])
    a = model.generate(prompt, 20, generator=Generator().manual_seed(4)).numpy()
    b = model.generate(prompt, 20, generator=Generator().manual_seed(4)).numpy()
    np.testing.assert_array_equal(a, b)
    tt.manual_seed(11)
    c = model.generate(prompt, 20).numpy()
    tt.manual_seed(11)
    d = model.generate(prompt, 20).numpy()
    np.testing.assert_array_equal(c, d)
    others = [model.generate(prompt, 20, generator=Generator().manual_seed(s)).numpy() for s in range(5, 9)]
    assert any(not np.array_equal(a, o) for o in others)


def test_top_k_restricts_each_step():
    model = small(seed=4)
    prompt = tt.tensor([[2, 7, 1], [5, 5, 5]])
    out = model.generate(prompt, 12, temperature=3.0, top_k=3, generator=Generator().manual_seed(0)).numpy()
    for t in range(3, 15):
        logits = model(tt.tensor(out[:, max(0, t - 8):t]))[0].numpy()[:, -1]
        top3 = np.argsort(logits, -1)[:, -3:]
        for b in range(2):
            assert out[b, t] in top3[b]
    greedy = model.generate(prompt, 6, temperature=0.0).numpy()
    top1 = model.generate(prompt, 6, temperature=1.0, top_k=1, generator=Generator().manual_seed(1)).numpy()
    np.testing.assert_array_equal(greedy, top1)


def test_sample_next_follows_the_distribution():
    rng = np.random.default_rng(0)
    logits = np.array([[0.5, 1.5, -1.0, 0.0, 2.0]])
    batch = np.repeat(logits, 3000, axis=0)  # 3000 rows, each drawn on its own
    for temperature in (1.0, 0.5, 2.0):
        draws = _sample_next(batch, temperature, None, rng)
        freq = np.bincount(draws, minlength=5) / draws.size
        np.testing.assert_allclose(freq, softmax(logits[0] / temperature), atol=0.035)
    draws = _sample_next(batch, 1.0, 2, rng)
    freq = np.bincount(draws, minlength=5) / draws.size
    expected = softmax(np.where(logits[0] >= 1.5, logits[0], -np.inf))
    np.testing.assert_allclose(freq, expected, atol=0.035)
    assert freq[[0, 2, 3]].sum() == 0


def test_sample_next_greedy_batch_and_large_k():
    rng = np.random.default_rng(1)
    logits = np.random.default_rng(2).standard_normal((6, 9)) * 3
    out = _sample_next(logits, 0.0, None, rng)
    assert out.dtype == np.int64 and out.shape == (6,)
    np.testing.assert_array_equal(out, logits.argmax(-1))
    many = _sample_next(logits, 1.0, 100, rng)  # k above V means no restriction
    assert many.shape == (6,) and many.min() >= 0 and many.max() < 9
    peaked = np.full((3, 9), -1e9)
    peaked[np.arange(3), [4, 0, 8]] = 0.0
    np.testing.assert_array_equal(_sample_next(peaked, 1.0, None, rng), [4, 0, 8])


def test_argument_validation():
    model = small(seed=5)
    prompt = tt.tensor([[1, 2]])
    assert model.generate(prompt, 2, temperature=0.5, top_k=2).shape == (1, 4)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(prompt, 2, temperature=-0.1)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(prompt, 2, top_k=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        model.generate(prompt, -1)


def test_generation_runs_in_eval_mode_and_restores_the_mode():
    model = small(seed=6, dropout=0.5)
    model.train()
    prompt = tt.tensor([[1, 2, 3]])
    a = model.generate(prompt, 6, temperature=0.0).numpy()
    b = model.generate(prompt, 6, temperature=0.0).numpy()
    np.testing.assert_array_equal(a, b)
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    logits, _ = model(tt.tensor(a[:, :8]))
    assert a[0, 8] == logits.numpy()[0, -1].argmax()


@pytest.mark.parametrize("order", [1, -1])
def test_sample_next_at_a_tiny_temperature_does_not_overflow(order):
    logits = np.array([[10.0, 9.0, 2.0]], dtype=np.float32)[:, ::order].copy()
    out = _sample_next(logits, 0.01, None, CountingRng(0.99))
    expected = 0 if order == 1 else 2
    assert out.tolist() == [expected], (f"temperature 0.01 on logits {logits[0].tolist()}: almost surely token "
                                        f"{expected}, got {out.tolist()} (exp overflowing to inf gives NaN)")


@pytest.mark.parametrize("u,expected", [(0.25, 0), (0.75, 1)])
def test_sample_next_keeps_ties_at_the_top_k_threshold(u, expected):
    out = _sample_next(np.array([[3.0, 3.0, 1.0]]), 1.0, 1, CountingRng(u))
    np.testing.assert_array_equal(out, [expected], err_msg=f"top_k=1 on (3, 3, 1), u = {u}: the two tied logits "
                                                           f"both stay (probability 1/2 each)")


def test_sample_next_never_draws_a_token_of_probability_zero_at_u_zero():
    out = _sample_next(np.array([[-5.0, 2.0, 1.0], [0.0, 9.0, 8.0]]), 1.0, 2, CountingRng(0.0))
    np.testing.assert_array_equal(out, [1, 1], err_msg="u = 0 with token 0 cut by top_k: the first kept token")


def test_sample_next_at_the_largest_u_below_one_never_draws_a_cut_token():
    out = _sample_next(np.array([[0.0] * 10 + [-5.0]]), 1.0, 10, CountingRng(np.nextafter(1.0, 0.0)))
    np.testing.assert_array_equal(out, [9], err_msg="u just below 1, eleven logits, the eleventh cut by top_k=10: "
                                                    "the last kept token, never the cut one")


def test_sample_next_at_the_largest_u_below_one_draws_the_last_token():
    out = _sample_next(np.zeros((2, 10)), 1.0, None, CountingRng(np.nextafter(1.0, 0.0)))
    np.testing.assert_array_equal(out, [9, 9], err_msg="u just below 1 on ten equal logits: the last token (their "
                                                       "normalised probabilities add up to just below 1)")

"""GPT: forward and loss, causality, weight tying, initial loss, parameter count, overfitting."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.optim import AdamW
from tinytorch.testing import passthrough_spy


def small(tie=True, V=13, T=8, d=16, h=2, L=2, d_ff=None, seed=0):
    tt.manual_seed(seed)
    return nn.GPT(nn.GPTConfig(vocab_size=V, block_size=T, d_model=d, n_heads=h, n_layers=L,
                               d_ff=d_ff, tie_weights=tie))


def ids(B, T, V, seed=0):
    return tt.tensor(np.random.default_rng(seed).integers(0, V, (B, T)))


def test_gpt_forward_shapes_and_loss_is_flattened_cross_entropy():
    model = small()
    x, y = ids(3, 8, 13, 1), ids(3, 8, 13, 2)
    logits, loss = model(x)
    assert logits.shape == (3, 8, 13) and loss is None
    logits, loss = model(x, y)
    assert loss.shape == () and loss.requires_grad
    z = logits.numpy().astype(np.float64)
    logp = z - z.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    ref = -np.take_along_axis(logp, y.numpy()[..., None], -1).mean()
    np.testing.assert_allclose(loss.item(), ref, rtol=1e-5,
                               err_msg="the loss: mean cross-entropy of logits[b, t] against targets[b, t] over all "
                                       "B·T positions (the targets arrive already shifted: y[t] is the token after "
                                       "x[t])")
    short, _ = model(x[:, :3])
    assert short.shape == (3, 3, 13)
    np.testing.assert_allclose(short.numpy(), logits.numpy()[:, :3], atol=1e-5)


def test_gpt_forward_equals_manual_composition():
    model = small(seed=3)
    x = ids(2, 6, 13, 3)
    h = model.tok_emb(x) + model.pos_emb(tt.arange(6))
    for block in model.blocks:
        h = block(h)
    ref = model.ln_f(h).numpy() @ model.tok_emb.weight.numpy().T  # tied head, no bias
    np.testing.assert_allclose(model(x)[0].numpy(), ref, rtol=1e-5, atol=1e-6)


def test_gpt_forward_passes_the_embeddings_through_the_dropout():
    model = small(seed=3)
    x = ids(2, 6, 13, 3)
    model.drop = passthrough_spy()
    model(x)
    assert len(model.drop.seen) == 1, "GPT.forward calls its dropout `drop` once"
    np.testing.assert_allclose(model.drop.seen[0], (model.tok_emb(x) + model.pos_emb(tt.arange(6))).numpy(),
                               rtol=1e-6, err_msg="`drop` receives the token plus the position embeddings")


def test_gpt_forward_ignore_index_targets():
    model = small(seed=4)
    x, y = ids(2, 8, 13, 4), ids(2, 8, 13, 5)
    y_np = y.numpy().copy()
    y_np[:, :4] = -100
    _, loss_masked = model(x, tt.tensor(y_np))
    logits, _ = model(x)
    z = logits.numpy().astype(np.float64)[:, 4:]
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    ref = -np.take_along_axis(logp, y_np[:, 4:, None], -1).mean()
    np.testing.assert_allclose(loss_masked.item(), ref, rtol=1e-5,
                               err_msg="targets of -100 are left out of the mean (ignore_index), the rest averaged")


@pytest.mark.parametrize("t", [0, 3, 7])
@pytest.mark.parametrize("tie", [True, False])
def test_gpt_forward_future_tokens_never_change_past_logits(t, tie):
    model = small(tie=tie, seed=5)
    x = ids(2, 8, 13, 6).numpy()
    x2 = x.copy()
    x2[:, t] = (x2[:, t] + 5) % 13
    a, b = model(tt.tensor(x))[0].numpy(), model(tt.tensor(x2))[0].numpy()
    np.testing.assert_allclose(b[:, :t], a[:, :t], atol=1e-6)
    assert np.abs(b[:, t] - a[:, t]).max() > 1e-4


def test_gpt_forward_causality_of_gradients():
    model = small(seed=6)
    x = ids(1, 8, 13, 7)
    emb = model.tok_emb(x).detach().requires_grad_()
    h = emb + model.pos_emb(tt.arange(8))
    for block in model.blocks:
        h = block(h)
    logits = model.head(model.ln_f(h))
    logits[:, 3].sum().backward()
    g = np.abs(emb.grad.numpy()[0]).sum(-1)
    assert np.all(g[4:] == 0) and np.all(g[:4] > 0)


def test_tied_weights_share_storage_and_sum_gradients():
    tied, untied = small(tie=True, seed=7), small(tie=False, seed=7)
    assert tied.head.weight is tied.tok_emb.weight
    assert untied.head.weight is not untied.tok_emb.weight
    assert sum(1 for _ in tied.parameters()) == sum(1 for _ in untied.parameters()) - 1
    with tt.no_grad():  # same numbers everywhere, head = token table
        untied.load_state_dict(tied.state_dict(), strict=False)
        untied.head.weight.copy_(tied.tok_emb.weight)
    x, y = ids(2, 8, 13, 8), ids(2, 8, 13, 9)
    _, lt = tied(x, y)
    _, lu = untied(x, y)
    np.testing.assert_allclose(lt.item(), lu.item(), rtol=1e-6)
    lt.backward()
    lu.backward()
    np.testing.assert_allclose(tied.tok_emb.weight.grad.numpy(),
                               untied.tok_emb.weight.grad.numpy() + untied.head.weight.grad.numpy(),
                               rtol=1e-5, atol=1e-7)
    with tt.no_grad():
        tied.tok_emb.weight.numpy()[0] += 1.0
    assert np.all(tied.head.weight.numpy()[0] == tied.tok_emb.weight.numpy()[0])


@pytest.mark.parametrize("V", [13, 65])
def test_initial_loss_is_about_log_vocab(V):
    model = small(V=V, d=32, seed=8)
    _, loss = model(ids(8, 8, V, 10), ids(8, 8, V, 11))
    assert abs(loss.item() - math.log(V)) < 0.05 * math.log(V)
    logits, _ = model(ids(8, 8, V, 10))
    assert logits.numpy().std() < 0.5, "small initial weights give nearly uniform predictions"


def test_gpt_init_weights_scales():
    model = small(d=64, L=4, T=16, seed=9)
    w = model.blocks[0].ff.fc1.weight.numpy()
    assert abs(w.std() - 0.02) < 0.002, f"an ordinary matrix (fc1) has std 0.02, got {w.std():.4f}"
    proj = model.blocks[1].ff.fc2.weight.numpy()
    assert abs(proj.std() - 0.02 / math.sqrt(8)) < 0.001, \
        f"a residual projection (fc2) with L = 4 has std 0.02/sqrt(8) = 0.0071, got {proj.std():.4f}"
    assert np.all(model.blocks[0].ff.fc1.bias.numpy() == 0), "biases start at 0"
    assert np.all(model.ln_f.weight.numpy() == 1), "LayerNorm gains are left at 1"
    logits, _ = model(ids(2, 16, 13, 12))
    assert np.isfinite(logits.numpy()).all(), "the initial logits are finite"


def test_gpt_init_weights_every_kind_of_parameter():
    model = small(d=64, L=4, T=16, seed=10)
    resid = 0.02 / math.sqrt(8)
    for i, block in enumerate(model.blocks):
        assert abs(block.attn.out_proj.weight.numpy().std() - resid) < 0.001, f"block {i} attn.out_proj"
        assert abs(block.ff.fc2.weight.numpy().std() - resid) < 0.001, f"block {i} ff.fc2"
        assert abs(block.attn.in_proj_weight.numpy().std() - 0.02) < 0.002, f"block {i} in_proj_weight"
        assert np.all(block.attn.in_proj_bias.numpy() == 0) and np.all(block.ff.fc2.bias.numpy() == 0), \
            f"block {i}: biases start at 0"
        assert np.all(block.ln1.weight.numpy() == 1) and np.all(block.ln2.bias.numpy() == 0), \
            f"block {i}: LayerNorm parameters keep their constructor's values"
    assert abs(model.tok_emb.weight.numpy().std() - 0.02) < 0.002, "the token table has std 0.02"
    assert abs(model.pos_emb.weight.numpy().std() - 0.02) < 0.004, "the position table has std 0.02"


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("V,T,d,L,d_ff", [(13, 8, 16, 2, None), (50, 32, 24, 3, 40), (7, 4, 8, 1, 8)])
def test_gpt_num_parameters_equals_formula(tie, V, T, d, L, d_ff):
    model = small(tie=tie, V=V, T=T, d=d, L=L, d_ff=d_ff, h=2)
    f = 4 * d if d_ff is None else d_ff
    per_block = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d
    expected = V * d + T * d + L * per_block + 2 * d + (0 if tie else V * d)
    assert model.num_parameters() == expected
    assert model.num_parameters() == sum(int(np.prod(p.shape)) for p in model.parameters())
    non_emb = expected - T * d - (0 if tie else V * d)
    assert model.num_parameters(non_embedding=True) == non_emb


def test_gpt_forward_refuses_a_too_long_input():
    model = small()
    assert model(ids(1, 8, 13))[0].shape == (1, 8, 13)
    with pytest.raises(ValueError, match="block_size"):
        model(ids(1, 9, 13))


def test_tiny_gpt_overfits_one_batch():
    model = small(V=11, T=8, d=32, h=2, L=2, seed=10)
    x_np = ids(4, 8, 11, 13).numpy().copy()
    x_np[:, 0] = [0, 1, 2, 3]  # distinct first tokens: every prefix is unique, so any y can be memorised
    x, y = tt.tensor(x_np), ids(4, 8, 11, 14)
    opt = AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    first = None
    for step in range(200):
        _, loss = model(x, y)
        if first is None:
            first = loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.02:
            break
    assert first > 2.0
    _, loss = model(x, y)
    assert loss.item() < 0.1, f"a tiny GPT should memorise one batch, loss is {loss.item():.3f}"
    pred = model(x)[0].numpy().argmax(-1)
    np.testing.assert_array_equal(pred, y.numpy())

"""FeedForward and TransformerBlock: values, shapes, causality, residuals, parity, gradcheck."""
import numpy as np
import pytest
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch import nn
from tinytorch.autograd import gradcheck
from tinytorch.nn import functional as F
from tinytorch.nn.transformer import FeedForward, _causal_attn_mask
from tinytorch.testing import passthrough_spy


def test_feed_forward_matches_numpy():
    tt.manual_seed(0)
    ff = FeedForward(8, 20)
    assert [n for n, _ in ff.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert ff.fc1.weight.shape == (20, 8) and ff.fc2.weight.shape == (8, 20)
    assert FeedForward(5).fc1.out_features == 20
    exact = FeedForward(8, 20, approximate="none")
    assert exact.act.approximate == "none" and ff.act.approximate == "tanh"
    x = tt.randn(3, 4, 8)
    h = x.numpy() @ ff.fc1.weight.numpy().T + ff.fc1.bias.numpy()
    h = F.gelu(tt.tensor(h), approximate="tanh").numpy()
    ref = h @ ff.fc2.weight.numpy().T + ff.fc2.bias.numpy()
    np.testing.assert_allclose(ff(x).numpy(), ref, rtol=1e-5, atol=1e-6)


def test_causal_attn_mask_shape_and_meaning():
    m = _causal_attn_mask(4).numpy()
    assert m.dtype == bool and m.shape == (4, 4)
    np.testing.assert_array_equal(m, np.triu(np.ones((4, 4), bool), 1))
    np.testing.assert_array_equal(_causal_attn_mask(1).numpy(), np.zeros((1, 1), bool))


def test_feed_forward_drops_its_output():
    tt.manual_seed(0)
    ff = FeedForward(8, 20)
    x = tt.randn(2, 3, 8)
    expected = ff(x).numpy()
    ff.dropout = passthrough_spy()
    ff(x)
    assert len(ff.dropout.seen) == 1, "FeedForward calls its dropout once per forward"
    np.testing.assert_allclose(ff.dropout.seen[0], expected, rtol=1e-6,
                               err_msg="FeedForward's dropout receives fc2's output, the branch's end")


def test_transformer_block_forward_drops_the_attention_branch_before_the_addition():
    tt.manual_seed(7)
    block = nn.TransformerBlock(8, 2, 16)
    x = tt.randn(2, 5, 8)
    h = block.ln1(x)
    attended, _ = block.attn(h, h, h, attn_mask=_causal_attn_mask(5), need_weights=False)
    block.dropout = passthrough_spy()
    block(x)
    assert len(block.dropout.seen) == 1, "the block calls self.dropout once per forward"
    np.testing.assert_allclose(block.dropout.seen[0], attended.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg="the block's dropout receives the attention output, before the residual addition")


@pytest.mark.parametrize("B,T,d,h", [(2, 5, 8, 2), (1, 1, 6, 3), (3, 7, 12, 4)])
def test_transformer_block_forward_shapes_and_parameter_names(B, T, d, h):
    tt.manual_seed(1)
    block = nn.TransformerBlock(d, h, 2 * d)
    y = block(tt.randn(B, T, d))
    assert y.shape == (B, T, d) and y.dtype == np.float32
    names = [n for n, _ in block.named_parameters()]
    assert names[:2] == ["ln1.weight", "ln1.bias"] and "ln2.weight" in names
    assert "ff.fc1.weight" in names and "attn.out_proj.weight" in names


@pytest.mark.parametrize("t", [0, 2, 5])
def test_transformer_block_forward_is_causal(t):
    tt.manual_seed(2)
    block = nn.TransformerBlock(8, 2, 16)
    x = np.random.default_rng(t).standard_normal((2, 6, 8)).astype(np.float32)
    x2 = x.copy()
    x2[:, t] += np.random.default_rng(99).standard_normal((2, 8)).astype(np.float32) * 3
    y, y2 = block(tt.tensor(x)).numpy(), block(tt.tensor(x2)).numpy()
    np.testing.assert_allclose(y2[:, :t], y[:, :t], atol=1e-6)
    assert np.abs(y2[:, t] - y[:, t]).max() > 1e-3
    if t + 1 < 6:
        assert np.abs(y2[:, t + 1:] - y[:, t + 1:]).max() > 1e-4, "later positions do see position t"


def test_transformer_block_forward_residual_structure():
    tt.manual_seed(3)
    block = nn.TransformerBlock(8, 2, 16)
    x = tt.randn(2, 4, 8)
    with tt.no_grad():
        for p in (block.ff.fc2.weight, block.ff.fc2.bias):
            p.zero_()
    # with the MLP branch silenced, the block is x + attention(ln1(x))
    h = block.ln1(x)
    attn, _ = block.attn(h, h, h, attn_mask=_causal_attn_mask(4), need_weights=False)
    np.testing.assert_allclose(block(x).numpy(), (x + attn).numpy(), rtol=1e-5, atol=1e-6)
    with tt.no_grad():
        for p in (block.attn.out_proj.weight, block.attn.out_proj.bias):
            p.zero_()
    np.testing.assert_allclose(block(x).numpy(), x.numpy(), atol=1e-7)


def test_transformer_block_forward_gradcheck():
    tt.manual_seed(4)
    block = nn.TransformerBlock(4, 2, 6).double()
    x = tt.tensor(np.random.default_rng(4).standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda x: block(x), [x])


def _torch_encoder_layer(torch):
    """PyTorch's pre-norm encoder layer with tinytorch's GELU (the tanh form); its activation
    is a function PyTorch calls, so it is built on live PyTorch (torch_reference.built_by)."""
    return torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, batch_first=True, norm_first=True,
        activation=lambda x: torch.nn.functional.gelu(x, approximate="tanh"))


def test_transformer_block_forward_matches_torch_encoder_layer(torch):
    tt.manual_seed(5)
    ours = nn.TransformerBlock(16, 4, 32)
    theirs = torch_reference.built_by(torch, _torch_encoder_layer)
    names = {"self_attn.in_proj_weight": "attn.in_proj_weight", "self_attn.in_proj_bias": "attn.in_proj_bias",
             "self_attn.out_proj.weight": "attn.out_proj.weight", "self_attn.out_proj.bias": "attn.out_proj.bias",
             "linear1.weight": "ff.fc1.weight", "linear1.bias": "ff.fc1.bias",
             "linear2.weight": "ff.fc2.weight", "linear2.bias": "ff.fc2.bias",
             "norm1.weight": "ln1.weight", "norm1.bias": "ln1.bias",
             "norm2.weight": "ln2.weight", "norm2.bias": "ln2.bias"}
    rng = np.random.default_rng(5)
    sd = ours.state_dict()
    # non-trivial LayerNorm parameters too
    for k in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"):
        with tt.no_grad():
            dict(ours.named_parameters())[k].copy_(tt.tensor(rng.standard_normal(16).astype(np.float32) * 0.5 + (1 if "weight" in k else 0)))
    sd = ours.state_dict()
    theirs.load_state_dict({k: torch.tensor(sd[v].numpy()) for k, v in names.items()})
    x = rng.standard_normal((2, 6, 16)).astype(np.float32)
    xo, xt = tt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(6)
    yo = ours(xo)
    yt = theirs(xt, src_mask=mask, is_causal=True)
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = rng.standard_normal(x.shape).astype(np.float32)
    yo.backward(tt.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours.ln1.weight.grad.numpy(), theirs.norm1.weight.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_dropout_off_in_eval_mode():
    tt.manual_seed(6)
    block = nn.TransformerBlock(8, 2, 16, dropout=0.5)
    block.eval()
    x = tt.randn(2, 5, 8)
    y1, y2 = block(x).numpy(), block(x).numpy()
    np.testing.assert_array_equal(y1, y2)
    with tt.no_grad():
        for p in (block.ff.fc2.weight, block.ff.fc2.bias, block.attn.out_proj.weight, block.attn.out_proj.bias):
            p.zero_()
    np.testing.assert_allclose(block(x).numpy(), x.numpy(), atol=1e-7)

"""Weights travel between tinytorch and PyTorch through safetensors files.

tinytorch's `save(model.state_dict(), path)` writes a safetensors file whose tensors are
named like the parameters, so PyTorch reads it with `safetensors.torch.load_file` and
`load_state_dict`; a file PyTorch wrote with `safetensors.torch.save_file` loads in tinytorch
with `load` and `load_state_dict`. For module 13's GPT (small config, tied head), the same input gives the same output on both sides
(float32 tolerance), in both directions. The PyTorch classes below mirror tinytorch's
parameter names exactly.
"""
import numpy as np
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch.serialization import load, save

RTOL, ATOL = 1e-4, 1e-5


# ---------------------------------------------------------------- the models, on both sides
def _gpt_config():
    from tinytorch.nn import GPTConfig
    return GPTConfig(vocab_size=13, block_size=8, d_model=16, n_heads=2, n_layers=2)


def _torch_gpt(torch, c):
    F = torch.nn

    class FeedForward(F.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = F.Linear(c.d_model, c.d_ff)
            self.act = F.GELU(approximate="tanh")
            self.fc2 = F.Linear(c.d_ff, c.d_model)
            self.dropout = F.Dropout(c.dropout)

        def forward(self, x):
            return self.dropout(self.fc2(self.act(self.fc1(x))))

    class Block(F.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = F.LayerNorm(c.d_model)
            self.attn = F.MultiheadAttention(c.d_model, c.n_heads, batch_first=True)
            self.dropout = F.Dropout(c.dropout)
            self.ln2 = F.LayerNorm(c.d_model)
            self.ff = FeedForward()

        def forward(self, x):
            T = x.shape[1]
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # True: may not attend
            h = self.ln1(x)
            attended, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
            x = x + self.dropout(attended)
            return x + self.ff(self.ln2(x))

    class GPT(F.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = F.Embedding(c.vocab_size, c.d_model)
            self.pos_emb = F.Embedding(c.block_size, c.d_model)
            self.drop = F.Dropout(c.dropout)
            self.blocks = F.ModuleList([Block() for _ in range(c.n_layers)])
            self.ln_f = F.LayerNorm(c.d_model)
            self.head = F.Linear(c.d_model, c.vocab_size, bias=False)
            self.head.weight = self.tok_emb.weight  # tied, as in tinytorch's GPT

        def forward(self, idx):
            x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1])))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return GPT()


def _tokens(seed):
    return np.random.default_rng(seed).integers(0, 13, (2, 8)).astype(np.int64)


# ---------------------------------------------------------------- tinytorch -> file -> PyTorch
def _ours_to_theirs(torch, tmp_path, ours, theirs):
    safetensors_torch = torch_reference.companion_module(torch, "safetensors.torch")
    path = tmp_path / "weights.safetensors"
    save(ours.state_dict(), path)
    state = safetensors_torch.load_file(str(path))
    assert set(state) == set(theirs.state_dict()), "the file's tensor names are PyTorch's names"
    theirs.load_state_dict(state)  # strict: every name and shape must match


def test_gpt_from_tinytorch_to_pytorch(torch, tmp_path):
    from tinytorch.nn import GPT
    c = _gpt_config()
    tt.manual_seed(0)
    ours = GPT(c)
    with tt.no_grad():
        for p in ours.parameters():  # move every parameter away from its init (LayerNorm's 1s too)
            p.add_(tt.tensor(np.random.default_rng(1).standard_normal(p.shape).astype(np.float32) * 0.1))
    theirs = torch_reference.built_by(torch, _torch_gpt, c)
    _ours_to_theirs(torch, tmp_path, ours, theirs)
    idx = _tokens(2)
    ours.eval()
    theirs.eval()
    with tt.no_grad():
        expected = ours(tt.tensor(idx))[0].numpy()
    with torch.no_grad():
        got = theirs(torch.from_numpy(idx)).numpy()
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- PyTorch -> file -> tinytorch
def _theirs_to_ours(torch, tmp_path, theirs, ours):
    safetensors_torch = torch_reference.companion_module(torch, "safetensors.torch")
    path = tmp_path / "from_torch.safetensors"
    # save_file refuses tensors sharing memory (the tied GPT head): store each as its own copy
    safetensors_torch.save_file({k: v.detach().clone().contiguous() for k, v in theirs.state_dict().items()},
                                str(path))
    state = load(path)
    assert all(isinstance(v, tt.Tensor) for v in state.values())
    assert set(state) == set(ours.state_dict())
    ours.load_state_dict(state)


def test_gpt_from_pytorch_to_tinytorch(torch, tmp_path):
    from tinytorch.nn import GPT
    c = _gpt_config()
    torch.manual_seed(0)
    theirs = torch_reference.built_by(torch, _torch_gpt, c)
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(0.1 * torch.randn_like(p))
    tt.manual_seed(0)
    ours = GPT(c)
    _theirs_to_ours(torch, tmp_path, theirs, ours)
    check_tied = ours.head.weight is ours.tok_emb.weight
    idx = _tokens(4)
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        expected = theirs(torch.from_numpy(idx)).numpy()
    with tt.no_grad():
        got = ours(tt.tensor(idx))[0].numpy()
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    assert check_tied, "loading keeps the tied head tied"



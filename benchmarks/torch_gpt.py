"""The GPT of module 13 written in PyTorch, for the benchmark's GPT steps: the same layers,
sizes and parameter layout (pre-norm blocks, torch's MultiheadAttention, a GELU feed-forward,
a head tied to the token table), so both frameworks do the same work. `approximate` is the
GELU's form: "tanh" (tinytorch's GPT's default) or "none" (exact, as in nanoGPT)."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d_model, n_heads, approximate):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate=approximate), nn.Linear(4 * d_model, d_model))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.ff(self.ln2(x))


class TorchGPT(nn.Module):
    def __init__(self, vocab_size, block_size, d_model, n_heads, n_layers, approximate="tanh"):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads, approximate) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)  # True: not allowed, as in tinytorch
        for block in self.blocks:
            x = block(x, mask)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss

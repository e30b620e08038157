"""A one-block GPT written the way nanoGPT writes attention: one Linear for q, k and v,
`split` into three, `view` into heads, `transpose`, a causal mask with `masked_fill`,
`softmax`, then back with `transpose(...).contiguous().view(...)`. float32, AdamW."""
import numpy as np
from compat_common import same_start

STEPS, B, T, C, HEADS, VOCAB = 20, 4, 8, 16, 2, 11


def main(torch):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)
            q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
            k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
            v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (c // HEADS) ** 0.5)
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.proj(y)

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, C)
            self.pos = nn.Embedding(T, C)
            self.ln1, self.ln2, self.ln_f = nn.LayerNorm(C), nn.LayerNorm(C), nn.LayerNorm(C)
            self.attn = Attention()
            self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))
            self.head = nn.Linear(C, VOCAB, bias=False)

        def forward(self, idx, targets):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
            x = x + self.attn(self.ln1(x))
            x = x + self.mlp(self.ln2(x))
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    model = same_start(torch, TinyGPT())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    data = np.random.default_rng(1).integers(0, VOCAB, (B, T + 1))
    idx, targets = torch.tensor(data[:, :-1]), torch.tensor(data[:, 1:])
    losses = []
    for _ in range(STEPS):
        loss = model(idx, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses

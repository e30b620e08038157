"""A small transformer (2017) learns to write fables, one character at a time.

Vaswani et al.'s "Attention Is All You Need" (2017) replaced recurrence with attention: each
position looks at every earlier one and takes what it needs. A GPT-style decoder (Radford et
al., 2018) stacks such blocks and learns to predict the next token. This one is tiny (two
blocks, width 64) and trains for 1,250 steps on the Aesop fables shipped with the course,
with your tokenizer, embeddings, attention, transformer blocks, AdamW and clipping. It then
writes a fable of its own, one character at a time, and counts how many of the words it
wrote are real words of the fables: after 200 steps about a third are, after 1,250 about
four in five.

Run it with `tito milestone run transformer` (or plainly: python milestones/transformer_2017.py).
"""
import json
import math
import os
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tinytorch  # noqa: E402
from tinytorch import nn  # noqa: E402
from tinytorch.data import Generator, load_text  # noqa: E402
from tinytorch.nn.utils import clip_grad_norm_  # noqa: E402
from tinytorch.optim import AdamW  # noqa: E402
from tinytorch.optim.lr_scheduler import LambdaLR  # noqa: E402
from tinytorch.text import CharTokenizer, encode_corpus, get_batch  # noqa: E402

TITLE = "A small transformer learns to write fables"
YEAR = 2017
MODULES = ["01_tensor", "02_activations", "03_layers", "04_losses", "05_dataloader", "06_autograd",
           "07_optimizers", "08_training", "10_tokenization", "11_embeddings", "12_attention",
           "13_transformers"]
TARGET = "at least 70% of the words it writes are words of the fables (validation loss printed beside)"
OUT = Path(os.environ.get("TINYTORCH_MILESTONES_OUT") or Path(__file__).resolve().parents[1] / "build" / "milestones")
STEPS = 1250  # measured: 200 steps write about 30% real words, 1,000 steps 69%, 1,250 steps 78%, 1,500 86%
BATCH, WARMUP, PEAK_LR = 32, 20, 3e-3
SAMPLE_CHARS, WORDS_TARGET = 400, 0.70


def main():
    text = load_text("fables")
    tok = CharTokenizer.from_text(text)
    data = encode_corpus(tok, text)
    n_train = int(0.9 * len(data))
    train_data, val_data = data[:n_train], data[n_train:]
    counts = np.bincount(np.asarray(train_data.numpy(), dtype=np.int64), minlength=tok.vocab_size) + 1
    freq_val = counts[np.asarray(val_data.numpy(), dtype=np.int64)] / counts.sum()
    unigram = float(-np.log(freq_val).mean())  # the loss of guessing by character frequency

    config = nn.GPTConfig(vocab_size=tok.vocab_size, block_size=32, d_model=64, n_heads=4, n_layers=2)
    tinytorch.manual_seed(1337)
    model = nn.GPT(config)
    optimizer = AdamW(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.99), weight_decay=0.01)

    def lr_factor(step):  # linear warm-up, then cosine decay to a tenth
        if step < WARMUP:
            return (step + 1) / WARMUP
        return 0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (step - WARMUP) / max(1, STEPS - WARMUP))))

    scheduler = LambdaLR(optimizer, lr_factor)
    batches = Generator().manual_seed(0)
    losses = []
    bar = tqdm(range(STEPS), desc="transformer", unit="step", disable=None)
    model.train()
    for step in bar:
        xb, yb = get_batch(train_data, config.block_size, BATCH, batches)
        _, loss = model(xb, yb)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % 10 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    bar.close()
    val = estimate_loss(model, val_data, config.block_size)

    prompt_text = "The Fox and the "
    prompt = tinytorch.tensor([tok.encode(prompt_text)], dtype=tinytorch.int64)
    sample = model.generate(prompt, SAMPLE_CHARS, temperature=0.8, top_k=10, generator=Generator().manual_seed(0))
    fable = tok.decode(sample.numpy()[0])
    print("the model's own fable:\n  " + fable.replace("\n", "\n  "))
    real, written = real_words(fable[len(prompt_text):], text)
    met = real >= WORDS_TARGET * written

    OUT.mkdir(parents=True, exist_ok=True)
    plot = OUT / "transformer_2017.png"
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(losses, lw=0.8, alpha=0.5, label="training batch loss")
    k = 10
    ax.plot(range(k - 1, len(losses)), np.convolve(losses, np.ones(k) / k, mode="valid"), label="moving mean (10)")
    ax.axhline(math.log(tok.vocab_size), color="gray", ls=":", label=f"uniform guess ln V = {math.log(tok.vocab_size):.2f}")
    ax.axhline(unigram, color="C4", ls="-.", label=f"character frequencies {unigram:.2f}")
    ax.axhline(val, color="C3", ls="--", label=f"final validation loss {val:.2f}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / char)")
    ax.set_title(f"char-level GPT on the fables ({model.num_parameters():,d} parameters)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plot, dpi=100)
    plt.close(fig)

    result = (f"{real} of the {written} words it wrote ({real / max(written, 1):.0%}) are words of the fables; "
              f"validation loss {val:.3f} nats/char after {STEPS} steps (character frequencies: {unigram:.3f}, "
              f"uniform: {math.log(tok.vocab_size):.3f})")
    return report("transformer", result, met, plot)


def real_words(written, corpus):
    """(how many of the words in `written` are words of `corpus`, how many words it has). A
    word is a run of letters, compared without case; the last one is dropped when the text
    stops in the middle of it."""
    vocabulary = {w.lower() for w in re.findall(r"[A-Za-z]+", corpus)}
    words = re.findall(r"[A-Za-z]+", written)
    if words and written[-1].isalpha():
        words = words[:-1]
    return sum(w.lower() in vocabulary for w in words), len(words)


def estimate_loss(model, data, block_size, batches=8, seed=123):
    """Mean loss over a few fixed random batches, in eval mode and without a graph."""
    g = Generator().manual_seed(seed)
    model.eval()
    with tinytorch.no_grad():
        losses = [model(*get_batch(data, block_size, BATCH, g))[1].item() for _ in range(batches)]
    model.train()
    return float(np.mean(losses))


def report(name, result, met, plot):
    """Print the result against the target, say where the plot is, and leave a record for tito."""
    print(f"target: {TARGET}")
    print(f"result: {result}  {'✓ target met' if met else '✗ target missed'}")
    print(f"plot:   {plot}")
    (OUT / f"{name}.json").write_text(json.dumps({"result": result, "met": met, "plot": str(plot)}))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

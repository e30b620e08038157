"""Shared fixtures for module 10: the corpus, a tokenizer trained on it once per session, and
slow, obviously-correct reference versions of BPE training and encoding to compare against.

The references are written independently of the package: pairs are merged with str.replace
(left to right, non-overlapping) on strings whose characters stand for token ids, and the
pair counts are recomputed from scratch after every merge.
"""
import re
from collections import Counter

import pytest

from tinytorch.data import load_text
from tinytorch.text import BPETokenizer

EOT = "<|endoftext|>"
_BASE = 0x4E00  # ids are written as the characters U+4E00 + id (no surrogates below ~20,000 ids)


def _replace(seq, pair, new_id):
    s = "".join(chr(_BASE + i) for i in seq)
    s = s.replace(chr(_BASE + pair[0]) + chr(_BASE + pair[1]), chr(_BASE + new_id))
    return [ord(c) - _BASE for c in s]


def reference_chunks(text, pattern, specials=()):
    pieces = [text]
    if specials:
        alternation = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
        pieces = re.split("(" + alternation + ")", text)[::2]
    chunks = []
    for piece in pieces:
        if pattern is None:
            chunks += [piece] if piece else []
        else:
            chunks += re.findall(pattern, piece)
    return chunks


def reference_train(text, vocab_size, pattern, specials=()):
    """The merges (a list of pairs, in order): recount all pairs after every merge; the most
    frequent pair wins, ties go to the smallest (a, b); stop when no pair occurs twice."""
    seqs = [list(c.encode("utf-8")) for c in reference_chunks(text, pattern, specials)]
    merges = []
    while 256 + len(merges) + len(specials) < vocab_size:
        counts = Counter()
        for s in seqs:
            counts.update(zip(s, s[1:]))
        if not counts:
            break
        best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        if counts[best] < 2:
            break
        merges.append(best)
        seqs = [_replace(s, best, 255 + len(merges)) for s in seqs]
    return merges


def reference_encode(merges, text, pattern):
    """Apply every merge, in the order learned, to every chunk (no special tokens)."""
    ids = []
    for chunk in reference_chunks(text, pattern):
        seq = list(chunk.encode("utf-8"))
        for rank, pair in enumerate(merges):
            if len(seq) < 2:
                break
            seq = _replace(seq, pair, 256 + rank)
        ids += seq
    return ids


@pytest.fixture(scope="session")
def fables():
    return load_text("fables")


@pytest.fixture(scope="session")
def fables_bpe(fables):
    """A 512-id tokenizer trained on the fables, with <|endoftext|> (trained once)."""
    return BPETokenizer().train(fables, 512, special_tokens=[EOT])


@pytest.fixture(scope="session")
def reference():
    return {"train": reference_train, "encode": reference_encode, "chunks": reference_chunks}

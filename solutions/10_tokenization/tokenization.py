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
# # Module 10 — Tokenization: from text to integers and back
#
# A neural network computes with numbers, but language arrives as text. Before a language
# model can read a single word, something has to cut the text into pieces, **tokens**, and
# give every piece an integer **id**: that is a **tokenizer**. It looks like plumbing, yet
# it decides what the model can see (can it spell? count letters? read Chinese or emoji?),
# how long its sequences are, and how big its first and last layers must be. In this module
# you build `tinytorch.text`: a character tokenizer, a **byte-level byte-pair-encoding
# (BPE)** tokenizer of the kind GPT-2 introduced, and the helpers that turn a text into the
# training batches of the small GPT you will train in module 13.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain the trade-off between **characters, words and subwords**: a small vocabulary
#   means long sequences, a large one means big embedding tables and rare, badly-trained
#   tokens;
# - explain **Unicode code points and UTF-8 bytes**, and why starting from the 256 byte
#   values makes a tokenizer that can encode *any* text with no "unknown" token;
# - write the **BPE training loop**: count adjacent pairs, merge the most frequent one into
#   a new token, repeat, with a deterministic tie-break, counting each distinct word once
#   (and, if you like, updating the counts incrementally so that training takes well under
#   a few seconds);
# - **encode** new text by replaying the learned merges in order, **decode** ids back to
#   exactly the original text, keep **special tokens** such as `<|endoftext|>` whole, and
#   **save/load** a tokenizer as plain JSON;
# - measure **compression** (characters per token) against vocabulary size, and reason
#   about its costs: embedding memory ($V \times d$) and attention time ($O(T^2)$).
#
# ## Prerequisites
#
# Module 01 (Tensor, int64), module 05 (`load_text`, `Generator`). Python `str`, `bytes`,
# `dict` and `collections.Counter`; a little `re` (regular expressions) is explained where
# it is used. No autograd: a tokenizer has no parameters to learn by gradient descent.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/text/tokenizers.py` when you run
# `tito export 10` (or `tito test module 10`); `tinytorch.text` re-exports its names. Cells
# with `# YOUR CODE HERE` are yours; the **check** cell after each one prints a ✓ or says
# what is wrong. The provided code is part of the lesson: read it.

# %%
#| default_exp text.tokenizers

# %% [markdown]
# ## 1. Why tokenize, and into what?
#
# A language model predicts the next token from the previous ones. So we must decide what
# a token *is*. Three natural choices:
#
# | unit | vocabulary $V$ | sequence length $T$ | weakness |
# |---|---|---|---|
# | **characters** | tiny (~100 for English) | long: one token per character | the model spends its capacity (and attention) spelling |
# | **words** | huge (every word form: *fox, foxes, Fox, fox.*) | short | a word never seen in training is **unknown** (`<unk>`), and rare words get too few examples to learn |
# | **subwords** | chosen, e.g. 1k-100k | in between | frequent words are one token, rare words are spelled from pieces |
#
# Subwords get the best of both: common words like `the` become a single token, while a
# rare word (or a typo, or a name) is still representable as a few smaller pieces, so
# nothing is ever unknown. **Byte-pair encoding** learns these pieces from data.
#
# The two quantities that matter are $V$ and $T$. The first and the last layer of a
# language model are tables with one row per token ($V \times d$ numbers each), and the
# cost of attention grows like $T^2$ (module 12). A tokenizer trades one against the other.
#
# Let us measure the first two options on the corpus the course ships (module 05): how
# many tokens, how big a vocabulary, and, for words, how many words of the *last* fifth of
# the text never occur in the first four fifths (those would be `<unk>` for a word model
# built on the first part).

# %%
import json
import re
import sys
import tempfile
import textwrap
import time
import unicodedata
from collections import Counter
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from tinytorch.data import Generator, load_text

corpus = load_text("fables")
_cut = int(len(corpus) * 0.8)
_words = re.findall(r"\w+|[^\w\s]", corpus)
_train_words = set(re.findall(r"\w+|[^\w\s]", corpus[:_cut]))
_test_words = re.findall(r"\w+|[^\w\s]", corpus[_cut:])
_unseen = sum(w not in _train_words for w in _test_words)
print(f"the fables: {len(corpus):,} characters, {len(corpus.encode('utf-8')):,} bytes\n")
print(f"characters: V = {len(set(corpus)):>5,}   T = {len(corpus):>6,} tokens")
print(f"words:      V = {len(set(_words)):>5,}   T = {len(_words):>6,} tokens (words and punctuation marks)")
print(f"words of the last 20% never seen in the first 80%: {_unseen:,} of {len(_test_words):,} "
      f"({_unseen / len(_test_words):.1%}) -> <unk> for a word-level model")

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# Characters give a vocabulary of a few dozen but several times more tokens than words;
# words give short sequences but thousands of vocabulary entries, and even on this small,
# simple text a noticeable fraction of the held-out words are new. Real text (names, numbers,
# typos, other languages) is far worse. Subwords sit in between: we will pick $V$ and let
# the data decide the pieces.
#
# ## 2. The simplest tokenizer: characters
#
# A **character tokenizer** gives every distinct character of a training text an id: sort
# the characters by code point and number them `0, 1, 2, ...`. Encoding maps each character
# to its id; decoding maps ids back and joins. Two details make it a real tokenizer:
#
# - **Special tokens**: strings such as `<|endoftext|>` that mark structure (the end of a
#   document, padding, a start-of-sequence marker). They are not text the model should
#   spell out; each one gets **one id of its own**, after the characters, and `encode`
#   recognises the whole string and emits that single id.
# - **Unknown characters**: a character that was not in the training text has no id. We
#   make this *explicit*: by default `encode` raises a `ValueError` that names the
#   character; or, if you construct the tokenizer with `unk_token="<unk>"`, unknown
#   characters map to that token's id (and the round trip is then lossy, by design).
#
# Which special tokens may `encode` recognise? A tokenizer that turns *any* occurrence of
# `<|endoftext|>` in user input into the real end-of-text token can be tricked (a user types
# the marker and ends the document early). So `encode(text, allowed_special=...)` takes
#
# - `"all"` (our default): every registered special token is recognised;
# - `"none"`: none is; their strings are encoded as ordinary text;
# - a set of special-token strings: only those (each must be registered: a typo raises).
#
# OpenAI's `tiktoken` makes the safer choice the default (a special string in the text is
# an *error* unless you allow it); we choose convenience, and the round trip is exact either
# way. Small provided helpers do the bookkeeping: `split_on_special` cuts a text at the
# special-token strings, `_allowed_specials` turns the argument into a set,
# `_check_chars` / `_check_special_tokens` reject malformed alphabets with a clear error,
# and `_CharTokenizerBase` gives the tokenizer its `vocab_size`, `save`, `load` and `repr`.

# %%
#| export
"""Tokenizers (module 10): a character tokenizer and a byte-level BPE tokenizer, plus the
helpers that turn a corpus into language-model training batches.

Generated from modules/10_tokenization/tokenization.ipynb; `tinytorch.text` re-exports it.
"""
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np

from tinytorch._tensor import Tensor, int64
from tinytorch.random import numpy_generator

__all__ = [
    "CharTokenizer", "BPETokenizer", "SPLIT_PATTERN", "pretokenize", "split_on_special",
    "get_pair_counts", "merge_pair", "best_pair", "learn_merges", "build_vocab", "encode_chunk",
    "encode_corpus", "get_batch",
]


def split_on_special(text, special_tokens):
    """Cut `text` at every occurrence of the given special-token strings.

    Returns a list of odd length: [text, special, text, special, ..., text]. Even positions
    are ordinary text (possibly ""), odd positions are special tokens. When two special
    tokens overlap, the longer one wins.
    """
    if not special_tokens:
        return [text]
    alternatives = sorted(special_tokens, key=len, reverse=True)
    return re.split("(" + "|".join(map(re.escape, alternatives)) + ")", text)


def _check_special_tokens(special_tokens):
    """The special tokens as a list of distinct non-empty strings (or a clear error)."""
    if isinstance(special_tokens, str):
        special_tokens = [special_tokens]
    tokens = list(special_tokens)
    for tok in tokens:
        if not isinstance(tok, str) or not tok:
            raise ValueError(f"special tokens must be non-empty strings, got {tok!r}")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"special tokens must be distinct, got {tokens}")
    return tokens


# %%
#| export
def _check_chars(chars):
    """The alphabet as a list of distinct single characters (or a ValueError naming the offender)."""
    chars = list(chars)
    for ch in chars:
        if not isinstance(ch, str) or len(ch) != 1:
            raise ValueError(f"CharTokenizer needs single characters, got {ch!r}")
    if len(set(chars)) != len(chars):
        dupes = sorted({ch for ch in chars if chars.count(ch) > 1})
        raise ValueError(f"characters must be distinct; repeated: {dupes}")
    return chars


def _allowed_specials(allowed_special, special_tokens):
    """The set of special-token strings `encode` may recognise: "all", "none" or a set."""
    if isinstance(allowed_special, str):
        if allowed_special == "all":
            return set(special_tokens)
        if allowed_special == "none":
            return set()
        allowed_special = {allowed_special}
    allowed = set(allowed_special)
    unknown = allowed - set(special_tokens)
    if unknown:
        raise ValueError(f"unknown special token(s) {sorted(unknown)}; this tokenizer's special "
                         f"tokens are {sorted(special_tokens) or 'none'}")
    return allowed


def _as_id_list(ids):
    """Token ids (list, tuple, numpy array or 1-D Tensor) as a list of Python ints."""
    if isinstance(ids, (Tensor, np.ndarray)):
        ids = ids.tolist()
    out = []
    for i in ids:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"token ids must be integers, got {i!r} of type {type(i).__name__}")
        out.append(int(i))
    return out


class _CharTokenizerBase:
    """The plumbing of CharTokenizer (size, file, repr); the ids are yours, in the class below."""

    @property
    def vocab_size(self):
        """Number of ids: characters plus special tokens."""
        return len(self.chars) + len(self.special_tokens)

    def save(self, path):
        """Write the tokenizer as JSON (characters and special tokens)."""
        data = {"format": "tinytorch-char-tokenizer", "version": 1, "chars": "".join(self.chars),
                "special_tokens": list(self.special_tokens), "unk_token": self.unk_token}
        Path(path).write_text(json.dumps(data, ensure_ascii=True, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path):
        """Read a tokenizer written by save()."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != "tinytorch-char-tokenizer":
            raise ValueError(f"{path} is not a CharTokenizer file written by CharTokenizer.save")
        return cls(data["chars"], data["special_tokens"], data["unk_token"])

    def __repr__(self):
        return f"CharTokenizer(vocab_size={self.vocab_size}, special_tokens={list(self.special_tokens)})"


# %% [markdown]
# Now the tokenizer itself. Its state is two lookup tables, one per direction, and the
# question it must answer is *which id does each string get*. The rule we fix (the tests
# and module 13 rely on it): the characters get the ids `0 .. n-1` in the order given
# (`from_text` gives them sorted by code point, so the same text always gives the same
# ids), the special tokens get the next ids in the order given, and `unk_token`, if it is
# not already one of the special tokens, is appended as the last special token.
#
# <details><summary>Hint 1</summary>
#
# Why sort in `from_text`? A `set` of characters has no reliable order (it can change from
# one Python process to the next); a tokenizer whose ids change between runs would make a
# saved model useless.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `decode` must turn *every* id back into its string, special tokens included, so the
# id-to-string table holds both kinds; the string-to-id table for ordinary text needs only
# the characters (special tokens are recognised before characters are looked at).
# </details>
#
# <details><summary>Hint 3</summary>
#
# In `encode`, `split_on_special` with the allowed set gives you pieces that alternate:
# ordinary text, a special token, ordinary text, ... Only the ordinary pieces are read
# character by character.
# </details>
#
# <details><summary>The approach</summary>
#
# Two tables that are each other's inverse, built once, make encode and decode lookups.
# The order of the ids is part of the contract (it decides every id a model sees), so
# decide it before writing anything, and decide where the unknown token comes from when
# the caller did not list it. A piece of text is either special or ordinary, and the two
# are encoded by different rules; a character that has no id is either the unknown token
# or an error that names it, never silently dropped.
# </details>

# %% nbgrader={"grade": false, "grade_id": "char-tokenizer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class CharTokenizer(_CharTokenizerBase):
    """One token per character, plus optional special tokens.

    Ids: the characters in the order given (from_text: sorted by code point) are 0..n-1; the
    special tokens follow, in order, and `unk_token` (if any) is the last special token.
    """

    def __init__(self, chars, special_tokens=(), unk_token=None):
        """chars: distinct single characters (e.g. a str), in id order. Sets self.chars (list),
        self.special_tokens ({string: id}), self.unk_token, and the tables self._stoi
        {char: id} and self._itos {id: string} (characters and special tokens).
        ValueError (from the provided checkers) for a malformed alphabet or special tokens."""
        # Idea: ids are positions: first the characters, then the special tokens.
        ### BEGIN SOLUTION
        chars = _check_chars(chars)
        specials = _check_special_tokens(special_tokens)
        if unk_token is not None and unk_token not in specials:
            specials = specials + _check_special_tokens([unk_token])
        self.chars, self.unk_token = chars, unk_token
        self.special_tokens = {tok: len(chars) + k for k, tok in enumerate(specials)}
        self._stoi = {ch: i for i, ch in enumerate(chars)}
        self._itos = dict(enumerate(chars))
        self._itos.update({i: tok for tok, i in self.special_tokens.items()})
        ### END SOLUTION

    @classmethod
    def from_text(cls, text, special_tokens=(), unk_token=None):
        """A tokenizer whose alphabet is the distinct characters of `text` (a str; TypeError
        otherwise), sorted by code point."""
        # Idea: the same text must always give the same ids.
        ### BEGIN SOLUTION
        if not isinstance(text, str):
            raise TypeError(f"from_text needs a str, got {type(text).__name__}")
        return cls(sorted(set(text)), special_tokens=special_tokens, unk_token=unk_token)
        ### END SOLUTION

    def encode(self, text, allowed_special="all"):
        """The ids of the str `text` (a list of ints); each allowed special token is one id
        (`allowed_special`: "all", "none" or a set, see _allowed_specials).

        A character outside the alphabet maps to unk_token's id when there is one; otherwise
        ValueError whose message names the character (its repr and its U+XXXX code point)."""
        # Idea: recognise special tokens first; everything else is one id per character.
        ### BEGIN SOLUTION
        allowed = _allowed_specials(allowed_special, self.special_tokens)
        unk = self.special_tokens.get(self.unk_token)
        ids = []
        for k, piece in enumerate(split_on_special(text, allowed)):
            if k % 2:
                ids.append(self.special_tokens[piece])
                continue
            for ch in piece:
                i = self._stoi.get(ch, unk)
                if i is None:
                    raise ValueError(f"character {ch!r} (U+{ord(ch):04X}) is not in this tokenizer's "
                                     f"alphabet; build it from a text that contains it, or pass unk_token")
                ids.append(i)
        return ids
        ### END SOLUTION

    def decode(self, ids):
        """The text of a sequence of ids (list, array or Tensor: see _as_id_list); an id
        outside 0..vocab_size-1 is a ValueError that says which ids exist."""
        # Idea: every id, special or not, has exactly one string.
        ### BEGIN SOLUTION
        pieces = []
        for i in _as_id_list(ids):
            if i not in self._itos:
                raise ValueError(f"token id {i} is not in this tokenizer's vocabulary "
                                 f"(ids 0..{self.vocab_size - 1})")
            pieces.append(self._itos[i])
        return "".join(pieces)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-char-tokenizer", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, assert_raises, check

_ct = CharTokenizer.from_text("hello world", special_tokens=["<|endoftext|>"])
assert_equal(_ct.chars, [" ", "d", "e", "h", "l", "o", "r", "w"], "from_text: the distinct characters, sorted")
assert_equal(_ct.vocab_size, 8 + 1, "vocab_size: 8 characters + 1 special token")
assert_equal(_ct.encode("hello"), [3, 2, 4, 4, 5], "encode('hello'): each character's position in the alphabet")
assert_equal(_ct.special_tokens, {"<|endoftext|>": 8}, "special tokens take the ids after the characters")
_ids = _ct.encode("hello<|endoftext|>world")
assert_equal(_ids, [3, 2, 4, 4, 5, 8, 7, 5, 6, 4, 1], "a special token in the text is one id")
assert_equal(_ct.decode(_ids), "hello<|endoftext|>world", "decode(encode(text))")
_cm = CharTokenizer.from_text("ab<|endoftext|>", special_tokens=["<|endoftext|>"])
assert_equal(len(_cm.encode("a<|endoftext|>", allowed_special="none")), 14,
             "allowed_special='none': the marker is spelled out, one id per character")
_err = assert_raises(ValueError, _ct.encode, "help", match="'p'", what="encode of the unknown character 'p'")
check("U+0070" in str(_err), "the error names the code point of 'p'", got=str(_err), expected="... U+0070 ...")
_cu = CharTokenizer.from_text("abc", unk_token="<unk>")
assert_equal(_cu.special_tokens, {"<unk>": 3}, "unk_token is appended as the last special token")
assert_equal(_cu.encode("abz"), [0, 1, 3], "an unknown character maps to the unk id")
assert_equal(_cu.decode([0, 3]), "a<unk>", "decode of the unk id")
assert_equal(CharTokenizer("zyx").encode("xyz"), [2, 1, 0], "the constructor keeps the order it is given")
assert_raises(ValueError, _ct.decode, [0, 9], what="decode of id 9 (ids are 0..8)")
assert_raises(ValueError, _ct.decode, [-1], what="decode of id -1")
assert_raises(ValueError, CharTokenizer, "aba", what="CharTokenizer('aba'): a repeated character")
_fab = CharTokenizer.from_text(corpus)
assert_equal(_fab.decode(_fab.encode(corpus)) == corpus, True, "round trip on the whole corpus")
print(f"✓ CharTokenizer: the fables use {_fab.vocab_size} characters; round trip exact")

# %% [markdown]
# The character tokenizer is exact on its own alphabet and hopeless outside it: one `é` or
# one emoji that was not in the training text, and it fails (or says `<unk>`). To fix that
# for good we go below characters, to bytes.
#
# ## 3. Code points and bytes: UTF-8
#
# Unicode gives every character a number, its **code point**: `A` is U+0041 (65), `é` is
# U+00E9 (233), `€` is U+20AC (8364), 😀 is U+1F600 (128512). There are about 150,000
# assigned characters and room for 1.1 million, far too many for a vocabulary. But
# computers store text as **bytes**, and the universal encoding, **UTF-8**, writes every
# code point as 1 to 4 bytes:
#
# | code points | bytes | bit pattern |
# |---|---|---|
# | U+0000..U+007F (ASCII) | 1 | `0xxxxxxx` |
# | U+0080..U+07FF | 2 | `110xxxxx 10xxxxxx` |
# | U+0800..U+FFFF | 3 | `1110xxxx 10xxxxxx 10xxxxxx` |
# | U+10000..U+10FFFF | 4 | `11110xxx 10xxxxxx 10xxxxxx 10xxxxxx` |
#
# The leading bits say how long a character is, and continuation bytes always start with
# `10`, so a decoder can never confuse the middle of a character with the start of one.
# ASCII text is unchanged (one byte per character), which is why English costs little.
#
# The key idea of a **byte-level** tokenizer: start from the **256 possible byte values** as
# the base vocabulary. *Every* string, in every language, with every emoji, is a sequence of
# bytes, so every string can be encoded: there is no unknown token, ever. Python makes the
# step explicit: `text.encode("utf-8")` gives `bytes`, `bytes.decode("utf-8")` gives the
# text back. The picture shows a string's characters above the bytes they become (by name
# where the plotting font has no glyph for them: 中, 😀 and the combining accent).

# %%
def draw_utf8(ax, text):
    """Each character (code point) above its UTF-8 bytes, one box per byte."""
    x = 0
    for ch in text:
        data = ch.encode("utf-8")
        w = len(data)
        safe = ord(ch) < 0x2500 and unicodedata.category(ch)[0] != "M"  # glyphs the default font has
        glyph = "␣" if ch == " " else repr(ch)[1:-1]
        # no glyph in the default font (CJK, emoji, a combining mark alone): the character's name instead
        name = unicodedata.name(ch, "?").lower().replace("cjk ", "CJK ").replace(" ideograph-", "\nideograph ")
        label = (glyph if safe else textwrap.fill(name, 12)) + f"\nU+{ord(ch):04X}"
        ax.add_patch(Rectangle((x, 1.1), w, 1, facecolor=plt.cm.Pastel1(w - 1), edgecolor="black"))
        ax.text(x + w / 2, 1.6, label, ha="center", va="center", fontsize=8)
        for k, b in enumerate(data):
            ax.add_patch(Rectangle((x + k, 0), 1, 0.9, facecolor="white", edgecolor="black"))
            ax.text(x + k + 0.5, 0.45, f"{b:02X}\n{b}", ha="center", va="center", fontsize=7.5)
        x += w
    ax.set_xlim(-0.2, x + 0.2)
    ax.set_ylim(-0.1, 2.2)
    ax.axis("off")


_utf8_demo = "Aé€ 中😀e\u0301"
fig, ax = plt.subplots(figsize=(11, 2.2))
draw_utf8(ax, _utf8_demo)
ax.set_title(f"{len(_utf8_demo)} characters (code points) -> {len(_utf8_demo.encode('utf-8'))} UTF-8 bytes "
             f"(hex and decimal); colour = bytes per character", fontsize=10)
plt.show()
print(list(_utf8_demo.encode("utf-8")))

# %% [markdown]
# Note the last two boxes: `e` followed by U+0301, a *combining* acute accent. It looks
# like `é` on screen but is two code points (and three bytes), different from the single
# code point U+00E9. A tokenizer must not "fix" that: the round trip has to give back
# exactly the code points it got.
#
# Bytes alone would be a poor tokenizer: even longer sequences than characters. BPE
# starts from them and learns to merge frequent byte sequences into single tokens.
#
# ## 4. Byte-pair encoding, step by step
#
# BPE (Gage, 1994, a compression algorithm; Sennrich et al., 2016, for translation; GPT-2,
# 2019, on bytes) builds a vocabulary greedily:
#
# 1. Write the training text as a sequence of ids, the bytes `0..255`.
# 2. Count every **adjacent pair** of ids.
# 3. Take the **most frequent pair** $(a, b)$, give it a new id $n$ (256, then 257, ...),
#    and record the **merge** $(a, b) \to n$. Replace every occurrence of $a, b$ in the
#    sequence by $n$ (left to right, non-overlapping: in `a a a`, the pair `a a` occurs
#    once, leaving `n a`).
# 4. Repeat from 2 until the vocabulary has the size you asked for.
#
# Each merge shortens the sequence by the pair's count, so the most frequent pair is the
# best single step for compression. The token $n$ stands for the bytes of $a$ followed by
# the bytes of $b$: tokens grow from bytes into syllables, words and common word groups.
#
# **Ties.** When two pairs are equally frequent the choice must not depend on dictionary
# order or chance, or two trainings of the same text could disagree. Our rule: **the
# highest count wins; among equal counts, the smallest pair `(a, b)` (compare `a` first,
# then `b`)**. We also **stop early** when no pair occurs at least twice: merging a pair
# seen once saves a single token and wastes a vocabulary entry.
#
# Three small functions do the work, and each is yours: `get_pair_counts` counts adjacent
# pairs, `merge_pair` replaces one pair, `best_pair` chooses the pair to merge next.
#
# **Counting pairs.** `get_pair_counts(ids, counts=None, weight=1)` may add into an
# existing dict, and each pair it sees adds `weight`: training will count the pairs of many
# separate words into one dict, and a word that occurs 40 times in the text counts 40 times
# without being stored 40 times.
#
# <details><summary>Hint 1</summary>
#
# A sequence of n ids has n - 1 adjacent pairs, and zero when n < 2. Which two sequences,
# offset by one, line up every id with its right neighbour?
# </details>
#
# <details><summary>The approach</summary>
#
# A sequence of n ids has n − 1 neighbour pairs. The dict may already hold counts from
# other sequences: the contract asks you to add to it, not to replace it, and to hand the
# same object back, which is what lets a caller count a whole corpus.
# </details>

# %% nbgrader={"grade": false, "grade_id": "pair-counts", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def get_pair_counts(ids, counts=None, weight=1):
    """Count adjacent pairs of `ids` (any sequence of ints): {(ids[i], ids[i+1]): count}.

    With `counts` given, add into that dict and return it (the same object); each
    occurrence of a pair adds `weight`. Pairs never wrap around or reach outside `ids`.
    """
    # Idea: a pair is an id and its right-hand neighbour.
    ### BEGIN SOLUTION
    counts = {} if counts is None else counts
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + weight
    return counts
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-pair-counts", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, check

assert_equal(get_pair_counts([1, 2, 3, 1, 2]), {(1, 2): 2, (2, 3): 1, (3, 1): 1}, "pairs of [1, 2, 3, 1, 2]")
assert_equal(get_pair_counts((7, 7, 7)), {(7, 7): 2}, "[7, 7, 7] holds the pair (7, 7) twice (counting overlaps)")
assert_equal(get_pair_counts([5]), {}, "one id: no pair")
assert_equal(get_pair_counts([]), {}, "no ids: no pair")
_c = get_pair_counts([1, 2], weight=3)
assert_equal(_c, {(1, 2): 3}, "weight=3: the pair counts three times")
_out = get_pair_counts([1, 2, 2], _c, weight=2)
check(_out is _c, "with counts given, add into that dict and return it", got=type(_out).__name__, expected="the same dict")
assert_equal(_c, {(1, 2): 5, (2, 2): 2}, "3 + 2 for (1, 2), and (2, 2) twice from the second call")
_empty = {}
check(get_pair_counts([4, 5], _empty) is _empty and _empty == {(4, 5): 1},
      "an empty dict given as counts is filled and returned (empty is not the same as None)", got=_empty)
print(f"✓ get_pair_counts: {_c}")

# %% [markdown]
# **Merging a pair.** `merge_pair(ids, pair, new_id)` returns a new list in which every
# occurrence of `pair` is replaced by `new_id`, scanning **left to right** and never
# reusing an id that is already part of a merge: in `7 7 7` the pair `(7, 7)` is merged
# once, giving `new 7`, not twice. (The counts above still say `(7, 7)` occurs twice: a
# count may overestimate what a merge can take, and that is fine.)
#
# <details><summary>Hint 1</summary>
#
# A `for` loop over positions cannot skip ahead; a position you advance yourself can.
# </details>
#
# <details><summary>Hint 2</summary>
#
# After a match, where does the next candidate pair begin? After no match?
# Careful with the last id: it has no right-hand neighbour.
# </details>
#
# <details><summary>The approach</summary>
#
# Try `merge_pair([5, 5, 5], (5, 5), 9)` by hand: the answer is `[9, 5]`, not `[9, 9]`.
# What must the walk do after a match so that an id is never used by two merges, and
# what does the caller's list look like afterwards?
# </details>

# %% nbgrader={"grade": false, "grade_id": "merge-pair", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def merge_pair(ids, pair, new_id):
    """A new list: `ids` with every occurrence of `pair` (left to right, non-overlapping)
    replaced by `new_id`. `ids` itself is not modified."""
    # Idea: a merged pair uses up both of its ids.
    ### BEGIN SOLUTION
    a, b = pair
    out, i, n = [], 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-merge-pair", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal

assert_equal(merge_pair([1, 2, 3, 1, 2], (1, 2), 9), [9, 3, 9], "both (1, 2) replaced")
assert_equal(merge_pair([7, 7, 7], (7, 7), 9), [9, 7], "[7, 7, 7]: left to right, non-overlapping")
assert_equal(merge_pair([7, 7, 7, 7, 7], (7, 7), 9), [9, 9, 7], "[7] * 5: two merges and one 7 left")
assert_equal(merge_pair([1, 2, 1, 2, 1], (1, 2), 5), [5, 5, 1], "a pair followed by its first id")
assert_equal(merge_pair([2, 1], (1, 2), 9), [2, 1], "the pair (1, 2) is ordered: (2, 1) is not it")
assert_equal(merge_pair([1], (1, 2), 9), [1], "a last id alone is kept")
assert_equal(merge_pair([], (1, 2), 9), [], "nothing to merge")
_ids = [3, 1]
assert_equal(merge_pair(_ids, (3, 1), 9), [9], "the whole list is one pair")
assert_equal(_ids, [3, 1], "merge_pair must return a new list and leave its input alone")
print("✓ merge_pair: [7, 7, 7] ->", merge_pair([7, 7, 7], (7, 7), 9))

# %% [markdown]
# **Choosing the pair.** `best_pair(counts)` returns the pair to merge next: the highest
# count wins; among equal counts, the smallest pair (compare `a` first, then `b`). It
# returns `None` when there is nothing worth merging: no pairs at all, or no pair that
# occurs at least twice.
#
# <details><summary>Hint 1</summary>
#
# `max` and `min` take a `key`. What does `max` do when several items have the same key?
# Is that an order you chose?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Tuples compare element by element. Can one key express "higher count first, then
# smaller pair", all in one `max`?
# </details>
#
# <details><summary>The approach</summary>
#
# Find the pair with the highest count using a key that also ranks equal counts by the
# pair itself, in the direction that makes the smallest pair win. Then apply the stopping
# rule to the winner's count. Never rely on the dict's insertion order.
# </details>

# %% nbgrader={"grade": false, "grade_id": "best-pair", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def best_pair(counts):
    """The pair to merge next from {pair: count}: the highest count; ties go to the smallest
    pair (a, b). None when `counts` is empty or no pair occurs at least twice."""
    # Idea: the choice must not depend on the order in which the dict was filled.
    ### BEGIN SOLUTION
    if not counts:
        return None
    best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
    return best if counts[best] >= 2 else None
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-best-pair", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal

assert_equal(best_pair({(5, 6): 3, (1, 2): 2}), (5, 6), "the highest count wins")
assert_equal(best_pair({(5, 6): 2, (1, 2): 2, (0, 9): 1}), (1, 2), "a tie at 2: the smaller pair (1, 2)")
assert_equal(best_pair({(2, 9): 4, (2, 1): 4}), (2, 1), "a tie with the same first id: compare the second")
assert_equal(best_pair({(1, 2): 4, (2, 9): 4}), (1, 2), "the same tie, filled in the other order")
assert_equal(best_pair({(3, 4): 1, (0, 1): 1}), None, "no pair occurs twice: nothing worth merging")
assert_equal(best_pair({}), None, "no pairs at all")
print("✓ best_pair:", best_pair({(5, 6): 2, (1, 2): 2, (0, 9): 1}))

# %% [markdown]
# Now one step of BPE by hand on the classic example `aaabdaaabac` (bytes `a`=97, `b`=98,
# `c`=99, `d`=100), with your three functions. Before you run it, predict: which pair
# wins, how often does it occur, and how many tokens are left after the merge?

# %%
_ids = list(b"aaabdaaabac")
_counts = get_pair_counts(_ids)
_best = best_pair(_counts)
print("counts:", {bytes(p).decode(): c for p, c in _counts.items()})
print("best:", bytes(_best).decode(), "->", merge_pair(_ids, _best, 256))

# %% [markdown]
# Repeating that step is BPE training; section 6 turns it into a loop. On real text the loop
# needs two refinements that every practical tokenizer has.
#
# ## 5. Two refinements: pre-tokenisation and counting once per word
#
# **Pre-tokenisation.** Running BPE on the raw byte stream lets merges cross word
# boundaries: `d t` from "an*d t*he" could become a token, and the same word gets different
# tokens depending on its neighbours (`dog.`, `dog,`, `dog!`). GPT-2 therefore first splits
# the text into **chunks** with a regular expression and never merges across chunks. Our
# pattern (`SPLIT_PATTERN`, in the spirit of GPT-2's, written with Python's standard `re`):
#
# - `'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`: English contractions are their own chunks;
# - ` ?[^\W\d_]+`: a run of letters, with at most one leading space (so ` fox` is one
#   chunk: the space belongs to the word after it);
# - ` ?\d+`: a run of digits; ` ?(?:[^\s\w]|_)+`: a run of other symbols (punctuation,
#   emoji, combining marks);
# - `\s+(?!\S)` and `\s+`: whitespace (the last space before a word is left for the word).
#
# Every character is a letter, a digit, whitespace, or "other", so the chunks always
# concatenate back to the whole text: pre-tokenisation loses nothing. `BPETokenizer(pattern=None)`
# turns it off (the whole text is one chunk), which we compare below.
#
# **Counting once per word.** Pre-tokenisation has a second gift: the corpus has many
# thousands of chunks but far fewer *distinct* ones (` the` occurs hundreds of times: the
# cell below counts them). So training can count each distinct chunk once and **weight**
# its pairs by how often the chunk occurs, which is what `weight` in `get_pair_counts` is
# for. Pairs are counted *within* each chunk: the last byte of one chunk and the first byte
# of the next are never a pair.

# %%
#| export
SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""


def pretokenize(text, pattern=SPLIT_PATTERN):
    """Split `text` into the chunks that BPE merges within (never across).

    `pattern` is a regex (str or compiled) or None (no split: the whole text is one chunk).
    The chunks always concatenate back to `text`.
    """
    if pattern is None:
        return [text] if text else []
    return re.findall(pattern, text)


# %%
print(pretokenize("The fox's 12 grapes -- so sour!\n\n  Mañana 😀, e\u0301 x_y"))
_chunks = pretokenize(corpus)
assert "".join(_chunks) == corpus
print(f"the fables: {len(_chunks):,} chunks, {len(set(_chunks)):,} distinct; most common:",
      Counter(_chunks).most_common(8))

# %% [markdown]
# ## 6. The merge loop
#
# Training is a loop over the three functions of section 4, run on the distinct chunks of
# the text. `learn_merges(words, freqs, n_merges)` receives each distinct chunk as a list
# of byte ids (`words`) with the number of times it occurs (`freqs`), and returns the
# **merges**: a dict `{(a, b): new_id}` in the order learned, where merge number $r$ (its
# **rank**) creates id $256 + r$. It stops after `n_merges` merges, or earlier when
# `best_pair` finds nothing worth merging. It must give exactly the merges of the slow,
# obvious method (recount every pair of every word after every merge); the tests compare
# your merges with that method on random texts.
#
# <details><summary>Hint 1</summary>
#
# One step: count the pairs of all words (each word's pairs weighted by its frequency),
# choose the best pair, record it, and replace it in every word. Which of your functions
# does each of those four things?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The words are separate sequences. Never join them into one list before counting: that
# would invent pairs across chunk boundaries.
# </details>
#
# <details><summary>Hint 3 (speed, optional)</summary>
#
# Recounting everything after every merge is correct and takes seconds on the fables. It
# gets faster when you keep the counts from step to step and, next to them, for every pair
# the set of words that contain it: after a merge only those words change, so you take
# their old pairs out of the counts, merge them, and put their new pairs in. Can a pair
# whose count has dropped to zero ever be picked again? (If not, leaving it in costs only
# the time `best_pair` spends looking at it.)
# </details>
#
# <details><summary>The approach</summary>
#
# The three functions above are the loop's body; the loop decides when to stop (two
# reasons: enough merges, or nothing left worth merging) and which id a new token gets
# (the ids after the 256 bytes, in the order the merges are learned). The caller's words
# are the caller's: change a copy. Counting every pair again after each merge is correct
# and slow; only the words that held the winner change.
# </details>

# %% nbgrader={"grade": false, "grade_id": "learn-merges", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def learn_merges(words, freqs, n_merges):
    """BPE training on distinct chunks: {(a, b): new_id} in the order learned.

    words: lists of ids (one per distinct chunk); freqs: how often each occurs; at most
    n_merges merges, merge r creating id 256 + r, each chosen by best_pair from the pair
    counts of all words weighted by their frequencies; stops early when best_pair returns
    None. Pairs never cross from one word to the next. The inputs are not modified.
    """
    # Idea: count, choose, record, replace; repeat.
    ### BEGIN SOLUTION
    words = [list(word) for word in words]
    counts, where = {}, {}
    for w, (word, freq) in enumerate(zip(words, freqs)):
        get_pair_counts(word, counts, weight=freq)
        for pair in zip(word, word[1:]):
            where.setdefault(pair, set()).add(w)
    merges = {}
    while len(merges) < n_merges:
        best = best_pair(counts)
        if best is None:
            break
        new_id = 256 + len(merges)
        merges[best] = new_id
        for w in where.pop(best):
            word, freq = words[w], freqs[w]
            for pair in zip(word, word[1:]):  # take the word's old pairs out
                counts[pair] -= freq
                if counts[pair] == 0:
                    del counts[pair]
            word = words[w] = merge_pair(word, best, new_id)
            for pair in zip(word, word[1:]):  # and its new pairs in
                counts[pair] = counts.get(pair, 0) + freq
                where.setdefault(pair, set()).add(w)
    return merges
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-learn-merges", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal


# The 60 merges of the fables' first 4,000 characters, recorded from the reference solution
# (each is the top pair after the merges before it, recounted from scratch: slow, but sure).
# Pairs of ids; the i-th merge makes id 256 + i. 32 is the space, 101 "e", 104 "h", 116 "t".
_FABLE_MERGES = [
    (104, 101), (32, 116), (32, 97), (257, 256), (32, 119), (32, 115), (105, 110), (110, 100), (114, 101),
    (101, 100), (32, 104), (258, 263), (32, 102), (32, 98), (97, 115), (32, 256), (101, 114), (105, 115),
    (32, 111), (108, 108), (257, 111), (105, 116), (32, 108), (111, 114), (262, 103), (109, 101), (32, 99),
    (84, 256), (97, 116), (32, 100), (97, 99), (97, 100), (104, 111), (105, 275), (261, 116), (32, 34),
    (32, 110), (32, 101), (32, 112), (97, 110), (112, 112), (114, 111), (260, 270), (260, 277), (32, 103),
    (97, 114), (101, 110), (111, 110), (117, 116), (257, 104), (32, 262), (111, 119), (266, 273), (299, 104),
    (300, 114), (32, 109), (32, 114), (32, 283), (97, 108), (101, 115)]


_hand = learn_merges([list(b"aaabdaaabac")], [1], 10)
assert_equal(_hand, {(97, 97): 256, (97, 98): 257, (256, 257): 258},
             "aaabdaaabac: (a,a) x4, then the tie (a,b)/(aa,a) -> (a,b), then (aa,ab); then stop")
assert_equal(list(_hand), [(97, 97), (97, 98), (256, 257)], "merges kept in the order learned")
assert_equal(learn_merges([list(b"aaabdaaabac")], [1], 2), {(97, 97): 256, (97, 98): 257}, "n_merges=2: two merges")
assert_equal(learn_merges([[1, 2], [3, 4]], [1, 5], 5), {(3, 4): 256},
             "(3, 4) occurs 5 times (its word's frequency), (1, 2) once")
assert_equal(learn_merges([[1], [1], [1], [2, 1]], [1, 1, 1, 1], 5), {},
             "separate words: no pair crosses from one word to the next")
_words = [[1, 2], [1, 2, 3]]
learn_merges(_words, [2, 2], 3)
assert_equal(_words, [[1, 2], [1, 2, 3]], "learn_merges must not modify its inputs")
_chunks = Counter(pretokenize(corpus[:4000]))
_w, _f = [list(c.encode("utf-8")) for c in _chunks], list(_chunks.values())
_fast = learn_merges(_w, _f, 60)
assert_equal(list(_fast)[:8], _FABLE_MERGES[:8], "the first 8 merges on the fables' first 4,000 characters")
assert_equal(list(_fast), _FABLE_MERGES, "all 60 merges on the fables' first 4,000 characters")
assert_equal(list(_fast.values()), list(range(256, 316)), "the ids, 256 on, in the order learned")
print(f"✓ learn_merges: {len(_fast)} merges as recorded; the first: {list(_fast)[:3]}")

# %% [markdown]
# Your `learn_merges` on `aaabdaaabac`, one merge per line: the counts it chose from, the
# pairs that tied for the top, and the sequence after the merge. In step 2 two pairs tie
# with count 2, and the tie-break picks the smaller one. Eleven bytes become five tokens
# with three new vocabulary entries; then no pair occurs twice and training stops.

# %%
def show_bpe_steps(text, n_merges):
    ids = list(text.encode("utf-8"))
    merges = learn_merges([ids], [1], n_merges)
    names = {i: chr(i) for i in range(256)}
    print(f"start: {' '.join(names[i] for i in ids)}   ({len(ids)} tokens)")
    for step, ((a, b), new) in enumerate(merges.items()):
        counts = get_pair_counts(ids)
        ties = sorted(p for p in counts if counts[p] == counts[(a, b)])
        names[new] = "[" + names[a] + names[b] + "]"
        ids = merge_pair(ids, (a, b), new)
        print(f"step {step + 1}: counts {{{', '.join(f'{names[x]}{names[y]}:{c}' for (x, y), c in counts.items())}}}")
        print(f"        most frequent {[(names[x] + names[y]) for x, y in ties]} -> merge {(a, b)} as id {new} = "
              f"{names[new]}:  {' '.join(names[i] for i in ids)}   ({len(ids)} tokens)")
    if len(merges) < n_merges:
        print(f"no pair occurs twice: stop after {len(merges)} merges")


show_bpe_steps("aaabdaaabac", 5)

# %% [markdown]
# ## 7. The BPE tokenizer: vocabulary, encoding, decoding
#
# The state of a trained BPE tokenizer is small:
#
# - `merges`: the dict from `learn_merges`;
# - `vocab`: `{id: bytes}`, the bytes every id stands for: `bytes([i])` for `i < 256`, and
#   for each merge $(a, b) \to n$ the bytes of $a$ followed by the bytes of $b$. It is
#   *derived* from the merges, never stored separately;
# - `special_tokens`: `{string: id}`, ids after the merges;
# - `pattern`: the pre-tokenisation regex.
#
# **The vocabulary.** `build_vocab(merges)` derives `vocab` from the merges.
#
# <details><summary>Hint 1</summary>
#
# A merge may use a token that an earlier merge created. In which order must you visit the
# merges so that both halves are always known?
# </details>
#
# <details><summary>The approach</summary>
#
# A token's bytes are defined in terms of the bytes of the two tokens it merged, which
# must already be known when it is built: in which order must the merges be visited?
# </details>

# %% nbgrader={"grade": false, "grade_id": "build-vocab", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def build_vocab(merges):
    """{id: bytes} for the 256 byte ids and every merge of `merges` ({(a, b): new_id}, in
    rank order): id n of merge (a, b) -> n stands for the bytes of a, then those of b."""
    # Idea: a merged token is its two halves, written one after the other.
    ### BEGIN SOLUTION
    vocab = {i: bytes([i]) for i in range(256)}
    for (a, b), new_id in merges.items():
        vocab[new_id] = vocab[a] + vocab[b]
    return vocab
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-build-vocab", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal

_v = build_vocab({(97, 97): 256, (256, 98): 257, (32, 257): 258})
assert_equal(len(_v), 259, "256 bytes + 3 merges")
assert_equal([_v[0], _v[65], _v[255]], [b"\x00", b"A", b"\xff"], "ids below 256 are single bytes")
assert_equal([_v[256], _v[257], _v[258]], [b"aa", b"aab", b" aab"], "merged tokens: left half, then right half")
assert_equal(build_vocab({}), {i: bytes([i]) for i in range(256)}, "no merges: the 256 bytes")
print("✓ build_vocab: id 258 =", _v[258])

# %% [markdown]
# **Encoding** new text replays the training: pre-tokenise, turn each chunk into bytes,
# and apply the merges **in the order they were learned**, so that a chunk gets the tokens
# training would have given it. Design `encode_chunk` for one chunk. There is more than one
# correct design, and they differ in cost: a real tokenizer has 50,000 merges and most
# chunks are a handful of bytes, so a design whose work grows with the number of merges
# pays for every merge on every chunk. (Why not pick the most frequent pair, as training
# did? Frequencies belong to the training text; the order of the merges *is* the learned
# model.)
#
# <details><summary>Hint 1</summary>
#
# Why does the order matter? With merges `(1, 2) -> 256` then `(2, 3) -> 257`, the bytes
# `1 2 3` must become `256 3`: training merged `(1, 2)` first, so it never saw a `(2, 3)`
# that had a `1` in front.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Look only at the pairs the chunk has. Of those, which one would training have merged
# first? After merging it, the chunk has new pairs: ask again. When do you stop?
# </details>
#
# <details><summary>Hint 3</summary>
#
# A pair that is not a merge must never be chosen; give it a rank that loses against every
# real one.
# </details>
#
# <details><summary>The approach</summary>
#
# Encoding must reproduce training: training applied the merges in the order it learned
# them, so at each step the pair to merge is the one training would have merged first.
# When does no step remain? `merge_pair` does the rest.
# </details>

# %% nbgrader={"grade": false, "grade_id": "encode-chunk", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def encode_chunk(data, merges):
    """The ids of one chunk: `data` (bytes, or a list of byte ids) with the learned `merges`
    ({(a, b): new_id}; the smaller the new id, the earlier the merge) applied in the order
    learned, until no adjacent pair is a merge. Returns a new list of ints."""
    # Idea: the earliest merge that applies goes first.
    ### BEGIN SOLUTION
    ids = list(data)
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: merges.get(p, float("inf")))
        if pair not in merges:
            break
        ids = merge_pair(ids, pair, merges[pair])
    return ids
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-encode-chunk", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal

assert_equal(encode_chunk(b"aaabdaaabac", _hand), [258, 100, 258, 97, 99], "aaabdaaabac with its own merges")
assert_equal(encode_chunk([1, 2, 3], {(1, 2): 256, (2, 3): 257}), [256, 3], "(1, 2) was learned first: it wins")
assert_equal(encode_chunk([1, 2, 3], {(2, 3): 256, (1, 2): 257}), [1, 256], "(2, 3) was learned first: it wins")
assert_equal(encode_chunk([1, 2, 3, 4], {(3, 4): 256, (1, 2): 257, (257, 256): 258}), [258],
             "merges build on earlier merges")
assert_equal(encode_chunk(b"abc", {}), [97, 98, 99], "no merges: the bytes")
assert_equal(encode_chunk(b"", _hand), [], "an empty chunk")
print("✓ encode_chunk:", encode_chunk(b"aaabdaaabac", _hand))

# %% [markdown]
# **The class.** Now put it together. `vocab_size` counts all ids:
# $256 + \#\text{merges} + \#\text{special tokens}$, and `train(text, vocab_size,
# special_tokens)` learns `vocab_size - 256 - len(special_tokens)` merges (fewer when it
# stops early), so the size you ask for is the size you get. A fresh `BPETokenizer()` has
# no merges: it is a plain byte tokenizer with 256 ids. The provided base class holds the
# state (`pattern`, `merges`, `special_tokens`, the chunk cache `_cache`, and `vocab`, which
# `_build_vocab` derives with your `build_vocab`), `vocab_size`, and the file methods of
# section 9.

# %%
#| export
class _BPETokenizerBase:
    """The plumbing of BPETokenizer: its state, size, files and repr (the algorithm is yours,
    in the class below)."""

    def __init__(self, pattern=SPLIT_PATTERN):
        self.pattern = pattern
        self._regex = None if pattern is None else re.compile(pattern)
        self.merges = {}           # (a, b) -> new id, in the order learned
        self.special_tokens = {}   # str -> id
        self._cache = {}           # chunk str -> ids, filled by encode
        self._build_vocab()

    def _build_vocab(self):
        """Derive self.vocab {id: bytes} from the merges, and self._special_ids {id: str}."""
        self.vocab = build_vocab(self.merges)
        self._special_ids = {i: tok for tok, i in self.special_tokens.items()}

    @property
    def vocab_size(self):
        """Number of ids: 256 bytes + merges + special tokens."""
        return 256 + len(self.merges) + len(self.special_tokens)

    def save(self, path):
        """Write the tokenizer as JSON (section 9)."""
        Path(path).write_text(json.dumps(_bpe_state(self), ensure_ascii=True, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path):
        """Read a tokenizer written by save(); a file that is not one is a ValueError."""
        return _bpe_from_file(cls, path)

    def __repr__(self):
        return (f"BPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={list(self.special_tokens)})")


# %% [markdown]
# The tokenizer's own methods are yours:
#
# - `train`: special tokens in the training text are cut out first (`split_on_special`):
#   they are never merged with their neighbours and their characters are not learned from.
#   Every other piece is pre-tokenised, and the distinct chunks with their counts go to
#   `learn_merges`. Training replaces any earlier training and resets the cache.
# - `encode`: special tokens (as allowed) become one id each; the rest is pre-tokenised
#   and each chunk encoded with `encode_chunk`. The same words come back again and again,
#   so `encode` remembers each chunk's ids in `self._cache`.
# - `token_bytes(id)`: the bytes one id stands for (a special token: its UTF-8 bytes).
# - `decode`: concatenate every id's bytes and decode UTF-8. For ids that `encode`
#   produced the bytes are exactly the text's bytes, so the round trip is exact, for *any*
#   text. But a model generating ids one by one may produce a sequence that stops in the
#   middle of a multi-byte character (say only the first two of 😀's four bytes). Those
#   bytes are not valid UTF-8; decode them as the replacement character U+FFFD (�), which
#   keeps a generation loop running and still shows that something was there.
#
# <details><summary>Hint 1</summary>
#
# In `train`, which pieces of `split_on_special`'s result are ordinary text? And what
# turns a list of chunks into "each distinct chunk with its count" in one call?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `bytes.decode` has an `errors` argument. One of its values throws bytes away silently;
# another keeps a visible mark. The tests look for the mark.
# </details>
#
# <details><summary>The approach</summary>
#
# `train` is the functions above, wired: the new part is the budget (the vocabulary size
# is bytes plus merges plus special tokens) and counting each distinct chunk once with its
# frequency. `encode` is `CharTokenizer.encode`'s structure with chunks in place of
# characters. Decoding goes through bytes, never through per-token strings: why would a
# per-token string break a character whose UTF-8 bytes two tokens share?
# </details>

# %% nbgrader={"grade": false, "grade_id": "bpe-tokenizer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class BPETokenizer(_BPETokenizerBase):
    """Byte-level byte-pair encoding: 256 byte tokens, learned merges, special tokens.
    Merges never cross pre-tokenisation chunks (`pattern`, None for no split); a fresh
    tokenizer has no merges (see _BPETokenizerBase for its state)."""

    def train(self, text, vocab_size, special_tokens=()):
        """Learn merges from the str `text` so that there are `vocab_size` ids in all (fewer
        if no pair repeats); special tokens get the ids after the merges. Returns self.
        TypeError: vocab_size not an int. ValueError: vocab_size below 256 plus the number
        of special tokens (the message says that 256 ids are the bytes); repeated or empty
        special tokens (the provided _check_special_tokens says so)."""
        # Idea: count each distinct chunk once, weighted by how often it occurs.
        ### BEGIN SOLUTION
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
            raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
        specials = _check_special_tokens(special_tokens)
        if vocab_size < 256 + len(specials):
            raise ValueError(f"vocab_size={vocab_size} is too small: a byte-level BPE needs 256 ids for "
                             f"the bytes plus {len(specials)} for the special tokens")
        chunk_counts = Counter()
        for piece in split_on_special(text, specials)[::2]:
            chunk_counts.update(pretokenize(piece, self._regex))
        words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        self.merges = learn_merges(words, list(chunk_counts.values()), vocab_size - 256 - len(specials))
        self.special_tokens = {tok: 256 + len(self.merges) + k for k, tok in enumerate(specials)}
        self._cache = {}
        self._build_vocab()
        return self
        ### END SOLUTION

    def encode(self, text, allowed_special="all"):
        """The ids of `text` (a list of ints): each allowed special token is one id; the rest
        is pre-tokenised and each chunk's UTF-8 bytes encoded with the learned merges."""
        # Idea: special tokens first, then chunk by chunk (remember each chunk's ids).
        ### BEGIN SOLUTION
        ids = []
        for k, piece in enumerate(split_on_special(text, _allowed_specials(allowed_special, self.special_tokens))):
            if k % 2:
                ids.append(self.special_tokens[piece])
                continue
            for chunk in pretokenize(piece, self._regex):
                if chunk not in self._cache:
                    self._cache[chunk] = encode_chunk(chunk.encode("utf-8"), self.merges)
                ids.extend(self._cache[chunk])
        return ids
        ### END SOLUTION

    def token_bytes(self, token_id):
        """The bytes one id stands for (a special token: its UTF-8 bytes); ValueError for an
        id that does not exist, saying which ids do."""
        # Idea: byte and merge ids are in vocab; special tokens are strings.
        ### BEGIN SOLUTION
        if token_id in self.vocab:
            return self.vocab[token_id]
        if token_id in self._special_ids:
            return self._special_ids[token_id].encode("utf-8")
        raise ValueError(f"token id {token_id!r} is not in this tokenizer's vocabulary "
                         f"(ids 0..{self.vocab_size - 1})")
        ### END SOLUTION

    def decode(self, ids):
        """The text of a sequence of ids (see _as_id_list): their bytes joined and decoded as
        UTF-8; bytes that are not valid UTF-8 become U+FFFD. Unknown id: ValueError."""
        # Idea: ids -> bytes -> text, and no byte silently lost.
        ### BEGIN SOLUTION
        data = b"".join(self.token_bytes(i) for i in _as_id_list(ids))
        return data.decode("utf-8", errors="replace")
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-bpe-train", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, assert_raises, check

_bt = BPETokenizer()
assert_equal((_bt.vocab_size, _bt.vocab[65]), (256, b"A"), "a fresh tokenizer is the 256 bytes")
_tiny = BPETokenizer().train("aaabdaaabac", 300)
assert_equal(_tiny.merges, _hand, "train('aaabdaaabac') learns the hand-derived merges")
assert_equal((_tiny.vocab_size, _tiny.vocab[258]), (259, b"aaab"), "vocab_size and the token 258")
_t300 = BPETokenizer().train(corpus[:5000], 300, special_tokens=["<|endoftext|>"])
assert_equal((_t300.vocab_size, len(_t300.merges)), (300, 43), "300 ids = 256 bytes + 43 merges + 1 special")
assert_equal(_t300.special_tokens, {"<|endoftext|>": 299}, "the special token's id follows the merges")
assert_equal(list(_t300.merges.values()), list(range(256, 299)), "merge r creates id 256 + r")
_straddle = [_t300.vocab[i] for i in _t300.merges.values() if re.search(rb"\S\s", _t300.vocab[i])]
assert_equal(_straddle, [], "tokens that glue a word to the next (merges across chunk boundaries)")
_whole = BPETokenizer(pattern=None).train("ab ab ab ab ab ab", 300)
check(any(re.search(rb"\S\s", _whole.vocab[i]) for i in _whole.merges.values()),
      "pattern=None: training sees the text whole, so some merge crosses a space",
      got=[_whole.vocab[i] for i in _whole.merges.values()])
_eot_text = ("<|endoftext|>hi there ") * 40
_bt = BPETokenizer().train(_eot_text, 300, ["<|endoftext|>"])
_marked = [_bt.vocab[i] for i in _bt.merges.values() if re.search(rb"[<|>]", _bt.vocab[i])]
assert_equal(_marked, [], "learned tokens containing bytes of the special token (it must be cut out first)")
_again = BPETokenizer().train(corpus[:5000], 300, ["<|endoftext|>"])
assert_equal(list(_again.merges.items()), list(_t300.merges.items()), "the same text gives the same merges")
assert_equal(BPETokenizer().train("aaabdaaabac", 300).train("abab", 300).merges, {(97, 98): 256},
             "training again replaces the earlier merges")
assert_raises(ValueError, BPETokenizer().train, "hello", 255, match="256", what="train with vocab_size=255")
assert_raises(ValueError, BPETokenizer().train, "hello", 256, ["<|endoftext|>"], what="256 ids and a special token")
assert_raises(TypeError, BPETokenizer().train, "hello", 300.0, what="train with vocab_size=300.0")
print("✓ BPE training: hand example, vocabulary size, chunks, special tokens, determinism, errors")

# %% nbgrader={"grade": true, "grade_id": "test-bpe-encode", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, assert_raises, check

assert_equal(_tiny.encode("aaabdaaabac"), [258, 100, 258, 97, 99], "encode of the training text")
assert_equal(_tiny.decode([258, 100, 258, 97, 99]), "aaabdaaabac", "decode back")
assert_equal(BPETokenizer().encode("é"), [0xC3, 0xA9], "no merges: just the UTF-8 bytes")
_bt512 = BPETokenizer().train(corpus, 512, special_tokens=["<|endoftext|>"])
for _s in ["The fox and the grapes.", "Mañana: 中文, 😀, e\u0301, \x00 and\ttabs\r\n", "", " ",
           "<|endoftext|>", "a<|endoftext|>b<|endoftext|>"]:
    assert_equal(_bt512.decode(_bt512.encode(_s)), _s, "decode(encode(text))")
_eot = _bt512.special_tokens["<|endoftext|>"]
_ids = _bt512.encode("The end.<|endoftext|>Once")
assert_equal(_ids, _bt512.encode("The end.") + [_eot] + _bt512.encode("Once"), "the special token is one id")
check(_eot not in _bt512.encode("The end.<|endoftext|>", allowed_special="none"),
      "allowed_special='none': the marker is ordinary text", got=_bt512.encode("<|endoftext|>", allowed_special="none"))
_text = corpus[1000:1400]
_replayed = [i for c in pretokenize(_text) for i in encode_chunk(c.encode("utf-8"), _bt512.merges)]
assert_equal(_bt512.encode(_text), _replayed, "encode = encode_chunk of every chunk")
assert_equal(b"".join(_bt512.token_bytes(i) for i in _bt512.encode("the fox")), b"the fox", "token_bytes")
assert_equal(_bt512.token_bytes(_eot), b"<|endoftext|>", "token_bytes of the special token")
_n = len(_bt512.encode(corpus))
check(_n < len(corpus.encode("utf-8")) / 2, "512 ids should at least halve the fables", got=_n)
assert_equal(_bt512.decode([0xF0, 0x9F]), "\ufffd", "half of 😀's four bytes: the replacement character")
assert_equal(_bt512.decode([104, 0x80, 105]), "h\ufffdi", "a stray continuation byte between h and i")
assert_raises(ValueError, _bt512.decode, [10_000], what="decode of id 10000")
assert_raises(ValueError, _bt512.token_bytes, _bt512.vocab_size, what="token_bytes(vocab_size)")
_retrained = BPETokenizer().train(corpus[:5000], 400)
_retrained.encode("the fox and the grapes")   # the cache now holds ids of the first training
_retrained.train("the fox", 260)
assert_equal(_retrained.encode("the fox and the grapes"), BPETokenizer().train("the fox", 260).encode("the fox and the grapes"),
             "after training again, encode uses the new merges only (no ids left over in the cache)")
print("✓ BPE encode/decode: merges replayed in rank order, exact round trip, special tokens")

# %% [markdown]
# ## 8. Training on the fables
#
# Time to train for real: vocabulary 512 (256 bytes, 255 merges, one special token). We
# time the training, then look at what it learned: the first merges, and the longest
# tokens.

# %%
_t0 = time.perf_counter()
bpe = BPETokenizer().train(corpus, 512, special_tokens=["<|endoftext|>"])
train_seconds = time.perf_counter() - _t0
print(f"{bpe}  trained in {train_seconds:.2f} s")


def show_token(tok, i):
    return repr(tok.token_bytes(i).decode("utf-8", errors="replace"))


print("first 20 merges:", ", ".join(show_token(bpe, i) for i in range(256, 276)))
_longest = sorted(bpe.merges.values(), key=lambda i: len(bpe.vocab[i]), reverse=True)[:20]
print("longest tokens: ", ", ".join(show_token(bpe, i) for i in _longest))
_sample = "The lion, who had never lost a race, laughed at the tortoise."
_ids = bpe.encode(_sample)
print(f"\n{_sample!r}\n-> {len(_ids)} tokens: {' | '.join(show_token(bpe, i)[1:-1] for i in _ids)}")
_n_ids = len(bpe.encode(corpus))
print(f"\nthe fables: {len(corpus):,} characters -> {_n_ids:,} tokens: "
      f"{len(corpus) / _n_ids:.2f} characters per token")

# %% [markdown]
# The first merges are frequent letter pairs and word beginnings (with their leading
# space); the longest tokens are whole common words, again with the space in front. The
# sample sentence shows the subword idea at work: common words are one token, rarer ones
# are spelled from a few pieces. Now compare with **no pre-tokenisation** (`pattern=None`): merges may
# then cross word boundaries. We train on the first 8,000 characters only (without chunks
# there is no "count each word once" shortcut, so training is slower) and list tokens that
# contain a space that is not at the start: those straddle two words.

# %%
_part = corpus[:8000]
_t0 = time.perf_counter()
_raw = BPETokenizer(pattern=None).train(_part, 400)
_raw_s = time.perf_counter() - _t0
_t0 = time.perf_counter()
_chunked = BPETokenizer().train(_part, 400)
_chunked_s = time.perf_counter() - _t0
for _name, _tok, _s in [("pattern=None", _raw, _raw_s), ("SPLIT_PATTERN", _chunked, _chunked_s)]:
    _cross = [show_token(_tok, i) for i in _tok.merges.values() if re.search(rb"\S\s", _tok.vocab[i])]
    print(f"{_name:>13}: trained in {_s:.2f} s, {len(_part) / len(_tok.encode(_part)):.2f} chars/token on "
          f"its training text, {len(_cross)} word-straddling tokens: {', '.join(_cross[:8]) or 'none'}")

# %% [markdown]
# Compare the two lines. Without chunks, part of the vocabulary goes to tokens that glue
# the end of one word to the space or the start of the next one (a letter followed by a
# space, or a word with spaces on both sides), so the same word tokenizes differently in
# different contexts, and its compression of its own training text is not better for it.
# With chunks, every token lives inside one word (plus its leading space). The two
# training times printed above depend on how your `learn_merges` counts: a version that
# recounts everything after every merge pays for every word at every merge either way,
# while one that updates its counts (Hint 3 of section 6) touches only the words a merge
# changes, and with chunks each distinct word is counted once.
#
# ## 9. Saving a tokenizer
#
# A trained tokenizer is part of the model: a model trained with one tokenizer produces
# garbage with another. So it is saved next to the weights. Why JSON and not Python's
# `pickle`? Loading a pickle **runs code** chosen by whoever wrote the file (a pickle can
# call any function), so opening a downloaded pickle is like running a downloaded program.
# A tokenizer is just data: a pattern, a list of merges, a dict of special tokens. JSON
# stores exactly that, is readable by any language and by you, and cannot execute
# anything. (The same reasoning led the ecosystem from pickled weights to `safetensors`.)
# The vocabulary is not saved: it follows from the merges (`build_vocab`).
#
# `BPETokenizer.save` writes what your `_bpe_state(tok)` returns: a dict of plain JSON
# values with the fields `"format"` (the string `"tinytorch-bpe-tokenizer"`), `"version"`
# (1), `"pattern"`, `"merges"` and `"special_tokens"`. The provided loader below reads
# exactly those fields back, checks them, and rebuilds the vocabulary.
#
# <details><summary>Hint 1</summary>
#
# JSON has lists but no tuples, and its object keys must be strings. How can a dict keyed
# by pairs be written so that nothing is lost, not even the order?
# </details>
#
# <details><summary>The approach</summary>
#
# Store the merges as a list of two-element lists, in rank order (the position in the
# list is the rank, so the new ids need not be stored), and the special tokens as the
# dict they already are; add the format, version and pattern.
# </details>

# %% nbgrader={"grade": false, "grade_id": "bpe-state", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _bpe_state(tok):
    """What BPETokenizer.save writes: {"format": "tinytorch-bpe-tokenizer", "version": 1,
    "pattern": tok.pattern, "merges": [[a, b], ...] in rank order, "special_tokens":
    {string: id}}, made of plain JSON values only."""
    # Idea: the merges' order is the model; store it, and nothing that can be derived.
    ### BEGIN SOLUTION
    return {
        "format": "tinytorch-bpe-tokenizer",
        "version": 1,
        "pattern": tok.pattern,
        "merges": [[a, b] for a, b in tok.merges],
        "special_tokens": dict(tok.special_tokens),
    }
    ### END SOLUTION


# %%
#| export
def _bpe_from_file(cls, path):
    """A tokenizer (of class cls) from a file written by save; ValueError for anything else."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a JSON file: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != "tinytorch-bpe-tokenizer":
        raise ValueError(f"{path} is not a BPE tokenizer file written by BPETokenizer.save")
    tok = cls(pattern=data["pattern"])
    merges = {}
    for rank, pair in enumerate(data["merges"]):
        new_id = 256 + rank
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(i, int) and 0 <= i < new_id for i in pair)):
            raise ValueError(f"{path}: merge {rank} is {pair!r}, not two existing ids below {new_id}")
        merges[tuple(pair)] = new_id
    specials = data["special_tokens"]
    expected = {tok_str: 256 + len(merges) + k for k, tok_str in enumerate(specials)}
    if specials != expected:
        raise ValueError(f"{path}: special tokens {specials} should have the ids right after "
                         f"the merges: {expected}")
    tok.merges, tok.special_tokens = merges, expected
    tok._build_vocab()
    return tok


# %% nbgrader={"grade": true, "grade_id": "test-bpe-save", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, assert_raises

_state = _bpe_state(bpe)
assert_equal(json.loads(json.dumps(_state)), _state, "the state survives JSON unchanged (plain values only)")
assert_equal(sorted(_state), ["format", "merges", "pattern", "special_tokens", "version"], "the fields")
assert_equal(_state["merges"][:3], [list(p) for p in list(bpe.merges)[:3]], "the first merges, as [a, b] lists")
assert_equal(_state["merges"], [list(p) for p in bpe.merges], "all merges, in rank order")
with tempfile.TemporaryDirectory() as _d:
    _path = Path(_d) / "fables-bpe.json"
    bpe.save(_path)
    _loaded = BPETokenizer.load(_path)
    assert_equal(list(_loaded.merges.items()), list(bpe.merges.items()), "merges after save and load")
    assert_equal(_loaded.special_tokens, bpe.special_tokens, "special tokens after save and load")
    assert_equal(_loaded.encode(corpus[:3000]), bpe.encode(corpus[:3000]), "the same encoding after load")
    _size = _path.stat().st_size
    BPETokenizer(pattern=None).save(_path)
    assert_equal(BPETokenizer.load(_path).pattern, None, "pattern=None (no pre-tokenisation) after save and load")
    _path.write_text('{"format": "something else"}', encoding="utf-8")
    assert_raises(ValueError, BPETokenizer.load, _path, what="load of a file in another format")
print(f"✓ save/load: {len(_state['merges'])} merges, a file of {_size:,} bytes")

# %% [markdown]
# ## 10. From a corpus to training batches
#
# A language model learns to predict token $t+1$ from tokens $0..t$. So its training data
# is one long tensor of ids, and a training example is a **window** of `block_size` ids
# $x = (d_i, \dots, d_{i+T-1})$ with the **targets** shifted by one,
# $y = (d_{i+1}, \dots, d_{i+T})$: at every position, the target is the next token. One
# window thus gives $T$ predictions at once (module 13's causal attention makes sure that
# position $t$ sees only $x_0..x_t$).
#
# `get_batch` draws `batch_size` random start positions $i$ in $0..N-T-1$ (so that $y$ still
# fits, and every such start can be drawn) and stacks the windows into
# `(batch_size, block_size)` int64 tensors. We draw windows at random rather than cutting
# the text into fixed blocks so that the model sees every offset; the randomness comes from
# a `Generator` (module 05) through the provided `numpy_generator(generator)`, so a seed makes it
# reproducible. `encode_corpus` is the step before: a whole text as one 1-D int64 tensor.
#
# <details><summary>Hint 1</summary>
#
# With $N$ ids and windows of $T$, which is the last start whose target window still fits?
# numpy's `Generator.integers(low, high)` never returns `high` itself.
# </details>
#
# <details><summary>Hint 2</summary>
#
# No Python loop is needed: a column of starts plus a row of offsets $0..T-1$ broadcasts to
# a matrix of positions, and one fancy index with that matrix reads every window at once.
# </details>
#
# <details><summary>The approach</summary>
#
# A window of `block_size` inputs needs one more id for its last target: which starts are
# allowed? All B windows can be read at once, with no Python loop, by indexing with a
# (B, T) matrix of positions; the targets are the same matrix, shifted. The draw must come
# from the generator you are given, or seeded runs will differ.
# </details>

# %% nbgrader={"grade": false, "grade_id": "batches", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def encode_corpus(tokenizer, text, **encode_kwargs):
    """All of `text` as one 1-D int64 Tensor of token ids (any tokenizer with encode;
    encode_kwargs are passed on to it)."""
    ### BEGIN SOLUTION
    return Tensor(np.asarray(tokenizer.encode(text, **encode_kwargs), dtype=np.int64), dtype=int64)
    ### END SOLUTION


def get_batch(data, block_size, batch_size, generator=None):
    """A random batch of language-model examples from the 1-D id tensor `data`.

    Returns (x, y), two int64 Tensors of shape (batch_size, block_size) with
    x[b] = data[i_b : i_b + block_size] and y[b] = data[i_b + 1 : i_b + block_size + 1]
    for random starts i_b, each of 0..len(data) - block_size - 1 possible (drawn from
    `generator`, a tinytorch.data.Generator, or the global seed when None).
    ValueError when data is not 1-D integer ids, when block_size or batch_size is not a
    positive int, or when data holds fewer than block_size + 1 ids (the message gives both).
    """
    # Idea: the target of every position is the id one step further on.
    ### BEGIN SOLUTION
    arr = data.numpy() if isinstance(data, Tensor) else np.asarray(data)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise ValueError(f"data must be a 1-D tensor of integer token ids, got shape {arr.shape} "
                         f"and dtype {arr.dtype}")
    for name, value in (("block_size", block_size), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if len(arr) < block_size + 1:
        raise ValueError(f"data has {len(arr)} ids; a window of block_size={block_size} plus its "
                         f"shifted target needs at least {block_size + 1}")
    rng = numpy_generator(generator)
    starts = rng.integers(0, len(arr) - block_size, size=batch_size)
    index = starts[:, None] + np.arange(block_size)
    return Tensor(arr[index], dtype=int64), Tensor(arr[index + 1], dtype=int64)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-batches", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_equal, assert_raises, check, preserved_state

import tinytorch

_data = encode_corpus(bpe, corpus)
assert_equal((type(_data).__name__, _data.dtype, _data.shape), ("Tensor", int64, (_n_ids,)),
             "encode_corpus: a 1-D int64 Tensor")
assert_equal(_data[:20].tolist(), bpe.encode(corpus)[:20], "encode_corpus: the tokenizer's ids")
_ramp = tinytorch.arange(100) * 3                  # distinct ids: a window shows where it starts
_x, _y = get_batch(_ramp, 16, 4, generator=Generator().manual_seed(0))
assert_equal((_x.shape, _y.shape, _x.dtype, _y.dtype), ((4, 16), (4, 16), int64, int64), "shapes and dtypes")
for _row_x, _row_y in zip(_x.numpy(), _y.numpy()):
    _start = int(_row_x[0]) // 3
    assert_equal(_row_x, 3 * np.arange(_start, _start + 16), f"x: the window starting at {_start}")
    assert_equal(_row_y, 3 * np.arange(_start + 1, _start + 17), f"y: the same window, one id further on")
_x2, _ = get_batch(_ramp, 16, 4, generator=Generator().manual_seed(0))
assert_equal(_x2.numpy(), _x.numpy(), "same seed, same batch")
_xs, _ = get_batch(tinytorch.arange(12), 9, 600, generator=Generator().manual_seed(0))
assert_equal(sorted(set(_xs.numpy()[:, 0].tolist())), [0, 1, 2], "12 ids, windows of 9: every start 0, 1, 2 is drawn")
with preserved_state():
    tinytorch.manual_seed(7)
    _a, _ = get_batch(_ramp, 8, 3)
    tinytorch.manual_seed(7)
    _b, _ = get_batch(_ramp, 8, 3)
assert_equal(_a.numpy(), _b.numpy(), "without a generator: the global seed decides")
assert_raises(ValueError, get_batch, _data[:10], 10, 2, match="11", what="10 ids, a window of 10 plus its target")
assert_raises(ValueError, get_batch, _ramp, 0, 2, what="block_size=0")
assert_raises(ValueError, get_batch, _ramp.reshape(10, 10), 2, 2, what="2-D data")
assert_raises(ValueError, get_batch, _ramp, 4, 0, what="batch_size=0")
assert_raises(ValueError, get_batch, _ramp * 0.5, 4, 2, what="float data (ids are integers)")
print("✓ encode_corpus and get_batch: first target row", _y.numpy()[0, :5].tolist(), "...")

# %% [markdown]
# The picture shows one window of the fables: each input token above the target the model
# must predict at that position.

# %%
_xs, _ys = get_batch(_data, 10, 1, generator=Generator().manual_seed(3))
fig, ax = plt.subplots(figsize=(11, 1.9))
for _k, (_a, _b) in enumerate(zip(_xs.tolist()[0], _ys.tolist()[0])):
    for _row, _tid, _col in ((1, _a, "lightblue"), (0, _b, "moccasin")):
        ax.add_patch(Rectangle((_k * 1.1, _row * 1.1), 1, 1, facecolor=_col, edgecolor="black"))
        ax.text(_k * 1.1 + 0.5, _row * 1.1 + 0.5, f"{show_token(bpe, _tid)}\n{_tid}", ha="center",
                va="center", fontsize=7.5)
    ax.annotate("", xy=(_k * 1.1 + 0.5, 1.0), xytext=(_k * 1.1 + 0.5, 1.1), arrowprops=dict(arrowstyle="->"))
ax.text(-0.2, 1.6, "x", ha="right", va="center", fontsize=11)
ax.text(-0.2, 0.5, "y", ha="right", va="center", fontsize=11)
ax.set_xlim(-0.6, 11.2)
ax.set_ylim(-0.1, 2.2)
ax.axis("off")
ax.set_title("one training window: at each position the target is the next token", fontsize=10)
plt.show()

# %% [markdown]
# ## 11. Systems look: compression, training time, and what vocabulary size costs
#
# How much does a bigger vocabulary buy? We train once to 1,024 ids on the first 90% of the
# fables and measure the **compression** (characters per token) on that training part and
# on the held-out last 10%, for vocabularies from 256 to 1,024. Greedy BPE has a handy
# property that makes this cheap: the merges of a smaller vocabulary are exactly the
# **first** merges of a larger one (each step depends only on the steps before it), so
# truncating the merges of the 1,024-id tokenizer gives the smaller tokenizers. We check
# that property on one size, and time training from scratch separately.
#
# First, predict. Section 8 printed the compression at 512 ids on the whole text. What
# will 1,024 ids give on text the tokenizer has *not* seen? And how much longer does
# training to 1,024 ids take than training to 512?

# %%
predicted_chars_per_token = None   # your number: characters per token at V = 1,024 on the held-out 10%
predicted_time_ratio = None        # your number: training time for V = 1,024 divided by that for V = 512

# %%
def truncated(tok, n_merges):
    """A tokenizer with only the first n_merges of tok's merges (no special tokens)."""
    small = BPETokenizer(pattern=tok.pattern)
    small.merges = dict(list(tok.merges.items())[:n_merges])
    small._build_vocab()
    return small


_split = int(len(corpus) * 0.9)
_train_text, _held_text = corpus[:_split], corpus[_split:]
_big = BPETokenizer().train(_train_text, 1024)
assert truncated(_big, 128).merges == BPETokenizer().train(_train_text, 256 + 128).merges, "prefix property"

sizes = [256, 320, 384, 448, 512, 640, 768, 896, 1024]
cpt_train, cpt_held = [], []
for _v in sizes:
    _tok = truncated(_big, _v - 256)
    cpt_train.append(len(_train_text) / len(_tok.encode(_train_text)))
    cpt_held.append(len(_held_text) / len(_tok.encode(_held_text)))

time_sizes = [300, 512, 768, 1024]
train_times = []
for _v in time_sizes:
    _t0 = time.perf_counter()
    BPETokenizer().train(corpus, _v)
    train_times.append(time.perf_counter() - _t0)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
ax1.plot(sizes, cpt_train, "o-", label="training text (first 90%)")
ax1.plot(sizes, cpt_held, "s--", label="held-out text (last 10%)")
ax1.axhline(1.0, color="grey", lw=0.8)
ax1.set_xlabel("vocabulary size V")
ax1.set_ylabel("characters per token")
ax1.set_title("compression grows with V, more slowly on unseen text", fontsize=10)
ax1.legend()
ax2.plot(time_sizes, train_times, "o-")
ax2.set_xlabel("vocabulary size V")
ax2.set_ylabel("seconds")
ax2.set_title(f"training time on the fables ({len(corpus):,} characters)", fontsize=10)
fig.tight_layout()
plt.show()
for _v, _a, _b in zip(sizes, cpt_train, cpt_held):
    print(f"V={_v:>5}: {_a:.2f} chars/token on training text, {_b:.2f} held out")
print("training times:", ", ".join(f"V={v}: {s:.2f} s" for v, s in zip(time_sizes, train_times)))
_ratio = train_times[time_sizes.index(1024)] / train_times[time_sizes.index(512)]
for _what, _pred, _meas in [("chars/token at V=1024, held out", predicted_chars_per_token, cpt_held[-1]),
                            ("training time V=1024 / V=512", predicted_time_ratio, _ratio)]:
    print(f"{_what}: measured {_meas:.2f}, " + ("no prediction written" if _pred is None else f"you predicted {_pred}"))

# %% [markdown]
# Read the plot: the first merges buy the most (they merge the most frequent pairs), later
# merges add less and less, and the held-out curve lies (slightly) below the training
# curve: late merges capture words and phrases that are frequent in *this* text but rarer
# elsewhere. A real tokenizer is trained on a far larger and more varied corpus than it is
# a part of. (The compression figures are the same on every machine: BPE is
# deterministic.) Where does the training time go? Every merge asks `best_pair` for the
# top of *all* the pair counts, a scan over every distinct pair, and merging makes new
# pairs about as fast as it retires old ones. Updating the counts incrementally removes
# the recount, not the scan: each merge costs about the same, and the time grows about in
# proportion to the number of merges (V = 1,024 is 768 merges, three times V = 512's 256:
# compare the measured ratio). Keeping the counts in a priority queue (a heap whose stale
# entries are skipped when they reach the top) removes the scan too; real trainers do that. The seconds themselves depend on the machine and its load.
#
# Encoding speed matters too: a tokenizer runs over every training document. Measure the
# cache's effect (cold: every chunk encoded; warm: every chunk looked up). Predict first.

# %%
predicted_cache_speedup = None   # your number: how many times faster is encoding with a warm cache?

# %%
with tempfile.TemporaryDirectory() as _d:
    bpe.save(Path(_d) / "t.json")
    _cold_tok = BPETokenizer.load(Path(_d) / "t.json")
_t0 = time.perf_counter()
_cold_tok.encode(corpus)
_cold = time.perf_counter() - _t0
_t0 = time.perf_counter()
_cold_tok.encode(corpus)
_warm = time.perf_counter() - _t0
print(f"encoding the fables: cold cache {_cold * 1e3:.0f} ms ({len(corpus) / _cold / 1e6:.2f} M chars/s), "
      f"warm cache {_warm * 1e3:.0f} ms ({len(corpus) / _warm / 1e6:.2f} M chars/s); "
      f"{len(_cold_tok._cache):,} distinct chunks cached")
print(f"speedup measured {_cold / _warm:.1f}x; " + ("no prediction written" if predicted_cache_speedup is None
                                                 else f"you predicted {predicted_cache_speedup}x"))

# %% [markdown]
# The warm run still pre-tokenises the whole text with the regex and looks up every chunk,
# so the speedup is finite; how large it is depends on the machine (regex and dict speed
# against the merge loop), but the warm run should be several times faster.

# %% [markdown]
# **What the vocabulary costs.** A language model has an **embedding table** (one row of
# $d$ numbers per token, module 11) and usually an output layer of the same size that
# scores every token: $V \times d$ float32 numbers each, $4Vd$ bytes. And the sequence
# length $T$ for a given text shrinks as $V$ grows, while attention (module 12) costs
# $O(T^2)$ time and memory per layer. The table below computes both for a 1,000-character
# passage of the held-out text, with our small GPT's width $d = 128$ and GPT-2 small's
# $d = 768$ (GPT-2's own vocabulary has 50,257 ids).

# %%
_passage = _held_text[:1000]
print(f"{'tokenizer':>18} {'V':>7} {'T (1000 chars)':>15} {'attention ~T^2':>15} "
      f"{'table d=128':>12} {'table d=768':>12}")
_rows = [("characters", len(set(corpus)), len(_passage))]
_rows += [(f"BPE {v}", v, len(truncated(_big, v - 256).encode(_passage))) for v in (256, 512, 1024)]
_t_char = _rows[0][2]
for _name, _v, _t in _rows:
    print(f"{_name:>18} {_v:>7,} {_t:>15,} {(_t / _t_char) ** 2:>14.2f}x "
          f"{4 * _v * 128 / 1e3:>10.0f} kB {4 * _v * 768 / 1e6:>10.2f} MB")
print(f"{'GPT-2 (V only)':>18} {50257:>7,} {'':>15} {'':>15} {4 * 50257 * 128 / 1e6:>9.1f} MB "
      f"{4 * 50257 * 768 / 1e6:>9.1f} MB")

# %% [markdown]
# Going from characters to 1,024 BPE tokens makes the sequences shorter by the factor in
# the T column, so attention over the same text gets cheaper by its square, while the embedding table stays
# tiny at our scale. At GPT-2's scale (last row) the table is over 150 MB, a large share of a
# 124M-parameter model; that is why vocabularies stop growing at some point: every extra
# token costs memory in two tables, and rare tokens are seen too seldom to learn good
# embeddings.
#
# ## 12. What real tokenizers do
#
# PyTorch itself ships no tokenizer (the old `torchtext` is retired); the ecosystem uses
# these, all built on the ideas of this notebook:
#
# - **GPT-2** (OpenAI, 2019): byte-level BPE with 50,000 merges and one special token,
#   `<|endoftext|>` (50,257 ids). Its pre-tokenisation regex is like ours, written with
#   Unicode property classes (`\p{L}` letters, `\p{N}` numbers, from the `regex` package);
#   ours approximates them with `re`, whose `[^\W\d_]` also counts some numerals, such as
#   `½`, as letters. It also maps the 256
#   bytes to printable Unicode characters so that merges can be stored in a text file; the
#   algorithm is unchanged.
# - **tiktoken** (OpenAI): the GPT-3.5/4 tokenizers (`cl100k_base`, `o200k_base`, with
#   100k-200k ids), encoding by lowest-rank merge (Hint 2's design of `encode_chunk`), written in
#   Rust for speed. Its regexes also split numbers into groups of at most three digits and
#   handle case and non-English text better. Special tokens are disallowed in `encode`
#   unless you allow them, the safe default we discussed.
# - **SentencePiece** (Google): treats the text as a raw stream with spaces replaced by `▁`,
#   so it needs no language-specific pre-tokenisation (important for Chinese and
#   Japanese, which do not separate words by spaces); offers BPE and the **unigram**
#   language-model method (start from a big vocabulary and prune the least useful
#   pieces), with **byte fallback** for characters it has not seen. Used by T5 and Llama 1/2.
# - **Hugging Face `tokenizers`**: a Rust library implementing all of these, with
#   normalisers (Unicode NFC/NFKC, lowercasing), pre-tokenisers, models and
#   post-processors (adding `[CLS]`/`[SEP]` or BOS/EOS tokens) as configurable stages.
#
# And the quirks of language models often trace back to the tokenizer: a model that cannot
# count the letters of a word never saw the letters (only one token); arithmetic suffers
# when numbers are cut into arbitrary pieces; a language underrepresented in the tokenizer's
# training text costs many more tokens per sentence, so it gets less context and costs more.
#
# ## 13. Recap
#
# - A tokenizer maps text to ids and back. **Characters**: tiny vocabulary, long sequences.
#   **Words**: short sequences, huge vocabulary and unknown words. **Subwords**: chosen
#   vocabulary, nothing unknown.
# - **UTF-8** writes every code point as 1-4 bytes; starting from the **256 bytes** makes a
#   tokenizer that encodes any text exactly.
# - **BPE training**: repeatedly merge the most frequent adjacent pair (ties: smallest
#   pair; stop when nothing occurs twice). Pre-tokenisation keeps merges inside words and
#   lets us count each distinct word once, weighted by its frequency; updating the counts
#   incrementally after each merge gives the same merges, faster.
# - **Encoding** replays the merges by rank; **decoding** joins bytes (invalid sequences
#   become U+FFFD). **Special tokens** are single ids, never split.
# - Save tokenizers as **data** (JSON), never as pickles.
# - A bigger vocabulary shortens sequences (attention $O(T^2)$ gets cheaper) but grows the
#   embedding and output tables ($4Vd$ bytes each) and gives rarer tokens.
#
# Run `tito test module 10` to check your work against the full test suite. Module 11
# turns these ids into vectors: the embedding table.

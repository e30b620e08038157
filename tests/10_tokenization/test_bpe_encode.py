"""BPE encode/decode: exact round trip on any Unicode text, merges replayed by rank,
compression, special tokens, decode errors."""
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tinytorch import Tensor
from tinytorch.text import SPLIT_PATTERN, BPETokenizer

EOT = "<|endoftext|>"
TRICKY = "Mañana, 中文 and 日本語; 😀👍🏽 e\u0301 \x00\x7f\r\n\t  x_y 3.14 '' \"\" \u200b\ufeff"


@given(st.text())
@example(TRICKY)
@example("")
@example(EOT + "a" + EOT)
@example("\U0010ffff\U00010000\u0800\u07ff\x80")
def test_round_trip_on_any_unicode_text(fables_bpe, text):
    ids = fables_bpe.encode(text)
    assert all(isinstance(i, int) and 0 <= i < fables_bpe.vocab_size for i in ids)
    assert fables_bpe.decode(ids) == text
    assert fables_bpe.decode(fables_bpe.encode(text, allowed_special="none")) == text


@settings(max_examples=50)
@given(st.text(max_size=80), st.text(max_size=80), st.sampled_from([SPLIT_PATTERN, None]))
def test_round_trip_with_a_tokenizer_trained_on_random_text(train_text, text, pattern):
    tok = BPETokenizer(pattern=pattern).train(train_text * 3, 300)
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(train_text)) == train_text


@given(st.text())
def test_untrained_tokenizer_is_utf8_bytes(text):
    tok = BPETokenizer()
    assert tok.vocab_size == 256
    assert tok.encode(text) == list(text.encode("utf-8"))
    assert tok.decode(list(text.encode("utf-8"))) == text


@settings(max_examples=40)
@given(st.text(alphabet=st.sampled_from("the fox and a grape.\n,é"), max_size=80))
def test_encode_replays_merges_in_rank_order(reference, fables_bpe, text):
    merges = list(fables_bpe.merges)
    assert fables_bpe.encode(text) == reference["encode"](merges, text, SPLIT_PATTERN)


def test_encode_on_held_out_text_matches_reference(reference, fables):
    tok = BPETokenizer().train(fables[:30000], 400)
    held = fables[30000:33000]
    assert tok.encode(held) == reference["encode"](list(tok.merges), held, SPLIT_PATTERN)
    raw = BPETokenizer(pattern=None).train(fables[:3000], 300)
    assert raw.encode(held[:800]) == reference["encode"](list(raw.merges), held[:800], None)


def test_encoding_compresses_the_corpus(fables, fables_bpe):
    n_bytes = len(fables.encode("utf-8"))
    n512 = len(fables_bpe.encode(fables))
    n300 = len(BPETokenizer().train(fables, 300).encode(fables))
    assert n512 < n300 < n_bytes, (n512, n300, n_bytes)
    assert n_bytes / n512 > 1.5, "255 merges learned on this very text must shorten it a lot"
    used = set(fables_bpe.encode(fables))
    assert any(i >= 256 for i in used)


@settings(max_examples=50)
@given(st.lists(st.text(max_size=15), min_size=1, max_size=5))
def test_special_tokens_are_never_split(fables_bpe, pieces):
    text = EOT.join(pieces)
    eot = fables_bpe.special_tokens[EOT]
    ids = fables_bpe.encode(text)
    assert ids.count(eot) == text.count(EOT)
    assert fables_bpe.decode(ids) == text
    expected = []
    for k, piece in enumerate(text.split(EOT)):
        expected += ([eot] if k else []) + fables_bpe.encode(piece)
    assert ids == expected, "text on either side of a special token is encoded on its own"


def test_bpe_tokenizer_encode_allowed_special_modes(fables):
    tok = BPETokenizer().train(fables[:5000], 300, special_tokens=[EOT, "<pad>"])
    eot, pad = tok.special_tokens[EOT], tok.special_tokens["<pad>"]
    text = "the end" + EOT + "<pad>"
    assert tok.encode(text) == tok.encode("the end") + [eot, pad]
    assert tok.encode(text, allowed_special="all") == tok.encode(text)
    none = tok.encode(text, allowed_special="none")
    assert eot not in none and pad not in none and tok.decode(none) == text
    only_pad = tok.encode(text, allowed_special={"<pad>"})
    assert eot not in only_pad and only_pad[-1] == pad and tok.decode(only_pad) == text
    with pytest.raises(ValueError, match="<bogus>"):
        tok.encode(text, allowed_special={"<bogus>"})


def test_token_bytes(fables_bpe):
    text = "The tortoise won the race. 😀"
    ids = fables_bpe.encode(text)
    assert b"".join(fables_bpe.token_bytes(i) for i in ids) == text.encode("utf-8")
    assert fables_bpe.token_bytes(97) == b"a"
    assert fables_bpe.token_bytes(fables_bpe.special_tokens[EOT]) == EOT.encode("utf-8")
    with pytest.raises(ValueError):
        fables_bpe.token_bytes(fables_bpe.vocab_size)


def test_decode_errors_and_invalid_utf8(fables_bpe):
    for bad in ([fables_bpe.vocab_size], [-1], [10**9]):
        with pytest.raises(ValueError):
            fables_bpe.decode(bad)
    with pytest.raises(TypeError):
        fables_bpe.decode([97, "b"])
    smile = list("😀".encode("utf-8"))
    for cut in ([smile[0]], smile[:2], smile[:3], [0xFF], [0x80, 97]):
        expected = bytes(cut).decode("utf-8", errors="replace")
        assert fables_bpe.decode(cut) == expected and "\ufffd" in expected


def test_decode_accepts_tensors_and_arrays(fables_bpe):
    ids = fables_bpe.encode("the fox")
    assert fables_bpe.decode(np.array(ids)) == "the fox"
    assert fables_bpe.decode(Tensor(np.array(ids, dtype=np.int64))) == "the fox"
    assert fables_bpe.decode(tuple(ids)) == "the fox"

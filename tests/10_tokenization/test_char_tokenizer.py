"""CharTokenizer: one id per character of its alphabet, special tokens, explicit unknowns."""
import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tinytorch import Tensor
from tinytorch.text import CharTokenizer

EOT = "<|endoftext|>"


@given(st.text())
@example("héllo wörld 中文 😀 e\u0301 \x00\r\n\t")
@example("")
def test_round_trip_on_its_own_alphabet(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text


def test_ids_follow_sorted_code_points():
    tok = CharTokenizer.from_text("banana bread")
    alphabet = sorted(set("banana bread"))
    assert tok.chars == alphabet
    assert tok.vocab_size == len(alphabet)
    assert tok.encode("".join(alphabet)) == list(range(len(alphabet)))
    assert tok.encode("bad") == [alphabet.index(c) for c in "bad"]
    explicit = CharTokenizer("zyx")  # ids in the order given
    assert explicit.encode("xyz") == [2, 1, 0] and explicit.vocab_size == 3


@given(st.lists(st.text(alphabet="ab<|>ce \n", max_size=12), min_size=1, max_size=6))
def test_special_tokens_are_single_ids_and_round_trip(pieces):
    text = EOT.join(pieces)
    tok = CharTokenizer.from_text("abce <|>\n" + EOT, special_tokens=[EOT, "<pad>"])
    n = len(set("abce <|>\n" + EOT))
    eot = tok.special_tokens[EOT]
    assert eot == n and tok.special_tokens["<pad>"] == n + 1 and tok.vocab_size == n + 2
    ids = tok.encode(text)
    assert ids.count(eot) == text.count(EOT)
    assert tok.decode(ids) == text


@given(st.lists(st.text(alphabet="abce <|>\n", max_size=8), min_size=1, max_size=4))
def test_char_tokenizer_encode_allowed_special_none_reads_specials_as_text(pieces):
    text = EOT.join(pieces)
    tok = CharTokenizer.from_text("abce <|>\n" + EOT, special_tokens=[EOT, "<pad>"])
    plain = tok.encode(text, allowed_special="none")
    assert tok.special_tokens[EOT] not in plain and len(plain) == len(text)
    assert plain == [tok.encode(c)[0] for c in text], "every character, the special token's included, is its own id"


def test_char_tokenizer_encode_allowed_special_subset_and_unknown():
    tok = CharTokenizer.from_text("ab<>", special_tokens=["<a>", "<b>"])
    ids = tok.encode("<a><b>", allowed_special={"<b>"})
    assert ids == tok.encode("<a>", allowed_special="none") + [tok.special_tokens["<b>"]]
    with pytest.raises(ValueError, match="<c>"):
        tok.encode("ab", allowed_special={"<c>"})


def test_unknown_character_is_a_clear_error():
    tok = CharTokenizer.from_text("hello")
    with pytest.raises(ValueError) as info:
        tok.encode("help")
    assert "'p'" in str(info.value) and "U+0070" in str(info.value)


def test_unk_token_maps_unknown_characters():
    tok = CharTokenizer.from_text("abc", unk_token="<unk>")
    unk = tok.special_tokens["<unk>"]
    assert unk == 3 and tok.vocab_size == 4 and tok.unk_token == "<unk>"
    assert tok.encode("a😀c") == [0, unk, 2]
    assert tok.decode(tok.encode("a😀c")) == "a<unk>c"
    both = CharTokenizer.from_text("abc", special_tokens=[EOT, "<unk>"], unk_token="<unk>")
    assert both.special_tokens == {EOT: 3, "<unk>": 4}


def test_decode_accepts_tensors_and_arrays():
    tok = CharTokenizer.from_text("abc")
    assert tok.decode(np.array([2, 1, 0])) == "cba"
    assert tok.decode(Tensor(np.array([0, 0, 1]))) == "aab"
    assert tok.decode(()) == ""


def test_bad_ids_and_bad_alphabets_are_errors():
    tok = CharTokenizer.from_text("abc", special_tokens=[EOT])
    for bad in ([4], [-1], [0, 99]):
        with pytest.raises(ValueError):
            tok.decode(bad)
    with pytest.raises(TypeError):
        tok.decode([1.5])
    with pytest.raises(ValueError):
        CharTokenizer("abca")
    with pytest.raises(ValueError):
        CharTokenizer(["ab", "c"])
    with pytest.raises(ValueError):
        CharTokenizer("abc", special_tokens=[EOT, EOT])


def test_save_and_load_as_json(tmp_path):
    text = "The fox said: «ça va?» 😀"
    tok = CharTokenizer.from_text(text, special_tokens=[EOT], unk_token="<unk>")
    path = tmp_path / "char.json"
    tok.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    loaded = CharTokenizer.load(path)
    assert loaded.chars == tok.chars and loaded.special_tokens == tok.special_tokens
    assert loaded.encode(text + EOT + "?!") == tok.encode(text + EOT + "?!")
    assert loaded.encode("Z") == [tok.special_tokens["<unk>"]]

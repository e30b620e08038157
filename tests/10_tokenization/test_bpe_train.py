"""BPE training: the hand-derived example, the tie rule, agreement with a slow reference,
determinism, the vocabulary size, special tokens and errors."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.text import SPLIT_PATTERN, BPETokenizer

EOT = "<|endoftext|>"


def test_hand_derived_example():
    # "aaabdaaabac" is one chunk; bytes a=97, b=98, c=99, d=100.
    # step 1: counts aa:4 (twice in each "aaab"), ab:2, bd:1, da:1, ba:1, ac:1
    #         -> merge (97, 97) as 256:          [256 a b d 256 a b a c]
    # step 2: (256, 97):2 and (97, 98):2 tie; the smaller pair (97, 98) wins -> 257:
    #                                            [256 257 d 256 257 a c]
    # step 3: (256, 257):2, everything else 1    -> 258:  [258 d 258 a c]
    # step 4: every pair occurs once: stop (vocab_size 259 < 300).
    tok = BPETokenizer().train("aaabdaaabac", 300)
    assert tok.merges == {(97, 97): 256, (97, 98): 257, (256, 257): 258}
    assert list(tok.merges) == [(97, 97), (97, 98), (256, 257)], "merges kept in the order learned"
    assert tok.vocab_size == 259
    assert tok.vocab[256] == b"aa" and tok.vocab[257] == b"ab" and tok.vocab[258] == b"aaab"
    assert tok.encode("aaabdaaabac") == [258, 100, 258, 97, 99]


def test_ties_go_to_the_smallest_pair():
    # chunks "xyab" and " xyab" (the default pattern keeps the space with the word):
    # (x,y)=(120,121):2, (y,a)=(121,97):2, (a,b)=(97,98):2, (' ',x):1 -> smallest (97, 98) -> 256
    # then (120,121):2 and (121,256):2 tie -> (120, 121) -> 257; then (257, 256):2 -> 258;
    # then only (' ', 258):1 is left: stop.
    tok = BPETokenizer().train("xyab xyab", 1000)
    assert list(tok.merges.items()) == [((97, 98), 256), ((120, 121), 257), ((257, 256), 258)]
    # no pre-tokenisation: one chunk "xyab xyab", pairs xy:2, ya:2, ab:2, "b ":1, " x":1
    raw = BPETokenizer(pattern=None).train("xyab xyab", 1000)
    assert list(raw.merges.items()) == [((97, 98), 256), ((120, 121), 257), ((257, 256), 258)]


texts = st.text(alphabet=st.sampled_from("ab c\n.é😀"), max_size=60)


@settings(max_examples=60)
@given(texts, st.integers(256, 300), st.sampled_from([SPLIT_PATTERN, None]))
def test_merges_equal_the_slow_reference(reference, text, vocab_size, pattern):
    tok = BPETokenizer(pattern=pattern).train(text, vocab_size)
    expected = reference["train"](text, vocab_size, pattern)
    assert list(tok.merges) == expected
    assert list(tok.merges.values()) == list(range(256, 256 + len(expected)))
    assert tok.vocab_size == 256 + len(expected) <= vocab_size


def test_merges_equal_the_slow_reference_on_the_fables(reference, fables):
    text = fables[:3000]
    tok = BPETokenizer().train(text, 330)
    assert list(tok.merges) == reference["train"](text, 330, SPLIT_PATTERN)
    assert tok.vocab_size == 330


def test_training_is_deterministic_and_greedy(fables):
    text = fables[:20000]
    a = BPETokenizer().train(text, 400)
    b = BPETokenizer().train(text, 400)
    assert list(a.merges.items()) == list(b.merges.items())
    smaller = BPETokenizer().train(text, 330)
    assert list(a.merges.items())[:74] == list(smaller.merges.items()), \
        "the merges of a smaller vocabulary are the first merges of a larger one"


def test_bpe_tokenizer_train_replaces_the_previous_training_and_its_cache(fables):
    tok = BPETokenizer().train("aaabdaaabac", 300, special_tokens=["<x>"])
    tok.encode(fables[:500])   # fills the cache with the first training's ids
    tok.train(fables[:4000], 300)
    fresh = BPETokenizer().train(fables[:4000], 300)
    assert tok.merges == fresh.merges and tok.special_tokens == {}
    assert tok.encode(fables[:500]) == fresh.encode(fables[:500])


@pytest.mark.parametrize("vocab_size,specials", [(300, ()), (512, (EOT,)), (600, (EOT, "<pad>"))])
def test_vocab_size_is_honoured(fables, vocab_size, specials):
    tok = BPETokenizer().train(fables, vocab_size, special_tokens=specials)
    assert tok.vocab_size == vocab_size
    n_merges = vocab_size - 256 - len(specials)
    assert len(tok.merges) == n_merges
    assert list(tok.merges.values()) == list(range(256, 256 + n_merges))
    assert tok.special_tokens == {s: 256 + n_merges + k for k, s in enumerate(specials)}
    assert set(tok.vocab) == set(range(256 + n_merges))


def test_vocab_is_derived_from_the_merges(fables_bpe):
    assert all(fables_bpe.vocab[i] == bytes([i]) for i in range(256))
    for (a, b), new_id in fables_bpe.merges.items():
        assert a < new_id and b < new_id
        assert fables_bpe.vocab[new_id] == fables_bpe.vocab[a] + fables_bpe.vocab[b]
    assert len(set(fables_bpe.vocab.values())) == len(fables_bpe.vocab), "every token is new"


def test_training_stops_when_no_pair_repeats():
    tok = BPETokenizer().train("abcdefg", 400, special_tokens=[EOT])
    assert tok.merges == {} and tok.vocab_size == 257 and tok.special_tokens == {EOT: 256}
    assert BPETokenizer().train("", 300).vocab_size == 256


def test_special_tokens_are_cut_out_of_the_training_text():
    text = (EOT + "hi there ") * 40
    tok = BPETokenizer().train(text, 400, special_tokens=[EOT])
    learned = [tok.vocab[i] for i in tok.merges.values()]
    assert learned, "the rest of the text has repeated pairs"
    assert not any(b"<" in t or b"|" in t or b">" in t for t in learned), learned
    plain = BPETokenizer().train(text, 400)
    assert any(b"|" in plain.vocab[i] for i in plain.merges.values()), \
        "without registering it, the marker's bytes are ordinary text"


def test_training_errors():
    with pytest.raises(ValueError, match="256"):
        BPETokenizer().train("hello", 255)
    with pytest.raises(ValueError):
        BPETokenizer().train("hello", 256, special_tokens=[EOT])
    with pytest.raises(TypeError):
        BPETokenizer().train("hello", 300.0)
    with pytest.raises(ValueError):
        BPETokenizer().train("hello", 300, special_tokens=[EOT, EOT])
    with pytest.raises(ValueError):
        BPETokenizer().train("hello", 300, special_tokens=[""])


def test_bpe_tokenizer_train_splits_with_its_own_pattern():
    # "a.a.a.a.": the default pattern cuts it into one-character chunks (letters, punctuation),
    # which hold no pair at all; without pre-tokenisation, (a, .) occurs 4 times.
    assert BPETokenizer().train("a.a.a.a.", 300).merges == {}
    raw = BPETokenizer(pattern=None).train("a.a.a.a.", 300)
    assert list(raw.merges.items()) == [((97, 46), 256), ((256, 256), 257)]

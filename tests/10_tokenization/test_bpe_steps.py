"""The BPE steps as functions: best_pair (the tie rule and the stop rule), learn_merges (the
merge loop on distinct chunks), build_vocab, encode_chunk (merges replayed by rank) and the
saved state."""
import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from tinytorch.text import SPLIT_PATTERN, BPETokenizer, merge_pair
from tinytorch.text.tokenizers import _bpe_state, best_pair, build_vocab, encode_chunk, learn_merges


def _slow_merges(words, freqs, n_merges):
    words, merges = [list(w) for w in words], {}
    while len(merges) < n_merges:
        counts = Counter()
        for word, freq in zip(words, freqs):
            for pair in zip(word, word[1:]):
                counts[pair] += freq
        top = max(counts.values(), default=0)
        if top < 2:
            break
        pair = min(p for p, c in counts.items() if c == top)
        merges[pair] = 256 + len(merges)
        words = [merge_pair(w, pair, merges[pair]) for w in words]
    return merges


def test_best_pair_highest_count_then_smallest_pair():
    assert best_pair({(5, 6): 3, (1, 2): 2}) == (5, 6)
    assert best_pair({(5, 6): 2, (1, 2): 2, (0, 9): 1}) == (1, 2)
    assert best_pair({(1, 2): 2, (5, 6): 2}) == (1, 2)
    assert best_pair({(2, 9): 4, (2, 1): 4}) == (2, 1)
    assert best_pair({(9, 0): 7, (3, 300): 7, (3, 257): 7}) == (3, 257)


def test_best_pair_stop_rule():
    assert best_pair({}) is None
    assert best_pair({(3, 4): 1, (0, 1): 1}) is None
    assert best_pair({(3, 4): 2}) == (3, 4)


@settings(max_examples=60)
@given(st.dictionaries(st.tuples(st.integers(0, 6), st.integers(0, 6)), st.integers(1, 4), max_size=12))
def test_best_pair_equals_a_sort(counts):
    ranked = sorted(counts, key=lambda p: (-counts[p], p))
    expected = ranked[0] if ranked and counts[ranked[0]] >= 2 else None
    assert best_pair(counts) == expected
    assert best_pair(dict(reversed(list(counts.items())))) == expected, "independent of insertion order"


def test_learn_merges_hand_example_and_limits():
    words = [list(b"aaabdaaabac")]
    assert list(learn_merges(words, [1], 10).items()) == [((97, 97), 256), ((97, 98), 257), ((256, 257), 258)]
    assert learn_merges(words, [1], 1) == {(97, 97): 256}
    assert learn_merges(words, [1], 0) == {}
    assert words == [list(b"aaabdaaabac")], "inputs are not modified"


def test_learn_merges_weights_and_word_boundaries():
    assert learn_merges([[1, 2], [3, 4]], [1, 5], 5) == {(3, 4): 256}
    assert learn_merges([[1, 2], [3, 4]], [5, 1], 5) == {(1, 2): 256}
    assert learn_merges([[1], [1], [1], [2, 1]], [1, 1, 1, 1], 5) == {}
    assert learn_merges([[1, 2], [1, 2]], [1, 1], 5) == {(1, 2): 256}


@settings(max_examples=60)
@given(st.lists(st.lists(st.integers(0, 3), max_size=10), max_size=6), st.data(), st.integers(0, 30))
def test_learn_merges_equals_recounting(words, data, n_merges):
    freqs = data.draw(st.lists(st.integers(1, 4), min_size=len(words), max_size=len(words)))
    assert list(learn_merges(words, freqs, n_merges).items()) == list(_slow_merges(words, freqs, n_merges).items())


def test_learn_merges_on_the_fables(fables):
    chunks = Counter(BPETokenizer()._regex.findall(fables[:6000]))
    words, freqs = [list(c.encode("utf-8")) for c in chunks], list(chunks.values())
    assert list(learn_merges(words, freqs, 80).items()) == list(_slow_merges(words, freqs, 80).items())


def test_build_vocab():
    vocab = build_vocab({(97, 97): 256, (256, 98): 257, (32, 257): 258})
    assert len(vocab) == 259
    assert all(vocab[i] == bytes([i]) for i in range(256))
    assert vocab[256] == b"aa" and vocab[257] == b"aab" and vocab[258] == b" aab"
    assert build_vocab({}) == {i: bytes([i]) for i in range(256)}


def test_encode_chunk_uses_rank_order():
    assert encode_chunk([1, 2, 3], {(1, 2): 256, (2, 3): 257}) == [256, 3]
    assert encode_chunk([1, 2, 3], {(2, 3): 256, (1, 2): 257}) == [1, 256]
    assert encode_chunk([1, 2, 3, 4], {(3, 4): 256, (1, 2): 257, (257, 256): 258}) == [258]
    assert encode_chunk(b"aaabdaaabac", {(97, 97): 256, (97, 98): 257, (256, 257): 258}) == [258, 100, 258, 97, 99]
    assert encode_chunk(b"", {(1, 2): 256}) == []
    assert encode_chunk(b"xy", {}) == [120, 121]


def test_encode_chunk_of_the_fables_tokenizer(fables_bpe, reference):
    for word in [" the", " tortoise", "Mañana", " grapes", "😀😀"]:
        assert encode_chunk(word.encode("utf-8"), fables_bpe.merges) == \
            reference["encode"](list(fables_bpe.merges), word, None)


def test_saved_state_is_plain_json_in_rank_order(fables_bpe):
    state = _bpe_state(fables_bpe)
    assert json.loads(json.dumps(state)) == state
    assert state["format"] == "tinytorch-bpe-tokenizer" and state["version"] == 1
    assert state["pattern"] == SPLIT_PATTERN
    assert state["merges"] == [[a, b] for a, b in fables_bpe.merges]
    assert state["special_tokens"] == fables_bpe.special_tokens

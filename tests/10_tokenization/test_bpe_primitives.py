"""get_pair_counts and merge_pair, the two building blocks of BPE."""
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from tinytorch.text import get_pair_counts, merge_pair

ids_lists = st.lists(st.integers(0, 5), max_size=40)


@given(ids_lists)
def test_pair_counts_equal_counter_of_adjacent_pairs(ids):
    assert get_pair_counts(ids) == dict(Counter(zip(ids, ids[1:])))
    assert get_pair_counts(tuple(ids)) == dict(Counter(zip(ids, ids[1:])))


@given(ids_lists, ids_lists, st.integers(1, 7))
def test_pair_counts_accumulate_with_weights(a, b, weight):
    counts = get_pair_counts(a)
    out = get_pair_counts(b, counts, weight=weight)
    assert out is counts
    expected = Counter(zip(a, a[1:]))
    for pair, c in Counter(zip(b, b[1:])).items():
        expected[pair] += weight * c
    assert counts == dict(expected)


def _reference_merge(ids, pair, new_id):
    """str.replace is left-to-right and non-overlapping: write ids as characters."""
    s = "".join(chr(0x4E00 + i) for i in ids)
    s = s.replace(chr(0x4E00 + pair[0]) + chr(0x4E00 + pair[1]), chr(0x4E00 + new_id))
    return [ord(c) - 0x4E00 for c in s]


@given(ids_lists, st.tuples(st.integers(0, 5), st.integers(0, 5)))
def test_merge_pair_equals_left_to_right_replace(ids, pair):
    before = list(ids)
    out = merge_pair(ids, pair, 99)
    assert out == _reference_merge(ids, pair, 99)
    assert ids == before, "merge_pair must not modify its input"
    assert len(out) == len(ids) - out.count(99)


def test_merge_pair_overlaps_and_edges():
    assert merge_pair([7, 7, 7], (7, 7), 9) == [9, 7]
    assert merge_pair([7, 7, 7, 7, 7], (7, 7), 9) == [9, 9, 7]
    assert merge_pair([1, 2, 1, 2, 1], (1, 2), 5) == [5, 5, 1]
    assert merge_pair([2, 1], (1, 2), 5) == [2, 1]
    assert merge_pair([1], (1, 2), 5) == [1]
    assert merge_pair([], (1, 2), 5) == []

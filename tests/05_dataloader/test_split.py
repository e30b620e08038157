"""random_split (PyTorch's sizes, disjoint, reproducible) and stratified_split."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.data import Generator, Subset, TensorDataset, random_split, stratified_split


def values(subset):
    return [subset[k][0].item() for k in range(len(subset))]


def test_random_split_int_lengths_give_disjoint_covering_subsets():
    ds = TensorDataset(tt.arange(20))
    parts = random_split(ds, [10, 7, 3], generator=Generator().manual_seed(0))
    assert [len(p) for p in parts] == [10, 7, 3]
    assert all(isinstance(p, Subset) and p.dataset is ds for p in parts)
    got = [v for p in parts for v in values(p)]
    assert sorted(got) == list(range(20))
    assert got != list(range(20)), "the split is random, not the first 10 / next 7 / last 3"


def test_subset_getitem_reads_the_dataset_at_its_indices():
    sub = Subset(TensorDataset(tt.arange(10) * 10), [7, 2, 5])
    got = [sub[k][0].item() for k in range(3)]
    assert got == [70, 20, 50], f"Subset(ds, [7, 2, 5])[k] is ds[[7, 2, 5][k]]: expected [70, 20, 50], got {got}"


def test_subset_len_is_the_number_of_its_indices():
    ds = TensorDataset(tt.arange(10))
    assert (len(Subset(ds, [7, 2, 5])), len(Subset(ds, []))) == (3, 0), "len(Subset) counts its indices"


@pytest.mark.parametrize("n,fractions", [
    (10, [0.5, 0.3, 0.2]), (11, [0.5, 0.3, 0.2]), (12, [0.1] * 10), (5, [1 / 3] * 3),
    (1797, [0.8, 0.2]), (3, [0.5, 0.5]), (100, [0.7, 0.15, 0.15]), (4, [1.0]),
])
def test_random_split_fraction_lengths_match_torch(torch, n, fractions):
    ours = random_split(TensorDataset(tt.arange(n)), fractions, generator=Generator().manual_seed(1))
    theirs = torch.utils.data.random_split(range(n), fractions, generator=torch.Generator().manual_seed(1))
    assert [len(p) for p in ours] == [len(p) for p in theirs]
    assert sorted(v for p in ours for v in values(p)) == list(range(n))


def test_random_split_is_reproducible_and_seed_dependent():
    ds = TensorDataset(tt.arange(30))
    a = [values(p) for p in random_split(ds, [0.6, 0.4], generator=Generator().manual_seed(4))]
    b = [values(p) for p in random_split(ds, [18, 12], generator=Generator().manual_seed(4))]
    c = [values(p) for p in random_split(ds, [18, 12], generator=Generator().manual_seed(5))]
    assert a == b
    assert a != c
    tt.manual_seed(11)
    d = [values(p) for p in random_split(ds, [18, 12])]
    tt.manual_seed(11)
    e = [values(p) for p in random_split(ds, [18, 12])]
    assert d == e, "without a generator, tinytorch.manual_seed makes the split reproducible"


def test_random_split_empty_pieces_and_subsets_of_subsets():
    ds = TensorDataset(tt.arange(10) * 10)
    full, empty = random_split(ds, [10, 0], generator=Generator().manual_seed(0))
    assert len(empty) == 0 and sorted(values(full)) == [10 * i for i in range(10)]
    outer, _ = random_split(ds, [6, 4], generator=Generator().manual_seed(0))
    inner_a, inner_b = random_split(outer, [3, 3], generator=Generator().manual_seed(1))
    assert sorted(values(inner_a) + values(inner_b)) == sorted(values(outer))


@pytest.mark.parametrize("lengths, why", [
    ([5, 4], "counts that sum to 9, not the dataset's 10"),
    ([6, 6], "counts that sum to 12, not the dataset's 10"),
    ([1.2, -0.2], "a fraction outside [0, 1]"),
    ([0.5, 0.4], "fractions that sum to 0.9, not 1"),
    ([0.5, 0.5 + 1e-12], "fractions that sum to just above 1 (PyTorch refuses it too)"),
])
def test_random_split_refuses_bad_lengths(lengths, why):
    ds = TensorDataset(tt.arange(10))
    with pytest.raises(ValueError):
        random_split(ds, lengths)
        pytest.fail(f"random_split of 10 samples into {lengths} ({why}) must raise ValueError")


def test_stratified_split_keeps_class_proportions():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), [10, 25, 7, 58])
    rng.shuffle(labels)
    train, test = stratified_split(labels, test_fraction=0.3, seed=2)
    assert train.dtype == np.int64 and test.dtype == np.int64
    assert (np.diff(train) > 0).all() and (np.diff(test) > 0).all(), "sorted, no repeats"
    assert len(np.intersect1d(train, test)) == 0
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(len(labels)))
    for c, n_c in enumerate([10, 25, 7, 58]):
        assert (labels[test] == c).sum() == round(0.3 * n_c)


def test_stratified_split_is_fixed_by_its_seed_alone():
    labels = np.arange(200) % 5
    tt.manual_seed(0)
    a = stratified_split(labels, 0.2, seed=0)
    tt.manual_seed(1)
    tt.rand(5)
    b = stratified_split(labels, 0.2, seed=0)
    c = stratified_split(labels, 0.2, seed=1)
    assert all((x == y).all() for x, y in zip(a, b)), "the global RNG must not matter"
    assert not np.array_equal(a[1], c[1]), "another seed gives another split"
    assert a[1].max() >= 40, "the test side is a random draw, not each class's first 8 samples"
    with pytest.raises(ValueError):
        stratified_split(labels, 1.5)


@pytest.mark.parametrize("lengths", [[12, -2], [2.5, 7.5], [-1, 11], [3.0, 7.5]])
def test_random_split_refuses_lengths_that_are_not_whole_non_negative_numbers(lengths):
    from tinytorch.data import TensorDataset, random_split

    with pytest.raises(ValueError):
        random_split(TensorDataset(np.arange(10)), lengths)
        pytest.fail(f"random_split of 10 samples into {lengths} must raise ValueError (lengths are whole, "
                    "non-negative counts or fractions)")

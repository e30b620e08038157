"""DataLoader: each sample once per epoch, the last batch, len(), seeded shuffling."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinytorch as tt
from tinytorch.data import DataLoader, Dataset, Generator, TensorDataset


class Range(Dataset):
    """Sample i is the Python int i (collated into an int64 tensor)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        return index


def epoch(loader):
    return [batch.tolist() for batch in loader]


def index_epoch(loader):
    """One epoch of index batches, straight from _index_batches (no collate, no len)."""
    return [list(b) for b in loader._index_batches()]


def flat(batches):
    return [i for b in batches for i in b]


@pytest.mark.parametrize("n", [1, 7, 10, 12])
@pytest.mark.parametrize("batch_size", [1, 3, 4, 5, 12, 20])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_index_batches_hold_each_sample_once_per_epoch(n, batch_size, shuffle, drop_last):
    loader = DataLoader(Range(n), batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                        generator=Generator().manual_seed(100 * n + batch_size))
    what = f"N={n}, batch_size={batch_size}, shuffle={shuffle}, drop_last={drop_last}"
    for _ in range(2):  # every epoch, not just the first
        batches = index_epoch(loader)
        seen = flat(batches)
        assert len(seen) == len(set(seen)), f"a sample came twice in one epoch ({what}): {batches}"
        if drop_last:
            assert len(seen) == (n // batch_size) * batch_size, (
                f"drop_last keeps the {(n // batch_size) * batch_size} samples of the full batches ({what}): {batches}")
            assert all(len(b) == batch_size for b in batches), f"drop_last: only full batches ({what}): {batches}"
        else:
            assert sorted(seen) == list(range(n)), f"not every sample was seen ({what}): {batches}"
        if not shuffle:
            assert seen == list(range(len(seen))), f"without shuffle the order is 0..N-1 ({what}): {batches}"


@pytest.mark.parametrize("n, batch_size", [(10, 3), (12, 4), (7, 10), (0, 3)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_dataloader_len_equals_the_batches_an_epoch_yields(n, batch_size, drop_last):
    loader = DataLoader(Range(n), batch_size=batch_size, drop_last=drop_last)
    want = n // batch_size if drop_last else math.ceil(n / batch_size)
    assert len(loader) == want, f"len(loader), N={n}, batch_size={batch_size}, drop_last={drop_last}: {want} batches"


@pytest.mark.parametrize("n,batch_size", [(10, 4), (12, 4), (10, 3), (10, 10), (10, 11), (1, 1), (13, 5)])
def test_index_batches_the_last_batch(n, batch_size):
    n_batches = math.ceil(n / batch_size)
    expected_last = n - batch_size * (n_batches - 1)
    sizes = [len(b) for b in index_epoch(DataLoader(Range(n), batch_size=batch_size))]
    assert sizes == [batch_size] * (n_batches - 1) + [expected_last], f"batch sizes for N={n}, batch_size={batch_size}"
    shuffled = [len(b) for b in index_epoch(DataLoader(Range(n), batch_size=batch_size, shuffle=True))]
    assert shuffled == sizes, "shuffling changes the order, not the batch sizes"
    dropped = [len(b) for b in index_epoch(DataLoader(Range(n), batch_size=batch_size, drop_last=True))]
    assert dropped == [batch_size] * (n // batch_size), f"drop_last batch sizes for N={n}, batch_size={batch_size}"


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 100])
@pytest.mark.parametrize("batch_size", [1, 3, 10, 64])
@pytest.mark.parametrize("drop_last", [False, True])
def test_len_and_batch_sizes_match_torch(torch, n, batch_size, drop_last):
    ours = DataLoader(Range(n), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(range(n), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert [len(b) for b in epoch(ours)] == [len(b) for b in theirs]


def test_len_formula_and_bad_batch_size():
    assert len(DataLoader(Range(10), batch_size=3)) == 4
    assert len(DataLoader(Range(10), batch_size=3, drop_last=True)) == 3
    assert len(DataLoader(Range(9), batch_size=3)) == len(DataLoader(Range(9), batch_size=3, drop_last=True)) == 3
    assert len(DataLoader(Range(5))) == 5, "batch_size defaults to 1"
    for bad in (0, -2, 2.5):
        with pytest.raises(ValueError):
            DataLoader(Range(5), batch_size=bad)


def test_index_batches_same_seed_same_epochs_and_another_seed_differs():
    def run(seed):
        loader = DataLoader(Range(50), batch_size=8, shuffle=True, generator=Generator().manual_seed(seed))
        return [flat(index_epoch(loader)) for _ in range(3)]

    a, b, c = run(7), run(7), run(8)
    assert a == b, "the same generator seed must give the same sequence of epochs"
    assert a[0] != c[0], "a different seed must give a different order"
    for order in a + c:
        assert sorted(order) == list(range(50))


def test_index_batches_a_new_order_each_epoch():
    loader = DataLoader(Range(40), batch_size=5, shuffle=True, generator=Generator().manual_seed(0))
    orders = [flat(index_epoch(loader)) for _ in range(4)]
    assert all(sorted(o) == list(range(40)) for o in orders)
    assert len({tuple(o) for o in orders}) == 4, "each epoch must draw a fresh permutation"
    assert orders[0] != list(range(40)), "shuffle=True must actually shuffle"


def test_index_batches_without_a_generator_follow_tinytorch_manual_seed():
    def run():
        loader = DataLoader(Range(30), batch_size=4, shuffle=True)
        return [flat(index_epoch(loader)) for _ in range(2)]

    tt.manual_seed(5)
    first = run()
    tt.manual_seed(5)
    second = run()
    tt.manual_seed(6)
    other = run()
    assert first == second, "tinytorch.manual_seed must make shuffling reproducible"
    assert first[0] != other[0]
    assert first[0] != first[1]


def test_index_batches_with_an_own_generator_ignore_the_global_rng():
    tt.manual_seed(0)
    a = flat(index_epoch(DataLoader(Range(30), batch_size=4, shuffle=True, generator=Generator().manual_seed(3))))
    tt.manual_seed(99)
    tt.rand(10)
    b = flat(index_epoch(DataLoader(Range(30), batch_size=4, shuffle=True, generator=Generator().manual_seed(3))))
    assert a == b, "a loader with its own generator must not depend on the global random state"


def test_batches_of_a_tensor_dataset_hold_the_right_rows():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((23, 2, 3)).astype(np.float32)
    ids = np.arange(23)
    loader = DataLoader(TensorDataset(X, ids), batch_size=6, shuffle=True,
                        generator=Generator().manual_seed(2))
    seen = []
    for xb, ib in loader:
        assert isinstance(xb, tt.Tensor) and xb.shape[1:] == (2, 3) and xb.dtype == np.float32
        assert ib.dtype == np.int64 and xb.shape[0] == ib.shape[0]
        np.testing.assert_array_equal(xb.numpy(), X[ib.numpy()])
        seen += ib.tolist()
    assert sorted(seen) == list(range(23))


def test_dataloader_iter_hands_the_samples_to_a_custom_collate_fn():
    got = []

    def collate(samples):
        got.append(list(samples))
        return sum(samples)

    sums = [batch for batch in DataLoader(Range(7), batch_size=3, collate_fn=collate)]
    assert got == [[0, 1, 2], [3, 4, 5], [6]], f"collate_fn must receive each batch's list of samples, got {got}"
    assert sums == [3, 12, 6], f"the loader yields what collate_fn returns, got {sums}"


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), batch_size=st.integers(1, 15), shuffle=st.booleans(),
       drop_last=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_epoch_properties(n, batch_size, shuffle, drop_last, seed):
    loader = DataLoader(Range(n), batch_size=batch_size, shuffle=shuffle, drop_last=drop_last,
                        generator=Generator().manual_seed(seed))
    batches = epoch(loader)
    seen = flat(batches)
    assert len(batches) == len(loader)
    assert len(seen) == len(set(seen)) and set(seen) <= set(range(n))
    assert len(seen) == (n // batch_size * batch_size if drop_last else n)
    assert all(len(b) == batch_size for b in batches[:-1])
    if batches:
        assert 1 <= len(batches[-1]) <= batch_size


@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (4, False), (10, False)])
def test_index_batches_follow_the_samplers_order(batch_size, drop_last):
    """With sampler=, the epoch's order is the sampler's indices (repeats and a subset
    included), cut into batches as usual; len() counts the sampler's indices."""
    order = [7, 2, 2, 9, 0, 5, 3]
    loader = DataLoader(Range(10), batch_size=batch_size, sampler=order, drop_last=drop_last)
    batches = index_epoch(loader)
    kept = len(order) - (len(order) % batch_size if drop_last else 0)
    assert flat(batches) == order[:kept], f"batches {batches} do not follow the sampler's order {order}"
    assert all(len(b) == batch_size for b in batches[:-1] if b)


@pytest.mark.parametrize("shuffle", [False, True])
def test_index_batches_are_lists_of_python_ints(shuffle):
    """A dataset may use an index as a key or in arithmetic with Python semantics; a numpy
    integer is neither an int subclass nor hashed like one in every container."""
    loader = DataLoader(Range(10), batch_size=4, shuffle=shuffle)
    batches = [list(b) for b in loader._index_batches()]
    assert {type(i) for b in batches for i in b} == {int}, batches


@pytest.mark.parametrize("batch_size, drop_last, expected", [(3, False, 3), (3, True, 2), (10, False, 1)])
def test_dataloader_len_counts_the_samplers_indices(batch_size, drop_last, expected):
    loader = DataLoader(Range(10), batch_size=batch_size, sampler=[7, 2, 2, 9, 0, 5, 3], drop_last=drop_last)
    assert len(loader) == expected, f"len(loader) with a sampler of 7 indices of a 10-sample dataset, " \
                                    f"batch_size {batch_size}, drop_last {drop_last}"


def test_index_batches_ask_a_random_sampler_for_a_new_order_each_epoch():
    from tinytorch.data import RandomSampler

    loader = DataLoader(Range(12), batch_size=5, sampler=RandomSampler(Range(12), generator=Generator().manual_seed(3)))
    first, second = flat(index_epoch(loader)), flat(index_epoch(loader))
    assert sorted(first) == sorted(second) == list(range(12)), f"each epoch visits every sample once: {first}"
    assert first != second, "the sampler is asked for a new order each epoch"
    assert len(loader) == 3, "len(loader): 12 indices in batches of 5"


def test_sampler_and_shuffle_are_exclusive_and_the_worker_options_are_accepted():
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Range(4), sampler=[0, 1], shuffle=True)
    for options in ({"batch_size": 2}, {"shuffle": True}, {"sampler": [0, 1]}, {"drop_last": True}):
        with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
            DataLoader(Range(4), batch_sampler=[[0, 1]], **options)
    loader = DataLoader(Range(5), batch_size=2, num_workers=2, pin_memory=True, persistent_workers=True)
    assert epoch(loader) == [[0, 1], [2, 3], [4]], "num_workers and pin_memory change nothing"


def test_index_batches_are_the_lists_of_a_batch_sampler():
    lists = [[3, 1], [0, 2, 9, 4], [8], [5, 6, 7]]
    loader = DataLoader(Range(10), batch_sampler=lists)
    assert index_epoch(loader) == lists, "with batch_sampler=, its lists are the batches, as they are"
    assert epoch(loader) == lists, "iterating the loader collates the batch sampler's lists"
    batches = index_epoch(DataLoader(Range(10), batch_sampler=[np.array([2, 0]), (1,)]))
    assert batches == [[2, 0], [1]] and {type(i) for b in batches for i in b} == {int}, \
        "a batch sampler's arrays and tuples become lists of Python ints"


def test_dataloader_len_is_the_number_of_lists_of_a_batch_sampler():
    sampler = tt.data.BatchSampler(range(10), 4, drop_last=False)
    loader = DataLoader(Range(10), batch_sampler=sampler)
    assert len(loader) == 3, "len(loader) with BatchSampler(range(10), 4, False)"
    assert len(DataLoader(Range(10), batch_sampler=tt.data.BatchSampler(range(10), 4, drop_last=True))) == 2


def test_dataloader_iter_reads_one_batch_at_a_time():
    class CountingReads(Range):
        reads = 0

        def __getitem__(self, index):
            CountingReads.reads += 1
            return index

    batches = iter(DataLoader(CountingReads(10), batch_size=4))
    next(batches)
    assert CountingReads.reads == 4, \
        f"the first batch of 4 must read 4 samples (one batch at a time), read {CountingReads.reads}"
    assert sum(1 for _ in batches) == 2
    assert CountingReads.reads == 10, f"an epoch of 10 samples reads each once, read {CountingReads.reads}"

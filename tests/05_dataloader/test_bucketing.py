"""Variable-length batches: pad_collate, and the bucketing batch sampler's contract and trade-off."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.data import BucketBatchSampler, DataLoader, Dataset, Generator, pad_collate

LENGTHS = np.random.default_rng(1).integers(1, 200, 2000)   # 2,000 samples of 1..199 tokens
B = 16


def padding(lengths, batches):
    """The fraction of the padded batches' positions that are padding."""
    real = sum(int(lengths[b].sum()) for b in batches)
    return 1 - real / sum(len(b) * int(lengths[b].max()) for b in batches)


def mixing(epoch_a, epoch_b):
    """The fraction of the pairs sharing a batch in epoch_a that share one again in epoch_b."""
    def pairs(batches):
        return {(i, j) for b in batches for i in b for j in b if i < j}
    a = pairs(epoch_a)
    return len(a & pairs(epoch_b)) / len(a)


def epochs(lengths, batch_size, pool, seed=0, count=2):
    sampler = BucketBatchSampler(lengths, batch_size, pool=pool, generator=Generator().manual_seed(seed))
    return [list(sampler) for _ in range(count)]


def sorted_padding(lengths, batch_size):
    """The padding of the dataset sorted by length and cut into batches, the larger of the two
    directions (the short batch among the shortest or among the longest samples)."""
    def cut(order):
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    return max(padding(lengths, cut(np.argsort(lengths, kind="stable"))),
               padding(lengths, cut(np.argsort(-lengths, kind="stable"))))


@pytest.mark.parametrize("n,batch_size,pool", [(1, 1, 1), (10, 3, 1), (10, 3, 2), (37, 4, 3), (64, 8, 8),
                                               (5, 8, 2), (100, 7, 100), (33, 1, 4)])
def test_bucket_batch_sampler_iter_yields_each_index_once_in_full_batches(n, batch_size, pool):
    lengths = np.random.default_rng(n).integers(1, 30, n)
    for epoch in epochs(lengths, batch_size, pool):
        assert {type(i) for b in epoch for i in b} == {int}, "indices are Python ints"
        assert sorted(i for b in epoch for i in b) == list(range(n)), "each index exactly once per epoch"
        short = [len(b) for b in epoch if len(b) != batch_size]
        assert len(short) <= 1 and all(0 < k < batch_size for k in short), \
            f"every batch holds batch_size={batch_size} indices except at most one: {[len(b) for b in epoch]}"


@pytest.mark.parametrize("n,batch_size,pool", [(1, 1, 1), (10, 3, 2), (37, 4, 3), (64, 8, 8), (5, 8, 2), (2000, B, 8)])
def test_bucket_batch_sampler_len_equals_the_batches_an_epoch_yields(n, batch_size, pool):
    lengths = np.random.default_rng(n).integers(1, 30, n)
    sampler = BucketBatchSampler(lengths, batch_size, pool=pool, generator=Generator().manual_seed(0))
    assert len(sampler) == -(-n // batch_size), "as many batches as shuffled batching: all full but at most one"


def test_bucket_batch_sampler_iter_draws_each_epoch_from_its_generator():
    first, second = epochs(LENGTHS, B, 8, seed=3)
    assert first != second, "two epochs differ"
    assert epochs(LENGTHS, B, 8, seed=3, count=1)[0] == first, "the same seed gives the same epoch"
    assert epochs(LENGTHS, B, 8, seed=4, count=1)[0] != first, "another seed gives another epoch"
    runs = []
    for _ in range(2):
        tt.manual_seed(7)
        runs.append(list(BucketBatchSampler(LENGTHS, B, pool=8)))
    assert runs[0] == runs[1], "without a generator: tinytorch.manual_seed makes the epoch repeatable"


def test_bucket_batch_sampler_iter_pool_1_pads_like_shuffled_batches():
    pads = [padding(LENGTHS, epochs(LENGTHS, B, 1, seed=s, count=1)[0]) for s in range(3)]
    assert min(pads) > 0.40, f"pool=1 arranges nothing: shuffled batches pad about 46% here, got {pads}"


def test_bucket_batch_sampler_iter_whole_pool_pads_like_sorted_batches():
    best = sorted_padding(LENGTHS, B)
    for pool in (-(-len(LENGTHS) // B), 10_000):
        pad = padding(LENGTHS, epochs(LENGTHS, B, pool, count=1)[0])
        assert pad <= best + 0.01, f"pool={pool} may arrange the whole dataset: padding {pad:.3f}, sorted {best:.3f}"


@pytest.mark.parametrize("seed", [0, 1])
def test_bucket_batch_sampler_iter_middle_pools_save_padding_and_keep_mixing(seed):
    pads, mixes = {}, {}
    for pool in (1, 4, 16):
        first, second = epochs(LENGTHS, B, pool, seed=seed)
        pads[pool], mixes[pool] = padding(LENGTHS, first), mixing(first, second)
    assert pads[4] < 0.25 and mixes[4] < 0.05, f"pool=4: padding {pads[4]:.3f} (< 0.25), mixing {mixes[4]:.3f} (< 0.05)"
    assert pads[16] < 0.09 and mixes[16] < 0.15, \
        f"pool=16: padding {pads[16]:.3f} (< 0.09), mixing {mixes[16]:.3f} (< 0.15)"
    assert pads[1] > pads[4] > pads[16], f"a larger pool pads less: {pads}"


def test_bucket_batch_sampler_iter_serves_batches_out_of_length_order():
    whole = -(-len(LENGTHS) // B)
    firsts = set()
    for seed in range(4):
        maxes = [int(LENGTHS[b].max()) for b in epochs(LENGTHS, B, whole, seed=seed, count=1)[0]]
        assert maxes != sorted(maxes) and maxes != sorted(maxes, reverse=True), "batches served in length order"
        firsts.add(maxes[0])
    assert len(firsts) > 1, f"the first batch always has the same length: {firsts}"


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": 2.0}, {"pool": 0}, {"pool": True}])
def test_bucket_batch_sampler_refuses_bad_arguments_and_iter_takes_good_ones(kwargs):
    args = {"batch_size": 2, "pool": 2, **kwargs}
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        BucketBatchSampler([3, 1, 2], **args)
    with pytest.raises(ValueError, match="1-D"):
        BucketBatchSampler([[3, 1], [2, 2]], 2)
    assert sorted(i for b in BucketBatchSampler([3, 1, 2], 2, pool=2) for i in b) == [0, 1, 2]


def test_pad_collate_pads_after_each_sequence_to_the_longest_in_the_batch():
    padded, lengths, targets = pad_collate([([7, 8], 1), (np.array([1, 2, 3, 4]), 0), (tt.tensor(np.array([5])), 1)])
    assert padded.shape == (3, 4) and str(padded.dtype) == "int64"
    assert padded.numpy().tolist() == [[7, 8, 0, 0], [1, 2, 3, 4], [5, 0, 0, 0]]
    assert lengths.numpy().tolist() == [2, 4, 1] and str(lengths.dtype) == "int64"
    assert targets.numpy().tolist() == [1, 0, 1]
    assert pad_collate([([9, 9, 9], 0)])[0].numpy().tolist() == [[9, 9, 9]], "one sequence: no padding"


def test_pad_collate_padding_value_and_nested_targets():
    padded, lengths, targets = pad_collate([([1], (0, 2.5)), ([2, 3, 4], (1, 0.5))], padding_value=-100)
    assert padded.numpy().tolist() == [[1, -100, -100], [2, 3, 4]]
    assert lengths.numpy().tolist() == [1, 3]
    assert [t.numpy().tolist() for t in targets] == [[0, 1], [2.5, 0.5]], "targets go through default_collate"


def test_pad_collate_refuses_a_sequence_that_is_not_1d():
    with pytest.raises(ValueError, match=r"2.*\(1, 2\)"):
        pad_collate([([1], 0), ([2], 0), ([[1, 2]], 0)])


class Sequences(Dataset):
    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, index):
        return np.full(self.lengths[index], index), index


def test_dataloader_iter_with_a_bucketing_batch_sampler_and_pad_collate():
    lengths = np.random.default_rng(5).integers(1, 40, 50)
    sampler = BucketBatchSampler(lengths, 8, pool=3, generator=Generator().manual_seed(0))
    loader = DataLoader(Sequences(lengths), batch_sampler=sampler, collate_fn=pad_collate)
    assert len(loader) == 7
    seen = []
    for padded, lens, index in loader:
        idx = index.numpy()
        seen += idx.tolist()
        assert lens.numpy().tolist() == lengths[idx].tolist()
        assert padded.shape == (len(idx), int(lengths[idx].max()))
        for row, i in zip(padded.numpy(), idx):
            assert row[:lengths[i]].tolist() == [i] * lengths[i] and not row[lengths[i]:].any()
    assert sorted(seen) == list(range(50))

"""The samplers of tinytorch/data/sampler.py (hand-written, PyTorch's torch.utils.data
samplers) and the torch.utils.data import path: orders, lengths, seeds, errors. They need
no student code (module 05's DataLoader is tested with them in tests/05_dataloader)."""
import pytest

import tinytorch as tt
from tinytorch.data import (
    BatchSampler,
    Generator,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)


def test_torch_utils_data_is_the_same_objects():
    import tinytorch.data as data
    import tinytorch.utils.data as utils_data

    for name in ("DataLoader", "Dataset", "TensorDataset", "RandomSampler", "random_split", "Subset"):
        assert getattr(utils_data, name) is getattr(data, name)


def test_sequential_and_random_samplers():
    data = list(range(10))
    assert list(SequentialSampler(data)) == data and len(SequentialSampler(data)) == 10
    sampler = RandomSampler(data, generator=Generator().manual_seed(0))
    first, second = list(sampler), list(sampler)
    assert sorted(first) == data and first != second, "a new permutation every epoch"
    again = list(RandomSampler(data, generator=Generator().manual_seed(0)))
    assert again == first, "the same seed gives the same order"
    more = RandomSampler(data, num_samples=25, generator=Generator().manual_seed(1))
    drawn = list(more)
    assert len(drawn) == len(more) == 25 and all(drawn.count(i) in (2, 3) for i in data)
    with_replacement = list(RandomSampler(data, replacement=True, num_samples=40, generator=Generator().manual_seed(2)))
    assert len(with_replacement) == 40 and set(with_replacement) <= set(data)
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(data, num_samples=0)


def test_the_global_seed_drives_a_sampler_without_a_generator():
    tt.manual_seed(5)
    first = list(RandomSampler(range(20)))
    tt.manual_seed(5)
    assert list(RandomSampler(range(20))) == first


def test_subset_weighted_and_batch_samplers():
    subset = SubsetRandomSampler([3, 8, 1, 6], generator=Generator().manual_seed(0))
    assert sorted(subset) == [1, 3, 6, 8] and len(subset) == 4
    weighted = list(WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=Generator().manual_seed(0)))
    assert set(weighted) == {1, 3} and 0.65 < weighted.count(3) / 200 < 0.85
    with pytest.raises(ValueError, match="non-negative"):
        WeightedRandomSampler([1.0, -1.0], 2)
    assert list(BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2

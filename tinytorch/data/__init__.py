"""tinytorch.data: datasets and the DataLoader (module 05), mirroring torch.utils.data."""
from tinytorch.data.dataloader import (  # noqa: F401  (module 05)
    BucketBatchSampler, DataLoader, Dataset, Digits, Generator, Subset, TensorDataset, default_collate,
    load_digits, load_text, pad_collate, random_split, stratified_split,
)
from tinytorch.data.sampler import (  # noqa: E402,F401  (hand-written: the orders a DataLoader can visit)
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)
from tinytorch.data import transforms  # noqa: E402,F401

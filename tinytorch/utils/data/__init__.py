"""tinytorch.utils.data: PyTorch's path to the data tools, `from torch.utils.data import
DataLoader`. The same objects as `tinytorch.data` (module 05 and its samplers), under the
name PyTorch programs import."""
from tinytorch.data import (  # noqa: F401
    BatchSampler, DataLoader, Dataset, Generator, RandomSampler, Sampler, SequentialSampler, Subset,
    SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate, random_split,
)

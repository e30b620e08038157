"""Samplers: the order in which a DataLoader visits a dataset, mirroring torch.utils.data's.

Why: PyTorch programs choose the order with `DataLoader(dataset, sampler=RandomSampler(...))`
or a `SubsetRandomSampler` over a validation split. Module 05's DataLoader takes any
iterable of indices as its `sampler`; these are the common ones, written over the same
random streams as its shuffling (a Generator of the loader's own, or tinytorch's global
one). Hand-written: no student writes this file.
"""
import numpy as np

from tinytorch.random import numpy_generator

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


class Sampler:
    """Base class: an iterable of dataset indices, with a length."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new permutation of the indices each epoch; with `replacement`, `num_samples`
    independent draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        numpy_generator(generator)  # a wrong generator fails now, not at the first epoch
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        self.data_source, self.replacement, self.generator = data_source, bool(replacement), generator
        self._num_samples = num_samples

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        rng, n = numpy_generator(self.generator), len(self.data_source)
        if self.replacement:
            return iter(rng.integers(0, n, size=self.num_samples).tolist())
        rounds = -(-self.num_samples // n) if n else 0  # more samples than data: whole permutations, then part of one
        order = np.concatenate([rng.permutation(n) for _ in range(rounds)]) if rounds else np.arange(0)
        return iter(order[:self.num_samples].tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a new random order each epoch."""

    def __init__(self, indices, generator=None):
        numpy_generator(generator)
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        order = numpy_generator(self.generator).permutation(len(self.indices))
        return iter([self.indices[i] for i in order])

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1 or (weights < 0).any() or not np.isfinite(weights).all() or weights.sum() <= 0:
            raise ValueError("weights should be a 1-D sequence of non-negative numbers that do not all equal 0")
        if not replacement and num_samples > len(weights):
            raise ValueError("cannot draw more samples than there are weights without replacement")
        numpy_generator(generator)
        self.weights, self.num_samples = weights, int(num_samples)
        self.replacement, self.generator = bool(replacement), generator

    def __iter__(self):
        rng = numpy_generator(self.generator)
        drawn = rng.choice(len(self.weights), size=self.num_samples, replace=self.replacement,
                           p=self.weights / self.weights.sum())
        return iter(drawn.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """The indices of `sampler` in lists of `batch_size` (the last shorter, unless `drop_last`)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, bool(drop_last)

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

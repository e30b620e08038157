# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 05 — DataLoader: feeding a model, one batch at a time
#
# A model learns from data, but not from all of it at once and not from one example at a
# time: it learns from **mini-batches**, small random groups of examples stacked into one
# tensor. In this module you build the machinery that turns a collection of examples into
# such batches, `tinytorch.data`, mirroring PyTorch's `torch.utils.data`. You also meet
# the two datasets the rest of the course trains on, both shipped inside the package so
# that nothing is ever downloaded.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain the **Dataset protocol** (`__len__` and `__getitem__`) and why it separates
#   *what* the data is from *how* it is batched;
# - write `TensorDataset`, `default_collate` (a list of samples → a batch, for nested
#   tuples, lists and dicts) and a `DataLoader` with batching, **seeded shuffling**
#   (a new order every epoch, the same orders every run) and `drop_last`;
# - split a dataset (`random_split`, and a **stratified** split that keeps the class
#   balance) and know why a test split must never change;
# - write the classic image transforms: `Normalize`, `RandomHorizontalFlip`, `RandomCrop`;
# - load package data with `importlib.resources`, so the same code works in a notebook
#   and after `pip install`;
# - measure what a batch costs in bytes, and how the batch size changes the time of an epoch.
#
# ## Prerequisites
#
# Module 01 (Tensor: indexing, `stack`, `cat`, `manual_seed`). Python classes with
# `__len__`/`__getitem__`, generators (`yield`). Nothing from modules 02-04 is needed.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/data/dataloader.py` when you run
# `tito export 05` (or `tito test module 05`). Cells with `# YOUR CODE HERE` are yours to
# fill in; after each comes a **check** cell that prints a ✓ or tells you what is wrong.
# The provided code is part of the lesson: read it.

# %%
#| default_exp data.dataloader

# %% [markdown]
# ## 1. The idea: an epoch is a permutation cut into batches
#
# Training repeats one loop: take a batch of examples, compute the loss on it, update the
# weights. One pass over all $N$ examples is an **epoch**. Why batches?
#
# - One example at a time is noisy and slow: every step pays Python's and the framework's
#   fixed overhead for very little arithmetic.
# - All $N$ at once is exact but needs memory for all $N$ activations, and gives one
#   update per epoch.
# - A batch of $B$ examples (typically 32-512) averages the noise of $B$ gradients, keeps
#   the hardware busy with one big matrix product instead of $B$ small ones, and still
#   gives $\lceil N/B \rceil$ updates per epoch.
#
# **Why shuffle?** If the examples arrive in a fixed order (say, all the 0s, then all the
# 1s), consecutive batches are not representative of the data, and the gradient steps
# zig-zag. The standard recipe: at the start of every epoch draw a fresh random
# **permutation** of $0, \dots, N-1$ and cut it into consecutive batches of $B$ indices.
# Every example is then used **exactly once per epoch**, in a new random order each time.
#
# **The last batch.** $N$ is rarely a multiple of $B$. With $N = 10$ and $B = 4$ the
# batches have 4, 4 and 2 examples: there are $\lceil N/B \rceil$ batches and the last one
# holds $N - B(\lceil N/B \rceil - 1)$ examples (that is $N \bmod B$, or $B$ when $B$
# divides $N$). `drop_last=True` throws the short batch away, leaving
# $\lfloor N/B \rfloor$ full batches: useful when a layer (like BatchNorm in module 09)
# misbehaves on tiny batches, at the price of skipping a few examples in each epoch (a
# different few each time, since the order changes).
#
# **Reproducibility.** "Random" must not mean "unrepeatable": a run you cannot repeat, you
# cannot debug. The order comes from a seeded random number generator, so the same seed
# gives the same sequence of epochs, and a different seed a different one.
#
# The picture: one epoch of $N = 10$ examples with $B = 4$.

# %%
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle


def draw_epoch(ax, order, batch_size, drop_last, title):
    """Boxes for one epoch: the permuted indices, coloured by batch; a dropped batch is grey."""
    n = len(order)
    n_full = n // batch_size
    for pos, idx in enumerate(order):
        b = pos // batch_size
        dropped = drop_last and b >= n_full
        color = "lightgrey" if dropped else plt.cm.Set2(b % 8)
        ax.add_patch(Rectangle((pos + 0.3 * b, 0), 1, 1, facecolor=color, edgecolor="black"))
        ax.text(pos + 0.3 * b + 0.5, 0.5, str(idx), ha="center", va="center", fontsize=11)
    for b in range(-(-n // batch_size)):
        start = b * batch_size
        size = min(batch_size, n - start)
        label = "dropped" if drop_last and b >= n_full else f"batch {b}: {size} samples"
        ax.text(start + 0.3 * b + size / 2, -0.35, label, ha="center", va="center", fontsize=9)
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlim(-0.2, n + 0.3 * (n // batch_size + 1))
    ax.set_ylim(-0.7, 1.2)
    ax.axis("off")


_demo_rng = np.random.default_rng(1)
fig, axes = plt.subplots(3, 1, figsize=(9, 4.2))
draw_epoch(axes[0], np.arange(10), 4, False, "shuffle=False: indices in order, cut into batches of 4")
draw_epoch(axes[1], _demo_rng.permutation(10), 4, False, "shuffle=True, epoch 1: a random permutation")
draw_epoch(axes[2], _demo_rng.permutation(10), 4, True, "epoch 2: a NEW permutation; drop_last=True drops the short batch")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. The data ships inside the package
#
# The course uses two small datasets, stored in `tinytorch/data/assets/`:
#
# - **digits**: 1,797 handwritten digits as 8×8 grey images with values 0..16 (the number
#   of "on" pixels in each 4×4 block of a 32×32 scan), 10 classes, about 180 per class. It
#   is the test set of the UCI *Optical Recognition of Handwritten Digits* data (Alpaydin &
#   Kaynak, 1998, CC BY 4.0), the same copy scikit-learn bundles as `load_digits`. Small
#   enough to train on in seconds, hard enough that a good model matters (modules 08, 09,
#   15, 16, 20).
# - **fables**: a short collection of Aesop's fables retold in plain English, written for
#   this course and placed in the public domain; the text that the tokenizers and the
#   small GPT of modules 10-13 learn from.
#
# How does code find a file that ships *inside* a package? Not with a path relative to
# the current directory: the notebook runs in `modules/05_dataloader/`, the tests somewhere
# else, and after `pip install` the package may live in `site-packages` or even inside a
# zip file. Python's answer is `importlib.resources.files("tinytorch.data")`: a path-like
# object for the package's own folder, wherever it is installed. The provided helper
# `_asset(name)` uses it; `pyproject.toml` lists `assets/*` as package data so the files
# are installed with the code.
#
# The digits are stored as a compressed numpy archive (`np.savez_compressed`) holding two
# arrays, `images` (uint8, shape (1797, 8, 8)) and `labels` (int64, shape (1797,)).
# `np.load` of an `.npz` file returns a dict-like `NpzFile`; use it in a `with` block so
# the file is closed. The text is UTF-8 (in fact plain ASCII).

# %%
#| export
import math
from collections.abc import Mapping
from importlib import resources

import numpy as np

import tinytorch._tensor as _tensor_module
from tinytorch._tensor import Tensor, cat, stack, tensor, zeros

__all__ = [
    "Dataset", "TensorDataset", "Subset", "random_split", "stratified_split",
    "default_collate", "DataLoader", "Generator",
    "Compose", "Normalize", "RandomHorizontalFlip", "RandomCrop",
    "Digits", "load_digits", "load_text",
]

TEXTS = ("fables",)  # the texts load_text knows


def _asset(name):
    """The path-like object of a file shipped in tinytorch/data/assets/ (wherever installed)."""
    path = resources.files("tinytorch.data") / "assets" / name
    if not path.is_file():
        raise FileNotFoundError(
            f"tinytorch's data file {name!r} is missing from {path}; reinstall the course "
            f"(pip install -e .) or restore tinytorch/data/assets/ from git")
    return path


# %% nbgrader={"grade": false, "grade_id": "load-data", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def load_digits():
    """The 1,797 handwritten digits as numpy arrays: (images uint8 (1797, 8, 8) in 0..16,
    labels int64 (1797,) in 0..9).

    Why: every later module that trains an image model starts from these arrays.
    """
    # Hints:
    # - `_asset("digits.npz")` is the file; `with np.load(path) as f:` opens it;
    # - `f["images"]` and `f["labels"]` read the arrays (read them inside the `with`).
    ### BEGIN SOLUTION
    with np.load(_asset("digits.npz")) as f:
        return f["images"], f["labels"]
    ### END SOLUTION


def load_text(name="fables"):
    """A text shipped with tinytorch, as one Python str (decoded from UTF-8).

    Why: the tokenizers and language models of modules 10-13 train on it.
    """
    # Hints:
    # - refuse a name that is not in TEXTS with a ValueError that lists the valid names;
    # - the file is `_asset(name + ".txt")`; its `.read_text(encoding="utf-8")` is the text.
    ### BEGIN SOLUTION
    if name not in TEXTS:
        raise ValueError(f"unknown text {name!r}; tinytorch ships: {', '.join(TEXTS)}")
    return _asset(name + ".txt").read_text(encoding="utf-8")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-load-data", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_images, _labels = load_digits()
assert _images.shape == (1797, 8, 8) and _images.dtype == np.uint8, (_images.shape, _images.dtype)
assert _labels.shape == (1797,) and _labels.dtype == np.int64, (_labels.shape, _labels.dtype)
assert _images.min() == 0 and _images.max() == 16
assert set(np.unique(_labels)) == set(range(10))
_text = load_text()
assert isinstance(_text, str) and len(_text) > 40_000, "the fables are a few tens of KB of text"
assert _text.isascii()
try:
    load_text("war-and-peace")
    raise AssertionError("an unknown text name should raise ValueError")
except ValueError as exc:
    assert "fables" in str(exc), "the error should list the texts that exist"
print("✓ load_digits and load_text")

# %% [markdown]
# Let us look at them. Each digit is only 64 pixels, so the images are coarse, but you can
# read most of them; the labels are above each image. Then the first lines of the text.

# %%
fig, axes = plt.subplots(3, 10, figsize=(10, 3.4))
for ax, i in zip(axes.ravel(), range(30)):
    ax.imshow(_images[i], cmap="gray_r", vmin=0, vmax=16)
    ax.set_title(str(_labels[i]), fontsize=10)
    ax.axis("off")
fig.suptitle("The first 30 digits (8×8 pixels, values 0..16) and their labels")
fig.tight_layout()
plt.show()
print("images per class:", np.bincount(_labels).tolist())
print(f"fables: {len(_text):,} characters, {len(set(_text))} distinct, "
      f"{len(_text.split()):,} words\n")
print(_text[:400])

# %% [markdown]
# ## 3. The Dataset protocol
#
# PyTorch's data layer rests on one small contract. A **map-style dataset** is any object
# with
#
# - `len(dataset)`: how many samples there are, and
# - `dataset[i]` for `0 <= i < len(dataset)`: sample `i`, often a tuple `(input, target)`.
#
# That is all a DataLoader needs. The dataset decides *what a sample is* (read from
# memory, decode an image file, tokenize a sentence, apply a random augmentation); the
# loader decides *which samples, in which order, in which groups*. The base class
# `Dataset` below just documents the contract.
#
# The simplest dataset wraps tensors that are already in memory: **`TensorDataset(X, y)`**
# returns `(X[i], y[i])`. All tensors must have the same size along dimension 0 (one row
# per sample); a mismatch must be caught in the constructor with an error that names the
# sizes, not later as a confusing `IndexError` in the middle of an epoch.
#
# A **transform** is a function applied to each sample's input as it is read (section 8
# writes some). Our `TensorDataset` accepts an optional `transform=` keyword, applied to
# the first tensor's sample (PyTorch's `TensorDataset` has no transform; torchvision's
# datasets do. We add it so the same idea works on any in-memory data).
#
# Note that `X[i]` with an integer `i` is a **view** (module 01): reading a sample copies
# nothing.

# %% nbgrader={"grade": false, "grade_id": "tensor-dataset", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Dataset:
    """The map-style dataset contract: `len(ds)` samples, `ds[i]` returns sample i.

    Subclasses implement __getitem__ and __len__ (PyTorch: torch.utils.data.Dataset).
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")


class TensorDataset(Dataset):
    """Samples are the rows of tensors of equal length: ds[i] == (t[i] for t in tensors).

    Why: the quickest way to feed in-memory arrays (features, labels) to a DataLoader.
    """

    def __init__(self, *tensors, transform=None):
        """Keep the tensors (numpy arrays are converted with `tensor`) and the transform.

        Raises ValueError when there are no tensors, when one is 0-d (no rows), or when
        their sizes along dimension 0 differ (the message names every size).
        """
        # Hints:
        # - convert: `t if isinstance(t, Tensor) else tensor(t)`;
        # - store `self.tensors` (a tuple) and `self.transform`.
        ### BEGIN SOLUTION
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        tensors = tuple(t if isinstance(t, Tensor) else tensor(t) for t in tensors)
        if any(t.ndim == 0 for t in tensors):
            raise ValueError("TensorDataset: every tensor needs a dimension 0 (one row per "
                             "sample); got a 0-d tensor")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) != 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors: their sizes along "
                             f"dimension 0 are {sizes}, but every tensor needs one row per sample")
        self.tensors = tensors
        self.transform = transform
        ### END SOLUTION

    def __getitem__(self, index):
        """Sample `index`: a tuple with one row of each tensor; `transform` applies to the first."""
        ### BEGIN SOLUTION
        sample = [t[index] for t in self.tensors]
        if self.transform is not None:
            sample[0] = self.transform(sample[0])
        return tuple(sample)
        ### END SOLUTION

    def __len__(self):
        return self.tensors[0].shape[0]


# %% nbgrader={"grade": true, "grade_id": "test-tensor-dataset", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_X = np.arange(12, dtype=np.float32).reshape(6, 2)
_y = np.array([0, 1, 0, 1, 1, 0])
_ds = TensorDataset(tensor(_X), _y)
assert len(_ds) == 6
_xi, _yi = _ds[4]
assert isinstance(_xi, Tensor) and _xi.shape == (2,) and (_xi.numpy() == _X[4]).all()
assert _yi.shape == () and _yi.item() == 1 and _yi.dtype == np.int64
assert len(_ds[0]) == 2, "a sample has one entry per tensor"
assert (TensorDataset(tensor(_X), transform=lambda x: x * 10)[1][0].numpy() == _X[1] * 10).all()
for _bad in [(tensor(_X), tensor(_y[:5])), ()]:
    try:
        TensorDataset(*_bad)
        raise AssertionError(f"TensorDataset should refuse tensors {[t.shape for t in _bad]}")
    except ValueError as exc:
        if _bad:
            assert "6" in str(exc) and "5" in str(exc), "name the mismatched sizes"
print("✓ TensorDataset")

# %% [markdown]
# ## 4. Collate: from a list of samples to a batch
#
# The loader reads $B$ samples, `[dataset[i] for i in batch_indices]`, and gets a Python
# **list of samples**. The model wants **one tensor per field**, with the batch as a new
# first dimension. With samples `(x_i, y_i)` where `x_i` has shape `(1, 8, 8)`:
#
# ```
# [(x_0, y_0), (x_1, y_1), ..., (x_{B-1}, y_{B-1})]   ->   (X, Y)
#                                                          X: shape (B, 1, 8, 8) = stack(x_0..x_{B-1})
#                                                          Y: shape (B,)         = stack(y_0..y_{B-1})
# ```
#
# This is a *transpose* of the structure (a list of tuples becomes a tuple of lists), then
# a `stack` of each list. PyTorch calls the function that does it `default_collate`. It
# works **recursively** on whatever structure the samples have, looking at the first
# sample `elem = batch[0]` to decide:
#
# | `elem` is | the batch becomes |
# |---|---|
# | a `Tensor` | `stack(batch)`: a new first dimension of size $B$ |
# | a numpy array | a Tensor of `np.stack(batch)` |
# | a Python/numpy number or bool | a 1-D Tensor of the $B$ values (int64, float32, bool) |
# | a `str` (or bytes) | left alone: the list of $B$ strings |
# | a mapping (dict) | a dict with the same keys, each value collated: `{k: collate([d[k] for d in batch])}` |
# | a tuple / list | one collated entry per field: `[collate(field) for field in zip(*batch)]`, returned as the same type (a tuple stays a tuple, a named tuple keeps its class, a list is a list) |
#
# Two details. All sequences in a batch must have the same length (`zip` would silently
# drop the extra fields; raise a `RuntimeError` instead). And Python floats become
# **float32** here, tinytorch's default floating dtype (PyTorch's `default_collate` makes
# them float64, an occasional surprise there). Anything else is a `TypeError` that names
# the type. An empty batch is a `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "default-collate", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def default_collate(batch):
    """Merge a list of samples into a batch: stack Tensors, arrays and numbers along a new
    dimension 0, recursing into tuples, lists and dicts (PyTorch's default_collate).

    Why: a model computes on whole batches; samples arrive one by one.
    """
    # Hints:
    # - check `isinstance` in the table's order; test `str`/`bytes` BEFORE sequences (a
    #   string is a sequence too) and numbers with (bool, int, float, np.generic);
    # - a named tuple has `_fields`: rebuild it with `type(elem)(*fields)`;
    # - recurse by calling default_collate on each field.
    ### BEGIN SOLUTION
    batch = list(batch)
    if not batch:
        raise ValueError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch)
    if isinstance(elem, np.ndarray):
        return tensor(np.stack(batch))
    if isinstance(elem, (bool, int, float, np.generic)):
        return tensor(np.array(batch) if isinstance(elem, np.generic) else batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, (tuple, list)):
        if any(len(sample) != len(elem) for sample in batch):
            raise RuntimeError("default_collate: each element in the batch should be of equal size; "
                               f"got lengths {[len(sample) for sample in batch]}")
        fields = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return type(elem)(*fields) if hasattr(elem, "_fields") else tuple(fields)
        return fields
    raise TypeError(f"default_collate: cannot batch samples of type {type(elem).__name__}; "
                    f"it handles Tensors, numpy arrays, numbers, strings, dicts, tuples and lists")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-default-collate", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_b = default_collate([_ds[i] for i in [0, 3, 5]])
assert isinstance(_b, tuple) and len(_b) == 2
assert _b[0].shape == (3, 2) and (_b[0].numpy() == _X[[0, 3, 5]]).all()
assert _b[1].dtype == np.int64 and _b[1].tolist() == [0, 1, 0]
_d = default_collate([{"x": np.ones(3), "n": 1, "name": "a"}, {"x": np.zeros(3), "n": 2, "name": "b"}])
assert set(_d) == {"x", "n", "name"} and _d["x"].shape == (2, 3) and _d["n"].tolist() == [1, 2]
assert _d["name"] == ["a", "b"], "strings are kept as a list"
assert default_collate([1.5, 2.0]).dtype == np.float32
assert default_collate([True, False]).dtype == np.bool_
_l = default_collate([[1, (2.0, 3)], [4, (5.0, 6)]])
assert isinstance(_l, list) and isinstance(_l[1], tuple) and _l[1][1].tolist() == [3, 6]
try:
    default_collate([(1, 2), (3,)])
    raise AssertionError("samples of different lengths should raise RuntimeError")
except RuntimeError:
    pass
print("✓ default_collate")

# %% [markdown]
# ## 5. The DataLoader
#
# Now the loop of section 1 in code. First the random numbers. Like `torch.Generator`,
# our **`Generator`** is an object that owns its own random stream: two generators seeded
# alike produce the same numbers, whatever else the program draws meanwhile. It wraps a
# numpy `Generator` (`np.random.default_rng`); `manual_seed(s)` reseeds it and returns the
# generator itself, so `Generator().manual_seed(0)` is a one-liner. When no generator is
# given, the loader draws from tinytorch's **global** generator, the one behind
# `tinytorch.rand` and reseeded by `tinytorch.manual_seed` (module 01): a program that calls
# `manual_seed(0)` once at the top is reproducible from end to end. The provided helper
# `_numpy_rng(generator)` returns the numpy generator to draw from in both cases.
#
# You write the DataLoader in three small methods:
#
# - `_index_batches()`: **one epoch of indices**, a Python generator that yields lists of
#   indices. Draw the order *when the epoch starts*: `permutation(N)` of the numpy
#   generator if `shuffle`, else `0..N-1` in order. Then yield consecutive slices of
#   `batch_size`; the last, short slice only if not `drop_last`.
# - `__iter__()`: for each list of indices, read the samples and yield
#   `self.collate_fn(samples)`. Because it is a generator, every `for batch in loader:`
#   starts a new epoch, with a new permutation.
# - `__len__()`: the number of batches per epoch, $\lceil N/B \rceil$ or $\lfloor N/B \rfloor$.
#
# Python reminder: integer ceil division is `-(-n // b)` or `(n + b - 1) // b`; `math.ceil(n / b)`
# goes through floating point, which is exact only up to $2^{53}$.

# %% nbgrader={"grade": false, "grade_id": "dataloader", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Generator:
    """A seedable source of random numbers of its own (torch.Generator); wraps numpy's."""

    default_seed = 67280421310721  # torch.Generator()'s default seed: unseeded is still fixed

    def __init__(self):
        self.manual_seed(self.default_seed)

    def manual_seed(self, seed):
        """Reseed; returns self, so `Generator().manual_seed(0)` works."""
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self):
        """The seed last given to manual_seed."""
        return self._seed

    def get_state(self):
        """The complete state (a dict), e.g. to checkpoint and later resume a run."""
        return self._rng.bit_generator.state

    def set_state(self, state):
        """Restore a state from get_state(); returns self."""
        self._rng.bit_generator.state = state
        return self

    def __repr__(self):
        return f"Generator(initial_seed={self._seed})"


def _numpy_rng(generator):
    """The numpy generator to draw from: `generator`'s own, or tinytorch's global one."""
    if generator is None:
        return _tensor_module._rng  # read at call time: tinytorch.manual_seed replaces it
    if isinstance(generator, Generator):
        return generator._rng
    raise TypeError(f"generator must be a tinytorch.data.Generator or None, not {type(generator).__name__}")


class DataLoader:
    """Iterate over a dataset in batches: optional seeded shuffling (a new permutation each
    epoch), an optional drop of the last short batch, and a collate step (torch DataLoader).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None,
                 generator=None):
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        _numpy_rng(generator)  # fail now, not at the first epoch, on a wrong generator
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.generator = generator

    def _index_batches(self):
        """Yield one epoch of batches of indices (lists of ints), drawn when the epoch starts."""
        ### BEGIN SOLUTION
        n = len(self.dataset)
        order = _numpy_rng(self.generator).permutation(n) if self.shuffle else np.arange(n)
        for start in range(0, n, self.batch_size):
            indices = order[start:start + self.batch_size]
            if len(indices) < self.batch_size and self.drop_last:
                return
            yield indices.tolist()
        ### END SOLUTION

    def __iter__(self):
        """One epoch: yield collate_fn([dataset[i] for i in batch]) for each batch of indices."""
        ### BEGIN SOLUTION
        for indices in self._index_batches():
            yield self.collate_fn([self.dataset[i] for i in indices])
        ### END SOLUTION

    def __len__(self):
        """Batches per epoch: ceil(N / batch_size), or floor with drop_last."""
        ### BEGIN SOLUTION
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-dataloader", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_N = 10
_dsN = TensorDataset(np.arange(_N))
for _bs in (1, 3, 4, 5, 10, 12):
    for _shuffle in (False, True):
        for _drop in (False, True):
            _loader = DataLoader(_dsN, batch_size=_bs, shuffle=_shuffle, drop_last=_drop,
                                 generator=Generator().manual_seed(_bs))
            _batches = [b[0].tolist() for b in _loader]
            _seen = sum(_batches, [])
            assert len(_batches) == len(_loader), (_bs, _drop, len(_batches), len(_loader))
            assert len(_seen) == len(set(_seen)), "no sample twice in one epoch"
            _expected = (_N // _bs) * _bs if _drop else _N
            assert len(_seen) == _expected, (_bs, _drop, _seen)
            if not _shuffle:
                assert _seen == list(range(_expected)), "without shuffle, the order is 0..N-1"
assert [len(b[0]) for b in DataLoader(_dsN, batch_size=4)] == [4, 4, 2]
assert [len(b[0]) for b in DataLoader(_dsN, batch_size=4, drop_last=True)] == [4, 4]
_l1 = DataLoader(_dsN, batch_size=3, shuffle=True, generator=Generator().manual_seed(0))
_l2 = DataLoader(_dsN, batch_size=3, shuffle=True, generator=Generator().manual_seed(0))
_e1, _e2 = [[b[0].tolist() for b in _l1] for _ in range(2)]
assert _e1 == [b[0].tolist() for b in _l2], "same seed, same order"
assert sorted(sum(_e1, [])) == list(range(_N)) and sum(_e1, []) != sum(_e2, []), "a new order each epoch"
print("✓ DataLoader; one shuffled epoch:", _e1)

# %% [markdown]
# With the DataLoader written, a whole training epoch is a `for` loop. Here is a 3-sample
# batch of the toy dataset `_ds` from above, with its structure preserved:

# %%
for _xb, _yb in DataLoader(_ds, batch_size=3, shuffle=True, generator=Generator().manual_seed(1)):
    print("inputs", _xb.shape, _xb.dtype, "| targets", _yb.tolist())

# %% [markdown]
# ## 6. Splitting a dataset
#
# A model is judged on data it has not trained on, so we split: a **training** set to fit
# the weights, a **validation** set to choose hyperparameters and decide when to stop, and
# a **test** set touched only for the final number. Two tools:
#
# **`Subset(dataset, indices)`** (provided) is a view of a dataset: `subset[k]` is
# `dataset[indices[k]]`. Nothing is copied.
#
# **`random_split(dataset, lengths, generator=None)`** shuffles `0..N-1` once and cuts
# the permutation into consecutive pieces of the given lengths, returning one `Subset`
# per piece: disjoint, and together covering the dataset. `lengths` are either ints that
# sum to $N$, or fractions that sum to 1. For fractions, PyTorch's rule (follow it
# exactly, so the sizes match PyTorch's): each piece gets $\lfloor N \cdot f_k \rfloor$,
# then the $r = N - \sum_k \lfloor N f_k \rfloor$ left-over samples go one each to pieces
# $0, 1, \dots$ (round-robin, piece $i \bmod K$ for $i = 0..r-1$). For $N = 10$ and
# $(0.5, 0.3, 0.2)$ that is exactly $(5, 3, 2)$; for $N = 11$ it is $(6, 3, 2)$.
# Recognise fractions by their sum being close to 1 (`math.isclose(sum(lengths), 1)` and
# `sum(lengths) <= 1`); each fraction must lie in $[0, 1]$. Any other `lengths` whose
# sum is not $N$ is a `ValueError`.

# %% nbgrader={"grade": false, "grade_id": "random-split", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order (torch.utils.data.Subset)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping random Subsets of the given lengths (ints summing to
    len(dataset), or fractions summing to 1).

    Why: a fair train/validation split must be random, disjoint and reproducible.
    """
    # Hints:
    # - convert fractions to ints with the floor + round-robin rule above;
    # - one permutation for the whole split: `_numpy_rng(generator).permutation(n)`;
    # - `np.cumsum(lengths)` gives where each piece ends.
    ### BEGIN SOLUTION
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for frac in lengths:
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction {frac} is not between 0 and 1")
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if any(not float(k).is_integer() or k < 0 for k in lengths) or sum(lengths) != n:
        raise ValueError(f"random_split: the lengths {lengths} must be non-negative ints that sum "
                         f"to the dataset's length {n}, or fractions that sum to 1")
    lengths = [int(k) for k in lengths]
    order = _numpy_rng(generator).permutation(n)
    ends = np.cumsum(lengths)
    return [Subset(dataset, order[end - k:end]) for end, k in zip(ends, lengths)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-random-split", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_parts = random_split(_dsN, [0.5, 0.3, 0.2], generator=Generator().manual_seed(0))
assert [len(p) for p in _parts] == [5, 3, 2]
assert [len(p) for p in random_split(TensorDataset(np.arange(11)), [0.5, 0.3, 0.2])] == [6, 3, 2]
_vals = [p[k][0].item() for p in _parts for k in range(len(p))]
assert sorted(_vals) == list(range(10)), "disjoint and covering"
_again = random_split(_dsN, [5, 3, 2], generator=Generator().manual_seed(0))
assert [_again[0][k][0].item() for k in range(5)] == _vals[:5], "same seed, same split"
try:
    random_split(_dsN, [5, 4])
    raise AssertionError("lengths that do not sum to N should raise ValueError")
except ValueError:
    pass
print("✓ random_split:", [[p[k][0].item() for k in range(len(p))] for p in _parts])

# %% [markdown]
# ### A fixed, stratified split for the digits
#
# A random split drawn anew by every run would make test accuracies incomparable: two
# runs would be scored on different images. A dataset's official test split is therefore
# **fixed**. Ours is also **stratified**: each class is split separately, so the test set
# has the same class proportions as the whole (with only ~36 test images per class, a
# plain random split could easily leave one digit under-represented).
#
# `stratified_split(labels, test_fraction, seed)` does this with its **own** numpy
# generator `np.random.default_rng(seed)` (never the global one, so the split does not
# depend on anything else the program drew): for each class `c` in increasing order,
# take that class's indices (`np.flatnonzero(labels == c)`), permute them
# (`rng.permutation`), send the first `round(test_fraction * n_c)` to the test set and the
# rest to the training set. Return both index arrays **sorted** (int64), training first.
#
# For the digits we fix `test_fraction = 0.2` and `seed = 0` (`DIGITS_SPLIT_SEED`): that
# gives the split every module of the course uses.

# %% nbgrader={"grade": false, "grade_id": "stratified-split", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 0


def stratified_split(labels, test_fraction=0.2, seed=0):
    """(train_indices, test_indices), sorted int64 arrays: each class split separately, with
    round(test_fraction * class size) of its samples, drawn with a private seeded RNG, in test.

    Why: a test set with the class balance of the data, identical in every run.
    """
    ### BEGIN SOLUTION
    labels = np.asarray(labels)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_test = int(round(test_fraction * len(idx)))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return (np.sort(np.concatenate(train)).astype(np.int64),
            np.sort(np.concatenate(test)).astype(np.int64))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-stratified-split", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_tr, _te = stratified_split(_labels, DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)
assert len(_tr) + len(_te) == 1797 and len(np.intersect1d(_tr, _te)) == 0
assert (np.diff(_tr) > 0).all() and (np.diff(_te) > 0).all(), "sorted, no repeats"
for _c in range(10):
    _n_c = (_labels == _c).sum()
    assert (_labels[_te] == _c).sum() == round(0.2 * _n_c), f"class {_c} must have 20% in test"
_tr2, _te2 = stratified_split(_labels, DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)
assert (_te == _te2).all(), "the split is fixed"
assert not np.array_equal(_te, stratified_split(_labels, 0.2, seed=1)[1]), "the seed matters"
print(f"✓ stratified_split: {len(_tr)} train / {len(_te)} test")

# %% [markdown]
# ## 7. The Digits dataset
#
# Now the dataset the next modules train on. `Digits(train=True, transform=None)` holds
# one side of the fixed split, ready for a network:
#
# - `self.data`: a float32 Tensor of shape `(N, 1, 8, 8)`: the images divided by 16 so the
#   values lie in $[0, 1]$ (networks train best on inputs of order 1), with a **channel**
#   dimension of size 1 in front, the `(C, H, W)` layout of PyTorch images (module 09's
#   convolutions expect it; a colour image would have $C = 3$);
# - `self.targets`: an int64 Tensor of shape `(N,)`, the labels (int64 because they will
#   be used as indices by the cross-entropy loss);
# - `self.transform`: applied to each image as it is read.
#
# `ds[i]` is `(image, label)`: a `(1, 8, 8)` view into `self.data` and a 0-d int64 Tensor,
# the transform applied to the image. The provided `__getitem__` and `__len__` do that;
# you write the constructor: load, split, select one side, scale, add the channel, wrap.

# %% nbgrader={"grade": false, "grade_id": "digits", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Digits(Dataset):
    """The 8x8 handwritten digits: samples (image float32 (1, 8, 8) in [0, 1], label int64).

    train=True gives the 80% training side of the fixed stratified split (1,438 images),
    train=False the 20% test side (359 images).
    """

    classes = list(range(10))

    def __init__(self, train=True, transform=None):
        """Load the digits, keep one side of the fixed split as self.data / self.targets."""
        # Hints:
        # - `load_digits()`, then `stratified_split(labels, DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)`;
        # - `images[idx].astype(np.float32) / 16` scales; `[:, None]` adds the channel dim;
        # - store self.train, self.transform, self.data (Tensor) and self.targets (Tensor).
        ### BEGIN SOLUTION
        images, labels = load_digits()
        train_idx, test_idx = stratified_split(labels, DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)
        idx = train_idx if train else test_idx
        self.train = bool(train)
        self.transform = transform
        self.data = tensor((images[idx].astype(np.float32) / 16.0)[:, None, :, :])
        self.targets = tensor(labels[idx].astype(np.int64))
        ### END SOLUTION

    def __getitem__(self, index):
        image, label = self.data[index], self.targets[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, label

    def __len__(self):
        return self.data.shape[0]

    def __repr__(self):
        return f"Digits({'train' if self.train else 'test'}: {len(self)} images of shape (1, 8, 8))"


# %% nbgrader={"grade": true, "grade_id": "test-digits", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
train_set, test_set = Digits(train=True), Digits(train=False)
assert len(train_set) + len(test_set) == 1797 and len(test_set) == len(_te)
_img, _lab = train_set[0]
assert _img.shape == (1, 8, 8) and _img.dtype == np.float32, (_img.shape, _img.dtype)
assert _lab.shape == () and _lab.dtype == np.int64
assert 0.0 <= train_set.data.numpy().min() and train_set.data.numpy().max() == 1.0
assert np.allclose(test_set.data.numpy()[:, 0] * 16, _images[_te]), "test side = the split's test indices"
assert (test_set.targets.numpy() == _labels[_te]).all()
assert Digits(train=True, transform=lambda x: x * 0)[5][0].numpy().max() == 0, "apply the transform"
print("✓ Digits:", train_set, "|", test_set)

# %% [markdown]
# ## 8. Transforms
#
# A transform is a callable applied to one sample's input each time it is read. Two kinds:
#
# **Preprocessing** is deterministic. The standard one is **normalisation**: subtract the
# mean and divide by the standard deviation, per channel $c$,
#
# $$x'_{c,h,w} = \frac{x_{c,h,w} - \mu_c}{\sigma_c},$$
#
# with $\mu_c, \sigma_c$ measured on the **training** set only (the test set must not leak
# into training). Centred inputs of unit scale make the first layer's pre-activations
# well scaled too, which is what the initialisations of module 03 assume.
# `Normalize(mean, std)` takes either one number each (for any image, and the only choice
# for a `(H, W)` image) or one per channel (for `(C, H, W)`, or a batch `(..., C, H, W)`:
# the channel is dimension −3). Shape the mean and std as `(C, 1, 1)` tensors and let
# broadcasting (module 01) do the rest: `(x - mean) / std`, a composite of existing ops.
#
# **Augmentation** is random: a new random variant of the image every time it is read, so
# that in every epoch the model sees slightly different data and cannot memorise pixels.
#
# - `RandomHorizontalFlip(p)`: with probability $p$, mirror the image left-right (reverse
#   the last dimension). Draw one uniform number $u$ from the generator (`rng.random()`)
#   and flip when $u < p$; so $p = 1$ always flips and $p = 0$ never does. tinytorch, like
#   PyTorch, has no negative-step slices, so reverse with an index array:
#   `x[..., np.arange(W - 1, -1, -1)]` (advanced indexing, a copy).
# - `RandomCrop(size, padding)`: pad the last two dimensions with `padding` zeros on every
#   side, then cut a random `size` window. With padded height $H' = H + 2p$ the top row is
#   uniform in $\{0, \dots, H' - h\}$ (`rng.integers(0, H' - h + 1)`), first the top, then
#   the left, likewise; that is $(H'-h+1)(W'-w+1)$ possible crops. With `size` equal to
#   the image and `padding=1`, this shifts the image by up to one pixel in each direction,
#   the classic augmentation for small images. Build the padding from module 01's ops:
#   `cat` a block of zeros on each side, first along dimension −1, then −2; cropping is
#   then a basic slice, a view.
#
# A word on **which digits augmentations make sense**: shifting by a pixel keeps a digit
# what it is; flipping does not for all digits (a mirrored 2 is not a 2). Transforms are
# choices about what your model should treat as "the same", not free accuracy.
#
# `Compose([t1, t2, ...])` (provided) applies transforms in order. Each random transform
# accepts `generator=` (a `Generator`) for reproducible augmentation; by default it draws
# from tinytorch's global generator. All transforms accept a Tensor or a numpy array and
# return a Tensor.

# %% nbgrader={"grade": false, "grade_id": "transforms", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _as_image(x):
    """A Tensor with at least 2 dimensions (..., H, W)."""
    x = x if isinstance(x, Tensor) else tensor(x)
    if x.ndim < 2:
        raise ValueError(f"an image transform needs a tensor of shape (H, W) or (C, H, W), got {x.shape}")
    return x


class Compose:
    """Apply transforms one after the other (torchvision.transforms.Compose)."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self):
        return "Compose(" + ", ".join(repr(t) for t in self.transforms) + ")"


class Normalize:
    """(x - mean) / std, per channel (dimension -3) or with one number for every pixel."""

    def __init__(self, mean, std):
        self.mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
        self.std = np.atleast_1d(np.asarray(std, dtype=np.float64))
        if self.mean.ndim != 1 or self.mean.shape != self.std.shape:
            raise ValueError(f"Normalize: mean and std must be two numbers or two sequences of the "
                             f"same length, got {self.mean.shape} and {self.std.shape}")
        if (self.std == 0).any():
            raise ValueError("Normalize: std must not be 0 (that would divide by zero)")

    def __call__(self, x):
        """Normalise one image (H, W) / (C, H, W), or a batch (..., C, H, W); float input only.

        Raises ValueError when the number of means is neither 1 nor the number of channels.
        """
        # Hints:
        # - refuse non-float input (x.dtype.kind != "f") with a TypeError;
        # - one number: mean/std as 0-d tensors; per channel: x.ndim >= 3 and
        #   len(self.mean) == x.shape[-3], shaped (C, 1, 1);
        # - build them with `tensor(self.mean.astype(x.dtype))` so the result keeps x's dtype.
        ### BEGIN SOLUTION
        x = _as_image(x)
        if x.dtype.kind != "f":
            raise TypeError(f"Normalize needs a floating point image, got {x.dtype} (convert it first)")
        mean, std = self.mean.astype(x.dtype), self.std.astype(x.dtype)
        if len(mean) == 1:
            return (x - tensor(mean[0])) / tensor(std[0])
        if x.ndim < 3 or x.shape[-3] != len(mean):
            raise ValueError(f"Normalize: {len(mean)} channel means for an image of shape {x.shape}; "
                             f"the channels are dimension -3, so a (C, H, W) image needs C means (or one)")
        return (x - tensor(mean).reshape(-1, 1, 1)) / tensor(std).reshape(-1, 1, 1)
        ### END SOLUTION

    def __repr__(self):
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class RandomHorizontalFlip:
    """Mirror the image left-right (last dimension) with probability p."""

    def __init__(self, p=0.5, generator=None):
        if not 0 <= p <= 1:
            raise ValueError(f"p must be a probability in [0, 1], got {p}")
        _numpy_rng(generator)
        self.p = p
        self.generator = generator

    def __call__(self, x):
        ### BEGIN SOLUTION
        x = _as_image(x)
        if _numpy_rng(self.generator).random() < self.p:
            return x[..., np.arange(x.shape[-1] - 1, -1, -1)]
        return x
        ### END SOLUTION

    def __repr__(self):
        return f"RandomHorizontalFlip(p={self.p})"


class RandomCrop:
    """Zero-pad the last two dimensions by `padding`, then cut a random window of `size`."""

    def __init__(self, size, padding=0, generator=None):
        self.size = (int(size), int(size)) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
        if len(self.size) != 2 or min(self.size) < 1:
            raise ValueError(f"size must be an int or (height, width) of positive ints, got {size!r}")
        if int(padding) < 0:
            raise ValueError(f"padding must be >= 0, got {padding}")
        _numpy_rng(generator)
        self.padding = int(padding)
        self.generator = generator

    def __call__(self, x):
        """A random (h, w) window of the zero-padded image; ValueError if it does not fit."""
        # Hints:
        # - pad: `zeros(*shape, dtype=x.dtype)` blocks and `cat(..., dim=-1)`, then dim=-2;
        # - draw the top first, then the left; crop with x[..., top:top + h, left:left + w].
        ### BEGIN SOLUTION
        x = _as_image(x)
        p = self.padding
        if p:
            lead = x.shape[:-2]
            side = zeros(*lead, x.shape[-2], p, dtype=x.dtype)
            x = cat([side, x, side], dim=-1)
            band = zeros(*lead, p, x.shape[-1], dtype=x.dtype)
            x = cat([band, x, band], dim=-2)
        (h, w), (H, W) = self.size, x.shape[-2:]
        if h > H or w > W:
            raise ValueError(f"RandomCrop: a {h}x{w} crop does not fit in the padded image of size {H}x{W}")
        rng = _numpy_rng(self.generator)
        top = int(rng.integers(0, H - h + 1))
        left = int(rng.integers(0, W - w + 1))
        return x[..., top:top + h, left:left + w]
        ### END SOLUTION

    def __repr__(self):
        return f"RandomCrop(size={self.size}, padding={self.padding})"


# %% nbgrader={"grade": true, "grade_id": "test-transforms", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_im = np.random.default_rng(0).random((3, 4, 5)).astype(np.float32)
_out = Normalize([0.1, 0.2, 0.3], [0.5, 1.0, 2.0])(tensor(_im))
_ref = (_im - np.array([0.1, 0.2, 0.3], np.float32)[:, None, None]) / np.array([0.5, 1.0, 2.0], np.float32)[:, None, None]
assert _out.dtype == np.float32 and np.allclose(_out.numpy(), _ref)
assert np.allclose(Normalize(0.5, 0.25)(_im[0]).numpy(), (_im[0] - 0.5) / 0.25)
try:
    Normalize([0.1, 0.2], [1.0, 1.0])(_im)
    raise AssertionError("2 means for 3 channels should raise ValueError")
except ValueError:
    pass
assert (RandomHorizontalFlip(p=1.0)(_im).numpy() == _im[..., ::-1]).all()
assert (RandomHorizontalFlip(p=0.0)(_im).numpy() == _im).all()
_c = RandomCrop(3)(_im)
assert _c.shape == (3, 3, 3)
_padded = np.pad(_im, ((0, 0), (1, 1), (1, 1)))
_crops = [RandomCrop((4, 5), padding=1, generator=Generator().manual_seed(s))(_im).numpy() for s in range(30)]
assert all(any((c == _padded[:, t:t + 4, l:l + 5]).all() for t in range(3) for l in range(3)) for c in _crops)
assert len({c.tobytes() for c in _crops}) > 1, "the crop position must be random"
assert (Compose([lambda x: x + 1, lambda x: x * 2])(tensor(_im)).numpy() == (_im + 1) * 2).all()
print("✓ Normalize, RandomHorizontalFlip, RandomCrop")

# %% [markdown]
# Here are a few digits after augmentation: each column is the same image read six times
# through `RandomCrop(8, padding=1)`, and each read is a different shift.

# %%
_augment = RandomCrop(8, padding=1, generator=Generator().manual_seed(0))
_aug_set = Digits(train=True, transform=_augment)
fig, axes = plt.subplots(6, 8, figsize=(8, 6.3))
for col in range(8):
    for row in range(6):
        img, lab = _aug_set[col]
        axes[row, col].imshow(img.numpy()[0], cmap="gray_r", vmin=0, vmax=1)
        axes[row, col].axis("off")
    axes[0, col].set_title(f"label {lab.item()}", fontsize=9)
fig.suptitle("RandomCrop(8, padding=1): every read of an image is a new shift")
fig.tight_layout()
plt.show()

# %% [markdown]
# Normalisation statistics are measured on the training set. The mean and standard
# deviation of all training pixels:

# %%
_pix = train_set.data.numpy()
digits_mean, digits_std = float(_pix.mean()), float(_pix.std())
print(f"training pixels: mean {digits_mean:.4f}, std {digits_std:.4f}")
_norm_set = Digits(train=True, transform=Normalize(digits_mean, digits_std))
_xb, _yb = next(iter(DataLoader(_norm_set, batch_size=len(_norm_set))))
print(f"after Normalize: mean {_xb.numpy().mean():+.2e}, std {_xb.numpy().std():.4f}")

# %% [markdown]
# ## 9. A systems look: bytes and time
#
# ### Bytes per batch, bytes per dataset
#
# A digits sample is a float32 image of $1 \times 8 \times 8$ values (4 bytes each) plus
# an int64 label (8 bytes): $256 + 8 = 264$ bytes. A batch of $B$ samples therefore takes
# $264\,B$ bytes: tiny here, but the same arithmetic for a batch of 256 RGB images of
# $224 \times 224$ gives $256 \cdot 3 \cdot 224 \cdot 224 \cdot 4 \approx 154$ MB, before
# the model has computed a single activation. Let us check the formula against real batches
# (`nbytes`), and compare the whole dataset in three forms: as stored on disk
# (compressed), as raw uint8 arrays, and as the float32 tensors the model reads.

# %%
import os

from tinytorch import memory_footprint

_sample_bytes = train_set[0][0].nbytes + train_set[0][1].nbytes
print(f"one sample: {_sample_bytes} bytes (image {train_set[0][0].nbytes} + label {train_set[0][1].nbytes})")
for B in (1, 32, 256):
    xb, yb = next(iter(DataLoader(train_set, batch_size=B)))
    print(f"batch of {B:4d}: predicted {B * _sample_bytes:8,d} bytes, measured {xb.nbytes + yb.nbytes:8,d} bytes")

_disk = os.path.getsize(str(_asset("digits.npz")))
_raw = _images.nbytes + _labels.nbytes
_dev = (train_set.data.nbytes + train_set.targets.nbytes + test_set.data.nbytes + test_set.targets.nbytes)
print(f"\nall 1,797 digits: {_disk / 1024:6.1f} KiB on disk (compressed npz), "
      f"{_raw / 1024:6.1f} KiB as uint8 + int64 arrays, {_dev / 1024:6.1f} KiB as float32 + int64 tensors")
print(f"sample view keeps alive: {memory_footprint(train_set[0][0]):,} bytes; "
      f"a collated batch of 32 owns: {memory_footprint(next(iter(DataLoader(train_set, batch_size=32)))[0]):,} bytes")

# %% [markdown]
# Three lessons. First, the float32 tensors are 4× the uint8 pixels: for large image
# datasets one therefore keeps the compact form in memory (or on disk) and converts each
# *batch* to float on the fly. Second, the compressed file is smaller still, because the
# images have many zero pixels. Third (module 01's `memory_footprint`): `ds[i]` is a view,
# so it keeps the whole `data` storage alive, while a collated batch is a fresh copy that
# owns exactly its own $264\,B$ bytes (here the images' part, 256 per sample).
#
# ### Time per epoch: per-sample Python versus vectorised batches
#
# Our DataLoader reads samples **one at a time**: `dataset[i]` for each index, then `stack`.
# Each of those steps costs some microseconds of Python overhead, whatever the sample's
# size. The alternative, when the whole dataset is one tensor in memory, is to read a batch
# **in one indexing operation**: `X[indices]` with an index array (numpy does the gather in
# C). Let us time one epoch over the training digits both ways, for several batch sizes
# (the median of a few repeats; your numbers will differ, the shape will not).

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


def epoch_loader(loader):
    for xb, yb in loader:
        pass


def epoch_vectorised(X, y, batch_size, rng):
    order = rng.permutation(X.shape[0])
    for start in range(0, X.shape[0], batch_size):
        idx = order[start:start + batch_size]
        xb, yb = X[idx], y[idx]


batch_sizes = [1, 4, 16, 64, 256, 1024]
t_loader, t_vector = [], []
for B in batch_sizes:
    loader = DataLoader(train_set, batch_size=B, shuffle=True, generator=Generator().manual_seed(0))
    t_loader.append(median_time(lambda: epoch_loader(loader)))
    t_vector.append(median_time(lambda: epoch_vectorised(train_set.data, train_set.targets, B,
                                                          np.random.default_rng(0))))
    print(f"B={B:5d}: {len(loader):5d} batches | DataLoader {t_loader[-1] * 1e3:8.2f} ms/epoch | "
          f"vectorised {t_vector[-1] * 1e3:8.2f} ms/epoch | ratio {t_loader[-1] / t_vector[-1]:6.1f}x")

fig, ax = plt.subplots(figsize=(6.2, 3.8))
ax.loglog(batch_sizes, np.array(t_loader) * 1e3, "o-", label="DataLoader: dataset[i] per sample + stack")
ax.loglog(batch_sizes, np.array(t_vector) * 1e3, "s-", label="vectorised: X[indices] per batch")
ax.set_xlabel("batch size B")
ax.set_ylabel("time per epoch (ms)")
ax.set_title(f"One epoch over {len(train_set)} digits")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read the plot with a simple cost model. An epoch costs about
#
# $$T(B) \approx \frac{N}{B}\, c_{\text{batch}} + N\, c_{\text{sample}},$$
#
# a fixed overhead per batch (Python loop, slicing the order, creating tensors) plus a cost
# per sample. The vectorised path has a tiny $c_{\text{sample}}$ (numpy gathers the rows in
# C), so its time is dominated by the first term and falls steeply as $B$ grows. The
# DataLoader pays a large $c_{\text{sample}}$, microseconds of Python for every
# `dataset[i]` call and every tensor `stack` converts, so however large the batch, its
# epoch cannot get faster than $N \cdot c_{\text{sample}}$: the curve flattens onto that
# floor. At $B = 1$ the two are within a small factor, both dominated by per-batch costs.
#
# That is why real pipelines either make per-sample work worthwhile (decoding a JPEG
# takes milliseconds, so the Python overhead disappears in it) and spread it over worker
# processes, or fetch whole batches at once when the data is already in memory. For the
# digits, both are far faster than the training step that will consume the batches.
#
# ## 10. How PyTorch does it
#
# - `torch.utils.data.Dataset`, `TensorDataset`, `Subset`, `random_split` and
#   `default_collate` are what you wrote (PyTorch's `random_split` uses the same
#   floor-then-round-robin rule for fractions). `IterableDataset` covers streams that
#   have no `len` or random access (reading a huge text file line by line).
# - The `DataLoader` splits the two jobs you wrote in `_index_batches` into **samplers**:
#   `SequentialSampler` or `RandomSampler` produce the order of indices (with
#   `generator=`, reseeded from the global RNG each epoch when none is given), and
#   `BatchSampler` groups them, applying `drop_last`. You can pass your own `sampler=`
#   (e.g. `WeightedRandomSampler` to oversample a rare class) or `batch_sampler=`.
# - `num_workers=k` runs `dataset[i]` and the collate in **k worker processes**, so the
#   Python overhead you measured runs in parallel with training; `prefetch_factor` batches
#   are prepared ahead, each worker gets its own seed (`worker_init_fn` lets you set the
#   seeds of other libraries), and `pin_memory=True` puts batches in page-locked memory so
#   the copy to the GPU can overlap computation.
# - A dataset may define `__getitems__(indices)` to return a whole batch of samples at once,
#   the vectorised fetch of the timing above.
# - Image transforms live in `torchvision.transforms` (`Normalize`, `RandomHorizontalFlip`,
#   `RandomCrop` with the same meaning), and torchvision's datasets take `transform=` like
#   ours.
#
# If PyTorch is installed, compare (this cell is skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    from torch.utils import data as tdata

    for n, fracs in [(10, [0.5, 0.3, 0.2]), (11, [0.5, 0.3, 0.2]), (1797, [0.8, 0.1, 0.1])]:
        ours = [len(s) for s in random_split(TensorDataset(np.arange(n)), fracs)]
        theirs = [len(s) for s in tdata.random_split(range(n), fracs)]
        print(f"random_split({n}, {fracs}): tinytorch {ours} | torch {theirs}")
    for drop in (False, True):
        ours = [len(b[0]) for b in DataLoader(_dsN, batch_size=4, drop_last=drop)]
        theirs = [len(b) for b in tdata.DataLoader(range(10), batch_size=4, drop_last=drop)]
        print(f"batch sizes, drop_last={drop}: tinytorch {ours} | torch {theirs}")
    print("default_collate of Python floats: tinytorch", default_collate([1.0, 2.0]).dtype,
          "| torch", tdata.default_collate([1.0, 2.0]).dtype)

# %% [markdown]
# ## 11. Recap
#
# - A **Dataset** is `len` + `[i]`; a **DataLoader** decides the order and the grouping.
#   One epoch is a permutation of $0..N-1$ cut into batches: every sample exactly once,
#   $\lceil N/B \rceil$ batches, or $\lfloor N/B \rfloor$ with `drop_last`.
# - Shuffling draws a **new permutation every epoch** from a seeded generator: a `Generator`
#   of its own, or tinytorch's global one (`tinytorch.manual_seed`). Same seed, same run.
# - **`default_collate`** turns a list of samples into a batch by transposing the
#   structure and stacking each field, recursively through tuples, lists and dicts.
# - **Splits**: `random_split` for random disjoint pieces (PyTorch's fraction rule); a
#   **fixed, stratified** split for a test set: the digits' 1,438 / 359.
# - **Transforms**: `Normalize` with training-set statistics; augmentations
#   (`RandomHorizontalFlip`, `RandomCrop`) make every epoch's data a little different.
# - **Costs**: a batch is $B \times$ the sample size in bytes; float32 is 4× uint8;
#   per-sample Python overhead sets a floor on the time of an epoch, which vectorised or
#   parallel fetching removes.
#
# Run `tito test module 05` to check your work against the full test suite. Module 06
# (autograd) now makes the tensors learn.

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

from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state


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

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

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
#
# Write `load_digits()` and `load_text(name)` with the provided `_asset`.
#
# <details><summary>Hint 1</summary>
#
# An `NpzFile` reads an array lazily, when you index it by name: read both arrays while
# the file is still open.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The texts that exist are listed in `TEXTS`; an unknown name should be refused before any
# file is touched, with a message that tells the user which names do exist.
# </details>
#
# <details><summary>The approach</summary>
#
# Both functions are about where the data lives, and only the package knows that, so every
# path goes through `_asset`. An archive reads its arrays lazily: the values you return
# must be complete before the file is closed. For the text, the cheap question (is this a
# name we ship?) comes before any file is opened, and the bytes only become a str once you
# say how they are encoded.
# </details>

# %%
#| export
import math
from collections.abc import Mapping
from importlib import resources

import numpy as np

from tinytorch._tensor import Tensor, cat, stack, tensor, zeros
from tinytorch.random import Generator, numpy_generator
from tinytorch.data.sampler import Sampler

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
    """The 1,797 handwritten digits as numpy arrays.

    Contract: returns (images, labels): images uint8 of shape (1797, 8, 8) with values 0..16,
    labels int64 of shape (1797,) with values 0..9, read from the shipped digits.npz; the
    file is closed on return.
    """
    # Idea: package data is found through the package (importlib.resources), never a cwd path.
    ### BEGIN SOLUTION
    with np.load(_asset("digits.npz")) as f:
        return f["images"], f["labels"]
    ### END SOLUTION


def load_text(name="fables"):
    """A text shipped with tinytorch, as one Python str.

    Contract: `name` must be one of TEXTS, else ValueError whose message names the value
    and lists the texts that exist. Returns the file `name + ".txt"` of the assets, decoded
    from UTF-8.
    """
    # Idea: refuse an unknown name by listing the known ones.
    ### BEGIN SOLUTION
    if name not in TEXTS:
        raise ValueError(f"unknown text {name!r}; tinytorch ships: {', '.join(TEXTS)}")
    return _asset(name + ".txt").read_text(encoding="utf-8")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-load-data", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_opened = []
_np_load = np.load
np.load = lambda *args, **kwargs: _opened.append(_np_load(*args, **kwargs)) or _opened[-1]  # watch what it opens
try:
    _images, _labels = load_digits()
finally:
    np.load = _np_load
_left_open = [f for f in _opened if getattr(f, "fid", None) is not None and not f.fid.closed]
check(not _left_open, "load_digits closes the file it reads before it returns (an open file per call adds up, "
      "and on Windows it locks the file)", got=_left_open)
assert_equal(_images.shape, (1797, 8, 8), "digits images shape")
assert_equal(_images.dtype, np.dtype(np.uint8), "digits images dtype")
assert_equal(_labels.shape, (1797,), "digits labels shape")
assert_equal(_labels.dtype, np.dtype(np.int64), "digits labels dtype")
assert_equal((int(_images.min()), int(_images.max())), (0, 16), "pixel range (min, max)")
assert_equal(np.unique(_labels).tolist(), list(range(10)), "the ten classes")
_text = load_text()
check(isinstance(_text, str) and len(_text) > 40_000, "the fables are one str of a few tens of KB",
      got=f"{type(_text).__name__} of length {len(_text)}")
check(_text.isascii(), "the fables are plain ASCII")
_e = assert_raises(ValueError, load_text, "war-and-peace", what="load_text('war-and-peace')")
check("fables" in str(_e), "the error lists the texts that exist", got=str(_e))
print(f"✓ load_digits: {_images.shape} uint8, load_text: {len(_text):,} characters")

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
#
# Write `TensorDataset.__init__` and `TensorDataset.__getitem__`.
#
# <details><summary>Hint 1</summary>
#
# Which sizes must agree? Only dimension 0 of every tensor: `X` of shape (6, 2) and `y` of
# shape (6,) are fine together. Collect them and compare.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A 0-d tensor has no dimension 0 at all, so it cannot be a column of samples: refuse it
# before you ask for its size. Numpy arrays are welcome; turn them into Tensors.
# </details>
#
# <details><summary>The approach</summary>
#
# What can go wrong belongs in the constructor: tensors of different lengths accepted here
# would only fail mid-epoch, far from the cause. Ask what every argument must share once
# it is a Tensor, and which inputs cannot even answer that question (no tensors at all, a
# 0-d one). Reading a sample is then pure indexing: the same row of every tensor, with the
# transform touching the input only, never the labels.
# </details>

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
        """Keep the tensors and the transform.

        Contract: `tensors` are Tensors or numpy arrays (converted to Tensors); stores
        self.tensors (a tuple of Tensors) and self.transform. Raises ValueError when there
        are no tensors, when one is 0-d (it has no rows), or when their sizes along
        dimension 0 differ (the message names every size).
        """
        # Idea: one row per sample in every tensor, checked once, here, not mid-epoch.
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
        """Sample `index`.

        Contract: returns a tuple with row `index` of each tensor, in order (views, no copy),
        with self.transform (when not None) applied to the first entry only.
        """
        # Idea: a sample is the same row of every tensor.
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
_ds = TensorDataset(tensor(_X), _y)              # a Tensor and a numpy array, 6 rows each
assert_equal(len(_ds), 6, "len(TensorDataset) = the number of rows")
_sample = _ds[4]
check(isinstance(_sample, tuple) and len(_sample) == 2, "a sample is a tuple with one entry per tensor",
      got=type(_sample).__name__)
_xi, _yi = _sample
check(np.shares_memory(_xi.numpy(), _ds.tensors[0].numpy()), "a sample's rows are views of the tensors, not copies")
check(isinstance(_xi, Tensor) and isinstance(_yi, Tensor), "each entry is a Tensor (numpy arrays are converted)")
assert_equal(_xi, _X[4], "ds[4][0] is row 4 of X")
assert_equal(_yi.shape, (), "ds[4][1] is a 0-d label")
assert_equal((_yi.item(), _yi.dtype), (1, np.dtype(np.int64)), "ds[4][1] is row 4 of y, int64")
_tds = TensorDataset(tensor(_X), _y, transform=lambda x: x * 10)
assert_equal(_tds[1][0], _X[1] * 10, "the transform applies to the first tensor")
assert_equal(_tds[1][1].item(), 1, "and not to the others")
_e = assert_raises(ValueError, TensorDataset, tensor(_X), tensor(_y[:5]), what="TensorDataset(6 rows, 5 rows)")
check("6" in str(_e) and "5" in str(_e), "the message names both sizes", got=str(_e))
assert_raises(ValueError, TensorDataset, what="TensorDataset() with no tensors")
assert_raises(ValueError, TensorDataset, tensor(_X), tensor(3), what="TensorDataset with a 0-d tensor")
print(f"✓ TensorDataset: 6 samples, ds[4] = ({_xi.tolist()}, {_yi.item()})")

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
# | a mapping (dict) | a dict with the same keys, each key's $B$ values collated |
# | a tuple / list | one collated entry per field (field $k$ collects entry $k$ of every sample), returned as the same type: a tuple stays a tuple, a named tuple keeps its class, a list is a list |
#
# Two details. All sequences in a batch must have the same length (`zip` would silently
# drop the extra fields; raise a `RuntimeError` instead). And Python floats become
# **float32** here, tinytorch's default floating dtype (PyTorch's `default_collate` makes
# them float64, an occasional surprise there). Anything else is a `TypeError` that names
# the type. An empty batch is a `ValueError`.
#
# <details><summary>Hint 1</summary>
#
# Only the first sample decides which row of the table applies; the others are assumed to
# have the same structure. For a tuple or list, the fields are the structure's "columns":
# which built-in turns a list of B rows of length F into F columns of length B?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The order of the `isinstance` tests matters: `bool` is an `int`, a numpy scalar is neither
# a Python int nor a float, a named tuple is a tuple. A named tuple can be recognised by its
# `_fields` attribute, and rebuilt from positional fields by calling its class.
# </details>
#
# <details><summary>Hint 3</summary>
#
# The recursion is the whole trick: a field of a tuple may itself be a dict of tuples; call
# `default_collate` on each field's list and let it decide.
# </details>
#
# <details><summary>The approach</summary>
#
# The first sample decides everything, and the function calls itself on the parts. Ask
# which table row the element matches, and whether a more general row would catch it first
# (a bool is an int, a named tuple is a tuple; a numpy scalar should keep its own dtype).
# Containers stack nothing themselves: they regroup the values field by field, hand each
# group back to the same function and rebuild a container of the original kind. Compare
# lengths before regrouping, because regrouping silently cuts every field to the shortest.
# </details>

# %% nbgrader={"grade": false, "grade_id": "default-collate", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def default_collate(batch):
    """Merge a list of samples into a batch (PyTorch's default_collate).

    Contract: `batch` is a non-empty sequence of samples of one structure. Returns, by the
    type of the first sample: a Tensor with a new dimension 0 of size B (Tensors, numpy
    arrays, numbers: int -> int64, float -> float32, bool -> bool, numpy scalars keep their
    dtype); the list itself (str, bytes); a dict with the same keys (mappings); a tuple,
    named tuple (same class) or list of collated fields (sequences), recursively.
    Raises ValueError for an empty batch; RuntimeError when sequences differ in length
    (naming the lengths); TypeError for any other type (naming it).
    """
    # Idea: transpose the structure (a list of samples becomes one list per field), then
    # stack each field, recursively.
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
_b = default_collate([_ds[i] for i in [0, 3, 5]])   # three (x (2,), y ()) samples
check(type(_b) is tuple and len(_b) == 2, "a batch of (x, y) samples is an (X, Y) tuple", got=_b)
assert_equal(_b[0].shape, (3, 2), "X stacks the three (2,) inputs along a NEW dimension 0")
assert_equal(_b[0], _X[[0, 3, 5]], "X holds rows 0, 3, 5")
assert_equal((_b[1].dtype, _b[1].tolist()), (np.dtype(np.int64), [0, 1, 0]), "Y: the int64 labels")
_arr = default_collate([np.ones((2, 3)), np.zeros((2, 3))])
assert_equal(_arr.shape, (2, 2, 3), "two (2, 3) arrays -> (2, 2, 3), the batch first")
_d = default_collate([{"x": np.ones(3), "n": 1, "name": "a"}, {"x": np.zeros(3), "n": 2, "name": "b"}])
check(isinstance(_d, dict), "a batch of dict samples is a dict (one batch per key)", got=type(_d).__name__)
assert_equal(sorted(_d), ["n", "name", "x"], "a dict batch keeps the keys")
check(isinstance(_d["x"], Tensor), "dict value 'x' collated into a Tensor (collate each key's values, "
      "recursively)", got=type(_d["x"]).__name__)
assert_equal(_d["x"].shape, (2, 3), "dict value 'x' stacked")
assert_equal(_d["n"].tolist(), [1, 2], "dict value 'n' collated")
assert_equal(_d["name"], ["a", "b"], "strings stay a list")
assert_equal(default_collate([1.5, 2.0]).dtype, np.dtype(np.float32), "Python floats -> float32")
assert_equal(default_collate([3, 4]).dtype, np.dtype(np.int64), "Python ints -> int64")
assert_equal(default_collate([True, False]).dtype, np.dtype(np.bool_), "bools -> bool")
assert_equal(default_collate([np.float32(0.5), np.float32(2.0)]).dtype, np.dtype(np.float32),
             "numpy float32 scalars keep float32")
assert_equal(default_collate([np.int16(3), np.int16(4)]).dtype, np.dtype(np.int16),
             "numpy int16 scalars keep int16 (not the int64 of Python ints)")
_l = default_collate([[1, (2.0, 3)], [4, (5.0, 6)]])  # a list holding a tuple: recursion
check(type(_l) is list and type(_l[1]) is tuple, "a list stays a list, a nested tuple a tuple", got=_l)
assert_equal(_l[1][1].tolist(), [3, 6], "the nested field collects entry 1 of each inner tuple")
from collections import namedtuple
_Pair = namedtuple("_Pair", "image label")
_nt = default_collate([_Pair(np.zeros(2), 0), _Pair(np.ones(2), 1)])
check(type(_nt) is _Pair, "a named tuple keeps its class", got=type(_nt).__name__, expected="_Pair")
assert_equal(_nt.label.tolist(), [0, 1], "named tuple field 'label'")
assert_raises(RuntimeError, default_collate, [(1, 2), (3,)], what="samples of lengths 2 and 1")
assert_raises(RuntimeError, default_collate, [(1,), (3, 4)], what="samples of lengths 1 and 2")
assert_raises(ValueError, default_collate, [], what="an empty batch")
assert_raises(TypeError, default_collate, [object(), object()], what="samples of type object")
print("✓ default_collate: (x, y) -> X", _b[0].shape, "Y", _b[1].tolist())

# %% [markdown]
# ## 5. The DataLoader
#
# Now the loop of section 1 in code. First the random numbers. Like `torch.Generator`,
# **`tinytorch.Generator`** (provided in module 01, in `tinytorch/random.py`) is an object
# that owns its own random stream: two generators seeded alike produce the same numbers,
# whatever else the program draws meanwhile. It wraps a numpy `Generator`
# (`np.random.default_rng`); `manual_seed(s)` reseeds it and returns the generator itself,
# so `Generator().manual_seed(0)` is a one-liner. When no generator is given, the loader
# draws from tinytorch's **default** generator, the one behind `tinytorch.rand` and reseeded
# by `tinytorch.manual_seed`: a program that calls `manual_seed(0)` once at the top is
# reproducible from end to end. The provided helper `numpy_generator(generator)` returns the
# numpy generator to draw from in both cases.
#
# You write the DataLoader in three small methods:
#
# - `_index_batches()`: **one epoch of indices**, a Python generator that yields lists of
#   indices, every sample exactly once, in batches of `batch_size` (the last one short, or
#   dropped with `drop_last`), shuffled or in order. A PyTorch program may instead hand the
#   loader a `sampler=` (an iterable of indices, such as `RandomSampler(dataset)` or a
#   `SubsetRandomSampler` over a validation split, in `tinytorch.data`): then its indices
#   are the epoch's order. Or it hands a `batch_sampler=` (an iterable of lists of indices,
#   such as `BatchSampler(sampler, batch_size, drop_last)`): then its lists are the batches
#   (you will write one in section 9).
# - `__iter__()`: the batches themselves, each one the `collate_fn` of its samples.
# - `__len__()`: the number of batches per epoch, $\lceil N/B \rceil$ or $\lfloor N/B \rfloor$.
#
# <details><summary>Hint 1</summary>
#
# *When* is the order drawn? A generator function's body does not run until the first
# `next()`; each `for batch in loader:` calls `__iter__` again. Where must the permutation
# be drawn so that every epoch gets a new one, and from which random stream?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Draw from `numpy_generator(self.generator)` every time: it is the loader's own generator when
# one was given, and tinytorch's global one otherwise. Never create a fresh numpy generator
# from a seed inside the epoch: it would replay the same order forever.
# </details>
#
# <details><summary>Hint 3</summary>
#
# A slice past the end of an array is simply shorter, which is exactly the last batch. The
# only question is whether to yield it. For `__len__`, count the batches with integers
# only: `math.ceil(n / b)` goes through floating point, exact only up to $2^{53}$. How does
# floor division give a ceiling?
# </details>
#
# <details><summary>The approach</summary>
#
# Keep two questions apart: which order does this epoch use, and how is it cut? The order
# must be settled when the epoch starts, from the right source (the sampler, else the
# loader's generator or the global one), so that two epochs differ and equal seeds agree.
# Cutting is the same in every case; only the short tail needs a decision. The loader
# never looks inside a sample, and `__len__` must agree with what an epoch yields, sampler
# included, without running one.
# </details>

# %% nbgrader={"grade": false, "grade_id": "dataloader", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class DataLoader:
    """Iterate over a dataset in batches: optional seeded shuffling (a new permutation each
    epoch), an optional drop of the last short batch, and a collate step (torch DataLoader).
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, *, prefetch_factor=None, persistent_workers=False):
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle: the sampler decides the order")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                             "drop_last: the batch sampler decides the batches")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers option should be non-negative, got {num_workers!r}")
        numpy_generator(generator)  # fail now, not at the first epoch, on a wrong generator
        self.dataset = dataset
        self.batch_size = None if batch_sampler is not None else int(batch_size)
        self.shuffle = bool(shuffle)
        self.sampler = sampler  # an iterable of indices that decides the order (tinytorch.data.sampler)
        self.batch_sampler = batch_sampler  # an iterable of lists of indices that decides the batches
        self.drop_last = bool(drop_last)
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.generator = generator
        # PyTorch's worker and memory options are accepted so that its programs run; tinytorch
        # loads every batch in this process, in order, and has no pinned memory.
        self.num_workers, self.pin_memory = num_workers, bool(pin_memory)

    def _index_batches(self):
        """One epoch of batches of indices.

        Contract: a generator of lists of Python ints. With a `self.batch_sampler`, they are
        the lists it yields, as they are. Otherwise together they hold each index of the
        epoch's order exactly once (drop_last: all but the last N mod B), in that order, in
        batches of batch_size, the last one shorter unless drop_last. The order: the indices
        `self.sampler` yields when there is one (it draws its own randomness), else 0..N-1
        without shuffle, else a permutation of 0..N-1 drawn from numpy_generator(self.generator)
        when the epoch starts, so each epoch has a fresh order and equal seeds give equal
        epochs. N is len(dataset).
        """
        # Idea: an epoch is an order, drawn when the epoch starts, cut into batches.
        ### BEGIN SOLUTION
        if self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield [int(i) for i in indices]
            return
        n = len(self.dataset)
        if self.sampler is not None:
            order = np.array(list(self.sampler), dtype=np.int64)
        else:
            order = numpy_generator(self.generator).permutation(n) if self.shuffle else np.arange(n)
        for start in range(0, len(order), self.batch_size):
            indices = order[start:start + self.batch_size]
            if len(indices) < self.batch_size and self.drop_last:
                return
            yield indices.tolist()
        ### END SOLUTION

    def __iter__(self):
        """One epoch of batches.

        Contract: a generator; for each list of indices from _index_batches, yields
        self.collate_fn applied to the list of those samples of self.dataset, in order.
        """
        # Idea: a batch is the collate of its samples; the loader never looks inside them.
        ### BEGIN SOLUTION
        for indices in self._index_batches():
            yield self.collate_fn([self.dataset[i] for i in indices])
        ### END SOLUTION

    def __len__(self):
        """Batches per epoch.

        Contract: an int, equal to the number of batches one epoch yields:
        ceil(N / batch_size), or floor(N / batch_size) with drop_last (0 for N = 0), where
        N is len(self.sampler) when there is a sampler, else len(dataset); with a
        batch_sampler, len(self.batch_sampler).
        """
        # Idea: count the batches without making them.
        ### BEGIN SOLUTION
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-dataloader", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
def _epoch(loader):
    return [b[0].tolist() for b in loader]


_N = 10
_dsN = TensorDataset(np.arange(_N))
with preserved_state():
    for _bs in (1, 3, 4, 5, 10, 12):
        for _shuffle in (False, True):
            for _drop in (False, True):
                _loader = DataLoader(_dsN, batch_size=_bs, shuffle=_shuffle, drop_last=_drop,
                                     generator=Generator().manual_seed(_bs))
                _what = f"N=10, batch_size={_bs}, shuffle={_shuffle}, drop_last={_drop}"
                for _ in range(2):   # every epoch, not just the first
                    _batches = _epoch(_loader)
                    _seen = sum(_batches, [])
                    assert_equal(len(_seen), len(set(_seen)), f"no sample twice in one epoch ({_what})")
                    assert_equal(len(_seen), (_N // _bs) * _bs if _drop else _N,
                                 f"samples the epoch yielded, from _index_batches ({_what})")
                    if not _shuffle:
                        assert_equal(_seen, list(range(len(_seen))), f"without shuffle: 0..N-1 ({_what})")
                    assert_equal(len(_loader), len(_batches),
                                 f"len(loader) = the number of batches the epoch yielded ({_what})")
    assert_equal([len(b) for b in _epoch(DataLoader(_dsN, batch_size=4))], [4, 4, 2], "batch sizes, N=10, B=4")
    assert_equal([len(b) for b in _epoch(DataLoader(_dsN, batch_size=4, drop_last=True))], [4, 4],
                 "batch sizes, N=10, B=4, drop_last")
    assert_equal(len(DataLoader(_dsN, batch_size=5)), 2, "len: N=10, B=5 divides evenly")
    # seeding: the same seed gives the same epochs, another seed other ones, and each epoch is new
    _l1 = DataLoader(_dsN, batch_size=3, shuffle=True, generator=Generator().manual_seed(0))
    _l2 = DataLoader(_dsN, batch_size=3, shuffle=True, generator=Generator().manual_seed(0))
    _l3 = DataLoader(_dsN, batch_size=3, shuffle=True, generator=Generator().manual_seed(1))
    _e1, _e2 = _epoch(_l1), _epoch(_l1)
    assert_equal(_epoch(_l2), _e1, "same generator seed, same first epoch")
    check(sum(_e1, []) != sum(_e2, []), "a new permutation each epoch", got=_e2)
    check(sum(_epoch(_l3), []) != sum(_e1, []), "another seed, another order", got=_epoch(_l3))
    # without a generator: tinytorch's global one, so tinytorch.manual_seed makes runs repeatable
    import tinytorch
    _orders = []
    for _seed in (5, 5, 6):
        tinytorch.manual_seed(_seed)
        _orders.append(sum(_epoch(DataLoader(_dsN, batch_size=3, shuffle=True)), []))
    assert_equal(_orders[1], _orders[0], "generator=None: tinytorch.manual_seed(5) twice, same order")
    check(_orders[2] != _orders[0], "generator=None: another global seed, another order", got=_orders[2])
    # an own generator does not depend on the global stream
    tinytorch.manual_seed(123)
    check(sum(_epoch(DataLoader(_dsN, batch_size=3, shuffle=True, generator=Generator().manual_seed(0))), [])
          == sum(_e1, []), "a loader with its own generator ignores the global seed")
class _CountingReads(TensorDataset):  # counts the samples read, to see when the loader reads them
    reads = 0

    def __getitem__(self, index):
        type(self).reads += 1
        return super().__getitem__(index)


_counted = iter(DataLoader(_CountingReads(np.arange(_N)), batch_size=3))
next(_counted)
check(_CountingReads.reads == 3, "the first batch of 3 reads 3 samples: a loader reads one batch at a time (an "
      "epoch of a large dataset does not fit in memory, and training starts at once)", got=_CountingReads.reads)
for _ in _counted:
    pass
check(_CountingReads.reads == _N, "one epoch of 10 samples reads each sample once", got=_CountingReads.reads)
_order = [7, 2, 2, 9, 0, 5, 3]  # a sampler decides the order: any iterable of indices
_loader = DataLoader(_dsN, batch_size=3, sampler=_order)
assert_equal(sum(_epoch(_loader), []), _order, "the indices of an epoch with sampler=[7, 2, 2, 9, 0, 5, 3] "
             "(the sampler's order, repeats included)")
assert_equal(len(_loader), 3, "len(loader) with a sampler of 7 indices and batch_size=3")
from tinytorch.data.sampler import RandomSampler  # a new random order each time it is iterated

_loader = DataLoader(_dsN, batch_size=3, sampler=RandomSampler(_dsN, generator=Generator().manual_seed(0)))
_first = sum(_epoch(_loader), [])
check(sum(_epoch(_loader), []) != _first, "with sampler=RandomSampler(...), each epoch asks the sampler for its "
      "order again, so two epochs differ (an order read once and kept would repeat forever)", got=_first)
_lists = [[3, 1], [0, 2, 9, 4], [8]]  # a batch sampler decides the batches: any iterable of lists of indices
_loader = DataLoader(_dsN, batch_sampler=_lists)
assert_equal(_epoch(_loader), _lists, "the batches of an epoch with batch_sampler=[[3, 1], [0, 2, 9, 4], [8]]")
assert_equal(len(_loader), 3, "len(loader) with a batch_sampler of 3 lists")
_kinds = {type(i) for b in DataLoader(_dsN, batch_size=4, shuffle=True)._index_batches() for i in b}
assert_equal(_kinds, {int}, "the indices _index_batches yields are Python ints, not numpy integers (a dataset may "
             "be a Python object that checks isinstance(index, int), and PyTorch's samplers yield ints)")
_seen_batches = []


def _keep_collate(samples):
    _seen_batches.append(len(samples))
    return samples


_custom = list(DataLoader(_dsN, batch_size=4, collate_fn=_keep_collate))
assert_equal(_seen_batches, [4, 4, 2], "a collate_fn given to the DataLoader is called once per batch, with the samples")
check(type(_custom[0]) is list and len(_custom[0]) == 4, "the loader yields what collate_fn returns", got=_custom[0])
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
# **`Subset(dataset, indices)`** is a view of a dataset: its sample `k` is the dataset's
# sample `indices[k]`. Nothing is copied.
#
# **`random_split(dataset, lengths, generator=None)`** shuffles `0..N-1` once and cuts
# the permutation into consecutive pieces of the given lengths, returning one `Subset`
# per piece: disjoint, and together covering the dataset. `lengths` are either ints that
# sum to $N$, or fractions that sum to 1. For fractions, PyTorch's rule (follow it
# exactly, so the sizes match PyTorch's): each piece gets $\lfloor N \cdot f_k \rfloor$,
# then the $r = N - \sum_k \lfloor N f_k \rfloor$ left-over samples go one each to pieces
# $0, 1, \dots$ (round-robin, piece $i \bmod K$ for $i = 0..r-1$). For $N = 10$ and
# $(0.5, 0.3, 0.2)$ that is exactly $(5, 3, 2)$; for $N = 11$ it is $(6, 3, 2)$; for $N = 7$
# and $(0.5, 0.5)$ it is $(4, 3)$. Lengths count as fractions when their sum is 1 up to
# rounding (ten fractions of 0.1 add up to 0.9999999999999999 in floating point) and not above it; each
# fraction must lie in $[0, 1]$. Any other `lengths` whose sum is not $N$ is a `ValueError`.
#
# <details><summary>Hint 1</summary>
#
# `Subset` is two lines of indirection. `random_split` is two jobs: turn the lengths into
# ints, then cut one permutation. Do them in that order.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Why floor, and not round? Rounding each piece can give sizes that sum to N + 1 (7 × 0.5
# rounds to 4 twice); flooring never overshoots, and the round-robin hands out what is left.
# </details>
#
# <details><summary>Hint 3</summary>
#
# All pieces must come from **one** permutation: drawing a permutation per piece would let
# pieces overlap. The running sum of the lengths tells where each piece ends.
# </details>
#
# <details><summary>The approach</summary>
#
# `Subset` is pure indirection: its position k names a position of the underlying dataset.
# `random_split` has two jobs, and the first must be done before the second: settle the
# integer size of every piece, then spend the randomness. Fractions need a rule that never
# overshoots N and hands out the rest in a fixed order, so the sizes match PyTorch's;
# lengths that do not end as non-negative whole numbers summing to N are an error. The
# pieces are disjoint only when they are consecutive runs of a single shuffle.
# </details>

# %% nbgrader={"grade": false, "grade_id": "random-split", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order (torch.utils.data.Subset)."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index):
        """Contract: sample `index` of the subset is sample `self.indices[index]` of the dataset."""
        # Idea: a subset is a list of indices into another dataset, nothing more.
        ### BEGIN SOLUTION
        return self.dataset[self.indices[index]]
        ### END SOLUTION

    def __len__(self):
        """Contract: the number of indices."""
        # Idea: a subset is as long as its list of indices.
        ### BEGIN SOLUTION
        return len(self.indices)
        ### END SOLUTION


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping random Subsets of the given lengths.

    Contract: `lengths` are non-negative ints summing to len(dataset), or fractions in [0, 1]
    summing to 1 (up to rounding), converted by PyTorch's rule (floor each, then the
    left-over samples one each to pieces 0, 1, ... in turn). Returns one Subset per length,
    of that length: disjoint, together covering 0..N-1, cut from one permutation drawn from
    numpy_generator(generator) (same seed, same split). Raises ValueError for a fraction outside
    [0, 1], for lengths that are not whole non-negative numbers (unless they are fractions
    summing to 1), or lengths that do not sum to N (the message names the lengths and N).
    """
    # Idea: one permutation, cut into consecutive pieces.
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
    order = numpy_generator(generator).permutation(n)
    ends = np.cumsum(lengths)
    return [Subset(dataset, order[end - k:end]) for end, k in zip(ends, lengths)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-random-split", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_sub = Subset(_dsN, [7, 2, 9])
assert_equal(len(_sub), 3, "len(Subset) = the number of indices")
assert_equal([_sub[k][0].item() for k in range(3)], [7, 2, 9], "Subset sample k is dataset sample indices[k]")
for _n, _fracs, _want in [(10, [0.5, 0.3, 0.2], [5, 3, 2]), (11, [0.5, 0.3, 0.2], [6, 3, 2]),
                          (7, [0.5, 0.5], [4, 3]), (25, [0.1] * 10, [3] * 5 + [2] * 5), (5, [0.4, 0.4, 0.2], [2, 2, 1])]:
    _sizes = [len(p) for p in random_split(TensorDataset(np.arange(_n)), _fracs, generator=Generator())]
    assert_equal(_sizes, _want, f"random_split(N={_n}, {_fracs}): floor, then the rest to pieces 0, 1, ...")
_parts = random_split(_dsN, [0.5, 0.3, 0.2], generator=Generator().manual_seed(0))
_vals = [[p[k][0].item() for k in range(len(p))] for p in _parts]
assert_equal(sorted(sum(_vals, [])), list(range(10)), "the pieces are disjoint and cover 0..9")
check(sum(_vals, []) != list(range(10)), "random_split shuffles", got=_vals)
_again = random_split(_dsN, [5, 3, 2], generator=Generator().manual_seed(0))
assert_equal([[p[k][0].item() for k in range(len(p))] for p in _again], _vals, "same seed, same split")
_other = random_split(_dsN, [5, 3, 2], generator=Generator().manual_seed(1))
check([[p[k][0].item() for k in range(len(p))] for p in _other] != _vals, "another seed, another split")
for _bad in ([5, 4], [0.5, 0.6], [0.5, 0.5 + 1e-12], [1.5, -0.5], [2.5, 7.5], [3.0, 7.5], [12, -2]):
    assert_raises(ValueError, random_split, _dsN, _bad, what=f"random_split(N=10, {_bad})")
print("✓ random_split:", _vals)

# %% [markdown]
# ### A fixed, stratified split for the digits
#
# A random split drawn anew by every run would make test accuracies incomparable: two
# runs would be scored on different images. A dataset's official test split is therefore
# **fixed**. Ours is also **stratified**: each class is split separately, so the test set
# has the same class proportions as the whole (with only ~36 test images per class, a
# plain random split could easily leave one digit under-represented).
#
# `stratified_split(labels, test_fraction, seed)` does this with its **own** random
# generator, seeded with `seed` (never the global one, so the split does not depend on
# anything else the program drew). Because every module must get the *same* split, the
# docstring pins down the order in which the random numbers are drawn; follow it exactly.
#
# For the digits we fix `test_fraction = 0.2` and `seed = 0` (`DIGITS_SPLIT_SEED`): that
# gives the split every module of the course uses.
#
# <details><summary>Hint 1</summary>
#
# One generator for the whole split, made once from the seed; the classes draw from it one
# after the other, in increasing order of the class label.
# </details>
#
# <details><summary>Hint 2</summary>
#
# numpy has a function that gives the positions where a boolean array is true, in
# increasing order: that is "the indices of class c". Rounding, not flooring, decides the
# size of each class's test share (a class of 178 has 35.6 → 36 test images).
# </details>
#
# <details><summary>The approach</summary>
#
# The split must come out the same in every run and every module, so everything that uses
# randomness is pinned by the contract: a private stream from the seed, the classes
# visited in a fixed order, one shuffle per class. Change any of these and the test set
# changes. Each class keeps its own share, rounded rather than floored, which is what
# preserves the balance. Check the fraction before anything is drawn, and hand back index
# arrays, not samples.
# </details>

# %% nbgrader={"grade": false, "grade_id": "stratified-split", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 0


def stratified_split(labels, test_fraction=0.2, seed=0):
    """Split sample indices into training and test, class by class, reproducibly.

    Contract: `labels` is a 1-D integer array; 0 < test_fraction < 1, else ValueError naming
    it. Returns (train_indices, test_indices), two sorted int64 arrays, disjoint, covering
    0..len(labels)-1. With rng = np.random.default_rng(seed), for each class c in increasing
    order: the indices of class c (increasing) are permuted by rng.permutation, and the first
    round(test_fraction * count of c) of them go to test, the rest to train.
    """
    # Idea: split each class separately, with a private generator, so the test set keeps
    # the class balance and is the same in every run.
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
assert_equal(len(_tr) + len(_te), 1797, "train + test = all digits")
assert_equal(len(np.intersect1d(_tr, _te)), 0, "no index in both train and test")
check(bool((np.diff(_tr) > 0).all() and (np.diff(_te) > 0).all()), "both index arrays sorted, no repeats")
assert_equal((_tr.dtype, _te.dtype), (np.dtype(np.int64), np.dtype(np.int64)), "int64 indices")
assert_equal([int((_labels[_te] == c).sum()) for c in range(10)],
             [round(0.2 * int((_labels == c).sum())) for c in range(10)],
             "test images per class = round(0.2 x class size)")
_tr2, _te2 = stratified_split(_labels, DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)
assert_equal(_te2, _te, "the split is fixed: same seed, same test indices")
with preserved_state():
    np.random.seed(1)   # the global numpy stream must not matter
    assert_equal(stratified_split(_labels, 0.2, 0)[1], _te, "the split ignores numpy's global random state")
check(not np.array_equal(_te, stratified_split(_labels, 0.2, seed=1)[1]), "another seed, another split")
# the course's test set, recorded from the documented recipe: every later module evaluates on it
assert_equal(_te[:12].tolist(), [5, 9, 12, 14, 16, 17, 19, 23, 24, 34, 38, 46],
             "the digits test set (seed 0): its first 12 indices")
assert_equal(int(_te.sum()), 324981, "the digits test set (seed 0): the sum of its 359 indices")
for _bad in (0.0, 1.0, 1.5):
    assert_raises(ValueError, stratified_split, _labels, _bad, what=f"stratified_split(test_fraction={_bad})")
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
# you write the constructor.
#
# <details><summary>Hint 1</summary>
#
# Everything you need is above: the loader of section 2, the split of section 6 with its two
# fixed constants.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Scale in floating point: uint8 arithmetic would wrap or truncate. A new axis of size 1 at
# position 1 turns `(N, 8, 8)` into `(N, 1, 8, 8)`.
# </details>
#
# <details><summary>The approach</summary>
#
# This constructor is a chain of conversions, and one of them is a trap: uint8 pixels must
# become floats before you divide, or the arithmetic truncates. Ask what a network expects
# of an image (values of order 1, a channel axis in front of height and width) and what
# the loss expects of a label (an integer it can index with). Whichever side you keep,
# images and labels must come from the same indices of the fixed split, in the same order.
# </details>

# %% nbgrader={"grade": false, "grade_id": "digits", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Digits(Dataset):
    """The 8x8 handwritten digits: samples (image float32 (1, 8, 8) in [0, 1], label int64).

    train=True gives the 80% training side of the fixed stratified split (1,438 images),
    train=False the 20% test side (359 images).
    """

    classes = list(range(10))

    def __init__(self, train=True, transform=None):
        """Keep one side of the fixed split.

        Contract: sets self.train (bool), self.transform, self.data (float32 Tensor
        (N, 1, 8, 8), the images / 16, in [0, 1]) and self.targets (int64 Tensor (N,)),
        for the train or test indices of stratified_split(labels, DIGITS_TEST_FRACTION,
        DIGITS_SPLIT_SEED), in the order of those indices.
        """
        # Idea: the fixed split, then the (C, H, W) float layout a network expects.
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
assert_equal((len(train_set), len(test_set)), (len(_tr), len(_te)), "(train, test) sizes follow the split")
_img, _lab = train_set[0]
assert_equal((_img.shape, _img.dtype), ((1, 8, 8), np.dtype(np.float32)), "an image: (1, 8, 8) float32")
assert_equal((_lab.shape, _lab.dtype), ((), np.dtype(np.int64)), "a label: 0-d int64")
assert_equal((float(train_set.data.numpy().min()), float(train_set.data.numpy().max())), (0.0, 1.0),
             "pixels scaled to [0, 1]")
assert_close(test_set.data.numpy()[:, 0] * 16, _images[_te], what="test images = the split's test indices / 16")
assert_equal(test_set.targets, _labels[_te], "test labels = the split's test labels")
assert_equal(train_set.targets, _labels[_tr], "train labels = the split's train labels")
check(train_set.train is True and test_set.train is False, "self.train records the side")
assert_equal(Digits(train=True, transform=lambda x: x * 0)[5][0].numpy().max(), 0.0, "the transform is applied")
print("✓ Digits:", train_set, "|", test_set)

# %% [markdown]
# ### Does the order matter? A first training run
#
# Section 1 claimed that examples in a fixed order (all the 0s, then all the 1s, ...) make
# training go astray. Here is the measurement, with your `DataLoader`. A linear classifier
# (ten scores per image: one weight per pixel and class, plus a bias per class) is trained
# by plain gradient steps on batches of 32, twice for two epochs: once over the training
# images **sorted by label** with `shuffle=False`, once over them with `shuffle=True`. After
# every step, its accuracy on the test images is recorded. Its loss (cross-entropy) and
# its gradient step are provided, in numpy: modules 04 and 06 derive them.
#
# **Predict first.** What test accuracy does each order reach after two epochs? (Ten
# classes: guessing gets 10%.)

# %%
predicted_sorted_accuracy = None  # your number in [0, 1]
predicted_shuffled_accuracy = None  # your number in [0, 1]

# %%
def train_linear_classifier(loader, epochs=2, lr=0.5):
    """Gradient steps of a softmax classifier over the loader's batches; the test accuracy
    after each step."""
    weight, bias = np.zeros((64, 10)), np.zeros(10)
    test_x, test_y = test_set.data.numpy().reshape(len(test_set), 64), test_set.targets.numpy()
    curve = []
    for _ in range(epochs):
        for images, labels in loader:
            x, y = images.numpy().reshape(len(labels), 64), labels.numpy()
            scores = x @ weight + bias
            probs = np.exp(scores - scores.max(axis=1, keepdims=True))
            probs /= probs.sum(axis=1, keepdims=True)
            probs[np.arange(len(y)), y] -= 1  # the gradient of the cross-entropy w.r.t. the scores
            weight -= lr * x.T @ probs / len(y)
            bias -= lr * probs.mean(axis=0)
            curve.append(float(((test_x @ weight + bias).argmax(axis=1) == test_y).mean()))
    return curve


_x, _y = train_set.data.numpy(), train_set.targets.numpy()
_by_label = np.argsort(_y, kind="stable")
sorted_curve = train_linear_classifier(DataLoader(TensorDataset(_x[_by_label], _y[_by_label]), batch_size=32))
shuffled_curve = train_linear_classifier(DataLoader(TensorDataset(_x, _y), batch_size=32, shuffle=True,
                                                    generator=Generator().manual_seed(0)))
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.plot(shuffled_curve, label="shuffle=True")
ax.plot(sorted_curve, label="sorted by label, shuffle=False")
ax.axhline(0.1, color="gray", ls=":", lw=1, label="guessing")
ax.axvline(len(sorted_curve) / 2, color="gray", lw=0.5)
ax.set_xlabel("gradient step (batches of 32; two epochs)")
ax.set_ylabel("test accuracy")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"after two epochs: sorted {sorted_curve[-1]:.3f}, shuffled {shuffled_curve[-1]:.3f}; "
      f"your predictions: {predicted_sorted_accuracy}, {predicted_shuffled_accuracy}")

# %% [markdown]
# <details><summary>What the curves show (open after comparing with your prediction)</summary>
#
# With sorted batches every step sees one class, and the gradient pulls the classifier
# toward "everything is this class": the model forgets the earlier digits as it walks
# through the later ones, and ends each epoch predicting mostly the last labels it saw.
# The same data, the same number of steps and the same learning rate, shuffled, give a
# classifier that is right most of the time. The batches of a shuffled loader are small
# samples of the whole training set, so each step moves the weights roughly where the
# whole set would.
# </details>

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
# the channel is dimension −3). Broadcasting (module 01) does the work, as a composite of
# existing ops; the result has the input's shape and dtype.
#
# **Augmentation** is random: a new random variant of the image every time it is read, so
# that in every epoch the model sees slightly different data and cannot memorise pixels.
#
# - `RandomHorizontalFlip(p)`: with probability $p$, mirror the image left-right (reverse
#   the last dimension); $p = 1$ always flips and $p = 0$ never does.
# - `RandomCrop(size, padding)`: pad the last two dimensions with `padding` zeros on every
#   side, then cut a `size` window at a uniformly random position; every one of the
#   $(H'-h+1)(W'-w+1)$ positions of an $h \times w$ window in the padded $H' \times W'$
#   image must be possible. With `size` equal to the image and `padding=1`, this shifts the
#   image by up to one pixel in each direction, the classic augmentation for small images.
#
# A word on **which digits augmentations make sense**: shifting by a pixel keeps a digit
# what it is; flipping does not for all digits (a mirrored 2 is not a 2). Transforms are
# choices about what your model should treat as "the same", not free accuracy.
#
# `Compose([t1, t2, ...])` (provided) applies transforms in order. Each random transform
# accepts `generator=` (a `Generator`) for reproducible augmentation; by default it draws
# from tinytorch's global generator. All transforms accept a Tensor or a numpy array and
# return a Tensor.
#
# Write `Normalize.__call__` first; the two random transforms come in the next cell.
#
# <details><summary>Hint 1</summary>
#
# To subtract one mean per channel from a `(C, H, W)` image, the means must be a tensor
# whose shape broadcasts along dimension −3 only. What shape is that?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Cast the statistics to the image's dtype before making tensors of them, or a float32 image
# minus a float64 mean comes out float64.
# </details>
#
# <details><summary>The approach</summary>
#
# Three things can go wrong quietly: an integer image (refuse it, do not guess), a dtype
# that drifts when float64 statistics meet a float32 image, and per-channel statistics
# that broadcast along the wrong axis. The channels are dimension −3 whatever comes before
# them, so the statistics must line up with that axis and no other, and their count must
# match it before you compute anything. A single mean and std need no shaping at all.
# </details>

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
        """Normalise one image (H, W) / (C, H, W), or a batch (..., C, H, W).

        Contract: `x` a Tensor or numpy array. Returns a Tensor of x's shape and dtype,
        (x - mean) / std with one mean for every pixel, or mean[c] for channel c
        (dimension -3). Raises TypeError for a non-floating x (naming its dtype), ValueError
        when there are several means and x has not that many channels along dimension -3
        (naming the count and x's shape).
        """
        # Idea: per-channel statistics broadcast along the channel dimension.
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


# %% nbgrader={"grade": true, "grade_id": "test-normalize", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_im = np.random.default_rng(0).random((3, 4, 5)).astype(np.float32)   # (C, H, W), H != W
_mu, _sd = np.array([0.1, 0.2, 0.3], np.float32), np.array([0.5, 1.0, 2.0], np.float32)
_out = Normalize(_mu, _sd)(tensor(_im))
assert_equal(_out.dtype, np.dtype(np.float32), "Normalize keeps float32")
assert_close(_out, (_im - _mu[:, None, None]) / _sd[:, None, None], what="Normalize per channel (dimension -3)")
assert_close(Normalize(0.5, 0.25)(_im[0]), (_im[0] - 0.5) / 0.25, what="Normalize with one number, (H, W) image")
_batch = np.stack([_im, _im * 2])
assert_close(Normalize(_mu, _sd)(_batch), (_batch - _mu[:, None, None]) / _sd[:, None, None],
             what="Normalize on a (B, C, H, W) batch")
_e = assert_raises(ValueError, Normalize([0.1, 0.2], [1.0, 1.0]), _im, what="2 means for 3 channels")
check("2" in str(_e) and "(3, 4, 5)" in str(_e), "the message names the 2 means and the shape", got=str(_e))
assert_raises(ValueError, Normalize([0.1, 0.2, 0.3, 0.4], [1.0] * 4), np.zeros((5, 3, 4), np.float32),
              what="4 means for a channels-last (5, 3, 4) image: the channels are dimension -3")
assert_raises(ValueError, Normalize([0.1, 0.2], [1.0, 1.0]), np.zeros((2, 5), np.float32),
              what="2 means for a (2, 5) image: an (H, W) image has no channel dimension (numpy would broadcast "
              "the means into a (2, 2, 5) result)")
assert_raises(TypeError, Normalize(0.5, 1.0), np.zeros((2, 2), np.uint8), what="Normalize of a uint8 image")
print("✓ Normalize: per channel, one number, batches; 2 means for 3 channels refused")

# %% [markdown]
# Now the random transforms: `RandomHorizontalFlip.__call__` and `RandomCrop.__call__`.
#
# <details><summary>Hint 1</summary>
#
# Flip: one uniform draw from the transform's own generator decides, so that a seed
# reproduces the augmentation; with which probability must it say "flip"? tinytorch, like
# PyTorch, has no negative-step slices, but module 01 gave you an op that reverses a
# dimension.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Crop: build the padding from module 01's ops, concatenating blocks of zeros (of x's dtype)
# on both sides, first along the last dimension, then along the one before it.
# </details>
#
# <details><summary>Hint 3</summary>
#
# A numpy generator's `integers(low, high)` excludes `high`. In a padded image of height H',
# how many top rows can an h-row window start at?
# </details>
#
# <details><summary>The approach</summary>
#
# Each call spends randomness from the transform's own stream, so that equal seeds give
# equal augmentations. For the flip: how does one uniform draw become an event of
# probability p, with p = 0 and p = 1 exact? For the crop: the range of valid positions
# depends on the padded size, so pad before you draw; count the start positions so that
# both extreme windows can occur, and refuse a window that cannot fit at all.
# </details>

# %% nbgrader={"grade": false, "grade_id": "transforms-random", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class RandomHorizontalFlip:
    """Mirror the image left-right (last dimension) with probability p."""

    def __init__(self, p=0.5, generator=None):
        if not 0 <= p <= 1:
            raise ValueError(f"p must be a probability in [0, 1], got {p}")
        numpy_generator(generator)
        self.p = p
        self.generator = generator

    def __call__(self, x):
        """Contract: returns a Tensor: x reversed along its last dimension with probability p
        (one uniform draw from numpy_generator(self.generator) per call), else x unchanged."""
        # Idea: one coin flip per call, biased by p.
        ### BEGIN SOLUTION
        x = _as_image(x)
        if numpy_generator(self.generator).random() < self.p:
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
        numpy_generator(generator)
        self.padding = int(padding)
        self.generator = generator

    def __call__(self, x):
        """A random window of the zero-padded image.

        Contract: returns a Tensor of x's dtype and leading dimensions, with the last two
        of size self.size = (h, w): a window of x padded by `padding` zeros on every side,
        at a position drawn uniformly (top, then left) from numpy_generator(self.generator),
        every position that fits being possible. Raises ValueError when (h, w) does not fit
        in the padded image (naming both sizes).
        """
        # Idea: pad with zeros, then choose uniformly among all the windows that fit.
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
        rng = numpy_generator(self.generator)
        top = int(rng.integers(0, H - h + 1))
        left = int(rng.integers(0, W - w + 1))
        return x[..., top:top + h, left:left + w]
        ### END SOLUTION

    def __repr__(self):
        return f"RandomCrop(size={self.size}, padding={self.padding})"


# %% nbgrader={"grade": true, "grade_id": "test-transforms", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_im = np.random.default_rng(0).random((3, 4, 5)).astype(np.float32)   # (C, H, W), H != W
for _p in (1.0, 0.0):
    _kind = type(RandomHorizontalFlip(p=_p)(_im)).__name__
    check(_kind == "Tensor", f"RandomHorizontalFlip(p={_p}) of a numpy image returns a Tensor, flipped or not",
          got=_kind)
assert_equal(RandomHorizontalFlip(p=1.0)(_im), _im[..., ::-1], "p=1 always mirrors the last dimension")
assert_equal(RandomHorizontalFlip(p=0.0)(_im), _im, "p=0 never flips")
_flips = [RandomHorizontalFlip(p=0.3, generator=Generator().manual_seed(s))(_im).numpy()[0, 0, 0] != _im[0, 0, 0]
          for s in range(200)]
check(30 <= sum(_flips) <= 90, "p=0.3 flips about 60 of 200 images", got=sum(_flips), expected="30..90")
with preserved_state():
    np.random.seed(12345)   # numpy's global stream must not decide anything
    _again = [RandomHorizontalFlip(p=0.3, generator=Generator().manual_seed(s))(_im).numpy()[0, 0, 0] != _im[0, 0, 0]
              for s in range(200)]
assert_equal(_again, _flips, "the flips depend on the transform's generator only, not on numpy's global seed")
_c = RandomCrop(3)(_im)
assert_equal(_c.shape, (3, 3, 3), "RandomCrop(3) of a (3, 4, 5) image")
_padded = np.pad(_im, ((0, 0), (1, 1), (1, 1)))            # (3, 6, 7): a 4 x 5 window has 3 x 3 positions
_where = {}
for _s in range(60):
    _crop = RandomCrop((4, 5), padding=1, generator=Generator().manual_seed(_s))(_im).numpy()
    _at = [(t, l) for t in range(3) for l in range(3) if (_crop == _padded[:, t:t + 4, l:l + 5]).all()]
    check(len(_at) > 0, "every crop is a 4 x 5 window of the image zero-padded by 1 on every side", got=_crop)
    _where[_s] = _at[0]
assert_equal(sorted(set(_where.values())), [(t, l) for t in range(3) for l in range(3)],
             "all 9 crop positions occur (tops 0..2 and lefts 0..2: every window that fits)")
for _s, _pos in _where.items():
    _g = numpy_generator(Generator().manual_seed(_s))   # the contract's draw order: top, then left
    _first = int(_g.integers(0, 3))
    assert_equal(_pos, (_first, int(_g.integers(0, 3))), f"seed {_s}: (top, left), drawn in that order")
assert_equal(str(RandomCrop(3, padding=1)(tensor(_im.astype(np.float64))).dtype), "float64",
             "RandomCrop of a float64 image, padded: float64 (the padding in the image's dtype)")
assert_equal(str(RandomCrop(3, padding=1)(tensor((_im * 255).astype(np.int64))).dtype), "int64",
             "RandomCrop of an int64 image, padded: int64 (the padding in the image's dtype)")
_full = RandomCrop((4, 5))(_im)
assert_equal(_full, _im, "a crop the size of the image, no padding, is the image")
_e = assert_raises(ValueError, RandomCrop(6), _im, what="a 6 x 6 crop of a 4 x 5 image")
check(all(n in str(_e).replace(" ", "") for n in ("6x6", "4x5")), "the message names both sizes (6 x 6 and 4 x 5)",
      got=str(_e))
assert_close(Compose([lambda x: x + 1, lambda x: x * 2])(tensor(_im)), (_im + 1) * 2, what="Compose: in order")
print("✓ RandomHorizontalFlip, RandomCrop, Compose: 9 crop positions seen")

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
# ## 9. Sequences of different lengths: padding and buckets
#
# Every digit is $8 \times 8$, so `default_collate` can stack them. Text is not like that:
# cut the fables into sentences and they run from a few characters to a few hundred. A batch
# is one rectangular tensor, so each sentence in it is **padded**: filled out to the length
# of the longest one with a value that means "nothing here". The true **lengths** travel
# with the batch, so that a model can ignore the padding (module 12's masks do exactly that).
#
# ```
#   a batch of 3 sentences, one character per column     length
#   The fox ran.···········                                12
#   A crow sat on a branch.                                23      · = padding
#   No!····················                                 3
#   └──── T = 23, the longest ───┘
# ```
#
# Padding is not free. A model computes on every position of the rectangle, padding
# included: here $3 \times 23 = 69$ positions are computed and $12 + 23 + 3 = 38$ of them
# are real, so **45% of the batch's compute is thrown away**. How much is thrown away depends on which sentences share a batch,
# and that is the loader's choice, not the model's.
#
# First the collate. `default_collate` refuses samples of different shapes; `pad_collate`
# takes `(sequence, target)` samples whose sequences differ in length.
#
# <details><summary>Hint 1</summary>
#
# Before filling anything, how wide must the batch be, and what is in every cell of it
# before a sequence is written into its row?
# </details>
#
# <details><summary>The approach</summary>
#
# Turn each sequence into a 1-D numpy array first (refusing anything else, with its index),
# then decide the rectangle's shape from their lengths, start it full of the padding value
# and write each sequence at the start of its row. The targets are ordinary samples:
# collate them the way you already can.
# </details>

# %% nbgrader={"grade": false, "grade_id": "pad-collate", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def pad_collate(batch, padding_value=0):
    """Collate (sequence, target) samples whose sequences differ in length.

    Contract: `batch` is a non-empty list of pairs; each sequence is a 1-D array-like of
    integers (a Tensor, a numpy array or a list), else ValueError naming the sample's index
    and its shape. Returns (padded, lengths, targets): `padded` an int64 Tensor of shape
    (B, T), T the longest sequence of this batch, whose row i holds sequence i from its
    first position on and padding_value after it; `lengths` an int64 Tensor of shape (B,),
    the sequences' lengths; `targets` default_collate of the targets.
    """
    # Idea: a rectangle as wide as this batch's longest sequence, filled row by row.
    ### BEGIN SOLUTION
    seqs = []
    for i, (seq, _) in enumerate(batch):
        arr = np.asarray(seq.numpy() if isinstance(seq, Tensor) else seq)
        if arr.ndim != 1:
            raise ValueError(f"pad_collate: sample {i}'s sequence has shape {arr.shape}; each must be 1-D")
        seqs.append(arr)
    lengths = np.array([len(a) for a in seqs], dtype=np.int64)
    padded = np.full((len(seqs), int(lengths.max(initial=0))), padding_value, dtype=np.int64)
    for row, arr in zip(padded, seqs):
        row[:len(arr)] = arr
    return tensor(padded), tensor(lengths), default_collate([target for _, target in batch])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-pad-collate", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_pb, _pl, _pt = pad_collate([(np.array([5, 6, 7]), 0), ([8], 1), (tensor(np.array([1, 2, 3, 4, 9])), 2)])
assert_equal(_pb.shape, (3, 5), "padded shape: 3 sequences, the longest of length 5")
assert_equal(str(_pb.dtype), "int64", "padded dtype")
assert_equal(_pb.numpy().tolist(), [[5, 6, 7, 0, 0], [8, 0, 0, 0, 0], [1, 2, 3, 4, 9]],
             "each row: its sequence from position 0, then the padding value 0")
assert_equal(_pl.numpy().tolist(), [3, 1, 5], "lengths: the true length of each sequence")
assert_equal(str(_pl.dtype), "int64", "lengths dtype")
check(isinstance(_pt, Tensor), "targets: default_collate of the targets (a Tensor here)", got=type(_pt).__name__)
assert_equal(_pt.numpy().tolist(), [0, 1, 2], "targets: default_collate of the targets")
_pb = pad_collate([([1, 2], 0), ([3], 1)], padding_value=-1)[0]
assert_equal(_pb.numpy().tolist(), [[1, 2], [3, -1]], "padding_value=-1 fills the gaps")
assert_equal(pad_collate([([4, 4], 0), ([2, 2], 1)])[0].shape, (2, 2),
             "two sequences of length 2: T = 2 (the longest in this batch, no more)")
_e = assert_raises(ValueError, pad_collate, [([1], 0), (np.zeros((2, 2), dtype=np.int64), 1)],
                   what="a 2-D sequence as sample 1")
check("1" in str(_e) and "(2, 2)" in str(_e), "the message names the sample (1) and its shape (2, 2)", got=str(_e))
print("✓ pad_collate: [5, 6, 7], [8], [1, 2, 3, 4, 9] ->", pad_collate([([5, 6, 7], 0), ([8], 1), ([1, 2, 3, 4, 9], 2)])[0].numpy().tolist())

# %% [markdown]
# Now the fables as a dataset of sentences: each sample is a sentence as an array of
# character codes, and its target is the mark that ends it (0 for ".", 1 for "!", 2 for
# "?"), a small task a model could learn later.

# %%
import re


class _Sentences(Dataset):
    def __init__(self, text):
        parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
        self.sentences = [s for s in parts if s[-1] in ".!?"]
        self.lengths = np.array([len(s) for s in self.sentences], dtype=np.int64)

    def __len__(self):
        return len(self.sentences)

    def __getitem__(self, index):
        s = self.sentences[index]
        return np.frombuffer(s.encode("ascii"), dtype=np.uint8).astype(np.int64), ".!?".index(s[-1])


sentences = _Sentences(load_text())
print(f"{len(sentences)} sentences, lengths {sentences.lengths.min()} to {sentences.lengths.max()} characters "
      f"(median {int(np.median(sentences.lengths))})")


def padding_fraction(lengths, batches):
    """The fraction of the padded batches' positions that are padding."""
    real = sum(int(lengths[b].sum()) for b in batches)
    computed = sum(len(b) * int(lengths[b].max()) for b in batches)
    return 1 - real / computed


# %% [markdown]
# **Predict first.** Batches of 16 sentences, shuffled the usual way (your `DataLoader`
# with `shuffle=True`). What fraction of the padded positions of an epoch is padding?
# Write your guess, then run the cell after it.

# %%
predicted_random_padding = None   # a fraction between 0 and 1

# %%
_loader = DataLoader(sentences, batch_size=16, shuffle=True, collate_fn=pad_collate,
                     generator=Generator().manual_seed(0))
_random_batches = list(_loader._index_batches())
_xb, _lb, _yb = next(iter(_loader))
print(f"one batch: padded {tuple(_xb.shape)}, lengths {_lb.numpy().tolist()}")
print(f"padding in an epoch of shuffled batches: {padding_fraction(sentences.lengths, _random_batches):.0%} "
      f"(you predicted {predicted_random_padding})")

# %% [markdown]
# About half of every epoch's compute would go to padding. The cure is to put sentences of
# similar length together. The extreme version sorts the whole dataset by length and cuts
# the sorted list into batches: almost no padding. So why does nobody train like that?
# Think about it before you read on; the measurement below says one reason in numbers.
#
# Two things go wrong. Sorted batches are the **same batches every epoch**: the same 16
# sentences always meet, so the gradient of each step is the same noisy average each epoch,
# which is the fixed order that section 1 warned about, moved inside the batch. And if the
# batches are served in sorted order, the model sees all the short sentences, then all the
# long ones: the data it learns from drifts within every epoch.
#
# Call **mixing** the fraction of the pairs of samples that share a batch in one epoch and
# share one again in the next. Random batches of 16 from 570 sentences mix well (a partner
# has a chance of about 15 in 569 to meet you again: about 3%); sorted batches hardly mix at
# all (most pairs meet again).

# %%
def mixing(epoch_a, epoch_b):
    """The fraction of the pairs that share a batch in epoch_a and share one again in epoch_b."""
    def pairs(batches):
        return {(i, j) for b in batches for i in b for j in b if i < j}
    a, b = pairs(epoch_a), pairs(epoch_b)
    return len(a & b) / len(a)


_sorted = np.argsort(sentences.lengths, kind="stable")
_sorted_batches = [_sorted[i:i + 16] for i in range(0, len(_sorted), 16)]
_epoch2 = list(_loader._index_batches())
print(f"shuffled batches: padding {padding_fraction(sentences.lengths, _random_batches):.0%}, "
      f"mixing {mixing(_random_batches, _epoch2):.1%}")
print(f"sorted batches:   padding {padding_fraction(sentences.lengths, _sorted_batches):.0%}, "
      f"mixing {mixing(_sorted_batches, _sorted_batches):.0%} (sorting decides the batches: every epoch "
      f"has the same ones)")

# %% [markdown]
# ### Your design: a bucketing batch sampler
#
# Design a sampler that keeps most of sorting's saving and most of shuffling's mixing, with
# one knob, `pool`: **the number of batches' worth of samples your sampler may arrange
# together**. `pool=1` arranges nothing (its padding is that of shuffled batches); `pool`
# $= \lceil N/B \rceil$ may arrange the whole dataset (its padding must be that of the sorted
# batches). In between, a larger pool should pad less, and more of its pairs will meet
# again (its mixing measure rises: the price of the saving). How it uses the pool is
# yours to design; the contract says what the loader needs, and the check measures the rest.
#
# It is a **batch sampler**: it yields lists of indices, and the DataLoader takes it as
# `DataLoader(dataset, batch_sampler=..., collate_fn=pad_collate)`. Ask yourself where
# randomness must enter so that epochs differ, and where it must not, so that lengths stay
# together.
#
# <details><summary>Hint 1</summary>
#
# Sorting is what removes padding, and sorting is what makes the batches repeat. What if
# you sorted something smaller than the dataset, something that is different every epoch?
# </details>
#
# <details><summary>Hint 2</summary>
#
# There are two different orders in an epoch: which samples are grouped together, and in
# which order the finished batches are served. The first must follow lengths (within a
# group); the second must not follow lengths at all.
# </details>
#
# <details><summary>The approach</summary>
#
# Let the randomness decide which samples end up arranged together, a fresh draw each
# epoch, and let lengths decide everything inside such a group. A group holding exactly
# `pool` batches' worth of samples cuts into full batches, so every batch is full except
# possibly one, as the contract asks. Then forget the lengths again when deciding the order
# in which the batches come out. Check the two extremes against the contract: what does
# your design do with a pool of one batch, and with a pool of the whole dataset?
# </details>

# %% nbgrader={"grade": false, "grade_id": "bucket-batch-sampler", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class BucketBatchSampler(Sampler):
    """Batches of indices of similar length, arranged afresh each epoch: less padding than
    shuffled batches, more mixing than sorted ones (a batch sampler for the DataLoader).
    """

    def __init__(self, lengths, batch_size, pool=8, generator=None):
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise ValueError(f"lengths must be 1-D (one length per sample), got shape {self.lengths.shape}")
        for name, value in (("batch_size", batch_size), ("pool", pool)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        numpy_generator(generator)  # fail now, not at the first epoch, on a wrong generator
        self.batch_size, self.pool, self.generator = int(batch_size), int(pool), generator

    def __iter__(self):
        """One epoch of batches.

        Contract: a generator of lists of Python ints. Together they hold each index
        0..N-1 (N = len(lengths)) exactly once; every list has batch_size indices except at
        most one, which is shorter. The randomness is drawn from
        numpy_generator(self.generator) when the epoch starts: each epoch differs, equal
        seeds give equal epochs. The order in which the batches come out does not follow
        their lengths. pool = 1 pads like shuffled batches; pool >= ceil(N / batch_size)
        pads like the whole dataset sorted by length and cut into batches; the check and
        the tests measure padding and mixing for pools in between (see the section).
        """
        # Idea: randomness decides who is arranged together; lengths decide the arrangement.
        ### BEGIN SOLUTION
        rng = numpy_generator(self.generator)
        order = rng.permutation(len(self.lengths))
        group = self.pool * self.batch_size
        batches = []
        for start in range(0, len(order), group):
            members = order[start:start + group]
            members = members[np.argsort(self.lengths[members], kind="stable")]
            batches += [members[i:i + self.batch_size].tolist() for i in range(0, len(members), self.batch_size)]
        for k in rng.permutation(len(batches)):
            yield batches[k]
        ### END SOLUTION

    def __len__(self):
        """Batches per epoch.

        Contract: an int, the number of lists one epoch yields, computed without drawing one.
        """
        # Idea: full batches plus at most one short one.
        ### BEGIN SOLUTION
        return -(-len(self.lengths) // self.batch_size)
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-bucket-batch-sampler", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
def _epochs(lengths, batch_size, pool, seed, count=2):
    _s = BucketBatchSampler(lengths, batch_size, pool=pool, generator=Generator().manual_seed(seed))
    return _s, [list(_s) for _ in range(count)]


for _n, _b, _pool in [(10, 3, 1), (10, 3, 2), (37, 4, 3), (64, 8, 8), (5, 8, 2), (1, 1, 1)]:
    _lens = np.random.default_rng(_n).integers(1, 50, _n)
    _s, (_e1, _e2) = _epochs(_lens, _b, _pool, seed=0)
    _what = f"N={_n}, batch_size={_b}, pool={_pool}"
    for _e in (_e1, _e2):
        check(all(type(i) is int for b in _e for i in b), f"indices are Python ints ({_what})",
              got={type(i).__name__ for b in _e for i in b})
        assert_equal(sorted(i for b in _e for i in b), list(range(_n)), f"each index exactly once per epoch ({_what})")
        _short = [len(b) for b in _e if len(b) != _b]
        check(len(_short) <= 1 and all(0 < k < _b for k in _short),
              f"every batch holds batch_size indices except at most one shorter ({_what})",
              got=[len(b) for b in _e])
    assert_equal(len(_s), len(_e1), f"len(sampler) = the number of batches an epoch yields ({_what})")
_lens = sentences.lengths
_nb = -(-len(_lens) // 16)
_s, (_e1, _e2) = _epochs(_lens, 16, 4, seed=1)
check(_e1 != _e2, "two epochs differ (randomness drawn when each epoch starts)")
assert_equal(_epochs(_lens, 16, 4, seed=1)[1][0], _e1, "the same generator seed gives the same epoch")
_pads, _mixes = {}, {}
for _pool in (1, 2, 4, 8, 16, _nb):
    _s, (_e1, _e2) = _epochs(_lens, 16, _pool, seed=2)
    _pads[_pool], _mixes[_pool] = padding_fraction(_lens, _e1), mixing(_e1, _e2)
_down = np.argsort(-_lens, kind="stable")                   # sorted longest first: the short batch at the end
_sorted_pad = max(padding_fraction(_lens, _sorted_batches),
                  padding_fraction(_lens, [_down[i:i + 16] for i in range(0, len(_down), 16)]))
check(_pads[1] > 0.45, "pool=1 arranges nothing: it pads like shuffled batches (about 54% here)",
      got=f"{_pads[1]:.1%}", expected="> 45%")
check(_pads[_nb] <= _sorted_pad + 0.01, f"pool={_nb} (the whole dataset) pads like the sorted batches (in "
      f"either direction)",
      got=f"{_pads[_nb]:.1%}", expected=f"<= {_sorted_pad:.1%} + 1 point")
check(_pads[8] < 0.25 and _mixes[8] < 0.20, "pool=8 keeps most of sorting's saving and most of shuffling's mixing",
      got=f"padding {_pads[8]:.1%}, mixing {_mixes[8]:.1%}", expected="padding < 25%, mixing < 20%")
check(_pads[1] > _pads[4] > _pads[16], "a larger pool pads less", got={k: f"{v:.1%}" for k, v in _pads.items()})
_firsts = set()
for _seed in range(5):
    _e = _epochs(_lens, 16, _nb, seed=_seed, count=1)[1][0]
    _maxes = [int(_lens[b].max()) for b in _e]
    check(_maxes != sorted(_maxes) and _maxes != sorted(_maxes, reverse=True),
          f"pool={_nb}: the batches do not come out in order of length (seed {_seed})", got=_maxes)
    _firsts.add(_maxes[0])
check(len(_firsts) > 1, "the first batch of an epoch is not always the same length", got=sorted(_firsts))
print("✓ BucketBatchSampler:", ", ".join(f"pool {k}: padding {_pads[k]:.0%}, mixing {_mixes[k]:.0%}" for k in _pads))

# %% [markdown]
# **Predict first.** Before you read the check's printout: where would a pool of 8 batches
# put an epoch of the fables between the two extremes (54% and 5% padding)? Then look at
# the trade-off over more pools and seeds.

# %%
predicted_pool8_padding = None   # a fraction between 0 and 1

# %%
fig, ax = plt.subplots(figsize=(7, 4.5))
_nb = -(-len(sentences) // 16)
for _pool in (1, 2, 4, 8, 16, _nb):
    _pts = []
    for _seed in range(4):
        _s = BucketBatchSampler(sentences.lengths, 16, pool=_pool, generator=Generator().manual_seed(_seed))
        _e1, _e2 = list(_s), list(_s)
        _pts.append((mixing(_e1, _e2), padding_fraction(sentences.lengths, _e1)))
    _mx, _pd = np.mean(_pts, axis=0)
    ax.scatter([p[0] for p in _pts], [p[1] for p in _pts], s=14, color="tab:blue", alpha=0.5)
    ax.annotate(f"pool {_pool}", (_mx, _pd), textcoords="offset points", xytext=(6, 4), fontsize=9)
ax.set_xscale("log")
ax.set_xlabel("mixing: fraction of pairs that meet again next epoch (log scale)")
ax.set_ylabel("padding: fraction of positions")
ax.set_title("Bucketing the fables' sentences (B = 16, 4 seeds per pool)")
ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()
print(f"pool 8: padding {_pads[8]:.0%} (you predicted {predicted_pool8_padding})")

# %% [markdown]
# The points fall on a curve: no pool is best at both, and the knob moves you along it. The
# batch shapes come out of the loader as before:

# %%
_bucketed = DataLoader(sentences, batch_sampler=BucketBatchSampler(sentences.lengths, 16, pool=8,
                                                                   generator=Generator().manual_seed(0)),
                       collate_fn=pad_collate)
for _k, (_xb, _lb, _yb) in zip(range(4), _bucketed):
    print(f"batch {_k}: padded {tuple(_xb.shape)}, lengths {int(_lb.numpy().min())}..{int(_lb.numpy().max())}")
_computed = {name: sum(len(b) * int(sentences.lengths[b].max()) for b in batches) for name, batches in
             [("shuffled", _random_batches), ("pool 8", list(_bucketed.batch_sampler)),
              ("sorted", _sorted_batches)]}
print(f"positions computed per epoch: " + ", ".join(f"{k} {v:,}" for k, v in _computed.items())
      + f" (real characters: {int(sentences.lengths.sum()):,})")

# %% [markdown]
# PyTorch has no bucketing sampler of its own; libraries that train on text write one like
# yours (torchtext had `BucketIterator`, Hugging Face's trainer has `group_by_length`),
# and large language-model training often avoids padding altogether by **packing**: it
# concatenates documents into one long stream and takes rows of exactly the context
# length from it, which is what module 10's `get_batch` does with the fables.

# %% [markdown]
# ## 10. A systems look: bytes and time
#
# ### Bytes per batch, bytes per dataset
#
# A digits sample is a float32 image of $1 \times 8 \times 8$ values and an int64 label.
# **Predict first**: how many bytes does a collated batch of 32 training digits hold (images
# plus labels)? And how many KiB do all 1,797 digits take as the float32 + int64 tensors of
# `Digits`, compared with the uint8 + int64 arrays of `load_digits`?

# %%
predicted_batch32_bytes = None   # your number: bytes of one batch of 32 (images + labels)
predicted_tensor_kib = None      # your number: KiB of all digits as float32 images + int64 labels

# %%
import os

from tinytorch import memory_footprint

_sample_bytes = train_set[0][0].nbytes + train_set[0][1].nbytes
print(f"one sample: {_sample_bytes} bytes (image {train_set[0][0].nbytes} + label {train_set[0][1].nbytes})")
for B in (1, 32, 256):
    xb, yb = next(iter(DataLoader(train_set, batch_size=B)))
    print(f"batch of {B:4d}: {B} x one sample = {B * _sample_bytes:8,d} bytes, measured {xb.nbytes + yb.nbytes:8,d} bytes")
print("your prediction for B = 32:", "none" if predicted_batch32_bytes is None else f"{predicted_batch32_bytes:,} bytes")

_disk = os.path.getsize(str(_asset("digits.npz")))
_raw = _images.nbytes + _labels.nbytes
_dev = (train_set.data.nbytes + train_set.targets.nbytes + test_set.data.nbytes + test_set.targets.nbytes)
print(f"\nall 1,797 digits: {_disk / 1024:6.1f} KiB on disk (compressed npz), "
      f"{_raw / 1024:6.1f} KiB as uint8 + int64 arrays, {_dev / 1024:6.1f} KiB as float32 + int64 tensors "
      f"(you predicted {'nothing' if predicted_tensor_kib is None else f'{predicted_tensor_kib} KiB'})")
print(f"sample view keeps alive: {memory_footprint(train_set[0][0]):,} bytes; "
      f"a collated batch of 32 owns: {memory_footprint(next(iter(DataLoader(train_set, batch_size=32)))[0]):,} bytes")

# %% [markdown]
# The arithmetic: an image is 64 float32 values, 256 bytes, and a label 8 bytes, so a sample
# is 264 bytes and a batch of $B$ samples $264\,B$ bytes: tiny here, but the same
# arithmetic for a batch of 256 RGB images of $224 \times 224$ gives
# $256 \cdot 3 \cdot 224 \cdot 224 \cdot 4 \approx 154$ MB, before the model has computed a
# single activation. These byte counts are exact on any machine (only the file size depends
# on the compressor's version).
#
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
# (the median of a few repeats; your numbers will differ from anyone else's).
#
# **Predict first**: at $B = 256$, how many times slower is our DataLoader than the
# vectorised fetch? And does the DataLoader's epoch get faster as $B$ grows from 1 to 1024?

# %%
predicted_ratio_at_256 = None   # your number: DataLoader time / vectorised time at B = 256

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

print("your prediction at B = 256:", "none" if predicted_ratio_at_256 is None else f"{predicted_ratio_at_256}x",
      f"| measured {t_loader[batch_sizes.index(256)] / t_vector[batch_sizes.index(256)]:.1f}x")

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
# C), so its time is dominated by the first term and falls roughly as $1/B$ as $B$ grows
# (on a quiet machine; another process's burst shows as a bump, so rerun if one appears). The
# DataLoader pays a large $c_{\text{sample}}$, microseconds of Python for every
# `dataset[i]` call and every tensor `stack` converts, so however large the batch, its
# epoch cannot get faster than $N \cdot c_{\text{sample}}$: the curve flattens onto that
# floor. At $B = 1$ both are dominated by per-batch costs, so expect them to be closest there.
# The printed ratios and the plot show where your machine lands; the exact numbers move with
# the CPU, numpy's version and whatever else is running, the trend (a widening gap as $B$
# grows) should not.
#
# That is why real pipelines either make per-sample work worthwhile (decoding a JPEG
# takes milliseconds, so the Python overhead disappears in it) and spread it over worker
# processes, or fetch whole batches at once when the data is already in memory. For the
# digits, both are far faster than the training step that will consume the batches.
#
# ## 11. How PyTorch does it
#
# - `torch.utils.data.Dataset`, `TensorDataset`, `Subset`, `random_split` and
#   `default_collate` are what you wrote (PyTorch's `random_split` uses the same
#   floor-then-round-robin rule for fractions). `IterableDataset` covers streams that
#   have no `len` or random access (reading a huge text file line by line).
# - The `DataLoader` splits the two jobs you wrote in `_index_batches` into **samplers**:
#   `SequentialSampler` or `RandomSampler` produce the order of indices (with
#   `generator=`, reseeded from the global RNG each epoch when none is given), and
#   `BatchSampler` groups them, applying `drop_last`. You can pass your own `sampler=`
#   (e.g. `WeightedRandomSampler` to oversample a rare class) or `batch_sampler=` (your
#   bucketing sampler); `torch.nn.utils.rnn.pad_sequence` pads a list of sequences like
#   your `pad_collate`, and `pack_padded_sequence` hands the lengths to a recurrent layer.
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
# ## 12. Recap
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
# - **Variable lengths**: `pad_collate` pads each batch to its longest sequence and keeps the
#   lengths; a **bucketing batch sampler** arranges samples of similar length together
#   within a pool drawn afresh each epoch, trading padding (compute thrown away) against
#   mixing (how much batches change between epochs).
# - **Costs**: a batch is $B \times$ the sample size in bytes; float32 is 4× uint8;
#   per-sample Python overhead sets a floor on the time of an epoch, which vectorised or
#   parallel fetching removes.
#
# Run `tito test module 05` to check your work against the full test suite. Module 06
# (autograd) now makes the tensors learn.

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
# # Module 16 — Compression: pruning, distillation and low-rank factorisation
#
# A trained network is usually larger than it needs to be. This module makes one smaller
# in four ways and **measures** what each buys: parameters, bytes, FLOPs, latency and
# accuracy on the digits.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - choose weights to remove by **magnitude**, per layer and **globally** over several
#   layers, and build the **mask** that removes exactly the requested share;
# - keep a pruned model pruned while it is **fine-tuned**: design what each forward pass
#   does with the mask (as `torch.nn.utils.prune` does it) so that a pruned weight gets a
#   zero gradient and stays exactly zero whatever the optimizer's momentum says;
# - prune **structurally**: rank neurons (rows) and channels (filters) by their L1 / L2 norm
#   and physically **shrink** a `Linear` or a `Conv2d` and the layer that reads it;
# - build the **2:4 semi-structured** mask of sparse tensor cores (two of every four
#   consecutive weights), all runs ranked at once, and compare it with unstructured pruning;
# - derive and write the temperature-scaled **distillation loss** (KL between softened
#   distributions, times the factor that keeps its gradient's size), train a small student
#   from a big teacher, and measure when that pays;
# - factorise a `Linear` into two thin ones with a **truncated SVD**;
# - read a before/after table and explain why unstructured sparsity saves nothing on a dense
#   backend while a smaller dense layer is really faster;
# - measure accuracy against sparsity, scan each layer's **sensitivity**, and choose each
#   layer's sparsity for a whole-model budget (a small knapsack), then test that choice.
#
# ## Prerequisites
#
# Modules 01-09 and 14: `Tensor` and its ops (01), `log_softmax` (02), `Module`, `Linear`,
# `Sequential` (03), `cross_entropy` (04), `Digits` and `DataLoader` (05), autograd (06),
# `SGD` and `Adam` (07), `Conv2d` (09), `count_parameters` (14).
#
# ## How this notebook works
#
# The pruning masks and the masked layer go to **`tinytorch/nn/prune.py`** (cells marked
# `#| export nn.prune`), mirroring `torch.nn.utils.prune`. They live at `tinytorch.nn.prune`
# and not under `tinytorch.nn.utils`, because `tinytorch/nn/utils.py` is module 08's file;
# `import tinytorch.nn.prune as prune` plays the role of PyTorch's
# `import torch.nn.utils.prune as prune`. Structured shrinking, distillation and low-rank
# factorisation go to **`tinytorch/compression.py`** (cells marked `#| export`). Fill in the
# cells with `# YOUR CODE HERE`, then run the check cell below each;
# `tito test module 16` exports them and runs the tests.

# %%
#| default_exp compression

# %%
import sys

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch
from tinytorch import ShapeError, Tensor, nn
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, peak_bytes, preserved_state, python_steps
from tinytorch.utils.timing import median_time  # the course's one timer: median of repeats after a warm-up

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: remove what matters least
#
# Most weights of a trained network are small, and a small weight contributes little to its
# layer's output. **Magnitude pruning** sets the smallest $|w|$ to zero: for a share
# $a$ (the `amount`) of the $n$ weights, $k = \operatorname{round}(a\,n)$ of them,
#
# $$m_i = \begin{cases}0 & \text{if } |w_i| \text{ is among the } k \text{ smallest}\\ 1 & \text{otherwise}\end{cases},
#   \qquad w \leftarrow w \odot m .$$
#
# Two questions decide what pruning buys:
#
# - **Which weights?** *Unstructured* pruning removes single weights anywhere: the matrix
#   keeps its shape with zeros scattered in it. *Structured* pruning removes whole rows of a
#   `Linear` (neurons) or whole filters of a `Conv2d` (channels): the layer, and the input
#   side of the next layer, really get smaller.
# - **Ranked where?** Per layer (each layer loses the same share) or **globally** (one
#   ranking over all layers: a layer whose weights are small loses more).
#
# The picture shows one weight matrix and what each kind of pruning leaves of it.

# %%
def draw_pruning_kinds(axes, seed=0):
    """A weight matrix, its magnitude-pruned version, and its structurally pruned version."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 12)) * rng.uniform(0.3, 1.5, (8, 1))
    cut = np.quantile(np.abs(w), 0.6)  # (random weights have no ties; section 2's function must not rely on that)
    pruned = np.where(np.abs(w) > cut, w, np.nan)
    norms = np.abs(w).sum(1)
    rows = norms > np.median(norms)  # the 4 rows of largest L1 norm, in their order
    panels = [(w, "dense: 8 × 12 = 96 weights"),
              (pruned, f"unstructured, 60% zeros:\nstill 8 × 12, {int(np.isfinite(pruned).sum())} non-zero"),
              (w[rows], f"structured, {int(rows.sum())} of 8 rows kept:\na {int(rows.sum())} × 12 matrix "
                        f"({12 * int(rows.sum())} weights)")]
    cmap = plt.get_cmap("coolwarm").copy()
    cmap.set_bad("black")  # a removed weight (NaN): black, unlike a small kept one (near white)
    for ax, (m, title) in zip(axes, panels):
        ax.imshow(m, cmap=cmap, vmin=-2.5, vmax=2.5)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_ylim(7.5, -0.5)
        ax.set_xlabel("inputs")
    axes[0].set_ylabel("neurons (rows)")


fig, axes = plt.subplots(1, 3, figsize=(11, 3.0))
draw_pruning_kinds(axes)
fig.tight_layout()
plt.show()

# %% [markdown]
# (Black is a removed weight; a small kept weight is pale.) The middle matrix computes the same number of
# multiply-adds as the left one on a dense backend such as numpy: multiplying by zero costs
# as much as multiplying by anything. Only the right one is cheaper. Section 7 measures it.
#
# ## 2. Magnitude masks: per layer and global
#
# Write `magnitude_mask(values, k)`: a mask of `values`' shape and dtype with **exactly**
# `k` zeros, at the `k` entries of smallest absolute value. The provided `_count_to_prune`
# turns PyTorch's `amount` (a float share in $[0, 1]$, or an int count) into `k` the way
# `torch.nn.utils.prune` does ($\operatorname{round}(a\,n)$) and checks it; the public
# functions below call it for you.
#
# <details><summary>Hint 1</summary>
#
# "Small" means small in magnitude: $-3$ is a large weight. And a threshold ("zero every
# $|w| \le t$") can remove more than `k` when several weights share the value $t$: the
# contract asks for exactly `k`.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Think of the magnitudes as a list to rank, least important first. Which numpy sort keeps
# tied values in the order of their positions, so that the ties decide themselves?
# </details>
#
# <details><summary>The approach</summary>
#
# "Exactly k" rules out a threshold (ties at the threshold would take more), so this is a
# question of order: rank every entry, whatever the array's shape, and decide by rank. How
# does a position in the ranking lead back to an entry of the original shape, and what
# dtype must the mask have to multiply a weight without changing its type?
# </details>

# %% nbgrader={"grade": false, "grade_id": "magnitude-mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.prune
"""Magnitude pruning with masks that stay applied (module 16), mirroring
torch.nn.utils.prune: per-layer and global masks, and PrunedModule, its reparametrisation
and forward pre-hook as a wrapper."""
import numpy as np

from tinytorch._tensor import Tensor
from tinytorch.autograd import no_grad
from tinytorch.nn.layers import Module, Parameter

__all__ = ["magnitude_mask", "global_magnitude_masks", "PrunedModule", "l1_unstructured",
           "global_unstructured", "custom_from_mask", "semi_structured_mask", "remove", "is_pruned", "sparsity"]


def _count_to_prune(amount, n):
    """torch.nn.utils.prune's rule: a float amount in [0, 1] is a share, round(amount * n)
    weights; an int amount is a count, at most n."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float, np.integer, np.floating)):
        raise TypeError(f"amount must be a float share in [0, 1] or an int count, got {amount!r}")
    if isinstance(amount, (int, np.integer)):
        if not 0 <= amount <= n:
            raise ValueError(f"amount={amount} weights to prune, but there are only {n} (and it must be >= 0)")
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise ValueError(f"amount={amount} must be a share in [0, 1] (or an int count of weights)")
    return int(round(float(amount) * n))


def magnitude_mask(values, k):
    """The mask that prunes the k entries of smallest magnitude.

    Contract: `values` a numpy float array of any shape, 0 <= k <= values.size. Returns a
    numpy array of values' shape and dtype holding 0 at exactly k positions, those with the
    smallest |value| (ties: the earlier position, in C order, is pruned first), and 1
    everywhere else.
    """
    # Idea: rank the entries by how much they matter; the k least important are switched off.
    ### BEGIN SOLUTION
    order = np.argsort(np.abs(values).ravel(), kind="stable")
    mask = np.ones(values.size, dtype=values.dtype)
    mask[order[:k]] = 0
    return mask.reshape(values.shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-magnitude-mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_w = np.array([[0.5, -3.0, 0.1], [-0.2, 2.0, -0.05]], dtype=np.float32)
assert_equal(magnitude_mask(_w, 3), np.array([[1, 1, 0], [0, 1, 0]], dtype=np.float32),
             "k = 3: the three smallest |w| (0.1, -0.2, -0.05) are pruned; -3.0 is large")
assert_equal(magnitude_mask(_w, 0), np.ones((2, 3), dtype=np.float32), "k = 0 prunes nothing")
assert_equal(magnitude_mask(_w, 6), np.zeros((2, 3), dtype=np.float32), "k = n prunes everything")
assert_equal(magnitude_mask(_w, 3).dtype, np.dtype(np.float32), "the mask has the values' dtype")
_ties = np.array([1.0, 0.5, 0.5, 0.5, 2.0])
assert_equal(magnitude_mask(_ties, 2), np.array([1.0, 0.0, 0.0, 1.0, 1.0]),
             "exactly k = 2 zeros among three tied values: the earlier positions go first")
assert_equal(magnitude_mask(_ties, 2).dtype, np.dtype(np.float64), "a float64 array's mask is float64")
_many = np.round(np.random.default_rng(8).standard_normal((20, 15)), 1)  # 300 values, many of them tied
_mm = magnitude_mask(_many, 120).ravel()
_at = np.flatnonzero(np.abs(_many).ravel() == np.abs(_many).ravel()[_mm == 0].max())  # where the cut falls
check(int((_mm == 0).sum()) == 120 and np.all(np.diff(_mm[_at]) >= 0),
      "k = 120 among 300 values rounded to 0.1: the tied values at the cut are pruned earlier positions first",
      got=_mm[_at], expected="zeros, then ones, along the positions of the tied magnitude")
_big = np.random.default_rng(0).standard_normal((40, 25))
_big_before = _big.copy()
_m = magnitude_mask(_big, _count_to_prune(0.7, _big.size))
assert_equal(_big, _big_before, "the values after magnitude_mask (a mask is computed from the weights; the weights "
             "themselves must not change)")
assert_equal(int((_m == 0).sum()), 700, "amount = 0.7 of 1000 weights: exactly 700 zeros")
check(np.abs(_big[_m == 0]).max() <= np.abs(_big[_m == 1]).min(),
      "every pruned |w| is at most every kept |w|",
      got=(np.abs(_big[_m == 0]).max(), np.abs(_big[_m == 1]).min()))
print("✓ magnitude_mask; the mask of k = 3:", magnitude_mask(_w, 3).tolist())

# %% [markdown]
# **Global pruning.** Pruning each layer by the same share treats a layer of large
# weights like a layer of small ones. Ranking all the weights of several layers together
# asks instead "which weights of the *whole model* matter least?": layers whose weights
# are small (often the big, redundant ones) lose more. Write
# `global_magnitude_masks(arrays, k)`: one mask per array, with `k` zeros **in total**.
#
# <details><summary>Hint 1</summary>
#
# One ranking over everything: what if all the arrays were one long vector? You already
# wrote the function that masks one array.
# </details>
#
# <details><summary>The approach</summary>
#
# The global problem is the one you already solved, once the arrays stop being separate.
# What single array makes it so, and how does each layer get back exactly its own part of
# the answer, in its own shape and dtype?
# </details>

# %% nbgrader={"grade": false, "grade_id": "global-masks", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.prune
def global_magnitude_masks(arrays, k):
    """Masks for several arrays ranked together.

    Contract: `arrays` a non-empty list of numpy float arrays, 0 <= k <= their total size.
    Returns a list of masks, one per array with its shape and dtype, holding k zeros in
    total: at the k entries of smallest magnitude over all the arrays together (ties: the
    earlier array, then the earlier position, first).
    """
    # Idea: one ranking for the whole model, then each layer takes back its part.
    ### BEGIN SOLUTION
    flat = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])
    mask = magnitude_mask(flat, k)
    pieces = np.split(mask, np.cumsum([a.size for a in arrays])[:-1])
    return [p.reshape(a.shape).astype(a.dtype) for p, a in zip(pieces, arrays)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-global-masks", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(1)
_small, _large = _rng.standard_normal((6, 10)) * 0.1, _rng.standard_normal((4, 5)) * 10.0
_ms, _ml = global_magnitude_masks([_small, _large], 50)
assert_equal((_ms.shape, _ml.shape), ((6, 10), (4, 5)), "one mask per array, of its shape")
assert_equal(int((_ms == 0).sum() + (_ml == 0).sum()), 50, "k = 50 zeros in total")
assert_equal(int((_ms == 0).sum()), 50, "all 50 zeros land in the layer of small weights (std 0.1 vs 10)")
_a = np.array([[3.0, -1.0]], dtype=np.float32)
_b = np.array([0.5, 4.0, -0.7], dtype=np.float32)
_ma, _mb = global_magnitude_masks([_a, _b], 2)
assert_equal(_ma, np.array([[1.0, 1.0]], dtype=np.float32), "first array: 3 and -1 are not among the 2 smallest")
assert_equal(_mb, np.array([0.0, 1.0, 0.0], dtype=np.float32), "second array: 0.5 and -0.7 are pruned")
assert_equal(_mb.dtype, np.dtype(np.float32), "each mask keeps its array's dtype")
_m64, _m32 = global_magnitude_masks([np.ones(3), np.ones(2, dtype=np.float32)], 1)
assert_equal((_m64.dtype, _m32.dtype), (np.dtype(np.float64), np.dtype(np.float32)),
             "a float64 and a float32 array: each mask in its own array's dtype")
_t1, _t2 = global_magnitude_masks([np.array([0.5, 0.1]), np.array([0.1, 0.5])], 1)
assert_equal((_t1.tolist(), _t2.tolist()), ([1.0, 0.0], [1.0, 1.0]),
             "k = 1, a 0.1 in each array: the earlier array's goes first")
_tied = [np.round(np.random.default_rng(4).standard_normal(600), 1), np.full(300, 0.1)]  # hundreds of ties
_gm = np.concatenate([m.ravel() for m in global_magnitude_masks(_tied, 400)])
_ga = np.abs(np.concatenate(_tied))
_gat = np.flatnonzero(_ga == _ga[_gm == 0].max())  # every position, in both arrays, holding the cut's magnitude
check(int((_gm == 0).sum()) == 400 and np.all(np.diff(_gm[_gat]) >= 0),
      "k = 400 among hundreds of ties: the tied values at the cut go earlier array first, then earlier position",
      got=_gm[_gat], expected="zeros, then ones, along the tied positions in array order")
_all = np.concatenate([np.abs(_small).ravel(), np.abs(_large).ravel()])
_kept = np.concatenate([_ms.ravel(), _ml.ravel()]) == 1
check(_all[~_kept].max() <= _all[_kept].min(), "every pruned |w| is at most every kept |w|, over both arrays")
print(f"✓ global_magnitude_masks: zeros per layer {int((_ms == 0).sum())} (small weights), "
      f"{int((_ml == 0).sum())} (large weights)")

# %% [markdown]
# ## 3. Keeping the mask through training
#
# Zeroing the weights once is not enough. The next backward pass gives a pruned weight a
# gradient like any other, and the optimizer moves it off zero; worse, SGD's momentum
# buffer and Adam's moments remember the steps taken **before** pruning and keep moving a
# weight even when its gradient is zero. The zeros have to be imposed again, on every
# forward pass, by something the optimizer cannot undo.
#
# PyTorch (`torch.nn.utils.prune`) starts with a **reparametrisation**: the layer's
# `weight` Parameter is renamed `weight_orig` (the optimizer keeps training it: it is the
# same object, and it keeps every value, the pruned ones too), and the mask is stored
# beside it as a buffer `weight_mask`. The name `weight`, which the layer's forward
# reads, no longer holds a Parameter; a *forward pre-hook*, code that runs just before
# each forward, decides what it holds.
#
# Our `Module` (module 03) has no hooks, and we do not patch it. A **wrapper** does the
# hook's job: `PrunedModule(layer)` holds the layer as its child `module`. The provided
# `add_mask` does the reparametrisation (and, when a parameter is pruned a second time,
# multiplies the new mask into the old one, as PyTorch's iterative pruning does). Reading
# an attribute the wrapper does not have (`in_features`, `weight`, `weight_mask`, ...)
# reads the layer's, so `model[0].weight` works on a pruned layer as in PyTorch.
#
# Write `PrunedModule.forward`: the hook. Design it from what it must guarantee (the
# check trains a pruned model with SGD and momentum, then with Adam, and looks):
#
# - the layer computes with weights that are **exactly** 0 wherever the mask is 0,
#   whatever the optimizer has done to `weight_orig` since the last forward;
# - after `backward`, `weight_orig.grad` is **exactly** 0 at the pruned positions, and
#   elsewhere the gradient the unpruned layer would give its weight;
# - the caller cannot tell the wrapper from the layer.
#
# Before you write it, use the chain rule (module 06): if the layer's weight $w$ is some
# function of $w_{orig}$ and the mask $m$, which function makes $\partial L/\partial
# w_{orig}$ what the second guarantee asks, with no extra code in the backward pass?
#
# <details><summary>Hint 1</summary>
#
# Which attribute does `Linear.forward` read, and when must it hold the masked value? What
# must the product be, for the gradient to reach `weight_orig`?
# </details>
#
# <details><summary>Hint 2</summary>
#
# For the gradient to reach `weight_orig`, the autograd engine must see how the masked
# weight was made from it: which kind of computation does it record, and which does it
# never see? An ordinary (non-Parameter) Tensor assigned to a Module attribute is a plain
# attribute (module 03's `__setattr__`).
# </details>
#
# <details><summary>The approach</summary>
#
# The layer reads its parameter by name when it runs, so by then that name must hold the
# masked value, computed from the `_orig` the optimizer has just changed: a value computed
# once at wrapping time would go stale after the first step. The wrapper must also be
# invisible to its caller: what must it do with the arguments it is given?
# </details>

# %% nbgrader={"grade": false, "grade_id": "pruned-module", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.prune
class PrunedModule(Module):
    """A layer whose pruned parameters stay pruned through training: torch.nn.utils.prune's
    reparametrisation (<name>_orig and <name>_mask) and its forward pre-hook, as a wrapper."""

    def __init__(self, module):
        super().__init__()
        if not isinstance(module, Module) or isinstance(module, PrunedModule):
            raise TypeError(f"PrunedModule wraps one layer (a Module that is not already wrapped), "
                            f"got {type(module).__name__}")
        self.module = module
        self.pruned_names = []

    def add_mask(self, name, mask):
        """Reparametrise `name` (first time) or combine `mask` into its mask (later times)."""
        layer = self.module
        if name in self.pruned_names:
            old = getattr(layer, name + "_mask")
            old.numpy()[...] = old.numpy() * mask
        else:
            param = layer._parameters.get(name)
            if not isinstance(param, Parameter):
                raise ValueError(f"{type(layer).__name__} has no parameter {name!r} to prune")
            delattr(layer, name)
            layer.register_parameter(name + "_orig", param)
            layer.register_buffer(name + "_mask", Tensor(np.asarray(mask, dtype=param.dtype)))
            self.pruned_names.append(name)
        # reading layer.<name> before the next forward gives the pruned values (a plain copy, no graph)
        orig, kept = getattr(layer, name + "_orig").numpy(), getattr(layer, name + "_mask").numpy()
        setattr(layer, name, Tensor(np.where(kept != 0, orig, np.zeros_like(orig))))

    def forward(self, *args, **kwargs):
        """Contract: returns what the wrapped layer returns for the same arguments, computed
        with each pruned parameter masked: exactly 0 where its mask is 0, whatever its
        `_orig` holds now, with a gradient that reaches `_orig` (masked). The layer's
        attribute of that name holds the masked value afterwards."""
        # Idea: what must the name the layer reads hold, each time it runs?
        ### BEGIN SOLUTION
        layer = self.module
        for name in self.pruned_names:
            setattr(layer, name, getattr(layer, name + "_orig") * getattr(layer, name + "_mask"))
        return layer(*args, **kwargs)
        ### END SOLUTION

    def __getattr__(self, name):
        try:
            return Module.__getattr__(self, name)
        except AttributeError:
            layer = self.__dict__.get("_modules", {}).get("module")
            if layer is None:
                raise
            return getattr(layer, name)

    def extra_repr(self):
        return "pruned: " + ", ".join(self.pruned_names)


# %% [markdown]
# The functions you call are provided; they mirror `torch.nn.utils.prune`'s, with one
# difference that the wrapper forces. PyTorch changes a layer in place
# (`prune.l1_unstructured(model.fc1, "weight", 0.3)`); we must put the wrapper where the
# layer was, so we are given the model that holds the layer and the parameter's dotted name
# (`prune.l1_unstructured(model, "fc1.weight", 0.3)`). The state-dict keys gain the wrapper's
# `module.` (`fc1.module.weight_orig`, `fc1.module.weight_mask`, where PyTorch has
# `fc1.weight_orig`, `fc1.weight_mask`).
#
# | ours (`tinytorch.nn.prune`) | PyTorch (`torch.nn.utils.prune`) |
# |---|---|
# | `l1_unstructured(model, "fc1.weight", amount)` | `l1_unstructured(model.fc1, "weight", amount)` |
# | `global_unstructured(model, ["fc1.weight", "fc2.weight"], amount)` | `global_unstructured([(model.fc1, "weight"), ...], L1Unstructured, amount=...)` |
# | `remove(model, "fc1.weight")` | `remove(model.fc1, "weight")` |
# | `is_pruned(model)` | `is_pruned(model)` |
#
# `amount` is the share (or count) of the parameter's weights that are zero **afterwards**:
# pruning 0.5 then 0.8 leaves 80% zeros (PyTorch's second call would prune 80% of the
# remaining half).

# %%
#| export nn.prune
def _locate(model, name):
    """(parent, child name, parameter name) for a dotted parameter name such as "0.weight"."""
    if not isinstance(name, str) or "." not in name:
        raise ValueError(f"name must be a dotted parameter name inside the model, such as '0.weight' or "
                         f"'fc1.weight', got {name!r} (pass the model that holds the layer)")
    *path, pname = name.split(".")
    parent = model
    for part in path[:-1]:
        parent = parent._modules.get(part) if isinstance(parent, Module) else None
        if isinstance(parent, PrunedModule):
            parent = parent.module
        if parent is None:
            raise ValueError(f"{type(model).__name__} has no submodule on the path {name!r}")
    if not isinstance(parent, Module) or parent._modules.get(path[-1]) is None:
        raise ValueError(f"{type(model).__name__} has no layer {'.'.join(path)!r}")
    return parent, path[-1], pname


def _wrapper(model, name):
    """The PrunedModule at `name`'s layer, wrapping the layer (in place in the model) if needed."""
    parent, child, pname = _locate(model, name)
    layer = parent._modules[child]
    if not isinstance(layer, PrunedModule):
        layer = PrunedModule(layer)
        parent.add_module(child, layer)
    return layer, pname


def _effective(wrapper, pname):
    """The values the layer computes with now (masked if already pruned), as numpy."""
    layer = wrapper.module
    if pname in wrapper.pruned_names:
        return getattr(layer, pname + "_orig").numpy() * getattr(layer, pname + "_mask").numpy()
    param = layer._parameters.get(pname)
    if param is None:
        raise ValueError(f"{type(layer).__name__} has no parameter {pname!r} to prune")
    return param.numpy()


# %%
#| export nn.prune
def l1_unstructured(model, name, amount):
    """Prune `amount` of the parameter `name` (e.g. "0.weight") of `model` by magnitude,
    keeping the mask applied from now on. Returns the model."""
    wrapper, pname = _wrapper(model, name)
    values = _effective(wrapper, pname)
    wrapper.add_mask(pname, magnitude_mask(values, _count_to_prune(amount, values.size)))
    return model


def custom_from_mask(model, name, mask):
    """Prune the parameter `name` with a given mask (0 prunes, 1 keeps) of its shape,
    combined with any mask it already has (torch.nn.utils.prune.custom_from_mask). Returns
    the model."""
    wrapper, pname = _wrapper(model, name)
    values = _effective(wrapper, pname)
    mask = np.asarray(mask)
    if mask.shape != values.shape:
        raise ValueError(f"a mask of shape {mask.shape} for {name!r} of shape {values.shape}")
    wrapper.add_mask(pname, mask.astype(values.dtype))
    return model


def global_unstructured(model, names, amount):
    """Prune `amount` of all the weights named in `names`, ranked together, in place (masks on
    `model` itself, as each pruning function here adds them). Returns the model."""
    names = list(names)
    if not names:
        raise ValueError("global_unstructured needs at least one parameter name")
    targets = [_wrapper(model, n) for n in names]
    values = [_effective(w, p) for w, p in targets]
    k = _count_to_prune(amount, sum(v.size for v in values))
    for (wrapper, pname), mask in zip(targets, global_magnitude_masks(values, k)):
        wrapper.add_mask(pname, mask)
    return model


def remove(model, name):
    """Make the pruning of `name` permanent: the layer gets a plain Parameter `name` holding
    the masked values, and loses <name>_orig and <name>_mask (torch.nn.utils.prune.remove)."""
    parent, child, pname = _locate(model, name)
    wrapper = parent._modules[child]
    if not isinstance(wrapper, PrunedModule) or pname not in wrapper.pruned_names:
        raise ValueError(f"parameter {name!r} is not pruned")
    layer = wrapper.module
    values = _effective(wrapper, pname)
    delattr(layer, pname + "_orig")
    delattr(layer, pname + "_mask")
    layer.__dict__.pop(pname, None)
    layer.register_parameter(pname, Parameter(Tensor(values)))
    wrapper.pruned_names.remove(pname)
    if not wrapper.pruned_names:
        parent.add_module(child, layer)
    return model


def is_pruned(model):
    """True when some layer of `model` is pruned (torch.nn.utils.prune.is_pruned)."""
    return any(isinstance(m, PrunedModule) and m.pruned_names for m in model.modules())


def sparsity(tensor):
    """The share of exact zeros in a Tensor or numpy array."""
    arr = tensor.numpy() if isinstance(tensor, Tensor) else np.asarray(tensor)
    return float((arr == 0).sum() / max(arr.size, 1))


# %% nbgrader={"grade": true, "grade_id": "test-pruned-module", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
import tinytorch.nn.functional as F  # noqa: E402
from tinytorch.optim import SGD, Adam  # noqa: E402


def _prune_while_training(make_optimizer, seed=0):
    """Train 3 steps (the optimizer builds momentum), prune 60% of layer 0, train 5 more."""
    tinytorch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = tinytorch.randn(16, 6), tinytorch.randint(0, 3, (16,))
    opt = make_optimizer(model.parameters())
    for step in range(8):
        if step == 3:
            l1_unstructured(model, "0.weight", 0.6)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return model, x


with preserved_state():
    for _label, _make in [("SGD, momentum 0.9", lambda p: SGD(p, lr=0.5, momentum=0.9)),
                          ("Adam", lambda p: Adam(p, lr=0.05))]:
        try:
            _model, _x = _prune_while_training(_make)
        except RuntimeError as _exc:  # e.g. a masked weight computed once and reused by later steps
            check(False, f"{_label}: 5 training steps after pruning run (each forward of the pruned layer must "
                  "stand on its own: the first guarantee)", got=f"RuntimeError: {_exc}")
        _layer = _model[0].module
        _mask = _layer.weight_mask.numpy()
        check(_layer.weight_orig.grad is not None,
              f"{_label}: after backward, weight_orig.grad is None: no gradient reached the original weights "
              "(the second guarantee)", got=_layer.weight_orig.grad)
        assert_equal(int((_mask == 0).sum()), 29, f"{_label}: round(0.6 * 48) = 29 weights pruned")
        _out = _model(_x)  # a forward re-applies the mask
        assert_equal(_model[0].weight.numpy()[_mask == 0], np.zeros(29, dtype=np.float32),
                     f"{_label}: the 29 pruned weights after 5 optimizer steps (exactly 0)")
        assert_equal(_layer.weight_orig.grad.numpy()[_mask == 0], np.zeros(29, dtype=np.float32),
                     f"{_label}: the gradient of weight_orig at the pruned positions (exactly 0)")
        check(np.abs(_layer.weight_orig.grad.numpy()[_mask == 1]).max() > 0,
              f"{_label}: the kept weights do get a gradient (the product is a graph op)")
        _ref = np.maximum(_x.numpy() @ (_layer.weight_orig.numpy() * _mask).T + _layer.bias.numpy(), 0)
        _ref = _ref @ _model[2].weight.numpy().T + _model[2].bias.numpy()
        assert_close(_out.numpy(), _ref, rtol=1e-5, atol=1e-6, what=f"{_label}: output with the masked weight")
assert_equal(sorted(_model.state_dict())[:3], ["0.module.bias", "0.module.weight_mask", "0.module.weight_orig"],
             "state_dict keys of the pruned layer")
with preserved_state():
    tinytorch.manual_seed(1)
    _two = nn.Sequential(nn.Linear(4, 5))
    _xt = tinytorch.randn(3, 4)
_w_before, _b_before = _two[0].weight.numpy().copy(), _two[0].bias.numpy().copy()
l1_unstructured(_two, "0.weight", 0.5)
l1_unstructured(_two, "0.bias", 0.4)
_pl = _two[0].module
assert_equal(_pl.weight_orig.numpy(), _w_before, "weight_orig keeps every value, the pruned ones too "
             "(only the mask zeroes them)")
assert_equal(_pl.bias_orig.numpy(), _b_before, "bias_orig keeps every value, the pruned ones too")
_two(_xt).sum().backward()
assert_equal(_pl.weight_orig.numpy(), _w_before, "after a forward and a backward, weight_orig still keeps every "
             "value (the pruned ones are what rewinding and un-pruning need; only the product is masked)")
check(_pl.weight_orig.grad is not None and _pl.bias_orig.grad is not None,
      "weight and bias of one layer pruned: both originals get a gradient (every pruned parameter is recomputed)",
      got=(_pl.weight_orig.grad, _pl.bias_orig.grad))
assert_equal(_two[0].bias.numpy() == 0, _pl.bias_mask.numpy() == 0, "the bias is masked too")
class _Scaled(nn.Module):  # a layer whose forward takes more than one argument
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(tinytorch.ones(3))

    def forward(self, x, y, scale=1.0):
        return (x + y) * self.weight * scale


_sc = nn.Sequential(_Scaled())
l1_unstructured(_sc, "0.weight", 1 / 3)
assert_close(_sc[0](tinytorch.ones(3), tinytorch.ones(3), scale=2.0).numpy(), np.array([0.0, 4.0, 4.0], np.float32),
             what="PrunedModule passes every argument on: (x + y) * masked weight * scale, with scale=2.0 by keyword")
print(f"✓ PrunedModule keeps the mask: after Adam, sparsity of layer 0 = {sparsity(_model[0].weight):.3f}")

# %% [markdown]
# What you wrote is PyTorch's hook: before each forward, $w = w_{orig} \odot m$, as a
# recorded op. The product answers both guarantees at once: $w$ is exactly 0 where $m$ is,
# whatever $w_{orig}$ holds, and the chain rule gives $w_{orig}$ the gradient
# $\bar w \odot m$, exactly 0 at the pruned positions, with no backward code of its own.
#
# **Predict first.** The model above has a mask *and* an original for every pruned
# parameter. After pruning 90% of a `Linear(256, 256)`'s weight this way, how many bytes
# does the layer hold, compared with the dense layer (float32)?

# %%
predicted_pruned_bytes_ratio = None  # your number: bytes(pruned layer) / bytes(dense layer)

# %%
def module_bytes(module):
    """Bytes of every parameter and buffer of a module (each counted once)."""
    seen = {id(t): t for t in list(module.parameters()) + list(module.buffers())}
    return sum(t.numpy().nbytes for t in seen.values())


_dense = nn.Sequential(nn.Linear(256, 256))
_dense_bytes = module_bytes(_dense)
l1_unstructured(_dense, "0.weight", 0.9)
_pruned_bytes = module_bytes(_dense)
print(f"dense Linear(256, 256): {_dense_bytes:,d} bytes; pruned 90%: {_pruned_bytes:,d} bytes "
      f"(sparsity {sparsity(_dense[0].weight):.2f})")
print(f"measured ratio {_pruned_bytes / _dense_bytes:.2f}; "
      + ("no prediction written" if predicted_pruned_bytes_ratio is None
         else f"you predicted {predicted_pruned_bytes_ratio}"))

# %% [markdown]
# The masked layer is about **twice** as large as the dense one, not ten times smaller: a
# float32 original plus a float32 mask per weight. Masks are a *training* device. To save
# memory, the zeros must be dropped from storage: `remove` makes the pruning permanent (one
# dense matrix again, full of zeros), and a sparse format (indices + values, such as CSR)
# pays off only at high sparsity, since every kept value then also stores an index. To save
# *time* the hardware or the library must skip the zeros, which dense numpy does not.
# Structured pruning avoids both problems.
#
# ## 4. Structured pruning: really smaller layers
#
# Remove a **neuron** of a hidden `Linear` (one row of its weight, one entry of its bias)
# and the layer after it no longer receives that input: its **column** goes too. For a
# `Conv2d` the unit is a **filter** (an output channel): one slice `weight[c]` of shape
# `(C_in, kh, kw)` and its bias, and the next layer's input channel `c` (a next `Conv2d`:
# `weight[:, c]`; a `Linear` after a `Flatten`: the block of `H·W` columns that channel
# `c` fills, since `Flatten` lays the channels out one after the other).
#
# Which neurons? The usual, cheap criterion is the **norm of the weights that produce
# them** (Li et al., 2017, "Pruning filters for efficient ConvNets"): the L1 norm
# $\sum |w|$ or the L2 norm $\sqrt{\sum w^2}$ of each row / filter. A neuron whose weights
# are all near zero produces nearly a constant. (PyTorch's `prune.ln_structured(module,
# "weight", amount, n, dim=0)` ranks rows the same way, but only masks them: the layer keeps
# its shape. Here the layers really shrink.)
#
# Write `neuron_importance(weight, p)`: one norm per output unit, over everything else, for
# a 2-D (Linear) or 4-D (Conv2d) weight.
#
# <details><summary>Hint 1</summary>
#
# The output unit is always dimension 0. Everything after it (one row, or one
# `(C_in, kh, kw)` filter) belongs to that unit.
# </details>
#
# <details><summary>The approach</summary>
#
# A row and a filter are both "everything a unit owns"; one has one axis, the other three.
# What reshape turns the 4-D case into the 2-D one, so that a single norm along one axis
# serves both? (numpy has the norms, along any axis.)
# </details>

# %% nbgrader={"grade": false, "grade_id": "neuron-importance", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
"""Compression (module 16): structured pruning that physically shrinks Linear and Conv2d
layers, the temperature-scaled distillation loss, low-rank (truncated SVD) factorisation of
a Linear, and the counts (parameters, bytes, FLOPs) of the before/after table."""
import numpy as np

from tinytorch._tensor import Tensor
from tinytorch.autograd import no_grad
from tinytorch.nn.activations import log_softmax
from tinytorch.nn.conv import Conv2d
from tinytorch.nn.layers import Linear, Module, Sequential
from tinytorch.profiler import count_parameters  # module 14's: each shared Parameter once

__all__ = ["neuron_importance", "channels_to_keep", "shrink_linear", "shrink_conv2d", "prune_neurons",
           "allocate_sparsity", "distillation_loss", "low_rank_factors", "low_rank_linear", "low_rank_model",
           "count_parameters", "count_nonzero", "model_bytes", "count_flops"]


def neuron_importance(weight, p=1):
    """Contract: `weight` a numpy array of shape (out, in) or (out, in, kh, kw); p 1 or 2.
    Returns a float numpy array of shape (out,): the Lp norm of each output unit's weights
    (row or filter)."""
    # Idea: a unit matters as much as the weights that produce it.
    ### BEGIN SOLUTION
    flat = np.asarray(weight, dtype=np.float64).reshape(weight.shape[0], -1)
    return np.linalg.norm(flat, ord=p, axis=1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-neuron-importance", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_w2 = np.array([[1.0, -2.0, 2.0], [0.0, 3.0, -4.0]])
assert_close(neuron_importance(_w2, 1), np.array([5.0, 7.0]), what="L1 norms of the rows of a Linear weight")
assert_close(neuron_importance(_w2, 2), np.array([3.0, 5.0]), what="L2 norms of the rows")
_w4 = np.random.default_rng(2).standard_normal((5, 3, 2, 2))
assert_equal(neuron_importance(_w4, 2).shape, (5,), "one score per filter of a (5, 3, 2, 2) conv weight")
assert_close(neuron_importance(_w4, 2), np.sqrt((_w4 ** 2).sum(axis=(1, 2, 3))), what="L2 norm of each filter")
assert_close(neuron_importance(_w4, 1), np.abs(_w4).sum(axis=(1, 2, 3)), what="L1 norm of each filter (p=1, 4-D)")
assert_close(neuron_importance(_w4.reshape(5, 12), 1), np.abs(_w4).reshape(5, 12).sum(1),
             what="L1 norms of a non-square (5, 12) weight: one per row")
print("✓ neuron_importance; L1 of the two rows:", neuron_importance(_w2, 1).tolist())

# %% [markdown]
# Then `channels_to_keep(scores, amount)`: the indices of the units to **keep**, in
# increasing order (so the kept units keep their relative order), after removing
# $\operatorname{round}(a\,n)$ units of lowest score. At least one unit must survive: a
# layer of width 0 is no layer.
#
# <details><summary>Hint 1</summary>
#
# How many survive? The provided `_count_to_remove` answers the plumbing part (checks,
# rounding, the survivor). Which end of the ranking survives?
# </details>
#
# <details><summary>The approach</summary>
#
# Removing the lowest scores is keeping the highest: which end of a stable ranking
# survives, and does a stable ranking remove the earlier of two tied units first, as the
# contract asks? The ranking's order is not the order the kept units must come back in.
# </details>

# %% nbgrader={"grade": false, "grade_id": "channels-to-keep", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _count_to_remove(amount, n):
    """round(amount * n) units to remove, amount a float in [0, 1); at least one survives."""
    if isinstance(amount, bool) or not isinstance(amount, (float, int, np.floating, np.integer)) \
            or not 0.0 <= float(amount) < 1.0:
        raise ValueError(f"amount must be a share of the units in [0, 1), got {amount!r}")
    return min(int(round(float(amount) * n)), n - 1)


def channels_to_keep(scores, amount):
    """Contract: `scores` a 1-D numpy array (one per unit), amount a float in [0, 1).
    Returns an int64 array of the indices kept, in increasing order: all but the r =
    _count_to_remove(amount, n) units of lowest score (ties: the earlier unit is removed
    first)."""
    # Idea: the weakest units go; the survivors keep their order.
    r = _count_to_remove(amount, len(scores))
    ### BEGIN SOLUTION
    order = np.argsort(np.asarray(scores), kind="stable")
    return np.sort(order[r:]).astype(np.int64)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-channels-to-keep", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_s = np.array([0.5, 3.0, 0.1, 2.0, 1.0, 0.2])
assert_equal(channels_to_keep(_s, 0.5), np.array([1, 3, 4]), "amount 0.5 of 6: the 3 highest scores, in order")
assert_equal(channels_to_keep(_s, 0.0), np.arange(6), "amount 0 keeps every unit")
assert_equal(channels_to_keep(_s, 0.99), np.array([1]), "at least one unit survives: the best one")
assert_equal(channels_to_keep(np.array([1.0, 1.0, 1.0, 2.0]), 0.5), np.array([2, 3]),
             "ties: the earlier unit is removed first")
_tied = np.round(np.random.default_rng(6).standard_normal(400), 1)  # hundreds of tied scores
_by_rank = sorted(range(400), key=lambda i: (_tied[i], i))  # lowest score first; among equals, the earlier unit
_got_kept, _want_kept = set(channels_to_keep(_tied, 0.4).tolist()), set(_by_rank[160:])
check(_got_kept == _want_kept, "400 scores rounded to 0.1, amount 0.4: the 160 removed are the lowest, ties the "
      "earlier units first; got (units kept that should go, units removed that should stay, with their scores)",
      got=([(i, _tied[i]) for i in sorted(_got_kept - _want_kept)[:4]],
           [(i, _tied[i]) for i in sorted(_want_kept - _got_kept)[:4]]))
assert_equal(channels_to_keep(_tied, 0.4), np.array(sorted(_by_rank[160:])), "the kept units, in increasing order")
assert_equal(channels_to_keep(_s, 0.5).dtype, np.dtype(np.int64), "indices are int64")
assert_raises(ValueError, channels_to_keep, _s, 1.0, match="amount")
print("✓ channels_to_keep; of", _s.tolist(), "keep", channels_to_keep(_s, 0.5).tolist())

# %% [markdown]
# Now the surgery. Write `shrink_linear(layer, next_layer, keep)` and
# `shrink_conv2d(conv, next_layer, keep)`: each returns a **new** pair of layers (the
# originals stay as they are) holding copies of the kept weights. The provided
# `_linear_from(weight, bias)` and `_conv_from(weight, bias, like)` build a layer from numpy
# values (a `Conv2d` with `like`'s stride and padding), with the values' dtype.
#
# <details><summary>Hint 1</summary>
#
# Which axis of each weight is "the hidden units"? `Linear.weight` is `(out, in)`;
# `Conv2d.weight` is `(out, in, kh, kw)`. The first layer loses outputs, the next loses
# inputs. And the biases: which of the two layers has one entry per removed unit?
# </details>
#
# <details><summary>Hint 2</summary>
#
# A `Linear` after `Flatten` sees `C·H·W` inputs, channel by channel: channel `c` owns the
# columns `c·S, ..., c·S + S - 1`, with `S = in_features / C` (the `H·W` of the feature
# map). numpy integer-array indexing copies.
# </details>
#
# <details><summary>The approach</summary>
#
# Every kept unit owns a slice of the first layer (its output side) and a slice of the next
# one (its input side). For each of the four weights, name the axis of that slice; for each
# bias, decide whether it belongs to the units being removed. After a `Flatten`, a channel
# owns a block of columns, not one: which indices, in which order, for all the kept
# channels at once? The originals stay untouched, and a layer without a bias stays without.
# </details>

# %% nbgrader={"grade": false, "grade_id": "shrink", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _values(t):
    return None if t is None else t.numpy()


def _linear_from(weight, bias):
    """A new Linear holding copies of `weight` (out, in) and `bias` (out,) or None."""
    layer = Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=weight.dtype)
    with no_grad():
        layer.weight.copy_(Tensor(np.ascontiguousarray(weight)))
        if bias is not None:
            layer.bias.copy_(Tensor(np.ascontiguousarray(bias)))
    return layer


def _conv_from(weight, bias, like):
    """A new Conv2d holding copies of `weight` (out, in, kh, kw) and `bias`, with like's geometry."""
    if like.groups != 1:
        raise ValueError(f"removing channels of a grouped convolution ({like}) is not supported: a group's "
                         "channels would have to go together")
    conv = Conv2d(weight.shape[1], weight.shape[0], like.kernel_size, like.stride, like.padding, like.dilation,
                  bias=bias is not None, dtype=weight.dtype)
    with no_grad():
        conv.weight.copy_(Tensor(np.ascontiguousarray(weight)))
        if bias is not None:
            conv.bias.copy_(Tensor(np.ascontiguousarray(bias)))
    return conv


def shrink_linear(layer, next_layer, keep):
    """Contract: layer a Linear(in, h), next_layer a Linear(h, out) (either may have no
    bias), keep sorted int64 indices into the h hidden units. Returns (Linear(in,
    len(keep)), Linear(len(keep), out)): new layers, in the originals' dtype and sharing no
    memory with them, that compute exactly what the original pair computes when every
    hidden unit outside `keep` is removed."""
    # Idea: a hidden unit is a row on one side and a column on the other; cut both.
    ### BEGIN SOLUTION
    bias = _values(layer.bias)
    new = _linear_from(layer.weight.numpy()[keep], None if bias is None else bias[keep])
    new_next = _linear_from(next_layer.weight.numpy()[:, keep], _values(next_layer.bias))
    return new, new_next
    ### END SOLUTION


def shrink_conv2d(conv, next_layer, keep):
    """Contract: conv a Conv2d with C output channels; next_layer a Conv2d with C input
    channels, or a Linear reading the Flatten of conv's (C, H, W) output (in_features = C·S);
    keep sorted int64 channel indices. Returns (the conv with filters `keep`, the next layer
    with only the inputs of the kept channels); copies, in the layers' dtype."""
    # Idea: a channel is a filter on one side and an input channel (or a block of columns) on the other.
    ### BEGIN SOLUTION
    bias = _values(conv.bias)
    new = _conv_from(conv.weight.numpy()[keep], None if bias is None else bias[keep], conv)
    if isinstance(next_layer, Conv2d):
        new_next = _conv_from(next_layer.weight.numpy()[:, keep], _values(next_layer.bias), next_layer)
    else:
        per = next_layer.in_features // conv.out_channels
        cols = (keep[:, None] * per + np.arange(per)[None, :]).ravel()
        new_next = _linear_from(next_layer.weight.numpy()[:, cols], _values(next_layer.bias))
    return new, new_next
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-shrink-linear", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(3)
    _fc1, _fc2 = nn.Linear(5, 6), nn.Linear(6, 4)
    _xs = tinytorch.randn(7, 5)
with tinytorch.no_grad():  # neurons 1 and 4 are dead: zero weights, negative bias, ReLU gives 0
    _fc1.weight.numpy()[[1, 4]] = 0.0
    _fc1.bias.numpy()[[1, 4]] = -1.0
_keep = channels_to_keep(neuron_importance(_fc1.weight.numpy(), 1), 2 / 6)
assert_equal(_keep, np.array([0, 2, 3, 5]), "the two dead neurons have the lowest L1 norm")
_fc1_w, _fc2_w, _fc2_b = _fc1.weight.numpy().copy(), _fc2.weight.numpy().copy(), _fc2.bias.numpy().copy()
try:
    _n1, _n2 = shrink_linear(_fc1, _fc2, _keep)
except (IndexError, ShapeError) as _exc:  # keep applied along the wrong axis of some array
    check(False, "shrink_linear(Linear(5, 6), Linear(6, 4), keep=[0, 2, 3, 5]) runs: for each of the four "
          "arrays, which axis counts the 6 hidden units, and does that array have one at all?",
          got=f"{type(_exc).__name__}: {_exc}")
check(_n1.bias is not None and _n2.bias is not None, "both new layers keep their bias (the next layer's too: "
      "its outputs are not removed)", got=(_n1.bias, _n2.bias))
assert_equal((_n1.weight.shape, _n1.bias.shape, _n2.weight.shape, _n2.bias.shape),
             ((4, 5), (4,), (4, 4), (4,)), "shapes: Linear(5, 4) then Linear(4, 4)")
assert_equal((_n1.in_features, _n1.out_features, _n2.in_features), (5, 4, 4), "in/out features")
_before = _fc2(F.relu(_fc1(_xs))).numpy()
_after = _n2(F.relu(_n1(_xs))).numpy()
assert_close(_after, _before, rtol=1e-5, atol=1e-6, what="outputs after removing the two dead neurons")
assert_equal(_n1.weight.numpy(), _fc1.weight.numpy()[[0, 2, 3, 5]], "rows kept, in order")
assert_equal(_n2.weight.numpy(), _fc2.weight.numpy()[:, [0, 2, 3, 5]], "columns kept, in order")
check(_n1.weight is not _fc1.weight and _fc1.weight.shape == (6, 5), "new layers; the originals untouched")
_shared = [f"{a} and {b}" for a, x in (("new first layer", _n1), ("new next layer", _n2))
           for b, y in (("first layer", _fc1), ("next layer", _fc2))
           for pa in x.parameters() for pb in y.parameters() if np.shares_memory(pa.numpy(), pb.numpy())]
check(not _shared, "the new layers share no memory with the originals (training the small model must not "
      "change the big one, which section 7 uses again)", got=_shared)
with tinytorch.no_grad():
    for _p in list(_n1.parameters()) + list(_n2.parameters()):
        _p.numpy()[...] = 7.0
for _name, _now, _was in (("first layer's weight", _fc1.weight, _fc1_w), ("next layer's weight", _fc2.weight, _fc2_w),
                          ("next layer's bias", _fc2.bias, _fc2_b)):
    assert_equal(_now.numpy(), _was, f"the original {_name} after writing into every parameter of the new layers")
_nb1, _nb2 = nn.Linear(5, 6, bias=False), nn.Linear(6, 4, bias=False)
_s1, _s2 = shrink_linear(_nb1, _nb2, _keep)
check(_s1.bias is None and _s2.bias is None, "layers without a bias stay without one", got=(_s1.bias, _s2.bias))
print(f"✓ shrink_linear: {_fc1.weight.numel() + _fc2.weight.numel()} → "
      f"{_n1.weight.numel() + _n2.weight.numel()} weights, same outputs")

# %% nbgrader={"grade": true, "grade_id": "test-shrink-conv", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(4)
    _c1, _c2 = nn.Conv2d(2, 5, 3, padding=1), nn.Conv2d(5, 3, 3, stride=2)
    _head = nn.Linear(5 * 4 * 4, 3)
    _xc = tinytorch.randn(2, 2, 4, 4)
with tinytorch.no_grad():  # channels 0 and 3 are dead
    _c1.weight.numpy()[[0, 3]] = 0.0
    _c1.bias.numpy()[[0, 3]] = -1.0
_keep = channels_to_keep(neuron_importance(_c1.weight.numpy(), 2), 0.4)
assert_equal(_keep, np.array([1, 2, 4]), "the two dead filters have the lowest L2 norm")
_k1, _k2 = shrink_conv2d(_c1, _c2, _keep)
check(_k1.bias is not None and _k2.bias is not None, "both new convolutions keep their bias", got=(_k1.bias, _k2.bias))
assert_equal((_k1.weight.shape, _k1.bias.shape, _k2.weight.shape), ((3, 2, 3, 3), (3,), (3, 3, 3, 3)),
             "conv shapes after removing 2 of 5 channels")
assert_equal((_k1.padding, _k2.stride), ((1, 1), (2, 2)), "the geometry is kept")
assert_close(_k2(F.relu(_k1(_xc))).numpy(), _c2(F.relu(_c1(_xc))).numpy(), rtol=1e-5, atol=1e-6,
             what="conv → conv outputs after removing dead channels")
_k1b, _hb = shrink_conv2d(_c1, _head, _keep)
assert_equal(_hb.weight.shape, (3, 3 * 16), "the Linear after Flatten loses 16 columns per channel")
_flat = nn.Flatten()
assert_close(_hb(_flat(F.relu(_k1b(_xc)))).numpy(), _head(_flat(F.relu(_c1(_xc)))).numpy(), rtol=1e-5, atol=1e-6,
             what="conv → Flatten → Linear outputs after removing dead channels")
print(f"✓ shrink_conv2d: {_c1.out_channels} → {_k1.out_channels} channels; head {_head.weight.shape} → {_hb.weight.shape}")

# %% [markdown]
# The provided `prune_neurons(model, amount, p)` applies your functions to a whole
# `Sequential`: for each weight layer except the last (whose outputs are the model's
# outputs), it keeps the best units by your `neuron_importance` and `channels_to_keep`, and
# shrinks that layer and the next weight layer with your `shrink_*`. Layers without
# parameters in between (`ReLU`, `Flatten`, pooling) are kept as they are. The counting
# helpers of the before/after table come with it: parameters, non-zero weights, bytes, and
# the FLOPs of one forward pass, found by running a sample through the model and adding
# $2\cdot \text{in}\cdot\text{out}$ per position for a `Linear` and
# $2\cdot C_{in} k_h k_w$ per output element for a `Conv2d` (module 14 derives these).

# %%
#| export
def _weight_layers(model):
    if not isinstance(model, Sequential):
        raise TypeError(f"prune_neurons works on a Sequential, got {type(model).__name__}")
    children = list(model._modules.items())
    found = []
    for i, (_, child) in enumerate(children):
        if isinstance(child, (Linear, Conv2d)):
            found.append(i)
        elif any(True for _ in child.parameters()):
            raise TypeError(f"prune_neurons: cannot shrink across {type(child).__name__} (layer {i}): "
                            f"only Linear, Conv2d and parameter-free layers are supported")
    return children, found


def prune_neurons(model, amount, p=1):
    """A new Sequential in which every Linear/Conv2d but the last has lost round(amount * n)
    of its output units (lowest Lp norm), and the next weight layer the matching inputs. The
    weight layers are new; `model` is unchanged, and its parameter-free layers (ReLU,
    Flatten, ...) are shared with the result, not copied."""
    children, found = _weight_layers(model)
    layers = {i: child for i, (_, child) in enumerate(children)}
    for i, j in zip(found, found[1:]):
        layer, nxt = layers[i], layers[j]
        keep = channels_to_keep(neuron_importance(layer.weight.numpy(), p), amount)
        if isinstance(layer, Conv2d):
            layers[i], layers[j] = shrink_conv2d(layer, nxt, keep)
        elif isinstance(nxt, Linear):
            layers[i], layers[j] = shrink_linear(layer, nxt, keep)
        else:
            raise TypeError(f"prune_neurons: a Linear (layer {i}) followed by {type(nxt).__name__} is not supported")
    from collections import OrderedDict
    return Sequential(OrderedDict((name, layers[i]) for i, (name, _) in enumerate(children)))


# %%
#| export
def _unique(tensors):
    return list({id(t): t for t in tensors if t is not None}.values())


def count_nonzero(model):
    """Non-zero numbers the model computes with: a pruned parameter counts through its mask."""
    masked = {}  # id(<name>_orig) -> the values the layer computes with
    for m in model.modules():
        for name in getattr(m, "pruned_names", None) or []:  # m is a PrunedModule
            orig = getattr(m.module, name + "_orig")
            masked[id(orig)] = orig.numpy() * getattr(m.module, name + "_mask").numpy()
    return sum(int(np.count_nonzero(masked.get(id(p), p.numpy()))) for p in _unique(model.parameters()))


def model_bytes(model):
    """Bytes of every parameter and buffer (masks included), each once."""
    return sum(t.numpy().nbytes for t in _unique(list(model.parameters()) + list(model.buffers())))


def _flops(module, x):
    """(FLOPs of module(x), module(x)) for the layer kinds of this course's models."""
    inner = getattr(module, "module", None) if getattr(module, "pruned_names", None) is not None else None
    if isinstance(module, Sequential):
        total = 0
        for child in module:
            f, x = _flops(child, x)
            total += f
        return total, x
    out = module(x)
    layer = inner if inner is not None else module
    if isinstance(layer, Linear):
        return 2 * layer.in_features * out.numel(), out
    if isinstance(layer, Conv2d):
        kh, kw = layer.kernel_size
        return 2 * layer.in_channels * kh * kw * out.numel(), out
    return 0, out


def count_flops(model, sample):
    """Multiply-add FLOPs (2 per multiply-add) of one forward pass, per example of `sample`."""
    with no_grad():
        total, _ = _flops(model, sample)
    return total // sample.shape[0]


# %% [markdown]
# **Predict first.** `prune_neurons` with `amount=0.5` on an MLP `64 → 256 → 128 → 10`
# halves both hidden widths. By what factor do the parameters and the FLOPs per example
# shrink?

# %%
predicted_param_factor = None  # your number: params(before) / params(after)
predicted_flop_factor = None    # your number: FLOPs(before) / FLOPs(after), per example

# %%
with preserved_state():
    tinytorch.manual_seed(0)
    _mlp = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
_small_mlp = prune_neurons(_mlp, 0.5)
_sample = tinytorch.randn(4, 64)
print(_small_mlp)
for _label, _m in [("before", _mlp), ("after", _small_mlp)]:
    print(f"{_label:6s}: {count_parameters(_m):7,d} parameters, {count_flops(_m, _sample):7,d} FLOPs per example, "
          f"output shape {_m(_sample).shape}")
print(f"measured factors: parameters {count_parameters(_mlp) / count_parameters(_small_mlp):.2f}, "
      f"FLOPs {count_flops(_mlp, _sample) / count_flops(_small_mlp, _sample):.2f}; "
      + ("no prediction written" if predicted_param_factor is None and predicted_flop_factor is None
         else f"you predicted {predicted_param_factor} and {predicted_flop_factor}"))

# %% [markdown]
# The middle matrix `256 × 128` shrinks on both sides (4× fewer weights), the first and
# last only on one (2×): the total lies between 2 and 4, closer to 4 the more of the model
# sits in layers that are hidden on both sides. FLOPs follow the weights for an MLP (two per
# weight per example; the biases, counted in the parameters but adding no multiply, make the
# two factors differ in the third digit). These counts are exact and the same on every
# machine.
#
# The same for channels, and now with a stopwatch. **Predict first.** A CNN for 8×8 images
# with convolutions of 32 and 64 channels loses half the channels of each. The FLOPs
# fall by almost 4× (the middle convolution, which loses half its inputs *and* half its
# outputs, does most of the work); how much faster do you expect its forward pass on 32
# images to be?

# %%
predicted_cnn_speedup = None  # your number: latency(before) / latency(after)

# %%
with preserved_state():
    tinytorch.manual_seed(0)
    _cnn = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 4 * 4, 10))
    _imgs = tinytorch.randn(32, 1, 8, 8)
_small_cnn = prune_neurons(_cnn, 0.5)
_cnn_times = {"before": [], "after": []}
with tinytorch.no_grad():
    for _m in (_cnn, _small_cnn):
        _m(_imgs)  # a warm-up call each
    for _ in range(11):  # interleaved rounds: a busy moment of the machine slows both models alike
        for _label, _m in (("before", _cnn), ("after", _small_cnn)):
            _cnn_times[_label].append(median_time(lambda: _m(_imgs), repeats=3, warmup=0))
_cnn_ms = {_label: float(np.median(_t)) * 1e3 for _label, _t in _cnn_times.items()}
for _label, _m in [("before", _cnn), ("after", _small_cnn)]:
    print(f"{_label:6s}: channels {_m[0].out_channels:2d}, {_m[2].out_channels:2d}; {count_parameters(_m):6,d} parameters, "
          f"{count_flops(_m, _imgs):9,d} FLOPs per image, {_cnn_ms[_label]:6.2f} ms for 32 images")
print(f"FLOP ratio {count_flops(_cnn, _imgs) / count_flops(_small_cnn, _imgs):.2f}; measured speed-up "
      f"{_cnn_ms['before'] / _cnn_ms['after']:.2f}x; "
      + ("no prediction written" if predicted_cnn_speedup is None else f"you predicted {predicted_cnn_speedup}x"))

# %% [markdown]
# The two models were timed in alternation (11 rounds, the median of each side), so a busy
# moment of the machine slows both. The smaller CNN is faster, but the speed-up need not
# equal the FLOP ratio, and it can miss it in either direction. Below it: every op has a fixed cost (Python, the
# dispatch) that does not shrink, and ReLU and pooling shrink only with the channel count.
# Above it: the big model's im2col matrix and feature maps (megabytes for 32 images) may
# not fit in the CPU's caches, or may cost fresh memory from the operating system at every
# call, while the small model's do fit or get reused. Which effect wins depends on the
# machine, its allocator and its load; the figure printed above is yours.

# %% [markdown]
# ### Between the two: 2:4 semi-structured sparsity
#
# Unstructured pruning keeps the accuracy, but nothing can use its scattered zeros;
# structured pruning is fast, but it removes whole neurons. NVIDIA's GPUs since Ampere (the
# A100) meet in the middle, in hardware: in every run of **4 consecutive weights** of a
# row, **2 are zero**. The pattern is regular enough for a *sparse tensor core* to store
# only the 2 kept values of each run, with a 2-bit position each, and to skip the zeros'
# multiplications, and fine-grained enough to keep most of what unstructured pruning keeps.
# PyTorch hands such a weight to the hardware with
# `torch.sparse.to_sparse_semi_structured`, once a mask has chosen the zeros.
#
# Write `semi_structured_mask(values, n=2, m=4)`: the magnitude mask under that
# constraint, for any n of every m. Before you write it: how many zeros does it leave in a
# row of `in` weights? What shape turns "every run of m" into an axis that numpy can rank
# along, all runs at once? And compared with `magnitude_mask` pruning the same number of
# weights, which of the two keeps the larger weights, and why is that not the whole story
# on a GPU?
#
# <details><summary>Hint 1</summary>
#
# A row of `in` weights is `in / m` runs of `m` weights, one after another: a reshape can
# give the runs an axis of their own, and a reshape back restores the shape.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Inside a run, what is each entry's *rank* by magnitude (0 for the smallest)? A stable
# sort breaks ties by position; the rank of an entry is its position in the sorted order.
# Which ranks are pruned?
# </details>
#
# <details><summary>The approach</summary>
#
# This is `magnitude_mask` applied to every run separately, so the question is how to make
# numpy do thousands of tiny rankings in one call: give the runs their own axis and rank
# along it. The mask then follows from each entry's rank within its run, and the tie rule
# is the stable order you already used.
# </details>

# %% nbgrader={"grade": false, "grade_id": "semi-structured-mask", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.prune
def semi_structured_mask(values, n=2, m=4):
    """The n:m magnitude mask (2:4 by default) of sparse tensor cores.

    Contract: `values` a numpy float array with at least one dimension, its last dimension a
    multiple of m; 1 <= n <= m. Returns a mask of values' shape and dtype: in every run of m
    consecutive entries along the last axis (positions m*j to m*j + m - 1), exactly n ones,
    at the n entries of largest |value| (ties: the earlier position is pruned first, as in
    magnitude_mask), and zeros elsewhere. Raises ValueError otherwise. Vectorised: no
    Python loop over the runs.
    """
    values = np.asarray(values)
    if not 1 <= n <= m:
        raise ValueError(f"an n:m pattern keeps n of every m weights, 1 <= n <= m: got n={n}, m={m}")
    if values.ndim == 0 or values.shape[-1] % m:
        raise ValueError(f"the last dimension must be a multiple of m={m} (runs of {m} weights), "
                         f"got shape {values.shape}")
    # Idea: magnitude_mask's ranking, inside every run at once.
    ### BEGIN SOLUTION
    runs = np.abs(values).reshape(values.shape[:-1] + (-1, m))
    rank = np.argsort(np.argsort(runs, axis=-1, kind="stable"), axis=-1, kind="stable")
    return (rank >= m - n).astype(values.dtype).reshape(values.shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-semi-structured-mask", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_w24 = np.array([[0.1, -3.0, 0.5, 0.2, 4.0, -0.3, 0.0, 1.0]], dtype=np.float32)
assert_equal(semi_structured_mask(_w24), np.array([[0, 1, 1, 0, 1, 0, 0, 1]], dtype=np.float32),
             "2:4 of [0.1, -3, 0.5, 0.2 | 4, -0.3, 0, 1]: the two largest |w| of each run of four")
assert_equal(semi_structured_mask(_w24).dtype, np.dtype(np.float32), "the mask has the values' dtype")
assert_equal(semi_structured_mask(np.array([2.0, 1.0, 1.0, 1.0])), np.array([1.0, 0.0, 0.0, 1.0]),
             "2:4 of [2, 1, 1, 1]: ties at the cut prune the earlier positions first")
assert_equal(semi_structured_mask(_w24, n=1, m=2), np.array([[0, 1, 1, 0, 1, 0, 0, 1]], dtype=np.float32),
             "1:2 of the same row: the larger of each pair")
_r = np.round(np.random.default_rng(9).standard_normal((6, 5, 12)), 1)  # three runs of 4 per row, many ties


def _brute_force(v, n, m):
    """The n:m mask run by run, with magnitude_mask on each run."""
    out = np.empty_like(v)
    for idx in np.ndindex(*v.shape[:-1]):
        for j in range(0, v.shape[-1], m):
            out[idx + (slice(j, j + m),)] = magnitude_mask(v[idx + (slice(j, j + m),)], m - n)
    return out


for _n, _m in ((2, 4), (1, 4), (3, 4), (2, 6), (4, 4)):
    _r6 = _r[..., :_m * (12 // _m)]
    _got, _want = semi_structured_mask(_r6, _n, _m), _brute_force(_r6, _n, _m)
    if _got.shape == _want.shape and not np.array_equal(_got, _want):  # show the first run that differs
        _at = tuple(np.argwhere(_got != _want)[0])
        _run = _at[:-1] + (slice(_at[-1] // _m * _m, _at[-1] // _m * _m + _m),)
        check(False, f"{_n}:{_m} of a (6, 5, {_r6.shape[-1]}) array with ties: the mask of each run of {_m}, "
              f"here the run {_r6[_run].tolist()} (ties: the earlier position is pruned first)",
              got=_got[_run].tolist(), expected=_want[_run].tolist())
    assert_equal(_got, _want, f"{_n}:{_m} of a (6, 5, {_r6.shape[-1]}) array with ties: magnitude_mask on every "
                 f"run of {_m}")
_s8, _s800 = (np.random.default_rng(3).standard_normal((4, k)) for k in (8, 800))
check(python_steps(semi_structured_mask, _s8) == python_steps(semi_structured_mask, _s800),
      "semi_structured_mask runs as many Python steps on 200 runs per row as on 2 (no loop over the runs)",
      got=(python_steps(semi_structured_mask, _s8), python_steps(semi_structured_mask, _s800)))
assert_raises(ValueError, semi_structured_mask, np.ones((2, 6)), match="multiple",
              what="a last dimension of 6 has no runs of 4")
print(f"✓ semi_structured_mask; 2:4 of {np.array2string(_w24[0], separator=', ')} -> "
      f"{np.array2string(semi_structured_mask(_w24)[0], separator=', ')}")

# %% [markdown]
# The layer side is provided: `custom_from_mask(model, name, mask)` prunes a parameter
# with any mask you give it (PyTorch's `prune.custom_from_mask`), through the same wrapper
# as before, so the 2:4 zeros stay zero through fine-tuning. Section 7 measures what the
# constraint costs in accuracy against unstructured pruning of the same 50%.

# %% [markdown]
# ## 5. Knowledge distillation
#
# Instead of cutting a big model, train a small one — the **student** — to imitate it.
# The big **teacher**'s output distribution carries more than the label: for an image of a
# 3 it might give 0.90 to "3", 0.07 to "8" and 0.02 to "5", which says *which digits look
# alike*. Hinton, Vinyals and Dean (2015) soften both distributions with a **temperature**
# $T > 1$ so that these small probabilities become visible, and train the student on the
# Kullback-Leibler divergence from the teacher's softened distribution to the student's,
# averaged over the $N$ rows of the batch:
#
# $$p^{(T)} = \operatorname{softmax}(z_{\text{teacher}}/T),\qquad
#   q^{(T)} = \operatorname{softmax}(z_{\text{student}}/T),\qquad
#   \mathrm{KL}_T = \frac1N\sum_{n=1}^{N}\sum_j p^{(T)}_{nj}
#   \big(\log p^{(T)}_{nj} - \log q^{(T)}_{nj}\big).$$
#
# One factor completes the loss, and it is yours to derive. The student is trained on a
# mix with the ordinary cross-entropy on the labels, $\alpha\,\mathcal L_{KD} +
# (1-\alpha)\,\mathcal L_{CE}$, and $\alpha$ should not need retuning for every
# temperature: the gradient that $\mathcal L_{KD} = c(T) \cdot \mathrm{KL}_T$ sends to the
# student's logits must keep its size as $T$ grows, and $c(1) = 1$. Derive the gradient of
# $\mathrm{KL}_T$ with respect to the student's logits $z$ (module 06's rule for
# `log_softmax`, and the chain rule through $z/T$), then ask how its size changes with $T$
# when $T$ is large: what happens to $p^{(T)} - q^{(T)}$ as both flatten towards uniform?
# $c(T)$ must undo that. The check measures the gradient's size over a range of
# temperatures. The teacher is fixed: no gradient flows into it. The average is over the
# batch ($N$ rows), not over the $N\cdot C$ numbers — PyTorch's `reduction="batchmean"`,
# the one that matches the mathematical KL.

# %%
_z = np.array([5.0, 2.0, 1.0, -1.0, -2.0])
fig, ax = plt.subplots(figsize=(6.5, 2.8))
for _i, _T in enumerate([1, 2, 4]):
    _p = np.exp(_z / _T - (_z / _T).max())
    ax.bar(np.arange(5) + (_i - 1) * 0.27, _p / _p.sum(), width=0.27, label=f"T = {_T}")
ax.set_xticks(range(5))
ax.set_xticklabels([f"class {i}" for i in range(5)])
ax.set_ylabel("softmax(z / T)")
ax.set_title("a teacher's logits, softened: higher T shows the runners-up")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Write `distillation_loss(student_logits, teacher_logits, temperature)` with module 02's
# `log_softmax` and Tensor ops, so that autograd differentiates it.
#
# <details><summary>Hint 1</summary>
#
# Which of the two distributions weighs the log-ratio? KL is not symmetric: here the
# teacher's $p$ is the "true" distribution. Which tensor must not take part in the graph?
# For $c(T)$: count the factors of $1/T$ in the gradient, one from the chain rule and one
# from $p - q$ at large $T$ (expand $e^{z_j/T}$ to first order).
# </details>
#
# <details><summary>Hint 2</summary>
#
# Work with log-probabilities: $\log p$ from `log_softmax`, and $p = \exp(\log p)$. Both
# sets of logits are divided by $T$ before the softmax.
# </details>
#
# <details><summary>The approach</summary>
#
# Besides the factor, the work is in keeping it stable and in the graph. Every
# probability that appears inside a log should come from a log-probability, never from a
# probability that has underflowed to 0. Only the student's side belongs to the graph. And
# "batchmean" counts rows, whatever the number of leading dimensions.
# </details>

# %% nbgrader={"grade": false, "grade_id": "distillation-loss", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def distillation_loss(student_logits, teacher_logits, temperature=4.0):
    """Temperature-scaled knowledge-distillation loss (Hinton et al., 2015).

    Contract: two float Tensors of the same shape (..., C); temperature > 0 (checked for
    you: ValueError naming the temperature; a shape mismatch raises ValueError naming both
    shapes). Returns a scalar Tensor: c(T) times the KL divergence KL(p_T || q_T) between
    the softened teacher distribution p_T = softmax(teacher / T) and the softened student
    one q_T = softmax(student / T), summed over classes and averaged over the rows, where
    c(T) is section 5's factor (c(1) = 1; the gradient's size levels off as T grows).
    Gradients flow to the student's logits only.
    """
    if not isinstance(temperature, (int, float, np.integer, np.floating)) or not temperature > 0:
        raise ValueError(f"distillation_loss: the temperature must be a number > 0, got {temperature!r}")
    if tuple(student_logits.shape) != tuple(teacher_logits.shape) or student_logits.ndim < 1:
        raise ValueError(f"distillation_loss: student logits {tuple(student_logits.shape)} and teacher logits "
                         f"{tuple(teacher_logits.shape)} must have the same shape (..., C)")
    T = float(temperature)
    # Idea: match the softened distributions, then scale by the factor you derived.
    ### BEGIN SOLUTION
    log_q = log_softmax(student_logits / T, dim=-1)
    log_p = log_softmax(teacher_logits.detach() / T, dim=-1)
    rows = student_logits.numel() // student_logits.shape[-1]
    kl = (log_p.exp() * (log_p - log_q)).sum() / rows
    return kl * (T * T)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-distillation-loss", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _log_softmax_np(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _kl_np(s, t, T):
    """Section 5's KL_T (no factor), averaged over the rows of 2-D logits."""
    lp, lq = _log_softmax_np(t / T), _log_softmax_np(s / T)
    return (np.exp(lp) * (lp - lq)).sum() / s.shape[0]


_rng = np.random.default_rng(5)
_s, _t = _rng.standard_normal((4, 6)) * 2, _rng.standard_normal((4, 6)) * 3
assert_close(distillation_loss(Tensor(_s), Tensor(_t), 1.0).item(), _kl_np(_s, _t, 1.0), rtol=1e-6,
             what="at T = 1 the loss is KL(teacher || student) averaged over the 4 rows (c(1) = 1)")
assert_close(distillation_loss(Tensor(_t), Tensor(_t), 3.0).item(), 0.0, atol=1e-9,
             what="a student equal to its teacher: loss 0")
_sizes = {}
for _T in (8.0, 16.0, 32.0, 64.0):
    _st = Tensor(_s, requires_grad=True)
    distillation_loss(_st, Tensor(_t), _T).backward()
    _sizes[_T] = float(np.linalg.norm(_st.grad.numpy()))
_ratios = [round(_sizes[2 * _T] / _sizes[_T], 3) for _T in (8.0, 16.0, 32.0)]
check(all(0.8 < _r < 1.25 for _r in _ratios), "the gradient's size levels off as T grows: |grad| at 2T over "
      "|grad| at T, for T = 8, 16 and 32, each near 1 (c(T) undoes the shrinking of KL_T's gradient)",
      got=_ratios, expected="three ratios between 0.8 and 1.25")
_c2 = distillation_loss(Tensor(_s), Tensor(_t), 2.0).item() / _kl_np(_s, _t, 2.0)  # your c(2)
_s3 = _rng.standard_normal((2, 3, 6))
_t3 = _rng.standard_normal((2, 3, 6))
assert_close(distillation_loss(Tensor(_s3), Tensor(_t3), 2.0).item(),
             distillation_loss(Tensor(_s3.reshape(6, 6)), Tensor(_t3.reshape(6, 6)), 2.0).item(), rtol=1e-9,
             what="(2, 3, C) logits give the loss of the same 6 rows as a (6, C) batch: averaged over the rows")
_st, _tt = Tensor(_s, requires_grad=True), Tensor(_t, requires_grad=True)
distillation_loss(_st, _tt, 2.0).backward()
_num = np.zeros_like(_s)  # central differences of your loss's values: a measurement, not a formula
for _i in np.ndindex(_s.shape):
    _e = np.zeros_like(_s)
    _e[_i] = 1e-6
    _num[_i] = (distillation_loss(Tensor(_s + _e), Tensor(_t), 2.0).item()
                - distillation_loss(Tensor(_s - _e), Tensor(_t), 2.0).item()) / 2e-6
assert_close(_st.grad.numpy(), _num, rtol=1e-5, atol=1e-8,
             what="gradient w.r.t. the student's logits at T = 2, against central differences of the loss")
check(_tt.grad is None, "no gradient reaches the teacher's logits", got=_tt.grad)
_far = distillation_loss(Tensor([[0.0, 240.0]]), Tensor([[240.0, 0.0]]), 2.0).item()
assert_close(_far, _c2 * 120.0, rtol=1e-6, what="logits 120 apart after dividing by T = 2: KL_T = 120, times "
             "your c(2) (a probability that underflows to 0 and then meets a log gives inf or nan)")
assert_raises(ValueError, distillation_loss, Tensor(_s), Tensor(_t), 0.0, match="temperature")
### BEGIN HIDDEN TESTS
for _T in (1.0, 2.0, 5.0):
    assert_close(distillation_loss(Tensor(_s), Tensor(_t), _T).item(), _T ** 2 * _kl_np(_s, _t, _T), rtol=1e-6,
                 what=f"T² · KL(teacher || student) / batch at T = {_T}")
### END HIDDEN TESTS
print(f"✓ distillation_loss; at T = 2: {distillation_loss(Tensor(_s), Tensor(_t), 2.0).item():.4f}")

# %% [markdown]
# Your derivation against a measurement: the size of the gradient that reaches the student's
# logits from $\mathrm{KL}_T$ alone (central differences), and from your loss, and the
# factor your loss applies.

# %%
def _kl_gradient_size(T, h=1e-6):
    grad = np.zeros_like(_s)
    for i in np.ndindex(_s.shape):
        e = np.zeros_like(_s)
        e[i] = h
        grad[i] = (_kl_np(_s + e, _t, T) - _kl_np(_s - e, _t, T)) / (2 * h)
    return float(np.linalg.norm(grad))


for _T in (1.0, 2.0, 4.0, 8.0, 16.0):
    _st = Tensor(_s, requires_grad=True)
    _loss = distillation_loss(_st, Tensor(_t), _T)
    _loss.backward()
    print(f"T = {_T:4.0f}: |grad| of KL_T alone {_kl_gradient_size(_T):.2e}, of your loss "
          f"{np.linalg.norm(_st.grad.numpy()):.3f}; your c(T) = {_loss.item() / _kl_np(_s, _t, _T):.2f}")

# %% [markdown]
# <details><summary>Why the factor is what it is (open once you have compared with your derivation)</summary>
#
# The gradient of the KL term is $(q^{(T)} - p^{(T)})/(TN)$: one $1/T$ from the chain rule
# through $z/T$. For large $T$ both softmaxes are near uniform and
# $\operatorname{softmax}(z/T)_j \approx (1 + z_j/T - \bar z/T)/C$, so $q - p \approx
# (z_s - z_t - \text{mean})/(CT)$: a second $1/T$. Without the factor the gradient falls
# by about 4 for each doubling of $T$ (the first column, once $T$ is a few times the
# logits' spread); with $T^2$ it levels off.
# </details>

# %% [markdown]
# If PyTorch is installed, compare with the way PyTorch code writes the same loss
# (`F.kl_div` takes the student's log-probabilities first; `log_target=True` says the
# teacher's are log-probabilities too) and with `torch.nn.utils.prune`'s mask:

# %%
from tinytorch.utils.optional import optional_torch  # noqa: E402

torch = optional_torch()  # None when PyTorch is not installed
if torch is not None:
    import torch.nn.utils.prune as torch_prune

    _ts, _tt2 = torch.tensor(_s), torch.tensor(_t)
    _theirs = torch.nn.functional.kl_div(torch.log_softmax(_ts / 2, -1), torch.log_softmax(_tt2 / 2, -1),
                                         reduction="batchmean", log_target=True)
    print(f"at T = 2: your loss / PyTorch's kl_div of the softened distributions = "
          f"{distillation_loss(Tensor(_s), Tensor(_t), 2.0).item() / _theirs.item():.6f} (your c(2))")
    _lin_t = torch.nn.Linear(25, 40)
    with torch.no_grad():
        _lin_t.weight.copy_(torch.tensor(_big))
    torch_prune.l1_unstructured(_lin_t, "weight", amount=0.7)
    print("magnitude mask equal to torch.nn.utils.prune's:",
          bool((_lin_t.weight_mask.numpy() == magnitude_mask(_big.astype(np.float32), 700)).all()))

# %% [markdown]
# ## 6. Low-rank factorisation
#
# A `Linear(in, out)` stores an `out × in` matrix $W$. If $W$ is close to a matrix of rank
# $r$, it is close to a product $B A$ with $A$ of shape $r\times\text{in}$ and $B$ of shape
# $\text{out}\times r$: **two thin layers**, `Linear(in, r, bias=False)` then
# `Linear(r, out)`, with $r(\text{in} + \text{out})$ weights instead of
# $\text{in}\cdot\text{out}$ — fewer whenever $r < \frac{\text{in}\cdot\text{out}}{\text{in}+\text{out}}$.
#
# The best rank-$r$ approximation is given by the **singular value decomposition**
# $W = U\,\Sigma\,V^\top$ ($\sigma_1 \ge \sigma_2 \ge \dots \ge 0$): keep the $r$ largest
# singular values and their vectors. By the Eckart-Young theorem no rank-$r$ matrix is
# closer in the Frobenius norm, and the error is exactly what was dropped:
#
# $$W_r = U_{:, :r}\,\Sigma_{:r}\,V_{:r}^\top,\qquad
#   \lVert W - W_r\rVert_F = \sqrt{\textstyle\sum_{i > r} \sigma_i^2}.$$
#
# Then share $\Sigma$ between the two factors so that neither carries all of it: both
# should have the same scale (each row of $A$ as long as the matching column of $B$). Derive
# $A$ and $B$ from $U$, $\Sigma$ and $V^\top$ so that $BA = W_r$ with that property. Write
# `low_rank_factors(weight, rank)`; the provided `low_rank_linear(layer, rank)` builds the
# two layers from them (the bias goes to the second).
#
# **Predict first.** The check below factors a 12 × 9 matrix that is "rank 3 plus a little
# noise" at every rank from 1 to 9 and prints the errors. How will they fall with the rank:
# smoothly, or with a knee, and where?
#
# <details><summary>Hint 1</summary>
#
# `np.linalg.svd(W, full_matrices=False)` returns `U`, the singular values `s` (largest
# first) and `Vt` ($V^\top$, one singular vector per **row**). Which `r` rows, columns and
# values belong together?
# </details>
#
# <details><summary>The approach</summary>
#
# Eckart-Young says which pieces of the decomposition to keep; the one design decision is
# how $\Sigma$ is shared, and the check tells you when both factors have the same scale.
# A diagonal matrix times a matrix scales its rows (or, on the right, its columns): no need
# to build the diagonal matrix.
# </details>

# %% nbgrader={"grade": false, "grade_id": "low-rank", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def low_rank_factors(weight, rank):
    """Contract: `weight` a numpy (out, in) float array, 1 <= rank <= min(out, in) (checked
    for you: ValueError naming the rank and the largest allowed). Returns (A, B), numpy
    arrays of weight's dtype with shapes (rank, in) and (out, rank), such that B @ A is the
    truncated SVD of weight (its best rank-`rank` approximation), the singular values shared
    so that each row of A has the norm of the matching column of B."""
    weight = np.asarray(weight)
    if not isinstance(rank, (int, np.integer)) or not 1 <= rank <= min(weight.shape):
        raise ValueError(f"rank must be an integer between 1 and min(out, in) = {min(weight.shape)}, got {rank!r}")
    # Idea: keep the directions the matrix stretches the most.
    ### BEGIN SOLUTION
    U, s, Vt = np.linalg.svd(weight.astype(np.float64), full_matrices=False)
    root = np.sqrt(s[:rank])
    A = root[:, None] * Vt[:rank]
    B = U[:, :rank] * root[None, :]
    return A.astype(weight.dtype), B.astype(weight.dtype)
    ### END SOLUTION


def low_rank_linear(layer, rank):
    """Sequential(Linear(in, rank, bias=False), Linear(rank, out)) approximating `layer`."""
    if not isinstance(layer, Linear):
        raise TypeError(f"low_rank_linear factorises a Linear, got {type(layer).__name__}")
    A, B = low_rank_factors(layer.weight.numpy(), rank)
    return Sequential(_linear_from(A, None), _linear_from(B, _values(layer.bias)))


def low_rank_model(model, rank):
    """A new Sequential with every Linear but the last replaced by its rank-`rank` factorisation
    (a Linear already thinner than `rank` is kept)."""
    children = list(model._modules.items())
    last = max(i for i, (_, c) in enumerate(children) if isinstance(c, Linear))
    from collections import OrderedDict
    return Sequential(OrderedDict(
        (name, low_rank_linear(c, rank) if isinstance(c, Linear) and i < last and rank < min(c.weight.shape) else c)
        for i, (name, c) in enumerate(children)))


# %% nbgrader={"grade": true, "grade_id": "test-low-rank", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(6)
_W = (_rng.standard_normal((12, 3)) @ _rng.standard_normal((3, 9)) + 0.05 * _rng.standard_normal((12, 9))).astype(np.float64)
_A, _B = low_rank_factors(_W, 9)
assert_equal((_A.shape, _B.shape), ((9, 9), (12, 9)), "full rank: A (r, in), B (out, r)")
assert_close(_B @ _A, _W, rtol=1e-10, atol=1e-12, what="at full rank, B @ A reproduces W")
_sv = np.linalg.svd(_W, compute_uv=False)
_errs = []
for _r in range(1, 10):
    _A, _B = low_rank_factors(_W, _r)
    _errs.append(np.linalg.norm(_W - _B @ _A))
    assert_close(_errs[-1], np.sqrt((_sv[_r:] ** 2).sum()), rtol=1e-8, atol=1e-10,
                 what=f"rank {_r}: error = sqrt(sum of the dropped σ²) (Eckart-Young)")
check(all(a >= b for a, b in zip(_errs, _errs[1:])), "the error never grows with the rank", got=np.round(_errs, 4))
_A, _B = low_rank_factors(_W, 3)
assert_close(np.linalg.norm(_A, axis=1), np.linalg.norm(_B, axis=0), rtol=1e-8,
             what="the singular values are split evenly: row norms of A = column norms of B")
with preserved_state():
    tinytorch.manual_seed(7)
    _lin = nn.Linear(9, 12)
    _xl = tinytorch.randn(5, 9)
_full = low_rank_linear(_lin, 9)
assert_close(_full(_xl).numpy(), _lin(_xl).numpy(), rtol=1e-4, atol=1e-5, what="low_rank_linear at full rank = the layer")
assert_equal(low_rank_factors(_W.astype(np.float32), 2)[0].dtype, np.dtype(np.float32), "factors keep the dtype")
print("✓ low_rank_factors; errors for rank 1..9:", np.round(_errs, 3).tolist())

# %% [markdown]
# Your prediction against the printout: the knee sits where the rank reaches the matrix's
# true rank, and after it only the noise is left to remove. Now a *trained* layer: the
# second Linear of the digits MLP of section 7 (256 → 128): the figure after its
# distillation experiment draws its singular values next to the same layer's at
# initialisation.

# %% [markdown]
# ## 7. Before and after, on the digits
#
# Now all of it on a real task: an MLP `64 → 256 → 128 → 10` trained on the 8×8 digits
# (module 05's split: 1,438 training images, 359 test images), then compressed five ways.
# The helpers below are plumbing: a short Adam training loop (with an optional teacher for
# distillation, mixing $\alpha\,\mathcal L_{KD} + (1-\alpha)\,\mathcal L_{CE}$), the test
# accuracy, and one table row of **measured** numbers: parameters, non-zero weights,
# bytes of parameters and buffers, FLOPs of one forward pass per image, the median latency
# of a forward pass over the 359 test images (`median_time`), and the test accuracy.

# %%
from tinytorch.data import Digits  # noqa: E402
from tinytorch.optim import Adam  # noqa: E402
_train, _test = Digits(train=True), Digits(train=False)
X_train = Tensor(_train.data.numpy().reshape(-1, 64))
y_train = _train.targets
X_test = Tensor(_test.data.numpy().reshape(-1, 64))
y_test = _test.targets


def make_mlp(hidden=(256, 128), seed=0):
    with preserved_state():
        tinytorch.manual_seed(seed)
        widths = (64, *hidden)
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(widths[-1], 10))


def train(model, epochs, lr=2e-3, teacher=None, T=2.0, alpha=0.5, seed=0, batch=64):
    """Adam on the training images; with a teacher, the distillation mix. Returns the model."""
    opt = Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    soft = None
    if teacher is not None:
        with tinytorch.no_grad():
            soft = teacher(X_train).numpy()
    for _ in range(epochs):
        order = rng.permutation(X_train.shape[0])
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            out = model(Tensor(X_train.numpy()[idx]))
            loss = F.cross_entropy(out, Tensor(y_train.numpy()[idx]))
            if soft is not None:
                loss = alpha * distillation_loss(out, Tensor(soft[idx]), T) + (1 - alpha) * loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


def accuracy(model):
    with tinytorch.no_grad():
        return float((model(X_test).numpy().argmax(1) == y_test.numpy()).mean())


def row(name, model):
    """A table row; its latency is measured once every row exists (`time_rows`)."""
    return dict(model=name, params=count_parameters(model), nonzero=count_nonzero(model),
                bytes=model_bytes(model), flops=count_flops(model, X_test[:8]),
                accuracy=accuracy(model), net=model)


def time_rows(rows, rounds=7):
    """Each row's forward latency on the test set: the median over `rounds` interleaved rounds
    (every model once per round), so that a busy moment of the machine slows all alike."""
    times = [[] for _ in rows]
    with tinytorch.no_grad():
        for r in rows:
            r["net"](X_test)  # a warm-up call each
        for _ in range(rounds):
            for t, r in zip(times, rows):
                t.append(median_time(lambda: r["net"](X_test), repeats=3, warmup=0))
    for t, r in zip(times, rows):
        r["latency_ms"] = float(np.median(t)) * 1e3


def copy_of(model, hidden=(256, 128)):
    clone = make_mlp(hidden)
    clone.load_state_dict(model.state_dict())
    return clone


teacher = train(make_mlp(), epochs=15)
rows = [row("dense (the teacher)", teacher)]
print(rows[0])

# %% [markdown]
# **Predict first.** Global magnitude pruning removes 80% of the three weight matrices.
# Before any fine-tuning, how many points of test accuracy do you expect to lose? And how
# much faster will the pruned model run on numpy?

# %%
predicted_accuracy_drop_points = None  # your number: accuracy points lost by 80% pruning, no fine-tune
predicted_unstructured_speedup = None  # your number: latency(dense) / latency(80% pruned)

# %%
_names = ["0.weight", "2.weight", "4.weight"]
pruned = global_unstructured(copy_of(teacher), _names, 0.8)
rows.append(row("80% magnitude, no fine-tune", pruned))
train(pruned, epochs=3, lr=1e-3, seed=1)  # the mask stays applied while fine-tuning
rows.append(row("80% magnitude + fine-tune", pruned))
print("sparsity per layer after global pruning:",
      {_n: round(sparsity(pruned[int(_n.split(".")[0])].weight), 3) for _n in _names})

half = train(global_unstructured(copy_of(teacher), _names, 0.5), epochs=3, lr=1e-3, seed=1)
rows.append(row("50% magnitude + fine-tune", half))
two_four = copy_of(teacher)
for _n in _names:
    custom_from_mask(two_four, _n, semi_structured_mask(two_four[int(_n.split(".")[0])].weight.numpy()))
train(two_four, epochs=3, lr=1e-3, seed=1)
rows.append(row("2:4 semi-structured + fine-tune", two_four))
structured = train(prune_neurons(teacher, 0.5), epochs=3, lr=1e-3, seed=2)
rows.append(row("50% neurons removed + fine-tune", structured))
low_rank = train(low_rank_model(teacher, 16), epochs=3, lr=1e-3, seed=3)
rows.append(row("rank-16 factors + fine-tune", low_rank))
small_labels = train(make_mlp((32,), seed=5), epochs=15, seed=4)
rows.append(row("small 64-32-10, labels only", small_labels))
small_kd = train(make_mlp((32,), seed=5), epochs=15, seed=4, teacher=teacher)
rows.append(row("small 64-32-10, distilled", small_kd))
time_rows(rows)

print(f"{'model':34s} {'params':>8s} {'non-zero':>9s} {'bytes':>9s} {'FLOPs':>8s} {'latency':>10s} {'accuracy':>9s}")
for r in rows:
    print(f"{r['model']:34s} {r['params']:8,d} {r['nonzero']:9,d} {r['bytes']:9,d} {r['flops']:8,d} "
          f"{r['latency_ms']:8.3f} ms {100 * r['accuracy']:8.1f}%")
_drop = 100 * (rows[0]["accuracy"] - rows[1]["accuracy"])
_speed = rows[0]["latency_ms"] / rows[1]["latency_ms"]
print(f"accuracy lost by 80% pruning before fine-tuning: {_drop:.1f} points; "
      + ("no prediction written" if predicted_accuracy_drop_points is None else f"you predicted {predicted_accuracy_drop_points}"))
print(f"speed-up of the 80% pruned model: {_speed:.2f}x; "
      + ("no prediction written" if predicted_unstructured_speedup is None else f"you predicted {predicted_unstructured_speedup}x"))

# %% [markdown]
# How to read the table (your figures are printed above; the shape is what to expect):
#
# - **Unstructured pruning** keeps the accuracy after a short fine-tune, but changes
#   neither the dense parameter count nor the FLOPs, and the bytes *grow* (mask + original).
#   It is no faster: numpy multiplies the zeros like any number, and each forward pass
#   also computes `weight_orig * weight_mask`, so expect it no faster than the dense model
#   and usually slower: by a few percent, or by a third and more when the batch is small and
#   that product is a large part of the work.
#   The accuracy before fine-tuning can drop a little or a lot depending on the run: the
#   smaller the removed weights were, the less it drops.
# - **2:4** removes the same 50% as the 50% row, under a constraint: two of every four, so
#   a run of four large weights must lose two of them, where unstructured pruning would
#   take smaller weights elsewhere. After the fine-tune expect the two rows within a point
#   or so (your rows say how close), and 2:4 no faster here: numpy does not know the
#   pattern. On an Ampere or later GPU a sparse
#   tensor core runs such a matmul at up to twice the dense rate and stores the weight in
#   a little over half the bytes (NVIDIA's figures; not measured on this machine).
# - **Structured pruning** and **low rank** really shrink the model: fewer parameters,
#   bytes and FLOPs, and a faster forward pass, after a fine-tune at little cost in
#   accuracy. The measured speed-up need not equal the FLOP ratio (section 4 says why it
#   can miss it either way): at these sizes a forward pass also pays a fixed cost per op
#   (Python, the dispatch) that does not shrink with the layer.
# - **Distillation** trains a small model directly; compare the two small rows. On this
#   small, easy task the teacher is only a few points better than the student can get on
#   its own, so expect the two rows within a point or two of each other, in either
#   direction (with 359 test images one image is 0.28 points). Distillation pays off when
#   the teacher knows much more than the labels say — a far stronger teacher, few labels,
#   or *unlabelled* data, on which the teacher's soft outputs are the only targets. The
#   next cell measures that case.
#
# Latencies depend on the machine, its load, its BLAS and its memory allocator (on some
# systems a large fresh output array costs more in page faults than the multiply itself, so
# a much bigger batch can measure the allocator rather than the layers); on a quiet machine
# reruns move them by several percent, on a busy one by a factor of two, so compare your
# prediction with the FLOP ratio as well. The counts (parameters, non-zero, bytes, FLOPs)
# are exact.

# %% [markdown]
# ### When distillation pays: five labels per digit
#
# Suppose only 50 of the 1,438 training images had labels (5 per digit), while the teacher
# (trained elsewhere, here on all of them) can be asked about any image. The small model
# trained on the 50 labels alone sees 50 targets; with the teacher it also sees the
# teacher's soft outputs on every image, labels or not. **Predict** the two test
# accuracies before you run it.

# %%
predicted_few_labels_accuracy = None  # your numbers: (labels only, labels + teacher), in percent


def train_few_labels(model, labelled, teacher=None, steps=600, T=4.0, seed=0):
    """Adam on the labelled images' cross-entropy, plus, with a teacher, the distillation
    loss on a random batch of 64 training images (labelled or not) at every step."""
    opt = Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(seed)
    x_all = X_train.numpy()
    with tinytorch.no_grad():
        soft = teacher(X_train).numpy() if teacher is not None else None
    for _ in range(steps):
        loss = F.cross_entropy(model(Tensor(x_all[labelled])), Tensor(y_train.numpy()[labelled]))
        if soft is not None:
            idx = rng.choice(len(x_all), 64, replace=False)
            loss = loss + distillation_loss(model(Tensor(x_all[idx])), Tensor(soft[idx]), T)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


_few = np.random.default_rng(7)
_labelled = np.concatenate([_few.choice(np.flatnonzero(y_train.numpy() == d), 5, replace=False) for d in range(10)])
_alone = accuracy(train_few_labels(make_mlp((32,), seed=5), _labelled))
_taught = accuracy(train_few_labels(make_mlp((32,), seed=5), _labelled, teacher=teacher))
print(f"small 64-32-10 on 50 labels: alone {100 * _alone:.1f}%, with the teacher's soft outputs on all "
      f"1,438 images {100 * _taught:.1f}% (the teacher itself: {100 * rows[0]['accuracy']:.1f}%); "
      + ("no prediction written" if predicted_few_labels_accuracy is None
         else f"you predicted {predicted_few_labels_accuracy}"))

# %% [markdown]
# Expect a gap of several points, often ten: the teacher's outputs on the unlabelled
# images carry most of what its own training taught it, and the soft targets also say how
# alike the digits are. This is how a large model's knowledge is moved into a small one in
# practice (DistilBERT was trained on the teacher's outputs over unlabelled text), and why
# it works best where labels are scarce.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.4))
_sv_trained = np.linalg.svd(teacher[2].weight.numpy(), compute_uv=False)
_sv_random = np.linalg.svd(make_mlp(seed=9)[2].weight.numpy(), compute_uv=False)
ax1.plot(_sv_trained / _sv_trained[0], label="trained layer 2 (256 → 128)")
ax1.plot(_sv_random / _sv_random[0], label="the same layer at initialisation", ls="--")
ax1.axvline(16, color="gray", ls=":", lw=1)
ax1.text(18, 0.85, "rank 16", fontsize=8, color="gray")
ax1.set_xlabel("index i")
ax1.set_ylabel(r"$\sigma_i / \sigma_1$")
ax1.set_title("singular values: training concentrates them")
ax1.legend(fontsize=8)
_labels = [r["model"].replace(" + fine-tune", "\n+ fine-tune").replace(", ", ",\n") for r in rows]
ax2.barh(range(len(rows)), [r["latency_ms"] for r in rows], color="C0")
for _i, r in enumerate(rows):
    ax2.text(r["latency_ms"], _i, f" {100 * r['accuracy']:.1f}%", va="center", fontsize=8)
ax2.set_yticks(range(len(rows)))
ax2.set_yticklabels(_labels, fontsize=7)
ax2.invert_yaxis()
ax2.set_xlabel("forward latency, 359 images (ms)")
ax2.set_xlim(0, 1.25 * max(r["latency_ms"] for r in rows))
ax2.set_title("measured on this machine (test accuracy at each bar)")
fig.tight_layout()
plt.show()

# %% [markdown]
# On the left: a random matrix's spectrum decays slowly (no good low-rank approximation), and
# training typically makes it decay faster, which is what low-rank compression relies on;
# how fast it decays depends on the layer and the training. On the right, the figures of the
# table: the rows that shrank the dense shapes are faster; the masked model is no faster
# than the dense one, and pays for its extra product at every call.

# %% [markdown]
# ### How far can it go? Accuracy against sparsity
#
# The table has two sparsities. The question a practitioner asks first is the whole curve:
# how much can be removed before the accuracy falls, and does *magnitude* matter at all, or
# would any weights do? Below, the teacher is pruned without fine-tuning at sparsities from
# 0 to 98%, three ways: globally by magnitude (your masks), layer by layer by magnitude (the
# same share in each layer), and **at random** (the same share in each layer, a seeded
# random mask through `custom_from_mask`): the baseline that says what magnitude buys.
#
# **Predict first.** At which sparsity does random pruning fall below 50% test accuracy,
# and at which does global magnitude pruning?

# %%
predicted_random_half_accuracy_sparsity = None  # your number: a share in [0, 1]
predicted_magnitude_half_accuracy_sparsity = None  # your number: a share in [0, 1]

# %%
SPARSITIES = [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98]


def pruned_accuracy(how, share, seed=0):
    """The teacher's test accuracy after pruning `share` of its weights `how`, no fine-tune."""
    model = copy_of(teacher)
    if how == "global magnitude":
        global_unstructured(model, _names, share)
    for k, name in enumerate(_names):
        if how == "per-layer magnitude":
            l1_unstructured(model, name, share)
        elif how == "random":
            weight = model[int(name.split(".")[0])].weight.numpy()
            order = np.random.default_rng(seed + k).permutation(weight.size)
            mask = np.ones(weight.size, dtype=weight.dtype)
            mask[order[:int(round(share * weight.size))]] = 0
            custom_from_mask(model, name, mask.reshape(weight.shape))
    return accuracy(model)


curves = {how: [pruned_accuracy(how, q) for q in SPARSITIES]
          for how in ("global magnitude", "per-layer magnitude", "random")}
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for (how, accs), marker in zip(curves.items(), "os^"):
    ax.plot(SPARSITIES, accs, marker + "-", label=how)
ax.axhline(0.1, color="gray", ls=":", label="chance (10 classes)")
ax.set_xlabel("share of the weights removed (no fine-tuning)")
ax.set_ylabel("test accuracy")
ax.set_title("digits MLP: accuracy against sparsity", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()


def half_accuracy_sparsity(accs):
    """The first measured sparsity whose accuracy is below 50%, or None."""
    return next((q for q, a in zip(SPARSITIES, accs) if a < 0.5), None)


for how, accs in curves.items():
    print(f"{how:20s}" + " ".join(f"{a:.2f}" for a in accs) + f"   below 50% from {half_accuracy_sparsity(accs)}")
print("your predictions: random " + str(predicted_random_half_accuracy_sparsity) + ", magnitude "
      + str(predicted_magnitude_half_accuracy_sparsity))

# %% [markdown]
# Expect random pruning to fall early and magnitude pruning to hold on much longer: the
# small weights really do matter least, which is the whole premise of this module, and now
# a measurement rather than a claim. Global ranking usually holds on a little longer than
# the same share per layer, since it takes more from the big, redundant layers. These
# curves have no fine-tuning; with a few epochs of it (the table's 80% row) the knee moves
# further right. Pruning in several rounds, each followed by fine-tuning (iterative
# pruning), moves it further still, and the lottery-ticket experiments go one step beyond:
# rewinding the kept weights to their initial values and retraining.
#
# ### Which layer can lose more? A sensitivity scan
#
# Global ranking lets the magnitudes decide how much each layer loses. A practitioner
# often decides it instead, from a **sensitivity scan**: prune one layer alone, at several
# sparsities, and watch the accuracy. Below, each of the three weight layers of the
# teacher is pruned on its own by magnitude (no fine-tuning) while the other two stay
# dense, at every level of `LEVELS`.

# %%
LEVELS = [0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98]
_dense_accuracy = accuracy(teacher)
scan = {}
for _name in _names:
    scan[_name] = []
    for _q in LEVELS:
        _m = copy_of(teacher)
        l1_unstructured(_m, _name, _q)
        scan[_name].append(accuracy(_m))
layer_sizes = {name: teacher[int(name.split(".")[0])].weight.numel() for name in _names}
fig, ax = plt.subplots(figsize=(6.5, 3.4))
for (_name, _accs), _marker in zip(scan.items(), "os^"):
    ax.plot(LEVELS, _accs, _marker + "-", label=f"layer {_name} alone ({layer_sizes[_name]:,} weights)")
ax.set_xlabel("share of this layer's weights removed (no fine-tuning)")
ax.set_ylabel("test accuracy")
ax.set_title("sensitivity scan of the digits MLP", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
for _name, _accs in scan.items():
    print(f"{_name}: " + " ".join(f"{q:.2f}→{a:.3f}" for q, a in zip(LEVELS, _accs)))

# %% [markdown]
# The layers differ: one holds up almost to the end, others fall early, and the largest is
# not the most fragile. Suppose the model must lose 90% of *all* its weights. Which level
# would you give each layer? Make that choice a function.
#
# Write `allocate_sparsity(drops, sizes, levels, target)`. `drops[name][i]` is the accuracy
# that layer `name` loses when it alone is pruned to `levels[i]`; `sizes[name]` its number
# of weights. Choose one level per layer so that the model as a whole loses at least the
# share `target` of its weights, with the smallest sum of drops: the scan does not tell
# what several pruned layers lose together, so the sum is a **model** of it, and the
# measurement after your check will test that model. Design it before you write it: what
# exactly is being constrained, a share per layer or something else? What makes a choice
# better than another? Could taking first the layer that loses least per weight removed
# ever lead you astray? And how does your work grow with the layers: the check counts
# your function's Python steps for 4 and for 8 layers of four levels (256 and 65,536
# choices) and measures its memory when every layer holds 100 times as many weights.
#
# <details><summary>Hint 1</summary>
#
# "90% of the model's weights" counts weights, not layers: a layer of 1,280 weights at 0%
# and one of 32,768 at 98% are far from "49% on average". How many choices are there for
# three layers and seven levels? For fifty layers?
# </details>
#
# <details><summary>Hint 2</summary>
#
# A choice for the first few layers can be forgotten when another choice for the same
# layers removes at least as many weights and loses no more. What is left to remember
# after each layer?
# </details>
#
# <details><summary>The approach</summary>
#
# This is a small knapsack: each layer offers a few (weights removed, accuracy lost) pairs,
# one of which must be taken, and the total removed has a floor. A rule that takes the
# cheapest step first can overshoot with a cheap small layer and then have to pay for a
# big one anyway; trying every combination is exact but grows as the number of levels to
# the power of the number of layers. Between the two, keep after each layer only the
# combinations that no other combination beats in both respects. A target that no choice
# can reach is an error, not an empty answer.
# </details>

# %% nbgrader={"grade": false, "grade_id": "allocate-sparsity", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def allocate_sparsity(drops, sizes, levels, target):
    """One sparsity level per layer for a whole-model target, chosen from a sensitivity scan.

    Contract: `levels` an increasing list of shares in [0, 1]; `drops` a dict name -> list
    with one number per level (the accuracy the layer loses when pruned alone to that
    level); `sizes` a dict with the same names -> the layer's number of weights; `target` a
    share in [0, 1]. Returns a dict name -> one of `levels` for every name of `drops`, whose
    weights removed, the sum of sizes[name] · level, are at least target · (all the
    weights) (up to a rounding of 1e-9 of that total), and whose sum of drops is the
    smallest any such choice has. Raises ValueError naming the target and the share the
    largest level reaches when no choice reaches the target.
    Why: a per-layer budget from measurements instead of one share for every layer.
    """
    # Idea: what do the layers offer, in weights removed and in accuracy, and which
    # combinations can never be the best?
    ### BEGIN SOLUTION
    names = list(drops)
    total = sum(sizes[name] for name in names)
    need = target * total - 1e-9 * total
    frontier = [(0.0, 0.0, ())]  # (weights removed, sum of drops, levels so far): none beaten in both
    for name in names:
        options = sorted(((removed + sizes[name] * q, lost + drops[name][i], chosen + (q,))
                          for removed, lost, chosen in frontier for i, q in enumerate(levels)),
                         key=lambda option: (-option[0], option[1]))
        frontier, least = [], float("inf")
        for option in options:  # most weights removed first: keep those that also lose less
            if option[1] < least:
                frontier.append(option)
                least = option[1]
    reachable = [option for option in frontier if option[0] >= need]
    if not reachable:
        raise ValueError(f"allocate_sparsity: target {target} cannot be reached: every layer at the largest level "
                         f"removes {max(levels)} of the weights")
    return dict(zip(names, min(reachable, key=lambda option: option[1])[2]))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-allocate-sparsity", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _removed_and_lost(choice, drops, sizes, levels):
    """(share of all the weights removed, sum of drops) of a choice."""
    total = sum(sizes.values())
    removed = sum(sizes[name] * choice[name] for name in sizes) / total
    return removed, sum(drops[name][levels.index(choice[name])] for name in sizes)


def _check_choice(drops, sizes, levels, target, best_loss, case):
    choice = allocate_sparsity(drops, sizes, levels, target)
    check(isinstance(choice, dict) and sorted(choice) == sorted(drops) and all(q in levels for q in choice.values()),
          f"{case}: one of `levels` for every layer", got=choice)
    removed, lost = _removed_and_lost(choice, drops, sizes, levels)
    check(removed >= target - 1e-9, f"{case}: the weights removed reach the target {target} (weights, not layers)",
          got=(choice, f"share of the weights removed {removed:.4f}"))
    assert_close(lost, best_loss, rtol=0, atol=1e-12,
                 what=f"{case}: the sum of drops of {choice}, against the smallest that reaches the target")
    return choice


_lv = [0.0, 0.5, 0.9]
_check_choice({"a": [0.0, 0.01, 0.3], "b": [0.0, 0.02, 0.05]}, {"a": 100, "b": 900}, _lv, 0.8, 0.05,
              "a (100 weights) fragile, b (900) robust, target 0.8")
_check_choice({"a": [0.0, 0.1, 0.5], "b": [0.0, 0.0, 0.0]}, {"a": 900, "b": 100}, [0.0, 0.5, 1.0], 0.5, 0.1,
              "b (100 weights) free to prune, a (900) not, target 0.5: b alone removes too few")
_check_choice({"a": [0.0, 0.6], "b": [0.0, 0.1]}, {"a": 60, "b": 40}, [0.0, 1.0], 0.55, 0.6,
              "levels 0 or 1, a (60 weights) loses 0.6, b (40) loses 0.1, target 0.55: b, the cheap one, is not enough "
              "alone, and taking it first costs a as well")
_check_choice({"a": [0.0, 0.2, 0.3], "b": [0.0, 0.2, 0.3]}, {"a": 100, "b": 100}, [0.0, 0.5, 1.0], 0.5, 0.3,
              "two equal layers, target 0.5 reached exactly by one layer at 1.0 (at least the target, not more)")
_check_choice({"a": [0.0, 0.01, 0.3]}, {"a": 10}, _lv, 0.0, 0.0, "target 0: nothing needs to go")
_six = {f"l{i}": 7 for i in range(6)}
_check_choice({name: [0.0, 0.01, 0.5] for name in _six}, _six, [0.0, 0.35, 1.0], 0.35, 0.06,
              "six layers of 7 weights at level 0.35 remove 0.35 of the weights exactly, but in floats "
              "6 · (7 · 0.35) = 14.699999999999998 < 0.35 · 42 = 14.7 (the contract's rounding of 1e-9)")
assert_raises(ValueError, allocate_sparsity, {"a": [0.0, 0.01, 0.3], "b": [0.0, 0.02, 0.05]}, {"a": 100, "b": 900},
              _lv, 0.95, match="0.95", what="a target above the largest level cannot be reached")


def _made_up_scan(n_layers, n_levels, seed):
    """(drops, sizes, levels) of n_layers made-up layers: drops rising with the level, from 0."""
    r = np.random.default_rng(seed)
    levels = [round(float(q), 2) for q in np.linspace(0.0, 0.9, n_levels)]
    drops = {f"layer{i}": (np.sort(r.random(n_levels)) * r.choice([0.01, 0.1, 0.5]) * (np.arange(n_levels) > 0)).tolist()
             for i in range(n_layers)}
    return drops, {f"layer{i}": int(r.integers(10, 5000)) for i in range(n_layers)}, levels


_steps = [python_steps(allocate_sparsity, *_made_up_scan(_n, 4, _n), 0.5) for _n in (4, 8)]
check(_steps[1] < 40 * _steps[0], "going from 4 to 8 layers (256 to 65,536 choices) multiplies your function's "
      "Python steps by less than 40: trying every choice grows with the choices, not the layers",
      got=f"{_steps[0]:,} steps for 4 layers, {_steps[1]:,} for 8 ({_steps[1] / _steps[0]:.0f}x)", expected="< 40x")
_drops8, _sizes8, _levels8 = _made_up_scan(8, 10, 8)
_peaks = [peak_bytes(allocate_sparsity, _drops8, {n: k * _scale for n, k in _sizes8.items()}, _levels8, 0.5)
          for _scale in (1, 100)]
check(_peaks[1] < 2 * _peaks[0], "8 layers with 100 times as many weights each (the same drops) take less than twice "
      "the memory: the work may follow the layers and their levels, not the weights",
      got=f"{_peaks[0]:,} bytes at most, then {_peaks[1]:,} ({_peaks[1] / _peaks[0]:.1f}x)", expected="< 2x")
### BEGIN HIDDEN TESTS
import itertools as _itertools  # noqa: E402

_rng = np.random.default_rng(16)
for _trial in range(40):
    _n = int(_rng.integers(1, 5))
    _levels = sorted(set(np.round(_rng.uniform(0, 1, int(_rng.integers(2, 5))), 2).tolist()) | {0.0})
    _sizes = {f"l{i}": int(_rng.integers(1, 400)) for i in range(_n)}
    _drops = {name: np.round(np.sort(_rng.uniform(-0.02, 0.5, len(_levels))), 3).tolist() for name in _sizes}
    _target = float(np.round(_rng.uniform(0, max(_levels)), 2))
    _best = min(sum(_drops[name][i] for name, i in zip(_sizes, combo))
                for combo in _itertools.product(range(len(_levels)), repeat=_n)
                if sum(_sizes[name] * _levels[i] for name, i in zip(_sizes, combo)) >= _target * sum(_sizes.values())
                - 1e-9 * sum(_sizes.values()))
    _check_choice(_drops, _sizes, _levels, _target, _best, f"random case {_trial}")
### END HIDDEN TESTS
print("✓ allocate_sparsity")

# %% [markdown]
# Now the model of the sum meets the measurement. For a whole-model target, your choice is
# applied to the teacher (each layer pruned to its level at once, no fine-tuning) and
# compared with the same share in every layer and with global magnitude pruning at the
# same target.
#
# **Predict first.** At a 90% target, which of the three keeps the most accuracy?

# %%
predicted_best_at_90 = None  # your answer: "scan", "same share" or "global"

# %%
_scan_drops = {name: [_dense_accuracy - a for a in accs] for name, accs in scan.items()}
for _target in (0.8, 0.9, 0.95):
    _choice = allocate_sparsity(_scan_drops, layer_sizes, LEVELS, _target)
    _by_scan = copy_of(teacher)
    for _name, _q in _choice.items():
        l1_unstructured(_by_scan, _name, _q)
    _same = copy_of(teacher)
    for _name in _names:
        l1_unstructured(_same, _name, _target)
    _global = copy_of(teacher)
    global_unstructured(_global, _names, _target)
    _lost = sum(_scan_drops[name][LEVELS.index(q)] for name, q in _choice.items())
    print(f"target {_target:.2f}: scan's choice {_choice} (sum of drops {_lost:.3f}) → accuracy "
          f"{accuracy(_by_scan):.3f}; same share everywhere {accuracy(_same):.3f}; global {accuracy(_global):.3f}")
print("your prediction:", predicted_best_at_90)

# %% [markdown]
# <details><summary>What the rows show (open after comparing with your prediction)</summary>
#
# Where each layer's drop is small, the drops nearly add, and the scan's choice beats the
# same share everywhere by giving the robust layer more to lose. Where they are large, they
# compound: the sum of drops underestimates what the layers lose together, and the
# choice can fall behind. Global magnitude pruning, which needs no scan at all, is a strong
# baseline throughout. In practice the scan is a starting point: its choice is pruned,
# fine-tuned, and the scan repeated on the fine-tuned model.
# </details>
#
# ## 8. What PyTorch does
#
# - `torch.nn.utils.prune` (`l1_unstructured`, `random_unstructured`, `ln_structured`,
#   `global_unstructured`, `custom_from_mask`, `remove`, `is_pruned`) is the design of
#   section 3: `weight_orig` Parameter, `weight_mask` buffer, and `weight` recomputed by a
#   forward pre-hook. Our `PrunedModule` wrapper plays the hook, since our `Module` has no
#   hooks; that is why our functions take the model and a dotted name, and why our
#   state-dict keys gain a `module.`. `ln_structured` masks whole rows but does not shrink
#   the layer; physically smaller layers come from tools such as `torch-pruning`, which do
#   the dependency bookkeeping of `prune_neurons` for whole graphs (residual adds,
#   concatenations, normalisation layers).
# - Speed from *unstructured* sparsity needs sparse kernels: `torch.sparse` (COO, CSR)
#   helps only at high sparsity; the **2:4** semi-structured sparsity of recent NVIDIA GPUs
#   (`torch.sparse.to_sparse_semi_structured`: 2 zeros in every 4 weights) gives real speed
#   because the hardware skips the zeros.
# - Distillation has no layer in PyTorch; it is written exactly as here:
#   `F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1), reduction="batchmean",
#   log_target=True)` times the factor you derived (the tests compare ours with it).
# - Low rank: `torch.linalg.svd` and `torch.svd_lowrank` give the factors; LoRA fine-tuning
#   (`peft`) trains a low-rank *update* $B A$ added to a frozen weight — the same two thin
#   layers, used the other way round.
# - `torch.ao.quantization` (module 15) is the other big compression tool; in practice
#   pruning, distillation and quantization are combined.
#
# ## 9. Recap
#
# - A **magnitude mask** zeroes exactly the $k = \operatorname{round}(a n)$ smallest $|w|$;
#   **global** masks rank all layers together, so layers of small weights lose more.
# - A mask survives training only if it is re-applied in every forward pass:
#   `weight = weight_orig * weight_mask` as a graph op makes the pruned weights exactly zero
#   and their gradients exactly zero, whatever momentum or Adam's moments do to
#   `weight_orig`.
# - Unstructured sparsity saves nothing on a dense backend (the masked model is even
#   larger); **structured** pruning (rank rows/filters by L1/L2 norm, cut them and the next
#   layer's inputs) and **low-rank** factorisation (truncated SVD, error
#   $\sqrt{\sum_{i>r}\sigma_i^2}$) give smaller, faster dense layers.
# - **Distillation** trains a small student on the teacher's softened distribution:
#   $c(T)\,\mathrm{KL}(p_T \,\|\, q_T)$, averaged over the batch, with the $c(T)$ you derived
#   so that the gradient does not fade as $T$ grows.
#
# Run `tito test module 16` to check your work.

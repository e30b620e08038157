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
# # Module 07 — Optimizers: turning gradients into progress
#
# Module 06 gave every parameter a `.grad`: the direction in which the loss grows fastest.
# An **optimizer** decides what to do with it: how far to step, whether to remember past
# gradients, whether to scale each coordinate differently, how to shrink weights, and how
# the step size should change over training. In this module you build `tinytorch.optim`:
# the `Optimizer` base class with parameter groups and checkpointable state, `SGD` (with
# momentum, dampening, Nesterov and weight decay), `Adam`, `AdamW`, and the learning-rate
# schedulers that warm up and anneal the step size.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain gradient descent as "walk downhill", and see on a picture why it **zig-zags**
#   on an ill-conditioned loss and how **momentum** and **adaptive scaling** (Adam) fix it;
# - build an `Optimizer` base class with **parameter groups** (per-group options such as a
#   smaller learning rate for some layers), per-parameter **state**, `zero_grad` and a
#   checkpointable `state_dict`;
# - write the exact update rules of PyTorch's `SGD`, `Adam` and `AdamW` (your parameters
#   will equal `torch.optim`'s step by step), including **bias correction** and
#   **decoupled weight decay**;
# - write learning-rate **schedulers**: step decay, cosine annealing, linear warm-up, and a
#   sequence of them (warm-up, then cosine);
# - measure what an optimizer costs: **state memory** (why Adam needs twice the memory of
#   the weights on top of them) and time per step.
#
# ## Prerequisites
#
# Module 01 (Tensor and its in-place ops `add_`, `mul_`, `copy_`, ...), module 03
# (`Parameter`, `Module.parameters()`), module 06 (`.grad`, `no_grad`). Math: gradients and
# partial derivatives; an exponential moving average is explained below.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/optim/optimizers.py` when you run
# `tito export 07` (or `tito test module 07`); `tinytorch.optim` and
# `tinytorch.optim.lr_scheduler` re-export its names, as in PyTorch. Cells with
# `# YOUR CODE HERE` are yours; the **check** cell after each one prints a ✓ or says what is
# wrong. None of the checks need `backward()`: we set `p.grad` by hand (to the analytic
# gradient of a function we know), which isolates the optimizer from the rest of the
# framework.

# %%
#| default_exp optim.optimizers

# %% [markdown]
# ## 1. The idea: walk downhill, but not blindly
#
# Training minimises a loss $L(\theta)$ over the parameters $\theta$. The gradient
# $g = \nabla L(\theta)$ points uphill, so the simplest rule is **gradient descent**:
#
# $$\theta_{t} = \theta_{t-1} - \eta\, g_t,$$
#
# with a **learning rate** $\eta > 0$. Near a minimum, a loss looks like a bowl, a quadratic
# $L(\theta) = \tfrac12 \theta^\top A \theta$, and that is enough to see the central problem.
# Take two coordinates with very different curvatures, $L(x, y) = \tfrac12 (x^2 + 25 y^2)$:
# a long narrow valley. Its gradient is $(x, 25y)$, so one step multiplies $x$ by
# $(1-\eta)$ and $y$ by $(1-25\eta)$.
#
# - The steep direction $y$ diverges unless $|1 - 25\eta| < 1$, i.e. $\eta < 2/25$.
# - With $\eta$ just under that limit, $y$ flips sign every step (a **zig-zag** across the
#   valley) while $x$ shrinks by only $1 - \eta \approx 0.92$ per step: slow progress along
#   the valley floor.
#
# The ratio of the largest to the smallest curvature (here 25) is the **condition number**
# $\kappa$. For plain gradient descent the number of steps to converge grows like $\kappa$,
# and the loss surfaces of neural networks are badly conditioned. The picture below runs
# plain gradient descent (in numpy: nothing to build yet) with a safe and an aggressive
# learning rate.

# %%
import math
import sys
import time
import tracemalloc

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

CURV = np.array([1.0, 25.0])  # curvatures of the valley L(x, y) = (x^2 + 25 y^2) / 2


def valley_loss(x, y):
    return 0.5 * (CURV[0] * x ** 2 + CURV[1] * y ** 2)


def plain_gd(start, lr, steps):
    """Gradient descent on the valley, in numpy; returns the path as an array (steps+1, 2)."""
    path = [np.array(start, dtype=float)]
    for _ in range(steps):
        path.append(path[-1] - lr * CURV * path[-1])
    return np.array(path)


def draw_valley(ax, paths, title):
    xs, ys = np.meshgrid(np.linspace(-5.5, 5.5, 200), np.linspace(-2.2, 2.2, 200))
    ax.contour(xs, ys, valley_loss(xs, ys), levels=np.geomspace(0.05, 60, 12), colors="0.75", linewidths=0.8)
    for label, path in paths.items():
        ax.plot(path[:, 0], path[:, 1], "o-", ms=2.5, lw=1.2, label=label)
    ax.plot(0, 0, "k*", ms=10)
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-5.5, 5.5)
    ax.set_ylim(-2.2, 2.2)
    ax.legend(fontsize=8, loc="lower right")


fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
draw_valley(axes[0], {"lr = 0.01 (safe, slow)": plain_gd((-5, 1.5), 0.01, 30)},
            "plain GD, 30 steps, small learning rate")
draw_valley(axes[1], {"lr = 0.075 (near the limit 2/25)": plain_gd((-5, 1.5), 0.075, 30)},
            "plain GD, 30 steps, large learning rate: zig-zag")
fig.tight_layout()
plt.show()

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# Neither is good. The small step crawls along $x$ (in 30 steps, from −5 to about −3.7).
# The large one zig-zags across the valley, and its progress along $x$, 7.5% of the
# remaining distance per step, is already the best plain gradient descent can do: the
# steep direction caps the learning rate below $2/25$, and the flat direction, with
# curvature 1, then moves by at most that fraction per step. The ratio of the two
# curvatures (25 here, the *condition number*) sets how slow; the loss surfaces of real
# networks have ratios in the thousands. Two ideas fix this, and they are the two
# families of optimizers you will build:
#
# - **Momentum** (SGD with momentum, Nesterov): keep a running sum of past gradients. The
#   zig-zag components alternate in sign and cancel; the consistent component along the
#   valley accumulates, so the effective step grows where the gradient keeps pointing the
#   same way.
# - **Adaptive scaling** (Adam): divide each coordinate's step by a running estimate of
#   that coordinate's gradient magnitude. Steep and flat directions then move at similar
#   speeds, which undoes much of the ill-conditioning.
#
# Section 7 redraws this picture with the optimizers you are about to write.

# %% [markdown]
# ## 2. The Optimizer base class: parameter groups and state
#
# Every optimizer in PyTorch shares one skeleton, `torch.optim.Optimizer`:
#
# ```python
# opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
# for x, y in loader:
#     opt.zero_grad()          # forget the previous batch's gradients
#     loss_fn(model(x), y).backward()
#     opt.step()               # update every parameter in place
# ```
#
# It holds two things.
#
# **`param_groups`**: a list of dicts. Each group has a `"params"` list and its own values
# of every option (`"lr"`, `"momentum"`, ...). You pass either a plain iterable of tensors
# (one group) or a list of dicts, for instance to fine-tune a pretrained body slowly and a
# new head quickly:
#
# ```python
# SGD([{"params": body.parameters(), "lr": 1e-4},
#      {"params": head.parameters()}],           # this group takes the default lr
#     lr=1e-2, momentum=0.9)
# ```
#
# Options a group does not give are filled in from the optimizer's `defaults` (the keyword
# arguments of the constructor). Schedulers (section 6) work by rewriting `group["lr"]`.
#
# **`state`**: a dict from each parameter to its own dict of buffers: SGD's
# `"momentum_buffer"`, Adam's `"step"`, `"exp_avg"` and `"exp_avg_sq"`. Buffers are created
# lazily, at the first `step()` that sees a gradient for that parameter. (Like PyTorch's, it
# is a `defaultdict(dict)`: `opt.state[p]` is `{}` for a parameter without state yet.)
#
# Two things to get right:
#
# - **Identity, not equality.** Our `Tensor.__eq__` is elementwise (as in PyTorch), so
#   `p in some_list` compares values, not objects, and may even raise. "Is this the same
#   parameter?" is a question about objects (dicts and sets keyed by tensors are fine:
#   `Tensor.__hash__` is the identity hash).
# - **Every parameter belongs to exactly one group.** Two groups with the same parameter
#   would update it twice per step with different options; refuse that, like PyTorch.
#
# The provided `__init__` turns `params` into a list of group dicts (with `_as_groups`) and
# calls `add_param_group` for each; the provided `_param_list` turns a group's `"params"`
# into a checked list of leaf tensors. You write three methods:
#
# - **`add_param_group`**: the duplicate rule above, and the options a group leaves out,
#   taken from `defaults`.
# - **`step()`**, the loop every optimizer shares. It calls the subclass's
#   `_update(p, grad, state, group)` once for each parameter that has a gradient, with that
#   parameter's own state dict. Parameters whose `.grad` is `None` (unused in this forward
#   pass, or frozen) are skipped: no update, and their buffers stay as they are. Every PyTorch
#   optimizer can also *maximise* (`maximize=True` in a group), which the loop handles once
#   for all the rules. The updates are in-place changes of tensors that require grad, which
#   autograd refuses while grad mode is on.
# - **`zero_grad`**. After `step()`, the gradients must be cleared, because `backward()`
#   *accumulates* into `.grad` (module 06). There are two ways:
#   - `set_to_none=True` (PyTorch's default since 2.0): no gradient at all. It frees the
#     gradient's memory until the next backward, and the next backward *writes* a fresh
#     gradient instead of adding into zeros (one memory pass saved). It also tells the
#     optimizer "no gradient this time": `step()` skips such parameters.
#   - `set_to_none=False`: keep the tensor and fill it with zeros, for code that holds a
#     reference to `p.grad`.
#
# `state_dict` and `load_state_dict` are part of the class too; they call functions that
# you write in section 5, once there is state worth saving.
#
# First the plumbing of the package file: imports, the public names, and the two provided
# helpers.

# %%
#| export
import bisect
import math
from collections import defaultdict

import numpy as np

from tinytorch._tensor import Tensor, zeros_like
from tinytorch.autograd import no_grad

__all__ = [
    "Optimizer", "SGD", "Adam", "AdamW", "Adadelta",
    "LRScheduler", "StepLR", "CosineAnnealingLR", "LinearLR", "LambdaLR", "SequentialLR",
    "state_nbytes", "optimizer_memory",
]

_SET_ERROR = ("optimizer parameters need to be organized in ordered collections, but the "
              "ordering of tensors in sets will change between runs; please use a list instead")


def _as_groups(params):
    """The constructor's `params` (tensors, or dicts of options) as a list of group dicts."""
    if isinstance(params, Tensor):
        raise TypeError("params argument given to the optimizer should be an iterable of "
                        "Tensors or dicts, but got a Tensor (wrap it in a list: [p])")
    if isinstance(params, set):  # PyTorch accepts a set here; its order is arbitrary
        raise TypeError(_SET_ERROR)
    groups = list(params)
    if len(groups) == 0:
        raise ValueError("optimizer got an empty parameter list")
    return groups if isinstance(groups[0], dict) else [{"params": groups}]


def _param_list(params):
    """A group's "params" (one Tensor, or an ordered iterable of them) as a list of leaf Tensors.

    A set is refused (no stable order, and checkpoints match state to parameters by
    position); so is anything that is not a Tensor, and a non-leaf tensor (a computed
    tensor would be overwritten by the next forward pass). PyTorch's messages.
    """
    if isinstance(params, Tensor):
        return [params]
    if isinstance(params, set):
        raise TypeError(_SET_ERROR)
    params = list(params)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                            f"{type(p).__name__}")
        if not p.is_leaf:
            raise ValueError("can't optimize a non-leaf Tensor")
    return params


def _optimizer_repr(optimizer):
    """PyTorch's repr of an optimizer: each group's options, sorted, without the parameters."""
    lines = [f"{type(optimizer).__name__} ("]
    for i, group in enumerate(optimizer.param_groups):
        lines += [f"Parameter Group {i}"] + [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
    return "\n".join(lines + [")"])


# %% [markdown]
# Now the class. Help for each of your three methods, if you want it:
#
# **`add_param_group`**
#
# <details><summary>Hint 1</summary>
#
# Which built-in gives a number that is the same for the same object and different for two
# objects that are alive at the same time, whatever their values?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Two checks, both before anything is stored: inside the new group (does it name some
# parameter twice?) and against the groups already there. A set of the identities already
# taken answers the second in one question.
# </details>
#
# <details><summary>The approach</summary>
#
# A group is the caller's dict, but what you store must not change when the caller edits
# theirs afterwards. Duplicates are about identity, not value: two tensors holding the same
# numbers are two parameters, and one tensor listed twice (in this group or in another) is
# one parameter updated twice per step. Options the group sets are the group's; the
# optimizer's defaults only fill the gaps.
# </details>
#
# **`step`**
#
# <details><summary>Hint 1</summary>
#
# Maximising L is minimising −L. Which sign change lets every update rule stay written for
# minimisation?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `self.state` is a `defaultdict(dict)`: looking a parameter up gives its state dict,
# creating an empty one the first time. Pass that very dict, so that what `_update` stores
# in it stays there.
# </details>
#
# <details><summary>The approach</summary>
#
# Which parts of a step must autograd record, and which must it not see? The closure is the
# caller's code, which may compute a loss and call backward; the updates are arithmetic on
# parameters that must not become part of the next graph. Where does the sign of a
# maximising group belong, so that no subclass has to know about it, and the user's `.grad`
# is not changed?
# </details>
#
# **`zero_grad`**
#
# <details><summary>Hint 1</summary>
#
# With `set_to_none=False`, who must see the zeros? Someone who kept a reference to the
# gradient tensor itself. So a new tensor of zeros is not enough.
# </details>
#
# <details><summary>The approach</summary>
#
# Two ways to forget a gradient: drop the tensor (the next backward makes a new one), or
# keep the tensor and empty it (something else may hold a reference to it). A gradient that
# is already None has nothing to forget, and zeroing is not something autograd should
# record.
# </details>

# %% nbgrader={"grade": false, "grade_id": "optimizer-base", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Optimizer:
    """Base class of all optimizers: parameter groups, per-parameter state, the step loop.
    SGD, Adam, ... differ only in `_update`, the rule for one parameter (torch.optim.Optimizer)."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = defaultdict(dict)  # parameter -> dict of its buffers ({} until its first step)
        self.param_groups = []          # list of dicts: {"params": [...], "lr": ..., ...}
        for group in _as_groups(params):
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Append a group: a dict with "params" and optional options such as "lr".
        Contract: the caller's dict is not modified; "params" goes through `_param_list`.
        ValueError, and nothing added, when a parameter appears twice in the group or is
        already in another group (the message: it is in more than one parameter group).
        Options the group does not set come from self.defaults; its own values win."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        # Idea: "the same parameter" means the same object, never equal values.
        ### BEGIN SOLUTION
        group = dict(param_group)
        params = _param_list(group["params"])
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError("a parameter group contains the same parameter more than once")
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if not taken.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        group["params"] = params
        self.param_groups.append(group)
        ### END SOLUTION

    def step(self, closure=None):
        """Update, in place, every parameter that has a gradient; returns closure()'s value
        (None without a closure). Contract: a closure runs before any update, as the caller
        would run it (it may compute a loss and call backward). Each parameter with a .grad
        is updated by self._update(p, grad, self.state[p], group), where grad is the
        gradient of the quantity the group minimises (a "maximize" group maximises the
        loss); the updates are not recorded by autograd. A parameter whose .grad is None
        gets no update and no entry in self.state."""
        # Idea: one loop for every optimizer; the rule for one parameter is the subclass's.
        ### BEGIN SOLUTION
        loss = closure() if closure is not None else None
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if group.get("maximize", False) else p.grad
                    self._update(p, grad, self.state[p], group)
        return loss
        ### END SOLUTION

    def zero_grad(self, set_to_none=True):
        """Clear every parameter's .grad. Contract: set_to_none=True: .grad becomes None;
        set_to_none=False: the same gradient tensor, filled with zeros. None stays None."""
        # Idea: the next backward adds into whatever .grad still holds.
        ### BEGIN SOLUTION
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None and set_to_none:
                        p.grad = None
                    elif p.grad is not None:
                        p.grad.zero_()
        ### END SOLUTION

    def _update(self, p, grad, state, group):  # the rule for one parameter, in place
        raise NotImplementedError(f"{type(self).__name__} does not define its update rule")

    def state_dict(self):  # written in section 5
        return _state_dict(self)

    def load_state_dict(self, state_dict):  # written in section 5
        _load_state_dict(self, state_dict)

    def __repr__(self):
        return _optimizer_repr(self)


# %% [markdown]
# To check the base class we need an optimizer with a rule. The simplest one moves each
# parameter against its gradient by `lr`; we define it here, in the notebook only. The check
# also uses `tinytorch.testing`, whose functions print what they got and what they expected
# when a check fails.

# %%
import tinytorch as tt
from tinytorch import tensor
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state


class _PlainDescent(Optimizer):
    def __init__(self, params, lr=0.1, maximize=False):
        super().__init__(params, {"lr": lr, "maximize": maximize})

    def _update(self, p, grad, state, group):
        state["calls"] = state.get("calls", 0) + 1
        p.add_(grad, alpha=-group["lr"])


# %% nbgrader={"grade": true, "grade_id": "test-optimizer-base", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    _a = tensor([1.0, 2.0], requires_grad=True)
    _b = tensor([[3.0]], requires_grad=True)
    _c = tensor(0.5, requires_grad=True)
    _spec = [{"params": [_a]}, {"params": (_b, _c), "lr": 0.5}]
    _opt = _PlainDescent(_spec, lr=0.1)
    # groups: defaults filled in, a group's own option wins, params stored as a list
    assert_equal(len(_opt.param_groups), 2, "number of groups")
    assert_equal(_opt.param_groups[0]["lr"], 0.1, "group 0 takes the default lr")
    assert_equal(_opt.param_groups[1]["lr"], 0.5, "group 1 keeps its own lr")
    assert_equal(_opt.param_groups[1]["maximize"], False, "group 1 gets the default maximize")
    check(isinstance(_opt.param_groups[1]["params"], list), "a group's params are stored as a list",
          got=type(_opt.param_groups[1]["params"]).__name__, expected="list")
    check([p is q for p, q in zip(_opt.param_groups[1]["params"], [_b, _c])] == [True, True],
          "group 1 holds the very tensors _b and _c")
    assert_equal(sorted(_spec[1]), ["lr", "params"], "the caller's dict is not modified")
    # the shared step loop: a parameter without a gradient is skipped and gets no state
    _a.grad = tensor([1.0, -1.0])
    _b.grad = tensor([[2.0]])
    _opt.step()
    assert_close(_a.numpy(), [0.9, 2.1], what="_a after one step (lr 0.1)")
    assert_close(_b.numpy(), [[2.0]], what="_b after one step (lr 0.5 of its group)")
    assert_equal(_c.item(), 0.5, "_c has no gradient: it must not move")
    check(_c not in _opt.state, "_c has no gradient: it must get no state (not even an empty entry)",
          got=f"state entry {_opt.state.get(_c)!r}", expected="no entry")
    _opt.step()
    assert_equal(_opt.state[_a]["calls"], 2, "the state dict passed to _update persists between steps")
    assert_equal(_opt.step(lambda: 42.0), 42.0, "step(closure) returns the closure's value")
    # a real closure recomputes the loss and its gradients: it needs grad mode as the caller had it
    _q = tensor([3.0], requires_grad=True)
    _qopt = _PlainDescent([_q], lr=0.1)

    def _closure():
        _qopt.zero_grad()
        _loss = (_q * _q).sum()
        _loss.backward()
        return _loss

    _loss = _qopt.step(_closure)
    assert_close((_loss.item(), _q.item()), (9.0, 3.0 - 0.1 * 6.0),
                 what="step(closure) where the closure calls backward: (the loss it returned, q after the step)")
    check(tt.is_grad_enabled(), "step() turns grad mode back on afterwards")
    # maximize: the loop negates the gradient
    _m = tensor([0.0], requires_grad=True)
    _m.grad = tensor([2.0])
    _PlainDescent([_m], lr=0.5, maximize=True).step()
    assert_close(_m.numpy(), [1.0], what="maximize=True walks uphill")
    # errors: duplicates are found by identity; equal values are different parameters
    assert_raises(ValueError, _PlainDescent, [{"params": [_a]}, {"params": [_a]}], match="more than one",
                  what="the same tensor in two groups")
    assert_raises(ValueError, _PlainDescent, [_a, _a], what="the same tensor twice in one group")
    _twin = tensor([1.0, 2.0], requires_grad=True)
    _ok = _PlainDescent([{"params": [tensor([1.0, 2.0], requires_grad=True)]}, {"params": [_twin]}])
    check(_ok.param_groups[1]["params"][0] is _twin, "two tensors with equal values are two parameters")
    assert_raises(ValueError, _opt.add_param_group, {"params": [_b]}, match="more than one parameter group",
                  what="add_param_group with a parameter already in a group")
    assert_equal(len(_opt.param_groups), 2, "a refused group is not added")
    _d = tensor([0.0], requires_grad=True)
    _opt.add_param_group({"params": _d, "lr": 0.01})
    check(_opt.param_groups[2]["params"][0] is _d, "a single tensor as params becomes [it]")
    # zero_grad: in place with set_to_none=False, None by default
    _ga = _a.grad
    _opt.zero_grad(set_to_none=False)
    check(_a.grad is _ga, "set_to_none=False keeps the same gradient tensor")
    assert_equal(_ga.numpy(), np.zeros(2), "set_to_none=False fills it with zeros")
    check(_c.grad is None, "a .grad that was None stays None", got=_c.grad)
    _opt.zero_grad()
    check(_a.grad is None and _b.grad is None, "zero_grad() sets every .grad to None",
          got=(_a.grad, _b.grad), expected=(None, None))
print("✓ Optimizer: param groups, step loop, zero_grad; e.g. _a =", _a.numpy())

# %% [markdown]
# ## 3. SGD: momentum, dampening, Nesterov, weight decay
#
# PyTorch's `SGD` is plain gradient descent plus three optional ingredients. With the
# gradient $g_t$ of step $t$, learning rate $\eta$, momentum $\mu$, dampening $\tau$ and
# weight decay $\lambda$, one step is (this is `torch.optim.SGD`'s documented algorithm):
#
# 1. **Weight decay** (L2 regularisation): $g_t \leftarrow g_t + \lambda\, \theta_{t-1}$.
#    This is the gradient of $\tfrac{\lambda}{2}\lVert\theta\rVert^2$ added to the loss: it
#    pulls every weight towards 0 a little each step.
# 2. **Momentum**, if $\mu \neq 0$: a buffer $b$ (a "velocity"),
#    $$b_t = \begin{cases} g_t & t = 1 \text{ (the buffer starts as a copy of the first gradient)} \\ \mu\, b_{t-1} + (1-\tau)\, g_t & t > 1 \end{cases}$$
#    and then the step direction is $b_t$, or with **Nesterov** the direction you derive
#    below.
# 3. **The step**: $\theta_t = \theta_{t-1} - \eta \cdot (\text{direction})$.
#
# **Why momentum helps.** Unroll the buffer: $b_t = g_t + \mu g_{t-1} + \mu^2 g_{t-2} +
# \dots$, a sum of past gradients with geometrically decaying weights. A component that
# keeps its sign (along the valley floor) is amplified up to $1/(1-\mu)$ times (10× for
# $\mu = 0.9$); a component that flips sign every step (the zig-zag) nearly cancels. It is
# a heavy ball rolling downhill: it gathers speed along consistent slopes and its inertia
# damps oscillations.
#
# **Nesterov** looks ahead: it takes the gradient at the point momentum is about to carry
# the parameters to, so that it corrects an overshoot one step earlier. In velocity form
# (Sutskever et al., 2013), with $v = -\eta\, b$ and no dampening:
#
# $$v_t = \mu\, v_{t-1} - \eta\, \nabla f(\theta_{t-1} + \mu\, v_{t-1}), \qquad
#   \theta_t = \theta_{t-1} + v_t .$$
#
# Taken literally, that needs the gradient at a point where the model is not: a second
# forward and backward pass per step. PyTorch keeps a different variable as the
# parameters, the look-ahead point itself, $\varphi_t = \theta_t + \mu\, v_t$. Then the
# gradient the user computes at the parameters, $g_t = \nabla f(\varphi_{t-1})$, is exactly
# the look-ahead gradient. **Derive the step in $\varphi$:** write $\varphi_t - \varphi_{t-1}$
# with $g_t$ and PyTorch's buffer $b_t = \mu\, b_{t-1} + g_t$ only. The direction you find,
# $\varphi_t = \varphi_{t-1} - \eta \cdot (\text{direction})$, is what `nesterov=True` steps
# along; the check compares it with PyTorch's.
#
# **Dampening** $\tau$ scales down the new gradient's contribution to the buffer (rarely
# used; it must be 0 with Nesterov). Note PyTorch's convention: the buffer is *not* an
# average ($1-\mu$ is not applied), so momentum effectively multiplies the learning rate by
# $1/(1-\mu)$ in steady state. (Other libraries and papers write $b_t = \mu b_{t-1} +
# (1-\mu) g_t$; with those, the same `lr` means a 10× smaller step.)
#
# **Your part: `SGD._update(p, grad, state, group)`.** Vectorised per parameter: a few
# whole-tensor operations, no Python loop over elements. The provided `__init__` validates
# the options with PyTorch's messages.
#
# <details><summary>Hint 1</summary>
#
# Which tensors may you change in place? `p` must be (the model holds a reference to this
# very tensor, so rebinding a name changes nothing in the model); the buffer may be (it is
# yours); `grad` must not be: it is `p.grad`, which the user may still read.
# </details>
#
# <details><summary>Hint 2</summary>
#
# On the first step there is no buffer yet. By the formula it is the gradient itself, not
# dampened. Why must it still be a *copy*?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Nesterov and plain momentum differ only in the direction that is stepped along, once the
# buffer has been updated.
# </details>
#
# <details><summary>Hint 4</summary>
#
# For Nesterov's direction: put $\theta = \varphi - \mu v$ into $\theta_t = \theta_{t-1} +
# v_t$, so that $\varphi_t - \varphi_{t-1}$ is a combination of $v_t$ and $v_{t-1}$; replace
# $v_t$ by its update, then every $v$ by $-\eta\, b$, and collect what multiplies $b_t$.
# </details>
#
# <details><summary>The approach</summary>
#
# The options are per group, so they come from `group`. Three tensors are in play and each
# has its rule: the parameter changes in place, the buffer is yours to change, the
# gradient is the user's and never changes (a decayed gradient is a new tensor). The first
# step differs from the others only in where the buffer comes from; plain momentum and
# Nesterov differ only in the direction, once the buffer is up to date.
# </details>

# %% nbgrader={"grade": false, "grade_id": "sgd", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay
    (torch.optim.SGD's update, step for step)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False):
        if lr is None or lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _update(self, p, grad, state, group):
        """One SGD step for parameter `p`, in place (grad is already negated if maximize).

        Contract: follows steps 1-3 above with the options of `group`. With momentum, the
        buffer lives in state["momentum_buffer"], created at the first step. `grad` (which
        is p.grad) is never modified; plain SGD (momentum 0) stores no state.
        """
        # Idea: weight decay joins the gradient; momentum remembers it; then one step.
        ### BEGIN SOLUTION
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.clone()
                state["momentum_buffer"] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            grad = grad + momentum * buf if group["nesterov"] else buf
        p.add_(grad, alpha=-lr)
        ### END SOLUTION


# %% [markdown]
# The check follows the formulas by hand on a single number, with momentum and with
# dampening (where the first buffer differs from a plain running sum), then checks every
# option against PyTorch's result on the same random gradients.

# %% nbgrader={"grade": true, "grade_id": "test-sgd", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    # plain SGD: theta <- theta - lr * g, and no state
    _w = tensor([1.0, -2.0], dtype="float64", requires_grad=True)
    _opt = SGD([_w], lr=0.1)
    _w.grad = tensor([0.5, 1.0], dtype="float64")
    _opt.step()
    assert_close(_w.numpy(), [0.95, -2.1], what="plain SGD, one step")
    check(not _opt.state.get(_w), "plain SGD keeps no state", got=_opt.state.get(_w), expected={})
    # momentum 0.9, dampening 0.5, the same gradient 1 twice, kept in .grad (no zero_grad):
    # buf1 = g1 = 1 (a copy, not dampened), theta = 1 - 0.1 * 1 = 0.9
    # buf2 = 0.9 * 1 + (1 - 0.5) * 1 = 1.4, theta = 0.9 - 0.1 * 1.4 = 0.76
    _w = tensor([1.0], dtype="float64", requires_grad=True)
    _opt = SGD([_w], lr=0.1, momentum=0.9, dampening=0.5)
    _w.grad = tensor([1.0], dtype="float64")
    _opt.step()
    assert_close(_opt.state[_w]["momentum_buffer"].numpy(), [1.0], what="first buffer = the first gradient")
    check(_opt.state[_w]["momentum_buffer"] is not _w.grad, "the first buffer is a copy of the gradient")
    _opt.step()
    assert_close(_opt.state[_w]["momentum_buffer"].numpy(), [1.4], what="buffer after step 2")
    assert_close(_w.numpy(), [0.76], what="theta after two momentum steps")
    _shown = _w.item()
    assert_equal(_w.grad.numpy(), np.array([1.0]), "step() must not modify p.grad")
    # Nesterov, momentum 0.5, lr 0.1, the gradient 1 twice: your derived direction, by hand
    _w = tensor([1.0], dtype="float64", requires_grad=True)
    _opt = SGD([_w], lr=0.1, momentum=0.5, nesterov=True)
    _w.grad = tensor([1.0], dtype="float64")
    _opt.step()
    assert_close(_w.numpy(), [0.85], what="theta after one Nesterov step (momentum 0.5, lr 0.1, gradient 1)")
    _opt.step()
    assert_close(_w.numpy(), [0.675], what="theta after two Nesterov steps (the same gradient again)")
    # every option, 5 steps on random gradients, against torch.optim.SGD's result on the same
    # numbers (recorded with PyTorch 2.13: the check needs no PyTorch)
    _rng = np.random.default_rng(0)
    _grads = [_rng.standard_normal((3, 4)) for _ in range(5)]
    _theta0 = _rng.standard_normal((3, 4))
    for _kw, _torch_result in [
            (dict(momentum=0.9, dampening=0.3, wd=0.1),
             [-0.26689394371571573, -1.102899952431692, 1.6744852544618702, -0.3739585191932705,
              0.6118870211875411, -0.4246934652691076, 1.2405033340697587, 0.8907637555295521,
              0.7403666383795265, -2.0518613838651474, 0.17882828442837892, 0.4575955654668653]),
            (dict(momentum=0.8, nesterov=True, wd=0.05),
             [-0.2728403676151962, -1.1846659278877336, 1.7502788726756178, -0.3136691305309548,
              0.7253263370308042, -0.5378814328061039, 1.323264937687989, 0.8292251811206975,
              0.7123348716908056, -2.2271106591223178, 0.1713789299862911, 0.36286585095322166]),
            (dict(wd=0.2),
             [-0.4102774066936684, -1.159456723801664, 1.663566853854006, -0.40945834399713954,
              0.4499569393851896, -0.3664756056299146, 1.4705394339116404, 1.1114041989844998,
              0.615567241279636, -2.1467990322552053, 0.08820117544889518, 0.54977769499512]),
            (dict(momentum=0.9, wd=0.1, maximize=True),
             [-0.6277447410633333, -1.0913150585325477, 1.5354746946409705, -0.6098693041600948,
              -0.07325724953304213, -0.017064836514030988, 1.739172383624998, 1.6670352949895484,
              0.4544433210629197, -2.004374959241528, -0.08136626414121764, 0.9076833011660126]),
    ]:
        _w = tensor(_theta0, requires_grad=True)
        _opt = SGD([_w], lr=0.05, momentum=_kw.get("momentum", 0), dampening=_kw.get("dampening", 0),
                   weight_decay=_kw["wd"], nesterov=_kw.get("nesterov", False), maximize=_kw.get("maximize", False))
        for _g in _grads:
            _w.grad = tensor(_g)
            _opt.step()
        assert_close(_w.numpy(), np.reshape(_torch_result, (3, 4)), rtol=1e-12, atol=1e-14,
                     what=f"SGD with {_kw} after 5 steps, against torch.optim.SGD")
        assert_equal(_w.grad.numpy(), _grads[-1], f"SGD with {_kw}: step() must not modify p.grad")
    # a parameter without a gradient: no decay, no momentum, nothing
    _u, _v = tensor([1.0], requires_grad=True), tensor([2.0], requires_grad=True)
    _opt = SGD([_u, _v], lr=0.1, momentum=0.9, weight_decay=0.5)
    _u.grad = tensor([1.0])
    _opt.step()
    assert_equal(_v.item(), 2.0, "a parameter whose .grad is None is not decayed")
    check(not _opt.state.get(_v), "a parameter whose .grad is None gets no buffer")
    assert_raises(ValueError, SGD, [_w], lr=0.1, nesterov=True, match="Nesterov",
                  what="nesterov without momentum")
print(f"✓ SGD; e.g. the momentum example ends at theta = {_shown:.4f}")

# %% [markdown]
# ## 4. Adam: adaptive steps with bias correction
#
# Adam (Kingma & Ba, 2015) keeps two exponential moving averages (EMAs) per parameter.
# An EMA with decay $\beta$ is $m_t = \beta m_{t-1} + (1-\beta) x_t$: a running mean over
# roughly the last $1/(1-\beta)$ values. Adam tracks
#
# $$m_t = \beta_1 m_{t-1} + (1-\beta_1)\, g_t \qquad \text{(first moment: the mean gradient, i.e. momentum)}$$
# $$v_t = \beta_2 v_{t-1} + (1-\beta_2)\, g_t^2 \qquad \text{(second moment: the mean squared gradient, elementwise)}$$
#
# and steps each coordinate by its mean gradient divided by its root-mean-square gradient:
#
# $$\theta_t = \theta_{t-1} - \eta\, \frac{\hat m_t}{\sqrt{\hat v_t} + \epsilon},$$
#
# where $\hat m_t$ and $\hat v_t$ are $m_t$ and $v_t$ **bias-corrected**, which you work
# out below.
#
# **Why divide by $\sqrt{v}$?** The ratio $m/\sqrt v$ has no units: scale a coordinate's
# gradients by 1000 and its step does not change. In the narrow valley of section 1, the
# steep coordinate $y$ has large gradients and the flat one $x$ small ones; after the
# division both move by about $\eta$ per step. It is a cheap, diagonal approximation of
# rescaling the problem so that it is well-conditioned. In addition, $|m/\sqrt{v}| \lesssim
# 1$ when gradients are consistent, so $\eta$ bounds the step size: a learning rate in
# *parameter units*.
#
# **Why bias correction?** Both EMAs start at 0, so early on they are biased towards 0:
# after one step $m_1 = (1-\beta_1) g_1 = 0.1\, g_1$. Unroll $m_t$ as section 3 unrolled
# the momentum buffer: it is a weighted sum of $g_1, \dots, g_t$. What is the total of
# those weights (a geometric series), and what must $m_t$ be divided by so that, when
# every gradient is the same $g$, the result is exactly $g$ at every step? The same
# question for $v_t$ gives $\hat v_t$. Without the correction, the first steps of Adam
# would be tiny in $m$ and, worse, the $v$ estimate (with $\beta_2 = 0.999$ it needs ~1000
# steps to warm up) would make them erratic. The check compares your steps with PyTorch's,
# the first one included.
#
# **AMSGrad** (`amsgrad=True`) divides by the running *maximum* of $v_t$ instead of $v_t$,
# so that the effective per-coordinate learning rate never grows; a fix for a convergence
# counter-example, sometimes useful, not the default.
#
# **Weight decay, two ways.** With `weight_decay` $= \lambda$, `Adam` does what SGD does:
# add $\lambda\theta$ to the gradient (L2 regularisation). But in Adam that term then goes
# through the division by $\sqrt{\hat v}$: weights with large gradients are decayed *less*,
# which is not what "shrink every weight" intends. Loshchilov & Hutter (2019) proposed
# **decoupled weight decay**, AdamW: shrink the weights directly, outside the adaptive
# step, $\theta \leftarrow \theta\,(1 - \eta\lambda)$, and leave the gradient alone. This
# generalises better and is the standard for training transformers. In recent PyTorch,
# `AdamW` is literally `Adam` with `decoupled_weight_decay=True`, and that is how we build
# it too: your `Adam._update` handles both.
#
# One step of `torch.optim.Adam` for one parameter, in the order PyTorch computes it, with
# $t$ the parameter's own step count:
#
# 1. $t \leftarrow t + 1$ (so $t = 1$ on the first step);
# 2. weight decay: decoupled (AdamW) $\theta \leftarrow \theta\,(1 - \eta\lambda)$; or L2
#    (Adam) $g \leftarrow g + \lambda\theta$;
# 3. $m \leftarrow \beta_1 m + (1-\beta_1)\, g$ and $v \leftarrow \beta_2 v + (1-\beta_2)\, g^2$;
# 4. with AMSGrad, $v_{max} \leftarrow \max(v_{max}, v)$ elementwise, and $v_{max}$ replaces
#    $v$ in the next line;
# 5. $\theta \leftarrow \theta - \eta\, \hat m / (\sqrt{\hat v} + \epsilon)$ with your
#    bias corrections for step $t$ (note: $\epsilon$ is added *after* the correction of
#    $\sqrt v$, outside the square root).
#
# The state of a parameter, created at its first step: `"step"` (a Python int),
# `"exp_avg"` ($m$) and `"exp_avg_sq"` ($v$), both zeros of the parameter's shape and dtype,
# and `"max_exp_avg_sq"` as well when the group has `amsgrad`.
#
# <details><summary>Hint 1</summary>
#
# How do you know that a parameter is at its first step? Its state dict tells you.
# </details>
#
# <details><summary>Hint 2</summary>
#
# For a constant gradient $g$: $m_1 = (1-\beta_1) g$, $m_2 = (1-\beta_1)(1 + \beta_1) g$,
# ... Which factor in front of $g$ must the correction cancel? And what would it be if $t$
# were still 0 on the first step?
# </details>
#
# <details><summary>Hint 3</summary>
#
# The two kinds of weight decay touch different things: one changes the gradient (a new
# tensor, as in SGD), the other shrinks the parameter itself, in place, before the moments
# see anything.
# </details>
#
# <details><summary>Hint 4</summary>
#
# For AMSGrad, module 01's `maximum` takes the larger of two tensors elementwise (one
# numpy call; a `where` on a comparison is several times slower on large buffers);
# the result must end up *in* the existing `max_exp_avg_sq` buffer (an in-place copy), not
# in a new tensor.
# </details>
#
# <details><summary>The approach</summary>
#
# Everything that persists between steps lives in the state and changes in place; every
# option is the group's, not the optimizer's. The order of the five steps matters where
# one reads what another writes (which decay must happen before the moments see the
# gradient?), and the step count has to be right on the very first step. With AMSGrad the
# running maximum is itself state. Computing the corrections on the scalars ($\eta$ and
# $\sqrt{1-\beta_2^t}$) rather than on whole tensors saves two passes over memory.
# </details>

# %% nbgrader={"grade": false, "grade_id": "adam", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Adam(Optimizer):
    """Adam (and, with decoupled_weight_decay=True, AdamW): torch.optim.Adam's update."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False):
        if lr is None or lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, p, grad, state, group):
        """One Adam/AdamW step for parameter `p`, in place (grad already negated if maximize).

        Contract: steps 1-5 above with the options of `group` ("decoupled_weight_decay"
        picks the kind of decay). State as described above, created lazily; only the state
        buffers and `p` change in place, never `grad`.
        """
        # Idea: step by the bias-corrected mean gradient over its bias-corrected RMS.
        ### BEGIN SOLUTION
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        state["step"] += 1
        step = state["step"]
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * weight_decay)
            else:
                grad = grad + weight_decay * p
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        if group["amsgrad"]:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(max_sq.maximum(exp_avg_sq))
            exp_avg_sq = max_sq
        denom = exp_avg_sq.sqrt() / bias_correction2 ** 0.5 + eps
        p.add_(exp_avg / denom, alpha=-lr / bias_correction1)
        ### END SOLUTION


class AdamW(Adam):
    """Adam with decoupled weight decay, theta *= 1 - lr * weight_decay (torch.optim.AdamW)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=True)


# %% [markdown]
# The check works two cases out by hand (the first step, and a constant gradient, for which
# a correct bias correction gives every step the same size), then compares six steps of
# every option with PyTorch's result on the same random gradients.

# %% nbgrader={"grade": true, "grade_id": "test-adam", "locked": true, "points": 6, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    # the first step moves every coordinate by about lr, whatever the gradient's scale
    _w = tensor([0.0, 0.0, 0.0], dtype="float64", requires_grad=True)
    _opt = Adam([_w], lr=0.01)
    _w.grad = tensor([1e-3, 1.0, -1e3], dtype="float64")
    _opt.step()
    assert_close(_w.numpy(), [-0.01, -0.01, 0.01], rtol=1e-4, what="first Adam step: -lr * sign(g)")
    assert_equal(_opt.state[_w]["step"], 1, "the step count after one step")
    check(type(_opt.state[_w]["step"]) is int, "the step count is a Python int (a checkpoint stores it as one)",
          got=type(_opt.state[_w]["step"]).__name__, expected="int")
    assert_equal(sorted(_opt.state[_w]), ["exp_avg", "exp_avg_sq", "step"], "Adam's state names")
    # a constant gradient: with bias correction every step is exactly lr (eps = 0)
    _w = tensor([0.0], dtype="float64", requires_grad=True)
    _opt = Adam([_w], lr=0.01, eps=0.0)
    for _t in range(1, 4):
        _w.grad = tensor([0.3], dtype="float64")
        _opt.step()
    assert_close(_w.numpy(), [-0.03], rtol=1e-12, what="3 steps with a constant gradient: 3 * lr")
    assert_close(_opt.state[_w]["exp_avg"].numpy(), [0.3 * (1 - 0.9 ** 3)], rtol=1e-12,
                 what="exp_avg after 3 steps (biased towards 0: not corrected in the state)")
    assert_equal(_w.grad.numpy(), np.array([0.3]), "step() must not modify p.grad")
    # six steps and every option against torch.optim's result on the same numbers (recorded
    # with PyTorch 2.13)
    _rng = np.random.default_rng(1)
    _grads = [_rng.standard_normal((2, 5)) * (1 + _i) for _i in range(6)]
    _theta0 = _rng.standard_normal((2, 5))
    for _cls, _kw, _torch_result in [
            (Adam, dict(betas=(0.8, 0.99)),
             [-0.10810252165463928, 0.2697469320295778, -1.0585034280926566, -1.0832121039766707,
              0.21530463231963476, -0.5075887347942989, 0.3984391450634662, 0.8574785729174449,
              -1.678171084050667, 0.12760267362189254]),
            (Adam, dict(eps=1e-2),
             [-0.10623121973969231, 0.2494565779475729, -1.0542049885724345, -1.0768376279149436,
              0.2155542380300637, -0.5110146319515083, 0.4006037744440961, 0.8413841662986962,
              -1.6744200973078824, 0.1367664650000286]),
            (Adam, dict(wd=0.1),
             [-0.1102889149521336, 0.24665341125355583, -1.0443184879980034, -1.0690256585026516,
              0.21351883458819082, -0.5091408003825197, 0.3971636209609444, 0.8295799081135808,
              -1.6477122841525724, 0.12746960178079117]),
            (Adam, dict(amsgrad=True),
             [-0.11077869033679624, 0.24850570350660145, -1.0556223239970233, -1.0762080457715495,
              0.21519134758845374, -0.5124722176945911, 0.4036456767679782, 0.8412067656178058,
              -1.6755744952202305, 0.1344811427995468]),
            (AdamW, dict(wd=0.1),
             [-0.10956100836333314, 0.24251127852369342, -1.0254519621198193, -1.0448477010619546,
              0.20971426595939613, -0.4968929555616554, 0.39379349699369387, 0.8189667018128833,
              -1.6260230850147381, 0.1284992062215979]),
            (AdamW, dict(wd=0.2, amsgrad=True),
             [-0.1083461328620655, 0.23667663607669787, -0.9960232290931057, -1.0142684639221868,
              0.20436612671222418, -0.4816915402131183, 0.38415480168553284, 0.7972442983669324,
              -1.577698764795516, 0.12268078158221091]),
    ]:
        _w = tensor(_theta0, requires_grad=True)
        _opt = _cls([_w], lr=0.05, betas=_kw.get("betas", (0.9, 0.999)), eps=_kw.get("eps", 1e-8),
                    weight_decay=_kw.get("wd", 0.0), amsgrad=_kw.get("amsgrad", False))
        for _g in _grads:
            _w.grad = tensor(_g)
            _opt.step()
        assert_close(_w.numpy(), np.reshape(_torch_result, (2, 5)), rtol=1e-10, atol=1e-12,
                     what=f"{_cls.__name__} with {_kw} after 6 steps, against torch.optim.{_cls.__name__}")
        assert_equal(_w.grad.numpy(), _grads[-1], f"{_cls.__name__} with {_kw}: step() must not modify p.grad")
    check("max_exp_avg_sq" in _opt.state[_w], "amsgrad keeps a max_exp_avg_sq buffer", got=sorted(_opt.state[_w]))
    # AdamW's default weight decay is 0.01, and it shrinks a weight even when its gradient is 0
    _w = tensor([2.0], dtype="float64", requires_grad=True)
    _opt = AdamW([_w], lr=0.1)
    _w.grad = tensor([0.0], dtype="float64")
    _opt.step()
    assert_close(_w.numpy(), [2.0 * (1 - 0.1 * 0.01)], rtol=1e-12, what="AdamW, zero gradient: theta * (1 - lr*wd)")
print(f"✓ Adam, AMSGrad, AdamW; e.g. AdamW shrank 2.0 to {_w.item():.4f}")

# %% [markdown]
# ### L2 versus decoupled weight decay, measured
#
# Give two coordinates the same weight, 1.0, but gradients of very different scales (noise
# of size 10 and of size 0.01 around 0), and run Adam with L2 weight decay and AdamW with
# the same $\lambda$. With Adam + L2, the decay term goes through the adaptive scaling:
# the weight with small gradients, whose "gradient" is now almost only $\lambda\theta$, is
# driven to 0 at full speed (about `lr` per step), while the weight with large gradients
# hardly decays at all, its decay term drowned in a large $\sqrt v$. AdamW shrinks both by
# the same factor $(1 - \eta\lambda)$ per step (dashed line), plus each one's own noise.

# %%
_rng = np.random.default_rng(0)
_traces = {}
for _name, _cls in [("Adam + L2 (weight_decay=0.1)", Adam), ("AdamW (weight_decay=0.1)", AdamW)]:
    _w = tensor([1.0, 1.0], dtype="float64", requires_grad=True)
    _opt = _cls([_w], lr=0.01, weight_decay=0.1)
    _hist = [_w.numpy().copy()]
    for _ in range(300):
        _w.grad = tensor(_rng.standard_normal(2) * np.array([10.0, 0.01]))
        _opt.step()
        _hist.append(_w.numpy().copy())
    _traces[_name] = np.array(_hist)

fig, axes = plt.subplots(1, 2, figsize=(11, 3.2), sharey=True)
for _ax, (_name, _h) in zip(axes, _traces.items()):
    _ax.plot(_h[:, 0], label="weight with large gradients (scale 10)")
    _ax.plot(_h[:, 1], label="weight with small gradients (scale 0.01)")
    _ax.plot((1 - 0.01 * 0.1) ** np.arange(301), "k--", lw=0.8, label="(1 - lr·wd)^t")
    _ax.set_title(_name, fontsize=10)
    _ax.set_xlabel("step")
    _ax.legend(fontsize=8)
axes[0].set_ylabel("weight value")
fig.tight_layout()
plt.show()

# %% [markdown]
# One more adaptive rule, provided because older PyTorch programs still use it: **Adadelta**
# (Zeiler, 2012) keeps Adam's running mean of squared gradients, and instead of a learning
# rate in the parameter's units it scales each step by a running RMS of the *previous
# steps*, so that the step has the parameter's units (the default `lr=1.0` only rescales
# it). Read it as a second example of the `_update` contract: lazily created state, one
# rule per parameter, everything in place.

# %%
#| export
class Adadelta(Optimizer):
    """Adadelta: torch.optim.Adadelta's update (rho, eps, weight_decay, maximize)."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False):
        if lr is None or lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, grad, state, group):
        rho, eps = group["rho"], group["eps"]
        if not state:
            state["step"] = 0
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        state["step"] += 1
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
        delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
        acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
        p.add_(delta, alpha=-group["lr"])

# %% [markdown]
# ## 5. Checkpoints: `state_dict` and `load_state_dict`
#
# Resuming training needs more than the weights: a restarted momentum or Adam state
# changes the run (Adam's first steps after a restart are large again). So an optimizer,
# like a module, has a `state_dict()`. PyTorch's format, which we follow:
#
# ```python
# {"state": {0: {"momentum_buffer": tensor(...)}, 1: {...}, ...},
#  "param_groups": [{"lr": 0.1, "momentum": 0.9, ..., "params": [0, 1]},
#                   {"lr": 0.01, ..., "params": [2]}]}
# ```
#
# Parameters are **not** saved (the model's own `state_dict` has them) and are not referred
# to by name: each parameter is replaced by its **position**, counting through the groups
# in order (0, 1, 2, ...). Loading into a fresh optimizer built over the same parameters
# in the same order maps position $i$ back to the new optimizer's $i$-th parameter. Only
# plain data remains (ints, floats, tuples, tensors), which is what makes the dict easy to
# save in a safe file format (module 08).
#
# Our choices, where PyTorch leaves room:
#
# - `state_dict()` returns a **snapshot**: the state tensors are copied (`clone()`), so a
#   saved dict does not change when training goes on. (PyTorch returns references, relying
#   on `torch.save` to copy; forgetting that is a classic checkpointing bug.)
# - `load_state_dict()` **checks before it changes anything**: the same number of groups,
#   the same number of parameters in each, state only for known positions, and buffers of
#   the parameter's shape; then it copies the buffers (cast to the parameter's dtype) and
#   takes every group option (`lr`, `betas`, ...) from the dict, keeping its own `"params"`.
#   Buffers may come as Tensors or numpy arrays (a checkpoint loader returns arrays).
#
# <details><summary>Hint 1 (state_dict)</summary>
#
# The positions must be the same ones that `load_state_dict` will count on the other side:
# go through the groups in order and, within each, through its parameters in order, giving
# each parameter the next number. A dict from a parameter's identity to its number lets the
# state part look numbers up afterwards.
# </details>
#
# <details><summary>Hint 2 (state_dict)</summary>
#
# "A snapshot" means: after `state_dict()` returns, nothing the optimizer does may change
# the dict, and nothing done to the dict may change the optimizer. Which parts of a group
# and of a state entry are shared objects?
# </details>
#
# <details><summary>Hint 3 (load_state_dict)</summary>
#
# Zipping a saved group's list of numbers with the live group's list of parameters gives
# you the number → parameter map, once the sizes are known to agree.
# </details>
#
# <details><summary>The approach</summary>
#
# A checkpoint cannot hold the parameter objects (they are not the same objects in the next
# process), so parameters become their positions, counted across the groups in order; what
# is saved must not change when training goes on. Loading is the same mapping backwards,
# and, as for module 03's `load_state_dict`, nothing may change until everything has been
# checked: build the new state on the side, then swap it in. The state stays a
# `defaultdict(dict)` so that a parameter with no saved state can still start.
# </details>

# %% nbgrader={"grade": false, "grade_id": "state-dict", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _state_dict(self):
    """Optimizer.state_dict(): {"state": {index: {name: value}}, "param_groups": [{option:
    value, ..., "params": [index, ...]}]}, parameters numbered 0, 1, ... in group order.

    Contract: a snapshot. State tensors are cloned, group dicts and lists are new, so later
    training does not change the returned dict and editing it does not change the optimizer.
    """
    # Idea: a parameter is saved as its position, never as itself.
    ### BEGIN SOLUTION
    index = {}
    groups = []
    for group in self.param_groups:
        packed = {k: v for k, v in group.items() if k != "params"}
        packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
        groups.append(packed)
    state = {}
    for p, buffers in self.state.items():
        state[index[id(p)]] = {k: (v.clone() if isinstance(v, Tensor) else v) for k, v in buffers.items()}
    return {"state": state, "param_groups": groups}
    ### END SOLUTION


def _load_state_dict(self, state_dict):
    """Optimizer.load_state_dict(): restore the state and group options saved by state_dict().

    Contract: ValueError, with the optimizer unchanged, when the number of groups differs
    (the message says the number of parameter groups differs), when a group's size differs
    (it says the group doesn't match the size of the optimizer's group), when the state
    names a position that is no parameter, or when a buffer's shape differs from its
    parameter's (the message names both shapes). Buffers may be Tensors or numpy arrays;
    they are copied into new Tensors of the parameter's dtype. Every group option except
    "params" is taken from the dict; the groups keep their own parameters.
    """
    # Idea: check everything first, then change everything.
    ### BEGIN SOLUTION
    saved_groups = state_dict["param_groups"]
    if len(saved_groups) != len(self.param_groups):
        raise ValueError(f"loaded state dict has a different number of parameter groups "
                         f"({len(saved_groups)}) than the optimizer ({len(self.param_groups)})")
    index_to_param = {}
    for saved, group in zip(saved_groups, self.param_groups):
        if len(saved["params"]) != len(group["params"]):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             f"the size of optimizer's group ({len(saved['params'])} saved, "
                             f"{len(group['params'])} in the optimizer)")
        index_to_param.update(zip(saved["params"], group["params"]))
    new_state = {}
    for index, buffers in state_dict["state"].items():
        if index not in index_to_param:
            raise ValueError(f"loaded state dict has state for parameter {index!r}, which is "
                             f"not in any of its parameter groups")
        p = index_to_param[index]
        restored = {}
        for name, value in buffers.items():
            if isinstance(value, (Tensor, np.ndarray)):
                if tuple(value.shape) != p.shape:
                    raise ValueError(f"loaded state dict: {name!r} of parameter {index} has shape "
                                     f"{tuple(value.shape)}, but the parameter has shape {p.shape}")
                value = Tensor(value, dtype=p.dtype)
            restored[name] = value
        new_state[p] = restored
    self.state = defaultdict(dict, new_state)
    for saved, group in zip(saved_groups, self.param_groups):
        for key, value in saved.items():
            if key != "params":
                group[key] = value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-state-dict", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
def _run(opt, params, grads):
    for g in grads:
        for p, gp in zip(params, g):
            p.grad = tensor(gp)
        opt.step()


with preserved_state():
    _rng = np.random.default_rng(2)
    _shapes = [(3, 2), (2,), ()]
    _start = [_rng.standard_normal(s) for s in _shapes]
    _grads = [[_rng.standard_normal(s) for s in _shapes] for _ in range(8)]
    _make = lambda ps: Adam([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.02}], lr=0.1, amsgrad=True)  # noqa: E731

    _ps = [tensor(x, requires_grad=True) for x in _start]
    _opt = _make(_ps)
    _run(_opt, _ps, _grads[:4])
    _sd = _opt.state_dict()
    assert_equal(sorted(_sd), ["param_groups", "state"], "the two keys of a state dict")
    assert_equal(sorted(_sd["state"]), [0, 1, 2], "state keyed by position")
    assert_equal([g["params"] for g in _sd["param_groups"]], [[0, 1], [2]], "params as positions, in group order")
    assert_equal(_sd["param_groups"][1]["lr"], 0.02, "group options are saved")
    assert_equal(_sd["state"][2]["step"], 4, "the step count is saved")
    check(_sd["state"][0]["exp_avg"] is not _opt.state[_ps[0]]["exp_avg"], "state_dict() clones the state tensors")
    _sd["param_groups"][0]["lr"] = 99.0
    assert_equal(_opt.param_groups[0]["lr"], 0.1, "editing the saved dict must not change the optimizer")
    _sd["param_groups"][0]["lr"] = 0.1
    # a second optimizer on copies of the parameters, loaded from the dict, continues identically
    _qs = [tensor(p.numpy(), requires_grad=True) for p in _ps]
    _opt2 = _make(_qs)
    _opt2.param_groups[1]["lr"] = 123.0
    _opt2.load_state_dict(_sd)
    assert_equal(_opt2.param_groups[1]["lr"], 0.02, "load_state_dict restores the group options")
    check(_opt2.param_groups[1]["params"][0] is _qs[2], "load_state_dict keeps the optimizer's own parameters")
    _p32 = tensor(np.ones(2, np.float32), requires_grad=True)
    _o32 = SGD([_p32], lr=0.1, momentum=0.9)
    _o32.load_state_dict({"state": {0: {"momentum_buffer": np.ones(2)}},   # a float64 array, as numpy saves
                          "param_groups": [{**{k: v for k, v in _o32.param_groups[0].items() if k != "params"},
                                            "params": [0]}]})
    assert_equal(str(_o32.state[_p32]["momentum_buffer"].dtype), "float32",
                 "a loaded buffer takes its parameter's dtype (float64 array, float32 parameter)")
    _run(_opt, _ps, _grads[4:])
    _run(_opt2, _qs, _grads[4:])
    for _i, (_p, _q) in enumerate(zip(_ps, _qs)):
        assert_equal(_q.numpy(), _p.numpy(), f"parameter {_i}: resumed run against the uninterrupted one")
    assert_equal(_sd["state"][0]["step"], 4, "the saved dict must not change when training goes on")
    assert_raises(ValueError, SGD([tensor([1.0], requires_grad=True)]).load_state_dict, _sd,
                  match="number of parameter groups", what="loading 2 groups into an optimizer with 1")
    _bad = _opt.state_dict()
    _bad["state"][0]["step"] = 99   # parameter 0's state is fine and differs from _opt2's ...
    _bad["state"][1]["exp_avg"] = tensor(np.zeros(5))   # ... parameter 1's has the wrong shape
    _bad["param_groups"][0]["lr"] = 42.0
    _step_before = _opt2.state[_qs[0]]["step"]
    assert_raises(ValueError, _opt2.load_state_dict, _bad, match="shape", what="a buffer of the wrong shape")
    assert_equal(_opt2.param_groups[0]["lr"], 0.1, "a refused load changes nothing: the group options")
    assert_equal(_opt2.state[_qs[0]]["step"], _step_before,
                 "a refused load changes nothing: the state of a parameter checked before the bad one")
    # a loaded buffer is the optimizer's own, and a parameter with no saved state can still start
    _a, _b = tensor(np.ones(3), requires_grad=True), tensor(np.ones(2), requires_grad=True)
    _opt3 = SGD([_a, _b], lr=0.1, momentum=0.9)
    _saved = tensor(np.full(3, 2.0))
    _opt3.load_state_dict({"state": {0: {"momentum_buffer": _saved}},
                           "param_groups": [{"lr": 0.1, "momentum": 0.9, "dampening": 0, "weight_decay": 0,
                                             "nesterov": False, "maximize": False, "params": [0, 1]}]})
    _saved.numpy()[:] = -5.0
    assert_equal(_opt3.state[_a]["momentum_buffer"].numpy(), np.full(3, 2.0),
                 "a loaded buffer after the checkpoint's tensor changed (it must be a copy)")
    _b.grad = tensor(np.ones(2))
    _outcome = None
    try:
        _opt3.step()
    except Exception as _e:  # noqa: BLE001 - shown in the check below
        _outcome = f"{type(_e).__name__}: {_e}"
    check(_outcome is None, "after a load, a parameter with no saved state gets a new entry at its first step "
          "(the state stays a dict that makes missing entries)", got=_outcome, expected="no error")
print(f"✓ state_dict / load_state_dict; e.g. {len(_sd['state'])} parameters' state restored")

# %% [markdown]
# ## 6. Learning-rate schedules
#
# A fixed learning rate is a compromise: large steps make fast progress early but, with
# noisy mini-batch gradients, keep bouncing around the minimum; small steps settle but
# crawl. Schedules change $\eta$ over training. The common ones, with $\eta_0$ the base
# (initial) learning rate and $t$ the scheduler's epoch counter `last_epoch`:
#
# | scheduler | $\eta_t$ |
# |---|---|
# | `StepLR(opt, step_size, gamma=0.1)` | $\eta_0\, \gamma^{\lfloor t / \text{step\_size} \rfloor}$ |
# | `CosineAnnealingLR(opt, T_max, eta_min=0)` | $\eta_{min} + (\eta_0 - \eta_{min})\,\frac{1 + \cos(\pi t / T_{max})}{2}$ |
# | `LinearLR(opt, start_factor=1/3, end_factor=1, total_iters=5)` | $\eta_0 \left(s + (e - s)\frac{\min(t, T)}{T}\right)$ |
# | `LambdaLR(opt, lr_lambda)` | $\eta_0 \cdot \text{lr\_lambda}(t)$ |
#
# **Warm-up** (`LinearLR` from a small factor up to 1) matters for Adam and transformers:
# at the start, Adam's $v$ estimate rests on a few gradients and the weights are random, so
# full-size steps can push the model into a bad region from which it never recovers.
# Ramping the learning rate up over the first hundreds or thousands of steps avoids that.
# **Cosine annealing** then decays smoothly to $\eta_{min}$: mostly large steps, and a long
# gentle tail to settle. The standard recipe for training a GPT is warm-up then cosine:
# `SequentialLR(opt, [LinearLR(...), CosineAnnealingLR(...)], milestones=[warmup_steps])`.
#
# How a scheduler works (as in PyTorch):
#
# - it belongs to one optimizer; at construction it records each group's `"initial_lr"`
#   (the base learning rates `base_lrs`) and takes a first step to epoch 0, so the
#   optimizer already has $\eta_0$'s scheduled value (`LinearLR` starts at
#   $\eta_0 \cdot s$);
# - you call `scheduler.step()` after `optimizer.step()`, once per epoch or once per batch
#   as you choose: it increments `last_epoch`, asks `get_lr()` for the new learning rates and
#   writes them into `group["lr"]`; `get_last_lr()` returns them.
#
# We compute every schedule in **closed form** from `base_lrs` and `last_epoch`. PyTorch's
# `get_lr()` is mostly *recursive* instead (the new lr from the group's current lr), which
# lets two schedulers on one optimizer multiply their effects; the values are the same up
# to floating-point rounding.
#
# **Your part:** `LRScheduler.step()` (the mechanics), then the closed forms `get_lr()` of
# `StepLR`, `CosineAnnealingLR`, `LinearLR` and `LambdaLR`, each the table's formula at
# `self.last_epoch`, one value per base learning rate.
#
# <details><summary>Hint 1 (step)</summary>
#
# The constructor calls `step()` once with `last_epoch` at −1, and the optimizer must then
# hold the value of epoch 0. In which order do "advance the counter" and "ask for the
# rates" have to come?
# </details>
#
# <details><summary>The approach (step)</summary>
#
# A step moves the scheduler into its next epoch, and everything afterwards must describe
# that epoch: the counter, the rates the optimizer will use, and the record of them.
# </details>

# %% nbgrader={"grade": false, "grade_id": "lr-scheduler", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class LRScheduler:
    """Base class of learning-rate schedulers (torch.optim.lr_scheduler.LRScheduler)."""

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming a scheduler with last_epoch >= 0")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()  # to epoch last_epoch + 1 (0 for a new scheduler)

    def get_lr(self):
        """The learning rate of every group at epoch self.last_epoch (subclasses define it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define get_lr()")

    def step(self):
        """Advance one epoch and write the new learning rates into the optimizer's groups.

        Contract: afterwards self.last_epoch is one more, every group's "lr" is get_lr()'s
        value for it at that epoch, and self._last_lr (which the provided get_last_lr()
        returns a copy of) is the list of those values.
        """
        # Idea: the counter moves first; the rates are those of the new epoch.
        ### BEGIN SOLUTION
        self.last_epoch += 1
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
        ### END SOLUTION

    def get_last_lr(self):
        """The learning rates the last step() set, one per group (a new list)."""
        return list(self._last_lr)

    def state_dict(self):
        """Everything but the optimizer (and functions, which cannot be saved as data)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


# %% [markdown]
# <details><summary>Hint 1 (StepLR)</summary>
#
# With `step_size = 3`, epochs 0, 1, 2 share one rate and epoch 3 starts the next. Which
# kind of division turns 0, 1, 2, 3, 4, 5, 6 into 0, 0, 0, 1, 1, 1, 2?
# </details>
#
# <details><summary>Hint 2 (CosineAnnealingLR)</summary>
#
# Check your formula at its two ends: at $t = 0$ it must give the base lr, at $t = T_{max}$
# exactly `eta_min`. The cosine covers *half* a period in between.
# </details>
#
# <details><summary>Hint 3 (LinearLR)</summary>
#
# After `total_iters` epochs the factor stops at `end_factor`: the progress fraction must
# never exceed 1.
# </details>
#
# <details><summary>The approach</summary>
#
# A scheduler never reads the optimizer's current rates: each rate is a function of its
# group's base rate and the epoch alone, so that a restarted run gets the same rates. One
# value per group, in the groups' order; `LambdaLR` has one function per group.
# </details>

# %% nbgrader={"grade": false, "grade_id": "schedules", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class StepLR(LRScheduler):
    """Multiply the learning rate by gamma every step_size epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"step_size must be a positive integer, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """Contract: [base_lr * gamma ** (number of whole step_size periods elapsed)]."""
        # Idea: the rate is constant inside a period and drops by gamma at each boundary.
        ### BEGIN SOLUTION
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]
        ### END SOLUTION


class CosineAnnealingLR(LRScheduler):
    """Anneal from the base lr to eta_min along half a cosine over T_max epochs."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        if T_max <= 0:
            raise ValueError(f"T_max must be positive, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """Contract: the table's cosine formula for each base lr. After T_max epochs it keeps
        following the cosine back up, as PyTorch's does."""
        # Idea: a factor that goes from 1 at epoch 0 to 0 at epoch T_max along a cosine.
        ### BEGIN SOLUTION
        factor = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base_lr - self.eta_min) * factor for base_lr in self.base_lrs]
        ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "schedules-linear-lambda", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class LinearLR(LRScheduler):
    """Scale the lr by a factor moving linearly from start_factor to end_factor over
    total_iters epochs, then constant (the usual warm-up)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        if total_iters <= 0:
            raise ValueError(f"total_iters must be positive, got {total_iters!r}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """Contract: [base_lr * factor], the factor start_factor at epoch 0, end_factor from
        epoch total_iters on, linear in between."""
        # Idea: interpolate between the two factors by the fraction of the ramp done.
        ### BEGIN SOLUTION
        progress = min(self.last_epoch, self.total_iters) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * progress
        return [base_lr * factor for base_lr in self.base_lrs]
        ### END SOLUTION


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); one function for all groups or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """Contract: group i's rate is base_lrs[i] * lr_lambdas[i](last_epoch)."""
        # Idea: the user's function gives the factor; the base rate gives the scale.
        ### BEGIN SOLUTION
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]
        ### END SOLUTION


# %% [markdown]
# Checks: each schedule's value at a few epochs, computed from its formula, on an optimizer
# with two groups (so each group must keep its own base rate).

# %% nbgrader={"grade": true, "grade_id": "test-lr-scheduler", "locked": true, "points": 5, "schema_version": 3, "solution": false, "task": false}
def _lrs(make_sched, n, lrs=(0.1,)):
    """Every group's lr after construction and after each of n steps: (n + 1, groups)."""
    ps = [tensor([0.0], requires_grad=True) for _ in lrs]
    opt = SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, lrs)], lr=lrs[0])
    sched = make_sched(opt)
    out = [sched.get_last_lr()]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
        assert_equal([g["lr"] for g in opt.param_groups], out[-1], "step() writes the lr into every group")
    assert_equal(sched.last_epoch, n, f"last_epoch after construction and {n} steps")
    return np.array(out)


with preserved_state():
    _out = _lrs(lambda o: StepLR(o, step_size=3, gamma=0.5), 7)
    assert_close(_out[:, 0], [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025], rtol=1e-12,
                 what="StepLR(step_size=3, gamma=0.5), epochs 0-7")
    _out = _lrs(lambda o: CosineAnnealingLR(o, T_max=4, eta_min=0.02), 6)
    assert_close(_out[:, 0], [0.02 + 0.08 * (1 + math.cos(math.pi * t / 4)) / 2 for t in range(7)], rtol=1e-12,
                 what="CosineAnnealingLR(T_max=4, eta_min=0.02), epochs 0-6")
    assert_close(_out[4, 0], 0.02, rtol=1e-12, what="the cosine reaches eta_min at epoch T_max")
    _out = _lrs(lambda o: LinearLR(o, start_factor=0.25, total_iters=3), 5, lrs=(0.1, 1.0))
    assert_close(_out[:, 1], [0.25, 0.5, 0.75, 1.0, 1.0, 1.0], rtol=1e-12,
                 what="LinearLR(start_factor=0.25, total_iters=3), group with base lr 1, epochs 0-5")
    assert_close(_out[:, 0], _out[:, 1] / 10, rtol=1e-12, what="LinearLR, group with base lr 0.1")
    _out = _lrs(lambda o: LambdaLR(o, [lambda e: 1 / (e + 1), lambda e: 0.5 ** e]), 3, lrs=(0.1, 1.0))
    assert_close(_out[:, 0], [0.1, 0.05, 0.1 / 3, 0.025], rtol=1e-12, what="LambdaLR, group 0: 0.1 / (e + 1)")
    assert_close(_out[:, 1], [1.0, 0.5, 0.25, 0.125], rtol=1e-12, what="LambdaLR, group 1: 0.5 ** e")
print(f"✓ StepLR, CosineAnnealingLR, LinearLR, LambdaLR; e.g. LambdaLR at epoch 3: {_out[-1].tolist()}")

# %% [markdown]
# ### Chaining schedules: warm-up, then cosine
#
# `SequentialLR(optimizer, schedulers, milestones)` hands control from one scheduler to the
# next at the given epochs: with `milestones=[5]`, `schedulers[0]` runs epochs 0-4 and
# `schedulers[1]` takes over at epoch 5, **restarted at its own epoch 0** (so a cosine
# after a warm-up starts from the full base lr, not from where it would be at epoch 5).
#
# The provided constructor checks the arguments, puts the base learning rates back into
# the groups (each sub-scheduler's constructor already stepped the optimizer's lr) and
# restarts `schedulers[0]` at its epoch 0. **Your part: `SequentialLR.step()`.**
#
# <details><summary>Hint 1</summary>
#
# With milestones `[4, 13]`: which scheduler owns epoch 3? Epoch 4? Epoch 13? The count of
# milestones that are at or before the epoch answers it; the standard library's `bisect`
# module counts that in a sorted list.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A scheduler's `step()` first advances its own `last_epoch`. What must its `last_epoch`
# be just before that call, for it to land on its epoch 0?
# </details>
#
# <details><summary>The approach</summary>
#
# The milestones cut your epochs into phases, one per scheduler. Which phase is an epoch in,
# when it is exactly a milestone? A scheduler that takes over must start from its own epoch
# 0, not from the count of the whole run. Your own rates are the active scheduler's.
# </details>

# %% nbgrader={"grade": false, "grade_id": "sequential-lr", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class SequentialLR(LRScheduler):
    """Run schedulers one after another, switching at the milestone epochs."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        schedulers, milestones = list(schedulers), list(milestones)
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, sched in enumerate(schedulers):
            if not isinstance(sched, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] is a {type(sched).__name__}, "
                                f"not a scheduler")
            if sched.optimizer is not optimizer:
                raise ValueError(f"SequentialLR expects all schedulers to belong to the same "
                                 f"optimizer, but schedulers[{i}] has a different one")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR expects one milestone fewer than schedulers, but got "
                             f"{len(schedulers)} schedulers and {len(milestones)} milestones")
        if any(b <= a for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"SequentialLR milestones must be increasing, got {milestones}")
        self.optimizer = optimizer
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        first = schedulers[0]
        first.last_epoch = -1
        first.step()
        self._last_lr = first.get_last_lr()

    def step(self):
        """Advance one epoch, delegating to the scheduler whose phase this epoch is in.

        Contract: schedulers[i] is active from milestones[i-1] on (schedulers[0] from 0); on
        the epoch it takes over it restarts at its own epoch 0. get_last_lr() then returns
        the active scheduler's rates, which are also in the optimizer's groups.
        """
        # Idea: which phase is this epoch in, and is it the phase's first epoch?
        ### BEGIN SOLUTION
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched.last_epoch = -1
        sched.step()
        self._last_lr = sched.get_last_lr()
        ### END SOLUTION

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        for sched, saved in zip(self._schedulers, state_dict.pop("_schedulers")):
            sched.load_state_dict(saved)
        self.__dict__.update(state_dict)


# %% nbgrader={"grade": true, "grade_id": "test-sequential-lr", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _warmup_cosine(opt):
    warm = LinearLR(opt, start_factor=0.1, total_iters=4)
    cos = CosineAnnealingLR(opt, T_max=6, eta_min=0.0)
    return SequentialLR(opt, [warm, cos], milestones=[4])


def _three_phases(opt):
    return SequentialLR(opt, [LinearLR(opt, start_factor=0.5, total_iters=2), StepLR(opt, step_size=2, gamma=0.5),
                              LambdaLR(opt, lambda e: 0.1)], milestones=[2, 5])


with preserved_state():
    _out = _lrs(_warmup_cosine, 10)[:, 0]
    _expect = [0.1 * (0.1 + 0.9 * t / 4) for t in range(4)] + [0.1 * (1 + math.cos(math.pi * t / 6)) / 2
                                                               for t in range(7)]
    assert_close(_out, _expect, rtol=1e-12, what="warm-up 4 epochs, then cosine over 6: epochs 0-10")
    assert_close(_out[4], 0.1, rtol=1e-12, what="the cosine restarts at its epoch 0 (the full base lr)")
    _out = _lrs(_three_phases, 7)[:, 0]
    assert_close(_out, [0.05, 0.075, 0.1, 0.1, 0.05, 0.01, 0.01, 0.01], rtol=1e-12,
                 what="three phases, milestones [2, 5]: epochs 0-7")
print(f"✓ SequentialLR (warm-up then cosine); e.g. epoch 4 restarts at lr {_expect[4]:.3f}")

# %% [markdown]
# Here are the schedules over 100 epochs, with a base learning rate of 0.1:

# %%
_schedules = {
    "StepLR(step_size=30, gamma=0.1)": lambda o: StepLR(o, step_size=30, gamma=0.1),
    "CosineAnnealingLR(T_max=100)": lambda o: CosineAnnealingLR(o, T_max=100),
    "LinearLR(0.01 → 1, 20 iters)": lambda o: LinearLR(o, start_factor=0.01, total_iters=20),
    "LambdaLR(0.97 ** epoch)": lambda o: LambdaLR(o, lambda e: 0.97 ** e),
    "warm-up 10 + cosine 90 (SequentialLR)": lambda o: SequentialLR(
        o, [LinearLR(o, start_factor=0.01, total_iters=10), CosineAnnealingLR(o, T_max=90, eta_min=1e-3)],
        milestones=[10]),
}
fig, ax = plt.subplots(figsize=(9, 3.6))
for _name, _make_sched in _schedules.items():
    ax.plot(_lrs(_make_sched, 100)[:, 0], label=_name)
ax.set_xlabel("epoch (scheduler.step() calls)")
ax.set_ylabel("learning rate")
ax.legend(fontsize=8)
ax.set_title("learning-rate schedules, base lr 0.1")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 7. The optimizers on the valley and on Rosenbrock's banana
#
# Back to the picture of section 1, now with the optimizers you wrote, on the narrow
# valley and on Rosenbrock's function $f(x, y) = (1-x)^2 + 100\,(y - x^2)^2$, a curved,
# flat-bottomed valley with its minimum at $(1, 1)$ — a classic stress test. We compute the
# gradients analytically and assign them to `.grad`; the optimizer cannot tell the
# difference from a backward pass. (Learning rates were picked by hand for each optimizer
# to be roughly the best that stays stable; try others.)

# %%
def valley_grad(xy):
    return CURV * xy


def rosenbrock(x, y):
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def rosenbrock_grad(xy):
    x, y = xy
    return np.array([-2 * (1 - x) - 400 * x * (y - x ** 2), 200 * (y - x ** 2)])


def trajectory(make_opt, grad_fn, start, steps):
    """Run an optimizer on a 2-D function from `start`; returns the path (steps+1, 2)."""
    xy = tensor(np.array(start, dtype=np.float64), requires_grad=True)
    opt = make_opt([xy])
    path = [xy.numpy().copy()]
    for _ in range(steps):
        opt.zero_grad()
        xy.grad = tensor(grad_fn(xy.numpy()))
        opt.step()
        path.append(xy.numpy().copy())
    return np.array(path)


_valley_opts = {
    "SGD lr=0.075": lambda p: SGD(p, lr=0.075),
    "SGD momentum=0.7 lr=0.03": lambda p: SGD(p, lr=0.03, momentum=0.7),
    "Nesterov momentum=0.7 lr=0.03": lambda p: SGD(p, lr=0.03, momentum=0.7, nesterov=True),
    "Adam lr=0.5": lambda p: Adam(p, lr=0.5),
}
_rosen_opts = {
    "SGD lr=1e-3": lambda p: SGD(p, lr=1e-3),
    "SGD momentum=0.9 lr=1e-3": lambda p: SGD(p, lr=1e-3, momentum=0.9),
    "Nesterov momentum=0.9 lr=1e-3": lambda p: SGD(p, lr=1e-3, momentum=0.9, nesterov=True),
    "Adam lr=0.05": lambda p: Adam(p, lr=0.05),
}
fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
draw_valley(axes[0], {k: trajectory(f, valley_grad, (-5, 1.5), 30) for k, f in _valley_opts.items()},
            "narrow valley, 30 steps")
_xs, _ys = np.meshgrid(np.linspace(-2, 2, 300), np.linspace(-1, 3, 300))
axes[1].contour(_xs, _ys, rosenbrock(_xs, _ys), levels=np.geomspace(0.1, 2000, 15), colors="0.75", linewidths=0.8)
_rosen_final = {}
# paths that share the valley's floor overlap: the first is drawn wide and pale beneath the others
_styles = [dict(ls="-", lw=5, alpha=0.35), dict(ls="--", lw=1.6), dict(ls=":", lw=2.2), dict(ls="-", lw=1.2)]
for (_name, _make_opt), _style in zip(_rosen_opts.items(), _styles):
    _path = trajectory(_make_opt, rosenbrock_grad, (-1.5, 2.0), 600)
    _rosen_final[_name] = rosenbrock(*_path[-1])
    (_line,) = axes[1].plot(_path[:, 0], _path[:, 1], **_style, label=f"{_name}: f = {_rosen_final[_name]:.2g}")
    axes[1].plot(*_path[-1], "o", ms=7, mfc="white", mec=_line.get_color(), mew=2)  # where it ends, even if hidden
axes[1].plot(1, 1, "k*", ms=10)
axes[1].set_title("Rosenbrock, 600 steps from (-1.5, 2); circles: where each ends", fontsize=10)
axes[1].legend(fontsize=8, loc="lower right")
fig.tight_layout()
plt.show()

# %% [markdown]
# On the valley, momentum and Nesterov damp the zig-zag and travel along the floor much
# faster than plain SGD at its best learning rate. Adam's first steps are diagonal: it
# rescales both coordinates so that each moves by about `lr` per step, whatever its
# curvature, and reaches the valley floor within three steps; its momentum then carries it
# across the floor (to about half the starting offset on the other side) and past the
# minimum before it spirals in (a smaller `lr` or a schedule, section 6, tames that). On Rosenbrock,
# plain SGD spends its steps creeping along the flat curved floor; momentum accumulates
# speed along it; Adam's per-coordinate scaling copes with the steep walls. None of this is
# a ranking of optimizers in general (on real networks, tuned SGD with momentum is still
# competitive for some vision models), but it shows *why* the ideas work.

# %% [markdown]
# ### On a real network: the digits
#
# The pictures are two-dimensional; a network has thousands of coordinates. Here is a small
# MLP (64 → 32 → 10) on module 05's digits, trained full-batch for 100 steps from the same
# initial weights with four of your optimizers: plain SGD at lr 0.1 and at lr 1.0, SGD
# with momentum 0.9 at lr 0.1, and Adam at lr 0.01. Predict first: which two curves end
# close together, and why? (Think about how far momentum 0.9 carries a constant gradient.)

# %%
predicted_pair = None  # your answer: the names of the two optimizers whose final losses are closest

# %%
from tinytorch.data import Digits
from tinytorch.nn import CrossEntropyLoss, Linear, ReLU, Sequential

_digits = Digits(train=True)
_xd = tensor(_digits.data.numpy().reshape(-1, 64).astype(np.float32))
_yd = _digits.targets


def digits_losses(make_opt, steps=100):
    """Full-batch training losses of a fresh 64-32-10 MLP (seed 0) under one optimizer."""
    tt.manual_seed(0)
    net = Sequential(Linear(64, 32), ReLU(), Linear(32, 10))
    opt, loss_fn, losses = make_opt(net.parameters()), CrossEntropyLoss(), []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(net(_xd), _yd)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


_digit_runs = {
    "SGD lr=0.1": digits_losses(lambda p: SGD(p, lr=0.1)),
    "SGD lr=1.0": digits_losses(lambda p: SGD(p, lr=1.0)),
    "SGD momentum=0.9 lr=0.1": digits_losses(lambda p: SGD(p, lr=0.1, momentum=0.9)),
    "Adam lr=0.01": digits_losses(lambda p: Adam(p, lr=0.01)),
}
fig, ax = plt.subplots(figsize=(7, 3.6))
for (_name, _losses), _ls in zip(_digit_runs.items(), ["-", "--", ":", "-."]):
    ax.semilogy(_losses, _ls, lw=2, label=f"{_name}: {_losses[-1]:.3f}")
ax.set_xlabel("step (full batch of 1,438 digits)")
ax.set_ylabel("training loss")
ax.set_title("a 64-32-10 MLP on the digits, same start", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
_finals = {k: v[-1] for k, v in _digit_runs.items()}
_names = sorted(_finals)
_gap, _pair = min((abs(_finals[a] - _finals[b]), (a, b)) for i, a in enumerate(_names) for b in _names[i + 1:])
print("final losses:", {k: round(v, 4) for k, v in _finals.items()})
print(f"closest pair: {_pair[0]} and {_pair[1]} (gap {_gap:.4f})"
      + ("" if predicted_pair is None else f"; you predicted {predicted_pair}"))

# %% [markdown]
# <details><summary>What the curves say, once you have made your prediction</summary>
#
# Under a constant gradient, momentum's velocity grows to $g/(1-\beta)$: with
# $\beta = 0.9$ each step moves ten times as far as plain SGD's at the same `lr`. On a
# problem this well-conditioned that is most of what momentum does, so SGD with momentum
# at lr 0.1 and plain SGD at lr 1.0 end close together (the velocity takes about
# $1/(1-\beta) = 10$ steps to build up, so momentum starts slower). Look at *how* they get
# there: plain SGD at lr 1.0 jumps up and down, overshooting along the steepest directions,
# while the momentum run is smooth. Same average step, but the velocity averages the
# zig-zag out, which is what the valley of section 1 showed in two dimensions. Adam,
# rescaling every coordinate, goes furthest in 100 steps here. Rerun plain SGD with
# `lr=2.0` and watch the loss stall: a learning rate has a ceiling set by the steepest
# direction, and momentum's averaging is a way past it.
# </details>

# %% [markdown]
# ## 8. Systems look: what an optimizer costs
#
# ### Memory: the state is per parameter
#
# Training holds, for every parameter tensor, the **weights**, the **gradients** (same size)
# and the **optimizer state**, the buffers your `_update` methods create. Below we measure
# them on a three-layer MLP built with module 03's `Linear`:
# `784 → 1024 → 1024 → 10`, float32, weights and biases.
#
# **Predict first.** From what your SGD and Adam store per parameter, how many MiB of state
# does each optimizer hold after its first step on that MLP? (A MiB is 2**20 bytes; count
# the parameters first.) Write your numbers in the next cell; they are not graded.

# %%
predicted_state_mib = {  # your numbers, in MiB: replace each None
    "SGD": None,
    "SGD momentum": None,
    "Adam": None,
    "AdamW amsgrad": None,
}

# %% [markdown]
# To measure, write two small accounting functions:
#
# - `state_nbytes(optimizer)`: the bytes of every Tensor in `optimizer.state`; numbers such
#   as the step count are not counted;
# - `optimizer_memory(optimizer)`: a dict with the bytes of the `"params"` (each parameter of
#   every group once), of the existing `"grads"` (only those that are not `None`), of the
#   `"state"`, and their `"total"`.
#
# <details><summary>Hint 1</summary>
#
# Every Tensor knows its size in bytes (module 01's `nbytes`); `optimizer.state` is a dict
# of dicts.
# </details>
#
# <details><summary>The approach</summary>
#
# Count what the optimizer adds to what the model already costs: the state tensors (not the
# step counts, which are Python numbers), next to the parameters and the gradients that
# exist now.
# </details>

# %% nbgrader={"grade": false, "grade_id": "memory", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def state_nbytes(optimizer):
    """Bytes held by the optimizer's state tensors (momentum buffers, Adam moments, ...).

    Contract: an int; 0 before the first step; non-Tensor entries (the step count) count 0.
    """
    # Idea: the state is a dict of dicts; only its tensors hold memory worth counting.
    ### BEGIN SOLUTION
    return sum(v.nbytes for buffers in optimizer.state.values()
               for v in buffers.values() if isinstance(v, Tensor))
    ### END SOLUTION


def optimizer_memory(optimizer):
    """{"params": bytes, "grads": bytes, "state": bytes, "total": bytes} for the optimizer.

    Contract: ints; "grads" counts only gradients that exist (not None); "total" is the sum.
    """
    # Idea: three kinds of memory per parameter: the weights, their gradient, their state.
    ### BEGIN SOLUTION
    params = [p for group in optimizer.param_groups for p in group["params"]]
    report = {
        "params": sum(p.nbytes for p in params),
        "grads": sum(p.grad.nbytes for p in params if p.grad is not None),
        "state": state_nbytes(optimizer),
    }
    report["total"] = report["params"] + report["grads"] + report["state"]
    return report
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-memory", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    _ps = [tensor(np.ones((10, 20), dtype=np.float32), requires_grad=True), tensor(np.ones(20), requires_grad=True)]
    _pbytes = 10 * 20 * 4 + 20 * 8  # one float32 and one float64 parameter
    for _label, _make_opt, _ratio in [("SGD", lambda ps: SGD(ps, lr=0.1), 0),
                                      ("SGD momentum", lambda ps: SGD(ps, lr=0.1, momentum=0.9), 1),
                                      ("Adam", lambda ps: Adam(ps), 2),
                                      ("Adam amsgrad", lambda ps: Adam(ps, amsgrad=True), 3)]:
        _opt = _make_opt(_ps)
        assert_equal(state_nbytes(_opt), 0, f"{_label}: state before the first step (it is created lazily)")
        for _p in _ps:
            _p.grad = zeros_like(_p)
        _opt.step()
        assert_equal(state_nbytes(_opt), _ratio * _pbytes, f"{_label}: state bytes after one step")
        assert_equal(optimizer_memory(_opt), {"params": _pbytes, "grads": _pbytes, "state": _ratio * _pbytes,
                                             "total": (2 + _ratio) * _pbytes}, f"{_label}: optimizer_memory")
        _opt.zero_grad()
        assert_equal(optimizer_memory(_opt)["grads"], 0, f"{_label}: grads after zero_grad()")
print(f"✓ state_nbytes, optimizer_memory; e.g. AMSGrad state = {state_nbytes(_opt)} bytes for {_pbytes} of weights")

# %% [markdown]
# Now measure. Two independent measurements: the accounting above, and `tracemalloc`, which
# sees every numpy allocation. The memory that is still allocated after the first `step()`
# (and was not before) is the state that the optimizer created; the peak during `step()`
# also includes the temporaries (`grad * grad`, `exp_avg / denom`, ...), which are freed
# once the step returns.

# %%
from tinytorch.nn import Linear, Sequential, ReLU


def make_mlp():
    return Sequential(Linear(784, 1024), ReLU(), Linear(1024, 1024), ReLU(), Linear(1024, 10))


def give_grads(model, seed=0):
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.grad = tensor(rng.standard_normal(p.shape).astype(np.float32))


def show_prediction(predicted, fmt="{:.2f}"):
    return "no prediction" if predicted is None else fmt.format(predicted)


_factories = {
    "SGD": lambda ps: SGD(ps, lr=0.01),
    "SGD momentum": lambda ps: SGD(ps, lr=0.01, momentum=0.9),
    "Adam": lambda ps: Adam(ps, lr=1e-3),
    "AdamW amsgrad": lambda ps: AdamW(ps, lr=1e-3, amsgrad=True),
}
_mem_rows = []
for _name, _factory in _factories.items():
    _model = make_mlp()
    give_grads(_model)
    _opt = _factory(_model.parameters())
    tracemalloc.start()
    _before = tracemalloc.get_traced_memory()[0]
    _opt.step()
    _after, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    _mem_rows.append((_name, optimizer_memory(_opt), _after - _before, _peak - _before))
_n_params = sum(p.numel() for p in make_mlp().parameters())
print(f"MLP with {_n_params:,} float32 parameters = {_n_params * 4 / 2**20:.2f} MiB of weights\n")
print(f"{'optimizer':15s} {'your guess':>11s} {'state (MiB)':>12s} {'state/weights':>14s} "
      f"{'tracemalloc kept':>17s} {'step peak':>10s}")
for _name, _r, _kept, _peak in _mem_rows:
    print(f"{_name:15s} {show_prediction(predicted_state_mib.get(_name)):>11s} {_r['state'] / 2**20:12.2f} "
          f"{_r['state'] / _r['params']:14.2f} {_kept / 2**20:13.2f} MiB {_peak / 2**20:6.2f} MiB")

# %% [markdown]
# The accounting is exact and the same on every machine; `tracemalloc`'s "kept" column
# should agree with it to within a few kilobytes (Python objects besides the arrays). The
# state is 0×, 1×, 2× and 3× the weights:
#
# | optimizer | state per parameter | state bytes / weight bytes |
# |---|---|---|
# | SGD | none | 0 |
# | SGD with momentum | `momentum_buffer` | 1 |
# | Adam / AdamW | `exp_avg`, `exp_avg_sq` (+ an int step) | 2 |
# | Adam with AMSGrad | + `max_exp_avg_sq` | 3 |
#
# If your guess was off, the usual slip is to count the moments but not the parameters
# correctly: the MLP's 1.8 million parameters are 7 MiB in float32, and each buffer is one
# more copy of them. The step's peak is higher still, by the temporaries that our unfused,
# op-by-op update allocates for the largest parameter (a fused kernel computes the whole
# update in registers and needs none); how much higher depends on the order in which
# numpy frees them.
#
# So with $N$ float32 parameters, training with Adam needs about $4N + 4N + 8N = 16N$ bytes
# before counting a single activation: four times the model itself. This is why optimizer
# state is the first thing large-scale training shards across GPUs (ZeRO stage 1), and why
# memory-light optimizers (8-bit Adam, Adafactor's factored second moment) exist. Scaled to
# real models with the same accounting (float32, weights + gradients + Adam state, no
# activations, no mixed precision):

# %%
def human_bytes(n):
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"]:
        if n < 1024 or unit == "TiB":
            return f"{n:7.1f} {unit}"
        n /= 1024


for _name, _n in [("this MLP", _n_params), ("GPT-2 small", 124e6), ("a 7B-parameter LLM", 7e9)]:
    _w = 4 * _n
    print(f"{_name:20s} weights {human_bytes(_w)}  + grads {human_bytes(_w)}  "
          f"+ Adam state {human_bytes(2 * _w)}  = {human_bytes(4 * _w)}")

# %% [markdown]
# ### Time per step
#
# Each update is a handful of whole-tensor operations, each a full pass over memory with
# almost no arithmetic per byte: the optimizer step is **memory-bound**. Plain SGD is one
# scaled add (two numpy passes in our implementation: `alpha * grad`, then the add);
# momentum adds the buffer update; count the whole-tensor operations in your Adam.
#
# **Predict first:** how many times longer than a plain SGD step is an Adam step on the MLP
# above? (Not graded.)

# %%
predicted_adam_over_sgd = None  # your number: Adam step time / SGD step time

# %%
from tinytorch.utils.timing import median_time, time_samples  # after warm-up calls, threads pinned

_opts = {}
for _name, _factory in _factories.items():
    _model = make_mlp()
    give_grads(_model)
    _opts[_name] = _factory(_model.parameters())
# 11 rounds, each timing one step of every optimizer in turn: a busy moment of the machine
# slows all of them alike, and the median of each optimizer's 11 steps ignores it
_samples = {_name: [] for _name in _opts}
for _round in range(11):
    for _name, _opt in _opts.items():
        _samples[_name] += time_samples(_opt.step, repeats=1, warmup=1 if _round == 0 else 0)
_step_times = {_name: float(np.median(_times)) for _name, _times in _samples.items()}
for _name, _opt in _opts.items():
    _traffic = optimizer_memory(_opt)["params"]
    print(f"{_name:15s} {_step_times[_name] * 1e3:7.2f} ms per step   "
          f"(~{_traffic / _step_times[_name] / 1e9:5.2f} GB of weights updated per second)")
print(f"\nAdam / SGD step time: measured {_step_times['Adam'] / _step_times['SGD']:.1f}x, "
      f"your guess {show_prediction(predicted_adam_over_sgd, '{:.1f}x')}")

# %% [markdown]
# Expect Adam to take several times as long as plain SGD, roughly in proportion to the
# number of passes over memory each update makes; the exact ratio depends on this machine's
# memory bandwidth and caches, on how many temporaries numpy allocates, and on what else is
# running (rerun the cell if a figure looks odd). The figure in GB/s is the rate at which
# weights are updated, not the full memory traffic: each pass also reads the gradient and
# the buffers.

# %% [markdown]
# ## 9. How PyTorch does it
#
# - **Same structure.** `torch.optim.Optimizer` has `param_groups`, `state` (a
#   `defaultdict` keyed by parameter), `add_param_group`, `zero_grad(set_to_none=True)`,
#   and `state_dict()` in exactly this format (positions for parameters; PyTorch's dict holds
#   references, not copies). Its `step()` is decorated with `torch.no_grad()`-like logic and
#   gathers, per group, lists of params, grads and buffers, then calls a functional update.
# - **Three implementations of each update.** `foreach=False` is the per-parameter loop we
#   wrote (`_single_tensor_adam`). `foreach=True` (the default on GPUs) uses multi-tensor
#   kernels such as `torch._foreach_mul_(exp_avgs, beta1)`: one launch updates *all*
#   parameters, which matters when a model has hundreds of small tensors and each kernel
#   launch costs microseconds. `fused=True` goes further: one kernel does the whole Adam
#   update (both moments, the bias corrections, the parameter update) reading each value
#   once and writing it once, with no temporaries at all.
# - **Small differences.** PyTorch stores Adam's `step` as a tensor (so that CUDA graphs
#   and `torch.compile` can capture the update); it updates `exp_avg` with `lerp_` (same
#   value, one fused op); and its schedulers are chainable (recursive) where ours use closed
#   forms. `torch.optim.Adam` has `capturable`, `differentiable` and complex-number
#   support that we leave out.
# - **Beyond this module.** `torch.optim` also has Adagrad, RMSprop, Adadelta, NAdam,
#   RAdam, LBFGS (which uses the `closure`); `torch.optim.swa_utils` (weight averaging);
#   schedulers such as `OneCycleLR`, `ReduceLROnPlateau` (driven by a validation metric) and
#   `CosineAnnealingWarmRestarts`. `torch.distributed.optim.ZeroRedundancyOptimizer` and
#   FSDP shard the optimizer state of section 8 across GPUs.
#
# If PyTorch is installed, run the same Adam on the same numbers in both frameworks and
# time PyTorch's three implementations on the same MLP shapes:

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    _rng = np.random.default_rng(0)
    _x0 = _rng.standard_normal((4, 3))
    _ours = tensor(_x0, requires_grad=True)
    _theirs = torch.tensor(_x0, requires_grad=True)
    _o1 = AdamW([_ours], lr=0.01, weight_decay=0.1)
    _o2 = torch.optim.AdamW([_theirs], lr=0.01, weight_decay=0.1)
    for _ in range(20):
        _g = _rng.standard_normal((4, 3))
        _ours.grad, _theirs.grad = tensor(_g), torch.tensor(_g)
        _o1.step()
        _o2.step()
    print(f"AdamW, 20 steps, float64: max |tinytorch - torch| = "
          f"{np.abs(_ours.numpy() - _theirs.detach().numpy()).max():.1e}")
    _tparams = [torch.zeros(p.shape, requires_grad=True) for p in make_mlp().parameters()]
    for _p in _tparams:
        _p.grad = torch.randn(_p.shape)
    for _impl in [dict(foreach=False), dict(foreach=True), dict(fused=True)]:
        try:
            _topt = torch.optim.Adam(_tparams, lr=1e-3, **_impl)
            _t = median_time(_topt.step)
            print(f"torch Adam {str(_impl):17s} {_t * 1e3:7.2f} ms per step")
        except (RuntimeError, ValueError) as exc:  # e.g. fused unsupported on this device
            print(f"torch Adam {_impl}: not available here ({exc})")
    print(f"tinytorch Adam                {_step_times['Adam'] * 1e3:7.2f} ms per step")

# %% [markdown]
# ## 10. Recap
#
# - An **optimizer** owns `param_groups` (parameters plus per-group options filled from
#   `defaults`) and per-parameter `state`; `step()` updates every parameter with a gradient
#   in place under `no_grad()`, `zero_grad()` clears the gradients (to `None` by default).
# - **SGD**: $\theta \leftarrow \theta - \eta g$; **momentum** sums past gradients
#   ($b \leftarrow \mu b + (1-\tau) g$, first buffer $= g$) to cancel zig-zags and speed up
#   consistent directions; **Nesterov** takes the gradient at the look-ahead point, which
#   with the parameters stored there is one more term in the direction; **weight decay** adds
#   $\lambda\theta$ to the gradient.
# - **Adam** divides a bias-corrected EMA of gradients by the square root of a
#   bias-corrected EMA of squared gradients: every coordinate moves by about $\eta$.
#   **AdamW** decays the weights directly, $\theta \leftarrow \theta(1-\eta\lambda)$,
#   instead of through the adaptive scaling.
# - **state_dict** saves state and options with parameters replaced by their positions;
#   loading checks, then restores, so training continues exactly.
# - **Schedulers** set `group["lr"]` from `base_lrs` and `last_epoch`: step decay, cosine
#   annealing, linear warm-up, and sequences of them.
# - **Cost**: state is 0×, 1×, 2× the weights for SGD, momentum, Adam; weights + grads +
#   Adam state is 16 bytes per float32 parameter. The step is memory-bound; PyTorch's
#   foreach and fused kernels cut launches and memory passes.
#
# Run `tito test module 07` to check your work. Next, module 08 puts model, loss, data,
# autograd and optimizer together into a training loop.

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
# # Module 06 — Autograd: gradients for every op, computed backwards
#
# Training a network means asking, millions of times, *"if I nudge each parameter a
# little, how does the loss change?"* — the **gradient** of the loss with respect to every
# parameter. Writing those derivatives by hand for every model would be hopeless. In this
# module you build the machine that computes them automatically: **reverse-mode automatic
# differentiation**, the engine behind `loss.backward()` in PyTorch.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain why **reverse mode** gives the gradient with respect to *all* inputs in one
#   backward pass that costs a small multiple of one forward pass (you will measure it);
# - **derive** backward rules as vector-Jacobian products from the chain rule alone, and
#   write them: arithmetic with **unbroadcasting** (summing a gradient back to the shape
#   of a broadcast input), views, indexing, reductions, matmul, activations and losses;
# - write the **engine**: an iterative topological sort of the graph that module 01 has
#   been recording all along, and a backward loop that visits each node once and
#   accumulates gradients into `.grad`;
# - control the graph's **lifetime**: when it is built, when it is used, when it is freed
#   (`retain_graph`), and how `no_grad()`, `enable_grad()` and `detach()` switch recording;
# - **verify** any gradient with `gradcheck` (float64 central differences) — the tool you
#   will use in every later module that adds an op;
# - **design two ops of your own** in the style of `torch.autograd.Function` (softplus and
#   log-sum-exp): derive the gradient, decide what the node saves for backward
#   (`ctx.save_for_backward`), keep forward *and* backward finite at inputs like 1e4, and
#   prove it right with `gradcheck`;
# - explain why `.grad` **accumulates** and what `zero_grad` is for;
# - **look at** a graph as text and as Graphviz DOT, and measure what it costs in memory
#   and time, and why a Linear layer's weight gradient wants one big matrix product;
# - **train** a small MLP with nothing but your engine and a two-line SGD step;
# - push a direction **forward** through the graph (Jacobian-vector products) and measure
#   when forward mode beats reverse mode.
#
# ## Prerequisites
#
# Module 01 (Tensor and its dispatch point `apply`, which already records a `Node` per op),
# modules 02 and 04 (activations and losses: you write their backward rules here), module
# 03 (`Linear`, used in the experiments). Calculus: derivatives and the chain rule;
# partial derivatives. Matrix notation helps for matmul.
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/autograd/engine.py` when you run
# `tito export 06` (or `tito test module 06`); those of section 17, marked
# `#| export autograd.functional`, become `tinytorch/autograd/functional.py`. Cells with `# YOUR CODE HERE` are yours:
# each stub's docstring is its contract (inputs, output, errors: *what*, never *how*), the
# comment beside it is the one idea it rests on. Think first; if you are stuck, open the
# collapsed hints in the markdown cell just above the stub, one at a time ("The approach"
# is the last and fullest). The check cell after each stub prints what it got and what it
# expected.
#
# **You derive the rules.** No backward formula is printed before you need it. Where a
# rule is the point, the prose gives what a derivation needs (the definition of the op,
# the chain rule, a worked example of a *different* op) and the check compares your rule
# with the definition of the derivative: numerical differentiation, then `gradcheck`.
# A summary table of the answers follows each group of exercises, folded: open it to
# compare once your check passes. Keep paper and pencil at hand.

# %%
#| default_exp autograd.engine

# %% [markdown]
# ## 1. The idea: the chain rule, run backwards
#
# A computation is a chain of small ops. Take a one-neuron "model" with loss
#
# $$L = (w x + b - y)^2 .$$
#
# Name the intermediate results: $z = w x$, $u = z + b$, $d = u - y$, $L = d^2$. Each op
# knows its own local derivative ($\partial L/\partial d = 2d$, $\partial d/\partial u = 1$,
# $\partial u / \partial z = 1$, $\partial z / \partial w = x$, ...), and the **chain rule**
# multiplies them along the path from $L$ back to each input:
#
# $$\frac{\partial L}{\partial w} = \frac{\partial L}{\partial d}\,\frac{\partial d}{\partial u}\,
# \frac{\partial u}{\partial z}\,\frac{\partial z}{\partial w} = 2d \cdot 1 \cdot 1 \cdot x .$$
#
# **Which end to start from?** Multiplying from the *input* end (forward mode) gives the
# derivative of everything with respect to *one* input per pass: a model with a million
# parameters would need a million passes. Multiplying from the *output* end (**reverse
# mode**) starts with $\partial L / \partial L = 1$ and pushes one number per tensor — "how
# much does $L$ change when this tensor changes" — back through the ops. One backward pass
# gives $\partial L/\partial(\text{every input})$ at once. Because a loss is a single number
# and the parameters are many, deep learning always uses reverse mode.
#
# **Vector-Jacobian products.** For tensors, an op $y = f(x)$ has a Jacobian
# $J = \partial y / \partial x$ (size of y × size of x — for a 1000×1000 matmul that would be
# $10^{12}$ numbers). Backward never builds it. Given the **upstream gradient**
# $\bar y = \partial L/\partial y$ (same shape as $y$), each op computes only
#
# $$\bar x = \frac{\partial L}{\partial x} = \bar y^{\top} J ,$$
#
# the **vector-Jacobian product** (VJP). Written out, $\bar x_i = \sum_j \bar y_j\,
# \partial y_j / \partial x_i$: every output element that $x_i$ influenced sends back its
# upstream gradient times its local slope. For the ops of a network this sum collapses to a
# formula no bigger than the forward op itself — you will derive those formulas, op by op,
# from section 6 on. That is why a backward pass costs only a small multiple of a forward
# pass, for *all* the gradients at once; which multiple, you predict and measure in
# section 15.
#
# In the picture, the black number under each box is its forward value for $w=2, x=3,
# b=1, y=5$, and the red number above each box is the gradient $\partial L/\partial(\text{that
# value})$ that backward computes, working from right to left. The picture gives $x$ its
# gradient too; in section 2's code $x$ is data (it does not require grad), and backward
# computes nothing for it.

# %%
import gc
import sys
import time
import tracemalloc

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch


def draw_graph_picture(ax):
    """The graph of L = (w*x + b - y)**2 with forward values (black) and gradients (red)."""
    boxes = {  # name: (x, y, label, forward value, gradient)
        "w": (0, 3.5, "w", 2, 12), "x": (0, 1.8, "x", 3, 8), "b": (2, 0.8, "b", 1, 4),
        "y": (4, 0.8, "y", 5, -4), "mul": (2, 2.5, "mul", 6, 4), "add": (4, 2.5, "add", 7, 4),
        "sub": (6, 2.5, "sub", 2, 4), "pow": (8, 2.5, "pow 2", 4, 1),
    }
    edges = [("w", "mul"), ("x", "mul"), ("mul", "add"), ("b", "add"), ("add", "sub"),
             ("y", "sub"), ("sub", "pow")]
    for name, (x, y, label, value, grad) in boxes.items():
        leaf = name in "wxby"
        ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.3), 0.9, 0.6, boxstyle="round,pad=0.05",
                                    facecolor="lightblue" if leaf else "lightgrey", edgecolor="black"))
        ax.text(x, y + 0.05, label, ha="center", va="center", fontsize=11, weight="bold")
        ax.text(x, y - 0.55, f"value {value}", ha="center", fontsize=9)
        ax.text(x, y + 0.45, f"∂L/∂· = {grad}", ha="center", fontsize=9, color="crimson")
    for src, dst in edges:
        (x0, y0), (x1, y1) = boxes[src][:2], boxes[dst][:2]
        ax.annotate("", xy=(x1 - 0.5, y1), xytext=(x0 + 0.5, y0),
                    arrowprops=dict(arrowstyle="->", color="black"))
    ax.text(8.7, 2.5, "L = 4", fontsize=11, va="center")
    ax.set_xlim(-0.8, 9.6)
    ax.set_ylim(0, 4.3)
    ax.axis("off")
    ax.set_title("forward: values flow left to right; backward: gradients flow right to left",
                 fontsize=10)


fig, ax = plt.subplots(figsize=(9, 3.6))
draw_graph_picture(ax)
fig.tight_layout()
plt.show()

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# Follow one red number: $\partial L/\partial d = 2d = 4$ leaves `pow`. Every other red
# number is that 4 times one local derivative, multiplied along the way back. Before you go
# on, check two of them with the chain rule on paper: why does `y` get $-4$, and why does
# `mul` send $12$ to $w$ but $8$ to $x$? Every op needed only its own inputs (or output) and
# the gradient arriving from the right. That local recipe is a **backward rule**; you will
# derive and write one per op.
#
# ## 2. When the graph is built: module 01 has been recording it
#
# You do not need to change module 01 at all. Every op goes through its dispatch point
# `apply(op, forward, *inputs, **attrs)`, and when grad mode is on and some input
# `requires_grad`, `apply` attaches to the output tensor a `Node(op, inputs, attrs, output)`
# as its `grad_fn`. So the graph is built **during the forward pass, one node per op, at
# the moment the op runs**. Each node links to its input tensors, whose own `grad_fn`s link
# further back: following `grad_fn` → `inputs` → `grad_fn` ... from the loss reaches every
# op that contributed to it. Tensors created by you (not by an op) have no `grad_fn`: they
# are the **leaves**, and the ones with `requires_grad=True` (the parameters) are where
# gradients end up, in `.grad`.

# %%
import tinytorch as tt
from tinytorch import Tensor
from tinytorch.testing import (assert_close, assert_equal, assert_raises, check, equality_calls, one_gemm_problems,
                               outcome, peak_bytes, preserved_state, spied)

w = tt.tensor(2.0, requires_grad=True)
x = tt.tensor(3.0)
b = tt.tensor(1.0, requires_grad=True)
loss = (w * x + b - 5.0) ** 2
node = loss.grad_fn
print("loss:", loss)
print("loss.grad_fn:", node, "| op:", node.op, "| attrs:", node.attrs,
      "| saved output:", node.output)
print("its inputs:", node.inputs)
print("one step back:", node.inputs[0].grad_fn, "-> inputs", node.inputs[0].grad_fn.inputs)
print("w is a leaf:", w.is_leaf, "| loss is a leaf:", loss.is_leaf, "| x requires grad:", x.requires_grad)

# %% [markdown]
# Note what each node keeps alive: its **inputs** (tensors, so their memory), its
# **attrs** (for example index arrays) and its **output** array. These are what backward
# rules read; PyTorch calls them *saved tensors*. They are also why a graph costs memory,
# and why the engine frees them as soon as backward has used them (section 14).
#
# ## 3. Grad mode: `no_grad()` and `enable_grad()`
#
# Recording is not always wanted. Evaluating a model, or updating its parameters in an
# optimizer step (`w -= lr * w.grad`), must not add nodes to any graph: it would waste memory
# and, worse, make the update part of the next backward pass. Module 01 has a global switch,
# `set_grad_enabled(mode)` / `is_grad_enabled()`. PyTorch wraps it in two objects that work
# both as **context managers** and as **decorators**:
#
# ```python
# with tt.no_grad():          # nothing inside is recorded
#     w -= lr * w.grad
#
# @tt.no_grad()               # the whole function runs without recording
# def evaluate(model, x): ...
# ```
#
# `enable_grad()` does the opposite (useful inside a `no_grad` region). Both must **restore
# the previous mode** on exit — not just switch it back on — so that they nest:
# `with no_grad(): with enable_grad(): ...` leaves grad mode off after the inner block.
# Nesting goes further than that: the *same* context object may be entered again before it
# has exited (`c = no_grad()`, then `with c: with c: ...`), and each exit must still restore
# the mode of its own entry. `__exit__` runs even when the block raises, which is what
# makes a context manager safer than two calls.
#
# Write `__enter__` and `__exit__` of the base class `_GradMode`; `no_grad` and
# `enable_grad` only differ in the class attribute `mode` they switch to. The decorator
# form is provided: it runs the function inside a fresh context.
#
# <details><summary>Hint 1</summary>
#
# What must `__exit__` know that `__enter__` saw? Where can `__enter__` leave it, given that
# the same object may be entered again before it exits?
# </details>
#
# <details><summary>Hint 2</summary>
#
# In `with c: with c: ...`, the inner `__enter__` runs before the outer `__exit__`. If every
# entry left the mode it found in the same single place, what would the outer exit find
# there? Which structure gives each exit the value of its own entry, in reverse order?
# </details>
#
# <details><summary>The approach</summary>
#
# A context manager is two moments, and the only thing that has to travel from the first
# to the second is the mode that was on before. Follow that value through `with c: with
# c: ...` and ask where it must live so that each exit finds the value of its own entry,
# however deep the nesting (one attribute would not do). The rest is Python's
# protocol: what `__enter__` returns is what `as` binds, and what `__exit__` returns tells
# Python whether the exception (if any) was dealt with — here nothing was.
# </details>

# %%
#| export
"""Autograd (module 06): backward rules for every op of modules 01-04, the engine that
walks the graph recorded by module 01's `apply`, gradcheck, and a graph visualiser."""
import functools

import numpy as np

from tinytorch._tensor import Tensor, is_grad_enabled, set_grad_enabled
from tinytorch._tensor import apply as _apply
from tinytorch._tensor import _DISPATCH_MODES, _DEVICES_IN_USE, _device_rule, dispatch
from tinytorch._tensor import _FP_ERRORS, _FP_IGNORED

__all__ = [
    "no_grad", "enable_grad", "BACKWARD_RULES", "backward_rule", "call_rule", "unbroadcast",
    "next_nodes", "topological_order", "backward", "grad", "numerical_grad", "gradcheck",
    "GradcheckError", "format_graph", "print_graph", "to_dot", "free_node", "linear_weight_grad",
    "Function", "FunctionCtx", "Softplus", "LogSumExp", "logsumexp",
]


# %% nbgrader={"grade": false, "grade_id": "grad-mode", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class _GradMode:
    """Base of no_grad / enable_grad: sets grad mode to `mode` inside a `with` block or a
    decorated function, and restores the previous mode afterwards."""

    mode = True

    def __new__(cls, func=None):
        self = super().__new__(cls)
        self._saved = None  # yours: whatever __enter__ must leave for its __exit__
        if callable(func):  # used bare, as @no_grad instead of @no_grad()
            return self(func)
        return self

    def __enter__(self):
        """Switch grad mode to `self.mode`, remembering the mode that was on.

        Contract: returns self, the context object (so `with no_grad() as c` binds c to
        it). Afterwards is_grad_enabled() == self.mode, and the matching __exit__ can
        restore the mode that was on at this entry, also when the same object is entered
        again (nested) before it exits: `with c: with c: ...` restores, at each exit, the
        mode its own entry found.
        """
        # Idea: restoring later needs what is on now: remember it before you switch.
        ### BEGIN SOLUTION
        if self._saved is None:
            self._saved = []
        self._saved.append(is_grad_enabled())
        set_grad_enabled(self.mode)
        return self
        ### END SOLUTION

    def __exit__(self, exc_type, exc, tb):
        """Restore the grad mode that was on before the matching __enter__.

        Contract: runs also when the block raised; returns False, so that an exception
        raised inside the block propagates to the caller (never swallowed). Afterwards grad
        mode is what it was before the matching __enter__, which is not necessarily "on".
        """
        # Idea: restore, do not reset: a no_grad inside a no_grad must leave grad mode off.
        ### BEGIN SOLUTION
        set_grad_enabled(self._saved.pop())
        return False
        ### END SOLUTION

    # Provided from here on (not stubs): the decorator form, and the two context managers.
    def __call__(self, func):
        """Decorator form: run func inside a fresh context of this kind."""
        cls = type(self)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with cls():
                return func(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Context manager and decorator: operations inside record no graph (torch.no_grad)."""

    mode = False


class enable_grad(_GradMode):
    """Context manager and decorator: recording on, even inside no_grad (torch.enable_grad)."""

    mode = True


# %% nbgrader={"grade": true, "grade_id": "test-grad-mode", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():  # whatever fails below, grad mode is back on for the next cells
    _w = Tensor([1.0, 2.0], requires_grad=True)
    set_grad_enabled(True)

    def _nested():
        modes, made = [], []
        with no_grad():
            made.append(_w * 2)
            modes.append(is_grad_enabled())
            with enable_grad():
                modes.append(is_grad_enabled())
                made.append(_w * 2)
            modes.append(is_grad_enabled())
            with no_grad():  # no_grad inside no_grad: exiting must leave the mode OFF
                pass
            modes.append(is_grad_enabled())
        modes.append(is_grad_enabled())
        return modes, made

    _got = outcome(_nested)  # an exception raised by your code becomes the "got" below
    _modes, _made = _got if isinstance(_got, tuple) else (_got, [None, None])
    check(_modes == [False, True, False, False, True],
          "grad mode inside no_grad, inside enable_grad, after it, after a nested no_grad, at the end",
          got=_modes, expected=[False, True, False, False, True])
    check(_made[0].grad_fn is None and not _made[0].requires_grad, "no_grad records nothing", got=_made[0].grad_fn)
    check(_made[1].grad_fn is not None, "enable_grad inside no_grad records a node", got=_made[1].grad_fn)
    set_grad_enabled(True)

    def _entered_twice():
        ctx = no_grad()
        with ctx:  # one object entered twice (nested) before it exits
            with ctx:
                pass
            inner = is_grad_enabled()
        return inner, is_grad_enabled()

    _got = outcome(_entered_twice)
    check(_got == (False, True),
          "the same no_grad object entered twice, nested: grad mode after the inner exit, then after the "
          "outer one (the inner entry must not overwrite what the outer entry remembered)",
          got=_got, expected=(False, True))
    set_grad_enabled(True)

    def _enable_inside_off():
        set_grad_enabled(False)  # enable_grad must restore OFF, not "switch off" or "leave on"
        with enable_grad():
            pass
        return is_grad_enabled()

    _got = outcome(_enable_inside_off)
    set_grad_enabled(True)
    check(_got is False, "grad mode after an enable_grad() block entered with grad mode off: restored, so off",
          got=_got, expected=False)

    @no_grad()
    def _double(t):
        return t * 2

    check(_double(_w).grad_fn is None and is_grad_enabled(),
          "a @no_grad() function records nothing and leaves grad mode on afterwards")
    for _kind in (no_grad, enable_grad):
        _ctx = _kind()

        def _bind():
            with _ctx as bound:
                pass
            return bound

        _bound = outcome(_bind)
        check(_bound is _ctx, f"what `with {_kind.__name__}() as c` binds to c: the context object",
              got=_bound, expected=_ctx)
    for _kind, _start in ((no_grad, True), (enable_grad, False)):
        set_grad_enabled(_start)
        _reached = "nothing: the exception was swallowed"
        try:
            with _kind():
                raise KeyError("raised inside the block")
        except KeyError:
            _reached = "KeyError"
        except Exception as _exc:  # your __exit__ raised something else instead
            _reached = f"{type(_exc).__name__}: {_exc}"
        _after = is_grad_enabled()
        set_grad_enabled(True)
        assert_equal(_reached, "KeyError", f"what reaches the caller when a {_kind.__name__}() block raises KeyError")
        assert_equal(_after, _start, f"grad mode after a {_kind.__name__}() block that raised")
print("✓ no_grad / enable_grad: modes seen", _modes, "| `with ... as c` gives", type(_bound).__name__)

# %% [markdown]
# ## 4. Backward rules: the contract
#
# A backward rule is a function `rule(node, grad)`:
#
# - `node` is the recorded `Node`: `node.inputs` (the input Tensors; `x.numpy()` gives their
#   values), `node.attrs` (the op's parameters, exactly as listed in module 01's table, e.g.
#   `dim` and `keepdim` for `sum`) and `node.output` (the forward result, a numpy array);
# - `grad` is the upstream gradient $\partial L / \partial(\text{output})$, a numpy array of
#   the output's shape. **Never write into it** (other rules may hold the same array);
# - it returns a tuple with **one entry per input**: the gradient for that input (a numpy
#   array of that input's shape) or `None` when there is none.
#
# Rules live in one registry, `BACKWARD_RULES`, a dict from op name to rule, filled by the
# decorator `@backward_rule("add")`. This is how autograd arrives without touching module 01:
# `apply` records the op's name, the engine looks the name up here. Adding a new op later in
# the course (a convolution, an embedding) means registering one more rule — no class is
# modified.
#
# The provided `call_rule(node, grad)` is what the engine calls. It looks the rule up, runs
# it, and checks what comes back: one gradient per input, each of its input's shape (a
# teaching error names the op, the input and both shapes — the commonest bug is a forgotten
# unbroadcast), cast to the input's dtype (a float32 parameter gets a float32 `.grad`).
# Inputs that do not require grad (data, constants, integer tensors) get `None` whatever the
# rule returns. Once some tensor has left the CPU (module 17's `cuda` device), it runs the
# rule registered for the inputs' device instead (module 01's kernel registry, keyed by the
# node's name, "MulBackward").

# %%
#| export
BACKWARD_RULES = {}

_FREED = ("Trying to backward through the graph a second time (or through a part of it that "
          "an earlier backward() already freed). backward() releases each node's saved inputs "
          "and output as soon as it has used them; pass retain_graph=True to the first "
          "backward() if you need to go through the graph again, or recompute the forward pass.")


def backward_rule(*ops):
    """Decorator: register `fn(node, grad) -> tuple of input gradients` for the op names `ops`."""
    def register(fn):
        for op in ops:
            BACKWARD_RULES[op] = fn
        return fn
    return register


def _broadcasts_to(shape, target):
    """Whether an array of `shape` broadcasts to exactly `target`."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def call_rule(node, grad):
    """Run the backward rule of `node` on the upstream gradient `grad` and check its result.

    Returns a list with one entry per input: a numpy gradient of the input's shape and dtype,
    or None (no gradient, or the input does not require grad). The rule gets `grad` read-only:
    the engine may hand the same array to other rules, so writing into it is a bug wherever
    the rule is called from, and raises in the rule itself.
    """
    if node.inputs is None:
        raise RuntimeError(_FREED)
    if isinstance(grad, np.ndarray) and grad.flags.writeable:
        grad = grad.view()
        grad.flags.writeable = False
    rule = BACKWARD_RULES.get(node.op)
    if rule is None:
        raise RuntimeError(
            f"autograd has no backward rule for op {node.op!r} ({node.name()}); register one "
            f"with @backward_rule({node.op!r}) (see BACKWARD_RULES in tinytorch.autograd)")
    if _DEVICES_IN_USE:  # some tensor left the CPU: the rule of the inputs' device (module 17)
        rule = _device_rule(node, rule)
    quiet = _FP_ERRORS.set(_FP_IGNORED)  # inf and nan quietly, as in the forward ops
    try:
        grads = rule(node, grad) if not _DISPATCH_MODES else dispatch(node.name(), rule, (node, grad), {})
    finally:
        _FP_ERRORS.reset(quiet)
    if not isinstance(grads, (tuple, list)) or len(grads) != len(node.inputs):
        got = len(grads) if isinstance(grads, (tuple, list)) else type(grads).__name__
        raise RuntimeError(f"the backward rule of {node.op!r} must return a tuple with one "
                           f"gradient per input ({len(node.inputs)}), got {got}")
    out = []
    for i, (x, g) in enumerate(zip(node.inputs, grads)):
        if g is None or not x.requires_grad:
            out.append(None)
            continue
        if type(g) is not np.ndarray:
            g = np.asarray(g)
        if g.shape != x.shape:
            hint = ""
            if _broadcasts_to(x.shape, g.shape):
                hint = (" — it looks broadcast: was it passed through unbroadcast(), and does unbroadcast "
                        "sum every dimension that was broadcast?")
            elif sorted(g.shape) == sorted(x.shape):
                hint = " — the same sizes in another order: is an axis order left to undo?"
            raise RuntimeError(f"the backward rule of {node.op!r} returned a gradient of shape "
                               f"{g.shape} for input {i}, which has shape {x.shape}{hint}")
        out.append(g if g.dtype == x.dtype else g.astype(x.dtype))
    return out


# %% [markdown]
# ## 5. Unbroadcasting
#
# Module 01 lets `a + b` broadcast: a bias `b` of shape `(3,)` is added to every row of `a`
# of shape `(64, 3)`. In the forward pass each element of `b` was **used 64 times**, so a
# change in `b[j]` changes 64 outputs and its gradient is the **sum** of the 64 upstream
# gradients in column `j`.
# The gradient for a broadcast input is the upstream gradient **summed over every place
# the input was reused**, which leaves it with the input's shape:
#
# ```
# grad (64, 3)   -> input (3,)      grad (2, 5, 4) -> input (5, 1)      grad (2, 3) -> input ()
# ```
#
# This is the "reduction of broadcast gradients back to each input's shape" that every
# binary op needs (and `expand` is nothing else). Write `unbroadcast(grad, shape)`.
#
# <details><summary>Hint 1</summary>
#
# Recall module 01's broadcasting rule: shapes are aligned at the right; a missing leading
# dimension and a dimension of size 1 can both be stretched. Which dimensions of `grad`
# correspond to reuse of the same input element?
# </details>
#
# <details><summary>Hint 2</summary>
#
# There are two kinds: leading dimensions that the input does not have at all, and
# dimensions where the input has size 1 but `grad` does not. Look at the shapes above:
# which kind is still in the input's shape, and with which size?
# </details>
#
# <details><summary>The approach</summary>
#
# Broadcasting stretched the input in two ways, and the gradient has to be folded back
# along exactly those two. Dimensions the input never had carry nothing of their own: they
# disappear in the fold. Dimensions where the input had size 1 are folded too, but they
# must survive with size 1, or the result would not have the input's shape. Gathering every
# such dimension first and reducing once is simpler (and faster) than one reduction per
# dimension. A 0-d target is the extreme case: everything folds.
# </details>

# %% nbgrader={"grade": false, "grade_id": "unbroadcast", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def unbroadcast(grad, shape):
    """Sum `grad` over the dimensions that broadcasting stretched, so it gets `shape` back.

    Contract: `grad` is a numpy array whose shape is the broadcast of `shape` with other
    shapes (extra leading dimensions, and sizes > 1 where `shape` has 1); `shape` is a
    tuple of ints, possibly empty (a 0-d input). Returns a numpy array of exactly `shape`
    (size-1 dimensions kept) whose entries are sums of the entries of `grad` that came from
    the same input element; `grad` itself when nothing was broadcast.
    """
    # Idea: an input element reused by broadcasting gets the sum of all its uses' gradients.
    ### BEGIN SOLUTION
    shape = tuple(shape)
    grad = np.asarray(grad)
    if grad.shape == shape:  # nothing was stretched
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-unbroadcast", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_g = np.arange(24.0).reshape(2, 3, 4)
for _shape, _expected in [
    ((2, 3, 4), _g),                                # nothing was broadcast
    ((4,), _g.sum(axis=(0, 1))),                    # two leading dims added
    ((3, 1), _g.sum(axis=(0, 2))[:, None]),         # one added, one stretched from size 1
    ((2, 1, 4), _g.sum(axis=1, keepdims=True)),     # a stretched size-1 dim in the middle
    ((1, 1, 1), _g.sum(keepdims=True)),             # every dim stretched, all kept
    ((), _g.sum()),                                 # a scalar: sum everything
]:
    assert_equal(outcome(lambda: unbroadcast(_g, _shape)), np.asarray(_expected),
                 f"unbroadcast of a (2, 3, 4) gradient to {_shape}")
_g1 = np.arange(6.0).reshape(1, 6)  # a size-1 dim that was NOT stretched stays as it is
assert_equal(outcome(lambda: unbroadcast(_g1, (1, 6))), _g1, "unbroadcast of a (1, 6) gradient to (1, 6)")
check(unbroadcast(_g, (2, 3, 4)) is _g, "nothing broadcast: unbroadcast returns grad itself (no copy of a "
      "gradient that may be as large as the biggest activation)", got="a new array")
print("✓ unbroadcast: (2, 3, 4) -> (3, 1) gives", unbroadcast(_g, (3, 1)).ravel())

# %% [markdown]
# ## 6. The first rules: arithmetic — derive them
#
# Everything you need is the chain rule from section 1. For an op with output elements
# $y_j$ and an input $a$:
#
# $$\bar a_i = \frac{\partial L}{\partial a_i} = \sum_j \frac{\partial L}{\partial y_j}\,
# \frac{\partial y_j}{\partial a_i} = \sum_j \bar y_j \, \frac{\partial y_j}{\partial a_i} .$$
#
# For an **elementwise** op with inputs of the same shape, $y_j$ depends only on $a_j$ (and
# $b_j$), so a single term of that sum survives: $\bar a_i$ is $\bar y_i$ times the ordinary
# partial derivative of the scalar function at $(a_i, b_i)$. With **broadcasting**, one
# input element feeds several outputs and the sum keeps several terms: that is exactly
# what `unbroadcast` adds up.
#
# **A worked example of a different op.** `hypot(a, b)` $= \sqrt{a^2 + b^2}$, the length
# of the vector $(a, b)$, elementwise with broadcasting. Its partial derivatives are
#
# $$\frac{\partial y}{\partial a} = \frac{a}{\sqrt{a^2+b^2}} = \frac{a}{y}, \qquad
# \frac{\partial y}{\partial b} = \frac{b}{y} .$$
#
# Turning those into a rule takes four decisions, and they are the same for every op
# below. Make them for `hypot` before you read on (the answers are in Hint 3 and the
# approach):
#
# 1. `a` has shape `(3, 1)` and `b` has shape `(1, 4)`. What shape does "upstream gradient
#    times $a / y$" have, and what shape must the entry for `a` have? Which numbers must be
#    combined, and how (section 5)?
# 2. The partial derivative can be written with the inputs alone, $a / \sqrt{a^2+b^2}$, or
#    with the output, $a / y$. The node holds both. Which one does less work in backward?
# 3. The rule returns one entry per input: in which order?
# 4. `b` is data, a frozen weight (it does not require grad). What should the rule compute
#    for it? The check counts the work.
#
# **Your turn.** For each of the six ops below — `a + b`, `a - b`, `a * b`, `a / b`,
# `exp(a)`, `log(a)` — write the partial derivatives on paper first, decide what each
# needs to read from the node, then write the rule. The check compares your rules with the
# derivative computed straight from its definition, not from a formula; a summary table
# to compare with follows it, folded.
#
# <details><summary>Hint 1</summary>
#
# Everything a rule needs is on the node: the input tensors (their values as numpy arrays),
# the saved output, and the upstream gradient passed in. For each op, which of them does
# its partial derivative use?
# </details>
#
# <details><summary>Hint 2</summary>
#
# For `a / b`, treat the two inputs separately: with `b` held fixed, `a / b` is a straight
# line in `a`; with `a` held fixed, it is `a` times a power of `b`. Watch the sign.
# </details>
#
# <details><summary>Hint 3</summary>
#
# The product of the upstream gradient with the local derivative has the *output's* shape.
# For a binary op that broadcast, that is not yet the input's shape.
# </details>
#
# <details><summary>The approach</summary>
#
# For `hypot`: the product has the output's shape `(3, 4)`; the entry for `a` adds it over
# the axis `a` was stretched along, back to `(3, 1)` (that is `unbroadcast`); `a / y` reuses
# the square root forward already took; the entries follow `node.inputs`; and an input
# that does not require grad gets None, its gradient never computed. The six ops
# below make the same four decisions with their own partial derivatives; a unary op
# returns a one-element tuple. For `exp`, ask what the node already holds before
# computing anything: the cheapest derivative is the one that is already there.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rules-arithmetic", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("add")
def _add_backward(node, grad):
    """y = a + b.

    Contract (every rule below): `node` is the recorded Node, `grad` the upstream gradient
    (a numpy array of the output's shape, never written into). The inputs may have any
    shapes that broadcast against each other (0-d ones and a Python number, recorded as a
    0-d tensor, included). Returns a tuple with one numpy gradient per input, in the order
    of node.inputs, each of that input's shape; None for an input that does not require
    grad, whose gradient is then not computed at all (PyTorch's `ctx.needs_input_grad`: a
    network's input is data, a frozen weight a constant).
    """
    # Idea: move one a_i by a small step: how far does the output move? Then fold to a's shape.
    ### BEGIN SOLUTION
    a, b = node.inputs
    return (unbroadcast(grad, a.shape) if a.requires_grad else None,
            unbroadcast(grad, b.shape) if b.requires_grad else None)
    ### END SOLUTION


@backward_rule("sub")
def _sub_backward(node, grad):
    """y = a - b."""
    # Idea: the same question as for add, asked of each side separately.
    ### BEGIN SOLUTION
    a, b = node.inputs
    return (unbroadcast(grad, a.shape) if a.requires_grad else None,
            unbroadcast(-grad, b.shape) if b.requires_grad else None)
    ### END SOLUTION


@backward_rule("mul")
def _mul_backward(node, grad):
    """y = a * b."""
    # Idea: hold one factor fixed: the product is then a straight line in the other.
    ### BEGIN SOLUTION
    a, b = node.inputs
    av, bv = a.numpy(), b.numpy()
    ga = unbroadcast(grad * bv, a.shape) if a.requires_grad else None
    gb = unbroadcast(grad * av, b.shape) if b.requires_grad else None
    return ga, gb
    ### END SOLUTION


@backward_rule("div")
def _div_backward(node, grad):
    """y = a / b."""
    # Idea: two partial derivatives; the one for b is where the mistakes happen.
    ### BEGIN SOLUTION
    a, b = node.inputs
    av, bv = a.numpy(), b.numpy()
    ga = unbroadcast(grad / bv, a.shape) if a.requires_grad else None
    gb = unbroadcast(-grad * av / (bv * bv), b.shape) if b.requires_grad else None
    return ga, gb
    ### END SOLUTION


@backward_rule("exp")
def _exp_backward(node, grad):
    """y = exp(x). As for hypot, decide what the rule reads: the check takes only the
    choice that computes least."""
    # Idea: the derivative of e^x, and the cost of computing it: an exp per element, or none?
    ### BEGIN SOLUTION
    return (grad * node.output,)
    ### END SOLUTION


@backward_rule("log")
def _log_backward(node, grad):
    """y = log(x). The same decision as for exp, and the check is as strict."""
    # Idea: log is the inverse of exp; an inverse's slope is one over the function's slope.
    ### BEGIN SOLUTION
    return (grad / node.inputs[0].numpy(),)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-rules-arithmetic", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from types import SimpleNamespace


def _rule_without_the_input(make, x_values):
    """The recorded rule of make(x), called on a copy of its node whose input holds NaN: a rule
    that needs only the output the node saved gives a finite gradient."""
    x = Tensor(np.array(x_values, dtype=np.float64), requires_grad=True)
    node = make(x).grad_fn
    hidden = SimpleNamespace(op=node.op, inputs=(Tensor(np.full(x.shape, np.nan)),), output=node.output,
                             attrs=node.attrs)
    return np.asarray(BACKWARD_RULES[node.op](hidden, np.ones(x.shape))[0])


def _complex_step(f, arrays, k, h=1e-30):
    """d f / d arrays[k], element by element, from the definition of the derivative, without
    any rule: f(x + ih) = f(x) + ih f'(x) + O(h²), so Im f(x + ih) / h is f'(x) to float64
    precision (no two nearby numbers are subtracted, so h can be tiny). Valid for
    elementwise f built from +, -, *, /, exp and log (numpy accepts complex numbers)."""
    args = [np.asarray(a, dtype=complex) for a in arrays]
    args[k] = args[k] + 1j * h
    return np.imag(f(*args)) / h


_a = Tensor(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), requires_grad=True)
_b = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)  # broadcast over the rows of a
_g = np.array([[1.0, -2.0, 0.5], [3.0, 1.0, -1.0]])           # an upstream gradient, not ones
_A, _B = _a.numpy(), _b.numpy()
for _name, _f in [("a + b", lambda a, b: a + b), ("a - b", lambda a, b: a - b),
                  ("a * b", lambda a, b: a * b), ("a / b", lambda a, b: a / b)]:
    _shape_error = None
    try:  # call_rule checks the shapes a rule returns: said here as a check says it
        _ra, _rb = call_rule(_f(_a, _b).grad_fn, _g)
    except NotImplementedError:
        raise  # an unwritten rule says so itself
    except RuntimeError as _e:
        _shape_error = str(_e)
    check(_shape_error is None, f"{_name}: your rule returns one gradient per input, of that input's shape "
          f"((2, 3) for a, (3,) for b)", got=_shape_error)
    assert_close(_ra, _g * _complex_step(_f, [_A, _B], 0), rtol=1e-12, atol=1e-15,
                 what=f"{_name}: your rule's gradient of a (2, 3) against the definition of the derivative")
    assert_close(_rb, (_g * _complex_step(_f, [_A, _B], 1)).sum(0), rtol=1e-12, atol=1e-15,
                 what=f"{_name}: your rule's gradient of b (3,), used by both rows, against the definition")
_a2 = Tensor(np.array([[1.5], [-2.0]]), requires_grad=True)      # (2, 1): each row's number used in 3 columns
_b2 = Tensor(np.array([[0.5, -1.0, 2.0]]), requires_grad=True)   # (1, 3): each column's number used in 2 rows
for _name, _f in [("a + b", lambda a, b: a + b), ("a - b", lambda a, b: a - b),
                  ("a * b", lambda a, b: a * b), ("a / b", lambda a, b: a / b)]:
    _shape_error = None
    try:
        _ra, _rb = call_rule(_f(_a2, _b2).grad_fn, _g)
    except NotImplementedError:
        raise
    except RuntimeError as _e:
        _shape_error = str(_e)
    check(_shape_error is None, f"{_name} with a (2, 1) and b (1, 3), both broadcast to (2, 3): your rule returns "
          f"a gradient of each input's own shape ((2, 1) for a, (1, 3) for b)", got=_shape_error)
    _per_use = [_g * _complex_step(_f, [_a2.numpy(), _b2.numpy()], k) for k in (0, 1)]  # (2, 3): one per use
    assert_close(_ra, _per_use[0].sum(1, keepdims=True), rtol=1e-12, atol=1e-15,
                 what=f"{_name} with a (2, 1) and b (1, 3), both broadcast to (2, 3): your rule's gradient of a, "
                      f"against the definition (each of a's numbers was used in three places)")
    assert_close(_rb, _per_use[1].sum(0, keepdims=True), rtol=1e-12, atol=1e-15,
                 what=f"{_name} with a (2, 1) and b (1, 3), both broadcast to (2, 3): your rule's gradient of b")
assert_close(call_rule(_a.exp().grad_fn, _g)[0], _g * _complex_step(np.exp, [_A], 0), rtol=1e-12, atol=1e-15,
             what="exp(a): your rule against the definition of the derivative")
assert_close(call_rule(_a.log().grad_fn, _g)[0], _g * _complex_step(np.log, [_A], 0), rtol=1e-12, atol=1e-15,
             what="log(a): your rule against the definition of the derivative")
check(np.isfinite(_rule_without_the_input(lambda x: x.exp(), [0.5, -1.0, 2.0])).all(),
      "exp's rule uses the output the node holds, exp computed nothing again: called on a node whose input "
      "is hidden (NaN), it still gives a finite gradient", got=_rule_without_the_input(lambda x: x.exp(), [0.5, -1.0, 2.0]))
_x_log = Tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
_node_log = _x_log.log().grad_fn
_no_output = SimpleNamespace(op="log", inputs=_node_log.inputs, output=np.full(3, np.nan), attrs=_node_log.attrs)
assert_close(np.asarray(BACKWARD_RULES["log"](_no_output, np.ones(3))[0]), np.array([2.0, 1.0, 0.5]), rtol=1e-12,
             atol=0, what="log's rule on a node whose output is hidden (NaN): it needs x alone, no exponential of y")


def _elementwise_work(make, frozen):
    """(gradients, the products and quotients) of make(a, b)'s rule, `frozen` not requiring grad."""
    a = Tensor(_A, requires_grad=frozen != "a")
    b = Tensor(_B, requires_grad=frozen != "b")
    grads, seen = spied(lambda g: call_rule(make(a, b).grad_fn, g), _g)
    return grads, [e[0] for e in seen if e[0] in ("multiply", "divide", "true_divide", "power", "square", "reciprocal")]


for _name, _make in [("a * b", lambda a, b: a * b), ("a / b", lambda a, b: a / b)]:
    _, _both = _elementwise_work(_make, None)
    for _frozen in ("a", "b"):
        (_ga, _gb), _work = _elementwise_work(_make, _frozen)
        check((_ga is None) == (_frozen == "a") and (_gb is None) == (_frozen == "b") and len(_work) < len(_both),
              f"{_name} with {_frozen} as data (no grad): None for {_frozen}, and less work than when both need a "
              f"gradient ({_frozen}'s gradient is not computed and thrown away)",
              got=(None if _ga is None else "array", None if _gb is None else "array", _work),
              expected=f"fewer operations than {_both}")
print("✓ add, sub, mul, div, exp, log rules agree with the definition; d(a/b)/db summed over rows:",
      call_rule((_a / _b).grad_fn, _g)[1])

# %% [markdown]
# <details><summary>Summary to compare with (open once your check passes)</summary>
#
# With $\bar y$ the upstream gradient, each entry then unbroadcast to its input's shape:
#
# | op | $\bar a$ | $\bar b$ |
# |---|---|---|
# | `a + b` | $\bar y$ | $\bar y$ |
# | `a - b` | $\bar y$ | $-\bar y$ |
# | `a * b` | $\bar y \, b$ | $\bar y \, a$ |
# | `a / b` | $\bar y / b$ | $-\bar y \, a / b^2$ |
# | `exp(a)` | $\bar y \, e^a = \bar y \cdot \text{output}$ | |
# | `log(a)` | $\bar y / a$ | |
#
# `exp` is the one whose derivative *is* its output, so its rule reuses `node.output`
# instead of computing `exp` again: choosing what to read (and, in section 12, what to
# save) is half the art of writing backward rules.
# </details>
#
# The other elementwise ops are provided; read them, each has a small lesson:
#
# - `neg`, `sqrt` ($\bar y / (2\sqrt{x})$ — from the saved output again), `to` (a dtype
#   conversion passes the gradient through; `call_rule` casts it back to the input's dtype),
#   `contiguous` and `clone` (copies pass the gradient through).
# - `sin` and `cos`, each the other's derivative up to a sign; here the input is read again,
#   since the output alone does not say which of the two square roots $\pm\sqrt{1 - y^2}$
#   the derivative is.
# - `pow`: $\partial a^b/\partial a = b\,a^{b-1}$ and $\partial a^b / \partial b = a^b \ln a$.
#   Two edge cases follow PyTorch: where $b = 0$ the base gets gradient 0 (even at $a=0$,
#   where $0 \cdot 0^{-1}$ would be `nan`), and where $a = 0$ and $b \ge 0$ the exponent gets 0
#   instead of $0 \cdot \ln 0$. The exponent's gradient is only computed when it requires grad
#   (usually it is a constant like the 2 in `x ** 2`).
# - **Kinks.** `abs`, `clamp`, `relu`, `max` are not differentiable everywhere; frameworks
#   pick a *subgradient* and document it. PyTorch's choices, which we copy: `abs` has
#   gradient `sign(x)` (0 at 0); `clamp` passes the gradient where `min <= x <= max` (the
#   boundary included).
# - `where(cond, a, b)`: the gradient goes to `a` where `cond` holds and to `b` elsewhere
#   (zeros in the other places), unbroadcast to each. `masked_fill` is recorded as `where`.

# %%
#| export
@backward_rule("neg")
def _neg_backward(node, grad):
    return (-grad,)


@backward_rule("sqrt")
def _sqrt_backward(node, grad):
    return (grad / (2 * node.output),)


@backward_rule("sin")
def _sin_backward(node, grad):
    return (grad * np.cos(node.inputs[0].numpy()),)


@backward_rule("cos")
def _cos_backward(node, grad):
    return (-grad * np.sin(node.inputs[0].numpy()),)


@backward_rule("to", "contiguous", "clone")
def _identity_backward(node, grad):
    return (grad,)


@backward_rule("pow")
def _pow_backward(node, grad):
    base, exponent = node.inputs
    a, b = base.numpy(), exponent.numpy()
    ga = gb = None
    if base.requires_grad:
        ga = unbroadcast(np.where(b == 0, 0.0, grad * b * a ** (b - 1)), a.shape)
    if exponent.requires_grad:
        gb = unbroadcast(np.where((a == 0) & (b >= 0), 0.0, grad * node.output * np.log(a)), b.shape)
    return ga, gb


@backward_rule("abs")
def _abs_backward(node, grad):
    return (grad * np.sign(node.inputs[0].numpy()),)


@backward_rule("clamp")
def _clamp_backward(node, grad):
    x = node.inputs[0].numpy()
    inside = np.ones(x.shape, dtype=bool)
    if node.attrs["min"] is not None:
        inside &= x >= node.attrs["min"]
    if node.attrs["max"] is not None:
        inside &= x <= node.attrs["max"]
    return (np.where(inside, grad, 0.0),)


@backward_rule("where")
def _where_backward(node, grad):
    a, b = node.inputs
    cond = node.attrs["cond"]
    zero = np.zeros((), dtype=grad.dtype)
    return (unbroadcast(np.where(cond, grad, zero), a.shape),
            unbroadcast(np.where(cond, zero, grad), b.shape))


# %% [markdown]
# ## 7. The engine
#
# Now the machine that runs the rules. It starts from the tensor we call `backward()` on
# (the **root**, usually the loss) with gradient 1, and it must get every node's rule to run
# with the gradient of the root with respect to that node's output: the **whole** gradient,
# since a rule runs once. Before reading on, settle two questions on paper:
#
# - A tensor used twice (`x * x`, a residual connection `h + f(h)`) is an input of two
#   consumers, and each consumer's rule sends it a gradient. What is the root's gradient
#   with respect to that tensor, in terms of the two? (Write the chain rule for a function
#   of two variables that both depend on $h$.)
# - So at what moment is a node's gradient complete, and in what order must the engine
#   visit the nodes for that moment to have come whenever it reaches one?
#
# An order of a graph's nodes with that property has a name, a **topological order**, and
# finding one is the first half of the engine; the loop that walks it is the second.
#
# **Why not recursion?** The textbook version is a recursive depth-first search. A chain of
# 10,000 ops (an RNN unrolled over a long sequence, or just a loop in your code) would need
# 10,000 nested Python calls, past Python's recursion limit (1,000 by default). So the
# walk must keep its own record of where it is. What does each open call of a recursive
# search remember, that your loop will have to remember instead?
#
# **Why "each node once"?** Consider a **diamond**: `a = f(x)`, `b = g(x)`, `y = a + b`.
# A naive recursion that pushes gradients down every path visits `x`'s subgraph twice;
# stack 60 diamonds on top of each other and it visits the bottom $2^{60}$ times — it never
# finishes. Sorting first and visiting each node once makes backward **linear** in the size
# of the graph.
#
# `next_nodes(node)` (provided) lists the nodes that produced the node's inputs — only for
# inputs that require grad and are not leaves. It also raises the "backward through the graph
# a second time" error when the node was freed (section 14). Write `topological_order`.
#
# <details><summary>Hint 1</summary>
#
# In a depth-first search, when is a node *finished*? Once everything it depends on is
# finished. If you list nodes in the order they finish, where do the producers end up
# relative to their consumers? And what does reversing that list give?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Recursion keeps, for each open call, "which node, and have I done its children yet" on
# Python's call stack. Keep the same pair on a list of your own. A set of nodes already
# *entered* is what makes a diamond's shared bottom be expanded once.
# </details>
#
# <details><summary>Hint 3</summary>
#
# `x * x` puts the same producer on your stack twice before either copy is looked at. What
# goes wrong if both copies are expanded? At which moment does a check catch the second
# copy: when it is pushed, or when it comes off the stack?
# </details>
#
# <details><summary>The approach</summary>
#
# Think of the recursive version first: visit a node's producers, then emit the node. Why
# does reversing the emitted list put every consumer before its producers? An explicit
# stack must then do by hand what Python's call stack did for each open call: work out
# what that is (Hint 2 names it), and at which moment the "seen before?" question must be
# asked so that a node pushed twice is still expanded once (Hint 3's `x * x`).
# </details>

# %% nbgrader={"grade": false, "grade_id": "topological-order", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def next_nodes(node):
    """The nodes that produced `node`'s inputs (inputs that require grad and are not leaves)."""
    if node.inputs is None:
        raise RuntimeError(_FREED)
    return [x.grad_fn for x in node.inputs if x.grad_fn is not None and x.requires_grad]


def topological_order(roots):
    """Every node reachable from the nodes `roots`, each exactly once, ordered so that a node
    comes before every node that produced one of its inputs (the roots first).

    Contract: `roots` is a list of Nodes. Returns a list of Nodes. Iterative (no recursion:
    a chain of 10,000 ops works) and linear in the size of the graph (a diamond's shared
    part is walked once). Raises module 06's "backward through the graph a second time"
    RuntimeError when it meets a freed node (next_nodes does that for you).
    """
    # Idea: at which moment of the walk may a node take its place, relative to the nodes below it?
    ### BEGIN SOLUTION
    order, visited = [], set()
    stack = [(node, False) for node in roots]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
        elif node not in visited:
            visited.add(node)
            stack.append((node, True))
            for p in next_nodes(node):
                if p not in visited:
                    stack.append((p, False))
    order.reverse()
    return order
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-topological-order", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _check_order(order, roots, what):
    """The invariants of a topological order: every reachable node once, consumers first."""
    reachable, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n not in reachable:
            reachable.add(n)
            todo.extend(next_nodes(n))
    assert_equal(len(order), len(set(order)), f"{what}: number of nodes = number of distinct nodes")
    check(set(order) == reachable, f"{what}: the order holds exactly the reachable nodes",
          got=sorted(n.op for n in order), expected=sorted(n.op for n in reachable))
    pos = {n: k for k, n in enumerate(order)}
    for n in order:
        for p in next_nodes(n):
            check(pos[n] < pos[p], f"{what}: the node at position {pos[p]} of your order ({p}) produced an input "
                  f"of the node at position {pos[n]} ({n}), so it must come after it, not before: a consumer "
                  f"comes before its producers", got=[f"{k}: {m}" for k, m in enumerate(order)])


_x = Tensor([1.0, 2.0], requires_grad=True)
_a = _x * 2                      # a diamond: _a and _b both read _x ...
_b = _x.exp()
_y = (_a + _b).sum()             # ... and meet again here
_order = outcome(lambda: topological_order([_y.grad_fn]))
check(isinstance(_order, list), "topological_order([root]) of a diamond runs and returns a list of nodes",
      got=_order)
assert_equal([n.op for n in _order][:2], ["sum", "add"], "the first two nodes of the diamond's order")
_check_order(_order, [_y.grad_fn], "diamond")
_sq = _x.exp()
_z = (_sq * _sq).sum()           # one producer read twice by the same node
_check_order(topological_order([_z.grad_fn]), [_z.grad_fn], "x * x")
_h = _x * 3.0                    # a wider DAG: a shared node two levels down
_w = ((_h.exp() * _h) + (_h * _h).log()).sum()
_check_order(topological_order([_w.grad_fn]), [_w.grad_fn], "a DAG with shared nodes")
_p = _x.exp()  # p is read by the root directly AND through log(p), which the root reads too
for _what, _root in [("p * log(p)", _p * _p.log()), ("log(p) * p", _p.log() * _p)]:
    _check_order(topological_order([_root.grad_fn]), [_root.grad_fn],
                 f"{_what}: p, pushed by the root, must still come after log(p)")
_shared = _x.exp()  # two roots that share a subgraph: autograd.grad([y1, y2], ...) asks for this
_roots = [(_shared * 2.0).sum().grad_fn, (_shared.log() * _shared).sum().grad_fn]
_check_order(topological_order(_roots), _roots, "two roots sharing exp(x)")
_c = _x
for _ in range(3000):  # deeper than Python's recursion limit
    _c = _c * 1.0
_deep = outcome(lambda: topological_order([_c.grad_fn]))
check(isinstance(_deep, list), "topological_order of a chain of 3000 ops runs: deeper than Python's recursion "
      "limit (about 1000 nested calls), so the walk cannot be a recursive function", got=_deep)
assert_equal(len(_deep), 3000, "nodes in a chain of 3000 ops")
_compared = equality_calls(topological_order, [_c.grad_fn], of=type(_c.grad_fn))
check(_compared <= 3000, "topological_order of a chain of 3000 ops compares two nodes with == at most about once "
      "per node (the walk is linear: a node's 'seen?' question must not scan every node seen before it, as `in` "
      "on a list does)", got=f"{_compared:,} comparisons of two nodes", expected="<= 3,000")
print("✓ topological_order:", [n.op for n in _order])

# %% [markdown]
# ### The backward loop
#
# With the order in hand, the loop is short. Write three functions:
#
# - `_run_backward(roots, root_grads, retain_graph, sink)`: the loop itself. It keeps, per
#   node, the **sum** of the gradients its output has received so far; when the loop
#   reaches a node (in topological order, so every consumer has already contributed), that
#   sum is complete and the node's rule turns it into its inputs' gradients.
# - `free_node(node)`: once a node's rule has run, nothing will need its saved inputs,
#   attrs and output again (unless `retain_graph`): drop them so their memory can go.
# - `_accumulate_grad(tensor, g)`: the **sink** that `backward()` passes in.
#   `sink(tensor, g)` is how gradients leave the engine: every gradient that reaches a
#   tensor is handed to it. `backward()`'s sink adds it into `.grad` of leaves (and of
#   non-leaves that called `retain_grad()`: module 01's `retain_grad()` sets the tensor's
#   attribute `_retains_grad` to True, and a tensor that never called it has no such
#   attribute); `tt.autograd.grad()` passes a sink that collects the gradients of chosen
#   tensors instead.
#
# The user-facing `backward()` and `grad()` are provided below: they check their arguments
# (a tensor that does not require grad, a non-scalar tensor without an explicit `gradient` —
# which "direction" $\bar y$ should it use? — are refused, like PyTorch) and call your loop.
#
# *In this notebook we call the function `backward(loss)` directly.* `loss.backward()` (the
# method module 01 gave every tensor) imports `backward` from the **package**
# `tinytorch.autograd`, which holds your code only after `tito export 06`; from then on the
# two are the same.
#
# <details><summary>Hint 1</summary>
#
# Which data structure maps "a node" to "the gradient of its output summed so far"? Nodes
# are hashable. A root is itself a tensor that a gradient reaches.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Get the whole order *before* changing anything: `topological_order` raises on a freed
# graph, and a half-run backward would leave half-accumulated `.grad`s behind. A node
# may receive no gradient at all (every path to it was cut): skip its rule, but still free
# it.
# </details>
#
# <details><summary>Hint 3</summary>
#
# Gradient arrays may be shared with other rules, or read-only broadcast views (a rule
# may stretch a small array to a big shape without copying it, as you will see in
# section 10): add them with a fresh result, never in place. Only the `.grad` buffer,
# which the sink owns, may be added into in place.
# </details>
#
# <details><summary>The approach</summary>
#
# The loop is bookkeeping around one invariant: when the walk reaches a node, the map holds
# the complete sum of what its consumers sent. The roots are where that starts — a root's
# seed is both something the sink must hear about and the first entry of the map. From
# there each node turns its sum into one gradient per input, and each of those has two
# destinations: the sink, and, when the input was itself made by an op, the sum waiting at
# that op's node. A node's saved tensors are needed by nobody after its own turn, which is
# exactly when it can be freed — with or without a gradient. The sink is the one place that
# owns memory (the `.grad` buffer): the first gradient that reaches a tensor becomes a
# fresh copy, later ones are added into it, and tensors made by ops keep nothing unless
# they asked to.
# </details>

# %% nbgrader={"grade": false, "grade_id": "run-backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def free_node(node):
    """Release what `node` keeps alive: the graph below it is used up.

    Contract: afterwards the node holds no reference to anything it saved for its rule,
    and next_nodes and call_rule (read them: both are above) treat it as freed.
    """
    # Idea: what does the node save, and how do next_nodes and call_rule tell a freed node?
    ### BEGIN SOLUTION
    node.inputs = None
    node.attrs = None
    node.output = None
    ### END SOLUTION


def _run_backward(roots, root_grads, retain_graph, sink):
    """Propagate `root_grads` from the tensors `roots` back through the graph.

    Contract: `roots` is a list of Tensors, `root_grads` a list of numpy arrays of their
    shapes. The sink hears of every gradient that reaches a tensor, the roots' own
    included: sink(tensor, gradient), once per gradient. Each node's rule runs at most
    once, through call_rule (which checks its result, and which dispatch modes see), with
    the complete gradient of the roots with respect to the node's output; a node that no
    gradient reaches runs no rule. Unless `retain_graph`, backward's memory falls as it
    goes: nothing is kept (a node's saved tensors, a gradient) past the moment it is last
    needed; with retain_graph=True no node is freed. Raises module 06's "backward through
    the graph a second time" RuntimeError, before the sink hears anything, when the graph
    was already freed. Never writes into a gradient array.
    """
    # Idea: in topological order, each node's gradient is complete when the loop reaches it.
    ### BEGIN SOLUTION
    order = topological_order([r.grad_fn for r in roots if r.grad_fn is not None])
    grads = {}
    for root, g in zip(roots, root_grads):
        sink(root, g)
        if root.grad_fn is not None:
            node = root.grad_fn
            grads[node] = grads[node] + g if node in grads else g
    for node in order:
        g = grads.pop(node, None)
        if g is not None:
            for x, gx in zip(node.inputs, call_rule(node, g)):
                if gx is None:
                    continue
                sink(x, gx)
                if x.grad_fn is not None:
                    grads[x.grad_fn] = grads[x.grad_fn] + gx if x.grad_fn in grads else gx
        if not retain_graph:
            free_node(node)
    ### END SOLUTION


def _accumulate_grad(tensor, g):
    """backward()'s sink: `tensor` has just received the gradient `g` (a numpy array of
    tensor's shape); make it count in `tensor.grad`.

    Contract: a tensor made by an op (it has a grad_fn) keeps no .grad, unless it called
    retain_grad() (module 01 then set tensor._retains_grad = True). For every other tensor,
    afterwards tensor.grad is a Tensor of tensor's shape and dtype, not requiring grad,
    holding the sum of every gradient the tensor has received since its .grad was last
    None. Once that Tensor exists it stays the same object (code holding it sees the sum
    grow), and it shares no memory with any g: changing g afterwards (the engine may reuse
    it) never changes tensor.grad.
    """
    # Idea: .grad is a running sum over every backward pass, until someone clears it.
    ### BEGIN SOLUTION
    if tensor.grad_fn is not None and not getattr(tensor, "_retains_grad", False):
        return
    if tensor.grad is None:
        tensor.grad = Tensor(np.asarray(g), dtype=tensor.dtype)  # a fresh copy
    else:
        buf = tensor.grad.numpy()  # accumulate in place, like PyTorch
        buf += np.asarray(g, dtype=buf.dtype)
    ### END SOLUTION


# %%
#| export
def _seed(tensor, gradient):
    """The starting gradient for `tensor`: ones for a one-element tensor, else `gradient`."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"backward needs a tinytorch Tensor, got {type(tensor).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError(
            "element 0 of tensors does not require grad and does not have a grad_fn: there is "
            "no graph to differentiate. Did you forget requires_grad=True on the parameters, or "
            "compute this tensor under no_grad() or from a .detach()ed tensor?")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs: backward() on a tensor "
                f"of shape {tensor.shape} needs gradient=, the upstream gradient dL/d(tensor) of "
                f"that shape. For a loss, reduce it first (e.g. loss.mean().backward()).")
        return np.ones(tensor.shape, dtype=tensor.dtype)
    g = gradient.numpy() if isinstance(gradient, Tensor) else np.asarray(gradient)
    if g.shape != tensor.shape:
        raise RuntimeError(f"Mismatch in shape: gradient has shape {g.shape}, but the tensor "
                           f"it is the gradient of has shape {tensor.shape}")
    return np.array(g, dtype=tensor.dtype)


def _refuse_create_graph(create_graph):
    """PyTorch's create_graph=True (gradients of gradients) names the reason it is missing."""
    if create_graph:
        raise NotImplementedError(
            "create_graph=True (higher-order gradients: a gradient penalty, Hessian-vector "
            "products) is out of tinytorch's scope: its backward rules compute with numpy, so a "
            "gradient is a result, not a recorded graph (module 06, section 18)")


def backward(tensor, gradient=None, retain_graph=False, create_graph=False):
    """Accumulate d(tensor)/d(leaf) into every leaf's .grad (Tensor.backward calls this).

    `gradient` is dL/d(tensor) when `tensor` has more than one element. The graph is freed
    afterwards unless `retain_graph=True`. `create_graph=True` raises NotImplementedError.
    """
    _refuse_create_graph(create_graph)
    seed = _seed(tensor, gradient)
    _run_backward([tensor], [seed], retain_graph, _accumulate_grad)


def grad(outputs, inputs, grad_outputs=None, retain_graph=False, create_graph=False, allow_unused=False):
    """The gradients of `outputs` w.r.t. `inputs`, returned as a tuple of Tensors instead of
    accumulated into .grad (torch.autograd.grad). Inputs may be leaves or intermediate tensors.
    `create_graph=True` raises NotImplementedError."""
    _refuse_create_graph(create_graph)
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif not isinstance(grad_outputs, (list, tuple)):
        grad_outputs = [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad: {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"grad: input {i} does not require grad, so it has no gradient")
    seeds = [_seed(o, g) for o, g in zip(outputs, grad_outputs)]
    slots = {}  # the same tensor may be asked for twice: each slot gets its gradient
    for k, t in enumerate(inputs):
        slots.setdefault(id(t), []).append(k)
    found = [None] * len(inputs)

    def collect(tensor, g):
        for k in slots.get(id(tensor), ()):
            found[k] = np.array(g, copy=True) if found[k] is None else found[k] + g

    _run_backward(outputs, seeds, retain_graph, collect)
    result = []
    for k, (t, g) in enumerate(zip(inputs, found)):
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {k} was not used to compute the outputs (its "
                               f"gradient is undefined); pass allow_unused=True to get None")
        result.append(None if g is None else Tensor(g, dtype=t.dtype))
    return tuple(result)


# %% nbgrader={"grade": true, "grade_id": "test-run-backward", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_w = Tensor(2.0, requires_grad=True)
_b = Tensor(1.0, requires_grad=True)
_loss = (_w * Tensor(3.0) + _b - 5.0) ** 2
_ran = outcome(lambda: backward(_loss))  # the engine you just wrote (what loss.backward() calls once exported)
check(_ran is None, "backward(loss) for the picture of section 1 runs", got=_ran, expected=None)
assert_equal((_w.grad.item(), _b.grad.item()), (12.0, 4.0), "(w.grad, b.grad) of the picture in section 1")
assert_equal((_w.grad.shape, _w.grad.dtype), (_w.shape, _w.dtype), "(shape, dtype) of w.grad")
check(isinstance(_w.grad, Tensor), "w.grad is a Tensor", got=type(_w.grad))

_t = Tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)  # the sink on its own
_g = np.array([10.0, 20.0])
_accumulate_grad(_t, _g)
_first = _t.grad
_g[:] = -1.0  # the engine may reuse its arrays afterwards: .grad must not change with them
assert_equal(_t.grad.numpy(), np.array([10.0, 20.0]),
             "t.grad after the sink got g = [10, 20], and g was then overwritten with -1")
_got = outcome(lambda: _accumulate_grad(_t, np.broadcast_to(np.array(1.0), (2,))))  # read-only, as sum's rule returns
check(_got is None, "a second gradient that is a read-only broadcast view is accepted", got=_got, expected=None)
assert_equal(_t.grad.numpy(), np.array([11.0, 21.0]), "t.grad after a second gradient [1, 1]: the sum")
check(_t.grad is _first, "the second gradient is added into the same .grad Tensor object",
      got="a new Tensor object in t.grad (code that holds the first one no longer sees the sum)")
_t32 = Tensor([1.0, 2.0], dtype=np.float32, requires_grad=True)  # rules compute in float64 at times
_got = outcome(lambda: _accumulate_grad(_t32, np.array([0.5, 0.25])))
check(_got is None, "the sink accepts a float64 gradient for a float32 tensor", got=_got, expected=None)
assert_equal(_t32.grad.dtype if _t32.grad is not None else None, _t32.dtype, "the dtype of .grad for a float32 tensor that received a float64 gradient "
             "(.grad always has its tensor's dtype)")

_calls = []  # a test-only op whose rule records each call: it must run ONCE, on the sum
BACKWARD_RULES["test_double"] = lambda node, g: (_calls.append(g.copy()) or (g * 2,))
try:
    _x = Tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    _shared = tt.apply("test_double", lambda t: t.numpy() * 2, _x)
    _total = _shared * 3.0 + _shared * 4.0 + _shared  # three consumers of one node
    _ran = outcome(lambda: backward(_total, np.ones(2)))
finally:
    del BACKWARD_RULES["test_double"]
check(_ran is None, "backward through a node with three consumers runs (the gradients it sums may "
      "be read-only, and may be arrays a rule handed elsewhere too: add them into a new array, "
      "never into one of them)", got=_ran, expected=None)
assert_equal(len(_calls), 1, "times the shared node's rule ran")
assert_equal(_calls[0], np.array([8.0, 8.0]), "the gradient it ran on: the sum 3 + 4 + 1 of its consumers")
assert_equal(_x.grad.numpy(), np.array([16.0, 16.0]), "x.grad through the shared node")
_x = Tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
_y = _x * 2.0
_root_grad = np.array([1.0, 3.0])  # y's node receives this array as a root, then y * 3's gradient
_ran = outcome(lambda: _run_backward([_y, _y * 3.0], [_root_grad, np.ones(2)], False, lambda t, g: None))
check(_ran is None, "_run_backward with roots y and y * 3", got=_ran, expected=None)
assert_equal(_root_grad, np.array([1.0, 3.0]), "the root gradient given to _run_backward for y, after it ran "
             "(y's node sums it with y * 3's gradient: a sum goes into a new array, never into one of the gradients, "
             "here the caller's own)")

_behind_a_stop = []  # a node whose only consumer sends it no gradient (None): its rule must not run at all
BACKWARD_RULES["test_stop"] = lambda node, g: (None,)
BACKWARD_RULES["test_recorded"] = lambda node, g: (_behind_a_stop.append(g.copy()) or (g,))
BACKWARD_RULES["test_bad_shape"] = lambda node, g: (np.ones(5),)
try:
    _x = Tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    _below = tt.apply("test_recorded", lambda t: t.numpy() + 0.0, _x)
    backward(tt.apply("test_stop", lambda t: t.numpy() * 1.0, _below) * 2.0 + _x, np.ones(2))
    _wrong = tt.apply("test_bad_shape", lambda t: t.numpy() * 1.0, Tensor([1.0, 2.0], requires_grad=True))
    assert_raises(RuntimeError, backward, _wrong, np.ones(2), match="rule of 'test_bad_shape' returned a gradient of shape",
                  what="backward through a rule that returns "
                  "a gradient of the wrong shape: call_rule refuses it, so every rule must run through call_rule")
finally:
    for _op in ("test_stop", "test_recorded", "test_bad_shape"):
        del BACKWARD_RULES[_op]
assert_equal(len(_behind_a_stop), 0, "times the rule of a node that received no gradient ran (skip it: not even on zeros)")
_sq = _x * _x
_g2 = grad([_sq, _sq], [_x], grad_outputs=[np.ones(2), np.ones(2)])[0]
assert_close(_g2.numpy(), 4 * _x.numpy(), rtol=1e-12, atol=0, what="grad([y, y], x) for y = x * x, both seeds "
             "ones: the two roots' seeds add up, 2 * 2x")

_d = Tensor(1.0, dtype=np.float64, requires_grad=True)  # 60 stacked diamonds: linear, exact
_y = _d
for _ in range(60):
    _y = _y * 1.0 + _y * 1.0
backward(_y)
assert_equal(_d.grad.item(), 2.0 ** 60, "gradient through 60 stacked diamonds")

_leaf = Tensor([1.0, 2.0], requires_grad=True)  # a root that is itself a leaf: its gradient is the seed
backward(_leaf, np.array([3.0, 4.0]))
check(_leaf.grad is not None and _leaf.grad.tolist() == [3.0, 4.0],
      "backward(x, gradient) of a leaf x: the sink receives each root with its own gradient", got=_leaf.grad)
_kept = Tensor([1.0, 2.0], requires_grad=True) * 2.0  # a non-leaf root that asked to keep its gradient
_kept.retain_grad()
backward(_kept, np.array([1.0, -1.0]))
check(_kept.grad is not None and _kept.grad.tolist() == [1.0, -1.0],
      "a root that called retain_grad() gets its own gradient (the seed)", got=_kept.grad)

_x = Tensor([1.0, 2.0], requires_grad=True)
_h = _x.exp()
_y = _h * _h
_nodes = topological_order([_y.grad_fn])
backward(_y, np.ones(2))
check(all(n.inputs is None and n.attrs is None and n.output is None for n in _nodes),
      "every node is freed after backward(): it keeps no reference to anything it saved for its rule",
      got=[{n.name(): [field for field in ("inputs", "attrs", "output") if getattr(n, field) is not None]
            or "freed"} for n in _nodes], expected="every node: freed (each lists what it still holds)")
assert_raises(RuntimeError, backward, _y, np.ones(2), match="second time.*retain_graph",
              what="a second backward() through a freed graph")
_r = (_h * 2.0).sum()  # new nodes on top of h's freed one
_r.retain_grad()
_before = _x.grad.numpy().copy()
assert_raises(RuntimeError, backward, _r, match="second time", what="backward() into a part already freed")
check(_r.grad is None and np.array_equal(_x.grad.numpy(), _before),
      "no gradient reaches any tensor before the freed-graph error is raised", got=_r.grad)
_y = (_x.exp() * _x)
backward(_y, np.ones(2), retain_graph=True)
check(_y.grad_fn.inputs is not None, "retain_graph=True keeps the graph", got=_y.grad_fn.inputs)
assert_raises(RuntimeError, backward, Tensor([1.0, 2.0], requires_grad=True).exp(), match="scalar",
              what="backward() of a non-scalar tensor without gradient=")

BACKWARD_RULES["test_stop"] = lambda node, g: (None,)  # a rule that sends its input no gradient
try:
    _x = Tensor([1.0, 2.0], dtype=np.float64, requires_grad=True)
    _e = _x.exp()
    backward(tt.apply("test_stop", lambda t: t.numpy() * 1.0, _e), np.ones(2))
finally:
    del BACKWARD_RULES["test_stop"]
check(_e.grad_fn.inputs is None, "a node that received no gradient (exp, behind a rule that sent it none) "
      "is skipped, and still freed: every node reached drops its inputs (got: what exp's node still holds)",
      got=_e.grad_fn.inputs)

_x = Tensor([0.5, 1.5], dtype=np.float64, requires_grad=True)  # p feeds the root directly AND through log(p)
for _what, _make in [("p * log(p)", lambda p: p * p.log()), ("log(p) * p", lambda p: p.log() * p)]:
    _x.grad = None
    backward(_make(_x.exp()), np.ones(2))
    assert_close(_x.grad.numpy(), np.exp(_x.numpy()) * (_x.numpy() + 1), rtol=1e-12, atol=0,
                 what=f"x.grad for y = {_what}, p = exp(x): p's rule must run after log(p) has sent its part")

_x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
_h = _x * 2           # made by an op; nobody asked for its .grad
_k = _x * 3
_k.retain_grad()      # made by an op, and asked for its .grad
backward(_h * _k, np.ones(3))
check(_h.grad is None, "h = x * 2, made by an op: no .grad after backward (it did not call retain_grad())",
      got=_h.grad, expected=None)
check(_k.grad is not None, "k = x * 3 called k.retain_grad(): it gets a .grad", got=_k.grad)
assert_equal(_k.grad.numpy(), _h.numpy(), "k.grad after k.retain_grad(): d(h * k)/dk, with upstream ones, is h")

def _layers_then_backward(n=2**15, layers=24):
    """24 layers y = y * w on vectors of n float64, built and run backward."""
    weights = [Tensor(np.full(n, 1.01), requires_grad=True) for _ in range(layers)]
    y = Tensor(np.ones(n))
    for w in weights:
        y = y * w
    backward(y, np.ones(n))  # your engine (what y.backward(...) calls once exported)


_arrays = peak_bytes(_layers_then_backward) / (2**15 * 8)
check(_arrays <= 60, "backward frees each node as soon as its rule has run and drops each gradient once used: 24 "
      "layers y = y * w, built and run backward, peak at about two arrays a layer (the weights and the "
      "activations; each new weight gradient takes the place of an activation already released). Keeping the "
      "nodes, or the gradients, until the end adds one array a layer; got the peak, in arrays of a layer's size",
      got=round(_arrays, 1), expected="<= 60 for 24 layers")
print("✓ the engine: w.grad =", _w.grad.item(), "b.grad =", _b.grad.item(), "| shared node ran once on", _calls[0])

# %% [markdown]
# ### Why `.grad` accumulates, and what `zero_grad` is for
#
# Your sink **adds** into `.grad`; it never overwrites. That is not an accident:
#
# - inside one backward pass a parameter can receive several gradients (a weight shared by
#   two layers, a tensor used twice), and its gradient is their sum — accumulating is the
#   chain rule's "sum over paths";
# - across backward passes, accumulating lets you split a big batch into several small
#   ones: `backward()` on each part's loss adds up to the gradient of the whole batch
#   (**gradient accumulation**, the standard trick when a batch does not fit in memory);
# - and backward through two losses (`loss_a.backward(); loss_b.backward()`) gives the
#   gradient of `loss_a + loss_b`.
#
# The price: a training loop must **clear** the gradients before each step's backward,
# or every step adds the previous steps' gradients in. That is `zero_grad()` — module 03's
# `Module.zero_grad()` sets every parameter's `.grad` to `None` (module 07's optimizers have
# the same method). Forgetting it is one of the commonest training bugs: the loss falls at
# first, then the ever-growing "gradient" throws the parameters away.
#
# The check below shows all three: accumulation across calls, "half batch + half batch =
# whole batch", and `zero_grad()`.

# %% nbgrader={"grade": true, "grade_id": "test-accumulation", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch import nn

_x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
backward(_x * _x, np.ones(3))  # one tensor used twice: 2x
_first = _x.grad.numpy().copy()
backward(_x * 3.0, np.ones(3))  # a second backward ADDS 3
assert_equal(_first, 2 * _x.numpy(), "x.grad after backward(x * x)")
assert_equal(_x.grad.numpy(), 2 * _x.numpy() + 3.0, "x.grad after a second backward(3 * x): accumulated")

class _Scale(nn.Module):  # a one-parameter model, built only from ops whose rules you have
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(np.array([0.5, -1.0, 2.0]))

    def forward(self, x):
        return (x * self.w - 1.0) ** 2  # per-sample, per-feature losses; w broadcast over rows


_model = _Scale()
_data = np.arange(12.0).reshape(4, 3) / 10
_model.zero_grad()
backward(_model(Tensor(_data)), np.ones((4, 3)))  # the whole batch at once
_whole = _model.w.grad.numpy().copy()
_model.zero_grad()
check(_model.w.grad is None, "zero_grad() clears .grad (sets it to None)", got=_model.w.grad)
backward(_model(Tensor(_data[:2])), np.ones((2, 3)))  # first half ...
backward(_model(Tensor(_data[2:])), np.ones((2, 3)))  # ... plus second half
assert_close(_model.w.grad.numpy(), _whole, rtol=1e-12, what="w.grad: half batch + half batch vs whole batch")
backward(_model(Tensor(_data)), np.ones((4, 3)))  # no zero_grad: the old gradient stays in
assert_close(_model.w.grad.numpy(), 2 * _whole, rtol=1e-12, what="w.grad without zero_grad: doubled")
print("✓ accumulation: two half batches give the whole batch's weight.grad[0] =", _whole[0])

# %% [markdown]
# ## 8. Checking gradients numerically: `gradcheck`
#
# How do you know a backward rule is right? Compare it with the definition of the
# derivative. For a scalar function $f$ and a tiny $\varepsilon$, the **central difference**
#
# $$\frac{\partial f}{\partial x_i} \approx \frac{f(x + \varepsilon e_i) - f(x - \varepsilon e_i)}{2\varepsilon}$$
#
# has error $O(\varepsilon^2)$ (the one-sided $f(x+\varepsilon e_i) - f(x)$ over $\varepsilon$
# has $O(\varepsilon)$). It needs two evaluations of $f$ per input element — far too slow to
# train with, perfect for testing.
#
# **Why float64.** Rounding adds an error of about $\text{machine epsilon} \cdot |f| /
# \varepsilon$. In float32 (epsilon ≈ 1e-7) with $\varepsilon$ = 1e-6 that is ≈ 0.1 — the
# check would be noise. In float64 (epsilon ≈ 2e-16) it is ≈ 2e-10, and the truncation error
# $\varepsilon^2 \approx$ 1e-12: we can demand agreement to 1e-6 and catch any real bug.
# So `gradcheck` **refuses float32 inputs**.
#
# **A non-scalar function.** `fn` may return a tensor of any shape. We turn it into a
# scalar with fixed random weights $v$: $f(x) = \sum_j v_j \, \text{fn}(x)_j$. Then the
# analytical gradient of $f$ is exactly one backward pass with upstream gradient $v$ (the
# VJP $v^\top J$), and the numerical one perturbs each input element. Random $v$ (rather
# than all ones) matters: a rule that ignored its upstream gradient would pass with ones.
#
# **The criterion**, per input: with $a$ the analytical and $n$ the numerical gradient,
#
# $$\text{relative error} = \frac{\max_i |a_i - n_i|}{\max(1, \max_i |n_i|)} ,$$
#
# an absolute error for gradients of size ≤ 1 and a relative one for larger gradients;
# the check passes when it is **below `tol` = 1e-6** for every input. On failure, the
# error message names the input, the worst element and both values.
#
# Write `numerical_grad(f, x, eps)`: `f()` takes no arguments and returns a float; `x` is
# the float64 numpy array `f` reads (the memory of an input tensor), so changing an
# element of `x` in place changes what `f()` returns.
#
# <details><summary>Hint 1</summary>
#
# One partial derivative per element of `x`: how many calls of `f` does each need for the
# central difference above? numpy can enumerate every multi-index of a shape for you.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `f` reads `x` itself, not a copy: to evaluate $f(x + \varepsilon e_i)$, change element
# $i$ of `x`. Whatever you change must be put back exactly before you move on, or every
# later derivative (and the caller's tensor) is off.
# </details>
#
# <details><summary>The approach</summary>
#
# The function is a loop over positions and nothing more: at each position `f` is evaluated
# at two nudged versions of `x`, the difference quotient is recorded, and `x` is left
# exactly as it was found. "Exactly" is the subtle part: undoing a nudge by arithmetic
# (adding `eps` back) does not always return the same float, so the original value has to
# be kept rather than recomputed. A 0-d `x` has one position, the empty index.
# </details>

# %% nbgrader={"grade": false, "grade_id": "numerical-grad", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def numerical_grad(f, x, eps=1e-6):
    """Central-difference gradient of the scalar function f() w.r.t. every element of `x`.

    Contract: `f` takes no arguments and returns a float computed from the numpy array `x`
    (any shape, 0-d included, possibly a non-contiguous view such as a transpose), which it
    reads in place. Returns a float64 array of x's
    shape whose element i is the central-difference estimate of df/dx_i with step `eps`
    (error O(eps²): a one-sided difference is not accurate enough for the check). When it
    returns, x holds exactly its original values.
    """
    # Idea: one partial derivative per element, each from f at two nudged copies of the input.
    ### BEGIN SOLUTION
    out = np.zeros(x.shape, dtype=np.float64)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + eps
        f_plus = f()
        x[idx] = old - eps
        f_minus = f()
        x[idx] = old
        out[idx] = (f_plus - f_minus) / (2 * eps)
    return out
    ### END SOLUTION


# %% [markdown]
# `gradcheck` itself (provided) wraps your `numerical_grad`: it draws the random weights
# $v$, runs one backward pass for the analytical side and your central differences for the
# numerical side, and compares them with the criterion above.

# %%
#| export
class GradcheckError(RuntimeError):
    """Raised by gradcheck when an analytical gradient disagrees with central differences."""


def _float_outputs(out):
    """The floating tensors among fn's results (a Tensor, or a tuple such as max's)."""
    outs = [out] if isinstance(out, Tensor) else [o for o in out if isinstance(o, Tensor)]
    return [o for o in outs if o.dtype.kind == "f"]


def gradcheck(fn, inputs, eps=1e-6, tol=1e-6, raise_exception=True, seed=0):
    """Check the backward rules used by `fn(*inputs)` against float64 central differences.

    Every input Tensor with requires_grad=True is checked; it must be float64. Passes when,
    for each such input, max|analytical - numerical| / max(1, max|numerical|) < tol.
    Returns True, or raises GradcheckError naming the input, the worst element and both
    values (returns False instead when raise_exception=False).
    """
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    checked = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad; create the inputs to check with "
                         "requires_grad=True")
    for i in checked:
        t = inputs[i]
        if t.dtype != np.float64:
            raise TypeError(
                f"gradcheck: input {i} is {t.dtype}, but gradcheck needs float64: with float32's "
                f"~7 significant digits, central differences with eps={eps} lose almost all of "
                f"them to rounding. Create it with dtype=tinytorch.float64, or pass x.double() "
                f"(made a leaf with .detach().requires_grad_()).")
        if any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride())):
            raise ValueError(f"gradcheck: input {i} is an expanded view (stride 0), so perturbing "
                             f"one element would change several; pass a .clone()d leaf")
    with enable_grad():
        outs = _float_outputs(fn(*inputs))
    rng = np.random.default_rng(seed)
    weights = [rng.uniform(0.5, 1.5, o.shape) * rng.choice([-1.0, 1.0], o.shape) for o in outs]
    live = [(o, v) for o, v in zip(outs, weights) if o.requires_grad]
    targets = [inputs[i] for i in checked]
    if live:
        analytical = grad([o for o, _ in live], targets, [v for _, v in live], allow_unused=True)
    else:
        analytical = [None] * len(targets)

    def f():
        with no_grad():
            outs = _float_outputs(fn(*inputs))
        return float(sum(np.sum(o.numpy().astype(np.float64) * v) for o, v in zip(outs, weights)))

    for i, t, a in zip(checked, targets, analytical):
        a = np.zeros(t.shape) if a is None else a.numpy()
        n = numerical_grad(f, t.numpy(), eps)
        diff = np.abs(a - n)
        scale = max(1.0, float(np.abs(n).max(initial=0.0)))
        error = float(diff.max(initial=0.0)) / scale
        if not error < tol:  # also catches nan
            worst = np.unravel_index(int(np.nanargmax(np.where(np.isnan(diff), np.inf, diff))), t.shape) \
                if diff.size else ()
            msg = (f"gradcheck failed for input {i} (shape {t.shape}): relative error {error:.3g} "
                   f">= tol {tol:g}. Worst element {tuple(int(k) for k in worst)}: analytical "
                   f"(backward) {float(a[worst])!r}, numerical (central difference) {float(n[worst])!r}.")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


# %% [markdown]
# The checks from here on run `gradcheck` through a small wrapper, `check_gradcheck`: when
# a rule raises instead of returning (a numpy `AxisError` from a wrong axis, a shape that
# does not fit), the check shows what it raised as what it *got*, next to the gradient
# shapes it expected, instead of a bare traceback.

# %%
def check_gradcheck(fn, inputs, what):
    """check() that gradcheck(fn, inputs) passes; an exception from a rule is what it got."""
    got = outcome(lambda: gradcheck(fn, inputs))
    shapes = ", ".join(str(t.shape) for t in inputs if isinstance(t, Tensor) and t.requires_grad)
    check(got is True, what, got=got,
          expected=f"True: one gradient per input, of the input's shape ({shapes}), agreeing with central differences")


# %% nbgrader={"grade": true, "grade_id": "test-numerical-grad", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_v = np.array([[0.5, -1.0], [2.0, 0.25]])
_ng = numerical_grad(lambda: float(np.sum(_v ** 3)), _v)
assert_close(_ng, 3 * _v ** 2, rtol=1e-8, atol=1e-8, what="numerical gradient of sum(v**3)")  # a one-sided
assert_equal(_v, np.array([[0.5, -1.0], [2.0, 0.25]]), "v after numerical_grad (restored)")  # difference is off by 3v*eps
_tiny = np.array([2.36432494e-08, -3.76337096e-07, 0.1, 0.7])  # (v - eps) + eps is not v for the first two
_tiny_before = _tiny.copy()
numerical_grad(lambda: float(np.sum(_tiny ** 2)), _tiny)
_moved = [f"{b!r} became {a!r}" for a, b in zip(_tiny, _tiny_before) if a.tobytes() != b.tobytes()]
check(not _moved, "after numerical_grad every value of x is exactly what it was, to the last bit (in floating "
      "point, (v - eps) + eps is not always v, most visibly near 0)", got="; ".join(_moved))
assert_equal(_ng.dtype, np.dtype(np.float64), "dtype of the numerical gradient")
# For a cubic, the central difference with step eps is off by exactly eps² (the eps³ terms
# cancel, and the cubic has no higher ones): with eps = 0.1 every entry is 3v² + 0.01.
assert_close(numerical_grad(lambda: float(np.sum(_v ** 3)), _v, eps=0.1), 3 * _v ** 2 + 0.01, rtol=1e-12,
             atol=1e-12, what="numerical gradient of sum(v**3) with eps=0.1 (the step you were given, on both sides)")
_v32 = np.array([0.5, 2.0], dtype=np.float32)
assert_equal(numerical_grad(lambda: float(np.sum(_v32 ** 2)), _v32, eps=1e-2).dtype, np.dtype(np.float64),
             "dtype of the numerical gradient of a float32 x (the contract: float64 whatever x is)")
_s = np.array(1.5)  # a 0-d array
assert_close(numerical_grad(lambda: float(np.sin(_s)), _s), np.cos(1.5), rtol=1e-8, atol=1e-8, what="d sin(s)/ds at a 0-d s")
_t = np.array([[0.5, -1.0, 3.0], [2.0, 0.25, -0.5]]).T  # a transposed view: not contiguous
assert_close(numerical_grad(lambda: float(np.sum(_t ** 3)), _t), 3 * _t ** 2, rtol=1e-8, atol=1e-8,
             what="numerical gradient of sum(t**3) for a transposed t (nudge t itself, not a reshaped copy)")
_p = Tensor(np.array([[0.5, -1.2], [2.0, 0.3]]), requires_grad=True)
_q = Tensor(np.array([1.5, -0.7]), requires_grad=True)
check_gradcheck(lambda p, q: (p * q - p / q).exp() + (p * p).log(), [_p, _q],
                "gradcheck passes on exp, log, mul, div, sub with broadcasting")
assert_raises(TypeError, gradcheck, lambda p: p * 2, [Tensor([1.0, 2.0], requires_grad=True)],
              match="float64", what="gradcheck of a float32 input")
print("✓ numerical_grad and gradcheck: d(v³)/dv =", _ng.ravel())

# %% [markdown]
# From now on every rule is checked with `gradcheck`. (Inputs are chosen away from kinks —
# central differences across the corner of `abs` at 0 would average the two sides.)
#
# ## 9. Views and indexing
#
# A view moves no numbers: it only changes how the same elements are indexed. Every view
# element *is* one input element with slope 1, so the chain rule's sum is short: an input
# element collects the upstream gradient of every view element that shows it. For each
# view below, ask where in the output a given input element ends up (and how many times):
#
# - `transpose`, `permute`: the axes were reordered;
# - `view`, `reshape`, `squeeze`, `unsqueeze`: the shape changed — did the row-major order
#   of the elements change too?
# - `expand`: stride 0, so one input element shows up in many places.
#
# **Indexing** picks elements: `y = x[index]`. Each output element came from one input
# element, and the gradient must go back there. With advanced indexing the same input
# element can be picked several times (`x[[0, 0, 2]]`), and then its gradient is the
# **sum** (a "scatter-add"). The index in `node.attrs["index"]` can be anything numpy
# accepts — slices, `None`, `...`, integer arrays, boolean masks — and one idea handles
# them all without a case for each. `as_strided` (an arbitrary view, used for im2col in
# module 09) gets a provided rule at the end of section 10, once yours has shown the idea.
#
# <details><summary>Hint 1</summary>
#
# `transpose` swaps two axes: what undoes a swap? `permute` sends input axis `dims[k]` to
# output axis `k`: what permutation sends them back?
# </details>
#
# <details><summary>Hint 2</summary>
#
# For indexing: if you applied the same index to an array that holds, in each element, that
# element's own flat position in `x`, what would the result tell you about each output
# element?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Once you know where each output element came from, you need "add these gradients into
# those positions, repeats included". Counting how often each position occurs is a close
# cousin of that: what would a count be if each occurrence added a weight instead of 1?
# </details>
#
# <details><summary>The approach</summary>
#
# A view's backward is the same kind of view, undone: the gradient element that sits where
# the view put an input element belongs to that input element. So each view rule is the
# inverse of its forward — of a swap, of a permutation, of a change of shape (the input's
# shape is on the node), of a broadcast (you have written that inverse already). Indexing
# is the one that needs an idea, because an arbitrary index has no inverse you could
# write down: but you can run it *forward* on an array that labels every element of `x`
# with its own position, and then the labels say where each gradient goes, repeated
# labels included.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rules-views", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("transpose")
def _transpose_backward(node, grad):
    """y = x.transpose(dim0, dim1) (attrs: dim0, dim1, non-negative ints: negative dims
    were already wrapped). Also records x.mT.

    Contract (every rule below): returns a one-element tuple, the gradient of x, a numpy
    array of x's shape. Here x has any number of dimensions (0-d included, recorded as
    transpose(0, 0)), and dim0, dim1 may be any two of them (equal, or not adjacent).
    """
    # Idea: undo what the forward did to the axes.
    ### BEGIN SOLUTION
    if grad.ndim == 0:
        return (grad,)
    return (np.swapaxes(grad, node.attrs["dim0"], node.attrs["dim1"]),)
    ### END SOLUTION


@backward_rule("permute")
def _permute_backward(node, grad):
    """y = x.permute(dims) (attrs: dims, a permutation of 0..x.ndim-1; output dim k is
    input dim dims[k]). Also records x.T."""
    # Idea: which permutation puts every axis back where it came from?
    ### BEGIN SOLUTION
    return (np.transpose(grad, np.argsort(node.attrs["dims"])),)
    ### END SOLUTION


@backward_rule("view", "reshape", "squeeze", "unsqueeze")
def _reshape_backward(node, grad):
    """y = x.view/reshape/squeeze/unsqueeze(...) (also flatten); x may be non-contiguous."""
    # Idea: which input element does each output element hold?
    ### BEGIN SOLUTION
    return (grad.reshape(node.inputs[0].shape),)
    ### END SOLUTION


@backward_rule("expand")
def _expand_backward(node, grad):
    """y = x.expand(shape) (also broadcast_to, expand_as): new leading dimensions and
    size-1 dimensions stretched."""
    # Idea: each input element appears in several output places: what does the chain rule do with several uses?
    ### BEGIN SOLUTION
    return (unbroadcast(grad, node.inputs[0].shape),)
    ### END SOLUTION


@backward_rule("getitem")
def _getitem_backward(node, grad):
    """y = x[index] (attrs: index, which works as x.numpy()[index]).

    Any index numpy accepts (basic, advanced, boolean, repeated). An input element picked
    k times gets the sum of those k gradients; one never picked gets 0.
    """
    # Idea: find where each output element came from, then add the gradients back there.
    ### BEGIN SOLUTION
    x = node.inputs[0]
    source = np.arange(x.numel()).reshape(x.shape)[node.attrs["index"]]
    total = np.bincount(np.ravel(source), weights=np.ravel(grad), minlength=x.numel())
    return (total.reshape(x.shape),)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-rules-views", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_x4 = Tensor(_rng.standard_normal((2, 3, 3, 2)), requires_grad=True)
_g4 = np.arange(36.0).reshape(2, 3, 3, 2)  # an upstream gradient for x4.transpose(0, 3), also (2, 3, 3, 2)
assert_equal(_transpose_backward(_x4.transpose(0, 3).grad_fn, _g4)[0], np.einsum("ljki->ijkl", _g4),
             "transpose(0, 3)'s gradient: x[i, j, k, l] gets the upstream entry [l, j, k, i] (dims 1, 2 stay put)")
_x = Tensor(_rng.standard_normal((2, 3, 4)), requires_grad=True)
_s = Tensor(_rng.standard_normal((3, 1)), requires_grad=True)
for _what, _fn, _ins in [
    ("transpose (not square, so a wrong swap fails)", lambda x: x.transpose(0, 2) * Tensor(np.arange(24.0).reshape(4, 3, 2)), [_x]),
    ("transpose(0, 1) of a 3-D tensor", lambda x: x.transpose(0, 1), [_x]),
    ("transpose(0, 0) of a 0-d tensor", lambda x: x[1, 2, 3].transpose(0, 0) * 3.0, [_x]),
    ("permute (1, 2, 0): its inverse is (2, 0, 1), not itself",
     lambda x: x.permute(1, 2, 0) * Tensor(np.arange(24.0).reshape(3, 4, 2)), [_x]),
    ("reshape of a non-contiguous tensor (a copy)", lambda x: x.T.reshape(-1), [_x]),
    ("squeeze, unsqueeze, reshape, view", lambda x: x[:, :1].squeeze(1).unsqueeze(0).reshape(8).view(2, 4), [_x]),
    ("expand (3, 1) -> (2, 3, 4)", lambda s: s.expand(2, 3, 4), [_s]),
    ("basic indexing: int, step slice, None", lambda x: x[1, ::2, None, 1:3], [_x]),
    ("advanced indexing with a repeated index", lambda x: x[Tensor([0, 0, 1, 0]), 1], [_x]),
    ("a boolean mask", lambda x: x[x.detach() > 0], [_x]),
]:
    check_gradcheck(_fn, _ins, f"gradcheck: {_what}")
_ga = call_rule(_x[Tensor([1, 1, 1])].grad_fn, np.ones((3, 3, 4)))[0]
assert_equal(_ga[1], np.full((3, 4), 3.0), "gradient of x[1] when x[[1, 1, 1]] was taken: three uses add up")
assert_equal(_ga[0], np.zeros((3, 4)), "gradient of x[0], never picked")
print("✓ view and indexing rules; x[[1, 1, 1]] sends x[1] the gradient", _ga[1, 0, 0])

# %% [markdown]
# ## 10. Reductions, matmul, joining
#
# **sum and mean.** Derive them like the arithmetic. Take a `(2, 3)` tensor summed over
# dim 1: $y_0 = x_{00} + x_{01} + x_{02}$ and $y_1 = x_{10} + x_{11} + x_{12}$. Which
# outputs does one $x_{ij}$ reach, and with which slope? Your answer says what every
# element of `x` receives — and it has a shape problem attached: with `keepdim=False` the
# reduced dimensions are gone from `grad`. `mean` is a sum followed by a division: by
# which number, when `dim` is a tuple of several dimensions? (The attrs hold the normalised
# `dim` tuple and `keepdim`.)
#
# **max and min.** Only the winning element changed the output, so it alone gets the
# gradient. Ties need a convention; we follow PyTorch's: `amax`/`amin` (and `max()`
# without `dim`) **split** the gradient evenly among all tied elements, while
# `max(dim)`/`min(dim)` give it to the element at the returned index (saved in
# `attrs["indices"]`). Both are provided, after the rules you write here and in the next part.
#
# **matmul.** For $Y = A B$ with $A$: $(m, k)$ and $B$: $(k, n)$, each output element is
# $Y_{ij} = \sum_p A_{ip} B_{pj}$. The chain rule's sum is
#
# $$\bar A_{ip} = \sum_{i', j} \bar Y_{i'j}\, \frac{\partial Y_{i'j}}{\partial A_{ip}} .$$
#
# Find which $Y_{i'j}$ contain $A_{ip}$ at all, and with which slope; the sum that is left
# runs over one index and is again a matrix product — of $\bar Y$ with something made of
# $B$. Then derive $\bar B$ the same way. The shapes check your answer: $\bar A$ must come
# out $(m, k)$ like $A$, and $\bar B$ $(k, n)$ like $B$.
#
# *A worked example of a different op*, the outer product $Y = u v^\top$ of $u$: $(m,)$ and
# $v$: $(n,)$, so $Y_{ij} = u_i v_j$. The outputs containing $u_p$ are the row $Y_{pj}$, each
# with slope $v_j$, so $\bar u_p = \sum_j \bar Y_{pj} v_j$: a matrix-vector product,
# $\bar u = \bar Y v$, with shapes $(m, n)(n,) = (m,)$. Likewise $u_i$ multiplies $v_q$ in
# the column $Y_{iq}$, so $\bar v_q = \sum_i \bar Y_{iq} u_i$, that is $\bar v = \bar Y^\top u$,
# $(n, m)(m,) = (n,)$. The recipe — which outputs contain the element, the surviving sum,
# recognise a product, check the shapes — is all matmul needs.
#
# With batches, `np.matmul` does the 2-D product for every matrix of the batch, and your
# formulas apply to the last two axes of each. Two details: a batch dimension that was
# **broadcast** (a `(5, 3)` weight used by all 8 matrices of an `(8, 4, 5)` batch) needs its
# gradient summed over the batch; and a **1-D** operand was promoted to a matrix (`(k,)` to
# `(1, k)` on the left, `(k, 1)` on the right) and the extra dimension dropped from the
# result. Compute each input's gradient only if that input requires grad — the first
# layer's input is data, and its gradient would be a wasted matmul.
#
# **cat and stack** (provided) split the gradient: `cat` at the recorded `sizes` along
# `dim`, `stack` into its slices along the new `dim`.
#
# ### One GEMM for a Linear layer's weight gradient
#
# The commonest matmul of all is a batch of rows times **one** weight matrix: a Linear
# layer on a `(B, T, in)` batch of sequences, times `W` of shape `(in, out)`. `W` is shared
# by all `B` matrices of the batch — reused, exactly like a broadcast input — so its
# gradient is the sum, over the batch, of the 2-D weight gradient you just derived. Done
# literally that is `B` products of shape `(in, out)` and a sum of them. Write your 2-D
# formula in indices, then add the sum over the batch: can the two sums become one?
#
# Write `linear_weight_grad(a, g)`, which computes that gradient with **one** ordinary
# matrix product (one GEMM, in BLAS's name) — no batched product, no sum afterwards, and
# a product that BLAS computes (`np.einsum` without `optimize=` runs numpy's own loops).
# Section 15 measures what that buys. Its check compares your result with the gradient
# computed from the definition (for a function linear in `W`, the derivative along a unit
# matrix is the function's value there) and hands your function arrays of a small numpy
# subclass that notes every numpy operation they take part in, so it sees how many
# products (and of which shapes) your function makes, and whether it sums afterwards.
#
# <details><summary>Hint 1</summary>
#
# Write your 2-D weight gradient for one batch entry in index form: which index does it sum
# over? Now add the sum over batch entries. Which two sums could be one?
# </details>
#
# <details><summary>Hint 2</summary>
#
# If the batch boundaries did not matter, what shape could `a` have instead of
# `(B, T, in)` without changing the result? Which operations of numpy change a shape
# without copying a contiguous array?
# </details>
#
# <details><summary>Hint 3</summary>
#
# Flattening the rows and moving an axis are different operations: a reshape never
# transposes. Keep the rows of `a` and of `g` in the same order.
# </details>
#
# <details><summary>The approach</summary>
#
# Once all rows of all matrices are stacked into one long matrix — for `a` and for `g`, in
# the same order — the sum over the batch and the sum over rows become the single inner
# dimension of one product. What is left is orientation: your 2-D derivation says which of
# the two stacked operands is transposed so that the result comes out `(in, out)`.
# </details>

# %% nbgrader={"grade": false, "grade_id": "linear-weight-grad", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def linear_weight_grad(a, g):
    """The gradient of W in Y = A @ W, where A has batch dims and W is one matrix.

    Contract: `a` is a numpy array of shape (..., n, k), `g` (the upstream gradient of Y)
    of shape (..., n, m) with the same leading dims (one or more of them, at least one
    row); either may be non-contiguous. Returns the (k, m) gradient of W (shared by every
    batch entry). Cost: exactly one 2-D matrix product and nothing summed after it; no
    batched matmul, no loop (the check and the tests watch which numpy operations it makes).
    """
    # Idea: write dW as a sum over batch entries and rows: which of those sums can one product do?
    ### BEGIN SOLUTION
    k, m = a.shape[-1], g.shape[-1]
    return a.reshape(-1, k).T @ g.reshape(-1, m)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-linear-weight-grad", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _check_one_gemm(fn, arrays, what, weight_shape):
    """Check that fn's `weight_shape` gradient comes from one matrix product
    (tinytorch.testing.one_gemm_problems). Returns fn's result and the products and sums it made."""
    result, log = spied(fn, *arrays)
    seen = [e for e in log if e[0] in ("matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron")
            or e[0].endswith(".reduce")]
    check(not one_gemm_problems(log, weight_shape),
          f"{what}: one 2-D matrix product, computed by BLAS, gives the whole {weight_shape} gradient "
          f"(no batched product, no product per batch entry or per row, no sum afterwards, no plain einsum)",
          got=seen, expected=f"a single 2-D matmul whose result has shape {weight_shape}, and nothing summed")
    return result, seen


def _weight_grad_by_definition(a, g):
    """dL/dW for L = sum(g * (a @ W)), from the definition alone: L is linear in W, so its
    derivative along the unit matrix E_km (1 at (k, m), 0 elsewhere) is L(E_km) itself."""
    k, m = a.shape[-1], g.shape[-1]
    out = np.zeros((k, m))
    for i, j in np.ndindex(k, m):
        unit = np.zeros((k, m))
        unit[i, j] = 1.0
        out[i, j] = np.sum(g * (a @ unit))
    return out


_rng = np.random.default_rng(5)
for _sa, _sg in [((2, 3, 4), (2, 3, 5)), ((2, 2, 3, 4), (2, 2, 3, 2)), ((1, 6, 4), (1, 6, 4))]:
    _av, _gv = _rng.standard_normal(_sa), _rng.standard_normal(_sg)
    _lw = outcome(lambda: linear_weight_grad(_av, _gv))
    check(not isinstance(_lw, str), f"linear_weight_grad for a {_sa} and g {_sg} runs", got=_lw)
    assert_close(_lw, _weight_grad_by_definition(_av, _gv), rtol=1e-10, atol=1e-12,
                 what=f"linear_weight_grad for a {_sa} and g {_sg}, against the definition of the derivative")
_at = _rng.standard_normal((4, 3, 2)).transpose(0, 2, 1)  # a non-contiguous batch (4, 2, 3)
_gt = _rng.standard_normal((4, 2, 5))
_lw = outcome(lambda: linear_weight_grad(_at, _gt))
check(not isinstance(_lw, str), "linear_weight_grad of a non-contiguous (transposed) batch (4, 2, 3) runs", got=_lw)
assert_close(_lw, _weight_grad_by_definition(_at, _gt), rtol=1e-10, atol=1e-12,
             what="linear_weight_grad of a non-contiguous (transposed) batch")
_av, _gv = _rng.standard_normal((3, 4, 5)), _rng.standard_normal((3, 4, 2))
_spied, _seen = _check_one_gemm(linear_weight_grad, [_av, _gv], "linear_weight_grad of a (3, 4, 5) and g (3, 4, 2)",
                                weight_shape=(5, 2))
assert_close(np.asarray(_spied), _weight_grad_by_definition(_av, _gv), rtol=1e-10, atol=1e-12,
             what="linear_weight_grad of a (3, 4, 5) and g (3, 4, 2), computed on spying arrays")
print("✓ linear_weight_grad of a (3, 4, 5) and g (3, 4, 2): seen", _seen)

# %% [markdown]
# ### The rules: sum, mean and matmul
#
# Now the rules you derived at the start of this section. Your `_matmul_backward` should
# use `linear_weight_grad` for the weight whenever the left operand has batch dimensions
# and the right one is a single matrix.
#
# <details><summary>Hint 1</summary>
#
# `sum`: your derivation says each element of `x` receives the upstream gradient of the
# output it went into. With `keepdim=False` the reduced dimensions are gone from `grad`.
# Which shape of `grad` would broadcast against `x`'s shape so that each element meets the
# right entry, and can you get there, and to `x`'s shape, without copying?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `matmul`: undo the forward's conveniences around your 2-D formulas. A 1-D operand was
# promoted to a matrix, so work with the promoted shapes and return to the original ones
# at the end; `grad` then has the promoted result's shape. "Transpose" means swapping the
# last two axes of a batch. A batch dimension that was broadcast needs folding, and you
# have a function for that.
# </details>
#
# <details><summary>The approach</summary>
#
# `sum` and `mean` are your derivation read as a shape operation: the gradient of a
# reduction is a stretch back along the reduced dimensions, scaled for a mean by how many
# elements each output averaged. `matmul` is your 2-D derivation plus bookkeeping: every
# convenience of the forward (1-D promotion, batch broadcasting) has an inverse in the
# backward, and each input's gradient passes through those inverses in the reverse order
# to end up in its input's shape. The weight of a batched Linear layer is the one case
# that takes a different route, through `linear_weight_grad`, because there the batch
# folding and the product are one GEMM.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rules-reductions", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("sum")
def _sum_backward(node, grad):
    """y = x.sum(dim, keepdim) (attrs: dim, a tuple of non-negative ints, every dim of x
    for a full sum; keepdim). x may be 0-d.

    Contract (every rule below): returns a tuple, one numpy gradient per input, each of
    that input's shape (None for an input that does not require grad).
    """
    # Idea: which outputs does one input element reach, and with which slope?
    ### BEGIN SOLUTION
    x = node.inputs[0]
    g = grad if node.attrs["keepdim"] else np.expand_dims(grad, node.attrs["dim"])
    return (np.broadcast_to(g, x.shape),)
    ### END SOLUTION


@backward_rule("mean")
def _mean_backward(node, grad):
    """y = x.mean(dim, keepdim) (attrs as for sum). x may be 0-d."""
    # Idea: a mean is a sum followed by a division by a constant.
    ### BEGIN SOLUTION
    x = node.inputs[0]
    n = 1
    for d in node.attrs["dim"]:
        n *= x.shape[d]
    g = grad if node.attrs["keepdim"] else np.expand_dims(grad, node.attrs["dim"])
    return (np.broadcast_to(g / n, x.shape),)
    ### END SOLUTION


@backward_rule("matmul")
def _matmul_backward(node, grad):
    """y = a @ b with numpy's rules: 1-D operands (promoted to a row or a column, the extra
    dim dropped), and batch dims that broadcast against each other, (2, 1, 3, 4) @ (5, 4, 2)
    included. Returns (grad_a, grad_b), of a's and b's shapes; None for an input that
    does not require grad, whose product is never computed (§15 measures the saving). When a has batch dims and b
    is one matrix (a batched Linear layer), b's gradient is one 2-D matrix product over all
    rows, as in linear_weight_grad (no batched product, nothing summed afterwards)."""
    # Idea: your 2-D derivation; the shapes are the work.
    ### BEGIN SOLUTION
    a, b = node.inputs
    av, bv = a.numpy(), b.numpy()
    a2 = av[None, :] if av.ndim == 1 else av
    b2 = bv[:, None] if bv.ndim == 1 else bv
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    g = grad.reshape(batch + (a2.shape[-2], b2.shape[-1]))
    ga = gb = None
    if a.requires_grad:
        ga = unbroadcast(g @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
    if b.requires_grad:
        if b2.ndim == 2 and a2.ndim > 2:  # a batch of rows times one matrix: one GEMM
            gb = linear_weight_grad(a2, g).reshape(b.shape)
        else:
            gb = unbroadcast(np.swapaxes(a2, -1, -2) @ g, b2.shape).reshape(b.shape)
    return ga, gb
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-rules-reductions", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(1)
_x = Tensor(_rng.standard_normal((2, 3, 4)), requires_grad=True)
for _what, _fn in [("sum()", lambda x: x.sum()), ("sum((0, 2))", lambda x: x.sum((0, 2))),
                   ("sum(1, keepdim=True)", lambda x: x.sum(1, keepdim=True)),
                   ("sum(1) (keepdim=False, a middle dim)", lambda x: x.sum(1)),
                   ("mean(-1, keepdim=True)", lambda x: x.mean(-1, keepdim=True)),
                   ("mean((0, 1))", lambda x: x.mean((0, 1))), ("mean()", lambda x: x.mean()),
                   ("mean(1) (keepdim=False, a middle dim)", lambda x: x.mean(1))]:
    check_gradcheck(_fn, [_x], f"gradcheck of x.{_what} for x of shape (2, 3, 4)")
for _sa, _sb in [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)),
                 ((4,), (2, 4, 3)), ((2, 3, 4), (4,))]:  # a 1-D operand against a batch
    _A = Tensor(_rng.standard_normal(_sa), requires_grad=True)
    _B = Tensor(_rng.standard_normal(_sb), requires_grad=True)
    check_gradcheck(lambda a, b: a @ b, [_A, _B], f"gradcheck of a @ b for shapes {_sa} @ {_sb}")
_A = Tensor(_rng.standard_normal((2, 3, 4)))  # data: only the weight needs a gradient
_B = Tensor(_rng.standard_normal((4, 5)), requires_grad=True)
_up = _rng.standard_normal((2, 3, 5))
(_ra, _rb), _seen = _check_one_gemm(lambda g: call_rule((_A @ _B).grad_fn, g), [_up],  # see linear_weight_grad's check
                                    "the matmul rule's weight gradient for a (2, 3, 4) batch @ a (4, 5) matrix",
                                    weight_shape=(4, 5))
check(_ra is None, "no gradient for an input that does not require grad", got=_ra)
check(len([e for e in _seen if e[0] in ("matmul", "dot", "tensordot", "einsum")]) == 1,
      "the rule makes one product, for the weight alone: a is data, and computing its gradient (even to "
      "throw it away) is a wasted matmul", got=_seen, expected="one product, giving the (4, 5) weight gradient")
assert_close(_rb, _weight_grad_by_definition(_A.numpy(), _up), rtol=1e-10, atol=1e-12,
             what="the weight gradient of a (2, 3, 4) batch @ a (4, 5) matrix, against the definition")
_W = Tensor(_rng.standard_normal((4, 5)))  # a frozen weight: only the input needs a gradient
_X = Tensor(_rng.standard_normal((3, 4)), requires_grad=True)
(_rx, _rw), _seen_x = spied(lambda g: call_rule((_X @ _W).grad_fn, g), _rng.standard_normal((3, 5)))
check(_rw is None and len([e for e in _seen_x if e[0] in ("matmul", "dot", "tensordot", "einsum")]) == 1,
      "x @ W with a frozen W: one product, for x's gradient, and None for W's (no product made for it)",
      got=(None if _rw is None else "an array", _seen_x), expected=(None, [("matmul", ((3, 5), (5, 4)), (3, 4))]))
print("✓ sum, mean and matmul rules; weight gradient of a (2, 3, 4) batch @ a (4, 5) matrix:", _seen)

# %% [markdown]
# <details><summary>Summary to compare with (open once your check passes)</summary>
#
# | op | gradient of the input(s) |
# |---|---|
# | `x.sum(dim)` | $\bar y$ with the reduced dims put back as size 1, broadcast to `x`'s shape |
# | `x.mean(dim)` | the same divided by $n = \prod_{d \in \text{dim}} \text{shape}[d]$ |
# | `A @ B` | $\bar A = \bar Y B^\top$: $(m, n)(n, k) = (m, k)$; $\bar B = A^\top \bar Y$: $(k, m)(m, n) = (k, n)$ |
#
# For a batched Linear layer $\bar W = \sum_{\text{rows } r} A_r^\top \bar Y_r$ over every row of
# every batch entry: one `(in, B·T) @ (B·T, out)` product.
# </details>

# %% [markdown]
# ### More ops: running sums, sorting, triangles
#
# Module 01 also provides `cumsum`, `sort`/`topk`, `tril`/`triu`, `maximum`/`minimum`,
# `flip` and `roll`. Two of their rules are yours, because each is an idea worth having:
#
# - `y = x.cumsum(dim)`, the running sum: $y_j = \sum_{i \le j} x_i$ along `dim`.
# - `values, indices = x.topk(k, dim)` (and `x.sort(dim)`, which is topk of all elements):
#   each output value is one chosen input element; `indices` says which.
#
# Derive both with the chain rule's sum, $\bar x_i = \sum_j \bar y_j\, \partial y_j / \partial x_i$,
# and make each rule as fast as its forward: no Python loop over elements, no matrix.
# The check holds you to that with two meters (defined just before it, and used again in
# section 11): it counts the Python steps your rule runs on a `(2, 3)` input and on a
# `(60, 70)` one — a rule whose work happens inside numpy runs about the same number at
# both sizes, a loop over elements or rows runs hundreds more — and it measures the peak
# memory your rule allocates on a `(4, 500)` input: a few arrays of `x`'s size pass, a
# `500 × 500` matrix does not.
#
# <details><summary>Hint 1 (cumsum)</summary>
#
# Write out the gradient of x[0] for a 1-D input of length 3: which upstream gradients
# does it collect? And x[2]? Is that set a prefix or a suffix of the gradient?
# </details>
#
# <details><summary>Hint 2 (cumsum)</summary>
#
# numpy's running sum only runs one way, from the start. Which cheap view of an array
# turns "from position i to the end" into "from the start to some position"?
# </details>
#
# <details><summary>The approach (cumsum)</summary>
#
# Write the gradient of x[i] as a sum over the outputs that x[i] contributes to, and look at
# which upstream entries that sum covers as i moves. Then ask how all of those sums can
# cost one cumulative sum, as the forward does, and no copy.
# </details>
#
# <details><summary>Hint 1 (sort and topk)</summary>
#
# An element that was not chosen did not affect the output: what is its gradient? And a
# chosen one: which upstream entry is its own?
# </details>
#
# <details><summary>The approach (sort and topk)</summary>
#
# The rule is the indexing rule of section 9 in a special form: the saved indices are the
# labels, and along `dim` each label occurs once, so no counting is needed, only placing.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rules-more-ops", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("cumsum")
def _cumsum_backward(node, grad):
    """y = x.cumsum(dim) (attrs: dim, a non-negative int). Returns (grad_x,), x's shape."""
    # Idea: which outputs y[j] contain x[i]?
    ### BEGIN SOLUTION
    d = node.attrs["dim"]
    g = np.asarray(grad).reshape(grad.shape or (1,))
    return (np.flip(np.cumsum(np.flip(g, d), axis=d), d).reshape(np.shape(grad)),)
    ### END SOLUTION


@backward_rule("sort", "topk")
def _topk_backward(node, grad):
    """values = x.topk(k, dim) or x.sort(dim).values (attrs: dim; indices, the numpy int
    array of chosen positions along dim, the shape of values). Returns (grad_x,), x's shape."""
    # Idea: each value came from one input position; the others get zero.
    ### BEGIN SOLUTION
    x = node.inputs[0]
    d, idx = node.attrs["dim"], node.attrs["indices"]
    out = np.zeros(x.shape or (1,), dtype=grad.dtype)
    np.put_along_axis(out, idx.reshape(idx.shape or (1,)), np.reshape(grad, idx.shape or (1,)), axis=d)
    return (out.reshape(x.shape),)
    ### END SOLUTION


# %% [markdown]
# The two meters. `python_steps` counts the lines and function calls that Python executes
# while a function runs (numpy's compiled loops count nothing, however many elements they
# touch); `peak_bytes` measures the most memory the function allocated at any moment while
# it ran (numpy reports its arrays to Python's `tracemalloc`). `check_rule_costs` runs a
# backward rule under both.

# %%
from tinytorch.testing import python_steps  # the step meter the tests use too (peak_bytes is imported above)


def check_rule_costs(op, forward, what, loops=True, small=(2, 3), large=(60, 70), wide=(4, 500)):
    """Check that the rule registered for `op` (recorded by `forward(x)`, along dim 1) runs
    about as many Python steps for x of shape `large` as for `small` (when `loops`), and
    allocates at most 8 arrays of x's size for x of shape `wide`. Returns the figures."""
    rule = BACKWARD_RULES[op]
    rng = np.random.default_rng(0)

    def node_and_grad(shape):
        node = forward(Tensor(rng.standard_normal(shape), requires_grad=True)).grad_fn
        return node, rng.standard_normal(node.output.shape)

    figures = {}
    if loops:
        steps = [outcome(lambda: python_steps(rule, *node_and_grad(shape))) for shape in (small, large)]
        check(all(type(n) is int for n in steps) and steps[1] <= steps[0] + 40,
              f"{what}: Python steps (lines and calls) the rule runs for x of shape {small} and of shape {large}",
              got=steps, expected=f"about the same number at both sizes (at most {steps[0]} + 40 at {large} "
                                  f"if {steps[0]} at {small}): no Python loop over elements or rows")
        figures["steps"] = steps
    node, g = node_and_grad(wide)
    limit = 8 * node.inputs[0].nbytes
    peak = outcome(lambda: peak_bytes(rule, node, g))
    check(type(peak) is int and peak <= limit,
          f"{what}: peak memory the rule allocates for x of shape {wide} ({node.inputs[0].nbytes} bytes)",
          got=peak, expected=f"at most {limit} bytes (8 arrays of x's size): no {wide[1]} x {wide[1]} matrix")
    figures["peak in x's"] = round(peak / node.inputs[0].nbytes, 1)
    return figures


# %% nbgrader={"grade": true, "grade_id": "test-rules-more-ops", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_x1 = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
_g = outcome(lambda: call_rule(_x1.cumsum(0).grad_fn, np.array([1.0, 10.0, 100.0]))[0])
_by_moving_each_x = [float(np.sum(np.array([1.0, 10.0, 100.0]) * np.cumsum(_e))) for _e in np.eye(3)]
assert_equal(_g, np.array(_by_moving_each_x), "cumsum of a length-3 x, upstream [1, 10, 100], against the "
             "definition: how far the loss moves when one x[i] alone moves by 1 (cumsum is linear)")
_xc = Tensor(np.random.default_rng(2).standard_normal((3, 4)), requires_grad=True)
for _d in (0, 1):
    check_gradcheck(lambda x: x.cumsum(_d), [_xc], f"gradcheck of x.cumsum({_d}) for x of shape (3, 4)")
_xt = Tensor(np.array([[0.3, -1.0, 2.0, 0.7], [5.0, 4.0, -2.0, 1.0]]), requires_grad=True)
_top = _xt.topk(2, dim=1)
_g = outcome(lambda: call_rule(_top.values.grad_fn, np.array([[1.0, 2.0], [3.0, 4.0]]))[0])
assert_equal(_g, np.array([[0.0, 0.0, 1.0, 2.0], [3.0, 4.0, 0.0, 0.0]]),
             "topk(2, dim=1)'s rule for the upstream [[1, 2], [3, 4]]")
for _what, _fn in [("topk(1, dim=0)", lambda x: x.topk(1, dim=0).values),
                   ("topk(3, largest=False)", lambda x: x.topk(3, largest=False).values),
                   ("sort(dim=1)", lambda x: x.sort(dim=1).values),
                   ("sort(dim=0, descending=True)", lambda x: x.sort(dim=0, descending=True).values)]:
    check_gradcheck(_fn, [_xt], f"gradcheck of x.{_what} for x of shape (2, 4)")
_costs = {"cumsum": check_rule_costs("cumsum", lambda x: x.cumsum(1), "cumsum's rule"),
          "sort": check_rule_costs("sort", lambda x: x.sort(dim=1).values, "sort's rule"),
          "topk": check_rule_costs("topk", lambda x: x.topk(x.shape[1] // 2, dim=1).values, "topk's rule")}
print("✓ cumsum and sort/topk rules; cumsum gradient of [1, 2, 3] with upstream [1, 10, 100]:",
      call_rule(_x1.cumsum(0).grad_fn, np.array([1.0, 10.0, 100.0]))[0], "| costs:", _costs)

# %% [markdown]
# The other rules of sections 10 and this one are provided; read them now that yours pass.
# `amax` sends the gradient to the elements that equal the maximum (split evenly on a
# tie, as PyTorch does), and `max(dim)` to the one its saved index names; `cat` and
# `stack` cut the gradient back into their inputs' pieces; a triangle passes the gradient
# through where it kept the input; `maximum` sends it to the larger operand (half to each
# on a tie); `flip` and `roll` send it back by flipping and rolling the other way.

# %%
#| export
@backward_rule("tril", "triu")
def _tri_backward(node, grad):
    keep = np.tril if node.op == "tril" else np.triu
    return (keep(grad, node.attrs["diagonal"]),)


@backward_rule("maximum", "minimum")
def _maximum_backward(node, grad):
    a, b = node.inputs
    av, bv = a.numpy(), b.numpy()
    wins = (av > bv) if node.op == "maximum" else (av < bv)
    share = np.where(av == bv, 0.5, np.where(wins, 1.0, 0.0)).astype(grad.dtype)
    ga = unbroadcast(grad * share, a.shape) if a.requires_grad else None
    gb = unbroadcast(grad * (1 - share), b.shape) if b.requires_grad else None
    return ga, gb


@backward_rule("flip")
def _flip_backward(node, grad):
    dims = node.attrs["dims"]
    return (np.flip(grad, dims).copy() if dims else grad,)


@backward_rule("roll")
def _roll_backward(node, grad):
    shifts, dims = node.attrs["shifts"], node.attrs["dims"]
    back = tuple(-s for s in shifts)
    return (np.roll(grad, back if dims else back[0], dims),)


def _keep_reduced(arr, attrs):
    """A reduction's output or gradient with the reduced dims put back as size 1."""
    return arr if attrs["keepdim"] else np.expand_dims(arr, attrs["dim"])


@backward_rule("amax", "amin")
def _amax_backward(node, grad):
    x = node.inputs[0].numpy()
    winners = x == _keep_reduced(node.output, node.attrs)
    count = winners.sum(axis=node.attrs["dim"], keepdims=True)
    return (np.where(winners, _keep_reduced(grad, node.attrs) / count, 0.0),)


@backward_rule("norm")
def _norm_backward(node, grad):
    # Tensor.norm()'s Euclidean norm (a provided spelling): x / ||x|| per slice, and 0 for an
    # all-zero slice, where the norm has no derivative (PyTorch's subgradient)
    x = node.inputs[0].numpy()
    norm = _keep_reduced(node.output, node.attrs)
    safe = np.where(norm == 0, 1, norm)
    return (np.where(norm == 0, 0, _keep_reduced(grad, node.attrs) * x / safe),)


@backward_rule("max", "min")
def _max_dim_backward(node, grad):
    # max(dim) keeps one position per slice: topk's rule with k = 1, once the dim is back
    return _topk_backward(node, grad if node.attrs["keepdim"] else np.expand_dims(grad, node.attrs["dim"]))


@backward_rule("cat")
def _cat_backward(node, grad):
    cuts = np.cumsum(node.attrs["sizes"])[:-1]
    return tuple(np.split(grad, cuts, axis=node.attrs["dim"]))


@backward_rule("stack")
def _stack_backward(node, grad):
    return tuple(np.moveaxis(grad, node.attrs["dim"], 0))


# %%
_x = Tensor(np.random.default_rng(1).standard_normal((2, 3, 4)), requires_grad=True)
_c = Tensor(np.random.default_rng(2).standard_normal((2, 2)), requires_grad=True)
for _what, _fn, _ins in [("x.amax(1)", lambda x: x.amax(1), [_x]),
                         ("x.min(dim=2).values", lambda x: x.min(dim=2).values, [_x]),
                         ("cat", lambda x, c: tt.cat([x[0, :2], c, x[1, :2]], dim=1), [_x, _c]),
                         ("stack", lambda x, c: tt.stack([c, c * 2, x[0, :2, :2]], dim=1), [_x, _c])]:
    check_gradcheck(_fn, _ins, f"gradcheck of {_what} (a provided rule, through your engine)")
_tie = Tensor([[1.0, 3.0, 3.0]], requires_grad=True)
backward(_tie.amax())
assert_equal(_tie.grad.numpy(), np.array([[0.0, 0.5, 0.5]]), "amax of [1, 3, 3]: the tie splits the gradient")
print("✓ the provided rules run through your engine; amax of [1, 3, 3] sends", _tie.grad.numpy()[0])


# %% [markdown]
# One view rule of section 9 is still missing, and it is provided: `as_strided`, module
# 01's window onto the storage, whose windows may overlap. Its rule works on storage
# positions rather than on the view's indices, and it has to count: a storage cell that the
# input itself sees twice must not receive its gradient twice. It accumulates the way your
# indexing rule does, on storage positions instead of indices.

# %%
#| export
def _storage_positions(shape, strides, offset):
    """The storage position of every element of a layout, as an int array of `shape`."""
    pos = np.full(tuple(shape), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        pos += (np.arange(n) * s).reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


@backward_rule("as_strided")
def _as_strided_backward(node, grad):
    x = node.inputs[0]
    size = x._storage.size
    out_pos = _storage_positions(node.attrs["size"], node.attrs["stride"], node.attrs["storage_offset"])
    per_cell = np.bincount(out_pos.ravel(), weights=np.ravel(grad), minlength=size)
    in_pos = _storage_positions(x.shape, x.stride(), x.storage_offset())
    count = np.bincount(in_pos.ravel(), minlength=size)  # > 1 where x itself overlaps
    return (per_cell[in_pos] / np.maximum(count[in_pos], 1),)


# %%
_x = Tensor(np.random.default_rng(7).standard_normal((2, 3, 4)), requires_grad=True)
check_gradcheck(lambda x: x.as_strided((2, 3), (1, 1), 2), [_x], "gradcheck: as_strided with overlapping windows")
print("✓ as_strided's rule")


# %% [markdown]
# ## 11. Activations and losses (modules 02 and 04)
#
# Module 02 recorded each activation as one op (`relu`, `sigmoid`, ...), and module 04 each
# loss (`mse_loss`, `binary_cross_entropy_with_logits`, `nll_loss`; `cross_entropy` is
# `log_softmax` followed by `nll_loss`). One op means one rule, usually cheaper and more
# accurate than differentiating the composite. Five activation rules are yours to derive,
# from their definitions:
#
# $$\text{relu}(x) = \max(x, 0), \quad \sigma(x) = \frac{1}{1 + e^{-x}}, \quad
# \tanh(x) = \frac{e^{x} - e^{-x}}{e^{x} + e^{-x}},$$
#
# $$\text{softmax: } s_i = \frac{e^{x_i}}{\sum_k e^{x_k}}, \qquad
# \text{log-softmax: } \ell_i = x_i - \log \sum_k e^{x_k} \qquad (\text{along } \texttt{dim}).$$
#
# Three things to know before you start:
#
# - `relu` has a kink at 0; PyTorch's subgradient there is 0, and the tests follow PyTorch.
# - Section 6's question again: what should each rule read? Write each derivative first,
#   then ask of `sigmoid`, `tanh`, `softmax` and `log_softmax` what exp's check asked: which
#   of the arrays the node holds gives it with the least work? The checks accept that
#   choice only.
# - `softmax` and `log_softmax` are not elementwise: every output along `dim` depends on
#   every input along `dim`, so the chain rule's sum keeps all its terms. Their Jacobian
#   along `dim` is an $n \times n$ matrix per row, and the rule must **not** build it (for a
#   vocabulary of 50,000 that is $2.5 \cdot 10^9$ numbers per row). The check measures it
#   with section 10's `peak_bytes`: on a `(4, 500)` input your rule may allocate a few
#   arrays of the input's size, not a `500 × 500` matrix per row.
#
# **A worked example of a different op: scaling by the sum**, $y_i = x_i\,S$ with
# $S = \sum_k x_k$ along `dim`. Step 1, the Jacobian entries (product rule; $\delta_{ij}$ is
# 1 when $i = j$, else 0):
#
# $$\frac{\partial y_i}{\partial x_j} = \delta_{ij}\,S + x_i .$$
#
# Step 2, contract with the upstream gradient, term by term:
#
# $$\bar x_j = \sum_i \bar y_i \frac{\partial y_i}{\partial x_j}
# = \bar y_j\,S + \sum_i \bar y_i\, x_i .$$
#
# Step 3, read the result as array operations over whole rows: which term needs a sum
# along `dim`, and what shape must that sum keep to combine with $\bar y$? The
# $n \times n$ matrix never appears. Do the same three steps for `softmax`; `log_softmax`
# is a short step further (or derive it directly from its definition).
#
# Provided, to read: `leaky_relu`, `gelu` (exact: $\Phi(x) + x\,\varphi(x)$; the tanh form by
# the chain rule), `mse_loss` and `binary_cross_entropy_with_logits`.
#
# <details><summary>Hint 1</summary>
#
# `sigmoid` and `tanh`: differentiate on paper, then express every exponential in the
# result through $\sigma$ (or $\tanh$) itself. Both derivatives end up as short
# polynomials of the output.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `softmax`: $\partial s_i/\partial x_j$ has two cases, $i = j$ and $i \neq j$ (with the
# quotient rule, the numerator depends on $x_j$ only when $i = j$). Write both cases with
# $s$ alone; then follow steps 2 and 3 of the worked example.
# </details>
#
# <details><summary>Hint 3</summary>
#
# `log_softmax`: $\partial \ell_i / \partial x_j = \delta_{ij} - \partial(\log S)/\partial x_j$,
# and the last term is something you met in Hint 2. The saved output $\ell$ gives it back
# with one `exp`. Keep every reduction along `dim` as a size-1 dimension.
# </details>
#
# <details><summary>The approach</summary>
#
# Each rule multiplies the upstream gradient by a local derivative, written with whatever
# the node holds that makes it cheapest to compute (for `relu`: what decides its slope?).
# For the two along-`dim` ops, the contraction with the
# upstream gradient turns the Jacobian into one sum along `dim` (kept for broadcasting)
# and elementwise arithmetic: the same shape of answer as the worked example, with the
# quantities your derivation produced.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rules-nn", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("relu")
def _relu_backward(node, grad):
    """y = max(x, 0).

    Contract (every rule in this cell): returns a one-element tuple, the gradient of the
    input (a numpy array of its shape). For relu: the gradient is 0 where x <= 0, at
    exactly 0 (and -0.0) included, as in PyTorch.
    """
    # Idea: the slope of max(x, 0) on each side of 0; PyTorch's choice at exactly 0 is 0.
    ### BEGIN SOLUTION
    return (np.where(node.inputs[0].numpy() > 0, grad, 0.0),)
    ### END SOLUTION


@backward_rule("sigmoid")
def _sigmoid_backward(node, grad):
    """y = sigmoid(x). What it reads: the same decision as exp's, checked the same way."""
    # Idea: differentiate σ(x) = 1 / (1 + e^-x); which arrays does your result need, and which does the node hold?
    ### BEGIN SOLUTION
    s = node.output
    return (grad * s * (1 - s),)
    ### END SOLUTION


@backward_rule("tanh")
def _tanh_backward(node, grad):
    """y = tanh(x). What it reads: the same decision as exp's, checked the same way."""
    # Idea: differentiate tanh; which arrays does your result need, and which does the node hold?
    ### BEGIN SOLUTION
    t = node.output
    return (grad * (1 - t * t),)
    ### END SOLUTION


@backward_rule("softmax")
def _softmax_backward(node, grad):
    """y = softmax(x, dim) (attrs: dim, a non-negative int; x has at least one dim). What it
    reads: as for exp, checked the same way; memory: a few arrays of x's size."""
    # Idea: the Jacobian's entries, contracted with grad, without building the matrix.
    ### BEGIN SOLUTION
    s = node.output
    dim = node.attrs["dim"]
    return (s * (grad - (grad * s).sum(axis=dim, keepdims=True)),)
    ### END SOLUTION


@backward_rule("log_softmax")
def _log_softmax_backward(node, grad):
    """y = log_softmax(x, dim) (attrs: dim, a non-negative int; x has at least one dim). What
    it reads: as for exp, checked the same way; memory: a few arrays of x's size."""
    # Idea: differentiate the two terms of ℓ = x - log S separately.
    ### BEGIN SOLUTION
    dim = node.attrs["dim"]
    return (grad - np.exp(node.output) * grad.sum(axis=dim, keepdims=True),)
    ### END SOLUTION


# %% [markdown]
# ### The loss whose rule is yours: `nll_loss`
#
# Module 04 defined it on log-probabilities $\ell$ of shape $(N, C)$ (or $(C,)$, or
# $(N, C, d_1, \dots)$ with a class per position) and target classes $t$: sample $i$
# contributes
#
# $$\text{loss}_i = -\,w_{t_i}\, \ell_{i, t_i}$$
#
# ($w_c$ the weight of class $c$, 1 without weights; a sample whose target is
# `ignore_index` contributes nothing), and the reduction combines them: `"none"` keeps the
# vector of $\text{loss}_i$, `"sum"` adds them, and `"mean"` divides their sum by
# $\sum_i w_{t_i}$ over the samples that are not ignored (a weighted mean). Derive
# $\partial L / \partial \ell_{i,c}$ for each reduction; the upstream gradient is one number
# per sample for `"none"` and a single number otherwise.
#
# <details><summary>Hint 1 (nll_loss)</summary>
#
# Write the `"sum"` loss out for two samples. Which entries of $\ell$ appear in it at all?
# What is the gradient of every other entry?
# </details>
#
# <details><summary>Hint 2 (nll_loss)</summary>
#
# For `"mean"`, the divisor depends on the targets and weights, not on $\ell$: for the
# gradient it is a constant. For `"none"`, each sample brings its own upstream entry.
# </details>
#
# <details><summary>Hint 3 (nll_loss)</summary>
#
# Ignored targets are not valid class indices (-100 would index from the end). How can
# those samples still go through the same indexing as the others and yet contribute
# nothing? A 1-D input is a batch of one. The class axis is axis 1, also for
# $(N, C, d_1, \dots)$.
# </details>
#
# <details><summary>The approach (nll_loss)</summary>
#
# The gradient is as sparse as the loss: one entry per sample, at its target class, and
# zeros everywhere else. What differs between the reductions is only the number each
# sample's entry is scaled by — its own upstream entry, or the shared one, divided for the
# weighted mean by the total weight — times its class weight and the minus sign of the
# definition. Ignored samples fall out by having weight 0, as long as their targets were
# made safe to index with first.
# </details>

# %% nbgrader={"grade": false, "grade_id": "rules-nll", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("nll_loss")
def _nll_loss_backward(node, grad):
    """loss = nll_loss(logp, target, weight, ignore_index, reduction).

    The input logp has one of three shapes: (C,), (N, C), or (N, C, d1, d2, ...) (K
    dimensions after the class dimension, e.g. a class per pixel: the class dimension is
    always dim 1, and each position (n, d1, d2, ...) is a sample).
    attrs: target (an int numpy array of logp's shape without the class dimension: (),
    (N,) or (N, d1, d2, ...)), weight (None or a (C,) numpy array), ignore_index (an int;
    targets equal to it are not class indices), reduction ("mean", "sum" or "none"; with
    "none", `grad` has target's shape, otherwise it is 0-d). Returns (grad_logp,), of
    logp's shape and a floating dtype; an ignored sample contributes nothing to it, not
    even when every sample is ignored (a "mean" over none: the loss is nan, as PyTorch's,
    and the gradient 0, as PyTorch's).
    """
    # Idea: only the picked log-probabilities appear in the loss.
    ### BEGIN SOLUTION
    x = node.inputs[0]
    attrs = node.attrs
    target = attrs["target"]
    one_d = x.ndim == 1
    if one_d:
        target = target[None]
    valid = target != attrs["ignore_index"]
    safe = np.where(valid, target, 0)
    w = np.ones(safe.shape) if attrs["weight"] is None else attrs["weight"][safe]
    w = np.where(valid, w, 0.0)
    if attrs["reduction"] == "none":
        g = grad[None] if one_d else grad
    elif attrs["reduction"] == "sum":
        g = grad
    else:
        g = grad / w.sum()
    out = np.zeros((1,) + x.shape if one_d else x.shape, dtype=np.result_type(grad, np.float32))
    np.put_along_axis(out, safe[:, None], np.where(valid, -w * g, 0.0)[:, None], axis=1)
    return (out[0] if one_d else out,)
    ### END SOLUTION


# %%
#| export
@backward_rule("leaky_relu")
def _leaky_relu_backward(node, grad):
    x = node.inputs[0].numpy()
    return (np.where(x > 0, grad, grad * node.attrs["negative_slope"]),)


@backward_rule("gelu")
def _gelu_backward(node, grad):
    x = node.inputs[0].numpy()
    if node.attrs["approximate"] == "tanh":
        # slope = 0.5 (1 + t) + 0.5 c x (1 - t²)(1 + 3·0.044715 x²), t = tanh(c x (1 + 0.044715 x²)),
        # computed in place, in x's own precision as PyTorch does: a few temporaries, not one
        # per operator (a float32 activation's gradient needs no float64 copies)
        c = np.sqrt(2.0 / np.pi)
        x2 = x * x
        t = 0.044715 * x2
        t += 1
        t *= x
        t *= c
        np.tanh(t, out=t)
        slope = t * t
        np.subtract(1, slope, out=slope)
        x2 *= 3 * 0.044715
        x2 += 1
        slope *= x2
        slope *= x
        slope *= 0.5 * c
        t += 1
        t *= 0.5
        slope += t
    else:
        # slope = Phi(x) + x phi(x). The forward already computed x Phi(x): dividing it by x
        # gives Phi back at the output's precision (1/2 at x = 0), so only phi needs an exp,
        # and erfc (the costly part, several times an exp) is not evaluated twice.
        cdf = np.divide(node.output, x, where=x != 0,
                        out=np.full(np.shape(x), 0.5, dtype=np.result_type(node.output, x)))
        x = x.astype(np.float64)
        slope = cdf + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return (grad * slope,)


def _pointwise_loss_grad(grad, per_element, reduction):
    """Chain the upstream gradient of a reduced pointwise loss into per-element slopes."""
    if reduction == "none":
        return grad * per_element
    if reduction == "mean":
        return grad * per_element / max(per_element.size, 1)
    return grad * per_element


@backward_rule("mse_loss")
def _mse_loss_backward(node, grad):
    x, y = (t.numpy() for t in node.inputs)
    gx = _pointwise_loss_grad(grad, 2 * (x - y), node.attrs["reduction"])
    return gx, -gx


@backward_rule("binary_cross_entropy_with_logits")
def _bce_with_logits_backward(node, grad):
    from tinytorch.nn.activations import _sigmoid_forward  # module 02's stable sigmoid
    from tinytorch.nn.losses import _bce_with_logits_forward  # module 04's stable loss

    x, y = node.inputs
    w, pw = node.attrs["weight"], node.attrs["pos_weight"]
    sig, xv, yv = _sigmoid_forward(x), x.numpy(), y.numpy()
    if pw is None:
        dx, dy = sig - yv, -xv
    else:  # the loss of a positive target, log(1 + e^-x), is module 04's loss at target 1
        positive = _bce_with_logits_forward(x, Tensor(np.ones_like(xv)), None, None, "none")
        dx = (1 - yv) * sig - pw * yv * (1 - sig)
        dy = (pw - 1) * positive - xv
    if w is not None:
        dx, dy = dx * w, dy * w
    reduction = node.attrs["reduction"]
    return (_pointwise_loss_grad(grad, dx, reduction), _pointwise_loss_grad(grad, dy, reduction))


# %% nbgrader={"grade": true, "grade_id": "test-rules-nn", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
import tinytorch.nn.functional as F

_rng = np.random.default_rng(2)
_x = Tensor(_rng.standard_normal((4, 5)), requires_grad=True)
for _what, _fn in [("relu", F.relu), ("sigmoid", F.sigmoid), ("tanh", F.tanh), ("gelu", F.gelu),
                   ("leaky_relu", lambda x: F.leaky_relu(x, 0.1)),
                   ("softmax(dim=1)", lambda x: F.softmax(x, dim=1)),
                   ("softmax(dim=0)", lambda x: F.softmax(x, dim=0)),
                   ("log_softmax(dim=0)", lambda x: F.log_softmax(x, dim=0)),
                   ("log_softmax(dim=-1)", lambda x: F.log_softmax(x, dim=-1))]:
    check_gradcheck(_fn, [_x], f"gradcheck of {_what} on a (4, 5) input")
_costs = {op: check_rule_costs(op, lambda x: getattr(F, op)(x, dim=1), f"{op}'s rule", loops=False)
          for op in ("softmax", "log_softmax")}
_x0 = Tensor(np.array([-1.5, 0.0, 2.0, -0.0]), requires_grad=True)
assert_equal(call_rule(F.relu(_x0).grad_fn, np.array([3.0, 5.0, 7.0, 11.0]))[0], np.array([0.0, 0.0, 7.0, 0.0]),
             "relu's gradient at x = [-1.5, 0, 2, -0] for upstream [3, 5, 7, 11]: the slope at exactly 0 is 0, as in PyTorch")
_t = Tensor([0, 4, 2, -100])  # the last sample is ignored (ignore_index = -100)
_wc = Tensor(np.array([1.0, 2.0, 0.5, 1.5, 3.0]))
for _red in ["mean", "sum", "none"]:
    check_gradcheck(lambda x: F.nll_loss(x, _t, reduction=_red), [_x], f"gradcheck of nll_loss, reduction={_red}")
    check_gradcheck(lambda x: F.cross_entropy(x, _t, _wc, reduction=_red), [_x],
                    f"gradcheck of cross_entropy with class weights, reduction={_red}")
_v = Tensor(_rng.standard_normal(5), requires_grad=True)
check_gradcheck(lambda v: F.nll_loss(v, Tensor(3)), [_v], "gradcheck of nll_loss on a 1-D input")
_xk = Tensor(_rng.standard_normal((2, 3, 2, 2)), requires_grad=True)  # (N, C, d1, d2): a class per pixel
_tk = Tensor(np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]]))
for _red in ["mean", "none"]:
    check_gradcheck(lambda x: F.nll_loss(x, _tk, ignore_index=1, reduction=_red), [_xk],
                    f"gradcheck of nll_loss on an (N, C, d1, d2) = (2, 3, 2, 2) input, reduction={_red}")
_xi = Tensor(_rng.standard_normal((3, 4)), requires_grad=True)
with np.errstate(invalid="ignore", divide="ignore"):
    backward(F.nll_loss(_xi, Tensor([-100, -100, -100])))
assert_equal(_xi.grad.numpy(), np.zeros((3, 4)), "nll_loss's gradient when every target of the batch is ignored "
             "(a padded batch): the 'mean' loss is 0/0 = nan, as PyTorch's, and the gradient 0, as PyTorch's")
_x.grad = None
backward(F.cross_entropy(_x, Tensor([0, 4, 2, 1])))  # your log_softmax rule, then your nll_loss rule
for _op, _make in [("sigmoid", F.sigmoid), ("tanh", F.tanh), ("softmax", lambda x: F.softmax(x, dim=-1)),
                   ("log_softmax", lambda x: F.log_softmax(x, dim=-1))]:
    _blind = _rule_without_the_input(_make, [0.5, -1.0, 2.0])
    check(np.isfinite(_blind).all(), f"{_op}'s rule is written with the output the node holds (nothing "
          f"recomputed from x): called on a node whose input is hidden (NaN), it still gives a finite gradient",
          got=_blind)
print("✓ activation and loss rules; the gradient of cross_entropy (4 samples, 5 classes, target 0 in row 0)"
      " through your two rules, row 0:", _x.grad.numpy()[0].round(3), "| its sum:", round(float(_x.grad.numpy()[0].sum()), 12),
      "| peak memory of the softmax rules, in arrays of x's size:", {k: v["peak in x's"] for k, v in _costs.items()})

# %% [markdown]
# <details><summary>Summary to compare with (open once your check passes)</summary>
#
# | op | $\bar x$ |
# |---|---|
# | `relu` | $\bar y \cdot [x > 0]$ |
# | `sigmoid`, output $\sigma$ | $\bar y\, \sigma (1 - \sigma)$ |
# | `tanh`, output $t$ | $\bar y\, (1 - t^2)$ |
# | `softmax`, output $s$ | $s \odot \big(\bar y - \sum_{\text{dim}} \bar y \odot s\big)$: the VJP of the Jacobian $\text{diag}(s) - s s^\top$ |
# | `log_softmax`, output $\ell$ | $\bar y - e^{\ell} \sum_{\text{dim}} \bar y$ |
# | `nll_loss` | $-w_{t_i}\, \bar y_i$ at $(i, t_i)$, 0 elsewhere; $\bar y_i$ = `grad[i]` (`"none"`), `grad` (`"sum"`), `grad` $/ \sum_i w_{t_i}$ (`"mean"`) |
#
# Chained by the engine, your `log_softmax` and `nll_loss` rules give cross-entropy's
# famous gradient, $(\text{softmax}(x) - \text{onehot}(t)) / N$: in the row printed above,
# the target class is the only negative entry, and the row sums to 0. (The same form hides
# in `binary_cross_entropy_with_logits`, whose rule you can now read.)
# </details>

# %% [markdown]
# ### Every op, one sweep
#
# A framework engineer's first question about an autograd engine: *does every
# differentiable op have a rule, and is every rule right?* The cell below runs `gradcheck`
# on one case per registered op and checks that no op of modules 01-04 is left out —
# the same sweep the module's tests run, with more cases (broadcast shapes, dims, ties,
# every loss option).

# %%
_rng = np.random.default_rng(3)


def _leaf(*shape, low=None):
    data = _rng.standard_normal(shape) if low is None else _rng.uniform(low, low + 1.5, shape)
    return Tensor(data, requires_grad=True)


_a, _b, _pos = _leaf(2, 3), _leaf(3), _leaf(2, 3, low=0.5)
_yb = Tensor(_rng.uniform(0, 1, (2, 3)))
SWEEP = {
    "add": (lambda a, b: a + b, [_a, _b]), "sub": (lambda a, b: a - b, [_a, _b]),
    "mul": (lambda a, b: a * b, [_a, _b]), "div": (lambda a, p: a / p, [_a, _pos]),
    "pow": (lambda p, b: p ** b, [_pos, _b]), "neg": (lambda a: -a, [_a]),
    "abs": (lambda p: (p - 1.2).abs(), [_pos]), "exp": (lambda a: a.exp(), [_a]),
    "log": (lambda p: p.log(), [_pos]), "sqrt": (lambda p: p.sqrt(), [_pos]),
    "sin": (lambda a: a.sin(), [_a]), "cos": (lambda a: a.cos(), [_a]),
    "clamp": (lambda a: a.clamp(-0.5, 0.5), [_a]),
    "where": (lambda a, b: tt.where(a.detach() > 0, a, b), [_a, _b]),
    "to": (lambda a: a.to(tt.float32).to(tt.float64) * 0 + a, [_a]), "contiguous": (lambda a: a.T.contiguous(), [_a]),
    "clone": (lambda a: a.clone(), [_a]), "transpose": (lambda a: a.transpose(0, 1), [_a]),
    "permute": (lambda a: a.permute(1, 0), [_a]), "view": (lambda a: a.view(3, 2), [_a]),
    "reshape": (lambda a: a.T.reshape(6), [_a]), "squeeze": (lambda a: a[None].squeeze(0), [_a]),
    "unsqueeze": (lambda a: a.unsqueeze(1), [_a]), "expand": (lambda b: b.expand(4, 3), [_b]),
    "as_strided": (lambda a: a.as_strided((2, 2), (1, 2), 1), [_a]),
    "getitem": (lambda a: a[Tensor([1, 1, 0]), ::2], [_a]), "sum": (lambda a: a.sum(1), [_a]),
    "mean": (lambda a: a.mean(0, keepdim=True), [_a]), "amax": (lambda a: a.amax(1), [_a]),
    "amin": (lambda a: a.amin(), [_a]), "max": (lambda a: a.max(dim=0).values, [_a]),
    "min": (lambda a: a.min(dim=1, keepdim=True).values, [_a]),
    "matmul": (lambda a, b: a @ b, [_a, _b]), "cat": (lambda a, b: tt.cat([a, b[None]]), [_a, _b]),
    "stack": (lambda a, b: tt.stack([a[0], b], dim=1), [_a, _b]),
    "relu": (F.relu, [_a]), "leaky_relu": (lambda a: F.leaky_relu(a, 0.2), [_a]),
    "sigmoid": (F.sigmoid, [_a]), "tanh": (F.tanh, [_a]),
    "gelu": (lambda a: F.gelu(a, approximate="tanh") + F.gelu(a), [_a]),
    "softmax": (lambda a: F.softmax(a, dim=1), [_a]), "log_softmax": (lambda a: F.log_softmax(a, dim=0), [_a]),
    "mse_loss": (lambda a, p: F.mse_loss(a, p), [_a, _pos]),
    "binary_cross_entropy_with_logits": (lambda a: F.binary_cross_entropy_with_logits(a, _yb), [_a]),
    "nll_loss": (lambda a: F.nll_loss(a, Tensor([2, 0])), [_a]),
    "cumsum": (lambda a: a.cumsum(1), [_a]), "sort": (lambda a: a.sort(dim=1).values, [_a]),
    "topk": (lambda a: a.topk(2, dim=1).values, [_a]), "tril": (lambda a: a.tril(), [_a]),
    "triu": (lambda a: a.triu(1), [_a]), "maximum": (lambda a, b: tt.maximum(a, b), [_a, _b]),
    "minimum": (lambda a, b: tt.minimum(a, b), [_a, _b]), "flip": (lambda a: a.flip(0, 1), [_a]),
    "roll": (lambda a: a.roll(1, 1), [_a]), "norm": (lambda a: a.norm(dim=1) + a.norm(), [_a]),
}
for _op, (_fn, _inputs) in SWEEP.items():
    check_gradcheck(_fn, _inputs, f"gradcheck of {_op}")
_missing = sorted(set(BACKWARD_RULES) - set(SWEEP) - {"function"})  # "function": section 12
assert_equal(_missing, [], "ops with a rule but no gradcheck case")
print(f"✓ gradcheck passes for all {len(SWEEP)} differentiable ops of modules 01-04")

# %% [markdown]
# ## 12. Your own ops, end to end: what does a node save?
#
# Every op so far had its forward written by modules 01-04 and recorded by `apply`; you
# only supplied the backward. Later modules add ops of their own (a convolution, an
# embedding lookup, a fused LayerNorm), and so will you whenever a composite of small ops is
# too slow or too inaccurate. Adding an op takes three steps:
#
# 1. **forward through the dispatch point**: `apply(op_name, forward, *inputs, **attrs)`
#    runs `forward` and, when grad is on, records a `Node` with that name;
# 2. **a backward rule** registered under the same name;
# 3. **gradcheck** it, in float64, including the awkward inputs.
#
# A worked example, the raw way (the way modules 09 and 11 add their ops): $y = x^3$.

# %%
def cube(x):
    """y = x ** 3 as ONE recorded op named "demo_cube"."""
    return tt.apply("demo_cube", lambda t: t.numpy() ** 3, x)


@backward_rule("demo_cube")
def _cube_backward(node, grad):
    x = node.inputs[0].numpy()     # the node saved its input; the rule reads it
    return (grad * 3 * x * x,)     # one gradient per input


_xc = Tensor(np.array([-1.5, 0.5, 2.0]), requires_grad=True)
print("recorded:", cube(_xc).grad_fn, "| gradcheck:", gradcheck(cube, [_xc]))
del BACKWARD_RULES["demo_cube"]  # a demo: keep the registry to the course's own ops

# %% [markdown]
# That node kept **everything**: its input, its attrs and its output — module 01's `apply`
# cannot know what the rule will need. For a big activation that matters: each saved
# tensor stays alive until backward (section 15 measures it). PyTorch's
# `torch.autograd.Function` lets the op's author **choose** what to save: `forward(ctx, ...)`
# computes the output without recording anything and calls `ctx.save_for_backward(...)`
# with exactly the tensors `backward` will need; `backward(ctx, grad)` reads them back from
# `ctx.saved_tensors` and returns one gradient per input of `forward`.
#
# `tinytorch.autograd.Function` (provided below) has the same API and goes through the same
# dispatch point: `Function.apply(*args)` calls `apply("function", ...)` with the `ctx` and
# the class in the node's attrs, and one registered rule, `"function"`, calls the class's
# `backward` with that `ctx`.

# %%
#| export
class FunctionCtx:
    """What a Function's forward leaves for its backward (the `ctx` of torch.autograd.Function)."""

    def __init__(self, needs_input_grad=()):
        self.needs_input_grad = tuple(needs_input_grad)  # one bool per argument of forward
        self._saved = None

    def save_for_backward(self, *tensors):
        """Keep these tensors (or None) for backward; call it at most once, in forward."""
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self):
        """The tuple given to save_for_backward (empty if forward saved nothing)."""
        return () if self._saved is None else self._saved

    def __repr__(self):
        return f"<ctx saving {len(self.saved_tensors)} tensor(s)>"


class Function:
    """An op with its own forward and backward, in the style of torch.autograd.Function.

    Subclass it with two static methods, `forward(ctx, *args)` (returns one Tensor; runs
    with grad recording off) and `backward(ctx, grad)` (returns one gradient per argument
    of forward: a Tensor or numpy array of that argument's shape, or None), then call
    `MyOp.apply(*args)`.
    """

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("a Function subclass must define backward(ctx, grad)")

    @classmethod
    def apply(cls, *args):
        """Run cls.forward through module 01's dispatch point, recording a "function" node."""
        is_tensor = tuple(isinstance(a, Tensor) for a in args)
        ctx = FunctionCtx(a.requires_grad if t else False for a, t in zip(args, is_tensor))
        ctx._is_tensor = is_tensor

        def run_forward(*tensors, ctx, fn):
            with no_grad():
                out = fn.forward(ctx, *args)
            if not isinstance(out, Tensor):
                raise TypeError(f"{fn.__name__}.forward must return a Tensor, got {type(out).__name__}")
            return out.numpy()

        return _apply("function", run_forward, *(a for a in args if isinstance(a, Tensor)), ctx=ctx, fn=cls)


@backward_rule("function")
def _function_backward(node, grad):
    """The rule of every Function: call its backward with the ctx its forward filled."""
    ctx, fn = node.attrs["ctx"], node.attrs["fn"]
    with no_grad():
        grads = fn.backward(ctx, Tensor(grad))
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) != len(ctx._is_tensor):
        raise RuntimeError(f"{fn.__name__}.backward returned {len(grads)} gradient(s), but forward "
                           f"took {len(ctx._is_tensor)} argument(s): return one per argument (None "
                           f"for those that need none)")
    return tuple(None if g is None else (g.numpy() if isinstance(g, Tensor) else np.asarray(g))
                 for g, t in zip(grads, ctx._is_tensor) if t)


# %% [markdown]
# The worked example in this style: `exp`, whose derivative is its own output. Its forward
# saves the **output**, not the input: backward then needs no `exp` at all.

# %%
class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()                  # grad recording is off in here: this is plain numpy work
        ctx.save_for_backward(y)     # the choice: the output, because exp' = exp
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y              # one gradient per argument of forward


_xe = Tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True)
_ye = Exp.apply(_xe)
print("recorded:", _ye.grad_fn, _ye.grad_fn.attrs["ctx"], "| gradcheck:", gradcheck(Exp.apply, [_xe]))

# %% [markdown]
# ### Your turn (1): softplus — derive it, then decide what to save
#
# $\text{softplus}(x) = \log(1 + e^x)$ is a smooth ReLU; module 04 met it inside the stable
# binary cross-entropy. As a `Function` it is yours from end to end. The check (and the
# tests) hold you to four things:
#
# - **forward** returns softplus of every finite `x`, finite and accurate:
#   `np.log(1 + np.exp(x))` overflows to `inf` at `x = 1000`, and at `x = -40` it returns 0
#   instead of about $4 \cdot 10^{-18}$;
# - **backward** returns the gradient of `x`, finite and accurate for every finite `x`;
# - **no floating-point warning** in either: the check runs both with numpy's overflow,
#   invalid-value and divide-by-zero errors raised. An intermediate `inf` that happens to
#   give the right value in the end (a number divided by `inf` is 0) counts as a bug: in
#   float32 an `exp` overflows already at $x \approx 89$, and as soon as an `inf` meets a 0
#   or another `inf` it is a `nan`;
# - **memory**: forward saves exactly **one** tensor, of `x`'s shape.
#
# *Which* tensor is your decision, and more than one answer passes. Derive
# $\frac{d}{dx}\,\text{softplus}(x)$ first; then weigh the candidates. For each one, ask
# what it costs in memory *beyond what the node keeps alive anyway* (section 2 says what
# every node keeps), and how much work it leaves for backward, which runs once per
# training step. Write your choice and your reason in the cell after the check; the cell
# after that measures your design against the others.
#
# <details><summary>Hint 1</summary>
#
# Differentiate $\log(1 + e^x)$ with the chain rule, then simplify until you recognise a
# function you built in module 02.
# </details>
#
# <details><summary>Hint 2</summary>
#
# $\text{softplus}(x) = \log(e^0 + e^x)$ is a log-sum-exp of two numbers. Where did you
# meet that before, and how did you keep it from overflowing, and from losing the digits
# of $\log(1 + \text{tiny})$? Inside `forward` grad recording is off, so tinytorch ops
# (module 02's stable ones included) and numpy cost no graph there.
# </details>
#
# <details><summary>Hint 3</summary>
#
# Three tensors of `x`'s shape are at hand in forward: the input, the output, and the
# slope. Which of them does the node hold anyway? For each, write the backward it
# implies, and evaluate it in your head at $x = \pm 1000$: does any step take the
# exponential of a large positive number?
# </details>
#
# <details><summary>The approach</summary>
#
# Forward computes the value in module 04's stable form. What it saves then decides where
# the slope gets computed. Saving the slope means computing it in forward — from the same
# non-overflowing exponential the value needs — and backward is a single multiplication,
# at the price of one more array of `x`'s size alive from forward until backward. Saving a
# tensor the node keeps alive anyway costs no memory, and backward recomputes the slope
# from it, stably, every time it runs. Either is a defensible design; which one you
# prefer depends on whether memory or backward time is scarcer, and that is the reason
# to write down.
# </details>

# %% nbgrader={"grade": false, "grade_id": "softplus-function", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Softplus(Function):
    """softplus(x) = log(1 + exp(x)) as one op: `Softplus.apply(x)`.

    Contract: forward(ctx, x) takes a floating Tensor x and returns a Tensor of x's shape
    and dtype, finite for every finite x (x = ±1000 included) and accurate to rounding
    (at x = -40 too). It saves exactly one tensor with ctx.save_for_backward, of x's
    shape; which one is your design. backward(ctx, grad) returns the gradient of x (one
    value: forward has one argument), of x's shape, finite and accurate for every finite
    x. Neither raises a floating-point warning: the check and the tests run both under
    np.errstate(over="raise", invalid="raise", divide="raise").
    """

    @staticmethod
    def forward(ctx, x):
        # Idea: the value in a form that cannot overflow; then keep what your backward will read.
        ### BEGIN SOLUTION
        from tinytorch.nn.functional import sigmoid

        ctx.save_for_backward(sigmoid(x))  # the slope: one more array, and backward only multiplies
        xv = x.numpy()
        return Tensor(np.maximum(xv, 0) + np.log1p(np.exp(-np.abs(xv))), dtype=x.dtype)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        # Idea: the chain rule, with what forward left you.
        ### BEGIN SOLUTION
        (s,) = ctx.saved_tensors
        return grad * s
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-softplus-function", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _as_array(t):
    return t.numpy() if isinstance(t, Tensor) else np.asarray(t)


_STRICT = dict(over="raise", invalid="raise", divide="raise")  # a floating-point warning is an error here


def _softplus_strictly(x, upstream):
    """(output, ctx, gradient of x) of Softplus on x, forward and backward run under _STRICT;
    what your code raised, as text, in place of what it did not get to."""
    with np.errstate(**_STRICT):
        y = outcome(lambda: Softplus.apply(x))
        if not isinstance(y, Tensor) or y.grad_fn is None:
            return y, None, None
        ctx = y.grad_fn.attrs["ctx"]
        back = outcome(lambda: Softplus.backward(ctx, Tensor(upstream, dtype=x.dtype)))
    back = back[0] if isinstance(back, tuple) else back
    return y, ctx, back if isinstance(back, str) else _as_array(back)


def _by_definition(f, values):
    """f(Decimal x) for each x, with 60 significant digits (Python's decimal module): the
    definitions evaluated so precisely that no rounding of float64 shows."""
    import decimal

    with decimal.localcontext() as context:
        context.prec = 60
        return np.array([float(f(decimal.Decimal(float(v)))) for v in np.ravel(values)]).reshape(np.shape(values))


def _softplus_definition(x):  # log(1 + e^x), as written
    return (x.exp() + 1).ln()


def _slope_definition(x):  # d/dx log(1 + e^x) = e^x / (1 + e^x)
    return x.exp() / (1 + x.exp())


_xs = Tensor(np.array([[-3.0, -0.5, 0.0], [0.25, 1.5, 4.0]]), requires_grad=True)
_up = np.array([[1.0, -2.0, 0.5], [3.0, 1.0, -1.0]])
_ys, _ctx, _gx = _softplus_strictly(_xs, _up)
check(isinstance(_ys, Tensor) and _ys.grad_fn is not None and _ys.grad_fn.op == "function",
      "Softplus.apply(x) of a (2, 3) x returns a Tensor recorded as one 'function' node "
      "(forward run with numpy's floating-point errors raised)", got=_ys)
assert_close(_ys.numpy(), _by_definition(_softplus_definition, _xs.numpy()), rtol=1e-12, atol=1e-15,
             what="softplus values")
assert_equal(len(_ctx.saved_tensors), 1, "number of tensors Softplus saves for backward")
_s = _ctx.saved_tensors[0]
assert_equal(None if _s is None else _as_array(_s).shape, _xs.shape, "shape of the tensor Softplus saves")
check(not isinstance(_gx, str), "Softplus.backward(ctx, grad) runs with numpy's floating-point errors raised", got=_gx)
assert_close(_gx, _up * _complex_step(lambda x: np.log(1 + np.exp(x)), [_xs.numpy()], 0), rtol=1e-12, atol=1e-15,
             what="backward(ctx, grad) for an upstream grad, against the definition of the derivative")
check_gradcheck(Softplus.apply, [_xs], "gradcheck of Softplus.apply: your derivative against central differences")
for _dt, _vals in [(np.float64, [-1000.0, -40.0, 40.0, 1000.0]), (np.float32, [-100.0, -40.0, 40.0, 100.0])]:
    _big = Tensor(np.array(_vals, dtype=_dt), requires_grad=True)
    _name = np.dtype(_dt).name
    _yb, _, _gb = _softplus_strictly(_big, np.ones(4))
    check(isinstance(_yb, Tensor), f"Softplus.forward at x = {_vals} ({_name}), with numpy's floating-point "
          "errors raised", got=_yb, expected="no error: no overflow, no inf along the way")
    check(not isinstance(_gb, str), f"Softplus.backward at x = {_vals} ({_name}), with numpy's floating-point "
          "errors raised (the forward ran cleanly)", got=_gb, expected="no error: no overflow, no inf along the way")
    assert_equal(_yb.dtype, _big.dtype, f"dtype of softplus of a {_name} tensor")
    _tol = dict(rtol=1e-12, atol=1e-300) if _dt == np.float64 else dict(rtol=1e-6, atol=1e-40)
    assert_close(_yb.numpy(), _by_definition(_softplus_definition, _vals), **_tol,
                 what=f"softplus at x = {_vals} ({_name}): finite, and accurate at -40")
    assert_close(_gb, _by_definition(_slope_definition, _vals), **_tol,
                 what=f"the gradient at x = {_vals} ({_name})")
backward(Softplus.apply(_big).sum())  # through the engine too
assert_close(_big.grad.numpy(), _by_definition(_slope_definition, _vals), rtol=1e-6, atol=1e-40,
             what="the gradient through backward() at x = [-100, -40, 40, 100] (float32)")
print("✓ Softplus; for x =", _xs.numpy()[0], "your forward saved", np.round(_as_array(_s)[0], 4))

# %% [markdown]
# **Your design, in a sentence or two.** Which tensor does your forward save, and why that
# one? What does it cost in memory beyond what the node keeps alive anyway, and what is
# left for backward to compute? Write it down before the next cell measures it.

# %%
my_softplus_design = ""  # e.g. "saves ..., because ..."; not graded

# %% [markdown]
# The cells below measure three designs on a `(1000, 1000)` float64 input (7.6 MiB): yours,
# one that saves the input `x`, and one that saves the slope (both built from your code). For each it prints the memory
# its saved tensor adds to what the node keeps anyway (the node holds forward's input and
# output whatever you save), and the fastest of several runs of its forward and of its
# backward, timed round-robin so that no design gets a quieter moment than another.
# **What to expect:** the memory figures are exact (0 or 7.6 MiB); the times are
# machine-dependent, and on a busy machine they scatter: compare within one run of the
# cell. "Yours" and "saves x" run the same forward code, so the gap between their forward
# times is this run's noise (on a machine shared with other work it can be large, and
# rerunning the cell shows how large): a difference smaller than that gap says nothing. The two other designs are built from
# your code, so each pays for one extra run of it: "saves x" runs your forward and backward
# again in its backward, and "saves the slope" runs them once in its forward on top of the
# forward itself. A hand-written version of either would spend less; read their times as
# an upper bound.

# %%
# The two other designs, built from your own Softplus so that they give away nothing and
# work whatever you saved. One keeps only x and, in backward, runs your forward and backward
# again (recomputation: the idea behind activation checkpointing). The other runs your
# backward once already in forward, on a gradient of ones, and keeps the slope it returns.
def _your_slope_times(x, grad):
    """`grad` times softplus's slope at x: your forward, then your backward, on a fresh ctx."""
    ctx = FunctionCtx()
    Softplus.forward(ctx, x)
    return Softplus.backward(ctx, grad)


class _SavesInput(Function):  # keeps x; backward recomputes from it
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return Softplus.forward(FunctionCtx(), x)

    @staticmethod
    def backward(ctx, grad):
        return _your_slope_times(ctx.saved_tensors[0], grad)


class _SavesSlope(Function):  # computes the slope in forward and keeps it; backward multiplies
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(_your_slope_times(x, Tensor(np.ones(x.shape), dtype=x.dtype)))
        return Softplus.forward(FunctionCtx(), x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.saved_tensors[0]


# %%
from tinytorch.utils.timing import median_time, time_samples


def _extra_bytes(node):
    """Bytes that the ctx's saved tensors add to what the node keeps (its inputs and output)."""
    kept = [x._storage for x in node.inputs] + [node.output]
    extra = 0
    for t in node.attrs["ctx"].saved_tensors:
        arr = _as_array(t) if t is not None else None
        if arr is not None and not any(np.shares_memory(arr, k) for k in kept):
            extra += arr.nbytes
    return extra


_X = Tensor(np.random.default_rng(0).standard_normal((1000, 1000)), requires_grad=True)
_G = Tensor(np.ones((1000, 1000)))
print(f"your design, in your words: {my_softplus_design or '(none written: see the cell above)'}")
_designs = {"yours": Softplus, "saves x": _SavesInput, "saves the slope": _SavesSlope}
_nodes = {_label: _cls.apply(_X).grad_fn for _label, _cls in _designs.items()}
_fwd, _bwd = {_label: [] for _label in _designs}, {_label: [] for _label in _designs}
_order = list(_designs.items())
for _round in range(8):  # round-robin, each round starting with the next design, so that none is always first
    for _label, _cls in _order[_round % 3:] + _order[:_round % 3]:
        _fwd[_label] += time_samples(lambda: _cls.apply(_X), repeats=1, warmup=0)
        _bwd[_label] += time_samples(lambda: _cls.backward(_nodes[_label].attrs["ctx"], _G), repeats=1, warmup=0)
for _label in _designs:  # the first round warms up; the fastest of the other seven
    print(f"{_label:16s} adds {_extra_bytes(_nodes[_label]) / 2**20:4.1f} MiB to the node | forward "
          f"{min(_fwd[_label][1:]) * 1e3:6.1f} ms | backward {min(_bwd[_label][1:]) * 1e3:6.1f} ms")

# %% [markdown]
# <details><summary>What the figures say, once you have compared them with your reason</summary>
#
# Saving `x` (or the output, which the node keeps as well) adds nothing: those arrays stay
# alive until backward whatever you save, and backward recomputes the slope from them every
# time it runs (from x with module 02's stable sigmoid; from the output y, as
# $1 - e^{-y}$, computed with `expm1` to keep its digits). Saving the slope adds one array of `x`'s size for every softplus in the
# network, from its forward until its backward; in exchange its backward is a single
# multiplication, and its forward does the extra work of computing the slope (above, a whole
# extra run of your forward and backward: more than a hand-written forward would spend,
# which computes the slope from what it already has). Neither is wrong. Where activation memory limits the batch size, the free
# design wins; where backward time matters more, the slope does. PyTorch's `F.softplus`
# saves its input (section 18).
# </details>

# %% [markdown]
# ### Your turn (2): log-sum-exp, designed end to end
#
# $\text{lse}(x) = \log \sum_k e^{x_k}$ along a dimension is everywhere: `log_softmax` is
# $x - \text{lse}(x)$, cross-entropy is $\text{lse}$ minus the target's logit, and it is the
# "soft maximum" (it lies between $\max_k x_k$ and $\max_k x_k + \log n$). Built from
# tinytorch ops as `x.exp().sum(dim).log()` it returns `inf` at $x = 10^4$; the version
# shifted by the maximum works, but records five nodes and keeps two arrays of `x`'s size
# alive until backward. As one op, every decision is yours:
#
# - **forward**: finite wherever the true value is — entries of $\pm 10^4$, in float32 and
#   float64. Module 02's `_logsumexp` (in `tinytorch.nn.activations`) faced exactly this
#   forward; call it, or write the shift again.
# - **backward**: derive $\partial\, \text{lse} / \partial x_j$ with the chain rule (your log
#   and exp rules of section 6 are all it takes). Then evaluate your formula in your head
#   at $x = (10^4, 10^4, -10^4)$ in float64: if an intermediate is `inf`, your backward
#   returns `nan` there. Rewrite the formula with what forward already computed until no
#   exponential of a large positive number is left.
# - **what to save**: whatever makes that backward possible. There is more than one good
#   answer, with different costs; the cell after the check shows what yours keeps alive.
#
# The contract is in the docstring; the check runs `gradcheck` and the $\pm 10^4$ cases in
# both dtypes, and the tests also compare with PyTorch's `torch.logsumexp`.
#
# <details><summary>Hint 1</summary>
#
# One row: $L = \log S$ with $S = \sum_k e^{x_k}$. The chain rule gives
# $\partial L / \partial x_j = (\partial L / \partial S)(\partial S / \partial x_j)$, and each
# factor is a one-liner.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Your derivative is a ratio of two numbers that both overflow at $10^4$. Can you compute
# the ratio without computing either number, from something forward already returned?
# </details>
#
# <details><summary>Hint 3</summary>
#
# With `keepdim=False` the upstream gradient has lost the dimension that forward reduced;
# to combine it with anything of `x`'s shape it needs that dimension back, as size 1, in
# the right place (`dim` may be negative). `ctx` accepts attributes of your own
# (`ctx.dim = ...`), like PyTorch's. Backward returns three entries, one per argument of
# forward.
# </details>
#
# <details><summary>The approach</summary>
#
# Forward is module 02's shift. For backward, your derivative is a function you built in
# module 02; Hint 2's identity rewrites it in terms of forward's own output so that no
# exponential has a positive argument. What you save follows from the form backward
# evaluates: the tensors that form reads, or its result, which costs an array of `x`'s
# size and leaves backward only a multiplication. Either way the upstream gradient gets
# its reduced dimension back before it meets `x`'s shape.
# </details>

# %% nbgrader={"grade": false, "grade_id": "logsumexp-function", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class LogSumExp(Function):
    """log(sum(exp(x), dim)) as one op: `LogSumExp.apply(x, dim, keepdim)` (torch.logsumexp).

    Contract: forward(ctx, x, dim, keepdim) takes a floating Tensor x with at least one
    dimension, an int dim (negative counts from the end) and a bool keepdim. It returns a
    Tensor of x's dtype and of x's shape without dim (size 1 there when keepdim is True),
    finite wherever the true value is: entries of ±1e4 included, in float32 and float64.
    What it saves for backward is your design. backward(ctx, grad) gets the upstream
    gradient (a Tensor of the output's shape) and returns one entry per argument of
    forward: (gradient of x, None, None), the gradient a Tensor or numpy array of x's
    shape, finite for every finite x (±1e4 included).
    """

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        # Idea: factor the largest exponential out of the sum; keep what backward will need.
        ### BEGIN SOLUTION
        xv = x.numpy()
        d = dim % xv.ndim
        m = xv.max(axis=d, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(xv.dtype)  # a row of -inf: its lse is -inf
        out = m + np.log(np.exp(xv - m).sum(axis=d, keepdims=True))
        ctx.save_for_backward(x, Tensor(out, dtype=x.dtype))
        ctx.dim, ctx.keepdim = d, keepdim
        return Tensor(out if keepdim else np.squeeze(out, d), dtype=x.dtype)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        # Idea: your derivative, written so that no exponential of a large number appears.
        ### BEGIN SOLUTION
        x, out = ctx.saved_tensors
        g = grad.numpy() if ctx.keepdim else np.expand_dims(grad.numpy(), ctx.dim)
        return Tensor(g * np.exp(x.numpy() - out.numpy()), dtype=x.dtype), None, None
        ### END SOLUTION


def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x), dim)) through LogSumExp, like torch.logsumexp(x, dim, keepdim)."""
    return LogSumExp.apply(x, dim, keepdim)


# %% nbgrader={"grade": true, "grade_id": "test-logsumexp-function", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_xl = Tensor(np.random.default_rng(4).standard_normal((3, 4)) * 2, requires_grad=True)
for _d, _keep in [(0, False), (1, False), (-1, True), (0, True)]:
    _y = LogSumExp.apply(_xl, _d, _keep)
    _ref = np.log(np.exp(_xl.numpy()).sum(axis=_d, keepdims=_keep))  # the definition: fine at these sizes
    assert_close(_y.numpy(), _ref, rtol=1e-12, atol=1e-15, what=f"LogSumExp.apply(x, {_d}, {_keep}) of a (3, 4) x")
    check_gradcheck(lambda x: LogSumExp.apply(x, _d, _keep), [_xl],
                    f"gradcheck of LogSumExp.apply(x, {_d}, {_keep}): your derivative against central differences")
_big = np.array([[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]])
for _dt, _rtol in [(np.float64, 1e-10), (np.float32, 1e-3)]:  # float32 keeps ~3 decimals next to 1e4
    _xb = Tensor(_big.astype(_dt), requires_grad=True)
    _yb = LogSumExp.apply(_xb, 1, False)
    assert_equal(_yb.dtype, _xb.dtype, f"dtype of LogSumExp of a {np.dtype(_dt).name} x")
    assert_close(_yb.numpy(), np.array([1e4 + np.log(2), -1e4 + np.log(3)]), rtol=1e-6, atol=0,
                 what=f"LogSumExp.apply(x, 1, False) of [[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]] ({np.dtype(_dt).name})")
    backward(_yb.sum())
    assert_close(_xb.grad.numpy(), np.array([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]]), rtol=_rtol, atol=1e-300,
                 what=f"the gradient of that LogSumExp ({np.dtype(_dt).name}): finite, no inf or nan")
print("✓ LogSumExp: lse([1e4, 1e4, -1e4]) =", float(_yb.numpy()[0]), "in float32; gradient", _xb.grad.numpy()[0],
      f"(next to 1e4, float32's spacing is {float(np.spacing(np.float32(1e4))):.0e}: the output, and so the "
      "gradient computed from it, are off by about that much from 0.5; float64 is exact to 1e-12)")

# %% [markdown]
# What does your design keep alive for backward? The cell below compares your op with the
# shifted composite of tinytorch ops on a `(256, 1000)` float64 batch of logits (the input
# itself, alive anyway, is not counted).

# %%
def _bytes_kept(node, exclude):
    """Bytes of the distinct arrays a graph keeps for backward, not counting `exclude`."""
    seen = {}
    for n in topological_order([node]):
        arrays = [x._storage for x in n.inputs] + [n.output]
        if n.op == "function":
            arrays += [_as_array(t) for t in n.attrs["ctx"].saved_tensors if t is not None]
        for arr in arrays:
            base = arr
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base is not exclude:
                seen[id(base)] = base.nbytes
    return sum(seen.values())


_logits = Tensor(np.random.default_rng(0).standard_normal((256, 1000)), requires_grad=True)
_root = _logits._storage
while isinstance(_root.base, np.ndarray):
    _root = _root.base
_mine = LogSumExp.apply(_logits, 1, False)
_shift = _logits.detach().amax(1, keepdim=True)
_composite = (_logits - _shift).exp().sum(1).log() + _shift.squeeze(1)
print(f"the logits: {_logits.nbytes / 2**10:8.1f} KiB")
print(f"your LogSumExp: 1 node, keeps {_bytes_kept(_mine.grad_fn, _root) / 2**10:8.1f} KiB besides the logits")
print(f"the composite:  {len(topological_order([_composite.grad_fn]))} nodes, keeps "
      f"{_bytes_kept(_composite.grad_fn, _root) / 2**10:8.1f} KiB besides the logits")

# %% [markdown]
# The composite keeps two arrays of the logits' size (the shifted logits and their
# exponentials); a fused op that saves its input and its output keeps about one number
# per row (the output; twice that if the saved copy and the returned one are separate
# arrays, which the printed figure shows), because the input is alive anyway. Saving the
# softmax instead costs
# one array of the logits' size and buys a backward without `exp`. Neither is wrong: it is
# the memory/compute trade every fused op makes, and the reason frameworks fuse
# log-sum-exp, softmax and cross-entropy at all.

# %% [markdown]
# ## 13. Seeing the graph
#
# Debugging autograd is much easier when you can *see* the graph. Two provided tools walk it
# with your `topological_order` (each node gets its number in that order, `#0` being the
# root):
#
# - `print_graph(t, names=None)` prints an indented tree: each op with its output shape,
#   dtype and attrs, the leaves (named if you pass `names={"w": w, ...}`), and inputs that do
#   not require grad. A node shared by several consumers is expanded once and later shown
#   as `(shown above)` — the text form of "each node once". `format_graph` returns the
#   same text as a string.
# - `to_dot(t, names=None)` returns the graph in **Graphviz DOT**, the text format of the
#   `dot` layout tool: ops are grey boxes, the root green, parameters blue, constants dashed.
#   The cells below print the DOT text (paste it into any Graphviz viewer, or run `dot` on
#   it if you have Graphviz installed) and draw the same graph with matplotlib.

# %%
#| export
def _short(value, limit=40):
    if isinstance(value, np.ndarray):
        return f"<array {value.shape}>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _tensor_label(t, names):
    name = names.get(id(t))
    shape = f"{t.shape} {t.dtype}"
    if name is not None:
        return f"{name} {shape}" + (" (leaf)" if t.requires_grad else "")
    if t.requires_grad:
        return f"leaf {shape}"
    if t.ndim == 0:
        return f"const {t.item()!r}"
    return f"input {shape} (no grad)"


def _node_label(node, number):
    if node.inputs is None:
        return f"#{number} {node.name()} (freed by backward())"
    attrs = ", ".join(f"{k}={_short(v)}" for k, v in node.attrs.items())
    return (f"#{number} {node.name()} -> {tuple(node.output.shape)} {node.output.dtype}"
            + (f" [{attrs}]" if attrs else ""))


def _numbering(tensor):
    if tensor.grad_fn is None or tensor.grad_fn.inputs is None:
        return {}
    return {node: k for k, node in enumerate(topological_order([tensor.grad_fn]))}


def format_graph(tensor, names=None, max_depth=25):
    """The graph behind `tensor` as an indented text tree (each shared node expanded once)."""
    names = {id(t): n for n, t in (names or {}).items()}
    number = _numbering(tensor)
    if tensor.grad_fn is None:
        return _tensor_label(tensor, names) + "  (no graph behind it)"
    lines, shown = [], set()
    stack = [(tensor, "", "", 0)]  # (tensor, prefix of its line, prefix of its children, depth)
    while stack:
        t, head, tail, depth = stack.pop()
        node = t.grad_fn
        if node is None:
            lines.append(head + _tensor_label(t, names))
            continue
        label = _node_label(node, number.get(node, 0))
        if t is not tensor and id(t) in names:
            label += f" = {names[id(t)]}"
        if node in shown:
            lines.append(head + f"#{number.get(node, 0)} {node.name()} (shown above)")
            continue
        shown.add(node)
        lines.append(head + label)
        if node.inputs is None:
            continue
        if depth >= max_depth:
            lines.append(tail + "└── ...")
            continue
        kids = list(node.inputs)
        for k in reversed(range(len(kids))):
            last = k == len(kids) - 1
            stack.append((kids[k], tail + ("└── " if last else "├── "),
                          tail + ("    " if last else "│   "), depth + 1))
    return "\n".join(lines)


# %% [markdown]
# `print_graph` prints that text; `to_dot` writes the same graph in Graphviz's DOT language.

# %%
#| export
def print_graph(tensor, names=None, max_depth=25):
    """Print format_graph(tensor): ops, shapes, attrs and leaves as an indented tree."""
    print(format_graph(tensor, names, max_depth))


def _dot_text(text):
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(tensor, names=None):
    """The graph behind `tensor` as Graphviz DOT text (render with `dot -Tsvg`)."""
    names = {id(t): n for n, t in (names or {}).items()}
    lines = ["digraph autograd {", '  node [shape=box, fontname="Helvetica", fontsize=10];']

    def leaf_id(t):
        ident = f"t{id(t)}"
        if ident not in declared:
            declared.add(ident)
            style = ('style=filled, fillcolor="lightblue"' if t.requires_grad
                     else 'style=dashed')
            lines.append(f'  {ident} [label="{_dot_text(_tensor_label(t, names))}", {style}];')
        return ident

    declared = set()
    if tensor.grad_fn is not None and tensor.grad_fn.inputs is None:
        raise RuntimeError("to_dot: the graph behind this tensor was freed by backward(); draw it before "
                           "calling backward(), or call backward(retain_graph=True) to keep it")
    if tensor.grad_fn is None:
        leaf_id(tensor)
        lines.append("}")
        return "\n".join(lines)
    number = _numbering(tensor)
    for node, k in number.items():
        color = "darkolivegreen1" if k == 0 else "lightgrey"
        text = _dot_text(_node_label(node, k)).replace(" -> ", "\\n")
        lines.append(f'  n{k} [label="{text}", style="rounded,filled", fillcolor="{color}"];')
    for node, k in number.items():
        for x in node.inputs:
            src = f"n{number[x.grad_fn]}" if x.grad_fn is not None else leaf_id(x)
            lines.append(f"  {src} -> n{k};")
    lines.append("}")
    return "\n".join(lines)


# %% nbgrader={"grade": true, "grade_id": "test-graph-view", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_w = Tensor(np.ones((3, 2)), requires_grad=True)
_xb = Tensor(np.ones((4, 3)))
_h = _xb @ _w
_out = (_h * _h + _h).sum()
_text = format_graph(_out, names={"w": _w, "x": _xb})
print(_text)
assert_equal(_text.splitlines()[0].split(" ->")[0], "#0 SumBackward", "the first line: the root")
assert_equal(_text.count("MatmulBackward -> (4, 2)"), 1, "times the shared matmul node is expanded")
check("(shown above)" in _text, "a shared node's second appearance says (shown above)")
check("w (3, 2) float64 (leaf)" in _text and "x (4, 3) float64" in _text, "named leaves are labelled")
_dot = to_dot(_out, names={"w": _w})
check(_dot.startswith("digraph"), "to_dot returns DOT text", got=_dot[:20])
assert_equal(_dot.count(" -> n"), 7, "edges: 2 into matmul, 2 (h and h) into mul, 2 into add, 1 into sum")
check('label="w (3, 2) float64 (leaf)"' in _dot, "the parameter w is labelled in the DOT text")
print("✓ print_graph / to_dot")

# %% [markdown]
# A small MLP's loss as text, and drawn: the root sits in the last column, each op one
# column left of its nearest consumer and each leaf just left of the op that reads it, so
# every arrow points right, as a topological order runs (blue: the
# parameters, white: data, grey: the ops, green: the root). The DOT text of the same graph
# renders in any Graphviz viewer.

# %%
from tinytorch import nn


def draw_graph(tensor, names, ax):
    """Draw the graph behind `tensor` with matplotlib: the root in the last column, each op
    one column left of its nearest consumer, each leaf just left of the op that reads it,
    an arrow per input."""
    label_of = {id(t): n for n, t in names.items()}
    number = _numbering(tensor)
    where, boxes = {}, []
    steps = dict.fromkeys(number, 0)  # the longest path from each node to the root
    for node in number:  # consumers before producers
        for x in node.inputs:
            if x.grad_fn is not None:
                steps[x.grad_fn] = max(steps[x.grad_fn], steps[node] + 1)
    depth = {node: 1 + max(steps.values()) - k for node, k in steps.items()}

    def place(key, text, col, color):
        if key not in where:
            where[key] = (col, sum(1 for c, _ in where.values() if c == col))
            boxes.append((key, text, color))

    spine, node = [], tensor.grad_fn  # the path back along each op's first input: the top row
    while node is not None:
        spine.append(node)
        node = next((x.grad_fn for x in node.inputs[:1] if x.grad_fn is not None), None)
    def place_leaf(x, node):
        place(("leaf", id(x)), label_of.get(id(x), str(tuple(x.shape))), depth[node] - 1,
              "lightblue" if x.requires_grad else "white")

    for node in spine:
        place(node, node.name().replace("Backward", ""), depth[node],
              "darkseagreen" if number[node] == 0 else "lightgrey")
    if spine and spine[-1].inputs and spine[-1].inputs[0].grad_fn is None:
        place_leaf(spine[-1].inputs[0], spine[-1])  # where the spine starts: the data, on the top row
    for node in number:
        place(node, node.name().replace("Backward", ""), depth[node], "lightgrey")
    for node in number:
        for x in node.inputs:
            if x.grad_fn is None:
                place_leaf(x, node)
    for key, text, color in boxes:
        col, row = where[key]
        ax.text(col, -row, text, ha="center", va="center", fontsize=9, zorder=3,
                bbox=dict(boxstyle="round,pad=0.3", facecolor=color, edgecolor="black"))
    for node in number:
        for x in node.inputs:
            (c0, r0), (c1, r1) = where[x.grad_fn if x.grad_fn is not None else ("leaf", id(x))], where[node]
            ax.annotate("", xy=(c1, -r1), xytext=(c0, -r0), zorder=1,
                        arrowprops=dict(arrowstyle="->", color="dimgray", shrinkA=22, shrinkB=22))
    ax.set_xlim(-0.6, max(c for c, _ in where.values()) + 0.6)
    ax.set_ylim(-max(r for _, r in where.values()) - 0.6, 0.6)
    ax.axis("off")


tt.manual_seed(0)
_mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
_mlp_x = tt.randn(5, 4)
_logits = _mlp(_mlp_x)
_mlp_loss = F.cross_entropy(_logits, tt.tensor([0, 1, 1, 0, 1]))
_mlp_names = {**dict(_mlp.named_parameters()), "x": _mlp_x}
print_graph(_mlp_loss, names=_mlp_names)
fig, ax = plt.subplots(figsize=(11, 3.2))
draw_graph(_mlp_loss, _mlp_names, ax)
ax.set_title("the graph of cross_entropy(MLP(x), y): data flows left to right, gradients back", fontsize=10)
fig.tight_layout()
plt.show()
dot_source = to_dot(_mlp_loss, names=_mlp_names)
print(dot_source)


# %% [markdown]
# ## 14. The graph's lifetime: built, used, freed
#
# - **Built** during the forward pass: `apply` attaches one `Node` per op, when grad mode is
#   on and an input requires grad. Nothing else holds the graph: it is reachable only from
#   the tensors you keep (usually the loss), through `grad_fn` → `inputs` → `grad_fn` ...
# - **Used** by `backward()`: one pass in topological order, each rule reading its node's
#   saved inputs, attrs and output.
# - **Freed** by `backward()` itself: right after a node's rule has run, `free_node`
#   drops its inputs, attrs and output, so every intermediate activation can be released
#   *during* the backward pass, even while you still hold `loss` to log it. A second
#   `backward()` through the same graph then raises an error that says what to do; pass
#   `retain_graph=True` to the first call to keep the graph (for example to backward twice
#   through a shared trunk). Without backward, the graph is freed when its last tensor
#   goes away (Python's reference counting).
#
# Three ways to **not** record: `no_grad()` (nothing inside is recorded: evaluation,
# optimizer steps), `detach()` (a tensor sharing the same memory but cut from the graph,
# for example a target computed from the model), and leaves created with
# `requires_grad=False` (data). `requires_grad` **propagates**: an op's output requires
# grad exactly when some input does (and grad mode is on). Integer tensors never require
# grad: an index has no derivative.

# %%
_x = Tensor([1.0, 2.0], requires_grad=True)
_y = (_x * _x).sum()
backward(_y, retain_graph=True)  # keep the graph ...
backward(_y)                     # ... so a second pass works (and accumulates: 2x + 2x)
print("x.grad after two passes:", _x.grad, "| node after the second pass:", _y.grad_fn.inputs)
try:
    backward(_y)
except RuntimeError as e:
    print("third backward:", str(e)[:90], "...")
_i = Tensor([1, 2])  # an int64 tensor
print("x.detach() requires grad:", _x.detach().requires_grad)
print("an int tensor requires grad:", _i.requires_grad, "| int * x (x requires grad) requires grad:",
      (_i * _x).requires_grad, "(the product is float and depends on x; the int tensor itself gets no .grad)")
print("propagation: x.detach() + 1 requires grad:", (_x.detach() + 1).requires_grad,
      "| x.detach() + x requires grad:", (_x.detach() + _x).requires_grad)
with no_grad():
    print("under no_grad:", (_x * 2).requires_grad, (_x * 2).grad_fn)

# %% [markdown]
# ## 15. A systems look
#
# ### Memory: the graph keeps the activations alive
#
# Every node saves its inputs. In an MLP, that means each layer's input and its
# pre-activation stay in memory from the forward pass until backward reaches them. Let us
# measure with `tracemalloc` (numpy reports its array allocations to it): the memory held
# after a forward pass with grad on, the same forward under `no_grad()`, and what is left
# after `backward()` frees the graph.
#
# The model is `Linear(784, 512) → ReLU → Linear(512, 256) → ReLU → Linear(256, 10)` in
# float32 on a batch of 256. **Predict first**: how many MiB do the arrays that the graph
# keeps alive take, not counting the parameters and the input batch? (Each `Linear` records
# three nodes: a `permute` of its weight — `weight.T`, a view whose output is the weight's
# own memory —, a matmul and an add. Every node keeps its inputs and its output; count
# each distinct array once.)

# %%
predicted_graph_mib = None  # your number, e.g. 3.0 (MiB); not graded

# %%
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
xb = tt.randn(256, 784)
yb = tt.randint(0, 10, (256,))
param_bytes = sum(p.nbytes for p in model.parameters())


def graph_bytes(root, exclude=()):
    """Bytes of the distinct storages that the graph behind `root` keeps alive (saved inputs
    and outputs), not counting the tensors in `exclude` (parameters, the batch)."""
    def owner(arr):  # the array that really owns the memory a view looks at
        while isinstance(arr.base, np.ndarray):
            arr = arr.base
        return arr

    skip = {id(owner(t._storage)) for t in exclude}
    seen = {}
    for node in topological_order([root.grad_fn]):
        for arr in [x._storage for x in node.inputs] + [node.output]:
            base = owner(arr)
            if id(base) not in skip:
                seen[id(base)] = base.nbytes
    return sum(seen.values())


def allocated():
    return tracemalloc.get_traced_memory()[0]


gc.collect()
tracemalloc.start()
start = allocated()
with no_grad():
    loss = F.cross_entropy(model(xb), yb)
held_no_grad = allocated() - start
del loss
loss = F.cross_entropy(model(xb), yb)
held_graph = allocated() - start
counted = graph_bytes(loss, exclude=[*model.parameters(), xb])
n_nodes = len(topological_order([loss.grad_fn]))
backward(loss)
held_after = allocated() - start
grad_bytes = sum(p.grad.nbytes for p in model.parameters())
tracemalloc.stop()
MiB = 2 ** 20
print(f"parameters {param_bytes / MiB:.2f} MiB, one batch of inputs {xb.nbytes / MiB:.2f} MiB")
print(f"held after a forward pass under no_grad():  {held_no_grad / MiB:6.3f} MiB")
print(f"held after a forward pass with the graph:   {held_graph / MiB:6.3f} MiB "
      f"({n_nodes} nodes; walking the graph counts {counted / MiB:.3f} MiB of saved arrays)")
print(f"held after backward() freed the graph:      {held_after / MiB:6.3f} MiB "
      f"(of which the new .grad tensors: {grad_bytes / MiB:.3f} MiB)")
print(f"the graph's saved arrays: measured {counted / MiB:.3f} MiB; your prediction: "
      + ("none written (set predicted_graph_mib above)" if predicted_graph_mib is None
         else f"{predicted_graph_mib:.3f} MiB"))
for p in model.parameters():
    p.grad = None

# %% [markdown]
# <details><summary>Why, once you have compared with your prediction</summary>
#
# Read the three lines together. Under `no_grad()` a forward pass leaves almost nothing
# behind: each intermediate array dies as soon as the next op has read it. With the graph,
# every layer's input, pre-activation and activation stay alive (a `(256, 512)` float32
# activation alone is 0.5 MiB), and walking the graph should account for most of what
# `tracemalloc` sees (the rest is small bookkeeping, and it varies with the numpy version).
# For this small MLP the saved activations already rival the parameters; they grow with
# the batch size, the parameters do not. After `backward()`
# what remains is essentially the new `.grad` tensors: freeing each node after use gave
# the activations back. This is why inference runs under `no_grad()`, why large batches
# run out of memory in *training* first, and what **activation checkpointing** trades
# (recompute parts of the forward during backward instead of saving them).
# </details>
#
# ### Time: backward versus forward
#
# **Predict first**: how many times longer than the forward pass is the backward pass of
# this MLP? Count the floating-point operations of the matrix products each `Linear`
# needs forward and backward (your matmul rule of section 10 says which products a
# backward makes, and the layers differ in size, so count FLOPs, not products), and
# remember that the first layer's input is data.
#
# How the cell measures, and why: it uses a batch of 1024 (so that the matrix products,
# which your count is about, outweigh Python's fixed cost per node), limits numpy's BLAS
# to one thread with `pinned_threads` from `tinytorch.utils.timing` (several threads on a
# machine that other processes keep busy wait for free cores, and a forward pass can then
# take several times longer than it should), and times 15 steps, each a forward and a backward, taking the **median of
# the per-step ratios**: a slow moment that covers one whole step changes that step's two
# times alike and barely moves its ratio. It also prints the middle half of the ratios:
# if that range is wide, the machine was busy; run the cell again.

# %%
predicted_backward_over_forward = None  # your number, e.g. 1.5; not graded

# %%
from tinytorch.utils.timing import pinned_threads  # BLAS and numba limited to n threads in a block

xt = tt.randn(1024, 784)  # a bigger batch than the memory experiment's
yt = tt.randint(0, 10, (1024,))


def time_steps(batch, repeats=15):
    """Quartiles of backward time / forward time over `repeats` training steps of the MLP
    (a fresh graph each, after one warm-up step), and the fastest forward time."""
    ratios, forwards = [], []
    for step in range(repeats + 1):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(batch), yt)
        t1 = time.perf_counter()
        backward(loss)
        t2 = time.perf_counter()
        if step > 0:
            ratios.append((t2 - t1) / (t1 - t0))
            forwards.append(t1 - t0)
    for p in model.parameters():
        p.grad = None
    return np.percentile(ratios, [25, 50, 75]), min(forwards)


def matmul_flops(batch, input_needs_grad):
    """FLOPs of the Linear layers' matmuls: forward, and backward (weight + input gradients)."""
    fwd = bwd = 0
    for i, layer in enumerate(m for m in model.children() if isinstance(m, nn.Linear)):
        flops = 2 * batch * layer.in_features * layer.out_features
        fwd += flops
        bwd += flops  # dL/dW = grad^T @ input
        if i > 0 or input_needs_grad:
            bwd += flops  # dL/dinput = grad @ W
    return fwd, bwd


with pinned_threads(1):
    for needs_grad in (False, True):
        (q1, ratio, q3), fastest = time_steps(xt.detach().requires_grad_(needs_grad))
        f_flops, b_flops = matmul_flops(xt.shape[0], needs_grad)
        print(f"input requires grad: {str(needs_grad):5}  backward/forward = {ratio:.2f} (middle half of the steps "
              f"{q1:.2f}-{q3:.2f}; fastest forward {fastest * 1e3:.0f} ms); matmul FLOPs predict {b_flops / f_flops:.2f}")
print("your prediction (input not requiring grad):",
      "none written" if predicted_backward_over_forward is None else f"{predicted_backward_over_forward:.2f}")

# %% [markdown]
# <details><summary>Why, once you have compared with your prediction</summary>
#
# The matmuls dominate, so their FLOPs predict the ratio: each `Linear` is one matmul
# forward and two backward (the weight gradient and the input gradient) — except that the
# first layer's input is data, and `_matmul_backward` skips its gradient, which is why
# the ratio is lower when the input does not require grad (a prediction of 1.25 against
# 2). Expect the measured ratios near those two, not on them (repeat the run: the medians
# move little, though on a busy machine the middle half of the steps spreads wide). The
# FLOP count leaves out two things, which pull opposite ways: each node's rule adds
# elementwise work and Python overhead of its own (the ratio goes up, the more so the
# smaller the batch), and BLAS runs the transposed operands of the backward matmuls at a
# speed of its own, which can be faster than the forward's (the ratio goes down). Which
# one wins depends on the machine; the measured ratio says which it was here. With BLAS threads not pinned on a busy machine,
# ratios far from the prediction, even below 1, are possible: the threads of one matrix
# product wait for each other, and whichever pass is unlucky looks slow.
# </details>
#
# ### One GEMM versus a batched product then a sum
#
# Section 10's `linear_weight_grad` claims that a Linear layer on a `(B, T, in)` batch
# should get its weight gradient from one `(in, B·T) @ (B·T, out)` product instead of `B`
# products of `(in, T) @ (T, out)` and a sum of the `B` results. Both do exactly the same
# multiply-adds ($2\,B\,T\,\text{in}\,\text{out}$ FLOPs), so FLOPs predict a ratio of 1.
# **Predict first**: with BLAS limited to one thread, how much faster is the single GEMM
# on this machine, for `B = 64`, `T = 32`, `in = out = 256` in float32?
#
# The cell times each version 9 times and keeps the fastest run (the one least disturbed
# by other processes), first with one BLAS thread — the figure to compare with your
# prediction — then with as many threads as BLAS chooses, which on a busy machine can
# scatter widely from one run of the cell to the next.

# %%
predicted_gemm_speedup = None  # your number, e.g. 2.0 (batched time / one-GEMM time, one thread); not graded

# %%
_B, _T, _IN, _OUT = 64, 32, 256, 256
_rng = np.random.default_rng(0)
acts = _rng.standard_normal((_B, _T, _IN)).astype(np.float32)     # the layer's input
upstream = _rng.standard_normal((_B, _T, _OUT)).astype(np.float32)  # dL/dY


def batched_then_sum():
    return (np.swapaxes(acts, -1, -2) @ upstream).sum(axis=0)  # B products, then a sum


def one_gemm():
    return linear_weight_grad(acts, upstream)  # your one-GEMM version


assert_close(one_gemm(), batched_then_sum(), rtol=1e-3, atol=1e-2, what="both give the same weight gradient")
gflop = 2 * _B * _T * _IN * _OUT / 1e9
speedups = {}
for threads in (1, None):
    t_batched = min(time_samples(batched_then_sum, repeats=9, threads=threads))
    t_gemm = min(time_samples(one_gemm, repeats=9, threads=threads))
    label = "one BLAS thread" if threads == 1 else "BLAS's own choice of threads"
    speedups[threads] = t_batched / t_gemm
    print(f"{label}: batched product then sum {t_batched * 1e3:6.2f} ms ({gflop / t_batched:5.1f} GFLOP/s), "
          f"one GEMM {t_gemm * 1e3:6.2f} ms ({gflop / t_gemm:5.1f} GFLOP/s): speedup {speedups[threads]:.1f}x")
print(f"your prediction (one thread): "
      + ("none written" if predicted_gemm_speedup is None else f"{predicted_gemm_speedup:.1f}x"))

# %% [markdown]
# <details><summary>Why, once you have compared with your prediction</summary>
#
# Same arithmetic, different speed. With one BLAS thread the single GEMM should come out
# ahead by a modest factor (the line above says by how much on this machine; a busy
# machine can move it a lot, so rerun the cell if the two lines disagree wildly). The
# batched product calls BLAS on `B` small, thin matrices (`T = 32` rows
# each), too short for BLAS's blocking to reach full speed; it also writes `B`
# intermediate `(in, out)` results (here 16 MiB) and then reads them all again to sum
# them. The one GEMM has a long inner dimension (`B·T = 2048`) and writes only the
# `(in, out)` result.
#
# With more threads the gap usually grows, because one big product keeps every core busy
# and `B` thin ones do not. But that second figure depends on the cores that are free at
# that moment, and on a loaded machine it scatters from run to run; the one-thread line is
# the steadier of the two. A benchmark records
# the load and the thread count next to its numbers for this reason (module 19). The
# ratio grows with `B` and shrinks when `T` is already large. That is why every
# framework folds the batch dimensions of a Linear layer into the rows.
# </details>
#
# ### Depth: a chain of 10,000 ops
#
# An iterative engine does not care how deep the graph is. A recursive one dies at
# Python's recursion limit:

# %%
x = Tensor(np.array([1.0]), requires_grad=True)
t0 = time.perf_counter()
y = x
for _ in range(10_000):
    y = y * 1.0001
forward_s = time.perf_counter() - t0
t0 = time.perf_counter()
backward(y.sum())
backward_s = time.perf_counter() - t0
print(f"10,000-op chain: forward {forward_s * 1e3:.0f} ms, backward {backward_s * 1e3:.0f} ms, "
      f"x.grad = {x.grad.item():.6f} (exact: {1.0001 ** 10_000:.6f})")


def recursive_order(node, seen, order):
    """The textbook recursive DFS — fine for small graphs."""
    if node in seen:
        return
    seen.add(node)
    for p in next_nodes(node):
        recursive_order(p, seen, order)
    order.append(node)


y = x
for _ in range(10_000):
    y = y * 1.0001
try:
    recursive_order(y.grad_fn, set(), [])
    print("the recursive version survived (your recursion limit is high)")
except RecursionError:
    print(f"the recursive version: RecursionError (Python's limit is {sys.getrecursionlimit()} calls)")

# %% [markdown]
# ### Width: why "each node once" matters
#
# Counting how many node visits a naive "push the gradient down every path" recursion makes
# on $k$ stacked diamonds (`y = y * 1.0 + y * 1.0`, $k$ times), against what the engine
# does. **Predict first**: for $k = 20$, how many nodes does the engine visit, and about how
# many visits would the naive recursion make?

# %%
predicted_engine_nodes_k20 = None  # your number; not graded
predicted_naive_visits_k20 = None  # your number (a power of 2 is a fine guess); not graded

# %%
def naive_visits(node):
    """Visits made by a recursion that re-walks shared subgraphs (no memo) — counted, not run."""
    counts = {}
    for n in reversed(topological_order([node])):  # producers first
        counts[n] = 1 + sum(counts[p] for p in next_nodes(n))
    return counts[node]


for k in (5, 10, 20, 60):
    x = Tensor(1.0, dtype=np.float64, requires_grad=True)
    y = x
    for _ in range(k):
        y = y * 1.0 + y * 1.0
    nodes = len(topological_order([y.grad_fn]))
    naive = naive_visits(y.grad_fn)
    t0 = time.perf_counter()
    backward(y)
    took = time.perf_counter() - t0
    print(f"k={k:2d}: the engine visits {nodes:3d} nodes in {took * 1e3:5.2f} ms (x.grad = "
          f"2^{int(np.log2(x.grad.item()))}); a naive recursion would make {naive:.2e} visits")
    if k == 20:
        counted_k20 = (nodes, naive)
print("k=20, your prediction:", "none written" if predicted_engine_nodes_k20 is None and
      predicted_naive_visits_k20 is None else (predicted_engine_nodes_k20, predicted_naive_visits_k20),
      "| counted:", counted_k20, "(the node count is exact on every machine; so is the visit count)")

# %% [markdown]
# ## 16. The loss goes down
#
# Everything is in place to train a network with nothing but your engine. The data: three
# interleaved spiral arms in the plane, 300 points, which no straight line separates. The
# model: module 03's `Linear` layers with a ReLU between them. The loss: module 04's
# cross-entropy. The update is **plain gradient descent**, written inline in two lines:
# for every parameter, `p -= lr * p.grad` under `no_grad()` (the update must not be
# recorded), then `zero_grad()` so the next step's backward does not add onto this one's
# (section 7). Module 07 turns those two lines into optimizers (momentum, Adam).

# %% nbgrader={"grade": true, "grade_id": "test-loss-goes-down", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tt.manual_seed(0)
    _rng = np.random.default_rng(0)
    _n = 100  # points per arm
    _r = np.linspace(0.1, 1.0, _n)
    _pts, _cls = [], []
    for _k in range(3):
        _angle = _r * 4.0 + _k * 2 * np.pi / 3 + _rng.normal(0, 0.15, _n)
        _pts.append(np.stack([_r * np.sin(_angle), _r * np.cos(_angle)], axis=1))
        _cls.append(np.full(_n, _k))
    _X = Tensor(np.concatenate(_pts).astype(np.float32))
    _Y = Tensor(np.concatenate(_cls))
    _net = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
    _losses = []
    for _step in range(301):
        _loss = F.cross_entropy(_net(_X), _Y)
        _net.zero_grad()
        backward(_loss)                      # your engine
        with no_grad():                      # plain SGD, inline
            for _p in _net.parameters():
                _p -= 0.5 * _p.grad
        _losses.append(_loss.item())
        if _step % 50 == 0:
            print(f"step {_step:3d}: loss {_loss.item():.3f}")
    with no_grad():
        _acc = float((_net(_X).numpy().argmax(1) == _Y.numpy()).mean())
check(_losses[-1] < 0.5 * _losses[0], "the loss at least halves in 300 steps",
      got=round(_losses[-1], 3), expected=f"< {0.5 * _losses[0]:.3f}")
check(_acc > 0.8, "training accuracy on the spirals above 80%", got=_acc)
print(f"✓ the loss went down from {_losses[0]:.3f} to {_losses[-1]:.3f}; training accuracy {_acc:.0%}")

# %% [markdown]
# ### What reaches the first layer
#
# The spirals trained with ReLU between the layers. Put a sigmoid there instead, stack ten
# hidden layers, and the first layers barely move, for a reason you can read off your
# engine: walking back through one hidden layer, the upstream gradient is multiplied
# elementwise by the activation's derivative, then by $W^\top$. With module 03's Xavier
# initialisation, the product with $W^\top$ roughly keeps a vector's size, so the
# activation's derivative decides what survives each layer.
#
# **Predict before you run.** From the sigmoid rule you derived in section 11: what is the
# largest value $\sigma'(z)$ can take? So by what factor, at most, does one sigmoid layer
# scale the gradient's size, and how much smaller than the last hidden layer's weight
# gradient is the first one's, ten layers back? And with ReLU (and Kaiming
# initialisation, which module 03 scaled for it)?

# %%
my_sigmoid_factor_per_layer = None  # e.g. 0.5; not graded
my_sigmoid_first_over_last = None   # e.g. 1e-3; not graded

# %% [markdown]
# The next cell builds both ten-layer networks (width 64, random inputs and labels: the
# effect belongs to the network, not the data), runs one backward with your engine, and
# plots the size (Frobenius norm) of each layer's weight gradient.

# %%
def _deep_net(activation, init, depth=10, width=64):
    layers = []
    for _ in range(depth):
        layer = nn.Linear(width, width)
        init(layer.weight)
        nn.init.zeros_(layer.bias)
        layers += [layer, activation()]
    return nn.Sequential(*layers, nn.Linear(width, 3))


def _weight_grad_norms(net, x, y):
    """The Frobenius norm of each Linear layer's weight gradient after one backward."""
    net.zero_grad()
    backward(F.cross_entropy(net(x), y))
    return np.array([np.linalg.norm(m.weight.grad.numpy()) for m in net if isinstance(m, nn.Linear)])


with preserved_state():
    tt.manual_seed(0)
    _rng = np.random.default_rng(0)
    _xs, _ys = Tensor(_rng.standard_normal((300, 64)).astype(np.float32)), Tensor(_rng.integers(0, 3, 300))
    _flow = {"sigmoid, Xavier": _weight_grad_norms(_deep_net(nn.Sigmoid, nn.init.xavier_uniform_), _xs, _ys),
             "ReLU, Kaiming": _weight_grad_norms(_deep_net(nn.ReLU, lambda w: nn.init.kaiming_uniform_(
                 w, nonlinearity="relu")), _xs, _ys)}
_fig, _ax = plt.subplots(figsize=(6.5, 3.2))
for _label, _norms in _flow.items():
    _ax.semilogy(range(1, 11), _norms[:10], "o-", label=_label)
    _hidden = _norms[:10]
    _per_layer = (_hidden[0] / _hidden[-1]) ** (1 / 9)
    print(f"{_label:16s} first / last hidden layer: {_hidden[0] / _hidden[-1]:.1e}; "
          f"per layer: x{_per_layer:.2f}")
_ax.set_xlabel("hidden layer (1 = nearest the input)")
_ax.set_ylabel("norm of the weight gradient")
_ax.set_title("One backward through ten hidden layers")
_ax.legend()
_fig.tight_layout()
plt.show()
if my_sigmoid_factor_per_layer is not None:
    _seen = (_flow["sigmoid, Xavier"][0] / _flow["sigmoid, Xavier"][9]) ** (1 / 9)
    print(f"your factor per sigmoid layer: {my_sigmoid_factor_per_layer}; measured: {_seen:.2f}")
if my_sigmoid_first_over_last is not None:
    _seen = _flow["sigmoid, Xavier"][0] / _flow["sigmoid, Xavier"][9]
    print(f"your first / last for sigmoid: {my_sigmoid_first_over_last}; measured: {_seen:.1e}")

# %% [markdown]
# <details><summary>What the figures say, once you have compared them with your prediction</summary>
#
# $\sigma'(z) = \sigma(z)(1 - \sigma(z))$ is at most $1/4$, at $z = 0$, and smaller
# everywhere else. With the product through $W^\top$ keeping the size, each sigmoid layer
# scales the gradient by at most about a quarter, so ten layers back the weight gradient
# is some $4^{-9} \approx 4 \cdot 10^{-6}$ of the last hidden layer's or less: the
# figure above is of that order. A learning rate large enough to move the first layer
# would wreck the last one. ReLU's derivative is 1 wherever a unit is active, and Kaiming
# initialisation doubles the weights' variance to make up for the half of the units that
# are not, so the gradient keeps its size from layer to layer: the ReLU curve stays within
# a small factor. That is why deep networks use ReLU-like activations, variance-preserving
# initialisation (module 03), residual connections that give the gradient a path around
# each layer (module 13) and normalisation. Watching these norms during training is the
# first thing to do when a deep model does not learn; PyTorch users read `p.grad.norm()`
# per parameter after backward, or register a hook (`tensor.register_hook`) that sees the
# gradient on its way through.
# </details>

# %% [markdown]
# ## 17. Forward mode: one direction, pushed forward
#
# Everything so far pushed a gradient **backwards**: one backward pass gives
# $\partial L / \partial x$ for every input at once, a vector-Jacobian product $\bar y^\top
# J$. The chain rule can also run the other way, in the order the ops ran. Pick a
# **direction** $v$ in which to move the inputs, and ask how every result moves: for each
# tensor $t$ of the graph its **tangent** $\dot t = \frac{d}{d\varepsilon} t(x + \varepsilon
# v)\big|_{\varepsilon = 0}$, so the inputs' tangents are $v$ and the output's is the
# Jacobian-vector product $J v$. Each op turns the tangents of its inputs into the tangent
# of its result, and a forward walk in the order the ops ran visits every node once.
#
# Derive the four rules below from that definition, as you derived the backward ones: for
# $y = f(a, b)$, move $a$ and $b$ by $\varepsilon \dot a$ and $\varepsilon \dot b$ and keep
# what is first order in $\varepsilon$. A worked example of a different op, `tanh`
# (provided): $\tanh(a + \varepsilon \dot a) = \tanh a + \varepsilon (1 - \tanh^2 a) \dot a +
# O(\varepsilon^2)$, so $\dot y = (1 - y^2)\, \dot a$, from the output the node holds. A
# tangent is `None` for a tensor that does not move (a weight, when only the input does),
# and a rule returns `None` when none of its inputs moves.
#
# <details><summary>Hint 1 (the rules)</summary>
#
# Where the backward rule of an op took the upstream gradient and returned one array per
# input, the forward rule takes one tangent per input and returns one array. Which of the
# backward rules' troubles go away: does anything need summing back to an input's shape?
# What shape must the result have, when one input was broadcast?
# </details>
#
# <details><summary>Hint 2 (sum and matmul)</summary>
#
# Both are linear in each input. For a map that is linear in $a$, how does $f(a +
# \varepsilon \dot a)$ differ from $f(a)$? The node's `attrs` say which dims `sum` reduced.
# </details>

# %%
#| export autograd.functional
"""Forward mode (module 06, section 17): Jacobian-vector products over the recorded graph,
like torch.autograd.functional.jvp and torch.func.jvp."""
import numpy as np

from tinytorch._tensor import ShapeError, Tensor

if __name__ != "__main__":  # the package file; in this notebook, the engine's cells above defined them
    from tinytorch.autograd.engine import enable_grad, topological_order  # noqa: F401 (the walk's order)

__all__ = ["jvp", "JVP_RULES", "jvp_rule"]

JVP_RULES = {}  # op name -> rule(node, tangents) -> the tangent of the node's output, or None


def jvp_rule(op):
    """Register `fn(node, tangents)` as the forward rule of the op named `op`."""
    def register(fn):
        JVP_RULES[op] = fn
        return fn
    return register


def _moved(*terms):
    """The sum of the terms that are not None (None when all are)."""
    present = [t for t in terms if t is not None]
    return sum(present[1:], present[0]) if present else None


def _shaped(tangent, node):
    """A tangent with the node's output shape (broadcast inputs move the whole output)."""
    return None if tangent is None else np.broadcast_to(tangent, node.output.shape)


@jvp_rule("add")
def _add_jvp(node, tangents):
    return _shaped(_moved(*tangents), node)


@jvp_rule("sub")
def _sub_jvp(node, tangents):
    ta, tb = tangents
    return _shaped(_moved(ta, None if tb is None else -tb), node)


@jvp_rule("neg")
def _neg_jvp(node, tangents):
    return None if tangents[0] is None else -tangents[0]


@jvp_rule("tanh")
def _tanh_jvp(node, tangents):
    return None if tangents[0] is None else (1.0 - node.output ** 2) * tangents[0]

# %% nbgrader={"grade": false, "grade_id": "jvp-rules", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export autograd.functional
@jvp_rule("mul")
def _mul_jvp(node, tangents):
    """Tangent of y = a * b (broadcasting).

    Contract: `node.inputs` (a, b), `tangents` (ta, tb): arrays of a's and b's shapes, or
    None for an input that does not move. Returns an array of the output's shape, or None
    when neither moves. Never writes into a tangent.
    """
    # Idea: move both factors a little; what is first order?
    ### BEGIN SOLUTION
    (a, b), (ta, tb) = node.inputs, tangents
    return _shaped(_moved(None if ta is None else ta * b.numpy(), None if tb is None else a.numpy() * tb), node)
    ### END SOLUTION


@jvp_rule("exp")
def _exp_jvp(node, tangents):
    """Tangent of y = exp(x). Contract: as mul's, one input."""
    # Idea: what does the node already hold that the slope of exp needs?
    ### BEGIN SOLUTION
    return None if tangents[0] is None else node.output * tangents[0]
    ### END SOLUTION


@jvp_rule("sum")
def _sum_jvp(node, tangents):
    """Tangent of y = x.sum(dim, keepdim): node.attrs["dim"] a tuple of the reduced dims,
    node.attrs["keepdim"] a bool. Contract: as mul's, one input."""
    # Idea: sum is linear.
    ### BEGIN SOLUTION
    if tangents[0] is None:
        return None
    return np.sum(tangents[0], axis=node.attrs["dim"], keepdims=node.attrs["keepdim"])
    ### END SOLUTION


@jvp_rule("matmul")
def _matmul_jvp(node, tangents):
    """Tangent of y = a @ b (1-D operands and batches as in matmul). Contract: as mul's."""
    # Idea: linear in each factor separately.
    ### BEGIN SOLUTION
    (a, b), (ta, tb) = node.inputs, tangents
    return _shaped(_moved(None if ta is None else np.matmul(ta, b.numpy()),
                          None if tb is None else np.matmul(a.numpy(), tb)), node)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-jvp-rules", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from types import SimpleNamespace

_rng = np.random.default_rng(17)


def _moved_by_definition(f, arrays, directions, eps=1e-6):
    """d/dε f(arrays + ε·directions) at ε = 0, by central differences (float64)."""
    plus = f(*[a + eps * d for a, d in zip(arrays, directions)])
    minus = f(*[a - eps * d for a, d in zip(arrays, directions)])
    return (plus - minus) / (2 * eps)


def _rule_of(make, arrays, tangents):
    """JVP_RULES' answer for the node that make(*tensors) records."""
    ts = [Tensor(a, requires_grad=True) for a in arrays]
    node = make(*ts).grad_fn
    return JVP_RULES[node.op](node, tangents)


for _what, _make, _f, _shapes in [
        ("a * b, b broadcast over the rows", lambda a, b: a * b, lambda a, b: a * b, [(2, 3), (3,)]),
        ("a * b, both broadcast", lambda a, b: a * b, lambda a, b: a * b, [(2, 1), (1, 3)]),
        ("exp(x)", lambda x: x.exp(), np.exp, [(2, 3)]),
        ("x.sum(1)", lambda x: x.sum(1), lambda x: x.sum(1), [(2, 3, 4)]),
        ("x.sum((0, 2), keepdim=True)", lambda x: x.sum((0, 2), keepdim=True),
         lambda x: x.sum((0, 2), keepdims=True), [(2, 3, 4)]),
        ("x.sum()", lambda x: x.sum(), lambda x: x.sum(), [(2, 3)]),
        ("a @ b", lambda a, b: a @ b, np.matmul, [(2, 3), (3, 4)]),
        ("a @ b, a batch against a matrix", lambda a, b: a @ b, np.matmul, [(2, 2, 3), (3, 4)]),
        ("a @ b, a vector against a batch", lambda a, b: a @ b, np.matmul, [(3,), (2, 3, 4)])]:
    _arrays = [_rng.standard_normal(s) for s in _shapes]
    _dirs = [_rng.standard_normal(s) for s in _shapes]
    _expected = _moved_by_definition(_f, _arrays, _dirs)
    _got = _rule_of(_make, _arrays, tuple(_dirs))
    check(_got is not None and np.shape(_got) == np.shape(_expected),
          f"{_what}: the tangent has the output's shape", got=None if _got is None else np.shape(_got),
          expected=np.shape(_expected))
    assert_close(_got, _expected, rtol=1e-6, atol=1e-8, what=f"{_what}: your rule against the definition "
                 f"(how the output moves when every input moves along its tangent)")
    if len(_shapes) == 2:  # only one input moves: the other's tangent is None
        for _k in (0, 1):
            _only = [d if i == _k else np.zeros_like(d) for i, d in enumerate(_dirs)]
            _one = _rule_of(_make, _arrays, tuple(d if i == _k else None for i, d in enumerate(_dirs)))
            assert_close(_one, _moved_by_definition(_f, _arrays, _only), rtol=1e-6, atol=1e-8,
                         what=f"{_what} with only input {_k} moving (the other's tangent None)")
    check(_rule_of(_make, _arrays, (None,) * len(_shapes)) is None,
          f"{_what}: nothing moves, so the rule returns None", got=_rule_of(_make, _arrays, (None,) * len(_shapes)))
_xe = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
_ne = _xe.exp().grad_fn
_te = JVP_RULES["exp"](SimpleNamespace(op="exp", inputs=(Tensor(np.full(3, np.nan)),), output=_ne.output,
                                       attrs=_ne.attrs), (np.ones(3),))
check(_te is not None and np.isfinite(_te).all(), "exp's forward rule uses the output the node holds, as its "
      "backward rule does (exp computed nothing again): called on a node whose input is hidden (NaN), it still "
      "gives a finite tangent", got=_te)
_frozen = _rng.standard_normal((2, 3))
_dirs = (_frozen.copy(), _rng.standard_normal(3))
_rule_of(lambda a, b: a * b, [_rng.standard_normal((2, 3)), _rng.standard_normal(3)], _dirs)
assert_equal(_dirs[0], _frozen, "the tangent passed to mul's rule, after it ran (a rule never writes into one)")
print("✓ forward rules: mul, exp, sum, matmul match the definition")

# %% [markdown]
# ### The forward walk
#
# `jvp(func, primals, tangents)` (provided) copies the `primals` into fresh leaves that
# record, runs `func` on them, and hands the result to `_forward_tangents(output,
# leaf_tangents)`, which is yours: the tangent of `output`, given the tangent of each leaf
# that moves (a dict from `id(leaf)` to an array). Every other leaf, a weight say, does not
# move. Your engine's `topological_order` lists the nodes with the root first; forward mode
# needs each node's inputs done before the node itself.
#
# <details><summary>Hint 1</summary>
#
# A node's input is either a leaf (no `grad_fn`: look it up among the leaf tangents) or
# the result of another node (its `grad_fn`: you have done that node already, if you walk
# in the right order). Where do you keep what each node produced?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Two outputs need no walk at all, or end with nothing moved: what does the contract ask
# for then? And an op with no forward rule should say which op it is.
# </details>

# %% nbgrader={"grade": false, "grade_id": "forward-tangents", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export autograd.functional
def _forward_tangents(output, leaf_tangents):
    """The tangent of `output` when the leaves move along `leaf_tangents`.

    Contract: `output` a Tensor with its recorded graph; `leaf_tangents` a dict id(leaf) ->
    array of that leaf's shape; leaves not in it do not move. Returns a float64 array of
    output's shape (zeros when nothing output depends on moves). Each node of the graph is
    visited once and its tangent computed once, by its rule in JVP_RULES from the tangents
    of its inputs (None for an input that does not move). Raises NotImplementedError naming
    the op when a node that something moved into has no rule. Changes neither the graph nor
    the tangents.
    """
    # Idea: the backward walk's order, the other way round; remember each node's tangent.
    ### BEGIN SOLUTION
    if output.grad_fn is None:
        moved = leaf_tangents.get(id(output))
        return np.zeros(output.shape) if moved is None else np.asarray(moved, dtype=np.float64)
    done = {}
    for node in reversed(topological_order([output.grad_fn])):
        ins = tuple(done.get(t.grad_fn) if t.grad_fn is not None else leaf_tangents.get(id(t)) for t in node.inputs)
        if all(t is None for t in ins):
            done[node] = None
            continue
        if node.op not in JVP_RULES:
            raise NotImplementedError(f"jvp: the op {node.op!r} has no forward rule (JVP_RULES has "
                                      f"{sorted(JVP_RULES)})")
        done[node] = JVP_RULES[node.op](node, ins)
    moved = done[output.grad_fn]
    return np.zeros(output.shape) if moved is None else np.asarray(moved, dtype=np.float64)
    ### END SOLUTION


# %% [markdown]
# Provided: `jvp`, the public function (PyTorch's `torch.autograd.functional.jvp`) that
# records `func`'s graph at the primals and asks your `_forward_tangents` how it moves.

# %%
#| export autograd.functional
def jvp(func, primals, tangents):
    """(func(*primals), J v): the output and how it moves when the primals move along
    `tangents` (torch.autograd.functional.jvp), both computed in float64. `primals` and
    `tangents` are Tensors, or tuples of them of matching shapes (ValueError for a count
    that differs, ShapeError naming both shapes for a tangent of another shape); the
    caller's tensors are not changed."""
    primals = (primals,) if isinstance(primals, Tensor) else tuple(primals)
    tangents = (tangents,) if isinstance(tangents, Tensor) else tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    for p, t in zip(primals, tangents):
        if tuple(p.shape) != tuple(t.shape):
            raise ShapeError(f"jvp: a primal of shape {tuple(p.shape)} has a tangent of shape {tuple(t.shape)}")
    leaves = [Tensor(p.numpy().astype(np.float64), requires_grad=True) for p in primals]
    with enable_grad():
        output = func(*leaves)
    moved = _forward_tangents(output, {id(leaf): t.numpy().astype(np.float64) for leaf, t in zip(leaves, tangents)})
    return output.detach(), Tensor(moved)

# %% nbgrader={"grade": true, "grade_id": "test-forward-tangents", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_W1, _b1, _w2 = (Tensor(_rng.standard_normal(s)) for s in ((5, 4), (4,), (4,)))


def _mlp_np(x):
    return np.tanh(x @ _W1.numpy() + _b1.numpy()) @ _w2.numpy()


def _mlp(x):
    h = (x @ _W1 + _b1).tanh()
    return (h * h.exp() - h).sum() + h @ _w2  # h feeds three ops: a graph with diamonds


def _mlp_np_full(x):
    h = np.tanh(x @ _W1.numpy() + _b1.numpy())
    return (h * np.exp(h) - h).sum() + h @ _w2.numpy()


_x0, _v0 = _rng.standard_normal(5), _rng.standard_normal(5)
_out, _tangent = jvp(_mlp, Tensor(_x0), Tensor(_v0))
assert_close(_out.numpy(), _mlp_np_full(_x0), rtol=1e-12, atol=0, what="jvp's first result: func at the primals")
assert_close(_tangent.numpy(), _moved_by_definition(_mlp_np_full, [_x0], [_v0]), rtol=1e-6, atol=1e-9,
             what="jvp of an MLP whose hidden layer feeds three ops, against the definition (each node once: "
                  "a tangent counted twice moves the output twice as far)")
_xb, _vb = _rng.standard_normal((3, 5)), _rng.standard_normal((3, 5))
_, _tb = jvp(lambda x: (x @ _W1 + _b1).tanh() @ _w2, Tensor(_xb), Tensor(_vb))
assert_close(_tb.numpy(), _moved_by_definition(_mlp_np, [_xb], [_vb]), rtol=1e-6, atol=1e-9,
             what="jvp of a batch of 3 rows: one tangent per output")
_, _tw = jvp(lambda x, w: (x @ _W1 + _b1).tanh() @ w, (Tensor(_x0), _w2), (Tensor(np.zeros(5)), Tensor(_v0[:4])))
assert_close(_tw.numpy(), np.tanh(_x0 @ _W1.numpy() + _b1.numpy()) @ _v0[:4], rtol=1e-12, atol=1e-12,
             what="two primals, only the second (w) moving: the output moves by h · v")
assert_equal(jvp(lambda x: _w2.exp().sum() + 0.0 * x.sum(), Tensor(_x0), Tensor(_v0))[1].numpy(), np.array(0.0),
             "an output that moves with x only through 0 * x: tangent exactly 0")
_still = _forward_tangents(_w2.exp(), {})
assert_equal(_still, np.zeros(4), "nothing moves (no leaf tangents): zeros of the output's shape")
assert_equal(_forward_tangents(_w2, {id(_w2): np.ones(4)}), np.ones(4), "the output is itself a moving leaf")
_leaf32 = Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
for _what, _output in [("a moving float32 leaf", _leaf32), ("float32 leaf * 2", _leaf32 * 2.0)]:
    _got = _forward_tangents(_output, {id(_leaf32): np.arange(3, dtype=np.float32)})
    assert_equal(getattr(_got, "dtype", type(_got)), np.dtype(np.float64),
                 f"the dtype _forward_tangents returns for {_what} moving along a float32 tangent (its contract)")
assert_raises(NotImplementedError, jvp, lambda x: x.sqrt(), Tensor(np.ones(3)), Tensor(np.ones(3)), match="sqrt",
              what="an op with no forward rule (sqrt), named")
_wg = Tensor(np.ones(3), requires_grad=True)  # a weight that records, but does not move
assert_close(jvp(lambda x: (x * 2.0).sum() + _wg.sqrt().sum(), Tensor(np.ones(3)), Tensor(np.ones(3)))[1].numpy(),
             np.array(6.0), rtol=1e-12, atol=0, what="x moves, the weight does not: sqrt (no forward rule) is on the "
             "weight's side only, so nothing asks for its rule")
_seen_ops = []
_count = lambda op: _seen_ops.append(op)  # noqa: E731
_saved_rules = dict(JVP_RULES)
try:
    for _op in list(JVP_RULES):
        JVP_RULES[_op] = (lambda rule, op: lambda node, ts: (_count(op), rule(node, ts))[1])(_saved_rules[_op], _op)
    jvp(_mlp, Tensor(_x0), Tensor(_v0))
finally:
    JVP_RULES.clear()
    JVP_RULES.update(_saved_rules)
assert_equal(sorted(_seen_ops), sorted(["matmul", "add", "tanh", "exp", "mul", "sub", "sum", "matmul", "add"]),
             "each node of the MLP's graph has its rule called once")
print("✓ _forward_tangents: jvp of the MLP =", _tangent.numpy().round(6))

# %% [markdown]
# ### Which direction, when: predict, then measure
#
# A function from $n$ inputs to $m$ outputs has an $m \times n$ Jacobian. One backward pass
# gives one row (a vector-Jacobian product), one forward walk one column (a Jacobian-vector
# product). The cell below builds the whole Jacobian both ways for two functions: a
# **loss**, 256 inputs to one number, and a **curve**, one number to 256 outputs.
# **Predict first**: for each, which way is faster, and by roughly what factor?

# %%
predicted_loss_forward_over_reverse = None   # your number: time(by JVPs) / time(by backward), the loss
predicted_curve_forward_over_reverse = None  # the same, the curve

# %%
_n = 256
_Wl = Tensor(_rng.standard_normal((_n, 64)) / 16)
_u = Tensor(_rng.standard_normal(_n))


def _loss(x):
    return (x @ _Wl).tanh().sum()


def _curve(s):
    return (s * _u).tanh()


def _jacobian_by_backward(f, x0, m):
    rows = []
    for i in range(m):
        x = Tensor(x0, requires_grad=True)
        backward(f(x), np.eye(m)[i] if m > 1 else None)
        rows.append(x.grad.numpy().reshape(-1))
    return np.array(rows)


def _jacobian_by_jvp(f, x0, n):
    flat = np.eye(n)
    return np.array([jvp(f, Tensor(x0), Tensor(flat[j].reshape(np.shape(x0))))[1].numpy().reshape(-1)
                     for j in range(n)]).T


_x_loss, _s = _rng.standard_normal(_n), np.array(0.3)
_times = {}
for _name, _f, _x, (_n_in, _n_out) in [("loss", _loss, _x_loss, (_n, 1)), ("curve", _curve, _s, (1, _n))]:
    _by_back, _by_jvp = _jacobian_by_backward(_f, _x, _n_out), _jacobian_by_jvp(_f, _x, _n_in)
    # each way: the median of five runs after a warm-up (a single run can land on a busy moment)
    _t_back = median_time(lambda: _jacobian_by_backward(_f, _x, _n_out), repeats=5, warmup=1)
    _t_jvp = median_time(lambda: _jacobian_by_jvp(_f, _x, _n_in), repeats=5, warmup=1)
    assert_close(_by_jvp, _by_back, rtol=1e-10, atol=1e-12, what=f"the {_name}'s Jacobian both ways")
    _times[_name] = _t_jvp / _t_back
    print(f"{_name}: {_n_in} inputs -> {_n_out} outputs, Jacobian {_by_back.shape}: {_n_out} backward passes "
          f"{_t_back * 1e3:7.1f} ms, {_n_in} forward walks {_t_jvp * 1e3:7.1f} ms (forward / backward "
          f"{_t_jvp / _t_back:.3g})")
print("your predictions:", predicted_loss_forward_over_reverse, predicted_curve_forward_over_reverse)

# %% [markdown]
# <details><summary>What the ratios say (open after comparing with your predictions)</summary>
#
# Each way pays one pass per column or per row, so the count of passes decides: the loss
# needs 1 backward pass against 256 forward walks, the curve 256 backward passes against
# 1 forward walk. So the measured ratios land far above 1 and far below it; they are not
# exactly $256$ and $1/256$, because a pass does not cost the same each way (a forward walk
# here also reruns `func` to record its graph, and a backward pass frees it). Training
# has millions of inputs and one loss: reverse mode, always. Forward mode wins when the
# inputs are few and the outputs many (a sensitivity to one hyperparameter, the tangent of
# a curve), and it needs no stored graph at all in frameworks that carry the tangent along
# with each value as it is computed (dual numbers, `torch.autograd.forward_ad`): memory
# that does not grow with depth. Combined, forward over reverse gives Hessian-vector
# products, the tool of second-order methods.
# </details>
#
# ## 18. How PyTorch does it
#
# The design you built is PyTorch's, in miniature:
#
# - **`grad_fn` and `next_functions`.** Each tensor made by an op has a `grad_fn`, a C++
#   `Node` such as `MulBackward0`. Instead of our `inputs`, it stores edges to the nodes
#   that produced them: `grad_fn.next_functions`. A leaf that requires grad is represented
#   by an `AccumulateGrad` node, which adds into `.grad` — our `_accumulate_grad` sink.
# - **Saved tensors.** Each backward node saves only what its formula needs
#   (`MulBackward0` saves `self` and `other`; `ExpBackward0` saves its `result`), visible as
#   `grad_fn._saved_self` etc. Our nodes keep all inputs and the output; that is simpler and
#   costs more memory for ops that do not need them (`add`).
# - **Freeing.** After backward, saved tensors are released; touching them again raises
#   *"Trying to backward through the graph a second time"* unless `retain_graph=True`.
#   PyTorch keeps the edges, and only nodes with saved tensors raise; we release whole nodes.
# - **Version counters.** Every tensor has a version number, bumped by in-place ops. A node
#   records the version of each saved tensor, and backward raises if it changed ("one of the
#   variables needed for gradient computation has been modified by an inplace operation").
#   Module 01 refuses in-place ops on tensors that require grad instead — stricter, simpler.
# - **The engine** computes dependency counts for each node (how many consumers it has)
#   and runs a node when all its gradients have arrived — a Kahn-style topological order —
#   with worker threads per device. Ours sorts first with a DFS; both are linear.
# - **Derivative formulas** live in one file, `tools/autograd/derivatives.yaml`: a list of
#   `op: formula per input`, compiled into C++ — the same idea as `BACKWARD_RULES`. Their
#   formulas are written with tensor ops, so they can be differentiated again
#   (`create_graph=True`, higher-order gradients); ours use numpy, so they cannot.
# - **`torch.autograd.Function`** is the API of section 12 (`forward(ctx, ...)`,
#   `ctx.save_for_backward`, `ctx.saved_tensors`, `ctx.needs_input_grad`, `MyOp.apply`); it
#   is how libraries add fused ops, and choosing what to save is exactly the memory/compute
#   trade you made for softplus and log-sum-exp. PyTorch's own `F.softplus` saves its input
#   and recomputes the slope in backward (one saved tensor either way, but it can then also
#   serve a `beta` and a `threshold`); `torch.logsumexp` saves its input and its result,
#   one of the designs you weighed.
# - **Forward mode** in PyTorch carries the tangent with each value instead of walking a
#   recorded graph: `torch.autograd.forward_ad` (`dual_level`, `make_dual`,
#   `unpack_dual`) and `torch.func.jvp(func, primals, tangents)`, whose forward rules come
#   from the same `derivatives.yaml`. `torch.autograd.functional.jvp` is the signature of
#   yours (PyTorch computes it with the double-backward trick).
# - **`torch.autograd.gradcheck`** compares the full Jacobian (or, in fast mode, random
#   projections like ours) in float64 with `eps=1e-6`, `atol=1e-5`, `rtol=1e-3`.
#
# If PyTorch is installed, compare (skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    tw = torch.tensor([1.5, -2.0], requires_grad=True)
    ty = (tw * tw.exp()).sum()
    print("grad_fn:", ty.grad_fn, "| next_functions:", ty.grad_fn.next_functions)
    print("saved by MulBackward0:", ty.grad_fn.next_functions[0][0]._saved_self)
    ty.backward()
    ours_w = Tensor([1.5, -2.0], requires_grad=True)
    backward((ours_w * ours_w.exp()).sum())
    print("grads: torch", tw.grad.numpy(), "| tinytorch", ours_w.grad.numpy())
    try:
        ty.backward()
    except RuntimeError as e:
        print("torch, second backward:", str(e)[:70], "...")

# %% [markdown]
# ## 19. Recap
#
# - Reverse mode pushes $\partial L/\partial(\cdot)$ from the loss back to every input in
#   one pass; each op contributes a **vector-Jacobian product**, never a Jacobian.
# - Autograd arrived without touching module 01: `apply` records nodes by op name, and
#   `BACKWARD_RULES` maps each name to a rule. You derived and wrote the rules for
#   arithmetic, `unbroadcast`, views and indexing (a scatter-add), sums and
#   means, batched matmul, running sums and top-k, activations (softmax's Jacobian without
#   the matrix) and `nll_loss` — each judged by the definition of the derivative, not by a
#   formula you were given.
# - The **engine** sorts the graph iteratively (no recursion limit), visits each node once
#   (linear even for diamond-rich graphs), sums gradients per tensor, accumulates into
#   `.grad`, and frees each node after use unless `retain_graph=True`.
# - `no_grad()`/`enable_grad()` switch recording; `detach()` cuts a tensor out of the graph.
# - `.grad` **accumulates** (the sum over paths, and over backward calls); a training loop
#   calls `zero_grad()` before each backward.
# - `gradcheck` compares every rule with float64 central differences (relative error
#   < 1e-6); use it whenever you add an op in later modules.
# - Your own ops: forward through `apply` (or a `Function`), a rule, a gradcheck — and the
#   design of what the node saves. For softplus you chose between a tensor the node keeps
#   anyway (no extra memory; backward recomputes the slope) and the slope itself (one more
#   array; backward only multiplies); log-sum-exp needed a backward rewritten until nothing
#   overflows at 1e4, the same care as its forward.
# - The graph costs memory (saved activations), and backward costs one to two forward
#   passes (the matmul FLOPs say which); a Linear layer's weight gradient is one GEMM over
#   all the batch's rows, not a batched product and a sum. Timings on a shared machine
#   need care: one BLAS thread, many repeats, the median of ratios or the fastest run.
# - Your engine trains an MLP: the loss went down with two lines of SGD.
# - **Forward mode** pushes one direction through the graph in the order the ops ran: you
#   derived four forward rules and wrote the walk; a Jacobian costs one backward pass per
#   output or one forward walk per input, so losses go backwards and curves forwards.
#
# Run `tito test module 06` to check your work against the full test suite.

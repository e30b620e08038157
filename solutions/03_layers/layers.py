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
# # Module 03 — Layers: Parameter, Module, Linear, Sequential
#
# Module 01 gave you tensors and module 02 the functions between layers. A neural network
# also has **state**: weight matrices and bias vectors that training will adjust. This
# module builds the machinery PyTorch uses to organise that state, `nn.Module`, and the
# most important layer, `nn.Linear`, with the initialisations that make deep networks
# trainable.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain what a `Parameter` is (a tensor that the optimizer will update) and how a
#   `Module` finds all of them, however deeply models are nested;
# - build `Module` itself: attribute registration, `parameters()` and `named_parameters()`
#   with dotted names (`"encoder.fc.weight"`), `children()`, `train()`/`eval()`,
#   `state_dict()`/`load_state_dict()` with errors that say exactly what does not fit, and
#   PyTorch's nested `repr`;
# - derive **Xavier** and **He (Kaiming)** initialisation from the requirement that the
#   signal's variance neither explodes nor vanishes, and implement `tinytorch.nn.init`;
# - write `Linear` (`y = x Wᵀ + b`, any leading batch dimensions) and `Sequential`, and
#   wrap module 02's activations as layers (`nn.ReLU()`, `nn.Softmax(dim)`, ...);
# - count a model's parameter memory and a Linear layer's FLOPs, and measure how its speed
#   depends on the batch size.
#
# ## Prerequisites
#
# Modules 01 (`Tensor`, `apply`, `manual_seed`/`rand`/`randn`, in-place `copy_`,
# `set_grad_enabled`) and 02 (the activation functions). Python: classes and inheritance,
# `super()`, generators (`yield`, `yield from`), `__setattr__`/`__getattr__`.
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/nn/layers.py` when you run `tito export 03`
# (or `tito test module 03`); cells marked `#| export nn.init` become `tinytorch/nn/init.py`,
# the initialisation functions, as in PyTorch's layout. `tinytorch.nn` re-exports the
# classes (`tinytorch.nn.Linear`). Fill in the cells with `# YOUR CODE HERE`, then run the
# check cell below each.

# %%
#| default_exp nn.layers

# %% [markdown]
# ## 1. The idea: a model is a tree of modules that own parameters
#
# A two-layer classifier in PyTorch reads
#
# ```python
# model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
# logits = model(images)                        # forward
# optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
# torch.save(model.state_dict(), "model.pt")
# ```
#
# Three things happen here that this module makes possible:
#
# 1. **Composition.** `Sequential` is a module whose *children* are modules. Models nest:
#    a transformer is a module holding blocks holding attention and MLP modules holding
#    Linear layers. Calling the top module runs `forward` down the tree.
# 2. **Discovery.** `model.parameters()` walks the tree and returns every weight and bias,
#    without you listing them. The optimizer (module 07) needs exactly that list.
# 3. **Naming.** Each parameter has a path in the tree: `"0.weight"`, `"2.bias"`. A
#    `state_dict` maps those names to values, so a model can be saved and loaded into a
#    freshly built copy of itself.
#
# The mechanism is small: when you write `self.fc = Linear(...)` inside a module,
# `Module.__setattr__` notices that the value is a `Module` (or a `Parameter`) and
# records it in an ordered registry. Everything else — `parameters()`, `train()`,
# `state_dict()`, `repr` — is a walk over those registries.
#
# ### Why initialisation matters
#
# A Linear layer starts from random weights, and *how* random decides whether a deep
# network can learn at all. Push a batch through 30 layers of `x ← relu(x Wᵀ)` with
# weights drawn from a normal distribution with four different standard deviations
# (numpy only, nothing built yet):

# %%
import sys
import time
import math
from collections import OrderedDict

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

_rng = np.random.default_rng(0)
_width, _depth = 256, 30
_x0 = _rng.standard_normal((512, _width))
_mats = [_rng.standard_normal((_width, _width)) for _ in range(_depth)]   # unit-variance weights


def _layer_stds(std):
    """The activations' std after each of 30 ReLU layers whose weights are _mats * std."""
    x, stds = _x0, []
    for m in _mats:
        x = np.maximum(x @ (m * std).T, 0)
        stds.append(x.std())
    return stds


# ReLU layers are homogeneous: weights c times larger make the last layer's output c**30
# times larger. So one run at std 1 tells which std ends where it started, with no formula.
_kept = (_x0.std() / _layer_stds(1.0)[-1]) ** (1 / _depth)
fig, ax = plt.subplots(figsize=(7, 3.5))
for _label, _std in [("std = 0.03 (too small)", 0.03), ("std = 1/√fan_in", 1 / math.sqrt(_width)),
                     ("the std that ends where it starts (section 8 derives it)", _kept),
                     ("std = 0.1 (too big)", 0.1)]:
    ax.semilogy(range(1, _depth + 1), _layer_stds(_std), "o-", ms=3, label=_label)
ax.set_xlabel("layer")
ax.set_ylabel("std of the activations")
ax.set_title("30 ReLU layers of width 256: only one scale keeps the signal alive")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# Each layer multiplies the signal's scale by a factor that depends on the weights' standard
# deviation; over 30 layers a factor of 1.5 becomes $1.5^{30} \approx 10^5$ and a factor of
# 0.7 becomes $10^{-5}$. Gradients flow back through the same matrices and suffer the same
# fate. Section 8 derives the factor and the scale that makes it exactly 1 (the green
# line): He initialisation for ReLU networks, Xavier for tanh/linear ones.

# %% [markdown]
# ## 2. Parameter: a tensor that belongs to a model
#
# A `Parameter` is a `Tensor` subclass with two differences:
#
# - it **requires grad by default** (`Parameter(data)` means "the optimizer will train
#   this"; `requires_grad=False` freezes it);
# - assigning one to a module attribute **registers** it (section 3): `Module.__setattr__`
#   recognises it by its type.
#
# Everything else is inherited: arithmetic on a Parameter goes through `apply` and returns
# ordinary Tensors (a weight times an input is an activation, not a parameter). Our
# `Parameter(data)` copies `data` into fresh storage, as `Tensor(data)` does (PyTorch's
# shares the given tensor's memory instead; a copy is the safer choice for us, because
# the model then owns its memory exclusively). With no data, PyTorch makes an empty
# float32 tensor of shape `(0,)`.
#
# The cell below starts the package file; `Parameter.__init__` is yours.
#
# <details><summary>Hint 1</summary>
#
# A subclass's `__init__` can hand the real work to its parent's through `super()`:
# `Tensor.__init__` already turns data into storage and accepts `requires_grad`.
# </details>
#
# <details><summary>The approach</summary>
#
# Replace a missing `data` by an empty float32 numpy array, then call the parent
# initialiser with the data and the `requires_grad` flag. It refuses integer data that
# requires grad by itself.
# </details>

# %% nbgrader={"grade": false, "grade_id": "parameter", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
"""Layers (module 03): Parameter, Module, Linear, Sequential and the activation layers."""
import math
from collections import OrderedDict, namedtuple

import numpy as np

from tinytorch._tensor import Tensor, _check_dtype, zeros
from tinytorch._tensor import _DEVICE_WORDS, _to_device, device as _device_type
from tinytorch.nn.activations import gelu, leaky_relu, log_softmax, relu, sigmoid, softmax, tanh
from tinytorch.nn.init import _calculate_fan_in_and_fan_out, _no_grad_copy_, kaiming_uniform_, uniform_

__all__ = [
    "Parameter", "Module", "Linear", "Sequential", "ModuleList", "ModuleDict", "Identity",
    "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "Softmax", "LogSoftmax",
]


class Parameter(Tensor):
    """A Tensor that is a trainable part of a Module: requires grad by default, and is
    registered when assigned to a Module attribute (torch.nn.Parameter)."""

    def __init__(self, data=None, requires_grad=True):
        """Copy `data` into a new parameter.

        Contract: `data` is a Tensor, numpy array, list or number, or None (an empty float32
        tensor of shape (0,)). The parameter has data's shape and dtype, owns a copy of its
        values, and requires grad unless `requires_grad=False`.
        """
        # Idea: a Parameter *is* a Tensor; only the default of requires_grad differs.
        ### BEGIN SOLUTION
        if data is None:
            data = np.zeros(0, dtype=np.float32)
        super().__init__(data, requires_grad=requires_grad)
        ### END SOLUTION

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


# %%
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state
from tinytorch import manual_seed

# %% nbgrader={"grade": true, "grade_id": "test-parameter", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_src = Tensor([[1.0, 2.0], [3.0, 4.0]])
_p = Parameter(_src)
check(isinstance(_p, Tensor) and isinstance(_p, Parameter), "a Parameter is a Tensor", got=type(_p).__name__)
assert_equal(_p.requires_grad, True, "Parameter(data).requires_grad")
assert_equal((_p.shape, str(_p.dtype)), ((2, 2), "float32"), "shape and dtype of Parameter(float32 2x2)")
check(_p._storage is not _src._storage, "a Parameter owns a copy of its data")
assert_equal(str(Parameter(np.zeros(3)).dtype), "float64", "Parameter(float64 array).dtype")
assert_equal(Parameter([1.0], requires_grad=False).requires_grad, False, "Parameter(..., requires_grad=False)")
assert_equal((Parameter().shape, str(Parameter().dtype)), ((0,), "float32"), "Parameter() is empty float32")
_y = _p * 2
assert_equal(type(_y).__name__, "Tensor", "the type of Parameter * 2 (an activation, not a parameter)")
print(_p)
print("✓ Parameter")

# %% [markdown]
# ## 3. Module: registering parameters and submodules
#
# The `Module` class is provided, in three cells below (Python assembles it from two
# helper base classes, only so that no cell is too long to read). Read it through: most
# methods are short, and the ideas that need more than a few lines are delegated to
# functions that you write in the next sections (as `Tensor` did in module 01):
#
# | method | written in | what it does |
# |---|---|---|
# | `__setattr__` | `_module_setattr`, this section | registers Parameters and Modules |
# | `named_modules`, `named_parameters` | `_named_modules`, `_named_members`, section 4 | walk the tree |
# | `train` | `_train`, section 5 | set the mode recursively |
# | `state_dict`, `load_state_dict` | `_state_dict`, `_load_state_dict`, section 6 | save / restore |
# | `__repr__` | `_module_repr`, section 7 | the nested printout |
#
# **The registries.** Each module keeps three ordered dictionaries: `_parameters`
# (name → Parameter or None), `_buffers` (name → Tensor: state that is saved but not
# trained, like BatchNorm's running mean in module 09) and `_modules` (name → child Module
# or None). Order matters: it is the order of `parameters()` and of the `state_dict`, the
# order in which you assigned the attributes.
#
# **Single source of truth.** A registered name lives *only* in its registry, not in the
# instance's ordinary `__dict__`. Reading `model.weight` still works thanks to
# `__getattr__`, which Python calls only when normal lookup fails, and which then looks in
# the registries. So there is never a stale copy to get out of sync: replacing
# `model.fc = Linear(...)` replaces the registry entry, and the new layer's parameters are
# the ones `parameters()` returns.
#
# First, two helpers and the registration methods:

# %%
#| export
_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_REGISTRIES = ("_parameters", "_buffers", "_modules")


def _check_name(module, name, kind):
    """Names of parameters, buffers and submodules: non-empty strings without dots that do
    not clash with a method or an existing ordinary attribute (as PyTorch's register_*)."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "" or "." in name:
        raise KeyError(f"{kind} name can't be empty or contain \".\", got {name!r}")
    if hasattr(type(module), name) or name in module.__dict__:
        raise KeyError(f"attribute '{name}' already exists on {type(module).__name__}; "
                       f"choose another {kind} name")


def _forget(module, name, keep):
    """Remove `name` from the instance __dict__ and from every registry except `keep` (the
    one about to receive it: an existing entry there keeps its position in the order)."""
    module.__dict__.pop(name, None)
    for registry in _REGISTRIES:
        if registry != keep:
            module.__dict__.get(registry, {}).pop(name, None)


# %% [markdown]
# The registration methods: `register_parameter`, `register_buffer` and `add_module`
# validate the name and the value, and put the value in its registry (removing any other
# meaning of the name first); `__getattr__` finds registered names.

# %%
#| export
class _ModuleRegistration:
    """Module's registration methods (a base class of Module, below)."""

    def __getattr__(self, name):
        # Only called when ordinary lookup fails: look in the registries.
        d = self.__dict__
        for registry in _REGISTRIES:
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for registry in _REGISTRIES:
            if name in self.__dict__.get(registry, {}):
                del self.__dict__[registry][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        names = set(object.__dir__(self))
        for registry in _REGISTRIES:
            names.update(self.__dict__.get(registry, {}))
        return sorted(names)

    def register_parameter(self, name, param):
        """Register `param` (a Parameter, or None for an absent one like bias=False) as `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(tinytorch.nn.Parameter or None required)")
        if name not in self._parameters:
            _check_name(self, name, "parameter")
        _forget(self, name, "_parameters")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a Tensor that is state but not trained (saved in state_dict if persistent)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(tinytorch.Tensor or None required)")
        if name not in self._buffers:
            _check_name(self, name, "buffer")
        _forget(self, name, "_buffers")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        """Register `module` (a Module, or None) as the child `name`."""
        if "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass "
                            f"(tinytorch.nn.Module or None required for '{name}')")
        if name not in self._modules:
            _check_name(self, name, "module")
        _forget(self, name, "_modules")
        self._modules[name] = module

    register_module = add_module


# %% [markdown]
# Then the walks over the tree. Each is a thin loop over `named_modules` or
# `named_parameters`, which you write in section 4; `train` calls your `_train` of
# section 5. `apply(fn)` runs `fn` on every module, children first: the usual way to
# re-initialise a whole model.

# %%
#| export
class _ModuleTree:
    """Module's walks over the tree of modules (a base class of Module, below)."""

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, pre-order; "" is self."""
        return _named_modules(self, memo, prefix, remove_duplicate)

    def modules(self):
        """This module and every descendant."""
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        """(name, child) for the direct children (each child once)."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        """The direct children."""
        for _, module in self.named_children():
            yield module

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) for every parameter (of the descendants too if recurse)."""
        return _named_members(self, "_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        """Every Parameter, each once: what an optimizer is given."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Tensor) for every buffer."""
        return _named_members(self, "_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        """Every buffer, each once."""
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def train(self, mode=True):
        """Set training mode on this module and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        return _train(self, mode)

    def eval(self):
        """Evaluation mode (train(False)): Dropout off, BatchNorm uses running statistics."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Freeze (False) or unfreeze (True) every parameter; returns self."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Forget the gradients: .grad = None (default), or zero them in place."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad = param.grad.detach()
                param.grad.zero_()

    def apply(self, fn):
        """Call fn(m) for every descendant m (children first) and then for self; returns self.
        The usual way to run a custom initialisation over a whole model."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self


# %% [markdown]
# And `Module` itself. **`__call__` and `forward`**: subclasses write `forward`; users
# call the module, `model(x)`. `__call__` is the place where PyTorch runs hooks around
# `forward` (and where you could add timing or logging for every layer); ours simply
# calls it. **`__setattr__`** hands every assignment `module.name = value` to your
# `_module_setattr`, right after this cell.

# %%
#| export
class Module(_ModuleRegistration, _ModuleTree):
    """Base class for every layer and model (torch.nn.Module).

    Subclasses call super().__init__() first, assign Parameters and Modules as attributes
    (they are registered automatically), and define forward(). Call the module, not forward.
    """

    def __init__(self):
        # The registries go straight into __dict__: our __setattr__ needs them to exist.
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        self.training = True  # an ordinary attribute, set through __setattr__

    def forward(self, *args, **kwargs):
        """The computation; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" '
                                  f"function: define forward(self, ...) in your Module subclass")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __setattr__(self, name, value):
        _module_setattr(self, name, value)

    # ------------------------------------------------------------------ saving (section 6)
    def state_dict(self, prefix="", keep_vars=False):
        """OrderedDict name -> copy of every parameter and persistent buffer (keep_vars: the
        live tensors instead of copies)."""
        return _state_dict(self, prefix, keep_vars)

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into this module's parameters and buffers, in place and unrecorded.
        Checks every key and shape before copying anything. Returns (missing, unexpected)."""
        return _load_state_dict(self, state_dict, strict)

    # ------------------------------------------------------------------ printing (section 7)
    def extra_repr(self):
        """The text inside this module's parentheses in repr (override it: "in_features=2, ...")."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        return _module_repr(self)

    # ------------------------------------------------------------------ dtype (last: shadows float)
    def to(self, *args, dtype=None, device=None):
        """Move every parameter and buffer to `device` ("cuda", "cpu"; module 17) and/or convert
        the floating ones to `dtype`, in place (the same Parameter objects, so an optimizer
        built earlier still holds them); returns self. PyTorch's Module.to."""
        for arg in args:
            if isinstance(arg, _device_type) or (isinstance(arg, str) and arg.split(":")[0] in _DEVICE_WORDS):
                device = arg
            else:
                dtype = arg
        if device is not None:
            self._to_device(device)
        if dtype is None:
            return self
        dt = _check_dtype(dtype)
        if dt.kind != "f":
            raise TypeError(f"Module.to only accepts floating dtypes, got {dt}")
        for module in self.modules():
            for registry in (module._parameters, module._buffers):
                for t in registry.values():
                    if t is not None and t.dtype.kind == "f" and t.dtype != dt:
                        t._init_storage(np.array(t.numpy(), dtype=dt, order="C"))
                        if t.grad is not None:
                            t.grad = t.grad.detach().to(dt)
        return self

    def _to_device(self, target):
        """Move each parameter and buffer (and its grad) to `target`, keeping the objects."""
        for module in self.modules():
            for registry in (module._parameters, module._buffers):
                for t in registry.values():
                    if t is None:
                        continue
                    moved = _to_device(t.detach(), target)  # the backend's checks and copy
                    t._init_storage(np.array(moved.numpy(), order="C"))
                    t._device = moved._device
                    if t.grad is not None:
                        t.grad = _to_device(t.grad.detach(), target)

    def double(self):
        """to(float64): for gradient checks (module 06)."""
        return self.to(np.float64)

    def float(self):
        """to(float32)."""
        return self.to(np.float32)


# %% [markdown]
# Now the heart of it, `_module_setattr(module, name, value)`, called for **every**
# `module.name = value`, including `self.training = True` in `__init__`. It decides by the
# value's type and by what the name already is, as PyTorch does. Its contract is in the
# docstring; think about the order of the questions it asks before you write it.
#
# <details><summary>Hint 1</summary>
#
# Which question comes first: "is the value a Parameter?" or "is the name already a
# registered parameter?" Consider re-assigning a new Parameter to `weight` (allowed), and
# assigning a plain Tensor to `weight` (a mistake that would silently detach a trainable
# weight from the optimizer).
# </details>
#
# <details><summary>Hint 2</summary>
#
# Before `Module.__init__` ran, `module._parameters` goes through `__getattr__` and fails
# confusingly. Read the registries from `module.__dict__`, where a missing one is simply
# absent: that absence *is* the "forgot `super().__init__()`" case.
# </details>
#
# <details><summary>Hint 3</summary>
#
# The bookkeeping is provided: `_forget` removes every other meaning of a name, the
# registration methods (`register_parameter`, `add_module`) store a value in its registry,
# and `object.__setattr__` stores an ordinary attribute without calling your function again.
# Like PyTorch's, the registration methods refuse a name that is still an ordinary
# attribute: which of those pieces must come first?
# </details>
#
# <details><summary>The approach</summary>
#
# The order of the cases is the design. For each assignment ask two questions: is the
# *value* something a registry must hold (a Parameter, a Module)? Is the *name* already
# registered (then the new value must fit that registry, or be None to unset it)? Values
# come first, so that `self.w = Parameter(...)` wins over an ordinary attribute of the same
# name; names next, so that replacing a registered child by a number is an error rather
# than a silent detachment. Only what falls through every case is an ordinary attribute.
# And a name lives in one place: moving into a registry means leaving the others.
# </details>

# %% nbgrader={"grade": false, "grade_id": "module-setattr", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _module_setattr(module, name, value):
    """Module.__setattr__: route `module.name = value` by the value's type.

    Contract:
    - a Parameter value is registered as the parameter `name`, whatever the name meant
      before (an ordinary attribute, a child, a buffer); a Module value likewise becomes
      the child `name`. Either one before Module.__init__ ran raises AttributeError whose
      message mentions `__init__` (the subclass forgot super().__init__());
    - a name that is already a registered parameter accepts only a Parameter or None (None
      unsets it and keeps its place in the order); any other value raises TypeError naming
      the attribute and the type expected. Likewise a registered child (Module or None)
      and a registered buffer (Tensor or None, stored in the buffer registry; a buffer
      registered with persistent=False stays out of state_dict);
    - anything else (numbers, strings, the training flag, a Tensor under a new name) is an
      ordinary attribute in the instance's __dict__.
    """
    # Idea: a registered name lives in exactly one place, and its kind is guarded.
    ### BEGIN SOLUTION
    d = module.__dict__
    params, modules, buffers = d.get("_parameters"), d.get("_modules"), d.get("_buffers")
    if isinstance(value, Parameter):
        if params is None:
            raise AttributeError("cannot assign parameters before Module.__init__() call "
                                 "(call super().__init__() first in your __init__)")
        _forget(module, name, "_parameters")
        module.register_parameter(name, value)
    elif params is not None and name in params:
        if value is not None:
            raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                            f"(tinytorch.nn.Parameter or None expected)")
        module.register_parameter(name, None)
    elif isinstance(value, Module):
        if modules is None:
            raise AttributeError("cannot assign module before Module.__init__() call "
                                 "(call super().__init__() first in your __init__)")
        _forget(module, name, "_modules")
        module.add_module(name, value)
    elif modules is not None and name in modules:
        if value is not None:
            raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                            f"(tinytorch.nn.Module or None expected)")
        module.add_module(name, None)
    elif buffers is not None and name in buffers:
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                            f"(tinytorch.Tensor or None expected)")
        buffers[name] = value
    else:
        object.__setattr__(module, name, value)
    ### END SOLUTION


# %% [markdown]
# The check builds two tiny modules that later checks reuse: `_Affine` (two parameters and
# an ordinary attribute) and `_Two` (two `_Affine` children).

# %% nbgrader={"grade": true, "grade_id": "test-module-setattr", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
class _Affine(Module):
    def __init__(self):
        super().__init__()
        self.scale = Parameter([2.0])
        self.shift = Parameter([0.5])
        self.note = "an ordinary attribute"

    def forward(self, x):
        return x * self.scale + self.shift


class _Two(Module):
    def __init__(self):
        super().__init__()
        self.first = _Affine()
        self.second = _Affine()

    def forward(self, x):
        return self.second(self.first(x))


_m = _Affine()
assert_equal(list(_m._parameters), ["scale", "shift"], "_Affine's parameter registry, in assignment order")
check("scale" not in _m.__dict__, "a registered parameter is not also an ordinary attribute",
      got=sorted(_m.__dict__))
check(_m.scale is _m._parameters["scale"], "module.scale reads the registered Parameter")
assert_equal((_m.note, _m.training), ("an ordinary attribute", True), "ordinary attributes (note, training)")
assert_equal(_m(Tensor([1.0])).tolist(), [2.5], "_Affine()(1.0) = 1 * 2 + 0.5")
_t = _Two()
assert_equal(list(_t._modules), ["first", "second"], "_Two's child registry")
check(_t.first is _t._modules["first"] and "first" not in _t.__dict__, "a child lives only in _modules")
assert_equal(_t(Tensor([1.0])).tolist(), [5.5], "_Two()(1.0) = (1 * 2 + 0.5) * 2 + 0.5")
assert_raises(TypeError, setattr, _m, "scale", Tensor([3.0]), match="scale",
              what="assigning a plain Tensor to the parameter name 'scale'")
_m.scale = None
check(_m.scale is None and list(_m._parameters) == ["scale", "shift"],
      "None unsets the first of two parameters, keeping its place", got=list(_m._parameters))
_m.register_buffer("steps", Tensor([0.0]))
_steps = Tensor([5.0])
_m.steps = _steps
check(_m._buffers["steps"] is _steps and "steps" not in _m.__dict__,
      "a Tensor assigned to the buffer name 'steps' replaces the buffer in its registry",
      got=f"_buffers['steps'] {_m._buffers['steps']}, plain attributes {sorted(_m.__dict__)}")
_m.register_buffer("scratch", Tensor([0.0]), persistent=False)
_m.scratch = Tensor([1.0])
check("scratch" in _m._non_persistent_buffers, "a buffer registered with persistent=False, then re-assigned, "
      "is still non-persistent", got=f"_non_persistent_buffers {sorted(_m._non_persistent_buffers)}")
_m.note = Parameter([1.0])  # an ordinary attribute may become a parameter
check("note" in _m._parameters and "note" not in _m.__dict__, "an ordinary attribute re-assigned a Parameter "
      "becomes a registered parameter", got=(list(_m._parameters), sorted(_m.__dict__)))
assert_raises(TypeError, setattr, _t, "first", "not a module", match="first",
              what="assigning a string to the child name 'first'")


class _Forgot(Module):
    def __init__(self):
        self.w = Parameter([1.0])


assert_raises(AttributeError, _Forgot, match="__init__", what="a Parameter assigned before Module.__init__")
print("✓ Module.__setattr__: _Two() has children", list(_t._modules), "and _Affine() parameters", list(_m._parameters))

# %% [markdown]
# ## 4. Walking the tree: `named_modules` and `named_parameters`
#
# Every query about a model is a walk over its tree. Two functions do all the walking.
# `_named_modules` yields each module with its **dotted path**: the child `fc` of a module
# at path `"encoder"` is `"encoder.fc"`, and the top module's path is the given prefix
# (`""` by default, with no leading dot below it; the provided `_join` does exactly that).
# `_named_members` yields the entries of one registry (`"_parameters"` or `"_buffers"`) of
# every module of that walk.
#
# Two kinds of sharing make "each once" matter:
#
# - a **shared module**: the same layer object placed at two paths (`net.b = net.a`);
# - a **tied parameter**: one Parameter object owned by two different modules (GPT's token
#   embedding and its output layer share one matrix, module 13). An optimizer given it
#   twice would update it twice per step.
#
# With `remove_duplicate` (the default) each module, and each tensor, is yielded only at
# its first path. Identity is what counts, not equality: compare objects by `id()` (`==` on
# tensors is elementwise, so tensors do not behave as set members by value).
#
# <details><summary>Hint 1</summary>
#
# `_named_modules` is a recursive generator: yield the module itself, then hand each child
# to a recursive call with a longer prefix and pass its results on (`yield from`).
# </details>
#
# <details><summary>Hint 2</summary>
#
# The set of ids already seen must be *one* set shared by the whole walk, not a new one
# per level; `memo` is that set (create it at the top when it is None, and pass it down).
# In `_named_members`, keep a second set, of tensor ids.
# </details>
#
# <details><summary>The approach</summary>
#
# Both functions are one pre-order walk of the tree. What must be shared by the whole walk,
# rather than made afresh at each level, so that a module reached by two paths is met once?
# Where does a child's path come from, and what is the path of the module you start from?
# `_named_members` needs no recursion of its own: it is a loop over the modules of a walk
# (or this module alone) and, in each, over one registry, with the same question about a
# tensor reached twice.
# </details>

# %% nbgrader={"grade": false, "grade_id": "named-members", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _named_modules(module, memo, prefix, remove_duplicate):
    """Module.named_modules.

    Contract: yields (path, module) for `module` itself (path = `prefix`) and then,
    depth-first in registration order, for every descendant, with paths joined by dots
    ("encoder.fc"); None children are skipped. With `remove_duplicate`, a module object
    met again (at any depth) is not yielded again, nor are its descendants; `memo` is a
    set of ids already seen (None: start a new one).
    """
    # Idea: pre-order recursion over `_modules`, one shared memo for the whole walk.
    ### BEGIN SOLUTION
    if memo is None:
        memo = set()
    if remove_duplicate:
        if id(module) in memo:
            return
        memo.add(id(module))
    yield prefix, module
    for name, child in module._modules.items():
        if child is None:
            continue
        yield from _named_modules(child, memo, _join(prefix, name), remove_duplicate)
    ### END SOLUTION


def _named_members(module, registry, prefix, recurse, remove_duplicate):
    """Module.named_parameters / named_buffers.

    Contract: `registry` is "_parameters" or "_buffers". Yields (dotted name, tensor) for
    every non-None entry of that registry of every module in
    module.named_modules(prefix=prefix, remove_duplicate=remove_duplicate), in that order
    (or of `module` alone, at `prefix`, when `recurse` is False). With `remove_duplicate`,
    a tensor object already yielded (tied: owned by two modules) is not yielded again.
    """
    # Idea: the same tensor reached twice is trained once.
    ### BEGIN SOLUTION
    seen = set()
    walk = module.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, module)]
    for module_prefix, mod in walk:
        for name, value in mod.__dict__[registry].items():
            if value is None:
                continue
            if remove_duplicate:
                if id(value) in seen:
                    continue
                seen.add(id(value))
            yield _join(module_prefix, name), value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-named-members", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_t = _Two()
assert_equal([n for n, _ in _t.named_modules()], ["", "first", "second"], "named_modules of _Two")
assert_equal([n for n, _ in _t.named_parameters()], ["first.scale", "first.shift", "second.scale", "second.shift"],
             "named_parameters of _Two")
check(list(_t.parameters())[2] is _t.second.scale, "parameters() yields the Parameter objects themselves")
assert_equal([n for n, _ in _t.named_parameters(prefix="model")][0], "model.first.scale", "with prefix='model'")
assert_equal(list(_t.named_parameters(recurse=False)), [], "named_parameters(recurse=False) of _Two (owns none)")
_deep = _Two()
_deep.first = _Two()  # three levels: the prefix must grow at every level
assert_equal([n for n, _ in _deep.named_parameters()][:2], ["first.first.scale", "first.first.shift"],
             "named_parameters three levels deep")
_t.second = _t.first  # a shared module: trained once
assert_equal(len(list(_t.parameters())), 2, "parameters() when first and second are one module")
assert_equal(len(list(_t.modules())), 2, "modules() when first and second are one module")
assert_equal(len(list(_t.named_modules(remove_duplicate=False))), 3, "named_modules(remove_duplicate=False)")
_tied = _Two()
_tied.second.scale = _tied.first.scale  # a tied parameter: two modules, one Parameter
assert_equal([n for n, _ in _tied.named_parameters()], ["first.scale", "first.shift", "second.shift"],
             "named_parameters with second.scale tied to first.scale")
_own = _Two()
_own.bias = Parameter(np.zeros(1))  # a parameter of the top module itself: its name has no prefix
_own.second.register_buffer("steps", Tensor(np.zeros(1)))
assert_equal([n for n, _ in _own.named_parameters()][0], "bias",
             "the top module's own parameter comes first, by its bare name")
assert_equal([n for n, _ in _own.named_buffers()], ["second.steps"], "named_buffers: the buffers, not the parameters")
_own.first.shift = None  # unset: still a registered name, but nothing to train
_own.second = None  # an unset child: the walk skips it
assert_equal([n for n, _ in _own.named_modules()], ["", "first"], "named_modules with the child 'second' set to None")
check("first.shift" not in [n for n, _ in _own.named_parameters()], "an unset (None) parameter is not listed",
      got=[n for n, _ in _own.named_parameters()])
print("✓ named_modules, named_parameters:", [n for n, _ in _deep.named_parameters()])

# %% [markdown]
# ## 5. Training mode
#
# Some layers behave differently while training and while evaluating: Dropout (module 08)
# zeroes random activations only in training; BatchNorm (module 09) uses the batch's
# statistics in training and its running averages in evaluation. Each module has a
# `training` flag, and `model.train()` / `model.eval()` must set it on the **whole tree**:
# a Dropout three levels down that stays in training mode during evaluation silently
# spoils every accuracy you measure.
#
# <details><summary>Hint 1</summary>
#
# Set the flag on this module, then on each child. Call the children's `train` *method*
# rather than your function, so that a subclass that overrides `train` is still reached.
# </details>
#
# <details><summary>The approach</summary>
#
# A mode belongs to the whole subtree below the module it is set on, and each module in it
# may have its own idea of what switching mode involves (a subclass can override `train`).
# Whose code must run for each descendant, then? And what should `train` return so that
# `model = Net().eval()` works?
# </details>

# %% nbgrader={"grade": false, "grade_id": "train", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _train(module, mode):
    """Module.train (the mode is already checked to be a bool).

    Contract: sets `training = mode` on `module` and on every descendant (through each
    child's `train` method); returns `module`.
    """
    # Idea: a mode is a property of the whole tree, not of one node.
    ### BEGIN SOLUTION
    module.training = mode
    for child in module.children():
        child.train(mode)
    return module
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-train", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_outer = _Two()
_outer.first = _Two()  # five modules, three levels
_calls = []


class _Logged(_Affine):
    def train(self, mode=True):  # a subclass that overrides train: the tree must reach it
        _calls.append(mode)
        return super().train(mode)


_outer.second = _Logged()
check(_outer.eval() is _outer, "eval() returns the module itself")
assert_equal([m.training for m in _outer.modules()], [False] * 5, "training flags of all five modules after eval()")
check(_outer.first.train() is _outer.first, "train() returns the module itself")
assert_equal([m.training for m in _outer.modules()], [False, True, True, True, False],
             "flags after _outer.first.train(): only that subtree trains")
assert_equal(_calls, [False], "the child that overrides train: its own train(False) ran once, during eval()")
print("✓ train / eval: flags", [m.training for m in _outer.modules()])

# %% [markdown]
# ## 6. Saving and loading: `state_dict` and `load_state_dict`
#
# A **state dict** is an ordered dictionary from each parameter's (and persistent
# buffer's) dotted name to its values. It is what gets saved to disk (module 08 writes it
# in a safe format) and loaded into a freshly constructed model of the same architecture.
# It holds data only, no code: loading it requires building the model first, and the
# names are the contract between the two.
#
# ### Writing into a parameter without recording
#
# First a helper that both loading and initialisation need. Writing new values into a
# parameter is an in-place operation on a tensor that requires grad; module 01 refuses
# that while grad mode is on (autograd may need the old values). Loading and initialising
# are not part of any computation to differentiate, so recording must be off for the
# copy, and the previous mode must come back afterwards **even if the copy raises**:
# otherwise one failed load would silently switch autograd off for the rest of the
# program. (PyTorch does the same with `torch.no_grad()`, which module 06 builds.)
#
# <details><summary>Hint 1</summary>
#
# Module 01 gives you `is_grad_enabled()`, `set_grad_enabled(mode)` and `Tensor.copy_`,
# which broadcasts and casts values into the tensor's own memory.
# </details>
#
# <details><summary>The approach</summary>
#
# The copy may raise (a shape that does not broadcast), and the grad mode is global state
# that every later line of the program depends on. Which Python construct guarantees that
# code runs on the way out, error or not? And "restore" means restore what it was, which
# is not always "on".
# </details>

# %%
#| export nn.init
"""Weight initialisation (module 03), mirroring torch.nn.init: in-place fills that are not
recorded, drawn from tinytorch's generator, and the gains and fans they are scaled by."""
import math

from tinytorch._tensor import is_grad_enabled, rand, randn, set_grad_enabled

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]

# %% nbgrader={"grade": false, "grade_id": "no-grad-copy", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.init
def _no_grad_copy_(tensor, values):
    """Write `values` into `tensor`'s own memory without recording (init, loading).

    Contract: `values` is anything `Tensor.copy_` accepts (broadcastable to tensor's shape;
    cast to its dtype). The tensor keeps its storage and stays a leaf (no grad_fn); the
    grad mode afterwards is what it was before, also when the copy raises (the error then
    propagates). Returns `tensor`.
    """
    # Idea: switch recording off around the copy, and always switch it back.
    ### BEGIN SOLUTION
    previous = is_grad_enabled()
    set_grad_enabled(False)
    try:
        tensor.copy_(values)
    finally:
        set_grad_enabled(previous)
    return tensor
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-no-grad-copy", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    _p = Parameter([1.0, 2.0])
    _storage = _p._storage
    check(_no_grad_copy_(_p, [5.0, 6.0]) is _p, "_no_grad_copy_ returns the tensor")
    assert_equal(_p.tolist(), [5.0, 6.0], "values after _no_grad_copy_(p, [5, 6])")
    check(_p._storage is _storage and _p.grad_fn is None, "copied into the same storage, not recorded")
    assert_equal(is_grad_enabled(), True, "grad mode after a successful copy")
    assert_raises(ValueError, _no_grad_copy_, _p, [1.0, 2.0, 3.0], what="copying 3 values into a (2,) parameter")
    assert_equal(is_grad_enabled(), True, "grad mode after a copy that raised (restore it in a finally)")
    set_grad_enabled(False)
    _no_grad_copy_(_p, [0.0, 0.0])
    assert_equal(is_grad_enabled(), False, "grad mode after a copy made while it was already off")
print("✓ _no_grad_copy_")

# %% [markdown]
# ### `state_dict`
#
# The state dict walks the tree and collects, under dotted names, every module's non-None
# parameters and then its non-None *persistent* buffers (a buffer registered with
# `persistent=False` is in `_non_persistent_buffers` and is not saved). A module shared
# under two names (one block reused twice) is saved under **each** of its names, as
# PyTorch does, so that every path of the model can be loaded back: which walk of
# section 4 visits it twice?
#
# The values are **copies** that do not require grad, so that later training does not
# change a saved checkpoint; with `keep_vars=True`, the live tensors themselves (loading
# uses that to find where to write).
#
# <details><summary>Hint 1</summary>
#
# `Tensor(t)` makes a copy of `t` that does not require grad. The key of a parameter is
# its module's path joined with its own name (`_join`).
# </details>
#
# <details><summary>The approach</summary>
#
# A checkpoint is the tree flattened: every module's own tensors under the module's path.
# The key order is part of the contract (PyTorch's, module by module, parameters before
# buffers), and so is what is left out: a None, a buffer marked non-persistent. Why must
# the values be copies by default, and when would you want the live tensors?
# </details>

# %% nbgrader={"grade": false, "grade_id": "state-dict", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _state_dict(module, prefix, keep_vars):
    """Module.state_dict.

    Contract: returns an OrderedDict holding, module by module in the tree's order (a
    module reachable under several paths once under each), the module's non-None
    parameters and then its non-None persistent buffers, each under the key path.name
    (name alone at an empty path; every key starts with `prefix` when one is given).
    Values are copies (new storage, requires_grad False), or with `keep_vars` the live
    tensors.
    """
    # Idea: a checkpoint is the tree flattened into (dotted name, values).
    ### BEGIN SOLUTION
    out = OrderedDict()
    for module_prefix, mod in module.named_modules(prefix=prefix, remove_duplicate=False):
        for name, param in mod._parameters.items():
            if param is not None:
                out[_join(module_prefix, name)] = param if keep_vars else Tensor(param)
        for name, buf in mod._buffers.items():
            if buf is not None and name not in mod._non_persistent_buffers:
                out[_join(module_prefix, name)] = buf if keep_vars else Tensor(buf)
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-state-dict", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = _Two()
_a.first.register_buffer("count", Tensor([3.0]))
_a.first.register_buffer("scratch", Tensor([0.0]), persistent=False)
_sd = _a.state_dict()
assert_equal(list(_sd), ["first.scale", "first.shift", "first.count", "second.scale", "second.shift"],
             "state_dict keys of _Two with a buffer 'count' (and a non-persistent 'scratch') in first")
assert_equal(type(_sd["first.scale"]).__name__, "Tensor", "type of a state_dict value (a copy, not a Parameter)")
assert_equal(_sd["first.scale"].requires_grad, False, "a state_dict value's requires_grad")
check(_sd["first.scale"]._storage is not _a.first.scale._storage, "state_dict values are copies")
check(_a.state_dict(keep_vars=True)["first.scale"] is _a.first.scale, "keep_vars=True gives the live Parameter")
assert_equal(list(_a.state_dict(prefix="net"))[0], "net.first.scale", "state_dict(prefix='net')")
_deep = _Two()
_deep.first = _Two()
assert_equal(list(_deep.state_dict())[:2], ["first.first.scale", "first.first.shift"], "keys three levels deep")
_shared = _Two()
_shared.second = _shared.first  # one module under two names, as PyTorch saves it: under both
assert_equal(list(_shared.state_dict()), ["first.scale", "first.shift", "second.scale", "second.shift"],
             "state_dict keys of _Two whose second child is its first")
print("✓ state_dict:", list(_sd))

# %% [markdown]
# ### `load_state_dict`
#
# Loading compares the model's own keys (`module.state_dict(keep_vars=True)`: name → live
# tensor) with the given ones. Keys the model has and the dict lacks are **missing**; keys
# the dict has and the model lacks are **unexpected**. Three rules:
#
# - **Copy into the existing tensors**, in place, without recording (`_no_grad_copy_`):
#   an optimizer built before the load holds those very Parameter objects, and must go on
#   updating the loaded values. Replacing the objects would leave it training ghosts.
# - **Check everything before copying anything**, so that a failed load never leaves a
#   half-loaded model behind.
# - **Errors say exactly what does not fit**: a shape mismatch is always an error (it
#   names the key and both shapes); missing and unexpected keys are errors only with
#   `strict`. All problems go into one `RuntimeError`, so the user sees them at once.
#
# The values may be Tensors or numpy arrays: `tuple(np.shape(v))` is the shape of either.
# The messages use PyTorch's wording (the contract says which words), so that they read
# like the errors you will meet there.
#
# <details><summary>Hint 1</summary>
#
# Two passes over the model's keys: the first only collects problems into a list, the
# second (reached only when the list is empty) copies.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Keep the missing and unexpected keys as lists in the model's and the dict's order: the
# returned `_IncompatibleKeys(missing, unexpected)` reports them even when not strict.
# </details>
#
# <details><summary>The approach</summary>
#
# Nothing may change until everything has been checked: a load that fails halfway leaves a
# model that is neither the old one nor the new one. So find every problem first (keys
# missing, keys unexpected, shapes that differ), let `strict` decide which of them are
# errors, report them all in one message, and only then copy, in place, into the tensors
# the model already holds (an optimizer holds those very tensors).
# </details>

# %% nbgrader={"grade": false, "grade_id": "load-state-dict", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _load_state_dict(module, state_dict, strict):
    """Module.load_state_dict.

    Contract: `state_dict` maps names to Tensors or numpy arrays. Returns
    _IncompatibleKeys(missing, unexpected) (lists of keys, in order). Raises one
    RuntimeError, before changing anything, whose first line names the module's class and
    which then has a line per problem: always, for each key whose shapes differ, a line
    saying "size mismatch" with the key, the checkpoint's shape and the model's shape;
    with `strict`, a line saying "Missing key(s)" and one saying "Unexpected key(s)",
    each listing its keys in double quotes. Otherwise copies every present key's values
    into the existing tensor (same object, same storage, not recorded, cast to its dtype).
    """
    # Idea: validate all, then copy in place: never replace the objects an optimizer holds.
    ### BEGIN SOLUTION
    own = module.state_dict(keep_vars=True)
    missing = [key for key in own if key not in state_dict]
    unexpected = [key for key in state_dict if key not in own]
    errors = []
    if strict and missing:
        errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
    if strict and unexpected:
        errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
    for key, target in own.items():
        if key in state_dict:
            shape = tuple(np.shape(state_dict[key]))
            if shape != target.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {shape} from "
                              f"checkpoint, the shape in current model is {target.shape}.")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(module).__name__}:\n\t"
                           + "\n\t".join(errors))
    for key, target in own.items():
        if key in state_dict:
            _no_grad_copy_(target, state_dict[key])
    return _IncompatibleKeys(missing, unexpected)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-load-state-dict", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a, _b = _Two(), _Two()
_b.first.scale = Parameter([-7.0])
_sd = _a.state_dict()
_keep, _keep_storage = _b.first.scale, _b.first.scale._storage
assert_equal(tuple(_b.load_state_dict(_sd)), ([], []), "load_state_dict of a matching dict: (missing, unexpected)")
check(_b.first.scale is _keep and _keep._storage is _keep_storage,
      "load copies into the existing Parameter (same object, same storage): an optimizer holds it")
assert_equal(_keep.tolist(), [2.0], "first.scale after loading _a's state")
check(_keep.requires_grad and _keep.grad_fn is None, "the loaded Parameter still requires grad and is a leaf")
_b.load_state_dict({k: v.numpy() * 3 for k, v in _sd.items()})  # numpy values load too
assert_equal(_b.second.shift.tolist(), [1.5], "second.shift after loading numpy values 3 * 0.5")
_b.load_state_dict({k: v.numpy().astype(np.float64) * 2 for k, v in _sd.items()})
assert_equal((str(_b.second.shift.dtype), _b.second.shift.tolist()), ("float32", [1.0]),
             "second.shift after loading float64 values 2 * 0.5: the parameter keeps its dtype")
_bad = _a.state_dict()
_bad["second.shift"] = Tensor([1.0, 2.0])
_before = _b.first.scale.tolist()
_err = assert_raises(RuntimeError, _b.load_state_dict, _bad, match="second\\.shift", what="a (2,) value for a (1,) key")
check("(2,)" in str(_err) and "(1,)" in str(_err) and "_Two" in str(_err),
      "the size-mismatch message names both shapes and the model's class", got=str(_err))
assert_equal(_b.first.scale.tolist(), _before, "first.scale after a failed load (nothing copied: check first)")
assert_raises(RuntimeError, _b.load_state_dict, _bad, strict=False, match="size mismatch",
              what="a shape mismatch with strict=False")
_partial = _a.state_dict()
del _partial["first.scale"]
_partial["extra"] = Tensor([0.0])
_err = assert_raises(RuntimeError, _b.load_state_dict, _partial, what="a missing and an unexpected key, strict")
check('"first.scale"' in str(_err) and '"extra"' in str(_err) and "issing" in str(_err) and "nexpected" in str(_err),
      "the message lists the missing and the unexpected key, in double quotes", got=str(_err))
assert_equal(tuple(_b.load_state_dict(_partial, strict=False)), (["first.scale"], ["extra"]),
             "load_state_dict(strict=False): (missing, unexpected)")
print("✓ load_state_dict; its error reads:\n" + str(_err))

# %% [markdown]
# ## 7. Printing a model
#
# `print(model)` in PyTorch shows the tree:
#
# ```
# Sequential(
#   (0): Linear(in_features=2, out_features=3, bias=True)
#   (1): ReLU()
#   (2): Sequential(
#     (0): Linear(in_features=3, out_features=1, bias=False)
#   )
# )
# ```
#
# The format, for one module, is its contract: the class name (`module._get_name()`) and
# `(`; the lines inside are its `extra_repr()` split into lines (none if it is empty),
# followed by one line per child, `(name): ` and the child's repr; then
#
# - no lines at all: `Name()`;
# - exactly one extra_repr line and no children: on one line, `Name(in_features=2, ...)`;
# - otherwise: a newline, each line indented by two spaces and ended by a newline, then `)`.
#
# A child's repr may itself span several lines; all of them must move right with it.
#
# <details><summary>Hint 1</summary>
#
# Recursion does the nesting: `repr(child)` calls your function on the child. You only
# format one level.
# </details>
#
# <details><summary>Hint 2</summary>
#
# A child's multi-line repr, placed after `(name): `, must have every line but its first
# indented by two more spaces: that is what the provided `_addindent` does.
# </details>
#
# <details><summary>The approach</summary>
#
# The three cases differ only in what goes between the parentheses. Collect the parts
# first (the extra repr's lines, then one entry per child), and let what you collected
# choose the layout. A child's repr may span several lines: what must happen to its later
# lines for the printout to read as a nested tree?
# </details>

# %% nbgrader={"grade": false, "grade_id": "module-repr", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _addindent(text, spaces):
    """Indent every line of `text` but the first by `spaces` spaces."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _module_repr(module):
    """Module.__repr__: PyTorch's nested format (the rules above)."""
    # Idea: format one level; the children format themselves.
    ### BEGIN SOLUTION
    extra = module.extra_repr()
    extra_lines = extra.split("\n") if extra else []
    child_lines = [f"({name}): {_addindent(repr(child), 2)}" for name, child in module._modules.items()]
    lines = extra_lines + child_lines
    text = module._get_name() + "("
    if lines:
        if len(extra_lines) == 1 and not child_lines:
            text += extra_lines[0]
        else:
            text += "\n  " + "\n  ".join(lines) + "\n"
    return text + ")"
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-module-repr", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
class _Named(Module):
    def __init__(self, text):
        super().__init__()
        self.text = text

    def extra_repr(self):
        return self.text


assert_equal(repr(_Named("")), "_Named()", "repr with no extra_repr and no children")
assert_equal(repr(_Named("k=1")), "_Named(k=1)", "repr with one extra_repr line")
assert_equal(repr(_Named("a\nb")), "_Named(\n  a\n  b\n)", "repr with two extra_repr lines")
_one_child = _Named("")
_one_child.a = _Affine()
assert_equal(repr(_one_child), "_Named(\n  (a): _Affine()\n)", "repr with no extra_repr and one child (a child is never inline)")
_outer = _Named("k=1")
_outer.inner = _Two()
assert_equal(repr(_outer), "_Named(\n  k=1\n  (inner): _Two(\n    (first): _Affine()\n    (second): _Affine()\n  )\n)",
             "repr of a module with extra_repr and a child that has children")
print(_outer)
print("✓ repr")

# %% [markdown]
# ## 8. Initialisation: Xavier and He
#
# ### The variance argument
#
# Take one output of a linear layer, $y = \sum_{j=1}^{n} w_j x_j$, with $n$ = `fan_in`
# inputs. Assume the weights are independent with mean 0 and variance $\sigma_w^2$, and
# independent of the inputs. Then
#
# $$\mathrm{Var}(y) = n\,\sigma_w^2\,\mathbb{E}[x^2].$$
#
# A layer keeps the signal's scale when it multiplies the variance by exactly 1. Two
# cases decide what that requires:
#
# - inputs with mean 0 (tanh-like activations, or none), where $\mathbb{E}[x^2] =
#   \mathrm{Var}(x)$. The same argument run backwards, for the gradients, counts the
#   `fan_out` outputs instead; **Xavier (Glorot) initialisation** (Glorot & Bengio, 2010)
#   compromises by using the *average* of the two fans in place of $n$;
# - inputs $x = \mathrm{relu}(y_\text{prev})$ with $y_\text{prev}$ symmetric around 0: half
#   of them are zeroed, so $\mathbb{E}[x^2] = \frac12\mathrm{Var}(y_\text{prev})$. **He
#   (Kaiming) initialisation** (He et al., 2015) compensates for that half: the green
#   line in section 1.
#
# Work out $\sigma_w$ in each case before reading on: your code will hold it, and the
# checks compare it with PyTorch's. An activation's **gain** is the factor by which its
# $\sigma_w$ differs from the first case's: 1 for no activation (and for sigmoid, by
# PyTorch's convention). Derive the gain of ReLU from the second case, then that of
# LeakyReLU with negative slope $a$ (it keeps $a \cdot y$ where ReLU keeps 0: what
# fraction of $\mathrm{Var}(y_\text{prev})$ does $\mathbb{E}[x^2]$ become?). Two gains
# are PyTorch's constants, not derived here: $5/3$ for tanh and $3/4$ for SELU.
#
# ### Fans of a weight tensor
#
# For a Linear weight of shape `(out, in)`, fan_in = `in` and fan_out = `out`: each output
# sums over `in` inputs. A convolution weight (module 09) has shape
# `(out_channels, in_channels, kh, kw)`: each output sums over `in_channels · kh · kw`
# inputs, so both fans are multiplied by the *receptive field size* `kh · kw` (the
# product of all dims after the first two).
#
# ### Uniform or normal
#
# Each scheme comes in two distributions with the same variance: a normal $N(0,
# \sigma^2)$, or a uniform $U(-b, b)$. What is the variance of $U(-b, b)$ (its density is
# $1/(2b)$ on the interval)? From it follows the bound that gives a standard deviation
# $\sigma$; the checks compare the spread of your uniform draws with the normal ones'.
#
# All the functions fill the tensor **in place** (the trailing underscore) without
# recording (`_no_grad_copy_`), draw from tinytorch's one random generator (so that
# `tinytorch.manual_seed` makes initialisation reproducible), and return the tensor.
# The provided building blocks:

# %%
#| export nn.init
def uniform_(tensor, a=0.0, b=1.0):
    """Fill `tensor` in place with samples from U(a, b); returns it."""
    u = rand(tensor.shape, dtype=tensor.dtype).numpy()
    return _no_grad_copy_(tensor, a + (b - a) * u)


def normal_(tensor, mean=0.0, std=1.0):
    """Fill `tensor` in place with samples from N(mean, std**2); returns it."""
    z = randn(tensor.shape, dtype=tensor.dtype).numpy()
    return _no_grad_copy_(tensor, mean + std * z)


def constant_(tensor, val):
    """Fill `tensor` in place with `val`; returns it."""
    return _no_grad_copy_(tensor, val)


def zeros_(tensor):
    """Fill `tensor` with 0 in place; returns it."""
    return _no_grad_copy_(tensor, 0)


def ones_(tensor):
    """Fill `tensor` with 1 in place; returns it."""
    return _no_grad_copy_(tensor, 1)


# %% [markdown]
# ### Gains and fans
#
# `calculate_gain` returns your two derived gains and PyTorch's constants; the name list
# of the linear-like layers is PyTorch's. `_calculate_fan_in_and_fan_out` is where a
# transposed weight layout would silently swap every initialisation.
#
# <details><summary>Hint 1</summary>
#
# Which dimension of an `(out, in)` weight does one output sum over? That one is
# `fan_in`. Everything after the first two dimensions multiplies both fans.
# </details>
#
# <details><summary>Hint 2</summary>
#
# `math.prod` of an empty tuple is 1, so a 2-D weight needs no special case. For
# LeakyReLU, a `bool` is an `int` in Python: exclude it explicitly.
# </details>
#
# <details><summary>The approach</summary>
#
# `calculate_gain`: ReLU is LeakyReLU with slope 0, so one derivation serves both; check
# yours against `relu` giving the He factor before writing the general one. The slope
# needs validating before it is used, and every other name is an error. Fans: one
# output sums over one input row of the weight, and every size after the first two
# multiplies both fans.
# </details>

# %% nbgrader={"grade": false, "grade_id": "gain-and-fans", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.init
def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (torch.nn.init.calculate_gain).

    Contract: "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d" and "sigmoid" -> 1; "tanh" -> 5/3;
    "selu" -> 3/4 (PyTorch's constants); "relu" and "leaky_relu" (negative slope =
    param, 0.01 when None) -> the gain that makes the variance argument hold for them,
    equal to PyTorch's. Raises ValueError for a slope that is not an int or float
    (bools included), and for any other name (the message names it).
    """
    # Idea: the gain undoes what the activation does to E[x^2].
    ### BEGIN SOLUTION
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")
    ### END SOLUTION


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight tensor.

    Contract: `tensor` has shape (out, in, *kernel). Returns (in * k, out * k), Python
    ints, with k the product of the kernel sizes (1 for a 2-D weight). Raises ValueError
    for a tensor with fewer than 2 dimensions (the message says so, and gives the shape).
    """
    # Idea: fan_in counts the inputs one output sums over.
    ### BEGIN SOLUTION
    if tensor.ndim < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 "
                         f"dimensions (got shape {tensor.shape})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-gain-and-fans", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
for _name, _gain in [("linear", 1), ("sigmoid", 1), ("conv2d", 1), ("tanh", 5 / 3), ("selu", 0.75)]:
    assert_close(calculate_gain(_name), _gain, rtol=1e-15, atol=0, what=f"calculate_gain({_name!r})")
# The gain an activation f needs, measured on the activation itself: the factor that brings
# the mean square of f(y), y ~ N(0, 1), back to 1 (E[f(y)^2] by the trapezoid rule on a fine grid).
_y = np.linspace(-12, 12, 240_001)
_density = np.exp(-_y ** 2 / 2) / math.sqrt(2 * math.pi)


def _measured_gain(f):
    _v = f(_y) ** 2 * _density
    return 1 / math.sqrt(float(((_v[1:] + _v[:-1]) / 2 * np.diff(_y)).sum()))


for _args, _f in [(("relu",), lambda y: np.maximum(y, 0)),
                  (("leaky_relu",), lambda y: np.where(y > 0, y, 0.01 * y)),
                  (("leaky_relu", 0.2), lambda y: np.where(y > 0, y, 0.2 * y)),
                  (("leaky_relu", 0), lambda y: np.maximum(y, 0))]:  # slope 0 is ReLU, not the default 0.01
    assert_close(calculate_gain(*_args), _measured_gain(_f), rtol=1e-7, atol=0,
                 what=f"calculate_gain{_args} against the gain measured for that activation")
assert_raises(ValueError, calculate_gain, "softplus", match="softplus", what="calculate_gain('softplus')")
assert_raises(ValueError, calculate_gain, "leaky_relu", True, what="calculate_gain('leaky_relu', True)")
assert_equal(_calculate_fan_in_and_fan_out(zeros(3, 5)), (5, 3), "fans of a Linear(5, 3) weight of shape (3, 5)")
assert_equal(_calculate_fan_in_and_fan_out(zeros(8, 4, 3, 3)), (36, 72), "fans of a conv weight (8, 4, 3, 3)")
assert_raises(ValueError, _calculate_fan_in_and_fan_out, zeros(4), what="fans of a 1-D tensor")
print("✓ calculate_gain and fans: (3, 5) ->", _calculate_fan_in_and_fan_out(zeros(3, 5)))

# %% [markdown]
# ### Xavier
#
# `xavier_uniform_(t, gain=1)` draws from $U(-b, b)$ and `xavier_normal_(t, gain=1)` from
# $N(0, \sigma^2)$, both with the Xavier variance times $\text{gain}^2$. A tensor with no
# elements is returned unchanged (nothing to draw, and its fans may be 0).
#
# <details><summary>Hint 1</summary>
#
# Xavier's variance: the variance argument with $n$ replaced by the average of the two
# fans. The normal one uses that standard deviation directly.
# </details>
#
# <details><summary>Hint 2</summary>
#
# For the uniform one, integrate $x^2$ against the density $1/(2b)$ over $[-b, b]$, set
# the result equal to $\sigma^2$ and solve for $b$. The bound is larger than the standard
# deviation: the draws of the uniform and of the normal initialiser must have the same
# spread.
# </details>
#
# <details><summary>The approach</summary>
#
# Return an empty tensor at once. The variance argument with the average of the two fans
# in place of $n$ gives the standard deviation (then the gain scales it); the normal
# initialiser uses it as it is, the uniform one turns it into the bound whose variance is
# the same.
# </details>

# %% nbgrader={"grade": false, "grade_id": "xavier", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.init
def xavier_uniform_(tensor, gain=1.0):
    """Glorot uniform (torch.nn.init.xavier_uniform_).

    Contract: fills `tensor` (2 or more dims) in place, unrecorded, with U(-b, b) draws
    whose variance is gain**2 times Xavier's; returns it. A tensor with no elements is
    returned unchanged, whatever its dims (checked first); a non-empty one with fewer than
    2 dims raises the fans' ValueError.
    """
    # Idea: the variance uses the average of fan_in and fan_out.
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)
    ### END SOLUTION


def xavier_normal_(tensor, gain=1.0):
    """Glorot normal (torch.nn.init.xavier_normal_): as xavier_uniform_, with N(0, std**2)."""
    # Idea: the same variance as xavier_uniform_, from a normal distribution.
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-xavier", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _flat(values, what):
    """Uniform draws: 8 equal bins from the smallest draw to the largest hold about as many each."""
    counts = np.histogram(values, bins=8)[0]
    check(counts.min() > 0.9 * counts.mean() and counts.max() < 1.1 * counts.mean(),
          f"{what}: uniform draws (8 equal bins between the smallest and the largest draw hold about as "
          f"many each)", got=counts.tolist())


with preserved_state():
    _w = Parameter(zeros(400, 600))  # fan_in 600, fan_out 400
    _storage = _w._storage
    check(xavier_uniform_(_w) is _w, "xavier_uniform_ returns its tensor")
    check(_w._storage is _storage and _w.grad_fn is None, "filled in place, not recorded")
    _fans = (600 + 400) / 2  # Xavier's n: the average of the two fans
    _n = _w.numel()  # a uniform sample's variance has relative std sqrt(4 / (5 n)): allow 5 of them
    assert_close(_w.numpy().var(), 1 / _fans, rtol=5 * math.sqrt(4 / 5 / _n), atol=0,
                 what="variance of xavier_uniform_ on (400, 600): Xavier's, with n the average fan")
    _flat(_w.numpy(), "xavier_uniform_ on (400, 600)")
    xavier_uniform_(_w, gain=2.0)
    assert_close(_w.numpy().var(), 4 / _fans, rtol=5 * math.sqrt(4 / 5 / _n), atol=0,
                 what="variance of xavier_uniform_(gain=2) on (400, 600): gain² times Xavier's")
    xavier_normal_(_w, gain=2.0)
    _std = 2 / math.sqrt(_fans)  # gain 2
    assert_close(_w.numpy().std(), _std, rtol=0.01, atol=0, what="std of xavier_normal_(gain=2) on (400, 600)")
    _empty = zeros(0, 5)
    check(xavier_uniform_(_empty) is _empty, "an empty tensor is returned unchanged")
    _flat_empty = zeros(0)
    check(xavier_uniform_(_flat_empty) is _flat_empty, "xavier_uniform_ of an empty 1-D tensor: returned unchanged")
    _flat_empty = zeros(0)
    check(xavier_normal_(_flat_empty) is _flat_empty,
          "an empty 1-D tensor is returned unchanged (no elements: checked before the fans, which need 2 dims)")
print(f"✓ xavier: normal std {_w.numpy().std():.4f} (expected {_std:.4f})")

# %% [markdown]
# ### Kaiming (He)
#
# `kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu")` and
# `kaiming_normal_(...)` use the standard deviation of the variance argument, with
# `gain = calculate_gain(nonlinearity, a)` and $n$ the fan that `mode` names:
# `"fan_in"` keeps the forward signal's variance, `"fan_out"` the gradients'. (The
# default `nonlinearity="leaky_relu"` with `a=0` is exactly ReLU's gain.) The
# standard deviation is shared by both functions, so it gets its own helper.
#
# <details><summary>Hint 1</summary>
#
# In `_kaiming_std`, check `mode` before anything else, so that a typo such as `"fan_avg"` fails loudly
# instead of silently picking a fan.
# </details>
#
# <details><summary>The approach</summary>
#
# `_kaiming_std`: refuse a mode other than the two names before anything else; the mode
# picks the fan that plays $n$; the rest is your derivation with the gain. The normal
# initialiser uses the standard deviation as it is; the uniform one turns it into a bound
# as Xavier's did.
# </details>

# %% nbgrader={"grade": false, "grade_id": "kaiming", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export nn.init
def _kaiming_std(tensor, a, mode, nonlinearity):
    """The Kaiming standard deviation.

    Contract: returns the standard deviation of Kaiming's variance argument for the
    activation's gain (calculate_gain(nonlinearity, a)), with n the fan_in or the fan_out
    of `tensor` as `mode` says, equal to PyTorch's. Raises ValueError for any other mode
    (the message names the mode given and the two allowed).
    """
    # Idea: which fan to keep constant is a choice: forward signal or backward gradient.
    ### BEGIN SOLUTION
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)
    ### END SOLUTION


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He uniform (torch.nn.init.kaiming_uniform_): U(-b, b) with the Kaiming variance, in
    place and unrecorded; returns the tensor (unchanged when it has no elements)."""
    # Idea: a uniform distribution with the Kaiming standard deviation.
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)
    ### END SOLUTION


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He normal (torch.nn.init.kaiming_normal_): N(0, std**2) with the Kaiming std, in
    place and unrecorded; returns the tensor (unchanged when it has no elements)."""
    # Idea: a normal distribution with the Kaiming standard deviation.
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-kaiming", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _relu_layer_moments(w, rng, slope=0.0):
    """What He initialisation is for, measured on a (leaky, with `slope`) ReLU layer with
    weight `w` (out, in): the mean square of its output for unit-variance pre-activations
    (forward, counts fan_in), and of the gradient reaching those pre-activations from
    unit-variance output gradients (backward, counts fan_out). Both are 1 when the layer
    keeps the scale (section 8)."""
    w = w.numpy().astype(np.float64)
    pre = rng.standard_normal((500, w.shape[1]))                           # y_prev, symmetric around 0
    forward = ((np.where(pre > 0, pre, slope * pre) @ w.T) ** 2).mean()    # y = W act(y_prev)
    grad_out = rng.standard_normal((500, w.shape[0]))
    backward = (((grad_out @ w) * np.where(pre > 0, 1.0, slope)) ** 2).mean()  # through W, then act
    return forward, backward


with preserved_state():
    _w = Parameter(zeros(400, 600))  # fan_in 600, fan_out 400: the two modes differ
    _rng = np.random.default_rng(0)
    # one draw's mean square scatters around 1 by 1.6% (standard deviation over 40 draws, the
    # forward one: ReLU's outputs have a mean); a wrong gain or the other fan is a third off
    for _mode, _kept in (("fan_in", 0), ("fan_out", 1)):
        check(kaiming_normal_(_w, mode=_mode, nonlinearity="relu") is _w, "kaiming_normal_ returns its tensor")
        for _draw in (kaiming_normal_, kaiming_uniform_):
            _draw(_w, mode=_mode, nonlinearity="relu")
            _ms = _relu_layer_moments(_w, _rng)[_kept]
            assert_close(_ms, 1.0, rtol=0.1, atol=0,
                         what=f"{_draw.__name__}(mode={_mode!r}, relu) on (400, 600): the mean square of the "
                              f"{['forward signal', 'backward gradient'][_kept]} through a ReLU layer (kept at 1)")
        _flat(_w.numpy(), f"kaiming_uniform_(mode={_mode!r}, relu)")
        _normal_var = kaiming_normal_(_w, mode=_mode, nonlinearity="relu").numpy().var()
        _uniform_var = kaiming_uniform_(_w, mode=_mode, nonlinearity="relu").numpy().var()
        # (the sample variance of a uniform has relative std sqrt(4 / (5 n)): allow 5 of them)
        assert_close(_uniform_var, _normal_var, rtol=5 * math.sqrt(4 / 5 / _w.numel()) + 5 * math.sqrt(2 / _w.numel()),
                     atol=0, what=f"kaiming_uniform_ and kaiming_normal_ (mode={_mode!r}): the same variance")
    kaiming_normal_(_w)  # the defaults: fan_in, leaky_relu with a = 0, i.e. He for ReLU
    assert_close(_relu_layer_moments(_w, _rng)[0], 1.0, rtol=0.1, atol=0,
                 what="kaiming_normal_ with the defaults: the forward mean square through a ReLU layer")
    kaiming_uniform_(_w, a=0.5)  # LeakyReLU with slope 0.5 keeps three times what ReLU keeps
    assert_close(_relu_layer_moments(_w, _rng, slope=0.5)[0], 1.0, rtol=0.1, atol=0,
                 what="kaiming_uniform_(a=0.5): the forward mean square through a LeakyReLU(0.5) layer")
    assert_raises(ValueError, kaiming_uniform_, _w, mode="fan_avg", match="fan_avg", what="mode='fan_avg'")
    _flat_empty = zeros(0)
    check(kaiming_uniform_(_flat_empty) is _flat_empty and kaiming_normal_(_flat_empty) is _flat_empty,
          "an empty 1-D tensor is returned unchanged by both (no elements: nothing to draw, no fans needed)")
print("✓ kaiming: default std on a (400, 600) weight", round(float(_w.numpy().std()), 5))

# %% [markdown]
# ## 9. Linear
#
# $$y = x W^\top + b, \qquad W \in \mathbb{R}^{\text{out} \times \text{in}},\; b \in \mathbb{R}^{\text{out}}.$$
#
# The weight is stored `(out_features, in_features)`, as in PyTorch: row $i$ holds the
# weights of output $i$, and a checkpoint from PyTorch loads without transposing. The input
# may have any number of leading batch dimensions, `(..., in_features)`; module 01's
# matmul broadcasts over them and the bias `(out,)` broadcasts over the rest. Both are
# recorded ops (`permute` for `.T`, `matmul`, `add`), so Linear needs no backward rule of
# its own.
#
# **Initialisation.** PyTorch's default (and ours) is `kaiming_uniform_(weight,
# a=math.sqrt(5))`. Work out what that is with the gain formula: the result is a plain
# uniform distribution whose bound depends only on `in_features`, and the bias is drawn
# from the same range. (That is a weight variance a third of Xavier's for a square layer:
# a historical choice PyTorch keeps for compatibility. For deep ReLU nets you
# re-initialise with `kaiming_normal_`, which `model.apply(fn)` makes easy.)
#
# <details><summary>Hint 1</summary>
#
# `bias=False` must still leave an attribute `layer.bias` that reads `None` (and is not a
# parameter): register the name with no value rather than skipping it.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Put $a = \sqrt5$ into your LeakyReLU gain, then the gain into the Kaiming bound: the
# square roots cancel to something simple in `in_features`. A layer with
# `in_features=0` has fan_in 0: its bias bound is 0, not a division by zero.
# </details>
#
# <details><summary>The approach</summary>
#
# `__init__` decides only what the layer owns and in what order (registration order is the
# order of `named_parameters`, and of a PyTorch checkpoint); the values come from
# `reset_parameters`, so that re-initialising a layer is one call. `forward` is one matrix
# product over the last dimension, and the stored shape (out, in) decides how the weight
# enters it. Refuse a wrong input before multiplying: numpy's message would not mention the
# layer or what it expected.
# </details>

# %% nbgrader={"grade": false, "grade_id": "linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Linear(Module):
    """y = x @ W.T + b over the last dimension (torch.nn.Linear); W has shape (out, in)."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        """Contract: registers `weight` (Parameter, shape (out_features, in_features)) and
        `bias` (Parameter of shape (out_features,), or None when bias=False: still a
        registered name), in `dtype` (default float32), in that order, then initialises
        them with reset_parameters()."""
        super().__init__()
        # Idea: the layer owns its parameters; their values come from reset_parameters.
        ### BEGIN SOLUTION
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.weight = Parameter(zeros(self.out_features, self.in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(zeros(self.out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self):
        """Contract: in place (the same Parameter objects), PyTorch's default: weight by
        kaiming_uniform_ with a = sqrt(5), and the bias uniform over the same range as the
        weight's (the bound section 9 asks you to work out; 0 when fan_in is 0). The weight
        is drawn first, then the bias, as PyTorch does: one seed gives one model."""
        # Idea: PyTorch's default is a Kaiming uniform draw; the bias shares the weight's range.
        ### BEGIN SOLUTION
        kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = _calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            uniform_(self.bias, -bound, bound)
        ### END SOLUTION

    def forward(self, input):
        """Contract: `input` has shape (..., in_features); returns a recorded Tensor of shape
        (..., out_features) equal to input @ weight.T + bias. Raises ValueError for a 0-d
        input or a wrong last dimension; the message names the input's shape,
        in_features=<n> and the weight's shape."""
        # Idea: one matrix product over the last dimension; the bias broadcasts.
        ### BEGIN SOLUTION
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ValueError(f"Linear: input of shape {input.shape} does not fit: its last dimension "
                             f"must be in_features={self.in_features} (weight shape {self.weight.shape})")
        out = input @ self.weight.T
        if self.bias is not None:
            out = out + self.bias
        return out
        ### END SOLUTION

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


# %% nbgrader={"grade": true, "grade_id": "test-linear", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    _lin = Linear(4, 3)
    assert_equal((_lin.weight.shape, _lin.bias.shape, str(_lin.weight.dtype)), ((3, 4), (3,), "float32"),
                 "Linear(4, 3): weight shape, bias shape, dtype")
    assert_equal([n for n, _ in _lin.named_parameters()], ["weight", "bias"], "Linear's parameter names")
    _x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    _y = _lin(Tensor(_x))
    assert_equal(_y.shape, (2, 5, 3), "Linear(4, 3) of a (2, 5, 4) input: shape")
    _ops, _stack, _alive = [], [_y.grad_fn], []
    while _stack:  # every recorded op behind the output (the nodes kept alive while walked)
        _nd = _stack.pop()
        if _nd is not None:
            _alive.append(_nd)
            _ops.append(_nd.op)
            _stack.extend(_t.grad_fn for _t in _nd.inputs)
    check("matmul" in _ops, "Linear(4, 3)(x): the product with the weight is recorded (a Tensor op, so module 06 "
          "can differentiate it; numpy arithmetic on .numpy() records nothing)", got=_ops)
    assert_close(_y.numpy(), _x @ _lin.weight.numpy().T + _lin.bias.numpy(), rtol=1e-5, atol=1e-6,
                 what="Linear(4, 3) of a (2, 5, 4) input: x @ W.T + b")
    _nob = Linear(4, 2, bias=False)
    check(_nob.bias is None and [n for n, _ in _nob.named_parameters()] == ["weight"],
          "Linear(bias=False): bias is None, one parameter", got=[n for n, _ in _nob.named_parameters()])
    check("bias" in _nob._parameters and "bias" not in vars(_nob),
          "Linear(bias=False): `bias` is a registered parameter name holding None, not a plain attribute",
          got=f"_parameters {list(_nob._parameters)}, plain attributes {sorted(vars(_nob))}")
    _lin64 = Linear(4, 3, dtype=np.float64)
    assert_equal((str(_lin64.weight.dtype), str(_lin64.bias.dtype)), ("float64", "float64"),
                 "Linear(4, 3, dtype=float64): the dtypes of weight and bias")
    assert_close(_nob(Tensor(_x)).numpy(), _x @ _nob.weight.numpy().T, rtol=1e-5, atol=1e-6, what="no-bias output")
    assert_equal(repr(_lin), "Linear(in_features=4, out_features=3, bias=True)", "repr(Linear(4, 3))")
    _err = assert_raises(ValueError, _lin, Tensor(np.zeros((2, 5))), what="Linear(4, 3) of a (2, 5) input")
    assert_raises(ValueError, _lin, Tensor(np.float32(2.0)), what="Linear(4, 3) of a 0-d input")
    assert_equal(Linear(0, 3)(Tensor(np.zeros((2, 0), dtype=np.float32))).tolist(), [[0.0] * 3] * 2,
                 "Linear(0, 3) of a (2, 0) input: no inputs, so each output is its bias, drawn from a range of width 0")
    check("(2, 5)" in str(_err) and "in_features=4" in str(_err) and "(3, 4)" in str(_err),
          "the error names the input's shape, in_features=4 and the weight's shape", got=str(_err))
    _big = Linear(400, 500)
    _wmax, _bmax = float(np.abs(_big.weight.numpy()).max()), float(np.abs(_big.bias.numpy()).max())
    _kmax = float(np.abs(kaiming_uniform_(zeros(500, 400), a=math.sqrt(5)).numpy()).max())
    check(0.99 * _kmax < _wmax <= 1.01 * _kmax, "Linear(400, 500).weight: drawn by kaiming_uniform_ with a = sqrt(5)",
          got=_wmax, expected=f"the largest |w| of your kaiming_uniform_(a=sqrt(5)), {_kmax:.4f}")
    check(0.9 * _wmax < _bmax <= 1.001 * _wmax, "Linear(400, 500).bias: uniform over the weight's range",
          got=_bmax, expected=f"a largest |b| just under the weight's bound, {_wmax:.4f}")
    _w_before = _big.weight
    _big.reset_parameters()
    check(_big.weight is _w_before, "reset_parameters re-draws in place (same Parameter)")
    manual_seed(11)
    _seeded = Linear(5, 4)
    manual_seed(11)
    _first = kaiming_uniform_(zeros(4, 5), a=math.sqrt(5))
    assert_equal(_seeded.weight.tolist(), _first.tolist(),
                 "Linear(5, 4) after manual_seed(11): the weight is the generator's first draw (weight, then bias)")
print("✓ Linear:", _lin, "->", _y.shape)

# %% [markdown]
# ## 10. Containers: ModuleList and Sequential
#
# A model often holds a *list* of layers and its own `forward` decides how to use them: a
# transformer loops over its blocks, adding each one's output to a residual stream. A plain
# Python list does not work for that: `self.blocks = [Block(), Block()]` is an ordinary
# attribute, so `parameters()` would never see the blocks' weights and the optimizer would
# not train them. `ModuleList` (PyTorch's `nn.ModuleList`) is a module that behaves like a
# list and registers each entry as a child named `"0"`, `"1"`, ... (so the names in
# `state_dict` read `blocks.0.attn.weight`). It has no `forward`; you iterate over it in
# yours. `len`, iteration, `extend` and item assignment are provided; `append` and
# indexing are yours.
#
# <details><summary>Hint 1</summary>
#
# The next index is the current length. The children registry holds the modules in order.
# </details>
#
# <details><summary>The approach</summary>
#
# An entry's name is its position: what name does the next one get, and what must `append`
# return for `blocks.append(a).append(b)` to work? For indexing, which of a Python list's
# behaviours (negative indices, slices, its errors) do you get for free by indexing a list
# of the modules, and where is the contract stricter than a list? A slice shares the
# module objects, never copies them.
# </details>

# %% nbgrader={"grade": false, "grade_id": "modulelist", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class ModuleList(Module):
    """A list of modules registered as children "0", "1", ... (torch.nn.ModuleList)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def append(self, module):
        """Contract: registers `module` as the child str(len(self)); returns self. A
        non-Module raises TypeError (add_module does)."""
        # Idea: a list entry is a child whose name is its position.
        ### BEGIN SOLUTION
        self.add_module(str(len(self)), module)
        return self
        ### END SOLUTION

    def __getitem__(self, idx):
        """Contract: self[i] is the i-th module (negative i counts from the end; out of range
        raises IndexError; a non-int raises TypeError); self[a:b] is a new ModuleList
        holding the same module objects."""
        # Idea: list semantics over the children registry.
        ### BEGIN SOLUTION
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(modules[idx])
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise TypeError(f"ModuleList indices must be integers or slices, not {type(idx).__name__}")
        if not -len(modules) <= idx < len(modules):
            raise IndexError(f"index {idx} is out of range for a ModuleList of length {len(modules)}")
        return modules[idx]
        ### END SOLUTION

    def __setitem__(self, idx, module):
        """Replace the idx-th module (keeping its name)."""
        name = list(self._modules)[idx]  # IndexError when out of range
        self.add_module(name, module)

    def extend(self, modules):
        """Append every module of an iterable; returns self."""
        if isinstance(modules, Module) and not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleList.extend should be called with an iterable of modules, "
                            f"got a single {type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


# %% nbgrader={"grade": true, "grade_id": "test-modulelist", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    _blocks = ModuleList([Linear(3, 3), _Affine()])
    check(len(_blocks) == 2 and isinstance(_blocks[0], Linear) and _blocks[-1] is _blocks[1],
          "len, [0] and [-1] of ModuleList([Linear, _Affine])")
    assert_equal([n for n, _ in _blocks.named_parameters()], ["0.weight", "0.bias", "1.scale", "1.shift"],
                 "ModuleList parameter names")
    check(_blocks.append(Linear(3, 1)) is _blocks, "append returns the list (calls chain)")
    assert_equal(list(_blocks._modules), ["0", "1", "2"], "child names after an append")
    _part = _blocks[1:]
    check(isinstance(_part, ModuleList) and len(_part) == 2 and _part[0] is _blocks[1],
          "a slice is a new ModuleList of the same modules")
    assert_equal([type(m).__name__ for m in _blocks], ["Linear", "_Affine", "Linear"], "iteration order")
    assert_raises(IndexError, lambda: _blocks[3], what="an index past the end")
    assert_raises(TypeError, _blocks.append, "not a module", what="appending a string")


    class _Stack(Module):
        def __init__(self):
            super().__init__()
            self.layers = ModuleList([Linear(2, 2) for _ in range(3)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x


    assert_equal(len(list(_Stack().parameters())), 6, "parameters of 3 Linear layers held in a ModuleList")
    check("layers.2.bias" in dict(_Stack().named_parameters()), "the dotted name layers.2.bias exists")
print("✓ ModuleList:", [n for n, _ in _Stack().named_parameters()][-2:])

# %% [markdown]
# `ModuleDict` is ModuleList's sibling for children you look up by name rather than by
# position (a model with one head per task, say). It is provided: a dictionary's
# operations over the same child registry, keys kept in insertion order as PyTorch does.

# %%
#| export
class ModuleDict(Module):
    """Modules registered as children under string keys, in insertion order (torch.nn.ModuleDict)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key):
        """Remove the child `key` and return it."""
        return self._modules.pop(key)

    def clear(self):
        self._modules.clear()

    def update(self, modules):
        """Add (or replace) children from a mapping or an iterable of (key, module) pairs."""
        if isinstance(modules, (str, Module)) or not hasattr(modules, "__iter__"):
            raise TypeError(f"ModuleDict.update should be called with a mapping or an iterable of "
                            f"(key, module) pairs, got {type(modules).__name__}")
        pairs = modules.items() if hasattr(modules, "items") else modules
        for pair in pairs:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"ModuleDict.update: each element must be a (key, module) pair, got {pair!r}")
            self[pair[0]] = pair[1]

# %% [markdown]
# ### Sequential: a list of modules with a forward
#
# `Sequential(m0, m1, m2)` registers its arguments as children named `"0"`, `"1"`, `"2"`
# and its forward feeds each one's output to the next. It also accepts one `OrderedDict`
# of name → module, to choose the names. Its container protocol is provided, and it is the
# one you just wrote for `ModuleList`: `model[0]` (negative indices too), `model[1:]` (a new
# `Sequential` over the *same* module objects, keeping their names), `len(model)`,
# iteration, and `append`.
#
# <details><summary>Hint 1</summary>
#
# Registering is `add_module`'s job (it also refuses, with a TypeError, anything that is
# neither a Module nor None). The names are strings, even for positions.
# </details>
#
# <details><summary>The approach</summary>
#
# The two ways to build one differ only in where the names come from. The children
# registry keeps the order in which children were added, and iterating over a Sequential
# walks it: that order is the order of the computation. What must an empty one return for
# `Sequential()(x)` to be harmless?
# </details>

# %% nbgrader={"grade": false, "grade_id": "sequential", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Sequential(Module):
    """Modules applied one after the other (torch.nn.Sequential)."""

    def __init__(self, *args):
        """Contract: Sequential(m0, m1, ...) registers the modules as children "0", "1", ...;
        Sequential(OrderedDict) registers its items under their keys, in order. An argument
        that is neither a Module nor None raises TypeError (add_module's rule, PyTorch's)."""
        super().__init__()
        # Idea: the children's registration order is the order of the computation.
        ### BEGIN SOLUTION
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)
        ### END SOLUTION

    def forward(self, input):
        """Contract: the children applied in order, each to the previous one's output
        (an empty Sequential returns its input)."""
        # Idea: function composition, left to right.
        ### BEGIN SOLUTION
        for module in self:
            input = module(input)
        return input
        ### END SOLUTION

    def __getitem__(self, idx):
        """self[i] as ModuleList's self[i] (your indexing, its errors); self[a:b] a new
        Sequential of the same modules under the same names."""
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return ModuleList(self._modules.values())[idx]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Add `module` at the end (named str(len(self))); returns self."""
        self.add_module(str(len(self)), module)
        return self


# %% nbgrader={"grade": true, "grade_id": "test-sequential", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    _l1, _l2 = Linear(3, 4), Linear(4, 2)
    _seq = Sequential(_l1, _Affine(), _l2)
    check(len(_seq) == 3 and _seq[0] is _l1 and _seq[-1] is _l2, "len, [0] and [-1] of Sequential(l1, affine, l2)")
    assert_equal([n for n, _ in _seq.named_parameters()],
                 ["0.weight", "0.bias", "1.scale", "1.shift", "2.weight", "2.bias"], "its parameter names")
    _x = Tensor(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))
    assert_close(_seq(_x).numpy(), _l2(_seq[1](_l1(_x))).numpy(), rtol=1e-6, atol=1e-7,
                 what="Sequential(l1, affine, l2)(x) = l2(affine(l1(x)))")
    _named = Sequential(OrderedDict([("fc", Linear(2, 2)), ("out", Linear(2, 1))]))
    assert_equal([n for n, _ in _named.named_parameters()], ["fc.weight", "fc.bias", "out.weight", "out.bias"],
                 "names from an OrderedDict")
    check(Sequential()(_x) is _x, "an empty Sequential returns its input")
    assert_raises(TypeError, Sequential, Linear(2, 2), 3, what="Sequential(Linear(2, 2), 3)")
print("✓ Sequential:", [n for n, _ in _seq.named_children()])

# %% [markdown]
# ## 11. Activation layers
#
# Module 02's functions become layers by wrapping them in a `Module` whose `forward` calls
# the function, with the function's options (`negative_slope`, `approximate`, `dim`) as
# attributes shown by `extra_repr`. They have no parameters, which is why the functional
# form exists at all; the layer form lets them sit inside a `Sequential`. `Identity`
# returns its input (useful to switch a part of a model off). These are provided: see how
# little a Module needs once the base class is written.

# %%
#| export
class Identity(Module):
    """Returns its input unchanged (torch.nn.Identity); accepts and ignores any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class ReLU(Module):
    """relu as a layer (torch.nn.ReLU)."""

    def forward(self, input):
        return relu(input)


class LeakyReLU(Module):
    """leaky_relu as a layer (torch.nn.LeakyReLU)."""

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input):
        return leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class Sigmoid(Module):
    """sigmoid as a layer (torch.nn.Sigmoid)."""

    def forward(self, input):
        return sigmoid(input)


class Tanh(Module):
    """tanh as a layer (torch.nn.Tanh)."""

    def forward(self, input):
        return tanh(input)


# %% [markdown]
# The layers with an option show it in their printout:

# %%
#| export
class GELU(Module):
    """gelu as a layer (torch.nn.GELU); approximate is "none" or "tanh"."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """softmax over `dim` as a layer (torch.nn.Softmax)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log_softmax over `dim` as a layer (torch.nn.LogSoftmax)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


# %% [markdown]
# A whole model, then, and its printout:

# %%
manual_seed(2)  # (with seed 0 all three ReLUs are off for this input, and every log-probability is log 1/4)
model = Sequential(Linear(2, 3), ReLU(), Sequential(Linear(3, 4, bias=False), GELU("tanh")), LogSoftmax(dim=-1))
print(model)
print([name for name, _ in model.named_parameters()])
print(model(Tensor([[1.0, -1.0]])))

# %% [markdown]
# ## 12. A systems look: parameters, FLOPs, time
#
# ### Parameter memory
#
# A Linear layer holds `in·out` weights and `out` biases; in float32 each costs 4 bytes.
# For an MLP on 28×28 images, 784 → 512 → 256 → 10, predict first: how many MiB do its
# parameters take?

# %%
predicted_mib = None  # your number: the MLP's parameter memory in MiB (2**20 bytes)

# %%
from tinytorch import memory_footprint  # noqa: E402

mlp = Sequential(Linear(784, 512), ReLU(), Linear(512, 256), ReLU(), Linear(256, 10))
_total = 0
for _name, _p in mlp.named_parameters():
    _total += _p.numel()
    print(f"{_name:10s} {str(_p.shape):12s} {_p.numel():8,d} params  {_p.nbytes / 1024:8.1f} KiB")
print(f"total: {_total:,d} parameters = {_total * 4 / 2**20:.2f} MiB in float32 "
      f"(measured with memory_footprint: {memory_footprint(*mlp.parameters()) / 2**20:.2f} MiB)")
if predicted_mib is None:
    print("(set predicted_mib above to compare your estimate)")
else:
    print(f"you predicted {predicted_mib:.2f} MiB: off by {abs(predicted_mib - _total * 4 / 2**20):.2f} MiB")

# %% [markdown]
# The weights dominate (the biases are 778 of the 535,818 parameters, 0.15%). Training needs more than this: every
# parameter gets a gradient of the same size (module 06), and Adam keeps two more tensors
# per parameter (module 07), so training this MLP with Adam holds 4× the parameter memory,
# plus the activations saved for the backward pass — which grow with the batch size.
#
# ### FLOPs and time of a Linear forward
#
# `x @ W.T` for a batch of `B` rows does `B · in · out` multiply-adds, that is
# $2 \cdot B \cdot \text{in} \cdot \text{out}$ floating-point operations (FLOPs), plus
# `B · out` additions for the bias. Let us time `Linear(1024, 1024)` for growing batches and
# compute the achieved FLOP rate (FLOPs / time). Predict first: how many times higher is
# the FLOP rate at a batch of 1024 than at a batch of 1?

# %%
predicted_rate_ratio = None  # your number: GFLOP/s at batch 1024 divided by GFLOP/s at batch 1

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_layer = Linear(1024, 1024)
_batches = [1, 4, 16, 64, 256, 1024]
_secs, _gflops = [], []
for _b in _batches:
    _xb = Tensor(np.random.default_rng(1).standard_normal((_b, 1024)).astype(np.float32))
    _secs.append(median_time(lambda: _layer(_xb)))
    _gflops.append(2 * _b * 1024 * 1024 / _secs[-1] / 1e9)
    print(f"batch {_b:5d}: {_secs[-1] * 1e3:8.3f} ms   {_gflops[-1]:7.1f} GFLOP/s   "
          f"{_secs[-1] / _b * 1e6:8.2f} µs per example")

_ratio = _gflops[-1] / _gflops[0]
print(f"measured: the rate at batch 1024 is {_ratio:.0f}x the rate at batch 1"
      + ("" if predicted_rate_ratio is None else f" (you predicted {predicted_rate_ratio:.0f}x)"))

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.3))
ax1.loglog(_batches, np.array(_secs) * 1e3, "o-")
ax1.set_xlabel("batch size")
ax1.set_ylabel("forward time (ms)")
ax1.set_title("Linear(1024, 1024) forward")
ax2.semilogx(_batches, _gflops, "s-", color="C1")
ax2.set_xlabel("batch size")
ax2.set_ylabel("GFLOP/s achieved")
ax2.set_title("FLOP rate against batch size")
fig.tight_layout()
plt.show()

# %% [markdown]
# For a batch of 1, the layer reads its whole 4 MiB weight matrix to do only 2 MFLOPs:
# the time is set by memory traffic and Python/dispatch overhead, not arithmetic. As the
# batch grows, each weight loaded from memory is reused for more rows, BLAS keeps the
# CPU's vector units busy, and the FLOP rate climbs until it saturates. This is the
# **arithmetic intensity** argument (FLOPs per byte moved), and the reason training uses
# batches and inference servers batch requests together. How large the ratio is depends
# on your machine: the number of cores BLAS may use, their vector width, the cache sizes,
# and the fixed per-call overhead of Python and `apply`, which dominates a batch of 1.
# The curve need not rise at every step: a batch of 1 is a matrix-*vector* product, which
# numpy hands to a different BLAS routine than a matrix-matrix product, and on some
# machines that routine is the faster one per example. (Timings on a shared machine are
# also noisy; run the cell again to see which wiggles stay.)
#
# ### What the initialisers draw
#
# Histograms of 100,000 draws of each of your initialisers for a `(256, 512)` weight
# (fan_in 512, fan_out 256), with the largest draw (uniform) and a normal density of the
# sample's std (normal). Check the numbers in the titles against what you derived: which
# pairs share a std (and why those), and by what factor does a uniform bound exceed its std?

# %%
manual_seed(0)
_shape = (256, 512)
fig, axes = plt.subplots(1, 4, figsize=(16, 3))
_specs = [
    ("xavier_uniform_", xavier_uniform_, "uniform"),
    ("xavier_normal_", xavier_normal_, "normal"),
    ("kaiming_uniform_ (relu)", lambda t: kaiming_uniform_(t, nonlinearity="relu"), "uniform"),
    ("kaiming_normal_ (relu)", lambda t: kaiming_normal_(t, nonlinearity="relu"), "normal"),
]
for _ax, (_name, _fn, _kind) in zip(axes, _specs):
    _w = _fn(zeros(*_shape)).numpy().ravel()[:100_000]
    _s = _w.std()
    _ax.hist(_w, bins=80, density=True, alpha=0.6)
    if _kind == "uniform":   # the largest of 100,000 draws sits at the bound, to a thousandth
        for _edge in (-np.abs(_w).max(), np.abs(_w).max()):
            _ax.axvline(_edge, color="C3", ls="--")
        _ax.set_title(f"{_name}\nlargest |w| {np.abs(_w).max():.4f}, std {_s:.4f}", fontsize=9)
    else:                    # a normal density of the sample's std over the histogram
        _grid = np.linspace(-4 * _s, 4 * _s, 200)
        _ax.plot(_grid, np.exp(-_grid ** 2 / (2 * _s ** 2)) / (_s * math.sqrt(2 * math.pi)), color="C3")
        _ax.set_title(f"{_name}\nsample std {_s:.4f}", fontsize=9)
    _ax.locator_params(axis="x", nbins=5)  # five labels fit a narrow panel
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 13. How PyTorch does it
#
# - `torch.nn.Module` keeps the same registries (`_parameters`, `_buffers`, `_modules`),
#   registers in `__setattr__` and looks up in `__getattr__`, exactly as you did; its
#   `state_dict` also stores buffers and calls per-module hooks, and `load_state_dict`
#   reports missing/unexpected keys as a named tuple. Unlike ours, PyTorch copies what it
#   can and then raises; we check first and copy nothing on error.
# - `Module.__call__` (`_call_impl`) runs forward pre-hooks, `forward`, forward hooks and
#   registers backward hooks: the basis of tools such as profilers and activation
#   checkpointing.
# - `torch.nn.Parameter(t)` shares `t`'s memory rather than copying it.
# - `torch.nn.init` has the same functions with the same formulas (plus `trunc_normal_`,
#   `orthogonal_`, `sparse_`); `nn.Linear.reset_parameters` calls
#   `kaiming_uniform_(self.weight, a=math.sqrt(5))` as ours does.
# - `nn.Linear.forward` calls `F.linear`, one fused op (`addmm`: the bias is added inside
#   the BLAS call). Ours records three ops (`permute`, `matmul`, `add`).
#
# If PyTorch is installed, compare printouts and outputs with the same weights:

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    _ours = Sequential(Linear(2, 3), ReLU(), Linear(3, 1, bias=False))
    _theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1, bias=False))
    print("same repr:", repr(_ours) == repr(_theirs))
    print("same names:", [n for n, _ in _ours.named_parameters()] == [n for n, _ in _theirs.named_parameters()])
    _theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in _ours.state_dict().items()})
    _xin = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    with torch.no_grad():
        _diff = np.abs(_ours(Tensor(_xin)).numpy() - _theirs(torch.tensor(_xin)).numpy()).max()
    print(f"max |tinytorch - torch| with the same weights: {_diff:.2e}")

# %% [markdown]
# ## 14. Recap
#
# - A **Parameter** is a tensor that requires grad and is registered when assigned to a
#   Module attribute.
# - **Module** keeps ordered registries of parameters, buffers and children, filled by
#   `__setattr__` and read by `__getattr__`. Every query — `parameters()`,
#   `named_parameters()` with dotted names, `train()`/`eval()`, `state_dict()`, `repr` — is a
#   walk over the tree; shared modules and tied parameters are visited once.
# - **state_dict / load_state_dict** save and restore values by name; loading checks every
#   key and shape first, then copies in place without recording.
# - **Initialisation** keeps the signal's variance constant through depth: the variance
#   argument gives the std from the fan and the activation's gain (Xavier averages the two
#   fans), and a uniform draw with the same variance has a wider bound than that std.
# - **Linear** is `x @ W.T + b` with W `(out, in)`, costing $2·B·\text{in}·\text{out}$
#   FLOPs; small batches are dominated by memory traffic and overhead.
#
# Run `tito test module 03` to check your work. Next, module 04 builds the loss functions.

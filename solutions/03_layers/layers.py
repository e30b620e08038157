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
# (or `tito test module 03`). `tinytorch.nn` re-exports the classes (`tinytorch.nn.Linear`)
# and `tinytorch.nn.init` the initialisation functions, as in PyTorch. Fill in the cells
# with `# YOUR CODE HERE`, then run the check cell below each.

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
# weights drawn from a normal distribution with three different standard deviations
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
fig, ax = plt.subplots(figsize=(7, 3.5))
for _label, _std in [("std = 0.1 (too small)", 0.1), ("std = 1/√fan_in", 1 / math.sqrt(_width)),
                     ("std = √(2/fan_in)  (He)", math.sqrt(2 / _width)), ("std = 0.2 (too big)", 0.2)]:
    _x, _stds = _x0, []
    for _ in range(_depth):
        _x = np.maximum(_x @ (_rng.standard_normal((_width, _width)) * _std).T, 0)
        _stds.append(_x.std())
    ax.semilogy(range(1, _depth + 1), _stds, "o-", ms=3, label=_label)
ax.set_xlabel("layer")
ax.set_ylabel("std of the activations")
ax.set_title("30 ReLU layers of width 256: only one scale keeps the signal alive")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

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
# the model then owns its memory exclusively).
#
# The cell below starts the package file. Write `Parameter.__init__`: turn `data` into a
# tensor that requires grad, by calling `Tensor.__init__` through `super()`. With no data,
# PyTorch makes an empty float32 tensor (shape `(0,)`); do the same.

# %% nbgrader={"grade": false, "grade_id": "parameter", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
"""Layers (module 03): Parameter, Module, Linear, Sequential, activation layers and the
initialisation functions that tinytorch.nn.init re-exports."""
import math
from collections import OrderedDict, namedtuple

import numpy as np

from tinytorch._tensor import Tensor, _check_dtype, is_grad_enabled, rand, randn, set_grad_enabled, zeros
from tinytorch.nn.activations import gelu, leaky_relu, log_softmax, relu, sigmoid, softmax, tanh

__all__ = [
    "Parameter", "Module", "Linear", "Sequential", "ModuleList", "Identity",
    "ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "Softmax", "LogSoftmax",
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]


class Parameter(Tensor):
    """A Tensor that is a trainable part of a Module: requires grad by default, and is
    registered when assigned to a Module attribute (torch.nn.Parameter)."""

    def __init__(self, data=None, requires_grad=True):
        """Copy `data` (Tensor, array, list; None = empty float32) into a new parameter."""
        # Hint: if data is None use np.zeros(0, dtype=np.float32); then
        # super().__init__(data, requires_grad=requires_grad) does the rest (and refuses
        # integer data that requires grad).
        ### BEGIN SOLUTION
        if data is None:
            data = np.zeros(0, dtype=np.float32)
        super().__init__(data, requires_grad=requires_grad)
        ### END SOLUTION

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


# %% nbgrader={"grade": true, "grade_id": "test-parameter", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_p = Parameter(Tensor([[1.0, 2.0], [3.0, 4.0]]))
assert isinstance(_p, Tensor) and isinstance(_p, Parameter)
assert _p.requires_grad and _p.shape == (2, 2) and _p.dtype == np.float32
assert Parameter(np.zeros(3)).dtype == np.float64
assert not Parameter([1.0], requires_grad=False).requires_grad
assert Parameter().shape == (0,) and Parameter().dtype == np.float32
_y = _p * 2
assert type(_y) is Tensor and _y.grad_fn is not None, "ops on a Parameter give ordinary Tensors"
print(_p)
print("✓ Parameter")

# %% [markdown]
# ## 3. Module: registering parameters and submodules
#
# Here is the whole `Module` class. Read it through: most of it is short, and the ideas
# that need more than a few lines are delegated to functions that you write in the next
# sections (as `Tensor` did in module 01):
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
# **`__call__` and `forward`.** Subclasses write `forward`; users call the module:
# `model(x)`. `__call__` is the place where PyTorch runs hooks around `forward` (and where
# you could add timing or logging for every layer); ours simply calls it.

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


class Module:
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

    # ------------------------------------------------------------------ forward
    def forward(self, *args, **kwargs):
        """The computation; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" '
                                  f"function: define forward(self, ...) in your Module subclass")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ registration (section 3)
    def __setattr__(self, name, value):
        _module_setattr(self, name, value)

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

    # ------------------------------------------------------------------ walking the tree (section 4)
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

    # ------------------------------------------------------------------ modes and gradients (section 5)
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

    def __dir__(self):
        names = set(object.__dir__(self))
        for registry in _REGISTRIES:
            names.update(self.__dict__.get(registry, {}))
        return sorted(names)

    # ------------------------------------------------------------------ dtype (last: shadows float)
    def to(self, dtype):
        """Convert every floating parameter and buffer to `dtype`, in place (the same Parameter
        objects, so an optimizer built earlier still holds them); returns self."""
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

    def double(self):
        """to(float64): for gradient checks (module 06)."""
        return self.to(np.float64)

    def float(self):
        """to(float32)."""
        return self.to(np.float32)


# %% [markdown]
# Now the heart of it, `_module_setattr(module, name, value)`, called for **every**
# `module.name = value`. Decide by the value's type, as PyTorch does:
#
# 1. **a `Parameter`**: if the module has no `_parameters` yet (its subclass forgot to call
#    `super().__init__()`), raise `AttributeError("cannot assign parameters before
#    Module.__init__() call")`. Otherwise forget any previous meaning of the name (the
#    provided `_forget(module, name, "_parameters")` removes it from `__dict__` and the other
#    registries: a plain attribute or a child may become a parameter), then
#    `module.register_parameter(name, value)`.
# 2. **a name that is already a registered parameter** (and the value is not a Parameter):
#    `None` is allowed (it unsets it: `register_parameter(name, None)`); anything else, for
#    example a plain `Tensor`, is a mistake that would silently un-register a trainable
#    weight, so raise `TypeError(f"cannot assign '{type(value).__name__}' as parameter
#    '{name}' (tinytorch.nn.Parameter or None expected)")`.
# 3. **a `Module`**: like 1, with `"cannot assign module before Module.__init__() call"`
#    and `_forget(module, name, "_modules")`, `module.add_module(name, value)`.
# 4. **a name that is already a registered child**: `None` is allowed
#    (`add_module(name, None)`), anything else is a `TypeError` as in 2 (`tinytorch.nn.Module
#    or None expected`).
# 5. **a name that is already a registered buffer**: the value must be a `Tensor` or `None`
#    (`TypeError` otherwise); store it with `module._buffers[name] = value`.
# 6. **anything else** (numbers, strings, the `training` flag, plain tensors under new
#    names): an ordinary attribute, `object.__setattr__(module, name, value)`.
#
# Use `module.__dict__.get("_parameters")` (not `module._parameters`) to test whether the
# registries exist: before `Module.__init__` ran, `module._parameters` would go through
# `__getattr__` and fail.

# %% nbgrader={"grade": false, "grade_id": "module-setattr", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _module_setattr(module, name, value):
    """Module.__setattr__: register Parameters and Modules, guard registered names."""
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
assert list(_m._parameters) == ["scale", "shift"] and "scale" not in _m.__dict__
assert _m.scale is _m._parameters["scale"] and _m.note == "an ordinary attribute" and _m.training
assert _m(Tensor([1.0])).tolist() == [2.5]
_t = _Two()
assert list(_t._modules) == ["first", "second"] and _t.first is _t._modules["first"]
assert _t(Tensor([1.0])).tolist() == [5.5]
try:
    _m.scale = Tensor([3.0])
    raise AssertionError("assigning a plain Tensor to a parameter's name must raise TypeError")
except TypeError as e:
    assert "scale" in str(e)
_m.shift = None
assert _m.shift is None and "shift" in _m._parameters


class _Forgot(Module):
    def __init__(self):
        self.w = Parameter([1.0])


try:
    _Forgot()
    raise AssertionError("a Parameter before Module.__init__ must raise AttributeError")
except AttributeError as e:
    assert "__init__" in str(e)
print("✓ Module.__setattr__ registers parameters and submodules")

# %% [markdown]
# ## 4. Walking the tree: `named_modules` and `named_parameters`
#
# Every query about a model is a walk over its tree. Two functions do all the walking:
#
# **`_named_modules(module, memo, prefix, remove_duplicate)`** is a generator that yields
# `(prefix, module)` for the module itself and then, recursively, for each child with the
# child's name appended: the prefix of child `fc` of a module at prefix `"encoder"` is
# `"encoder.fc"` (no leading dot at the top, where the prefix is `""`). A module can appear
# in two places of the tree (weight sharing: the same layer used twice); with
# `remove_duplicate` each module is yielded only the first time it is met. Keep the ids of
# modules already seen in `memo` (create the set when `memo` is None; pass it down so the
# whole walk shares it). Skip children that are `None`.
#
# **`_named_members(module, registry, prefix, recurse, remove_duplicate)`** yields
# `(dotted name, tensor)` for every entry of one registry (`"_parameters"` or `"_buffers"`)
# of every module in the walk (`module.named_modules(prefix=prefix, remove_duplicate=...)`),
# or of `module` alone when `recurse` is False. Skip `None` entries. A *parameter* shared by
# two modules (tied weights: GPT's embedding and output layer share one matrix) must reach
# the optimizer **once**, or it would be updated twice per step: with `remove_duplicate`,
# remember the `id()` of each tensor yielded. (Use ids, not a set of tensors: `==` on
# tensors is elementwise, so tensors do not behave as set members by value.)

# %% nbgrader={"grade": false, "grade_id": "named-members", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _join(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _named_modules(module, memo, prefix, remove_duplicate):
    """Yield (prefix, module), then recursively every descendant with its dotted name."""
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
    """Yield (dotted name, tensor) for the entries of `registry` in the tree (or module alone)."""
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
assert [n for n, _ in _t.named_modules()] == ["", "first", "second"]
assert [n for n, _ in _t.named_parameters()] == ["first.scale", "first.shift", "second.scale", "second.shift"]
assert [p for p in _t.parameters()][2] is _t.second.scale
assert [n for n, _ in _t.named_parameters(prefix="model")][0] == "model.first.scale"
assert list(_t.named_parameters(recurse=False)) == []
assert [n for n, _ in _t.named_children()] == ["first", "second"]
_t.second = _t.first  # the same module twice: its parameters are trained once
assert len(list(_t.parameters())) == 2 and len(list(_t.modules())) == 2
assert len(list(_t.named_modules(remove_duplicate=False))) == 3
_outer = _Two()
_outer.first = _Two()
assert [n for n, _ in _outer.named_parameters()][:2] == ["first.first.scale", "first.first.shift"]
print("✓ named_modules, named_parameters")

# %% [markdown]
# ## 5. Training mode
#
# Some layers behave differently while training and while evaluating: Dropout (module 08)
# zeroes random activations only in training; BatchNorm (module 09) uses the batch's
# statistics in training and its running averages in evaluation. Each module has a
# `training` flag, and `model.train()` / `model.eval()` must set it on the **whole tree**.
#
# Write `_train(module, mode)`: set `module.training = mode`, then call `child.train(mode)`
# for every child (calling the *method*, not `_train`, lets a subclass override `train` and
# still be reached), and return `module`, so that `model = Net().eval()` works.

# %% nbgrader={"grade": false, "grade_id": "train", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _train(module, mode):
    """Module.train: set the training flag on module and (recursively) its children."""
    ### BEGIN SOLUTION
    module.training = mode
    for child in module.children():
        child.train(mode)
    return module
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-train", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_outer = _Two()
_outer.first = _Two()
assert _outer.eval() is _outer
assert [m.training for m in _outer.modules()] == [False] * 5
assert _outer.first.train() is _outer.first
assert _outer.first.first.training and not _outer.training
print("✓ train / eval")

# %% [markdown]
# ## 6. Saving and loading: `state_dict` and `load_state_dict`
#
# A **state dict** is an ordered dictionary from each parameter's (and persistent
# buffer's) dotted name to its values. It is what gets saved to disk (module 08 writes it
# in a safe format) and loaded into a freshly constructed model of the same architecture.
# It holds data only, no code: loading it requires building the model first, and the
# names are the contract between the two.
#
# First a helper that both loading and initialisation need. Writing new values into a
# parameter is an in-place operation on a tensor that requires grad; module 01 refuses
# that while grad mode is on (autograd may need the old values). Loading and initialising
# are not part of any computation to differentiate, so we switch recording off for the
# copy — and *restore the previous mode afterwards*, even if the copy raises (a
# `try`/`finally`). PyTorch does the same with `torch.no_grad()`, which module 06 builds.
#
# Write `_no_grad_copy_(tensor, values)`: remember `is_grad_enabled()`, turn recording off
# with `set_grad_enabled(False)`, `tensor.copy_(values)` (module 01: broadcasts and casts
# `values` into the tensor's own memory), restore the mode in a `finally`, return `tensor`.
#
# Then the two functions:
#
# - **`_state_dict(module, prefix, keep_vars)`**: an `OrderedDict` with, for every module
#   in `module.named_modules(prefix=prefix, remove_duplicate=False)` (shared modules appear
#   under each of their names, as in PyTorch), its non-None parameters, then its non-None
#   buffers that are not in `_non_persistent_buffers`, under dotted names. The values are
#   **copies** (`Tensor(p)` copies and does not require grad), so that later training does
#   not change a saved checkpoint; with `keep_vars=True`, the live tensors themselves.
# - **`_load_state_dict(module, state_dict, strict)`**: compare the module's own keys
#   (`module.state_dict(keep_vars=True)`, name → live tensor) with the given ones.
#   Collect `missing` keys (the model has them, the dict does not) and `unexpected` keys
#   (the other way round), in order. **Check everything before copying anything**, so that a
#   failed load never leaves a half-loaded model behind. Errors:
#     - a shape mismatch, always: `f"size mismatch for {key}: copying a param with shape
#       {their_shape} from checkpoint, the shape in current model is {our_shape}."`
#       (values may be Tensors or numpy arrays: `tuple(np.shape(v))` works for both);
#     - with `strict`, missing and unexpected keys: `"Missing key(s) in state_dict: "` and
#       `"Unexpected key(s) in state_dict: "` followed by the keys, quoted and
#       comma-separated.
#
#   If there are errors, raise one `RuntimeError` listing them all, starting with
#   `f"Error(s) in loading state_dict for {type(module).__name__}:"`. Otherwise copy each
#   value with `_no_grad_copy_` and return `_IncompatibleKeys(missing, unexpected)`.

# %% nbgrader={"grade": false, "grade_id": "state-dict", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _no_grad_copy_(tensor, values):
    """Write `values` into `tensor`'s own memory without recording (init, loading)."""
    ### BEGIN SOLUTION
    previous = is_grad_enabled()
    set_grad_enabled(False)
    try:
        tensor.copy_(values)
    finally:
        set_grad_enabled(previous)
    return tensor
    ### END SOLUTION


def _state_dict(module, prefix, keep_vars):
    """Module.state_dict: name -> copy (or, with keep_vars, the live tensor)."""
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


def _load_state_dict(module, state_dict, strict):
    """Module.load_state_dict: check every key and shape, then copy in place."""
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


# %% nbgrader={"grade": true, "grade_id": "test-state-dict", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_p = Parameter([1.0, 2.0])
_storage = _p._storage
_no_grad_copy_(_p, [5.0, 6.0])
assert _p.tolist() == [5.0, 6.0] and _p._storage is _storage and _p.grad_fn is None and is_grad_enabled()
try:
    _no_grad_copy_(_p, [1.0, 2.0, 3.0])
except ValueError:
    pass
assert is_grad_enabled(), "grad mode must be restored even when the copy fails"
_a, _b = _Two(), _Two()
_b.first.scale = Parameter([-7.0])
_sd = _a.state_dict()
assert list(_sd) == ["first.scale", "first.shift", "second.scale", "second.shift"]
assert type(_sd["first.scale"]) is Tensor and not _sd["first.scale"].requires_grad
assert _sd["first.scale"]._storage is not _a.first.scale._storage, "state_dict values are copies"
_keep = _b.first.scale
assert _b.load_state_dict(_sd) == ([], [])
assert _b.first.scale is _keep and _keep.tolist() == [2.0], "load copies in place, same Parameter"
_sd["first.scale"] = Tensor([1.0, 2.0])
try:
    _b.load_state_dict(_sd)
    raise AssertionError("a shape mismatch must raise")
except RuntimeError as e:
    assert "first.scale" in str(e) and "(2,)" in str(e) and "(1,)" in str(e), str(e)
del _sd["first.scale"]
_sd["extra"] = Tensor([0.0])
try:
    _b.load_state_dict(_sd)
    raise AssertionError("missing and unexpected keys must raise when strict")
except RuntimeError as e:
    assert '"first.scale"' in str(e) and '"extra"' in str(e)
assert _b.load_state_dict(_sd, strict=False) == (["first.scale"], ["extra"])
print("✓ state_dict, load_state_dict")

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
# The rule, for one module: start with its class name (`module._get_name()`) and `(`. The
# lines inside are its `extra_repr()` split into lines (none if it is empty), followed by one
# line per child, `f"({name}): {repr(child)}"`, where the child's own multi-line repr is
# indented by two more spaces on every line but its first (the provided `_addindent`).
# Then:
#
# - no lines at all: `Name()`;
# - exactly one extra_repr line and no children: on one line, `Name(in_features=2, ...)`;
# - otherwise: a newline, each line indented by two spaces and ended by a newline, then `)`.
#
# Recursion does the nesting: `repr(child)` calls your function on the child.

# %% nbgrader={"grade": false, "grade_id": "module-repr", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _addindent(text, spaces):
    """Indent every line of `text` but the first by `spaces` spaces."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _module_repr(module):
    """Module.__repr__: PyTorch's nested format."""
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


assert repr(_Named("")) == "_Named()" and repr(_Named("k=1")) == "_Named(k=1)"
assert repr(_Named("a\nb")) == "_Named(\n  a\n  b\n)"
_outer = _Named("k=1")
_outer.inner = _Two()
assert repr(_outer) == ("_Named(\n  k=1\n  (inner): _Two(\n    (first): _Affine()\n"
                        "    (second): _Affine()\n  )\n)"), repr(_outer)
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
# - If the inputs have mean 0 (tanh-like activations, or no activation), $\mathbb{E}[x^2]
#   = \mathrm{Var}(x)$ and the layer multiplies the variance by $n\sigma_w^2$. To keep it
#   at 1, choose $\sigma_w^2 = 1/n$. Running the same argument backwards for the gradients
#   gives $\sigma_w^2 = 1/\text{fan\_out}$; **Xavier (Glorot) initialisation** compromises
#   with $\sigma_w^2 = \frac{2}{\text{fan\_in} + \text{fan\_out}}$ (Glorot & Bengio, 2010).
# - If $x = \mathrm{relu}(y_\text{prev})$ with $y_\text{prev}$ symmetric around 0, half of
#   the inputs are zeroed and $\mathbb{E}[x^2] = \frac12\mathrm{Var}(y_\text{prev})$. To
#   compensate, double the variance: $\sigma_w^2 = 2/\text{fan\_in}$ — **He (Kaiming)
#   initialisation** (He et al., 2015), the green line in section 1.
#
# The factor that an activation needs is its **gain**, $\sigma_w = \text{gain} /
# \sqrt{\text{fan}}$: 1 for linear and sigmoid (PyTorch's convention), $5/3$ for tanh,
# $\sqrt 2$ for ReLU, $\sqrt{2/(1 + a^2)}$ for LeakyReLU with slope $a$, $3/4$ for SELU.
#
# ### Fans of a weight tensor
#
# For a Linear weight of shape `(out, in)`, fan_in = `in` and fan_out = `out`. A
# convolution weight (module 09) has shape `(out_channels, in_channels, kh, kw)`: each
# output sums over `in_channels · kh · kw` inputs, so both fans are multiplied by the
# *receptive field size* `kh · kw` (the product of all dims after the first two).
#
# ### Uniform or normal
#
# A uniform distribution on $[-b, b]$ has variance $b^2/3$, so the uniform version of a
# standard deviation $\sigma$ has bound $b = \sqrt 3\,\sigma$.
#
# | function | distribution |
# |---|---|
# | `xavier_uniform_(t, gain=1)` | $U(-b, b)$, $b = \text{gain}\sqrt{6/(\text{fan\_in}+\text{fan\_out})}$ |
# | `xavier_normal_(t, gain=1)` | $N(0, \sigma^2)$, $\sigma = \text{gain}\sqrt{2/(\text{fan\_in}+\text{fan\_out})}$ |
# | `kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu")` | $U(-b, b)$, $b = \sqrt3\,\text{gain}/\sqrt{\text{fan}}$ |
# | `kaiming_normal_(t, a=0, mode="fan_in", nonlinearity="leaky_relu")` | $N(0, \sigma^2)$, $\sigma = \text{gain}/\sqrt{\text{fan}}$ |
#
# For Kaiming, `gain = calculate_gain(nonlinearity, a)` and `fan` is fan_in or fan_out by
# `mode`. (The default `nonlinearity="leaky_relu"` with `a=0` is exactly ReLU's $\sqrt2$.)
# All of them fill the tensor **in place** (the trailing underscore), without recording
# (`_no_grad_copy_`), drawing from tinytorch's one random generator so that
# `tinytorch.manual_seed` makes initialisation reproducible, and return the tensor.
#
# The provided `uniform_`, `normal_`, `constant_`, `zeros_` and `ones_` are the building
# blocks. Write `calculate_gain`, `_calculate_fan_in_and_fan_out` (a `ValueError` for
# tensors with fewer than 2 dimensions: fans are undefined), `_kaiming_std` (the part the
# two Kaiming functions share; a `ValueError` for a mode other than `"fan_in"`/`"fan_out"`)
# and the four functions. A tensor with no elements is returned unchanged (nothing to draw,
# and its fans may be 0).

# %% nbgrader={"grade": false, "grade_id": "init", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
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


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (torch.nn.init.calculate_gain).

    linear, conv*, sigmoid -> 1; tanh -> 5/3; relu -> sqrt(2); selu -> 3/4;
    leaky_relu -> sqrt(2 / (1 + slope**2)) with slope = param (default 0.01).
    """
    # Hints: the linear-like names are "linear", "conv1d", "conv2d", "conv3d",
    # "conv_transpose1d", "conv_transpose2d", "conv_transpose3d". For leaky_relu, `param`
    # must be an int or float but not a bool (ValueError otherwise). Unknown names:
    # ValueError(f"Unsupported nonlinearity {nonlinearity}").
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
    """(fan_in, fan_out) of a weight: (shape[1], shape[0]) times the receptive field size."""
    ### BEGIN SOLUTION
    if tensor.ndim < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 "
                         f"dimensions (got shape {tensor.shape})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive
    ### END SOLUTION


def _kaiming_std(tensor, a, mode, nonlinearity):
    """gain / sqrt(fan) for the Kaiming functions (mode is "fan_in" or "fan_out")."""
    ### BEGIN SOLUTION
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)
    ### END SOLUTION


def xavier_uniform_(tensor, gain=1.0):
    """Glorot uniform: U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)); in place."""
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)
    ### END SOLUTION


def xavier_normal_(tensor, gain=1.0):
    """Glorot normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)); in place."""
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
    ### END SOLUTION


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He uniform: U(-b, b), b = sqrt(3) * gain / sqrt(fan); in place."""
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound)
    ### END SOLUTION


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He normal: N(0, std^2), std = gain / sqrt(fan); in place."""
    ### BEGIN SOLUTION
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-init", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
assert calculate_gain("linear") == 1 and calculate_gain("sigmoid") == 1 and calculate_gain("conv2d") == 1
assert calculate_gain("relu") == math.sqrt(2) and calculate_gain("tanh") == 5 / 3
assert abs(calculate_gain("leaky_relu", 0.2) - math.sqrt(2 / 1.04)) < 1e-15
assert abs(calculate_gain("leaky_relu") - math.sqrt(2 / 1.0001)) < 1e-15
assert _calculate_fan_in_and_fan_out(zeros(3, 5)) == (5, 3)
assert _calculate_fan_in_and_fan_out(zeros(8, 4, 3, 3)) == (36, 72)
for _bad in (lambda: calculate_gain("softplus"), lambda: _calculate_fan_in_and_fan_out(zeros(4))):
    try:
        _bad()
        raise AssertionError("must raise ValueError")
    except ValueError:
        pass
_w = Parameter(zeros(400, 600))
_storage = _w._storage
xavier_uniform_(_w)
_bound = math.sqrt(6 / 1000)
assert _w._storage is _storage and _w.grad_fn is None, "in place, not recorded"
assert np.abs(_w.numpy()).max() <= _bound and np.abs(_w.numpy()).max() > 0.99 * _bound
_n = _w.numel()  # variance of U(-b, b) is b^2/3; its sample variance has std b^2 sqrt(4/45/n)
assert abs(_w.numpy().var() - _bound ** 2 / 3) < 5 * _bound ** 2 * math.sqrt(4 / 45 / _n)
kaiming_normal_(_w, mode="fan_out", nonlinearity="relu")
_var = 2 / 400  # std of a normal sample variance: var * sqrt(2/n)
assert abs(_w.numpy().var() - _var) < 5 * _var * math.sqrt(2 / _n)
kaiming_uniform_(_w, a=math.sqrt(5))
assert np.abs(_w.numpy()).max() <= 1 / math.sqrt(600)
xavier_normal_(_w, gain=2.0)
assert abs(_w.numpy().std() - 2 * math.sqrt(2 / 1000)) < 0.01 * 2 * math.sqrt(2 / 1000)
print("✓ calculate_gain, fans, xavier_*, kaiming_*")

# %% [markdown]
# ## 9. Linear
#
# $$y = x W^\top + b, \qquad W \in \mathbb{R}^{\text{out} \times \text{in}},\; b \in \mathbb{R}^{\text{out}}.$$
#
# The weight is stored `(out_features, in_features)`, as in PyTorch: row $i$ holds the
# weights of output $i$, and a checkpoint from PyTorch loads without transposing. The input
# may have any number of leading batch dimensions, `(..., in_features)`; module 01's
# matmul broadcasts `(..., in) @ (in, out)` and the bias `(out,)` broadcasts over the rest.
# Both are recorded ops (`permute` for `.T`, `matmul`, `add`), so Linear needs no backward
# rule of its own.
#
# **Initialisation.** PyTorch's default (and ours) is `kaiming_uniform_(weight,
# a=math.sqrt(5))`: the gain is $\sqrt{2/(1+5)} = 1/\sqrt3$, so the bound is
# $\sqrt3 \cdot \frac{1}{\sqrt3} / \sqrt{\text{fan\_in}} = 1/\sqrt{\text{fan\_in}}$, i.e.
# $W \sim U(-1/\sqrt{\text{in}}, 1/\sqrt{\text{in}})$, and the bias is drawn from the same
# range. (That is a weight variance of $1/(3\,\text{fan\_in})$, a third of Xavier's for a
# square layer: a historical choice PyTorch keeps for compatibility. For deep ReLU nets you
# re-initialise with `kaiming_normal_`, which `model.apply(fn)` makes easy.)
#
# Write:
#
# - `__init__`: store `in_features`/`out_features`, create `weight` as a `Parameter` of
#   zeros with shape `(out, in)` and `bias` of shape `(out,)` (both in `dtype`, default
#   float32) — or `self.register_parameter("bias", None)` when `bias=False`, so that
#   `layer.bias` is `None` — then call `self.reset_parameters()`;
# - `reset_parameters`: the default initialisation above (a fan_in of 0 gives a bias
#   bound of 0);
# - `forward`: check that the input has at least one dimension and that its last equals
#   `in_features`, else raise `ValueError` naming the input's shape, `in_features` and the
#   weight's shape; then compute `input @ self.weight.T`, plus the bias if there is one.

# %% nbgrader={"grade": false, "grade_id": "linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Linear(Module):
    """y = x @ W.T + b over the last dimension (torch.nn.Linear); W has shape (out, in)."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
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
        """PyTorch's default: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in))."""
        ### BEGIN SOLUTION
        kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = _calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            uniform_(self.bias, -bound, bound)
        ### END SOLUTION

    def forward(self, input):
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
_lin = Linear(4, 3)
assert _lin.weight.shape == (3, 4) and _lin.bias.shape == (3,) and _lin.weight.dtype == np.float32
assert [n for n, _ in _lin.named_parameters()] == ["weight", "bias"]
assert np.abs(_lin.weight.numpy()).max() <= 0.5 and np.abs(_lin.bias.numpy()).max() <= 0.5
_x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
_y = _lin(Tensor(_x))
assert _y.shape == (2, 5, 3)
np.testing.assert_allclose(_y.numpy(), _x @ _lin.weight.numpy().T + _lin.bias.numpy(), rtol=1e-5, atol=1e-6)
_nob = Linear(4, 2, bias=False)
assert _nob.bias is None and len(list(_nob.parameters())) == 1
assert repr(_lin) == "Linear(in_features=4, out_features=3, bias=True)"
try:
    _lin(Tensor(np.zeros((2, 5))))
    raise AssertionError("a wrong last dimension must raise ValueError")
except ValueError as e:
    assert "(2, 5)" in str(e) and "4" in str(e), str(e)
print("✓ Linear")

# %% [markdown]
# ## 10. Sequential
#
# `Sequential(m0, m1, m2)` registers its arguments as children named `"0"`, `"1"`, `"2"`
# and its forward feeds each one's output to the next. (It also accepts one `OrderedDict`
# of name → module, to choose the names.) The container protocol is provided:
# `model[0]` (negative indices too), `model[1:]` (a new `Sequential` over the *same* module
# objects, keeping their names), `len(model)`, iteration, and `append`.

# %% nbgrader={"grade": false, "grade_id": "sequential", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Sequential(Module):
    """Modules applied one after the other (torch.nn.Sequential)."""

    def __init__(self, *args):
        super().__init__()
        # Hint: with a single OrderedDict argument, add_module(name, module) for each item;
        # otherwise add_module(str(i), module) for each argument.
        ### BEGIN SOLUTION
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)
        ### END SOLUTION

    def forward(self, input):
        ### BEGIN SOLUTION
        for module in self:
            input = module(input)
        return input
        ### END SOLUTION

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise TypeError(f"Sequential indices must be integers or slices, not {type(idx).__name__}")
        if not -len(items) <= idx < len(items):
            raise IndexError(f"index {idx} is out of range for a Sequential of length {len(items)}")
        return items[idx][1]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Add `module` at the end (named str(len(self))); returns self."""
        self.add_module(str(len(self)), module)
        return self


# %% nbgrader={"grade": true, "grade_id": "test-sequential", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_l1, _l2 = Linear(3, 4), Linear(4, 2)
_seq = Sequential(_l1, _Affine(), _l2)
assert len(_seq) == 3 and _seq[0] is _l1 and _seq[-1] is _l2
assert [n for n, _ in _seq.named_parameters()] == ["0.weight", "0.bias", "1.scale", "1.shift", "2.weight", "2.bias"]
_x = Tensor(np.ones((5, 3), dtype=np.float32))
np.testing.assert_allclose(_seq(_x).numpy(), _l2(_seq[1](_l1(_x))).numpy(), rtol=1e-6)
_tail = _seq[1:]
assert isinstance(_tail, Sequential) and list(_tail._modules) == ["1", "2"] and _tail[1] is _l2
_named = Sequential(OrderedDict([("fc", Linear(2, 2)), ("out", Linear(2, 1))]))
assert [n for n, _ in _named.named_parameters()][-1] == "out.bias"
assert len(_seq.append(Linear(2, 1))) == 4
print("✓ Sequential")

# %% [markdown]
# ### ModuleList: a list whose entries are registered
#
# `Sequential` decides the order of the computation for you. Often a model holds a *list*
# of layers and its own `forward` decides how to use them: a transformer loops over its
# blocks, adding each one's output to a residual stream. A plain Python list does not work
# for that: `self.blocks = [Block(), Block()]` is an ordinary attribute, so
# `parameters()` would never see the blocks' weights and the optimizer would not train
# them. `ModuleList` (PyTorch's `nn.ModuleList`) is a module that behaves like a list and
# registers each entry as a child named `"0"`, `"1"`, ... (so the names in `state_dict`
# read `blocks.0.attn.weight`). It has no `forward`; you iterate over it in yours.
#
# Write `append(module)` (register it under the next index, return `self` so calls chain)
# and `__getitem__(idx)`: an `int` (negative counts from the end; out of range is an
# `IndexError`) returns the module, a `slice` returns a new `ModuleList` holding the same
# module objects.

# %% nbgrader={"grade": false, "grade_id": "modulelist", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class ModuleList(Module):
    """A list of modules registered as children "0", "1", ... (torch.nn.ModuleList)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def append(self, module):
        """Add `module` at the end (named str(len(self))); returns self."""
        # Hint: add_module does the registering (and rejects non-Modules).
        ### BEGIN SOLUTION
        self.add_module(str(len(self)), module)
        return self
        ### END SOLUTION

    def __getitem__(self, idx):
        """self[i] is the i-th module; self[a:b] a new ModuleList of the same modules."""
        # Hint: list(self._modules.values()) holds the modules in order.
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
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
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
_blocks = ModuleList([Linear(3, 3), _Affine()])
assert len(_blocks) == 2 and isinstance(_blocks[0], Linear) and _blocks[-1] is _blocks[1]
assert [n for n, _ in _blocks.named_parameters()] == ["0.weight", "0.bias", "1.scale", "1.shift"]
assert _blocks.append(Linear(3, 1)) is _blocks and len(_blocks) == 3 and list(_blocks._modules)[-1] == "2"
_part = _blocks[1:]
assert isinstance(_part, ModuleList) and len(_part) == 2 and _part[0] is _blocks[1]
assert [type(m).__name__ for m in _blocks] == ["Linear", "_Affine", "Linear"]


class _Stack(Module):
    def __init__(self):
        super().__init__()
        self.layers = ModuleList([Linear(2, 2) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


assert len(list(_Stack().parameters())) == 6
assert "layers.2.bias" in dict(_Stack().named_parameters())
try:
    _blocks[3]
    raise AssertionError("an index past the end must raise IndexError")
except IndexError:
    pass
print("✓ ModuleList")

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
from tinytorch import manual_seed  # noqa: E402

manual_seed(0)
model = Sequential(Linear(2, 3), ReLU(), Sequential(Linear(3, 1, bias=False), GELU("tanh")), LogSoftmax(dim=-1))
print(model)
print([name for name, _ in model.named_parameters()])
print(model(Tensor([[1.0, -1.0]])))

# %% [markdown]
# ## 12. A systems look: parameters, FLOPs, time
#
# ### Parameter memory
#
# A Linear layer holds `in·out` weights and `out` biases; in float32 each costs 4 bytes.
# For an MLP on 28×28 images, 784 → 512 → 256 → 10:

# %%
from tinytorch import memory_footprint  # noqa: E402

mlp = Sequential(Linear(784, 512), ReLU(), Linear(512, 256), ReLU(), Linear(256, 10))
_total = 0
for _name, _p in mlp.named_parameters():
    _total += _p.numel()
    print(f"{_name:10s} {str(_p.shape):12s} {_p.numel():8,d} params  {_p.nbytes / 1024:8.1f} KiB")
print(f"total: {_total:,d} parameters = {_total * 4 / 2**20:.2f} MiB in float32 "
      f"(measured with memory_footprint: {memory_footprint(*mlp.parameters()) / 2**20:.2f} MiB)")

# %% [markdown]
# The weights dominate (the biases are 0.2% here). Training needs more than this: every
# parameter gets a gradient of the same size (module 06), and Adam keeps two more tensors
# per parameter (module 07), so training this MLP with Adam holds 4× the parameter memory,
# plus the activations saved for the backward pass — which grow with the batch size.
#
# ### FLOPs and time of a Linear forward
#
# `x @ W.T` for a batch of `B` rows does `B · in · out` multiply-adds, that is
# $2 \cdot B \cdot \text{in} \cdot \text{out}$ floating-point operations (FLOPs), plus
# `B · out` additions for the bias. Let us time `Linear(1024, 1024)` for growing batches and
# compute the achieved FLOP rate (FLOPs / time).

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

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.3))
ax1.loglog(_batches, np.array(_secs) * 1e3, "o-")
ax1.set_xlabel("batch size")
ax1.set_ylabel("forward time (ms)")
ax1.set_title("Linear(1024, 1024) forward")
ax2.semilogx(_batches, _gflops, "s-", color="C1")
ax2.set_xlabel("batch size")
ax2.set_ylabel("GFLOP/s achieved")
ax2.set_title("bigger batches use the hardware better")
fig.tight_layout()
plt.show()

# %% [markdown]
# For a batch of 1, the layer reads its whole 4 MiB weight matrix to do only 2 MFLOPs:
# the time is set by memory traffic and Python/dispatch overhead, not arithmetic. As the
# batch grows, each weight loaded from memory is reused for more rows, BLAS keeps the
# CPU's vector units busy, and the FLOP rate climbs until it saturates. This is the
# **arithmetic intensity** argument (FLOPs per byte moved), and the reason training uses
# batches and inference servers batch requests together. (Timings on a shared or small
# machine are noisy: if the curve zigzags, run the cell again; the trend is what matters.)
#
# ### What the initialisers draw
#
# Histograms of 100,000 draws of each initialiser for a `(256, 512)` weight, with the
# theoretical bounds (uniform) and densities (normal):

# %%
manual_seed(0)
_shape = (256, 512)
_fan_in, _fan_out = 512, 256
fig, axes = plt.subplots(1, 4, figsize=(16, 3))
_specs = [
    ("xavier_uniform_", xavier_uniform_, "uniform", math.sqrt(6 / (_fan_in + _fan_out))),
    ("xavier_normal_", xavier_normal_, "normal", math.sqrt(2 / (_fan_in + _fan_out))),
    ("kaiming_uniform_ (relu)", lambda t: kaiming_uniform_(t, nonlinearity="relu"), "uniform",
     math.sqrt(3) * math.sqrt(2 / _fan_in)),
    ("kaiming_normal_ (relu)", lambda t: kaiming_normal_(t, nonlinearity="relu"), "normal", math.sqrt(2 / _fan_in)),
]
for _ax, (_name, _fn, _kind, _s) in zip(axes, _specs):
    _w = _fn(zeros(*_shape)).numpy().ravel()[:100_000]
    _ax.hist(_w, bins=80, density=True, alpha=0.6)
    if _kind == "uniform":
        for _edge in (-_s, _s):
            _ax.axvline(_edge, color="C3", ls="--")
        _ax.set_title(f"{_name}\nbound ±{_s:.4f}, sample std {_w.std():.4f}", fontsize=9)
    else:
        _grid = np.linspace(-4 * _s, 4 * _s, 200)
        _ax.plot(_grid, np.exp(-_grid ** 2 / (2 * _s ** 2)) / (_s * math.sqrt(2 * math.pi)), color="C3")
        _ax.set_title(f"{_name}\nσ = {_s:.4f}, sample std {_w.std():.4f}", fontsize=9)
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
# - **Initialisation** keeps the signal's variance constant through depth:
#   $\text{std} = \text{gain}/\sqrt{\text{fan}}$ (He), $\text{gain}\sqrt{2/(\text{fan\_in}
#   + \text{fan\_out})}$ (Xavier); uniform bounds are $\sqrt3$ times the std.
# - **Linear** is `x @ W.T + b` with W `(out, in)`, costing $2·B·\text{in}·\text{out}$
#   FLOPs; small batches are dominated by memory traffic and overhead.
#
# Run `tito test module 03` to check your work. Next, module 04 builds the loss functions.

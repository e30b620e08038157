"""TinyTorch: a PyTorch-style deep-learning framework that you build, one module at a time.

The names below mirror PyTorch's (`tinytorch.Tensor` ~ `torch.Tensor`). Each package file
is generated from a course notebook by `tito export`; until you export your work, a file
holds stubs that raise NotImplementedError and name the notebook to fill in.
"""
from tinytorch._tensor import *  # noqa: F401,F403  (module 01)
from tinytorch._tensor import __all__ as _tensor_all

__all__ = list(_tensor_all)

from tinytorch import random  # noqa: E402  (module 01: torch.random)
from tinytorch.random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: E402

__all__ += ["Generator", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]

from tinytorch import data, nn  # noqa: E402  (subpackages fill in as modules arrive)
from tinytorch.autograd import enable_grad, no_grad  # noqa: E402  (module 06)
from tinytorch import autograd  # noqa: E402
from tinytorch import optim  # noqa: E402  (module 07)
from tinytorch import text  # noqa: E402  (module 10)
from tinytorch.serialization import save, load  # noqa: E402  (module 08)
from tinytorch import serialization  # noqa: E402
from tinytorch import profiler  # noqa: E402  (module 14)
from tinytorch import compression  # noqa: E402  (module 16)
from tinytorch import ao  # noqa: E402  (module 15)
from tinytorch import cuda  # noqa: E402  (module 17: the GPU backend, imports numba lazily)

# PyTorch's other names for module 01's dtypes.
import builtins as _builtins  # noqa: E402

from tinytorch._tensor import bool_, float32, float64, int16, int32, int64  # noqa: E402
long, int, short, double, float, bool = int64, int32, int16, float64, float32, bool_  # noqa: A001
from tinytorch.functional import *  # noqa: F401,F403,E402  (PyTorch's top-level spellings of the ops)
from tinytorch.functional import __all__ as _functional_all  # noqa: E402
from tinytorch._out_of_scope import compile  # noqa: E402

# `from tinytorch import *` must not replace Python's own max, sum, float, ...: those stay
# tinytorch.max and so on, as in PyTorch's programs, which spell them torch.max.
__all__ += [name for name in [*_functional_all, "long", "int", "short", "double", "float", "bool", "compile"]
            if not hasattr(_builtins, name)]


def __getattr__(name):
    """A name PyTorch has and tinytorch leaves out is an AttributeError that says why."""
    from tinytorch._out_of_scope import attribute

    return attribute(name)

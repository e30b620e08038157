"""TinyTorch: a PyTorch-style deep-learning framework that you build, one module at a time.

The names below mirror PyTorch's (`tinytorch.Tensor` ~ `torch.Tensor`). Each package file
is generated from a course notebook by `tito export`; until you export your work, a file
holds stubs that raise NotImplementedError and name the notebook to fill in.
"""
from tinytorch._tensor import *  # noqa: F401,F403  (module 01)
from tinytorch._tensor import __all__ as _tensor_all

__all__ = list(_tensor_all)

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

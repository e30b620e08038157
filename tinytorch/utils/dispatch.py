"""The dispatch path's extension point (see module 01's `apply`).

`DispatchMode` sees every op that runs while it is active: each forward op in `apply` and
each backward rule in `call_rule` (module 06). Subclass it and override
`dispatch(op, fn, args, kwargs)`; switch it on with `with mode:`. It plays the part of
PyTorch's `torch.utils._python_dispatch.TorchDispatchMode`.
"""
from tinytorch._tensor import DispatchMode, dispatch

__all__ = ["DispatchMode", "dispatch"]

"""tinytorch.cuda: the GPU backend (module 17), mirroring torch.cuda.

Importing this package is cheap: numba is imported only when a GPU is asked for. The
kernels live in `tinytorch.cuda.kernels`, generated from module 17's notebook. Without an
NVIDIA GPU, numba's CUDA simulator runs them on the CPU: set NUMBA_ENABLE_CUDASIM=1 in the
environment before numba is first imported (module 17's notebook and tests do that when
they find no GPU).
"""

__all__ = ["is_available", "is_simulator", "device_count", "get_device_name", "synchronize", "manual_seed",
           "manual_seed_all"]


def _numba_cuda():
    try:
        from numba import cuda
    except ImportError:  # numba (or numba-cuda) is not installed
        return None
    return cuda


def is_available():
    """True when `cuda` tensors can run: a GPU that numba can use, or numba's CUDA simulator."""
    cuda = _numba_cuda()
    if cuda is None:
        return False
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver counts as no GPU
        return False


def is_simulator():
    """True when numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) stands in for the GPU."""
    if _numba_cuda() is None:
        return False
    from numba.core import config
    return bool(config.ENABLE_CUDASIM)


def device_count():
    """1 when a GPU (or the simulator) is available, else 0: tinytorch drives one GPU."""
    return 1 if is_available() else 0


def get_device_name(device=None):
    """The GPU's name (the simulator's name under the simulator)."""
    _lazy_init()
    name = _numba_cuda().get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def synchronize():
    """Wait until every kernel launched so far has finished (launches are asynchronous)."""
    _lazy_init()
    _numba_cuda().synchronize()


def manual_seed(seed):
    """PyTorch seeds the GPU's own generators here. tinytorch draws every random number on the
    CPU, from the generator `tinytorch.manual_seed` resets, so there is nothing to seed: this
    exists so that PyTorch programs that call it run unchanged."""


manual_seed_all = manual_seed


def _lazy_init():
    """Check that `cuda` can run, and register the kernels (once) in module 01's registry.

    Called by Tensor.to("cuda"). Kernels registered already (module 17's notebook registers
    its own) are left alone."""
    if not is_available():
        raise RuntimeError(
            "cuda is not available: no NVIDIA GPU that numba can use was found, and numba's "
            "CUDA simulator is off. To run tinytorch's cuda device on the CPU, set the "
            "environment variable NUMBA_ENABLE_CUDASIM=1 before numba is imported (module 17, "
            "17_acceleration; `pip install numba-cuda` if numba is missing).")
    from tinytorch._tensor import _KERNELS
    if not any(kind == "cuda" for _, kind in _KERNELS):
        from tinytorch.cuda import kernels
        kernels.register()

"""What PyTorch has and this course leaves out on purpose, each named in one clear error.

Why: a PyTorch program that reaches for half precision or several GPUs should learn at once
that the course does not build it and why, not meet a bare AttributeError. Hand-written.
"""
import warnings

_LEFT_OUT = {
    "float16": "half precision (float16) is not a dtype tinytorch builds; module 15 teaches "
               "low-precision arithmetic with int8 quantization instead",
    "bfloat16": "bfloat16 is not a dtype tinytorch builds; module 15 teaches low-precision "
                "arithmetic with int8 quantization instead",
    "autocast": "automatic mixed precision (torch.autocast) is out of the course's scope: "
                "tinytorch computes in the dtype you give it",
    "amp": "automatic mixed precision (torch.amp) is out of the course's scope",
    "distributed": "distributed training (torch.distributed, DistributedDataParallel) is out "
                   "of the course's scope: tinytorch runs in one process",
    "jit": "TorchScript (torch.jit) is out of the course's scope; module 17 compiles kernels "
           "with numba instead",
}
_LEFT_OUT["half"] = _LEFT_OUT["float16"]


def attribute(name):
    """Raise the AttributeError for `tinytorch.<name>`, saying why when it is left out."""
    why = _LEFT_OUT.get(name)
    raise AttributeError(f"module 'tinytorch' has no attribute {name!r}" + (f": {why}" if why else ""))


def compile(model=None, **options):
    """`torch.compile(model)`: tinytorch has no graph compiler, so the model comes back
    unchanged (and runs as it did), with a warning that says so."""
    warnings.warn("tinytorch.compile returns the model unchanged: graph compilation "
                  "(torch.compile) is out of the course's scope; module 17 compiles single "
                  "kernels with numba", stacklevel=2)
    if model is None:
        return lambda fn: fn
    return model

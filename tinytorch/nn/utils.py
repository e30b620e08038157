"""tinytorch.nn.utils: gradient clipping (module 08), mirroring torch.nn.utils.

The functions are written in tinytorch/training.py (modules/08_training/training.ipynb);
this file only gathers them under PyTorch's module name.
"""
from tinytorch.training import clip_grad_norm_, clip_grad_value_  # module 08

__all__ = ["clip_grad_norm_", "clip_grad_value_"]

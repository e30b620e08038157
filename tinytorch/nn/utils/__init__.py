"""tinytorch.nn.utils: gradient clipping (module 08), mirroring torch.nn.utils.

`clip_grad.py` is generated from modules/08_training/training.ipynb; this file only gathers
its functions under PyTorch's names."""
from tinytorch.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_  # module 08

__all__ = ["clip_grad_norm_", "clip_grad_value_"]

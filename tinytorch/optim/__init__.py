"""tinytorch.optim: optimizers and learning-rate schedulers (module 07), mirroring torch.optim.

The code lives in optimizers.py, generated from modules/07_optimizers/optimizers.ipynb;
`tinytorch.optim.lr_scheduler` re-exports the schedulers under PyTorch's module name.
"""
from tinytorch.optim.optimizers import Optimizer, SGD, Adam, AdamW, Adadelta
from tinytorch.optim import lr_scheduler  # noqa: E402

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "lr_scheduler"]

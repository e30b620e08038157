"""tinytorch.optim.lr_scheduler: the learning-rate schedulers of module 07, under PyTorch's
module name (torch.optim.lr_scheduler). They are written in optimizers.py."""
from tinytorch.optim.optimizers import (
    CosineAnnealingLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    SequentialLR,
    StepLR,
)

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR", "LinearLR", "LambdaLR", "SequentialLR"]

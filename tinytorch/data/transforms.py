"""tinytorch.data.transforms: per-sample image transforms (module 05), mirroring
torchvision.transforms. Written in modules/05_dataloader/dataloader.ipynb."""
from tinytorch.data.dataloader import Compose, Normalize, RandomCrop, RandomHorizontalFlip  # noqa: F401

__all__ = ["Compose", "Normalize", "RandomHorizontalFlip", "RandomCrop"]

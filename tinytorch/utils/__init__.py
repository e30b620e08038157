"""tinytorch.utils: small helpers the notebooks share (not part of any module's exercise)."""


def __getattr__(name):
    """`tinytorch.utils.data`, as PyTorch programs reach it (`torch.utils.data.DataLoader`),
    imported when first used."""
    if name == "data":
        import importlib

        return importlib.import_module("tinytorch.utils.data")
    raise AttributeError(f"module 'tinytorch.utils' has no attribute {name!r}")

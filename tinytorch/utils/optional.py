"""Optional dependencies for the notebooks' "how PyTorch does it" comparisons."""
import importlib.util


def optional_torch():
    """PyTorch if it is installed, else None (and say so once).

    Why: PyTorch is an optional extra for students (`pip install -e ".[parity]"`); a
    notebook compares against it when it can and runs fine without it.
    """
    if importlib.util.find_spec("torch") is None:
        print("PyTorch is not installed; skipping the comparison.")
        return None
    import torch

    return torch

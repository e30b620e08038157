"""tinytorch.nn.init (module 03): in-place weight initialisation, mirroring torch.nn.init.

The functions are written in module 03 (tinytorch/nn/layers.py, where Linear uses them);
this file only gathers them under PyTorch's name.
"""
from tinytorch.nn.layers import (  # noqa: F401
    calculate_gain,
    constant_,
    kaiming_normal_,
    kaiming_uniform_,
    normal_,
    ones_,
    uniform_,
    xavier_normal_,
    xavier_uniform_,
    zeros_,
)

"""tinytorch.nn.functional: stateless ops, mirroring torch.nn.functional.

Each op is written in the module that teaches it; this file only gathers them.
"""

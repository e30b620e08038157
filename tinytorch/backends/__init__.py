"""tinytorch.backends: compiled CPU kernels (module 17), like torch.backends.

`tinytorch.backends.cpu_kernels` holds the numba kernels; it imports numba when imported.
"""

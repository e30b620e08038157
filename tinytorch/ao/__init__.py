"""tinytorch.ao: model optimisation, mirroring torch.ao. `quantization` (module 15): int8
quantization, observers, QuantizedLinear, fake quantization, quantize_model."""
from tinytorch.ao import quantization  # noqa: F401  (module 15)

"""tinytorch.nn.functional: stateless ops, mirroring torch.nn.functional.

Each op is written in the module that teaches it; this file only gathers them.
"""
from tinytorch.nn.activations import relu, leaky_relu, sigmoid, tanh, gelu, softmax, log_softmax  # module 02
from tinytorch.nn.losses import mse_loss, binary_cross_entropy_with_logits, nll_loss, cross_entropy  # module 04
from tinytorch.nn.conv import conv2d, max_pool2d, avg_pool2d, batch_norm, pad  # module 09
from tinytorch.nn.conv_transpose import conv_transpose2d  # module 09 (hand-written)
from tinytorch.nn.embedding import embedding  # module 11
from tinytorch.nn.attention import scaled_dot_product_attention  # module 12
from tinytorch.nn.dropout import dropout  # module 08
from tinytorch.nn.transformer import layer_norm  # module 13

"""tinytorch.nn: layers (modules 03, 04, ...) and `functional` ops, mirroring torch.nn."""
from tinytorch.nn.layers import Parameter, Module, Linear, Sequential, ModuleList, ModuleDict, Identity, ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax  # module 03
from tinytorch.nn.losses import MSELoss, BCEWithLogitsLoss, NLLLoss, CrossEntropyLoss  # module 04
from tinytorch.nn import functional, init  # noqa: E402
from tinytorch.nn.conv import Conv2d, MaxPool2d, AvgPool2d, BatchNorm2d, Flatten  # module 09
from tinytorch.nn.conv_transpose import ConvTranspose2d  # module 09 (hand-written)
from tinytorch.nn.embedding import Embedding, SinusoidalPositionalEncoding, PositionalEncoding, LearnedPositionalEmbedding  # module 11
from tinytorch.nn.attention import MultiheadAttention  # module 12
from tinytorch.nn.dropout import Dropout  # module 08
from tinytorch.nn import utils  # noqa: E402
from tinytorch.nn.transformer import LayerNorm, TransformerBlock, GPT, GPTConfig  # module 13
from tinytorch.nn import prune  # noqa: E402  (module 16)
from tinytorch.nn.kv_cache import KVCache  # module 18

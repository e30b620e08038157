"""PyTorch's top-level spellings of the ops (`torch.exp(x)`, `torch.split(x, 2)`,
`torch.softmax(x, -1)`), written once over the Tensor methods the modules build, and the
few top-level functions PyTorch programs use that are a step of plain sampling or
conversion (`from_numpy`, `randperm`, `multinomial`).

Why: PyTorch code calls most ops both ways, `x.exp()` and `torch.exp(x)`. The second
spelling forwards to the first, so each op has one implementation, in the module that
teaches it. Hand-written: no student writes this file.
"""
import numpy as np

import tinytorch.random as _random

__all__ = [
    "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "neg", "clamp", "clip", "pow",
    "sum", "mean", "std", "var", "amax", "amin", "argmax", "argmin", "all", "any", "clone",
    "detach", "numel", "split", "chunk", "unbind", "narrow", "select", "t", "eq", "ne", "lt",
    "le", "gt", "ge", "add", "sub", "mul", "div", "masked_fill", "max", "min", "softmax",
    "log_softmax", "is_tensor", "from_numpy", "linspace", "randperm", "multinomial", "nonzero", "norm", "where",
    "logical_not",
]


def _forward_to_method(name):
    def op(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"`input.{name}(*args, **kwargs)`: PyTorch's top-level spelling of the method."
    return op


abs = _forward_to_method("abs")
exp = _forward_to_method("exp")
log = _forward_to_method("log")
sqrt = _forward_to_method("sqrt")
sin = _forward_to_method("sin")
cos = _forward_to_method("cos")
tanh = _forward_to_method("tanh")
sigmoid = _forward_to_method("sigmoid")
relu = _forward_to_method("relu")
neg = _forward_to_method("neg")
clamp = _forward_to_method("clamp")
clip = _forward_to_method("clip")
pow = _forward_to_method("pow")
sum = _forward_to_method("sum")
mean = _forward_to_method("mean")
std = _forward_to_method("std")
var = _forward_to_method("var")
amax = _forward_to_method("amax")
amin = _forward_to_method("amin")
argmax = _forward_to_method("argmax")
argmin = _forward_to_method("argmin")
all = _forward_to_method("all")
any = _forward_to_method("any")
clone = _forward_to_method("clone")
detach = _forward_to_method("detach")
numel = _forward_to_method("numel")
split = _forward_to_method("split")
chunk = _forward_to_method("chunk")
unbind = _forward_to_method("unbind")
narrow = _forward_to_method("narrow")
select = _forward_to_method("select")
t = _forward_to_method("t")
eq = _forward_to_method("eq")
logical_not = _forward_to_method("logical_not")
ne = _forward_to_method("ne")
lt = _forward_to_method("lt")
le = _forward_to_method("le")
gt = _forward_to_method("gt")
ge = _forward_to_method("ge")
add = _forward_to_method("add")
sub = _forward_to_method("sub")
mul = _forward_to_method("mul")
div = _forward_to_method("div")
masked_fill = _forward_to_method("masked_fill")
nonzero = _forward_to_method("nonzero")
norm = _forward_to_method("norm")


def where(condition, input=None, other=None):
    """`where(condition, input, other)`: module 01's elementwise choice. With the condition
    alone, the indices where it holds, one tensor per dimension (`condition.nonzero(as_tuple=True)`)."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if input is None or other is None:
        raise TypeError("where() takes the condition alone, or the condition, input and other")
    from tinytorch._tensor import where as choose  # module 01

    return choose(condition, input, other)


def max(input, dim=None, keepdim=False):
    """`input.max(dim, keepdim)`; with a tensor as second argument, `maximum(input, other)`."""
    if dim is not None and not isinstance(dim, (int, np.integer)):
        return input.maximum(dim)
    return input.max(dim, keepdim)


def min(input, dim=None, keepdim=False):
    """`input.min(dim, keepdim)`; with a tensor as second argument, `minimum(input, other)`."""
    if dim is not None and not isinstance(dim, (int, np.integer)):
        return input.minimum(dim)
    return input.min(dim, keepdim)


def softmax(input, dim, dtype=None):
    from tinytorch.nn.activations import softmax  # module 02

    return softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, dtype=None):
    from tinytorch.nn.activations import log_softmax  # module 02

    return log_softmax(input, dim, dtype=dtype)


def is_tensor(obj):
    from tinytorch._tensor import Tensor

    return isinstance(obj, Tensor)


def from_numpy(array):
    """A tensor over a numpy array: it shares the array's memory when the array is
    C-contiguous and of a dtype tinytorch has (else it holds a copy)."""
    from tinytorch._tensor import Tensor

    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return Tensor._from_array(array)


def linspace(start, end, steps, *, dtype=None, requires_grad=False, device=None):
    """`steps` numbers evenly spaced from `start` to `end`, both included (float32 unless `dtype`)."""
    import tinytorch._tensor as core

    values = np.linspace(float(start), float(end), int(steps), dtype=np.float64)
    return core.tensor(values.astype(core.float32 if dtype is None else core._check_dtype(dtype)),
                       requires_grad=requires_grad, device=device)


def randperm(n, dtype=None, requires_grad=False, device=None):
    """0..n-1 in an order drawn from the generator `manual_seed` resets (int64)."""
    import tinytorch._tensor as core

    order = _random.numpy_generator(None).permutation(n).astype(core.int64 if dtype is None else core._check_dtype(dtype))
    return core.tensor(order, requires_grad=requires_grad, device=device)


def multinomial(input, num_samples, replacement=False):
    """Indices drawn from each row of `input` (1-D or 2-D, weights that need not sum to 1),
    with the generator `manual_seed` resets; int64, shape (rows, num_samples)."""
    import tinytorch._tensor as core

    weights = np.asarray(input.detach().cpu().numpy(), dtype=np.float64)
    if weights.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {weights.ndim}")
    rows = weights.reshape(-1, weights.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(axis=1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0, "
                           "inf or nan, or a row that sums to 0)")
    if not replacement and num_samples > rows.shape[1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    drawn = np.stack([_random.numpy_generator(None).choice(rows.shape[1], size=num_samples, replace=replacement, p=row / row.sum())
                      for row in rows])
    return core.tensor(drawn.reshape(*weights.shape[:-1], num_samples).astype(np.int64), device=input.device)

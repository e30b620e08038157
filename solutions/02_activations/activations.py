# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 02 — Activations: the nonlinearities, computed safely
#
# A neural network alternates two kinds of step: a **linear** map (a matrix product plus a
# bias, module 03) and an elementwise **nonlinearity**, the *activation function*. In this
# module you write the seven activations that modern networks use — ReLU, LeakyReLU,
# Sigmoid, Tanh, GELU, Softmax and LogSoftmax — as functions on your module 01 `Tensor`.
#
# The formulas fit on one line each. The real work is making them **numerically stable**:
# the textbook formula for a sigmoid or a softmax overflows, or returns `nan`, for inputs
# that a network produces every day. Every function you write here must give finite,
# correct values for inputs as large as ±10,000 in float32.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain why a network needs a nonlinearity at all;
# - write ReLU, LeakyReLU, Sigmoid, Tanh, GELU (exact and tanh-approximate), Softmax and
#   LogSoftmax with PyTorch's names and signatures (`tinytorch.nn.functional.relu`, ...);
# - recognise the two classic floating-point traps, **overflow** (`exp(89)` is `inf` in
#   float32) and **cancellation** (`1 - 0.9999999` loses most of its digits), and find,
#   for each activation, a rewriting of its formula that avoids them;
# - read how each activation is recorded as **one op** (the provided wrappers call `apply`
#   with the attributes its backward rule will need in module 06);
# - measure what an activation costs, and explain why a softmax reads its input three times.
#
# ## Prerequisites
#
# Module 01 (`Tensor`, `apply`, `Tensor.numpy()`), and numpy's elementwise functions
# (`np.exp`, `np.where`, `np.maximum`) and reductions with `axis=` and `keepdims=True`.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/nn/activations.py` when you run
# `tito export 02` (or `tito test module 02`); `tinytorch.nn.functional` re-exports the
# seven functions, so after exporting you can write `import tinytorch.nn.functional as F`
# and `F.softmax(x, dim=-1)`, as in PyTorch. Fill in the cells with `# YOUR CODE HERE`,
# then run the check cell below each one.

# %%
#| default_exp nn.activations

# %% [markdown]
# ## 1. The idea: why a nonlinearity, and why "stable"
#
# **Why a nonlinearity.** A linear layer computes $xW^\top + b$. Two of them in a row
# compute $(xW_1^\top + b_1)W_2^\top + b_2 = x(W_2W_1)^\top + (b_1W_2^\top + b_2)$: again
# *one* linear layer. However many you stack, a network of linear layers can only draw
# straight lines (hyperplanes) through its input space. Putting an elementwise
# nonlinearity $\phi$ between them, $\phi(xW_1^\top + b_1)W_2^\top + b_2$, breaks that
# collapse: with enough hidden units such a network can approximate any continuous
# function (the *universal approximation theorem*). Which $\phi$ you choose changes how
# well gradients flow through it (module 06, and the derivative plot in section 8).
#
# The activations of this module:
#
# | name | formula | range | used in |
# |---|---|---|---|
# | ReLU | $\max(x, 0)$ | $[0, \infty)$ | the default in MLPs and CNNs |
# | LeakyReLU | $x$ if $x > 0$ else $\alpha x$ | $\mathbb{R}$ | GANs; avoids "dead" units |
# | Sigmoid | $\sigma(x) = \frac{1}{1 + e^{-x}}$ | $(0, 1)$ | probabilities of yes/no, gates in LSTMs |
# | Tanh | $\frac{e^x - e^{-x}}{e^x + e^{-x}}$ | $(-1, 1)$ | RNNs, the GELU approximation |
# | GELU | $x\,\Phi(x)$ | $\approx[-0.17, \infty)$ | transformers (BERT, GPT) |
# | Softmax | $\frac{e^{x_i}}{\sum_j e^{x_j}}$ along a dim | $(0, 1)$, sums to 1 | turning scores into probabilities |
# | LogSoftmax | $x_i - \log\sum_j e^{x_j}$ | $(-\infty, 0]$ | with the NLL loss (module 04) |
#
# ($\Phi$ is the cumulative distribution function of the standard normal distribution.)
#
# **Why "stable".** float32 holds numbers up to about $3.4\times10^{38}$, so $e^x$ is
# already `inf` for $x > 88.7$. Logits (the raw scores a network outputs) of a few hundred
# are common in a badly scaled model, and the textbook formulas then break:

# %%
import sys
import time
import warnings

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

_z = np.array([-1000.0, -100.0, 0.0, 100.0, 1000.0], dtype=np.float32)
with np.errstate(all="ignore"):  # numpy would warn about the overflow; we want to see the result
    print("exp(z)                     =", np.exp(_z))
    print("naive sigmoid e^z/(1+e^z)  =", np.exp(_z) / (1 + np.exp(_z)))
    print("naive softmax of z         =", np.exp(_z) / np.exp(_z).sum())

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# `inf / inf` is `nan`, and a single `nan` in a forward pass turns the loss, every gradient
# and then every weight into `nan`: training is over. The mathematical function is perfectly
# well defined at these inputs ($\sigma(1000) = 1$), it is only the *formula* that fails.
# For each activation we will find an equivalent formula whose intermediate values stay in
# range. The picture shows the seven functions we are about to build (softmax and
# log-softmax for a two-element input $(x, 0)$, where softmax's first entry is exactly
# $\sigma(x)$).

# %%
import math

_x = np.linspace(-5, 5, 401)
_curves = {
    "ReLU": np.maximum(_x, 0),
    "LeakyReLU (α=0.1)": np.where(_x > 0, _x, 0.1 * _x),
    "Sigmoid": 1 / (1 + np.exp(-_x)),
    "Tanh": np.tanh(_x),
    "GELU": _x * 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in _x])),
    "Softmax([x, 0])[0]": np.exp(_x) / (np.exp(_x) + 1),
    "LogSoftmax([x, 0])[0]": _x - np.log(np.exp(_x) + 1),
}
fig, axes = plt.subplots(1, len(_curves), figsize=(16, 2.6), sharex=True)
for _ax, (_name, _y) in zip(axes, _curves.items()):
    _ax.axhline(0, color="0.8", lw=0.8)
    _ax.axvline(0, color="0.8", lw=0.8)
    _ax.plot(_x, _y, lw=2)
    _ax.set_title(_name, fontsize=9)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. The plumbing: one op per activation
#
# Each activation is **one** op through module 01's `apply`:
#
# ```python
# def relu(input):
#     return apply("relu", _relu_forward, input)
# ```
#
# The public function (provided) checks its arguments, normalises them (a negative `dim`
# becomes a non-negative one) and calls `apply` with a stable op name and the attributes
# a backward rule needs. **Your part is each forward function**: it receives the input
# `Tensor` (and the attributes as keyword arguments) and returns a **numpy array** of the
# same shape, computed with numpy's vectorised functions — no Python loop over elements.
# One numpy helper is yours too: `_logsumexp` (section 7), on which log-softmax rests
# (and, through log-softmax, module 04's cross-entropy).
#
# Why one op and not a composition of module 01's ops (`x.clamp(min=0)`, `1 / (1 + (-x).exp())`)?
# A composite would work, and autograd would differentiate it. But it records several graph
# nodes and allocates several intermediate arrays, and its backward is only as stable as
# each piece: the backward of `1 / (1 + exp(-x))` through `exp` overflows exactly where
# the forward did. With one op, module 06 gets one backward rule written from the
# simplified derivative (for the sigmoid: $\sigma'(x) = \sigma(x)(1 - \sigma(x))$, which
# uses only the saved output and never overflows).
#
# Recorded ops and attributes (module 06's backward rules read them):
#
# | op | inputs | attrs | the backward rule will use |
# |---|---|---|---|
# | `relu` | x | — | $x > 0$ |
# | `leaky_relu` | x | `negative_slope` (float) | $x > 0$, the slope |
# | `sigmoid` | x | — | the output $s$: $s(1-s)$ |
# | `tanh` | x | — | the output $t$: $1 - t^2$ |
# | `gelu` | x | `approximate` (`"none"` or `"tanh"`) | $x$ |
# | `softmax` | x | `dim` (non-negative int) | the output and `dim` |
# | `log_softmax` | x | `dim` (non-negative int) | the output and `dim` |
#
# **dtypes.** The result has the input's dtype: float32 stays float32 (a float32 network
# must not silently become float64, twice the memory), float64 stays float64. Integer
# inputs become float32 first for the functions whose values are not integers (all but
# ReLU), as PyTorch does. Careful with numpy here: `arr * 0.01` keeps float32, but
# `arr * np.float64(0.01)` or an `np.sqrt(2.0)`-style numpy float64 scalar promotes the
# result to float64. Use Python floats, or cast back with `.astype(arr.dtype, copy=False)`.
#
# The cell below starts the package file with its imports and two small helpers.

# %%
#| export
"""Activation functions (module 02), re-exported by tinytorch.nn.functional."""
import math

import numpy as np

from tinytorch._tensor import Tensor, _wrap_dim, apply

__all__ = ["relu", "leaky_relu", "sigmoid", "tanh", "gelu", "softmax", "log_softmax"]


def _check_tensor(input, fn):
    """Refuse non-Tensors with a message naming the function (PyTorch refuses them too)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): expected a tinytorch Tensor as input, got {type(input).__name__}; "
                        f"wrap data with tinytorch.tensor(...) first")
    return input


def _float_array(x):
    """x's values as a floating numpy array: float32/float64 unchanged, ints and bools -> float32."""
    arr = x.numpy()
    return arr if arr.dtype.kind == "f" else arr.astype(np.float32)


# %% [markdown]
# The check cells below use `tinytorch.testing` (they print what they got and what they
# expected), and one more helper: `no_overflow` calls a function with numpy's
# floating-point warnings (overflow, invalid value such as `inf/inf`, divide by zero)
# turned into a failed check, exactly as the tests do. Underflow to 0 is allowed: it is
# often the right answer. `vectorised` fails when a forward runs Python code per element.

# %%
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, python_steps, spied


def vectorised(what, fn, *args, **kwargs):
    """Fail unless fn(*args) on 10,000 elements in 2,000 rows runs fewer Python lines than rows."""
    steps = python_steps(lambda: fn(Tensor(np.linspace(-3.0, 3.0, 10_000).reshape(2_000, 5)), *args, **kwargs))
    check(steps < 2_000, f"{what} is vectorised: numpy loops over the elements and the rows, not Python "
          "(np.vectorize, np.apply_along_axis and a loop over the rows run Python code per element or per row)",
          got=f"{steps:,d} Python lines and calls for 10,000 elements in 2,000 rows", expected="fewer than 2,000")


def no_overflow(what, fn, *args, **kwargs):
    """fn(*args, **kwargs), failing the check if numpy reports overflow, inf/inf or log(0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            try:
                return fn(*args, **kwargs)
            except (FloatingPointError, RuntimeWarning) as exc:
                raise AssertionError(f"✗ {what}: numpy reported '{exc}': an intermediate value left "
                                     f"the float range (an exp of a large positive number, inf/inf, "
                                     f"or the log of an underflowed 0)") from None


# %% [markdown]
# ## 3. ReLU and LeakyReLU
#
# $$\mathrm{ReLU}(x) = \max(x, 0), \qquad
#   \mathrm{LeakyReLU}_\alpha(x) = \begin{cases} x & x > 0 \\ \alpha x & x \le 0 \end{cases}$$
#
# ReLU ("rectified linear unit") is the simplest possible nonlinearity, and the most used:
# it costs one comparison, and its gradient is exactly 1 for positive inputs, so it does
# not shrink gradients the way sigmoid and tanh do in deep stacks. Its weakness: a unit
# whose input is negative for every example gets gradient 0 forever (a "dead ReLU").
# LeakyReLU keeps a slope $\alpha$ (PyTorch's default `negative_slope=0.01`) on the
# negative side so that gradient never vanishes completely. Any $\alpha$ is allowed, even
# one above 1: the rule is "multiply the non-positive inputs by $\alpha$", not "take the
# larger of $x$ and $\alpha x$" (the two agree only while $\alpha \le 1$).
#
# Neither can overflow. What needs care is the dtype:
#
# - ReLU of an integer tensor stays an integer tensor (PyTorch allows it);
# - LeakyReLU's result is floating: the input's float dtype, or float32 for integers.
#
# <details><summary>Hint 1 (ReLU)</summary>
#
# numpy has an elementwise maximum that broadcasts a scalar against an array. Which
# scalar keeps an int64 array int64, and which would promote it to float64?
# </details>
#
# <details><summary>Hint 2 (LeakyReLU)</summary>
#
# You need an elementwise *choice* between two arrays of the same shape (the input and
# its scaled copy), driven by a boolean mask. numpy's `where` is that choice.
# </details>
#
# <details><summary>The approach</summary>
#
# ReLU only compares with zero, so the one thing to get wrong is the dtype: ask what type
# your zero has, since a float literal turns an int64 tensor into float64. LeakyReLU is a
# choice per element, not a maximum: with a slope above 1, "the larger of $x$ and
# $\alpha x$" picks the wrong value for negative inputs. Its result must be floating
# without widening float32, and neither forward may write into the array it reads.
# </details>

# %% nbgrader={"grade": false, "grade_id": "relu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def relu(input):
    """max(input, 0) elementwise (PyTorch's torch.nn.functional.relu)."""
    _check_tensor(input, "relu")
    return apply("relu", _relu_forward, input)


def _relu_forward(x):
    """Forward of relu.

    Contract: `x` is a Tensor of any shape and dtype (possibly a non-contiguous view).
    Returns a numpy array of x's shape and x's dtype (integers stay integers) holding
    max(x, 0) elementwise; vectorised (no Python loop); x is not modified.
    """
    # Idea: ReLU only compares with zero, so nothing about the dtype needs to change.
    ### BEGIN SOLUTION
    return np.maximum(x.numpy(), 0)
    ### END SOLUTION


def leaky_relu(input, negative_slope=0.01):
    """input where input > 0, else negative_slope * input (torch.nn.functional.leaky_relu)."""
    _check_tensor(input, "leaky_relu")
    return apply("leaky_relu", _leaky_relu_forward, input, negative_slope=float(negative_slope))


def _leaky_relu_forward(x, negative_slope):
    """Forward of leaky_relu.

    Contract: `x` is a Tensor; `negative_slope` a Python float (any value, also > 1).
    Returns a floating numpy array of x's shape (x's float dtype; ints become float32)
    holding x where x > 0 and negative_slope * x elsewhere.
    """
    # Idea: choose elementwise between the input and its scaled copy.
    ### BEGIN SOLUTION
    a = _float_array(x)
    return np.where(a > 0, a, a * negative_slope)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-relu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.array([[-2.0, -0.5, 0.0], [0.5, 3.0, -1e4]], dtype=np.float32)
_x = Tensor(_a)
relu(_x)
assert_equal(_x.numpy(), _a, "the input tensor after relu (x.numpy() is its own memory: a forward that writes "
             "into it, np.maximum(arr, 0, out=arr) say, changes the caller's tensor)")
leaky_relu(_x, 0.2)
assert_equal(_x.numpy(), _a, "the input tensor after leaky_relu (a forward must not write into what it reads)")
_r = relu(Tensor(_a))
assert_equal(_r.numpy(), np.maximum(_a, 0), "relu of a float32 matrix")
assert_equal(str(_r.dtype), "float32", "relu keeps float32")
_ri = relu(Tensor([-3, 4]))
assert_equal(_ri.tolist(), [0, 4], "relu of an int tensor")
assert_equal(str(_ri.dtype), "int64", "relu of an int64 tensor stays int64")
_l = leaky_relu(Tensor(_a))
assert_close(_l.numpy(), np.where(_a > 0, _a, np.float32(0.01) * _a), rtol=1e-6, atol=0,
             what="leaky_relu with the default slope 0.01")
assert_equal(str(_l.dtype), "float32", "leaky_relu keeps float32")
for _slope in (0.2, 2.0):  # a slope above 1 too: the negative side is multiplied, not maxed
    assert_close(leaky_relu(Tensor(_a), negative_slope=_slope).numpy(),
                 np.where(_a > 0, _a, np.float32(_slope) * _a), rtol=1e-6, atol=0,
                 what=f"leaky_relu with negative_slope={_slope}")
assert_equal(str(leaky_relu(Tensor([-2, 2])).dtype), "float32", "leaky_relu of ints becomes float32")
_v = Tensor(_a).T  # a non-contiguous view: the forwards must read it through x.numpy()
assert_equal(relu(_v).numpy(), np.maximum(_a.T, 0), "relu of a transposed (non-contiguous) view")
assert_close(leaky_relu(_v, 0.2).numpy(), np.where(_a.T > 0, _a.T, np.float32(0.2) * _a.T), rtol=1e-6, atol=0,
             what="leaky_relu of a transposed view")
assert_equal(relu(Tensor([-np.inf, np.inf, -1.0])).tolist(), [0.0, np.inf, 0.0],
             "relu at -inf, inf, -1 (a mask product, x * (x > 0), gives -inf * 0 = nan)")
_w = Tensor(_a, requires_grad=True)
assert_equal(relu(_w).grad_fn.op, "relu", "the op relu records")
assert_equal(leaky_relu(_w, 0.1).grad_fn.attrs, {"negative_slope": 0.1}, "leaky_relu's recorded attrs")
print("✓ relu, leaky_relu: leaky_relu([-2, 3], 2.0) =", leaky_relu(Tensor([-2.0, 3.0]), 2.0).tolist())

# %% [markdown]
# ## 4. Sigmoid: an overflow to design away
#
# $$\sigma(x) = \frac{1}{1 + e^{-x}}$$
#
# squashes any real number into $(0, 1)$: the probability of "yes" in binary
# classification, a gate in an LSTM. Where is the textbook formula unsafe?
#
# - For $x \ge 0$, $e^{-x} \in (0, 1]$: no problem.
# - For $x < 0$, $e^{-x} = e^{|x|}$ overflows once $|x| > 88.7$ (float32). The result
#   $1/(1+\infty) = 0$ happens to be right, but numpy reports the overflow, and the
#   equivalent form $\frac{e^x}{1 + e^x}$ that people also write gives $\infty/\infty =
#   \text{nan}$ at large *positive* $x$.
#
# Where is each of the two forms safe? Your forward must **never call `exp` on a positive
# number**, for any input; the check below turns numpy's overflow report into a failure,
# as the tests do.
#
# <details><summary>Hint 1</summary>
#
# Multiply the numerator and the denominator of $\frac{1}{1+e^{-x}}$ by $e^{x}$. For
# which sign of $x$ is the new form the safe one?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Both safe forms can be written with one quantity that lies in $(0, 1]$ for every $x$:
# $e^{-|x|}$. Compute it once for the whole array.
# </details>
#
# <details><summary>The approach</summary>
#
# The only unsafe operation is an exponential of a large positive number, so ask of each
# exponential whether its argument can be positive for some input. One quantity in
# $(0, 1]$ for every $x$ serves both safe forms. An elementwise selection computes both
# alternatives everywhere, so the form you discard must be safe on those inputs too.
# Check the edges: 1/2 at 0, values in $[0, 1]$, and float32 in, float32 out.
# </details>

# %% nbgrader={"grade": false, "grade_id": "sigmoid", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def sigmoid(input):
    """1 / (1 + exp(-input)) elementwise, without overflow (torch.nn.functional.sigmoid)."""
    _check_tensor(input, "sigmoid")
    return apply("sigmoid", _sigmoid_forward, input)


def _sigmoid_forward(x):
    """Forward of sigmoid.

    Contract: `x` is a Tensor. Returns a floating numpy array of x's shape (x's float
    dtype; ints become float32) with values in [0, 1], correct to a few ulps, and without
    any numpy overflow or invalid-value warning, also at inputs of +-1e4 in float32.
    """
    # Idea: exp must only ever see a number <= 0.
    ### BEGIN SOLUTION
    a = _float_array(x)
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-sigmoid", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.linspace(-20, 20, 81)
assert_close(sigmoid(Tensor(_a)).numpy(), 1 / (1 + np.exp(-_a)), rtol=1e-12, atol=0,
             what="sigmoid on [-20, 20] in float64")
_big = np.array([-1e4, -100.0, 0.0, 100.0, 1e4], dtype=np.float32)
_s = no_overflow("sigmoid at ±1e4 (float32)", sigmoid, Tensor(_big))
assert_equal(str(_s.dtype), "float32", "sigmoid keeps float32")
# exp(-100) = 3.7e-44 is a float32 subnormal (spacing 1.4e-45): an absolute tolerance there
assert_close(_s.numpy(), np.array([0.0, np.exp(-100.0), 0.5, 1.0, 1.0], dtype=np.float32), rtol=1e-6,
             atol=3e-45, what="sigmoid at [-1e4, -100, 0, 100, 1e4]")
assert_equal(str(sigmoid(Tensor([0])).dtype), "float32", "sigmoid of ints becomes float32")
vectorised("sigmoid", sigmoid)
print("✓ sigmoid: at [-1e4, -100, 0, 100, 1e4] it gives", _s.tolist())

# %% [markdown]
# ## 5. Tanh: overflow on one side, cancellation near 0
#
# $$\tanh(x) = \frac{e^x - e^{-x}}{e^x + e^{-x}} = 2\sigma(2x) - 1$$
#
# Both textbook forms have a problem. The first overflows ($\infty/\infty$) once
# $e^{|x|}$ leaves float32's range, for $|x|$ above about 88.7. The second is stable but
# **inaccurate near 0**: for $x = 10^{-8}$, $2\sigma(2x) = 1.00000001$, and subtracting 1
# keeps only about half of float64's 16 digits of the result (in float32, $1 + 10^{-8}$ is
# exactly 1, and nothing is left): *catastrophic cancellation*, the second trap of
# floating point.
#
# Two tools fix both. **Symmetry**: tanh is odd, $\tanh(-x) = -\tanh(x)$, so you may work
# with $y = |x|$ and put the sign back at the end (and $\tanh(0)$ must stay exactly 0).
# **`np.expm1(z)`** computes $e^z - 1$ without forming $e^z$ first, so it keeps every
# digit for tiny $z$, where `np.exp(z) - 1` cancels. Your forward must match `np.tanh` to
# about one ulp in float64 for inputs as small as $10^{-300}$, and never overflow. (You may
# not call `np.tanh` here: `np.tanh` does this kind of thing in C; here you see how.)
#
# <details><summary>Hint 1</summary>
#
# As for the sigmoid: divide the numerator and the denominator of the first form by
# $e^{y}$, so that the only exponential left is $e^{-2y}$, which never overflows.
# </details>
#
# <details><summary>Hint 2</summary>
#
# The result of Hint 1 still subtracts two nearly equal numbers when $y$ is tiny. Which
# quantity that `expm1` computes accurately can the numerator and the denominator both be
# written in?
# </details>
#
# <details><summary>The approach</summary>
#
# Two dangers, two cures. Range: work with $y = |x|$, so every exponential decays instead
# of growing. Precision: near $y = 0$ the numerator and the result are both tiny, so the
# numerator must come from a function that gives "$e^z - 1$" directly, not from a
# subtraction; the denominator lies in $[1, 2]$ and cannot cancel. Restore oddness so that
# 0 maps to exactly 0, and let no constant promote float32 to float64.
# </details>

# %% nbgrader={"grade": false, "grade_id": "tanh", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def tanh(input):
    """Hyperbolic tangent elementwise, stable and accurate near 0 (torch.nn.functional.tanh)."""
    _check_tensor(input, "tanh")
    return apply("tanh", _tanh_forward, input)


def _tanh_forward(x):
    """Forward of tanh.

    Contract: `x` is a Tensor. Returns a floating numpy array of x's shape (x's float
    dtype; ints become float32) in [-1, 1]: odd (tanh(-x) = -tanh(x), tanh(0) = 0),
    within an ulp or so of the true value for every input including tiny ones (1e-300),
    and without numpy overflow warnings at +-1e4. Does not call np.tanh.
    """
    # Idea: two dangers, one per side of 0 and one at 0; which tool fits which?
    ### BEGIN SOLUTION
    a = _float_array(x)
    m = np.expm1(-2 * np.abs(a))
    return np.sign(a) * (-m / (2 + m))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-tanh", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.concatenate([np.linspace(-20, 20, 81), [1e-8, -1e-12, 1e-300, 0.0]])
assert_close(tanh(Tensor(_a)).numpy(), np.tanh(_a), rtol=1e-14, atol=0,
             what="tanh on [-20, 20] and at 1e-8, -1e-12, 1e-300 (float64, relative accuracy)")
_t = no_overflow("tanh at ±1e4 (float32)", tanh, Tensor(np.array([-1e4, -50.0, 0.0, 50.0, 1e4], dtype=np.float32)))
assert_equal(str(_t.dtype), "float32", "tanh keeps float32")
assert_equal(str(tanh(Tensor([0, 1])).dtype), "float32", "tanh of ints becomes float32")
assert_equal(_t.tolist(), [-1.0, -1.0, 0.0, 1.0, 1.0], "tanh at [-1e4, -50, 0, 50, 1e4]")
_, _calls = spied(lambda v: tanh(Tensor(v)), np.linspace(-3.0, 3.0, 7))
check("tanh" not in [_c[0] for _c in _calls], "tanh is built from exp or expm1 here, not handed to np.tanh (the "
      "exercise is the stable form); got the numpy calls it made", got=[_c[0] for _c in _calls])
vectorised("tanh", tanh)
print(f"✓ tanh: tanh(1e-8) in float64 = {tanh(Tensor(np.array([1e-8]))).item()!r} "
      f"(np.tanh: {float(np.tanh(1e-8))!r})")

# %% [markdown]
# ## 6. GELU: the error function, and `erfc` against cancellation
#
# The Gaussian Error Linear Unit weighs its input by how likely a standard normal variable
# is to be smaller than it:
#
# $$\mathrm{GELU}(x) = x\,\Phi(x) = \frac{x}{2}\left(1 + \mathrm{erf}\!\left(\frac{x}{\sqrt 2}\right)\right).$$
#
# It looks like a smoothed ReLU with a small dip below zero (the picture in section 1), and
# it is the activation of BERT and GPT. Two practical issues:
#
# 1. **numpy has no `erf`.** `math.erf` works on one Python float at a time, and a Python
#    loop over a million elements is ~100× slower than numpy. The provided `_erf` and
#    `_erfc` below evaluate W. J. Cody's rational approximations (the ones many C libraries
#    use: *Math. Comp.* 23, 1969), vectorised with numpy, in float64. Their relative error is
#    below $10^{-15}$ over the whole real line (checked in the next cell against `math.erf`).
# 2. **Cancellation again.** For $x = -8$, $\mathrm{erf}(-8/\sqrt2) = -0.9999999999999988$
#    and $1 + \mathrm{erf}$ keeps only one significant digit; for $x = -10$ it is exactly
#    0, while the true GELU is about $-7.6\times10^{-23}$. The complementary error
#    function $\mathrm{erfc}(z) = 1 - \mathrm{erf}(z)$, computed directly, has no such
#    problem. (PyTorch's CPU kernel uses the `1 + erf` form, so for very negative inputs
#    our values are the more accurate ones; both are far below float32's resolution.)
#
# The **tanh approximation** (`approximate="tanh"`), from before fast erf kernels were
# common and still used by GPT-2, replaces $\Phi$ by a tanh curve:
#
# $$\mathrm{GELU}_\text{tanh}(x) = \frac{x}{2}\left(1 + \tanh\!\left(\sqrt{2/\pi}\,(x + 0.044715\,x^3)\right)\right).$$
#
# For very negative $x$ the tanh is exactly $-1$ in floating point and the result is
# exactly 0 (with a sign); nothing overflows for $|x|$ up to ~$10^{12}$ in float32 (where
# $x^3$ would). You may call `np.tanh` here.

# %%
#| export
# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp. 23
# (1969), the coefficients of his CALERF routine (netlib specfun): relative error < 1e-15.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)
_RSQRTPI = 0.56418958354775628695  # 1 / sqrt(pi)


def _ratio(v, num_coefs, den_coefs, num_lead, den_last):
    """(((lead v + n0) v + n1) v ... + n_last) / ((((v + d0) v + d1) v ...) + d_last), in place:
    the rational functions of Cody's three ranges, written once."""
    num, den = num_lead * v, v.copy()
    for n, d in zip(num_coefs[:-1], den_coefs):
        num += n
        num *= v
        den += d
        den *= v
    num += num_coefs[-1]
    den += den_last
    num /= den
    return num


def _exp_minus_square(y):
    """exp(-y^2) for y >= 0, to full relative precision: y^2 rounds, so y is split as hi + lo
    with hi a multiple of 1/16 (hi^2 exact) and exp(-y^2) = exp(-hi^2) exp(-(y - hi)(y + hi))."""
    hi = np.trunc(y * 16.0) / 16.0
    rest = y - hi
    rest *= y + hi
    np.negative(rest, out=rest)
    np.exp(rest, out=rest)
    hi *= hi
    np.negative(hi, out=hi)
    np.exp(hi, out=hi)
    hi *= rest
    return hi


def _erf_parts(z):
    """(small, erf_small, erfc_abs) for a float64 array z: erf(z) where |z| <= 0.46875 (the
    mask `small`), and erfc(|z|) elsewhere (the other entries are 0). Each of Cody's three
    ranges is evaluated on its own elements only, in place: a third of the work of
    evaluating all three everywhere, and no temporary per operator."""
    y = np.abs(z)
    small, big = y <= 0.46875, y > 4.0
    mid = ~(small | big)
    erf_small, erfc_abs = np.zeros_like(y), np.zeros_like(y)
    zs = z[small]  # |z| <= 0.46875: erf(z) = z * A(z^2) / B(z^2)
    erf_small[small] = zs * _ratio(zs * zs, _ERF_A[:4], _ERF_B[:3], _ERF_A[4], _ERF_B[3])
    v = y[mid]  # 0.46875 < |z| <= 4: erfc(|z|) = exp(-z^2) C(|z|) / D(|z|)
    erfc_abs[mid] = _ratio(v, _ERF_C[:8], _ERF_D[:7], _ERF_C[8], _ERF_D[7]) * _exp_minus_square(v)
    v = y[big]  # |z| > 4: erfc(|z|) = exp(-z^2) / |z| * (1/sqrt(pi) - w P(w) / Q(w)), w = 1/z^2
    with np.errstate(all="ignore"):  # |z| = inf: w = 0, exp(-inf) = 0
        w = 1.0 / (v * v)
        r = (_RSQRTPI - w * _ratio(w, _ERF_P[:5], _ERF_Q[:4], _ERF_P[5], _ERF_Q[4])) / v
        erfc_abs[big] = np.where(np.isinf(v), 0.0, r * _exp_minus_square(v))
    return small, erf_small, erfc_abs


def _erf(z):
    """The error function, elementwise, in float64 (relative error < 1e-15)."""
    z = np.asarray(z, dtype=np.float64)
    small, erf_small, erfc_abs = _erf_parts(z)
    return np.where(small, erf_small, np.sign(z) * (1.0 - erfc_abs))


def _erfc(z):
    """The complementary error function 1 - erf(z), elementwise, in float64, computed without
    cancellation for large z (relative error < 1e-15 while the result is a normal float)."""
    z = np.asarray(z, dtype=np.float64)
    small, erf_small, erfc_abs = _erf_parts(z)
    return np.where(small, 1.0 - erf_small, np.where(z < 0, 2.0 - erfc_abs, erfc_abs))


# %% [markdown]
# A check of the provided `_erf`/`_erfc` against Python's `math.erf`/`math.erfc` (which
# call the C library), on 200,000 points, including where erfc is as small as $10^{-300}$:

# %%
_zs = np.concatenate([np.linspace(-26, 26, 200_001), np.geomspace(1e-300, 1, 301)])
_ref_erf = np.array([math.erf(v) for v in _zs])
_ref_erfc = np.array([math.erfc(v) for v in _zs])
print("max relative error of _erf :", np.max(np.abs(_erf(_zs) - _ref_erf) / np.maximum(np.abs(_ref_erf), 1e-300)))
print("max relative error of _erfc:", np.max(np.abs(_erfc(_zs) - _ref_erfc) / _ref_erfc))
print("1 + erf(-8/√2) =", 1 + math.erf(-8 / math.sqrt(2)), "  erfc(8/√2) =", _erfc(8 / math.sqrt(2)))

# %% [markdown]
# Now GELU. The wrapper checks `approximate` and records it; your forward computes the
# value for either setting. `_erfc` works in float64, so computing in float64 and
# returning the input's dtype is the natural plan (for float32 inputs this doubles the
# temporary memory; section 8 measures what GELU costs next to ReLU).
#
# <details><summary>Hint 1</summary>
#
# erf is odd: $\mathrm{erf}(-z) = -\mathrm{erf}(z)$. What does that make $1 + \mathrm{erf}(z)$
# in terms of erfc?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Check your $\Phi$ in erfc form at three points before you code it: $\Phi(0) = \tfrac12$,
# $\Phi(+\infty) = 1$, $\Phi(-\infty) = 0$. The $\sqrt 2$ turns a standard normal variable
# into erf's argument. The tanh form's constants are exactly those in the formula above.
# </details>
#
# <details><summary>The approach</summary>
#
# The precision is not lost in erf itself but in adding 1 to a number close to $-1$. Use
# the oddness of erf to write $\Phi$ with no such sum. The helpers work in float64, so the
# only dtype question is where you leave the input's dtype and where you return to it.
# For `"tanh"`, take the constants from the formula; the tanh saturates at $\pm1$, so very
# negative inputs give 0 without any warning.
# </details>

# %% nbgrader={"grade": false, "grade_id": "gelu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def gelu(input, approximate="none"):
    """x * Phi(x) elementwise; approximate="tanh" uses the tanh formula (torch.nn.functional.gelu)."""
    _check_tensor(input, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply("gelu", _gelu_forward, input, approximate=approximate)


def _gelu_forward(x, approximate):
    """Forward of gelu.

    Contract: `x` is a Tensor; `approximate` is "none" (exact, x * Phi(x)) or "tanh" (the
    tanh formula), already checked by the wrapper. Returns a numpy array of x's shape in
    x's float dtype (ints become float32), accurate to a few units in the last place of
    that dtype, both forms, float32 included. The exact form keeps its relative accuracy
    (about 1e-15 in float64) for very negative inputs, where 1 + erf cancels; no
    overflow at +-1e4.
    """
    # Idea: the digits are lost in one sum; which provided function never forms it?
    ### BEGIN SOLUTION
    a = _float_array(x)
    v = a.astype(np.float64)
    if approximate == "tanh":
        # 0.5 v (1 + tanh(c (v + 0.044715 v³))), in place: one float64 temporary, not six
        out = v * v
        out *= 0.044715
        out += 1
        out *= v
        out *= math.sqrt(2.0 / math.pi)
        np.tanh(out, out=out)
        out += 1
        out *= v
        out *= 0.5
    else:
        out = 0.5 * v * _erfc(-v / math.sqrt(2.0))
    return out.astype(a.dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-gelu", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = np.linspace(-6, 6, 121)
_exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in _a])
assert_close(gelu(Tensor(_a)).numpy(), _exact, rtol=1e-13, atol=1e-300, what="exact gelu on [-6, 6], float64")
_neg = -np.linspace(3.0, 30.0, 28)  # where 1 + erf(x/√2) cancels, down to exactly 0
_exact_neg = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in _neg])
# erfc(z) changes by a relative 2z² (= x²) times a relative change of z: x/√2 and x·√½
# round apart by one ulp, so two correct spellings may differ by x² ulps, no more
_rel, _allowed = np.abs(gelu(Tensor(_neg)).numpy() / _exact_neg - 1), 1e-14 + 2 * _neg ** 2 * 2.0 ** -52
check(np.all(_rel <= _allowed), "exact gelu at x = -3 ... -30: relative accuracy where 1 + erf cancels (allowing "
      "erfc's sensitivity to its argument's last bit, x² ulps)",
      got=f"relative error {_rel.max():.2e}, {np.max(_rel / _allowed):.3g}x the allowance at x = "
          f"{_neg[np.argmax(_rel / _allowed)]}", expected="within 1e-14 + x²·2^-51 at every x")
_approx = 0.5 * _a * (1 + np.tanh(math.sqrt(2 / math.pi) * (_a + 0.044715 * _a ** 3)))
assert_close(gelu(Tensor(_a), approximate="tanh").numpy(), _approx, rtol=1e-12, atol=1e-15,
             what="gelu(approximate='tanh') on [-6, 6]")
_a32 = np.linspace(-12, 12, 97).astype(np.float32)  # float32 in: a few float32 ulps from the true values
_v = _a32.astype(np.float64)
for _mode, _true in (("none", np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in _v])),
                     ("tanh", 0.5 * _v * (1 + np.tanh(math.sqrt(2 / math.pi) * (_v + 0.044715 * _v ** 3))))):
    assert_close(gelu(Tensor(_a32), approximate=_mode).numpy(), _true.astype(np.float32), rtol=2e-6, atol=1e-37,
                 what=f"gelu({_mode!r}) of float32 inputs on [-12, 12] against the true values (a few float32 ulps)")
_big = Tensor(np.array([-1e4, 0.0, 1e4], dtype=np.float32))
for _mode in ("none", "tanh"):
    _g = no_overflow(f"gelu({_mode!r}) at ±1e4", gelu, _big, approximate=_mode)
    assert_equal(str(_g.dtype), "float32", f"gelu({_mode!r}) keeps float32")
    assert_equal(_g.tolist(), [0.0, 0.0, 1e4], f"gelu({_mode!r}) at [-1e4, 0, 1e4]")
assert_equal(gelu(Tensor([1.0], requires_grad=True), "tanh").grad_fn.attrs, {"approximate": "tanh"},
             "gelu's recorded attrs")
vectorised("gelu", gelu)
for _mode in ("none", "tanh"):
    assert_equal(str(gelu(Tensor([-1, 2]), _mode).dtype), "float32", f"gelu({_mode!r}) of ints becomes float32")
print(f"✓ gelu: gelu(-10) = {gelu(Tensor([-10.0])).item():.4e} (1 + erf would give 0)")

# %% [markdown]
# ## 7. Softmax and LogSoftmax: range first, then precision
#
# Softmax turns a vector of scores (logits) into a probability distribution along one
# dimension `dim`:
#
# $$\mathrm{softmax}(x)_i = \frac{e^{x_i}}{\sum_j e^{x_j}}.$$
#
# Every logit of 100 or more breaks the formula in float32. The fix rests on one identity:
# for any constant $c$,
#
# $$\frac{e^{x_i - c}}{\sum_j e^{x_j - c}} = \frac{e^{-c}e^{x_i}}{e^{-c}\sum_j e^{x_j}} = \mathrm{softmax}(x)_i .$$
#
# The question is which $c$ to choose, and *per what*: one constant for the whole tensor,
# or one for each slice along `dim`? Two things must hold in every slice: no exponent is
# positive (no overflow), and at least one term of the sum is not tiny (no `0/0` when
# the others underflow). A row such as $(-10^4, -10^4, -10^4)$ next to a row holding
# $10^4$ is the case that tells the two answers apart.
#
# In numpy, reduce along `axis=dim` with `keepdims=True`, so that a reduced result keeps
# a size-1 dimension and broadcasts back against the input (module 01, section 8). The
# wrapper has already turned `dim` into a non-negative int, and handles 0-d inputs.
#
# <details><summary>Hint 1</summary>
#
# With $c$ the largest $x_j$ of the slice, what is the largest exponent, and what is the
# largest term of the sum?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The max must be taken along `dim` only, one per slice; a single max over the whole
# tensor can be $2\times10^4$ above a slice's own entries, and then every term of that
# slice underflows to 0.
# </details>
#
# <details><summary>The approach</summary>
#
# The identity holds for any constant; the two requirements above choose it: one per
# slice along `dim`, the one that makes that slice's largest exponent zero. Then nothing
# overflows, and each slice's sum has a term equal to 1, so the division is never $0/0$.
# Whatever you reduce must keep its reduced dimension to line up with the input again.
# </details>

# %% nbgrader={"grade": false, "grade_id": "softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _softmax_args(input, dim, dtype, fn):
    _check_tensor(input, fn)
    if dim is None:
        raise TypeError(f"{fn}(): dim is required (which dimension sums to 1?), e.g. {fn}(x, dim=-1)")
    if dtype is not None:
        input = input.to(dtype)
    return input, _wrap_dim(dim, input.ndim)


def softmax(input, dim, dtype=None):
    """exp(x) / exp(x).sum(dim), computed stably (torch.nn.functional.softmax)."""
    input, d = _softmax_args(input, dim, dtype, "softmax")
    if input.ndim == 0:  # a single number: softmax over "one element" is 1
        return softmax(input.reshape(1), 0).reshape(())
    return apply("softmax", _softmax_forward, input, dim=d)


def _softmax_forward(x, dim):
    """Forward of softmax.

    Contract: `x` is a Tensor with ndim >= 1; `dim` a non-negative int < x.ndim. Returns a
    floating numpy array of x's shape (x's float dtype; ints become float32) whose slices
    along `dim` are each a probability distribution (entries in [0, 1], summing to 1).
    Finite, and without numpy overflow or invalid-value warnings, for any finite input,
    also logits of +-1e4 in float32.
    """
    # Idea: the identity allows any constant; which one, and one per what?
    ### BEGIN SOLUTION
    a = _float_array(x)
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-softmax", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_a = _rng.standard_normal((3, 4, 5))
for _d in [0, 1, 2, -1]:
    _e = np.exp(_a)
    assert_close(softmax(Tensor(_a), dim=_d).numpy(), _e / _e.sum(axis=_d, keepdims=True), rtol=1e-12, atol=0,
                 what=f"softmax of a (3, 4, 5) tensor along dim={_d}")
    assert_close(softmax(Tensor(_a), dim=_d).numpy().sum(axis=_d), np.ones(np.delete(_a.shape, _d % 3)),
                 rtol=1e-12, atol=0, what=f"softmax along dim={_d}: every slice sums to 1")
# row 1 is far below row 0's max: a max over the whole tensor would underflow it to 0/0
_big = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [1000.0, 999.0, 998.0]], dtype=np.float32)
_s = no_overflow("softmax of logits of ±1e4 (float32)", softmax, Tensor(_big), dim=1)
assert_equal(str(_s.dtype), "float32", "softmax keeps float32")
_e3 = np.exp([0.0, -1.0, -2.0])
assert_close(_s.numpy(), [[1, 0, 0], [1 / 3] * 3, _e3 / _e3.sum()], rtol=1e-6, atol=0,
             what="softmax(dim=1) of [[1e4, -1e4, 0], [-1e4, -1e4, -1e4], [1000, 999, 998]]")
_perm = Tensor(_a).permute(2, 0, 1)  # a non-contiguous view, softmax along its middle dim
_ep = np.exp(_a.transpose(2, 0, 1))
assert_close(softmax(_perm, dim=1).numpy(), _ep / _ep.sum(axis=1, keepdims=True), rtol=1e-12, atol=0,
             what="softmax(dim=1) of a permuted (non-contiguous) view")
assert_equal(softmax(Tensor(_a, requires_grad=True), -1).grad_fn.attrs, {"dim": 2}, "softmax's recorded attrs")
_in = Tensor(_a.copy())
softmax(_in, dim=1)
assert_equal(_in.numpy(), _a, "softmax's input after the call (a forward computes a new array, never into its input)")
vectorised("softmax", softmax, dim=1)
assert_equal(str(softmax(Tensor([[1, 2, 3]]), dim=1).dtype), "float32", "softmax of an int tensor becomes float32")
print("✓ softmax: softmax([1000, 999, 998]) =", np.round(_s.numpy()[2], 6).tolist())
### BEGIN HIDDEN TESTS
_x = _rng.standard_normal((2, 6)).astype(np.float32) * 50
assert_close(softmax(Tensor(_x + 1000), dim=1).numpy(), softmax(Tensor(_x), dim=1).numpy(),
             rtol=1e-4, atol=1e-7, what="softmax is shift-invariant")
### END HIDDEN TESTS

# %% [markdown]
# ### Log-sum-exp
#
# **LogSoftmax** is the log of softmax, and must *not* be computed as `log(softmax(x))`:
# when a probability underflows to 0 (softmax of $(10^4, 0, -10^4)$ is $(1, 0, 0)$ in any
# float), its log is `-inf`, although the true value ($-2\times10^4$) is a perfectly
# ordinary number. Write the log of the softmax formula out instead:
#
# $$\log \mathrm{softmax}(x)_i = x_i - \log\sum_j e^{x_j}.$$
#
# The first term is exact. The second, $\mathrm{LSE}(x) = \log\sum_j e^{x_j}$, is the
# **log-sum-exp**, which overflows as written. It is worth its own function: module 04's
# losses rest on the same trick, and you will meet it in every probabilistic model. Your `_logsumexp`
# works on numpy arrays (it is a helper, not an op) and keeps the reduced dimension.
#
# <details><summary>Hint 1</summary>
#
# The same shift as in softmax: what is $\log\sum_j e^{x_j}$ in terms of
# $\log\sum_j e^{x_j - c}$ and $c$?
# </details>
#
# <details><summary>Hint 2</summary>
#
# With $c$ the slice's max, the shifted sum lies in $[1, n]$: its log is in $[0, \log n]$,
# never $-\infty$ and never overflowing. Do not forget to add back what you took out.
# </details>
#
# <details><summary>The approach</summary>
#
# The sum overflows because of its largest term, so factor that term out: it returns as
# an added constant, exactly and with no exponential. What stays inside the log is a sum
# between 1 and $n$, so its log is neither $-\infty$ nor large. Keep the reduced axis with
# size 1, keep float32 as float32, and do not change the caller's array in place.
# </details>

# %% nbgrader={"grade": false, "grade_id": "logsumexp", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _logsumexp(a, axis):
    """log(sum(exp(a), axis)), keeping `axis` as a size-1 dimension.

    Contract: `a` is a floating numpy array with a.ndim >= 1, `axis` a non-negative int
    < a.ndim. Returns an array of a's dtype and of a's shape with that axis of size 1.
    Finite, and without numpy overflow or divide-by-zero warnings, for every finite `a`
    (entries of +-1e4 in float32 included); a is not modified.
    """
    # Idea: which term of the sum overflows first, and what is left if you take it out?
    ### BEGIN SOLUTION
    m = a.max(axis=axis, keepdims=True)
    return m + np.log(np.exp(a - m).sum(axis=axis, keepdims=True))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-logsumexp", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.random.default_rng(1).standard_normal((3, 4))
for _d in (0, 1):
    _got = _logsumexp(_a, _d)
    assert_equal(_got.shape, np.log(np.exp(_a).sum(axis=_d, keepdims=True)).shape, f"_logsumexp(a, {_d}).shape")
    assert_close(_got, np.log(np.exp(_a).sum(axis=_d, keepdims=True)), rtol=1e-12, atol=0,
                 what=f"_logsumexp of a (3, 4) array along axis {_d}")
_big = np.array([[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]], dtype=np.float32)
_big_before = _big.copy()
_lse = no_overflow("_logsumexp of ±1e4 (float32)", _logsumexp, _big, 1)
assert_equal(_big, _big_before, "the input of _logsumexp after the call (must not be modified)")
assert_equal(str(_lse.dtype), "float32", "_logsumexp keeps float32")
assert_close(_lse, np.array([[1e4 + np.log(2)], [-1e4 + np.log(3)]], dtype=np.float32), rtol=1e-6, atol=0,
             what="_logsumexp([[1e4, 1e4, -1e4], [-1e4, -1e4, -1e4]], axis=1)")
print("✓ _logsumexp: of [1e4, 1e4, -1e4] it is", float(_lse[0, 0]), "= 1e4 + log 2")

# %% [markdown]
# ### LogSoftmax
#
# With `_logsumexp`, log-softmax looks like one line of math: the input minus its
# log-sum-exp along `dim`. One more trap sits in that subtraction, a matter of
# **precision**, not range. In float32, $10^4 + \log 2$ is stored with an error of about
# $5\times10^{-4}$ (the spacing of float32 numbers near $10^4$ is $10^{-3}$); subtract it
# from $10^4$ and that error lands in a result of size $0.69$: only three correct digits.
# What would make the two numbers being subtracted small wherever the result is small?
# Your result must be exact to float32
# precision (a relative error around $10^{-7}$), never positive, and never `-inf`: for the
# logits $(10^4, 0, -10^4)$ it is $(0, -10^4, -2\times10^4)$.
#
# <details><summary>Hint 1</summary>
#
# log-softmax is unchanged when every entry of a slice is shifted by the same constant
# (why?). Which shift makes the log-sum-exp of the slice a small number?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Do not go through softmax: its underflowed zeros are exactly what you must avoid. The
# log-sum-exp keeps a size-1 dimension, so it broadcasts against the input along `dim`.
# </details>
#
# <details><summary>The approach</summary>
#
# A whole-slice shift leaves the result unchanged, so move each slice's maximum to 0; its
# log-sum-exp is then a small number in $[0, \log n]$. The digits were lost by subtracting
# a large, rounded normaliser from large logits; with both small, that loss is gone.
# Shifted logits are at most 0 and the normaliser at least 0, so no entry is positive,
# and since no probability is ever formed, none is $-\infty$.
# </details>

# %% nbgrader={"grade": false, "grade_id": "log-softmax", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def log_softmax(input, dim, dtype=None):
    """log(softmax(x)) computed with log-sum-exp (torch.nn.functional.log_softmax)."""
    input, d = _softmax_args(input, dim, dtype, "log_softmax")
    if input.ndim == 0:
        return log_softmax(input.reshape(1), 0).reshape(())
    return apply("log_softmax", _log_softmax_forward, input, dim=d)


def _log_softmax_forward(x, dim):
    """Forward of log_softmax.

    Contract: `x` is a Tensor with ndim >= 1; `dim` a non-negative int < x.ndim. Returns a
    floating numpy array of x's shape (x's float dtype; ints become float32), every entry
    <= 0, equal to log(softmax(x, dim)) where that is representable, and finite (never
    -inf) for every finite input, also logits of +-1e4 in float32.
    """
    # Idea: subtract the log of the normaliser from the shifted logits; never take the log
    # of a probability.
    ### BEGIN SOLUTION
    a = _float_array(x)
    shifted = a - a.max(axis=dim, keepdims=True)
    return shifted - _logsumexp(shifted, dim)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-log-softmax", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.random.default_rng(0).standard_normal((3, 4, 5))
for _d in [0, 1, 2, -1]:
    _e = np.exp(_a)
    assert_close(log_softmax(Tensor(_a), _d).numpy(), np.log(_e / _e.sum(axis=_d, keepdims=True)),
                 rtol=1e-12, atol=1e-14, what=f"log_softmax of a (3, 4, 5) tensor along dim={_d}")
_big = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4]], dtype=np.float32)
_ls = no_overflow("log_softmax of logits of ±1e4 (float32)", log_softmax, Tensor(_big), dim=1)
assert_equal(str(_ls.dtype), "float32", "log_softmax keeps float32")
check(bool(np.all(np.isfinite(_ls.numpy()))), "log_softmax is finite at ±1e4 (log(softmax) gives -inf)",
      got=_ls.numpy())
_ln2, _ln3 = np.log(2.0), np.log(3.0)
assert_close(_ls.numpy(), [[0, -1e4, -2e4], [-_ln3] * 3, [-_ln2, -_ln2, -2e4 - _ln2]], rtol=1e-6, atol=0,
             what="log_softmax(dim=1) of [[1e4, 0, -1e4], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4]]")
assert_equal(log_softmax(Tensor(_a, requires_grad=True), -2).grad_fn.attrs, {"dim": 1},
             "log_softmax's recorded attrs")
_in = Tensor(_a.copy())
log_softmax(_in, dim=1)
assert_equal(_in.numpy(), _a, "log_softmax's input after the call (a forward computes a new array, never into its "
             "input)")
vectorised("log_softmax", log_softmax, dim=1)
assert_equal(str(log_softmax(Tensor([[1, 2, 3]]), dim=1).dtype), "float32",
             "log_softmax of an int tensor becomes float32")
print("✓ log_softmax: of [1e4, 0, -1e4] it is", _ls.numpy()[0].tolist())

# %% [markdown]
# Your seven functions are now also `tinytorch.nn.functional.relu`, ..., `log_softmax`
# (the file `tinytorch/nn/functional.py` imports them from `tinytorch.nn.activations`).
# Module 03 wraps each in a layer class (`nn.ReLU()`, `nn.Softmax(dim=-1)`, ...), so they
# can be placed in a `Sequential` model.
#
# ## 8. A systems look: what an activation costs
#
# ### Time per element
#
# An elementwise activation does very little arithmetic per element, so its speed is set
# mostly by **memory traffic**: reading 4 bytes and writing 4 bytes per float32 element.
# A plain copy (`clone`) moves the same bytes and does no arithmetic, so it is the baseline.
# Let us measure every activation on a float32 tensor of 4 million elements (16 MiB; if
# your CPU's last-level cache is larger, `lscpu` says, the "bandwidth" below is partly the
# cache's) and report nanoseconds per element and the effective bandwidth (8 bytes per
# element divided by the time). These are *your* machine's numbers.
#
# Before you run it, predict: how many copies' worth of time does the **exact GELU** take?
# (Count the passes over memory it makes: the float64 conversion, Cody's three ranges, each
# a gather of its elements, a polynomial and a scatter back, the `np.where`s, the cast
# back.)

# %%
predicted_gelu_over_copy = None  # your number: time of gelu (erf) / time of a copy

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_n = 1 << 22  # 4M elements: 16 MiB in float32
_big = Tensor(np.random.default_rng(0).standard_normal(_n).astype(np.float32))
_cases = {
    "clone (copy)": lambda: _big.clone(),
    "relu": lambda: relu(_big),
    "leaky_relu": lambda: leaky_relu(_big),
    "sigmoid": lambda: sigmoid(_big),
    "tanh": lambda: tanh(_big),
    "gelu (tanh)": lambda: gelu(_big, approximate="tanh"),
    "gelu (erf)": lambda: gelu(_big),
    "softmax": lambda: softmax(_big.reshape(-1, 1024), dim=-1),
    "log_softmax": lambda: log_softmax(_big.reshape(-1, 1024), dim=-1),
}
_times = {}
for _name, _fn in _cases.items():
    _times[_name] = median_time(_fn)
    print(f"{_name:14s} {_times[_name] * 1e9 / _n:6.2f} ns/element   "
          f"{8 * _n / _times[_name] / 1e9:6.2f} GB/s effective   "
          f"{_times[_name] / _times['clone (copy)']:5.1f}x a copy")
_measured = _times["gelu (erf)"] / _times["clone (copy)"]
if predicted_gelu_over_copy is None:
    print(f"\nexact GELU measured at {_measured:.1f}x a copy (set predicted_gelu_over_copy to compare)")
else:
    print(f"\nexact GELU: you predicted {predicted_gelu_over_copy:.1f}x a copy, measured {_measured:.1f}x "
          f"(off by a factor of {max(_measured, predicted_gelu_over_copy) / max(min(_measured, predicted_gelu_over_copy), 1e-9):.1f})")

# %% [markdown]
# What to read in these numbers. The sizes depend on your CPU, its memory bandwidth, the
# numpy build (some vectorise `exp` with SIMD, some do not) and whatever else the machine
# is doing; the shape you should usually see, and why:
#
# - ReLU close to a copy: `np.maximum` streams through memory once and does one
#   comparison per element.
# - LeakyReLU above ReLU: choosing with a mask builds temporaries (the boolean mask and
#   the scaled copy), and `np.where` itself costs more per element when the mask's values
#   are random (as the signs of normal data are) than when they come in runs: time one
#   on a sorted array to see it.
# - Sigmoid and tanh above those: a transcendental function (`exp`, `expm1`) per element,
#   and several temporaries, each a full pass over memory.
# - The exact GELU among the most expensive: float64 temporaries (twice the bytes), and for
#   each of Cody's three ranges a gather of its elements, a rational function and two
#   exponentials, and a scatter back. This is why fused GELU kernels exist. In a real
#   network the activations are still cheap next to the matrix products around them
#   (module 03 measures a Linear layer's FLOPs), but they are not free.
# - The tanh GELU was popular because it was cheaper, and in a fused kernel it is. Here it
#   may not be, and one spelling decides it: see the next cell.
#
# If your order differs (a numpy with a very fast SIMD `exp` can put sigmoid near
# LeakyReLU), the explanation is the same: count the passes over memory and the work per
# element.
#
# **One spelling, a large factor.** The tanh formula has $x^3$. numpy treats a few
# exponents specially (2 is one: a multiplication) and hands the others, 3 included, to
# the general power function, which is built for any real exponent. Predict the ratio
# before you run it.
#
# %%
_v = _big.numpy().astype(np.float64)
_t_pow, _t_mul = median_time(lambda: _v ** 3), median_time(lambda: _v * _v * _v)
print(f"x ** 3: {_t_pow * 1e3:.1f} ms;  x * x * x: {_t_mul * 1e3:.1f} ms  ({_t_pow / _t_mul:.0f}x) "
      f"on {_n:,} float64 elements. If your gelu(approximate='tanh') writes x ** 3, its line above pays this.")

# %% [markdown]
# ### Why softmax reads its input three times
#
# Look at what the stable softmax does along each row:
#
# 1. **read** every element to find the max $c$;
# 2. **read** every element again to compute $e^{x_j - c}$ (writing them) and their sum;
# 3. **read** the exponentials again to divide by the sum (writing the result).
#
# Three passes over the data, where an elementwise op needs one. When the rows fit in the
# cache, passes 2 and 3 are cheap; for long rows (attention over thousands of tokens) each
# pass goes to main memory. The **online softmax** trick (Milakov & Gimelshein, 2018)
# merges passes 1 and 2: keep a running max $m$ and a running sum $s$, and when a new
# element raises the max from $m$ to $m'$, rescale the sum by $e^{m - m'}$. FlashAttention
# (module 12's fast cousin) is built on that idea. Predict first: which share of the
# total goes to pass 2, the only one that evaluates `exp`?

# %%
predicted_exp_share = None  # your number: the fraction (0 to 1) of the three passes' time spent in pass 2

# %%
_rows = _big.numpy().reshape(-1, 1024)
_t_max = median_time(lambda: _rows.max(axis=1, keepdims=True))
_m = _rows.max(axis=1, keepdims=True)
_t_exp = median_time(lambda: np.exp(_rows - _m).sum(axis=1))
_e = np.exp(_rows - _m)
_s = _e.sum(axis=1, keepdims=True)
_t_div = median_time(lambda: _e / _s)
_total = _t_max + _t_exp + _t_div
print(f"pass 1 (max): {_t_max * 1e3:.2f} ms, pass 2 (exp and sum): {_t_exp * 1e3:.2f} ms, "
      f"pass 3 (divide): {_t_div * 1e3:.2f} ms; total {_total * 1e3:.2f} ms; "
      f"tinytorch softmax: {_times['softmax'] * 1e3:.2f} ms")
_share = "" if predicted_exp_share is None else f"; you predicted {predicted_exp_share:.2f}"
print(f"pass 2's share of the three passes: {_t_exp / _total:.2f}{_share}")

# %% [markdown]
# Pass 2 makes two passes of its own (the subtraction writes a temporary, `exp` reads it)
# and does the only real arithmetic, so it usually takes the largest share; how large
# depends on how fast your numpy's `exp` is against your memory bandwidth. The max and
# the divide are pure streaming passes: they cost about what a copy of the same bytes
# costs. Whatever the split on your machine, the sum of the three passes should come
# close to the tinytorch softmax's time above (which also pays for `apply` and the
# float conversion): the passes *are* the cost.

# %% [markdown]
# ### Derivatives: how much gradient gets through
#
# Module 06 will need each activation's derivative. Here is a preview, computed in the
# way module 06 *checks* derivatives: a central difference of your own function,
# $\phi'(x) \approx \frac{\phi(x + h) - \phi(x - h)}{2h}$, in float64. Note the shapes:
# sigmoid's derivative is at most 0.25 and tanh's at most 1, and both vanish for large
# $|x|$ (a saturated unit passes almost no gradient back); ReLU's is exactly 0 or 1;
# GELU's is smooth and negative for every $x$ below about $-0.75$ (most negative, about
# $-0.13$, near $x = -1.4$).

# %%
_x = np.linspace(-4, 4, 801)
_h = 1e-5
_fns = {"ReLU": relu, "LeakyReLU (0.1)": lambda t: leaky_relu(t, 0.1), "Sigmoid": sigmoid,
        "Tanh": tanh, "GELU": gelu, "GELU (tanh)": lambda t: gelu(t, approximate="tanh")}
fig, axes = plt.subplots(1, len(_fns), figsize=(16, 2.8), sharex=True)
for _ax, (_name, _f) in zip(axes, _fns.items()):
    _y = _f(Tensor(_x)).numpy()
    _dy = (_f(Tensor(_x + _h)).numpy() - _f(Tensor(_x - _h)).numpy()) / (2 * _h)
    _ax.axhline(0, color="0.8", lw=0.8)
    _ax.plot(_x, _y, lw=2, label="φ(x)")
    _ax.plot(_x, _dy, lw=2, ls="--", label="φ'(x)")
    _ax.set_title(_name, fontsize=9)
    _ax.set_ylim(-1.2, 1.6)  # tanh's negative half and GELU's dip below 0 show; ReLU and GELU leave the top
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 9. How PyTorch does it
#
# - `torch.nn.functional.relu/leaky_relu/sigmoid/tanh/gelu/softmax/log_softmax` have the
#   signatures you implemented (PyTorch's `softmax` also accepts `dim=None` with a
#   deprecation warning; we require `dim`). Each is one ATen operator with its own
#   derivative formula in `derivatives.yaml` — exactly our "one op, one backward rule".
# - PyTorch's CPU kernels are vectorised C++ (SIMD over 8 or 16 floats at once) and
#   multi-threaded; the sigmoid and tanh kernels use the same range tricks (Sleef or libm
#   implementations), softmax subtracts the max, and `log_softmax` uses log-sum-exp.
# - On GPUs, activations are usually **fused** into the preceding matmul's epilogue, so the
#   pre-activation never makes a round trip through memory: the memory-traffic argument
#   of section 8, taken to its end.
#
# If PyTorch is installed, compare (skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    _v = np.array([-1e4, -30.0, -3.0, -0.5, 0.0, 0.5, 3.0, 30.0, 1e4], dtype=np.float32)
    _tv = torch.tensor(_v)
    _pairs = {
        "relu": (relu(Tensor(_v)), torch.nn.functional.relu(_tv)),
        "leaky_relu": (leaky_relu(Tensor(_v)), torch.nn.functional.leaky_relu(_tv)),
        "sigmoid": (sigmoid(Tensor(_v)), torch.sigmoid(_tv)),
        "tanh": (tanh(Tensor(_v)), torch.tanh(_tv)),
        "gelu": (gelu(Tensor(_v)), torch.nn.functional.gelu(_tv)),
        "gelu tanh": (gelu(Tensor(_v), "tanh"), torch.nn.functional.gelu(_tv, approximate="tanh")),
        "softmax": (softmax(Tensor(_v), 0), torch.softmax(_tv, 0)),
        "log_softmax": (log_softmax(Tensor(_v), 0), torch.log_softmax(_tv, 0)),
    }
    for _name, (_ours, _theirs) in _pairs.items():
        _diff = np.max(np.abs(_ours.numpy() - _theirs.numpy()))
        print(f"{_name:12s} max |tinytorch - torch| = {_diff:.2e}")

# %% [markdown]
# ## 10. Recap
#
# - A network needs a **nonlinearity** between its linear layers, or it collapses into one
#   linear map.
# - The textbook formulas **overflow** (`exp` of a large number) or **cancel** (`1 - almost
#   1`). The stable forms: sigmoid branches on the sign so `exp` only sees non-positive
#   numbers; tanh uses `expm1(-2|x|)`; GELU uses `erfc` instead of `1 + erf`; softmax
#   subtracts each slice's own max (one max for the whole tensor underflows a low row to
#   `0/0`); **log-sum-exp** factors the max out of the sum; log-softmax shifts first,
#   then subtracts the log-sum-exp, and never takes `log` of a probability that may have
#   underflowed.
# - Each activation is **one op** through `apply` (`relu`, `leaky_relu` with
#   `negative_slope`, `sigmoid`, `tanh`, `gelu` with `approximate`, `softmax` and
#   `log_softmax` with `dim`), keeping the input's float dtype.
# - An activation's time is its passes over memory plus its arithmetic per element: ReLU
#   costs close to a copy; sigmoid and tanh add temporaries and a selection around a
#   vectorised `exp` (itself about as cheap as a copy on a modern numpy); the erf makes
#   exact GELU the costliest by far (the measured ratios to a copy say by how much on your
#   machine). Softmax makes three passes over its data (online softmax makes two).
#
# Run `tito test module 02` to check your work against the full test suite. Next, module 03
# builds layers: `Parameter`, `Module`, `Linear` and `Sequential`.

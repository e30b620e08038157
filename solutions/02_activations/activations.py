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
#   float32) and **cancellation** (`1 - 0.9999999` loses most of its digits), and rewrite a
#   formula to avoid them (branch on the sign, subtract the max, log-sum-exp, `expm1`,
#   `erfc`);
# - route each activation through `apply` as **one op** with the attributes its backward
#   rule will need in module 06;
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
# well gradients flow through it (module 06 and the derivative plot in section 7).
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
# ## 3. ReLU and LeakyReLU
#
# $$\mathrm{ReLU}(x) = \max(x, 0), \qquad
#   \mathrm{LeakyReLU}_\alpha(x) = \begin{cases} x & x > 0 \\ \alpha x & x \le 0 \end{cases}$$
#
# ReLU ("rectified linear unit") is the simplest possible nonlinearity, and the most used:
# it costs one comparison, and its gradient is exactly 1 for positive inputs, so it does
# not shrink gradients the way sigmoid and tanh do in deep stacks. Its weakness: a unit
# whose input is negative for every example gets gradient 0 forever (a "dead ReLU").
# LeakyReLU keeps a small slope $\alpha$ (PyTorch's default `negative_slope=0.01`) on the
# negative side so that gradient never vanishes completely.
#
# Neither can overflow: they only compare and multiply by a number at most 1 in size. Two
# details matter:
#
# - ReLU of an integer tensor stays an integer tensor (PyTorch allows it); `np.maximum(a, 0)`
#   keeps `a`'s dtype.
# - LeakyReLU uses the *input's* floating dtype (the provided `_float_array`), and its
#   condition is `x > 0`, as in PyTorch.
#
# Hint: `np.where(condition, a, b)` picks elementwise from two arrays.

# %% nbgrader={"grade": false, "grade_id": "relu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def relu(input):
    """max(input, 0) elementwise (PyTorch's torch.nn.functional.relu)."""
    _check_tensor(input, "relu")
    return apply("relu", _relu_forward, input)


def _relu_forward(x):
    """Forward of relu: a numpy array, same shape and dtype as x."""
    # Hint: one numpy call on x.numpy().
    ### BEGIN SOLUTION
    return np.maximum(x.numpy(), 0)
    ### END SOLUTION


def leaky_relu(input, negative_slope=0.01):
    """input where input > 0, else negative_slope * input (torch.nn.functional.leaky_relu)."""
    _check_tensor(input, "leaky_relu")
    return apply("leaky_relu", _leaky_relu_forward, input, negative_slope=float(negative_slope))


def _leaky_relu_forward(x, negative_slope):
    """Forward of leaky_relu: a floating numpy array (x's float dtype, ints -> float32)."""
    # Hint: a = _float_array(x); then np.where on a > 0. `negative_slope` is a Python float,
    # so multiplying keeps a's dtype.
    ### BEGIN SOLUTION
    a = _float_array(x)
    return np.where(a > 0, a, a * negative_slope)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-relu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.array([[-2.0, -0.5, 0.0], [0.5, 3.0, -1e4]], dtype=np.float32)
_r = relu(Tensor(_a))
np.testing.assert_array_equal(_r.numpy(), np.maximum(_a, 0))
assert _r.dtype == np.float32 and _r.shape == (2, 3)
assert relu(Tensor([-3, 4])).tolist() == [0, 4] and relu(Tensor([-3, 4])).dtype == np.int64
_l = leaky_relu(Tensor(_a))
np.testing.assert_allclose(_l.numpy(), np.where(_a > 0, _a, 0.01 * _a), rtol=1e-7)
assert _l.dtype == np.float32, f"leaky_relu must keep float32, got {_l.dtype}"
np.testing.assert_allclose(leaky_relu(Tensor(_a), negative_slope=0.2).numpy(), np.where(_a > 0, _a, 0.2 * _a))
assert leaky_relu(Tensor([-2, 2])).dtype == np.float32, "ints become float32"
_w = Tensor(_a, requires_grad=True)
assert relu(_w).grad_fn.op == "relu" and leaky_relu(_w, 0.1).grad_fn.attrs == {"negative_slope": 0.1}
print("✓ relu, leaky_relu")

# %% [markdown]
# ## 4. Sigmoid: branch on the sign
#
# $$\sigma(x) = \frac{1}{1 + e^{-x}}$$
#
# squashes any real number into $(0, 1)$: the probability of "yes" in binary
# classification, a gate in an LSTM. Where is the textbook formula unsafe?
#
# - For $x \ge 0$, $e^{-x} \in (0, 1]$: no problem. $\frac{1}{1 + e^{-x}}$ is safe.
# - For $x < 0$, $e^{-x} = e^{|x|}$ overflows once $|x| > 88.7$ (float32). The result
#   $1/(1+\infty) = 0$ happens to be right, but numpy warns about the overflow, and the
#   equivalent form $\frac{e^x}{1 + e^x}$ that people also write gives $\infty/\infty =
#   \text{nan}$ at large *positive* $x$.
#
# The fix: multiply numerator and denominator by $e^{x}$ when $x < 0$,
#
# $$\sigma(x) = \begin{cases} \dfrac{1}{1 + e^{-x}} & x \ge 0 \\[2mm]
#   \dfrac{e^{x}}{1 + e^{x}} & x < 0 \end{cases}$$
#
# so that the exponent is **never positive**. With $e = e^{-|x|}$, which lies in $(0, 1]$
# for every $x$, both branches are $\frac{1}{1+e}$ and $\frac{e}{1+e}$: compute `e` once for
# the whole array, then choose with `np.where`. (`np.where` evaluates both branches
# everywhere; that is fine here because neither branch can overflow.)

# %% nbgrader={"grade": false, "grade_id": "sigmoid", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def sigmoid(input):
    """1 / (1 + exp(-input)) elementwise, without overflow (torch.nn.functional.sigmoid)."""
    _check_tensor(input, "sigmoid")
    return apply("sigmoid", _sigmoid_forward, input)


def _sigmoid_forward(x):
    """Forward of sigmoid: never calls exp on a positive number."""
    # Hints: a = _float_array(x); e = np.exp(-np.abs(a)); then np.where(a >= 0, ..., ...).
    ### BEGIN SOLUTION
    a = _float_array(x)
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-sigmoid", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.linspace(-20, 20, 81)
np.testing.assert_allclose(sigmoid(Tensor(_a)).numpy(), 1 / (1 + np.exp(-_a)), rtol=1e-12)
with warnings.catch_warnings():
    warnings.simplefilter("error")  # an overflow warning from numpy fails this check
    _s = sigmoid(Tensor(np.array([-1e4, -100.0, 0.0, 100.0, 1e4], dtype=np.float32)))
assert _s.dtype == np.float32
assert _s.tolist() == [0.0, float(np.float32(1 / (1 + np.exp(100.0)))), 0.5, 1.0, 1.0], _s.tolist()
assert sigmoid(Tensor([0])).dtype == np.float32
print("✓ sigmoid")

# %% [markdown]
# ## 5. Tanh: one `expm1` instead of two `exp`s
#
# $$\tanh(x) = \frac{e^x - e^{-x}}{e^x + e^{-x}} = 2\sigma(2x) - 1$$
#
# Both textbook forms have a problem. The first overflows ($\infty/\infty$) for
# $|x| > 44$ in float32. The second is stable but **inaccurate near 0**: for $x = 10^{-8}$,
# $2\sigma(2x) = 1.00000002$, and subtracting 1 leaves only the last digit or two of
# the result — *catastrophic cancellation*, the second trap of floating point.
#
# Both are fixed by the same trick as the sigmoid plus one more tool. Since tanh is odd,
# compute it for $y = |x|$ and put the sign back. Dividing numerator and denominator by
# $e^{y}$,
#
# $$\tanh(y) = \frac{1 - e^{-2y}}{1 + e^{-2y}} = \frac{-m}{2 + m}, \qquad m = e^{-2y} - 1 = \texttt{expm1}(-2y).$$
#
# The exponent $-2y$ is never positive, so nothing overflows; and `np.expm1(z)` computes
# $e^z - 1$ *without* forming $e^z$ first, so it is accurate even for tiny $z$, where
# `np.exp(z) - 1` would cancel. (`np.tanh` does this kind of thing in C; here you see
# how.) The sign is restored with `np.sign(a)`, which also keeps $\tanh(0) = 0$.

# %% nbgrader={"grade": false, "grade_id": "tanh", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def tanh(input):
    """Hyperbolic tangent elementwise, stable and accurate near 0 (torch.nn.functional.tanh)."""
    _check_tensor(input, "tanh")
    return apply("tanh", _tanh_forward, input)


def _tanh_forward(x):
    """Forward of tanh: sign(a) * (-m) / (2 + m) with m = expm1(-2|a|)."""
    ### BEGIN SOLUTION
    a = _float_array(x)
    m = np.expm1(-2 * np.abs(a))
    return np.sign(a) * (-m / (2 + m))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-tanh", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_a = np.concatenate([np.linspace(-20, 20, 81), [1e-8, -1e-12, 0.0]])
np.testing.assert_allclose(tanh(Tensor(_a)).numpy(), np.tanh(_a), rtol=1e-14, atol=0)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    _t = tanh(Tensor(np.array([-1e4, -50.0, 0.0, 50.0, 1e4], dtype=np.float32)))
assert _t.dtype == np.float32 and _t.tolist() == [-1.0, -1.0, 0.0, 1.0, 1.0], _t.tolist()
print("✓ tanh")

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
#    and $1 + \mathrm{erf}$ keeps only one significant digit. The complementary error
#    function $\mathrm{erfc}(z) = 1 - \mathrm{erf}(z)$, computed directly, has no such
#    problem, and since erf is odd, $1 + \mathrm{erf}(z) = \mathrm{erfc}(-z)$:
#
# $$\mathrm{GELU}(x) = \frac{x}{2}\,\mathrm{erfc}\!\left(-\frac{x}{\sqrt 2}\right).$$
#
# (PyTorch's CPU kernel uses the `1 + erf` form, so for very negative inputs our values are
# the more accurate ones; both are far below float32's resolution.)
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


def _erf_parts(z):
    """(small, erf_small, erfc_abs) for a float64 array z: erf(z) where |z| <= 0.46875, and
    erfc(|z|) elsewhere. All three of Cody's ranges are evaluated everywhere (vectorised) and
    the right one is picked with np.where; warnings from the unused ones are silenced."""
    y = np.abs(z)
    with np.errstate(all="ignore"):
        zz = y * y  # |z| <= 0.46875: erf(z) = z * A(z^2) / B(z^2)
        num, den = _ERF_A[4] * zz, zz
        for a, b in zip(_ERF_A[:3], _ERF_B[:3]):
            num, den = (num + a) * zz, (den + b) * zz
        erf_small = z * (num + _ERF_A[3]) / (den + _ERF_B[3])
        num, den = _ERF_C[8] * y, y  # 0.46875 < |z| <= 4: erfc(|z|) = exp(-z^2) C(|z|) / D(|z|)
        for c, d in zip(_ERF_C[:7], _ERF_D[:7]):
            num, den = (num + c) * y, (den + d) * y
        r_mid = (num + _ERF_C[7]) / (den + _ERF_D[7])
        w = 1.0 / zz  # |z| > 4: erfc(|z|) = exp(-z^2) / |z| * (1/sqrt(pi) - w P(w) / Q(w))
        num, den = _ERF_P[5] * w, w
        for p, q in zip(_ERF_P[:4], _ERF_Q[:4]):
            num, den = (num + p) * w, (den + q) * w
        r_big = (_RSQRTPI - w * (num + _ERF_P[4]) / (den + _ERF_Q[4])) / y
        r = np.where(y <= 4.0, r_mid, r_big)
        hi = np.trunc(y * 16.0) / 16.0  # exp(-y^2) = exp(-hi^2) exp(-(y-hi)(y+hi)), exact split
        erfc_abs = np.where(np.isinf(y), 0.0, np.exp(-hi * hi) * np.exp(-(y - hi) * (y + hi)) * r)
    return y <= 0.46875, erf_small, erfc_abs


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
# Now GELU. The wrapper checks `approximate` and records it. In your forward:
#
# - compute in float64 (`a.astype(np.float64)`), because `_erfc` works in float64, and cast
#   the result back to the input's float dtype at the end (`.astype(a.dtype)`);
# - `"none"`: $\frac{x}{2}\,\mathrm{erfc}(-x/\sqrt 2)$ with `_erfc`;
# - `"tanh"`: the formula above with `np.tanh`.
#
# (Computing in float64 doubles the temporary memory for float32 inputs; the systems look
# in section 8 shows what GELU costs compared with ReLU.)

# %% nbgrader={"grade": false, "grade_id": "gelu", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def gelu(input, approximate="none"):
    """x * Phi(x) elementwise; approximate="tanh" uses the tanh formula (torch.nn.functional.gelu)."""
    _check_tensor(input, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply("gelu", _gelu_forward, input, approximate=approximate)


def _gelu_forward(x, approximate):
    """Forward of gelu: computed in float64, returned in x's float dtype (ints -> float32)."""
    ### BEGIN SOLUTION
    a = _float_array(x)
    v = a.astype(np.float64)
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v)
        out = 0.5 * v * (1.0 + np.tanh(inner))
    else:
        out = 0.5 * v * _erfc(-v / math.sqrt(2.0))
    return out.astype(a.dtype)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-gelu", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_a = np.linspace(-6, 6, 121)
_exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in _a])
np.testing.assert_allclose(gelu(Tensor(_a)).numpy(), _exact, rtol=1e-13, atol=1e-300)
_approx = 0.5 * _a * (1 + np.tanh(math.sqrt(2 / math.pi) * (_a + 0.044715 * _a ** 3)))
np.testing.assert_allclose(gelu(Tensor(_a), approximate="tanh").numpy(), _approx, rtol=1e-12, atol=1e-15)
_big = Tensor(np.array([-1e4, 0.0, 1e4], dtype=np.float32))
assert gelu(_big).dtype == np.float32 and gelu(_big).tolist() == [0.0, 0.0, 1e4]
assert gelu(_big, approximate="tanh").tolist() == [0.0, 0.0, 1e4]
assert gelu(Tensor([1.0], requires_grad=True), "tanh").grad_fn.attrs == {"approximate": "tanh"}
print("✓ gelu")

# %% [markdown]
# ## 7. Softmax and LogSoftmax: subtract the max, log-sum-exp
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
# Choose $c = \max_j x_j$. Then every exponent $x_j - c \le 0$, so every $e^{x_j - c}$ lies in
# $(0, 1]$: no overflow. And the largest term is exactly $e^0 = 1$, so the sum is at least
# 1: no division by zero, and no `0/0` even when all other terms underflow.
#
# **LogSoftmax** is the log of that, and must *not* be computed as `log(softmax(x))`: when a
# probability underflows to 0, its log is `-inf`, although the true value (say $-2000$) is
# a perfectly ordinary number. Take the log of the stable form instead:
#
# $$\log \mathrm{softmax}(x)_i = (x_i - c) - \log\sum_j e^{x_j - c}, \qquad c = \max_j x_j,$$
#
# the **log-sum-exp** trick. The sum is in $[1, n]$, so its log is in $[0, \log n]$, and
# $(x_i - c)$ is exact. Module 04's cross-entropy loss is built on this function.
#
# In numpy: reduce along `axis=dim` with `keepdims=True`, so the max and the sum keep a
# size-1 dimension and broadcast back against `a` (module 01, section 8). The wrapper has
# already turned `dim` into a non-negative int.

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
    """Forward of softmax: subtract the max along dim, exponentiate, normalise."""
    # Hints: a = _float_array(x); m = a.max(axis=dim, keepdims=True); e = np.exp(a - m);
    # divide e by its sum along dim (keepdims=True).
    ### BEGIN SOLUTION
    a = _float_array(x)
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)
    ### END SOLUTION


def log_softmax(input, dim, dtype=None):
    """log(softmax(x)) computed with log-sum-exp (torch.nn.functional.log_softmax)."""
    input, d = _softmax_args(input, dim, dtype, "log_softmax")
    if input.ndim == 0:
        return log_softmax(input.reshape(1), 0).reshape(())
    return apply("log_softmax", _log_softmax_forward, input, dim=d)


def _log_softmax_forward(x, dim):
    """Forward of log_softmax: (x - max) - log(sum(exp(x - max)))."""
    ### BEGIN SOLUTION
    a = _float_array(x)
    shifted = a - a.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-softmax", "locked": true, "points": 4, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
_a = _rng.standard_normal((3, 4, 5))
for _d in [0, 1, 2, -1]:
    _e = np.exp(_a)
    _ref = _e / _e.sum(axis=_d, keepdims=True)
    np.testing.assert_allclose(softmax(Tensor(_a), dim=_d).numpy(), _ref, rtol=1e-12)
    np.testing.assert_allclose(log_softmax(Tensor(_a), _d).numpy(), np.log(_ref), rtol=1e-12, atol=1e-14)
_big = np.array([[1e4, -1e4, 0.0], [1000.0, 1000.0, 1000.0]], dtype=np.float32)
with warnings.catch_warnings():
    warnings.simplefilter("error")
    _s = softmax(Tensor(_big), dim=1)
    _ls = log_softmax(Tensor(_big), dim=1)
assert _s.dtype == np.float32 and _ls.dtype == np.float32
np.testing.assert_allclose(_s.numpy(), [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)
np.testing.assert_allclose(_ls.numpy(), [[0, -2e4, -1e4], [-np.log(3)] * 3], rtol=1e-6)
_w = Tensor(_a, requires_grad=True)
assert softmax(_w, -1).grad_fn.attrs == {"dim": 2} and log_softmax(_w, -2).grad_fn.op == "log_softmax"
print("✓ softmax, log_softmax")
### BEGIN HIDDEN TESTS
_x = _rng.standard_normal((2, 6)).astype(np.float32) * 50
np.testing.assert_allclose(softmax(Tensor(_x + 1000), dim=1).numpy(), softmax(Tensor(_x), dim=1).numpy(),
                           rtol=1e-4, atol=1e-7)
np.testing.assert_allclose(softmax(Tensor(_a), 0).numpy().sum(axis=0), 1.0, rtol=1e-12)
### END HIDDEN TESTS

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
# Let us measure every activation on a float32 tensor of 4 million elements (16 MiB, bigger
# than the CPU caches) and report nanoseconds per element and the effective bandwidth
# (8 bytes per element divided by the time). These are *your* machine's numbers.

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

# %% [markdown]
# What to read in these numbers (yours will differ in size, rarely in order):
#
# - ReLU is the cheapest, close to a copy: `np.maximum` streams through memory once and
#   does one comparison per element.
# - LeakyReLU already costs more: `np.where(a > 0, a, a * slope)` first builds two
#   temporaries (the boolean mask and `a * slope`), so it makes three passes over memory
#   instead of one.
# - Sigmoid and tanh evaluate a transcendental function (`exp`, `expm1`) per element and
#   build several temporaries, each a full pass over memory.
# - The exact GELU is the most expensive: float64 temporaries (twice the bytes), and
#   Cody's polynomials evaluated for all three ranges before `np.where` picks one. This is
#   why fused GELU kernels exist, and why the tanh approximation was popular. In a real
#   network the activations are still cheap next to the matrix products around them
#   (module 03 measures a Linear layer's FLOPs), but they are not free.
#
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
# (module 12's fast cousin) is built on that idea. We can measure the passes one by one in
# numpy:

# %%
_rows = _big.numpy().reshape(-1, 1024)
_t_max = median_time(lambda: _rows.max(axis=1, keepdims=True))
_m = _rows.max(axis=1, keepdims=True)
_t_exp = median_time(lambda: np.exp(_rows - _m).sum(axis=1))
_e = np.exp(_rows - _m)
_s = _e.sum(axis=1, keepdims=True)
_t_div = median_time(lambda: _e / _s)
print(f"pass 1 (max): {_t_max * 1e3:.2f} ms, pass 2 (exp and sum): {_t_exp * 1e3:.2f} ms, "
      f"pass 3 (divide): {_t_div * 1e3:.2f} ms; total {(_t_max + _t_exp + _t_div) * 1e3:.2f} ms; "
      f"tinytorch softmax: {_times['softmax'] * 1e3:.2f} ms")

# %% [markdown]
# ### Derivatives: how much gradient gets through
#
# Module 06 will need each activation's derivative. Here is a preview, computed in the
# way module 06 *checks* derivatives: a central difference of your own function,
# $\phi'(x) \approx \frac{\phi(x + h) - \phi(x - h)}{2h}$, in float64. Note the shapes:
# sigmoid's derivative is at most 0.25 and tanh's at most 1, and both vanish for large
# $|x|$ (a saturated unit passes almost no gradient back); ReLU's is exactly 0 or 1;
# GELU's is smooth and slightly negative for $x \approx -1$ to $-2$.

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
#   subtracts the row max; log-softmax uses **log-sum-exp** and never takes `log` of a
#   probability that may have underflowed.
# - Each activation is **one op** through `apply` (`relu`, `leaky_relu` with
#   `negative_slope`, `sigmoid`, `tanh`, `gelu` with `approximate`, `softmax` and
#   `log_softmax` with `dim`), keeping the input's float dtype.
# - Activations are **memory-bound**: time ≈ bytes moved; softmax makes three passes over
#   its data (online softmax makes two).
#
# Run `tito test module 02` to check your work against the full test suite. Next, module 03
# builds layers: `Parameter`, `Module`, `Linear` and `Sequential`.

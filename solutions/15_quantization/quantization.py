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
# # Module 15 — Quantization: int8 weights, int32 accumulators
#
# A trained network stores every weight as a 32-bit float. Most of those bits are noise:
# the digits MLP of module 08 classifies just as well when each weight is one of 256
# levels. **Quantization** stores weights (and computes with activations) as small
# integers plus a scale: 4x less memory, 4x less memory traffic, and on hardware with
# integer vector units (every phone, every recent CPU and GPU) faster arithmetic. This
# module builds the whole int8 path, the way `torch.ao.quantization` and the integer
# kernels underneath it do, and measures what it costs in accuracy and what it buys in
# bytes and time — on this machine.
#
# Most of what you write here you first **derive**: the notebook gives the definition of
# a quantized number and the conditions a good grid must meet, and you work out the
# formulas; the check cells (and PyTorch's own values) tell you whether you got them right.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - derive a grid's **scale** and **zero point** from a float range and the conditions
#   it must meet, in the **affine** (asymmetric) and **symmetric** schemes, and say why the
#   range must contain 0;
# - **quantize** (the inverse of the grid's definition, saturated) and **dequantize**, with
#   an error of at most half a step inside the range, **per tensor** and **per channel**;
# - **calibrate** the ranges from data with observers (`MinMaxObserver`, a percentile
#   observer) and explain when clipping outliers wins; design the search of a
#   **histogram observer** that picks the range of least estimated error, fast enough for
#   two million candidate ranges;
# - derive the integer core of a quantized `Linear`: expand the zero points out of the
#   sum so that the only large piece of work is an int8 × int8 matrix product in **int32
#   accumulators**, plus cheap **correction terms**;
# - **requantize** those accumulators to the next layer's int8 with an integer
#   **fixed-point multiplier** and a rounding shift, then design the integer-only layer
#   (where the bias goes, what the ReLU becomes) and run the digits MLP with integer
#   arithmetic between its layers;
# - quantize a trained model (`quantize_model`: observe, calibrate, swap each `Linear` for a
#   `QuantizedLinear` that stores a real `int8` array) and report the accuracy drop;
# - derive the **noise** that rounding adds and the signal-to-noise ratio it predicts per
#   bit, and fold a **batch norm** into the convolution before it, as deployment does
#   before quantizing a CNN, then quantize the **convolution** itself (im2col around your
#   integer product: what must the padding be?);
# - write **fake quantization** with a **straight-through** gradient and fine-tune a model
#   *quantization-aware*, and compare it with post-training quantization;
# - store weights in **4 bits**, two per byte, with a scale per group, as language models
#   ship them.
#
# ## Prerequisites
#
# Modules 01-08: `Tensor` (01), `Module`, `Linear`, `Sequential`, `ReLU` (03),
# `CrossEntropyLoss` (04), `Digits`, `DataLoader`, `TensorDataset` (05), `Function` and
# `no_grad` (06), `Adam` (07), `fit`, `evaluate`, `Dropout` (08). Module 09's `Conv2d` for
# the CNN at the end.
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/ao/quantization.py` when you run `tito export 15`
# (or `tito test module 15`); it mirrors `torch.ao.quantization`, and `tinytorch.ao` imports
# it. Fill in the cells with `# YOUR CODE HERE`, then run the check cell below each.

# %%
#| default_exp ao.quantization

# %%
import copy
import functools
import itertools
import io
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch
from tinytorch import Tensor, nn
from tinytorch.utils.optional import optional_torch
from tinytorch.utils.timing import median_time

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: a float range on an integer grid
#
# An int8 holds one of 256 values, $-128 \dots 127$. To store a real number $x$ we lay an
# evenly spaced grid of points over the real line, one point per integer, and keep the
# **integer** $q$ of the point nearest to $x$. Two numbers describe the grid:
#
# - the **scale** $s > 0$, the distance between neighbouring points (a float);
# - the **zero point** $z$, the integer whose point is the real number $0$.
#
# So the integer $q$ **stands for** the real number
#
# $$\hat x = s\,(q - z) \qquad \text{(the dequantized value).}$$
#
# That is the whole definition; the rest of this module is derived from it. The integers
# run from $q_{min}$ to $q_{max}$ ($-128$ and $127$ for int8; $-8$ and $7$ for 4 bits), so
# the grid has $q_{max} - q_{min}$ steps, and its end points stand for $s(q_{min} - z)$ and
# $s(q_{max} - z)$. Between them, keeping the nearest point moves $x$ by at most half a
# step, $|x - \hat x| \le s/2$. Beyond them the nearest point is the end itself (the integer
# **saturates**), and the error grows without bound: choosing $s$ and $z$ is choosing
# between fine steps and clipped outliers.
#
# **A worked example** on 3 bits (integers $-4 \dots 3$; the picture below): take
# $s = 0.25$ and $z = -2$. The integer $-4$ stands for $0.25 \cdot (-4 + 2) = -0.5$, the
# integer $3$ for $1.25$, and $-2$ for exactly $0$, so this grid covers $[-0.5, 1.25]$ in 7
# steps. The number $0.3$ is stored as $q = -1$ (which stands for $0.25$, the nearest
# point), and $2.0$ as $q = 3$ (saturated: it comes back as $1.25$).
#
# Two families of grids are in use. Both keep $0$ **exactly** on the grid (some integer
# stands for it): zero padding, ReLU's zeros and dropped units must come back as exact
# zeros, or every "zero" would carry a small bias into the next layer.
#
# - **affine** (asymmetric): any integer of the range may be the zero point, so the grid
#   can slide to fit any range. Activations after a ReLU are never negative: an affine
#   grid spends all 256 levels on $[0, \max x]$.
# - **symmetric**: the zero point is always $0$, the grid centred on the real $0$. Weights
#   are roughly symmetric around 0 anyway, and section 6 shows what a zero point of 0
#   saves in the integer matmul.

# %%
def draw_grid(ax_map, ax_err, s=0.25, z=-2, qmin=-4, qmax=3):
    """The grid of a scale and zero point: what each x is stored as (the nearest grid point,
    found by brute force over all of them) and the error of storing it."""
    points = s * (np.arange(qmin, qmax + 1) - z)              # what each integer stands for
    lo, hi = points[0], points[-1]
    x = np.linspace(lo - 0.5, hi + 0.5, 2001)
    xh = points[np.abs(x[:, None] - points[None, :]).argmin(axis=1)]
    ax_map.plot(x, x, color="gray", lw=0.8, ls=":", label="x (no quantization)")
    ax_map.plot(x, xh, color="C0", lw=1.6, label="the grid point stored for x")
    ax_map.axvspan(lo, hi, color="C2", alpha=0.08, label="what the grid covers")
    for q, p in zip(range(qmin, qmax + 1), points):
        ax_map.annotate(f"q={q}", (p, p), textcoords="offset points", xytext=(-28, 6), fontsize=7, color="C0")
    ax_map.set_title(f"3-bit grid: scale {s}, zero point {z}", fontsize=10)
    ax_map.set_xlabel("x")
    ax_map.set_ylabel("x̂")
    ax_map.legend(fontsize=7, loc="upper left")
    ax_err.plot(x, xh - x, color="C3", lw=1)
    ax_err.axhline(s / 2, color="gray", ls="--", lw=0.8)
    ax_err.axhline(-s / 2, color="gray", ls="--", lw=0.8)
    ax_err.text(lo, s / 2 * 1.15, "± s/2", fontsize=8, color="gray")
    ax_err.axvspan(lo, hi, color="C2", alpha=0.08)
    ax_err.set_ylim(-3 * s, 3 * s)
    ax_err.set_title("error x̂ - x: a sawtooth inside, growing outside (saturation)", fontsize=10)
    ax_err.set_xlabel("x")


fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
draw_grid(ax1, ax2)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. Scale and zero point from a range: derive them
#
# Section 1 went from a grid to the range it covers. A quantizer needs the other
# direction: it observes a range $[\alpha, \beta]$ (a tensor's minimum and maximum) and
# must choose $s$ and $z$ for the integers $q_{min} \dots q_{max}$. Write
# `_calculate_qparams`, which does that for both schemes. What the grid must satisfy:
#
# 1. **Zero is a grid point**: $z$ is an integer, and one the grid has,
#    $q_{min} \le z \le q_{max}$. (What does that demand of a range such as $[0.5, 2]$?)
# 2. **Affine: the grid spans the range.** Its $q_{max} - q_{min}$ steps cover exactly the
#    width of the range (of the range after whatever condition 1 forces on it), anchored at the
#    low end: $q_{min}$ stands for $\alpha$, as nearly as condition 1 allows. (PyTorch
#    anchors there; anchoring at $\beta$ can round differently.)
# 3. **Symmetric: $z = 0$, and the grid is as wide as the range made symmetric**: with
#    $m$ the larger of the range's two magnitudes, the grid's full width, all
#    $q_{max} - q_{min}$ steps, is the width of $[-m, m]$ (PyTorch's convention).
#
# Conditions 1 and 2 pull against each other when the real 0 does not fall on a point of
# the grid that condition 2 asks for. Something must be rounded, and what you round
# decides which condition holds exactly and which only to within half a step.
#
# **A worked example, for a different integer range** (unsigned 4 bits, $0 \dots 15$): the
# range $[-0.3, 1.2]$ is 1.5 wide, and 15 steps across it make $s = 0.1$. The integer 0
# stands for $-0.3$, so the real 0 is three steps higher: $z = 3$. Now take
# $[-0.26, 1.24]$: again 1.5 wide and $s = 0.1$, but with the integer 0 at $-0.26$ the real
# 0 would sit 2.6 steps up, which is no integer. Rounded, $z = 3$: zero is exact, and the
# grid now covers $[-0.3, 1.2]$, 0.04 below the range; each end of the range is within half
# a step of the grid's end.
#
# Derive the general rule, for any $q_{min}$ and for ranges that do not contain 0, then
# write it for numpy arrays (one entry for a tensor, or one per channel as in section 4).
# The check below tests the conditions and compares with PyTorch's values. Two numerical
# details decide whether you match PyTorch bit for bit:
#
# - compute in **float32** (the inputs arrive as float32, and numpy keeps them so when you
#   combine them with Python ints and floats), and never let the scale fall below float32's
#   machine epsilon `EPS`: an all-zero range would otherwise get a scale of 0;
# - the zero point is an int64 inside $[q_{min}, q_{max}]$ (PyTorch clamps it there).
#
# <details><summary>Hint 1</summary>
#
# Condition 1 needs 0 inside the grid. What does that say about the range the grid is
# fitted to, when the observed range is $[0.5, 2]$, or $[-4, -0.25]$? Whatever you do to
# the range must work on one entry and on one entry per channel alike, without a loop.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Condition 2 is two equations in the two unknowns: what $q_{min}$ and $q_{max}$ stand for,
# by section 1's definition. One combination of them does not involve $z$ at all. The
# other gives $z$ as a real number; in the worked example, which quantity was rounded, and
# which condition did that keep exact? (PyTorch rounds half to even.)
# </details>
#
# <details><summary>Hint 3</summary>
#
# Symmetric: with $z = 0$ fixed, only the width condition is left, and it fixes $s$ the
# way condition 2 did. For int8, count how many steps from 0 the magnitude $m$ lands:
# a fraction past the last positive integer is fine, since it is within half a step.
# </details>

# %% nbgrader={"grade": false, "grade_id": "calculate-qparams", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
"""Quantization (module 15): int8 affine and symmetric quantization, per tensor and per
channel; observers that calibrate ranges from data; QuantizedLinear with int8 weights and
int32 accumulation; requantization with a fixed-point multiplier; fake quantization with a
straight-through gradient; quantize_model (post-training quantization) and
prepare_qat/convert (quantization-aware training). Mirrors torch.ao.quantization."""
import copy
from collections import namedtuple

import numpy as np

from tinytorch._tensor import Tensor
from tinytorch.autograd import Function, no_grad
from tinytorch.nn.layers import Linear, Module

__all__ = [
    "per_tensor_affine", "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
    "QTensor", "quantize_per_tensor", "quantize_per_channel", "dequantize",
    "MinMaxObserver", "PerChannelMinMaxObserver", "PercentileObserver", "HistogramObserver",
    "QConfig", "default_qconfig", "QuantizedLinear", "ObservedLinear",
    "QuantizedConv2d", "FakeQuantizeFunction", "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
    "FakeQuantize", "disable_observer", "enable_observer", "QATLinear", "quantize_model", "prepare_qat", "convert",
    "pack_int4", "unpack_int4", "quantize_per_group", "dequantize_per_group", "Int4WeightOnlyLinear",
    "quantize_weights_int4",
]

# The quantization schemes, named as torch's (torch.per_tensor_affine, ...).
per_tensor_affine = "per_tensor_affine"
per_tensor_symmetric = "per_tensor_symmetric"
per_channel_affine = "per_channel_affine"
per_channel_symmetric = "per_channel_symmetric"
_SCHEMES = (per_tensor_affine, per_tensor_symmetric, per_channel_affine, per_channel_symmetric)

QINT8_MIN, QINT8_MAX = -128, 127       # torch.qint8's range
EPS = np.finfo(np.float32).eps         # the smallest scale an observer returns (as torch's)


def _calculate_qparams(min_val, max_val, symmetric, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """Scale and zero point of the integer grid for the range [min_val, max_val].

    Contract: min_val, max_val float32 numpy arrays of one shape (0-d for a tensor, (C,)
    per channel); quant_min < quant_max ints. Returns (scale, zero_point): a float32 and an
    int64 numpy array, both of that shape, such that for every entry
    - 0.0 is exactly a grid point: zero_point is an integer in [quant_min, quant_max];
    - affine (symmetric=False): the grid's quant_max - quant_min steps cover every value
      the grid must represent and no more (its end integers stand for values within half
      a step of the lowest and highest of them; anchored at the lowest);
    - symmetric: zero_point is 0, and the grid is the narrowest one centred on 0 that
      covers what it must;
    - scale >= EPS (an all-zero range gets exactly EPS, and the zero point of that scale).
    The values equal, bit for bit, what PyTorch's MinMaxObserver / PerChannelMinMaxObserver
    return from calculate_qparams() for the same range, scheme and integer range.
    Raises ValueError when any min_val exceeds its max_val; the message names min_val and
    max_val and shows both.
    """
    # Idea: two unknowns, s and z; the grid's conditions pin them down.
    ### BEGIN SOLUTION
    if np.any(min_val > max_val):
        raise ValueError(f"min_val must not exceed max_val, got min_val={min_val} and max_val={max_val}")
    lo = np.minimum(min_val, 0.0)
    hi = np.maximum(max_val, 0.0)
    if symmetric:
        scale = np.maximum(-lo, hi) / ((quant_max - quant_min) / 2)
    else:
        scale = (hi - lo) / (quant_max - quant_min)
    scale = np.maximum(scale, EPS).astype(np.float32)
    if symmetric:
        zero_point = np.zeros(scale.shape, dtype=np.int64)
    else:
        zero_point = np.clip(quant_min - np.round(lo / scale), quant_min, quant_max).astype(np.int64)
    return scale, zero_point
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-calculate-qparams", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state, spied

_f = lambda v: np.asarray(v, dtype=np.float32)  # noqa: E731


def _check_grid(lo, hi, symmetric, quant_min, quant_max, torch_scale, torch_zero_point):
    """The contract's conditions for one range, against the grid PyTorch builds for it;
    returns (scale, zero point) as numpy values."""
    name = f"{'symmetric' if symmetric else 'affine'} [{lo}, {hi}] on {quant_min}..{quant_max}"
    s, z = _calculate_qparams(_f(lo), _f(hi), symmetric, quant_min, quant_max)
    assert_equal((np.asarray(s).dtype, np.asarray(z).dtype), (np.dtype(np.float32), np.dtype(np.int64)),
                 f"{name}: dtypes of (scale, zero point)")
    check(quant_min <= int(z) <= quant_max, f"{name}: 0.0 is a grid point, so the zero point is one of the integers",
          got=int(z), expected=f"in [{quant_min}, {quant_max}]")
    if symmetric:
        assert_equal(int(z), 0, f"{name}: zero point")
    ends = (float(s) * (quant_min - int(z)), float(s) * (quant_max - int(z)))  # what the end integers stand for
    theirs = (torch_scale * (quant_min - torch_zero_point), torch_scale * (quant_max - torch_zero_point))
    assert_close(ends[1] - ends[0], theirs[1] - theirs[0], rtol=1e-6, atol=0,
                 what=f"{name}: the width of the grid (what its {quant_max - quant_min} steps span), against "
                 f"PyTorch's grid for this range, which reaches {theirs[0]:.4g} .. {theirs[1]:.4g}")
    steps = (ends[0] - theirs[0]) / torch_scale  # a grid of the right width, shifted by this many steps
    ratio = lo / torch_scale
    tie = f": here min / scale is exactly {ratio:g}, halfway" if (2 * ratio).is_integer() and not ratio.is_integer() else ""
    check(max(abs(ends[0] - theirs[0]), abs(ends[1] - theirs[1])) <= torch_scale / 2 * (1 + 1e-5),
          f"{name}: the end integers stand for the values PyTorch's grid reaches, within half a step; yours is "
          f"PyTorch's grid shifted by {steps:+.3g} steps, so your zero point is off by {-steps:+.3g} (rounded from "
          f"the other end of the range, or by another tie rule{tie})", got=ends, expected=theirs)
    return s, z


# (range, symmetric, integer range) -> PyTorch's (scale, zero point), from its observers
_TORCH_QPARAMS = [((-1.0, 3.0), False, (-128, 127), 0.015686275, -64),
                  ((0.5, 2.0), False, (-128, 127), 0.007843138, -128),
                  ((-4.0, -0.25), False, (-128, 127), 0.015686275, 127),
                  ((-0.26, 1.24), False, (-128, 127), 0.005882353, -84),
                  ((-3.0, 1.0), True, (-128, 127), 0.023529412, 0),
                  ((-4.0, -0.25), True, (-128, 127), 0.03137255, 0),
                  ((-0.3, 1.7), False, (-8, 7), 0.13333334, -6),
                  ((-0.3, 1.7), True, (-8, 7), 0.22666667, 0),
                  ((-0.6, 1.7), False, (-128, 127), 0.009019609, -61),   # float64 arithmetic puts these
                  ((-0.35, 0.65), False, (-8, 7), 0.06666667, -3),         # scales off in their last bit
                  ((-0.375, 3.375), False, (-8, 7), 0.25, -6)]             # min / scale = -1.5 exactly: a tie
for (_lo, _hi), _sym, (_qmin, _qmax), _ts, _tz in _TORCH_QPARAMS:
    _s, _z = _check_grid(_lo, _hi, _sym, _qmin, _qmax, float(np.float32(_ts)), _tz)
    assert_equal((float(_s), int(_z)), (float(np.float32(_ts)), _tz),
                 f"{'symmetric' if _sym else 'affine'} [{_lo}, {_hi}] on {_qmin}..{_qmax}: (scale, zero point) "
                 f"equal to PyTorch's, bit for bit (a scale off in its last bit usually means some of the "
                 f"arithmetic ran in float64; a zero point off by one, that it was rounded from the other end "
                 f"of the range or by another tie rule: in the last case min / scale is exactly -1.5)")
_s, _z = _calculate_qparams(_f([-2.0, -2.0, 0.0]), _f([1.0, 8.0, 0.0]), symmetric=False)
assert_equal(_s, _f([0.011764706, 0.039215688, EPS]),
             "per-channel scales (PyTorch's); the all-zero channel gets the floor EPS, not 0")
assert_equal(_z, np.array([42, -77, -128]), "per-channel zero points (PyTorch's), with the all-zero channel's at q_min")
assert_equal((_s.dtype, _z.dtype), (np.dtype(np.float32), np.dtype(np.int64)), "per-channel dtypes (float32, int64)")
_s, _z = _calculate_qparams(_f([0.0, -1.0]), _f([0.0, 1.0]), symmetric=True)
assert_equal((_s[0], int(_z[0])), (_f(EPS), 0), "symmetric, an all-zero channel: the scale is floored at EPS too "
             "(a scale of 0 would divide by zero in _quantize), and the zero point stays 0")
_s, _z = _calculate_qparams(_f(-1e-9), _f(1e-8), symmetric=False)
assert_equal((float(_s), int(_z)), (float(np.float32(EPS)), -128),
             "affine [-1e-9, 1e-8], a range narrower than EPS steps: (scale, zero point), PyTorch's. The scale is "
             "floored at EPS, and the zero point must be the one of that floored scale (0.0 on the grid you return)")
assert_raises(ValueError, _calculate_qparams, _f(2.0), _f(1.0), False, match=r"min_val.*2\.0.*max_val.*1\.0",
              what="min 2.0 above max 1.0: the message names min_val and max_val and shows both")
print(f"✓ _calculate_qparams; [-1, 3] in int8: scale {float(_TORCH_QPARAMS[0][3]):.6f}, zero point -64")

# %% [markdown]
# ## 3. Quantize and dequantize
#
# `_dequantize` is section 1's definition, on numpy arrays. `_quantize` goes the other way:
# for each $x$ it finds the integer whose grid point is nearest to $x$, among the integers
# the grid has. Derive it from the definition. Three requirements of the contract decide
# whether your integers equal PyTorch's bit for bit; each is behaviour to match:
#
# - **ties.** Halfway between two grid points, the integer kept is the one whose number of
#   steps from the real 0, $q - z$, is even (C's `nearbyint`, which PyTorch uses).
# - **PyTorch's arithmetic**, a convention to copy, not to derive: quantizing touches every
#   activation of every layer, and a float division costs more than a multiplication, so
#   PyTorch's kernel divides once per scale and multiplies every $x$ by the float32
#   reciprocal $1/s$. In exact arithmetic that is the same as $x / s$; in float32 it is
#   not, and near a tie the last bit decides the rounding: $2.25 / 0.3 = 7.5$ exactly, and
#   for it and four other values in the check (with $z = 0$) PyTorch's integers are 8,
#   -8, 13, 28 and 54, where `np.round(x / s)` gives 7, -7, 12, 27 and 55. It matters
#   beyond them: a symmetric grid puts the largest weight of each row exactly on a tie
#   (section 2).
# - **saturation.** A value beyond the grid gets the grid's end integer, never a wrapped-around one.
#
# **A worked example of the tie rule**, on another grid than the check's: step $s = 0.25$,
# zero point $z = -3$. The value $x = 0.375$ is 1.5 steps above the real 0, halfway
# between the points 1 and 2 steps up, the integers $q = -2$ and $q = -1$. The rule keeps
# the even count, 2 steps: $q = -1$ (which stands for $0.5$). The value $x = -0.125$, half
# a step below 0, keeps 0 steps: $q = -3$.
#
# `scale` and `zero_point` are numbers or arrays that broadcast against `x` (section 4
# uses that for one scale per channel). `_quantize` returns a real `int8` array;
# `_dequantize` returns float32, for any integers and zero points in int8's range.
#
# <details><summary>Hint 1</summary>
#
# Section 1's definition gives $\hat x$ from $q$. Turn it around: which real number $q$
# would make $\hat x$ equal to $x$ exactly? Why does the grid point nearest to $x$ belong
# to the integer nearest to that number?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The tie rule speaks of $q - z$, not of $q$, and with an odd $z$ the two have different
# parities. Redo the worked example by hand, rounding at different moments: which one
# gives $q = -1$? (numpy's `np.round` rounds half to even, whatever you hand it.)
# </details>
#
# <details><summary>Hint 3</summary>
#
# Ask numpy two questions before you rely on it: what is
# `np.array([300.0]).astype(np.int8)`, and what is `np.int8(127) - np.int8(-128)`?
# </details>
#
# <details><summary>The approach</summary>
#
# Each requirement belongs to one quantity. The tie rule is about the number of steps from
# the real 0, so that number, computed the way PyTorch computes it, is the one that is
# rounded; the zero point and the grid's ends belong to the integer axis, and the end
# integers must be what is finally stored, whatever numpy's casts would make of a value
# beyond them. Dequantizing has one trap of its own: for int8 $q$ and $z$, $q - z$ can be
# as large as 255 in magnitude, so it matters in which dtype that difference is computed.
# </details>

# %% nbgrader={"grade": false, "grade_id": "quantize", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _quantize(x, scale, zero_point, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """Contract: x a float numpy array; scale (> 0) and zero_point numbers, or arrays that
    broadcast against x (one per channel, or even one per element); quant_min < quant_max
    within int8's range. Returns an int8 numpy array of x's shape: for each x, the integer
    q in [quant_min, quant_max] whose grid point scale * (q - zero_point) is nearest x;
    halfway between two grid points, the one with q - zero_point even; beyond the grid,
    its end integer (saturated, never wrapped around). The integers equal PyTorch's
    (torch.quantize_per_tensor / quantize_per_channel) bit for bit, including the float32
    near-ties where PyTorch's arithmetic and a true division x / scale round apart."""
    # Idea: invert the grid's definition, then keep the nearest integer the grid has.
    ### BEGIN SOLUTION
    inv_scale = np.float32(1.0) / np.asarray(scale, dtype=np.float32)
    q = np.round(x * inv_scale) + zero_point
    return np.clip(q, quant_min, quant_max).astype(np.int8)
    ### END SOLUTION


def _dequantize(q, scale, zero_point):
    """Contract: q an integer numpy array (int8 included); scale, zero_point numbers or
    arrays that broadcast against it. Returns a float32 numpy array of q's shape: the real
    value each integer stands for on the grid (zero_point stands for exactly 0), computed
    without int8 overflow for any q and zero_point in int8's range."""
    # Idea: what the stored integer means.
    ### BEGIN SOLUTION
    return ((q.astype(np.float32) - zero_point) * scale).astype(np.float32)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-quantize", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = np.array([-1.0, -0.26, 0.0, 0.25, 0.75, 1.0, 5.0, -5.0], dtype=np.float32)
_q = _quantize(_x, np.float32(0.5), 3)
assert_equal(_q.dtype, np.dtype(np.int8), "quantize returns int8")
assert_equal(_q, np.array([1, 2, 3, 3, 5, 5, 13, -7], dtype=np.int8),
             "step 0.5, zero point 3: the integer of the nearest grid point (0.25 and 0.75 are ties: q - 3 even)")
assert_equal(_quantize(np.array([300.0, -300.0]), 1.0, 0), np.array([127, -128], dtype=np.int8),
             "values beyond the grid saturate at its end integers (no wrap-around)")
assert_equal(_quantize(np.array([10.0, -10.0]), 1.0, 0, -8, 7), np.array([7, -8], dtype=np.int8),
             "a 4-bit grid saturates at -8 and 7")
assert_equal(_quantize(np.array([1.0]), 1.0, 127), np.array([127], dtype=np.int8),
             "zero point 127: 1.0 lies one step beyond the grid's top and saturates at 127")
assert_equal(_quantize(np.array([0.75, -0.25, 1.25, 2.25], dtype=np.float32), np.float32(0.5), 1),
             np.array([3, 1, 3, 5], dtype=np.int8),
             "odd zero point 1, every x a tie (1.5, -0.5, 2.5, 4.5 steps from 0): q - 1 is even")
_xr = np.array([2.25, -4.5, 11.25, 4.125, 1.09], dtype=np.float32)
_sr = np.array([0.3, 0.6, 0.9, 0.15, 0.02], dtype=np.float32)
assert_equal(_quantize(_xr, _sr, 0), np.array([8, -8, 13, 28, 54], dtype=np.int8),
             "PyTorch's integers for x = 2.25, -4.5, 11.25, 4.125, 1.09 with s = 0.3, 0.6, 0.9, 0.15, 0.02 in float32")
_xh = _dequantize(np.array([-128, 0, 3, 127], dtype=np.int8), np.float32(0.5), 3)
assert_equal(_xh.dtype, np.dtype(np.float32), "dequantize returns float32")
assert_equal(_xh, np.array([-65.5, -1.5, 0.0, 62.0], dtype=np.float32),
             "what -128, 0, 3, 127 stand for on step 0.5 with zero point 3 (no int8 overflow)")
_r = np.random.default_rng(0).uniform(-2, 2, 1000).astype(np.float32)
_s, _z = _calculate_qparams(_r.min(), _r.max(), symmetric=False)
_err = np.abs(_dequantize(_quantize(_r, _s, _z), _s, _z) - _r)
check(_err.max() <= _s / 2 * (1 + 1e-4), "round trip error at most half a step inside the range",
      got=float(_err.max()), expected=f"<= {float(_s) / 2:.6f}")
print(f"✓ quantize/dequantize; worst round-trip error {_err.max():.5f} for a step of {float(_s):.5f}")

# %% [markdown]
# PyTorch wraps the integers and their scale in a **quantized tensor**:
# `torch.quantize_per_tensor(x, scale, zero_point, torch.qint8)` returns one, with
# `.int_repr()` (the stored integers), `.q_scale()`, `.q_zero_point()` and `.dequantize()`.
# Ours is the provided `QTensor` around your two functions; `int_repr()` returns the numpy
# int8 array itself (the integer code of this module works on numpy arrays). Both agree, if PyTorch is
# installed:

# %%
#| export
class QTensor:
    """A quantized tensor (torch's quantized Tensor): int8 values with their scale(s) and
    zero point(s); `axis` is None per tensor, else the channel axis."""

    def __init__(self, int_repr, scale, zero_point, axis=None):
        self._q = int_repr
        self._scale = np.asarray(scale, dtype=np.float32)
        self._zero_point = np.asarray(zero_point, dtype=np.int64)
        self.axis = axis

    def _params(self):
        if self.axis is None:
            return self._scale, self._zero_point
        return (_channel_broadcast(self._scale, self.axis, self._q.ndim),
                _channel_broadcast(self._zero_point, self.axis, self._q.ndim))

    def int_repr(self):
        """The stored integers: a numpy int8 array."""
        return self._q

    def dequantize(self):
        """The float32 Tensor the integers stand for."""
        return Tensor(_dequantize(self._q, *self._params()))

    def q_scale(self):
        return float(self._scale)

    def q_zero_point(self):
        return int(self._zero_point)

    def q_per_channel_scales(self):
        return self._scale

    def q_per_channel_zero_points(self):
        return self._zero_point

    def q_per_channel_axis(self):
        return self.axis

    @property
    def shape(self):
        return tuple(self._q.shape)

    @property
    def nbytes(self):
        """Bytes of the integers plus the scales and zero points."""
        return self._q.nbytes + self._scale.nbytes + self._zero_point.nbytes

    def __repr__(self):
        where = "per tensor" if self.axis is None else f"per channel along axis {self.axis}"
        return f"QTensor(shape={self.shape}, dtype=int8, {where})"


def _array(x):
    return np.asarray(x.numpy() if isinstance(x, Tensor) else x, dtype=np.float32)


def quantize_per_tensor(input, scale, zero_point, dtype="qint8"):
    """torch.quantize_per_tensor: one scale and zero point for the whole tensor (qint8)."""
    if dtype != "qint8":
        raise ValueError(f"quantize_per_tensor: only dtype 'qint8' is supported, got {dtype!r}")
    if not scale > 0:
        raise ValueError(f"quantize_per_tensor: scale must be positive, got {scale}")
    scale = np.float32(scale)
    return QTensor(_quantize(_array(input), scale, int(zero_point)), scale, int(zero_point))


def dequantize(qtensor):
    """torch.dequantize: the float32 Tensor a QTensor stands for."""
    return qtensor.dequantize()


# %%
_xq = tinytorch.randn(2, 5)
_qt = quantize_per_tensor(_xq, 0.02, 4)
print(_qt, "int_repr:", _qt.int_repr()[0])
torch = optional_torch()  # PyTorch for the comparison, or None (it says so) when it is not installed
if torch is not None:
    import warnings

    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
    _tq = torch.quantize_per_tensor(torch.tensor(_xq.numpy()), 0.02, 4, torch.qint8)
    print("torch int_repr:", _tq.int_repr().numpy()[0])
    print("max |ours - torch| after dequantize:",
          float(np.abs(_qt.dequantize().numpy() - _tq.dequantize().numpy()).max()))

# %% [markdown]
# ### How large is the error on average? A noise model
#
# Half a step is the worst case. What a network feels is the typical error, over millions
# of values. Inside the range, the error of one value, $e = \hat x - x$, lies in
# $[-\Delta/2, \Delta/2]$ for a step $\Delta$ (the scale). For values that fall on the grid
# without any relation to it (weights and activations do), every point of that interval is
# about equally likely: the error behaves like **noise spread evenly over one step**.
#
# Engineers compare a signal with its noise by their powers (mean squares), in decibels:
# the **signal-to-quantization-noise ratio** is
#
# $$\text{SQNR} = 10 \log_{10} \frac{\overline{x^2}}{\overline{e^2}} \ \text{dB} .$$
#
# **Derive** the two functions below on paper first:
#
# - `_rounding_mse(scale)`: the mean of $e^2$ for an error spread evenly over one step of
#   size `scale` (an average over an interval is an integral divided by its length);
# - `_predicted_sqnr_db(signal_power, lo, hi, bits)`: the SQNR your noise model predicts
#   for a signal of mean square `signal_power` on a `bits`-bit affine grid whose ends
#   are `lo` and `hi` exactly (section 2 says what step such a grid has).
#
# Then, before you run the check: by how many decibels does one more bit raise the SQNR
# over the same range? The check compares your prediction with the error measured on
# quantized data, from 3 to 8 bits, and prints 2 bits as well.
#
# <details><summary>Hint 1</summary>
#
# Write the mean of $e^2$ as an integral over the interval the error is spread on, divided by
# that interval's length, and evaluate it: which power of $\Delta$ comes out? One bit
# more halves the step (nearly: how many steps does a $b$-bit grid have?); what does
# halving the step do to the noise power, and to $10 \log_{10}$ of it?
# </details>

# %% nbgrader={"grade": false, "grade_id": "noise-model", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _rounding_mse(scale):
    """Contract: scale a positive float or numpy array. Returns the expected squared
    rounding error (float, or an array of scale's shape) of values spread evenly over a
    grid of step `scale`, inside its range."""
    # Idea: average e² over one step.
    ### BEGIN SOLUTION
    return np.asarray(scale, dtype=np.float64) ** 2 / 12
    ### END SOLUTION


def _predicted_sqnr_db(signal_power, lo, hi, bits):
    """Contract: signal_power > 0 (the mean of x²); lo < hi the grid's end values; bits an
    int from 2 to 8. Returns the SQNR in dB that the noise model predicts for that signal
    on a `bits`-bit affine grid from lo to hi, as a Python float (`float(...)`: numpy's
    float64 scalar, a subclass of float, prints as np.float64(...) in lists and dicts)."""
    # Idea: the grid's step, then the ratio of the two powers.
    ### BEGIN SOLUTION
    step = (hi - lo) / (2 ** bits - 1)
    return float(10 * np.log10(signal_power / _rounding_mse(step)))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-noise-model", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
for _step in (0.5, 0.01):
    _e = np.linspace(-_step / 2, _step / 2, 200_001)  # an even spread over one step
    assert_close(float(_rounding_mse(_step)), float(np.mean(_e ** 2)), rtol=1e-4, atol=0,
                 what=f"_rounding_mse({_step}) against the mean square of errors spread evenly over one step")
assert_close(_rounding_mse(np.array([0.5, 0.01])), np.array([_rounding_mse(0.5), _rounding_mse(0.01)]),
             rtol=1e-12, atol=0, what="_rounding_mse of an array: one value per scale")
_sig = np.random.default_rng(3).standard_normal(200_000)
_rows = []
for _bits in range(2, 9):
    _qmin, _qmax = -(2 ** (_bits - 1)), 2 ** (_bits - 1) - 1
    _lo, _hi = float(_sig.min()), float(_sig.max())
    _sc, _zp = _calculate_qparams(np.float32(_lo), np.float32(_hi), False, _qmin, _qmax)
    _noise = _dequantize(_quantize(_sig, _sc, _zp, _qmin, _qmax), _sc, _zp) - _sig
    _measured = 10 * np.log10(np.mean(_sig ** 2) / np.mean(_noise ** 2))
    _rows.append((_bits, _predicted_sqnr_db(float(np.mean(_sig ** 2)), _lo, _hi, _bits), _measured))
for _bits, _pred, _meas in _rows[1:]:  # from 3 bits up (2 bits: see the note below the table)
    check(type(_pred) is float, f"{_bits} bits: _predicted_sqnr_db returns a Python float, not a numpy scalar",
          got=type(_pred).__name__)
    check(abs(_pred - _meas) < 0.05,
          f"{_bits} bits: your predicted SQNR within 0.05 dB of the one measured on 200,000 normal values",
          got=_pred, expected=f"{_meas:.3f} dB (measured)")
print("bits  predicted  measured (dB)")
for _bits, _pred, _meas in _rows:
    print(f"{_bits:4d}  {_pred:9.2f}  {_meas:8.2f}")
print(f"✓ the noise model; one bit more adds {_rows[-1][1] - _rows[-2][1]:.2f} dB (8 bits over 7)")

# %% [markdown]
# <details><summary>What the table says, once you have made your prediction</summary>
#
# The mean square of an error spread evenly over a step $\Delta$ is $\Delta^2/12$. A $b$-bit
# grid over a fixed range has $2^b - 1$ steps, so one more bit roughly halves $\Delta$,
# quarters the noise power, and adds $10 \log_{10} 4 \approx 6.02$ dB: the rule of thumb
# "6 dB per bit" of every analog-to-digital converter's data sheet. It is also why the
# range matters as much as the bits: an outlier that doubles the range costs exactly one
# bit (6 dB) for every other value, which is the trade section 5's percentile observer
# makes. The model holds from 3 bits up; at 2 bits the grid has three steps across the
# whole range, most values fall in the middle two, the errors no longer spread evenly over
# a step, and the table shows the prediction drifting from the measurement.
# </details>

# %% [markdown]
# ## 4. Per-channel quantization
#
# One scale for a whole weight matrix is set by its single largest entry. A `Linear`'s
# output channels (the rows of `weight`, shape `(out, in)`) often have very different
# ranges: a row whose weights are ten times smaller than the largest row's uses only a
# tenth of the 256 levels. **Per-channel** quantization gives each row its own scale (and
# zero point): each row's grid fits that row's range. It costs one float per row — nothing
# next to the row's `in` int8 weights — and, as section 6 shows, the integer matmul can
# still apply the scales after the sum, because each output element uses one row.
#
# Two helpers decide which axes mean what (their contracts are below):
# `_per_channel_minmax(x, axis)`, each channel's minimum and maximum, and
# `_channel_broadcast(values, axis, ndim)`, which lines up one value per channel with the
# channel axis of an array, so that numpy's broadcasting applies channel $c$'s scale to
# channel $c$ and to nothing else.
#
# **A worked example**, with a channel axis that is not the first: an image batch of shape
# `(N, C, H, W)` = `(2, 3, 4, 4)` has 3 colour channels along axis 1. Channel 1 (green) is
# every element `x[n, 1, h, w]`: 2 · 4 · 4 = 32 numbers, spread over both images. Its
# minimum is the smallest of those 32, and a value meant for it must reach all 32 when it
# is combined with `x`, and no element of the other two channels.
#
# <details><summary>Hint 1</summary>
#
# In the worked example, which of the four axes does the green channel's minimum run
# over? Which would it run over for `axis=0` of a `Linear` weight `(out, in)`? Can one
# numpy reduction take all of them at once?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Broadcasting compares shapes axis by axis (from the right), and a size-1 axis repeats.
# Which shape must the 3 green-red-blue values have so that, against `(2, 3, 4, 4)`, they
# vary along axis 1 and repeat along the other three?
# </details>
#
# <details><summary>The approach</summary>
#
# Both helpers are about naming axes, and both must accept a negative `axis`, which names
# the same axis as some positive one: settle which first. A channel's extremes are
# reductions over whatever is *not* the channel axis, and the contract wants them as
# float32 whatever came in. The broadcast needs no data movement at all: the same values,
# in the same order, only seen with a different shape.
# </details>

# %% nbgrader={"grade": false, "grade_id": "per-channel", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _per_channel_minmax(x, axis):
    """Contract: x a numpy array with ndim >= 1, axis an int in -ndim..ndim-1 (negative
    counts from the end). Returns (min_val, max_val), float32 numpy arrays of shape
    (x.shape[axis],): entry c is the minimum (maximum) of every element of x whose index
    along `axis` is c."""
    # Idea: a channel is everything that shares one index along `axis`.
    ### BEGIN SOLUTION
    axis = axis % x.ndim
    others = tuple(i for i in range(x.ndim) if i != axis)
    return (x.min(axis=others).astype(np.float32), x.max(axis=others).astype(np.float32))
    ### END SOLUTION


def _channel_broadcast(values, axis, ndim):
    """Contract: values a 1-D numpy array (one entry per channel), axis in -ndim..ndim-1.
    Returns the same values, in order, as a numpy array with ndim dimensions whose shape
    is len(values) at `axis` and 1 everywhere else (so it broadcasts along that axis)."""
    # Idea: line the channel values up with the channel axis.
    ### BEGIN SOLUTION
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return np.asarray(values).reshape(shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-per-channel", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_w = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
_lo, _hi = _per_channel_minmax(_w, 0)
assert_equal(_lo, np.array([-10.0, 2.0], dtype=np.float32), "min of each of the 2 channels along axis 0")
assert_equal(_hi, np.array([1.0, 13.0], dtype=np.float32), "max of each channel along axis 0")
_lo, _hi = _per_channel_minmax(_w, 1)
assert_equal(_lo, np.array([-10.0, -6.0, -2.0], dtype=np.float32), "min over axes 0 and 2, axis=1")
assert_equal(_per_channel_minmax(_w, -1)[1], np.array([10.0, 11.0, 12.0, 13.0], dtype=np.float32),
             "axis=-1 is the last axis")
assert_equal(_lo.dtype, np.dtype(np.float32), "the dtype of the minima of float32 data")
_lo64, _hi64 = _per_channel_minmax(_w.astype(np.float64), 0)
assert_equal((_lo64.dtype, _hi64.dtype), (np.dtype(np.float32),) * 2,
             "the minima and maxima of float64 data are float32 too (the contract's dtype, whatever comes in)")
assert_equal(_channel_broadcast(np.array([1, 2, 3]), 1, 3).shape, (1, 3, 1), "(C,) along axis 1 of 3-d")
assert_equal(_channel_broadcast(np.array([1, 2]), 0, 2).shape, (2, 1), "(C,) along the rows of a matrix")
assert_equal(_channel_broadcast(np.array([1, 2, 3, 4]), -1, 3).shape, (1, 1, 4), "axis=-1")
print("✓ per-channel helpers; channel minima along axis 1:", _lo)

# %% [markdown]
# With these, per-channel quantization is the same `_quantize` with broadcast parameters
# (provided; torch's `quantize_per_channel(input, scales, zero_points, axis, dtype)`):

# %%
#| export
def quantize_per_channel(input, scales, zero_points, axis, dtype="qint8"):
    """torch.quantize_per_channel: scales[c] and zero_points[c] for channel c along `axis`."""
    if dtype != "qint8":
        raise ValueError(f"quantize_per_channel: only dtype 'qint8' is supported, got {dtype!r}")
    x = _array(input)
    scales = np.asarray(scales.numpy() if isinstance(scales, Tensor) else scales, dtype=np.float32)
    zero_points = np.asarray(zero_points.numpy() if isinstance(zero_points, Tensor) else zero_points,
                             dtype=np.int64)
    if scales.shape != (x.shape[axis],) or zero_points.shape != scales.shape:
        raise ValueError(f"quantize_per_channel: need one scale and zero point per channel "
                         f"({x.shape[axis]} along axis {axis}), got {scales.shape} and {zero_points.shape}")
    q = _quantize(x, _channel_broadcast(scales, axis, x.ndim), _channel_broadcast(zero_points, axis, x.ndim))
    return QTensor(q, scales, zero_points, axis=axis % x.ndim)


# %% [markdown]
# **Predict first.** A weight matrix has 8 rows; row $i$'s weights are Gaussian with
# standard deviation $2^{-i}$ (row 7 is 128 times smaller than row 0). Quantized per tensor
# and per channel (both symmetric), how many times smaller will the per-channel version's
# mean squared error be?

# %%
predicted_mse_ratio = None  # your number: MSE(per tensor) / MSE(per channel)

# %%
_rng = np.random.default_rng(0)
W_uneven = (_rng.standard_normal((8, 64)) * 2.0 ** -np.arange(8)[:, None]).astype(np.float32)
_s_t, _z_t = _calculate_qparams(W_uneven.min(), W_uneven.max(), symmetric=True)
_err_t = dequantize(quantize_per_tensor(W_uneven, float(_s_t), int(_z_t))).numpy() - W_uneven
_s_c, _z_c = _calculate_qparams(*_per_channel_minmax(W_uneven, 0), symmetric=True)
_err_c = dequantize(quantize_per_channel(W_uneven, _s_c, _z_c, axis=0)).numpy() - W_uneven
_ratio = np.mean(_err_t ** 2) / np.mean(_err_c ** 2)
print(f"MSE per tensor {np.mean(_err_t ** 2):.2e}, per channel {np.mean(_err_c ** 2):.2e}: "
      f"{_ratio:.0f}x smaller; " + ("no prediction written" if predicted_mse_ratio is None
                                    else f"you predicted {predicted_mse_ratio}x"))
fig, ax = plt.subplots(figsize=(7, 3.2))
_rows = np.arange(8)
ax.semilogy(_rows, np.sqrt(np.mean(_err_t ** 2, axis=1)), "o-", label="per tensor: one scale")
ax.semilogy(_rows, np.sqrt(np.mean(_err_c ** 2, axis=1)), "s-", label="per channel: a scale per row")
ax.semilogy(_rows, W_uneven.std(axis=1), "k:", label="the row's own spread (std)")
ax.set_xlabel("row (output channel)")
ax.set_ylabel("RMS error")
ax.set_title("symmetric int8 on rows of very different ranges", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# <details><summary>Why this ratio (open after you have compared your prediction)</summary>
#
# Per tensor, every row gets the same absolute error (the step is set by row 0), so the
# small rows drown in it: row 7's error is about as large as its weights. Per channel, each
# row's error is proportional to its own range. The ratio is near 6, not 128: row 0
# keeps its error (it set the per-tensor step anyway) while the errors of rows 1-7 shrink
# by $4, 16, 64, \dots$ in MSE, so the mean falls to about $\frac18(1 + \frac14 + \frac1{16}
# + \dots) \approx \frac16$ of the per-tensor one (the draw moves the printed figure a little).
# Measured in *relative* error, per row, the gain for the small rows is much larger: that is
# what the plot shows.
# </details>
#
# ## 5. Observers: calibrating the range from data
#
# Weights are known after training: their range is read off directly. Activations exist
# only when data flows, so their range is **observed**: run a few **calibration batches**
# through the model and let an observer at each layer's input record what it sees. In
# PyTorch an observer is an `nn.Module` that returns its input unchanged and updates
# statistics; `calculate_qparams()` then turns them into a scale and zero point.
#
# `MinMaxObserver` (torch's name) keeps the **running** minimum and maximum over every
# batch it has seen. The provided class starts with $+\infty$ / $-\infty$, asks
# `_batch_range` for the current batch's minimum and maximum (per tensor here;
# `PerChannelMinMaxObserver` overrides it with your `_per_channel_minmax`), and
# `calculate_qparams` calls your `_calculate_qparams`. Write `forward`: the update.
#
# The observer must not keep the batches it has seen (calibration may run thousands), and
# the per-channel subclass runs this same `forward` with one value per channel where
# `MinMaxObserver` has one in all.
#
# <details><summary>Hint 1</summary>
#
# After batches $b_1, b_2, \dots$ the observer must hold the minimum of everything in them,
# not the last batch's. What is the minimum of a union of sets, in terms of the minima of
# the sets?
# </details>
#
# <details><summary>The approach</summary>
#
# The state after a batch is a summary of everything seen so far, and it must be
# computable from the summary before the batch and the batch alone: the extremes have
# that property. The state starts at $+\infty$ / $-\infty$, so no batch is special, and the
# same code has to serve a value per tensor and an array per channel; check that yours
# does not assume either. An observer only watches: what it returns is what it was given.
# </details>

# %% nbgrader={"grade": false, "grade_id": "minmax-observer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class MinMaxObserver(Module):
    """Records the running min and max of what passes through (torch.ao.quantization.MinMaxObserver).

    qscheme: per_tensor_affine (default) or per_tensor_symmetric; quant_min/quant_max default
    to int8's -128..127 (pass e.g. -8, 7 for 4 bits)."""

    def __init__(self, qscheme=per_tensor_affine, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
        super().__init__()
        if qscheme not in _SCHEMES:
            raise ValueError(f"unknown qscheme {qscheme!r}; use one of {', '.join(_SCHEMES)}")
        if not QINT8_MIN <= quant_min < quant_max <= QINT8_MAX:
            raise ValueError(f"need -128 <= quant_min < quant_max <= 127, got {quant_min}, {quant_max}")
        self.qscheme, self.quant_min, self.quant_max = qscheme, int(quant_min), int(quant_max)
        self.min_val = np.array(np.inf, dtype=np.float32)
        self.max_val = np.array(-np.inf, dtype=np.float32)

    def _batch_range(self, x):
        return np.float32(x.min()), np.float32(x.max())

    def forward(self, x):
        """Contract: x a Tensor or numpy array (not empty). Afterwards min_val and max_val
        (float32 numpy values, of the shape _batch_range gives: 0-d per tensor, (C,) per
        channel) are the minimum and maximum over every input seen so far, not just the last
        one. Returns x unchanged."""
        # Idea: what must the state after this batch remember of every batch before it?
        ### BEGIN SOLUTION
        lo, hi = self._batch_range(_array(x))
        self.min_val = np.minimum(self.min_val, lo).astype(np.float32)
        self.max_val = np.maximum(self.max_val, hi).astype(np.float32)
        return x
        ### END SOLUTION

    def calculate_qparams(self):
        """(scale, zero_point) for the range observed so far."""
        if np.any(self.min_val > self.max_val):
            raise RuntimeError(f"{type(self).__name__} has seen no data: run calibration batches "
                               f"through it before calculate_qparams()")
        return _calculate_qparams(self.min_val, self.max_val, "symmetric" in self.qscheme,
                                  self.quant_min, self.quant_max)

    def extra_repr(self):
        return f"{self.qscheme}, quant_min={self.quant_min}, quant_max={self.quant_max}"


class PerChannelMinMaxObserver(MinMaxObserver):
    """Running min and max per channel along ch_axis (torch's PerChannelMinMaxObserver);
    qscheme per_channel_affine (default) or per_channel_symmetric."""

    def __init__(self, ch_axis=0, qscheme=per_channel_affine, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
        super().__init__(qscheme, quant_min, quant_max)
        self.ch_axis = ch_axis

    def _batch_range(self, x):
        return _per_channel_minmax(x, self.ch_axis)


# %% nbgrader={"grade": true, "grade_id": "test-minmax-observer", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import held_bytes

_obs = MinMaxObserver()
assert_raises(RuntimeError, _obs.calculate_qparams, match="no data")
_b1 = np.array([[0.5, 2.0], [-1.0, 1.0]], dtype=np.float32)
_b2 = np.array([[0.0, 0.5], [3.0, -0.5]], dtype=np.float32)
_t1 = Tensor(_b1)
_back = _obs(_t1)
check(_back is _t1, "the observer returns its input unchanged: the very object it was given (a Tensor stays a "
      "Tensor, so the next layer gets what it would have got without the observer)", got=type(_back).__name__)
_obs(_b2)
assert_equal((float(_obs.min_val), float(_obs.max_val)), (-1.0, 3.0),
             "running (min, max) over both batches, not the last one's (-0.5, 3.0)")
assert_equal((np.asarray(_obs.min_val).dtype, np.asarray(_obs.max_val).dtype), (np.dtype(np.float32),) * 2,
             "dtypes of the running min_val and max_val (float32 numpy values: PyTorch's observers keep float32)")
_obs(np.array([0.1], dtype=np.float32))
assert_equal((float(_obs.min_val), float(_obs.max_val)), (-1.0, 3.0), "a batch inside the range changes nothing")
_s, _z = _obs.calculate_qparams()
assert_close(_s, np.float32(4 / 255), rtol=1e-6, atol=0, what="scale of the observed [-1, 3]")
_pc = PerChannelMinMaxObserver(ch_axis=1)
_pc(_b1)
_pc(_b2)
assert_equal(_pc.min_val, np.array([-1.0, -0.5], dtype=np.float32), "per-channel running minima (columns)")
assert_equal(_pc.max_val, np.array([3.0, 2.0], dtype=np.float32), "per-channel running maxima")
_long = MinMaxObserver()  # calibration may run thousands of batches: the observer keeps a summary, not them
_long(np.zeros(1000, np.float32))
_size_1 = held_bytes(_long)
for _i in range(20):
    _long(np.random.default_rng(_i).standard_normal(1000).astype(np.float32))
check(held_bytes(_long) < _size_1 + 1000, "the observer's size after 21 batches of 1,000 values is its size "
      "after one: it keeps what it needs of the batches, not the batches", got=f"{_size_1} bytes (pickled) after one "
      f"batch, {held_bytes(_long)} after 21")
print(f"✓ MinMaxObserver.forward; observed range [{float(_obs.min_val)}, {float(_obs.max_val)}]")

# %% [markdown]
# ### A percentile observer: clip the outliers
#
# Min/max is at the mercy of one extreme value. Activations often have long tails: if one
# value in a million is 20 while the rest lie below 2, min/max spends 90 % of the grid on
# a range almost nothing uses, and every ordinary value gets a step ten times coarser.
# Clipping the tail trades the two: the rare values saturate at the clamp, each with a
# large error, and every ordinary value gets a finer step. Which side of the trade wins
# depends on how many values are clipped and how far out they lie.
#
# `PercentileObserver(percentile=99.99)` estimates the range from percentiles. Each batch
# contributes its `100 - p`th and `p`th percentile (`np.percentile`), taken over **all**
# its values whatever its shape: one range per tensor, as `MinMaxObserver`'s. The
# observer's range is the **mean** of those over the batches seen so far, every batch with
# equal weight, and like `MinMaxObserver` it keeps no batch: its state is the current
# range and the count `n` of batches. (After it, a third observer makes the same trade by
# pricing it.)
#
# <details><summary>Hint 1</summary>
#
# If you know the mean of $n - 1$ numbers and how many there were, what else do you know
# about them? And what does the $n$-th number add to it?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Test your update by hand on the values 3, 6, 0: after each one the mean must be 3, 4.5
# and 3. Does the first value need a case of its own, or does your update already give
# the right answer when there was nothing before?
# </details>
#
# <details><summary>The approach</summary>
#
# The update must produce the mean of $n$ values from the mean of the first $n - 1$, the
# count and the newcomer alone; there are several equivalent ways to write it, and some
# keep their precision better than others when $n$ grows large. The check compares your
# range with the plain mean of the per-batch percentiles, after one batch and after
# several, and with a batch of several columns of different spreads: the percentiles are
# of the whole batch.
# </details>

# %% nbgrader={"grade": false, "grade_id": "percentile-observer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class PercentileObserver(MinMaxObserver):
    """Range from the (100 - p)th and pth percentiles, averaged over batches (per tensor)."""

    def __init__(self, percentile=99.99, qscheme=per_tensor_affine, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
        super().__init__(qscheme, quant_min, quant_max)
        if not 50.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (50, 100], got {percentile}")
        self.percentile = float(percentile)
        self.n = 0  # batches seen

    def forward(self, x):
        """Contract: x a Tensor or numpy array of any shape (not empty). After n batches,
        min_val and max_val (0-d float32 numpy values: one range per tensor) are the means,
        over those n batches with equal weight, of each batch's (100 - percentile)th and
        percentile-th percentile of all its values, whatever its shape (np.percentile,
        default interpolation); n counts the batches. Returns x unchanged."""
        # Idea: a robust range per batch, averaged as the batches come.
        ### BEGIN SOLUTION
        lo, hi = np.percentile(_array(x), [100.0 - self.percentile, self.percentile])
        if self.n == 0:
            self.min_val, self.max_val = np.float32(lo), np.float32(hi)
        else:
            self.min_val = np.float32(self.min_val + (lo - self.min_val) / (self.n + 1))
            self.max_val = np.float32(self.max_val + (hi - self.max_val) / (self.n + 1))
        self.n += 1
        return x
        ### END SOLUTION

    def extra_repr(self):
        return f"percentile={self.percentile}, " + super().extra_repr()


# %% nbgrader={"grade": true, "grade_id": "test-percentile-observer", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(3)
_a1, _a2, _a3 = (_rng.standard_normal(n).astype(np.float32) * k for n, k in ((5000, 1.0), (2000, 2.0), (800, 0.5)))
_po = PercentileObserver(99.0)
_po(Tensor(_a1))
assert_close(_po.min_val, np.percentile(_a1, 1.0), rtol=1e-5, atol=0, what="one batch: min_val = its 1st percentile")
assert_close(_po.max_val, np.percentile(_a1, 99.0), rtol=1e-5, atol=0, what="one batch: max_val = its 99th percentile")
_po(_a2)
_po(_a3)
assert_close(_po.max_val, np.mean([np.percentile(a, 99.0) for a in (_a1, _a2, _a3)]), rtol=1e-5, atol=0,
             what="three batches of 5000, 2000 and 800 values: the mean of their 99th percentiles, each batch "
                  "weighing the same whatever its size")
assert_close(_po.min_val, np.mean([np.percentile(a, 1.0) for a in (_a1, _a2, _a3)]), rtol=1e-5, atol=0,
             what="three batches: the mean of their 1st percentiles")
_cols = (_rng.standard_normal((400, 3)) * np.array([0.1, 1.0, 10.0])).astype(np.float32)
_pm = PercentileObserver(99.0)
_pm(Tensor(_cols))
assert_equal((np.shape(_pm.min_val), np.shape(_pm.max_val)), ((), ()),
             "a (400, 3) batch: one range for the whole tensor, not one per column")
assert_close(np.array([_pm.min_val, _pm.max_val]), np.percentile(_cols, [1.0, 99.0]), rtol=1e-5, atol=0,
             what="a (400, 3) batch with columns of spread 0.1, 1 and 10: the percentiles of all 1200 values")
_tail = np.concatenate([np.zeros(999, dtype=np.float32), [100.0]]).astype(np.float32)
_pt = PercentileObserver(99.0)
_pt(_tail)
check(float(_pt.max_val) < 1.0, "one outlier in a thousand is clipped by the 99th percentile",
      got=float(_pt.max_val), expected="< 1")
_long = PercentileObserver(99.0)
_long(np.zeros(100, np.float32))
_size_1 = held_bytes(_long)
for _i in range(400):
    _long(np.random.default_rng(_i).standard_normal(100).astype(np.float32))
check(held_bytes(_long) < _size_1 + 200, "the percentile observer's size after 401 batches is its size after one: "
      "like MinMaxObserver it keeps a running range and a count, not the batches nor a list of their percentiles",
      got=f"{_size_1} bytes (pickled) after one batch, {held_bytes(_long)} after 401")
print(f"✓ PercentileObserver.forward; 99th percentile over 3 batches {float(_po.max_val):.3f}")

# %% [markdown]
# **Predict first.** 10,000 activations are half-normal (ReLU-like, most below 3) plus 10
# outliers of 25. Quantized affine int8 with the min/max range and with the 99.9th
# percentile range, which gives the smaller mean squared error over all 10,010 values, and
# by how much?

# %%
predicted_better_observer = None  # "minmax" or "percentile"

# %%
_rng = np.random.default_rng(7)
_acts = np.concatenate([np.abs(_rng.standard_normal(10_000)), np.full(10, 25.0)]).astype(np.float32)
_mse = {}
for _name, _ob in [("minmax", MinMaxObserver()), ("percentile", PercentileObserver(99.9))]:
    _ob(_acts)
    _s, _z = _ob.calculate_qparams()
    _back = _dequantize(_quantize(_acts, _s, _z), _s, _z)
    _mse[_name] = float(np.mean((_back - _acts) ** 2))
    print(f"{_name:10s}: range [{float(_ob.min_val):.2f}, {float(_ob.max_val):.2f}], step {float(_s):.4f}, "
          f"MSE all {_mse[_name]:.2e}, MSE without the outliers {np.mean((_back - _acts)[:-10] ** 2):.2e}")
print(f"better: {min(_mse, key=_mse.get)}; "
      + ("no prediction written" if predicted_better_observer is None else f"you predicted {predicted_better_observer}"))

# %% [markdown]
# <details><summary>What decides the winner (open after you have compared your prediction)</summary>
#
# With ten outliers the clipped ones cost a lot each (25 saturates at the percentile's
# upper end: an error of 25 minus the printed upper end, about 21 here), so whether the percentile wins *overall* depends on how
# many outliers there are and how far out; on the 10,000 ordinary values it always wins,
# with a step several times finer (the printed steps). This is the whole calibration
# question in one line: which values matter? For a classifier, usually the bulk — section
# 10 measures it on a real model.
# </details>

# %% [markdown]
# ### A histogram observer: let the error choose the range
#
# The percentile observer clips by a rule of thumb: 99.9 or 99.99, and the best choice
# changes with the bits and with the data. But section 3's noise model already prices
# both sides of the trade: a value inside the range costs the grid's rounding error, and
# a clipped one costs its distance to the end it saturates at. So an observer that
# remembers *how* the values were spread can ask, for each candidate range, what
# quantizing with it would cost, and keep the cheapest. That is PyTorch's
# `HistogramObserver`: it keeps a histogram of everything it has seen (a fixed number of
# bins, so its size does not grow with calibration) and searches it for the range of
# least squared error.
#
# The observer is provided below your function. Write the search,
# `_l2_optimal_range(counts, edges, quant_min, quant_max)`: the contract defines the
# estimated error $E(lo, hi)$ of a range whose two ends are bin edges; return the range
# with the least $E$ over **every** pair of edges. PyTorch's default is 2048 bins, so
# there are about two million candidate ranges. Before you write any code, count what the
# obvious plan costs: evaluating each candidate by a sum over all the bins is billions of
# operations, for one layer. Design an evaluation in which a candidate costs a few
# operations once something has been computed for all of them. (PyTorch's own search
# is a greedy one that can stop short of the best pair, so its ranges differ from
# yours; the check holds you to the best pair.)
#
# <details><summary>Hint 1</summary>
#
# Split $E(lo, hi)$ into the bins below $lo$, those between, and those above $hi$. Which of
# the three parts depends on $lo$ only, which on $hi$ only, and what does the middle part
# need to know about the bins between besides the range itself?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The part above $hi$ is a sum of $n_b (c_b - hi)^2$ over the bins $b$ past some index.
# Multiply the square out: what is left is $hi$ and $hi^2$ times sums that do not involve
# $hi$ at all. Over which bins are those sums taken, and how many different ones can
# there be?
# </details>
#
# <details><summary>Hint 3</summary>
#
# With those sums in hand, fix $lo$ and evaluate every $hi$ above it in one numpy
# expression: your `_calculate_qparams` and `_rounding_mse` take arrays. Is a full
# $B \times B$ table of errors needed at once, or one row at a time?
# </details>

# %% nbgrader={"grade": false, "grade_id": "l2-optimal-range", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _l2_optimal_range(counts, edges, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """Contract: counts a 1-D numpy array of B >= 1 non-negative bin counts, not all 0;
    edges the B + 1 increasing bin edges (np.histogram's pair). Returns (lo, hi), two
    Python floats, each one of `edges`, lo < hi, whose estimated squared error E(lo, hi)
    is the least over every pair of edges (to 1e-6 relative), where E puts each bin's
    values at its centre c and sums, over all values, the cost of one:
    - lo <= c <= hi: _rounding_mse(scale), scale the one _calculate_qparams gives for
      the float32 range [lo, hi] (affine, quant_min..quant_max);
    - c < lo: (c - lo) ** 2, and c > hi: (c - hi) ** 2 (it saturates at that end).
    Its work grows about as B², not B³ (2048 bins make two million candidate ranges)."""
    # Idea: the cost of a range splits into parts that can be prepared once for all ranges.
    ### BEGIN SOLUTION
    counts = np.asarray(counts, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    centres = (edges[:-1] + edges[1:]) / 2
    # sums over the bins [0, k): how many values, their sum, their sum of squares
    n0 = np.concatenate([[0.0], np.cumsum(counts)])
    n1 = np.concatenate([[0.0], np.cumsum(counts * centres)])
    n2 = np.concatenate([[0.0], np.cumsum(counts * centres ** 2)])
    best_err, best_i, best_j = np.inf, 0, len(edges) - 1
    for i in range(len(edges) - 1):  # lo = edges[i]; every hi = edges[j] above it at once
        lo = edges[i]
        j = np.arange(i + 1, len(edges))
        hi = edges[j]
        below = n2[i] - 2 * lo * n1[i] + lo * lo * n0[i]
        above = (n2[-1] - n2[j]) - 2 * hi * (n1[-1] - n1[j]) + hi * hi * (n0[-1] - n0[j])
        scale, _ = _calculate_qparams(np.full(j.shape, lo, dtype=np.float32), hi.astype(np.float32), False,
                                      quant_min, quant_max)
        err = below + above + (n0[j] - n0[i]) * _rounding_mse(scale)
        k = int(np.argmin(err))
        if err[k] < best_err:
            best_err, best_i, best_j = err[k], i, int(j[k])
    return float(edges[best_i]), float(edges[best_j])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-l2-optimal-range", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.testing import arithmetic, python_steps


def _estimated_error(counts, edges, lo, hi, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """The contract's E(lo, hi), bin by bin."""
    c = (edges[:-1] + edges[1:]) / 2
    s, _ = _calculate_qparams(np.float32(lo), np.float32(hi), False, quant_min, quant_max)
    cost = np.where(c < lo, (c - lo) ** 2, np.where(c > hi, (c - hi) ** 2, float(_rounding_mse(s))))
    return float(np.sum(counts * cost))


def _least_error(counts, edges, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """The least E over every pair of edges, by trying them all (fine for a few dozen bins)."""
    return min(_estimated_error(counts, edges, edges[i], edges[j], quant_min, quant_max)
               for i in range(len(edges)) for j in range(i + 1, len(edges)))


_rng = np.random.default_rng(11)
_cases = {
    "ReLU-like values with 10 outliers at 25, 8 bits": (
        np.concatenate([np.abs(_rng.standard_normal(10_000)), np.full(10, 25.0)]), 40, -128, 127),
    "ReLU-like values with 10 outliers at 25, 4 bits": (
        np.concatenate([np.abs(_rng.standard_normal(10_000)), np.full(10, 25.0)]), 32, -8, 7),
    "two-sided heavy tails, 4 bits": (_rng.laplace(0.5, 1.0, 5000), 36, -8, 7),
    "values all in [5, 10] (the grid must still hold 0), 3 bits": (_rng.uniform(5, 10, 2000), 30, -4, 3),
    "a uniform spread, 8 bits": (_rng.uniform(-1, 3, 3000), 24, -128, 127),
}
for _what, (_data, _bins, _qmin, _qmax) in _cases.items():
    _counts, _edges = np.histogram(_data, _bins)
    _got = _l2_optimal_range(_counts, _edges, _qmin, _qmax)
    check(isinstance(_got, tuple) and len(_got) == 2 and all(type(v) is float for v in _got),
          f"{_what}: returns (lo, hi), two Python floats", got=_got)
    _lo, _hi = _got
    check(_lo < _hi and _lo in _edges and _hi in _edges, f"{_what}: lo < hi, both of them bin edges",
          got=_got, expected=f"two of the {_bins + 1} edges, from {_edges[0]:.3f} to {_edges[-1]:.3f}")
    _best = _least_error(_counts, _edges, _qmin, _qmax)
    assert_close(_estimated_error(_counts, _edges, _lo, _hi, _qmin, _qmax), _best, rtol=1e-6, atol=0,
                 what=f"{_what}: E of your range against the least E over all {_bins * (_bins + 1) // 2} pairs of edges")
_work = {}
for _b in (24, 96):  # the work of a search, as the bins quadruple: numbers computed by numpy, plus Python steps
    _c, _e = np.histogram(np.random.default_rng(0).laplace(0, 1, 5000), _b)
    _, _log = spied(_l2_optimal_range, _c, _e)
    _work[_b] = sum(int(np.prod(r)) for _, _, r in arithmetic(_log)) + python_steps(_l2_optimal_range, _c, _e)
check(_work[96] < 24 * _work[24], "the search's work grows about as B², not B³: with 4x the bins, under 24x the "
      "work (numpy's computed numbers plus Python steps): two million candidates at 2048 bins stay affordable",
      got=f"{_work[96] / _work[24]:.1f}x ({_work[24]:,} at 24 bins, {_work[96]:,} at 96)", expected="< 24x (B² is 16x)")
_big = np.concatenate([_rng.laplace(0, 1, 200_000), [-60.0, 45.0]])
_counts, _edges = np.histogram(_big, 2048)
_lo, _hi = _l2_optimal_range(_counts, _edges)
_yours = _estimated_error(_counts, _edges, _lo, _hi)
_pairs = np.sort(_rng.choice(len(_edges), size=(3000, 2)), axis=1)
_others = {"min/max": _estimated_error(_counts, _edges, _edges[0], _edges[-1]),
           "the best of 3,000 random pairs": min(_estimated_error(_counts, _edges, _edges[a], _edges[b])
                                                for a, b in _pairs if a < b)}
for _name, _e in _others.items():
    check(_yours <= _e * (1 + 1e-9), f"2048 bins of Laplace values with outliers at -60 and 45: your range's E is "
          f"no larger than {_name}'s", got=f"E = {_yours:.6g} for [{_lo:.3f}, {_hi:.3f}]", expected=f"<= {_e:.6g}")
print(f"✓ _l2_optimal_range; on 2048 bins it keeps [{_lo:.2f}, {_hi:.2f}] of [{_edges[0]:.1f}, {_edges[-1]:.1f}], "
      f"E {_yours:.4g} against min/max's {_others['min/max']:.4g}")

# %% [markdown]
# The observer around your search (provided). When a batch widens the range, the bins
# widen with it: each old bin's count moves to the new bin that holds its centre, a small
# blur PyTorch's observer accepts too.

# %%
#| export
class HistogramObserver(MinMaxObserver):
    """A histogram of everything seen, in `bins` equal bins over the running range; its
    range is the pair of bin edges your `_l2_optimal_range` picks (torch's HistogramObserver,
    per tensor affine; its search differs, so its ranges do too)."""

    def __init__(self, bins=2048, qscheme=per_tensor_affine, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
        if qscheme != per_tensor_affine:
            raise ValueError(f"HistogramObserver here searches per_tensor_affine ranges only, got {qscheme!r}")
        super().__init__(qscheme, quant_min, quant_max)
        self.bins = int(bins)
        self.histogram = np.zeros(self.bins)  # counts over [min_val, max_val]

    def _edges(self, lo, hi):
        return np.linspace(float(lo), float(hi), self.bins + 1)

    def forward(self, x):
        values = _array(x).ravel()
        old_lo, old_hi = float(self.min_val), float(self.max_val)
        super().forward(x)
        lo, hi = float(self.min_val), float(self.max_val)
        if hi == lo:  # every value so far is the same one: the first bin holds them all
            self.histogram[0] += values.size
            return x
        if self.histogram.any() and (old_lo, old_hi) != (lo, hi):
            old_edges = self._edges(old_lo, old_hi)
            centres = (old_edges[:-1] + old_edges[1:]) / 2
            self.histogram = np.histogram(centres, self.bins, (lo, hi), weights=self.histogram)[0]
        self.histogram = self.histogram + np.histogram(values, self.bins, (lo, hi))[0]
        return x

    def calculate_qparams(self):
        if not self.max_val > self.min_val:  # no data yet (MinMaxObserver says so), or a single value
            return super().calculate_qparams()
        lo, hi = _l2_optimal_range(self.histogram, self._edges(self.min_val, self.max_val),
                                   self.quant_min, self.quant_max)
        return _calculate_qparams(np.float32(lo), np.float32(hi), False, self.quant_min, self.quant_max)

    def extra_repr(self):
        return f"bins={self.bins}, " + super().extra_repr()


# %% [markdown]
# The three observers on the prediction's values (ReLU-like, with 10 outliers at 25), fed
# in three batches, at 8 bits and at 4. Before you run it: will the histogram observer
# clip the outliers at both widths?

# %%
for _bits in (8, 4):
    _qmin, _qmax = -(2 ** (_bits - 1)), 2 ** (_bits - 1) - 1
    _observers = {"minmax": MinMaxObserver(quant_min=_qmin, quant_max=_qmax),
                  "percentile 99.9": PercentileObserver(99.9, quant_min=_qmin, quant_max=_qmax),
                  "histogram": HistogramObserver(quant_min=_qmin, quant_max=_qmax)}
    for _name, _ob in _observers.items():
        for _part in np.array_split(_acts, 3):
            _ob(_part)
        _s, _z = _ob.calculate_qparams()
        _back = _dequantize(_quantize(_acts, _s, _z, _qmin, _qmax), _s, _z)
        print(f"{_bits} bits, {_name:16s}: covers [{float(_s) * (_qmin - int(_z)):6.2f}, "
              f"{float(_s) * (_qmax - int(_z)):6.2f}], MSE all {np.mean((_back - _acts) ** 2):.2e}, "
              f"without the outliers {np.mean((_back - _acts)[:-10] ** 2):.2e}")

# %% [markdown]
# <details><summary>What the search weighed (open after you have run it)</summary>
#
# The ten outliers, clipped, would each cost about $(25 - \text{end})^2$; keeping them
# costs every other value a coarser step. At 8 bits the step is fine either way, so the
# ten large errors outweigh what 10,000 values would gain, and the search keeps (nearly)
# the whole range. At 4 bits the step is 16 times coarser, the rounding noise of the
# 10,000 grows 256-fold, and clipping pays, but only so far: the search stops where the
# outliers' growing cost meets the step's saving, well above the percentile's end (which,
# on these values, loses to min/max at both widths). A percentile is blind to the width;
# the error is not. Section 10 measures what that buys on a real model.
# </details>

# %% [markdown]
# ## 6. `QuantizedLinear`: derive the integer matmul
#
# A quantized `Linear` keeps its weight as int8 $q_W$, shape `(out, in)`, with a scale
# $s_W[j]$ and a zero point $z_W[j]$ per output row $j$, and quantizes its input on the fly
# with the activation's $(s_x, z_x)$ from calibration. By section 1's definition the layer
# computes, for output $j$ of one input row, with $n$ = `in`,
#
# $$y_j = \sum_{k=1}^{n} \hat x_k\, \hat W_{jk} + b_j, \qquad
#   \hat x_k = s_x\,(q_{x,k} - z_x), \qquad \hat W_{jk} = s_W[j]\,(q_{W,jk} - z_W[j]).$$
#
# The scales do not depend on $k$: they leave the sum and are applied once per output,
# which is why one scale per *output row* costs nothing extra. What stays inside is a sum
# of products of **shifted integers**, and that is where the engineering is. An int8
# matrix kernel (x86's VNNI, ARM's `sdot`, GPU tensor cores) multiplies **int8 by int8**
# and adds the products into **int32 accumulators**. A shifted integer $q - z$ ranges over
# $-255 \dots 255$: it needs 9 bits and does not fit such a kernel. Real kernels therefore
# never shift before they multiply.
#
# **Your derivation.** Rewrite $\sum_k (q_{x,k} - z_x)(q_{W,jk} - z_W[j])$ so that the
# only part whose cost grows like batch × out × in is a matrix product of the **stored
# integers themselves**, and every other part, a **zero-point correction**, depends on the
# input alone, on the weight alone, or on neither, and so costs far less (a part that
# depends on the weight alone can even be computed once, when the layer is built).
#
# A worked example of a smaller case, a zero point on one side only: for $a = (3, 5, 2)$,
# $b = (1, -2, 4)$ and $c = 2$,
#
# $$\sum_k (a_k - c)\, b_k \;=\; \sum_k a_k b_k \;-\; c \sum_k b_k \;=\; (3 - 10 + 8) - 2 \cdot 3 \;=\; -5,$$
#
# the same as multiplying the shifted values, $1 \cdot 1 + 3 \cdot (-2) + 0 \cdot 4 = -5$;
# $\sum_k b_k$ depends on $b$ alone. Yours has a zero point on both sides.
#
# Then write `_int8_linear` from your expansion. Its contract also asks for exactness:
# the integer part of every output must be the exact integer sum, as an int8 kernel's
# int32 accumulator holds it (numpy's `int8 @ int8` computes in int8 and wraps around
# without a word). The check cell watches what numpy computes with the arrays it passes
# in (`tinytorch.testing.spied`, which follows them through `.astype`): no shifted copy
# of the whole input or weight may appear.
#
# <details><summary>Hint 1</summary>
#
# Do to both zero points what the worked example did to one: multiply the shifted
# product out, as in school algebra, and put $\sum_k$ in front of every piece. In each
# piece, which factors depend on $k$, and which can move out of the sum?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Once the sums are pulled apart, ask of each piece which indices it still carries: the
# input row (the `...` of `(..., in)`), the output $j$, both, or neither. That is its
# shape, and it decides how numpy's broadcasting adds it onto the `(..., out)`
# accumulators. A piece that carries neither is not zero just because it has no $k$ left.
# </details>
#
# <details><summary>Hint 3</summary>
#
# How many bits does one product of two int8 need? A sum of 40 of them? Of $2^{15}$? And
# at which point may float32 enter without breaking the exactness the contract asks for?
# `w_zero_point` may be one number or one per output row: does your code care?
# </details>
#
# <details><summary>The approach</summary>
#
# The expansion separates what couples the input and the weight through $k$, which only
# a matrix product can compute, from what involves one side alone or neither, which
# collapses to something small once its sum is taken. Computing each piece in a dtype
# wide enough for its largest value keeps the integer part exact, and the float scales
# and the bias belong to the real-valued layer, so they can only act on a finished
# integer sum. The check's special inputs (everything at its zero point, every product at
# 127 · 127, sums past $2^{24}$) each test one of these decisions.
# </details>

# %% nbgrader={"grade": false, "grade_id": "int8-linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _int8_linear(q_x, x_scale, x_zero_point, q_w, w_scale, w_zero_point, bias=None):
    """The integer core of QuantizedLinear.

    Contract: q_x int8 (..., in) with scalar x_scale (float) and x_zero_point (int); q_w
    int8 (out, in) with w_scale float32 (out,) and w_zero_point an int or an int array
    (out,) (0 for symmetric weights); bias float32 (out,) or None. Returns a float32 numpy
    array (..., out): the Linear layer applied to the values the integers stand for, plus
    the bias. The integer part of each output (the sum over `in` of the products of the
    shifted integers) is exact for any int8 inputs and zero points and `in` up to 2^15
    (so that it fits an int32), also where it exceeds float32's exact integers (2^24): with
    scales 1, zero points 0 and no bias the output is that exact integer sum, rounded once
    to float32. As in an int8 kernel, the only computation on the whole (..., in) input or (out, in) weight is a
    matrix product of the stored integers themselves (widened, never shifted by a zero
    point) and sums over `in`.
    """
    # Idea: expand the shifted product; what depends on one side only is cheap.
    ### BEGIN SOLUTION
    x32, w32 = q_x.astype(np.int32), q_w.astype(np.int32)
    acc = x32 @ w32.T                                          # both operands: the int8 kernel's product
    acc = acc - x_zero_point * w32.sum(axis=1)                 # the weight alone (once per layer)
    acc = acc - x32.sum(axis=-1, keepdims=True) * np.asarray(w_zero_point)  # the input alone
    acc = acc + q_w.shape[1] * x_zero_point * np.asarray(w_zero_point)      # neither
    out = acc.astype(np.float32) * (np.float32(x_scale) * w_scale)
    if bias is not None:
        out = out + bias
    return out.astype(np.float32)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-int8-linear", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _dequantized_reference(q_x, xs, xz, q_w, ws, wz, bias):
    """The layer in float64 on the values the integers stand for: what _int8_linear must equal."""
    x = (q_x.astype(np.float64) - xz) * np.float64(np.float32(xs))
    w = (q_w.astype(np.float64) - np.reshape(wz, (-1, 1))) * ws.astype(np.float64)[:, None]
    return x @ w.T + (0 if bias is None else bias)


_rng = np.random.default_rng(5)
_qx = _rng.integers(-128, 128, (3, 2, 40)).astype(np.int8)
_qw = _rng.integers(-128, 128, (5, 40)).astype(np.int8)
_ws = _rng.uniform(0.01, 0.1, 5).astype(np.float32)
_wz = np.array([0, -3, 17, -128, 127])
_b = _rng.standard_normal(5).astype(np.float32)
# first the accumulator's width (no zero points yet): one too narrow would fail every value check below
_full = np.full((1, 40), 127, dtype=np.int8)
assert_equal(_int8_linear(_full, 1.0, 0, _full, np.ones(1, np.float32), 0), np.array([[40 * 127.0 ** 2]], np.float32),
             "40 products of 127·127 = 645,160: needs int32, not int8/int16")
_rb = np.random.default_rng(6)
_bx, _bw = (_rb.integers(100, 128, (16, 4096)).astype(np.int8) for _ in range(2))
assert_equal(_int8_linear(_bx, 1.0, 0, _bw, np.ones(16, np.float32), 0),
             (_bx.astype(np.int64) @ _bw.astype(np.int64).T).astype(np.float32),
             "sums of 4096 products near 127² reach ~6.6e7 > 2^24, where float32 sums round: "
             "the exact integer sum, rounded once to float32")
for _wzk, _label in [(0, "symmetric weights (zero point 0)"), (_wz, "a weight zero point per row"),
                     (-9, "one weight zero point for all rows")]:
    _got = _int8_linear(_qx, 0.05, 7, _qw, _ws, _wzk, _b)
    assert_equal((_got.shape, _got.dtype), ((3, 2, 5), np.dtype(np.float32)), f"{_label}: shape (..., out), float32")
    assert_close(_got, _dequantized_reference(_qx, 0.05, 7, _qw, _ws, _wzk, _b), rtol=1e-5, atol=0,
                 what=f"{_label}: == the layer on the dequantized values, plus the bias")
_ones = np.ones(5, np.float32)
assert_equal(_int8_linear(np.full((2, 40), 7, np.int8), 0.5, 7, _qw, _ones, _wz, _b), np.tile(_b, (2, 1)),
             "inputs all at their zero point are real zeros: every correction must cancel, leaving the bias")
assert_equal(_int8_linear(_qx[0], 0.5, 7, np.tile(_wz[:, None], (1, 40)).astype(np.int8), _ones, _wz, _b),
             np.tile(_b, (2, 1)), "weights all at their rows' zero points are real zeros: only the bias is left")
_bz = np.array([50, -60, 0, 127, -128, 1, -1, 33] * 2)
assert_equal(_int8_linear(_bx, 1.0, -100, _bw, np.ones(16, np.float32), _bz),
             ((_bx.astype(np.int64) + 100) @ (_bw.astype(np.int64) - _bz[:, None]).T).astype(np.float32),
             "the same inputs with zero points -100 (input) and 50, -60, ... (weights): the row sums (about "
             "520,000) and the corrections they enter need int32 as much as the product (int16 wraps at 32,767)")
_, _log = spied(lambda qx, qw: _int8_linear(qx, 0.05, 7, qw, _ws, _wz, _b), _qx, _qw)
_shifted = [e for e in _log if e[0] in ("add", "subtract", "multiply", "true_divide", "negative")
            and any(shape in (_qx.shape, _qw.shape) for shape in e[1])]
_products = [e for e in _log if e[0] in ("matmul", "dot", "einsum", "tensordot", "inner")]
check(_products and not _shifted,
      "the only work on the whole (3, 2, 40) input or (5, 40) weight is the product of the stored integers (and "
      "sums over `in`): no zero point subtracted from them first (and a matrix product must be seen)",
      got={"elementwise arithmetic on a whole operand": _shifted, "products": _products},
      expected="no elementwise arithmetic on a whole operand; one product of the widened int8 arrays")
print(f"✓ _int8_linear; the products numpy computed: {_products}")

# %% [markdown]
# Now that your expansion works, look at its terms again. The correction with the input's
# row sums is the only one that must be computed anew for every input, and it is
# multiplied by the weights' zero points. With **symmetric weights** ($z_W = 0$) it
# vanishes, and the remaining corrections depend on the weight alone, or on nothing:
# they fold into one integer per output, computed when the layer is built. This is why
# PyTorch quantizes weights symmetrically by default and activations affinely (their
# zero point, after a ReLU, sits at $q_{min}$, and symmetric activations would waste half
# the levels on negatives that never come).
#
# The layer around your core is provided. `QuantizedLinear.from_float(linear,
# input_scale, input_zero_point, weight_observer)` quantizes the weight once, per channel
# (by default with a symmetric observer; an affine one works too and keeps its zero
# points), and keeps **real int8**: `weight_int8` is a tensor of dtype `int8`, one byte per
# weight, beside the float32 scales and the float32 bias. They are the layer's buffers
# (module 03), so `state_dict()` holds them and a checkpoint saves them (section 10 checks
# it). `forward` quantizes the input with the calibrated activation parameters,
# runs your integer core, and returns a float32 `Tensor`: floats in and floats out, so
# quantized and float layers mix freely. Section 7 goes further and keeps the outputs in
# int8.

# %%
#| export
def _weight_qparams(weight, weight_observer):
    """(observer, scales (out,), zero points (out,) or None when they are all 0)."""
    observer = weight_observer()
    observer(weight)
    scale, zero_point = observer.calculate_qparams()
    rows = (weight.shape[0],)
    zero_point = None if np.all(zero_point == 0) else np.broadcast_to(zero_point, rows).astype(np.int64)
    return observer, np.broadcast_to(scale, rows).astype(np.float32), zero_point


def _default_weight_observer():
    return PerChannelMinMaxObserver(ch_axis=0, qscheme=per_channel_symmetric)


class QuantizedLinear(Module):
    """A Linear with int8 weights and int32 accumulation (torch.ao.nn.quantized.Linear, float
    in and out). Build it with from_float or from_observed; it does not train. Its state
    (the int8 weight, the scales and zero points, the bias) is buffers, so state_dict(),
    save_checkpoint and load_state_dict carry it."""

    def __init__(self, weight_int8, weight_scale, bias, input_scale, input_zero_point,
                 input_quant_min=QINT8_MIN, input_quant_max=QINT8_MAX, weight_zero_point=None):
        super().__init__()
        self.out_features, self.in_features = np.shape(weight_int8)
        self.register_buffer("weight_int8", Tensor(np.asarray(weight_int8, dtype=np.int8)))  # (out, in)
        self.register_buffer("weight_scale", Tensor(np.asarray(weight_scale, dtype=np.float32)))  # (out,)
        self.register_buffer("weight_zero_point", None if weight_zero_point is None  # None: symmetric weights
                             else Tensor(np.asarray(weight_zero_point, dtype=np.int64)))  # (out,)
        self.register_buffer("bias", None if bias is None else Tensor(np.asarray(bias, dtype=np.float32)))
        self.register_buffer("input_scale", Tensor(np.float64(input_scale)))  # 0-d
        self.register_buffer("input_zero_point", Tensor(np.int64(input_zero_point)))  # 0-d
        self.input_quant_min, self.input_quant_max = int(input_quant_min), int(input_quant_max)

    @classmethod
    def from_float(cls, linear, input_scale, input_zero_point, weight_observer=None,
                   input_quant_min=QINT8_MIN, input_quant_max=QINT8_MAX):
        weight = linear.weight.numpy().astype(np.float32)
        observer, scale, zero_point = _weight_qparams(weight, weight_observer or _default_weight_observer)
        q_w = _quantize(weight, scale[:, None], 0 if zero_point is None else zero_point[:, None],
                        observer.quant_min, observer.quant_max)
        bias = None if linear.bias is None else linear.bias.numpy()
        return cls(q_w, scale, bias, input_scale, input_zero_point, input_quant_min, input_quant_max, zero_point)

    @classmethod
    def from_observed(cls, observed):
        """From an ObservedLinear (or QATLinear): its calibrated input observer and its qconfig."""
        act = observed.activation_post_process
        scale, zero_point = act.calculate_qparams()
        return cls.from_float(observed.linear, float(scale), int(zero_point), observed.qconfig.weight,
                              act.quant_min, act.quant_max)

    def quantize_input(self, input):
        """The input as int8, with the calibrated activation parameters."""
        x = _array(input)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"QuantizedLinear: input of shape {x.shape} does not fit in_features={self.in_features}")
        return _quantize(x, np.float32(self.input_scale.item()), self.input_zero_point.item(),
                         self.input_quant_min, self.input_quant_max)

    def forward(self, input):
        return Tensor(_int8_linear(self.quantize_input(input), self.input_scale.item(), self.input_zero_point.item(),
                                   self.weight_int8.numpy(), self.weight_scale.numpy(), self._w_zero_point(),
                                   None if self.bias is None else self.bias.numpy()))

    def _w_zero_point(self):
        return 0 if self.weight_zero_point is None else self.weight_zero_point.numpy()

    def weight(self):
        """The weight as a QTensor (torch's QuantizedLinear.weight() returns one too)."""
        zero_point = np.zeros(self.out_features, np.int64) if self.weight_zero_point is None else self._w_zero_point()
        return QTensor(self.weight_int8.numpy(), self.weight_scale.numpy(), zero_point, axis=0)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"input_scale={self.input_scale.item():.4g}, input_zero_point={self.input_zero_point.item()}")


# %% [markdown]
# ### A systems look: the bytes
#
# **Predict first.** A `Linear(256, 10)` has 2,560 weights and 10 biases. How many bytes
# does its float32 weight take, and how many does `QuantizedLinear`'s stored int8 weight
# take? And the whole quantized layer, with its scales and float bias?

# %%
predicted_float_weight_bytes = None  # your number: the float32 weight
predicted_int8_weight_bytes = None  # your number: qlinear.weight_int8.nbytes
predicted_quantized_layer_bytes = None  # your number: int8 weight + scales + bias

# %%
with preserved_state():
    tinytorch.manual_seed(0)
    _lin = nn.Linear(256, 10)
_ql = QuantizedLinear.from_float(_lin, input_scale=0.02, input_zero_point=-128)
_float_bytes = _lin.weight.numpy().nbytes
print(f"float32 weight: {_float_bytes} bytes ({_lin.weight.numpy().dtype}); "
      f"int8 weight: {_ql.weight_int8.nbytes} bytes ({_ql.weight_int8.dtype}): "
      f"{_float_bytes / _ql.weight_int8.nbytes:.1f}x smaller")
_q_total = _ql.weight_int8.nbytes + _ql.weight_scale.nbytes + _ql.bias.nbytes
print(f"whole layer: float {_float_bytes + _lin.bias.numpy().nbytes} bytes, quantized {_q_total} bytes "
      f"(+ {_ql.weight_scale.nbytes} bytes of scales, {_ql.bias.nbytes} of bias)")
print("your predictions (float weight, int8 weight, quantized layer):", predicted_float_weight_bytes,
      predicted_int8_weight_bytes, predicted_quantized_layer_bytes)
_xs = np.abs(np.random.default_rng(0).standard_normal((4, 256))).astype(np.float32)
print("max |quantized - float| on 4 inputs:",
      float(np.abs(_ql(Tensor(_xs)).numpy() - _lin(Tensor(_xs)).numpy()).max()))

# %% [markdown]
# <details><summary>The bytes, explained (open after you have compared your prediction)</summary>
#
# `nbytes` counts the array's buffer, so these figures are exact on every machine: the
# weight is exactly 4x smaller; the whole layer a bit less than 4x, because the per-row
# scales and the bias stay float32 (they grow with `out`, the weight with `out × in`).
# </details>
#
# ## 7. Integer-only inference: requantize the accumulator
#
# `QuantizedLinear` turns its int32 accumulators into floats, and the next layer quantizes
# those floats again. **Integer-only inference** (Jacob et al., 2018, the scheme behind
# TensorFlow Lite and gemmlowp; PyTorch's FBGEMM and QNNPACK kernels work the same way)
# skips the float round trip: a layer's int32 accumulators go straight to the int8 integers
# that the next layer wants, on that layer's calibrated grid $(s_y, z_y)$. A phone's
# integer unit and a microcontroller without a floating-point unit run the whole network
# like this.
#
# Leave the bias aside for now (where an integer machine adds it is a question of
# section 10): the layer's output is then $y_j = s_x s_W[j]\, A_j$. In steps of the output grid that is
# $y_j / s_y = M_j A_j$ with the real number $M_j = s_x s_W[j] / s_y$, and by section 3
# the output integer is $z_y$ plus the nearest integer to $M_j A_j$, saturated. $M_j$
# is a constant of the layer, usually far below 1. An integer machine has no float
# multiply, so $M_j$ is stored as a **fixed-point number**: an integer **multiplier** $m$
# with 31 significant bits, $2^{30} \le m < 2^{31}$ (it fits an int32), and a **shift**
# $r$, so that $M \approx m / 2^r$. Then $M A \approx m A / 2^r$: one integer
# multiplication (in 64 bits: $|A| < 2^{31}$ and $m < 2^{31}$ keep the product below
# $2^{62}$) and a division by a power of two, which is a right shift.
#
# Two functions, both yours:
#
# - `_quantize_multiplier(M)` finds $(m, r)$: of all numbers $m / 2^r$ with a 31-bit
#   $m$, the one nearest to $M$. **A worked example in decimal**, with 3 significant digits
#   instead of 31 bits: $M = 0.0004567$ becomes $457 / 10^6$. The power of ten is the one
#   that gives the integer exactly 3 digits ($100 \le m < 1000$), and the digits beyond
#   are rounded away: $456.7 \to 457$.
# - `_requantize(acc, m, r, z, q_min, q_max)` computes $z$ plus the integer nearest to
#   $m \cdot acc / 2^r$, saturated, **with integer arithmetic only**: exact, also where
#   $m \cdot acc$ is far beyond the $2^{53}$ integers a float64 holds exactly. Halfway
#   cases go up (towards $+\infty$), with one rounding, as TensorFlow Lite's single-rounding
#   reference path does (gemmlowp's classic path rounds twice, halves away from zero).
#
# <details><summary>Hint 1</summary>
#
# Every positive float is a fraction in $[\frac12, 1)$ times a power of two, and the
# float already stores the two apart (numpy has a function that hands you both). How many
# bits of the fraction can a 31-bit $m$ hold, and what is $r$ then?
# </details>
#
# <details><summary>Hint 2</summary>
#
# Rounding can carry, as $99.96$ rounded to 3 digits is no longer a 3-digit number. Is
# there a fraction in $[\frac12, 1)$ whose 31-bit rounding breaks the contract's bounds on
# $m$? What is the nearest number $m / 2^r$ with a 31-bit $m$ then?
# </details>
#
# <details><summary>Hint 3</summary>
#
# numpy's `>>` on int64 divides by a power of two and rounds towards $-\infty$, negative
# numbers included: $\lfloor t \rfloor$ with $t = m \cdot acc / 2^r$. On the real line,
# which $t$ have the nearest integer $k$ (halves going up)? Which $t$ have the floor $k$?
# Compare the two intervals.
# </details>
#
# <details><summary>Hint 4</summary>
#
# What does numpy give for `np.int32(2**31 - 1) * np.int32(2)`? And how many of the bits
# of a 62-bit product survive in a float64?
# </details>
#
# <details><summary>The approach</summary>
#
# A float already stores $M$ the way the multiplier wants it, its digits apart from its
# size; the contract's bounds on $m$ say how many digits to keep and the nearest-number
# requirement how to drop the rest, for every $M$, including those where rounding
# carries. Requantizing is exact only if every intermediate value is: choose the integer
# width from the largest possible product, and express the rounded division by $2^r$ as
# something integers do exactly. Saturation is about the integer that is finally stored.
# </details>

# %% nbgrader={"grade": false, "grade_id": "requantize", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _quantize_multiplier(multiplier):
    """Contract: multiplier a positive finite float or float64 numpy array (one per output
    channel). Returns (m, shift), int64 numpy arrays of its shape, with 2^30 <= m < 2^31
    and m / 2^shift the nearest such number to multiplier:
    |m * 2^-shift - multiplier| <= 2^-(shift + 1). Raises ValueError, naming the value,
    for a multiplier that is not positive and finite."""
    # Idea: any positive real number is some 31-bit integer times a power of two: which ones?
    ### BEGIN SOLUTION
    real = np.asarray(multiplier, dtype=np.float64)
    if not np.all(np.isfinite(real) & (real > 0)):
        raise ValueError(f"the multiplier must be positive and finite, got {multiplier}")
    fraction, exponent = np.frexp(real)                       # real = fraction * 2**exponent, fraction in [1/2, 1)
    m = np.round(fraction * 2.0 ** 31).astype(np.int64)
    shift = (31 - exponent).astype(np.int64)
    carry = m == 2 ** 31                                      # rounded up into a 32nd bit
    return np.where(carry, m // 2, m), np.where(carry, shift - 1, shift)
    ### END SOLUTION


def _requantize(acc, multiplier, shift, zero_point, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """Contract: acc an integer numpy array (..., out) with |acc| < 2^31; multiplier
    (2^30 <= m < 2^31) and shift (1 <= shift <= 62) ints or int arrays that broadcast
    against acc (one per output channel); zero_point an int; quant_min < quant_max within
    int8's range. Returns an int8 numpy array of acc's shape: zero_point plus the integer
    nearest to acc * multiplier / 2^shift (halfway cases rounded up, towards +infinity),
    saturated at quant_min / quant_max. Exact for every such input: integer arithmetic
    only, also where acc * multiplier exceeds float64's exact integers (2^53)."""
    # Idea: a product that cannot overflow, then a division by 2^shift that rounds.
    ### BEGIN SOLUTION
    shift = np.asarray(shift, dtype=np.int64)
    product = np.asarray(acc, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)
    q = (product + (np.int64(1) << (shift - 1))) >> shift
    return np.clip(q + zero_point, quant_min, quant_max).astype(np.int8)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-requantize", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
for _real, _expect in [(0.5, (2 ** 30, 31)), (0.75, (3 * 2 ** 29, 31)), (3.0, (3 * 2 ** 29, 29)),
                       (1 - 2.0 ** -40, (2 ** 30, 30))]:
    _m, _r = _quantize_multiplier(_real)
    assert_equal((int(_m), int(_r)), _expect, f"(multiplier, shift) for {_real!r}")
_reals = np.array([1e-6, 3.7e-4, 0.0123, 0.29, 0.999999, 1.7, 1 - 2.0 ** -33])
_m, _r = _quantize_multiplier(_reals)
assert_equal((_m.shape, _r.shape, _m.dtype, _r.dtype), ((7,), (7,), np.dtype(np.int64), np.dtype(np.int64)),
             "one (multiplier, shift) per value, int64")
check(np.all((_m >= 2 ** 30) & (_m < 2 ** 31)), "every multiplier has 31 significant bits: 2^30 <= m < 2^31",
      got=_m, expected="in [1073741824, 2147483648)")
_err = np.abs(_m * 2.0 ** -_r - _reals) * 2.0 ** (_r + 1)    # in units of half the last bit
check(np.all(_err <= 1), "m / 2^shift is the nearest 31-bit fixed-point number to each value (error <= half a unit)",
      got=_err, expected="<= 1 everywhere")
assert_raises(ValueError, _quantize_multiplier, 0.0, match="0")
for _bad in (-0.5, float("inf"), float("nan")):
    assert_raises(ValueError, _quantize_multiplier, _bad, what=f"_quantize_multiplier({_bad}): not positive and finite")
_acc = np.array([-5, -3, -1, 1, 3, 5, 6, 1000, -1000])
assert_equal(_requantize(_acc, 2 ** 30, 31, 0), np.array([-2, -1, 0, 1, 2, 3, 3, 127, -128], np.int8),
             "times 0.5 (2^30 / 2^31): halves go up (-2.5 -> -2, 0.5 -> 1, 2.5 -> 3); beyond the grid, saturated")
assert_equal(_requantize(_acc[:7], 2 ** 30, 31, -100), np.array([-102, -101, -100, -99, -98, -97, -97], np.int8),
             "the zero point -100 is added to the rounded integer")
assert_equal(_requantize(np.array([200, -100, 60, -300]), 2 ** 30, 31, 50), np.array([127, 0, 80, -100], np.int8),
             "zero point 50: 100 + 50 = 150 is beyond the grid and saturates at 127 (the stored integer saturates, "
             "not the rounded product before the zero point is added)")
assert_equal(_requantize(np.array([-100, 100]), 2 ** 30, 31, -100), np.array([-128, -50], np.int8),
             "zero point -100: -50 - 100 = -150 saturates at -128")
assert_equal(_requantize(np.array([[40, 40], [-40, -40]]), np.array([3 * 2 ** 29, 2 ** 30]), np.array([33, 36]), 0),
             np.array([[8, 1], [-7, -1]], np.int8),
             "one (multiplier, shift) per output column: 40 * 3/16 = 7.5 -> 8, 40/64 = 0.625 -> 1, -7.5 -> -7")
assert_equal(_requantize(np.array([1996956708, -1996956708]), 1109573887, 55, 0), np.array([61, -61], np.int8),
             "acc * m = 2^55 * 61.5 minus 36: just below a halfway point, so 61 and -61; float64 holds the "
             "product only to 2^9 and rounds it onto the halfway point")
assert_equal(_requantize(np.array([2 ** 31 - 1]), 2 ** 31 - 1, 56, 0), np.array([64], np.int8),
             "the largest product, (2^31 - 1)^2 / 2^56 = 63.99...: needs int64, an int32 product wraps around")
assert_equal(_requantize(np.array([40, -40, 6, -6]), 2 ** 30, 31, 0, quant_min=-8, quant_max=7),
             np.array([7, -8, 3, -3], np.int8), "a four-bit grid (quant_min -8, quant_max 7): 20 and -20 saturate "
             "at the grid's own ends, not int8's")
print(f"✓ _quantize_multiplier, _requantize; 0.0123 ≈ {int(_m[2])} / 2^{int(_r[2])}")

# %% [markdown]
# ## 8. Fake quantization and the straight-through estimator
#
# Post-training quantization rounds a model that was trained without knowing it would be
# rounded. **Quantization-aware training** (QAT) lets the model learn under the rounding:
# during training every quantized tensor is replaced by its **fake-quantized** version,
# $\operatorname{fq}(x)$ = `_dequantize(_quantize(x))` in one float op, so the forward
# pass sees exactly the values the int8 model will compute with.
#
# The backward pass has a problem: the rounding is a staircase, its derivative is 0 almost
# everywhere, and a gradient of 0 teaches nothing. The **straight-through estimator**
# (Bengio et al., 2013) pretends the *rounding* is the identity when it differentiates,
# and keeps everything else of $\operatorname{fq}$ as it is. Work out what that rule gives
# for $\partial \operatorname{fq}(x) / \partial x$ in the two situations an element can
# be in: its integer inside the grid, and its integer beyond an end, where the saturation
# holds the output still whatever $x$ does.
#
# PyTorch's `torch.fake_quantize_per_tensor_affine` does exactly this. Write it as a
# `tinytorch.autograd.Function` (module 06): `forward` computes the fake-quantized values
# and saves what `backward` needs; `backward` returns one gradient per argument of
# `forward` (`None` for the scale, zero point and range, which are not learned here).
# `scale` and `zero_point` arrive as numpy values that broadcast against `x` (one per
# channel, for weights).
#
# <details><summary>Hint 1</summary>
#
# What does `backward` need to know about each element, and how few bits does that take?
# (`ctx.save_for_backward` takes Tensors, as PyTorch's does; a plain numpy array kept on
# `ctx` works too.)
# </details>
#
# <details><summary>Hint 2</summary>
#
# Which integer decides whether an element was clamped: the one before the clamp or the
# one after, and computed by which arithmetic? Try it on the element whose integer is
# exactly $q_{max}$, and on one that rounds to $q_{max}$ from just beyond the grid.
# </details>
#
# <details><summary>The approach</summary>
#
# The forward's values are fixed by the contract: those of your `_quantize` followed by
# `_dequantize`, kept in the input's float dtype (no int8 in between). What the forward
# adds is memory for the backward: the derivative you worked out above differs between
# the two situations an element can be in, so the backward must know, per element, which
# one it was in, and needs nothing else. The other four arguments are not learned.
# </details>

# %% nbgrader={"grade": false, "grade_id": "fake-quantize", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class FakeQuantizeFunction(Function):
    """Quantize-then-dequantize with a straight-through gradient."""

    @staticmethod
    def forward(ctx, x, scale, zero_point, quant_min, quant_max):
        """Contract: x a float32 or float64 Tensor; scale (float32, > 0) and zero_point (ints)
        numpy values broadcasting against it (one in all, or one per channel);
        quant_min < quant_max ints. Returns a Tensor of x's shape and x's dtype (float32 in,
        float32 out; float64 in, float64 out; per tensor and per channel alike): each element
        replaced by the real value its quantized integer stands for, with the integers of
        _quantize (and of PyTorch's fake_quantize_* functions). Keeps for backward (saved, or
        set on ctx) what the rule you derived in the prose needs, and nothing of x's size
        more."""
        # Idea: the values of the int8 model, in float; what will the backward need to know?
        ### BEGIN SOLUTION
        a = x.numpy()
        q = np.round(a * (np.float32(1.0) / np.asarray(scale, dtype=np.float32))) + zero_point
        inside = (q >= quant_min) & (q <= quant_max)
        ctx.save_for_backward(Tensor(inside))
        out = (np.clip(q, quant_min, quant_max) - zero_point) * scale
        return Tensor(out.astype(a.dtype))
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad):
        """Contract: grad a Tensor of x's shape. Returns (grad_x, None, None, None, None):
        grad_x of grad's shape and dtype, the straight-through gradient you derived in the
        prose, equal to PyTorch's (the check cell tests the boundary cases)."""
        # Idea: the rounding is invisible to the gradient, the clamp is not.
        ### BEGIN SOLUTION
        (inside,) = ctx.saved_tensors
        return np.where(inside.numpy(), grad.numpy(), 0).astype(grad.dtype), None, None, None, None
        ### END SOLUTION


# %% [markdown]
# The functional forms, named as PyTorch's, are provided:

# %%
#| export
def fake_quantize_per_tensor_affine(input, scale, zero_point, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """torch.fake_quantize_per_tensor_affine, with the straight-through gradient."""
    if not float(scale) > 0:
        raise ValueError(f"fake_quantize_per_tensor_affine: scale must be positive, got {scale}")
    if not quant_min <= int(zero_point) <= quant_max:
        raise ValueError(f"zero_point {zero_point} is outside [{quant_min}, {quant_max}]")
    return FakeQuantizeFunction.apply(input, np.float32(scale), int(zero_point), int(quant_min), int(quant_max))


def fake_quantize_per_channel_affine(input, scale, zero_point, axis, quant_min=QINT8_MIN, quant_max=QINT8_MAX):
    """torch.fake_quantize_per_channel_affine: scale[c], zero_point[c] along `axis`."""
    scale = np.asarray(scale.numpy() if isinstance(scale, Tensor) else scale, dtype=np.float32)
    zero_point = np.asarray(zero_point.numpy() if isinstance(zero_point, Tensor) else zero_point, dtype=np.int64)
    if scale.shape != (input.shape[axis],) or zero_point.shape != scale.shape:
        raise ValueError(f"fake_quantize_per_channel_affine: need one scale and zero point per channel "
                         f"({input.shape[axis]} along axis {axis}), got {scale.shape} and {zero_point.shape}")
    return FakeQuantizeFunction.apply(input, _channel_broadcast(scale, axis, input.ndim),
                                      _channel_broadcast(zero_point, axis, input.ndim),
                                      int(quant_min), int(quant_max))


# %% nbgrader={"grade": true, "grade_id": "test-fake-quantize", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_xf = Tensor(np.array([-3.0, -1.0, -0.26, 0.0, 0.3, 1.1, 1.5, 4.0], dtype=np.float32), requires_grad=True)
_yf = fake_quantize_per_tensor_affine(_xf, 0.5, 1, -4, 3)
_expect = _dequantize(_quantize(_xf.numpy(), np.float32(0.5), 1, -4, 3), np.float32(0.5), 1)
assert_equal(_yf.numpy(), _expect, "fake quant forward == dequantize(quantize(x)) (3 bits)")
assert_equal(_yf.dtype, np.dtype(np.float32), "fake quant keeps the input's dtype")
_yf.backward(Tensor(np.arange(1, 9, dtype=np.float32)))
# integers round(x / 0.5) + 1: -5 -1 0 1 2 3 4 9 -> inside [-4, 3] for the middle five
assert_equal(_xf.grad.numpy(), np.array([0, 2, 3, 4, 5, 6, 0, 0], dtype=np.float32),
             "straight-through: upstream gradient inside the range (q = 3 = q_max included), 0 outside")
_w = Tensor(np.array([[0.1, -0.2], [3.0, 5.0]], dtype=np.float32), requires_grad=True)
_yw = fake_quantize_per_channel_affine(_w, np.array([0.1, 1.0]), np.array([0, 0]), 0, -2, 1)
assert_close(_yw.numpy(), np.array([[0.1, -0.2], [1.0, 1.0]]), rtol=1e-6, atol=0, what="per-channel fake quant (2 bits)")
assert_equal(_yw.dtype, np.dtype(np.float32), "per-channel fake quant keeps the input's dtype (float32 in, float32 out)")
_yw.sum().backward()
assert_equal(_w.grad.numpy(), np.array([[1, 1], [0, 0]], dtype=np.float32), "per-channel gradient mask")
_x64 = Tensor(np.array([[0.1, -0.2], [3.0, 5.0]], dtype=np.float64))
assert_equal(fake_quantize_per_tensor_affine(_x64, 0.5, 1, -4, 3).dtype, np.dtype(np.float64),
             "per-tensor fake quant keeps the input's dtype (float64 in, float64 out)")
assert_equal(fake_quantize_per_channel_affine(_x64, np.array([0.1, 1.0]), np.array([0, 0]), 0, -2, 1).dtype,
             np.dtype(np.float64), "per-channel fake quant keeps the input's dtype (float64 in, float64 out)")
_xr = np.array([2.25, -4.5, 11.25, 4.125, 1.09], dtype=np.float32)      # as in section 3's check: x / s and
_sr = np.array([0.3, 0.6, 0.9, 0.15, 0.02], dtype=np.float32)           # section 3's rule round apart
assert_equal(fake_quantize_per_channel_affine(Tensor(_xr), _sr, np.zeros(5, np.int64), 0).numpy(),
             np.array([8, -8, 13, 28, 54], dtype=np.float32) * _sr,
             "the grid points of PyTorch's integers 8, -8, 13, 28, 54 (section 3's rule; a true division x / s "
             "rounds each of these the other way)")
assert_equal(fake_quantize_per_tensor_affine(Tensor(_xr[:1]), 0.3, 0).numpy(), np.array([8], np.float32) * _sr[:1],
             "per tensor, 2.25 with scale 0.3: PyTorch's integer 8, not the 7 of a true division")
_xe = Tensor(np.array([116.48757, -78.458176], dtype=np.float32), requires_grad=True)  # an int8 range edge each:
_ye = fake_quantize_per_channel_affine(_xe, np.array([0.91362804, 0.6105694], np.float32), np.zeros(2, np.int64), 0)
_ye.sum().backward()  # section 3's integers are 128 and -128, a true division's 127 and -129
assert_equal(_xe.grad.numpy(), np.array([0, 1], dtype=np.float32),
             "the gradient mask at the int8 range's edges, PyTorch's: inside or outside is decided by the forward's "
             "own integer (the same arithmetic as the forward), not by another computation of it")
_xm = Tensor(np.linspace(-3, 3, 1000, dtype=np.float32), requires_grad=True)
_ctx = fake_quantize_per_tensor_affine(_xm, 0.5, 1, -4, 3).grad_fn.attrs["ctx"]
_kept = list(_ctx.saved_tensors) + [_v for _k, _v in vars(_ctx).items() if _k != "_saved"]  # saved, or set on ctx
_saved_bytes = sum(np.asarray(t.numpy() if isinstance(t, Tensor) else t).nbytes for t in _kept
                   if isinstance(t, (Tensor, np.ndarray)))
check(_saved_bytes <= _xm.numpy().size, "FakeQuantizeFunction.forward keeps for backward one byte per element at "
      "most, saved or set on ctx: what the rule needs to know of each element, not x itself (4 bytes each in "
      "float32, 8 in float64, kept alive until backward runs)",
      got=f"{_saved_bytes} bytes kept for 1000 float32 elements", expected="at most 1000 bytes")
print("✓ FakeQuantizeFunction; 3-bit outputs", _yf.numpy(), "gradient", _xf.grad.numpy())

# %% [markdown]
# The forward is a staircase and the gradient a box; the STE trains the staircase as if
# it were the straight line through it, inside the box. The box reaches half a step past
# the staircase's flat ends (here -2.125 and 1.875, where the flat parts are -2 and 1.75):
# an x that *rounds* to the end integer is inside the grid, and only one that rounds past
# it is clamped.

# %%
_xs = Tensor(np.linspace(-3, 3, 601, dtype=np.float32), requires_grad=True)
_ys = fake_quantize_per_tensor_affine(_xs, 0.25, 0, -8, 7)
_ys.sum().backward()
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3))
ax1.plot(_xs.numpy(), _xs.numpy(), ":", color="gray", label="x")
ax1.plot(_xs.numpy(), _ys.numpy(), label="fake_quantize(x), 4 bits, s = 0.25")
ax1.set_title("forward: what the quantized model computes (on this 4-bit grid)", fontsize=10)
ax1.legend(fontsize=8)
ax2.plot(_xs.numpy(), _xs.grad.numpy(), color="C3", label="straight-through gradient")
ax2.plot(_xs.numpy(), np.zeros(601), ":", color="gray", label="true derivative (0 a.e.)")
ax2.set_ylim(-0.2, 1.3)
ax2.set_title("backward: 1 inside the range, 0 where clamped", fontsize=10)
ax2.legend(fontsize=8)
for _ax in (ax1, ax2):
    _ax.set_xlabel("x")
fig.tight_layout()
plt.show()
torch = optional_torch()  # PyTorch for the comparison, or None (it says so)
if torch is not None:
    _xt = torch.tensor(_xs.numpy(), requires_grad=True)
    torch.fake_quantize_per_tensor_affine(_xt, 0.25, 0, -8, 7).sum().backward()
    print("vs torch.fake_quantize_per_tensor_affine: max |Δ forward| =",
          float(np.abs(_ys.numpy() - torch.fake_quantize_per_tensor_affine(_xt, 0.25, 0, -8, 7).detach().numpy()).max()),
          "| gradients equal:", bool(np.array_equal(_xs.grad.numpy(), _xt.grad.numpy())))

# %% [markdown]
# ## 9. Quantizing a model: observe, calibrate, convert
#
# PyTorch's post-training ("static") quantization is three steps:
# `prepare` inserts an observer before each layer to be quantized, the user runs
# **calibration** batches through the prepared model, and `convert` swaps each observed
# layer for its quantized version, built from the observer's range. Our version does the
# same for every `Linear` of a model. A **`QConfig`** (torch's name) says which observers
# to use: a factory for the activation observer and one for the weight observer
# (`default_qconfig`: `MinMaxObserver` per tensor, affine, for activations;
# `PerChannelMinMaxObserver`, symmetric, for weights). `ObservedLinear` (provided) is the
# prepared layer: it feeds its input to its observer, then runs the float `Linear`.
#
# First the walk. Write `_swap_modules(module, cls, make)`: replace, **in place**, every
# descendant of `module` that is an instance of `cls` by `make(child)`, however deeply it
# is nested (a `Sequential` inside a model inside a `Sequential`); return how many were
# swapped. A replaced module is not searched further (its replacement may contain the
# original, as `ObservedLinear` does).
#
# <details><summary>Hint 1</summary>
#
# A child is replaced by assigning to its name on its **parent** (module 03's
# `__setattr__` registers a Module value as a child, keeping its place). Which method lists
# (name, child) pairs?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The children of the children need the same treatment, and searching a child is the
# same problem as searching the whole model. But once a child has been replaced, should
# the search go on inside the replacement?
# </details>
#
# <details><summary>The approach</summary>
#
# Every module is either one to replace or a container that may hold some, and a
# container is searched exactly as the whole model is: that is the recursion, with the
# counts of the parts adding up to the count of the whole. A replacement happens on the
# parent, under the child's name, so that it takes the child's place; and what was just put
# in is not searched again.
# </details>

# %% nbgrader={"grade": false, "grade_id": "swap-modules", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
QConfig = namedtuple("QConfig", ["activation", "weight"])  # torch.ao.quantization.QConfig: observer factories
default_qconfig = QConfig(activation=MinMaxObserver, weight=_default_weight_observer)


def _swap_modules(module, cls, make):
    """Contract: `cls` a class or tuple of classes; `make` a function of one module. Replaces
    in place every descendant of `module` (not `module` itself) that is an instance of
    `cls` by make(descendant), at the same place in its parent and at any depth, without
    searching inside a replaced one; returns the number of replacements (an int)."""
    # Idea: a child is replaced through its parent, and parents nest.
    ### BEGIN SOLUTION
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, cls):
            setattr(module, name, make(child))
            count += 1
        else:
            count += _swap_modules(child, cls, make)
    return count
    ### END SOLUTION


class ObservedLinear(Module):
    """A Linear with an observer on its input (what torch's prepare makes of a Linear)."""

    def __init__(self, linear, qconfig=default_qconfig):
        super().__init__()
        self.linear = linear
        self.qconfig = qconfig
        self.activation_post_process = qconfig.activation()

    def forward(self, input):
        return self.linear(self.activation_post_process(input))


# %% nbgrader={"grade": true, "grade_id": "test-swap-modules", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))
    _net = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), _inner, nn.Sequential(nn.Sequential(nn.Linear(3, 2))))
try:
    _n = _swap_modules(_net, nn.Linear, ObservedLinear)
except RecursionError:
    _n = "RecursionError"
check(_n != "RecursionError", "_swap_modules ends: a replacement is not searched. Each ObservedLinear holds the "
      "Linear it replaced; searching inside it finds that Linear again, swaps it for a new ObservedLinear, and so on "
      "until Python's recursion limit", got=_n, expected="a count of swaps")
assert_equal(_n, 4, "swaps counted at every depth")
_kinds = [type(m).__name__ for _, m in _net.named_modules() if type(m).__name__ in ("Linear", "ObservedLinear")]
assert_equal(_kinds, ["ObservedLinear", "Linear"] * 4, "each Linear now sits inside an ObservedLinear")
assert_equal(type(_net[2][2]).__name__, "ObservedLinear", "a nested Sequential's Linear is swapped in place")
assert_equal(_swap_modules(_net, nn.ReLU, lambda m: nn.Identity()), 2, "works for any class")
assert_equal(_swap_modules(nn.Linear(2, 2), nn.Linear, ObservedLinear), 0, "the module itself is not swapped")
_mixed = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sequential(nn.Sigmoid(), nn.Linear(2, 2)))
assert_equal(_swap_modules(_mixed, (nn.ReLU, nn.Sigmoid), lambda m: nn.Identity()), 2,
             "a tuple of classes: any of them is swapped (convert swaps (ObservedLinear, QATLinear))")


class _WideLinear(nn.Linear):  # a subclass is an instance of its base class too
    pass


_sub = nn.Sequential(_WideLinear(2, 2), nn.ReLU())
assert_equal(_swap_modules(_sub, nn.Linear, lambda m: nn.Identity()), 1,
             "a subclass of Linear is a Linear: it is swapped too, as isinstance says")
print(f"✓ _swap_modules; {_n} Linear layers observed in", [n for n, m in _net.named_modules()
                                                         if isinstance(m, ObservedLinear)])

# %% [markdown]
# Now the pipeline. Write `quantize_model(model, calibration_loader, qconfig)`: it returns
# a model in which every `Linear` is a `QuantizedLinear`, ready to deploy, and the caller
# keeps the float model it passed in (as `torch.ao.quantization.convert` does with
# `inplace=False`). The contract lists what the checks hold it to; the design is yours.
# Before writing it, answer three questions, each of which one line of your code must
# settle: which inputs must each observer see, so that the range it reports is the one the
# deployed layer will meet (think of every layer between it and the data, `Dropout`
# included)? What may the function change of the caller's model, and what can it change
# instead? And what would calibration cost if autograd recorded it, for nothing?
#
# <details><summary>Hint 1</summary>
#
# A `QuantizedLinear` needs an input scale and zero point, and a float `Linear` has none.
# Which of the provided pieces produces them, and what has to happen before that piece
# can answer?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The contract allows no change at all to the caller's model: not a layer, not a
# parameter, not its mode. What can you change instead? (Module 03's `Module` has no
# `clone`; Python's standard library copies any object graph.)
# </details>
#
# <details><summary>The approach</summary>
#
# Work backwards from the result: each quantized layer is built from an observer that has
# seen that layer's inputs, so the observers must sit in the model while the calibration
# data flows through it, and they must see what the deployed model would see, which rules
# out both training-mode layers and the cost of a recorded graph. None of that may touch
# the caller's model, and which observers are used, and so which integer ranges the
# converted layers get, is the qconfig's decision, not yours.
# </details>

# %% nbgrader={"grade": false, "grade_id": "quantize-model", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _batch_inputs(batch):
    """The model's input from a loader's batch: (inputs, targets) pairs or bare inputs."""
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def quantize_model(model, calibration_loader, qconfig=default_qconfig):
    """Post-training static quantization of every Linear in `model`.

    Contract: `model` a Module (not itself a Linear: wrap it in a Sequential) that is not
    changed (its parameters, its layers and its train/eval mode stay as they were);
    `calibration_loader` an iterable of batches ((inputs, targets) or inputs); `qconfig` a
    QConfig whose two observer factories are the ones used. Returns a new model, in eval
    mode, in which each Linear, at any depth, is a QuantizedLinear whose input scale, zero
    point and integer range come from a qconfig.activation observer that saw, for every
    calibration batch, the inputs that layer meets once deployed; calibration records no
    autograd graph and leaves grad mode as it found it. Each weight is quantized with a
    qconfig.weight observer. Raises TypeError for a bare Linear.
    """
    if isinstance(model, Linear):
        raise TypeError("quantize_model: the model is a bare Linear; wrap it in a Sequential so "
                        "the layer has a parent to be swapped in")
    # Idea: observe on a copy, then swap each observed layer for its integer version.
    ### BEGIN SOLUTION
    qmodel = copy.deepcopy(model)
    _swap_modules(qmodel, Linear, lambda linear: ObservedLinear(linear, qconfig))
    qmodel.eval()
    with no_grad():
        for batch in calibration_loader:
            qmodel(_batch_inputs(batch))
    _swap_modules(qmodel, ObservedLinear, QuantizedLinear.from_observed)
    return qmodel
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-quantize-model", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
from tinytorch.nn import Dropout

with preserved_state():
    tinytorch.manual_seed(1)
    _fm = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), Dropout(0.5), nn.Sequential(nn.Linear(16, 3)))
    # the largest value in the first batch, the smallest in the last: only all three give the range
    _batches = [(tinytorch.randn(8, 6) + shift, None) for shift in (2.5, 0.0, -2.5)]
    _qm = quantize_model(_fm, _batches)
_ql = [m for m in _qm.modules() if isinstance(m, QuantizedLinear)]
assert_equal(len(_ql), 2, "both Linear layers (one nested) become QuantizedLinear")
assert_equal(sum(isinstance(m, nn.Linear) for m in _fm.modules()), 2, "the float model keeps its Linear layers")
check(_fm.training and not _qm.training, "the copy is in eval mode; the float model's mode is untouched",
      got=(_fm.training, _qm.training), expected=(True, False))
_fm.eval()
quantize_model(_fm, _batches[:1])
check(not _fm.training and not _fm[3].training, "a float model in eval mode stays in eval mode (quantize_model "
      "leaves the caller's mode as it found it, whichever it was)", got=(_fm.training, _fm[3].training),
      expected=(False, False))
_fm.train()
_all_x = np.concatenate([b[0].numpy() for b in _batches])
_s0, _z0 = _calculate_qparams(_all_x.min(), _all_x.max(), symmetric=False)


def _scale_after(parts):
    """The first layer's input scale had calibration seen only the batches `parts`."""
    seen = np.concatenate([_batches[i][0].numpy() for i in parts])
    return float(_calculate_qparams(seen.min(), seen.max(), symmetric=False)[0])


_some = [_p for _k in (1, 2) for _p in itertools.combinations(range(3), _k)
         if not np.isclose(_scale_after(_p), _s0, rtol=1e-6, atol=0)
         and np.isclose(_ql[0].input_scale, _scale_after(_p), rtol=1e-6, atol=0)]
check(not _some, "calibration runs every batch of the loader: the first layer's input scale is the one of only "
      "some of the three batches", got=f"the scale of batch(es) {_some[0]} alone" if _some else None,
      expected="the scale of batches 0, 1 and 2 together")
assert_close(_ql[0].input_scale, float(_s0), rtol=1e-6, atol=0, what="first layer's input range: all batches together")
_fm.eval()
with tinytorch.no_grad():
    _h = nn.ReLU()(_fm[0](Tensor(_all_x))).numpy()         # eval mode: dropout is the identity
_s1, _ = _calculate_qparams(_h.min(), _h.max(), symmetric=False)
assert_close(_ql[1].input_scale, float(_s1), rtol=1e-5, atol=0, what="second layer's range: the eval-mode activations")
with tinytorch.no_grad():
    _d = np.abs(_qm(Tensor(_all_x)).numpy() - _fm(Tensor(_all_x)).numpy()).max()
check(_d < 0.05, "the quantized model's outputs stay close to the float model's", got=float(_d), expected="< 0.05")
_q4 = QConfig(activation=functools.partial(MinMaxObserver, quant_min=-8, quant_max=7),
              weight=functools.partial(PerChannelMinMaxObserver, ch_axis=0, qscheme=per_channel_symmetric,
                                       quant_min=-8, quant_max=7))
_ql4 = [m for m in quantize_model(_fm, _batches, _q4).modules() if isinstance(m, QuantizedLinear)]
assert_equal([(m.input_quant_min, m.input_quant_max) for m in _ql4], [(-8, 7), (-8, 7)],
             "a 4-bit qconfig: each layer's input integer range comes from the qconfig's activation observer")
_s4, _z4 = _calculate_qparams(_all_x.min(), _all_x.max(), symmetric=False, quant_min=-8, quant_max=7)
assert_close(_ql4[0].input_scale, float(_s4), rtol=1e-6, atol=0, what="first layer's 4-bit input scale")
_wrange = [(int(m.weight_int8.min()), int(m.weight_int8.max())) for m in _ql4]
assert_equal(_wrange, [(-8, 7), (-8, 7)], "4-bit weights: the qconfig's weight observer sets each row's grid")
_grad_modes = []


class _GradModeSpy(MinMaxObserver):
    """A MinMaxObserver that notes whether a graph was being recorded when it saw a batch."""

    def forward(self, x):
        _grad_modes.append(tinytorch.autograd.is_grad_enabled())
        return super().forward(x)


with preserved_state():
    quantize_model(_fm, _batches, QConfig(activation=_GradModeSpy, weight=default_qconfig.weight))
    _after = tinytorch.autograd.is_grad_enabled()
check(len(_grad_modes) == 6 and not any(_grad_modes),
      "calibration records no graph: grad recording is off while each layer's observer sees each batch",
      got=f"grad recording {_grad_modes}", expected="[False] * 6 (2 layers x 3 batches)")
check(_after, "grad recording is back on after quantize_model (it changes no global state)",
      got=_after, expected=True)
print(f"✓ quantize_model; max |quantized - float| on the calibration data {_d:.4f}")

# %% [markdown]
# ## 10. Post-training quantization of the digits networks
#
# A real model: the 8×8 digits of module 05, standardised with the training side's
# statistics, and an MLP with two hidden layers trained with Adam for a moment
# (module 08's recipe). Calibration uses 8 batches of 64 **training** digits — the test
# set is only for measuring.

# %%
from tinytorch.data import DataLoader, Digits, TensorDataset
from tinytorch.optim import Adam
from tinytorch.training import evaluate, fit

_train, _test = Digits(train=True), Digits(train=False)
_images = _train.data.numpy().reshape(-1, 64)
_mu, _sd = _images.mean(0), _images.std(0) + 1e-3
X_train, y_train = Tensor((_images - _mu) / _sd), _train.targets
X_test, y_test = Tensor((_test.data.numpy().reshape(-1, 64) - _mu) / _sd), _test.targets


def digits_mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def accuracy_of(model):
    return evaluate(model, [(X_test, y_test)])["accuracy"]


tinytorch.manual_seed(0)
float_model = digits_mlp()
_t0 = time.perf_counter()
fit(float_model, nn.CrossEntropyLoss(), Adam(float_model.parameters(), lr=3e-3),
    DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True), epochs=10, progress=False)
print(f"trained in {time.perf_counter() - _t0:.1f} s; float32 test accuracy {accuracy_of(float_model):.4f}")
calibration = list(DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True))[:8]

# %% [markdown]
# **Predict first.** How many points of test accuracy will int8 post-training quantization
# (min/max observers, per-channel weights) cost this MLP? And how many times smaller is its
# stored weight?

# %%
predicted_int8_drop = None  # your number, in accuracy points (float minus int8; one test digit is 0.28)
predicted_weight_shrink = None  # your number: float32 weight bytes / int8 weight bytes

# %%
int8_model = quantize_model(float_model, calibration)
print(int8_model)
_acc_f, _acc_q = accuracy_of(float_model), accuracy_of(int8_model)
_fbytes = sum(p.numpy().nbytes for n, p in float_model.named_parameters() if n.endswith("weight"))
_qbytes = sum(m.weight_int8.nbytes for m in int8_model.modules() if isinstance(m, QuantizedLinear))
print(f"test accuracy: float32 {_acc_f:.4f}, int8 {_acc_q:.4f}: drop {100 * (_acc_f - _acc_q):+.2f} points "
      f"({round((_acc_f - _acc_q) * len(y_test)):+d} of {len(y_test)} test digits; each is {100 / len(y_test):.2f} "
      f"points, so a digit or two either way is noise); "
      + ("no prediction written" if predicted_int8_drop is None else f"you predicted {predicted_int8_drop}"))
print(f"weights: float32 {_fbytes:,d} bytes, int8 {_qbytes:,d} bytes ({_fbytes / _qbytes:.0f}x smaller); "
      + ("no prediction written" if predicted_weight_shrink is None else f"you predicted {predicted_weight_shrink}x"))
with tinytorch.no_grad():
    _agree = np.mean(float_model(X_test).numpy().argmax(1) == int8_model(X_test).numpy().argmax(1))
print(f"the two models predict the same class for {100 * _agree:.1f} % of the test digits")

# %% [markdown]
# **Shipping it.** The point of the int8 model is the smaller file on the device. Its
# `state_dict()` holds each layer's int8 weight, scales, zero points and bias, so module
# 08's `save_checkpoint` writes them and `load_checkpoint` restores them into a model of
# the same structure: here, a quantized copy of a model that was never trained,
# calibrated on other data, must give exactly `int8_model`'s outputs once loaded.

# %%
from tinytorch.serialization import load_checkpoint, save_checkpoint

_files = {}
for _name, _model in (("float32", float_model), ("int8", int8_model)):
    _files[_name] = io.BytesIO()
    save_checkpoint(_files[_name], _model)
    print(f"{_name} checkpoint: {len(_files[_name].getvalue()):,d} bytes")
print(f"the int8 file is {len(_files['float32'].getvalue()) / len(_files['int8'].getvalue()):.2f}x smaller "
      f"(the weights 4x; the scales and biases stay float32, and the file has a header)")
with preserved_state():
    tinytorch.manual_seed(123)
    _fresh = quantize_model(digits_mlp(), [X_test[:8]])
_files["int8"].seek(0)
load_checkpoint(_files["int8"], _fresh)
_state = int8_model.state_dict()
check(all(_state[k].dtype == v.dtype for k, v in _fresh.state_dict().items())
      and any(v.dtype == np.int8 for v in _state.values()),
      "the int8 model's state_dict holds int8 weights, and loading keeps every dtype",
      got={k: str(v.dtype) for k, v in _state.items()})
with tinytorch.no_grad():
    assert_equal(_fresh(X_test).numpy(), int8_model(X_test).numpy(),
                 "a fresh quantized model, loaded from the int8 checkpoint, gives the saved model's outputs")
print("✓ the int8 checkpoint round-trips:", list(_state))

# %% [markdown]
# <details><summary>Why so little (open after you have compared your prediction)</summary>
#
# Expect a drop of at most a point or so, often none at all (a digit or two may flip either
# way; the exact figure depends on the trained weights, so read the printed one): at 8 bits
# each weight moves by at most half of 1/255 of its row's range, far less than the noise
# training itself leaves in the weights.
# </details>
#
# The number of bits is where it starts to bite. The same pipeline with fewer bits (stored
# in int8 still; only the range shrinks), for the two activation observers:

# %%
def qconfig_bits(bits, activation=MinMaxObserver):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return QConfig(activation=functools.partial(activation, quant_min=lo, quant_max=hi),
                   weight=functools.partial(PerChannelMinMaxObserver, ch_axis=0, qscheme=per_channel_symmetric,
                                            quant_min=lo, quant_max=hi))


BITS = [8, 6, 5, 4, 3, 2]
sweep = {name: [accuracy_of(quantize_model(float_model, calibration, qconfig_bits(b, obs))) for b in BITS]
         for name, obs in [("min/max", MinMaxObserver),
                           ("percentile 99.9", functools.partial(PercentileObserver, 99.9)),
                           ("histogram", HistogramObserver)]}
for name, accs in sweep.items():
    print(f"{name:16s}" + "  ".join(f"{b} bits {a:.3f}" for b, a in zip(BITS, accs)))
LOSSY_BITS = {name: [b for b, a in zip(BITS, accs) if _acc_f - a > 0.01] for name, accs in sweep.items()}
for name, lossy in LOSSY_BITS.items():
    print(f"{name}: more than 1 point below float32 ({_acc_f:.3f}) at "
          + (", ".join(f"{b}" for b in lossy) + " bits" if lossy else "no width measured"))
fig, ax = plt.subplots(figsize=(6, 3.4))
for (name, accs), marker in zip(sweep.items(), "os^"):  # one position per measured width, widest first
    ax.plot(range(len(BITS)), accs, marker + "-", label=f"PTQ, activations {name}")
ax.axhline(_acc_f, color="gray", ls="--", label="float32")
ax.set_xlabel("bits (weights and activations; the widths measured)")
ax.set_xticks(range(len(BITS)), [str(b) for b in BITS])
ax.set_ylabel("test accuracy")
ax.set_title("digits MLP: post-training quantization vs bit width", fontsize=10)
ax.legend(fontsize=8, loc="lower left")
fig.tight_layout()
plt.show()

# %% [markdown]
# Expect two regimes: a flat stretch at the wide widths, where the rounding error is far
# below the noise that training leaves in the weights, then a fall, steep once it starts,
# when the grid gets too coarse (each bit fewer doubles the step). Where the fall begins
# depends on the model, its trained weights, the calibration batches and the observer, so
# read it from the printed lines, not from this text. Clipping the activations' tail
# usually helps at the narrow widths, where every level counts, and matters little at 8
# bits; the percentile observer clips by a fixed rule, your histogram search by the error
# at the width in hand, so compare the two lines where the grid is coarsest. Section 12 asks whether *training* with the rounding can recover what
# post-training quantization loses at the widths where this run measured a loss.
#
# The same `quantize_model` handles any model whose layers it can find: the digits **CNN**
# of module 09 has two `Linear` layers after its convolution, and only those are quantized
# (the convolution stays in float here; the end of this section quantizes it too).

# %%
tinytorch.manual_seed(0)
cnn = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                    nn.Linear(8 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))
X_img_train = Tensor(X_train.numpy().reshape(-1, 1, 8, 8))
X_img_test = Tensor(X_test.numpy().reshape(-1, 1, 8, 8))
fit(cnn, nn.CrossEntropyLoss(), Adam(cnn.parameters(), lr=3e-3),
    DataLoader(TensorDataset(X_img_train, y_train), batch_size=64, shuffle=True), epochs=4, progress=False)
_cal_img = list(DataLoader(TensorDataset(X_img_train, y_train), batch_size=64))[:8]
qcnn = quantize_model(cnn, _cal_img)
_acc_cf = evaluate(cnn, [(X_img_test, y_test)])["accuracy"]
_acc_cq = evaluate(qcnn, [(X_img_test, y_test)])["accuracy"]
print(f"CNN test accuracy: float32 {_acc_cf:.4f}, Linear layers int8 {_acc_cq:.4f} "
      f"(drop {100 * (_acc_cf - _acc_cq):+.2f} points)")
print("quantized layers:", [n for n, m in qcnn.named_modules() if isinstance(m, QuantizedLinear)])

# %% [markdown]
# ### The digits MLP in integers only
#
# `int8_model` still uses floats between its layers: each `QuantizedLinear` rescales its
# accumulators to float32, adds a float bias, the `ReLU` runs on floats, and the next layer
# quantizes again. With your `_requantize`, the hidden activations can stay int8 all the
# way: the only float operations left are quantizing the input image once and scaling
# the last layer's accumulators into logits. What is left to design is one layer of it.
#
# Write `_requantized_linear(q_x, layer, scale, zero_point, quant_min, quant_max, relu)`:
# a `QuantizedLinear` applied to int8 inputs on its calibrated input grid, its output
# (after a ReLU when `relu` is true) delivered as int8 on the grid
# `(scale, zero_point, quant_min, quant_max)` that the next layer expects. Its contract is
# TensorFlow Lite's: bit for bit what an integer machine computes, which allows a float
# only for the layer's constants, each prepared once and rounded once, while every value
# computed from the activations is an exact integer. The accumulators are plumbing: your
# `_int8_linear` with unit scales and no bias returns them (exact integers, by its
# contract, while they stay below $2^{24}$, as here). Three questions are yours:
#
# - **The multiplier.** Which two grids does it convert between, for output $j$?
# - **The bias.** It is a float32 per output, and section 7 left it aside. An integer
#   machine has to add an integer somewhere between the accumulators and the int8 output.
#   Where does one rounding of the bias lose least, and which integer stands for $b_j$
#   there?
# - **The ReLU.** There is no float to compare with 0. Which integers on the output grid
#   stand for negative numbers, and what does the ReLU do to them?
#
# The check builds small layers whose scales are powers of two, so that each of these
# decisions changes an integer you can work out by hand.
#
# <details><summary>Hint 1</summary>
#
# Write the layer's real output as one scale times one sum: $y_j = s_x s_W[j]\,(A_j + ?)$.
# What goes in place of the question mark, and is it an integer? Compare with adding a
# rounded bias after `_requantize`: how many roundings does each output get then?
# </details>
#
# <details><summary>Hint 2</summary>
#
# On the output grid the real 0 is the integer $z_y$. After a ReLU, what is the least
# integer the layer can return, and which of `_requantize`'s arguments sets it?
# </details>
#
# <details><summary>Hint 3</summary>
#
# The multiplier takes the real ratio of two grids, in float64 (the input scale is kept
# as a float64, the weight's scales as float32). Which two grids, for output $j$?
# </details>
#
# <details><summary>The approach</summary>
#
# Everything the layer adds must live on the grid its accumulators live on, so that one
# requantization turns the sum into the output integers with a single rounding; that
# fixes the grid on which the bias is rounded, once, when the layer is prepared. The
# multiplier is the ratio of that grid to the output's, per output channel. A ReLU on a
# grid with zero point $z_y$ keeps the integers at or above $z_y$, and the saturation
# that `_requantize` already does can keep them there.
# </details>

# %% nbgrader={"grade": false, "grade_id": "requantized-linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _requantized_linear(q_x, layer, scale, zero_point, quant_min=QINT8_MIN, quant_max=QINT8_MAX, relu=False):
    """Integer-only inference of one layer, as TensorFlow Lite defines its int8 kernels.

    Contract: q_x int8 (..., in), the input on layer's calibrated input grid
    (layer.input_scale, layer.input_zero_point); layer a QuantizedLinear whose accumulators
    stay below 2^24 in magnitude; (scale, zero_point, quant_min, quant_max) the output's
    grid, quant_min < quant_max within int8's range. Returns int8 (..., out): the layer's
    output y = x W^T + b (max(y, 0) where relu is true) on that grid, bit for bit as an
    integer machine computes it: the layer's real constants (the bias, the rescaling) are
    each rounded once, to the nearest int64 or 31-bit fixed-point number, from their exact
    float64 values; every value computed from the activations is an exact integer, with
    one rounding at the end (_requantize's, halves up) and saturation.
    """
    # Idea: what the machine adds must share a grid with what it adds to.
    ### BEGIN SOLUTION
    ones = np.ones(layer.out_features, np.float32)
    acc = _int8_linear(q_x, 1.0, layer.input_zero_point.item(), layer.weight_int8.numpy(), ones,
                       layer._w_zero_point()).astype(np.int64)         # exact below 2^24
    acc_scale = np.float64(layer.input_scale.item()) * layer.weight_scale.numpy().astype(np.float64)  # (out,)
    if layer.bias is not None:
        acc = acc + np.round(layer.bias.numpy() / acc_scale).astype(np.int64)  # the bias on the accumulators' grid
    multiplier, shift = _quantize_multiplier(acc_scale / np.float64(scale))
    low = max(quant_min, zero_point) if relu else quant_min             # the ReLU: nothing below the real 0
    return _requantize(acc, multiplier, shift, zero_point, low, quant_max)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-requantized-linear", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _layer(q_w, w_scale, bias=None, x_scale=0.125, x_zero_point=0, w_zero_point=None):
    """A QuantizedLinear built from its integers (scales powers of two: every product is exact)."""
    return QuantizedLinear(np.array(q_w, np.int8), np.array(w_scale, np.float32),
                           None if bias is None else np.array(bias, np.float32), x_scale, x_zero_point,
                           weight_zero_point=w_zero_point)


_q = _requantized_linear(np.array([[10, 20], [3, 1]], np.int8), _layer([[1, 2], [3, -1]], [0.5, 0.25]), 0.25, 0)
assert_equal((_q.shape, _q.dtype), ((2, 2), np.dtype(np.int8)), "shape (batch, out), int8")
assert_equal(_q, np.array([[13, 1], [1, 1]], np.int8),
             "input scale 1/8, weight scales [1/2, 1/4], output grid 1/4: y / s_y = [[12.5, 1.25], [1.25, 1.0]], "
             "halves going up")
_q = _requantized_linear(np.array([[1, 0]], np.int8), _layer([[1, 0], [3, 0]], [0.5, 0.25], bias=[1 / 16, 0.0]),
                         0.25, 0)
assert_equal(_q, np.array([[1, 0]], np.int8),
             "output 0: y = 1/16 + 1/16 (the bias) = 1/8, half a step of the output grid 1/4, so 1; output 1: "
             "y = 3/32, 0.375 steps, so 0")
_q = _requantized_linear(np.array([[0, 0], [2, 0]], np.int8), _layer([[1, 0]], [0.5], bias=[0.23]), 0.0625, 0)
assert_equal(_q, np.array([[4], [6]], np.int8),
             "output grid 1/16: y = 0.23 and 0.23 + 2/16, that is 3.68 and 5.68 steps (one rounding, to the "
             "nearest)")
_q = _requantized_linear(np.array([[0, 0]], np.int8), _layer([[1, 0]], [0.5], bias=[-0.23]), 0.0625, 0)
assert_equal(_q, np.array([[-4]], np.int8), "a negative bias: y = -0.23, -3.68 steps of 1/16")
_x, _neg = np.array([[-8, 0], [8, 0], [1, 0]], np.int8), _layer([[1, 0]], [0.5])
assert_equal(_requantized_linear(_x, _neg, 0.25, 10, relu=True), np.array([[10], [12], [10]], np.int8),
             "output grid (1/4, zero point 10), relu=True: y = -1/2, 1/2, 1/16 before the ReLU")
assert_equal(_requantized_linear(_x, _neg, 0.25, 10, relu=False), np.array([[8], [12], [10]], np.int8),
             "relu=False: negative outputs stay (-1/2 is the integer 8 on the grid of zero point 10)")
assert_equal(_requantized_linear(_x, _neg, 0.25, -128, relu=True), np.array([[-128], [-126], [-128]], np.int8),
             "a grid calibrated after a ReLU (zero point -128): the real 0 is the least integer")
_q = _requantized_linear(np.array([[-2, 4]], np.int8), _layer([[5, 7]], [0.5], x_zero_point=-4, w_zero_point=[3]),
                         0.5, 0)
assert_equal(_q, np.array([[5]], np.int8), "zero points on both sides: shifted integers (2, 8) and (2, 4) give 36, "
             "36 / 16 = 2.25 real, 4.5 steps of 1/2, so 5")
_q = _requantized_linear(np.array([[127, 127]], np.int8), _layer([[127, 127]], [0.5]), 0.25, 0, -8, 7)
assert_equal(_q, np.array([[7]], np.int8), "saturated at quant_max")
_q = _requantized_linear(np.array([[3]], np.int8), _layer([[1]], [1.0], x_scale=0.5 - 1e-9), 1.0, 0)
assert_equal(_q, np.array([[1]], np.int8), "input scale 0.5 - 1e-9 (a float64 that float32 rounds to 0.5), "
             "accumulator 3: y = 1.5 - 3e-9, just below the halfway point, so 1 (the multiplier computed from "
             "float32 scales is 0.5, and 1.5 rounds up to 2)")
_rng = np.random.default_rng(15)
_big = _layer(_rng.integers(-127, 128, (6, 20)), _rng.uniform(0.002, 0.01, 6), bias=_rng.normal(0, 0.5, 6),
              x_scale=0.03, x_zero_point=-20)
_qx = _rng.integers(-128, 128, (4, 5, 20)).astype(np.int8)
_q = _requantized_linear(_qx, _big, 0.05, -3, relu=True)
_real = np.maximum(_big(Tensor(((_qx.astype(np.float32) + 20) * 0.03))).numpy(), 0) / 0.05 - 3
assert_equal((_q.shape, _q.dtype), ((4, 5, 6), np.dtype(np.int8)), "leading dimensions kept, int8")
_bound = 0.5 + 0.5 * (0.03 * _big.weight_scale.numpy().max() / 0.05) + 1e-4  # half a step, plus the bias's rounding
check(np.all(np.abs(_q - np.clip(_real, -3, 127)) <= _bound),
      "on realistic scales, each output is the nearest integer to the float layer's y / scale + zero point",
      got=np.abs(_q - np.clip(_real, -3, 127)).max(),
      expected=f"<= {_bound:.4f} (half a step, plus half an accumulator step for the bias's rounding)")
print("✓ _requantized_linear: the bias on the accumulators' grid, one rounding, the ReLU at the zero point")


# %% [markdown]
# The provided `integer_only_mlp` runs a `Sequential` of `QuantizedLinear` layers with a
# `ReLU` between each pair on your `_requantized_linear`, each hidden layer landing on the
# next layer's calibrated input grid; the last layer's accumulators become the logits
# (its `_int8_linear`, the one float step at the end).

# %%
def integer_only_mlp(qmodel, x):
    """Logits of a Sequential of QuantizedLinear layers with a ReLU between each pair,
    computed in integers from the input's quantization to the last layer's accumulators;
    also the int8 hidden activations."""
    layers = [m for m in qmodel.modules() if isinstance(m, QuantizedLinear)]
    q, hidden = layers[0].quantize_input(x), []
    for layer, nxt in zip(layers, layers[1:]):
        q = _requantized_linear(q, layer, nxt.input_scale.item(), nxt.input_zero_point.item(),
                                nxt.input_quant_min, nxt.input_quant_max, relu=True)
        hidden.append(q)
    last = layers[-1]
    logits = _int8_linear(q, last.input_scale.item(), last.input_zero_point.item(), last.weight_int8.numpy(),
                          last.weight_scale.numpy(), last._w_zero_point(),
                          None if last.bias is None else last.bias.numpy())
    return logits, hidden


# %% [markdown]
# **Predict first.** Of the test digits, how many will the integer-only MLP classify
# differently from `int8_model`, whose hidden activations went through float32?

# %%
predicted_changed_digits = None  # your number: test digits whose class differs between the two int8 paths

# %%
with tinytorch.no_grad():
    _float_path = int8_model(X_test).numpy()
_int_logits, _int_hidden = integer_only_mlp(int8_model, X_test.numpy())
_changed = int(np.sum(_int_logits.argmax(1) != _float_path.argmax(1)))
_acc_i = float(np.mean(_int_logits.argmax(1) == np.asarray(y_test.numpy())))
print(f"test accuracy: float32 {_acc_f:.4f}; int8, floats between layers {_acc_q:.4f}; integers only {_acc_i:.4f}")
print(f"classes that differ between the two int8 paths: {_changed} of {len(_int_logits)} test digits; "
      + ("no prediction written" if predicted_changed_digits is None else f"you predicted {predicted_changed_digits}"))
_qlayers = [m for m in int8_model.modules() if isinstance(m, QuantizedLinear)]
with tinytorch.no_grad():
    _h = X_test
    for _k, (_layer, _nxt) in enumerate(zip(_qlayers, _qlayers[1:])):
        _h = nn.ReLU()(_layer(_h))
        _diff = np.abs(_nxt.quantize_input(_h).astype(np.int16) - _int_hidden[_k])
        print(f"hidden layer {_k + 1}: {100 * np.mean(_diff > 0):.3f} % of the {_diff.size:,d} int8 activations "
              f"differ from the float path's, by at most {_diff.max()} step(s)")
print(f"max |logit difference| {np.abs(_int_logits - _float_path).max():.2e}")

# %% [markdown]
# <details><summary>Why the two paths agree (open after you have compared your prediction)</summary>
#
# Both paths put each hidden activation on the same grid, the next layer's $(s_y, z_y)$;
# they differ only in how they get there. The float path rounds $y$ in float32 after a
# float bias; the integer path rounds $M A$ exactly, with $M$ kept to 31 bits and the bias
# rounded to the accumulator's grid, whose step $s_x s_W[j]$ is a small fraction of
# $s_y$ (that fraction is $M_j$). So an activation lands one step apart only when its
# exact value lies within about $M_j / 2$ of a halfway point between two integers (and in
# the second hidden layer, also where its inputs already differed): a fraction of a
# percent of them, one step of $s_y$ each. Expect no digit, or one or two, to change class
# (read the printed counts: they depend on the trained weights). What this buys is not
# accuracy but hardware: every operation between the input and the logits is an integer
# one, which is what phones' and microcontrollers' integer units, and int8 accelerators,
# run.
# </details>

# %% [markdown]
# ### Before quantizing a CNN: fold the batch norm into the convolution
#
# A convolutional network (module 09) puts a `BatchNorm2d` after most convolutions. At
# inference, in eval mode, batch norm uses its running statistics: per output channel it
# subtracts a constant, divides by a constant and applies its own affine map, every one
# of them fixed. A chain of fixed affine maps is one affine map, and a convolution followed
# by a per-channel affine map is a convolution. Deployment folds each pair into one
# convolution before quantizing: one layer to run instead of two, one output range to
# observe, one grid to round to, and no float batch norm left between two integer layers.
#
# Write `fuse_conv_bn_eval(conv, bn)` (PyTorch: `torch.nn.utils.fusion.fuse_conv_bn_eval`).
# Start from batch norm's eval-mode definition (module 09): for channel $c$ with running
# mean $\mu_c$, running variance $v_c$, weight $\gamma_c$, bias $\beta_c$ and `eps`,
#
# $$\text{bn}(z)_c = \gamma_c \, \frac{z_c - \mu_c}{\sqrt{v_c + \epsilon}} + \beta_c ,$$
#
# and $z_c$ is output channel $c$ of the convolution, $z = W * x + b$. **Derive** the weight
# and the bias of the one convolution that computes $\text{bn}(W * x + b)$: which of
# $W$'s axes does channel $c$ own, and what happens to $b$? Then think about what can go
# wrong: a convolution without a bias, a batch norm without its affine parameters
# (`affine=False`), and a batch norm still in training mode.
#
# <details><summary>Hint 1</summary>
#
# Write $\text{bn}(z)_c = a_c z_c + d_c$ with two constants per channel. Convolution is
# linear in $W$ for a fixed $x$: $a_c \, (W * x)_c$ is a convolution with which weights?
# </details>

# %% nbgrader={"grade": false, "grade_id": "fuse-conv-bn", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def fuse_conv_bn_eval(conv, bn):
    """A new Conv2d equal to bn(conv(x)) for eval-mode layers (torch.nn.utils.fusion.fuse_conv_bn_eval).

    Contract: `conv` a Conv2d and `bn` a BatchNorm2d over conv's out_channels, both in eval
    mode, bn tracking running statistics. Returns a new Conv2d, in eval mode, with conv's
    geometry (channels, kernel size, stride, padding, dilation, groups) and a bias (even if
    conv had none), whose
    output equals bn(conv(x)) to float32 rounding for every input; conv and bn are left as
    they were. Raises ValueError if either is in training mode (batch norm would use each
    batch's own statistics, which no fixed weight can), if bn has no running statistics,
    or if the channel counts differ.
    """
    from tinytorch.nn.conv import Conv2d

    # Idea: per output channel, batch norm is one multiplication and one addition.
    ### BEGIN SOLUTION
    if conv.training or bn.training:
        raise ValueError("fuse_conv_bn_eval: both layers must be in eval mode (call .eval() first): in "
                         "training mode batch norm normalises with each batch's own statistics")
    if bn.running_mean is None:
        raise ValueError("fuse_conv_bn_eval: the batch norm keeps no running statistics "
                         "(track_running_stats=False), so in eval mode it still uses each batch's")
    if bn.num_features != conv.out_channels:
        raise ValueError(f"fuse_conv_bn_eval: the batch norm has {bn.num_features} channels and the "
                         f"convolution {conv.out_channels} outputs")
    w = conv.weight.numpy().astype(np.float64)
    b = np.zeros(conv.out_channels) if conv.bias is None else conv.bias.numpy().astype(np.float64)
    gamma = np.ones(bn.num_features) if bn.weight is None else bn.weight.numpy().astype(np.float64)
    beta = np.zeros(bn.num_features) if bn.bias is None else bn.bias.numpy().astype(np.float64)
    a = gamma / np.sqrt(bn.running_var.numpy().astype(np.float64) + bn.eps)
    fused = Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                   conv.dilation, conv.groups, bias=True, dtype=conv.weight.dtype)
    with no_grad():
        fused.weight.copy_(Tensor((w * a[:, None, None, None]).astype(fused.weight.dtype)))
        fused.bias.copy_(Tensor(((b - bn.running_mean.numpy()) * a + beta).astype(fused.bias.dtype)))
    return fused.eval()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-fuse-conv-bn", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _conv_bn_pair(bias=True, affine=True, seed=0, tiny_variance=False, in_channels=3):
    with preserved_state():
        tinytorch.manual_seed(seed)
        conv = nn.Conv2d(in_channels, 5, 3, stride=1, padding=1, bias=bias)
        bn = nn.BatchNorm2d(5, affine=affine)
        with tinytorch.no_grad():  # running statistics far from (0, 1), and an affine map that is not the identity
            for _ in range(20):
                bn(conv(tinytorch.randn(4, in_channels, 6, 6) * 3 + 1))
            if affine:
                bn.weight.copy_(tinytorch.rand(5) * 2 + 0.5)
                bn.bias.copy_(tinytorch.randn(5))
            if tiny_variance:  # channel 4's variance far below eps: eps matters
                bn.running_var.copy_(bn.running_var * tinytorch.tensor([1.0, 1.0, 1.0, 1.0, 0.0]) + 1e-6)
    return conv.eval(), bn.eval()


with preserved_state():
    tinytorch.manual_seed(1)
    _xc = tinytorch.randn(2, 3, 7, 7)
    _xc5 = tinytorch.randn(2, 5, 7, 7)
# float32 layers, and float64 ones for the case where eps matters: there a scale of about
# 300 multiplies float32's rounding of both sides beyond any fixed tolerance.
for _bias, _affine, _tiny, _in, _label in [
        (True, True, False, 3, "conv with bias, affine batch norm"),
        (False, True, False, 3, "conv without bias"),
        (True, False, False, 3, "batch norm with affine=False"),
        (True, True, False, 5, "5 input and 5 output channels (which axis of the weight is scaled?)"),
        (True, True, True, 3, "a channel whose variance is far below eps (float64)")]:
    _conv, _bn = _conv_bn_pair(_bias, _affine, tiny_variance=_tiny, in_channels=_in)
    _x_in, _tol = (_xc if _in == 3 else _xc5), dict(rtol=1e-4, atol=1e-5)
    if _tiny:
        _conv, _bn, _x_in, _tol = _conv.double(), _bn.double(), _xc.double(), dict(rtol=1e-10, atol=1e-12)
    _states = lambda: [*(("conv." + _n, _t) for _n, _t in _conv.state_dict().items()),  # noqa: E731
                       *(("bn." + _n, _t) for _n, _t in _bn.state_dict().items())]
    _before = {_n: _t.numpy().copy() for _n, _t in _states()}
    with tinytorch.no_grad():
        _want = _bn(_conv(_x_in)).numpy()
        try:
            _fused = fuse_conv_bn_eval(_conv, _bn)
        except Exception as _exc:  # a broadcast error usually means the scale met the wrong axis of the weight
            _fused = None
            check(False, f"{_label}: fuse_conv_bn_eval runs on a conv of weight shape {tuple(_conv.weight.shape)} "
                  "(out, in, kh, kw); one factor per output channel must meet the weight's axis 0",
                  got=f"{type(_exc).__name__}: {_exc}")
        _got = _fused(_x_in).numpy()
    assert_close(_got, _want, **_tol, what=f"{_label}: fused(x) against bn(conv(x))")
    for _n, _t in _states():
        assert_equal(_t.numpy(), _before[_n], f"{_label}: the caller's {_n} is unchanged (fusing builds a new layer)")
    check(_conv.bias is None if not _bias else _conv.bias is not _fused.bias,
          f"{_label}: the fused layer's bias is its own Parameter, not the caller's conv.bias")
    check(isinstance(_fused, nn.Conv2d) and not _fused.training,
          f"{_label}: the fused layer is a Conv2d in eval mode, ready for inference",
          got=f"{type(_fused).__name__}, training={_fused.training}", expected="Conv2d, training=False")
with preserved_state():
    tinytorch.manual_seed(2)
    _gconv = nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2).eval()
    _gbn = nn.BatchNorm2d(6)
    with tinytorch.no_grad():
        for _ in range(5):
            _gbn(_gconv(tinytorch.randn(2, 4, 9, 9)))
    _gbn.eval()
    _xg = tinytorch.randn(2, 4, 9, 9)
with tinytorch.no_grad():
    _gfused = fuse_conv_bn_eval(_gconv, _gbn)
    assert_close(_gfused(_xg), _gbn(_gconv(_xg)), rtol=1e-4, atol=1e-5,
                 what="a conv with stride 2, padding 2, dilation 2 and 2 groups: the fused layer keeps its geometry")
assert_equal((_gfused.stride, _gfused.padding, _gfused.dilation, _gfused.groups), ((2, 2), (2, 2), (2, 2), 2),
             "the fused conv's stride, padding, dilation and groups")
_conv, _bn = _conv_bn_pair()
assert_raises(ValueError, fuse_conv_bn_eval, _conv.train(), _bn, match="eval",
              what="fusing a convolution in training mode")
assert_raises(ValueError, fuse_conv_bn_eval, _conv.eval(), _bn.train(), match="eval",
              what="fusing a batch norm in training mode")
assert_raises(ValueError, fuse_conv_bn_eval, _conv.eval(), nn.BatchNorm2d(5, track_running_stats=False).eval(),
              match="running", what="fusing a batch norm that keeps no running statistics")
assert_raises(ValueError, fuse_conv_bn_eval, _conv.eval(), nn.BatchNorm2d(4).eval(),
              what="fusing a conv of 5 output channels with a batch norm over 4")
print(f"✓ fuse_conv_bn_eval; largest difference from bn(conv(x)): {np.abs(_got - _want).max():.1e}")

# %% [markdown]
# Now on a trained network: the digits CNN from above, with a batch norm after its
# convolution. Once trained and in eval mode, the pair is folded into one convolution, the
# folded network is compared with the original on the test digits, and its `Linear` layers
# are quantized as before. How many layers does the folded network run, and how close are
# its outputs?

# %%
tinytorch.manual_seed(0)
cnn_bn = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                       nn.Linear(8 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))
fit(cnn_bn, nn.CrossEntropyLoss(), Adam(cnn_bn.parameters(), lr=3e-3),
    DataLoader(TensorDataset(X_img_train, y_train), batch_size=64, shuffle=True), epochs=4, progress=False)
cnn_bn.eval()
cnn_folded = nn.Sequential(fuse_conv_bn_eval(cnn_bn[0], cnn_bn[1]),
                           *[copy.deepcopy(cnn_bn[_i]) for _i in range(2, len(cnn_bn))]).eval()
with tinytorch.no_grad():
    _fold_diff = np.abs(cnn_folded(X_img_test).numpy() - cnn_bn(X_img_test).numpy()).max()
print(f"layers: {len(cnn_bn)} with the batch norm, {len(cnn_folded)} folded; largest logit difference on the "
      f"test digits {_fold_diff:.1e}")
print(f"test accuracy: with batch norm {evaluate(cnn_bn, [(X_img_test, y_test)])['accuracy']:.4f}, folded "
      f"{evaluate(cnn_folded, [(X_img_test, y_test)])['accuracy']:.4f}, folded with int8 Linear layers "
      f"{evaluate(quantize_model(cnn_folded, _cal_img), [(X_img_test, y_test)])['accuracy']:.4f}")

# %% [markdown]
# ### A quantized convolution
#
# The folded CNN still runs its convolution in float. Module 09 turned a convolution into
# one matrix product: `im2col` lays every window of the input out as a column, and the
# weight, seen as a `(C_out, C·kh·kw)` matrix, multiplies the columns. Your `_int8_linear`
# is exactly such a product on integers, so a quantized convolution is the same
# rearrangement around it. Write `_int8_conv2d`. One of module 09's choices does not carry
# over unchanged: look at what `im2col` puts where a window covers the padding, and at
# what that integer stands for on the input's grid.
#
# <details><summary>Hint 1</summary>
#
# Which real value does the integer 0 stand for when the input's zero point is -37? Which
# integer stands for the real 0 that a convolution's padding means?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `_int8_linear` wants the inputs as rows `(..., in)` against a weight `(out, in)`;
# `im2col` gives columns `(N, C·kh·kw, L)`. Which axes must trade places, before and
# after, so that the result comes out `(N, C_out, H_out, W_out)`?
# </details>

# %% nbgrader={"grade": false, "grade_id": "int8-conv2d", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _int8_conv2d(q_x, x_scale, x_zero_point, q_w, w_scale, w_zero_point, bias=None, stride=1, padding=0):
    """The integer core of a quantized Conv2d.

    Contract: q_x int8 (N, C, H, W) standing for x_scale * (q_x - x_zero_point) (a float and
    an int); q_w int8 (C_out, C, kh, kw) with w_scale float32 (C_out,) and w_zero_point an
    int or an int array (C_out,); bias float32 (C_out,) or None; stride and padding ints or
    (height, width) pairs. Returns the float32 (N, C_out, H_out, W_out) convolution
    (torch.nn.functional.conv2d) of the real tensors the integers stand for, padded with
    real zeros, plus the bias. All of its arithmetic on the data is your _int8_linear's,
    called once on int8 operands.
    """
    from tinytorch.nn.conv import im2col

    (sh, sw), (ph, pw) = ((v, v) if np.ndim(v) == 0 else tuple(v) for v in (stride, padding))
    # Idea: module 09's rearrangement around the integer product; mind what the padding means.
    ### BEGIN SOLUTION
    padded = np.pad(q_x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=x_zero_point)  # real 0
    kh, kw = q_w.shape[2:]
    cols = im2col(padded, (kh, kw), (sh, sw))                       # (N, C·kh·kw, L), int8
    out = _int8_linear(cols.transpose(0, 2, 1), x_scale, x_zero_point, q_w.reshape(len(q_w), -1),
                       w_scale, w_zero_point, bias)                 # (N, L, C_out)
    n, _, h, w = padded.shape
    return np.ascontiguousarray(out.transpose(0, 2, 1)).reshape(n, len(q_w), (h - kh) // sh + 1, (w - kw) // sw + 1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-int8-conv2d", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
def _dequantized_conv(q_x, xs, xz, q_w, ws, wz, bias, stride, padding):
    """Module 09's conv2d in float64 on the values the integers stand for: the reference."""
    x = (q_x.astype(np.float64) - xz) * np.float64(np.float32(xs))
    w = (q_w.astype(np.float64) - np.reshape(wz, (-1, 1, 1, 1))) * ws.astype(np.float64)[:, None, None, None]
    b = None if bias is None else Tensor(bias.astype(np.float64))
    return nn.functional.conv2d(Tensor(x), Tensor(w), b, stride, padding).numpy()


_rng = np.random.default_rng(21)
_calls = []
_int8_linear_of_the_notebook = _int8_linear


def _int8_linear(q_x, *args, **kwargs):  # noqa: F811 (the check counts the calls, then puts yours back)
    _calls.append(q_x.dtype)
    return _int8_linear_of_the_notebook(q_x, *args, **kwargs)


try:
    for _case, (_shape, _co, _k, _st, _pd, _xz, _affine) in {
        "1x1, no padding, zero point 0": ((2, 4, 5, 5), 2, (1, 1), 1, 0, 0, False),  # first: no padding to blame
        "3x3, stride 1, padding 1, input zero point -37": ((2, 3, 7, 6), 4, (3, 3), 1, 1, -37, False),
        "3x2, stride (2, 1), padding (0, 2), affine weights": ((1, 2, 8, 7), 3, (3, 2), (2, 1), (0, 2), 25, True),
    }.items():
        _qx = _rng.integers(-128, 128, _shape).astype(np.int8)
        _qw = _rng.integers(-127, 128, (_co, _shape[1]) + _k).astype(np.int8)
        _ws = _rng.uniform(0.001, 0.01, _co).astype(np.float32)
        _wz = _rng.integers(-20, 20, _co) if _affine else 0
        _b = _rng.standard_normal(_co).astype(np.float32)
        _calls.clear()
        _got = _int8_conv2d(_qx, 0.02, _xz, _qw, _ws, _wz, _b, _st, _pd)
        _want = _dequantized_conv(_qx, 0.02, _xz, _qw, _ws, _wz, _b, _st, _pd)
        assert_equal((_got.shape, _got.dtype), (_want.shape, np.dtype(np.float32)), f"{_case}: shape and dtype")
        _look = ("no padding here: look at how the columns and the output are laid out" if _pd == 0
                 else "with padding: the padded positions must stand for real zeros")
        assert_close(_got, _want, rtol=1e-5, atol=1e-4, what=f"{_case}: against module 09's conv2d on the values the "
                                                              f"integers stand for ({_look})")
        check(_calls == [np.dtype(np.int8)], f"{_case}: the arithmetic is your _int8_linear's, called once on int8 "
              f"operands", got=f"{len(_calls)} call(s), input dtypes {[str(d) for d in _calls]}", expected="1 call, int8")
finally:
    _int8_linear = _int8_linear_of_the_notebook
print(f"✓ _int8_conv2d; a 3x3 convolution of a (2, 3, 7, 6) int8 batch, output[0, 0, 0, :3] = {_got[0, 0, 0, :3]}")

# %% [markdown]
# The layer around it (provided, as `QuantizedLinear` is around `_int8_linear`), and the
# digits CNN with every layer that multiplies in integers: the folded convolution with
# its input grid observed on the calibration images, the `Linear` layers as before.

# %%
#| export
class QuantizedConv2d(Module):
    """A Conv2d with int8 weights per output channel (symmetric) and a fixed input grid
    (torch.ao.nn.quantized.Conv2d, float in and out); its state is buffers, as QuantizedLinear's."""

    def __init__(self, weight_int8, weight_scale, bias, input_scale, input_zero_point, stride, padding):
        super().__init__()
        self.out_channels, self.in_channels = np.shape(weight_int8)[:2]
        self.stride, self.padding = stride, padding
        self.register_buffer("weight_int8", Tensor(np.asarray(weight_int8, dtype=np.int8)))  # (out, in, kh, kw)
        self.register_buffer("weight_scale", Tensor(np.asarray(weight_scale, dtype=np.float32)))  # (out,)
        self.register_buffer("bias", None if bias is None else Tensor(np.asarray(bias, dtype=np.float32)))
        self.register_buffer("input_scale", Tensor(np.float64(input_scale)))
        self.register_buffer("input_zero_point", Tensor(np.int64(input_zero_point)))

    @classmethod
    def from_float(cls, conv, input_scale, input_zero_point):
        if conv.groups != 1 or conv.dilation != (1, 1) or isinstance(conv.padding, str):
            raise ValueError(f"QuantizedConv2d: {conv} has groups, dilation or a string padding; the int8 "
                             "convolution here takes groups=1, dilation=1 and numeric padding")
        weight = conv.weight.numpy().astype(np.float32)
        _, scale, _ = _weight_qparams(weight, _default_weight_observer)
        q_w = _quantize(weight, scale[:, None, None, None], 0)
        bias = None if conv.bias is None else conv.bias.numpy()
        return cls(q_w, scale, bias, input_scale, input_zero_point, conv.stride, conv.padding)

    def forward(self, input):
        q_x = _quantize(_array(input), np.float32(self.input_scale.item()), self.input_zero_point.item())
        return Tensor(_int8_conv2d(q_x, self.input_scale.item(), self.input_zero_point.item(),
                                   self.weight_int8.numpy(), self.weight_scale.numpy(), 0,
                                   None if self.bias is None else self.bias.numpy(), self.stride, self.padding))

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, stride={self.stride}, padding={self.padding}, "
                f"input_scale={self.input_scale.item():.4g}, input_zero_point={self.input_zero_point.item()}")


# %%
_image_observer = MinMaxObserver()
for _batch in _cal_img:
    _image_observer(_batch_inputs(_batch))
_img_scale, _img_zero = _image_observer.calculate_qparams()
cnn_int8 = quantize_model(cnn_folded, _cal_img)
_swap_modules(cnn_int8, nn.Conv2d, lambda conv: QuantizedConv2d.from_float(conv, float(_img_scale), int(_img_zero)))
print(cnn_int8)
print(f"test accuracy: folded float {evaluate(cnn_folded, [(X_img_test, y_test)])['accuracy']:.4f}, every "
      f"multiplying layer int8 {evaluate(cnn_int8, [(X_img_test, y_test)])['accuracy']:.4f} (input grid: scale "
      f"{float(_img_scale):.4f}, zero point {int(_img_zero)})")

# %% [markdown]
# ## 11. A systems look: is int8 faster here?
#
# int8 moves 4x fewer bytes, and CPUs with VNNI (x86) or dot-product instructions (ARM)
# multiply four int8 pairs per 32-bit lane per instruction, accumulating in int32: the
# reason phones run int8 models. But *we* compute with numpy. numpy hands float32 matrix
# products to a BLAS library (OpenBLAS, MKL, Accelerate: blocked for the caches,
# vectorised, tuned for years); for integer dtypes it has no BLAS to call and runs a
# generic loop.
#
# **Predict first.** A `Linear(512, 512)` on a batch of 256: how does the time of the int8
# path (quantize the input, your `_int8_linear`) compare with the float32 path
# (`x @ W.T + b` in numpy)? Write the ratio int8 / float32.

# %%
predicted_int8_over_float = None  # your number: time(int8 path) / time(float32 path)

# %%
_rng = np.random.default_rng(0)
_W = (_rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
_bias = np.zeros(512, dtype=np.float32)
_X = np.abs(_rng.standard_normal((256, 512))).astype(np.float32)
_wobs, _wscale, _ = _weight_qparams(_W, _default_weight_observer)  # symmetric: no zero points
_qW = _quantize(_W, _wscale[:, None], 0)
_xs, _xz = _calculate_qparams(_X.min(), _X.max(), symmetric=False)
_qX = _quantize(_X, _xs, _xz)
_acc_int = _qX.astype(np.int32) @ _qW.astype(np.int32).T
_acc_flt = _qX.astype(np.float32) @ _qW.astype(np.float32).T
timings = {
    "float32 x @ W.T + b (BLAS)": median_time(lambda: _X @ _W.T + _bias, repeats=5),
    "int8 path: quantize x + _int8_linear": median_time(
        lambda: _int8_linear(_quantize(_X, _xs, _xz), float(_xs), int(_xz), _qW, _wscale, 0, _bias), repeats=3),
    "  numpy's int32 matmul of those integers": median_time(
        lambda: _qX.astype(np.int32) @ _qW.astype(np.int32).T, repeats=3),
    "  the same integers as float32 (BLAS)": median_time(
        lambda: _qX.astype(np.float32) @ _qW.astype(np.float32).T, repeats=5),
}
for _name, _sec in timings.items():
    print(f"{_name:40s} {_sec * 1e3:8.2f} ms")
_ratio = timings["int8 path: quantize x + _int8_linear"] / timings["float32 x @ W.T + b (BLAS)"]
print(f"int8 / float32 = {_ratio:.1f}; "
      + ("no prediction written" if predicted_int8_over_float is None else f"you predicted {predicted_int8_over_float}"))
print(f"max |acc| = {np.abs(_acc_int).max():,d} < 2^24 = {2 ** 24:,d}: the float32 product of the integers is "
      f"{'exact' if np.array_equal(_acc_int, _acc_flt.astype(np.int32)) else 'NOT exact'}")
print(f"digits MLP on the test set: float32 {median_time(lambda: float_model(X_test), repeats=5) * 1e3:.2f} ms, "
      f"int8 {median_time(lambda: int8_model(X_test), repeats=5) * 1e3:.2f} ms")

# %% [markdown]
# <details><summary>Why (open after you have compared your prediction)</summary>
#
# Expect an int8 path that multiplies in an integer dtype to be *slower* on numpy,
# typically by a large factor (ten or more on a large layer; the printed ratio is this machine's, measured with one thread on each
# side, since `median_time` pins BLAS; the numpy build and the processor move it). The integer matmul is the culprit, not the arithmetic:
# the same integers multiplied as float32 go through BLAS at float speed, and the result
# is **exact**, since every partial sum stays below $2^{24}$, float32's limit for exact
# integers (with `in` = 512 and every $|q| \le 128$, symmetric weights included, it cannot
# exceed $512 \cdot 128^2 = 2^{23}$). The table times *your* `_int8_linear`: if you widened
# the integers to float64 and let BLAS multiply them (exact too, below $2^{53}$), your row
# is already that route, and the int32 line above is the one you avoided.
# Some deployments do exactly that; real int8 speed needs real int8 kernels: FBGEMM and
# oneDNN on x86, QNNPACK/XNNPACK on ARM, tensor cores on GPUs. On the small digits MLP the
# fixed costs per layer (quantizing the input, allocating) weigh more than the matmuls, so
# its ratio differs from the big layer's. What this module measured is the honest result
# of our implementation: 4x fewer bytes for sure; speed only with hardware support.
# </details>
#
# ## 12. Quantization-aware training
#
# At 8 bits post-training quantization costs this model almost nothing; at the narrow
# widths it costs a lot (section 10 printed where the loss begins on this run). **QAT** fine-tunes the float model *with the rounding in the
# forward pass*: `prepare_qat` swaps each `Linear` for a `QATLinear` (torch's
# `torch.ao.nn.qat.Linear`) whose input and weight pass through `FakeQuantize` modules
# (torch's `FakeQuantize`: an observer that records ranges in training mode, then your
# fake-quantize function). The weights stay float32 and keep learning; the gradient reaches
# them straight through the rounding. `convert` then builds the `QuantizedLinear`s from
# the observers, exactly as after calibration. All provided: they are your pieces put
# together.

# %%
#| export
class FakeQuantize(Module):
    """Observe, then fake-quantize (torch.ao.quantization.FakeQuantize). The observer records in
    training mode (and in eval mode until it has seen data) while `observer_enabled`;
    fresh=True re-observes every call (for weights: their current range)."""

    def __init__(self, observer=MinMaxObserver, fresh=False):
        super().__init__()
        self.observer, self.fresh = observer, fresh
        self.activation_post_process = observer()
        self.observer_enabled = True
        self._frozen_qparams = None  # the range's qparams, computed once while the observer is off

    @property
    def quant_min(self):
        return self.activation_post_process.quant_min

    @property
    def quant_max(self):
        return self.activation_post_process.quant_max

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, x):
        if self.fresh:
            self.activation_post_process = self.observer()
        obs = self.activation_post_process
        if self.fresh or (self.training and self.observer_enabled) or np.any(obs.min_val > obs.max_val):
            obs(x.detach())  # (in eval mode too, until it has seen data)
            self._frozen_qparams = None
        if self.observer_enabled or self.fresh or self._frozen_qparams is None:
            scale, zero_point = obs.calculate_qparams()
            if not (self.observer_enabled or self.fresh):
                self._frozen_qparams = scale, zero_point  # a frozen range: its search runs once
        else:
            scale, zero_point = self._frozen_qparams
        if obs.qscheme.startswith("per_channel"):
            return fake_quantize_per_channel_affine(x, scale, zero_point, obs.ch_axis, obs.quant_min, obs.quant_max)
        return fake_quantize_per_tensor_affine(x, scale, zero_point, obs.quant_min, obs.quant_max)


def disable_observer(module):
    """Freeze a FakeQuantize's range: it keeps fake-quantizing, but stops observing
    (torch.ao.quantization.disable_observer; use as model.apply(disable_observer))."""
    if isinstance(module, FakeQuantize) and not module.fresh:
        module.observer_enabled, module._frozen_qparams = False, None


def enable_observer(module):
    """Let a FakeQuantize observe again in training mode (torch.ao.quantization.enable_observer)."""
    if isinstance(module, FakeQuantize):
        module.observer_enabled, module._frozen_qparams = True, None


class QATLinear(Module):
    """A Linear trained under fake quantization of its input and weight (torch.ao.nn.qat.Linear)."""

    def __init__(self, linear, qconfig=default_qconfig):
        super().__init__()
        self.linear = linear
        self.qconfig = qconfig
        self.activation_post_process = FakeQuantize(qconfig.activation)
        self.weight_fake_quant = FakeQuantize(qconfig.weight, fresh=True)

    def forward(self, input):
        out = self.activation_post_process(input) @ self.weight_fake_quant(self.linear.weight).T
        return out if self.linear.bias is None else out + self.linear.bias


def prepare_qat(model, qconfig=default_qconfig):
    """A copy of `model`, in training mode, with each Linear replaced by a QATLinear."""
    qat = copy.deepcopy(model)
    _swap_modules(qat, Linear, lambda linear: QATLinear(linear, qconfig))
    return qat.train()


def convert(model):
    """A copy of a prepared model (ObservedLinear or QATLinear layers), in eval mode, with
    each observed layer replaced by a QuantizedLinear (torch.ao.quantization.convert)."""
    out = copy.deepcopy(model)
    _swap_modules(out, (ObservedLinear, QATLinear), QuantizedLinear.from_observed)
    return out.eval()


# %% [markdown]
# QAT here starts where post-training quantization ends: each activation's range is your
# histogram search of section 5, calibrated on the same batches as PTQ, and then frozen
# (`model.apply(disable_observer)`, as PyTorch's QAT recipes freeze their observers), so
# only the weights learn, against the grid they will be stored on. The cell below
# fine-tunes at the widths where section 10's sweep measured a loss of more than a point
# with the histogram observer (at most three of them, the narrowest; 2 bits always).
# **Predict first.** At 2 bits, 4 levels for every weight row and every activation,
# post-training quantization lost the most. After 5 epochs of QAT fine-tuning, where do you
# expect the converted 2-bit model's accuracy: near PTQ's, near float's, or in between?

# %%
predicted_qat_accuracy = None  # your number: test accuracy of the QAT model, 2 bits

# %%
def qat_qconfig(bits):
    return QConfig(activation=qconfig_bits(bits, HistogramObserver).activation, weight=qconfig_bits(bits).weight)


def prepare_qat_calibrated(model, bits, batches):
    """A QAT copy of `model` whose activation ranges are calibrated on `batches`, then frozen."""
    qat = prepare_qat(model, qat_qconfig(bits))
    with tinytorch.no_grad():
        for xb, _ in batches:
            qat(xb)
    return qat.apply(disable_observer)


_qat_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True)
tinytorch.manual_seed(0)
longer_float = copy.deepcopy(float_model)   # the fair baseline: the same 5 extra epochs, in float
fit(longer_float, nn.CrossEntropyLoss(), Adam(longer_float.parameters(), lr=1e-3), _qat_loader, epochs=5,
    progress=False)
QAT_BITS = sorted(set(LOSSY_BITS["histogram"][-3:]) | {2}, reverse=True)  # where PTQ lost, measured
qat_results = {}
_t0 = time.perf_counter()
print(f"float32: {accuracy_of(float_model):.4f}; after 5 more float epochs: {accuracy_of(longer_float):.4f}")
for _bits in QAT_BITS:
    tinytorch.manual_seed(0)
    _qat = prepare_qat_calibrated(float_model, _bits, calibration)
    fit(_qat, nn.CrossEntropyLoss(), Adam(_qat.parameters(), lr=1e-3), _qat_loader, epochs=5, progress=False)
    qat_results[_bits] = (accuracy_of(quantize_model(float_model, calibration, qat_qconfig(_bits))),
                          accuracy_of(quantize_model(longer_float, calibration, qat_qconfig(_bits))),
                          accuracy_of(convert(_qat)))
    print(f"{_bits} bits: PTQ {qat_results[_bits][0]:.4f}   PTQ of the 5-epochs-longer float model "
          f"{qat_results[_bits][1]:.4f}   QAT (5 epochs, converted) {qat_results[_bits][2]:.4f}")
print(f"({len(QAT_BITS)} QAT runs in {time.perf_counter() - _t0:.1f} s) "
      + ("no prediction written" if predicted_qat_accuracy is None else f"you predicted {predicted_qat_accuracy}"))
fig, ax = plt.subplots(figsize=(6.5, 3.6))
_labels = ["PTQ (your histogram search)", "PTQ of the float model trained 5 epochs longer",
           "QAT from those ranges, 5 epochs"]
_heights = qat_results
_x = np.arange(len(QAT_BITS))
for _k, (_label, _marker) in enumerate(zip(_labels, "osD")):  # points, not bars: the gaps are a point or two
    _px, _py = _x + (_k - 1) * 0.18, [_heights[b][_k] for b in QAT_BITS]
    ax.plot(_px, _py, _marker, ms=7, label=_label, zorder=2)
    for _xi, _yi in zip(_px, _py):
        ax.annotate(f"{_yi:.3f}", (_xi, _yi), textcoords="offset points", xytext=(0, 6), ha="center",
                    fontsize=8, rotation=90)
ax.axhline(accuracy_of(float_model), color="black", ls="--", lw=1.2, label="float32", zorder=3)
ax.set_xticks(_x, [f"{b} bits" for b in QAT_BITS])
ax.set_xlim(-0.6, len(QAT_BITS) - 0.4)
ax.set_ylabel("test accuracy (axis cut to the values)")
_low = min(min(h) for h in _heights.values())
ax.set_ylim(max(0.0, _low - 0.05), 1.02)
ax.grid(True, axis="y", alpha=0.3)
ax.set_title("digits MLP: quantization-aware training and post-training ranges", fontsize=10)
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
fig.tight_layout()
plt.show()
_qat.eval()
with tinytorch.no_grad():
    _fake_logits, _int_logits = _qat(X_test).numpy(), convert(_qat)(X_test).numpy()
print(f"2-bit fake-quant model vs its integer conversion: median |logit difference| "
      f"{np.median(np.abs(_fake_logits - _int_logits)):.1e}, same class for "
      f"{100 * np.mean(_fake_logits.argmax(1) == _int_logits.argmax(1)):.1f} % of the test digits")

# %% [markdown]
# <details><summary>What QAT recovers, and why (open after you have compared your prediction)</summary>
#
# Expect QAT to beat PTQ from the same ranges, by the most where PTQ lost the most: at
# 2 bits it recovers most of the gap to float (the exact figures depend on the run; one
# test digit is 0.28 points). Both start from the same activation ranges, so the
# difference is the weights: PTQ rounds weights that were trained for a float model, QAT
# trains them while the forward pass already rounds, so the loss itself steers each weight
# to a grid point that costs the least. The middle column keeps the comparison fair: QAT
# trained for 5 more epochs, and PTQ of a float model trained just as long separates the
# two effects. Where PTQ lost little, that extra training alone can do as well as QAT (a
# digit or two either way is noise); at 2 bits it cannot. What this QAT leaves out: its activation ranges stay where calibration
# put them, and its scales are not trained (LSQ and PACT learn the step size with the
# weights), which matters most at 2 bits, where four levels make the range decide almost
# everything. Freezing the observers is also why the ranges do not drift: a min/max
# observer left on during training only ever widens its range while the weights move.
# </details>
#
# The last line is the point of fake quantization: the model trained with `FakeQuantize`
# computes the same logits as the integer model it converts to, up to float rounding
# (which now and then nudges a hidden value across a rounding boundary of the next layer,
# so a rare logit differs by a step), so what the training loss optimised is what gets
# deployed. The price: QAT needs the training data, a training loop and the time to run
# it, while PTQ needs a few hundred unlabeled inputs and seconds.

# %% [markdown]
# ## 13. Four bits: two weights per byte, a scale per group
#
# A language model's cost is its weights. Seven billion float32 parameters are 28 GB, and
# generating one token reads every one of them once, so the bytes moved set the speed.
# What runs LLMs on laptops and single GPUs is **weight-only** quantization to 4 bits
# (GPTQ, AWQ, llama.cpp's Q4 formats, torchao's int4): the activations stay float, each
# layer turns its 4-bit weights back into floats just before its matmul, and the weights
# take an eighth of their float32 bytes. Retraining (section 12) is out of reach at that
# size, so everything rests on post-training choices. Four bits bring two new problems.
#
# **Storage.** No processor has a 4-bit type, and numpy's smallest integer is a byte, so
# 4-bit values are stored **two per byte**, one in each half (a *nibble*). A worked example
# with *unsigned* nibbles (0..15): 3 and 12 in one byte, 3 in the low half and 12 in the
# high half, is $12 \cdot 16 + 3 = 195$, `0b1100_0011`; coming back, $195 \,/\!/\, 16 = 12$
# and $195 \bmod 16 = 3$. numpy's bitwise operators do the same on whole integer arrays:
# `hi << 4` (times 16), `b >> 4` (floor division by 16), `b & 0xF` (keeps the low four
# bits, `0xF` being `0b1111`), `a | b` (bitwise or).
#
# Our values are **signed**: $-8 \dots 7$, section 4's symmetric grid at 4 bits. Work out
# before you write anything: what are the four bits of $-1$ and of $-8$ in 4-bit two's
# complement (int8's rule, with 16 in place of 256)? What does `& 0xF` give for a negative
# int8, and is that the nibble you want? Coming back, a nibble is a number $0 \dots 15$:
# which of them stand for negative values, and how do you turn a whole array of them into
# int8 without a Python loop?
#
# Write `pack_int4` and `unpack_int4`. The check compares a few bytes worked out by hand,
# round-trips all 256 pairs of 4-bit values, and counts Python steps, which must not grow
# with the array.
#
# <details><summary>Hint 1</summary>
#
# In 4-bit two's complement a negative $v$ is stored as $v + 16$: $-1$ is 15
# (`0b1111`), $-8$ is 8 (`0b1000`). Try `np.array([-1, -8, 7], np.int8) & 0xF` and look
# at what you get.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Nibbles 8 to 15 are the negatives. Which two whole-array operations, one that pulls a
# nibble out of the bytes and one that maps $8 \dots 15$ to $-8 \dots -1$, undo the
# packing? And which positions of the last axis are the "first of each pair"? (Slices
# with a step select them all at once.)
# </details>
#
# <details><summary>The approach</summary>
#
# Packing is: each value to its nibble (its low four bits), then the pairs combined, the
# even positions low, the odd ones high. Unpacking reverses each step, and only the
# nibble-to-value step needs thought, since the nibbles lost the sign that int8 kept in
# its high bits. Keep an eye on the dtypes: which type does each intermediate have, and
# can a shift push bits off its top?
# </details>

# %% nbgrader={"grade": false, "grade_id": "int4-packing", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def pack_int4(q):
    """4-bit integers stored two per byte: the layout of int4 weights.

    Contract: q an integer numpy array (any integer dtype) with values in [-8, 7] and an
    even last dimension n >= 2. Returns a uint8 array of shape (..., n // 2) whose byte j
    holds q[..., 2j] in its low four bits and q[..., 2j + 1] in its high four, each as its
    4-bit two's complement (-1 is 0b1111). Raises ValueError for an odd last dimension or
    a value outside [-8, 7], TypeError for a non-integer array. Vectorised: no Python loop
    over the elements.
    """
    q = np.asarray(q)
    if not np.issubdtype(q.dtype, np.integer):
        raise TypeError(f"pack_int4 packs integers, got an array of dtype {q.dtype}")
    if q.ndim == 0 or q.shape[-1] % 2:
        raise ValueError(f"pack_int4 needs an even last dimension (two values per byte), got shape {q.shape}")
    if q.size and (q.min() < -8 or q.max() > 7):
        raise ValueError(f"pack_int4 packs values in [-8, 7], got values from {q.min()} to {q.max()}")
    # Idea: each value to its four bits, then two of them side by side in one byte.
    ### BEGIN SOLUTION
    nibbles = (q & 0xF).astype(np.uint8)  # two's complement: -1 & 0b1111 = 0b1111
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)
    ### END SOLUTION


def unpack_int4(packed):
    """The inverse of pack_int4.

    Contract: packed a uint8 numpy array of shape (..., m). Returns an int8 array of shape
    (..., 2m) with values in [-8, 7] such that unpack_int4(pack_int4(q)) equals q for every
    q that pack_int4 accepts. Raises TypeError for another dtype. Vectorised: no Python
    loop over the elements.
    """
    packed = np.asarray(packed)
    if packed.dtype != np.uint8 or packed.ndim == 0:
        raise TypeError(f"unpack_int4 reads bytes: a uint8 array with at least one dimension, "
                        f"got dtype {packed.dtype} and shape {packed.shape}")
    # Idea: each half back out, then give the nibbles their sign.
    ### BEGIN SOLUTION
    out = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), dtype=np.int8)
    for half, nibble in ((0, packed & 0xF), (1, packed >> 4)):
        out[..., half::2] = np.where(nibble >= 8, nibble.astype(np.int8) - 16, nibble.astype(np.int8))
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-int4-packing", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
for _pair, _byte in [((3, 5), 0x53), ((-1, 0), 0x0F), ((0, -1), 0xF0), ((-8, 7), 0x78), ((7, -8), 0x87),
                     ((-1, -1), 0xFF)]:
    _got = pack_int4(np.array(_pair, np.int8))
    assert_equal((_got.dtype, _got.shape), (np.dtype(np.uint8), (1,)), f"pack_int4({list(_pair)}): (dtype, shape)")
    assert_equal(int(_got[0]), _byte, f"pack_int4({list(_pair)}): the byte, first value low, second high "
                 f"(as hex: {_byte:#04x})")
    assert_equal(unpack_int4(np.array([_byte], np.uint8)).tolist(), list(_pair),
                 f"unpack_int4 of the byte {_byte:#04x}")
_all = np.array([(a, b) for a in range(-8, 8) for b in range(-8, 8)], np.int8)  # every pair: (256, 2)
_packed = pack_int4(_all)
assert_equal(sorted(_packed[:, 0].tolist()), list(range(256)), "the 256 pairs of 4-bit values pack into the 256 "
             "different bytes")
assert_equal(unpack_int4(_packed), _all, "unpack_int4(pack_int4(q)) for every pair of 4-bit values")
assert_equal(str(unpack_int4(_packed).dtype), "int8", "unpack_int4's dtype")
_q3 = np.random.default_rng(0).integers(-8, 8, (2, 3, 6))
assert_equal(pack_int4(_q3).shape, (2, 3, 3), "pack_int4 of a (2, 3, 6) array (of int64): pairs along the last axis")
assert_equal(unpack_int4(pack_int4(_q3)), _q3.astype(np.int8), "a (2, 3, 6) int64 array, packed and unpacked")
_small, _large = (np.random.default_rng(1).integers(-8, 8, (4, n)).astype(np.int8) for n in (8, 800))
_steps = {n: (python_steps(pack_int4, q), python_steps(unpack_int4, pack_int4(q)))
          for n, q in ((8, _small), (800, _large))}
check(_steps[8] == _steps[800], "pack_int4 and unpack_int4 run as many Python steps on a (4, 800) array as on a "
      "(4, 8) one (whole-array operations, no loop over the elements)", got=_steps,
      expected="the same (pack, unpack) counts for both sizes")
print(f"✓ pack_int4 / unpack_int4: [3, 5] packs to {int(pack_int4(np.array([3, 5]))[0]):#04x}, [-1, 0] to "
      f"{int(pack_int4(np.array([-1, 0]))[0]):#04x}; all 256 pairs round-trip")

# %% [markdown]
# **A scale per group.** The second problem is the grid. Sixteen levels per row of
# weights (section 4's per-channel scale) make the step a fifteenth of the row's range,
# so a single large weight in a row coarsens the grid for every other weight of that row.
# The 4-bit formats give a scale to each **group** of consecutive weights along a row
# instead (32 in llama.cpp's Q4_0, 128 in GPTQ's default): an outlier then spoils only its
# group. The price is one more scale per group, stored beside the nibbles.
#
# The layer is provided, built from your functions: `quantize_per_group(weight,
# group_size)` quantizes a `(out, in)` weight symmetrically with a scale per group (section
# 2's formula on each group's range), `dequantize_per_group` undoes it, and
# `Int4WeightOnlyLinear` stores the packed bytes
# (`weight_packed`, uint8, `(out, in / 2)`) and the float32 scales as buffers; its forward
# unpacks, multiplies each group by its scale and runs an ordinary float matmul.
# `quantize_weights_int4(model, group_size)` returns a copy of a model with every `Linear`
# swapped for one.

# %%
#| export
def quantize_per_group(weight, group_size, bits=4):
    """Symmetric quantization of an (out, in) weight with one scale per group of
    `group_size` consecutive weights of a row (group_size=None: one group per row).
    Returns (q int8 (out, in) in [-2^(bits-1), 2^(bits-1) - 1], scales float32
    (out, in // group_size)). Raises ValueError when group_size does not divide in."""
    w = np.asarray(weight, dtype=np.float32)
    rows, cols = w.shape
    group_size = cols if group_size is None else group_size
    if group_size <= 0 or cols % group_size:
        raise ValueError(f"group_size={group_size} must divide the {cols} weights of a row")
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    groups = w.reshape(rows, cols // group_size, group_size)
    scale, _ = _calculate_qparams(groups.min(-1), groups.max(-1), symmetric=True, quant_min=lo, quant_max=hi)
    return _quantize(groups, scale[..., None], 0, lo, hi).reshape(rows, cols), scale


def dequantize_per_group(q, scales):
    """The float32 (out, in) weight that quantize_per_group's (q, scales) stand for."""
    rows, cols = np.shape(q)
    groups = np.asarray(q).reshape(rows, np.shape(scales)[1], -1)
    return (groups * np.asarray(scales, dtype=np.float32)[..., None]).reshape(rows, cols)


class Int4WeightOnlyLinear(Module):
    """A Linear whose weight is stored in 4 bits, two per byte, with a float32 scale per
    group of `group_size` weights of a row (torchao's int4 weight-only layout, in spirit);
    float in and out. Build it with from_float; it does not train. Its state (the packed
    bytes, the scales, the bias) is buffers, so state_dict() and checkpoints carry it."""

    def __init__(self, weight_packed, weight_scale, bias, group_size):
        super().__init__()
        self.out_features, half = np.shape(weight_packed)
        self.in_features, self.group_size = 2 * half, int(group_size)
        self.register_buffer("weight_packed", Tensor(np.asarray(weight_packed, dtype=np.uint8)))  # (out, in / 2)
        self.register_buffer("weight_scale", Tensor(np.asarray(weight_scale, dtype=np.float32)))  # (out, groups)
        self.register_buffer("bias", None if bias is None else Tensor(np.asarray(bias, dtype=np.float32)))

    @classmethod
    def from_float(cls, linear, group_size=32):
        weight = linear.weight.numpy()
        group_size = weight.shape[1] if group_size is None else group_size
        q, scale = quantize_per_group(weight, group_size)
        return cls(pack_int4(q), scale, None if linear.bias is None else linear.bias.numpy(), group_size)

    def dequantized_weight(self):
        """The float32 (out, in) weight the stored nibbles and scales stand for."""
        return dequantize_per_group(unpack_int4(self.weight_packed.numpy()), self.weight_scale.numpy())

    def forward(self, input):
        x = _array(input)
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"Int4WeightOnlyLinear: input of shape {x.shape} does not fit "
                             f"in_features={self.in_features}")
        out = x.astype(np.float32) @ self.dequantized_weight().T
        return Tensor(out if self.bias is None else out + self.bias.numpy())

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, group_size={self.group_size}"


def quantize_weights_int4(model, group_size=32):
    """A copy of `model` (not changed) in eval mode with every Linear an Int4WeightOnlyLinear
    (group_size=None: one scale per row). Raises TypeError for a bare Linear."""
    if isinstance(model, Linear):
        raise TypeError("quantize_weights_int4: the model is a bare Linear; wrap it in a Sequential")
    small = copy.deepcopy(model)
    _swap_modules(small, Linear, lambda linear: Int4WeightOnlyLinear.from_float(linear, group_size))
    return small.eval()


# %% [markdown]
# **Predict first.** The digits MLP with 4-bit weights in groups of 32 and float32 scales:
# how many bits does it store per weight, scales included? And how many points of test
# accuracy does it lose, given that its activations stay float32?

# %%
predicted_int4_bits_per_weight = None  # your number: stored bits per weight, scales included
predicted_int4_drop = None  # your number, in accuracy points (float minus int4; one test digit is 0.28)

# %%
_linears = [m for m in float_model.modules() if isinstance(m, nn.Linear)]
_n_weights = sum(m.weight.numpy().size for m in _linears)
print(f"{'weights':34s} {'bytes':>7s} {'bits/weight':>11s} {'accuracy':>9s}")
print(f"{'float32':34s} {4 * _n_weights:7,d} {32.0:11.2f} {accuracy_of(float_model):9.4f}")
_int8_bytes = sum(m.weight_int8.nbytes + m.weight_scale.nbytes for m in int8_model.modules()
                  if isinstance(m, QuantizedLinear))
print(f"{'int8 per row (section 10)':34s} {_int8_bytes:7,d} {8 * _int8_bytes / _n_weights:11.2f} "
      f"{accuracy_of(int8_model):9.4f}")
int4_results = {}
for _g in (None, 64, 32, 16):
    _m4 = quantize_weights_int4(float_model, _g)
    _bytes = sum(m.weight_packed.nbytes + m.weight_scale.nbytes for m in _m4.modules()
                 if isinstance(m, Int4WeightOnlyLinear))
    int4_results[_g] = (8 * _bytes / _n_weights, accuracy_of(_m4))
    print(f"{'int4 ' + ('per row' if _g is None else f'groups of {_g}'):34s} {_bytes:7,d} "
          f"{int4_results[_g][0]:11.2f} {int4_results[_g][1]:9.4f}")
print(("no prediction written" if predicted_int4_bits_per_weight is None
       else f"you predicted {predicted_int4_bits_per_weight} bits per weight") + "; "
      + ("no prediction written" if predicted_int4_drop is None
         else f"you predicted a drop of {predicted_int4_drop} points"))
_m32 = quantize_weights_int4(float_model, 32)
_state = _m32.state_dict()
check(str(_state["0.weight_packed"].dtype) == "uint8" and _state["0.weight_packed"].shape == (128, 32),
      "the int4 layer's state_dict holds the packed bytes: uint8, (128, 64 / 2) for the first layer",
      got={k: (str(v.dtype), v.shape) for k, v in _state.items()})

# %% [markdown]
# <details><summary>Bits and accuracy (open after you have compared your prediction)</summary>
#
# Four bits per weight plus one float32 scale per group: $4 + 32/32 = 5$ bits at groups
# of 32, $4 + 32/16 = 6$ at 16, and close to 4 per row (the real formats store the
# scales in float16, so 4.5 at groups of 32). The accuracy barely moves, if at all: with
# float activations the only error is in the weights, under a tenth of their size (below),
# and training leaves this small network with more slack than that.
# </details>
#
# The groups bought little here, and the reason is in the weights. Below, each layer's
# weight error relative to the weight (the root-mean-square of the difference over that
# of the weight), first as trained, then with **one weight in every row set to ten times
# the row's largest**, the kind of outlier that language models' weight matrices have in
# a few input features and that the per-row scale cannot absorb.

# %%
def relative_weight_error(weight, group_size, skip=None):
    """RMS(dequantized - weight) / RMS(weight), over the weights where `skip` (a boolean
    mask of weight's shape, or None) is False."""
    back = dequantize_per_group(*quantize_per_group(weight, group_size))
    keep = np.ones(weight.shape, bool) if skip is None else ~skip
    return float(np.sqrt(np.mean((back - weight)[keep] ** 2) / np.mean(weight[keep] ** 2)))


_w = _linears[1].weight.numpy().copy()  # (64, 128)
_outliers = np.zeros(_w.shape, bool)
_outliers[np.arange(len(_w)), np.random.default_rng(0).integers(0, _w.shape[1], len(_w))] = True
_w_outlier = np.where(_outliers, 10 * np.abs(_w).max(axis=1, keepdims=True), _w)
print("relative error of the second layer's weights (the outliers themselves not counted):")
for _label, _ww, _skip in (("as trained", _w, None), ("one 10x outlier per row", _w_outlier, _outliers)):
    print(f"  {_label:24s}" + "  ".join(f"{'per row' if g is None else f'groups of {g}'}: "
                                         f"{relative_weight_error(_ww, g, _skip):.3f}" for g in (None, 64, 32, 16)))

# %% [markdown]
# Expect the trained weights to gain only a little from smaller groups (their ranges vary
# little from group to group), and the outlier rows to gain a lot: per row, the outlier
# sets a step so coarse that most other weights of its row round to zero; with groups,
# only the outlier's own group pays. This is why every LLM format uses groups, and why
# GPTQ and AWQ go further and choose the rounding (or rescale the outlier features) so
# that the *layer's output*, not each weight, stays close. Two things this section did
# not build: an int4 matmul kernel (ours dequantizes to float32 and runs BLAS, which is
# what CPU weight-only inference often does too; on GPUs the unpacking is fused into the
# matmul so the full weight never exists in float), and the 4-bit activations, which need
# the integer path of sections 6 and 7 at a width where QAT is usually required.
#
# ## 14. What PyTorch does
#
# - `torch.ao.quantization` has the same pieces: observers (`MinMaxObserver`,
#   `PerChannelMinMaxObserver`, `MovingAverageMinMaxObserver`, `HistogramObserver`) with
#   `calculate_qparams()` — our `_calculate_qparams` is its formula; `QConfig` pairs an
#   activation and a weight observer; `prepare` → calibrate → `convert` (eager mode), or
#   `prepare_fx`/`convert_fx` on a traced graph, or the newer PT2E flow
#   (`torch.export` + `prepare_pt2e`/`convert_pt2e`) that hands the graph to a backend.
# - Quantized tensors (`torch.quantize_per_tensor`, `torch.quantize_per_channel`,
#   `.int_repr()`, `.dequantize()`) and `torch.fake_quantize_per_tensor_affine` with the
#   straight-through gradient, as here; QAT modules in `torch.ao.nn.qat`.
# - The default x86 activations are `quint8` (0..255) with `reduce_range` (7 bits) to avoid
#   overflow in FBGEMM's 16-bit intermediate sums; weights `qint8` symmetric per channel.
#   Quantized `Linear` and `Conv2d` kernels (FBGEMM, oneDNN, QNNPACK) keep int8 between
#   layers: they add the zero-point correction terms (the weight-only ones precomputed
#   when the weight is packed) and *requantize* the int32 accumulators straight to the
#   next layer's int8, as your `_requantized_linear` does; QNNPACK, gemmlowp and TensorFlow
#   Lite with a 31-bit fixed-point multiplier and a rounding shift, as yours.
# - `torch.ao.quantization.quantize_dynamic` quantizes weights ahead of time and
#   activations per batch at run time (no calibration): the usual choice for LSTMs and
#   transformers' Linear layers on CPU. Large language models go further: 4-bit weight-only
#   formats with a scale per group of 32-128 weights, as in section 13 (GPTQ, AWQ,
#   bitsandbytes; in the PyTorch world torchao's int4 weight-only configs, whose kernels
#   unpack the nibbles inside the matmul), and fp8 on recent GPUs.
#
# If PyTorch is installed, our observer's parameters and quantized values equal its:

# %%
torch = optional_torch()  # PyTorch for the comparison, or None (it says so)
if torch is not None:
    from torch.ao.quantization import MinMaxObserver as TorchMinMax, PerChannelMinMaxObserver as TorchPerChannel

    _wt = float_model[0].weight.numpy()
    _theirs = TorchPerChannel(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    _theirs(torch.tensor(_wt))
    _ours = PerChannelMinMaxObserver(ch_axis=0, qscheme=per_channel_symmetric)
    _ours(_wt)
    _ts, _tz = _theirs.calculate_qparams()
    _os, _oz = _ours.calculate_qparams()
    print("per-channel weight scales equal torch's:", bool(np.array_equal(_os, _ts.numpy())),
          "| zero points:", bool(np.array_equal(_oz, _tz.numpy())))
    _tq = torch.quantize_per_channel(torch.tensor(_wt), _ts, _tz, 0, torch.qint8).int_repr().numpy()
    print("int8 weights equal torch.quantize_per_channel's:",
          bool(np.array_equal(quantize_per_channel(_wt, _os, _oz, 0).int_repr(), _tq)))
    _ta = TorchMinMax(dtype=torch.qint8)
    for _xb, _ in calibration:
        _ta(torch.tensor(_xb.numpy()))
    _oa = MinMaxObserver()
    for _xb, _ in calibration:
        _oa(_xb)
    _os, _oz = _oa.calculate_qparams()
    _ts, _tz = _ta.calculate_qparams()
    print(f"activation (scale, zero point): ours ({float(_os):.6g}, {int(_oz)}), "
          f"torch ({float(_ts):.6g}, {int(_tz)})")

# %% [markdown]
# ## 15. Recap
#
# - A quantized number is an integer $q$ with a scale and a zero point:
#   $\hat x = s(q - z)$. Scale and zero point follow from the grid's conditions: zero is a
#   grid point (so the range is widened to contain 0), and the grid spans the range
#   (**affine**, anchored at its minimum) or $[-m, m]$ with $z = 0$ (**symmetric**).
# - Quantizing inverts $\hat x = s(q - z)$: steps from zero, rounded half to even, shifted
#   by $z$, saturated; inside the range the error is at most $s/2$. **Per channel** gives
#   each output row its own scale, for free in the matmul.
# - The **noise model** you derived predicts the SQNR measured from 3 bits up, and says
#   what one more bit, and an outlier that doubles the range, are worth.
# - **Observers** calibrate activation ranges from data: min/max keeps every value, a
#   percentile clips the tail for a finer step on the bulk.
# - **`QuantizedLinear`**: expanding $\sum_k (q_x - z_x)(q_W - z_W)$ leaves one int8 ×
#   int8 matrix product summed in **int32**, plus corrections that each depend on one side
#   only or on neither (you derived them in section 6), which is why weights are symmetric
#   ($z_W = 0$: the correction computed anew for every input vanishes). Then
#   times $s_x s_W[j]$, plus the bias. The stored weight is a real int8 array: **4x fewer
#   bytes**, measured. Its speed needs int8 kernels; numpy has none, and the measurement
#   says so.
# - **Requantization** keeps a network in integers: $M = s_x s_W / s_y$ as a 31-bit
#   integer and a shift, an int64 product, a rounding shift, the zero point, saturation
#   (which also does the ReLU, at the zero point). The bias joins the accumulators on
#   their own grid, so each output is rounded once. The digits MLP gives the same answers
#   that way.
# - **PTQ** (`quantize_model`: copy, observe, calibrate in eval mode without a graph, swap)
#   costs the digits MLP about nothing at 8 bits and a lot once the grid is too coarse
#   (where that starts, the sweep measured); there, a range chosen by its error (your
#   histogram search) recovers much of the loss with no training, and **QAT** with fake
#   quantization and the **straight-through** gradient recovers part of it by training (on
#   this run, compare the two at 2 bits).
# - **Folding** an eval-mode batch norm into the convolution before it leaves one
#   convolution (you derived its weight and bias), so a quantized CNN has one layer, one
#   range and one grid where it had two.
# - **Four bits**, as language models ship: two values per byte (your `pack_int4` and
#   `unpack_int4`: a nibble is a value's 4-bit two's complement, and the sign comes back
#   from the nibble's top bit), a scale per group of weights so an outlier spoils only its
#   group, and the layer's weight dequantized just before a float matmul. About 5 bits per
#   weight with float32 scales at groups of 32, measured, and the digits MLP within a test
#   digit or so of its float accuracy.
#
# Run `tito test module 15` to check your work. Module 16 shrinks models the other way:
# fewer weights instead of fewer bits.

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
# # Module 09 — Convolutions: seeing images through small windows
#
# A `Linear` layer connects every input to every output. For an image that is wasteful and
# blind: a 224×224×3 photo has 150,528 inputs, so one dense layer of 1,000 units already needs
# 150 million weights, and it has to learn *separately* that a vertical edge at the top left
# is the same thing as a vertical edge at the bottom right. A **convolution** fixes both: it
# slides one small filter (say 3×3) over every position of the image, so the weights are
# **shared** across positions and each output only looks at a **local** window. In this
# module you build the layers every CNN is made of — `Conv2d`, `MaxPool2d`, `AvgPool2d`,
# `BatchNorm2d`, `Flatten` — forward *and* backward, and train a small CNN on the digits.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - explain the **NCHW** layout of a batch of images and derive the output-size formula
#   ⌊(H + 2p − k)/s⌋ + 1;
# - write a convolution as **seven nested loops**, and then as **im2col + one matrix
#   multiply**, where im2col is a zero-copy **strided view** of the padded input (the
#   `as_strided` idea from module 01) followed by one reshape;
# - **measure** the two: the loops' time, the matmul's time, and the price of im2col — a
#   column matrix about k² times larger than the input;
# - derive the **backward** of a convolution: the weight gradient is another matmul with
#   the columns, the input gradient goes back through **col2im**, the adjoint of im2col;
# - build **max pooling** (the gradient is routed to the argmax of each window),
#   **average pooling**, and **batch normalisation** with running statistics and its
#   train/eval switch; register every backward rule with module 06's autograd;
# - train a small CNN on the digits to ≥ 97% test accuracy, and relate a conv layer's
#   **FLOPs** 2·N·C_out·H_out·W_out·C_in·k² to its measured time.
#
# ## Prerequisites
#
# - Module 01: `Tensor`, strides and `as_strided`, the dispatch point `apply`.
# - Module 03: `Module`, `Parameter`, buffers, `kaiming_uniform_`, `Sequential`, `Linear`.
# - Module 04: `cross_entropy`; module 05: `Digits`, `DataLoader`.
# - Module 06: `backward_rule` (how a new op gets its gradient), `gradcheck`.
# - Module 07: `Adam`.
#
# ## How this notebook works
#
# Cells marked `#| export` become the file `tinytorch/nn/conv.py` when you run
# `tito export 09` (or `tito test module 09`). The functions are re-exported as
# `tinytorch.nn.functional.conv2d` etc., the layers as `tinytorch.nn.Conv2d` etc. Cells with
# `# YOUR CODE HERE` are yours; the **check** cell after each one prints a ✓ or says what is
# wrong. Everything here computes on numpy arrays inside the ops: no Python loop ever runs
# over pixels or output positions (except in the deliberately slow reference of section 2).

# %%
#| default_exp nn.conv

# %%
import sys
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

import tinytorch
from tinytorch import Tensor
from tinytorch.autograd import gradcheck

# %% [markdown]
# ## 1. The idea: NCHW and the output-size formula
#
# A batch of images is a 4-D tensor in **NCHW** layout: `N` images, each with `C` channels
# (1 for grey, 3 for RGB, 64 for a hidden layer's feature maps), each channel an `H × W`
# grid. In C order the last index moves fastest, so one row of one channel of one image is
# contiguous in memory; the strides of a contiguous `(N, C, H, W)` tensor are
# `(C·H·W, H·W, W, 1)`. NCHW is PyTorch's default (and ours); section 12 says why GPUs often
# prefer NHWC ("channels last").
#
# A convolution layer has a **weight** of shape `(C_out, C_in, kh, kw)`: one `C_in × kh × kw`
# filter per output channel, and a bias per output channel. Output channel `o` at position
# `(i, j)` is the dot product of filter `o` with the input window whose top-left corner is
# at `(i·s − p, j·s − p)`:
#
# $$y_{n,o,i,j} = b_o + \sum_{c=0}^{C_{in}-1}\sum_{u=0}^{k_h-1}\sum_{v=0}^{k_w-1}
#   w_{o,c,u,v}\; x^{\text{pad}}_{n,\,c,\,i s + u,\,j s + v}.$$
#
# (Deep learning calls this a convolution; mathematicians would call it a cross-correlation
# because the filter is not flipped. Since the filter is learned, the difference does not
# matter.) Three numbers decide the geometry of the output:
#
# - **padding** `p`: `p` rows/columns of zeros added on every side, so the border pixels
#   get to be the centre of a window too; with `k = 3, p = 1, s = 1` the output has the
#   input's size ("same" padding);
# - **kernel size** `k`: the window's side;
# - **stride** `s`: how far the window moves between two outputs; `s = 2` halves the size.
#
# Along one dimension, the padded input has `H + 2p` cells; the window fits at the start
# positions `0, s, 2s, …` as long as `start + k ≤ H + 2p`, i.e. at
#
# $$H_{out} = \left\lfloor \frac{H + 2p - k}{s} \right\rfloor + 1$$
#
# positions. The floor means that leftover rows at the bottom (when `s` does not divide
# `H + 2p − k`) are simply never visited. The picture shows `H = W = 5, k = 3, p = 1, s = 2`:
# ⌊(5 + 2 − 3)/2⌋ + 1 = 3.

# %%
def draw_conv_geometry(ax, H=5, k=3, p=1, s=2):
    """The padded input grid, two of the kernel's positions, and the output grid."""
    Hp = H + 2 * p
    Ho = (H + 2 * p - k) // s + 1
    for r in range(Hp):
        for c in range(Hp):
            pad = r < p or c < p or r >= H + p or c >= H + p
            ax.add_patch(Rectangle((c, Hp - 1 - r), 1, 1, fill=True, lw=0.8, ec="grey",
                                   fc="#eeeeee" if pad else "#cfe3f7"))
            if pad:
                ax.text(c + 0.5, Hp - 0.5 - r, "0", ha="center", va="center", fontsize=7, color="grey")
    for (oi, oj), color in [((0, 0), "tab:red"), ((1, 2), "tab:green")]:
        ax.add_patch(Rectangle((oj * s, Hp - oi * s - k), k, k, fill=False, lw=2.5, ec=color))
    off = Hp + 1.5
    for r in range(Ho):
        for c in range(Ho):
            color = {(0, 0): "tab:red", (1, 2): "tab:green"}.get((r, c), "white")
            ax.add_patch(Rectangle((off + c, Hp - 1 - r - 1), 1, 1, lw=0.8, ec="k", fc=color, alpha=0.6))
    ax.annotate("", xy=(off - 0.2, Hp - 2), xytext=(Hp + 0.2, Hp - 2), arrowprops=dict(arrowstyle="->"))
    ax.text(Hp / 2, -0.8, f"input {H}×{H}, padding {p} (grey) → {Hp}×{Hp}", ha="center", fontsize=9)
    ax.text(off + Ho / 2, Hp - Ho - 2.0, f"output {Ho}×{Ho}", ha="center", fontsize=9)
    ax.set_xlim(-0.5, off + Ho + 0.5)
    ax.set_ylim(-1.5, Hp + 0.5)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"k = {k}, stride = {s}: windows at (0,0) red and (1,2) green; "
                 f"⌊({H}+2·{p}−{k})/{s}⌋+1 = {Ho}", fontsize=10)


fig, ax = plt.subplots(figsize=(8, 4.2))
draw_conv_geometry(ax)
plt.show()

# %% [markdown]
# The package file starts here: its imports, its public names, and a helper that turns
# `3` or `(3, 2)` into a pair `(height, width)`, as PyTorch accepts both everywhere.

# %%
#| export
"""Convolutions (module 09): im2col/col2im, conv2d, max/avg pooling, batch norm and the
layers Conv2d, MaxPool2d, AvgPool2d, BatchNorm2d, Flatten. Every op goes through `apply`
and registers its backward rule with module 06's autograd."""
import math

import numpy as np

from tinytorch._tensor import Tensor, apply, ones, tensor, zeros
from tinytorch.autograd import backward_rule
from tinytorch.nn.layers import Module, Parameter, _calculate_fan_in_and_fan_out, kaiming_uniform_, uniform_

__all__ = [
    "conv_output_size", "im2col", "col2im",
    "conv2d", "max_pool2d", "avg_pool2d", "batch_norm",
    "Conv2d", "MaxPool2d", "AvgPool2d", "BatchNorm2d", "Flatten",
]


def _pair(value, name, op):
    """3 -> (3, 3); (3, 2) -> (3, 2); anything else is a TypeError naming the argument."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value), int(value)
    if (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)):
        return int(value[0]), int(value[1])
    raise TypeError(f"{op}: {name} must be an int or a pair of ints (height, width), got {value!r}")


def _as_numpy(x):
    """A Tensor's values as a numpy array; numpy arrays pass through."""
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


# %% [markdown]
# Now the formula, for one dimension. It is also where bad arguments are caught: a stride
# of 0 would mean infinitely many windows, a negative padding makes no sense, and a kernel
# larger than the padded input fits nowhere. Each gets a `ValueError` that names the
# numbers, so the user can see which one is wrong.

# %% nbgrader={"grade": false, "grade_id": "output-size", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def conv_output_size(size, kernel_size, stride=1, padding=0):
    """The number of window positions along one dimension: ⌊(size + 2·padding − kernel_size) / stride⌋ + 1.

    Why: every conv and pooling op needs it, and it is where impossible geometry (stride ≤ 0,
    padding < 0, a kernel larger than the padded input) is refused with a clear message.
    """
    # Hints:
    # - ValueError(f"stride must be positive, got {stride}") when stride < 1; likewise
    #   kernel_size < 1 ("kernel_size must be positive") and padding < 0 ("padding must be
    #   non-negative");
    # - when kernel_size > size + 2 * padding: ValueError saying that the kernel
    #   ({kernel_size}) is larger than the padded input ({size} + 2·{padding} = ...);
    # - then the formula, with integer division //.
    ### BEGIN SOLUTION
    if stride < 1:
        raise ValueError(f"stride must be positive, got {stride}")
    if kernel_size < 1:
        raise ValueError(f"kernel_size must be positive, got {kernel_size}")
    if padding < 0:
        raise ValueError(f"padding must be non-negative, got {padding}")
    padded = size + 2 * padding
    if kernel_size > padded:
        raise ValueError(f"the kernel ({kernel_size}) is larger than the padded input "
                         f"({size} + 2·{padding} = {padded})")
    return (padded - kernel_size) // stride + 1
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-output-size", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert conv_output_size(5, 3, 2, 1) == 3, "the picture above"
assert conv_output_size(28, 3, 1, 1) == 28, "k=3, p=1, s=1 keeps the size"
assert conv_output_size(28, 2, 2, 0) == 14, "2x2 pooling with stride 2 halves"
assert conv_output_size(8, 3, 2, 0) == 3, "the floor: the last row is never visited"
assert conv_output_size(3, 5, 1, 1) == 1, "k = H + 2p fits exactly once"
for _args, _word in [((8, 3, 0, 0), "stride"), ((8, 3, -1, 0), "stride"), ((8, 3, 1, -1), "padding"),
                     ((8, 0, 1, 0), "kernel_size"), ((3, 6, 1, 1), "larger")]:
    try:
        conv_output_size(*_args)
        raise AssertionError(f"conv_output_size{_args} must raise ValueError")
    except ValueError as e:
        assert _word in str(e), f"the message should mention {_word!r}: {e}"
print("✓ conv_output_size")

# %% [markdown]
# ## 2. The direct convolution: seven loops
#
# The formula above, written as it reads, is seven nested loops: over the images `n`, the
# output channels `o`, the output rows `i` and columns `j` — and inside, the dot product over
# the input channels `c` and the kernel rows `u` and columns `v`. Write it (numpy arrays in
# and out, integer `stride` and `padding`; pad the input with `np.pad` first). It is the
# reference we trust because it is obviously the definition — and, as we will measure,
# hopelessly slow. This function stays in the notebook; it is not exported.

# %% nbgrader={"grade": false, "grade_id": "conv-loops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def conv2d_loops(x, w, b=None, stride=1, padding=0):
    """Direct convolution of x (N, C, H, W) with w (C_out, C, kh, kw): seven Python loops."""
    # Hints:
    # - xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)));
    # - the output sizes come from conv_output_size; out = np.zeros((N, C_out, Ho, Wo), x.dtype);
    # - the innermost statement: acc += w[o, c, u, v] * xp[n, c, i * stride + u, j * stride + v].
    ### BEGIN SOLUTION
    N, C, H, W = x.shape
    C_out, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    Ho = conv_output_size(H, kh, stride, padding)
    Wo = conv_output_size(W, kw, stride, padding)
    out = np.zeros((N, C_out, Ho, Wo), dtype=x.dtype)
    for n in range(N):
        for o in range(C_out):
            for i in range(Ho):
                for j in range(Wo):
                    acc = 0.0 if b is None else b[o]
                    for c in range(C):
                        for u in range(kh):
                            for v in range(kw):
                                acc += w[o, c, u, v] * xp[n, c, i * stride + u, j * stride + v]
                    out[n, o, i, j] = acc
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-conv-loops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = np.arange(16.0).reshape(1, 1, 4, 4)
_box = np.ones((1, 1, 2, 2))
np.testing.assert_array_equal(conv2d_loops(_x, _box)[0, 0], [[10, 14, 18], [26, 30, 34], [42, 46, 50]])
np.testing.assert_array_equal(conv2d_loops(_x, _box, stride=2)[0, 0], [[10, 18], [42, 50]])
np.testing.assert_array_equal(conv2d_loops(_x, _box, padding=1)[0, 0, 0], [0, 1, 3, 5, 3])
np.testing.assert_array_equal(conv2d_loops(_x, 2 * np.ones((1, 1, 1, 1)), np.array([1.0]))[0, 0], 2 * _x[0, 0] + 1)
_two = np.stack([_x[0, 0], -_x[0, 0] + 1])[None]                 # 2 input channels
_w2 = np.array([[[[1.0]], [[1.0]]], [[[1.0]], [[-1.0]]]])        # o=0: c0 + c1, o=1: c0 - c1
_y2 = conv2d_loops(_two, _w2)
np.testing.assert_array_equal(_y2[0, 0], np.ones((4, 4)))
np.testing.assert_array_equal(_y2[0, 1], 2 * _x[0, 0] - 1)
print("✓ conv2d_loops")

# %% [markdown]
# ## 3. im2col: every window becomes a column
#
# Look at the innermost three loops again: for one output position, they compute the dot
# product of the flattened filter (length `C·kh·kw`) with the flattened input window (also
# length `C·kh·kw`). So if we cut out **every** window, flatten each one into a column and
# stand the columns side by side — one per output position — then *all* the dot products of
# *all* filters are a single matrix product:
#
# $$\underbrace{Y}_{C_{out}\times L} = \underbrace{W}_{C_{out}\times C k_h k_w}\;
#   \underbrace{\text{cols}}_{C k_h k_w \times L}, \qquad L = H_{out} W_{out}$$
#
# (per image; putting the images' columns side by side makes it one product for the whole
# batch, with `L = N·H_out·W_out` columns). This is
# **im2col** ("image to columns"), the classic trick behind Caffe's and early cuDNN's
# convolutions: it turns a convolution into a GEMM, the one operation every BLAS library has
# tuned to the last cycle. The picture: a 4×4 image, a 2×2 kernel, stride 1 — nine windows,
# nine columns of four values.

# %%
def draw_im2col(axes):
    img = np.arange(16).reshape(4, 4)
    cols = np.stack([img[i:i + 2, j:j + 2].ravel() for i in range(3) for j in range(3)], axis=1)
    colors = {0: "tab:red", 4: "tab:green", 8: "tab:purple"}
    axes[0].imshow(img, cmap="Blues", vmin=-8, vmax=24)
    for (r, c), v in np.ndenumerate(img):
        axes[0].text(c, r, str(v), ha="center", va="center")
    for l, color in colors.items():
        i, j = divmod(l, 3)
        axes[0].add_patch(Rectangle((j - 0.45, i - 0.45), 1.9, 1.9, fill=False, lw=2.5, ec=color))
    axes[0].set_title("input 4×4, 2×2 windows")
    axes[1].imshow(cols, cmap="Blues", vmin=-8, vmax=24)
    for (r, c), v in np.ndenumerate(cols):
        axes[1].text(c, r, str(v), ha="center", va="center")
    for l, color in colors.items():
        axes[1].add_patch(Rectangle((l - 0.45, -0.45), 0.9, 3.9, fill=False, lw=2.5, ec=color))
    axes[1].set_title("cols: (C·kh·kw = 4) × (L = 9)")
    axes[1].set_xlabel("output position l = i·W_out + j")
    axes[1].set_ylabel("(c, u, v) in the window")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])


fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw={"width_ratios": [1, 2]})
draw_im2col(axes)
fig.tight_layout()
plt.show()

# %% [markdown]
# Notice that the value 5 appears in four columns: every pixel sits in up to `kh·kw` windows,
# so the column matrix is up to `kh·kw` times larger than the input. That is the price of
# im2col (section 5 measures it).
#
# ### Windows as a strided view
#
# How do we cut out the windows *without* a Python loop over positions? With strides, as in
# module 01. Take the padded input `xp` of shape `(N, C, Hp, Wp)` with element strides
# `(sN, sC, sH, sW)`. Element `(n, c, u, v)` of the window at output position `(i, j)` is
# `xp[n, c, i·s + u, j·s + v]`, which lives at memory position
#
# $$n\,s_N + c\,s_C + u\,s_H + v\,s_W + i\,(s\cdot s_H) + j\,(s\cdot s_W).$$
#
# That is a *linear* function of the six indices `(n, c, u, v, i, j)`, so **all windows at
# once are one strided view** of shape `(N, C, kh, kw, H_out, W_out)` with strides
# `(sN, sC, sH, sW, s·sH, s·sW)` — no copy, no loop. numpy calls this
# `np.lib.stride_tricks.as_strided` (its strides are in **bytes**: `xp.strides` already are).
# We ask for a read-only view (`writeable=False`): writing into overlapping windows would
# write the same memory many times.
#
# Then `im2col` is: pad, view, and **one reshape** to `(N, C·kh·kw, L)` — the reshape is the
# moment the copy happens (the view's memory pattern is not expressible as a plain matrix).
# We use PyTorch's layout for it: `torch.nn.functional.unfold` returns exactly this
# `(N, C·kh·kw, L)` array, with the rows ordered `(c, u, v)` and the columns `(i, j)`.
#
# Write `_pad(x, padding, value)`, `_windows(xp, kernel_size, stride)` and
# `im2col(input, kernel_size, stride, padding)`.

# %% nbgrader={"grade": false, "grade_id": "im2col", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _pad(x, padding, value=0.0):
    """x (N, C, H, W) with padding = (ph, pw) rows/columns of `value` on each side (numpy)."""
    # Hint: np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value);
    # return x itself when there is nothing to pad.
    ### BEGIN SOLUTION
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)
    ### END SOLUTION


def _windows(xp, kernel_size, stride):
    """All kh×kw windows of the padded array xp (N, C, Hp, Wp), as a read-only strided VIEW
    of shape (N, C, kh, kw, H_out, W_out): no copy, no loop.

    Why: this view is im2col without its copy; pooling reduces over it directly.
    """
    # Hints:
    # - H_out = conv_output_size(Hp, kh, sh) (padding is already in xp), same for W_out;
    # - sN, sC, sH, sW = xp.strides (bytes);
    # - np.lib.stride_tricks.as_strided(xp, shape=..., strides=(sN, sC, sH, sW, sH * sh, sW * sw),
    #   writeable=False).
    ### BEGIN SOLUTION
    N, C, Hp, Wp = xp.shape
    kh, kw = kernel_size
    sh, sw = stride
    Ho = conv_output_size(Hp, kh, sh)
    Wo = conv_output_size(Wp, kw, sw)
    sN, sC, sH, sW = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp, shape=(N, C, kh, kw, Ho, Wo), strides=(sN, sC, sH, sW, sH * sh, sW * sw), writeable=False)
    ### END SOLUTION


def im2col(input, kernel_size, stride=1, padding=0):
    """The column matrix of a batch of images (torch.nn.functional.unfold's layout).

    input: (N, C, H, W) numpy array or Tensor. Returns a numpy array of shape
    (N, C·kh·kw, H_out·W_out): column l = i·W_out + j holds the window of output position
    (i, j), flattened in (c, u, v) order.
    """
    x = _as_numpy(input)
    if x.ndim != 4:
        raise ValueError(f"im2col: expected a 4-D input (N, C, H, W), got shape {tuple(x.shape)}")
    kernel_size = _pair(kernel_size, "kernel_size", "im2col")
    stride = _pair(stride, "stride", "im2col")
    padding = _pair(padding, "padding", "im2col")
    # Hint: _windows(_pad(x, padding), kernel_size, stride), then one reshape to
    # (N, C * kh * kw, H_out * W_out).
    ### BEGIN SOLUTION
    win = _windows(_pad(x, padding), kernel_size, stride)
    N, C, kh, kw, Ho, Wo = win.shape
    return win.reshape(N, C * kh * kw, Ho * Wo)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-im2col", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_img = np.arange(16.0).reshape(1, 1, 4, 4)
_c = im2col(_img, 2)
assert _c.shape == (1, 4, 9), _c.shape
np.testing.assert_array_equal(_c[0, :, 0], [0, 1, 4, 5])   # the red window
np.testing.assert_array_equal(_c[0, :, 4], [5, 6, 9, 10])  # the green one
np.testing.assert_array_equal(_c[0, 0], [0, 1, 2, 4, 5, 6, 8, 9, 10])
_xp = np.arange(2 * 3 * 6 * 7.0).reshape(2, 3, 6, 7)
_v = _windows(_xp, (3, 2), (2, 1))
assert _v.shape == (2, 3, 3, 2, 2, 6), _v.shape
assert np.shares_memory(_v, _xp), "_windows must be a view, not a copy"
assert _v[1, 2, 2, 1, 1, 4] == _xp[1, 2, 1 * 2 + 2, 4 * 1 + 1]
np.testing.assert_array_equal(_pad(_img, (1, 2))[0, 0, 0], np.zeros(8))
assert _pad(_img, (1, 2)).shape == (1, 1, 6, 8) and _pad(_img, (1, 1), -1.0)[0, 0, 0, 0] == -1
_cp = im2col(_img, (3, 3), stride=2, padding=1)
assert _cp.shape == (1, 9, 4)
np.testing.assert_array_equal(_cp[0, :, 0], [0, 0, 0, 0, 0, 1, 0, 4, 5])
print("✓ _pad, _windows, im2col")

# %% [markdown]
# ## 4. conv2d as one matrix multiply
#
# With the columns, the forward pass is a few lines: reshape the weight to a
# `(C_out, C·kh·kw)` matrix and contract it with the `(N, C·kh·kw, L)` columns over the
# `C·kh·kw` axis. `np.tensordot(W, cols, axes=(1, 1))` does that as **one** big matrix
# multiply (it lays the columns of all images side by side), giving `(C_out, N, L)`. Add the
# bias (one value per output channel), move the batch axis to the front and reshape to
# `(N, C_out, H_out, W_out)`. (`np.matmul(W, cols)` would also work, as a batch of `N` small
# products; one large product keeps the BLAS library busier and is usually faster.) Write
# `_conv2d_forward(x, weight, bias, stride, padding)`; it receives Tensors (as every
# `forward` given to `apply` does) and returns a numpy array.
#
# The provided `conv2d` checks its arguments — a wrong number of dimensions or of channels
# is the most common CNN bug, so the messages name the shapes — and dispatches your forward
# as the op `"conv2d"` with the attributes `stride` and `padding` (pairs). The inputs are
# `(input, weight)` or `(input, weight, bias)`.

# %% nbgrader={"grade": false, "grade_id": "conv2d-forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _conv2d_forward(x, weight, bias=None, *, stride, padding):
    """Forward of conv2d: im2col, one (batched) matmul, bias, reshape. Tensors in, numpy out."""
    # Hints:
    # - cols = im2col(x.numpy(), (kh, kw), stride, padding)  -> (N, C·kh·kw, L);
    # - out = np.tensordot(weight.numpy().reshape(C_out, -1), cols, axes=(1, 1))  -> (C_out, N, L)
    #   (tensordot contracts axis 1 of both and runs ONE big matrix multiply);
    # - add the bias as bias[:, None, None]; then out.transpose(1, 0, 2).reshape(N, C_out, Ho, Wo).
    ### BEGIN SOLUTION
    xa, wa = x.numpy(), weight.numpy()
    N, _, H, W = xa.shape
    C_out, _, kh, kw = wa.shape
    cols = im2col(xa, (kh, kw), stride, padding)                  # (N, C·kh·kw, L)
    out = np.tensordot(wa.reshape(C_out, -1), cols, axes=(1, 1))  # (C_out, N, L): one GEMM
    if bias is not None:
        out += bias.numpy()[:, None, None]
    Ho = conv_output_size(H, kh, stride[0], padding[0])
    Wo = conv_output_size(W, kw, stride[1], padding[1])
    return out.transpose(1, 0, 2).reshape(N, C_out, Ho, Wo)
    ### END SOLUTION


def _check_float(op, name, t, dtype):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a tinytorch Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{op}: {name} is {t.dtype} but the input is {dtype}; "
                        f"convert one of them (e.g. with .to({str(dtype)!r}))")


def _check_image_batch(op, input):
    """A floating 4-D (N, C, H, W) Tensor, or a ValueError that names the shape."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a tinytorch Tensor, got {type(input).__name__}")
    if input.ndim != 4:
        hint = " (a single image? add the batch dimension with input.unsqueeze(0))" if input.ndim == 3 else ""
        raise ValueError(f"{op}: expected a 4-D input (N, C, H, W), got shape {input.shape}{hint}")
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: input must be floating (float32 or float64), got {input.dtype}")


def conv2d(input, weight, bias=None, stride=1, padding=0):
    """2-D convolution (cross-correlation) of input (N, C_in, H, W) with weight
    (C_out, C_in, kh, kw) and optional bias (C_out,) (torch.nn.functional.conv2d)."""
    _check_image_batch("conv2d", input)
    _check_float("conv2d", "weight", weight, input.dtype)
    if weight.ndim != 4:
        raise ValueError(f"conv2d: weight must be 4-D (C_out, C_in, kh, kw), got shape {weight.shape}")
    if input.shape[1] != weight.shape[1]:
        raise ValueError(f"conv2d: input of shape {input.shape} has {input.shape[1]} channels, but "
                         f"the weight of shape {weight.shape} expects C_in = {weight.shape[1]} channels")
    stride = _pair(stride, "stride", "conv2d")
    padding = _pair(padding, "padding", "conv2d")
    for d, (size, k) in enumerate(zip(input.shape[2:], weight.shape[2:])):
        try:
            conv_output_size(size, k, stride[d], padding[d])
        except ValueError as exc:
            raise ValueError(f"conv2d: input {input.shape}, weight {weight.shape}, stride {stride}, "
                             f"padding {padding}: {exc}") from None
    inputs = (input, weight)
    if bias is not None:
        _check_float("conv2d", "bias", bias, input.dtype)
        if bias.shape != (weight.shape[0],):
            raise ValueError(f"conv2d: bias must have shape ({weight.shape[0]},) (one per output "
                             f"channel), got {bias.shape}")
        inputs = inputs + (bias,)
    return apply("conv2d", _conv2d_forward, *inputs, stride=stride, padding=padding)


# %% nbgrader={"grade": true, "grade_id": "test-conv2d-forward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
for (_N, _C, _H, _W, _Co, _k, _s, _p) in [(2, 3, 7, 6, 4, 3, 1, 1), (1, 2, 8, 9, 3, 2, 2, 0), (2, 1, 5, 5, 2, 5, 1, 2)]:
    _xx = _rng.standard_normal((_N, _C, _H, _W))
    _ww = _rng.standard_normal((_Co, _C, _k, _k))
    _bb = _rng.standard_normal(_Co)
    _y = conv2d(Tensor(_xx), Tensor(_ww), Tensor(_bb), stride=_s, padding=_p)
    np.testing.assert_allclose(_y.numpy(), conv2d_loops(_xx, _ww, _bb, _s, _p), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(conv2d(Tensor(_xx), Tensor(_ww), stride=_s, padding=_p).numpy(),
                               conv2d_loops(_xx, _ww, None, _s, _p), rtol=1e-10, atol=1e-12)
assert conv2d(tinytorch.randn(1, 1, 4, 4), tinytorch.randn(2, 1, 3, 3)).dtype == np.float32
_t = conv2d(Tensor(_xx), Tensor(_ww, requires_grad=True), padding=1)
assert _t.grad_fn.op == "conv2d" and _t.grad_fn.attrs["stride"] == (1, 1) and _t.grad_fn.attrs["padding"] == (1, 1)
try:
    conv2d(tinytorch.randn(2, 3, 8, 8), tinytorch.randn(4, 2, 3, 3))
    raise AssertionError("3 input channels and a weight for 2 must raise")
except ValueError as e:
    assert "(2, 3, 8, 8)" in str(e) and "(4, 2, 3, 3)" in str(e), str(e)
print("✓ conv2d forward = the seven loops")

# %% [markdown]
# ## 5. Measuring: loops versus im2col, and what the columns cost
#
# Both compute the same numbers. How different are they? We time the seven loops and
# `conv2d` on small batches of 3-channel images going to 8 channels with a 3×3 kernel, for a
# few image sizes (the loops only at tiny sizes: they are slow). Each time is the median of a
# few runs.

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_rng = np.random.default_rng(1)
_sizes = [4, 8, 12, 16]
_t_loops, _t_cols = [], []
for _n in _sizes:
    _xx = _rng.standard_normal((2, 3, _n, _n)).astype(np.float32)
    _ww = _rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    _t_loops.append(median_time(lambda: conv2d_loops(_xx, _ww, None, 1, 1), repeats=2))
    _xt, _wt = Tensor(_xx), Tensor(_ww)
    _t_cols.append(median_time(lambda: conv2d(_xt, _wt, padding=1)))
    print(f"{_n:3d}×{_n:<3d} seven loops {_t_loops[-1] * 1e3:9.2f} ms   im2col+matmul "
          f"{_t_cols[-1] * 1e3:7.3f} ms   speed-up {_t_loops[-1] / _t_cols[-1]:8.0f}×")

# %% [markdown]
# The loops run one multiply-add per Python iteration (tens of nanoseconds each, mostly
# interpreter overhead); im2col hands the same multiply-adds to a BLAS kernel that does
# several per clock cycle. Even at these toy sizes the speed-up is tens to hundreds of
# times, and it grows with the size: the loops' time grows with the number of multiply-adds,
# while im2col's is still mostly fixed overhead here.
#
# The price is **memory**. The column matrix holds `C·kh·kw·H_out·W_out` numbers per image
# against `C·H·W` for the input: with "same" padding about `kh·kw` = 9 times more for a 3×3
# kernel, 25 times more for 5×5. We measure the actual arrays' bytes (`nbytes`) for a batch
# of 32 RGB images as the image grows.

# %%
_sizes = [16, 32, 64, 128]
_in_mb, _col3_mb, _col5_mb = [], [], []
for _n in _sizes:
    _xx = np.zeros((32, 3, _n, _n), dtype=np.float32)
    _in_mb.append(_xx.nbytes / 2**20)
    _col3_mb.append(im2col(_xx, 3, 1, 1).nbytes / 2**20)
    _col5_mb.append(im2col(_xx, 5, 1, 2).nbytes / 2**20)
    print(f"{_n:4d}×{_n:<4d} input {_in_mb[-1]:7.2f} MiB   cols 3×3 {_col3_mb[-1]:8.2f} MiB "
          f"({_col3_mb[-1] / _in_mb[-1]:.0f}×)   cols 5×5 {_col5_mb[-1]:8.2f} MiB ({_col5_mb[-1] / _in_mb[-1]:.0f}×)")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].loglog([4, 8, 12, 16], np.array(_t_loops) * 1e3, "o-", label="seven loops")
axes[0].loglog([4, 8, 12, 16], np.array(_t_cols) * 1e3, "s-", label="im2col + matmul")
axes[0].set_xlabel("image side (N=2, 3→8 channels, 3×3)")
axes[0].set_ylabel("median time (ms)")
axes[0].set_title("time")
axes[0].legend()
axes[1].loglog(_sizes, _in_mb, "o-", label="input")
axes[1].loglog(_sizes, _col3_mb, "s-", label="column matrix, 3×3")
axes[1].loglog(_sizes, _col5_mb, "^-", label="column matrix, 5×5")
axes[1].set_xlabel("image side (N=32, C=3, float32)")
axes[1].set_ylabel("MiB")
axes[1].set_title("memory: the columns are ~k² × the input")
axes[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# For one layer of a real network — 64 channels of 112×112 images, batch 32, 3×3 — the
# column matrix is 32·576·12,544 floats ≈ 0.9 GB. That is why production libraries avoid
# materialising it (section 12). For our 8×8 digits it is a few hundred kilobytes.
#
# ## 6. Backward: the weight gradient is a matmul, the input gradient is col2im
#
# Write the forward per image as `Y = W·cols + b` (`Y`: `C_out × L`). Given the upstream
# gradient `Ȳ = ∂L/∂Y` (same shape), matrix calculus gives
#
# - **bias**: every position used `b_o`, so `b̄_o = Σ_{n, l} Ȳ_{n,o,l}`;
# - **weight**: `W̄ = Σ_n Ȳ_n · cols_nᵀ` — a matmul with the *same* columns as the forward
#   (we recompute them from the saved input rather than keeping 9× the input alive);
# - **columns**: `cols̄_n = Wᵀ · Ȳ_n`, shape `(C·kh·kw, L)`. But the columns are not the input:
#   each input pixel was **copied** into up to `kh·kw` columns. A value used several times
#   gets the **sum** of the gradients of its uses (the same rule as for broadcasting in
#   module 06). So `x̄` is obtained by adding every entry of `cols̄` back to the pixel it was
#   copied from: that is **col2im**.
#
# col2im needs no loop over positions either. Reshape `cols̄` to
# `(N, C, kh, kw, H_out, W_out)`; for one kernel offset `(u, v)`, the slice
# `[:, :, u, v]` is an `(N, C, H_out, W_out)` array whose entry `(i, j)` belongs to padded
# pixel `(i·s + u, j·s + v)` — a strided slice `xp̄[:, :, u : u + s·H_out : s, v : v + s·W_out : s]`.
# So we loop over the `kh·kw` offsets only (9 iterations for 3×3), each adding a whole
# slab with `+=`. Within one offset no two positions hit the same pixel, so `+=` is safe;
# the overlaps between windows are exactly the different offsets, which the loop sums.
# Finally cut the padding off: padding pixels are constants, their gradient is dropped.
#
# ### col2im is the adjoint of im2col
#
# im2col is a linear map `A` from images to columns (it only copies). col2im is its
# **transpose** `Aᵀ`: for any image `x` and any column array `y`,
# `⟨im2col(x), y⟩ = ⟨x, col2im(y)⟩`. That is precisely why it is the right backward (the
# backward of a linear map is its transpose), and it gives a sharp check. Note that col2im
# is *not* the inverse of im2col: `col2im(im2col(x))` multiplies each pixel by the number of
# windows that contain it. (PyTorch calls these two `unfold` and `fold`.)

# %% nbgrader={"grade": false, "grade_id": "col2im", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def col2im(cols, input_size, kernel_size, stride=1, padding=0):
    """Scatter-add a column array (N, C·kh·kw, L) back into images (N, C, H, W): the adjoint
    of im2col (torch.nn.functional.fold's layout). input_size = (H, W), without padding.

    Why: the backward of im2col; a pixel copied into several columns gets the sum of their
    gradients.
    """
    cols = _as_numpy(cols)
    H, W = _pair(input_size, "input_size", "col2im")
    kh, kw = _pair(kernel_size, "kernel_size", "col2im")
    sh, sw = _pair(stride, "stride", "col2im")
    ph, pw = _pair(padding, "padding", "col2im")
    Ho, Wo = conv_output_size(H, kh, sh, ph), conv_output_size(W, kw, sw, pw)
    if cols.ndim != 3 or cols.shape[1] % (kh * kw) or cols.shape[2] != Ho * Wo:
        raise ValueError(f"col2im: expected columns of shape (N, C·{kh}·{kw}, {Ho}·{Wo}) for an input of "
                         f"size {(H, W)}, got {tuple(cols.shape)}")
    # Hints:
    # - c6 = cols.reshape(N, C, kh, kw, Ho, Wo); xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw), cols.dtype);
    # - for u in range(kh): for v in range(kw):
    #       xp[:, :, u:u + sh * Ho:sh, v:v + sw * Wo:sw] += c6[:, :, u, v]
    # - return the un-padded middle, made contiguous: np.ascontiguousarray(xp[:, :, ph:ph + H, pw:pw + W]).
    ### BEGIN SOLUTION
    N, C = cols.shape[0], cols.shape[1] // (kh * kw)
    c6 = cols.reshape(N, C, kh, kw, Ho, Wo)
    xp = np.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=cols.dtype)
    for u in range(kh):
        for v in range(kw):
            xp[:, :, u:u + sh * Ho:sh, v:v + sw * Wo:sw] += c6[:, :, u, v]
    return np.ascontiguousarray(xp[:, :, ph:ph + H, pw:pw + W])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-col2im", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(2)
for (_k, _s, _p) in [(2, 1, 0), (3, 2, 1), ((3, 2), (1, 2), (2, 0))]:
    _xx = _rng.standard_normal((2, 3, 7, 6))
    _cx = im2col(_xx, _k, _s, _p)
    _yy = _rng.standard_normal(_cx.shape)
    _back = col2im(_yy, (7, 6), _k, _s, _p)
    assert _back.shape == _xx.shape, _back.shape
    np.testing.assert_allclose(np.sum(_cx * _yy), np.sum(_xx * _back), rtol=1e-10,
                               err_msg="col2im must be the adjoint of im2col: <im2col(x), y> = <x, col2im(y)>")
_count = col2im(im2col(np.ones((1, 1, 4, 4)), 2), (4, 4), 2)
np.testing.assert_array_equal(_count[0, 0], [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]])
print("✓ col2im (the adjoint of im2col)")

# %% [markdown]
# Now the backward rule. Module 06's contract: a rule is `rule(node, grad)`, where
# `node.inputs` are the op's input Tensors, `node.attrs` its attributes and `grad` the
# upstream gradient (a numpy array of the output's shape, not to be written into); it
# returns one gradient per input. `@backward_rule("conv2d")` registers it in module 06's
# `BACKWARD_RULES` — this is how a later module teaches autograd a new op without changing
# module 06. Write it with the three formulas above. `np.tensordot(g, cols, axes=([0, 2], [0, 2]))`
# sums `Ȳ_n · cols_nᵀ` over the images and positions in one call.

# %% nbgrader={"grade": false, "grade_id": "conv2d-backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("conv2d")
def _conv2d_backward(node, grad):
    """Gradients of conv2d for (input, weight[, bias]): col2im(Wᵀ·Ȳ), Σ_n Ȳ·colsᵀ, Σ Ȳ."""
    x, w = node.inputs[0].numpy(), node.inputs[1].numpy()
    stride, padding = node.attrs["stride"], node.attrs["padding"]
    # Hints:
    # - g = grad.reshape(N, C_out, L); cols = im2col(x, (kh, kw), stride, padding);
    # - gw = np.tensordot(g, cols, axes=([0, 2], [0, 2])).reshape(w.shape);
    # - gcols = np.tensordot(w.reshape(C_out, -1), g, axes=(0, 1)).transpose(1, 0, 2)  -> (N, C·kh·kw, L);
    #   gx = col2im(gcols, (H, W), (kh, kw), stride, padding);
    # - return (gx, gw) or (gx, gw, g.sum(axis=(0, 2))) when there is a bias (len(node.inputs) == 3).
    ### BEGIN SOLUTION
    N, _, H, W = x.shape
    C_out, _, kh, kw = w.shape
    g = np.asarray(grad).reshape(N, C_out, -1)
    cols = im2col(x, (kh, kw), stride, padding)
    gw = np.tensordot(g, cols, axes=([0, 2], [0, 2])).reshape(w.shape)
    gcols = np.tensordot(w.reshape(C_out, -1), g, axes=(0, 1)).transpose(1, 0, 2)  # (N, C·kh·kw, L)
    gx = col2im(gcols, (H, W), (kh, kw), stride, padding)
    if len(node.inputs) == 3:
        return gx, gw, g.sum(axis=(0, 2))
    return gx, gw
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-conv2d-backward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(3)
for (_k, _s, _p) in [(3, 1, 1), (2, 2, 0), ((3, 1), (2, 1), (1, 0))]:
    _x = Tensor(_rng.standard_normal((2, 2, 5, 4)), requires_grad=True)
    _w = Tensor(_rng.standard_normal((3, 2) + _pair(_k, "", "")), requires_grad=True)
    _b = Tensor(_rng.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda x, w, b: conv2d(x, w, b, stride=_s, padding=_p), [_x, _w, _b])
    assert gradcheck(lambda x, w: conv2d(x, w, stride=_s, padding=_p), [_x, _w])
_x = Tensor(_rng.standard_normal((2, 1, 4, 4)), requires_grad=True)
conv2d(_x, Tensor(np.ones((1, 1, 2, 2)))).sum().backward()
np.testing.assert_array_equal(_x.grad.numpy()[0, 0], [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]])
print("✓ conv2d backward passes gradcheck")

# %% [markdown]
# The last check is worth a second look: with an all-ones 2×2 kernel and `L = Σ y`, the
# gradient of each pixel is the number of windows it belongs to — corners 1, edges 2,
# inside 4. That is col2im counting copies.
#
# ## 7. Pooling
#
# A pooling layer summarises each window of each channel separately, with no weights:
# channels never mix. Its purpose is to shrink the feature maps (2×2 windows with stride 2
# halve H and W, so the next conv sees a twice larger part of the image for the same cost)
# and to make the features a little insensitive to small shifts. PyTorch's default stride is
# the kernel size (non-overlapping windows); `stride=None` means that here too.
#
# ### Max pooling and the argmax routing of gradients
#
# `y = max(window)`. Its gradient is 1 for the element that was the maximum and 0 for the
# others (a small change of any other element does not change the max). So in the backward
# pass, each output's gradient is **routed** to the one input position that won, and all the
# others get nothing. The forward must therefore remember *where* each maximum was: the
# **argmax indices**. We store them like PyTorch's `return_indices=True` does: for each
# output, the flat index `h·W + w` of the winner within its `H × W` input plane.
#
# Padding for max pooling is `−∞` (a padded cell must never win), and PyTorch requires
# `padding ≤ kernel_size / 2` so that every window contains at least one real pixel.
#
# Write `_max_pool2d_indices` with the windows view: reshape the window axes to one axis of
# length `kh·kw`, take the `argmax` over it (numpy returns the *first* maximum on ties, as
# PyTorch does), and convert the winner's position `(u, v) = divmod(a, kw)` inside the window
# at output `(i, j)` to the input position `(i·s + u − p, j·s + v − p)`. Then the forward is
# a gather (`np.take_along_axis`) and the backward a scatter-add of `grad` at those indices
# (`np.bincount` with weights adds all contributions that land on one pixel — overlapping
# windows can pick the same winner).

# %% nbgrader={"grade": false, "grade_id": "max-pool", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _max_pool2d_indices(x, kernel_size, stride, padding):
    """For x (N, C, H, W) numpy: int64 (N, C, H_out, W_out) flat indices h·W + w of each window's max."""
    # Hints:
    # - win = _windows(_pad(x, padding, -np.inf), kernel_size, stride)   # (N, C, kh, kw, Ho, Wo)
    # - a = win.reshape(N, C, kh * kw, Ho, Wo).argmax(axis=2); u, v = np.divmod(a, kw);
    # - h = np.arange(Ho)[:, None] * sh + u - ph; w = np.arange(Wo)[None, :] * sw + v - pw;
    # - return (h * W + w).astype(np.int64).
    ### BEGIN SOLUTION
    N, C, H, W = x.shape
    kh, kw = kernel_size
    (sh, sw), (ph, pw) = stride, padding
    win = _windows(_pad(x, padding, -np.inf), kernel_size, stride)
    Ho, Wo = win.shape[4], win.shape[5]
    a = win.reshape(N, C, kh * kw, Ho, Wo).argmax(axis=2)
    u, v = np.divmod(a, kw)
    h = np.arange(Ho)[:, None] * sh + u - ph
    w = np.arange(Wo)[None, :] * sw + v - pw
    return (h * W + w).astype(np.int64)
    ### END SOLUTION


def _max_pool2d_forward(x, *, kernel_size, stride, padding, indices):
    """Gather x at the argmax indices: (N, C, H·W) -> (N, C, H_out, W_out)."""
    # Hint: np.take_along_axis(xa.reshape(N, C, H * W), indices.reshape(N, C, -1), axis=2), reshaped.
    ### BEGIN SOLUTION
    xa = x.numpy()
    N, C, H, W = xa.shape
    out = np.take_along_axis(xa.reshape(N, C, H * W), indices.reshape(N, C, -1), axis=2)
    return out.reshape(indices.shape)
    ### END SOLUTION


@backward_rule("max_pool2d")
def _max_pool2d_backward(node, grad):
    """Route each output's gradient to its argmax; sum where windows share a winner."""
    x = node.inputs[0]
    indices = node.attrs["indices"]
    # Hints:
    # - N, C, H, W = x.shape; plane = np.arange(N * C).reshape(N, C, 1, 1) * (H * W);
    # - flat = (plane + indices).ravel();
    # - gx = np.bincount(flat, weights=grad.ravel(), minlength=N * C * H * W).reshape(x.shape);
    # - return a one-element tuple (gx,).
    ### BEGIN SOLUTION
    N, C, H, W = x.shape
    plane = np.arange(N * C, dtype=np.int64).reshape(N, C, 1, 1) * (H * W)
    gx = np.bincount((plane + indices).ravel(), weights=np.asarray(grad, dtype=np.float64).ravel(),
                     minlength=N * C * H * W)
    return (gx.reshape(x.shape),)
    ### END SOLUTION


def _pool_args(op, input, kernel_size, stride, padding):
    """Check a pooling call; (kernel_size, stride, padding) as pairs."""
    _check_image_batch(op, input)
    kernel_size = _pair(kernel_size, "kernel_size", op)
    stride = kernel_size if stride is None else _pair(stride, "stride", op)
    padding = _pair(padding, "padding", op)
    for d in range(2):
        if padding[d] > kernel_size[d] // 2:
            raise ValueError(f"{op}: padding {padding} must be at most half the kernel size {kernel_size}")
        try:
            conv_output_size(input.shape[2 + d], kernel_size[d], stride[d], padding[d])
        except ValueError as exc:
            raise ValueError(f"{op}: input {input.shape}, kernel_size {kernel_size}, stride {stride}, "
                             f"padding {padding}: {exc}") from None
    return kernel_size, stride, padding


def max_pool2d(input, kernel_size, stride=None, padding=0, return_indices=False):
    """Max over each kh×kw window of each channel (torch.nn.functional.max_pool2d).
    With return_indices=True also returns the int64 flat indices h·W + w of the maxima."""
    kernel_size, stride, padding = _pool_args("max_pool2d", input, kernel_size, stride, padding)
    indices = _max_pool2d_indices(input.numpy(), kernel_size, stride, padding)
    out = apply("max_pool2d", _max_pool2d_forward, input, kernel_size=kernel_size, stride=stride,
                padding=padding, indices=indices)
    return (out, tensor(indices)) if return_indices else out


# %% nbgrader={"grade": true, "grade_id": "test-max-pool", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_x = Tensor(np.array([[[[1.0, 5.0, 2.0, 0.0],
                        [3.0, 4.0, 8.0, 1.0],
                        [0.0, 2.0, 6.0, 7.0],
                        [9.0, 1.0, 3.0, 2.0]]]]), requires_grad=True)
_y, _i = max_pool2d(_x, 2, return_indices=True)
np.testing.assert_array_equal(_y.numpy()[0, 0], [[5, 8], [9, 7]])
np.testing.assert_array_equal(_i.numpy()[0, 0], [[1, 6], [12, 11]])
_y.sum().backward()
np.testing.assert_array_equal(_x.grad.numpy()[0, 0], [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]])
_x.grad = None
max_pool2d(_x, 3, stride=1).sum().backward()  # 4 overlapping windows: 8, 8, 9, 8
np.testing.assert_array_equal(_x.grad.numpy()[0, 0], [[0, 0, 0, 0], [0, 0, 3, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
np.testing.assert_array_equal(max_pool2d(_x, 3, stride=2, padding=1).numpy()[0, 0], [[5, 8], [9, 8]])
_r = Tensor(np.random.default_rng(4).permutation(2 * 3 * 5 * 6).reshape(2, 3, 5, 6) / 10.0, requires_grad=True)
assert gradcheck(lambda x: max_pool2d(x, 2, 2, 1), [_r])
assert gradcheck(lambda x: max_pool2d(x, (3, 2), (1, 2), 0), [_r])
print("✓ max_pool2d with argmax routing")

# %% [markdown]
# ### Average pooling
#
# `y = mean(window)`: each element of a `kh × kw` window gets `1/(kh·kw)` of the output's
# gradient. Padding cells are zeros and count in the mean (`count_include_pad=True`,
# PyTorch's default), so the divisor is always `kh·kw`. The forward is a mean over the two
# window axes of the windows view (no copy at all); the backward spreads `grad / (kh·kw)` to
# every window position and adds up the overlaps — exactly col2im again, applied to columns
# that are all equal within a window.

# %% nbgrader={"grade": false, "grade_id": "avg-pool", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _avg_pool2d_forward(x, *, kernel_size, stride, padding):
    """Mean over each window of the zero-padded input (the divisor is always kh·kw)."""
    # Hint: _windows(_pad(xa, padding), kernel_size, stride).mean(axis=(2, 3)).
    ### BEGIN SOLUTION
    return _windows(_pad(x.numpy(), padding), kernel_size, stride).mean(axis=(2, 3))
    ### END SOLUTION


@backward_rule("avg_pool2d")
def _avg_pool2d_backward(node, grad):
    """Each window element gets grad / (kh·kw); overlaps add up (col2im)."""
    x = node.inputs[0]
    kernel_size, stride, padding = node.attrs["kernel_size"], node.attrs["stride"], node.attrs["padding"]
    # Hints:
    # - cols6 = np.broadcast_to((grad / (kh * kw))[:, :, None, None], (N, C, kh, kw, Ho, Wo));
    # - col2im(cols6.reshape(N, C * kh * kw, Ho * Wo), (H, W), kernel_size, stride, padding).
    ### BEGIN SOLUTION
    N, C, H, W = x.shape
    kh, kw = kernel_size
    Ho, Wo = grad.shape[2], grad.shape[3]
    g = np.asarray(grad) / (kh * kw)
    cols6 = np.broadcast_to(g[:, :, None, None], (N, C, kh, kw, Ho, Wo))
    return (col2im(cols6.reshape(N, C * kh * kw, Ho * Wo), (H, W), kernel_size, stride, padding),)
    ### END SOLUTION


def avg_pool2d(input, kernel_size, stride=None, padding=0):
    """Mean over each kh×kw window of each channel, zero padding counted
    (torch.nn.functional.avg_pool2d with count_include_pad=True)."""
    kernel_size, stride, padding = _pool_args("avg_pool2d", input, kernel_size, stride, padding)
    return apply("avg_pool2d", _avg_pool2d_forward, input, kernel_size=kernel_size, stride=stride,
                 padding=padding)


# %% nbgrader={"grade": true, "grade_id": "test-avg-pool", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_x = Tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
np.testing.assert_array_equal(avg_pool2d(_x, 2).numpy()[0, 0], [[2.5, 4.5], [10.5, 12.5]])
np.testing.assert_allclose(avg_pool2d(_x, 3, stride=2, padding=1).numpy()[0, 0],
                           [[10 / 9, 24 / 9], [51 / 9, 90 / 9]])
avg_pool2d(_x, 2, stride=1).sum().backward()
np.testing.assert_allclose(_x.grad.numpy()[0, 0], np.array([[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]) / 4)
_r = Tensor(np.random.default_rng(5).standard_normal((2, 3, 5, 6)), requires_grad=True)
assert gradcheck(lambda x: avg_pool2d(x, 3, 2, 1), [_r])
assert gradcheck(lambda x: avg_pool2d(x, (2, 3), (1, 2)), [_r])
print("✓ avg_pool2d")

# %% [markdown]
# ## 8. Batch normalisation
#
# Deep CNNs train much faster when each layer's inputs are kept at a steady scale.
# **BatchNorm2d** normalises every channel `c` over the batch and the spatial positions —
# the `M = N·H·W` values that share that channel — and then lets the network pick a scale
# and a shift of its own:
#
# $$\mu_c = \frac{1}{M}\sum x, \qquad \sigma^2_c = \frac{1}{M}\sum (x-\mu_c)^2, \qquad
#   \hat x = \frac{x - \mu_c}{\sqrt{\sigma_c^2 + \varepsilon}}, \qquad y = \gamma_c \hat x + \beta_c.$$
#
# `γ` (`weight`, initialised to 1) and `β` (`bias`, initialised to 0) are learned, one per
# channel. The subtlety is **train versus eval**:
#
# - in **training**, μ and σ² are the statistics of the current batch, so each sample's
#   output depends on the other samples in the batch; and the layer keeps **running
#   averages** for later: `running = (1 − momentum)·running + momentum·batch_stat`, with
#   momentum 0.1. For the running variance PyTorch uses the **unbiased** batch variance
#   `σ²·M/(M − 1)`, while the normalisation itself uses the biased one;
# - in **evaluation**, the running averages replace the batch statistics: the layer is a
#   fixed per-channel affine map, and a prediction no longer depends on its batch (a batch
#   of one works). Forgetting `model.eval()` before testing is a classic bug.
#
# ### The backward
#
# In eval mode μ and σ² are constants, so `x̄ = ȳ·γ/√(σ²+ε)`. In training they depend on
# `x`, and the chain rule through μ and σ² (per channel, with means over the `M` values)
# gives the well-known form
#
# $$\bar x = \frac{\gamma}{\sqrt{\sigma^2+\varepsilon}}\Big(\bar y - \operatorname{mean}(\bar y)
#   - \hat x \cdot \operatorname{mean}(\bar y\,\hat x)\Big),$$
#
# and in both modes `γ̄ = Σ ȳ·x̂` and `β̄ = Σ ȳ` over the `M` values. The two subtracted
# terms are the gradient flowing through the mean and through the variance: a gradient that
# is constant per channel, or proportional to x̂, is removed — the normalisation is blind
# to those changes of its input.
#
# The provided `batch_norm` computes the statistics to use (and updates the running ones)
# before dispatching the op `"batch_norm"` with attributes `mean`, `invstd` (1/√(σ²+ε), per
# channel), and `training`. Its inputs are always `(input, weight, bias)`: a missing weight
# or bias is replaced by ones or zeros that do not require grad. Write `_batch_stats`
# (the two statistics), the forward and the backward rule; shapes broadcast with
# `(1, C, 1, 1)` (`_channel_shape` gives the right shape for any `(N, C, *)` input).

# %% nbgrader={"grade": false, "grade_id": "batch-norm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _channel_shape(x):
    """(1, C, 1, 1) for a 4-D x: a per-channel vector broadcasts against x with this shape."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _reduce_axes(x):
    """Every axis except the channel axis 1: (0, 2, 3) for NCHW."""
    return (0,) + tuple(range(2, x.ndim))


def _batch_stats(x):
    """Per-channel mean and biased variance of the numpy array x (N, C, *): two (C,) arrays."""
    # Hint: x.mean(axis=_reduce_axes(x)) and x.var(axis=_reduce_axes(x)) (numpy's var is biased).
    ### BEGIN SOLUTION
    axes = _reduce_axes(x)
    return x.mean(axis=axes), x.var(axis=axes)
    ### END SOLUTION


def _batch_norm_forward(x, weight, bias, *, mean, invstd, training, eps):
    """y = (x - mean) * invstd * weight + bias, per channel. Tensors in, numpy out."""
    ### BEGIN SOLUTION
    xa = x.numpy()
    shape = _channel_shape(xa)
    xhat = (xa - mean.reshape(shape)) * invstd.reshape(shape)
    return xhat * weight.numpy().reshape(shape) + bias.numpy().reshape(shape)
    ### END SOLUTION


@backward_rule("batch_norm")
def _batch_norm_backward(node, grad):
    """Gradients for (input, weight, bias); in training through the batch statistics too."""
    x, weight = node.inputs[0].numpy(), node.inputs[1].numpy()
    mean, invstd, training = node.attrs["mean"], node.attrs["invstd"], node.attrs["training"]
    # Hints: shape = _channel_shape(x); axes = _reduce_axes(x);
    # xhat = (x - mean.reshape(shape)) * invstd.reshape(shape); gxhat = grad * weight.reshape(shape);
    # training: gx = invstd * (gxhat - gxhat.mean(axes, keepdims=True) - xhat * (gxhat * xhat).mean(axes, keepdims=True));
    # eval: gx = gxhat * invstd. Then gw = (grad * xhat).sum(axes), gb = grad.sum(axes).
    ### BEGIN SOLUTION
    shape, axes = _channel_shape(x), _reduce_axes(x)
    grad = np.asarray(grad)
    xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
    gxhat = grad * weight.reshape(shape)
    if training:
        gx = invstd.reshape(shape) * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                                      - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
    else:
        gx = gxhat * invstd.reshape(shape)
    return gx, (grad * xhat).sum(axis=axes), grad.sum(axis=axes)
    ### END SOLUTION


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise each channel of input (N, C, *) (torch.nn.functional.batch_norm).

    training=True: use the batch's statistics and, if running_mean/running_var are given,
    update them in place (the variance unbiased). training=False: use the running ones.
    """
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input (N, C, *), got "
                         f"{input.shape if isinstance(input, Tensor) else type(input).__name__}")
    C = input.shape[1]
    for name, t in [("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)]:
        if t is not None and t.shape != (C,):
            raise ValueError(f"batch_norm: {name} must have shape ({C},) for an input of shape "
                             f"{input.shape}, got {t.shape}")
    x = input.numpy()
    if training:
        count = x.size // C
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, "
                             f"got input of shape {input.shape}")
        mean, var = _batch_stats(x)
        if running_mean is not None:
            rm = running_mean.numpy()
            rm[...] = (1 - momentum) * rm + momentum * mean
        if running_var is not None:
            rv = running_var.numpy()
            rv[...] = (1 - momentum) * rv + momentum * var * (count / (count - 1))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when training=False")
        mean, var = running_mean.numpy().copy(), running_var.numpy().copy()
    invstd = (1.0 / np.sqrt(var + eps)).astype(input.dtype)
    mean = np.asarray(mean, dtype=input.dtype)
    weight = ones(C, dtype=input.dtype) if weight is None else weight
    bias = zeros(C, dtype=input.dtype) if bias is None else bias
    return apply("batch_norm", _batch_norm_forward, input, weight, bias, mean=mean, invstd=invstd,
                 training=bool(training), eps=eps)


# %% nbgrader={"grade": true, "grade_id": "test-batch-norm", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(6)
_xx = _rng.standard_normal((4, 3, 5, 2)) * 3 + 1
_m, _v = _batch_stats(_xx)
np.testing.assert_allclose(_m, _xx.transpose(1, 0, 2, 3).reshape(3, -1).mean(1))
np.testing.assert_allclose(_v, _xx.transpose(1, 0, 2, 3).reshape(3, -1).var(1))
_rm, _rv = tinytorch.zeros(3, dtype=tinytorch.float64), tinytorch.ones(3, dtype=tinytorch.float64)
_y = batch_norm(Tensor(_xx), _rm, _rv, training=True, eps=0.0)
np.testing.assert_allclose(_y.numpy().mean(axis=(0, 2, 3)), 0, atol=1e-12)
np.testing.assert_allclose(_y.numpy().var(axis=(0, 2, 3)), 1, rtol=1e-10)
np.testing.assert_allclose(_rm.numpy(), 0.1 * _m)
np.testing.assert_allclose(_rv.numpy(), 0.9 + 0.1 * _v * 40 / 39, err_msg="the running variance is unbiased")
_ye = batch_norm(Tensor(_xx), _rm, _rv, Tensor([1.0, 2.0, 3.0], dtype=tinytorch.float64), training=False)
np.testing.assert_allclose(_ye.numpy(), (_xx - _rm.numpy().reshape(1, 3, 1, 1)) / np.sqrt(_rv.numpy().reshape(1, 3, 1, 1) + 1e-5)
                           * np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1))
_x = Tensor(_xx, requires_grad=True)
_g = Tensor(_rng.standard_normal(3) + 1, requires_grad=True)
_b = Tensor(_rng.standard_normal(3), requires_grad=True)
assert gradcheck(lambda x, g, b: batch_norm(x, None, None, g, b, training=True), [_x, _g, _b])
assert gradcheck(lambda x, g, b: batch_norm(x, _rm, _rv, g, b, training=False), [_x, _g, _b])
print("✓ batch_norm (train and eval) passes gradcheck")

# %% [markdown]
# ## 9. The layers
#
# The modules wrap the functions and own the state.
#
# - **`Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True)`** owns
#   `weight` `(out, in, kh, kw)` and `bias` `(out,)`. PyTorch's default initialisation is the
#   same as `Linear`'s, with the fan-in counting the whole receptive field
#   (`in·kh·kw`, which `_calculate_fan_in_and_fan_out` from module 03 already does for 4-D
#   weights): `kaiming_uniform_(weight, a=√5)`, i.e. U(±1/√fan_in), and the bias
#   U(±1/√fan_in).
# - **`BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)`**
#   owns `weight`, `bias` (if `affine`) and three **buffers** (module 03): `running_mean`
#   (zeros), `running_var` (ones) and `num_batches_tracked` (an int64 counter). Buffers are
#   state that is saved in the `state_dict` but never trained. Its `forward` follows
#   PyTorch's exactly: in training mode with tracking, count the batch, and use
#   `momentum` as the averaging factor (or, if `momentum is None`, the cumulative average
#   factor `1 / num_batches_tracked`); normalise with the batch statistics when training (or
#   when there are no running statistics), else with the running ones.
# - **`Flatten(start_dim=1, end_dim=-1)`** turns `(N, C, H, W)` feature maps into the
#   `(N, C·H·W)` vectors a `Linear` expects (the batch dimension stays).
# - `MaxPool2d` and `AvgPool2d` just remember their arguments (provided).

# %% nbgrader={"grade": false, "grade_id": "layers", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Conv2d(Module):
    """2-D convolution layer over (N, C_in, H, W) inputs (torch.nn.Conv2d)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True, dtype=None):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = _pair(stride, "stride", "Conv2d")
        self.padding = _pair(padding, "padding", "Conv2d")
        if min(self.stride) < 1 or min(self.kernel_size) < 1 or min(self.padding) < 0:
            raise ValueError(f"Conv2d: kernel_size {self.kernel_size} and stride {self.stride} must be "
                             f"positive and padding {self.padding} non-negative")
        # Hints: self.weight = Parameter(zeros(out, in, kh, kw, dtype=dtype)); the bias likewise
        # (out,), or self.register_parameter("bias", None); then self.reset_parameters().
        ### BEGIN SOLUTION
        self.weight = Parameter(zeros(self.out_channels, self.in_channels, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(zeros(self.out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self):
        """PyTorch's default: kaiming_uniform_(weight, a=√5); bias ~ U(±1/√fan_in)."""
        ### BEGIN SOLUTION
        kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = _calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            uniform_(self.bias, -bound, bound)
        ### END SOLUTION

    def forward(self, input):
        ### BEGIN SOLUTION
        return conv2d(input, self.weight, self.bias, self.stride, self.padding)
        ### END SOLUTION

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        return s + ("" if self.bias is not None else ", bias=False")


class BatchNorm2d(Module):
    """Batch normalisation over the channels of (N, C, H, W) inputs (torch.nn.BatchNorm2d)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        if self.affine:
            self.weight = Parameter(ones(self.num_features, dtype=dtype))
            self.bias = Parameter(zeros(self.num_features, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", zeros(self.num_features, dtype=dtype))
            self.register_buffer("running_var", ones(self.num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=np.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, input):
        if not isinstance(input, Tensor) or input.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected a 4-D input (N, C, H, W), got "
                             f"{input.shape if isinstance(input, Tensor) else type(input).__name__}")
        if input.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm2d: input of shape {input.shape} has {input.shape[1]} channels, "
                             f"but the layer was built for num_features = {self.num_features}")
        # Hints (PyTorch's _BatchNorm.forward):
        # - factor = 0.0 if self.momentum is None else self.momentum;
        # - if self.training and self.track_running_stats: add 1 to num_batches_tracked
        #   (in place: self.num_batches_tracked.numpy()[...] += 1) and, if momentum is None,
        #   factor = 1 / num_batches_tracked;
        # - use the batch statistics if self.training or there are no running statistics;
        # - pass the running buffers when they should be used or updated
        #   (not self.training or self.track_running_stats), else None.
        ### BEGIN SOLUTION
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.numpy()[...] += 1
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                          self.weight, self.bias, use_batch, factor, self.eps)
        ### END SOLUTION

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class Flatten(Module):
    """Merge dims start_dim..end_dim into one (torch.nn.Flatten): (N, C, H, W) -> (N, C·H·W)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        # Hint: Tensor.flatten(start_dim, end_dim) from module 01 does it.
        ### BEGIN SOLUTION
        return input.flatten(self.start_dim, self.end_dim)
        ### END SOLUTION

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class MaxPool2d(Module):
    """Max pooling layer (torch.nn.MaxPool2d); stride defaults to kernel_size."""

    def __init__(self, kernel_size, stride=None, padding=0, return_indices=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, padding
        self.return_indices = return_indices

    def forward(self, input):
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.return_indices)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """Average pooling layer, zero padding counted (torch.nn.AvgPool2d); stride defaults to kernel_size."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, padding

    def forward(self, input):
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# %% nbgrader={"grade": true, "grade_id": "test-layers", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
tinytorch.manual_seed(0)
_conv = Conv2d(3, 8, 3, padding=1)
assert _conv.weight.shape == (8, 3, 3, 3) and _conv.bias.shape == (8,)
assert [n for n, _ in _conv.named_parameters()] == ["weight", "bias"]
_bound = 1 / np.sqrt(3 * 3 * 3)
assert np.abs(_conv.weight.numpy()).max() <= _bound and np.abs(_conv.weight.numpy()).max() > 0.8 * _bound
assert np.abs(_conv.bias.numpy()).max() <= _bound
assert Conv2d(3, 8, (3, 2), bias=False).bias is None
_xin = tinytorch.randn(2, 3, 6, 5)
assert _conv(_xin).shape == (2, 8, 6, 5)
np.testing.assert_allclose(_conv(_xin).numpy(), conv2d_loops(_xin.numpy(), _conv.weight.numpy(), _conv.bias.numpy(), 1, 1),
                           rtol=1e-4, atol=1e-5)
assert Flatten()(tinytorch.zeros(2, 3, 4, 5)).shape == (2, 60)
assert Flatten(0, 2)(tinytorch.zeros(2, 3, 4, 5)).shape == (24, 5)
_bn = BatchNorm2d(3)
assert sorted(n for n, _ in _bn.named_buffers()) == ["num_batches_tracked", "running_mean", "running_var"]
_bn(_xin)
_bn(_xin)
assert _bn.num_batches_tracked.item() == 2
np.testing.assert_allclose(_bn.running_mean.numpy(), (1 - 0.9 ** 2) * _xin.numpy().mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
_bn.eval()
_before = _bn.running_mean.numpy().copy()
_ye = _bn(_xin[:1])
np.testing.assert_array_equal(_bn.running_mean.numpy(), _before)  # eval does not update
assert _bn.num_batches_tracked.item() == 2
assert MaxPool2d(2)(_xin).shape == (2, 3, 3, 2) and AvgPool2d(3, 1, 1)(_xin).shape == (2, 3, 6, 5)
print("✓ Conv2d, BatchNorm2d, Flatten, MaxPool2d, AvgPool2d")
print(_conv, _bn, MaxPool2d(2), Flatten(), sep="\n")

# %% [markdown]
# ## 10. A small CNN on the digits
#
# Now everything together. The digits are 8×8 grey images (module 05). The network:
#
# ```
# (N, 1, 8, 8) → Conv2d(1→16, 3, pad 1) → BatchNorm2d → ReLU → MaxPool2d(2) → (N, 16, 4, 4)
#              → Conv2d(16→32, 3, pad 1) → BatchNorm2d → ReLU → MaxPool2d(2) → (N, 32, 2, 2)
#              → Flatten → (N, 128) → Linear(128→10)
# ```
#
# about 6,200 parameters, trained with module 07's `Adam` on cross-entropy, the learning rate
# annealed to zero along a cosine (`CosineAnnealingLR`, stepped once per batch): the large
# early steps learn fast, the small late ones settle the weights (and the test accuracy
# stops jumping between epochs). The batches come from `DataLoader` over `Digits`. We switch
# to `model.eval()` for the test set (BatchNorm then uses its running statistics), and back
# to `model.train()` for training.

# %%
from tinytorch.data import DataLoader, Digits
from tinytorch.nn import Linear, ReLU, Sequential
from tinytorch.nn.functional import cross_entropy
from tinytorch.optim import Adam
from tinytorch.optim.lr_scheduler import CosineAnnealingLR


def make_cnn():
    return Sequential(
        Conv2d(1, 16, 3, padding=1), BatchNorm2d(16), ReLU(), MaxPool2d(2),
        Conv2d(16, 32, 3, padding=1), BatchNorm2d(32), ReLU(), MaxPool2d(2),
        Flatten(), Linear(32 * 2 * 2, 10),
    )


def accuracy(model, images, labels):
    model.eval()
    with tinytorch.no_grad():
        pred = model(images).numpy().argmax(axis=1)
    model.train()
    return float((pred == labels.numpy()).mean())


tinytorch.manual_seed(0)
train_set, test_set = Digits(train=True), Digits(train=False)
model = make_cnn()
EPOCHS = 6
optimizer = Adam(model.parameters(), lr=1e-2)
loader = DataLoader(train_set, batch_size=32, shuffle=True)
scheduler = CosineAnnealingLR(optimizer, T_max=EPOCHS * ((len(train_set) + 31) // 32))
print(model)
print("parameters:", sum(p.numel() for p in model.parameters()))

history = []
_t0 = time.perf_counter()
for epoch in range(EPOCHS):
    for images, labels in loader:
        loss = cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        history.append(loss.item())
    print(f"epoch {epoch + 1}: last loss {history[-1]:.4f}   test accuracy "
          f"{accuracy(model, test_set.data, test_set.targets):.4f}")
train_time = time.perf_counter() - _t0
test_acc = accuracy(model, test_set.data, test_set.targets)
print(f"trained in {train_time:.1f} s; test accuracy {test_acc:.4f} "
      f"({round((1 - test_acc) * len(test_set))} of {len(test_set)} test digits wrong)")
assert test_acc >= 0.97

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(history)
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("training loss")
ax.set_title("CNN on the digits")
fig.tight_layout()
plt.show()

# %% [markdown]
# What did the first layer learn? Its 16 filters are 3×3 images; plotted, several look like
# small edge and stroke detectors.

# %%
_f = model[0].weight.numpy()[:, 0]
fig, axes = plt.subplots(2, 8, figsize=(8, 2.2))
for _ax, _k in zip(axes.ravel(), _f):
    _ax.imshow(_k, cmap="RdBu", vmin=-np.abs(_f).max(), vmax=np.abs(_f).max())
    _ax.axis("off")
fig.suptitle("first-layer filters (red < 0 < blue)")
plt.show()

# %% [markdown]
# ## 11. Systems look: FLOPs versus time
#
# Every output value of a conv layer is a dot product of length `C_in·kh·kw`: that many
# multiplies and as many adds. There are `N·C_out·H_out·W_out` outputs, so the forward pass
# costs
#
# $$\text{FLOPs} = 2 \cdot N \cdot C_{out} \cdot H_{out} \cdot W_{out} \cdot C_{in} \cdot k_h k_w$$
#
# and the backward about twice that (one matmul for the weight gradient, one for the column
# gradient). The parameters are only `C_out·C_in·k²`: a conv layer does a lot of arithmetic
# per weight, because each weight is reused at every position. We time the forward of a few
# layer shapes and divide: the achieved GFLOP/s shows how well numpy's BLAS is used (the
# im2col copy and the small matrices cost their share).

# %%
_rng = np.random.default_rng(7)
_rows = []
for (_N, _Ci, _Co, _H, _k) in [(32, 1, 16, 8, 3), (32, 16, 32, 4, 3), (16, 16, 32, 32, 3),
                               (16, 32, 64, 32, 3), (8, 64, 64, 32, 5)]:
    _x = Tensor(_rng.standard_normal((_N, _Ci, _H, _H)).astype(np.float32))
    _w = Tensor(_rng.standard_normal((_Co, _Ci, _k, _k)).astype(np.float32))
    _flops = 2 * _N * _Co * _H * _H * _Ci * _k * _k
    _sec = median_time(lambda: conv2d(_x, _w, padding=_k // 2), repeats=3)
    _rows.append((_flops, _sec))
    print(f"N={_N:3d} {_Ci:3d}→{_Co:3d} {_H:3d}×{_H:<3d} k={_k}:  {_flops / 1e6:9.1f} MFLOP   "
          f"{_sec * 1e3:8.2f} ms   {_flops / _sec / 1e9:6.1f} GFLOP/s")

fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.loglog([r[0] for r in _rows], [r[1] * 1e3 for r in _rows], "o-")
ax.set_xlabel("FLOPs of the forward pass")
ax.set_ylabel("median time (ms)")
ax.set_title("conv2d forward: time grows with FLOPs")
fig.tight_layout()
plt.show()

# %% [markdown]
# The tiny layers of our digits CNN reach only a small fraction of the machine's peak:
# their matrices are too small for BLAS to shine, and Python and the im2col copy dominate.
# The larger layers get much closer. The time of a whole network is roughly its FLOPs
# divided by such a rate — module 14 builds a profiler on exactly this reasoning.
#
# ## 12. What PyTorch does
#
# - `torch.nn.functional.conv2d` dispatches to a backend: **cuDNN** on NVIDIA GPUs, oneDNN
#   (mkldnn) or its own kernels on CPUs. cuDNN has several **algorithms** for one
#   convolution — implicit GEMM (im2col done on the fly inside the matmul kernel, so the
#   column matrix is never stored in memory), explicit GEMM (our im2col), FFT, tiled FFT
#   and **Winograd** — and `torch.backends.cudnn.benchmark = True` makes PyTorch time them
#   on the first call of each shape and keep the fastest.
# - **Winograd** (for 3×3 kernels) computes a 2×2 output tile from a 4×4 input tile with 16
#   multiplies instead of 36, trading multiplies for additions; **FFT** convolution turns
#   the sliding dot products into elementwise products in the frequency domain, which pays
#   for large kernels.
# - **channels_last** (NHWC, `x.to(memory_format=torch.channels_last)`) stores the channels
#   of one pixel next to each other. Then a window's `C_in` values are contiguous, and the
#   tensor cores of modern GPUs prefer it; PyTorch keeps NCHW as the *logical* shape and
#   only changes the strides — the same shape/stride separation you built in module 01.
# - `F.unfold`/`F.fold` are im2col/col2im with exactly our layouts, and the
#   backward of `conv2d` is itself a pair of convolutions (`conv_transpose2d` for the input,
#   a correlation of input and gradient for the weight).
# - `max_pool2d(..., return_indices=True)` returns the same flat indices as ours;
#   `nn.MaxUnpool2d` uses them. `BatchNorm2d` also exists fused into the preceding conv at
#   inference time: in eval mode it is an affine map per channel, so it can be folded into
#   the conv's weight and bias for free.
#
# If PyTorch is installed, compare directly (skipped otherwise):

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    import torch.nn.functional as F

    _rng = np.random.default_rng(8)
    _xx = _rng.standard_normal((2, 3, 9, 7))
    _ww = _rng.standard_normal((4, 3, 3, 3))
    _ours = conv2d(Tensor(_xx), Tensor(_ww), stride=2, padding=1).numpy()
    _theirs = F.conv2d(torch.from_numpy(_xx), torch.from_numpy(_ww), stride=2, padding=1).numpy()
    print("conv2d max |difference| vs PyTorch:", np.abs(_ours - _theirs).max())
    print("im2col == F.unfold:", np.allclose(im2col(_xx, 3, 2, 1),
                                              F.unfold(torch.from_numpy(_xx), 3, padding=1, stride=2).numpy()))
    _t = torch.from_numpy(_xx).float()
    _ms = median_time(lambda: F.conv2d(_t, torch.from_numpy(_ww).float(), padding=1))
    print(f"PyTorch conv2d on this tiny input: {_ms * 1e6:.0f} µs; ours: "
          f"{median_time(lambda: conv2d(Tensor(_xx.astype(np.float32)), Tensor(_ww.astype(np.float32)), padding=1)) * 1e6:.0f} µs")

# %% [markdown]
# ## 13. Recap
#
# - Images are **NCHW**; a conv weight is `(C_out, C_in, kh, kw)`; the output size is
#   ⌊(H + 2p − k)/s⌋ + 1 per dimension.
# - The direct convolution is seven loops. **im2col** rewrites it as one matrix multiply:
#   all windows are one **strided view** `(N, C, kh, kw, H_out, W_out)` of the padded input,
#   and one reshape materialises the column matrix — about k² times the input's memory,
#   for a speed-up of orders of magnitude.
# - The backward: `b̄ = ΣȲ`, `W̄ = Ȳ·colsᵀ`, and `x̄ = col2im(Wᵀ·Ȳ)`. **col2im**, the adjoint
#   of im2col, adds back every copy, looping over the `kh·kw` kernel offsets only.
# - **Max pooling** remembers its argmax indices and routes each gradient to the winner;
#   **average pooling** spreads it evenly (col2im again).
# - **BatchNorm2d** normalises per channel with batch statistics in training and running
#   averages in eval; its backward subtracts the parts that flow through the mean and the
#   variance.
# - Each op is one `apply` call (`conv2d`, `max_pool2d`, `avg_pool2d`, `batch_norm`), and its
#   gradient is one `@backward_rule` registered from this module: autograd learned four new
#   ops without a line of module 06 changing.
# - A small CNN built from these reaches ≥ 97% on the digits in seconds.
#
# Run `tito test module 09` to check your work against the full test suite.

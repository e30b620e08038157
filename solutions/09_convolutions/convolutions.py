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
# - explain the **NCHW** layout of a batch of images and derive the output-size formula;
# - write a convolution as **seven nested loops**, and then as **im2col + one matrix
#   multiply**, where im2col is a zero-copy **strided view** of the padded input (the
#   `as_strided` idea from module 01) followed by one reshape;
# - **measure** the two: the loops' time, the matmul's time, and the price of im2col, the
#   column matrix's memory against the input's;
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
# `# YOUR CODE HERE` are yours: each one's docstring is its contract, and the comment in it
# is the one idea to start from. Collapsed hints sit just above each: open them one at a
# time when you are stuck; the last one, "The approach", says the whole plan in words. The
# **check** cell after each one prints a ✓ or says what it got and what it expected. Everything here computes on numpy arrays inside the ops: no Python loop ever runs
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
from tinytorch.testing import assert_close, assert_equal, assert_raises, check, preserved_state, python_steps

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

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
# positions `0, s, 2s, …` as long as `start + k ≤ H + 2p`. How many start positions is
# that, as a formula in `H, p, k, s`? Deriving it is your first exercise (below the
# picture). Rows left over at the bottom that cannot hold one more whole window are never
# visited. The picture shows `H = W = 5, k = 3, p = 1, s = 2`, which has 3 positions per
# dimension; test your formula on it, and on `H = 8, p = 0, k = 3, s = 2`.

# %%
def draw_conv_geometry(ax, H=5, k=3, p=1, s=2):
    """The padded input grid, two of the kernel's positions, and the output grid."""
    Hp = H + 2 * p
    Ho = len([t for t in range(0, Hp, s) if t + k <= Hp])  # the start positions, counted
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
                 f"{Ho} positions per dimension", fontsize=10)


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

from tinytorch._tensor import ShapeError, Tensor, apply, cat, ones, stack, tensor, zeros, zeros_like
from tinytorch.autograd import backward_rule
from tinytorch.nn.init import _calculate_fan_in_and_fan_out, kaiming_uniform_, uniform_
from tinytorch.nn.layers import Module, Parameter

__all__ = [
    "conv_output_size", "im2col", "col2im",
    "conv2d", "max_pool2d", "avg_pool2d", "batch_norm", "pad",
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
# larger than the padded input fits nowhere. Each gets an error that names the numbers, so
# the user can see which one is wrong: a `ValueError` for a bad argument, and for a kernel
# that does not fit a `tinytorch.ShapeError` (module 01's error class, both a `RuntimeError`
# as in PyTorch and a `ValueError`), since that is a shape problem.
#
# <details><summary>Hint 1</summary>
#
# Count the possible *start* positions of the window in the padded input: the first is 0,
# each next one is `stride` further, and the last must still leave room for the whole
# kernel. How far can the start go?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The leftover cells at the end that cannot hold one more full window are never visited:
# the division rounds *down*. Check yourself on the picture: 5 cells, padding 1, kernel 3,
# stride 2 gives 3 positions; 8 cells, no padding, kernel 3, stride 2 also gives 3.
# </details>
#
# <details><summary>The approach</summary>
#
# Some arguments are wrong on their own and some only together: which can be judged
# without the others? Judge those first, since testing the fit against a negative padding,
# or dividing by a zero stride, answers a question that makes no sense. Each error is read
# by someone hunting for the culprit, so it names the argument and its value, and the fit
# error shows the sizes it compared. The count is the hints' question: how far can the
# start travel, and how many strides fit in that distance, counting the start at 0?
# </details>

# %% nbgrader={"grade": false, "grade_id": "output-size", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def conv_output_size(size, kernel_size, stride=1, padding=0):
    """The number of window positions along one dimension of a conv or pooling op.

    Contract: `size`, `kernel_size`, `stride`, `padding` are ints (the unpadded input length,
    the window length, the step, the zeros added on EACH side). Returns a Python int ≥ 1.
    Raises ValueError, with a message that names the argument and its value, when the
    stride is < 1 (the message says "stride"), the kernel_size is < 1 ("kernel_size") or the
    padding is negative ("padding"); raises ShapeError (module 01's RuntimeError that is
    also a ValueError) when the kernel does not fit in the padded input (the message says
    the kernel is "larger" than the padded input, with both sizes).
    """
    # Idea: count where the window can START; it must end inside the padded input.
    ### BEGIN SOLUTION
    if stride < 1:
        raise ValueError(f"stride must be positive, got {stride}")
    if kernel_size < 1:
        raise ValueError(f"kernel_size must be positive, got {kernel_size}")
    if padding < 0:
        raise ValueError(f"padding must be non-negative, got {padding}")
    padded = size + 2 * padding
    if kernel_size > padded:
        raise ShapeError(f"the kernel ({kernel_size}) is larger than the padded input "
                         f"({size} + 2·{padding} = {padded})")
    return (padded - kernel_size) // stride + 1
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-output-size", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
for _args, _want, _why in [((5, 3, 2, 1), 3, "the picture above"),
                           ((28, 3, 1, 1), 28, "k=3, p=1, s=1 keeps the size ('same' padding)"),
                           ((28, 2, 2, 0), 14, "2x2 pooling with stride 2 halves"),
                           ((8, 3, 2, 0), 3, "the floor: the last row is never visited"),
                           ((9, 3, 2, 0), 4, "here the stride divides exactly"),
                           ((3, 5, 1, 1), 1, "k = H + 2p fits exactly once"),
                           ((7, 2, 3, 2), 4, "padding counts on both sides: 7 + 4 = 11 cells, starts 0, 3, 6, 9")]:
    assert_equal(conv_output_size(*_args), _want, f"conv_output_size{_args}: {_why}")
for _size in range(1, 12):  # the last window fits and one more would not
    _n = conv_output_size(_size, 3, 2, 1)
    check((_n - 1) * 2 + 3 <= _size + 2 < _n * 2 + 3, f"size {_size}, k=3, s=2, p=1: {_n} windows; "
          f"the last one must end inside the padded input and one more must not fit", got=_n)
for _args, _word in [((8, 3, 0, 0), "stride"), ((8, 3, -1, 0), "stride"), ((8, 3, 1, -1), "padding"),
                     ((8, 0, 1, 0), "kernel_size"), ((3, 6, 1, 1), "larger")]:
    assert_raises(ShapeError if _word == "larger" else ValueError, conv_output_size, *_args,
                  match=_word, what=f"conv_output_size{_args}")
print("✓ conv_output_size: e.g. (5, k=3, s=2, p=1) ->", conv_output_size(5, 3, 2, 1))

# %% [markdown]
# ## 2. The direct convolution: seven loops
#
# The formula above, written as it reads, is seven nested loops: over the images `n`, the
# output channels `o`, the output rows `i` and columns `j` — and inside, the dot product over
# the input channels `c` and the kernel rows `u` and columns `v`. Write it (numpy arrays in
# and out, integer `stride` and `padding`). It is the reference we trust because it is
# obviously the definition — and, as we will measure, hopelessly slow. This function stays
# in the notebook; it is not exported.
#
# <details><summary>Hint 1</summary>
#
# Make the padding real first: a padded copy of `x` (`np.pad` can add zeros to the last two
# axes only), so that every index the formula asks for exists and no `if` is needed for the
# border.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Which input row does output row `i` read with kernel row `u`? It depends on the stride
# and on `u` only, because the padding is already in the array. The output's size comes
# from your `conv_output_size`.
# </details>
#
# <details><summary>The approach</summary>
#
# The formula is already the program: each index that is free on its left is a loop that
# picks one output entry, each summed index on its right a loop inside it. What it leaves
# to you: where the bias enters, so that it is counted once per output entry and not once
# per term of the sum; which array holds the values the formula reads, so that no index
# ever falls outside it; and which dtype the contract asks of the result.
# </details>

# %% nbgrader={"grade": false, "grade_id": "conv-loops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def conv2d_loops(x, w, b=None, stride=1, padding=0):
    """Direct convolution, seven Python loops: the definition, used as the reference.

    Contract: x (N, C, H, W) and w (C_out, C, kh, kw) numpy arrays, b None or (C_out,),
    `stride` and `padding` ints (the same for both dimensions). Returns a new numpy array
    (N, C_out, H_out, W_out) of x's dtype with y[n, o, i, j] = b[o] + Σ_{c,u,v} w[o, c, u, v]·
    x_padded[n, c, i·stride + u, j·stride + v].
    """
    # Idea: one output value is one dot product of a filter with one window.
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
assert_equal(conv2d_loops(_x, _box)[0, 0], np.array([[10.0, 14, 18], [26, 30, 34], [42, 46, 50]]),
             "2x2 box filter: each output is the sum of one 2x2 window")
assert_equal(conv2d_loops(_x, _box, stride=2)[0, 0], np.array([[10.0, 18], [42, 50]]),
             "stride 2: every second window")
assert_equal(conv2d_loops(_x, _box, padding=1)[0, 0, 0], np.array([0.0, 1, 3, 5, 3]),
             "padding 1: the first output row sees a row of zeros above the image")
assert_equal(conv2d_loops(_x, 2 * np.ones((1, 1, 1, 1)), np.array([1.0]))[0, 0], 2 * _x[0, 0] + 1,
             "a 1x1 filter of 2 with bias 1")
_corner = np.zeros((1, 1, 3, 3))
_corner[0, 0, 0, 0] = 1.0                                        # picks the window's top-left
assert_equal(conv2d_loops(_x, _corner, stride=1, padding=1)[0, 0, 1:, 1:], _x[0, 0, :3, :3],
             "a filter that picks the window's top-left: output (i, j) reads input (i - 1, j - 1)")
_two = np.stack([_x[0, 0], -_x[0, 0] + 1])[None]                 # 2 input channels
_w2 = np.array([[[[1.0]], [[1.0]]], [[[1.0]], [[-1.0]]]])        # o=0: c0 + c1, o=1: c0 - c1
_y2 = conv2d_loops(_two, _w2)
assert_equal(_y2[0, 0], np.ones((4, 4)), "output channel 0 = channel 0 + channel 1")
assert_equal(_y2[0, 1], 2 * _x[0, 0] - 1, "output channel 1 = channel 0 - channel 1")
print("✓ conv2d_loops; the 2x2 box sums of a 4x4 ramp:", conv2d_loops(_x, _box)[0, 0, 0])

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
# module 01. Take the padded input `xp` of shape `(N, C, Hp, Wp)` with strides
# `(sN, sC, sH, sW)`, and strides `(s_h, s_w)` of the convolution. Element `(n, c, u, v)` of
# the window at output position `(i, j)` is `xp[n, c, i·s_h + u, j·s_w + v]`, which lives at
# memory position
#
# $$n\,s_N + c\,s_C + (i s_h + u)\,s_H + (j s_w + v)\,s_W .$$
#
# Multiply it out and look at its form in the six indices `(n, c, u, v, i, j)`. Module 01's
# address formula was a sum of each index times its stride; if this one has that form too,
# then **all windows at once are one strided view** of shape `(N, C, kh, kw, H_out, W_out)`
# — no copy, no loop — and you can read its six strides off your expansion. numpy calls
# this `np.lib.stride_tricks.as_strided` (its strides are in **bytes**, as `xp.strides`
# already are). Ask for a read-only view (`writeable=False`): the windows overlap, so one
# write would change many windows at once.
#
# First two helpers: `_pad` (the padded input, with any fill value: pooling will need a
# different one) and `_windows` (the view).
#
# <details><summary>Hint 1 (_pad)</summary>
#
# `np.pad` takes one `(before, after)` pair per axis. Which axes get padding, and how much
# on each side? The batch and channel axes get none.
# </details>
#
# <details><summary>Hint 2 (_windows)</summary>
#
# The padding is already in `xp`, so the number of windows along each axis is
# `conv_output_size` with padding 0. For the strides, read the coefficient of each index
# off the memory-position formula above: `u` and `i` both move along the rows, but by
# different amounts.
# </details>
#
# <details><summary>The approach</summary>
#
# `_pad`: when can the copy be skipped altogether, and which axes may grow, on which
# sides? `_windows`: the work is the expansion above. Once each of the six indices has its
# coefficient, the shape and the strides are two lists in the same order, the contract's
# order. Traps: numpy's strides count bytes, the padding is already inside `xp` (do not
# count it twice), and windows that overlap must refuse writes.
# </details>

# %% nbgrader={"grade": false, "grade_id": "windows", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _pad(x, padding, value=0.0):
    """The padded copy of a batch of images.

    Contract: x a numpy array (N, C, H, W); padding a pair (ph, pw) of ints ≥ 0; value a
    number. Returns (N, C, H + 2·ph, W + 2·pw): x in the middle, `ph` rows of `value` above
    AND below, `pw` columns left AND right. With no padding it may return x itself.
    """
    # Idea: padding goes on both sides of the two spatial axes only.
    ### BEGIN SOLUTION
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)
    ### END SOLUTION


def _windows(xp, kernel_size, stride):
    """All kh×kw windows of an (already padded) array, as one read-only strided VIEW.

    Contract: xp a numpy array (N, C, Hp, Wp); kernel_size (kh, kw) and stride (sh, sw)
    pairs of ints. Returns a view of xp (it shares xp's memory: no copy, no loop) of shape
    (N, C, kh, kw, H_out, W_out) with view[n, c, u, v, i, j] == xp[n, c, i·sh + u, j·sw + v].
    Why: this view is im2col without its copy; pooling reduces over it directly.
    """
    # Idea: write one window element's address as module 01 would; read the strides off it.
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


# %% nbgrader={"grade": true, "grade_id": "test-windows", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_img = np.arange(16.0).reshape(1, 1, 4, 4)
_p = _pad(_img, (1, 2))
assert_equal(_p.shape, (1, 1, 6, 8), "_pad((1, 2)): 1 row above and below, 2 columns left and right")
assert_equal(_p[0, 0, 1:5, 2:6], _img[0, 0], "the image sits in the middle of the padded array")
assert_equal(_p[0, 0, [0, 5]], np.zeros((2, 8)), "_pad: the top AND bottom rows are zeros")
assert_equal(_p[0, 0, :, [0, 1, 6, 7]], np.zeros((4, 6)), "_pad: two columns on the left AND right are zeros")
assert_equal(_pad(_img, (1, 1), -1.0)[0, 0, 0, 0], -1.0, "_pad with value=-1 fills with -1")
_xp = np.arange(2 * 3 * 6 * 7.0).reshape(2, 3, 6, 7)
_v = _windows(_xp, (3, 2), (2, 1))
assert_equal(_v.shape, (2, 3, 3, 2, 2, 6), "_windows shape (N, C, kh, kw, H_out, W_out) for k=(3,2), s=(2,1)")
check(np.shares_memory(_v, _xp), "_windows must be a view of xp (as_strided), not a copy")
check(not _v.flags.writeable, "_windows must be read-only (writeable=False): the windows overlap, so one write "
      "through the view would change several windows at once")
_ref = np.empty_like(np.asarray(_v))
for _u in range(3):
    for _w in range(2):
        for _i in range(2):
            for _j in range(6):
                _ref[:, :, _u, _w, _i, _j] = _xp[:, :, _i * 2 + _u, _j * 1 + _w]
assert_equal(np.asarray(_v), _ref, "view[n, c, u, v, i, j] == xp[n, c, i*sh + u, j*sw + v] for every index")
print("✓ _pad, _windows: window (i=1, j=4) of channel 2 of image 1 is\n", _v[1, 2, :, :, 1, 4])

# %% [markdown]
# Then `im2col` is: pad, view, and **one reshape** to `(N, C·kh·kw, L)` — the reshape is the
# moment the copy happens (the view's memory pattern is not expressible as a plain matrix,
# except in the degenerate case of a 1×1 kernel with stride 1, where the "windows" are the
# pixels themselves).
# We use PyTorch's layout for it: `torch.nn.functional.unfold` returns exactly this
# `(N, C·kh·kw, L)` array, with the rows ordered `(c, u, v)` (channel slowest, kernel column
# fastest) and the columns `(i, j)` (output row slowest).
#
# <details><summary>Hint 1</summary>
#
# A reshape merges *adjacent* axes, in order. Which axes of the windows view must become
# the rows of the column matrix, and which its columns? Are they already next to each
# other and in the order the layout asks for?
# </details>
#
# <details><summary>The approach</summary>
#
# The windows view already lists its axes in the docstring's order: the rows `(c, u, v)`
# and the columns `(i, j)` are each a run of adjacent axes, slowest first. Nothing has to
# move, only merge, with the batch axis alone in front; the padding is zeros. The one copy
# happens in that merge, and there is no need for another.
# </details>

# %% nbgrader={"grade": false, "grade_id": "im2col", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def im2col(input, kernel_size, stride=1, padding=0):
    """The column matrix of a batch of images (torch.nn.functional.unfold's layout).

    Contract: input an (N, C, H, W) numpy array or Tensor; kernel_size, stride, padding
    ints or (height, width) pairs. Returns a numpy array (N, C·kh·kw, H_out·W_out) of the
    input's dtype: column l = i·W_out + j holds the window of output position (i, j),
    flattened in (c, u, v) order, zeros where the window covers the padding. Raises
    ShapeError for an input that is not 4-D (provided below).
    """
    x = _as_numpy(input)
    if x.ndim != 4:
        raise ShapeError(f"im2col: expected a 4-D input (N, C, H, W), got shape {tuple(x.shape)}")
    kernel_size = _pair(kernel_size, "kernel_size", "im2col")
    stride = _pair(stride, "stride", "im2col")
    padding = _pair(padding, "padding", "im2col")
    # Idea: the windows view already has the right axes in the right order; merge them.
    ### BEGIN SOLUTION
    win = _windows(_pad(x, padding), kernel_size, stride)
    N, C, kh, kw, Ho, Wo = win.shape
    return win.reshape(N, C * kh * kw, Ho * Wo)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-im2col", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_c = im2col(_img, 2)
assert_equal(_c.shape, (1, 4, 9), "im2col of a 4x4 image, 2x2 kernel: 4 rows (c, u, v), 9 columns")
assert_equal(_c[0, :, 0], np.array([0.0, 1, 4, 5]), "column 0 = the red window, read row by row")
assert_equal(_c[0, :, 4], np.array([5.0, 6, 9, 10]), "column 4 = the green window")
assert_equal(_c[0, 0], np.array([0.0, 1, 2, 4, 5, 6, 8, 9, 10]), "row 0 = every window's top-left")
_cp = im2col(_img, (3, 3), stride=2, padding=1)
assert_equal(_cp.shape, (1, 9, 4), "k=3, s=2, p=1 on 4x4: 2x2 windows")
assert_equal(_cp[0, :, 0], np.array([0.0, 0, 0, 0, 0, 1, 0, 4, 5]), "the first window covers the padding")
_x6 = np.arange(2 * 3 * 5 * 6.0).reshape(2, 3, 5, 6)
_c6 = im2col(_x6, (3, 2), (2, 1), (1, 0))
_xp6 = np.pad(_x6, ((0, 0), (0, 0), (1, 1), (0, 0)))
_Ho, _Wo = 3, 5
for (_n, _ch, _u, _w, _i, _j) in [(0, 0, 0, 0, 0, 0), (1, 2, 2, 1, 2, 4), (1, 0, 1, 0, 1, 1), (0, 1, 0, 1, 2, 0)]:
    assert_equal(_c6[_n, (_ch * 3 + _u) * 2 + _w, _i * _Wo + _j], _xp6[_n, _ch, _i * 2 + _u, _j + _w],
                 f"rectangular k=(3,2), s=(2,1), p=(1,0): entry (n={_n}, c={_ch}, u={_u}, v={_w}, i={_i}, j={_j})")
assert_equal(im2col(Tensor(_x6.astype(np.float32)), 2).dtype, np.dtype(np.float32), "im2col keeps the dtype")
_steps = [python_steps(im2col, np.zeros((1, 2, _n, _n)), 3) for _n in (6, 20)]  # 16 and 324 output positions
check(_steps[1] <= _steps[0] + 10, "im2col runs no Python loop over output positions: the Python lines it runs "
      "must not grow with the image (numpy's loops count none)",
      got=f"{_steps[0]} steps for a 6x6 image, {_steps[1]} for 20x20", expected="the same count for both")
print("✓ im2col: the red window as a column:", _c[0, :, 0])

# %% [markdown]
# ## 4. conv2d as one matrix multiply
#
# With the columns, the forward pass is a few lines: the weight, seen as a
# `(C_out, C·kh·kw)` matrix (one filter per row), times the `(N, C·kh·kw, L)` columns,
# contracted over the `C·kh·kw` axis; plus one bias per output channel; and the result
# reshaped to `(N, C_out, H_out, W_out)`.
#
# **Mind the memory order.** The columns are laid out image by image, and so is the output.
# There is more than one way to contract a `(C_out, C·kh·kw)` matrix with a
# `(N, C·kh·kw, L)` stack, and they differ in what they copy: one big GEMM needs the
# columns of all images side by side first, and gives its result in an order the output
# does not have. Before you choose, work out for your contraction which arrays it reads and
# writes contiguously and where a copy or a transpose is hidden. The systems look at the
# end of this notebook times two layouts, for the forward and for the weight gradient
# below; predict there which wins.
#
# Write `_conv2d_forward(x, weight, bias, stride, padding)`; it receives Tensors (as every
# `forward` given to `apply` does) and returns a numpy array.
#
# The provided `conv2d` below checks its arguments — a wrong number of dimensions or of
# channels is the most common CNN bug, so the messages name the shapes — and dispatches
# your forward as the op `"conv2d"` with the attributes `stride` and `padding` (pairs). The
# inputs are `(input, weight)` or `(input, weight, bias)`.
#
# <details><summary>Hint 1</summary>
#
# Write down the shapes: `(C_out, C·kh·kw)` against `(N, C·kh·kw, L)`. Which axis of each is
# summed over? What does `np.matmul` do with a 2-D left operand and a 3-D right one?
# </details>
#
# <details><summary>Hint 2</summary>
#
# After the contraction, where is the batch axis, where the channel axis? The bias has one
# value per output channel and must be added to every image and every position: give it the
# shape that broadcasts along that axis only.
# </details>
#
# <details><summary>The approach</summary>
#
# Think in shapes. A flattened filter and a column of one image have the same length, and
# the same filters serve every image. Which way of contracting them hands back images
# first and channels second, the output's own order, without a transpose or a copy
# afterwards? The bias belongs to a channel: it must reach every image and every position
# of that channel, and nothing else. What is left is regrouping the positions into the
# rows and columns of the output grid.
# </details>

# %% nbgrader={"grade": false, "grade_id": "conv2d-forward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _conv2d_forward(x, weight, bias=None, *, stride, padding):
    """Forward of the op "conv2d": im2col, one matrix multiply, the bias, a reshape.

    Contract: x (N, C, H, W), weight (C_out, C, kh, kw) and bias (C_out,) or None are
    Tensors of one float dtype; stride and padding are (h, w) pairs (already checked by
    conv2d). Returns a numpy array (N, C_out, H_out, W_out) of that dtype, equal to
    conv2d_loops on the same numbers.
    """
    # Idea: every filter dotted with every window is ONE product of two matrices.
    ### BEGIN SOLUTION
    xa, wa = x.numpy(), weight.numpy()
    N, _, H, W = xa.shape
    C_out, _, kh, kw = wa.shape
    cols = im2col(xa, (kh, kw), stride, padding)  # (N, C·kh·kw, L)
    out = wa.reshape(C_out, -1) @ cols            # (N, C_out, L): one GEMM per image
    if bias is not None:
        out += bias.numpy()[:, None]
    Ho = conv_output_size(H, kh, stride[0], padding[0])
    Wo = conv_output_size(W, kw, stride[1], padding[1])
    return out.reshape(N, C_out, Ho, Wo)
    ### END SOLUTION


def _check_float(op, name, t, dtype):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a tinytorch Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{op}: {name} is {t.dtype} but the input is {dtype}; "
                        f"convert one of them (e.g. with .to({str(dtype)!r}))")


def _check_image_batch(op, input):
    """A floating 4-D (N, C, H, W) Tensor, or a ShapeError that names the shape."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a tinytorch Tensor, got {type(input).__name__}")
    if input.ndim != 4:
        hint = " (a single image? add the batch dimension with input.unsqueeze(0))" if input.ndim == 3 else ""
        raise ShapeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {input.shape}{hint}")
    if input.dtype.kind != "f":
        raise TypeError(f"{op}: input must be floating (float32 or float64), got {input.dtype}")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of input (N, C_in, H, W) with weight
    (C_out, C_in / groups, kh, kw) and optional bias (C_out,) (torch.nn.functional.conv2d).
    padding is an int, a pair, "valid" (none) or "same" (stride 1: the output keeps H and
    W; an odd total goes to the bottom and right, as PyTorch pads). dilation and groups are
    PyTorch's, provided around your op: a dilated kernel is your op's kernel with zeros
    between its taps (dh·dw times the work; cuDNN skips the zeros), and groups call your op
    once per group of channels."""
    _check_image_batch("conv2d", input)
    _check_float("conv2d", "weight", weight, input.dtype)
    if weight.ndim != 4:
        raise ShapeError(f"conv2d: weight must be 4-D (C_out, C_in, kh, kw), got shape {weight.shape}")
    _check_groups(groups, "conv2d")
    if weight.shape[0] % groups:
        raise ShapeError(f"conv2d: groups={groups} must divide the weight's C_out = {weight.shape[0]}")
    if input.shape[1] != weight.shape[1] * groups:
        raise ShapeError(f"conv2d: input of shape {input.shape} has {input.shape[1]} channels, but "
                         f"the weight of shape {weight.shape} expects C_in = {weight.shape[1]} channels"
                         + (f" per group, {weight.shape[1] * groups} in all (groups={groups})" if groups > 1 else ""))
    stride = _pair(stride, "stride", "conv2d")
    dilation = _pair(dilation, "dilation", "conv2d")
    if min(dilation) < 1:
        raise ValueError(f"conv2d: dilation must be positive, got {dilation}")
    reach = tuple(d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:]))  # the kernel's span in the input
    if isinstance(padding, str):
        input, padding = _string_padding(input, padding, reach, stride)
    padding = _pair(padding, "padding", "conv2d")
    for d, (size, k) in enumerate(zip(input.shape[2:], reach)):
        try:
            conv_output_size(size, k, stride[d], padding[d])
        except ValueError as exc:
            raise ShapeError(f"conv2d: input {input.shape}, weight {weight.shape}, stride {stride}, "
                             f"padding {padding}, dilation {dilation}: {exc}") from None
    if bias is not None:
        _check_float("conv2d", "bias", bias, input.dtype)
        if bias.shape != (weight.shape[0],):
            raise ShapeError(f"conv2d: bias must have shape ({weight.shape[0]},) (one per output "
                             f"channel), got {bias.shape}")
    if groups > 1:
        c_in, c_out = weight.shape[1], weight.shape[0] // groups
        return cat([conv2d(input[:, g * c_in:(g + 1) * c_in], weight[g * c_out:(g + 1) * c_out],
                           None if bias is None else bias[g * c_out:(g + 1) * c_out], stride, padding, dilation)
                    for g in range(groups)], dim=1)
    if dilation != (1, 1):
        weight = _dilated(weight, dilation)
    inputs = (input, weight) if bias is None else (input, weight, bias)
    return apply("conv2d", _conv2d_forward, *inputs, stride=stride, padding=padding)


def _check_groups(groups, op):
    """ValueError naming `op` unless groups is a positive int."""
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")


def _check_string_padding(padding, stride, op):
    """ValueError naming `op` for a padding string other than PyTorch's two, or "same" with a stride."""
    if padding not in ("same", "valid"):
        raise ValueError(f"{op}: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    if padding == "same" and stride != (1, 1):
        raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride}), "
                         "as in PyTorch")


def _string_padding(input, padding, reach, stride):
    """(input, padding) for PyTorch's padding="valid" / "same": "same" pads each side by
    half of (span - 1), the odd one at the bottom and right (by padding the input itself)."""
    _check_string_padding(padding, stride, "conv2d")
    if padding == "valid":
        return input, 0
    before = [(r - 1) // 2 for r in reach]
    after = [r - 1 - b for r, b in zip(reach, before)]
    if before == after:
        return input, tuple(before)
    return pad(input, (before[1], after[1], before[0], after[0])), 0


def _dilated(weight, dilation):
    """The kernel with dilation - 1 zeros between neighbouring taps, as a differentiable
    tensor: (C_out, C_in, dh(kh - 1) + 1, dw(kw - 1) + 1)."""
    for axis, d in ((2, dilation[0]), (3, dilation[1])):
        if d > 1:
            k = weight.shape[axis]
            spread = stack([weight] + [zeros_like(weight)] * (d - 1), dim=axis + 1)  # each tap, then d - 1 zeros
            shape = list(weight.shape)
            shape[axis] = k * d
            weight = spread.reshape(*shape)[(slice(None),) * axis + (slice(0, d * (k - 1) + 1),)]
    return weight


# %% nbgrader={"grade": true, "grade_id": "test-conv2d-forward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(0)
for (_N, _C, _H, _W, _Co, _kk, _s, _p) in [(2, 3, 7, 6, 4, (3, 3), 1, 1), (1, 2, 8, 9, 3, (2, 2), 2, 0),
                                           (2, 1, 5, 5, 2, (5, 5), 1, 2), (3, 2, 6, 7, 2, (3, 2), 2, 1)]:
    _xx = _rng.standard_normal((_N, _C, _H, _W))
    _ww = _rng.standard_normal((_Co, _C) + _kk)
    _bb = _rng.standard_normal(_Co)
    _case = f"x {_xx.shape}, w {_ww.shape}, stride {_s}, padding {_p}"
    assert_close(conv2d(Tensor(_xx), Tensor(_ww), Tensor(_bb), stride=_s, padding=_p),
                 conv2d_loops(_xx, _ww, _bb, _s, _p), rtol=1e-10, atol=1e-12, what=f"conv2d with bias, {_case}")
    assert_close(conv2d(Tensor(_xx), Tensor(_ww), stride=_s, padding=_p), conv2d_loops(_xx, _ww, None, _s, _p),
                 rtol=1e-10, atol=1e-12, what=f"conv2d without bias, {_case}")
_xx, _ww = _rng.standard_normal((2, 3, 7, 6)), _rng.standard_normal((4, 3, 3, 2))
_xpad = np.pad(_xx, ((0, 0), (0, 0), (1, 1), (0, 0)))                # padding (1, 0), stride (2, 1)
_ref = np.zeros((2, 4, 4, 5))
for _u in range(3):
    for _v in range(2):  # the input slab that kernel offset (u, v) sees, for every output position
        _ref += np.einsum("oc,ncij->noij", _ww[:, :, _u, _v], _xpad[:, :, _u:_u + 2 * 4:2, _v:_v + 5])
assert_close(conv2d(Tensor(_xx), Tensor(_ww), stride=(2, 1), padding=(1, 0)), _ref, rtol=1e-10, atol=1e-12,
             what="conv2d with stride (2, 1) and padding (1, 0): each dimension uses its own stride and padding")
_y32 = conv2d(Tensor(np.ones((1, 1, 4, 4), np.float32)), Tensor(np.ones((2, 1, 3, 3), np.float32)))
assert_equal(_y32.dtype, np.dtype(np.float32), "float32 in, float32 out")
_y32b = conv2d(Tensor(np.ones((1, 1, 4, 4), np.float32)), Tensor(np.ones((2, 1, 3, 3), np.float32)),
               Tensor(np.ones(2, np.float32)))
assert_equal(_y32b.dtype, np.dtype(np.float32), "float32 in with a float32 bias, float32 out (the bias must not "
             "promote the result to float64)")
_t = conv2d(Tensor(_xx), Tensor(_ww, requires_grad=True), padding=1)
assert_equal(_t.grad_fn.op, "conv2d", "one op recorded")
assert_equal(_t.grad_fn.attrs["padding"], (1, 1), "its padding attribute, as a pair")
assert_raises(ShapeError, conv2d, Tensor(np.ones((2, 3, 8, 8))), Tensor(np.ones((4, 2, 3, 3))),
              match=r"\(2, 3, 8, 8\).*\(4, 2, 3, 3\)", what="3 input channels and a weight for 2")
print("✓ conv2d forward = the seven loops; e.g. output shape", _t.shape)

# %% [markdown]
# ## 5. Measuring: loops versus im2col, and what the columns cost
#
# Both compute the same numbers. How different are they in time? We will time the seven
# loops and `conv2d` on batches of two 3-channel images going to 8 channels with a 3×3
# kernel, for a few small image sizes (the loops only at tiny sizes: they are slow). Each
# time is the median of a few runs.
#
# **Predict first.** The loops do one multiply-add per Python iteration, and each iteration
# also indexes two 4-D numpy arrays, which costs far more than the multiply-add itself (the
# cell prints the time per iteration it measured); a BLAS kernel does several multiply-adds
# per clock cycle. How many times faster do you expect `conv2d` to be on 16×16 images? Write a
# number (it is not graded; it is what you compare against).

# %%
predicted_speedup_16 = None  # your number: (seven loops time) / (im2col + matmul time) at 16×16

# %%
from tinytorch.utils.timing import median_time  # median of repeated runs, after a warm-up


_rng = np.random.default_rng(1)
_sizes = [4, 8, 12, 16]
_t_loops, _t_cols = [], []
for _n in _sizes:
    _xx = _rng.standard_normal((2, 3, _n, _n)).astype(np.float32)
    _ww = _rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    _t_loops.append(median_time(lambda: conv2d_loops(_xx, _ww, None, 1, 1), repeats=3))
    _xt, _wt = Tensor(_xx), Tensor(_ww)
    _t_cols.append(median_time(lambda: conv2d(_xt, _wt, padding=1)))
    print(f"{_n:3d}×{_n:<3d} seven loops {_t_loops[-1] * 1e3:9.2f} ms   im2col+matmul "
          f"{_t_cols[-1] * 1e3:7.3f} ms   speed-up {_t_loops[-1] / _t_cols[-1]:8.0f}×")
_measured = _t_loops[-1] / _t_cols[-1]
print(f"one iteration of the loops (a multiply-add and its indexing) at 16×16: "
      f"{_t_loops[-1] / (2 * 8 * 27 * 16 * 16) * 1e9:.0f} ns")
if predicted_speedup_16 is None:
    print(f"measured speed-up at 16×16: {_measured:.0f}× (no prediction written: set "
          f"predicted_speedup_16 above and re-run)")
else:
    print(f"measured speed-up at 16×16: {_measured:.0f}×, you predicted {predicted_speedup_16}× "
          f"(off by a factor of {max(_measured, predicted_speedup_16) / max(min(_measured, predicted_speedup_16), 1e-9):.1f})")

# %% [markdown]
# What to expect, and why your figure can differ: the loops' time grows with the number of
# multiply-adds (about 2·8·27·n² for an n×n image), one interpreted iteration each; the
# im2col version's time, at these toy sizes, is mostly a fixed cost (argument checks, the
# dispatch, small allocations), so the speed-up printed above usually *grows* with the image
# size, and is usually large (tens to hundreds of times, or more) already at 16×16. The
# exact figure depends on the machine: the interpreter's speed, the BLAS library and how
# many threads it uses, and whatever else is running.
#
# The price is **memory**. The column matrix holds `C·kh·kw·H_out·W_out` numbers per image
# against `C·H·W` for the input. **Predict**: with "same" padding (output as large as the
# input), how many times the input's bytes is the column matrix of a 3×3 kernel? Of a 5×5?

# %%
predicted_ratio_3x3 = None  # your number: bytes of im2col(x, 3, 1, 1) / bytes of x
predicted_ratio_5x5 = None  # your number: bytes of im2col(x, 5, 1, 2) / bytes of x

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
for _name, _pred, _got in [("3×3", predicted_ratio_3x3, _col3_mb[-1] / _in_mb[-1]),
                           ("5×5", predicted_ratio_5x5, _col5_mb[-1] / _in_mb[-1])]:
    print(f"{_name}: measured {_got:.1f}× the input;",
          "no prediction written" if _pred is None else f"you predicted {_pred}×")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
axes[0].loglog([4, 8, 12, 16], np.array(_t_loops) * 1e3, "o-", label="seven loops")
axes[0].loglog([4, 8, 12, 16], np.array(_t_cols) * 1e3, "s-", label="im2col + matmul")
axes[0].set_xlabel("image side (N=2, 3→8 channels, 3×3)")
axes[0].set_ylabel("median time (ms)")
axes[0].set_title("time (measured on this machine)")
axes[0].set_xticks([4, 8, 12, 16], ["4", "8", "12", "16"], minor=False)
axes[0].set_xticks([], minor=True)
axes[0].legend()
axes[1].loglog(_sizes, _in_mb, "o-", label="input")
axes[1].loglog(_sizes, _col3_mb, "s-", label="column matrix, 3×3")
axes[1].loglog(_sizes, _col5_mb, "^-", label="column matrix, 5×5")
axes[1].set_xlabel("image side (N=32, C=3, float32)")
axes[1].set_ylabel("MiB")
axes[1].set_title("memory: the columns against the input")
axes[1].set_xticks(_sizes, [str(s) for s in _sizes], minor=False)
axes[1].set_xticks([], minor=True)
axes[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# The memory figures do not depend on the machine: they are counts of bytes, exactly
# `kh·kw·H_out·W_out / (H·W)` times the input, which is `k²` when the output is as large
# as the input. For one layer of a real network — 64 channels of 112×112 images, batch 32,
# 3×3 — the column matrix is 32·576·12,544 floats ≈ 0.9 GB. That is why production
# libraries avoid materialising it (section 12). For our 8×8 digits it is a few hundred
# kilobytes.
#
# ## 6. Backward: the weight gradient is a matmul, the input gradient is col2im
#
# Write the forward per image as `Y = W·cols + b` (`Y`: `C_out × L`), and let
# `Ȳ = ∂L/∂Y` (same shape) arrive from above. You have every rule you need from module 06:
# a matmul's two gradients, and the gradient of something broadcast. Derive three things on
# paper before reading on:
#
# - **bias**: `b_o` was added at every position of every image. What is `b̄`?
# - **weight**: the same `W` multiplied the columns of every image. What is `W̄`, and which
#   arrays does it need from the forward pass? (They can be recomputed from the saved input
#   instead of being kept alive: the columns are about `kh·kw` times the input.)
# - **columns**: what is `cols̄_n`, of shape `(C·kh·kw, L)`? The columns are not the input,
#   though: each input pixel was **copied** into up to `kh·kw` columns, and a value used
#   several times gets the **sum** of the gradients of its uses (module 06's rule for
#   broadcasting). So `x̄` is obtained by adding every entry of `cols̄` back to the pixel it
#   was copied from: that is **col2im**, and padding pixels, being constants, get nothing.
#
# col2im must run no Python loop over output positions either. How few Python iterations can
# it get away with?
#
# ### col2im is the adjoint of im2col
#
# im2col is a linear map `A` from images to columns (it only copies). col2im is its
# **transpose** `Aᵀ`: for any image `x` and any column array `y`,
# `⟨im2col(x), y⟩ = ⟨x, col2im(y)⟩`. That is precisely why it is the right backward (the
# backward of a linear map is its transpose), and it gives a sharp check. Note that col2im
# is *not* the inverse of im2col: `col2im(im2col(x))` multiplies each pixel by the number of
# windows that contain it. (PyTorch calls these two `unfold` and `fold`.)
#
# <details><summary>Hint 1</summary>
#
# Undo im2col's last step first: give the columns back the six axes of the windows view,
# `(N, C, kh, kw, H_out, W_out)`. Then fix one kernel offset `(u, v)`: which padded pixel
# does output position `(i, j)` read with that offset? As `(i, j)` run over the output, those
# pixels form a regular grid in the padded image: a slice with a start and a step.
# </details>
#
# <details><summary>Hint 2</summary>
#
# Inside one offset no two output positions read the same pixel, so that slab can be added
# in one vectorised statement. Different offsets DO hit the same pixel (the windows overlap):
# what must happen to a pixel's value when a second offset lands on it?
# </details>
#
# <details><summary>The approach</summary>
#
# col2im walks the same pairs (pixel, column entry) as im2col, with the arrow reversed and
# the copy turned into an addition. Loop over what is small, the kernel offsets, never
# over what grows with the image. Within one offset no two entries share a pixel, so one
# vectorised addition is safe; across offsets they do, so nothing may be overwritten. Work
# in padded coordinates, where every entry has a pixel to land on, and drop what fell on
# the padding only at the end.
# </details>

# %% nbgrader={"grade": false, "grade_id": "col2im", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def col2im(cols, input_size, kernel_size, stride=1, padding=0):
    """Scatter-ADD a column array back into images: the adjoint of im2col
    (torch.nn.functional.fold's layout).

    Contract: cols an (N, C·kh·kw, L) numpy array or Tensor in im2col's layout; input_size
    (H, W) the unpadded image size; kernel_size, stride, padding ints or pairs. Returns a new
    contiguous numpy array (N, C, H, W) of cols' dtype in which each pixel holds the SUM of
    every column entry that im2col would have copied from it (entries copied from the
    padding are dropped). Raises ShapeError naming the expected and the given shape when
    cols does not fit the geometry (provided below).
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
        raise ShapeError(f"col2im: expected columns of shape (N, C·{kh}·{kw}, {Ho}·{Wo}) for an input of "
                         f"size {(H, W)}, got {tuple(cols.shape)}")
    # Idea: undo im2col's copies by adding every entry back to the pixel it came from.
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
_count = col2im(im2col(np.ones((1, 1, 4, 4)), 2), (4, 4), 2)
assert_equal(_count[0, 0], np.array([[1.0, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]),
             "col2im(im2col(ones)), 2x2 windows, stride 1: each pixel counts the windows it is in")
_count = col2im(im2col(np.ones((1, 1, 4, 5)), 3, 1, 1), (4, 5), 3, 1, 1)
assert_equal(_count[0, 0], np.array([[4.0, 6, 6, 6, 4], [6, 9, 9, 9, 6], [6, 9, 9, 9, 6], [4, 6, 6, 6, 4]]),
             "3x3 windows with padding 1: corners are in 4 windows, the inside in 9")
assert_equal(col2im(im2col(np.ones((1, 1, 4, 5)), 2, 2, 0), (4, 5), 2, 2, 0)[0, 0],
             np.array([[1.0, 1, 1, 1, 0]] * 4), "2x2, stride 2: no overlaps; the last column is never visited")
_rng = np.random.default_rng(2)
for (_k, _s, _p) in [(2, 1, 0), (3, 2, 1), ((3, 2), (1, 2), (2, 0))]:
    _xx = _rng.standard_normal((2, 3, 7, 6))
    _cx = im2col(_xx, _k, _s, _p)
    _yy = _rng.standard_normal(_cx.shape)
    _back = col2im(_yy, (7, 6), _k, _s, _p)
    assert_equal(_back.shape, _xx.shape, f"col2im shape, k={_k}, s={_s}, p={_p}")
    assert_close(np.sum(_xx * _back), np.sum(_cx * _yy), rtol=1e-10, atol=1e-10,
                 what=f"the adjoint identity <x, col2im(y)> = <im2col(x), y>, k={_k}, s={_s}, p={_p}")
check(_back.flags["C_CONTIGUOUS"] and not np.shares_memory(_back, _yy), "col2im returns a new C-contiguous array "
      "(the contract's: a gradient the engine may keep and add into)", got=(_back.flags["C_CONTIGUOUS"],
      "shares memory with cols" if np.shares_memory(_back, _yy) else "new"))
_steps = [python_steps(col2im, np.zeros((1, 2 * 9, (_n - 2) ** 2)), (_n, _n), 3) for _n in (6, 20)]
check(_steps[1] <= _steps[0] + 10, "col2im runs no Python loop over output positions (only over the kh·kw kernel "
      "offsets): the Python lines it runs must not grow with the image",
      got=f"{_steps[0]} steps for a 6x6 image, {_steps[1]} for 20x20", expected="the same count for both")
print("✓ col2im (the adjoint of im2col); window counts of a 4x4 image:\n", col2im(im2col(np.ones((1, 1, 4, 4)), 2), (4, 4), 2)[0, 0])

# %% [markdown]
# Now the backward rule. Module 06's contract: a rule is `rule(node, grad)`, where
# `node.inputs` are the op's input Tensors, `node.attrs` its attributes and `grad` the
# upstream gradient (a numpy array of the output's shape, not to be written into); it
# returns one gradient per input, each of its input's shape. `@backward_rule("conv2d")`
# registers it in module 06's `BACKWARD_RULES` — this is how a later module teaches
# autograd a new op without changing module 06. Write it with the three formulas above.
#
# <details><summary>Hint 1</summary>
#
# Work per image in matrix form first: `Ȳ_n` is `(C_out, L)`, `cols_n` is `(C·kh·kw, L)`,
# `W` is `(C_out, C·kh·kw)`. Check that each formula's shapes multiply out to the shape of
# the thing it is the gradient of. Then do all images at once with `np.matmul`, which
# batches over the leading axis (and reads a transposed view without copying it).
# </details>
#
# <details><summary>Hint 2</summary>
#
# The columns are not saved by the forward: recompute them from the saved input with the
# stride and padding in `node.attrs`. The weight gradient of the whole batch is the sum of
# the per-image ones. The column gradient must come out in im2col's layout,
# `(N, C·kh·kw, L)`. The bias gradient has one number per output channel: which axes of `Ȳ`
# does each number sum over? An input that does not require grad (the images of a first
# layer) needs no gradient at all: return None for it and skip col2im.
# </details>
#
# <details><summary>The approach</summary>
#
# Your three formulas are per image; the batch only decides what gets summed. What did all
# images share (the weight), what did all images and positions share (the bias), and what
# belongs to one image (its columns, which reach `x` through col2im with the forward's
# geometry)? Check each product's shapes against the shape of what it is the gradient of.
# Return one entry per input the op had, and pay for col2im only when `x̄` is wanted.
# </details>

# %% nbgrader={"grade": false, "grade_id": "conv2d-backward", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@backward_rule("conv2d")
def _conv2d_backward(node, grad):
    """The backward rule of the op "conv2d".

    Contract: node.inputs = (input, weight) or (input, weight, bias), Tensors;
    node.attrs["stride"], node.attrs["padding"] pairs; grad a numpy array
    (N, C_out, H_out, W_out) (read it, never write into it). Returns a tuple with one numpy
    gradient per input, each of its input's shape: (x̄, W̄) or (x̄, W̄, b̄), the gradients
    of the loss with respect to the input, the weight and the bias (x̄ through col2im); x̄
    may be None when the input does not require grad (module 06's rules allow None).
    """
    x, w = node.inputs[0].numpy(), node.inputs[1].numpy()
    stride, padding = node.attrs["stride"], node.attrs["padding"]
    # Idea: the same columns as the forward give the weight gradient; col2im sends the rest home.
    ### BEGIN SOLUTION
    N, _, H, W = x.shape
    C_out, _, kh, kw = w.shape
    g = np.asarray(grad).reshape(N, C_out, -1)
    cols = im2col(x, (kh, kw), stride, padding)
    gw = (g @ cols.transpose(0, 2, 1)).sum(axis=0).reshape(w.shape)  # Σ_n Ȳ_n·cols_nᵀ
    gx = None
    if node.inputs[0].requires_grad:  # the images of a first layer need no gradient
        gcols = w.reshape(C_out, -1).T @ g  # (N, C·kh·kw, L)
        gx = col2im(gcols, (H, W), (kh, kw), stride, padding)
    if len(node.inputs) == 3:
        return gx, gw, g.sum(axis=(0, 2))
    return gx, gw
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-conv2d-backward", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(3)
_x = Tensor(_rng.standard_normal((2, 3, 5, 6)), requires_grad=True)       # N=2 images, C_out=4 filters
_w = Tensor(_rng.standard_normal((4, 3, 3, 2)), requires_grad=True)
_b = Tensor(_rng.standard_normal(4), requires_grad=True)
_G = _rng.standard_normal((2, 4, 3, 7))                                    # upstream gradient, s=(2,1), p=1
(conv2d(_x, _w, _b, stride=(2, 1), padding=1) * Tensor(_G)).sum().backward()
assert_close(_b.grad, _G.sum(axis=(0, 2, 3)), rtol=1e-10, atol=1e-12,
             what="bias gradient: one number per output channel, summed over images and positions")
_bgrad = _b.grad.numpy().copy()
_xpad = np.pad(_x.numpy(), ((0, 0), (0, 0), (1, 1), (1, 1)))
_gw = np.zeros((4, 3, 3, 2))
for _u in range(3):
    for _v in range(2):  # weight (o, c, u, v) multiplied the input slab of offset (u, v)
        _gw[:, :, _u, _v] = np.einsum("noij,ncij->oc", _G, _xpad[:, :, _u:_u + 2 * 3:2, _v:_v + 7])
assert_close(_w.grad, _gw, rtol=1e-10, atol=1e-12,
             what="weight gradient W̄[o, c, u, v] = Σ_{n,i,j} Ȳ[n, o, i, j]·x_pad[n, c, 2i + u, j + v]")
_x1 = Tensor(_rng.standard_normal((2, 1, 4, 4)), requires_grad=True)
conv2d(_x1, Tensor(np.ones((1, 1, 2, 2)))).sum().backward()
assert_equal(_x1.grad.numpy()[0, 0], np.array([[1.0, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]),
             "input gradient of sum(conv with a 2x2 ones kernel) = the number of windows of each pixel")
for (_k, _s, _p) in [(3, 1, 1), (2, 2, 0), ((3, 1), (2, 1), (1, 0))]:
    _x = Tensor(_rng.standard_normal((2, 2, 5, 4)), requires_grad=True)
    _w = Tensor(_rng.standard_normal((3, 2) + _pair(_k, "", "")), requires_grad=True)
    _b = Tensor(_rng.standard_normal(3), requires_grad=True)
    for _fn, _ins in ((lambda x, w, b: conv2d(x, w, b, stride=_s, padding=_p), [_x, _w, _b]),
                      (lambda x, w: conv2d(x, w, stride=_s, padding=_p), [_x, _w])):
        check(gradcheck(_fn, _ins, raise_exception=False),
              f"gradcheck of conv2d {'with' if len(_ins) == 3 else 'without'} bias, kernel {_k}, stride {_s}, "
              f"padding {_p} (run gradcheck(...) on this case alone to see the worst element)")
print("✓ conv2d backward: bias, weight and input gradients right, gradcheck passes; e.g. bias grad",
      np.round(_bgrad, 3))

# %% [markdown]
# The last check is worth a second look: with an all-ones 2×2 kernel and `L = Σ y`, the
# gradient of each pixel is the number of windows it belongs to — corners 1, edges 2,
# inside 4. That is col2im counting copies.
#
# <details><summary>The three gradients you should have found (open it once your check passes)</summary>
#
# `b̄_o = Σ_{n, l} Ȳ_{n,o,l}` (a broadcast's gradient is a sum); `W̄ = Σ_n Ȳ_n · cols_nᵀ`,
# a matmul with the *same* columns as the forward, summed over the images that shared `W`;
# and `cols̄_n = Wᵀ · Ȳ_n`, which col2im adds back into `x̄`. Two matmuls the size of the
# forward's, plus col2im and the recomputed columns: that is what the timing in section 11
# measures.
# </details>

# %% [markdown]
# `conv2d` pads inside im2col. PyTorch also offers padding as an op of its own,
# `F.pad(input, pad, value=0)`, whose `pad` tuple runs from the LAST dimension backwards:
# `(left, right)` pads the last dim, `(left, right, top, bottom)` the last two. A negative
# width crops. Its backward is the reverse: crop the gradient where the forward padded,
# and pad it with zeros where the forward cropped. Provided:

# %%
#| export
def _pad_widths(shape, pad):
    """PyTorch's last-dim-first pad tuple as one (before, after) pair per dimension."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > len(shape):
        raise ShapeError(f"pad: the pad tuple {pad} must have an even length of at most "
                         f"2 × {len(shape)} (two entries per padded dimension) for shape {tuple(shape)}")
    widths = [(0, 0)] * len(shape)
    for i in range(len(pad) // 2):
        widths[len(shape) - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    for d, (lo, hi) in enumerate(widths):
        if shape[d] + lo + hi < 0:
            raise ShapeError(f"pad: padding {pad} would give dimension {d} of shape {tuple(shape)} a "
                             f"negative size")
    return tuple(widths)


def _pad_array(arr, widths, value=0):
    """Pad by the positive widths, then crop by the negative ones."""
    arr = np.pad(arr, [(max(lo, 0), max(hi, 0)) for lo, hi in widths], constant_values=value)
    return arr[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(arr.shape, widths))]


def pad(input, pad, mode="constant", value=0.0):
    """torch.nn.functional.pad in constant mode: `pad` is (left, right) for the last dim,
    then the dim before it, ...; negative widths crop."""
    if mode != "constant":
        raise ValueError(f"pad: only mode='constant' is supported, got {mode!r}")
    widths = _pad_widths(input.shape, pad)
    return apply("pad", lambda x, widths, value: _pad_array(x.numpy(), widths, value).copy(),
                 input, widths=widths, value=value)


@backward_rule("pad")
def _pad_backward(node, grad):
    return (_pad_array(grad, tuple((-lo, -hi) for lo, hi in node.attrs["widths"])).copy(),)


# %% [markdown]
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
# Write `_max_pool2d_indices` first: where each window's maximum sits, as a flat index into
# its input plane. On ties it must pick the *first* maximum in the window (reading the
# window row by row), as PyTorch does.
#
# <details><summary>Hint 1</summary>
#
# The windows view of the padded input already has every window as two axes `(kh, kw)`. If
# those two became one axis of length `kh·kw`, which numpy reduction tells you *where* the
# maximum of each window is? What does it return on ties?
# </details>
#
# <details><summary>Hint 2</summary>
#
# That reduction gives a position `a` inside the window, `0 ≤ a < kh·kw`, in reading order.
# Turn it into the kernel offset `(u, v)` (which of `kh`, `kw` is the row length?), then into
# the row and column of the input: output row `i` starts its window at padded row `i·s_h`,
# and the padded image is shifted by the padding against the real one. What must the
# padding value be, so that a padded cell never wins?
# </details>
#
# <details><summary>The approach</summary>
#
# Three coordinate systems meet here: the cell inside a window, the padded image, and the
# real image the indices refer to. The reduction answers in the first; each move to the
# next adds an offset known for all windows at once (where window `(i, j)` starts, how far
# the padding shifts the image). Ties are settled by the order the cells are read in, so
# keep it row by row. Choose the padding value so that a padded cell loses to anything.
# The contract fixes the dtype.
# </details>

# %% nbgrader={"grade": false, "grade_id": "max-pool", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _max_pool2d_indices(x, kernel_size, stride, padding):
    """Where each window's maximum is, as PyTorch's return_indices gives it.

    Contract: x a numpy array (N, C, H, W); kernel_size, stride, padding (h, w) pairs (already
    checked: padding ≤ kernel // 2). Returns an int64 array (N, C, H_out, W_out) whose entry
    (n, c, i, j) is h·W + w for the input pixel (h, w) of plane (n, c) holding the maximum of
    window (i, j), never a padded cell; on ties, the first maximum in reading order.
    """
    # Idea: argmax over each window, then translate "position in the window" to "pixel of the input".
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


# %% nbgrader={"grade": true, "grade_id": "test-max-pool-indices", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_xm = np.array([[[[1.0, 5.0, 2.0, 0.0],
                  [3.0, 4.0, 8.0, 1.0],
                  [0.0, 2.0, 6.0, 7.0],
                  [9.0, 1.0, 3.0, 2.0]]]])
assert_equal(_max_pool2d_indices(_xm, (2, 2), (2, 2), (0, 0))[0, 0], np.array([[1, 6], [12, 11]]),
             "2x2 windows, stride 2: the maxima 5, 8, 9, 7 sit at flat positions h*4 + w")
assert_equal(_max_pool2d_indices(_xm, (3, 3), (1, 1), (0, 0))[0, 0], np.array([[6, 6], [12, 6]]),
             "3x3 windows, stride 1: overlapping windows can share their winner (8 at position 6)")
_tie = np.zeros((1, 1, 2, 4))
_tie[0, 0, :, 2:] = 3.0                                         # the second window: four equal maxima
assert_equal(_max_pool2d_indices(_tie, (2, 2), (2, 2), (0, 0))[0, 0], np.array([[0, 2]]),
             "ties: the FIRST maximum of each window in reading order (like PyTorch)")
assert_equal(_max_pool2d_indices(-_xm, (3, 3), (2, 2), (1, 1))[0, 0], np.array([[0, 3], [8, 7]]),
             "negative values with padding 1: the padding must never win (pad with -inf)")
assert_equal(_max_pool2d_indices(_xm, (3, 2), (1, 2), (1, 0))[0, 0], np.array([[1, 6], [1, 6], [12, 6], [12, 11]]),
             "a rectangular 3x2 kernel, stride (1, 2), padding (1, 0)")
assert_equal(_max_pool2d_indices(_xm, (2, 2), (2, 2), (0, 0)).dtype, np.dtype(np.int64), "indices are int64")
print("✓ _max_pool2d_indices: 2x2 winners of the example at", _max_pool2d_indices(_xm, (2, 2), (2, 2), (0, 0))[0, 0].tolist())

# %% [markdown]
# With the indices, the forward is a **gather** (read `x` at the indices) and the backward a
# **scatter-add**: each output's gradient goes to the pixel at its index, and nothing to the
# other pixels. Where overlapping windows picked the same winner, its gradient is the *sum*
# of their gradients (the same rule as col2im: a value used several times). The provided
# `max_pool2d` below checks the arguments, computes the indices with your function, and
# dispatches the op `"max_pool2d"` with the attribute `indices`.
#
# <details><summary>Hint 1</summary>
#
# Both are easier on the flattened planes `(N, C, H·W)`, since the indices are flat within
# a plane. numpy has a "take along an axis" for the gather. For the scatter, a plain
# fancy-index assignment keeps only ONE of the values aimed at the same place: you need a
# function that *adds* duplicates (`np.add.at`, or `np.bincount` with weights).
# </details>
#
# <details><summary>The approach</summary>
#
# Both directions work on one flat plane per `(n, c)`, because that is how the indices
# count. The forward only reads. The backward writes, and several outputs may aim at the
# same pixel: a write that keeps one value per target loses the others, the trap col2im
# taught you. An index that is flat within a plane is not flat within the whole array:
# what must be added before all planes can share one flat space? The rule returns a tuple.
# </details>

# %% nbgrader={"grade": false, "grade_id": "max-pool-routing", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _max_pool2d_forward(x, *, kernel_size, stride, padding, indices):
    """Forward of the op "max_pool2d": x (a Tensor (N, C, H, W)) read at `indices`.

    Contract: indices an int64 array (N, C, H_out, W_out) from _max_pool2d_indices. Returns a
    numpy array of that shape and x's dtype: out[n, c, i, j] = x[n, c] at flat index indices[n, c, i, j].
    """
    # Idea: a gather within each plane.
    ### BEGIN SOLUTION
    xa = x.numpy()
    N, C, H, W = xa.shape
    out = np.take_along_axis(xa.reshape(N, C, H * W), indices.reshape(N, C, -1), axis=2)
    return out.reshape(indices.shape)
    ### END SOLUTION


@backward_rule("max_pool2d")
def _max_pool2d_backward(node, grad):
    """The backward rule of the op "max_pool2d".

    Contract: node.inputs = (x,); node.attrs["indices"] as above; grad a numpy array
    (N, C, H_out, W_out). Returns a one-element tuple (x̄,), x̄ of x's shape: each output's
    gradient added to its winner; zero for pixels that won nowhere; the sum where several
    windows share a winner.
    """
    x = node.inputs[0]
    indices = node.attrs["indices"]
    # Idea: route each gradient to its argmax, and ADD where routes meet.
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
            raise ShapeError(f"{op}: input {input.shape}, kernel_size {kernel_size}, stride {stride}, "
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


# %% nbgrader={"grade": true, "grade_id": "test-max-pool-routing", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_x = Tensor(_xm, requires_grad=True)
_y, _i = max_pool2d(_x, 2, return_indices=True)
assert_equal(_y.numpy()[0, 0], np.array([[5.0, 8], [9, 7]]), "max_pool2d(x, 2): the window maxima")
assert_equal(_i.numpy()[0, 0], np.array([[1, 6], [12, 11]]), "return_indices=True: your indices")
(_y * Tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]]))).sum().backward()
assert_equal(_x.grad.numpy()[0, 0], np.array([[0.0, 1, 0, 0], [0, 0, 2, 0], [0, 0, 0, 4], [3, 0, 0, 0]]),
             "backward: each output's gradient goes to its winner only, all other pixels get 0")
_x.grad = None
(max_pool2d(_x, 3, stride=1) * Tensor(np.array([[[[1.0, 2.0], [3.0, 4.0]]]]))).sum().backward()
assert_equal(_x.grad.numpy()[0, 0], np.array([[0.0, 0, 0, 0], [0, 0, 1 + 2 + 4, 0], [0, 0, 0, 0], [3, 0, 0, 0]]),
             "3x3 windows, stride 1: 8 wins three windows, so it gets the SUM 1 + 2 + 4 of their gradients")
assert_equal(max_pool2d(Tensor(-_xm), 3, stride=2, padding=1).numpy()[0, 0], np.array([[-1.0, 0], [0, -1]]),
             "padding never wins, even against negative values")
_r = Tensor(np.random.default_rng(4).permutation(2 * 3 * 5 * 6).reshape(2, 3, 5, 6) / 10.0 - 4.5, requires_grad=True)
_G = np.random.default_rng(5).standard_normal((2, 3, 2, 3))
(max_pool2d(_r, 2) * Tensor(_G)).sum().backward()
_want = np.zeros((2, 3, 5, 6))
for _n, _c, _i, _j in np.ndindex(2, 3, 2, 3):            # the definition, window by window, plane by plane
    _u, _v = np.unravel_index(np.argmax(_r.numpy()[_n, _c, 2 * _i:2 * _i + 2, 2 * _j:2 * _j + 2]), (2, 2))
    _want[_n, _c, 2 * _i + _u, 2 * _j + _v] += _G[_n, _c, _i, _j]
assert_equal(_r.grad.numpy(), _want, "a batch of 2 images of 3 channels, 2x2 windows: each plane's gradient goes "
             "to that plane's own winners (the indices are per plane: image and channel offsets)")
_r.grad = None
from types import SimpleNamespace  # noqa: E402  (a stand-in node for calling the rule directly)

_pool_steps = []
for _n in (4, 16):                                         # 4 and 64 outputs per plane
    _pool_node = SimpleNamespace(inputs=(Tensor(np.zeros((1, 2, _n, _n))),),
                                 attrs={"indices": _max_pool2d_indices(np.zeros((1, 2, _n, _n)), (2, 2), (2, 2), (0, 0))})
    _pool_steps.append(python_steps(_max_pool2d_backward, _pool_node, np.ones((1, 2, _n // 2, _n // 2))))
check(_pool_steps[1] <= _pool_steps[0] + 10, "the max-pool backward runs no Python loop over output positions",
      got=f"{_pool_steps[0]} Python steps for a 4x4 image, {_pool_steps[1]} for 16x16", expected="the same count")
for _k, _s, _p in ((2, 2, 1), ((3, 2), (1, 2), (1, 0)), (3, 1, 1)):  # the last: overlapping windows
    check(gradcheck(lambda x: max_pool2d(x, _k, _s, _p), [_r], raise_exception=False),
          f"gradcheck of max_pool2d, kernel {_k}, stride {_s}, padding {_p}")
print("✓ max_pool2d routes each gradient to its argmax; gradient of the 3x3 example:\n", _x.grad.numpy()[0, 0])

# %% [markdown]
# ### Average pooling
#
# `y = mean(window)`: each element of a `kh × kw` window gets `1/(kh·kw)` of the output's
# gradient. Padding cells are zeros and count in the mean (`count_include_pad=True`,
# PyTorch's default), so the divisor is always `kh·kw`. Both directions can reuse what you
# built, with no new loop: which of your functions gives every window without a copy, and
# which one already sends a value per window entry back to the pixel it came from?
#
# <details><summary>Hint 1</summary>
#
# Forward: the windows view of the zero-padded input has the window as two axes. Backward:
# if every window element got the same share of its output's gradient, what would the
# *column* gradient look like, in im2col's layout? Which function turns a column gradient
# into an image gradient, adding overlaps?
# </details>
#
# <details><summary>The approach</summary>
#
# Forward: every window is already at hand without a copy, and a mean over the right axes
# is the whole op; since padding counts, the divisor never changes. Backward: each window
# hands each of its cells the same share of its output's gradient. In im2col's layout that
# is a column gradient whose entries depend only on the output position, and you have a
# function that sends column gradients home, adding overlaps. That column array is the
# one large allocation of the backward; how small can the rest of the work stay?
# </details>

# %% nbgrader={"grade": false, "grade_id": "avg-pool", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _avg_pool2d_forward(x, *, kernel_size, stride, padding):
    """Forward of the op "avg_pool2d".

    Contract: x a Tensor (N, C, H, W); kernel_size, stride, padding (h, w) pairs. Returns a
    numpy array (N, C, H_out, W_out): the mean of each window of the ZERO-padded input,
    always divided by kh·kw (padded cells count).
    """
    # Idea: a mean over the window axes of the windows view.
    ### BEGIN SOLUTION
    return _windows(_pad(x.numpy(), padding), kernel_size, stride).mean(axis=(2, 3))
    ### END SOLUTION


@backward_rule("avg_pool2d")
def _avg_pool2d_backward(node, grad):
    """The backward rule of the op "avg_pool2d".

    Contract: node.inputs = (x,); node.attrs holds kernel_size, stride, padding (pairs);
    grad a numpy array (N, C, H_out, W_out). Returns (x̄,) with x̄ of x's shape: every pixel
    gets grad/(kh·kw) from every window it is in, summed over those windows.
    """
    x = node.inputs[0]
    kernel_size, stride, padding = node.attrs["kernel_size"], node.attrs["stride"], node.attrs["padding"]
    # Idea: the mean's gradient per window entry, sent back by a function you already have.
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
assert_equal(avg_pool2d(_x, 2).numpy()[0, 0], np.array([[2.5, 4.5], [10.5, 12.5]]), "avg_pool2d(ramp, 2)")
assert_close(avg_pool2d(_x, 3, stride=2, padding=1).numpy()[0, 0], np.array([[10 / 9, 24 / 9], [51 / 9, 90 / 9]]),
             rtol=1e-12, what="3x3, stride 2, padding 1: the padded zeros count, the divisor is always 9")
avg_pool2d(_x, 2, stride=1).sum().backward()
assert_close(_x.grad.numpy()[0, 0], np.array([[1.0, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]) / 4,
             rtol=1e-12, what="backward of sum(avg_pool2d(x, 2, stride=1)): 1/4 from each window a pixel is in")
_r = Tensor(np.random.default_rng(5).standard_normal((2, 3, 5, 6)), requires_grad=True)
gradcheck(lambda x: avg_pool2d(x, 3, 2, 1), [_r])             # raises when wrong
gradcheck(lambda x: avg_pool2d(x, (2, 3), (1, 2)), [_r])
print("✓ avg_pool2d; avg_pool2d(ramp, 2) =", avg_pool2d(_x, 2).numpy()[0, 0].tolist())

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
# ### Which statistics, and the running averages
#
# First the part that decides the mode: `_norm_stats` returns the per-channel mean and
# variance to normalise with, and in training it also moves the running averages. The
# running buffers are numpy arrays owned by the layer (the storage of its `running_mean`
# and `running_var` buffers): update them **in place**, or the layer never sees the change.
# `_channel_shape` and `_reduce_axes` (provided) give the broadcast shape `(1, C, 1, 1)` and
# the axes `(0, 2, 3)` of the per-channel reductions, for any `(N, C, *)` input.
#
# <details><summary>Hint 1</summary>
#
# numpy's `var` divides by `M` (biased) unless told otherwise (`ddof`). The normalisation
# needs the biased one; the running variance wants `M/(M − 1)` times it. What is `M` for an
# `(N, C, H, W)` input?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `momentum` is the weight of the *new* batch (0.1: mostly the old average). Assigning a
# new array to the parameter's name only rebinds a local name; to change the layer's
# buffer, write into the array's elements (assign to all of its elements at once). In eval,
# why return a *copy* of the running statistics rather than the arrays themselves? (The op
# keeps what you return as its saved mean, and a later training step moves the buffers.)
# </details>
#
# <details><summary>The approach</summary>
#
# Two variances disagree on purpose: the normalisation uses the biased one, the running
# average the unbiased one; keep them apart. The buffers belong to the layer, so an update
# that only rebinds a local name is lost; the layer sees only writes into its arrays. Each
# buffer may be absent on its own. In eval nothing moves, and what you return outlives
# this call: why must it not be the buffers themselves?
# </details>

# %% nbgrader={"grade": false, "grade_id": "batch-norm-stats", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _channel_shape(x):
    """(1, C, 1, 1) for a 4-D x: a per-channel vector broadcasts against x with this shape."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _reduce_axes(x):
    """Every axis except the channel axis 1: (0, 2, 3) for NCHW."""
    return (0,) + tuple(range(2, x.ndim))


def _batch_stats(x):
    """Per-channel mean and BIASED variance (divided by M) of a numpy array x (N, C, *):
    two (C,) arrays."""
    # Idea: one channel's statistics reduce over every other axis.
    ### BEGIN SOLUTION
    axes = _reduce_axes(x)
    return x.mean(axis=axes), x.var(axis=axes)
    ### END SOLUTION


def _norm_stats(x, running_mean, running_var, training, momentum):
    """The per-channel (mean, variance) that batch_norm normalises with.

    Contract: x a numpy array (N, C, *) with M = x.size // C > 1 values per channel;
    running_mean, running_var numpy arrays (C,) or None; training a bool; momentum a float.
    training=True: returns the batch's mean and biased variance; updates IN PLACE each running
    array that is given: running ← (1 − momentum)·running + momentum·batch, where the
    variance's batch term is the UNBIASED variance (× M/(M − 1)).
    training=False: returns copies of running_mean and running_var (both given), updates nothing.
    """
    # Idea: training uses and records the batch; eval uses only what was recorded.
    ### BEGIN SOLUTION
    if training:
        mean, var = _batch_stats(x)
        count = x.size // x.shape[1]
        if running_mean is not None:
            running_mean[...] = (1 - momentum) * running_mean + momentum * mean
        if running_var is not None:
            running_var[...] = (1 - momentum) * running_var + momentum * var * (count / (count - 1))
        return mean, var
    return running_mean.copy(), running_var.copy()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-batch-norm-stats", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(6)
_xx = _rng.standard_normal((4, 3, 5, 2)) * 3 + 1                  # M = 4·5·2 = 40 values per channel
_per_channel = _xx.transpose(1, 0, 2, 3).reshape(3, -1)           # (C, M): one row per channel
_m, _v = _batch_stats(_xx)
assert_close(_m, _per_channel.mean(axis=1), rtol=1e-12, what="_batch_stats mean, per channel")
assert_close(_v, _per_channel.var(axis=1), rtol=1e-12, what="_batch_stats variance, biased (divided by M)")
_rm, _rv = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 0.5])
_rm0, _rv0 = _rm.copy(), _rv.copy()
_m, _v = _norm_stats(_xx, _rm, _rv, True, 0.1)
assert_close(_m, _per_channel.mean(axis=1), rtol=1e-12, what="training: normalise with the batch mean")
assert_close(_v, _per_channel.var(axis=1), rtol=1e-12, what="training: normalise with the BIASED batch variance")
assert_close(_rm, 0.9 * _rm0 + 0.1 * _per_channel.mean(axis=1), rtol=1e-12,
             what="running_mean after one step: 0.9·old + 0.1·batch mean, updated in place")
assert_close(_rv, 0.9 * _rv0 + 0.1 * _per_channel.var(axis=1, ddof=1), rtol=1e-12,
             what="running_var after one step: 0.9·old + 0.1·UNBIASED batch variance (× 40/39)")
_m2, _v2 = _norm_stats(_xx, None, None, True, 0.1)
assert_close(_m2, _m, rtol=1e-12, what="training without running statistics")
_rm1, _rv1 = _rm.copy(), _rv.copy()
_me, _ve = _norm_stats(_xx[:1], _rm, _rv, False, 0.1)
assert_equal(_me, _rm1, "eval: the running mean, not the batch's")
assert_equal(_ve, _rv1, "eval: the running variance, not the batch's")
assert_equal(_rm, _rm1, "eval must not update running_mean")
_rm[...] = 7.0
assert_equal(_me, _rm1, "eval returns a copy: changing the buffer later must not change it")
print("✓ _norm_stats: running_var after one step", np.round(_rv, 4))

# %% [markdown]
# ### The backward: derive it
#
# In eval mode μ and σ² are constants, so `x̄ = ȳ·γ/√(σ²+ε)`. In training they are computed
# from `x` itself, so every input reaches every output of its channel, and that backward is
# yours to derive. A plan that keeps the algebra short (per channel; every mean is over the
# channel's `M` values; $s = 1/\sqrt{\sigma^2+\varepsilon}$):
#
# 1. Name the gradient that arrives at $\hat x = (x - \mu)\,s$: it is $\hat g = \gamma\,\bar y$.
# 2. $x_k$ reaches $\hat x_m$ three ways: directly (only when $m = k$), through $\mu$, and
#    through $\sigma^2 = \operatorname{mean}\big((x-\mu)^2\big)$, on which $s$ depends. Write
#    $\partial\mu/\partial x_k$ and $\partial\sigma^2/\partial x_k$ first (the second is
#    simpler than it looks: what is $\operatorname{mean}(x - \mu)$?).
# 3. Add the three paths up. The result is $s$ times $\hat g$ minus two corrections, each a
#    per-channel mean of something times a per-element factor.
#
# Two facts to test your result on paper before you code it. Adding a constant to every
# value of a channel changes no output, so your $\bar x$ must sum to 0 over each channel.
# Scaling a channel's values about their mean changes no $\hat x$ either (up to ε), so
# $\sum \bar x\,\hat x$ must be about 0 per channel too. The two corrections remove exactly
# those two directions from $s\,\hat g$: the normalisation is blind to them. The check cell
# tests both facts and runs gradcheck; `γ̄` and `β̄` (in both modes) are one line each.
#
# The provided `batch_norm` checks its arguments, gets the statistics from your
# `_norm_stats`, and dispatches the op `"batch_norm"` with attributes `mean`, `invstd`
# (1/√(σ²+ε), per channel) and `training`. Its inputs are always `(input, weight, bias)`: a
# missing weight or bias is replaced by ones or zeros that do not require grad. Write the
# forward and the backward rule.
#
# <details><summary>Hint 1</summary>
#
# Every per-channel vector (`mean`, `invstd`, `weight`, `bias`) must be reshaped to the
# channel shape before it meets `x`. Recompute `x̂` in the backward from the saved mean and
# invstd. A per-channel mean in the backward is over the reduction axes, kept as size-1 axes
# so that it broadcasts back.
# </details>
#
# <details><summary>Hint 2 (the derivatives of step 2)</summary>
#
# $\partial\mu/\partial x_k = 1/M$. For the variance, $\partial\sigma^2/\partial x_k =
# \frac{2}{M}(x_k - \mu)$: the term through μ vanishes because $\operatorname{mean}(x-\mu) = 0$.
# And $\partial s/\partial\sigma^2 = -\tfrac12 s^3$.
# </details>
#
# <details><summary>The approach</summary>
#
# The two modes differ only in whether μ and σ² depend on `x`. In eval they are constants
# and the map is affine per channel; in training your derivation adds the two corrections,
# and the two facts above tell you whether they are right. The forward saves only the
# statistics, so anything else the backward needs is rebuilt from them. For `γ̄` and `β̄`,
# ask what multiplied each in the forward, and over which axes each was shared.
# </details>

# %% nbgrader={"grade": false, "grade_id": "batch-norm", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def _batch_norm_forward(x, weight, bias, *, mean, invstd, training, eps):
    """Forward of the op "batch_norm".

    Contract: x a Tensor (N, C, *); weight, bias Tensors (C,); mean, invstd numpy (C,)
    arrays of x's dtype (the statistics chosen by _norm_stats, invstd = 1/sqrt(var + eps)).
    Returns a numpy array of x's shape: each channel normalised with its mean and invstd,
    then scaled by its weight and shifted by its bias (PyTorch's batch_norm).
    """
    # Idea: a per-channel affine map; the statistics are already chosen.
    ### BEGIN SOLUTION
    xa = x.numpy()
    shape = _channel_shape(xa)
    xhat = (xa - mean.reshape(shape)) * invstd.reshape(shape)
    return xhat * weight.numpy().reshape(shape) + bias.numpy().reshape(shape)
    ### END SOLUTION


@backward_rule("batch_norm")
def _batch_norm_backward(node, grad):
    """The backward rule of the op "batch_norm".

    Contract: node.inputs = (input, weight, bias); node.attrs holds mean, invstd (numpy (C,))
    and training (bool); grad a numpy array of the input's shape. Returns (x̄, γ̄, β̄) of shapes
    (input's, (C,), (C,)); in training x̄ includes the paths through the batch mean and
    variance (the formula above), in eval it does not.
    """
    x, weight = node.inputs[0].numpy(), node.inputs[1].numpy()
    mean, invstd, training = node.attrs["mean"], node.attrs["invstd"], node.attrs["training"]
    # Idea: in training, remove the parts of the gradient that the normalisation cannot see.
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
        raise ShapeError(f"batch_norm: expected an input (N, C, *), got "
                         f"{input.shape if isinstance(input, Tensor) else type(input).__name__}")
    C = input.shape[1]
    for name, t in [("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)]:
        if t is not None and t.shape != (C,):
            raise ShapeError(f"batch_norm: {name} must have shape ({C},) for an input of shape "
                             f"{input.shape}, got {t.shape}")
    x = input.numpy()
    if training and x.size // C <= 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, "
                         f"got input of shape {input.shape}")
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: running_mean and running_var are needed when training=False")
    mean, var = _norm_stats(x, None if running_mean is None else running_mean.numpy(),
                            None if running_var is None else running_var.numpy(), bool(training), momentum)
    invstd = (1.0 / np.sqrt(var + eps)).astype(input.dtype)
    mean = np.asarray(mean, dtype=input.dtype)
    weight = ones(C, dtype=input.dtype) if weight is None else weight
    bias = zeros(C, dtype=input.dtype) if bias is None else bias
    return apply("batch_norm", _batch_norm_forward, input, weight, bias, mean=mean, invstd=invstd,
                 training=bool(training), eps=eps)


# %% nbgrader={"grade": true, "grade_id": "test-batch-norm", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_rng = np.random.default_rng(6)
_xx = _rng.standard_normal((4, 3, 5, 2)) * 3 + 1
_rm, _rv = Tensor(np.zeros(3)), Tensor(np.ones(3))
_y = batch_norm(Tensor(_xx), _rm, _rv, training=True, eps=0.0)
assert_close(_y.numpy().mean(axis=(0, 2, 3)), np.zeros(3), atol=1e-12, what="training output: mean 0 per channel")
assert_close(_y.numpy().var(axis=(0, 2, 3)), np.ones(3), rtol=1e-10, what="training output: variance 1 per channel")
assert_close(_rv, 0.9 + 0.1 * _xx.transpose(1, 0, 2, 3).reshape(3, -1).var(axis=1, ddof=1), rtol=1e-12,
             what="batch_norm updated the running_var Tensor in place (unbiased)")
_gam = np.array([1.0, 2.0, 3.0])
_ye = batch_norm(Tensor(_xx), _rm, _rv, Tensor(_gam), training=False)
_shape = (1, 3, 1, 1)
assert_close(_ye, (_xx - _rm.numpy().reshape(_shape)) / np.sqrt(_rv.numpy().reshape(_shape) + 1e-5) * _gam.reshape(_shape),
             rtol=1e-10, what="eval output: (x - running_mean) / sqrt(running_var + eps) * weight")
_x = Tensor(_xx, requires_grad=True)
_g = Tensor(_rng.standard_normal(3) + 1, requires_grad=True)
_b = Tensor(_rng.standard_normal(3), requires_grad=True)
(batch_norm(_x, None, None, _g, _b, training=True) * Tensor(np.ones_like(_xx))).sum().backward()
assert_close(_x.grad, np.zeros_like(_xx), atol=1e-9,
             what="training: a gradient constant per channel flows into the mean and is removed, so x̄ = 0")
assert_close(_b.grad, np.full(3, 40.0), rtol=1e-12, what="bias gradient: Σ ȳ over the 40 values of each channel")
_x2 = Tensor(_xx, requires_grad=True)                     # the two facts of the derivation, any upstream gradient
(batch_norm(_x2, None, None, _g, _b, training=True, eps=0.0) * Tensor(_rng.standard_normal(_xx.shape))).sum().backward()
_xhat = (_xx - _xx.mean(axis=(0, 2, 3), keepdims=True)) / _xx.std(axis=(0, 2, 3), keepdims=True)
assert_close(_x2.grad.numpy().sum(axis=(0, 2, 3)), np.zeros(3), atol=1e-9,
             what="training: x̄ sums to 0 over each channel (a constant added to a channel changes nothing)")
assert_close((_x2.grad.numpy() * _xhat).sum(axis=(0, 2, 3)), np.zeros(3), atol=1e-9,
             what="training: Σ x̄·x̂ = 0 per channel (scaling a channel about its mean changes nothing)")
gradcheck(lambda x, g, b: batch_norm(x, None, None, g, b, training=True), [_x, _g, _b])  # raises when wrong
gradcheck(lambda x, g, b: batch_norm(x, _rm, _rv, g, b, training=False), [_x, _g, _b])
print("✓ batch_norm (train and eval) passes gradcheck; eval output channel means",
      np.round(_ye.numpy().mean(axis=(0, 2, 3)), 3))

# %% [markdown]
# <details><summary>The form you should have found (open it once your check passes)</summary>
#
# $$\bar x = s\Big(\hat g - \operatorname{mean}(\hat g) - \hat x\cdot\operatorname{mean}(\hat g\,\hat x)\Big),
#   \qquad \hat g = \gamma\,\bar y,\quad s = \frac{1}{\sqrt{\sigma^2+\varepsilon}},$$
#
# with `γ̄ = Σ ȳ·x̂` and `β̄ = Σ ȳ`. The subtracted terms are the projections of $\hat g$ onto
# "constant per channel" and onto $\hat x$ (whose mean square is 1): the path through μ
# gives the first, the path through σ² the second.
# </details>

# %% [markdown]
# ## 9. The layers
#
# The modules wrap the functions and own the state.
#
# **`Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
# groups=1, bias=True)`** owns `weight` `(out, in / groups, kh, kw)` and `bias` `(out,)` (or
# no bias: then the attribute exists and is `None`). With `groups` = g the channels are split
# into g groups, and each output channel reads only its own group's inputs (g = in_channels
# is the **depthwise** convolution of MobileNet); `dilation` spreads a kernel's taps apart
# (provided around your op, like `padding="same"`). PyTorch's default initialisation is the same as `Linear`'s, with the fan-in
# counting the whole receptive field: `kaiming_uniform_(weight, a=√5)`, i.e.
# U(±1/√fan_in), and the bias U(±1/√fan_in).
#
# <details><summary>Hint 1</summary>
#
# How many inputs feed one output value of a conv layer? Not `in_channels`: each output
# looks at a whole `in_channels × kh × kw` window. module 03's `_calculate_fan_in_and_fan_out`
# already counts that for a 4-D weight.
# </details>
#
# <details><summary>The approach</summary>
#
# The names and shapes are fixed by the PyTorch `state_dict` they must match, and the
# dtype is passed on. A layer without bias still answers `.bias` with `None`: module 03
# has a way to declare a parameter that is absent. Values created in `__init__` are
# placeholders when the reset overwrites them. The reset's one question is the fan-in: how
# many inputs feed one output value? `forward` only hands the layer's state to your op.
# </details>

# %% nbgrader={"grade": false, "grade_id": "layers", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Conv2d(Module):
    """2-D convolution layer over (N, C_in, H, W) inputs (torch.nn.Conv2d).

    Contract: parameters `weight` (out, in / groups, kh, kw) and `bias` (out,) or None, of
    `dtype` (float32 by default), initialised as PyTorch does: weight and bias uniform in
    ±1/√(fan-in), the fan-in being the number of inputs one output value reads. kernel_size,
    stride, dilation (and padding, unless "same" or "valid") are stored as pairs; groups as
    an int. forward(input) is conv2d(input, weight, bias, stride, padding, dilation,
    groups). A bad geometry raises ValueError naming Conv2d (provided).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", dtype=None):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = _pair(stride, "stride", "Conv2d")
        self.dilation = _pair(dilation, "dilation", "Conv2d")
        self.groups = groups
        if padding_mode != "zeros":
            raise ValueError(f"Conv2d: padding_mode={padding_mode!r} is not supported; tinytorch pads with zeros "
                             "(padding_mode='zeros')")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            _check_string_padding(padding, self.stride, "Conv2d")
        self.padding = padding if isinstance(padding, str) else _pair(padding, "padding", "Conv2d")
        if (min(self.stride) < 1 or min(self.kernel_size) < 1 or min(self.dilation) < 1
                or (not isinstance(self.padding, str) and min(self.padding) < 0)):
            raise ValueError(f"Conv2d: kernel_size {self.kernel_size}, stride {self.stride} and dilation "
                             f"{self.dilation} must be positive and padding {self.padding} non-negative")
        _check_groups(groups, "Conv2d")
        if self.in_channels % groups or self.out_channels % groups:
            raise ValueError(f"Conv2d: groups={groups!r} must divide in_channels ({self.in_channels}) and "
                             f"out_channels ({self.out_channels})")
        # Idea: one filter per output channel, over the inputs that channel's group reads.
        ### BEGIN SOLUTION
        self.weight = Parameter(zeros(self.out_channels, self.in_channels // self.groups, *self.kernel_size,
                                      dtype=dtype))
        if bias:
            self.bias = Parameter(zeros(self.out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self):
        """PyTorch's default: kaiming_uniform_(weight, a=√5); bias ~ U(±1/√fan_in)."""
        # Idea: the fan-in of a conv weight is its whole receptive field.
        ### BEGIN SOLUTION
        kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = _calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            uniform_(self.bias, -bound, bound)
        ### END SOLUTION

    def forward(self, input):
        # Idea: the layer holds the parameters and the geometry; the op does the work.
        ### BEGIN SOLUTION
        return conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        ### END SOLUTION

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


# %% nbgrader={"grade": true, "grade_id": "test-conv2d-layer", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _conv = Conv2d(4, 8, (3, 2), padding=1)
    _xin = tinytorch.randn(2, 4, 6, 5)
assert_equal(_conv.weight.shape, (8, 4, 3, 2), "Conv2d(4, 8, (3, 2)).weight shape (out, in, kh, kw)")
assert_equal(_conv.bias.shape, (8,), "bias shape (out,)")
assert_equal([n for n, _ in _conv.named_parameters()], ["weight", "bias"], "named parameters")
_bound = 1 / np.sqrt(4 * 3 * 2)
_wmax = float(np.abs(_conv.weight.numpy()).max())
check(0.8 * _bound < _wmax <= _bound, f"weights uniform in ±1/√(in·kh·kw) = ±{_bound:.4f} (fan-in counts the window)",
      got=_wmax, expected=f"max |w| in ({0.8 * _bound:.4f}, {_bound:.4f}]")
_bmax = float(np.abs(_conv.bias.numpy()).max())
check(0.5 * _bound < _bmax <= _bound, f"bias uniform in ±{_bound:.4f}", got=_bmax)
check(Conv2d(3, 8, 3, bias=False).bias is None, "Conv2d(..., bias=False).bias is None")
assert_equal(Conv2d(2, 3, 3, dtype=tinytorch.float64).weight.dtype, np.dtype(np.float64), "dtype=float64")
assert_equal(_conv(_xin).shape, (2, 8, 6, 6), "Conv2d(4, 8, (3, 2), padding=1) on 6x5 images")
assert_close(_conv(_xin), conv2d_loops(_xin.numpy(), _conv.weight.numpy(), _conv.bias.numpy(), 1, 1),
             rtol=1e-4, atol=1e-5, what="Conv2d.forward = the seven loops with the layer's weight and bias")
with preserved_state():
    tinytorch.manual_seed(1)
    _conv2 = Conv2d(4, 3, 3, stride=2, padding=1, bias=False)
assert_close(_conv2(_xin), conv2d_loops(_xin.numpy(), _conv2.weight.numpy(), None, 2, 1), rtol=1e-4, atol=1e-5,
             what="Conv2d(4, 3, 3, stride=2, padding=1, bias=False): the layer passes its stride and padding on")
with preserved_state():
    tinytorch.manual_seed(2)
    _gconv = Conv2d(4, 6, 3, padding=1, groups=2)
assert_equal(_gconv.weight.shape, (6, 2, 3, 3),
             "Conv2d(4, 6, 3, groups=2).weight: each output channel reads its group's in / groups = 2 channels")
_gbound = 1 / np.sqrt(2 * 3 * 3)
check(0.8 * _gbound < float(np.abs(_gconv.weight.numpy()).max()) <= _gbound,
      f"a grouped conv's fan-in is (in / groups)·kh·kw = 18: weights in ±{_gbound:.4f}",
      got=float(np.abs(_gconv.weight.numpy()).max()))
_gw, _gb = _gconv.weight.numpy(), _gconv.bias.numpy()
assert_close(_gconv(_xin), np.concatenate([conv2d_loops(_xin.numpy()[:, :2], _gw[:3], _gb[:3], 1, 1),
                                           conv2d_loops(_xin.numpy()[:, 2:], _gw[3:], _gb[3:], 1, 1)], axis=1),
             rtol=1e-4, atol=1e-5, what="groups=2: outputs 0-2 read input channels 0-1, outputs 3-5 channels 2-3")
_dconv = Conv2d(4, 3, 3, padding="same", dilation=2)
assert_close(_dconv(_xin), conv2d(_xin, _dconv.weight, _dconv.bias, padding=2, dilation=2), rtol=1e-6, atol=1e-7,
             what="Conv2d(4, 3, 3, padding='same', dilation=2): the layer passes its dilation and padding on")
print("✓ Conv2d:", _conv, "|", _gconv)

# %% [markdown]
# **`BatchNorm2d(num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True)`**
# owns `weight`, `bias` (if `affine`) and three **buffers** (module 03): `running_mean`
# (zeros), `running_var` (ones) and `num_batches_tracked` (an int64 counter). Buffers are
# state that is saved in the `state_dict` but never trained (provided). Its `forward` is
# PyTorch's, and its contract is in the docstring below; one of its cases is worth working
# out first: with `momentum=None` PyTorch keeps the **plain mean** of the statistics of all
# batches so far. Which averaging factor, at the $n$-th batch, turns the running-average
# update of `_norm_stats` into a plain mean?
#
# <details><summary>Hint 1</summary>
#
# Three questions decide the call to `batch_norm`: should this call count a batch (and
# which factor does it average with)? Should it normalise with the batch's statistics? Which
# running buffers should it hand over: the ones to *use* (eval) or to *update* (training
# with tracking), or none?
# </details>
#
# <details><summary>Hint 2</summary>
#
# `self.training` is module 03's train/eval flag. The counter is a buffer Tensor: change its
# value in place (through its numpy storage) so that it stays the same buffer. In eval
# nothing may change: no count, no running update.
# </details>
#
# <details><summary>The approach</summary>
#
# With `momentum=None` the factor depends on the batch count (the question above), so
# decide whether this batch is counted before the factor is read; test it on the first
# batch, whose plain mean must ignore what the buffers held. Two more choices depend on
# the mode. A layer in eval without running statistics still has to normalise with
# something. In training, buffers handed to `batch_norm` are buffers it will move; in
# eval, they are the ones it uses, and no state may change.
# </details>

# %% nbgrader={"grade": false, "grade_id": "batchnorm2d-layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class BatchNorm2d(Module):
    """Batch normalisation over the channels of (N, C, H, W) inputs (torch.nn.BatchNorm2d).

    Contract: forward(input) with input (N, num_features, H, W); training mode normalises with
    the batch's statistics and (with track_running_stats) adds 1 to num_batches_tracked and
    updates the running buffers with `momentum` (or the cumulative factor
    1/num_batches_tracked when momentum is None); eval mode normalises with the running
    buffers and changes no state. A wrong input raises ShapeError naming the shape (provided).
    """

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
            raise ShapeError(f"BatchNorm2d: expected a 4-D input (N, C, H, W), got "
                             f"{input.shape if isinstance(input, Tensor) else type(input).__name__}")
        if input.shape[1] != self.num_features:
            raise ShapeError(f"BatchNorm2d: input of shape {input.shape} has {input.shape[1]} channels, "
                             f"but the layer was built for num_features = {self.num_features}")
        # Idea: the mode decides which statistics are used, and whether any state changes.
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


# %% nbgrader={"grade": true, "grade_id": "test-batchnorm2d-layer", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
with preserved_state():
    tinytorch.manual_seed(0)
    _xb = [tinytorch.randn(4, 3, 5, 5) * (1 + _k) + _k for _k in range(3)]
_bn = BatchNorm2d(3)
assert_equal(sorted(n for n, _ in _bn.named_buffers()), ["num_batches_tracked", "running_mean", "running_var"],
             "BatchNorm2d buffers")
_rm_ref, _rv_ref = np.zeros(3), np.ones(3)
for _xk in _xb:
    _bn(_xk)
    _pc = _xk.numpy().transpose(1, 0, 2, 3).reshape(3, -1)
    _rm_ref, _rv_ref = 0.9 * _rm_ref + 0.1 * _pc.mean(axis=1), 0.9 * _rv_ref + 0.1 * _pc.var(axis=1, ddof=1)
assert_equal(_bn.num_batches_tracked.item(), 3, "num_batches_tracked after three training batches")
assert_close(_bn.running_mean, _rm_ref, rtol=1e-5, atol=1e-6, what="running_mean after three batches (momentum 0.1)")
assert_close(_bn.running_var, _rv_ref, rtol=1e-5, atol=1e-6, what="running_var after three batches (unbiased)")
_cum = BatchNorm2d(3, momentum=None)
for _xk in _xb:
    _cum(_xk)
assert_close(_cum.running_mean, np.mean([_x.numpy().mean(axis=(0, 2, 3)) for _x in _xb], axis=0), rtol=1e-5,
             atol=1e-6, what="momentum=None: running_mean is the plain average of the batch means")
_odd = BatchNorm2d(3, eps=0.5, momentum=0.3)
_yo = _odd(_xb[1]).numpy()
_pc1 = _xb[1].numpy().transpose(1, 0, 2, 3).reshape(3, -1)
assert_close(_yo, (_xb[1].numpy() - _pc1.mean(axis=1).reshape(1, 3, 1, 1))
             / np.sqrt(_pc1.var(axis=1).reshape(1, 3, 1, 1) + 0.5), rtol=1e-4, atol=1e-5,
             what="BatchNorm2d(3, eps=0.5): the layer passes its eps on")
assert_close(_odd.running_mean, 0.3 * _pc1.mean(axis=1), rtol=1e-5, atol=1e-6,
             what="BatchNorm2d(3, momentum=0.3): running_mean after one batch is 0.7·0 + 0.3·batch mean")
_bn.eval()
_before = _bn.running_mean.numpy().copy()
_ye = _bn(_xb[0][:1])
assert_equal(_bn.running_mean.numpy(), _before, "eval does not update running_mean")
assert_equal(_bn.num_batches_tracked.item(), 3, "eval does not count batches")
_shape = (1, 3, 1, 1)
assert_close(_ye, (_xb[0][:1].numpy() - _rm_ref.reshape(_shape)) / np.sqrt(_rv_ref.reshape(_shape) + 1e-5),
             rtol=1e-4, atol=1e-5, what="eval normalises with the running statistics (a batch of one works)")
_plain = BatchNorm2d(3, affine=False, track_running_stats=False)
_plain.eval()
_yp = _plain(_xb[0]).numpy()
assert_close(_yp.mean(axis=(0, 2, 3)), np.zeros(3), atol=1e-5,
             what="no running statistics: even in eval, normalise with the batch's")
print("✓ BatchNorm2d: running_mean after three batches", np.round(_bn.running_mean.numpy(), 4))

# %% [markdown]
# **`Flatten(start_dim=1, end_dim=-1)`** turns `(N, C, H, W)` feature maps into the
# `(N, C·H·W)` vectors a `Linear` expects (the batch dimension stays). `MaxPool2d` and
# `AvgPool2d` just remember their arguments (provided).
#
# <details><summary>Hint 1</summary>
#
# Module 01's `Tensor` already has a method with the same two arguments; its gradient is a
# reshape back, which module 06 already knows.
# </details>

# %% nbgrader={"grade": false, "grade_id": "flatten-layer", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Flatten(Module):
    """Merge dims start_dim..end_dim into one (torch.nn.Flatten): (N, C, H, W) -> (N, C·H·W).

    Contract: forward(input) returns a Tensor with dims start_dim..end_dim (negative counts
    from the end, both included) merged into one, in C order; it has no parameters.
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        # Idea: flattening keeps the batch dimension: it is a reshape of the others.
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


# %% nbgrader={"grade": true, "grade_id": "test-flatten-pool-layers", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_z = Tensor(np.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5), requires_grad=True)
assert_equal(Flatten()(_z).shape, (2, 60), "Flatten() keeps the batch dim: (2, 3, 4, 5) -> (2, 60)")
assert_equal(Flatten(0, 2)(_z).shape, (24, 5), "Flatten(0, 2): (2, 3, 4, 5) -> (24, 5)")
assert_equal(Flatten(-3, -2)(_z).shape, (2, 12, 5), "Flatten(-3, -2): (2, 3, 4, 5) -> (2, 12, 5)")
assert_equal(Flatten()(_z).numpy()[1, :7], np.arange(60.0, 67.0), "C order: image 1 starts at value 60")
(Flatten()(_z) * Tensor(np.arange(60.0))).sum().backward()
assert_equal(_z.grad.numpy(), np.broadcast_to(np.arange(60.0).reshape(3, 4, 5), (2, 3, 4, 5)),
             "Flatten's gradient is the upstream gradient reshaped back")
_xin = Tensor(np.ones((2, 3, 6, 5), np.float32))
assert_equal(MaxPool2d(2)(_xin).shape, (2, 3, 3, 2), "MaxPool2d(2) on 6x5")
assert_equal(AvgPool2d(3, 1, 1)(_xin).shape, (2, 3, 6, 5), "AvgPool2d(3, 1, 1) keeps 6x5")
print("✓ Flatten, MaxPool2d, AvgPool2d:", Flatten(), MaxPool2d(2), sep="\n  ")

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
check(test_acc >= 0.97, "the CNN should reach at least 97% test accuracy (tito test checks the same)",
      got=test_acc, expected=">= 0.97")

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(history)
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("training loss")
ax.set_title("CNN on the digits")
fig.tight_layout()
plt.show()

# %% [markdown]
# What did the first layer learn? Its 16 filters are 3×3 images, plotted below. On 8×8
# digits after a few epochs, most look like noise with some structure; a few may show a
# light-dark split (a crude edge detector). Large networks trained on natural images learn
# far cleaner edge and colour filters in their first layer.

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
# and the backward more than that: count its matmuls from your derivation in section 6, then
# add what col2im and the recomputed columns cost. The parameters are only
# `C_out·C_in·k²`: a conv layer does a lot of arithmetic per weight, because each weight is
# reused at every position.
#
# **Predict first**, for the layer `N=16, 32→64 channels, 32×32, 3×3, padding 1`: how many
# GFLOP is its forward pass (use the formula), and how many times longer than the forward
# will the backward take?

# %%
predicted_gflop = None              # your number: forward GFLOP of N=16, 32→64, 32×32, k=3
predicted_backward_over_forward = None  # your number: backward time / forward time

# %% [markdown]
# We time the forward of a few layer shapes and divide: the achieved GFLOP/s shows how well
# numpy's BLAS is used (the im2col copy and the small matrices cost their share). Then we
# time the backward of the layer you predicted for.

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

_x = Tensor(_rng.standard_normal((16, 32, 32, 32)).astype(np.float32), requires_grad=True)
_w = Tensor(_rng.standard_normal((64, 32, 3, 3)).astype(np.float32), requires_grad=True)
_gflop = 2 * 16 * 64 * 32 * 32 * 32 * 9 / 1e9
_t_fwd = median_time(lambda: conv2d(_x, _w, padding=1), repeats=3)
_t_both = median_time(lambda: conv2d(_x, _w, padding=1).sum().backward(), repeats=3)
_ratio = max(_t_both - _t_fwd, 0.0) / _t_fwd
print(f"\nN=16, 32→64, 32×32, k=3: forward {_gflop:.3f} GFLOP",
      "" if predicted_gflop is None else f"(you predicted {predicted_gflop})")
print(f"forward {_t_fwd * 1e3:.1f} ms, backward ≈ {(_t_both - _t_fwd) * 1e3:.1f} ms: "
      f"backward/forward ≈ {_ratio:.1f}",
      "(no prediction written)" if predicted_backward_over_forward is None
      else f"(you predicted {predicted_backward_over_forward})")

fig, ax = plt.subplots(figsize=(5.5, 3.5))
ax.loglog([r[0] for r in _rows], [r[1] * 1e3 for r in _rows], "o-", label="measured")
_f0, _t0 = _rows[-1][0], _rows[-1][1] * 1e3
ax.loglog([r[0] for r in _rows], [_t0 * r[0] / _f0 for r in _rows], "k:", label="slope 1 (time ∝ FLOPs)")
ax.legend(fontsize=8)
ax.set_xlabel("FLOPs of the forward pass")
ax.set_ylabel("median time (ms)")
ax.set_title("conv2d forward: time grows with FLOPs")
fig.tight_layout()
plt.show()

# %% [markdown]
# **Layout, measured.** The same products in two memory orders, on the benchmark's layer
# (32 images, 3→16 channels, 32×32, 3×3): `np.tensordot` (one big GEMM, after copying the
# columns and before copying the result into the output's order) against `np.matmul`
# broadcasting the weight over the images (one GEMM per image, in the output's order
# already). Predict first: which is faster, and does the answer change for the weight
# gradient, where tensordot also has to bring the images and positions together?

# %%
predicted_faster_layout = None  # your guess: "tensordot" or "matmul"

# %%
_x = _rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
_w2 = _rng.standard_normal((16, 27)).astype(np.float32)
_cols = im2col(_x, 3, 1, 1)                                   # (N, 27, L)
_g = _rng.standard_normal((32, 16, 32 * 32)).astype(np.float32)  # an upstream gradient (N, C_out, L)
_layouts = [
    ("forward", lambda: np.tensordot(_w2, _cols, axes=(1, 1)).transpose(1, 0, 2).reshape(32, 16, 32, 32),
     lambda: (_w2 @ _cols).reshape(32, 16, 32, 32)),
    ("weight gradient", lambda: np.tensordot(_g, _cols, axes=([0, 2], [0, 2])),
     lambda: (_g @ _cols.transpose(0, 2, 1)).sum(axis=0)),
]
for _what, _td, _mm in _layouts:
    assert_close(_td(), _mm(), rtol=1e-3, atol=1e-3, what=f"{_what}: both layouts compute the same numbers")
    _t_td, _t_mm = median_time(_td, repeats=5), median_time(_mm, repeats=5)
    print(f"{_what:16s} tensordot {_t_td * 1e3:6.2f} ms   matmul {_t_mm * 1e3:6.2f} ms   "
          f"tensordot / matmul = {_t_td / _t_mm:.1f}")
print("(no prediction written)" if predicted_faster_layout is None
      else f"you predicted: {predicted_faster_layout}")

# %% [markdown]
# On the machines we tried, matmul won both, the weight gradient by the larger factor: the
# arithmetic is the same, and what differs is how many bytes are copied to bring the
# operands into the order one GEMM wants. (A multi-threaded BLAS can shift the balance for
# large layers: threads speed up the GEMMs, not the copies.)
#
# What to expect, and why your figures can differ. The FLOP count is exact; the time is not
# a property of the layer but of the machine. Compare the GFLOP/s column across the rows:
# for the tiny layers of our digits CNN, fixed costs (Python, the argument checks, the
# im2col copy, small allocations) are a large part of the time; for the large layers the
# matrix multiply dominates, and time grows about in proportion to FLOPs (a slope of about
# one on the log-log plot). Whether the large layers reach a much higher rate depends on
# the BLAS library: with several threads they usually do; with one thread (for example
# `OPENBLAS_NUM_THREADS=1`) the rate may hardly change, and the im2col copy, which grows
# with the layer too, can even pull it down. Expect the backward to cost more than the
# forward, by a factor the cell above measured on this machine: it does twice the matrix
# multiplies, recomputes the columns, and scatters with col2im, which touches every entry of
# the column matrix once more. The BLAS library, its thread count, the cache sizes and the load
# of the machine all move these numbers. The time of a whole network is roughly its FLOPs
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
# - **Transposed convolution** (`F.conv_transpose2d`, `nn.ConvTranspose2d`; sometimes called
#   "deconvolution"), the upsampling layer of decoders, GAN generators and U-Nets, is your
#   backward's input gradient run forward on data: a 4×4 map, a 3×3 kernel and stride 2
#   grow to 9×9. tinytorch provides it on your `im2col` and `col2im`
#   (`tinytorch/nn/conv_transpose.py`, hand-written); its tests check that it is the
#   transpose of your `conv2d`, $\langle \mathrm{conv2d}(x), y\rangle = \langle x,
#   \mathrm{conv\_transpose2d}(y)\rangle$ for every $x$ and $y$, and that it matches PyTorch.
# - `max_pool2d(..., return_indices=True)` returns the same flat indices as ours;
#   `nn.MaxUnpool2d` uses them. `BatchNorm2d` also exists fused into the preceding conv at
#   inference time: in eval mode it is an affine map per channel, so it can be folded into
#   the conv's weight and bias for free.
#
# If PyTorch is installed, compare directly (skipped otherwise). The timing line compares
# the fixed cost of one call on a tiny input, not the arithmetic: it says little about
# large layers, and PyTorch's figure can be much larger than you expect on a loaded
# machine, where its pool of threads competes with other processes for the cores.

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
# - A small CNN built from these reaches ≥ 97% on the digits in a few epochs (the cell
#   printed how long it took on your machine).
#
# Run `tito test module 09` to check your work against the full test suite.

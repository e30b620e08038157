"""Transposed 2-D convolution (torch.nn.functional.conv_transpose2d, torch.nn.ConvTranspose2d),
hand-written on module 09's im2col and col2im: it is conv2d's input-gradient map run forward
on data (the upsampling layer of decoders, GAN generators and U-Nets). No student writes it;
its forward and backward would show the answers to module 09's conv2d exercises, so it is
kept out of the notebook.

Output size: H_out = (H - 1)·s - 2p + d·(k - 1) + 1 + output_padding, output_padding below
the stride or the dilation (it picks among the sizes a strided conv2d maps to one size)."""
import numpy as np

from tinytorch._tensor import ShapeError, apply, cat, zeros
from tinytorch.autograd import backward_rule
from tinytorch.nn.conv import Conv2d, _check_float, _check_groups, _check_image_batch, _dilated, _pair, col2im, im2col
from tinytorch.nn.layers import Module, Parameter

__all__ = ["conv_transpose2d", "ConvTranspose2d"]


def _transposed_span(x, weight, stride):
    """The (height, width) a transposed conv covers before any padding is cropped: the input's
    last pixel lands at (H - 1)·s, and the kernel reaches k - 1 further."""
    return tuple((n - 1) * s + k for n, s, k in zip(x.shape[2:], stride, weight.shape[2:]))


def _conv_transpose2d_forward(x, weight, bias=None, *, stride, padding, output_size):
    """Forward of the op "conv_transpose2d": conv2d's input gradient, taken of x."""
    xa, wa = x.numpy(), weight.numpy()
    N, C_in, H, W = xa.shape
    C_out, kh, kw = wa.shape[1:]
    cols = wa.reshape(C_in, -1).T @ xa.reshape(N, C_in, H * W)  # (N, C_out·kh·kw, H·W), as in your backward
    full = col2im(cols, _transposed_span(xa, wa, stride), (kh, kw), stride)
    out = np.zeros((N, C_out) + tuple(output_size), dtype=full.dtype)  # crop the padding; output_padding adds zeros
    h, w = min(output_size[0], full.shape[2] - padding[0]), min(output_size[1], full.shape[3] - padding[1])
    out[:, :, :h, :w] = full[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + w]
    if bias is not None:
        out += bias.numpy()[:, None, None]
    return out


@backward_rule("conv_transpose2d")
def _conv_transpose2d_backward(node, grad):
    x, w = node.inputs[0].numpy(), node.inputs[1].numpy()
    stride, padding = node.attrs["stride"], node.attrs["padding"]
    N, C_in = x.shape[:2]
    span = _transposed_span(x, w, stride)
    g = np.zeros(grad.shape[:2] + span, dtype=grad.dtype)  # the gradient, back in the uncropped frame
    h, wd = min(grad.shape[2], span[0] - padding[0]), min(grad.shape[3], span[1] - padding[1])
    g[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd] = grad[:, :, :h, :wd]
    gcols = im2col(g, w.shape[2:], stride)  # (N, C_out·kh·kw, H·W): conv2d's forward, on the gradient
    gx = (w.reshape(C_in, -1) @ gcols).reshape(x.shape)
    gw = (x.reshape(N, C_in, -1) @ gcols.transpose(0, 2, 1)).sum(axis=0).reshape(w.shape)
    if len(node.inputs) == 3:
        return gx, gw, grad.sum(axis=(0, 2, 3))
    return gx, gw


def _transposed_output_padding(op, input_size, weight, stride, padding, dilation, output_size):
    """The output_padding that gives `output_size` ((H, W), or the whole (N, C, H, W)); a
    ValueError naming the sizes that are possible when it is none of them."""
    output_size = tuple(output_size)[-2:]
    smallest = [(n - 1) * s - 2 * p + d * (k - 1) + 1
                for n, s, p, d, k in zip(input_size, stride, padding, dilation, weight.shape[2:])]
    extra = tuple(int(o) - m for o, m in zip(output_size, smallest))
    if len(extra) != 2 or any(not 0 <= e < max(s, d) for e, s, d in zip(extra, stride, dilation)):
        ranges = [f"{m} to {m + max(s, d) - 1}" for m, s, d in zip(smallest, stride, dilation)]
        raise ValueError(f"{op}: output_size {output_size} is not possible for an input of size {tuple(input_size)}: "
                         f"the height can be {ranges[0]}, the width {ranges[1]}")
    return extra


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 2-D convolution of input (N, C_in, H, W) with weight
    (C_in, C_out / groups, kh, kw) and optional bias (C_out,)
    (torch.nn.functional.conv_transpose2d): the input-gradient map of the conv2d with the
    same weight and geometry. Output (N, C_out, H_out, W_out) as in the formula above."""
    op = "conv_transpose2d"
    _check_image_batch(op, input)
    _check_float(op, "weight", weight, input.dtype)
    if weight.ndim != 4:
        raise ShapeError(f"{op}: weight must be 4-D (C_in, C_out / groups, kh, kw), got shape {weight.shape}")
    _check_groups(groups, op)
    if input.shape[1] != weight.shape[0] or weight.shape[0] % groups:
        raise ShapeError(f"{op}: input of shape {input.shape} has {input.shape[1]} channels, but the weight of "
                         f"shape {weight.shape} expects C_in = {weight.shape[0]} (its first dimension)"
                         + (f", divisible by groups={groups}" if groups > 1 else ""))
    stride, padding = _pair(stride, "stride", op), _pair(padding, "padding", op)
    output_padding, dilation = _pair(output_padding, "output_padding", op), _pair(dilation, "dilation", op)
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise ValueError(f"{op}: stride {stride} and dilation {dilation} must be positive, padding {padding} "
                         f"and output_padding {output_padding} non-negative")
    if any(o >= max(s, d) for o, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than the stride {stride} or "
                         f"the dilation {dilation} (PyTorch's rule: it only picks among the sizes a strided "
                         "conv2d maps to one size)")
    c_out = weight.shape[1] * groups
    if bias is not None:
        _check_float(op, "bias", bias, input.dtype)
        if bias.shape != (c_out,):
            raise ShapeError(f"{op}: bias must have shape ({c_out},) (one per output channel), got {bias.shape}")
    if groups > 1:
        c_in, c_g = weight.shape[0] // groups, weight.shape[1]
        return cat([conv_transpose2d(input[:, g * c_in:(g + 1) * c_in], weight[g * c_in:(g + 1) * c_in],
                                     None if bias is None else bias[g * c_g:(g + 1) * c_g],
                                     stride, padding, output_padding, 1, dilation)
                    for g in range(groups)], dim=1)
    if dilation != (1, 1):
        weight = _dilated(weight, dilation)
    output_size = tuple((n - 1) * s - 2 * p + k + o for n, s, p, k, o
                        in zip(input.shape[2:], stride, padding, weight.shape[2:], output_padding))
    if min(output_size) < 1:
        raise ShapeError(f"{op}: input {input.shape}, weight {weight.shape}, stride {stride}, padding {padding}: "
                         f"the output would be {output_size}, too small (the padding crops more than there is)")
    inputs = (input, weight) if bias is None else (input, weight, bias)
    return apply(op, _conv_transpose2d_forward, *inputs, stride=stride, padding=padding, output_size=output_size)





class ConvTranspose2d(Module):
    """Transposed 2-D convolution layer (torch.nn.ConvTranspose2d): weight
    (in, out / groups, kh, kw) and bias (out,) or None, initialised by PyTorch's rule for
    every convolution (Conv2d.reset_parameters; the fan-in PyTorch computes from this
    layout is (out / groups)·kh·kw). forward(input, output_size=None) is conv_transpose2d;
    output_size picks the output_padding."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", dtype=None):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size", "ConvTranspose2d")
        self.stride, self.padding = _pair(stride, "stride", "ConvTranspose2d"), _pair(padding, "padding", "ConvTranspose2d")
        self.output_padding = _pair(output_padding, "output_padding", "ConvTranspose2d")
        self.dilation, self.groups = _pair(dilation, "dilation", "ConvTranspose2d"), groups
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d: only padding_mode='zeros' is supported (as in PyTorch), "
                             f"got {padding_mode!r}")
        self.padding_mode = padding_mode
        _check_groups(groups, "ConvTranspose2d")
        if self.in_channels % groups or self.out_channels % groups:
            raise ValueError(f"ConvTranspose2d: groups={groups!r} must divide in_channels ({self.in_channels}) "
                             f"and out_channels ({self.out_channels})")
        self.weight = Parameter(zeros(self.in_channels, self.out_channels // groups, *self.kernel_size, dtype=dtype))
        if bias:
            self.bias = Parameter(zeros(self.out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters  # PyTorch's _ConvNd rule, one for every convolution

    def forward(self, input, output_size=None):
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = _transposed_output_padding("ConvTranspose2d", input.shape[2:], self.weight, self.stride,
                                                        self.padding, self.dilation, output_size)
        return conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                self.groups, self.dilation)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        for name, default in (("padding", (0, 0)), ("output_padding", (0, 0)), ("dilation", (1, 1))):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")



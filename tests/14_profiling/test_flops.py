"""The FLOP formulas equal hand counts, and PyTorch's FlopCounterMode on matmuls and convs."""
import numpy as np
import pytest
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import functional as F
from tinytorch.profiler import attention_flops, conv2d_flops, layer_norm_flops, matmul_flops, profile, softmax_flops


@pytest.mark.parametrize("a,b,expected", [
    ((3, 4), (4, 5), 2 * 3 * 4 * 5),
    ((4,), (4, 5), 2 * 4 * 5),
    ((3, 4), (4,), 2 * 3 * 4),
    ((4,), (4,), 2 * 4),
    ((2, 1, 3, 4), (6, 4, 5), 2 * 12 * 3 * 4 * 5),
    ((7, 3, 4), (4, 5), 2 * 7 * 3 * 4 * 5),
    ((5,), (2, 5, 3), 2 * 2 * 5 * 3),
    ((3, 2, 4), (3, 4, 5), 2 * 3 * 2 * 4 * 5),  # equal batches broadcast to one: 3 products, not 9
])
def test_matmul_flops_hand_counts(a, b, expected):
    got = matmul_flops(a, b)
    assert got == expected and isinstance(got, int), f"expected the int {expected} for {a} @ {b}, got {got!r}"


def test_matmul_flops_inner_mismatch_names_shapes():
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 6\)"):
        matmul_flops((3, 4), (5, 6))


def test_matmul_flops_batches_that_do_not_broadcast_raise_the_shape_error():
    try:
        matmul_flops((2, 3, 4), (5, 4, 6))
    except tt.ShapeError:
        return
    except Exception as exc:
        pytest.fail(f"batches 2 and 5 do not broadcast: expected broadcast_shapes' ShapeError (module 01's), "
                    f"got {type(exc).__name__}: {exc}")
    pytest.fail("batches 2 and 5 do not broadcast: expected broadcast_shapes' ShapeError, nothing was raised")


@pytest.mark.parametrize("inp,w,stride,padding,bias,expected", [
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, True, 2 * 4 * 27 * 128 + 2 * 4 * 64),
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, False, 2 * 4 * 27 * 128),
    ((1, 2, 9, 7), (5, 2, 3, 2), 2, 0, False, 2 * 5 * 12 * (4 * 3)),
    ((1, 2, 9, 7), (5, 2, 3, 2), 2, 0, True, 2 * 5 * 12 * (4 * 3) + 5 * (4 * 3)),  # bias on the 4x3 output
    ((1, 1, 5, 5), (1, 1, 3, 3), (2, 1), (1, 0), False, 2 * 9 * 9),
    ((3, 2, 6, 6), (4, 2, 1, 1), 1, 0, True, 2 * 4 * 2 * 108 + 3 * 4 * 36),
    ((1, 2, 9, 11), (3, 2, 3, 5), (2, 3), (1, 2), False, 2 * 3 * 30 * (5 * 4)),  # every width term differs
    ((1, 1, 10, 5), (1, 1, 3, 3), 2, 0, False, 2 * 9 * (4 * 2)),  # 3.5 steps fit: H_out 4 (floor), not 5
])
def test_conv2d_flops_hand_counts(inp, w, stride, padding, bias, expected):
    got = conv2d_flops(inp, w, stride, padding, bias)
    assert got == expected, f"expected {expected} for input {inp}, weight {w}, stride {stride}, padding {padding}, bias {bias}; got {got}"


def test_conv2d_flops_channel_mismatch():
    with pytest.raises(ValueError, match=r"\(2, 4, 3, 3\)"):
        conv2d_flops((1, 3, 5, 5), (2, 4, 3, 3))


@pytest.mark.parametrize("shape,dim,log,expected", [
    ((4, 10), 1, False, 4 * 50), ((4, 10), -1, False, 200), ((4, 10), 0, False, 10 * 20),
    ((2, 3, 7), 1, True, 14 * 16), ((6,), 0, True, 31), ((0, 5), 1, False, 0), ((5, 0), 1, False, 0), ((), 0, False, 5),
])
def test_softmax_flops_hand_counts(shape, dim, log, expected):
    got = softmax_flops(shape, dim, log=log)
    assert got == expected, f"expected {expected} for softmax(log={log}) of {shape} over dim {dim}, got {got}"
    assert type(got) is int, f"a FLOP count is a Python int (exact however large), got {type(got).__name__}"


@pytest.mark.parametrize("shape,norm,affine,expected", [
    ((6, 8), (8,), True, 6 * (45 + 16)), ((6, 8), (8,), False, 6 * 45),
    ((2, 3, 4, 5), (4, 5), True, 6 * (105 + 40)), ((0, 4), (4,), True, 0), ((3, 0), (0,), True, 0),
])
def test_layer_norm_flops_hand_counts(shape, norm, affine, expected):
    got = layer_norm_flops(shape, norm, affine)
    assert got == expected, f"expected {expected} for layer_norm of {shape} over {norm} (affine={affine}), got {got}"
    assert type(got) is int, f"a FLOP count is a Python int (exact however large), got {type(got).__name__}"


def test_attention_flops_hand_count():
    L, S, E, Ev = 4, 6, 8, 3
    expected = 5 * (2 * L * S * E + L * S + 5 * L * S + 2 * L * S * Ev)
    got = attention_flops(L, S, E, Ev, batch=5)
    assert got == expected, f"expected {expected} for L=4, S=6, E=8, Ev=3 on 5 slices, got {got}"
    assert attention_flops(4, 6, 8) == 2 * 192 * 2 + 24 * 6, f"expected Ev to default to E, got {attention_flops(4, 6, 8)}"


@pytest.mark.parametrize("causal", [False, True])
def test_attention_flops_equal_profiled_sdpa(causal):
    tt.manual_seed(3)
    q, k, v = tt.randn(2, 2, 5, 8), tt.randn(2, 2, 7 if not causal else 5, 8), tt.randn(2, 2, 7 if not causal else 5, 6)
    with profile() as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    got = sum(e.flops for e in prof.events())
    expected = attention_flops(5, k.shape[-2], 8, 6, batch=4)
    assert got == expected, f"expected the profiled ops to add up to attention_flops = {expected}, got {got}"


def test_matmul_and_conv_flops_match_torch_flop_counter(torch):
    FlopCounterMode = torch_reference.companion_module(torch, "torch.utils.flop_counter").FlopCounterMode
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3, stride=2, padding=1, bias=False), torch.nn.Flatten(),
                                 torch.nn.Linear(5 * 16, 7, bias=False))
    ours = nn.Sequential(nn.Conv2d(3, 5, 3, stride=2, padding=1, bias=False), nn.Flatten(), nn.Linear(5 * 16, 7, bias=False))
    with FlopCounterMode(display=False) as counter:
        theirs(torch.tensor(x))
    with profile() as prof:
        ours(tt.tensor(x))
    got = sum(e.flops for e in prof.events() if e.name in ("matmul", "conv2d"))
    expected = counter.get_total_flops()  # asked once: the recorded answers hold one call
    assert got == expected, f"expected torch's forward count {expected}, got {got}"


def test_mlp_forward_backward_flops_match_torch_flop_counter(torch):
    x = np.random.default_rng(1).standard_normal((6, 10)).astype(np.float32)
    FlopCounterMode = torch_reference.companion_module(torch, "torch.utils.flop_counter").FlopCounterMode
    theirs = torch.nn.Sequential(torch.nn.Linear(10, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    ours = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 4))
    with FlopCounterMode(display=False) as counter:
        theirs(torch.tensor(x)).sum().backward()
    with profile() as prof:
        ours(tt.tensor(x)).sum().backward()
    got = sum(e.flops for e in prof.events() if e.name in ("matmul", "MatmulBackward"))
    expected = counter.get_total_flops()  # asked once: the recorded answers hold one call
    assert got == expected, f"expected torch's forward+backward count {expected}, got {got}"


def test_cnn_forward_backward_flops_match_torch_flop_counter(torch):
    """A first conv computes no gradient for its images, in either framework."""
    x = np.random.default_rng(2).standard_normal((3, 1, 8, 8)).astype(np.float32)
    FlopCounterMode = torch_reference.companion_module(torch, "torch.utils.flop_counter").FlopCounterMode
    theirs = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1, bias=False), torch.nn.ReLU(),
                                 torch.nn.Flatten(), torch.nn.Linear(4 * 64, 5, bias=False))
    ours = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 64, 5, bias=False))
    with FlopCounterMode(display=False) as counter:
        theirs(torch.tensor(x)).sum().backward()
    with profile() as prof:
        ours(tt.tensor(x)).sum().backward()
    big = ("matmul", "conv2d", "MatmulBackward", "Conv2DBackward")
    got = sum(e.flops for e in prof.events() if e.name in big)
    expected = counter.get_total_flops()  # asked once: the recorded answers hold one call
    assert got == expected, f"expected torch's forward+backward count {expected}, got {got}"

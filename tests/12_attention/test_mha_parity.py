"""MultiheadAttention with weights copied from torch.nn.MultiheadAttention: outputs, averaged
weights and the gradients of every parameter and input equal PyTorch's."""
import numpy as np

import tinytorch as tt
from tinytorch import nn


def pair(torch, E=8, H=2, bias=True, batch_first=True, seed=0):
    """Our layer and PyTorch's with the same float64 weights (non-zero biases)."""
    torch.manual_seed(seed)
    theirs = torch.nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first, dtype=torch.float64)
    if bias:
        with torch.no_grad():
            theirs.in_proj_bias.normal_()
            theirs.out_proj.bias.normal_()
    ours = nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first, dtype=tt.float64)
    ours.load_state_dict({name: tt.tensor(p.detach().numpy().copy()) for name, p in theirs.state_dict().items()})
    return ours, theirs


def compare(torch, ours, theirs, shapes, masks=None, seed=1, self_attention=False, **kwargs):
    masks = masks or {}
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(s) for s in shapes]
    if self_attention:
        data = [data[0]] * 3
    our_in = [tt.tensor(d, requires_grad=True) for d in data]
    their_in = [torch.tensor(d, requires_grad=True) for d in data]
    our_masks = {k: tt.tensor(m) for k, m in masks.items()}
    their_masks = {k: torch.from_numpy(m) for k, m in masks.items()}
    out, w = ours(*our_in, **our_masks, **kwargs)
    tkwargs = dict(kwargs)
    if tkwargs.get("is_causal") and "attn_mask" not in masks:   # PyTorch wants the mask with the hint
        L = data[0].shape[-2] if theirs.batch_first or data[0].ndim == 2 else data[0].shape[0]
        their_masks["attn_mask"] = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
    tout, tw = theirs(*their_in, **their_masks, **tkwargs)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    if tw is None:
        assert w is None
    else:
        assert w.shape == tuple(tw.shape)
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)
    up = rng.standard_normal(tuple(tout.shape))
    loss = (out * tt.tensor(up)).sum()
    tloss = (tout * torch.from_numpy(up)).sum()
    if tw is not None:
        up_w = rng.standard_normal(tuple(tw.shape))
        loss = loss + (w * tt.tensor(up_w)).sum()
        tloss = tloss + (tw * torch.from_numpy(up_w)).sum()
    loss.backward()
    tloss.backward()
    their_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), their_params[name].grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=f"gradient of {name}")
    for i, (o, t) in enumerate(zip(our_in, their_in)):
        if self_attention and i > 0:
            break
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=f"gradient of input {i}")
    return out, w


def test_parameters_match_torch_names_and_shapes(torch):
    ours = nn.MultiheadAttention(12, 3)
    theirs = torch.nn.MultiheadAttention(12, 3)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_self_attention(torch):
    ours, theirs = pair(torch)
    compare(torch, ours, theirs, [(3, 5, 8)], self_attention=True)


def test_cross_attention_different_lengths(torch):
    ours, theirs = pair(torch, E=12, H=4, seed=2)
    compare(torch, ours, theirs, [(2, 4, 12), (2, 7, 12), (2, 7, 12)])


def test_key_padding_mask(torch):
    ours, theirs = pair(torch, seed=3)
    kpm = np.zeros((3, 6), dtype=bool)
    kpm[1, 4:] = True
    kpm[2, 1] = True
    _, w = compare(torch, ours, theirs, [(3, 5, 8), (3, 6, 8), (3, 6, 8)], masks={"key_padding_mask": kpm})
    np.testing.assert_array_equal(w.numpy()[1, :, 4:], 0.0)


def test_causal_attn_mask(torch):
    ours, theirs = pair(torch, seed=4)
    mask = np.triu(np.ones((6, 6), dtype=bool), 1)             # True = not allowed
    _, w = compare(torch, ours, theirs, [(2, 6, 8)], masks={"attn_mask": mask}, self_attention=True)
    assert np.all(np.triu(w.numpy()[0], 1) == 0)


def test_causal_and_padding_together(torch):
    ours, theirs = pair(torch, seed=5)
    mask = np.triu(np.ones((5, 5), dtype=bool), 1)
    kpm = np.zeros((2, 5), dtype=bool)
    kpm[0, 3:] = True
    compare(torch, ours, theirs, [(2, 5, 8)], masks={"attn_mask": mask, "key_padding_mask": kpm},
            self_attention=True)


def test_float_masks(torch):
    ours, theirs = pair(torch, seed=6)
    rng = np.random.default_rng(7)
    attn = rng.standard_normal((4, 6))
    attn[:, 5] = -np.inf
    kpm = np.where(rng.random((2, 6)) < 0.3, -np.inf, 0.0)
    kpm[:, 0] = 0.0
    compare(torch, ours, theirs, [(2, 4, 8), (2, 6, 8), (2, 6, 8)], masks={"attn_mask": attn, "key_padding_mask": kpm})


def test_per_head_3d_attn_mask(torch):
    ours, theirs = pair(torch, seed=8)
    mask = np.random.default_rng(9).random((2 * 2, 4, 5)) < 0.4
    mask[..., 0] = False
    compare(torch, ours, theirs, [(2, 4, 8), (2, 5, 8), (2, 5, 8)], masks={"attn_mask": mask})


def test_per_head_weights(torch):
    ours, theirs = pair(torch, E=12, H=3, seed=10)
    _, w = compare(torch, ours, theirs, [(2, 4, 12)], self_attention=True, average_attn_weights=False)
    assert w.shape == (2, 3, 4, 4)


def test_need_weights_false(torch):
    ours, theirs = pair(torch, seed=11)
    out, w = compare(torch, ours, theirs, [(2, 4, 8)], self_attention=True, need_weights=False)
    assert w is None and out.shape == (2, 4, 8)


def test_is_causal_builds_the_mask(torch):
    ours, theirs = pair(torch, seed=12)
    compare(torch, ours, theirs, [(2, 5, 8)], self_attention=True, is_causal=True)


def test_no_bias(torch):
    ours, theirs = pair(torch, bias=False, seed=13)
    assert ours.in_proj_bias is None and ours.out_proj.bias is None
    compare(torch, ours, theirs, [(2, 3, 8), (2, 4, 8), (2, 4, 8)])


def test_unbatched(torch):
    ours, theirs = pair(torch, seed=14)
    out, w = compare(torch, ours, theirs, [(5, 8), (6, 8), (6, 8)],
                     masks={"key_padding_mask": np.array([False] * 5 + [True])})
    assert out.shape == (5, 8) and w.shape == (5, 6)


def test_sequence_first(torch):
    ours, theirs = pair(torch, batch_first=False, seed=15)
    out, w = compare(torch, ours, theirs, [(5, 2, 8), (6, 2, 8), (6, 2, 8)])
    assert out.shape == (5, 2, 8) and w.shape == (2, 5, 6)


def test_float32(torch):
    torch.manual_seed(16)
    theirs = torch.nn.MultiheadAttention(8, 4, batch_first=True)
    ours = nn.MultiheadAttention(8, 4)
    ours.load_state_dict({n: tt.tensor(p.detach().numpy().copy()) for n, p in theirs.state_dict().items()})
    x = np.random.default_rng(17).standard_normal((2, 5, 8)).astype(np.float32)
    out, w = ours(tt.tensor(x), tt.tensor(x), tt.tensor(x))
    tout, tw = theirs(*(torch.from_numpy(x),) * 3)
    assert out.dtype == tt.float32
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-4, atol=1e-6)

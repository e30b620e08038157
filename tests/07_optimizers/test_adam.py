"""Adam and AdamW equal torch.optim step by step: betas, eps, L2 and decoupled decay, AMSGrad."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.optim import Adam, AdamW

ADAM = [
    dict(),
    dict(lr=0.01),
    dict(lr=0.05, betas=(0.8, 0.99)),
    dict(lr=0.01, eps=1e-3),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.02, amsgrad=True, weight_decay=0.05, betas=(0.5, 0.9)),
    dict(lr=0.01, maximize=True),
    dict(lr=0.01, maximize=True, weight_decay=0.1, amsgrad=True),
]
ADAMW = [
    dict(),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.05, weight_decay=0.5, betas=(0.8, 0.95), eps=1e-6),
    dict(lr=0.01, weight_decay=0.1, amsgrad=True),
    dict(lr=0.01, weight_decay=0.0),
    dict(lr=0.01, weight_decay=0.1, maximize=True),
]


def ids(configs):
    return ["-".join(f"{k}={v}" for k, v in c.items()) or "defaults" for c in configs]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("config", ADAM, ids=ids(ADAM))
def test_adam_matches_torch_every_step(torch, make_pair, config, dtype):
    pair = make_pair(dtype=dtype)
    pair.run(Adam(pair.ours, **config), torch.optim.Adam(pair.theirs, foreach=False, **config))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("config", ADAMW, ids=ids(ADAMW))
def test_adamw_matches_torch_every_step(torch, make_pair, config, dtype):
    pair = make_pair(dtype=dtype)
    pair.run(AdamW(pair.ours, **config), torch.optim.AdamW(pair.theirs, foreach=False, **config))


@pytest.mark.parametrize("cls, config", [("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
                                         ("AdamW", dict(lr=0.01, amsgrad=True))], ids=["Adam", "AdamW"])
def test_adam_state_matches_torch(torch, make_pair, cls, config):
    pair = make_pair(steps=8)
    ours = {"Adam": Adam, "AdamW": AdamW}[cls](pair.ours, **config)
    theirs = getattr(torch.optim, cls)(pair.theirs, foreach=False, **config)
    for k in range(8):
        pair.set_grads(k)
        ours.step()
        theirs.step()
        for p, q in zip(pair.ours, pair.theirs):
            mine, ref = ours.state[p], theirs.state[q]
            assert mine["step"] == k + 1 == int(ref["step"])
            for name in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                assert mine[name].shape == p.shape and mine[name].dtype == p.dtype
                np.testing.assert_allclose(mine[name].numpy(), ref[name].numpy(), rtol=1e-11, atol=1e-14,
                                           err_msg=f"{name} after step {k + 1}")


def test_first_adam_step_is_lr_times_sign():
    # m_hat = g and v_hat = g^2 after one step, so the step is lr * g / (|g| + eps)
    g = np.array([1e-3, 2.0, -5e3, 0.0])
    p = tt.tensor(np.zeros(4), requires_grad=True)
    opt = Adam([p], lr=0.1, eps=1e-8)
    p.grad = tt.tensor(g)
    opt.step()
    np.testing.assert_allclose(p.numpy(), -0.1 * g / (np.abs(g) + 1e-8), rtol=1e-12, atol=1e-300)
    assert set(opt.state[p]) == {"step", "exp_avg", "exp_avg_sq"}


def test_bias_correction_over_steps():
    # a constant gradient c: m_hat = c and v_hat = c^2 exactly at every step (bias correction)
    c = 0.3
    p = tt.tensor([0.0], dtype="float64", requires_grad=True)
    opt = Adam([p], lr=0.01, betas=(0.9, 0.999), eps=0.0)
    for t in range(1, 6):
        p.grad = tt.tensor([c], dtype="float64")
        opt.step()
        np.testing.assert_allclose(opt.state[p]["exp_avg"].numpy(), [c * (1 - 0.9 ** t)], rtol=1e-13)
        np.testing.assert_allclose(opt.state[p]["exp_avg_sq"].numpy(), [c * c * (1 - 0.999 ** t)], rtol=1e-13)
        np.testing.assert_allclose(p.numpy(), [-0.01 * t], rtol=1e-12)


def test_adamw_decouples_weight_decay():
    # zero gradient: Adam's L2 term moves the weight by ~lr (normalised), AdamW multiplies by (1 - lr*wd)
    p = tt.tensor([2.0, -4.0], dtype="float64", requires_grad=True)
    q = tt.tensor([2.0, -4.0], dtype="float64", requires_grad=True)
    adamw = AdamW([p], lr=0.1, weight_decay=0.5)
    adam = Adam([q], lr=0.1, weight_decay=0.5)
    for t in range(3):
        p.grad = tt.tensor([0.0, 0.0], dtype="float64")
        q.grad = tt.tensor([0.0, 0.0], dtype="float64")
        adamw.step()
        adam.step()
    np.testing.assert_allclose(p.numpy(), np.array([2.0, -4.0]) * (1 - 0.1 * 0.5) ** 3, rtol=1e-13)
    np.testing.assert_allclose(q.numpy(), [2.0 - 0.3, -4.0 + 0.3], rtol=1e-3)  # ~lr per step, whatever wd
    assert AdamW([p]).defaults["weight_decay"] == 0.01 and Adam([q]).defaults["weight_decay"] == 0


def test_amsgrad_keeps_the_running_maximum():
    p = tt.tensor([0.0], dtype="float64", requires_grad=True)
    opt = Adam([p], lr=0.01, betas=(0.0, 0.5), amsgrad=True)
    seen = []
    v = 0.0
    for g in [3.0, 0.1, 0.1, 2.0]:
        p.grad = tt.tensor([g], dtype="float64")
        opt.step()
        v = 0.5 * v + 0.5 * g * g
        seen.append(v)
        np.testing.assert_allclose(opt.state[p]["max_exp_avg_sq"].numpy(), [max(seen)], rtol=1e-14)
        np.testing.assert_allclose(opt.state[p]["exp_avg_sq"].numpy(), [v], rtol=1e-14)


def test_state_is_created_lazily_with_the_parameters_dtype():
    p = tt.tensor(np.ones((2, 2), dtype=np.float32), requires_grad=True)
    q = tt.tensor(np.ones(3), requires_grad=True)
    opt = Adam([p, q], lr=0.1)
    assert not opt.state.get(p) and not opt.state.get(q)
    p.grad = tt.tensor(np.ones((2, 2), dtype=np.float32))
    opt.step()
    assert opt.state[p]["exp_avg"].dtype == tt.float32 and opt.state[p]["exp_avg"].shape == (2, 2)
    assert not opt.state.get(q), "a parameter that never had a gradient gets no state"
    assert not opt.state[p]["exp_avg"].requires_grad and opt.state[p]["exp_avg"] is not p
    assert math.isclose(float(p.numpy()[0, 0]), 1 - 0.1, rel_tol=1e-6)

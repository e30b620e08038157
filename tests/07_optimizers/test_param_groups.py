"""Parameter groups, defaults, add_param_group, skipped parameters, zero_grad, nn parameters."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.optim import SGD, Adam, AdamW, Optimizer


def test_one_group_from_an_iterable_with_defaults_filled():
    ps = [tt.tensor([1.0], requires_grad=True), tt.tensor([2.0], requires_grad=True)]
    opt = SGD(iter(ps), lr=0.3, momentum=0.5)
    assert isinstance(opt, Optimizer)
    assert len(opt.param_groups) == 1
    group = opt.param_groups[0]
    assert isinstance(group["params"], list) and all(a is b for a, b in zip(group["params"], ps))
    assert {k: group[k] for k in ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")} == \
        dict(lr=0.3, momentum=0.5, dampening=0, weight_decay=0, nesterov=False, maximize=False)
    assert opt.defaults["lr"] == 0.3


def test_group_options_override_defaults_and_callers_dict_is_untouched():
    a, b = tt.tensor([1.0], requires_grad=True), tt.tensor([2.0], requires_grad=True)
    spec = [{"params": [a]}, {"params": b, "lr": 0.5, "betas": (0.5, 0.6)}]
    opt = Adam(spec, lr=0.1, weight_decay=0.2)
    g0, g1 = opt.param_groups
    assert g0["lr"] == 0.1 and g0["betas"] == (0.9, 0.999) and g0["weight_decay"] == 0.2
    assert g1["lr"] == 0.5 and g1["betas"] == (0.5, 0.6) and g1["weight_decay"] == 0.2
    assert g1["params"][0] is b, "a single tensor as a group's params becomes a one-element list"
    assert spec[0] == {"params": [a]} and set(spec[1]) == {"params", "lr", "betas"}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_groups_with_different_options_match_torch(torch, make_pair, dtype):
    pair = make_pair(dtype=dtype)
    a, b = pair.ours, pair.theirs
    ours = SGD([{"params": a[:2]}, {"params": a[2:], "lr": 0.01, "nesterov": True, "momentum": 0.5}],
               lr=0.1, momentum=0.9, weight_decay=0.01)
    theirs = torch.optim.SGD([{"params": b[:2]}, {"params": b[2:], "lr": 0.01, "nesterov": True, "momentum": 0.5}],
                             lr=0.1, momentum=0.9, weight_decay=0.01, foreach=False)
    pair.run(ours, theirs)


def test_adam_groups_match_torch(torch, make_pair):
    pair = make_pair()
    a, b = pair.ours, pair.theirs
    ours = AdamW([{"params": a[:1], "lr": 0.1, "amsgrad": True}, {"params": a[1:], "weight_decay": 0.3}], lr=0.01)
    theirs = torch.optim.AdamW([{"params": b[:1], "lr": 0.1, "amsgrad": True}, {"params": b[1:], "weight_decay": 0.3}],
                               lr=0.01, foreach=False)
    pair.run(ours, theirs)


def test_lr_changed_in_a_group_is_used_by_the_next_step(torch, make_pair):
    pair = make_pair()
    ours = SGD(pair.ours, lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD(pair.theirs, lr=0.1, momentum=0.9, foreach=False)
    pair.run(ours, theirs, steps=4)
    ours.param_groups[0]["lr"] = 0.02
    theirs.param_groups[0]["lr"] = 0.02
    pair.run(ours, theirs, start=4)


def test_add_param_group_during_training_matches_torch(torch, make_pair):
    pair = make_pair()
    a, b = pair.ours, pair.theirs
    ours = Adam(a[:2], lr=0.05)
    theirs = torch.optim.Adam(b[:2], lr=0.05, foreach=False)
    frozen = lambda k: (2, 3) if k < 5 else ()  # the last two get gradients only after being added
    pair.run(ours, theirs, steps=5, skip=frozen)
    ours.add_param_group({"params": a[2:], "lr": 0.01})
    theirs.add_param_group({"params": b[2:], "lr": 0.01})
    assert ours.param_groups[1]["lr"] == 0.01 and ours.param_groups[1]["betas"] == (0.9, 0.999)
    pair.run(ours, theirs, start=5, skip=frozen)


@pytest.mark.parametrize("make", ["sgd", "adam"])
def test_parameters_without_grad_are_skipped_like_torch(torch, make_pair, make):
    pair = make_pair()
    if make == "sgd":
        ours = SGD(pair.ours, lr=0.1, momentum=0.9, weight_decay=0.1)
        theirs = torch.optim.SGD(pair.theirs, lr=0.1, momentum=0.9, weight_decay=0.1, foreach=False)
    else:
        ours = Adam(pair.ours, lr=0.05, weight_decay=0.1)
        theirs = torch.optim.Adam(pair.theirs, lr=0.05, weight_decay=0.1, foreach=False)
    # parameter 1 never has a gradient; parameter 0 misses steps 3-6; parameter 3 misses step 1
    skip = lambda k: {1} | ({0} if 3 <= k <= 6 else set()) | ({3} if k == 0 else set())
    before = pair.ours[1].numpy().copy()
    pair.run(ours, theirs, skip=skip)
    np.testing.assert_array_equal(pair.ours[1].numpy(), before)
    assert not ours.state.get(pair.ours[1])


def test_skipped_parameter_keeps_its_buffers_untouched():
    p = tt.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9)
    p.grad = tt.tensor([1.0, 1.0], dtype="float64")
    opt.step()
    buf = opt.state[p]["momentum_buffer"].numpy().copy()
    value = p.numpy().copy()
    p.grad = None
    opt.step()
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(), buf)
    np.testing.assert_array_equal(p.numpy(), value)


def test_zero_grad_to_none_and_to_zeros():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    b = tt.tensor([[3.0]], requires_grad=True)
    c = tt.tensor(4.0, requires_grad=True)
    opt = SGD([{"params": [a]}, {"params": [b, c], "lr": 0.5}], lr=0.1)
    ga = tt.tensor([5.0, 6.0])
    a.grad, b.grad = ga, tt.tensor([[7.0]])
    opt.zero_grad(set_to_none=False)
    assert a.grad is ga, "set_to_none=False keeps the same gradient tensor"
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(b.grad.numpy(), [[0.0]])
    assert c.grad is None
    opt.zero_grad()
    assert a.grad is None and b.grad is None and c.grad is None


def test_zero_grad_default_matches_torch(torch):
    p = tt.tensor([1.0], requires_grad=True)
    q = torch.tensor([1.0], requires_grad=True)
    p.grad, q.grad = tt.tensor([2.0]), torch.tensor([2.0])
    SGD([p], lr=0.1).zero_grad()
    torch.optim.SGD([q], lr=0.1).zero_grad()
    assert p.grad is None and q.grad is None


def test_nn_module_parameters_match_torch(torch):
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for q, p in zip(ref.parameters(), model.parameters()):
            q.copy_(torch.tensor(p.numpy()))
    ours = AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    theirs = torch.optim.AdamW(ref.parameters(), lr=0.01, weight_decay=0.1, foreach=False)
    rng = np.random.default_rng(0)
    params = list(model.parameters())
    assert len(params) == 4 and all(isinstance(p, nn.Parameter) for p in params)
    for _ in range(10):
        for p, q in zip(params, ref.parameters()):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad, q.grad = tt.tensor(g), torch.tensor(g)
        ours.step()
        theirs.step()
        for p, q in zip(params, ref.parameters()):
            assert isinstance(p, nn.Parameter)
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=2e-5, atol=2e-6)


def test_training_loop_with_backward_lowers_the_loss():
    tt.manual_seed(0)
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal((32, 3)).astype(np.float32))
    w_true = np.array([[1.0], [-2.0], [0.5]], dtype=np.float32)
    y = tt.tensor(x.numpy() @ w_true + 0.3)
    model = nn.Linear(3, 1)
    opt = SGD(model.parameters(), lr=0.1, momentum=0.5)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 1e-6 * losses[0]
    np.testing.assert_allclose(model.weight.numpy(), w_true.T, atol=1e-3)
    np.testing.assert_allclose(model.bias.numpy(), [0.3], atol=1e-3)

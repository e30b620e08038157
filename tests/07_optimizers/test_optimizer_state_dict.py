"""Optimizer.state_dict / load_state_dict: format, snapshot, exact resumption (vs torch), errors."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.optim import SGD, Adam, AdamW


def make_params(seed=0, shapes=((3, 2), (2,), ())):
    rng = np.random.default_rng(seed)
    return [tt.tensor(np.asarray(rng.standard_normal(s)), requires_grad=True) for s in shapes]


def feed(opt, params, steps, seed=1):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for p in params:
            p.grad = tt.tensor(np.asarray(rng.standard_normal(p.shape)))
        opt.step()


def test_format_positions_options_and_state():
    ps = make_params()
    opt = Adam([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.5, "amsgrad": True}], lr=0.1)
    feed(opt, ps, 3)
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    g0, g1 = sd["param_groups"]
    assert g0["params"] == [0, 1] and g1["params"] == [2]
    assert g0["lr"] == 0.1 and g1["lr"] == 0.5 and g1["amsgrad"] is True and g0["betas"] == (0.9, 0.999)
    assert sorted(sd["state"]) == [0, 1, 2]
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert set(sd["state"][2]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert sd["state"][1]["step"] == 3
    for i, p in enumerate(ps):
        np.testing.assert_array_equal(sd["state"][i]["exp_avg"].numpy(), opt.state[p]["exp_avg"].numpy())
    # no tensors of the parameters themselves in the dict
    for group in sd["param_groups"]:
        assert all(isinstance(i, int) for i in group["params"])


def test_state_dict_is_a_snapshot_and_does_not_alias_the_optimizer():
    ps = make_params()
    opt = SGD(ps, lr=0.1, momentum=0.9)
    feed(opt, ps, 2)
    sd = opt.state_dict()
    saved = sd["state"][0]["momentum_buffer"].numpy().copy()
    assert sd["state"][0]["momentum_buffer"]._storage is not opt.state[ps[0]]["momentum_buffer"]._storage
    sd["param_groups"][0]["lr"] = 99.0
    assert opt.param_groups[0]["lr"] == 0.1, "editing the dict must not change the optimizer"
    assert sd["param_groups"][0]["params"] is not opt.param_groups[0]["params"]
    feed(opt, ps, 2, seed=5)
    np.testing.assert_array_equal(sd["state"][0]["momentum_buffer"].numpy(), saved)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_resume_from_state_dict_matches_uninterrupted_torch(torch, make_pair, name):
    configs = {"SGD": dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
               "Adam": dict(lr=0.02, amsgrad=True, weight_decay=0.1),
               "AdamW": dict(lr=0.02, weight_decay=0.1)}
    classes = {"SGD": SGD, "Adam": Adam, "AdamW": AdamW}
    pair = make_pair()
    ours = classes[name]([{"params": pair.ours[:3]}, {"params": pair.ours[3:], "lr": 0.01}], **configs[name])
    theirs = getattr(torch.optim, name)([{"params": pair.theirs[:3]}, {"params": pair.theirs[3:], "lr": 0.01}],
                                        foreach=False, **configs[name])
    pair.run(ours, theirs, steps=6)
    sd = ours.state_dict()
    # "restart": fresh tensors with the same values, a fresh optimizer with other options, then load
    pair.ours = [tt.tensor(p.numpy().copy(), requires_grad=True) for p in pair.ours]
    fresh = classes[name]([{"params": pair.ours[:3]}, {"params": pair.ours[3:], "lr": 0.5}], lr=0.3)
    fresh.load_state_dict(sd)
    assert fresh.param_groups[1]["lr"] == 0.01 and fresh.param_groups[0]["lr"] == configs[name]["lr"]
    assert fresh.param_groups[1]["params"][0] is pair.ours[3]
    pair.run(fresh, theirs, start=6)


def test_round_trip_continues_bit_for_bit():
    ps, qs = make_params(), make_params()
    a = Adam(ps, lr=0.1, amsgrad=True)
    feed(a, ps, 4)
    b = Adam(qs, lr=0.1, amsgrad=True)
    for p, q in zip(ps, qs):
        q.data = p.numpy()
    b.load_state_dict(a.state_dict())
    feed(a, ps, 5, seed=9)
    feed(b, qs, 5, seed=9)
    for p, q in zip(ps, qs):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    assert b.state[qs[0]]["step"] == 9


def test_loaded_state_is_copied_cast_and_accepts_numpy():
    ps = [tt.tensor(np.ones((2, 2), dtype=np.float32), requires_grad=True)]
    opt = SGD(ps, lr=0.1, momentum=0.9)
    buf = np.full((2, 2), 3.0)  # float64 array, e.g. from a checkpoint file
    sd = {"state": {0: {"momentum_buffer": buf}},
          "param_groups": [{"lr": 0.2, "momentum": 0.5, "dampening": 0, "weight_decay": 0,
                            "nesterov": False, "maximize": False, "params": [0]}]}
    opt.load_state_dict(sd)
    loaded = opt.state[ps[0]]["momentum_buffer"]
    assert isinstance(loaded, tt.Tensor) and loaded.dtype == tt.float32
    buf[:] = -1.0
    np.testing.assert_array_equal(loaded.numpy(), np.full((2, 2), 3.0))
    assert opt.param_groups[0]["lr"] == 0.2 and opt.param_groups[0]["momentum"] == 0.5
    assert opt.param_groups[0]["params"][0] is ps[0]
    ps[0].grad = tt.tensor(np.ones((2, 2), dtype=np.float32))
    opt.step()  # buf = 0.5 * 3 + 1 = 2.5; p = 1 - 0.2 * 2.5
    np.testing.assert_allclose(ps[0].numpy(), np.full((2, 2), 0.5), rtol=1e-6)


def test_loaded_tensor_buffers_are_copies_and_state_stays_a_defaultdict():
    """A buffer loaded from a Tensor is the optimizer's own (the checkpoint's tensor can change
    afterwards), and a parameter seen for the first time after loading still gets state."""
    ps = [tt.tensor(np.ones(3), requires_grad=True), tt.tensor(np.ones(2), requires_grad=True)]
    opt = SGD(ps, lr=0.1, momentum=0.9)
    saved = tt.tensor(np.full(3, 2.0))
    opt.load_state_dict({"state": {0: {"momentum_buffer": saved}},
                         "param_groups": [{"lr": 0.1, "momentum": 0.9, "dampening": 0, "weight_decay": 0,
                                           "nesterov": False, "maximize": False, "params": [0, 1]}]})
    saved.numpy()[:] = -5.0
    np.testing.assert_array_equal(opt.state[ps[0]]["momentum_buffer"].numpy(), np.full(3, 2.0),
                                  err_msg="a loaded buffer must be a copy, not the checkpoint's tensor")
    assert opt.state[ps[1]] == {}, f"state of a parameter with no saved state: expected {{}}, got {opt.state.get(ps[1])}"
    ps[1].grad = tt.tensor(np.ones(2))
    opt.step()  # the second parameter's first momentum buffer goes into a new entry
    assert "momentum_buffer" in opt.state[ps[1]]


def test_load_errors_leave_the_optimizer_unchanged():
    ps = make_params()
    opt = SGD([{"params": ps[:2]}, {"params": ps[2:]}], lr=0.1, momentum=0.9)
    feed(opt, ps, 2)
    good = opt.state_dict()
    before = opt.state_dict()

    one_group = SGD(make_params(), lr=0.1, momentum=0.9)
    feed(one_group, one_group.param_groups[0]["params"], 1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(one_group.state_dict())

    resized = {"state": {}, "param_groups": [dict(good["param_groups"][0], params=[0]),
                                             dict(good["param_groups"][1], params=[1, 2])]}
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(resized)

    bad_shape = opt.state_dict()
    bad_shape["state"][0]["momentum_buffer"] = bad_shape["state"][0]["momentum_buffer"] * 3  # fine, but new
    bad_shape["state"][1]["momentum_buffer"] = tt.zeros(5, dtype=tt.float64)
    bad_shape["param_groups"][0]["lr"] = 42.0
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_dict(bad_shape)

    unknown = opt.state_dict()
    unknown["state"][7] = unknown["state"][0]
    with pytest.raises(ValueError):
        opt.load_state_dict(unknown)

    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for i in before["state"]:
        np.testing.assert_array_equal(after["state"][i]["momentum_buffer"].numpy(),
                                      before["state"][i]["momentum_buffer"].numpy())

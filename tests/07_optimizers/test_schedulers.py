"""Learning-rate schedulers equal torch.optim.lr_scheduler's lr sequences, step by step."""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.optim import SGD, Adam, lr_scheduler

BASE_LRS = (0.1, 0.02)


def ours_opt():
    ps = [tt.tensor([1.0], requires_grad=True), tt.tensor([2.0], requires_grad=True)]
    return SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, BASE_LRS)], lr=BASE_LRS[0], momentum=0.9)


def torch_opt(torch):
    ps = [torch.tensor([1.0], requires_grad=True), torch.tensor([2.0], requires_grad=True)]
    return torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, BASE_LRS)], lr=BASE_LRS[0], momentum=0.9)


def sequences(torch, make_ours, make_theirs, steps=30):
    """lr of every group after construction and after each of `steps` scheduler steps."""
    o_opt, t_opt = ours_opt(), torch_opt(torch)
    o_sched, t_sched = make_ours(o_opt), make_theirs(t_opt)
    ours, theirs = [o_sched.get_last_lr()], [t_sched.get_last_lr()]
    assert [g["lr"] for g in o_opt.param_groups] == ours[0]
    for _ in range(steps):
        o_opt.step()
        t_opt.step()
        o_sched.step()
        t_sched.step()
        ours.append(o_sched.get_last_lr())
        theirs.append(t_sched.get_last_lr())
        assert [g["lr"] for g in o_opt.param_groups] == ours[-1], "step() must set group['lr']"
    assert o_sched.last_epoch == t_sched.last_epoch == steps
    return np.array(ours, dtype=float), np.array(theirs, dtype=float)


def check(torch, make_ours, make_theirs, steps=30):
    ours, theirs = sequences(torch, make_ours, make_theirs, steps)
    assert ours.shape == (steps + 1, len(BASE_LRS))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    return ours


@pytest.mark.parametrize("step_size, gamma", [(1, 0.9), (5, 0.5), (7, 0.1)])
def test_steplr(torch, step_size, gamma):
    lrs = check(torch, lambda o: lr_scheduler.StepLR(o, step_size, gamma=gamma),
                lambda o: torch.optim.lr_scheduler.StepLR(o, step_size, gamma=gamma))
    assert lrs[0, 0] == BASE_LRS[0]


def test_steplr_default_gamma(torch):
    check(torch, lambda o: lr_scheduler.StepLR(o, step_size=3),
          lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3))


@pytest.mark.parametrize("T_max, eta_min", [(10, 0.0), (10, 0.001), (30, 0.005), (7, 0.0)])
def test_cosine_annealing(torch, T_max, eta_min):
    # 30 steps: for T_max < 30 this also checks that the cosine continues past T_max as in torch
    lrs = check(torch, lambda o: lr_scheduler.CosineAnnealingLR(o, T_max, eta_min=eta_min),
                lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max, eta_min=eta_min))
    np.testing.assert_allclose(lrs[T_max], [eta_min, eta_min], atol=1e-15)


@pytest.mark.parametrize("kwargs", [dict(), dict(start_factor=0.01, total_iters=10),
                                    dict(start_factor=1.0, end_factor=0.1, total_iters=20),
                                    dict(start_factor=0.5, end_factor=0.0, total_iters=4)],
                         ids=["defaults", "warmup", "decay", "to-zero"])
def test_linear(torch, kwargs):
    check(torch, lambda o: lr_scheduler.LinearLR(o, **kwargs),
          lambda o: torch.optim.lr_scheduler.LinearLR(o, **kwargs))


def test_lambda_one_function_and_one_per_group(torch):
    fn = lambda e: 0.95 ** e / (1 + 0.1 * e)  # noqa: E731
    check(torch, lambda o: lr_scheduler.LambdaLR(o, fn), lambda o: torch.optim.lr_scheduler.LambdaLR(o, fn))
    fns = [lambda e: 1.0 / (e + 1), lambda e: min(1.0, (e + 1) / 5)]
    check(torch, lambda o: lr_scheduler.LambdaLR(o, fns), lambda o: torch.optim.lr_scheduler.LambdaLR(o, fns))


def test_sequential_warmup_then_cosine(torch):
    def ours(o):
        return lr_scheduler.SequentialLR(o, [lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=5),
                                             lr_scheduler.CosineAnnealingLR(o, T_max=25, eta_min=1e-4)],
                                         milestones=[5])

    def theirs(o):
        s = torch.optim.lr_scheduler
        return s.SequentialLR(o, [s.LinearLR(o, start_factor=0.1, total_iters=5),
                                  s.CosineAnnealingLR(o, T_max=25, eta_min=1e-4)], milestones=[5])

    lrs = check(torch, ours, theirs, steps=30)
    np.testing.assert_allclose(lrs[0], np.array(BASE_LRS) * 0.1)
    np.testing.assert_allclose(lrs[5], BASE_LRS, rtol=1e-15)  # the cosine restarts at its epoch 0


def test_sequential_three_phases(torch):
    def ours(o):
        return lr_scheduler.SequentialLR(o, [lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=4),
                                             lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
                                             lr_scheduler.CosineAnnealingLR(o, T_max=10)],
                                         milestones=[4, 13])

    def theirs(o):
        s = torch.optim.lr_scheduler
        return s.SequentialLR(o, [s.LinearLR(o, start_factor=0.25, total_iters=4),
                                  s.StepLR(o, step_size=3, gamma=0.5),
                                  s.CosineAnnealingLR(o, T_max=10)], milestones=[4, 13])

    check(torch, ours, theirs, steps=30)


def test_scheduled_lr_drives_the_parameters_like_torch(torch, make_pair):
    pair = make_pair(steps=20)
    ours = Adam(pair.ours, lr=0.05)
    theirs = torch.optim.Adam(pair.theirs, lr=0.05, foreach=False)
    o_sched = lr_scheduler.SequentialLR(ours, [lr_scheduler.LinearLR(ours, start_factor=0.2, total_iters=4),
                                               lr_scheduler.CosineAnnealingLR(ours, T_max=16)], milestones=[4])
    s = torch.optim.lr_scheduler
    t_sched = s.SequentialLR(theirs, [s.LinearLR(theirs, start_factor=0.2, total_iters=4),
                                      s.CosineAnnealingLR(theirs, T_max=16)], milestones=[4])
    for k in range(20):
        pair.run(ours, theirs, steps=1, start=k)
        o_sched.step()
        t_sched.step()


def test_initial_lr_base_lrs_and_get_last_lr_copy():
    opt = ours_opt()
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    assert sched.base_lrs == list(BASE_LRS) and sched.last_epoch == 0
    assert [g["initial_lr"] for g in opt.param_groups] == list(BASE_LRS)
    last = sched.get_last_lr()
    last[0] = 123.0
    assert sched.get_last_lr()[0] == BASE_LRS[0]
    for _ in range(4):
        sched.step()
    assert sched.get_last_lr() == pytest.approx([b * 0.25 for b in BASE_LRS], rel=1e-15)
    assert opt.param_groups[0]["initial_lr"] == BASE_LRS[0], "initial_lr is never changed"


def test_scheduler_state_dict_round_trip():
    opt = ours_opt()
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.001)
    for _ in range(4):
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4 and sd["T_max"] == 10
    opt2 = ours_opt()
    sched2 = lr_scheduler.CosineAnnealingLR(opt2, T_max=10, eta_min=0.001)
    sched2.load_state_dict(sd)
    for _ in range(5):
        sched.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
        assert [g["lr"] for g in opt2.param_groups] == sched.get_last_lr()


def test_sequential_state_dict_round_trip():
    def make(o):
        return lr_scheduler.SequentialLR(o, [lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=3),
                                             lr_scheduler.CosineAnnealingLR(o, T_max=8)], milestones=[3])
    a_opt, b_opt = ours_opt(), ours_opt()
    a, b = make(a_opt), make(b_opt)
    for _ in range(5):
        a.step()
    sd = a.state_dict()
    assert "optimizer" not in sd and len(sd["_schedulers"]) == 2
    b.load_state_dict(sd)
    for _ in range(6):
        a.step()
        b.step()
        assert b.get_last_lr() == a.get_last_lr()


def test_lambda_state_dict_leaves_out_functions():
    sched = lr_scheduler.LambdaLR(ours_opt(), lambda e: 0.5 ** e)
    sched.step()
    sd = sched.state_dict()
    assert not any(callable(v) for v in sd.values()) and sd["last_epoch"] == 1
    assert sched.get_last_lr() == pytest.approx([b * 0.5 for b in BASE_LRS])


def test_closed_forms_by_formula():
    opt = ours_opt()
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=12, eta_min=0.01)
    for t in range(1, 13):
        cos.step()
        expected = [0.01 + (b - 0.01) * (1 + math.cos(math.pi * t / 12)) / 2 for b in BASE_LRS]
        assert cos.get_last_lr() == pytest.approx(expected, rel=1e-14)


def test_scheduler_errors():
    opt = ours_opt()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        lr_scheduler.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])  # two groups, one function
    warm = lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    with pytest.raises(ValueError, match="milestone"):
        lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2, 4])
    with pytest.raises(ValueError, match="same optimizer"):
        lr_scheduler.SequentialLR(opt, [warm, lr_scheduler.StepLR(ours_opt(), 2)], milestones=[2])
    seq = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    assert seq.get_last_lr() == pytest.approx([b * 0.5 for b in BASE_LRS])
    seq.step()
    assert seq.get_last_lr() == pytest.approx([b * 0.75 for b in BASE_LRS])

"""Optimizer-state memory accounting: state_nbytes and optimizer_memory."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.optim import SGD, Adam, AdamW
from tinytorch.optim.optimizers import optimizer_memory, state_nbytes

FACTORIES = [
    ("sgd", lambda ps: SGD(ps, lr=0.1), 0),
    ("sgd-momentum", lambda ps: SGD(ps, lr=0.1, momentum=0.9), 1),
    ("sgd-nesterov-wd", lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1), 1),
    ("adam", lambda ps: Adam(ps), 2),
    ("adamw", lambda ps: AdamW(ps), 2),
    ("adam-amsgrad", lambda ps: Adam(ps, amsgrad=True), 3),
]


def params():
    return [tt.tensor(np.zeros((7, 5), dtype=np.float32), requires_grad=True),
            tt.tensor(np.zeros(11), requires_grad=True),
            tt.tensor(np.zeros((2, 3, 4), dtype=np.float32), requires_grad=True)]


def nbytes(arrays):
    return sum(np.asarray(a).nbytes for a in arrays)


@pytest.mark.parametrize("name, factory, ratio", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_state_bytes_per_parameter_byte(name, factory, ratio):
    ps = params()
    weights = nbytes(p.numpy() for p in ps)
    opt = factory(ps)
    assert state_nbytes(opt) == 0, "no state before the first step"
    for p in ps:
        p.grad = tt.zeros_like(p)
    opt.step()
    expected = sum(v.numpy().nbytes for s in opt.state.values() for v in s.values() if isinstance(v, tt.Tensor))
    assert state_nbytes(opt) == expected == ratio * weights
    report = optimizer_memory(opt)
    assert report == {"params": weights, "grads": weights, "state": ratio * weights,
                      "total": (2 + ratio) * weights}


def test_only_parameters_with_gradients_get_state_and_count_grads():
    ps = params()
    opt = Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.1}])
    ps[1].grad = tt.zeros_like(ps[1])
    opt.step()
    assert state_nbytes(opt) == 2 * ps[1].numpy().nbytes
    report = optimizer_memory(opt)
    assert report["params"] == nbytes(p.numpy() for p in ps)
    assert report["grads"] == ps[1].numpy().nbytes
    assert report["total"] == report["params"] + report["grads"] + report["state"]
    opt.zero_grad()
    assert optimizer_memory(opt)["grads"] == 0 and optimizer_memory(opt)["state"] == 2 * ps[1].numpy().nbytes


def test_numbers_in_the_state_are_not_counted():
    p = tt.tensor(np.zeros(4, dtype=np.float32), requires_grad=True)
    opt = Adam([p])
    p.grad = tt.zeros_like(p)
    opt.step()
    assert isinstance(opt.state[p]["step"], int)
    assert state_nbytes(opt) == 2 * 4 * 4

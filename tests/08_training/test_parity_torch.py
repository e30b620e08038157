"""The course's own training step equals PyTorch's, step by step.

The same MLP (64-32-10, ReLU) with the same initial weights sees the same digits batches in
both frameworks. For each of the first 10 optimizer steps, the loss, the output and every
parameter's gradient must agree elementwise within 1e-5 (absolute, float32 on both sides),
for SGD with momentum and for Adam, using tinytorch's backward (module 06), optimizers
(module 07) and training step (this module).
"""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.data import Digits
from tinytorch.optim import SGD, Adam
from tinytorch.training import train_step

ATOL = 1e-5
STEPS = 10


def _batches(batch_size=32, steps=STEPS):
    digits = Digits(train=True)
    x = digits.data.numpy().reshape(-1, 64).astype(np.float32)
    y = digits.targets.numpy().astype(np.int64)
    return [(x[k * batch_size:(k + 1) * batch_size], y[k * batch_size:(k + 1) * batch_size])
            for k in range(steps)]


def _models(torch, seed=0):
    tt.manual_seed(seed)
    ours = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    theirs = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    with torch.no_grad():
        for p, q in zip(ours.parameters(), theirs.parameters()):
            assert tuple(p.shape) == tuple(q.shape)
            q.copy_(torch.from_numpy(p.numpy().copy()))
    return ours, theirs


def _optimizers(torch, kind, ours, theirs):
    if kind == "sgd-momentum":
        return (SGD(ours.parameters(), lr=0.1, momentum=0.9),
                torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9))
    # eps 1e-6, not the default 1e-8: Adam's first step is lr * g / (|g| + eps), so for a
    # gradient near 1e-9 (a nearly dead ReLU unit) the float32 round-off of g, which differs
    # between any two BLAS libraries, would be amplified into a 1e-5 difference of the weight.
    return (Adam(ours.parameters(), lr=1e-3, eps=1e-6),
            torch.optim.Adam(theirs.parameters(), lr=1e-3, eps=1e-6))


def _run(torch, kind, clip=None):
    ours, theirs = _models(torch)
    opt, topt = _optimizers(torch, kind, ours, theirs)
    names = [name for name, _ in ours.named_parameters()]
    for k, (x, y) in enumerate(_batches()):
        loss, output = train_step(ours, nn.CrossEntropyLoss(), opt, tt.tensor(x), tt.tensor(y), clip=clip)
        topt.zero_grad()
        tout = theirs(torch.from_numpy(x))
        tloss = torch.nn.functional.cross_entropy(tout, torch.from_numpy(y))
        tloss.backward()
        if clip is not None:
            tnorm = torch.nn.utils.clip_grad_norm_(theirs.parameters(), clip)
            assert tnorm.item() > clip, "the test must actually clip"
        topt.step()
        assert isinstance(loss, float)
        assert abs(loss - tloss.item()) <= ATOL, f"step {k + 1}: loss {loss} vs torch {tloss.item()}"
        np.testing.assert_allclose(output.numpy(), tout.detach().numpy(), rtol=0, atol=ATOL,
                                   err_msg=f"step {k + 1}: model output")
        for name, p, q in zip(names, ours.parameters(), theirs.parameters()):
            assert p.grad is not None, f"step {k + 1}: {name} has no gradient"
            assert p.grad.dtype == np.float32
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=0, atol=ATOL,
                                       err_msg=f"step {k + 1}: gradient of {name}")
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=0, atol=ATOL,
                                       err_msg=f"step {k + 1}: {name} after the optimizer step")


@pytest.mark.parametrize("kind", ["sgd-momentum", "adam"])
def test_first_ten_steps_equal_pytorch(torch, kind):
    _run(torch, kind)


@pytest.mark.parametrize("kind", ["sgd-momentum", "adam"])
def test_first_ten_clipped_steps_equal_pytorch(torch, kind):
    _run(torch, kind, clip=0.25)

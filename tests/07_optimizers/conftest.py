"""Shared helpers for module 07: run a tinytorch optimizer and a torch.optim one side by side.

Both sides start from the same parameters and, at every step, receive the same gradients:
g = 0.5 * (each side's own current parameter) + noise, i.e. the gradient of a quadratic bowl
plus a fixed random sequence. Because the gradient depends on the parameters, any difference
in an update shows up, and grows, in the later steps.
"""
import numpy as np
import pytest

import tinytorch as tt

SHAPES = [(4, 3), (3,), (), (2, 1, 5)]
TOL = {np.float64: dict(rtol=1e-11, atol=1e-13), np.float32: dict(rtol=2e-5, atol=2e-6)}


class Pair:
    """Parameters in both frameworks plus the gradient sequence they will be fed."""

    def __init__(self, torch, shapes=SHAPES, dtype=np.float64, seed=0, steps=12):
        self.torch = torch
        self.dtype = dtype
        rng = np.random.default_rng(seed)
        self.init = [np.asarray(rng.standard_normal(s)).astype(dtype) for s in shapes]
        self.noise = [[np.asarray(rng.standard_normal(s)).astype(dtype) for s in shapes]
                      for _ in range(steps)]
        self.ours = [tt.tensor(x.copy(), requires_grad=True) for x in self.init]
        self.theirs = [torch.tensor(x.copy(), requires_grad=True) for x in self.init]

    def set_grads(self, k, skip=()):
        """Give step k's gradients to both sides; parameters in `skip` get grad None."""
        for i, (p, q, n) in enumerate(zip(self.ours, self.theirs, self.noise[k])):
            if i in skip:
                p.grad, q.grad = None, None
                continue
            p.grad = tt.tensor((0.5 * p.numpy() + n).astype(self.dtype))
            q.grad = self.torch.tensor((0.5 * q.detach().numpy() + n).astype(self.dtype))

    def assert_equal(self, context=""):
        tol = TOL[self.dtype]
        for i, (p, q) in enumerate(zip(self.ours, self.theirs)):
            assert p.dtype == np.dtype(self.dtype), f"{context}: parameter {i} changed dtype to {p.dtype}"
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), **tol,
                                       err_msg=f"{context}: parameter {i} differs from torch.optim")

    def run(self, ours_opt, theirs_opt, steps=None, start=0, skip=lambda k: ()):
        """Step both optimizers, comparing every parameter after every step."""
        steps = len(self.noise) - start if steps is None else steps
        for k in range(start, start + steps):
            self.set_grads(k, skip(k))
            ours_opt.step()
            theirs_opt.step()
            self.assert_equal(f"after step {k + 1}")


@pytest.fixture
def make_pair(torch):
    def make(shapes=SHAPES, dtype=np.float64, seed=0, steps=12):
        return Pair(torch, shapes, dtype, seed, steps)
    return make

"""A training loop that evaluates under `torch.set_grad_enabled(False)`, saves its model
and optimizer with `torch.save`, loads them into fresh objects with
`torch.load(map_location="cpu")` and goes on training: the resumed run must continue the
same losses. float64, Adam."""
import os
import tempfile

import numpy as np
from compat_common import same_start

STEPS = 24


def main(torch):
    nn = torch.nn

    def make():
        model = same_start(torch, nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)).double())
        return model, torch.optim.Adam(model.parameters(), lr=0.01)

    rng = np.random.default_rng(4)
    x = torch.tensor(rng.standard_normal((32, 4)))
    y = torch.tensor(rng.standard_normal((32, 1)))
    model, opt = make()
    losses = []
    path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
    for step in range(STEPS):
        if step == STEPS // 2:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
            model, opt = make()
            state = torch.load(path, map_location="cpu")
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.set_grad_enabled(False):
            losses.append(nn.functional.mse_loss(model(x), y).item())
    return losses

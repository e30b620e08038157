"""Adadelta (provided over the student's Optimizer) equals torch.optim.Adadelta step by step,
and its state round-trips through state_dict."""
import numpy as np
import pytest

from tinytorch.optim import Adadelta

CONFIGS = [
    dict(),
    dict(lr=0.5, rho=0.8),
    dict(lr=1.0, eps=1e-3),
    dict(lr=1.0, weight_decay=0.1),
    dict(lr=0.9, maximize=True, weight_decay=0.05),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("config", CONFIGS, ids=["-".join(f"{k}={v}" for k, v in c.items()) or "defaults"
                                                 for c in CONFIGS])
def test_adadelta_matches_torch_every_step(torch, make_pair, config, dtype):
    pair = make_pair(dtype=dtype)
    pair.run(Adadelta(pair.ours, **config), torch.optim.Adadelta(pair.theirs, foreach=False, **config))


def test_adadelta_resumes_from_its_state_dict(torch, make_pair):
    pair = make_pair()
    ours = Adadelta(pair.ours, lr=0.7)
    theirs = torch.optim.Adadelta(pair.theirs, lr=0.7, foreach=False)
    pair.run(ours, theirs, steps=5)
    resumed = Adadelta(pair.ours, lr=0.7)
    resumed.load_state_dict(ours.state_dict())
    pair.run(resumed, theirs, start=5)

"""End to end on the digits: a pruned MLP keeps its sparsity through fine-tuning and its accuracy."""
import numpy as np

import tinytorch as tt
from tinytorch import nn
from tinytorch.data import Digits
from tinytorch.nn import functional as F
from tinytorch.nn import prune
from tinytorch.optim import Adam


def _train(model, x, y, epochs, lr, seed):
    opt = Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        order = rng.permutation(x.shape[0])
        for i in range(0, len(order), 64):
            idx = order[i:i + 64]
            opt.zero_grad()
            F.cross_entropy(model(tt.tensor(x[idx])), tt.tensor(y[idx])).backward()
            opt.step()


def _accuracy(model, x, y):
    with tt.no_grad():
        return float((model(tt.tensor(x)).numpy().argmax(1) == y).mean())


def test_digits_mlp_pruned_80_percent_keeps_its_zeros_and_accuracy_after_fine_tune():
    train, test = Digits(train=True), Digits(train=False)
    xtr, ytr = train.data.numpy().reshape(-1, 64), train.targets.numpy()
    xte, yte = test.data.numpy().reshape(-1, 64), test.targets.numpy()
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    _train(model, xtr, ytr, epochs=8, lr=3e-3, seed=0)
    dense = _accuracy(model, xte, yte)
    prune.global_unstructured(model, ["0.weight", "2.weight"], 0.8)
    _train(model, xtr, ytr, epochs=2, lr=1e-3, seed=1)
    sparse = _accuracy(model, xte, yte)
    zeros = sum(int((model[i].weight.numpy() == 0).sum()) for i in (0, 2))
    assert zeros == round(0.8 * (64 * 64 + 64 * 10)), f"80% of the weights stay zero after fine-tuning, got {zeros}"
    assert dense > 0.9, f"the dense MLP should reach > 90% test accuracy, got {dense:.3f}"
    assert sparse > dense - 0.03, f"after fine-tuning, 80% pruning costs < 3 points: {dense:.3f} -> {sparse:.3f}"

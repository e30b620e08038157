"""One trained CNN and one set of variants for the whole module (training takes a few seconds)."""
import pytest

import tinytorch
from tinytorch import nn
from tinytorch.data import DataLoader, Digits
from tinytorch.optim import Adam
from tinytorch.training import evaluate, fit


@pytest.fixture(scope="session")
def digits():
    return Digits(train=True), Digits(train=False)


@pytest.fixture(scope="session")
def trained(digits):
    from tinytorch.capstone import train_digits_cnn
    train_set, _ = digits
    model = train_digits_cnn(train_set=train_set)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return model, before


@pytest.fixture(scope="session")
def built(trained, digits):
    """(variants, the models fine_tune was called with, test accuracy per variant)."""
    from tinytorch.capstone import make_variants
    model, _ = trained
    train_set, test_set = digits
    calibration = list(DataLoader(train_set, batch_size=64))[:8]
    tuned = []

    def fine_tune(m):
        tuned.append(m)
        fit(m, nn.CrossEntropyLoss(), Adam(m.parameters(), lr=3e-3),
            DataLoader(train_set, batch_size=32, shuffle=True), epochs=2, progress=False)

    tinytorch.manual_seed(1)
    variants = make_variants(model, calibration, amount=0.5, fine_tune=fine_tune)
    acc = {n: evaluate(v, [(test_set.data, test_set.targets)])["accuracy"] for n, v in variants.items()}
    return variants, tuned, acc

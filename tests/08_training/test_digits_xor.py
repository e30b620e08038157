"""End to end: the course's own code learns XOR and the digits, reproducibly from a seed."""
import numpy as np

import tinytorch as tt
from tinytorch import nn
from tinytorch.data import DataLoader, Digits, TensorDataset
from tinytorch.optim import Adam
from tinytorch.optim.lr_scheduler import CosineAnnealingLR
from tinytorch.training import evaluate, fit


def _standardised_digits():
    train, test = Digits(train=True), Digits(train=False)
    x = train.data.numpy().reshape(-1, 64)
    mu, sd = x.mean(0), x.std(0) + 0.1
    xt = test.data.numpy().reshape(-1, 64)
    return (tt.tensor((x - mu) / sd), train.targets, tt.tensor((xt - mu) / sd), test.targets)


def test_digits_mlp_test_accuracy_above_92_percent():
    x, y, xt, yt = _standardised_digits()
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    opt = Adam(model.parameters(), lr=3e-3)
    epochs = 10
    history = fit(model, nn.CrossEntropyLoss(), opt,
                  DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True),
                  epochs=epochs, scheduler=CosineAnnealingLR(opt, T_max=epochs), progress=False)
    assert len(history["train_loss"]) == epochs
    assert history["train_loss"][-1] < 0.5 * history["train_loss"][0]
    result = evaluate(model, [(xt, yt)], nn.CrossEntropyLoss())
    # an independent count of the correct answers
    model.eval()
    with tt.no_grad():
        predictions = model(xt).numpy().argmax(1)
    independent = float((predictions == yt.numpy()).mean())
    assert abs(result["accuracy"] - independent) < 1e-12
    assert independent > 0.92, f"test accuracy {independent:.4f}"


def test_xor_is_learned():
    x = tt.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = tt.tensor([0, 1, 1, 0])
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    history = fit(model, nn.CrossEntropyLoss(), Adam(model.parameters(), lr=0.05), [(x, y)],
                  epochs=150, progress=False)
    result = evaluate(model, [(x, y)], nn.CrossEntropyLoss())
    assert result["accuracy"] == 1.0
    assert result["loss"] < 0.05
    assert history["train_accuracy"][-1] == 1.0


def _seeded_run(seed):
    x, y, xt, yt = _standardised_digits()
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 10))
    loader = DataLoader(TensorDataset(x[:256], y[:256]), batch_size=32, shuffle=True)
    history = fit(model, nn.CrossEntropyLoss(), Adam(model.parameters(), lr=1e-2), loader,
                  val_loader=[(xt, yt)], epochs=2, progress=False)
    return history, [p.numpy().copy() for p in model.parameters()]


def test_a_seed_reproduces_the_run_exactly():
    (h1, p1), (h2, p2) = _seeded_run(3), _seeded_run(3)
    for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy"):
        assert h1[key] == h2[key], key
    assert all(np.array_equal(a, b) for a, b in zip(p1, p2))
    h3, p3 = _seeded_run(4)
    assert h3["train_loss"] != h1["train_loss"]

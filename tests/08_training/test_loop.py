"""The loop's parts: metrics, train_step, train_epoch, evaluate, fit (with tqdm bars), History."""
import io
import math

import numpy as np
import pytest
from tqdm import tqdm as std_tqdm

import tinytorch as tt
import tinytorch.training as training
from tinytorch import nn
from tinytorch.optim import SGD, Adam
from tinytorch.optim.lr_scheduler import StepLR
from tinytorch.training import History, accuracy, confusion_matrix, evaluate, fit, train_epoch, train_step

PNG = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- metrics
def test_accuracy_matches_numpy():
    rng = np.random.default_rng(0)
    logits, target = rng.standard_normal((50, 7)).astype(np.float32), rng.integers(0, 7, 50)
    got = accuracy(tt.tensor(logits), tt.tensor(target))
    assert isinstance(got, float) and got == float((logits.argmax(1) == target).mean())
    seq, seq_t = rng.standard_normal((3, 5, 4)), rng.integers(0, 5, (3, 4))
    assert accuracy(tt.tensor(seq), tt.tensor(seq_t)) == float((seq.argmax(1) == seq_t).mean())
    binary, labels = rng.standard_normal(40), rng.integers(0, 2, 40).astype(np.float64)
    assert accuracy(tt.tensor(binary), tt.tensor(labels)) == float(((binary > 0) == (labels > 0.5)).mean())


def test_accuracy_of_binary_logits_thresholds_the_logit_at_0_and_the_target_at_half():
    """A logit is a log-odds: class 1 from 0 up (a probability of 0.5), not from 0.5; a soft
    target counts as class 1 above 0.5. Each case here is wrong under one of the mix-ups."""
    logits = tt.tensor([0.3, 0.3, -0.3, 2.0, -2.0])
    assert accuracy(logits, tt.tensor([1.0, 1.0, 0.0, 1.0, 0.0])) == 1.0
    assert accuracy(logits, tt.tensor([0.0, 0.0, 1.0, 0.0, 1.0])) == 0.0
    assert accuracy(logits, tt.tensor([0.9, 0.6, 0.4, 0.7, 0.1])) == 1.0


def test_accuracy_errors():
    with pytest.raises(ValueError):
        accuracy(tt.zeros(4, 3), tt.tensor([0, 1]))
    with pytest.raises(ValueError):
        accuracy(tt.zeros(0, 3), tt.zeros(0, dtype=tt.int64))


def test_confusion_matrix_matches_a_reference():
    rng = np.random.default_rng(1)
    pred, target = rng.integers(0, 6, 500), rng.integers(0, 6, 500)
    ref = np.zeros((6, 6), np.int64)
    np.add.at(ref, (target, pred), 1)
    got = confusion_matrix(tt.tensor(pred), tt.tensor(target), num_classes=6)
    assert isinstance(got, np.ndarray) and got.dtype == np.int64
    np.testing.assert_array_equal(got, ref)
    assert confusion_matrix(pred[:3] * 0 + 1, target[:3] * 0).shape == (2, 2)
    with pytest.raises(ValueError):
        confusion_matrix([0, 5], [0, 1], num_classes=3)


# ---------------------------------------------------------------- train_step
def _regression(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((8, 3)), rng.standard_normal((8, 2))


def test_train_step_is_one_sgd_step_on_the_mse():
    x, y = _regression()
    tt.manual_seed(0)
    lin = nn.Linear(3, 2, dtype=tt.float64)
    w, b = lin.weight.numpy().copy(), lin.bias.numpy().copy()
    opt = SGD(lin.parameters(), lr=0.05)
    for _ in range(3):
        loss, out = train_step(lin, nn.MSELoss(), opt, tt.tensor(x), tt.tensor(y))
        err = x @ w.T + b - y
        gw, gb = 2 * err.T @ x / err.size, 2 * err.sum(0) / err.size
        assert isinstance(loss, float) and abs(loss - (err ** 2).mean()) < 1e-12
        assert out.grad_fn is None and not out.requires_grad
        np.testing.assert_allclose(out.numpy(), x @ w.T + b, rtol=1e-12)
        np.testing.assert_allclose(lin.weight.grad.numpy(), gw, rtol=1e-10, err_msg="zero_grad first")
        w, b = w - 0.05 * gw, b - 0.05 * gb
        np.testing.assert_allclose(lin.weight.numpy(), w, rtol=1e-10)
        np.testing.assert_allclose(lin.bias.numpy(), b, rtol=1e-10)


def test_train_step_clips_between_backward_and_step():
    x, y = _regression(1)
    tt.manual_seed(0)
    lin = nn.Linear(3, 2, dtype=tt.float64)
    w, b = lin.weight.numpy().copy(), lin.bias.numpy().copy()
    train_step(lin, nn.MSELoss(), SGD(lin.parameters(), lr=1.0), tt.tensor(x), tt.tensor(y * 50), clip=0.1)
    err = x @ w.T + b - 50 * y
    gw, gb = 2 * err.T @ x / err.size, 2 * err.sum(0) / err.size
    norm = math.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    coef = 0.1 / (norm + 1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), gw * coef, rtol=1e-9)
    np.testing.assert_allclose(lin.weight.numpy(), w - gw * coef, rtol=1e-9)
    np.testing.assert_allclose(lin.bias.numpy(), b - gb * coef, rtol=1e-9)


# ---------------------------------------------------------------- epochs
class Spy(nn.Module):
    def __init__(self, n_in=4, n_out=3):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
        self.calls = []

    def forward(self, x):
        self.calls.append((self.training, tt.is_grad_enabled()))
        return self.fc(x)


def _uneven_batches(seed=0):
    rng = np.random.default_rng(seed)
    x = tt.tensor(rng.standard_normal((11, 4)).astype(np.float32))
    y = tt.tensor(rng.integers(0, 3, 11))
    return x, y, [(x[:5], y[:5]), (x[5:10], y[5:10]), (x[10:], y[10:])]


def test_train_epoch_weights_batches_by_size():
    x, y, batches = _uneven_batches()
    tt.manual_seed(0)
    spy = Spy()
    spy.eval()
    frozen = SGD(spy.parameters(), lr=0.0)  # lr 0: the parameters stay, the epoch means are exact
    result = train_epoch(spy, nn.CrossEntropyLoss(), frozen, batches,
                         metrics=("accuracy", lambda out, t: float(out.numpy().max())))
    assert spy.training and spy.calls == [(True, True)] * 3
    with tt.no_grad():
        full = spy.fc(x)
    assert set(result) == {"loss", "accuracy", "<lambda>"}
    assert abs(result["loss"] - nn.CrossEntropyLoss()(full, y).item()) < 1e-6
    assert abs(result["accuracy"] - accuracy(full, y)) < 1e-12
    per_batch = [float(spy.fc(b[0]).numpy().max()) for b in batches]
    assert abs(result["<lambda>"] - (5 * per_batch[0] + 5 * per_batch[1] + per_batch[2]) / 11) < 1e-6


def test_train_epoch_reports_progress_and_learns():
    x, y, batches = _uneven_batches(1)
    tt.manual_seed(1)
    spy = Spy()
    before = [p.numpy().copy() for p in spy.parameters()]
    buf = io.StringIO()
    bar = std_tqdm(total=3, desc="e", file=buf, mininterval=0, ncols=80)
    train_epoch(spy, nn.CrossEntropyLoss(), Adam(spy.parameters(), lr=0.1), batches, progress=bar)
    bar.close()
    assert bar.n == 3 and bar.postfix.startswith("loss=") and "3/3" in buf.getvalue()
    assert all(not np.array_equal(a, p.numpy()) for a, p in zip(before, spy.parameters()))
    with pytest.raises(ValueError):
        train_epoch(spy, nn.CrossEntropyLoss(), SGD(spy.parameters(), lr=0.1), [])


def test_evaluate_is_eval_mode_without_graph_and_restores_the_mode():
    x, y, batches = _uneven_batches(2)
    tt.manual_seed(2)
    spy = Spy()
    before = [p.numpy().copy() for p in spy.parameters()]
    result = evaluate(spy, batches, nn.CrossEntropyLoss())
    assert spy.calls == [(False, False)] * 3 and spy.training
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, spy.parameters()))
    with tt.no_grad():
        full = spy.fc(x)
    assert abs(result["loss"] - nn.CrossEntropyLoss()(full, y).item()) < 1e-6
    assert result["accuracy"] == accuracy(full, y)
    assert set(evaluate(spy, batches)) == {"accuracy"}
    spy.eval()
    evaluate(spy, batches, metrics=())
    assert not spy.training

    def broken():
        yield batches[0]
        raise KeyError("loader failed")

    spy.train()
    with pytest.raises(KeyError):
        evaluate(spy, broken())
    assert spy.training and tt.is_grad_enabled(), "mode and grad mode restored after an error"


def test_evaluate_switches_dropout_off():
    tt.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 50), nn.Dropout(0.9), nn.Linear(50, 3))
    x, y, batches = _uneven_batches(3)
    assert evaluate(model, batches, nn.CrossEntropyLoss()) == evaluate(model, batches, nn.CrossEntropyLoss())


# ---------------------------------------------------------------- fit, progress, history
def _tiny_fit(epochs=3, progress=False, history=None, val=True, seed=0, scheduler=True):
    x, y, batches = _uneven_batches(4)
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = SGD(model.parameters(), lr=0.5)
    sched = StepLR(opt, step_size=1, gamma=0.5) if scheduler else None
    return fit(model, nn.CrossEntropyLoss(), opt, batches, val_loader=batches if val else None,
               epochs=epochs, scheduler=sched, progress=progress, history=history)


def test_fit_returns_a_history_per_epoch():
    h = _tiny_fit()
    assert isinstance(h, History) and len(h) == 3
    for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr", "time", "epoch"):
        assert key in h and len(h[key]) == 3, key
    assert h["epoch"] == [1, 2, 3]
    assert h["lr"] == [0.5, 0.25, 0.125], "the lr used in each epoch, then the scheduler steps"
    assert all(t >= 0 for t in h["time"])
    assert h["val_loss"][-1] < h["val_loss"][0]
    again = _tiny_fit()
    assert again["train_loss"] == h["train_loss"] and again["val_accuracy"] == h["val_accuracy"]


def test_fit_continues_a_history():
    h = _tiny_fit(epochs=2)
    same = _tiny_fit(epochs=2, history=h, val=False)
    assert same is h and len(h) == 4 and h["epoch"] == [1, 2, 3, 4]
    assert all(np.isnan(h["val_loss"][2:])) and not any(np.isnan(h["train_loss"]))


def test_progress_can_be_silenced(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # tqdm trims its line to the screen: the test does not depend on it
    _tiny_fit(progress=False)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "", "progress=False draws nothing"
    _tiny_fit(epochs=2, progress=True)
    captured = capsys.readouterr()
    assert captured.out == "", "tqdm draws on stderr, never on stdout"
    err = captured.err
    assert "epoch 1/2" in err and "epoch 2/2" in err and "3/3" in err, "one bar per epoch, counting the batches"


def _recording_tqdm(monkeypatch):
    """Replace the tqdm that fit uses by tqdm itself, keeping every bar it makes."""
    bars = []
    real = training.tqdm

    class Recorded(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.drawn = not self.disable  # close() sets disable, so remember it now
            self.closed = False
            bars.append(self)

        def close(self):
            self.closed = True
            super().close()

    monkeypatch.setattr(training, "tqdm", Recorded)
    return bars


def test_fit_reports_through_tqdm(monkeypatch, capsys):
    bars = _recording_tqdm(monkeypatch)
    _tiny_fit(epochs=2, progress=True)
    assert [b.desc for b in bars] == ["epoch 1/2", "epoch 2/2"]
    assert [(b.n, b.total, b.drawn) for b in bars] == [(3, 3, True)] * 2
    assert all(b.closed for b in bars), "each epoch's bar is closed (its final drawing, its line kept)"
    assert "train: loss" in bars[-1].postfix and "val: loss" in bars[-1].postfix, "the summary as postfix"
    bars.clear()
    h = _tiny_fit(epochs=2, progress=False)
    assert len(h) == 2 and bars and not any(b.drawn for b in bars), "progress=False: the bars are disabled"
    bars.clear()
    unsized = (batch for batch in _uneven_batches(4)[2])  # a generator: no len()
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3))
    fit(model, nn.CrossEntropyLoss(), SGD(model.parameters(), lr=0.1), unsized, epochs=1, progress=True)
    assert bars[0].total is None and bars[0].n == 3, "a loader without a length: a bar of unknown total"
    capsys.readouterr()


def test_history_plot_writes_a_png(tmp_path):
    h = _tiny_fit()
    path = tmp_path / "curves.png"
    fig = h.plot(path)
    assert path.read_bytes()[:8] == PNG
    assert [ax.get_title() for ax in fig.axes] == ["loss", "accuracy"]
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), h["train_loss"])
    np.testing.assert_allclose(fig.axes[0].lines[0].get_xdata(), [1, 2, 3])
    only_train = _tiny_fit(val=False).plot()
    assert [len(ax.lines) for ax in only_train.axes] == [1, 1]


def test_history_plot_from_a_hand_made_history(tmp_path):
    h = History()
    h.log(train_loss=1.0, val_loss=1.2, train_f1=0.3)
    h.log(train_loss=0.5, val_loss=0.9, train_f1=0.6)
    assert h.best("val_loss") == (2, 0.9)
    fig = h.plot(tmp_path / "h.png")
    assert [ax.get_title() for ax in fig.axes] == ["loss", "f1"]
    assert (tmp_path / "h.png").read_bytes()[:8] == PNG


def test_history_plot_makes_a_figure_of_its_own_not_a_pyplot_one():
    """A pyplot figure stays registered (and is drawn again) until closed; a Figure made by
    matplotlib's object API belongs to no figure manager."""
    h = History()
    h.log(train_loss=1.0, val_loss=1.5)
    assert h.plot().canvas.manager is None


def test_history_plot_with_nothing_to_plot_is_a_value_error(tmp_path):
    h = History()
    with pytest.raises(ValueError):
        h.plot(tmp_path / "empty.png")
    h.log(lr=0.1, time=1.0)   # a record, but still no train_ or val_ quantity to draw
    with pytest.raises(ValueError):
        h.plot(tmp_path / "empty.png")
    assert not (tmp_path / "empty.png").exists()


def test_fit_passes_clip_and_metrics_on(monkeypatch):
    seen = []
    real_train_epoch, real_evaluate = training.train_epoch, training.evaluate

    def train_epoch(model, loss_fn, optimizer, loader, clip=None, metrics=("accuracy",), progress=None):
        seen.append(("train_epoch", clip, tuple(metrics)))  # the documented signatures, defaults included
        return real_train_epoch(model, loss_fn, optimizer, loader, None, metrics, progress)  # clipping: its own tests

    def evaluate(model, loader, loss_fn=None, metrics=("accuracy",)):
        seen.append(("evaluate", tuple(metrics)))
        return real_evaluate(model, loader, loss_fn, metrics)

    monkeypatch.setattr(training, "train_epoch", train_epoch)
    monkeypatch.setattr(training, "evaluate", evaluate)
    x, y, batches = _uneven_batches(4)
    model = nn.Sequential(nn.Linear(4, 3))
    h = fit(model, nn.CrossEntropyLoss(), SGD(model.parameters(), lr=0.1), batches, val_loader=batches,
            clip=0.25, metrics=(), progress=False)
    assert seen == [("train_epoch", 0.25, ()), ("evaluate", ())], seen
    assert h["time"][0] > 0, "the epoch's wall time in seconds"


def test_fit_bars_of_a_continued_history_count_on(monkeypatch, capsys):
    h = _tiny_fit(epochs=2)
    bars = _recording_tqdm(monkeypatch)
    _tiny_fit(epochs=2, progress=True, history=h)
    assert [b.desc for b in bars] == ["epoch 3/4", "epoch 4/4"]

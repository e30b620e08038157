"""Checkpoints: safetensors (tensors + JSON metadata), never pickle; exact resume of a training run."""
import io
import json
import math
import pickle

import numpy as np
import pytest
import safetensors.numpy

import tinytorch as tt
from tinytorch import nn
from tinytorch.optim import SGD, Adam
from tinytorch.optim.lr_scheduler import StepLR
from tinytorch.serialization import load, load_checkpoint, save, save_checkpoint
from tinytorch.training import History, train_step


def _batches(n=6, seed=0):
    rng = np.random.default_rng(seed)
    return [(tt.tensor(rng.standard_normal((16, 10)).astype(np.float32)),
             tt.tensor(rng.integers(0, 4, 16))) for _ in range(n)]


def _setup(kind, seed, dropout=0.0):
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(10, 12), nn.ReLU(), nn.Dropout(dropout), nn.Linear(12, 4))
    if kind == "adam":
        opt = Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.99))
    else:
        opt = SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    return model, opt, StepLR(opt, step_size=2, gamma=0.5)


def _steps(model, opt, sched, batches):
    for x, y in batches:
        train_step(model, nn.CrossEntropyLoss(), opt, x, y)
        sched.step()


@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_resume_is_bit_for_bit(tmp_path, kind):
    batches = _batches()
    model, opt, sched = _setup(kind, 0)
    _steps(model, opt, sched, batches)
    reference = [p.numpy().copy() for p in model.parameters()]

    model, opt, sched = _setup(kind, 0)
    _steps(model, opt, sched, batches[:3])
    path = tmp_path / "run.ckpt"
    save({"model": model.state_dict(), "optimizer": opt.state_dict(),
          "scheduler": sched.state_dict(), "step": 3}, path)

    model, opt, sched = _setup(kind, 99)  # other initial weights: all must come from the file
    ck = load(path)
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optimizer"])
    sched.load_state_dict(ck["scheduler"])
    assert ck["step"] == 3
    _steps(model, opt, sched, batches[ck["step"]:])
    for a, p in zip(reference, model.parameters()):
        np.testing.assert_array_equal(p.numpy(), a)


@pytest.mark.parametrize("kind, dropout", [("adam", 0.0), ("sgd", 0.0), ("adam", 0.3)])
def test_save_and_load_checkpoint_resume_bit_for_bit(tmp_path, kind, dropout):
    """With dropout, the masks of steps 4 to 6 come from the random stream: a checkpoint that
    forgets it resumes with other masks."""
    batches = _batches()
    model, opt, sched = _setup(kind, 0, dropout)
    _steps(model, opt, sched, batches)
    reference = [p.numpy().copy() for p in model.parameters()]

    model, opt, sched = _setup(kind, 0, dropout)
    _steps(model, opt, sched, batches[:3])
    history = History()
    history.log(train_loss=2.0, lr=0.1)
    history.log(train_loss=1.5, lr=0.05)
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, model, opt, sched, history, step=3, note="after 3 steps")
    saved = load(path)
    assert set(saved) == {"model", "rng_state", "optimizer", "scheduler", "history", "extra"}
    assert saved["extra"] == {"step": 3, "note": "after 3 steps"}

    model, opt, sched = _setup(kind, 99, dropout)  # other weights and random state: all from the file
    restored = History()
    extra = load_checkpoint(path, model, opt, sched, restored)
    assert extra == {"step": 3, "note": "after 3 steps"}
    assert restored["train_loss"] == [2.0, 1.5] and restored["lr"] == [0.1, 0.05]
    assert sched.last_epoch == 3 and opt.param_groups[0]["lr"] == sched.get_last_lr()[0]
    _steps(model, opt, sched, batches[extra["step"]:])
    for a, p in zip(reference, model.parameters()):
        np.testing.assert_array_equal(p.numpy(), a)


def test_checkpoint_with_only_a_model_and_missing_parts(tmp_path):
    tt.manual_seed(0)
    model = nn.Linear(3, 2)
    path = tmp_path / "weights.ckpt"
    save_checkpoint(path, model)
    assert set(load(path)) == {"model", "rng_state", "extra"}
    other = nn.Linear(3, 2)
    before = other.weight.numpy().copy()
    with pytest.raises(ValueError, match="optimizer"):
        load_checkpoint(path, other, optimizer=SGD(other.parameters(), lr=0.1))
    np.testing.assert_array_equal(other.weight.numpy(), before, err_msg="a refused checkpoint restores nothing")
    assert load_checkpoint(path, other) == {}
    np.testing.assert_array_equal(other.weight.numpy(), model.weight.numpy())
    for name, kwargs in [("optimizer", dict(optimizer=SGD(other.parameters(), lr=0.1))),
                         ("scheduler", dict(scheduler=StepLR(SGD(other.parameters(), lr=0.1), 2))),
                         ("history", dict(history=History()))]:
        with pytest.raises(ValueError, match=name):
            load_checkpoint(path, other, **kwargs)


def test_file_is_a_safetensors_file_named_like_the_parameters(tmp_path):
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    path = tmp_path / "model.pt"
    save(model.state_dict(), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"], "write exactly the given path"
    arrays = safetensors.numpy.load_file(str(path))
    assert sorted(arrays) == ["0.bias", "0.weight", "2.bias", "2.weight"], "tensor names = parameter names"
    for name, p in model.named_parameters():
        assert arrays[name].dtype == p.dtype and np.array_equal(arrays[name], p.numpy())
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    metadata = header["__metadata__"]
    assert metadata["format"] == "tinytorch-checkpoint"
    json.loads(metadata["structure"])  # the structure is JSON


def test_a_plain_safetensors_file_loads_as_a_state_dict(tmp_path):
    path = tmp_path / "plain.safetensors"
    weights = {"weight": np.arange(6, dtype=np.float32).reshape(2, 3), "bias": np.zeros(2, np.float32)}
    safetensors.numpy.save_file(weights, str(path), metadata={"format": "pt"})
    state = load(path)
    assert sorted(state) == ["bias", "weight"] and all(isinstance(v, tt.Tensor) for v in state.values())
    model = nn.Linear(3, 2)
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.weight.numpy(), weights["weight"])


def test_values_and_types_round_trip():
    obj = {
        "f32": tt.tensor([[1.5, -2.0]]), "f64": tt.tensor(np.arange(3.0)), "i64": tt.tensor([1, 2, 3]),
        "bool": tt.tensor([True, False]), "scalar": tt.tensor(2.5), "array": np.arange(6).reshape(2, 3),
        7: {"nested": [1, 2.5, None, True, "text"]}, "betas": (0.9, 0.999), "inf": math.inf,
        "empty": [], "np_scalar": np.float32(0.25),
    }
    buf = io.BytesIO()
    save(obj, buf)
    buf.seek(0)
    back = load(buf)
    assert list(back) == list(obj)
    for key in ("f32", "f64", "i64", "bool", "scalar"):
        assert isinstance(back[key], tt.Tensor)
        assert back[key].dtype == obj[key].dtype and back[key].shape == obj[key].shape
        np.testing.assert_array_equal(back[key].numpy(), obj[key].numpy())
    assert isinstance(back["array"], np.ndarray) and np.array_equal(back["array"], obj["array"])
    assert back[7] == {"nested": [1, 2.5, None, True, "text"]}
    assert back["betas"] == (0.9, 0.999) and isinstance(back["betas"], tuple)
    assert back["inf"] == math.inf and back["empty"] == [] and back["np_scalar"] == 0.25
    assert isinstance(back[7]["nested"][0], int) and isinstance(back[7]["nested"][3], bool)


def test_loaded_tensors_are_copies():
    t = tt.tensor([1.0, 2.0])
    buf = io.BytesIO()
    save({"t": t}, buf)
    t.numpy()[0] = 99.0
    buf.seek(0)
    assert load(buf)["t"].tolist() == [1.0, 2.0]


def test_load_takes_pytorchs_keywords(tmp_path):
    """PyTorch programs load with map_location= and weights_only=; every tinytorch load is
    weights-only, and a pickle option is refused by name."""
    path = tmp_path / "w.safetensors"
    save({"w": tt.tensor([[1.0, 2.0]]), "steps": [1, (2, 3)]}, str(path))
    for keywords in ({"map_location": "cpu"}, {"map_location": tt.device("cpu"), "weights_only": True},
                     {"weights_only": False}):
        back = load(str(path), **keywords)
        assert back["w"].tolist() == [[1.0, 2.0]] and back["steps"] == [1, (2, 3)], f"load(..., **{keywords})"
        assert str(back["w"].device) == "cpu"
    with pytest.raises(TypeError, match="pickle_module"):
        load(str(path), pickle_module=pickle)


class _Boom:
    def __reduce__(self):
        return (_mark_loaded, ())


LOADED = []


def _mark_loaded():
    LOADED.append(True)
    return "ran"


def test_refuses_pickle_files(tmp_path):
    good = tmp_path / "good.pt"
    save({"weights": tt.tensor([1.0, 2.0])}, good)
    assert load(good)["weights"].tolist() == [1.0, 2.0]
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"weights": _Boom()}))
    with pytest.raises(ValueError):
        load(path)
    objects = tmp_path / "objects.npz"
    np.savez(objects, a=np.array([_Boom()], dtype=object))
    with pytest.raises(ValueError):
        load(objects)
    assert LOADED == [], "loading must never run code from the file"


BAD = {
    "function": lambda: {"f": lambda x: x}, "set": lambda: {"s": {1, 2}}, "tuple-key": lambda: {(1, 2): 3},
    "bool-key": lambda: {True: 1}, "object": lambda: {"o": object()},
    "object-array": lambda: {"a": np.array([object()], dtype=object)}, "module": lambda: [nn.Linear(2, 2)],
    "string-array": lambda: {"a": np.array(["text"])},
}


@pytest.mark.parametrize("bad", list(BAD))
def test_refuses_what_only_pickle_could_store(tmp_path, bad):
    path = tmp_path / "x.ckpt"
    save({"ok": tt.tensor([1.0])}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save(BAD[bad](), path)
    assert path.read_bytes() == before, "a failed save must not damage the previous checkpoint"
    assert load(path)["ok"].tolist() == [1.0]


def test_mismatched_checkpoint_gives_a_clear_error(tmp_path):
    path = tmp_path / "small.ckpt"
    save({"model": nn.Linear(4, 3).state_dict()}, path)
    ck = load(path)
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        nn.Linear(4, 5).load_state_dict(ck["model"])
    with pytest.raises(RuntimeError, match="Missing key"):
        nn.Sequential(nn.Linear(4, 3)).load_state_dict(ck["model"])
    tt.manual_seed(0)
    model = nn.Linear(4, 3)
    opt = Adam(model.parameters())
    train_step(model, nn.MSELoss(), opt, tt.randn(2, 4), tt.randn(2, 3))
    save({"optimizer": opt.state_dict()}, path)
    other = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 3))
    with pytest.raises(ValueError):
        Adam(other.parameters()).load_state_dict(load(path)["optimizer"])


def test_other_files_are_not_checkpoints(tmp_path):
    good = tmp_path / "good.safetensors"
    save({"w": np.ones(3)}, good)
    np.testing.assert_array_equal(load(good)["w"], np.ones(3))
    archive = tmp_path / "plain.npz"
    np.savez(archive, w=np.ones(3))
    with pytest.raises(ValueError, match="safetensors"):
        load(archive)
    single = tmp_path / "single.npy"
    np.save(single, np.ones(3))
    with pytest.raises(ValueError):
        load(single)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError):
        load(text)
    newer = tmp_path / "newer.safetensors"
    safetensors.numpy.save_file({}, str(newer), metadata={"format": "tinytorch-checkpoint", "version": "99",
                                                         "structure": "null"})
    with pytest.raises(ValueError, match="version"):
        load(newer)


def test_top_level_names_like_torch(tmp_path):
    path = tmp_path / "w.ckpt"
    tt.save({"w": tt.tensor([1.0, 2.0])}, path)
    assert tt.load(path)["w"].tolist() == [1.0, 2.0]
    assert tt.save is save and tt.load is load

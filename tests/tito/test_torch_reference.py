"""tests/torch_reference.py: parity tests replay PyTorch's recorded answers where PyTorch is
not installed, refuse questions they were not recorded for, and catch drift from live PyTorch."""
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location(
    "torch_reference_under_test", Path(__file__).parents[1] / "torch_reference.py")
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)

import torch  # noqa: E402 - recording needs PyTorch: tito's own tests run with the dev extra


def scenario(t, x, path):
    """A parity test in small: tensors, autograd, a module, iteration, a context manager, an
    error, a file PyTorch writes; returns what the test would compare."""
    a = t.tensor(x, requires_grad=True)
    loss = (t.nn.functional.softmax(a * 2.0, dim=-1) ** 2).sum()
    loss.backward()
    t.manual_seed(0)
    layer = t.nn.Linear(3, 2)
    shapes = [tuple(p.shape) for p in layer.parameters()]
    with t.no_grad():
        out = layer(t.from_numpy(x)).numpy()
    try:
        t.zeros(2) @ t.zeros(3)
        raised = None
    except RuntimeError as exc:
        raised = type(exc)
    t.save({"w": t.ones(2)}, str(path))
    return [a.grad.numpy(), loss.item(), shapes, out, raised, len(a), str(layer), a.grad is None]


def record(x, path):
    session = ref.Session("t::recorded", "record", None, [], torch)
    return scenario(session.root, x, path), session


def test_replay_gives_the_recorded_answers_without_pytorch(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    live, recorded = record(x, tmp_path / "live.pt")
    ref.save(tmp_path / "t.torch.npz", {"recorded": (recorded.events, recorded.arrays)})
    events, arrays = ref.load(tmp_path / "t.torch.npz")["recorded"]
    replay = ref.Session("t::recorded", "replay", events, arrays)  # no PyTorch module at all
    replayed = scenario(replay.root, x, tmp_path / "replayed.pt")
    for got, expected in zip(replayed, live):
        if isinstance(expected, np.ndarray):
            np.testing.assert_array_equal(got, expected)
        else:
            assert got == expected
    assert (tmp_path / "replayed.pt").read_bytes() == (tmp_path / "live.pt").read_bytes()


def test_replay_refuses_an_input_it_was_not_recorded_for(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    _, recorded = record(x, tmp_path / "live.pt")
    other = x.copy()
    other[1, 2] += 0.5
    replay = ref.Session("t::recorded", "replay", recorded.events, recorded.arrays)
    with pytest.raises(ref.ReferenceMismatch, match=r"input 0 of .* differs from the recorded one") as info:
        scenario(replay.root, other, tmp_path / "replayed.pt")
    assert "install PyTorch" in str(info.value)


def test_replay_accepts_the_same_input_rounded_differently(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    live, recorded = record(x, tmp_path / "live.pt")
    nudged = np.nextafter(x, np.float32(np.inf))  # one unit in the last place: another summation order
    replay = ref.Session("t::recorded", "replay", recorded.events, recorded.arrays)
    np.testing.assert_array_equal(scenario(replay.root, nudged, tmp_path / "replayed.pt")[0], live[0])


def test_replay_refuses_a_changed_question():
    session = ref.Session("t::q", "record", None, [], torch)
    session.root.ones(3).sum().item()
    replay = ref.Session("t::q", "replay", session.events, session.arrays)
    with pytest.raises(ref.ReferenceMismatch, match=r"#0.getattr\('zeros'\).*#0.getattr\('ones'\)"):
        replay.root.zeros(3)


def test_check_mode_catches_a_stored_answer_that_drifted(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    _, recorded = record(x, tmp_path / "live.pt")
    arrays = [a.copy() for a in recorded.arrays]
    grad_index = next(e[1]["value"]["array"] for e in recorded.events
                      if "value" in e[1] and isinstance(e[1]["value"], dict) and "array" in e[1]["value"])
    arrays[grad_index] = arrays[grad_index] + 1e-3
    check = ref.Session("t::recorded", "check", recorded.events, arrays, torch)
    with pytest.raises(ref.ReferenceMismatch, match="live PyTorch answers differently"):
        scenario(check.root, x, tmp_path / "checked.pt")
    clean = ref.Session("t::recorded", "check", recorded.events, recorded.arrays, torch)
    scenario(clean.root, x, tmp_path / "checked.pt")


@pytest.mark.parametrize("dtype,moved_by,accepted", [
    (torch.float32, np.spacing(np.float32(0.5)), True),   # one float32 ulp: another CPU's float32 sum
    (torch.float64, np.spacing(np.float32(0.5)), False),  # 0.5 is a float32 number, but this one is float64
    (torch.float64, np.spacing(0.5), True)])
def test_check_mode_lets_a_python_float_drift_as_the_tensor_it_came_from(dtype, moved_by, accepted):
    """`.item()` gives a Python float either way; it may drift only as its tensor's dtype does."""
    session = ref.Session("t::f", "record", None, [], torch)
    session.root.tensor([0.25, 0.25], dtype=dtype).sum().item()
    assert session.events[-1][1]["dtype"] == str(dtype).removeprefix("torch.")
    events = [list(e) for e in session.events]
    events[-1][1] = dict(events[-1][1], value={"float": repr(0.5 + float(moved_by))})
    check = ref.Session("t::f", "check", events, session.arrays, torch)
    if accepted:
        check.root.tensor([0.25, 0.25], dtype=dtype).sum().item()
    else:
        with pytest.raises(ref.ReferenceMismatch, match="live PyTorch answers differently"):
            check.root.tensor([0.25, 0.25], dtype=dtype).sum().item()


def test_a_test_without_stored_answers_fails_and_says_how_to_record():
    replay = ref.Session("tests/x/test_y.py::test_z", "replay", None, [])
    with pytest.raises(ref.ReferenceMismatch, match=r"TINYTORCH_PARITY=record pytest tests/x/test_y.py"):
        replay.root.ones(2)


def test_the_stored_references_cover_every_parity_test_file():
    """Each test file whose tests ask PyTorch has its answers stored beside it."""
    tests = Path(__file__).parents[1]
    missing = []
    for path in sorted(tests.glob("[0-9][0-9]_*/test_*.py")):
        text = path.read_text(encoding="utf-8")
        asks = re.search(r"def test\w*\([^)]*\b(torch|make_pair)\b", text) is not None
        if asks and not ref.reference_path(path).is_file():
            missing.append(str(path.relative_to(tests)))
    assert missing == [], f"parity tests without stored answers (record them): {missing}"

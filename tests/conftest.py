"""Shared test setup: make sure the package under test is the one tito built."""
import importlib.util
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings


def _load_sibling(name):
    """A helper module beside this file (with --import-mode=importlib, tests/ is not on sys.path)."""
    import sys
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


torch_reference = _load_sibling("torch_reference")
stub_spectrum = _load_sibling("stub_spectrum")
stuck_frame = _load_sibling("stuck_frame")
_SPECTRUM = stub_spectrum.wanted()

# No example database: the suite leaves no .hypothesis/ cache in the student's folder.
settings.register_profile("tinytorch", database=None, deadline=None)
settings.load_profile("tinytorch")


def pytest_configure(config):
    if _SPECTRUM is not None and not config.pluginmanager.has_plugin("tito-spectrum"):
        config.pluginmanager.register(_Spectrum(), "tito-spectrum")
    if os.environ.get("TINYTORCH_PARITY") == "replay":  # asked for: prove the student install, no PyTorch at all
        import sys
        for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")] + ["torch", "safetensors.torch"]:
            sys.modules[name] = None  # `import torch` now raises ImportError, even if it was loaded
    expected = os.environ.get("TINYTORCH_EXPECT")
    if not expected:
        return
    try:
        import tinytorch
    except Exception:  # a broken package is reported by the tests themselves
        return
    actual = Path(tinytorch.__file__).resolve().parent
    if actual != Path(expected).resolve():
        raise pytest.UsageError(
            f"tests are importing tinytorch from {actual}, but tito built it in {expected}; "
            f"check PYTHONPATH and that no other tinytorch shadows it."
        )


def _parity_mode() -> str:
    mode = os.environ.get("TINYTORCH_PARITY") or ("live" if importlib.util.find_spec("torch") else "replay")
    if mode not in torch_reference.MODES:
        raise pytest.UsageError(f"TINYTORCH_PARITY={mode!r}: use one of {', '.join(torch_reference.MODES)}")
    return mode


_STORED = {}  # reference file -> {test name: (events, arrays)}, read once per run
_RECORDED = {}  # reference file -> {test name: (events, arrays)}, written at the end (record mode)


def _seed_for(request, real_torch):
    """A parity test's inputs depend on the test alone, not on which tests ran before it (its
    recorded answers are for those inputs): numpy's, tinytorch's and PyTorch's generators and
    the test file's own module-level generators start from a seed derived from the test's id."""
    import zlib

    seed = zlib.crc32(request.node.nodeid.encode("utf-8"))
    np.random.seed(seed)
    for value in vars(request.module).values():
        if isinstance(value, np.random.Generator):
            value.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        elif isinstance(value, np.random.RandomState):
            value.seed(seed)
    try:
        import tinytorch
        tinytorch.manual_seed(seed)
    except Exception:  # noqa: BLE001 - a package without a working manual_seed yet: its own tests say so
        pass
    if real_torch is not None:
        real_torch.manual_seed(seed)


@pytest.fixture
def torch(request):
    """PyTorch, for parity tests: live where it is installed; where it is not (the student
    install), its answers replayed from the file stored beside the test (tests/torch_reference.py)."""
    mode = _parity_mode()
    path = torch_reference.reference_path(request.node.path)
    name = request.node.nodeid.split("::", 1)[1]
    if path not in _STORED:
        _STORED[path] = torch_reference.load(path)
    events, arrays = _STORED[path].get(name, (None, []))
    real = None
    if mode != "replay":
        if mode == "record" and os.environ.get("PYTEST_XDIST_WORKER"):
            pytest.fail("TINYTORCH_PARITY=record writes one file per test file: run it without -n")
        import torch as real
    _seed_for(request, real)
    request.node.user_properties.append(("tinytorch_parity", mode))  # tito counts these
    session = torch_reference.Session(request.node.nodeid, mode, events, arrays, real)
    yield session.root
    if mode == "record":
        _RECORDED.setdefault(path, {})[name] = (session.events, session.arrays)
    elif mode == "check" and getattr(request.node, "_tito_call_passed", False) and len(session.events) != len(events or []):
        pytest.fail(f"{request.node.nodeid}: the test asked PyTorch {len(session.events)} things, the stored "
                    f"answers have {len(events or [])}: record them again (TINYTORCH_PARITY=record)")


class _Spectrum:
    """tito test asked which of the student's functions each test runs (stub_spectrum)."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        if not _SPECTRUM.get("resolved"):
            stub_spectrum.resolve(_SPECTRUM)
            _SPECTRUM["resolved"] = True
        stub_spectrum.start()
        yield

    # A plugin, not a conftest hook: a conftest's hooks do not see the setup of session-
    # and module-scoped fixtures (their node is the session, above this folder).
    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        yield from stub_spectrum.fixture_setup((fixturedef.argname, fixturedef.baseid))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        info = getattr(item, "_fixtureinfo", None)
        used = [(d.argname, d.baseid) for defs in (info.name2fixturedefs.values() if info else ()) for d in defs]
        item.user_properties.append(("tito_spectrum", "|".join(stub_spectrum.stop(used))))
        yield


def pytest_collection_modifyitems(config, items):
    """TINYTORCH_PARITY_ONLY=1 (tito verify's drift check): only the tests that ask PyTorch."""
    if os.environ.get("TINYTORCH_PARITY_ONLY") == "1":
        keep = [item for item in items if "torch" in getattr(item, "fixturenames", ())]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


def pytest_sessionfinish(session):
    for path, tests in _RECORDED.items():
        stored = torch_reference.load(path)
        stored.update(tests)
        torch_reference.save(path, stored)


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's file and name (parameters included): a test's
    random inputs are its own, the same whichever tests run before it (a `-k` selection,
    tito verify's reruns of a few tests), so its failures and PyTorch's recorded answers
    reproduce."""
    return np.random.default_rng(zlib.crc32(f"{request.path.name}::{request.node.name}".encode()))


@pytest.fixture(autouse=True)
def _fresh_global_state():
    """Every test starts as in a fresh process (grad mode on) and leaves tinytorch's and
    numpy's random state as it found them: one bug fails its own tests, not dozens of others."""
    try:
        import tinytorch._tensor as _t
        import tinytorch.random as _random
    except Exception:  # a broken package is reported by the tests themselves
        yield
        return
    rng_state = _random.get_rng_state()
    np_state = np.random.get_state()
    _t._grad_enabled = True
    try:
        yield
    finally:
        _t._grad_enabled = True
        _random.set_rng_state(rng_state)
        np.random.set_state(np_state)


def pytest_make_parametrize_id(config, val, argname):
    """Readable ids for the summary: `[shape=(2, 0, 3)]`, not `[shape5]`."""
    if isinstance(val, (bool, int, float, str, tuple, type(None))):
        text = repr(val) if not isinstance(val, str) else val
        if len(text) <= 40:
            return f"{argname}={text}"
    return None


def _frames(tb, last=None):
    """Every frame inside the tinytorch package, outermost first, as 'path:line:qualname'
    (none below the frame `last`, when given)."""
    found = []
    while tb is not None:
        code = tb.tb_frame.f_code
        path = Path(code.co_filename)
        if "tinytorch" in path.parts:
            parts = path.parts[path.parts.index("tinytorch"):]
            found.append(f"{'/'.join(parts)}:{tb.tb_lineno}:{getattr(code, 'co_qualname', code.co_name)}")
        if tb.tb_frame is last:
            break
        tb = tb.tb_next
    return found


def _recurring_last(frames):
    """`frames` with the frame of the function that recurs most moved last, where tito looks
    first: a recursion too deep or too long is the fault of the function that keeps calling
    itself, not of whatever it called last. Unchanged when no function is on the stack 3 times."""
    names = [frame.rsplit(":", 1)[-1] for frame in frames]
    counts = {name: names.count(name) for name in set(names)}
    name = max(counts, key=counts.get, default=None)
    if name is None or counts[name] < 3:
        return frames
    last = max(i for i, n in enumerate(names) if n == name)
    return frames[:10] + [frames[last]]


def _readable(qualname):
    """`_run_backward.<locals>.push` as a student reads it: `push` (inside `_run_backward`)."""
    outer, _, inner = qualname.rpartition(".<locals>.")
    return f"`{inner}` (inside `{outer}`)" if outer else f"`{qualname}`"


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    """A RecursionError's traceback holds a thousand frames, some without a line number,
    which pytest cannot format (it stops with an INTERNALERROR). Keep its package frames for
    tito, and give pytest a short error that names the function that recurs."""
    try:
        return (yield)
    except RecursionError as error:
        frames = _recurring_last(_frames(error.__traceback__))
        pyfuncitem._tito_frames = frames
        where = _readable(frames[-1].rsplit(":", 1)[-1]) if frames else "the test"
        raise RecursionError(
            f"maximum recursion depth exceeded: {where} kept calling itself (directly or through other "
            f"functions) until Python's limit of {sys.getrecursionlimit()} nested calls. Either it never stops "
            f"(it calls itself again on something it has already visited, or on what it just made), or the "
            f"input is deeper than that limit, which needs a loop over a stack of your own.") from None


# numpy's words for a mistake, and what the mistake is in this course's terms.
_EXPLAINED = {
    "output array is read-only": "the code changed an array it was handed in place (`+=`, `a[...] = ...`); "
                                 "arrays tinytorch hands around (a gradient, a broadcast view) may be shared or "
                                 "read-only: make a new one (`a = a + b`)",
}


def _message(excinfo):
    """The whole message: pytest's assertion explanation, pytest.raises's expected/actual
    lines, notes such as hypothesis's falsifying example, and what a bare numpy error means."""
    text = excinfo.exconly().strip()
    notes = getattr(excinfo.value, "__notes__", None) or []
    for note in notes:
        if str(note).strip() and str(note).strip() not in text:
            text += "\n" + str(note).strip()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("  Use -v")]
    if lines:  # on the first line, which tito's summary shows
        lines[0] += "".join(f" ({why})" for words, why in _EXPLAINED.items() if words in lines[0])
    return "\n".join(lines[:14])[:2500]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Sample the stack just before the test's time limit (stuck_frame)."""
    item._tito_sample = stuck_frame.StackSample(stuck_frame.limit_of(item))
    try:
        yield
    finally:
        item._tito_sample.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Record where in the tinytorch package a failure was raised and its whole message, so
    that tito can point the student to their own code (cheap, even with --tb=no). After the
    first test that runs past its time limit, stop: an endless loop costs one timeout."""
    outcome = yield
    report = outcome.get_result()
    sample = getattr(item, "_tito_sample", None) if report.when == "call" else None
    item._tito_sample = None
    if report.when == "call":
        item._tito_call_passed = report.passed  # the parity drift check counts a whole run's questions
    if call.excinfo is None or not report.failed:
        return
    message = _message(call.excinfo)
    frames = getattr(item, "_tito_frames", None) or _frames(call.excinfo.tb)
    if message.startswith("Failed: Timeout"):
        stuck = sample.stuck_frame(call.excinfo.tb) if sample is not None else None
        if stuck is not None and _frames(call.excinfo.tb, last=stuck):  # the loop, not what it was calling
            frames = _frames(call.excinfo.tb, last=stuck)
        frames = _recurring_last(frames)
    if sample is not None:
        sample.release()
    # junit reads the properties from the item when the test finishes
    if frames:
        item.user_properties.append(("tinytorch_frames", "|".join(frames)))
    item.user_properties.append(("tito_message", message))
    if message.startswith("Failed: Timeout"):
        where = frames[-1].rsplit(":", 1)[-1] if frames else "the test"
        item.user_properties.append(("tito_timeout", where))
        item.session.shouldstop = f"a test ran past its time limit inside {where}; the rest were not run"

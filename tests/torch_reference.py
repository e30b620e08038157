"""PyTorch's answers, live or replayed: parity tests run in the student install too.

A parity test gets `torch` from a fixture. With PyTorch installed that is PyTorch, seen
through a recorder: every operation the test performs on it (an attribute, a call, an
operator, a conversion to numpy or to a Python value) is one event, in order, and every
plain value that comes back (arrays, numbers, strings, None, shapes) is kept. The events of
each test are stored in the repository beside its file (`<test file>.torch.npz`), so that
without PyTorch the same test runs against a replayer: it performs the same operations and
gets the same values back, and it checks at each step that the test asks what was recorded
(the operation and a digest of its arguments), so a changed test or a student's different
input never gets a stale answer silently.

Modes (environment variable TINYTORCH_PARITY): `live` (PyTorch, the default where it is
installed), `replay` (the stored answers, the default where it is not), `check` (PyTorch,
and each test's events must equal the stored ones: CI's drift check), `record` (PyTorch,
and the stored answers are rewritten: after changing a parity test).
"""
from __future__ import annotations

import builtins
import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

MODES = ("live", "replay", "check", "record")
SUFFIX = ".torch.npz"
# Stored answers equal live ones to these tolerances: float32 sums come out in another
# order with another number of threads or another CPU (a 3x3 convolution over 8x8 images
# moved by 2e-5 between one thread and two).
DRIFT = {np.dtype(np.float16): (1e-3, 1e-3), np.dtype(np.float32): (1e-4, 1e-5), np.dtype(np.float64): (1e-12, 1e-14)}


class ReferenceMismatch(AssertionError):
    """The test asked PyTorch something its stored answers do not cover."""


def reference_path(test_file: str | Path) -> Path:
    test_file = Path(test_file)
    return test_file.with_name(test_file.stem + SUFFIX)


# ---------------------------------------------------------------- values and digests

def _plain(value):
    """The value as a test sees it, if it is plain data (else None and False)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.ndarray, np.generic)):
        return value, True
    if isinstance(value, tuple) and type(value).__module__.split(".")[0] == "torch":  # torch.Size
        value = tuple(value)
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        if all(ok for _, ok in items):
            return type(value)(v for v, _ in items), True
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _plain(v) for k, v in value.items()}
        if all(ok for _, ok in items.values()):
            return {k: v for k, (v, _) in items.items()}, True
    return None, False


def _encode(value, arrays: list):
    """A plain value as JSON, its arrays appended to `arrays`."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):  # before int and float: np.float64 is a float too
        arrays.append(np.asarray(value))
        return {"scalar": len(arrays) - 1}
    if isinstance(value, int):
        return {"int": str(value)}
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, complex):
        return {"complex": [repr(value.real), repr(value.imag)]}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, np.ndarray):
        arrays.append(value.copy())  # a tensor's .numpy() shares its memory; keep it as it was
        return {"array": len(arrays) - 1}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [_encode(v, arrays) for v in value]}
    return {"dict": {k: _encode(v, arrays) for k, v in value.items()}}


def _decode(data, arrays):
    if data is None or isinstance(data, (bool, str)):
        return data
    (kind, body), = data.items()
    if kind == "int":
        return int(body)
    if kind == "float":
        return float(body)
    if kind == "complex":
        return complex(float(body[0]), float(body[1]))
    if kind == "bytes":
        return bytes.fromhex(body)
    if kind == "scalar":
        return arrays[body][()]
    if kind == "array":
        return arrays[body].copy()
    if kind == "list":
        return [_decode(v, arrays) for v in body]
    if kind == "tuple":
        return tuple(_decode(v, arrays) for v in body)
    return {k: _decode(v, arrays) for k, v in body.items()}


def _digest(value, seen: list) -> str:
    """What a test passed to PyTorch, stable from run to run: earlier answers by their event
    number, integer arrays and files by content, functions by name. Floating arrays are
    appended to `seen` (compared with a tolerance: a different rounding of the same input
    still gets its answer)."""
    if isinstance(value, _Proxy):
        return f"#{object.__getattribute__(value, '_number')}"
    if isinstance(value, np.ndarray):
        if value.dtype in DRIFT:
            seen.append(value.copy())
            return f"array({value.dtype},{value.shape},input {len(seen) - 1})"
        h = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
        return f"array({value.dtype},{value.shape},{h})"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return type(value).__name__ + "(" + ",".join(_digest(v, seen) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_digest(v, seen)}" for k, v in value.items()) + "}"
    if isinstance(value, os.PathLike) or (isinstance(value, str) and os.sep in value and Path(value).is_absolute()):
        return _file_digest(Path(value), seen)
    if isinstance(value, slice):
        return f"slice({_digest(value.start, seen)},{_digest(value.stop, seen)},{_digest(value.step, seen)})"
    if hasattr(type(value), "__array__") and not isinstance(value, type):  # a tinytorch tensor, by content
        return _digest(np.asarray(value), seen)
    if callable(value) and not isinstance(value, type):
        return f"function {getattr(value, '__name__', type(value).__name__)}"
    if isinstance(value, type):
        return f"type {value.__module__}.{value.__qualname__}"
    if value is None or isinstance(value, (bool, int, str, complex, bytes, np.generic, type(Ellipsis))):
        return repr(value)
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _file_digest(path: Path, seen: list) -> str:
    """A file by what it holds: a safetensors file by its metadata and tensors (the byte
    order of its header may differ between writers), anything else by its bytes."""
    if not path.is_file():
        return "path"
    try:
        from safetensors import safe_open

        with safe_open(str(path), "np") as handle:
            metadata = json.dumps(handle.metadata() or {}, sort_keys=True)
            tensors = [f"{name}:{_digest(handle.get_tensor(name), seen)}" for name in sorted(handle.keys())]
        return f"safetensors({metadata},{','.join(tensors)})"
    except Exception:  # noqa: BLE001 - not a safetensors file
        return f"file({hashlib.sha1(path.read_bytes()).hexdigest()[:16]})"


def _files(args, kwargs) -> list[Path]:
    """The file paths among the arguments (PyTorch may write them)."""
    found = []
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, os.PathLike) or (isinstance(value, str) and os.sep in value and Path(value).is_absolute()):
            found.append(Path(value))
    return found


# ---------------------------------------------------------------- the proxy

class _Proxy:
    """A PyTorch object as the test holds it: every use goes through the session."""

    __slots__ = ("_session", "_number", "_real")

    def __init__(self, session, number, real=None):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_real", real)

    def _op(self, kind, *args, **kwargs):
        return object.__getattribute__(self, "_session").op(self, kind, args, kwargs)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # numpy's and pytest's probes are not the test's questions
        return self._op("getattr", name)

    def __setattr__(self, name, value):
        self._op("setattr", name, value)

    def __call__(self, *args, **kwargs):
        return self._op("call", *args, **kwargs)

    def __getitem__(self, key):
        return self._op("getitem", key)

    def __delitem__(self, key):
        self._op("delitem", key)

    def __delattr__(self, name):
        self._op("delattr", name)

    def __setitem__(self, key, value):
        self._op("setitem", key, value)

    def __iter__(self):
        return iter(self._op("iter"))

    def __len__(self):
        return self._op("len")

    def __bool__(self):
        return self._op("bool")

    def __float__(self):
        return self._op("float")

    def __int__(self):
        return self._op("int")

    def __index__(self):
        return self._op("index")

    def __array__(self, dtype=None, copy=None):
        out = self._op("array")
        return out if dtype is None else out.astype(dtype)

    def __enter__(self):
        return self._op("enter")

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is not None:  # the test is failing: leave the block without a question
            real = object.__getattribute__(self, "_real")
            return real.__exit__(exc_type, exc, traceback) if real is not None else False
        return self._op("exit")

    def __hash__(self):
        return object.__getattribute__(self, "_number")

    def __repr__(self):
        return self._op("repr")

    def __str__(self):
        return self._op("str")

    def __format__(self, spec):
        return self._op("format", spec)

    def __contains__(self, item):
        return self._op("contains", item)


def _binary(name):
    def method(self, *args):
        return self._op(name, *args)
    method.__name__ = name
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow", "rmatmul", "rand", "ror", "rxor",
              "iadd", "isub", "imul", "itruediv", "eq", "ne", "lt", "le", "gt", "ge", "neg", "pos", "abs", "invert"):
    setattr(_Proxy, f"__{_name}__", _binary(f"__{_name}__"))


def built_by(torch, build, *args):
    """`build(torch, *args)` run as one question: PyTorch code a proxy cannot stand in for
    (a class that subclasses torch.nn.Module) runs on live PyTorch, and what it returns is
    answered like any other result. `build` must depend only on its arguments."""
    return torch._op("build", build, *args)


def companion_module(torch, name: str):
    """A module that needs PyTorch (e.g. `safetensors.torch`), live or replayed like `torch`."""
    return torch._op("import", name)


# ---------------------------------------------------------------- sessions

def _unwrap(value):
    if isinstance(value, _Proxy):
        return object.__getattribute__(value, "_real")
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _unwrap(v)) for k, v in value.items())
    return value


def _apply(real, kind, args, kwargs):
    if kind == "getattr":
        return getattr(real, args[0])
    if kind == "build":
        return args[0](real, *args[1:])
    if kind == "import":
        import importlib
        return importlib.import_module(args[0])
    if kind == "setattr":
        return setattr(real, args[0], args[1])
    if kind == "call":
        return real(*args, **kwargs)
    if kind == "getitem":
        return real[args[0]]
    if kind == "setitem":
        real[args[0]] = args[1]
        return None
    if kind == "delitem":
        del real[args[0]]
        return None
    if kind == "delattr":
        return delattr(real, args[0])
    if kind == "iter":
        return list(real)
    if kind == "len":
        return len(real)
    if kind == "bool":
        return bool(real)
    if kind == "float":
        return float(real)
    if kind == "int":
        return int(real)
    if kind == "index":
        return real.__index__()
    if kind == "array":
        return np.asarray(real)
    if kind in ("repr", "str"):
        return getattr(builtins, kind)(real)
    if kind == "format":
        return format(real, args[0])
    if kind == "contains":
        return args[0] in real
    if kind == "enter":
        return real.__enter__()
    if kind == "exit":
        return real.__exit__(None, None, None)
    return getattr(real, kind)(*args)


class Session:
    """One test's events: performed on PyTorch and kept (live, check, record), or answered
    from the stored events (replay). An event is [the question, the answer, extras]: the
    question names the object, the operation and a digest of the arguments; extras hold the
    floating inputs and the files PyTorch wrote."""

    def __init__(self, test_id: str, mode: str, stored: list | None, arrays: list, torch_module=None):
        self.test_id, self.mode = test_id, mode
        self.stored, self.stored_arrays = stored, arrays
        self.events, self.arrays = [], []
        self.root = _Proxy(self, 0, torch_module)

    def op(self, proxy, kind, args, kwargs):
        target = object.__getattribute__(proxy, "_number")
        inputs = []
        digest = f"#{target}.{kind}(" + ",".join([_digest(a, inputs) for a in args]
                                                  + [f"{k}={_digest(v, inputs)}" for k, v in sorted(kwargs.items())]) + ")"
        files = _files(args, kwargs)
        if self.mode == "replay":
            return self._replay(digest, inputs, files)
        extras = {"inputs": [self._keep_array(a) for a in inputs]} if inputs else {}
        real = object.__getattribute__(proxy, "_real")
        before = {p: (p.read_bytes() if p.is_file() else None) for p in files}
        try:
            result = _apply(real, kind, _unwrap(args), _unwrap(kwargs))
        except Exception as exc:
            self._keep([digest, {"raised": [type(exc).__name__, str(exc)[:500]]}, extras])
            raise
        written = {str(i): self._keep_array(np.frombuffer(p.read_bytes(), dtype=np.uint8))
                   for i, p in enumerate(files) if p.is_file() and p.read_bytes() != before[p]}
        if written:
            extras["files"] = written
        return self._answer(digest, kind, result, extras, _float_source_dtype(real, kind))

    def _keep_array(self, array) -> int:
        self.arrays.append(array)
        return len(self.arrays) - 1

    def _answer(self, digest, kind, result, extras, source_dtype=None):
        if kind == "iter":
            self._keep([digest, {"items": len(result)}, extras])
            return [self._answer(f"{digest}[{i}]", "item", item, {}) for i, item in enumerate(result)]
        value, plain = _plain(result)
        if plain:
            answer = {"value": _encode(value, self.arrays)}
            if source_dtype is not None:
                answer["dtype"] = source_dtype
            self._keep([digest, answer, extras])
            return value
        self._keep([digest, {"object": type(result).__qualname__}, extras])
        return _Proxy(self, len(self.events), result)

    def _keep(self, event):
        self.events.append(event)
        if self.mode == "check":
            self._compare(len(self.events) - 1)

    def _stored_event(self, index):
        if self.stored is None:
            raise ReferenceMismatch(
                f"{self.test_id}: no stored PyTorch answers for this test. With PyTorch installed, "
                f"record them: TINYTORCH_PARITY=record pytest {self.test_id.split('::')[0]}")
        if index >= len(self.stored):
            raise ReferenceMismatch(
                f"{self.test_id}: the test asks PyTorch more than was recorded ({len(self.stored)} steps). "
                f"If the test changed, record its answers again (TINYTORCH_PARITY=record).")
        return self.stored[index]

    def _same_inputs(self, index, digest, inputs) -> str | None:
        """Why the question at `index` is not the one recorded (None if it is)."""
        event = self._stored_event(index)
        if event[0] != digest:
            return f"the test gives PyTorch {digest}, but the stored answer is for {event[0]}"
        for i, (mine, ref) in enumerate(zip(inputs, event[2].get("inputs", []))):
            problem = _differs(mine, self.stored_arrays[ref])
            if problem:
                return f"input {i} of {digest} differs from the recorded one: {problem}"
        return None

    def _compare(self, index):
        mine, theirs = self.events[index], self._stored_event(index)
        inputs = [self.arrays[i] for i in mine[2].get("inputs", [])]
        problem = self._same_inputs(index, mine[0], inputs)
        a, b = mine[1], theirs[1]
        if problem is None and "value" in a and "value" in b:
            problem = _differs(_decode(a["value"], self.arrays), _decode(b["value"], self.stored_arrays),
                               a.get("dtype", b.get("dtype")))
            problem = problem and f"step {index} ({mine[0]}): live PyTorch answers differently: {problem}"
        elif problem is None and (set(a) != set(b) or ("items" in a and a != b)
                                  or ("raised" in a and a["raised"][0] != b["raised"][0])):
            problem = f"step {index} ({mine[0]}): live PyTorch gave {a}, the stored answer is {b}"
        if problem:
            raise ReferenceMismatch(f"{self.test_id}: {problem}. If the test changed on purpose, record "
                                    f"its answers again: TINYTORCH_PARITY=record")

    def _replay(self, digest, inputs=(), files=()):
        index = len(self.events)
        problem = self._same_inputs(index, digest, inputs)
        if problem:
            raise ReferenceMismatch(
                f"{self.test_id}: step {index}: {problem}. Without PyTorch installed, a parity test replays "
                f"PyTorch's answers to the inputs they were recorded for: a value your code computed and the "
                f"test handed to PyTorch differs from the reference's (or the test changed). Check the "
                f"values your code gives this test, or install PyTorch (pip install -e '.[parity]') to "
                f"compare live.")
        event = self.stored[index]
        self.events.append(event)
        answer = event[1]
        for i, ref in event[2].get("files", {}).items():
            files[int(i)].write_bytes(self.stored_arrays[ref].tobytes())  # what PyTorch wrote there
        if "raised" in answer:
            name, message = answer["raised"]
            kind = getattr(builtins, name, None)
            raise (kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError)(message)
        if "items" in answer:
            return [self._replay(f"{digest}[{i}]") for i in range(answer["items"])]
        if "value" in answer:
            return _decode(answer["value"], self.stored_arrays)
        return _Proxy(self, index + 1)


def _float_source_dtype(real, kind) -> str | None:
    """The dtype of the tensor whose numbers an answer holds as Python floats (`.item()`,
    `.tolist()`, `float(t)`), if it is a floating one: a float32 tensor's numbers drift as
    float32 does, though Python holds them in float64."""
    source = getattr(real, "__self__", None) if kind == "call" else real
    dtype = str(getattr(source, "dtype", "")).removeprefix("torch.")
    return dtype if dtype in {str(d) for d in DRIFT} else None


def _differs(mine, theirs, float_dtype=None) -> str | None:
    """Why a value differs from the stored one (None if it does not). Arrays drift as their
    dtype does; Python floats as `float_dtype`, the dtype of the tensor they came from
    (float64 when they came from no tensor)."""
    if isinstance(mine, np.ndarray) or isinstance(theirs, np.ndarray) or isinstance(mine, np.generic):
        mine, theirs = np.asarray(mine), np.asarray(theirs)
        if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
            return f"{mine.dtype}{mine.shape} against {theirs.dtype}{theirs.shape}"
        if mine.dtype in DRIFT:
            rtol, atol = DRIFT[mine.dtype]
            if not np.allclose(mine, theirs, rtol=rtol, atol=atol, equal_nan=True):
                return f"largest difference {np.nanmax(np.abs(mine - theirs)):.3g}"
            return None
        return None if np.array_equal(mine, theirs) else "values differ"
    if isinstance(mine, float) and isinstance(theirs, float):
        rtol, atol = DRIFT[np.dtype(float_dtype or np.float64)]
        same = (math.isnan(mine) and math.isnan(theirs)) or math.isclose(mine, theirs, rel_tol=rtol, abs_tol=atol)
        return None if same else f"{mine!r} against {theirs!r}"
    if isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)) and len(mine) == len(theirs):
        for m, t in zip(mine, theirs):
            problem = _differs(m, t, float_dtype)
            if problem:
                return problem
        return None
    if isinstance(mine, dict) and isinstance(theirs, dict) and mine.keys() == theirs.keys():
        for key in mine:
            problem = _differs(mine[key], theirs[key], float_dtype)
            if problem:
                return problem
        return None
    return None if mine == theirs else f"{mine!r} against {theirs!r}"


# ---------------------------------------------------------------- stored files

def load(path: Path) -> dict:
    """{test name: (events, arrays)} stored beside a test file ({} if none)."""
    if not path.is_file():
        return {}
    with np.load(path, allow_pickle=False) as data:
        index = json.loads(bytes(data["index"]).decode("utf-8"))
        return {name: (entry["events"], [data[f"{name}/{i}"] for i in range(entry["arrays"])])
                for name, entry in index.items()}


def save(path: Path, tests: dict) -> None:
    """Write {test name: (events, arrays)} beside a test file, in a stable order."""
    index, arrays = {}, {}
    for name in sorted(tests):
        events, values = tests[name]
        index[name] = {"events": events, "arrays": len(values)}
        for i, value in enumerate(values):
            arrays[f"{name}/{i}"] = value
    arrays["index"] = np.frombuffer(json.dumps(index, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    tmp.replace(path)

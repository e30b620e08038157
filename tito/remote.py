"""Objects that live in another process, so that no verdict is decided where student code runs.

`tito grade` runs a module's tests in a judge process that never imports the student's package.
Every `tinytorch` name a test uses stands for an object in an answerer process that imports
the package and only answers: each operation on it (an attribute, a call, an operator, an
iteration, a `with`) is a request over a pipe, and the reply is a plain value (numbers,
strings, arrays, containers, builtin exceptions) or a reference to an object that stays where
it was made. Functions and objects of the tests handed to the package travel the other way, as
references the answerer calls back. Classes a test derives from a package class exist on both
sides: the test's methods run in the judge, called back when the package calls them.

Messages are JSON followed by raw array bytes: nothing is unpickled, arrays are rebuilt only
with numeric, boolean or string dtypes, and the answerer may use only the public attributes of
what the judge handed it. A reply can therefore only be a value; the comparisons, the counting
and the report stay with the judge (tito/judge.py).

This file is standalone (the standard library and numpy): the sandbox runs it as a script,
`python remote.py FD_IN FD_OUT`, with the student's package on its path.
"""
from __future__ import annotations

import builtins
import collections
import collections.abc
import copy
import importlib
import io
import json
import operator
import os
import struct
import sys
import types
import weakref

import numpy as np

PACKAGE = "tinytorch"
_KINDS = "biufcUS"  # the array dtypes a message may carry (never object)
_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift", "rshift",
           "eq", "ne", "lt", "le", "gt", "ge")
_INPLACE = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor")
_UNARY = ("neg", "pos", "abs", "invert")
# Requests whose list or dict answer is a new value (sent by value); any other op's list or dict
# is one an object holds (an attribute, an item), sent by reference so the test can change it.
_COMPUTING = {"call", "callattr", "binop", "unary", "dir", "copy", "deepcopy"}
# What the answerer may ask of the judge's objects it was handed (never a private attribute).
_CALLBACK_OPS = {"call", "getattr", "getitem", "len", "iter", "next", "bool", "repr", "str", "contains"}


class RemoteError(RuntimeError):
    """The other process broke the protocol, ended, or is no longer the one an object came from."""


class _Abort(BaseException):
    """Raised in the answerer where a judge callback stopped the test (a pytest outcome such
    as a failure, or an interrupt): student code that catches Exception does not swallow it."""


# ---------------------------------------------------------------- framing

def _read_exact(stream, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            raise EOFError
        got += k
    return buf


def _dtype(text: str) -> np.dtype:
    dtype = np.dtype(text)
    if dtype.kind not in _KINDS or dtype.hasobject:
        raise RemoteError(f"an array of dtype {text!r} cannot travel")
    return dtype


# ---------------------------------------------------------------- the connection

class Connection:
    """One end of the pipe pair: sends requests and serves the other side's, nested to any
    depth (a call into the package may call a test's function back, which may call the
    package again). `side` is "j" (the judge) or "w" (the answerer)."""

    def __init__(self, read_fd: int | None, write_fd: int | None, side: str, *, on_break=None, start=None,
                 started=None):
        """`start` (instead of the two file descriptors): called at the first request, it
        starts the other side and returns (read_fd, write_fd); then `started()` is called."""
        self.side = side
        self._r = self._w = None
        self._start, self._started = start, started
        if start is None:
            self._open(read_fd, write_fd)
        self._exported: dict[int, list] = {}  # number -> [object, times sent]
        self._numbers: dict[int, int] = {}  # id(object) -> number
        self._next = 1
        self._proxies = weakref.WeakValueDictionary()  # number -> proxy of the other side's object
        self._cells: dict[int, list] = {}  # number -> [times received], while its proxy lives
        self._released: list = []  # [number, times] to tell the other side
        self._classes: dict[int, type] = {}  # number -> local class standing for a remote class
        self._aborts: dict[int, BaseException] = {}
        # Arrays both sides see (a tensor's storage and a test's view of it): each side holds the
        # other's as a copy, and every message carries the changes made since the last one, so
        # that while one side runs at a time the two behave as one memory.
        self._owned: dict[int, np.ndarray] = {}  # number of a root of mine the other side holds -> snapshot
        self._copies = weakref.WeakValueDictionary()  # number -> my copy of the other side's root
        self._copy_numbers: dict[int, int] = {}  # id(copy) -> number
        self._copy_snapshots: dict[int, np.ndarray] = {}
        # The copies received last stay alive a while: `t.numpy()[0] = 1` writes through a copy no
        # name holds, and the write reaches the owner with the next message.
        self._recent: collections.deque = collections.deque(maxlen=RECENT_COPIES)
        self._view_numbers: dict[int, int] = {}  # id(my view of a copy) -> the other side's number for it
        self._by_value: list[int] = []
        self._described: set[int] = set()
        self._pending_warnings: list = []
        self._twins: dict[int, type] = {}
        self._function_numbers: dict[int, int] = {}
        # Lists, dicts and sets passed as arguments: the answer may be the very one passed, and
        # a change the callee made to one is made to the caller's too.
        self._tagging: list | None = None
        self._received_containers: dict | None = None
        self._returning: dict | None = None
        self._sent_containers: list | None = None  # id(my stand-in for a test's function) -> its number  # number -> a namedtuple class standing for the other side's  # classes of mine the other side has a stand-in for  # indices of the arrays of the message being decoded sent by value
        self.callback_failures: list[BaseException] = []
        self.broken: str | None = None
        self._on_break = on_break
        self.requests = 0

    def _open(self, read_fd: int, write_fd: int) -> None:
        self._r = io.open(read_fd, "rb", buffering=1 << 16)
        self._w = io.open(write_fd, "wb", buffering=0)

    # -- sending and receiving

    def _send(self, header: dict, arrays: list) -> None:
        self._sync_out(header, arrays)
        if self.side == "w":
            _forward_output(self, header, arrays)
        header["arrays"] = [[a.dtype.str, list(a.shape)] for a in arrays]
        if self._released:
            header["release"], self._released = self._released, []
        data = json.dumps(header, separators=(",", ":")).encode("utf-8")
        self._w.write(b"".join([struct.pack("<Q", len(data)), data]
                               + [np.ascontiguousarray(a).tobytes() for a in arrays]))

    def _receive(self) -> tuple[dict, list]:
        size = struct.unpack("<Q", bytes(_read_exact(self._r, 8)))[0]
        if size > MESSAGE_LIMIT:
            raise RemoteError(f"a message of {size} bytes")
        header = json.loads(bytes(_read_exact(self._r, size)).decode("utf-8"))
        if not isinstance(header, dict):
            raise RemoteError("a message that is not an object")
        arrays = []
        for text, shape in header.get("arrays", []):
            dtype = _dtype(text)
            shape = tuple(int(s) for s in shape)
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if count < 0 or count * dtype.itemsize > MESSAGE_LIMIT:
                raise RemoteError(f"an array of {count} items")
            buf = _read_exact(self._r, count * dtype.itemsize)
            arrays.append(np.frombuffer(buf, dtype=dtype).reshape(shape))  # writable: a bytearray
        for number, times in header.get("release", []):
            self._release(int(number), int(times))
        self._sync_in(header, arrays)
        self._by_value = []
        if "out" in header or "err" in header or "warnings" in header:
            self._printed(header, arrays)
        return header, arrays

    def _printed(self, header: dict, arrays: list) -> None:
        """The answerer's prints, here (where pytest captures them); its warnings, issued here
        when the reply is taken (a warning filter that raises must not break the pipe)."""
        if header.get("out"):
            sys.stdout.write(str(header["out"]))
        if header.get("err"):
            sys.stderr.write(str(header["err"]))
        for category, message in header.get("warnings", []):
            self._pending_warnings.append((self.decode(category, arrays), str(message)))

    def _issue_warnings(self) -> None:
        import warnings
        pending, self._pending_warnings = self._pending_warnings, []
        for category, message in pending:
            if not (isinstance(category, type) and issubclass(category, Warning)):
                category = UserWarning
            warnings.warn(message, category, stacklevel=3)

    def _sync_out(self, header: dict, arrays: list) -> None:
        changes = []
        for number, snapshot in self._owned.items():
            root = self._exported[number][0]
            if root.tobytes() != snapshot.tobytes():
                self._owned[number] = root.copy()
                arrays.append(root)
                changes.append([self.side, number, len(arrays) - 1])
        for number, snapshot in list(self._copy_snapshots.items()):
            copy_ = self._copies.get(number)
            if copy_ is not None and copy_.tobytes() != snapshot.tobytes():
                self._copy_snapshots[number] = copy_.copy()
                arrays.append(copy_)
                changes.append([_other(self.side), number, len(arrays) - 1])
        if changes:
            header["sync"] = changes

    def _sync_in(self, header: dict, arrays: list) -> None:
        for owner, number, index in header.get("sync", []):
            new = arrays[int(index)]
            if owner == self.side:
                entry = self._exported.get(int(number))
                root = entry[0] if entry is not None else None
                snapshots = self._owned
            else:
                root = self._copies.get(int(number))
                snapshots = self._copy_snapshots
            if root is not None and root.shape == new.shape and root.dtype == new.dtype:
                if root.flags.writeable:
                    root[...] = new
                snapshots[int(number)] = new.copy()

    def _fail(self, why: str) -> RemoteError:
        if self.broken is None:
            self.broken = why
            if self._on_break is not None:
                self._on_break()
        return RemoteError(self.broken)

    def request(self, op: str, target=None, *args, **fields):
        """Ask the other side to do `op` on its object `target` with `args`; its answer."""
        if self.broken is not None:
            raise RemoteError(self.broken)
        if self._r is None:
            start, self._start = self._start, None
            self._open(*start(self))
            if self._started is not None:
                self._started()
        self.requests += 1
        arrays: list = []
        header = dict(fields, op=op)
        if target is not None:
            header["target"] = target
        self._tagging = []
        try:
            header["args"] = [self.encode(a, arrays) for a in args]
        finally:
            containers, self._tagging = self._tagging, None
        sent = list(arrays)
        try:
            self._send(header, arrays)
            while True:
                message, received = self._receive()
                if "op" not in message:
                    break
                self._serve(message, received)
        except Exception as exc:  # noqa: BLE001 - whatever came is not an answer
            raise self._fail(f"the package's process ended or broke the protocol ({type(exc).__name__}: {exc})") \
                from None
        except BaseException:  # an interrupt or a test timeout while the other side works
            self._fail("the package's process was stopped while it was answering (a time limit or an interrupt)")
            raise
        return self._answer(message, received, sent, containers)

    def _answer(self, message: dict, arrays: list, sent: list, containers: list):
        self._issue_warnings()
        for index, slot in message.get("writeback", []):
            original, new = sent[index], arrays[slot]
            if original.flags.writeable and original.shape == new.shape:
                original[...] = new
        self._sent_containers = containers
        try:
            for index, items in message.get("changed", []):
                _refill(containers[int(index)], self.decode(items, arrays))
            if "raised" in message:
                raise self._exception(message["raised"], arrays)
            return self.decode(message["value"], arrays)
        finally:
            self._sent_containers = None

    def serve_forever(self) -> None:
        """The answerer's loop: serve requests until the judge closes the pipe."""
        while True:
            try:
                message, arrays = self._receive()
            except EOFError:
                return
            self._serve(message, arrays)

    def _serve(self, message: dict, arrays: list) -> None:
        by_value = list(self._by_value)  # filled in as the arguments are decoded
        before = {}
        out: list = []
        try:
            self._issue_warnings()
            if self.side == "j" and message["op"] not in _CALLBACK_OPS:
                raise RemoteError(f"the package asked the tests for {message['op']!r}, which is not allowed")
            self._received_containers = {}
            try:
                args = [self.decode(a, arrays) for a in message.get("args", [])]
            finally:
                received, self._received_containers = self._received_containers, None
            by_value = list(self._by_value)
            before = {i: arrays[i].tobytes() for i in by_value}
            shallow = {k: _shallow(c) for k, c in received.items()}
            value = self._perform(message, args)
            if self.side == "w" and type(value) in (list, dict, set, collections.OrderedDict) \
                    and message["op"] not in _COMPUTING:
                value = _ByReference(value)  # a list an object holds: the test may change it there
            self._returning = {id(c): k for k, c in received.items()}
            try:
                reply = {"value": self.encode(value, out)}
                # a list or dict the test passed and the package changed: changed there too
                changed = [[k, self.encode(_contents(c), out)] for k, c in received.items() if _shallow(c) != shallow[k]]
            finally:
                self._returning = None
            if changed:
                reply["changed"] = changed
        except BaseException as exc:  # noqa: BLE001 - every outcome is an answer
            if self.side == "j" and isinstance(exc, AssertionError):
                self.callback_failures.append(exc)  # failed in a callback: the test fails, whatever the package does
            out = []
            reply = {"raised": self._encode_exception(exc, out)}
        changed = [i for i, b in before.items() if arrays[i].tobytes() != b]
        if changed:
            reply["writeback"] = []
            for i in changed:
                out.append(arrays[i])
                reply["writeback"].append([i, len(out) - 1])
        self._send(reply, out)

    def _perform(self, message: dict, args: list):
        if self.side == "j":
            return _perform_judge(self, message, args)
        return _perform_answerer(self, message, args)

    # -- objects of this side, sent by reference

    def export(self, obj) -> int:
        number = self._numbers.get(id(obj))
        if number is None or self._exported[number][0] is not obj:
            number, self._next = self._next, self._next + 1
            self._exported[number] = [obj, 0]
            self._numbers[id(obj)] = number
        self._exported[number][1] += 1
        return number

    def exported(self, number: int):
        entry = self._exported.get(number)
        if entry is None:
            raise RemoteError(f"no object #{number} here (released, or from an earlier process)")
        return entry[0]

    def _release(self, number: int, times: int) -> None:
        entry = self._exported.get(number)
        if entry is not None:
            entry[1] -= times
            if entry[1] <= 0:
                del self._exported[number]
                self._numbers.pop(id(entry[0]), None)
                self._owned.pop(number, None)

    def _forget(self, number: int, cell: list) -> None:
        if self._cells.get(number) is cell:
            del self._cells[number]
        self._released.append([number, cell[0]])

    def _proxy(self, number: int, make):
        proxy = self._proxies.get(number)
        if proxy is not None:
            self._cells[number][0] += 1
            return proxy
        proxy = make()
        cell = [1]
        self._cells[number] = cell
        self._proxies[number] = proxy
        weakref.finalize(proxy, self._forget, number, cell)
        return proxy

    # -- values

    def encode(self, value, arrays: list):
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return value
        if kind is int or kind is _Number:
            return {"t": "i", "v": str(int(value))}
        if kind is float:
            return {"t": "f", "v": repr(value)}
        if isinstance(value, np.ndarray) and value.dtype.kind in _KINDS:
            return self._encode_array(value, arrays)
        if isinstance(value, np.generic) and value.dtype.kind in _KINDS:
            arrays.append(np.asarray(value))
            return {"t": "s", "i": len(arrays) - 1}
        if kind in _MUTABLE:
            if self._returning and id(value) in self._returning:
                return {"t": "sent", "k": self._returning[id(value)]}  # the very one it came as
            if kind is dict or kind is collections.OrderedDict:
                out = {"t": "dict" if kind is dict else "odict",
                       "v": [[self.encode(k, arrays), self.encode(v, arrays)] for k, v in value.items()]}
            else:
                out = {"t": kind.__name__, "v": [self.encode(v, arrays) for v in value]}
            if self._tagging is not None:
                out["k"] = len(self._tagging)
                self._tagging.append(value)
            return out
        if kind is tuple or kind is frozenset:
            return {"t": kind.__name__, "v": [self.encode(v, arrays) for v in value]}
        if isinstance(value, tuple) and isinstance(getattr(kind, "_fields", None), tuple):  # a namedtuple
            return {"t": "nt", "cls": self.encode(kind, arrays), "fields": list(kind._fields),
                    "v": [self.encode(v, arrays) for v in value]}
        if kind is complex:
            return {"t": "c", "v": [repr(value.real), repr(value.imag)]}
        if kind is bytes:
            return {"t": "b", "v": value.hex()}
        if kind is slice:
            return {"t": "slice", "v": [self.encode(v, arrays) for v in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"t": "..."}
        if kind is range:
            return {"t": "range", "v": [value.start, value.stop, value.step]}
        if isinstance(value, np.dtype) and value.kind in _KINDS:
            return {"t": "dtype", "v": value.str}
        if isinstance(value, os.PathLike):
            return {"t": "path", "v": os.fspath(value)}
        if isinstance(value, BaseException):
            return {"t": "exc", "v": self._encode_exception(value, arrays)}
        if kind is _ByReference:
            ref = {"t": "r", "o": self.side, "n": self.export(value.value)}
            if self.side == "w":
                ref["cls"] = self.encode(type(value.value), arrays)
            return ref
        mine = _owned_number(value, self)
        if mine is not None:  # a proxy of the other side's object goes back as its number
            return {"t": "r", "o": _other(self.side), "n": mine}
        if isinstance(value, types.ModuleType) and (value.__name__ == PACKAGE or value.__name__.startswith(PACKAGE + ".")):
            return {"t": "mod", "v": value.__name__}
        if isinstance(value, type):
            named = _named_class(value)
            if named is not None:
                return {"t": "class", "m": named[0], "q": named[1]}
            return self._encode_class(value, arrays)
        if self.side == "j" and type(value).__name__ == "CPUDispatcher" and hasattr(value, "py_func"):
            return {"t": "njit", "v": _source(value.py_func)}  # a test's numba function, compiled there
        ref = {"t": "r", "o": self.side, "n": self.export(value)}
        if isinstance(value, (types.GeneratorType, types.CoroutineType)):
            ref["gen"] = type(value).__name__
        if callable(value):
            ref["call"] = True
            ref["name"] = str(getattr(value, "__name__", type(value).__name__))
            if isinstance(value, types.FunctionType):
                ref["function"] = True
                ref["doc"] = value.__doc__ if isinstance(value.__doc__, str) else None
        if self.side == "w":  # the judge's proxy is an instance of the class's stand-in
            ref["cls"] = self.encode(type(value), arrays)
        return ref

    def _encode_array(self, value: np.ndarray, arrays: list) -> dict:
        """By value, or, for an array whose memory is shared (small, plain), as a view of its
        root: the root's owner and number (with its contents, when the owner sends it) and the
        sender's number for the array object itself (so that it comes back as the same object)."""
        known = self._view_numbers.get(id(value))
        if known is not None and self._proxies.get(known) is value:
            return {"t": "rv", "n": known}  # an array object of the other side's, back to it
        root = _root(value)
        number = self._copy_numbers.get(id(root))
        if number is not None and self._copies.get(number) is root:  # my copy of the other side's root
            out = {"t": "v", "o": _other(self.side), "n": number, **_layout(value, root)}
            if value is not root:
                out["id"] = self.export(value)
            return out
        if not (0 < root.nbytes <= SHARED_LIMIT and root.flags.c_contiguous and root.dtype.kind in _KINDS
                and not root.dtype.hasobject and type(root) is np.ndarray):
            arrays.append(value.view(np.ndarray))
            return {"t": "a", "i": len(arrays) - 1}
        number = self.export(root)
        if number not in self._owned:
            self._owned[number] = root.copy()
        arrays.append(root)
        out = {"t": "v", "o": self.side, "n": number, "i": len(arrays) - 1, **_layout(value, root)}
        if value is not root:
            out["id"] = self.export(value)
        return out

    def _decode_view(self, data: dict, arrays: list) -> np.ndarray:
        number = int(data["n"])
        if data["o"] == self.side:
            root = self.exported(number)
        else:
            root = self._copies.get(number)
            if "i" in data:
                content = arrays[int(data["i"])]
                if root is None or root.shape != content.shape or root.dtype != content.dtype:
                    root = content.copy()  # owns its memory, as the original does
                    self._copies[number] = root
                    self._copy_numbers[id(root)] = number
                    self._proxy_cell(number, root)
                else:
                    if root.flags.writeable:
                        root[...] = content
                    self._cells[number][0] += 1
                self._copy_snapshots[number] = root.copy()
                self._recent.append(root)
            elif root is None:
                raise RemoteError(f"a view of array #{number}, which this side no longer holds")
        if "id" not in data:
            return root
        dtype = _dtype(str(data["dtype"]))
        shape, strides = tuple(int(x) for x in data["shape"]), tuple(int(x) for x in data["strides"])
        offset = int(data["offset"])
        view_number = int(data["id"])

        def make():
            view = np.ndarray(shape, dtype=dtype, buffer=root, offset=offset, strides=strides)
            if not data.get("writeable", True):
                view.flags.writeable = False
            self._view_numbers[id(view)] = view_number
            return view
        return self._proxy(view_number, make)

    def _proxy_cell(self, number: int, copy_: np.ndarray) -> None:
        """Count a copy like a proxy: when it dies, the owner may forget the root."""
        cell = [1]
        self._cells[number] = cell

        def forget(number=number, cell=cell, key=id(copy_)):
            self._copy_numbers.pop(key, None)
            self._copy_snapshots.pop(number, None)
            self._forget(number, cell)
        weakref.finalize(copy_, forget)

    def _encode_class(self, cls: type, arrays: list) -> dict:
        number = self.export(cls)
        if number in self._described:  # the other side keeps every class it was sent
            return {"t": "r", "o": self.side, "n": number, "class": cls.__name__}
        self._described.add(number)
        ref = {"t": "r", "o": self.side, "n": number, "class": cls.__name__,
               "qualname": cls.__qualname__, "module": cls.__module__}
        mirror = cls.__dict__.get("_tito_mirror")
        if mirror is not None and self.side == "w":
            ref["mirror"] = mirror
        elif issubclass(cls, BaseException):
            ref["bases"] = [self.encode(b, arrays) for b in cls.__bases__]
        else:
            ref["methods"] = sorted({name for klass in cls.__mro__[:-1] for name, v in vars(klass).items()
                                     if isinstance(v, types.FunctionType)
                                     and (name == "__init__" or not name.startswith("__"))})
            ref["special"] = _special_methods(cls)
        return ref

    def decode(self, data, arrays: list):
        if data is None or isinstance(data, (bool, str)):
            return data
        if not isinstance(data, dict):
            raise RemoteError("a malformed value")
        kind = data["t"]
        if kind == "i":
            return int(data["v"])
        if kind == "f":
            return float(data["v"])
        if kind == "a":
            self._by_value.append(data["i"])
            return arrays[data["i"]]
        if kind == "v":
            return self._decode_view(data, arrays)
        if kind == "rv":
            return self.exported(int(data["n"]))
        if kind == "njit" and self.side == "w":
            return _compiled(str(data["v"]))
        if kind == "s":
            return arrays[data["i"]][()]
        if kind in ("list", "tuple", "set", "frozenset"):
            out = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[kind](
                self.decode(v, arrays) for v in data["v"])
            return self._received(out, data)
        if kind in ("dict", "odict"):
            out = (dict if kind == "dict" else collections.OrderedDict)(
                (self.decode(k, arrays), self.decode(v, arrays)) for k, v in data["v"])
            return self._received(out, data)
        if kind == "sent":
            return self._sent_containers[int(data["k"])]
        if kind == "nt":
            return self._namedtuple(data, arrays)(*(self.decode(v, arrays) for v in data["v"]))
        if kind == "c":
            return complex(float(data["v"][0]), float(data["v"][1]))
        if kind == "b":
            return bytes.fromhex(data["v"])
        if kind == "slice":
            return slice(*(self.decode(v, arrays) for v in data["v"]))
        if kind == "...":
            return Ellipsis
        if kind == "range":
            return range(*(int(v) for v in data["v"]))
        if kind == "dtype":
            return _dtype(data["v"])
        if kind == "path":
            import pathlib
            return pathlib.Path(str(data["v"]))
        if kind == "exc":
            return self._exception(data["v"], arrays)
        if kind == "mod":
            return self._module(str(data["v"]))
        if kind == "class":
            return self._named(str(data["m"]), str(data["q"]))
        if kind == "r":
            number = int(data["n"])
            if data["o"] == self.side:
                return self.exported(number)
            return self._remote(number, data, arrays)
        raise RemoteError(f"a value of unknown kind {kind!r}")

    def _received(self, container, data: dict):
        if "k" in data and self._received_containers is not None:
            self._received_containers[int(data["k"])] = container
        return container

    def _namedtuple(self, data: dict, arrays: list) -> type:
        """The class of a namedtuple that came by value: the owner's own, or a twin here with
        the same name and fields (sent back, it is the owner's class again)."""
        ref = data["cls"]
        if ref.get("t") != "r":
            return self.decode(ref, arrays)
        number = int(ref["n"])
        if ref["o"] == self.side:
            return self.exported(number)
        twin = self._twins.get(number)
        if twin is None:
            fields = [str(f) for f in data["fields"]]
            twin = collections.namedtuple(str(ref.get("class", "namedtuple")), fields)
            twin._tito_remote = number
            self._twins[number] = twin
        return twin

    def _module(self, name: str):
        if self.side == "w":
            return importlib.import_module(name)
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            raise RemoteError(f"the package named a module outside it: {name!r}")
        return importlib.import_module(name)  # through the judge's finder: a module proxy

    def _named(self, module: str, qualname: str):
        """A class both sides have under one name (numpy's, the builtins'): the judge looks it
        up only among modules it has already imported, never importing on request."""
        if self.side == "w" or module.split(".")[0] in _NAMED_PACKAGES:
            found = importlib.import_module(module)
        else:
            found = sys.modules.get(module)
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if not isinstance(found, type):
            raise RemoteError(f"no class {module}.{qualname} here")
        return found

    def _remote(self, number: int, data: dict, arrays: list):
        if "class" in data:
            # (a namedtuple class that first came with one of its values is its twin here)
            local = self._classes.get(number) or self._twins.get(number)
            if local is None:
                local = self._local_class(number, data, arrays)
                self._classes[number] = local
            return local
        if self.side == "w":
            if data.get("function"):
                return self._proxy(number, lambda: _judge_function(self, number, str(data.get("name", "f")),
                                                                   data.get("doc")))
            kind = _CallableStub if data.get("call") else _STUBS.get(data.get("gen"), _Stub)
            return self._proxy(number, lambda: kind(self, number, str(data.get("name", ""))))
        cls = self.decode(data["cls"], arrays) if "cls" in data else _AnyProxy
        if not isinstance(cls, RemoteMeta):
            cls = _like(cls) if isinstance(cls, type) else _AnyProxy
        return self._proxy(number, lambda: _new_proxy(cls, self, number))

    def _local_class(self, number: int, data: dict, arrays: list) -> type:
        name, qualname = str(data["class"]), str(data["qualname"])
        module = str(data["module"])
        if self.side == "w":  # a class of the tests (handed to the package): call it back
            return _CallableStub(self, number, name)
        if "mirror" in data:
            return self._classes[int(data["mirror"])]
        if "bases" in data:  # an exception class: a real one here, with the same ancestry
            bases = tuple(self.decode(b, arrays) for b in data["bases"])
            bases = tuple(b for b in bases if isinstance(b, type) and issubclass(b, BaseException)) or (Exception,)
            return type(name, bases, {"__module__": module, "__qualname__": qualname, "_tito_remote": number})
        namespace = {"__module__": module, "__qualname__": qualname, "_tito_remote": number,
                     "__doc__": Proxy.__dict__["__doc__"]}
        for special, has in (data.get("special") or {}).items():
            if special == "__array_ufunc__":
                namespace[special] = None if has is None else np.ndarray.__array_ufunc__
            elif special in _OPTIONAL:
                namespace[special] = _OPTIONAL[special]
        for method in data.get("methods", []):
            namespace[str(method)] = _forwarder(self, number, str(method))
        return RemoteMeta(name, (Proxy,), namespace, _tito_connection=self)

    # -- exceptions

    def _encode_exception(self, exc: BaseException, arrays: list) -> dict:
        if self.side == "j" and not isinstance(exc, Exception):
            token = id(exc)
            self._aborts[token] = exc
            return {"abort": token}
        if isinstance(exc, _Abort):
            return {"abort": exc.args[0]}
        cls = type(exc)
        if not isinstance(exc, Exception):
            cls, args = RuntimeError, [f"{type(exc).__name__}: {exc}"]
        else:
            args = list(exc.args)
        try:
            encoded_args = [self.encode(a, arrays) for a in args if _plain(a)]
            if len(encoded_args) != len(args):
                encoded_args = [str(exc)]
            out = {"cls": self.encode(cls, arrays), "args": encoded_args, "str": str(exc)[:4000]}
            cause = exc.__cause__
            if isinstance(cause, BaseException) and cause is not exc and _depth(exc) < 8:
                out["cause"] = self._encode_exception(cause, arrays)
            return out
        except Exception:  # noqa: BLE001 - an exception we cannot describe is still an exception
            return {"cls": {"t": "class", "m": "builtins", "q": "RuntimeError"}, "args": [str(exc)[:4000]],
                    "str": str(exc)[:4000]}

    def _exception(self, data: dict, arrays: list) -> BaseException:
        if "abort" in data:
            token = data["abort"]
            if self.side == "j":
                return self._aborts.pop(token, None) or RemoteError("the package ended a test's callback")
            return _Abort(token)
        cls = self.decode(data["cls"], arrays)
        args = [self.decode(a, arrays) for a in data.get("args", [])]
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            cls = RuntimeError
        if self.side == "j" and not issubclass(cls, Exception):
            cls, args = RuntimeError, [str(data.get("str", ""))]
        try:
            exc = cls(*args)
        except Exception:  # noqa: BLE001 - a constructor with other arguments
            exc = RuntimeError(str(data.get("str", "")))
        if "cause" in data:
            exc.__cause__ = self._exception(data["cause"], arrays)
        return exc


SHARED_LIMIT = 4 << 20  # bytes: larger arrays travel by value (no shared memory, no identity)
RECENT_COPIES = 32
MESSAGE_LIMIT = 1 << 31  # bytes: a longer header or array is a broken answerer, not an answer
_NAMED_PACKAGES = ("numpy", "collections", "pathlib", "fractions", "decimal")  # classes both sides share by name


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns `array`'s memory (through as_strided's holder too)."""
    while True:
        base = array.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)  # numpy's DummyArray from as_strided
        if not isinstance(base, np.ndarray):
            return array
        array = base


def _layout(view: np.ndarray, root: np.ndarray) -> dict:
    offset = view.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return {"dtype": view.dtype.str, "shape": list(view.shape), "strides": list(view.strides), "offset": offset,
            "writeable": bool(view.flags.writeable)}


_MUTABLE = (list, dict, set, collections.OrderedDict)


def _shallow(container):
    """What a container holds, compared by identity (a changed list or dict shows here)."""
    if isinstance(container, dict):
        return [(id(k), id(v)) for k, v in container.items()]
    return [id(v) for v in container]


def _contents(container):
    if isinstance(container, dict):
        return [[k, v] for k, v in container.items()]
    return list(container)


def _refill(container, items) -> None:
    if isinstance(container, dict):
        container.clear()
        container.update((k, v) for k, v in items)
    elif isinstance(container, list):
        container[:] = items
    else:
        container.clear()
        container.update(items)


def _depth(exc: BaseException) -> int:
    depth = 0
    while exc.__cause__ is not None and depth < 9:
        exc, depth = exc.__cause__, depth + 1
    return depth


def _other(side: str) -> str:
    return "w" if side == "j" else "j"


def _plain(value) -> bool:
    if value is None or type(value) in (bool, int, float, str, bytes, complex):
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype.kind in _KINDS
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    return False


def _named_class(cls: type):
    """(module, qualname) of a class outside the package that the other side can look up."""
    module = getattr(cls, "__module__", "") or ""
    if module == PACKAGE or module.startswith(PACKAGE + ".") or "_tito_remote" in cls.__dict__ \
            or "_tito_mirror" in cls.__dict__ or "<locals>" in cls.__qualname__:
        return None
    if module == "builtins" or module.split(".")[0] in _NAMED_PACKAGES:
        found = sys.modules.get(module)
        for part in cls.__qualname__.split("."):
            found = getattr(found, part, None)
        if found is cls:
            return module, cls.__qualname__
    return None


def _owned_number(value, conn: Connection):
    """The number of the other side's object that `value` stands for here, if it does."""
    if isinstance(value, Proxy) or isinstance(value, (_Stub, ModuleProxy)):
        if object.__getattribute__(value, "_tito_conn") is not conn:
            raise RemoteError("an object from an earlier package process")
        return object.__getattribute__(value, "_tito_n")
    if isinstance(value, type) and ("_tito_remote" in value.__dict__):
        return value.__dict__["_tito_remote"]
    if isinstance(value, types.FunctionType):
        number = conn._function_numbers.get(id(value))
        if number is not None and conn._proxies.get(number) is value:
            return number
    return None


# ---------------------------------------------------------------- the judge's view of package objects

def _new_proxy(cls, conn: Connection, number: int):
    proxy = object.__new__(cls)
    object.__setattr__(proxy, "_tito_conn", conn)
    object.__setattr__(proxy, "_tito_n", number)
    return proxy


def _forwarder(conn: Connection, class_number: int, name: str):
    """A method of a package class, as `super().name(...)` in a test's subclass reaches it."""
    def method(self, *args, **kwargs):
        return conn.request("callattr", class_number, self, *args, *kwargs.values(), name=name, kwargs=list(kwargs))
    method.__name__ = name
    return method


class Proxy:
    """An object of the student's package, as the judge holds it: every use is a request."""

    __slots__ = ("_tito_conn", "_tito_n", "__weakref__")
    __doc__ = property(lambda self: self._tito("getattr", name="__doc__"))

    def _tito(self, op, *args, **fields):
        return object.__getattribute__(self, "_tito_conn").request(op, object.__getattribute__(self, "_tito_n"),
                                                                    *args, **fields)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and name not in _REMOTE_DUNDERS:
            raise AttributeError(name)  # numpy's and pytest's probes are not the test's questions
        return self._tito("getattr", name=name)

    def __setattr__(self, name, value):
        if type(self) is not Proxy and type(value) in (list, dict, set):  # a test's own subclass keeps
            value = _ByReference(value)  # its containers: the package then appends to the test's list
        self._tito("setattr", value, name=name)

    def __delattr__(self, name):
        self._tito("delattr", name=name)

    def __call__(self, *args, **kwargs):
        return self._tito("call", *args, *kwargs.values(), kwargs=list(kwargs))

    def __getitem__(self, key):
        return self._tito("getitem", key)

    def __setitem__(self, key, value):
        self._tito("setitem", key, value)

    def __delitem__(self, key):
        self._tito("delitem", key)

    def __iter__(self):
        return self._tito("iter")

    def __next__(self):
        return self._tito("next")

    def __len__(self):
        return self._tito("len")

    def __bool__(self):
        return self._tito("bool")

    def __contains__(self, item):
        return self._tito("contains", item)

    def __float__(self):
        return self._tito("float")

    def __int__(self):
        return self._tito("int")

    def __index__(self):
        return self._tito("index")

    def __complex__(self):
        return self._tito("complex")

    def __round__(self, ndigits=None):
        return self._tito("round", ndigits)

    def __array__(self, dtype=None, copy=None):
        out = self._tito("array")
        return out if dtype is None else out.astype(dtype)

    def __enter__(self):
        return self._tito("enter")

    def __exit__(self, exc_type, exc, traceback):
        return self._tito("exit", exc)

    def __repr__(self):
        return self._tito("repr")

    def __str__(self):
        return self._tito("str")

    def __format__(self, spec):
        return self._tito("format", spec)

    def __hash__(self):
        return self._tito("hash")

    def __copy__(self):
        return self._tito("copy")

    def __deepcopy__(self, memo):
        return self._tito("deepcopy")

    def __reduce_ex__(self, protocol):
        raise TypeError("an object of the package under test cannot be pickled by the tests")


_ALWAYS = {"__init__", "__getattr__", "__setattr__", "__delattr__", "__repr__", "__str__", "__format__", "__copy__",
           "__deepcopy__", "__reduce_ex__", "__init_subclass__", "__subclasshook__"}
_REMOTE_DUNDERS = {"__doc__", "__name__", "__qualname__", "__module__", "__file__", "__all__", "__version__",
                   "__dict__", "__defaults__", "__wrapped__", "__self__", "__func__", "__code__", "__annotations__"}


def _foreign(value) -> bool:
    """A test's own object (an approx, a fake) that would reach the package only as a stub."""
    return not (value is None or type(value) in (bool, int, float, complex, str, bytes)
                or isinstance(value, (Proxy, ModuleProxy, np.ndarray, np.generic, list, tuple, dict, set, frozenset,
                                      slice, range, np.dtype, type)))


def _make_operator(name, reflected=False, inplace=False):
    def method(self, other):
        if _foreign(other):
            return NotImplemented  # as a package type would: the test's object answers instead
        return self._tito("binop", other, name=name, reflected=reflected, inplace=inplace)
    return method


for _name in _BINARY:
    setattr(Proxy, f"__{_name}__", _make_operator(_name))
    if _name not in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(Proxy, f"__r{_name}__", _make_operator(_name, reflected=True))
for _name in _INPLACE:
    setattr(Proxy, f"__i{_name}__", _make_operator(_name, inplace=True))
for _name in _UNARY:
    setattr(Proxy, f"__{_name}__", lambda self, _n=_name: self._tito("unary", name=_n))

# The special methods a stand-in has are those its class has there: `hasattr(type(x),
# "__array__")`, len(x) and `x + 1` behave as they would on the package's object.
_OPTIONAL = {name: value for name, value in vars(Proxy).items()
             if name.startswith("__") and callable(value) and name not in _ALWAYS}
for _name in _OPTIONAL:
    delattr(Proxy, _name)
_AnyProxy = type("Proxy", (Proxy,), dict(_OPTIONAL, __slots__=(), __array_ufunc__=np.ndarray.__array_ufunc__,
                                          __doc__=Proxy.__dict__["__doc__"]))


def _special_methods(cls: type) -> dict:
    """{name: None or True} of the special methods (and numpy's override hook) `cls` defines
    above `object`."""
    found = {}
    for name in list(_OPTIONAL) + ["__array_ufunc__"]:
        for klass in cls.__mro__[:-1]:
            if name in vars(klass):
                value = vars(klass)[name]
                if value is not None or name == "__array_ufunc__":
                    found[name] = None if value is None else True
                break
    return found


_LIKE: dict[type, type] = {}


def _like(cls: type) -> type:
    """A proxy class whose objects pass isinstance(x, cls) (a list, an OrderedDict, a numpy
    Generator held by the package), though every use is still a request."""
    like = _LIKE.get(cls)
    if like is None:
        like = type(cls.__name__, (_AnyProxy,), {"__slots__": (), "__class__": property(lambda self, _c=cls: _c),
                                             "__doc__": Proxy.__dict__["__doc__"],
                                             "__array_ufunc__": np.ndarray.__array_ufunc__})
        _LIKE[cls] = like
    return like


class _ByReference:
    """A value to send by reference though it is plain data."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class RemoteMeta(type):
    """The metaclass of the judge's stand-ins for package classes: calling one, isinstance
    and class attributes are requests; a test's subclass is made on the package's side too."""

    def __new__(mcls, name, bases, namespace, _tito_connection=None, **kwargs):
        return super().__new__(mcls, name, bases, namespace, **kwargs)

    def __init__(cls, name, bases, namespace, _tito_connection=None, **kwargs):
        super().__init__(name, bases, namespace, **kwargs)
        if _tito_connection is not None:  # a stand-in made by the connection
            cls._tito_connection = _tito_connection
            return
        conn = next((b._tito_connection for b in bases if isinstance(b, RemoteMeta)), None)
        remote_bases = [b for b in bases if isinstance(b, RemoteMeta)]
        methods, kinds = {}, {}
        for key, value in namespace.items():
            if key in ("__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__slots__",
                       "__classcell__", "__init_subclass__", "__class_getitem__", "__firstlineno__",
                       "__static_attributes__"):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                methods[key], kinds[key] = value.__func__, type(value).__name__
            elif isinstance(value, property):
                methods[key], kinds[key] = value, "property"
            elif isinstance(value, types.FunctionType):
                methods[key], kinds[key] = value, "function"
        getters = {k: [v.fget, v.fset] for k, v in methods.items() if kinds[k] == "property"}
        functions = {k: v for k, v in methods.items() if kinds[k] != "property"}
        attrs = {k: v for k, v in namespace.items() if k not in methods and not k.startswith("__") and _plain(v)}
        number = conn.request("subclass", None, *remote_bases, functions, getters, attrs, name=name,
                              qualname=cls.__qualname__, module=cls.__module__,
                              kinds={k: kinds[k] for k in functions})
        cls._tito_remote = number
        cls._tito_connection = conn
        conn._classes[number] = cls

    def __call__(cls, *args, **kwargs):
        return cls._tito_connection.request("call", cls._tito_remote, *args, *kwargs.values(), kwargs=list(kwargs))

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__") and name not in _REMOTE_DUNDERS:
            raise AttributeError(name)
        return cls._tito_connection.request("getattr", cls._tito_remote, name=name)

    def __instancecheck__(cls, obj):
        if isinstance(obj, Proxy):
            return cls._tito_connection.request("isinstance", cls._tito_remote, obj)
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub):
        if isinstance(sub, RemoteMeta):
            return cls._tito_connection.request("issubclass", cls._tito_remote, sub)
        return type.__subclasscheck__(cls, sub)

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__qualname__}'>"


class ModuleProxy(types.ModuleType):
    """A module of the package, as the judge imports it."""

    def __init__(self, name: str, conn: Connection, number: int):
        super().__init__(name)
        object.__setattr__(self, "_tito_conn", conn)
        object.__setattr__(self, "_tito_n", number)
        object.__setattr__(self, "__path__", [])

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and name not in _REMOTE_DUNDERS:
            raise AttributeError(name)
        return self._tito_conn.request("getattr", self._tito_n, name=name)

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) or name.startswith("__"):  # the import system filling in submodules
            object.__setattr__(self, name, value)
        else:
            self._tito_conn.request("setattr", self._tito_n, value, name=name)

    def __delattr__(self, name):
        if name in self.__dict__:
            object.__delattr__(self, name)
        else:
            self._tito_conn.request("delattr", self._tito_n, name=name)

    def __dir__(self):
        return self._tito_conn.request("dir", self._tito_n)

    @property
    def __dict__(self):  # what `vars(module)` and pytest's monkeypatch read: the module there
        return _Namespace(self)


class _Namespace(collections.abc.Mapping):
    """A package module's namespace, read through the module proxy."""

    def __init__(self, module: ModuleProxy):
        self._module = module

    def __getitem__(self, name):
        try:
            return getattr(self._module, name)
        except AttributeError:
            raise KeyError(name) from None

    def __iter__(self):
        return iter(dir(self._module))

    def __len__(self):
        return len(dir(self._module))


class PackageFinder:
    """Imports of the package in the judge: module proxies, except modules the judge trusts
    (`local`: name -> a file the judge runs itself, e.g. the assertion helpers)."""

    def __init__(self, conn: Connection, local: dict | None = None, *, loaded=None):
        """`loaded(module)` is called after a local module ran."""
        self.conn, self.local, self.loaded = conn, dict(local or {}), loaded

    def find_spec(self, name, path=None, target=None):
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return None
        import importlib.machinery
        import importlib.util
        if name in self.local:
            spec = importlib.util.spec_from_file_location(name, self.local[name])
            if self.loaded is not None:
                spec.loader = _ThenCall(spec.loader, self.loaded)
            return spec
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        number = self.conn.request("import", None, name=spec.name)
        return ModuleProxy(spec.name, self.conn, number)

    def exec_module(self, module):
        pass


class _ThenCall:
    """A loader that runs the module, then calls `after(module)`."""

    def __init__(self, loader, after):
        self.loader, self.after = loader, after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.after(module)


# ---------------------------------------------------------------- the answerer's view of the tests' objects

class _Stub:
    """An object of the tests, as the package holds it: its public face, called back."""

    __slots__ = ("_tito_conn", "_tito_n", "__name__", "__weakref__")

    def __init__(self, conn, number, name):
        object.__setattr__(self, "_tito_conn", conn)
        object.__setattr__(self, "_tito_n", number)
        object.__setattr__(self, "__name__", name)

    def _tito(self, op, *args, **fields):
        return self._tito_conn.request(op, self._tito_n, *args, **fields)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._tito("getattr", name=name)

    def __getitem__(self, key):
        return self._tito("getitem", key)

    def __len__(self):
        return self._tito("len")

    def __iter__(self):
        return self._tito("iter")

    def __next__(self):
        return self._tito("next")

    def __bool__(self):
        return self._tito("bool")

    def __contains__(self, item):
        return self._tito("contains", item)

    def __repr__(self):
        return self._tito("repr")

    def __str__(self):
        return self._tito("str")


# A test's generator or coroutine, as the package sees it: isinstance and type names answer as
# for the real thing (a benchmark harness refuses a workload that returned one).
_STUBS = {kind.__name__: type(kind.__name__, (_Stub,), {"__slots__": (), "__class__": property(lambda self, k=kind: k)})
          for kind in (types.GeneratorType, types.CoroutineType)}


def _source(function) -> str:
    import inspect
    import textwrap

    lines = textwrap.dedent(inspect.getsource(function)).splitlines()
    while lines and lines[0].startswith("@"):
        lines.pop(0)
    return "\n".join(lines) + "\n"


_COMPILED: dict = {}


def _compiled(source: str):
    """A test's numba function, compiled here from its source (numba cannot call back)."""
    if source not in _COMPILED:
        import math

        import numba

        namespace = {"np": np, "numpy": np, "math": math, "numba": numba}
        exec(compile(source, "<a test's numba function>", "exec"), namespace)  # noqa: S102 - the tests' code
        name = source.split("def ", 1)[1].split("(", 1)[0].strip()
        _COMPILED[source] = numba.njit(namespace[name])
    return _COMPILED[source]


class _CallableStub(_Stub):
    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return self._tito("call", *args, *kwargs.values(), kwargs=list(kwargs))


def _judge_function(conn: Connection, number: int, name: str, doc):
    """A function of the tests as a real function here, so that it binds as a method."""
    def function(*args, **kwargs):
        return conn.request("call", number, *args, *kwargs.values(), kwargs=list(kwargs))
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc if isinstance(doc, str) else None
    conn._function_numbers[id(function)] = number
    return function


def _stub_method(fn, kind: str):
    if kind == "staticmethod":
        return staticmethod(fn)
    if kind == "classmethod":
        return classmethod(fn)

    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = getattr(fn, "__name__", "method")
    return method


# ---------------------------------------------------------------- what the answerer does

def _split_kwargs(args: list, names: list):
    if not names:
        return args, {}
    return args[:-len(names)], dict(zip(names, args[-len(names):]))


def _perform_judge(conn: Connection, message: dict, args: list):
    """A callback from the package into the tests' objects: public faces only."""
    target = conn.exported(int(message["target"]))
    op = message["op"]
    if op == "call":
        args, kwargs = _split_kwargs(args, message.get("kwargs") or [])
        return target(*args, **kwargs)
    if op == "getattr":
        name = str(message["name"])
        if name.startswith("_"):
            raise AttributeError(f"the package may not read the tests' private attribute {name!r}")
        return getattr(target, name)
    if op == "getitem":
        return target[args[0]]
    if op == "len":
        return len(target)
    if op == "iter":
        return iter(target)
    if op == "next":
        return next(target)
    if op == "bool":
        return bool(target)
    if op == "contains":
        return args[0] in target
    return builtins.repr(target) if op == "repr" else builtins.str(target)


def _perform_answerer(conn: Connection, message: dict, args: list):
    op = message["op"]
    if op == "import":
        module = importlib.import_module(str(message["name"]))
        return _Number(conn.export(module))
    if op == "subclass":
        return _Number(_make_subclass(conn, message, args))
    if op == "environ":  # what the tests' set-up put in the environment before the package loads
        for key, value in args[0].items():
            os.environ.setdefault(str(key), str(value))
        return None
    target = conn.exported(int(message["target"]))
    if op == "getattr":
        return getattr(target, str(message["name"]))
    if op == "setattr":
        return setattr(target, str(message["name"]), args[0])
    if op == "delattr":
        return delattr(target, str(message["name"]))
    if op == "call":
        args, kwargs = _split_kwargs(args, message.get("kwargs") or [])
        return target(*args, **kwargs)
    if op == "callattr":
        args, kwargs = _split_kwargs(args, message.get("kwargs") or [])
        return getattr(target, str(message["name"]))(*args, **kwargs)
    if op == "binop":
        name = str(message["name"])
        if message.get("inplace"):
            return getattr(operator, "i" + name)(target, args[0])
        if message.get("reflected"):
            return getattr(operator, name + "_")(args[0], target) if name in ("and", "or") \
                else getattr(operator, name)(args[0], target)
        return getattr(operator, name + "_" if name in ("and", "or") else name)(target, args[0])
    if op == "unary":
        return getattr(operator, str(message["name"]))(target)
    simple = {
        "getitem": lambda: target[args[0]], "iter": lambda: iter(target), "next": lambda: next(target),
        "len": lambda: len(target), "bool": lambda: bool(target), "contains": lambda: args[0] in target,
        "float": lambda: float(target), "int": lambda: int(target), "index": lambda: operator.index(target),
        "complex": lambda: complex(target), "round": lambda: round(target, *[a for a in args if a is not None]),
        "array": lambda: np.asarray(target), "enter": lambda: target.__enter__(), "repr": lambda: repr(target),
        "str": lambda: str(target), "format": lambda: format(target, args[0]), "hash": lambda: hash(target),
        "copy": lambda: copy.copy(target), "deepcopy": lambda: copy.deepcopy(target), "dir": lambda: dir(target),
        "isinstance": lambda: isinstance(args[0], target), "issubclass": lambda: issubclass(args[0], target),
    }
    if op in simple:
        return simple[op]()
    if op == "setitem":
        target[args[0]] = args[1]
        return None
    if op == "delitem":
        del target[args[0]]
        return None
    if op == "exit":
        exc = args[0]
        return target.__exit__(type(exc) if exc is not None else None, exc, None)
    raise RemoteError(f"unknown request {op!r}")


def _make_subclass(conn: Connection, message: dict, args: list) -> int:
    """The package-side twin of a test's subclass of package classes."""
    functions, getters, attrs = args[-3], args[-2], args[-1]
    bases = tuple(args[:-3])
    namespace = {"__module__": str(message["module"]), "__qualname__": str(message["qualname"])}
    namespace.update(attrs)
    kinds = message.get("kinds") or {}
    for name, fn in functions.items():
        namespace[name] = _stub_method(fn, kinds.get(name, "function"))
    for name, (fget, fset) in getters.items():
        namespace[name] = property(fget and _stub_method(fget, "function"), fset and _stub_method(fset, "function"))
    cls = type(bases[0])(str(message["name"]), bases, namespace)
    number = conn.export(cls)
    cls._tito_mirror = number
    return number


class _Number(int):
    """A reply that is an object's number itself (an import, a new class)."""


_OUTPUT = {"out": io.StringIO(), "err": io.StringIO(), "warnings": []}


def _forward_output(conn: Connection, header: dict, arrays: list) -> None:
    for stream in ("out", "err"):
        text = _OUTPUT[stream].getvalue()
        if text:
            header[stream] = text
            _OUTPUT[stream].seek(0)
            _OUTPUT[stream].truncate()
    if _OUTPUT["warnings"]:
        header["warnings"] = [[conn.encode(c, arrays), m] for c, m in _OUTPUT["warnings"]]
        _OUTPUT["warnings"].clear()


def _capture_output() -> None:
    """What the package prints and warns goes to the judge with the next message."""
    import warnings

    sys.stdout, sys.stderr = _OUTPUT["out"], _OUTPUT["err"]
    warnings.simplefilter("always")
    warnings.showwarning = lambda message, category, *rest, **kw: _OUTPUT["warnings"].append((category, str(message)))


def main(argv: list[str]) -> int:
    """The answerer: serve the judge on the two file descriptors given."""
    read_fd, write_fd = int(argv[1]), int(argv[2])
    _capture_output()
    conn = Connection(read_fd, write_fd, "w")
    conn.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Checks for the notebooks' check cells, in the spirit of `torch.testing`.

Why: a check that fails with a bare `AssertionError` tells a student nothing. These say what
was checked, what came out and what was expected, so a failing cell teaches. They are
hand-written plumbing shared by every notebook (not part of any module's exercise), and they
import nothing from the modules, so they work on a package where modules are still stubs.

Beside the assertions sit the measurements those checks need (computations made, memory held,
parallel writes, barriers reached) and one setup decision, `use_cuda_simulator_unless_gpu`.
That decision lives here because module 17's notebook and its tests must make it the same way,
before numba is imported, and this is the one course file that both load that early: in a
graded run the judge loads it from the course's copy, never the student's.
"""
from __future__ import annotations

import ast
import contextlib
import gc
import inspect
import os
import re
import sys
import textwrap
import threading
import time
import traceback
import tracemalloc
import types

import numpy as np

__all__ = ["assert_close", "assert_equal", "assert_raises", "check", "outcome", "preserved_state", "hidden_module",
           "weak_ref", "run_fresh", "spied", "one_gemm_problems", "equality_calls", "parallel_write_clashes",
           "divergent_barriers", "shared_memory_races", "multiply_written", "global_reads", "held_bytes", "element_reads",
           "reuse_distances", "coalesced_share", "prange_trips", "parallel_regions", "float64_accumulators"]


def _as_numpy(value):
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        try:
            return np.asarray(value.numpy())
        except Exception:  # a stubbed Tensor.numpy: compare what we can
            pass
    return np.asarray(value)


def _show(value, limit=300):
    """`value` in at most about `limit` characters, cut between elements, never inside a number."""
    if isinstance(value, np.ndarray) or (hasattr(value, "shape") and not isinstance(value, np.dtype)):
        arr = _as_numpy(value)
        suffix = f" (shape {tuple(arr.shape)}, dtype {arr.dtype})"
        for edge in (3, 2, 1):  # fewer corner elements before cutting any
            text = np.array2string(arr, threshold=20, edgeitems=edge, precision=6)
            if len(text) + len(suffix) <= limit:
                break
        return _cut(text, limit - len(suffix)) + suffix
    return _cut(repr(value), limit)


def _cut(text, limit):
    if len(text) <= limit:
        return text
    head = text[: limit - 4]
    end = max(head.rfind(" "), head.rfind(","), head.rfind("\n"))
    return (head[:end] if end > 0 else head).rstrip(", \n") + " ..."


def _fail(what, got, expected, why=""):
    lines = [f"✗ {what}" if what else "✗ check failed"]
    lines.append(f"    got:      {_show(got)}")
    lines.append(f"    expected: {_show(expected)}")
    if why:
        lines.append(f"    {why}")
    raise AssertionError("\n".join(lines))


def _differing(a, e, limit=3):
    """The first differing elements at full precision, when the arrays print alike (a value
    one rounding away from the expected one looks the same at six digits)."""
    if _show(a) != _show(e) or a.dtype.kind not in "fc" or e.dtype.kind not in "fc":
        return ""
    at = [index for index in zip(*np.nonzero(~((a == e) | (np.isnan(a) & np.isnan(e)))))][:limit]
    listed = "; ".join(f"at {tuple(int(i) for i in index)}: {a[index].item()!r} against {e[index].item()!r}" for index in at)
    return f", though they print alike: {listed}" if listed else ""


def assert_equal(actual, expected, what=""):
    """`actual == expected` exactly (numbers, tuples, strings, or arrays and tensors
    elementwise, with the same shape); on failure the message shows both."""
    if isinstance(expected, (np.ndarray,)) or hasattr(actual, "shape") and not isinstance(actual, tuple):
        a, e = _as_numpy(actual), _as_numpy(expected)
        if a.shape != e.shape:
            _fail(what, actual, expected, f"the shapes differ: {a.shape} against {e.shape}")
        if not np.array_equal(a, e):
            _fail(what, actual, expected, "the values differ" + _differing(a, e))
        return
    if type(expected) is tuple and type(actual) is not tuple:
        _fail(what, actual, expected, f"expected a tuple, got a {type(actual).__name__}")
    if not actual == expected:
        _fail(what, actual, expected)


def assert_close(actual, expected, *, rtol=1e-5, atol=1e-6, what=""):
    """Elementwise |actual - expected| <= atol + rtol * |expected| with equal shapes,
    like `torch.testing.assert_close`; the message names the worst element."""
    a, e = _as_numpy(actual), _as_numpy(expected)
    if a.shape != e.shape:
        _fail(what, actual, expected, f"the shapes differ: {a.shape} against {e.shape}")
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    bad = ~(np.abs(a64 - e64) <= atol + rtol * np.abs(e64))
    bad &= ~((a64 == e64) | (np.isnan(a64) & np.isnan(e64)))  # equal infinities and NaNs are equal
    if bad.any():
        where = np.unravel_index(int(np.argmax(np.where(bad, np.abs(a64 - e64), -1))), a.shape) if a.ndim else ()
        first = np.unravel_index(int(np.argmax(bad)), a.shape) if a.ndim else ()
        also = "" if first == where else (
            f"; the first (in row-major order) at index {tuple(int(i) for i in first)}: "
            f"{float(a64[first])!r} against {float(e64[first])!r}")
        _fail(what, actual, expected,
              f"{int(bad.sum())} of {a.size} element(s) differ; worst at index {tuple(int(i) for i in where)}: "
              f"{float(a64[where])!r} against {float(e64[where])!r}{also} (rtol={rtol}, atol={atol})")


def check(condition, what, got=None, expected=None):
    """Assert a condition that is not a comparison; say what it meant, and what was seen."""
    if not condition:
        lines = [f"✗ {what}"]
        if got is not None:
            lines.append(f"    got:      {_show(got)}")
        if expected is not None:
            lines.append(f"    expected: {_show(expected)}")
        raise AssertionError("\n".join(lines))


def outcome(fn, *args, **kwargs):
    """`fn(*args, **kwargs)`'s result, or what it raised as the text "Type: message".

    Why: a check that compares this with what it expects shows an exception from the
    student's code as what it *got*, next to the expected value, instead of a bare traceback.
    NotImplementedError (a stub not written yet) still raises, so that it reads as one."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def assert_raises(exception, fn, *args, match=None, what="", **kwargs):
    """Call `fn(*args, **kwargs)` and require that it raises `exception` (whose message
    matches the regex `match`, case-insensitively). Returns the exception."""
    label = what or getattr(fn, "__name__", "the call")
    try:
        fn(*args, **kwargs)
    except exception as exc:
        if match is not None and not re.search(match, str(exc), flags=re.IGNORECASE):
            frames = traceback.extract_tb(exc.__traceback__)
            origin = (f" in {frames[-1].name} ({os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})"
                      if frames else "")
            raise AssertionError(
                f"✗ {label}: raised {type(exc).__name__}{origin}, but its message does not say what it must "
                f"(looked for /{match}/): was it raised by a check of yours, or by something that failed "
                f"on the way?\n    message: {exc}") from None
        return exc
    except NotImplementedError:
        raise
    except Exception as exc:
        raise AssertionError(
            f"✗ {label}: expected {exception.__name__ if isinstance(exception, type) else exception}, "
            f"got {type(exc).__name__}: {exc}") from None
    raise AssertionError(f"✗ {label}: expected {getattr(exception, '__name__', exception)}, but nothing was raised")


@contextlib.contextmanager
def preserved_state():
    """Restore tinytorch's global state (grad mode, random generator) and numpy's global
    random state when the block ends, even when it raises: one failing check must not
    break the cells after it."""
    import tinytorch._tensor as _t  # at call time: the module may still be a stub at import
    import tinytorch.random as _random

    grad_mode = getattr(_t, "_grad_enabled", None)
    rng_state = _random.get_rng_state()
    np_state = np.random.get_state()
    try:
        yield
    finally:
        if grad_mode is not None:
            _t._grad_enabled = grad_mode
        _random.set_rng_state(rng_state)
        np.random.set_state(np_state)


@contextlib.contextmanager
def hidden_module(name):
    """Inside the block, `import name` fails in the process that runs tinytorch, as if that
    module were not built yet (the next import after the block finds it again)."""
    saved = {key: module for key, module in sys.modules.items() if key == name or key.startswith(name + ".")}
    for key in saved:
        del sys.modules[key]
    sys.modules[name] = None  # import raises ImportError
    try:
        yield
    finally:
        del sys.modules[name]
        sys.modules.update(saved)


def weak_ref(obj):
    """A weak reference to `obj`, kept in the process that runs tinytorch: calling it returns
    obj while something there still holds it and None once it is freed (it collects garbage
    first, so only a real reference keeps obj)."""
    import gc
    import weakref

    ref = weakref.ref(obj)

    def deref():
        gc.collect()
        return ref()
    return deref


def run_fresh(code, timeout=120, **environment):
    """(stdout, stderr) of `code` run by a new Python interpreter beside the one that runs
    tinytorch (the same executable and import path), with `environment` added to its
    environment: how a test sees what a fresh process does (at import, without a GPU, ...)."""
    import os
    import subprocess
    import tempfile

    env = dict(os.environ, **environment)
    # Started in a neutral folder: `python -c` puts its working directory first on the path, and
    # the course folder there would shadow the package under test (Python 3.10 has no -P).
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=tempfile.gettempdir())
    return proc.stdout, proc.stderr


def use_cuda_simulator_unless_gpu():
    """Call before numba is imported. Turns numba's CUDA simulator on (NUMBA_ENABLE_CUDASIM=1)
    unless the caller already chose or `nvidia-smi -L` lists a GPU, and returns whether it is
    on. Module 17's notebook and its tests both ask here, so both run kernels on the same
    device."""
    import os
    import shutil
    import subprocess

    if "NUMBA_ENABLE_CUDASIM" not in os.environ:
        gpu = False
        if shutil.which("nvidia-smi") is not None:
            try:
                listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
                gpu = listed.returncode == 0 and "GPU" in listed.stdout
            except (OSError, subprocess.SubprocessError):
                gpu = False
        if not gpu:
            os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


class _Spy(np.ndarray):
    """An array that notes each numpy computation it takes part in, as (name, operand
    shapes, result shape). `@`, np.matmul and the other ufuncs (their reductions: `.sum()` is
    "add.reduce") come through __array_ufunc__; np.dot, np.einsum, np.tensordot, ... through
    __array_function__; the .dot method is overridden. Results stay spies, so what is
    computed from them is noted too."""

    log: list = []

    def __repr__(self):  # printed while fn runs (a student's print, a message): the plain array it wraps
        return repr(self.view(np.ndarray))

    def __str__(self):
        return str(self.view(np.ndarray))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, _Spy) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, _Spy) else o for o in kwargs["out"])
        result = getattr(ufunc, method)(*plain, **kwargs)
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        _Spy.log.append((name, tuple(np.shape(x) for x in plain), np.shape(result)))
        return result.view(_Spy) if type(result) is np.ndarray else result

    def __array_function__(self, func, types, args, kwargs):
        result = super().__array_function__(func, types, args, kwargs)
        _Spy.log.append((func.__name__, tuple(x.shape for x in args if isinstance(x, np.ndarray)),
                         getattr(result, "shape", ())))
        return result

    def dot(self, other, *args, **kwargs):
        other = other.view(np.ndarray) if isinstance(other, _Spy) else other
        result = self.view(np.ndarray).dot(other, *args, **kwargs)
        _Spy.log.append(("dot", (self.shape, getattr(other, "shape", ())), result.shape))
        return result.view(_Spy)


def _keeping_spies(convert):
    """np.asarray or np.array, except that a spy converted (to another dtype, say) stays a spy."""
    def converted(a, *args, **kwargs):
        result = convert(a, *args, **kwargs)
        return result.view(_Spy) if isinstance(a, _Spy) and type(result) is np.ndarray else result
    return converted


def _device_array_classes():
    """The classes of numba's device arrays (real and simulated) that are loaded: none when
    numba's CUDA support was never imported."""
    names = ("numba.cuda.cudadrv.devicearray", "DeviceNDArrayBase"), \
            ("numba.cuda.simulator.cudadrv.devicearray", "FakeCUDAArray")
    found = {getattr(sys.modules.get(m), c, None) for m, c in names}  # simulated, the first name is the second
    return [cls for cls in found if cls is not None]


def spied(fn, *arrays):
    """(fn's result, the numpy computations it made) for fn run on spying copies of
    `arrays`: each computation as (name, operand shapes, result shape). A copy made with
    np.asarray or np.array (widening int8 to int32, say) is still watched, and so is an
    array copied back from a CUDA device (`copy_to_host`) while fn runs. The result comes
    back as plain arrays (a spy returned, or in a returned tuple or list), so a failed
    comparison shows it as any array.

    Why: a contract such as "one matrix product" or "computed on the device" is about how a
    result is computed, which comparing values cannot see."""
    _Spy.log = []
    plain = np.asarray, np.array
    np.asarray, np.array = (_keeping_spies(c) for c in plain)
    copies = [(cls, cls.copy_to_host) for cls in _device_array_classes()]

    def spying_copy(original):
        def copy_to_host(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            return result.view(_Spy) if type(result) is np.ndarray else result
        return copy_to_host

    for cls, original in copies:
        cls.copy_to_host = spying_copy(original)
    try:
        result = fn(*(plain[0](a).view(_Spy) for a in arrays))
    finally:
        np.asarray, np.array = plain
        for cls, original in copies:
            cls.copy_to_host = original
    return _unspied(result), list(_Spy.log)


def _unspied(result):
    """`result` with each spy in it, or in the tuple or list it is, seen as a plain array."""
    if isinstance(result, _Spy):
        return result.view(np.ndarray)
    if type(result) in (tuple, list):
        return type(result)(_unspied(r) for r in result)
    return result


def passthrough_spy():
    """A Module that returns its input unchanged and keeps a copy of each input in `.seen`
    (it needs module 03's Module, imported when called).

    Why: put in place of a Dropout, it shows which tensor reaches that layer, which the
    model's outputs cannot show: in eval mode a dropout on the wrong tensor changes nothing."""
    from tinytorch.nn import Module

    class PassThroughSpy(Module):
        def __init__(self):
            super().__init__()
            self.seen = []

        def forward(self, x):
            self.seen.append(x.numpy().copy())
            return x

    return PassThroughSpy()


class CountingRng:
    """Stands in for a numpy Generator that offers `random` only: each call's shape is noted
    in `.calls`, and every number it returns is `u`.

    Why: a sampler's contract can say how it draws (one rng.random((B, 1)) per step), and a
    fixed u says which token that draw must pick."""

    def __init__(self, u):
        self.u, self.calls = u, []

    def random(self, size=None):
        self.calls.append(None if size is None else tuple(np.atleast_1d(size).tolist()))
        return np.full(() if size is None else size, self.u)

    def __getattr__(self, name):
        raise AttributeError(f"this stand-in generator offers only random(): the contract asks for exactly one "
                             f"rng.random((B, 1)) per step, not rng.{name}")


class ContextRecorder:
    """A stand-in language model (`config.vocab_size` 7, `config.block_size` 4) that keeps
    each context it is shown in `.seen`; its logits at position t point at the token (sum of
    the ids up to t) mod 7, so each generated id says which context and position were used.

    Why: a generation loop's crop and its choice of position are invisible in a real
    model's output, which any context can explain."""

    def __init__(self):
        self.config = types.SimpleNamespace(vocab_size=7, block_size=4)
        self.seen = []

    def __call__(self, idx, targets=None):
        from tinytorch import Tensor

        ids = idx.numpy()
        self.seen.append(ids.copy())
        logits = np.zeros(ids.shape + (7,))
        np.put_along_axis(logits, (np.cumsum(ids, axis=1) % 7)[..., None], 1.0, axis=-1)
        return Tensor(logits), None


def arithmetic(log):
    """The entries of a `spied` log that computed numbers (numpy ufuncs, their reductions
    included), leaving out layout and copies (reshape, transpose, broadcast_to, astype)."""
    return [e for e in log if isinstance(getattr(np, e[0].split(".")[0], None), np.ufunc)]


_MATRIX_PRODUCTS = {"matmul", "dot", "vdot", "inner", "outer", "tensordot", "kron"}  # BLAS-backed in numpy


def one_gemm_problems(log, weight_shape):
    """What keeps the computations in `log` (from `spied`) from being one matrix product over
    all rows giving the whole `weight_shape` result (or its transpose): no BLAS product giving it (np.einsum
    without `optimize` runs numpy's own loops; with it, the product it calls is logged), a
    product of two stacks of matrices (tensordot reshapes to 2-D itself), several products
    with that result (one per batch entry or row), a sum afterwards. An empty list when
    there is none."""
    products = [e for e in log if e[0] in _MATRIX_PRODUCTS]
    problems = [f"a batched product {e}" for e in products
                if e[0] != "tensordot" and sum(len(s) > 2 for s in e[1]) >= 2]
    per_part = [e for e in products if tuple(e[2]) in (tuple(weight_shape), tuple(weight_shape)[::-1])]  # or its .T
    if len(per_part) > 1:
        problems.append(f"{len(per_part)} products of the {tuple(weight_shape)} shape, not one: {per_part[:3]}")
    if not per_part:
        einsums = [e for e in log if e[0] == "einsum"]
        problems.append(f"no BLAS matrix product gives the {tuple(weight_shape)} result"
                        + (f" (np.einsum without optimize= loops in numpy's own code, not BLAS: {einsums[:2]})"
                           if einsums else ""))
    problems += [f"a sum afterwards {e}" for e in log if e[0].endswith(".reduce") and np.prod(e[2]) < np.prod(e[1][0])]
    return problems


@contextlib.contextmanager
def _collector_paused():
    """No garbage collection inside: a collection that fires during a measurement runs the
    callbacks of whatever it frees (a WeakSet's, say, for a finished thread) in the measured
    thread, and those count as fn's steps and bytes. When it fires depends on what other
    threads allocated, so a measurement that includes it changes from run to run."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def python_steps(fn, *args):
    """How many Python lines and calls fn(*args) executes (numpy's compiled loops count none)."""
    count = [0]
    outer = sys.gettrace()  # a tracer that was already on (a debugger, tito's) still sees every call

    def on_line(frame, event, arg):
        count[0] += 1
        return on_line

    def on_call(frame, event, arg):
        count[0] += 1
        if outer is not None:
            outer(frame, event, arg)
        return on_line

    with _collector_paused():
        sys.settrace(on_call)
        try:
            fn(*args)
        finally:
            sys.settrace(outer)
    return count[0]


def equality_calls(fn, *args, of):
    """How many `==` comparisons between instances of the class `of` fn(*args) made. A
    membership test on a list compares the item with each element in turn; a set or a dict
    finds it by its hash and compares almost never. So a walk that remembers what it has seen
    in a list shows here as a count that grows with the square of what it walked."""
    count = [0]
    own = of.__dict__.get("__eq__")

    def counting_eq(self, other):
        count[0] += 1
        if own is not None:
            return own(self, other)
        return self is other if isinstance(other, of) else NotImplemented

    of.__eq__ = counting_eq  # the class's __hash__ stays as it was
    try:
        fn(*args)
    finally:
        if own is not None:
            of.__eq__ = own
        else:
            del of.__eq__
    return count[0]


def peak_bytes(fn, *args):
    """The most memory (bytes) fn(*args) held allocated at any moment while it ran. A numba
    kernel runs as its Python function, where numpy's allocations show; compiled code's
    allocations would not."""
    fn = getattr(fn, "py_func", fn)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        with _collector_paused():
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            fn(*args)
            return tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


class _Writes:
    """Which parallel iteration wrote each memory address, and the addresses two of them wrote."""

    def __init__(self):
        self.iteration, self.owner, self.clashes, self.clashed = None, {}, [], set()
        self.trips = 0  # iterations of the outermost prange loops
        self.regions = 0  # how many times an outermost prange loop started
        self.reads = []  # the byte address of every single element read, in order

    def note(self, addresses, array):
        if self.iteration is None:
            return
        for address in addresses:
            first = self.owner.setdefault(address, self.iteration)
            if first != self.iteration and address not in self.clashed and len(self.clashes) < 20:
                self.clashed.add(address)
                whole = _whole(array)  # a write through a row or slice is reported in the array it views
                self.clashes.append((whole.shape, _element(whole, address), first, self.iteration))


def _whole(array):
    """The kernel's argument, or the array it made, that `array` (a watched view) is part of."""
    while isinstance(array.base, _Watched):
        array = array.base
    return array


def _addresses(array):
    """The byte address of each element of `array`, an int64 array of its shape."""
    start = array.__array_interface__["data"][0]
    grids = np.ix_(*(np.arange(n) for n in array.shape)) if array.ndim else ()
    return start + sum((g * s for g, s in zip(grids, array.strides)), np.zeros(array.shape, dtype=np.int64))


def _element(array, address):
    """The index in `array` of the element at a byte address (for the message)."""
    found = np.argwhere(_addresses(array) == address)
    return tuple(int(i) for i in found[0]) if len(found) else None


def _single_element(array, key):
    """The byte address of `array[key]` when `key` picks one element, else None."""
    if isinstance(key, (int, np.integer)):
        key = (key,)
    if not (isinstance(key, tuple) and len(key) == array.ndim and all(isinstance(k, (int, np.integer)) for k in key)):
        return None
    index = [int(k) + (n if k < 0 else 0) for k, n in zip(key, array.shape)]
    return array.__array_interface__["data"][0] + sum(i * s for i, s in zip(index, array.strides))


class _Watched(np.ndarray):
    """An array whose element writes are noted, with the parallel iteration that made them,
    and whose single-element reads are noted in order."""

    writes: _Writes | None = None

    def __getitem__(self, key):
        writes = _Watched.writes
        if writes is not None:
            address = _single_element(self, key)
            if address is not None:
                writes.reads.append(address)
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        writes = _Watched.writes
        if writes is None or writes.iteration is None:
            return
        start, strides = self.__array_interface__["data"][0], self.strides
        if isinstance(key, (int, np.integer)):
            key = (key,)
        if isinstance(key, tuple) and len(key) == self.ndim and all(isinstance(k, (int, np.integer)) for k in key):
            index = [int(k) + (n if k < 0 else 0) for k, n in zip(key, self.shape)]
            writes.note([start + sum(i * s for i, s in zip(index, strides))], self)
            return
        writes.note(np.asarray(_addresses(self.view(np.ndarray)))[key].ravel().tolist(), self)


def _garbage_filled(out):
    """`out`, filled with what uninitialised memory may hold: NaN for floats, an integer
    type's largest value."""
    kind = out.dtype.kind
    out.fill(np.nan if kind in "fc" else np.iinfo(out.dtype).max if kind in "iu" else 1)
    return out


class _WatchingNumpy:
    """numpy, except that the arrays a kernel creates are watched, and `empty` memory starts
    as garbage (NaN, or an integer type's largest value), as compiled code may find it."""

    _MAKERS = ("zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like")

    def __getattr__(self, name):
        made = getattr(np, name)
        if name not in self._MAKERS:
            return made

        def make(*args, **kwargs):
            out = made(*args, **kwargs)
            return (_garbage_filled(out) if name.startswith("empty") else out).view(_Watched)

        return make


def parallel_write_clashes(kernel, *args):
    """(the kernel's result, the clashes) for a numba kernel run as Python on `args`, its
    `prange` loop's iterations one after another: each clash is (shape of the array,
    element index, first iteration, second iteration), an element of an argument or of an
    array the kernel made that two iterations of the outermost `prange` loop both wrote.

    Why: a data race may be rare on a given machine, or impossible on one core; two
    iterations that write one element are a race on every machine, and this sees them on
    every run. (A scalar accumulated in a `prange` loop is no clash: numba makes it a
    reduction, each thread with its own copy.)"""
    result, writes = _run_watched(kernel, args)
    return result, writes.clashes


def prange_trips(kernel, *args):
    """(the kernel's result, how many iterations its `prange` loops ran in all, a prange
    nested in another counting as a plain loop) for a numba kernel run as Python on `args`.

    Why: a `prange` over every element with a scalar `+=` is a reduction that numba writes
    for you; a kernel asked to split its work among `n_chunks` workers shows that it did by
    running `n_chunks` parallel iterations."""
    result, writes = _run_watched(kernel, args)
    return result, writes.trips


def parallel_regions(kernel, *args):
    """(the kernel's result, how many times it started an outermost `prange` loop) for a
    numba kernel run as Python on `args`.

    Why: each start of a parallel loop wakes the thread pool and waits for its slowest
    thread; a `prange` nested in plain loops starts once per outer iteration, with only
    its own few iterations to share among the cores."""
    result, writes = _run_watched(kernel, args)
    return result, writes.regions


def element_reads(kernel, *args, of):
    """(the kernel's result, the elements of `args[of]` it read one at a time, in the order
    it read them, as flat indices) for a numba kernel run as Python on `args`, its `prange`
    loops one iteration after another. `args[of]` must be C-contiguous.

    Why: a loop order or a blocking is about *when* each element is read, which no result
    shows: neighbours read one after the other use every float of a cache line, and a
    small reuse distance (`reuse_distances`) means the element is still in cache."""
    target = args[of]
    if not (isinstance(target, np.ndarray) and target.flags.c_contiguous):
        raise TypeError("element_reads watches a C-contiguous numpy array")
    result, writes = _run_watched(kernel, args)
    start = target.__array_interface__["data"][0]
    inside = [a - start for a in writes.reads if start <= a < start + target.nbytes]
    return result, [offset // target.itemsize for offset in inside]


def simd_float_ops(kernel, *args):
    """How many arithmetic instructions on vectors of floats (SIMD: several multiply-adds in
    one instruction) the machine code of a numba kernel holds, compiled for `args`: 0 when
    the compiler vectorised none of its loops, or for a function that is not compiled.

    Why: a loop the compiler vectorises runs 4 to 16 times as many multiply-adds per cycle;
    whether it could is decided by how the loop is written (for example, indices it cannot
    prove non-negative stop it), and the compiled code shows it on every machine, where a
    timing would depend on the machine and its load."""
    import re

    pattern = re.compile(r"= (?:fadd|fsub|fmul|fdiv)\b[^\n]*<\d+ x (?:float|double)>"
                         r"|@llvm\.(?:fma|fmuladd)\.v\d+f(?:32|64)\(")
    return len(pattern.findall(_compiled_ir(kernel, args)))


def math_library_calls(kernel, *args):
    """The math-library functions (exp, pow, erf, ...) that the machine code of a numba
    kernel, compiled for `args`, calls: a sorted list of names, empty when there is none or
    for a function that is not compiled.

    Why: a library call computes one number per call, so a loop around it cannot run its
    body on a vector of numbers at once, however plain the rest of the loop is."""
    import re

    pattern = re.compile(r"call [^\n]*?@(?:llvm\.|numba_)?((?:exp|exp2|expm1|pow|powi|ldexp|erf|erfc|gamma|lgamma|"
                         r"log|log2|log10|log1p|tanh|sinh|cosh)f?(?:\.[a-z0-9]+)*)\(")
    return sorted(set(pattern.findall(_compiled_ir(kernel, args))))


def float64_ops(kernel, *args):
    """How many operations on float64 values (arithmetic, conversions to float64, calls of
    float64 math functions) the machine code of a numba kernel holds, compiled for `args`:
    0 for a kernel that computes in float32 throughout, or for a function that is not compiled.

    Why: one float64 constant promotes every value it touches, so a float32 kernel can run its
    arithmetic in double precision, at up to twice the cost and half the SIMD width, and
    still return the right float32 values."""
    import re

    pattern = re.compile(r"= (?:fadd|fsub|fmul|fdiv|fneg)\b[^\n]* double[ ,]|= fpext [^\n]* to double"
                         r"|call [^\n]*double @(?!llvm\.lifetime)")
    return len(pattern.findall(_compiled_ir(kernel, args)))


def _compiled_ir(kernel, args):
    """The LLVM IR of a numba kernel compiled afresh for `args` (code loaded from numba's
    cache cannot be read); "" for a plain Python function."""
    from numba import njit

    if not hasattr(kernel, "py_func"):
        return ""  # a plain Python function: the interpreter runs it one number at a time
    options = {key: value for key, value in kernel.targetoptions.items() if key not in ("cache", "nopython")}
    kernel = njit(**options)(kernel.py_func)
    kernel(*args)
    return "\n".join(kernel.inspect_llvm().values())


def reuse_distances(reads):
    """For each read of an element read before: how many reads happened since its previous
    read (a list, in the order of the reads). Small distances mean the element is read again
    while it is still in cache."""
    last, distances = {}, []
    for moment, element in enumerate(reads):
        if element in last:
            distances.append(moment - last[element])
        last[element] = moment
    return distances


def _run_watched(kernel, args):
    """Run a numba kernel as Python on `args`, its outermost `prange` loops one iteration
    after another, noting each iteration's writes: (result, _Writes)."""
    py = getattr(kernel, "py_func", kernel)
    writes = _Writes()

    def watched_prange(*bounds):
        if writes.iteration is not None:  # a nested prange runs as a plain loop
            yield from range(*bounds)
            return
        writes.regions += 1
        try:
            for i in range(*bounds):
                writes.iteration = i
                writes.trips += 1
                yield i
        finally:
            writes.iteration = None

    scope = dict(py.__globals__, prange=watched_prange, np=_WatchingNumpy())
    run = types.FunctionType(py.__code__, scope, py.__name__, py.__defaults__, py.__closure__)
    previous, _Watched.writes = _Watched.writes, writes
    try:
        result = run(*(a.view(_Watched) if isinstance(a, np.ndarray) else a for a in args))
    finally:
        _Watched.writes = previous
    if isinstance(result, np.ndarray):
        result = result.view(np.ndarray)
    return result, writes


def _reads_an_element(node):
    """Is `node` an array element read, `a[i]` (not a size such as `a.shape[0]`)?"""
    return isinstance(node, ast.Subscript) and not (
        isinstance(node.value, ast.Attribute) and node.value.attr in ("shape", "strides"))


def float64_accumulators(kernel):
    """The variables of a numba kernel that start as a bare Python number and are then
    updated from it (`acc = 0.0` ... `acc += a[i] * b[i]`): a list of (name, line), lines
    counted in the kernel's source, its first line (the decorator) 1. A whole-number start
    counts only when an update reads an array element (a counter `i += 1` stays an integer).

    Why: numba types a Python float as float64 (an int as int64) and gives a variable one type
    across its assignments, so such an accumulator adds float32 products in float64, on
    units a GPU has 2 to 64 times fewer of. The CUDA simulator follows numpy, where a Python
    number takes the array's float32, so no value and no simulated run can show it."""
    py = getattr(kernel, "py_func", kernel)
    tree = ast.parse(textwrap.dedent(inspect.getsource(py)))
    steps = []  # (line, column, name, value, an update of the name)
    for node in ast.walk(tree.body[0]):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            steps.append((node.lineno, node.col_offset, node.target.id, node.value, True))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                for name, value in pairs:
                    if isinstance(name, ast.Name):
                        reads_itself = any(isinstance(n, ast.Name) and n.id == name.id for n in ast.walk(value))
                        steps.append((node.lineno, node.col_offset, name.id, value, reads_itself))
    start, found = {}, {}  # name -> the type of the Python number it starts as (or None); -> line
    for line, _, name, value, update in sorted(steps, key=lambda step: step[:2]):
        if name not in start:
            number = value.operand if isinstance(value, ast.UnaryOp) else value
            literal = isinstance(number, ast.Constant) and type(number.value) in (int, float)
            start[name] = type(number.value) if literal else None
        elif update and start[name] and name not in found:
            if start[name] is float or any(_reads_an_element(n) for n in ast.walk(value)):
                found[name] = line
    return list(found.items())


@contextlib.contextmanager
def _on_barrier(note):
    """Inside: each simulated CUDA thread calls `note(thread)` at each `cuda.syncthreads()`,
    before it waits there."""
    from numba.cuda.simulator.kernel import BlockThread

    original = BlockThread.syncthreads

    def syncthreads(self):
        note(self)
        return original(self)

    BlockThread.syncthreads = syncthreads
    try:
        yield
    finally:
        BlockThread.syncthreads = original


def divergent_barriers(launch):
    """Run `launch()` (which launches CUDA kernels) and return the blocks in which not every
    thread passed the same `cuda.syncthreads()` calls in the same order: one entry per such
    block, (block index, a thread, the kernel lines of its barriers, thread 0's lines), at
    most five. Lines are counted in the kernel's source, its first line (the decorator) 1.
    None when numba's CUDA simulator is not in use: only simulated threads can be watched.

    Why: a barrier that some threads of a block skip (inside an `if`, or after an early
    `return`) is undefined behaviour on a GPU, where it may hang or compute garbage; the
    simulator lets it pass once the other threads have exited, so the values cannot tell."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    from numba.cuda.simulator.kernel import BlockThread

    passed, lock = {}, threading.Lock()
    original_run = BlockThread.run

    def key(thread):
        return (tuple(thread.blockIdx), tuple(thread.threadIdx))

    def run(self):
        with lock:
            passed.setdefault(key(self), [])
        return original_run(self)

    def at_barrier(thread):
        kernel = sys._getframe(3)  # the kernel's frame: it called the simulator's cuda.syncthreads
        line = kernel.f_lineno - kernel.f_code.co_firstlineno + 1  # the same in a notebook cell and a file
        with lock:
            passed.setdefault(key(thread), []).append(line)

    BlockThread.run = run
    try:
        with _on_barrier(at_barrier):
            launch()
    finally:
        BlockThread.run = original_run
    blocks = {}
    for (block, thread), lines in sorted(passed.items()):
        blocks.setdefault(block, []).append((thread, lines))
    found = []
    for block, threads in blocks.items():
        first_thread, first_lines = threads[0]
        for thread, lines in threads[1:]:
            if lines != first_lines:
                found.append((block, thread, lines, first_lines))
                break
        if len(found) == 5:
            break
    return found


def _watching_kernel_arrays(launch, method, watch):
    """Run `launch()` with the simulator's in-kernel arrays calling `watch(array, index,
    thread)` before each `method` ("__getitem__" or "__setitem__") does its work."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray

    original = getattr(FakeWithinKernelCUDAArray, method)

    def watched(self, index, *value):
        watch(self, index, threading.current_thread())
        return original(self, index, *value)

    setattr(FakeWithinKernelCUDAArray, method, watched)
    try:
        launch()
    finally:
        setattr(FakeWithinKernelCUDAArray, method, original)


def with_reads_interleaved(launch, pause=0.0005):
    """`launch()`'s result (it launches CUDA kernels) when every simulated thread, after each
    read of a device array, pauses and lets the block's other threads run. None when numba's
    CUDA simulator is not in use.

    Why: a GPU keeps thousands of threads in flight, so between one thread's read of an
    address and its write, others read and write it too. The simulator's threads rarely
    switch there, so a read-add-write that is not atomic usually gives the right answer on
    it; with this pause it loses updates as it would on a GPU (how many changes from run to
    run). An atomic operation reads and writes as one step, the pause inside it."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray

    original = FakeWithinKernelCUDAArray.__getitem__

    def read_then_pause(self, index):
        value = original(self, index)
        time.sleep(pause)
        return value

    FakeWithinKernelCUDAArray.__getitem__ = read_then_pause
    try:
        return launch()
    finally:
        FakeWithinKernelCUDAArray.__getitem__ = original


def multiply_written(launch):
    """Run `launch()` (which launches CUDA kernels) and return the elements of the kernels'
    arrays that more than one thread wrote: (array shape, element index, number of threads),
    at most five. None when numba's CUDA simulator is not in use.

    Why: "each element is written by exactly one thread" is a contract the values cannot
    check (a redundant write of the same value leaves them right) and the speed of the
    kernel depends on (the redundant threads do the work again)."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    writers, lock = {}, threading.Lock()

    def note(array, index, thread):
        key = tuple(int(i) for i in (index if isinstance(index, tuple) else (index,)))
        with lock:
            who = writers.setdefault((id(array._item), np.shape(array._item), key), set())
            who.add((tuple(getattr(thread, "blockIdx", ())), tuple(getattr(thread, "threadIdx", ()))))

    _watching_kernel_arrays(launch, "__setitem__", note)
    return [(shape, key, len(who)) for (_, shape, key), who in writers.items() if len(who) > 1][:5]


def global_reads(launch):
    """Run `launch()` (which launches CUDA kernels) and return how many elements the kernels
    read from their array arguments (global memory; shared memory is not counted). None when
    numba's CUDA simulator is not in use.

    Why: a tiled kernel's point is to read global memory TILE times less often than the
    naive one; its values cannot show whether it does."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    reads, lock = [0], threading.Lock()

    def note(array, index, thread):
        with lock:
            reads[0] += 1

    _watching_kernel_arrays(launch, "__getitem__", note)
    return reads[0]


def coalesced_share(launch):
    """Run `launch()` (which launches CUDA kernels) and return the share of its global reads
    that are coalesced: of each two threads of a block that are neighbours in a warp
    (threadIdx.x and threadIdx.x + 1, the same y and z) and both make their s-th read of an
    array, how often the second reads the element right after the first's (pairs that read
    the same element, such as a shape both need, are a broadcast and not counted). None when
    numba's CUDA simulator is not in use.

    Why: a warp's 32 reads of one step become one memory transaction when they touch
    neighbouring addresses, and up to 32 when they do not; the values are the same either
    way, and the simulator runs no faster for it."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    reads, lock = {}, threading.Lock()  # (array, block, thread) -> the flat indices it read, in order

    def note(array, index, thread):
        key = index if isinstance(index, tuple) else (index,)
        shape = np.shape(array._item)
        if len(key) == len(shape) and all(isinstance(i, (int, np.integer)) for i in key):
            who = (id(array._item), tuple(getattr(thread, "blockIdx", ())), tuple(getattr(thread, "threadIdx", ())))
            flat = int(np.ravel_multi_index(tuple(int(i) % n for i, n in zip(key, shape)), shape)) if shape else 0
            with lock:
                reads.setdefault(who, []).append(flat)

    _watching_kernel_arrays(launch, "__getitem__", note)
    pairs = coalesced = 0
    for (array, block, thread), seen in reads.items():
        if not thread or thread[0] % 32 == 31:  # the last thread of a warp has no right neighbour in it
            continue
        after = reads.get((array, block, (thread[0] + 1,) + thread[1:]))
        for mine, theirs in zip(seen, after or []):
            if theirs != mine:  # one address read by both is a broadcast: one transaction, neither way
                pairs += 1
                coalesced += theirs == mine + 1
    return coalesced / pairs if pairs else 1.0


class _NumpyWithEmpty:
    """numpy for the CUDA simulator, which makes every `cuda.shared.array` and `cuda.local.array`
    with `np.empty`: here `empty` returns `made(np.empty(...))`, so a test can fill that memory
    with garbage or watch it."""

    def __init__(self, made):
        self._made = made

    def __getattr__(self, name):
        return getattr(np, name)

    def empty(self, shape, dtype=float, *args, **kwargs):
        return self._made(np.empty(shape, dtype, *args, **kwargs))


class _SharedAccesses:
    """The shared-memory accesses of simulated threads: for each (array, block, step, thread),
    the flat element indices it read or wrote, in order; a step is the stretch between two
    barriers (`cuda.syncthreads()`) of that thread."""

    def __init__(self):
        self.lock, self.steps, self.log = threading.Lock(), {}, {}

    def note(self, array, key, writes):
        thread = threading.current_thread()
        if not hasattr(thread, "thread_id"):  # not a simulated CUDA thread
            return
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != array.ndim or not all(isinstance(i, (int, np.integer)) for i in key):
            return
        flat = int(np.ravel_multi_index(tuple(int(i) % n for i, n in zip(key, array.shape)), array.shape))
        with self.lock:
            step = self.steps.get(thread, 0)
            entry = self.log.setdefault((id(array), tuple(thread.blockIdx), step, thread.thread_id), [])
            entry.append((flat, writes, array.itemsize))

    def passed_barrier(self, thread):
        with self.lock:
            self.steps[thread] = self.steps.get(thread, 0) + 1


class _WatchedShared(np.ndarray):
    """A simulated shared array that reports each element access to `_WatchedShared.accesses`."""

    accesses: _SharedAccesses = None

    def __getitem__(self, key):
        _WatchedShared.accesses.note(self, key, False)
        return np.ndarray.__getitem__(self, key)

    def __setitem__(self, key, value):
        _WatchedShared.accesses.note(self, key, True)
        np.ndarray.__setitem__(self, key, value)


def _shared_accesses(launch):
    """Run `launch()` (which launches CUDA kernels) with shared memory watched: its
    _SharedAccesses, or None when numba's CUDA simulator is not in use."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    from numba.cuda.simulator import kernelapi

    accesses = _SharedAccesses()
    original_np = kernelapi.np
    kernelapi.np = _NumpyWithEmpty(lambda memory: memory.view(_WatchedShared))
    _WatchedShared.accesses = accesses
    try:
        with _on_barrier(accesses.passed_barrier):
            launch()
    finally:
        kernelapi.np, _WatchedShared.accesses = original_np, None
    return accesses


def scattered_active_threads(launch):
    """Run `launch()` (which launches CUDA kernels) and return the steps in which the threads
    of a block that wrote shared memory were not threads 0, 1, ..., n - 1 (a step is the
    stretch between two barriers): (block, step, the first of those threads), at most five.
    None when numba's CUDA simulator is not in use.

    Why: a warp runs its 32 threads together, so a warp with one busy thread takes as long
    as a full one. When the threads with work in a step are the first n, whole warps finish
    early; when they are every other thread (or every 2**s-th), every warp stays busy for a
    few of its threads. The values are the same either way."""
    accesses = _shared_accesses(launch)
    if accesses is None:
        return None
    writers = {}
    for (array, block, step, thread), seen in accesses.log.items():
        if any(writes for _, writes, _ in seen):
            writers.setdefault((block, step), set()).add(thread)
    found = [(block, step, sorted(threads)[:8]) for (block, step), threads in sorted(writers.items())
             if sorted(threads) != list(range(len(threads)))]
    return found[:5]


def shared_memory_races(launch):
    """Run `launch()` (which launches CUDA kernels) and return the shared-memory slots that
    one thread wrote and another thread read or wrote in the same step (the stretch between
    two barriers): (block, step, slot, the writing thread, the other thread, "read" or
    "write"), at most five, threads as their index in the block. None when numba's CUDA
    simulator is not in use.

    Why: between two barriers nothing orders the threads of a block, so such a read may see
    the value before or after the write. The simulator runs threads in one order, so a
    missing barrier often gives the right values there; on a GPU the answer changes from
    run to run. Which slots each thread touches between its barriers does not depend on
    that order, so this finds the race every time. (A `cuda.atomic` operation on shared
    memory reads and writes its slot like any other access, so it is reported too: no
    kernel of the course uses one there.)"""
    accesses = _shared_accesses(launch)
    if accesses is None:
        return None
    touched = {}
    for (array, block, step, thread), seen in accesses.log.items():
        for flat, writes, _ in seen:
            readers, writers = touched.setdefault((array, block, step, flat), (set(), set()))
            (writers if writes else readers).add(thread)
    found = []
    for (array, block, step, flat), (readers, writers) in sorted(touched.items(), key=lambda item: item[0][1:]):
        for writer in sorted(writers):
            other = min(writers - {writer}, default=None)
            kind = "write"
            if other is None:
                other, kind = min(readers - {writer}, default=None), "read"
            if other is not None:
                found.append((block, step, flat, writer, other, kind))
                break
        if len(found) == 5:
            break
    return found


def bank_conflicts(launch):
    """Run `launch()` (which launches CUDA kernels) and return its worst shared-memory bank
    conflict: (n, an example), where n is the most distinct 4-byte words that the threads of
    one warp touched in one bank with one access (their k-th access in a step: 1 means no
    conflict), and the example is (block, step, k, the element indices of that access). None
    when numba's CUDA simulator is not in use.

    Why: shared memory is 32 banks, word w in bank w % 32; a warp's access is served in one
    pass when its threads touch different banks (or the same word: a broadcast), and in n
    passes when n different words share a bank. 8-byte elements are served half a warp at a
    time. The values are the same whatever the conflicts."""
    accesses = _shared_accesses(launch)
    if accesses is None:
        return None
    groups = {}
    for (array, block, step, thread), seen in accesses.log.items():
        for k, (flat, _, itemsize) in enumerate(seen):
            per_pass = 32 * 4 // max(4, itemsize)  # threads served together: 32 for 4 bytes, 16 for 8
            key = (array, block, step, k, thread // per_pass)
            groups.setdefault(key, []).append((thread, flat, itemsize))
    worst = (1, None)
    for (array, block, step, k, _), touched in sorted(groups.items(), key=lambda item: item[0][1:]):
        banks = {}
        for thread, flat, itemsize in touched:
            first = flat * itemsize // 4
            for word in range(first, first + max(1, itemsize // 4)):
                banks.setdefault(word % 32, set()).add(word)
        n = max(len(words) for words in banks.values())
        if n > worst[0]:
            worst = (n, (block, step, k, [flat for _, flat, _ in sorted(touched)][:8]))
    return worst


def with_garbage_shared_memory(launch):
    """`launch()`'s result (it launches CUDA kernels) when every `cuda.shared.array` and
    `cuda.local.array` starts filled with garbage (NaN, or an integer type's largest value).
    None when numba's CUDA simulator is not in use.

    Why: nothing initialises shared memory on a GPU. A kernel that reads a slot it never
    wrote can pass on the simulator's fresh memory, often zeros, and give NaN on a GPU."""
    from numba.core import config

    if not config.ENABLE_CUDASIM:
        return None
    from numba.cuda.simulator import kernelapi

    original = kernelapi.np
    kernelapi.np = _NumpyWithEmpty(_garbage_filled)  # NaN, or an integer type's largest value
    try:
        return launch()
    finally:
        kernelapi.np = original


def held_bytes(obj):
    """The size of `obj` with everything it holds, in bytes (its pickle's length).

    Why: a contract such as "keeps a summary, not every batch" is about what an object holds
    on to, which its results cannot show."""
    import pickle

    return len(pickle.dumps(obj))

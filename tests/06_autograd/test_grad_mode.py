"""no_grad() / enable_grad(): nothing is recorded inside no_grad, modes nest and are restored,
and both work as context managers and as decorators."""
import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch import autograd


def make_w():
    return tt.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)


OPS = {
    "add": lambda w: w + 1, "mul": lambda w: w * w, "T": lambda w: w.T, "sum": lambda w: w.sum(),
    "getitem": lambda w: w[0], "exp": lambda w: w.exp(), "matmul": lambda w: w @ w.T,
    "reshape": lambda w: w.reshape(6), "relu": F.relu, "cat": lambda w: tt.cat([w, w]),
    "advanced index": lambda w: w[tt.tensor([1, 1])], "mean": lambda w: w.mean(1),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_no_grad_records_nothing(name):
    w = make_w()
    with tt.no_grad():
        out = OPS[name](w)
    assert out.grad_fn is None, f"{name} recorded a node under no_grad"
    assert not out.requires_grad and out.is_leaf
    assert tt.is_grad_enabled()
    recorded = OPS[name](w)  # and outside it, recording is back
    assert recorded.grad_fn is not None and recorded.requires_grad


def test_same_objects_everywhere():
    assert tt.no_grad is autograd.no_grad and tt.enable_grad is autograd.enable_grad
    with autograd.no_grad():
        assert not tt.is_grad_enabled()
    assert tt.is_grad_enabled()


def test_enable_grad_inside_no_grad_and_nesting():
    w = make_w()
    with tt.no_grad():
        with tt.enable_grad():
            assert tt.is_grad_enabled()
            y = (w * 2).sum()
        assert not tt.is_grad_enabled(), "enable_grad restores the mode it found (off)"
        with tt.no_grad():
            assert not tt.is_grad_enabled()
        assert not tt.is_grad_enabled()
    assert tt.is_grad_enabled()
    assert y.grad_fn is not None
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 3), 2.0))


def test_grad_mode_enter_and_exit_with_the_same_object_entered_twice():
    """Each exit restores the mode its own entry found, also when one object is entered again
    before it exits: the two methods share what __enter__ keeps for __exit__."""
    ctx = tt.no_grad()
    try:
        with ctx:
            with ctx:
                assert not tt.is_grad_enabled()
            assert not tt.is_grad_enabled(), "after the inner exit, grad mode is the outer block's: off"
        assert tt.is_grad_enabled(), "after the outer exit, grad mode is what it was before: on"
    except AssertionError:
        raise
    except Exception as exc:  # a crash in either method is this contract's failure, not the other's
        pytest.fail(f"entering one no_grad() object twice, then leaving it twice, raised {type(exc).__name__}: {exc}")
    finally:
        tt.set_grad_enabled(True)


def test_mode_restored_after_exception():
    with pytest.raises(ZeroDivisionError):
        with tt.no_grad():
            1 / 0
    assert tt.is_grad_enabled()
    tt.set_grad_enabled(False)
    try:
        with pytest.raises(KeyError):
            with tt.enable_grad():
                raise KeyError("x")
        assert not tt.is_grad_enabled(), "enable_grad must restore 'off' even after an error"
    finally:
        tt.set_grad_enabled(True)


@pytest.mark.parametrize("kind", ["no_grad", "enable_grad"])
def test_with_as_binds_the_context_object(kind):
    ctx = getattr(tt, kind)()
    with ctx as bound:
        assert bound is ctx, f"`with {kind}() as c` must bind c to the context object, got {bound!r}"
    with getattr(tt, kind)() as fresh:
        assert isinstance(fresh, getattr(tt, kind)), f"`with {kind}() as c` bound c to {fresh!r}"


@pytest.mark.parametrize("kind, start", [("no_grad", True), ("no_grad", False),
                                         ("enable_grad", False), ("enable_grad", True)])
def test_an_exception_inside_the_block_propagates_and_the_mode_is_restored(kind, start):
    class Boom(Exception):
        pass

    tt.set_grad_enabled(start)
    try:
        with pytest.raises(Boom):  # __exit__ must not swallow it
            with getattr(tt, kind)():
                raise Boom("raised inside the block")
        assert tt.is_grad_enabled() is start, f"grad mode after a {kind}() block that raised"
    finally:
        tt.set_grad_enabled(True)


@pytest.mark.parametrize("kind, start", [("no_grad", True), ("enable_grad", False)])
def test_grad_mode_enter_switches_the_mode_and_returns_the_context_object(kind, start):
    """__enter__ alone (the mode is put back by hand, not by __exit__)."""
    tt.set_grad_enabled(start)
    ctx = getattr(tt, kind)()
    try:
        bound = ctx.__enter__()
        assert tt.is_grad_enabled() is (not start), f"grad mode after {kind}().__enter__()"
        assert bound is ctx, f"{kind}().__enter__() must return the context object (what `with ... as c` binds), " \
                             f"got {bound!r}"
    finally:
        tt.set_grad_enabled(True)


@pytest.mark.parametrize("start", [True, False])
def test_grad_mode_exit_restores_the_mode_and_lets_the_exception_through(start):
    """__exit__ after one __enter__, told that the block raised."""
    tt.set_grad_enabled(start)
    ctx = tt.no_grad()
    try:
        ctx.__enter__()
        tt.set_grad_enabled(False)  # whatever __enter__ did, the block ran with grad mode off
        swallowed = ctx.__exit__(KeyError, KeyError("raised in the block"), None)
        assert not swallowed, f"__exit__ returned {swallowed!r}: a true value tells Python to swallow the exception"
        assert tt.is_grad_enabled() is start, "__exit__ must restore the mode its __enter__ found"
    finally:
        tt.set_grad_enabled(True)


def test_decorator_forms():
    w = make_w()

    @tt.no_grad()
    def evaluate(t):
        """docstring kept"""
        assert not tt.is_grad_enabled()
        return t * 3

    @tt.no_grad
    def bare(t):
        return t * 3

    @tt.enable_grad()
    def train_step(t):
        return t * 3

    assert evaluate(w).grad_fn is None and bare(w).grad_fn is None
    assert evaluate.__name__ == "evaluate" and evaluate.__doc__ == "docstring kept"
    assert tt.is_grad_enabled()
    with tt.no_grad():
        out = train_step(w)
        assert not tt.is_grad_enabled()
    assert out.grad_fn is not None
    with pytest.raises(ValueError):  # the decorated function's exception propagates ...
        tt.no_grad()(lambda: (_ for _ in ()).throw(ValueError("inner")))()
    assert tt.is_grad_enabled()  # ... and the mode is restored


def test_backward_under_no_grad_and_optimizer_update():
    w = make_w()
    loss = (w * w).sum()
    with tt.no_grad():
        loss.backward()  # backward itself works whatever the mode (it records nothing)
        w -= 0.1 * w.grad  # an optimizer step: in place, allowed under no_grad
    expected = np.arange(1.0, 7.0).reshape(2, 3) * (1 - 0.2)
    np.testing.assert_allclose(w.numpy(), expected)
    assert w.is_leaf and w.requires_grad and w.grad_fn is None

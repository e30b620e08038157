"""Every op goes through apply(): Nodes recorded with stable op names and attrs, only when needed."""

import numpy as np
import pytest

import tinytorch as tt


def make_w():
    return tt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)


def test_no_node_without_requires_grad():
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    for out in (x + 1, x * x, x.T, x.sum(), x[0], x.exp(), x @ x, x.reshape(4)):
        assert out.grad_fn is None and not out.requires_grad and out.is_leaf


@pytest.mark.parametrize("make, op", [
    (lambda w: w + 1, "add"), (lambda w: 1 - w, "sub"), (lambda w: w * w, "mul"),
    (lambda w: w / 2, "div"), (lambda w: w ** 2, "pow"), (lambda w: -w, "neg"),
    (lambda w: w.exp(), "exp"), (lambda w: w.log(), "log"), (lambda w: w.sqrt(), "sqrt"),
    (lambda w: w.abs(), "abs"), (lambda w: w @ w.T, "matmul"),
    (lambda w: w.contiguous().T.contiguous(), "contiguous"), (lambda w: w.clone(), "clone"),
    (lambda w: w.double(), "to"), (lambda w: tt.cat([w, w]), "cat"), (lambda w: tt.stack([w, w]), "stack"),
])
def test_node_op_names(make, op):
    w = make_w()
    out = make(w)
    assert out.requires_grad and not out.is_leaf
    assert isinstance(out.grad_fn, tt.Node)
    assert out.grad_fn.op == op
    assert any(inp is w for inp in out.grad_fn.inputs) or op == "contiguous"
    np.testing.assert_array_equal(out.grad_fn.output, out.numpy())


def test_node_attrs_for_views():
    w = make_w()
    n = w.transpose(-1, 0).grad_fn
    assert (n.op, n.attrs) == ("transpose", {"dim0": 1, "dim1": 0})
    n = w.unsqueeze(0).permute(2, -2, 0).grad_fn
    assert (n.op, n.attrs["dims"]) == ("permute", (2, 1, 0))
    assert w.T.grad_fn.op == "permute" and w.T.grad_fn.attrs["dims"] == (1, 0)
    n = w.reshape(-1, 2).grad_fn
    assert (n.op, n.attrs["shape"]) == ("reshape", (3, 2))
    n = w.view(6).grad_fn
    assert (n.op, n.attrs["shape"]) == ("view", (6,))
    assert w.flatten().grad_fn.op == "reshape"
    n = w.expand(4, -1, 3).grad_fn
    assert (n.op, n.attrs["shape"]) == ("expand", (4, 2, 3))
    n = w.unsqueeze(-1).grad_fn
    assert (n.op, n.attrs["dim"]) == ("unsqueeze", 2)
    n = w.unsqueeze(1).squeeze().grad_fn
    assert (n.op, n.attrs["dims"]) == ("squeeze", (1,))
    assert w.T.grad_fn.inputs[0] is w


def test_view_output_shares_input_storage():
    w = make_w()
    out = w.T
    assert out._storage is w._storage
    assert np.shares_memory(out.grad_fn.output, w.numpy())


def test_node_attrs_for_reductions():
    w = make_w()
    n = w.sum(-1, keepdim=True).grad_fn
    assert (n.op, n.attrs) == ("sum", {"dim": (1,), "keepdim": True})
    n = w.mean().grad_fn
    assert (n.op, n.attrs) == ("mean", {"dim": (0, 1), "keepdim": False})
    assert w.amax(axis=0).grad_fn.attrs == {"dim": (0,), "keepdim": False}
    assert w.max().grad_fn.op == "amax"
    values, indices = w.max(dim=1)
    n = values.grad_fn
    assert n.op == "max" and n.attrs["dim"] == 1 and n.attrs["keepdim"] is False
    np.testing.assert_array_equal(np.squeeze(n.attrs["indices"], 1), indices.numpy())
    assert indices.grad_fn is None and not indices.requires_grad


def test_getitem_attrs_index_usable_by_numpy():
    w = make_w()
    for idx in [(1, slice(None, None, 2)), (Ellipsis, None, 0), 1, ([0, 1], [2, 0]), (tt.tensor([1, 0]),), w > 2]:
        out = w[idx]
        n = out.grad_fn
        assert n.op == "getitem"
        np.testing.assert_array_equal(w.numpy()[n.attrs["index"]], out.numpy())
        assert all(not isinstance(i, tt.Tensor) for i in n.attrs["index"])


def test_other_attrs():
    w = make_w()
    n = w.clamp(min=0.5).grad_fn
    assert (n.op, n.attrs) == ("clamp", {"min": 0.5, "max": None})
    n = tt.where(w > 2, w, 0.0).grad_fn
    assert n.op == "where" and n.attrs["cond"].dtype == bool and n.attrs["cond"].shape == (2, 3)
    n = tt.cat([w, w[:1]], dim=-2).grad_fn
    assert n.attrs == {"dim": 0, "sizes": (2, 1)}
    assert len(n.inputs) == 2


def test_scalars_become_0d_inputs():
    w = make_w()
    n = (w * 3).grad_fn
    assert len(n.inputs) == 2 and n.inputs[0] is w
    other = n.inputs[1]
    assert isinstance(other, tt.Tensor) and other.shape == () and not other.requires_grad
    assert other.item() == 3.0 and other.dtype == tt.float32
    n = (2 - w).grad_fn
    assert n.inputs[1] is w and n.inputs[0].item() == 2.0


def test_comparisons_and_int_results_never_recorded():
    w = make_w()
    for out in (w > 1, w == w, w <= 2, w.argmax(), w.argmax(dim=1), w.long()):
        assert out.grad_fn is None and not out.requires_grad


def test_grad_mode_switch():
    w = make_w()
    assert tt.is_grad_enabled()
    tt.set_grad_enabled(False)
    try:
        assert not tt.is_grad_enabled()
        out = w * 2
        assert out.grad_fn is None and not out.requires_grad
    finally:
        tt.set_grad_enabled(True)
    assert (w * 2).grad_fn is not None


@pytest.mark.parametrize("x_grad", [False, True])
@pytest.mark.parametrize("y_grad", [False, True])
def test_needs_node_when_any_input_requires_grad(x_grad, y_grad):
    """The recording rule on its own: one input that requires grad is enough."""
    from tinytorch._tensor import _needs_node

    x = tt.tensor([1.0, 2.0], requires_grad=x_grad)
    y = tt.tensor([3.0, 4.0], requires_grad=y_grad)
    out = tt.tensor([4.0, 6.0])
    assert _needs_node(out, (x, y)) is (x_grad or y_grad), f"inputs requiring grad: x {x_grad}, y {y_grad}"
    assert _needs_node(out, (x,)) is x_grad


def test_needs_node_only_for_floating_results_in_grad_mode():
    from tinytorch._tensor import _needs_node

    w = tt.tensor([1.0, 2.0], requires_grad=True)
    assert _needs_node(tt.tensor([1.0]), (w,)) is True
    assert _needs_node(tt.tensor([True]), (w,)) is False, "a bool result has no gradient"
    assert _needs_node(tt.tensor([1]), (w,)) is False, "an integer result has no gradient"
    tt.set_grad_enabled(False)
    try:
        assert _needs_node(tt.tensor([1.0]), (w,)) is False, "grad mode off: nothing is recorded"
    finally:
        tt.set_grad_enabled(True)


def test_apply_directly():
    w = make_w()
    out = tt.apply("double", lambda x, factor: x.numpy() * factor, w, factor=2)
    np.testing.assert_array_equal(out.numpy(), w.numpy() * 2)
    assert out.grad_fn.op == "double" and out.grad_fn.attrs == {"factor": 2}
    assert out.grad_fn.name() == "DoubleBackward"
    assert out._storage is not w._storage
    alias = tt.apply("alias", lambda x: x.numpy(), w)  # a forward returning a numpy VIEW
    assert not np.shares_memory(alias.numpy(), w.numpy())
    # ... or the very array that owns the input's memory, or the storage itself
    assert w._storage.base is not None and w._storage.base.base is None, \
        "this test needs _init_storage to keep the array it was given (its storage is a view of it)"
    for grab in (lambda x: x._storage.base, lambda x: x._storage):
        out = tt.apply("grab", grab, w)
        assert not np.shares_memory(out.numpy(), w.numpy())
    same = tt.apply("noop", lambda x: x, w)  # a forward returning its input
    assert same is not w and w.grad_fn is None and same._storage is w._storage


def test_node_names_and_repr():
    w = make_w()
    assert (w + 1).grad_fn.name() == "AddBackward"
    assert repr((w + 1).grad_fn) == "<AddBackward>"
    assert tt.where(w > 0, w, w).grad_fn.name() == "WhereBackward"


def test_requires_grad_rules():
    x = tt.tensor([1.0, 2.0])
    assert not x.requires_grad and x.grad is None and x.is_leaf
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    with pytest.raises(ValueError, match="floating"):
        tt.tensor([1, 2], requires_grad=True)
    i = tt.tensor([1, 2])
    with pytest.raises(ValueError):
        i.requires_grad_()
    y = tt.tensor([1.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError):
        y.requires_grad = False


def test_detach_and_data_cut_history():
    w = make_w()
    y = w * 2
    for d in (y.detach(), y.data):
        assert d.grad_fn is None and not d.requires_grad
        assert d._storage is y._storage


def test_backward_without_autograd_raises_clear_error():
    from tinytorch.testing import hidden_module

    w = make_w()
    # Simulate "module 06 not there yet" (also once it exists): the import of
    # tinytorch.autograd fails, and backward() must say where autograd comes from.
    loss = (w * 2).sum()
    with hidden_module("tinytorch.autograd"), pytest.raises(RuntimeError, match="06"):
        loss.backward()


def _recording_mode():
    from tinytorch.utils.dispatch import DispatchMode

    class Recorder(DispatchMode):
        def __init__(self):
            self.ops = []

        def dispatch(self, op, fn, args, kwargs):
            self.ops.append(op)
            return fn(*args, **kwargs)

    return Recorder()


def test_dispatch_mode_sees_every_op_while_active_and_none_after():
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]])
    mode = _recording_mode()
    with mode:
        y = (x * 2 + 1).sum()
    assert mode.ops == ["mul", "add", "sum"], f"ops seen inside the mode: {mode.ops}"
    assert y.item() == 24.0
    x * 3
    assert mode.ops == ["mul", "add", "sum"], "a mode that was switched off still sees ops"


def test_dispatch_modes_nest_innermost_first_and_may_replace_the_result():
    from tinytorch.utils.dispatch import DispatchMode

    seen = []

    class Tag(DispatchMode):
        def __init__(self, name, scale=None):
            self.name, self.scale = name, scale

        def dispatch(self, op, fn, args, kwargs):
            seen.append((self.name, op))
            out = fn(*args, **kwargs)
            return out * self.scale if self.scale is not None else out

    x = tt.tensor([1.0, 2.0])
    with Tag("outer"):
        with Tag("inner", scale=10.0):
            y = x + 1
    assert seen == [("inner", "add"), ("outer", "add")], seen
    np.testing.assert_array_equal(y.numpy(), [20.0, 30.0])


def test_ops_a_mode_runs_itself_are_not_sent_back_to_it():
    from tinytorch.utils.dispatch import DispatchMode

    class Doubler(DispatchMode):
        calls = 0

        def dispatch(self, op, fn, args, kwargs):
            Doubler.calls += 1
            out = fn(*args, **kwargs)
            tt.tensor([1.0]) + 1  # an op inside dispatch: must not recurse into this mode
            return out

    with Doubler():
        tt.tensor([1.0]) * 2
    assert Doubler.calls == 1

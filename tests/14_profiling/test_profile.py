"""The profiler: one record per op (forward ops and backward rules), in order, nothing when
inactive; the records' fields; key_averages; per-op FLOPs add up to the model's total."""
import time

import numpy as np

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import functional as F
from tinytorch.profiler import FunctionEvent, conv2d_flops, output_bytes, profile
from tinytorch.utils.dispatch import DispatchMode


class OpLog(DispatchMode):
    """A reference mode: the names of the ops that reach it."""

    def __init__(self):
        self.names = []

    def dispatch(self, op, fn, args, kwargs):
        self.names.append(op)
        return fn(*args, **kwargs)


def _mlp():
    tt.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def test_output_bytes_kinds():
    assert output_bytes(np.zeros((3, 5), dtype=np.float32)) == 60, "expected 60 bytes for a (3,5) float32 array"
    assert output_bytes(tt.ones(3, 5).T) == 0, "expected 0 bytes for a view (a Tensor result)"
    got = output_bytes((np.zeros(2, dtype=np.float32), None, np.zeros((2, 2))))
    assert got == 40, f"expected 8 + 0 + 32 = 40 bytes for a tuple of gradients, got {got}"
    assert output_bytes([np.zeros(3, dtype=np.int64)]) == 24, "expected 24 bytes for a list holding int64[3]"
    assert output_bytes(None) == 0 and output_bytes(3.0) == 0, "expected 0 for None and for a number"


def test_profile_dispatch_records_every_op_once_in_order():
    net, x = _mlp(), tt.randn(4, 6)
    log, prof = OpLog(), profile()
    with log:
        with prof as same:
            net(x).sum().backward()
    names = [e.name for e in prof.events()]
    assert same is prof, "expected `with profile() as prof` to give the profiler"
    assert names == log.names, (
        f"an outer mode saw every op your profiler passed on; it and your records must agree. The outer mode saw\n"
        f"{log.names}\nyour records are\n{names}\n(an op listed twice by the outer mode ran twice in your dispatch)")
    assert names[:8] == ["permute", "matmul", "add", "relu", "permute", "matmul", "add", "sum"], \
        f"expected the forward ops of Linear, ReLU, Linear, sum, got {names[:8]}"
    backward = names[8:]
    assert sorted(backward) == sorted(["SumBackward", "AddBackward", "MatmulBackward", "ReluBackward", "AddBackward",
                                       "MatmulBackward", "PermuteBackward", "PermuteBackward"]), \
        f"expected each backward node exactly once, got {backward}"
    assert backward[0] == "SumBackward", f"expected backward to start at the loss's node, got {backward[0]}"


def test_profile_dispatch_returns_the_same_values_and_grads():
    net, x = _mlp(), tt.randn(4, 6)
    out = net(x)
    out.sum().backward()
    plain = [p.grad.numpy().copy() for p in net.parameters()]
    net.zero_grad()
    with profile():
        out2 = net(x)
        out2.sum().backward()
    np.testing.assert_array_equal(out2.numpy(), out.numpy(), err_msg="expected identical outputs under the profiler")
    for g, p in zip(plain, net.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), g, err_msg="expected identical gradients under the profiler")


def test_profile_dispatch_record_fields():
    net, x = _mlp(), tt.randn(4, 6)
    with profile() as prof:
        net(x).sum().backward()
    ev = prof.events()
    assert isinstance(ev[1], FunctionEvent), f"expected FunctionEvent records, got {type(ev[1]).__name__}"
    mm = ev[1]
    assert (mm.name, mm.input_shapes, mm.flops, mm.cpu_memory_usage) == ("matmul", [(4, 6), (6, 5)], 240, 80), \
        f"expected ('matmul', [(4, 6), (6, 5)], 240 FLOPs, 80 bytes), got {(mm.name, mm.input_shapes, mm.flops, mm.cpu_memory_usage)}"
    assert ev[0].cpu_memory_usage == 0, f"expected a view (W.T) to allocate 0 bytes, got {ev[0].cpu_memory_usage}"
    assert ev[2].input_shapes == [(4, 5), (5,)], f"expected the bias add's shapes [(4, 5), (5,)], got {ev[2].input_shapes}"
    relu_b = [e for e in ev if e.name == "ReluBackward"][0]
    assert relu_b.input_shapes == [(4, 5)], f"expected a backward rule's shape to be its gradient's, got {relu_b.input_shapes}"
    assert relu_b.cpu_memory_usage == 4 * 5 * 4, f"expected ReluBackward's gradient (80 bytes), got {relu_b.cpu_memory_usage}"
    assert all(e.cpu_time_total > 0 for e in ev), "expected every op to take a positive time"


def test_profile_dispatch_times_fit_in_the_block():
    net, x = _mlp(), tt.randn(64, 6)
    with profile() as prof:
        start = time.perf_counter()
        net(x)
        wall_us = (time.perf_counter() - start) * 1e6
    total = sum(e.cpu_time_total for e in prof.events())
    assert 0 < total <= wall_us, f"expected the ops' microseconds to fit in the block's {wall_us:.1f} µs, got {total:.1f}"


def test_profile_dispatch_times_the_op_alone_in_microseconds(monkeypatch):
    import tinytorch.profiler as profiler

    ticks = [100.0]  # a fake clock: the op takes 2 ms of it, each piece of bookkeeping a whole second

    def op(a):
        ticks[0] += 0.002
        return a * 2.0

    def slow(f):
        def wrapped(*args):
            ticks[0] += 1.0
            return f(*args)
        return wrapped

    class FakeTime:
        """The time module for this one call: only perf_counter, on the fake clock."""
        perf_counter = staticmethod(lambda: ticks[0])

        def __getattr__(self, name):
            raise AssertionError(f"dispatch read time.{name}: the contract's clock is time.perf_counter (this test "
                                 f"replaces the time module by a fake clock that has only perf_counter)")

    clock_home = profiler.time  # the time module where the package runs (under tito grade, in its own process)
    monkeypatch.setattr(profiler, "time", FakeTime())
    if hasattr(profiler, "perf_counter"):  # `from time import perf_counter` in the exported file
        monkeypatch.setattr(profiler, "perf_counter", FakeTime.perf_counter)
    monkeypatch.setattr(profiler, "op_flops", slow(profiler.op_flops))
    monkeypatch.setattr(profiler, "output_bytes", slow(profiler.output_bytes))
    prof = profile()
    real_clock = clock_home.perf_counter  # an import inside dispatch reads the time module's own: replaced too
    clock_home.perf_counter = FakeTime.perf_counter
    try:
        prof.dispatch("mul", op, (np.ones(3),), {})
    finally:
        clock_home.perf_counter = real_clock
    got = prof.events()[0].cpu_time_total
    assert abs(got - 2000.0) < 1e-3, f"expected 2000 µs (the op alone, by time.perf_counter), got {got}"


def test_profile_dispatch_passes_the_op_options_to_op_flops():
    x = tt.randn(4, 6)
    with profile() as prof:
        F.softmax(x, dim=0)
    from tinytorch.profiler import softmax_flops
    assert prof.events()[0].flops == softmax_flops((4, 6), 0)


def test_profile_dispatch_records_nothing_when_inactive():
    net, x = _mlp(), tt.randn(4, 6)
    idle = profile()
    net(x).sum().backward()
    assert len(idle.events()) == 0, f"expected a profiler never entered to record nothing, got {len(idle.events())}"
    with profile() as prof:
        net(x)
    n = len(prof.events())
    net(x).sum().backward()
    assert len(prof.events()) == n == 7, f"expected the 7 forward ops only, nothing after the block; got {n} then {len(prof.events())}"


def test_key_averages_counts_and_sums():
    prof = profile()
    prof._events = [FunctionEvent("matmul", [(2, 3), (3, 4)], 10.0, 48, 32), FunctionEvent("add", [(2, 4), (4,)], 1.0, 8, 32),
                    FunctionEvent("matmul", [(2, 4), (4, 1)], 4.0, 16, 8), FunctionEvent("matmul", [(2, 3), (3, 4)], 6.0, 48, 32)]
    avg = prof.key_averages()
    got = [(a.key, a.count, a.cpu_time_total, a.flops, a.cpu_memory_usage) for a in avg]
    assert got == [("matmul", 3, 20.0, 112, 72), ("add", 1, 1.0, 8, 32)], f"expected grouped sums in first-seen order, got {got}"
    assert abs(avg[0].cpu_time - 20.0 / 3) < 1e-12, f"expected a mean of 20/3 µs, got {avg[0].cpu_time}"
    assert avg[0].input_shapes is None, f"expected no shapes without group_by_input_shape, got {avg[0].input_shapes}"
    by = prof.key_averages(group_by_input_shape=True)
    got = [(a.key, a.count, a.flops, a.input_shapes) for a in by]
    assert got == [("matmul", 2, 96, [(2, 3), (3, 4)]), ("add", 1, 8, [(2, 4), (4,)]), ("matmul", 1, 16, [(2, 4), (4, 1)])], \
        f"expected groups by (name, shapes), got {got}"
    prof._events = [FunctionEvent("add", [(2, 3), (2, 3)], 1.0, 6, 24), FunctionEvent("mul", [(2, 3), (2, 3)], 2.0, 6, 24)]
    got = [(a.key, a.count) for a in prof.key_averages(group_by_input_shape=True)]
    assert got == [("add", 1), ("mul", 1)], f"an add and a mul on the same shapes are two groups, got {got}"
    table = avg.table(sort_by="flops", row_limit=1)
    assert "matmul" in table and "add" not in table.split("\n")[2], f"expected the largest row first and one row:\n{table}"


def test_key_averages_of_a_real_run():
    net, x = _mlp(), tt.randn(4, 6)
    with profile() as prof:
        net(x).sum().backward()
    avg = {a.key: a for a in prof.key_averages()}
    assert (avg["matmul"].count, avg["MatmulBackward"].count, avg["AddBackward"].count) == (2, 2, 2), \
        f"expected 2 matmuls, 2 MatmulBackward, 2 AddBackward, got {[(k, a.count) for k, a in avg.items()]}"
    assert avg["matmul"].flops == 2 * 4 * 6 * 5 + 2 * 4 * 5 * 3, f"expected 390 matmul FLOPs, got {avg['matmul'].flops}"
    assert sum(a.count for a in avg.values()) == len(prof.events()), "expected the counts to add up to the number of events"


def test_profile_records_add_up_to_mlp_total():
    tt.manual_seed(2)
    net = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
    x = tt.randn(5, 10)
    with profile() as prof:
        F.mse_loss(net(x), tt.zeros(5, 3))
    hand = (2 * 5 * 10 * 8 + 5 * 8) + 5 * 8 + (2 * 5 * 8 * 3 + 5 * 3) + (2 * 15 + 16)
    got = sum(e.flops for e in prof.events())
    assert got == hand, f"expected Linear + ReLU + Linear + MSE(mean) = {hand} FLOPs, got {got}"


def test_profile_records_add_up_to_cnn_total():
    tt.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, stride=2),
                        nn.Flatten(), nn.Linear(6, 5))
    x = tt.randn(3, 1, 8, 8)
    with profile() as prof:
        out = cnn(x)
    assert out.shape == (3, 5)
    hand = (conv2d_flops((3, 1, 8, 8), (4, 1, 3, 3), 1, 1) + 3 * 4 * 64 + 3 * 4 * 16 * 4
            + conv2d_flops((3, 4, 4, 4), (6, 4, 3, 3), 2, 0) + 2 * 3 * 6 * 5 + 3 * 5)
    got = sum(e.flops for e in prof.events())
    assert got == hand, f"expected conv + relu + pool + conv + linear = {hand} FLOPs, got {got}"


def test_profile_backward_flops_count_needed_products():
    tt.manual_seed(2)
    net = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
    with profile() as prof:
        net(tt.randn(5, 10)).sum().backward()
    got = sum(e.flops for e in prof.events() if e.name == "MatmulBackward")
    expected = 2 * 5 * 10 * 8 + 2 * (2 * 5 * 8 * 3)
    assert got == expected, f"expected one product for layer 1 (x needs no grad) and two for layer 2: {expected}, got {got}"


def test_profile_records_gpt_forward_and_backward():
    tt.manual_seed(0)
    gpt = nn.GPT(nn.GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2))
    idx = tt.randint(0, 11, (2, 8))
    log, prof = OpLog(), profile()
    with log:
        with prof:
            _, loss = gpt(idx, idx)
            loss.backward()
    names = [e.name for e in prof.events()]
    assert names == log.names, "expected one record per op of the GPT's forward and backward, in order"
    assert names.count("layer_norm") == 5 and names.count("LayerNormBackward") == 5, \
        f"expected 5 LayerNorms forward and backward, got {names.count('layer_norm')}, {names.count('LayerNormBackward')}"
    assert gpt.head.weight.grad is not None, "expected the backward to have run through the profiler"


def _raised_under_profile(fn):
    try:
        with profile():
            fn()
    except Exception as exc:
        return exc
    return None


def test_profile_dispatch_records_no_event_for_an_op_that_raised():
    prof = profile()
    try:
        with prof:
            tt.ones(2, 3) + tt.ones(4, 5)
    except tt.ShapeError:
        pass
    names = [e.name for e in prof.events()]
    assert "add" not in names, (f"an add that raised ran no op, so the profile must hold no event for it; got the "
                                f"events {names}")


def test_profile_dispatch_lets_the_ops_own_error_through():
    for what, fn, kind, text in [("(2, 3) + (4, 5)", lambda: tt.ones(2, 3) + tt.ones(4, 5), tt.ShapeError, "(2, 3)"),
                                 ("ones(2, 3)[5]", lambda: tt.ones(2, 3)[5], IndexError, "out of bounds")]:
        exc = _raised_under_profile(fn)
        assert isinstance(exc, kind) and text in str(exc), (
            f"{what} under profile(): the op's own {kind.__name__} (mentioning {text!r}) must reach the caller "
            f"unchanged, as it does without the profiler; got "
            + ("nothing raised" if exc is None else f"{type(exc).__name__}: {exc}"))

"""self_times: every event's self time from the flat order a profile records (each scope after
its contents), against a tree built by hand; record_function's events in a real profile."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.profiler import FunctionEvent, profile, record_function, self_times


def op(name, us):
    return FunctionEvent(name, [], us, 0, 0)


def scope(name, us, size):
    return FunctionEvent(name, [], us, 0, 0, scope_size=size)


def flatten(tree, rng):
    """(events, expected self times) of a tree: an op is ("op", µs); a scope ("scope", own µs, [children])."""
    events, selfs = [], []
    total = 0.0
    for kind, *rest in tree:
        if kind == "op":
            events.append(op("op", rest[0]))
            selfs.append(rest[0])
            total += rest[0]
        else:
            own, children = rest
            inner_events, inner_selfs, inner_total = flatten(children, rng)
            events += inner_events + [scope("scope", own + inner_total, len(inner_events))]
            selfs += inner_selfs + [own]
            total += own + inner_total
    return events, selfs, total


def random_tree(rng, depth):
    return [("op", float(rng.integers(1, 50))) if depth == 0 or rng.random() < 0.5
            else ("scope", float(rng.integers(0, 20)), random_tree(rng, depth - 1))
            for _ in range(int(rng.integers(0, 4)))]


def test_self_times_of_the_notebooks_example():
    events = [op("a", 5.0), op("b", 10.0), op("c", 20.0), scope("block", 40.0, 2), op("d", 1.0), scope("forward", 60.0, 5)]
    got = self_times(events)
    assert got == [5.0, 10.0, 20.0, 10.0, 1.0, 14.0], (
        f"ops a, b, c (5, 10, 20 µs), scope 'block' (40 µs, over b and c), op d (1), scope 'forward' (60, over "
        f"all five): expected self times [5, 10, 20, 10, 1, 14], got {got}")


def test_self_times_of_nested_scopes_count_only_direct_children():
    events = [op("leaf", 1.0)] + [scope(f"s{k}", 1.0 + k, k) for k in range(1, 6)]
    got = self_times(events)
    assert got == [1.0] * 6, f"each scope is 1 µs longer than its one direct child: expected six 1.0, got {got}"


def test_self_times_of_an_empty_scope_is_its_total():
    got = self_times([scope("empty", 4.0, 0), scope("outer", 9.0, 1)])
    assert got == [4.0, 5.0], f"an empty 4 µs scope inside a 9 µs scope: expected [4.0, 5.0], got {got}"


@pytest.mark.parametrize("seed", range(20))
def test_self_times_of_random_trees(seed):
    rng = np.random.default_rng(seed)
    events, expected, _ = flatten([("scope", 3.0, random_tree(rng, 4))], rng)
    got = self_times(events)
    assert len(got) == len(events), f"one self time per event: {len(events)} events, got {len(got)} values"
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9,
                               err_msg=f"a random tree of scopes: times {[e.cpu_time_total for e in events]}, "
                                       f"scope sizes {[e.scope_size for e in events]}")


def test_self_times_leave_the_events_alone():
    events = [op("a", 1.0), op("b", 2.0), scope("s", 4.0, 2)]
    before = [FunctionEvent(e.name, [], e.cpu_time_total, 0, 0, e.scope_size) for e in events]
    self_times(events)
    assert events == before, "self_times must leave the events it is given as they were"


def test_self_times_refuse_a_scope_claiming_too_many_events():
    with pytest.raises(ValueError, match="'s'"):
        self_times([op("a", 1.0), scope("s", 2.0, 3)])


def test_self_times_refuse_a_scope_that_cuts_an_inner_scope():
    with pytest.raises(ValueError, match="'cut'"):
        self_times([op("a", 1.0), op("b", 1.0), scope("in", 3.0, 2), scope("cut", 4.0, 2)])


def test_self_times_of_a_real_profile():
    with profile() as prof:
        with record_function("outer"):
            tt.ones(2, 2) + 1.0
            with record_function("inner"):
                tt.ones(2, 2) * 2.0
                tt.ones(2, 2) * 3.0
    events = prof.events()
    assert [(e.name, e.scope_size) for e in events] == [("add", None), ("mul", None), ("mul", None), ("inner", 2),
                                                        ("outer", 4)]
    got = self_times(events)
    want = [events[0].cpu_time_total, events[1].cpu_time_total, events[2].cpu_time_total,
            events[3].cpu_time_total - events[1].cpu_time_total - events[2].cpu_time_total,
            events[4].cpu_time_total - events[0].cpu_time_total - events[3].cpu_time_total]
    assert got == pytest.approx(want, rel=1e-12), (
        f"a real profile (add, mul, mul, scope 'inner' over the muls, scope 'outer' over the add and 'inner'): "
        f"expected self times {want}, got {got}")
    assert prof.events().total_time() == pytest.approx(sum(e.cpu_time_total for e in events[:3]), rel=1e-12), \
        "total_time sums the ops only"

"""The backward engine: values, accumulation, topological order, linear time, deep graphs,
freeing and retain_graph, retain_grad, detach, requires_grad propagation, error messages."""
import sys

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import autograd, nn
from tinytorch.testing import equality_calls, peak_bytes, weak_ref


def test_one_neuron_values():
    w = tt.tensor(2.0, requires_grad=True)
    b = tt.tensor(1.0, requires_grad=True)
    y = tt.tensor(5.0, requires_grad=True)
    x = tt.tensor(3.0)
    loss = (w * x + b - y) ** 2
    loss.backward()
    d = 2.0 * 3.0 + 1.0 - 5.0
    got = (w.grad.item(), b.grad.item(), y.grad.item())
    assert got == (2 * d * 3.0, 2 * d, -2 * d), (
        f"loss = (w*x + b - y)**2 at w=2, x=3, b=1, y=5: (dw, db, dy) should be "
        f"{(2 * d * 3.0, 2 * d, -2 * d)}, got {got}")
    assert x.grad is None, "a tensor that does not require grad gets no .grad"


def test_grad_is_a_tensor_of_the_leaf_shape_and_dtype():
    w32 = tt.tensor(np.ones((3, 1), dtype=np.float32), requires_grad=True)
    x64 = tt.tensor(np.arange(6.0).reshape(2, 3, 1))
    out = (w32 * x64).sum()  # float32 * float64 -> float64, broadcast (3, 1) against (2, 3, 1)
    assert out.dtype == tt.float64
    out.backward()
    assert isinstance(w32.grad, tt.Tensor) and not w32.grad.requires_grad
    assert w32.grad.dtype == tt.float32 and w32.grad.shape == (3, 1)
    np.testing.assert_allclose(w32.grad.numpy(), np.arange(6.0).reshape(2, 3, 1).sum(0))


def test_tensor_used_twice_and_accumulation_across_calls():
    x = tt.tensor([1.0, -2.0, 3.0], dtype=tt.float64, requires_grad=True)
    (x * x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.numpy() ** 2,
                               err_msg="(x*x*x).sum(): x is used three times, and its gradient sums "
                                       "the three paths' gradients (3x**2)")
    grad_tensor = x.grad
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.numpy() ** 2 + 2.0,
                               err_msg="a second backward adds its gradient (2) to the .grad the first "
                                       "left (3x**2); it must not replace it")
    assert x.grad is grad_tensor, "accumulation happens in place in the existing .grad"
    x.grad = None
    (x * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


def test_zero_grad_clears_between_steps():
    tt.manual_seed(0)
    layer = nn.Linear(3, 2)
    data = tt.randn(4, 3)

    def step():
        layer(data).sum().backward()
        return [p.grad.numpy().copy() for p in layer.parameters()]

    first = step()
    second = step()
    for a, b in zip(first, second):
        np.testing.assert_allclose(b, 2 * a, rtol=1e-6)
    layer.zero_grad()
    assert all(p.grad is None for p in layer.parameters())
    third = step()
    for a, c in zip(first, third):
        np.testing.assert_allclose(c, a, rtol=1e-6)
    layer.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in layer.parameters())
    fourth = step()
    for a, d in zip(first, fourth):
        np.testing.assert_allclose(d, a, rtol=1e-6)
    np.testing.assert_allclose(first[0], np.ones((2, 1)) * data.numpy().sum(0), rtol=1e-5)


def test_run_backward_iterates_over_a_chain_of_10000_ops():
    limit = sys.getrecursionlimit()
    x = tt.tensor([0.5], dtype=tt.float64, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    assert sys.getrecursionlimit() == limit, "do not raise the recursion limit: iterate"
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 10_000], rtol=1e-10)


def test_run_backward_is_linear_on_sixty_stacked_diamonds(custom_rules):
    runs = []

    def counted(node, grad):
        runs.append(1)
        assert len(runs) <= 10 * 60, (
            f"the engine ran the diamonds' rules more than {10 * 60} times for 60 layers of 3 nodes: a node "
            f"reached along two paths must run once, after both have given it their gradient (pushing each "
            f"path's gradient down at once would run the bottom 2**60 times)")
        return (grad,)

    custom_rules("test_counted_identity", counted)
    x = tt.tensor(1.0, dtype=tt.float64, requires_grad=True)
    y = x
    for _ in range(60):
        a = tt.apply("test_counted_identity", lambda t: t.numpy().copy(), y)
        b = y + 0.0
        y = a + b  # every layer is a diamond: y -> (a, b) -> y'
    y.backward()
    assert x.grad.item() == 2.0 ** 60


def test_run_backward_runs_each_node_once_with_the_summed_gradient(custom_rules):
    calls = []

    def rule(node, grad):
        calls.append(grad.copy())
        return (grad * 2,)

    custom_rules("test_double", rule)
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    shared = tt.apply("test_double", lambda t: t.numpy() * 2, x)
    total = shared * 3.0 + shared * 4.0 + shared  # three consumers of one node
    total.sum().backward()
    assert len(calls) == 1, "a node's rule must run once, after all its consumers"
    np.testing.assert_allclose(calls[0], [8.0, 8.0])
    np.testing.assert_allclose(x.grad.numpy(), [16.0, 16.0])


def test_topological_order_is_valid_and_visits_each_node_once():
    rng = np.random.default_rng(0)
    x = tt.tensor(rng.standard_normal(3), requires_grad=True)
    pool = [x, x * 2]
    for i in range(40):  # a random DAG of ops over earlier results
        a, b = pool[rng.integers(len(pool))], pool[rng.integers(len(pool))]
        pool.append(a * b if i % 3 else a + b.exp())
    root = pool[-1].sum()
    order = autograd.topological_order([root.grad_fn])
    assert order[0] is root.grad_fn
    assert len(order) == len(set(order))
    position = {node: k for k, node in enumerate(order)}
    reachable, stack = set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node in reachable:
            continue
        reachable.add(node)
        for t in node.inputs:
            if t.grad_fn is not None:
                assert t.grad_fn in position, "every reachable node appears"
                assert position[node] < position[t.grad_fn], "consumers before producers"
                stack.append(t.grad_fn)
    assert reachable == set(order)


def test_topological_order_compares_each_node_a_bounded_number_of_times():
    """Linear in the graph: "seen?" is a hash lookup (a set, a dict), not a scan of a list of
    every node seen so far, which compares ~n^2/2 pairs on a chain of n ops."""
    x = tt.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(2000):
        y = y * 1.0
    compared = equality_calls(autograd.topological_order, [y.grad_fn], of=type(y.grad_fn))
    assert compared <= 2000, (f"topological_order of a chain of 2,000 ops compared two nodes {compared:,} times: "
                              f"a 'seen?' test that scans a list is quadratic; expected at most about one per node")


def test_topological_order_of_two_roots_sharing_a_subgraph():
    """autograd.grad([y1, y2], ...) walks from several roots: each root's nodes appear, shared ones once."""
    x = tt.tensor([0.5, 1.5], dtype=tt.float64, requires_grad=True)
    shared = x.exp()
    first, second = (shared * 2.0).sum(), (shared.log() * shared).sum()
    roots = [first.grad_fn, second.grad_fn]
    order = autograd.topological_order(roots)
    reachable, stack = set(), list(roots)
    while stack:
        node = stack.pop()
        if node not in reachable:
            reachable.add(node)
            stack.extend(t.grad_fn for t in node.inputs if t.grad_fn is not None)
    assert len(order) == len(set(order)), "each node once"
    assert set(order) == reachable, (f"the order holds every node reachable from either root: {len(reachable)} "
                                     f"nodes, got {len(set(order))}")
    position = {node: k for k, node in enumerate(order)}
    for node in order:
        for t in node.inputs:
            if t.grad_fn is not None:
                assert position[node] < position[t.grad_fn], "consumers before producers"


@pytest.mark.parametrize("direct_first", [True, False])
def test_topological_order_when_a_node_is_read_directly_and_through_another(direct_first):
    """p = exp(x) is read by the root directly AND through log(p): p must come after log(p),
    even though the root pushes it first (a node is entered once, not marked when pushed)."""
    x = tt.tensor([0.5, 1.5], dtype=tt.float64, requires_grad=True)
    p = x.exp()
    root = (p * p.log()) if direct_first else (p.log() * p)
    order = autograd.topological_order([root.grad_fn])
    assert len(order) == len(set(order)) == 3
    assert order.index(p.grad_fn) > max(order.index(n) for n in order if n is not p.grad_fn), \
        "exp(x), read by log(p) too, must come after log(p)"


@pytest.mark.parametrize("direct_first", [True, False])
def test_run_backward_sums_the_gradients_of_a_node_read_directly_and_through_another(direct_first):
    x = tt.tensor([0.5, 1.5], dtype=tt.float64, requires_grad=True)
    p = x.exp()
    root = (p * p.log()) if direct_first else (p.log() * p)
    root.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(x.numpy()) * (x.numpy() + 1), rtol=1e-12)


def test_accumulate_grad_keeps_a_copy_and_adds_in_place():
    t = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    g = np.array([10.0, 20.0])
    autograd.engine._accumulate_grad(t, g)
    first = t.grad
    assert isinstance(first, tt.Tensor) and not first.requires_grad
    assert first.shape == (2,) and first.dtype == tt.float64
    g[:] = -1.0  # the engine may reuse its arrays: .grad must not change with them
    np.testing.assert_array_equal(t.grad.numpy(), [10.0, 20.0], err_msg="t.grad after g was overwritten: .grad keeps a copy")
    autograd.engine._accumulate_grad(t, np.broadcast_to(np.array(1.0), (2,)))  # read-only, as sum's rule returns
    np.testing.assert_array_equal(t.grad.numpy(), [11.0, 21.0], err_msg="t.grad after a second gradient [1, 1]: the sum")
    assert t.grad is first, ("the second gradient must be added into the same .grad Tensor object, not put in a "
                             "new one (code holding the first no longer sees the sum)")
    w32 = tt.tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    autograd.engine._accumulate_grad(w32, np.array([0.5, 1.5]))  # a float64 gradient for a float32 leaf
    assert w32.grad.dtype == tt.float32
    np.testing.assert_array_equal(w32.grad.numpy(), [0.5, 1.5])


def test_accumulate_grad_leaves_no_grad_on_tensors_made_by_ops():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    autograd.engine._accumulate_grad(h, np.ones(2))
    assert h.grad is None, "a tensor made by an op gets no .grad unless it called retain_grad()"
    h.retain_grad()
    autograd.engine._accumulate_grad(h, np.ones(2))
    assert h.grad is not None, "h called retain_grad(), then received a gradient: it keeps it in .grad"
    np.testing.assert_array_equal(h.grad.numpy(), [1.0, 1.0])


def test_two_leaves_that_received_the_same_array_do_not_share_their_grad():
    a = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    b = tt.tensor([3.0, 4.0], dtype=tt.float64, requires_grad=True)
    (a + b).backward(tt.tensor([1.0, 1.0], dtype=tt.float64))  # add's rule may hand both the same array
    (a * 2.0).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0])


def test_run_backward_retain_graph_and_the_second_backward_error():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    assert y.grad_fn.inputs is not None, "retain_graph=True keeps the graph"
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)
    with pytest.raises(RuntimeError, match="retain_graph=True") as info:
        y.backward()
    assert "second time" in str(info.value)


def test_run_backward_frees_a_shared_subgraph_for_the_next_backward():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    h.exp().sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        (h * 2).sum().backward()


def test_run_backward_frees_a_node_that_received_no_gradient(custom_rules):
    """A rule may send no gradient to an input that requires one (a stop): the node behind
    that input is skipped, and freed all the same."""
    custom_rules("test_stop", lambda node, grad: (None,))
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    e = x.exp()
    stopped = tt.apply("test_stop", lambda t: t.numpy() * 1.0, e)
    stopped.backward(tt.ones(2, dtype=tt.float64))
    assert x.grad is None, "no gradient passed the stop"
    assert e.grad_fn.inputs is None and e.grad_fn.output is None, \
        "the exp node, which received no gradient, is freed too (every node reached is freed)"


def test_run_backward_skips_the_rule_of_a_node_that_received_no_gradient(custom_rules):
    calls = []
    custom_rules("test_stop", lambda node, grad: (None,))
    custom_rules("test_recorded", lambda node, grad: (calls.append(grad.copy()) or (grad,)))
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    below = tt.apply("test_recorded", lambda t: t.numpy() + 0.0, x)
    stopped = tt.apply("test_stop", lambda t: t.numpy() * 1.0, below)
    (stopped * 2.0 + x).sum().backward()
    assert calls == [], "the rule of a node whose only consumer sent no gradient must not run (not even on zeros)"
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0])


def test_run_backward_writes_into_no_gradient_array():
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    y = x * 2.0
    seed = np.array([1.0, 3.0])  # y's node receives this array as a root, then y * 3's gradient
    autograd.engine._run_backward([y, y * 3.0], [seed, np.ones(2)], False, lambda t, g: None)
    np.testing.assert_array_equal(seed, [1.0, 3.0], err_msg=(
        "_run_backward summed y's two gradients (its root gradient and y * 3's) into the first: the caller's "
        "root gradient changed. A sum goes into a new array."))


def test_run_backward_adds_the_seeds_of_a_root_given_twice():
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    y = (x * x).sum()
    (gx,) = autograd.grad([y, y], [x])
    np.testing.assert_allclose(gx.numpy(), 2 * 2 * x.numpy(), err_msg="grad([y, y], x) is twice dy/dx")


def test_run_backward_into_a_freed_graph_raises_before_any_gradient_arrives():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()
    h.exp().sum().backward()
    before = x.grad.numpy().copy()
    loss = (h * 2.0).sum()
    loss.retain_grad()
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
    assert loss.grad is None, "the root got its gradient before the error: the sink ran first"
    np.testing.assert_array_equal(x.grad.numpy(), before)


def test_run_backward_frees_the_graph_and_releases_activations():
    x = tt.tensor(np.ones((50, 50)), requires_grad=True)

    def forward():
        hidden = (x * 3.0).exp()
        return hidden, (hidden * hidden).sum()

    hidden, loss = forward()
    ref = weak_ref(hidden)
    del hidden
    assert ref() is not None, "before backward the graph keeps the activation alive"
    nodes = autograd.topological_order([loss.grad_fn])
    loss.backward()
    assert ref() is None, "after backward nothing may keep the activation alive"
    for node in nodes:
        assert node.inputs is None and node.output is None and node.attrs is None


def test_run_backward_releases_each_node_and_gradient_as_it_goes(custom_rules):
    """When the last rule of a chain runs, every other node is already freed and no gradient
    already used is still held: memory falls during backward, not at its end."""
    seen = {}

    def last_rule(node, grad):
        seen["unfreed"] = sum(n.inputs is not None for n in nodes if n is not node)
        return (grad,)

    custom_rules("test_last", last_rule)
    x = tt.tensor(np.ones(8), requires_grad=True)
    y = tt.apply("test_last", lambda t: t.numpy() + 0.0, x)
    for _ in range(6):
        y = y.exp() * 0.5
    loss = y.sum()
    nodes = autograd.topological_order([loss.grad_fn])
    loss.backward()
    assert seen["unfreed"] == 0, (f"when the last rule ran, {seen['unfreed']} of the {len(nodes) - 1} other nodes "
                                  f"were not freed yet: free each node as soon as its rule has run, not at the end")

    n, layers = 2**15, 16
    y = x = tt.tensor(np.ones(n), requires_grad=True)
    for _ in range(layers):
        y = y * 0.5
    loss = y.sum()
    arrays = peak_bytes(autograd.backward, loss) / (n * 8)  # what backward allocates, net of what it releases
    assert arrays <= 6, (f"backward through {layers} layers held up to {arrays:.1f} new arrays of the layers' size at "
                         f"once: drop each node's gradient once its rule has run (a few are in use at a time)")


def test_nonscalar_backward_needs_a_gradient():
    x = tt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * x
    with pytest.raises(RuntimeError, match="scalar"):
        y.backward()
    with pytest.raises(RuntimeError, match="shape"):
        y.backward(tt.ones(3))
    v = np.array([[1.0, -1.0], [0.5, 2.0]])
    y.backward(tt.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() * v)
    z = tt.tensor([[3.0]], requires_grad=True)
    (z * 2).backward()  # one element (shape (1, 1)): an implicit gradient of 1 is fine
    assert z.grad.shape == (1, 1) and z.grad.item() == 2.0


def test_backward_of_something_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (tt.tensor([1.0, 2.0]) * 2).sum().backward()
    w = tt.tensor([1.0], requires_grad=True)
    with tt.no_grad():
        y = (w * 2).sum()
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.backward()


def test_a_leaf_can_be_the_root():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    x.backward(tt.tensor([3.0, 4.0]))
    assert x.grad is not None, ("x.backward(gradient) on a leaf x: the root's own gradient reaches the sink, "
                                "so x.grad is the gradient given (no node to walk)")
    assert x.grad.tolist() == [3.0, 4.0]


def test_run_backward_sends_intermediate_tensors_to_the_sink_for_retain_grad():
    """The sink gets every (input, gradient) a rule produces, non-leaves included: it is the
    sink, not the engine, that decides who keeps a .grad."""
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    k = h * h
    k.sum().backward()
    assert h.grad is not None, "h = x * 2 called h.retain_grad(), so it has a .grad after backward"
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.numpy(), err_msg="h.grad = d(sum(h * h))/dh = 2h")
    assert k.grad is None, "a non-leaf keeps no .grad unless retain_grad() was called"
    np.testing.assert_allclose(x.grad.numpy(), 8 * x.numpy())


def test_detach_cuts_the_graph():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None and d._storage is x._storage
    (x * d).sum().backward()  # d is a constant: d/dx (x * c) = c
    np.testing.assert_allclose(x.grad.numpy(), x.numpy())


def test_requires_grad_propagation():
    a = tt.tensor([1.0, 2.0], requires_grad=True)
    c = tt.tensor([3.0, 4.0])
    i = tt.tensor([1, 2])
    assert (a + c).requires_grad and (c + a).requires_grad and (a * i).requires_grad
    assert not (c * c).requires_grad and not (c * i).requires_grad
    assert not (a > 1).requires_grad and not a.argmax().requires_grad
    y = (a * c).sum() + (c * i).sum()
    y.backward()
    assert c.grad is None and i.grad is None
    np.testing.assert_allclose(a.grad.numpy(), c.numpy())


def test_integer_tensors_get_no_gradient():
    w = tt.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    idx = tt.tensor([2, 0, 2])
    counts = tt.tensor([1, 2, 3, 4])
    try:
        idx.requires_grad = True
    except ValueError:
        pass
    else:
        pytest.fail("setting requires_grad = True on an int64 tensor must raise ValueError: "
                    "only floating-point tensors can have a gradient")
    (w[idx] * counts).sum().backward()
    expected = np.zeros((3, 4))
    np.add.at(expected, [2, 0, 2], np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(w.grad.numpy(), expected)
    assert idx.grad is None and counts.grad is None


def test_autograd_grad_returns_instead_of_accumulating():
    x = tt.tensor([1.0, 2.0], dtype=tt.float64, requires_grad=True)
    y = tt.tensor([3.0], dtype=tt.float64, requires_grad=True)
    h = x * y
    out = (h * h).sum()
    gx, gh = autograd.grad(out, [x, h], retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy() * y.numpy() ** 2)
    np.testing.assert_allclose(gh.numpy(), 2 * h.numpy())
    assert x.grad is None and y.grad is None, "grad() does not touch .grad"
    unused = tt.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        autograd.grad(out, [unused], retain_graph=True)
    assert autograd.grad(out, [unused, y], allow_unused=True)[0] is None


def test_run_backward_goes_through_call_rule_which_reports_missing_rules_and_wrong_shapes(custom_rules):
    x = tt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tt.apply("test_no_rule", lambda t: t.numpy() + 1, x)
    with pytest.raises(RuntimeError, match="test_no_rule"):
        y.sum().backward()
    custom_rules("test_bad_shape", lambda node, grad: (np.ones((2, 3)), None))
    b = tt.tensor([[1.0], [2.0]], requires_grad=True)
    z = tt.apply("test_bad_shape", lambda p, q: p.numpy() + q.numpy(), x, b)
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(3,\)") as info:
        z.sum().backward()
    assert "unbroadcast" in str(info.value), "a gradient of the broadcast shape: suggest unbroadcast"


def test_a_permuted_gradient_is_not_called_broadcast(custom_rules):
    custom_rules("test_permuted", lambda node, grad: (np.moveaxis(grad, 0, -1),))
    x = tt.tensor(np.ones((2, 3, 4)), requires_grad=True)
    y = tt.apply("test_permuted", lambda t: t.numpy() * 2, x)
    with pytest.raises(RuntimeError, match=r"\(3, 4, 2\).*\(2, 3, 4\)") as info:
        y.sum().backward()
    assert "unbroadcast" not in str(info.value) and "order" in str(info.value), str(info.value)


def test_a_dispatch_mode_sees_the_backward_rules_after_the_forward_ops():
    from tinytorch.utils.dispatch import DispatchMode

    class Recorder(DispatchMode):
        def __init__(self):
            self.ops = []

        def dispatch(self, op, fn, args, kwargs):
            self.ops.append(op)
            return fn(*args, **kwargs)

    w = tt.tensor([1.0, 2.0], requires_grad=True)
    mode = Recorder()
    with mode:
        (w * w).sum().backward()
    assert mode.ops == ["mul", "sum", "SumBackward", "MulBackward"], mode.ops
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])


def test_create_graph_is_refused_with_its_reason_and_the_plain_call_works():
    """Second derivatives are out of scope (the rules compute with numpy): one clear error."""
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        tt.autograd.grad(y, [x], create_graph=True)
    with pytest.raises(NotImplementedError, match="higher-order"):
        y.backward(create_graph=True)
    (g,) = tt.autograd.grad(y, [x])
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])

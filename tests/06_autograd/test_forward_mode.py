"""Forward mode: each forward rule against the definition (central differences), jvp over
whole graphs with diamonds, batches and several primals, and the Jacobian it builds column
by column equal to the one backward builds row by row."""
from types import SimpleNamespace

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.autograd import backward
from tinytorch.autograd.functional import JVP_RULES, _forward_tangents, jvp


def by_definition(f, arrays, directions, eps=1e-6):
    plus = f(*[a + eps * d for a, d in zip(arrays, directions)])
    minus = f(*[a - eps * d for a, d in zip(arrays, directions)])
    return (plus - minus) / (2 * eps)


def rule_of(make, arrays, tangents):
    node = make(*[tt.tensor(a, requires_grad=True) for a in arrays]).grad_fn
    return JVP_RULES[node.op](node, tangents)


def check_rule(make, f, shapes, seed, what):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    dirs = [rng.standard_normal(s) for s in shapes]
    got = rule_of(make, arrays, tuple(dirs))
    expected = by_definition(f, arrays, dirs)
    assert got is not None and np.shape(got) == np.shape(expected), \
        f"tangent of shape {None if got is None else np.shape(got)}, the output's is {np.shape(expected)}"
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8,
                               err_msg=f"{what} for shapes {shapes}, every input moving: the rule against the "
                                       f"definition (how the output moves when the inputs move along their tangents)")
    for k in range(len(shapes)):  # one input moving, the others None
        only = tuple(d if i == k else None for i, d in enumerate(dirs))
        zeros = [d if i == k else np.zeros_like(d) for i, d in enumerate(dirs)]
        np.testing.assert_allclose(rule_of(make, arrays, only), by_definition(f, arrays, zeros), rtol=1e-6, atol=1e-8,
                                   err_msg=f"{what} for shapes {shapes}, only input {k} moving (the other's tangent None)")
    assert rule_of(make, arrays, (None,) * len(shapes)) is None, "nothing moves: None"


@pytest.mark.parametrize("shapes", [[(2, 3), (2, 3)], [(2, 3), (3,)], [(2, 1), (1, 3)], [(4,), ()]])
def test_mul_jvp_against_the_definition(shapes):
    check_rule(lambda a, b: a * b, lambda a, b: a * b, shapes, 1, "a * b")


def test_mul_jvp_never_writes_into_a_tangent():
    rng = np.random.default_rng(2)
    ta, tb = rng.standard_normal((2, 3)), rng.standard_normal(3)
    before = (ta.copy(), tb.copy())
    rule_of(lambda a, b: a * b, [rng.standard_normal((2, 3)), rng.standard_normal(3)], (ta, tb))
    np.testing.assert_array_equal(ta, before[0])
    np.testing.assert_array_equal(tb, before[1])


def test_exp_jvp_against_the_definition():
    check_rule(lambda x: x.exp(), np.exp, [(3, 4)], 3, "exp(x)")


def test_exp_jvp_uses_the_output_the_node_holds():
    node = tt.tensor([0.5, -1.0, 2.0], requires_grad=True).exp().grad_fn
    hidden = SimpleNamespace(op="exp", inputs=(tt.tensor(np.full(3, np.nan)),), output=node.output, attrs=node.attrs)
    got = JVP_RULES["exp"](hidden, (np.ones(3),))
    assert got is not None and np.isfinite(got).all(), (
        f"exp's forward rule on a node whose input is hidden (NaN) gave {got}: it computed exp again instead of "
        f"reading node.output, which the node holds (as exp's backward rule does)")


@pytest.mark.parametrize("make, f", [
    (lambda x: x.sum(), lambda x: x.sum()),
    (lambda x: x.sum(1), lambda x: x.sum(1)),
    (lambda x: x.sum(-1, keepdim=True), lambda x: x.sum(-1, keepdims=True)),
    (lambda x: x.sum((0, 2)), lambda x: x.sum((0, 2))),
])
def test_sum_jvp_against_the_definition(make, f):
    check_rule(make, f, [(2, 3, 4)], 4, "x.sum(...)")


@pytest.mark.parametrize("shapes", [[(2, 3), (3, 4)], [(3,), (3, 4)], [(2, 3), (3,)], [(3,), (3,)],
                                    [(2, 2, 3), (3, 4)], [(3,), (2, 3, 4)], [(2, 1, 2, 3), (5, 3, 2)]])
def test_matmul_jvp_against_the_definition(shapes):
    check_rule(lambda a, b: a @ b, np.matmul, shapes, 5, "a @ b")


def net_np(x, W, b, w):
    h = np.tanh(x @ W + b)
    return (h * np.exp(h) - h).sum() + h @ w


def net(x, W, b, w):
    h = (x @ W + b).tanh()
    return (h * h.exp() - h).sum() + h @ w


@pytest.mark.parametrize("seed", range(5))
def test_forward_tangents_of_a_graph_with_diamonds(seed):
    rng = np.random.default_rng(seed)
    W, b, w = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(4)
    x, v = rng.standard_normal(5), rng.standard_normal(5)
    out, moved = jvp(lambda x: net(x, tt.tensor(W), tt.tensor(b), tt.tensor(w)), tt.tensor(x), tt.tensor(v))
    np.testing.assert_allclose(out.numpy(), net_np(x, W, b, w), rtol=1e-12)
    np.testing.assert_allclose(moved.numpy(), by_definition(lambda x: net_np(x, W, b, w), [x], [v]),
                               rtol=1e-6, atol=1e-9, err_msg="h feeds three ops: each node's tangent once")


def test_forward_tangents_with_several_primals_some_still():
    rng = np.random.default_rng(7)
    W, b, w, x = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(5)
    dW, dw = rng.standard_normal((5, 4)), rng.standard_normal(4)
    _, moved = jvp(lambda x, W, w: net(x, W, tt.tensor(b), w), (tt.tensor(x), tt.tensor(W), tt.tensor(w)),
                   (tt.zeros(5, dtype=tt.float64), tt.tensor(dW), tt.tensor(dw)))
    expected = by_definition(lambda W, w: net_np(x, W, b, w), [W, w], [dW, dw])
    np.testing.assert_allclose(moved.numpy(), expected, rtol=1e-6, atol=1e-9)


def test_forward_tangents_call_each_rule_once_per_node(monkeypatch):
    calls = []
    for op, rule in list(JVP_RULES.items()):
        monkeypatch.setitem(JVP_RULES, op, lambda node, ts, rule=rule, op=op: (calls.append(op), rule(node, ts))[1])
    rng = np.random.default_rng(8)
    W, b, w = (tt.tensor(rng.standard_normal(s)) for s in ((5, 4), (4,), (4,)))
    jvp(lambda x: net(x, W, b, w), tt.tensor(rng.standard_normal(5)), tt.tensor(rng.standard_normal(5)))
    expected = sorted(["matmul", "add", "tanh", "exp", "mul", "sub", "sum", "matmul", "add"])
    assert sorted(calls) == expected, (
        f"the MLP's graph has {len(expected)} nodes, each needing its forward rule once; your walk called "
        f"{len(calls)} rules (a walk that follows every path recomputes the nodes a diamond reaches twice)")


def test_forward_tangents_when_nothing_moves_are_zeros_of_the_output_shape():
    w = tt.tensor(np.arange(4.0))
    np.testing.assert_array_equal(_forward_tangents(w.exp(), {}), np.zeros(4))
    np.testing.assert_array_equal(jvp(lambda x: x, w, tt.tensor(np.ones(4)))[1].numpy(), np.ones(4),
                                  err_msg="the output is the moving leaf itself: its tangent")
    np.testing.assert_array_equal(_forward_tangents(w, {}), np.zeros(4))


@pytest.mark.parametrize("through_an_op", [False, True])
def test_forward_tangents_are_float64_for_a_float32_tangent(through_an_op):
    leaf = tt.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    output = leaf * 2.0 if through_an_op else leaf
    got = _forward_tangents(output, {id(leaf): np.arange(3, dtype=np.float32)})
    assert getattr(got, "dtype", None) == np.float64, (
        f"_forward_tangents of {'leaf * 2' if through_an_op else 'the leaf itself'} moving along a float32 "
        f"tangent returned {getattr(got, 'dtype', type(got))}; its contract: a float64 array")


def test_forward_tangents_name_an_op_without_a_forward_rule():
    with pytest.raises(NotImplementedError, match="sqrt"):
        jvp(lambda x: x.sqrt(), tt.ones(3, dtype=tt.float64), tt.ones(3, dtype=tt.float64))


def test_forward_tangents_skip_ops_nothing_moved_into():
    w = tt.tensor(np.ones(3), requires_grad=True)  # recorded, but not moving: sqrt (no forward rule) never asked
    _, moved = jvp(lambda x: (x * 2.0).sum() + w.sqrt().sum(), tt.ones(3, dtype=tt.float64), tt.ones(3, dtype=tt.float64))
    assert moved.item() == pytest.approx(6.0)


def test_forward_tangents_jacobian_equals_backwards():
    rng = np.random.default_rng(9)
    W = tt.tensor(rng.standard_normal((6, 3)))
    x0 = rng.standard_normal(6)

    def f(x):
        return (x @ W).tanh()

    columns = [jvp(f, tt.tensor(x0), tt.tensor(np.eye(6)[j]))[1].numpy() for j in range(6)]
    rows = []
    for i in range(3):
        x = tt.tensor(x0, requires_grad=True)
        backward(f(x), np.eye(3)[i])
        rows.append(x.grad.numpy())
    np.testing.assert_allclose(np.array(columns).T, np.array(rows), rtol=1e-12, atol=1e-12)


def test_jvp_leaves_the_callers_tensors_alone():
    x = tt.tensor(np.ones(3))
    jvp(lambda x: x.exp().sum(), x, tt.tensor(np.ones(3)))
    assert not x.requires_grad and x.grad_fn is None


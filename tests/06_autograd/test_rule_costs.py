"""What the notebook requires of some rules beyond their values: softmax's and log_softmax's
rules never build the n x n Jacobian; cumsum's and sort/topk's rules run no Python loop over
elements or rows and build no matrix. Measured, not timed: the Python steps a rule runs at two
sizes (the same when numpy does the work) and the peak memory it allocates (tracemalloc)."""

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch import autograd
from tinytorch.testing import peak_bytes, python_steps

SMALL, LARGE, WIDE = (2, 3), (60, 70), (4, 500)  # along dim 1; WIDE's n x n matrix is 125x x's size
STEPS_SLACK = 40  # a loop over LARGE's 60 rows or 70 columns runs well over 100 more steps
MEMORY_LIMIT = 8  # arrays of x's size


FORWARD = {
    "softmax": lambda x: F.softmax(x, dim=1),
    "log_softmax": lambda x: F.log_softmax(x, dim=1),
    "cumsum": lambda x: x.cumsum(1),
    "sort": lambda x: x.sort(dim=1).values,
    "topk": lambda x: x.topk(x.shape[1] // 2, dim=1).values,
}


def node_and_grad(op, shape, seed=0):
    rng = np.random.default_rng(seed)
    node = FORWARD[op](tt.tensor(rng.standard_normal(shape), dtype=tt.float64, requires_grad=True)).grad_fn
    assert node is not None and node.op == op
    return node, rng.standard_normal(node.output.shape)


def assert_no_big_array(op):
    node, grad = node_and_grad(op, WIDE)
    rule = autograd.BACKWARD_RULES[op]
    x_bytes = node.inputs[0].nbytes
    assert np.shape(rule(node, grad)[0]) == WIDE
    peak = peak_bytes(rule, node, grad)
    assert peak <= MEMORY_LIMIT * x_bytes, (
        f"{op}'s backward rule allocated {peak} bytes at its peak for x of shape {WIDE} ({x_bytes} bytes): "
        f"more than {MEMORY_LIMIT} arrays of x's size, so it builds something like a {WIDE[1]} x {WIDE[1]} "
        f"matrix per row; the rule must not")


def assert_no_python_loop(op):
    rule = autograd.BACKWARD_RULES[op]
    small = python_steps(rule, *node_and_grad(op, SMALL))
    large = python_steps(rule, *node_and_grad(op, LARGE))
    assert large <= small + STEPS_SLACK, (
        f"{op}'s backward rule ran {small} Python steps (lines and calls) for x of shape {SMALL} but {large} "
        f"for x of shape {LARGE}: it loops in Python over elements or rows; let numpy do the work")


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_backward_rules_build_no_jacobian(op):
    assert_no_big_array(op)


def test_cumsum_backward_builds_no_matrix():
    assert_no_big_array("cumsum")


def test_cumsum_backward_runs_no_python_loop():
    assert_no_python_loop("cumsum")


@pytest.mark.parametrize("op", ["sort", "topk"])
def test_topk_backward_builds_no_matrix(op):
    assert_no_big_array(op)


@pytest.mark.parametrize("op", ["sort", "topk"])
def test_topk_backward_runs_no_python_loop(op):
    assert_no_python_loop(op)


def test_the_meters_tell_a_loop_and_a_matrix_from_numpy_work():
    """The two meters on known rules (so a failure above is the rule's, not the meter's): a
    vectorised running sum passes both, a Python loop and an n x n matrix each fail one. The
    engine's own cumsum rule is measured alongside, so this test needs module 06's code."""
    g_small, g_large = np.ones(SMALL), np.ones(LARGE)
    g_wide = np.ones(WIDE)

    def vectorised(g):
        return np.flip(np.cumsum(np.flip(g, 1), axis=1), 1)

    def looped(g):
        return np.stack([g[:, i:].sum(1) for i in range(g.shape[1])], 1)

    def matrix(g):
        return g @ np.tril(np.ones((g.shape[1], g.shape[1])))

    for fn in (vectorised, looped, matrix):
        np.testing.assert_allclose(fn(g_large), vectorised(g_large))
    assert python_steps(vectorised, g_large) <= python_steps(vectorised, g_small) + STEPS_SLACK
    assert python_steps(looped, g_large) > python_steps(looped, g_small) + STEPS_SLACK
    assert peak_bytes(vectorised, g_wide) <= MEMORY_LIMIT * g_wide.nbytes
    assert peak_bytes(matrix, g_wide) > MEMORY_LIMIT * g_wide.nbytes
    node, grad = node_and_grad("cumsum", SMALL)
    np.testing.assert_allclose(autograd.BACKWARD_RULES["cumsum"](node, grad)[0], vectorised(grad))


@pytest.mark.parametrize("op,forward", [("exp", lambda x: x.exp()), ("sigmoid", F.sigmoid), ("tanh", F.tanh),
                                        ("softmax", lambda x: F.softmax(x, dim=-1)),
                                        ("log_softmax", lambda x: F.log_softmax(x, dim=-1))])
def test_rules_written_with_the_output_need_not_see_the_input(op, forward):
    """The node saved the output; these derivatives are functions of it, so the rule
    recomputes nothing from x: on a node whose input is hidden (NaN), the gradient stays finite."""
    from types import SimpleNamespace

    x = tt.tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    node = forward(x).grad_fn
    hidden = SimpleNamespace(op=node.op, inputs=(tt.tensor(np.full(3, np.nan)),), output=node.output,
                             attrs=node.attrs)
    got = np.asarray(autograd.BACKWARD_RULES[op](hidden, np.ones(3))[0])
    assert np.isfinite(got).all(), f"{op}'s rule recomputed from the input instead of using the saved output: {got}"


def test_log_backward_needs_the_input_not_an_exponential_of_the_output():
    """d log(x)/dx = 1/x: a rule that rebuilds x as exp(output) spends an exponential per
    element; on a node whose output is hidden (NaN), the gradient must stay finite."""
    from types import SimpleNamespace

    x = tt.tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
    node = x.log().grad_fn
    hidden = SimpleNamespace(op=node.op, inputs=node.inputs, output=np.full(3, np.nan), attrs=node.attrs)
    got = np.asarray(autograd.BACKWARD_RULES["log"](hidden, np.ones(3))[0])
    np.testing.assert_allclose(got, [2.0, 1.0, 0.5], err_msg="log's rule, with the output hidden: 1/x from x alone")

"""Every differentiable op of module 01 passes a float64 central-difference gradcheck
(relative error < 1e-6): broadcast shapes, views, indexing, reductions, matmul, joins."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import autograd
from tinytorch.autograd import gradcheck
from tinytorch.testing import spied


def leaf(shape, seed, low=None, high=None):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(shape) if low is None else rng.uniform(low, high, shape)
    return tt.tensor(data, requires_grad=True)


BINARY_SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((3,), (2, 3)), ((2, 1, 4), (3, 1)),
                 ((2, 3), ()), ((), (4,)), ((1, 3), (2, 1))]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize("sa, sb", BINARY_SHAPES)
def test_binary_ops_with_broadcasting(op, sa, sb):
    positive = op in ("div", "pow")
    a = leaf(sa, 1, 0.5, 2.0) if op == "pow" else leaf(sa, 1)
    b = leaf(sb, 2, 0.5, 2.0) if positive else leaf(sb, 2)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "pow": lambda x, y: x ** y}[op]
    assert gradcheck(fn, [a, b])


def test_python_numbers_and_reflected_operators():
    x = leaf((2, 3), 3, 0.5, 2.0)
    assert gradcheck(lambda t: 2.0 - t * 3 + 1 / t - t ** 2 + 2 ** t - t / 4, [x])


@pytest.mark.parametrize("name, fn, positive", [
    ("neg", lambda t: -t, False), ("exp", lambda t: t.exp(), False),
    ("log", lambda t: t.log(), True), ("sqrt", lambda t: t.sqrt(), True),
    ("sin", lambda t: t.sin(), False), ("cos", lambda t: t.cos(), False),
    ("abs", lambda t: t.abs(), False), ("pow scalar", lambda t: t ** 3, False),
    ("pow fractional", lambda t: t ** 0.5, True), ("pow negative", lambda t: t ** -2.0, True),
    ("clamp both", lambda t: t.clamp(-0.5, 0.6), False), ("clamp min", lambda t: t.clamp(min=0.1), False),
    ("clamp max", lambda t: t.clamp(max=-0.2), False),
    ("var", lambda t: t.var(1), False), ("std", lambda t: t.std(), False),
])
def test_unary_ops(name, fn, positive):
    x = leaf((3, 4), 4, 0.3, 2.0) if positive else leaf((3, 4), 4)
    if name.startswith("clamp") or name == "abs":  # stay away from the kinks
        data = x.numpy()
        data[np.abs(data) < 0.05] = 0.3
        for bound in (-0.5, 0.6, 0.1, -0.2):
            data[np.abs(data - bound) < 0.01] += 0.05
    assert gradcheck(fn, [x]), name


def test_to_sends_the_gradient_back_in_the_input_dtype():
    x32 = tt.tensor(np.array([[0.5, -1.0], [2.0, 3.0]], dtype=np.float32), requires_grad=True)
    c = np.array([[1.0 / 3.0, 2.0], [-1.5, 0.25]])
    y = x32.to(tt.float64)  # recorded as "to"
    assert y.grad_fn.op == "to"
    (y * tt.tensor(c)).sum().backward()
    assert x32.grad.dtype == tt.float32
    np.testing.assert_array_equal(x32.grad.numpy(), c.astype(np.float32))
    x64 = tt.tensor(np.array([1.5, -2.0]), requires_grad=True)
    assert gradcheck(lambda t: t.to(tt.float32).to(tt.float64) * 0 + t.double() * 2, [x64])


def test_where_and_masked_fill_with_broadcasting():
    a, b = leaf((2, 3), 5), leaf((3,), 6)
    cond = tt.tensor(np.array([[True, False, True], [False, False, True]]))
    assert gradcheck(lambda x, y: tt.where(cond, x, y), [a, b])
    assert gradcheck(lambda x: x.masked_fill(tt.tensor([True, False, False]), 0.0), [a])
    assert gradcheck(lambda y: tt.where(tt.tensor([[True], [False]]), y, 1.0), [b])


VIEW_CASES = {
    "transpose": lambda t: t.transpose(0, 2), "transpose negative": lambda t: t.transpose(-1, -2),
    "permute": lambda t: t.permute(2, 0, 1), "T": lambda t: t.T, "mT": lambda t: t.mT,
    "view": lambda t: t.view(6, 4), "view -1": lambda t: t.view(-1, 2),
    "reshape copy": lambda t: t.transpose(0, 1).reshape(4, 6), "flatten": lambda t: t.flatten(1),
    "squeeze": lambda t: t[:, :1].squeeze(1), "squeeze all": lambda t: t[None, :, None].squeeze(),
    "unsqueeze": lambda t: t.unsqueeze(-1), "expand": lambda t: t[:, :1].expand(5, 2, 3, 4),
    "broadcast_to": lambda t: tt.broadcast_to(t[0, 0], (3, 4)), "expand_as": lambda t: t[1].expand_as(t),
    "contiguous": lambda t: t.permute(1, 0, 2).contiguous(), "clone": lambda t: t.clone(),
    "as_strided windows": lambda t: t.as_strided((5, 3), (2, 1), 1),
    "as_strided of a view": lambda t: t[1].as_strided((2, 2), (4, 1), 14),
    "chained views": lambda t: t.T.reshape(4, 6)[1:3].unsqueeze(0).expand(2, 2, 6).transpose(1, 2),
}


@pytest.mark.parametrize("name", sorted(VIEW_CASES))
def test_view_ops(name):
    assert gradcheck(VIEW_CASES[name], [leaf((2, 3, 4), 7)]), name


def test_transpose_gradient_swaps_back_only_its_two_axes():
    """Undoing transpose(d0, d1) swaps d0 and d1 back; reversing every axis (.T) is right only
    when the other axes happen to sit symmetrically (3-D transpose(0, 2))."""
    x = tt.tensor(np.zeros((2, 3, 3, 2)), requires_grad=True)
    upstream = np.arange(36.0).reshape(2, 3, 3, 2)  # x.transpose(0, 3) has shape (2, 3, 3, 2) too
    x.transpose(0, 3).backward(tt.tensor(upstream))
    np.testing.assert_array_equal(x.grad.numpy(), np.einsum("ljki->ijkl", upstream),
                                  err_msg="x[i, j, k, l] gets the upstream entry [l, j, k, i]")
    y = tt.tensor(np.zeros((2, 3, 4)), requires_grad=True)
    upstream = np.arange(24.0).reshape(3, 2, 4)
    y.transpose(0, 1).backward(tt.tensor(upstream))
    np.testing.assert_array_equal(y.grad.numpy(), np.einsum("jik->ijk", upstream),
                                  err_msg="y[i, j, k] gets the upstream entry [j, i, k]")
    assert gradcheck(lambda t: t.transpose(1, 3), [leaf((2, 3, 4, 3), 19)])


def test_transpose_of_a_0d_tensor():
    assert gradcheck(lambda t: t.transpose(0, 0) * 3, [leaf((), 8)])


INDEX_CASES = {
    "int": lambda t: t[1], "negative int": lambda t: t[-1, -2], "slice": lambda t: t[:, 1:3],
    "step": lambda t: t[::2, ::3], "None and ellipsis": lambda t: t[None, ..., 1, None],
    "empty slice": lambda t: t[2:1] * 1.0 + t.sum(),
    "list": lambda t: t[[2, 0]], "repeated list": lambda t: t[[1, 1, 1, 0]],
    "index tensor with repeats": lambda t: t[tt.tensor([[0, 2], [2, 2]])],
    "two index tensors": lambda t: t[tt.tensor([0, 1, 1]), tt.tensor([2, 2, 0])],
    "mixed slice and array": lambda t: t[1:, [0, 0, 4]], "bool mask": lambda t: t[tt.tensor(MASK)],
    "row mask": lambda t: t[tt.tensor([True, False, True])],
}
MASK = np.array([[True, False, True, False, False], [False, False, False, True, True],
                 [True, True, False, False, True]])


@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_indexing(name):
    assert gradcheck(INDEX_CASES[name], [leaf((3, 5), 9)]), name


def test_indexing_with_repeats_accumulates_exactly():
    x = tt.tensor(np.zeros((4, 2)), requires_grad=True)
    idx = tt.tensor([3, 1, 3, 3, 0])
    x[idx].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[:, 0], np.bincount([3, 1, 3, 3, 0], minlength=4))


REDUCTIONS = {
    "sum all": lambda t: t.sum(), "sum dim": lambda t: t.sum(1), "sum dims keepdim": lambda t: t.sum((0, 2), keepdim=True),
    "sum negative": lambda t: t.sum(-1), "mean all": lambda t: t.mean(), "mean dims": lambda t: t.mean((0, -1)),
    "mean keepdim": lambda t: t.mean(1, keepdim=True), "amax": lambda t: t.amax(2), "amax all": lambda t: t.amax(),
    "amin keepdim": lambda t: t.amin((0, 1), keepdim=True), "max": lambda t: t.max(),
    "min": lambda t: t.min(), "max dim": lambda t: t.max(dim=1).values,
    "min dim keepdim": lambda t: t.min(dim=-1, keepdim=True).values,
    "sum axis alias": lambda t: t.sum(axis=0, keepdims=True),
    "norm all": lambda t: t.norm(), "norm dim keepdim": lambda t: t.norm(dim=1, keepdim=True),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name):
    assert gradcheck(REDUCTIONS[name], [leaf((2, 3, 4), 10)]), name


def test_reductions_of_0d_tensors():
    x = leaf((), 11)
    assert gradcheck(lambda t: t.sum() + t.mean() * 2 + t.amax() * 3, [x])


def test_amax_splits_ties_and_max_dim_routes_to_the_index():
    x = tt.tensor([[2.0, 5.0, 5.0, 5.0], [1.0, 1.0, 0.0, -1.0]], requires_grad=True)
    x.amax(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0, 0]])
    x.grad = None
    values, indices = x.max(dim=1)
    values.sum().backward()
    expected = np.zeros((2, 4))
    expected[[0, 1], indices.numpy()] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)


MATMUL_SHAPES = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                 ((1, 3, 4), (2, 4, 1)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3))]


@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES)
def test_matmul_shapes(sa, sb):
    assert gradcheck(lambda a, b: a @ b, [leaf(sa, 12), leaf(sb, 13)])


def test_matmul_with_only_one_side_requiring_grad():
    a = leaf((3, 4), 14)
    data = tt.tensor(np.random.default_rng(15).standard_normal((2, 4, 3)))
    assert gradcheck(lambda w: (data @ w).mT, [a])
    assert gradcheck(lambda w: w @ data, [a])


@pytest.mark.parametrize("frozen", ["a", "b"])
def test_matmul_backward_makes_no_product_for_an_input_without_requires_grad(frozen):
    """Only the inputs that require grad get a gradient, and only theirs is computed: a
    network's first input is data, a frozen weight is a constant."""
    rng = np.random.default_rng(16)
    a = tt.tensor(rng.standard_normal((3, 4)), requires_grad=frozen != "a")
    b = tt.tensor(rng.standard_normal((4, 5)), requires_grad=frozen != "b")
    (ga, gb), log = spied(lambda g: autograd.engine.call_rule((a @ b).grad_fn, g), rng.standard_normal((3, 5)))
    products = [e for e in log if e[0] in ("matmul", "dot", "tensordot", "einsum")]
    assert (ga is None) == (frozen == "a") and (gb is None) == (frozen == "b"), \
        f"with {frozen} not requiring grad, its gradient must be None (got grad_a {type(ga).__name__}, " \
        f"grad_b {type(gb).__name__})"
    assert len(products) == 1, f"one product, for the input that requires grad; the rule made {products}"


def _rule_work(op, frozen, seed=17):
    """(gradients, the elementwise products and quotients made) of op's rule on (3, 4) and
    (4,) operands, the one named `frozen` (or none) not requiring grad."""
    rng = np.random.default_rng(seed)
    a = tt.tensor(rng.standard_normal((3, 4)), requires_grad=frozen != "a")
    b = tt.tensor(rng.uniform(1, 2, (4,)), requires_grad=frozen != "b")
    y = a * b if op == "mul" else a / b
    grads, log = spied(lambda g: autograd.engine.call_rule(y.grad_fn, g), rng.standard_normal((3, 4)))
    return grads, [e[0] for e in log if e[0] in ("multiply", "divide", "true_divide", "power", "square", "reciprocal")]


@pytest.mark.parametrize("op", ["mul", "div"])
@pytest.mark.parametrize("frozen", ["a", "b"])
def test_mul_and_div_backward_compute_nothing_for_an_input_without_requires_grad(op, frozen):
    """As matmul's: when one input is data, backward does less work than when both need a
    gradient (whatever way the rule writes each gradient)."""
    (ga, gb), work = _rule_work(op, frozen)
    _, both = _rule_work(op, None)
    assert (ga is None) == (frozen == "a") and (gb is None) == (frozen == "b"), \
        f"_{op}_backward with {frozen} not requiring grad: its gradient must be None (got grad_a " \
        f"{type(ga).__name__}, grad_b {type(gb).__name__})"
    assert len(work) < len(both), (f"_{op}_backward with {frozen} not requiring grad made {work}, as much as with "
                                   f"both ({both}): {frozen}'s gradient is computed and thrown away")


def test_cat_and_stack():
    a, b, c = leaf((2, 3), 16), leaf((2, 1), 17), leaf((2, 3), 18)
    assert gradcheck(lambda x, y: tt.cat([x, y, x], dim=1), [a, b])
    assert gradcheck(lambda x, z: tt.cat([x, z, x * 2], dim=0), [a, c])
    assert gradcheck(lambda x, z: tt.stack([x, z, x], dim=0), [a, c])
    assert gradcheck(lambda x, z: tt.stack([x, z], dim=-1), [a, c])
    const = tt.tensor(np.ones((2, 3)))
    assert gradcheck(lambda x: tt.cat([const, x], dim=-1), [a])

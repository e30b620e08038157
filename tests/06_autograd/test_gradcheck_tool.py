"""gradcheck and numerical_grad: central differences, the relative-error criterion, reports."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.autograd import GradcheckError, gradcheck, numerical_grad


def test_numerical_grad_is_a_central_difference():
    x = np.array([[0.3, -1.2], [2.0, 0.7]])
    original = x.copy()
    got = numerical_grad(lambda: float(np.sum(np.sin(x) * x[0, 0])), x, eps=1e-6)
    expected = np.cos(x) * x[0, 0]
    expected[0, 0] += np.sin(x).sum()
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9,
                               err_msg="numerical_grad of sum(sin(x) * x[0, 0]) against its derivative")
    assert got.dtype == np.float64, f"numerical_grad returns a float64 array, got {got.dtype}"
    np.testing.assert_array_equal(x, original, err_msg="x after numerical_grad: every value put back")
    # central, not one-sided: exact for a quadratic even with a large eps
    y = np.array([1.0, 3.0])
    np.testing.assert_allclose(numerical_grad(lambda: float(np.sum(y ** 2)), y, eps=0.5), 2 * y,
                               err_msg="central, not one-sided: exact for y**2 even with eps = 0.5")
    z = np.array(2.0)  # 0-d arrays work too
    assert numerical_grad(lambda: float(z ** 3), z).shape == ()


@pytest.mark.parametrize("eps", [0.1, 0.03])
def test_numerical_grad_steps_by_the_eps_it_is_given(eps):
    """For a cubic the central difference with step eps is off by exactly eps**2."""
    v = np.array([[0.5, -1.0], [2.0, 0.25]])
    got = numerical_grad(lambda: float(np.sum(v ** 3)), v, eps=eps)
    np.testing.assert_allclose(got, 3 * v ** 2 + eps ** 2, rtol=1e-11, atol=1e-12)


def test_numerical_grad_returns_float64_for_a_float32_input():
    v = np.array([0.5, 2.0], dtype=np.float32)
    assert numerical_grad(lambda: float(np.sum(v ** 2)), v, eps=1e-2).dtype == np.float64


def test_numerical_grad_puts_back_every_value_exactly():
    """Undoing a nudge by arithmetic (x + eps - eps) does not always give back the same float:
    each value must be restored from a saved copy."""
    x = np.array([0.1, 0.7, 3.3, 1e5 + 0.3, -2.9, 2.36432494e-08, -3.76337096e-07])  # near 0: (v - eps) + eps != v
    original = x.copy()
    numerical_grad(lambda: float(np.sum(x ** 2)), x, eps=1e-6)
    moved = [f"{before!r} became {after!r}" for after, before in zip(x.tolist(), original.tolist())
             if np.float64(after).tobytes() != np.float64(before).tobytes()]
    assert not moved, f"after numerical_grad, values of x moved (restore each from a saved copy): {'; '.join(moved)}"


def test_numerical_grad_nudges_a_non_contiguous_array_in_place():
    """gradcheck's inputs can be views (a transposed leaf): a reshaped copy would nudge
    nothing f reads, and every derivative would come out 0."""
    t = np.arange(1.0, 7.0).reshape(2, 3).T
    assert not t.flags.c_contiguous
    got = numerical_grad(lambda: float(np.sum(t ** 3)), t)
    np.testing.assert_allclose(got, 3 * t ** 2, rtol=1e-7)


def test_gradcheck_passes_a_correct_custom_op(custom_rules):
    custom_rules("test_cube", lambda node, grad: (grad * 3 * node.inputs[0].numpy() ** 2,))
    x = tt.tensor([[0.5, -1.0], [1.5, 2.0]], dtype=tt.float64, requires_grad=True)
    assert gradcheck(lambda t: tt.apply("test_cube", lambda u: u.numpy() ** 3, t), [x]) is True
    assert x.grad is None, "gradcheck must not leave gradients behind"


def test_gradcheck_catches_a_wrong_rule_and_names_it(custom_rules):
    custom_rules("test_square_wrong", lambda node, grad: (grad * node.inputs[0].numpy(),))  # no 2
    x = tt.tensor([0.5, -1.0, 3.0], dtype=tt.float64, requires_grad=True)
    c = tt.tensor([2.0], dtype=tt.float64, requires_grad=True)

    def fn(t, k):
        return tt.apply("test_square_wrong", lambda u: u.numpy() ** 2, t) * k

    with pytest.raises(GradcheckError) as info:
        gradcheck(fn, [x, c])
    msg = str(info.value)
    assert "input 0" in msg and "(2,)" in msg, f"name the input and the worst element: {msg}"
    assert "analytical" in msg and "numerical" in msg
    assert isinstance(info.value, RuntimeError)
    assert gradcheck(fn, [x, c], raise_exception=False) is False


def test_gradcheck_uses_the_upstream_gradient(custom_rules):
    # a rule that ignores `grad` is right only for an all-ones upstream gradient
    custom_rules("test_ignores_grad", lambda node, grad: (np.ones(node.inputs[0].shape),))
    x = tt.tensor([0.5, -1.0, 3.0], dtype=tt.float64, requires_grad=True)
    with pytest.raises(GradcheckError):
        gradcheck(lambda t: tt.apply("test_ignores_grad", lambda u: u.numpy() + 0.0, t), [x])


def test_gradcheck_relative_error_criterion(custom_rules):
    # the analytical gradient is off by `delta`; gradients are ~1e3 large
    x = tt.tensor([10.0, 20.0], dtype=tt.float64, requires_grad=True)
    for delta, ok in [(1e-5, True), (1e-2, False)]:
        op = f"test_off_by_{delta}"
        custom_rules(op, lambda node, grad, d=delta: (grad * (3 * node.inputs[0].numpy() ** 2 + d),))
        result = gradcheck(lambda t: tt.apply(op, lambda u: u.numpy() ** 3, t), [x],
                           raise_exception=False)
        # relative error = max|a - n| / max(1, max|n|) ~ delta / 1200 vs tol 1e-6
        assert result is ok, delta


def test_gradcheck_refuses_float32_and_checks_float64():
    x32 = tt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda t: t * t, [x32])
    x64 = x32.double().detach().requires_grad_()
    assert gradcheck(lambda t: t * t + t.exp(), [x64])


def test_gradcheck_handles_tuple_outputs_and_constant_inputs():
    x = tt.tensor(np.array([[1.0, 4.0, 2.0], [3.0, 0.5, 6.0]]), requires_grad=True)
    const = tt.tensor(np.array([2.0, 3.0, 4.0]))  # does not require grad: not checked
    assert gradcheck(lambda t, c: (t * c).max(dim=1), [x, const])

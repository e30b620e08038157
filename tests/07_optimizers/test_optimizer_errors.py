"""Clear errors for bad parameters and bad options (PyTorch's messages), and what is accepted."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.optim import SGD, Adam, AdamW


def param():
    return tt.tensor([1.0, 2.0], requires_grad=True)


def assert_works(opt, p):
    """A valid optimizer really steps (so these tests also exercise the student's code)."""
    p.grad = tt.tensor(np.ones(p.shape, dtype=np.float32))
    before = p.numpy().copy()
    opt.step()
    assert opt.param_groups[0]["params"][0] is p
    return before


def test_a_tensor_instead_of_a_list_is_refused():
    p = param()
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        SGD(p, lr=0.1)
    before = assert_works(SGD([p], lr=0.1), p)
    np.testing.assert_allclose(p.numpy(), before - 0.1)


def test_empty_parameter_list():
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam(iter([]))
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam(p for p in [])
    p = param()
    assert_works(Adam(p for p in [p]), p)  # a non-empty generator is fine


def test_parameter_in_two_groups():
    p, q = param(), param()
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [p, q]}, {"params": [q]}], lr=0.1)
    opt = SGD([{"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    assert len(opt.param_groups) == 1, "a refused group must not be added"
    opt.add_param_group({"params": [q], "lr": 0.2})
    assert opt.param_groups[1]["params"][0] is q and opt.param_groups[1]["lr"] == 0.2


def test_equal_values_are_not_the_same_parameter():
    # same values, different tensors: both are accepted (identity, not ==)
    p, q = param(), param()
    opt = SGD([{"params": [p]}, {"params": [q]}], lr=0.1)
    assert opt.param_groups[1]["params"][0] is q


def test_same_parameter_twice_in_a_group():
    p = param()
    with pytest.raises(ValueError):
        SGD([p, p], lr=0.1)
    assert_works(SGD([p], lr=0.1), p)


def test_non_tensors_sets_and_non_leaves():
    p = param()
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        SGD([p, np.zeros(2)], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        SGD([{"params": {p}}], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        SGD({p}, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="param_group must be a dict"):
        SGD([p], lr=0.1).add_param_group([param()])
    assert_works(SGD((p,), lr=0.1), p)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (dict(lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
    (dict(lr=0.1, weight_decay=-1.0), "Invalid weight_decay value: -1.0"),
    (dict(lr=0.1, nesterov=True), "Nesterov momentum requires a momentum and zero dampening"),
    (dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "Nesterov momentum requires"),
])
def test_sgd_invalid_options(kwargs, message):
    p = param()
    with pytest.raises(ValueError, match=message):
        SGD([p], **kwargs)
    # the boundary values are accepted and work
    assert_works(SGD([p], lr=0.0, momentum=0.0, weight_decay=0.0, dampening=0.0), p)
    np.testing.assert_array_equal(p.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("cls", [Adam, AdamW])
@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=-1e-3), "Invalid learning rate"),
    (dict(eps=-1e-8), "Invalid epsilon value"),
    (dict(betas=(1.0, 0.999)), "Invalid beta parameter at index 0"),
    (dict(betas=(-0.1, 0.999)), "Invalid beta parameter at index 0"),
    (dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1"),
    (dict(weight_decay=-0.01), "Invalid weight_decay value"),
])
def test_adam_invalid_options(cls, kwargs, message):
    p = param()
    with pytest.raises(ValueError, match=message):
        cls([p], **kwargs)
    opt = cls([p], lr=0.1, betas=(0.0, 0.0), eps=0.0, weight_decay=0.0)
    assert_works(opt, p)
    np.testing.assert_allclose(p.numpy(), [0.9, 1.9], rtol=1e-6)  # betas 0: step = lr * sign(g)

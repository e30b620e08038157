"""In-place ops mutate storage; refused for grad-requiring tensors (grad mode on) and expanded views."""
import warnings

import numpy as np
import pytest

import tinytorch as tt


def test_inplace_methods_mutate_storage():
    x = tt.tensor([1.0, 2.0, 3.0])
    storage = x._storage
    assert x.add_(1) is x
    x.sub_(tt.tensor([1.0, 1.0, 1.0]), alpha=2)
    x.mul_(tt.tensor([2.0]))
    x.div_(4)
    assert x._storage is storage
    np.testing.assert_allclose(x.numpy(), ((np.array([1.0, 2, 3]) + 1 - 2) * 2) / 4)
    x.add_(tt.tensor([1.0, 1.0, 1.0]), alpha=0.5)
    np.testing.assert_allclose(x.numpy(), [0.5, 1.0, 1.5])


def test_augmented_assignment_is_in_place():
    x = tt.zeros(2, 2)
    alias = x
    storage = x._storage
    x += 1
    x *= tt.tensor([2.0, 3.0])
    x -= 0.5
    x /= 2
    assert x is alias and x._storage is storage
    np.testing.assert_allclose(x.numpy(), [[0.75, 1.25], [0.75, 1.25]])


def test_inplace_through_a_view_changes_the_base():
    x = tt.zeros(3, 3)
    x.T[0].fill_(1.0)
    x[2].add_(tt.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(x.numpy(), [[1, 0, 0], [1, 0, 0], [2, 2, 3]])


def test_zero_fill_copy():
    x = tt.ones(2, 3)
    x.zero_()
    assert x.numpy().sum() == 0
    x.fill_(2.5)
    assert (x.numpy() == 2.5).all()
    x.copy_(tt.tensor([1, 2, 3]))
    np.testing.assert_array_equal(x.numpy(), [[1, 2, 3], [1, 2, 3]])
    assert x.dtype == tt.float32
    x.copy_(x.T.contiguous().T)  # same values, different layout
    np.testing.assert_array_equal(x.numpy(), [[1, 2, 3], [1, 2, 3]])
    with pytest.raises(ValueError):
        x.copy_(tt.zeros(3, 2))


def test_refused_on_tensor_requiring_grad_when_grad_enabled():
    w = tt.ones(3, requires_grad=True)
    for op in (lambda: w.add_(1), lambda: w.mul_(2), lambda: w.zero_(), lambda: w.fill_(0.0),
               lambda: w.copy_(tt.zeros(3)), lambda: w.sub_(1), lambda: w.div_(2)):
        with pytest.raises(RuntimeError, match="grad"):
            op()
    with pytest.raises(RuntimeError, match="grad"):
        w += 1
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_allowed_when_grad_disabled():
    w = tt.ones(3, requires_grad=True)
    tt.set_grad_enabled(False)
    try:
        w.sub_(tt.tensor([0.5, 0.5, 0.5]))
        w *= 2
    finally:
        tt.set_grad_enabled(True)
    assert w.tolist() == [1.0, 1.0, 1.0]
    assert w.requires_grad and w.grad_fn is None


def test_data_setter_bypasses_grad_check():
    w = tt.zeros(2, requires_grad=True)
    w.data = tt.tensor([3.0, 4.0])
    assert w.tolist() == [3.0, 4.0] and w.requires_grad
    w.data.mul_(2)
    assert w.tolist() == [6.0, 8.0]
    with pytest.raises(ValueError):
        w.data = tt.zeros(3)


def test_refused_on_expanded_views():
    base = tt.tensor([1.0, 2.0])
    e = base.expand(3, 2)
    with pytest.raises(RuntimeError, match="memory"):
        e.add_(1)
    with pytest.raises(RuntimeError, match="memory"):
        e[0] = 5.0
    assert base.tolist() == [1.0, 2.0]
    ok = tt.zeros(3)[:, None]  # a size-1 dim, never stepped along: writable
    assert ok.stride() == (1, 1)  # PyTorch's unsqueeze stride
    ok.fill_(1.0)
    assert ok.tolist() == [[1.0], [1.0], [1.0]]


def test_shared_cells_found_in_any_dimension():
    column = tt.tensor([[1.0], [2.0], [3.0]]).expand(3, 4)  # stride 0 in the last dimension
    assert column.stride() == (1, 0)
    with pytest.raises(RuntimeError, match="memory"):
        column.add_(1)
    middle = tt.tensor([[[1.0, 2.0]]]).expand(1, 5, 2)  # stride 0 in the middle dimension
    with pytest.raises(RuntimeError, match="memory"):
        middle.mul_(2)


def test_stride_zero_along_a_size_one_dimension_is_writable():
    one = tt.tensor(5.0).expand(1)  # a new leading dimension of size 1: stride 0, one element, one cell
    assert one.stride() == (0,)
    one.add_(1.0)
    assert one.tolist() == [6.0]
    row = tt.tensor([1.0, 2.0, 3.0]).expand(2, 3)[:1]  # stride 0 on the size-1 dim: three elements, three cells
    assert row.stride() == (0, 1)
    row.add_(1.0)
    assert row.tolist() == [[2.0, 3.0, 4.0]]


def test_dtype_that_cannot_be_stored_back():
    i = tt.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="cast"):
        i.div_(2)
    with pytest.raises(RuntimeError, match="cast"):
        i.add_(0.5)
    i.mul_(2)
    assert i.tolist() == [2, 4, 6] and i.dtype == tt.int64
    f = tt.tensor([1.0])
    f.add_(tt.tensor([1.0], dtype=tt.float64))
    assert f.dtype == tt.float32 and f.item() == 2.0


def test_inplace_shape_must_broadcast_to_self():
    x = tt.zeros(3)
    with pytest.raises(ValueError):
        x.add_(tt.zeros(2, 3))


def test_optimizer_style_updates_keep_dtype_and_promotion_rules():
    # same shape and dtype (an optimizer's update), numbers, and the mixed cases that promote
    p = tt.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    g = tt.tensor(np.array([0.5, 0.5, 0.5], dtype=np.float32))
    p.add_(g, alpha=-0.1).mul_(2).sub_(g, alpha=2)
    assert p.dtype == tt.float32
    np.testing.assert_allclose(p.numpy(), (np.array([1.0, 2, 3]) - 0.05) * 2 - 1.0, rtol=1e-6)
    p.add_(tt.tensor(np.ones(3)))  # a float64 operand into float32: cast back, same_kind
    assert p.dtype == tt.float32
    ints = tt.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="can't be cast"):
        ints.mul_(0.5)
    with pytest.raises(RuntimeError, match="can't be cast"):
        ints.div_(tt.tensor([2, 2, 2]))
    ints.add_(tt.tensor([1, 1, 1]), alpha=2)
    assert ints.tolist() == [3, 4, 5] and ints.dtype == tt.int64


def test_inplace_overflow_and_division_by_zero_are_quiet():
    x = tt.tensor([1.0, -1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.div_(tt.tensor([0.0, 0.0, 0.0]))
    assert np.isinf(x.numpy()[:2]).all() and np.isnan(x.numpy()[2])

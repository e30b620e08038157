"""cross_entropy = log_softmax + nll_loss: vs PyTorch, stable at logits of 1e4, clear errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinytorch.nn.functional as F
from tinytorch import Tensor

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}
SHAPES = [((5,), ()), ((6, 4), (6,)), ((3, 5, 7), (3, 7)), ((2, 3, 4, 2), (2, 4, 2)), ((1, 1), (1,))]


def _data(in_shape, t_shape, dtype, seed=0, scale=3.0, ignore=None):
    rng = np.random.default_rng(seed)
    z = (rng.standard_normal(in_shape) * scale).astype(dtype)
    n_classes = in_shape[1] if len(in_shape) > 1 else in_shape[0]
    t = np.asarray(rng.integers(0, n_classes, t_shape), dtype=np.int64)
    if ignore is not None and t.ndim:
        t.flat[1::3] = ignore
    return z, t


def _torch_ce(torch, z, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    return torch.nn.functional.cross_entropy(
        torch.from_numpy(np.array(z)), torch.from_numpy(np.array(t)),
        weight=None if weight is None else torch.from_numpy(weight), ignore_index=ignore_index,
        reduction=reduction, label_smoothing=label_smoothing).numpy()


def _reference_ce(z, t):
    """float64 log-sum-exp cross-entropy for (N, C) logits."""
    z = z.astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    return lse - z[np.arange(len(t)), t]


@pytest.mark.parametrize("in_shape, t_shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_equals_pytorch(torch, in_shape, t_shape, dtype, reduction):
    z, t = _data(in_shape, t_shape, dtype, seed=len(in_shape))
    ours = F.cross_entropy(Tensor(z), Tensor(t), reduction=reduction)
    ref = _torch_ce(torch, z, t, reduction=reduction)
    assert ours.shape == ref.shape and ours.dtype == dtype
    np.testing.assert_allclose(ours.numpy(), ref, **TOL[dtype])


@pytest.mark.parametrize("in_shape, t_shape", SHAPES[1:4])
@pytest.mark.parametrize("ignore_index", [-100, 0, 3])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_ignore_index_and_weight_equal_pytorch(torch, in_shape, t_shape, ignore_index,
                                                             reduction, weighted):
    z, t = _data(in_shape, t_shape, np.float64, seed=5, ignore=ignore_index)
    w = np.linspace(2.0, 0.5, in_shape[1]) if weighted else None
    ours = F.cross_entropy(Tensor(z), Tensor(t), None if w is None else Tensor(w),
                           ignore_index=ignore_index, reduction=reduction)
    np.testing.assert_allclose(ours.numpy(), _torch_ce(torch, z, t, w, ignore_index, reduction),
                               **TOL[np.float64])


@pytest.mark.parametrize("in_shape, t_shape", SHAPES[:4])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_label_smoothing_equals_pytorch(torch, in_shape, t_shape, reduction, weighted, dtype):
    z, t = _data(in_shape, t_shape, dtype, seed=8, ignore=-100)
    n_classes = in_shape[1] if len(in_shape) > 1 else in_shape[0]
    w = np.linspace(0.5, 1.5, n_classes).astype(dtype) if weighted else None
    ours = F.cross_entropy(Tensor(z), Tensor(t), None if w is None else Tensor(w),
                           reduction=reduction, label_smoothing=0.15)
    ref = _torch_ce(torch, z, t, w, reduction=reduction, label_smoothing=0.15)
    assert ours.shape == ref.shape and ours.dtype == dtype
    np.testing.assert_allclose(ours.numpy(), ref, **TOL[dtype])


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_smoothing_term_is_the_loss_against_the_uniform_target(reduction, weighted):
    """The smoothing part on its own: the cross-entropy against 1/C on every class, weighted
    per class, 0 at ignored positions, and reduced like the NLL it is mixed with."""
    from tinytorch.nn.losses import _smoothing_term

    rng = np.random.default_rng(3)
    z = rng.standard_normal((4, 5))
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    target = np.array([0, 2, -100, 4])
    w = np.array([0.5, 1.0, 2.0, 4.0, 0.25]) if weighted else None  # summing to 7.75, not C = 5
    uniform_ce = -((logp * (1.0 if w is None else w)) * (1.0 / 5)).sum(1)
    uniform_ce[2] = 0.0
    total_weight = 3.0 if w is None else w[[0, 2, 4]].sum()
    expected = {"none": uniform_ce, "sum": uniform_ce.sum(), "mean": uniform_ce.sum() / total_weight}[reduction]
    got = _smoothing_term(Tensor(logp), Tensor(target), w, -100, reduction)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=0)


def _reaches(out, leaf):
    """Whether `leaf` is among the tensors the graph of `out` was built from."""
    visited, stack = [], [out]   # visited keeps each tensor alive, so no id is reused
    while stack:
        t = stack.pop()
        if t is leaf:
            return True
        if t.grad_fn is not None and not any(t is v for v in visited):
            visited.append(t)
            stack.extend(t.grad_fn.inputs)
    return False


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_smoothing_term_is_a_graph_back_to_the_log_probabilities(reduction):
    """Module 06 differentiates label smoothing through the ops `_smoothing_term` records, so
    its result must lead back to `logp` (numpy's answer wrapped in a Tensor has no graph)."""
    from tinytorch.nn.losses import _smoothing_term

    logp = Tensor(np.log(np.full((3, 4), 0.25)), requires_grad=True)
    got = _smoothing_term(logp, Tensor([0, -100, 3]), np.ones(4), -100, reduction)
    assert isinstance(got, Tensor) and got.grad_fn is not None, f"no grad_fn: got {got!r}"
    assert _reaches(got, logp), "the result's graph does not lead back to logp"


def test_label_smoothing_outside_0_1_is_refused():
    z, t = _data((3, 4), (3,), np.float32)
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(Tensor(z), Tensor(t), label_smoothing=1.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_is_finite_and_right_at_logits_of_1e4(torch, dtype):
    z = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4], [1e4, 1e4, 1e4], [-1e4, -1e4, 1e4]], dtype=dtype)
    t = np.array([2, 0, 1, 2])
    ours = F.cross_entropy(Tensor(z), Tensor(t), reduction="none").numpy()
    assert np.all(np.isfinite(ours)), ours
    np.testing.assert_allclose(ours, [2e4, 2e4 + np.log(2), np.log(3), 0.0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ours, _torch_ce(torch, z, t, reduction="none"), rtol=1e-6, atol=1e-6)
    for reduction in ["mean", "sum"]:
        out = F.cross_entropy(Tensor(z), Tensor(t), reduction=reduction).item()
        assert np.isfinite(out)
        np.testing.assert_allclose(out, _torch_ce(torch, z, t, reduction=reduction), rtol=1e-6)


def test_cross_entropy_at_1e4_with_sequence_targets_and_padding(torch):
    z = np.zeros((2, 4, 3), dtype=np.float32)
    z[0, 1, :] = 1e4
    z[1, 3, :] = -1e4
    t = np.array([[1, 2, -100], [3, 0, 0]])
    for reduction in ["mean", "sum", "none"]:
        ours = F.cross_entropy(Tensor(z), Tensor(t), reduction=reduction).numpy()
        assert np.all(np.isfinite(ours))
        np.testing.assert_allclose(ours, _torch_ce(torch, z, t, reduction=reduction), rtol=1e-6, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 6)),
                  elements=st.floats(-50, 50)), st.floats(-1e3, 1e3), st.data())
def test_cross_entropy_matches_log_sum_exp_and_ignores_a_shift(z, shift, data):
    n, c = z.shape
    t = np.array(data.draw(st.lists(st.integers(0, c - 1), min_size=n, max_size=n)))
    ref = _reference_ce(z, t)
    np.testing.assert_allclose(F.cross_entropy(Tensor(z), Tensor(t), reduction="none").numpy(), ref,
                               rtol=1e-10, atol=1e-10)
    shifted = F.cross_entropy(Tensor(z + shift), Tensor(t), reduction="none").numpy()
    np.testing.assert_allclose(shifted, ref, rtol=1e-8, atol=1e-8)
    assert np.all(shifted >= -1e-12)


def test_cross_entropy_is_log_softmax_then_nll_loss():
    z, t = _data((5, 4, 3), (5, 3), np.float64, seed=2)
    zt = Tensor(z, requires_grad=True)
    out = F.cross_entropy(zt, Tensor(t))
    node = out.grad_fn
    assert node.op == "nll_loss"
    (logp,) = node.inputs
    assert logp.grad_fn is not None and logp.grad_fn.op == "log_softmax" and logp.grad_fn.inputs[0] is zt
    assert logp.grad_fn.attrs["dim"] == 1
    composed = F.nll_loss(F.log_softmax(Tensor(z), dim=1), Tensor(t))
    np.testing.assert_allclose(out.item(), composed.item(), rtol=1e-14)


def test_cross_entropy_on_a_single_sample_uses_dim_0():
    z = np.array([0.5, -1.0, 2.0, 0.0])
    out = F.cross_entropy(Tensor(z), Tensor(2), reduction="none")
    assert out.shape == ()
    np.testing.assert_allclose(out.item(), _reference_ce(z[None], np.array([2]))[0], rtol=1e-13)


# ---------------------------------------------------------------------- errors
LOSSES = {"cross_entropy": F.cross_entropy, "nll_loss": F.nll_loss}


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("bad_dtype", [np.float32, np.float64, bool, np.int32, np.int16])
def test_check_class_targets_says_use_long_for_non_int64(name, bad_dtype):
    z = Tensor(np.zeros((3, 4), np.float32))
    t = Tensor(np.array([1, 0, 1]).astype(bad_dtype))
    with pytest.raises(TypeError) as info:
        LOSSES[name](z, t)
    msg = str(info.value)
    assert name in msg and "int64" in msg and ".long()" in msg, msg


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("bad", [4, 7, -1, -3])
def test_check_class_targets_names_an_out_of_range_value_and_the_class_count(name, bad):
    z = Tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(IndexError) as info:
        LOSSES[name](z, Tensor([0, bad, 1]))
    msg = str(info.value)
    assert str(bad) in msg and "4" in msg and name in msg, msg


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_check_class_targets_names_the_first_out_of_range_value(name):
    z = Tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(IndexError) as info:
        LOSSES[name](z, Tensor([0, 6, 9, 1]))
    msg = str(info.value)
    assert "6" in msg and "9" not in msg, msg


def test_check_class_targets_finds_an_out_of_range_value_in_a_sequence_batch():
    z = Tensor(np.zeros((2, 5, 3), np.float32))
    t = np.zeros((2, 3), np.int64)
    t[1, 2] = 5
    with pytest.raises(IndexError, match="5"):
        F.cross_entropy(z, Tensor(t))


def test_an_ignored_position_in_a_sequence_batch_is_not_out_of_range():
    t = np.zeros((2, 3), np.int64)
    t[1, 2] = -100
    np.testing.assert_allclose(F.cross_entropy(Tensor(np.zeros((2, 5, 3), np.float32)), Tensor(t)).item(), np.log(5),
                               rtol=1e-6)


def test_ignore_index_outside_the_class_range_is_allowed_only_as_ignore_index():
    z = Tensor(np.zeros((3, 4), np.float64))
    t = Tensor([1, 9, 2])
    np.testing.assert_allclose(F.cross_entropy(z, t, ignore_index=9).item(), np.log(4))
    with pytest.raises(IndexError, match="9"):
        F.cross_entropy(z, t)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_check_class_targets_names_both_batch_sizes(name):
    z = Tensor(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError) as info:
        LOSSES[name](z, Tensor([0, 1, 2]))
    msg = str(info.value)
    assert "4" in msg and "3" in msg and "batch" in msg, msg


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("in_shape, t_shape", [((4, 3), (4, 1)), ((4, 3), ()), ((2, 3, 5), (2,)),
                                               ((2, 3, 5), (2, 5, 1)), ((5,), (1,)), ((2, 3, 5), (2, 4))])
def test_check_class_targets_names_both_shapes_of_a_wrong_target(name, in_shape, t_shape):
    with pytest.raises(ValueError) as info:
        LOSSES[name](Tensor(np.zeros(in_shape, np.float32)), Tensor(np.zeros(t_shape, np.int64)))
    msg = str(info.value)
    assert str(in_shape) in msg and str(t_shape) in msg, msg


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_check_class_targets_refuses_integer_or_0d_input(name):
    with pytest.raises(TypeError, match="floating"):
        LOSSES[name](Tensor(np.zeros((2, 3), np.int64)), Tensor([0, 1]))
    with pytest.raises(ValueError, match="class dimension"):
        LOSSES[name](Tensor(1.0), Tensor(0))


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_class_weight_must_have_one_entry_per_class(name):
    z = Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError) as info:
        LOSSES[name](z, Tensor([0, 1]), Tensor(np.ones(4, np.float32)))
    assert "3" in str(info.value) and "(4,)" in str(info.value)


def test_cross_entropy_smoothing_shares_one_log_softmax():
    z = Tensor(np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    out = F.cross_entropy(z, Tensor(np.array([0, 2, 1, 1])), label_smoothing=0.1)
    nodes, stack, alive = set(), [out.grad_fn], []
    while stack:  # alive: the nodes stay referenced while their ids are compared
        node = stack.pop()
        if node is None or id(node) in nodes:
            continue
        nodes.add(id(node))
        alive.append(node)
        stack.extend(x.grad_fn for x in node.inputs)
    ops = [n.op for n in alive]
    assert ops.count("log_softmax") == 1, f"both parts of the mix read one log_softmax, got the ops {ops}"


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_check_class_targets_reports_the_mistake_to_fix_first(name):
    z = Tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(TypeError, match="int64"):  # float labels for the wrong batch: the dtype first
        LOSSES[name](z, Tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="batch"):  # the wrong batch, holding class 9 of 5: the shape first
        LOSSES[name](z, Tensor([0, 9, 1]))


@pytest.mark.parametrize("name", ["nll_loss", "cross_entropy"])
def test_check_class_targets_reports_the_input_dtype_before_a_missing_class_dimension(name):
    fn = getattr(F, name)
    with pytest.raises(TypeError, match="floating"):
        fn(Tensor(np.array(1)), Tensor(np.array(0)))   # a 0-d int64 input: its dtype comes first

"""n:m (2:4) semi-structured masks: in every run of m consecutive weights along the last
axis, exactly n kept, the largest in magnitude (ties: the earlier position pruned first);
custom_from_mask applies such a mask through the pruning wrapper."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import prune
from tinytorch.optim import SGD
from tinytorch.testing import python_steps


def _run_by_run(values, n, m):
    """The n:m mask from its definition: in each run, the m - n smallest |w| (stable order) pruned."""
    out = np.ones_like(values)
    for idx in np.ndindex(*values.shape[:-1]):
        for j in range(0, values.shape[-1], m):
            order = np.argsort(np.abs(values[idx][j:j + m]), kind="stable")
            run = out[idx][j:j + m]
            run[order[:m - n]] = 0
    return out


@pytest.mark.parametrize("n, m", [(2, 4), (1, 4), (3, 4), (1, 2), (2, 8), (4, 4)])
@pytest.mark.parametrize("shape", [(16,), (5, 8), (3, 2, 16)])
def test_semi_structured_mask_keeps_the_n_largest_of_every_run_of_m(n, m, shape):
    values = np.random.default_rng(sum(shape) + 10 * n + m).standard_normal(shape).astype(np.float32)
    mask = prune.semi_structured_mask(values, n, m)
    assert (mask.shape, mask.dtype) == (values.shape, values.dtype), f"mask {mask.shape} {mask.dtype}"
    runs = mask.reshape(-1, m)
    assert (runs.sum(axis=1) == n).all(), f"every run of {m} keeps exactly {n}"
    np.testing.assert_array_equal(mask, _run_by_run(values, n, m))


def test_semi_structured_mask_defaults_to_2_of_4_along_the_last_axis():
    values = np.array([[0.1, -3.0, 0.5, 0.2, 4.0, -0.3, 0.0, 1.0],
                       [1.0, 2.0, 3.0, 4.0, -4.0, -3.0, -2.0, -1.0]], dtype=np.float32)
    np.testing.assert_array_equal(prune.semi_structured_mask(values),
                                  [[0, 1, 1, 0, 1, 0, 0, 1], [0, 0, 1, 1, 1, 1, 0, 0]])


@pytest.mark.parametrize("n, m", [(2, 4), (1, 4), (3, 4), (2, 6)])
def test_semi_structured_mask_breaks_ties_by_pruning_the_earlier_position(n, m):
    for digits in (0, 1):  # integers and tenths: ties in most runs, and in runs of many sizes
        values = np.round(np.random.default_rng(4 + digits).standard_normal((30, 5, 12)), digits)
        np.testing.assert_array_equal(prune.semi_structured_mask(values, n, m), _run_by_run(values, n, m),
                                      err_msg=f"{n}:{m} with tied magnitudes: the earlier position is pruned first")


def test_semi_structured_mask_of_four_equal_weights_keeps_the_last_two():
    np.testing.assert_array_equal(prune.semi_structured_mask(np.array([1.0, 1.0, 1.0, 1.0])), [0, 0, 1, 1])


def test_semi_structured_mask_refuses_a_last_dimension_that_is_not_a_multiple_of_m():
    assert prune.semi_structured_mask(np.array([4.0, 3.0, 2.0, 1.0])).tolist() == [1, 1, 0, 0]
    with pytest.raises(ValueError, match="multiple"):
        prune.semi_structured_mask(np.ones((3, 6)))
    with pytest.raises(ValueError):
        prune.semi_structured_mask(np.ones(4), n=5, m=4)


def test_semi_structured_mask_takes_as_many_python_steps_for_long_rows_as_for_short_ones():
    rng = np.random.default_rng(0)
    short, long = rng.standard_normal((4, 8)), rng.standard_normal((4, 4000))
    assert python_steps(prune.semi_structured_mask, short) == python_steps(prune.semi_structured_mask, long)


def test_semi_structured_mask_through_custom_from_mask_stays_2_of_4_while_training():
    tt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 2))
    mask = prune.semi_structured_mask(model[0].weight.numpy())
    prune.custom_from_mask(model, "0.weight", mask)
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = tt.randn(5, 8)
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    model(x)
    weight = model[0].weight.numpy()
    assert ((weight != 0).reshape(6, 2, 4).sum(axis=-1) <= 2).all()
    np.testing.assert_array_equal(weight == 0, mask == 0)

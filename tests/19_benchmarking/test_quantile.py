"""quantile: order statistics with linear interpolation (numpy's and torch's default)."""
import numpy as np
import pytest

from tinytorch.utils.benchmark import quantile


@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 50])
def test_quantile_matches_numpy_on_unsorted_samples(n, q):
    xs = np.random.default_rng(n).exponential(1.0, n)
    got = quantile(list(xs), q)
    want = float(np.quantile(xs, q))
    assert isinstance(got, float), f"quantile returns a float, got {type(got).__name__}"
    assert got == pytest.approx(want, rel=1e-12), f"quantile(n={n}, q={q}): expected np.quantile's {want}, got {got}"


def test_quantile_leaves_the_callers_list_alone():
    runs = [3.0, 1.0, 2.0]
    assert quantile(runs, 0.5) == 2.0
    assert runs == [3.0, 1.0, 2.0], f"quantile must not reorder the caller's list, got {runs}"


def test_quantile_known_values():
    assert quantile([30, 10, 20], 0.5) == 20.0, "median of 3 unsorted samples is the middle one after sorting"
    assert quantile([10, 20, 30, 40], 0.5) == pytest.approx(25.0), "median of 4: halfway between 20 and 30"
    assert quantile([40, 10, 30, 20], 0.25) == pytest.approx(17.5), "Q(0.25) of 10..40: position 0.75, 17.5"
    assert quantile([40, 10, 30, 20], 0.75) == pytest.approx(32.5), "Q(0.75) of 10..40: position 2.25, 32.5"
    assert quantile([5, 1, 3], 0.0) == 1.0 and quantile([5, 1, 3], 1.0) == 5.0, "q=0 the minimum, q=1 the maximum"


def test_quantile_parity_with_torch(torch):
    xs = np.random.default_rng(5).standard_normal(33)
    t = torch.tensor(xs, dtype=torch.float64)
    for q in (0.25, 0.5, 0.75):
        assert quantile(list(xs), q) == pytest.approx(t.quantile(q).item(), rel=1e-12), f"torch.quantile at q={q}"


def test_quantile_errors():
    with pytest.raises(ValueError, match="sample"):
        quantile([], 0.5)
    with pytest.raises(ValueError, match="1.5"):
        quantile([1.0, 2.0], 1.5)
    with pytest.raises(ValueError, match="-0.1"):
        quantile([1.0, 2.0], -0.1)

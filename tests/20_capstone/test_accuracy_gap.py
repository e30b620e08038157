"""accuracy_gap: the gap of two variants on the same examples, with a 95% interval that
contains the population's gap about 95% of the time (measured on sampled test sets)."""
import numpy as np
import pytest

from tinytorch.capstone import accuracy_gap


def _sampled(cells, n, rng):
    """One test set of n examples from a population with the given cell probabilities
    (both right, only a right, only b right, both wrong): (correct_a, correct_b)."""
    c = rng.choice(4, size=n, p=cells)
    return (c == 0) | (c == 1), (c == 0) | (c == 2)


def test_accuracy_gap_value_by_hand():
    a = np.array([1, 1, 1, 1, 0, 1, 0, 1], bool)  # 6 of 8
    b = np.array([1, 1, 1, 0, 0, 0, 1, 1], bool)  # 5 of 8
    gap, low, high = accuracy_gap(a, b)
    assert gap == pytest.approx(0.125, abs=1e-12), f"gap of 6/8 over 5/8: expected 0.125, got {gap}"
    assert low <= gap <= high, f"expected low <= gap <= high, got {(low, gap, high)}"
    assert all(type(v) is float for v in (gap, low, high)), f"expected Python floats, got {[type(v) for v in (gap, low, high)]}"
    back = accuracy_gap(b, a)
    assert back[0] == pytest.approx(-0.125, abs=1e-12), f"gap of b over a: expected -0.125, got {back[0]}"


def test_accuracy_gap_accepts_zero_one_integers():
    gap, _, _ = accuracy_gap([1, 0, 1, 1], [1, 1, 0, 0])
    assert gap == pytest.approx(0.25, abs=1e-12), f"0/1 lists: expected gap 0.25, got {gap}"


@pytest.mark.parametrize("n", [359, 500, 1000])
def test_accuracy_gap_of_identical_answers_is_0_with_a_narrow_interval_that_is_not_empty(n):
    same = np.arange(n) % 5 != 0
    gap, low, high = accuracy_gap(same, same.copy())
    assert gap == 0 and low < 0 < high and 0.5 / n <= high - low <= 0.03, (
        f"two variants right on exactly the same {n} examples: expected gap 0 in an interval at most 3 points wide "
        f"(no disagreement; variances of the two accuracies added would give about 16) but not 0 wide (at least "
        f"{50 / n:.2f} points: {n} examples cannot show that the two never disagree), got {(gap, low, high)}")


@pytest.mark.parametrize("cells, n", [
    ((0.80, 0.08, 0.05, 0.07), 359),   # many disagreements, true gap 3 points
    ((0.93, 0.04, 0.01, 0.02), 500),   # a rounded copy: few disagreements, true gap 3 points
    ((0.40, 0.50, 0.00, 0.10), 359),   # a against a much worse b: true gap 50 points
])
def test_accuracy_gap_interval_covers_the_true_gap_about_95_percent(cells, n):
    """Too narrow (68% intervals, a division by n) covers too rarely; treating the two
    accuracies as measured on different examples (variances added), or the variance of one
    example's effect without the squared gap, covers almost always."""
    rng = np.random.default_rng(7)
    true = cells[1] - cells[2]
    hits = sum(lo <= true <= hi for _, lo, hi in (accuracy_gap(*_sampled(cells, n, rng)) for _ in range(1500)))
    assert 0.92 <= hits / 1500 <= 0.975, \
        f"the interval contained the true gap {true} in {hits / 1500:.3f} of 1,500 sampled test sets; expected 0.92 to 0.975"


@pytest.mark.parametrize("a, b", [
    (np.ones(10, bool), np.ones(1, bool)),
    (np.ones(1, bool), np.ones(1, bool)),
    (np.ones((2, 3), bool), np.ones((2, 3), bool)),
])
def test_accuracy_gap_refuses_arrays_that_do_not_line_up(a, b):
    with pytest.raises(ValueError, match=str(b.shape).replace("(", r"\(").replace(")", r"\)")):
        accuracy_gap(a, b)

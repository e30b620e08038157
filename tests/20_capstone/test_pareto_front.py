"""pareto_front on synthetic points, each case checked by hand."""
import numpy as np
import pytest

from tinytorch.capstone import pareto_front


def rows(points):
    return [{"name": n, "median_s": x, "accuracy": y, "bytes": 1} for n, (x, y) in points.items()]


def test_pareto_front_hand_checked():
    pts = {"A": (1.0, 0.95), "B": (0.6, 0.93), "C": (0.9, 0.90), "D": (0.3, 0.80), "E": (0.5, 0.78)}
    assert pareto_front(rows(pts)) == ["A", "B", "D"], "C is beaten by B (faster, more accurate), E by D"


@pytest.mark.parametrize("points, front, why", [
    ({"p": (1.0, 0.9), "q": (1.0, 0.9)}, ["p", "q"], "equal points do not dominate each other"),
    ({"slow": (2.0, 0.9), "fast": (1.0, 0.9)}, ["fast"], "same accuracy, slower: dominated"),
    ({"worse": (1.0, 0.8), "better": (1.0, 0.9)}, ["better"], "same latency, less accurate: dominated"),
    ({"a": (1.0, 0.9), "b": (2.0, 0.95), "c": (0.5, 0.7)}, ["a", "b", "c"], "every pair a trade-off"),
    ({"best": (0.1, 0.99), "x": (0.2, 0.98), "y": (0.3, 0.5)}, ["best"], "one point beats all"),
    ({"only": (5.0, 0.1)}, ["only"], "a single row is its own front"),
])
def test_pareto_front_cases(points, front, why):
    assert pareto_front(rows(points)) == front, f"{why}: expected {front}, got {pareto_front(rows(points))}"


def test_pareto_front_empty_and_order():
    assert pareto_front([]) == [], "no rows, no front"
    pts = {"z": (0.3, 0.80), "a": (1.0, 0.95), "m": (0.6, 0.93)}
    assert pareto_front(rows(pts)) == ["z", "a", "m"], "names come back in the rows' order"


def test_pareto_front_against_brute_force():
    rng = np.random.default_rng(0)
    for trial in range(30):
        pts = {f"v{i}": (float(rng.integers(1, 6)), float(rng.integers(1, 6)) / 10) for i in range(8)}
        want = [n for n, (x, y) in pts.items()
                if not any(x2 <= x and y2 >= y and (x2 < x or y2 > y) for m, (x2, y2) in pts.items() if m != n)]
        assert pareto_front(rows(pts)) == want, f"trial {trial}: points {pts}: expected {want}"

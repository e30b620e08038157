"""pareto_front on synthetic points: cases checked by hand, random sets with ties against the
definition applied to every pair, and how its work grows with the number of rows."""
import numpy as np
import pytest

from tinytorch.capstone import pareto_front
from tinytorch.testing import peak_bytes, python_steps


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


@pytest.mark.parametrize("size", [3, 8, 20])
def test_pareto_front_against_brute_force(size):
    """Points on a small grid (ties of latency, of accuracy and of both), the rows unchanged."""
    rng = np.random.default_rng(size)
    for trial in range(100):
        pts = {f"v{i}": (float(rng.integers(1, 6)), float(rng.integers(1, 6)) / 10) for i in range(size)}
        want = [n for n, (x, y) in pts.items()
                if not any(x2 <= x and y2 >= y and (x2 < x or y2 > y) for m, (x2, y2) in pts.items() if m != n)]
        given = rows(pts)
        before = [dict(r) for r in given]
        assert pareto_front(given) == want, f"trial {trial}: points {pts}: expected {want}"
        assert given == before, "pareto_front changed its rows"


def test_pareto_front_of_three_twins_keeps_all_three():
    pts = {"a": (1.0, 0.9), "b": (1.0, 0.9), "slow": (2.0, 0.9), "c": (1.0, 0.9), "worse": (1.0, 0.5)}
    assert pareto_front(rows(pts)) == ["a", "b", "c"]


def trade_offs(n):
    """n rows, each slower and more accurate than the one before, shuffled: all on the front,
    so a comparison of pairs can never stop early."""
    order = np.random.default_rng(n).permutation(n)
    return [{"name": f"c{i}", "median_s": 1e-3 * (1 + i), "accuracy": 0.5 + 0.4 * i / n, "bytes": 1}
            for i in order]


def test_pareto_front_work_grows_like_n_log_n_not_n_squared():
    assert len(pareto_front(trade_offs(300))) == 300
    small, large = python_steps(pareto_front, trade_offs(300)), python_steps(pareto_front, trade_offs(600))
    assert large < 3 * small, (
        f"pareto_front ran {small} Python steps for 300 rows and {large} for 600 ({large / small:.1f}x): "
        f"it compares pairs of rows (4x for twice the rows); sort once and sweep")


def test_pareto_front_memory_grows_like_n_not_n_squared():
    """A record per row is about 150 bytes; an n x n table of comparisons is n bytes per row."""
    peak = peak_bytes(pareto_front, trade_offs(2000))
    assert peak <= 1000 * 2000, (
        f"pareto_front's peak memory for 2,000 rows was {peak:,} bytes ({peak / 2000:,.0f} per row): it builds "
        f"an n x n table of comparisons; sort once and sweep")

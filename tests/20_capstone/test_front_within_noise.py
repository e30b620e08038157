"""front_within_noise: a Pareto front that respects each row's latency IQR, judged by the
properties any sound rule has (pareto_front at zero IQR, monotone in the IQRs, overlapping
spreads kept, spreads apart decided, row order) rather than by one rule."""
import numpy as np
import pytest

from tinytorch.capstone import front_within_noise, pareto_front


def row(name, accuracy, median_ms, iqr_ms):
    return {"name": name, "accuracy": accuracy, "median_s": median_ms / 1e3, "iqr_s": iqr_ms / 1e3,
            "bytes": 1, "flops": 1}


def random_rows(rng, iqrs=(0.0,)):
    return [row(f"v{i}", float(rng.choice([0.9, 0.92, 0.95])), float(rng.choice([1.0, 1.5, 2.0, 3.0])),
                float(rng.choice(iqrs))) for i in range(int(rng.integers(1, 8)))]


def test_front_within_noise_keeps_overlapping_spreads():
    rows = [row("float32", 0.95, 1.0, 0.4), row("pruned", 0.95, 0.8, 0.4)]
    assert front_within_noise(rows) == ["float32", "pruned"], "0.6-1.0 and 0.8-1.2 ms overlap: both stay"


def test_front_within_noise_decides_spreads_that_are_apart():
    rows = [row("float32", 0.95, 1.0, 0.1), row("pruned", 0.95, 0.8, 0.1)]
    assert front_within_noise(rows) == ["pruned"], "0.75-0.85 and 0.95-1.05 ms are apart: float32 is clearly slower"


@pytest.mark.parametrize("seed", range(10))
def test_front_within_noise_decides_two_equally_accurate_rows_by_their_spreads(seed):
    rng = np.random.default_rng(500 + seed)
    for _ in range(20):
        (m1, m2), (i1, i2) = rng.uniform(0.5, 2.0, 2).round(3), rng.uniform(0.05, 1.0, 2).round(3)
        overlap = abs(m1 - m2) * 2 <= i1 + i2
        expected = ["a", "b"] if overlap else ["a" if m1 < m2 else "b"]
        got = front_within_noise([row("a", 0.95, m1, i1), row("b", 0.95, m2, i2)])
        assert got == expected, f"a {m1} ms (IQR {i1}), b {m2} ms (IQR {i2}): expected {expected}, got {got}"


def test_front_within_noise_keeps_a_slower_more_accurate_row():
    rows = [row("slow", 0.96, 2.0, 0.1), row("fast", 0.95, 1.0, 0.1)]
    assert front_within_noise(rows) == ["slow", "fast"]


@pytest.mark.parametrize("seed", range(40))
def test_front_within_noise_at_zero_iqr_keeps_the_exact_front(seed):
    rows = random_rows(np.random.default_rng(seed))
    assert front_within_noise(rows) == pareto_front(rows), f"every IQR 0: rows {rows}"


@pytest.mark.parametrize("seed", range(40))
def test_front_within_noise_never_loses_a_row_to_wider_iqrs(seed):
    rng = np.random.default_rng(100 + seed)
    rows = random_rows(rng, iqrs=(0.0, 0.2, 0.5, 1.0, 2.0))
    kept = front_within_noise(rows)
    assert set(pareto_front(rows)) <= set(kept), f"a row on the plain front left out: {pareto_front(rows)} vs {kept}"
    wider = [dict(r, iqr_s=r["iqr_s"] + float(rng.choice([0.0, 0.5])) / 1e3) for r in rows]
    assert set(kept) <= set(front_within_noise(wider)), f"wider IQRs dropped a row: {kept} -> {front_within_noise(wider)}"
    assert kept == [r["name"] for r in rows if r["name"] in set(kept)], f"names out of the rows' order: {kept}"
    for a in rows:
        if any(b is not a and b["accuracy"] >= a["accuracy"]
               and b["median_s"] + b["iqr_s"] / 2 < a["median_s"] - a["iqr_s"] / 2 for b in rows):
            assert a["name"] not in kept, f"{a['name']} is clearly beaten (as accurate, faster beyond both spreads)"


def test_front_within_noise_refuses_no_rows():
    with pytest.raises(ValueError, match="no rows"):
        front_within_noise([])

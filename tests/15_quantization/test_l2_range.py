"""The histogram observer's search: the range of least estimated squared error over every pair of bin edges."""
import numpy as np
import pytest

from tinytorch.ao import quantization as Q
from tinytorch.testing import arithmetic, held_bytes, python_steps, spied

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _estimated_error(counts, edges, lo, hi, qmin=-128, qmax=127):
    """The contract's E(lo, hi), bin by bin: rounding noise inside, the distance to the end outside."""
    c = (edges[:-1] + edges[1:]) / 2
    scale, _ = Q._calculate_qparams(np.float32(lo), np.float32(hi), False, qmin, qmax)
    step = float(scale)
    cost = np.where(c < lo, (c - lo) ** 2, np.where(c > hi, (c - hi) ** 2, step * step / 12))
    return float(np.sum(counts * cost))


def _least_error(counts, edges, qmin=-128, qmax=127):
    return min(_estimated_error(counts, edges, edges[i], edges[j], qmin, qmax)
               for i in range(len(edges)) for j in range(i + 1, len(edges)))


def _data(kind, rng):
    if kind == "relu-with-outliers":
        return np.concatenate([np.abs(rng.standard_normal(8000)), np.full(8, 30.0)])
    if kind == "laplace":
        return rng.laplace(-0.3, 1.0, 6000)
    if kind == "all-positive":
        return rng.uniform(2, 9, 3000)
    if kind == "all-negative-with-a-tail":
        return np.concatenate([-rng.exponential(1.0, 4000), [-40.0]])
    return rng.uniform(-2, 1, 3000)


@pytest.mark.parametrize("kind", ["relu-with-outliers", "laplace", "all-positive", "all-negative-with-a-tail",
                                  "uniform"])
@pytest.mark.parametrize("bits", [8, 4, 2])
def test_l2_optimal_range_is_the_least_estimated_error_of_every_pair(kind, bits):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    counts, edges = np.histogram(_data(kind, np.random.default_rng(bits)), 32)
    lo, hi = Q._l2_optimal_range(counts, edges, qmin, qmax)
    assert lo < hi and lo in edges and hi in edges, f"two bin edges, lo < hi; got ({lo}, {hi})"
    got, best = _estimated_error(counts, edges, lo, hi, qmin, qmax), _least_error(counts, edges, qmin, qmax)
    assert got <= best * (1 + 1e-6), (f"{kind}, {bits} bits: E of [{lo:.4f}, {hi:.4f}] is {got:.6g}; the least over "
                                      f"all 528 pairs of edges is {best:.6g}")


def test_l2_optimal_range_returns_two_python_floats():
    counts, edges = np.histogram(np.random.default_rng(0).standard_normal(500), 16)
    got = Q._l2_optimal_range(counts, edges)
    assert isinstance(got, tuple) and len(got) == 2, f"a pair (lo, hi), got {got!r}"
    assert all(type(v) is float for v in got), f"Python floats, got {[type(v).__name__ for v in got]}"


def test_l2_optimal_range_of_one_bin_is_that_bin():
    assert Q._l2_optimal_range(np.array([7]), np.array([-1.0, 2.0])) == (-1.0, 2.0)


def test_l2_optimal_range_ignores_empty_bins_beyond_the_data():
    """Bins with no values cost nothing wherever the range ends: only the occupied ones decide."""
    rng = np.random.default_rng(5)
    counts, edges = np.histogram(rng.uniform(0, 1, 2000), 20, range=(0, 1))
    padded_counts = np.concatenate([np.zeros(10), counts, np.zeros(10)])
    padded_edges = np.concatenate([np.linspace(-0.5, 0, 11)[:-1], edges, np.linspace(1, 1.5, 11)[1:]])
    lo, hi = Q._l2_optimal_range(padded_counts, padded_edges)
    got = _estimated_error(padded_counts, padded_edges, lo, hi)
    best = _least_error(padded_counts, padded_edges)
    assert got <= best * (1 + 1e-6), f"E of [{lo}, {hi}] is {got:.6g}, the least is {best:.6g}"


def test_l2_optimal_range_on_2048_bins_beats_min_max_and_sampled_pairs():
    rng = np.random.default_rng(2)
    counts, edges = np.histogram(np.concatenate([rng.laplace(0, 1, 300_000), [-70.0, 50.0]]), 2048)
    lo, hi = Q._l2_optimal_range(counts, edges)
    yours = _estimated_error(counts, edges, lo, hi)
    full = _estimated_error(counts, edges, edges[0], edges[-1])
    assert yours < full, f"E of [{lo:.3f}, {hi:.3f}] is {yours:.6g}; min/max's is {full:.6g}"
    pairs = np.sort(rng.choice(len(edges), size=(4000, 2)), axis=1)
    sampled = min(_estimated_error(counts, edges, edges[a], edges[b]) for a, b in pairs if a < b)
    assert yours <= sampled * (1 + 1e-9), f"E of [{lo:.3f}, {hi:.3f}] is {yours:.6g}; a sampled pair has {sampled:.6g}"


def test_l2_optimal_range_in_the_histogram_observer_over_batches():
    rng = np.random.default_rng(9)
    values = np.concatenate([np.abs(rng.standard_normal(30_000)), np.full(20, 25.0)]).astype(np.float32)
    rng.shuffle(values)
    obs = Q.HistogramObserver(quant_min=-8, quant_max=7)  # 4 bits: every level counts
    obs(values[:100])
    size_1 = held_bytes(obs)
    for part in np.array_split(values[100:], 9):
        obs(part)
    assert held_bytes(obs) < size_1 + 1000, "the histogram observer's size does not grow with the batches"
    assert obs.histogram.sum() == values.size, "every value counted once"
    scale, zero_point = obs.calculate_qparams()
    mm_scale, mm_zero = Q._calculate_qparams(np.float32(values.min()), np.float32(values.max()), False, -8, 7)
    err = {name: float(np.mean((Q._dequantize(Q._quantize(values, s, z, -8, 7), s, z) - values) ** 2))
           for name, s, z in [("histogram", scale, zero_point), ("minmax", mm_scale, mm_zero)]}
    assert err["histogram"] < err["minmax"], f"the searched range quantizes with less error than min/max: {err}"
    assert float(scale) < float(mm_scale), f"it clips the outliers: step {float(scale)} vs {float(mm_scale)}"



def _work(fn, bins):
    counts, edges = np.histogram(np.random.default_rng(0).laplace(0, 1, 5000), bins)
    _, log = spied(fn, counts, edges)
    return sum(int(np.prod(shape)) for _, _, shape in arithmetic(log)) + python_steps(fn, counts, edges)


def test_l2_optimal_range_work_grows_as_the_square_of_the_bins():
    """2048 bins make two million candidates: a search that sums over the bins for each costs B³."""
    small, large = _work(Q._l2_optimal_range, 24), _work(Q._l2_optimal_range, 96)
    assert large < 24 * small, (f"4x the bins took {large / small:.1f}x the work ({small:,} numbers and steps at 24 "
                                f"bins, {large:,} at 96); a B² search takes about 16x, a B³ one 64x")

"""allocate_sparsity: per-layer amounts meeting a sparsity budget at the least predicted loss,
against an exhaustive search (small cases) and an exact knapsack over weight counts (large)."""
import copy
import itertools

import numpy as np
import pytest

from tinytorch.capstone import allocate_sparsity
from tinytorch.testing import peak_bytes, python_steps


def rise(curves, chosen):
    return sum(dict(curves[n])[a] - dict(curves[n])[0.0] for n, a in chosen.items())


def zeroed(sizes, chosen):
    return sum(round(a * sizes[n]) for n, a in chosen.items())


def exhaustive(curves, sizes, target):
    """The least rise over every combination of amounts that meets the target (None: none does)."""
    names = list(curves)
    best = None
    for combo in itertools.product(*(curves[n] for n in names)):
        if sum(round(a * sizes[n]) for n, (a, _) in zip(names, combo)) >= target * sum(sizes.values()):
            value = sum(loss - dict(curves[n])[0.0] for n, (_, loss) in zip(names, combo))
            best = value if best is None or value < best else best
    return best


def knapsack(curves, sizes, target):
    """The least rise for each exact count of zeroed weights, layer by layer; the best that meets the target."""
    best = {0: 0.0}
    for n, curve in curves.items():
        base, grown = dict(curve)[0.0], {}
        for count, value in best.items():
            for a, loss in curve:
                k, v = count + round(a * sizes[n]), value + loss - base
                if v < grown.get(k, np.inf):
                    grown[k] = v
        best = grown
    return min(v for k, v in best.items() if k >= target * sum(sizes.values()))


def made_up(rng, n_layers, n_amounts, max_size):
    amounts = [round(float(a), 3) for a in np.linspace(0.0, 0.9, n_amounts)]
    curves, sizes = {}, {}
    for i in range(n_layers):
        drops = np.sort(rng.random(n_amounts)) * rng.choice([0.01, 0.1, 0.5])
        drops[0] = 0.0
        curves[f"layer{i}"] = [(a, 0.3 + float(d)) for a, d in zip(amounts, drops)]
        sizes[f"layer{i}"] = int(rng.integers(1, max_size))
    return curves, sizes


def check_choice(curves, sizes, target, chosen, best):
    assert set(chosen) == set(curves), f"one amount for every layer: got {chosen}"
    assert all(chosen[n] in dict(curves[n]) for n in curves), f"each amount from its own curve: got {chosen}"
    assert zeroed(sizes, chosen) >= target * sum(sizes.values()), (
        f"target {target}: the choice {chosen} zeroes {zeroed(sizes, chosen)} of {sum(sizes.values())} weights")
    assert rise(curves, chosen) == pytest.approx(best, abs=1e-12), (
        f"target {target}: predicted rise {rise(curves, chosen)} of {chosen}, but {best} is possible")


@pytest.mark.parametrize("curves, sizes, target, expected, why", [
    ({"A": [(0.0, 0.10), (0.5, 0.11), (0.9, 0.20)], "B": [(0.0, 0.10), (0.5, 0.13), (0.9, 0.15)]},
     {"A": 100, "B": 100}, 0.7, {"A": 0.5, "B": 0.9}, "the least sensitive layer first costs 0.13, not 0.06"),
    ({"A": [(0.0, 0.2), (0.5, 0.21), (0.9, 0.30)], "B": [(0.0, 0.2), (0.5, 0.2005), (0.9, 0.201)]},
     {"A": 900, "B": 100}, 0.45, {"A": 0.5, "B": 0.0}, "B's 0.9 is only 90 weights: amounts are not weights"),
    ({"A": [(0.0, 0.2), (0.5, 0.21)], "B": [(0.0, 0.2), (0.5, 0.22)]},
     {"A": 10, "B": 10}, 0.25, {"A": 0.5, "B": 0.0}, "exactly on the budget (5 of 20 weights) is enough"),
    ({"A": [(0.0, 0.2), (0.3, 0.201), (0.6, 0.25)], "B": [(0.0, 0.2), (0.3, 0.202), (0.6, 0.26)]},
     {"A": 3, "B": 3}, 0.25, {"A": 0.3, "B": 0.3}, "a budget of 1.5 weights needs 2: 1 zeroed weight is short"),
    ({"A": [(0.0, 0.2), (0.5, 0.19), (0.9, 0.4)], "B": [(0.0, 0.2), (0.5, 0.3)]},
     {"A": 10, "B": 10}, 0.0, {"A": 0.5, "B": 0.0}, "pruning that helps (a negative rise) is taken even at target 0"),
    ({"A": [(0.9, 0.6), (0.0, 0.2), (0.5, 0.25)]},
     {"A": 7}, 0.5, {"A": 0.5}, "a curve in any order; round(0.5 * 7) = 4 weights meet 3.5"),
])
def test_allocate_sparsity_hand_checked(curves, sizes, target, expected, why):
    got = allocate_sparsity(curves, sizes, target)
    assert got == expected, f"{why}: expected {expected}, got {got}"


def assert_grows_slowly():
    steps = [python_steps(allocate_sparsity, *made_up(np.random.default_rng(n), n, 4, 5000), 0.5) for n in (4, 8)]
    assert steps[1] < 40 * steps[0], (
        f"4 layers took {steps[0]:,} Python steps, 8 layers {steps[1]:,} ({steps[1] / steps[0]:.0f}x): from 256 "
        f"to 65,536 choices the work must not follow the number of choices")


def test_allocate_sparsity_grows_slowly_with_the_layers():
    assert_grows_slowly()


@pytest.mark.parametrize("seed", range(12))
def test_allocate_sparsity_against_exhaustive_search(seed):
    rng = np.random.default_rng(seed)
    curves, sizes = made_up(rng, int(rng.integers(1, 5)), int(rng.integers(2, 7)), 400)
    for target in (0.0, 0.2, 0.45, 0.6, 0.8):
        best = exhaustive(curves, sizes, target)
        if best is None:
            with pytest.raises(ValueError):
                allocate_sparsity(curves, sizes, target)
            continue
        check_choice(curves, sizes, target, allocate_sparsity(curves, sizes, target), best)


@pytest.mark.parametrize("seed", range(3))
def test_allocate_sparsity_24_layers_against_a_knapsack(seed):
    assert_grows_slowly()  # first, so that a search over every choice fails here, not in a 60 s timeout
    rng = np.random.default_rng(100 + seed)
    curves, sizes = made_up(rng, 24, 10, 200)
    for target in (0.3, 0.6, 0.85):
        check_choice(curves, sizes, target, allocate_sparsity(curves, sizes, target), knapsack(curves, sizes, target))


def test_allocate_sparsity_memory_follows_the_layers_not_the_weights():
    curves, sizes = made_up(np.random.default_rng(9), 8, 10, 5000)
    peaks = [peak_bytes(allocate_sparsity, curves, {n: k * scale for n, k in sizes.items()}, 0.5) for scale in (1, 100)]
    assert peaks[1] < 2 * peaks[0], (
        f"8 layers took {peaks[0]:,} bytes at most; with 100 times the weights per layer {peaks[1]:,} "
        f"({peaks[1] / peaks[0]:.1f}x): a table over every count of zeroed weights grows with the weights")


def test_allocate_sparsity_leaves_its_inputs_alone():
    curves, sizes = made_up(np.random.default_rng(7), 5, 6, 300)
    before = copy.deepcopy((curves, sizes))
    allocate_sparsity(curves, sizes, 0.5)
    assert (curves, sizes) == before, "curves and sizes are read, not changed"


@pytest.mark.parametrize("target, match", [(1.0, "1.0"), (-0.1, "-0.1"), (1.5, "1.5")])
def test_allocate_sparsity_refuses_a_target_outside_0_1(target, match):
    curves = {"A": [(0.0, 0.2), (0.5, 0.3)]}
    with pytest.raises(ValueError, match=match):
        allocate_sparsity(curves, {"A": 10}, target)


def test_allocate_sparsity_refuses_layers_that_do_not_match():
    curves = {"A": [(0.0, 0.2), (0.5, 0.3)], "B": [(0.0, 0.2), (0.5, 0.3)]}
    with pytest.raises(ValueError, match="C"):
        allocate_sparsity(curves, {"A": 10, "C": 10}, 0.5)


def test_allocate_sparsity_says_what_is_reachable():
    curves = {"A": [(0.0, 0.2), (0.5, 0.3), (0.9, 0.4)], "B": [(0.0, 0.2), (0.5, 0.3)]}
    with pytest.raises(ValueError, match="140"):  # 0.9 * 100 + 0.5 * 100: 140 of 200 weights at most
        allocate_sparsity(curves, {"A": 100, "B": 100}, 0.8)

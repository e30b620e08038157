"""allocate_sparsity: the levels chosen from a sensitivity scan reach the whole-model target
counted in weights, and no other choice that reaches it has a smaller sum of drops
(compared with trying every combination); an unreachable target is an error."""
import itertools

import numpy as np
import pytest

from tinytorch import compression as C
from tinytorch.testing import peak_bytes, python_steps


def _share_and_loss(choice, drops, sizes, levels):
    total = sum(sizes.values())
    return (sum(sizes[n] * choice[n] for n in sizes) / total,
            sum(drops[n][levels.index(choice[n])] for n in sizes))


def _best_by_trying_everything(drops, sizes, levels, target):
    names, total = list(sizes), sum(sizes.values())
    return min(sum(drops[n][i] for n, i in zip(names, combo))
               for combo in itertools.product(range(len(levels)), repeat=len(names))
               if sum(sizes[n] * levels[i] for n, i in zip(names, combo)) >= target * total - 1e-9 * total)


@pytest.mark.parametrize("seed", range(30))
def test_allocate_sparsity_is_the_best_choice_that_reaches_the_target(seed):
    rng = np.random.default_rng(100 + seed)
    levels = sorted(set(np.round(rng.uniform(0, 1, int(rng.integers(2, 6))), 2).tolist()) | {0.0})
    sizes = {f"layer{i}": int(rng.integers(1, 1000)) for i in range(int(rng.integers(1, 5)))}
    drops = {n: np.round(np.sort(rng.uniform(-0.02, 0.6, len(levels))), 3).tolist() for n in sizes}
    target = float(np.round(rng.uniform(0, max(levels)), 2))
    choice = C.allocate_sparsity(drops, sizes, levels, target)
    assert sorted(choice) == sorted(sizes) and all(q in levels for q in choice.values()), \
        f"one of the levels {levels} for every layer, got {choice}"
    share, loss = _share_and_loss(choice, drops, sizes, levels)
    assert share >= target - 1e-9, f"the weights removed ({share:.4f} of all) must reach the target {target}"
    best = _best_by_trying_everything(drops, sizes, levels, target)
    assert loss == pytest.approx(best, abs=1e-12), \
        f"sum of drops {loss} of {choice}; the best choice that reaches {target} loses {best}"


def test_allocate_sparsity_counts_weights_not_layers():
    drops = {"small": [0.0, 0.0, 0.0], "big": [0.0, 0.1, 0.5]}
    choice = C.allocate_sparsity(drops, {"small": 100, "big": 900}, [0.0, 0.5, 1.0], 0.5)
    assert choice["big"] == 0.5, f"the small layer alone removes 10% of the weights, not half: {choice}"


def test_allocate_sparsity_does_not_take_the_cheapest_step_first():
    choice = C.allocate_sparsity({"a": [0.0, 0.6], "b": [0.0, 0.1]}, {"a": 60, "b": 40}, [0.0, 1.0], 0.55)
    assert choice == {"a": 1.0, "b": 0.0}, f"a alone reaches 0.55 and loses 0.6; b first would cost both: {choice}"


def test_allocate_sparsity_accepts_a_target_met_exactly():
    choice = C.allocate_sparsity({"a": [0.0, 0.2, 0.3], "b": [0.0, 0.2, 0.3]}, {"a": 100, "b": 100},
                                 [0.0, 0.5, 1.0], 0.5)
    assert sorted(choice.values()) == [0.0, 1.0], f"one layer at 1.0 removes exactly half and loses 0.3: {choice}"


def test_allocate_sparsity_allows_the_contracts_rounding():
    sizes = {f"l{i}": 7 for i in range(6)}
    choice = C.allocate_sparsity({n: [0.0, 0.01, 0.5] for n in sizes}, sizes, [0.0, 0.35, 1.0], 0.35)
    assert set(choice.values()) == {0.35}, \
        f"every layer at 0.35 removes 0.35 of the weights (14.699999999999998 of 14.7 in floats): {choice}"


def test_allocate_sparsity_refuses_an_unreachable_target():
    with pytest.raises(ValueError, match=r"0\.95"):
        C.allocate_sparsity({"a": [0.0, 0.1]}, {"a": 10}, [0.0, 0.9], 0.95)


def _made_up_scan(rng, n_layers, n_levels, max_size):
    levels = [round(float(q), 3) for q in np.linspace(0.0, 0.9, n_levels)]
    drops = {}
    for i in range(n_layers):
        d = np.sort(rng.random(n_levels)) * rng.choice([0.01, 0.1, 0.5])
        d[0] = 0.0
        drops[f"layer{i}"] = d.tolist()
    return drops, {f"layer{i}": int(rng.integers(1, max_size)) for i in range(n_layers)}, levels


def test_allocate_sparsity_grows_slowly_with_the_layers():
    steps = [python_steps(C.allocate_sparsity, *_made_up_scan(np.random.default_rng(n), n, 4, 5000), 0.5) for n in (4, 8)]
    assert steps[1] < 40 * steps[0], (
        f"4 layers took {steps[0]:,} Python steps, 8 layers {steps[1]:,} ({steps[1] / steps[0]:.0f}x): from 256 "
        f"to 65,536 choices the work must not follow the number of choices")


def test_allocate_sparsity_memory_follows_the_layers_not_the_weights():
    drops, sizes, levels = _made_up_scan(np.random.default_rng(9), 8, 10, 5000)
    peaks = [peak_bytes(C.allocate_sparsity, drops, {n: k * scale for n, k in sizes.items()}, levels, 0.5)
             for scale in (1, 100)]
    assert peaks[1] < 2 * peaks[0], (
        f"8 layers took {peaks[0]:,} bytes at most; with 100 times the weights per layer {peaks[1]:,} "
        f"({peaks[1] / peaks[0]:.1f}x): the work must follow the layers and their levels, not the weights")

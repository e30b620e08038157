"""tinytorch/random.py (torch.random, provided by module 01): the Generator, the default
generator with its seed and state, and the one numpy stream each call draws from. They need
no student code (module 01's rand and module 05's shuffling are tested with them in their
modules' suites)."""
import pytest

import tinytorch as tt
from tinytorch import random


def _draws(generator=None, n=5):
    return random.numpy_generator(generator).random(n).tolist()


def test_the_top_level_names_are_torch_random_s():
    for name in ("Generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"):
        assert getattr(tt, name) is getattr(random, name), name
    assert tt.data.Generator is tt.Generator, "one Generator class, not one per package"


def test_manual_seed_reseeds_the_default_generator_in_place_and_returns_it():
    before = random.default_generator
    assert tt.manual_seed(7) is before and random.default_generator is before
    first = _draws()
    tt.manual_seed(7)
    assert _draws() == first and tt.initial_seed() == 7


def test_the_state_restores_the_stream_exactly():
    tt.manual_seed(3)
    _draws()
    state = tt.get_rng_state()
    ahead = _draws()
    tt.manual_seed(99)  # a reseed in between replaces the numpy generator inside
    tt.set_rng_state(state)
    assert _draws() == ahead


def test_a_generator_of_its_own_is_untouched_by_the_default_stream():
    own = tt.Generator().manual_seed(0)
    expected = _draws(tt.Generator().manual_seed(0))
    tt.manual_seed(1)
    _draws(n=50)
    assert _draws(own) == expected
    assert tt.Generator().initial_seed() == tt.Generator.default_seed, "unseeded is still fixed, as in PyTorch"


def test_seed_draws_a_fresh_seed_and_reseeds_with_it():
    seeds = {tt.seed() for _ in range(3)}
    assert len(seeds) == 3 and tt.initial_seed() in seeds
    assert all(isinstance(s, int) and 0 <= s < 2**63 for s in seeds)


def test_a_wrong_generator_is_refused_by_name():
    with pytest.raises(TypeError, match="generator must be a tinytorch.Generator or None, not int"):
        random.numpy_generator(3)

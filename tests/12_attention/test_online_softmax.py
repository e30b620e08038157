"""The online softmax: attention over blocks of keys equals the full softmax, for any scores,
without an L x S array of scores."""
import tracemalloc

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F
from tinytorch.nn.attention import online_softmax_attention


def full(q, k, v):
    return F.scaled_dot_product_attention(tt.tensor(q), tt.tensor(k), tt.tensor(v)).numpy()


@pytest.mark.parametrize("block", [1, 3, 16, 30, 31, 64])
def test_equals_full_attention_for_any_block_size(block):
    rng = np.random.default_rng(block)
    q, k, v = rng.standard_normal((9, 8)), rng.standard_normal((30, 8)), rng.standard_normal((30, 4))
    np.testing.assert_allclose(online_softmax_attention(q, k, v, block=block), full(q, k, v), rtol=1e-9,
                               atol=1e-12, err_msg=f"blocks of {block} keys, S = 30")


def test_a_new_maximum_in_every_block():
    q = np.abs(np.random.default_rng(1).standard_normal((5, 6)))
    k = np.linspace(0.0, 4.0, 24)[:, None] * np.ones((24, 6))      # scores grow along the keys
    v = np.random.default_rng(2).standard_normal((24, 3))
    np.testing.assert_allclose(online_softmax_attention(q, k, v, block=4), full(q, k, v), rtol=1e-9,
                               atol=1e-12, err_msg="every block raises the running maximum")


def test_scores_in_the_thousands_do_not_overflow():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((6, 8)) * 800.0, rng.standard_normal((20, 8)), rng.standard_normal((20, 2))
    out = online_softmax_attention(q, k, v, block=6)
    assert np.isfinite(out).all(), "scores in the thousands must give finite outputs"
    np.testing.assert_allclose(out, full(q, k, v), rtol=1e-9, atol=1e-12)


def test_scores_far_below_zero_do_not_underflow():
    rng = np.random.default_rng(6)
    q = np.abs(rng.standard_normal((5, 8))) * 1500.0
    k = -np.abs(rng.standard_normal((12, 8)))                  # every score is large and negative
    v = rng.standard_normal((12, 3))
    out = online_softmax_attention(q, k, v, block=4)
    assert np.isfinite(out).all(), ("every score about a thousand below 0: the outputs must be finite (a running "
                                    "maximum that starts at 0 instead of -inf never rises to the scores, and "
                                    "every exponential underflows to 0)")
    np.testing.assert_allclose(out, full(q, k, v), rtol=1e-9, atol=1e-12)


def test_no_array_of_all_the_scores_is_kept():
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((512, 16)), rng.standard_normal((512, 16)), rng.standard_normal((512, 16))
    tracemalloc.start()
    online_softmax_attention(q, k, v, block=32)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 512 * 512 * 8 / 2, (f"peak {peak / 2**20:.2f} MiB: an L x S float64 array of scores is 2 MiB; "
                                      f"blocks of 32 keys need far less")

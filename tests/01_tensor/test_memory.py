"""Memory footprint: views cost no bytes, copies do, slices keep their storage alive."""
import numpy as np

import tinytorch as tt


def test_footprint_of_one_tensor():
    x = tt.zeros(100, 50)
    assert tt.memory_footprint(x) == 100 * 50 * 4
    assert tt.memory_footprint(tt.zeros(10, dtype=tt.float64)) == 80
    assert tt.memory_footprint(tt.zeros(10, dtype=tt.bool_)) == 10


def test_views_cost_nothing():
    x = tt.zeros(100, 50)
    views = [x.T, x[::2], x[3], x.reshape(50, 100), x[0].expand(7, 50), x.unsqueeze(0), x.detach()]
    assert tt.memory_footprint(x, *views) == 20_000
    for v in views:
        assert v._storage is x._storage


def test_copies_cost_their_bytes():
    x = tt.zeros(100, 50)
    assert tt.memory_footprint(x, x.T.contiguous()) == 40_000
    assert tt.memory_footprint(x, x + 1) == 40_000
    assert tt.memory_footprint(x, x[[0, 1]]) == 20_000 + 2 * 50 * 4


def test_slice_keeps_whole_storage_alive():
    x = tt.zeros(1000)
    s = x[:3]
    assert s.nbytes == 12
    assert tt.memory_footprint(s) == 4000
    assert tt.memory_footprint(s.clone()) == 12


def test_nbytes_counts_seen_elements():
    x = tt.zeros(10, 10, dtype=tt.float64)
    assert x.nbytes == 800
    assert x[:, :2].nbytes == 160
    assert x[0].expand(5, 10).nbytes == 400
    assert np.prod(x.shape) * x.element_size() == x.nbytes


def test_memory_footprint_counts_memory_that_two_storages_share_once():
    from tinytorch import from_numpy
    from tinytorch._tensor import memory_footprint

    a = np.zeros(1000, np.float32)
    assert memory_footprint(from_numpy(a), from_numpy(a)) == 4_000, "from_numpy(a) twice: one block of memory"
    assert memory_footprint(from_numpy(a[500:]), from_numpy(a), from_numpy(a[:100])) == 4_000, "overlapping parts"
    assert memory_footprint(from_numpy(a[:100]), from_numpy(a[900:])) == 800, "two disjoint parts of one array"
    assert memory_footprint(from_numpy(a[:600]), from_numpy(a[400:])) == 4_000, "two parts that overlap by 200"

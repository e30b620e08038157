"""Timing for the notebooks' "systems look" sections.

One helper, shared by every notebook, so that all measurements in the course are taken the
same way. Module 19 builds a full benchmark harness on the same ideas.
"""
import contextlib
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits


@contextlib.contextmanager
def pinned_threads(n=1):
    """Run the block with BLAS (numpy's matrix products), OpenMP and numba's parallel loops
    limited to `n` threads each; the previous limits come back afterwards.

    Why: on a machine that other processes keep busy, a library that starts one thread per
    core waits for cores it does not get, and a measurement then says more about the load
    than about the code. One thread for every side of a comparison makes the ratio fair.
    """
    if n < 1:
        raise ValueError(f"pinned_threads needs at least one thread, got {n}")
    numba = sys.modules.get("numba")  # numba's pool only matters once numba is in use
    before = numba.get_num_threads() if numba is not None else None
    with threadpool_limits(n):
        if numba is not None:
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        try:
            yield
        finally:
            if numba is not None:
                numba.set_num_threads(before)


def time_samples(fn, repeats=5, warmup=1, threads=1):
    """Wall-clock seconds of each of `repeats` calls of `fn()`, after `warmup` untimed calls,
    with BLAS and numba limited to `threads` threads (pinned_threads; None: no limit).

    Why the raw samples: the spread (quartiles, min and max) says how far a median can be
    trusted; the harness of module 19 and the profiler of module 14 report it.
    """
    if repeats < 1:
        raise ValueError(f"timing needs at least one timed repeat, got repeats={repeats}")
    with pinned_threads(threads) if threads is not None else contextlib.nullcontext():
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return times


def median_time(fn, repeats=5, warmup=1, threads=1):
    """Median wall-clock seconds of `fn()` over `repeats` calls, after `warmup` untimed calls,
    with BLAS and numba limited to `threads` threads (None: no limit).

    Why the median: one slow run (another process, a cold cache) moves a mean a lot and a
    median hardly at all. Why warm-up: the first call pays one-off costs (allocation, imports,
    caches) that are not what we want to measure.
    """
    if repeats < 1:
        raise ValueError(f"median_time needs at least one timed repeat, got repeats={repeats}")
    return float(np.median(time_samples(fn, repeats, warmup, threads)))


def copy_bandwidth(nbytes=2 ** 26, repeats=7, threads=1):
    """Bytes per second that one copy of a float32 array of `nbytes` bytes moves (each byte
    read once and written once), from the fastest of `repeats` copies on `threads` threads.

    Why the fastest: other work on the machine can only slow a run down, so the fastest run
    is the closest to what the memory system can do. Why 64 MiB: past every core's caches,
    so the copy measures memory, not cache. The roofline of module 17 and the decode-step
    balance of module 18 both use this one figure.
    """
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return 2 * src.nbytes / min(time_samples(lambda: np.copyto(dst, src), repeats=repeats, threads=threads))


def matmul_peak(n=1024, repeats=7, threads=1):
    """FLOP per second of numpy's BLAS on an n x n float32 matmul (2n³ FLOPs), from the
    fastest of `repeats` products on `threads` threads: the best rate any kernel here reaches.
    """
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    return 2 * n ** 3 / min(time_samples(lambda: a @ a, repeats=repeats, threads=threads))

"""Timing for the notebooks' "systems look" sections.

One helper, shared by every notebook, so that all measurements in the course are taken the
same way. Module 19 builds a full benchmark harness on the same ideas.
"""
import time

import numpy as np


def time_samples(fn, repeats=5, warmup=1):
    """Wall-clock seconds of each of `repeats` calls of `fn()`, after `warmup` untimed calls.

    Why the raw samples: the spread (quartiles, min and max) says how far a median can be
    trusted; the harness of module 19 and the profiler of module 14 report it.
    """
    if repeats < 1:
        raise ValueError(f"timing needs at least one timed repeat, got repeats={repeats}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median_time(fn, repeats=5, warmup=1):
    """Median wall-clock seconds of `fn()` over `repeats` calls, after `warmup` untimed calls.

    Why the median: one slow run (another process, a cold cache) moves a mean a lot and a
    median hardly at all. Why warm-up: the first call pays one-off costs (allocation, imports,
    caches) that are not what we want to measure.
    """
    if repeats < 1:
        raise ValueError(f"median_time needs at least one timed repeat, got repeats={repeats}")
    return float(np.median(time_samples(fn, repeats, warmup)))

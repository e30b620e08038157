# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Module 19 — Benchmarking: numbers you can trust
#
# "My version is 1.8x faster" is a claim about a **random variable**. Run the same function
# twice on a laptop or a shared server and the two times differ: another process takes the
# core, the CPU changes its clock, a cache is cold, the garbage collector runs. A single
# timing of each version is one draw from each distribution, and the ratio of two draws can
# say almost anything. This module builds a benchmark harness that gives numbers you can
# defend: it **warms up**, **repeats**, reports the **median and the spread** (order
# statistics, not the mean), runs until the spread is small or a time budget is spent,
# compares two versions **in pairs, interleaved** so that machine noise hits both, records
# **where** the number was measured, and **refuses** to report a workload that did not run.
#
# ## Goals
#
# By the end of this module you will be able to
#
# - compute **quantiles** by order statistics (the median, the quartiles, the IQR) and say
#   why they beat the mean and the minimum on timing data;
# - build `Measurement` (per-run times from blocks of runs, median, IQR, mean) and `Timer`
#   with `timeit`, `blocked_autorange` and `adaptive_autorange`, named and laid out like
#   `torch.utils.benchmark`;
# - write the **warm-up** and the **stopping rule** of an adaptive run (stop when IQR/median
#   is small enough, or when the time budget is used);
# - mark **outliers** with Tukey's fences;
# - design a **paired comparison** (`compare(a, b)`: the order of the calls and the statistic
#   that keep a drifting machine out of the ratio) and **show with a measurement** that it
#   beats single timings;
# - refuse to report a workload that raised, returned without running, or was never timed;
# - record the environment (CPU, cores, threads, library versions, BLAS), print a results
#   table (`Compare`) and plot the distributions.
#
# ## Prerequisites
#
# Module 01 (`Tensor`, its matmul) for the workloads of the systems looks, and
# `tinytorch.utils.timing` (`time_samples`: raw timings after a warm-up). Nothing else: a
# benchmark harness works on any Python callable.
#
# ## How this notebook works
#
# Cells marked `#| export` become `tinytorch/utils/benchmark.py` when you run `tito export 19`
# (or `tito test module 19`); `tinytorch.utils.benchmark` then plays the part of
# `torch.utils.benchmark`. Fill in the cells with `# YOUR CODE HERE`; the **check** cell
# after each prints a ✓ or says what is wrong. The checks run your code on **fake clocks**
# (a clock is just a function that returns seconds), so they test the logic, never the
# speed of the machine.

# %%
#| default_exp utils.benchmark

# %%
import sys
import threading
import time

import matplotlib

if "ipykernel" not in sys.modules:  # running as a plain script: draw off-screen
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import tinytorch
from tinytorch.testing import assert_close, assert_equal, assert_raises, check
from tinytorch.utils.timing import time_samples

from tinytorch.utils.reload import reload_on_export

reload_on_export()  # in Jupyter: after `tito export`, this kernel runs the code just exported

# %% [markdown]
# ## 1. The idea: a timing is a draw from a distribution
#
# Time a small function 300 times in a row (with `tinytorch.utils.timing.time_samples`, the
# course's raw timer) and look at the samples. Most sit in a narrow band; a few are much
# slower: the run where the scheduler gave the core to someone else, or a page fault, or an
# interrupt. The distribution is **skewed to the right** (nothing makes a run faster than the
# work allows; many things make it slower), so
#
# - the **mean** is dragged up by the few slow runs, and one bad run moves it a lot;
# - the **minimum** is the luckiest run: stable on a quiet machine, but it hides the cost a
#   user actually sees, and it is one sample, so it says nothing about the spread;
# - the **median** (the middle of the sorted samples) moves little when a few runs are slow,
#   and the **interquartile range** (IQR, the 75th minus the 25th percentile) says how wide
#   the typical band is. IQR / median is a unit-free measure of how noisy a measurement is.
#
# For $n$ sorted samples $x_{(0)} \le \dots \le x_{(n-1)}$, numpy's default `np.quantile`
# (method "linear", also `torch.quantile`'s and `torch.utils.benchmark.Measurement`'s)
# places quantile 0 on the smallest sample and quantile 1 on the largest, spaces the
# others evenly in between, and interpolates linearly between the two order statistics
# around a position that falls between samples. Work out where quantile $q$ sits, and the
# formula for the value there, before you write it. Calling it $Q(q)$: the median is
# $Q(0.5)$; the IQR is $Q(0.75) - Q(0.25)$.

# %%
def _small_workload():
    return sum(i * i for i in range(3000))


_samples = np.array(time_samples(_small_workload, repeats=300, warmup=5)) * 1e6   # microseconds
_q25, _q50, _q75 = np.quantile(_samples, [0.25, 0.5, 0.75])
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
axes[0].plot(_samples, ".", ms=3, color="tab:blue")
axes[0].set_xlabel("run")
axes[0].set_yscale("log")
axes[0].set_ylabel("time (µs, log scale)")
axes[0].set_title("300 timings of the same function, in order", fontsize=10)
_hi = _q75 + 6 * (_q75 - _q25)                                 # the histogram's right edge
_n_beyond = int((_samples > _hi).sum())
axes[1].hist(_samples[_samples <= _hi], bins=40, color="tab:blue", alpha=0.7)
for _x, _name, _color in [(_q50, "median", "black"), (_samples.mean(), "mean", "tab:red"),
                          (_samples.min(), "min", "tab:green")]:
    axes[1].axvline(min(_x, _hi), color=_color, lw=1.5, label=f"{_name} {_x:.1f} µs")
axes[1].axvspan(_q25, _q75, color="grey", alpha=0.25, label=f"IQR {_q75 - _q25:.1f} µs")
axes[1].set_xlabel(f"time (µs; {_n_beyond} slower runs beyond {_hi:.0f} µs not drawn)")
axes[1].set_ylabel("runs")
axes[1].set_title("their distribution", fontsize=10)
axes[1].legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"median {_q50:.1f} µs, IQR {_q75 - _q25:.1f} µs ({(_q75 - _q25) / _q50:.1%} of the median), "
      f"mean {_samples.mean():.1f} µs, min {_samples.min():.1f} µs, max {_samples.max():.1f} µs")

# %% [markdown]
# On a quiet machine the band is narrow and the mean sits a little above the median; on a
# busy one (a shared server, a laptop with a browser open) the right tail is long and the
# mean moves away. The printed figures are this machine's, now.
#
# The package file starts here.

# %%
#| export
"""Benchmark harness (module 19), in the spirit of `torch.utils.benchmark`: Timer,
Measurement (median, IQR, mean of per-run times), a paired comparison of two workloads
(interleaved, so that a drifting machine stays out of the ratio), the environment record, Compare (a results
table) and a plot. It refuses to report a workload that did not run."""
import functools
import math
import os
import platform
import sys
import time
import types
from dataclasses import dataclass

from tinytorch.utils.timing import pinned_threads

__all__ = ["BenchmarkError", "quantile", "Measurement", "split_outliers", "Timer", "compare",
           "PairedComparison", "environment", "Compare", "plot", "MIN_BLOCKS"]

MIN_BLOCKS = 4  # an IQR needs a few samples to mean anything (torch's adaptive_autorange: > 3)


class BenchmarkError(RuntimeError):
    """A workload that raised, returned without running, or was never timed: no number."""


def _unit(seconds):
    """('ms', 1e-3) for 0.0042: the unit torch.utils.benchmark would print the value in."""
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return name, scale
    return "ns", 1e-9


# %% [markdown]
# ## 2. Order statistics: `quantile`
#
# Write `quantile(samples, q)` from the position you worked out above. It is the one statistic the whole harness
# is built on: medians, quartiles, the spread of a ratio. Writing it (rather than calling
# `np.quantile`) is the point: a median is the middle of the **sorted** samples, and the
# position formula is where off-by-one mistakes live.
#
# <details><summary>Hint 1</summary>
#
# For the samples 10, 20, 30, 40, where is the median? Which two order statistics is it
# between, and how far between?
# </details>
#
# <details><summary>Hint 2</summary>
#
# With $n$ samples the positions run from 0 to $n - 1$, not to $n$: $q = 1$ must give the
# largest sample, $q = 0$ the smallest. And the samples arrive in the order they were
# measured, not sorted.
# </details>
#
# <details><summary>The approach</summary>
#
# The position is a real number between 0 and n − 1; its integer part names one order
# statistic and its fractional part says how far towards the next one to go. The last
# position has no next one: make sure q = 1 does not read past the end.
# </details>

# %% nbgrader={"grade": false, "grade_id": "quantile", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def quantile(samples, q):
    """The q-quantile of `samples` by linear interpolation between order statistics.

    Contract: `samples` a non-empty sequence of numbers (any order; left as it is: a caller
    asks several quantiles of one list), `q` a number in [0, 1]. Returns a float equal to numpy's default np.quantile (method "linear", as
    torch.quantile): linear interpolation between the order statistics. q = 0.5 is the median; q = 0 the minimum, q = 1 the maximum.
    Errors: ValueError when `samples` is empty (the message says there are no samples);
    ValueError when q is outside [0, 1] (the message gives q).
    """
    # Idea: a quantile is read off the SORTED samples, at a position that q places.
    ### BEGIN SOLUTION
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("quantile: no samples (an empty list has no median)")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile: q must be in [0, 1], got q={q!r}")
    h = (len(xs) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test-quantile", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_mine = [30, 10, 20]
assert_equal(quantile(_mine, 0.5), 20.0, "median of 3 unsorted samples [30, 10, 20]")
assert_equal(_mine, [30, 10, 20], "the caller's list after quantile (its order is the caller's: a list of runs in time order)")
assert_close(quantile([10, 20, 30, 40], 0.5), 25.0, what="median of 4 samples: halfway between 20 and 30")
assert_close(quantile([40, 10, 30, 20], 0.25), 17.5, what="Q(0.25) of 10, 20, 30, 40")
assert_equal(quantile([5, 1, 3], 0.0), 1.0, "q = 0: the minimum")
assert_equal(quantile([5, 1, 3], 1.0), 5.0, "q = 1: the maximum")
assert_equal(quantile([7], 0.3), 7.0, "one sample: every quantile is that sample")
_rs = np.random.default_rng(0).exponential(1.0, 37)
for _q in (0.1, 0.25, 0.5, 0.75, 0.9):
    assert_close(quantile(list(_rs), _q), float(np.quantile(_rs, _q)), rtol=1e-12,
                 what=f"quantile(37 skewed samples, {_q}) vs np.quantile")
assert_raises(ValueError, quantile, [], 0.5, match="sample")
assert_raises(ValueError, quantile, [1.0, 2.0], 1.5, match="1.5")
print(f"✓ quantile: median of [10, 20, 30, 40] = {quantile([10, 20, 30, 40], 0.5)}, "
      f"IQR = {quantile([10, 20, 30, 40], 0.75) - quantile([10, 20, 30, 40], 0.25)}")

# %% [markdown]
# ## 3. A `Measurement`: per-run times from blocks of runs
#
# A clock has a resolution and a cost (section 9 measures both), so a harness rarely times a
# single call of a fast function. It times a **block** of `number_per_run` calls between two
# clock reads; each block gives one **raw time**, and the time of one run is the raw time
# divided by the block's size. `torch.utils.benchmark.Measurement(number_per_run, raw_times,
# ...)` stores exactly that, and its statistics (`median`, `iqr`, `mean`) are of the
# **per-run** times, sorted, with `np.quantile`'s rule.
#
# Our `Measurement` has the same fields (its labels are plain arguments instead of torch's
# `TaskSpec`). The provided parts: the properties, `meets_confidence(threshold)`
# (IQR / median below the threshold, as in torch), the warnings, the printout. Write
# `_summarize`, which `__init__` calls: it turns the raw times into the statistics, and it
# is the first place the harness refuses to report a number.
#
# <details><summary>Hint 1</summary>
#
# A block of 100 runs took 2 ms. What is the time of one run? What would a median of raw
# block times mean if two measurements used different block sizes?
# </details>
#
# <details><summary>Hint 2</summary>
#
# What should the median of zero timings be? What does a raw time of 0 (or a negative one,
# or NaN) say about what was measured?
# </details>
#
# <details><summary>The approach</summary>
#
# Two questions, in this order. Is there anything here worth a statistic? (Which raw
# times could only come from a measurement that went wrong, and why must the harness say
# so rather than report a number?) Then: of *what* are the statistics, blocks or runs, so
# that two measurements with different block sizes can be compared? Everything after that
# is your `quantile`.
# </details>

# %% nbgrader={"grade": false, "grade_id": "measurement", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Measurement:
    """The result of timing one workload, like torch.utils.benchmark.Measurement: raw times
    of blocks of `number_per_run` runs; statistics of the per-run times."""

    def __init__(self, number_per_run, raw_times, label=None, sub_label=None, description=None,
                 num_threads=1, metadata=None):
        if not isinstance(number_per_run, int) or isinstance(number_per_run, bool) or number_per_run < 1:
            raise ValueError(f"Measurement: number_per_run must be a positive int, got {number_per_run!r}")
        self.number_per_run = number_per_run
        self.raw_times = [float(t) for t in raw_times]
        self.label, self.sub_label, self.description = label, sub_label, description
        self.num_threads = num_threads
        self.metadata = dict(metadata or {})
        self._summarize()

    def _summarize(self):
        """Set the statistics of the per-run times.

        Contract: sets `self.times` (a tuple: each raw time divided by number_per_run, in the
        order measured) and the floats `self._p25`, `self._median`, `self._p75` (your
        quantile of the per-run times at 0.25, 0.5, 0.75) and `self._mean` (their average).
        Errors: BenchmarkError when there is no raw time (the message names the workload,
        `self.title`, and says nothing was timed); BenchmarkError when a raw time is not a
        finite number > 0 (the message names the workload and gives the bad time).
        """
        # Idea: the statistics are of one RUN, and no statistic exists without a timing.
        ### BEGIN SOLUTION
        if not self.raw_times:
            raise BenchmarkError(f"{self.title}: no timed runs, so there is no number to report")
        for t in self.raw_times:
            if not (math.isfinite(t) and t > 0):
                raise BenchmarkError(f"{self.title}: a raw time of {t!r} s is not a measurement "
                                     f"(times must be finite and > 0)")
        self.times = tuple(t / self.number_per_run for t in self.raw_times)
        self._p25 = quantile(self.times, 0.25)
        self._median = quantile(self.times, 0.5)
        self._p75 = quantile(self.times, 0.75)
        self._mean = sum(self.times) / len(self.times)
        ### END SOLUTION


# %% [markdown]
# The rest of `Measurement` is provided: the properties, torch's confidence rule and
# warnings, and the printout (the same layout as torch's).

# %%
#| export
def _title(self):
    """'label: sub_label, description' (what torch prints above a measurement)."""
    parts = [p for p in (self.label, self.sub_label) if p]
    head = ": ".join(str(p) for p in parts) or "workload"
    return f"{head} ({self.description})" if self.description else head


def _repr(self):
    unit, scale = _unit(self._median)
    n = len(self.times)
    lines = [self.title, f"  Median: {self._median / scale:.2f} {unit}"]
    if n >= MIN_BLOCKS:
        lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to {self._p75 / scale:.2f})")
    lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs per measurement, "
                 f"{self.num_threads} thread{'s' if self.num_threads > 1 else ''}")
    if self.has_warnings:
        lines.append(f"  WARNING: Interquartile range is {self.iqr / self._median:.1%} of the median measurement.")
    return "\n".join(lines)


Measurement.title = property(_title)
Measurement.median = property(lambda self: self._median, doc="Median time of one run, in seconds.")
Measurement.mean = property(lambda self: self._mean, doc="Mean time of one run, in seconds.")
Measurement.p25 = property(lambda self: self._p25, doc="25th percentile of the per-run times.")
Measurement.p75 = property(lambda self: self._p75, doc="75th percentile of the per-run times.")
Measurement.iqr = property(lambda self: self._p75 - self._p25, doc="Interquartile range of the per-run times.")
Measurement.meets_confidence = lambda self, threshold=0.1: self.iqr / self._median < threshold
Measurement.has_warnings = property(lambda self: len(self.times) >= MIN_BLOCKS and not self.meets_confidence(0.1))
Measurement.__repr__ = _repr


# %% nbgrader={"grade": true, "grade_id": "test-measurement", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_m = Measurement(10, [0.040, 0.010, 0.020, 0.030], label="matmul", sub_label="64x64", description="ours")
assert_close(_m.times, (0.004, 0.001, 0.002, 0.003), rtol=1e-12,
             what="per-run times: each raw block time / 10 runs, in the order measured")
assert_close(_m.median, 0.0025, rtol=1e-12, what="median of the per-run times 1, 2, 3, 4 ms")
assert_close((_m.p25, _m.p75), (0.00175, 0.00325), rtol=1e-12, what="quartiles of 1, 2, 3, 4 ms (interpolated)")
assert_close(_m.iqr, 0.0015, rtol=1e-9, what="IQR = p75 - p25")
assert_close(_m.mean, 0.0025, rtol=1e-12, what="mean of the per-run times")
_skew = Measurement(1, [1.0, 1.1, 0.9, 1.0, 9.0])
assert_close((_skew.median, _skew.mean), (1.0, 2.6), rtol=1e-12, what="(median, mean) of 1.0, 1.1, 0.9, 1.0 and one 9.0")
assert_raises(BenchmarkError, Measurement, 5, [], label="empty", match="empty")
assert_raises(BenchmarkError, Measurement, 1, [0.01, 0.0, 0.01], label="zero", match="0.0")
assert_raises(BenchmarkError, Measurement, 1, [0.01, float("nan")], label="nan", match="nan")
assert_raises(BenchmarkError, Measurement, 1, [0.01, float("inf")], label="inf", match="inf")
print(_m)
print(f"✓ Measurement: median {_m.median * 1e3:.2f} ms, IQR {_m.iqr * 1e3:.2f} ms of per-run times; "
      f"one slow run moves the mean to {_skew.mean} s and the median stays at {_skew.median} s")

# %% [markdown]
# ## 4. Outliers: Tukey's fences
#
# A box plot draws "outliers" beyond **Tukey's fences**: more than $k$ IQRs (usually
# $k = 1.5$) below the first quartile or above the third,
#
# $$\text{low} = Q_1 - k\,\text{IQR}, \qquad \text{high} = Q_3 + k\,\text{IQR}.$$
#
# For timings the fences do two jobs: they **count** the disturbed runs (many outliers =
# a noisy machine: rerun, or quiet it down), and they let a report show the distribution
# without one 50x run squashing the axis. A median barely needs them: it is already robust.
# Dropping outliers and then reporting a **mean** is a common way to make a measurement
# look better than it is; we only mark them (`Measurement.outliers`, the plot), and the
# reported statistics still use every run.
#
# <details><summary>Hint 1</summary>
#
# The fences are measured in IQRs from the quartiles, not from the median, and not in
# multiples of the median. Is a sample exactly on a fence an outlier?
# </details>
#
# <details><summary>The approach</summary>
#
# Everything is measured from the quartiles, in IQRs. Two details decide the edge cases:
# a sample exactly on a fence (the contract says which side it is on), and the order of
# the two lists' entries: a report that shows *when* the disturbed runs happened needs
# them in the order they were measured.
# </details>

# %% nbgrader={"grade": false, "grade_id": "split-outliers", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def split_outliers(samples, k=1.5):
    """Split samples into (kept, outliers) by Tukey's fences.

    Contract: `samples` non-empty numbers, `k` >= 0. With Q1, Q3 the 0.25 and 0.75 quantiles
    (your `quantile`) and IQR = Q3 - Q1, a sample is kept when Q1 - k*IQR <= x <= Q3 + k*IQR
    and is an outlier otherwise (too low or too high). Returns two lists of floats that keep
    the samples' order. Errors: ValueError for no samples (from quantile).
    """
    # Idea: "far" is measured in IQRs beyond the quartiles, on both sides.
    ### BEGIN SOLUTION
    q1, q3 = quantile(samples, 0.25), quantile(samples, 0.75)
    low, high = q1 - k * (q3 - q1), q3 + k * (q3 - q1)
    kept = [float(x) for x in samples if low <= x <= high]
    outliers = [float(x) for x in samples if not low <= x <= high]
    return kept, outliers
    ### END SOLUTION


Measurement.outliers = property(lambda self: split_outliers(self.times)[1],
                                doc="Per-run times beyond Tukey's fences (k = 1.5), in the order measured.")

# %% nbgrader={"grade": true, "grade_id": "test-split-outliers", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_xs = [10, 11, 12, 13, 14, 100, 10.5, 0.1]             # Q1 = 10.375, Q3 = 13.25, IQR = 2.875
_kept, _out = split_outliers(_xs)
assert_equal(_out, [100.0, 0.1], "the outliers, in order")
assert_equal(_kept, [10.0, 11.0, 12.0, 13.0, 14.0, 10.5], "the kept samples, in order")
assert_equal(split_outliers([4, 0, 2, 1, 3], k=0.5), ([4.0, 0.0, 2.0, 1.0, 3.0], []),
             "k = 0.5 on 0..4 (Q1 = 1, Q3 = 3): the fences are 0 and 4, and a sample on a fence is kept")
assert_equal(split_outliers([5.0, 5.0, 5.0, 9.0])[1], [9.0],
             "three equal runs and a slow one: Q1 = 5, Q3 = 6, the high fence at 7.5")
assert_equal(split_outliers([1.0, 1.0, 1.0, 1.0], k=0.0), ([1.0, 1.0, 1.0, 1.0], []), "IQR 0, k = 0: equal samples are kept")
_m = Measurement(1, [1.0, 1.1, 0.9, 1.0, 9.0])
assert_equal(_m.outliers, [9.0], "Measurement.outliers of 1.0, 1.1, 0.9, 1.0, 9.0")
print(f"✓ split_outliers: {len(_out)} of {len(_xs)} samples beyond the fences: {_out}")

# %% [markdown]
# ## 5. The timer: one block, and the refusals
#
# `Timer(stmt, label=..., sub_label=..., description=..., timer=time.perf_counter)` mirrors
# `torch.utils.benchmark.Timer`, with one difference: `stmt` is a Python callable (torch's is
# a string of code plus `globals`). Like torch's, the clock is an argument: any function
# that returns seconds. That is what lets the checks below run the harness on a **fake
# clock** that each fake workload advances by a known amount.
#
# Everything rests on `_timeit(number)`: read the clock, call the workload `number` times,
# read it again, return the difference. And here the harness must refuse to produce a number
# that does not measure the workload:
#
# - the workload **raises**: the error is the result; a time up to the exception is not;
# - the workload **returns without running**: a function that `yield`s returns a generator
#   at once and does none of its work (an `async def` returns a coroutine; on a GPU, a kernel
#   launch returns before the kernel ran, so a GPU timing must synchronise before it reads
#   the clock);
# - the clock **did not advance** (or is not a number): nothing was timed, whatever ran.
#
# In each case raise `BenchmarkError`, never return a time.
#
# <details><summary>Hint 1</summary>
#
# How does Python let you catch any error from the workload and raise your own with the
# original attached (so the traceback still shows where it came from)?
# </details>
#
# <details><summary>Hint 2</summary>
#
# The `types` module names the type of a generator and of a coroutine. A coroutine that is
# never awaited warns when it is garbage-collected; close it before you raise.
# </details>
#
# <details><summary>The approach</summary>
#
# The clock reads bracket the calls and nothing else; each refusal above is a question you
# can only ask at one moment (during a call, about what a call returned, or after the
# last clock read). Where does each go, so that no refusal slows the calls it times? And
# what must the error carry so that its traceback still shows the workload's own error?
# </details>

# %% nbgrader={"grade": false, "grade_id": "timer-timeit", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
class Timer:
    """Times a callable, like torch.utils.benchmark.Timer (whose stmt is a string of code).

    Timer(stmt, label=None, sub_label=None, description=None, timer=time.perf_counter,
    num_threads=1): `timer` is the clock, a function returning seconds (inject a fake one in
    tests); `num_threads` is how many threads BLAS and numba may use while timeit,
    blocked_autorange and adaptive_autorange measure (torch's Timer sets torch's the same
    way), and it is recorded in the Measurement.
    """

    def __init__(self, stmt, label=None, sub_label=None, description=None, timer=time.perf_counter,
                 num_threads=1):
        if not callable(stmt):
            raise TypeError(f"Timer: stmt must be a callable (torch's Timer takes a string of code), "
                            f"got {type(stmt).__name__}")
        self._stmt, self._timer = stmt, timer
        self.label = label if label is not None else getattr(stmt, "__name__", None)
        self.sub_label, self.description, self.num_threads = sub_label, description, num_threads

    @property
    def title(self):
        return _title(self)

    def _timeit(self, number):
        """Seconds (by self._timer) that `number` calls of the workload took, as one float.

        Contract: `number` >= 1 (checked for you). Errors, each a BenchmarkError whose message
        names the workload (`self.title`): the workload raised (the message names the error's
        type and text; chain the original exception); it returned a generator or a coroutine,
        so its work never ran (the message names which of the two); the clock did not advance,
        i.e. the elapsed time is not a finite number > 0 (the message says the clock did not
        advance and gives the elapsed time).
        """
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"Timer._timeit: number must be a positive int, got {number!r}")
        # Idea: a number is reported only if the workload really ran, and the clock saw it.
        ### BEGIN SOLUTION
        start = self._timer()
        for _ in range(number):
            try:
                out = self._stmt()
            except Exception as exc:
                raise BenchmarkError(f"{self.title}: the workload raised {type(exc).__name__}: {exc}; "
                                     f"no time is reported") from exc
            if isinstance(out, (types.GeneratorType, types.CoroutineType)):
                out.close()
                raise BenchmarkError(f"{self.title}: the workload returned a {type(out).__name__} without "
                                     f"running it, so nothing was timed (call list() on it or await it)")
        elapsed = self._timer() - start
        if not (isinstance(elapsed, (int, float)) and math.isfinite(elapsed) and elapsed > 0):
            raise BenchmarkError(f"{self.title}: the clock did not advance ({elapsed!r} s for {number} "
                                 f"run(s)); nothing was timed")
        return float(elapsed)
        ### END SOLUTION


# %% [markdown]
# The checks use a fake clock: `_FakeClock()` returns its `now`; a `_FakeWork(clock,
# durations)` is a workload that advances it by the next of its durations on each call, so
# the harness's arithmetic can be checked exactly, on any machine.

# %%
class _FakeClock:
    """Fake seconds that only the fake workloads advance; it counts its reads, and refuses a
    ten-thousandth one (a loop that never stops would otherwise hang the check; no check
    here reads it more than a few hundred times)."""

    def __init__(self):
        self.now, self.reads = 0.0, 0

    def __call__(self):
        self.reads += 1
        if self.reads > 10_000:
            raise RuntimeError("the fake clock was read 10,000 times: a loop that never stops? "
                               "(what ends it when the measurement never gets confident?)")
        return self.now


class _FakeWork:
    """A workload that 'takes' durations[i] seconds of fake time on its i-th call."""

    def __init__(self, clock, durations, name="fake"):
        self.clock, self.durations, self.calls, self.__name__ = clock, list(durations), 0, name

    def __call__(self):
        self.clock.now += self.durations[self.calls % len(self.durations)]
        self.calls += 1


# %% nbgrader={"grade": true, "grade_id": "test-timer-timeit", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_clk = _FakeClock()
_work = _FakeWork(_clk, [0.5, 0.25, 0.25])
_t = Timer(_work, label="fake", timer=_clk)
assert_close(_t._timeit(3), 1.0, rtol=1e-12, what="_timeit(3) of runs taking 0.5, 0.25, 0.25 s (fake clock)")
assert_equal(_work.calls, 3, "the workload ran exactly 3 times")
_reads = _clk.reads
_t._timeit(100)
assert_equal(_clk.reads - _reads, 2, "clock reads for a block of 100 runs")


def _broken():
    raise KeyError("missing weight")


def _lazy():
    yield sum(range(10 ** 6))          # a generator function: calling it runs nothing


_e = assert_raises(BenchmarkError, Timer(_broken, label="broken")._timeit, 1, match="KeyError")
check(isinstance(_e.__cause__, KeyError), "the workload's own error is chained (raise ... from ...)",
      got=repr(_e.__cause__), expected="KeyError('missing weight')")
assert_raises(BenchmarkError, Timer(_lazy, label="lazy")._timeit, 1, match="generator")


async def _not_awaited():
    return 1


assert_raises(BenchmarkError, Timer(_not_awaited, label="async")._timeit, 1, match="coroutine")
_frozen = _FakeClock()
assert_raises(BenchmarkError, Timer(lambda: None, label="frozen", timer=_frozen)._timeit, 5, match="clock")
_inf_clock = iter([0.0, float("inf")])
assert_raises(BenchmarkError, Timer(lambda: None, label="inf", timer=lambda: next(_inf_clock))._timeit, 1,
              match="clock", what="a clock that jumps to inf")
_nan_clock = iter([0.0, float("nan")])
assert_raises(BenchmarkError, Timer(lambda: None, label="nan", timer=lambda: next(_nan_clock))._timeit, 1,
              match="clock")
print(f"✓ Timer._timeit: 3 fake runs = {_t._timeit(3)} s; refused: a raise, a generator, "
      f"a clock that does not move")

# %% [markdown]
# ## 6. How many blocks? Warm-up and the stopping rule
#
# Two questions remain: how many runs per block, and how many blocks. The block size is
# provided (`_estimate_block_size`, torch's rule: grow the block tenfold until it is long
# compared with the clock's own cost). `timeit(number)` and `blocked_autorange` are provided
# too (cells below). Write the adaptive one, after torch's `adaptive_autorange` (two
# differences, both deliberate: torch has no `warmup` argument, its block-size estimate
# being the warm-up, and it tests the budget after each block, so it always times one and
# reads `max_run_time=0` as no budget; ours warms up on purpose and refuses an empty budget):
#
# 1. **warm-up**: the first calls of a workload pay one-off costs (imports, allocation, caches
#    filled, code compiled by numba). `warmup` untimed calls come first and never reach the
#    result. (They go through `_timeit(1)`, so a workload that raises is refused before any
#    timing.)
# 2. **the stopping rule** is yours to design. The goal, torch's: time blocks until their spread
#    is small (IQR / median of the per-run times below `threshold`: `meets_confidence`), and
#    never more than a budget of `max_run_time` seconds of timed blocks, however noisy the
#    workload. Two more conditions guard against stopping on too little evidence: at least
#    `MIN_BLOCKS` blocks, and at least `min_run_time` seconds of them.
#
# Before you write the loop, answer these on paper:
#
# - The loop has two ways out. At which moment can each be decided: before a block is timed,
#   or after?
# - `max_run_time=0`: how many blocks should run, and what should the caller get? (Your
#   `_summarize` has an opinion.)
# - A workload that takes 3 s per block with `max_run_time=10`: how many blocks? Does the
#   last one overshoot the budget, and is that acceptable?
#
# <details><summary>Hint 1</summary>
#
# What is the smallest number of samples for which IQR / median tells you anything? What
# does the budget count: the wall time of the whole call, or the time of the timed blocks?
# </details>
#
# <details><summary>Hint 2</summary>
#
# How do you ask "are the blocks so far confident?" without computing a quantile yourself?
# Which class already knows how?
# </details>
#
# <details><summary>Hint 3 (the design, if you are stuck)</summary>
#
# A budget of zero must time nothing, so the budget is tested before a block; confidence
# needs the block just timed, so it is tested after one.
# </details>

# %% nbgrader={"grade": false, "grade_id": "adaptive-autorange", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0, warmup=1):
    """Time blocks until IQR/median < threshold (or the budget is spent): a Measurement.

    Contract: `warmup` untimed calls first (through self._timeit(1)), then blocks of
    number = self._estimate_block_size() runs each (self._timeit(number)). Returns
    self._measurement(number, raw_times) of the fewest blocks that are confident: >=
    MIN_BLOCKS blocks, raw times adding up to >= min_run_time, and meets_confidence(threshold).
    If the budget runs out first, the blocks are those started while the raw times so far
    added up to less than max_run_time.
    Errors: BenchmarkError from _timeit (the workload did not run) and from Measurement (no
    block fitted in the budget).
    """
    # Idea: measure until the spread says the median is known, within a time budget.
    ### BEGIN SOLUTION
    for _ in range(warmup):
        self._timeit(1)
    number = self._estimate_block_size()
    times, total = [], 0.0
    while total < max_run_time:
        times.append(self._timeit(number))
        total += times[-1]
        if (len(times) >= MIN_BLOCKS and total >= min_run_time
                and Measurement(number, times).meets_confidence(threshold)):
            break
    return self._measurement(number, times)
    ### END SOLUTION


Timer.adaptive_autorange = adaptive_autorange

# %% [markdown]
# The provided parts of `Timer`: the block size, the Measurement with its labels and the
# environment record (section 10), torch's two simpler entry points, and the thread limit:
# all three entry points measure with BLAS and numba pinned to the Timer's `num_threads`
# (one by default), so that a machine's other load slows every workload alike. `timeit(number)` is
# one warm-up call and one block; `blocked_autorange(min_run_time)` runs blocks until
# `min_run_time` is spent, whatever the spread: your loop with an infinite threshold.

# %%
#| export
def _clock_overhead(timer):
    """Median seconds between two back-to-back reads of the clock (0 for a fake clock)."""
    reads = []
    for _ in range(5):
        a = timer()
        reads.append(timer() - a)
    return sorted(reads)[2]


def _estimate_block_size(self, min_run_time=0.05):
    """Runs per block (torch's rule): grow tenfold until a block takes >= min_run_time/1000
    seconds and the clock's own cost is <= 1e-4 of it, or a block takes > min_run_time."""
    overhead, number = _clock_overhead(self._timer), 1
    while True:
        taken = self._timeit(number)
        if (taken >= min_run_time / 1000 and overhead <= 1e-4 * taken) or taken > min_run_time:
            return number
        if number * 10 > 2 ** 31 - 1:
            return number
        number *= 10


def _measurement(self, number, raw_times):
    return Measurement(number, raw_times, label=self.label, sub_label=self.sub_label,
                       description=self.description, num_threads=self.num_threads,
                       metadata={"environment": environment()})


def timeit(self, number=1000):
    """One warm-up call, then one block of `number` runs (torch: Timer.timeit)."""
    self._timeit(1)
    return self._measurement(number, [self._timeit(number)])


def blocked_autorange(self, min_run_time=0.2, warmup=1):
    """Blocks until their total reaches min_run_time (and MIN_BLOCKS), whatever the spread."""
    return self.adaptive_autorange(math.inf, min_run_time=min_run_time, max_run_time=math.inf, warmup=warmup)


def _with_threads(method):
    """`method` run with BLAS and numba limited to the Timer's num_threads."""
    @functools.wraps(method)
    def pinned(self, *args, **kwargs):
        with pinned_threads(self.num_threads):
            return method(self, *args, **kwargs)
    return pinned


def _one_thread(function):
    """`function` run with BLAS and numba limited to one thread (a Timer's default)."""
    @functools.wraps(function)
    def pinned(*args, **kwargs):
        with pinned_threads(1):
            return function(*args, **kwargs)
    return pinned


Timer._estimate_block_size = _estimate_block_size
Timer._measurement = _measurement
Timer.adaptive_autorange = _with_threads(adaptive_autorange)
Timer.timeit = _with_threads(timeit)
Timer.blocked_autorange = _with_threads(blocked_autorange)
Timer.__repr__ = lambda self: f"Timer({self.title})"

# %% [markdown]
# The environment record is section 10's; the Measurement above needs it, so here it is,
# provided: everything about the machine and the libraries that can change a timing.

# %%
#| export
def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _physical_cores():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    cores, phys = set(), None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "physical id":
            phys = value.strip()
        elif key.strip() == "core id":
            cores.add((phys, value.strip()))
    return len(cores) or None


def _version(name):
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _blas():
    import numpy as np
    try:
        deps = np.show_config(mode="dicts").get("Build Dependencies", {})
        blas = deps.get("blas", {})
        return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: no dict mode
        return "unknown"


_ENV = None


def environment(refresh=False):
    """Where a number was measured: CPU, cores, thread settings, library versions, BLAS.
    A dict (computed once per process unless refresh=True); torch's threads if it is loaded."""
    global _ENV
    if _ENV is None or refresh:
        threads = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                  "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        clock = time.get_clock_info("perf_counter")
        _ENV = {"python": platform.python_version(), "platform": platform.platform(),
                "cpu": _cpu_model(), "logical_cores": os.cpu_count(), "physical_cores": _physical_cores(),
                "usable_cores": usable, "thread_env": threads,
                "numpy": _version("numpy"), "numba": _version("numba"), "torch": _version("torch"),
                "blas": _blas(), "clock": f"{clock.implementation}, resolution {clock.resolution:g} s"}
    env = dict(_ENV)
    torch = sys.modules.get("torch")
    env["torch_threads"] = torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else None
    return env


# %% nbgrader={"grade": true, "grade_id": "test-adaptive-autorange", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
_clk = _FakeClock()
# call 0: the warm-up (slow: cold); call 1: the block-size estimate; then the timed blocks
_work = _FakeWork(_clk, [5.0, 0.01] + [0.01, 0.03, 0.01, 0.01] + [0.01] * 50)
_m = Timer(_work, label="fake", timer=_clk).adaptive_autorange(0.1, min_run_time=0.05, max_run_time=10.0)
assert_equal(_m.number_per_run, 1, "block size for 10 ms runs (torch's estimate)")
check(5.0 not in _m.raw_times, "the warm-up call (5 s) is not among the raw times", got=_m.raw_times)
assert_close(_m.raw_times, [0.01, 0.03, 0.01, 0.01, 0.01], rtol=1e-12,
             what="the timed blocks of a workload whose runs take 10, 30, 10, 10, 10 ms")
_clk = _FakeClock()
_m = Timer(_FakeWork(_clk, [0.02]), timer=_clk).adaptive_autorange(0.1, min_run_time=0.05)
assert_equal(len(_m.raw_times), MIN_BLOCKS, "identical 20 ms runs, min_run_time = 0.05 s: how many blocks")
_clk = _FakeClock()
_m = Timer(_FakeWork(_clk, [2.0 ** -10]), timer=_clk).adaptive_autorange(0.1, min_run_time=2.0 ** -4)
assert_equal(len(_m.raw_times), 64, "identical runs of 1/1024 s, min_run_time = 1/16 s: how many blocks")
_clk = _FakeClock()
_noisy = _FakeWork(_clk, [1.0, 1.0] + [1.0, 2.0, 3.0] * 20)          # never confident: the budget stops it
_m2 = Timer(_noisy, timer=_clk).adaptive_autorange(0.01, min_run_time=0.05, max_run_time=10.0)
assert_equal(_m2.raw_times, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
             "runs of 1, 2, 3 s in turn, threshold 0.01, max_run_time = 10 s: the blocks timed")
check(_m2.has_warnings, "a budget-stopped, noisy measurement carries a warning", got=_m2.iqr / _m2.median)
_clk = _FakeClock()
_cold = _FakeWork(_clk, [5.0] + [1e-6] * 2000)        # the first call compiles: 5 s; then 1 µs a run
_m3 = Timer(_cold, timer=_clk).adaptive_autorange(0.1, min_run_time=0.0)
assert_equal(_m3.number_per_run, 100, "a workload whose first call takes 5 s, then 1 µs a run: "
             "number_per_run")
_clk = _FakeClock()
_w3 = _FakeWork(_clk, [0.02])
Timer(_w3, timer=_clk).adaptive_autorange(0.1, min_run_time=0.0, warmup=3)
assert_equal(_w3.calls, 3 + 1 + MIN_BLOCKS, "warmup=3 with identical 20 ms runs: 3 warm-up calls, 1 for the "
             "block-size estimate, then MIN_BLOCKS blocks of 1 run")
assert_raises(BenchmarkError, Timer(_FakeWork(_clk, [0.01]), timer=_clk).adaptive_autorange, max_run_time=0.0,
              what="adaptive_autorange(max_run_time=0.0)")
assert_raises(BenchmarkError, Timer(_broken, label="broken").adaptive_autorange, match="broken")
print(f"✓ adaptive_autorange: 5 blocks on the fake clock; the noisy one stopped by the budget after "
      f"{len(_m2.raw_times)} blocks, IQR/median = {_m2.iqr / _m2.median:.2f}")

# %% [markdown]
# Now a real one: a 128 x 128 float32 matmul (numpy's BLAS), on the real clock.

# %%
_a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
_m = Timer(lambda: _a @ _a, label="matmul", sub_label="128x128 float32", description="numpy").adaptive_autorange(
    max_run_time=1.0)
print(_m)
print(f"outliers beyond Tukey's fences: {len(_m.outliers)} of {len(_m.times)} blocks"
      + (" (fences from so few blocks are rough: each quartile rests on one or two samples)"
         if len(_m.times) < 20 else ""))

# %% [markdown]
# The printout has torch's layout. Its IQR line says how far the median can be trusted; on a
# busy machine the warning line appears. The number depends on this machine's BLAS, its
# threads and its load (section 10 records them).
#
# **What the rule says, and what it does not.** IQR / median is the spread of the runs, a
# property of the workload on this machine: more blocks estimate it better, but do not
# shrink it. A workload whose runs truly vary by 15% never meets a threshold of 0.1 and
# always spends its budget, with a warning. How well the *median* is known is another
# number, and that one does shrink as blocks are added (roughly as $1/\sqrt{n}$): a
# confidence interval for the median (by bootstrap, or from order statistics) states it,
# and harnesses such as pyperf and criterion report one. torch's rule takes a small spread
# as the sign that nothing disturbed the runs.
#
# ## 7. Two versions: the paired comparison
#
# The question a benchmark usually answers is not "how long does A take?" but "how much
# faster is A than B?". The naive way measures A (a median of many runs), then B, and
# divides. But the machine's speed **drifts**: another job starts, the CPU heats and lowers
# its clock, a laptop goes on battery. If the drift falls between the two measurements, it
# lands in the ratio as if it were a difference between A and B.
#
# Two design choices decide whether drift lands in the ratio: **the order of the calls** and
# **the statistic** that turns many timings into one ratio. Work them out on this table, five
# rounds measured on a drifting machine (seconds; in round 5 something hit A alone):
#
# | round | 1 | 2 | 3 | 4 | 5 |
# |---|---|---|---|---|---|
# | $a_i$ | 2 | 6 | 4 | 2 | 30 |
# | $b_i$ | 1 | 3 | 1 | 1 | 1 |
#
# - If the $a_i$ had all been measured first and the $b_i$ an hour later, which column pairs
#   would still mean anything? What must the order of calls be for the pairs to share a moment?
# - Compute four candidate estimates of A / B: $\operatorname{median}(a) / \operatorname{median}(b)$,
#   $\sum a / \sum b$, the mean of the per-pair ratios $a_i / b_i$, and their median. Which one
#   would you report, and what does each of the others get wrong here?
#
# <details><summary>Check your answer</summary>
#
# Interleave: A, B, A, B, ... Each round times A and then B right after it, so whatever the
# machine was doing in that moment slows both, and the per-pair ratio $r_i = a_i / b_i$
# cancels it. The ratios are 2, 2, 4, 2, 30. Their median, 2, is the estimate; their
# quartiles give its spread:
#
# $$\widehat{a/b} = \operatorname{median}_i \frac{a_i}{b_i}, \qquad \text{spread: } Q_{0.25}(r),\ Q_{0.75}(r).$$
#
# $\operatorname{median}(a) / \operatorname{median}(b) = 4 / 1 = 4$ throws the pairing away: the
# two medians may come from rounds far apart in time. $\sum a / \sum b = 44 / 7 \approx 6.3$
# and the mean ratio, 8, are dragged by round 5's single accident. The median of ratios keeps
# each round's noise in its own ratio, where the median can discard it.
# </details>
#
# One caveat: in every round A runs first. If running A helps B (A fills a cache B reads,
# or warms the CPU's clock), the ratio carries that order effect; harnesses that worry about
# it alternate the order (A B, B A, A B, ...). Ours keeps A B, the simplest interleaving.
#
# `compare(a, b, rounds=..., number=..., warmup=..., timer=...)` returns a
# `PairedComparison`: `ratio` (a / b: above 1 means A is slower), `low` and `high` (the
# quartiles of the ratios), the `ratios` themselves, and a `Measurement` of each side. The
# provided part checks the arguments and makes the two `Timer`s; the warm-up, the block size
# (when `number` is None) and the rounds are yours. Which comes first, the warm-up or the
# block-size estimate, and why does it matter for a workload whose first call compiles it?
#
# <details><summary>Hint</summary>
#
# The warm-up is per workload and untimed, like `adaptive_autorange`'s. Each timing goes
# through `_timeit`, so a workload that does not run is refused here too.
# </details>
#
# <details><summary>The approach</summary>
#
# The pairing is the whole design: a ratio is only as good as the moment its two times
# share, so decide what one round is and what it records. The warm-up serves both
# workloads, untimed. The statistics are ones you already have; each side's Measurement
# comes from its own raw times, through the provided builder.
# </details>

# %% nbgrader={"grade": false, "grade_id": "compare", "locked": false, "schema_version": 3, "solution": true, "task": false}
#| export
@dataclass(repr=False)
class PairedComparison:
    """A / B from interleaved rounds: the estimate, its spread, and each side's timings."""
    ratio: float
    low: float
    high: float
    ratios: tuple
    a: Measurement
    b: Measurement

    def __repr__(self):
        return (f"{self.a.label}: {self.a.sub_label} / {self.b.sub_label} = {self.ratio:.3f}x "
                f"(IQR of the per-pair ratios {self.low:.3f} to {self.high:.3f}, {len(self.ratios)} pairs)")


def compare(a, b, *, rounds=21, number=None, warmup=1, timer=time.perf_counter, label=None,
            a_label=None, b_label=None):
    """Time A and B interleaved (A B A B ...) and return their ratio a / b.

    Contract: `a`, `b` callables; `rounds` >= 1 pairs; `number` runs per block (None: the
    smaller of the two Timers' block-size estimates, used for both); `warmup` untimed calls of
    each (A then B, per warm-up round); `timer` the clock for both. Each round times a block
    of A, then a block of B (their Timers' _timeit). Returns a PairedComparison: ratio = the
    estimate the table above argues for, low and high = the 0.25 and 0.75 quantiles of the
    same per-pair numbers, ratios = the per-pair ratios a_i / b_i in round order, a and b =
    Measurements of each side's blocks.
    Errors: ValueError for rounds < 1 (checked for you); BenchmarkError from _timeit.
    """
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"compare: rounds must be a positive int (pairs of timings), got {rounds!r}")
    a_label, b_label = a_label or getattr(a, "__name__", "A"), b_label or getattr(b, "__name__", "B")
    label = label or f"{a_label} vs {b_label}"
    ta, tb = Timer(a, label, a_label, timer=timer), Timer(b, label, b_label, timer=timer)
    # Idea: A and B take turns, so the machine's noise of each moment hits both.
    ### BEGIN SOLUTION
    for _ in range(warmup):
        ta._timeit(1)
        tb._timeit(1)
    if number is None:
        number = min(ta._estimate_block_size(), tb._estimate_block_size())
    a_times, b_times, ratios = [], [], []
    for _ in range(rounds):
        a_times.append(ta._timeit(number))
        b_times.append(tb._timeit(number))
        ratios.append(a_times[-1] / b_times[-1])
    return PairedComparison(ratio=quantile(ratios, 0.5), low=quantile(ratios, 0.25),
                            high=quantile(ratios, 0.75), ratios=tuple(ratios),
                            a=ta._measurement(number, a_times), b=tb._measurement(number, b_times))
    ### END SOLUTION


compare = _one_thread(compare)  # BLAS and numba pinned to one thread, as in the Timer's entry points


# %% [markdown]
# The check runs two fake workloads on one fake machine: the $i$-th call made on it, by
# either workload, takes `durations[i]` seconds, so the order of the calls decides which
# workload gets which duration (as the moment of a real call decides how busy the machine is).

# %%
class _FakeMachine:
    def __init__(self, durations):
        self.clock, self.durations, self.calls, self.log = _FakeClock(), list(durations), 0, []

    def workload(self, name):
        def run():
            self.clock.now += self.durations[self.calls % len(self.durations)]
            self.calls += 1
            self.log.append(name)
        run.__name__ = name
        return run


# %% nbgrader={"grade": true, "grade_id": "test-compare", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
# warm-up (A, B), then five rounds; the machine's load changes between rounds, and in round 5
# something hits A alone.
_fm = _FakeMachine([9.0, 9.0,  2.0, 1.0,  6.0, 3.0,  4.0, 1.0,  2.0, 1.0,  30.0, 1.0])
_r = compare(_fm.workload("A"), _fm.workload("B"), rounds=5, number=1, timer=_fm.clock)
assert_equal(_fm.log, ["A", "B"] * 6, "the calls, in order: one warm-up each, then A B A B ... (interleaved)")
assert_close(_r.ratios, (2.0, 2.0, 4.0, 2.0, 30.0), rtol=1e-12, what="the result's ratios, in round order")
assert_close(_r.ratio, 2.0, rtol=1e-12, what="compare's estimate of time(A) / time(B) on the five rounds above")
assert_close((_r.low, _r.high), (2.0, 4.0), rtol=1e-12, what="(low, high) on the five rounds above")
assert_close(_r.a.raw_times, [2.0, 6.0, 4.0, 2.0, 30.0], rtol=1e-12, what="A's Measurement: its five blocks")
assert_close(_r.b.median, 1.0, rtol=1e-12, what="B's median")
assert_equal((_r.a.label, _r.a.sub_label, "environment" in _r.a.metadata), ("A vs B", "A", True),
             "A's Measurement carries its labels and the environment (built by its Timer's _measurement)")
_fm = _FakeMachine([1.0, 1.0] + [3.0, 1.5] * 3 + [30.0, 15.0] * 3)     # the machine slows down 10x midway
_r = compare(_fm.workload("fast"), _fm.workload("slow"), rounds=6, number=1, timer=_fm.clock)
assert_close(_r.ratio, 2.0, rtol=1e-12, what="A takes twice B's time in every round while the machine slows 10x midway")
assert_raises(BenchmarkError, compare, _broken, lambda: None, rounds=3, match="broken")
_fm2 = _FakeMachine([1.0])
compare(_fm2.workload("A"), _fm2.workload("B"), rounds=2, number=1, warmup=2, timer=_fm2.clock)
assert_equal(_fm2.log, ["A", "B"] * 4, "warmup=2, rounds=2: the calls in order (each warm-up round is A then B)")
_clk2 = _FakeClock()
_quick, _slow = _FakeWork(_clk2, [1e-6], "quick"), _FakeWork(_clk2, [1e-4], "slow")
_rb = compare(_quick, _slow, rounds=2, timer=_clk2)
assert_equal((_rb.a.number_per_run, _rb.b.number_per_run), (1, 1),
             "a 1 µs workload against a 100 µs one: each side's number_per_run")
_clk3 = _FakeClock()
_rc = compare(_FakeWork(_clk3, [5.0] + [1e-6] * 2000, "cold A"), _FakeWork(_clk3, [5.0] + [1e-6] * 2000, "cold B"),
              rounds=2, timer=_clk3)
assert_equal(_rc.a.number_per_run, 100, "two workloads whose first call takes 5 s, then 1 µs a run: "
             "number_per_run")
print(f"✓ compare: {_r}")

# %% [markdown]
# ## 8. Showing it: single timings against paired medians, on a noisy machine
#
# Time to test the claim with a measurement. A and B below are **the same function**, so the
# true ratio is exactly 1, and every estimate's distance from 1 is pure error. A background
# thread makes the machine drift on purpose: in bursts of 2 ms out of every 4 it runs a
# Python loop, which competes with our workload for the interpreter (only one thread runs
# Python at a time). With the interpreter's switch interval lowered from 5 ms to 0.1 ms for
# the experiment, the two threads take turns finely, so during a burst our workload runs at
# roughly half speed: a machine whose speed changes every 2 ms. Three ways to estimate
# A / B, each repeated 40 times:
#
# 1. **single timings**: one call of A, one call of B, divide;
# 2. **separate medians**: the median of 21 calls of A, then the median of 21 calls of B;
# 3. **paired**: your `compare(A, B, rounds=21, number=1)`.
#
# **Predict first.** Of the 40 single-timing estimates, how far is the worst from 1 (as a
# factor, e.g. 3 for an estimate of 3 or 1/3)? And the worst of the 40 paired ones?

# %%
predicted_worst_single = None   # your number: the worst factor away from 1, single timings
predicted_worst_paired = None   # your number: the same for compare(..., rounds=21)

# %%
def _same_work():
    return sum(i * i for i in range(2000))


class _BurstyNoise:
    """A background thread that runs Python in bursts of `on` seconds out of every `period`
    (with a short switch interval, restored on exit, so that the threads take turns finely)."""

    def __init__(self, on=0.002, period=0.004, switch_interval=1e-4):
        self.on, self.period, self.switch = on, period, switch_interval

    def _run(self):
        while not self._stop.is_set():
            if time.perf_counter() % self.period < self.on:
                _x = 0
                for _ in range(500):
                    _x += 1
            else:
                time.sleep(0.0002)

    def __enter__(self):
        self._old_switch = sys.getswitchinterval()
        sys.setswitchinterval(self.switch)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._old_switch)


def _one(fn):
    return time_samples(fn, repeats=1, warmup=0)[0]


_A = _B = _same_work
with _BurstyNoise():
    _single = [_one(_A) / _one(_B) for _ in range(40)]
    _separate = [quantile(time_samples(_A, 21, 0), 0.5) / quantile(time_samples(_B, 21, 0), 0.5) for _ in range(40)]
    _paired = [compare(_A, _B, rounds=21, number=1, warmup=0).ratio for _ in range(40)]
_quiet = quantile(time_samples(_same_work, 51, 1), 0.5)

# %%
def _worst(estimates):
    return max(max(e, 1 / e) for e in estimates)


print(f"one call of the workload takes {_quiet * 1e6:.0f} µs (median, no noise); the true ratio is 1")
print(f"{'estimator':<20}{'median':>8}{'IQR':>16}{'worst factor':>14}{'off by > 10%':>14}")
for _name, _est in [("single timings", _single), ("separate medians", _separate), ("paired (compare)", _paired)]:
    _off = sum(abs(e - 1) > 0.1 for e in _est)
    print(f"{_name:<20}{quantile(_est, 0.5):>8.3f}   {quantile(_est, 0.25):.3f} to {quantile(_est, 0.75):.3f}"
          f"{_worst(_est):>12.2f}x{_off:>10d} of {len(_est)}")
for _name, _pred, _est in [("single", predicted_worst_single, _single), ("paired", predicted_worst_paired, _paired)]:
    print(f"{_name}: measured worst {_worst(_est):.2f}x;",
          "no prediction written" if _pred is None else f"you predicted {_pred}x")

fig, ax = plt.subplots(figsize=(8.5, 3.6))
for _i, (_name, _est) in enumerate([("single timings", _single), ("separate medians", _separate),
                                    ("paired", _paired)]):
    _jitter = np.random.default_rng(_i).uniform(-0.15, 0.15, len(_est))
    ax.scatter(_est, _i + _jitter, s=14, alpha=0.7)
    ax.text(_worst(_est) * 1.15, _i, f"worst {_worst(_est):.2f}x", va="center", fontsize=9)
ax.set_xscale("log")
ax.axvline(1.0, color="black", lw=1)
ax.set_yticks(range(3), ["single timings", "separate medians\n(21 runs each)", "paired: compare\n(21 rounds)"])
ax.set_xlabel("estimated A / B (log scale; A and B are the same function, the truth is 1)")
ax.set_title("40 estimates of a ratio whose true value is 1, on a machine that drifts every 2 ms", fontsize=10)
_lo = min(min(_single), min(_separate), min(_paired))
ax.set_xlim(_lo / 1.5, _worst(_single) * 4)
fig.tight_layout()
plt.show()

# %% [markdown]
# The expected shape: the single timings scatter widely (one call that is interrupted, by
# the noise thread or by anything else on the machine, takes many times longer than its
# partner); the separate medians are tighter at their worst, less often in between, and
# they wander, because A's 21 calls
# can fall mostly in a burst and B's after it, in a quiet spell (the 2x slowdown of a
# burst, and more when the machine's other load adds to it); the paired estimates sit closest to 1, because each pair shares its moment and
# the median discards the few pairs a burst split. How wide each cloud is depends on
# this machine: its number of cores, its other load, and how the operating system schedules
# the two threads. On a quiet machine without the noise thread all three are closer to 1,
# and the order is usually the same.
#
# ## 9. The systems look: the clock itself, and a FLOP rate
#
# A harness has a floor: reading the clock costs time and the clock ticks in steps. Python's
# `time.perf_counter` reports its resolution (`time.get_clock_info`), but the **cost** of a
# call is best measured, with the harness itself: time the clock.
#
# **Predict first.** How many nanoseconds does one call of `time.perf_counter()` take?

# %%
predicted_clock_ns = None   # your number: nanoseconds per time.perf_counter() call

# %%
_m_clock = Timer(time.perf_counter, label="time.perf_counter()").adaptive_autorange(min_run_time=0.05,
                                                                                    max_run_time=1.0)
_info = time.get_clock_info("perf_counter")
print(f"one perf_counter() call: {_m_clock.median * 1e9:.0f} ns (IQR {_m_clock.iqr * 1e9:.0f} ns, "
      f"blocks of {_m_clock.number_per_run} calls); its reported resolution: {_info.resolution * 1e9:g} ns")
print("your prediction:", "none written" if predicted_clock_ns is None else f"{predicted_clock_ns} ns")

# %% [markdown]
# Expect somewhere between tens and a few hundred nanoseconds (a Python call of a C function
# plus a read of the system clock): that is why a function of a few microseconds is timed in
# blocks of hundreds of runs, where the two clock reads are a rounding error. The figure depends on the CPU, the operating system's clock
# source and whether it runs in a virtual machine (some virtual clocks are much slower).
#
# Now a FLOP rate. A float32 matmul of two $n \times n$ matrices costs $2n^3$ FLOPs (module 14).
# **Predict first**: how many GFLOP/s does numpy reach at $n = 256$ on this machine, on one
# BLAS thread (the Timer pins it)? And how much slower is the same product through a tinytorch `Tensor`
# at $n = 32$, where the framework's per-op overhead (dispatch, checks, a new Tensor)
# competes with very little arithmetic?

# %%
predicted_gflops = None        # your number: GFLOP/s of a 256 x 256 float32 matmul in numpy
predicted_overhead_ratio = None  # your number: time(tinytorch 32x32 matmul) / time(numpy)

# %%
_n = 256
_x = np.random.default_rng(1).standard_normal((_n, _n)).astype(np.float32)
_m_mm = Timer(lambda: _x @ _x, label="matmul", sub_label=f"{_n}x{_n}", description="numpy").adaptive_autorange(
    min_run_time=0.1, max_run_time=1.0)
_gflops = 2 * _n ** 3 / _m_mm.median / 1e9
print(f"numpy {_n}x{_n} float32 matmul: median {_m_mm.median * 1e6:.0f} µs -> {_gflops:.1f} GFLOP/s "
      f"(IQR/median {_m_mm.iqr / _m_mm.median:.1%}); "
      + ("no prediction written" if predicted_gflops is None else f"you predicted {predicted_gflops}"))
_s = np.random.default_rng(2).standard_normal((32, 32)).astype(np.float32)
_ts = tinytorch.tensor(_s)
_r_tt = compare(lambda: _ts @ _ts, lambda: _s @ _s, rounds=21, label="matmul 32x32",
                a_label="tinytorch", b_label="numpy")
print(_r_tt)
print("your prediction:", "none written" if predicted_overhead_ratio is None else f"{predicted_overhead_ratio}x")
_tx = tinytorch.tensor(_x)
print(compare(lambda: _tx @ _tx, lambda: _x @ _x, rounds=21, label=f"matmul {_n}x{_n}",
              a_label="tinytorch", b_label="numpy"))

# %% [markdown]
# Numpy's figure depends on the BLAS (OpenBLAS, MKL, Accelerate), on how many threads it may
# use (here one: the Timer pins it), on the CPU's vector units and on the other load: a
# modern core reaches tens of GFLOP/s in float32 on one thread, and more with several. The ratio at
# $n = 32$ is mostly tinytorch's per-op overhead: the product itself takes a few microseconds
# in numpy, and every layer of Python around it shows. At $n = 256$ (the second line) the
# arithmetic dominates and the ratio is expected much closer to 1. All of these figures are
# what the machine did, this run.
#
# ## 10. Where it was measured, and the results table
#
# A timing without its environment cannot be reproduced or compared: "12 µs" on a laptop
# with 8 BLAS threads and "12 µs" on one core of a server are different claims. Every
# `Measurement` from a `Timer` carries `metadata["environment"]`: `environment()` (provided)
# reads the CPU model (from `/proc/cpuinfo`, or `platform`), the logical, physical and
# usable cores, the thread settings in the environment, the Python, numpy, numba and torch
# versions (None when one is not installed), numpy's BLAS, and the clock.

# %%
for _k, _v in environment().items():
    print(f"{_k:>15}: {_v}")

# %% [markdown]
# `Compare` (provided) prints measurements as a table, like `torch.utils.benchmark.Compare`:
# a block per `label`, a row per `sub_label`, a column per `description`; each cell is a
# median in one unit for the whole block, with its IQR / median beside it. A
# `PairedComparison` adds both of its sides.

# %%
#| export
def _expand(results):
    out = []
    for r in results:
        if isinstance(r, PairedComparison):
            out.extend([r.a, r.b])
        elif isinstance(r, Measurement):
            out.append(r)
        else:
            raise TypeError(f"Compare: expected Measurements or PairedComparisons, got {type(r).__name__}")
    return out


class Compare:
    """A results table (torch.utils.benchmark.Compare): per label, rows = sub_label,
    columns = description, cells = median (IQR / median)."""

    def __init__(self, results):
        self._results = _expand(results)

    def table(self):
        groups = {}
        for m in self._results:
            groups.setdefault(m.label or "", []).append(m)
        blocks = []
        for label, ms in groups.items():
            cols = list(dict.fromkeys(m.description or "" for m in ms))
            rows = list(dict.fromkeys(m.sub_label or "" for m in ms))
            unit, scale = _unit(min(m.median for m in ms))
            cell = {(m.sub_label or "", m.description or ""): f"{m.median / scale:.1f} (±{m.iqr / m.median:.0%})"
                    for m in ms}
            width = max([len(c) for c in cols] + [len(v) for v in cell.values()] + [8])
            rw = max([len(r) for r in rows] + [4])
            lines = [f"[{'-' * 8} {label} {'-' * 8}]",
                     " " * (rw + 2) + "".join(f" | {c or 'time':^{width}}" for c in cols)]
            for r in rows:
                lines.append(f"  {r:<{rw}}" + "".join(f" | {cell.get((r, c), ''):^{width}}" for c in cols))
            lines.append(f"Times are medians in {unit} per run; (±x%) is IQR / median.")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    __str__ = table

    def print(self):
        print(self.table())


# %% [markdown]
# And `plot` (provided): a box plot of each measurement's per-run times. The box is the IQR,
# the line in it the median, the whiskers reach the farthest samples inside Tukey's fences,
# and the dots beyond them are your `split_outliers`' outliers.

# %%
#| export
def plot(results, ax=None, title=None):
    """Horizontal box plots of the per-run times of Measurements (and PairedComparisons'
    two sides), whiskers to the farthest samples inside Tukey's fences (k = 1.5). Returns
    the matplotlib Figure."""
    import matplotlib.pyplot as plt

    ms = _expand(results)
    if not ms:
        raise BenchmarkError("plot: no measurements to draw")
    unit, scale = _unit(min(m.median for m in ms))
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.6 * len(ms) + 1.4))
    ax.boxplot([[t / scale for t in m.times] for m in ms], orientation="horizontal", whis=1.5, widths=0.6)
    ax.set_yticks(range(1, len(ms) + 1),
                  [" / ".join(str(p) for p in (m.sub_label, m.description) if p) or m.title for m in ms])
    medians = [m.median for m in ms]
    if max(medians) > 10 * min(medians):  # times of different sizes: a log axis shows each box
        ax.set_xscale("log")
    ax.set_xlabel(f"time per run ({unit}{', log scale' if max(medians) > 10 * min(medians) else ''})")
    ax.set_title(title or ", ".join(dict.fromkeys(str(m.label) for m in ms if m.label)) or "measurements",
                 fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


# %% nbgrader={"grade": true, "grade_id": "test-compare-table", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_fm = _FakeMachine([1e-3, 2e-3, 1e-3, 2e-3, 1.1e-3, 2e-3, 1e-3, 2.2e-3])
_r = compare(_fm.workload("fast"), _fm.workload("slow"), rounds=3, number=1, timer=_fm.clock, label="toy")
_rows = [Measurement(1, [1e-3, 1.2e-3], label="toy", sub_label="other", description="fake"), _r]
_text = Compare(_rows).table()
for _needle in ("toy", "fast", "slow", "other", "fake", "ms"):
    check(_needle in _text, f"the table shows {_needle!r}", got=_text)
check(f"{_r.b.median * 1e3:.1f}" in _text, "the slow side's median (in ms) is in the table", got=_text,
      expected=f"{_r.b.median * 1e3:.1f}")
_env = _r.a.metadata["environment"]
for _key in ("cpu", "logical_cores", "usable_cores", "thread_env", "numpy", "numba", "torch", "blas", "python"):
    check(_key in _env, f"the environment record has {_key!r}", got=sorted(_env))
print(_text)
print(f"✓ Compare: {len(_text.splitlines())} lines, every row; environment: {_env['cpu']}, "
      f"{_env['logical_cores']} logical cores")

# %% [markdown]
# The measurements of this notebook, together:

# %%
_m_tt = Measurement(_r_tt.a.number_per_run, _r_tt.a.raw_times, label="matmul", sub_label="32x32", description="tinytorch")
_m_np = Measurement(_r_tt.b.number_per_run, _r_tt.b.raw_times, label="matmul", sub_label="32x32", description="numpy")
_all = [_m_tt, _m_np, _m_mm]
Compare(_all).print()
plot(_all, title="matmul: per-run times (box: IQR; whiskers: the farthest samples inside Tukey's fences)")
plt.show()

# %% [markdown]
# ## 11. What PyTorch does
#
# `torch.utils.benchmark` is the harness this module mirrors:
#
# - `Timer(stmt="x @ x", globals={"x": x}, label=..., sub_label=..., description=...,
#   num_threads=1, timer=...)`: `stmt` is a string of code, compiled once, so the loop has
#   no Python call around the statement; `num_threads` sets torch's intra-op threads for
#   the run (ours pins BLAS's and numba's the same way, and records it). `timeit(number)`, `blocked_autorange(min_run_time)`
#   and `adaptive_autorange(threshold, min_run_time, max_run_time)` are the three entry
#   points you built; torch's block size rule is the one given here.
# - `Measurement`: `median`, `mean`, `iqr`, `times` (per run), `raw_times`, `number_per_run`,
#   `meets_confidence(threshold)`, and the same printout and warnings. Its quantiles are
#   `torch.quantile`, the interpolation your `quantile` does (checked below).
# - `Compare(results)` prints the table with `.print()`; `trim_significant_figures()` and
#   `colorize()` make it easier to read. `Timer.collect_callgrind()` counts instructions
#   instead of time: a measurement nearly free of noise, at the price of running under
#   Valgrind.
# - It has no paired comparison: a ratio of two Measurements is a ratio of separate medians.
#   For A/B decisions, interleave yourself, as `compare` does (tools such as `pyperf` and
#   Google Benchmark's `compare.py` run repetitions and statistical tests for the same reason).
# - On a GPU, a kernel launch returns before the kernel runs; torch's default timer calls
#   `torch.cuda.synchronize()` before it reads the clock when CUDA is available. A harness
#   that forgets it times the launches: your `_timeit`'s "returned without running" in
#   another form.

# %%
from tinytorch.utils.optional import optional_torch

torch = optional_torch()  # None when PyTorch is not installed

if torch is not None:
    from torch.utils.benchmark import Timer as TorchTimer
    from torch.utils.benchmark.utils.common import Measurement as TorchMeasurement, TaskSpec

    _raw = list(np.random.default_rng(3).exponential(1e-3, 25) + 1e-3)
    _ours = Measurement(7, _raw)
    _theirs = TorchMeasurement(7, _raw, TaskSpec("work()", "pass"))
    print(f"same raw times: median {_ours.median:.6e} (ours) vs {_theirs.median:.6e} (torch); "
          f"IQR {_ours.iqr:.6e} vs {_theirs.iqr:.6e}")
    _xt = torch.from_numpy(_x)
    _tm = TorchTimer("x @ x", globals={"x": _xt}, label="matmul", sub_label=f"{_n}x{_n}",
                     description="torch").blocked_autorange(min_run_time=0.1)
    print(f"{_n}x{_n} matmul: torch's Timer {_tm.median * 1e6:.0f} µs (torch.matmul, 1 thread: the Timer's "
          f"default num_threads), ours {_m_mm.median * 1e6:.0f} µs (numpy's BLAS, pinned to 1 thread)")

# %% [markdown]
# ## 12. Recap
#
# - A timing is a draw from a right-skewed distribution. Report the **median** and the
#   **IQR** (order statistics of the sorted samples, interpolated linearly),
#   not the mean (dragged by slow runs) or one timing.
# - Fast workloads are timed in **blocks**; the statistics are of the **per-run** times.
# - **Warm up** first; then the **stopping rule**: enough blocks for an IQR, at least the
#   minimum run time, and IQR / median below a threshold, or the budget is spent (and the
#   measurement says it is noisy).
# - **Outliers** are beyond Tukey's fences ($Q_1 - 1.5\,\text{IQR}$, $Q_3 + 1.5\,\text{IQR}$):
#   count them and show them; do not drop them to flatter a mean.
# - To compare A and B, **interleave** them and take the **median of the per-pair ratios**:
#   the machine's drift hits both sides of each pair and cancels. The measurement in
#   section 8 showed how much tighter it is than single timings.
# - **Never report a number for a workload that did not run**: it raised, it returned a
#   generator or coroutine, the clock did not move, or nothing was timed.
# - Record the **environment** beside every number.
#
# Module 20 uses this harness to benchmark each variant of a model; `tito bench` will use it
# to compare tinytorch with PyTorch. Run `tito test module 19` to check your work against the
# full test suite.

"""report_row: a row from measurements, or a ValueError; never a made-up number."""
import math

import numpy as np
import pytest

from tinytorch.capstone import report_row
from tinytorch.utils.benchmark import Measurement


@pytest.fixture
def M():
    """A Measurement (module 19) of 10 calls per run: per run 1, 2, 3, 4, 10 ms. A fixture, not
    a module constant, so that an unfinished module 19 fails these tests, not their import."""
    return Measurement(10, [0.010, 0.020, 0.030, 0.040, 0.100])


def test_report_row_fields(M):
    row = report_row("int8", 0.9555, M, 9744, np.int64(18_000))
    assert sorted(row) == sorted(["name", "accuracy", "median_s", "iqr_s", "bytes", "flops"]), f"row keys: {sorted(row)}"
    assert row["name"] == "int8" and row["accuracy"] == pytest.approx(0.9555), f"name and accuracy: {row}"
    assert row["median_s"] == pytest.approx(0.003, rel=1e-12), f"median of per-run 1, 2, 3, 4, 10 ms is 3 ms, got {row['median_s']}"
    assert row["iqr_s"] == pytest.approx(0.002, rel=1e-9), f"IQR of per-run 1, 2, 3, 4, 10 ms is 2 ms, got {row['iqr_s']}"
    assert (row["bytes"], row["flops"]) == (9744, 18000), f"bytes and flops: {row}"
    assert type(row["flops"]) is int and type(row["accuracy"]) is float, "flops an int, accuracy a float"


def test_report_row_uses_the_measurement_statistics(M):
    m = Measurement(1, [5.0, 1.0, 2.0, 3.0, 100.0, 4.0])
    row = report_row("a", 0.5, m, 1, 1)
    assert row["median_s"] == pytest.approx(m.median) and row["median_s"] == pytest.approx(3.5), \
        f"median_s should be the Measurement's median 3.5 (not the mean {np.mean(m.times)}), got {row['median_s']}"
    assert row["iqr_s"] == pytest.approx(m.iqr), f"iqr_s should be the Measurement's IQR {m.iqr}, got {row['iqr_s']}"
    one = report_row("b", 1, M, 1, 1)["accuracy"]
    assert type(one) is float and one == 1.0, f"accuracy 1 (an int) is allowed, stored as the float 1.0: got {one!r}"
    assert report_row("c", 0, M, 1, 1)["accuracy"] == 0.0, "accuracy 0 is allowed"


def test_report_row_accepts_numpy_numbers_and_stores_python_ones(M):
    row = report_row("d", np.float32(0.75), M, np.int64(2), np.int32(3))
    assert (type(row["accuracy"]), type(row["bytes"]), type(row["flops"])) == (float, int, int), \
        f"numpy numbers are measurements too, stored as Python float and ints: {row!r}"
    assert (row["accuracy"], row["bytes"], row["flops"]) == (0.75, 2, 3), f"values kept: {row!r}"


# Only values no reasonable gate lets through: a gate is the student's design, so a value some
# designs accept and others refuse (the string "0.9", a whole-number float for a count, 0
# bytes or FLOPs) is not graded either way.
@pytest.mark.parametrize("bad", [None, math.nan, math.inf, 1.5, -0.1, True])
def test_report_row_refuses_bad_accuracy(bad, M):
    with pytest.raises(ValueError, match="accuracy") as err:
        report_row("pruned", bad, M, 10, 10)
    assert "pruned" in str(err.value), f"the message should name the variant: {err.value}"


@pytest.mark.parametrize("bad", [None, 0.003, [0.003]])
def test_report_row_refuses_a_latency_that_is_not_a_measurement(bad):
    with pytest.raises(ValueError, match="latency") as err:
        report_row("numba", 0.9, bad, 10, 10)
    assert "numba" in str(err.value), f"the message should name the variant: {err.value}"


@pytest.mark.parametrize("field", ["bytes", "flops"])
@pytest.mark.parametrize("bad", [None, -5, 10.5, True])  # 0 is a design choice (a model with no parameters)
def test_report_row_refuses_bad_counts(field, bad, M):
    args = {"bytes": 10, "flops": 10}
    args[field] = bad
    with pytest.raises(ValueError, match=field) as err:
        report_row("shrunk", 0.9, M, args["bytes"], args["flops"])
    assert "shrunk" in str(err.value), f"the message should name the variant: {err.value}"

"""`tito bench --quick`: a workload that runs gets both medians and a ratio measured in the
same run; one that cannot run (the student's stubs) is reported as not run, with no number."""
import json

import pytest

pytestmark = [pytest.mark.timeout(600), pytest.mark.command]


def test_quick_bench_measures_the_reference_and_refuses_to_invent_numbers_for_stubs(course, tmp_path):
    out_json = tmp_path / "bench.json"
    out = course.tito("bench", "--quick", "--only", "autograd_overhead", "--mine", "--json", str(out_json),
                      timeout=550)
    assert out.returncode == 1, "a workload that did not run must give a non-zero exit\n" + out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("autograd_overhead")]
    assert len(lines) == 2, out.stdout
    reference, yours = lines
    ratio = float(reference.split()[5])
    assert ratio > 0, reference
    assert "did not run: NotImplementedError" in yours and "module 01" in yours, yours
    data = json.loads(out_json.read_text())
    ref = data["runs"]["reference"]
    assert ref["environment"]["threads"] == 1 and ref["environment"]["torch_threads"] == 1, ref["environment"]
    for key in ("cpu", "numpy", "torch", "blas"):
        assert key in ref["environment"], sorted(ref["environment"])
    row = ref["workloads"][0]
    assert row["ran"] and row["a_median_s"] > 0 and row["b_median_s"] > 0, row
    assert abs(row["ratio"] - ratio) < 0.01, (row["ratio"], ratio)
    mine = data["runs"]["yours"]["workloads"][0]
    assert not mine["ran"] and "ratio" not in mine and "a_median_s" not in mine, mine

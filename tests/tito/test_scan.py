"""tito/scan.py: what a submission's cells reach for, found the same way from any thread."""
import sys
import threading

from tito import scan

CELL = (
    "import numpy.testing as npt\n"
    "npt.assert_allclose = lambda *a, **k: None\n"
    + "\n".join(f"def f{i}(a, b):\n    return [x * {i} for x in (a, b) if x]" for i in range(150))
)


class _CollectedLate:
    """Garbage whose finalizer runs Python code, so a collection mid-parse lets another
    thread run (as the grader's threads do while they read test reports)."""

    def __del__(self):
        sum(range(20))


def test_grading_threads_scan_at_once_and_each_gets_the_findings():
    expected = scan.cell_findings(CELL)
    assert "imports numpy.testing" in expected
    results, errors = [], []

    def grade_one():
        for _ in range(15):
            junk = [_CollectedLate() for _ in range(100)]
            for item in junk:
                item.cycle = item  # only the cyclic collector frees these, at a time it picks
            del junk
            try:
                results.append(scan.cell_findings(CELL))
            except Exception as exc:  # noqa: BLE001 - the test reports whatever escaped
                errors.append(repr(exc))
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=grade_one) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert results == [expected] * 60

"""choose: the fewest bytes within `within` of the best accuracy (accuracies exact in binary)."""
import pytest

from tinytorch.capstone import choose

CANDS = [{"name": "float32", "accuracy": 0.9375, "median_s": 1.0e-3, "bytes": 36_000},
         {"name": "int8", "accuracy": 0.921875, "median_s": 1.5e-3, "bytes": 9_700},
         {"name": "shrunk", "accuracy": 0.875, "median_s": 0.4e-3, "bytes": 5_000},
         {"name": "tiny", "accuracy": 0.90625, "median_s": 0.9e-3, "bytes": 9_700}]


@pytest.mark.parametrize("within, expected, why", [
    (0.0, "float32", "within 0: only the most accurate"),
    (0.015625, "int8", "int8 exactly on the floor 0.921875 is allowed"),
    (0.02, "int8", "within 2 points (0.02 as a fraction)"),
    (0.03125, "tiny", "int8 and tiny tie on bytes; tiny is faster"),
    (0.0625, "shrunk", "shrunk exactly on the floor 0.875"),
    (0.5, "shrunk", "a loose tolerance: the smallest"),
])
def test_choose_cases(within, expected, why):
    assert choose(CANDS, within=within) == expected, f"{why}: expected {expected!r}, got {choose(CANDS, within=within)!r}"


def test_choose_default_and_single():
    assert choose(CANDS) == "int8", "default within=0.02"
    assert choose(CANDS[2:3]) == "shrunk", "one row: that row"


def test_choose_meets_a_decimal_floor_despite_float_rounding():
    rows = [{"name": "big", "accuracy": 0.52, "median_s": 1e-3, "bytes": 9_000},
            {"name": "small", "accuracy": 0.47, "median_s": 1e-3, "bytes": 3_000},
            {"name": "smaller", "accuracy": 0.4699, "median_s": 1e-3, "bytes": 2_000}]
    got = choose(rows, within=0.05)
    assert got == "small", (f"0.47 is 5 points below 0.52 and meets the floor (in floats 0.52 - 0.05 is "
                            f"0.47000000000000003); 0.4699 does not: expected 'small', got {got!r}")


def test_choose_refuses():
    with pytest.raises(ValueError, match="nothing"):
        choose([])
    with pytest.raises(ValueError, match="-0.01"):
        choose(CANDS, within=-0.01)


@pytest.mark.parametrize("order", [[3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]])
def test_choose_takes_the_floor_from_the_best_row_wherever_it_stands(order):
    rows = [CANDS[i] for i in order]
    for within, expected in [(0.0, "float32"), (0.02, "int8"), (0.03125, "tiny"), (0.0625, "shrunk")]:
        assert choose(rows, within=within) == expected, \
            f"rows in the order {[r['name'] for r in rows]}, within {within}: expected {expected!r} (the floor is " \
            f"`within` below float32, the best row), got {choose(rows, within=within)!r}"

"""tinytorch.testing.spied, the helper that check cells and tests use to see how a result was computed."""
import numpy as np
import pytest

from tinytorch.testing import spied


@pytest.mark.parametrize("widen", [lambda a: a.astype(np.int32), lambda a: np.asarray(a, dtype=np.int32),
                                   lambda a: np.array(a, dtype=np.int32)], ids=["astype", "asarray", "array"])
def test_a_widened_copy_is_still_watched(widen):
    x, w = np.ones((2, 3), np.int8), np.ones((4, 3), np.int8)
    result, log = spied(lambda a, b: widen(a) @ widen(b).T, x, w)
    np.testing.assert_array_equal(np.asarray(result), np.full((2, 4), 3))
    assert log == [("matmul", ((2, 3), (3, 4)), (2, 4))]


def test_numpy_is_restored_even_when_the_function_raises():
    asarray, array = np.asarray, np.array
    with pytest.raises(ZeroDivisionError):
        spied(lambda a: 1 / 0, np.ones(2))
    assert (np.asarray, np.array) == (asarray, array)
    assert type(np.asarray(np.ones(2))) is np.ndarray

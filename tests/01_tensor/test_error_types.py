"""Shape errors are catchable the PyTorch way (RuntimeError) and the numpy way (ValueError);
a bad dim is an IndexError. Each case is also checked against PyTorch itself."""
import numpy as np
import pytest

import tinytorch as tt

SHAPE_ERRORS = {
    "matmul inner sizes": lambda m: m.ones(2, 3) @ m.ones(4, 5),
    "matmul batch dims": lambda m: m.matmul(m.ones(2, 2, 3), m.ones(4, 3, 5)),
    "matmul 0-d": lambda m: m.matmul(m.ones(()), m.ones(3)),
    "permute not a permutation": lambda m: m.ones(2, 3).permute(0, 0),
    "reshape two -1": lambda m: m.ones(2, 3).reshape(-1, -1),
    "reshape wrong numel": lambda m: m.ones(2, 3).reshape(4, 2),
    "view wrong numel": lambda m: m.ones(2, 3).view(5),
    "broadcast clash": lambda m: m.ones(2, 3) + m.ones(2),
    "expand clash": lambda m: m.ones(2, 3).expand(4, 3),
    "flatten start after end": lambda m: m.ones(2, 3, 4).flatten(2, 1),
    "sum dim twice": lambda m: m.ones(2, 3).sum((0, 0)),
    "cat shapes": lambda m: m.cat([m.ones(2, 3), m.ones(2, 4)]),
    "stack shapes": lambda m: m.stack([m.ones(2, 3), m.ones(3, 2)]),
    "int to negative int power": lambda m: m.tensor([1, 2, 3]) ** -1,
    "int to negative int tensor power": lambda m: m.tensor([1, 2]) ** m.tensor([2, -1]),
}


# PyTorch checks a negative int exponent only when it is a number; numpy refuses a tensor too.
TORCH_TOO = {c for c in SHAPE_ERRORS if c != "int to negative int tensor power"}


@pytest.mark.parametrize("case", list(SHAPE_ERRORS), ids=list(SHAPE_ERRORS))
def test_shape_errors_are_runtime_and_value_errors(torch, case):
    with pytest.raises(RuntimeError) as info:
        SHAPE_ERRORS[case](tt)
    assert isinstance(info.value, ValueError), \
        f"{case}: raised {type(info.value).__name__}, expected a RuntimeError that is also a ValueError"
    assert isinstance(info.value, tt.ShapeError), f"{case}: expected tinytorch.ShapeError"
    assert "ShapeError" in tt.__all__, "ShapeError must be exported"
    if case in TORCH_TOO:  # what PyTorch-style code catches
        with pytest.raises(RuntimeError):
            SHAPE_ERRORS[case](torch)


def test_negative_float_power_and_positive_int_power_still_work():
    np.testing.assert_array_equal((tt.tensor([1, 2, 3]) ** 2).numpy(), [1, 4, 9])
    np.testing.assert_allclose((tt.tensor([1.0, 2.0]) ** -1).numpy(), [1.0, 0.5])


@pytest.mark.parametrize("fn", [
    lambda m: m.ones(2, 3).sum(2),
    lambda m: m.ones(2, 3).transpose(0, 2),
    lambda m: m.ones(2, 3).unsqueeze(3),
    lambda m: m.ones(2, 3).squeeze(-3),
])
def test_bad_dim_is_index_error(torch, fn):
    with pytest.raises(IndexError):
        fn(tt)
    with pytest.raises(IndexError):
        fn(torch)

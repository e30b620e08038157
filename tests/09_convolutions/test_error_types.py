"""Shape errors of the conv ops are catchable as PyTorch raises them (RuntimeError) and as
numpy does (ValueError)."""
import pytest

import tinytorch as tt
from tinytorch.nn import functional as F

CASES = {
    "kernel larger than the input": lambda: F.conv2d(tt.ones(1, 1, 3, 3), tt.ones(1, 1, 5, 5)),
    "kernel larger than the padded input": lambda: F.conv2d(tt.ones(1, 1, 3, 3), tt.ones(1, 1, 6, 6), padding=1),
    "channels differ": lambda: F.conv2d(tt.ones(2, 3, 8, 8), tt.ones(4, 2, 3, 3)),
    "input not 4-D": lambda: F.conv2d(tt.ones(3, 8, 8, 1, 1), tt.ones(4, 3, 3, 3)),
    "pool window larger than the input": lambda: F.max_pool2d(tt.ones(1, 1, 2, 2), 3),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_shape_errors_are_runtime_and_value_errors(case):
    ok = F.conv2d(tt.ones(1, 1, 3, 3), tt.ones(1, 1, 3, 3))  # a kernel that fits: no error
    assert ok.shape == (1, 1, 1, 1), f"3x3 kernel on a 3x3 input: shape {ok.shape}, expected (1, 1, 1, 1)"
    with pytest.raises(RuntimeError) as info:
        CASES[case]()
    assert isinstance(info.value, ValueError), \
        f"{case}: raised {type(info.value).__name__}, expected a RuntimeError that is also a ValueError"


def test_conv_output_size_kernel_too_large_is_a_shape_error():
    from tinytorch.nn.conv import conv_output_size
    with pytest.raises(tt.ShapeError, match="larger"):
        conv_output_size(3, 6, 1, 1)
    with pytest.raises(ValueError, match="stride"):
        conv_output_size(8, 3, 0, 0)


def test_a_kernel_larger_than_the_input_is_a_runtime_error_as_in_pytorch(torch):
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 5, 5))
    with pytest.raises(RuntimeError, match="larger") as info:
        tt.nn.functional.conv2d(tt.ones(1, 1, 3, 3), tt.ones(1, 1, 5, 5))
    assert isinstance(info.value, ValueError), "a ShapeError: also a ValueError"

"""Two of module 01's functions, each tested on its own, so that a mistake in one is named
as that function (the tests that merely use them run them alongside everything else)."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch._tensor import _check_writable


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (2, 1, 4)])
def test_tensor_storage_init_storage_describes_a_fresh_array(shape):
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = tt.tensor(arr)
    assert t._storage.ndim == 1, f"the storage is one flat buffer, got a {t._storage.ndim}-D array"
    assert t.shape == shape and all(type(n) is int for n in t.shape), f"shape {shape} as a tuple of ints"
    expected = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    assert t.stride() == expected, f"row-major strides of {shape}: {expected}, got {t.stride()}"
    assert t.storage_offset() == 0, "a fresh tensor starts at offset 0"


def test_check_writable_message_says_memory_and_what_to_do():
    with pytest.raises(RuntimeError) as info:
        _check_writable(tt.tensor([1.0]).expand(3))
    assert "memory" in str(info.value) and (".contiguous()" in str(info.value) or ".clone()" in str(info.value)), (
        f"the message says that elements share memory and suggests .contiguous() or .clone(); got: {info.value}")


@pytest.mark.parametrize("make,shared", [
    (lambda: tt.tensor([1.0]).expand(3), True),
    (lambda: tt.tensor([[1.0], [2.0]]).expand(2, 4), True),          # shared along the last dim
    (lambda: tt.tensor([1.0, 2.0]).expand(3, 2), True),              # shared along the first dim
    (lambda: tt.tensor([[1.0, 2.0]]).expand(2, 3, 2), True),         # a new leading dim
    (lambda: tt.tensor(5.0).expand(1), False),                        # stride 0, one element
    (lambda: tt.tensor([1.0, 2.0, 3.0]).expand(2, 3)[:1], False),    # stride 0 on a size-1 dim
    (lambda: tt.tensor(np.zeros((2, 3))).T, False),                   # a transposed view
])
def test_check_writable_refuses_exactly_the_layouts_that_share_memory(make, shared):
    t = make()
    if shared:
        with pytest.raises(RuntimeError, match="memory"):
            _check_writable(t)
    else:
        assert _check_writable(t) is None, f"shape {t.shape}, strides {t.stride()}: no two elements share a cell"

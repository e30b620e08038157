"""dtype inference from data and PyTorch-style type promotion."""
import numpy as np
import pytest

import tinytorch as tt


@pytest.mark.parametrize("data, dtype", [
    (1.5, tt.float32), ([1.0, 2.0], tt.float32), ([1, 2.5], tt.float32),
    (3, tt.int64), ([[1, 2], [3, 4]], tt.int64),
    (True, tt.bool_), ([True, False], tt.bool_),
    (np.zeros(2, dtype=np.float64), tt.float64), (np.zeros(2, dtype=np.float32), tt.float32),
    (np.zeros(2, dtype=np.int64), tt.int64), (np.zeros(2, dtype=bool), tt.bool_),
    (np.zeros(2, dtype=np.float16), tt.float32), (np.zeros(2, dtype=np.int32), tt.int32),
    (np.zeros(2, dtype=np.uint8), tt.uint8), (np.zeros(2, dtype=np.int8), tt.int8),
    (np.zeros(2, dtype=np.int16), tt.int16), (np.zeros(2, dtype=np.uint16), tt.int64),
    (np.float64(2.0), tt.float64),
])
def test_inferred_dtype(data, dtype):
    t = tt.tensor(data)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


def test_dtype_constants_are_numpy_dtypes():
    t = tt.zeros(1)
    assert t.dtype == np.float32 == tt.float32
    assert tt.float64 == np.dtype("float64") and tt.int64 == np.dtype("int64") and tt.bool_ == np.dtype(bool)


def test_explicit_dtype_and_errors():
    assert tt.tensor([1, 2], dtype=tt.float64).dtype == tt.float64
    assert tt.tensor([1.7, 2.2], dtype="int64").tolist() == [1, 2]
    assert tt.tensor(np.zeros(2), dtype=np.float32).dtype == tt.float32
    assert tt.tensor([1, 2], dtype=np.int32).dtype == tt.int32
    assert tt.tensor([-1.7, 2.2], dtype="int8").tolist() == [-1, 2]
    with pytest.raises(TypeError, match="float16"):
        tt.tensor([1, 2], dtype=np.float16)
    with pytest.raises(TypeError):
        tt.tensor(["a", "b"])


def test_tensor_copies_its_input():
    src = np.arange(3.0)
    t = tt.tensor(src)
    src[0] = 99
    assert t[0].item() == 0.0
    u = tt.tensor(t)
    u[1] = 5.0
    assert t[1].item() == 1.0


@pytest.mark.parametrize("a, b, expected", [
    (tt.float32, tt.float32, tt.float32),
    (tt.float32, tt.float64, tt.float64),
    (tt.int64, tt.float32, tt.float32),
    (tt.int64, tt.float64, tt.float64),
    (tt.int64, tt.int64, tt.int64),
    (tt.bool_, tt.int64, tt.int64),
    (tt.bool_, tt.float32, tt.float32),
    (tt.int8, tt.int8, tt.int8),
    (tt.int8, tt.int64, tt.int64),
    (tt.uint8, tt.int8, tt.int16),
    (tt.int32, tt.int16, tt.int32),
    (tt.bool_, tt.int8, tt.int8),
    (tt.int8, tt.float32, tt.float32),
])
def test_tensor_tensor_promotion(a, b, expected):
    x = tt.ones(2, dtype=a)
    y = tt.ones(2, dtype=b)
    assert (x + y).dtype == expected
    assert (y * x).dtype == expected


def test_python_scalars_never_upcast_floats():
    f32 = tt.ones(2)
    f64 = tt.ones(2, dtype=tt.float64)
    i64 = tt.ones(2, dtype=tt.int64)
    assert (f32 * 2.5).dtype == tt.float32
    assert (2.5 * f32).dtype == tt.float32
    assert (f32 + 1).dtype == tt.float32
    assert (f64 + 1.5).dtype == tt.float64
    assert (i64 + 1).dtype == tt.int64
    assert (i64 * 2.5).dtype == tt.float32
    assert (i64 * 2.5).tolist() == [2.5, 2.5]
    assert (f32 + np.float64(1.0)).dtype == tt.float32
    assert (tt.tensor([True]) + 1).dtype == tt.int64
    i8 = tt.ones(2, dtype=tt.int8)
    assert (i8 + 1).dtype == tt.int8 and (i8 * 2.5).dtype == tt.float32


def test_integer_true_division_gives_float32():
    out = tt.tensor([1, 2, 3]) / 2
    assert out.dtype == tt.float32
    np.testing.assert_allclose(out.numpy(), [0.5, 1.0, 1.5])
    assert (tt.tensor([1, 2]) / tt.tensor([4, 4])).tolist() == [0.25, 0.5]
    assert (3 / tt.tensor([2])).dtype == tt.float32


def test_integer_power():
    assert (tt.tensor([2, 3]) ** 2).tolist() == [4, 9]
    assert (tt.tensor([2, 3]) ** 2).dtype == tt.int64
    assert (tt.tensor([4, 9]) ** 0.5).dtype == tt.float32
    assert (2 ** tt.tensor([1, 3])).tolist() == [2, 8]


def test_conversions():
    x = tt.tensor([1.7, -2.2])
    assert x.long().dtype == tt.int64 and x.long().tolist() == [1, -2]
    assert x.double().dtype == tt.float64
    assert x.double().float().dtype == tt.float32
    assert x.bool().tolist() == [True, True]
    assert x.to(tt.float64).dtype == tt.float64
    assert x.to(tt.float32) is x
    assert x.to("cpu") is x
    assert tt.tensor([0, 3]).float().tolist() == [0.0, 3.0]
    # (moving to "cuda" is module 17's: tests/17_acceleration, with and without a GPU)


def test_comparison_of_mixed_dtypes():
    assert (tt.tensor([1, 2]) < tt.tensor([1.5, 1.5])).tolist() == [True, False]
    assert (tt.tensor([1.0, 2.0]) == 2).tolist() == [False, True]


def test_element_sizes():
    assert tt.zeros(3).element_size() == 4
    assert tt.zeros(3, dtype=tt.float64).element_size() == 8
    assert tt.zeros(3, dtype=tt.int64).element_size() == 8
    assert tt.zeros(3, dtype=tt.bool_).element_size() == 1
    assert tt.zeros(3, dtype=tt.int8).element_size() == 1 and tt.zeros(3, dtype=tt.int32).element_size() == 4
    assert tt.zeros((2, 3), dtype=tt.int8).nbytes == 6
    assert tt.zeros(3, dtype=tt.float64).nbytes == 24


def test_repr_names_every_dtype_but_the_defaults():
    assert "dtype" not in repr(tt.tensor([1, 2])) and "dtype" not in repr(tt.tensor([True]))
    assert repr(tt.tensor([1, 2], dtype=tt.int8)) == "tensor([1, 2], dtype=tinytorch.int8)"
    assert repr(tt.tensor([1.0], dtype=tt.float64)).endswith("dtype=tinytorch.float64)")


def test_narrow_integer_sums_give_int64_like_pytorch():
    x = tt.full((200,), 100, dtype=tt.int8)
    assert x.sum().dtype == tt.int64 and x.sum().item() == 20000


@pytest.mark.parametrize("a, b", [
    ("int8", "int8"), ("uint8", "int8"), ("int8", "int64"), ("int32", "int16"), ("uint8", "int32"),
    ("bool", "int8"), ("int8", "float32"), ("uint8", "uint8"),
])
def test_narrow_integer_promotion_matches_pytorch(torch, a, b):
    ours = {"bool": tt.bool_}
    x, y = (tt.ones(2, dtype=ours.get(name, name)) for name in (a, b))
    want = (torch.ones(2, dtype=getattr(torch, a)) + torch.ones(2, dtype=getattr(torch, b))).numpy()
    got = (x + y).numpy()
    assert got.dtype == want.dtype, f"{a} + {b}: {got.dtype}, PyTorch {want.dtype}"
    np.testing.assert_array_equal(got, want)

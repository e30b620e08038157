"""default_collate: stack Tensors/arrays/numbers along a new dim 0, recursing into structures."""
from collections import namedtuple

import numpy as np
import pytest

import tinytorch as tt
from tinytorch.data import default_collate

Pair = namedtuple("Pair", ["image", "label"])


def test_tensors_are_stacked_along_a_new_first_dimension():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 3)) for _ in range(5)]
    out = default_collate([tt.tensor(a) for a in arrays])
    assert isinstance(out, tt.Tensor) and out.shape == (5, 2, 3)
    assert out.dtype == np.float64, "the samples' dtype is kept"
    np.testing.assert_array_equal(out.numpy(), np.stack(arrays))
    scalars = default_collate([tt.tensor(i) for i in range(4)])
    assert scalars.shape == (4,) and scalars.tolist() == [0, 1, 2, 3] and scalars.dtype == np.int64


def test_numpy_arrays_become_tensors():
    arrays = [np.full((2, 2), i, dtype=np.float32) for i in range(3)]
    out = default_collate(arrays)
    assert isinstance(out, tt.Tensor) and out.shape == (3, 2, 2) and out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), np.stack(arrays))
    ints = default_collate([np.array([1, 2], dtype=np.uint8), np.array([3, 4], dtype=np.uint8)])
    assert ints.dtype == np.uint8 and ints.tolist() == [[1, 2], [3, 4]], "uint8 images stay uint8, as in PyTorch"


def test_numbers_become_1d_tensors_with_tinytorch_dtypes():
    ints = default_collate([3, 1, 2])
    assert isinstance(ints, tt.Tensor) and ints.dtype == np.int64 and ints.tolist() == [3, 1, 2]
    floats = default_collate([0.5, 1.5])
    assert floats.dtype == np.float32 and floats.tolist() == [0.5, 1.5]
    bools = default_collate([True, False, True])
    assert bools.dtype == np.bool_ and bools.tolist() == [True, False, True]
    np_scalars = default_collate([np.float64(1.25), np.float64(2.5)])
    assert np_scalars.dtype == np.float64 and np_scalars.tolist() == [1.25, 2.5]
    np_ints = default_collate([np.int32(4), np.int32(5)])
    assert np_ints.dtype == np.int32 and np_ints.tolist() == [4, 5], "numpy scalars keep their dtype"


def test_strings_are_kept_as_a_list():
    assert default_collate(["a", "bb", "c"]) == ["a", "bb", "c"]
    out = default_collate([("x", 1), ("y", 2)])
    assert out[0] == ["x", "y"] and out[1].tolist() == [1, 2]


def test_tuples_lists_and_namedtuples_keep_their_type():
    tup = default_collate([(1, 2.0), (3, 4.0)])
    assert type(tup) is tuple and tup[0].tolist() == [1, 3] and tup[1].tolist() == [2.0, 4.0]
    lst = default_collate([[1, 2], [3, 4], [5, 6]])
    assert type(lst) is list and [t.tolist() for t in lst] == [[1, 3, 5], [2, 4, 6]]
    named = default_collate([Pair(tt.zeros(1, 2), 0), Pair(tt.ones(1, 2), 1)])
    assert isinstance(named, Pair)
    assert named.image.shape == (2, 1, 2) and named.label.tolist() == [0, 1]
    np.testing.assert_array_equal(named.image.numpy()[1], np.ones((1, 2)))


def test_nested_dicts_and_sequences():
    batch = [
        {"x": tt.tensor([1.0, 2.0]), "meta": {"id": 10, "tags": ("a", 0.5)}, "seq": [1, [2, 3]]},
        {"x": tt.tensor([3.0, 4.0]), "meta": {"id": 11, "tags": ("b", 1.5)}, "seq": [4, [5, 6]]},
    ]
    out = default_collate(batch)
    assert isinstance(out, dict) and set(out) == {"x", "meta", "seq"}
    np.testing.assert_array_equal(out["x"].numpy(), [[1.0, 2.0], [3.0, 4.0]])
    assert out["meta"]["id"].tolist() == [10, 11]
    assert out["meta"]["tags"][0] == ["a", "b"] and out["meta"]["tags"][1].tolist() == [0.5, 1.5]
    assert out["seq"][0].tolist() == [1, 4]
    assert [t.tolist() for t in out["seq"][1]] == [[2, 5], [3, 6]]


def test_matches_torch_default_collate_on_a_nested_sample(torch):
    rng = np.random.default_rng(3)
    samples = [{"img": rng.standard_normal((1, 3, 3)).astype(np.float32),
                "target": (int(rng.integers(10)), np.int64(rng.integers(5))),
                "name": f"s{i}"} for i in range(4)]
    ours = default_collate(samples)
    theirs = torch.utils.data.default_collate(samples)
    np.testing.assert_array_equal(ours["img"].numpy(), theirs["img"].numpy())
    assert ours["img"].shape == tuple(theirs["img"].shape)
    for k in range(2):
        np.testing.assert_array_equal(ours["target"][k].numpy(), theirs["target"][k].numpy())
        assert ours["target"][k].dtype == np.int64
    assert ours["name"] == theirs["name"]


def test_errors():
    with pytest.raises(RuntimeError):
        default_collate([(1, 2), (3, 4, 5)])
    with pytest.raises(RuntimeError):  # a longer FIRST sample: zip alone would drop its extra field
        default_collate([(1, 2, 3), (4, 5)])
    with pytest.raises(RuntimeError):
        default_collate([[1, 2], [3, 4], [5]])
    with pytest.raises(TypeError):
        default_collate([object(), object()])
    with pytest.raises(ValueError):
        default_collate([])

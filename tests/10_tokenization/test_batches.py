"""encode_corpus and get_batch: the language-model data pipeline of modules 13 and 18."""
import numpy as np
import pytest

import tinytorch
from tinytorch import Tensor, int64
from tinytorch.data import Generator
from tinytorch.text import CharTokenizer, encode_corpus, get_batch


def test_encode_corpus_is_a_1d_int64_tensor(fables, fables_bpe):
    data = encode_corpus(fables_bpe, fables)
    assert isinstance(data, Tensor) and data.dtype == int64
    ids = fables_bpe.encode(fables)
    assert data.shape == (len(ids),)
    assert data.tolist() == ids
    char = CharTokenizer.from_text(fables)
    cdata = encode_corpus(char, fables[:500])
    assert cdata.dtype == int64 and cdata.tolist() == char.encode(fables[:500])
    assert encode_corpus(char, "").shape == (0,)


def test_encode_corpus_passes_encode_options(fables_bpe):
    text = "the end<|endoftext|>"
    assert encode_corpus(fables_bpe, text, allowed_special="none").tolist() == \
        fables_bpe.encode(text, allowed_special="none")


@pytest.mark.parametrize("block_size,batch_size", [(8, 4), (1, 1), (32, 16), (99, 3)])
def test_batch_shapes_dtypes_and_shift(block_size, batch_size):
    data = tinytorch.arange(100) * 3  # distinct ids: a window is identified by its first id
    x, y = get_batch(data, block_size, batch_size, generator=Generator().manual_seed(1))
    assert isinstance(x, Tensor) and isinstance(y, Tensor)
    assert x.shape == (batch_size, block_size) and y.shape == (batch_size, block_size)
    assert x.dtype == int64 and y.dtype == int64
    xs, ys = x.numpy(), y.numpy()
    for row_x, row_y in zip(xs, ys):
        start = row_x[0] // 3
        assert 0 <= start <= 100 - block_size - 1
        assert (row_x == 3 * np.arange(start, start + block_size)).all()
        assert (row_y == 3 * np.arange(start + 1, start + block_size + 1)).all()


def test_every_start_can_be_drawn_and_none_out_of_range():
    data = tinytorch.arange(12)
    x, y = get_batch(data, 9, 600, generator=Generator().manual_seed(0))
    starts = set(x.numpy()[:, 0].tolist())
    assert starts == {0, 1, 2}, starts  # 12 ids, windows of 9 plus a shifted target
    assert y.numpy().max() == 11


def test_batches_are_reproducible_with_a_seed():
    data = tinytorch.arange(1000)
    a = get_batch(data, 16, 8, generator=Generator().manual_seed(123))
    b = get_batch(data, 16, 8, generator=Generator().manual_seed(123))
    c = get_batch(data, 16, 8, generator=Generator().manual_seed(124))
    assert (a[0].numpy() == b[0].numpy()).all() and (a[1].numpy() == b[1].numpy()).all()
    assert not (a[0].numpy() == c[0].numpy()).all()
    g = Generator().manual_seed(5)
    first, second = get_batch(data, 16, 8, generator=g), get_batch(data, 16, 8, generator=g)
    assert not (first[0].numpy() == second[0].numpy()).all(), "a generator moves on"
    tinytorch.manual_seed(7)
    d = get_batch(data, 16, 8)
    tinytorch.manual_seed(7)
    e = get_batch(data, 16, 8)
    assert (d[0].numpy() == e[0].numpy()).all(), "without a generator: the global seed"


def test_windows_of_a_view_and_of_real_token_ids(fables, fables_bpe):
    data = encode_corpus(fables_bpe, fables)
    val = data[len(data) // 2:]
    x, y = get_batch(val, 24, 5, generator=Generator().manual_seed(2))
    flat = val.numpy()
    for row_x, row_y in zip(x.numpy(), y.numpy()):
        hits = [i for i in range(len(flat) - 24) if (flat[i:i + 24] == row_x).all()]
        assert hits and any((flat[i + 1:i + 25] == row_y).all() for i in hits)


def test_get_batch_errors():
    data = tinytorch.arange(10)
    with pytest.raises(ValueError) as info:
        get_batch(data, 10, 2)  # needs block_size + 1 ids
    assert "10" in str(info.value) and "11" in str(info.value), f"say both, 10 ids and 11 needed: {info.value}"
    with pytest.raises(ValueError):
        get_batch(data, 0, 2)
    with pytest.raises(ValueError):
        get_batch(data, 4, 0)
    with pytest.raises(ValueError):
        get_batch(tinytorch.arange(12).reshape(3, 4), 2, 2)
    with pytest.raises(ValueError, match="float"):
        get_batch(tinytorch.arange(12) * 0.5, 2, 2)  # ids are integers

"""The shipped digits: raw arrays, the Digits dataset and its fixed stratified split."""
import numpy as np

import tinytorch as tt
from tinytorch.data import DataLoader, Digits, load_digits, stratified_split


def expected_test_counts(labels):
    return {c: round(0.2 * int((labels == c).sum())) for c in range(10)}


def test_load_digits_arrays(monkeypatch):
    opened = []
    real_load = np.load
    monkeypatch.setattr(np, "load", lambda *a, **k: opened.append(real_load(*a, **k)) or opened[-1])
    images, labels = load_digits()
    monkeypatch.undo()
    left_open = [f for f in opened if getattr(f, "fid", None) is not None and not f.fid.closed]
    assert not left_open, f"load_digits must close the file it reads before it returns; still open: {left_open}"
    assert isinstance(images, np.ndarray) and isinstance(labels, np.ndarray)
    assert images.shape == (1797, 8, 8) and images.dtype == np.uint8
    assert labels.shape == (1797,) and labels.dtype == np.int64
    assert images.min() == 0 and images.max() == 16
    assert sorted(np.unique(labels).tolist()) == list(range(10))
    assert np.bincount(labels).min() >= 170, "about 180 images per class"


def test_digits_init_split_sizes_and_class_balance():
    _, labels = load_digits()
    train, test = Digits(train=True), Digits(train=False)
    counts = expected_test_counts(labels)
    assert len(test) == sum(counts.values())
    assert len(train) + len(test) == 1797
    assert 0.19 < len(test) / 1797 < 0.21
    for c in range(10):
        n_c = int((labels == c).sum())
        n_test = int((test.targets.numpy() == c).sum())
        n_train = int((train.targets.numpy() == c).sum())
        assert n_test == counts[c] and n_train == n_c - counts[c], f"class {c}"
        assert abs(n_test / n_c - 0.2) <= 0.5 / n_c


def test_digits_init_samples_shapes_dtypes_and_range():
    ds = Digits(train=True)
    assert ds.data.shape == (len(ds), 1, 8, 8) and ds.data.dtype == np.float32
    assert ds.targets.shape == (len(ds),) and ds.targets.dtype == np.int64
    img, label = ds[10]
    assert isinstance(img, tt.Tensor) and img.shape == (1, 8, 8) and img.dtype == np.float32
    assert isinstance(label, tt.Tensor) and label.shape == () and label.dtype == np.int64
    pixels = ds.data.numpy()
    assert pixels.min() == 0.0 and pixels.max() == 1.0
    np.testing.assert_array_equal(pixels * 16, np.round(pixels * 16))  # pixels are k/16
    assert 0 <= label.item() <= 9


def test_stratified_split_gives_the_course_test_set():
    """Recorded from the documented recipe (one generator, classes in increasing order): the
    test set every later module evaluates on. Another order of draws is another test set."""
    _, test_idx = stratified_split(load_digits()[1], test_fraction=0.2, seed=0)
    assert test_idx[:12].tolist() == [5, 9, 12, 14, 16, 17, 19, 23, 24, 34, 38, 46]
    assert len(test_idx) == 359 and int(test_idx.sum()) == 324981


def test_digits_init_takes_the_split_and_is_fixed():
    images, labels = load_digits()
    train_idx, test_idx = stratified_split(labels, test_fraction=0.2, seed=0)
    tt.manual_seed(123)  # the global RNG must not matter
    for train, idx in ((True, train_idx), (False, test_idx)):
        a, b = Digits(train=train), Digits(train=train)
        np.testing.assert_array_equal(a.data.numpy(), b.data.numpy())
        np.testing.assert_array_equal(a.targets.numpy(), b.targets.numpy())
        np.testing.assert_array_equal(a.data.numpy()[:, 0] * 16, images[idx])
        np.testing.assert_array_equal(a.targets.numpy(), labels[idx])


def test_train_and_test_partition_the_whole_dataset():
    images, labels = load_digits()
    train, test = Digits(train=True), Digits(train=False)
    both = np.concatenate([train.data.numpy(), test.data.numpy()])[:, 0] * 16
    both_labels = np.concatenate([train.targets.numpy(), test.targets.numpy()])
    rows = np.concatenate([both.reshape(len(both), -1), both_labels[:, None]], axis=1)
    ref = np.concatenate([images.reshape(1797, -1), labels[:, None]], axis=1).astype(rows.dtype)
    np.testing.assert_array_equal(np.unique(rows, axis=0, return_counts=True)[1],
                                  np.unique(ref, axis=0, return_counts=True)[1])
    np.testing.assert_array_equal(np.unique(rows, axis=0), np.unique(ref, axis=0))


def test_transform_and_loader():
    ds = Digits(train=False, transform=lambda x: 1 - x)
    img, _ = ds[3]
    np.testing.assert_allclose(img.numpy(), 1 - Digits(train=False).data.numpy()[3])
    xb, yb = next(iter(DataLoader(Digits(train=True), batch_size=32, shuffle=True)))
    assert xb.shape == (32, 1, 8, 8) and xb.dtype == np.float32
    assert yb.shape == (32,) and yb.dtype == np.int64

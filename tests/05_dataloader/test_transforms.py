"""Normalize, RandomHorizontalFlip, RandomCrop and Compose."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.data import DataLoader, Generator, TensorDataset
from tinytorch.data.transforms import Compose, Normalize, RandomCrop, RandomHorizontalFlip


def image(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normalize_per_channel_equals_numpy(dtype):
    x = image((3, 5, 4), dtype)
    mean, std = [0.1, 0.5, -0.2], [0.5, 2.0, 0.25]
    out = Normalize(mean, std)(tt.tensor(x))
    assert isinstance(out, tt.Tensor) and out.shape == x.shape and out.dtype == dtype
    ref = (x - np.array(mean, dtype)[:, None, None]) / np.array(std, dtype)[:, None, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


def test_normalize_scalar_for_hw_and_chw_and_batches():
    hw = image((6, 7))
    np.testing.assert_allclose(Normalize(0.3, 0.2)(tt.tensor(hw)).numpy(), (hw - 0.3) / 0.2, rtol=1e-6)
    chw = image((2, 3, 3), seed=1)
    np.testing.assert_allclose(Normalize([0.3], [0.2])(chw).numpy(), (chw - 0.3) / 0.2, rtol=1e-6)
    batch = image((4, 2, 3, 3), seed=2)
    out = Normalize([1.0, 2.0], [2.0, 4.0])(tt.tensor(batch)).numpy()
    ref = (batch - np.array([1.0, 2.0], np.float32)[:, None, None]) / np.array([2.0, 4.0], np.float32)[:, None, None]
    np.testing.assert_allclose(out, ref, rtol=1e-6)


@pytest.mark.parametrize("shape, why", [((3, 4, 4), "2 means for 3 channels"),
                                         ((4, 4), "2 means for an (H, W) image, which has no channels"),
                                         ((2, 4), "2 means for a (2, 4) image: no channels, though numpy "
                                                  "would broadcast them")])
def test_normalize_errors(shape, why):
    with pytest.raises(ValueError):
        Normalize([0.1, 0.2], [1.0, 1.0])(tt.tensor(image(shape)))
        pytest.fail(f"Normalize must raise ValueError: {why}")
    with pytest.raises(TypeError):
        Normalize(0.5, 0.5)(tt.tensor(np.arange(16).reshape(4, 4)))
        pytest.fail("Normalize must raise TypeError for an int64 image")


@pytest.mark.parametrize("shape", [(5, 6), (3, 4, 5), (2, 1, 3, 4)])
def test_flip_with_p_one_and_p_zero(shape):
    x = image(shape)
    flipped = RandomHorizontalFlip(p=1.0)(tt.tensor(x))
    assert isinstance(flipped, tt.Tensor)
    np.testing.assert_array_equal(flipped.numpy(), x[..., ::-1])
    np.testing.assert_array_equal(RandomHorizontalFlip(p=0.0)(x).numpy(), x)


def test_flip_probability_and_seed():
    x = tt.tensor(image((4, 4)))

    def decisions(p, seed, n=200):
        flip = RandomHorizontalFlip(p=p, generator=Generator().manual_seed(seed))
        return [not np.array_equal(flip(x).numpy(), x.numpy()) for _ in range(n)]

    half = decisions(0.5, 0)
    assert any(half) and not all(half), "p=0.5 flips some images and not others"
    assert decisions(0.5, 0) == half, "same seed, same decisions"
    assert decisions(0.5, 1) != half
    assert sum(decisions(0.1, 3)) < sum(decisions(0.9, 3)), "p is the probability of flipping"


def test_crop_without_padding_is_a_window_of_the_image():
    x = image((2, 6, 7))
    for seed in range(20):
        out = RandomCrop((3, 4), generator=Generator().manual_seed(seed))(tt.tensor(x))
        assert isinstance(out, tt.Tensor) and out.shape == (2, 3, 4)
        assert any(np.array_equal(out.numpy(), x[:, t:t + 3, l:l + 4]) for t in range(4) for l in range(4))
    square = RandomCrop(5)(x)
    assert square.shape == (2, 5, 5)


def test_crop_with_padding_reaches_every_position_and_pads_with_zeros():
    x = image((1, 4, 4)) + 1.0  # no zeros in the image itself
    padded = np.pad(x, ((0, 0), (2, 2), (2, 2)))
    positions = set()
    for seed in range(300):
        out = RandomCrop(4, padding=2, generator=Generator().manual_seed(seed))(x).numpy()
        matches = [(t, l) for t in range(5) for l in range(5)
                   if np.array_equal(out, padded[:, t:t + 4, l:l + 4])]
        assert matches, "the crop must be a window of the zero-padded image"
        positions.add(matches[0])
    assert positions == {(t, l) for t in range(5) for l in range(5)}, "all 25 positions are possible"
    whole = RandomCrop(8, padding=2)(tt.tensor(x))
    np.testing.assert_array_equal(whole.numpy(), padded)


@pytest.mark.parametrize("seed", [0, 5, 11])
def test_crop_draws_the_top_then_the_left(seed):
    """The contract fixes the draw order, so that a seed gives the same crops as PyTorch's
    transform would from the same stream: top first."""
    from tinytorch.random import numpy_generator

    image = np.arange(6 * 7, dtype=np.float32).reshape(1, 6, 7)
    crop = RandomCrop((3, 3), generator=Generator().manual_seed(seed))(tt.tensor(image)).numpy()
    rng = numpy_generator(Generator().manual_seed(seed))
    top = int(rng.integers(0, 4))
    left = int(rng.integers(0, 5))
    np.testing.assert_array_equal(crop, image[:, top:top + 3, left:left + 3])


def test_crop_keeps_dtype_works_on_2d_and_refuses_too_big():
    ints = np.arange(25).reshape(5, 5)
    out = RandomCrop(5, padding=1, generator=Generator().manual_seed(0))(tt.tensor(ints))
    assert out.dtype == np.int64 and out.shape == (5, 5)
    a = RandomCrop(3, padding=1, generator=Generator().manual_seed(9))(ints).numpy()
    b = RandomCrop(3, padding=1, generator=Generator().manual_seed(9))(ints).numpy()
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError) as refused:
        RandomCrop(8, padding=1)(tt.tensor(ints))
    message = str(refused.value).replace(" ", "")
    assert "8x8" in message and "7x7" in message, \
        f"the error names the crop (8 x 8) and the padded image (7 x 7) it does not fit in; got {refused.value!r}"


def test_compose_and_transforms_inside_a_loader():
    x = image((3, 2, 2))
    out = Compose([Normalize(0.5, 0.5), RandomHorizontalFlip(p=1.0)])(tt.tensor(x))
    np.testing.assert_allclose(out.numpy(), ((x - 0.5) / 0.5)[..., ::-1], rtol=1e-6)
    X = image((5, 1, 3, 3))
    ds = TensorDataset(X, np.arange(5), transform=Compose([RandomHorizontalFlip(p=1.0), Normalize([0.0], [2.0])]))
    xb, yb = next(iter(DataLoader(ds, batch_size=5)))
    np.testing.assert_allclose(xb.numpy(), X[..., ::-1] / 2.0, rtol=1e-6)
    assert yb.tolist() == [0, 1, 2, 3, 4]

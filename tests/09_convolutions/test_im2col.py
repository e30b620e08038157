"""conv_output_size, im2col and col2im: the formula, torch's unfold/fold layouts, the adjoint identity."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinytorch as tt
from tinytorch.nn.conv import _windows, col2im, conv_output_size, im2col
from tinytorch.testing import python_steps


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)

GEOMETRY = [(k, s, p) for k in (1, 2, 3, 5) for s in (1, 2) for p in (0, 1, 2)]


@given(size=st.integers(1, 40), k=st.integers(1, 7), s=st.integers(1, 4), p=st.integers(0, 3))
def test_output_size_formula(size, k, s, p):
    if k > size + 2 * p:
        with pytest.raises(ValueError, match="larger"):
            conv_output_size(size, k, s, p)
    else:
        assert conv_output_size(size, k, s, p) == (size + 2 * p - k) // s + 1
        # the last window fits, one more would not
        n = conv_output_size(size, k, s, p)
        assert (n - 1) * s + k <= size + 2 * p < n * s + k


@pytest.mark.parametrize("args, word", [((8, 3, 0, 0), "stride"), ((8, 3, -2, 0), "stride"),
                                        ((8, 3, 1, -1), "padding"), ((8, 0, 1, 0), "kernel"),
                                        ((2, 5, 1, 1), "larger")])
def test_output_size_errors(args, word):
    with pytest.raises(ValueError, match=word):
        conv_output_size(*args)


@pytest.mark.parametrize("k, s, p", GEOMETRY)
def test_im2col_equals_unfold(torch, k, s, p):
    x = rand((2, 3, 7, 6), seed=k + s + p)
    if k > 6 + 2 * p:
        return
    cols = im2col(x, k, s, p)
    ref = torch.nn.functional.unfold(torch.from_numpy(x), k, padding=p, stride=s).numpy()
    assert cols.shape == ref.shape
    np.testing.assert_array_equal(cols, ref)


def test_pad_puts_rows_and_columns_of_value_on_both_sides():
    from tinytorch.nn.conv import _pad

    x = np.arange(2 * 1 * 2 * 3, dtype=np.float64).reshape(2, 1, 2, 3)
    out = _pad(x, (1, 2), value=-1.0)
    assert out.shape == (2, 1, 4, 7)
    np.testing.assert_array_equal(out[:, :, 1:3, 2:5], x)
    border = np.ones(out.shape, dtype=bool)
    border[:, :, 1:3, 2:5] = False
    np.testing.assert_array_equal(out[border], -1.0)
    assert _pad(x, (0, 0)).shape == x.shape


def test_windows_is_a_strided_view():
    xp = np.arange(2 * 3 * 6 * 7, dtype=np.float64).reshape(2, 3, 6, 7)
    win = _windows(xp, (3, 2), (2, 1))
    assert win.shape == (2, 3, 3, 2, 2, 6)
    assert np.shares_memory(win, xp), "the windows must be a view of the padded input, not a copy"
    for n, c, u, v, i, j in [(0, 0, 0, 0, 0, 0), (1, 2, 2, 1, 1, 5), (0, 1, 1, 0, 1, 3)]:
        assert win[n, c, u, v, i, j] == xp[n, c, i * 2 + u, j + v]


def test_im2col_shapes_values_and_tensor_input():
    x = np.arange(2 * 2 * 5 * 4, dtype=np.float64).reshape(2, 2, 5, 4)
    cols = im2col(tt.tensor(x), (3, 2), (2, 1), (1, 0))  # a Tensor works too
    Ho, Wo = (5 + 2 - 3) // 2 + 1, (4 - 2) // 1 + 1
    assert cols.shape == (2, 2 * 3 * 2, Ho * Wo)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    for n, c, u, v, i, j in [(0, 0, 0, 0, 0, 0), (1, 1, 2, 1, 2, 2), (1, 0, 1, 0, 1, 1), (0, 1, 0, 1, 2, 0)]:
        assert cols[n, (c * 3 + u) * 2 + v, i * Wo + j] == xp[n, c, i * 2 + u, j + v]
    assert cols.dtype == np.float64
    assert im2col(x.astype(np.float32), 2).dtype == np.float32


@pytest.mark.parametrize("k, s, p", GEOMETRY)
def test_col2im_equals_fold(torch, k, s, p):
    H, W = 7, 6
    if k > W + 2 * p:
        return
    L = conv_output_size(H, k, s, p) * conv_output_size(W, k, s, p)
    cols = rand((2, 3 * k * k, L), seed=k * s + p)
    out = col2im(cols, (H, W), k, s, p)
    ref = torch.nn.functional.fold(torch.from_numpy(cols), (H, W), k, padding=p, stride=s).numpy()
    assert out.shape == (2, 3, H, W)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


@given(N=st.integers(1, 2), C=st.integers(1, 3), H=st.integers(1, 7), W=st.integers(1, 7),
       kh=st.integers(1, 4), kw=st.integers(1, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
       ph=st.integers(0, 2), pw=st.integers(0, 2), seed=st.integers(0, 100))
def test_col2im_is_the_adjoint_of_im2col(N, C, H, W, kh, kw, sh, sw, ph, pw, seed):
    if kh > H + 2 * ph or kw > W + 2 * pw:
        return
    x = rand((N, C, H, W), seed=seed)
    cols = im2col(x, (kh, kw), (sh, sw), (ph, pw))
    y = rand(cols.shape, seed=seed + 1)
    back = col2im(y, (H, W), (kh, kw), (sh, sw), (ph, pw))
    assert back.shape == x.shape
    np.testing.assert_allclose(np.sum(cols * y), np.sum(x * back), rtol=1e-10, atol=1e-10)


def test_col2im_counts_window_memberships():
    ones = np.ones((1, 1, 4, 5))
    counts = col2im(im2col(ones, 3, 1, 1), (4, 5), 3, 1, 1)[0, 0]
    expected = np.array([[4, 6, 6, 6, 4], [6, 9, 9, 9, 6], [6, 9, 9, 9, 6], [4, 6, 6, 6, 4]])
    np.testing.assert_array_equal(counts, expected)
    strided = col2im(im2col(ones, 2, 2, 0), (4, 5), 2, 2, 0)[0, 0]  # non-overlapping: 0 or 1
    np.testing.assert_array_equal(strided, [[1, 1, 1, 1, 0]] * 4)



@pytest.mark.parametrize("padding", [0, 1])
def test_col2im_returns_a_new_contiguous_array(padding):
    cols = rand((2, 3 * 9, 5 * 4 if padding else 3 * 2), 1)
    out = col2im(cols, (5, 4), 3, 1, padding)
    assert out.flags["C_CONTIGUOUS"], "col2im's result must be C-contiguous (its contract), got a strided view"
    assert not np.shares_memory(out, cols), "col2im's result must be a new array"

@pytest.mark.parametrize("fn", ["im2col", "col2im"])
def test_no_python_loop_runs_over_output_positions(fn):
    """The module's systems rule: numpy loops over positions, Python at most over kernel offsets."""
    def steps(n):
        if fn == "im2col":
            return python_steps(im2col, np.zeros((1, 2, n, n)), 3)
        return python_steps(col2im, np.zeros((1, 2 * 9, (n - 2) ** 2)), (n, n), 3)

    small, large = steps(6), steps(20)
    assert large <= small + 10, (f"{fn} ran {small} Python steps on a 6x6 image and {large} on a 20x20 one: "
                                 "a Python loop runs over the output positions (vectorise it with numpy)")


def test_the_windows_view_is_read_only():
    view = _windows(np.zeros((1, 1, 5, 5)), (3, 3), (1, 1))
    assert not view.flags.writeable, "_windows must ask as_strided for writeable=False: the windows overlap"

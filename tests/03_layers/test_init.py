"""nn.init: gains, fans, and the distributions' moments with tolerances from the sample size.

For n independent draws with variance s2 and fourth central moment m4, the sample mean has
standard error sqrt(s2 / n) and the sample variance sqrt((m4 - s2**2) / n). The checks allow
5 standard errors (fixed seeds: deterministic; a wrong formula is off by far more).
"""
import math

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import init

N_OUT, N_IN = 300, 500  # 150,000 draws


def check_moments(values, var, kurtosis, mean=0.0):
    """kurtosis = m4 / var**2: 9/5 for a uniform distribution, 3 for a normal one."""
    v = np.asarray(values, dtype=np.float64).ravel()
    n = v.size
    mean_ok, var_ok = 5 * math.sqrt(var / n), 5 * math.sqrt((kurtosis - 1) * var ** 2 / n)  # five standard errors
    assert abs(v.mean() - mean) < mean_ok, f"the {n} draws' mean is {v.mean():.6g}; expected {mean:g} (within {mean_ok:.2g})"
    assert abs(v.var() - var) < var_ok, (f"the {n} draws' variance is {v.var():.6g}; expected {var:.6g} "
                                         f"(std {math.sqrt(var):.6g}, within {var_ok:.2g} of the variance)")


def check_uniform(values, bound):
    v = np.abs(np.asarray(values)).ravel()
    assert v.max() <= bound, f"a draw of magnitude {v.max():.6g} lies beyond the bound {bound:.6g}"
    assert v.max() > bound * (1 - 20 / v.size), (f"the largest of {v.size} draws, {v.max():.6g}, stays far below "
                                                  f"the bound {bound:.6g}: the draws should reach close to it")
    check_moments(values, bound ** 2 / 3, 9 / 5)


@pytest.mark.parametrize("name, param", [("linear", None), ("conv1d", None), ("conv2d", None),
                                         ("conv_transpose3d", None), ("sigmoid", None), ("tanh", None),
                                         ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
                                         ("leaky_relu", 1), ("selu", None)])
def test_calculate_gain_parity(torch, name, param):
    assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param), rel=1e-15)


def test_calculate_gain_values_and_errors():
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.5) == pytest.approx(math.sqrt(2 / 1.25))
    with pytest.raises(ValueError, match="swish"):  # the message names the unknown nonlinearity
        init.calculate_gain("swish")
    with pytest.raises(ValueError):
        init.calculate_gain("leaky_relu", True)


def test_uniform_and_normal_moments_and_in_place():
    tt.manual_seed(0)
    w = nn.Parameter(tt.zeros(N_OUT, N_IN))
    storage = w._storage
    assert init.uniform_(w, -0.5, 1.5) is w
    assert w._storage is storage and w.grad_fn is None and w.requires_grad and tt.is_grad_enabled()
    v = w.numpy()
    assert v.min() >= -0.5 and v.max() < 1.5
    check_moments(v, 4 / 12, 9 / 5, mean=0.5)
    init.normal_(w, mean=2.0, std=0.3)
    check_moments(w.numpy(), 0.09, 3.0, mean=2.0)
    assert w.dtype == tt.float32


def test_constant_zeros_ones():
    w = nn.Parameter(tt.randn(3, 4))
    assert init.zeros_(w) is w and not w.numpy().any()
    init.ones_(w)
    assert (w.numpy() == 1).all()
    init.constant_(w, 0.25)
    assert (w.numpy() == 0.25).all() and w.grad_fn is None


@pytest.mark.parametrize("shape, fans", [((3, 5), (5, 3)), ((8, 4, 3, 3), (36, 72)), ((6, 2, 5), (10, 30)),
                                          ((2, 3, 1, 4, 2), (24, 16))])
def test_calculate_fan_in_and_fan_out_counts_the_kernel(shape, fans):
    from tinytorch.nn.init import _calculate_fan_in_and_fan_out

    got = _calculate_fan_in_and_fan_out(tt.zeros(*shape))
    assert got == fans and all(type(f) is int for f in got), (shape, got)


def test_fans_via_xavier_bounds_for_linear_and_conv_shapes():
    tt.manual_seed(1)
    w = tt.zeros(N_OUT, N_IN)
    init.xavier_uniform_(w)
    check_uniform(w.numpy(), math.sqrt(6 / (N_IN + N_OUT)))
    conv = tt.zeros(64, 32, 3, 3)  # fan_in 32*9, fan_out 64*9
    init.xavier_uniform_(conv, gain=init.calculate_gain("relu"))
    check_uniform(conv.numpy(), math.sqrt(2) * math.sqrt(6 / (32 * 9 + 64 * 9)))
    with pytest.raises(ValueError, match="fewer than 2"):
        init.xavier_uniform_(tt.zeros(5))


def test_xavier_normal_moments():
    tt.manual_seed(2)
    w = tt.zeros(N_OUT, N_IN)
    init.xavier_normal_(w, gain=5 / 3)
    check_moments(w.numpy(), (5 / 3) ** 2 * 2 / (N_IN + N_OUT), 3.0)


@pytest.mark.parametrize("mode, nonlinearity, a", [("fan_in", "relu", 0), ("fan_out", "relu", 0),
                                                   ("fan_in", "leaky_relu", 0.1), ("fan_in", "leaky_relu", math.sqrt(5)),
                                                   ("fan_out", "tanh", 0)])
def test_kaiming_uniform_and_normal(mode, nonlinearity, a):
    tt.manual_seed(3)
    fan = N_IN if mode == "fan_in" else N_OUT
    gain = math.sqrt(2 / (1 + a ** 2)) if nonlinearity == "leaky_relu" else (math.sqrt(2) if nonlinearity == "relu" else 5 / 3)
    std = gain / math.sqrt(fan)
    w = tt.zeros(N_OUT, N_IN)
    assert init.kaiming_uniform_(w, a=a, mode=mode, nonlinearity=nonlinearity) is w
    check_uniform(w.numpy(), math.sqrt(3) * std)
    init.kaiming_normal_(w, a=a, mode=mode, nonlinearity=nonlinearity)
    check_moments(w.numpy(), std ** 2, 3.0)


@pytest.mark.parametrize("mode, fan", [("fan_in", 36), ("fan_out", 72)])
@pytest.mark.parametrize("nonlinearity, a, gain", [("relu", 0, math.sqrt(2)), ("leaky_relu", 0.5, math.sqrt(1.6)),
                                                   ("leaky_relu", math.sqrt(5), math.sqrt(1 / 3)), ("tanh", 0, 5 / 3)])
def test_kaiming_std_is_the_gain_over_the_root_of_the_chosen_fan(mode, fan, nonlinearity, a, gain):
    """The number both Kaiming initialisers draw with, on a conv weight (8, 4, 3, 3) whose
    fans differ: fan_in 4 * 9 = 36, fan_out 8 * 9 = 72."""
    from tinytorch.nn.init import _kaiming_std

    got = _kaiming_std(tt.zeros(8, 4, 3, 3), a, mode, nonlinearity)
    assert math.isclose(got, gain / math.sqrt(fan), rel_tol=1e-12), (got, gain / math.sqrt(fan))


def test_kaiming_normal_default_is_he_for_relu():
    tt.manual_seed(4)
    w = tt.zeros(N_OUT, N_IN)
    init.kaiming_normal_(w)
    check_moments(w.numpy(), 2 / N_IN, 3.0)


def test_kaiming_std_refuses_an_unknown_mode():
    from tinytorch.nn.init import _kaiming_std

    with pytest.raises(ValueError, match="fan_avg"):
        _kaiming_std(tt.zeros(N_OUT, N_IN), 0, "fan_avg", "relu")


def test_seeded_initialisation_is_reproducible():
    tt.manual_seed(123)
    a = init.kaiming_uniform_(tt.zeros(20, 30)).numpy().copy()
    tt.manual_seed(123)
    b = init.kaiming_uniform_(tt.zeros(20, 30)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, init.kaiming_uniform_(tt.zeros(20, 30)).numpy())


def test_float64_tensors_stay_float64():
    w = tt.zeros(50, 40, dtype=tt.float64)
    init.xavier_normal_(w)
    assert w.dtype == tt.float64 and w.numpy().std() > 0


def _empty_unchanged(fn):
    for w in (tt.zeros(0, 5), tt.zeros(0)):  # a 1-D one has no fans: the emptiness is checked first
        assert fn(w) is w and w.shape in ((0, 5), (0,))


def test_xavier_uniform_returns_an_empty_tensor_unchanged():
    _empty_unchanged(init.xavier_uniform_)


def test_xavier_normal_returns_an_empty_tensor_unchanged():
    _empty_unchanged(init.xavier_normal_)


def test_kaiming_uniform_returns_an_empty_tensor_unchanged():
    _empty_unchanged(init.kaiming_uniform_)


def test_kaiming_normal_returns_an_empty_tensor_unchanged():
    _empty_unchanged(init.kaiming_normal_)


def test_no_grad_copy_restores_grad_mode_after_a_failed_fill():
    """The in-place fills switch recording off for the copy and must switch it back even
    when the copy raises (a shape that does not broadcast), or autograd stays off."""
    w = nn.Parameter(tt.zeros(2))
    assert tt.is_grad_enabled()
    try:
        with pytest.raises(ValueError):
            init.constant_(w, np.ones(3))
        assert tt.is_grad_enabled(), "grad mode must be restored after a failed copy"
    finally:
        tt.set_grad_enabled(True)  # a failure here must not switch autograd off for later tests
    assert w.tolist() == [0.0, 0.0]
    tt.set_grad_enabled(False)
    try:
        init.ones_(w)
        assert not tt.is_grad_enabled(), "a copy made with grad mode off leaves it off"
    finally:
        tt.set_grad_enabled(True)


def test_calculate_gain_leaky_relu_with_slope_zero_is_relus():
    assert init.calculate_gain("leaky_relu", 0) == pytest.approx(math.sqrt(2.0), rel=1e-15)


def test_xavier_uniform_scales_by_the_gain():
    tt.manual_seed(6)
    w = init.xavier_uniform_(tt.zeros(N_OUT, N_IN), gain=2.0)
    check_moments(w.numpy(), 4 * 2 / (N_IN + N_OUT), 1.8)

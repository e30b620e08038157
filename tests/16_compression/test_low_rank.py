"""Low-rank factorisation by truncated SVD: full rank reproduces the layer, the error falls
with the rank and equals the dropped singular values (Eckart-Young)."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import compression as C
from tinytorch import nn


@pytest.mark.parametrize("shape", [(12, 8), (5, 9), (6, 6)])
def test_low_rank_factors_full_rank_reproduces(shape):
    w = np.random.default_rng(sum(shape)).standard_normal(shape)
    r = min(shape)
    A, B = C.low_rank_factors(w, r)
    assert A.shape == (r, shape[1]) and B.shape == (shape[0], r), f"expected A {(r, shape[1])}, B {(shape[0], r)}"
    np.testing.assert_allclose(B @ A, w, rtol=1e-10, atol=1e-12, err_msg="B @ A must equal W at full rank")


def test_low_rank_factors_error_decreases_and_equals_dropped_singular_values(torch):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((20, 14)) @ np.diag(0.7 ** np.arange(14)) @ rng.standard_normal((14, 14))
    sv = torch.linalg.svdvals(torch.tensor(w)).numpy()
    errors = []
    for r in range(1, 15):
        A, B = C.low_rank_factors(w, r)
        errors.append(np.linalg.norm(w - B @ A))
        np.testing.assert_allclose(errors[-1], np.sqrt((sv[r:] ** 2).sum()), rtol=1e-7, atol=1e-9,
                                   err_msg=f"rank {r}: the error must be sqrt(sum of dropped σ²)")
    assert all(a > b for a, b in zip(errors, errors[1:])), f"the error must fall with the rank: {errors}"


def test_low_rank_factors_split_and_dtype():
    w = np.random.default_rng(3).standard_normal((7, 5)).astype(np.float32)
    A, B = C.low_rank_factors(w, 3)
    assert A.dtype == np.float32 and B.dtype == np.float32, "the factors keep the weight's dtype"
    np.testing.assert_allclose(np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=0), rtol=1e-5,
                               err_msg="sqrt(σ) on each side: row norms of A equal column norms of B")
    with pytest.raises(ValueError, match="rank"):
        C.low_rank_factors(w, 6)


def test_low_rank_factors_linear_layers():
    tt.manual_seed(0)
    layer = nn.Linear(10, 6)
    x = tt.randn(4, 10)
    full = C.low_rank_linear(layer, 6)
    np.testing.assert_allclose(full(x).numpy(), layer(x).numpy(), rtol=1e-4, atol=1e-5,
                               err_msg="the full-rank factorisation reproduces the layer")
    thin = C.low_rank_linear(layer, 2)
    assert C.count_parameters(thin) == 2 * (10 + 6) + 6, "rank r: r·(in + out) weights + the bias"
    assert thin(x).shape == (4, 6), "the factorised layer keeps the output shape"
    errs = [np.abs(C.low_rank_linear(layer, r)(x).numpy() - layer(x).numpy()).max() for r in (1, 3, 6)]
    assert errs[0] > errs[1] > errs[2], f"output error falls with the rank: {errs}"

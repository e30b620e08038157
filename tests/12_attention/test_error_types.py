"""Attention's shape errors are catchable as PyTorch raises them (RuntimeError) and as numpy
does (ValueError)."""
import pytest

import tinytorch as tt
from tinytorch.nn.functional import scaled_dot_product_attention as sdpa

q = tt.randn(2, 4, 8)
k = tt.randn(2, 5, 8)
v = tt.randn(2, 5, 6)

CASES = {
    "both attn_mask and is_causal": lambda: sdpa(q, k, v, attn_mask=tt.ones(4, 5, dtype=tt.bool_), is_causal=True),
    "E differs": lambda: sdpa(q, tt.randn(2, 5, 7), v),
    "S differs": lambda: sdpa(q, k, tt.randn(2, 3, 6)),
    "mask does not broadcast": lambda: sdpa(q, k, v, attn_mask=tt.ones(3, 5, dtype=tt.bool_)),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_shape_errors_are_runtime_and_value_errors(case):
    ok = sdpa(q, k, v)  # fitting shapes: no error
    assert ok.shape == (2, 4, 6), f"attention of (2, 4, 8), (2, 5, 8), (2, 5, 6): shape {ok.shape}, expected (2, 4, 6)"
    with pytest.raises(RuntimeError) as info:
        CASES[case]()
    assert isinstance(info.value, ValueError), \
        f"{case}: raised {type(info.value).__name__}, expected a RuntimeError that is also a ValueError"
    assert isinstance(info.value, tt.ShapeError)


def test_mask_and_is_causal_is_a_runtime_error_as_in_pytorch(torch):
    assert sdpa(q, k, v, is_causal=True).shape == (2, 4, 6), "is_causal alone works"
    for m, boolean in ((torch, torch.bool), (tt, tt.bool_)):
        qt, kt, vt = m.randn(2, 4, 8), m.randn(2, 4, 8), m.randn(2, 4, 6)
        with pytest.raises(RuntimeError):
            m.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=m.ones(4, 4, dtype=boolean),
                                                         is_causal=True)
    with pytest.raises(ValueError, match="is_causal"):  # a ShapeError: also a ValueError
        sdpa(q, k, v, attn_mask=tt.ones(4, 5, dtype=tt.bool_), is_causal=True)

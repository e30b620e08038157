"""Flatten equals torch.nn.Flatten and passes gradients through."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.nn import Flatten


@pytest.mark.parametrize("start, end", [(1, -1), (0, -1), (0, 2), (2, 3), (1, 2), (-3, -2)])
def test_flatten_equals_pytorch(torch, start, end):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    ours = Flatten(start, end)(tt.tensor(x))
    ref = torch.nn.Flatten(start, end)(torch.from_numpy(x))
    assert ours.shape == tuple(ref.shape)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_flatten_default_and_gradient():
    x = tt.randn(4, 2, 3, 3, requires_grad=True)
    y = Flatten()(x)
    assert y.shape == (4, 18)
    (y * tt.arange(18.0)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(np.arange(18.0).reshape(2, 3, 3), (4, 2, 3, 3)))
    assert list(Flatten().parameters()) == []

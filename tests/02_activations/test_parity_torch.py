"""Parity with PyTorch's torch.nn.functional, in float64 (tight) and float32."""
import math

import numpy as np
import pytest

import tinytorch as tt
import tinytorch.nn.functional as F

rng = np.random.default_rng(7)
A = np.concatenate([rng.standard_normal(200) * 4, np.linspace(-12, 12, 97), [0.0, -0.0, 1e-9, -1e-9]])
M = rng.standard_normal((3, 4, 5)) * 5

CASES = [
    ("relu", lambda t: F.relu(t), lambda tf, x: tf.relu(x)),
    ("leaky_relu", lambda t: F.leaky_relu(t), lambda tf, x: tf.leaky_relu(x)),
    ("leaky_relu_0.3", lambda t: F.leaky_relu(t, 0.3), lambda tf, x: tf.leaky_relu(x, 0.3)),
    ("leaky_relu_2", lambda t: F.leaky_relu(t, 2.0), lambda tf, x: tf.leaky_relu(x, 2.0)),
    ("sigmoid", lambda t: F.sigmoid(t), lambda tf, x: tf.sigmoid(x)),
    ("tanh", lambda t: F.tanh(t), lambda tf, x: tf.tanh(x)),
    ("gelu", lambda t: F.gelu(t), lambda tf, x: tf.gelu(x)),
    ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh"), lambda tf, x: tf.gelu(x, approximate="tanh")),
]


@pytest.mark.parametrize("name, ours, theirs", CASES, ids=[c[0] for c in CASES])
def test_elementwise_parity_float64(torch, name, ours, theirs):
    expected = theirs(torch.nn.functional, torch.tensor(A)).numpy()
    got = ours(tt.tensor(A))
    assert got.dtype == tt.float64
    # torch's GELU computes 1 + erf(x/sqrt 2), which cancels for x << 0; atol covers that
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-15,
                               err_msg=f"{name} against PyTorch in float64")


@pytest.mark.parametrize("name, ours, theirs", CASES, ids=[c[0] for c in CASES])
def test_elementwise_parity_float32(torch, name, ours, theirs):
    a32 = A.astype(np.float32)
    got = ours(tt.tensor(a32))
    assert got.dtype == tt.float32
    # against the exact values (torch in float64 on the same float32 inputs): a few ulps
    exact = theirs(torch.nn.functional, torch.tensor(a32.astype(np.float64))).numpy()
    if name == "gelu":  # torch's float64 GELU cancels too (1 + erf); the exact values use erfc
        exact = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in a32.astype(np.float64)])
    np.testing.assert_allclose(got.numpy(), exact.astype(np.float32), rtol=2e-6, atol=1e-37,  # atol: subnormals
                               err_msg=f"{name} in float32 against the exact values")
    # against torch's own float32 kernels, which round differently (its GELU computes
    # 1 + erf in float32 and loses relative accuracy for x < -3): absolute tolerance
    expected = theirs(torch.nn.functional, torch.tensor(a32)).numpy()
    assert expected.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), expected, rtol=2e-6, atol=1e-6,
                               err_msg=f"{name} in float32 against PyTorch's float32 kernel")


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_softmax_log_softmax_parity(torch, dim):
    tm = torch.tensor(M)
    np.testing.assert_allclose(F.softmax(tt.tensor(M), dim).numpy(), torch.softmax(tm, dim).numpy(), rtol=1e-12,
                               err_msg=f"softmax(dim={dim}) in float64 against PyTorch")
    np.testing.assert_allclose(F.log_softmax(tt.tensor(M), dim).numpy(), torch.log_softmax(tm, dim).numpy(),
                               rtol=1e-12, atol=1e-14, err_msg=f"log_softmax(dim={dim}) in float64 against PyTorch")
    m32 = M.astype(np.float32)
    np.testing.assert_allclose(F.softmax(tt.tensor(m32), dim).numpy(),
                               torch.softmax(torch.tensor(m32), dim).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.log_softmax(tt.tensor(m32), dim).numpy(),
                               torch.log_softmax(torch.tensor(m32), dim).numpy(), rtol=1e-5, atol=1e-5)


def test_parity_at_extreme_float32_inputs(torch):
    x = np.array([[-1e4, -500.0, -50.0, 0.0, 50.0, 500.0, 1e4]], dtype=np.float32)
    tx = torch.tensor(x)
    tf = torch.nn.functional
    pairs = [
        (F.sigmoid(tt.tensor(x)), torch.sigmoid(tx)),
        (F.tanh(tt.tensor(x)), torch.tanh(tx)),
        (F.gelu(tt.tensor(x)), tf.gelu(tx)),
        (F.gelu(tt.tensor(x), approximate="tanh"), tf.gelu(tx, approximate="tanh")),
        (F.softmax(tt.tensor(x), dim=1), torch.softmax(tx, 1)),
        (F.log_softmax(tt.tensor(x), dim=1), torch.log_softmax(tx, 1)),
        (F.leaky_relu(tt.tensor(x), 0.2), tf.leaky_relu(tx, 0.2)),
    ]
    names = ["sigmoid", "tanh", "gelu", "gelu tanh", "softmax", "log_softmax", "leaky_relu 0.2"]
    for name, (ours, theirs) in zip(names, pairs):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-30,
                                   err_msg=f"{name} at {x.tolist()[0]} (float32) against PyTorch")

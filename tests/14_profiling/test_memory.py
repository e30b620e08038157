"""saved_activation_bytes: each saved buffer once (views and diamonds), and the training
memory estimate against the measured gradients and Adam state."""
import numpy as np

import tinytorch as tt
from tinytorch import nn
from tinytorch.nn import functional as F
from tinytorch.profiler import peak_memory, saved_activation_bytes, training_memory


def test_saved_activation_bytes_views_count_once():
    w = tt.tensor(np.ones((4, 3), dtype=np.float32), requires_grad=True)
    x = tt.tensor(np.ones((5, 4), dtype=np.float32))
    h = (x @ w).relu()
    v = h.reshape(15)[3:]
    got = saved_activation_bytes((v * v).sum())
    assert type(got) is int, f"expected a Python int (bytes are whole), got {type(got).__name__}"
    assert got == 60 + 60 + 48 + 4, (
        f"expected matmul 60 + relu 60 + mul 48 + sum 4 = 172 bytes, got {got}: the views (reshape, slice) add 0, and "
        f"each node counts once though `v * v` reaches the view twice (a walk that visits a node per path counts it "
        f"again)")
    got = saved_activation_bytes(h.T.reshape(15).sum())
    assert got == 60 + 60 + 60 + 4, f"expected the copy of a transposed reshape to count (184 bytes), got {got}"


def test_saved_activation_bytes_diamond_and_leaf():
    w = tt.tensor(np.ones((4, 3), dtype=np.float32), requires_grad=True)
    h = tt.ones(2, 4) @ w
    got = saved_activation_bytes(h + h)
    assert got == 24 + 24, f"expected a diamond's node once: 24 + 24 bytes, got {got}"
    assert saved_activation_bytes(tt.ones(3)) == 0, "expected 0 bytes for a tensor without a graph"
    got = saved_activation_bytes(w * 2.0)
    assert got == 48, f"expected one node (48 bytes) on a leaf, got {got}"


def test_saved_activation_bytes_follows_every_input():
    x = tt.tensor(np.ones((5, 4), dtype=np.float32))
    w = tt.tensor(np.ones((4, 3), dtype=np.float32), requires_grad=True)
    h = x @ w                                  # 60 bytes
    res = h + (h * 3.0).tanh()                 # a residual: the branch is the add's second input
    assert saved_activation_bytes(res.sum()) == 60 * 4 + 4, "matmul, mul, tanh, add and sum"
    both = (h * 2.0) * (h * 5.0).relu()        # a product of two branches
    assert saved_activation_bytes(both) == 60 * 5, "matmul, two muls, relu and the product"


def test_saved_activation_bytes_of_an_mlp_by_hand():
    tt.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 3))
    out = net(tt.randn(16, 10))
    # matmul, add, relu of (16, 8); matmul, add of (16, 3); the W.T views add nothing
    expected = (16 * 8 * 4) * 3 + (16 * 3 * 4) * 2
    got = saved_activation_bytes(out)
    assert got == expected, f"expected the 5 outputs of matmul/add/relu/matmul/add = {expected} bytes (views 0), got {got}"


def test_saved_activation_bytes_training_memory_matches_measured_state():
    tt.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 9), nn.ReLU(), nn.Linear(9, 4))
    opt = tt.optim.Adam(net.parameters(), lr=1e-3)
    x, y = tt.randn(8, 12), tt.randint(0, 4, (8,))
    loss = F.cross_entropy(net(x), y)
    est = training_memory(net, loss, "adam")
    assert est["activations"] == saved_activation_bytes(loss) > 0, "expected the estimate's activations from the graph walk"
    loss.backward()
    opt.step()
    grads = sum(p.grad.nbytes for p in net.parameters())
    state = sum(s[k].nbytes for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq"))
    assert (est["gradients"], est["optimizer_state"]) == (grads, state), \
        f"expected the estimate (grads {est['gradients']}, Adam {est['optimizer_state']}) = measured ({grads}, {state})"


def test_saved_activation_bytes_below_forward_peak():
    tt.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32))
    x = tt.randn(256, 64)
    out, peak = peak_memory(lambda: net(x))
    est = saved_activation_bytes(out)
    assert est == 256 * (128 * 3 + 32 * 2) * 4, f"expected 5 saved outputs of 256 rows, got {est}"
    assert 0 < est <= peak, f"expected the saved outputs ({est} bytes) to fit in the forward's measured peak ({peak})"


def test_saved_activation_bytes_walks_a_chain_deeper_than_the_recursion_limit():
    import sys

    x = tt.tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    n = 3 * sys.getrecursionlimit()
    for _ in range(n):
        x = x + 1.0
    assert saved_activation_bytes(x) == n * 8

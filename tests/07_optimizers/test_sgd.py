"""SGD equals torch.optim.SGD step by step: momentum, dampening, Nesterov, weight decay, maximize."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch.optim import SGD

CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.5),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.1),
    dict(lr=0.03, momentum=0.9, weight_decay=0.05, nesterov=True),
    dict(lr=0.03, momentum=0.7, dampening=0.2, weight_decay=0.01),
    dict(lr=0.1, maximize=True),
    dict(lr=0.02, momentum=0.9, weight_decay=0.1, maximize=True),
    dict(lr=0.02, momentum=0.9, nesterov=True, maximize=True),
]
IDS = ["-".join(f"{k}={v}" for k, v in c.items()) for c in CONFIGS]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("config", CONFIGS, ids=IDS)
def test_sgd_matches_torch_every_step(torch, make_pair, config, dtype):
    pair = make_pair(dtype=dtype)
    pair.run(SGD(pair.ours, **config), torch.optim.SGD(pair.theirs, foreach=False, **config))


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.get("momentum")],
                         ids=[i for c, i in zip(CONFIGS, IDS) if c.get("momentum")])
def test_momentum_buffer_matches_torch(torch, make_pair, config):
    pair = make_pair(steps=6)
    ours, theirs = SGD(pair.ours, **config), torch.optim.SGD(pair.theirs, foreach=False, **config)
    for k in range(6):
        pair.set_grads(k)
        ours.step()
        theirs.step()
        for p, q in zip(pair.ours, pair.theirs):
            np.testing.assert_allclose(ours.state[p]["momentum_buffer"].numpy(),
                                       theirs.state[q]["momentum_buffer"].numpy(), rtol=1e-11, atol=1e-13)


def test_first_momentum_buffer_is_a_copy_of_the_first_gradient():
    p = tt.tensor([1.0, -2.0, 3.0], dtype="float64", requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9, dampening=0.5)
    g = np.array([0.5, 0.25, -1.0])
    p.grad = tt.tensor(g)
    opt.step()
    buf = opt.state[p]["momentum_buffer"]
    np.testing.assert_array_equal(buf.numpy(), g)  # no dampening on the first step
    assert buf._storage is not p.grad._storage, "the buffer must be a copy, not the gradient itself"
    np.testing.assert_allclose(p.numpy(), [1.0, -2.0, 3.0] - 0.1 * g, rtol=1e-15)
    p.grad = tt.tensor(g)
    opt.step()
    np.testing.assert_allclose(buf.numpy(), 0.9 * g + 0.5 * g, rtol=1e-15)


def test_plain_sgd_closed_form_and_no_state():
    x0 = np.random.default_rng(3).standard_normal((5, 2))
    p = tt.tensor(x0, requires_grad=True)
    opt = SGD([p], lr=0.25)
    g = np.random.default_rng(4).standard_normal((5, 2))
    for _ in range(3):
        p.grad = tt.tensor(g)
        opt.step()
    np.testing.assert_allclose(p.numpy(), x0 - 3 * 0.25 * g, rtol=1e-13)
    assert not opt.state.get(p), "SGD without momentum keeps no state"


def test_update_is_in_place_and_leaves_grad_and_grad_mode_alone():
    p = tt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    alias = p.detach()  # shares p's storage
    storage = p._storage
    g = tt.tensor(np.ones((2, 3)))
    p.grad = g
    opt = SGD([p], lr=0.5, momentum=0.9, weight_decay=0.1)
    opt.step()
    assert p._storage is storage, "step() must update the parameter's own storage, not rebind it"
    np.testing.assert_array_equal(alias.numpy(), p.numpy())
    expected = np.arange(6.0).reshape(2, 3) - 0.5 * (1 + 0.1 * np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-14)
    assert p.grad is g and np.array_equal(g.numpy(), np.ones((2, 3))), "p.grad must not be modified"
    assert p.requires_grad and p.grad_fn is None and p.is_leaf
    assert tt.is_grad_enabled(), "step() must restore grad mode"


@pytest.mark.parametrize("name, options", [
    ("SGD", dict(weight_decay=0.1, maximize=True)),
    ("Adam", dict(weight_decay=0.1)),
    ("Adam", dict(weight_decay=0.1, maximize=True)),
    ("AdamW", dict(weight_decay=0.1, amsgrad=True, maximize=True)),
])
def test_step_leaves_grad_alone_with_weight_decay_and_maximize(name, options):
    """Decay and maximize change the step's gradient, never the .grad the caller owns."""
    cls = getattr(tt.optim, name)
    p = tt.tensor(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    g = tt.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
    p.grad = g
    cls([p], lr=0.1, **options).step()
    assert p.grad is g and np.array_equal(g.numpy(), np.linspace(-1.0, 1.0, 6).reshape(2, 3)), \
        f"{name}({options}).step() changed p.grad: {g.numpy().tolist()}"


def test_step_is_silent_about_grad_mode_off():
    p = tt.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=1.0)
    p.grad = tt.tensor([0.5])
    with tt.no_grad():
        opt.step()
        assert not tt.is_grad_enabled(), "step() must restore the caller's grad mode (off here)"
    assert p.item() == 0.5


def test_optimizer_step_runs_a_closure_that_calls_backward():
    """A closure recomputes the loss and its gradients, so step must run it with grad mode on."""
    q = tt.tensor([3.0], requires_grad=True)
    opt = SGD([q], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (q * q).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 9.0 and abs(q.item() - (3.0 - 0.1 * 6.0)) < 1e-6


def test_optimizer_step_gives_no_state_to_a_parameter_without_a_gradient():
    """The state holds what a parameter's updates need; one that was never updated has none
    (not even an empty entry: state_dict would save it, and memory counts would see it)."""
    p, q = tt.tensor([1.0], requires_grad=True), tt.tensor([2.0], requires_grad=True)
    opt = SGD([p, q], lr=0.1, momentum=0.9)
    p.grad = tt.tensor([1.0])
    opt.step()
    assert p in opt.state and q not in opt.state, list(opt.state.values())


def test_optimizer_step_returns_closure_loss():
    p = tt.tensor([2.0], requires_grad=True)
    opt = SGD([p], lr=0.5)
    calls = []

    def closure():
        calls.append(1)
        p.grad = tt.tensor([4.0])
        return 7.0

    assert opt.step(closure) == 7.0 and calls == [1]
    assert p.item() == 0.0

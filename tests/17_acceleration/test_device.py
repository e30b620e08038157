"""The cuda device: moves, mixed-device errors, Module.to, log_softmax on the device, and an MLP step
equal to the CPU's."""
from types import SimpleNamespace

import numpy as np
import pytest

import tinytorch
from tinytorch import nn
from tinytorch.cuda import kernels as K
from tinytorch.testing import arithmetic, run_fresh, spied

LOGITS = np.array([[1000.0, 999.0, 998.0, 990.0], [-1000.0, -1001.0, -1002.0, -1010.0],
                   [0.5, -0.25, 2.0, 0.0]], np.float32)  # rows near 1000, -1000 and 0 in one batch


def test_to_cuda_round_trip_keeps_values_and_dtype():
    for dtype in (tinytorch.float32, tinytorch.float64, tinytorch.int64):
        h = tinytorch.tensor([[1.5, -2.0, 3.0], [0.0, 5.0, -6.0]], dtype=dtype)
        d = h.to("cuda")
        assert d.device == "cuda" and str(d.device) == "cuda:0", f"expected device cuda:0, got {d.device}"
        assert d.dtype == h.dtype, f"the move keeps the dtype {h.dtype}, got {d.dtype}"
        back = d.cpu()
        assert back.device == "cpu", f"cpu() brings it back to the cpu, got {back.device}"
        assert back.dtype == h.dtype and back.tolist() == h.tolist(), "round trip cpu -> cuda -> cpu keeps values"
    assert h.cuda().device == "cuda" and h.to(device="cuda").device == "cuda", ".cuda() and to(device=) move too"
    assert h.cuda().cuda().device == "cuda", "moving to where it is keeps it there"
    one = tinytorch.tensor([2.5]).cuda()
    assert one.cpu().item() == 2.5, "a 1-element tensor survives the round trip"
    assert tinytorch.zeros(0, 3).cuda().cpu().shape == (0, 3), "an empty tensor survives the round trip"


def test_to_cuda_ops_run_and_stay_on_cuda():
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    d = tinytorch.tensor(x).cuda()
    cases = {"(2x + 1).relu()": ((d * 2 + 1).relu(), np.maximum(x * 2 + 1, 0)),
             "x @ x.T": (d @ d.T, x @ x.T), "x.sum(1)": (d.sum(dim=1), x.sum(axis=1)),
             "x.mean()": (d.mean(), x.mean()), "x.exp() / 3": (d.exp() / 3, np.exp(x) / 3),
             "x[1:].T - x[0]": ((d[1:].T - d[0][:, None]), x[1:].T - x[0][:, None])}
    for what, (got, want) in cases.items():
        assert got.device == "cuda", f"{what}: the result lives on cuda, got {got.device}"
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-6, err_msg=f"{what} on cuda")


def test_to_cuda_mixed_devices_raise():
    d = tinytorch.ones(2, 3).cuda()
    h = tinytorch.ones(2, 3)
    for what, fn in [("add", lambda: d + h), ("matmul", lambda: h @ d.T), ("mul", lambda: h * d)]:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cuda:0 and cpu"):
            fn()
    assert (d * 2).device == "cuda", "a Python number (a 0-d CPU tensor) may join a cuda op"
    assert (d + tinytorch.tensor(1.0)).cpu().tolist() == [[2.0] * 3] * 2, "a 0-d cpu tensor may join a cuda op"


def test_to_cuda_unsupported_op_says_so():
    d = tinytorch.ones(2, 3).cuda()
    assert (d + d).cpu().tolist() == [[2.0] * 3] * 2, "add runs on cuda"
    with pytest.raises(NotImplementedError, match="sqrt.*cuda"):
        d.sqrt()


def test_module_to_cuda_moves_parameters_in_place():
    lin = nn.Linear(3, 2)
    w = lin.weight
    assert lin.to("cuda") is lin, "Module.to returns the module"
    assert lin.weight is w and w.device == "cuda" and lin.bias.device == "cuda", "parameters move in place"
    out = lin(tinytorch.ones(4, 3).cuda())
    assert out.device == "cuda", f"the layer's output lives on cuda, got {out.device}"
    np.testing.assert_allclose(out.cpu().numpy(), np.ones((4, 3)) @ w.numpy().T + lin.bias.numpy(), rtol=1e-5,
                               err_msg="Linear on cuda")
    lin.to("cpu")
    assert w.device == "cpu", "and back"


def _twins(seed, sizes):
    tinytorch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    m1 = nn.Sequential(*layers)
    m2 = nn.Sequential(*[type(l)(l.in_features, l.out_features) if isinstance(l, nn.Linear) else nn.ReLU() for l in layers])
    for p, q in zip(m1.parameters(), m2.parameters()):
        q.data = p.numpy().copy()
    return m1, m2


def _step(model, x, y, loss_fn, device, steps=1):
    model.to(device)
    opt = tinytorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x.to(device)), y.to(device) if y.dtype.kind == "f" else y)
        loss.backward()
        losses.append(loss.cpu().item())
        grads.append([p.grad.cpu().numpy().copy() for p in model.parameters()])
        opt.step()
    return losses, grads, [p.cpu().numpy().copy() for p in model.parameters()], model


@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_to_cuda_mlp_training_step_equals_cpu(loss):
    rng = np.random.default_rng(2)
    x = tinytorch.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    if loss == "cross_entropy":
        loss_fn, y = nn.CrossEntropyLoss(), tinytorch.tensor(rng.integers(0, 3, 6))
    else:
        loss_fn, y = nn.MSELoss(), tinytorch.tensor(rng.standard_normal((6, 3)).astype(np.float32))
    cpu, gpu = _twins(0, (5, 7, 3))
    lc, gc, pc, _ = _step(cpu, x, y, loss_fn, "cpu")
    lg, gg, pg, model = _step(gpu, x, y, loss_fn, "cuda")
    assert all(p.device == "cuda" and p.grad.device == "cuda" for p in model.parameters()), \
        "parameters and gradients live on cuda"
    np.testing.assert_allclose(lg, lc, rtol=1e-5, err_msg=f"{loss}: loss, cuda against cpu")
    for step, (a_s, b_s) in enumerate(zip(gg, gc)):
        for i, (a, b) in enumerate(zip(a_s, b_s)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{loss}: step {step}, gradient of parameter {i}")
    for i, (a, b) in enumerate(zip(pg, pc)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{loss}: parameter {i} after the SGD step")


def test_to_cuda_backward_rules_run_on_cuda():
    rng = np.random.default_rng(3)
    a = tinytorch.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = tinytorch.tensor(rng.standard_normal((4,)).astype(np.float32) + 3, requires_grad=True)
    ac, bc = a.cuda(), b.cuda()
    ((ac * bc - ac / bc).exp().log().sum() + (-ac).mean()).backward()
    got = (a.grad.numpy().copy(), b.grad.numpy().copy())
    a.grad = b.grad = None
    ((a * b - a / b).exp().log().sum() + (-a).mean()).backward()
    np.testing.assert_allclose(got[0], a.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg="gradient of a, through the move back")
    np.testing.assert_allclose(got[1], b.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg="gradient of the broadcast b")


@pytest.mark.parametrize("dim", [1, 0])
def test_log_softmax_on_cuda_is_finite_and_equals_the_cpu(dim):
    got, host = spied(lambda v: K._log_softmax(tinytorch.tensor(v), dim), LOGITS)
    want = tinytorch.nn.functional.log_softmax(tinytorch.tensor(LOGITS), dim=dim).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"log_softmax over dim {dim} of logits "
                               "near 1000, -1000 and 0 in one batch")
    assert not arithmetic(host), f"_log_softmax computed on the host: {arithmetic(host)[:4]}"


def test_log_softmax_backward_on_cuda_equals_the_cpu():
    x = tinytorch.tensor(LOGITS, requires_grad=True)
    g = np.random.default_rng(5).standard_normal(LOGITS.shape).astype(np.float32)
    y = tinytorch.nn.functional.log_softmax(x, dim=1)
    y.backward(tinytorch.tensor(g))
    node = SimpleNamespace(attrs={"dim": 1}, output=y.detach().numpy().copy(), inputs=(x,))
    got, host = spied(lambda g, out: K._log_softmax_backward(SimpleNamespace(attrs=node.attrs, output=out,
                                                                             inputs=node.inputs), g), g, node.output)
    assert isinstance(got, tuple) and len(got) == 1, f"a tuple with one gradient, got {type(got).__name__}"
    np.testing.assert_allclose(got[0], x.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg="gradient of log_softmax, dim 1")
    assert not arithmetic(host), f"_log_softmax_backward computed on the host: {arithmetic(host)[:4]}"

def test_to_cuda_without_gpu_or_simulator_is_a_clear_error():
    """In a fresh process with the simulator off and the GPUs hidden, asking for cuda fails clearly;
    with the simulator on (or a GPU), the same move works and runs the copy kernel."""
    code = ("import tinytorch\n"
            "try:\n    tinytorch.ones(2).to('cuda')\nexcept RuntimeError as e:\n    print('ERROR:', e)\n")
    out, err = run_fresh(code, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    assert "ERROR:" in out and "NUMBA_ENABLE_CUDASIM=1" in out, \
        f"expected a RuntimeError naming NUMBA_ENABLE_CUDASIM=1, got: {out} {err[-500:]}"
    assert tinytorch.ones(2).to("cuda").cpu().tolist() == [1.0, 1.0], "with the simulator or a GPU the move works"

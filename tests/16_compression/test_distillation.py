"""The distillation loss equals PyTorch's KLDiv (log_target, batchmean) times T², values and
gradients; the teacher gets no gradient."""
import numpy as np
import pytest

import tinytorch as tt
from tinytorch import compression as C


def _torch_kd(torch, s, t, T):
    F = torch.nn.functional
    return F.kl_div(F.log_softmax(s / T, -1), F.log_softmax(t / T, -1), reduction="batchmean",
                    log_target=True) * T * T


@pytest.mark.parametrize("T", [1.0, 2.0, 4.0, 10.0])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_distillation_loss_equals_torch_kl_div(torch, T, dtype):
    rng = np.random.default_rng(int(T))
    s = (rng.standard_normal((8, 10)) * 3).astype(dtype)
    t = (rng.standard_normal((8, 10)) * 5).astype(dtype)
    so, to = tt.tensor(s, requires_grad=True), tt.tensor(t, requires_grad=True)
    st = torch.tensor(s, requires_grad=True)
    ours = C.distillation_loss(so, to, T)
    theirs = _torch_kd(torch, st, torch.tensor(t), T)
    assert ours.shape == (), f"the loss is a scalar, got shape {ours.shape}"
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours.item(), theirs.item(), **tol, err_msg=f"the distillation loss against PyTorch's KLDiv(batchmean) of the softened distributions, times the factor c(T) of section 5, at T={T}")
    ours.backward()
    theirs.backward()
    np.testing.assert_allclose(so.grad.numpy(), st.grad.numpy(), **tol, err_msg="gradient w.r.t. the student")
    assert to.grad is None, "no gradient may reach the teacher's logits"


def test_distillation_loss_batch_of_sequences(torch):
    rng = np.random.default_rng(9)
    s, t = rng.standard_normal((2, 5, 7)), rng.standard_normal((2, 5, 7))
    ours = C.distillation_loss(tt.tensor(s), tt.tensor(t), 3.0).item()
    theirs = _torch_kd(torch, torch.tensor(s).reshape(10, 7), torch.tensor(t).reshape(10, 7), 3.0).item()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, err_msg="(2, 5, C) logits average over the 10 rows")


def test_distillation_loss_zero_for_identical_and_errors():
    z = tt.tensor(np.random.default_rng(1).standard_normal((4, 6)))
    assert abs(C.distillation_loss(z, z, 2.0).item()) < 1e-12, "a student equal to its teacher has loss 0"
    far = C.distillation_loss(-z, z, 2.0).item()
    assert far > 0.1, f"a different student has a positive loss, got {far}"
    with pytest.raises(ValueError, match="temperature"):
        C.distillation_loss(z, z, 0.0)
    with pytest.raises(ValueError, match="shape"):
        C.distillation_loss(z, tt.tensor(np.zeros((4, 5))), 2.0)


def test_distillation_loss_is_finite_for_logits_far_apart():
    loss = C.distillation_loss(tt.tensor([[0.0, 240.0]]), tt.tensor([[240.0, 0.0]]), 2.0).item()
    assert np.isfinite(loss) and abs(loss - 480.0) < 1e-3 * 480, loss

"""state_dict / load_state_dict: round trip, copies, in-place loading, every error."""
import re
from collections import OrderedDict

import numpy as np
import pytest

import tinytorch as tt
from tinytorch import nn


def make(seed):
    tt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8), nn.GELU()), nn.Linear(8, 3))
    model[2][0].register_buffer("running", tt.randn(8))
    return model


KEYS = ["0.weight", "0.bias", "2.0.weight", "2.0.bias", "2.0.running", "3.weight", "3.bias"]
X = tt.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))


def test_state_dict_keys_order_and_values():
    model = make(0)
    sd = model.state_dict()
    assert isinstance(sd, OrderedDict) and list(sd) == KEYS
    for name, p in model.named_parameters():
        assert type(sd[name]) is tt.Tensor and not sd[name].requires_grad
        np.testing.assert_array_equal(sd[name].numpy(), p.numpy())
    np.testing.assert_array_equal(sd["2.0.running"].numpy(), model[2][0].running.numpy())
    assert list(model.state_dict(prefix="model")) == ["model." + k for k in KEYS]


def test_state_dict_values_are_copies_keep_vars_are_live():
    model = make(0)
    sd = model.state_dict()
    assert sd["0.weight"]._storage is not model[0].weight._storage
    before = sd["0.weight"].numpy().copy()
    tt.set_grad_enabled(False)
    model[0].weight.mul_(0.0)
    tt.set_grad_enabled(True)
    np.testing.assert_array_equal(sd["0.weight"].numpy(), before)
    live = model.state_dict(keep_vars=True)
    assert live["0.weight"] is model[0].weight and live["2.0.running"] is model[2][0].running


def test_state_dict_saves_a_shared_module_under_each_name():
    model = make(0)
    model.add_module("again", model[0])  # PyTorch saves a shared module under both names
    keys = list(model.state_dict())
    assert keys == KEYS + ["again.weight", "again.bias"]


def test_round_trip_gives_identical_outputs():
    a, b = make(0), make(1)
    assert not np.array_equal(a(X).numpy(), b(X).numpy())
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(b(X).numpy(), a(X).numpy())
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb
        np.testing.assert_array_equal(pa.numpy(), pb.numpy())


def test_load_state_dict_is_in_place_unrecorded_and_accepts_numpy():
    model = make(0)
    params = list(model.parameters())
    storages = [p._storage for p in params]
    sd = {k: v.numpy() * 2 for k, v in make(5).state_dict().items()}
    model.load_state_dict(sd)
    assert all(p is q for p, q in zip(params, model.parameters()))
    assert all(p._storage is s for p, s in zip(params, storages))
    assert all(p.requires_grad and p.grad_fn is None and p.is_leaf for p in params)
    np.testing.assert_allclose(model[0].weight.numpy(), sd["0.weight"], rtol=1e-7)
    assert tt.is_grad_enabled()


def test_load_state_dict_casts_to_the_parameter_dtype():
    model = make(0)
    sd = {k: v.numpy().astype(np.float64) for k, v in make(2).state_dict().items()}
    model.load_state_dict(sd)
    assert model[3].bias.dtype == tt.float32
    np.testing.assert_allclose(model[3].bias.numpy(), sd["3.bias"], rtol=1e-6)


def test_load_state_dict_shape_mismatch_names_key_and_both_shapes():
    model = make(0)
    sd = model.state_dict()
    sd["2.0.weight"] = tt.zeros(8, 7)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(sd)
    msg = str(info.value)
    assert "Sequential" in msg and "size mismatch for 2.0.weight" in msg
    assert "(8, 7)" in msg and "(8, 8)" in msg
    with pytest.raises(RuntimeError, match="size mismatch"):
        model.load_state_dict(sd, strict=False)  # shapes are checked even when not strict


def test_load_state_dict_missing_and_unexpected_keys():
    model = make(0)
    sd = model.state_dict()
    del sd["3.bias"]
    sd["4.weight"] = tt.zeros(1)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(sd)
    msg = str(info.value)
    # the contract: a line saying "Missing key(s)" and one saying "Unexpected key(s)", keys in double quotes
    assert re.search(r'Missing key\(s\)[^\n]*"3\.bias"', msg), msg
    assert re.search(r'Unexpected key\(s\)[^\n]*"4\.weight"', msg), msg
    assert '"4.weight"' not in re.search(r'Missing key\(s\)[^\n]*', msg).group(0), msg
    result = model.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["3.bias"] and result.unexpected_keys == ["4.weight"]
    assert result == (["3.bias"], ["4.weight"])


def test_load_state_dict_that_fails_changes_nothing():
    model, other = make(0), make(1)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    sd = other.state_dict()
    sd["3.bias"] = tt.zeros(4)  # the last key is wrong; the earlier ones must not be copied
    with pytest.raises(RuntimeError):
        model.load_state_dict(sd)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])


def test_state_dict_skips_none_parameters_and_non_persistent_buffers():
    lin = nn.Linear(3, 2, bias=False)
    lin.register_buffer("scratch", tt.zeros(3), persistent=False)
    assert list(lin.state_dict()) == ["weight"]
    fresh = nn.Linear(3, 2, bias=False)
    fresh.load_state_dict(lin.state_dict())
    np.testing.assert_array_equal(fresh.weight.numpy(), lin.weight.numpy())


def test_parity_with_torch_state_dict(torch):
    ours = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    rng = np.random.default_rng(3)  # values of our own, so the comparison does not depend on the initialisers
    ours.load_state_dict({k: rng.standard_normal(v.shape).astype(np.float32) for k, v in ours.state_dict().items()})
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    ours2 = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    ours2.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    with torch.no_grad():
        expected = theirs(torch.tensor(X.numpy())).numpy()
    np.testing.assert_allclose(ours2(X).numpy(), expected, rtol=1e-5, atol=1e-6)

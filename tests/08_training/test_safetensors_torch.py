"""Weights travel between tinytorch and PyTorch through safetensors files.

tinytorch's `save(model.state_dict(), path)` writes a safetensors file whose tensors are
named like the parameters, so PyTorch reads it with `safetensors.torch.load_file` and
`load_state_dict`; a file PyTorch wrote with `safetensors.torch.save_file` loads in tinytorch
with `load` and `load_state_dict`. Module 08 needs no later module, so here a whole checkpoint is read by PyTorch; the
GPT and CNN round trips live with modules 13 and 09.
"""
import numpy as np
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch import nn

RTOL, ATOL = 1e-4, 1e-5


def test_a_checkpoint_is_readable_by_pytorch(torch, tmp_path):
    """A whole checkpoint is a safetensors file too: PyTorch sees its tensors by path."""
    safetensors_torch = torch_reference.companion_module(torch, "safetensors.torch")
    from tinytorch.serialization import save_checkpoint
    tt.manual_seed(0)
    model = nn.Linear(3, 2)
    save_checkpoint(tmp_path / "run.ckpt", model, epoch=4)
    state = safetensors_torch.load_file(str(tmp_path / "run.ckpt"))
    assert sorted(state) == ["model/bias", "model/weight"]
    np.testing.assert_array_equal(state["model/weight"].numpy(), model.weight.numpy())

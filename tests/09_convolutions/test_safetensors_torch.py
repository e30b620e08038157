"""Weights travel between tinytorch and PyTorch through safetensors files.

tinytorch's `save(model.state_dict(), path)` writes a safetensors file whose tensors are
named like the parameters, so PyTorch reads it with `safetensors.torch.load_file` and
`load_state_dict`; a file PyTorch wrote with `safetensors.torch.save_file` loads in tinytorch
with `load` and `load_state_dict`. For a CNN of module 09's layers (BatchNorm buffers
included), the same input gives the same output on both sides
(float32 tolerance), in both directions. The PyTorch classes below mirror tinytorch's
parameter names exactly.
"""
import numpy as np
import torch_reference  # registered by tests/conftest.py

import tinytorch as tt
from tinytorch import nn
from tinytorch.serialization import load, save

RTOL, ATOL = 1e-4, 1e-5


# ---------------------------------------------------------------- the models, on both sides
class _TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.act = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(6 * 2 * 2, 5)

    def forward(self, x):
        x = self.pool(self.act(self.bn1(self.conv1(x))))
        return self.fc(self.flat(self.act(self.conv2(x))))


def _torch_cnn(torch):
    F = torch.nn

    class TinyCNN(F.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = F.Conv2d(1, 4, 3, padding=1)
            self.bn1 = F.BatchNorm2d(4)
            self.act = F.ReLU()
            self.pool = F.MaxPool2d(2)
            self.conv2 = F.Conv2d(4, 6, 3)
            self.flat = F.Flatten()
            self.fc = F.Linear(6 * 2 * 2, 5)

        def forward(self, x):
            x = self.pool(self.act(self.bn1(self.conv1(x))))
            return self.fc(self.flat(self.act(self.conv2(x))))

    return TinyCNN()


def _images(seed):
    return np.random.default_rng(seed).standard_normal((3, 1, 8, 8)).astype(np.float32)


# ---------------------------------------------------------------- tinytorch -> file -> PyTorch
def _ours_to_theirs(torch, tmp_path, ours, theirs):
    safetensors_torch = torch_reference.companion_module(torch, "safetensors.torch")
    path = tmp_path / "weights.safetensors"
    save(ours.state_dict(), path)
    state = safetensors_torch.load_file(str(path))
    assert set(state) == set(theirs.state_dict()), "the file's tensor names are PyTorch's names"
    theirs.load_state_dict(state)  # strict: every name and shape must match


def test_cnn_from_tinytorch_to_pytorch(torch, tmp_path):
    tt.manual_seed(0)
    ours = _TinyCNN()
    ours.train()
    for k in range(3):  # fill BatchNorm's running statistics: the buffers must travel too
        ours(tt.tensor(_images(10 + k) * 2 + 1))
    theirs = torch_reference.built_by(torch, _torch_cnn)
    _ours_to_theirs(torch, tmp_path, ours, theirs)
    assert int(theirs.bn1.num_batches_tracked) == 3
    x = _images(3)
    ours.eval()
    theirs.eval()
    with tt.no_grad():
        expected = ours(tt.tensor(x)).numpy()
    with torch.no_grad():
        got = theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


# ---------------------------------------------------------------- PyTorch -> file -> tinytorch
def _theirs_to_ours(torch, tmp_path, theirs, ours):
    safetensors_torch = torch_reference.companion_module(torch, "safetensors.torch")
    path = tmp_path / "from_torch.safetensors"
    # save_file refuses tensors sharing memory (the tied GPT head): store each as its own copy
    safetensors_torch.save_file({k: v.detach().clone().contiguous() for k, v in theirs.state_dict().items()},
                                str(path))
    state = load(path)
    assert all(isinstance(v, tt.Tensor) for v in state.values())
    assert set(state) == set(ours.state_dict())
    ours.load_state_dict(state)


def test_cnn_from_pytorch_to_tinytorch(torch, tmp_path):
    torch.manual_seed(0)
    theirs = torch_reference.built_by(torch, _torch_cnn)
    theirs.train()
    with torch.no_grad():
        for k in range(2):
            theirs(torch.from_numpy(_images(20 + k) * 3 - 1))
    tt.manual_seed(0)
    ours = _TinyCNN()
    _theirs_to_ours(torch, tmp_path, theirs, ours)
    assert int(ours.bn1.num_batches_tracked.item()) == 2
    x = _images(5)
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        expected = theirs(torch.from_numpy(x)).numpy()
    with tt.no_grad():
        got = ours(tt.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)



"""Issue 25's compatibility suite: small PyTorch programs written for the course, in the
idioms real projects use (tests/tito/compat/), each run under PyTorch and under the
reference tinytorch imported as torch, from the same weights: the same losses, step by
step (float64 programs to 1e-10, float32 ones to 1e-5)."""
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tito import build

ROOT = Path(__file__).resolve().parents[2]
COMPAT = Path(__file__).resolve().parent / "compat"
PROGRAMS = {  # name: the dtype its losses are computed in
    "gpt_split_view": "float32", "char_mlp": "float32", "cnn_sampler": "float32",
    "polynomial_function": "float64", "checkpoint_loop": "float64",
}


@pytest.fixture(scope="module")
def reference_build():
    return build.build_solutions(ROOT)


def _under_pytorch(name):
    sys.path.insert(0, str(COMPAT))
    try:
        torch.manual_seed(0)
        return importlib.import_module(name).main(torch)
    finally:
        sys.path.remove(str(COMPAT))


def _under_tinytorch(name, reference_build):
    env = {**os.environ, "PYTHONPATH": str(reference_build)}
    proc = subprocess.run([sys.executable, str(COMPAT / "run.py"), name], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, f"{name} failed under tinytorch:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_gives_pytorchs_losses_under_tinytorch(name, reference_build):
    theirs = _under_pytorch(name)
    ours = _under_tinytorch(name, reference_build)
    assert len(ours) == len(theirs) >= 20, f"{name}: {len(ours)} steps under tinytorch, {len(theirs)} under PyTorch"
    assert theirs[-1] < theirs[0], f"{name} does not train under PyTorch: the comparison would mean little"
    tol = dict(rtol=1e-10, atol=0) if PROGRAMS[name] == "float64" else dict(rtol=1e-5, atol=0)
    np.testing.assert_allclose(ours, theirs, **tol, err_msg=f"{name}: tinytorch's losses against PyTorch's")

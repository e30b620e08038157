"""The benchmark suite: tinytorch against PyTorch (CPU), workload by workload, in one process.

Run by `tito bench` (which sets the thread count before numpy and torch are imported and puts
the package to measure first on PYTHONPATH); standalone:

    PYTHONPATH=build/solutions python benchmarks/suite.py --out results.json [--quick]

Each workload builds the same model, data and optimizer in both frameworks and times one
step of each with module 19's paired comparison (`tinytorch.utils.benchmark.compare`:
A B A B ..., the median of the per-pair ratios), so machine noise hits both sides. A
workload that raises is reported as not run, with the error; no number is ever filled in.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


# --- the workloads ------------------------------------------------------------------------
# Each returns (a, b, a_label, b_label): two callables doing the same work. `lib` is the
# tinytorch or the torch module; their APIs agree, so one builder serves both.

def _data(lib, rng, *shape, dtype="float32"):
    return lib.tensor(rng.standard_normal(shape).astype(dtype))


def _labels(lib, rng, n, classes):
    return lib.tensor(rng.integers(0, classes, n).astype(np.int64))


def _training_step(lib, model, opt, x, y, loss_fn):
    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


def _mlp_step(lib, batch, sizes):
    rng = np.random.default_rng(0)
    layers = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(lib.nn.Linear(m, n))
        if i < len(sizes) - 2:
            layers.append(lib.nn.ReLU())
    model = lib.nn.Sequential(*layers)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _training_step(lib, model, opt, _data(lib, rng, batch, sizes[0]), _labels(lib, rng, batch, sizes[-1]),
                          lib.nn.functional.cross_entropy)


def _conv_fwd_bwd(lib):
    rng = np.random.default_rng(1)
    conv = lib.nn.Conv2d(3, 16, 3, padding=1)
    x = _data(lib, rng, 32, 3, 32, 32)

    def step():
        conv.zero_grad()
        conv(x).sum().backward()
    return step


def _digits_cnn_step(lib):
    rng = np.random.default_rng(2)
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 2 * 2, 10))
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    return _training_step(lib, model, opt, _data(lib, rng, 64, 1, 8, 8), _labels(lib, rng, 64, 10),
                          nn.functional.cross_entropy)


def _gpt_step(lib, torch_side, d_model=64, n_layers=2, batch=16, approximate="tanh"):
    rng = np.random.default_rng(3)
    vocab, T, B = 65, 64, batch
    if torch_side:
        sys.path.insert(0, str(HERE))
        from torch_gpt import TorchGPT

        model = TorchGPT(vocab, block_size=T, d_model=d_model, n_heads=4, n_layers=n_layers, approximate=approximate)
    else:
        model = lib.nn.GPT(lib.nn.GPTConfig(vocab_size=vocab, block_size=T, d_model=d_model, n_heads=4,
                                            n_layers=n_layers))
        for layer in model.modules():
            if isinstance(layer, lib.nn.GELU):
                layer.approximate = approximate
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    idx = lib.tensor(rng.integers(0, vocab, (B, T)).astype(np.int64))
    targets = lib.tensor(rng.integers(0, vocab, (B, T)).astype(np.int64))

    def step():
        opt.zero_grad()
        _, loss = model(idx, targets)
        loss.backward()
        opt.step()
    return step


def _gelu_fwd_bwd(lib):
    rng = np.random.default_rng(6)
    x = lib.tensor(rng.standard_normal((256, 1024)).astype(np.float32), requires_grad=True)

    def step():
        x.grad = None
        lib.nn.functional.gelu(x).sum().backward()
    return step


def _with_compiled_kernels(build):
    """`build`'s step, on tinytorch's side run inside module 17's `compiled()` (its numba
    kernels for exact GELU); PyTorch's side unchanged."""
    def make(lib, torch_side):
        step = build(lib, torch_side)
        if torch_side:
            return step
        from tinytorch.backends.cpu_kernels import compiled

        def compiled_step():
            with compiled():
                step()
        return compiled_step
    return make


def _autograd_overhead(lib):
    x = lib.tensor(np.linspace(-1, 1, 16).astype(np.float32), requires_grad=True)
    a, b = lib.tensor(np.float32(0.999)), lib.tensor(np.float32(0.001))

    def step():
        y = x
        for _ in range(1000):  # 1,000 multiply-adds: 2,000 tiny ops, forward and backward
            y = y * a + b
        x.grad = None
        y.sum().backward()
    return step


def both(build):
    def make(tt, torch):
        return build(tt, False), build(torch, True), "tinytorch", "PyTorch"
    return make


def numba_matmul(tt, torch):
    from tinytorch.backends import cpu_kernels

    rng = np.random.default_rng(4)
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    cpu_kernels.matmul_blocked(a, b)  # compile outside the timing
    return (lambda: cpu_kernels.matmul_blocked(a, b)), (lambda: a @ b), "numba blocked matmul", "numpy (BLAS)"


def kv_cache_decode(tt, torch, quick=False):
    # A 256-token prompt, then 256 new tokens: the cache's gain grows with the context (module
    # 18 measures it against T). With an 8-token prompt this small model (d 64) is per-op
    # overhead on both sides, and the ratio measures Python, not caching.
    rng = np.random.default_rng(5)
    new = prompt_len = 32 if quick else 256
    model = tt.nn.GPT(tt.nn.GPTConfig(vocab_size=65, block_size=prompt_len + new, d_model=64, n_heads=4,
                                      n_layers=2))
    model.eval()
    prompt = tt.tensor(rng.integers(0, 65, (1, prompt_len)).astype(np.int64))
    cached = lambda: model.generate(prompt, new, temperature=0.0, use_cache=True)  # noqa: E731
    uncached = lambda: model.generate(prompt, new, temperature=0.0, use_cache=False)  # noqa: E731
    return uncached, cached, "decode without cache", "with KV cache"


WORKLOADS = [
    # name, builder, what the ratio means, target (ratio <= or >= value)
    ("mlp_step_b64", both(lambda lib, t: _mlp_step(lib, 64, [64, 128, 10])),
     "MLP training step, batch 64, 64-128-10, SGD momentum", ("<=", 1.5)),
    ("mlp_step_b256", both(lambda lib, t: _mlp_step(lib, 256, [784, 256, 10])),
     "MLP training step, batch 256, 784-256-10, SGD momentum", ("<=", 1.15)),
    ("conv2d_fwd_bwd", both(lambda lib, t: _conv_fwd_bwd(lib)),
     "Conv2d forward+backward, batch 32, 3->16, 32x32, k3 p1", ("<=", 2.0)),
    ("digits_cnn_step", both(lambda lib, t: _digits_cnn_step(lib)),
     "digits CNN training step, batch 64, two conv blocks, Adam", ("<=", 2.0)),
    ("gpt_step", both(_gpt_step),
     "GPT training step, 2 layers, d 64, 4 heads, T 64, batch 16, AdamW", ("<=", 2.5)),
    ("nanogpt_step", both(_with_compiled_kernels(
        lambda lib, t: _gpt_step(lib, t, d_model=128, n_layers=4, batch=8, approximate="none"))),
     "GPT of nanoGPT's shape: training step, 4 layers, d 128, 4 heads, T 64, batch 8, exact GELU, tied head, AdamW "
     "(tinytorch with module 17's compiled())", ("<=", 2.5)),
    ("gelu_exact", both(_with_compiled_kernels(lambda lib, t: _gelu_fwd_bwd(lib))),
     "exact (erf) GELU forward+backward on 256x1024 float32 (tinytorch with module 17's compiled())", ("<=", 2.0)),
    ("autograd_overhead", both(lambda lib, t: _autograd_overhead(lib)),
     "autograd overhead: 2,000 tiny elementwise ops on 16 floats, forward+backward", ("<=", 2.5)),
    ("numba_matmul", numba_matmul,
     "numba matmul 512x512 float32 against numpy (ratio = numba time / numpy time)", ("<=", 2.0)),
    ("kv_cache_decode", kv_cache_decode,
     "KV-cache decode of 256 new tokens after a 256-token prompt, 32 after 32 with --quick "
     "(ratio = time without cache / with)", (">=", 5.0)),
]


def run(names, quick, out_path):
    import torch

    import tinytorch as tt
    from tinytorch.utils.benchmark import compare, environment

    threads = int(os.environ.get("TITO_BENCH_THREADS", "1"))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    results = []
    from tqdm.auto import tqdm  # a dependency of the course

    chosen = [w for w in WORKLOADS if not names or w[0] in names]
    bar = tqdm(chosen, desc="tito bench", unit="workload", file=sys.stderr, disable=None)  # no frames in a log
    for name, make, what, (sense, target) in bar:
        bar.set_postfix_str(name)
        row = {"name": name, "what": what, "target": f"{sense} {target:g}", "ran": False}
        try:
            a, b, a_label, b_label = make(tt, torch, quick) if make is kv_cache_decode else make(tt, torch)
            started = time.perf_counter()
            result = compare(a, b, rounds=3 if quick else 15, warmup=1, a_label=a_label, b_label=b_label)
            row.update(ran=True, a_label=a_label, b_label=b_label, a_median_s=result.a.median,
                       b_median_s=result.b.median, ratio=result.ratio, ratio_low=result.low,
                       ratio_high=result.high, rounds=len(result.ratios), seconds=time.perf_counter() - started)
            row["met"] = bool(result.ratio <= target if sense == "<=" else result.ratio >= target)
        except Exception as exc:  # a workload that did not run is reported as such, with no number
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            row["traceback"] = traceback.format_exc()[-2000:]
        results.append(row)
    env = environment()
    env["threads"] = threads
    env["torch_threads"] = torch.get_num_threads()
    env["package"] = str(Path(tt.__file__).resolve().parent)
    Path(out_path).write_text(json.dumps({"environment": env, "quick": quick, "workloads": results},
                                         indent=1, default=str))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    run(set(args.only), args.quick, args.out)

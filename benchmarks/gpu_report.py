"""Module 17's kernels on a real NVIDIA GPU, at realistic sizes: the figures its prose asks for.

Run by `tito gpu-report` (which puts the package to measure first on PYTHONPATH); standalone:

    PYTHONPATH=build/solutions python benchmarks/gpu_report.py [--simulator]

Each figure is a median over a few synchronised runs, measured here and now; none is filled
in. Without a GPU it says so and exits with status 2. `--simulator` runs the same code under
numba's CUDA simulator at tiny sizes: it proves that the report works, its times mean nothing.
"""
from __future__ import annotations

import argparse
import os
import sys

NO_GPU = 2  # exit status when there is nothing to measure


def _median_seconds(fn, repeats):
    """The course's median_time of `fn`, each call waited for: a launch returns before its kernel ends."""
    from numba import cuda

    from tinytorch.utils.timing import median_time

    def finished():
        fn()
        cuda.synchronize()

    return median_time(finished, repeats=repeats)


def _copies(n, repeats):
    import numpy as np
    from numba import cuda

    host = np.ones(n, dtype=np.float32)
    device = cuda.to_device(host)
    up = _median_seconds(lambda: cuda.to_device(host), repeats)
    down = _median_seconds(lambda: device.copy_to_host(), repeats)
    size = f"{host.nbytes / 2**20:.3g} MiB"
    return [("copy host to device", size, up, f"{host.nbytes / up / 1e9:.3g} GB/s"),
            ("copy device to host", size, down, f"{host.nbytes / down / 1e9:.3g} GB/s")]


def _map_and_reduce(K, n, repeats):
    import numpy as np
    from numba import cuda

    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    d = cuda.to_device(x)
    out = cuda.device_array(n, dtype=np.float32)
    dims, strides = cuda.to_device(np.array([n], np.int64)), cuda.to_device(np.array([1], np.int64))
    exp_on_device = _median_seconds(lambda: K.map_kernel[K._grid(n), K.BLOCK](d, strides, 0, out, dims, K.EXP),
                                    repeats)
    exp_with_copies = _median_seconds(lambda: K.elementwise(K.EXP, x), repeats)

    def tree_sum():
        rows, width, data = 1, n, d.reshape(1, n)
        while width > 1:
            blocks = -(-width // K.BLOCK)
            part = cuda.device_array((rows, blocks), dtype=np.float32)
            K.block_reduce_kernel[(blocks, rows), K.BLOCK](data, part, K.SUM)
            data, width = part, blocks

    reduce_on_device = _median_seconds(tree_sum, repeats)
    moved = 2 * x.nbytes  # read and write
    return [("map_kernel EXP, data on the device", f"{n:,} float32", exp_on_device,
             f"{moved / exp_on_device / 1e9:.3g} GB/s"),
            ("elementwise(EXP), with both copies", f"{n:,} float32", exp_with_copies,
             f"{moved / exp_with_copies / 1e9:.3g} GB/s"),
            ("block_reduce_kernel SUM, all levels", f"{n:,} float32", reduce_on_device,
             f"{x.nbytes / reduce_on_device / 1e9:.3g} GB/s")]


def _matmuls(K, n, repeats):
    import numpy as np
    from numba import cuda

    rng = np.random.default_rng(1)
    a = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    c = cuda.device_array((n, n), dtype=np.float32)
    grid = (-(-n // K.TILE), -(-n // K.TILE))
    rows = []
    for name, kernel in (("matmul_naive_kernel", K.matmul_naive_kernel), ("matmul_tiled_kernel", K.matmul_tiled_kernel)):
        seconds = _median_seconds(lambda kernel=kernel: kernel[grid, (K.TILE, K.TILE)](a, b, c), repeats)
        rows.append((name, f"n = {n}", seconds, f"{2 * n**3 / seconds / 1e9:.3g} GFLOP/s"))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        ta, tb = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        seconds = _median_seconds(lambda: ta @ tb, repeats)  # numba's synchronize waits for torch's stream too
        rows.append(("torch.matmul (cuBLAS)", f"n = {n}", seconds, f"{2 * n**3 / seconds / 1e9:.3g} GFLOP/s"))
    else:
        rows.append(("torch.matmul (cuBLAS)", f"n = {n}", None, "not measured: no PyTorch with CUDA here"))
    return rows


def _mlp_steps(sizes, batch, repeats):
    import numpy as np

    import tinytorch
    from tinytorch import nn

    rng = np.random.default_rng(2)
    x = tinytorch.tensor(rng.standard_normal((batch, sizes[0])).astype(np.float32))
    y = tinytorch.tensor(rng.integers(0, sizes[-1], batch))
    rows = []
    for device in ("cpu", "cuda"):
        tinytorch.manual_seed(0)
        model = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2])).to(device)
        opt = tinytorch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()
        xd = x.to(device)

        def step():
            opt.zero_grad()
            loss = loss_fn(model(xd), y)
            loss.backward()
            opt.step()
            return loss.item()

        seconds = _median_seconds(step, repeats)
        rows.append((f"MLP training step on {device}", f"{sizes}, batch {batch}", seconds, ""))
    return rows


def _seconds(value):
    return "-" if value is None else f"{value * 1e3:.3g} ms"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulator", action="store_true",
                        help="run under numba's CUDA simulator at tiny sizes (checks the report; times mean nothing)")
    args = parser.parse_args(argv)
    if args.simulator:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # before numba is imported: the real GPU or nothing
    from numba import cuda

    if not args.simulator and not cuda.is_available():
        print("tito gpu-report: this machine has no NVIDIA GPU that numba can use (numba.cuda.is_available() "
              "is False: no GPU, or no working CUDA driver), so there is nothing to measure. Module 17's kernels "
              "run under numba's CUDA simulator in `tito test`; run `tito gpu-report` where there is a GPU.")
        return NO_GPU
    from tinytorch.cuda import kernels as K

    if args.simulator:
        n_map, n_mat, mlp, batch, repeats = 4 * K.BLOCK + 3, 2 * K.TILE + 1, (6, 5, 3), 4, 1
        where = "numba's CUDA simulator (a check that the report runs: the times mean nothing)"
    else:
        n_map, n_mat, mlp, batch, repeats = 10**8, 4096, (784, 1024, 10), 512, 5
        device = cuda.get_current_device()
        name = device.name.decode() if isinstance(device.name, bytes) else device.name
        where = f"{name}, compute capability {'.'.join(map(str, device.compute_capability))}"
    print(f"Module 17's kernels on {where}; medians of {repeats} synchronised run(s)\n", flush=True)
    rows = [*_copies(n_map, repeats), *_map_and_reduce(K, n_map, repeats), *_matmuls(K, n_mat, repeats),
            *_mlp_steps(mlp, batch, repeats)]
    width = max(len(r[0]) for r in rows)
    size_width = max(len(r[1]) for r in rows)
    for what, size, seconds, rate in rows:
        print(f"  {what:<{width}}  {size:<{size_width}}  {_seconds(seconds):>10}  {rate}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

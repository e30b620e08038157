"""The whole pipeline: measured rows for every variant, the front, the choice; and parity with PyTorch."""
import numpy as np

import tinytorch
from tinytorch.capstone import choose, format_report, measure_latencies, model_flops, pareto_front, report_row
from tinytorch.compression import model_bytes


def test_report_row_pipeline_meets_its_thresholds(built, digits):
    variants, _, acc = built
    x = digits[1].data[:64]
    latencies = measure_latencies(variants, x, rounds=2, min_run_time=0.04)
    assert list(latencies) == list(variants) and all(len(m.times) >= 2 for m in latencies.values()), \
        "one Measurement per variant, pooled from both turns"
    rows = [report_row(n, acc[n], latencies[n], model_bytes(v), model_flops(v, x)) for n, v in variants.items()]
    r = {row["name"]: row for row in rows}
    assert all(row["median_s"] > 0 and row["iqr_s"] >= 0 for row in rows), f"measured latencies: {rows}"
    assert r["float32"]["bytes"] >= 3.5 * r["int8"]["bytes"], f"int8 >= 3.5x smaller: {r['float32']['bytes']} vs {r['int8']['bytes']}"
    assert r["pruned"]["bytes"] == r["float32"]["bytes"], "dense pruned storage: same bytes as float32"
    assert r["shrunk"]["flops"] < 0.5 * r["float32"]["flops"], f"shrunk FLOPs {r['shrunk']['flops']} vs {r['float32']['flops']}"
    assert r["numba"]["flops"] == r["float32"]["flops"] == 26_880, f"float CNN FLOPs per example: 26,880, got {r['float32']['flops']}"
    front = pareto_front(rows)
    fastest = min(rows, key=lambda row: row["median_s"])["name"]
    assert front and fastest in front, f"the fastest variant {fastest!r} is always on the front, got {front}"
    chosen = choose(rows, 0.02)
    assert r[chosen]["accuracy"] >= max(acc.values()) - 0.02, f"chosen {chosen!r} within 2 points of the best"
    table = format_report(rows, front, chosen)
    assert all(n in table for n in variants), "every variant has a line in the report"


def test_make_variants_float32_matches_pytorch(built, digits, torch):
    variants, _, _ = built
    model = variants["float32"]
    tm = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                             torch.nn.Flatten(), torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    with torch.no_grad():
        for i in (0, 4, 6):
            tm[i].weight.copy_(torch.from_numpy(model[i].weight.numpy()))
            tm[i].bias.copy_(torch.from_numpy(model[i].bias.numpy()))
        x = digits[1].data
        theirs = tm(torch.from_numpy(x.numpy())).numpy()
        fast = variants["numba"]
    with tinytorch.no_grad():
        np.testing.assert_allclose(model(x).numpy(), theirs, rtol=1e-4, atol=1e-4, err_msg="float32 CNN vs torch")
        np.testing.assert_allclose(fast(x).numpy(), theirs, rtol=1e-4, atol=1e-4, err_msg="numba CNN vs torch")


def test_make_variants_int8_is_module_15s_per_channel_quantization(built):
    """The int8 Linear layer's integer weights are module 15's per-channel symmetric
    quantization of the float32 weights (module 15's tests hold that one to PyTorch)."""
    from tinytorch.ao.quantization import QuantizedLinear, quantize_per_channel
    variants, _, _ = built
    q = [m for m in variants["int8"].modules() if isinstance(m, QuantizedLinear)][0]
    weight = variants["float32"][4].weight
    scales = q.weight_scale.numpy()
    expected = quantize_per_channel(weight, scales, np.zeros(len(scales), np.int64), 0).int_repr()
    np.testing.assert_array_equal(q.weight_int8.numpy(), expected,
                                  err_msg="int8 weights vs quantize_per_channel of the float32 weights with the layer's scales")

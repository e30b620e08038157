"""parameter_counts: per module, each shared (tied) Parameter once; totals equal the model's."""
import tinytorch as tt
from tinytorch import nn
from tinytorch.profiler import count_parameters, parameter_counts


def test_parameter_counts_per_layer_of_an_mlp():
    model = nn.Sequential(nn.Linear(7, 4), nn.ReLU(), nn.Linear(4, 3, bias=False))
    got = parameter_counts(model)
    assert got == {"0": 7 * 4 + 4, "2": 4 * 3}, f"expected {{'0': 32, '2': 12}} (ReLU has none, left out), got {got}"
    assert list(got) == ["0", "2"], f"expected the named_modules order ['0', '2'], got {list(got)}"


def test_parameter_counts_tied_weights_counted_once():
    model = nn.Sequential(nn.Linear(6, 6), nn.Linear(6, 6))
    model[1].weight = model[0].weight  # one Parameter in two layers
    got = parameter_counts(model)
    assert got == {"0": 36 + 6, "1": 6}, f"expected the shared weight at the first layer only: {{'0': 42, '1': 6}}, got {got}"
    assert count_parameters(model) == 48, f"expected 48 distinct scalars, got {count_parameters(model)}"


def test_parameter_counts_tied_gpt_head():
    tt.manual_seed(0)
    gpt = nn.GPT(nn.GPTConfig(vocab_size=13, block_size=8, d_model=16, n_heads=2, n_layers=2))
    got = parameter_counts(gpt)
    total = sum(p.numel() for p in gpt.parameters())
    assert sum(got.values()) == total == gpt.num_parameters(), \
        f"expected the counts to add up to {total} (num_parameters), got {sum(got.values())}"
    assert "head" not in got, f"expected the tied head to be credited to tok_emb, got head={got.get('head')}"
    assert got["tok_emb"] == 13 * 16 and got["blocks.0.ln1"] == 32, f"expected tok_emb 208 and blocks.0.ln1 32, got {got}"
    order = [name for name, _ in gpt.named_modules() if name in got]
    assert list(got) == order, f"expected the named_modules() order {order}, got {list(got)}"
    kinds = sorted({type(v).__name__ for v in got.values()})
    assert kinds == ["int"], f"expected Python int counts (exact however large), got values of types {kinds}"


def test_parameter_counts_untied_gpt_counts_head():
    tt.manual_seed(0)
    gpt = nn.GPT(nn.GPTConfig(vocab_size=13, block_size=8, d_model=16, n_heads=2, n_layers=1, tie_weights=False))
    got = parameter_counts(gpt)
    assert got.get("head") == 13 * 16, f"expected an untied head of 208 parameters, got {got.get('head')}"
    assert count_parameters(gpt) == gpt.num_parameters(), \
        f"expected {gpt.num_parameters()}, got {count_parameters(gpt)}"


def test_parameter_counts_include_frozen_parameters():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    model[0].weight.requires_grad_(False)
    assert parameter_counts(model) == {"0": 6, "1": 3}, \
        f"a frozen weight still counts (stored, loaded and shipped like any other): {parameter_counts(model)}"


def test_parameter_counts_leave_out_buffers():
    m = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3))
    assert parameter_counts(m) == {"0": 30, "1": 6}, (
        f"Conv2d(1, 3, 3) + BatchNorm2d(3): got {parameter_counts(m)}; the running mean and variance are buffers")

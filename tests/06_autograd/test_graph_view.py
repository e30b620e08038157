"""print_graph / format_graph (text) and to_dot (Graphviz DOT) show the recorded graph."""
import re

import numpy as np

import tinytorch as tt


def build():
    w = tt.tensor(np.ones((3, 2)), requires_grad=True)
    x = tt.tensor(np.ones((4, 3)))
    h = x @ w
    return w, x, (h * h + h).sum()


def test_format_graph_text():
    w, x, out = build()
    text = tt.autograd.format_graph(out, names={"w": w, "x": x})
    lines = text.splitlines()
    assert lines[0].startswith("#0 SumBackward -> () float64")
    assert "dim=(0, 1)" in lines[0]
    assert sum("MatmulBackward -> (4, 2)" in line for line in lines) == 1, "a shared node is expanded once"
    assert sum("(shown above)" in line for line in lines) == 2
    assert any("w (3, 2) float64 (leaf)" in line for line in lines)
    assert any(line.strip(" │├└─").startswith("x (4, 3) float64") for line in lines)
    numbers = {int(n) for n in re.findall(r"#(\d+)", text)}
    assert numbers == {0, 1, 2, 3}, "nodes are numbered in topological order"
    depth = {line.strip(" │├└─").split(" ")[1]: len(line) - len(line.lstrip(" │├└─")) for line in lines
             if line.strip(" │├└─").startswith("#") and "shown" not in line}
    assert depth["SumBackward"] < depth["AddBackward"] < depth["MulBackward"] < depth["MatmulBackward"]


def test_print_graph_prints_the_same_text(capsys):
    w, x, out = build()
    tt.autograd.print_graph(out)
    printed = capsys.readouterr().out
    assert printed.strip() == tt.autograd.format_graph(out).strip()
    assert "leaf (3, 2) float64" in printed and "input (4, 3) float64 (no grad)" in printed


def test_long_chains_are_cut_and_constants_shown():
    x = tt.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(200):
        y = y * 2.0
    text = tt.autograd.format_graph(y, max_depth=10)
    assert text.count("MulBackward") == 11 and "..." in text
    assert "const 2.0" in text
    assert "no graph" in tt.autograd.format_graph(x)


def test_to_dot():
    w, x, out = build()
    dot = tt.autograd.to_dot(out, names={"w": w})
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    edges = re.findall(r"^\s*(\w+) -> (\w+);$", dot, flags=re.M)
    assert len(edges) == 7  # x, w -> matmul; matmul, matmul -> mul; mul, matmul -> add; add -> sum
    ops = dict(re.findall(r'^\s*(n\d+) \[label="#\d+ (\w+)', dot, flags=re.M))
    assert sorted(ops.values()) == ["AddBackward", "MatmulBackward", "MulBackward", "SumBackward"]
    into = [dst for _, dst in edges]
    assert into.count([n for n, op in ops.items() if op == "MatmulBackward"][0]) == 2
    assert 'label="w (3, 2) float64 (leaf)"' in dot and "lightblue" in dot
    assert re.search(r'label="input \(4, 3\) float64 \(no grad\)", style=dashed', dot)
    out.backward()
    assert "freed" in tt.autograd.format_graph(out)


def test_to_dot_after_backward_says_the_graph_was_freed():
    import pytest

    w = tt.tensor([1.0, 2.0], requires_grad=True)
    out = (w * w).sum()
    assert "->" in tt.autograd.to_dot(out)
    out.backward()
    with pytest.raises(RuntimeError, match="freed by backward"):
        tt.autograd.to_dot(out)

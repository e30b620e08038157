"""PyTorch's other spellings of module 01's ops (tinytorch/_tensor_extras.py, functional.py
and the dtype names of tinytorch/__init__.py) give what PyTorch gives: one table, each row
a name and a program that uses it, run on both and compared."""
import numpy as np
import pytest

import tinytorch as tt


def _numbers(m):
    return m.tensor([[1.0, -2.0, 3.0, 0.5, 4.0], [0.0, 2.0, -1.0, 6.0, 2.5]])


def _grad_mode_block(m):
    x = m.ones(2, requires_grad=True)
    with m.set_grad_enabled(False):
        inside = (x * 2).requires_grad
    return [inside, (x * 2).requires_grad, m.is_grad_enabled()]


def _viewed(t, *shape):
    v = t.view(*shape)
    return [v.numpy(), list(v.stride()), v.storage_offset()]


SURFACE = {
    # comparisons by name
    "Tensor.eq": lambda m: _numbers(m).eq(m.tensor(2.0)).numpy(),
    "Tensor.ne": lambda m: _numbers(m).ne(_numbers(m).t().t()).numpy(),
    "Tensor.lt": lambda m: _numbers(m).lt(1.0).numpy(),
    "Tensor.le": lambda m: _numbers(m).le(m.zeros(5)).numpy(),
    "Tensor.gt": lambda m: _numbers(m).gt(0.5).numpy(),
    "Tensor.ge": lambda m: _numbers(m).ge(2.0).numpy(),
    # masks: logical and bitwise operators
    "Tensor.__invert__(bool)": lambda m: (~(_numbers(m) > 1)).numpy(),
    "Tensor.__invert__(int)": lambda m: (~m.arange(-2, 3)).numpy(),
    "Tensor.__and__": lambda m: ((_numbers(m) > 0) & (_numbers(m) < 3)).numpy(),
    "Tensor.__or__": lambda m: ((_numbers(m) > 3) | (_numbers(m) < 0)).numpy(),
    "Tensor.__xor__": lambda m: ((_numbers(m) > 0) ^ (_numbers(m) > 2)).numpy(),
    "Tensor.__and__(int)": lambda m: (m.arange(8) & 6).numpy(),
    "bool & Tensor": lambda m: (True & (_numbers(m) > 0)).numpy(),
    "Tensor.logical_not": lambda m: _numbers(m).logical_not().numpy(),
    "logical_not": lambda m: m.logical_not(m.arange(-1, 2)).numpy(),
    # pieces along one dimension
    "Tensor.split(int)": lambda m: [p.numpy() for p in _numbers(m).split(2, dim=1)],
    "Tensor.split(sizes)": lambda m: [p.numpy() for p in _numbers(m).split([1, 4], dim=-1)],
    "Tensor.split(dim 0)": lambda m: [p.numpy() for p in m.arange(7).split(3)],
    "Tensor.chunk": lambda m: [p.numpy() for p in m.arange(10).chunk(4)],
    "Tensor.chunk(fewer)": lambda m: [p.numpy() for p in m.arange(6).chunk(4)],
    "Tensor.chunk(dim)": lambda m: [p.numpy() for p in _numbers(m).chunk(2, dim=1)],
    "Tensor.unbind": lambda m: [p.numpy() for p in _numbers(m).unbind(1)],
    "Tensor.narrow": lambda m: _numbers(m).narrow(1, 1, 3).numpy(),
    "Tensor.narrow(negative start)": lambda m: _numbers(m).narrow(-1, -2, 2).numpy(),
    "Tensor.select": lambda m: _numbers(m).select(1, -1).numpy(),
    "split is a view": lambda m: [m.arange(6).split(4)[1].storage_offset(), m.arange(6).split(4)[1].stride()],
    # shapes and dtypes of another tensor
    "Tensor.view_as": lambda m: _numbers(m).view_as(m.zeros(5, 2)).numpy(),
    "Tensor.reshape_as": lambda m: _numbers(m).t().reshape_as(m.zeros(10)).numpy(),
    "Tensor.type_as": lambda m: m.arange(3).type_as(m.zeros(1, dtype=m.float64)).numpy(),
    "Tensor.t": lambda m: _numbers(m).t().numpy(),
    "Tensor.t(1-D)": lambda m: m.arange(3).t().numpy(),
    # new tensors like this one
    "Tensor.new_zeros": lambda m: m.arange(3).new_zeros(2, 3).numpy(),
    "Tensor.new_zeros(tuple)": lambda m: _numbers(m).new_zeros((4,)).numpy(),
    "Tensor.new_ones": lambda m: _numbers(m).double().new_ones(2).numpy(),
    "Tensor.new_full": lambda m: m.arange(2).new_full((2, 2), 7).numpy(),
    "Tensor.new_tensor": lambda m: _numbers(m).new_tensor([1, 2]).numpy(),
    "Tensor.new_empty(shape)": lambda m: list(_numbers(m).new_empty(3, 1).shape),
    # Python's number protocols on a 0-d tensor
    "format(0-d)": lambda m: f"{_numbers(m).sum():.3f} {m.tensor(7):>4d} {m.tensor(True)}",
    "index(0-d int)": lambda m: [10, 20, 30, 40][m.tensor(2)],
    "range(0-d int)": lambda m: list(range(m.tensor(3))),
    # device= on the factories
    "zeros(device=)": lambda m: m.zeros(2, 3, device="cpu").numpy(),
    "ones(device=)": lambda m: m.ones(2, device=m.device("cpu")).numpy(),
    "full(device=)": lambda m: m.full((2,), 1.5, device="cpu").numpy(),
    "arange(device=)": lambda m: m.arange(0, 6, 2, device="cpu").numpy(),
    "eye(device=)": lambda m: m.eye(2, 3, device="cpu").numpy(),
    "tensor(device=)": lambda m: m.tensor([1, 2], device="cpu").numpy(),
    "zeros_like(device=)": lambda m: m.zeros_like(_numbers(m), device="cpu").numpy(),
    "ones_like": lambda m: [m.ones_like(_numbers(m)).numpy(), str(m.ones_like(_numbers(m)).device)],
    "rand(device=)": lambda m: list(m.rand(2, 3, device="cpu").shape),
    "randn(device=)": lambda m: list(m.randn(4, device="cpu", requires_grad=True).shape),
    "randint(device=)": lambda m: list(m.randint(0, 5, (3,), device="cpu").shape),
    "requires_grad with device=": lambda m: m.zeros(2, device="cpu", requires_grad=True).is_leaf,
    # dtype names
    "long": lambda m: m.zeros(2, dtype=m.long).numpy(),
    "int": lambda m: m.zeros(2, dtype=m.int).numpy(),
    "short": lambda m: m.zeros(2, dtype=m.short).numpy(),
    "float": lambda m: m.arange(3, dtype=m.float).numpy(),
    "double": lambda m: m.ones(2, dtype=m.double).numpy(),
    "bool": lambda m: m.tensor([1, 0, 2], dtype=m.bool).numpy(),
    "Tensor.to(long)": lambda m: _numbers(m).to(m.long).numpy(),
    # grad mode as a context manager
    "set_grad_enabled as a block": _grad_mode_block,
    # top-level spellings of the methods
    "abs": lambda m: m.abs(_numbers(m)).numpy(),
    "exp": lambda m: m.exp(_numbers(m)).numpy(),
    "log": lambda m: m.log(m.abs(_numbers(m)) + 1).numpy(),
    "sqrt": lambda m: m.sqrt(m.abs(_numbers(m))).numpy(),
    "neg": lambda m: m.neg(_numbers(m)).numpy(),
    "clamp": lambda m: m.clamp(_numbers(m), min=0.0, max=3.0).numpy(),
    "pow": lambda m: m.pow(_numbers(m), 2).numpy(),
    "sum(dim)": lambda m: m.sum(_numbers(m), dim=1).numpy(),
    "mean(keepdim)": lambda m: m.mean(_numbers(m), 0, keepdim=True).numpy(),
    "amax": lambda m: m.amax(_numbers(m), dim=1).numpy(),
    "argmax": lambda m: m.argmax(_numbers(m), dim=1).numpy(),
    "max()": lambda m: m.max(_numbers(m)).numpy(),
    "max(dim)": lambda m: [part.numpy() for part in m.max(_numbers(m), 1)],
    "max(dim).indices": lambda m: m.max(_numbers(m), dim=0).indices.numpy(),
    "max(a, b)": lambda m: m.max(_numbers(m), m.ones(5)).numpy(),
    "max(numpy int dim)": lambda m: m.max(_numbers(m), np.int64(1)).values.numpy(),
    "Tensor.sin": lambda m: (_numbers(m) * 0.7).sin().numpy(),
    "Tensor.cos": lambda m: _numbers(m).double().cos().numpy(),
    "sin(int)": lambda m: m.sin(m.arange(4)).numpy(),
    "cos(x)": lambda m: m.cos(_numbers(m).double()).numpy(),
    "view(slice of the last dim)": lambda m: _viewed(m.arange(24.0).reshape(2, 12)[:, :8], 2, 2, 4),
    "view(merge dims in step)": lambda m: _viewed(m.arange(144.0).reshape(2, 3, 4, 6)[:, 1:], 2, -1),
    "view(split a transposed dim)": lambda m: _viewed(m.arange(144.0).reshape(2, 3, 4, 6).transpose(0, 1), 3, 2, 2, 12),
    "view(size-1 dims, non-contiguous)": lambda m: _viewed(m.arange(144.0).reshape(2, 3, 4, 6)[..., :3], 1, 2, 3, 4, 3, 1),
    "view(nanoGPT heads)": lambda m: _viewed(m.arange(96.0).reshape(2, 4, 12).split(4, dim=2)[1], 2, 4, 2, 2),
    "linspace": lambda m: m.linspace(-1.5, 2.0, 8, dtype=m.float64).numpy(),
    "linspace(float32)": lambda m: m.linspace(0, 1, 5).numpy(),
    "Tensor.nonzero": lambda m: _numbers(m).gt(0.5).nonzero().numpy(),
    "nonzero(as_tuple)": lambda m: [i.numpy() for i in m.nonzero(_numbers(m) > 2, as_tuple=True)],
    "where(condition)": lambda m: [i.numpy() for i in m.where(_numbers(m) > 2)],
    "where(condition, a, b)": lambda m: m.where(_numbers(m) > 2, _numbers(m), m.zeros(5)).numpy(),
    "Tensor.norm": lambda m: _numbers(m).norm().numpy(),
    "Tensor.norm(1, dim)": lambda m: _numbers(m).norm(1, dim=1).numpy(),
    "Tensor.norm(inf, keepdim)": lambda m: _numbers(m).norm(float("inf"), 0, True).numpy(),
    "Tensor.norm(-inf)": lambda m: _numbers(m).norm(float("-inf"), 1).numpy(),
    "Tensor.norm(0)": lambda m: _numbers(m).norm(0, 1).numpy(),
    "Tensor.norm(3)": lambda m: _numbers(m).double().norm(3).numpy(),
    "norm(dim)": lambda m: m.norm(_numbers(m).double(), dim=0).numpy(),
    "min(numpy int dim)": lambda m: m.min(_numbers(m), np.int64(0)).indices.numpy(),
    "min(dim, keepdim)": lambda m: m.min(_numbers(m), 1, True).values.numpy(),
    "min(a, b)": lambda m: m.min(_numbers(m), m.zeros(2, 1)).numpy(),
    "std": lambda m: m.std(_numbers(m), dim=1).numpy(),
    "var": lambda m: m.var(_numbers(m)).numpy(),
    "amin": lambda m: m.amin(_numbers(m), dim=0).numpy(),
    "argmin": lambda m: m.argmin(_numbers(m)).numpy(),
    "all": lambda m: m.all(_numbers(m) > -5).numpy(),
    "any": lambda m: m.any(_numbers(m) > 5).numpy(),
    "clip": lambda m: m.clip(_numbers(m), -1.0, 1.0).numpy(),
    "clone": lambda m: m.clone(_numbers(m)).numpy(),
    "detach": lambda m: m.detach(_numbers(m)).numpy(),
    "add": lambda m: m.add(_numbers(m), 1.0).numpy(),
    "sub": lambda m: m.sub(_numbers(m), _numbers(m)[0]).numpy(),
    "mul": lambda m: m.mul(_numbers(m), _numbers(m)).numpy(),
    "div": lambda m: m.div(_numbers(m), 2).numpy(),
    "eq": lambda m: m.eq(_numbers(m), 2.0).numpy(),
    "ne": lambda m: m.ne(_numbers(m), 2.0).numpy(),
    "lt": lambda m: m.lt(_numbers(m), 2.0).numpy(),
    "le": lambda m: m.le(_numbers(m), 2.0).numpy(),
    "gt": lambda m: m.gt(_numbers(m), 2.0).numpy(),
    "ge": lambda m: m.ge(_numbers(m), 2.0).numpy(),
    "narrow": lambda m: m.narrow(_numbers(m), 0, 1, 1).numpy(),
    "select": lambda m: m.select(_numbers(m), 0, 1).numpy(),
    "split": lambda m: [p.numpy() for p in m.split(m.arange(5), 2)],
    "chunk": lambda m: [p.numpy() for p in m.chunk(m.arange(5), 2)],
    "unbind": lambda m: [p.numpy() for p in m.unbind(_numbers(m))],
    "t": lambda m: m.t(_numbers(m)).numpy(),
    "numel": lambda m: m.numel(_numbers(m)),
    "masked_fill": lambda m: m.masked_fill(_numbers(m), _numbers(m) < 0, 0.0).numpy(),
    "from_numpy": lambda m: m.from_numpy(np.arange(6, dtype=np.float64).reshape(2, 3)).numpy(),
    "is_tensor": lambda m: [m.is_tensor(m.zeros(1)), m.is_tensor(np.zeros(1)), m.is_tensor(3.0)],
}


def _same(got, want, where):
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: got {type(got).__name__}, PyTorch gives an array"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, PyTorch {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=where)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{where}: got {got!r}, PyTorch {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert type(got) is type(want) and got == want, f"{where}: got {got!r}, PyTorch {want!r}"


@pytest.mark.parametrize("name", SURFACE)
def test_pytorch_spelling_gives_what_pytorch_gives(torch, name):
    program = SURFACE[name]
    _same(program(tt), program(torch), name)


def test_split_refuses_sizes_that_do_not_add_up():
    with pytest.raises(RuntimeError, match="sum exactly to 5"):
        tt.arange(5).split([2, 2])
    with pytest.raises(RuntimeError, match="split_size can only be 0"):
        tt.arange(5).split(0)
    with pytest.raises(RuntimeError, match="exceeds dimension size"):
        tt.arange(5).narrow(0, 3, 3)


def test_only_a_0d_integer_tensor_is_an_index_and_only_a_0d_tensor_takes_a_format():
    for bad in (tt.tensor([1]), tt.tensor(1.0)):
        with pytest.raises(TypeError, match="only integer tensors"):
            [1, 2][bad]
    with pytest.raises(TypeError):
        f"{tt.arange(3):.2f}"
    assert f"{tt.arange(3)}" == str(tt.arange(3))


def test_randperm_is_a_permutation_drawn_from_the_seeded_generator():
    tt.manual_seed(3)
    first = tt.randperm(50)
    tt.manual_seed(3)
    assert first.dtype == tt.int64 and sorted(first.tolist()) == list(range(50))
    assert tt.randperm(50).tolist() == first.tolist(), "manual_seed must make randperm repeat"
    assert first.tolist() != list(range(50))


def test_multinomial_draws_only_where_the_weights_are_positive():
    tt.manual_seed(0)
    weights = tt.tensor([[0.0, 3.0, 1.0, 0.0], [5.0, 0.0, 0.0, 5.0]])
    drawn = tt.multinomial(weights, 400, replacement=True)
    assert drawn.shape == (2, 400) and drawn.dtype == tt.int64
    assert set(drawn[0].tolist()) == {1, 2} and set(drawn[1].tolist()) == {0, 3}
    share = (drawn[0] == 1).float().mean().item()
    assert 0.65 < share < 0.85, f"index 1 has weight 3 of 4: drawn {share:.2f} of the time"
    once = tt.multinomial(tt.tensor([1.0, 1.0, 1.0]), 3)
    assert sorted(once.tolist()) == [0, 1, 2], "without replacement every index comes once"
    with pytest.raises(RuntimeError, match="without replacement"):
        tt.multinomial(tt.tensor([1.0, 1.0]), 3)


def test_bitwise_operators_refuse_float_tensors_and_suggest_a_comparison():
    x = tt.tensor([1.0, 0.0])
    for program in (lambda: ~x, lambda: x & (x > 0), lambda: (x > 0) | x):
        with pytest.raises(TypeError, match="bool and integer.*x != 0"):
            program()

"""PyTorch's other Tensor spellings, written once over the ops the modules build.

Why: PyTorch code says `a.eq(b)`, `x.split(64, dim=2)`, `y.view_as(x)`, `x.new_zeros(3)` and
`f"{loss:.3f}"`. Each is another name for, or a short composition of, an op a module teaches
(`==`, slicing, `view`, `zeros`, `item`), so it is provided once here instead of written
twice. Hand-written: no student writes this file. Module 01's `Tensor` inherits it last, so
it never hides a method of the student's, and it imports the package only when called.
"""
import numbers


def _dim(t, dim):
    """`dim` counted from the front, with PyTorch's error for one out of range."""
    if not -max(t.ndim, 1) <= dim < max(t.ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(t.ndim, 1)}, {max(t.ndim, 1) - 1}], but got {dim})")
    return dim % max(t.ndim, 1)


class _TensorExtras:
    """Comparisons by name, splitting, shapes borrowed from another tensor, new tensors
    like this one, and the Python protocols of a number (format, index)."""

    # comparisons by name: the operators of module 01
    def eq(self, other):
        return self == other

    def ne(self, other):
        return self != other

    def lt(self, other):
        return self < other

    def le(self, other):
        return self <= other

    def gt(self, other):
        return self > other

    def ge(self, other):
        return self >= other

    # masks: logical and bitwise operators, for bool and integer tensors as in PyTorch
    def _bitwise(self, op, np_name, other=None):
        import numpy as np

        import tinytorch._tensor as core

        operands = [self] if other is None else [self, other]
        for t in operands:
            kind = t.dtype.kind if isinstance(t, core.Tensor) else np.asarray(t).dtype.kind
            if kind not in "biu":
                raise TypeError(f"{op}: only bool and integer tensors have bitwise operators, got "
                                f"{getattr(t, 'dtype', type(t).__name__)} (for a float mask, compare: "
                                f"`x != 0`)")
        if other is None:
            return core._unary(op, getattr(np, np_name), self)
        return core._binary(op, getattr(np, np_name), self, other)

    def __invert__(self):
        """`~mask`: logical not of a bool tensor, bitwise not of an integer one."""
        return self._bitwise("bitwise_not", "invert")

    def __and__(self, other):
        return self._bitwise("bitwise_and", "bitwise_and", other)

    def __or__(self, other):
        return self._bitwise("bitwise_or", "bitwise_or", other)

    def __xor__(self, other):
        return self._bitwise("bitwise_xor", "bitwise_xor", other)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def logical_not(self):
        """A bool tensor, True where this one is zero (or False)."""
        return self == 0

    # pieces along one dimension: views made by slicing
    def narrow(self, dim, start, length):
        """The view of `length` entries of dimension `dim` from `start` on."""
        dim = _dim(self, dim)
        start = start + self.shape[dim] if start < 0 else start
        if not (0 <= start and length >= 0 and start + length <= self.shape[dim]):
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                               f"({self.shape[dim]}).")
        return self[(slice(None),) * dim + (slice(start, start + length),)]

    def select(self, dim, index):
        """The view at `index` of dimension `dim`, which it removes."""
        return self[(slice(None),) * _dim(self, dim) + (index,)]

    def split(self, split_size_or_sections, dim=0):
        """A tuple of views along `dim`: pieces of `split_size` entries (the last may be
        shorter), or of the sizes listed, which must add up to the dimension's size."""
        dim = _dim(self, dim)
        size = self.shape[dim]
        if isinstance(split_size_or_sections, numbers.Integral):
            step = int(split_size_or_sections)
            if step <= 0 and size > 0:
                raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                                   f"dimension size of {size}")
            sizes = [min(step, size - start) for start in range(0, size, step)] if size else [0]
        else:
            sizes = [int(n) for n in split_size_or_sections]
            if sum(sizes) != size or any(n < 0 for n in sizes):
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                                   f"(input tensor's size at dimension {dim}), but got "
                                   f"split_sizes={sizes}")
        pieces, start = [], 0
        for n in sizes:
            pieces.append(self.narrow(dim, start, n))
            start += n
        return tuple(pieces)

    def chunk(self, chunks, dim=0):
        """At most `chunks` views along `dim`, of equal size but for the last."""
        if chunks <= 0:
            raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        size = self.shape[_dim(self, dim)]
        return self.split(max(-(-size // chunks), 1), dim)

    def unbind(self, dim=0):
        """Every entry of dimension `dim`, as a tuple of views without that dimension."""
        dim = _dim(self, dim)
        return tuple(self.select(dim, i) for i in range(self.shape[dim]))

    # a shape or dtype taken from another tensor
    def view_as(self, other):
        return self.view(*other.shape)

    def reshape_as(self, other):
        return self.reshape(*other.shape)

    def type_as(self, other):
        return self.to(other.dtype)

    def t(self):
        """The transpose of a matrix (a tensor of at most 2 dimensions, as PyTorch asks)."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self.transpose(0, 1) if self.ndim == 2 else self

    # where the nonzero elements are, and how large a tensor is
    def nonzero(self, *, as_tuple=False):
        """The indices of the nonzero elements, in row-major order: an (n, ndim) int64 tensor,
        or with `as_tuple` one 1-D int64 tensor per dimension (an index `x[...]` accepts)."""
        import numpy as np

        import tinytorch._tensor as core

        values = self.detach().cpu().numpy()
        found = np.nonzero(np.atleast_1d(values))
        if as_tuple:
            return tuple(core.tensor(i.astype(np.int64), device=self.device) for i in found)
        stacked = np.stack(found[:self.ndim], axis=1) if self.ndim else np.zeros((len(found[0]), 0))
        return core.tensor(stacked.astype(np.int64), device=self.device)

    def norm(self, p="fro", dim=None, keepdim=False):
        """The p-norm over `dim` (every element when None), made of the module's ops so that
        gradients flow: "fro" and 2 the Euclidean norm, 1 the sum of magnitudes, inf and -inf
        the largest and smallest magnitude, 0 the count of nonzeros, any other p
        (sum |x|^p)^(1/p)."""
        if self.dtype.kind != "f":
            raise RuntimeError(f"norm(): input dtype should be floating point, but got {self.dtype}")
        if p == "fro" or p == 2:
            # one op, not sqrt of a sum of squares: its rule gives the zero vector the
            # gradient 0 (PyTorch's choice) where sqrt's rule would divide by zero
            import numpy as np

            import tinytorch._tensor as core

            return core._reduce("norm", lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims)),
                                self, dim, keepdim)
        if not isinstance(p, numbers.Real):
            raise ValueError(f"norm(): p must be a number, 'fro', inf or -inf, got {p!r}")
        if p == float("inf"):
            return self.abs().amax(dim, keepdim)
        if p == float("-inf"):
            return self.abs().amin(dim, keepdim)
        if p == 0:
            return (self != 0).to(self.dtype).sum(dim, keepdim)
        if p == 1:
            return self.abs().sum(dim, keepdim)
        return (self.abs() ** p).sum(dim, keepdim) ** (1.0 / p)

    # new tensors with this one's dtype and device
    def _new(self, factory, size, dtype, requires_grad, *fill):
        import tinytorch._tensor as core

        shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], numbers.Integral) else size
        return getattr(core, factory)(shape, *fill, dtype=self.dtype if dtype is None else dtype,
                                      requires_grad=requires_grad, device=self.device)

    def new_zeros(self, *size, dtype=None, requires_grad=False):
        return self._new("zeros", size, dtype, requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False):
        return self._new("ones", size, dtype, requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False):
        """New memory with this tensor's dtype and device (filled with zeros here)."""
        return self._new("zeros", size, dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, requires_grad=False):
        return self._new("full", (size,), dtype, requires_grad, fill_value)

    def new_tensor(self, data, dtype=None, requires_grad=False):
        import tinytorch._tensor as core

        return core.tensor(data, dtype=self.dtype if dtype is None else dtype,
                           requires_grad=requires_grad, device=self.device)

    # a one-element tensor in Python's number protocols
    def __format__(self, spec):
        """`f"{loss:.3f}"` formats a 0-d tensor's number; other tensors take no format spec."""
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __index__(self):
        """A 0-d integer tensor stands for its int where Python wants an index (`xs[i]`)."""
        if self.ndim == 0 and self.dtype.kind in "iu":
            return int(self.item())
        raise TypeError("only integer tensors of a single element can be converted to an index")

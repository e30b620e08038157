"""Where the course lives and which modules it has.

The twenty modules are fixed by the course design; a module is *available* once its
solution notebook exists under solutions/, otherwise it is *planned*. A student copy of the
course (`tito release --student-repo DIR`) has no solutions/: there a module is available
when its student notebook exists under modules/, and what needs the solutions is refused.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tito.errors import TitoError

# (number, name, what the student builds)
MODULE_TABLE = [
    (1, "tensor", "strided Tensor, views, broadcasting, indexing, reductions, matmul"),
    (2, "activations", "ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax"),
    (3, "layers", "Parameter, Module, Linear with Xavier/He init, Sequential"),
    (4, "losses", "MSE, BCEWithLogits, CrossEntropy"),
    (5, "dataloader", "Dataset, DataLoader, splits, transforms, offline data"),
    (6, "autograd", "graph recording, backward, gradcheck, no_grad"),
    (7, "optimizers", "SGD, Adam, AdamW, LR schedules"),
    (8, "training", "training loop, Dropout, clipping, checkpoints"),
    (9, "convolutions", "im2col Conv2d, pooling, BatchNorm2d"),
    (10, "tokenization", "character and byte-pair tokenizers"),
    (11, "embeddings", "Embedding, positional encodings"),
    (12, "attention", "scaled dot-product and multi-head attention"),
    (13, "transformers", "LayerNorm, transformer block, GPT"),
    (14, "profiling", "parameters, FLOPs, memory, latency"),
    (15, "quantization", "int8 quantization, QuantizedLinear"),
    (16, "compression", "pruning, distillation, low-rank"),
    (17, "acceleration", "numba CPU kernels and CUDA kernels"),
    (18, "memoization", "KV cache for generation"),
    (19, "benchmarking", "benchmark harness"),
    (20, "capstone", "train, compress, accelerate, benchmark"),
]


def is_course(folder: Path) -> bool:
    """A course folder has tito/ and the student notebooks (modules/) or the solutions.
    A student copy has only modules/; an instructor's checkout has both."""
    return (folder / "tito").is_dir() and ((folder / "modules").is_dir() or (folder / "solutions").is_dir())


def is_student_copy(root: Path) -> bool:
    """A course without its solutions/ folder: what `tito release --student-repo` writes."""
    return not (root / "solutions").is_dir()


def require_solutions(root: Path, what: str) -> None:
    """Refuse, with the reason, a command that needs the reference solutions in a student copy."""
    if is_student_copy(root):
        raise TitoError(
            f"{what} is not available in a student copy of the course: it needs the reference "
            f"solutions (solutions/), which {root} does not include. Write your code in the notebooks "
            f"under modules/ and check it with `tito test module NN`.")


_announced = False


def find_root() -> Path:
    """The course checkout: $TINYTORCH_ROOT, else the nearest course folder above cwd, else
    the checkout tito itself was installed from (and then say so: it may not be the one meant)."""
    global _announced
    env = os.environ.get("TINYTORCH_ROOT")
    if env:
        root = Path(env).expanduser().resolve()
        if not is_course(root):
            raise TitoError(f"TINYTORCH_ROOT is set to {env}, which is not a TinyTorch course folder (it has no "
                            f"tito/ and modules/). Point it at your clone of the course, or unset it.")
        return root
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if is_course(folder):
            return folder
    installed = Path(__file__).resolve().parent.parent
    if is_course(installed):
        if not _announced:
            import sys

            print(f"tito: {here} is not inside a course folder; using the course tito was installed "
                  f"from, {installed}.", file=sys.stderr)
            _announced = True
        return installed
    raise TitoError(
        "cannot find the TinyTorch course folder: run tito inside your clone of the course "
        "(the folder with tito/, modules/ and tinytorch/), or set TINYTORCH_ROOT."
    )


@dataclass(frozen=True)
class Module:
    number: int
    name: str
    summary: str
    root: Path

    @property
    def slug(self) -> str:
        return f"{self.number:02d}_{self.name}"

    @property
    def label(self) -> str:
        return f"module {self.number:02d} ({self.name})"

    @property
    def solution_path(self) -> Path:
        return self.root / "solutions" / self.slug / f"{self.name}.py"

    @property
    def notebook_path(self) -> Path:
        return self.root / "modules" / self.slug / f"{self.name}.ipynb"

    @property
    def notebook_rel(self) -> str:
        return f"modules/{self.slug}/{self.name}.ipynb"

    @property
    def tests_path(self) -> Path:
        return self.root / "tests" / self.slug

    @property
    def available(self) -> bool:
        if is_student_copy(self.root):  # its notebook, or tito's record of it (a deleted notebook can be reset)
            return self.notebook_path.is_file() or (self.notebook_path.parent / ".tito-stubs.json").is_file()
        return self.solution_path.is_file()


def all_modules(root: Path | None = None) -> list[Module]:
    root = root or find_root()
    return [Module(n, name, summary, root) for n, name, summary in MODULE_TABLE]


def available_modules(root: Path | None = None) -> list[Module]:
    return [m for m in all_modules(root) if m.available]


def _listing(modules: list[Module]) -> str:
    return ", ".join(f"{m.number:02d} ({m.name})" for m in modules) or "none yet"


def resolve(spec: str, root: Path | None = None, *, need_available: bool = True) -> Module:
    """Accept '1', '01', 'tensor', '01_tensor' (and 'module01'-ish typos get a clear error)."""
    modules = all_modules(root)
    key = spec.strip().lower()
    match = None
    for m in modules:
        if key in {str(m.number), f"{m.number:02d}", m.name, m.slug}:
            match = m
            break
    if match is None:
        raise TitoError(
            f"unknown module {spec!r}. Valid modules are 01-20, by number or name; "
            f"available now: {_listing(available_modules(root))}."
        )
    if need_available and not match.available:
        raise TitoError(
            f"{match.label} is planned but not available yet. "
            f"Available now: {_listing(available_modules(root))}."
        )
    return match

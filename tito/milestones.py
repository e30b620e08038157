"""`tito milestone`: historical results reproduced with the student's own tinytorch.

Each milestone is one small program in milestones/ (e.g. milestones/perceptron_1958.py) that
imports only tinytorch (and numpy, matplotlib, tqdm), the way a user's program would. At
its top it declares, as plain literals, TITLE, YEAR (or None), MODULES (the modules whose
code it runs) and TARGET (what it must reach, in words); tito reads them without running
or importing the file. Run, it trains with a progress bar, prints its result against its
target, saves a plot under build/milestones/ ($TINYTORCH_MILESTONES_OUT) and leaves a
record there (<name>.json: result, met, plot) for tito's summary; it exits 0 when the target
is met.

On the student's package a milestone runs only when every module it needs is *finished*:
  1. the module is available in this course;
  2. its files in tinytorch/ hold no stub any more (what `tito status` shows as "exported");
  3. its last `tito test module NN` ran against the student's notebook and passed (tito's
     record in .tito/state.json).
Otherwise it refuses and names the first module (in course order) that is not finished,
and why. `--solutions` runs it on the reference build (build/solutions) instead, in a
subprocess whose PYTHONPATH is that build.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from tito.errors import TitoError
from tito.pyparse import parse

FIELDS = ("TITLE", "YEAR", "MODULES", "TARGET")
RUN_TIMEOUT_S = int(os.environ.get("TITO_MILESTONE_TIMEOUT", "1800"))


@dataclass(frozen=True)
class Milestone:
    name: str        # what `tito milestone run NAME` takes: the file's stem without its year
    path: Path
    title: str
    year: int | None
    modules: tuple[str, ...]  # module slugs, e.g. "03_layers", in course order
    target: str
    summary: str     # the docstring's first paragraph (its headline), on one line

    @property
    def label(self) -> str:
        return f"{self.name} ({self.year})" if self.year else self.name

    @property
    def numbers(self) -> list[int]:
        return [int(slug.split("_", 1)[0]) for slug in self.modules]


def folder(root: Path) -> Path:
    return root / "milestones"


def out_dir(root: Path) -> Path:
    from tito.build import build_root

    return build_root(root) / "milestones"


def _read(path: Path, root: Path) -> Milestone:
    """A milestone's declarations, read from its source with ast (nothing is imported)."""
    from tito.course import all_modules

    rel = path.relative_to(root).as_posix()
    try:
        tree = parse(path.read_text(encoding="utf-8"), filename=rel)
    except SyntaxError as exc:
        raise TitoError(f"{rel}, line {exc.lineno}: {exc.msg}; fix the milestone file.") from None
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in FIELDS:
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                raise TitoError(f"{rel}, line {node.lineno}: {node.targets[0].id} must be a plain literal "
                                f"(tito reads it without running the file).") from None
    missing = [f for f in FIELDS if f not in found]
    if missing:
        raise TitoError(f"{rel} does not declare {', '.join(missing)} at its top level (every milestone "
                        f"declares {', '.join(FIELDS)}).")
    slugs = {m.slug for m in all_modules(root)}
    modules = found["MODULES"]
    if not isinstance(modules, (list, tuple)) or not modules or any(m not in slugs for m in modules):
        raise TitoError(f"{rel}: MODULES must list module folders such as \"01_tensor\"; got {modules!r}.")
    doc = ast.get_docstring(tree) or ""
    return Milestone(
        name=re.sub(r"_\d{4}$", "", path.stem), path=path, title=str(found["TITLE"]),
        year=found["YEAR"], modules=tuple(sorted(modules)), target=str(found["TARGET"]),
        summary=" ".join(doc.strip().split("\n\n")[0].split()),
    )


def discover(root: Path) -> list[Milestone]:
    """Every milestone, in the order a student reaches them: by the last module each needs."""
    paths = sorted(p for p in folder(root).glob("*.py") if not p.name.startswith("_")) \
        if folder(root).is_dir() else []
    found = [_read(p, root) for p in paths]
    return sorted(found, key=lambda m: (max(m.numbers), m.year or 0, m.name))


def find(root: Path, spec: str) -> Milestone:
    milestones = discover(root)
    key = spec.strip().lower().removesuffix(".py")
    for m in milestones:
        if key in (m.name, m.path.stem):
            return m
    names = ", ".join(m.name for m in milestones) or "none"
    raise TitoError(f"unknown milestone {spec!r}. The milestones are: {names} (or `all`); "
                    f"`tito milestone list` describes them.")


def unfinished(root: Path, milestone: Milestone):
    """(module, why) for the first module `milestone` needs that is not finished on the
    student's package, `why` a sentence starting with the module's label; None when every
    module it needs is finished."""
    from tito import testing
    from tito.commands import package_state
    from tito.course import resolve

    state = testing.load_state(root)
    for slug in milestone.modules:
        module = resolve(slug.split("_", 1)[0], root, need_available=False)
        if not module.available:
            return module, f"{module.label}, which this course does not have yet (it is planned)"
        files = package_state(module, state)
        last = state.get(module.slug, {}).get("last_test")
        test = f"`tito test module {module.number:02d}`"
        if files != "exported":
            left = {"stub": "still holds its released stubs", "missing": "is missing its package files"}.get(
                files, f"still has {files}")
            return module, (f"{module.label}, which is not finished: tinytorch/ {left}. Write it in "
                            f"{module.notebook_rel}, then run {test}")
        if not last or last.get("against") != "notebook":
            return module, (f"{module.label}, which is not finished: it has no passing {test} on record. "
                            f"Run {test}")
        if not last.get("ok"):
            return module, (f"{module.label}, which is not finished: its last {test} "
                            f"({last.get('when', '?')}) had {last.get('failed', '?')} failing test(s). "
                            f"Fix them, then run {test} again")
    return None


def list_command() -> int:
    from tito.course import find_root

    root = find_root()
    milestones = discover(root)
    if not milestones:
        print(f"no milestones in {folder(root)}")
        return 0
    print("Milestones: landmark results, trained with your own tinytorch "
          "(`tito milestone run NAME`; add --solutions for the reference build).\n")
    for m in milestones:
        blocker = unfinished(root, m)
        needs = textwrap.fill("needs: " + ", ".join(slug.replace("_", " ") for slug in m.modules), width=100,
                              initial_indent=" " * 25, subsequent_indent=" " * 32)
        print(f"{m.label:<24} {m.title}")
        print(f"{'':<24} target: {m.target}")
        print(needs)
        print(f"{'':<24} {'ready on your package' if blocker is None else f'waits for {blocker[0].label}'}"
              f" · {m.path.relative_to(root).as_posix()}")
    print("\nStart with `tito milestone run all --solutions` to see every one work on the reference build.")
    return 0


def _package(root: Path, solutions: bool) -> tuple[Path, str]:
    from tito import build
    from tito.course import require_solutions

    if solutions:
        require_solutions(root, "`tito milestone run --solutions`")
        return build.build_solutions(root), "the reference solutions"
    return root, "your tinytorch"


def _run_one(root: Path, milestone: Milestone, package_parent: Path) -> dict:
    """Run one milestone in a subprocess; its output streams to the terminal (the progress bar)."""
    out = out_dir(root)
    out.mkdir(parents=True, exist_ok=True)
    record = out / f"{milestone.name}.json"
    record.unlink(missing_ok=True)  # a stale record must not pass for this run's
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    from tito.build import build_root
    from tito.testing import one_thread_each

    one_thread_each(env)  # small models: one thread is as fast, and never waits for a busy core

    env.update({
        "PYTHONPATH": str(package_parent),
        "PYTHONSAFEPATH": "1",  # the milestones folder and the cwd must not shadow the package
        "PYTHONPYCACHEPREFIX": str(build_root(root) / "pycache"),
        "MPLBACKEND": "Agg",
        "TINYTORCH_MILESTONES_OUT": str(out),
    })
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(milestone.path)], cwd=root, env=env, timeout=RUN_TIMEOUT_S)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        code = None
    seconds = time.perf_counter() - start
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if code is None:
        result = f"stopped after {RUN_TIMEOUT_S} s (TITO_MILESTONE_TIMEOUT)"
    elif not data:
        result = f"crashed (exit code {code}) before reporting a result: see the error above"
    else:
        result = data.get("result", "?")
    return {"milestone": milestone, "ran": True, "met": bool(data.get("met")) and code == 0,
            "result": result, "plot": data.get("plot"), "seconds": seconds}


def run_command(spec: str, *, solutions: bool) -> int:
    from tito.course import find_root
    from tito.testing import check_import

    root = find_root()
    chosen = discover(root) if spec.strip().lower() == "all" else [find(root, spec)]
    if not chosen:
        raise TitoError(f"no milestones in {folder(root)}.")
    package_parent, against = _package(root, solutions)
    if not solutions:
        blockers = {m.name: (unfinished(root, m) or (None, None))[1] for m in chosen}
        if len(chosen) == 1 and blockers[chosen[0].name]:
            m = chosen[0]
            raise TitoError(f"milestone {m.name} needs {blockers[m.name]}. (`tito milestone run {m.name} "
                            f"--solutions` shows it on the reference build.)", exit_code=1)
        if any(b is None for b in blockers.values()):
            problem = check_import(root)
            if problem:
                raise TitoError(problem + "\nFix that first (`tito test module NN` says where).", exit_code=1)
    else:
        blockers = {m.name: None for m in chosen}
    results = []
    for i, m in enumerate(chosen, 1):
        head = f"[{i}/{len(chosen)}] " if len(chosen) > 1 else ""
        if blockers[m.name]:
            print(f"\n=== {head}milestone {m.label}: skipped, it needs {blockers[m.name]} ===", flush=True)
            results.append({"milestone": m, "ran": False, "met": False, "result": "not run", "plot": None,
                            "seconds": 0.0})
            continue
        print(f"\n=== {head}milestone {m.label}: {m.title}, on {against} ===", flush=True)
        print(m.summary, flush=True)
        results.append(_run_one(root, m, package_parent))
    if len(chosen) > 1:
        _summary(root, results)
    return 0 if all(r["met"] for r in results) else 1


def _summary(root: Path, results: list[dict]) -> None:
    print("\nSummary:")
    for r in results:
        m = r["milestone"]
        mark = "✓" if r["met"] else ("·" if not r["ran"] else "✗")
        time_s = f"{r['seconds']:5.1f} s" if r["ran"] else "      -"
        print(f"  {mark} {m.label:<24} {time_s}  {r['result']}")
        print(f"    {'':<24}          target: {m.target}")
    total = sum(r["seconds"] for r in results)
    met = sum(r["met"] for r in results)
    print(f"\n{met} of {len(results)} milestones met their targets in {total:.0f} s; "
          f"plots in {out_dir(root)}/")
    skipped = [r["milestone"].name for r in results if not r["ran"]]
    if skipped:
        print(f"Not run yet (finish the modules they need): {', '.join(skipped)}.")

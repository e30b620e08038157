"""The student-facing commands: status, export, test, module start/reset."""
from __future__ import annotations

import os
import re
import shutil

from tito import build, notebook, release, testing
from tito.backup import backup_notebook
from tito.course import Module, all_modules, available_modules, find_root, require_solutions, resolve
from tito.errors import TitoError
from tito.locks import write_atomic


def _targets(spec: str | None, all_modules_flag: bool, verb: str) -> list[Module]:
    root = find_root()
    if all_modules_flag:
        if spec:
            raise TitoError("give a module or --all, not both.")
        return available_modules(root)
    if not spec:
        raise TitoError(f"which module? e.g. `tito {verb} 01`, or `tito {verb} --all`.")
    return [resolve(spec, root)]


def package_state(module: Module, state: dict) -> str:
    """'stub', 'exported', or 'N stubs left' for this module's files in tinytorch/.

    Cheap on purpose (status must be quick): it counts the stub messages that name this
    module's notebook instead of regenerating the released files."""
    if not module.available:
        return "-"
    if module.solution_path.is_file():
        text = module.solution_path.read_text(encoding="utf-8")
        targets = set(re.findall(r"^#\|\s*(?:default_exp|export)\s+([\w.]+)\s*$", text, re.M))
    else:  # a student copy: the manifest beside the notebook names them
        try:
            targets = set(release.package_targets(module))
        except TitoError:
            return "missing"
    paths = [notebook.target_path(module.root / "tinytorch", t) for t in targets]
    if any(not p.is_file() for p in paths):
        return "missing"
    marker = f"is not implemented yet: write it in {module.notebook_rel}"
    left = sum(p.read_text(encoding="utf-8").count(marker) for p in paths)
    if left == 0:
        return "exported"
    return f"{left} stubs left" if state.get(module.slug, {}).get("exported") else "stub"


def status() -> int:
    root = find_root()
    state = testing.load_state(root)
    print(f"course folder: {root}")
    print(f"{'#':>2}  {'module':<13} {'status':<10} {'package':<14} last test")
    for m in all_modules(root):
        last = state.get(m.slug, {}).get("last_test")
        if last:
            verdict = "passed" if last["ok"] else "failed"
            result = f"{verdict} {last['passed']}/{last['passed'] + last['failed']} ({last['against']}, {last['when']})"
            if last.get("parity"):
                result += f", {last['parity']} vs PyTorch"
        else:
            result = "-"
        print(f"{m.number:02d}  {m.name:<13} {'available' if m.available else 'planned':<10} "
              f"{package_state(m, state):<14} {result}")
    print("\nNext: `tito module start NN` opens a notebook; `tito test module NN` grades it.")
    return 0


def export(spec: str | None, *, all_modules: bool, solutions: bool) -> int:
    root = find_root()
    if solutions:  # always the whole package: later modules import earlier ones
        require_solutions(root, "`tito export --solutions`")
        dest = build.build_solutions(root)
        print(f"built the reference package from solutions/ into {dest}/tinytorch "
              f"(your tinytorch/ is untouched)")
        return 0
    for module in _targets(spec, all_modules, "export"):
        for path in build.export_student(module):
            print(f"{module.notebook_rel} -> {path.relative_to(root)}")
        testing.remember(module, exported=True)
    return 0


def test(spec: str | None, *, all_modules: bool, solutions: bool, verbose: bool = False,
         pytest_args: tuple[str, ...] = ()) -> int:
    root = find_root()
    if solutions:
        require_solutions(root, "`tito test --solutions`")
    modules = _targets(spec, all_modules, "test module")
    if solutions:
        package_parent = build.build_solutions(root)
        against = "the reference solutions"
    else:
        package_parent = root
        against = "your notebook"
        for module in modules:
            build.export_student(module)
            testing.remember(module, exported=True)
    results = []
    for module in modules:
        print(f"\n=== {module.label}: running {module.tests_path.relative_to(root)} against {against} ===",
              flush=True)
        outcome = testing.run_suite(module, package_parent, verbose=verbose, extra_args=pytest_args)
        print("\n" + testing.summary(module, outcome, against))
        if not solutions:
            _remind_predictions(module)
        if "-x" in pytest_args and any(len(d.candidates) > 1 for d in outcome.details):
            print("(-x stopped the run at its first failure: the tests it did not run are what tells "
                  "these functions apart; run without -x to have one named)")
        testing.record(module, outcome, "solutions" if solutions else "notebook")
        results.append((module, outcome))
    if len(results) > 1:
        print("\nSummary:")
        for module, outcome in results:
            mark = "✓" if outcome.ok else "✗"
            print(f"  {mark} {module.slug:<16} {outcome.passed} passed, {outcome.failed} failed")
    failing = [m for m, o in results if not o.ok]
    if failing and not solutions:
        m, stopped = next((m, o.problem) for m, o in results if not o.ok)
        print(f"\nNext: open {m.notebook_rel}, fix " + ("what stopped the run (above)" if stopped else "the first failure above")
              + f", then `tito test module {m.number:02d}`"
              + ("." if verbose else " (add --verbose for full tracebacks)."))
    return 1 if failing else 0


def _remind_predictions(module: Module) -> None:
    """One line on how many of the notebook's predictions are written (they are not graded)."""
    nb = notebook.read_student(module.notebook_path, module.notebook_rel, module.number)
    written, asked = notebook.predictions(nb)
    if asked:
        print(f"Predictions written: {written} of {asked}." + (
            " They are not graded; each is your guess, written before the cell that measures it (search the "
            "notebook for `predicted_`)." if written < asked else ""))


def module_start(spec: str, *, launch: bool) -> int:
    module = resolve(spec)
    path = module.notebook_path
    if not path.is_file():
        raise TitoError(f"{module.notebook_rel} is missing. `tito module reset {module.number:02d}` restores it.")
    print(f"{module.label}: {module.notebook_rel}")
    readme = path.parent / "README.md"
    if readme.is_file():
        print(f"Read {readme.relative_to(module.root)} for the goals.")
    print(f"Replace each `raise NotImplementedError` stub, run the check cell below it, "
          f"then `tito test module {module.number:02d}`.")
    if not launch:
        print(f"Open it in Jupyter with `tito module start {module.number:02d} --launch` "
              f"(or `jupyter lab {module.notebook_rel}`).")
        return 0
    jupyter = shutil.which("jupyter")
    if jupyter is None:
        raise TitoError("Jupyter is not installed in this environment: run `pip install -e .` in the course folder.")
    print("Starting Jupyter Lab; it prints the URL to open (Ctrl-C stops it).", flush=True)
    os.chdir(module.root)
    args = [jupyter, "lab", module.notebook_rel]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers often run as root; Jupyter refuses without this
        args.append("--allow-root")
    os.execv(jupyter, args)
    return 0  # not reached


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    import sys

    if not sys.stdin.isatty():
        raise TitoError(f"{question} Add --yes to confirm (no terminal to ask on).")
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in {"y", "yes"}:
        raise TitoError("nothing was changed.", exit_code=1)


def module_reset(spec: str, *, yes: bool = False) -> int:
    """Back up the notebook (and any hand-edited package file), then restore the released
    notebook and the module's stub package files. All checks come first: nothing half done."""
    module = resolve(spec)
    root = module.root
    outputs = release.release_outputs(module)
    package_files = [p for p in outputs if (root / "tinytorch") in p.parents]
    print(f"tito module reset {module.number:02d} will:")
    print(f"  - back up {module.notebook_rel} to .tito/backups/{module.slug}/, then replace it with the "
          f"released notebook (your code in it is replaced by the stubs);")
    print("  - put the stubs back in " + ", ".join(p.relative_to(root).as_posix() for p in package_files)
          + " (so `tinytorch` no longer has your code for this module).")
    _confirm(f"Reset {module.label}?", yes)
    pending = build.guard_package_files(module, package_files)  # permission check + hand-edit backups
    for path in outputs:
        if path.exists() and not os.access(path, os.W_OK):
            raise TitoError(f"cannot write {path.relative_to(root)}: permission denied; nothing was reset.")
    for path, backup in pending:
        print(f"backed up your hand edits of {path.relative_to(root)} to {backup.relative_to(root)}")
    if module.notebook_path.is_file():
        saved = backup_notebook(module)
        print(f"backed up your notebook to {saved.relative_to(root)}")
    for path, text in outputs.items():
        write_atomic(path, text)  # a full disk leaves the notebook whole, never half written
    testing.remember(module, exported=False, last_test=None, written=None)
    print(f"restored the released {module.notebook_rel} and its stub package files. "
          f"`tito module restore {module.number:02d}` lists your backups.")
    return 0


def module_restore(spec: str, backup: str | None, *, yes: bool = False) -> int:
    """List a module's notebook backups, or put one back (backing up the current notebook first)."""
    module = resolve(spec)
    root = module.root
    folder = root / ".tito" / "backups" / module.slug
    backups = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if backup is None:
        if not backups:
            print(f"no backups of {module.notebook_rel} yet (tito makes one before every reset or release).")
            return 0
        print(f"backups of {module.notebook_rel}, newest last:")
        for path in backups:
            print(f"  {path.name}")
        print(f"restore one with `tito module restore {module.number:02d} NAME`.")
        return 0
    chosen = next((p for p in backups if p.name == backup or p.stem == backup), None)
    if chosen is None:
        raise TitoError(f"no backup named {backup!r} for {module.label}; "
                        f"`tito module restore {module.number:02d}` lists them.")
    notebook.read_student(chosen, chosen.relative_to(root).as_posix(), module.number)  # refuse a broken one
    _confirm(f"Replace {module.notebook_rel} with {chosen.name}?", yes)
    if module.notebook_path.is_file():
        saved = backup_notebook(module)
        print(f"backed up the current notebook to {saved.relative_to(root)}")
    write_atomic(module.notebook_path, chosen.read_bytes())  # never half a notebook
    print(f"restored {module.notebook_rel} from {chosen.relative_to(root)}; `tito test module "
          f"{module.number:02d}` exports and tests it.")
    return 0

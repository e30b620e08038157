"""Run a solution notebook's cells the way nbgrader's autograder does, once, and at each
mutated cell fork a copy that runs the mutant instead: which graded check cells fail?

Usage: python -m tito.run_mutant_checks NOTEBOOK.py MUTANTS.json WORKDIR
MUTANTS.json: [{"name": ..., "cell": <index among the notebook's cells>, "source": <new cell source>}]

Cells run in order in one IPython shell; an error does not stop the run (nbgrader runs every
cell). The parent runs the unchanged notebook (the baseline: every graded cell must pass).
When it reaches a cell that a mutant changes, it forks: the child runs the mutated cell and
the cells after it until the first graded cell fails (caught) or the notebook ends (not
caught). Forking shares the work before the mutated cell, so a module's mutants cost one
notebook run plus a few cells each, instead of one full run each.
Prints one JSON line per mutant, then one for the baseline.
"""
import contextlib
import io
import json
import os
import signal
import sys
from pathlib import Path

CELL_TIMEOUT_S = 120
CHILD_TIMEOUT_S = 600


class CellTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise CellTimeout(f"the cell ran past {CELL_TIMEOUT_S} s")


def _run_cell(shell, source):
    """None when the cell ran, else 'ErrorType: message'."""
    signal.alarm(CELL_TIMEOUT_S)
    try:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            result = shell.run_cell(source, store_history=False)
    finally:
        signal.alarm(0)
    error = result.error_in_exec or result.error_before_exec
    if error is None:
        return None
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


def _run_from(shell, cells, start, first_source=None):
    """Run cells[start:] (the first one as `first_source` if given); stop at the first
    graded cell that fails and return (grade_id, error), or None if all graded cells pass."""
    graded_seen = 0
    for index in range(start, len(cells)):
        cell = cells[index]
        source = first_source if (index == start and first_source is not None) else cell.source
        problem = _run_cell(shell, source)
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            graded_seen += 1
            if problem:
                return meta.get("grade_id"), problem
    return None


def main(path, mutants_file, workdir):
    import jupytext
    from IPython.core.interactiveshell import InteractiveShell

    os.chdir(workdir)
    os.environ.setdefault("MPLBACKEND", "Agg")
    signal.signal(signal.SIGALRM, _on_alarm)
    nb = jupytext.read(Path(path), fmt="py:percent")
    cells = [c for c in nb.cells if c.cell_type == "code"]
    index_of = {id(c): i for i, c in enumerate(cells)}
    code_index = {n: index_of[id(c)] for n, c in enumerate(nb.cells) if id(c) in index_of}
    mutants = json.loads(Path(mutants_file).read_text(encoding="utf-8"))
    by_cell = {}
    for mutant in mutants:
        by_cell.setdefault(code_index[mutant["cell"]], []).append(mutant)

    shell = InteractiveShell.instance(history_length=0)
    shell.history_manager.enabled = False
    out = sys.stdout
    baseline_failures = []
    for index, cell in enumerate(cells):
        for mutant in by_cell.get(index, []):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: this mutant from here on
                os.close(read_end)
                try:
                    found = _run_from(shell, cells, index, mutant["source"])
                    record = {"name": mutant["name"], "caught": found is not None,
                              "how": (f"graded cell {found[0]} fails: {found[1]}" if found
                                      else "every graded check cell still passes")}
                except BaseException as exc:  # the child must always report
                    record = {"name": mutant["name"], "caught": False, "how": f"the run broke: {exc!r}"}
                os.write(write_end, json.dumps(record).encode())
                os.close(write_end)
                os._exit(0)
            os.close(write_end)
            chunks = []
            with os.fdopen(read_end, "rb") as reader:
                signal.alarm(CHILD_TIMEOUT_S)
                try:
                    chunks.append(reader.read())
                except CellTimeout:
                    os.kill(pid, signal.SIGKILL)
                finally:
                    signal.alarm(0)
            os.waitpid(pid, 0)
            text = b"".join(chunks).decode() or json.dumps(
                {"name": mutant["name"], "caught": False, "how": "the mutant's run died without a result"})
            print(text, file=out, flush=True)
        problem = _run_cell(shell, cell.source)
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and problem:
            baseline_failures.append(f"{meta.get('grade_id')}: {problem}")
    graded = sum(1 for c in cells if c.metadata.get("nbgrader", {}).get("grade"))
    print(json.dumps({"baseline": True, "graded": graded, "failures": baseline_failures}), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))

"""Run a notebook's cells as nbgrader's autograder does, and report its graded check cells.

Usage: python -m tito.run_checks NOTEBOOK.py WORKDIR
Cells run in order in one kernel; an error does not stop the run (nbgrader runs every cell),
but the first graded cell that fails does, since that is all a mutant check needs to know.
Exit 0: a graded cell failed (printed); 1: every graded cell passed; 2: the run broke.
"""
import sys
from pathlib import Path

CELL_TIMEOUT_S = 120


def main(path: str, workdir: str) -> int:
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    nb = jupytext.read(Path(path), fmt="py:percent")
    client = NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S, allow_errors=True,
                            extra_arguments=["--log-level=ERROR"],
                            resources={"metadata": {"path": str(Path(workdir).resolve())}})
    graded = 0
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            meta = cell.metadata.get("nbgrader", {})
            try:
                client.execute_cell(cell, index)
                errors = [o for o in cell.outputs if o.get("output_type") == "error"]
                problem = f"{errors[0].get('ename')}: {errors[0].get('evalue')}" if errors else None
            except CellTimeoutError:
                problem = f"the cell ran past {CELL_TIMEOUT_S} s"
            if meta.get("grade"):
                graded += 1
                if problem:
                    first = problem.strip().splitlines()[0][:200] if problem.strip() else "error"
                    print(f"graded cell {meta.get('grade_id')} fails: {first}")
                    return 0
    print(f"all {graded} graded cells pass")
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1], sys.argv[2]))
    except Exception as exc:  # a broken run must not read as "caught"
        print(f"run_checks: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)

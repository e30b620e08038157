"""Run one solution notebook top to bottom in a fresh kernel (used by `tito verify`).

Usage: python -m tito.run_notebook solutions/NN_name/name.py
A separate process, so each notebook gets its own environment (PYTHONPATH names the
package under test) and several can run at once. Exit 0 when every cell ran.
"""
import sys
from pathlib import Path

CELL_TIMEOUT_S = 600


def main(path: str) -> int:
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    source = Path(path).resolve()
    nb = jupytext.read(source, fmt="py:percent")
    try:
        NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                       extra_arguments=["--log-level=ERROR"],  # no start-up chatter in CI logs
                       resources={"metadata": {"path": str(source.parent)}}).execute()
    except CellExecutionError as exc:
        lines = str(exc).strip().splitlines()
        print("\n".join(lines[-12:]) if lines else "a cell failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""nbgrader's Execute, stopping a submission's run at its first timeout or past its budget.

Loaded by nbgrader (the grading template's nbgrader_config.py) in place of its Execute.
Plain nbgrader interrupts a cell that runs past the timeout and goes on, so every later
cell that calls the looping function costs the full timeout again (one submission took
27 minutes). Here the first cell that times out ends the run: every later code cell gets
an error output saying why and is not executed (its test cells score 0), and no cell
starts once the submission's whole budget is spent.
"""
from __future__ import annotations

import time

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer


class StopAtFirstTimeout(Execute):
    budget = Integer(900, help="seconds for the whole notebook; no cell starts after that").tag(config=True)

    _stopped: str | None = None
    _started: float | None = None

    def preprocess(self, nb, resources=None, km=None):
        self._stopped, self._started = None, None  # one instance may run several notebooks
        return super().preprocess(nb, resources, km)

    async def _async_handle_timeout(self, timeout, cell=None):
        self._stopped = (f"not run: an earlier cell ran past the {timeout} s time limit, so the run "
                         f"stopped there")
        return await super()._async_handle_timeout(timeout, cell)

    def preprocess_cell(self, cell, resources, index):
        if self._started is None:
            self._started = time.monotonic()
        if self._stopped is None and time.monotonic() - self._started > self.budget:
            self._stopped = f"not run: the notebook used up its {self.budget} s grading budget"
        if self._stopped is None or cell.cell_type != "code":
            return super().preprocess_cell(cell, resources, index)
        cell.outputs = [NotebookNode(output_type="error", ename="NotRun", evalue=self._stopped,
                                     traceback=[f"NotRun: {self._stopped}"])]
        return cell, resources

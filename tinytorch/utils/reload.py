"""Notebooks see what `tito export` just wrote, without a kernel restart."""
import sys


def reload_on_export():
    """In a Jupyter kernel: before each cell runs, reload every module whose file changed
    since it was imported, and make functions and classes already imported from it run
    the new code (IPython's autoreload). Outside Jupyter: nothing.

    Why: a notebook imports tinytorch once; after `tito export` or `tito test` rewrites a
    package file, the kernel would otherwise keep calling the stub it imported first, and
    say "not implemented yet" about code that is written and exported.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return
    if "autoreload" not in shell.extension_manager.loaded:
        shell.run_line_magic("load_ext", "autoreload")
    shell.run_line_magic("autoreload", "2")

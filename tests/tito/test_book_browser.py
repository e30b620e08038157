"""The book check's headless-browser runs: a browser that never finishes is killed with every
process it started, tried again, and reported as a page that did not load (not a crash)."""
import os
import time

from tito import book


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_a_stuck_browser_is_killed_with_its_children_and_tried_again(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    stuck = tmp_path / "stuck-browser"
    stuck.write_text(f"#!/bin/sh\nsleep 600 &\necho $! >> {pids}\nsleep 600\n")
    stuck.chmod(0o755)
    monkeypatch.setattr(book, "CHROMIUM_TIMEOUT_S", 1)
    started = time.perf_counter()
    assert book._chromium_run(str(stuck), "http://127.0.0.1:9/") is None
    assert time.perf_counter() - started < 30
    children = [int(line) for line in pids.read_text().split()]
    assert len(children) == book.CHROMIUM_TRIES, children
    time.sleep(0.2)
    assert not [pid for pid in children if _alive(pid)], "a stuck browser's child process was left running"


def test_a_browser_that_finishes_gives_its_output(tmp_path):
    quick = tmp_path / "quick-browser"
    quick.write_text("#!/bin/sh\necho '<body>page</body>'\n")
    quick.chmod(0o755)
    proc = book._chromium_run(str(quick), "http://127.0.0.1:9/", "--dump-dom")
    assert proc is not None and proc.returncode == 0 and "<body>page</body>" in proc.stdout
    assert os.path.basename(proc.args[0]) == "quick-browser"

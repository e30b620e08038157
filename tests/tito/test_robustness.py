"""Nothing a student typed is lost, nothing is left half done, two commands at once are safe."""
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest

from tito import build, commands, testing
from tito.course import resolve
from tito.errors import TitoError

pytestmark = [pytest.mark.timeout(600), pytest.mark.command]

MODULE = "modules/02_activations/activations.ipynb"
PACKAGE_FILE = "tinytorch/nn/activations.py"


def test_hand_edits_in_a_package_file_are_backed_up_before_export(course):
    path = course.path(PACKAGE_FILE)
    path.write_text(path.read_text() + "\n# my fix, typed straight into the package\n")
    out = course.tito("export", "02")
    assert out.returncode == 0, out.stderr
    match = re.search(r"your edits were saved to (\S+\.py)", out.stdout)
    assert match, out.stdout
    assert "my fix, typed straight" in course.path(match.group(1)).read_text()
    again = course.tito("export", "02")  # what tito wrote itself is not backed up again
    assert "edited by hand" not in again.stdout


def test_an_unwritable_package_file_stops_reset_before_anything_changes(course, monkeypatch):
    nb = nbformat.read(course.path(MODULE), as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("work in progress"))
    nbformat.write(nb, course.path(MODULE))
    before = course.path(MODULE).read_text()
    target = str(course.path(PACKAGE_FILE))
    real_access = build.os.access
    monkeypatch.setattr(build.os, "access", lambda p, mode: False if str(p) == target else real_access(p, mode))
    monkeypatch.setenv("TINYTORCH_ROOT", str(course.root))
    with pytest.raises(TitoError, match="permission denied"):
        commands.module_reset("02", yes=True)
    assert course.path(MODULE).read_text() == before, "the notebook must not be reset when the package cannot be"


def test_state_keeps_every_record_when_commands_run_at_once(course, monkeypatch):
    monkeypatch.setenv("TINYTORCH_ROOT", str(course.root))
    modules = [resolve(n, course.root) for n in ("01", "02", "03", "04")]
    threads = [threading.Thread(target=lambda m=m, i=i: [testing.remember(m, run=j) for j in range(30)])
               for i, m in enumerate(modules)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = testing.load_state(course.root)
    assert all(state[m.slug]["run"] == 29 for m in modules), state


def test_two_solution_builds_at_once_both_succeed(course):
    env_code = ("import sys; sys.path[:0] = [{root!r}]; from tito.cli import main; "
                "raise SystemExit(main(['test', '02', '--solutions']))").format(root=str(course.root))
    procs = [subprocess.Popen([sys.executable, "-c", env_code], cwd=course.root, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env={"PATH": "/usr/bin:/bin", "TINYTORCH_ROOT": str(course.root),
                                   "PYTHONDONTWRITEBYTECODE": "1"}) for _ in range(2)]
    outs = [p.communicate(timeout=500)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs


def test_a_wrong_course_folder_is_named(course, tmp_path):
    out = course.tito("status", TINYTORCH_ROOT=str(tmp_path))
    assert out.returncode == 2 and "not a TinyTorch course folder" in out.stderr, out.stderr
    ok = course.tito("status")
    assert f"course folder: {course.root}" in ok.stdout


def test_reset_forgets_the_last_result_and_restore_brings_the_notebook_back(course):
    assert course.tito("test", "02", "--solutions").returncode == 0
    nb = nbformat.read(course.path(MODULE), as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("version one of my notes"))
    nbformat.write(nb, course.path(MODULE))
    out = course.tito("module", "reset", "02", "--yes")
    assert out.returncode == 0, out.stderr
    assert "put the stubs back in tinytorch/nn/activations.py" in out.stdout
    status = course.tito("status").stdout
    row = next(line for line in status.splitlines() if line.startswith("02 "))
    assert "passed" not in row, row
    listing = course.tito("module", "restore", "02")
    name = re.search(r"^  (activations-\S+\.ipynb)$", listing.stdout, re.M).group(1)
    back = course.tito("module", "restore", "02", name, "--yes")
    assert back.returncode == 0, back.stderr
    assert "version one of my notes" in course.path(MODULE).read_text()
    assert course.tito("module", "restore", "02", "nope.ipynb", "--yes").returncode == 2


def test_tito_outside_a_course_says_which_course_it_uses(course, tmp_path):
    import os

    code = f"import sys; sys.path[:0] = [{str(course.root)!r}]; from tito.cli import main; raise SystemExit(main(['status']))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "TINYTORCH", "TITO_"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"using the course tito was installed from, {course.root}" in out.stderr, out.stderr


def test_doctor_says_how_to_get_graphviz(course, tmp_path):
    out = course.tito("doctor", PATH=str(tmp_path))  # no `dot` on this PATH
    assert "Graphviz `dot`" in out.stdout and "apt-get install graphviz" in out.stdout, out.stdout


def test_ctrl_c_during_the_test_run_prints_one_line_and_stops_pytest(course):
    """A terminal's Ctrl-C sends SIGINT to the whole foreground process group: tito and
    pytest alike. tito must answer with one line, and pytest must neither print its own
    interrupt report nor outlive tito."""
    import signal
    import time

    # A run that cannot end before the signal comes, however slowly this machine finds pytest,
    # and that has started a process of its own (as a test's subprocess would): it must stop
    # with pytest, not sleep on.
    marker = course.path("sleeper-pid")
    sleeper = f"import os, pathlib, time; pathlib.Path({str(marker)!r}).write_text(str(os.getpid())); time.sleep(100)"
    course.path("tests/01_tensor/test_zz_slow.py").write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', {sleeper!r}])\n\n"
        "def test_slow():\n    time.sleep(50)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "TINYTORCH", "TITO_"))}
    env.update(TINYTORCH_ROOT=str(course.root), PYTHONDONTWRITEBYTECODE="1")
    code = ("import sys; sys.path.insert(0, %r); from tito.cli import main; "
            "raise SystemExit(main(sys.argv[1:]))" % str(course.root))
    proc = subprocess.Popen([sys.executable, "-c", code, "test", "module", "01", "--solutions"],
                            cwd=course.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,  # its own group, like a terminal job
                            # with Ctrl-C's default action, as a terminal gives it (a job that
                            # CI started in the background inherits SIGINT ignored)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline, pytest_pid = time.time() + 120, None
    while pytest_pid is None and time.time() < deadline and proc.poll() is None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if b"pytest" in cmdline and stat.rsplit(")", 1)[1].split()[1] == str(proc.pid):
                    pytest_pid = int(entry.name)
        time.sleep(0.05)
    assert pytest_pid is not None, "pytest never started under tito"
    while not marker.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)  # pytest is collecting: the test file starts its sleeper
    assert marker.exists(), "the test file's own process never started"
    assert proc.poll() is None, "tito finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)  # a loaded machine: seconds; stuck: never
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    assert err.strip() == "tito: interrupted.", f"stderr was:\n{err[-3000:]}"
    assert "KeyboardInterrupt" not in out and "Traceback" not in out, f"stdout was:\n{out[-3000:]}"
    time.sleep(0.2)
    for pid, what in [(pytest_pid, "pytest"), (int(marker.read_text()), "a process the tests started")]:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone
        assert state == "Z", f"{what} is still running after tito stopped"


def _package(course) -> dict:
    """Every file in the copy's tinytorch/, as bytes: to show that nothing was exported."""
    return {p: p.read_bytes() for p in sorted(course.path("tinytorch").rglob("*")) if p.is_file()}


def _one_line(out) -> str:
    err = out.stderr.strip()
    assert out.returncode == 1 and len(err.splitlines()) == 1 and err.startswith("tito: "), \
        (out.returncode, out.stderr)
    assert "Traceback" not in out.stdout + out.stderr
    return err


def test_a_notebook_that_is_not_utf8_gives_one_line_and_changes_nothing(course):
    path = course.path(MODULE)
    broken = path.read_bytes().replace(b"import", b"imp\xffort", 1)
    path.write_bytes(broken)
    package = _package(course)
    for args in (("export", "02"), ("test", "module", "02")):
        err = _one_line(course.tito(*args))
        assert MODULE in err and "not UTF-8" in err and "byte 0xff" in err and "tito module restore 02" in err, err
    assert path.read_bytes() == broken, "the notebook must be left as it is"
    assert _package(course) == package, "nothing may be exported"


def test_a_folder_in_place_of_the_notebook_gives_one_line(course):
    path = course.path(MODULE)
    path.unlink()
    path.mkdir()
    err = _one_line(course.tito("export", "02"))
    assert MODULE in err and "is a folder" in err, err


def test_an_unwritable_tito_folder_gives_one_line_and_changes_nothing(course):
    course.path(".tito").write_text("not a folder")  # nothing can be made inside it, even by root
    package, notebook_bytes = _package(course), course.path(MODULE).read_bytes()
    for args in (("export", "02"), ("module", "reset", "02", "--yes")):
        err = _one_line(course.tito(*args))
        assert ".tito" in err and "move it aside" in err, err
    assert _package(course) == package and course.path(MODULE).read_bytes() == notebook_bytes


def test_a_full_disk_gives_one_line_and_never_half_a_notebook(course, monkeypatch, capsys):
    """Every write under the course stops half way with ENOSPC, as on a full disk (backups,
    made by copying, still succeed: so reset gets as far as replacing the notebook)."""
    import errno

    from tito import cli

    real_text, real_bytes = Path.write_text, Path.write_bytes

    def full(real):
        def write(self, data, *args, **kwargs):
            if course.root not in self.parents:
                return real(self, data, *args, **kwargs)
            real(self, data[:len(data) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write

    monkeypatch.setenv("TINYTORCH_ROOT", str(course.root))
    monkeypatch.chdir(course.root)
    monkeypatch.setattr(Path, "write_text", full(real_text))
    monkeypatch.setattr(Path, "write_bytes", full(real_bytes))
    package, notebook_bytes = _package(course), course.path(MODULE).read_bytes()
    for args, names in ((["export", "02"], ".tito/state.json"), (["module", "reset", "02", "--yes"], MODULE)):
        assert cli.main(args) == 1, args
        err = capsys.readouterr().err.strip()
        assert err == f"tito: cannot write {names}: No space left on device. Free some disk space, then run " \
                      f"the command again.", err
    assert _package(course) == package and course.path(MODULE).read_bytes() == notebook_bytes
    assert not list(course.root.rglob("*.tmp")), "a temporary file was left behind"

"""tito.forkrun: a forked pytest run behaves like a fresh `python -m pytest` process."""
import os

from tito import forkrun


def _suite(tmp_path, body):
    (tmp_path / "pkg" / "probe").mkdir(parents=True)
    (tmp_path / "pkg" / "probe" / "__init__.py").write_text("WHERE = __file__\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_it.py").write_text(body)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkg"), PYTHONSAFEPATH="1")
    return env


def test_a_forked_run_imports_from_its_own_pythonpath_and_reports_the_exit_code(tmp_path):
    env = _suite(tmp_path, "import os, probe, sys\n"
                           "def test_env():\n"
                           "    assert probe.WHERE.startswith(os.environ['PYTHONPATH'])\n"
                           "    assert 'tinytorch' not in sys.modules\n"
                           "def test_fails():\n"
                           "    assert False, 'on purpose'\n")
    log = tmp_path / "log.txt"
    code = forkrun.run_pytest([str(tmp_path / "tests"), "-q", "-p", "no:cacheprovider"], env=env, cwd=tmp_path,
                              log=log, timeout=120)
    text = log.read_text()
    assert code == 1, text
    assert "1 failed, 1 passed" in text, text


def test_a_run_past_its_timeout_is_killed_and_reported_as_none(tmp_path):
    env = _suite(tmp_path, "import time\ndef test_sleeps():\n    time.sleep(600)\n")
    code = forkrun.run_pytest([str(tmp_path / "tests"), "-q", "-p", "no:cacheprovider", "-p", "no:timeout"],
                              env=env, cwd=tmp_path, log=tmp_path / "log.txt", timeout=5)
    assert code is None
    # the server still serves the next run
    env = _suite(tmp_path / "again", "def test_ok():\n    pass\n")
    code = forkrun.run_pytest([str(tmp_path / "again" / "tests"), "-q", "-p", "no:cacheprovider"], env=env,
                              cwd=tmp_path / "again", log=tmp_path / "again.txt", timeout=120)
    assert code == 0, (tmp_path / "again.txt").read_text()

"""The grading sandbox's limits hold for whatever runs inside it, whoever starts it."""
import subprocess
import sys

from tito import sandbox


def _run(tmp_path, code, **limits):
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    limits = {**sandbox.LIMITS, **limits}
    cmd = sandbox.command([sys.executable, "-c", code], scratch=scratch, limits=limits)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_process_in_the_sandbox_is_not_root_and_has_no_capabilities(tmp_path):
    out = _run(tmp_path, "import os\nprint(os.getuid(), open('/proc/self/status').read().split('CapEff:')[1].split()[0])")
    uid, caps = out.stdout.split()
    assert uid != "0" and int(caps, 16) == 0, out.stdout + out.stderr


def test_memory_and_file_size_are_limited(tmp_path):
    big = _run(tmp_path, "import numpy as np\ntry:\n    np.ones(3 << 27)\nexcept MemoryError:\n    print('refused')",
               memory_bytes=1 << 30)
    assert big.stdout.strip() == "refused", big.stdout + big.stderr
    junk = _run(tmp_path, "import os\ntry:\n    open('junk', 'wb').write(os.urandom(2 << 20))\n"
                          "except OSError as exc:\n    print('refused', exc.errno)", file_bytes=1 << 20)
    assert junk.stdout.startswith("refused"), junk.stdout + junk.stderr
    assert (tmp_path / "scratch" / "junk").stat().st_size <= 1 << 20

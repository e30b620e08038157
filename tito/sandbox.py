"""A sandbox for student code: bubblewrap (Debian's `bubblewrap` package).

A sandboxed process sees the system's programs and libraries read-only, this Python and its
installed packages read-only, the folders it is given to read, and one scratch folder it may
write; nothing else of the file system (not the course folder, the solutions, the hidden
tests or the gradebook), no network, no other processes. Its environment is cleared. Used
for the kernel that runs a submission (`tito grade`) and for the separate test run of the
same submission.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

KERNEL_NAME = "tinytorch-sandbox"
# Inside the sandbox every process runs as this unprivileged user, in a user namespace of its
# own with every capability dropped, whoever starts tito: as root, a sandboxed root could
# remount its read-only folders read-write.
SANDBOX_UID = 65534
# Per-process limits (setrlimit) for everything in the sandbox: address space, size of any
# file written, and (for a non-root grader, where the kernel counts them) processes.
LIMITS = {"memory_bytes": 8 << 30, "file_bytes": 512 << 20, "processes": 256}
_LAUNCHER = (
    "import json, os, resource, sys\n"
    "limits = json.loads(sys.argv[1])\n"
    "for name, value in limits.items():\n"
    "    which = getattr(resource, name)\n"
    "    soft, hard = resource.getrlimit(which)\n"
    "    value = value if hard == resource.RLIM_INFINITY else min(value, hard)\n"
    "    resource.setrlimit(which, (value, value))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n")
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: "
                "`sudo dnf install bubblewrap`) and run `tito grade setup` again")


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc", "/etc"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    return args


def _python_roots() -> list[Path]:
    """This Python's installation and its environment (a venv may live inside the course
    folder: only the venv is exposed, not the folder around it)."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    executable = Path(sys.executable).resolve()
    if not any(root in executable.parents for root in roots):
        roots.add(executable.parent)
    return sorted(roots)


def _rlimits(limits: dict) -> dict:
    """setrlimit's names and values for `limits` (see LIMITS)."""
    out = {"RLIMIT_AS": limits["memory_bytes"], "RLIMIT_FSIZE": limits["file_bytes"], "RLIMIT_CORE": 0}
    if os.geteuid() != 0:  # processes are counted per user, and never for root
        out["RLIMIT_NPROC"] = _processes_of_this_user() + limits["processes"]
    return out


def _processes_of_this_user() -> int:
    uid, count = os.getuid(), 0
    for entry in Path("/proc").iterdir():
        try:
            count += entry.name.isdigit() and entry.stat().st_uid == uid
        except OSError:
            pass
    return count


def command(argv: list[str], *, scratch: Path, readable: list[Path] = (), writable: list[Path] = (),
            env: dict[str, str] | None = None, limits: dict | None = None) -> list[str]:
    """`argv` wrapped in bubblewrap: `readable` read-only, `scratch` and `writable` writable
    (and the working directory), the environment replaced by `env` plus HOME/TMPDIR in
    scratch and this Python's bin on PATH; run as an unprivileged user with no capabilities,
    under `limits` (default LIMITS)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise FileNotFoundError("bwrap")
    launcher = [sys.executable, "-I", "-c", _LAUNCHER, json.dumps(_rlimits(limits or LIMITS))]
    args = [*launcher, bwrap, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid",
            str(SANDBOX_UID), "--cap-drop", "ALL", "--die-with-parent", "--new-session",
            *_system_binds(), "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for root in _python_roots():
        args += ["--ro-bind", str(root), str(root)]
    for path in readable:
        args += ["--ro-bind", str(Path(path).resolve()), str(Path(path).resolve())]
    scratch = Path(scratch).resolve()
    for path in (scratch, *writable):
        args += ["--bind", str(Path(path).resolve()), str(Path(path).resolve())]
    base = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(scratch), "TMPDIR": str(scratch), "MPLCONFIGDIR": str(scratch / ".matplotlib"),
        "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "NUMBA_CACHE_DIR": str(scratch / ".numba"), "NUMBA_ENABLE_CUDASIM": os.environ.get("NUMBA_ENABLE_CUDASIM", "1"),
    }
    base.update(env or {})
    args += ["--clearenv"]
    for key, value in base.items():
        args += ["--setenv", key, value]
    args += ["--chdir", str(scratch), "--"]
    return args + list(argv)


def problem() -> str | None:
    """None when the sandbox works on this machine, else why not (and what to do)."""
    if shutil.which("bwrap") is None:
        return f"bubblewrap (`bwrap`) is not installed: {INSTALL_HINT}."
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "outside" / "secret.txt"
        secret.parent.mkdir()
        secret.write_text("instructor only")
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        shown = Path(tmp) / "shown"
        shown.mkdir()
        (shown / "file.txt").write_text("read-only")
        probe = ("import ctypes, os, socket, sys\n"
                 f"assert not os.path.exists({str(secret)!r}), 'a file outside the sandbox is visible'\n"
                 "assert os.getuid() != 0, 'the sandboxed process runs as root'\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 f"if libc.mount(None, {str(shown).encode()!r}, None, 32 | 4096, None) == 0:\n"  # MS_REMOUNT|MS_BIND
                 "    sys.exit('a read-only folder could be remounted read-write')\n"
                 "try:\n"
                 f"    open({str(shown / 'file.txt')!r}, 'w').write('changed')\n"
                 "    sys.exit('a read-only folder is writable')\n"
                 "except OSError:\n    pass\n"
                 "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
                 "    sys.exit('the network is reachable')\nexcept OSError:\n    pass\n"
                 f"open({str(scratch / 'ok')!r}, 'w').write('ok')\n")
        try:
            proc = subprocess.run(command([sys.executable, "-c", probe], scratch=scratch, readable=[shown]),
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap could not start a sandbox ({exc}); {INSTALL_HINT}."
        if (shown / "file.txt").read_text() != "read-only":
            return "a sandboxed process changed a file it may only read: do not grade here."
        if proc.returncode != 0 or not (scratch / "ok").is_file():
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
            return (f"bubblewrap is installed but cannot isolate a process here ({detail[0]}). It needs "
                    f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
                    f"24.04+ an AppArmor profile for bwrap). Do not grade as root: student code should run "
                    f"with as few rights as possible.")
    return None


def write_kernelspec(folder: Path, *, scratch: Path, runtime: Path, readable: list[Path],
                     env: dict[str, str]) -> Path:
    """A Jupyter kernelspec whose launch command runs ipykernel inside the sandbox. The kernel
    talks to nbgrader over IPC sockets in `runtime` (the sandbox has no network, not even
    loopback to the host). Put `folder` on JUPYTER_PATH. Returns the kernel.json."""
    argv = command([sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                   scratch=scratch, readable=readable, writable=[runtime], env=env)
    spec = folder / "kernels" / KERNEL_NAME / "kernel.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    # Interrupts go as messages: a signal to the launcher would stop at bwrap, not reach the kernel.
    spec.write_text(json.dumps({"argv": argv, "display_name": "TinyTorch (sandboxed)", "language": "python",
                                "interrupt_mode": "message"},
                               indent=1))
    return spec

"""File locks, so that two tito commands at once neither lose state nor break a build."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; tito runs one command at a time there
    fcntl = None


@contextlib.contextmanager
def locked(path: Path, shared: bool = False, wait: bool = True):
    """Hold an advisory lock on `path` (created if missing) for the block. Yields True; with
    `wait=False`, a lock somebody else holds is not waited for and the block gets False."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
        try:
            yield True
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write a file so that a reader sees the old text or the new, never half of it: a full
    disk leaves the old file whole, and the error names `path` (not the temporary file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(exc.errno, exc.strerror, str(path)) from None

"""The one exception tito raises for bad input: printed as a message, never a traceback."""
import errno
import os


class TitoError(Exception):
    """A problem the user can fix; `message` says what happened and what to do."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_IN_THE_WAY = "A file stands where tito needs a folder: move it aside"
_HINTS = {
    **{code: "Free some disk space" for code in _FULL},
    errno.EACCES: "Check its permissions",
    errno.EPERM: "Check its permissions",
    errno.EROFS: "Work in a folder you can write to",
    errno.EEXIST: _IN_THE_WAY,
    errno.ENOTDIR: _IN_THE_WAY,
    errno.EISDIR: "A folder stands where tito needs a file: move it aside",
}


def os_error_message(exc: OSError) -> str:
    """One line for a file tito could not read or write (a full disk, an unwritable .tito/),
    in place of a traceback: the path (relative when inside the current folder), the
    reason, and what to do."""
    where = ""
    if exc.filename is not None:
        name = os.fsdecode(exc.filename)
        rel = os.path.relpath(name) if os.path.isabs(name) else name
        where = " " + (name if rel.startswith("..") else rel)
    verb = "cannot write" if exc.errno in _FULL | {errno.EROFS, errno.EEXIST} else "cannot access"
    hint = _HINTS.get(exc.errno)
    return f"{verb}{where}: {exc.strerror or exc}." + (f" {hint}, then run the command again." if hint else "")

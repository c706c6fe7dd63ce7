"""One-line messages for an ``OSError`` on the user's files during fetch, extract and prepare.

A refused ``open()``, a folder where a file belongs or a full disk is something the user
fixes, not a bug: the data commands turn such an ``OSError`` into
:class:`bench.errors.FileAccessError`, whose message names the path, says what went wrong in
words and what to do, so ``ltr-bench`` prints it as one line. Only the system's refusals
(an ``OSError`` with an ``errno``) are translated here; anything else keeps its traceback.

>>> import errno
>>> str(access_error(PermissionError(errno.EACCES, "Permission denied"), "/data/a.zip", "read"))
'/data/a.zip: cannot read: permission denied; make it readable by this user (ls -l /data/a.zip) and run the same command again'
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.atomic.space import NO_SPACE, disk_full
from bench.errors import BenchError, FileAccessError

__all__ = ["access_error", "expect_folder", "file_access"]

_MISPLACED = "a {} is there where a {} is expected; move the {} away or point the command elsewhere"
#: errno -> what to do, given (path, "readable" or "writable"); one entry per kind of failure
_ADVICE: dict[int, Callable[[Path, str], str]] = {
    **dict.fromkeys((errno.EACCES, errno.EPERM), lambda path, able: (
        f"permission denied; make it {able} by this user (ls -l {path}) and run the same command again")),
    errno.EROFS: lambda path, able: "read-only filesystem; choose a writable folder and run the command again",
    errno.EISDIR: lambda path, able: _MISPLACED.format("folder", "file", "folder"),
    # EEXIST: mkdir found a file in the folder's place
    **dict.fromkeys((errno.ENOTDIR, errno.EEXIST), lambda path, able: _MISPLACED.format("file", "folder", "file")),
    errno.ENOENT: lambda path, able: "no such file or folder; check the path",
    errno.ENAMETOOLONG: lambda path, able: "a file name is longer than this filesystem allows; use a shorter path",
    errno.EIO: lambda path, able: "input/output error: the disk or network filesystem failed; check it and run again",
}


def _advice(code: int | None, path: Path, doing: str) -> str:
    """What went wrong with ``path`` and what to do, for the ``errno`` ``code`` (:data:`_ADVICE`)."""
    advice = _ADVICE.get(code) if code is not None else None
    if advice is not None:
        return advice(path, "readable" if doing == "read" else "writable")
    return f"{os.strerror(code).lower() if code else 'failed'}; check the path and run again"


def access_error(exc: OSError, path: str | os.PathLike, doing: str) -> FileAccessError:
    """The :class:`FileAccessError` for ``exc``, raised while ``doing`` (a verb: "read",
    "write", ...) ``path``. Names ``path``, not the temporary sibling the write went to: the
    user knows the one and never sees the other."""
    if isinstance(exc, BenchError):
        return exc  # already one line
    path = Path(path)
    if exc.errno is None:  # raised by our own code with a message of its own
        text = str(exc)
        return FileAccessError(text if str(path) in text else f"{path}: {text}")
    if exc.errno in NO_SPACE:  # what is free there (bench.atomic.space)
        return disk_full(path, doing=doing)
    return FileAccessError(f"{path}: cannot {doing}{_culprit(exc, path)}: {_advice(exc.errno, path, doing)}")


def _culprit(exc: OSError, path: Path) -> str:
    """`` (at <file>)`` when the system names another file than ``path`` (the parent that is a
    file, say), but not a temporary of the suite's, which is gone by the time the user reads."""
    name = os.fsdecode(exc.filename) if exc.filename else ""
    if not name or Path(name) == path or any(
            part.startswith(".") and part.endswith(".tmp") for part in Path(name).parts):
        return ""
    return f" (at {name})"


def expect_folder(path: str | os.PathLike) -> None:
    """Refuse a file (or link to one) at ``path`` where a command will put a folder.

    The atomic replacement of a folder (:func:`bench.atomic.atomic_path`) would otherwise
    rename the user's file out of the way and leave it behind as a hidden ``.old.tmp``.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise access_error(NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)), path, "write")


@contextlib.contextmanager
def file_access(path: str | os.PathLike, doing: str) -> Iterator[None]:
    """Run the block; an ``OSError`` from it becomes :func:`access_error` for ``path``.

    Wrap only local file work with it: a network ``OSError`` inside would be misreported.
    """
    try:
        yield
    except OSError as exc:
        if isinstance(exc, BenchError):
            raise
        raise access_error(exc, path, doing) from exc

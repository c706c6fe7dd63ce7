"""Atomic output: a crashed step never leaves a file a later step could mistake for a result.

Every writer in the suite goes through :func:`atomic_path`: the caller writes to a temporary
sibling (same directory, so the final ``os.replace`` is a rename on one filesystem) and the
temporary becomes the real name only when the block exits without an exception.

A full disk is one line naming the file (:class:`bench.errors.DiskFull`, :mod:`bench.atomic.space`):
the temporary is removed and ``path`` is left as it was.
A writer that knows the sizes of what it writes passes them (``sizes``) and is refused before
writing when they do not fit; :func:`write_files` writes several files all or none.

Beside the writers, what every layer above may use of the files it writes and reads: the
digests a later step checks them against (:mod:`bench.atomic.integrity`) and a job's progress
line and record (:mod:`bench.atomic.progress`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from bench.atomic.space import disk_full, is_no_space, require_files, require_space
from bench.errors import DiskFull


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, is_dir: bool = False,
                sizes: Iterable[int] | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    With ``is_dir=True`` the temporary is a fresh directory and an existing ``path``
    directory is replaced whole. On any exception the temporary is removed and ``path`` is
    left exactly as it was; "no space left" becomes
    :class:`bench.errors.DiskFull` naming ``path``. ``sizes``: the sizes of the files the block
    will write, when known; they are checked against the free space before anything is written.
    """
    final = Path(path)
    needed = require_space(final, sizes) if sizes is not None else None
    tmp = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temporary(final, is_dir)
        yield tmp
        _commit(tmp, final, is_dir)
    except BaseException as exc:
        if tmp is not None:
            _discard(tmp)
        if is_no_space(exc) and _raised_here(exc, tmp):
            raise disk_full(final, needed) from exc
        raise


def _temporary(final: Path, is_dir: bool) -> Path:
    if is_dir:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        return tmp
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    # mkstemp creates 0600; give the result the permissions a plain open() would.
    os.chmod(name, 0o666 & ~_umask())
    return Path(name)


def _commit(tmp: Path, final: Path, is_dir: bool) -> None:
    if is_dir and final.exists():
        old = final.with_name(f".{final.name}.old.tmp")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


def _discard(tmp: Path) -> None:
    if tmp.is_dir():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.unlink(missing_ok=True)


def _raised_here(exc: BaseException, tmp: Path | None) -> bool:
    """Whether a full disk is this write's to name: the system's own error, or a
    :class:`DiskFull` of a file inside this write's temporary folder (a nested write)."""
    if not isinstance(exc, DiskFull):
        return True
    return tmp is not None and Path(exc.path).is_relative_to(tmp)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; refused before writing when it does not fit."""
    with atomic_path(path, sizes=[len(data)]) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    write_bytes(path, text.encode("utf-8"))


def write_files(contents: Mapping[str | os.PathLike, bytes | str]) -> None:
    """Write several files (bytes, or text as UTF-8) as one: refused before writing when they do
    not all fit, and none is renamed into place unless every one was written."""
    data = {Path(p): c.encode("utf-8") if isinstance(c, str) else bytes(c) for p, c in contents.items()}
    require_files({p: len(c) for p, c in data.items()})
    with contextlib.ExitStack() as stack:
        for path, payload in data.items():
            stack.enter_context(atomic_path(path)).write_bytes(payload)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON atomically."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

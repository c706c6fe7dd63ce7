"""Atomic output: a crashed step never leaves a file a later step could mistake for a result.

Every writer in the suite goes through :func:`atomic_path`: the caller writes to a temporary
sibling (same directory, so the final ``os.replace`` is a rename on one filesystem) and the
temporary becomes the real name only when the block exits without an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    With ``is_dir=True`` the temporary is a fresh directory and an existing ``path``
    directory is replaced whole. On any exception the temporary is removed and ``path``
    is left exactly as it was.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
    else:
        fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        os.close(fd)
        tmp = Path(name)
        # mkstemp creates 0600; give the result the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
        if is_dir:
            if final.exists():
                old = final.with_name(f".{final.name}.old.tmp")
                shutil.rmtree(old, ignore_errors=True)
                os.replace(final, old)
                os.replace(tmp, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, final)
        else:
            os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON atomically."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

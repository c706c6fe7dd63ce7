"""sha256 of a source file, cached in a folder the suite owns, never next to the file.

A source file may sit in a tree the suite did not create (a hand-extracted archive, the
user's own data folder, a test fixture): the suite writes nothing there. Its checksum is
cached under ``cache_dir`` instead (``ltr-bench prepare --checksum-cache``, default
``results/cache/source-sha256``), one JSON record per file named by the sha256 of the
file's resolved absolute path::

    {"path": "/abs/path/train.txt", "size": 123, "mtime_ns": 1700000000000000000, "sha256": "..."}

A record is used only while path, size and mtime all still match (so a re-run does not
re-read gigabytes, and an edited or replaced file is hashed again); ``cache_dir=None``
means no cache. A cache that cannot be written (read-only, not a folder) is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from bench.atomic import write_json
from bench.data.extract import file_sha256

__all__ = ["cached_sha256", "record_path"]


def record_path(path: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """The cache record of ``path``: ``cache_dir/<sha256 of its resolved absolute path>.json``."""
    key = hashlib.sha256(str(Path(path).resolve()).encode("utf-8")).hexdigest()
    return Path(cache_dir) / f"{key}.json"


def cached_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike | None) -> str:
    """sha256 (hex) of ``path``'s bytes, from ``cache_dir``'s record when it is still valid."""
    path = Path(path).resolve()
    st = path.stat()
    if cache_dir is None:
        return file_sha256(path)
    record = record_path(path, cache_dir)
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        if (data["path"], data["size"], data["mtime_ns"]) == (str(path), st.st_size, st.st_mtime_ns):
            return data["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no record, or an unreadable one: compute
    digest = file_sha256(path)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json(record, {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
    except OSError:
        pass  # unwritable cache: just recompute next time
    return digest

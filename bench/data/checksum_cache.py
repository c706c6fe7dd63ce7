"""sha256 of a source file or archive, cached in a folder the suite owns, never next to the file.

A source file may sit in a tree the suite did not create (a hand-extracted archive, the
user's own data folder, a test fixture, an archive placed by hand): the suite writes nothing
there. Its checksum is cached under ``cache_dir`` instead (``ltr-bench prepare|fetch|datasets
--checksum-cache``, default ``results/cache/source-sha256``), one JSON record per file named
by the sha256 of the file's resolved absolute path::

    {"path": "/abs/path/train.txt", "size": 123, "mtime_ns": 1700000000000000000, "sha256": "..."}

A record is used only while path, size and mtime all still match (so a re-run does not
re-read gigabytes, and an edited or replaced file is hashed again); ``cache_dir=None``
means no cache. A cache that cannot be written (read-only, not a folder) is skipped.

Both users share the one mechanism: prepare hashes its source files through
:func:`cached_sha256`; fetch records an archive's sha256 with :func:`record_sha256` once it
verified it against the registry, and :func:`recorded_sha256` (which never reads the file)
tells ``fetch`` and ``ltr-bench datasets`` that it need not be verified again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from bench.atomic import write_json
from bench.data.extract import file_sha256

__all__ = ["cached_sha256", "record_path", "record_sha256", "recorded_sha256"]


def record_path(path: str | os.PathLike, cache_dir: str | os.PathLike) -> Path:
    """The cache record of ``path``: ``cache_dir/<sha256 of its resolved absolute path>.json``."""
    key = hashlib.sha256(str(Path(path).resolve()).encode("utf-8")).hexdigest()
    return Path(cache_dir) / f"{key}.json"


def recorded_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike | None) -> str | None:
    """The sha256 recorded for ``path`` while its path, size and mtime still match, else None.

    Reads only the small record (and stats ``path``): cheap enough for a status listing.
    """
    if cache_dir is None:
        return None
    path = Path(path).resolve()
    try:
        st = path.stat()
        data = json.loads(record_path(path, cache_dir).read_text(encoding="utf-8"))
        if (data["path"], data["size"], data["mtime_ns"]) == (str(path), st.st_size, st.st_mtime_ns):
            return str(data["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no file, no record, or a damaged record (a JSON list, a missing key): not recorded
    return None


def record_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike | None, digest: str,
                  st: os.stat_result | None = None) -> None:
    """Record ``digest`` as the sha256 of ``path`` as it is now (or as ``st`` saw it).

    Pass ``st`` from before hashing, so a file changed while it was read is hashed again.
    """
    if cache_dir is None:
        return
    path = Path(path).resolve()
    try:
        st = st or path.stat()
        record = record_path(path, cache_dir)
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json(record, {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
    except OSError:
        pass  # unwritable cache: just recompute next time


def cached_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike | None) -> str:
    """sha256 (hex) of ``path``'s bytes, from ``cache_dir``'s record when it is still valid."""
    path = Path(path).resolve()
    st = path.stat()
    digest = recorded_sha256(path, cache_dir)
    if digest is None:
        digest = file_sha256(path)
        record_sha256(path, cache_dir, digest, st)
    return digest

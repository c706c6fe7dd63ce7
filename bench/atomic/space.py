"""Disk space: what is free where a file goes, what a write needs, and the one line for a full disk.

A full disk is something the user fixes, not a bug. Every writer of the suite goes through
:func:`bench.atomic.atomic_path`, which turns the system's "no space left" (``ENOSPC``; ``EDQUOT``
over a quota) into :class:`bench.errors.DiskFull` naming the file it was writing, after
removing its temporary: ``ltr-bench`` prints it as one line and nothing half-written stays.
Where the size of what is written is known before writing (an archive's unpacked size, a
prepared fold's arrays, a run's files, a table), the writer passes it and the write is refused
before anything is written when the filesystem has less room; the line then says what is
needed as well as what is free.

Two libraries do not say "no space left" when the disk fills: ``np.save`` to a file reports a
short write without an ``errno``, and ``torch.save`` a ``RuntimeError`` from its zip writer. So
the suite writes arrays with :func:`save_npy` (the bytes of ``np.save``) and checkpoints from
memory, and the system's own error reaches :func:`bench.atomic.atomic_path`.

>>> size_text(999), size_text(98_304), size_text(3.5e9)
('999 bytes', '98.3 kB', '3.5 GB')
"""

from __future__ import annotations

import errno
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from bench.errors import DiskFull

__all__ = ["NO_SPACE", "disk_full", "free_bytes", "is_no_space", "npy_size", "on_disk", "require_files",
           "require_space", "save_npy", "size_text"]

#: the errno values of a full filesystem (EDQUOT: the user's quota on it is used up)
NO_SPACE = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
_UNITS = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))


def size_text(n: float) -> str:
    """``n`` bytes in words, decimal units as ``df -H`` prints them."""
    for unit, scale in _UNITS:
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def _existing(path: Path) -> Path | None:
    """``path`` or its nearest existing ancestor (where a file about to be written will live)."""
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return None


def _statvfs(path: str | os.PathLike) -> os.statvfs_result | None:
    folder = _existing(Path(path).absolute())
    try:
        return os.statvfs(folder) if folder is not None else None
    except OSError:
        return None


def free_bytes(path: str | os.PathLike) -> int | None:
    """Bytes this process may still write on the filesystem of ``path`` (root may use the blocks
    the filesystem reserves for it); None when it cannot be asked."""
    st = _statvfs(path)
    if st is None:
        return None
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def on_disk(sizes: Iterable[int], path: str | os.PathLike) -> int:
    """Bytes that files of ``sizes`` take on the filesystem of ``path``: each rounded up to whole blocks."""
    st = _statvfs(path)
    block = st.f_frsize if st is not None and st.f_frsize > 0 else 1
    return sum(math.ceil(size / block) * block for size in sizes)


def _no_inodes(path: Path) -> bool:
    st = _statvfs(path)
    return st is not None and st.f_files > 0 and st.f_favail == 0


def disk_full(path: str | os.PathLike, needed: int | None = None, doing: str = "write") -> DiskFull:
    """The one-line :class:`DiskFull` for ``path``: what is needed (when known) and what is free."""
    path = Path(path)
    free = free_bytes(path)
    if _no_inodes(path):
        what = "no free file entries (inodes) left on the device"
    else:
        room = [f"needs {size_text(needed)}"] if needed is not None else []
        room.append(f"{size_text(free)} free there" if free is not None else "free space unknown")
        what = f"no space left on the device ({', '.join(room)})"
    return DiskFull(f"{path}: cannot {doing}: {what}; free some space and run the same command again",
                    path=path, needed=needed, free=free)


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is the system's "no space left" (or already the suite's :class:`DiskFull`)."""
    return isinstance(exc, DiskFull) or (isinstance(exc, OSError) and exc.errno in NO_SPACE)


def require_space(path: str | os.PathLike, sizes: Iterable[int], doing: str = "write") -> int:
    """Refuse (:class:`DiskFull` naming ``path``) before writing files of ``sizes`` at ``path``
    when its filesystem has less room than they take; returns the bytes they take."""
    needed = on_disk(sizes, path)
    free = free_bytes(path)
    if free is not None and needed > free:
        raise disk_full(path, needed, doing)
    return needed


def require_files(sizes: Mapping[Path, int], doing: str = "write") -> None:
    """:func:`require_space` for several files at once, summed per filesystem (the first file
    of a filesystem that lacks room is the one named)."""
    by_device: dict[int | None, list[Path]] = {}
    for path in sizes:
        folder = _existing(Path(path).absolute())
        by_device.setdefault(folder.stat().st_dev if folder is not None else None, []).append(path)
    for paths in by_device.values():
        require_space(paths[0], [sizes[p] for p in paths], doing)


def save_npy(path: str | os.PathLike, array) -> None:
    """``np.save(path, array)``, byte for byte, but a full disk raises the system's ``ENOSPC``
    (``np.save`` reports a short write without an ``errno``). Numeric arrays only.

    >>> import io, tempfile, numpy as np
    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> ref = io.BytesIO(); np.save(ref, a)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     save_npy(f"{d}/a.npy", a)
    ...     open(f"{d}/a.npy", "rb").read() == ref.getvalue()
    True
    """
    import numpy as np
    from numpy.lib import format as npy

    array = np.ascontiguousarray(array)
    if array.dtype.hasobject:
        raise ValueError("save_npy: object arrays are not saved (np.save would pickle them)")
    with open(path, "wb") as fh:
        npy.write_array_header_1_0(fh, npy.header_data_from_array_1_0(array))
        fh.write(array.data if array.size else b"")


def npy_size(array) -> int:
    """Bytes :func:`save_npy` writes for ``array``: its header and its data.

    >>> import numpy as np
    >>> npy_size(np.zeros((2, 3), np.float32))
    152
    """
    import io

    import numpy as np
    from numpy.lib import format as npy

    array = np.asarray(array)
    header = io.BytesIO()
    fields = dict(npy.header_data_from_array_1_0(array), fortran_order=False)  # written C-contiguous
    npy.write_array_header_1_0(header, fields)
    return header.tell() + array.nbytes

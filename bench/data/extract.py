"""Safe archive extraction: zip, tar (.gz/.bz2/.xz, nested), RAR through an external tool.

Every archive is extracted into a fresh temporary directory next to the destination, and
the temporary becomes ``dest`` (by rename) only when every member passed the checks, so a
refused or crashed extraction leaves nothing behind. A member is refused, and the whole
archive with it, when its name is absolute (``/x``, ``C:\\x``, ``\\\\host``), contains a ``..``
component, is a symlink or hard link pointing outside the tree, or is a device file / FIFO.

After extraction ``dest/.manifest.json`` records the sha256, size and mtime of every
extracted file, so later steps identify the sources without
re-reading gigabytes. Inner archives named by the registry (Yahoo's ``dataset.tgz`` holds
``ltrc_yahoo.tar.bz2``) are extracted in place with the same checks and then removed.

A member that cannot be written (a file and a folder of the same name, in either order; a
name longer than the filesystem allows) or a corrupt member refuses the archive with
:class:`ExtractError` naming it; any other ``OSError`` (the archive unreadable, the destination
not writable) becomes :class:`bench.errors.FileAccessError` naming the path, and no space left
:class:`bench.errors.DiskFull` naming the destination and what is free there (a zip's unpacked
size is read from its directory first, so a zip that cannot fit is refused before anything is
written, with the space it needs). Each is one line from ``ltr-bench``, and nothing is left
behind.

RAR (LETOR 4.0) needs one of ``unrar``, ``7z``/``7za`` or ``bsdtar`` on PATH; without one the
error says what to install. The tool extracts into the temporary directory, which is then
scanned with the same checks (links, devices) before it is accepted.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import subprocess
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from bench.atomic import atomic_path, write_json
from bench.data.fileaccess import expect_folder, file_access
from bench.errors import ExtractError

__all__ = ["ExtractError", "detect_format", "extract_archive", "MANIFEST"]

MANIFEST = ".manifest.json"
_CHUNK = 1 << 20
_ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
_COLLISION = (errno.EEXIST, errno.EISDIR, errno.ENOTDIR)


def detect_format(path: str | os.PathLike) -> str:
    """The archive format from its magic bytes: ``zip``, ``tar.gz``, ``tar.bz2``, ``tar.xz``,
    ``tar`` or ``rar``; anything else raises :class:`ExtractError`."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(512)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "tar.gz"
    if head.startswith(b"BZh"):
        return "tar.bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "tar.xz"
    if head.startswith(b"Rar!\x1a\x07"):
        return "rar"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    raise ExtractError(f"{path}: not a zip, tar or rar archive (unrecognised first bytes "
                       f"{head[:8]!r}); was the download an HTML error page?")


def _safe_relpath(name: str, archive: Path) -> PurePosixPath:
    """Validate a member name and return it as a relative POSIX path."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":") or norm.startswith("//"):
        raise ExtractError(f"{archive}: refusing member {name!r}: absolute path")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ExtractError(f"{archive}: refusing member {name!r}: '..' escapes the archive root")
    if not parts:
        return PurePosixPath(".")
    return PurePosixPath(*parts)


def _inside(root: Path, target: Path) -> bool:
    root = os.path.realpath(root)
    target = os.path.realpath(target)
    return target == root or target.startswith(root + os.sep)


def _copy_to(src, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(dst, "wb") as out:
        shutil.copyfileobj(src, out, _CHUNK)


def _shown(name: str, limit: int = 80) -> str:
    """``name`` quoted, shortened to ``limit`` characters: a too-long name must not make the
    one-line error a page long."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}... ({len(name.encode('utf-8', 'surrogateescape'))} bytes)"


@contextlib.contextmanager
def _member(archive: Path, name: str, root: Path) -> Iterator[None]:
    """Writing member ``name`` under ``root``: the archive's own faults become one
    :class:`ExtractError` naming the member; the disk's (full, read-only, refused) pass on to
    :func:`extract_archive`, which names the destination.

    Archives from the web can hold a file and a folder of the same name (in either order:
    the second one cannot be created) or a name longer than this filesystem allows; both say
    nothing about the user's disk, so the message says what is wrong with the archive.
    """
    try:
        yield
    except OSError as exc:
        if exc.errno in _COLLISION:
            clash = _relative(exc.filename, root) or name
            raise ExtractError(
                f"{archive}: refusing member {_shown(name)}: {_shown(clash)} is both a file and a "
                "folder in the archive (two members collide); the archive is damaged or not the "
                "published one: delete it and fetch again, or extract it yourself into the "
                "`extracted/` folder next to it") from exc
        if exc.errno == errno.ENAMETOOLONG:
            raise ExtractError(
                f"{archive}: refusing member {_shown(name)}: its name is longer than the "
                f"filesystem of {root.parent} allows; extract the archive yourself, with shorter "
                "names, into the `extracted/` folder next to it") from exc
        if exc.errno is None:  # a decompressor's complaint (gzip, bz2, lzma), not the disk's
            raise ExtractError(f"{archive}: truncated or corrupt archive at member "
                               f"{_shown(name)}: {exc}") from exc
        raise
    except (EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise ExtractError(f"{archive}: truncated or corrupt archive at member "
                           f"{_shown(name)}: {exc}") from exc


def _relative(filename, root: Path) -> str | None:
    """``filename`` (from an ``OSError``) relative to ``root``, or None when it is not under it."""
    if not filename:
        return None
    try:
        return Path(os.fsdecode(filename)).relative_to(root).as_posix()
    except ValueError:
        return None


def _check_zip_member(info: zipfile.ZipInfo, archive: Path) -> None:
    """Refuse links, devices, encrypted members and compression methods Python cannot read,
    before anything is written (zipfile itself would fail on them mid-extraction)."""
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ExtractError(f"{archive}: refusing member {info.filename!r}: symbolic link")
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ExtractError(f"{archive}: refusing member {info.filename!r}: not a regular file")
    if info.flag_bits & 0x1:
        raise ExtractError(f"{archive}: member {info.filename!r} is encrypted; extract the archive "
                           "yourself (with its password) into the `extracted/` folder next to it")
    if info.compress_type not in _ZIP_METHODS:
        raise ExtractError(f"{archive}: member {info.filename!r} uses zip compression method "
                           f"{info.compress_type}, which Python cannot read; extract the archive "
                           "yourself into the `extracted/` folder next to it")


def _extract_zip(archive: Path, root: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            rel = _safe_relpath(info.filename, archive)
            _check_zip_member(info, archive)
            target = root / rel
            with _member(archive, info.filename, root):
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                with zf.open(info) as src:
                    _copy_to(src, target)


def _extract_tar(archive: Path, root: Path) -> None:
    try:
        tf = tarfile.open(archive, mode="r:*")
    except tarfile.TarError as exc:
        raise ExtractError(f"{archive}: not a readable tar archive: {exc}") from exc
    with tf:
        while True:
            try:
                member = tf.next()
            except tarfile.TarError as exc:
                raise ExtractError(f"{archive}: corrupt tar archive: {exc}") from exc
            except (EOFError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno is not None:
                    raise  # the disk's fault, not the archive's: FileAccessError upstream
                raise ExtractError(f"{archive}: truncated or corrupt archive: {exc}") from exc
            if member is None:
                break
            rel = _safe_relpath(member.name, archive)
            target = root / rel
            if member.isdev() or member.isfifo():
                raise ExtractError(f"{archive}: refusing member {member.name!r}: device file or FIFO")
            if member.issym() or member.islnk():
                link = member.linkname.replace("\\", "/")
                base = target.parent if member.issym() else root
                if link.startswith("/") or not _inside(root, base / link):
                    raise ExtractError(f"{archive}: refusing member {member.name!r}: link to "
                                       f"{member.linkname!r} points outside the archive")
                resolved = Path(os.path.realpath(base / link))
                if not resolved.is_file():
                    raise ExtractError(f"{archive}: refusing member {member.name!r}: link target "
                                       f"{member.linkname!r} is not an extracted file")
                with _member(archive, member.name, root):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(resolved, target)  # materialise: no links in the tree
                continue
            if not (member.isdir() or member.isfile()):
                raise ExtractError(f"{archive}: refusing member {member.name!r}: unsupported type")
            with _member(archive, member.name, root):
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                else:
                    _copy_to(tf.extractfile(member), target)


RAR_TOOLS = (
    ("unrar", lambda a, d: ["unrar", "x", "-o+", "-y", "-idq", str(a), str(d) + os.sep]),
    ("7z", lambda a, d: ["7z", "x", "-y", "-bd", f"-o{d}", str(a)]),
    ("7za", lambda a, d: ["7za", "x", "-y", "-bd", f"-o{d}", str(a)]),
    ("bsdtar", lambda a, d: ["bsdtar", "-x", "-f", str(a), "-C", str(d)]),
)


def _extract_rar(archive: Path, root: Path) -> None:
    for tool, command in RAR_TOOLS:
        if shutil.which(tool):
            proc = subprocess.run(command(archive, root), capture_output=True, text=True)
            if proc.returncode != 0:
                raise ExtractError(f"{archive}: {tool} failed (exit {proc.returncode}): "
                                   f"{(proc.stderr or proc.stdout).strip()[-500:]}")
            _scan_tree(root, archive)
            return
    raise ExtractError(
        f"{archive}: RAR archives need an extractor on PATH and none of unrar, 7z, 7za, bsdtar "
        "was found; install one (Debian/Ubuntu: `apt-get install unrar` or `apt-get install "
        "p7zip-full` or `apt-get install libarchive-tools`; conda: `conda install -c "
        "conda-forge p7zip`), or extract the archive yourself into the `extracted/` folder "
        "next to it")


def _scan_tree(root: Path, archive: Path) -> None:
    """Post-extraction check for external tools: no links leaving the tree, no devices."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            rel = p.relative_to(root)
            if stat.S_ISLNK(st.st_mode):
                if not _inside(root, p):
                    raise ExtractError(f"{archive}: refusing member {str(rel)!r}: link points "
                                       f"outside the archive ({os.readlink(p)!r})")
                target = Path(os.path.realpath(p))
                p.unlink()
                if target.is_file():
                    shutil.copyfile(target, p)
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise ExtractError(f"{archive}: refusing member {str(rel)!r}: device file or FIFO")


def _extract_into(archive: Path, root: Path, fmt: str | None = None) -> None:
    fmt = fmt or detect_format(archive)
    if fmt == "zip":
        try:
            _extract_zip(archive, root)
        except (zipfile.BadZipFile, EOFError) as exc:
            raise ExtractError(f"{archive}: corrupt zip archive: {exc}") from exc
    elif fmt.startswith("tar"):
        _extract_tar(archive, root)
    elif fmt == "rar":
        _extract_rar(archive, root)
    else:
        raise ExtractError(f"{archive}: unsupported archive format {fmt!r}")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def extract_archive(archive: str | os.PathLike, dest: str | os.PathLike, *,
                    inner_archives: tuple[str, ...] = (), archive_sha256: str | None = None
                    ) -> dict:
    """Extract ``archive`` into ``dest`` atomically; returns the manifest (also written to
    ``dest/.manifest.json``): ``{"archive", "archive_sha256", "files": {relpath: {"sha256",
    "size", "mtime_ns"}}}``. An existing ``dest`` is replaced only on success."""
    archive = Path(archive)
    dest = Path(dest)
    expect_folder(dest)
    with file_access(archive, "read"):
        fmt = detect_format(archive)
        sizes = _SIZES[fmt](archive) if fmt in _SIZES else None
    with file_access(dest, "extract into"), atomic_path(dest, is_dir=True, sizes=sizes) as tmp:
        _extract_into(archive, tmp, fmt)
        for inner_name in inner_archives:
            for inner in sorted(tmp.rglob(inner_name)):
                _extract_into(inner, inner.parent)
                inner.unlink()
        manifest = {"archive": archive.name, "archive_sha256": archive_sha256, "files": _inventory(tmp)}
        write_json(tmp / MANIFEST, manifest)
    return manifest


def _zip_sizes(archive: Path) -> list[int] | None:
    """The unpacked sizes of a zip's files, from its central directory; None when it cannot be
    read (extraction then says why)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            return [info.file_size for info in zf.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, EOFError):
        return None


#: format -> the unpacked sizes of its files, for the formats that record them up front (a
#: compressed tar or a RAR tells them only by being decompressed: a full disk there is found
#: while writing, and the message gives what is free)
_SIZES = {"zip": _zip_sizes}


def _inventory(root: Path) -> dict:
    """relpath -> sha256, size and mtime of every extracted file (the manifest's ``files``)."""
    files = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            files[p.relative_to(root).as_posix()] = {
                "sha256": file_sha256(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    return files

"""Download, verify and extract a dataset archive; locate its split files.

:func:`download` fetches one URL over HTTP(S) into ``<dest>.part`` with a tqdm progress
bar, resumes a partial file with an HTTP ``Range`` request (and starts over when the server
ignores it), retries interrupted transfers, and renames the file onto ``dest`` only after its
size and sha256 match. A checksum or size mismatch moves the file aside to
``<dest>.corrupt`` and raises :class:`DownloadError`; nothing is extracted.

:func:`fetch` does it for a registry entry: a manual-only dataset (or an archive the user
placed by hand) is only verified, and a missing manual archive fails with the exact path to
put it at and the page to get it from. Then the archive is extracted atomically
(:mod:`bench.data.extract`) into ``<raw_dir>/<group>/extracted``. When the registry knows no
checksum (manual LETOR 3.0 archives) the first verified sha256 is recorded and reported.

The record that an archive was verified lives in the suite's checksum cache
(:mod:`bench.data.checksum_cache`, the one prepare uses), never beside the archive: ``raw_dir``
may be the user's own folder, and fetch adds to it only the download and ``extracted/``.
A file the system refuses (permission denied, a folder where the archive belongs, no space
left for the download) is :class:`bench.errors.FileAccessError`, one line naming the path.
A host that never answers (its name does not resolve, the connection is refused, silence past
the timeout: an offline machine, a firewall) is :class:`bench.errors.HostUnreachable`, not an
interrupted transfer: no byte arrived, so no partial file is claimed; the message names
``--url`` and the exact path where an archive fetched by hand belongs. Only a transfer that
broke off after the server answered is :class:`TransferInterrupted`, and its message mentions
the ``.part`` file only when one with data is on disk (an empty one is removed).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

from tqdm import tqdm

from bench.data.checksum_cache import cached_sha256, record_sha256, recorded_sha256
from bench.data.extract import MANIFEST, extract_archive
from bench.data.fileaccess import file_access
from bench.data.registry import Dataset
from bench.errors import (
    ChecksumError,
    DownloadError,
    ExtractError,
    FileAccessError,
    HostUnreachable,
    ManualDownloadRequired,
    TransferInterrupted,
    UsageError,
)

__all__ = ["ChecksumError", "DownloadError", "HostUnreachable", "ManualDownloadRequired", "TransferInterrupted",
           "ARCHIVE_STATES", "archive_path", "archive_state", "download", "fetch", "find_split_file", "prepared_by_source",
           "source_sha256"]

_CHUNK = 1 << 20

# why a host gave no answer, by the class of the failure (the first match, most specific
# first); anything else is shown as the system's own words
_NO_ANSWER = (
    (socket.gaierror, "its name does not resolve (no network, or no DNS)"),
    (ConnectionRefusedError, "the connection was refused"),
    (TimeoutError, "no answer within {timeout:g} s"),
    (ssl.SSLError, "the secure connection failed"),
    (http.client.RemoteDisconnected, "it closed the connection without answering"),
)


class _NoAnswer(Exception):
    """One attempt got no response from the host (raised before any byte is written)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _no_answer_reason(exc: BaseException, timeout: float) -> str:
    """What :data:`_NO_ANSWER` says about ``exc`` (a ``URLError`` is judged by its reason)."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    for kind, text in _NO_ANSWER:
        if isinstance(reason, kind):
            return f"{text.format(timeout=timeout)} ({reason})"
    return str(reason) or type(reason).__name__


def _move_aside(path: Path) -> Path:
    bad = path.with_name(path.name.removesuffix(".part") + ".corrupt")
    with file_access(path, "move aside to " + bad.name):
        os.replace(path, bad)
    return bad


def _open_part(part: Path, mode: str):
    """Open the ``.part`` file, unbuffered: a full disk then shows in :func:`_write_block`, not
    at close (where it would pass for an interrupted transfer); the system's refusal is the
    user's to fix, not a transfer to retry."""
    with file_access(part, "write"):
        return open(part, mode, buffering=0)


def _write_block(out, block: bytes, part: Path) -> None:
    """Append all of ``block`` (a raw write may take only part of it)."""
    with file_access(part, "write"):
        view = memoryview(block)
        while view:
            view = view[out.write(view):]


def _open(url: str, start: int, timeout: float):
    req = urllib.request.Request(url, headers={"User-Agent": "ltr-bench"})
    if start > 0:
        req.add_header("Range", f"bytes={start}-")
    return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 (scheme checked by caller)


def _transfer(url: str, part: Path, size: int | None, timeout: float, progress: bool) -> None:
    """One attempt: append the rest of ``url`` to ``part`` (resuming when it exists)."""
    start = part.stat().st_size if part.exists() else 0
    if size is not None and start >= size:
        if start == size:
            return
        with file_access(part, "remove"):
            part.unlink()  # longer than the real file: cannot be a prefix of it
        start = 0
    try:
        resp = _open(url, start, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start > 0:  # range past the end: the part is already whole
            return
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:  # before any response
        raise _NoAnswer(_no_answer_reason(exc, timeout)) from exc
    with resp:
        mode = "ab"
        if start > 0:
            content_range = resp.headers.get("Content-Range", "")
            if resp.status != 206 or not content_range.startswith(f"bytes {start}-"):
                start, mode = 0, "wb"  # server ignored the range: start over
        length = resp.headers.get("Content-Length")
        total = size if size is not None else (start + int(length) if length else None)
        with _open_part(part, mode) as out, tqdm(total=total, initial=start, unit="B", unit_scale=True,
                                           unit_divisor=1024, desc=part.name.removesuffix(".part"),
                                           disable=None if progress else True,
                                           file=sys.stderr) as bar:
            received = 0
            while True:
                block = resp.read(_CHUNK)
                if not block:
                    break
                _write_block(out, block, part)
                received += len(block)
                bar.update(len(block))
        if length is not None and received < int(length):
            # http.client returns b"" on a closed connection instead of raising
            raise http.client.IncompleteRead(b"", int(length) - received)


def download(url: str, dest: str | os.PathLike, sha256: str | None, size: int | None = None, *,
             md5: str | None = None, retries: int = 3, timeout: float = 60.0,
             progress: bool = True) -> Path:
    """Download ``url`` to ``dest``, verified; returns ``dest``.

    Resumes ``<dest>.part`` when present; retries ``retries`` times after an interrupted
    transfer (each retry resumes). ``sha256`` (or ``md5``) and ``size`` are checked before the
    rename; ``None`` skips that check. A complete file that fails them is moved to
    ``<dest>.corrupt`` and :class:`DownloadError` is raised.
    """
    dest = Path(dest)
    if not url.lower().startswith(("http://", "https://")):
        raise DownloadError(f"{url}: only http:// and https:// URLs can be downloaded")
    with _new_folder(dest.parent):
        return _download(url, dest, sha256, size, md5=md5, retries=retries, timeout=timeout, progress=progress)


@contextlib.contextmanager
def _new_folder(folder: Path) -> Iterator[None]:
    """Create ``folder`` (and its missing parents) for the block; when the block fails, remove
    those it created that are still empty: a failed fetch leaves no empty ``<raw_dir>/<group>/``
    (the error names the path where a file fetched by hand belongs)."""
    created = [p for p in (folder, *folder.parents) if not p.exists()]
    with file_access(folder, "create the folder"):
        folder.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for path in created:  # deepest first; stops at the first that holds something
            try:
                path.rmdir()
            except OSError:
                break
        raise


def _download(url: str, dest: Path, sha256: str | None, size: int | None, *, md5: str | None, retries: int,
              timeout: float, progress: bool) -> Path:
    part = dest.with_name(dest.name + ".part")
    attempt = 0
    while True:
        try:
            _transfer(url, part, size, timeout, progress)
            break  # the server says the file is complete; verify() judges its size
        except FileAccessError:
            raise  # the local disk refused: retrying would not help
        except urllib.error.HTTPError as exc:
            raise DownloadError(f"{url}: HTTP {exc.code} {exc.reason}; the link may be stale: "
                                f"pass a mirror with --url, or download the file yourself and "
                                f"place it at {dest}") from exc
        except _NoAnswer as exc:
            attempt += 1
            if attempt > retries:
                raise HostUnreachable(_unreachable_message(url, dest, part, exc.why, attempt)) from exc.__cause__
            time.sleep(min(2.0 ** attempt * 0.1, 5.0))
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError,
                OSError) as exc:
            attempt += 1
            if attempt > retries:
                raise TransferInterrupted(_interrupted_message(url, part, size, exc)) from exc
            time.sleep(min(2.0 ** attempt * 0.1, 5.0))
    verify(part, sha256, size, md5=md5, final_name=dest)
    with file_access(dest, "write"):
        os.replace(part, dest)
    return dest


def _partial_bytes(part: Path) -> int:
    """Bytes in ``part`` (0 when there is none); an empty one is removed: nothing to resume."""
    got = part.stat().st_size if part.is_file() else 0
    if got == 0 and part.is_file():
        with file_access(part, "remove"):
            part.unlink()
    return got


def _unreachable_message(url: str, dest: Path, part: Path, why: str, attempts: int) -> str:
    host = urllib.parse.urlsplit(url).netloc
    got = _partial_bytes(part)
    kept = (f"; the partial file {part} ({got} bytes, from an earlier run) is kept and will be resumed"
            if got else "")
    return (f"cannot reach {host}: {why}, {attempts} attempt(s); nothing was downloaded{kept}. "
            f"Offline or behind a firewall: pass a mirror this machine can reach with --url URL, or "
            f"download {url} elsewhere and place the file at {dest.resolve()} (creating its folder)")


def _interrupted_message(url: str, part: Path, size: int | None, exc: BaseException) -> str:
    got = _partial_bytes(part)
    of = f" of {size}" if size else ""
    if not got:
        return (f"{url}: the transfer broke off before any data arrived ({exc!r}); no partial file "
                f"is kept: run the same command again")
    return (f"{url}: transfer interrupted after {got} bytes{of} ({exc!r}); the partial file {part} "
            "is kept: run the same command again to resume")


def verify(path: Path, sha256: str | None, size: int | None, *, md5: str | None = None,
           final_name: Path | None = None) -> str:
    """Check ``path``'s size and checksum; returns its sha256. On mismatch the file is moved
    to ``<name>.corrupt`` and :class:`DownloadError` explains what was expected; a file that
    cannot be read (a folder, permission denied) is :class:`FileAccessError`."""
    shown = final_name or path
    with file_access(shown, "read"):
        actual_size, digest, md5_digest = _digests(path, size, md5 is not None)
    if size is not None and actual_size != size:
        bad = _move_aside(path)
        raise ChecksumError(f"{shown}: size {actual_size} bytes, expected {size} (truncated or "
                            f"wrong file); moved aside to {bad}; nothing was extracted")
    for algo, expected, actual in (("sha256", sha256, digest), ("md5", md5, md5_digest)):
        if expected is not None and actual != expected.lower():
            bad = _move_aside(path)
            raise ChecksumError(f"{shown}: {algo} mismatch: expected {expected.lower()}, got "
                                f"{actual}; the file was moved aside to {bad} and nothing was "
                                f"extracted; delete it and download again (or from a mirror)")
    return digest


def _digests(path: Path, size: int | None, with_md5: bool) -> tuple[int, str | None, str | None]:
    """Size, sha256 and md5 (or None) of ``path`` in one read; no hashes when the size is
    already wrong (no point reading gigabytes). Opened first, so that a folder in the
    archive's place is refused by the system, never moved aside as a corrupt archive."""
    with open(path, "rb") as fh:
        actual = os.fstat(fh.fileno()).st_size
        if size is not None and actual != size:
            return actual, None, None
        h_sha = hashlib.sha256()
        h_md5 = hashlib.md5() if with_md5 else None
        for block in iter(lambda: fh.read(_CHUNK), b""):
            h_sha.update(block)
            if h_md5 is not None:
                h_md5.update(block)
    return actual, h_sha.hexdigest(), (h_md5.hexdigest() if h_md5 else None)


def _verified_sha256(ds: Dataset, archive: Path, checksum_cache) -> str | None:
    """The archive's sha256 when the suite's cache says it was verified as it is now and the
    registry still expects it; None means verify (again)."""
    digest = recorded_sha256(archive, checksum_cache)
    if digest is None or (ds.sha256 is not None and digest != ds.sha256.lower()):
        return None
    return digest


def _expected_checksum(ds: Dataset) -> str:
    return (f" (expected sha256 {ds.sha256})" if ds.sha256 else "") + (f" (expected md5 {ds.md5})" if ds.md5 else "")


def _manual_message(ds: Dataset, archive: Path) -> str:
    why = "manual-only" if ds.manual else "not downloadable automatically"
    return (f"{ds.name} is {why} ({ds.licence}). Get {ds.archive} from {ds.homepage} and place "
            f"it at {archive.resolve()}, then run `ltr-bench fetch {ds.name}` again" + _expected_checksum(ds))


def fetch(ds: Dataset, raw_dir: str | os.PathLike = "resources/raw", *, url: str | None = None,
          extract: bool = True, progress: bool = True, retries: int = 3,
          checksum_cache: str | os.PathLike | None = None, log=print) -> Path:
    """Make ``<raw_dir>/<group>/extracted`` hold the verified, extracted archive of ``ds``.

    ``url`` overrides the registry's URLs (a mirror; the registry size and checksum still
    apply). Returns the extracted directory. Idempotent: a verified archive is not re-hashed
    (its record is in ``checksum_cache``, the suite's folder: the CLI passes
    ``results/cache/source-sha256``; None: verified on every call) and an up-to-date
    extraction is not repeated. Nothing but the download and ``extracted/`` is written under
    ``raw_dir``.
    """
    if ds.synthetic:
        raise DownloadError(f"{ds.name} is generated locally; nothing to fetch "
                            f"(use `ltr-bench prepare {ds.name}`)")
    group = Path(raw_dir) / ds.raw_group
    extracted = group / "extracted"
    if ds.archive is None:
        raise DownloadError(f"{ds.name}: the registry names no archive")
    archive = group / ds.archive
    digest = _verified_sha256(ds, archive, checksum_cache)
    if digest is None:
        if not archive.exists():
            urls = (url,) if url else (() if ds.manual else ds.urls)
            if not urls and ds.pip is not None and not ds.manual:
                pip_download(ds, archive, log=log)
            elif not urls:
                if (extracted / MANIFEST).exists() or _has_files(extracted):
                    return extracted  # tree extracted by hand
                raise ManualDownloadRequired(_manual_message(ds, archive))
            else:
                _download_any(ds, urls, archive, retries=retries, progress=progress, log=log)
        else:
            log(f"verifying {archive} ...")
        digest = _verify_and_record(ds, archive, checksum_cache)
        if ds.sha256 is None and ds.md5 is None:
            log(f"{archive}: the registry has no checksum for {ds.name}; recorded sha256 {digest}")
    if not extract:
        return extracted
    manifest = _read_manifest(extracted)
    if manifest is None or manifest.get("archive_sha256") != digest:
        log(f"extracting {archive.name} -> {extracted}")
        manifest = extract_archive(archive, extracted, inner_archives=ds.inner_archives,
                                   archive_sha256=digest)
    _check_known_files(ds, extracted, manifest)
    return extracted


def _download_any(ds: Dataset, urls, archive: Path, *, retries: int, progress: bool, log) -> None:
    """Download ``archive`` from the first of ``urls`` that serves it (verified)."""
    errors: list[DownloadError] = []
    for u in urls:
        try:
            log(f"downloading {u} -> {archive}")
            download(u, archive, ds.sha256, ds.size, md5=ds.md5, retries=retries, progress=progress)
            return
        except (ChecksumError, TransferInterrupted):
            raise  # a mirror would not fix a bad file; a resume needs the same URL
        except DownloadError as exc:
            errors.append(exc)
    joined = "; ".join(str(e) for e in errors)
    if all(isinstance(e, HostUnreachable) for e in errors):
        raise HostUnreachable(f"{ds.name}: {joined}; `ltr-bench fetch {ds.name}` then verifies it"
                              + _expected_checksum(ds) + f" and extracts it (the file: {ds.archive}, "
                              f"from {ds.homepage})")
    raise DownloadError(joined + "; " + _manual_message(ds, archive))


def pip_download(ds: Dataset, archive: Path, *, log=print) -> Path:
    """Put the source distribution of ``ds.pip`` (``"package==version"``) at ``archive``, with pip
    from the package registry (then verified by :func:`fetch` like any download).

    ``python -m pip download --no-deps --no-binary <package> <requirement> -d <temporary folder>``:
    the source distribution itself, never a wheel, and nothing else. pip prepares the package's
    metadata on the way; with setuptools installed it does so in this environment
    (``--no-build-isolation``: no build dependency is downloaded), else in pip's isolated build
    environment. The file is moved into place only when pip wrote exactly ``archive``'s name; any
    failure is a :class:`DownloadError` with pip's last lines and where to put the file by hand.
    """
    import importlib.util

    requirement = ds.pip or ""
    package = requirement.split("==")[0].strip()
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", package, "--disable-pip-version-check"]
    attempts = [[*base, "--no-build-isolation"]] if importlib.util.find_spec("setuptools") is not None else []
    attempts.append(base)
    with _new_folder(archive.parent):
        return _pip_download(ds, archive, attempts, log)


def _pip_download(ds: Dataset, archive: Path, attempts: list[list[str]], log) -> Path:
    import subprocess
    import tempfile

    requirement = ds.pip or ""
    tail = ""
    for cmd in attempts:
        with tempfile.TemporaryDirectory(dir=archive.parent, prefix=".pip-") as tmp:
            log(f"pip download {requirement} (source distribution) -> {archive}")
            proc = subprocess.run([*cmd, requirement, "-d", tmp], capture_output=True, text=True, check=False)
            got = sorted(Path(tmp).iterdir())
            if proc.returncode == 0 and [p.name for p in got] == [archive.name]:
                with file_access(archive, "write"):
                    os.replace(got[0], archive)
                return archive
            tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:]) or f"wrote {[p.name for p in got]}"
    raise DownloadError(f"pip download {requirement} did not give {archive.name} ({tail}); download the source "
                        f"distribution from {ds.homepage} and place it at {archive.resolve()}")


def _verify_and_record(ds: Dataset, archive: Path, checksum_cache) -> str:
    """Verify ``archive`` against the registry and record its sha256 in the suite's cache
    (stat taken before the read: an archive replaced meanwhile is verified again next time)."""
    with file_access(archive, "read"):
        st = archive.stat()
    digest = verify(archive, ds.sha256, ds.size, md5=ds.md5)
    record_sha256(archive, checksum_cache, digest, st)
    return digest


def _has_files(path: Path) -> bool:
    return path.is_dir() and any(p.is_file() for p in path.rglob("*"))


def _read_manifest(extracted: Path) -> dict | None:
    try:
        return json.loads((extracted / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _check_known_files(ds: Dataset, extracted: Path, manifest: dict) -> None:
    for pattern, expected in ds.file_sha256.items():
        hits = [rel for rel in manifest["files"] if _matches(rel, pattern)]
        for rel in hits:
            actual = manifest["files"][rel]["sha256"]
            if actual != expected:
                raise ExtractError(f"{extracted / rel}: sha256 {actual} differs from the published "
                                   f"{expected} for {pattern}; the archive content is not the "
                                   f"published {ds.title}")


def _matches(relpath: str, pattern: str) -> bool:
    """Pattern components match the last components of ``relpath`` (case-insensitive)."""
    parts = relpath.lower().split("/")
    pat = pattern.lower().split("/")
    return len(pat) <= len(parts) and all(fnmatchcase(a, b) for a, b in zip(parts[-len(pat):], pat))


def find_split_file(ds: Dataset, raw_dir: str | os.PathLike, fold: str, split: str) -> Path | None:
    """The extracted file of ``split`` in ``fold``; None when the registry has no such split
    (Istella full: no vali). A missing tree or file is :class:`UsageError` (one line from
    ``ltr-bench prepare``) listing what was found."""
    patterns = ds.split_patterns(fold, split)
    if not patterns:
        return None
    extracted = Path(raw_dir) / ds.raw_group / "extracted"
    if not extracted.is_dir():
        raise UsageError(
            f"{extracted}: not there; run `ltr-bench fetch {ds.name}` first"
            + (f" ({_manual_message(ds, Path(raw_dir) / ds.raw_group / (ds.archive or '?'))})"
               if ds.manual else ""))
    files = [p.relative_to(extracted).as_posix() for p in extracted.rglob("*")
             if p.is_file() and p.name != MANIFEST]
    hits = sorted(rel for rel in files for pat in patterns if _matches(rel, pat))
    hits = sorted(set(hits))
    if len(hits) > 1:
        for word in ds.prefer:
            preferred = [h for h in hits if word in h.lower()]
            if preferred:
                hits = preferred
                break
    if len(hits) != 1:
        what = "no file" if not hits else f"{len(hits)} files ({', '.join(hits[:5])})"
        raise UsageError(f"{extracted}: {what} matches {' or '.join(patterns)} for "
                         f"{ds.name} {fold} {split}; check the tree under {extracted}, or "
                         f"delete it and run `ltr-bench fetch {ds.name}` again")
    return extracted / hits[0]


def source_sha256(path: Path, cache_dir: str | os.PathLike | None = None) -> str:
    """sha256 of a source file: from the extraction manifest when the suite extracted it (and
    size and mtime still match), else from the suite's own checksum cache ``cache_dir``
    (:mod:`bench.data.checksum_cache`; None: computed). Nothing is ever written next to the
    file: a hand-extracted tree or a user's folder is left byte-for-byte as it was."""
    path = Path(path)
    st = path.stat()
    for parent in path.parents:
        manifest = _read_manifest(parent) if (parent / MANIFEST).exists() else None
        if manifest is not None:
            entry = manifest.get("files", {}).get(path.relative_to(parent).as_posix())
            if entry and entry["size"] == st.st_size and entry["mtime_ns"] == st.st_mtime_ns:
                return entry["sha256"]
            break
    return cached_sha256(path, cache_dir)


ARCHIVE_STATES = ("verified", "present, not verified", "extracted, archive removed", "extracted by hand",
                  "partial download", "missing", "generated")


def archive_path(ds: Dataset, raw_dir: str | os.PathLike) -> Path | None:
    """Where the archive of ``ds`` belongs (absolute): where ``fetch`` downloads it and where a
    hand-fetched copy must be placed; None for generated data."""
    return None if ds.synthetic or ds.archive is None else (Path(raw_dir) / ds.raw_group / ds.archive).resolve()


def archive_state(ds: Dataset, raw_dir: str | os.PathLike, checksum_cache: str | os.PathLike | None = None) -> str:
    """One of :data:`ARCHIVE_STATES` for ``ds`` under ``raw_dir``. Cheap: reads only small
    records (the archive's in ``checksum_cache``, as :func:`fetch` wrote it), never hashes an
    archive: "present, not verified" becomes "verified" by ``ltr-bench fetch NAME``."""
    if ds.synthetic:
        return "generated"
    group = Path(raw_dir) / ds.raw_group
    archive = group / (ds.archive or "")
    if ds.archive and archive.is_file():
        return "verified" if _verified_sha256(ds, archive, checksum_cache) else "present, not verified"
    if (group / "extracted" / MANIFEST).exists():
        return "extracted, archive removed"
    if _has_files(group / "extracted"):
        return "extracted by hand"
    if archive.with_name(archive.name + ".part").exists():
        return "partial download"
    return "missing"


def prepared_by_source(prepared_dir: str | os.PathLike) -> dict[str, list[str]]:
    """Registry name -> the prepared folds made from it (``<dataset>/<fold>``, as under
    ``prepared_dir``; a study names its datasets, e.g. ``mslr-web30k-arf`` from
    ``mslr-web30k``), read from each fold's ``meta.json``; unreadable ones are skipped."""
    out: dict[str, list[str]] = {}
    for meta in sorted(Path(prepared_dir).glob("*/*/meta.json")):
        try:
            source = json.loads(meta.read_text(encoding="utf-8"))["dataset"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.setdefault(str(source), []).append(meta.parent.relative_to(prepared_dir).as_posix())
    return out

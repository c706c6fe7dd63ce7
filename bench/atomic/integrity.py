"""Integrity on read: every artefact a later step trusts carries a digest, checked when read.

A flipped bit in a prepared array, a run's scores or a per-query frame (mtime kept, as bit
rot or a bad copy leaves it) is invisible to Snakemake, which only compares times; without a
digest the next step would read it and write a silently wrong table. So:

- **Directory artefacts** (a prepared fold, a run directory) hold a ``digests.json``
  (:data:`DIGESTS_FILE`): relative file name -> digest of every other file in them, written
  inside the same temporary directory, so it appears with them in the one atomic rename
  (:func:`bench.atomic.atomic_path`). Each reader checks the files it actually reads (an
  ``evaluate`` job checks the test labels, qids and offsets of a fold, never its 2 GB of
  features).
- **Single-file artefacts** (the evaluated per-query frames, statistics tables, written by
  :func:`bench.results.write_frame`) get a sidecar ``<file>.digest`` (:func:`sidecar`). It is
  renamed into place just before the file itself, so a crash between the two renames leaves a
  file that fails its check (and is rebuilt), never one that passes silently.
- A mismatch raises :class:`bench.errors.IntegrityError`; ``ltr-bench`` prints it as one line
  naming the file and what to type to rebuild it (:func:`rebuild_hint`): for a file of the
  workflow (``results/prepared``, ``results/runs``, ``results/evaluated``, ``results/stats``)
  ``snakemake --cores 2 <target> --forcerun <rule>``, else the ``ltr-bench`` command.
- ``digests.json`` itself is not covered by a digest: a damaged one fails to parse or fails
  the files it lists, which stops the reader the same way.

**Hash: XXH3-128** (the ``xxhash`` package), recorded as ``xxh3_128:<hex>`` (the reader also
takes ``sha256:``/``blake2b:`` records). It is not cryptographic and need not be: the threat is
bit rot and bad copies, not an adversary (downloads keep their sha256, :mod:`bench.data.fetch`).
It is chosen for speed, measured on this project's 2-core machine on a 2.05 GB file (an
MSLR-sized fold's features, float32, page cache warm, under a load of ~10 from parallel work):
XXH3-128 over a memory map 0.56-0.63 s (3.3-3.7 GB/s); hashlib sha256 5.6-6.7 s, blake2b
9.8-12.7 s, md5 12.2 s (16 MiB ``readinto``). Checking a whole MSLR-sized prepared fold (2.07 GB,
12 arrays + meta.json) before a training run, as :func:`bench.data.prepared.load_prepared` does:
0.23-0.26 s warm at a load of 2 (1.6-1.8 s at a load of 10), i.e. 0.3-0.6 % of a 40-70 s
training job (up to 4 % under that load; the sha256 fingerprint would be 1.5 s, 3.7 %, at load
2); cold page cache 1.50 s against 1.11 s for the plain read the training job does anyway (it
then finds the pages cached). An ``evaluate`` job checks only the test labels, qids, offsets and
meta.json (3.4 ms on that fold) and each run's ``scores.npy`` (0.2-0.6 ms): 8 runs 8 ms, 1.6 %
of a 0.5 s job. In the default study (``snakemake --cores 2 all``, 202 jobs, 996 s under load)
the checks add ~0.22 s in all: at most 0.10 % of a training job, 7.9 ms in its largest
evaluate job (38 runs). Large files are hashed through a read-only memory map with
``MADV_SEQUENTIAL`` (cold, as fast as ``cat``; the training job maps the same pages next).

**Artefacts written before digests existed** (no ``digests.json``, no sidecar) are accepted
with a one-line warning on stderr naming the file and the rebuild command: refusing them would
force a user to retrain a whole study (hours on the paper profile) for files that are most
likely fine, while corruption never *removes* a digest file -- it changes a file the digest
covers, which is refused. A directory with ``digests.json`` that does not list a file being
read is refused (the listing is the record of what was written).
"""

from __future__ import annotations

import json
import mmap
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from bench.errors import IntegrityError

__all__ = ["ALGORITHM", "DIGESTS_FILE", "SIDECAR_SUFFIX", "digest_file", "digest_files", "digest_of", "digests_size",
           "rebuild_hint",
           "sidecar", "verify", "verify_dir", "write_digests", "write_sidecar"]

ALGORITHM = "xxh3_128"
DIGESTS_FILE = "digests.json"
SIDECAR_SUFFIX = ".digest"

# a run's kind (run.json "kind") -> the workflow rule that writes it
_RUN_RULES = {"neural": "train", "sinkprop_protocol": "train", "gbdt": "gbdt", "linear": "linear"}
_warned: set[str] = set()
_MMAP_FROM = 1 << 20  # smaller files are read whole: a memory map costs more than it saves


def _hasher(algorithm: str):
    if algorithm == "xxh3_128":
        import xxhash

        return xxhash.xxh3_128()
    if algorithm in ("sha256", "blake2b"):
        import hashlib

        return hashlib.new(algorithm)
    raise ValueError(f"unknown digest algorithm {algorithm!r}")


def digest_file(path: str | os.PathLike, algorithm: str = ALGORITHM) -> str:
    """``<algorithm>:<hex>`` of a file's bytes, hashed through a read-only memory map (files
    under 1 MiB: read whole)."""
    h = _hasher(algorithm)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _MMAP_FROM:
            h.update(f.read())
        else:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if hasattr(m, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
                    m.madvise(mmap.MADV_SEQUENTIAL)  # a cold file: read-ahead as fast as `cat`
                h.update(m)
    return f"{algorithm}:{h.hexdigest()}"


def digest_files(root: str | os.PathLike, names: Iterable[str]) -> dict[str, str]:
    """Relative name -> digest for ``names`` under ``root``."""
    root = Path(root)
    return {name: digest_file(root / name) for name in sorted(names)}


def _digests_text(digests: dict[str, str]) -> str:
    return json.dumps({"algorithm": ALGORITHM, "files": digests}, indent=1, sort_keys=True) + "\n"


def write_digests(root: str | os.PathLike, names: Iterable[str]) -> None:
    """Write ``root/digests.json`` for ``names`` (call inside the atomic temporary directory)."""
    root = Path(root)
    (root / DIGESTS_FILE).write_text(_digests_text(digest_files(root, names)), encoding="utf-8")


def digests_size(names: Iterable[str]) -> int:
    """Bytes of the ``digests.json`` :func:`write_digests` writes for ``names`` (every digest of
    :data:`ALGORITHM` has the same length), known before the files exist: a writer checks the
    free space for all it writes first.

    >>> digests_size(["a.npy"]) == len(_digests_text({"a.npy": digest_of(b"")}))
    True
    """
    same_length = digest_of(b"")
    return len(_digests_text(dict.fromkeys(names, same_length)).encode("utf-8"))


def digest_of(data: bytes, algorithm: str = ALGORITHM) -> str:
    """``<algorithm>:<hex>`` of ``data`` (what :func:`digest_file` gives for a file of these bytes)."""
    h = _hasher(algorithm)
    h.update(data)
    return f"{algorithm}:{h.hexdigest()}"


def sidecar(path: str | os.PathLike) -> Path:
    """The digest file of a single-file artefact: ``<path>.digest``."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def write_sidecar(final: str | os.PathLike, written: str | os.PathLike) -> None:
    """Record the digest of ``written`` (the temporary about to become ``final``) beside ``final``."""
    from bench.atomic import write_text

    write_text(sidecar(final), digest_file(written) + "\n")


def _check(path: Path, expected: str, artefact: Path, record: Path) -> None:
    """``path`` against ``expected``; the rebuild command (of ``artefact``) is worked out only
    for the message (it reads run.json: a tenth of a millisecond per file otherwise)."""
    algorithm = expected.split(":", 1)[0]
    if algorithm not in ("xxh3_128", "sha256", "blake2b"):
        raise IntegrityError(f"{path}: recorded digest {expected[:40]!r} has an unknown algorithm; "
                             f"rebuild it: {rebuild_hint(artefact)}")
    try:
        actual = digest_file(path, algorithm)
    except FileNotFoundError:
        raise IntegrityError(f"{path}: missing (its digest is recorded); rebuild it: {rebuild_hint(artefact)}") from None
    if actual != expected:
        raise IntegrityError(f"{path}: contents changed since it was written ({algorithm} digest differs from "
                             f"{record.name}: a disk fault, a bad copy or an edit); rebuild it: {rebuild_hint(artefact)}")


def _warn_unverified(path: Path, rebuild: str) -> None:
    key = str(path)
    if key not in _warned:
        _warned.add(key)
        print(f"ltr-bench: warning: {path}: no digest (written before integrity checks); read unverified; "
              f"to add one rebuild it: {rebuild}", file=sys.stderr)


def verify(path: str | os.PathLike) -> None:
    """Check one file against its recorded digest; :class:`IntegrityError` when it differs.

    The digest is looked up in a sidecar ``<path>.digest``, else in the ``digests.json`` of
    the file's directory or the one above it (a prepared fold's ``<split>/<array>.npy``).
    """
    path = Path(path)
    side = sidecar(path)
    if side.is_file():
        expected = side.read_text(encoding="utf-8").strip()
        if ":" not in expected:
            raise IntegrityError(f"{side}: not a digest; rebuild {path}: {rebuild_hint(path)}")
        _check(path, expected, path, side)
        return
    for root in (path.parent, path.parent.parent):
        if (root / DIGESTS_FILE).is_file():
            verify_dir(root, [path.relative_to(root).as_posix()])
            return
    _warn_unverified(path, rebuild_hint(path))


def _load_digests(root: Path) -> dict[str, str] | None:
    listing = root / DIGESTS_FILE
    try:
        text = listing.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        files = json.loads(text)["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a mapping")
    except (ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(f"{listing}: damaged ({exc}); rebuild {root}: {rebuild_hint(root)}") from None
    return files


def verify_dir(root: str | os.PathLike, names: Iterable[str]) -> None:
    """Check ``names`` (relative to ``root``) against ``root/digests.json``."""
    root = Path(root)
    files = _load_digests(root)
    if files is None:
        _warn_unverified(root, rebuild_hint(root))
        return
    for name in names:
        if name not in files:
            raise IntegrityError(f"{root / name}: not listed in {root / DIGESTS_FILE}; rebuild it: {rebuild_hint(root)}")
        _check(root / name, files[name], root, root / DIGESTS_FILE)


def _tuning_job(experiment: str, dataset: str, fold: str, method: str, seed_dir: str) -> tuple[str, str] | None:
    """``(record, rule)`` of the tuning job that trains run ``method`` (``seed<k>``), else None.

    The names follow ``bench.config.plan`` (``TUNING``, ``TUNED_RUNS``) and ``bench.config.tuning``
    (``<method>+cfg<i>``, ``<method>+tuned``): configuration 1 of a tuning is the method itself,
    so a plain name is a tuning's when its record names this fold and seed."""
    folder = Path("results", "tuning", experiment, dataset)
    if method.endswith("+tuned"):
        return (folder / f"{method}.json").as_posix(), "tuned_runs"
    base, mark, index = method.rpartition("+cfg")
    if mark and index.isdigit():
        return (folder / f"{base}.json").as_posix(), "tune"
    record = folder / f"{method}.json"
    try:
        facts = json.loads(record.read_text(encoding="utf-8"))
        seed = int(seed_dir.removeprefix("seed"))
    except (OSError, ValueError):
        return None
    if isinstance(facts, dict) and facts.get("fold") == fold and seed in (facts.get("seeds") or []):
        return record.as_posix(), "tune"
    return None


def rebuild_hint(path: str | os.PathLike) -> str:
    """What to type to rebuild the artefact ``path`` belongs to (one line, in backquotes)."""
    p = Path(path)
    try:
        rel = p.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        rel = p
    parts = rel.parts
    extra = " (with your study's --configfile/--config)"
    if len(parts) >= 4 and parts[:2] == ("results", "prepared"):
        target = Path(*parts[:4]).as_posix()
        return f"`snakemake --cores 2 {target} --forcerun prepare`{extra}"
    if len(parts) >= 7 and parts[:2] == ("results", "runs"):
        tuned = _tuning_job(*parts[2:7])
        if tuned is not None:  # a tuned method's run: its tuning's job retrains it (it keeps the sound runs)
            return f"`snakemake --cores 2 {tuned[0]} --forcerun {tuned[1]}`{extra}"
        record = Path(*parts[:7]) / "run.json"  # the run's one tracked file (bench.config.plan.RUN_RECORD)
        target = record.as_posix()
        try:
            kind = json.loads(record.read_text(encoding="utf-8")).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        rule = _RUN_RULES.get(kind, target)
        return f"`snakemake --cores 2 {target} --forcerun {rule}`{extra}"
    if len(parts) >= 3 and parts[:2] == ("results", "evaluated"):
        target = Path(*parts[:5]).as_posix() if len(parts) >= 5 else rel.as_posix()
        target = target.removesuffix(SIDECAR_SUFFIX)
        return f"`snakemake --cores 2 {target} --forcerun evaluate`{extra}"
    if len(parts) == 3 and parts[:2] == ("results", "stats"):
        return f"`snakemake --cores 2 {rel.as_posix().removesuffix(SIDECAR_SUFFIX)} --forcerun stats`{extra}"
    if len(parts) == 4 and parts[:3] == ("results", "stats", "compare"):
        return f"`snakemake --cores 2 {rel.as_posix().removesuffix(SIDECAR_SUFFIX)} --forcerun compare_table`{extra}"
    if (p / "meta.json").exists() or p.parent.name in ("train", "vali", "test"):
        return "`ltr-bench prepare ... --force` with the fold's dataset, --fold, --out and --options (meta.json)"
    return "re-run the `ltr-bench` command that wrote it"

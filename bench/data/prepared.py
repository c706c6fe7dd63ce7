"""Read one prepared fold: the cache format that :mod:`bench.data.prepare` writes.

Kept apart from the writer so that every job that only *reads* a fold (training, GBDT,
evaluation) imports NumPy and nothing else: the writer pulls in the numba parser and SciPy
(about 0.5 s per process, paid by every one of the study's ~100 jobs). The layout and the
fingerprint are documented in :mod:`bench.data.prepare`.

Integrity on read (:mod:`bench.atomic.integrity`): :func:`save_prepared` writes ``digests.json``
(XXH3-128 of every array file and of ``meta.json``) inside the fold's atomic directory, and
:func:`load_prepared` checks the files a reader uses before opening them (``check``: every
file by default; ``evaluate`` checks only the test labels, qids and offsets). A fold with a
changed byte stops the reader with one line naming the file and the command that rebuilds
the fold. The ``fingerprint`` in ``meta.json`` (sha256 over the arrays, see
:mod:`bench.data.prepare`) identifies the *data* (runs and frozen baselines record it);
recomputing it costs a full sha256 pass, so :meth:`PreparedFold.verify` stays an explicit
check, not part of every read.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.atomic import atomic_path
from bench.atomic.space import npy_size, save_npy
from bench.errors import IntegrityError

__all__ = ["ARRAYS", "FORMAT_VERSION", "SPLITS", "PreparedFold", "Split", "load_prepared", "save_prepared"]

FORMAT_VERSION = 1
SPLITS = ("train", "vali", "test")
ARRAYS = ("features", "labels", "qids", "offsets")


@dataclass(frozen=True)
class Split:
    """One split: memory-mapped arrays (see the module docstring for shapes)."""

    features: np.ndarray
    labels: np.ndarray
    qids: np.ndarray
    offsets: np.ndarray

    @property
    def n_queries(self) -> int:
        return int(self.qids.shape[0])

    @property
    def n_docs(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class PreparedFold:
    """A prepared fold: ``meta`` (meta.json), ``fingerprint``, ``splits`` name -> Split."""

    path: Path
    meta: dict
    fingerprint: str
    splits: dict

    @property
    def n_features(self) -> int:
        return int(self.meta["n_features"])

    def verify(self) -> None:
        """Recompute the fingerprint from the arrays; :class:`IntegrityError` when it differs."""
        from bench.atomic.integrity import rebuild_hint

        actual = _fingerprint({s: {a: getattr(sp, a) for a in ARRAYS} for s, sp in self.splits.items()})
        if actual != self.fingerprint:
            raise IntegrityError(f"{self.path}: arrays do not match meta.json fingerprint "
                                 f"({actual} != {self.fingerprint}); rebuild it: {rebuild_hint(self.path)}")


def _fingerprint(arrays: dict) -> str:
    h = hashlib.sha256()
    for split in SPLITS:
        for name in ARRAYS:
            a = np.ascontiguousarray(arrays[split][name])
            h.update(f"{split}/{name}:{a.dtype.str}:{a.shape}\n".encode())
            if a.size:  # memoryview cannot cast an empty array (zeros in its shape); it adds no bytes
                h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def array_files() -> list[str]:
    """The fold's array files, relative to the fold directory (``train/features.npy``, ...)."""
    return [f"{split}/{name}.npy" for split in SPLITS for name in ARRAYS]


def load_prepared(path: str | os.PathLike, *, check: bool | tuple[str, ...] = True) -> PreparedFold:
    """Open a prepared fold (arrays memory-mapped read-only). Errors name the file at fault.

    ``check``: which files to verify against ``digests.json`` first (:mod:`bench.atomic.integrity`):
    ``True`` every array, a tuple of ``"<split>/<array>"`` names only those, ``False`` none;
    ``meta.json`` is checked unless ``check`` is ``False``.
    """
    from bench.atomic.integrity import verify_dir

    path = Path(path)
    meta_path = path / "meta.json"
    if check is not False and meta_path.is_file():
        names = array_files() if check is True else [f"{n}.npy" for n in check]
        verify_dir(path, ["meta.json", *names])
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{meta_path}: missing; run `ltr-bench prepare` for this fold") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{meta_path}: not valid JSON ({exc})") from exc
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{meta_path}: prepare format {meta.get('format_version')!r}, this code "
                         f"reads {FORMAT_VERSION}; re-run prepare")
    splits = {}
    for split in SPLITS:
        arrays = {}
        for name in ARRAYS:
            f = path / split / f"{name}.npy"
            try:
                arrays[name] = np.load(f, mmap_mode="r")
            except (OSError, ValueError) as exc:
                raise ValueError(f"{f}: cannot open ({exc}); re-run prepare with --force") from exc
        info = meta["splits"][split]
        expected = {"features": (info["n_docs"], meta["n_features"]), "labels": (info["n_docs"],),
                    "qids": (info["n_queries"],), "offsets": (info["n_queries"] + 1,)}
        for name, shape in expected.items():
            if tuple(arrays[name].shape) != tuple(shape):
                raise ValueError(f"{path / split / name}.npy: shape {arrays[name].shape}, "
                                 f"meta.json says {tuple(shape)}; re-run prepare with --force")
        splits[split] = Split(**arrays)
    return PreparedFold(path=path, meta=meta, fingerprint=meta["fingerprint"], splits=splits)


def save_prepared(path: str | os.PathLike, splits: dict, meta: dict) -> None:
    """Write ``splits`` (split -> array name -> array) and ``meta`` as a prepared fold, atomically.

    ``meta`` is written as given (:mod:`bench.data.prepare` builds it, with the fingerprint of
    the arrays); the directory appears complete or not at all, with its ``digests.json``. Its
    size is known before writing: a filesystem without room for it refuses it first
    (:class:`bench.errors.DiskFull`, with the space needed and free).
    """
    from bench.atomic.integrity import digests_size, write_digests

    meta_text = (json.dumps(meta, indent=1, sort_keys=True, allow_nan=True) + "\n").encode("utf-8")
    names = ["meta.json", *array_files()]
    sizes = [npy_size(splits[s][a]) for s in SPLITS for a in ARRAYS] + [len(meta_text), digests_size(names)]
    with atomic_path(Path(path), is_dir=True, sizes=sizes) as tmp:  # refused first when it cannot fit
        for split in SPLITS:
            (tmp / split).mkdir()
            for name in ARRAYS:
                save_npy(tmp / split / f"{name}.npy", splits[split][name])  # np.save's bytes; ENOSPC
        (tmp / "meta.json").write_bytes(meta_text)
        write_digests(tmp, names)


def fingerprint(splits: dict) -> str:
    """The fingerprint ``meta.json`` records for ``splits`` (split -> array name -> array)."""
    return _fingerprint(splits)

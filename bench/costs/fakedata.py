"""Generated data of a planned shape, on which the calibration runs the study's real code.

A planned fold's shape (:func:`bench.costs.model.shape_spec`: ``n_features`` and, per split,
``n_queries``, ``n_docs``, ``max_list`` and a histogram of list lengths when known) is scaled
down to a few documents and written as a prepared fold (:func:`fake_fold`) or as SVMlight
files (:func:`svmlight_files`):

- standard-normal features and grades 0-4 that depend on the features (so trees and models
  have something to fit: a GBDT on random labels stops growing early and would look cheaper
  than it is);
- list lengths drawn from the planned split's own lengths when they are known, else lognormal
  with its mean (an MSLR-like spread), the longest planned list always included;
- each split the planned split's share of the documents.

:class:`Workspace` holds the folds and files of one calibration in a temporary folder, each
generated once (in a forked child, so that the generator's memory never becomes part of the
calibrating process a measurement forks from) and read by every measurement of that shape and
size, as the study's jobs read the prepared fold.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.perf.process import in_child
from bench.provenance import canonical_json

SPLITS = ("train", "vali", "test")
#: distinct feature rows of a generated SVMlight file: each line reuses one of them (parsing
#: costs the same whichever it is), so a file of any size is written in a fraction of a second
SVMLIGHT_ROWS = 4096


def fake_lengths(split: dict[str, Any], n_docs: int, rng: np.random.Generator) -> np.ndarray:
    """About ``n_docs`` documents' worth of list lengths shaped like the planned ``split``."""
    mean = split["n_docs"] / max(split["n_queries"], 1)
    n_q = max(1, int(round(n_docs / max(mean, 1.0))))
    if split.get("lengths") is not None:  # a histogram {values, counts} of the planned lengths
        pool = np.repeat(np.asarray(split["lengths"]["values"], dtype=np.int64), split["lengths"]["counts"])
        lengths = rng.choice(pool, size=n_q, replace=n_q > pool.size)
    else:
        sigma = 0.65
        mu = math.log(max(mean, 1.0)) - sigma**2 / 2
        cap = split.get("max_list") or int(10 * mean) + 1
        lengths = np.clip(np.rint(rng.lognormal(mu, sigma, n_q)), 1, cap).astype(np.int64)
    if split.get("max_list"):
        lengths[0] = int(split["max_list"])
    return lengths


def fake_split(lengths: np.ndarray, n_features: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A split's arrays (prepared layout) with grades 0-4 that depend on the features."""
    n = int(lengths.sum())
    features = rng.standard_normal((n, n_features), dtype=np.float32)
    k = min(4, n_features)
    score = features[:, :k].sum(axis=1) / math.sqrt(k) + 0.5 * rng.standard_normal(n)
    labels = np.searchsorted([0.0, 1.0, 1.6, 2.2], score).astype(np.float32)  # ~50/34/10/4/2 %
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    qids = np.arange(1, lengths.size + 1, dtype=np.int64)
    return {"features": features, "labels": labels, "qids": qids, "offsets": offsets}


def total_docs(shape: dict[str, Any]) -> int:
    return sum(int(s["n_docs"]) for s in shape["splits"].values())


def _split_docs(shape: dict[str, Any], n_docs: int) -> dict[str, int]:
    """``n_docs`` documents shared among the splits as the planned splits share theirs."""
    total = max(total_docs(shape), 1)
    return {s: max(1, int(shape["splits"][s]["n_docs"] * n_docs / total)) for s in SPLITS}


def fake_fold(path: Path, shape: dict[str, Any], n_docs: int, seed: int = 0) -> int:
    """Write a prepared fold of about ``n_docs`` documents of the planned ``shape`` at ``path``;
    its documents (:func:`fold_bytes` gives its size)."""
    from bench.data.prepared import FORMAT_VERSION, fingerprint, save_prepared

    rng = np.random.default_rng(seed)
    docs = _split_docs(shape, n_docs)
    splits = {s: fake_split(fake_lengths(shape["splits"][s], docs[s], rng), int(shape["n_features"]), rng)
              for s in SPLITS}
    meta = {"format_version": FORMAT_VERSION, "dataset": "calibration", "fold": "Fold1",
            "n_features": int(shape["n_features"]), "options": {}, "fingerprint": fingerprint(splits),
            "splits": {s: {"n_docs": int(sp["labels"].size), "n_queries": int(sp["qids"].size)}
                       for s, sp in splits.items()}}
    save_prepared(path, splits, meta)
    return sum(int(sp["labels"].size) for sp in splits.values())


def fold_bytes(path: Path) -> int:
    """Bytes of a prepared fold's arrays (what a job that reads the whole fold maps), or of one
    split's when ``path`` is the split's folder."""
    path = Path(path)
    return sum(f.stat().st_size for f in (path.glob("*.npy") if (path / "features.npy").exists()
                                          else path.glob("*/*.npy")))


def svmlight_files(folder: Path, shape: dict[str, Any], n_docs: int, seed: int = 0) -> dict[str, Path]:
    """Dense SVMlight files (``label qid:q 1:v ...``, values ``%.6g``) of about ``n_docs``
    documents of the planned splits; each line's features are one of :data:`SVMLIGHT_ROWS`
    rows formatted once."""
    rng = np.random.default_rng(seed)
    n_features = int(shape["n_features"])
    pool = rng.standard_normal((SVMLIGHT_ROWS, n_features), dtype=np.float32)
    rows = np.array([" ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row)) for row in pool], dtype=object)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, docs in _split_docs(shape, n_docs).items():
        lengths = fake_lengths(shape["splits"][split], docs, rng)
        qid = np.repeat(np.arange(1, lengths.size + 1), lengths)
        pick = rng.integers(0, SVMLIGHT_ROWS, qid.size)
        labels = np.minimum(4, np.floor(np.abs(pool[pick, 0]) * 2)).astype(np.int64)  # grades follow feature 1
        lines = [f"{g} qid:{q} {r}" for g, q, r in zip(labels.tolist(), qid.tolist(), rows[pick])]
        path = folder / f"{split}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="ascii")
        files[split] = path
    return files


class Workspace:
    """The generated folds and files of one calibration, each made once (module docstring).

    Use as a context manager: the folder is removed on exit, also on an interrupt. Several
    processes may share one workspace (a calibration measures side by side): each fold or set
    of files is generated into a folder of its own and renamed into place, so a process finds
    it whole or not at all (two may both generate it; the first rename wins).
    """

    def __init__(self) -> None:
        self._tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Workspace:
        self._tmp = tempfile.TemporaryDirectory(prefix="ltr-calibration-")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp.name, ignore_errors=True)
            self._tmp = None

    @property
    def root(self) -> Path:
        if self._tmp is None:
            raise RuntimeError("Workspace used outside its `with` block")
        return Path(self._tmp.name)

    def scratch(self) -> Path:
        """A fresh empty folder (a measurement's run directory, a prepare's output)."""
        return Path(tempfile.mkdtemp(dir=self.root))

    def _made(self, key: str, make: Callable[[Path], Any]) -> Path:
        """``root/key``, made by ``make(folder)`` in a forked child unless it exists."""
        path = self.root / key
        if not path.exists():
            part = self.scratch()
            in_child(lambda: make(part))
            try:
                part.rename(path)
            except OSError:  # another process renamed its copy first
                shutil.rmtree(part, ignore_errors=True)
        return path

    def fold(self, shape: dict[str, Any], n_docs: int) -> tuple[Path, int]:
        """A prepared fold of about ``n_docs`` documents of ``shape`` and its exact documents."""
        path = self._made(f"fold-{_digest(shape)}-{n_docs}", lambda part: fake_fold(part / "fold", shape, n_docs))
        return path / "fold", int(sum(np.load(f, mmap_mode="r").shape[0] for f in (path / "fold").glob("*/labels.npy")))

    def svmlight(self, shape: dict[str, Any], n_docs: int) -> dict[str, Path]:
        """SVMlight files of about ``n_docs`` documents of ``shape``."""
        path = self._made(f"svmlight-{_digest(shape)}-{n_docs}", lambda part: {
            s: str(p) for s, p in svmlight_files(part, shape, n_docs).items()})
        return {s: path / f"{s}.txt" for s in SPLITS}


def _digest(spec: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()[:16]

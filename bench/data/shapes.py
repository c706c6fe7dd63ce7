"""The shape of a fold (queries, documents, list lengths, features, bytes), before and after ``prepare``.

What a job costs follows from the shape of the fold it reads (:mod:`bench.costs`), and the
cluster requests of the workflow follow from those costs, so the shape is needed before the
fold exists (``ltr-bench plan`` before launch) and exactly once it does. :func:`fold_shape`
takes the best source there is and says which in :attr:`FoldShape.origin`:

``prepared``
    the prepared fold itself (``meta.json`` and each split's ``offsets.npy``): exact. Used only
    when its recorded options are the ones asked for (a stale fold is about to be rebuilt).
``generator``
    a synthetic dataset's generator options: the list lengths the generator will draw, drawn
    without generating anything else (:func:`bench.data.synthetic.split_lengths`): exact.
``published``
    the split sizes published with the dataset (the registry's ``split_sizes``). Another fold
    of a cross-validated collection gets Fold1's sizes (its folds rotate the same five parts,
    so split sizes differ between folds by a few percent): an estimate. A validation split
    carved from train (Istella) takes ``vali_fraction`` of the train queries, as ``prepare``
    does, and the same share of its documents (expected value). Per-query lengths are not
    published, so the longest list is unknown.

The ARF filter (option ``arf_filter``) keeps only queries with enough documents and positives
and cuts lists to ``arf_max_docs``: before the fold is prepared its shape is an upper bound
(every query kept, each list cut), marked ``exact=False``. A dataset without published sizes
(the LETOR collections, Yahoo! Set 2, MSLR-WEB10K, Istella-S) has no shape until it is
prepared: :func:`fold_shape` returns None.

>>> shape = fold_shape("synthetic", "Fold1", {"n_queries": 4, "list_length": [2, 5], "n_features": 3})
>>> shape.origin, shape.splits["train"].n_queries, shape.n_features
('generator', 4, 3)
>>> fold_shape("mslr-web30k", "Fold1", {}).splits["vali"].n_docs
747218
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.data.registry import REGISTRY, Dataset

SPLITS = ("train", "vali", "test")
FEATURE_BYTES = 4  # float32 features, as prepare writes them (bench.data.prepared)
LABEL_BYTES = 4  # float32 labels
INDEX_BYTES = 8  # int64 qids and offsets


@dataclass(frozen=True)
class SplitShape:
    """One split: query and document counts, and the per-query list lengths when known."""

    n_queries: int
    n_docs: int
    max_list: int | None = None  # the longest query; None when not known before prepare
    lengths: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, lengths: np.ndarray) -> SplitShape:
        lengths = np.asarray(lengths, dtype=np.int64)
        return cls(int(lengths.size), int(lengths.sum()), int(lengths.max()) if lengths.size else 0, lengths)

    @property
    def mean_list(self) -> float:
        return self.n_docs / max(self.n_queries, 1)

    def docs_cut(self, list_size: int | None) -> int:
        """Documents left when each query is cut to ``list_size`` (None: all); without the
        lengths, the bound ``min(n_docs, n_queries * list_size)``."""
        if list_size is None:
            return self.n_docs
        if self.lengths is not None:
            return int(np.minimum(self.lengths, list_size).sum())
        return min(self.n_docs, self.n_queries * int(list_size))


@dataclass(frozen=True)
class FoldShape:
    """A fold's splits and feature count, where they come from, and the prepared arrays' size."""

    n_features: int
    splits: dict[str, SplitShape]
    origin: str  # prepared | generator | published
    exact: bool = True  # False: an estimate or an upper bound (see note)
    note: str = ""

    @property
    def n_docs(self) -> int:
        return sum(s.n_docs for s in self.splits.values())

    @property
    def nbytes(self) -> int:
        """Bytes of the prepared arrays (features, labels, qids, offsets of every split)."""
        return sum(s.n_docs * (self.n_features * FEATURE_BYTES + LABEL_BYTES) + (2 * s.n_queries + 1) * INDEX_BYTES
                   for s in self.splits.values())

    def split_bytes(self, split: str) -> int:
        s = self.splits[split]
        return s.n_docs * (self.n_features * FEATURE_BYTES + LABEL_BYTES) + (2 * s.n_queries + 1) * INDEX_BYTES

    @property
    def run_mapped_bytes(self) -> int:
        """Bytes a neural run holds mapped at once: train + vali while it trains, vali + test once
        it has released the training split to score the test split (the larger of the two)."""
        return self.split_bytes("vali") + max(self.split_bytes("train"), self.split_bytes("test"))


def fold_shape(source: str, fold: str, options: dict | None, prepared_dir: str | os.PathLike | None = None,
               registry: dict[str, Dataset] | None = None) -> FoldShape | None:
    """The shape of ``fold`` of dataset ``source`` prepared with ``options`` (see the module
    docstring for the sources, in order); None when it cannot be known before prepare."""
    registry = REGISTRY if registry is None else registry
    entry = registry.get(source)
    synthetic = bool(entry is not None and entry.synthetic)
    from bench.data.prepare import (
        resolve_options,  # light: the parser is imported only to parse
    )

    resolved = resolve_options(options, synthetic)
    if prepared_dir is not None:
        shape = prepared_shape(prepared_dir, resolved)
        if shape is not None:
            return shape
    if synthetic:
        return _generator_shape(fold, resolved)
    if entry is None:
        return None
    return _published_shape(entry, fold, resolved)


def prepared_shape(path: str | os.PathLike, resolved_options: dict | None = None) -> FoldShape | None:
    """The exact shape of a prepared fold; None when it is absent, unreadable or was prepared
    with other options than ``resolved_options`` (when given)."""
    path = Path(path)
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        if resolved_options is not None and meta.get("options") != json.loads(json.dumps(resolved_options)):
            return None
        splits = {s: SplitShape.of(np.diff(np.load(path / s / "offsets.npy"))) for s in SPLITS}
        return FoldShape(int(meta["n_features"]), splits, "prepared")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _generator_shape(fold: str, o: dict) -> FoldShape:
    from bench.data.prepare import synthetic_draws
    from bench.data.synthetic import PRESETS, split_lengths

    draws = synthetic_draws(fold, o)
    preset = PRESETS.get(o["preset"] or "", {})
    n_features = draws["train"].get("n_features", preset.get("n_features"))
    splits = {s: SplitShape.of(split_lengths(**kwargs)) for s, kwargs in draws.items()}
    return _arf_bound(FoldShape(int(n_features), splits, "generator"), o)


def _published_shape(entry: Dataset, fold: str, o: dict) -> FoldShape | None:
    sizes = entry.split_sizes.get(fold)
    note = ""
    if sizes is None and entry.split_sizes.get("Fold1") and fold in entry.folds:
        sizes, note = entry.split_sizes["Fold1"], f"{fold} assumed the size of Fold1 (published for Fold1 only)"
    if sizes is None or entry.n_features is None:
        return None
    splits = {s: SplitShape(*sizes[s]) for s in sizes}
    if "vali" not in splits:  # carved from train by prepare (vali_fraction of the queries)
        q, d = sizes["train"]
        n_vali = int(round(o["vali_fraction"] * q))
        d_vali = int(round(d * n_vali / q))
        splits["train"], splits["vali"] = SplitShape(q - n_vali, d - d_vali), SplitShape(n_vali, d_vali)
        note = "; ".join(filter(None, [note, "validation carved from train: its documents are the expected share"]))
    shape = FoldShape(int(entry.n_features), {s: splits[s] for s in SPLITS}, "published", exact=not note, note=note)
    return _arf_bound(shape, o)


def _arf_bound(shape: FoldShape, o: dict) -> FoldShape:
    """With the ARF filter: every query kept and cut to ``arf_max_docs`` (an upper bound)."""
    if not o["arf_filter"]:
        return shape
    cap = int(o["arf_max_docs"])
    splits = {}
    for name, s in shape.splits.items():
        if name not in o["arf_splits"]:
            splits[name] = s
            continue
        lengths = None if s.lengths is None else np.minimum(s.lengths, cap)
        splits[name] = SplitShape(s.n_queries, s.docs_cut(cap), cap, lengths)
    note = "; ".join(filter(None, [shape.note, "ARF filter: upper bound (every query kept, lists cut to "
                                                f"{cap})"]))
    return FoldShape(shape.n_features, splits, shape.origin, exact=False, note=note)

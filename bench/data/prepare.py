"""Prepare one fold: parse, filter, split, normalise, and cache as memory-mappable arrays.

Layout written (atomically, as one directory) to ``out``::

    meta.json                 dataset, fold, n_features, per-split n_docs / n_queries, options,
                              train feature statistics, source checksums, cache_key, fingerprint
    <split>/features.npy      float32 [N, F]       for split in train, vali, test
    <split>/labels.npy        float32 [N]
    <split>/qids.npy          int64 [Q]            one per query
    <split>/offsets.npy       int64 [Q + 1]        query q is rows offsets[q]:offsets[q + 1]

``fingerprint`` = sha256 over, for each split and array in the order above, the array's name,
dtype, shape and bytes. ``cache_key`` = sha256 of (prepare format version, dataset, fold,
source sha256s or generator parameters, resolved options): a second call with the same key
only opens the arrays (milliseconds); any change rebuilds. A half-written directory is never
seen under ``out`` (temporary sibling, renamed when complete).

Options (``--options`` JSON object; every key with its default is recorded in
``meta.json["options"]``; unknown keys are an error):

``normalize`` (``"none"``)
    ``none``; ``zscore`` (``(x - mean) / std`` with train statistics, std 0 -> 1);
    ``log1p_zscore`` (allRank's MSLR recipe: ``log1p`` on the ``log1p_columns``, then z-score;
    values below 0 in those columns, absent from train, are clamped to 0 first);
    ``signlog1p`` (``sign(x) log1p(|x|)`` on all features, Qin et al. 2021, no z-score);
    ``query_minmax`` (per query and feature ``(x - min) / (max - min)``, 0 where max = min).
``log1p_columns`` (``"auto"``)
    1-based feature indices for ``log1p_zscore``, or ``"auto"``: the non-negative heavy-tailed
    train columns, i.e. min >= 0, max > 1 and skewness > 1.
``clip`` (``null``)
    a positive number ``c``: features are clipped to ``[-c, c]`` right after parsing, so
    Istella's DBL_MAX sentinel (``inf`` in float32) becomes ``c``. Normalising non-finite
    features without ``clip`` is an error.
``null_value`` (``0.0``)
    the value of a ``NULL`` feature (LETOR 3.0 ``Feature_null``); ``"nan"`` keeps it missing.
``arf_filter`` (``false``), ``arf_min_docs`` (40), ``arf_max_docs`` (200),
``arf_min_positive`` (15), ``arf_replace`` (``true``), ``arf_splits`` (all three)
    ARF's public-benchmark preprocessing (Appendix B.2): drop queries with at most
    ``arf_min_docs`` documents; drop queries with fewer than ``arf_min_positive`` positive
    (label > 0) documents (Sec. 5.1: "each query has at least 15 positive documents"); cut
    queries longer than ``arf_max_docs`` to exactly ``arf_max_docs`` documents: first
    ``arf_min_positive`` distinct positives drawn without replacement, then the rest drawn
    from the whole query *with* replacement as the paper says (``arf_replace=false`` draws
    without), kept in file order. Applied to the ``arf_splits`` splits, after carving.
``vali_fraction`` (0.25)
    when the dataset has no validation file (Istella full), this fraction of the train
    queries, drawn with the seeded generator, becomes ``vali`` (0.25 of 80% = the 60/20/20
    split of NeuralNDCG). The chosen query ids are stored in ``vali/qids.npy``.
``seed`` (0)
    seeds carving and ARF sampling (``derive_seed(dataset, fold, purpose, seed)``) and, for
    ``synthetic``, the generator.

For ``synthetic`` the same object also carries the generator parameters of
:func:`bench.data.generate_synthetic`: ``preset``, ``n_queries`` (train), ``vali_queries``,
``test_queries`` (default: the preset's split sizes, else ``max(1, n_queries // 3)``),
``list_length``, ``n_features``, ``n_query_features``, ``phi``, ``psi``, ``psi_loc``, ``low``, ``high``,
``real_labels``, ``columns``, ``empty_fraction``, ``label_probs``. Each split is drawn with its
own seed ``derive_seed("synthetic", fold, split, seed)``; the label columns are shared through
``task_seed = derive_seed("synthetic", "task", seed)``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from bench.data import registry as reg
from bench.data.fileaccess import expect_folder, file_access
from bench.data.prepared import (  # re-exported: the reader lives apart (light imports)
    FORMAT_VERSION,
    SPLITS,
    PreparedFold,
    Split,
    _fingerprint,
    load_prepared,
    save_prepared,
)
from bench.data.synthetic import PRESETS, generate_synthetic
from bench.errors import ConfigError, IntegrityError
from bench.seeds import derive_seed

__all__ = ["DEFAULT_OPTIONS", "FORMAT_VERSION", "PreparedFold", "Split", "load_prepared",
           "prepare_fold", "resolve_options"]

NORMALIZE = ("none", "zscore", "log1p_zscore", "signlog1p", "query_minmax")

DEFAULT_OPTIONS: dict = {
    "normalize": "none", "log1p_columns": "auto", "clip": None, "null_value": 0.0,
    "arf_filter": False, "arf_min_docs": 40, "arf_max_docs": 200, "arf_min_positive": 15,
    "arf_replace": True, "arf_splits": list(SPLITS), "vali_fraction": 0.25, "seed": 0,
}
SYNTHETIC_OPTIONS: dict = {
    "preset": None, "n_queries": None, "vali_queries": None, "test_queries": None,
    "list_length": None, "n_features": None, "n_query_features": None, "phi": "normal",
    "psi": "normal", "psi_loc": 0.0, "low": 0.0, "high": 4.0, "real_labels": False, "columns": "shared",
    "empty_fraction": None, "label_probs": None,
}


def resolve_options(options: dict | None, synthetic: bool) -> dict:
    """Defaults filled in and every key checked; a bad one is :class:`ConfigError` (a
    ``ValueError``) naming the key, one line from ``ltr-bench prepare``."""
    options = dict(options or {})
    known = dict(DEFAULT_OPTIONS, **(SYNTHETIC_OPTIONS if synthetic else {}))
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"unknown option key(s) {unknown}; known: {sorted(known)}")
    out = {**known, **options}
    if out["normalize"] not in NORMALIZE:
        raise ConfigError(f"option 'normalize' must be one of {list(NORMALIZE)}, got {out['normalize']!r}")
    if out["clip"] is not None and not (isinstance(out["clip"], (int, float)) and out["clip"] > 0):
        raise ConfigError(f"option 'clip' must be null or a positive number, got {out['clip']!r}")
    if not (isinstance(out["vali_fraction"], (int, float)) and 0 < out["vali_fraction"] < 1):
        raise ConfigError(f"option 'vali_fraction' must be in (0, 1), got {out['vali_fraction']!r}")
    nv = out["null_value"]
    if not (isinstance(nv, (int, float)) or nv == "nan"):
        raise ConfigError(f"option 'null_value' must be a number or \"nan\", got {nv!r}")
    lc = out["log1p_columns"]
    if lc != "auto" and not (isinstance(lc, list) and all(isinstance(i, int) and i >= 1 for i in lc)):
        raise ConfigError(f"option 'log1p_columns' must be \"auto\" or a list of 1-based feature "
                         f"indices, got {lc!r}")
    for key in ("arf_min_docs", "arf_max_docs", "arf_min_positive", "seed"):
        if not isinstance(out[key], int) or isinstance(out[key], bool) or out[key] < 0:
            raise ConfigError(f"option {key!r} must be a non-negative integer, got {out[key]!r}")
    for key in ("arf_filter", "arf_replace"):
        if not isinstance(out[key], bool):
            raise ConfigError(f"option {key!r} must be true or false, got {out[key]!r}")
    if not set(out["arf_splits"]) <= set(SPLITS):
        raise ConfigError(f"option 'arf_splits' must list splits of {list(SPLITS)}, got {out['arf_splits']!r}")
    if synthetic:
        if out["preset"] is not None and out["preset"] not in PRESETS:
            raise ConfigError(f"option 'preset': unknown {out['preset']!r}; known: {sorted(PRESETS)}")
        if out["preset"] is None:
            for key in ("n_queries", "list_length", "n_features"):
                if out[key] is None:
                    raise ConfigError(f"option {key!r} is required for synthetic data without a preset")
    return out


# ---------------------------------------------------------------- split building blocks

def _offsets(qid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Query ids and offsets of contiguous qid blocks."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]]) if qid.size else np.zeros(0, np.int64)
    return qid[starts].astype(np.int64), np.r_[starts, qid.size].astype(np.int64)


def _take_queries(split: dict, keep: np.ndarray) -> dict:
    """Rows of the queries where ``keep`` (bool [Q]) is True."""
    lengths = np.diff(split["offsets"])
    rows = np.repeat(keep, lengths)
    return _subset(split, np.flatnonzero(rows))


def _subset(split: dict, rows: np.ndarray) -> dict:
    """Split made of ``rows`` (ascending within query order); qids recomputed."""
    doc_qid = np.repeat(split["qids"], np.diff(split["offsets"]))[rows]
    qids, offsets = _offsets(doc_qid)
    return {"features": split["features"][rows], "labels": split["labels"][rows],
            "qids": qids, "offsets": offsets}


def _drop_cut_queries(splits: dict[str, dict]) -> dict[str, int]:
    """Drop the last query of every split read from a file (a registry entry with
    ``last_query_cut``: its files are the first lines of larger ones, so their last query may be
    cut short and cannot be checked); returns ``split -> the dropped query id``."""
    dropped = {}
    for split, sp in splits.items():
        if sp["qids"].size:
            dropped[split] = int(sp["qids"][-1])
            keep = np.ones(sp["qids"].size, dtype=bool)
            keep[-1] = False
            splits[split] = _take_queries(sp, keep)
    return dropped


def _carve(train: dict, fraction: float, rng: np.random.Generator) -> tuple[dict, dict]:
    nq = train["qids"].size
    n_vali = int(round(fraction * nq))
    is_vali = np.zeros(nq, dtype=bool)
    is_vali[rng.permutation(nq)[:n_vali]] = True
    return _take_queries(train, ~is_vali), _take_queries(train, is_vali)


def describe_arf_filter(options: dict | None, synthetic: bool = False) -> str:
    """The ARF filter of a dataset's preparation ``options`` (``synthetic``: the generator's options
    may be among them) in one sentence (captions), or "" when it is off.

    >>> print(*describe_arf_filter({"arf_filter": True}).replace(": ", ":; ").split("; "), sep=chr(10))
    ARF filter (Appendix B.2), on the train, vali and test splits:
    queries with more than 40 documents and at least 15 positives (label > 0) are kept
    a query longer than 200 is cut to 200:
    15 distinct positives, then 185 documents drawn from the whole query with replacement, in file order
    every list holds 41 to 200.
    """
    o = resolve_options(options or {}, synthetic)
    if not o["arf_filter"]:
        return ""
    k, cap = o["arf_min_positive"], o["arf_max_docs"]
    draw = "with" if o["arf_replace"] else "without"
    splits = ", ".join(o["arf_splits"][:-1]) + f" and {o['arf_splits'][-1]}" if len(o["arf_splits"]) > 1 \
        else o["arf_splits"][0]
    return (f"ARF filter (Appendix B.2), on the {splits} split{'s' if len(o['arf_splits']) > 1 else ''}: queries "
            f"with more than {o['arf_min_docs']} documents and at least {k} positives (label > 0) are kept; a query "
            f"longer than {cap} is cut to {cap}: {k} distinct positives, then {cap - k} documents drawn from the "
            f"whole query {draw} replacement, in file order; every list holds {o['arf_min_docs'] + 1} to {cap}.")


def _arf(split: dict, o: dict, rng: np.random.Generator) -> dict:
    """ARF filter (see module docstring); vectorised over queries."""
    lengths = np.diff(split["offsets"])
    nq = lengths.size
    qidx = np.repeat(np.arange(nq), lengths)
    pos = split["labels"] > 0
    n_pos = np.bincount(qidx, weights=pos, minlength=nq).astype(np.int64)
    keep = (lengths > o["arf_min_docs"]) & (n_pos >= o["arf_min_positive"])
    long = keep & (lengths > o["arf_max_docs"])
    rows = np.flatnonzero(np.repeat(keep & ~long, lengths))
    if long.any():
        k, cap = o["arf_min_positive"], o["arf_max_docs"]
        long_ids = np.flatnonzero(long)
        in_long = np.repeat(long, lengths)
        doc = np.flatnonzero(in_long)
        # distinct positives first: sort each long query's docs by (query, non-positive, random)
        order = np.lexsort((rng.random(doc.size), ~pos[doc], qidx[doc]))
        ranked = doc[order]
        first = np.r_[0, np.cumsum(lengths[long_ids])[:-1]]
        pos_take = ranked[(first[:, None] + np.arange(k)[None, :]).ravel()] if k else \
            np.zeros(0, np.int64)
        m = cap - k
        if o["arf_replace"]:
            draw = np.floor(rng.random((long_ids.size, m)) * lengths[long_ids][:, None]).astype(np.int64)
            rest = (split["offsets"][long_ids][:, None] + draw).ravel()
        else:
            # without replacement among the docs not already taken: next m of a fresh shuffle
            order2 = np.lexsort((rng.random(doc.size), qidx[doc]))
            shuffled = doc[order2]
            taken = np.zeros(split["labels"].size, dtype=bool)
            taken[pos_take] = True
            left = shuffled[~taken[shuffled]]
            left_len = lengths[long_ids] - k
            lf = np.r_[0, np.cumsum(left_len)[:-1]]
            rest = left[(lf[:, None] + np.arange(m)[None, :]).ravel()]
        rows = np.concatenate([rows, pos_take, rest])
        rows = rows[np.lexsort((rows, qidx[rows]))]  # file order within each query
    return _subset(split, rows)


def _moments(X: np.ndarray, block: int = 1 << 16) -> dict:
    """Per-column min, max, mean, std, skewness in float64, reading X in row blocks."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf columns give inf/nan stats
        return _moments_impl(X, block)


def _moments_impl(X: np.ndarray, block: int) -> dict:
    n, f = X.shape
    s1, s2, s3 = np.zeros(f), np.zeros(f), np.zeros(f)
    mn, mx = np.full(f, np.inf), np.full(f, -np.inf)
    for start in range(0, n, block):
        b = np.asarray(X[start:start + block], dtype=np.float64)
        s1 += b.sum(0)
        mn = np.minimum(mn, b.min(0))
        mx = np.maximum(mx, b.max(0))
    mean = s1 / max(n, 1)
    for start in range(0, n, block):
        d = np.asarray(X[start:start + block], dtype=np.float64) - mean
        s2 += (d * d).sum(0)
        s3 += (d * d * d).sum(0)
    var = s2 / max(n, 1)
    std = np.sqrt(var)
    with np.errstate(invalid="ignore", divide="ignore"):
        skew = np.where(std > 0, (s3 / max(n, 1)) / np.where(std > 0, std, 1) ** 3, 0.0)
    return {"min": mn, "max": mx, "mean": mean, "std": std, "skewness": skew}


def _normalize(splits: dict, o: dict, raw_stats: dict) -> dict:
    """Apply ``o["normalize"]`` in place; returns what was used (recorded in meta.json)."""
    how = o["normalize"]
    if how == "none":
        return {}
    for name, sp in splits.items():
        if not np.isfinite(sp["features"]).all():
            raise ConfigError(f"option 'normalize'={how!r}: split {name} has non-finite features "
                             f"(inf from DBL_MAX values, or NaN); set option 'clip' (e.g. 1e30) "
                             f"or 'null_value'")
    if how == "signlog1p":
        for sp in splits.values():
            x = sp["features"]
            np.copyto(x, np.sign(x) * np.log1p(np.abs(x)))
        return {}
    if how == "query_minmax":
        for sp in splits.values():
            x, off = sp["features"], sp["offsets"]
            if x.shape[0] == 0:
                continue
            lengths = np.diff(off)
            mn = np.minimum.reduceat(x, off[:-1], axis=0)
            rng_ = np.maximum.reduceat(x, off[:-1], axis=0) - mn
            x -= np.repeat(mn, lengths, axis=0)
            scale = np.repeat(np.where(rng_ > 0, rng_, 1.0).astype(np.float32), lengths, axis=0)
            x /= scale
        return {}
    used: dict = {}
    if how == "log1p_zscore":
        if o["log1p_columns"] == "auto":
            cols = np.flatnonzero((raw_stats["min"] >= 0) & (raw_stats["max"] > 1)
                                  & (raw_stats["skewness"] > 1))
        else:
            cols = np.asarray(o["log1p_columns"], dtype=np.int64) - 1
            n_f = splits["train"]["features"].shape[1]
            if cols.size and cols.max() >= n_f:
                raise ConfigError(f"option 'log1p_columns': index {int(cols.max()) + 1} > n_features={n_f}")
        for sp in splits.values():
            x = sp["features"]
            x[:, cols] = np.log1p(np.maximum(x[:, cols], 0.0))
        used["log1p_columns"] = (cols + 1).tolist()
    stats = _moments(splits["train"]["features"])
    std = np.where(stats["std"] > 0, stats["std"], 1.0)
    for sp in splits.values():
        x = sp["features"]
        x -= stats["mean"].astype(np.float32)
        x /= std.astype(np.float32)
    used.update(mean=stats["mean"].tolist(), std=std.tolist())
    return used


# ---------------------------------------------------------------- sources

def synthetic_draws(fold: str, o: dict) -> dict[str, dict]:
    """Split -> the keyword arguments of :func:`bench.data.generate_synthetic` for that split
    (``o``: resolved options); :mod:`bench.data.shapes` draws the same splits' list lengths."""
    gen_keys = ("list_length", "n_features", "n_query_features", "phi", "psi", "psi_loc", "low", "high",
                "real_labels", "columns", "empty_fraction", "label_probs")
    params = {k: o[k] for k in gen_keys if o[k] is not None}
    if isinstance(params.get("list_length"), list):
        params["list_length"] = tuple(params["list_length"])
    task_seed = derive_seed("synthetic", "task", o["seed"])
    out = {}
    for split, key in (("train", "n_queries"), ("vali", "vali_queries"), ("test", "test_queries")):
        n = o[key]
        if n is None and split != "train" and o["n_queries"] is not None:
            n = max(1, o["n_queries"] // 3)  # else the preset's size of this split
        out[split] = dict(n_queries=n, seed=derive_seed("synthetic", fold, split, o["seed"]), preset=o["preset"],
                          task_seed=task_seed, split=split, **params)
    return out


def _synthetic_splits(fold: str, o: dict) -> tuple[dict, dict]:
    out = {}
    for split, kwargs in synthetic_draws(fold, o).items():
        X, y, qid = generate_synthetic(**kwargs)
        qids, offsets = _offsets(qid)
        out[split] = {"features": X, "labels": y, "qids": qids, "offsets": offsets}
    return out, {"generator": {k: o[k] for k in ("preset", *SYNTHETIC_OPTIONS, "seed")}}


def _file_splits(ds: reg.Dataset | None, files: dict, o: dict) -> dict:
    from bench.data.svmlight import read_svmlight  # numba: only when a file is parsed

    null_value = float("nan") if o["null_value"] == "nan" else float(o["null_value"])
    n_features = ds.n_features if ds is not None else None
    label_range = ds.label_range if ds is not None else None
    parsed = {}
    for split, path in files.items():
        with file_access(path, "read"):  # unreadable, a folder: one line naming the file
            X, y, qid = read_svmlight(path, n_features, label_range=label_range, null_value=null_value)
        qids, offsets = _offsets(qid)
        parsed[split] = {"features": X, "labels": y, "qids": qids, "offsets": offsets}
    width = max(sp["features"].shape[1] for sp in parsed.values())
    for sp in parsed.values():  # files of an unregistered source may differ in width
        if sp["features"].shape[1] < width:
            sp["features"] = np.pad(sp["features"], ((0, 0), (0, width - sp["features"].shape[1])))
    return parsed


def _source_sha256(path: Path, checksum_cache) -> str:
    """The source file's sha256 (:func:`bench.data.fetch.source_sha256`); a file the system
    will not let us read is a one-line :class:`bench.errors.FileAccessError` naming it."""
    from bench.data.fetch import source_sha256  # only for file-based data

    with file_access(path, "read"):
        return source_sha256(path, checksum_cache)


def prepare_fold(source: str, fold: str, out: str | os.PathLike, options: dict | None = None, *,
                 raw_dir: str | os.PathLike = "resources/raw", registry: dict | None = None,
                 files: dict | None = None, force: bool = False,
                 checksum_cache: str | os.PathLike | None = None, log=print) -> PreparedFold:
    """Prepare ``fold`` of ``source`` into ``out`` (or reuse a matching cache); returns it.

    ``files`` (split -> path) bypasses the registry lookup of the split files (tests,
    benchmarks, hand-made files); ``source`` is then only a name unless it is registered.
    ``checksum_cache`` is the suite's folder caching the source files' sha256
    (:mod:`bench.data.checksum_cache`; the CLI passes ``results/cache/source-sha256``; None:
    hashed on every call). Nothing is written next to the source files.
    """
    registry = reg.REGISTRY if registry is None else registry
    out = Path(out)
    expect_folder(out)  # before minutes of parsing, not after
    ds = registry.get(source)
    if ds is None and files is None:
        raise KeyError(f"unknown dataset {source!r}; known: {', '.join(sorted(registry))}")
    synthetic = bool(ds is not None and ds.synthetic)
    o = resolve_options(options, synthetic)
    if ds is not None and not synthetic:
        fold = ds.canonical_fold(fold)
    if synthetic:
        sources = {"generator": {k: o[k] for k in SYNTHETIC_OPTIONS}, "seed": o["seed"]}
    else:
        from bench.data.fetch import find_split_file  # only for file-based data

        if files is None:
            files = {}
            for split in SPLITS:
                path = find_split_file(ds, raw_dir, fold, split)
                if path is not None:
                    files[split] = path
        files = {s: Path(p) for s, p in files.items()}
        if "train" not in files or "test" not in files:
            raise ConfigError(f"{source} {fold}: need at least train and test files, got {sorted(files)}")
        sources = {s: {"file": p.name, "sha256": _source_sha256(p, checksum_cache)} for s, p in files.items()}
    key_obj = {"format_version": FORMAT_VERSION, "dataset": source, "fold": fold,
               "sources": sources, "options": o}
    cache_key = hashlib.sha256(json.dumps(key_obj, sort_keys=True).encode()).hexdigest()
    if not force and (out / "meta.json").exists():
        try:
            cached = load_prepared(out)  # checks every file against its digest (bench.atomic.integrity)
            if cached.meta.get("cache_key") == cache_key:
                return cached
        except IntegrityError as exc:
            log(f"rebuilding {out}: {exc}")
        except (OSError, ValueError, KeyError):
            pass  # unreadable or stale cache: rebuild it
    t0 = time.perf_counter()
    splits = _synthetic_splits(fold, o)[0] if synthetic else _file_splits(ds, files, o)
    dropped = _drop_cut_queries(splits) if ds is not None and ds.last_query_cut else {}
    carved = False
    if "vali" not in splits:
        rng = np.random.default_rng(derive_seed(source, fold, "vali-carve", o["seed"]))
        splits["train"], splits["vali"] = _carve(splits["train"], o["vali_fraction"], rng)
        carved = True
    if o["clip"] is not None:
        for sp in splits.values():
            np.clip(sp["features"], -o["clip"], o["clip"], out=sp["features"])
    if o["arf_filter"]:
        for split in o["arf_splits"]:
            rng = np.random.default_rng(derive_seed(source, fold, "arf", split, o["seed"]))
            splits[split] = _arf(splits[split], o, rng)
    if splits["train"]["labels"].size == 0:
        raise ConfigError(f"{source} {fold}: no training documents left after filtering "
                         f"(options {o})")
    raw_stats = _moments(splits["train"]["features"])
    normalization = _normalize(splits, o, raw_stats)
    fingerprint = _fingerprint(splits)

    def _floats(a):
        return [float(v) for v in a]

    meta = {
        "format_version": FORMAT_VERSION, "dataset": source, "fold": fold,
        "n_features": int(splits["train"]["features"].shape[1]),
        "splits": {s: {"n_docs": int(sp["labels"].size), "n_queries": int(sp["qids"].size),
                       "n_empty_queries": int(np.sum(np.add.reduceat((sp["labels"] > 0).astype(np.int64),
                                                                     sp["offsets"][:-1]) == 0))
                       if sp["qids"].size else 0,
                       "label_counts": {str(k): int(v) for k, v in
                                        zip(*np.unique(sp["labels"], return_counts=True))}}
                   for s, sp in splits.items()},
        "options": o, "sources": sources, "vali_carved_from_train": carved,
        **({"last_query_dropped": dropped} if dropped else {}),
        "train_feature_stats": {k: _floats(v) for k, v in raw_stats.items()},
        "normalization": normalization, "cache_key": cache_key, "fingerprint": fingerprint,
        "prepare_seconds": round(time.perf_counter() - t0, 3),
    }
    with file_access(out, "write"):  # not writable, no space left: one line, nothing half-written
        save_prepared(out, splits, meta)
    counts = ", ".join(f"{s}: {meta['splits'][s]['n_queries']} queries" for s in SPLITS)
    log(f"prepared {source} {fold} -> {out} ({counts})")
    return load_prepared(out, check=False)  # just written, digests computed from these bytes


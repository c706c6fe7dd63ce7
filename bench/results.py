"""Run directories and per-query frames: one schema, one writer, one reader.

The readers: :func:`read_scores`, :func:`read_run_info`, :func:`read_curve` (a run's files)
and :func:`read_frames` (per-query frames).

A run directory (``results/runs/<experiment>/<dataset>/<fold>/<method>/seed<k>/``) holds
four result files and their ``digests.json``, written together by :func:`write_run` as one
atomic directory (so a failed run leaves nothing behind):

- ``scores.npy``: float32, one score per test document in test-split order. When the
  evaluation lists are sub-sampled (``train.test_list_size`` = ``L_test``), documents left
  out of every evaluation list hold NaN (they were not scored by the protocol).
- ``metrics.parquet``: :func:`bench.metrics.evaluate`'s per-query frame for the test split
  (query ids from the prepared ``qids``) with leading columns ``dataset, fold, method, seed``
  (:func:`label_metrics`).
- ``curve.csv``: one row per epoch (GBDT: per boosting round): ``epoch, step, lr, tau,
  train_loss, seconds`` and one ``vali_<metric>`` column per validation metric.
- ``run.json``: provenance, keys listed in :data:`RUN_JSON_KEYS`
  (:func:`bench.provenance.run_header` plus the trainer's device, timing and result).
- ``digests.json``: the XXH3-128 digest of each of the four (:mod:`bench.atomic.integrity`). Every
  reader here checks the file it reads against it first: a changed byte stops the reader
  with one line naming the file and the command that rebuilds the run.

Per-query and statistics frames written by :func:`write_frame`, and the JSON records of
:func:`write_record` (``results/selection/``), get a sidecar ``<file>.digest``, checked by
:func:`read_frame` / :func:`read_frames` / :func:`read_record` the same way.

A **per-query frame** (``ltr-bench evaluate``'s output, the frozen baselines, what
``ltr-bench stats`` reads) has the key columns :data:`KEY_COLUMNS`, one float column per
metric and one bool ``<metric>:dropped`` column per metric, a float ``<metric>:weight``
column for a metric its convention pools over queries (TF-Ranking's OPA and ARP), and
``convention`` (the evaluation convention its values follow, one of
:data:`bench.choices.CONVENTIONS`; for a LETOR convention, metrics its script does not define
follow ``default``, :func:`bench.metrics.metric_convention`). Test-list-size variants carry
``dataset = "<dataset>@Ltest=<L>"`` (:func:`dataset_key`).

How a per-query frame is averaged (its design checked, dropped queries excluded for every method,
seed means, pooled metrics' weights, the seed spread: :func:`check_design`, :func:`paired_values`,
:func:`seed_means`, :func:`std_over_seeds`) is stated once, in the last section of this module:
the statistics step (:mod:`bench.stats`) and the ranking across datasets (:mod:`bench.ranking`)
both average through it.

>>> dataset_key("mslr-web30k", 40), dataset_key("mslr-web30k", None)
('mslr-web30k@Ltest=40', 'mslr-web30k')
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.atomic import atomic_path
from bench.atomic.integrity import digests_size, verify, write_digests, write_sidecar
from bench.errors import UsageError
from bench.provenance import plain

# the training-only timing every run records (training_timing)
TRAINING_TIMING_KEYS = ("train_seconds", "train_docs", "train_docs_per_s", "seconds_per_epoch")
RUN_JSON_KEYS = (
    "kind",
    "dataset",
    "fold",
    "method",
    "seed",
    "config",
    "protocol",
    "protocol_hash",
    "dataset_fingerprint",
    "prepared_dir",
    "git_commit",
    "versions",
    "device",
    "device_name",
    "wall_time_s",
    *TRAINING_TIMING_KEYS,
    "peak_memory",
    "finished_at",
    "result",
)
# the columns that identify one row of a per-query frame, in their order in the files
KEY_COLUMNS = ("dataset", "fold", "seed", "method", "query")
# the evaluation convention of a per-query frame's metric values (bench.metrics.CONVENTIONS)
CONVENTION_COLUMN = "convention"
# per-query columns that are neither keys nor metrics
INFO_COLUMNS = ("l_test", CONVENTION_COLUMN)


# the four files of a run directory (see the module docstring)
SCORES_FILE = "scores.npy"
METRICS_FILE = "metrics.parquet"
CURVE_FILE = "curve.csv"
RUN_JSON_FILE = "run.json"
RUN_FILES = (SCORES_FILE, METRICS_FILE, CURVE_FILE, RUN_JSON_FILE)


def training_timing(seconds: float, docs: int, epochs: float | None) -> dict[str, Any]:
    """run.json's training-only timing, the same four keys for every run kind.

    ``train_seconds``: the fit alone (validation, checkpoints and the test pass excluded);
    ``train_docs``: the real documents the fit went through, once per pass over them;
    ``train_docs_per_s`` = docs / seconds; ``seconds_per_epoch`` = seconds / ``epochs``, an
    epoch being what the run kind's ``curve.csv`` counts as one (a pass over the training
    lists, a boosting round, an annealing stage). The last two are None when nothing ran, and
    ``seconds_per_epoch`` where a fit has no epochs (``epochs=None``: a closed-form solve).

    >>> training_timing(6.0, 3000, 3)
    {'train_seconds': 6.0, 'train_docs': 3000, 'train_docs_per_s': 500.0, 'seconds_per_epoch': 2.0}
    >>> training_timing(0.5, 100, None)["seconds_per_epoch"] is None
    True
    """
    ran = seconds > 0 and docs > 0
    values = (float(seconds), int(docs), docs / seconds if ran else None, seconds / epochs if ran and epochs else None)
    return dict(zip(TRAINING_TIMING_KEYS, values, strict=True))


def dataset_key(dataset: str, l_test: int | None) -> str:
    """The per-query (and statistics) ``dataset`` value of a test-list-size variant."""
    return dataset if not l_test else f"{dataset}@Ltest={int(l_test)}"


def label_metrics(frame: pd.DataFrame, *, dataset: str, fold: str, method: str, seed: int,
                  convention: str = "default") -> pd.DataFrame:
    """Prefix ``dataset, fold, method, seed`` columns to an ``evaluate`` frame and append its
    ``convention`` column."""
    ident = pd.DataFrame(
        {"dataset": dataset, "fold": fold, "method": method, "seed": np.int64(seed)}, index=frame.index
    )
    out = pd.concat([ident, frame], axis=1)
    out[CONVENTION_COLUMN] = convention
    return out


def write_run(
    out_dir: str | os.PathLike,
    *,
    scores: np.ndarray,
    metrics: pd.DataFrame,
    curve: pd.DataFrame,
    run_info: dict[str, Any],
) -> Path:
    """Write the four run files and their ``digests.json`` into ``out_dir`` as one atomic
    directory; return its path. The files are rendered in memory first, so a filesystem
    without room for them refuses the run before anything is written
    (:class:`bench.errors.DiskFull`, with the space needed and free)."""
    missing = [k for k in RUN_JSON_KEYS if k not in run_info]
    if missing:
        raise ValueError(f"run.json is missing keys {missing}")
    files = {
        SCORES_FILE: _npy_bytes(np.asarray(scores, dtype=np.float32)),
        METRICS_FILE: _parquet_bytes(metrics),
        CURVE_FILE: curve.to_csv(index=False).encode("utf-8"),
        RUN_JSON_FILE: (json.dumps(plain(run_info), indent=2, sort_keys=True, default=str) + "\n").encode("utf-8"),
    }
    out = Path(out_dir)
    sizes = [*map(len, files.values()), digests_size(RUN_FILES)]
    with atomic_path(out, is_dir=True, sizes=sizes) as tmp:  # refused first when it cannot fit
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        write_digests(tmp, RUN_FILES)
    return out


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _checked(path: Path) -> Path:
    """``path`` once it matches its digest (:func:`bench.atomic.integrity.verify`); a missing file
    is left to the reader's own error."""
    if path.is_file():
        verify(path)
    return path


def read_scores(run_dir: str | os.PathLike) -> np.ndarray:
    """A run's ``scores.npy``: float32, one score per test document (NaN: not scored)."""
    return np.load(_checked(Path(run_dir) / SCORES_FILE))


def read_run_info(run_dir: str | os.PathLike) -> dict[str, Any]:
    """A run's ``run.json`` (keys :data:`RUN_JSON_KEYS`)."""
    return json.loads(_checked(Path(run_dir) / RUN_JSON_FILE).read_text(encoding="utf-8"))


def read_curve(run_dir: str | os.PathLike) -> pd.DataFrame:
    """A run's ``curve.csv``: one row per epoch (GBDT: per boosting round)."""
    return pd.read_csv(_checked(Path(run_dir) / CURVE_FILE))


def read_metrics(run_dir: str | os.PathLike) -> pd.DataFrame:
    """A run's ``metrics.parquet``: the per-query frame of its test split."""
    return pd.read_parquet(_checked(Path(run_dir) / METRICS_FILE))


def write_frame(frame: pd.DataFrame, path: str | os.PathLike, *, digest: bool = True) -> None:
    """Write a per-query or statistics frame as parquet, atomically, with its sidecar digest
    ``<path>.digest`` (renamed into place just before the frame; ``digest=False``: none)."""
    data = _parquet_bytes(frame)
    with atomic_path(path, sizes=[len(data)]) as tmp:  # refused first when it cannot fit
        tmp.write_bytes(data)
        if digest:
            write_sidecar(path, tmp)


def read_frame(path: str | os.PathLike) -> pd.DataFrame:
    """One parquet frame, checked against its digest first (a run's ``metrics.parquet``
    against the run's ``digests.json``, any other against its ``<path>.digest``)."""
    return pd.read_parquet(_checked(Path(path)))


def write_record(obj: dict[str, Any], path: str | os.PathLike) -> None:
    """Write a small JSON record (a selection of ``ltr-bench select``) atomically, indented and
    key-sorted, with its sidecar digest ``<path>.digest`` like :func:`write_frame`."""
    data = (json.dumps(plain(obj), indent=2, sort_keys=True) + "\n").encode("utf-8")
    with atomic_path(path, sizes=[len(data)]) as tmp:
        tmp.write_bytes(data)
        write_sidecar(path, tmp)


def parse_spec(text: str, option: str = "--spec") -> dict[str, Any]:
    """A command's JSON object argument (the ``--spec`` the workflow writes), or a one-line
    :class:`~bench.errors.UsageError` naming the option.

    >>> parse_spec('{"a": 1}')
    {'a': 1}
    >>> parse_spec("[1]")
    Traceback (most recent call last):
    ...
    bench.errors.UsageError: --spec: expected a JSON object
    """
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{option}: not valid JSON ({exc})") from exc
    if not isinstance(spec, dict):
        raise UsageError(f"{option}: expected a JSON object")
    return spec


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    """A record of :func:`write_record`, checked against its digest first."""
    return json.loads(_checked(Path(path)).read_text(encoding="utf-8"))


def read_frames(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Concatenate parquet frames (per-query metrics of several runs, folds or methods),
    each checked against its digest first (:func:`read_frame`)."""
    return pd.concat([read_frame(p) for p in paths], ignore_index=True)


# ----------------------------------------------------------------------------- design and averages
# The per-query frames' design and averages: what the statistics step (:mod:`bench.stats`) and
# the ranking across datasets and folds (:mod:`bench.ranking`) average, in one place.
#
# A per-query frame (columns ``dataset, fold, seed, method, query``, one
# column per metric, ``<metric>:dropped``, sometimes ``<metric>:weight``) of one dataset (or one
# fold of it) is averaged by these rules:
#
# 1. **Design** (:func:`check_design`): no duplicate ``(dataset, fold, seed, method, query)`` row;
#    every method covers the same ``(fold, query)`` keys and, within a method, every seed covers
#    them all (else ``ValueError`` naming the method and the missing keys: never a silent inner join).
# 2. **Dropped queries**: a ``(fold, query)`` is excluded from a metric, for *every* method, when
#    any of its rows marks it dropped (``<metric>:dropped``); drops depend on the labels only, so
#    in practice all rows agree, and excluding the union keeps the pairing exact even if not.
# 3. **Means** (:func:`paired_values`, :func:`seed_means`): a method's per-query value is its mean
#    over seeds; each ``(method, seed)``'s mean is the plain mean over the kept queries, or, for a
#    **pooled** metric (a ``<metric>:weight`` column: TF-Ranking's OPA and ARP), the weighted mean
#    :math:`\sum_q w_q v_q / \sum_q w_q`, whose weights come from the labels only and so must be the
#    same for every method and seed (:func:`_pooling_weights`, else ``ValueError``).
# 4. **Seed spread** (:func:`std_over_seeds`): the sample standard deviation (ddof 1; 0 with one
#    seed) of a method's per-seed means.

#: two values closer than this are equal (pooling weights; the statistics' ties)
TIE_TOL = 1e-12


def _examples(keys) -> str:
    keys = sorted(keys, key=str)
    shown = ", ".join(f"(fold {f!r}, query {q!r})" for f, q in keys[:5])
    return shown + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def check_design(frame: pd.DataFrame, dataset) -> None:
    """Same (fold, query) keys for every method and every seed; no duplicate rows."""
    dup = frame.duplicated(list(KEY_COLUMNS))
    if dup.any():
        first = frame.loc[dup, list(KEY_COLUMNS)].iloc[0].to_dict()
        raise ValueError(f"dataset {dataset!r}: {int(dup.sum())} duplicate rows, e.g. {first}")
    n_keys = len(frame[["fold", "query"]].drop_duplicates())
    per_method = frame.groupby("method", sort=False)[["fold", "query"]].apply(
        lambda f: len(f.drop_duplicates()))
    for method, count in per_method.items():
        if count < n_keys:  # error path: name the missing keys
            all_keys = set(zip(frame["fold"], frame["query"]))
            mf = frame[frame["method"] == method]
            lacking = all_keys - set(zip(mf["fold"], mf["query"]))
            raise ValueError(
                f"dataset {dataset!r}: method {method!r} lacks {len(lacking)} of the "
                f"{n_keys} test queries that other methods have: {_examples(lacking)}; "
                "every method must be evaluated on the same queries"
            )
    sizes = frame.groupby(["method", "seed"], sort=False).size()
    for (method, s), size in sizes.items():
        if size != n_keys:
            mf = frame[frame["method"] == method]
            sf = mf[mf["seed"] == s]
            lacking = set(zip(mf["fold"], mf["query"])) - set(zip(sf["fold"], sf["query"]))
            raise ValueError(
                f"dataset {dataset!r}: method {method!r} seed {s!r} lacks queries "
                f"{_examples(lacking)} that its other seeds "
                f"({sorted(map(str, pd.unique(mf['seed'])))}) have"
            )


def paired_values(frame: pd.DataFrame, dataset, metric: str, methods: Sequence[str]):
    """Rules 1-3 of this section (design and averages): ``(wide, per_seed, weights)`` -- per-query values
    averaged over seeds (rows ``(fold, query)`` kept for every method, columns ``methods``), the
    (pooled, for a pooled metric) mean of each ``(method, seed)``, and a pooled metric's
    per-query weights (None: a plain mean)."""
    values = frame[metric].to_numpy(dtype=np.float64)
    if np.isnan(values).any():
        bad = frame.loc[np.isnan(values), ["method", "fold", "seed", "query"]].iloc[0].to_dict()
        raise ValueError(f"dataset {dataset!r}, metric {metric!r}: NaN value at {bad}")
    drop_col = metric + ":dropped"
    kept = frame
    if drop_col in frame.columns:
        # a key dropped by any row is dropped for every method (pairing stays exact)
        dropped = frame.groupby(["fold", "query"], sort=False)[drop_col].any()
        dropped_keys = dropped.index[dropped.to_numpy(bool)]
        if len(dropped_keys):
            keys = pd.MultiIndex.from_arrays([frame["fold"], frame["query"]])
            kept = frame[~keys.isin(dropped_keys)]
    if kept.empty:
        raise ValueError(f"dataset {dataset!r}, metric {metric!r}: every query is dropped")
    # per-query values averaged over seeds: rows (fold, query), columns methods
    wide = kept.groupby(["fold", "query", "method"], sort=True)[metric].mean().unstack("method")
    wide = wide[list(methods)]
    weights = _pooling_weights(kept, dataset, metric, wide.index)
    if weights is None:
        per_seed = kept.groupby(["method", "seed"], sort=False)[metric].mean()
    else:  # each seed's pooled mean
        row_w = _aligned(kept, wide.index, weights)
        sums = kept.assign(_wv=kept[metric].to_numpy() * row_w, _w=row_w).groupby(["method", "seed"], sort=False)
        per_seed = sums["_wv"].sum() / sums["_w"].sum()
    return wide, per_seed, weights


def _pooling_weights(kept: pd.DataFrame, dataset, metric: str, keys: pd.Index) -> np.ndarray | None:
    """A pooled metric's per-query weights, aligned to ``keys`` (None: a plain mean).

    A weight is a function of the query's labels (OPA: its pairs with different labels; ARP:
    its label sum), so every method and seed must carry the same weight for a query; a
    frame where they differ was not graded from the same test split and is refused.
    """
    from bench.metrics import weight_column  # (bench.metrics imports SciPy: only when averaging)

    column = weight_column(metric)
    if column not in kept.columns:
        return None
    spread = kept.groupby(["fold", "query"], sort=True)[column].agg(["min", "max"])
    differ = spread.index[(spread["max"] - spread["min"]).abs().to_numpy() > TIE_TOL * spread["max"].abs().clip(lower=1)]
    if len(differ):
        raise ValueError(f"dataset {dataset!r}, metric {metric!r}: the pooling weight ({column}) differs between "
                         f"methods or seeds at {_examples(list(differ))}; the per-query frames were not graded on "
                         "the same test lists")
    weights = spread["min"].reindex(keys).to_numpy(np.float64)
    if np.isnan(weights).any() or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"dataset {dataset!r}, metric {metric!r}: {column} must be finite, >= 0 and not all 0")
    return weights


def _aligned(frame: pd.DataFrame, keys: pd.Index, values: np.ndarray) -> np.ndarray:
    """``values`` (one per ``(fold, query)`` key of ``keys``) for every row of ``frame``."""
    rows = pd.MultiIndex.from_arrays([frame["fold"], frame["query"]])
    return values[keys.get_indexer(rows)]


def seed_means(frame: pd.DataFrame, dataset, metric: str, methods: Sequence[str]) -> pd.Series:
    r"""Each ``(method, seed)``'s mean of ``metric`` over ``frame`` (the per-query rows of one
    dataset, or of one fold of it), exactly as :func:`bench.stats.significance` averages them: the design
    checked (every method and seed on the same ``(fold, query)`` keys), a query dropped for any
    row dropped for every method (step 1), and a pooled metric's weighted mean
    :math:`\sum_q w_q v_q / \sum_q w_q` ("Pooled metrics"). The cross-dataset ranking
    (:mod:`bench.ranking`) reads its per-block means here, so that a mean is never computed
    two ways.

    >>> pq = pd.DataFrame({"dataset": "d", "fold": 1, "seed": [0, 0, 1, 1], "query": [0, 1] * 2,
    ...                    "method": "a", "mrr": [1.0, 0.5, 0.5, 0.5], "mrr:dropped": [False, True] * 2})
    >>> seed_means(pq, "d", "mrr", ["a"]).to_dict()  # query 1 dropped: each seed's mean of query 0
    {('a', 0): 1.0, ('a', 1): 0.5}
    """
    check_design(frame, dataset)
    return paired_values(frame, dataset, metric, methods)[1]


def std_over_seeds(per_seed: pd.Series, method: str) -> tuple[float, int]:
    """Sample standard deviation (ddof 1; 0 with one seed) of a method's per-seed means (a
    :func:`seed_means` series), and its seed count.

    >>> std_over_seeds(pd.Series({("a", 0): 1.0, ("a", 1): 0.5}), "a")
    (0.3535533905932738, 2)
    """
    seed_means = per_seed.loc[method].to_numpy()
    return (float(np.std(seed_means, ddof=1)) if len(seed_means) > 1 else 0.0), len(seed_means)

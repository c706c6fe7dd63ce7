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
- ``digests.json``: the XXH3-128 digest of each of the four (:mod:`bench.data.integrity`). Every
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

>>> dataset_key("mslr-web30k", 40), dataset_key("mslr-web30k", None)
('mslr-web30k@Ltest=40', 'mslr-web30k')
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.atomic import atomic_path
from bench.data.integrity import digests_size, verify, write_digests, write_sidecar
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
    """``path`` once it matches its digest (:func:`bench.data.integrity.verify`); a missing file
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


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    """A record of :func:`write_record`, checked against its digest first."""
    return json.loads(_checked(Path(path)).read_text(encoding="utf-8"))


def read_frames(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Concatenate parquet frames (per-query metrics of several runs, folds or methods),
    each checked against its digest first (:func:`read_frame`)."""
    return pd.concat([read_frame(p) for p in paths], ignore_index=True)

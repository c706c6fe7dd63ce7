r"""Per-query evaluation of finished runs: the tidy frame the statistics step reads.

``ltr-bench evaluate`` recomputes per-query metrics from each run's ``scores.npy`` and the
prepared test split, through :func:`bench.metrics.evaluate` (the suite's one metric code
path), for exactly the metrics a table or figure needs. Keeping this a separate step means
a table can ask for metrics (e.g. a Recall@m@k grid) the run did not store, and runs shared
by several tables are trained once.

Test list size (PiRank Table 3): with ``list_sizes`` = ``[L, ...]`` each query of the test
split is cut to a seeded random subset of at most ``L`` documents (their original order
kept), drawn by :func:`bench.data.sublists.seeded_sublists` from ``(dataset, fold, "test",
"eval_lists", L)``; the draw is the same for every method and seed, so paired tests stay
paired. The rows of size ``L`` carry ``dataset = "<dataset>@Ltest=<L>"``
(:func:`bench.results.dataset_key`), so the statistics step treats each test size as its
own comparison.

Output columns: the per-query key columns :data:`bench.results.KEY_COLUMNS` (``dataset,
fold, seed, method, query``), one float column per metric and one bool
``<metric>:dropped`` column per metric, plus ``l_test`` (0 = full lists).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.data.sublists import seeded_sublists
from bench.errors import UsageError
from bench.results import dataset_key, write_frame


def evaluate_runs(
    prepared_dir: str | Path,
    runs: list[dict[str, Any]],
    metrics: list[str],
    *,
    dataset: str,
    fold: str,
    list_sizes: list[int] | None = None,
    empty_query: str = "one",
    ties: str = "stable",
) -> pd.DataFrame:
    """Evaluate ``runs`` (dicts with ``method``, ``seed``, ``dir``) on one prepared test split."""
    from bench.data import load_prepared
    from bench.metrics import evaluate

    test = load_prepared(prepared_dir).splits["test"]
    labels = np.asarray(test.labels, dtype=np.float64)
    offsets = np.asarray(test.offsets, dtype=np.int64)
    qids = np.asarray(test.qids, dtype=np.int64)
    variants = [(None, np.arange(labels.size), offsets)]
    if list_sizes:
        variants = [(size, *seeded_sublists(offsets, size, dataset=dataset, fold=fold, split="test"))
                    for size in list_sizes]
    frames = []
    for run in runs:
        path = Path(run["dir"]) / "scores.npy"
        scores = np.load(path)
        if scores.shape != labels.shape:
            raise ValueError(f"{path}: {scores.shape[0]} scores for {labels.size} test documents of {prepared_dir}")
        for size, index, sub_offsets in variants:
            picked = scores[index].astype(np.float64)
            if not np.all(np.isfinite(picked)):
                bad = int(np.flatnonzero(~np.isfinite(picked))[0])
                raise ValueError(
                    f"{path}: non-finite score for test document {int(index[bad])} (trained with "
                    "train.test_list_size? evaluate full-list runs and set list_sizes here instead)"
                )
            frame = evaluate(picked, labels[index], sub_offsets, metrics, empty_query=empty_query, ties=ties,
                             query_ids=qids)
            ident = pd.DataFrame({"dataset": dataset_key(dataset, size), "fold": fold,
                                  "seed": np.int64(run["seed"]), "method": run["method"]}, index=frame.index)
            frame = pd.concat([ident, frame], axis=1)
            frame["l_test"] = np.int64(size or 0)
            frames.append(frame)
    if not frames:
        raise ValueError("no runs to evaluate")
    return pd.concat(frames, ignore_index=True)


def _cli(args) -> int:
    try:
        runs = json.loads(args.runs)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--runs: not valid JSON ({exc})") from exc
    if not isinstance(runs, list) or not all(isinstance(r, dict) and {"method", "seed", "dir"} <= set(r) for r in runs):
        raise UsageError('--runs: expected a JSON list of {"method": ..., "seed": ..., "dir": ...}')
    try:
        frame = evaluate_runs(args.prepared, runs, args.metrics, dataset=args.dataset, fold=args.fold,
                              list_sizes=args.list_sizes, empty_query=args.empty_query, ties=args.ties)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    write_frame(frame, args.out)
    print(f"{args.out}: {len(frame)} rows ({len(runs)} runs x {len(args.list_sizes or [0])} list sizes)")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench evaluate``."""
    p = subparsers.add_parser("evaluate", help="per-query metrics of finished runs on one prepared test split")
    p.add_argument("--prepared", required=True, help="prepared fold directory")
    p.add_argument("--dataset", required=True, help="dataset name written into the frame")
    p.add_argument("--fold", required=True)
    p.add_argument("--runs", required=True, help='JSON list of {"method", "seed", "dir"}')
    p.add_argument("--metrics", required=True, nargs="+")
    p.add_argument("--list-sizes", type=int, nargs="*", default=[], help="test list sizes L_test (default: full)")
    p.add_argument("--empty-query", default="one", choices=("one", "zero", "drop"))
    p.add_argument("--ties", default="stable", choices=("stable", "expected"))
    p.add_argument("--out", required=True, help="output parquet")
    p.set_defaults(func=_cli)

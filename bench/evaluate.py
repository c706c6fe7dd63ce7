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

Evaluation convention: ``convention`` (the table's or the dataset's,
:func:`bench.config.plan.evaluation_convention`) grades each metric through
:func:`bench.metrics.evaluate_with_convention` -- LETOR datasets by their official script's
rules, a table graded as a paper's tool by that tool's (``tfranking``, ``allrank``), the
others the default way.

Output columns: the per-query key columns :data:`bench.results.KEY_COLUMNS` (``dataset,
fold, seed, method, query``), one float column per metric and one bool
``<metric>:dropped`` column per metric, a float ``<metric>:weight`` column per metric the
convention pools over queries (``tfranking``'s OPA and ARP), plus ``l_test`` (0 = full
lists) and ``convention``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.choices import CONVENTIONS, EMPTY_QUERY_CHOICES, TIES_CHOICES
from bench.config.selection import keep_chosen
from bench.data.sublists import seeded_sublists
from bench.errors import IntegrityError, UsageError
from bench.results import (
    CONVENTION_COLUMN,
    SCORES_FILE,
    dataset_key,
    read_record,
    read_run_info,
    read_scores,
    write_frame,
)

# the prepared files an evaluation reads (and so checks against the fold's digests.json)
TEST_ARRAYS = ("test/labels", "test/qids", "test/offsets")


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
    convention: str = "default",
) -> pd.DataFrame:
    """Evaluate ``runs`` (dicts with ``method``, ``seed``, ``dir``) on one prepared test split."""
    from bench.data import load_prepared
    from bench.metrics import evaluate_with_convention

    # only the files read here are checked against their digests (never the fold's features)
    test = load_prepared(prepared_dir, check=TEST_ARRAYS).splits["test"]
    labels = np.asarray(test.labels, dtype=np.float64)
    offsets = np.asarray(test.offsets, dtype=np.int64)
    qids = np.asarray(test.qids, dtype=np.int64)
    variants = [(None, np.arange(labels.size), offsets)]
    if list_sizes:
        variants = [(size, *seeded_sublists(offsets, size, dataset=dataset, fold=fold, split="test"))
                    for size in list_sizes]
    frames = []
    for run in runs:
        path = Path(run["dir"]) / SCORES_FILE
        scores = read_scores(run["dir"])
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
            frame = evaluate_with_convention(picked, labels[index], sub_offsets, metrics, convention,
                                             empty_query=empty_query, ties=ties, query_ids=qids)
            ident = pd.DataFrame({"dataset": dataset_key(dataset, size), "fold": fold,
                                  "seed": np.int64(run["seed"]), "method": run["method"]}, index=frame.index)
            frame = pd.concat([ident, frame], axis=1)
            frame["l_test"] = np.int64(size or 0)
            frame[CONVENTION_COLUMN] = convention
            frames.append(frame)
    if not frames:
        raise ValueError("no runs to evaluate")
    return pd.concat(frames, ignore_index=True)


def export_scores(run_dir: str | Path, out: str | Path, *, prepared_dir: str | Path | None = None) -> int:
    """Write a run's test scores as a LETOR score file; returns the number of lines.

    One score per line, in the order of the prepared test split, which for a file-based
    dataset is the order of the test file's data lines: ``prepare`` parses the file in order
    (a qid may not reappear after another query), never reorders the test split, and filters
    it only with ``arf_filter`` when ``arf_splits`` lists ``test`` -- then the documents no
    longer match the file and this fails naming those options. (Blank or comment-only lines,
    which the parser skips, get no score line; the official scripts reject such files anyway.) Each score is the float32 of
    ``scores.npy`` written as the shortest decimal that reads back as the same double
    (``repr``), so the official script (``perl Eval-Score-4.0.pl test.txt FILE out 1``) sees
    exactly the suite's scores and ties. ``prepared_dir`` defaults to the run's
    ``run.json["prepared_dir"]``; the prepared fold must still have the run's fingerprint.
    """
    from bench.atomic import atomic_path
    from bench.data import load_prepared

    run_dir = Path(run_dir)
    try:
        info = read_run_info(run_dir)
        scores = read_scores(run_dir)
    except IntegrityError:
        raise
    except (OSError, ValueError) as exc:
        raise UsageError(f"--run {run_dir}: not a finished run directory ({exc})") from exc
    prepared = load_prepared(prepared_dir if prepared_dir is not None else info["prepared_dir"], check=TEST_ARRAYS)
    if info.get("dataset_fingerprint") not in (None, prepared.fingerprint):
        raise UsageError(f"--prepared {prepared.path}: its fingerprint differs from the run's "
                         f"(run.json dataset_fingerprint); the fold was re-prepared since the run")
    options = prepared.meta.get("options", {})
    if options.get("arf_filter") and "test" in options.get("arf_splits", ()):
        raise UsageError(
            f"{prepared.path}: prepared with option arf_filter on the test split (arf_splits lists 'test'), "
            "which drops and resamples test documents, so the scores cannot be put in the test file's line "
            "order; prepare the fold without arf_filter (or with arf_splits not listing test) and re-run"
        )
    n_docs = prepared.splits["test"].n_docs
    if scores.shape != (n_docs,):
        raise UsageError(f"{run_dir / SCORES_FILE}: {scores.size} scores for the {n_docs} test documents of "
                         f"{prepared.path}")
    missing = np.flatnonzero(~np.isfinite(scores))
    if missing.size:
        raise UsageError(
            f"{run_dir / SCORES_FILE}: {missing.size} test documents have no finite score (first: document "
            f"{int(missing[0])}); a run trained with train.test_list_size scores only sub-sampled lists -- "
            "export a full-list run"
        )
    text = "".join(f"{float(v)!r}\n" for v in scores.astype(np.float32))
    with atomic_path(out) as tmp:
        Path(tmp).write_text(text, encoding="ascii")
    return n_docs


def _cli_export(args) -> int:
    n = export_scores(args.run, args.out, prepared_dir=args.prepared)
    print(f"{args.out}: {n} scores (one per line, in the test file's line order)")
    return 0


def _cli(args) -> int:
    try:
        runs = json.loads(args.runs)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--runs: not valid JSON ({exc})") from exc
    if not isinstance(runs, list) or not all(isinstance(r, dict) and {"method", "seed", "dir"} <= set(r) for r in runs):
        raise UsageError('--runs: expected a JSON list of {"method": ..., "seed": ..., "dir": ...}')
    try:
        runs = keep_chosen(runs, [read_record(path) for path in args.selection])  # selected on validation
        frame = evaluate_runs(args.prepared, runs, args.metrics, dataset=args.dataset, fold=args.fold,
                              list_sizes=args.list_sizes, empty_query=args.empty_query, ties=args.ties,
                              convention=args.convention)
    except IntegrityError:
        raise
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    write_frame(frame, args.out)
    print(f"{args.out}: {len(frame)} rows ({len(runs)} runs x {len(args.list_sizes or [0])} list sizes)")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench evaluate`` and ``ltr-bench export-scores``."""
    p = subparsers.add_parser("evaluate", help="per-query metrics of finished runs on one prepared test split")
    p.add_argument("--prepared", required=True, help="prepared fold directory")
    p.add_argument("--dataset", required=True, help="dataset name written into the frame")
    p.add_argument("--fold", required=True)
    p.add_argument("--runs", required=True, help='JSON list of {"method", "seed", "dir"}')
    p.add_argument("--metrics", required=True, nargs="+")
    p.add_argument("--list-sizes", type=int, nargs="*", default=[], help="test list sizes L_test (default: full)")
    p.add_argument("--empty-query", default="one", choices=EMPTY_QUERY_CHOICES)
    p.add_argument("--ties", default="stable", choices=TIES_CHOICES)
    p.add_argument("--convention", default="default", choices=CONVENTIONS,
                   help="evaluation convention (bench.metrics; letor3/letor4 = the official Eval-Score-3.0.pl / "
                        "Eval-Score-4.0.pl, tfranking = TF-Ranking's metrics, allrank = allRank's)")
    p.add_argument("--selection", nargs="*", default=[],
                   help="selection records (ltr-bench select): of a method selected on validation, only the "
                        "runs of its chosen grid point are evaluated")
    p.add_argument("--out", required=True, help="output parquet")
    p.set_defaults(func=_cli)
    e = subparsers.add_parser(
        "export-scores",
        help="write a run's test scores as a LETOR score file (one per line, test file order) for the "
             "official Eval-Score-3.0.pl / Eval-Score-4.0.pl",
    )
    e.add_argument("--run", required=True, help="run directory (results/runs/.../seed<k>)")
    e.add_argument("--prepared", default=None, help="prepared fold directory (default: run.json prepared_dir)")
    e.add_argument("--out", required=True, help="score file to write")
    e.set_defaults(func=_cli_export)

r"""The ``select`` stage: choose each selected method's grid point on validation, never on test.

``ltr-bench select --spec JSON --out results/selection/<table>/<dataset>/<fold>.json`` is given,
by :func:`bench.config.plan.select_spec`, every grid point of a table's selected methods
(:mod:`bench.config.selection`) with the run directory of each seed on one fold. For each
point it reads, from each run's ``run.json``, the validation value its early stopping kept:

.. math:: v_{p,s} = \text{result.best\_vali} \quad (\text{the run's}\ \texttt{early\_stopping\_metric}
          \text{ at the checkpoint it scored the test split with})

(a run that tested its last epoch or round, ``result.checkpoint: last`` -- ``train.checkpoint:
last``, or no best epoch to restore; ``restored_best: false`` in runs written before the option
was renamed -- scored the test split with its last weights: then the value is the last row's
``vali_<metric>`` in ``curve.csv``. A refit run, ``train.refit``, records its first fit's
validation: the refit sees no validation split). The chosen point maximises (for ARP: minimises) the mean over seeds
:math:`\bar v_p = \frac{1}{S}\sum_s v_{p,s}`; equal means go to the first point in grid order
(:func:`bench.config.selection.best_point`). The run's recorded ``early_stopping_metric`` must
be the selection metric, or the stage stops naming the run.

Nothing here opens a test split, a score file or a test metric: ``run.json``'s
``result.test_means`` is never read (``tests/test_selection.py`` permutes a fold's test
labels, retrains every point and finds every record unchanged, while a choice by the test
means changes). Selection is per fold, because one fold's validation split can be another
fold's test split (LETOR's five folds rotate): a mean over folds would read the test data of
some fold before its table is graded.

The record (:func:`bench.results.write_record`, with its digest) lists per method the metric,
its direction, the chosen point and every point's settings, run directories, per-seed values
and mean: what the evaluation keeps (:func:`bench.config.selection.keep_chosen`), the table's
caption names (:func:`bench.report.selection.caption_sentence`) and the selection table shows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.config.selection import best_point
from bench.errors import UsageError
from bench.metrics import higher_is_better
from bench.results import parse_spec, read_curve, read_run_info, write_record


def validation_value(run_dir: str | Path, metric: str) -> float:
    """The validation ``metric`` of the model a run scored its test split with (see the module
    docstring); a run that stopped early on another metric is refused."""
    result = read_run_info(run_dir)["result"]
    used = result.get("early_stopping_metric")
    if used != metric:
        raise UsageError(f"{run_dir}/run.json: the run kept its checkpoint by validation {used!r}, not the "
                         f"selection metric {metric!r}; its validation value cannot be compared")
    if result.get("checkpoint") == "last" or result.get("restored_best", True) is False:
        column = f"vali_{metric}"
        curve = read_curve(run_dir)
        if column not in curve.columns or curve.empty:
            raise UsageError(f"{run_dir}/curve.csv: no {column} column for the last epoch's validation value")
        return float(curve[column].iloc[-1])
    value = result.get("best_vali")
    return math.nan if value is None else float(value)


def choose(entry: dict[str, Any]) -> dict[str, Any]:
    """One method's choice: ``entry`` (``metric`` and ``points``, each with its run ``dirs``) with
    every point's per-seed validation values and mean, and the chosen point (the best mean; the
    first in order on a tie). What the ``select`` and the ``tune`` stages share."""
    metric = entry["metric"]
    points = []
    for point in entry["points"]:
        values = [validation_value(d, metric) for d in point["dirs"]]
        mean = math.fsum(values) / len(values) if values else math.nan
        points.append({**point, "values": values, "mean": mean})
    higher = higher_is_better(metric)
    chosen = points[best_point([p["values"] for p in points], higher_is_better=higher)]
    return {"metric": metric, "higher_is_better": higher, "chosen": chosen["name"],
            "chosen_label": chosen["label"], "chosen_settings": chosen["settings"], "points": points}


def select(spec: dict[str, Any]) -> dict[str, Any]:
    """The selection record of one fold (see the module docstring) from ``spec``
    (:func:`bench.config.plan.select_spec`)."""
    methods = {method: choose(entry) for method, entry in spec["methods"].items()}
    return {k: spec[k] for k in ("table", "dataset", "fold", "seeds")} | {"methods": methods}


def _cli(args) -> int:
    spec = parse_spec(args.spec)
    if not isinstance(spec.get("methods"), dict):
        raise UsageError("--spec: expected a JSON object with 'methods' (bench.config.plan.select_spec)")
    record = select(spec)
    write_record(record, args.out)
    for method, entry in record["methods"].items():
        print(f"{args.out}: {method}: {entry['chosen_label']} (validation {entry['metric']} "
              f"{next(p['mean'] for p in entry['points'] if p['name'] == entry['chosen']):.6f}, "
              f"best of {len(entry['points'])} points)")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench select``."""
    p = subparsers.add_parser("select", help="choose each selected method's grid point on validation (one fold)")
    p.add_argument("--spec", required=True, help="JSON: the grid points and their runs (bench.config.plan.select_spec)")
    p.add_argument("--out", required=True, help="results/selection/<table>/<dataset>/<fold>.json")
    p.set_defaults(func=_cli)

r"""The tuning stage: each tuned method's configuration chosen on the tuning fold's validation split.

A tuned method is two jobs per dataset (``workflows/tune.smk``; the commands live in
:mod:`bench.training.cli`, which trains; the choice and the chosen run config are here; the
third job, ``ltr-bench tuning-summary``, is a statistic and lives in :mod:`bench.stats`):

- ``ltr-bench tune --spec JSON --out results/tuning/<experiment>/<dataset>/<method>.json``: given
  by :func:`bench.config.plan.tune_spec` every configuration of one method
  (:mod:`bench.config.tuning`) with its run config and its runs on the tuning fold, one per
  tuning seed, it trains the runs not finished already, one after another, then (:func:`tune`)
  reads each run's kept validation value from ``run.json`` and keeps the configuration with the best
  mean over seeds, exactly as the ``select`` stage chooses a grid point
  (:func:`bench.selection.choose`: ties to the lower configuration number, so the default wins a
  tie; never a test split, a score file or a test metric). The record (written with its digest)
  adds the budget, the sampler, the method's search space and the **compute spent**: the sum of
  the runs' ``wall_time_s`` per device (``run.json`` ``device``), every configuration and seed
  counted, so compute parity between methods is visible beside the equal configuration count.
- ``ltr-bench tuned-runs --spec JSON --out results/tuning/<experiment>/<dataset>/<method>+tuned.json``:
  writes the run config of the chosen configuration (:func:`tuned_config`, renamed
  ``<method>+tuned``, to ``results/configs/<experiment>/<dataset>/<method>+tuned.json``; the spec,
  :func:`bench.config.plan.tuned_runs_spec`, carries every configuration's run config and the
  record says which one), trains it on every fold and seed the tuning did not that an evaluation
  reads, and writes the record naming those runs.

The choice never sees a test value: ``tests/test_tuning.py`` permutes the tuning fold's test
labels, retrains every configuration and finds every record unchanged.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.atomic import atomic_path
from bench.config.run import run_config_text
from bench.errors import UsageError
from bench.results import read_record, read_run_info
from bench.selection import choose

#: a tuning spec's point keys that say how to train the configuration (bench.config.plan.tune_spec),
#: left out of the record
TRAINING_KEYS = ("rule", "run_config")


def compute_seconds(dirs: list[str]) -> dict[str, float]:
    """Wall seconds of the runs in ``dirs`` per device kind (``cpu``, ``cuda``), from their ``run.json``."""
    out: dict[str, float] = {}
    for d in dirs:
        info = read_run_info(d)
        device = str(info.get("device") or "cpu").split(":")[0]
        out[device] = out.get(device, 0.0) + float(info.get("wall_time_s") or 0.0)
    return out


def tune(spec: dict[str, Any]) -> dict[str, Any]:
    """The tuning record of one method on one dataset (module docstring) from ``spec``."""
    if len(spec.get("methods", {})) != 1:
        raise UsageError("--spec: a tuning spec names exactly one method (bench.config.plan.tune_spec)")
    (method, entry), = spec["methods"].items()
    # what trains a configuration (its run config, its rule) is the spec's, not part of the choice
    choice = choose({**entry, "points": [{k: v for k, v in p.items() if k not in TRAINING_KEYS} for p in entry["points"]]})
    seconds = compute_seconds([d for p in entry["points"] for d in p["dirs"]])
    return {k: spec[k] for k in ("experiment", "dataset", "fold", "seeds", "tuning")} | {
        "budget": len(entry["points"]), "seconds": seconds, "methods": {method: choice}}


def tuned_config(spec: dict[str, Any], out: str | Path) -> str:
    """Write the chosen configuration's run config (module docstring); returns the chosen name."""
    record = read_record(spec["record"])
    entry = record["methods"].get(spec["method"])
    if entry is None or entry["chosen"] not in spec["configs"]:
        raise UsageError(f"{spec['record']}: no chosen configuration of {spec['method']!r} among "
                         f"{sorted(spec['configs'])}: the record is stale; rebuild it (rule tune)")
    text = run_config_text(spec["configs"][entry["chosen"]])
    with atomic_path(out) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return str(entry["chosen"])


def summary_line(record: dict[str, Any], out: str | Path) -> str:
    """``ltr-bench tune``'s last line: the chosen configuration, its validation mean and the compute spent."""
    (method, entry), = record["methods"].items()
    mean = next(p["mean"] for p in entry["points"] if p["name"] == entry["chosen"])
    spent = ", ".join(f"{v:.1f} {k} s" for k, v in sorted(record["seconds"].items()))
    return (f"{out}: {method}: {entry['chosen_label']} (validation {entry['metric']} "
            f"{'nan' if math.isnan(mean) else f'{mean:.6f}'}, best of {record['budget']} configurations; {spent})")

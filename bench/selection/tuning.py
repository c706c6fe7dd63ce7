r"""The tuning stage: each tuned method's configuration chosen on the tuning fold's validation split.

Two commands, one per job of ``workflows/tune.smk`` (the third, ``ltr-bench tuning-summary``,
is a statistic and lives in :mod:`bench.stats`):

- ``ltr-bench tune --spec JSON --out results/tuning/<experiment>/<dataset>/<method>.json``: given
  by :func:`bench.config.plan.tune_spec` every configuration of one method
  (:mod:`bench.config.tuning`) with its runs on the tuning fold, one per tuning seed, it reads
  each run's kept validation value from ``run.json`` and keeps the configuration with the best
  mean over seeds, exactly as the ``select`` stage chooses a grid point
  (:func:`bench.selection.choose`: ties to the lower configuration number, so the default wins a
  tie; never a test split, a score file or a test metric). The record (written with its digest)
  adds the budget, the sampler, the method's search space and the **compute spent**: the sum of
  the runs' ``wall_time_s`` per device (``run.json`` ``device``), every configuration and seed
  counted, so compute parity between methods is visible beside the equal configuration count.
- ``ltr-bench tuned-config --spec JSON --out results/configs/<experiment>/<dataset>/<method>+tuned.json``:
  the run config of the chosen configuration, renamed ``<method>+tuned``, which trains it on
  every fold and seed the tuning did not (the spec carries every configuration's run config,
  :func:`bench.config.plan.tuned_config_spec`; the record says which one).

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
from bench.results import parse_spec, read_record, read_run_info, write_record
from bench.selection import choose


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
    choice = choose(entry)
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


def _cli_tune(args) -> int:
    record = tune(parse_spec(args.spec))
    write_record(record, args.out)
    (method, entry), = record["methods"].items()
    mean = next(p["mean"] for p in entry["points"] if p["name"] == entry["chosen"])
    spent = ", ".join(f"{v:.1f} {k} s" for k, v in sorted(record["seconds"].items()))
    print(f"{args.out}: {method}: {entry['chosen_label']} (validation {entry['metric']} "
          f"{'nan' if math.isnan(mean) else f'{mean:.6f}'}, best of {record['budget']} configurations; {spent})")
    return 0


def _cli_tuned_config(args) -> int:
    chosen = tuned_config(parse_spec(args.spec), args.out)
    print(f"{args.out}: the chosen configuration {chosen}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench tune`` and ``tuned-config``."""
    p = subparsers.add_parser("tune", help="choose one tuned method's configuration on the tuning fold's validation")
    p.add_argument("--spec", required=True, help="JSON: the configurations and their runs (bench.config.plan.tune_spec)")
    p.add_argument("--out", required=True, help="results/tuning/<experiment>/<dataset>/<method>.json")
    p.set_defaults(func=_cli_tune)
    c = subparsers.add_parser("tuned-config", help="write the run config of a tuned method's chosen configuration")
    c.add_argument("--spec", required=True, help="JSON (bench.config.plan.tuned_config_spec)")
    c.add_argument("--out", required=True, help="results/configs/<experiment>/<dataset>/<method>+tuned.json")
    c.set_defaults(func=_cli_tuned_config)

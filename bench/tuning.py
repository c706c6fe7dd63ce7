r"""The tuning stage: each tuned method's configuration chosen on the tuning fold's validation split.

Three commands, one per job of ``workflows/tune.smk``:

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
- ``ltr-bench tuning-summary --spec JSON --out results/tuning/<table>.parquet``: per dataset and
  tuned method, the record's facts and **what tuning bought**: on the tuning fold's test split,
  with the tuning seeds, the chosen configuration's mean minus the default's (configuration 1),
  per table metric, with its paired bootstrap CI (:func:`bench.stats.versus`: the same pairing,
  drops and pooling as every table). The default's test values are read for that column only,
  after the choice; the choice itself never sees them (``tests/test_tuning.py`` permutes the
  test labels and finds every record unchanged).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from bench.atomic import atomic_path
from bench.errors import UsageError
from bench.results import read_frames, read_record, read_run_info, write_frame, write_record
from bench.selection import choose

DEFAULT_MARK = "+default"  # the default's rows in the summary's paired comparison


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
    text = json.dumps(spec["configs"][entry["chosen"]], indent=2, sort_keys=True) + "\n"
    with atomic_path(out) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return str(entry["chosen"])


def _bought(chosen: pd.DataFrame, defaults: pd.DataFrame, method: str, seeds: list[int], metrics: list[str],
            n_boot: int, seed: int) -> dict[str, Any]:
    """Chosen minus default on the tuning fold (per metric: mean difference and paired bootstrap CI)."""
    from bench.stats import versus

    mine = chosen[(chosen["method"] == method) & chosen["seed"].isin(seeds)]
    ref = defaults[defaults["method"] == method].assign(method=method + DEFAULT_MARK)
    if mine.empty or ref.empty:
        raise UsageError(f"no test rows of {method!r} on the tuning fold with seeds {seeds} (chosen: {len(mine)}, "
                         f"default: {len(ref)}); rebuild the evaluations")
    rows = versus(pd.concat([mine, ref], ignore_index=True), metrics, [method], [method + DEFAULT_MARK],
                  correction="none", n_boot=n_boot, seed=seed)
    out: dict[str, Any] = {}
    for row in rows.itertuples():
        out[f"test:{row.metric}"] = row.mean
        out[f"default:{row.metric}"] = row.ref_mean
        out[f"delta:{row.metric}"] = row.diff
        out[f"ci_low:{row.metric}"], out[f"ci_high:{row.metric}"] = row.ci_low, row.ci_high
    return out


def summarize(spec: dict[str, Any], *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The tuning summary of a table (module docstring) from ``spec``
    (:func:`bench.config.plan.tuning_summary_spec`): one row per (dataset, tuned method)."""
    rows = []
    for ds in spec["datasets"]:
        chosen, defaults = read_frames([ds["chosen"]]), read_frames([ds["defaults"]])
        for path in ds["records"]:
            record = read_record(path)
            (method, entry), = record["methods"].items()
            points = {p["name"]: p for p in entry["points"]}
            default = entry["points"][0]
            picked = points[entry["chosen"]]
            same = entry["chosen"] == default["name"]
            bought = {} if same else _bought(chosen, defaults, method, ds["seeds"], spec["metrics"], n_boot, seed)
            if same:  # the default chosen: the very same runs, nothing bought
                for metric in spec["metrics"]:
                    bought.update({f"delta:{metric}": 0.0, f"ci_low:{metric}": 0.0, f"ci_high:{metric}": 0.0})
            rows.append({
                "dataset": ds["dataset"], "fold": record["fold"], "method": method, "budget": record["budget"],
                "n_seeds": len(record["seeds"]), "metric": entry["metric"], "chosen": entry["chosen"],
                "chosen_label": entry["chosen_label"], "chosen_index": list(points).index(entry["chosen"]) + 1,
                "chosen_settings": json.dumps(picked["settings"], sort_keys=True),
                "vali_chosen": picked["mean"], "vali_default": default["mean"],
                "cpu_seconds": float(record["seconds"].get("cpu", 0.0)),
                "gpu_seconds": float(sum(v for k, v in record["seconds"].items() if k != "cpu")),
                "space": record["tuning"]["space_text"], **bought,
            })
    if not rows:
        raise UsageError("--spec: no tuned method on any dataset of the table")
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        if column.startswith(("delta:", "ci_low:", "ci_high:", "test:", "default:")):
            frame[column] = frame[column].astype(float)
    return frame


def _spec(text: str) -> dict[str, Any]:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--spec: not valid JSON ({exc})") from exc
    if not isinstance(spec, dict):
        raise UsageError("--spec: expected a JSON object")
    return spec


def _cli_tune(args) -> int:
    record = tune(_spec(args.spec))
    write_record(record, args.out)
    (method, entry), = record["methods"].items()
    mean = next(p["mean"] for p in entry["points"] if p["name"] == entry["chosen"])
    spent = ", ".join(f"{v:.1f} {k} s" for k, v in sorted(record["seconds"].items()))
    print(f"{args.out}: {method}: {entry['chosen_label']} (validation {entry['metric']} "
          f"{'nan' if math.isnan(mean) else f'{mean:.6f}'}, best of {record['budget']} configurations; {spent})")
    return 0


def _cli_tuned_config(args) -> int:
    chosen = tuned_config(_spec(args.spec), args.out)
    print(f"{args.out}: the chosen configuration {chosen}")
    return 0


def _cli_summary(args) -> int:
    frame = summarize(_spec(args.spec), n_boot=args.n_boot, seed=args.seed)
    write_frame(frame, args.out)
    print(f"{args.out}: {len(frame)} tuned methods")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench tune``, ``tuned-config`` and ``tuning-summary``."""
    p = subparsers.add_parser("tune", help="choose one tuned method's configuration on the tuning fold's validation")
    p.add_argument("--spec", required=True, help="JSON: the configurations and their runs (bench.config.plan.tune_spec)")
    p.add_argument("--out", required=True, help="results/tuning/<experiment>/<dataset>/<method>.json")
    p.set_defaults(func=_cli_tune)
    c = subparsers.add_parser("tuned-config", help="write the run config of a tuned method's chosen configuration")
    c.add_argument("--spec", required=True, help="JSON (bench.config.plan.tuned_config_spec)")
    c.add_argument("--out", required=True, help="results/configs/<experiment>/<dataset>/<method>+tuned.json")
    c.set_defaults(func=_cli_tuned_config)
    s = subparsers.add_parser("tuning-summary", help="a tuned table's budgets, choices and what tuning bought")
    s.add_argument("--spec", required=True, help="JSON (bench.config.plan.tuning_summary_spec)")
    s.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of the CI of what tuning bought")
    s.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    s.add_argument("--out", required=True, help="results/tuning/<table>.parquet")
    s.set_defaults(func=_cli_summary)

"""A tuned table in the report: its "Tuning" block per dataset and the caption's sentences on tuning.

Reads the tuning summary (``ltr-bench tuning-summary``, :func:`bench.stats.summarize`: one row per dataset
and tuned method) and nothing else: every number is a column of it.

- :func:`tuning_blocks`: per dataset, each tuned method's configurations tried, the chosen one
  (its number and settings), the validation mean of the chosen configuration and of the default,
  what tuning bought on test (the chosen configuration minus the default on the tuning fold, with
  its 95 % paired bootstrap CI), and the compute the tuning spent (CPU and GPU seconds summed over
  every configuration and seed), so both the configuration count and the compute are visible.
- :func:`caption_sentences`: the budget, the sampler, the split and seeds that choose, the shared
  space, the tie rule, and the methods with nothing to tune.

>>> import pandas as pd
>>> summary = pd.DataFrame({"dataset": ["d"], "fold": ["Fold1"], "method": ["m"], "budget": [3], "n_seeds": [1],
...     "metric": ["ndcg@10"], "chosen": ["m+cfg2"], "chosen_label": ["lr = 0.01"], "chosen_index": [2],
...     "chosen_settings": ['{"train.lr": 0.01}'], "vali_chosen": [0.9], "vali_default": [0.8],
...     "cpu_seconds": [12.5], "gpu_seconds": [0.0], "space": ["train.lr log-uniform 0.0001-0.01"],
...     "delta:ndcg@10": [0.05], "ci_low:ndcg@10": [0.01], "ci_high:ndcg@10": [0.09]})
>>> block, = tuning_blocks(summary, {"datasets": [{"name": "d", "label": "D"}], "methods": [{"name": "m", "label": "M"}]})
>>> [c.text for c in block.rows[0]]
['M', '2 of 3: lr = 0.01', '0.9000', '0.8000', '+0.0500 [+0.0100, +0.0900]', '12.5', '0.0']
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench.report.tables import Block, Cell, Table, _fmt, _labels, metric_label


def _seconds(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.1f}"


def tuning_blocks(summary: pd.DataFrame, spec: dict[str, Any]) -> list[Block]:
    """One "Tuning" block per dataset of ``spec`` with tuned methods (module docstring)."""
    labels, blocks = _labels(spec["methods"]), []
    for ds in spec["datasets"]:
        rows = summary[summary["dataset"] == ds["name"]]
        if rows.empty:
            continue
        metric = str(rows["metric"].iloc[0])
        shown = metric_label(metric)
        first = rows.iloc[0]
        seeds = int(first["n_seeds"])
        title = (f"{ds.get('label') or ds['name']}: tuning, {int(first['budget'])} configurations per method, chosen by "
                 f"validation {shown} on {first['fold']} (mean over {seeds} seed{'s' if seeds > 1 else ''})")
        header = ["Method", "chosen (of the budget)", f"validation {shown}", "default's",
                  f"test {shown}: chosen − default [95 % CI] ({first['fold']})", "tuning CPU s", "tuning GPU s"]
        order = [m["name"] for m in spec["methods"] if m["name"] in set(rows["method"])]
        out = []
        for method in order:
            r = rows[rows["method"] == method].iloc[0]
            delta, lo, hi = (float(r.get(f"{k}:{metric}", math.nan)) for k in ("delta", "ci_low", "ci_high"))
            bought = f"{_fmt(delta, metric, signed=True)} [{_fmt(lo, metric, signed=True)}, {_fmt(hi, metric, signed=True)}]"
            chosen = f"{int(r['chosen_index'])} of {int(r['budget'])}: {r['chosen_label']}"
            out.append([Cell(labels.get(method, method)), Cell(chosen), Cell(_fmt(float(r["vali_chosen"]), metric)),
                        Cell(_fmt(float(r["vali_default"]), metric)), Cell(bought),
                        Cell(_seconds(float(r["cpu_seconds"]))), Cell(_seconds(float(r["gpu_seconds"])))])
        blocks.append(Block(title, header, out))
    return blocks


def caption_sentences(summary: pd.DataFrame, spec: dict[str, Any]) -> list[str]:
    """What the caption says about tuning (module docstring); none when ``spec`` has no tuning."""
    facts = spec.get("tuning")
    if not facts:
        return []
    labels = _labels(spec["methods"])
    folds = sorted(set(facts["folds"].values()))
    seeds = ", ".join(map(str, facts["seeds"]))
    shared = "; ".join(f"{kind}: {text}" for kind, text in facts["space"].items()) or "none"
    parts = [
        f"Every method is tuned with the same budget: {facts['budget']} configurations, its configured values "
        f"(configuration 1, the default) and {facts['budget'] - 1} drawn from its search space by a scrambled Halton "
        f"sequence (seed {facts['seed']}), each trained on the training split of {' / '.join(folds)} with seed(s) "
        f"{seeds}; the configuration with the best mean validation value of the protocol's early-stopping metric is "
        "the method's row (equal means: the lower configuration number, so the default wins a tie), then trained on "
        "every fold and seed. The test split is never read for the choice.",
        f"Shared search space: {shared}; each loss's own dimensions and every configuration's validation values: "
        "the selection table.",
        "Tuning block: the chosen configuration, its and the default's validation mean, what tuning bought on test "
        "(the chosen configuration's mean minus the default's on the tuning fold with the tuning seeds, paired per "
        "query, 95 % bootstrap CI; 0 when the default is chosen) and the wall seconds the tuning spent (every "
        "configuration and seed).",
    ]
    untuned = [labels.get(m["name"], m["name"]) for m in spec["methods"]
               if m["name"] not in set(summary["method"]) and m["name"] in set(spec.get("untuned", []))]
    if untuned:
        parts.append(f"Nothing to tune, trained once: {', '.join(untuned)}.")
    return parts


def with_tuning(table: Table, summary: pd.DataFrame, spec: dict[str, Any]) -> Table:
    """``table`` (a ``methods`` layout: one block per dataset of ``spec``) with each dataset's
    Tuning block after its block and the caption's sentences on tuning."""
    if len(table.blocks) != len(spec["datasets"]):
        raise ValueError(f"table {spec['name']}: {len(table.blocks)} blocks for {len(spec['datasets'])} datasets; "
                         "a tuned table has the methods layout, one block per dataset")
    blocks = []
    for block, ds in zip(table.blocks, spec["datasets"]):
        blocks += [block, *tuning_blocks(summary, {**spec, "datasets": [ds]})]
    caption = " ".join([table.caption, *caption_sentences(summary, spec)])
    return Table(table.name, table.title, caption, blocks)

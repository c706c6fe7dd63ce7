"""Hyperparameter selection in the report: the table's caption sentence and the selection table.

Both read the ``select`` stage's records (:mod:`bench.selection`, one per dataset and fold)
and nothing else: every number is a record's.

- :func:`caption_sentence`: the sentence a table selected on validation adds to its caption,
  naming the chosen point of each selected method (per dataset, and per fold where folds
  chose differently).
- :func:`selection_table`: ``reports/tables/<table>_selection.*``, one block per (method,
  dataset, fold): every grid point's settings, its validation metric per seed and the mean
  over seeds, the chosen point marked (✓, bold), the runs that trained it (another table's when
  reused), and, where the paper reveals its choice for a dataset the block's dataset is or
  stands in for, a column marking the points with the paper's values (on the keys it reveals).

>>> rec = {"dataset": "d", "fold": "Fold1", "seeds": [0], "methods": {"m": {"metric": "ndcg@10",
...        "higher_is_better": True, "chosen": "m+x=1", "chosen_label": "x = 1", "chosen_settings": {"p.x": 1},
...        "points": [{"name": "m+x=1", "label": "x = 1", "settings": {"p.x": 1}, "run": "m+x=1", "dirs": ["r"],
...                    "values": [0.5], "mean": 0.5}]}}}
>>> print(caption_sentence([rec], {"methods": [{"name": "m", "label": "M"}], "datasets": [{"name": "d", "label": "D"}]}))
Selected on validation (mean over seeds of each run's kept validation value): M: x = 1 (D, by NDCG@10).
"""

from __future__ import annotations

from typing import Any

from bench.config.selection import short_keys, value_text
from bench.report.tables import Block, Cell, Table, metric_label

CHOSEN = "✓"


def _labels(items: list[dict[str, Any]]) -> dict[str, str]:
    return {it["name"]: it.get("label") or it["name"] for it in items}


def _folds_by_dataset(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rec in records:
        out.setdefault(rec["dataset"], []).append(rec["fold"])
    return out


def caption_sentence(records: list[dict[str, Any]], spec: dict[str, Any]) -> str:
    """The caption's sentence on the methods selected on validation (``""``: none): per method,
    each chosen point with the datasets (folds, where a dataset has several) that chose it."""
    if not records:
        return ""
    methods, datasets = _labels(spec.get("methods", [])), _labels(spec.get("datasets", []))
    folds = _folds_by_dataset(records)
    parts = []
    for method in dict.fromkeys(m for rec in records for m in rec["methods"]):
        chosen: dict[str, list[str]] = {}
        metrics = []
        for rec in records:
            entry = rec["methods"].get(method)
            if entry is None:
                continue
            where = datasets.get(rec["dataset"], rec["dataset"])
            if len(folds[rec["dataset"]]) > 1:
                where += f" {rec['fold']}"
            chosen.setdefault(entry["chosen_label"], []).append(where)
            metrics.append(metric_label(entry["metric"]))
        by = ", ".join(dict.fromkeys(metrics))
        points = "; ".join(f"{label} ({', '.join(where)}, by {by})" for label, where in chosen.items())
        parts.append(f"{methods.get(method, method)}: {points}")
    others = [m["label"] or m["name"] for m in spec.get("methods", []) if m["name"] not in
              {name for rec in records for name in rec["methods"]}]
    unequal = (f" The table's {len(others)} other method{'s' if len(others) > 1 else ''} trained at one setting "
               "each, as the paper's protocol "
               "does: an asymmetric search, so compare them with the selected ones with care (the unified table "
               "tunes every method with the same budget)." if others else "")
    return ("Selected on validation (mean over seeds of each run's kept validation value): "
            + "; ".join(parts) + "." + unequal)


def _roles(ds: dict[str, Any]) -> list[str]:
    """The paper dataset roles a dataset is (its ``role``) or stands in for."""
    return [ds["role"]] if ds.get("role") else list(ds.get("stands_for") or [])


def _agrees(settings: dict[str, Any], paper: dict[str, Any]) -> bool:
    return all(key in settings and settings[key] == value for key, value in paper.items())


def _setting(value: Any, tuned: bool) -> str:
    """A setting's cell: a tuned method's default that the config does not state is the loss's own."""
    return "default" if tuned and value is None else value_text(value)


def _shown(settings: dict[str, Any], labels: dict[str, str]) -> str:
    return ", ".join(f"{labels.get(k, k)} = {value_text(v)}" for k, v in settings.items())


def selection_table(records: list[dict[str, Any]], spec: dict[str, Any]) -> Table:
    """The selection table of ``spec`` (:func:`bench.config.plan.selection_table_spec`) from the records."""
    datasets = {ds["name"]: ds for ds in spec["datasets"]}
    folds = _folds_by_dataset(records)
    blocks = []
    for method in spec["methods"]:
        keys = list(method["keys"])
        short = dict(zip(keys, short_keys(keys)))
        for rec in records:
            entry = rec["methods"].get(method["name"])
            if entry is None:
                continue
            ds = datasets.get(rec["dataset"], {"name": rec["dataset"]})
            roles = [r for r in _roles(ds) if r in method["paper"]]
            metric = metric_label(entry["metric"])
            n_seeds = len(rec["seeds"])
            title = f"{method['label']} on {ds.get('label') or ds['name']}"
            if len(folds[rec["dataset"]]) > 1:
                title += f" ({rec['fold']})"
            title += f": validation {metric}, mean over {n_seeds} seed{'s' if n_seeds > 1 else ''}; " \
                     f"chosen {entry['chosen_label']}"
            if method.get("tuned"):  # its search space, from the tuning record
                title += f"; {len(entry['points'])} configurations from: {rec['tuning']['space_text']}"
            for role in roles:
                paper = method["paper"][role]
                inside = any(_agrees(p["settings"], paper) for p in entry["points"])
                title += f"; the paper's on {role}: {_shown(paper, short)}" + ("" if inside else " (not in this grid)")
            header = [short[k] for k in keys] + [f"validation {metric}", "per seed", "runs", "chosen"]
            header += [f"paper ({role})" for role in roles]
            rows = []
            for p in entry["points"]:
                is_chosen = p["name"] == entry["chosen"]
                row = [Cell(_setting(p["settings"].get(k), method.get("tuned", False))) for k in keys]
                row.append(Cell(f"{p['mean']:.4f}", bold=is_chosen))
                row.append(Cell(" / ".join(f"{v:.4f}" for v in p["values"])))
                row.append(Cell("own" if p["run"] == p["name"] else p["run"]))
                row.append(Cell(CHOSEN if is_chosen else "", bold=is_chosen))
                row += [Cell(CHOSEN if _agrees(p["settings"], method["paper"][role]) else "") for role in roles]
                rows.append(row)
            blocks.append(Block(title, header, rows))
    return Table(spec["name"], spec["title"], table_caption(spec, records), blocks)


def table_caption(spec: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """What the selection table shows, how the point is chosen, and what is never read."""
    parts = []
    if spec.get("source"):
        parts.append(f"Hyperparameter selection of {spec['source']}.")
    if any(ds.get("stands_for") for ds in spec["datasets"]):
        parts.append("Synthetic stand-ins replace the paper's datasets: the paper's choices are shown for the "
                     "datasets they stand in for, not expected to be ours.")
    if spec.get("profile"):
        parts.append(f"Profile: {spec['profile']}.")
    if spec.get("tuning"):  # a tuned table: every configuration of every tuned method
        facts = spec["tuning"]
        parts.append(
            f"Tuning: each method tries {facts['budget']} configurations, configuration 1 its configured values "
            "(the default: the config's values, else the loss's or library's own; 'default' where the library "
            "sets it), the others drawn from the "
            f"search space in the block's title by a scrambled Halton sequence (seed {facts['seed']}); each is "
            f"trained on the tuning fold with seed(s) {', '.join(map(str, facts['seeds']))}, and its validation "
            "value is the one its early stopping kept (run.json), averaged over those seeds. The configuration with "
            "the best mean is chosen (✓, bold); equal means go to the lower configuration number. The test split is "
            "never read for the choice; the chosen configuration is then trained on every fold and seed."
        )
    if not any(m.get("tuned") for m in spec["methods"]) or any(not m.get("tuned") for m in spec["methods"]):
        parts.append(_GRID_SENTENCE)
    return " ".join(parts)


_GRID_SENTENCE = (
        "Every point of each method's grid is trained with the table's protocol, folds and seeds; its "
        "validation value is the one its early stopping kept (run.json, at the checkpoint that scored the "
        "test split), averaged over seeds. The point with the best mean is chosen (✓, bold) per dataset and "
        "fold, and its test results are the method's row in the table; equal means go to the first point in "
        "grid order. The test split is never read for the choice. runs: the method whose runs train the "
        "point, another table's when it trains the same configuration (reused, not trained twice), 'own' "
        "when the point trains under its own name. paper (role): ✓ where the point has the values the paper "
        "chose on that dataset, on the keys it reveals."
)

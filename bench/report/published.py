"""The "published (Δ)" column of a table beside a benchmark's own published baselines.

A table whose ``paper`` key names a table of *published baselines* (in
``paper_numbers.yaml``: rows keyed by the published algorithm, ``reproduced_by`` naming our
method that reproduces one; :func:`bench.report.paper.load_paper_numbers` keeps the published
name in the frame's ``published`` column) gets, per dataset block whose collection the source
covers:

- beside each metric of ours, the published number of the algorithm the row reproduces and
  ours minus it (``0.3200 (+0.0120)``), ``–`` where the row reproduces none or the source
  prints no number for that metric;
- a last row, the published range: for each metric, the minimum and the maximum over every
  published baseline of the block, :math:`[\\min_b v_b, \\max_b v_b]` (``0.2600–0.4000``).

The caption names the source and table of each block, which of our rows reproduces which
published algorithm, and the collections of the table for which no stored source has a
number (their blocks have no published column).

>>> import pandas as pd
>>> paper = pd.DataFrame({"role": ["r", "r"], "method": ["ours", "Other"], "metric": ["map", "map"],
...                       "value": [0.25, 0.5], "published": ["Theirs", "Other"]})
>>> is_published(paper)
True
>>> range_row(paper, ["map", "ndcg@5"])
['LETOR published range (2 baselines)', '', '0.2500–0.5000', '', '–']
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench.metrics import higher_is_better

COLUMN = "published (Δ)"


def is_published(paper: pd.DataFrame | None) -> bool:
    """True when ``paper`` rows come from a table of published baselines (``published`` names)."""
    return paper is not None and "published" in paper.columns and bool((paper["published"] != "").any())


def _fmt(value: float, metric: str) -> str:
    return f"{value:.{4 if higher_is_better(metric) else 3}f}"


def range_row(block: pd.DataFrame, metrics: list[str]) -> list[str]:
    """The texts of a block's last row: the range over all published baselines, in the
    published columns (our columns stay empty)."""
    row = [f"LETOR published range ({len(set(block['published']))} baselines)"]
    for metric in metrics:
        values = block.loc[block["metric"] == metric, "value"]
        row += ["", f"{_fmt(values.min(), metric)}–{_fmt(values.max(), metric)}" if len(values) else "–"]
    return row


def caption(paper: pd.DataFrame, spec: dict[str, Any], labels: dict[str, str]) -> str:
    """What the published column holds, where each block's numbers come from, which collections
    of the table the source does not cover; "" for a table with no real collection (a synthetic
    stand-in has no role)."""
    pairs = paper.loc[paper["published"] != paper["method"], ["method", "published"]].drop_duplicates()
    ours = "; ".join(f"{labels[m]} as {p}" for m, p in pairs.itertuples(index=False) if m in labels)
    cited, missing = [], []
    for ds in spec.get("datasets", []):
        label, hit = ds.get("label") or ds["name"], paper[paper["role"] == ds.get("role")]
        if not hit.empty:
            names = ", ".join(sorted(set(hit["published"])))
            cited.append(f"{label}, {hit['source'].iloc[0]}, baselines {names}")
        elif ds.get("role"):
            missing.append(label)
    parts = []
    if cited:
        parts.append(f"{COLUMN}: the number LETOR's authors published for the baseline our row reproduces "
                     f"({ours or 'none of ours'}) and ours minus it; the last row of a block is the range over "
                     f"every published baseline of that collection; '–': the source prints no number there. "
                     f"Published numbers: {'; '.join(cited)}.")
    if missing:
        parts.append(f"No stored source has LETOR's published numbers for {', '.join(missing)}: "
                     "those blocks have no published column.")
    return " ".join(parts)

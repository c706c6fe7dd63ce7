r"""The recall heatmaps (ARF Figs. 2-6): Recall@m@k of models trained at each (m, k).

Each panel is one loss on one dataset (:func:`bench.config.plan.heatmap_spec`): row ``i`` is
the model trained with cut-offs :math:`(m_i, k_i)` (a loss with ``k`` only: :math:`k_i`),
column ``j`` the test metric Recall@:math:`m_j`@:math:`k_j` (ARF's eq. 4, ``recall_arf``),
and cell :math:`V_{ij}` its mean over the queries the metric keeps and over all seeds
(:func:`heatmap_matrix`).

ARF reads consistency off the diagonal: a loss trained for Recall@m@k should do best on
Recall@m@k. The number that tests it (:func:`diagonal_share`) compares models within a
column, where they are graded by one and the same metric (along a row the metrics differ in
scale: Recall@50@25 is not Recall@10@5). With :math:`B_j = \arg\max_i V_{ij}` (every row at
the column's maximum) and :math:`D_j` the rows trained at column ``j``'s cut-offs,

.. math::  \text{diagonal share} = \frac{1}{C} \sum_j \frac{|B_j \cap D_j|}{|B_j|},
           \qquad \text{chance} = \frac{1}{C} \sum_j \frac{|D_j|}{R},

the share of columns whose best model is the one trained for that column (a tie at the
maximum split evenly, as a random tie-break would), over the ``C`` columns with a value in
every row; ``chance`` is the same share when the best row is drawn at random among the
``R`` rows. A consistent loss has share 1; an inconsistent one sits near chance.

>>> values = np.array([[0.5, 0.3], [0.4, 0.3]])
>>> match = np.array([[True, False], [False, True]])
>>> diagonal_share(values, match)
DiagonalShare(share=0.75, chance=0.5, columns=2)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from bench.metrics import conventions_caption  # noqa: E402


@dataclass(frozen=True)
class DiagonalShare:
    share: float
    chance: float
    columns: int

    def caption(self) -> str:
        """The counts behind the shares.

        >>> DiagonalShare(2 / 3, 1 / 3, 3).caption()
        'diagonal best in 2/3 columns (chance 1/3)'
        """
        if not self.columns:
            return "diagonal share: no column with a value in every row"
        return (f"diagonal best in {_count(self.share * self.columns)}/{self.columns} columns "
                f"(chance {_count(self.chance * self.columns)}/{self.columns})")


def _count(x: float) -> str:
    return f"{round(x, 2):g}"


def diagonal_share(values: np.ndarray, match: np.ndarray) -> DiagonalShare:
    """The module docstring's share and chance of a ``[rows, columns]`` matrix; ``match[i, j]``:
    row ``i`` was trained at column ``j``'s cut-offs. Columns with a NaN are left out."""
    values, match = np.asarray(values, float), np.asarray(match, bool)
    if values.shape != match.shape:
        raise ValueError(f"values {values.shape} and match {match.shape} differ in shape")
    hits, chance = [], []
    for j in range(values.shape[1]):
        col = values[:, j]
        if np.isnan(col).any() or not match[:, j].any():
            continue
        best = col == col.max()
        hits.append((best & match[:, j]).sum() / best.sum())
        chance.append(match[:, j].sum() / len(col))
    if not hits:
        return DiagonalShare(float("nan"), float("nan"), 0)
    return DiagonalShare(float(np.mean(hits)), float(np.mean(chance)), len(hits))


def row_matches(rows: list[dict[str, Any]], grid: list[list[int]]) -> np.ndarray:
    """``[rows, columns]``: row trained at the column's cut-offs (its own ``m``/``k`` agree)."""
    return np.array([[all(row[key] is None or row[key] == v for key, v in (("m", m), ("k", k))) for m, k in grid]
                     for row in rows])


def heatmap_matrix(per_query: pd.DataFrame, dataset: str, rows: list[dict[str, Any]], grid: list[list[int]],
                   metric: str = "recall_arf") -> np.ndarray:
    """``[rows, columns]`` mean ``metric@m@k`` of each row's runs on ``dataset`` (all seeds), over
    the queries the metric keeps (its ``:dropped`` column); NaN where it keeps none."""
    out = np.full((len(rows), len(grid)), np.nan)
    on = per_query[per_query.dataset == dataset]
    for i, row in enumerate(rows):
        sub = on[on.method == row["method"]]
        if sub.empty:
            raise ValueError(f"no per-query rows for method {row['method']!r} on {dataset!r} in the recall evaluation")
        for j, (m, k) in enumerate(grid):
            col = f"{metric}@{m}@{k}"
            keep = ~sub[f"{col}:dropped"].to_numpy(bool) if f"{col}:dropped" in sub else np.ones(len(sub), bool)
            vals = sub[col].to_numpy(float)[keep]
            out[i, j] = vals.mean() if vals.size else np.nan
    return out


def _panel_title(panel: dict[str, Any], stat: DiagonalShare) -> str:
    figs = panel.get("paper_figures") or []
    source = f"ARF Fig{'s' if len(figs) > 1 else ''}. {', '.join(map(str, figs))}" if figs else "ARF Figs. 2-6"
    if panel.get("stands_for"):
        source = f"stand-in for {', '.join(panel['stands_for'])} ({source})"
    return f"{panel['title']} on {panel['dataset_label']}\n{source}\n{stat.caption()}"


def _draw(ax, values: np.ndarray, match: np.ndarray, rows: list[dict[str, Any]], grid: list[list[int]],
          vmin: float, vmax: float):
    image = ax.imshow(values, cmap="viridis", vmin=vmin, vmax=vmax, origin="upper", aspect="auto")
    mid = (vmin + vmax) / 2
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            v = values[i, j]
            ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.3f}", ha="center", va="center", fontsize=7,
                    color="black" if v > mid else "white", fontweight="bold" if match[i, j] else "normal")
    for j in range(values.shape[1]):  # each column's best model, outlined
        col = values[:, j]
        if not np.isnan(col).any():
            for i in np.flatnonzero(col == col.max()):
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.8))
    ax.set_xticks(range(len(grid)), [f"{m}@{k}" for m, k in grid])
    ax.set_yticks(range(len(rows)), [row["label"] for row in rows])
    ax.set_xlabel("evaluated at: Recall@m@k (m@k)")
    ax.set_ylabel("trained with")
    return image


def recall_heatmaps(per_query: pd.DataFrame, spec: dict[str, Any]):
    """One heatmap per panel of ``spec`` (:func:`bench.config.plan.heatmap_spec`): a row of panels
    per dataset, one colour scale per dataset; each title carries its :func:`diagonal_share`."""
    grid, metric, panels = spec["grid"], spec.get("metric", "recall_arf"), spec["panels"]
    datasets = list(dict.fromkeys(p["dataset"] for p in panels))
    width = max(sum(p["dataset"] == d for p in panels) for d in datasets)
    fig, axes = plt.subplots(len(datasets), width, squeeze=False, layout="constrained",
                             figsize=(0.9 * len(grid) * width + 2.5 * width + 1, (0.5 * len(grid) + 2.6) * len(datasets)))
    variant = " (ARF eq. 4: / k)" if metric == "recall_arf" else ""
    for r, dataset in enumerate(datasets):
        mine = [p for p in panels if p["dataset"] == dataset]
        mats = [heatmap_matrix(per_query, dataset, p["rows"], grid, metric) for p in mine]
        vmin, vmax = np.nanmin([np.nanmin(m) for m in mats]), np.nanmax([np.nanmax(m) for m in mats])
        image = None
        for ax, panel, values in zip(axes[r], mine, mats):
            match = row_matches(panel["rows"], grid)
            image = _draw(ax, values, match, panel["rows"], grid, vmin, vmax)
            ax.set_title(_panel_title(panel, diagonal_share(values, match)), fontsize=8)
        for ax in axes[r][len(mine):]:
            ax.axis("off")
        fig.colorbar(image, ax=list(axes[r]), shrink=0.85, label=f"mean Recall@m@k{variant}")
    fig.text(0.01, -0.02, " ".join([_CAPTION, *_convention_notes(spec), *spec.get("notes", [])]), fontsize=7,
             ha="left", va="top", wrap=True)
    return fig


def _convention_notes(spec: dict[str, Any]) -> list[str]:
    """How the recall was graded (:func:`bench.metrics.conventions_caption`), per convention."""
    per_dataset = spec.get("conventions") or {}
    ev = {"empty_query": "one", "ties": "stable", **spec.get("evaluation", {})}
    metric = f"{spec.get('metric', 'recall_arf')}@{spec['grid'][0][0]}@{spec['grid'][0][1]}"
    used = list(dict.fromkeys(per_dataset.values()))
    labels = {p["dataset"]: p["dataset_label"] for p in spec["panels"]}
    notes = []
    for convention in used:
        text = conventions_caption(ev["empty_query"], ev["ties"], convention, metrics=[metric])
        names = ", ".join(labels.get(d, d) for d, c in per_dataset.items() if c == convention)
        notes.append(f"{names}: {text}" if len(used) > 1 else text)
    return notes


_CAPTION = ("Rows: the loss trained with (m, k); columns: test Recall@m@k; bold: the model trained for that "
            "column's metric; red box: the best model in the column. 'Diagonal best in h/C columns': the "
            "columns whose best model is the one trained for them (ties split); chance: the same count when "
            "the best model of each column is drawn at random.")


def panel_shares(per_query: pd.DataFrame, spec: dict[str, Any]) -> Iterable[tuple[dict[str, Any], DiagonalShare]]:
    """Each panel of ``spec`` with its :func:`diagonal_share` (what the titles print)."""
    for panel in spec["panels"]:
        values = heatmap_matrix(per_query, panel["dataset"], panel["rows"], spec["grid"], spec.get("metric", "recall_arf"))
        yield panel, diagonal_share(values, row_matches(panel["rows"], spec["grid"]))

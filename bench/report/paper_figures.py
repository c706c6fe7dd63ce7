r"""Two of the papers' figures, drawn from computed tables only (run curves, per-query frames).

- ``annealing_figure`` (PiRank Fig. 13): validation NDCG@10 per epoch (mean over seeds) of
  PiRank-NDCG@10 at Fig. 5's temperatures, with the run whose temperature is annealed
  (``train.tau_schedule`` exponential: :math:`\tau_e = \tau_0 (\tau_1/\tau_0)^{e/(E-1)}`) in
  blue and the run at a very high temperature in orange, as the paper colours them; a second
  panel shows each run's temperature per epoch on a log scale (the annealed run's from its
  ``curve.csv``, the others constant).
- ``letor_curves`` (SinkProp Fig. 2): test NDCG@k against the truncation level
  :math:`k = 1..K`, one panel per LETOR collection, one line per method of the LETOR table:
  the mean of the per-query values over every test query of every fold and seed (queries a
  convention drops are left out). Where a cited source prints LETOR's published baselines
  (``letor_published`` of ``paper_numbers.yaml``; NDCG@1, 3 and 10), SinkProp's comparison
  baselines among them (AdaRank, ListNet, Regression) are drawn as dashed lines with open markers.

:data:`DRAW` maps each figure name to ``draw(spec, inputs) -> Figure``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from bench.report.tables import metric_label  # noqa: E402

#: the baselines SinkProp's Fig. 2 draws (its Sec. 5); SmoothRank is in no stored source
LETOR_FIGURE_BASELINES = ("AdaRank", "ListNet", "Regression")
ANNEALED_COLOR, HIGH_TAU_COLOR = "tab:blue", "tab:orange"


def annealing_figure(spec: dict[str, Any], inputs: list[str]):
    """PiRank Fig. 13 from the runs' ``curve.csv`` (see the module docstring)."""
    from bench.report.figures import read_curves

    curves = read_curves(spec["runs"])
    metric = spec["metric"]
    column = f"vali_{metric}"
    if column not in curves:
        raise ValueError(f"annealing_figure: the run curves have no {column!r} column")
    mean = curves.groupby(["label", "epoch"], sort=False).mean(numeric_only=True).reset_index()
    labels = list(dict.fromkeys(curves["label"]))
    plain = [lab for lab in labels if lab not in (spec["annealed"], spec["high_tau"])]
    cmap = plt.get_cmap("Greys")
    colors = {lab: cmap(0.35 + 0.55 * i / max(1, len(plain) - 1)) for i, lab in enumerate(plain)}
    colors.update({spec["annealed"]: ANNEALED_COLOR, spec["high_tau"]: HIGH_TAU_COLOR})
    fig, (ax, ax_tau) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    for lab in labels:
        sub = mean[mean.label == lab]
        strong = lab in (spec["annealed"], spec["high_tau"])
        ax.plot(sub.epoch, sub[column], color=colors[lab], linewidth=2.2 if strong else 1.2, label=lab)
        taus = sub["tau"] if "tau" in sub and sub["tau"].notna().any() else None
        fixed = (spec.get("taus") or {}).get(lab)
        if taus is not None:
            ax_tau.plot(sub.epoch, taus, color=colors[lab], linewidth=2.2, label=lab)
        elif fixed is not None:
            ax_tau.plot(sub.epoch, np.full(len(sub), float(fixed)), color=colors[lab], linestyle="--",
                        linewidth=2.2 if strong else 1.2, label=lab)
    ax.set_title(f"validation {metric_label(metric)} (PiRank Fig. 13)", fontsize=9)
    ax.set_ylabel(metric_label(metric))
    ax_tau.set_yscale("log")
    ax_tau.set_title("temperature tau per epoch", fontsize=9)
    ax_tau.set_ylabel("tau (log scale)")
    for a in (ax, ax_tau):
        a.set_xlabel("epoch")
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    if spec.get("graded"):  # the rules the validation curve is graded by (bench.metrics.validation_rules)
        fig.suptitle(f"PiRank Fig. 13: validation graded by {spec['graded']}", fontsize=9)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
    else:
        fig.tight_layout()
    return fig


def letor_curve_data(per_query: pd.DataFrame, spec: dict[str, Any]) -> pd.DataFrame:
    """Columns dataset, method, k, value: mean NDCG@k per collection and method.

    >>> frame = pd.DataFrame({"dataset": ["d"] * 2, "method": ["a"] * 2, "ndcg@1": [1.0, 0.0],
    ...                       "ndcg@2": [1.0, 0.5], "ndcg@2:dropped": [False, True]})
    >>> spec = {"datasets": [{"name": "d"}], "methods": [{"name": "a"}], "metrics": ["ndcg@1", "ndcg@2"]}
    >>> letor_curve_data(frame, spec).value.tolist()
    [0.5, 1.0]
    """
    rows = []
    for ds in spec["datasets"]:
        for m in spec["methods"]:
            sub = per_query[(per_query.dataset == ds["name"]) & (per_query.method == m["name"])]
            if sub.empty:
                raise ValueError(f"letor_curves: no per-query rows for {m['name']!r} on {ds['name']!r}")
            for metric in spec["metrics"]:
                keep = ~sub[f"{metric}:dropped"].to_numpy(bool) if f"{metric}:dropped" in sub else np.ones(len(sub), bool)
                vals = sub[metric].to_numpy(float)[keep]
                rows.append({"dataset": ds["name"], "method": m["name"], "k": int(metric.split("@")[1]),
                             "value": float(vals.mean()) if vals.size else math.nan})
    return pd.DataFrame(rows)


def letor_curves(spec: dict[str, Any], inputs: list[str]):
    """SinkProp Fig. 2 from the LETOR table's per-query frames (see the module docstring)."""
    from bench.report.paper import load_paper_numbers
    from bench.results import read_frames

    if not inputs:
        raise ValueError("letor_curves: give the LETOR table's evaluated per-query parquet files with --input")
    data = letor_curve_data(read_frames(inputs), spec)
    published = load_paper_numbers()
    published = published[published.table == spec.get("paper")] if spec.get("paper") else published.iloc[0:0]
    n = len(spec["datasets"])
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False)
    cmap = plt.get_cmap("tab10")
    colors = {m["name"]: cmap(i % 10) for i, m in enumerate(spec["methods"])}
    for ax, ds in zip(axes.flat, spec["datasets"]):
        for m in spec["methods"]:
            line = data[(data.dataset == ds["name"]) & (data.method == m["name"])].sort_values("k")
            ax.plot(line.k, line.value, marker="o", markersize=3, color=colors[m["name"]],
                    linewidth=2.2 if m["name"] == "sinkprop" else 1.3, label=m.get("label") or m["name"])
        cited = published[(published.role == ds.get("role")) & published.metric.str.startswith("ndcg@")]
        for i, name in enumerate(b for b in LETOR_FIGURE_BASELINES if b in set(cited.published)):
            pts = cited[cited.published == name].assign(k=lambda f: f.metric.str.split("@").str[1].astype(int))
            pts = pts.sort_values("k")
            ax.plot(pts.k, pts.value, linestyle="--", marker="s", markerfacecolor="none", color=f"C{7 + i}",
                    label=f"{name} (LETOR published)")
        title = ds.get("label") or ds["name"]
        if len(cited):
            title += f" ({cited['source'].iloc[0].split(';')[-1].strip()})"
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("truncation level k")
        ax.set_ylabel("test NDCG@k")
        ax.set_xticks(range(1, max(data.k) + 1))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


DRAW: dict[str, Callable[[dict[str, Any], list[str]], Any]] = {
    "annealing_figure": annealing_figure,
    "letor_curves": letor_curves,
}

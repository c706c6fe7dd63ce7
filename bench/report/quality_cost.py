r"""Quality against cost per loss: the picture that lets a reader choose a loss for a budget.

Two steps, as for every figure (figures read computed tables only):

1. ``ltr-bench quality-cost`` (:func:`quality_cost_table`) reads a statistics table and the
   ``run.json`` of that table's own runs on one dataset (nothing is trained) and writes one row
   per method:

   - **quality**: the statistics table's ``mean`` of the metric (over the test queries of every
     fold, each query's value averaged over seeds: the number the table prints) and a 95 %
     confidence interval **over seeds**, Student's t on the per-seed means:
     :math:`\bar x \pm t_{0.975,\,n-1}\, s / \sqrt n` with :math:`s` the table's
     ``std_over_seeds`` and :math:`n` its ``n_seeds`` (no interval with one seed; with two,
     :math:`t_{0.975,1} = 12.7` makes it wide: it says how far another seed may land);
   - **time**: ``seconds_per_epoch`` of ``run.json``, the epochs' training passes alone
     (validation, checkpoints and the test pass excluded; what a run kind counts as an epoch:
     a pass over the training lists, a boosting round of a GBDT), averaged over the method's
     runs; a method without epochs (a closed-form solve) has none and is left out of that panel;
   - **memory**: ``peak_memory`` of ``run.json``, the largest over the method's runs:
     ``cuda_max_allocated_bytes`` (the GPU allocator's peak) when any run of the table trained
     on a GPU, else ``host_max_rss_bytes`` (the process's peak resident memory, which includes
     the interpreter and the libraries, a few hundred MB, for every method alike). Methods
     without the chosen record (a GBDT next to GPU runs) are left out of that panel;
   - **Pareto fronts**: a method is on a panel's front when no other method is at most as
     costly and at least as good with one of the two strictly better (:func:`pareto_front`;
     the metric's direction from :func:`bench.metrics.higher_is_better`).

2. ``ltr-bench figure quality_cost_figure`` (:func:`quality_cost_figure`): two panels sharing
   the quality axis, cost on a log scale; each method a numbered point with its interval
   (markers by run kind; the key of the numbers under the panels), the front's points red and
   joined by a step line.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from bench.report.tables import metric_label  # noqa: E402

GB = 1e9
CONFIDENCE = 0.95
COLUMNS = ("method", "label", "kind", "n_seeds", "mean", "ci_low", "ci_high", "seconds_per_epoch", "memory_gb",
           "memory", "device", "front_time", "front_memory")
#: what a panel's cost is, per memory record (the axis label)
MEMORY_LABELS = {"gpu": "peak GPU memory (GB, torch.cuda.max_memory_allocated)",
                 "host": "peak host memory (GB, max RSS of the run's process)"}
MARKERS = {"neural": "o", "gbdt": "s", "linear": "^"}


def pareto_front(cost: Any, quality: Any, *, higher_is_better: bool = True) -> np.ndarray:
    """Whether each point is on the Pareto front of (low cost, good quality); NaN is never on it.

    A point is dominated when another is at most as costly and at least as good, one of the
    two strictly. Ties (same cost and quality) are both on the front.

    >>> pareto_front([1, 2, 3, 2], [0.5, 0.7, 0.6, 0.4]).tolist()
    [True, True, False, False]
    >>> pareto_front([1, 1, float("nan")], [0.5, 0.5, 0.9]).tolist()
    [True, True, False]
    """
    c = np.asarray(cost, dtype=float)
    q = np.asarray(quality, dtype=float)
    q = q if higher_is_better else -q
    ok = np.isfinite(c) & np.isfinite(q)
    front = ok.copy()
    for i in np.flatnonzero(ok):
        others = ok & (c <= c[i]) & (q >= q[i]) & ((c < c[i]) | (q > q[i]))
        front[i] = not others.any()
    return front


def seed_interval(mean: float, std: float, n_seeds: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval of a mean over ``n_seeds`` per-seed means (NaN with one seed).

    >>> [round(v, 4) for v in seed_interval(0.5, 0.01, 3)]  # t_{0.975, 2} = 4.3027
    [0.4752, 0.5248]
    """
    if n_seeds < 2:
        return math.nan, math.nan
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, n_seeds - 1)) * std / math.sqrt(n_seeds)
    return mean - half, mean + half


def _run_costs(spec: dict[str, Any]) -> pd.DataFrame:
    """Per run: method, training seconds per epoch, peak GPU and host bytes, device (run.json).
    A method selected on validation counts its chosen point's runs only (``spec["selection"]``:
    the records, :func:`bench.config.selection.keep_chosen`)."""
    from bench.config.selection import keep_chosen
    from bench.results import read_record, read_run_info

    rows = []
    for run in keep_chosen(spec["runs"], [read_record(p) for p in spec.get("selection", [])]):
        info = read_run_info(run["dir"])
        peak = info.get("peak_memory") or {}
        rows.append({"method": run["method"], "seconds_per_epoch": info.get("seconds_per_epoch"),
                     "gpu": peak.get("cuda_max_allocated_bytes"), "host": peak.get("host_max_rss_bytes"),
                     "device": f"{info.get('device', '?')}: {info.get('device_name', '?')}"})
    return pd.DataFrame(rows).astype({"seconds_per_epoch": float, "gpu": float, "host": float})


def quality_cost_table(stats: pd.DataFrame, spec: dict[str, Any]) -> pd.DataFrame:
    """One row per method of ``spec["methods"]`` (columns :data:`COLUMNS`; see the module docstring).

    ``stats``: the table's statistics (:func:`bench.stats.significance`); ``spec``:
    :func:`bench.config.plan.quality_cost_spec` (dataset, metric, methods with label and kind,
    runs with method and directory).
    """
    from bench.metrics import higher_is_better

    metric, dataset = spec["metric"], spec["dataset"]
    rows = stats[(stats["dataset"] == dataset) & (stats["metric"] == metric)].set_index("method")
    missing = [m["name"] for m in spec["methods"] if m["name"] not in rows.index]
    if missing:
        raise ValueError(f"the statistics of table {spec['table']} lack {metric} on {dataset} for {missing}")
    costs = _run_costs(spec)
    memory = "gpu" if costs["gpu"].notna().any() else "host"
    per_method = costs.groupby("method", sort=False).agg(
        seconds_per_epoch=("seconds_per_epoch", "mean"), memory=(memory, "max"),
        device=("device", lambda d: ", ".join(sorted(set(d)))))
    out = []
    for m in spec["methods"]:
        row, cost = rows.loc[m["name"]], per_method.loc[m["name"]]
        low, high = seed_interval(float(row["mean"]), float(row["std_over_seeds"]), int(row["n_seeds"]))
        out.append({"method": m["name"], "label": m["label"], "kind": m["kind"], "n_seeds": int(row["n_seeds"]),
                    "mean": float(row["mean"]), "ci_low": low, "ci_high": high,
                    "seconds_per_epoch": float(cost["seconds_per_epoch"]), "memory_gb": float(cost["memory"]) / GB,
                    "memory": memory, "device": cost["device"]})
    frame = pd.DataFrame(out)
    hib = higher_is_better(metric)
    frame["front_time"] = pareto_front(frame["seconds_per_epoch"], frame["mean"], higher_is_better=hib)
    frame["front_memory"] = pareto_front(frame["memory_gb"], frame["mean"], higher_is_better=hib)
    return frame[list(COLUMNS)]


def _log_axis(ax, values: np.ndarray) -> None:
    """Log x axis with plain-number ticks; over less than a decade, five ticks spread
    geometrically (two significant digits), since a log axis there shows no round number; over
    less than three decades, ticks at 1, 2 and 5 of each decade, so that every point can be read
    (powers of ten alone left a point at 0.015 s with no label to its left)."""
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) and values.max() < 10 * values.min():
        ticks = {float(f"{v:.2g}") for v in np.geomspace(values.min(), values.max(), 5)}
        ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
    elif len(values) and values.max() < 1000 * values.min():
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))


def _panel(ax, data: pd.DataFrame, cost: str, front: str, hib: bool) -> None:
    """One panel: each method a numbered point with its interval, the front in red."""
    for number, row in enumerate(data.itertuples(), start=1):
        x = getattr(row, cost)
        if not np.isfinite(x):
            continue
        on = bool(getattr(row, front))
        err = None if np.isnan(row.ci_low) else [[row.mean - row.ci_low], [row.ci_high - row.mean]]
        color = "tab:red" if on else "tab:gray"
        ax.errorbar(x, row.mean, yerr=err, fmt=MARKERS.get(row.kind, "D"), markersize=6, color=color,
                    mfc=color if on else "white", elinewidth=0.8, capsize=2, alpha=1.0 if on else 0.8,
                    zorder=3 if on else 2)
        ax.annotate(str(number), (x, row.mean), xytext=(4, 2), textcoords="offset points", fontsize=7,
                    color="tab:red" if on else "black", fontweight="bold" if on else "normal")
    line = data[data[front]].sort_values(cost)
    if len(line):
        ax.step(line[cost], line["mean"], where="post", color="tab:red", linewidth=1, alpha=0.6, zorder=1,
                label="Pareto front (no method cheaper and better)")
    _log_axis(ax, data[cost].to_numpy(float))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right" if hib else "upper right")


def _key(fig, data: pd.DataFrame, columns: int = 4) -> None:
    """The numbers' key under the panels, column by column; methods on a front in red."""
    rows = math.ceil(len(data) / columns)
    for i, row in enumerate(data.itertuples()):
        col, line = divmod(i, rows)
        on = bool(row.front_time or row.front_memory)
        fig.text(0.02 + col / columns, -0.02 - 0.03 * line, f"{i + 1}  {row.label}", fontsize=7,
                 color="tab:red" if on else "black", fontweight="bold" if on else "normal", va="top")


def quality_cost_figure(data: pd.DataFrame, spec: dict[str, Any]):
    """Two panels: the metric against seconds per epoch and against peak memory (log x); the
    methods numbered in the table's order, their key under the panels."""
    from bench.metrics import higher_is_better

    missing = [c for c in COLUMNS if c not in data.columns]
    if missing:
        raise ValueError(f"quality-cost table lacks columns {missing}; expected {list(COLUMNS)}")
    metric = spec["metric"]
    hib = higher_is_better(metric)
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(13, 5.2), sharey=True)
    _panel(ax_t, data, "seconds_per_epoch", "front_time", hib)
    _panel(ax_m, data, "memory_gb", "front_memory", hib)
    ax_t.set_xlabel("training seconds per epoch (run.json seconds_per_epoch; log scale)")
    ax_m.set_xlabel(MEMORY_LABELS[str(data["memory"].iloc[0])] + "; log scale")
    seeds = int(data["n_seeds"].max())
    interval = f"95% CI over {seeds} seeds (t)" if seeds > 1 else "one seed: no interval"
    ax_t.set_ylabel(f"test {metric_label(metric)} (mean; {interval})")
    where = f"{spec['dataset_label']}, {spec['table']} runs, profile {spec['profile']}"
    ax_t.set_title(f"Quality vs training time per epoch ({where})", fontsize=9)
    ax_m.set_title("Quality vs peak memory (markers: o neural, s GBDT, ^ linear; red: on the front)", fontsize=9)
    fig.tight_layout()
    _key(fig, data)
    return fig

r"""The study's figures (matplotlib, Agg backend), each saved as PNG and PDF.

Every figure has a data function (a tidy frame in, tested on constructed data) and a draw
function returning a ``matplotlib.figure.Figure``; :func:`save` writes PNG and PDF atomically.

- ``scaling_figure`` (PiRank Fig. 7): wall-clock and peak memory vs training list size on
  log-log axes. Each curve's legend entry carries its fitted slope ``b`` of
  ``log(seconds) = a + b log(L)`` (least squares over the measured points), the empirical
  exponent of ``seconds ~ L^b`` (paper: ``b = 2`` for depth 1, ``4/3`` for depth 3). A third
  panel times each loss alone and says whether its slope matches the loss's stated cost
  (:func:`stated_slope`, :func:`slope_verdict`).
- ``temperature_figure`` (PiRank Figs. 5, 8-12), as the paper draws them: ``1 -`` the relaxed
  loss and the hard NDCG@10 on validation lists of ``L = 100`` (Fig. 5), validation NDCG@1, 3,
  5, 15 on the same lists (Figs. 8-11) and the training loss (Fig. 12), for each temperature
  (mean over seeds), each curve smoothed as TensorBoard smooths (:func:`tensorboard_smooth`,
  weight 0.9 in PiRank's Appendix D) with the raw curve faint behind, against thousands of
  iterations (:func:`temperature_data`).
- ``listsize_figure`` (PiRank Fig. 6): relative NDCG@k change (percent) over the method
  trained at the smallest L_train, per L_test, from the listsize statistics table.
- ``recall_heatmap`` (ARF Figs. 2-6): :mod:`bench.report.heatmap` (models trained per (m, k)
  against the metric's (m, k), and the share of columns the diagonal wins).
- ``neuralndcg_curves`` (NeuralNDCG Figs. 1-2): NDCG and NeuralNDCG (with and without
  Sinkhorn scaling, several tau) of the papers' toy lists as one score ``x`` varies, from the
  table :mod:`bench.curves` computes (``ltr-bench loss-curves``).
- ``quality_cost_figure`` (this suite's own): :mod:`bench.report.quality_cost` (a table's
  metric with its interval over seeds against seconds per epoch and peak memory, Pareto fronts).

Every figure is drawn from computed tables only (perf CSV, statistics, per-query frames,
curves); nothing here trains, evaluates or calls a loss.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter  # noqa: E402

from bench.atomic import write_files  # noqa: E402
from bench.report.tables import metric_label  # noqa: E402
from bench.results import CURVE_FILE, dataset_key, read_curve  # noqa: E402

SCALING_COLUMNS = ("loss", "variant", "L", "seconds", "peak_mb")


#: format -> what savefig writes into the file beyond the figure: no creation date in the PDF,
#: so the same figure is the same bytes (the PNG carries none); both carry the figure's title
_METADATA = {"png": {}, "pdf": {"CreationDate": None}}


def figure_title(fig) -> str:
    """The figure's title as text: its suptitle, else its panels' titles joined by " | "."""
    title = fig.get_suptitle().strip()
    return title or " | ".join(t for ax in fig.axes if (t := ax.get_title().strip()))


def warm_up() -> None:
    """Render one small figure to PNG and PDF in memory, and drop it.

    The job server calls this once before it forks (``bench.jobserver.WARM_UP``), so every
    figure job starts with what matplotlib loads on a first render already loaded: the fonts,
    mathtext (a log axis's tick labels), the PDF backend. Measured: the study's 8 figure jobs
    forked after it took 17.0 CPU-seconds instead of 27.9. A ``Figure`` without pyplot, so no
    figure number or pyplot state is left behind; the figures' bytes are unchanged (tested in
    ``tests/test_jobserver.py``).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    ax = fig.subplots()
    ax.plot([1, 10, 100], [1, 2, 3], marker="o", label="a")
    ax.set_xscale("log")
    ax.set_title("t")
    ax.legend()
    for fmt in ("png", "pdf"):
        fig.savefig(io.BytesIO(), format=fmt, bbox_inches="tight")


def save(fig, png: str | os.PathLike, pdf: str | os.PathLike) -> None:
    """Write ``fig`` to ``png`` (150 dpi) and ``pdf``, both or neither (:func:`bench.atomic.write_files`:
    drawn in memory, refused before writing when the disk has no room for both); close it. Both
    files carry :func:`figure_title` as their ``Title`` (the report's text reads the PNG's:
    :mod:`bench.report.text`)."""
    files = {}
    title = figure_title(fig)
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=fmt, dpi=150, bbox_inches="tight", metadata={**_METADATA[fmt], "Title": title})
        files[path] = buffer.getvalue()
    plt.close(fig)
    write_files(files)


# ----------------------------------------------------------------------------- scaling


def loglog_slope(x: Iterable[float], y: Iterable[float]) -> float:
    """Least-squares slope of ``log y`` on ``log x`` (NaN with fewer than 2 positive points).

    >>> round(loglog_slope([10, 100, 1000], [3, 300, 30000]), 6)
    2.0
    """
    x = np.asarray(list(x), dtype=float)
    y = np.asarray(list(y), dtype=float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or np.unique(x[ok]).size < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


#: stated cost forms -> (power of n, power of log n); a curve's expected log-log slope over its
#: measured L is the least-squares slope of log(n^a log^b n), so "n log n" over 64..1000 is ~1.19
COMPLEXITY_FORMS: dict[str, tuple[int, int]] = {
    "n": (1, 0), "n log n": (1, 1), "n log^2 n": (1, 2), "n^2": (2, 0), "n^3": (3, 0),
}
#: |measured - expected| within this is "matches". Half the gap between n and n^1.5: it separates
#: n^2 from n log n at every range, but n from n log n (0.1 to 0.2 apart here) not at all.
SLOPE_TOLERANCE = 0.25


def stated_slope(stated: str, lengths: Iterable[float]) -> float:
    """The log-log slope the stated cost form has over ``lengths`` (NaN for an unknown form).

    >>> round(stated_slope("n log n", [64, 216, 512, 1000]), 3), round(stated_slope("n^2", [10, 100]), 9)
    (1.185, 2.0)
    """
    if stated not in COMPLEXITY_FORMS:
        return float("nan")
    power, logs = COMPLEXITY_FORMS[stated]
    x = np.asarray(list(lengths), dtype=float)
    return loglog_slope(x, x**power * np.log(x) ** logs)


def slope_verdict(measured: float, expected: float) -> str:
    """``matches``, ``below`` or ``above`` (the rule: :data:`SLOPE_TOLERANCE`); ``n/a`` if either is NaN.

    Below usually means a fixed per-call cost (kernel launches, Python) still dominates at these L.

    >>> slope_verdict(1.05, 1.18), slope_verdict(1.9, 1.18), slope_verdict(float("nan"), 2.0)
    ('matches', 'above', 'n/a')
    """
    if not (np.isfinite(measured) and np.isfinite(expected)):
        return "n/a"
    if abs(measured - expected) <= SLOPE_TOLERANCE:
        return "matches"
    return "below" if measured < expected else "above"


def _curve_label(loss: str, variant: Any) -> str:
    variant = "" if variant is None or (isinstance(variant, float) and np.isnan(variant)) else str(variant)
    return f"{loss} ({variant})" if variant and variant != "default" else str(loss)


def scaling_data(frame: pd.DataFrame) -> pd.DataFrame:
    """Per curve: label, slope of seconds and of peak memory vs L (one row per curve)."""
    missing = [c for c in SCALING_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"scaling CSV lacks columns {missing}; expected {list(SCALING_COLUMNS)}")
    rows = []
    for (loss, variant), grp in frame.groupby(["loss", "variant"], sort=False, dropna=False):
        grp = grp.sort_values("L")
        row = {"loss": loss, "variant": variant, "label": _curve_label(loss, variant),
               "time_slope": loglog_slope(grp.L, grp.seconds), "mem_slope": loglog_slope(grp.L, grp.peak_mb),
               "points": len(grp)}
        if "loss_seconds" in grp:  # the loss timed alone, and its stated cost (CSVs since issue 35)
            alone = grp[grp.loss_seconds.notna() & (grp.loss_seconds > 0)]
            stated = str(grp.stated.iloc[0]) if "stated" in grp and grp.stated.notna().any() else ""
            row["loss_slope"] = loglog_slope(alone.L, alone.loss_seconds)
            row["stated"] = stated
            row["expected_slope"] = stated_slope(stated, alone.L) if len(alone) >= 2 else float("nan")
            row["verdict"] = slope_verdict(row["loss_slope"], row["expected_slope"]) if stated else "no stated cost"
        rows.append(row)
    return pd.DataFrame(rows)


def scaling_figure(frame: pd.DataFrame, steps: int | None = None, batch_lists: int | None = None):
    """Log-log panels: seconds vs L and peak memory vs L, slopes in the legends; with the CSV's
    ``loss_seconds`` a third panel, the loss alone, each legend entry saying whether its slope
    matches the stated cost (:func:`slope_verdict`)."""
    slopes = scaling_data(frame)
    alone = "loss_slope" in slopes
    fig, axes = plt.subplots(1, 3 if alone else 2, figsize=(18 if alone else 12, 4.8))
    ax_t, ax_m = axes[0], axes[1]
    # ten colours, then the same ten with another marker and dashes: no two curves look alike
    cmap, markers, dashes = plt.get_cmap("tab10"), "osD^v", ("-", "--", "-.", ":", (0, (5, 1)))
    for i, row in enumerate(slopes.itertuples()):
        grp = frame[(frame.loss == row.loss) & (frame.variant.fillna("") == ("" if pd.isna(row.variant) else row.variant))]
        grp = grp.sort_values("L")
        style = {"color": cmap(i % 10), "marker": markers[i // 10 % 5], "linestyle": dashes[i // 10 % 5],
                 "linewidth": 2 if "pirank" in str(row.loss) else 1.2}
        ax_t.plot(grp.L, grp.seconds, label=f"{row.label}: slope {row.time_slope:.2f}", **style)
        ax_m.plot(grp.L, grp.peak_mb, label=f"{row.label}: slope {row.mem_slope:.2f}", **style)
        if alone:
            stated = f"; {row.stated} -> {row.expected_slope:.2f}: {row.verdict}" if row.stated else ""
            axes[2].plot(grp.L, grp.loss_seconds, label=f"{row.label}: slope {row.loss_slope:.2f}{stated}", **style)
    what = f"{steps} training steps" if steps else "the timed steps"
    if batch_lists:
        what += f" of {batch_lists} lists"
    sizes = sorted(frame.L.unique())
    panels = [(ax_t, f"wall-clock of {what} (s)"), (ax_m, "peak memory (MB)")]
    if alone:
        panels.append((axes[2], "loss alone: forward + backward per call (s)"))
    for ax, ylabel in panels:
        ax.set_xscale("log")
        ax.set_yscale("log")
        # plain numbers at the measured L (log axes otherwise print overlapping 3x10^1 labels)
        ax.xaxis.set_major_locator(FixedLocator(sizes))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training list size L (documents per list)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    ax_t.set_title("Time vs list size (log-log; paper: depth 1 ~ L^2, depth 3 ~ L^(4/3))", fontsize=9)
    ax_m.set_title("Peak memory vs list size (log-log)", fontsize=9)
    if alone:
        axes[2].set_title(f"Loss alone; legend: measured slope; stated cost -> its slope here: verdict "
                          f"(within {SLOPE_TOLERANCE:g})", fontsize=9)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- temperature


def read_curves(runs) -> pd.DataFrame:
    """Concatenate ``curve.csv`` of run directories.

    ``runs``: ``[[label, [run_dir, ...]], ...]`` (one directory per seed; the order is the
    legend order) or the same as a mapping.
    """
    frames = []
    for label, dirs in (runs.items() if isinstance(runs, dict) else runs):
        for seed, run_dir in enumerate(dirs):
            path = Path(run_dir) / CURVE_FILE
            if not path.exists():
                raise FileNotFoundError(f"{path}: run has no {CURVE_FILE} (needed for the temperature figure)")
            curve = read_curve(run_dir)
            curve.insert(0, "seed_index", seed)
            curve.insert(0, "label", label)
            frames.append(curve)
    return pd.concat(frames, ignore_index=True)


def _title(fig, text: str | None, height_in: float) -> None:
    """The figure's title above its panels (``text`` None: none), room made for it."""
    if text:
        fig.suptitle(text, fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 * (1 + text.count("\n")) / height_in))
    else:
        fig.tight_layout()


def tensorboard_smooth(values, weight: float) -> np.ndarray:
    r"""TensorBoard's smoothing of a scalar curve: the exponential moving average *with* its
    debiasing, as the scalar dashboard draws it.

    For the finite values :math:`v_1, v_2, \dots` of the series, in order,

    .. math:: m_t = w\,m_{t-1} + (1 - w)\,v_t,\quad m_0 = 0, \qquad
              \tilde v_t = \frac{m_t}{1 - w^t}
              = \frac{\sum_{i \le t} w^{t-i} v_i}{\sum_{i \le t} w^{t-i}},

    a weighted mean of the values so far (the division removes the pull towards the zero start;
    the first point is the raw one). A non-finite value is drawn as it is and does not enter the
    average, and ``w = 0`` leaves the curve raw, as in TensorBoard. PiRank's Appendix D draws its
    Figs. 5 and 8-12 with ``w = 0.9``.

    >>> [round(float(v), 4) for v in tensorboard_smooth([1.0, 0.0, 0.0], 0.5)]  # 0.5/0.5, 0.25/0.75, 0.125/0.875
    [1.0, 0.3333, 0.1429]
    >>> tensorboard_smooth([2.0, float("nan"), 2.0], 0.9).tolist()
    [2.0, nan, 2.0]
    """
    from scipy.signal import lfilter

    v = np.asarray(values, dtype=float)
    out = v.copy()
    ok = np.isfinite(v)
    if weight == 0 or not ok.any():
        return out
    finite = v[ok]
    ema = lfilter([1.0 - weight], [1.0, -weight], finite)
    out[ok] = ema / (1.0 - weight ** np.arange(1, finite.size + 1))
    return out


#: the validation metric of each of PiRank's Figs. 8-11 (Fig. 5 is NDCG@10 with the relaxed metric)
PIRANK_METRIC_FIGURES = {"ndcg@1": 8, "ndcg@3": 9, "ndcg@5": 10, "ndcg@15": 11}
RELAXED_METRIC = "ndcg@10"


def temperature_data(curves: pd.DataFrame, metrics: list[str], list_size: int, smoothing: float) -> pd.DataFrame:
    """The curves of PiRank's Figs. 5 and 8-12, one row per (panel, label, point): columns
    ``panel, label, kind, kiloiter, raw, smoothed``.

    Per temperature label the seeds' curves are averaged epoch by epoch, then each series is
    smoothed (:func:`tensorboard_smooth`, weight ``smoothing``) against ``kiloiter``, the epoch's
    last training step in thousands. Panels: ``fig5`` (kind ``relaxed``: ``1 - vali_L<L>_loss``, the
    relaxed NDCG@10 on validation lists of ``L = list_size``; kind ``hard``: ``vali_L<L>_ndcg@10``),
    each other metric on the same lists (kind ``metric``), ``train_loss`` (kind ``loss``: the mean
    training loss of each epoch's steps).

    >>> curve = pd.DataFrame({"label": "t", "seed_index": 0, "epoch": [1, 2], "step": [500, 1000],
    ...     "train_loss": [0.5, 0.4], "vali_L9_loss": [0.6, 0.2], "vali_L9_ndcg@10": [0.3, 0.7]})
    >>> d = temperature_data(curve, ["ndcg@10"], 9, 0.0)
    >>> d[d.panel == "fig5"][["kind", "kiloiter", "raw"]].values.tolist()
    [['relaxed', 0.5, 0.4], ['relaxed', 1.0, 0.8], ['hard', 0.5, 0.3], ['hard', 1.0, 0.7]]
    """
    prefix = f"vali_L{int(list_size)}_"
    needed = [f"{prefix}loss", *(f"{prefix}{m}" for m in metrics)]
    missing = [c for c in needed if c not in curves]
    if missing:
        raise ValueError(f"temperature_figure: the run curves have no {missing} columns; its runs record them "
                         f"on validation lists of L = {list_size} (train.vali_curve_list_size, set by the workflow "
                         f"from figures.temperature_figure.vali_list_size): retrain them")
    mean = curves.groupby(["label", "epoch"], sort=False).mean(numeric_only=True).reset_index()
    series = [("fig5", "relaxed", lambda f: 1.0 - f[f"{prefix}loss"])]
    if RELAXED_METRIC in metrics:
        series.append(("fig5", "hard", lambda f: f[f"{prefix}{RELAXED_METRIC}"]))
    series += [(m, "metric", lambda f, m=m: f[f"{prefix}{m}"]) for m in metrics if m != RELAXED_METRIC]
    series.append(("train_loss", "loss", lambda f: f["train_loss"]))
    rows = []
    for label in dict.fromkeys(curves["label"]):
        sub = mean[mean.label == label].sort_values("epoch")
        for panel, kind, column in series:
            raw = np.asarray(column(sub), dtype=float)
            rows.append(pd.DataFrame({"panel": panel, "label": label, "kind": kind, "kiloiter": sub["step"] / 1000.0,
                                      "raw": raw, "smoothed": tensorboard_smooth(raw, smoothing)}))
    return pd.concat(rows, ignore_index=True)


def temperature_figure(data: pd.DataFrame, list_size: int, smoothing: float, subject: str | None = None,
                       graded: str | None = None):
    """PiRank Figs. 5 and 8-12 from :func:`temperature_data`: each curve smoothed, the raw one
    faint behind it, against thousands of iterations; the title names ``subject`` (the loss and
    dataset, :func:`bench.config.plan.figure_subject`) and the rules the validation metrics are
    graded by (``graded``, :func:`bench.metrics.validation_rules`: a query without a relevant
    document scores 0 under TF-Ranking's, which lowers every NDCG curve by that share of queries)."""
    panels = list(dict.fromkeys(data["panel"]))
    labels = list(dict.fromkeys(data["label"]))
    ncols = 3
    nrows = int(np.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.4 * nrows), squeeze=False)
    cmap = plt.get_cmap("viridis")
    colors = {lab: cmap(i / max(1, len(labels) - 1)) for i, lab in enumerate(labels)}
    lists = f"validation lists of L = {list_size}"
    for ax, panel in zip(axes.flat, panels):
        for lab in labels:
            for kind, style in (("relaxed", "-"), ("metric", "-"), ("loss", "-"), ("hard", "--")):
                sub = data[(data.panel == panel) & (data.label == lab) & (data.kind == kind)]
                if sub.empty:
                    continue
                name = {"relaxed": f"{lab}: 1 - loss", "hard": f"{lab}: {metric_label(RELAXED_METRIC)}"}.get(kind, lab)
                if smoothing > 0:
                    ax.plot(sub.kiloiter, sub.raw, color=colors[lab], linestyle=style, alpha=0.25, linewidth=0.8)
                ax.plot(sub.kiloiter, sub.smoothed, color=colors[lab], linestyle=style, label=name)
        if panel == "fig5":
            title = f"PiRank Fig. 5: 1 - relaxed loss (full) and {metric_label(RELAXED_METRIC)} (dashed)"
        elif panel == "train_loss":
            title = "PiRank Fig. 12: training loss"
        else:
            number = PIRANK_METRIC_FIGURES.get(panel)
            title = (f"PiRank Fig. {number}: " if number else "") + f"validation {metric_label(panel)}"
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("iterations (thousands)")
        ax.set_ylabel("training loss" if panel == "train_loss" else f"metric on {lists}", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    how = f"smoothed as TensorBoard does (weight {smoothing:g}), raw faint behind" if smoothing > 0 else "raw"
    rules = f"\nvalidation metrics graded by {graded}" if graded else ""
    _title(fig, f"Temperature: {subject or 'PiRank-NDCG@10'}; {how}; mean over seeds{rules}", 3.4 * nrows)
    return fig


# ----------------------------------------------------------------------------- list size


def listsize_data(stats: pd.DataFrame, dataset: str, l_train: dict[str, int], list_sizes: list[int],
                  metrics: list[str]) -> pd.DataFrame:
    """Relative change (%) of each method's mean over the smallest-L_train method, per L_test."""
    base_method = min(l_train, key=l_train.get)
    rows = []
    for metric in metrics:
        for size in list_sizes:
            sub = stats[(stats.dataset == dataset_key(dataset, size)) & (stats.metric == metric)]
            means = dict(zip(sub.method, sub["mean"]))
            if base_method not in means:
                raise ValueError(f"listsize statistics lack {base_method} for {metric} at L_test={size}")
            for method, ltr in l_train.items():
                if method in means:
                    rel = 100.0 * (means[method] / means[base_method] - 1.0) if means[base_method] else float("nan")
                    rows.append({"metric": metric, "l_test": size, "l_train": ltr, "method": method, "relative": rel})
    return pd.DataFrame(rows)


def listsize_figure(data: pd.DataFrame, subject: str | None = None):
    """Relative change per test list size, one line per training list size; the title names
    ``subject`` (the loss and dataset)."""
    metrics = list(dict.fromkeys(data.metric))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.4), squeeze=False, sharey=True)
    base = int(data.l_train.min())
    for ax, metric in zip(axes.flat, metrics):
        sub = data[data.metric == metric]
        sizes = sorted(sub.l_test.unique())
        pos = {s: i for i, s in enumerate(sizes)}
        for ltr in sorted(sub.l_train.unique()):
            line = sub[sub.l_train == ltr].sort_values("l_test")
            ax.plot([pos[s] for s in line.l_test], line.relative, marker="o",
                    linestyle="--" if ltr == base else "-", label=f"L_train = {ltr}")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
        ax.axhline(0, color="gray", linewidth=0.8)
        ax.set_title(metric_label(metric), fontsize=10)
        ax.set_xlabel("test list size L_test")
        ax.grid(True, alpha=0.3)
    axes.flat[0].set_ylabel(f"relative change over L_train = {base} (%)")
    axes.flat[-1].legend(fontsize=7)
    _title(fig, subject and f"Training vs test list size: {subject}", 3.4)
    return fig


# ----------------------------------------------------------------------------- NeuralNDCG toy curves

def neuralndcg_curves(data: pd.DataFrame, taus: list[float] | None = None):
    """Two panels (Figs. 1 and 2) from :func:`bench.curves.neuralndcg_curve_data`'s table; the
    title says that the temperatures ``taus`` are this suite's (the paper's text names none for
    its Fig. 2: they are in its figure's legend only)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    titles = {"fig1": "y = [2, 1, 0, 0, 0], s = [4, 1, 0, 0, x]  (NeuralNDCG Fig. 1)",
              "fig2": "y = [1, 2, 3, 4, 5], s = [1, 2, 3, 4, x]  (NeuralNDCG Fig. 2)"}
    for ax, panel in zip(axes, ("fig1", "fig2")):
        sub = data[data.panel == panel]
        for curve in dict.fromkeys(sub.curve):
            line = sub[sub.curve == curve]
            ax.plot(line.x, line.value, label=curve, linewidth=2.2 if curve == "NDCG" else 1.3,
                    color="black" if curve == "NDCG" else None, linestyle="-" if curve == "NDCG" else "--")
        ax.set_title(titles[panel], fontsize=9)
        ax.set_xlabel("varied score x of the last document")
        ax.set_ylabel("NDCG@max / NeuralNDCG@max")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    shown = ", ".join(f"{t:g}" for t in taus or [])
    _title(fig, shown and (f"NeuralNDCG at tau = {shown}: this suite's temperatures (figures.neuralndcg_curves.taus), "
                           "not read off the paper's figures"), 4.2)
    return fig

r"""The ranking across datasets and folds (``ltr-bench ranking``, :mod:`bench.ranking`) as a table and
as a critical-difference diagram (Demšar 2006, Sec. 3.2.2 and Fig. 1).

Both read the ranking frame only and recompute no statistic:

- :func:`ranking_table` (the computed table ``ranking_table``): one block per metric, its title the
  Friedman test (chi-squared, df, p), the number of blocks N, of methods k and the critical
  difference CD at alpha; rows are the methods by mean rank: mean rank, the metric's mean over the
  blocks ± the mean seed-to-seed standard deviation, with few blocks (at most
  :data:`MAX_BLOCK_COLUMNS`) each block's mean ± seed std (rank), the Nemenyi p-value against the
  best ("vs best") and the within-seed-spread mark. **Bold**: the best mean rank (underlined) and
  every method not distinguishable from it, as bold marks "not significantly worse" in the
  statistics tables.
- :func:`cd_diagram` (the figure ``cd_diagram``): one panel per metric, drawn by
  ``scikit_posthocs.critical_difference_diagram``: every method at its mean rank on the axis (1 =
  best, at the left), thick bars joining the methods no test separates (Nemenyi p >= alpha; one
  bar over all when the Friedman test does not reject), the CD drawn as a segment above the axis.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.report.tables import Block, Cell, Table, _convention_parts, decimals, metric_label  # noqa: E402
from bench.results import dataset_key  # noqa: E402

#: per-block columns are shown with at most this many blocks (beyond, the table stays readable
#: with the mean over blocks alone)
MAX_BLOCK_COLUMNS = 6
#: the ranking frame's columns the renderers read (bench.ranking.COLUMNS)
NEEDED = ("part", "metric", "dataset", "fold", "method", "other", "mean", "seed_std", "rank", "mean_rank",
          "position", "is_best", "distinguishable", "within_seed_spread", "p_value", "n_blocks", "n_methods",
          "friedman_chi2", "friedman_df", "friedman_p", "friedman_rejects", "q_alpha", "cd", "alpha", "n_seeds")


def _check(frame: pd.DataFrame) -> None:
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise ValueError(f"ranking frame lacks columns {missing}; write it with `ltr-bench ranking`")


def _labels(spec: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m.get("label") or m["name"] for m in spec.get("methods", [])}


def block_labels(spec: dict[str, Any]) -> dict[str, str]:
    """The frame's block dataset key -> its label (a test list size L: ``<label> L_test=<L>``).

    >>> block_labels({"datasets": [{"name": "w", "label": "Web"}], "list_sizes": [10]})
    {'w@Ltest=10': 'Web L_test=10'}
    """
    out = {}
    for ds in spec.get("datasets", []):
        for size in spec.get("list_sizes") or [None]:
            label = ds.get("label") or ds["name"]
            out[dataset_key(ds["name"], size)] = label + (f" L_test={size}" if size else "")
    return out


def friedman_line(test: dict[str, Any]) -> str:
    """The Friedman test and the CD of one metric, as its block title and figure title say them.

    >>> line = friedman_line({"friedman_chi2": 9.28, "friedman_df": 3, "friedman_p": 0.0258, "n_blocks": 14,
    ...     "friedman_rejects": True, "n_methods": 4, "cd": 1.2536, "q_alpha": 2.569, "alpha": 0.05})
    >>> for part in line.split("; "):
    ...     print(part)
    Friedman chi2 = 9.28 (df 3), p = 0.0258: rejects H0 at alpha = 0.05
    N = 14 blocks, k = 4 methods, CD = 1.25 (q_alpha = 2.569)
    """
    verdict = ("rejects H0" if test["friedman_rejects"] else "does not reject H0 (no pair is told apart)")
    return (f"Friedman chi2 = {test['friedman_chi2']:.2f} (df {int(test['friedman_df'])}), "
            f"p = {test['friedman_p']:.3g}: {verdict} at alpha = {test['alpha']:g}; N = {int(test['n_blocks'])} "
            f"blocks, k = {int(test['n_methods'])} methods, CD = {test['cd']:.2f} (q_alpha = {test['q_alpha']:.3f})")


def _metric_rows(frame: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The metric's method rows (by position), its block rows and its test."""
    rows = frame[frame["metric"] == metric]
    methods = rows[rows["part"] == "method"].sort_values("position")
    if methods.empty:
        raise ValueError(f"the ranking has no rows of metric {metric!r} (it ranks {sorted(set(frame['metric']))})")
    return methods, rows[rows["part"] == "block"], methods.iloc[0].to_dict()


def _mean_std(mean: float, std: float, metric: str, several: bool) -> str:
    text = f"{mean:.{decimals(metric)}f}"
    return f"{text} ± {std:.{decimals(metric)}f}" if several and not math.isnan(std) else text


def _rank(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}".rstrip("0")


def ranking_table(inputs: list[str], spec: dict[str, Any], paper: pd.DataFrame | None = None) -> Table:
    """The computed table ``ranking_table`` from the ranking parquet (see the module docstring)."""
    from bench.results import read_frame

    if len(inputs) != 1:
        raise ValueError(f"{spec.get('name', 'ranking_table')}: expected the ranking (ltr-bench ranking) as the one "
                         f"input, got {len(inputs)}")
    return build_ranking_table(read_frame(inputs[0]), spec)


def build_ranking_table(frame: pd.DataFrame, spec: dict[str, Any]) -> Table:
    """:func:`ranking_table` on a ranking frame already read."""
    _check(frame)
    labels, blocks_of = _labels(spec), block_labels(spec)
    several = len(spec.get("seeds", [0])) > 1
    out = []
    for metric in spec["metrics"]:
        methods, blocks, test = _metric_rows(frame, metric)
        keys = list(dict.fromkeys(zip(blocks["dataset"], blocks["fold"])))
        per_block = len(keys) <= MAX_BLOCK_COLUMNS
        header = ["Method", "mean rank", "mean ± seed std" if several else "mean over blocks"]
        if per_block:
            header += [f"{blocks_of.get(ds, ds)} {fold}" for ds, fold in keys]
        header += ["vs best (Nemenyi p)", "within seed spread of best"]
        cells = {(r.dataset, r.fold, r.method): r for r in blocks.itertuples()}
        rows = []
        for r in methods.itertuples():
            together = bool(r.is_best) or not bool(r.distinguishable)
            row = [Cell(labels.get(r.method, r.method), bold=together, underline=bool(r.is_best)),
                   Cell(f"{r.mean_rank:.2f}", bold=together, underline=bool(r.is_best)),
                   Cell(_mean_std(r.mean, r.seed_std, metric, several))]
            if per_block:
                for ds, fold in keys:
                    b = cells[(ds, fold, r.method)]
                    row.append(Cell(f"{_mean_std(b.mean, b.seed_std, metric, several)} ({_rank(b.rank)})"))
            if r.is_best:
                row += [Cell("best"), Cell("–")]
            else:
                word = "distinguishable" if r.distinguishable else "not distinguishable"
                row += [Cell(f"{word} (p = {r.p_value:.3g})"),
                        Cell("within seed spread" if r.within_seed_spread else ("no" if several else "n/a"))]
            rows.append(row)
        out.append(Block(f"{metric_label(metric)}: {friedman_line(test)}", header, rows))
    return Table(spec["name"], spec.get("title") or spec["name"], caption(spec, frame), out)


def _blocks_sentence(spec: dict[str, Any]) -> str:
    blocks = list(spec.get("blocks") or [])
    if len(blocks) <= 12:
        return ", ".join(blocks)
    per: dict[str, int] = {}
    for b in blocks:
        per[b.split("/", 1)[0]] = per.get(b.split("/", 1)[0], 0) + 1
    return ", ".join(f"{ds} ({n} fold{'s' if n > 1 else ''})" for ds, n in per.items())


def caption(spec: dict[str, Any], frame: pd.DataFrame | None = None) -> str:
    """The table's caption: what a block is, how ranks, tests, CD and marks are made, the power."""
    seeds = len(spec.get("seeds", [0]))
    alpha = spec.get("alpha", 0.05)
    n_blocks = len(spec.get("blocks") or []) or (int(frame["n_blocks"].max()) if frame is not None else 0)
    k = len(spec.get("methods") or [])
    table = spec.get("table", "")
    parts = [
        f"This suite's own table (profile: {spec.get('profile', '?')}): the {k} methods of "
        f"{spec.get('table_title', table)} ({table}) ranked across its datasets and folds, "
        "Demšar's procedure (JMLR 7, 2006, Sec. 3.2.2).",
        f"A block is one dataset and test fold; N = {n_blocks} blocks: {_blocks_sentence(spec)}.",
        (f"In each block a method's value is the mean over its {seeds} seeds of each seed's mean of the metric "
         if seeds > 1 else "In each block a method's value is its one seed's mean of the metric ")
        + "over the block's test queries, averaged exactly as the statistics tables average them (a query dropped "
        "for any method is dropped for all; OPA and ARP pooled with their weights where the convention pools them).",
        "The methods are ranked within each block (1 = best; the smallest value is best for a metric marked ↓), "
        "values equal to 12 decimals tie and share the average of the ranks they span; 'mean rank' averages a "
        "method's ranks over the N blocks, and rows are sorted by it.",
        "Per metric, the Friedman test (scipy.stats.friedmanchisquare, corrected for ties) tests whether all methods "
        "are equivalent; the Nemenyi post-hoc test (scikit-posthocs, posthoc_nemenyi_friedman) compares every pair, "
        "and two methods differ at level alpha exactly when their mean ranks differ by more than the critical "
        f"difference CD = q_alpha sqrt(k(k+1)/(6N)), q_alpha the studentized range quantile over sqrt 2; alpha = {alpha:g}. "
        "Each block's title gives chi2, its degrees of freedom (k - 1), p, N, k and CD.",
        "Bold: the best mean rank (underlined) and every method not distinguishable from it: the Friedman test did "
        "not reject (the post-hoc test is read only after it rejects), or the method's Nemenyi p-value against the "
        "best is at least alpha (mean ranks within CD); 'vs best' gives that p-value. A method not distinguishable is "
        "not shown to be equal: with these blocks no difference could be told.",
        ("'mean ± seed std': the metric's mean over the blocks ± the mean over the blocks of the seed-to-seed "
         "standard deviation (sample sd of the per-seed means). 'within seed spread': the method's mean over the "
         "blocks differs from the best's by less than the seed std of either, so another draw of seeds could "
         "swap them."
         if seeds > 1 else
         "'mean over blocks': the metric's mean over the blocks; with one seed there is no seed-to-seed spread "
         "('within seed spread': n/a)."),
    ]
    if n_blocks <= MAX_BLOCK_COLUMNS:
        parts.append("Each block's column: the method's mean" + (" ± seed std" if seeds > 1 else "") +
                     " there, (its rank in the block).")
    parts.append(
        f"With few blocks the test has little power: CD shrinks only as 1/sqrt(N) and grows with k (here k = {k}), "
        "so with a handful of blocks hardly any pair can be told apart. Folds of one dataset are not independent "
        "data sets as Demšar's are (they share the collection), so read p-values as a summary, not a proof.")
    parts.extend(_convention_parts(spec, {"empty_query": "one", "ties": "stable", **spec.get("evaluation", {})}))
    return " ".join(parts)


# ----------------------------------------------------------------------------- the figure


def _subject(spec: dict[str, Any]) -> str:
    """The datasets and blocks a panel ranks over, for its title."""
    per: dict[str, int] = {}
    for b in spec.get("blocks") or []:
        per[b.split("/", 1)[0]] = per.get(b.split("/", 1)[0], 0) + 1
    names = {ds["name"]: ds.get("label") or ds["name"] for ds in spec.get("datasets", [])}
    return ", ".join(f"{names.get(ds, ds)} ({n} fold{'s' if n > 1 else ''})" for ds, n in per.items())


def cd_diagram(frame: pd.DataFrame, spec: dict[str, Any]):
    """One critical-difference panel per metric of ``spec["metrics"]`` (module docstring)."""
    import scikit_posthocs

    _check(frame)
    labels = _labels(spec)
    panels = [_metric_rows(frame, metric) for metric in spec["metrics"]]
    k = max(int(test["n_methods"]) for _, _, test in panels)
    rows = math.ceil(k / 2) + 4  # label lines per side, the bars, the CD segment
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 0.26 * rows * len(panels) + 1.2), squeeze=False)
    for ax, metric, (methods, _, test) in zip(axes[:, 0], spec["metrics"], panels):
        ranks = pd.Series({labels.get(m, m): float(r) for m, r in zip(methods["method"], methods["mean_rank"])})
        p = _significance(frame, metric, labels, bool(test["friedman_rejects"]))
        scikit_posthocs.critical_difference_diagram(
            ranks, p, alpha=float(test["alpha"]), ax=ax,
            label_fmt_left="{label} ({rank:.2f})", label_fmt_right="({rank:.2f}) {label}",
            label_props={"fontsize": 7.5}, color_palette=["0.15"] * len(ranks),
            crossbar_props={"color": "tab:red", "linewidth": 3, "alpha": 0.75}, text_h_margin=0.3)
        _cd_scale(ax, float(test["cd"]), int(test["n_methods"]))
        ax.set_title(f"{metric_label(metric)}: mean rank over {int(test['n_blocks'])} dataset-fold blocks of "
                     f"{_subject(spec)} (1 = best)\n{friedman_line(test)}; red bars: no significant difference "
                     "(Nemenyi)" + ("" if test["friedman_rejects"] else ", one over all: Friedman does not reject"),
                     fontsize=8.5)
    fig.suptitle(f"Critical-difference diagram: {spec.get('table_title', spec.get('table', ''))} "
                 f"(profile {spec.get('profile', '?')})", fontsize=10)
    fig.tight_layout()
    return fig


def _cd_scale(ax, cd: float, k: int) -> None:
    """The axis from rank 1 to k (or to 1 + CD when CD is longer) and the CD drawn as a scale bar
    above the rank axis's tick labels, from rank 1 (the library's own CD line would take the bars'
    colour and sit on the tick labels)."""
    bottom, _ = ax.get_ylim()
    ax.set_xlim(1 - 0.02 * k, max(k, 1 + cd) + 0.02 * k)
    ax.set_ylim(bottom, 3.4)
    ax.plot([1, 1 + cd], [2.0, 2.0], color="black", linewidth=1.5, clip_on=False)
    ax.plot([1, 1], [1.7, 2.3], color="black", linewidth=1.5, clip_on=False)
    ax.plot([1 + cd, 1 + cd], [1.7, 2.3], color="black", linewidth=1.5, clip_on=False)
    ax.text(1 + cd / 2, 2.45, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(1, k + 1))
    ax.tick_params(axis="x", labelsize=7)


def _significance(frame: pd.DataFrame, metric: str, labels: dict[str, str], rejects: bool) -> pd.DataFrame:
    """The Nemenyi p-values of ``metric`` as a labels x labels frame (ones on the diagonal); all ones
    when the Friedman test does not reject (no pair is told apart)."""
    pairs = frame[(frame["metric"] == metric) & (frame["part"] == "pair")]
    p = pairs.pivot(index="method", columns="other", values="p_value").astype(float)
    names = list(dict.fromkeys([*p.index, *p.columns]))
    p = p.reindex(index=names, columns=names)
    values = p.to_numpy(np.float64, copy=True)
    np.fill_diagonal(values, 1.0)
    if not rejects:
        values[:] = 1.0
    shown = [labels.get(m, m) for m in names]
    return pd.DataFrame(values, index=shown, columns=shown)

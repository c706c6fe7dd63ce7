r"""Render a statistics table (``results/stats/<table>.parquet``) as Markdown, LaTeX and HTML.

The renderer reads the tidy statistics frame of :func:`bench.stats.significance` (columns
dataset, metric, method, mean, std_over_seeds, n_queries, p_value, p_adjusted, ci_low,
ci_high, is_best, not_worse, wins, ties, losses) and never recomputes a statistic: every
number and every mark comes from a column.

Marks (stated in every caption):

- **bold**: the best mean and every method not significantly worse than it
  (``is_best or not_worse``), the convention of the PiRank paper
  (docs/metrics-and-stats.md, "Significance tests");
- underline: the best mean alone (``is_best``), so a reader can tell the winner from the
  methods tied with it.

A cell reads ``mean ± std`` where std is the standard deviation over seeds of the per-seed
means (shown only with several seeds). When a dataset is the real dataset a paper used
(its registry ``source`` equals the paper's dataset), a "paper (Δ)" column follows each
metric: the number printed in the paper and ours minus it. Beside a benchmark's own published
baselines (LETOR's), that column is "published (Δ)" and each block ends with the published
range (:mod:`bench.report.published`).

The table is first built as a small format-free model (:class:`Table` of :class:`Block` of
:class:`Cell`), then emitted by :func:`to_markdown`, :func:`to_latex` or :func:`to_html`.

Layouts: ``methods`` (one block per dataset, methods x metrics, as in PiRank Table 1) and
``listsize`` (one block per metric, L_test x L_train, as in PiRank Table 3; the statistics
rows of L_test = L are those whose dataset is ``<dataset>@Ltest=<L>``,
:func:`bench.results.dataset_key`).

>>> import pandas as pd
>>> stats = pd.DataFrame({"dataset": ["d", "d"], "metric": ["mrr", "mrr"], "method": ["a", "b"],
...     "mean": [0.5, 0.4], "std_over_seeds": [0.01, 0.02], "n_queries": [10, 10],
...     "is_best": [True, False], "not_worse": [False, True]})
>>> spec = {"name": "t", "datasets": [{"name": "d"}], "methods": [{"name": "a"}, {"name": "b"}],
...         "metrics": ["mrr"], "seeds": [0, 1]}
>>> print(to_markdown(build_table(stats, spec)).split("\n")[-3:])
['| a | **<u>0.5000</u>** ± 0.0100 |', '| b | **0.4000** ± 0.0200 |', '']
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from bench.metrics import LOWER_IS_BETTER, conventions_caption, parse_metric
from bench.report import published as P
from bench.results import dataset_key

TEST_NAMES = {
    "t": "one-sided paired t-test",
    "wilcoxon": "one-sided Wilcoxon signed-rank test",
    "permutation": "one-sided paired permutation test",
}
STATS_COLUMNS = ("dataset", "metric", "method", "mean", "std_over_seeds", "n_queries", "is_best", "not_worse")


def metric_label(metric: str) -> str:
    """Display name of a metric.

    >>> metric_label("ndcg@10"), metric_label("ndcg@max"), metric_label("arp"), metric_label("recall@30@15")
    ('NDCG@10', 'NDCG', 'ARP ↓', 'Recall@30@15')
    >>> metric_label("recall_arf@30@15")  # ARF eq. 4 (divides by k; the caption says so)
    'Recall@30@15 (ARF)'
    >>> metric_label("err@10"), metric_label("rbp@0.8"), metric_label("rbp_residual@0.8"), metric_label("map@10")
    ('ERR@10', 'RBP@0.8', 'RBP residual@0.8 ↓', 'MAP@10')
    """
    name, _, rest = metric.partition("@")
    if rest == "max":
        rest = ""
    if name == "recall_arf":
        return f"Recall@{rest} (ARF)"
    pretty = {"ndcg": "NDCG", "dcg": "DCG", "err": "ERR", "mrr": "MRR", "opa": "OPA", "opa_arf": "OPA (ARF)",
              "arp": "ARP", "recall": "Recall", "map": "MAP", "precision": "P", "rbp": "RBP",
              "rbp_residual": "RBP residual"}.get(name, name)
    label = f"{pretty}@{rest}" if rest else pretty
    return f"{label} ↓" if name in LOWER_IS_BETTER else label  # any name: curve columns too


def decimals(metric: str) -> int:
    """Printed digits: ARP is a rank position (3 decimals), the rest are fractions or gains (4)."""
    return 3 if parse_metric(metric).kind == "arp" else 4


@dataclass
class Cell:
    text: str
    bold: bool = False
    underline: bool = False
    sub: str = ""  # plain suffix after the marked part (e.g. "± 0.0012")


@dataclass
class Block:
    title: str
    header: list[str]
    rows: list[list[Cell]]


@dataclass
class Table:
    name: str
    title: str
    caption: str
    blocks: list[Block] = field(default_factory=list)


def _fmt(value: float, metric: str, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:+.{decimals(metric)}f}" if signed else f"{value:.{decimals(metric)}f}"


def _index_stats(stats: pd.DataFrame) -> dict[tuple[str, str, str], dict[str, Any]]:
    missing = [c for c in STATS_COLUMNS if c not in stats.columns]
    if missing:
        raise ValueError(f"statistics table lacks columns {missing} (has {list(stats.columns)})")
    out = {}
    for rec in stats.to_dict("records"):
        key = (str(rec["dataset"]), str(rec["metric"]), str(rec["method"]))
        if key in out:
            raise ValueError(f"statistics table has two rows for dataset/metric/method {key}")
        out[key] = rec
    return out


def _stat_cell(rec: dict[str, Any] | None, metric: str, several_seeds: bool) -> Cell:
    if rec is None:
        return Cell("n/a")
    std = rec.get("std_over_seeds")
    sub = ""
    if several_seeds and std is not None and not (isinstance(std, float) and math.isnan(std)):
        sub = f"± {_fmt(float(std), metric)}"
    return Cell(
        _fmt(float(rec["mean"]), metric),
        bold=bool(rec["is_best"]) or bool(rec["not_worse"]),
        underline=bool(rec["is_best"]),
        sub=sub,
    )


def _paper_cell(paper: pd.DataFrame | None, rec: dict | None, role, l_test, method, metric) -> Cell:
    if paper is None or paper.empty:
        return Cell("")
    hit = paper[(paper.role == role) & (paper.l_test == int(l_test or 0)) & (paper.method == method)
                & (paper.metric == metric)]
    if hit.empty:
        return Cell("–")
    value = float(hit.value.iloc[0])
    if rec is None:
        return Cell(_fmt(value, metric))
    return Cell(f"{_fmt(value, metric)} ({_fmt(float(rec['mean']) - value, metric, signed=True)})")


def _labels(items: list[dict[str, Any]]) -> dict[str, str]:
    return {it["name"]: it.get("label") or it["name"] for it in items}


def caption(spec: dict[str, Any], has_paper: bool, published: str = "") -> str:
    """The caption: source, seeds and folds, marks, test and metric conventions; ``published``
    (:func:`bench.report.published.caption`) replaces the paper column's sentence."""
    stats = {"test": "t", "correction": "holm", "alpha": 0.05, **spec.get("stats", {})}
    ev = {"empty_query": "one", "ties": "stable", **spec.get("evaluation", {})}
    n_seeds = len(spec.get("seeds", [0]))
    parts = []
    if spec.get("source"):
        parts.append(f"Reproduces {spec['source']}.")
    if spec.get("note"):
        parts.append(spec["note"])
    if spec.get("selected"):  # the chosen grid points (bench.report.selection.caption_sentence)
        parts.append(spec["selected"])
    if any(ds.get("stands_for") for ds in spec.get("datasets", [])):
        parts.append("Synthetic stand-ins replace the paper's datasets: compare methods within this table, "
                     "not with the paper's numbers.")
    if spec.get("profile"):
        parts.append(f"Profile: {spec['profile']}.")
    agg = (f"Mean over {n_seeds} seeds ± standard deviation of the per-seed means"
           if n_seeds > 1 else "One seed")
    parts.append(f"{agg}; test queries of all folds pooled.")
    corr = ("Holm-Bonferroni-corrected over the other methods" if stats["correction"] == "holm"
            else "no multiple-comparison correction")
    parts.append(
        f"Bold: the best mean and every method not significantly worse than it; underlined: the best mean "
        f"({TEST_NAMES.get(stats['test'], stats['test'])} on per-query values (seed-averaged) against the best, "
        f"{corr}, alpha = {stats['alpha']})."
    )
    parts.extend(_convention_parts(spec, ev))
    parts.extend(validation_caption(spec))
    parts.extend(reference_caption(spec))
    parts.extend(spec.get("notes") or [])
    if spec.get("constant"):
        parts.append(spec["constant"])
    parts.extend(differences_caption(spec))
    if published:
        parts.append(published)
    elif has_paper:
        parts.append("paper (Δ): the number printed in the source paper and ours minus it.")
    return " ".join(parts)


def differences_caption(spec: dict[str, Any]) -> list[str]:
    """The caption's "Differences from the paper": every value of the table's protocol and datasets
    that its paper does not state or that the suite sets otherwise, with the reason the config gives
    where it sets it (``choices``; :func:`bench.report.paper_settings.table_differences`). None for a
    table without the paper's own datasets.

    >>> spec = {"protocol": "x", "choices": [{"scope": "protocol", "role": None, "label": "", "key": "train.batch_size",
    ...     "value": "16", "reason": "not stated"}, {"scope": "dataset", "role": "r", "label": "D",
    ...     "key": "options.clip", "value": 1.0, "reason": "huge values"}]}
    >>> head, listed = differences_caption(spec)[0].split(": ", 1)
    >>> head
    "Differences from the paper (values it does not state are this suite's choices)"
    >>> listed
    'train.batch_size = 16 (not stated); D: options.clip = 1.0 (huge values).'
    """
    from bench.report.paper_settings import table_differences

    groups: dict[tuple[str, str], list[str]] = {}  # keys sharing a reason are listed together
    for it in table_differences(spec):
        value = "none" if it["value"] is None else it["value"]
        key = f"{it['key']} = {value}" if value != "default" else f"{it['key']} = the loss's default"
        groups.setdefault((it["label"] if it["scope"] == "dataset" else "", it["reason"]), []).append(key)
    if not groups:
        return []
    shown = [f"{label + ': ' if label else ''}{', '.join(keys)} ({reason})" for (label, reason), keys in groups.items()]
    return ["Differences from the paper (values it does not state are this suite's choices): " + "; ".join(shown) + "."]


def _convention_parts(spec: dict[str, Any], ev: dict[str, Any]) -> list[str]:
    """The caption's metric conventions: one paragraph per evaluation convention in the table,
    stating only the rules of the metrics the table shows (:func:`bench.metrics.conventions_caption`).

    ``spec["conventions"]`` maps dataset -> convention (``bench.config.plan.table_spec``: the
    table's own, else each dataset's). When several conventions meet in one table, each
    paragraph names its datasets.
    """
    per_dataset = spec.get("conventions") or {}
    labels = {ds["name"]: ds.get("label") or ds["name"] for ds in spec.get("datasets", [])}
    used = list(dict.fromkeys(per_dataset.values())) or ["default"]
    parts = []
    for convention in used:
        text = conventions_caption(ev["empty_query"], ev["ties"], convention, metrics=spec.get("metrics"))
        if len(used) > 1:
            names = ", ".join(labels.get(d, d) for d, c in per_dataset.items() if c == convention)
            text = f"{names}: {text}"
        parts.append(text)
    return parts


def validation_caption(spec: dict[str, Any]) -> list[str]:
    """The caption's sentence on how validation is graded (``spec["validation"]``,
    :func:`bench.config.plan.validation_spec`): early stopping, the tested checkpoint and selection
    read the protocol's validation values, which every table sharing its runs shares.

    >>> spec = {"datasets": [{"name": "d", "label": "D"}], "conventions": {"d": "tfranking"},
    ...         "validation": {"protocol": "p", "conventions": {"d": "tfranking"}, "rules": {"d": "R"}, "shared": ["t2"]}}
    >>> print(*validation_caption(spec)[0].split("; "), sep=chr(10))
    Validation (early stopping, the tested checkpoint, selection) is graded by R, as the test split
    this table shares the p protocol's runs, graded once, with t2.
    """
    v = spec.get("validation")
    if not v:
        return []
    labels = {ds["name"]: ds.get("label") or ds["name"] for ds in spec.get("datasets", [])}
    same = all(v["conventions"][ds] == (spec.get("conventions") or {}).get(ds) for ds in v["conventions"])
    groups: dict[str, list[str]] = {}
    for ds, rules in v["rules"].items():
        groups.setdefault(rules, []).append(labels.get(ds, ds))
    graded = ("; ".join(f"{', '.join(names)}: {rules}" for rules, names in groups.items()) if len(groups) > 1
              else next(iter(groups), "the suite's default rules"))
    shared = (f"; this table shares the {v['protocol']} protocol's runs, graded once, with {', '.join(v['shared'])}"
              if v["shared"] else "")
    how = "as the test split" if same else "not as the test split"
    return [f"Validation (early stopping, the tested checkpoint, selection) is graded by {graded}, {how}{shared}."]


def reference_caption(spec: dict[str, Any]) -> list[str]:
    """The caption's sentence on the rows at the paper's chosen points (``reference`` rows of
    ``spec["methods"]``, :func:`bench.config.plan.table_rows`): which point each is, per dataset,
    and that they stand beside the tested methods, not among them."""
    rows = [m for m in spec.get("methods", []) if m.get("reference")]
    if not rows:
        return []
    points = "; ".join(f"{m['label']}: " + ", ".join(f"{p} on {ds}" for ds, p in m["points"].items()) for m in rows)
    return [f"Rows 'at the paper's ...': the grid point the paper's own row was trained at ({points}), "
            "trained and graded as every row here; compare these, not the validation-selected rows, with the paper's "
            "numbers. They stand beside the tested methods, not among them: never bold, their p-value against "
            "the best uncorrected."]


def caption_metric_sentence(index: dict[tuple[str, str, str], dict[str, Any]], spec: dict[str, Any]) -> str:
    """The caption's sentence for ``caption_metrics``: metrics that measure the lists, not the
    methods (the RBP residual :math:`p^n` is the same for every method), stated once per dataset
    instead of as a column; a metric that does differ between methods is stated as its range.

    >>> idx = {("d", "rbp_residual@0.8", "a"): {"mean": 0.0125}, ("d", "rbp_residual@0.8", "b"): {"mean": 0.0125}}
    >>> caption_metric_sentence(idx, {"caption_metrics": ["rbp_residual@0.8"], "datasets": [{"name": "d"}]})
    'Equal for every method, so stated here rather than compared: RBP residual@0.8 = 0.0125 (d).'
    """
    parts = []
    for metric in spec.get("caption_metrics") or []:
        for ds in spec["datasets"]:
            key = dataset_key(ds["name"], (spec.get("list_sizes") or [None])[0])
            values = [rec["mean"] for (d, m, _), rec in index.items() if d == key and m == metric]
            if not values:
                continue
            low, high = min(values), max(values)
            text = _fmt(low, metric) if high - low <= 1e-12 else f"{_fmt(low, metric)}-{_fmt(high, metric)} (differs!)"
            name = metric_label(metric).removesuffix(" ↓")  # no direction: it is not compared
            parts.append(f"{name} = {text} ({ds.get('label') or ds['name']})")
    return f"Equal for every method, so stated here rather than compared: {'; '.join(parts)}." if parts else ""


def build_table(stats: pd.DataFrame, spec: dict[str, Any], paper: pd.DataFrame | None = None) -> Table:
    """The format-free table model; ``paper`` is :func:`bench.report.paper.load_paper_numbers`
    (a tuned table's Tuning blocks are added by :func:`bench.report.tuning.with_tuning`)."""
    index = _index_stats(stats)
    if spec.get("caption_metrics"):
        spec = {**spec, "metrics": [m for m in spec["metrics"] if m not in spec["caption_metrics"]],
                "constant": caption_metric_sentence(index, spec)}
    if paper is not None and spec.get("paper"):
        paper = paper[paper.table == spec["paper"]]
    else:
        paper = None
    several = len(spec.get("seeds", [0])) > 1
    methods = spec["methods"]
    sizes = spec.get("list_sizes") or []
    if spec.get("layout", "methods") == "methods" and len(sizes) > 1:
        raise ValueError(f"table {spec['name']}: the methods layout takes at most one test list size, got {sizes}")
    l_test = sizes[0] if sizes else None
    mlabel = _labels(methods)
    blocks: list[Block] = []
    any_paper = False
    published = P.is_published(paper)
    column = P.COLUMN if published else "paper (Δ)"
    for ds in spec["datasets"]:
        role = ds.get("role")
        with_paper = paper is not None and role is not None and not paper[paper.role == role].empty
        any_paper |= with_paper
        title = ds.get("label") or ds["name"]
        if ds.get("stands_for"):
            title += f" (synthetic stand-in for {', '.join(ds['stands_for'])})"
        if spec.get("layout", "methods") == "listsize":
            blocks.extend(_listsize_blocks(index, spec, ds, title, paper if with_paper else None, several))
            continue
        key = dataset_key(ds["name"], l_test)
        n_q = [int(index[k]["n_queries"]) for k in index if k[0] == key]
        if n_q:
            title += f"; {max(n_q)} test queries"
        if l_test:
            title += f"; test lists cut to L_test = {l_test}"
        header = ["Method"]
        for metric in spec["metrics"]:
            header.append(metric_label(metric))
            if with_paper:
                header.append(column)
        rows = []
        for m in methods:
            row = [Cell(mlabel[m["name"]])]
            for metric in spec["metrics"]:
                rec = index.get((key, metric, m["name"]))
                row.append(_stat_cell(rec, metric, several))
                if with_paper:
                    row.append(_paper_cell(paper, rec, role, None, m.get("paper_as", m["name"]), metric))
            rows.append(row)
        if with_paper and published:
            rows.append([Cell(text) for text in P.range_row(paper[paper.role == role], spec["metrics"])])
        blocks.append(Block(title, header, rows))
    note = P.caption(paper, spec, mlabel) if published else ""
    return Table(spec["name"], spec.get("title") or spec["name"], caption(spec, any_paper, note), blocks)


def _listsize_blocks(index, spec, ds, title, paper, several) -> list[Block]:
    """One block per metric: rows L_test, columns the methods (one per L_train)."""
    l_train = spec.get("l_train", {})
    methods = sorted(spec["methods"], key=lambda m: l_train.get(m["name"], 0))
    sizes = spec.get("list_sizes") or [None]
    blocks = []
    for metric in spec["metrics"]:
        header = ["L_test \\ L_train"]
        for m in methods:
            header.append(str(l_train.get(m["name"], m.get("label") or m["name"])))
            if paper is not None:
                header.append("paper (Δ)")
        rows = []
        for size in sizes:
            row = [Cell(str(size) if size else "full")]
            for m in methods:
                rec = index.get((dataset_key(ds["name"], size), metric, m["name"]))
                row.append(_stat_cell(rec, metric, several))
                if paper is not None:
                    row.append(_paper_cell(paper, rec, ds.get("role"), size, m["name"], metric))
            rows.append(row)
        blocks.append(Block(f"{metric_label(metric)}: {title}", header, rows))
    return blocks


# ----------------------------------------------------------------------------- emitters


def _md_cell(cell: Cell) -> str:
    text = cell.text
    if cell.underline:
        text = f"<u>{text}</u>"
    if cell.bold:
        text = f"**{text}**"
    return f"{text} {cell.sub}".strip().replace("|", "\\|")


def to_markdown(table: Table) -> str:
    """GitHub-flavoured Markdown: a heading, the caption, one pipe table per block."""
    lines = [f"### {table.title}", "", f"*{table.caption}*", ""]
    for block in table.blocks:
        lines += [f"#### {block.title}", ""]
        lines.append("| " + " | ".join(h.replace("|", "\\|") for h in block.header) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(block.header) - 1)) + "|")
        for row in block.rows:
            lines.append("| " + " | ".join(_md_cell(c) for c in row) + " |")
        lines.append("")
    return "\n".join(lines)


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}
_LATEX_SYMBOLS = {"±": r"$\pm$", "Δ": r"$\Delta$", "↓": r"$\downarrow$", "–": "--", ">=": r"$\geq$"}


def latex_escape(text: str) -> str:
    r"""Escape LaTeX specials and map the few symbols the tables use.

    >>> latex_escape("ndcg_max ± 5% Δ")
    'ndcg\\_max $\\pm$ 5\\% $\\Delta$'
    """
    out = "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)
    for sym, rep in _LATEX_SYMBOLS.items():
        out = out.replace(sym, rep)
    return out


def _tex_cell(cell: Cell) -> str:
    text = latex_escape(cell.text)
    if cell.underline:
        text = rf"\underline{{{text}}}"
    if cell.bold:
        text = rf"\textbf{{{text}}}"
    return f"{text} {latex_escape(cell.sub)}".strip()


def to_latex(table: Table) -> str:
    """A booktabs ``table`` float: one tabular per block under an italic block title."""
    out = [r"% requires \usepackage{booktabs}", r"\begin{table}[t]", r"\centering", r"\small",
           rf"\caption{{{latex_escape(table.caption)}}}", rf"\label{{tab:{table.name}}}"]
    for i, block in enumerate(table.blocks):
        if i:
            out.append(r"\medskip")
        out.append(rf"\par\textit{{{latex_escape(block.title)}}}\par\smallskip")
        out.append(r"\begin{tabular}{l" + "r" * (len(block.header) - 1) + "}")
        out.append(r"\toprule")
        out.append(" & ".join(latex_escape(h) for h in block.header) + r" \\")
        out.append(r"\midrule")
        for row in block.rows:
            out.append(" & ".join(_tex_cell(c) for c in row) + r" \\")
        out.append(r"\bottomrule")
        out.append(r"\end{tabular}")
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


_CSS = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "th,td{padding:.25em .6em;text-align:right}th:first-child,td:first-child{text-align:left}"
        "thead th{border-bottom:1px solid #333}table{border-top:2px solid #333;border-bottom:2px solid #333}"
        "p.caption{max-width:60em;color:#333}")


def _html_cell(cell: Cell, tag: str = "td") -> str:
    text = html.escape(cell.text)
    if cell.underline:
        text = f"<u>{text}</u>"
    if cell.bold:
        text = f"<b>{text}</b>"
    if cell.sub:
        text += f" <small>{html.escape(cell.sub)}</small>"
    return f"<{tag}>{text}</{tag}>"


def to_html(table: Table) -> str:
    """A standalone HTML page (the Snakemake report embeds it as is)."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(table.title)}</title><style>{_CSS}</style></head><body>",
             f"<h2>{html.escape(table.title)}</h2>", f'<p class="caption">{html.escape(table.caption)}</p>']
    for block in table.blocks:
        parts.append(f"<h3>{html.escape(block.title)}</h3>")
        parts.append("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in block.header)
                     + "</tr></thead><tbody>")
        for row in block.rows:
            parts.append("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


RENDERERS = {"md": to_markdown, "tex": to_latex, "html": to_html}

"""``ltr-bench table``, ``ltr-bench figure`` and ``ltr-bench compare-table``.

Each is a thin wrapper the Snakemake rules call; the spec of what to draw arrives as one
JSON object (``--spec``) that the workflow builds from the validated config.

- ``table NAME --stats S.parquet --spec JSON --md M --tex T --html H``: render a statistics
  table (:mod:`bench.report.tables`) with the paper numbers of ``spec["paper"]``.
- ``figure NAME --spec JSON --png P --pdf F [--input FILE ...]``: draw one figure
  (:mod:`bench.report.figures`); inputs per figure: ``scaling_figure`` the perf CSV,
  ``listsize_figure`` the listsize statistics parquet, ``recall_heatmap`` the evaluated
  per-query parquet files (:mod:`bench.report.heatmap`), ``neuralndcg_curves`` the table of ``ltr-bench loss-curves``,
  ``temperature_figure`` reads the run directories named in the spec, ``cd_diagram`` the
  ranking of ``ltr-bench ranking`` (:mod:`bench.report.ranking`).
- ``computed-table NAME --input FILE ... --spec JSON --md M --tex T --html H``: render a table
  of ``computed_tables:`` (:mod:`bench.report.computed`: NeuralSort's toy sort, the datasets'
  statistics, the runs' time and memory).
- ``selection-table NAME --selection REC ... --spec JSON --md M --tex T --html H``: the
  hyperparameter selection of a table (:mod:`bench.report.selection`): every grid point's
  validation mean, the chosen one marked; ``table`` takes the same records (``--selection``)
  to name the chosen points in its caption.
- ``quality-cost --stats S.parquet --spec JSON --out O.parquet``: the table
  the quality-cost figure draws (:mod:`bench.report.quality_cost`): per method of a statistics
  table, its mean metric with a confidence interval over seeds, and its training seconds per
  epoch and peak memory from the ``run.json`` of the runs named in the spec.
- ``coverage --doc docs/coverage.md --enabled NAME ... --profile P --html H``: the coverage list
  of every table and figure of the four papers as a report page (:mod:`bench.report.coverage`).
- ``report-text OUTPUT... [--captions DIR] [--embed REPORT]``: the HTML report's words, every
  table's title and full caption and every figure's title, as fragments its captions include and
  as a section readable without JavaScript (:mod:`bench.report.text`).
- ``compare-table --frozen DIR --new P.parquet ... --ledger DIR --spec JSON --md M --html H``:
  verify the frozen baselines (:func:`bench.frozen.check_frozen`), add the new losses to the
  dataset's ledger of compared losses, test every compared loss against every frozen baseline
  and against each other (:func:`bench.stats.versus`), and render the page
  (:mod:`bench.report.compare`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bench.atomic import write_files
from bench.config.plan import FIGURES
from bench.errors import UsageError
from bench.metrics import dropped_column, weight_column
from bench.results import KEY_COLUMNS, parse_spec, read_frame, read_frames, read_record, write_frame


def _write_table(table, md: str | None, tex: str | None, html_path: str | None) -> None:
    """The asked formats, all or none (:func:`bench.atomic.write_files`: rendered first, refused
    before writing when the disk has no room for all of them)."""
    from bench.report.tables import to_html, to_latex, to_markdown

    write_files({path: render(table) for path, render in ((md, to_markdown), (tex, to_latex),
                                                          (html_path, to_html)) if path})


def _cli_table(args) -> int:
    from bench.report.paper import load_paper_numbers
    from bench.report.tables import build_table

    spec = parse_spec(args.spec)
    spec.setdefault("name", args.name)
    if args.selection:  # the points chosen on validation, named in the caption
        from bench.report.selection import caption_sentence

        spec["selected"] = caption_sentence([read_record(p) for p in args.selection], spec)
    stats = read_frame(args.stats)
    paper = load_paper_numbers(args.paper_numbers) if args.paper_numbers else load_paper_numbers()
    table = build_table(stats, spec, paper)
    if args.tuning:  # a tuned table's summary (ltr-bench tuning-summary): its Tuning blocks and caption
        from bench.report.tuning import with_tuning

        table = with_tuning(table, read_frame(args.tuning), {**spec, "name": args.name})
    _write_table(table, args.md, args.tex, args.html)
    return 0


def _cli_computed(args) -> int:
    from bench.report.computed import build
    from bench.report.paper import load_paper_numbers

    spec = parse_spec(args.spec)
    spec.setdefault("name", args.name)
    paper = load_paper_numbers(args.paper_numbers) if args.paper_numbers else load_paper_numbers()
    _write_table(build(list(args.input or []), spec, paper), args.md, args.tex, args.html)
    return 0


def _cli_selection(args) -> int:
    from bench.report.selection import selection_table

    spec = parse_spec(args.spec)
    spec.setdefault("name", f"{args.name}_selection")
    _write_table(selection_table([read_record(p) for p in args.selection], spec), args.md, args.tex, args.html)
    return 0


def _cli_report_text(args) -> int:
    from bench.report.text import embed, entries, write_captions

    if not args.captions and not args.embed:
        raise UsageError("report-text: give --captions DIR, --embed REPORT or both")
    found = entries(args.outputs)
    if args.captions:
        write_captions(found, args.captions)
    if args.embed:
        embed(args.embed, found)
    return 0


def _cli_coverage(args) -> int:
    from bench.report.coverage import read_coverage, to_html

    write_files({args.html: to_html(read_coverage(args.doc), list(args.enabled or []), args.profile).encode("utf-8")})
    return 0


def _cli_figure(args) -> int:
    from bench.report import figures as F
    from bench.report.paper_figures import DRAW

    spec = parse_spec(args.spec)
    name = args.name
    inputs = list(args.input or [])
    if name in DRAW:  # the papers' figures of issue 26 (bench/report/paper_figures.py)
        F.save(DRAW[name](spec, inputs), args.png, args.pdf)
        return 0
    if name == "scaling_figure":
        fig = F.scaling_figure(pd.read_csv(_one(inputs, name)), spec.get("steps"), spec.get("batch_lists"))
    elif name == "temperature_figure":
        data = F.temperature_data(F.read_curves(spec["runs"]), spec["metrics"], spec["vali_list_size"], spec["smoothing"])
        fig = F.temperature_figure(data, spec["vali_list_size"], spec["smoothing"], spec.get("subject"),
                                   spec.get("graded"))
    elif name == "listsize_figure":
        data = F.listsize_data(read_frame(_one(inputs, name)), spec["dataset"], spec["l_train"],
                               spec["list_sizes"], spec["metrics"])
        fig = F.listsize_figure(data, spec.get("subject"))
    elif name == "recall_heatmap":
        if not inputs:
            raise UsageError("recall_heatmap: give the evaluated per-query parquet files with --input")
        from bench.report import heatmap

        per_query = read_frames(inputs)
        for panel, share in heatmap.panel_shares(per_query, spec):
            print(f"recall_heatmap: {panel['label']} on {panel['dataset_label']}: {share.caption()}")
        fig = heatmap.recall_heatmaps(per_query, spec)
    elif name == "neuralndcg_curves":
        fig = F.neuralndcg_curves(read_frame(_one(inputs, name)), spec.get("taus"))
    elif name == "quality_cost_figure":
        from bench.report.quality_cost import quality_cost_figure

        fig = quality_cost_figure(read_frame(_one(inputs, name)), spec)
    elif name == "cd_diagram":
        from bench.report.ranking import cd_diagram

        fig = cd_diagram(read_frame(_one(inputs, name)), spec)
    else:
        raise UsageError(f"unknown figure {name!r}; known: {', '.join(FIGURES)}")
    F.save(fig, args.png, args.pdf)
    return 0


def _cli_quality_cost(args) -> int:
    from bench.report.quality_cost import quality_cost_table

    try:
        table = quality_cost_table(read_frame(args.stats), parse_spec(args.spec))
    except ValueError as exc:
        raise UsageError(f"quality-cost: {exc}") from exc
    write_frame(table, args.out)
    print(f"ltr-bench quality-cost: {len(table)} methods -> {args.out}")
    return 0


def _one(inputs: list[str], name: str) -> str:
    if len(inputs) != 1:
        raise UsageError(f"{name}: expected exactly one --input file, got {len(inputs)}")
    return inputs[0]


@dataclass
class Compared:
    """The compare page's statistics: each new loss against each baseline (``baselines``), the
    new losses' pairs (``pairs``, empty with one new loss), the paper-table marks (``marks``)."""

    baselines: pd.DataFrame
    pairs: pd.DataFrame
    marks: pd.DataFrame
    manifest: dict[str, Any]
    new: list[str]


def compare_stats(frozen_dir: str | Path, new: pd.DataFrame, spec: dict[str, Any],
                  fingerprints: dict[str, str]) -> Compared:
    """Verified frozen baselines + the new losses -> :func:`bench.stats.versus` and
    :func:`bench.stats.significance` tables (:mod:`bench.report.compare` renders them)."""
    from bench import frozen as fz
    from bench.report.compare import confidence
    from bench.stats import VERSUS_COLUMNS, significance, versus

    manifest = fz.check_frozen(frozen_dir, spec["protocol"], fingerprints)
    baselines = fz.load_frozen(frozen_dir, manifest)
    overlap = sorted(set(baselines["method"]) & set(new["method"]))
    if overlap:
        raise fz.FrozenMismatch(f"new method names clash with frozen baselines: {overlap}")
    metrics = list(spec["metrics"])
    keep = [*KEY_COLUMNS, *metrics, *[dropped_column(m) for m in metrics],
            *[weight_column(m) for m in metrics if weight_column(m) in baselines.columns]]
    for frame, what in ((baselines, f"frozen baselines in {frozen_dir}"), (new, "new per-query results")):
        missing = [c for c in keep if c not in frame.columns]
        if missing:
            raise fz.FrozenMismatch(f"{what} lack columns {missing}")
    per_query = pd.concat([baselines[keep], new[keep]], ignore_index=True)
    options = {k: v for k, v in spec.get("stats", {}).items() if k in ("test", "correction", "alpha", "n_boot", "seed")}
    new_methods = list(dict.fromkeys(new["method"]))
    frozen_methods = list(manifest["methods"])
    # CIs as simultaneous as the p-values are adjusted (bench.report.compare.confidence)
    alpha, holm = float(options.get("alpha", 0.05)), options.get("correction", "holm") == "holm"
    n_pairs = len(new_methods) * (len(new_methods) - 1) // 2
    pairs = (versus(per_query, metrics, new_methods, family="new losses", confidence=confidence(alpha, n_pairs, holm),
                    **options) if len(new_methods) > 1 else pd.DataFrame(columns=list(VERSUS_COLUMNS)))
    against = versus(per_query, metrics, new_methods, frozen_methods, family="baselines",
                     confidence=confidence(alpha, len(frozen_methods), holm), **options)
    return Compared(against, pairs, significance(per_query, metrics, **options), manifest, new_methods)


def _cli_compare(args) -> int:
    from bench import frozen as fz
    from bench.provenance import protocol_hash
    from bench.report import compare as C

    spec = parse_spec(args.spec)
    current = read_frames(args.new)
    spec["protocol_hash"] = protocol_hash(spec["protocol"])
    for path in args.tuning or []:  # a tuned new loss's chosen configuration, kept in its ledger record
        (method, entry), = read_record(path)["methods"].items()
        spec.setdefault("new_specs", {}).setdefault(method, {})["chosen_label"] = entry["chosen_label"]
    earlier, records, left_out = C.read_ledger(args.ledger, spec["protocol_hash"], list(pd.unique(current["method"])))
    labels = {**{m: r["label"] for m, r in records.items()}, **spec.get("labels", {})}
    spec["labels"] = labels
    new = pd.concat([earlier, current], ignore_index=True) if len(earlier) else current
    try:
        done = compare_stats(args.frozen, new, spec, fz.fold_fingerprints(args.prepared))
    except fz.FrozenMismatch as exc:
        raise UsageError(f"refusing to compare: {exc}") from exc
    record = None
    if args.reproduced and Path(args.reproduced).is_file():
        record = json.loads(Path(args.reproduced).read_text(encoding="utf-8"))
    here = fz.current_platform(spec.get("threads", 1))
    differences = fz.platform_differences(done.manifest.get("platform"), here)
    manifest_sha = fz.file_sha256(Path(args.frozen) / fz.MANIFEST)
    provenance = C.provenance_sentences(done.manifest, here, record, manifest_sha, differences)
    new_methods = sorted(done.new, key=lambda m: labels.get(m, m))
    ledger = {**records, **{m: {"budget": 1, **s} for m, s in spec.get("new_specs", {}).items()}}
    table = C.page(done.baselines, done.pairs, done.marks, spec, new=new_methods, baselines=list(done.manifest["methods"]),
                   provenance=provenance, record=record if record and record.get("manifest_sha256") == manifest_sha else None,
                   left_out=left_out, manifest=done.manifest, ledger=ledger)
    if args.stats_out:
        write_frame(pd.concat([done.baselines, done.pairs], ignore_index=True), args.stats_out)
    C.write_ledger(args.ledger, current, spec.get("new_specs", {}), spec["protocol_hash"])
    _write_table(table, args.md, args.tex, args.html)
    return 0


def _table_outputs(p) -> None:
    """The paper numbers a rendered table reads and the three files it writes."""
    p.add_argument("--paper-numbers", help="paper numbers YAML (default: bench/report/paper_numbers.yaml)")
    p.add_argument("--md")
    p.add_argument("--tex")
    p.add_argument("--html")


def register_cli(subparsers) -> None:
    """Add ``ltr-bench table``, ``selection-table``, ``figure``, ``computed-table``, ``quality-cost``, ``coverage``,
    ``report-text`` and ``compare-table``."""
    t = subparsers.add_parser("table", help="render a statistics table as Markdown, LaTeX and HTML")
    t.add_argument("name")
    t.add_argument("--stats", required=True, help="results/stats/<table>.parquet")
    t.add_argument("--spec", required=True, help="table spec as JSON (built by the workflow)")
    t.add_argument("--selection", nargs="*", default=[],
                   help="selection records (ltr-bench select) whose chosen points the caption names")
    t.add_argument("--tuning", default=None,
                   help="a tuned table's summary (ltr-bench tuning-summary): its Tuning blocks and caption")
    _table_outputs(t)
    t.set_defaults(func=_cli_table)
    s = subparsers.add_parser("selection-table", help="render a table's hyperparameter selection (every grid point)")
    s.add_argument("name", help="the table whose methods were selected")
    s.add_argument("--selection", nargs="+", required=True, help="its selection records (ltr-bench select)")
    s.add_argument("--spec", required=True, help="JSON (bench.config.plan.selection_table_spec)")
    s.add_argument("--md")
    s.add_argument("--tex")
    s.add_argument("--html")
    s.set_defaults(func=_cli_selection)
    f = subparsers.add_parser("figure", help="draw one figure as PNG and PDF")
    f.add_argument("name", choices=FIGURES)
    f.add_argument("--spec", default="{}", help="figure spec as JSON")
    f.add_argument("--input", nargs="*", help="input files (see the module docstring)")
    f.add_argument("--png", required=True)
    f.add_argument("--pdf", required=True)
    f.set_defaults(func=_cli_figure)
    d = subparsers.add_parser("computed-table", help="render a table computed from something other than statistics")
    d.add_argument("name")
    d.add_argument("--input", nargs="*", help="toy-sort table, prepared folds or run directories' files")
    d.add_argument("--spec", required=True, help="table spec as JSON (built by the workflow)")
    _table_outputs(d)
    d.set_defaults(func=_cli_computed)
    q = subparsers.add_parser("quality-cost", help="per method: mean metric with a CI over seeds, seconds per epoch, "
                              "peak memory (the quality-cost figure's table)")
    q.add_argument("--stats", required=True, help="results/stats/<table>.parquet")
    q.add_argument("--spec", required=True, help="JSON: table, dataset, metric, methods, runs (built by the workflow)")
    q.add_argument("--out", required=True, help="the table to write (parquet)")
    q.set_defaults(func=_cli_quality_cost)
    v = subparsers.add_parser("coverage", help="the coverage list of docs/coverage.md as a report page")
    v.add_argument("--doc", required=True, help="docs/coverage.md")
    v.add_argument("--enabled", nargs="*", help="the tables and figures this profile builds")
    v.add_argument("--profile", required=True)
    v.add_argument("--html", required=True)
    v.set_defaults(func=_cli_coverage)
    x = subparsers.add_parser("report-text", help="the HTML report's text: titles and full captions, readable "
                              "without JavaScript")
    x.add_argument("outputs", nargs="+", help="the report's tables (.md, read from the .html beside each) and figures (.png)")
    x.add_argument("--captions", metavar="DIR", help="write one caption fragment per table and figure here (before "
                   "`snakemake --report`: the .rst captions include them)")
    x.add_argument("--embed", metavar="REPORT", help="put every title and caption into REPORT as a <noscript> section "
                   "(after `snakemake --report`)")
    x.set_defaults(func=_cli_report_text)
    c = subparsers.add_parser("compare-table", help="new losses vs frozen baselines, paired tests, rendered")
    c.add_argument("--frozen", required=True, help="results/frozen/<profile>/<dataset>")
    c.add_argument("--new", required=True, nargs="+", help="evaluated per-query parquet files of the new losses")
    c.add_argument("--prepared", required=True, nargs="+", help="current prepared fold directories (fingerprints)")
    c.add_argument("--spec", required=True, help="JSON: dataset, protocol, metrics, stats, labels, profile")
    c.add_argument("--stats-out", help="also write the page's statistics (bench.stats.versus rows) here (parquet)")
    c.add_argument("--ledger", required=True, help="results/compare/<dataset>/losses: every loss compared on the dataset")
    c.add_argument("--reproduced", help="the default study's record of re-running the baselines here, if any")
    c.add_argument("--tuning", nargs="*", default=[], help="the tuned new losses' tuning records (ltr-bench tune)")
    c.add_argument("--md")
    c.add_argument("--tex")
    c.add_argument("--html")
    c.set_defaults(func=_cli_compare)

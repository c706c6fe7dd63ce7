r"""Tables computed from something other than paired statistics (``computed_tables:``).

Each kind (:data:`bench.config.plan.COMPUTED_TABLES`) has one builder in :data:`BUILDERS`
that takes its input files, the spec of :func:`bench.config.plan.computed_table_spec` and the
paper numbers (:func:`bench.report.paper.load_paper_numbers`), and returns the format-free
:class:`bench.report.tables.Table` that :mod:`bench.report.tables` emits as Markdown, LaTeX and
HTML.

- ``toy_sort`` (NeuralNDCG Table 1): the labels :math:`y` of the paper's toy list sorted by
  NeuralSort, :math:`\hat g(\tau) = \hat P_{\mathrm{sort}(s)}(\tau)\, y`, one row per
  temperature and the exact sort (:math:`\tau \to 0`), with the row sum
  :math:`\sum_i \hat g_i` (exact sorting keeps :math:`\sum_i y_i`; a row-stochastic
  :math:`\hat P` need not). Read from the table ``ltr-bench toy-sort`` computed with the
  suite's own NeuralSort; each row is followed by the paper's printed row and the largest
  absolute difference :math:`\max_i |\hat g_i - \hat g^{paper}_i|`.
- ``datasets`` (NeuralNDCG Table 2): per dataset and fold, the features, and per split the
  queries, documents and empty queries (no document with a label > 0), counted in the
  prepared folds' arrays. A dataset that is the paper's own gets a second block: each
  statistic the paper prints, its number, ours (first fold) and ours minus it.
- ``run_costs`` (ARF Table 9): per method, the mean over its runs of the mean seconds per
  epoch (``curve.csv``: training and validation of the epoch), and the largest peak host
  memory (max RSS) and peak GPU memory (``torch.cuda.max_memory_allocated``) of ``run.json``,
  in GB (:math:`10^9` bytes); the device named by the runs. Beside them, each method's time
  relative to the first method's, ours and the paper's, since absolute seconds depend on the
  device, batch and data.
- ``ranking`` (this suite's own, issue 40): a statistics table's methods ranked across its datasets
  and folds (mean ranks, the Friedman and Nemenyi tests, the critical difference), from the table
  ``ltr-bench ranking`` computed (:mod:`bench.ranking`), rendered by :mod:`bench.report.ranking`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from bench.report.tables import Block, Cell, Table

GB = 1e9


def _paper_rows(paper: pd.DataFrame | None, spec: dict[str, Any], role: str | None) -> pd.DataFrame:
    if paper is None or not spec.get("paper") or role is None:
        return pd.DataFrame(columns=["method", "metric", "printed", "source"])
    return paper[(paper.table == spec["paper"]) & (paper.role == role)]


def _printed(value: float) -> str:
    """A printed number as the paper typed it (integers without a decimal point)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _source_sentence(rows: pd.DataFrame) -> str:
    return f"Paper numbers: {rows['source'].iloc[0]}." if len(rows) else ""


# ----------------------------------------------------------------------------- NeuralNDCG Table 1


def toy_sort_table(inputs: list[str], spec: dict[str, Any], paper: pd.DataFrame | None) -> Table:
    """NeuralNDCG Table 1 from ``ltr-bench toy-sort``'s table (see the module docstring)."""
    from bench.results import read_frame

    if len(inputs) != 1:
        raise ValueError(f"{spec['name']}: expected the toy-sort table as the one input, got {len(inputs)}")
    frame = read_frame(inputs[0])
    printed = _paper_rows(paper, spec, "toy")
    n = int(frame["rank"].max())
    header = ["tau", *[f"rank {r}" for r in range(1, n + 1)], "sum after sorting", "max |Δ| vs paper"]
    rows = []
    for tau, group in frame.groupby("tau", sort=True):
        values = group.sort_values("rank")["value"].to_numpy(float)
        name = "exact" if tau == 0 else f"{tau:g}"
        label = "lim tau -> 0 (exact sort)" if tau == 0 else f"tau = {tau:g}"
        theirs = printed[printed.method == name]
        delta = ""
        if len(theirs):
            ranks = theirs[theirs.metric != "sum"].sort_values("metric")
            delta = f"{np.max(np.abs(values - ranks['printed'].to_numpy(float))):.2e}"
        rows.append([Cell(f"{label} (ours)"), *[Cell(f"{v:.8g}") for v in values], Cell(f"{values.sum():.8g}"),
                     Cell(delta)])
        if len(theirs):
            by_metric = dict(zip(theirs.metric, theirs.printed))
            rows.append([Cell(f"{label} (paper)"), *[Cell(_printed(by_metric[f"rank@{r}"])) for r in range(1, n + 1)],
                         Cell(_printed(by_metric["sum"])), Cell("")])
    caption = (f"Reproduces {spec['source']}. The labels y = [4, 2, 1, 0, 4, 3] of the toy list with scores "
               "s = [0.5, 0.2, 0.1, 0.01, 0.65, 0.3], sorted by this suite's NeuralSort (bench/losses/neuralsort.py, "
               "float64): row i is the i-th entry of P(tau) y; the exact sort is the limit tau -> 0. "
               "The sum after sorting is the row's sum (exact sorting keeps 14). " + _source_sentence(printed))
    return Table(spec["name"], spec["title"], caption.strip(), [Block("Quasi-sorted ground truth", header, rows)])


# ----------------------------------------------------------------------------- NeuralNDCG Table 2

SPLITS = ("train", "vali", "test")
#: the statistics the paper prints -> how ours are read from one fold's counts
PAPER_STATISTICS: dict[str, tuple[str, Callable[[dict[str, Any]], int]]] = {
    "features": ("features", lambda c: c["features"]),
    "queries_train": ("queries in training (train split)", lambda c: c["queries"]["train"]),
    "queries_train_vali": ("queries in training (train + vali splits)",
                           lambda c: c["queries"]["train"] + c["queries"]["vali"]),
    "queries_test": ("queries in test", lambda c: c["queries"]["test"]),
    "empty_queries": ("empty queries (all splits)", lambda c: sum(c["empty"].values())),
}


def fold_counts(path: str) -> dict[str, Any]:
    """Features, and per split queries, documents and empty queries of one prepared fold.

    A query is empty when none of its documents has a label > 0 (``np.maximum.reduceat`` over
    the query offsets). Only the label, qid and offset arrays are read (digests checked).
    """
    from bench.data.prepared import load_prepared

    fold = load_prepared(path, check=tuple(f"{s}/{a}" for s in SPLITS for a in ("labels", "qids", "offsets")))
    out: dict[str, Any] = {"features": fold.n_features, "queries": {}, "documents": {}, "empty": {}}
    for split in SPLITS:
        sp = fold.splits[split]
        labels, offsets = np.asarray(sp.labels), np.asarray(sp.offsets, dtype=np.int64)
        out["queries"][split] = int(offsets.size - 1)
        out["documents"][split] = int(labels.size)
        if offsets.size > 1:
            best = np.maximum.reduceat(labels, offsets[:-1]) if labels.size else np.zeros(0)
            out["empty"][split] = int(np.sum(best <= 0))
        else:
            out["empty"][split] = 0
    return out


def dataset_table(inputs: list[str], spec: dict[str, Any], paper: pd.DataFrame | None) -> Table:
    """NeuralNDCG Table 2 for every dataset of the profile (see the module docstring)."""
    header = ["Dataset", "Fold", "Features", *[f"queries {s}" for s in SPLITS], *[f"documents {s}" for s in SPLITS],
              *[f"empty queries {s}" for s in SPLITS]]
    rows, compared, sources = [], [], []
    for ds in spec["datasets"]:
        counts = {path: fold_counts(path) for path in ds["folds"]}
        for path, c in counts.items():
            rows.append([Cell(ds["label"]), Cell(path.rstrip("/").rsplit("/", 1)[-1]), Cell(str(c["features"])),
                         *[Cell(f"{c['queries'][s]:,}") for s in SPLITS],
                         *[Cell(f"{c['documents'][s]:,}") for s in SPLITS],
                         *[Cell(f"{c['empty'][s]:,}") for s in SPLITS]])
        printed = _paper_rows(paper, spec, ds.get("role"))
        if len(printed) and ds["folds"]:
            first = ds["folds"][0]
            ours = counts[first]
            body = []
            for metric, value in zip(printed.metric, printed.printed):
                label, read = PAPER_STATISTICS[metric]
                mine = read(ours)
                body.append([Cell(label), Cell(_printed(value)), Cell(f"{mine}"), Cell(f"{mine - int(value):+d}")])
            fold = first.rstrip("/").rsplit("/", 1)[-1]
            compared.append(Block(f"{ds['label']} beside the paper (ours: {fold})",
                                  ["Statistic", "paper", "ours", "Δ"], body))
            sources.append(printed["source"].iloc[0])
    caption = (f"Reproduces {spec['source']} for every dataset this profile prepares (profile: {spec['profile']}): "
               "counted in the prepared folds (after the profile's preprocessing, e.g. the ARF query filter). "
               "A query is empty when none of its documents has a label > 0.")
    if sources:
        caption += (" The paper's statistics are set beside its own datasets: its 'queries in training' counts "
                    "the training file the paper split into training and validation where it did so (Istella: "
                    "train + vali here); the paper does not say which splits its empty queries count, ours are "
                    f"those of all three splits. Paper numbers: {'; '.join(dict.fromkeys(sources))}.")
    return Table(spec["name"], spec["title"], caption, [Block("Every dataset and fold", header, rows), *compared])


# ----------------------------------------------------------------------------- ARF Table 9


def run_costs(inputs: list[str], spec: dict[str, Any]) -> pd.DataFrame:
    """Per method: seconds per epoch, epochs, peak host and GPU memory (GB), devices. A method
    selected on validation is timed by its chosen point's runs (``spec["selection"]``: the records)."""
    from bench.config.selection import keep_chosen
    from bench.results import read_curve, read_record, read_run_info

    rows = []
    for run in keep_chosen(spec["runs"], [read_record(p) for p in spec.get("selection", [])]):
        info, curve = read_run_info(run["dir"]), read_curve(run["dir"])
        peak = info.get("peak_memory") or {}
        cuda = peak.get("cuda_max_allocated_bytes")
        rows.append({"method": run["method"], "seconds_per_epoch": float(curve["seconds"].mean()),
                     "epochs": int(len(curve)), "host_gb": float(peak.get("host_max_rss_bytes") or math.nan) / GB,
                     "gpu_gb": math.nan if cuda is None else float(cuda) / GB,
                     "device": f"{info.get('device', '?')}: {info.get('device_name', '?')}"})
    frame = pd.DataFrame(rows)
    return frame.groupby("method", sort=False).agg(
        seconds_per_epoch=("seconds_per_epoch", "mean"), epochs=("epochs", "mean"), host_gb=("host_gb", "max"),
        gpu_gb=("gpu_gb", "max"), runs=("epochs", "size"),
        device=("device", lambda d: ", ".join(sorted(set(d))))).reset_index()


def _num(value: float, digits: int) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def run_cost_table(inputs: list[str], spec: dict[str, Any], paper: pd.DataFrame | None) -> Table:
    """ARF Table 9 from the runs' records (see the module docstring)."""
    costs = run_costs(inputs, spec).set_index("method")
    printed = _paper_rows(paper, spec, spec.get("role"))
    theirs = {(m, k): v for m, k, v in zip(printed.method, printed.metric, printed.printed)}
    methods = [m for m in spec["methods"] if m["name"] in costs.index]
    base = methods[0]["name"]
    with_paper = bool(theirs)
    header = ["Method", "s/epoch", "x first", "epochs", "peak host memory (GB)", "peak GPU memory (GB)"]
    if with_paper:
        header += ["paper s/epoch", "paper x first", "paper GPU memory (GB)"]
    rows = []
    for m in methods:
        c = costs.loc[m["name"]]
        row = [Cell(m.get("label") or m["name"]), Cell(_num(c.seconds_per_epoch, 2)),
               Cell(_num(c.seconds_per_epoch / costs.loc[base].seconds_per_epoch, 2)), Cell(f"{c.epochs:g}"),
               Cell(_num(c.host_gb, 2)), Cell(_num(c.gpu_gb, 3))]
        if with_paper:
            sec, mem, sec0 = (theirs.get((m["name"], "seconds_per_epoch")), theirs.get((m["name"], "gpu_memory_gb")),
                              theirs.get((base, "seconds_per_epoch")))
            row += [Cell("–" if sec is None else _printed(sec)),
                    Cell("–" if sec is None or sec0 is None else f"{sec / sec0:.2f}"),
                    Cell("–" if mem is None else _printed(mem))]
        rows.append(row)
    devices = "; ".join(dict.fromkeys(costs["device"]))
    caption = (f"Reproduces {spec['source']} from the runs' own records: the runs of the ARF table on "
               f"{spec['label']} (profile: {spec['profile']}; {int(costs['runs'].max())} run(s) per method, "
               f"batches of {spec['batch_size']} lists of {spec['list_size'] or 'full'} documents). s/epoch: mean over "
               "the runs of the mean wall-clock seconds of an epoch (training and validation, curve.csv); x first: "
               f"relative to the first row. Peak memory: the largest over the runs, host max RSS and "
               f"torch.cuda.max_memory_allocated (run.json), in GB (10^9 bytes); '–': not measured (no GPU). "
               f"Device: {devices}.")
    if with_paper:
        caption += (" The paper measured on a GPU it does not name, with a batch size of 20,000 for every method, "
                    "so only the relative times compare; its complexity columns are O(n*l) for Softmax and O(n^2) "
                    f"for the others. Paper numbers: {printed['source'].iloc[0]}.")
    return Table(spec["name"], spec["title"], caption, [Block(spec["label"], header, rows)])


def ranking_table(inputs: list[str], spec: dict[str, Any], paper: pd.DataFrame | None) -> Table:
    """The ranking across datasets and folds (:mod:`bench.report.ranking`; matplotlib loaded only here)."""
    from bench.report.ranking import ranking_table as build_ranking

    return build_ranking(inputs, spec, paper)


#: kind (bench.config.plan.COMPUTED_TABLES) -> builder(input files, spec, paper numbers)
BUILDERS: dict[str, Callable[[list[str], dict[str, Any], pd.DataFrame | None], Table]] = {
    "toy_sort": toy_sort_table,
    "datasets": dataset_table,
    "run_costs": run_cost_table,
    "ranking": ranking_table,
}


def build(inputs: list[str], spec: dict[str, Any], paper: pd.DataFrame | None) -> Table:
    """The table of ``spec["kind"]``."""
    if spec.get("kind") not in BUILDERS:
        raise ValueError(f"computed table {spec.get('name')!r}: unknown kind {spec.get('kind')!r}; "
                         f"known: {', '.join(BUILDERS)}")
    return BUILDERS[spec["kind"]](inputs, spec, paper)

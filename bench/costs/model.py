r"""The cost model: a job's projected seconds and peak memory, from its data and measurements.

Each rule that computes on the study's data has one function in :data:`COST_MODELS`; it reads
the job's resolved config (:func:`bench.config.plan.run_config`, the same file the job reads),
the shape of its fold (:mod:`bench.data.shapes`) and the measurements of
:mod:`bench.perf.calibrate` on the device the job runs on, and returns a
:class:`Projection`. A measurement the calibration lacks is listed in
``Projection.missing`` (``ltr-bench plan`` measures it and projects again); a job whose fold
shape cannot be known before ``prepare`` is *unsized*, with the reason.

**Neural run** (rule ``train``), with the budget of :class:`bench.training.budget.Budget`
(``E`` epochs, ``S`` steps; with ``patience`` the run may stop earlier, so this is an upper
bound), ``N`` documents in the fold, ``V`` and ``T`` documents of the validation and test
splits (cut to ``test_list_size``), ``P`` model parameters::

    seconds = data.seconds(N) + S * step_s + (E * V + T) / eval.docs_per_s
    host peak = data.peak(N) + 2 * 4P + max(step.work, eval.work + 3 * 4P)

``data`` is the ``neural_data`` measurement at two sizes of the fold, fitted ``a + b N``: the
process itself, the memory-mapped splits, the split tensors, evaluation and training lists. The
mapped part is exact, :attr:`~bench.data.shapes.FoldShape.run_mapped_bytes`: the training and
validation splits read whole while the run trains, then the validation and test splits once
it has released the training split's pages to score the test split. A split counts whole even
for a run of a few steps: with the fold in the page cache the kernel maps whole cached folios
around every page a batch reads (1,000 random rows mapped 850 MB of the 1.2 GB MSLR-sized
training file, with or without ``madvise(MADV_RANDOM)``), so a few hundred random lists map
most of it. ``2 * 4P``: the float32 weights and the copy of the best epoch's weights;
``step.work`` is measured beyond the weights (gradients, Adam's two moments, activations);
during validation the gradients and moments (``3 * 4P``) are still held.

**GBDT run**: ``seconds = c(N) + R * r(N)`` with ``R = num_trees`` (early stopping may end
sooner: an upper bound), ``c`` and ``r`` fitted from runs of 3 and 9 rounds at two sizes;
peak fitted from the 9-round runs. **Linear, evaluate, prepare**: seconds and peak fitted at
two sizes. Every fit is a straight line through the two measured sizes (``a + b N``; a
negative slope, i.e. noise, is taken as 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.config import plan
from bench.config.jobs import Job
from bench.config.run import resolve_metrics_config, resolve_train
from bench.costs.calibration import Calibration, entry_key
from bench.data.shapes import FoldShape, SplitShape, fold_shape

FLOAT_BYTES = 4  # float32 weights, gradients and Adam moments
#: part of the ``neural_data`` spec: what a run holds mapped at its peak (a cached measurement
#: taken when runs held the whole fold has another key and is measured again)
NEURAL_PAGES = "train+vali, then vali+test"


@dataclass
class Projection:
    """A job's projected cost (None where unknown) and how it was obtained."""

    seconds: float | None = None
    host_bytes: int | None = None
    gpu_bytes: int | None = None
    work: str = ""  # e.g. "100,000 steps, 85 validations"
    steps: int = 0  # optimiser steps (neural runs)
    rounds: int = 0  # boosting rounds (GBDT runs; at most)
    bound: bool = False  # an upper bound (early stopping, an estimated fold shape)
    note: str = ""
    unsized: str | None = None  # why there is no projection
    missing: dict[str, tuple[str, dict]] = field(default_factory=dict)  # key -> (kind, spec)

    @property
    def complete(self) -> bool:
        return self.unsized is None and not self.missing and self.seconds is not None


@dataclass
class Context:
    """What every cost model reads: the config, the calibration and the fold shapes (cached)."""

    config: dict[str, Any]
    calibration: Calibration
    shapes: dict[tuple[str, str], FoldShape | None] = field(default_factory=dict)

    def shape(self, dataset: str, fold: str) -> FoldShape | None:
        if (dataset, fold) not in self.shapes:
            spec = self.config["datasets"][dataset]
            self.shapes[(dataset, fold)] = fold_shape(spec["source"], fold, spec.get("options"),
                                                      plan.PREPARED.format(dataset=dataset, fold=fold))
        return self.shapes[(dataset, fold)]

    @property
    def device(self) -> str:
        return self.calibration.device.kind

    @property
    def threads(self) -> int:
        return self.calibration.device.threads


class _Need:
    """Look measurements up, remembering the missing ones."""

    def __init__(self, ctx: Context, proj: Projection) -> None:
        self.ctx, self.proj = ctx, proj

    def __call__(self, kind: str, spec: dict[str, Any]) -> dict[str, Any] | None:
        result = self.ctx.calibration.get(kind, spec)
        if result is None:
            self.proj.missing[entry_key(kind, spec)] = (kind, spec)
        return result


# ----------------------------------------------------------------------------- helpers


def line(xs: list[float], ys: list[float], x: float) -> float:
    """The straight line through two measured points, at ``x`` (slope >= 0).

    >>> line([10, 20], [5.0, 7.0], 100)
    23.0
    >>> line([10, 20], [5.0, 4.0], 100)
    5.0
    """
    (x1, x2), (y1, y2) = xs[:2], ys[:2]
    if x2 == x1:
        return float(max(y1, y2))
    slope = max(0.0, (y2 - y1) / (x2 - x1))
    return float(max(0.0, y1 + slope * (x - x1)))


def peak_fit(m: dict[str, Any], shape: FoldShape, *, mapped: int | None) -> float:
    """A measured peak at the planned fold. A job that reads its fold holds the fold's pages it
    has mapped at its peak (``mapped`` bytes of the planned fold; each measurement's
    ``fold_bytes`` the same at its size): that part is exact, and only the rest, the process and
    the job's own memory, is fitted ``a + b N`` (a line through two noisy peaks a few hundred MB
    apart would swing the fold's 2 GB by +-20 %). ``mapped`` None: the whole peak is fitted."""
    if mapped is not None and m.get("fold_bytes") and None not in m["fold_bytes"]:
        rest = [p - f for p, f in zip(m["peak_bytes"], m["fold_bytes"])]
        return mapped + line(m["sizes"], rest, shape.n_docs)
    return line(m["sizes"], m["peak_bytes"], shape.n_docs)


def shape_spec(shape: FoldShape) -> dict[str, Any]:
    """A fold shape as a measurement spec: sizes and the histogram of list lengths."""
    return {"n_features": shape.n_features, "splits": {name: _split_spec(s) for name, s in shape.splits.items()}}


def _split_spec(s: SplitShape) -> dict[str, Any]:
    out: dict[str, Any] = {"n_queries": s.n_queries, "n_docs": s.n_docs, "max_list": s.max_list, "lengths": None}
    if s.lengths is not None:
        values, counts = np.unique(s.lengths, return_counts=True)
        out["lengths"] = {"values": values.tolist(), "counts": counts.tolist()}
    return out


def _fold(ctx: Context, job: Job, proj: Projection) -> FoldShape | None:
    shape = ctx.shape(job.wildcards["dataset"], job.wildcards["fold"])
    if shape is None:
        proj.unsized = "fold shape unknown until prepared (no published split sizes)"
    elif not shape.exact:
        proj.bound, proj.note = True, shape.note
    return shape


def _run_entry(ctx: Context, job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
    w = job.wildcards
    run_cfg = plan.run_config(ctx.config, w["experiment"], w["dataset"], w["method"])
    return run_cfg, run_cfg["methods"][w["method"]]


# ----------------------------------------------------------------------------- the models


def neural(ctx: Context, job: Job) -> Projection:
    """Rule ``train``: see the module docstring."""
    from bench.training.budget import Budget

    proj = Projection()
    run_cfg, entry = _run_entry(ctx, job)
    if run_cfg.get("sinkprop_protocol") is not None:
        proj.unsized = "SinkProp's own protocol (L-BFGS on derived queries): no cost model"
        return proj
    shape = _fold(ctx, job, proj)
    if shape is None:
        return proj
    train = resolve_train(run_cfg["train"], entry.get("train"), method=job.wildcards["method"])
    model = plan.merged_model(run_cfg["model"], entry.get("model"))
    tr, va, te = (shape.splits[s] for s in ("train", "vali", "test"))
    L = train["list_size"] or tr.max_list
    if L is None:
        proj.unsized = "list_size null pads to the longest query, unknown until prepared"
        return proj
    budget = Budget.of(train, tr.n_queries)
    steps = budget.total_steps
    tls = train["test_list_size"]
    metrics = resolve_metrics_config(entry.get("metrics", run_cfg.get("metrics")))["names"]
    vali_names = list(dict.fromkeys([*metrics, train["early_stopping_metric"]]))
    need = _Need(ctx, proj)
    common = {"model": model, "n_features": shape.n_features, "amp": bool(train["amp"])}
    step = need("neural_step", {**common, "loss": entry["loss"], "params": entry.get("params") or {},
                                "batch_size": train["batch_size"], "list_size": int(L), "grad_clip": train["grad_clip"]})
    width = max(1, round(va.docs_cut(tls) / max(va.n_queries, 1)))
    ev = need("neural_eval", {**common, "width": width, "eval_batch_size": train["eval_batch_size"],
                              "metrics": vali_names})
    data = need("neural_data", {"shape": shape_spec(shape), "list_size": train["list_size"], "test_list_size": tls,
                                "eval_batch_size": train["eval_batch_size"], "pages": NEURAL_PAGES})
    proj.work, proj.steps = f"{steps:,} steps, {budget.n_epochs:,} validations", steps
    proj.bound = proj.bound or train["patience"] is not None
    if step is None or ev is None or data is None:
        return proj
    n = shape.n_docs
    eval_docs = budget.n_epochs * va.docs_cut(tls) + te.docs_cut(tls)
    proj.seconds = line(data["sizes"], data["seconds"], n) + steps * step["step_s"] + eval_docs / ev["docs_per_s"]
    weights = FLOAT_BYTES * step["n_params"]
    proj.host_bytes = int(peak_fit(data, shape, mapped=shape.run_mapped_bytes) + 2 * weights
                          + max(step["work_bytes"], ev["work_bytes"] + 3 * weights))
    if step.get("device_work_bytes") is not None:
        proj.gpu_bytes = int(shape.nbytes + 2 * weights + step["device_work_bytes"])
    return proj


def gbdt(ctx: Context, job: Job) -> Projection:
    """Rule ``gbdt``: see the module docstring."""
    from bench.config.settings import resolve_gbdt

    proj = Projection()
    run_cfg, entry = _run_entry(ctx, job)
    shape = _fold(ctx, job, proj)
    if shape is None:
        return proj
    cfg = resolve_gbdt(run_cfg, job.wildcards["method"])
    method = {k: v for k, v in entry.items() if k not in ("num_trees", "early_stopping_rounds")}
    m = _Need(ctx, proj)("gbdt", {"method": method, "metrics": run_cfg.get("metrics"), "shape": shape_spec(shape)})
    proj.work, proj.rounds, proj.bound = f"<= {cfg['num_trees']:,} rounds", cfg["num_trees"], True
    if m is None:
        return proj
    n, rounds = shape.n_docs, cfg["num_trees"]
    sizes = sorted({p["docs"] for p in m["points"]})
    fixed, per_round, peak, mapped = [], [], [], []
    for size in sizes:
        pts = sorted((p for p in m["points"] if p["docs"] == size), key=lambda p: p["rounds"])
        r = (pts[-1]["seconds"] - pts[0]["seconds"]) / max(pts[-1]["rounds"] - pts[0]["rounds"], 1)
        per_round.append(max(r, 0.0))
        fixed.append(pts[0]["seconds"] - pts[0]["rounds"] * per_round[-1])
        peak.append(max(p["peak_bytes"] for p in pts))
        mapped.append(pts[-1].get("fold_bytes"))
    proj.seconds = line(sizes, fixed, n) + rounds * line(sizes, per_round, n)
    proj.host_bytes = int(peak_fit({"sizes": sizes, "peak_bytes": peak, "fold_bytes": mapped}, shape,
                                   mapped=shape.nbytes))
    return proj


def _sized(kind: str, spec_of: Callable[[Context, Job, FoldShape], dict[str, Any]], work: str, *,
           maps_fold: bool) -> Callable:
    """A cost model fitted at two sizes of the fold: seconds and peak as ``a + b N``
    (:func:`peak_fit`: ``maps_fold`` for a job that reads its whole fold)."""

    def project(ctx: Context, job: Job) -> Projection:
        proj = Projection(work=work)
        shape = _fold(ctx, job, proj)
        if shape is None:
            return proj
        m = _Need(ctx, proj)(kind, {**spec_of(ctx, job, shape), "shape": shape_spec(shape)})
        if m is not None:
            proj.seconds = line(m["sizes"], m["seconds"], shape.n_docs)
            proj.host_bytes = int(peak_fit(m, shape, mapped=shape.nbytes if maps_fold else None))
        return proj

    return project


def _linear_spec(ctx: Context, job: Job, shape: FoldShape) -> dict[str, Any]:
    run_cfg, entry = _run_entry(ctx, job)
    return {"method": entry, "metrics": run_cfg.get("metrics")}


def _evaluate_spec(ctx: Context, job: Job, shape: FoldShape) -> dict[str, Any]:
    w = job.wildcards
    ev = plan.evaluation(ctx.config, w["name"], w["dataset"])
    return {"n_runs": len(ev.methods) * len(ev.seeds), "metrics": list(ev.metrics), "list_sizes": list(ev.list_sizes),
            "convention": plan.evaluation_convention(ctx.config, w["name"], w["dataset"])}


def _prepare_spec(ctx: Context, job: Job, shape: FoldShape) -> dict[str, Any]:
    spec = ctx.config["datasets"][job.wildcards["dataset"]]
    synthetic = spec["source"] == "synthetic"
    return {"synthetic": synthetic, "options": spec.get("options") or {}}


def stats(ctx: Context, job: Job) -> Projection:
    """Rule ``stats``: the table's statistics measured at its size (methods x seeds x the test
    queries of every dataset and fold it pools)."""
    proj = Projection(work="paired tests, bootstrap")
    table = job.wildcards["table"]
    spec = ctx.config["tables"][table]
    n_queries = 0
    for dataset in plan.table_datasets(ctx.config, table):
        for fold in plan.evaluation(ctx.config, table, dataset).folds:
            shape = ctx.shape(dataset, fold)
            if shape is None:
                proj.unsized = "a dataset's test queries are unknown until prepared"
                return proj
            n_queries += shape.splits["test"].n_queries * max(1, len(spec.get("list_sizes") or []))
    m = _Need(ctx, proj)("summary", {"n_methods": len(plan.table_methods(ctx.config, table)),
                                     "n_seeds": len(plan.table_seeds(ctx.config, table)), "n_queries": n_queries,
                                     "metrics": list(spec["metrics"]), "n_boot": ctx.config["stats"]["n_boot"]})
    if m is not None:
        proj.seconds, proj.host_bytes = m["seconds"], int(m["peak_bytes"])
    return proj


#: a summarising step (table, figure, freeze, compare) on top of the process it starts as:
#: measured 1.10x on the scale profile (reports/perf/scale.md); they read computed tables only
SUMMARY_OVER_PROCESS = 1.25
#: the spec of the ``process`` measurement, which cluster requests read too
#: (:func:`bench.costs.sizing.request`); it names ``step_bytes`` so that an entry measured
#: before that field existed has another key and is measured again
PROCESS_SPEC: dict[str, Any] = {"fields": ["peak_bytes", "step_bytes"]}


def process(ctx: Context, job: Job) -> Projection:
    """Summarising rules (tables, figures, freeze, compare): the process a job starts as
    (measured) x :data:`SUMMARY_OVER_PROCESS`; their time is seconds and not projected."""
    proj = Projection(work="summary")
    m = _Need(ctx, proj)("process", PROCESS_SPEC)
    if m is not None:
        proj.host_bytes = int(SUMMARY_OVER_PROCESS * m["peak_bytes"])
        proj.seconds = 0.0
    return proj


#: rule -> cost model; rules not here (run_config, fetch, report: local, or downloads) are not projected
COST_MODELS: dict[str, Callable[[Context, Job], Projection]] = {
    "train": neural,
    "gbdt": gbdt,
    "linear": _sized("linear", _linear_spec, "least squares, ridge grid", maps_fold=True),
    "evaluate": _sized("evaluate", _evaluate_spec, "per-query metrics", maps_fold=False),
    # prepare projects from the fold's expected shape (its own output does not exist yet)
    "prepare": _sized("prepare", _prepare_spec, "parse/generate, normalise, write", maps_fold=False),
    "stats": stats,
    **dict.fromkeys(("table", "figure", "freeze_dataset", "check_frozen", "compare_table", "loss_curves",
                     "check_reproduced"), process),
    # issue 26: tables from prepared folds' labels, runs' records or a six-document toy list
    **dict.fromkeys(("computed_table", "toy_sort"), process),
}


def project(ctx: Context, job: Job) -> Projection | None:
    """The job's projection, or None for a rule without a cost model (see :data:`COST_MODELS`)."""
    model = COST_MODELS.get(job.rule)
    return None if model is None else model(ctx, job)


def gib(n_bytes: float | None) -> str:
    return "?" if n_bytes is None else f"{n_bytes / 2**30:.1f} GiB"


def hours(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


__all__ = ["COST_MODELS", "Context", "Projection", "gib", "hours", "line", "project", "shape_spec"]

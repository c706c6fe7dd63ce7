r"""The cost model: a job's projected seconds and peak memory, from its data and measurements.

Each rule that computes on the study's data has one function in :data:`COST_MODELS`; it reads
the job's resolved config (:func:`bench.config.plan.run_config`, the same file the job reads),
the shape of its fold (:mod:`bench.data.shapes`) and the measurements of
:mod:`bench.costs.measure` on the device the job runs on, and returns a
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

With ``train.refit`` (:mod:`bench.training.refit`) a second model trains from scratch on the
training and validation splits together, without validation: ``S_r`` more steps (the budget on
the training and validation queries together; with ``checkpoint: best`` it may be fewer, so
this too is an upper bound) and a private copy of both splits (``split_bytes(train) +
split_bytes(vali)`` more host memory)::

    seconds += S_r * step_s          host peak += bytes(train) + bytes(vali)

``step`` (:func:`_step`) is composed, so that each model and each loss is measured once: the
model's step with the point-wise reference loss, plus the loss's own forward and backward pass
on ``[batch, list]`` scores less the reference loss's (time and working memory): the backward
pass into the model is the same whatever loss produced the scores' gradient.

**GBDT run**: ``seconds = c(N) + R * r(N)`` with ``R = num_trees`` (early stopping may end
sooner: an upper bound; with ``train.refit`` a second ``c + R * r`` at the training and
validation splits' ``N'`` documents follows), ``c`` and ``r`` fitted from runs of 1 and 16 rounds
(:data:`~bench.costs.measure.GBDT_ROUNDS`) at two sizes. Peak: the fold, the library's binned
copy of the features (:data:`BIN_BYTES` a value) and the rest as measured at the larger size
(the process, the trees' buffers): a line through two small sizes overshot 1.5-2x (XGBoost's
and LightGBM's memory beyond the fold grows with the trees, which fill at a few ten thousand
documents, not with the documents: 0.5 GB beyond the 64 MB fold at 122,000 documents and
0.5 GB beyond the 2.07 GB fold at 3.77 million, for XGBoost on the MSLR-sized fold).
**Linear, evaluate, prepare**: seconds and peak fitted at two sizes. Every fit is a straight
line through the two measured sizes (``a + b N``; a negative slope, i.e. noise, is taken as 0).
The sizes are :data:`VALUES` feature values whatever the fold's size (:func:`measured_sizes`),
so a calibration takes the same few seconds for a fold of 50,000 or 10 million documents; the
exact calibration (``Context.exact``) measures 5 % and 10 % of each fold instead.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.config import plan, tuning
from bench.config.jobs import Job
from bench.config.run import resolve_metrics_config, resolve_train
from bench.costs.calibration import Calibration, entry_key
from bench.costs.measure import GBDT_ROUNDS, REFERENCE_LOSS
from bench.data.shapes import FoldShape, SplitShape, fold_shape

FLOAT_BYTES = 4  # float32 weights, gradients and Adam moments
#: part of the ``neural_data`` spec: what a run holds mapped at its peak (a cached measurement
#: taken when runs held the whole fold has another key and is measured again)
NEURAL_PAGES = "train+vali, then vali+test"
#: bytes a GBDT library keeps per feature value of the fold (XGBoost's ``QuantileDMatrix``,
#: LightGBM's ``Dataset``: one byte a bin index at ``max_bin`` <= 256)
BIN_BYTES = 1
#: test queries of the two ``summary`` measurements (:func:`stats`); a smaller table is measured whole
SUMMARY_QUERIES = (500, 2000)
#: the largest batch (lists) a model's or a loss's step is measured at; larger ones are scaled (:func:`_step`)
MEASURED_BATCH = 16
#: feature values (documents x features, over all splits) of the two generated folds a
#: size-dependent measurement runs on (:func:`measured_sizes`): the larger one's arrays (64 MB)
#: exceed the processor's caches, as a planned fold's do, so per-document rates carry over;
#: 29,400 and 117,600 documents at MSLR's 136 features, 5,700 and 22,900 at Yahoo!'s 700
VALUES = (4_000_000, 16_000_000)

#: the exact calibration's sizes: fractions of the planned fold, the smaller at least
#: EXACT_MIN_DOCS; a synthetic prepare at 10 % and 25 % (generating 5 % more documents takes
#: about a second, which drowned in start-up noise)
EXACT_FRACTIONS, EXACT_PREPARE_FRACTIONS, EXACT_MIN_DOCS = (0.05, 0.1), (0.1, 0.25), 20_000


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
    disk_bytes: int | None = None  # what the job leaves on disk (:func:`disk_bytes`; None: not projected)

    @property
    def complete(self) -> bool:
        return self.unsized is None and not self.missing and self.seconds is not None


@dataclass
class Context:
    """What every cost model reads: the config, the calibration and the fold shapes (cached)."""

    config: dict[str, Any]
    calibration: Calibration
    shapes: dict[tuple[str, str], FoldShape | None] = field(default_factory=dict)
    #: measure every job at its own shape (:data:`EXACT_FRACTIONS`, a model step with the job's
    #: own loss): the slow calibration the fast one is checked against (``ltr-bench plan --exact``)
    exact: bool = False

    #: a run config's resolved settings, by the JSON of what they are resolved from: a study
    #: resolves the same few schedules for thousands of runs (every seed, fold and tuned configuration)
    resolved: dict[str, Any] = field(default_factory=dict)
    #: each run name's ``(run config, method entry)`` (:func:`_run_entry`), read-only: a run's
    #: cost model and its disk size both read it, for every seed and fold of the method
    run_entries: dict[tuple[str, str, str], tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    def resolve(self, key: list[Any], compute: Callable[[], Any]) -> Any:
        """``compute()`` once per distinct ``key`` (JSON-equal: what the result depends on), a deep copy each time."""
        text = json.dumps(key, sort_keys=True, default=str)
        if text not in self.resolved:
            self.resolved[text] = compute()
        return copy.deepcopy(self.resolved[text])

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


def measured_sizes(shape: FoldShape, *, exact: bool, prepare: str | None = None) -> list[int]:
    """Documents of the two generated folds a size-dependent measurement of ``shape`` runs on.

    Fast (the default): :data:`VALUES` feature values, a fold smaller than twice the first
    measured at half its size and whole.
    Exact: :data:`EXACT_FRACTIONS` of the fold, the smaller at least :data:`EXACT_MIN_DOCS`
    documents. A ``prepare`` that generates a synthetic fold is measured at
    :data:`EXACT_PREPARE_FRACTIONS` of it either way: the generator's peak memory per document
    at a few ten thousand documents was twice its peak per document at MSLR's size (the
    projection 6.2 GiB against 3.5 GB measured), and only the default and scale profiles have
    such a step.

    >>> from bench.data.shapes import FoldShape, SplitShape
    >>> fold = FoldShape(100, {s: SplitShape(100, 1_000_000) for s in ("train", "vali", "test")}, "published", True)
    >>> measured_sizes(fold, exact=False)
    [40000, 160000]
    >>> measured_sizes(fold, exact=True)
    [150000, 300000]
    """
    total = shape.n_docs
    if not exact and prepare != "generate":
        small, large = (max(1, v // max(shape.n_features, 1)) for v in VALUES)
        return [min(small, max(1, total // 2)), min(large, total)]
    base = EXACT_PREPARE_FRACTIONS if prepare == "generate" else EXACT_FRACTIONS
    small = max(base[0], min(0.5, EXACT_MIN_DOCS / max(total, 1)))
    return [max(1, round(total * small)), max(1, round(total * min(1.0, small * base[1] / base[0])))]


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
    """The run config a job's projection reads. A tuned method's configuration 2..B
    (``<method>+cfg<i>``) is projected as its configuration 1, the method itself: what tuning
    varies (learning rate, dropout, a temperature, a GBDT's leaves) changes a step's arithmetic
    little next to the loss, model and data, and one measurement per method and fold shape
    keeps the calibration as short as an untuned study's (else every drawn configuration
    would be a measurement of its own); the job's note says so. Built once per run name
    (``ctx.run_entries``); the caller must not change it."""
    w = job.wildcards
    key = (str(w["experiment"]), str(w["dataset"]), str(w["method"]))
    if key not in ctx.run_entries:
        parsed = tuning.parse_name(key[2])
        method = parsed[0] if parsed else key[2]
        run_cfg = plan.run_config(ctx.config, key[0], key[1], method)
        entry = run_cfg["methods"][method]
        run_cfg["methods"] = {key[2]: entry}
        ctx.run_entries[key] = (run_cfg, entry)
    return ctx.run_entries[key]


def _tuning_note(job: Job, proj: Projection) -> None:
    if tuning.parse_name(str(job.wildcards["method"])) is not None:
        proj.note = "a tuning configuration, projected at its default configuration's cost"


# ----------------------------------------------------------------------------- the models


def neural(ctx: Context, job: Job) -> Projection:
    """Rule ``train``: see the module docstring."""
    from bench.training.budget import Budget

    proj = Projection()
    run_cfg, entry = _run_entry(ctx, job)
    _tuning_note(job, proj)
    if run_cfg.get("sinkprop_protocol") is not None:
        proj.unsized = "SinkProp's own protocol (L-BFGS on derived queries): no cost model"
        return proj
    shape = _fold(ctx, job, proj)
    if shape is None:
        return proj
    train = ctx.resolve(["train", run_cfg["train"], entry.get("train")],  # the method names errors only
                        lambda: resolve_train(run_cfg["train"], entry.get("train"), method=job.wildcards["method"]))
    model = plan.merged_model(run_cfg["model"], entry.get("model"))
    tr, va, te = (shape.splits[s] for s in ("train", "vali", "test"))
    L = train["list_size"] or tr.max_list
    if L is None:
        proj.unsized = "list_size null pads to the longest query, unknown until prepared"
        return proj
    budget = Budget.of(train, tr.n_queries)
    steps = budget.total_steps
    tls = train["test_list_size"]
    given = entry.get("metrics", run_cfg.get("metrics"))
    metrics = ctx.resolve(["metrics", given], lambda: resolve_metrics_config(given))["names"]
    vali_names = list(dict.fromkeys([*metrics, train["early_stopping_metric"]]))
    need = _Need(ctx, proj)
    common = {"model": model, "n_features": shape.n_features, "amp": bool(train["amp"])}
    step = _step(ctx, need, {**common, "batch_size": train["batch_size"], "list_size": int(L),
                             "grad_clip": train["grad_clip"]}, entry["loss"], entry.get("params") or {})
    width = max(1, round(va.docs_cut(tls) / max(va.n_queries, 1)))
    ev = need("neural_eval", {**common, "width": width, "eval_batch_size": train["eval_batch_size"],
                              "metrics": vali_names})
    data = need("neural_data", {"shape": shape_spec(shape), "sizes": measured_sizes(shape, exact=ctx.exact),
                                "list_size": train["list_size"], "test_list_size": tls,
                                "eval_batch_size": train["eval_batch_size"], "pages": NEURAL_PAGES})
    refit_steps = Budget.of(train, tr.n_queries + va.n_queries).total_steps if train["refit"] else 0
    proj.work = f"{steps:,} steps, {budget.n_epochs:,} validations" + (
        f", then a refit of {refit_steps:,} steps on train + validation" if refit_steps else "")
    proj.steps = steps + refit_steps
    proj.bound = proj.bound or train["patience"] is not None or (refit_steps > 0 and train["checkpoint"] == "best")
    if step is None or ev is None or data is None:
        return proj
    n = shape.n_docs
    eval_docs = budget.n_epochs * va.docs_cut(tls) + te.docs_cut(tls)
    proj.seconds = (line(data["sizes"], data["seconds"], n) + (steps + refit_steps) * step["step_s"]
                    + eval_docs / ev["docs_per_s"])
    weights = FLOAT_BYTES * step["n_params"]
    copy = shape.split_bytes("train") + shape.split_bytes("vali") if refit_steps else 0
    proj.host_bytes = int(peak_fit(data, shape, mapped=shape.run_mapped_bytes) + 2 * weights + copy
                          + max(step["work_bytes"], ev["work_bytes"] + 3 * weights))
    if step.get("device_work_bytes") is not None:
        proj.gpu_bytes = int(shape.nbytes + 2 * weights + step["device_work_bytes"])
    return proj


def _step(ctx: Context, need: _Need, shape: dict[str, Any], loss: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """One optimiser step of the model of ``shape`` (model, features, batch, list size, ...)
    with ``loss``: ``step_s``, ``work_bytes``, ``n_params`` (and ``device_work_bytes``).

    Fast: the model's step with :data:`~bench.costs.measure.REFERENCE_LOSS` plus what ``loss``
    costs beyond it on the same ``[batch, list]`` scores (time and working memory of its
    forward and backward pass), each measured once whatever their pairs, on a batch of at most
    :data:`MEASURED_BATCH` lists and scaled to the planned batch ``B`` (``s = B / measured``)::

        step_s = s * (model.step_s + loss.seconds - reference.seconds)
        work   = state + s * (model.work - state) + s * (loss.work - reference.work)

    (``state = 3 * 4P``: gradients and Adam's two moments, which do not grow with the batch;
    every list's forward and backward pass is independent of the others'). Exact: the step with
    ``loss`` itself at the planned batch."""
    if ctx.exact:
        return need("model_step", {**shape, "loss": loss, "params": params})
    batch = min(int(shape["batch_size"]), MEASURED_BATCH)
    scale = int(shape["batch_size"]) / batch
    base = need("model_step", {**shape, "batch_size": batch, "loss": REFERENCE_LOSS, "params": {}})
    scores = {"batch_size": batch, "list_size": shape["list_size"]}
    own = need("loss_step", {**scores, "loss": loss, "params": params})
    ref = need("loss_step", {**scores, "loss": REFERENCE_LOSS, "params": {}})
    if base is None or own is None or ref is None:
        return None
    state = 3 * FLOAT_BYTES * base["n_params"]
    out = {**base, "step_s": scale * (base["step_s"] + max(0.0, own["seconds"] - ref["seconds"])),
           "work_bytes": state + scale * (max(0, base["work_bytes"] - state) + max(0, own["work_bytes"] - ref["work_bytes"]))}
    if base.get("device_work_bytes") is not None:
        loss_dev = max(0, (own.get("device_work_bytes") or 0) - (ref.get("device_work_bytes") or 0))
        out["device_work_bytes"] = state + scale * (max(0, base["device_work_bytes"] - state) + loss_dev)
    return out


def gbdt(ctx: Context, job: Job) -> Projection:
    """Rule ``gbdt``: see the module docstring."""
    from bench.config.settings import resolve_gbdt

    proj = Projection()
    run_cfg, entry = _run_entry(ctx, job)
    _tuning_note(job, proj)
    shape = _fold(ctx, job, proj)
    if shape is None:
        return proj
    cfg = resolve_gbdt(run_cfg, job.wildcards["method"])
    method = {k: v for k, v in entry.items() if k not in ("num_trees", "early_stopping_rounds")}
    # the round counts are part of the spec (and so of the cache key): a change re-measures
    m = _Need(ctx, proj)("gbdt", {"method": method, "metrics": run_cfg.get("metrics"), "shape": shape_spec(shape),
                                  "sizes": measured_sizes(shape, exact=ctx.exact), "rounds": list(GBDT_ROUNDS)})
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
    if run_cfg["train"].get("refit"):  # the shared train.refit (bench.training.refit): the same rounds at most
        n_refit = shape.splits["train"].n_docs + shape.splits["vali"].n_docs
        proj.seconds += line(sizes, fixed, n_refit) + rounds * line(sizes, per_round, n_refit)
        proj.work += ", then a refit on train + validation"
    # the fold, the library's binned copy of its features and the rest as at the larger size
    rest = peak[-1] - (mapped[-1] or 0) - BIN_BYTES * sizes[-1] * shape.n_features
    proj.host_bytes = int(shape.nbytes + BIN_BYTES * n * shape.n_features + max(rest, 0))
    return proj


def _sized(kind: str, spec_of: Callable[[Context, Job, FoldShape], dict[str, Any]], work: str, *,
           maps_fold: bool) -> Callable[[Context, Job], Projection]:
    """A cost model fitted at two sizes of the fold: seconds and peak as ``a + b N``
    (:func:`peak_fit`: ``maps_fold`` for a job that reads its whole fold)."""

    def project(ctx: Context, job: Job) -> Projection:
        proj = Projection(work=work)
        shape = _fold(ctx, job, proj)
        if shape is None:
            return proj
        spec = spec_of(ctx, job, shape)
        prepare = None if kind != "prepare" else "generate" if spec["synthetic"] else "parse"
        m = _Need(ctx, proj)(kind, {**spec, "shape": shape_spec(shape),
                                    "sizes": measured_sizes(shape, exact=ctx.exact, prepare=prepare)})
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
    """Rule ``stats``: the table's statistics (methods x seeds x the test queries ``Q`` of every
    dataset and fold it pools) measured at :data:`SUMMARY_QUERIES` queries and fitted ``a + b Q``
    (every test and bootstrap resample is a pass over the queries); exact: at ``Q`` itself."""
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
    sizes = [n_queries] if ctx.exact else sorted({min(n_queries, q) for q in SUMMARY_QUERIES})
    m = _Need(ctx, proj)("summary", {"n_methods": len(plan.table_methods(ctx.config, table)),
                                     "n_seeds": len(plan.table_seeds(ctx.config, table)), "sizes": sizes,
                                     "metrics": list(spec["metrics"]), "n_boot": ctx.config["stats"]["n_boot"]})
    if m is not None:
        proj.seconds = line(m["sizes"] * 2, m["seconds"] * 2, n_queries)
        proj.host_bytes = int(line(m["sizes"] * 2, m["peak_bytes"] * 2, n_queries))
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


def ranking(ctx: Context, job: Job) -> Projection:
    """Rule ``ranking`` (``ltr-bench ranking``): it reads the evaluated frames its table's ``stats``
    job reads and keeps per block only each method's per-seed means, then ranks and tests a
    blocks x methods matrix: its memory is at most that job's projection (:func:`stats`, which
    holds the same frames and more: seed-averaged per-query matrices, bootstrap resamples); its
    time is that of a summarising step (seconds: a group-by over the rows, no resampling)."""
    table = ctx.config["computed_tables"]["ranking_table"]["table"]
    proj = stats(ctx, Job("stats", plan.profiled(ctx.config, plan.STATS).format(table=table), {"table": table}))
    proj.work, proj.bound = "block means, ranks, Friedman and Nemenyi tests", True
    proj.note = f"memory: at most the stats job of {table} (same frames)"
    if proj.seconds is not None:
        proj.seconds = 0.0
    return proj


def tuning_job(ctx: Context, job: Job) -> Projection:
    """Rules ``tune`` and ``tuned_runs``: one job trains a tuned method's runs one after another
    (every configuration on the tuning fold, :func:`bench.config.plan.tune_spec`; the chosen
    configuration's runs, :func:`bench.config.plan.tuned_runs_spec`). Its time is the sum of
    those runs' projections (each by its run kind's model; a configuration at its default
    configuration's cost, :func:`_run_entry`), its peak the largest of theirs (a run's memory is
    freed before the next starts; the choice reads records of a few kB)."""
    w = job.wildcards
    experiment, dataset = str(w["experiment"]), str(w["dataset"])
    runs = plan.tuning_job_runs(ctx.config, job.rule, experiment, dataset, str(w["method"]))
    work = (f"{len(runs)} runs of {len({r['method'] for r in runs})} configurations" if job.rule == "tune"
            else f"{len(runs)} runs of the chosen configuration")
    proj = Projection(work=f"{work}, one after another", seconds=0.0, host_bytes=0, gpu_bytes=0, disk_bytes=0,
                      note="tuning configurations projected at the default configuration's cost")
    for run in runs:
        _add_run(proj, project(ctx, Job(run["rule"], run["dir"], {"experiment": experiment, "dataset": dataset,
                                                                   "fold": run["fold"], "method": run["method"],
                                                                   "seed": run["seed"]})))
    return proj


def _add_run(total: Projection, run: Projection | None) -> None:
    """Add one run's projection to a job that trains it after the others: times and disk add up, peaks do not."""
    if run is None:
        return
    total.missing.update(run.missing)
    total.unsized = total.unsized or run.unsized
    total.bound, total.steps, total.rounds = total.bound or run.bound, total.steps + run.steps, total.rounds + run.rounds
    total.seconds = None if total.seconds is None or run.seconds is None else total.seconds + run.seconds
    total.host_bytes = None if total.host_bytes is None or run.host_bytes is None else max(total.host_bytes, run.host_bytes)
    total.gpu_bytes = max(total.gpu_bytes or 0, run.gpu_bytes or 0)
    total.disk_bytes = None if total.disk_bytes is None or run.disk_bytes is None else total.disk_bytes + run.disk_bytes


#: PiRank-NDCG's variants the scaling figure always times besides its losses (``depth1``, ``depth3``,
#: ``depth1-fullmatrix``: :mod:`bench.perf.scaling`)
SCALING_PIRANK_CURVES = 3


def perf_scaling(ctx: Context, job: Job) -> Projection:
    """Rule ``perf_scaling`` (``ltr-bench perf scaling``, the scaling figure): an upper bound from
    its own budget. Each curve at each list size runs one warm-up step, which ends the curve when
    it alone takes more than ``max_seconds``, then at most ``max_seconds`` of timed steps: so
    ``curves x sizes x 2 x max_seconds`` at most (growth of a curve stops early when its steps
    would pass that)."""
    spec = ctx.config["figures"]["scaling_figure"]
    curves = SCALING_PIRANK_CURVES + len(set(spec["losses"]) - {"pirank_ndcg"})
    proj = Projection(work=f"{curves} curves x {len(spec['sizes'])} list sizes", bound=True,
                      note=f"at most 2 x max_seconds ({spec['max_seconds']:g} s) per curve and list size")
    proj.seconds = float(curves * len(spec["sizes"]) * 2 * spec["max_seconds"])
    return proj


#: rules run on the submitting machine in seconds (the coverage page, the
#: report) or downloading (fetch): not projected, and not counted in device time
LOCAL_RULES = ("fetch", "coverage", "report")

#: rule -> cost model; the rules of LOCAL_RULES have none
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
    # issue 32: the choice of a grid point (reads run.json records) and the selection table
    **dict.fromkeys(("select", "selection_table"), process),
    # issue 40: the choice of a tuned configuration (run.json records) and a tuned table's summary
    # issue 40: a tuned method's two jobs (issue 43: each trains its runs), a tuned table's summary
    **dict.fromkeys(("tune", "tuned_runs"), tuning_job),
    "tuning_summary": process,
    "perf_scaling": perf_scaling,
    # issue 35: the quality-cost figure's table, from a statistics table and its runs' records
    "quality_cost": process,
    # issue 40: a table's ranking across datasets and folds, from the frames its stats job reads
    "ranking": ranking,
}


RUN_RULES = ("train", "gbdt", "linear")
SCORE_BYTES = 4  # scores.npy: one float32 per test document
METRIC_BYTES = 8  # metrics.parquet: at most a float64 per test query and column (it compresses below that)


def disk_bytes(ctx: Context, job: Job) -> int | None:
    """What a job leaves on disk, where it is more than a record: a prepared fold's arrays (exact,
    :attr:`~bench.data.shapes.FoldShape.nbytes`) and a run's test scores and per-query metrics
    (an upper bound: a run of the default study wrote 61,448 bytes of scores for 15,330 test
    documents, 61,320 + the .npy header, and 30,421 bytes of metrics for 300 queries x 26 columns,
    under the 62,400 this gives). None for a fold whose shape is unknown; 0 for the rest (records of a few kB)."""
    if job.rule != "prepare" and job.rule not in RUN_RULES:
        return 0
    shape = ctx.shape(job.wildcards["dataset"], job.wildcards["fold"])
    if shape is None:
        return None
    if job.rule == "prepare":
        return shape.nbytes
    from bench.config.run import resolve_metrics_config

    test = shape.splits["test"]
    names = resolve_metrics_config(_run_entry(ctx, job)[0]["metrics"])["names"]
    columns = 2 * len(names) + 6  # each metric and its `:dropped` flag; dataset, fold, method, seed, query, convention
    return test.n_docs * SCORE_BYTES + test.n_queries * columns * METRIC_BYTES


def project(ctx: Context, job: Job) -> Projection | None:
    """The job's projection, or None for a rule without a cost model (see :data:`COST_MODELS`);
    a complete one with what the job leaves on disk (:func:`disk_bytes`)."""
    model = COST_MODELS.get(job.rule)
    if model is None:
        return None
    proj = model(ctx, job)
    if proj.complete and model is not tuning_job:  # a tuning's job sums its runs' own
        proj.disk_bytes = disk_bytes(ctx, job)
    return proj


def gib(n_bytes: float | None) -> str:
    return "?" if n_bytes is None else f"{n_bytes / 2**30:.1f} GiB"


def size_text(n_bytes: float) -> str:
    """Bytes as MiB below a GiB, else GiB.

    >>> size_text(52_428_800), size_text(3 * 2**30)
    ('50 MiB', '3.0 GiB')
    """
    return f"{n_bytes / 2**20:.0f} MiB" if n_bytes < 2**30 else gib(n_bytes)


def hours(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


__all__ = ["COST_MODELS", "LOCAL_RULES", "Context", "Projection", "disk_bytes", "gib", "hours", "line", "project",
           "shape_spec", "size_text"]

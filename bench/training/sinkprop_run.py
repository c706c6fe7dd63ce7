"""One run under SinkProp's own protocol: initialise, resample, anneal per penalty, choose, write.

:func:`protocol_run` is what ``ltr-bench train`` calls for a method whose run config carries
a ``sinkprop_protocol`` section (the run kind ``sinkprop_protocol`` of :mod:`bench.config.kinds`); the
protocol itself (keys, objective, annealing, early stopping) is described in
:mod:`bench.training.sinkprop_protocol`. The run directory has the usual four files;
``run.json``'s ``result`` records the initialiser (its ridge grid, chosen penalty, validation
score), the regularisation grid with each penalty's best validation score and stage, the
chosen penalty, the sigma schedule and its scale, the derived-query counts, the final
weights and intercept; ``curve.csv`` has the initialiser's row (epoch 0) and one row per
(penalty, stage) with ``penalty, stage, sigma, loss, regulariser`` beside the usual columns
(``tau`` holds sigma, ``step`` the cumulative L-BFGS function evaluations of that penalty).

Test-time ranking: the chosen weights rank the test split twice, by the linear scores and by
the short-cut Hungarian method (:func:`bench.training.sinkprop_protocol.hungarian_scores`);
both are graded, and ``result.test_ranking`` records ``used`` (the protocol's
``test_ranking``), the SinkProp matrix's ``sigma, top, n_iter, eps``, ``test_means`` of both
rankings (``scores``, ``shortcut_hungarian``), ``seconds`` (the short cut's time) and
``queries_reordered`` (test queries whose two rankings differ). ``scores.npy``,
``metrics.parquet`` and ``result.test_means`` hold the ranking named by ``used``: for
``shortcut_hungarian``, ``scores.npy`` is minus each document's 1-based rank in its query.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.atomic.progress import Reporter
from bench.data.resample import resample_queries
from bench.errors import TrainingDiverged
from bench.provenance import cpu_name, host_peak_rss_bytes
from bench.results import training_timing
from bench.seeds import numpy_generator
from bench.training.common import RunFold, RunOutput, evaluate_split, load_fold, log, write_result
from bench.training.device import deterministic, resolve_device, torch_threads
from bench.training.linear import best_index, predict, ridge_path, select_penalty, vali_metric
from bench.training.loss import make_loss
from bench.training.sinkprop_protocol import (
    Annealing,
    PenaltyFit,
    curve_frame,
    derived_chunks,
    hungarian_scores,
    loss_with_sigma,
    rank_within,
    ranking_settings,
    ranking_sigma,
    score_variance,
    sigma_schedule,
)

SEEDING = "bench.seeds.derive_seed(dataset, fold, method, seed, 'resample')"


def protocol_run(
    settings: dict[str, Any],
    prepared_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    method: str,
    seed: int,
    device: str = "auto",
    quiet: bool = False,
    threads: int | None = None,
    run_config_sha256: str | None = None,
) -> Path:
    """Train ``method`` on a prepared fold under the config's ``sinkprop_protocol``; write the run."""
    started = time.perf_counter()
    cfg = dict(settings)
    proto = cfg.pop("sinkprop_protocol")
    loss_fn = make_loss(cfg, method).fn
    loss_with_sigma(loss_fn, method, cfg["params"])
    reporter = Reporter(out_dir, kind="sinkprop_protocol", unit="penalty", label=f"{method}/{seed}",
                        phase="loading the fold")
    with reporter:  # a line at least every interval, naming the phase
        run = load_fold(prepared_dir, method=method, seed=seed)
        reporter.label = "/".join(str(v) for v in run.identity.values())
        dev = resolve_device(device, on_missing_cuda=log)
        with torch_threads(threads), deterministic(dev):
            reporter.phase = "annealing and validating the penalties"
            fitted = _fit(cfg, proto, loss_fn, run, dev)
            n_threads = torch.get_num_threads()
            reporter.phase = "scoring the test split"
            scores, frame, ranking = _test_rankings(cfg, proto, fitted, run, loss_fn=loss_fn, dev=dev)
        result = {**fitted["result"], "test_means": ranking["test_means"][proto["test_ranking"]],
                  "test_ranking": ranking, "n_test_queries": int(frame.shape[0]),
                  "n_parameters": int(fitted["weights"].size + 1)}
        if not quiet:
            _log_result(result, ranking, proto)
        facts = {"device": dev.type,
                 "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else cpu_name(),
                 "wall_time_s": time.perf_counter() - started, "torch_threads": n_threads,
                 **fitted["training"],  # the annealing alone: train_seconds, train_docs, ..., seconds per stage
                 "peak_memory": {"host_max_rss_bytes": host_peak_rss_bytes(), "cuda_max_allocated_bytes": None},
                 "result": result}
        protocol = run.protocol("sinkprop_protocol", SEEDING, model=cfg["model"], metrics=cfg["metrics"],
                                early_stopping_metric=cfg["train"]["early_stopping_metric"], sinkprop_protocol=proto)
        reporter.phase = "writing the run directory"
        out = write_result(out_dir, run, RunOutput(scores, frame, fitted["curve"], facts), kind="sinkprop_protocol",
                           config={**cfg, "sinkprop_protocol": proto}, device_requested=device, protocol=protocol,
                           run_config_sha256=run_config_sha256)
    reporter.clear()  # the run directory is written (and the heartbeat stopped): the record has served
    return out


def _log_result(result: dict[str, Any], ranking: dict[str, Any], proto: dict[str, Any]) -> None:
    log(f"SinkProp protocol: penalty {result['penalty']:g} (stage {result['best_stage']}), vali "
        f"{result['early_stopping_metric']} {result['best_vali']:.5f} (init {result['init']['vali']:.5f})")
    m = next((n for n in (result["early_stopping_metric"], *result["test_means"]) if n in result["test_means"]), None)
    if m is not None:
        log(f"SinkProp protocol: test {m} " + ", ".join(f"{name} {means[m]:.5f}" for name, means in
                                                        ranking["test_means"].items())
            + f" (the run's ranking: {proto['test_ranking']})")


def _fit(cfg: dict[str, Any], proto: dict[str, Any], loss_fn, run: RunFold, dev: torch.device) -> dict[str, Any]:
    """Initialiser, derived queries, one annealing per penalty, the best penalty on validation."""
    from bench.metrics import higher_is_better

    train, vali = run.prepared.splits["train"], run.prepared.splits["vali"]
    metric = cfg["train"]["early_stopping_metric"]
    init = select_penalty(ridge_path(train.features, train.labels), proto["init_penalties"], (train, vali), metric,
                          cfg["metrics"])
    grade_scores = vali_metric(vali, metric, cfg["metrics"])
    scale = score_variance(predict(train.features, init.weights, init.intercept), np.asarray(train.offsets))
    sigmas = sigma_schedule(proto["sigma_start"], proto["sigma_factor"], proto["stages"], scale if scale > 0 else 1.0)
    rng = numpy_generator(run.dataset, run.fold, run.method, int(run.seed), "resample")
    derived = resample_queries(np.asarray(train.offsets), proto["derived_queries"], proto["max_derived_size"], rng)
    chunks = derived_chunks(train.features, train.labels, derived, dev)
    higher = higher_is_better(metric)
    annealing = Annealing(
        loss=loss_fn, chunks=chunks, w0=torch.from_numpy(init.weights).to(dev), b0=init.intercept, sigmas=sigmas,
        grade=lambda w: grade_scores(predict(vali.features, w, init.intercept)),
        better=(lambda new, best: new > best) if higher else (lambda new, best: new < best),
        proto=proto, metric=metric,
    )
    init_vali = init.vali[init.index]
    fits = [annealing.fit(p, init_vali, i * proto["stages"]) for i, p in enumerate(proto["penalties"])]
    chosen = fits[best_index([f.vali for f in fits], higher)]
    n_docs = int(derived.offsets[-1])
    # every function evaluation, and each stage's closing evaluation, is one pass over the derived queries
    stages = sum(len(f.rows) for f in fits)
    timing = training_timing(sum(f.train_seconds for f in fits), n_docs * (sum(f.func_evals for f in fits) + stages),
                             stages)
    result = {
        "init": {"penalties": init.penalties, "vali_by_penalty": init.vali, "penalty": init.penalty, "vali": init_vali},
        **_choice(fits, chosen, metric),
        "sigma_scale": scale, "sigmas": sigmas,
        "derived_queries": {"drawn": int(derived.sizes.size), "non_empty": derived.n_queries,
                            "used": int(sum(c.mask.shape[0] for c in chunks)), "documents": n_docs,
                            "capped": int((derived.sizes == proto["max_derived_size"]).sum())},
        "weights": chosen.weights.tolist(), "intercept": init.intercept,
    }
    return {"weights": chosen.weights, "intercept": init.intercept, "result": result,
            "curve": curve_frame(init_vali, metric, fits), "training": timing}


def _test_rankings(cfg: dict[str, Any], proto: dict[str, Any], fitted: dict[str, Any], run: RunFold, *, loss_fn,
                   dev: torch.device) -> tuple[np.ndarray, Any, dict[str, Any]]:
    """Both test rankings of the chosen weights, graded; the protocol's ``test_ranking`` is the run's.

    Returns that ranking's scores and per-query frame, and ``run.json``'s ``result.test_ranking``:
    the choice, the SinkProp matrix's settings, both rankings' test means, the short cut's
    seconds and how many test queries it orders differently from the scores.
    """
    from bench.metrics import summarize

    test = run.prepared.splits["test"]
    offsets, labels = np.asarray(test.offsets), np.asarray(test.labels)
    linear = predict(test.features, fitted["weights"], fitted["intercept"])
    if not np.isfinite(linear).all():
        raise TrainingDiverged(f"methods.{run.method}: non-finite test scores")
    res = fitted["result"]
    settings = ranking_settings(loss_fn, ranking_sigma(res["sigmas"], res["best_stage"]), proto["ranking_top"])
    ranked = {"scores": linear.astype(np.float32)}  # as scores.npy stores them, and validation grades them
    t0 = time.perf_counter()
    ranked["shortcut_hungarian"] = hungarian_scores(ranked["scores"], offsets, settings, dev)  # same ties
    seconds = time.perf_counter() - t0
    frames = {name: evaluate_split(s, labels, offsets, cfg["metrics"], query_ids=np.asarray(test.qids))
              for name, s in ranked.items()}
    qidx = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    same = np.ones(offsets.size - 1, dtype=bool)
    same[qidx[rank_within(ranked["scores"], offsets) != -ranked["shortcut_hungarian"]]] = False
    ranking = {"used": proto["test_ranking"], **settings, "seconds": seconds,
               "queries_reordered": int((~same).sum()),
               "test_means": {name: summarize(f, cfg["metrics"]["names"]) for name, f in frames.items()}}
    return ranked[proto["test_ranking"]], frames[proto["test_ranking"]], ranking


def _choice(fits: list[PenaltyFit], chosen: PenaltyFit, metric: str) -> dict[str, Any]:
    return {
        "penalties": [f.penalty for f in fits],
        "vali_by_penalty": [f.vali for f in fits],
        "best_stage_by_penalty": [f.stage for f in fits],
        "function_evaluations_by_penalty": [f.func_evals for f in fits],
        "penalty": chosen.penalty,
        "best_stage": chosen.stage,
        "best_vali": chosen.vali,
        "early_stopping_metric": metric,
    }

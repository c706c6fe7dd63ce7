"""GBDT baselines: LightGBM (``lambdarank``, ``rank_xendcg``) and XGBoost (``rank:pairwise``,
``rank:ndcg``) on exactly the prepared arrays and folds the neural trainer uses.

Python API: :func:`gbdt_run` ``(settings, prepared_dir, out_dir, *, method, seed,
device="auto", quiet=False, threads=None) -> Path``; CLI (:mod:`bench.training.cli`)::

    ltr-bench gbdt --prepared DIR --out RUN_DIR --method NAME --seed K --config CONFIG.yaml
                   [--device auto|cpu|cuda] [--quiet] [--threads N]

A GBDT method in the config::

    methods:
      lgbm_lambdarank: {gbdt: lightgbm, objective: lambdarank, params: {...},
                        num_trees: 500, early_stopping_rounds: 50,
                        early_stopping_metric: ndcg@10, metrics: ...}

``num_trees`` (500) caps the boosting rounds; ``early_stopping_rounds`` (50) stops after
that many rounds without improvement of ``early_stopping_metric`` on the validation split
(default: the shared ``train.early_stopping_metric``, else the schema's default of it; every
default here is the schema's, ``workflows/schemas/config.schema.yaml``) and the test split is
scored with the best round, or with every round boosted under the shared ``train.checkpoint:
last``. run.json's ``result`` records ``rounds_trained`` (the rounds actually boosted, one row
each in curve.csv), ``best_iteration`` (1-based, the round with the best validation value),
``checkpoint`` and ``tested_iteration`` (the rounds whose model scores the test split), for both
libraries. With the shared ``train.refit: true`` the run then boosts ``tested_iteration`` rounds
from scratch on train + validation (no validation, no early stopping; same parameters and seed)
and that model scores the test split (:mod:`bench.training.refit`; ``result.refit`` records it,
the training timing and the curve stay the first fit's). The validation metric is computed by
:func:`bench.metrics.evaluate` (a custom eval function; the libraries' own metrics are
disabled), so GBDT and neural runs stop on the same metric conventions. ``metrics``
defaults to the shared ``metrics`` section.

Default parameters follow LightGBM's published MSLR experiment (docs/Experiments.rst):
LightGBM ``learning_rate 0.1, num_leaves 255, min_data_in_leaf 0, min_sum_hessian_in_leaf
100``; XGBoost ``eta 0.1, max_depth 8, min_child_weight 100, tree_method hist``; plus
seeding (from ``derive_seed(dataset, fold, method, seed)``) and determinism switches
(LightGBM ``deterministic, force_row_wise``). ``params`` overrides any of them. Those
defaults, each library's objectives and the parameters ``params`` must not name are the
config schema's ``gbdt_lightgbm`` and ``gbdt_xgboost``, resolved by
:func:`bench.config.settings.resolve_gbdt`. run.json
records every library parameter, defaults included: LightGBM's ``booster.params`` and the
``parameters:`` block of the saved model; XGBoost's ``json.loads(booster.save_config())``.

Device (the policy of :mod:`bench.training.device`): with ``auto``/``cuda`` and a visible
GPU, XGBoost trains with ``device="cuda"`` and LightGBM tries its CUDA then OpenCL builds;
any failure falls back to CPU with a logged note (the device actually used is in run.json).
The curve has one row per boosting round (``train_loss`` and ``tau`` are NaN: the libraries
expose no ranking loss value). A library's own error (bad labels, bad parameters) becomes a
one-line :class:`~bench.errors.LibraryError` naming the method. Nothing here imports torch
(except to name a GPU).

Memory: the libraries read the prepared features where they are mapped (no private copy of
a split): LightGBM bins them into its datasets (``free_raw_data``) and predicts the test
split from the mapping; XGBoost (``tree_method hist``) builds ``QuantileDMatrix`` objects
(train; vali with the training cuts) and scores the test split with ``inplace_predict``
(:func:`_xgboost_matrices`: bit-identical to the ``DMatrix`` path, without its 8-byte-an-entry
copy of the training features). Progress (:mod:`bench.atomic.progress`): a line and the
record at the job's start and then at least every interval, whatever runs: from our eval
function once rounds are counted (round/total, seconds per round, elapsed, an ETA that is an
upper bound, early stopping may end sooner, the validation metric and the best round so
far), from the reporter's heartbeat while the fold loads, XGBoost builds its matrices, the
first round sets the library up, the test split is scored and the run written (each a phase
the line names); a refit's rounds are counted by a callback of ours, each line naming the refit.
The refit's training fold is a copy (:func:`bench.training.refit.full_training_split`): the
libraries bin one matrix.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.atomic.progress import Reporter
from bench.errors import LibraryError, TrainingDiverged
from bench.provenance import cpu_name, host_peak_rss_bytes
from bench.results import training_timing
from bench.seeds import derive_seed
from bench.training.common import RunFold, RunOutput, check_device, evaluate_split, load_fold, log, write_result
from bench.training.refit import full_training_split, refit_record, tested_model

SEEDING = "bench.seeds.derive_seed(dataset, fold, method, seed)"


# ----------------------------------------------------------------------------- devices


def _gpu_visible() -> bool:
    """A CUDA GPU is visible (via torch if it has CUDA, else ``nvidia-smi -L``)."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except ImportError:
        pass
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return False
    try:
        res = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0 and "GPU" in res.stdout


def _device_name(device: str) -> str:
    if device == "cpu":
        return cpu_name()
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cuda"
    except ImportError:
        return "cuda"


# ----------------------------------------------------------------------------- the libraries


@dataclass
class GbdtFit:
    """One library fit: config, the three splits' arrays, seed, device wish, the eval metric."""

    cfg: dict[str, Any]
    data: tuple  # (train, vali, test) x (features, labels, offsets, qids); features: the mapped arrays
    seed_value: int
    want_gpu: bool
    vali_metric: Callable[[np.ndarray], float]  # our early-stopping metric on the vali split
    higher: bool  # whether the metric improves upwards
    history: list[float] = field(default_factory=list)  # its value after every round
    progress: _RoundProgress | None = None
    fit_started: float = 0.0  # perf_counter when the last fit started
    metric_seconds: float = 0.0  # spent in score_round since then
    train_seconds: float = 0.0  # the last finished fit, score_round excluded
    checkpoint: str = "best"  # train.checkpoint: the rounds that score the test split (best or all)
    refit: bool = False  # train.refit: boost them again on train + validation, and test that model

    def start(self) -> None:
        """A fit (re)starts: no rounds yet (a failed GPU attempt's rounds and time do not count)."""
        self.history.clear()
        self.fit_started, self.metric_seconds = time.perf_counter(), 0.0
        if self.progress is not None:
            self.progress.restart()

    def phase(self, what: str | None) -> None:
        """What the fit does now, for the progress lines (None: counting rounds)."""
        if self.progress is not None:
            self.progress.reporter.phase = what

    def finished(self) -> None:
        """The library's fit returned: its training time is the fit's, our metric's excluded
        (the library's own update of the validation scores, one tree a round, stays in, and
        so does LightGBM's binning of the data on the first round)."""
        self.train_seconds = time.perf_counter() - self.fit_started - self.metric_seconds

    def score_round(self, preds: np.ndarray) -> float:
        """Our metric on this round's validation predictions; recorded, and reported when due."""
        t0 = time.perf_counter()
        value = self.vali_metric(preds)
        self.history.append(value)
        if self.progress is not None:
            self.progress.round(self.history)
        self.metric_seconds += time.perf_counter() - t0
        return value


class _RoundProgress:
    """Progress of the boosting rounds (:mod:`bench.atomic.progress`): a line and the record
    from the second round on at least every interval, from our eval function (both
    libraries call it once per round; the reporter's heartbeat fills any longer gap). The
    first round only starts the clock: its time holds
    the library's set-up (LightGBM bins the datasets inside ``lgb.train``: 40 s on the
    MSLR-sized fold, against ~2 s a round). Seconds per round are recent (the rounds since
    the previous line); the ETA, remaining rounds x seconds per round, is an upper bound:
    early stopping may end the fit sooner. Best round: the first with the best value, as
    the libraries' early stopping keeps it."""

    def __init__(self, reporter: Reporter, cfg: dict[str, Any], higher: bool, started: float) -> None:
        self.reporter, self.total, self.metric = reporter, cfg["num_trees"], cfg["early_stopping_metric"]
        self.higher, self.started = higher, started  # started: the run's perf_counter start
        self.restart()

    def restart(self) -> None:
        self.t_last, self.n_last, self.unit_s = time.perf_counter(), 0, None
        self.best, self.best_at = None, 0
        self.reporter.phase = "round 1 (with the library's set-up)"

    def round(self, history: list[float]) -> None:
        done, value = len(history), history[-1]
        if self.best is None or (value > self.best if self.higher else value < self.best):
            self.best, self.best_at = value, done
        if done == 1:  # its time is the library's set-up (LightGBM bins the data here), not a round's
            self.t_last, self.n_last = time.perf_counter(), 1
            self.reporter.phase = f"round 1/{self.total} done (with the library's set-up); timing the next rounds"
            return
        if not self.reporter.due():
            return
        self.reporter.phase = None  # a counted line
        now = time.perf_counter()
        self.unit_s = (now - self.t_last) / max(done - self.n_last, 1)
        self.t_last, self.n_last = now, done
        vali = {"metric": self.metric, "value": float(value), "best": float(self.best), "best_at": int(self.best_at)}
        self.reporter.emit(unit_s=self.unit_s, done=done, total=self.total, epoch=None, epochs=None,
                           elapsed_s=now - self.started, eta_s=(self.total - done) * self.unit_s,
                           eta_is_upper_bound=True, docs_per_s=None, vali=vali)

    def refit(self, rounds: int, queries: int) -> None:
        """A refit of ``rounds`` rounds on ``queries`` queries starts: its lines name it, count
        its rounds, and have an exact ETA (no early stopping)."""
        self.total, self.t_last, self.n_last, self.unit_s = rounds, time.perf_counter(), 0, None
        self.reporter.phase = f"refit on train + validation ({queries} queries, {rounds} rounds, no validation)"

    def refit_round(self, done: int) -> None:
        """After the refit's round ``done`` (1-based): a line when due (the first round only
        starts the clock: it holds the library's set-up)."""
        now = time.perf_counter()
        if done == 1:
            self.t_last, self.n_last = now, 1
            return
        if not self.reporter.due():
            return
        self.unit_s = (now - self.t_last) / max(done - self.n_last, 1)
        self.t_last, self.n_last = now, done
        self.reporter.emit(unit_s=self.unit_s, done=done, total=self.total, epoch=None, epochs=None,
                           elapsed_s=now - self.started, eta_s=(self.total - done) * self.unit_s,
                           eta_is_upper_bound=False, docs_per_s=None, vali=None)


def _split_arrays(split) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A split's arrays for the libraries: the features *not* copied (the read-only mapping of
    the prepared file; both libraries read it in place: they bin it into their own compact
    format, and predict from it), the small arrays (labels, offsets, qids) as private copies."""
    return (
        np.asarray(split.features, dtype=np.float32),
        np.array(split.labels, dtype=np.float32, copy=True),
        np.array(split.offsets, dtype=np.int64, copy=True),
        np.array(split.qids, dtype=np.int64, copy=True),
    )


def _lgb_model_parameters(model_text: str) -> dict[str, str]:
    """The ``parameters:`` block of a saved LightGBM model: every parameter incl. defaults."""
    start = model_text.find("\nparameters:\n")
    end = model_text.find("\nend of parameters", start)
    if start < 0 or end < 0:
        return {}
    out = {}
    for line in model_text[start:end].splitlines():
        m = re.match(r"^\[([^:\]]+): ?(.*)\]$", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _lgb_params(g: GbdtFit) -> dict[str, Any]:
    """LightGBM's parameters of a fit (its device aside): objective, no library metric, seed, ``params``."""
    return {"objective": g.cfg["objective"], "metric": "None", "seed": g.seed_value, **g.cfg["params"]}


def _train_lightgbm(g: GbdtFit) -> tuple[np.ndarray | None, dict[str, Any]]:
    """The fit with early stopping; the test scores of the tested rounds (None when a refit will
    score the test split instead) and the library's record."""
    import lightgbm as lgb

    cfg = g.cfg
    (xt, yt, ot, _), (xv, yv, ov, _), (xs, _, _, _) = g.data
    params = _lgb_params(g)

    def feval(preds, _dataset):
        return cfg["early_stopping_metric"], g.score_round(preds), g.higher

    def fit(device_type: str):
        g.start()
        # built from the mapped arrays (no copy); the binned datasets drop their reference
        dtrain = lgb.Dataset(xt, label=yt, group=np.diff(ot), free_raw_data=True)
        dvali = lgb.Dataset(xv, label=yv, group=np.diff(ov), reference=dtrain, free_raw_data=True)
        booster = lgb.train(
            {**params, "device_type": device_type},
            dtrain,
            num_boost_round=cfg["num_trees"],
            valid_sets=[dvali],
            valid_names=["vali"],
            feval=feval,
            callbacks=[lgb.early_stopping(cfg["early_stopping_rounds"], first_metric_only=True, verbose=False)],
            keep_training_booster=g.checkpoint == "last",  # else the booster is cut at its best round
        )
        g.finished()
        return booster

    device, booster = _lightgbm_on_gpu(g, fit, lgb.basic.LightGBMError)
    if booster is None:
        device = cfg["params"].get("device_type", "cpu")
        booster = fit(device)
    best = booster.best_iteration if booster.best_iteration > 0 else booster.current_iteration()
    # lgb.train returns the booster cut at its best iteration (it reloads the model saved with
    # num_iteration=best) unless it keeps the training booster; our metric ran once per boosted
    # round, so the history's length is the number of rounds actually trained.
    tested = int(best) if g.checkpoint == "best" else len(g.history)
    scores = None if g.refit else booster.predict(xs, num_iteration=tested)
    record = {
        "device": device,
        "best_iteration": int(best),
        "rounds_trained": len(g.history),
        "tested_iteration": tested,
        "booster_params": booster.params,
        "model_parameters": _lgb_model_parameters(booster.model_to_string(num_iteration=best)),
    }
    return scores, record


def _lightgbm_on_gpu(g: GbdtFit, fit: Callable, error: type) -> tuple[str, Any]:
    """LightGBM's CUDA, then OpenCL build when a GPU is wanted; ``("cpu", None)`` otherwise."""
    if not g.want_gpu or "device_type" in g.cfg["params"]:
        return "cpu", None
    for candidate in ("cuda", "gpu"):
        try:
            return candidate, fit(candidate)
        except error as exc:
            log(f"LightGBM device_type={candidate} unavailable ({str(exc).splitlines()[0]}); trying the next")
    log("LightGBM: no GPU build usable; training on CPU")
    return "cpu", None


def _xgb_params(g: GbdtFit) -> dict[str, Any]:
    """XGBoost's parameters of a fit (its device aside): objective, no library metric, seed, ``params``."""
    return {"objective": g.cfg["objective"], "disable_default_eval_metric": 1, "seed": g.seed_value, **g.cfg["params"]}


def _train_xgboost(g: GbdtFit) -> tuple[np.ndarray | None, dict[str, Any]]:
    """As :func:`_train_lightgbm`, with XGBoost."""
    import xgboost as xgb

    cfg = g.cfg
    xs = g.data[2][0]

    def metric(predt, _dmatrix):
        return cfg["early_stopping_metric"], g.score_round(predt)

    g.phase("building XGBoost's matrices (quantile sketch of the training features)")
    matrices = list(_xgboost_matrices(g, xgb))  # (train, vali); cleared before the test split is scored
    params = _xgb_params(g)

    def fit(device: str):
        g.start()
        booster = xgb.train(
            {**params, "device": device},
            matrices[0],
            num_boost_round=cfg["num_trees"],
            evals=[(matrices[1], "vali")],
            custom_metric=metric,
            maximize=g.higher,
            early_stopping_rounds=cfg["early_stopping_rounds"],
            verbose_eval=False,
        )
        g.finished()
        return booster

    device = cfg["params"].get("device", "cpu")
    booster = None
    if g.want_gpu and "device" not in cfg["params"]:
        if not xgb.build_info().get("USE_CUDA", False):
            log("XGBoost was built without CUDA (xgboost-cpu, what `pip install -e .` brings; docs/install.md, "
                "\"XGBoost on a GPU\", swaps in the CUDA build); training on CPU")
        else:
            try:
                booster = fit("cuda")
                device = "cuda"
            except xgb.core.XGBoostError as exc:
                log(f"XGBoost device=cuda failed ({str(exc).splitlines()[0]}); training on CPU")
    if booster is None:
        booster = fit(device)
    matrices.clear()
    best = int(getattr(booster, "best_iteration", booster.num_boosted_rounds() - 1))
    tested = best + 1 if g.checkpoint == "best" else int(booster.num_boosted_rounds())
    # from the mapped array, no DMatrix
    scores = None if g.refit else booster.inplace_predict(xs, iteration_range=(0, tested))
    record = {
        "device": device,
        "best_iteration": best + 1,
        "rounds_trained": int(booster.num_boosted_rounds()),
        "tested_iteration": tested,
        "booster_params": params,
        "model_parameters": json.loads(booster.save_config()),
    }
    return scores, record


def _xgboost_matrices(g: GbdtFit, xgb) -> tuple[Any, Any]:
    """Training and validation matrices, built from the mapped features without a copy.

    With ``tree_method`` ``hist`` (the default) these are ``QuantileDMatrix`` objects: the
    training one holds only the quantised features (1 byte an entry) where a ``DMatrix``
    keeps a CSR copy (8 bytes an entry) beside them; the validation one reuses the training
    cuts (``ref=``). Against the ``DMatrix`` construction (same ``max_bin``, same sketch) the
    models, every round's validation predictions and the test scores were bit-identical: on
    the MSLR-sized fold (rank:pairwise, scores, per-query metrics and every round's validation
    metric), on sub-samples of it (2,000 and 6,000 queries, pairwise and ndcg, 1 and 2
    threads: the saved models too), and in ``tests/training/test_gbdt.py``. Another
    ``tree_method`` gets ``DMatrix`` objects. (A CUDA booster scoring the host array falls
    back to a ``DMatrix`` inside XGBoost: the GPU path pays that copy, the CPU one does not.)
    """
    (xt, yt, ot, _), (xv, yv, ov, _), _ = g.data
    dtrain = _xgboost_matrix(xgb, g.cfg["params"], (xt, yt, ot))
    return dtrain, _xgboost_matrix(xgb, g.cfg["params"], (xv, yv, ov), ref=dtrain)


def _xgboost_matrix(xgb, params: dict[str, Any], data: tuple, ref: Any = None) -> Any:
    """One split's matrix (``data``: features, labels, offsets) as :func:`_xgboost_matrices` builds
    it; ``ref``: the training matrix whose cuts a ``QuantileDMatrix`` reuses."""
    x, y, offsets = data
    if _quantile_matrices(params):
        max_bin = params.get("max_bin", 256)  # must match the training parameter
        if ref is None:
            return xgb.QuantileDMatrix(x, label=y, group=np.diff(offsets), max_bin=max_bin)
        return xgb.QuantileDMatrix(x, label=y, group=np.diff(offsets), ref=ref, max_bin=max_bin)
    return xgb.DMatrix(x, label=y, group=np.diff(offsets))


def _quantile_matrices(params: dict[str, Any]) -> bool:
    """Whether :func:`_xgboost_matrices` builds ``QuantileDMatrix`` objects (``hist`` only)."""
    return params.get("tree_method", "hist") == "hist"


# ----------------------------------------------------------------------------- the refit


def _refit_lightgbm(g: GbdtFit, data: tuple, rounds: int, device: str) -> np.ndarray:
    """``rounds`` rounds on ``data`` (features, labels, offsets), no validation; the test scores."""
    import lightgbm as lgb

    x, y, offsets = data
    dfull = lgb.Dataset(x, label=y, group=np.diff(offsets), free_raw_data=True)
    progress = g.progress

    def count(env) -> None:
        if progress is not None:
            progress.refit_round(env.iteration + 1)

    booster = lgb.train({**_lgb_params(g), "device_type": device}, dfull, num_boost_round=rounds, callbacks=[count])
    return booster.predict(g.data[2][0], num_iteration=rounds)


def _refit_xgboost(g: GbdtFit, data: tuple, rounds: int, device: str) -> np.ndarray:
    """As :func:`_refit_lightgbm`, with XGBoost (the matrix as :func:`_xgboost_matrices` builds it)."""
    import xgboost as xgb

    progress = g.progress

    class Count(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log) -> bool:
            if progress is not None:
                progress.refit_round(epoch + 1)
            return False  # never stops the boosting

    g.phase("refit: building XGBoost's matrix of train + validation")
    dfull = _xgboost_matrix(xgb, g.cfg["params"], data)
    booster = xgb.train({**_xgb_params(g), "device": device}, dfull, num_boost_round=rounds, callbacks=[Count()],
                        verbose_eval=False)
    del dfull
    return booster.inplace_predict(g.data[2][0], iteration_range=(0, rounds))


def _refit_library(g: GbdtFit, run: RunFold, record: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """Boost the tested rounds again, from scratch, on train + validation, on the first fit's
    device (:mod:`bench.training.refit`); the refit model's test scores and ``result.refit``."""
    t0 = time.perf_counter()
    rounds = int(record["tested_iteration"])
    g.phase("refit: copying train + validation into one training split")
    full = full_training_split(run.prepared)
    x, y, offsets, _ = _split_arrays(full)
    if g.progress is not None:
        g.progress.refit(rounds, full.n_queries)
    refit = _refit_lightgbm if g.cfg["gbdt"] == "lightgbm" else _refit_xgboost
    with _library_errors(g, run):
        t_lib = time.perf_counter()
        scores = refit(g, (x, y, offsets), rounds, record["device"])
        train_seconds = time.perf_counter() - t_lib
    return scores, refit_record(full, {"unit": "rounds", "rounds": rounds}, train_seconds=train_seconds,
                                train_docs=full.n_docs * rounds, epochs=rounds, seconds=time.perf_counter() - t0)


# ----------------------------------------------------------------------------- the run


def gbdt_run(
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
    """Train one GBDT method on a prepared fold with ``seed``; write the run directory.

    ``settings``: the method's resolved settings (:func:`bench.config.settings.resolve_gbdt`).

    ``threads`` sets LightGBM's ``num_threads`` / XGBoost's ``nthread`` unless ``params``
    already does (None: the library default, all cores).
    """
    started = time.perf_counter()
    check_device(device)
    cfg = {**settings, "params": dict(settings["params"])}  # the thread count below is this run's
    thread_key = "num_threads" if cfg["gbdt"] == "lightgbm" else "nthread"
    if threads and thread_key not in cfg["params"]:
        cfg["params"][thread_key] = int(threads)
    reporter = Reporter(out_dir, kind="gbdt", unit="round", label=f"{method}/{seed}", total=cfg["num_trees"],
                        phase="loading the fold")
    with reporter:  # a line at least every interval from here on, whatever the libraries do
        run = load_fold(prepared_dir, method=method, seed=seed)
        reporter.label = "/".join(str(v) for v in run.identity.values())
        want_gpu = device != "cpu" and _gpu_visible()
        if device == "cuda" and not want_gpu:
            log("CUDA requested but no GPU is visible; training on CPU")
        g = _gbdt_fit(cfg, run, want_gpu)
        g.progress = _RoundProgress(reporter, cfg, g.higher, started)
        t_fit = time.perf_counter()
        raw, record = _fit_library(g, run)
        fit_seconds = time.perf_counter() - t_fit
        raw, refit = _refit_library(g, run, record) if g.refit else (raw, None)  # a refit's model scores the test
        reporter.phase = "scoring the test split"
        scores = np.asarray(raw, dtype=np.float32)  # evaluate exactly what scores.npy stores
        if not np.isfinite(scores).all():
            raise TrainingDiverged(f"methods.{method}: the model produced non-finite test scores")
        _, ys, os_, qs = g.data[2]
        frame = evaluate_split(scores, ys, os_, cfg["metrics"], query_ids=qs)
        stop = cfg["early_stopping_metric"]
        protocol = run.protocol("gbdt", SEEDING, early_stopping_metric=stop, metrics=cfg["metrics"],
                                checkpoint=g.checkpoint, refit=g.refit)
        result = _result(g, record, frame, fit_seconds=fit_seconds, refit=refit)
        if not quiet:
            _log_fit(cfg, record, result, fit_seconds, refit)
        reporter.phase = "writing the run directory"
        output = RunOutput(scores, frame, _curve(cfg, g.history), _facts(g, record, result, started))
        out = write_result(out_dir, run, output, kind="gbdt", config=cfg, device_requested=device, protocol=protocol,
                           run_config_sha256=run_config_sha256)
    reporter.clear()  # the run directory is written (and the heartbeat stopped): the record has served
    return out


def _log_fit(cfg: dict[str, Any], record: dict[str, Any], result: dict[str, Any], fit_seconds: float,
             refit: dict[str, Any] | None) -> None:
    """One line: rounds trained, the best round, its validation value, the time (and the refit's)."""
    log(
        f"{cfg['gbdt']} {cfg['objective']}: {record['rounds_trained']} rounds, best {record['best_iteration']}, "
        f"vali {cfg['early_stopping_metric']} {result['best_vali']}, {fit_seconds:.1f}s on {record['device']}"
        + ("" if refit is None else f"; refit {refit['rounds']} rounds on train + validation, {refit['seconds']:.1f}s")
    )


def _facts(g: GbdtFit, record: dict[str, Any], result: dict[str, Any], started: float) -> dict[str, Any]:
    """run.json's facts of a finished fit (``started``: the run's perf_counter start)."""
    rounds = record["rounds_trained"]
    return {
        "device": record["device"],
        "device_name": _device_name(record["device"]),
        "wall_time_s": time.perf_counter() - started,
        # an epoch is a boosting round, as in curve.csv; each round goes through every training document
        **training_timing(g.train_seconds, g.data[0][1].shape[0] * rounds, rounds),
        "peak_memory": {"host_max_rss_bytes": host_peak_rss_bytes(), "cuda_max_allocated_bytes": None},
        "library_seed": g.seed_value,
        "library_parameters": {"booster_params": record["booster_params"], "model": record["model_parameters"]},
        "result": result,
    }


def _gbdt_fit(cfg: dict[str, Any], run: RunFold, want_gpu: bool) -> GbdtFit:
    """The splits' arrays, the library seed and our validation metric for one fit."""
    from bench.metrics import higher_is_better, summarize

    data = tuple(_split_arrays(run.prepared.splits[s]) for s in ("train", "vali", "test"))
    seed_value = derive_seed(run.dataset, run.fold, run.method, int(run.seed)) % (2**31 - 1)
    stop = cfg["early_stopping_metric"]
    _, yv, ov, _ = data[1]

    def vali_metric(preds: np.ndarray) -> float:
        frame = evaluate_split(np.asarray(preds, dtype=np.float32), yv, ov, cfg["metrics"], names=[stop])
        return summarize(frame, [stop])[stop]

    checkpoint, refit = tested_model(cfg)
    return GbdtFit(cfg, data, seed_value, want_gpu, vali_metric, higher_is_better(stop), checkpoint=checkpoint,
                   refit=refit)


def _fit_library(g: GbdtFit, run: RunFold) -> tuple[np.ndarray | None, dict[str, Any]]:
    """Train with the method's library; its own errors become a one-line :class:`LibraryError`."""
    trainer = _train_lightgbm if g.cfg["gbdt"] == "lightgbm" else _train_xgboost
    with _library_errors(g, run):
        return trainer(g)


@contextmanager
def _library_errors(g: GbdtFit, run: RunFold) -> Iterator[None]:
    """A library's own error (bad labels, bad params) as a one-line :class:`LibraryError` naming the method."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ not in ("LightGBMError", "XGBoostError"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LibraryError(f"methods.{run.method}: {g.cfg['gbdt']} failed on {run.prepared_dir}: {first}") from exc


def _result(g: GbdtFit, record: dict[str, Any], frame: pd.DataFrame, *, fit_seconds: float,
            refit: dict[str, Any] | None = None) -> dict[str, Any]:
    from bench.metrics import summarize

    history = g.history
    return {
        "best_iteration": record["best_iteration"],
        "rounds_trained": record["rounds_trained"],
        "best_vali": history[record["best_iteration"] - 1] if history else None,
        "early_stopping_metric": g.cfg["early_stopping_metric"],
        "checkpoint": g.checkpoint,
        "tested_iteration": record["tested_iteration"],
        "refit": refit,  # null, or bench.training.refit.refit_record of the model that scored the test split
        "fit_seconds": fit_seconds,
        "test_means": summarize(frame, g.cfg["metrics"]["names"]),
        "n_test_queries": int(g.data[2][2].size - 1),
    }


def _curve(cfg: dict[str, Any], history: list[float]) -> pd.DataFrame:
    """One row per boosting round: the validation metric (loss and tau: NaN)."""
    return pd.DataFrame(
        {
            "epoch": np.arange(1, len(history) + 1),
            "step": np.arange(1, len(history) + 1),
            "lr": float(cfg["params"].get("learning_rate", cfg["params"].get("eta", math.nan))),
            "tau": math.nan,
            "train_loss": math.nan,
            "seconds": math.nan,
            f"vali_{cfg['early_stopping_metric']}": history,
        }
    )

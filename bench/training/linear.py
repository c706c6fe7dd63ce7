r"""Least-squares linear regression with a ridge penalty picked on validation (LETOR's "Regression").

A ``linear`` method in the config::

    methods:
      linear_regression: {linear: least_squares, penalties: [0, 0.01, ..., 1.0e+5],
                          early_stopping_metric: ndcg@10}

Python API: :func:`linear_run` ``(config, prepared_dir, out_dir, *, method, seed,
device="auto", quiet=False, threads=None) -> Path``; CLI (:mod:`bench.training.cli`)::

    ltr-bench linear --prepared DIR --out RUN_DIR --method NAME --seed K --config CONFIG.yaml

**The fit.** For every penalty :math:`\lambda` of the grid, with the training documents'
features :math:`X` (``n x d``) and labels :math:`y`, the intercept is not penalised:

.. math::

    (w_\lambda, b_\lambda) = \arg\min_{w, b}\; \lVert y - X w - b \mathbf 1 \rVert^2 + \lambda \lVert w \rVert^2 ,

the objective of scikit-learn's ``Ridge(alpha=lambda, fit_intercept=True)`` (so
:math:`\lambda` is in its units: a sum over documents, not a mean). With the training means
:math:`\bar x, \bar y` and the centred :math:`X_c = X - \mathbf 1 \bar x^\top`,
:math:`y_c = y - \bar y`: :math:`w_\lambda = (X_c^\top X_c + \lambda I)^{-1} X_c^\top y_c`,
:math:`b_\lambda = \bar y - \bar x^\top w_\lambda`. Computed once for the whole grid, in
float64, without forming :math:`X_c^\top X_c`: one QR of :math:`[X_c \mid y_c]` gives
:math:`R_{11}` (with :math:`X_c = Q R_{11}`) and :math:`r = Q^\top y_c`; the SVD
:math:`R_{11} = U \operatorname{diag}(s) V^\top` then gives every penalty's solution as
:math:`w_\lambda = V \operatorname{diag}\big(s / (s^2 + \lambda)\big) U^\top r`.
At :math:`\lambda = 0` this is the pseudo-inverse solution, with singular values at or below
``eps * max(n, d) * s_max`` treated as zero (NumPy ``lstsq``'s default cut): a feature that is
constant on the training documents (LETOR has such columns) gets weight 0, and the fit equals
``numpy.linalg.lstsq`` on ``[X, 1]`` whenever that problem has full rank.

**The choice.** Each penalty's validation scores :math:`X_v w_\lambda + b_\lambda` (cast to
float32, as ``scores.npy`` stores test scores) are graded by
``early_stopping_metric`` (default: the shared ``train.early_stopping_metric``, else the
schema's default of it) under the dataset's evaluation convention (``metrics.convention``); the
penalty with the best mean wins, the first in grid order on a tie (a NaN mean counts as the
worst). ``penalties`` defaults to the schema's grid (``method.penalties``: 0, then 1e-2 .. 1e5
in decades, in scikit-learn Ridge's units). The seed does not enter (the fit
is deterministic); it is recorded like every run's. ``run.json`` records the grid, every
penalty's validation mean and training mean squared error, the chosen penalty, its weights
and intercept; ``curve.csv`` has one row per penalty (``epoch`` = its 1-based index in the
grid, ``train_loss`` = training mean squared error, ``penalty``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.atomic.progress import Reporter
from bench.errors import TrainingDiverged
from bench.provenance import cpu_name, host_peak_rss_bytes
from bench.results import training_timing
from bench.training.common import RunOutput, check_device, evaluate_split, load_fold, log, write_result

SEEDING = "none: the least-squares fit is deterministic"


# ----------------------------------------------------------------------------- the solver


@dataclass(frozen=True)
class RidgePath:
    """Everything the ridge solutions of any penalty need (see the module docstring)."""

    x_mean: np.ndarray  # [d]
    y_mean: float
    v: np.ndarray  # [d, d]: right singular vectors of R11 (columns)
    s: np.ndarray  # [d]: singular values of R11 = of X_c, descending
    z: np.ndarray  # [d]: U^T Q^T y_c
    cutoff: float  # singular values <= cutoff are zero at penalty 0

    def coefficients(self, penalty: float) -> tuple[np.ndarray, float]:
        """``(w, b)`` of ``penalty`` (float64).

        >>> x = np.array([[0.0], [1.0], [2.0]]); path = ridge_path(x, np.array([1.0, 3.0, 5.0]))
        >>> w, b = path.coefficients(0.0); round(float(w[0]), 12), round(b, 12)
        (2.0, 1.0)
        >>> w, b = path.coefficients(2.0); round(float(w[0]), 12)  # sum x_c^2 = 2: w = 4 / (2 + 2)
        1.0
        """
        s = self.s
        if penalty > 0:
            factor = s / (s * s + penalty)
        else:
            keep = s > self.cutoff
            factor = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
        w = self.v @ (factor * self.z)
        return w, float(self.y_mean - self.x_mean @ w)


def ridge_path(features: np.ndarray, labels: np.ndarray) -> RidgePath:
    """Centre, QR-factorise ``[X_c | y_c]`` and take the SVD of ``R11``, in float64."""
    x, y = np.asarray(features), np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or y.shape != (x.shape[0],) or x.shape[0] == 0:
        raise ValueError(f"need features [n, d] and labels [n] with n >= 1, got {x.shape} and {y.shape}")
    x_mean, y_mean = x.mean(axis=0, dtype=np.float64), float(y.mean())
    n, d = x.shape
    a = np.empty((n, d + 1), dtype=np.float64)  # the one float64 copy of the features
    np.subtract(x, x_mean, out=a[:, :-1])
    np.subtract(y, y_mean, out=a[:, -1])
    r = np.zeros((d + 1, d + 1))
    r_top = np.linalg.qr(a, mode="r")  # [min(n, d + 1), d + 1]; the missing rows are zero
    r[: r_top.shape[0]] = r_top
    r11, rhs = r[:d, :d], r[:d, d]
    u, s, vt = np.linalg.svd(r11)
    cutoff = float(np.finfo(np.float64).eps * max(n, d) * (s[0] if s.size else 0.0))
    return RidgePath(x_mean, y_mean, vt.T, s, u.T @ rhs, cutoff)


def predict(features: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    """``X w + b`` in float64."""
    return np.asarray(features, dtype=np.float64) @ w + b


# ----------------------------------------------------------------------------- the choice


@dataclass
class Selection:
    """The penalty grid's validation scores and the chosen fit."""

    penalties: list[float]
    vali: list[float]  # mean validation metric per penalty
    train_mse: list[float]  # training mean squared error per penalty
    seconds: list[float]  # per penalty: its solve, training MSE and grading
    solve_seconds: float  # the solves alone, all penalties
    index: int  # of the chosen penalty
    weights: np.ndarray
    intercept: float

    @property
    def penalty(self) -> float:
        return self.penalties[self.index]


def vali_metric(split, metric: str, metrics: dict[str, Any]):
    """``scores -> mean of metric`` on a split (scores cast to float32, as runs store them)."""
    from bench.metrics import summarize

    labels, offsets = np.asarray(split.labels), np.asarray(split.offsets)

    def mean(scores: np.ndarray) -> float:
        frame = evaluate_split(np.asarray(scores, dtype=np.float32), labels, offsets, metrics, names=[metric])
        return float(summarize(frame, [metric])[metric])

    return mean


def best_index(values: list[float], higher: bool) -> int:
    """Index of the best value, the first on a tie; NaN counts as the worst.

    >>> best_index([0.5, 0.7, 0.7, float("nan")], True), best_index([3.0, 1.0, 1.0], False)
    (1, 1)
    """
    keyed = np.array([v if math.isfinite(v) else -math.inf for v in (values if higher else [-x for x in values])])
    return int(np.argmax(keyed))


def select_penalty(path: RidgePath, penalties: list[float], splits: tuple, metric: str,
                   metrics: dict[str, Any]) -> Selection:
    """Fit every penalty of the grid, grade it on validation, keep the best (:func:`best_index`)."""
    from bench.metrics import higher_is_better

    train, vali = splits
    grade = vali_metric(vali, metric, metrics)
    y = np.asarray(train.labels, dtype=np.float64)
    fits, scores, mses, seconds, solving = [], [], [], [], 0.0
    for penalty in penalties:
        t0 = time.perf_counter()
        w, b = path.coefficients(penalty)
        solving += time.perf_counter() - t0
        fits.append((w, b))
        mses.append(float(np.mean((predict(train.features, w, b) - y) ** 2)))
        scores.append(grade(predict(vali.features, w, b)))
        seconds.append(time.perf_counter() - t0)
    index = best_index(scores, higher_is_better(metric))
    return Selection(list(penalties), scores, mses, seconds, solving, index, *fits[index])


# ----------------------------------------------------------------------------- the run


def linear_run(
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
    """Fit the method's ridge grid on a prepared fold, pick on validation, score test; write the run.

    ``settings``: the method's resolved settings (:func:`bench.config.settings.resolve_linear`).

    ``device`` is checked and recorded; the solve runs in NumPy on the CPU whatever it asks
    for. ``threads`` is recorded only (the BLAS of the process decides).
    """
    started = time.perf_counter()
    check_device(device)
    cfg = settings
    reporter = Reporter(out_dir, kind="linear", unit="penalty", label=f"{method}/{seed}", total=len(cfg["penalties"]),
                        phase="loading the fold")
    with reporter:  # a line at least every interval: the phases below, each one BLAS call or a few
        run = load_fold(prepared_dir, method=method, seed=seed)
        reporter.label = "/".join(str(v) for v in run.identity.values())
        train, vali, test = (run.prepared.splits[s] for s in ("train", "vali", "test"))
        reporter.phase = "the Gram pass over the training documents"
        t_path = time.perf_counter()
        path = ridge_path(train.features, train.labels)
        path_seconds = time.perf_counter() - t_path
        reporter.phase = f"solving and validating {len(cfg['penalties'])} penalties"
        sel = select_penalty(path, cfg["penalties"], (train, vali), cfg["early_stopping_metric"], cfg["metrics"])
        reporter.phase = "scoring the test split"
        scores = predict(test.features, sel.weights, sel.intercept).astype(np.float32)
        if not np.isfinite(scores).all():
            raise TrainingDiverged(f"methods.{method}: the least-squares fit produced non-finite test scores")
        frame = evaluate_split(scores, np.asarray(test.labels), np.asarray(test.offsets), cfg["metrics"],
                               query_ids=np.asarray(test.qids))
        if not quiet:
            log(f"least squares: penalty {sel.penalty:g} of {len(sel.penalties)}, vali "
                f"{cfg['early_stopping_metric']} {sel.vali[sel.index]:.5f}")
        protocol = run.protocol("linear", SEEDING, linear=cfg["linear"], penalties=cfg["penalties"],
                                early_stopping_metric=cfg["early_stopping_metric"], metrics=cfg["metrics"])
        facts = {
            "device": "cpu",
            "device_name": cpu_name(),
            "wall_time_s": time.perf_counter() - started,
            "peak_memory": {"host_max_rss_bytes": host_peak_rss_bytes(), "cuda_max_allocated_bytes": None},
            "threads_requested": threads,
            # the Gram pass over the training documents and the grid's solves; no epochs
            **training_timing(path_seconds + sel.solve_seconds, int(np.asarray(train.labels).shape[0]), None),
            "result": _result(cfg, sel, frame, path),
        }
        reporter.phase = "writing the run directory"
        out = write_result(out_dir, run, RunOutput(scores, frame, _curve(cfg, sel), facts), kind="linear", config=cfg,
                           device_requested=device, protocol=protocol, run_config_sha256=run_config_sha256)
    reporter.clear()  # the run directory is written (and the heartbeat stopped): the record has served
    return out


def _result(cfg: dict[str, Any], sel: Selection, frame: pd.DataFrame, path: RidgePath) -> dict[str, Any]:
    from bench.metrics import summarize

    return {
        "penalty": sel.penalty,
        "penalty_index": sel.index,
        "penalties": sel.penalties,
        "vali_by_penalty": sel.vali,
        "train_mse_by_penalty": sel.train_mse,
        "best_vali": sel.vali[sel.index],
        "early_stopping_metric": cfg["early_stopping_metric"],
        "weights": sel.weights.tolist(),
        "intercept": sel.intercept,
        "rank": int((path.s > path.cutoff).sum()),
        "n_features": int(path.s.size),
        "test_means": summarize(frame, cfg["metrics"]["names"]),
        "n_test_queries": int(frame.shape[0]),
    }


def _curve(cfg: dict[str, Any], sel: Selection) -> pd.DataFrame:
    """One row per penalty of the grid, in grid order."""
    n = len(sel.penalties)
    return pd.DataFrame({
        "epoch": np.arange(1, n + 1),
        "step": np.arange(1, n + 1),
        "lr": math.nan,
        "tau": math.nan,
        "train_loss": sel.train_mse,
        "seconds": sel.seconds,
        f"vali_{cfg['early_stopping_metric']}": sel.vali,
        "penalty": sel.penalties,
    })

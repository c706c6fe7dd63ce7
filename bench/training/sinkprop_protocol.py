r"""SinkProp's own training protocol (Adams & Zemel 2011, Sec. 5), for the methods a protocol names.

Configured under a protocol (``protocols.<name>.sinkprop_protocol``, schema in
``workflows/schemas/config.schema.yaml``); :func:`bench.config.plan.run_config` copies it
(without ``methods``) into the run config of every method it lists, and ``ltr-bench train``
(the run kind ``sinkprop_protocol`` of :mod:`bench.config.kinds`) then trains that method here
instead of with the generic loop. Keys and defaults (types, bounds and defaults: the schema's
``$defs/sinkprop_protocol``, resolved by :func:`bench.config.settings.resolve_sinkprop_section`; the paper gives the first
three and ``test_ranking``, the rest are this suite's choices where the paper gives no number):

- ``derived_queries`` (20), ``max_derived_size`` (200): every training query is resampled
  once per run into ``derived_queries`` derived queries of
  :math:`\min(\mathrm{Poisson}(n_q), \text{max\_derived\_size})` documents drawn with
  replacement (:func:`bench.data.resample.resample_queries`; a size-0 draw yields no derived
  query), from ``derive_seed(dataset, fold, method, seed, "resample")``. Derived queries
  that cannot contribute to the loss (fewer than 2 documents or no positive label) are dropped.
- ``init_penalties`` ([0.0]): the ridge grid of the initialiser, the least-squares fit of
  :mod:`bench.training.linear` (the same solver as the ``linear_regression`` method), chosen
  on validation; ``[0.0]`` is the paper's "MLE regression weights under squared loss".
- ``penalties`` ([0.001, 0.01, 0.1, 1.0]): the grid of :math:`\lambda` in the objective
  below; each penalty is trained from the initialiser and the one whose best validation
  score is highest wins (the first in grid order on a tie).
- ``sigma_start`` (1.0), ``sigma_factor`` (2.0), ``stages`` (8): SmoothRank's annealing
  (Chapelle & Wu 2010: start with a large sigma, divide it by a constant factor, warm-start
  each stage; the factor 2 is our reading of it, the suite stores no copy of that paper):
  stage :math:`t = 0, 1, \dots` minimises the objective with
  :math:`\sigma_t = \text{sigma\_start}\cdot v / \text{sigma\_factor}^t`, warm-started from
  stage :math:`t-1`'s solution. :math:`\sigma` is in squared score units (the smoothed
  indicator is :math:`\exp(-(s_i - s_{\pi(j)})^2/\sigma)`), so the schedule is scaled by
  :math:`v`, the mean within-query variance of the initialiser's training scores
  (:func:`score_variance`; 1 if that is 0), which makes ``sigma_start`` scale-free.
- ``lbfgs_iterations`` (20), ``lbfgs_history`` (10): one ``torch.optim.LBFGS`` per stage
  (fresh history: the objective changed), strong-Wolfe line search, at most
  ``lbfgs_iterations`` iterations, on the **full batch** of derived queries (the objective
  is deterministic, as L-BFGS needs; it is accumulated chunk by chunk, so memory stays
  bounded, see :func:`derived_chunks`).
- ``patience`` (null): stop a penalty's annealing after this many stages without a
  validation improvement (null: run every stage).
- ``test_ranking`` (``shortcut_hungarian``), ``ranking_top`` (10): how the test documents
  are ranked (Sec. 5: "the short-cut Hungarian method was used as described in Section
  2.3"). :func:`bench.losses.sinkprop.shortcut_hungarian` on the chosen weights' scores
  :math:`s = X w + b`, with the SinkProp matrix of the stage those weights come from
  (:func:`ranking_sigma`; the loss's ``n_iter`` and ``eps``): items sorted by expected rank
  under :math:`D`, then the top :math:`K` = ``ranking_top`` reassigned exactly to ranks
  :math:`1..K` by ``scipy.optimize.linear_sum_assignment`` maximising
  :math:`\sum_i \log D_{i\pi(i)}` (eq. 5); ``null`` assigns the whole list. ``scores``
  ranks by :math:`s`. Both rankings are graded and recorded; the option picks the run's
  (``scores.npy``, the per-query metrics, every table). The paper's copy elides the value
  of :math:`K`; 10 is the deepest truncation level its Fig. 2 reports (NDCG@1..10), so the
  exact step covers every position those metrics read and nothing deeper. Validation
  (early stopping, the penalty's choice) grades the linear scores: the paper uses the
  short cut "when specific rank predictions were made at test time".

The objective of a penalty :math:`\lambda`, for the linear scorer :math:`s = X w + b`:

.. math::

    J_\sigma(w) = \frac{1}{K} \sum_{k=1}^{K} \ell_\sigma(X_k w + b,\, y_k)
                  + \lambda \lVert w - w_{LS} \rVert^2 ,

with :math:`\ell_\sigma` the method's loss (``sinkprop``: minus the expected NDCG under
``n_iter`` Sinkhorn iterations of the smoothed indicator plus ``eps``; the method's
``params`` other than ``sigma``, which the schedule sets), :math:`K` the contributing derived queries. The
intercept :math:`b` moves no ranking (every list's loss is shift-invariant), so it stays at
the initialiser's :math:`b_{LS}` and only :math:`w` is optimised and regularised.

**Early stopping.** The validation split is graded after the initialiser and after every
stage by the protocol's ``train.early_stopping_metric`` under the dataset's convention, on
float32-cast scores (as ``scores.npy`` stores them); the run keeps the best weights seen,
the initialiser included, so it is never worse than the initialiser on validation. The
protocol's ``model`` must be the linear scorer (``{type: mlp, hidden: []}``); the other
``train`` keys (budgets, Adam, list sizes) do not apply. Everything runs in float64;
two CPU runs with the same inputs give bit-identical outputs.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from bench.errors import TrainingDiverged
from bench.training.config import check

CHUNK_ENTRIES = 1 << 22  # padded list x list entries per chunk of the full-batch objective
BIN_RATIO = 1.25  # derived queries are padded within geometric length bins of this ratio


# ----------------------------------------------------------------------------- configuration


def loss_with_sigma(fn: Callable[..., torch.Tensor], method: str, params: dict[str, Any]) -> None:
    """The method's loss must take ``sigma`` (the annealed constant) and not fix it in ``params``."""
    check("sigma" in inspect.signature(fn).parameters, f"methods.{method}.loss",
          "the SinkProp protocol anneals 'sigma'; this loss has no 'sigma' hyperparameter")
    check("sigma" not in params, f"methods.{method}.params.sigma",
          "set by the SinkProp protocol's annealing (sigma_start, sigma_factor, stages), not by params")


# ----------------------------------------------------------------------------- schedule and objective


def sigma_schedule(start: float, factor: float, stages: int, scale: float = 1.0) -> list[float]:
    """:math:`\\sigma_t = \\text{start} \\cdot \\text{scale} / \\text{factor}^t`, ``t = 0 .. stages - 1``.

    >>> sigma_schedule(1.0, 2.0, 4, scale=3.0)
    [3.0, 1.5, 0.75, 0.375]
    """
    return [float(start) * float(scale) / float(factor) ** t for t in range(int(stages))]


def score_variance(scores: np.ndarray, offsets: np.ndarray) -> float:
    """Mean over queries with >= 2 documents of the within-query (population) score variance.

    >>> score_variance(np.array([0.0, 2.0, 5.0, 1.0, 1.0, 4.0]), np.array([0, 2, 3, 6]))  # (1 + 2) / 2
    1.5
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    qidx = np.repeat(np.arange(lengths.size), lengths)
    s = np.asarray(scores, dtype=np.float64)
    n = np.maximum(lengths, 1).astype(np.float64)
    mean = np.bincount(qidx, weights=s, minlength=lengths.size) / n
    var = np.bincount(qidx, weights=(s - mean[qidx]) ** 2, minlength=lengths.size) / n
    many = lengths >= 2
    return float(var[many].mean()) if many.any() else 0.0


def regulariser(w: torch.Tensor, w0: torch.Tensor, penalty: float) -> torch.Tensor:
    """:math:`\\lambda \\lVert w - w_0 \\rVert^2` (gradient :math:`2 \\lambda (w - w_0)`)."""
    diff = w - w0
    return penalty * (diff * diff).sum()


@dataclass(frozen=True)
class Chunk:
    """Derived queries of similar length, padded to ``[B, L]``; features stay unpadded."""

    x: torch.Tensor  # [n, d] float64, the chunk's documents in row-major list order
    pos: torch.Tensor  # [n] flat position r * L + c of each document
    labels: torch.Tensor  # [B, L] float64
    mask: torch.Tensor  # [B, L] bool
    weight: float  # B / K: the chunk's share of the full-batch mean

    def scores(self, w: torch.Tensor, b: float) -> torch.Tensor:
        flat = torch.zeros(self.mask.numel(), dtype=w.dtype, device=w.device)
        return flat.index_put((self.pos,), self.x @ w + b).view(self.mask.shape)


def derived_chunks(features: np.ndarray, labels: np.ndarray, derived, device: torch.device) -> list[Chunk]:
    """The contributing derived queries (>= 2 documents, a positive label) in chunks.

    Lists are grouped into geometric length bins (ratio :data:`BIN_RATIO`), each bin padded
    to its longest list and split so that ``B * L^2 <= CHUNK_ENTRIES``; no Python loop over
    queries (one over bins and chunks).
    """
    sizes = np.diff(derived.offsets)
    lab = np.asarray(labels, dtype=np.float64)[derived.doc_index]
    top = np.maximum.reduceat(lab, derived.offsets[:-1]) if sizes.size else np.zeros(0)
    ids = np.flatnonzero((sizes >= 2) & (top > 0))
    return [_chunk(features, lab, derived, members, length=length, total=ids.size, device=device)
            for members, length in length_groups(sizes, ids)]


def length_groups(sizes: np.ndarray, ids: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """The lists ``ids`` (sizes ``sizes[ids]`` >= 1) in groups of similar length: ``(members, padded length)``.

    Sorted by size, grouped into geometric length bins (ratio :data:`BIN_RATIO`), each bin
    padded to its longest list and split so that ``B * L^2 <= CHUNK_ENTRIES``.

    >>> [(m.tolist(), n) for m, n in length_groups(np.array([3, 1, 2, 3]), np.array([0, 2, 3]))]
    [([2], 2), ([0, 3], 3)]
    """
    ids = ids[np.argsort(sizes[ids], kind="stable")]
    bins = np.floor(np.log(sizes[ids]) / np.log(BIN_RATIO)).astype(np.int64)
    groups = []
    for b in np.unique(bins):
        members = ids[bins == b]
        length = int(sizes[members].max())
        per = max(1, CHUNK_ENTRIES // (length * length))
        groups += [(members[start:start + per], length) for start in range(0, members.size, per)]
    return groups


def _chunk(features, lab, derived, members, *, length: int, total: int, device: torch.device) -> Chunk:
    """One padded ``[B, length]`` chunk of the derived queries ``members`` (vectorised)."""
    lens = np.diff(derived.offsets)[members]
    rows = np.repeat(np.arange(members.size), lens)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    cols = np.arange(rows.size) - np.repeat(starts, lens)
    src = np.repeat(derived.offsets[members], lens) + cols  # into the derived documents
    x = torch.from_numpy(np.asarray(features[derived.doc_index[src]], dtype=np.float64))
    y = np.zeros((members.size, length))
    y[rows, cols] = lab[src]
    mask = np.zeros((members.size, length), dtype=bool)
    mask[rows, cols] = True
    pos = torch.from_numpy(rows * length + cols)
    return Chunk(x.to(device), pos.to(device), torch.from_numpy(y).to(device), torch.from_numpy(mask).to(device),
                 members.size / total)


@dataclass
class Objective:
    """The full-batch objective of one penalty at one sigma; ``value`` keeps the last evaluation."""

    loss: Callable[..., torch.Tensor]  # (scores, labels, mask, sigma=) -> mean loss of the lists
    chunks: list[Chunk]
    w0: torch.Tensor
    b0: float
    penalty: float
    sigma: float
    value: tuple[float, float] = field(default=(math.nan, math.nan))  # (loss, regulariser)

    def evaluate(self, w: torch.Tensor, *, backward: bool) -> float:
        """``J_sigma(w)``; with ``backward``, its gradient is accumulated into ``w.grad`` chunk by chunk."""
        reg = regulariser(w, self.w0, self.penalty)
        if backward:
            reg.backward()
        loss = 0.0
        for c in self.chunks:
            part = self.loss(c.scores(w, self.b0), c.labels, c.mask, sigma=self.sigma) * c.weight
            if backward:
                part.backward()
            loss += float(part.detach())
        self.value = (loss, float(reg.detach()))
        total = loss + self.value[1]
        if not math.isfinite(total):
            raise TrainingDiverged(f"non-finite SinkProp objective (loss {loss}, regulariser {self.value[1]}) at "
                                   f"sigma={self.sigma:g}, penalty={self.penalty:g}")
        return total

    def closure(self, w: torch.Tensor) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            w.grad = None
            return torch.tensor(self.evaluate(w, backward=True), dtype=torch.float64)

        return run


def run_stage(objective: Objective, w: torch.Tensor, iterations: int, history: int) -> int:
    """One annealing stage: a fresh L-BFGS from ``w`` (updated in place); its function evaluations."""
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=int(iterations), history_size=int(history),
                            line_search_fn="strong_wolfe")
    opt.step(objective.closure(w))
    return int(opt.state[w].get("func_evals", 0))


# ----------------------------------------------------------------------------- annealing with early stopping


@dataclass
class PenaltyFit:
    """One penalty's annealing: the best weights seen (the initialiser's at stage 0) and the curve."""

    penalty: float
    weights: np.ndarray
    vali: float
    stage: int  # 0: the initialiser
    rows: list[dict[str, Any]]
    func_evals: int
    train_seconds: float = 0.0  # the stages' L-BFGS runs and closing evaluations, grading excluded


@dataclass
class Annealing:
    """What every penalty's annealing shares: objective parts, schedule, grader, budgets."""

    loss: Callable[..., torch.Tensor]
    chunks: list[Chunk]
    w0: torch.Tensor
    b0: float
    sigmas: list[float]
    grade: Callable[[np.ndarray], float]  # weights -> validation mean
    better: Callable[[float, float], bool]  # (new, best) -> strictly better
    proto: dict[str, Any]
    metric: str

    def fit(self, penalty: float, init_vali: float, first_epoch: int) -> PenaltyFit:
        """Anneal sigma from the initialiser under ``penalty``; keep the best validation weights."""
        w = self.w0.detach().clone().requires_grad_(True)
        best = PenaltyFit(penalty, self.w0.detach().cpu().numpy().copy(), init_vali, 0, [], 0)
        bad = 0
        for stage, sigma in enumerate(self.sigmas, 1):
            t0 = time.perf_counter()
            objective = Objective(self.loss, self.chunks, self.w0, self.b0, penalty, sigma)
            best.func_evals += run_stage(objective, w, self.proto["lbfgs_iterations"], self.proto["lbfgs_history"])
            with torch.no_grad():
                objective.evaluate(w, backward=False)
            weights = w.detach().cpu().numpy().copy()
            best.train_seconds += time.perf_counter() - t0
            vali = self.grade(weights)
            if self.better(vali, best.vali):
                best.weights, best.vali, best.stage, bad = weights, vali, stage, 0
            else:
                bad += 1
            best.rows.append(self._row(objective, epoch=first_epoch + stage, evals=best.func_evals, stage=stage,
                                       vali=vali, seconds=time.perf_counter() - t0))
            if self.proto["patience"] is not None and bad >= self.proto["patience"]:
                break
        return best

    def _row(self, objective: Objective, *, epoch: int, evals: int, stage: int, vali: float,
             seconds: float) -> dict[str, Any]:
        loss, reg = objective.value
        penalty = objective.penalty
        return {"epoch": epoch, "step": evals, "lr": math.nan, "tau": objective.sigma, "train_loss": loss + reg,
                "seconds": seconds, f"vali_{self.metric}": vali, "penalty": penalty, "stage": stage,
                "sigma": objective.sigma, "loss": loss, "regulariser": reg}


def curve_frame(init_vali: float, metric: str, fits: list[PenaltyFit]) -> pd.DataFrame:
    """The run's curve: the initialiser (epoch 0), then every penalty's stages in grid order."""
    first = {"epoch": 0, "step": 0, "lr": math.nan, "tau": math.nan, "train_loss": math.nan, "seconds": 0.0,
             f"vali_{metric}": init_vali, "penalty": math.nan, "stage": 0, "sigma": math.nan, "loss": math.nan,
             "regulariser": math.nan}
    return pd.DataFrame([first, *(row for fit in fits for row in fit.rows)])


# ----------------------------------------------------------------------------- test-time ranking


def ranking_sigma(sigmas: list[float], stage: int) -> float:
    """The sigma the chosen weights were trained at (stage ``t >= 1``: ``sigmas[t - 1]``); the
    initialiser's (stage 0) is ranked at the first stage's, where its annealing would start.

    >>> ranking_sigma([4.0, 2.0, 1.0], 2), ranking_sigma([4.0, 2.0, 1.0], 0)
    (2.0, 4.0)
    """
    return float(sigmas[max(int(stage), 1) - 1])


def ranking_settings(loss_fn: Callable[..., torch.Tensor], sigma: float, top: int | None) -> dict[str, Any]:
    """The SinkProp matrix of the test-time ranking: ``sigma``, ``top`` and the loss's ``n_iter`` and
    ``eps`` (its ``params`` or defaults; SinkProp's own defaults for a loss without them)."""
    from bench.losses._common import check_count, check_k
    from bench.losses.sinkprop import sinkprop

    own, ref = inspect.signature(loss_fn).parameters, inspect.signature(sinkprop).parameters
    pick = {k: (own[k] if k in own else ref[k]).default for k in ("n_iter", "eps")}
    return {"sigma": float(sigma), "top": check_k(top, "top"), "n_iter": check_count(pick["n_iter"], "n_iter", minimum=0),
            "eps": float(pick["eps"])}


def hungarian_scores(scores: np.ndarray, offsets: np.ndarray, settings: dict[str, Any],
                     device: torch.device) -> np.ndarray:
    r"""Scores that sort every query into its short-cut Hungarian ranking: minus the 1-based rank.

    Queries are padded in groups of similar length (:func:`length_groups`) and ranked by
    :func:`bench.losses.sinkprop.shortcut_hungarian` with ``settings`` (:func:`ranking_settings`);
    a one-document query gets -1. The scores are distinct integers within a query, so every
    metric (and LETOR's scripts, through ``ltr-bench export-scores``) reads exactly that
    ranking, whatever its tie rule.
    """
    from bench.losses.sinkprop import shortcut_hungarian

    offsets = np.asarray(offsets, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    sizes = np.diff(offsets)
    out = np.full(s.size, -1.0)
    for members, length in length_groups(sizes, np.flatnonzero(sizes >= 2)):
        lens = sizes[members]
        rows = np.repeat(np.arange(members.size), lens)
        cols = np.arange(rows.size) - np.repeat(np.cumsum(lens) - lens, lens)
        src = offsets[members][rows] + cols
        padded = np.zeros((members.size, length))
        padded[rows, cols] = s[src]
        mask = np.zeros((members.size, length), dtype=bool)
        mask[rows, cols] = True
        order = shortcut_hungarian(torch.from_numpy(padded).to(device), torch.from_numpy(mask).to(device),
                                   sigma=settings["sigma"], top=settings["top"], n_iter=settings["n_iter"],
                                   eps=settings["eps"])
        # order[r, p] is the item at rank p + 1 of list r; its first lens[r] entries are the real items
        out[offsets[members][rows] + order[rows, cols]] = -(cols + 1.0)
    return out.astype(np.float32)


def rank_within(scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each document's 1-based rank in its query by descending score, ties in document order.

    >>> rank_within(np.array([0.5, 2.0, 0.5, 1.0, 3.0]), np.array([0, 3, 5])).tolist()
    [2, 1, 3, 2, 1]
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    qidx = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    order = np.lexsort((np.arange(qidx.size), -np.asarray(scores, dtype=np.float64), qidx))
    ranks = np.empty(qidx.size, dtype=np.int64)
    ranks[order] = np.arange(qidx.size) - offsets[qidx[order]] + 1
    return ranks

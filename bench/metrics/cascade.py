r"""Metrics of a user walking down the ranked list: ERR (a cascade) and RBP (a constant persistence).

**ERR@k** (Chapelle, Metzler, Zhang & Grinspan 2009; the Yahoo! Learning to Rank Challenge's
official metric): the user stops at rank :math:`j` with probability
:math:`R_j = (2^{y_j} - 1) / 2^{4}` (the challenge's grades 0-4) and

.. math:: \mathrm{ERR@}k = \sum_{j \le k} \frac{1}{j}\, R_j \prod_{i < j} (1 - R_i).

Labels must lie in [0, 4] (a grade above 4 would give :math:`R > 1`; the function raises and
names the row). A query without a relevant document scores 0; none is dropped.

**RBP** (Moffat & Zobel 2008) with persistence :math:`p`: :math:`(1-p) \sum_j r_j\, p^{j-1}`
with binary relevance :math:`r_j = 1(y_j \ge 1)` over the whole list. Its **residual** is the
weight the sum leaves unassigned, the most RBP could still gain from documents it did not
see: :math:`p^{n}` for a list of :math:`n` documents, all of them judged (every LTR dataset
judges every document it lists). ``rbp_residual@p`` reports it per query; it depends on the
list length only, so every method has the same residual on a query.

Score ties under ``ties="expected"``: RBP is linear in the positions (the relevance is
averaged over each tie group). ERR is not; its exact expectation over the orders of a tie
group of size :math:`n` at ranks :math:`a..a+n-1`, entered with continuation probability
:math:`C = \prod_{\text{before}} (1 - R)`, is

.. math:: C \sum_{t=0}^{n-1} \frac{M_t - M_{t+1}}{a + t}, \qquad
          M_t = \binom{n}{t}^{-1} e_t(1 - R_1, \dots, 1 - R_n),

since the item at the group's :math:`t`-th place contributes
:math:`E[\prod_{\text{first } t}(1-R)] - E[\prod_{\text{first } t+1}(1-R)]` and the first
:math:`t` items of a random order are a uniform :math:`t`-subset. :math:`M_t` (the mean of the
products over :math:`t`-subsets) comes from the recursion over the group's items
:math:`M^{(j)}_t = \frac{j-t}{j} M^{(j-1)}_t + \frac{t}{j} x_j M^{(j-1)}_{t-1}`, a convex
combination (no overflow), for all tie groups at once: a loop over the place in the group,
not over queries or groups.
"""

from __future__ import annotations

import numpy as np

from bench.metrics.names import MetricSpec
from bench.metrics.ranking import Ranking, exclusive_prefix

#: the Yahoo! challenge's highest grade: R(y) = (2^y - 1) / 2^ERR_MAX_GRADE
ERR_MAX_GRADE = 4


def err(r: Ranking, spec: MetricSpec, empty_query: str):
    """ERR@k (module docstring); ``k=None`` (``err@max``) walks the whole list."""
    _check_grades(r, spec)
    stop = (np.exp2(r.y) - 1.0) / 2.0**ERR_MAX_GRADE
    go_on = 1.0 - stop  # >= 1/16, so its logarithm is finite
    log_before = exclusive_prefix(np.log(go_on), r.qidx, r.query_starts)
    cut = np.inf if spec.k is None else spec.k
    term = np.where(r.rank <= cut, stop * np.exp(log_before) / r.rank, 0.0)
    value = np.zeros(r.n_queries)
    if r.ties == "expected" and r.n and (r.group_size > 1).any():
        tied = r.group_size > 1
        term = np.where(tied[r.gid], 0.0, term)
        groups = np.flatnonzero(tied)
        value += np.bincount(r.qidx[r.group_starts[groups]], minlength=r.n_queries,
                             weights=_tied_err(r, groups, go_on, log_before, cut))
    return value + r.segsum(term), np.zeros(r.n_queries, dtype=bool)


def _tied_err(r: Ranking, groups: np.ndarray, go_on: np.ndarray, log_before: np.ndarray, cut: float) -> np.ndarray:
    """The expected ERR contribution of each tie group in ``groups`` (module docstring)."""
    by_size = np.argsort(-r.group_size[groups], kind="stable")  # active groups are a prefix
    groups = groups[by_size]
    sizes = r.group_size[groups]
    starts = r.group_starts[groups]
    longest = int(sizes[0])
    means = np.zeros((len(groups), longest + 1))  # M_t, t = 0..n
    means[:, 0] = 1.0
    for j in range(1, longest + 1):
        active = int(np.count_nonzero(sizes >= j))
        x = go_on[starts[:active] + j - 1][:, None]
        t = np.arange(1, j + 1, dtype=np.float64)
        means[:active, 1: j + 1] = (j - t) / j * means[:active, 1: j + 1] + t / j * x * means[:active, :j]
    place = np.arange(longest, dtype=np.float64)
    rank = r.rank[starts][:, None] + place
    counted = (place < sizes[:, None]) & (rank <= cut)
    stops = np.where(counted, (means[:, :-1] - means[:, 1:]) / rank, 0.0)
    out = np.empty(len(groups))
    out[by_size] = np.exp(log_before[starts]) * stops.sum(axis=1)
    return out


def _check_grades(r: Ranking, spec: MetricSpec) -> None:
    labels = r.labels
    bad = np.flatnonzero(labels > ERR_MAX_GRADE)
    if bad.size:
        q = int(np.searchsorted(r.offsets, bad[0], side="right") - 1)
        raise ValueError(
            f"{spec.name}: ERR grades labels 0-{ERR_MAX_GRADE} (the Yahoo! challenge's R = (2^y - 1) / "
            f"2^{ERR_MAX_GRADE}); row {bad[0]} (query {q}) has label {labels[bad[0]]!r} ({bad.size} such rows)"
        )


def rbp(r: Ranking, spec: MetricSpec, empty_query: str):
    """RBP with persistence ``spec.p`` over the whole list (binary relevance)."""
    p = float(spec.p)  # type: ignore[arg-type]
    weight = (1.0 - p) * np.power(p, r.rank - 1.0)
    return r.segsum(r.rel_expected * weight), np.zeros(r.n_queries, dtype=bool)


def rbp_residual(r: Ranking, spec: MetricSpec, empty_query: str):
    """The weight RBP leaves past the end of a fully judged list of n documents: p^n."""
    return np.power(float(spec.p), r.lengths.astype(np.float64)), np.zeros(r.n_queries, dtype=bool)  # type: ignore[arg-type]

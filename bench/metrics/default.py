r"""The suite's own definitions of every metric (convention ``default``), vectorised.

Each function takes the sorted layout (:class:`~bench.metrics.ranking.Ranking`), the parsed
name and the empty-query rule, and returns ``(value [Q], dropped [Q] bool)``. Gain
:math:`2^y - 1`, discount :math:`1/\log_2(1+j)` at the 1-based rank :math:`j`, binary
relevance :math:`y \ge 1` for MRR, MAP and precision; the formulas are in
:mod:`bench.metrics`' docstring. Under ``ties="expected"`` each returns the exact expectation
over the orders of tied scores (``Ranking.expect`` for the position-linear ones, closed forms
for MRR and MAP, 1/2 per tied pair for OPA).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from bench.metrics.cascade import err, rbp, rbp_residual
from bench.metrics.names import MetricSpec
from bench.metrics.ranking import Ranking, apply_empty, exclusive_prefix, safe_div


def _kept(r: Ranking) -> np.ndarray:
    """No query dropped."""
    return np.zeros(r.n_queries, dtype=bool)


def check_gain_range(r: Ranking, spec: MetricSpec) -> None:
    """The gain :math:`2^y - 1` stays finite and exact in float64."""
    if r.n and r.y.max() >= 1000:
        raise ValueError(f"labels up to {r.y.max()!r}: the gain 2^y - 1 of {spec.name} "
                         "overflows; rescale the labels (graded labels are small integers)")


def ndcg(r: Ranking, spec: MetricSpec, empty_query: str):
    check_gain_range(r, spec)
    dcg_k = r.top_sum(r.gain_expected, spec.k, discounted=True)
    ideal = r.top_sum(r.gain_ideal, spec.k, discounted=True)
    return apply_empty(ideal <= 0, safe_div(dcg_k, ideal), empty_query)


def dcg(r: Ranking, spec: MetricSpec, empty_query: str):
    """DCG@k, unnormalised: 0 for a query without a relevant document, never dropped."""
    check_gain_range(r, spec)
    return r.top_sum(r.gain_expected, spec.k, discounted=True), _kept(r)


def precision(r: Ranking, spec: MetricSpec, empty_query: str):
    return r.top_sum(r.rel_expected, spec.k) / spec.k, _kept(r)


def recall(r: Ranking, spec: MetricSpec, empty_query: str):
    """``recall`` and ``recall_arf`` (module docstring): one computation, two denominators."""
    k_eff = np.minimum(spec.k, r.lengths)
    nonempty = k_eff > 0
    kth = np.zeros(r.n_queries)
    kth[nonempty] = r.y_ideal[(r.offsets[:-1] + k_eff - 1)[nonempty]]
    kth_item = kth[r.qidx]
    is_above, is_tied = r.y > kth_item, r.y == kth_item
    share = safe_div(k_eff - r.segsum(is_above), r.segsum(is_tied))
    w = np.where(is_above, 1.0, np.where(is_tied, share[r.qidx], 0.0))
    hits = r.top_sum(r.expect(w), spec.m)
    denominator = k_eff if spec.kind == "recall" else np.full(r.n_queries, spec.k)
    return safe_div(hits, denominator), ~nonempty


def arp(r: Ranking, spec: MetricSpec, empty_query: str):
    total = r.segsum(r.y)
    value = safe_div(r.segsum(r.expect(r.y) * r.rank), total)
    return value, total <= 0


def reciprocal_rank(r: Ranking, target: np.ndarray, k: int | None) -> np.ndarray:
    """Per query: 1 / rank of the first item with ``target`` (bool, sorted layout) within the
    top ``k`` (None: anywhere), 0 if there is none; under expected ties its exact expectation.

    Expected: the first target lies in the first tie group holding one; with n items and m
    targets in that group starting at rank a, P(first at a+t) = C(n-1-t, m-1) / C(n, m) for
    t = 0..n-m.
    """
    cut = np.inf if k is None else k
    idx = np.flatnonzero(target)
    first = idx[np.r_[True, r.qidx[idx][1:] != r.qidx[idx][:-1]]] if idx.size else idx
    if r.ties == "stable":
        value = np.zeros(r.n_queries)
        value[r.qidx[first]] = np.where(r.rank[first] <= cut, 1.0 / r.rank[first], 0.0)
        return value
    gid = r.gid
    n_target = r.group_sum(target)
    is_first_group = np.zeros(len(r.group_starts), dtype=bool)
    is_first_group[gid[first]] = True
    items = np.flatnonzero(is_first_group[gid])
    g = gid[items]
    n, m = r.group_size[g].astype(np.float64), n_target[g]
    t = r.rank[items] - r.rank[r.group_starts[g]]
    possible = (t <= n - m) & (r.rank[items] <= cut)
    a_, b_ = np.maximum(n - 1 - t, 0), np.maximum(m - 1, 0)
    log_p = (
        gammaln(a_ + 1) - gammaln(b_ + 1) - gammaln(np.maximum(a_ - b_, 0) + 1)
        - (gammaln(n + 1) - gammaln(m + 1) - gammaln(n - m + 1))
    )
    p = np.where(possible, np.exp(log_p), 0.0)
    return np.bincount(r.qidx[items], weights=p / r.rank[items], minlength=r.n_queries)


def mrr(r: Ranking, spec: MetricSpec, empty_query: str):
    """MRR and MRR@k: 1 / rank of the first relevant item (within the top k), else 0."""
    return reciprocal_rank(r, r.rel > 0, spec.k), _kept(r)


def map_(r: Ranking, spec: MetricSpec, empty_query: str):
    """MAP and MAP@k (trec_eval's ``map_cut``): the precisions at the relevant ranks up to k,
    summed and divided by the number R of relevant items in the whole list."""
    n_rel = r.segsum(r.rel)
    rel_before = exclusive_prefix(r.rel, r.qidx, r.query_starts)
    if r.ties == "stable":
        contrib = r.rel * (rel_before + r.rel) / r.rank
    else:
        # item at rank j of a group (start a, size n, m relevant, c relevant before it):
        # E[sum of precisions of the group's relevant items] spreads as
        # (m/n) * (c + 1 + (j-a)(m-1)/(n-1)) / j per position j.
        size = r.group_size
        m = np.repeat(r.group_sum(r.rel), size)
        n = np.repeat(size.astype(np.float64), size)
        c = np.repeat(rel_before[r.group_starts], size)
        t = r.rank - np.repeat(r.rank[r.group_starts], size)
        contrib = (m / n) * (c + 1.0 + t * safe_div(m - 1.0, n - 1.0)) / r.rank
    if spec.k is not None:
        contrib = np.where(r.rank <= spec.k, contrib, 0.0)
    value = safe_div(r.segsum(contrib), n_rel)
    return apply_empty(n_rel <= 0, value, empty_query)


def opa(r: Ranking, spec: MetricSpec, empty_query: str):
    correct, tied_label, all_pairs = r.pair_counts
    distinct = all_pairs - tied_label
    return safe_div(correct, distinct), distinct <= 0


def opa_arf(r: Ranking, spec: MetricSpec, empty_query: str):
    correct, tied_label, all_pairs = r.pair_counts
    return safe_div(correct + tied_label, all_pairs), all_pairs <= 0


#: metric kind -> its computation under the default convention (mean_ndcg is LETOR 4.0's only)
COMPUTE = {
    "ndcg": ndcg,
    "dcg": dcg,
    "err": err,
    "precision": precision,
    "recall": recall,
    "recall_arf": recall,
    "arp": arp,
    "mrr": mrr,
    "map": map_,
    "opa": opa,
    "opa_arf": opa_arf,
    "rbp": rbp,
    "rbp_residual": rbp_residual,
}

r"""The LETOR conventions: per query equal to LETOR's official ``Eval-Score-3.0.pl`` / ``Eval-Score-4.0.pl``.

Both scripts rank by descending score with ties kept in file order (``ties`` must be
``"stable"``), grade labels 0, 1, 2 only (the scripts' gain table; any other label raises,
where the scripts would silently give it gain 0) and ignore ``empty_query``: a query without
a relevant document scores 0 in every metric and stays in the mean. With ``n`` the list
length, :math:`g(y) = 2^y - 1`, :math:`d_1 = d_2 = 1`, :math:`d_j = \ln 2 / \ln j` for
:math:`j \ge 3` and :math:`\mathrm{rel} = (y \ge 1)`:

* ``ndcg@k``: :math:`\sum_{j \le k} g(y_{\pi_j}) d_j / \sum_{j \le k} g(y^*_j) d_j` for
  ``k <= n`` (0 when the ideal sum is 0); **0 when** ``k > n`` in both versions (the scripts
  compute NDCG only at positions that exist, and their means add nothing for the others).
  ``ndcg@max`` is ``k = n``.
* ``precision@k``: ``letor4``: :math:`\sum_{j \le \min(k,n)} \mathrm{rel}_j / k` (missing
  places count as non-relevant); ``letor3``: the same for ``k <= n`` and **0** for ``k > n``.
* ``map``: :math:`\frac{1}{R} \sum_{\text{relevant } j} \frac{\#\{i \le j: \mathrm{rel}_i\}}{j}`,
  0 when ``R = 0`` (the scripts compute no MAP@k: ``map@K`` keeps the default definition).
* ``mean_ndcg`` (``letor4`` only, the script's MeanNDCG):
  :math:`\frac{1}{n} \sum_{k=1}^{n} \mathrm{NDCG@}k`.

The scripts print NDCG/P up to 16 positions (3.0) or 10 (4.0); other ``k`` follow the same
rules. The scripts key a document by ``(qid, docid)``, so a docid repeated inside one query
would keep only its last line there; LETOR's files have unique docids, and the suite grades
every document it is given. The float64 operations are the scripts' own, in their order (each term
``g * ln(2) / ln(j)`` with the C library's ``log``, sums accumulated position by position),
so the values agree with the scripts' to the last bit, not only to their printed precision.
Metrics the scripts do not define keep the default definitions (:func:`defines`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.metrics.names import MetricSpec
from bench.metrics.ranking import Ranking

LETOR_SCRIPTS = {"letor3": "Eval-Score-3.0.pl", "letor4": "Eval-Score-4.0.pl"}
# the metric kinds each LETOR convention defines (the scripts compute nothing else)
LETOR_KINDS = {"letor3": ("ndcg", "precision", "map"),
               "letor4": ("ndcg", "precision", "map", "mean_ndcg")}


def defines(convention: str, spec: MetricSpec) -> bool:
    """Whether ``convention``'s script computes ``spec`` (MAP only uncut: the scripts have no MAP@k).

    >>> from bench.metrics.names import parse_metric
    >>> defines("letor4", parse_metric("map")), defines("letor4", parse_metric("map@10"))
    (True, False)
    """
    return spec.kind in LETOR_KINDS[convention] and not (spec.kind == "map" and spec.k is not None)


def _letor_discount_terms(gain: np.ndarray) -> np.ndarray:
    """Per position ``j`` (columns, 1-based): ``g`` for ``j <= 2``, else ``g * ln 2 / ln j``.

    The logarithms come from ``math.log`` (the C library's, as Perl's ``log``), one per
    position; the products and quotients are the scripts' float64 operations in their order.
    """
    width = gain.shape[1]
    log_j = np.array([math.log(j) for j in range(1, width + 1)], dtype=np.float64)
    log_j[:2] = 1.0  # positions 1 and 2 are not discounted
    terms = gain * math.log(2.0) / log_j
    terms[:, :2] = gain[:, :2]
    return terms


@dataclass
class LetorTables:
    """Dense ``[Q, max_len]`` views of one ranking, accumulated position by position.

    ``dcg``/``ideal``: cumulative DCG of the predicted / ideal order at each position;
    ``hits``: cumulative number of relevant items; ``lengths``: list lengths ``n``. Columns at
    and beyond ``n`` repeat the last value (padding adds exact zeros).
    """

    convention: str
    lengths: np.ndarray
    dcg: np.ndarray
    ideal: np.ndarray
    hits: np.ndarray

    @classmethod
    def of(cls, r: Ranking, convention: str) -> LetorTables:
        cached = getattr(r, "_letor_tables", None)
        if cached is not None and cached.convention == convention:
            return cached
        width = max(r.max_len, 1)

        def dense(x: np.ndarray) -> np.ndarray:
            out = np.zeros((r.n_queries, width), dtype=np.float64)
            out[r.qidx, r.pos] = x
            return out

        gain = dense(np.exp2(r.y) - 1.0)
        ideal_gain = dense(np.exp2(r.y_ideal) - 1.0)
        tables = cls(
            convention=convention,
            lengths=r.lengths.astype(np.int64),
            dcg=np.cumsum(_letor_discount_terms(gain), axis=1),
            ideal=np.cumsum(_letor_discount_terms(ideal_gain), axis=1),
            hits=np.cumsum(dense(r.rel), axis=1),
        )
        r._letor_tables = tables
        return tables

    def at(self, table: np.ndarray, k: np.ndarray) -> np.ndarray:
        """``table[q, k_q - 1]`` per query (0 where ``k_q < 1``)."""
        col = np.clip(k - 1, 0, table.shape[1] - 1)
        return np.where(k >= 1, table[np.arange(len(k)), col], 0.0)

    def ndcg_columns(self) -> np.ndarray:
        """NDCG@j at every position ``j`` (0 where the ideal DCG is 0 or ``j > n``)."""
        exists = np.arange(1, self.dcg.shape[1] + 1)[None, :] <= self.lengths[:, None]
        return np.where(exists & (self.ideal != 0), self.dcg / np.where(self.ideal != 0, self.ideal, 1.0), 0.0)


def _letor_ndcg(t: LetorTables, spec: MetricSpec):
    k = t.lengths if spec.k is None else np.full(len(t.lengths), spec.k, dtype=np.int64)
    dcg, ideal = t.at(t.dcg, k), t.at(t.ideal, k)
    value = np.where((k <= t.lengths) & (ideal != 0), dcg / np.where(ideal != 0, ideal, 1.0), 0.0)
    return value, np.zeros(len(k), dtype=bool)


def _letor_precision(t: LetorTables, spec: MetricSpec):
    k = np.full(len(t.lengths), spec.k, dtype=np.int64)
    value = t.at(t.hits, np.minimum(k, t.lengths)) / spec.k
    if t.convention == "letor3":
        value = np.where(k <= t.lengths, value, 0.0)
    return value, np.zeros(len(k), dtype=bool)


def _letor_map(t: LetorTables, spec: MetricSpec):
    n_pos = t.hits.shape[1]
    rel = np.diff(t.hits, axis=1, prepend=0.0)
    precisions = rel * t.hits / np.arange(1, n_pos + 1, dtype=np.float64)
    total = np.cumsum(precisions, axis=1)[:, -1]
    n_rel = t.hits[:, -1]
    value = np.where(n_rel > 0, total / np.where(n_rel > 0, n_rel, 1.0), 0.0)
    return value, np.zeros(len(value), dtype=bool)


def _letor_mean_ndcg(t: LetorTables, spec: MetricSpec):
    total = np.cumsum(t.ndcg_columns(), axis=1)[:, -1]
    value = np.where(t.lengths > 0, total / np.maximum(t.lengths, 1), 0.0)
    return value, np.zeros(len(value), dtype=bool)


LETOR_COMPUTE = {
    "ndcg": _letor_ndcg,
    "precision": _letor_precision,
    "map": _letor_map,
    "mean_ndcg": _letor_mean_ndcg,
}


def check_letor(convention, specs, ties, labels, offsets) -> None:
    """A LETOR convention's preconditions: its metric kinds, stable ties, labels 0/1/2."""
    script = LETOR_SCRIPTS[convention]
    bad = [s.name for s in specs if not defines(convention, s)]
    if bad:
        allowed = {"ndcg": "ndcg@K", "precision": "precision@K", "map": "map", "mean_ndcg": "mean_ndcg"}
        raise ValueError(
            f"metric(s) {bad} are not defined under convention {convention!r} ({script} computes "
            f"only {[allowed[k] for k in LETOR_KINDS[convention]]}); evaluate them under "
            "convention 'default'"
        )
    if ties != "stable":
        raise ValueError(f"convention {convention!r} keeps score ties in file order ({script}); "
                         f"ties must be 'stable', got {ties!r}")
    off = np.flatnonzero((labels != 0) & (labels != 1) & (labels != 2))
    if off.size:
        q = int(np.searchsorted(offsets, off[0], side="right") - 1)
        raise ValueError(
            f"convention {convention!r} grades labels 0, 1 and 2 only ({script} would give any "
            f"other label gain 0 and count it non-relevant); row {off[0]} (query {q}) has label "
            f"{labels[off[0]]!r} ({off.size} such rows)"
        )



r"""Vectorised per-query ranking metrics: the ONLY metric code path of the suite.

Every metric is computed for all queries of a split at once from flat arrays
(``scores [N]``, ``labels [N]``, ``query_offsets [Q+1]``; query ``q`` is the rows
``offsets[q]:offsets[q+1]``). The documents are sorted once by ``(query, -score,
position)``; every metric is then a handful of segment reductions (``np.bincount`` over the
query index, cumulative sums) -- no Python loop over queries.

Ranking and ties
----------------
Items are ranked by descending score. ``ties="stable"`` (default) breaks score ties by the
item's position in the query (LightGBM's stable sort), so every metric is a function of
that one ranking :math:`\pi`. ``ties="expected"`` returns the *exact* expectation of the
metric over all orders of tied scores (each order equally likely):

* metrics linear in position, :math:`\sum_j h(y_{\pi_j})\,c(j)` (DCG, precision, recall,
  ARP), replace :math:`h` by its mean over the tie group (McSherry & Najork 2008);
* MAP uses the hypergeometric mean of the relevant items ahead within the group;
* MRR sums :math:`P(\text{first relevant at } a+t) / (a+t)` over the first tie group
  holding a relevant item, :math:`P = \binom{n-1-t}{r-1} / \binom{n}{r}`;
* OPA / OPA_ARF count a score-tied pair with different labels as 1/2.

Definitions (gain :math:`2^y-1`, discount :math:`1/\log_2(1+j)`, 1-based rank :math:`j`,
binary relevance :math:`y \ge 1` for MRR, MAP and precision):

* ``ndcg@k`` / ``ndcg@max``: :math:`DCG@k/IDCG@k`; lists shorter than ``k`` sum what exists;
  ``IDCG = 0`` is an *empty query*, scored by ``empty_query``: ``one`` (LightGBM, XGBoost,
  allRank), ``zero`` (TF-Ranking) or ``drop`` (Qin et al. 2021).
* ``mrr``: :math:`1/j` of the first relevant item, 0 when there is none (never dropped).
* ``opa``: among pairs with :math:`y_i > y_j`, the fraction with ``i`` ranked above ``j``;
  dropped when the query has no such pair. With distinct scores this is TF-Ranking's
  "s_i > s_j"; a score tie is resolved by the tie rule (stable: position; expected: 1/2),
  so a constant scorer is not rewarded.
* ``opa_arf`` (ARF eq. 2): over all unordered pairs, the fraction that are concordant,
  :math:`(\text{rank order})(y_i - y_j) \ge 0` -- label ties always count; dropped when
  ``n < 2``. Read literally with raw scores, eq. 2 would give a constant scorer 1.0;
  ranking by the tie rule avoids that and equals eq. 2 whenever scores are distinct.
* ``arp``: :math:`\sum_j y_{\pi_j}\, j / \sum_j y_j` (PiRank eq. 4, graded labels);
  dropped when :math:`\sum y = 0`. Lower is better.
* ``recall@m@k`` (ARF eq. 4): :math:`\frac{1}{k'}\sum_i 1(i \in \text{top-}m)\,w_i` with
  :math:`k' = \min(k, n)`, :math:`w_i = 1` above the :math:`k'`-th largest label and
  ``(k' - #above) / #tied`` for items tied with it (the expectation over random tie-breaks
  of the ground-truth top-k). For ``n >= k`` this is eq. 4 exactly; dividing by ``k'``
  lets a perfect ranking of a short list score 1. Dropped only for a query without items.
* ``map``: :math:`\frac{1}{R}\sum_{\text{relevant } i} \text{prec@}j_i`; ``R = 0`` is an
  empty query (``empty_query`` as for NDCG; ``one`` equals LightGBM's ``map@k``).
* ``precision@k``: relevant items in the top ``k`` divided by ``k`` (trec_eval: a list
  shorter than ``k`` counts the missing places as non-relevant); never dropped.

Dropped queries hold 0.0 in the metric column and True in ``<metric>:dropped``; no value is
ever NaN, so significance tests can pair queries exactly.

>>> import numpy as np
>>> df = evaluate(np.array([0.9, 0.1, 0.5]), np.array([0.0, 2.0, 1.0]), np.array([0, 3]),
...               ["ndcg@1", "mrr", "arp"])
>>> list(df.columns)
['query', 'ndcg@1', 'mrr', 'arp', 'ndcg@1:dropped', 'mrr:dropped', 'arp:dropped']
>>> round(float(df["mrr"][0]), 4), round(float(df["arp"][0]), 4)  # first relevant at rank 2
(0.5, 2.6667)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import gammaln

EMPTY_QUERY_CHOICES = ("one", "zero", "drop")
TIES_CHOICES = ("stable", "expected")
# metric kinds where a smaller value is better (ARP, the average relevance position)
LOWER_IS_BETTER = ("arp",)
VALID_FORMS = (
    "ndcg@K (K a positive integer or 'max'), mrr, opa, opa_arf, arp, recall@M@K, map, "
    "precision@K"
)
# labels taking at most this many distinct values use the per-level pair counter (O(N*V));
# others the merge counter (O(N log^2 L)); graded LTR labels have 2-5 levels.
_MAX_LEVELS_FOR_LEVEL_COUNTER = 32

_PATTERN = re.compile(
    r"^(?:(?P<ndcg>ndcg)@(?P<ndcg_k>[1-9]\d*|max)|(?P<prec>precision)@(?P<prec_k>[1-9]\d*)"
    r"|(?P<rec>recall)@(?P<rec_m>[1-9]\d*)@(?P<rec_k>[1-9]\d*)"
    r"|(?P<plain>mrr|opa|opa_arf|arp|map))$"
)


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: ``kind`` in ndcg/precision/recall/mrr/opa/opa_arf/arp/map."""

    name: str
    kind: str
    k: int | None = None  # None for ndcg@max
    m: int | None = None  # recall@m@k only


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name; unknown names raise ``ValueError`` listing the valid forms.

    >>> parse_metric("recall@30@15")
    MetricSpec(name='recall@30@15', kind='recall', k=15, m=30)
    >>> parse_metric("ndcg@max").k is None
    True
    """
    match = _PATTERN.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"unknown metric {name!r}; valid forms: {VALID_FORMS}")
    g = match.groupdict()
    if g["ndcg"]:
        k = None if g["ndcg_k"] == "max" else int(g["ndcg_k"])
        return MetricSpec(name, "ndcg", k)
    if g["prec"]:
        return MetricSpec(name, "precision", int(g["prec_k"]))
    if g["rec"]:
        return MetricSpec(name, "recall", int(g["rec_k"]), int(g["rec_m"]))
    return MetricSpec(name, g["plain"])


def higher_is_better(metric: str) -> bool:
    """Direction of a metric: False only for the kinds in :data:`LOWER_IS_BETTER` (``arp``).

    >>> higher_is_better("ndcg@10"), higher_is_better("arp")
    (True, False)
    """
    return parse_metric(metric).kind not in LOWER_IS_BETTER


def conventions_caption(empty_query: str = "one", ties: str = "stable") -> str:
    """One-paragraph caption naming every metric convention, for table footers.

    >>> conventions_caption().startswith("Gain 2^y-1")
    True
    """
    _check_choice("empty_query", empty_query, EMPTY_QUERY_CHOICES)
    _check_choice("ties", ties, TIES_CHOICES)
    empty = {
        "one": "score 1 (LightGBM/XGBoost convention)",
        "zero": "score 0 (TF-Ranking convention)",
        "drop": "are excluded (Qin et al. 2021)",
    }[empty_query]
    tie_text = {
        "stable": "score ties are broken by document order in the data file (LightGBM's "
        "stable sort)",
        "expected": "score ties are averaged exactly over all their orders (McSherry & "
        "Najork 2008; tied pairs count 1/2 in OPA)",
    }[ties]
    return (
        "Gain 2^y-1, discount 1/log2(1+rank); NDCG@k sums over the available items when a "
        f"list is shorter than k; queries without any relevant document {empty} in NDCG and "
        f"MAP; {tie_text}. MRR, MAP and precision use binary relevance (label >= 1); MRR is 0 "
        "without a relevant document. OPA averages over queries with at least one pair of "
        "different labels, OPA_ARF over queries with at least two documents, ARP (lower is "
        "better) over queries with a positive label sum. Recall@m@k shares the k-th place "
        "equally among label ties and divides by min(k, list length)."
    )


def evaluate(
    scores: np.ndarray,
    labels: np.ndarray,
    query_offsets: np.ndarray,
    metrics: Sequence[str],
    empty_query: str = "one",
    ties: str = "stable",
    query_ids: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per-query metric values for a whole split; see the module docstring for definitions.

    Returns a DataFrame with one row per query: ``query`` (int64; ``query_ids`` if given,
    else ``0..Q-1``), one float64 column per requested metric (named exactly as requested)
    and one bool column ``"<metric>:dropped"`` per metric (value 0.0 where dropped).

    >>> import numpy as np
    >>> df = evaluate(np.array([1.0, 1.0]), np.array([0.0, 1.0]), np.array([0, 2]),
    ...               ["opa"], ties="expected")
    >>> float(df["opa"][0])
    0.5
    """
    _check_choice("empty_query", empty_query, EMPTY_QUERY_CHOICES)
    _check_choice("ties", ties, TIES_CHOICES)
    if isinstance(metrics, str):
        metrics = [metrics]
    specs = [parse_metric(m) for m in metrics]
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"metric(s) requested twice: {duplicates}")
    scores, labels, offsets = _validate(scores, labels, query_offsets)
    n_queries = len(offsets) - 1
    if query_ids is None:
        qids = np.arange(n_queries, dtype=np.int64)
    else:
        qids = np.asarray(query_ids)
        if qids.shape != (n_queries,) or not np.issubdtype(qids.dtype, np.integer):
            raise ValueError(
                f"query_ids must be {n_queries} integers (one per query), got shape "
                f"{qids.shape} and dtype {qids.dtype}"
            )
        qids = qids.astype(np.int64)
    ranking = _Ranking(scores, labels, offsets, ties)
    values: dict[str, np.ndarray] = {}
    dropped: dict[str, np.ndarray] = {}
    for spec in specs:
        value, drop = _COMPUTE[spec.kind](ranking, spec, empty_query)
        values[spec.name] = np.where(drop, 0.0, value).astype(np.float64)
        dropped[spec.name + ":dropped"] = drop.astype(bool)
    return pd.DataFrame({"query": qids, **values, **dropped})


def summarize(frame: pd.DataFrame, metrics: Sequence[str] | None = None) -> dict[str, float]:
    """Mean of each metric over the queries it did not drop (NaN if it dropped all).

    >>> import numpy as np
    >>> df = evaluate(np.array([2.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]),
    ...               np.array([0, 2, 3]), ["mrr", "arp"])
    >>> summarize(df)
    {'mrr': 0.5, 'arp': 1.0}
    """
    if metrics is None:
        metrics = [c for c in frame.columns if c != "query" and not c.endswith(":dropped")]
    out = {}
    for name in metrics:
        keep = ~frame[name + ":dropped"].to_numpy(bool)
        out[name] = float(frame[name].to_numpy()[keep].mean()) if keep.any() else float("nan")
    return out


# ----------------------------------------------------------------------------------------
# input validation


def _check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{key}={value!r} is not one of {list(choices)}")


def _validate(scores, labels, query_offsets):
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(query_offsets)
    if scores.ndim != 1 or labels.shape != scores.shape:
        raise ValueError(
            f"scores and labels must be 1-D of equal length, got {scores.shape} and "
            f"{labels.shape}"
        )
    if offsets.ndim != 1 or len(offsets) < 1 or not np.issubdtype(offsets.dtype, np.integer):
        raise ValueError("query_offsets must be a 1-D integer array [Q+1] starting at 0")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0 or offsets[-1] != len(scores) or np.any(np.diff(offsets) < 0):
        raise ValueError(
            f"query_offsets must start at 0, never decrease and end at the number of "
            f"documents ({len(scores)}); got first={offsets[0]}, last={offsets[-1]}"
        )
    bad = np.flatnonzero(np.isnan(scores))
    if bad.size:
        q = int(np.searchsorted(offsets, bad[0], side="right") - 1)
        raise ValueError(
            f"scores contain NaN ({bad.size} values; first at row {bad[0]}, query {q})"
        )
    bad = np.flatnonzero(~np.isfinite(labels) | (labels < 0))
    if bad.size:
        raise ValueError(
            f"labels must be finite and >= 0; row {bad[0]} has {labels[bad[0]]!r} "
            f"({bad.size} bad values)"
        )
    return scores, labels, offsets


# ----------------------------------------------------------------------------------------
# the sorted layout shared by all metrics

# cut-offs up to this use a dense [Q, k] "head" of each ranked list instead of masks over N
_HEAD_MAX = 64


def _descending_key32(x: np.ndarray) -> np.ndarray:
    """uint64 keys in [0, 2^32) that increase as the float32 value ``x`` decreases.

    IEEE bits ordered as integers: flip all bits of negatives, set the sign bit of
    positives; ``x + 0.0`` folds ``-0.0`` into ``+0.0`` so the two tie.
    """
    bits = (x + 0.0).astype(np.float32).view(np.uint32)
    ascending = np.where(bits >> np.uint32(31) == 1, ~bits, bits | np.uint32(0x80000000))
    return (np.uint32(0xFFFFFFFF) - ascending).astype(np.uint64)


def _order_within_queries(key_desc, qidx, start, pos, n_queries, max_len) -> np.ndarray:
    """Permutation sorting items by (query, -key, position within the query).

    Fast path for float32-representable keys (model scores, graded labels): pack
    (query, key, position) into one uint64 and ``np.sort`` it -- the position in the low
    bits makes ties stable and is all that has to be read back, because query blocks keep
    their place. Otherwise: a stable global argsort, then an argsort of unique composite
    (query, global rank) keys.
    """
    n = len(key_desc)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    pos_bits = int(max_len - 1).bit_length()
    q_bits = int(n_queries - 1).bit_length()
    with np.errstate(over="ignore"):  # values beyond float32 become inf and fail the test
        exact32 = np.array_equal(key_desc.astype(np.float32), key_desc)
    if q_bits + 32 + pos_bits <= 64 and exact32:
        packed = (_descending_key32(key_desc) << np.uint64(pos_bits)) | pos.astype(np.uint64)
        if q_bits:
            packed |= qidx.astype(np.uint64) << np.uint64(32 + pos_bits)
        packed.sort()
        return start + (packed & np.uint64((1 << pos_bits) - 1)).astype(np.int64)
    glob = np.argsort(-key_desc, kind="stable")
    global_rank = np.empty(n, dtype=np.int64)
    global_rank[glob] = np.arange(n, dtype=np.int64)
    return np.argsort(qidx * n + global_rank)


class _Ranking:
    """Labels in predicted order plus lazily built helpers (ideal order, tie groups)."""

    def __init__(self, scores, labels, offsets, ties):
        self.ties = ties
        self.offsets = offsets
        self.n_queries = len(offsets) - 1
        self.lengths = np.diff(offsets)
        self.n = len(scores)
        self.max_len = int(self.lengths.max()) if self.n_queries else 0
        self.qidx = np.repeat(np.arange(self.n_queries, dtype=np.int64), self.lengths)
        self._item_start = offsets[:-1][self.qidx]
        self.pos = np.arange(self.n, dtype=np.int64) - self._item_start  # 0-based
        nonempty = self.lengths > 0
        self._nonempty, self._all_nonempty = nonempty, bool(nonempty.all())
        self._starts = offsets[:-1][nonempty]
        # first index of each query, clipped so empty (trailing) queries index safely
        self.query_starts = offsets[:-1].clip(max=max(self.n - 1, 0))
        self._labels = labels
        order = self._order(scores)
        self.y = labels[order]
        self.s = scores[order]
        self.rank = self.pos + 1.0
        self.rel = (self.y >= 1.0).astype(np.float64)

    def _order(self, key: np.ndarray) -> np.ndarray:
        return _order_within_queries(key, self.qidx, self._item_start, self.pos,
                                     self.n_queries, max(self.max_len, 1))

    # -- segment reductions ---------------------------------------------------------------
    def segsum(self, x: np.ndarray) -> np.ndarray:
        """Per-query sum of a per-item array, float64 ``[Q]`` (0 for empty queries)."""
        if self.n == 0:
            return np.zeros(self.n_queries)
        sums = np.add.reduceat(np.asarray(x, dtype=np.float64), self._starts)
        if self._all_nonempty:
            return sums
        out = np.zeros(self.n_queries)
        out[self._nonempty] = sums
        return out

    def top_sum(self, x: np.ndarray, k: int | None, discounted: bool = False) -> np.ndarray:
        """Per query: sum of ``x`` (times the DCG discount) over ranks ``<= k``."""
        if k is None or k >= self.max_len:
            return self.segsum(x * self.discount if discounted else x)
        if k <= _HEAD_MAX:
            cols = np.arange(k)
            idx = np.minimum(self.offsets[:-1, None] + cols, max(self.n - 1, 0))
            head = np.where(cols < self.lengths[:, None], x[idx] if self.n else 0.0, 0.0)
            if discounted:
                head = head * _discount_table(k)
            return head.sum(axis=1)
        w = x * self.discount if discounted else x
        return self.segsum(np.where(self.rank <= k, w, 0.0))

    @cached_property
    def discount(self) -> np.ndarray:
        """``1 / log2(1 + rank)`` per item."""
        return _discount_table(max(self.max_len, 1))[self.pos]

    # -- label views -------------------------------------------------------------------------
    @cached_property
    def y_ideal(self) -> np.ndarray:
        """Labels sorted descending within each query (the ideal ranking)."""
        return self._labels[self._order(self._labels)]

    @cached_property
    def gain_expected(self) -> np.ndarray:
        return self.expect(np.exp2(self.y) - 1.0)

    @cached_property
    def gain_ideal(self) -> np.ndarray:
        return np.exp2(self.y_ideal) - 1.0

    @cached_property
    def rel_expected(self) -> np.ndarray:
        return self.expect(self.rel)

    @cached_property
    def codes(self) -> tuple[np.ndarray, int]:
        """Dense integer codes of the labels (predicted order) and the number of codes."""
        y = self.y
        if self.n and np.all(y == np.floor(y)) and y.max() < 1024:
            return y.astype(np.int64), int(y.max()) + 1
        uniq, inv = np.unique(y, return_inverse=True)
        return inv.astype(np.int64).reshape(-1), max(len(uniq), 1)

    # -- score-tie groups (consecutive items of one query with equal scores) -------------
    @cached_property
    def group_starts(self) -> np.ndarray:
        """Index (in the sorted layout) of each tie group's first item."""
        new = np.ones(self.n, dtype=bool)
        new[1:] = (self.s[1:] != self.s[:-1]) | (self.qidx[1:] != self.qidx[:-1])
        return np.flatnonzero(new)

    @cached_property
    def group_size(self) -> np.ndarray:
        return np.diff(np.r_[self.group_starts, self.n]).astype(np.int64)

    @cached_property
    def gid(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.group_starts)), self.group_size)

    def group_sum(self, x: np.ndarray) -> np.ndarray:
        return np.add.reduceat(np.asarray(x, dtype=np.float64), self.group_starts)

    def expect(self, h: np.ndarray) -> np.ndarray:
        """``h`` itself (stable ties) or its mean over each item's score-tie group."""
        if self.ties == "stable" or self.n == 0:
            return h
        return np.repeat(self.group_sum(h) / self.group_size, self.group_size)

    @cached_property
    def pair_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shared by opa and opa_arf: (correct, label-tied, all) pairs per query."""
        return _pair_counts(self)


def _discount_table(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


# ----------------------------------------------------------------------------------------
# segment helpers


def _exclusive_prefix(x: np.ndarray, seg: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sum of ``x`` over the earlier items of the same segment (segments are contiguous;
    ``starts[s]`` is the first index of segment ``s``)."""
    if len(x) == 0:
        return np.zeros(0, dtype=np.float64)
    excl = np.cumsum(x) - x
    return excl - excl[starts][seg]


def _greater_before_totals(codes, n_codes, seg, starts, n_seg) -> np.ndarray:
    """Per segment: number of pairs (a before b) with ``code_a > code_b``.

    Few levels: for each level ``v`` one cumulative count of the items above ``v``, read at
    the items whose code is ``v`` -- O(N * levels). Many levels: merge counting.
    """
    if len(codes) == 0:
        return np.zeros(n_seg)
    if n_codes > _MAX_LEVELS_FOR_LEVEL_COUNTER:
        per_item = _greater_before_merge(codes, n_codes, seg, starts)
        return np.bincount(seg, weights=per_item, minlength=n_seg)
    by_code = np.argsort(codes.astype(np.int16), kind="stable")  # counting sort
    bounds = np.searchsorted(codes[by_code], np.arange(n_codes + 1))
    total = np.zeros(n_seg)
    for v in range(n_codes - 1):  # loop over label levels, not queries
        greater = codes > v
        above = np.cumsum(greater)  # an item with code v does not count itself
        base = above[starts] - greater[starts]
        items = by_code[bounds[v]: bounds[v + 1]]
        s = seg[items]
        total += np.bincount(s, weights=above[items] - base[s], minlength=n_seg)
    return total


def _greater_before_merge(codes, n_codes, seg, starts) -> np.ndarray:
    """Per item: earlier items of its segment with a larger code, by bottom-up merge
    counting -- at width ``w`` every right block counts its left sibling's larger codes
    with one sort; O(N log N) per level, log2(longest segment) levels."""
    n = len(codes)
    pos = np.arange(n, dtype=np.int64) - starts[seg]
    out = np.zeros(n, dtype=np.float64)
    width = 1
    max_len = int(pos.max()) + 1
    while width < max_len:
        block = pos // width
        is_left = (block & 1) == 0
        pair_id = seg * (max_len // (2 * width) + 1) + (block >> 1)
        pair_new = np.ones(n, dtype=bool)
        pair_new[1:] = pair_id[1:] != pair_id[:-1]
        run = np.cumsum(pair_new) - 1  # contiguous id of (segment, block pair)
        # within a run: larger codes first; among equal codes right items before left ones
        key = (run * n_codes + (n_codes - 1 - codes)) * 2 + is_left
        order = np.argsort(key, kind="stable")
        run_sorted = run[order]
        run_new = np.r_[True, run_sorted[1:] != run_sorted[:-1]]
        before = _exclusive_prefix(is_left[order].astype(np.float64),
                                   np.cumsum(run_new) - 1, np.flatnonzero(run_new))
        right = ~is_left[order]
        out[order[right]] += before[right]
        width *= 2
    return out


def _tied_pairs(seg, codes, n_codes, n_seg) -> np.ndarray:
    """Per segment: number of unordered pairs with equal codes, sum_v C(count_v, 2)."""
    if len(codes) == 0:
        return np.zeros(n_seg)
    key = seg * n_codes + codes
    if n_seg * n_codes <= 4 * len(codes) + 1024:
        c = np.bincount(key, minlength=n_seg * n_codes).astype(np.float64)
        return (c * (c - 1) / 2).reshape(n_seg, n_codes).sum(axis=1)
    uniq, c = np.unique(key, return_counts=True)
    c = c.astype(np.float64)
    return np.bincount(uniq // n_codes, weights=c * (c - 1) / 2, minlength=n_seg)


def _empty(normaliser_zero: np.ndarray, value: np.ndarray, empty_query: str):
    """Apply the empty-query convention where the normaliser vanishes."""
    if empty_query == "one":
        return np.where(normaliser_zero, 1.0, value), np.zeros_like(normaliser_zero)
    if empty_query == "zero":
        return np.where(normaliser_zero, 0.0, value), np.zeros_like(normaliser_zero)
    return np.where(normaliser_zero, 0.0, value), normaliser_zero.copy()


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return num / np.where(den == 0, 1.0, den)


# ----------------------------------------------------------------------------------------
# the metrics: each returns (value [Q], dropped [Q] bool)


def _ndcg(r: _Ranking, spec: MetricSpec, empty_query: str):
    if r.n and r.y.max() >= 1000:
        raise ValueError(f"labels up to {r.y.max()!r}: the gain 2^y - 1 of {spec.name} "
                         "overflows; rescale the labels (graded labels are small integers)")
    dcg = r.top_sum(r.gain_expected, spec.k, discounted=True)
    ideal = r.top_sum(r.gain_ideal, spec.k, discounted=True)
    return _empty(ideal <= 0, _safe_div(dcg, ideal), empty_query)


def _precision(r: _Ranking, spec: MetricSpec, empty_query: str):
    return r.top_sum(r.rel_expected, spec.k) / spec.k, np.zeros(r.n_queries, dtype=bool)


def _recall(r: _Ranking, spec: MetricSpec, empty_query: str):
    k_eff = np.minimum(spec.k, r.lengths)
    nonempty = k_eff > 0
    kth = np.zeros(r.n_queries)
    kth[nonempty] = r.y_ideal[(r.offsets[:-1] + k_eff - 1)[nonempty]]
    kth_item = kth[r.qidx]
    is_above, is_tied = r.y > kth_item, r.y == kth_item
    share = _safe_div(k_eff - r.segsum(is_above), r.segsum(is_tied))
    w = np.where(is_above, 1.0, np.where(is_tied, share[r.qidx], 0.0))
    hits = r.top_sum(r.expect(w), spec.m)
    return _safe_div(hits, k_eff), ~nonempty


def _arp(r: _Ranking, spec: MetricSpec, empty_query: str):
    total = r.segsum(r.y)
    value = _safe_div(r.segsum(r.expect(r.y) * r.rank), total)
    return value, total <= 0


def _mrr(r: _Ranking, spec: MetricSpec, empty_query: str):
    value = np.zeros(r.n_queries)
    idx = np.flatnonzero(r.rel)
    first = idx[np.r_[True, r.qidx[idx][1:] != r.qidx[idx][:-1]]] if idx.size else idx
    if r.ties == "stable":
        value[r.qidx[first]] = 1.0 / r.rank[first]
        return value, np.zeros(r.n_queries, dtype=bool)
    # expected: the first relevant item lies in the first tie group holding one; with n
    # items and m relevant in that group starting at rank a, P(first at a+t) =
    # C(n-1-t, m-1) / C(n, m) for t = 0..n-m.
    gid = r.gid
    n_rel = r.group_sum(r.rel)
    is_first_group = np.zeros(len(r.group_starts), dtype=bool)
    is_first_group[gid[first]] = True
    items = np.flatnonzero(is_first_group[gid])
    g = gid[items]
    n, m = r.group_size[g].astype(np.float64), n_rel[g]
    t = r.rank[items] - r.rank[r.group_starts[g]]
    possible = t <= n - m
    a_, b_ = np.maximum(n - 1 - t, 0), np.maximum(m - 1, 0)
    log_p = (
        gammaln(a_ + 1) - gammaln(b_ + 1) - gammaln(np.maximum(a_ - b_, 0) + 1)
        - (gammaln(n + 1) - gammaln(m + 1) - gammaln(n - m + 1))
    )
    p = np.where(possible, np.exp(log_p), 0.0)
    value = np.bincount(r.qidx[items], weights=p / r.rank[items], minlength=r.n_queries)
    return value, np.zeros(r.n_queries, dtype=bool)


def _map(r: _Ranking, spec: MetricSpec, empty_query: str):
    n_rel = r.segsum(r.rel)
    rel_before = _exclusive_prefix(r.rel, r.qidx, r.query_starts)
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
        contrib = (m / n) * (c + 1.0 + t * _safe_div(m - 1.0, n - 1.0)) / r.rank
    value = _safe_div(r.segsum(contrib), n_rel)
    return _empty(n_rel <= 0, value, empty_query)


def _pair_counts(r: _Ranking):
    """(correct, tied_label, all) pair counts per query; see ``_opa``."""
    codes, n_codes = r.codes
    n = r.lengths.astype(np.float64)
    all_pairs = n * (n - 1) / 2
    tied_label = _tied_pairs(r.qidx, codes, n_codes, r.n_queries)
    correct = _greater_before_totals(codes, n_codes, r.qidx, r.query_starts, r.n_queries)
    if r.ties == "expected" and r.n:
        # remove the pairs inside score-tie groups (ordered by position) and add 1/2 for
        # each tied-score pair with different labels
        gid, gs, n_groups = r.gid, r.group_starts, len(r.group_starts)
        within = _greater_before_totals(codes, n_codes, gid, gs, n_groups)
        gn = r.group_size.astype(np.float64)
        g_distinct = gn * (gn - 1) / 2 - _tied_pairs(gid, codes, n_codes, n_groups)
        correct = correct + np.bincount(r.qidx[gs], weights=0.5 * g_distinct - within,
                                        minlength=r.n_queries)
    return correct, tied_label, all_pairs


def _opa(r: _Ranking, spec: MetricSpec, empty_query: str):
    correct, tied_label, all_pairs = r.pair_counts
    distinct = all_pairs - tied_label
    return _safe_div(correct, distinct), distinct <= 0


def _opa_arf(r: _Ranking, spec: MetricSpec, empty_query: str):
    correct, tied_label, all_pairs = r.pair_counts
    return _safe_div(correct + tied_label, all_pairs), all_pairs <= 0


_COMPUTE = {
    "ndcg": _ndcg,
    "precision": _precision,
    "recall": _recall,
    "arp": _arp,
    "mrr": _mrr,
    "map": _map,
    "opa": _opa,
    "opa_arf": _opa_arf,
}

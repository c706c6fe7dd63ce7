"""The sorted layout every metric reads: one sort per split, then segment reductions.

:class:`Ranking` sorts all queries of a split at once by ``(query, -score, position)``
(:func:`order_within_queries`, one ``np.sort`` of packed integer keys when the scores are
float32-representable) and exposes the labels in predicted order, the ideal order, score-tie
groups and per-query sums (``segsum``, ``top_sum``). The helpers below it count label pairs
per query (``pair_counts``: the OPA family) and apply the empty-query rule. Nothing here
loops over queries.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

# labels taking at most this many distinct values use the per-level pair counter (O(N*V));
# others the merge counter (O(N log^2 L)); graded LTR labels have 2-5 levels.
MAX_LEVELS_FOR_LEVEL_COUNTER = 32


# cut-offs up to this use a dense [Q, k] "head" of each ranked list instead of masks over N
HEAD_MAX = 64


def _descending_key32(x: np.ndarray) -> np.ndarray:
    """uint64 keys in [0, 2^32) that increase as the float32 value ``x`` decreases.

    IEEE bits ordered as integers: flip all bits of negatives, set the sign bit of
    positives; ``x + 0.0`` folds ``-0.0`` into ``+0.0`` so the two tie.
    """
    bits = (x + 0.0).astype(np.float32).view(np.uint32)
    ascending = np.where(bits >> np.uint32(31) == 1, ~bits, bits | np.uint32(0x80000000))
    return (np.uint32(0xFFFFFFFF) - ascending).astype(np.uint64)


def order_within_queries(key_desc, qidx, start, pos, n_queries, max_len) -> np.ndarray:
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


class Ranking:
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
        self.labels = labels  # input order
        order = self._order(scores)
        self.y = labels[order]
        self.s = scores[order]
        self.rank = self.pos + 1.0
        self.rel = (self.y >= 1.0).astype(np.float64)

    def _order(self, key: np.ndarray) -> np.ndarray:
        return order_within_queries(key, self.qidx, self._item_start, self.pos,
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
        if k <= HEAD_MAX:
            cols = np.arange(k)
            idx = np.minimum(self.offsets[:-1, None] + cols, max(self.n - 1, 0))
            head = np.where(cols < self.lengths[:, None], x[idx] if self.n else 0.0, 0.0)
            if discounted:
                head = head * discount_table(k)
            return head.sum(axis=1)
        w = x * self.discount if discounted else x
        return self.segsum(np.where(self.rank <= k, w, 0.0))

    @cached_property
    def discount(self) -> np.ndarray:
        """``1 / log2(1 + rank)`` per item."""
        return discount_table(max(self.max_len, 1))[self.pos]

    # -- label views -------------------------------------------------------------------------
    @cached_property
    def y_ideal(self) -> np.ndarray:
        """Labels sorted descending within each query (the ideal ranking)."""
        return self.labels[self._order(self.labels)]

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
        """Shared by opa and opa_arf: (correct, label-tied, all) pairs per query under the tie rule."""
        return pair_counts(self)


def discount_table(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


# ----------------------------------------------------------------------------------------
# segment helpers


def exclusive_prefix(x: np.ndarray, seg: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sum of ``x`` over the earlier items of the same segment (segments are contiguous;
    ``starts[s]`` is the first index of segment ``s``)."""
    if len(x) == 0:
        return np.zeros(0, dtype=np.float64)
    excl = np.cumsum(x) - x
    return excl - excl[starts][seg]


def greater_before_totals(codes, n_codes, seg, starts, n_seg) -> np.ndarray:
    """Per segment: number of pairs (a before b) with ``code_a > code_b``.

    Few levels: for each level ``v`` one cumulative count of the items above ``v``, read at
    the items whose code is ``v`` -- O(N * levels). Many levels: merge counting.
    """
    if len(codes) == 0:
        return np.zeros(n_seg)
    if n_codes > MAX_LEVELS_FOR_LEVEL_COUNTER:
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
        before = exclusive_prefix(is_left[order].astype(np.float64),
                                   np.cumsum(run_new) - 1, np.flatnonzero(run_new))
        right = ~is_left[order]
        out[order[right]] += before[right]
        width *= 2
    return out


def tied_pairs(seg, codes, n_codes, n_seg) -> np.ndarray:
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


def apply_empty(normaliser_zero: np.ndarray, value: np.ndarray, empty_query: str):
    """Apply the empty-query convention where the normaliser vanishes."""
    if empty_query == "one":
        return np.where(normaliser_zero, 1.0, value), np.zeros_like(normaliser_zero)
    if empty_query == "zero":
        return np.where(normaliser_zero, 0.0, value), np.zeros_like(normaliser_zero)
    return np.where(normaliser_zero, 0.0, value), normaliser_zero.copy()


def safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return num / np.where(den == 0, 1.0, den)


def pair_counts(r: Ranking, tied_scores: str | None = None):
    """``(correct, tied_label, all)`` pair counts per query, the OPA family's numerators.

    ``all`` = n(n-1)/2; ``tied_label`` = pairs with equal labels; ``correct`` = pairs whose
    higher label is ranked above. A pair of *tied scores* with different labels counts as the
    ranking's tie rule says (``tied_scores=None``: ``r.ties``): ``stable`` by file order,
    ``expected`` 1/2, ``wrong`` 0 (TF-Ranking's strict ``s_i > s_j``).
    """
    rule = r.ties if tied_scores is None else tied_scores
    codes, n_codes = r.codes
    n = r.lengths.astype(np.float64)
    all_pairs = n * (n - 1) / 2
    tied_label = tied_pairs(r.qidx, codes, n_codes, r.n_queries)
    correct = greater_before_totals(codes, n_codes, r.qidx, r.query_starts, r.n_queries)
    if rule != "stable" and r.n:
        # remove the pairs inside score-tie groups (counted by position above) and credit each
        # tied-score pair with different labels 1/2 (expected) or nothing (wrong)
        gid, gs, n_groups = r.gid, r.group_starts, len(r.group_starts)
        within = greater_before_totals(codes, n_codes, gid, gs, n_groups)
        gn = r.group_size.astype(np.float64)
        g_distinct = gn * (gn - 1) / 2 - tied_pairs(gid, codes, n_codes, n_groups)
        credit = 0.5 * g_distinct if rule == "expected" else 0.0
        correct = correct + np.bincount(r.qidx[gs], weights=credit - within, minlength=r.n_queries)
    return correct, tied_label, all_pairs

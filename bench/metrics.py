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
* ``recall@m@k`` and ``recall_arf@m@k``: :math:`\frac{1}{D}\sum_i 1(i \in \text{top-}m)\,w_i`
  with :math:`k' = \min(k, n)`, :math:`w_i = 1` above the :math:`k'`-th largest label and
  ``(k' - #above) / #tied`` for items tied with it (the expectation over random tie-breaks
  of the ground-truth top-k, which for ``n < k`` is the whole list). Two denominators, one
  computation: ``recall`` (the suite's default) takes :math:`D = k'`, so a perfect ranking of
  a list shorter than ``k`` scores 1; ``recall_arf`` is ARF's eq. 4 as printed,
  :math:`D = k`, so such a list scores at most :math:`n/k` (what the ARF tables and figures
  report; ARF's own preprocessing keeps lists of 40..200 items, where the two agree). For
  ``n >= k`` both are eq. 4 exactly. Dropped only for a query without items.
* ``map``: :math:`\frac{1}{R}\sum_{\text{relevant } i} \text{prec@}j_i`; ``R = 0`` is an
  empty query (``empty_query`` as for NDCG; ``one`` equals LightGBM's ``map@k``).
* ``precision@k``: relevant items in the top ``k`` divided by ``k`` (trec_eval: a list
  shorter than ``k`` counts the missing places as non-relevant); never dropped.

Evaluation conventions
----------------------
``convention="default"`` is everything above (what LightGBM, XGBoost and allRank report).
``convention="letor3"`` and ``"letor4"`` equal, per query, LETOR's official evaluation
scripts ``Eval-Score-3.0.pl`` and ``Eval-Score-4.0.pl`` (shipped with the LETOR 3.0 / 4.0
datasets). Both rank by descending score with ties kept in file order (``ties`` must be
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
  0 when ``R = 0``.
* ``mean_ndcg`` (``letor4`` only, the script's MeanNDCG):
  :math:`\frac{1}{n} \sum_{k=1}^{n} \mathrm{NDCG@}k`.

The scripts print NDCG/P up to 16 positions (3.0) or 10 (4.0); other ``k`` follow the same
rules. The scripts key a document by ``(qid, docid)``, so a docid repeated inside one query
would keep only its last line there; LETOR's files have unique docids, and the suite grades
every document it is given. The float64 operations are the scripts' own, in their order (each term
``g * ln(2) / ln(j)`` with the C library's ``log``, sums accumulated position by position),
so the values agree with the scripts' to the last bit, not only to their printed precision.

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

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
from scipy.special import gammaln

from bench.choices import CONVENTIONS, EMPTY_QUERY_CHOICES, TIES_CHOICES  # the choices, one list each

LETOR_SCRIPTS = {"letor3": "Eval-Score-3.0.pl", "letor4": "Eval-Score-4.0.pl"}
# the metric kinds each LETOR convention defines (the scripts compute nothing else)
LETOR_KINDS = {"letor3": ("ndcg", "precision", "map"),
               "letor4": ("ndcg", "precision", "map", "mean_ndcg")}
# metric kinds where a smaller value is better (ARP, the average relevance position)
LOWER_IS_BETTER = ("arp",)
VALID_FORMS = (
    "ndcg@K (K a positive integer or 'max'), mrr, opa, opa_arf, arp, recall@M@K, "
    "recall_arf@M@K (ARF eq. 4: divides by K), map, precision@K, mean_ndcg (convention letor4 only)"
)
# labels taking at most this many distinct values use the per-level pair counter (O(N*V));
# others the merge counter (O(N log^2 L)); graded LTR labels have 2-5 levels.
_MAX_LEVELS_FOR_LEVEL_COUNTER = 32

_PATTERN = re.compile(
    r"^(?:(?P<ndcg>ndcg)@(?P<ndcg_k>[1-9]\d*|max)|(?P<prec>precision)@(?P<prec_k>[1-9]\d*)"
    r"|(?P<rec>recall|recall_arf)@(?P<rec_m>[1-9]\d*)@(?P<rec_k>[1-9]\d*)"
    r"|(?P<plain>mrr|opa|opa_arf|arp|map|mean_ndcg))$"
)


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name: ``kind`` in ndcg/precision/recall/recall_arf/mrr/opa/opa_arf/arp/map/mean_ndcg."""

    name: str
    kind: str
    k: int | None = None  # None for ndcg@max
    m: int | None = None  # recall@m@k and recall_arf@m@k only


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name; unknown names raise ``ValueError`` listing the valid forms.

    >>> parse_metric("recall@30@15")
    MetricSpec(name='recall@30@15', kind='recall', k=15, m=30)
    >>> parse_metric("recall_arf@30@15").kind
    'recall_arf'
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
        return MetricSpec(name, g["rec"], int(g["rec_k"]), int(g["rec_m"]))
    return MetricSpec(name, g["plain"])


def higher_is_better(metric: str) -> bool:
    """Direction of a metric: False only for the kinds in :data:`LOWER_IS_BETTER` (``arp``).

    >>> higher_is_better("ndcg@10"), higher_is_better("arp")
    (True, False)
    """
    return parse_metric(metric).kind not in LOWER_IS_BETTER


# the caption's sentence on each recall variant (module docstring)
RECALL_CAPTIONS = {
    "recall": "Recall@m@k shares the k-th place equally among label ties and divides by min(k, list "
              "length).",
    "recall_arf": "Recall@m@k (ARF) follows ARF eq. 4: it shares the k-th place equally among label ties "
                  "and divides by k, so a list shorter than k scores at most its length / k.",
}


def conventions_caption(empty_query: str = "one", ties: str = "stable", convention: str = "default",
                        metrics: Sequence[str] | None = None) -> str:
    """One-paragraph caption naming every metric convention, for table footers.

    Under a LETOR convention the caption names the official script and its rules
    (``empty_query`` and ``ties`` are fixed by the convention and not repeated).
    ``metrics`` (the table's metric names) selects the recall sentence: one per recall
    variant among them (``recall``: divides by min(k, n); ``recall_arf``: ARF's eq. 4,
    divides by k); without a recall_arf metric (or ``metrics=None``) it is the default's.

    >>> conventions_caption().startswith("Gain 2^y-1")
    True
    >>> conventions_caption(convention="letor4").startswith("LETOR 4.0 evaluation")
    True
    """
    _check_choice("convention", convention, CONVENTIONS)
    if convention != "default":
        return _letor_caption(convention)
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
        "better) over queries with a positive label sum. " + _recall_caption(metrics)
    )


def _recall_caption(metrics: Sequence[str] | None) -> str:
    kinds = {parse_metric(m).kind for m in metrics or ()}
    if "recall_arf" not in kinds:
        return RECALL_CAPTIONS["recall"]
    return " ".join(RECALL_CAPTIONS[k] for k in ("recall", "recall_arf") if k in kinds)


def _letor_caption(convention: str) -> str:
    version = {"letor3": "3.0", "letor4": "4.0"}[convention]
    short = {
        "letor3": "NDCG@k and P@k of a query with fewer than k documents are 0",
        "letor4": "NDCG@k of a query with fewer than k documents is 0, its P@k counts the "
        "missing places as non-relevant; MeanNDCG averages NDCG@1..n over the list length n",
    }[convention]
    return (
        f"LETOR {version} evaluation (convention {convention}, equal per query to the official "
        f"{LETOR_SCRIPTS[convention]}): gain 2^y-1 for labels 0-2, discount 1 at ranks 1 and 2 "
        f"and 1/log2(rank) from rank 3; {short}; P@k and MAP count labels >= 1 as relevant; a "
        "query without any relevant document scores 0 and stays in the mean; score ties are "
        "kept in file order."
    )


def evaluate(
    scores: np.ndarray,
    labels: np.ndarray,
    query_offsets: np.ndarray,
    metrics: Sequence[str],
    empty_query: str = "one",
    ties: str = "stable",
    query_ids: np.ndarray | None = None,
    convention: str = "default",
) -> pd.DataFrame:
    """Per-query metric values for a whole split; see the module docstring for definitions.

    Returns a DataFrame with one row per query: ``query`` (int64; ``query_ids`` if given,
    else ``0..Q-1``), one float64 column per requested metric (named exactly as requested)
    and one bool column ``"<metric>:dropped"`` per metric (value 0.0 where dropped).
    ``convention`` (``default``, ``letor3``, ``letor4``; module docstring) selects the
    evaluation convention; a LETOR convention fixes ``empty_query`` (ignored) and requires
    ``ties="stable"``.

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
    _check_choice("convention", convention, CONVENTIONS)
    scores, labels, offsets = _validate(scores, labels, query_offsets)
    if convention != "default":
        _check_letor(convention, specs, ties, labels, offsets)
    elif any(s.kind == "mean_ndcg" for s in specs):
        raise ValueError("metric 'mean_ndcg' (Eval-Score-4.0.pl's MeanNDCG) is defined only under "
                         "convention 'letor4'")
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
    compute = _COMPUTE if convention == "default" else {
        kind: (lambda r, spec, _e, _f=fn: _f(_LetorTables.of(r, convention), spec))
        for kind, fn in _LETOR_COMPUTE.items()
    }
    values: dict[str, np.ndarray] = {}
    dropped: dict[str, np.ndarray] = {}
    for spec in specs:
        value, drop = compute[spec.kind](ranking, spec, empty_query)
        values[spec.name] = np.where(drop, 0.0, value).astype(np.float64)
        dropped[spec.name + ":dropped"] = drop.astype(bool)
    return pd.DataFrame({"query": qids, **values, **dropped})


def metric_convention(metric: str, convention: str) -> str:
    """The convention ``metric`` is computed under when a dataset's convention is ``convention``.

    A LETOR convention grades the metrics its official script defines (NDCG@k, P@k, MAP and,
    for 4.0, MeanNDCG); the others (MRR, OPA, ARP, recall) keep the default definitions.

    >>> metric_convention("ndcg@10", "letor4"), metric_convention("mrr", "letor4")
    ('letor4', 'default')
    """
    _check_choice("convention", convention, CONVENTIONS)
    if convention == "default":
        return "default"
    return convention if parse_metric(metric).kind in LETOR_KINDS[convention] else "default"


def evaluate_with_convention(
    scores: np.ndarray,
    labels: np.ndarray,
    query_offsets: np.ndarray,
    metrics: Sequence[str],
    convention: str = "default",
    *,
    empty_query: str = "one",
    ties: str = "stable",
    query_ids: np.ndarray | None = None,
) -> pd.DataFrame:
    """:func:`evaluate` with a dataset's convention: each metric under :func:`metric_convention`.

    Same frame as :func:`evaluate` (columns in the requested order); with ``convention =
    "default"`` it is exactly ``evaluate(...)``.

    >>> import numpy as np
    >>> df = evaluate_with_convention(np.array([0.0, 1.0]), np.array([1.0, 0.0]), np.array([0, 2]),
    ...                               ["ndcg@1", "mrr"], "letor4")
    >>> float(df["ndcg@1"][0]), float(df["mrr"][0])
    (0.0, 0.5)
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    groups: dict[str, list[str]] = {}
    for name in metrics:
        groups.setdefault(metric_convention(name, convention), []).append(name)
    frames = [evaluate(scores, labels, query_offsets, names, empty_query=empty_query, ties=ties,
                       query_ids=query_ids, convention=conv) for conv, names in groups.items()]
    if len(frames) == 1:
        return frames[0]
    merged = pd.concat([frames[0]] + [f.drop(columns="query") for f in frames[1:]], axis=1)
    return merged[["query", *metrics, *(m + ":dropped" for m in metrics)]]


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


def _check_letor(convention, specs, ties, labels, offsets) -> None:
    """A LETOR convention's preconditions: its metric kinds, stable ties, labels 0/1/2."""
    script = LETOR_SCRIPTS[convention]
    bad = [s.name for s in specs if s.kind not in LETOR_KINDS[convention]]
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
    """``recall`` and ``recall_arf`` (module docstring): one computation, two denominators."""
    k_eff = np.minimum(spec.k, r.lengths)
    nonempty = k_eff > 0
    kth = np.zeros(r.n_queries)
    kth[nonempty] = r.y_ideal[(r.offsets[:-1] + k_eff - 1)[nonempty]]
    kth_item = kth[r.qidx]
    is_above, is_tied = r.y > kth_item, r.y == kth_item
    share = _safe_div(k_eff - r.segsum(is_above), r.segsum(is_tied))
    w = np.where(is_above, 1.0, np.where(is_tied, share[r.qidx], 0.0))
    hits = r.top_sum(r.expect(w), spec.m)
    denominator = k_eff if spec.kind == "recall" else np.full(r.n_queries, spec.k)
    return _safe_div(hits, denominator), ~nonempty


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


# ----------------------------------------------------------------------------------------
# the LETOR conventions (Eval-Score-3.0.pl / Eval-Score-4.0.pl)


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
class _LetorTables:
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
    def of(cls, r: _Ranking, convention: str) -> _LetorTables:
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


def _letor_ndcg(t: _LetorTables, spec: MetricSpec):
    k = t.lengths if spec.k is None else np.full(len(t.lengths), spec.k, dtype=np.int64)
    dcg, ideal = t.at(t.dcg, k), t.at(t.ideal, k)
    value = np.where((k <= t.lengths) & (ideal != 0), dcg / np.where(ideal != 0, ideal, 1.0), 0.0)
    return value, np.zeros(len(k), dtype=bool)


def _letor_precision(t: _LetorTables, spec: MetricSpec):
    k = np.full(len(t.lengths), spec.k, dtype=np.int64)
    value = t.at(t.hits, np.minimum(k, t.lengths)) / spec.k
    if t.convention == "letor3":
        value = np.where(k <= t.lengths, value, 0.0)
    return value, np.zeros(len(k), dtype=bool)


def _letor_map(t: _LetorTables, spec: MetricSpec):
    n_pos = t.hits.shape[1]
    rel = np.diff(t.hits, axis=1, prepend=0.0)
    precisions = rel * t.hits / np.arange(1, n_pos + 1, dtype=np.float64)
    total = np.cumsum(precisions, axis=1)[:, -1]
    n_rel = t.hits[:, -1]
    value = np.where(n_rel > 0, total / np.where(n_rel > 0, n_rel, 1.0), 0.0)
    return value, np.zeros(len(value), dtype=bool)


def _letor_mean_ndcg(t: _LetorTables, spec: MetricSpec):
    total = np.cumsum(t.ndcg_columns(), axis=1)[:, -1]
    value = np.where(t.lengths > 0, total / np.maximum(t.lengths, 1), 0.0)
    return value, np.zeros(len(value), dtype=bool)


_LETOR_COMPUTE = {
    "ndcg": _letor_ndcg,
    "precision": _letor_precision,
    "map": _letor_map,
    "mean_ndcg": _letor_mean_ndcg,
}


_COMPUTE = {
    "ndcg": _ndcg,
    "precision": _precision,
    "recall": _recall,
    "recall_arf": _recall,
    "arp": _arp,
    "mrr": _mrr,
    "map": _map,
    "opa": _opa,
    "opa_arf": _opa_arf,
}

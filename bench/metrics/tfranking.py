r"""TF-Ranking's metrics, as ``tensorflow_ranking/python/metrics_impl.py`` computes them (convention ``tfranking``).

PiRank's evaluation code and ARF's baselines compute their metrics with TF-Ranking. Each of its
metrics returns a per-list value and a per-list weight, and the reported number is the
weighted mean over every list evaluated (``tf.compat.v1.metrics.mean(value, weight)``, one
running total over all batches). With unit example weights (the papers set none):

* **Ties.** Lists are sorted by ``utils.sort_by_scores`` with ``shuffle_ties=True``: tied
  scores (compared in float32) are put in a random order. The suite reports the exact
  expectation over those orders (``ties="expected"``) for every metric of the frame.
* **NDCG@k, DCG@k** (gain :math:`2^y - 1`, discount :math:`\ln 2 / \ln(1 + j)`): a list
  shorter than k sums what exists; NDCG's ``divide_no_nan`` scores a list without a relevant
  document 0, and its weight is 1 (``_per_example_weights_to_per_list_weights`` gives such a
  list the average weight, 1): the query stays in the mean with 0.
* **MRR, MRR@k**: 1 / rank of the first item with :math:`y \ge 1` in the top k, else 0;
  weight 1.
* **MAP, MAP@k**: the precisions at the relevant ranks up to k, divided by the number of
  relevant items in the whole list (0 without one); weight 1.
* **P@k**: relevant items in the top k divided by :math:`\min(k, n)` (``valid_topn``), 0 for
  an empty list; weight 1.
* **OPA** (pooled): per list, the pairs with :math:`y_i > y_j` and :math:`s_i > s_j` over the
  pairs with :math:`y_i > y_j`; weight = that number of pairs. A pair with tied scores is
  wrong (the strict ``pair_pred_diff > 0``). The weighted mean is the pooled accuracy over
  the pairs of all lists. A list without such a pair has weight 0 (dropped here).
* **ARP** (pooled): per list :math:`\sum_j y_{\pi_j} j / \sum_j y_j`, weight
  :math:`\sum_j y_j`: the weighted mean is :math:`\sum_q \sum_j y j / \sum_q \sum_j y`, every
  relevant document of every query weighted by its label. A list whose labels are all 0
  scores 0 with weight 0: it enters the mean with no weight, which is the same as leaving it
  out (dropped here, as under the default convention).

Pooled metrics carry their weights in the per-query frame (``<metric>:weight``); the mean
over queries and the paired tests use them (:func:`bench.metrics.summarize`,
:mod:`bench.stats`). Metrics TF-Ranking does not define (recall@m@k, OPA_ARF, ERR, RBP) keep
the suite's definitions, ranked by TF-Ranking's tie rule. The padding and masking of
TF-Ranking's dense batches change no value: padded items get label 0 and sort last, and the
suite evaluates every list whole.
"""

from __future__ import annotations

import numpy as np

from bench.metrics import default
from bench.metrics.names import MetricSpec
from bench.metrics.ranking import Ranking, pair_counts, safe_div

TOOL = "TF-Ranking"
USED_BY = "the evaluation code of PiRank and of ARF's baselines"
SOURCE = "tensorflow_ranking/python/metrics_impl.py"
TIES = "expected"  # sort_by_scores(shuffle_ties=True): the expectation over the random tie orders
EMPTY_QUERY = "zero"  # divide_no_nan, per-list weight 1


def precision(r: Ranking, spec: MetricSpec, empty_query: str):
    """P@k over ``min(k, n)`` (TF-Ranking's ``valid_topn``)."""
    hits = r.top_sum(r.rel_expected, spec.k)
    return safe_div(hits, np.minimum(spec.k, r.lengths).astype(np.float64)), np.zeros(r.n_queries, dtype=bool)


def opa(r: Ranking, spec: MetricSpec, empty_query: str):
    """Per query: strictly correct pairs / pairs with different labels; weight: those pairs."""
    correct, tied_label, all_pairs = pair_counts(r, tied_scores="wrong")
    pairs = all_pairs - tied_label
    return safe_div(correct, pairs), pairs <= 0, pairs


def arp(r: Ranking, spec: MetricSpec, empty_query: str):
    """Per query: the default ARP; weight: the query's label sum."""
    value, dropped = default.arp(r, spec, empty_query)
    return value, dropped, r.segsum(r.y)


#: the kinds whose per-list weight is not 1: their frames carry ``<metric>:weight``
POOLED = ("opa", "arp")
#: the metric kinds TF-Ranking itself defines, and how
OWN = {"ndcg": default.ndcg, "dcg": default.dcg, "mrr": default.mrr, "map": default.map_,
       "precision": precision, "opa": opa, "arp": arp}

#: the caption's sentences where TF-Ranking differs from the suite's definitions (bench.metrics.captions)
CAPTION_TIES = ("Score ties are put in a random order, as TF-Ranking's sort does; each value is the exact "
                "expectation over those orders.")
CAPTION_EMPTY = ("Queries without any relevant document score 0 in {metrics} and stay in the mean "
                 "(TF-Ranking's safe division).")
CAPTIONS = {
    "precision": "P@k divides by min(k, list length).",
    "opa": ("OPA pools the pairs of all queries: correctly ordered pairs over all pairs with different labels, "
            "a pair with tied scores counted as wrong."),
    "arp": ("ARP (lower is better) pools all queries, each relevant document weighted by its label: the sum of "
            "label x rank over the sum of labels (a query whose labels are all 0 has no weight)."),
}
CAPTION_POOLED = ("Each query of a pooled metric carries its weight (its pairs, its label sum) into the paired "
                  "tests and confidence intervals, as into the mean.")

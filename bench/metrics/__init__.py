r"""Vectorised per-query ranking metrics: the ONLY metric code path of the suite.

Every metric is computed for all queries of a split at once from flat arrays
(``scores [N]``, ``labels [N]``, ``query_offsets [Q+1]``; query ``q`` is the rows
``offsets[q]:offsets[q+1]``). The documents are sorted once by ``(query, -score,
position)``; every metric is then a handful of segment reductions (``np.bincount`` over the
query index, cumulative sums) -- no Python loop over queries.

Modules: :mod:`~bench.metrics.names` (the metric grammar), :mod:`~bench.metrics.ranking`
(the sorted layout), :mod:`~bench.metrics.default` and :mod:`~bench.metrics.cascade` (the
suite's definitions), :mod:`~bench.metrics.letor`, :mod:`~bench.metrics.tfranking`,
:mod:`~bench.metrics.allrank` (the conventions of LETOR's scripts, TF-Ranking and allRank),
:mod:`~bench.metrics.conventions` (their registry), :mod:`~bench.metrics.grade`
(:func:`evaluate`, :func:`summarize`), :mod:`~bench.metrics.captions` (what a caption says).

Ranking and ties
----------------
Items are ranked by descending score. ``ties="stable"`` (default) breaks score ties by the
item's position in the query (LightGBM's stable sort), so every metric is a function of
that one ranking :math:`\pi`. ``ties="expected"`` returns the *exact* expectation of the
metric over all orders of tied scores (each order equally likely):

* metrics linear in position, :math:`\sum_j h(y_{\pi_j})\,c(j)` (DCG, precision, recall,
  ARP, RBP), replace :math:`h` by its mean over the tie group (McSherry & Najork 2008);
* MAP uses the hypergeometric mean of the relevant items ahead within the group;
* MRR sums :math:`P(\text{first relevant at } a+t) / (a+t)` over the first tie group
  holding a relevant item, :math:`P = \binom{n-1-t}{r-1} / \binom{n}{r}`;
* ERR uses the mean products of the continuation probabilities over subsets of the group
  (:mod:`~bench.metrics.cascade`);
* OPA / OPA_ARF count a score-tied pair with different labels as 1/2.

Definitions (convention ``default``; gain :math:`2^y-1`, discount :math:`1/\log_2(1+j)`,
1-based rank :math:`j`, binary relevance :math:`y \ge 1` for MRR, MAP, precision and RBP):

* ``ndcg@k`` / ``ndcg@max``: :math:`DCG@k/IDCG@k`; lists shorter than ``k`` sum what exists;
  ``IDCG = 0`` is an *empty query*, scored by ``empty_query``: ``one`` (LightGBM, XGBoost,
  allRank), ``zero`` (TF-Ranking) or ``drop`` (Qin et al. 2021).
* ``dcg@k`` / ``dcg@max``: the unnormalised :math:`DCG@k`; never dropped.
* ``err@k`` / ``err@max``: the Yahoo! challenge's ERR,
  :math:`\sum_{j \le k} \frac{1}{j} R_j \prod_{i<j}(1-R_i)`, :math:`R = (2^y-1)/16`, labels 0-4.
* ``mrr`` / ``mrr@k``: :math:`1/j` of the first relevant item (within the top ``k``), 0 when
  there is none (never dropped).
* ``map`` / ``map@k``: :math:`\frac{1}{R}\sum_{\text{relevant } i,\ j_i \le k} \text{prec@}j_i`
  with :math:`R` the relevant items of the whole list (trec_eval's ``map`` and ``map_cut``);
  ``R = 0`` is an empty query (``empty_query`` as for NDCG; ``one`` equals LightGBM's ``map@k``).
* ``precision@k``: relevant items in the top ``k`` divided by ``k`` (trec_eval: a list
  shorter than ``k`` counts the missing places as non-relevant); never dropped.
* ``rbp@p``: :math:`(1-p)\sum_j \mathrm{rel}_j\, p^{j-1}` (Moffat & Zobel 2008) over the whole
  list; ``rbp_residual@p``: :math:`p^n`, the weight left to the ranks past the list's ``n``
  documents (lower is better; the same for every method).
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

Evaluation conventions
----------------------
``convention="default"`` is everything above (what LightGBM and XGBoost report).
``"letor3"`` / ``"letor4"`` equal, per query, LETOR's official evaluation scripts
(:mod:`~bench.metrics.letor`). ``"tfranking"`` is TF-Ranking's ``metrics_impl.py``
(PiRank's and ARF's evaluation code; :mod:`~bench.metrics.tfranking`): empty queries score 0,
P@k divides by min(k, n), OPA and ARP are pooled over all queries (their frames carry
``<metric>:weight``), ties are TF-Ranking's random order, in expectation. ``"allrank"`` is
allRank's ``metrics.py`` (NeuralNDCG's; :mod:`~bench.metrics.allrank`): empty queries score 1,
MRR finds the first document of the list's highest label.

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

from bench.choices import CONVENTIONS
from bench.metrics.captions import RECALL_CAPTIONS, conventions_caption, validation_rules
from bench.metrics.conventions import REGISTRY, metric_convention
from bench.metrics.grade import evaluate, evaluate_with_convention, summarize
from bench.metrics.letor import LETOR_KINDS, LETOR_SCRIPTS
from bench.metrics.names import (
    LOWER_IS_BETTER,
    VALID_FORMS,
    MetricSpec,
    dropped_column,
    higher_is_better,
    is_metric_column,
    parse_metric,
    weight_column,
)

__all__ = [
    "CONVENTIONS", "LETOR_KINDS", "LETOR_SCRIPTS", "LOWER_IS_BETTER", "RECALL_CAPTIONS", "REGISTRY", "VALID_FORMS",
    "MetricSpec", "conventions_caption", "dropped_column", "evaluate", "evaluate_with_convention", "higher_is_better",
    "is_metric_column", "metric_convention", "parse_metric", "summarize", "validation_rules", "weight_column",
]

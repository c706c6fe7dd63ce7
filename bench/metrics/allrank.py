r"""allRank's metrics, as ``allrank/models/metrics.py`` computes them (convention ``allrank``).

NeuralNDCG's authors evaluate with allRank. Its metrics are means over all lists of a split
(``torch.mean`` of the per-slate values), every list weighted 1:

* **NDCG@k** (``ndcg``): gain :math:`2^y - 1`, discount :math:`1/\log_2(1 + j)`. Lists are padded
  to a common length with label -1; padding gets label 0 and score :math:`-\infty`, so it sorts
  last and adds no gain, and ``k`` beyond the padded length is cut to it: a list shorter than
  k sums what exists. A list whose ideal DCG is 0 gets ``filler_value`` = **1**.
* **DCG@k** (``dcg``): the numerator above.
* **MRR@k** (``mrr``): ``torch.max`` over the labels in predicted order gives the **first item
  holding the list's highest label** (not the first with :math:`y \ge 1`); its reciprocal rank,
  0 beyond k. A list whose labels are all 0 has its maximum at rank 1 and scores **1**. (allRank
  sets every value of a batch to 0 when the labels of the *whole batch* sum to 0, an artefact
  of its batching that a real test split, with relevant documents somewhere, never meets.)
* **Ties.** allRank sorts with ``torch.sort(descending=True)``, which does not specify the
  order of equal scores: measured with torch 2.13 on CPU, rows of at most 16 items keep file
  order and longer rows come out in an order of the sorting network (neither file order nor
  its reverse), and the CUDA sort is another. No order is the tool's, so the suite reports the
  exact expectation over the orders of tied scores (``ties="expected"``) for every metric.

Metrics allRank does not define keep the suite's definitions under these ties, with its empty
value (1) where one applies (MAP).
"""

from __future__ import annotations

import numpy as np

from bench.metrics import default
from bench.metrics.names import MetricSpec
from bench.metrics.ranking import Ranking

TOOL = "allRank"
USED_BY = "NeuralNDCG's evaluation code"
SOURCE = "allrank/models/metrics.py"
TIES = "expected"  # torch.sort leaves the order of equal scores unspecified
EMPTY_QUERY = "one"  # ndcg(..., filler_value=1.0)


def mrr(r: Ranking, spec: MetricSpec, empty_query: str):
    """1 / rank of the first item holding the list's highest label, within the top k."""
    highest = np.zeros(r.n_queries)
    nonempty = r.lengths > 0
    highest[nonempty] = r.y_ideal[r.offsets[:-1][nonempty]]
    return default.reciprocal_rank(r, r.y == highest[r.qidx], spec.k), np.zeros(r.n_queries, dtype=bool)


POOLED: tuple[str, ...] = ()  # every list weighs 1
#: the metric kinds allRank itself defines, and how
OWN = {"ndcg": default.ndcg, "dcg": default.dcg, "mrr": mrr}

#: the caption's sentences where allRank differs from the suite's definitions (bench.metrics.captions)
CAPTION_TIES = ("Score ties, whose order allRank's torch.sort leaves unspecified, are averaged exactly over "
                "their orders.")
CAPTION_EMPTY = "Queries without any relevant document score 1 in {metrics} (allRank's filler value)."
CAPTIONS = {
    "mrr": ("MRR is 1/rank of the first document holding the list's highest label (allRank's definition), "
            "so a query whose labels are all 0 scores 1."),
}
CAPTION_POOLED = ""

"""The metric grammar: a metric's name, its parsed form, its direction and its frame columns.

Names (``K`` a positive integer, ``P`` a decimal strictly between 0 and 1):

- ``ndcg@K``, ``ndcg@max``; ``dcg@K``, ``dcg@max``; ``err@K``, ``err@max``
- ``mrr``, ``mrr@K``; ``map``, ``map@K``; ``precision@K``
- ``recall@M@K``, ``recall_arf@M@K``
- ``opa``, ``opa_arf``, ``arp``
- ``rbp@P`` and ``rbp_residual@P`` (rank-biased precision with persistence ``P`` and its residual)
- ``mean_ndcg`` (convention ``letor4`` only)

A per-query frame holds one value column per metric, its ``<metric>:dropped`` column and, for
a metric its convention pools over queries (TF-Ranking's OPA and ARP), ``<metric>:weight``
(:func:`weight_column`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# metric kinds where a smaller value is better: ARP (the average relevance position) and the
# RBP residual (the weight RBP leaves unassigned past the end of the list)
LOWER_IS_BETTER = ("arp", "rbp_residual")
VALID_FORMS = (
    "ndcg@K, dcg@K, err@K (K a positive integer or 'max'), mrr, mrr@K, map, map@K, precision@K, "
    "recall@M@K, recall_arf@M@K (ARF eq. 4: divides by K), opa, opa_arf, arp, "
    "rbp@P and rbp_residual@P (P in (0, 1), e.g. rbp@0.8), mean_ndcg (convention letor4 only)"
)

_PATTERN = re.compile(
    r"^(?:(?P<cut>ndcg|dcg|err)@(?P<cut_k>[1-9]\d*|max)"
    r"|(?P<opt>mrr|map)(?:@(?P<opt_k>[1-9]\d*))?"
    r"|(?P<prec>precision)@(?P<prec_k>[1-9]\d*)"
    r"|(?P<rec>recall|recall_arf)@(?P<rec_m>[1-9]\d*)@(?P<rec_k>[1-9]\d*)"
    r"|(?P<rbp>rbp|rbp_residual)@(?P<rbp_p>0\.\d*[1-9]\d*)"
    r"|(?P<plain>opa|opa_arf|arp|mean_ndcg))$"
)


@dataclass(frozen=True)
class MetricSpec:
    """A parsed metric name.

    ``kind`` is one of ndcg, dcg, err, mrr, map, precision, recall, recall_arf, opa, opa_arf,
    arp, rbp, rbp_residual, mean_ndcg; ``k`` the cut-off (None: the whole list), ``m`` the
    predicted top of recall@m@k, ``p`` the persistence of RBP.
    """

    name: str
    kind: str
    k: int | None = None  # None for ndcg@max and the uncut mrr / map
    m: int | None = None  # recall@m@k and recall_arf@m@k only
    p: float | None = None  # rbp@p and rbp_residual@p only


def parse_metric(name: str) -> MetricSpec:
    """Parse a metric name; unknown names raise ``ValueError`` listing the valid forms.

    >>> parse_metric("recall@30@15")
    MetricSpec(name='recall@30@15', kind='recall', k=15, m=30, p=None)
    >>> parse_metric("mrr@10").k, parse_metric("mrr").k, parse_metric("ndcg@max").k
    (10, None, None)
    >>> parse_metric("rbp@0.8").p
    0.8
    """
    match = _PATTERN.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"unknown metric {name!r}; valid forms: {VALID_FORMS}")
    g = match.groupdict()
    if g["cut"]:
        return MetricSpec(name, g["cut"], None if g["cut_k"] == "max" else int(g["cut_k"]))
    if g["opt"]:
        return MetricSpec(name, g["opt"], int(g["opt_k"]) if g["opt_k"] else None)
    if g["prec"]:
        return MetricSpec(name, "precision", int(g["prec_k"]))
    if g["rec"]:
        return MetricSpec(name, g["rec"], int(g["rec_k"]), int(g["rec_m"]))
    if g["rbp"]:
        return MetricSpec(name, g["rbp"], p=float(g["rbp_p"]))
    return MetricSpec(name, g["plain"])


def higher_is_better(metric: str) -> bool:
    """Direction of a metric: False only for the kinds in :data:`LOWER_IS_BETTER`.

    >>> higher_is_better("ndcg@10"), higher_is_better("arp"), higher_is_better("err@10")
    (True, False, True)
    """
    return parse_metric(metric).kind not in LOWER_IS_BETTER


def dropped_column(metric: str) -> str:
    """The bool column marking the queries ``metric`` leaves out of its mean."""
    return f"{metric}:dropped"


def weight_column(metric: str) -> str:
    """The column of a pooled metric's per-query weights (its mean is ``sum(w v) / sum(w)``)."""
    return f"{metric}:weight"


def is_metric_column(column: str) -> bool:
    """False for the key columns' companions ``<metric>:dropped`` and ``<metric>:weight``.

    >>> is_metric_column("opa"), is_metric_column("opa:weight"), is_metric_column("opa:dropped")
    (True, False, False)
    """
    return not column.endswith((":dropped", ":weight"))

"""The caption paragraph that states a table's metric conventions: only those of the metrics it shows.

:func:`conventions_caption` writes one sentence per rule that a shown metric depends on: the
gain and discount (NDCG, DCG), the empty-query value (NDCG, MAP), the tie rule, the binary
relevance (MRR, MAP, precision, RBP) and each metric's own definition. Under a tool's
convention (``tfranking``, ``allrank``) it opens with the tool and the papers that used it and
replaces the sentences where the tool differs; under a LETOR convention it states the script's
rules for the metrics the script computes, then the default sentences of the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.choices import CONVENTIONS, EMPTY_QUERY_CHOICES, TIES_CHOICES
from bench.metrics.conventions import Convention, defines, is_letor
from bench.metrics.conventions import convention as convention_spec
from bench.metrics.letor import LETOR_SCRIPTS
from bench.metrics.names import MetricSpec, parse_metric

# the caption's sentence on each recall variant
RECALL_CAPTIONS = {
    "recall": "Recall@m@k shares the k-th place equally among label ties and divides by min(k, list "
              "length).",
    "recall_arf": "Recall@m@k (ARF) follows ARF eq. 4: it shares the k-th place equally among label ties "
                  "and divides by k, so a list shorter than k scores at most its length / k.",
}
# how a metric kind is named in a list of metrics
DISPLAY = {"ndcg": "NDCG", "dcg": "DCG", "err": "ERR", "mrr": "MRR", "map": "MAP", "precision": "P@k",
           "recall": "Recall@m@k", "recall_arf": "Recall@m@k (ARF)", "opa": "OPA", "opa_arf": "OPA_ARF",
           "arp": "ARP", "rbp": "RBP", "rbp_residual": "RBP residual", "mean_ndcg": "MeanNDCG"}
# the empty-query sentence of each choice, for the metrics named by {metrics}
EMPTY_TEXT = {
    "one": "Queries without any relevant document score 1 in {metrics} (LightGBM/XGBoost convention).",
    "zero": "Queries without any relevant document score 0 in {metrics} (TF-Ranking convention).",
    "drop": "Queries without any relevant document are excluded from {metrics} (Qin et al. 2021).",
}
TIE_TEXT = {
    "stable": "Score ties are broken by document order in the data file (LightGBM's stable sort).",
    "expected": "Score ties are averaged exactly over all their orders (McSherry & Najork 2008).",
}
OPA_HALF = "A pair with tied scores and different labels counts 1/2 in OPA."
_BINARY = ("mrr", "map", "precision", "rbp")  # kinds that read labels >= 1 as relevant
_WITH_EMPTY_RULE = ("ndcg", "map")  # kinds whose empty-query value is a convention's choice


def _definitions(specs: list[MetricSpec], overrides: dict[str, str]) -> list[str]:
    """The per-metric sentences, in a fixed order, of the kinds among ``specs``."""
    kinds = {s.kind for s in specs}
    cut = {s.kind for s in specs if s.k is not None}
    uncut = {s.kind for s in specs if s.k is None}
    text = {
        "ndcg": "NDCG@k sums over the available items when a list is shorter than k.",
        "dcg": "DCG@k is not normalised: it sums over the available items and is 0 without a relevant document.",
        "mrr": "MRR is 1/rank of the first relevant document, 0 without one"
               + (" (MRR@k: within the top k)." if "mrr" in cut else "."),
        "map": " ".join(t for t in (
            "MAP averages the precision at the ranks of the relevant documents." if "map" in uncut else "",
            f"MAP@k sums {'those precisions' if 'map' in uncut else 'the precisions at the ranks of the relevant documents'} "
            "up to rank k and divides by all relevant documents of the query (trec_eval's map_cut)."
            if "map" in cut else "") if t),
        "precision": "P@k divides by k (the missing places of a shorter list count as non-relevant).",
        "err": "ERR@k is the Yahoo! challenge's expected reciprocal rank: a document of grade y (0-4) stops "
               "the reader with probability (2^y-1)/16.",
        "rbp": "RBP@p = (1-p) x the sum of p^(rank-1) over the relevant documents.",
        "rbp_residual": "RBP residual@p = p^n, the weight RBP leaves to the ranks past a list of n documents "
                        "(every document is judged, so it is the same for every method).",
        "opa": "OPA averages over queries with at least one pair of different labels.",
        "opa_arf": "OPA_ARF (ARF eq. 2) averages over queries with at least two documents, label ties counted "
                   "as concordant.",
        "arp": "ARP (lower is better) averages over queries with a positive label sum.",
        "recall": RECALL_CAPTIONS["recall"],
        "recall_arf": RECALL_CAPTIONS["recall_arf"],
        **overrides,
    }
    return [text[k] for k in text if k in kinds]


def _names(kinds: Sequence[str], specs: list[MetricSpec]) -> str:
    shown = [DISPLAY[k] for k in dict.fromkeys(s.kind for s in specs) if k in kinds]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _rules(specs: list[MetricSpec], ties_text: str, empty_text: str) -> list[str]:
    """Gain and discount, the empty-query value (``empty_text`` names the metrics by
    ``{metrics}``), the tie rule and binary relevance."""
    kinds = {s.kind for s in specs}
    out = []
    if kinds & {"ndcg", "dcg"}:
        out.append("Gain 2^y-1, discount 1/log2(1+rank).")
    if kinds & set(_WITH_EMPTY_RULE):
        out.append(empty_text.format(metrics=_names(_WITH_EMPTY_RULE, specs)))
    out.append(ties_text)
    if kinds & set(_BINARY):
        binary = _names(_BINARY, specs)
        out.append(f"{binary} use{'s' if ' and ' not in binary else ''} binary relevance (label >= 1).")
    return out


def _tool_caption(conv: Convention, specs: list[MetricSpec]) -> str:
    kinds = {s.kind for s in specs}
    head = (f"Graded as {conv.tool} grades ({conv.used_by}; convention {conv.name}, per query as "
            f"{conv.source} computes them).")
    overrides = {k: v for k, v in conv.captions.items() if k in kinds}
    parts = [head, *_rules(specs, conv.caption_ties, conv.caption_empty), *_definitions(specs, overrides)]
    if kinds & set(conv.pooled) and conv.caption_pooled:
        parts.append(conv.caption_pooled)
    others = [k for k in dict.fromkeys(s.kind for s in specs) if k not in conv.own]
    if others:
        parts.append(f"{_names(others, specs)} {'is not a' if len(others) == 1 else 'are not'} {conv.tool} "
                     f"metric{'' if len(others) == 1 else 's'}: graded by the suite's definition under {conv.tool}'s "
                     "tie rule.")
    return " ".join(parts)


def _letor_caption(name: str, specs: list[MetricSpec]) -> str:
    kinds = {s.kind for s in specs}
    version = {"letor3": "3.0", "letor4": "4.0"}[name]
    rules = ["gain 2^y-1 for labels 0-2, discount 1 at ranks 1 and 2 and 1/log2(rank) from rank 3"
             if kinds & {"ndcg", "mean_ndcg"} else "labels 0-2"]
    short = [label for kind, label in (("ndcg", "NDCG@k"), ("precision", "P@k"))
             if kind in kinds and (name == "letor3" or kind == "ndcg")]
    if short:
        rules.append(f"{' and '.join(short)} of a query with fewer than k documents {'are' if len(short) > 1 else 'is'} 0")
    if name == "letor4" and "precision" in kinds:
        rules.append("P@k counts the missing places of a shorter list as non-relevant")
    if "mean_ndcg" in kinds:
        rules.append("MeanNDCG averages NDCG@1..n over the list length n")
    binary = [label for kind, label in (("precision", "P@k"), ("map", "MAP")) if kind in kinds]
    if binary:
        rules.append(f"{' and '.join(binary)} count{'s' if len(binary) == 1 else ''} labels >= 1 as relevant")
    return (f"LETOR {version} evaluation (convention {name}, equal per query to the official "
            f"{LETOR_SCRIPTS[name]}): {'; '.join(rules)}; a query without any relevant document scores 0 and "
            "stays in the mean; score ties are kept in file order.")


def conventions_caption(empty_query: str = "one", ties: str = "stable", convention: str = "default",
                        metrics: Sequence[str] | None = None) -> str:
    """One paragraph stating the conventions of ``metrics`` (a table's metric names; None: every
    metric the convention grades), for table footers.

    ``empty_query`` and ``ties`` are the config's; a LETOR or a tool's convention fixes its own
    and they are not repeated. Under a LETOR convention the metrics its script does not compute
    follow with the default sentences.

    >>> conventions_caption().startswith("Gain 2^y-1")
    True
    >>> conventions_caption(convention="letor4", metrics=["ndcg@10"]).startswith("LETOR 4.0 evaluation")
    True
    >>> "OPA" in conventions_caption(metrics=["ndcg@5", "ndcg@10"])  # only what the table shows
    False
    """
    name = convention
    _check("convention", name, CONVENTIONS)
    _check("empty_query", empty_query, EMPTY_QUERY_CHOICES)
    _check("ties", ties, TIES_CHOICES)
    conv = convention_spec(name)
    names = list(metrics) if metrics is not None else _every_metric(conv)
    specs = [parse_metric(m) for m in names]
    if is_letor(name):
        own = [s for s in specs if defines(name, s)]
        others = [s for s in specs if not defines(name, s)]
        text = _letor_caption(name, own) if own else ""
        if others:
            text += (f" {_names([s.kind for s in others], others)} (not computed by {LETOR_SCRIPTS[name]}) follow"
                     f"{'s' if len({s.kind for s in others}) == 1 else ''} the suite's default convention. "
                     + _default_caption(others, empty_query, ties))
        return text.strip()
    if conv.fixes_rules:
        return _tool_caption(conv, specs)
    return _default_caption(specs, empty_query, ties)


def _default_caption(specs: list[MetricSpec], empty_query: str, ties: str) -> str:
    tie_text = TIE_TEXT[ties]
    if ties == "expected" and {s.kind for s in specs} & {"opa", "opa_arf"}:
        tie_text += " " + OPA_HALF
    return " ".join([*_rules(specs, tie_text, EMPTY_TEXT[empty_query]), *_definitions(specs, {})])


def _every_metric(conv: Convention) -> list[str]:
    """One representative name per metric kind the convention grades (a caption without a table)."""
    examples = {"ndcg": "ndcg@10", "dcg": "dcg@10", "err": "err@10", "mrr": "mrr", "map": "map",
                "precision": "precision@10", "recall": "recall@30@15", "recall_arf": "recall_arf@30@15",
                "opa": "opa", "opa_arf": "opa_arf", "arp": "arp", "rbp": "rbp@0.8", "rbp_residual": "rbp_residual@0.8",
                "mean_ndcg": "mean_ndcg"}
    return [examples[k] for k in conv.compute]


def _check(key: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{key}={value!r} is not one of {list(choices)}")


#: what a query without a relevant document scores in NDCG under each empty-query rule
_EMPTY_SCORE = {"one": "1", "zero": "0", "drop": "no value (it is dropped)"}


def validation_rules(convention: str = "default", empty_query: str = "one") -> str:
    """One phrase naming the rules a validation split is graded by (early stopping, the tested
    checkpoint, selection and validation curves): the convention's tool and what a query without
    a relevant document scores there, which shifts every NDCG curve by that share of queries.

    >>> validation_rules("tfranking")
    'the rules of TF-Ranking (convention tfranking; a query without a relevant document scores 0)'
    >>> validation_rules()
    "the suite's default rules (a query without a relevant document scores 1)"
    """
    _check("convention", convention, CONVENTIONS)
    _check("empty_query", empty_query, EMPTY_QUERY_CHOICES)
    conv = convention_spec(convention)
    empty = "zero" if is_letor(convention) else conv.empty_query or empty_query
    scores = f"a query without a relevant document scores {_EMPTY_SCORE[empty]}"
    if convention == "default":
        return f"the suite's default rules ({scores})"
    return f"the rules of {conv.tool} (convention {convention}; {scores})"

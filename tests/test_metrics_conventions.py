"""The ``tfranking`` and ``allrank`` conventions against their tools' own expectations.

TF-Ranking: the cases of ``tensorflow_ranking/python/metrics_impl_test.py`` (per-list values
and weights) and ``metrics_test.py`` (the weighted means over a batch), each expected value
re-derived by hand below from the definitions those tests assert (not copied: the arithmetic
in each comment is ours). A padded item of those tests (label -1) is simply left out here,
as TF-Ranking's mask leaves it out; the suite takes ragged lists. allRank: its ``metrics.py``
has no tests of its own, so its cases are worked by hand from the code's definitions
(``filler_value``, padding, ``torch.max`` for MRR). Exact rationals: tolerance 1e-12.

Ties: TF-Ranking shuffles tied scores at random and allRank's sort leaves their order
unspecified; both conventions report the exact expectation over the orders, checked against
a brute force over every order of every tie group.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bench.choices import CONVENTIONS
from bench.metrics import REGISTRY, evaluate, summarize

TOL = 1e-12


def log2p1(rank: float) -> float:
    return math.log2(1.0 + rank)


def grade(lists, metrics, convention="tfranking", **kwargs):
    """Evaluate ``lists`` (a list of ``(scores, labels)``) in one split."""
    scores = np.concatenate([np.asarray(s, float) for s, _ in lists])
    labels = np.concatenate([np.asarray(y, float) for _, y in lists])
    offsets = np.cumsum([0] + [len(s) for s, _ in lists])
    return evaluate(scores, labels, offsets, metrics, convention=convention, **kwargs)


def values(frame, metric):
    return frame[metric].to_numpy()


def test_the_registry_lists_the_configs_conventions():
    assert tuple(REGISTRY) == CONVENTIONS


# ------------------------------------------------------------------------------------ TF-Ranking


def test_tfranking_mrr():
    # scores 1, 3, 2: the relevant item (score 2) is second
    assert values(grade([([1, 3, 2], [0, 0, 1])], ["mrr"]), "mrr") == pytest.approx([0.5], abs=TOL)
    assert values(grade([([1, 3, 2], [0, 0, 0])], ["mrr"]), "mrr") == pytest.approx([0.0], abs=TOL)
    assert values(grade([([1, 3, 2], [0, 0, 1])], ["mrr@1"]), "mrr@1") == pytest.approx([0.0], abs=TOL)
    # the relevant item at rank 1, 2, 3 of three lists; top 1, 2 and 6 (6 > n: the whole list)
    lists = [([3, 2, 1], [1, 0, 0]), ([3, 2, 1], [0, 1, 0]), ([3, 2, 1], [0, 0, 1])]
    frame = grade(lists, ["mrr@1", "mrr@2", "mrr@6"])
    assert values(frame, "mrr@1") == pytest.approx([1, 0, 0], abs=TOL)
    assert values(frame, "mrr@2") == pytest.approx([1, 1 / 2, 0], abs=TOL)
    assert values(frame, "mrr@6") == pytest.approx([1, 1 / 2, 1 / 3], abs=TOL)
    # a batch: 1/2 and 1, every list weighted 1 (metrics_test: (0.5 + 1.0) / 2)
    batch = grade([([1, 3, 2], [0, 0, 1]), ([1, 2, 3], [0, 1, 1])], ["mrr"])
    assert values(batch, "mrr") == pytest.approx([0.5, 1.0], abs=TOL)
    assert summarize(batch)["mrr"] == pytest.approx(0.75, abs=TOL)
    assert "mrr:weight" not in batch  # weight 1 for every list: a plain mean


def test_tfranking_arp_is_pooled_by_label_sum():
    lists = [([1, 3, 2], [0, 0, 1]), ([1, 2, 3], [0, 1, 2])]
    frame = grade(lists, ["arp"])
    # list 1: label 1 at rank 2 -> 2; list 2: label 2 at rank 1, label 1 at rank 2 -> (2*1 + 1*2) / 3
    assert values(frame, "arp") == pytest.approx([2.0, 4 / 3], abs=TOL)
    assert values(frame, "arp:weight") == pytest.approx([1.0, 3.0], abs=TOL)  # the label sums
    # pooled (metrics_test): (1*2 + 2*1 + 1*2) / (1 + 3) = 1.5, not the mean of 2 and 4/3
    assert summarize(frame)["arp"] == pytest.approx(1.5, abs=TOL)
    assert summarize(grade(lists, ["arp"], convention="default"))["arp"] == pytest.approx(5 / 3, abs=TOL)
    # all labels 0: value 0 and weight 0 -- no weight in the mean, which is leaving it out
    empty = grade([([1, 3, 2], [0, 0, 0]), ([1, 3, 2], [0, 0, 1])], ["arp"])
    assert values(empty, "arp").tolist() == [0.0, 2.0] and values(empty, "arp:weight").tolist() == [0.0, 1.0]
    assert bool(empty["arp:dropped"][0]) and summarize(empty)["arp"] == 2.0
    # padded items left out (scores 1, 4, 2 with labels 1, 1, 0 in metrics_impl_test; here 1, 3, 2):
    # the relevant items at ranks 3 and 1 -> (1*3 + 1*1) / 2 = 2
    assert values(grade([([1, 3, 2], [1, 1, 0])], ["arp"]), "arp") == pytest.approx([2.0], abs=TOL)


def test_tfranking_precision_divides_by_min_k_n():
    assert values(grade([([1, 3, 2], [0, 0, 1])], ["precision@3"]), "precision@3") == pytest.approx([1 / 3])
    assert values(grade([([1, 3, 2], [0, 0, 0])], ["precision@3"]), "precision@3") == pytest.approx([0.0])
    per_list = grade([([1, 3, 2, 4], [0, 0, 1, 1]), ([4, 1, 3, 2], [0, 0, 1, 0])], ["precision@4"])
    assert values(per_list, "precision@4") == pytest.approx([2 / 4, 1 / 4], abs=TOL)
    lists = [([3, 2, 1], [1, 0, 1]), ([3, 2, 1], [0, 1, 0]), ([3, 2, 1], [0, 0, 1])]
    frame = grade(lists, ["precision@1", "precision@2", "precision@6"])
    assert values(frame, "precision@1") == pytest.approx([1, 0, 0], abs=TOL)
    assert values(frame, "precision@2") == pytest.approx([1 / 2, 1 / 2, 0], abs=TOL)
    # topn 6 on lists of 3: divided by min(6, 3) = 3, where the default divides by 6
    assert values(frame, "precision@6") == pytest.approx([2 / 3, 1 / 3, 1 / 3], abs=TOL)
    default = grade(lists, ["precision@6"], convention="default")
    assert values(default, "precision@6") == pytest.approx([2 / 6, 1 / 6, 1 / 6], abs=TOL)
    # a batch (metrics_test): (1/3 + 2/3) / 2
    batch = grade([([1, 3, 2], [0, 0, 1]), ([1, 2, 3], [0, 1, 2])], ["precision@3"])
    assert summarize(batch)["precision@3"] == pytest.approx(0.5, abs=TOL)


def test_tfranking_map():
    assert values(grade([([3, 2, 1], [0, 1, 0])], ["map"]), "map") == pytest.approx([1 / 2])
    # graded labels read as binary: relevant at ranks 1 (label 2), 2 (label 3), 4 (label 1)
    assert values(grade([([3, 4, 1, 2], [0, 2, 1, 3])], ["map"]), "map") == pytest.approx(
        [(1 + 2 / 3 + 3 / 4) / 3], abs=TOL)
    assert values(grade([([3, 2, 1], [0, 0, 0])], ["map"]), "map") == pytest.approx([0.0])  # empty: 0, kept
    assert values(grade([([1, 3, 2], [0, 1, 1])], ["map"]), "map") == pytest.approx([(1 + 1) / 2])
    assert values(grade([([1, 3, 2], [1, 1, 0])], ["map"]), "map") == pytest.approx([(1 + 2 / 3) / 2])
    # the cut: precisions up to k, over ALL relevant items of the list
    lists = [([3, 2, 1], [1, 0, 2]), ([3, 2, 1], [0, 1, 0]), ([3, 2, 1], [0, 0, 1])]
    frame = grade(lists, ["map@1", "map@2", "map@6"])
    assert values(frame, "map@1") == pytest.approx([1 / 2, 0, 0], abs=TOL)
    assert values(frame, "map@2") == pytest.approx([1 / 2, 1 / 2, 0], abs=TOL)
    assert values(frame, "map@6") == pytest.approx([(1 + 2 / 3) / 2, 1 / 2, 1 / 3], abs=TOL)


def test_tfranking_ndcg_and_dcg():
    frame = grade([([3, 2, 1], [0, 1, 0])], ["ndcg@3", "dcg@3"])
    assert values(frame, "ndcg@3") == pytest.approx([(1 / log2p1(2)) / (1 / log2p1(1))], abs=TOL)
    assert values(frame, "dcg@3") == pytest.approx([1 / log2p1(2)], abs=TOL)
    empty = grade([([3, 2, 1], [0, 0, 0])], ["ndcg@max", "dcg@max"])
    assert values(empty, "ndcg@max").tolist() == [0.0] and not empty["ndcg@max:dropped"][0]  # 0 and kept
    assert values(empty, "dcg@max").tolist() == [0.0]
    graded = grade([([4, 3, 2, 1], [0, 3, 1, 0])], ["ndcg@max", "dcg@max"])
    dcg = (2**3 - 1) / log2p1(2) + 1 / log2p1(3)
    assert values(graded, "dcg@max") == pytest.approx([dcg], abs=TOL)
    assert values(graded, "ndcg@max") == pytest.approx([dcg / ((2**3 - 1) / log2p1(1) + 1 / log2p1(2))], abs=TOL)
    # padded item left out: scores 1, 3, 2, labels 2, 1, 0 -> label 1 first, label 2 third
    padded = grade([([1, 3, 2], [2, 1, 0])], ["ndcg@max", "dcg@max"])
    dcg = 3 / log2p1(3) + 1 / log2p1(1)
    assert values(padded, "dcg@max") == pytest.approx([dcg], abs=TOL)
    assert values(padded, "ndcg@max") == pytest.approx([dcg / (3 / log2p1(1) + 1 / log2p1(2))], abs=TOL)
    # ragged: two lists of different lengths
    ragged = grade([([3, 2, 1], [0, 1, 0]), ([4, 1, 2, 3], [1, 1, 0, 0])], ["ndcg@max"])
    want = [(1 / log2p1(2)) / (1 / log2p1(1)),
            (1 / log2p1(1) + 1 / log2p1(4)) / (1 / log2p1(1) + 1 / log2p1(2))]
    assert values(ragged, "ndcg@max") == pytest.approx(want, abs=TOL)
    # the cut (topn 1, 2, 6): the ideal DCG is cut too
    lists = [([3, 2, 1], [1, 0, 2]), ([3, 2, 1], [0, 1, 0]), ([3, 2, 1], [0, 0, 1])]
    frame = grade(lists, ["ndcg@1", "ndcg@2", "ndcg@6", "dcg@1", "dcg@2", "dcg@6"])
    ideal_1 = [3 / log2p1(1), 1 / log2p1(1), 1 / log2p1(1)]
    ideal = [3 / log2p1(1) + 1 / log2p1(2), 1 / log2p1(1), 1 / log2p1(1)]
    dcg1, dcg2 = [1 / log2p1(1), 0, 0], [1 / log2p1(1), 1 / log2p1(2), 0]
    dcg6 = [1 / log2p1(1) + 3 / log2p1(3), 1 / log2p1(2), 1 / log2p1(3)]
    assert values(frame, "dcg@1") == pytest.approx(dcg1, abs=TOL)
    assert values(frame, "dcg@2") == pytest.approx(dcg2, abs=TOL)
    assert values(frame, "dcg@6") == pytest.approx(dcg6, abs=TOL)
    assert values(frame, "ndcg@1") == pytest.approx(np.divide(dcg1, ideal_1), abs=TOL)
    assert values(frame, "ndcg@2") == pytest.approx(np.divide(dcg2, ideal), abs=TOL)
    assert values(frame, "ndcg@6") == pytest.approx(np.divide(dcg6, ideal), abs=TOL)


def test_tfranking_opa_is_pooled_and_counts_tied_scores_wrong():
    # one list, labels 0, 1, 0: pairs (1 > 0) twice; scores 3, 2, 1: only score 2 > score 1 is right
    frame = grade([([3, 2, 1], [0, 1, 0])], ["opa"])
    assert values(frame, "opa").tolist() == [0.5] and values(frame, "opa:weight").tolist() == [2.0]
    no_pairs = grade([([3, 2, 1], [0, 0, 0])], ["opa"])
    assert values(no_pairs, "opa").tolist() == [0.0] and values(no_pairs, "opa:weight").tolist() == [0.0]
    # graded: labels 1, 3, 0, 1 at scores 4, 3, 2, 1: pairs 3>1, 3>0, 3>1, 1>0, 1>0 (5); right: 3
    graded = grade([([4, 3, 2, 1], [1, 3, 0, 1])], ["opa"])
    assert values(graded, "opa") == pytest.approx([3 / 5], abs=TOL)
    assert values(graded, "opa:weight").tolist() == [5.0]
    # padded item left out: scores 4, 2, 3 with labels 2, 1, 0 -> 2 of 3 pairs right
    assert values(grade([([4, 2, 3], [2, 1, 0])], ["opa"]), "opa") == pytest.approx([2 / 3], abs=TOL)
    ragged = grade([([3, 2, 1], [0, 1, 0]), ([4, 1, 2, 3], [1, 0, 1, 0])], ["opa"])
    assert values(ragged, "opa") == pytest.approx([1 / 2, 3 / 4], abs=TOL)
    # metrics_test's batch: 1 of 2 and 3 of 3 pairs right -> pooled (1 + 3) / (2 + 3) = 0.8
    batch = grade([([1, 3, 2], [0, 0, 1]), ([1, 2, 3], [0, 1, 2])], ["opa"])
    assert values(batch, "opa") == pytest.approx([1 / 2, 1.0], abs=TOL)
    assert summarize(batch)["opa"] == pytest.approx(0.8, abs=TOL)
    # tied scores: TF-Ranking's strict s_i > s_j counts them wrong (the default convention: by file order)
    tied = [([1.0, 1.0, 0.0], [1, 0, 0])]
    assert values(grade(tied, ["opa"]), "opa") == pytest.approx([1 / 2], abs=TOL)
    assert values(grade(tied, ["opa"], convention="default"), "opa") == pytest.approx([1.0], abs=TOL)
    assert values(grade(tied, ["opa"], convention="default", ties="expected"), "opa") == pytest.approx([3 / 4])
    # a constant scorer gets no pair right
    assert values(grade([([2.0] * 4, [0, 1, 2, 3])], ["opa"]), "opa").tolist() == [0.0]


def test_tfranking_ranks_float32_scores():
    """TF-Ranking casts scores to float32: two scores equal in float32 tie (and the OPA pair is wrong)."""
    a = 1.0
    b = float(np.nextafter(np.float64(1.0), 2.0))  # different in float64, equal in float32
    frame = grade([([a, b], [1, 0])], ["opa", "mrr"])
    assert values(frame, "opa").tolist() == [0.0]
    assert values(frame, "mrr") == pytest.approx([0.75], abs=TOL)  # rank 1 or 2, each with probability 1/2


# ------------------------------------------------------------------------------------ allRank


def test_allrank_ndcg_fills_empty_queries_with_one_and_sums_short_lists():
    frame = grade([([0.2, 0.9, 0.5], [0, 0, 0]), ([0.2, 0.9, 0.5], [2, 0, 1])], ["ndcg@2", "ndcg@5"],
                  convention="allrank")
    assert values(frame, "ndcg@2")[0] == 1.0 and values(frame, "ndcg@5")[0] == 1.0  # filler_value
    # list 2 in predicted order: labels 0, 1, 2; ideal 2, 1, 0
    dcg2, ideal2 = 1 / math.log2(3), 3 + 1 / math.log2(3)
    dcg5, ideal5 = 1 / math.log2(3) + 3 / math.log2(4), ideal2  # k = 5 > n = 3: what exists
    assert values(frame, "ndcg@2")[1] == pytest.approx(dcg2 / ideal2, abs=TOL)
    assert values(frame, "ndcg@5")[1] == pytest.approx(dcg5 / ideal5, abs=TOL)
    # padding (label -1, score -inf) changes nothing: the same as the default convention with empty 1
    default = grade([([0.2, 0.9, 0.5], [0, 0, 0]), ([0.2, 0.9, 0.5], [2, 0, 1])], ["ndcg@2", "ndcg@5"],
                    convention="default", empty_query="one")
    assert frame[["ndcg@2", "ndcg@5"]].equals(default[["ndcg@2", "ndcg@5"]])


def test_allrank_mrr_is_the_first_document_of_the_highest_label():
    # predicted order: labels 1, 0, 2, 2 -> the first label-2 document is at rank 3 (torch.max: first maximum)
    lists = [([4, 3, 2, 1], [1, 0, 2, 2]), ([3, 2, 1], [0, 0, 0]), ([3, 2, 1], [0, 1, 0])]
    frame = grade(lists, ["mrr", "mrr@2"], convention="allrank")
    assert values(frame, "mrr") == pytest.approx([1 / 3, 1.0, 1 / 2], abs=TOL)  # all-zero labels: rank 1
    assert values(frame, "mrr@2") == pytest.approx([0.0, 1.0, 1 / 2], abs=TOL)  # beyond k: 0
    default = grade(lists, ["mrr"], convention="default")
    assert values(default, "mrr") == pytest.approx([1.0, 0.0, 1 / 2], abs=TOL)


# ------------------------------------------------------------------------------------ ties


def _reference(ranked: list[float], scores_sorted: list[float], name: str, convention: str) -> float:
    """One query's value in one predicted order, straight from the tool's definition."""
    n = len(ranked)
    rel = [1.0 if y >= 1 else 0.0 for y in ranked]
    kind, _, cut = name.partition("@")
    k = n if cut in ("", "max") else int(cut)
    ideal = sorted(ranked, reverse=True)
    dcg = sum((2**ranked[j] - 1) / math.log2(j + 2) for j in range(min(k, n)))
    if kind == "dcg":
        return dcg
    if kind == "ndcg":
        idcg = sum((2**ideal[j] - 1) / math.log2(j + 2) for j in range(min(k, n)))
        return dcg / idcg if idcg > 0 else (1.0 if convention == "allrank" else 0.0)
    if kind == "mrr":
        target = [y == max(ranked) for y in ranked] if convention == "allrank" else [r > 0 for r in rel]
        first = next((j for j, t in enumerate(target) if t), None)
        return 1.0 / (first + 1) if first is not None and first < k else 0.0
    if kind == "map":
        hits, total = 0, 0.0
        for j, r in enumerate(rel):
            hits += r
            total += r * hits / (j + 1) if j < k else 0.0
        return total / sum(rel) if sum(rel) else (1.0 if convention == "allrank" else 0.0)  # allRank's filler
    if kind == "precision":  # TF-Ranking: over min(k, n); allRank has none: the suite's, over k
        return sum(rel[:k]) / (min(k, n) if convention == "tfranking" else k)
    if kind == "arp":
        return sum(y * (j + 1) for j, y in enumerate(ranked)) / sum(ranked) if sum(ranked) else 0.0
    if kind == "opa":  # strict score order; the order of tied scores does not matter
        pairs = [(a, b) for a in range(n) for b in range(n) if ranked[a] > ranked[b]]
        right = sum(scores_sorted[a] > scores_sorted[b] for a, b in pairs)
        return right / len(pairs) if pairs else 0.0
    raise AssertionError(name)


def _expected_over_tie_orders(scores, labels, name, convention) -> float:
    """Mean over every order of the tied scores (each equally likely), by enumeration."""
    groups = {}
    for s, y in zip(scores, labels):
        groups.setdefault(s, []).append(y)
    blocks = [groups[s] for s in sorted(groups, reverse=True)]
    keys = [s for s in sorted(groups, reverse=True) for _ in groups[s]]
    total, count = 0.0, 0
    for orders in itertools.product(*(itertools.permutations(b) for b in blocks)):
        ranked = [y for block in orders for y in block]
        total += _reference(ranked, keys, name, convention)
        count += 1
    return total / count


@pytest.mark.parametrize("convention", ["tfranking", "allrank"])
def test_tie_orders_are_averaged_exactly(convention):
    rng = np.random.default_rng(7)
    names = ["ndcg@2", "ndcg@max", "dcg@3", "mrr", "mrr@2", "map", "map@3", "precision@2", "precision@9", "arp", "opa"]
    lists = []
    for _ in range(40):
        n = int(rng.integers(1, 7))
        lists.append((rng.integers(0, 3, n).astype(float), rng.integers(0, 3, n).astype(float)))
    frame = grade(lists, names, convention=convention)
    for q, (scores, labels) in enumerate(lists):
        for name in names:
            if name == "opa" and convention == "allrank":
                continue  # not allRank's: the default OPA (1/2 per tied pair), tested in test_metrics.py
            want = _expected_over_tie_orders(list(scores), list(labels), name, convention)
            assert frame[name][q] == pytest.approx(want, abs=1e-12), (convention, name, scores, labels)

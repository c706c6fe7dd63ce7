"""ERR, RBP and its residual, DCG, MRR@k, MAP@k and the others against independent evaluators.

Per query against trec_eval, gdeval and cwl-eval (``tests/fixtures/ir_measures/``: the
evaluators, the measure names, the tolerances and each evaluator's order of tied scores are in
its README; the values were produced by ``scripts/ir_measures_oracle.py``), against the Yahoo!
challenge's ERR worked by hand, and with score ties against a brute force over every order of
the tied documents.

The fixture's queries 200-213 have tied scores. The suite breaks ties by file order
(``ties="stable"``, docs/metrics-and-stats.md); each evaluator has its own rule (trec_eval and
gdeval: the larger docno first; ir-measures' msmarco provider: the smaller; cwl-eval: its run
file's line order, here the fixture's order). The test hands the suite each query's documents
in the evaluator's order of tied scores, so that its file-order rule ranks them as the
evaluator does, and checks that the rule matters on these queries.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict

import numpy as np
import pytest

from bench.metrics import evaluate, parse_metric
from helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "ir_measures"


def _read_run():
    qids, docnos, labels, scores = [], [], [], []
    for line in (FIXTURES / "run.tsv").read_text().splitlines():
        q, doc, y, s = line.split("\t")
        qids.append(q)
        docnos.append(doc)
        labels.append(float(y))
        scores.append(float(s))
    starts = [0] + [i for i in range(1, len(qids)) if qids[i] != qids[i - 1]] + [len(qids)]
    assert len(set(qids)) == len(starts) - 1, "each query's documents are contiguous"
    return [qids[i] for i in starts[:-1]], docnos, np.array(scores), np.array(labels), np.array(starts)


def _suite_name(measure: str) -> tuple[str, float]:
    """The suite's metric name for an ir-measures name, and the tolerance."""
    cut = re.search(r"@(\d+)$", measure)
    k = cut.group(1) if cut else None
    p = re.search(r"p=([0-9.]+)", measure)
    base = measure.split("(")[0].split("@")[0]
    name = {"P": f"precision@{k}", "AP": f"map@{k}" if k else "map", "RR": f"mrr@{k}" if k else "mrr",
            "nDCG": f"ndcg@{k}", "ERR": f"err@{k}",
            "RBP": f"rbp@{p.group(1) if p else ''}", "RBP_residual": f"rbp_residual@{p.group(1) if p else ''}"}[base]
    return name, (5e-6 + 1e-9 if base == "ERR" else 1e-12)  # gdeval prints five decimals


# each evaluator's order of tied scores (the fixture README gives the sources)
TIE_ORDER = {"trec_eval": "docno descending", "msmarco": "docno ascending", "gdeval": "docno descending",
             "cwl": "file"}


def _evaluator(measure: str) -> str:
    base = measure.split("(")[0].split("@")[0]
    if base == "RR" and "@" in measure:
        return "msmarco"
    return {"ERR": "gdeval", "RBP": "cwl", "RBP_residual": "cwl"}.get(base, "trec_eval")


def _tool_order(docnos, scores, offsets, rule: str) -> np.ndarray:
    """A permutation within each query: descending score, tied scores in ``rule``'s order."""
    perm = []
    for start, end in zip(offsets[:-1], offsets[1:]):
        idx = list(range(start, end))
        if rule != "file":
            idx.sort(key=lambda i: docnos[i], reverse=rule == "docno descending")
        idx.sort(key=lambda i: -scores[i])  # stable: tied scores keep the rule's order
        perm += idx
    return np.array(perm)


def test_every_metric_equals_the_independent_evaluators_per_query():
    qids, docnos, scores, labels, offsets = _read_run()
    expected = defaultdict(dict)
    for line in (FIXTURES / "expected.tsv").read_text().splitlines():
        q, measure, value = line.split("\t")
        expected[measure][q] = float(value)
    names = {m: _suite_name(m) for m in expected}
    assert {parse_metric(n).kind for n, _ in names.values()} == {"precision", "map", "mrr", "ndcg", "err", "rbp",
                                                                 "rbp_residual"}
    metrics = sorted({n for n, _ in names.values()})
    in_file_order = evaluate(scores, labels, offsets, metrics, empty_query="zero")
    frames = {}
    for rule in sorted(set(TIE_ORDER.values())):
        perm = _tool_order(docnos, scores, offsets, rule)
        frames[rule] = evaluate(scores[perm], labels[perm], offsets, metrics, empty_query="zero")
    tied = [i for i, q in enumerate(qids) if q >= "200"]
    assert len(qids) == 74 and len(tied) == 14
    assert all(len(set(scores[offsets[i]:offsets[i + 1]])) < offsets[i + 1] - offsets[i] for i in tied)
    checked, tie_rule_mattered = 0, defaultdict(int)
    for measure, (name, tol) in names.items():
        evaluator = _evaluator(measure)
        got = dict(zip(qids, frames[TIE_ORDER[evaluator]][name].to_numpy()))
        assert set(expected[measure]) == set(qids), measure
        worst = max(abs(got[q] - expected[measure][q]) for q in qids)
        assert worst <= tol, (measure, name, evaluator, worst)
        checked += len(qids)
        plain = in_file_order[name].to_numpy()
        tie_rule_mattered[evaluator] += sum(abs(plain[i] - expected[measure][qids[i]]) > tol for i in tied)
    assert checked == 28 * 74
    # the docno rules rank tied documents differently from the file order on these queries
    assert tie_rule_mattered["cwl"] == 0 and min(tie_rule_mattered[e] for e in ("trec_eval", "msmarco", "gdeval")) > 0


def test_err_equals_the_yahoo_challenge_definition_worked_by_hand():
    """Grades 3, 0, 4, 1 in predicted order: R = (2^g - 1) / 16 = 7/16, 0, 15/16, 1/16 and
    ERR = 7/16 + (1/2)(0)(9/16) + (1/3)(15/16)(9/16) + (1/4)(1/16)(9/16)(1/16)
        = 0.4375 + 0 + 0.17578125 + 0.00054931640625 = 0.61383056640625."""
    scores, labels, offsets = np.array([4.0, 3.0, 2.0, 1.0]), np.array([3.0, 0.0, 4.0, 1.0]), np.array([0, 4])
    frame = evaluate(scores, labels, offsets, ["err@1", "err@2", "err@3", "err@4", "err@max"])
    assert frame["err@1"][0] == 0.4375 and frame["err@2"][0] == 0.4375
    assert frame["err@3"][0] == pytest.approx(0.61328125, abs=1e-15)
    assert frame["err@4"][0] == pytest.approx(0.61383056640625, abs=1e-15) == frame["err@max"][0]
    # a grade-4 document first: the reader always stops there (R = 15/16 of the Yahoo! scale)
    top = evaluate(np.array([2.0, 1.0]), np.array([4.0, 4.0]), np.array([0, 2]), ["err@max"])
    assert top["err@max"][0] == pytest.approx(15 / 16 + (1 / 2) * (15 / 16) * (1 / 16), abs=1e-15)
    with pytest.raises(ValueError, match=r"err@10: ERR grades labels 0-4.*row 1 \(query 0\).*5.0"):
        evaluate(np.array([1.0, 2.0]), np.array([1.0, 5.0]), np.array([0, 2]), ["err@10"])


def test_rbp_and_its_residual_worked_by_hand():
    """Relevant at ranks 1 and 3 of 3, p = 0.5: RBP = 0.5 (1 + 0.25) = 0.625, residual 0.5^3."""
    frame = evaluate(np.array([3.0, 2.0, 1.0]), np.array([1.0, 0.0, 2.0]), np.array([0, 3]),
                     ["rbp@0.5", "rbp_residual@0.5"])
    assert frame["rbp@0.5"][0] == 0.625 and frame["rbp_residual@0.5"][0] == 0.125
    # a ranking of relevant documents only gains 1 - residual: RBP + residual = 1
    full = evaluate(np.arange(7.0), np.ones(7), np.array([0, 7]), ["rbp@0.8", "rbp_residual@0.8"])
    assert full["rbp@0.8"][0] + full["rbp_residual@0.8"][0] == pytest.approx(1.0, abs=1e-15)


def test_names_and_directions_of_the_new_metrics():
    from bench.metrics import higher_is_better

    assert parse_metric("err@max").k is None and parse_metric("dcg@5").k == 5
    assert parse_metric("map@10").kind == "map" and parse_metric("rbp@0.95").p == 0.95
    for bad in ("rbp@1", "rbp@0", "rbp@0.0", "rbp@1.5", "err", "dcg", "mrr@0", "map@max"):
        with pytest.raises(ValueError, match="valid forms"):
            parse_metric(bad)
    assert [higher_is_better(m) for m in ("err@10", "dcg@10", "rbp@0.8", "mrr@10", "map@10")] == [True] * 5
    assert not higher_is_better("rbp_residual@0.8")


def _reference(ranked: list[float], name: str) -> float:
    spec = parse_metric(name)
    n = len(ranked)
    k = n if spec.k is None else min(spec.k, n)
    rel = [1.0 if y >= 1 else 0.0 for y in ranked]
    if spec.kind == "err":
        value, go_on = 0.0, 1.0
        for j in range(k):
            stop = (2 ** ranked[j] - 1) / 16
            value += go_on * stop / (j + 1)
            go_on *= 1 - stop
        return value
    if spec.kind == "rbp":
        return (1 - spec.p) * sum(r * spec.p**j for j, r in enumerate(rel))
    if spec.kind == "dcg":
        return sum((2 ** ranked[j] - 1) / math.log2(j + 2) for j in range(k))
    if spec.kind == "mrr":
        return next((1 / (j + 1) for j in range(k) if rel[j]), 0.0)
    if spec.kind == "map":
        hits = np.cumsum(rel)
        return sum(rel[j] * hits[j] / (j + 1) for j in range(k)) / sum(rel) if sum(rel) else 0.0
    raise AssertionError(name)


def test_expected_ties_match_a_brute_force_over_all_orders():
    rng = np.random.default_rng(3)
    names = ["err@1", "err@3", "err@max", "rbp@0.7", "dcg@2", "dcg@max", "mrr@2", "map@3"]
    lists = []
    for _ in range(60):
        n = int(rng.integers(1, 8))
        lists.append((rng.integers(0, 3, n).astype(float), rng.integers(0, 5, n).astype(float)))
    lists.append((np.zeros(7), np.array([4.0, 0, 1, 3, 0, 2, 4])))  # one tie group of 7: 5040 orders
    scores = np.concatenate([s for s, _ in lists])
    labels = np.concatenate([y for _, y in lists])
    offsets = np.cumsum([0] + [len(s) for s, _ in lists])
    frame = evaluate(scores, labels, offsets, names, ties="expected", empty_query="zero")
    stable = evaluate(scores, labels, offsets, names, ties="stable", empty_query="zero")
    for q, (s, y) in enumerate(lists):
        keys = sorted(set(s), reverse=True)
        blocks = [[lab for sc, lab in zip(s, y) if sc == key] for key in keys]
        orders = [[lab for block in order for lab in block]
                  for order in itertools.product(*(itertools.permutations(b) for b in blocks))]
        for name in names:
            want = sum(_reference(o, name) for o in orders) / len(orders)
            assert frame[name][q] == pytest.approx(want, abs=1e-12), (name, s, y)
            first = [lab for _, _, lab in sorted(zip(-s, range(len(s)), y))]  # file order within ties
            assert stable[name][q] == pytest.approx(_reference(first, name), abs=1e-12), (name, s, y)

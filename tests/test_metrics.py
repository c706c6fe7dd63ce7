"""Tests of ``bench.metrics`` against hand computations, a brute-force reference and the
GBDT libraries' own evaluators (see test_metrics_gbdt.py for LightGBM / XGBoost)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import bench.metrics as M
from bench.metrics import conventions_caption, evaluate, higher_is_better, parse_metric, ranking

ALL = ["ndcg@1", "ndcg@3", "ndcg@10", "ndcg@max", "mrr", "opa", "opa_arf", "arp",
       "recall@3@2", "recall@5@3", "recall_arf@5@3", "map", "precision@1", "precision@5"]


# ------------------------------------------------------------------------------------------
# brute-force reference: one query at a time, straight from the definitions


def _metric_of_ranking(ranked: list[float], name: str, empty_query: str) -> tuple[float, bool]:
    """Metric value of ONE query given its labels in ranked order; (value, dropped)."""
    spec = parse_metric(name)
    n = len(ranked)
    ideal = sorted(ranked, reverse=True)
    rel = [1.0 if v >= 1 else 0.0 for v in ranked]

    def empty(value_if_not, is_empty):
        if not is_empty:
            return value_if_not, False
        return {"one": (1.0, False), "zero": (0.0, False), "drop": (0.0, True)}[empty_query]

    if spec.kind == "ndcg":
        k = n if spec.k is None else min(spec.k, n)
        dcg = sum((2 ** ranked[j] - 1) / math.log2(j + 2) for j in range(k))
        idcg = sum((2 ** ideal[j] - 1) / math.log2(j + 2) for j in range(k))
        return empty(dcg / idcg if idcg > 0 else 0.0, idcg <= 0)
    if spec.kind == "mrr":
        for j, r in enumerate(rel):
            if r:
                return 1.0 / (j + 1), False
        return 0.0, False
    if spec.kind == "precision":
        return sum(rel[: spec.k]) / spec.k, False
    if spec.kind == "map":
        hits, total = 0, 0.0
        for j, r in enumerate(rel):
            if r:
                hits += 1
                total += hits / (j + 1)
        return empty(total / hits if hits else 0.0, hits == 0)
    if spec.kind == "arp":
        s = sum(ranked)
        return (sum(v * (j + 1) for j, v in enumerate(ranked)) / s, False) if s > 0 else (0.0, True)
    if spec.kind in ("opa", "opa_arf"):
        correct = distinct = concordant = pairs = 0
        for a in range(n):  # a is ranked above b
            for b in range(a + 1, n):
                pairs += 1
                if ranked[a] != ranked[b]:
                    distinct += 1
                correct += ranked[a] > ranked[b]
                concordant += ranked[a] >= ranked[b]
        if spec.kind == "opa":
            return (correct / distinct, False) if distinct else (0.0, True)
        return (concordant / pairs, False) if pairs else (0.0, True)
    if spec.kind in ("recall", "recall_arf"):
        if n == 0:
            return 0.0, True
        k = min(spec.k, n)  # the true top-k of a list shorter than k is the whole list
        kth = ideal[k - 1]
        above = sum(v > kth for v in ranked)
        tied = sum(v == kth for v in ranked)
        w = [1.0 if v > kth else (k - above) / tied if v == kth else 0.0 for v in ranked]
        return sum(w[: spec.m]) / (k if spec.kind == "recall" else spec.k), False
    raise AssertionError(name)


def _reference(scores, labels, offsets, name, empty_query="one", ties="stable"):
    values, dropped = [], []
    for q in range(len(offsets) - 1):
        s = list(scores[offsets[q]: offsets[q + 1]])
        y = list(labels[offsets[q]: offsets[q + 1]])
        if ties == "stable":
            order = sorted(range(len(s)), key=lambda i: (-s[i], i))
            v, d = _metric_of_ranking([y[i] for i in order], name, empty_query)
        else:  # average over every order of the tie groups
            groups = [list(g) for _, g in itertools.groupby(
                sorted(range(len(s)), key=lambda i: -s[i]), key=lambda i: s[i])]
            outcomes = [
                _metric_of_ranking([y[i] for grp in combo for i in grp], name, empty_query)
                for combo in itertools.product(*[itertools.permutations(g) for g in groups])
            ]
            v = float(np.mean([o[0] for o in outcomes]))
            d = outcomes[0][1] if outcomes else _metric_of_ranking([], name, empty_query)[1]
            if not outcomes:
                v = _metric_of_ranking([], name, empty_query)[0]
        values.append(v)
        dropped.append(d)
    return np.array(values), np.array(dropped)


def _random_split(rng, n_queries, max_len, n_levels=5, score_levels=None, min_len=1):
    lengths = rng.integers(min_len, max_len + 1, size=n_queries)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    labels = rng.integers(0, n_levels, size=offsets[-1]).astype(np.float64)
    if score_levels is None:
        scores = rng.normal(size=offsets[-1])
    else:
        scores = rng.integers(0, score_levels, size=offsets[-1]).astype(np.float64)
    return scores, labels, offsets


# ------------------------------------------------------------------------------------------
# contract


def test_columns_dtypes_and_query_ids():
    scores = np.array([0.3, 0.2, 0.9, 0.1, 0.5])
    labels = np.array([1.0, 0.0, 2.0, 0.0, 0.0])
    offsets = np.array([0, 3, 5])
    df = evaluate(scores, labels, offsets, ["ndcg@10", "opa", "recall@30@15"],
                  query_ids=np.array([17, 4]))
    assert list(df.columns) == ["query", "ndcg@10", "opa", "recall@30@15", "ndcg@10:dropped",
                                "opa:dropped", "recall@30@15:dropped"]
    assert df["query"].dtype == np.int64 and df["query"].tolist() == [17, 4]
    assert all(df[m].dtype == np.float64 for m in ["ndcg@10", "opa", "recall@30@15"])
    assert all(df[m + ":dropped"].dtype == bool for m in ["ndcg@10", "opa", "recall@30@15"])
    assert df["opa:dropped"].tolist() == [False, True]  # second query: all labels 0
    assert df["opa"][1] == 0.0


def test_unknown_metric_lists_valid_forms():
    for bad in ["ndcg@0", "NDCG@10", "recall@5", "auc", "precision@max"]:
        with pytest.raises(ValueError, match="valid forms.*ndcg@K"):
            evaluate(np.zeros(1), np.zeros(1), np.array([0, 1]), [bad])
    with pytest.raises(ValueError, match="valid forms"):
        higher_is_better("ndcg")


def test_higher_is_better_and_caption():
    assert [higher_is_better(m) for m in ALL] == [m != "arp" for m in ALL]
    text = conventions_caption("drop", "expected")
    assert "excluded" in text and "McSherry" in text
    assert "score 1" in conventions_caption() and "stable sort" in conventions_caption()
    with pytest.raises(ValueError, match="empty_query"):
        conventions_caption("half")


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="NaN.*row 1, query 0"):
        evaluate(np.array([0.0, np.nan]), np.zeros(2), np.array([0, 2]), ["mrr"])
    with pytest.raises(ValueError, match="labels must be finite and >= 0; row 0"):
        evaluate(np.zeros(2), np.array([-1.0, 0.0]), np.array([0, 2]), ["mrr"])
    with pytest.raises(ValueError, match="end at the number of documents"):
        evaluate(np.zeros(2), np.zeros(2), np.array([0, 3]), ["mrr"])
    with pytest.raises(ValueError, match="equal length"):
        evaluate(np.zeros(2), np.zeros(3), np.array([0, 2]), ["mrr"])
    with pytest.raises(ValueError, match="requested twice"):
        evaluate(np.zeros(2), np.zeros(2), np.array([0, 2]), ["mrr", "mrr"])
    with pytest.raises(ValueError, match="ties="):
        evaluate(np.zeros(2), np.zeros(2), np.array([0, 2]), ["mrr"], ties="random")
    with pytest.raises(ValueError, match="overflows"):
        evaluate(np.zeros(2), np.array([0.0, 2000.0]), np.array([0, 2]), ["ndcg@1"])
    with pytest.raises(ValueError, match="query_ids"):
        evaluate(np.zeros(2), np.zeros(2), np.array([0, 2]), ["mrr"], query_ids=np.array([1, 2]))


# ------------------------------------------------------------------------------------------
# hand-computed cases (tolerance 1e-12)


def _one(scores, labels, metric, **kw):
    df = evaluate(np.asarray(scores, float), np.asarray(labels, float),
                  np.array([0, len(scores)]), [metric], **kw)
    return float(df[metric][0]), bool(df[metric + ":dropped"][0])


def test_mrr_hand():
    assert _one([3, 2, 1], [0, 0, 2], "mrr") == (pytest.approx(1 / 3, abs=1e-12), False)
    assert _one([3, 2, 1], [0, 0.5, 0], "mrr") == (0.0, False)  # 0.5 is not relevant
    # ties: items 0,1 tied at top, one relevant -> stable rank 2, expected (1 + 1/2)/2
    assert _one([1, 1, 0], [0, 1, 0], "mrr")[0] == pytest.approx(0.5, abs=1e-12)
    assert _one([1, 1, 0], [0, 1, 0], "mrr", ties="expected")[0] == pytest.approx(0.75, abs=1e-12)


def test_opa_and_opa_arf_hand():
    # ranked labels [2, 0, 1, 1]: pairs with different labels: (2,0) ok, (2,1) ok x2,
    # (0,1) wrong x2 -> OPA 3/5; label-tied pair (1,1) also concordant -> ARF 4/6
    s, y = [4, 3, 2, 1], [2, 0, 1, 1]
    assert _one(s, y, "opa")[0] == pytest.approx(3 / 5, abs=1e-12)
    assert _one(s, y, "opa_arf")[0] == pytest.approx(4 / 6, abs=1e-12)
    # all labels equal -> OPA dropped; ARF 1; single item -> ARF dropped
    assert _one([1, 2, 3], [1, 1, 1], "opa") == (0.0, True)
    assert _one([1, 2, 3], [1, 1, 1], "opa_arf") == (1.0, False)
    assert _one([1.0], [2.0], "opa_arf") == (0.0, True)
    # constant scorer: stable follows the file order, expected gives 1/2 per pair
    assert _one([0, 0, 0], [0, 1, 2], "opa")[0] == 0.0
    assert _one([0, 0, 0], [0, 1, 2], "opa", ties="expected")[0] == pytest.approx(0.5)
    assert _one([0, 0, 0], [0, 1, 1], "opa_arf", ties="expected")[0] == pytest.approx(2 / 3)


def test_arp_hand():
    # ranked labels [0, 2, 1]: (0*1 + 2*2 + 1*3) / 3
    assert _one([3, 2, 1], [0, 2, 1], "arp")[0] == pytest.approx(7 / 3, abs=1e-12)
    assert _one([3, 2, 1], [0, 0, 0], "arp") == (0.0, True)


def test_recall_hand_with_label_ties_at_k_boundary():
    # labels sorted: 3, 2, 1, 1, 1, 0; k = 3: item with 3 and 2 are in (w=1), the three
    # 1-labels share the remaining place (w=1/3 each)
    labels = [1, 3, 1, 0, 2, 1]
    scores = [6, 5, 4, 3, 2, 1]  # predicted top-2 = labels [1, 3]
    assert _one(scores, labels, "recall@2@3")[0] == pytest.approx((1 / 3 + 1) / 3, abs=1e-12)
    # predicted top-4 = labels [1, 3, 1, 0]
    assert _one(scores, labels, "recall@4@3")[0] == pytest.approx((2 / 3 + 1) / 3, abs=1e-12)
    # perfect ranking reaches 1 when m >= k
    assert _one([3, 2, 1], [2, 1, 0], "recall@2@2")[0] == pytest.approx(1.0)
    # list shorter than k: divide by n, so a full list recovers everything
    assert _one([1, 0], [1, 0], "recall@5@10")[0] == pytest.approx(1.0)
    # all labels zero: every item shares the k places -> m/n
    assert _one([4, 3, 2, 1], [0, 0, 0, 0], "recall@1@2")[0] == pytest.approx(0.25)


def test_recall_arf_divides_by_k_hand():
    """ARF eq. 4 (``recall_arf@m@k``): (1/k) * #(predicted top-m AND true top-k); the
    suite's ``recall@m@k`` divides by min(k, n) instead. Worked by hand:"""
    # n = 4 < k = 5: the true top-5 is the whole list; predicted top-3 (scores) holds 3 of them
    scores, labels = [0.9, 0.8, 0.1, 0.5], [3, 0, 2, 1]
    assert _one(scores, labels, "recall_arf@3@5")[0] == pytest.approx(3 / 5, abs=1e-15)
    assert _one(scores, labels, "recall@3@5")[0] == pytest.approx(3 / 4, abs=1e-15)
    # a perfect ranking of a list of 2 with k = 10: 2/10 under eq. 4, 1 under min(k, n)
    assert _one([1, 0], [1, 0], "recall_arf@5@10")[0] == pytest.approx(0.2, abs=1e-15)
    # n >= k: the two agree (label ties at the k-th place share it: 3 ones share 1 place)
    labels = [1, 3, 1, 0, 2, 1]
    scores = [6, 5, 4, 3, 2, 1]
    for m in (2, 4):
        assert _one(scores, labels, f"recall_arf@{m}@3") == _one(scores, labels, f"recall@{m}@3")
    assert _one(scores, labels, "recall_arf@2@3")[0] == pytest.approx((1 / 3 + 1) / 3, abs=1e-12)
    # a query without documents is dropped under both
    df = evaluate(np.array([1.0]), np.array([1.0]), np.array([0, 0, 1]), ["recall_arf@2@2", "recall@2@2"])
    assert df["recall_arf@2@2:dropped"].tolist() == [True, False] == df["recall@2@2:dropped"].tolist()
    assert df["recall_arf@2@2"].tolist() == [0.0, 0.5] and df["recall@2@2"].tolist() == [0.0, 1.0]
    assert parse_metric("recall_arf@30@15") == M.MetricSpec("recall_arf@30@15", "recall_arf", 15, 30)
    assert higher_is_better("recall_arf@30@15")


def test_recall_caption_names_the_denominator():
    assert "min(k, list length)" in conventions_caption()
    arf = conventions_caption(metrics=["recall_arf@30@15", "ndcg@15"])
    assert "ARF eq. 4" in arf and "divides by k" in arf and "min(k, list length)" not in arf
    both = conventions_caption(metrics=["recall_arf@30@15", "recall@30@15"])
    assert "ARF eq. 4" in both and "min(k, list length)" in both


def test_map_precision_ndcg_hand():
    # ranked relevance [1, 0, 1, 0]: AP = (1/1 + 2/3) / 2
    assert _one([4, 3, 2, 1], [1, 0, 2, 0], "map")[0] == pytest.approx((1 + 2 / 3) / 2)
    assert _one([4, 3, 2, 1], [1, 0, 2, 0], "precision@3")[0] == pytest.approx(2 / 3)
    assert _one([4, 3, 2, 1], [1, 0, 2, 0], "precision@10")[0] == pytest.approx(2 / 10)
    dcg = 1 + 3 / math.log2(4)
    idcg = 3 + 1 / math.log2(3)
    assert _one([4, 3, 2, 1], [1, 0, 2, 0], "ndcg@3")[0] == pytest.approx(dcg / idcg, abs=1e-12)
    assert _one([4, 3, 2, 1], [1, 0, 2, 0], "ndcg@1")[0] == pytest.approx(1 / 3, abs=1e-12)


def test_empty_query_conventions():
    scores, labels = np.array([1.0, 2, 3, 4]), np.array([0.0, 0, 1, 0])
    offsets = np.array([0, 2, 4])
    for conv, value, drop in [("one", 1.0, False), ("zero", 0.0, False), ("drop", 0.0, True)]:
        df = evaluate(scores, labels, offsets, ["ndcg@5", "map", "mrr"], empty_query=conv)
        assert df["ndcg@5"][0] == value and df["ndcg@5:dropped"][0] == drop
        assert df["map"][0] == value and df["map:dropped"][0] == drop
        assert df["mrr"][0] == 0.0 and not df["mrr:dropped"][0]  # mrr: 0, never dropped
        assert df["ndcg@5"][1] == pytest.approx(1 / math.log2(3))


def test_zero_length_queries_and_empty_split():
    offsets = np.array([0, 0, 2, 2])
    df = evaluate(np.array([1.0, 0.0]), np.array([1.0, 0.0]), offsets, ALL, empty_query="drop")
    assert len(df) == 3 and not df[ALL].isna().any().any()
    assert df.loc[0, [m + ":dropped" for m in ["ndcg@1", "opa", "arp", "recall@3@2", "map"]]].all()
    assert df["ndcg@1"][1] == 1.0
    empty = evaluate(np.zeros(0), np.zeros(0), np.array([0]), ALL)
    assert len(empty) == 0 and list(empty.columns)[:2] == ["query", "ndcg@1"]


# ------------------------------------------------------------------------------------------
# vectorised == brute force


@pytest.mark.parametrize("empty_query", ["one", "zero", "drop"])
def test_stable_matches_reference(rng, empty_query):
    scores, labels, offsets = _random_split(rng, 60, 25, score_levels=6)
    df = evaluate(scores, labels, offsets, ALL, empty_query=empty_query)
    for m in ALL:
        ref, dropped = _reference(scores, labels, offsets, m, empty_query)
        np.testing.assert_allclose(df[m], ref, atol=1e-12, err_msg=m)
        np.testing.assert_array_equal(df[m + ":dropped"], dropped, err_msg=m)


def test_expected_ties_match_brute_force_over_all_orders(rng):
    # short lists with heavy ties so that every tie order can be enumerated
    scores, labels, offsets = _random_split(rng, 40, 7, n_levels=3, score_levels=3)
    df = evaluate(scores, labels, offsets, ALL, ties="expected")
    for m in ALL:
        ref, dropped = _reference(scores, labels, offsets, m, ties="expected")
        np.testing.assert_allclose(df[m], ref, atol=1e-10, err_msg=m)
        np.testing.assert_array_equal(df[m + ":dropped"], dropped, err_msg=m)


def test_expected_equals_stable_without_ties(rng):
    scores, labels, offsets = _random_split(rng, 50, 40)
    a = evaluate(scores, labels, offsets, ALL)
    b = evaluate(scores, labels, offsets, ALL, ties="expected")
    pd.testing.assert_frame_equal(a, b, atol=1e-12, rtol=0)


def test_many_label_levels_use_merge_counter(rng, monkeypatch):
    # continuous labels take the merge pair counter; it must agree with the brute force
    scores, labels, offsets = _random_split(rng, 30, 40, score_levels=8)
    labels = np.round(rng.uniform(0, 3, size=len(labels)), 1)
    for ties in ["stable", "expected"]:
        df = evaluate(scores, labels, offsets, ["opa", "opa_arf"], ties=ties)
        monkeypatch.setattr(ranking, "MAX_LEVELS_FOR_LEVEL_COUNTER", 10**6)
        level = evaluate(scores, labels, offsets, ["opa", "opa_arf"], ties=ties)
        monkeypatch.undo()
        pd.testing.assert_frame_equal(df, level, atol=1e-12, rtol=0)
    ref, _ = _reference(scores, labels, offsets, "opa")
    np.testing.assert_allclose(evaluate(scores, labels, offsets, ["opa"])["opa"], ref, atol=1e-12)


def test_long_lists_never_nan(rng):
    scores, labels, offsets = _random_split(rng, 20, 1300, score_levels=50, min_len=1)
    df = evaluate(scores, labels, offsets, ALL + ["recall@30@15"], ties="expected")
    assert not df.isna().any().any()
    assert ((df[["ndcg@10", "mrr", "opa", "opa_arf", "map"]] >= 0) &
            (df[["ndcg@10", "mrr", "opa", "opa_arf", "map"]] <= 1 + 1e-12)).all().all()


def test_summarize_skips_dropped():
    df = evaluate(np.array([1.0, 0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0, 0.0]),
                  np.array([0, 2, 4]), ["opa", "arp"])
    assert M.summarize(df) == {"opa": 1.0, "arp": 1.0}
    df2 = evaluate(np.array([1.0]), np.array([0.0]), np.array([0, 1]), ["opa"])
    assert math.isnan(M.summarize(df2)["opa"])


def test_packed_sort_equals_generic_sort(rng, monkeypatch):
    # float32-exact scores take the packed uint64 sort; float64 scores the generic one.
    # Both must give the same ranking (ties by position, -0.0 tied with +0.0, infinities).
    scores, labels, offsets = _random_split(rng, 80, 60)
    scores = np.round(scores, 1).astype(np.float32).astype(np.float64)
    scores[:40] = rng.choice([0.0, -0.0, np.inf, -np.inf, 1e-30, -1e-30], size=40)
    fast = evaluate(scores, labels, offsets, ALL)
    monkeypatch.setattr(np, "array_equal", lambda a, b: False)  # force the generic sort
    generic = evaluate(scores, labels, offsets, ALL)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(fast, generic, atol=0, rtol=0)
    ref, _ = _reference(scores, labels, offsets, "ndcg@3")
    np.testing.assert_allclose(fast["ndcg@3"], ref, atol=1e-12)


def test_cutoffs_between_head_and_full_list(rng):
    # k <= 64 uses the dense head, 64 < k < list length the mask path, k >= length the sum
    metrics = ["ndcg@64", "ndcg@65", "ndcg@100", "precision@80", "recall@70@50", "map", "mrr"]
    scores, labels, offsets = _random_split(rng, 12, 300, score_levels=40, min_len=50)
    df = evaluate(scores, labels, offsets, metrics)
    for m in metrics:
        ref, _ = _reference(scores, labels, offsets, m)
        np.testing.assert_allclose(df[m], ref, atol=1e-12, err_msg=m)
    # expected ties on long lists lie between the worst and the best tie-breaking
    expected = evaluate(scores, labels, offsets, metrics, ties="expected")
    best = evaluate(scores + 1e-3 * labels, labels, offsets, metrics)
    worst = evaluate(scores - 1e-3 * labels, labels, offsets, metrics)
    for m in metrics:
        assert (worst[m] <= expected[m] + 1e-12).all() and (expected[m] <= best[m] + 1e-12).all()
        assert (worst[m] < best[m]).any(), m  # ties do matter here

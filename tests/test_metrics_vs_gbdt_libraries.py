"""``bench.metrics`` against LightGBM's and XGBoost's own evaluators, query by query.

Technique: the scores to evaluate are the *initial margin* of each document
(LightGBM ``init_score``, XGBoost ``base_margin``) and the booster has zero trees
(LightGBM: ``lgb.Booster(params, train_set)`` before any iteration; XGBoost:
``xgb.train(..., num_boost_round=0)``), so the library evaluates exactly our scores.
Per-query values come from giving every query its own validation set (all sets are
evaluated in one call). Tolerance 1e-6 (LightGBM's float labels / XGBoost's float32
margins are exact here because the scores are float32-representable).

Ties: LightGBM sorts with ``std::stable_sort`` (ties by position), the suite's ``stable``
convention, so ties are compared. XGBoost documents no tie order; it is compared on
distinct scores only (in our runs with xgboost 3.2 on CPU it also followed positions).
Both libraries score a query without relevant documents as 1 (``empty_query="one"``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from bench.metrics import evaluate

lgb = pytest.importorskip("lightgbm")
xgb = pytest.importorskip("xgboost")

KS = [1, 3, 5, 10]


def _split(rng, n_queries=240, ties=False):
    """Lists of length 1..500 (many short, some long), some all-zero queries."""
    lengths = np.concatenate([
        np.ones(10, dtype=np.int64),
        rng.integers(2, 30, size=n_queries - 30),
        rng.integers(100, 501, size=20),
    ])
    rng.shuffle(lengths)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    n = int(offsets[-1])
    labels = rng.integers(0, 5, size=n).astype(np.float64)
    for q in rng.choice(n_queries, size=15, replace=False):  # empty queries
        labels[offsets[q]: offsets[q + 1]] = 0.0
    if ties:
        scores = rng.integers(0, 4, size=n).astype(np.float64)
    else:
        scores = rng.permutation(n).astype(np.float32).astype(np.float64)  # distinct
    return scores, labels, offsets


def _lightgbm_per_query(scores, labels, offsets, metric, eval_at):
    params = {"objective": "lambdarank", "metric": metric, "eval_at": eval_at,
              "verbose": -1, "num_threads": 1}
    x = np.zeros((len(scores), 1))
    train = lgb.Dataset(x, label=labels, group=np.diff(offsets), init_score=scores,
                        params=params, free_raw_data=False)
    booster = lgb.Booster(params, train)
    assert booster.current_iteration() == 0
    for q in range(len(offsets) - 1):
        a, b = offsets[q], offsets[q + 1]
        booster.add_valid(lgb.Dataset(x[a:b], label=labels[a:b], group=[b - a],
                                      init_score=scores[a:b], reference=train,
                                      params=params), f"q{q}")
    out = {}
    for res in booster.eval_valid():
        out.setdefault(res.metric_name, {})[int(res.dataset_name[1:])] = res.metric_value
    whole = {res.metric_name: res.metric_value for res in booster.eval_train()}
    per_query = {k: np.array([v[q] for q in range(len(offsets) - 1)]) for k, v in out.items()}
    return per_query, whole


@pytest.mark.parametrize("ties", [False, True])
def test_ndcg_equals_lightgbm_per_query(rng, ties):
    scores, labels, offsets = _split(rng, ties=ties)
    per_query, whole = _lightgbm_per_query(scores, labels, offsets, "ndcg", KS + [500])
    df = evaluate(scores, labels, offsets, [f"ndcg@{k}" for k in KS] + ["ndcg@max"])
    for k in KS:
        np.testing.assert_allclose(df[f"ndcg@{k}"], per_query[f"ndcg@{k}"], atol=1e-6)
        assert df[f"ndcg@{k}"].mean() == pytest.approx(whole[f"ndcg@{k}"], abs=1e-6)
    # k >= the longest list is the untruncated NDCG
    np.testing.assert_allclose(df["ndcg@max"], per_query["ndcg@500"], atol=1e-6)
    if ties:  # the tie rule matters here: averaging over tie orders gives other numbers
        expected = evaluate(scores, labels, offsets, ["ndcg@10"], ties="expected")
        assert np.abs(expected["ndcg@10"] - per_query["ndcg@10"]).max() > 1e-3


@pytest.mark.parametrize("ties", [False, True])
def test_map_equals_lightgbm_per_query(rng, ties):
    # LightGBM map@k divides by min(#relevant, k) and relevance is label > 0.5: for integer
    # labels and k >= list length that is exactly average precision with label >= 1.
    scores, labels, offsets = _split(rng, n_queries=120, ties=ties)
    per_query, _ = _lightgbm_per_query(scores, labels, offsets, "map", [500])
    df = evaluate(scores, labels, offsets, ["map"])
    np.testing.assert_allclose(df["map"], per_query["map@500"], atol=1e-6)


def test_ndcg_equals_xgboost_per_query(rng):
    scores, labels, offsets = _split(rng, n_queries=200, ties=False)
    x = np.zeros((len(scores), 1), dtype=np.float32)
    params = {"objective": "rank:ndcg", "eval_metric": [f"ndcg@{k}" for k in KS], "nthread": 1}
    dtrain = xgb.DMatrix(x, label=labels, base_margin=scores)
    dtrain.set_group(np.diff(offsets))
    booster = xgb.train(params, dtrain, num_boost_round=0)
    evals = []
    for q in range(len(offsets) - 1):
        a, b = offsets[q], offsets[q + 1]
        d = xgb.DMatrix(x[a:b], label=labels[a:b], base_margin=scores[a:b])
        d.set_group([b - a])
        evals.append((d, f"q{q}"))
    text = booster.eval_set(evals)
    found = {m.group(1): float(m.group(2))
             for m in re.finditer(r"(q\d+-ndcg@\d+):([-+0-9.eE]+)", text)}
    df = evaluate(scores, labels, offsets, [f"ndcg@{k}" for k in KS])
    for k in KS:
        theirs = np.array([found[f"q{q}-ndcg@{k}"] for q in range(len(offsets) - 1)])
        np.testing.assert_allclose(df[f"ndcg@{k}"], theirs, atol=1e-6)

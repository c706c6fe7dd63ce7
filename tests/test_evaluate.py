"""The evaluate step: per-query metrics of runs, L_test sub-sampling shared by every method."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.data import load_prepared
from bench.data.prepare import prepare_fold
from bench.data.sublists import seeded_sublists
from bench.evaluate import evaluate_runs
from bench.metrics import evaluate


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("prep") / "syn" / "Fold1"
    prepare_fold("synthetic", "Fold1", out, {"n_queries": 6, "vali_queries": 3, "test_queries": 12,
                                              "list_length": [5, 30], "n_features": 6, "seed": 3}, log=lambda m: None)
    return out


def _run(tmp_path, name, scores):
    d = tmp_path / name
    d.mkdir()
    np.save(d / "scores.npy", scores.astype(np.float32))
    return {"method": name, "seed": 0, "dir": str(d)}


def test_full_lists_equal_a_direct_metrics_call(prepared, tmp_path, rng):
    test = load_prepared(prepared).splits["test"]
    scores = rng.normal(size=test.labels.shape[0])
    frame = evaluate_runs(prepared, [_run(tmp_path, "m", scores)], ["ndcg@5", "mrr"], dataset="syn", fold="Fold1")
    direct = evaluate(scores.astype(np.float32).astype(np.float64), np.asarray(test.labels, np.float64),
                      np.asarray(test.offsets), ["ndcg@5", "mrr"], query_ids=np.asarray(test.qids))
    assert list(frame.columns[:5]) == ["dataset", "fold", "seed", "method", "query"]
    assert (frame["dataset"] == "syn").all() and (frame["l_test"] == 0).all()
    pd.testing.assert_frame_equal(frame[direct.columns].reset_index(drop=True), direct)


def test_test_list_sizes_cut_every_query_the_same_way_for_every_method(prepared, tmp_path, rng):
    test = load_prepared(prepared).splits["test"]
    n = test.labels.shape[0]
    a, b = _run(tmp_path, "a", rng.normal(size=n)), _run(tmp_path, "b", rng.normal(size=n))
    frame = evaluate_runs(prepared, [a, b], ["ndcg@max"], dataset="syn", fold="Fold1", list_sizes=[4, 10])
    assert set(frame["dataset"]) == {"syn@Ltest=4", "syn@Ltest=10"}
    idx, off = seeded_sublists(np.asarray(test.offsets), 4, dataset="syn", fold="Fold1", split="test")
    assert np.all(np.diff(off) == np.minimum(np.diff(np.asarray(test.offsets)), 4))
    idx2, _ = seeded_sublists(np.asarray(test.offsets), 4, dataset="syn", fold="Fold1", split="test")
    assert np.array_equal(idx, idx2)  # seeded: the same documents for every method and run
    # oracle: the metric of method a at L_test = 4 is NDCG of exactly those documents
    sa = np.load(f"{a['dir']}/scores.npy").astype(np.float64)
    direct = evaluate(sa[idx], np.asarray(test.labels, np.float64)[idx], off, ["ndcg@max"])
    got = frame[(frame.method == "a") & (frame.dataset == "syn@Ltest=4")]["ndcg@max"].to_numpy()
    np.testing.assert_allclose(got, direct["ndcg@max"].to_numpy(), rtol=0, atol=0)


def test_bad_scores_are_refused_naming_the_file(prepared, tmp_path):
    test = load_prepared(prepared).splits["test"]
    scores = np.zeros(test.labels.shape[0])
    scores[3] = np.nan
    run = _run(tmp_path, "nan", scores)
    with pytest.raises(ValueError, match=r"nan/scores\.npy: non-finite score for test document 3"):
        evaluate_runs(prepared, [run], ["mrr"], dataset="syn", fold="Fold1")
    short = _run(tmp_path, "short", np.zeros(3))
    with pytest.raises(ValueError, match=r"short/scores\.npy: 3 scores for"):
        evaluate_runs(prepared, [short], ["mrr"], dataset="syn", fold="Fold1")


def test_cli_writes_parquet(prepared, tmp_path, capsys):
    from bench.cli import main

    test = load_prepared(prepared).splits["test"]
    run = _run(tmp_path, "m", np.arange(test.labels.shape[0], dtype=float))
    out = tmp_path / "out" / "e.parquet"
    assert main(["evaluate", "--prepared", str(prepared), "--dataset", "syn", "--fold", "Fold1",
                 "--runs", json.dumps([run]), "--metrics", "opa", "arp", "--out", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert {"opa", "arp", "opa:dropped", "arp:dropped"} <= set(frame.columns)
    assert main(["evaluate", "--prepared", str(prepared), "--dataset", "syn", "--fold", "Fold1",
                 "--runs", "[{\"method\": 1}]", "--metrics", "opa", "--out", str(out)]) == 2
    assert "--runs" in capsys.readouterr().err

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


def test_a_tools_convention_writes_pooling_weights_and_its_name(prepared, tmp_path, capsys):
    """``--convention tfranking`` (a PiRank table): TF-Ranking's values, the pooled metrics'
    weights beside them, the convention in every row; the statistics read the weights."""
    from bench.cli import main
    from bench.metrics import summarize
    from bench.results import read_frame
    from bench.stats import significance

    test = load_prepared(prepared).splits["test"]
    n = test.labels.shape[0]
    runs = [_run(tmp_path, "up", np.arange(n, dtype=float) % 3), _run(tmp_path, "down", -np.arange(n, dtype=float))]
    out = tmp_path / "tf" / "e.parquet"
    assert main(["evaluate", "--prepared", str(prepared), "--dataset", "syn", "--fold", "Fold1", "--runs",
                 json.dumps(runs), "--metrics", "opa", "arp", "ndcg@5", "--convention", "tfranking", "--out", str(out)]) == 0
    frame = read_frame(out)
    assert (frame["convention"] == "tfranking").all()
    assert {"opa:weight", "arp:weight"} <= set(frame.columns) and "ndcg@5:weight" not in frame.columns
    labels, offsets = np.asarray(test.labels, np.float64), np.asarray(test.offsets)
    up = frame[frame.method == "up"].reset_index(drop=True)
    direct = evaluate((np.arange(n) % 3).astype(float), labels, offsets, ["opa", "arp", "ndcg@5"],
                      convention="tfranking", query_ids=np.asarray(test.qids))
    pd.testing.assert_frame_equal(up[direct.columns], direct)
    pairs = np.diff(offsets)  # opa's weight: pairs with different labels, a function of the labels only
    assert np.array_equal(frame[frame.method == "down"]["opa:weight"].to_numpy(), up["opa:weight"].to_numpy())
    assert (up["opa:weight"].to_numpy() <= pairs * (pairs - 1) / 2).all()
    stats = significance(frame, ["opa", "arp"], n_boot=0).set_index(["metric", "method"])
    for metric in ("opa", "arp"):
        assert stats.loc[(metric, "up"), "mean"] == pytest.approx(summarize(up, [metric])[metric], rel=1e-12)


@pytest.fixture(scope="module")
def letor_fold(tmp_path_factory):
    """The LETOR oracle fixture (tests/fixtures/letor) prepared as a file-based fold."""
    import shutil

    from helpers import ROOT

    fixture = tmp_path_factory.mktemp("letor")  # a copy of the fixture files
    for name in ("random.test.txt", "random.scores.txt", "eval-4.0.txt"):
        shutil.copy(ROOT / "tests" / "fixtures" / "letor" / name, fixture / name)
    out = tmp_path_factory.mktemp("prep") / "letor" / "Fold1"
    prepare_fold("letor-fixture", "Fold1", out, {"vali_fraction": 0.5},
                 files={"train": fixture / "random.test.txt", "test": fixture / "random.test.txt"}, log=lambda m: None)
    scores = np.array([float(t) for t in (fixture / "random.scores.txt").read_text().split()])
    return out, scores, fixture


def test_letor4_convention_through_prepare_and_evaluate_equals_the_official_script(letor_fold, tmp_path):
    out, scores, fixture = letor_fold
    # scores.npy is float32: the cast is monotone and merges no two distinct scores, so the
    # ranking and its ties are those the official script saw
    assert len(np.unique(scores.astype(np.float32))) == len(np.unique(scores))
    names = ["ndcg@1", "ndcg@10", "precision@10", "map", "mean_ndcg", "mrr"]
    frame = evaluate_runs(out, [_run(tmp_path, "m", scores)], names, dataset="mq", fold="Fold1", convention="letor4")
    assert (frame["convention"] == "letor4").all()
    official = {}
    for line in (fixture / "eval-4.0.txt").read_text().splitlines():
        cells = line.split("\t")
        if cells[0] == "qid":
            header = cells[1:]
        elif cells[0] not in ("", "Average"):
            official.setdefault(int(cells[0]), {}).update(zip(header, map(float, cells[1:])))
    column = {"ndcg@1": "NDCG@1", "ndcg@10": "NDCG@10", "precision@10": "P@10", "map": "MAP", "mean_ndcg": "MeanNDCG"}
    for name, col in column.items():
        theirs = np.array([official[int(q)][col] for q in frame["query"]])
        assert np.abs(frame[name].to_numpy() - theirs).max() <= 5e-5 + 1e-12, name
    assert len(frame) == 60
    # mrr is not defined by Eval-Score-4.0.pl: graded the default way
    test = load_prepared(out).splits["test"]
    direct = evaluate(scores, np.asarray(test.labels, np.float64), np.asarray(test.offsets), ["mrr"])
    np.testing.assert_array_equal(frame["mrr"].to_numpy(), direct["mrr"].to_numpy())


def _finished_run(tmp_path, prepared, scores, name="run"):
    _run(tmp_path, name, scores)
    info = {"prepared_dir": str(prepared), "dataset_fingerprint": load_prepared(prepared).fingerprint}
    (tmp_path / name / "run.json").write_text(json.dumps(info))
    return tmp_path / name


def test_export_scores_writes_the_test_files_line_order(letor_fold, tmp_path):
    from bench.cli import main
    from bench.evaluate import export_scores

    out, scores, fixture = letor_fold
    run = _finished_run(tmp_path, out, scores)
    target = tmp_path / "scores.txt"
    assert main(["export-scores", "--run", str(run), "--out", str(target)]) == 0
    lines = target.read_text().splitlines()
    n_lines = len((fixture / "random.test.txt").read_bytes().splitlines())
    assert len(lines) == n_lines == export_scores(run, tmp_path / "again.txt")
    back = np.array([float(v) for v in lines])
    np.testing.assert_array_equal(back, scores.astype(np.float32).astype(np.float64))  # exact, file order
    # the official script would rank exactly as the suite: re-grading the exported file is identical
    test = load_prepared(out).splits["test"]
    names = ["ndcg@10", "precision@10", "map", "mean_ndcg"]
    direct = evaluate(back, np.asarray(test.labels, np.float64), np.asarray(test.offsets), names, convention="letor4")
    frame = evaluate_runs(out, [{"method": "run", "seed": 0, "dir": str(run)}], names, dataset="mq", fold="Fold1",
                          convention="letor4")
    np.testing.assert_array_equal(frame[names].to_numpy(), direct[names].to_numpy())


def test_export_scores_refuses_what_cannot_be_put_in_file_order(letor_fold, tmp_path):
    from bench.errors import UsageError
    from bench.evaluate import export_scores

    out, scores, fixture = letor_fold
    holes = scores.copy()
    holes[3] = np.nan
    with pytest.raises(UsageError, match="train.test_list_size"):
        export_scores(_finished_run(tmp_path, out, holes, "holes"), tmp_path / "x.txt")
    with pytest.raises(UsageError, match="1164 scores for the 1165 test documents"):
        export_scores(_finished_run(tmp_path, out, scores[:-1], "short"), tmp_path / "x.txt")
    arf = tmp_path / "prep-arf" / "Fold1"
    prepare_fold("letor-fixture", "Fold1", arf, {"arf_filter": True, "arf_min_docs": 2, "arf_min_positive": 1,
                                                 "arf_max_docs": 5, "vali_fraction": 0.5},
                 files={"train": fixture / "random.test.txt", "test": fixture / "random.test.txt"}, log=lambda m: None)
    n = load_prepared(arf).splits["test"].n_docs
    with pytest.raises(UsageError, match="arf_filter.*arf_splits"):
        export_scores(_finished_run(tmp_path, arf, np.zeros(n), "arf"), tmp_path / "x.txt")
    with pytest.raises(UsageError, match="fingerprint differs"):
        export_scores(_finished_run(tmp_path, out, scores, "moved"), tmp_path / "x.txt", prepared_dir=arf)
    assert not (tmp_path / "x.txt").exists()

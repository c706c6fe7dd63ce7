"""Least-squares linear regression (bench.training.linear): oracles, the penalty choice, the run.

Oracles: ``numpy.linalg.lstsq`` on ``[X, 1]`` at penalty 0 and scikit-learn's ``Ridge``
(``fit_intercept=True``) at positive penalties, both to 1e-8 (absolute, on coefficients of
order 1; float64 throughout); the chosen penalty is the argmax of the validation metric
recomputed here by ``bench.metrics`` directly.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bench.config.settings import resolve_linear
from bench.data import load_prepared
from bench.errors import ConfigError
from bench.metrics import evaluate, summarize
from bench.results import RUN_JSON_KEYS
from bench.training.cli import run_job
from bench.training.linear import best_index, predict, ridge_path
from helpers import make_letor_fold, make_prepared

METRICS = ["ndcg@1", "ndcg@10", "map"]
TOL = 1e-8


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


def _config(**method) -> dict:
    return {
        "train": {"early_stopping_metric": "ndcg@10"},
        "metrics": {"names": METRICS, "empty_query": "one", "ties": "stable"},
        "methods": {"lr": {"linear": "least_squares", **method}},
    }


def _data(n=400, d=7, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, size=d) + rng.normal(size=d)
    y = rng.integers(0, 3, size=n).astype(np.float64)
    return x, y


def test_penalty_zero_equals_numpy_lstsq_with_an_intercept_column():
    x, y = _data()
    w, b = ridge_path(x, y).coefficients(0.0)
    ref = np.linalg.lstsq(np.c_[x, np.ones(len(x))], y, rcond=None)[0]
    np.testing.assert_allclose(w, ref[:-1], rtol=0, atol=TOL)
    assert abs(b - ref[-1]) <= TOL


@pytest.mark.parametrize("penalty", [1e-3, 0.5, 7.0, 1e4])
def test_positive_penalty_equals_sklearn_ridge(penalty):
    from sklearn.linear_model import Ridge

    x, y = _data(seed=1)
    w, b = ridge_path(x.astype(np.float32), y).coefficients(penalty)  # float32 features, as prepared folds hold
    ref = Ridge(alpha=penalty, fit_intercept=True, solver="svd").fit(x.astype(np.float32).astype(np.float64), y)
    np.testing.assert_allclose(w, ref.coef_, rtol=0, atol=TOL)
    assert abs(b - ref.intercept_) <= TOL


def test_rank_deficient_features_fit_like_lstsq_and_get_zero_weight_when_constant():
    """A constant column and a duplicated column: the fitted values equal lstsq's (the minimiser
    is not unique, the fit is), the constant column's weight is 0 and the duplicates share."""
    x, y = _data(n=60, d=5, seed=2)
    x[:, 1] = 0.25
    x[:, 4] = x[:, 3]
    w, b = ridge_path(x, y).coefficients(0.0)
    a = np.c_[x, np.ones(len(x))]
    ref = np.linalg.lstsq(a, y, rcond=None)[0]
    np.testing.assert_allclose(predict(x, w, b), a @ ref, rtol=0, atol=1e-10)
    assert abs(w[1]) <= 1e-12 and abs(w[3] - w[4]) <= 1e-10


def test_fewer_documents_than_features_is_the_minimum_norm_fit():
    x, y = _data(n=4, d=9, seed=3)
    w, b = ridge_path(x, y).coefficients(0.0)
    xc, yc = x - x.mean(0), y - y.mean()
    np.testing.assert_allclose(w, np.linalg.pinv(xc) @ yc, rtol=0, atol=1e-10)
    np.testing.assert_allclose(predict(x, w, b), y, rtol=0, atol=1e-10)  # interpolates


def test_best_index_prefers_the_first_on_ties_and_treats_nan_as_worst():
    assert best_index([0.2, 0.5, 0.5], True) == 1
    assert best_index([float("nan"), 0.1], True) == 1
    assert best_index([2.0, 1.0, 1.0, float("nan")], False) == 1
    assert best_index([float("nan"), float("nan")], True) == 0


def test_run_chooses_the_argmax_of_validation_ndcg_and_writes_a_complete_run(prepared, tmp_path):
    grid = [0.0, 1.0, 100.0, 1e4, 1e6]
    out = run_job(_config(penalties=grid), prepared, tmp_path / "run", method="lr", seed=0, device="cpu",
                     quiet=True)
    info = json.loads((out / "run.json").read_text())
    assert set(RUN_JSON_KEYS) <= set(info) and info["kind"] == "linear"
    res = info["result"]
    # oracle: every penalty's validation NDCG@10 recomputed here, then the argmax
    fold = load_prepared(prepared)
    train, vali, test = (fold.splits[s] for s in ("train", "vali", "test"))
    path = ridge_path(train.features, train.labels)
    vali_means = []
    for p in grid:
        w, b = path.coefficients(p)
        frame = evaluate(predict(vali.features, w, b).astype(np.float32), np.asarray(vali.labels),
                         np.asarray(vali.offsets), ["ndcg@10"])
        vali_means.append(summarize(frame)["ndcg@10"])
    assert res["penalties"] == grid and np.allclose(res["vali_by_penalty"], vali_means, rtol=0, atol=1e-12)
    assert len(set(np.round(vali_means, 10))) > 1  # the grid matters on this fold
    assert res["penalty"] == grid[int(np.argmax(vali_means))] and res["best_vali"] == max(res["vali_by_penalty"])
    # the stored test scores are the chosen fit's, and the per-query frame grades them
    w, b = path.coefficients(res["penalty"])
    scores = np.load(out / "scores.npy")
    np.testing.assert_array_equal(scores, predict(test.features, w, b).astype(np.float32))
    np.testing.assert_allclose(res["weights"], w, rtol=0, atol=0)
    metrics = pd.read_parquet(out / "metrics.parquet")
    ref = evaluate(scores, np.asarray(test.labels), np.asarray(test.offsets), METRICS)
    np.testing.assert_array_equal(metrics["ndcg@10"].to_numpy(), ref["ndcg@10"].to_numpy())
    curve = pd.read_csv(out / "curve.csv")
    assert curve["penalty"].tolist() == grid and curve["vali_ndcg@10"].tolist() == res["vali_by_penalty"]
    assert info["protocol"]["penalties"] == grid and info["protocol"]["kind"] == "linear"
    # training-only timing: one pass over the training documents (the Gram matrix), no epochs
    assert info["train_docs"] == np.asarray(train.labels).shape[0] and info["seconds_per_epoch"] is None
    assert 0 < info["train_seconds"] < info["wall_time_s"]
    assert info["train_docs_per_s"] * info["train_seconds"] == pytest.approx(info["train_docs"], rel=1e-9)


def test_reruns_are_bit_identical(prepared, tmp_path):
    outs = [run_job(_config(), prepared, tmp_path / f"r{i}", method="lr", seed=0, device="cpu", quiet=True)
            for i in range(2)]
    assert (outs[0] / "scores.npy").read_bytes() == (outs[1] / "scores.npy").read_bytes()


def test_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"methods\.lr\.linear': 'lasso' is not one of"):
        resolve_linear(_config(linear="lasso"), "lr")
    with pytest.raises(ConfigError, match=r"methods\.lr\.penalties': \[\] should be non-empty"):
        resolve_linear(_config(penalties=[]), "lr")
    with pytest.raises(ConfigError, match=r"methods\.lr\.params: a linear method takes no params"):
        resolve_linear(_config(params={"alpha": 1}), "lr")
    with pytest.raises(ConfigError, match=r"methods\.lr\.lr': unknown key"):
        resolve_linear(_config(lr=0.1), "lr")
    with pytest.raises(ConfigError, match=r"methods\.lr\.early_stopping_metric': 'ndgc@10' does not match"):
        resolve_linear(_config(early_stopping_metric="ndgc@10"), "lr")


def test_cli_runs_and_export_scores_reads_the_run(prepared, tmp_path):
    """`ltr-bench linear` writes the run; `ltr-bench export-scores` writes one line per test document."""
    import yaml

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(_config(penalties=[0.0, 10.0])))
    run = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "bench.cli", "linear", "--prepared", str(prepared), "--out", str(run),
                          "--method", "lr", "--seed", "0", "--config", str(cfg), "--device", "cpu", "--quiet"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in run.iterdir()) == ["curve.csv", "digests.json", "metrics.parquet", "run.json", "scores.npy"]
    exported = tmp_path / "scores.txt"
    res = subprocess.run([sys.executable, "-m", "bench.cli", "export-scores", "--run", str(run), "--out",
                          str(exported)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    back = np.array([float(v) for v in exported.read_text().splitlines()])
    np.testing.assert_array_equal(back, np.load(run / "scores.npy").astype(np.float64))
    bad = subprocess.run([sys.executable, "-m", "bench.cli", "linear", "--prepared", str(prepared), "--out",
                          str(tmp_path / "bad"), "--method", "nope", "--seed", "0", "--config", str(cfg)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "methods.nope: unknown method" in bad.stderr
    assert not (tmp_path / "bad").exists()


@pytest.fixture(scope="module")
def letor_fold(tmp_path_factory):
    return make_letor_fold(tmp_path_factory.mktemp("letor"))


def test_letor4_graded_run_equals_grading_its_exported_scores(letor_fold, tmp_path):
    """Under the dataset's LETOR convention the run's per-query frame is what grading the
    exported score file gives (the file the official script would read)."""
    from bench.evaluate import export_scores

    names = [f"ndcg@{k}" for k in range(1, 11)] + ["map"]
    cfg = _config(penalties=[0.0, 1.0, 100.0])
    cfg["metrics"] = {"names": names, "empty_query": "one", "ties": "stable", "convention": "letor4"}
    run = run_job(cfg, letor_fold, tmp_path / "run", method="lr", seed=0, device="cpu", quiet=True)
    frame = pd.read_parquet(run / "metrics.parquet")
    assert (frame["convention"] == "letor4").all()
    n = export_scores(run, tmp_path / "scores.txt")
    back = np.array([float(v) for v in (tmp_path / "scores.txt").read_text().splitlines()])
    test = load_prepared(letor_fold).splits["test"]
    assert n == test.n_docs == back.size
    ref = evaluate(back, np.asarray(test.labels, np.float64), np.asarray(test.offsets), names, convention="letor4")
    np.testing.assert_array_equal(frame[names].to_numpy(), ref[names].to_numpy())
    info = json.loads((run / "run.json").read_text())
    assert info["config"]["metrics"]["convention"] == "letor4" and len(info["result"]["vali_by_penalty"]) == 3

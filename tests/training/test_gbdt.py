"""GBDT baselines on a tiny synthetic fold: both libraries, outputs, provenance, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.config.settings import resolve_gbdt
from bench.errors import ConfigError, LibraryError
from bench.results import RUN_JSON_KEYS
from bench.training.cli import run_job
from helpers import make_prepared

METRICS = ["ndcg@10", "mrr", "arp"]
# tiny data: the MSLR defaults (min hessian 100) would forbid every split
# (one thread each: OpenMP spin-waits crawl on a shared, oversubscribed 2-core box)
SMALL = {"lightgbm": {"num_leaves": 7, "min_sum_hessian_in_leaf": 1e-3, "min_data_in_leaf": 2, "num_threads": 1},
         "xgboost": {"max_depth": 3, "min_child_weight": 1e-3, "nthread": 1}}
METHODS = {
    "lgb_lambdarank": ("lightgbm", "lambdarank"),
    "lgb_xendcg": ("lightgbm", "rank_xendcg"),
    "xgb_pairwise": ("xgboost", "rank:pairwise"),
    "xgb_ndcg": ("xgboost", "rank:ndcg"),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


def _config() -> dict:
    return {
        "train": {"early_stopping_metric": "ndcg@10"},
        "metrics": {"names": METRICS},
        "methods": {
            name: {"gbdt": lib, "objective": obj, "params": dict(SMALL[lib]), "num_trees": 25,
                   "early_stopping_rounds": 5}
            for name, (lib, obj) in METHODS.items()
        },
    }


@pytest.mark.parametrize("method", list(METHODS))
def test_each_objective_trains_and_writes_a_complete_run(prepared, tmp_path, method):
    lib, objective = METHODS[method]
    out = run_job(_config(), prepared, tmp_path / "run", method=method, seed=0, device="cpu", quiet=True)
    assert sorted(p.name for p in out.iterdir()) == ["curve.csv", "digests.json", "metrics.parquet", "run.json", "scores.npy"]
    info = json.loads((out / "run.json").read_text())
    assert set(RUN_JSON_KEYS) <= set(info) and info["kind"] == "gbdt" and info["device"] == "cpu"
    params = info["library_parameters"]
    if lib == "lightgbm":
        model = params["model"]  # every parameter incl. defaults, from the saved model
        assert model["objective"] == objective and "lambdarank_truncation_level" in model
        assert float(model["min_sum_hessian_in_leaf"]) == pytest.approx(1e-3) and model["num_leaves"] == "7"
        assert params["booster_params"]["seed"] == info["library_seed"]
    else:
        learner = params["model"]["learner"]
        assert learner["objective"]["name"] == objective
        assert learner["gradient_booster"]["tree_train_param"]["max_depth"] == "3"
        assert "eta" in learner["gradient_booster"]["tree_train_param"]
    scores = np.load(out / "scores.npy")
    labels = np.load(prepared / "test" / "labels.npy")
    assert scores.dtype == np.float32 and scores.shape == labels.shape and np.isfinite(scores).all()
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert (metrics["method"] == method).all() and set(METRICS) <= set(metrics.columns)
    curve = pd.read_csv(out / "curve.csv")
    res = info["result"]
    assert len(curve) == res["rounds_trained"] >= res["best_iteration"]
    # early stopping keeps the round with the best validation metric (first one on ties)
    best = res["best_iteration"]
    assert curve["vali_ndcg@10"].iloc[best - 1] == curve["vali_ndcg@10"].max()
    assert res["best_vali"] == curve["vali_ndcg@10"].iloc[best - 1]
    # training-only timing: every boosting round goes through every training document
    assert info["train_docs"] == labels_count(prepared, "train") * res["rounds_trained"]
    assert 0 < info["train_seconds"] < info["wall_time_s"]
    assert info["train_docs_per_s"] * info["train_seconds"] == pytest.approx(info["train_docs"], rel=1e-9)
    assert info["seconds_per_epoch"] * res["rounds_trained"] == pytest.approx(info["train_seconds"], rel=1e-9)


def labels_count(prepared: Path, split: str) -> int:
    return int(np.load(prepared / split / "labels.npy").shape[0])


@pytest.mark.parametrize("method", ["lgb_lambdarank", "xgb_ndcg"])
def test_training_time_excludes_our_validation_metric(prepared, tmp_path, monkeypatch, method):
    """Our metric made 30 ms slower a round: all of it stays out of train_seconds."""
    import time

    from bench.training import gbdt

    real = gbdt.evaluate_split

    def slow(*args, **kwargs):
        time.sleep(0.03)
        return real(*args, **kwargs)

    monkeypatch.setattr(gbdt, "evaluate_split", slow)
    out = run_job(_config(), prepared, tmp_path / "run", method=method, seed=0, device="cpu", quiet=True)
    info = json.loads((out / "run.json").read_text())
    rounds = info["result"]["rounds_trained"]
    assert info["wall_time_s"] - info["train_seconds"] >= 0.03 * rounds
    assert info["train_seconds"] < 0.03 * rounds  # 25 tiny rounds train in well under 30 ms each


def test_gbdt_learns_something(prepared, tmp_path):
    """Sanity oracle: LambdaMART beats a constant scorer (which scores by document order)."""
    from bench.metrics import evaluate

    out = run_job(_config(), prepared, tmp_path / "r", method="lgb_lambdarank", seed=0, device="cpu", quiet=True)
    labels = np.load(prepared / "test" / "labels.npy")
    offsets = np.load(prepared / "test" / "offsets.npy")
    const = evaluate(np.zeros_like(labels), labels, offsets, ["ndcg@10"])["ndcg@10"].mean()
    model = pd.read_parquet(out / "metrics.parquet")["ndcg@10"].mean()
    assert model > const + 0.05


@pytest.mark.parametrize("method", ["lgb_lambdarank", "xgb_ndcg"])
def test_same_seed_same_scores(prepared, tmp_path, method):
    a = run_job(_config(), prepared, tmp_path / "a", method=method, seed=2, device="cpu", quiet=True)
    b = run_job(_config(), prepared, tmp_path / "b", method=method, seed=2, device="cpu", quiet=True)
    assert np.load(a / "scores.npy").tobytes() == np.load(b / "scores.npy").tobytes()


def test_defaults_are_the_published_mslr_settings():
    cfg = {"methods": {"l": {"gbdt": "lightgbm", "objective": "lambdarank"},
                       "x": {"gbdt": "xgboost", "objective": "rank:pairwise", "params": {"eta": 0.05}}}}
    lgb = resolve_gbdt(cfg, "l")
    assert lgb["params"]["learning_rate"] == 0.1 and lgb["params"]["num_leaves"] == 255
    assert lgb["params"]["min_sum_hessian_in_leaf"] == 100 and lgb["num_trees"] == 500
    xgb = resolve_gbdt(cfg, "x")
    assert xgb["params"]["eta"] == 0.05 and xgb["params"]["max_depth"] == 8
    assert xgb["params"]["min_child_weight"] == 100


@pytest.mark.parametrize(
    "entry, match",
    [
        ({"gbdt": "catboost", "objective": "x"}, r"methods.m.gbdt"),
        ({"gbdt": "lightgbm", "objective": "rank:ndcg"}, r"methods.m.objective"),
        ({"gbdt": "lightgbm", "objective": "lambdarank", "params": {"n_estimators": 9}}, r"methods.m.params.n_estimators"),
        ({"gbdt": "xgboost", "objective": "rank:ndcg", "num_trees": 0}, r"methods.m.num_trees"),
        ({"gbdt": "xgboost", "objective": "rank:ndcg", "trees": 5}, r"methods.m.trees"),
        ({"loss": "ranknet"}, r"methods.m: not a GBDT method"),
    ],
)
def test_config_errors_name_the_key(entry, match):
    with pytest.raises(ConfigError, match=match):
        resolve_gbdt({"methods": {"m": entry}}, "m")


def test_cli_gbdt(prepared, tmp_path):
    from bench.cli import main

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(_config()))
    rc = main(["gbdt", "--prepared", str(prepared), "--out", str(tmp_path / "r"), "--method", "xgb_pairwise",
               "--seed", "0", "--config", str(cfg), "--device", "auto", "--quiet"])
    assert rc == 0 and (tmp_path / "r" / "run.json").exists()
    rc = main(["gbdt", "--prepared", str(tmp_path / "missing"), "--out", str(tmp_path / "r2"), "--method",
               "xgb_pairwise", "--seed", "0", "--config", str(cfg)])
    assert rc == 2 and not (tmp_path / "r2").exists()


def test_library_errors_become_one_line_library_errors(prepared, tmp_path):
    cfg = _config()
    cfg["methods"]["xgb_ndcg"]["params"]["max_depth"] = -3
    with pytest.raises(LibraryError, match="methods.xgb_ndcg: xgboost failed"):
        run_job(cfg, prepared, tmp_path / "r", method="xgb_ndcg", seed=0, device="cpu", quiet=True)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("method", ["lgb_lambdarank", "xgb_ndcg"])
def test_rounds_trained_counts_every_boosted_round_when_early_stopping_triggers(prepared, tmp_path, method):
    """run.json: ``rounds_trained`` = rounds actually boosted (= curve.csv rows), ``best_iteration``
    = the round whose model scores the test split. With patience 3 and a high learning rate the
    validation metric stops improving long before 200 rounds, so training stops at best + 3."""
    cfg = _config()
    lib = METHODS[method][0]
    cfg["methods"][method].update(num_trees=200, early_stopping_rounds=3)
    cfg["methods"][method]["params"]["learning_rate" if lib == "lightgbm" else "eta"] = 0.8
    out = run_job(cfg, prepared, tmp_path / "run", method=method, seed=0, device="cpu", quiet=True)
    res = json.loads((out / "run.json").read_text())["result"]
    curve = pd.read_csv(out / "curve.csv")
    assert res["rounds_trained"] < 200  # early stopping triggered
    assert res["rounds_trained"] == len(curve) == res["best_iteration"] + 3
    assert res["best_vali"] == curve["vali_ndcg@10"].max() == curve["vali_ndcg@10"].iloc[res["best_iteration"] - 1]


def test_features_reach_the_libraries_without_a_copy(prepared):
    from bench.data import load_prepared
    from bench.training.gbdt import _split_arrays

    split = load_prepared(prepared).splits["train"]
    features, labels, _, _ = _split_arrays(split)
    assert np.shares_memory(features, split.features) and features.dtype == np.float32
    assert not np.shares_memory(labels, split.labels)  # the small arrays are private copies


@pytest.mark.parametrize("method", ["xgb_pairwise", "xgb_ndcg"])
def test_xgboost_quantile_matrices_give_the_bytes_of_plain_dmatrices(prepared, tmp_path, monkeypatch, method):
    """``QuantileDMatrix`` (train, and vali with ``ref=``) + ``inplace_predict`` against the
    ``DMatrix`` path: the same test scores, per-query metrics and validation curve, bit for bit."""
    from bench.training import gbdt

    quantile = run_job(_config(), prepared, tmp_path / "q", method=method, seed=1, device="cpu", quiet=True)
    monkeypatch.setattr(gbdt, "_quantile_matrices", lambda params: False)
    plain = run_job(_config(), prepared, tmp_path / "d", method=method, seed=1, device="cpu", quiet=True)
    for name in ("scores.npy", "metrics.parquet", "curve.csv"):
        assert (quantile / name).read_bytes() == (plain / name).read_bytes(), name

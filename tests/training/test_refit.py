"""Which model a run tests (``train.checkpoint``) and the refit on train + validation (``train.refit``).

Oracles: a neural refit against a plain run on a fold whose training split *is* train +
validation (same seeds, same dataset and fold names: bit-identical scores); the tested
checkpoint against the weights the loop kept (the kept checkpoint's ``model`` and ``best``),
scored here; a GBDT run against the library called directly on the same arrays for the tested
number of rounds (no validation set: the trees do not depend on it), bit-identically.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench.config.settings import resolve_gbdt, resolve_neural
from bench.config.validate import validate_config
from bench.data import load_prepared
from bench.errors import ConfigError
from bench.training.batches import score_lists
from bench.training.cli import run_job
from bench.training.loop import setup
from bench.training.loss import make_loss
from bench.training.state import default_checkpoint_dir
from helpers import make_prepared, merge_train_and_vali, toy_neural_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


@pytest.fixture(scope="module")
def merged(prepared, tmp_path_factory) -> Path:
    """The toy fold with train + validation as its training split (tests/helpers.py)."""
    return merge_train_and_vali(prepared, tmp_path_factory.mktemp("merged") / "toy" / "fold1")


def _run(prepared: Path, out: Path, method: str = "ranknet", **train) -> tuple[Path, dict]:
    run = run_job(toy_neural_config("softmax", **train), prepared, out, method=method, seed=0, device="cpu", quiet=True)
    return run, json.loads((run / "run.json").read_text())


def _scores(run: Path) -> bytes:
    return np.load(run / "scores.npy").tobytes()


def _real_docs(prepared: Path, list_size: int, splits=("train", "vali")) -> int:
    """Real documents of one epoch's lists over ``splits``: min(query length, list_size) per query."""
    return sum(int(np.minimum(np.diff(np.load(prepared / s / "offsets.npy")), list_size).sum()) for s in splits)


def test_a_refit_trains_on_train_and_validation_as_a_fold_whose_training_split_they_are(
    prepared, merged, tmp_path, capsys, monkeypatch
):
    """The refit model (2 epochs, ``checkpoint: last``) is the model a plain run trains on the
    merged fold, bit for bit, and not the first fit's; the first fit's course (curve, best
    validation value, timing facts) is the run's without refit; run.json records the refit and
    its progress lines name it."""
    monkeypatch.setenv("LTR_BENCH_PROGRESS_SECONDS", "0")  # a line at every step
    refit, info = _run(prepared, tmp_path / "refit", checkpoint="last", refit=True)
    lines = capsys.readouterr().err
    plain, plain_info = _run(prepared, tmp_path / "plain", checkpoint="last")
    direct, _ = _run(merged, tmp_path / "direct", checkpoint="last")
    assert _scores(refit) == _scores(direct) != _scores(plain)
    pd.testing.assert_frame_equal(pd.read_parquet(refit / "metrics.parquet"), pd.read_parquet(direct / "metrics.parquet"))
    curve = pd.read_csv(refit / "curve.csv").drop(columns="seconds")
    pd.testing.assert_frame_equal(curve, pd.read_csv(plain / "curve.csv").drop(columns="seconds"), check_exact=True)
    res = info["result"]
    assert res["best_vali"] == plain_info["result"]["best_vali"] and info["train_docs"] == plain_info["train_docs"]
    assert res["checkpoint"] == "last" and res["tested_epoch"] == res["epochs_run"] == 2
    ref = res["refit"]
    n_docs = sum(np.load(prepared / s / "labels.npy").size for s in ("train", "vali"))
    assert (ref["unit"], ref["epochs"], ref["steps"], ref["queries"], ref["documents"]) == ("epochs", 2, 16, 64, n_docs)
    assert ref["train_docs"] == 2 * _real_docs(prepared, 12)  # every training and validation query, twice
    assert 0 < ref["train_seconds"] <= ref["seconds"] < info["wall_time_s"]
    assert plain_info["result"]["refit"] is None
    assert "step 16/16" in lines and "refit on train + validation (64 queries, no validation)" in lines


def test_a_refit_under_a_step_budget_takes_the_steps_of_the_tested_epoch(prepared, tmp_path):
    """``max_steps: 10`` (6 steps an epoch on the training split, 8 on train + validation): the
    refit takes the tested epoch's step count, not its epochs."""
    _, info = _run(prepared, tmp_path / "r", epochs=None, max_steps=10, refit=True)
    res = info["result"]
    steps = pd.read_csv(tmp_path / "r" / "curve.csv")["step"].tolist()
    assert steps == [6, 10]
    assert res["refit"]["unit"] == "steps" and res["refit"]["steps"] == steps[res["tested_epoch"] - 1]
    assert res["refit"]["epochs"] == -(-res["refit"]["steps"] // 8)


def _score_with(prepared: Path, cfg: dict, weights: dict) -> bytes:
    """The test scores of the run's model with ``weights`` (``test_list_size`` null: every
    document, in the order of ``scores.npy``)."""
    settings = resolve_neural(cfg, "ranknet")
    f = setup(
        settings,
        make_loss(settings, "ranknet"),
        load_prepared(prepared),
        ("synthetic", "fold1", "ranknet", 0),
        torch.device("cpu"),
    )
    f.trainables.model.load_state_dict(weights)
    return score_lists(f.trainables.model, f.splits["test"], f.evals["test"], torch.device("cpu"), False).tobytes()


def test_checkpoint_last_tests_the_last_epochs_weights_and_best_the_best_epochs(prepared, tmp_path):
    """At lr 0.5 validation NDCG drops in epoch 2 on this fold: ``last`` scores the test split
    with the weights after epoch 2, ``best`` with those of epoch 1 (both read from the kept
    checkpoint: the loop's own copies), and the two differ."""
    train = {"epochs": 2, "lr": 0.5, "keep_checkpoint": True}
    last, info = _run(prepared, tmp_path / "last", checkpoint="last", **train)
    best, best_info = _run(prepared, tmp_path / "best", **train)
    kept = torch.load(default_checkpoint_dir(last) / "last.pt", weights_only=True)
    cfg = toy_neural_config("softmax", **train)
    b = best_info["result"]["best_epoch"]
    assert b == kept["best"]["epoch"] == 1
    assert (info["result"]["checkpoint"], info["result"]["tested_epoch"]) == ("last", 2)
    assert (best_info["result"]["checkpoint"], best_info["result"]["tested_epoch"]) == ("best", b)
    assert _scores(last) == _score_with(prepared, cfg, kept["model"])
    assert _scores(best) == _score_with(prepared, cfg, kept["best"]["model"]) != _scores(last)


def test_a_best_checkpoint_refit_trains_the_best_epochs_number_of_epochs(prepared, merged, tmp_path):
    """``checkpoint: best`` with a refit: the refit runs the best epoch's number of epochs on
    train + validation (= a plain run of that many epochs on the merged fold)."""
    refit, info = _run(prepared, tmp_path / "refit", epochs=2, lr=0.5, refit=True)
    b = info["result"]["best_epoch"]
    direct, _ = _run(merged, tmp_path / "direct", epochs=b, lr=0.5, checkpoint="last")
    assert b < info["result"]["epochs_run"] == 2  # validation NDCG drops in epoch 2 (as above)
    assert info["result"]["refit"]["epochs"] == info["result"]["tested_epoch"] == b
    assert _scores(refit) == _scores(direct)


# ----------------------------------------------------------------------------- GBDT

SMALL = {
    "lightgbm": {"num_leaves": 7, "min_sum_hessian_in_leaf": 1e-3, "min_data_in_leaf": 2, "num_threads": 1},
    "xgboost": {"max_depth": 3, "min_child_weight": 1e-3, "nthread": 1},
}
OBJECTIVE = {"lightgbm": "lambdarank", "xgboost": "rank:pairwise"}


def _gbdt_config(lib: str, **train) -> dict:
    return {
        "train": {"early_stopping_metric": "ndcg@10", **train},
        "metrics": {"names": ["ndcg@10", "mrr"]},
        "methods": {
            "g": {
                "gbdt": lib,
                "objective": OBJECTIVE[lib],
                "params": dict(SMALL[lib]),
                "num_trees": 40,
                "early_stopping_rounds": 5,
            }
        },
    }


def _library_scores(lib: str, cfg: dict, seed: int, splits: list, rounds: int, prepared: Path) -> bytes:
    """The library called directly: ``rounds`` rounds on the concatenated ``splits``, no validation
    set; the test scores as ``scores.npy`` stores them."""
    fold = load_prepared(prepared)
    x = np.concatenate([np.asarray(fold.splits[s].features) for s in splits])
    y = np.concatenate([np.asarray(fold.splits[s].labels) for s in splits])
    groups = np.concatenate([np.diff(fold.splits[s].offsets) for s in splits])
    x_test = np.asarray(fold.splits["test"].features)
    params = resolve_gbdt(cfg, "g")["params"]
    if lib == "lightgbm":
        import lightgbm as lgb

        full = {"objective": OBJECTIVE[lib], "metric": "None", "seed": seed, **params, "device_type": "cpu"}
        booster = lgb.train(full, lgb.Dataset(x, label=y, group=groups), num_boost_round=rounds)
        return booster.predict(x_test, num_iteration=rounds).astype(np.float32).tobytes()
    import xgboost as xgb

    full = {"objective": OBJECTIVE[lib], "disable_default_eval_metric": 1, "seed": seed, **params, "device": "cpu"}
    booster = xgb.train(full, xgb.QuantileDMatrix(x, label=y, group=groups, max_bin=256), num_boost_round=rounds)
    return booster.inplace_predict(x_test, iteration_range=(0, rounds)).astype(np.float32).tobytes()


@pytest.mark.parametrize("lib", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("checkpoint", ["best", "last"])
def test_gbdt_tests_the_checkpoints_rounds_and_refits_them_on_train_and_validation(prepared, tmp_path, lib, checkpoint):
    """Without refit the test split is scored by the first ``best_iteration`` (``best``) or all
    ``rounds_trained`` (``last``) rounds of the fit on the training split; with refit by that
    many rounds boosted from scratch on train + validation: each equal to the library's own
    model of those rounds on those documents."""
    cfg = _gbdt_config(lib, checkpoint=checkpoint)
    first = run_job(cfg, prepared, tmp_path / "first", method="g", seed=0, device="cpu", quiet=True)
    info = json.loads((first / "run.json").read_text())
    res, seed = info["result"], info["library_seed"]
    rounds = res["best_iteration"] if checkpoint == "best" else res["rounds_trained"]
    assert res["best_iteration"] < res["rounds_trained"]  # early stopping ended the fit: the checkpoints differ
    assert (res["checkpoint"], res["tested_iteration"], res["refit"]) == (checkpoint, rounds, None)
    assert _scores(first) == _library_scores(lib, cfg, seed, ["train"], rounds, prepared)
    cfg = _gbdt_config(lib, checkpoint=checkpoint, refit=True)
    refit = run_job(cfg, prepared, tmp_path / "refit", method="g", seed=0, device="cpu", quiet=True)
    refit_info = json.loads((refit / "run.json").read_text())
    ref = refit_info["result"]["refit"]
    n_docs = sum(np.load(prepared / s / "labels.npy").size for s in ("train", "vali"))
    assert (ref["unit"], ref["rounds"], ref["queries"], ref["documents"]) == ("rounds", rounds, 64, n_docs)
    assert ref["train_docs"] == n_docs * rounds and refit_info["result"]["best_vali"] == res["best_vali"]
    pd.testing.assert_frame_equal(pd.read_csv(refit / "curve.csv"), pd.read_csv(first / "curve.csv"))
    assert _scores(refit) == _library_scores(lib, cfg, seed, ["train", "vali"], rounds, prepared) != _scores(first)


# ----------------------------------------------------------------------------- refusals


def test_linear_and_sinkprop_protocol_runs_refuse_a_refit(prepared, tmp_path):
    linear = {"train": {"refit": True}, "metrics": {"names": ["ndcg@10"]}, "methods": {"l": {"linear": "least_squares"}}}
    with pytest.raises(ConfigError, match=r"^train\.refit: methods\.l is a linear run, which cannot refit"):
        run_job(linear, prepared, tmp_path / "l", method="l", seed=0, device="cpu", quiet=True)
    sinkprop = {
        "model": {"type": "mlp", "hidden": []},
        "train": {},
        "metrics": {"names": ["ndcg@10"]},
        "methods": {"s": {"loss": "sinkprop", "train": {"refit": True}}},
        "sinkprop_protocol": {"stages": 1},
    }
    with pytest.raises(ConfigError, match=r"^methods\.s\.train\.refit: methods\.s is a sinkprop_protocol run"):
        run_job(sinkprop, prepared, tmp_path / "s", method="s", seed=0, device="cpu", quiet=True)
    assert not (tmp_path / "l").exists() and not (tmp_path / "s").exists()


@pytest.mark.parametrize("where", ["train", "method"])
def test_restore_best_is_refused_naming_its_replacement(prepared, tmp_path, where):
    cfg = toy_neural_config("softmax")
    (cfg["train"] if where == "train" else cfg["methods"]["ranknet"].setdefault("train", {}))["restore_best"] = False
    key = r"train\.restore_best" if where == "train" else r"methods\.ranknet\.train\.restore_best"
    with pytest.raises(
        ConfigError,
        match=rf"'{key}': False is not one of .*set train\.checkpoint instead: best for "
        "restore_best true, last for false",
    ):
        run_job(cfg, prepared, tmp_path / "r", method="ranknet", seed=0, device="cpu", quiet=True)
    gbdt = _gbdt_config("lightgbm", restore_best=True)
    with pytest.raises(ConfigError, match=r"'train\.restore_best': True is not one of .*train\.checkpoint"):
        run_job(gbdt, prepared, tmp_path / "g", method="g", seed=0, device="cpu", quiet=True)
    study = {
        "datasets": {"d": {"source": "synthetic"}},
        "protocols": {"p": {"model": {}, "train": {"restore_best": True}}},
        "methods": {"m": {"loss": "ranknet"}},
    }
    with pytest.raises(ConfigError, match=r"'protocols\.p\.train\.restore_best': .*set train\.checkpoint instead"):
        validate_config(study)

"""The ``select`` stage (bench.selection): the validation value of a run, the choice, the record the
evaluation keeps the chosen point by -- and the proof that the test split is never read before
selection: permuting a prepared fold's test labels (against the chosen point) and retraining
every grid point leaves every record unchanged, while a choice by the test means changes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.cli import run_command
from bench.config import plan
from bench.config import validate as cv
from bench.config.selection import best_point, keep_chosen
from bench.data.prepared import fingerprint, load_prepared, save_prepared
from bench.errors import UsageError
from bench.results import RUN_JSON_KEYS, read_frame, read_record, read_run_info, write_run
from bench.selection import select, validation_value
from helpers import make_prepared


def fake_run(out, *, metric="ndcg@10", best=0.5, checkpoint="best", curve=(0.1, 0.2), test=0.9, legacy=False):
    """A run directory with the records the stage reads (everything else a placeholder key);
    ``legacy``: the field runs wrote before ``train.checkpoint`` (``restored_best``)."""
    info = dict.fromkeys(RUN_JSON_KEYS)
    tested = {"restored_best": checkpoint == "best"} if legacy else {"checkpoint": checkpoint}
    info["result"] = {"early_stopping_metric": metric, "best_vali": best, **tested, "test_means": {metric: test}}
    frame = pd.DataFrame({"query": [0], metric: [test]})
    write_run(out, scores=np.zeros(3, dtype=np.float32), metrics=frame, run_info=info,
              curve=pd.DataFrame({"epoch": range(1, len(curve) + 1), f"vali_{metric}": list(curve)}))
    return str(out)


def test_a_runs_validation_value_is_the_one_its_kept_checkpoint_had(tmp_path):
    assert validation_value(fake_run(tmp_path / "a", best=0.7, curve=(0.7, 0.6)), "ndcg@10") == 0.7
    # the last epoch's weights scored the test split: its validation value, not the best one
    assert validation_value(fake_run(tmp_path / "b", best=0.7, checkpoint="last", curve=(0.7, 0.6)), "ndcg@10") == 0.6
    assert validation_value(fake_run(tmp_path / "c", best=0.7, checkpoint="last", curve=(0.7, 0.6), legacy=True),
                            "ndcg@10") == 0.6
    with pytest.raises(UsageError, match=r"b/run.json: the run kept its checkpoint by validation 'ndcg@10', not the "
                                         r"selection metric 'mrr'"):
        validation_value(tmp_path / "b", "mrr")


def _spec(tmp_path, values, metric="ndcg@10"):
    """A select spec over points p0, p1, ... whose runs (one per seed) record ``values``."""
    points = []
    for i, per_seed in enumerate(values):
        dirs = [fake_run(tmp_path / f"p{i}" / f"seed{s}", metric=metric, best=v, test=1.0 - v)
                for s, v in enumerate(per_seed)]
        points.append({"name": f"m+x={i}", "label": f"x = {i}", "settings": {"params.x": i}, "run": f"m+x={i}",
                       "dirs": dirs})
    return {"table": "t", "dataset": "d", "fold": "Fold1", "seeds": list(range(len(values[0]))),
            "methods": {"m": {"metric": metric, "points": points}}}


def test_the_record_chooses_the_best_mean_over_seeds_the_first_of_equal_ones_and_min_for_arp(tmp_path):
    # means exactly equal (binary fractions): a tie
    record = select(_spec(tmp_path / "a", [[0.25, 0.75], [0.5, 0.5], [0.875, 0.125], [0.375, 0.625]]))
    entry = record["methods"]["m"]
    assert [p["mean"] for p in entry["points"]] == [0.5, 0.5, 0.5, 0.5]
    assert entry["chosen"] == "m+x=0" and entry["chosen_settings"] == {"params.x": 0}  # a tie: the first point
    record = select(_spec(tmp_path / "b", [[0.5, 0.7], [0.8, 0.5]]))
    assert record["methods"]["m"]["chosen"] == "m+x=1" and record["methods"]["m"]["points"][1]["values"] == [0.8, 0.5]
    arp = select(_spec(tmp_path / "c", [[5.0], [4.0], [6.0]], metric="arp"))["methods"]["m"]
    assert (arp["chosen"], arp["higher_is_better"]) == ("m+x=1", False)


def test_the_evaluation_keeps_only_the_chosen_points_runs(tmp_path):
    prepared = make_prepared(tmp_path / "prepared")
    n = load_prepared(prepared).splits["test"].labels.size
    spec = _spec(tmp_path / "runs", [[0.2], [0.9]])
    for p in spec["methods"]["m"]["points"]:  # scores a test evaluation can read
        d = p["dirs"][0]
        write_run(d, scores=np.linspace(0, 1, n, dtype=np.float32) * (1 if p["name"] == "m+x=0" else -1),
                  metrics=pd.DataFrame({"query": [0]}), curve=pd.DataFrame({"epoch": [1]}), run_info=read_run_info(d))
    record_path = tmp_path / "selection.json"
    assert run_command(["select", "--spec", json.dumps(spec), "--out", str(record_path)]) == 0
    assert read_record(record_path)["methods"]["m"]["chosen"] == "m+x=1"
    runs = [{"method": "m", "seed": 0, "dir": p["dirs"][0], "point": p["name"]} for p in spec["methods"]["m"]["points"]]

    def evaluate(runs, out, *extra):
        return run_command(["evaluate", "--prepared", str(prepared), "--dataset", "d", "--fold", "Fold1", "--runs",
                            json.dumps(runs), "--metrics", "ndcg@10", "--out", str(out), *extra])

    assert evaluate(runs, tmp_path / "evaluated.parquet", "--selection", str(record_path)) == 0
    frame = read_frame(tmp_path / "evaluated.parquet")
    assert set(frame.method) == {"m"} and len(frame) == load_prepared(prepared).splits["test"].qids.size
    assert [r["point"] for r in keep_chosen(runs, [read_record(record_path)])] == ["m+x=1"]
    # the frame is the chosen point's run graded alone (its scores rank the split in reverse), not the other's
    alone = {}
    for run in runs:
        assert evaluate([{k: v for k, v in run.items() if k != "point"}], tmp_path / f"{run['point']}.parquet") == 0
        alone[run["point"]] = read_frame(tmp_path / f"{run['point']}.parquet")
    pd.testing.assert_frame_equal(frame, alone["m+x=1"])
    assert not alone["m+x=0"]["ndcg@10"].equals(frame["ndcg@10"])
    assert evaluate(runs, tmp_path / "refused.parquet") == 2  # grid points' runs without their record: refused


# ----------------------------------------------------------------------------- the proof


def _train_points(config, spec, prepared):
    """Train every grid point's run of ``spec`` (relative directories, in the current one)."""
    from bench.training.cli import run_job

    for entry in spec["methods"].values():
        for point in entry["points"]:
            job = plan.run_config(config, "arf", "syn-web", point["run"])
            for seed, run_dir in zip(spec["seeds"], point["dirs"]):
                run_job(job, prepared, run_dir, method=point["run"], seed=seed, device="cpu", quiet=True, threads=1)


def _permute_test_labels_for(prepared, out, scores):
    """A copy of the fold whose test labels are permuted within each query so that ``scores``
    rank every query ideally (the best labels on its top documents): a choice by the test
    split must then prefer the point that gave these scores."""
    fold = load_prepared(prepared)
    splits = {s: {a: np.array(getattr(sp, a)) for a in ("features", "labels", "qids", "offsets")}
              for s, sp in fold.splits.items()}
    labels, offsets = splits["test"]["labels"], splits["test"]["offsets"]
    permuted = labels.copy()
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        order = np.argsort(-scores[lo:hi], kind="stable")
        permuted[lo + order] = np.sort(labels[lo:hi])[::-1]
    assert not np.array_equal(permuted, labels) and np.array_equal(np.sort(permuted), np.sort(labels))
    splits["test"]["labels"] = permuted
    meta = {**fold.meta, "fingerprint": fingerprint(splits)}
    save_prepared(out, splits, meta)
    return out


def _test_choice(entry):
    """The point a choice by the test means (what selection must never read) would make."""
    values = [[read_run_info(d)["result"]["test_means"][entry["metric"]] for d in p["dirs"]] for p in entry["points"]]
    return entry["points"][best_point(values, higher_is_better=entry["higher_is_better"])]["name"]


def test_permuting_the_test_labels_changes_no_selection_but_would_change_a_choice_on_test(tmp_path, monkeypatch):
    """The oracle: training, early stopping and selection never read the test labels, so
    retraining on a fold whose test labels are permuted (features, train and validation
    unchanged) gives bit-identical validation values and choices; the runs did read the new
    labels (their test means moved), and choosing by them would pick the point the
    permutation favours. Exact equality: CPU, one thread, seeded runs."""
    config = cv.load_config(overrides={
        "protocols": {"arf": {"train": {"epochs": 2, "list_size": 30}, "seeds": [0, 1]}},
        "tables": {"arf_table2": {"methods": ["approxndcg", "ranknet"], "select": {
            "arf": None, "approxndcg": {"grid": {"params.alpha": [0.5, 10.0], "train.lr": [0.03, 0.001]},
                                        "metric": "ndcg@10"}}}}})
    spec = plan.select_spec(config, "arf_table2", "syn-web", "Fold1")
    prepared = make_prepared(tmp_path / "prepared" / "Fold1")
    (tmp_path / "original").mkdir()
    monkeypatch.chdir(tmp_path / "original")
    _train_points(config, spec, prepared)
    before = select(spec)
    entry = before["methods"]["approxndcg"]
    assert [p["run"] for p in entry["points"]] == [p["name"] for p in entry["points"]]  # each trains (no reuse here)
    # the adversary: the point with the worst validation mean gets the ideal test ranking
    target = min(entry["points"], key=lambda p: p["mean"])
    assert target["name"] != entry["chosen"]
    scores = np.mean([np.load(f"{d}/scores.npy") for d in target["dirs"]], axis=0)
    permuted = _permute_test_labels_for(prepared, tmp_path / "permuted" / "Fold1", scores)

    (tmp_path / "retrained").mkdir()
    monkeypatch.chdir(tmp_path / "retrained")
    _train_points(config, spec, permuted)
    after = select(spec)
    assert after == before  # every point's per-seed validation values, means and the choice

    entry_after = after["methods"]["approxndcg"]
    moved = [read_run_info(d)["result"]["test_means"]["ndcg@10"] for d in target["dirs"]]
    monkeypatch.chdir(tmp_path / "original")
    kept = [read_run_info(d)["result"]["test_means"]["ndcg@10"] for d in target["dirs"]]
    assert all(m > k for m, k in zip(moved, kept))  # the runs graded the permuted labels
    monkeypatch.chdir(tmp_path / "retrained")
    assert _test_choice(entry_after) == target["name"] != entry_after["chosen"]  # reading test would change it

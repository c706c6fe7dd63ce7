"""bench.perf.calibrate: each measurement runs the real code on generated data in a forked child."""

from __future__ import annotations

import mmap
import sys

import numpy as np
import pytest

from bench.perf import calibrate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork and /proc: Linux only")

SHAPE = {"n_features": 6, "splits": {s: {"n_queries": 200, "n_docs": 4000, "max_list": 40, "lengths": None}
                                     for s in ("train", "vali", "test")}}


def test_a_child_reports_its_result_or_its_traceback():
    assert calibrate.in_child(lambda: {"x": 1}) == {"x": 1}
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        calibrate.in_child(lambda: {"x": 1 / 0})


def test_peak_resets_to_the_current_size():
    def grow():
        calibrate.reset_peak()
        base = calibrate.peak_bytes()
        # Fresh anonymous pages, touched: a malloc'd block could reuse heap pages the long-lived test process
        # freed earlier, which are already resident and would not raise the peak (seen once in CI: +1 MB).
        block = mmap.mmap(-1, 50 * 2**20)
        block.write(b"\1" * len(block))
        return {"grew": calibrate.peak_bytes() - base, "held": block[-1]}

    assert calibrate.in_child(grow)["grew"] >= 45 * 2**20


def test_fake_fold_has_the_planned_shape(tmp_path):
    lengths = {"values": [5, 40], "counts": [150, 50]}
    shape = {**SHAPE, "splits": {s: {**v, "lengths": lengths} for s, v in SHAPE["splits"].items()}}
    n = calibrate.fake_fold(tmp_path / "f", shape, 0.5)
    from bench.data import load_prepared

    fold = load_prepared(tmp_path / "f")
    got = np.diff(fold.splits["train"].offsets)
    assert n == sum(s.n_docs for s in fold.splits.values()) and got.max() == 40 and set(got) <= {5, 40}
    assert fold.n_features == 6 and len(np.unique(fold.splits["train"].labels)) > 2  # grades depend on features
    assert calibrate.fold_bytes(tmp_path / "f") == sum(p.stat().st_size for p in (tmp_path / "f").glob("*/*.npy"))
    assert sum(calibrate.fold_bytes(tmp_path / "f" / s) for s in calibrate.SPLITS) == calibrate.fold_bytes(tmp_path / "f")


def test_neural_measurements_on_a_tiny_model(tmp_path):
    calibrate.preload()
    model = {"type": "mlp", "hidden": [8], "batch_norm": False, "dropout": 0.0}
    step = calibrate.measure("neural_step", {"model": model, "loss": "ranknet", "params": {}, "batch_size": 2,
                                             "list_size": 8, "n_features": 6, "amp": False, "grad_clip": None},
                             device="cpu", threads=1)
    assert step["step_s"] > 0 and step["n_params"] == 6 * 8 + 8 + 8 + 1 and step["steps_timed"] >= calibrate.MIN_STEPS
    ev = calibrate.measure("neural_eval", {"model": model, "n_features": 6, "width": 10, "eval_batch_size": 64,
                                           "amp": False, "metrics": ["ndcg@10"]}, device="cpu", threads=1)
    assert ev["docs_per_s"] > 0
    data = calibrate.measure("neural_data", {"shape": SHAPE, "list_size": 16, "test_list_size": None,
                                             "eval_batch_size": 64}, device="cpu", threads=1)
    assert len(data["sizes"]) == 2 and data["sizes"][0] < data["sizes"][1] and min(data["peak_bytes"]) > 0
    # mapped at the peak: train + vali or vali + test (the training split released first), never the whole fold
    for fraction, mapped in zip(calibrate.fractions(SHAPE), data["fold_bytes"]):
        calibrate.fake_fold(tmp_path / str(fraction), SHAPE, fraction)
        split = {s: calibrate.fold_bytes(tmp_path / str(fraction) / s) for s in calibrate.SPLITS}
        assert mapped == split["vali"] + max(split["train"], split["test"])


def test_gbdt_measurement_at_two_sizes_and_two_round_counts():
    m = calibrate.measure("gbdt", {"method": {"gbdt": "lightgbm", "objective": "lambdarank",
                                              "params": {"num_leaves": 7, "min_sum_hessian_in_leaf": 1.0}},
                                   "metrics": None, "shape": SHAPE}, device="cpu", threads=1)
    assert sorted({(p["docs"] > 0, p["rounds"]) for p in m["points"]}) == [(True, r) for r in calibrate.GBDT_ROUNDS]
    assert len(m["points"]) == 4 and all(p["fold_bytes"] > 0 for p in m["points"])


@pytest.mark.slow  # about 10 s of process starts
def test_process_measures_the_job_start_and_what_a_cluster_step_adds():
    """``step_bytes`` is a fresh interpreter that imported Snakemake's API (the process running a
    cluster job) plus what the job server holds beyond a child's start: at least 50 MB, and
    below 2 GB."""
    calibrate.preload()
    m = calibrate.measure("process", {}, device="cpu", threads=1)
    assert m["peak_bytes"] > 20 * 2**20
    assert 50 * 2**20 < m["step_bytes"] < 2 * 2**30


"""bench.results: the run directory and per-query frames (one schema, one writer, one reader)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.results import KEY_COLUMNS, RUN_JSON_KEYS, dataset_key, label_metrics, read_frames, write_frame, write_run


def _frame(method: str) -> pd.DataFrame:
    return pd.DataFrame({"dataset": "d", "fold": "Fold1", "seed": np.int64(0), "method": method,
                         "query": np.arange(3, dtype=np.int64), "mrr": [1.0, 0.5, 0.25], "mrr:dropped": False})


def test_write_run_refuses_an_incomplete_run_json_and_leaves_nothing(tmp_path):
    info = {k: 0 for k in RUN_JSON_KEYS if k != "result"}
    with pytest.raises(ValueError, match=r"missing keys \['result'\]"):
        write_run(tmp_path / "run", scores=np.zeros(3), metrics=_frame("a"), curve=pd.DataFrame(), run_info=info)
    assert not (tmp_path / "run").exists()


def test_write_run_writes_the_four_files_and_their_digests(tmp_path):
    metrics = label_metrics(pd.DataFrame({"query": [7], "mrr": [1.0]}), dataset="d", fold="F", method="m", seed=3)
    assert list(metrics.columns) == ["dataset", "fold", "method", "seed", "query", "mrr", "convention"]
    assert metrics["convention"].tolist() == ["default"]
    letor = label_metrics(pd.DataFrame({"query": [7], "map": [1.0]}), dataset="d", fold="F", method="m", seed=3,
                          convention="letor4")
    assert letor["convention"].tolist() == ["letor4"]
    out = write_run(tmp_path / "run", scores=np.array([0.5]), metrics=metrics,
                    curve=pd.DataFrame({"epoch": [1]}), run_info={k: 1 for k in RUN_JSON_KEYS})
    assert sorted(p.name for p in out.iterdir()) == ["curve.csv", "digests.json", "metrics.parquet", "run.json", "scores.npy"]
    assert np.load(out / "scores.npy").dtype == np.float32


def test_frames_round_trip_exactly_and_carry_the_key_columns(tmp_path):
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for path, method in zip(paths, "ab"):
        write_frame(_frame(method), path)
    frame = read_frames(paths)
    pd.testing.assert_frame_equal(frame, pd.concat([_frame("a"), _frame("b")], ignore_index=True), check_exact=True)
    assert list(frame.columns[: len(KEY_COLUMNS)]) == list(KEY_COLUMNS)


def test_dataset_key_marks_test_list_sizes():
    assert dataset_key("syn", 20) == "syn@Ltest=20" and dataset_key("syn", 0) == "syn"

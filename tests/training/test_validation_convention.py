"""Validation graded under the protocol's convention (issue 41): a run whose config carries
``metrics.convention: tfranking`` stops early, keeps its checkpoint and records its validation
curve under TF-Ranking's rules, where a query without a relevant document scores 0, not 1.

Oracle: on a fold with empty validation queries and untied scores the two conventions' NDCG@k
differ by exactly the share of empty queries (each scores 1 under the default rules, 0 under
TF-Ranking's, every other query alike); tolerance 1e-6 (float32 scores, float64 metrics).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.data import load_prepared
from bench.training.cli import run_job
from helpers import make_prepared, toy_neural_config


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return make_prepared(tmp_path_factory.mktemp("prep") / "empty" / "fold1", empty_fraction=0.25)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py


def _run(prepared, out, convention):
    cfg = toy_neural_config("softmax", epochs=3, early_stopping_metric="ndcg@10")
    cfg["metrics"]["names"] = ["ndcg@10"]
    if convention is not None:
        cfg["metrics"]["convention"] = convention
    run = run_job(cfg, prepared, out, method="ranknet", seed=0, device="cpu", quiet=True)
    return pd.read_csv(run / "curve.csv"), json.loads((run / "run.json").read_text())


def test_validation_curve_under_tfranking_drops_by_the_share_of_empty_queries(prepared, tmp_path):
    vali = load_prepared(prepared).splits["vali"]
    labels, offsets = np.asarray(vali.labels), np.asarray(vali.offsets)
    empty = np.array([labels[a:b].max() <= 0 for a, b in zip(offsets[:-1], offsets[1:])])
    assert 0 < empty.mean() < 1  # the fold has empty validation queries (and others)
    default, info_default = _run(prepared, tmp_path / "default", None)
    tfr, info_tfr = _run(prepared, tmp_path / "tfr", "tfranking")
    # training does not read validation here (no patience): the same weights each epoch
    assert np.array_equal(default["train_loss"].to_numpy(), tfr["train_loss"].to_numpy())
    gap = default["vali_ndcg@10"].to_numpy() - tfr["vali_ndcg@10"].to_numpy()
    np.testing.assert_allclose(gap, empty.mean(), atol=1e-6)
    assert info_tfr["result"]["best_vali"] == pytest.approx(info_default["result"]["best_vali"] - empty.mean(), abs=1e-6)

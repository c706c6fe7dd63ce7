"""The validation curve on cut lists (``train.vali_curve_list_size``, PiRank Fig. 5).

- A run that records it writes, beside its usual outputs, the columns ``vali_L<L>_loss`` and
  ``vali_L<L>_<metric>``; every other output (scores, per-query metrics, the other curve
  columns, the protocol hash) is bit-identical to the same run without it.
- Oracle for the values: the definition re-derived independently -- the seeded L-document
  sub-sample of each validation query, the registered loss called on padded batches of
  ``train.batch_size`` lists taken in length order and averaged over batches, and the metrics of
  :func:`bench.metrics.evaluate` on the sub-sampled lists -- with the model's own scores of the
  documents (float32; 1e-6 relative).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from bench import losses
from bench.config.settings import resolve_neural
from bench.data.prepared import load_prepared
from bench.data.sublists import seeded_sublists
from bench.metrics import evaluate, summarize
from bench.training.cli import run_job
from bench.training.loop import setup, train_epoch
from bench.training.loss import make_loss
from bench.training.state import TrainState
from bench.training.vali_curve import curve_row
from helpers import make_prepared

METRICS = ["ndcg@3", "ndcg@10", "mrr"]
L = 6


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


def _config(**train) -> dict:
    return {
        "model": {"type": "mlp", "hidden": [8], "dropout": 0.1},
        "train": {"epochs": 2, "batch_size": 4, "list_size": 10, **train},
        "metrics": {"names": METRICS, "empty_query": "one", "ties": "stable"},
        "methods": {"pirank": {"loss": "pirank_ndcg", "params": {"tau": 5.0, "k": 3, "straight_through": False}}},
    }


def test_recording_the_curve_changes_no_other_output(prepared, tmp_path):
    torch.set_num_threads(1)
    plain = run_job(_config(), prepared, tmp_path / "a", method="pirank", seed=0, device="cpu", quiet=True)
    curved = run_job(_config(vali_curve_list_size=L), prepared, tmp_path / "b", method="pirank", seed=0,
                     device="cpu", quiet=True)
    assert np.array_equal(np.load(plain / "scores.npy"), np.load(curved / "scores.npy"))
    pd.testing.assert_frame_equal(pd.read_parquet(plain / "metrics.parquet"), pd.read_parquet(curved / "metrics.parquet"))
    a, b = pd.read_csv(plain / "curve.csv"), pd.read_csv(curved / "curve.csv")
    added = [c for c in b.columns if c not in a.columns]
    assert added == [f"vali_L{L}_loss", *(f"vali_L{L}_{m}" for m in METRICS)]
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b[list(a.columns)].drop(columns="seconds"))
    assert np.isfinite(b[added].to_numpy()).all() and b[f"vali_L{L}_loss"].between(0, 1).all()  # 1 - relaxed NDCG@3
    info_a, info_b = (json.loads((d / "run.json").read_text()) for d in (plain, curved))
    assert info_a["protocol_hash"] == info_b["protocol_hash"]


def test_the_curve_values_follow_their_definition(prepared):
    torch.manual_seed(0)
    cfg = resolve_neural(_config(vali_curve_list_size=L), "pirank")
    call = make_loss(cfg, "pirank")
    f = setup(cfg, call, load_prepared(prepared), ("toy", "fold1", "pirank", 0), torch.device("cpu"))
    train_epoch(f, TrainState(), lr=1e-3, tau=None)
    row = curve_row(f.trainables.model, call, f.splits["vali"], f.evals["vali_curve"], device=f.device, amp=False,
                    tau=None, parts=f.parts, list_size=L, metrics=cfg["metrics"], names=METRICS)

    vali = load_prepared(prepared).splits["vali"]
    docs, offsets = seeded_sublists(np.asarray(vali.offsets), L, dataset="toy", fold="fold1", split="vali")
    x = torch.from_numpy(np.asarray(vali.features)[docs]).float()
    y = np.asarray(vali.labels)[docs].astype(np.float32)
    model = f.trainables.model.eval()
    with torch.no_grad():
        scores = model(x[None], torch.ones(1, docs.size, dtype=torch.bool))[0]  # the MLP scores items one by one
    lengths = np.diff(offsets)
    order = np.argsort(lengths, kind="stable")
    loss = losses.get("pirank_ndcg", tau=5.0, k=3, straight_through=False)
    batch_values = []
    for start in range(0, order.size, 4):
        qs = order[start:start + 4]
        width = int(lengths[qs].max())
        s = torch.zeros(len(qs), width)
        yy = torch.zeros(len(qs), width)
        m = torch.zeros(len(qs), width, dtype=torch.bool)
        for row_i, q in enumerate(qs):
            n = int(lengths[q])
            s[row_i, :n] = scores[offsets[q]:offsets[q] + n]
            yy[row_i, :n] = torch.from_numpy(y[offsets[q]:offsets[q] + n])
            m[row_i, :n] = True
        batch_values.append(float(loss(s, yy, m)))
    assert row[f"vali_L{L}_loss"] == pytest.approx(float(np.mean(batch_values)), rel=1e-6)
    expected = summarize(evaluate(scores.numpy().astype(np.float64), y.astype(np.float64), offsets, METRICS), METRICS)
    for metric in METRICS:
        assert row[f"vali_L{L}_{metric}"] == pytest.approx(expected[metric], rel=1e-6), metric
    assert lengths.max() == L and np.diff(np.asarray(vali.offsets)).max() > L  # the lists were cut

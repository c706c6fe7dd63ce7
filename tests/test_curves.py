"""The loss-curves table (bench.curves) behind the neuralndcg_curves figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench import curves as C
from bench.cli import main
from bench.report import figures as F


def _ndcg(labels, scores):
    """Brute-force NDCG@max with stable tie-breaking (independent of bench.metrics)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    dcg = sum((2 ** labels[i] - 1) / math.log2(r + 2) for r, i in enumerate(order))
    ideal = sum((2**y - 1) / math.log2(r + 2) for r, y in enumerate(sorted(labels, reverse=True)))
    return dcg / ideal


def test_neuralndcg_curves_match_ndcg_oracle_and_approach_it_as_tau_shrinks():
    data = C.neuralndcg_curve_data([0.01, 1.0], points=41)
    fig1 = data[(data.panel == "fig1") & (data.curve == "NDCG")]
    for x, v in zip(fig1.x, fig1.value):
        assert v == pytest.approx(_ndcg([2, 1, 0, 0, 0], [4, 1, 0, 0, x]), abs=1e-9)
    fig2 = data[data.panel == "fig2"]
    ndcg = fig2[fig2.curve == "NDCG"].value.to_numpy()
    sharp = fig2[fig2.curve == "NeuralNDCG tau=0.01"].value.to_numpy()
    smooth = fig2[fig2.curve == "NeuralNDCG tau=1"].value.to_numpy()
    xs = fig2[fig2.curve == "NDCG"].x.to_numpy()
    away = np.min(np.abs(xs[:, None] - np.array([1, 2, 3, 4])[None, :]), axis=1) > 0.1
    assert np.max(np.abs(sharp - ndcg)[away]) < 1e-3  # tau -> 0 recovers NDCG
    assert np.max(np.abs(smooth - ndcg)) > 1e-2  # a real relaxation at tau = 1
    curves = set(data[data.panel == "fig1"].curve)
    assert curves == {"NDCG", "NeuralNDCG with Sinkhorn (tau=1)", "NeuralNDCG without Sinkhorn (tau=1)"}
    fig = F.neuralndcg_curves(data)
    assert "varied score x" in fig.axes[0].get_xlabel()


def test_cli_writes_the_table_the_figure_reads(tmp_path):
    out = tmp_path / "curves.parquet"
    assert main(["loss-curves", "--taus", "0.5", "2", "--points", "11", "--out", str(out)]) == 0
    table = pd.read_parquet(out)
    assert list(table.columns) == list(C.COLUMNS)
    pd.testing.assert_frame_equal(table, C.neuralndcg_curve_data([0.5, 2.0], 11), check_exact=True)
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    rc = main(["figure", "neuralndcg_curves", "--input", str(out), "--png", str(png), "--pdf", str(pdf)])
    assert rc == 0 and png.read_bytes()[:4] == b"\x89PNG"

"""bench.report.heatmap: the recall heatmaps' cells, their diagonal share (hand-computed
oracles, exact up to float rounding: 1e-12), and the drawn figure's rows, columns and titles."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from bench.report import heatmap as H
from bench.results import read_frame, write_frame

GRID = [[10, 5], [20, 10], [30, 15]]
ROWS = [{"method": f"relax.m{m}.k{k}", "m": m, "k": k, "label": f"m={m}, k={k}"} for m, k in GRID]
K_ROWS = [{"method": f"lambdaloss.k{k}", "m": None, "k": k, "label": f"k={k}"} for k in (5, 15)]


def test_diagonal_share_against_hand_counts():
    values = np.array([[0.70, 0.60, 0.50],   # column 0: row 0 (its own) best         -> hit 1
                       [0.65, 0.60, 0.55],   # column 1: rows 0 and 1 tie at 0.60       -> hit 1/2
                       [0.60, 0.50, 0.58]])  # column 2: row 2 (its own) 0.58 > 0.55    -> hit 1
    match = np.eye(3, dtype=bool)
    got = H.diagonal_share(values, match)
    assert got.share == pytest.approx((1 + 0.5 + 1) / 3, abs=1e-12)
    assert got.chance == pytest.approx(1 / 3, abs=1e-12) and got.columns == 3
    assert got.caption() == "diagonal best in 2.5/3 columns (chance 1/3)"
    # the off-diagonal model wins both columns: share 0; one model wins everything: only its own column
    assert H.diagonal_share(np.array([[0.1, 0.9], [0.9, 0.1]]), np.eye(2, dtype=bool)).share == 0.0
    assert H.diagonal_share(np.array([[0.0] * 3, [0.0] * 3, [1.0] * 3]), match).share == pytest.approx(1 / 3, abs=1e-12)
    # a column with a NaN is left out: two columns remain, row 0 wins column 0 (hit), column 1 tie (1/2)
    nan = values.copy()
    nan[1, 2] = np.nan
    assert H.diagonal_share(nan, match) == H.DiagonalShare(0.75, 1 / 3, 2)
    assert H.diagonal_share(np.full((2, 2), np.nan), np.eye(2, dtype=bool)).columns == 0


def test_a_k_only_loss_matches_every_column_of_its_k():
    grid = [[10, 5], [20, 5], [30, 15]]
    match = H.row_matches(K_ROWS, grid)
    assert match.tolist() == [[True, True, False], [False, False, True]]
    values = np.array([[0.5, 0.4, 0.3],
                       [0.6, 0.3, 0.4]])  # column 0: k=15 row best (miss); 1, 2: own rows (hits)
    got = H.diagonal_share(values, match)
    assert got.share == pytest.approx(2 / 3, abs=1e-12) and got.chance == pytest.approx(1 / 2, abs=1e-12)


def _frames(rows=ROWS, dataset="d", seeds=(0, 1)):
    """Per-query frame: row i at column j scores 0.5 + 0.1 * (i == j) + 0.01 * j + 0.002 * seed
    on queries 0-2; query 3 scores 1.0 and is dropped (must not count)."""
    out = []
    for i, row in enumerate(rows):
        for seed in seeds:
            for q in range(4):
                rec = {"dataset": dataset, "fold": "Fold1", "seed": seed, "method": row["method"], "query": q}
                for j, (m, k) in enumerate(GRID):
                    rec[f"recall_arf@{m}@{k}"] = 1.0 if q == 3 else 0.5 + 0.1 * (i == j) + 0.01 * j + 0.002 * seed
                    rec[f"recall_arf@{m}@{k}:dropped"] = q == 3
                out.append(rec)
    return pd.DataFrame(out)


def test_cells_are_means_over_kept_queries_and_seeds_of_one_dataset():
    frame = pd.concat([_frames(), _frames(dataset="other").assign(**{"recall_arf@10@5": 0.0})])
    values = H.heatmap_matrix(frame, "d", ROWS, GRID)
    oracle = np.array([[0.5 + 0.1 * (i == j) + 0.01 * j + 0.001 for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(values, oracle, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="no per-query rows for method 'nope' on 'd'"):
        H.heatmap_matrix(frame, "d", [{"method": "nope", "m": 1, "k": 1, "label": ""}], GRID)


def _spec():
    panel = {"dataset": "d", "dataset_label": "D", "stands_for": ["istella"], "method": "relax",
             "label": "ARF-relax", "title": "L_Relax", "paper_figures": [2, 4], "rows": ROWS}
    return {"metric": "recall_arf", "grid": GRID, "panels": [panel, {**panel, "title": "other", "rows": ROWS[::-1]}]}


def test_figure_rows_columns_and_caption_number():
    fig = H.recall_heatmaps(_frames(), _spec())
    first, second = fig.axes[0], fig.axes[1]
    assert [t.get_text() for t in first.get_yticklabels()] == ["m=10, k=5", "m=20, k=10", "m=30, k=15"]
    assert [t.get_text() for t in first.get_xticklabels()] == ["10@5", "20@10", "30@15"]
    assert first.get_title() == ("L_Relax on D\nstand-in for istella (ARF Figs. 2, 4)\n"
                                 "diagonal best in 3/3 columns (chance 1/3)")
    assert second.get_title().endswith("diagonal best in 3/3 columns (chance 1/3)")  # row order does not matter
    texts = [t.get_text() for t in first.texts]
    assert len(texts) == 9 and texts[0] == "0.601" and texts[1] == "0.511"  # row 0: (0.601, 0.511, 0.521)
    assert "Diagonal best in h/C columns" in fig.texts[0].get_text()


def test_cli_prints_each_panels_share_and_writes_both_files(tmp_path, capsys):
    path = tmp_path / "Fold1.parquet"
    frame = _frames()
    frame.loc[frame.method == "relax.m10.k5", "recall_arf@10@5"] = 0.0  # column 0 now lost by its own row
    write_frame(frame, path)
    assert read_frame(path).shape == frame.shape
    spec = {**_spec(), "panels": _spec()["panels"][:1]}
    rc = main(["figure", "recall_heatmap", "--spec", json.dumps(spec), "--input", str(path),
               "--png", str(tmp_path / "h.png"), "--pdf", str(tmp_path / "h.pdf")])
    assert rc == 0
    assert "recall_heatmap: ARF-relax on D: diagonal best in 2/3 columns (chance 1/3)" in capsys.readouterr().out
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "h.pdf").read_bytes()[:4] == b"%PDF"


def test_the_caption_states_how_the_recall_was_graded():
    """The heatmap grades as ARF's tables do (the default profile's recall_heatmap: tfranking);
    its caption says so, from the plan's spec."""
    from bench.config import plan
    from bench.config import validate as cv

    spec = plan.heatmap_spec(cv.load_config())
    assert set(spec["conventions"].values()) == {"tfranking"}
    fig = H.recall_heatmaps(_frames(), {**_spec(), "conventions": {"d": "tfranking"}})
    caption = fig.texts[0].get_text()
    assert "Graded as TF-Ranking grades" in caption and "divides by k" in caption and "NDCG" not in caption
    plain = H.recall_heatmaps(_frames(), _spec()).texts[0].get_text()  # a spec without conventions: none stated
    assert "Graded as" not in plain

"""The ranking across datasets and folds rendered (bench.report.ranking): the table's blocks, marks
and caption, the computed-table builder reading the ranking parquet, and the critical-difference
diagram with 28 methods."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from bench import ranking as R
from bench.report import computed as C
from bench.report import ranking as RR
from bench.report.tables import to_html, to_latex, to_markdown
from bench.results import write_frame

METHODS = [f"loss{j:02d}" for j in range(28)]


def _per_query(n_blocks: int, methods: list[str], *, seeds: int = 2, skill: float = 0.03, rng=None) -> pd.DataFrame:
    rng = rng or np.random.default_rng(0)
    strength = np.linspace(skill, -skill, len(methods))
    rows = []
    for b in range(n_blocks):
        dataset, fold = ("web", "Fold1") if b == 0 else ("letor", f"Fold{b}")
        for seed in range(seeds):
            for j, m in enumerate(methods):
                rows.append(pd.DataFrame({"dataset": dataset, "fold": fold, "seed": seed, "method": m,
                                          "query": np.arange(20), "ndcg@10": 0.6 + strength[j] + rng.normal(0, .05, 20),
                                          "arp": 10 - 30 * strength[j] + rng.normal(0, 1, 20)}))
    return pd.concat(rows, ignore_index=True)


def _spec(n_blocks: int, methods: list[str], *, seeds: int = 2, metrics=("ndcg@10", "arp")) -> dict:
    blocks = ["web/Fold1"] + [f"letor/Fold{b}" for b in range(1, n_blocks)]
    return {"name": "ranking_table", "kind": "ranking", "title": "Ranking", "profile": "default", "table": "unified_table",
            "table_title": "Unified table", "metrics": list(metrics), "alpha": 0.05, "seeds": list(range(seeds)),
            "datasets": [{"name": "web", "label": "Web"}, {"name": "letor", "label": "LETOR"}], "list_sizes": [],
            "methods": [{"name": m, "label": m.upper()} for m in methods], "blocks": blocks,
            "evaluation": {"empty_query": "one", "ties": "stable"}, "conventions": {"web": "default", "letor": "default"}}


@pytest.fixture(scope="module")
def three_blocks():
    frame = R.ranking(_per_query(3, METHODS), ["ndcg@10", "arp"], methods=METHODS)
    return frame, _spec(3, METHODS)


def test_one_block_per_metric_rows_by_mean_rank_with_the_tests_in_the_title(three_blocks):
    frame, spec = three_blocks
    table = RR.build_ranking_table(frame, spec)
    assert [b.title.split(":")[0] for b in table.blocks] == ["NDCG@10", "ARP ↓"]
    for block, metric in zip(table.blocks, spec["metrics"]):
        rows = frame[(frame.part == "method") & (frame.metric == metric)].sort_values("position")
        t = rows.iloc[0]
        assert f"Friedman chi2 = {t.friedman_chi2:.2f} (df 27)" in block.title
        assert "N = 3 blocks, k = 28 methods" in block.title and f"CD = {t.cd:.2f}" in block.title
        assert [r[0].text for r in block.rows] == [m.upper() for m in rows["method"]]
        assert [float(r[1].text) for r in block.rows] == pytest.approx(rows["mean_rank"].round(2).tolist())
        assert block.rows[0][0].underline and block.rows[0][-2].text == "best"
        # bold = the best and every method not distinguishable from it
        assert [r[0].bold for r in block.rows] == [bool(b or not d) for b, d in zip(rows.is_best, rows.distinguishable)]
        assert block.header[3:6] == ["Web Fold1", "LETOR Fold1", "LETOR Fold2"]  # few blocks: one column each


def test_the_caption_says_what_a_block_is_how_ranks_and_tests_are_made_and_the_power(three_blocks):
    frame, spec = three_blocks
    caption = RR.build_ranking_table(frame, spec).caption
    for words in ("A block is one dataset and test fold; N = 3 blocks: web/Fold1, letor/Fold1, letor/Fold2",
                  "mean over its 2 seeds", "1 = best", "share the average of the ranks", "Friedman test",
                  "scipy.stats.friedmanchisquare, corrected for ties", "Nemenyi post-hoc test",
                  "scikit-posthocs", "CD = q_alpha sqrt(k(k+1)/(6N))", "alpha = 0.05", "Bold:",
                  "within seed spread", "little power", "Demšar"):
        assert words in caption, words


def test_every_format_renders_and_the_markdown_table_is_well_formed(three_blocks):
    frame, spec = three_blocks
    table = RR.build_ranking_table(frame, spec)
    md = to_markdown(table)
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) == 2 * (2 + 28)  # header, separator, 28 methods per metric
    assert {line.count(" | ") for line in rows if not line.startswith("|---")} == {len(table.blocks[0].header) - 1}
    assert "\\begin{tabular}" in to_latex(table) and "<table" in to_html(table)


def test_many_blocks_drop_the_per_block_columns_and_one_seed_has_no_spread():
    methods = METHODS[:5]
    frame = R.ranking(_per_query(9, methods, seeds=1), ["ndcg@10"], methods=methods)
    spec = _spec(9, methods, seeds=1, metrics=("ndcg@10",))
    table = RR.build_ranking_table(frame, spec)
    assert table.blocks[0].header == ["Method", "mean rank", "mean over blocks", "vs best (Nemenyi p)",
                                      "within seed spread of best"]
    assert {r[-1].text for r in table.blocks[0].rows[1:]} == {"n/a"}
    assert "no seed-to-seed spread" in table.caption and "letor (8 folds)" not in table.caption
    assert "N = 9 blocks" in table.caption


def test_the_computed_table_builder_reads_the_ranking_parquet(tmp_path, three_blocks):
    frame, spec = three_blocks
    path = tmp_path / "ranking_table.parquet"
    write_frame(frame, path)
    table = C.build([str(path)], spec, None)
    assert table.name == "ranking_table" and len(table.blocks) == 2
    with pytest.raises(ValueError, match="one input"):
        C.build([], spec, None)
    with pytest.raises(ValueError, match="no rows of metric 'mrr'"):
        RR.build_ranking_table(frame, {**spec, "metrics": ["mrr"]})


def test_the_cd_diagram_draws_one_panel_per_metric_with_28_methods(tmp_path, three_blocks):
    from bench.report.figures import save

    frame, spec = three_blocks
    fig = RR.cd_diagram(frame, spec)
    axes = fig.get_axes()
    assert len(axes) == 2
    for ax, metric in zip(axes, ("NDCG@10", "ARP ↓")):
        title = ax.get_title()
        assert title.startswith(f"{metric}: mean rank over 3 dataset-fold blocks of Web (1 fold), LETOR (2 folds)")
        assert "Friedman chi2" in title and "CD = " in title
        texts = [t.get_text() for t in ax.texts]
        labels = [t for t in texts if "LOSS" in t]  # each method once, with its mean rank
        assert len(labels) == 28 and all(re.fullmatch(r"LOSS\d\d \(\d+\.\d\d\)|\(\d+\.\d\d\) LOSS\d\d", t) for t in labels)
        assert any(t.startswith("CD = ") for t in texts)
    save(fig, tmp_path / "cd.png", tmp_path / "cd.pdf")
    assert (tmp_path / "cd.png").stat().st_size > 10_000 and (tmp_path / "cd.pdf").exists()


def test_without_a_friedman_rejection_one_bar_joins_every_method():
    methods = METHODS[:6]
    frame = R.ranking(_per_query(3, methods, skill=0.0, rng=np.random.default_rng(3)), ["ndcg@10"], methods=methods)
    rows = frame[frame.part == "method"]
    assert not bool(rows.friedman_rejects.iloc[0])
    p = RR._significance(frame, "ndcg@10", {m: m for m in methods}, rejects=False)
    assert (p.to_numpy() == 1.0).all() and set(p.index) == set(p.columns) == set(methods)
    fig = RR.cd_diagram(frame, _spec(3, methods, metrics=("ndcg@10",)))
    assert "one over all: Friedman does not reject" in fig.get_axes()[0].get_title()

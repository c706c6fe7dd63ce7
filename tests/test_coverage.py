"""docs/coverage.md: every table and figure of the four papers, once, with a status; every target
it names is one of the workflow's tables or figures, and every paper table or figure a target
reproduces is listed with it."""

from __future__ import annotations

from bench.config import plan
from bench.config.validate import load_config
from bench.report.coverage import STATUSES, read_coverage, to_html
from helpers import ROOT

# read off the four papers' captions (PiRank: the NeurIPS and arXiv versions number them alike)
ITEMS = {
    "PiRank": [f"Table {i}" for i in range(1, 4)] + [f"Fig. {i}" for i in range(1, 14)],
    "NeuralNDCG": [f"Table {i}" for i in range(1, 4)] + [f"Fig. {i}" for i in range(1, 3)],
    "SinkProp": ["Fig. 1", "Fig. 2"],
    "ARF": [f"Table {i}" for i in range(1, 10)] + [f"Fig. {i}" for i in range(1, 7)],
}
ROWS = read_coverage(ROOT / "docs" / "coverage.md")


def test_every_table_and_figure_of_the_four_papers_is_listed_once_with_a_status():
    listed = [(r["paper"], r["item"]) for r in ROWS]
    assert sorted(listed) == sorted((p, i) for p, items in ITEMS.items() for i in items)
    assert len(set(listed)) == len(listed)
    for r in ROWS:
        assert r["status"] in STATUSES, r
        assert r["what"], r
        has_target = r["status"] in ("reproduced", "partly", "configured")
        assert bool(r["targets"]) == has_target, r


def test_every_target_named_is_a_table_or_figure_of_the_workflow():
    known = {*plan.TABLES, *plan.COMPUTED_TABLES, *plan.FIGURES}
    assert {t for r in ROWS for t in r["targets"]} <= known


def test_every_table_that_reproduces_a_paper_item_is_in_the_list():
    targets = {t for r in ROWS for t in r["targets"]}
    sources = {t for t, src in plan.TABLE_SOURCES.items() if src} | {
        t for t, (_, src) in plan.COMPUTED_TABLES.items() if src}
    assert sources - targets == set()
    own = {t for t, src in plan.TABLE_SOURCES.items() if not src} | {
        t for t, (_, src) in plan.COMPUTED_TABLES.items() if not src}  # this suite's own (ranking_table)
    assert own & targets == set()
    assert set(plan.FIGURES) - set(plan.OWN_FIGURES) - targets == set()
    assert set(plan.OWN_FIGURES) & targets == set()


def test_the_report_page_marks_what_the_profile_builds():
    config = load_config(ROOT / "config" / "paper.yaml", ROOT / "config" / "letor.yaml")
    page = to_html(ROWS, plan.coverage_args(config)[1:-2], "letor")
    assert "letor_curves (built here)" in page and "pirank_table1 (not in this profile)" in page
    assert "15-day online A/B test" in page

"""Issue 41's planning: validation graded under the protocol's convention, a table testing as its
paper did, the rows at the paper's chosen points, and the caption facts the config gives."""

from __future__ import annotations

import pytest

from bench.config import plan
from bench.config import validate as cv
from bench.errors import ConfigError
from bench.report.tables import caption
from helpers import ROOT

PAPER = ROOT / "config" / "paper.yaml"


@pytest.fixture(scope="module")
def paper() -> dict:
    return cv.load_config(PAPER)


def test_each_protocol_validates_as_its_tables_grade(paper):
    default = cv.load_config()
    got = {p: plan.protocol_convention(default, p, "syn-web") for p in default["protocols"]}
    assert got == {"pirank": "tfranking", "pirank_ablation": "tfranking", "neuralndcg": "allrank",
                   "arf": "tfranking", "letor": "default", "unified": "default"}
    assert plan.protocol_convention(paper, "arf", "istella-arf") == "tfranking"
    assert plan.protocol_convention(paper, "neuralndcg", "istella") == "allrank"
    assert plan.protocol_convention(paper, "letor", "ohsumed") == "letor3"  # the dataset's, no table says otherwise
    forced = cv.load_config(overrides={"evaluation": {"convention": "default"}})
    assert plan.protocol_convention(forced, "pirank", "syn-web") == "default"


def test_tables_that_share_runs_but_grade_apart_must_say_how_validation_grades():
    with pytest.raises(ConfigError, match=r"protocols\.arf\.convention.*arf_table2 \(allrank\).*arf_table6 \(tfranking\)"):
        cv.load_config(overrides={"tables": {"arf_table2": {"convention": "allrank"}}})
    chosen = cv.load_config(overrides={"tables": {"arf_table2": {"convention": "allrank"}},
                                       "protocols": {"arf": {"convention": "tfranking"}}})
    assert plan.run_config(chosen, "arf", "syn-web", "arf")["metrics"]["convention"] == "tfranking"
    spec = plan.table_spec(chosen, "arf_table2")
    assert "not as the test split" in caption(spec, has_paper=False)
    with pytest.raises(ConfigError, match=r"protocols\.arf\.convention.*must be one of"):
        cv.load_config(overrides={"protocols": {"arf": {"convention": "tf-ranking"}}})


def test_the_validation_rules_are_in_the_captions_and_the_curve_figures(paper):
    spec = plan.table_spec(paper, "pirank_table1")
    text = caption(spec, has_paper=True)
    assert "Validation (early stopping, the tested checkpoint, selection) is graded by the rules of TF-Ranking" in text
    assert "scores 0" in text
    arf = caption(plan.table_spec(paper, "arf_table2"), has_paper=True)
    assert "shares the arf protocol's runs, graded once, with arf_table6, arf_table7, arf_table8" in arf
    for figure in ("temperature_figure", "annealing_figure"):
        assert "TF-Ranking" in plan.figure_spec(paper, figure)["graded"], figure


def test_pirank_table_tests_uncorrected_and_others_keep_holm(paper):
    assert plan.table_stats(paper, "pirank_table1")["correction"] == "none"
    assert plan.table_stats(paper, "neuralndcg_table3")["correction"] == "holm"
    args = plan.stats_args(paper, "pirank_table1")
    assert args[args.index("--correction") + 1] == "none"
    assert "no multiple-comparison correction" in caption(plan.table_spec(paper, "pirank_table1"), has_paper=True)
    with pytest.raises(ConfigError, match=r"tables.pirank_table1.stats.correction"):
        cv.load_config(overrides={"tables": {"pirank_table1": {"stats": {"correction": "bonferroni"}}}})


def test_arf_table_shows_each_searched_method_at_the_papers_tau(paper):
    rows = plan.paper_point_rows(paper, "arf_table2")
    got = {base: {ds: point.name for ds, (point, _) in by_ds.items()} for base, by_ds in rows.items()}
    assert got == {"arf": {"mslr-web30k-arf": "arf+tau=0.8+lr=0.001", "istella-arf": "arf+tau=0.6+lr=0.001"},
                   "arf_relax": {"mslr-web30k-arf": "arf_relax+tau=0.8", "istella-arf": "arf_relax+tau=0.4"},
                   "neuralsort_ce": {"mslr-web30k-arf": "neuralsort_ce+tau=0.4", "istella-arf": "neuralsort_ce+tau=0.8"}}
    # Tables 6-8's runs hold those points: nothing new is trained for the rows
    assert {run for by_ds in rows.values() for _, run in by_ds.values()} == {
        "arf_tau0.8", "arf_tau0.6", "arf_relax_tau0.8", "arf_relax_tau0.4", "neuralsort_ce_tau0.4", "neuralsort_ce_tau0.8"}
    names = [m["name"] for m in plan.table_spec(paper, "arf_table2")["methods"]]
    assert names.index("arf@paper") == names.index("arf") + 1
    args = plan.stats_args(paper, "arf_table2")
    assert args[args.index("--references") + 1:] == ["arf_relax@paper", "neuralsort_ce@paper", "arf@paper"][:0] or \
        set(args[args.index("--references") + 1:]) == {"arf@paper", "arf_relax@paper", "neuralsort_ce@paper"}
    ev = plan.evaluation(paper, "arf_table2", "istella-arf")
    assert ("arf@paper", None, "arf_tau0.6", 0) in ev.run_names("Fold1")
    text = caption(plan.table_spec(paper, "arf_table2"), has_paper=True)
    assert "best-on-test row of its Tables 6-8" in text and "never bold" in text


def test_arf_grid_spans_the_papers_range_and_searches_lr_for_arf_only(paper):
    selects = plan.table_selects(paper, "arf_table2")
    for method, select in selects.items():
        taus = select["grid"]["params.tau"]
        assert (min(taus), max(taus)) == (0.1, 10.0), method
        assert ("train.lr" in select["grid"]) == (method == "arf"), method


def test_captions_state_the_filter_the_refit_and_the_single_runs(paper):
    arf = caption(plan.table_spec(paper, "arf_table2"), has_paper=True)
    assert "more than 40 documents and at least 15 positives" in arf and "185 documents drawn" in arf
    assert "a batch size of 20,000" in arf
    nndcg = caption(plan.table_spec(paper, "neuralndcg_table3"), has_paper=True)
    assert "refit from scratch on the training and validation splits together" in nndcg
    assert "PiRank names no feature transform" not in nndcg
    pirank = caption(plan.table_spec(paper, "pirank_table1"), has_paper=True)
    assert "grid of this suite's choosing" in pirank and "the mean of three seeds" in pirank
    assert "per-list values" in pirank


def test_heatmap_says_it_trains_a_selected_loss_at_its_configured_tau(paper):
    notes = plan.heatmap_spec(paper)["notes"]
    assert any(n.startswith("ARF-relax") and "tau = " in n and "arf_table2 selects tau" in n for n in notes), notes


def test_a_refit_protocol_with_a_run_that_cannot_refit_is_refused_before_any_job():
    with pytest.raises(ConfigError, match=r"protocols\.letor\.train\.refit.*'linear_regression' is a linear run"):
        cv.load_config(overrides={"protocols": {"letor": {"train": {"refit": True}}}})
    assert cv.load_config(overrides={"protocols": {"neuralndcg": {"train": {"refit": True}}}})

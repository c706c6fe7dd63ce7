"""Table rendering from a constructed statistics table; paper numbers as printed."""

from __future__ import annotations

import html.parser

import pandas as pd
import pytest

from bench.config import plan
from bench.config import validate as cv
from bench.report import tables as T
from bench.report.paper import load_paper_numbers
from helpers import ROOT


def _stats(rows):
    cols = ["dataset", "metric", "method", "mean", "std_over_seeds", "n_queries", "is_best", "not_worse"]
    frame = pd.DataFrame(rows, columns=cols)
    frame["p_value"] = frame["p_adjusted"] = 0.5
    return frame


@pytest.fixture
def stats():
    return _stats(
        [
            ("mslr", "ndcg@10", "a", 0.45, 0.01, 100, True, True),
            ("mslr", "ndcg@10", "b", 0.44, 0.02, 100, False, True),
            ("mslr", "ndcg@10", "c", 0.30, 0.03, 100, False, False),
            ("mslr", "arp", "a", 45.5, 0.5, 90, False, False),
            ("mslr", "arp", "b", 45.1, 0.4, 90, True, True),
        ]
    )


SPEC = {
    "name": "demo",
    "title": "Demo table",
    "datasets": [{"name": "mslr", "label": "MSLR", "role": "mslr-web30k"}],
    "methods": [{"name": "a", "label": "Alpha"}, {"name": "b", "label": "Beta_1"}, {"name": "c", "label": "Gamma"}],
    "metrics": ["ndcg@10", "arp"],
    "seeds": [0, 1, 2],
    "stats": {"test": "wilcoxon", "correction": "none", "alpha": 0.01},
    "evaluation": {"empty_query": "zero", "ties": "stable"},
    "paper": "demo_paper",
}


def _cells(table):
    return {row[0].text: row[1:] for row in table.blocks[0].rows}


def test_marks_come_from_the_columns_not_from_the_means(stats):
    table = T.build_table(stats, SPEC)
    cells = _cells(table)
    ndcg_a, arp_a = cells["Alpha"]
    ndcg_b, arp_b = cells["Beta_1"]
    ndcg_c, arp_c = cells["Gamma"]
    assert (ndcg_a.bold, ndcg_a.underline) == (True, True)
    assert (ndcg_b.bold, ndcg_b.underline) == (True, False)
    assert (ndcg_c.bold, ndcg_c.underline) == (False, False)
    # ARP: the renderer trusts is_best (lower is better), never re-ranks by mean
    assert arp_b.underline and not arp_a.bold
    assert arp_c.text == "n/a"  # no statistics row
    assert ndcg_a.text == "0.4500" and ndcg_a.sub == "± 0.0100"
    assert arp_b.text == "45.100" and arp_b.sub == "± 0.400"


def test_single_seed_prints_no_spread(stats):
    table = T.build_table(stats, {**SPEC, "seeds": [0]})
    assert _cells(table)["Alpha"][0].sub == ""
    assert "One seed" in table.caption


def test_caption_states_marks_test_correction_and_conventions(stats):
    caption = T.build_table(stats, SPEC).caption
    assert "Mean over 3 seeds" in caption
    assert "Bold: the best mean and every method not significantly worse" in caption
    assert "underlined: the best mean" in caption
    assert "Wilcoxon" in caption and "no multiple-comparison correction" in caption and "alpha = 0.01" in caption
    assert "score 0 in NDCG (TF-Ranking convention)" in caption  # empty_query = zero
    assert "Gain 2^y-1" in caption
    # only the shown metrics' conventions: NDCG and ARP, not MRR, MAP, OPA or recall
    assert "ARP (lower is better)" in caption
    assert not any(word in caption for word in ("MRR", "MAP", "OPA", "Recall", "binary relevance"))


def test_paper_column_shows_printed_value_and_difference(stats):
    paper = pd.DataFrame(
        [
            {"table": "demo_paper", "role": "mslr-web30k", "l_test": 0, "method": "a", "metric": "ndcg@10",
             "value": 0.40, "printed": 40.0, "source": "x"},
            {"table": "other", "role": "mslr-web30k", "l_test": 0, "method": "b", "metric": "ndcg@10",
             "value": 0.99, "printed": 0.99, "source": "x"},
        ]
    )
    table = T.build_table(stats, SPEC, paper)
    header = table.blocks[0].header
    assert header == ["Method", "NDCG@10", "paper (Δ)", "ARP ↓", "paper (Δ)"]
    cells = _cells(table)
    assert cells["Alpha"][1].text == "0.4000 (+0.0500)"
    assert cells["Beta_1"][1].text == "–"  # another table's number is not used
    assert "paper (Δ)" in table.caption
    # no role (a synthetic stand-in): no paper column at all
    no_role = {**SPEC, "datasets": [{"name": "mslr", "stands_for": ["mslr-web30k"]}]}
    table = T.build_table(stats, no_role, paper)
    assert "paper (Δ)" not in table.blocks[0].header
    assert "synthetic stand-in for mslr-web30k" in table.blocks[0].title


def test_three_formats(stats):
    table = T.build_table(stats, SPEC)
    md = T.to_markdown(table)
    assert "| Alpha | **<u>0.4500</u>** ± 0.0100 |" in md
    tex = T.to_latex(table)
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"\textbf{\underline{0.4500}} $\pm$ 0.0100" in tex
    assert r"Beta\_1" in tex  # escaped
    page = T.to_html(table)
    tags = []

    class Parser(html.parser.HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag)

        def handle_endtag(self, tag):
            assert tags and tag in tags
            tags.remove(tag)

    Parser().feed(page)
    assert [t for t in tags if t not in ("meta",)] == []  # every tag closed
    assert "<b><u>0.4500</u></b>" in page


def test_listsize_layout_rows_l_test_columns_l_train():
    rows = []
    for size in (10, 20):
        for method, mean, best in (("m10", 0.50 + size / 1000, False), ("m20", 0.60, True)):
            rows.append((f"syn@Ltest={size}", "ndcg@1", method, mean, 0.0, 50, best, best))
    spec = {"name": "ls", "layout": "listsize", "datasets": [{"name": "syn"}],
            "methods": [{"name": "m20"}, {"name": "m10"}], "metrics": ["ndcg@1"], "seeds": [0],
            "list_sizes": [10, 20], "l_train": {"m10": 10, "m20": 20}}
    table = T.build_table(_stats(rows), spec)
    block = table.blocks[0]
    assert block.header == ["L_test \\ L_train", "10", "20"]
    assert [r[0].text for r in block.rows] == ["10", "20"]
    assert block.rows[1][1].text == "0.5200" and block.rows[1][2].underline


def test_methods_layout_with_one_test_list_size():
    stats = _stats([("d@Ltest=200", "mrr", "a", 0.7, 0.0, 10, True, True)])
    spec = {"name": "t", "datasets": [{"name": "d"}], "methods": [{"name": "a"}], "metrics": ["mrr"],
            "seeds": [0], "list_sizes": [200]}
    table = T.build_table(stats, spec)
    assert table.blocks[0].rows[0][1].text == "0.7000"
    assert "L_test = 200" in table.blocks[0].title


def test_duplicate_or_incomplete_statistics_are_rejected(stats):
    with pytest.raises(ValueError, match="two rows"):
        T.build_table(pd.concat([stats, stats.iloc[:1]]), SPEC)
    with pytest.raises(ValueError, match="lacks columns"):
        T.build_table(stats.drop(columns=["not_worse"]), SPEC)


# ----------------------------------------------------------------------------- paper numbers


def test_paper_numbers_spot_checks_against_the_printed_tables():
    """Values typed here from the papers' text (independent of the YAML transcription)."""
    p = load_paper_numbers()

    def value(table, role, method, metric, l_test=0):
        hit = p[(p.table == table) & (p.role == role) & (p.method == method) & (p.metric == metric)
                & (p.l_test == l_test)]
        assert len(hit) == 1, (table, role, method, metric)
        return float(hit.value.iloc[0])

    assert value("pirank_table1", "mslr-web30k", "pirank_ndcg_t1000", "ndcg@10") == 0.446428
    assert value("pirank_table1", "yahoo-set1", "ranknet", "arp") == 10.514806
    assert value("pirank_table1", "mslr-web30k", "neuralsort_ce_t1000", "opa") == 0.635468
    assert value("neuralndcg_table3", "istella", "lambdarank", "ndcg@10") == pytest.approx(0.7109)
    assert value("neuralndcg_table3", "mslr-web30k", "xgboost_pairwise", "ndcg@5") == pytest.approx(0.4680)
    assert value("arf_table2", "istella", "softmax_pointwise", "ndcg@15") == 0.069  # point-wise Softmax
    assert value("arf_table2", "mslr-web30k", "arf", "recall_arf@30@15") == 0.446  # ARF eq. 4
    assert value("listsize_table3", "mslr-web30k", "pirank_ndcg_L100", "ndcg@10", 100) == 0.3878
    assert value("listsize_table3", "mslr-web30k", "pirank_ndcg_L10", "arp", 40) == 18.3042
    assert value("letor_published", "td2003", "linear_regression", "map") == 0.241  # Regression, Table 11.1
    assert value("letor_published", "mq2007", "listnet", "precision@3") == 0.433  # ListNet, Table 11.9
    assert value("letor_published", "mq2007", "RankBoost", "ndcg@10") == 0.446
    assert value("arf_table6", "istella", "arf_tau0.6", "recall_arf@30@15") == 0.651  # ARF Table 6
    assert value("arf_table8", "mslr-web30k", "neuralsort_ce_tau0.2", "ndcg@max") == 0.747  # ARF Table 8
    assert value("arf_table9", "istella", "arf", "seconds_per_epoch") == 226  # ARF Table 9
    assert value("neuralndcg_table2", "istella", "printed", "queries_test") == 9799  # NeuralNDCG Table 2
    assert value("neuralndcg_table1", "toy", "1", "sum") == 10.388  # NeuralNDCG Table 1, as printed
    assert len(p) == (6 * 8 * 2 + 17 * 2 * 2 + 9 * 3 * 2 + 4 * 7 * 4 + 7 * 7 + 4 * 7
                      + 3 * 9 * 3 * 2 + 9 * 2 + 4 * 7 + 2 * 4)  # + ARF Tables 6-8, 9, NeuralNDCG Tables 1, 2


def test_paper_rows_name_methods_and_metrics_of_their_table():
    cfg = cv.load_config(ROOT / "config" / "paper.yaml")  # ARF Tables 6-8: all nine temperatures
    p = load_paper_numbers()
    computed = {spec.get("paper"): name for name, spec in cfg["computed_tables"].items()}
    for table, grp in p.groupby("table"):
        if table in computed:  # not statistics tables: rows are toy rows, datasets or ARF Table 2's methods
            if table == "arf_table9":  # every row but the listwise Softmax, the reading ARF did not time
                methods = set(cfg["tables"][cfg["computed_tables"]["arf_table9"]["table"]]["methods"])
                assert set(grp.method) == methods - {"softmax"}
            continue
        if (grp.published != "").any():  # published baselines: only the reproduced rows are ours
            spec = next(t for t in cfg["tables"].values() if t.get("paper") == table)
            ours = grp[grp.published != grp.method]
            assert set(ours.method) <= set(spec["methods"]) and not ours.empty, table
            continue
        spec = cfg["tables"][table]
        assert spec["paper"] == table
        assert set(grp.method) <= set(spec["methods"]), table
        assert set(grp.metric) <= set(spec["metrics"]), table


def test_paper_profile_tables_get_the_transcribed_paper_column():
    paper_cfg = cv.load_config(ROOT / "config" / "paper.yaml")
    assert plan.table_roles(paper_cfg, "pirank_table1") == {"mslr-web30k": "mslr-web30k", "yahoo-set1": "yahoo-set1"}
    assert plan.table_roles(paper_cfg, "arf_table2") == {"mslr-web30k-arf": "mslr-web30k", "istella-arf": "istella"}
    stats = _stats([("mslr-web30k@Ltest=200", "ndcg@10", "pirank_ndcg_t1000", 0.4500, 0.001, 6306, True, True)])
    spec = {"name": "pirank_table1", "paper": "pirank_table1", "list_sizes": [200], "seeds": [0, 1, 2],
            "datasets": [{"name": "mslr-web30k", "role": "mslr-web30k"}],
            "methods": [{"name": "pirank_ndcg_t1000", "label": "PiRank-NDCG"}], "metrics": ["ndcg@10"]}
    table = T.build_table(stats, spec, load_paper_numbers())
    assert table.blocks[0].header == ["Method", "NDCG@10", "paper (Δ)"]
    assert table.blocks[0].rows[0][2].text == "0.4464 (+0.0036)"  # paper 0.446428


def test_caption_names_each_datasets_evaluation_convention():
    from bench.metrics import conventions_caption

    base = {"evaluation": {"empty_query": "one", "ties": "stable"}, "metrics": ["ndcg@10", "mrr"],
            "datasets": [{"name": "mq2008", "label": "MQ2008"}, {"name": "mslr-web30k", "label": "MSLR"}]}
    only_default = T.caption({**base, "conventions": {"mq2008": "default", "mslr-web30k": "default"}}, False)
    assert only_default == T.caption({k: v for k, v in base.items()}, False)  # default tables unchanged
    assert only_default.endswith(conventions_caption("one", "stable", metrics=["ndcg@10", "mrr"]))
    mixed = T.caption({**base, "conventions": {"mq2008": "letor4", "mslr-web30k": "default"}}, False)
    assert "MQ2008: LETOR 4.0 evaluation" in mixed and "Eval-Score-4.0.pl" in mixed
    assert "MSLR: Gain 2^y-1" in mixed and "MRR (not computed by Eval-Score-4.0.pl) follows the suite's default" in mixed
    letor = T.caption({**base, "metrics": ["ndcg@10", "map"], "conventions": {"mq2008": "letor4"}}, False)
    assert "Eval-Score-4.0.pl" in letor and "Gain 2^y-1" not in letor and "not computed" not in letor


def test_caption_states_only_the_conventions_of_the_metrics_shown():
    """Issue 34: a caption repeated the rules of metrics its table does not show (NeuralNDCG's
    NDCG-only table spoke of MRR, OPA, ARP and recall); each rule now comes with its metric."""
    base = {"evaluation": {"empty_query": "one", "ties": "expected"}, "datasets": [{"name": "syn-web"}]}
    ndcg_only = T.caption({**base, "metrics": ["ndcg@5", "ndcg@10"]}, False)
    assert "NDCG@k sums over the available items" in ndcg_only and "Score ties are averaged" in ndcg_only
    for absent in ("MRR", "MAP", "OPA", "ARP", "Recall", "precision", "P@k", "binary relevance", "1/2"):
        assert absent not in ndcg_only, absent
    with_opa = T.caption({**base, "metrics": ["opa", "mrr"]}, False)
    assert "counts 1/2 in OPA" in with_opa and "MRR uses binary relevance" in with_opa
    assert "Gain 2^y-1" not in with_opa and "NDCG" not in with_opa  # no gain, no empty-query rule
    letor = T.caption({**base, "evaluation": {"empty_query": "one", "ties": "stable"}, "metrics": ["map"],
                       "conventions": {"syn-web": "letor3"}}, False)
    assert "MAP counts labels >= 1" in letor and "NDCG" not in letor and "P@k" not in letor


def test_caption_names_the_tool_of_a_table_graded_by_its_papers_tool():
    """A table graded as its paper graded names the tool, the papers that used it and its rules."""
    base = {"evaluation": {"empty_query": "one", "ties": "stable"}, "datasets": [{"name": "syn-web"}]}
    pirank = T.caption({**base, "metrics": ["opa", "arp", "mrr", "ndcg@10"], "conventions": {"syn-web": "tfranking"}},
                       False)
    assert "Graded as TF-Ranking grades (the evaluation code of PiRank" in pirank and "convention tfranking" in pirank
    assert "score 0 in NDCG and stay in the mean" in pirank
    assert "OPA pools the pairs of all queries" in pirank and "tied scores counted as wrong" in pirank
    assert "ARP (lower is better) pools all queries" in pirank and "paired tests and confidence intervals" in pirank
    assert "LightGBM" not in pirank  # the config's stable ties do not apply under a tool's convention
    arf = T.caption({**base, "metrics": ["recall_arf@30@15", "ndcg@15"], "conventions": {"syn-web": "tfranking"}},
                    False)
    assert "Recall@m@k (ARF) is not a TF-Ranking metric" in arf and "divides by k" in arf and "OPA" not in arf
    neural = T.caption({**base, "metrics": ["ndcg@5", "ndcg@10"], "conventions": {"syn-web": "allrank"}}, False)
    assert "Graded as allRank grades (NeuralNDCG's evaluation code" in neural and "score 1 in NDCG" in neural
    assert "MRR" not in neural and "OPA" not in neural


def test_caption_names_the_recall_denominator_of_the_table():
    """arf_table2 grades Recall@30@15 by ARF's eq. 4 (recall_arf: divides by k) and says so;
    a table with the suite's recall@m@k says it divides by min(k, list length)."""
    from bench.metrics import RECALL_CAPTIONS

    base = {"evaluation": {"empty_query": "one", "ties": "stable"}, "datasets": [{"name": "syn-web"}]}
    arf = T.caption({**base, "metrics": ["recall_arf@30@15", "ndcg@15", "ndcg@max"]}, False)
    assert RECALL_CAPTIONS["recall_arf"] in arf and RECALL_CAPTIONS["recall"] not in arf
    assert "divides by k" in arf
    suite = T.caption({**base, "metrics": ["ndcg@10", "recall@30@15"]}, False)
    assert RECALL_CAPTIONS["recall"] in suite and "ARF eq. 4" not in suite
    cfg = cv.load_config(ROOT / "config" / "default.yaml")
    assert cfg["tables"]["arf_table2"]["metrics"][0] == "recall_arf@30@15"
    assert "recall@30@15" in cfg["tables"]["unified_table"]["metrics"]  # the suite's own table keeps min(k, n)

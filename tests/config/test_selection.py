"""Hyperparameter selection in the config and the plan: grids, point names, reused runs, the
jobs of the default and paper profiles, and the errors a bad ``select`` gets (naming the key)."""

from __future__ import annotations

import copy
import re
from collections import Counter
from functools import cache

import pytest

from bench.config import plan, selection
from bench.config import validate as cv
from bench.config.jobs import target_jobs
from bench.costs.calibration import Calibration, Device
from bench.costs.plan import build_plan, render
from bench.errors import ConfigError
from bench.report.paper import load_paper_numbers
from helpers import ROOT

PAPER = ROOT / "config" / "paper.yaml"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$")  # the config's method names, file-safe


@cache
def _raw(*paths) -> dict:
    out = cv.read_yaml(cv.DEFAULT_CONFIG)
    for path in paths:
        out = cv.merge(out, cv.read_yaml(path))
    return out


def load(*paths, overrides: dict | None = None) -> dict:
    """:func:`bench.config.validate.load_config`, each YAML file read once per session."""
    return cv.validate_config(cv.merge(copy.deepcopy(_raw(*paths)), overrides or {}))


@pytest.fixture(scope="module")
def cfg():
    return load()


@pytest.fixture(scope="module")
def paper():
    return load(PAPER)


def test_points_are_the_grid_product_first_key_slowest_named_readably_and_file_safe():
    points = selection.grid_points("arf", {"params.tau": [0.2, 1.0], "train.lr": [0.01, 1e-4]})
    assert [p.name for p in points] == ["arf+tau=0.2+lr=0.01", "arf+tau=0.2+lr=0.0001", "arf+tau=1+lr=0.01",
                                        "arf+tau=1+lr=0.0001"]
    assert [p.label for p in points][1] == "tau = 0.2, lr = 0.0001"
    assert all(NAME.match(p.name) for p in points)
    # two keys ending alike keep their whole path; strings, booleans and null name themselves
    clash = selection.grid_points("m", {"params.k": [5], "model.k": ["a-b_c.d"], "params.st": [True, None]})
    assert [p.name for p in clash] == ["m+params.k=5+model.k=a-b_c.d+st=true", "m+params.k=5+model.k=a-b_c.d+st=null"]
    spec = selection.point_spec({"loss": "arf", "params": {"m": 30}, "label": "ARF"}, points[3], "ndcg@10")
    assert spec == {"loss": "arf", "params": {"m": 30, "tau": 1.0}, "train": {"lr": 1e-4, "early_stopping_metric": "ndcg@10"}}
    gbdt = selection.point_spec({"gbdt": "lightgbm", "objective": "lambdarank"},
                                selection.grid_points("g", {"num_trees": [10]})[0], "ndcg@5", "gbdt")
    assert gbdt == {"gbdt": "lightgbm", "objective": "lambdarank", "num_trees": 10, "early_stopping_metric": "ndcg@5"}


def test_the_best_mean_over_seeds_wins_ties_go_to_the_first_point_nan_never_wins():
    assert selection.best_point([[0.2, 0.8], [0.5, 0.5], [0.6, 0.3]], higher_is_better=True) == 0  # 0.5 = 0.5: first
    assert selection.best_point([[0.2, 0.8], [0.5, 0.51]], higher_is_better=True) == 1
    assert selection.best_point([[5.0, 5.0], [4.0, 6.5]], higher_is_better=False) == 0  # ARP: lower is better
    assert selection.best_point([[float("nan")], [0.1]], higher_is_better=True) == 1
    assert selection.best_point([[float("nan")], [float("nan")]], higher_is_better=True) == 0


def test_the_default_profile_selects_arfs_row_on_a_2x2_grid_reusing_arf_table6s_runs(cfg):
    pairs = plan.selection_candidates(cfg, "arf_table2", "syn-web")["arf"]
    assert [(p.label, run) for p, run in pairs] == [
        ("tau = 0.2, lr = 0.01", "arf+tau=0.2+lr=0.01"), ("tau = 0.2, lr = 0.001", "arf_tau0.2"),
        ("tau = 0.8, lr = 0.01", "arf+tau=0.8+lr=0.01"), ("tau = 0.8, lr = 0.001", "arf+tau=0.8+lr=0.001")]
    # a reused run trains exactly what the point asks for: same effective entry, same job config
    point = pairs[1][0]
    assert plan.effective_entry(cfg, "arf", "syn-web", plan.selection_point_spec(cfg, "arf_table2", point)) == \
        plan.effective_entry(cfg, "arf", "syn-web", cfg["methods"]["arf_tau0.2"])
    mine = plan.run_config(cfg, "arf", "syn-web", "arf+tau=0.2+lr=0.01")
    assert mine["methods"]["arf+tau=0.2+lr=0.01"] == {"loss": "arf", "params": {"m": 30, "k": 15, "tau": 0.2},
                                                       "train": {"lr": 0.01}}
    ev = plan.evaluation(cfg, "arf_table2", "syn-web")
    assert "arf" in ev.methods and "arf" not in dict(ev.trained_on("Fold1"))  # ARF's row is its points' runs
    jobs = target_jobs(cfg, ["arf_table2", "arf_table6"])
    trains = {j.output: j.targets for j in jobs if j.rule == "train"}
    run = "results/runs/arf/syn-web/Fold1/{}/seed{}"
    assert trains[run.format("arf_tau0.2", 0)] == ["arf_table2", "arf_table6"]  # one job, both tables
    assert trains[run.format("arf_tau0.2", 1)] == ["arf_table2"]  # Table 6 has one seed
    assert run.format("arf", 0) not in trains  # the untuned ARF is not trained for the table
    assert sum(1 for t in trains.values() if "arf_table2" in t) == 9 * 2 + 4 * 2  # 9 other rows (both Softmax readings)
    rules = Counter(j.rule for j in jobs)
    assert (rules["select"], rules["selection_table"]) == (1, 1)
    # the evaluation's inputs list every point's runs, each with its point; the select job's inputs
    # are their records (never a score or a test file)
    runs = plan.evaluated_runs(cfg, "arf_table2", "syn-web", "Fold1")
    assert {r["point"] for r in runs if r["method"] == "arf"} == {p.name for p, _ in pairs}
    assert plan.evaluation_selection(cfg, "arf_table2", "syn-web", "Fold1") == \
        ["results/selection/arf_table2/syn-web/Fold1.json"]
    inputs = plan.select_inputs(cfg, "arf_table2", "syn-web", "Fold1")
    # (each run's tracked file, plan.run_record: the run directory appears whole)
    assert len(inputs) == 4 * 2 and {i.rsplit("/", 1)[1] for i in inputs} == {"run.json"}
    assert plan.table_targets(cfg, "arf_table2")[3:] == [f"reports/tables/arf_table2_selection.{f}"
                                                          for f in ("md", "tex", "html")]
    # the other tables select nothing and keep their jobs
    assert plan.evaluation(cfg, "arf_table6", "syn-web").candidates == {}
    assert plan.selection_table_outputs(cfg, "arf_table6") == []


def test_the_paper_profile_selects_arf_table2s_tau_and_lr_and_pirank_table1s_tau(paper):
    jobs = target_jobs(paper, ["arf_table2"])
    arf2 = {j.output for j in jobs if j.rule == "train"}
    tables_6_8 = {j.output for j in target_jobs(paper, ["arf_table6", "arf_table7", "arf_table8"]) if j.rule == "train"}
    # tau over the paper's range 0.1-10 (Tables 6-8's nine and the ends); lr searched for ARF only
    taus, lrs = [0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0], [0.01, 0.001, 0.0001]
    for dataset in ("mslr-web30k-arf", "istella-arf"):
        for base in ("arf", "arf_relax", "neuralsort_ce"):
            pairs = plan.selection_candidates(paper, "arf_table2", dataset)[base]
            assert [(p.values["params.tau"], p.values.get("train.lr", 0.001)) for p, _ in pairs] == \
                [(t, lr) for t in taus for lr in (lrs if base == "arf" else [0.001])]
            for point, run in pairs:  # every point trains, on each of the three seeds
                assert {f"results/runs/arf/{dataset}/Fold1/{run}/seed{s}" for s in (0, 1, 2)} <= arf2
                # at the protocol's lr and a tau of Tables 6-8 the point is that table's run
                if point.values.get("train.lr", 0.001) == 0.001 and point.values["params.tau"] not in (0.1, 10.0):
                    assert run == f"{base}_tau{point.values['params.tau']}", run
    assert len(arf2) == (7 + 33 + 11 + 11) * 2 * 3 and len(arf2 & tables_6_8) == 162  # 7 untuned rows, both Softmax readings
    pirank = plan.selection_candidates(paper, "pirank_table1", "mslr-web30k")
    assert {b: [(p.values["params.tau"], r) for p, r in pairs] for b, pairs in pirank.items()} == {
        b: [(1.0, f"{b}+tau=1"), (10.0, f"{b}+tau=10"), (100.0, f"{b}+tau=100"), (1000.0, b),
            (10000.0, f"{b}+tau=10000")] for b in ("neuralsort_ce_t1000", "pirank_ndcg_t1000")}
    assert plan.selection_metric(paper, "pirank_table1", "yahoo-set1", "pirank_ndcg_t1000") == "ndcg@10"
    assert plan.selection_metric(paper, "arf_table2", "istella-arf", "arf") == "recall_arf@30@15"


@pytest.mark.parametrize("profile", ["default", pytest.param("paper", marks=pytest.mark.slow)])
def test_ltr_bench_plan_counts_the_grid(profile, cfg, paper):
    """What ``ltr-bench plan arf_table2`` lists (its build_plan and render): every grid point's
    runs; the default profile (9 + 4) x 2 seeds, the paper's 7 + 33 + 11 + 11 methods x 2 datasets x 3."""
    config, (runs, selects) = {"default": (cfg, (26, 1)), "paper": (paper, ((7 + 33 + 11 + 11) * 2 * 3, 2))}[profile]
    calibration = Calibration(Device("cpu", "no measurements", 1))
    planned = build_plan(config, ["arf_table2"], calibration)
    rules = Counter(p.job.rule for p in planned)
    assert (rules["train"], rules["select"], rules["selection_table"]) == (runs, selects, 1)
    text = render(planned, calibration, title="plan", config=config)
    assert re.search(rf"^arf_table2 +{len(planned)} +{runs} ", text, re.M), text
    assert f"{selects} x select:" in text and f"{runs} x train:" in text


def test_the_papers_choices_are_the_tables_6_8_rows_equal_to_table_2s(paper):
    """ARF prints no chosen tau; each Table 2 row of ARF, L_Relax and NeuralSort equals exactly one
    row of its Table 6, 7 or 8 (all three metrics, as printed), and that row's tau is the one the
    config records as the paper's choice (the oracle: the transcribed paper numbers)."""
    numbers = load_paper_numbers()

    def rows(name: str, role: str) -> dict[str, tuple[float, ...]]:
        """Table ``name``'s printed rows on ``role``: method -> its values, metrics sorted."""
        sub = numbers[(numbers.table == name) & (numbers.role == role)]
        return {m: tuple(g.sort_values("metric").value) for m, g in sub.groupby("method")}

    sensitivity = {"arf": "arf_table6", "arf_relax": "arf_table7", "neuralsort_ce": "arf_table8"}
    selects = plan.table_selects(paper, "arf_table2")
    for base, table in sensitivity.items():
        for role in ("mslr-web30k", "istella"):
            table2 = rows("arf_table2", role)[base]
            equal = [m for m, values in rows(table, role).items() if values == table2]
            assert len(equal) == 1, (base, role, equal)
            assert selects[base]["paper"][role] == {"params.tau": paper["methods"][equal[0]]["params"]["tau"]}
    # PiRank Table 2 gives tau = 1000 for PiRank and NeuralSort
    for base in ("neuralsort_ce_t1000", "pirank_ndcg_t1000"):
        assert plan.table_selects(paper, "pirank_table1")[base]["paper"] == {
            r: {"params.tau": 1000.0} for r in ("mslr-web30k", "yahoo-set1")}


@pytest.mark.parametrize(("select", "message"), [
    ({"arf": {"grid": {"loss.tau": [1.0]}}},
     r"'tables.arf_table2.select.arf.grid.loss.tau': a neural method's grid sets params.<key>, train.<key>, "
     r"model.<key>; got 'loss.tau'"),
    ({"arf": {"grid": {"train.lrr": [0.1]}}}, r"'tables.arf_table2.select.arf.grid.train.lrr': unknown train key 'lrr'"),
    ({"arf": {"grid": {"train.lr": [0.01, 0.0]}}},
     r"'tables.arf_table2.select.arf.grid.train.lr.1': 0.0 is not a valid train.lr \(.*less than or equal to"),
    ({"arf": {"grid": {"params.tau": [1.0, 1]}}}, r"'tables.arf_table2.select.arf.grid.params.tau.1': 1 is listed twice"),
    ({"arf": {"grid": {"params.tau": [[1.0]]}}}, r"'tables.arf_table2.select.arf.grid.params.tau.0'"),
    ({"arf": {"grid": {"params.tau": ["a/b"]}}}, r"'tables.arf_table2.select.arf.grid.params.tau.0': 'a/b' would not"),
    ({"arf": {"grid": {"train.early_stopping_metric": ["ndcg@10"]}}}, r"set it with 'tables.arf_table2.select.arf.metric'"),
    ({"arf_relax": {"grid": {}}}, r"'tables.arf_table2.select.arf_relax.grid'"),
    ({"arf": {"gird": {"params.tau": [1.0]}}}, r"'tables.arf_table2.select.arf"),
    ({"listnet": {"grid": {"params.tau": [1.0]}}},
     r"'tables.arf_table2.select.listnet': unknown method of the table 'listnet'"),
    ({"arf": {"grid": {"params.tau": [1.0]}, "paper": {"yahoo-set1": {"params.tau": 1.0}}}},
     r"'tables.arf_table2.select.arf.paper': unknown dataset role of the table 'yahoo-set1'"),
    ({"arf": {"grid": {"params.tau": [1.0]}, "paper": {"istella": {"params.alpha": 0.1}}}},
     r"'tables.arf_table2.select.arf.paper.istella': unknown grid key 'params.alpha'"),
    ({"arf": {"grid": {"model.hidden": [3]}}}, r"'tables.arf_table2.select.arf.grid"),
])
def test_a_bad_select_is_refused_naming_the_config_key(select, message):
    with pytest.raises(ConfigError, match=message):
        load(overrides={"tables": {"arf_table2": {"select": select}}})


def test_other_select_refusals_name_the_key():
    with pytest.raises(ConfigError, match=r"'tables.sinkprop_letor.select.linear_regression': 'linear_regression' "
                                          r"is a linear method"):
        load(overrides={"tables": {"sinkprop_letor": {"select": {
            "linear_regression": {"grid": {"params.x": [1]}}}}}})
    with pytest.raises(ConfigError, match=r"'tables.sinkprop_letor.select.sinkprop': 'sinkprop' is trained by the "
                                          r"protocol's own section \(sinkprop_protocol\)"):
        load(overrides={"tables": {"sinkprop_letor": {"select": {"sinkprop": {"grid": {"params.x": [1]}}}}}})
    with pytest.raises(ConfigError, match=r"grid point 'arf\+tau=0.2\+lr=0.01' has the name of a method"):
        load(overrides={"methods": {"arf+tau=0.2+lr=0.01": {"loss": "arf"}}})
    with pytest.raises(ConfigError, match=r"'tables.arf_table6.select.arf': its grid point 'arf\+tau=0.2\+lr=0.01' is "
                                          r"also a point of 'tables.arf_table2.select.arf' with other settings"):
        load(overrides={"tables": {"arf_table6": {"methods": ["arf"], "select": {"arf": {
            "grid": {"params.tau": [0.2], "train.lr": [0.01]}, "metric": "ndcg@10"}}}}})
    # a profile drops a grid it inherits with null
    off = load(overrides={"tables": {"arf_table2": {"select": {"arf": None}}}})
    assert plan.table_selects(off, "arf_table2") == {} and plan.selection_table_outputs(off, "arf_table2") == []

"""The recall heatmaps' training per (m, k) (bench.config.heatmap and its plan functions): the
job config each training point produces, the runs shared with the ARF table, the figure's
rows and columns, the jobs the planner counts, and the config errors."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from bench.config import heatmap, plan
from bench.config import validate as cv
from bench.config.jobs import target_jobs
from bench.config.settings import resolve_neural
from bench.errors import ConfigError
from helpers import ROOT


@pytest.fixture(scope="module")
def cfg() -> dict:
    return cv.load_config()


@pytest.fixture(scope="module")
def paper() -> dict:
    return cv.load_config(ROOT / "config" / "paper.yaml")


@pytest.mark.parametrize(("method", "params", "selection"), [
    ("arf_relax.m10.k5", {"m": 10, "k": 5}, "recall_arf@10@5"),
    ("lambda_recall.m20.k10", {"m": 20, "k": 10}, "recall_arf@20@10"),
    ("lambdaloss_k15.k5", {"k": 5}, "recall_arf@10@5"),  # k only: m of the grid's pair with k = 5
])
def test_a_training_point_is_one_job_config_with_its_cutoffs_and_selection(cfg, method, params, selection):
    run = plan.run_config(cfg, "arf", "syn-web", method)
    entry = run["methods"][method]
    assert entry["params"] == params and entry["train"] == {"early_stopping_metric": selection}
    base = plan.run_config(cfg, "arf", "syn-web", method.split(".")[0])
    assert run["model"] == base["model"] and run["train"] == base["train"]  # the ARF protocol, unchanged
    settings = resolve_neural(run, method)  # what the trainer gets
    assert settings["params"] == params and settings["train"]["early_stopping_metric"] == selection
    assert method in plan.method_names(cfg, rule="train")  # the train rule's wildcard constraint


def test_a_derived_model_exists_only_under_the_heatmaps_protocol(cfg):
    with pytest.raises(ConfigError, match="unknown method 'arf_relax.m10.k5'"):
        plan.method_spec(cfg, "unified", "arf_relax.m10.k5")
    off = cv.load_config(overrides={"figures": {"recall_heatmap": {"enabled": False}}})
    assert plan.heatmap_methods(off) == {} and "arf_relax.m10.k5" not in plan.all_methods(off)


def test_the_table_points_models_are_the_arf_tables_runs(cfg, paper):
    rows = plan.heatmap_rows(cfg, "syn-web")
    assert [(r.title, run) for r, run in rows if r.base == "arf_relax"] == [
        ("m=10, k=5", "arf_relax.m10.k5"), ("m=20, k=10", "arf_relax.m20.k10"), ("m=30, k=15", "arf_relax")]
    assert [run for r, run in rows if r.base == "lambdaloss_k15"] == [
        "lambdaloss_k15.k5", "lambdaloss_k15.k10", "lambdaloss_k15"]
    # a protocol selecting on another metric: the [30, 15] models are trained apart
    other = cv.load_config(overrides={"protocols": {"arf": {"train": {"early_stopping_metric": "ndcg@10"}}}})
    assert "arf_relax.m30.k15" in [run for _, run in plan.heatmap_rows(other, "syn-web")]
    for dataset in ("istella-arf", "mslr-web30k-arf"):  # paper: 5 pairs x 3 losses, 3 of them the table's
        runs = [run for _, run in plan.heatmap_rows(paper, dataset)]
        assert len(runs) == 15 and len(set(runs) - set(paper["tables"]["arf_table2"]["methods"])) == 12


def test_figure_rows_are_training_points_and_columns_the_grid(cfg, paper):
    spec = plan.figure_spec(cfg, "recall_heatmap")
    assert spec["grid"] == [[10, 5], [20, 10], [30, 15]] and spec["metric"] == "recall_arf"
    assert [(p["dataset"], p["method"]) for p in spec["panels"]] == [
        ("syn-web", "arf_relax"), ("syn-web", "lambda_recall"), ("syn-web", "lambdaloss_k15")]
    relax = spec["panels"][0]
    assert relax["stands_for"] == ["istella", "mslr-web30k"] and relax["paper_figures"] == [2, 4]
    assert [(r["m"], r["k"], r["label"]) for r in relax["rows"]] == [
        (10, 5, "m=10, k=5"), (20, 10, "m=20, k=10"), (30, 15, "m=30, k=15")]
    assert [(r["m"], r["k"]) for r in spec["panels"][2]["rows"]] == [(None, 5), (None, 10), (None, 15)]
    pspec = plan.figure_spec(paper, "recall_heatmap")
    # ARF: Fig. 2 Istella (Lambda Recall, L_Relax), 3-4 MSLR-WEB30K (same), 5-6 LambdaLoss@k (MSLR, Istella)
    assert {(p["dataset"], p["method"]): p["paper_figures"] for p in pspec["panels"]} == {
        ("istella-arf", "arf_relax"): [2], ("istella-arf", "lambda_recall"): [2], ("istella-arf", "lambdaloss_k15"): [6],
        ("mslr-web30k-arf", "arf_relax"): [4], ("mslr-web30k-arf", "lambda_recall"): [3],
        ("mslr-web30k-arf", "lambdaloss_k15"): [5]}
    assert all(p["stands_for"] == [] and len(p["rows"]) == 5 for p in pspec["panels"])
    assert plan.figure_inputs(paper, "recall_heatmap") == ["results/paper/evaluated/recall_heatmap/istella-arf/Fold1.parquet",
                                                           "results/paper/evaluated/recall_heatmap/mslr-web30k-arf/Fold1.parquet"]


def test_the_planner_counts_every_model(cfg, paper):
    jobs = target_jobs(cfg, ["recall_heatmap"])
    trains = [j for j in jobs if j.rule == "train"]
    assert len(trains) == 9 and {j.wildcards["seed"] for j in trains} == {0}
    alone = {j.output for j in trains} - {j.output for j in target_jobs(cfg, ["arf_table2"])}
    assert len(alone) == 6  # 3 losses x 2 training points besides the table's [30, 15]
    counts = Counter(j.rule for j in target_jobs(paper, ["recall_heatmap"]))
    assert (counts["train"], counts["evaluate"], counts["figure"]) == (2 * 15 * 3, 2, 1)


@pytest.mark.parametrize(("change", "key", "message"), [
    ({"grid": [[10, 5], [5, 10]]}, "figures.recall_heatmap.grid.1", "k = 10 > m = 5"),
    ({"grid": [[10, 5], [10, 5]]}, "figures.recall_heatmap.grid.1", "listed twice"),
    ({"methods": ["arf_relax", "softmax"]}, "figures.recall_heatmap.methods.1", "not a loss with cut-off params"),
    ({"methods": ["arf_relax", "nope"]}, "figures.recall_heatmap.methods.1", "unknown method"),
    ({"datasets": ["istella", "nowhere"]}, "figures.recall_heatmap.datasets.1", "dataset or role"),
    ({"grid": [[10, 5]]}, "figures.recall_heatmap.grid", "too short"),
])
def test_config_errors_name_the_key(change, key, message):
    raw = cv.read_yaml(ROOT / "config" / "default.yaml")
    raw["figures"]["recall_heatmap"].update(change)
    with pytest.raises(ConfigError) as info:
        cv.validate_config(copy.deepcopy(raw))
    assert f"'{key}" in str(info.value) and message in str(info.value), str(info.value)


def test_a_derived_name_may_not_shadow_a_catalogue_method():
    raw = cv.read_yaml(ROOT / "config" / "default.yaml")
    raw["methods"]["arf_relax.m10.k5"] = {"loss": "softmax"}
    with pytest.raises(ConfigError, match="'figures.recall_heatmap.methods.0'.*has the name of a method"):
        cv.validate_config(raw)


def test_training_rows_of_a_loss_with_m_only():
    rows = heatmap.training_rows("x", {"m": 30}, [[10, 5], [30, 5], [30, 15]])
    assert [(r.name, r.m, r.k, r.selection) for r in rows] == [("x.m10", 10, None, "recall_arf@10@5"),
                                                               ("x.m30", 30, None, "recall_arf@30@5")]

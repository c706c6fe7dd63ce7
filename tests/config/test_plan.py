"""bench.config.plan: every planning decision the workflow makes, on the real profiles.

``workflows/common.smk`` only maps wildcards to these functions, so what the workflow plans
is what these tests see.
"""

from __future__ import annotations

import pytest

from bench.config import plan
from bench.config import validate as cv
from bench.errors import ConfigError
from helpers import ROOT


@pytest.fixture(scope="module")
def cfg() -> dict:
    return cv.load_config()


def test_roles_map_every_table_to_synthetic_stand_ins_in_default():
    cfg = cv.load_config()
    for table in plan.TABLES:
        for ds in plan.table_datasets(cfg, table):
            assert cfg["datasets"][ds]["source"] == "synthetic", (table, ds)
        assert plan.table_roles(cfg, table) == {}  # no paper column for stand-ins


@pytest.mark.parametrize("profile", ["default.yaml", "paper.yaml"])
def test_every_run_config_is_accepted_by_the_trainers(profile):
    """Each (protocol, dataset, method) the tables train resolves in bench.training."""
    from bench.config import kinds
    from bench.config.settings import resolve_neural

    files = [] if profile == "default.yaml" else [ROOT / "config" / profile]
    cfg = cv.load_config(*files, overrides={"compare": {"losses": ["examples.my_loss:pairwise_squared_hinge"]}})
    seen = sinkprop_runs = 0
    for table in plan.enabled_tables(cfg):
        protocol = cfg["tables"][table]["protocol"]
        for ds in plan.table_datasets(cfg, table):
            for method in plan.table_methods(cfg, table):
                run_cfg = plan.run_config(cfg, protocol, ds, method)
                kind = kinds.run_kind(run_cfg, method)
                assert kinds.RUN_KINDS[kind].rule == plan.method_rule(cfg["methods"][method])
                kinds.load(kinds.RUN_KINDS[kind].resolve)(run_cfg, method)
                sinkprop_runs += kind == "sinkprop_protocol"
                seen += 1
    for ds in plan.compare_datasets(cfg):
        resolve_neural(plan.run_config(cfg, plan.COMPARE_EXPERIMENT, ds, "examples.my_loss.pairwise_squared_hinge"),
                           "examples.my_loss.pairwise_squared_hinge")
    assert seen > 50 and sinkprop_runs >= 1


def test_study_protocol_excludes_methods_and_includes_what_must_match():
    cfg = cv.load_config()
    proto = plan.study_protocol(cfg, "unified", "syn-web")
    # a tuned protocol's tuning: both sides of a comparison tune with the same budget, split and space
    assert set(proto) == {"dataset", "model", "train", "seeds", "evaluation", "metrics", "tuning"}
    assert proto["tuning"]["budget"] == cfg["tuning"]["budget"] and proto["tuning"]["fold"] == "Fold1"
    assert "tuning" not in plan.study_protocol(cfg, "pirank", "syn-web")
    assert proto["dataset"]["options"]["n_queries"] == cfg["datasets"]["syn-web"]["options"]["n_queries"]
    other = cv.load_config(overrides={"methods": {"ranknet": {"params": {"sigma": 2.0}}}})
    assert plan.study_protocol(other, "unified", "syn-web") == proto


def test_the_tables_evaluation_names_its_runs_metrics_and_list_sizes(cfg):
    ev = plan.evaluation(cfg, "pirank_table1", "syn-web")
    assert ev.experiment == "pirank" and ev.seeds == [0, 1] and ev.folds == ["Fold1"] and ev.list_sizes == []
    assert ev.methods == plan.table_methods(cfg, "pirank_table1") and ev.metrics == cfg["tables"]["pirank_table1"]["metrics"]
    runs = plan.evaluated_runs(cfg, "pirank_table1", "syn-web", "Fold1")
    assert len(runs) == len(ev.methods) * len(ev.seeds)
    assert runs[0] == {"method": ev.methods[0], "seed": 0, "dir": f"results/runs/pirank/syn-web/Fold1/{ev.methods[0]}/seed0"}
    args = plan.evaluate_args(cfg, "listsize_table3", "syn-web")
    assert args[0] == "--metrics" and args[args.index("--list-sizes") + 1:] == ["10", "20", "40"]
    assert args[args.index("--empty-query") + 1] == cfg["evaluation"]["empty_query"]
    assert plan.evaluated_files(cfg, "pirank_table1", ["syn-web"]) == ["results/evaluated/pirank_table1/syn-web/Fold1.parquet"]


def test_recall_freeze_and_compare_evaluations(cfg):
    recall = plan.evaluation(cfg, "recall_heatmap", "syn-web")
    spec = cfg["figures"]["recall_heatmap"]
    # the heatmap reproduces ARF's figures: ARF's eq. 4 (recall_arf, divides by k), at the grid's pairs
    assert recall.metrics == [f"recall_arf@{m}@{k}" for m, k in spec["grid"]] and len(recall.folds) == 1
    assert plan.figure_spec(cfg, "recall_heatmap")["metric"] == "recall_arf"
    freeze = plan.evaluation(cfg, "freeze", "syn-web")
    assert freeze.experiment == cfg["freeze"]["protocol"] and freeze.metrics == cfg["freeze"]["metrics"]
    example = cv.load_config(ROOT / "config" / "compare-example.yaml")
    compare = plan.evaluation(example, plan.COMPARE_EXPERIMENT, "syn-web")
    assert compare.experiment == "compare" and compare.methods == ["squared_hinge"] and compare.seeds == freeze.seeds
    with pytest.raises(ConfigError, match="no evaluation named 'nope'"):
        plan.evaluation(cfg, "nope", "syn-web")


def test_targets_list_every_enabled_table_and_figure_and_refuse_disabled_ones(cfg):
    outputs = plan.report_inputs(cfg)
    # + ARF Table 2's selection table (its ARF row is selected on a 2x2 grid) and the unified table's
    # (every method tuned on validation with the same budget)
    assert len(outputs) == 3 * (len(plan.TABLES) + len(plan.COMPUTED_TABLES) + 2) + 2 * len(plan.FIGURES) + 1
    assert "reports/tables/arf_table2_selection.md" in outputs and "reports/tables/unified_table_selection.md" in outputs
    assert outputs[-1] == plan.COVERAGE and "reports/tables/neuralndcg_table2.md" in outputs
    assert plan.table_outputs(cfg, "unified_table") == [f"reports/tables/unified_table.{f}" for f in ("md", "tex", "html")]
    off = cv.load_config(overrides={"tables": {"arf_table2": {"enabled": False}}})
    with pytest.raises(ConfigError, match="table arf_table2 is not enabled in profile default"):
        plan.table_outputs(off, "arf_table2")
    with pytest.raises(ConfigError, match="compare.losses' is empty"):
        plan.compare_outputs(cfg)
    assert plan.freeze_outputs(cfg) == ["results/frozen/default/syn-web/manifest.json"]


def test_method_names_split_the_runs_by_rule_and_kind(cfg):
    train, gbdt, linear = (plan.method_names(cfg, rule=r) for r in ("train", "gbdt", "linear"))
    assert gbdt == plan.method_names(cfg, kind="gbdt") and train == plan.method_names(cfg, kind="neural")
    assert plan.method_names(cfg, kind="sinkprop_protocol") == []  # a protocol's choice, not a method's
    assert gbdt and train and linear == ["linear_regression"]
    assert not set(gbdt) & set(train) and not set(linear) & (set(gbdt) | set(train))
    # the catalogue, the recall heatmap's models per (m, k), the grid points of ARF Table 2's
    # selection (neural, trained by `train`) and the tuned methods' configurations and chosen runs
    assert set(gbdt) | set(train) | set(linear) == (set(cfg["methods"]) | set(plan.heatmap_methods(cfg))
                                                    | set(plan.selection_methods(cfg)) | set(plan.tuning_methods(cfg)))
    assert {"lightgbm_lambdarank+cfg2", "lightgbm_lambdarank+tuned"} <= set(gbdt) and "arf+cfg3" in train
    assert gbdt == sorted(gbdt)
    assert all("gbdt" in plan.all_methods(cfg)[m] for m in gbdt)
    with pytest.raises(ValueError, match="kind must be one of"):
        plan.method_names(cfg, kind="tree")
    with pytest.raises(ValueError, match="rule must be one of"):
        plan.method_names(cfg, rule="tree")


def test_sinkprop_protocol_reaches_only_the_methods_it_lists(cfg):
    """The letor protocol's sinkprop_protocol goes (without `methods`) into sinkprop's run config only."""
    spec = cfg["protocols"]["letor"]["sinkprop_protocol"]
    run = plan.run_config(cfg, "letor", "syn-letor", "sinkprop")
    assert run["sinkprop_protocol"] == {k: v for k, v in spec.items() if k != "methods"}
    assert "sinkprop_protocol" not in plan.run_config(cfg, "letor", "syn-letor", "listnet")
    assert "sinkprop_protocol" not in plan.run_config(cfg, "unified", "syn-web", "sinkprop")
    assert plan.study_protocol(cfg, "letor", "syn-letor")["sinkprop_protocol"] == spec
    assert "sinkprop_protocol" not in plan.study_protocol(cfg, "unified", "syn-web")
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    mine, theirs = paper["protocols"]["letor"]["sinkprop_protocol"], spec
    # the default profile shrinks budgets only: same derived queries, cap, initialiser, schedule shape
    for key in ("methods", "derived_queries", "max_derived_size", "init_penalties", "sigma_start", "sigma_factor",
                "lbfgs_history", "patience"):
        assert mine[key] == theirs[key], key
    assert set(theirs["penalties"]) <= set(mine["penalties"]) and theirs["stages"] <= mine["stages"]
    assert theirs["lbfgs_iterations"] <= mine["lbfgs_iterations"]
    assert mine["derived_queries"] == 20 and mine["max_derived_size"] == 200  # the paper's values


def test_table_spec_names_stand_ins_layout_and_sources(cfg):
    spec = plan.table_spec(cfg, "pirank_table1")
    assert spec["datasets"] == [{"name": "syn-web", "label": "syn-web", "role": None,
                                 "stands_for": ["mslr-web30k", "yahoo-set1"]}]
    assert spec["layout"] == "methods" and spec["source"] == plan.TABLE_SOURCES["pirank_table1"]
    assert [m["name"] for m in spec["methods"]] == plan.table_methods(cfg, "pirank_table1")
    assert plan.table_spec(cfg, "listsize_table3")["layout"] == "listsize"


def test_figures_read_computed_tables(cfg):
    assert plan.figure_inputs(cfg, "scaling_figure") == [plan.SCALING_CSV]
    assert plan.figure_inputs(cfg, "listsize_figure") == ["results/stats/listsize_table3.parquet"]
    assert plan.figure_inputs(cfg, "recall_heatmap") == ["results/evaluated/recall_heatmap/syn-web/Fold1.parquet"]
    assert plan.figure_inputs(cfg, "neuralndcg_curves") == [plan.LOSS_CURVES]
    runs = plan.figure_spec(cfg, "temperature_figure")["runs"]
    assert plan.figure_inputs(cfg, "temperature_figure") == [f"{d}/run.json" for _, dirs in runs for d in dirs]
    assert not plan.figure_reads_inputs("temperature_figure") and plan.figure_reads_inputs("neuralndcg_curves")
    curves = cfg["figures"]["neuralndcg_curves"]
    assert plan.loss_curves_args(cfg) == ["--taus", *map(str, curves["taus"]), "--points", str(curves["points"])]


def test_command_arguments_for_stats_and_the_scaling_benchmark(cfg):
    st = cfg["stats"]
    assert " ".join(plan.stats_args(cfg, "unified_table")) == (
        f"--test {st['test']} --correction {st['correction']} --alpha {st['alpha']} --n-boot {st['n_boot']} "
        f"--seed {st['seed']}")
    args = plan.perf_args(cfg)
    spec = cfg["figures"]["scaling_figure"]
    assert args[args.index("--lengths") + 1] == ",".join(map(str, spec["sizes"]))
    assert args[args.index("--losses") + 1] == ",".join(spec["losses"])


def test_each_dataset_is_graded_by_its_communitys_convention():
    default = cv.load_config()
    assert {plan.dataset_convention(default, ds) for ds in default["datasets"]} == {"default"}  # synthetic
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    got = {ds: plan.dataset_convention(paper, ds) for ds in ("mq2007", "mq2008", "ohsumed", "td2003", "np2004",
                                                             "mslr-web30k", "yahoo-set1", "istella")}
    assert got == {"mq2007": "letor4", "mq2008": "letor4", "ohsumed": "letor3", "td2003": "letor3",
                   "np2004": "letor3", "mslr-web30k": "default", "yahoo-set1": "default", "istella": "default"}
    spec = plan.table_spec(paper, "sinkprop_letor")
    assert spec["conventions"]["mq2008"] == "letor4" and spec["conventions"]["ohsumed"] == "letor3"
    args = plan.evaluate_args(paper, "sinkprop_letor", "mq2008")
    assert args[args.index("--convention") + 1] == "letor4"
    run = plan.run_config(paper, "letor", "ohsumed", "listnet")
    assert run["metrics"]["convention"] == "letor3"
    # default-convention datasets keep their run configs and frozen-protocol hashes unchanged
    assert "convention" not in plan.run_config(paper, "unified", "mslr-web30k", "listnet")["metrics"]
    assert "convention" not in plan.study_protocol(default, "unified", "syn-web")["evaluation"]


def test_letor_frames_carry_p_at_k_and_ndcg_1_to_10_beside_the_tables_metrics():
    """Paper profile: the LETOR table shows MAP and NDCG@1, 3, 5, 10; every run's and every
    evaluated per-query frame also holds P@k and NDCG@1..10 (the letor protocol's metrics)."""
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    args = plan.evaluate_args(paper, "sinkprop_letor", "mq2008")
    graded = args[args.index("--metrics") + 1:args.index("--empty-query")]
    assert graded[:5] == ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"]  # the table's, first
    assert {"precision@1", "precision@3", "precision@5", "precision@10", "ndcg@2", "ndcg@9"} <= set(graded)
    assert len(graded) == len(set(graded))
    assert "precision@10" in plan.run_config(paper, "letor", "ohsumed", "listnet")["metrics"]["names"]
    default = cv.load_config()  # no protocol of the default profile lists metrics: frames as they were
    args = plan.evaluate_args(default, "sinkprop_letor", "syn-letor")
    assert args[args.index("--metrics") + 1:args.index("--empty-query")] == default["tables"]["sinkprop_letor"]["metrics"]


def test_convention_config_global_and_per_dataset():
    paper = ROOT / "config" / "paper.yaml"
    forced = cv.load_config(paper, overrides={"evaluation": {"convention": "default"}})
    assert plan.dataset_convention(forced, "mq2008") == "default"
    one = cv.load_config(paper, overrides={"datasets": {"mslr-web30k": {"convention": "letor4"}}})
    assert plan.dataset_convention(one, "mslr-web30k") == "letor4"
    syn = cv.load_config(overrides={"evaluation": {"convention": "letor3"}})
    assert plan.dataset_convention(syn, "syn-web") == "letor3"
    with pytest.raises(ConfigError, match="evaluation.convention"):
        cv.load_config(overrides={"evaluation": {"convention": "letor5"}})
    with pytest.raises(ConfigError, match=r"evaluation.ties.*mq2007.*letor4"):
        cv.load_config(paper, overrides={"evaluation": {"ties": "expected"}})


# the paper's evaluation tool of each table (issue 32): the papers' own code graded with these
PAPER_TOOLS = {"pirank_table1": "tfranking", "listsize_table3": "tfranking", "arf_table2": "tfranking",
               "arf_table6": "tfranking", "arf_table7": "tfranking", "arf_table8": "tfranking",
               "neuralndcg_table3": "allrank"}


@pytest.mark.parametrize("profile", ["default.yaml", "paper.yaml"])
def test_each_papers_table_is_graded_by_its_papers_tool(profile):
    """PiRank's and ARF's tables under TF-Ranking's metrics, NeuralNDCG's under allRank's, in the
    evaluate arguments, the table spec and the caption; SinkProp's LETOR table keeps the LETOR
    scripts and the unified table the suite's default; runs (early stopping) keep the dataset's."""
    from bench.report.tables import caption

    cfg = cv.load_config(ROOT / "config" / profile)
    tool_names = {"tfranking": "Graded as TF-Ranking grades", "allrank": "Graded as allRank grades"}
    for table, tool in PAPER_TOOLS.items():
        spec = plan.table_spec(cfg, table)
        assert set(spec["conventions"].values()) == {tool}, table
        for ds in plan.table_datasets(cfg, table):
            args = plan.evaluate_args(cfg, table, ds)
            assert args[args.index("--convention") + 1] == tool, (table, ds)
        text = caption(spec, has_paper=False)
        assert tool_names[tool] in text and f"convention {tool}" in text, table
    unified = plan.table_spec(cfg, "unified_table")["conventions"]
    assert unified == {ds: plan.dataset_convention(cfg, ds) for ds in plan.table_datasets(cfg, "unified_table")}
    letor = set(plan.table_spec(cfg, "sinkprop_letor")["conventions"].values())
    assert letor == ({"default"} if profile == "default.yaml" else {"letor3", "letor4"})
    heatmap_ds = plan.table_datasets(cfg, "arf_table2")[0]
    assert plan.evaluation_convention(cfg, "recall_heatmap", heatmap_ds) == "tfranking"
    assert plan.evaluation_convention(cfg, "freeze", heatmap_ds) == "default"
    mslr = plan.table_datasets(cfg, "pirank_table1")[0]  # runs validate as their tables grade (issue 41)
    assert plan.run_config(cfg, "pirank", mslr, "ranknet")["metrics"]["convention"] == "tfranking"
    assert "convention" not in plan.run_config(cfg, "unified", plan.table_datasets(cfg, "unified_table")[0],
                                               "ranknet")["metrics"]


def test_a_tables_convention_is_validated_and_yields_to_a_forced_one():
    with pytest.raises(ConfigError, match=r"tables.pirank_table1.convention.*tfranking.*got 'tf-ranking'"):
        cv.load_config(overrides={"tables": {"pirank_table1": {"convention": "tf-ranking"}}})
    with pytest.raises(ConfigError, match=r"figures.recall_heatmap.convention"):
        cv.load_config(overrides={"figures": {"recall_heatmap": {"convention": "trec"}}})
    with pytest.raises(ConfigError, match=r"evaluation.ties.*tables.unified_table.*letor3"):
        cv.load_config(overrides={"tables": {"unified_table": {"convention": "letor3"}},
                                  "evaluation": {"ties": "expected"}})
    # a tool's convention fixes its own tie rule: any evaluation.ties goes
    expected = cv.load_config(overrides={"evaluation": {"ties": "expected"}})
    assert plan.evaluation_convention(expected, "pirank_table1", "syn-web") == "tfranking"
    forced = cv.load_config(overrides={"evaluation": {"convention": "default"}})
    assert {plan.evaluation_convention(forced, t, "syn-web") for t in PAPER_TOOLS} == {"default"}


def test_neuralndcg_batch_is_64_on_web30k_and_110_on_istella_in_the_resolved_job_config():
    """NeuralNDCG Sec. 5.3: "The batch size was set to 64 (Web30K) or 110 (Istella)"; the job's
    JSON (what ``ltr-bench train --config`` reads) and the settings the trainer resolves from it."""
    from bench.config.settings import resolve_neural

    cfg = cv.load_config(ROOT / "config" / "paper.yaml")
    want = {"mslr-web30k": (64, 96), "istella": (110, 128)}
    assert set(plan.table_datasets(cfg, "neuralndcg_table3")) == set(want)
    for dataset, (batch, width) in want.items():
        for method in plan.table_methods(cfg, "neuralndcg_table3"):
            if plan.method_kind(cfg["methods"][method]) != "neural":
                continue
            job = plan.run_config(cfg, "neuralndcg", dataset, method)
            assert job["train"]["batch_size"] == batch, (dataset, method)
            settings = resolve_neural(job, method)
            assert (settings["train"]["batch_size"], settings["model"]["input_proj"]) == (batch, width)
            assert settings["train"]["list_size"] == 240


def test_computed_tables_read_every_prepared_fold_the_runs_records_or_the_toy_table(cfg):
    assert plan.computed_table_inputs(cfg, "neuralndcg_table1") == [plan.TOY_SORT]
    assert plan.computed_table_inputs(cfg, "neuralndcg_table2") == [
        "results/prepared/syn-web/Fold1", "results/prepared/syn-letor/Fold1", "results/prepared/syn-letor/Fold2"]
    files = plan.computed_table_inputs(cfg, "arf_table9")
    # ARF's row is selected on a 2x2 grid: the runs of its four points (each run's tracked run.json),
    # and the selection record
    n_runs = (len(plan.table_methods(cfg, "arf_table2")) - 1 + 4) * len(plan.table_seeds(cfg, "arf_table2"))
    assert len(files) == n_runs + 1 and files[0] == "results/runs/arf/syn-web/Fold1/softmax_pointwise/seed0/run.json"
    assert files[-1] == "results/selection/arf_table2/syn-web/Fold1.json"
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    spec = plan.computed_table_spec(paper, "arf_table9")
    # ARF: 33 points (tau x lr), L_Relax and NeuralSort 11 each (tau), the chosen one's runs timed;
    # the rows at the paper's tau are grid points already (not timed twice)
    assert (spec["dataset"], spec["role"], len(spec["runs"])) == ("istella-arf", "istella", (7 + 33 + 11 + 11) * 3)
    assert spec["selection"] == ["results/paper/selection/arf_table2/istella-arf/Fold1.json"]
    stats = plan.computed_table_spec(paper, "neuralndcg_table2")["datasets"]
    # the paper's statistics go beside NeuralNDCG's own datasets only (not the ARF-filtered copies)
    assert {d["name"]: d["role"] for d in stats if d["role"]} == {"mslr-web30k": "mslr-web30k", "istella": "istella"}
    assert {"mslr-web30k-arf", "istella-arf"} <= {d["name"] for d in stats}
    off = cv.load_config(ROOT / "config" / "paper.yaml",
                         overrides={"computed_tables": {"arf_table9": {"table": "pirank_table1"}}})  # no Istella
    with pytest.raises(ConfigError, match="computed_tables.arf_table9.dataset"):
        plan.computed_table_inputs(off, "arf_table9")
    off = cv.load_config(overrides={"tables": {"arf_table2": {"enabled": False}}})
    with pytest.raises(ConfigError, match="computed_tables.arf_table9.table': 'arf_table2' is not an enabled"):
        plan.computed_table_spec(off, "arf_table9")


def test_annealing_figure_names_its_annealed_and_high_tau_runs(cfg):
    spec = plan.figure_spec(cfg, "annealing_figure")
    assert [label for label, _ in spec["runs"]][-2:] == [spec["annealed"], spec["high_tau"]]
    assert spec["taus"]["tau=1e12"] == 1e12 and spec["taus"][spec["annealed"]] is None
    anneal = cfg["methods"]["pirank_ndcg_anneal"]["train"]["tau_schedule"]
    assert anneal == {"kind": "exponential", "start": 10.0, "end": 0.1}
    off = cv.load_config(overrides={"figures": {"annealing_figure": {"high_tau": "ranknet"}}})
    with pytest.raises(ConfigError, match="figures.annealing_figure.high_tau"):
        plan.figure_spec(off, "annealing_figure")


def test_the_caption_says_how_sinkprops_protocol_ranks_the_test_queries():
    """A SinkProp row of the LETOR table is the short-cut Hungarian ranking, not the order of its
    scores: the caption says so, with the run's K, and follows the config when it changes."""
    from bench.report.tables import caption

    default = plan.table_spec(cv.load_config(), "sinkprop_letor")
    assert "SinkProp: SinkProp's own protocol; test queries ranked by the short-cut Hungarian method" in \
        caption(default, has_paper=False)
    assert "the top 10 documents by expected rank assigned exactly" in default["note"]
    overrides = {"protocols": {"letor": {"sinkprop_protocol": {"test_ranking": "scores"}}}}
    scores = plan.table_spec(cv.load_config(overrides=overrides), "sinkprop_letor")
    assert scores["note"] == "SinkProp: SinkProp's own protocol; test queries ranked by the order of its linear scores."
    whole = plan.table_spec(cv.load_config(overrides={"protocols": {"letor": {"sinkprop_protocol": {
        "ranking_top": None}}}}), "sinkprop_letor")
    assert "an exact assignment over the whole list" in whole["note"]
    assert plan.table_spec(cv.load_config(), "unified_table")["note"] == ""  # SinkProp trained by the unified protocol


def test_only_the_temperature_figures_runs_record_the_validation_curve_on_cut_lists(cfg):
    """PiRank Fig. 5 needs the relaxed loss on validation lists of L = 100: the plan sets
    train.vali_curve_list_size for the figure's runs (its protocol, dataset and methods) and for no
    other run, so no other run config changes (default profile: L = 40; paper profile: 100)."""
    spec = cfg["figures"]["temperature_figure"]
    dataset = plan.resolve_role(cfg, spec["dataset"])
    for method in spec["methods"]:
        assert plan.run_config(cfg, spec["protocol"], dataset, method)["train"]["vali_curve_list_size"] == 40
    others = [("pirank_ablation", "pirank_ndcg_L10"), ("pirank_ablation", "pirank_ndcg_anneal"), ("pirank", "ranknet"),
              ("unified", "pirank_ndcg")]
    for protocol, method in others:
        assert "vali_curve_list_size" not in plan.run_config(cfg, protocol, dataset, method)["train"], method
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    assert plan.run_config(paper, "pirank_ablation", "mslr-web30k", "pirank_ndcg_tau5")["train"][
        "vali_curve_list_size"] == 100
    assert plan.figure_spec(paper, "temperature_figure")["smoothing"] == 0.9


def test_quality_cost_figure_reads_the_unified_tables_statistics_and_its_runs_records(cfg):
    assert plan.figure_inputs(cfg, "quality_cost_figure") == [plan.QUALITY_COST]
    files = plan.quality_cost_inputs(cfg)
    methods, seeds = plan.table_methods(cfg, "unified_table"), plan.table_seeds(cfg, "unified_table")
    # each tuned method's configurations (3, seed 0) and its chosen one's seed 1 on syn-web's one
    # fold: the records of the two jobs that train them (the tuning's says which of them count)
    assert len(seeds) == 2 and files[0] == "results/stats/unified_table.parquet"
    assert len(files) == 1 + 2 * len(methods)
    assert "results/tuning/unified/syn-web/plrank_ndcg+tuned.json" in files
    assert "results/tuning/unified/syn-web/plrank_ndcg.json" in files
    spec = plan.quality_cost_spec(cfg)
    assert (spec["dataset"], spec["metric"]) == ("syn-web", "ndcg@10")
    kinds = {m["name"]: m["kind"] for m in spec["methods"]}
    assert kinds["lightgbm_lambdarank"] == "gbdt" and kinds["plrank_ndcg"] == "neural"
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    spec = plan.quality_cost_spec(paper)
    # 20 configurations (seed 0) and the chosen one's seeds 1-2 on Fold1, 3 seeds on the 4 other folds
    assert spec["dataset"] == "mslr-web30k" and len(spec["runs"]) == len(methods) * (20 + 2 + 4 * 3)
    figure = plan.figure_spec(paper, "quality_cost_figure")
    assert (figure["dataset_label"], figure["folds"][-1], figure["list_size"]) == ("MSLR-WEB30K", "Fold5", 200)
    assert len(spec["selection"]) == len(methods)  # the unified table selects no grid: its tuning records
    arf = cv.load_config(overrides={"figures": {"quality_cost_figure": {"table": "arf_table2", "metric": "ndcg@15"}}})
    files = plan.quality_cost_inputs(arf)  # ARF Table 2 selects ARF's tau x lr: its records say which runs count
    assert files[-1] == "results/selection/arf_table2/syn-web/Fold1.json" == plan.quality_cost_spec(arf)["selection"][0]
    off = cv.load_config(overrides={"figures": {"quality_cost_figure": {"metric": "ndcg@3"}}})
    with pytest.raises(ConfigError, match="figures.quality_cost_figure.metric': 'ndcg@3' is not a metric of"):
        plan.quality_cost_spec(off)
    off = cv.load_config(overrides={"figures": {"quality_cost_figure": {"table": "pirank_table1", "dataset": "ohsumed"}}})
    with pytest.raises(ConfigError, match="figures.quality_cost_figure.dataset': 'ohsumed' is not a dataset"):
        plan.quality_cost_inputs(off)


# ----------------------------------------------------------------------------- ranking across datasets (issue 40)

THREE_BLOCKS = {"datasets": {"syn-letor": {"enabled": True}}, "computed_tables": {"ranking_table": {"enabled": True}},
                "figures": {"cd_diagram": {"enabled": True}}}


def test_the_ranking_reads_every_evaluated_frame_of_its_table_and_is_a_target_of_all():
    cfg = cv.load_config(overrides=THREE_BLOCKS)
    assert plan.ranking_blocks(cfg, "unified_table") == ["syn-web/Fold1", "syn-letor/Fold1", "syn-letor/Fold2"]
    assert plan.ranking_inputs(cfg) == plan.evaluated_files(cfg, "unified_table", ["syn-web", "syn-letor"]) == [
        "results/evaluated/unified_table/syn-web/Fold1.parquet", "results/evaluated/unified_table/syn-letor/Fold1.parquet",
        "results/evaluated/unified_table/syn-letor/Fold2.parquet"]
    spec = plan.ranking_spec(cfg)
    assert spec == {"table": "unified_table", "methods": plan.table_methods(cfg, "unified_table"),
                    "metrics": ["ndcg@1", "ndcg@5", "ndcg@10", "mrr", "opa", "arp", "recall@30@15"], "alpha": 0.05,
                    "key": "computed_tables.ranking_table.table"}
    assert plan.computed_table_inputs(cfg, "ranking_table") == [plan.RANKING] == plan.figure_inputs(cfg, "cd_diagram")
    table = plan.computed_table_spec(cfg, "ranking_table")
    assert (table["kind"], table["source"], len(table["methods"]), table["seeds"]) == ("ranking", None, 28, [0, 1])
    assert table["blocks"] == plan.ranking_blocks(cfg, "unified_table") and table["metrics"] == spec["metrics"]
    figure = plan.figure_spec(cfg, "cd_diagram")
    assert figure["metrics"] == ["ndcg@10"] and figure["blocks"] == table["blocks"]
    outputs = plan.report_inputs(cfg)
    assert "reports/tables/ranking_table.md" in outputs and "reports/figures/cd_diagram.png" in outputs
    assert {"ranking_table", "cd_diagram"} <= set(plan.coverage_args(cfg))
    # the metrics default to the table's; alpha is passed on
    mine = cv.load_config(overrides={**THREE_BLOCKS, "computed_tables": {"ranking_table": {
        "enabled": True, "metrics": None, "alpha": 0.1}}})
    assert plan.ranking_spec(mine)["metrics"] == mine["tables"]["unified_table"]["metrics"]
    assert plan.ranking_spec(mine)["alpha"] == 0.1


def test_the_ranking_runs_on_three_blocks_in_the_default_profile_and_52_in_the_paper_profile():
    default = cv.load_config()  # the unified table on syn-web Fold1 and syn-letor Fold1, Fold2
    assert "ranking_table" in plan.enabled_computed_tables(default) and "cd_diagram" in plan.enabled_figures(default)
    assert plan.ranking_blocks(default, "unified_table") == ["syn-web/Fold1", "syn-letor/Fold1", "syn-letor/Fold2"]
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    assert len(plan.ranking_blocks(paper, "unified_table")) == 52 and len(plan.ranking_inputs(paper)) == 52
    assert "cd_diagram" in plan.enabled_figures(paper) and (
        plan.profiled(paper, plan.RANKING) in plan.figure_inputs(paper, "cd_diagram"))


def test_a_ranking_needs_two_blocks_three_methods_an_enabled_table_and_ranked_metrics():
    one_block = cv.load_config(overrides={"tables": {"unified_table": {"datasets": ["syn-web"]}}})
    with pytest.raises(ConfigError, match=r"'computed_tables.ranking_table.table': ranking across datasets and folds "
                                          r"needs at least 2 dataset-fold blocks, table unified_table is evaluated on 1 "
                                          r"\(syn-web/Fold1\)"):
        plan.computed_table_inputs(one_block, "ranking_table")
    few = cv.load_config(overrides={**THREE_BLOCKS, "tables": {"unified_table": {"methods": ["ranknet", "listnet"]}}})
    with pytest.raises(ConfigError, match=r"'computed_tables.ranking_table.table': the Friedman test needs at least 3"):
        plan.ranking_spec(few)
    other = cv.load_config(overrides={**THREE_BLOCKS, "computed_tables": {"ranking_table": {
        "enabled": True, "table": "arf_table6"}}, "tables": {"arf_table6": {"enabled": False}}})
    with pytest.raises(ConfigError, match=r"'computed_tables.ranking_table.table': 'arf_table6' is not an enabled"):
        plan.ranking_inputs(other)
    metric = cv.load_config(overrides={**THREE_BLOCKS, "computed_tables": {"ranking_table": {
        "enabled": True, "metrics": ["ndcg@3"]}}})
    with pytest.raises(ConfigError, match=r"'computed_tables.ranking_table.metrics': \['ndcg@3'\] are not graded"):
        plan.ranking_spec(metric)
    panel = cv.load_config(overrides={**THREE_BLOCKS, "figures": {"cd_diagram": {"enabled": True, "metrics": ["mrr@10"]}}})
    with pytest.raises(ConfigError, match=r"'figures.cd_diagram.metrics': \['mrr@10'\] are not ranked"):
        plan.figure_inputs(panel, "cd_diagram")
    alone = cv.load_config(overrides={**THREE_BLOCKS, "computed_tables": {"ranking_table": {"enabled": False}}})
    with pytest.raises(ConfigError, match=r"'figures.cd_diagram': it draws computed_tables.ranking_table, which is not"):
        plan.figure_spec(alone, "cd_diagram")

"""Equal-budget tuning (bench.search_space, bench.config.tuning, bench.selection.tuning, the plan's tuning):
the spaces and the sampler, the configurations every method gets, the runs each evaluation
reads, the choice -- and the proofs: permuting the tuning fold's test labels and retraining every
configuration leaves every record unchanged (while a choice by the test means changes), two
tuning runs choose the same configurations, and the study's configurations are a pure function
of its config."""

from __future__ import annotations

import inspect
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from bench import search_space as ss
from bench.config import plan, tuning
from bench.config import validate as cv
from bench.config.selection import best_point
from bench.errors import ConfigError, UsageError
from bench.losses import registry
from bench.results import RUN_JSON_KEYS, read_record, read_run_info, write_frame, write_record, write_run
from bench.selection.tuning import tune, tuned_config
from bench.stats import summarize
from helpers import make_prepared

# ----------------------------------------------------------------------------- spaces and the sampler


def test_a_dimension_maps_the_unit_interval_onto_its_range_at_both_ends_and_inside():
    lr = ss.log_uniform(1e-4, 1e-2)
    assert (lr.value(0.0), lr.value(0.5), lr.value(1 - 1e-12)) == (1e-4, 1e-3, 1e-2)  # geometric midpoint
    assert ss.uniform(0.0, 0.5).value(0.5) == 0.25
    leaves = ss.integers(4, 256, log=True)
    values = [leaves.value(u) for u in np.linspace(0, 1 - 1e-12, 1001)]
    assert min(values) == 4 and max(values) == 256 and all(isinstance(v, int) for v in values)
    # an integer range gives every integer the same share on a linear scale
    depth = ss.integers(2, 10)
    counts = np.bincount([depth.value(u) for u in (np.arange(9000) + 0.5) / 9000])[2:]
    assert counts.tolist() == [1000] * 9
    assert [ss.choice("a", "b", "c").value(u) for u in (0.0, 0.34, 0.99)] == ["a", "b", "c"]


def test_drawn_reals_keep_three_significant_digits_inside_their_range():
    dim = ss.log_uniform(0.1, 10.0)
    for u in np.linspace(0, 1 - 1e-9, 97):
        x = dim.value(float(u))
        assert 0.1 <= x <= 10.0 and float(f"{x:.3g}") == x


def test_the_sampler_is_seeded_nested_and_covers_each_range_evenly():
    space = {"train.lr": ss.log_uniform(1e-4, 1e-2), "model.dropout": ss.uniform(0.0, 0.5)}
    a, b = ss.draw(space, 16, seed=3), ss.draw(space, 16, seed=3)
    assert a == b and ss.draw(space, 5, seed=3) == a[:5]  # a longer budget extends a shorter one
    assert ss.draw(space, 16, seed=4) != a
    # low discrepancy: 16 Halton points put one point in each sixteenth of the (log) lr range
    u = sorted(math.log(p["train.lr"] / 1e-4) / math.log(100) for p in ss.draw(space, 16, seed=3))
    assert [int(x * 16) for x in u] == list(range(16))
    assert ss.draw({}, 4, seed=0) == [] and ss.draw(space, 0, seed=0) == []


@pytest.mark.parametrize("spec, message", [
    ({"low": 1, "high": 1}, "must be below high"),
    ({"low": 0, "high": 1, "scale": "log"}, "log scale needs low > 0"),
    ({"low": 0.5, "high": 3, "type": "int"}, "integer low and high"),
    ({"choices": []}, "non-empty list"),
    ({"low": 1, "high": 2, "step": 1}, "unknown key"),
    ({"low": "a", "high": 2}, "a number is required"),
])
def test_a_bad_dimension_names_its_config_key(spec, message):
    with pytest.raises(ConfigError, match=rf"config key 'tuning.space.neural.train.lr.*{message}"):
        ss.parse(spec, "tuning.space.neural.train.lr")


def _signature_default(name: str, hyper: str):
    obj = registry._resolve(registry.info(name).target)
    target = obj.__init__ if inspect.isclass(obj) else obj
    return inspect.signature(target).parameters[hyper].default


@pytest.mark.parametrize("name", [n for n in registry.BUILTIN if registry.BUILTIN[n].search])
def test_every_declared_loss_dimension_is_a_hyperparameter_of_the_loss_and_holds_its_default(name):
    """A registry space names what the loss accepts, and the loss's default (configuration 1)
    lies inside it: tuning widens around the default, never away from it."""
    accepted = registry.signature(name).accepted()
    for hyper, dim in registry.info(name).search.items():
        assert hyper in accepted, f"{name}: {hyper} is not one of its hyperparameters {accepted}"
        assert dim.contains(_signature_default(name, hyper)), f"{name}: default {hyper} outside {dim.describe()}"


# ----------------------------------------------------------------------------- the configurations


def test_a_methods_space_is_the_shared_dimensions_the_losss_own_then_its_search():
    config = cv.load_config()
    space = tuning.method_space(config, config["methods"]["arf"])
    assert list(space) == ["train.lr", "model.dropout", "params.tau", "params.alpha"]
    entry = {**config["methods"]["arf"], "search": {"params.alpha": None, "params.tau": {"low": 0.5, "high": 2.0}}}
    space = tuning.method_space(config, entry)
    assert list(space) == ["train.lr", "model.dropout", "params.tau"] and space["params.tau"] == ss.uniform(0.5, 2.0)
    assert list(tuning.method_space(config, config["methods"]["lightgbm_lambdarank"])) == [
        "params.learning_rate", "params.num_leaves", "params.min_data_in_leaf", "params.feature_fraction"]
    assert tuning.method_space(config, config["methods"]["linear_regression"]) == {}  # nothing to tune


def test_every_method_of_the_unified_table_gets_the_same_number_of_configurations_default_first():
    config = cv.load_config()
    budget = config["tuning"]["budget"]
    entries = plan.tuned_entries(config, "unified")
    assert set(plan.table_methods(config, "unified_table")) <= set(entries)
    for method, (entry, where) in entries.items():
        configs = plan.tuning_configurations(config, method, entry, where)
        assert len(configs) == budget
        assert configs[0].name == method and configs[0].label == "default" and configs[0].settings == ()
        assert [c.name for c in configs[1:]] == [f"{method}+cfg{i}" for i in range(2, budget + 1)]
        spec = plan.method_spec(config, "unified", configs[1].name)  # a valid entry with the drawn values
        for path, value in configs[1].settings:
            head, _, key = path.partition(".")
            assert spec[head][key] == value


def test_the_study_draws_the_same_configurations_every_time_and_others_with_another_seed():
    first, again = cv.load_config(), cv.load_config()
    other = cv.load_config(overrides={"tuning": {"seed": 1}})
    spec = plan.tune_spec(first, "unified", "syn-web", "neuralndcg")
    assert spec == plan.tune_spec(again, "unified", "syn-web", "neuralndcg")
    assert spec["methods"] != plan.tune_spec(other, "unified", "syn-web", "neuralndcg")["methods"]
    bigger = cv.load_config(overrides={"tuning": {"budget": 5}})
    points = spec["methods"]["neuralndcg"]["points"]
    assert plan.tune_spec(bigger, "unified", "syn-web", "neuralndcg")["methods"]["neuralndcg"]["points"][:3] == points


def test_an_evaluation_reads_every_configuration_on_the_tuning_fold_and_the_chosen_one_elsewhere():
    config = cv.load_config()
    ev = plan.evaluation(config, "unified_table", "syn-letor")
    assert (ev.tuning_fold, ev.tuning_seeds, ev.seeds) == ("Fold1", [0], [0, 1])
    on_tuning = [r for r in plan.evaluated_runs(config, "unified_table", "syn-letor", "Fold1") if r["method"] == "arf"]
    assert [(r["point"], r["seed"]) for r in on_tuning if "point" in r] == [("arf", 0), ("arf+cfg2", 0), ("arf+cfg3", 0)]
    assert [r["dir"] for r in on_tuning if "point" not in r] == ["results/runs/unified/syn-letor/Fold1/arf+tuned/seed1"]
    elsewhere = [r for r in plan.evaluated_runs(config, "unified_table", "syn-letor", "Fold2") if r["method"] == "arf"]
    assert [r["dir"] for r in elsewhere] == [f"results/runs/unified/syn-letor/Fold2/arf+tuned/seed{s}" for s in (0, 1)]
    assert "results/tuning/unified/syn-letor/arf.json" in plan.evaluation_records(config, "unified_table", "syn-letor",
                                                                                   "Fold1")
    assert plan.evaluation_records(config, "unified_table", "syn-letor", "Fold2") == []
    # the frozen baselines read the same tuned runs; a paper table's protocol is not tuned
    assert plan.evaluation(config, "freeze", "syn-web").tuned["ranknet"] == ["ranknet", "ranknet+cfg2", "ranknet+cfg3"]
    assert plan.evaluation(config, "pirank_table1", "syn-web").tuned == {}


def test_the_tuned_runs_spec_offers_every_configurations_run_config_under_the_tuned_name():
    config = cv.load_config()
    spec = plan.tuned_runs_spec(config, "unified", "syn-letor", "neuralsort_ce+tuned")
    assert list(spec["configs"]) == ["neuralsort_ce", "neuralsort_ce+cfg2", "neuralsort_ce+cfg3"]
    for name, run in spec["configs"].items():
        assert list(run["methods"]) == ["neuralsort_ce+tuned"]
        assert run["methods"]["neuralsort_ce+tuned"] == plan.run_config(config, "unified", "syn-letor", name)["methods"][name]
    # the chosen configuration's runs: every fold and seed the evaluations read but the tuning's own
    assert [(r["fold"], r["seed"]) for r in spec["runs"]] == [("Fold1", 1), ("Fold2", 0), ("Fold2", 1)]
    assert spec["runs"][0]["dir"] == "results/runs/unified/syn-letor/Fold1/neuralsort_ce+tuned/seed1"
    assert spec["config_out"] == "results/configs/unified/syn-letor/neuralsort_ce+tuned.json"


def test_a_tuned_methods_runs_are_its_tuning_jobs_and_nothing_else_trains_them():
    """Every run of a tuned method is named by the record of the job that trains it (the tuning on
    the tuning fold with the tuning seeds, the chosen configuration's job elsewhere); no run job
    may train a configuration or the chosen configuration (it would not know the choice)."""
    config = cv.load_config()
    record, chosen = "results/tuning/unified/syn-letor/arf.json", "results/tuning/unified/syn-letor/arf+tuned.json"
    assert plan.run_input(config, "results/runs/unified/syn-letor/Fold1/arf/seed0") == record
    assert plan.run_input(config, "results/runs/unified/syn-letor/Fold1/arf+cfg3/seed0") == record
    assert plan.run_input(config, "results/runs/unified/syn-letor/Fold1/arf+tuned/seed1") == chosen
    assert plan.run_input(config, "results/runs/unified/syn-letor/Fold2/arf+tuned/seed0") == chosen
    # configuration 1's name on another fold or seed, or under an untuned protocol, is a run job's
    assert plan.run_input(config, "results/runs/pirank/syn-web/Fold1/arf/seed0") == \
        "results/runs/pirank/syn-web/Fold1/arf/seed0/run.json"
    with pytest.raises(ConfigError, match="not among the chosen configuration's runs"):
        plan.run_input(config, "results/runs/unified/syn-letor/Fold1/arf+tuned/seed0")  # the tuning's own run
    for rule in ("train", "gbdt", "linear"):
        names = plan.run_job_methods(config, rule)
        assert not [m for m in names if "+cfg" in m or m.endswith("+tuned")]
    evaluated = plan.evaluated_inputs(config, "unified_table", "syn-letor", "Fold1")
    assert record in evaluated and chosen in evaluated and not [f for f in evaluated if "/arf" in f and f.endswith("run.json")]


@pytest.mark.parametrize("overrides, key", [
    ({"tuning": {"protocols": ["nope"]}}, "tuning.protocols.0"),
    ({"tuning": {"space": {"neural": {"optimizer.lr": {"low": 0.1, "high": 1.0}}}}}, "tuning.space.neural.optimizer.lr"),
    ({"tuning": {"space": {"neural": {"train.early_stopping_metric": {"choices": ["mrr"]}}}}},
     "tuning.space.neural.train.early_stopping_metric"),
    ({"tuning": {"space": {"neural": {"train.lr": {"low": -1.0, "high": 1.0}}}}}, "tuning.space.neural.train.lr"),
    ({"tuning": {"space": {"neural": {"model.dropout": {"low": 0.5, "high": 3.0}}}}}, "methods.pirank_ndcg"),
    ({"methods": {"ranknet": {"search": {"params.sigam": {"low": 0.1, "high": 1.0}}}}}, "methods.ranknet.search.params.sigam"),
    ({"methods": {"linear_regression": {"search": {"params.x": {"low": 0.1, "high": 1.0}}}}},
     "methods.linear_regression.search"),
    ({"tables": {"unified_table": {"select": {"arf": {"grid": {"params.tau": [0.5, 1.0]}}}}}},
     "tables.unified_table.select"),
    ({"tuning": {"fold": "Fold9"}}, "tuning.fold"),
])
def test_a_bad_tuning_config_is_refused_naming_its_key(overrides, key):
    with pytest.raises(ConfigError, match=re.escape(f"config key '{key}")):
        cv.load_config(overrides=overrides)


# ----------------------------------------------------------------------------- the stage


def fake_run(out, *, best, metric="ndcg@10", test=0.9, device="cpu", seconds=2.0):
    info = dict.fromkeys(RUN_JSON_KEYS)
    info.update(device=device, wall_time_s=seconds)
    info["result"] = {"early_stopping_metric": metric, "best_vali": best, "checkpoint": "best",
                      "test_means": {metric: test}}
    write_run(out, scores=np.zeros(3, dtype=np.float32), metrics=pd.DataFrame({"query": [0], metric: [test]}),
              run_info=info, curve=pd.DataFrame({"epoch": [1], f"vali_{metric}": [best]}))
    return str(out)


def _spec(tmp_path, values, devices=None):
    points = []
    for i, seeds in enumerate(values, start=1):
        name = "m" if i == 1 else f"m+cfg{i}"
        dirs = [fake_run(tmp_path / name / f"seed{s}", best=v, device=(devices or {}).get(name, "cpu"))
                for s, v in enumerate(seeds)]
        points.append({"name": name, "label": "default" if i == 1 else f"x = {i}", "settings": {"params.x": i},
                       "run": name, "dirs": dirs})
    return {"experiment": "e", "dataset": "d", "fold": "Fold1", "seeds": [0, 1],
            "tuning": {"space_text": "params.x uniform 1-3"}, "methods": {"m": {"metric": "ndcg@10", "points": points}}}


def test_the_record_keeps_the_best_mean_over_seeds_the_default_on_a_tie_and_the_compute_spent(tmp_path):
    record = tune(_spec(tmp_path, [[0.5, 0.7], [0.8, 0.6], [0.2, 0.3]], devices={"m+cfg3": "cuda:0"}))
    entry = record["methods"]["m"]
    assert [p["mean"] for p in entry["points"]] == pytest.approx([0.6, 0.7, 0.25])
    assert entry["chosen"] == "m+cfg2"  # 0.7 > 0.6
    assert record["budget"] == 3 and record["seconds"] == {"cpu": 8.0, "cuda": 4.0}
    tie = tune(_spec(tmp_path / "tie", [[0.6, 0.6], [0.7, 0.5]]))
    assert tie["methods"]["m"]["chosen"] == "m"  # equal means: the lower configuration number, the default


def test_the_tuned_config_is_the_chosen_configurations_and_a_stale_record_is_refused(tmp_path):
    record_path = tmp_path / "rec.json"
    write_record(tune(_spec(tmp_path, [[0.5, 0.5], [0.9, 0.9]])), record_path)
    configs = {"m": {"methods": {"m+tuned": {"params": {}}}}, "m+cfg2": {"methods": {"m+tuned": {"params": {"x": 2}}}}}
    out = tmp_path / "m+tuned.json"
    assert tuned_config({"record": str(record_path), "method": "m", "configs": configs}, out) == "m+cfg2"
    assert json.loads(out.read_text()) == configs["m+cfg2"]
    with pytest.raises(UsageError, match="stale"):
        tuned_config({"record": str(record_path), "method": "m", "configs": {"m": configs["m"]}}, tmp_path / "x.json")


def _frame(method, seeds, values):
    rows = [{"dataset": "d", "fold": "Fold1", "seed": s, "method": method, "query": q, "ndcg@10": v,
             "ndcg@10:dropped": False} for s in seeds for q, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_the_summary_states_what_tuning_bought_on_test_paired_per_query(tmp_path):
    rec_path = tmp_path / "rec.json"
    write_record(tune(_spec(tmp_path, [[0.5, 0.5], [0.9, 0.9]])), rec_path)
    chosen, defaults = tmp_path / "chosen.parquet", tmp_path / "defaults.parquet"
    write_frame(_frame("m", [0, 1], [0.8, 0.6, 1.0]), chosen)
    write_frame(_frame("m", [0, 1], [0.5, 0.6, 0.7]), defaults)
    spec = {"table": "t", "metrics": ["ndcg@10"], "datasets": [{"dataset": "d", "fold": "Fold1", "records": [str(rec_path)],
            "chosen": str(chosen), "defaults": str(defaults), "seeds": [0, 1]}]}
    row = summarize(spec, n_boot=200).iloc[0]
    assert row["chosen"] == "m+cfg2" and row["chosen_index"] == 2 and row["budget"] == 2
    assert row["delta:ndcg@10"] == pytest.approx(0.2) and row["ci_low:ndcg@10"] <= 0.2 <= row["ci_high:ndcg@10"]
    assert (row["vali_chosen"], row["vali_default"], row["cpu_seconds"]) == (0.9, 0.5, 8.0)


# ----------------------------------------------------------------------------- the proofs


def _config(budget=4):
    return cv.load_config(overrides={
        "protocols": {"unified": {"train": {"epochs": 2, "list_size": 30}, "seeds": [0, 1]}},
        "tuning": {"budget": budget, "seeds": [0, 1]},
        "tables": {"unified_table": {"methods": ["approxndcg"], "datasets": ["syn-web"]}},
        "freeze": {"methods": ["approxndcg"]}})


def _train_configurations(config, spec, prepared):
    from bench.training.cli import run_job

    for point in spec["methods"]["approxndcg"]["points"]:
        job = plan.run_config(config, "unified", "syn-web", point["run"])
        for seed, run_dir in zip(spec["seeds"], point["dirs"]):
            run_job(job, prepared, run_dir, method=point["run"], seed=seed, device="cpu", quiet=True, threads=1)


def _choice(record):
    """What a tuning record chose and every value it compared (not the seconds the runs took)."""
    return {k: v for k, v in record.items() if k != "seconds"}


def test_permuting_the_test_labels_changes_no_tuning_record_and_two_tunings_choose_alike(tmp_path, monkeypatch):
    """The oracle: training, early stopping and the tune stage never read the test labels, so
    retraining every configuration on a fold whose test labels are permuted (features, train and
    validation unchanged) gives bit-identical validation values and the same choice, while the
    runs did grade the new labels and a choice by them would pick the configuration the
    permutation favours. The two trainings are also two independent tunings of the same study:
    they choose the same configuration. Exact equality: CPU, one thread, seeded runs."""
    from test_selection import _permute_test_labels_for

    config = _config()
    spec = plan.tune_spec(config, "unified", "syn-web", "approxndcg")
    prepared = make_prepared(tmp_path / "prepared" / "Fold1")
    (tmp_path / "original").mkdir()
    monkeypatch.chdir(tmp_path / "original")
    _train_configurations(config, spec, prepared)
    before = tune(spec)
    entry = before["methods"]["approxndcg"]
    target = min(entry["points"], key=lambda p: p["mean"])  # the worst on validation gets the ideal test ranking
    assert target["name"] != entry["chosen"]
    scores = np.mean([np.load(f"{d}/scores.npy") for d in target["dirs"]], axis=0)
    permuted = _permute_test_labels_for(prepared, tmp_path / "permuted" / "Fold1", scores)

    (tmp_path / "retrained").mkdir()
    monkeypatch.chdir(tmp_path / "retrained")
    _train_configurations(config, spec, permuted)
    after = tune(spec)
    assert _choice(after) == _choice(before)

    test_means = [[read_run_info(d)["result"]["test_means"]["ndcg@10"] for d in p["dirs"]] for p in entry["points"]]
    on_test = entry["points"][best_point(test_means, higher_is_better=True)]["name"]
    assert on_test == target["name"] != after["methods"]["approxndcg"]["chosen"]  # reading test would change it


def test_a_written_record_reads_back_with_its_digest(tmp_path):
    path = tmp_path / "r.json"
    write_record(tune(_spec(tmp_path, [[0.1, 0.2], [0.3, 0.4]])), path)
    assert read_record(path)["methods"]["m"]["chosen"] == "m+cfg2"


def test_a_compared_loss_with_a_search_gets_the_baselines_budget_and_one_without_trains_once():
    loss = {"name": "hinge", "loss": "examples.my_loss:pairwise_squared_hinge", "params": {"margin": 1.0},
            "search": {"params.margin": {"low": 0.1, "high": 10.0, "scale": "log"}}}
    untuned = {"name": "plain", "loss": "examples.my_loss:pairwise_squared_hinge", "params": {"margin": 1.0}}
    config = cv.load_config(overrides={"compare": {"losses": [loss, untuned]}})
    ev = plan.evaluation(config, "compare", "syn-web")
    assert list(ev.tuned) == ["hinge"] and len(ev.tuned["hinge"]) == config["tuning"]["budget"]
    spec = plan.tune_spec(config, "compare", "syn-web", "hinge")
    points = spec["methods"]["hinge"]["points"]
    assert [p["name"] for p in points] == ["hinge", "hinge+cfg2", "hinge+cfg3"]
    assert list(points[1]["settings"]) == ["train.lr", "model.dropout", "params.margin"]
    assert spec["tuning"] == {**plan.study_protocol(config, "unified", "syn-web")["tuning"],
                              "method_space": spec["tuning"]["method_space"], "space_text": spec["tuning"]["space_text"]}
    budgets = {m: s["budget"] for m, s in plan.compare_spec(config, "syn-web")["new_specs"].items()}
    assert budgets == {"hinge": config["tuning"]["budget"], "plain": 1}
    assert plan.run_config(config, "compare", "syn-web", "hinge+cfg2")["methods"]["hinge+cfg2"]["params"]["margin"] == \
        points[1]["settings"]["params.margin"]


def _tuning_runs(config, spec, prepared):
    """The runs ``ltr-bench tune`` trains for ``spec`` (bench.training.cli.train_runs' items)."""
    (points,) = [m["points"] for m in spec["methods"].values()]
    return [{"run_config": p["run_config"], "rule": p["rule"], "method": p["run"], "seed": seed, "dir": d,
             "prepared": str(prepared)} for p in points for seed, d in zip(spec["seeds"], p["dirs"])]


def test_a_tuning_job_resumes_its_own_interrupted_runs_and_retrains_after_it_finished(tmp_path, monkeypatch, capsys):
    """One job trains a tuning's runs one after another (bench.training.cli.train_runs). Killed, it
    keeps on its next start the runs its journal lists that are still sound (a damaged one is
    trained again); once it finished (its journal removed), running it again -- forced, or its
    params changed -- trains every run again, as Snakemake reruns a job. The oracle for a
    retrained run: its bytes equal the first training's (CPU, one thread, seeded), and a run
    trained after others in one process equals the same run trained alone in another directory."""
    from bench.training.cli import finish, train_runs

    config = _config(budget=2)
    spec = plan.tune_spec(config, "unified", "syn-web", "approxndcg")
    prepared = make_prepared(tmp_path / "prepared" / "Fold1")
    monkeypatch.chdir(tmp_path)
    runs = _tuning_runs(config, spec, prepared)
    assert [r["method"] for r in runs] == ["approxndcg", "approxndcg", "approxndcg+cfg2", "approxndcg+cfg2"]
    journal = tmp_path / "tuning.json.partial"
    assert train_runs(runs, device="cpu", threads=1, quiet=True, journal=journal) == (4, 0)
    first = {r["dir"]: (tmp_path / r["dir"] / "scores.npy").read_bytes() for r in runs}
    assert train_runs(runs, device="cpu", threads=1, quiet=True, journal=journal) == (0, 4)  # resumed after a kill

    damaged = tmp_path / runs[2]["dir"] / "scores.npy"
    raw = bytearray(damaged.read_bytes())
    raw[-1] ^= 1
    damaged.write_bytes(bytes(raw))
    capsys.readouterr()
    assert train_runs(runs, device="cpu", threads=1, quiet=True, journal=journal) == (1, 3)
    assert "contents changed" in capsys.readouterr().out and damaged.read_bytes() == first[runs[2]["dir"]]

    finish(journal)
    assert not journal.exists()
    assert train_runs(runs, device="cpu", threads=1, quiet=True, journal=journal) == (4, 0)  # a rerun retrains
    assert {r["dir"]: (tmp_path / r["dir"] / "scores.npy").read_bytes() for r in runs} == first

    # what came before in the process (here 400 MB, touched and freed) is not the next run's peak
    from bench.provenance import host_peak_rss_bytes

    before = np.ones(50_000_000)
    del before
    inflated = host_peak_rss_bytes()
    alone = {**runs[3], "dir": "alone/seed1"}
    assert train_runs([alone], device="cpu", threads=1, quiet=True, journal=tmp_path / "other.partial") == (1, 0)
    assert (tmp_path / "alone/seed1/scores.npy").read_bytes() == first[runs[3]["dir"]]
    peak = read_run_info(tmp_path / "alone/seed1")["peak_memory"]["host_max_rss_bytes"]
    assert peak < inflated - 300_000_000

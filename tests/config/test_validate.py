"""bench.config.validate: schema defaults, errors that name the key, profile layering."""

from __future__ import annotations

import copy

import pytest
import yaml

from bench.config import plan
from bench.config import validate as cv
from bench.errors import ConfigError
from helpers import ROOT


@pytest.fixture(scope="module")
def default_raw() -> dict:
    return cv.read_yaml(ROOT / "config" / "default.yaml")


def _with(raw: dict, path: list, value) -> dict:
    """A copy of ``raw`` with ``value`` at ``path``."""
    raw = copy.deepcopy(raw)
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return raw


def _error(raw: dict) -> str:
    with pytest.raises(ConfigError) as info:
        cv.validate_config(copy.deepcopy(raw))
    return str(info.value)


def test_profiles_validate_and_defaults_are_filled():
    cfg = cv.load_config()
    assert cfg["profile"] == "default"
    assert cfg["stats"] == {"test": "t", "correction": "holm", "alpha": 0.05, "n_boot": 1000, "seed": 0}
    assert cfg["methods"]["ranknet"]["params"] == {}  # default of an omitted key
    assert cfg["tables"]["pirank_table1"]["enabled"] is True
    assert plan.enabled_tables(cfg) == list(plan.TABLES)
    assert plan.enabled_figures(cfg) == list(plan.FIGURES)
    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    assert plan.enabled_figures(paper)[-1] == "cd_diagram"
    assert paper["profile"] == "paper" and paper["gpu"] is True
    assert plan.table_datasets(paper, "pirank_table1") == ["mslr-web30k", "yahoo-set1"]
    assert plan.table_datasets(paper, "arf_table2") == ["mslr-web30k-arf", "istella-arf"]
    assert "syn-web" not in plan.table_datasets(paper, "unified_table")
    example = cv.load_config(ROOT / "config" / "compare-example.yaml")
    assert list(plan.compare_methods(example)) == ["squared_hinge"]


def test_paper_profile_sets_every_budget_key_it_inherits(default_raw):
    """Merging paper.yaml over default.yaml must not leak a tiny default budget."""
    paper_raw = cv.read_yaml(ROOT / "config" / "paper.yaml")
    for name, proto in default_raw["protocols"].items():
        for section in ("model", "train"):
            missing = set(proto[section]) - set(paper_raw["protocols"][name][section])
            assert not missing, f"paper.yaml protocols.{name}.{section} inherits {missing} from default.yaml"
        if "sinkprop_protocol" in proto:
            missing = set(proto["sinkprop_protocol"]) - set(paper_raw["protocols"][name]["sinkprop_protocol"])
            assert not missing, f"paper.yaml protocols.{name}.sinkprop_protocol inherits {missing}"


@pytest.mark.parametrize(
    "path, value, key",
    [
        (["bogus"], 1, "'bogus'"),
        (["tables", "pirank_table1", "metric"], ["mrr"], "tables.pirank_table1.metric"),
        (["protocols", "pirank", "train", "bach_size"], 3, "protocols.pirank.train.bach_size"),
        (["methods", "ranknet", "lable"], "x", "methods.ranknet.lable"),
        (["datasets", "syn-web", "option"], {}, "datasets.syn-web.option"),
        (["protocols", "letor", "sinkprop_protocol", "stage"], 3, "protocols.letor.sinkprop_protocol.stage"),
    ],
)
def test_unknown_key_fails_naming_it(default_raw, path, value, key):
    raw = _with(default_raw, path, value)
    message = _error(raw)
    assert key in message and "unknown key" in message


def test_a_misspelt_key_gets_a_did_you_mean(default_raw):
    message = _error(_with(default_raw, ["protocols", "pirank", "train", "bach_size"], 3))
    assert message.endswith("; did you mean 'batch_size' or 'eval_batch_size'?")
    assert "did you mean" not in _error(_with(default_raw, ["bogus"], 1))  # nothing close: no guess


@pytest.mark.parametrize(
    "path, value, key",
    [
        (["threads"], "two", "'threads'"),
        (["protocols", "pirank", "seeds"], [0, "a"], "protocols.pirank.seeds.1"),
        (["protocols", "pirank", "train", "lr"], "fast", "protocols.pirank.train.lr"),
        (["stats", "correction"], "bonferroni", "stats.correction"),
        (["tables", "arf_table2", "metrics"], ["ndcg@ten"], "tables.arf_table2.metrics.0"),
        (["gpu"], "maybe", "'gpu'"),
        (["protocols", "letor", "sinkprop_protocol", "sigma_factor"], 1, "protocols.letor.sinkprop_protocol.sigma_factor"),
        (["protocols", "letor", "sinkprop_protocol", "penalties"], [-1], "protocols.letor.sinkprop_protocol.penalties.0"),
        (["methods", "linear_regression", "penalties"], ["big"], "methods.linear_regression"),
        (["methods", "linear_regression", "linear"], "lasso", "methods.linear_regression"),
    ],
)
def test_wrong_type_fails_naming_the_key(default_raw, path, value, key):
    raw = _with(default_raw, path, value)
    assert key in _error(raw)


@pytest.mark.parametrize(
    "path, text, value",
    [
        (["gpu"], "true", True),
        (["gpu"], "True", True),
        (["gpu"], "false", False),
        (["threads"], "2", 2),
        (["stats", "alpha"], "1e-2", 0.01),
        (["stats", "alpha"], "0.01", 0.01),
        (["protocols", "pirank", "train", "epochs"], "3", 3),
        (["protocols", "pirank", "seeds"], ["0", "1"], [0, 1]),
    ],
)
def test_command_line_strings_get_the_schema_type(default_raw, path, text, value):
    """``--config`` values arrive as strings (nested mappings too); where the schema expects a
    number or a boolean they are read as YAML reads them."""
    raw = _with(default_raw, path, text)
    cfg = cv.validate_config(raw)
    for part in path[:-1]:
        cfg = cfg[part]
    assert cfg[path[-1]] == value and type(cfg[path[-1]]) is type(value)


def _as_snakemake_passes(text: str) -> dict:
    """A nested ``--config`` value as Snakemake hands it over: YAML's BaseLoader, every scalar a
    string (``snakemake.cli.parse_config``)."""
    return yaml.load(text, Loader=yaml.BaseLoader)


def test_command_line_loss_params_keep_their_yaml_type():
    """Loss ``params`` are free-form in the schema: the loss's signature types them, so the run
    config holds 100.0 where ``--config 'methods={pirank_ndcg_t1000: {params: {tau: 100.0}}}'``
    was typed (it held the string "100.0")."""
    methods = _as_snakemake_passes("{pirank_ndcg_t1000: {params: {tau: 100.0, k: 5, straight_through: false}}}")
    assert methods["pirank_ndcg_t1000"]["params"]["tau"] == "100.0"
    cfg = cv.load_config(overrides={"methods": methods})
    params = plan.run_config(cfg, "pirank", "syn-web", "pirank_ndcg_t1000")["methods"]["pirank_ndcg_t1000"]["params"]
    assert params == {"tau": 100.0, "k": 5, "straight_through": False}
    assert [type(params[k]) for k in ("tau", "k", "straight_through")] == [float, int, bool]


def test_a_string_loss_parameter_stays_a_string():
    """A parameter whose default is a string takes strings: a name, and a number-like text too."""
    methods = _as_snakemake_passes("{diffsort_ndcg: {params: {sigmoid: logistic, network: '1.0', steepness: 5}}}")
    cfg = cv.load_config(overrides={"methods": methods})
    assert cfg["methods"]["diffsort_ndcg"]["params"] == {"sigmoid": "logistic", "network": "1.0", "steepness": 5}


def test_command_line_gbdt_params_and_dataset_options_keep_their_yaml_type():
    overrides = _as_snakemake_passes("{methods: {lambdamart: {params: {num_leaves: 7, boosting: dart, "
                                     "extra_trees: true}}}, datasets: {syn-web: {options: {n_queries: 50, "
                                     "list_length: [10, 40], normalize: zscore}}}}")
    cfg = cv.load_config(overrides=overrides)
    assert cfg["methods"]["lambdamart"]["params"] == {"num_leaves": 7, "min_sum_hessian_in_leaf": 1.0,
                                                      "boosting": "dart", "extra_trees": True}
    options = cfg["datasets"]["syn-web"]["options"]
    assert (options["n_queries"], options["list_length"], options["normalize"]) == (50, [10, 40], "zscore")


@pytest.mark.parametrize("path, text, expected", [(["gpu"], "maybe", "boolean"), (["threads"], "2.5", "integer"),
                                                  (["protocols", "pirank", "train", "epochs"], "three", "integer")])
def test_a_string_that_is_not_of_the_type_names_key_and_type(default_raw, path, text, expected):
    raw = _with(default_raw, path, text)
    message = _error(raw)
    assert f"config key '{'.'.join(path)}'" in message and f"not of type '{expected}'" in message, message


def test_config_on_the_command_line_is_typed(tmp_path):
    """Through Snakemake, as a user types it: a dry run accepts the typed values and names the
    key and type of one that is not."""
    import subprocess
    import sys

    snakemake = [sys.executable, "-m", "snakemake"]  # a dependency of the package: always installed
    ok = subprocess.run([*snakemake, "-n", "--config", "gpu=true", "protocols={pirank: {train: {epochs: 3}}}"],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    bad = subprocess.run([*snakemake, "-n", "--config", "gpu=maybe"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode != 0 and "config key 'gpu': 'maybe' is not of type 'boolean'" in bad.stdout + bad.stderr


def test_dangling_references_fail_naming_the_key(default_raw):
    raw = copy.deepcopy(default_raw)
    raw["tables"]["pirank_table1"]["methods"].append("no_such_method")
    assert "tables.pirank_table1.methods.6" in _error(raw)
    raw = copy.deepcopy(default_raw)
    raw["roles"]["mslr-web30k"] = "no-such-dataset"
    assert "roles.mslr-web30k" in _error(raw)
    raw = copy.deepcopy(default_raw)
    raw["protocols"]["neuralndcg"]["model"]["batch_norm"] = True  # an mlp key on a transformer
    assert "protocols.neuralndcg.model.batch_norm" in _error(raw)
    raw = copy.deepcopy(default_raw)
    raw["compare"] = {"losses": [{"name": "ranknet", "loss": "examples.my_loss:pairwise_squared_hinge"}]}
    assert "compare.losses.0" in _error(raw)


def test_sinkprop_protocol_and_linear_method_references(default_raw):
    """The protocol's methods must be losses of the catalogue, its model linear; a linear method
    takes no loss, model or train section."""
    raw = copy.deepcopy(default_raw)
    raw["protocols"]["letor"]["sinkprop_protocol"]["methods"] = ["sinkprop", "no_such"]
    assert "protocols.letor.sinkprop_protocol.methods.1': unknown method 'no_such'" in _error(raw)
    raw["protocols"]["letor"]["sinkprop_protocol"]["methods"] = ["lambdamart"]
    assert "protocols.letor.sinkprop_protocol.methods.0': 'lambdamart' is not a neural method" in _error(raw)
    raw = copy.deepcopy(default_raw)
    raw["protocols"]["letor"]["model"]["hidden"] = [16]
    assert "protocols.letor.model': the SinkProp protocol" in _error(raw)
    for extra, clash in (({"loss": "rmse"}, "neural: loss"), ({"train": {"lr": 0.1}}, "neural: train"),
                         ({"num_trees": 3}, "gbdt: num_trees")):
        raw = copy.deepcopy(default_raw)
        raw["methods"]["linear_regression"].update(extra)
        message = _error(raw)
        assert "config key 'methods.linear_regression': mixes keys of several method kinds" in message
        assert clash in message and "linear: linear, penalties" in message
    raw = copy.deepcopy(default_raw)
    raw["methods"]["ranknet"]["penalties"] = [1.0]  # a grid on a loss
    assert "'methods.ranknet': mixes keys of several method kinds (neural: loss; linear: penalties)" in _error(raw)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: x\ndatasets: {a: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml, line \d"):
        cv.read_yaml(bad)


def test_every_model_type_has_its_definition():
    """``model.type`` picks the definition ``<type>_model``: each type has one, whose keys are
    keys of ``model`` (which types them) and whose ``type`` is that type."""
    schema = yaml.safe_load((ROOT / "workflows" / "schemas" / "config.schema.yaml").read_text())
    defs = schema["$defs"]
    for kind in defs["model"]["properties"]["type"]["enum"]:
        own = defs[f"{kind}_model"]["properties"]
        assert set(own) <= set(defs["model"]["properties"]), kind
        assert own["type"]["const"] == kind



@pytest.mark.parametrize("model", [{"hidden": [8]}, {"output_activation": "tanh"}])
def test_the_sinkprop_protocol_needs_a_linear_scorer_in_the_study_and_in_a_job(model):
    """One rule (bench.config.settings.check_linear_scorer), checked on the study config and on a
    job's resolved settings alike: a model with a hidden layer or an output activation is refused."""
    from bench.config.settings import resolve_sinkprop

    with pytest.raises(ConfigError, match=r"protocols\.letor\.model': the SinkProp protocol trains a linear scorer"):
        cv.load_config(overrides={"protocols": {"letor": {"model": model}}})
    job = {"methods": {"sinkprop": {"loss": "sinkprop"}}, "model": model, "sinkprop_protocol": {}}
    with pytest.raises(ConfigError, match=r"'model': the SinkProp protocol trains a linear scorer"):
        resolve_sinkprop(job, "sinkprop")
    assert resolve_sinkprop({**job, "model": {"hidden": []}}, "sinkprop")["model"]["hidden"] == []
    with pytest.raises(ConfigError, match=r"linear scorer .*got type context_aware"):
        resolve_sinkprop({**job, "model": {"type": "context_aware"}}, "sinkprop")


def test_a_json_run_config_keeps_a_small_learning_rate_a_number(tmp_path):
    """The workflow writes run configs as JSON, where Python writes 0.00001 as ``1e-05``; read as
    YAML 1.1 that is a string and the job stopped (PiRank's ablation lr of 1e-5, found by the
    MSLR-sample run). A .json file is read as JSON; a bad one names its line."""
    import json

    from bench.config.plan import run_config
    from bench.config.run import read_run_config
    from bench.config.settings import resolve_neural

    paper = cv.load_config(ROOT / "config" / "paper.yaml")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_config(paper, "pirank_ablation", "mslr-web30k", "pirank_ndcg_L10")))
    assert '"lr": 1e-05' in path.read_text()
    assert resolve_neural(read_run_config(path), "pirank_ndcg_L10")["train"]["lr"] == 1e-05
    path.write_text('{"methods": {}\n,}')
    with pytest.raises(ConfigError, match=r"run.json, line 2: not valid JSON"):
        read_run_config(path)


def test_an_unknown_method_suggests_the_close_names_not_all_of_them(default_raw):
    """A typo names the closest methods (difflib) instead of listing every method on one line."""
    raw = copy.deepcopy(default_raw)
    raw["tables"]["pirank_table1"]["methods"] = ["pirank_ndgc"]
    msg = _error(raw)
    n_methods = len(raw["methods"])
    assert n_methods > 12  # so the list is not printed
    assert msg.startswith("config key 'tables.pirank_table1.methods.0': unknown method 'pirank_ndgc'; did you mean ")
    assert "'pirank_ndcg'" in msg and msg.endswith(f" ({n_methods} defined)")
    assert "ranknet" not in msg and "listnet" not in msg  # not close: not named
    raw["tables"]["pirank_table1"]["methods"] = ["zzz"]
    assert _error(raw).endswith(f"unknown method 'zzz' ({n_methods} defined, none close to it; see the config's methods)")

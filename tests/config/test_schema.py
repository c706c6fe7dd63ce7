"""The config schema is the only home of the config's keys, types, bounds and defaults.

No test here compares a Python copy with the schema: there is no copy. The defaults a job
resolves are read from the schema at resolution time, so changing a default in (a copy of)
the schema changes what every run kind resolves, and nothing in ``bench/`` spells them again.
"""

from __future__ import annotations

import ast
import copy

import pytest
import yaml

from bench.config import plan, schema
from bench.config.run import resolve_train
from bench.config.validate import load_config, validate_config
from bench.errors import ConfigError
from helpers import ROOT


@pytest.fixture
def edited_schema(tmp_path, monkeypatch):
    """``edit(fn)``: a copy of the schema changed by ``fn``, used by every resolver from then on."""

    def edit(fn):
        data = schema.load_schema()
        fn(data)
        path = tmp_path / "config.schema.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        monkeypatch.setattr(schema, "SCHEMA_PATH", path)
        return path

    return edit


def test_every_train_key_has_its_default_in_the_schema():
    props = schema.definition("train")["properties"]
    assert set(resolve_train(None, None, method="m")) == set(props)
    assert resolve_train(None, None, method="m") == {k: sub["default"] for k, sub in props.items()}


def test_changing_a_schema_default_changes_every_resolver(edited_schema):
    from bench.config.settings import resolve_gbdt, resolve_linear, resolve_neural, resolve_sinkprop_section

    def change(data):
        defs = data["$defs"]
        defs["train"]["properties"]["batch_size"]["default"] = 7
        defs["train"]["properties"]["early_stopping_metric"]["default"] = "mrr"
        defs["sinkprop_protocol"]["properties"]["stages"]["default"] = 5
        defs["method"]["properties"]["num_trees"]["default"] = 33
        defs["method"]["properties"]["penalties"]["default"] = [2.0]

    edited_schema(change)
    cfg = {"model": {"type": "mlp", "hidden": []}, "methods": {
        "n": {"loss": "ranknet"}, "g": {"gbdt": "lightgbm", "objective": "lambdarank"},
        "l": {"linear": "least_squares"}}}
    neural = resolve_neural(cfg, "n")
    assert neural["train"]["batch_size"] == 7 and neural["train"]["early_stopping_metric"] == "mrr"
    gbdt = resolve_gbdt(cfg, "g")
    assert gbdt["num_trees"] == 33 and gbdt["early_stopping_metric"] == "mrr"
    linear = resolve_linear(cfg, "l")
    assert linear["penalties"] == [2.0] and linear["early_stopping_metric"] == "mrr"
    assert resolve_sinkprop_section({})["stages"] == 5


def test_changing_a_schema_bound_changes_the_job_check(edited_schema):
    assert resolve_train({"batch_size": 1}, None, method="m")["batch_size"] == 1
    edited_schema(lambda data: data["$defs"]["train"]["properties"]["batch_size"].update(minimum=2))
    with pytest.raises(ConfigError, match=r"'train\.batch_size': 1 is less than the minimum of 2"):
        resolve_train({"batch_size": 1}, None, method="m")


def test_job_defaults_stay_out_of_the_study_config_and_the_run_configs():
    """``x-defaults: job``: the study config and the per-job JSON keep what the user wrote (so the
    frozen protocol hashes and the job configs do not change when a default is added)."""
    raw = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    cfg = load_config()
    for name, proto in cfg["protocols"].items():
        assert proto["train"] == raw["protocols"][name]["train"]
    for name, method in cfg["methods"].items():
        assert {k for k in method if k not in raw["methods"][name]} <= {"params"}
    name = next(iter(cfg["protocols"]))
    run = plan.run_config(cfg, name, plan.enabled_datasets(cfg)[0], next(iter(cfg["methods"])))
    assert set(run["train"]) <= set(raw["protocols"][name]["train"]) | {
        k for o in raw["protocols"][name].get("overrides", {}).values() for k in o.get("train", {})}


def test_sinkprop_protocol_still_requires_its_methods_in_the_study_config():
    cfg = copy.deepcopy(yaml.safe_load((ROOT / "config" / "default.yaml").read_text()))
    proto = next(p for p in cfg["protocols"].values() if "sinkprop_protocol" in p)
    del proto["sinkprop_protocol"]["methods"]
    with pytest.raises(ConfigError, match=r"sinkprop_protocol': 'methods' is a required property"):
        validate_config(cfg)


def test_no_module_keeps_a_copy_of_the_schema_defaults():
    """The old copies are gone, and no module gives ``early_stopping_metric`` a literal fallback."""
    offenders = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        offenders += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(names & {"TRAIN_DEFAULTS", "PROTOCOL_DEFAULTS",
                                                                                  "DEFAULT_PENALTIES"})]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "early_stopping_metric" and isinstance(node.args[1], ast.Constant):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: literal early_stopping_metric default")
    assert offenders == []

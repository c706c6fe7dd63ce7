"""Run kinds are a registry: one line in bench.config.kinds.RUN_KINDS and one module add a kind."""

from __future__ import annotations

import json
import textwrap

import pytest

from bench.config import kinds, plan
from bench.config.jobs import target_jobs
from bench.config.run import run_config_digest
from bench.config.validate import load_config

# the whole of a hypothetical run kind: a resolver and a run function in one module
CONSTANT_KIND = '''
from pathlib import Path

from bench.config.run import method_entry


def resolve(config, method):
    return {"value": float(method_entry(config, method)["constant"])}


def run(settings, prepared_dir, out_dir, *, method, seed, device="auto", quiet=False, threads=None,
        run_config_sha256=None):
    out = Path(out_dir)
    out.mkdir(parents=True)
    (out / "run.json").write_text(f'{{"kind": "constant", "value": {settings["value"]}, "seed": {seed}, '
                                  f'"run_config_sha256": "{run_config_sha256}"}}')
    return out
'''


@pytest.fixture
def constant_kind(tmp_path, monkeypatch):
    """The hypothetical kind ``constant`` (methods with a ``constant:`` key, run by rule ``train``)."""
    (tmp_path / "constant_kind.py").write_text(textwrap.dedent(CONSTANT_KIND), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(kinds.RUN_KINDS, "constant",
                        kinds.RunKind("train", "constant", "constant_kind:resolve", "constant_kind:run"))
    return "constant"


def test_the_registry_names_every_kind_and_rule():
    assert list(kinds.RUN_KINDS) == ["sinkprop_protocol", "gbdt", "linear", "neural"]
    assert kinds.rules() == ("train", "gbdt", "linear")  # the rule names the cost models and sizes know
    by_key: dict[str, set[str]] = {}
    for kind in kinds.RUN_KINDS.values():
        by_key.setdefault(kind.method_key, set()).add(kind.rule)
        for ref in (kind.resolve, kind.run):
            assert callable(kinds.load(ref)), ref
    assert all(len(rules) == 1 for rules in by_key.values())  # a protocol's kind keeps its method's rule
    from bench.costs.model import COST_MODELS

    assert set(kinds.rules()) <= set(COST_MODELS)


def test_a_new_kind_is_planned_and_dispatched(constant_kind, tmp_path):
    cfg = load_config()
    cfg["methods"]["const"] = {"constant": 0.25, "params": {}}  # the schema would take its keys too
    table = plan.enabled_tables(cfg)[0]
    cfg["tables"][table]["methods"] = [*plan.table_methods(cfg, table), "const"]

    assert plan.method_kind(cfg["methods"]["const"]) == "constant"
    assert plan.method_names(cfg, kind="constant") == ["const"] and "const" in plan.method_names(cfg, rule="train")
    runs = [j for j in target_jobs(cfg, [table]) if j.wildcards.get("method") == "const" and j.is_run]
    assert runs and {j.rule for j in runs} == {"train"}

    job = runs[0].wildcards
    run_cfg = plan.run_config(cfg, job["experiment"], job["dataset"], "const")
    assert kinds.run_kind(run_cfg, "const") == "constant"
    path = tmp_path / "const.json"
    path.write_text(json.dumps(run_cfg))
    from bench.cli import main

    args = ["--prepared", str(tmp_path / "unused"), "--method", "const", "--seed", "3", "--config", str(path)]
    assert main(["train", "--out", str(tmp_path / "run"), *args]) == 0
    assert json.loads((tmp_path / "run" / "run.json").read_text()) == {
        "kind": "constant", "value": 0.25, "seed": 3, "run_config_sha256": run_config_digest(run_cfg)}
    # the same config as JSON on the command line (what the workflow passes): the same run, the same digest
    inline = [*args[:-2], "--config-json", json.dumps(run_cfg, separators=(",", ":"))]
    assert main(["train", "--out", str(tmp_path / "inline"), *inline]) == 0
    assert (tmp_path / "inline" / "run.json").read_text() == (tmp_path / "run" / "run.json").read_text()
    # another kind's command refuses it, naming its own
    assert main(["gbdt", "--out", str(tmp_path / "other"), *args]) == 2
    assert not (tmp_path / "other").exists()


def test_a_protocol_section_hands_its_methods_to_a_kind():
    cfg = load_config()
    name = next(p for p, spec in cfg["protocols"].items() if spec.get("sinkprop_protocol"))
    listed = cfg["protocols"][name]["sinkprop_protocol"]["methods"][0]
    other = next(m for m in cfg["methods"] if m != listed and plan.method_kind(cfg["methods"][m]) == "neural")
    ds = plan.enabled_datasets(cfg)[0]
    assert kinds.run_kind(plan.run_config(cfg, name, ds, listed), listed) == "sinkprop_protocol"
    assert kinds.run_kind(plan.run_config(cfg, name, ds, other), other) == "neural"
    assert plan.method_rule(cfg["methods"][listed]) == "train"


def test_a_command_refuses_a_method_of_another_rule(tmp_path):
    from bench.cli import main

    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"methods": {"lr": {"linear": "least_squares"}}}))
    rc = main(["train", "--prepared", str(tmp_path), "--out", str(tmp_path / "r"), "--method", "lr", "--seed", "0",
               "--config", str(path)])
    assert rc == 2 and not (tmp_path / "r").exists()

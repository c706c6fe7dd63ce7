"""bench.config.plan.fixed: a fixed config's planning answers, remembered, equal the fresh ones;
plan.one_of: the wildcard constraints as prefix trees match exactly their names."""

from __future__ import annotations

import copy
import json
import re

import pytest

from bench.config import kinds, plan
from bench.config.jobs import target_jobs
from bench.config.validate import load_config


def _answers(config):
    """What the workflow asks per job, for every evaluation and tuned method of the default study."""
    out = []
    for table in plan.enabled_tables(config):
        out.append(plan.table_spec(config, table))
        for ds in plan.table_datasets(config, table):
            for fold in plan.evaluation(config, table, ds).folds:
                out += [plan.evaluated_runs(config, table, ds, fold), plan.evaluation_records(config, table, ds, fold)]
            out.append(plan.evaluate_args(config, table, ds))
    for experiment in plan.tuning_experiments(config):
        for method in plan.tuned_entries(config, experiment):
            for ds in plan.enabled_datasets(config):
                out.append(plan.tune_spec(config, experiment, ds, method))
    for rule in kinds.rules():
        names = plan.method_names(config, rule=rule)
        out.append([plan.run_config_argument(config, "unified", "syn-web", m) for m in names if "+" in m][:20])
    return json.loads(json.dumps(out, default=str))


def test_fixed_answers_equal_fresh_ones_and_stay_untouched():
    config = load_config()
    fresh = _answers(config)
    pristine = copy.deepcopy(config)
    with plan.fixed(config):
        assert _answers(config) == fresh
        assert _answers(config) == fresh  # from the memo this time
    assert config == pristine  # nothing the callers did changed the config


def test_only_the_fixed_config_is_remembered_and_only_within_the_block():
    config = load_config()
    with plan.fixed(config):
        before = plan.table_datasets(config, "unified_table")
        other = copy.deepcopy(config)
        other["tables"]["unified_table"]["datasets"] = ["syn-web"]
        assert plan.table_datasets(other, "unified_table") == ["syn-web"]  # an equal-looking copy is its own
        assert plan.table_datasets(config, "unified_table") == before
    config["tables"]["unified_table"]["datasets"] = ["syn-web"]
    assert plan.table_datasets(config, "unified_table") == ["syn-web"]  # the block is over: planned afresh


def test_target_jobs_are_the_same_with_the_memo():
    config = load_config()
    jobs = [(j.rule, j.output, j.targets, j.needs) for j in target_jobs(config, ["all"])]
    plan.fix(config)  # as the workflow does: remembered for good
    try:
        assert [(j.rule, j.output, j.targets, j.needs) for j in target_jobs(config, ["all"])] == jobs
    finally:
        plan._FIXED.pop(id(config), None)


@pytest.mark.parametrize("profile", [[], ["config/paper.yaml"]])
def test_one_of_matches_exactly_its_names(profile):
    config = load_config(*profile)
    names = {rule: plan.method_names(config, rule=rule) for rule in kinds.rules()}
    everything = [n for ns in names.values() for n in ns]
    # every name, every proper prefix of one, and names one character or a configuration longer
    probes = {*everything, *(n[:k] for n in everything for k in range(len(n))),
              *(n + "x" for n in everything), *(n + "+cfg99" for n in everything)}
    for rule, mine in names.items():
        pattern = re.compile(rf"runs/(?P<method>{plan.one_of(mine)})/seed0")
        matched = {p for p in probes if pattern.fullmatch(f"runs/{p}/seed0")}
        assert matched == set(mine), rule
    assert not re.fullmatch(plan.one_of([]), "")

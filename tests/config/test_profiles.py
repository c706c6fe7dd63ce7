"""Two profiles' outputs coexist (issue 42: the MSLR-sample overlay, run after the default study,
replaced the default study's tables at the same paths). A profile's summaries (tables, figures,
statistics, evaluations, selections, the report) live in its own folders; what two profiles share
is keyed by its content (a prepared fold by its dataset, a run by its run config), so sharing it
shares the same bytes."""

from __future__ import annotations

import itertools
from pathlib import PurePosixPath

import pytest

from bench.config import plan, tuning
from bench.config.jobs import target_jobs
from bench.config.validate import load_config
from bench.errors import ConfigError

PROFILES = {
    "default": [],
    "paper": ["config/paper.yaml"],
    "mslr-sample": ["config/paper.yaml", "config/mslr-sample.yaml"],
    "letor": ["config/paper.yaml", "config/letor.yaml"],
    "scale": ["config/paper.yaml", "config/scale.yaml"],
}
#: the rules whose outputs are keyed by what they hold: a run by its experiment, dataset and method
#: (its run config, among the job's params: Snakemake reruns it when that differs), a fold by its
#: dataset and fold
SHARED_BY_CONTENT = {"fetch", "prepare", "train", "gbdt", "linear", "tune", "tuned_runs"}


@pytest.fixture(scope="module")
def studies():
    configs = {name: load_config(*files) for name, files in PROFILES.items()}
    assert {name: c["profile"] for name, c in configs.items()} == {name: name for name in PROFILES}
    return {name: (c, {j.output: j for j in target_jobs(c, ["all"])}) for name, c in configs.items()}


def test_no_two_profiles_write_the_same_summary(studies):
    for (a, (config_a, jobs_a)), (b, (config_b, jobs_b)) in itertools.combinations(studies.items(), 2):
        shared = set(jobs_a) & set(jobs_b)
        assert {jobs_a[o].rule for o in shared} <= SHARED_BY_CONTENT, (a, b)
        for out in shared:  # a shared run is the same run: the same run config (a tuned one: its record's)
            w = jobs_a[out].wildcards
            if jobs_a[out].is_run and tuning.base_of_tuned(w["method"]) is None:
                assert plan.run_config_argument(config_a, w["experiment"], w["dataset"], w["method"]) == \
                    plan.run_config_argument(config_b, w["experiment"], w["dataset"], w["method"]), (a, b, out)


def test_the_default_profile_keeps_the_readmes_paths_and_the_others_their_own(studies):
    default = studies["default"][1]
    assert "reports/tables/pirank_table1.md" in default and "reports/report.html" in default
    assert plan.STATS.format(table="pirank_table1") in default
    sample = studies["mslr-sample"][1]
    assert "reports/mslr-sample/tables/pirank_table1.md" in sample and "reports/mslr-sample/report.html" in sample
    assert "results/mslr-sample/stats/pirank_table1.parquet" in sample


def test_no_profile_may_take_the_name_of_a_folder_of_the_suite(studies):
    """Every folder a study writes directly under results/ or reports/ is in SUITE_FOLDERS (so the
    check below covers them all), and a profile named like one is refused naming the key."""
    for config, jobs in studies.values():
        for out in jobs:
            parts = PurePosixPath(out).parts
            if parts[0] in ("results", "reports") and len(parts) > 2 and parts[1] != config["profile"]:
                assert parts[1] in plan.SUITE_FOLDERS, out
    with pytest.raises(ConfigError, match="config key 'profile': 'stats' is the name of a folder"):
        load_config(overrides={"profile": "stats"})

"""The SLURM profile and bench.cluster (issue 14), without a cluster: sizes, partitions,
account, groups, the profile's plugin settings, and how command-line overrides combine with
the rules' own resources (Snakemake dry runs)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from bench import cluster
from bench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "workflows" / "profiles" / "slurm" / "config.yaml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "LTR_BENCH_CALIBRATION": "off"}
for _var in (cluster.ENV_ACCOUNT, cluster.ENV_PARTITION, cluster.ENV_GPU_PARTITION):
    ENV.pop(_var, None)
# the node scripts/slurm-local.sh declares on the 2-CPU development machine
SMALL_NODE_CPUS, SMALL_NODE_MEM_MB = 2, 23081
WORKFLOW_RULES = ("prepare", "train", "gbdt", "linear", "evaluate", "stats", "table", "figure", "loss_curves", "perf_scaling",
                  "freeze_dataset", "check_frozen", "compare_table")


# ----------------------------------------------------------------------------- bench.cluster


@pytest.mark.parametrize("rule", WORKFLOW_RULES)
def test_default_profile_jobs_fit_a_two_cpu_24gb_node(rule):
    res = cluster.job_resources("default", rule, threads=1, gpu=False, environ={})
    assert cluster.uncalibrated_size("default", rule)[0] <= SMALL_NODE_MEM_MB // 2  # two jobs side by side
    assert res["cpus_per_task"] <= SMALL_NODE_CPUS
    assert res["slurm_partition"] == "cpu" and "slurm_account" not in res and "mem_mb" not in res


def test_only_the_default_profile_has_static_sizes():
    # every other profile is sized from measurements (bench.costs.sizing); no 64 GB guesses
    assert cluster.uncalibrated_size("paper", "prepare") is None
    assert cluster.uncalibrated_size("mine", "train") is None
    assert cluster.job_resources("paper", "prepare", threads=4, gpu=True, environ={})["cpus_per_task"] == 4


def test_gpu_rules_go_to_the_gpu_partition_only_when_the_config_asks():
    env = {cluster.ENV_PARTITION: "short", cluster.ENV_GPU_PARTITION: "a100", cluster.ENV_ACCOUNT: "proj42"}
    for rule in cluster.GPU_RULES:
        assert cluster.job_resources("paper", rule, threads=1, gpu=True, environ=env)["slurm_partition"] == "a100"
        assert cluster.job_resources("paper", rule, threads=1, gpu=False, environ=env)["slurm_partition"] == "short"
    gbdt = cluster.job_resources("paper", "gbdt", threads=1, gpu=True, environ=env)
    assert gbdt["slurm_partition"] == "short" and gbdt["slurm_account"] == "proj42"
    assert cluster.job_resources("default", "train", threads=1, gpu=True, environ={})["slurm_partition"] == "gpu"


def test_account_from_the_environment_wins_over_the_discovered_one():
    assert cluster.job_resources("default", "train", threads=1, gpu=False, environ={},
                                 account="found")["slurm_account"] == "found"
    assert cluster.job_resources("default", "train", threads=1, gpu=False, environ={cluster.ENV_ACCOUNT: "env"},
                                 account="found")["slurm_account"] == "env"


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2"])
def test_bad_threads_names_the_config_key(threads):
    with pytest.raises(ConfigError, match="config key 'threads'"):
        cluster.job_resources("default", "train", threads=threads, gpu=False, environ={})


def test_groups_bundle_the_default_profile_and_keep_paper_training_runs_apart():
    assert {cluster.job_group("default", rule, gpu=False) for rule in WORKFLOW_RULES} == {"study"}
    assert cluster.job_group("paper", "train", gpu=True) is None and cluster.job_group("paper", "gbdt", gpu=True) is None
    assert cluster.job_group("paper", "evaluate", gpu=True) == cluster.job_group("paper", "table", gpu=True) == "summaries"
    assert cluster.job_group("other", "train", gpu=False) is None


def test_gpu_jobs_are_never_grouped_with_cpu_jobs():
    # a group job has one partition: Snakemake refuses mixed slurm_partition values in a group
    for profile in ("default", "paper", "other"):
        for rule in WORKFLOW_RULES:
            group = cluster.job_group(profile, rule, gpu=True)
            on_gpu = cluster.job_resources(profile, rule, threads=1, gpu=True, environ={})["slurm_partition"] == "gpu"
            assert not (on_gpu and group is not None), (profile, rule)


def _fake_sacctmgr(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "sacctmgr"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return f"{tmp_path}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.parametrize(("body", "expected"), [
    ('[ "$3 $4 $5" = "show user alice" ] && [ "$6" = format=DefaultAccount ] && printf "proj42\\n"', "proj42"),
    ('printf "\\n"', None),  # no default account
    ("echo 'sacctmgr: error: slurmdbd down' >&2; exit 1", None),
])
def test_default_account_asks_sacctmgr(tmp_path, monkeypatch, body, expected):
    monkeypatch.setenv("PATH", _fake_sacctmgr(tmp_path, body))
    cluster.default_account.cache_clear()
    try:
        assert cluster.default_account("alice") == expected
    finally:
        cluster.default_account.cache_clear()


def test_default_account_without_slurm_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    cluster.default_account.cache_clear()
    try:
        assert cluster.default_account("alice") is None
    finally:
        cluster.default_account.cache_clear()


# ----------------------------------------------------------------------------- the profile


def test_profile_has_no_mapping_a_command_line_option_would_replace():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    # per-rule sizes live in the rules; a profile's set-resources/set-threads/config is replaced
    # wholesale by the same option on the command line
    assert not {"set-resources", "set-threads", "config"} & profile.keys()


def test_profile_status_settings_recognise_cancelled_jobs():
    profile = yaml.safe_load(PROFILE.read_text())
    # sacct's "CANCELLED by <uid>" is not a failure to plugin 2.8.0; squeue's "CANCELLED" is
    assert profile["slurm-status-command"] == "squeue"
    # the plugin falls back to sacct when MinJobAge < 3 x init seconds; SLURM's default is 300 s
    assert 3 * profile["slurm-init-seconds-before-status-checks"] <= 300
    assert profile["retries"] >= 1


def test_profile_group_limits_are_per_job_and_fit_the_small_node():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["set-resource-scopes"] == {"cpus_per_task": "local", "mem_mb": "local"}
    assert profile["resources"]["cpus_per_task"] <= SMALL_NODE_CPUS
    assert profile["resources"]["mem_mb"] <= SMALL_NODE_MEM_MB


def _train_resources(*args: str) -> list[dict[str, str]]:
    proc = subprocess.run(["snakemake", "-n", "--nolock", "--forceall", "--profile", "workflows/profiles/slurm",
                           "listsize_table3", *args], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = []
    for block in re.split(r"\n(?=\s*(?:local)?rule \w+:)", proc.stdout):  # group members are indented
        if block.strip().startswith("rule train:"):
            res = re.search(r"resources: (.+)", block).group(1)
            out.append(dict(item.split("=", 1) for item in res.split(", ")))
    assert len(out) == 4, proc.stdout[-3000:]
    return out


def test_dry_run_gpu_partition_follows_the_config_and_survives_a_command_line_override():
    assert all(r["slurm_partition"] == "cpu" and r["gpu"] == "0" for r in _train_resources())
    gpu = _train_resources("--config", "gpu=True", "--set-resources", "train:runtime=99")
    # the override changes what it names, nothing else (a profile set-resources would be replaced)
    assert all(r["slurm_partition"] == "gpu" and r["gpu"] == "1" and r["runtime"] == "99" for r in gpu)
    assert all(r["mem_mb"] == str(cluster.SIZES["default"]["train"][0]) and r["cpus_per_task"] == "1" for r in gpu)


def test_a_paper_profile_cluster_run_without_measurements_stops_before_submitting(monkeypatch):
    """No calibration: the first job to size names what to run (no fixed 64 GB guess)."""
    from bench.config.validate import load_config
    from bench.costs import sizing

    monkeypatch.setenv("LTR_BENCH_CALIBRATION", "off")
    config = load_config(str(ROOT / "config" / "paper.yaml"), str(ROOT / "config" / "scale.yaml"))
    wildcards = {"dataset": "mslr-like", "fold": "Fold1"}
    with pytest.raises(sizing.NotCalibrated, match="ltr-bench plan"):
        sizing.request(config, "prepare", wildcards, 1, strict=True)
    # a local run requests nothing: the default profile's sizes only show in `snakemake -n`
    assert sizing.request(config, "prepare", wildcards, 2, strict=False) == {
        "mem_mb": 2 * cluster.SIZES["default"]["prepare"][0], "runtime": 2 * cluster.SIZES["default"]["prepare"][1]}

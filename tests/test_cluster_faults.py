"""bench.cluster_faults: the one line per SLURM job that stopped a cluster run.

The log excerpts are lines of real runs on the local cluster (scripts/slurm-local.sh,
snakemake 9.27 with plugin 2.8.0): a training job hung twice past its 1-minute limit, and a
group job cancelled with ``--retries 0``. The SLURM side (sacct/squeue) is given as data.
"""

from __future__ import annotations

import subprocess

from bench.cluster_faults import Ended, failed_jobs, failure_lines, query_states, with_resources

W = "/w/.snakemake/slurm_logs"
TRAIN = f"{W}/rule_train/pirank_ablation_syn-web_Fold1_pirank_ndcg_L20_0"
TIMEOUT_TWICE = f"""\
Job 4 has been submitted with SLURM jobid 11 (log: {W}/rule_prepare/syn-web_Fold1/11.log).
Job 7 has been submitted with SLURM jobid 12 (log: {TRAIN}/12.log).
Job 9 has been submitted with SLURM jobid 13 (log: {W}/rule_train/pirank_ablation_syn-web_Fold1_pirank_ndcg_L40_0/13.log).
Error in rule train:
    message: SLURM-job '12' failed, SLURM status is: 'TIMEOUT'. Detailed failure reason unavailable (status command \
is not 'sacct').For further error details see the cluster/cloud log and the log files of the involved rule(s).
    jobid: 7
    log: results/logs/runs/pirank_ablation/syn-web/Fold1/pirank_ndcg_L20/seed0.log, {TRAIN}/12.log (check log file(s) \
for error details)
Trying to restart job 7.
Job 7 has been submitted with SLURM jobid 16 (log: {TRAIN}/16.log).
Error in rule train:
    message: SLURM-job '16' failed, SLURM status is: 'TIMEOUT'.
    jobid: 7
    log: results/logs/runs/pirank_ablation/syn-web/Fold1/pirank_ndcg_L20/seed0.log, {TRAIN}/16.log (check log file(s) \
for error details)
"""
GROUP = f"{W}/group_study_evaluate_prepare_stats_table_train"
GROUP_CANCELLED = f"""\
Job 856eaa73-5e9e-5716-898a-88bd1293db46 has been submitted with SLURM jobid 21 (log: {GROUP}/21.log).
[Wed Nov 25 12:03:55 2026]
    message: Error in group study
    log: {GROUP}/21.log (check log file(s) for error details)
"""
RULES = ["prepare", "train", "evaluate", "stats", "table", "loss_curves", "compare_table"]
ARGV = ["--profile", "workflows/profiles/slurm", "listsize_table3", "--config", "gpu=True",
        "--set-resources", "train:runtime=1", "prepare:mem_mb=900"]


def test_only_jobs_whose_last_attempt_failed_are_reported():
    [(attempt, tries)] = failed_jobs(TIMEOUT_TWICE)
    assert (attempt.slurm_id, tries, attempt.key) == ("16", 2, "rule_train/pirank_ablation_syn-web_Fold1_pirank_ndcg_L20_0")
    retried_and_finished = TIMEOUT_TWICE.rsplit("Error in rule train:", 1)[0]
    assert failed_jobs(retried_and_finished) == []


def test_a_timeout_names_the_job_and_the_command_with_twice_the_time():
    [line] = failure_lines(TIMEOUT_TWICE, ARGV, RULES, lambda ids: {"16": Ended("TIMEOUT", 1, 3000)})
    assert "\n" not in line and line.startswith("ltr-bench: SLURM job 16 (rule_train/pirank_ablation_syn-web")
    assert "ended TIMEOUT, attempt 2" in line and f"log {TRAIN}/16.log" in line
    # the new value joins the command's own --set-resources list (a second option would replace it)
    assert line.endswith("asked 1 min; give it twice that: `snakemake --profile workflows/profiles/slurm "
                         "listsize_table3 --config gpu=True --set-resources prepare:mem_mb=900 train:runtime=2`")


def test_a_group_job_names_its_rules_and_out_of_memory_asks_for_more_memory():
    [line] = failure_lines(GROUP_CANCELLED, ARGV[:3], RULES, lambda ids: {"21": Ended("OUT_OF_MEMORY", 24, 6000)})
    assert "(group_study_evaluate_prepare_stats_table_train) ended OUT_OF_MEMORY, attempt 1" in line
    assert line.endswith("--set-resources evaluate:mem_mb=12000 prepare:mem_mb=12000 stats:mem_mb=12000 "
                         "table:mem_mb=12000 train:mem_mb=12000`")


def test_cancelled_node_failure_and_unknown_states_say_type_the_same_command():
    for state, words in (("CANCELLED", "cancelled"), ("NODE_FAIL", "its node failed"), ("SPECIAL_EXIT", "ended SPECIAL_EXIT")):
        [line] = failure_lines(GROUP_CANCELLED, ARGV[:3], RULES, lambda ids, s=state: {"21": Ended(s)})
        assert words in line and line.endswith("type the same command again: "
                                               "`snakemake --profile workflows/profiles/slurm listsize_table3`")
    # SLURM not answering: the log alone still names the job
    [line] = failure_lines(GROUP_CANCELLED, ARGV[:3], RULES, lambda ids: {})
    assert "SLURM job 21" in line and "ended FAILED" in line


def test_with_resources_adds_or_replaces():
    assert with_resources(["all"], {"train:runtime": "4"}) == ["all", "--set-resources", "train:runtime=4"]
    assert with_resources(["--set-resources", "train:runtime=2", "--cores", "2"], {"train:runtime": "4"}) == \
        ["--set-resources", "train:runtime=4", "--cores", "2"]


def test_query_states_reads_sacct_then_squeue(monkeypatch):
    monkeypatch.setattr("bench.cluster_faults.shutil.which", lambda tool: f"/usr/bin/{tool}")
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd[0])
        out = {"sacct": "21|CANCELLED by 0|24|6000M\n", "squeue": "22|TIMEOUT|1:00|3G\n"}[cmd[0]]
        return subprocess.CompletedProcess(cmd, 0, out, "")

    assert query_states(["21", "22"], run=run) == {"21": Ended("CANCELLED", 24, 6000), "22": Ended("TIMEOUT", 1, 3072)}
    assert calls == ["sacct", "squeue"]


# ----------------------------------------------------------------------------- a local run's failed jobs


def test_a_local_run_ends_with_each_failed_jobs_own_error(tmp_path, monkeypatch):
    from bench.cluster_faults import job_error_lines

    monkeypatch.chdir(tmp_path)
    logs = tmp_path / "results" / "logs"
    logs.mkdir(parents=True)
    (logs / "a0.log").write_text("epoch 1\nTraceback (most recent call last):\n  File \"x\", line 1\n"
                                 "ValueError: sigma must be > 0, got -1.0\n")
    (logs / "a1.log").write_text("Traceback (most recent call last):\nValueError: sigma must be > 0, got -1.0\n")
    (logs / "b.log").write_text("loading\nltr-bench check-reproduced: error: frozen baselines NOT reproduced: x\n")
    block = ("Error in rule {rule}:\n    message: None\n    jobid: 4\n    log: {log} (check log file(s) for error "
             "details)\n    shell:\n        ltr-bench ...\n        (command exited with non-zero exit code)\n")
    text = "".join(block.format(rule=rule, log=f"results/logs/{name}.log")
                   for rule, name in (("train", "a0"), ("train", "a1"), ("check_reproduced", "b"), ("stats", "gone")))
    assert job_error_lines(text) == [
        "ltr-bench: 2 train jobs failed: ValueError: sigma must be > 0, got -1.0 "
        "(log: results/logs/a0.log, results/logs/a1.log)",
        "ltr-bench: check_reproduced job failed: ltr-bench check-reproduced: error: frozen baselines NOT "
        "reproduced: x (log: results/logs/b.log)",
        "ltr-bench: stats job failed: no error line in its log (log: results/logs/gone.log)",
    ]
    assert job_error_lines("nothing failed\n") == []

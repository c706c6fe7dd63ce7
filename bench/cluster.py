"""What each workflow job asks a cluster for: memory, time, CPUs, account and partition.

The rules' ``resources:`` come from :func:`job_resources`, so a SLURM run needs no per-rule
mapping in the profile (a ``--set-resources`` given on the command line *replaces* a profile's
whole mapping; with the sizes here it only overrides what it names). Sizes depend on the study
profile (``config["profile"]``): the default profile's jobs fit a 2-CPU, 24 GB node (a few
hundred MB each); the paper profile's are sized for MSLR-WEB30K/Istella. An unknown profile
gets the paper sizes (safe, not small).

CPUs (``cpus_per_task``) equal the study config's ``threads``: the number of threads a job
computes with comes from the config (recorded in run.json) and never from the grant, so a
larger grant could only be wasted.

A retry of a job (the SLURM profile's ``retries``) asks ``attempt`` times the memory and time
(workflows/cluster.smk), so a job killed for exceeding either gets a second chance.

Site settings are environment variables of the Snakemake run (workflows/cluster.smk reads
them when it builds the jobs):

``LTR_BENCH_SLURM_ACCOUNT``        the account (``sbatch -A``); unset: the user's SLURM default
                                   account (``sacctmgr show user``), or none when that is empty
``LTR_BENCH_SLURM_PARTITION``      partition of CPU jobs (unset: ``cpu``)
``LTR_BENCH_SLURM_GPU_PARTITION``  partition of GPU jobs when the config says ``gpu: true``
                                   (unset: ``gpu``)
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from collections.abc import Mapping
from functools import lru_cache

from bench.errors import ConfigError

ENV_ACCOUNT = "LTR_BENCH_SLURM_ACCOUNT"
ENV_PARTITION = "LTR_BENCH_SLURM_PARTITION"
ENV_GPU_PARTITION = "LTR_BENCH_SLURM_GPU_PARTITION"
DEFAULT_PARTITION, DEFAULT_GPU_PARTITION = "cpu", "gpu"

#: rules that may use a GPU (``resources: gpu=1`` when the config says ``gpu: true``)
GPU_RULES = frozenset({"train", "perf_scaling"})
#: rules whose outputs GPU rules read, directly or through the tuning, and the tuning's two rules
#: (`tune`, `tuned_runs`), which train a method's runs on its run kind's device (a neural method's on
#: the GPU: workflows/cluster.smk, trainer_resources) and feed each other: a group must not hold
#: jobs before and after them, nor jobs of two partitions
FEED_GPU_RULES = frozenset({"prepare", "check_frozen", "tune", "tuned_runs", "gbdt"})

#: (mem_mb, runtime in minutes) of the default study profile's jobs per rule ("*": every other
#: rule), the static sizes of the one profile whose jobs are all seconds long. Every other job
#: is sized from its projected cost (bench.costs.sizing, from `ltr-bench plan`'s measurements
#: of the device it runs on); a cluster run of another profile without those measurements
#: stops and says how to take them (a fixed guess either wastes most of a node or never starts:
#: 64 GB requests pend forever on a 24 GB node).
#: A group job asks for the sum of the runtimes of the jobs it must run one after another
#: (its layers, each packed into the profile's per-job CPU limit), so the default profile's
#: jobs (seconds each: at most 15 s measured, the scaling benchmark) ask 2 min for a training or
#: GBDT run and 5 for the others: its largest group, 96 training runs on 2 CPUs, then asks
#: about 2.5 h, not 9 (it ran about 70 s on the local cluster).
#: Default profile: a training job's peak RSS is about 420 MB (measured, listsize_table3 on the
#: local cluster: torch + a 600-query synthetic fold); two jobs side by side fit a 2-CPU 24 GB
#: node with room to spare.
SIZES: dict[str, dict[str, tuple[int, int]]] = {
    "default": {"prepare": (2000, 5), "train": (3000, 2), "gbdt": (2000, 2), "perf_scaling": (4000, 5),
                "*": (2000, 5)},
}


#: Snakemake job groups per study profile (docs/cluster.md, "Knobs, in one place each"). The default
#: profile's jobs take seconds: submitting each (and starting Snakemake in it) costs more than
#: it computes, so a connected part of the DAG becomes one SLURM job ("study"), its jobs run
#: side by side inside it within the per-job limits of the profile's `resources`. The paper
#: profile keeps each training run its own (GPU, hours-long) job and groups only the short
#: summarising steps that follow one another.
GROUPS: dict[str, dict[str, str]] = {
    "default": dict.fromkeys(("prepare", "train", "gbdt", "linear", "evaluate", "stats", "table", "figure", "loss_curves",
                              "perf_scaling", "freeze_dataset", "check_frozen", "compare_table",
                              "computed_table", "toy_sort", "select", "selection_table", "quality_cost",
                              "check_reproduced", "tune", "tuned_runs", "tuning_summary", "ranking"), "study"),
    "paper": dict.fromkeys(("evaluate", "stats", "table", "figure", "compare_table", "computed_table", "select",
                            "selection_table", "quality_cost", "tuning_summary", "ranking"), "summaries"),
}


def uncalibrated_size(profile: str, rule: str) -> tuple[int, int] | None:
    """``(mem_mb, runtime minutes)`` of :data:`SIZES` for ``rule``; None for a profile without
    static sizes (its jobs must be sized from measurements)."""
    sizes = SIZES.get(profile)
    return None if sizes is None else sizes.get(rule, sizes["*"])


def job_group(profile: str, rule: str, *, gpu: bool) -> str | None:
    """The Snakemake group of ``rule``'s jobs under the study ``profile`` (None: its own jobs).

    With ``gpu`` (the config's flag) a GPU rule's jobs are never grouped: they go to another
    partition than the rest, and a group job has one partition (Snakemake refuses a group
    whose jobs ask for different ``slurm_partition`` values); nor are the rules that feed them
    (:data:`FEED_GPU_RULES`), as a group must not contain jobs both before and after a job
    outside it. An unknown profile is grouped like the paper profile.
    """
    if gpu and rule in GPU_RULES | FEED_GPU_RULES:
        return None
    return GROUPS.get(profile, GROUPS["paper"]).get(rule)


def job_resources(profile: str, rule: str, *, threads: int, gpu: bool,
                  environ: Mapping[str, str] | None = None, account: str | None = None) -> dict[str, int | str]:
    """Resources of one rule's jobs besides memory and time (:mod:`bench.costs.sizing`):
    ``cpus_per_task``, ``slurm_partition`` and, when known, ``slurm_account``.

    ``gpu`` is the config's ``gpu`` flag: GPU rules then go to the GPU partition (their
    ``gpu=1`` request is the rule's own resource). ``account`` is the account found when the
    environment names none (:func:`default_account`); it is only used as that fallback.
    """
    if not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"config key 'threads': expected an integer >= 1, got {threads!r}")
    env = os.environ if environ is None else environ
    on_gpu = gpu and rule in GPU_RULES
    partition = (env.get(ENV_GPU_PARTITION) or DEFAULT_GPU_PARTITION) if on_gpu else \
        (env.get(ENV_PARTITION) or DEFAULT_PARTITION)
    out: dict[str, int | str] = {"cpus_per_task": threads,
                                 "slurm_partition": partition}
    chosen = env.get(ENV_ACCOUNT) or account
    if chosen:
        out["slurm_account"] = chosen
    return out


@lru_cache(maxsize=1)
def default_account(user: str | None = None, timeout: float = 10.0) -> str | None:
    """The user's SLURM default account (``sacctmgr -n -P show user USER format=DefaultAccount``).

    None when SLURM's client is not installed, the command fails or times out, or the user has
    no default account. The executor plugin's own guess (``sacct ... | tail -1`` run without a
    shell) always fails, so it is not relied on.
    """
    exe = shutil.which("sacctmgr")
    if exe is None:
        return None
    user = user or getpass.getuser()
    try:
        out = subprocess.run([exe, "-n", "-P", "show", "user", user, "format=DefaultAccount"],
                             capture_output=True, text=True, timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[0] if lines else None

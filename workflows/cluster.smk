# Cluster resources of the non-local rules: memory and time from each job's projected cost
# (bench/costs/sizing.py: the job's data and the calibration of its device, `ltr-bench plan`),
# CPUs = config threads, account and partitions from LTR_BENCH_SLURM_* environment variables
# (bench/cluster.py).
# The rules carry them, so the SLURM profile needs no per-rule mapping that a command-line
# --set-resources would silently replace. Local runs ignore them (no --resources limits).
# (Keep the words r-u-l-e and a colon off one line here: `snakemake --lint` takes that for a
# rule and reports "Mixed rules and functions".)
from bench import cluster as _cluster
from bench.costs import sizing as _sizing


def _slurm_account(wildcards):
    """The account for sbatch -A: LTR_BENCH_SLURM_ACCOUNT, else (only when the jobs really go
    to SLURM: the executor is known once jobs are built, not while this file is parsed) the
    user's SLURM default account; "" lets the plugin decide (its own guess always fails)."""
    if os.environ.get(_cluster.ENV_ACCOUNT):
        return os.environ[_cluster.ENV_ACCOUNT]
    if getattr(workflow.executor_plugin, "name", None) == "slurm":
        return _cluster.default_account() or ""
    return ""


_SIZED = {}  # a job's request while Snakemake evaluates its resources: mem_mb and runtime from one projection


def _sized(name, what):
    """The job's `what` (mem_mb or runtime) from its projected cost (bench/costs/sizing.py); a
    cluster run stops before submitting a job it cannot size."""

    def request(wildcards, attempt):
        strict = workflow.is_main_process and not workflow.local_exec and not workflow.dryrun
        key = (name, tuple(wildcards.items()), attempt, strict)
        # the other resource's projection of this very evaluation, used once: a later evaluation of
        # the job projects again (a fold's shape is exact once it is prepared)
        sized, served = _SIZED.pop(key, (None, ()))
        if sized is None or what in served:
            try:
                sized, served = _sizing.request(config, name, dict(wildcards.items()), attempt, strict=strict), ()
            except ConfigError as exc:
                raise WorkflowError(str(exc)) from None
        if not served:
            _SIZED[key] = (sized, (what,))
        return sized[what]

    return request


def cluster_resources(name):
    try:
        sized = _cluster.job_resources(PROFILE, name, threads=config["threads"], gpu=bool(GPU))
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    # memory and time from the job's projected cost; a retry (profile: retries) of a job
    # killed for time or memory gets attempt x as much
    return {**sized, "mem_mb": _sized(name, "mem_mb"), "runtime": _sized(name, "runtime"),
            "slurm_account": _slurm_account}


def cluster_group(name):
    """The rule's job group (bench.cluster.job_group) for jobs that go to a cluster executor; None
    (no group) while Snakemake runs the jobs itself, dry runs included: a local run ignores
    groups, and a dry run would otherwise check each grouped job's whole upstream DAG (22 % of
    the paper profile's dry run). A dry run of a cluster run therefore lists its jobs ungrouped."""
    group = _cluster.job_group(PROFILE, name, gpu=bool(GPU))
    if group is None:
        return None
    return lambda wildcards: None if workflow.local_exec else group


def trainer_resources(name):
    """A tuning's job (tune, tuned_runs) trains its method's runs. With `gpu` set, a neural
    method's takes a GPU and the GPU partition, as its runs would (bench.costs.sizing.device_rule)."""
    sized = cluster_resources(name)
    if not GPU:
        return sized
    on_gpu = lambda w: _sizing.device_rule(config, name, dict(w.items())) in _cluster.GPU_RULES
    gpu_partition = _cluster.job_resources(PROFILE, "train", threads=config["threads"], gpu=True)["slurm_partition"]
    return {**sized, "gpu": lambda w: GPU if on_gpu(w) else 0,
            "slurm_partition": lambda w: gpu_partition if on_gpu(w) else sized["slurm_partition"]}

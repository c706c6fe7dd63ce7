"""What a workflow job asks a cluster for: memory and time from its projected cost.

The rules' ``resources:`` (``workflows/cluster.smk``) call :func:`request` with the job's rule,
wildcards and attempt. It projects the job (:mod:`bench.costs.model`: its config, the shape of
its fold -- exact once the fold is prepared, which Snakemake re-evaluates before it schedules
a job --, and the calibration of the device it runs on, :func:`bench.costs.calibration.
find_calibration`) and asks for::

    mem_mb  = ceil(MEM_MARGIN * projected peak [+ step])         x attempt
    runtime = ceil(max(MIN_MINUTES, TIME_MARGIN * projected s))  x attempt   (minutes)

``MEM_MARGIN`` (1.4) covers what a projection misses in the memory of a job: measured peaks
were 0.78-1.22x their projections on the scale profile (``reports/perf/scale.md``), so a
request lies between the peak and twice it; ``TIME_MARGIN`` (2.5)
covers the spread of step times on a shared node (jobs side by side on the 2-core reference
node took up to 1.8x their projection, measured alone) and a run that validates slower than
calibrated; ``MIN_MINUTES`` (10) covers a job's start-up and a busy filesystem. On a cluster (``strict``) the request adds
``step``, what the job's SLURM step holds besides the job -- the Snakemake process that runs it
there and the job server's own pages (measured, ``process`` in :mod:`bench.costs.measure`;
about 0.3 GB): the scheduler accounts the whole step, and a summarising job of 0.45 GB was
killed for it. A retry (the
SLURM profile's ``retries``) asks ``attempt`` times as much, so a job
killed for its memory or time gets a second chance.

A cluster run of a profile without static sizes (:data:`bench.cluster.SIZES`: only the default
profile's seconds-long jobs have them) stops before submitting anything when the device its
jobs run on has no calibration at all, with the command that takes it (``ltr-bench plan``).
A job the calibration cannot project -- a fold whose shape is unknown until prepared (LETOR,
Yahoo! Set 2, MSLR-WEB10K, Istella-S: no published split sizes), SinkProp's own protocol, a
method added since the plan -- gets the default profile's static sizes (a few GB, minutes:
what such LETOR-size data needs; a retry doubles them), and ``ltr-bench plan`` lists it under
"not projected"; run ``ltr-bench plan`` again once those folds are prepared to project them. A
local run (``--cores``) requests nothing and never stops here.
"""

from __future__ import annotations

import math
from typing import Any

from bench.cluster import GPU_RULES, uncalibrated_size
from bench.config import kinds, plan, tuning
from bench.config.jobs import Job
from bench.costs.calibration import Calibration, find_calibration
from bench.costs.model import PROCESS_SPEC, Context, Projection, project
from bench.errors import ConfigError

MEM_MARGIN = 1.4
TIME_MARGIN = 2.5
MIN_MINUTES = 10

#: rule -> (its main output, the wildcards it has), to rebuild a Job from a rule's wildcards
OUTPUTS = {"train": plan.RUN, "gbdt": plan.RUN, "linear": plan.RUN, "prepare": plan.PREPARED,
           "evaluate": plan.EVALUATED, "stats": plan.STATS, "tune": plan.TUNING, "tuned_runs": plan.TUNED_RUNS}

#: the static sizes of a job without a projection (see the module docstring)
FALLBACK_PROFILE = "default"

_contexts: dict[tuple[str, int, int], Context] = {}


class NotCalibrated(ConfigError):
    """A cluster job has no measurement to size it from."""


def device_kind(config: dict[str, Any], rule: str, wildcards: dict[str, Any] | None = None) -> str:
    """The device a rule's jobs run on: ``cuda`` for GPU rules when the config says ``gpu: true``
    (a tuning's job runs on its method's run kind's device: it trains the method's runs, :func:`device_rule`)."""
    return "cuda" if config.get("gpu") and device_rule(config, rule, wildcards) in GPU_RULES else "cpu"


def device_rule(config: dict[str, Any], rule: str, wildcards: dict[str, Any] | None = None) -> str:
    """The rule whose device and partition a job takes: its own, or for a tuning's job
    (:data:`bench.config.kinds.TUNING_RULES`) the rule of its method's runs (:func:`bench.config.plan.run_rule`)."""
    if rule in kinds.TUNING_RULES and wildcards:
        method = str(wildcards["method"])
        return plan.run_rule(config, str(wildcards["experiment"]), tuning.base_of_tuned(method) or method)
    return rule


def _context(config: dict[str, Any], kind: str) -> Context | None:
    """The projection context of ``kind`` jobs (one per config and device kind, reused)."""
    key = (kind, int(config["threads"]), id(config))
    if key not in _contexts:
        calibration = find_calibration(kind, int(config["threads"]))
        _contexts[key] = Context(config, calibration) if calibration is not None else None
    ctx = _contexts[key]
    if ctx is not None:  # an unprepared fold's shape is re-read: it is exact once prepared
        ctx.shapes = {k: v for k, v in ctx.shapes.items() if v is not None and v.origin == "prepared"}
    return ctx


def job_of(config: dict[str, Any], rule: str, wildcards: dict[str, Any]) -> Job:
    """The job of ``rule`` with ``wildcards``, its output in the config's profile (:func:`bench.config.plan.profiled`)."""
    w = {k: (int(v) if k == "seed" else v) for k, v in dict(wildcards).items()}
    pattern = OUTPUTS.get(rule)
    return Job(rule, plan.profiled(config, pattern).format(**w) if pattern else rule, w)


def projection(config: dict[str, Any], rule: str, wildcards: dict[str, Any]) -> tuple[Projection | None, Calibration | None]:
    """The job's projection on the calibration of its device (None, None without a calibration)."""
    ctx = _context(config, device_kind(config, rule, wildcards))
    if ctx is None:
        return None, None
    return project(ctx, job_of(config, rule, wildcards)), ctx.calibration


def request(config: dict[str, Any], rule: str, wildcards: dict[str, Any], attempt: int, *,
            strict: bool) -> dict[str, int]:
    """``{"mem_mb": ..., "runtime": ...}`` of one job (module docstring); ``strict``: a cluster
    run, where a job without measurements stops the run (:class:`NotCalibrated`)."""
    proj, calibration = projection(config, rule, wildcards)
    attempt = max(int(attempt), 1)
    if proj is not None and proj.complete and proj.host_bytes:
        step = _step_bytes(calibration) if strict else 0
        mem_mb = math.ceil((MEM_MARGIN * proj.host_bytes + step) / 2**20)
        minutes = math.ceil(max(MIN_MINUTES, TIME_MARGIN * proj.seconds / 60))
        return {"mem_mb": mem_mb * attempt, "runtime": minutes * attempt}
    sized_as = device_rule(config, rule, wildcards)  # a tuning: as one of its runs, times their number
    static = uncalibrated_size(config["profile"], sized_as)
    if static is None and strict and calibration is None:
        raise NotCalibrated(_not_calibrated(config, rule, wildcards, calibration, proj))
    mem_mb, minutes = static or uncalibrated_size(FALLBACK_PROFILE, sized_as)
    return {"mem_mb": mem_mb * attempt, "runtime": minutes * _runs_in(config, rule, wildcards) * attempt}


def _runs_in(config: dict[str, Any], rule: str, wildcards: dict[str, Any]) -> int:
    """How many runs the job trains one after another: a tuning's job its runs
    (:func:`bench.config.plan.tuning_job_runs`), any other 1."""
    if rule not in kinds.TUNING_RULES:
        return 1
    return len(plan.tuning_job_runs(config, rule, str(wildcards["experiment"]), str(wildcards["dataset"]),
                                    str(wildcards["method"])))


def _step_bytes(calibration: Calibration | None) -> int:
    """What a cluster job's step holds besides the job (the Snakemake process running it there and
    the job server's own pages): the calibration's ``process`` measurement, 0 when absent."""
    entry = None if calibration is None else calibration.get("process", PROCESS_SPEC)
    return int(entry.get("step_bytes", 0)) if entry else 0


def _not_calibrated(config: dict[str, Any], rule: str, wildcards: dict[str, Any], calibration, proj) -> str:
    kind = device_kind(config, rule, wildcards)
    if proj is not None and proj.unsized:
        return f"cannot size {rule} job {dict(wildcards)} for the cluster: {proj.unsized}"
    what = "no calibration" if calibration is None else f"the calibration {calibration.path} lacks measurements"
    where = "a GPU node (e.g. `srun --gres=gpu:1 ... ltr-bench plan ... --device cuda`)" if kind == "cuda" \
        else f"a node of the CPU partition (e.g. `srun -c {config['threads']} ltr-bench plan ...`)"
    return (f"cannot size {rule} job {dict(wildcards)} for the cluster: {what} for {kind} jobs with "
            f"{config['threads']} thread(s). Run `ltr-bench plan <the same targets> --configfile <the same files>` "
            f"on {where} first (it measures and caches what the plan needs in results/calibration/), or set "
            "LTR_BENCH_CALIBRATION to a calibration file")

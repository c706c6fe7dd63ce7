"""A study's cost before launch: every job of the targets with its projection, summed per target.

:func:`build_plan` takes the jobs of :func:`bench.config.jobs.target_jobs` and projects each
(:func:`bench.costs.model.project`); :func:`missing` is what the projections still lack, which
:func:`bench.costs.calibrate.calibrate` measures. :func:`render` prints the plan;
:func:`plan_json` is the per-job list of ``ltr-bench plan --json``; :func:`compare` sets two
plans' projections side by side (``--compare``: e.g. the fast calibration against the exact one).

Device-hours are the sum of the jobs' projected seconds on the calibrated device, one job at a
time; a run of ``--cores N`` (or N cluster jobs) divides the training part by at most N.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bench.config.jobs import Job, target_jobs
from bench.costs.calibration import Calibration, cpu_timed
from bench.costs.model import Context, Projection, gib, hours, project, size_text


@dataclass
class PlannedJob:
    job: Job
    projection: Projection | None  # None: a rule without a cost model (local steps, downloads)


def build_plan(config: dict[str, Any], targets: list[str], calibration: Calibration,
               ctx: Context | None = None) -> list[PlannedJob]:
    """Every job of ``targets`` with its projection on ``calibration``'s device."""
    ctx = ctx or Context(config, calibration)
    return [PlannedJob(job, project(ctx, job)) for job in target_jobs(config, targets)]


def missing(planned: list[PlannedJob]) -> dict[str, tuple[str, dict]]:
    out: dict[str, tuple[str, dict]] = {}
    for p in planned:
        if p.projection is not None:
            out.update(p.projection.missing)
    return out


# ----------------------------------------------------------------------------- summaries


@dataclass
class Summary:
    """One row of the plan: a target's jobs (or every job once, for the total)."""

    name: str
    jobs: int = 0
    runs: int = 0
    steps: int = 0
    rounds: int = 0
    seconds: float = 0.0
    peak_host: int = 0
    peak_gpu: int = 0
    disk: int = 0  # bytes the projected jobs leave on disk (prepared folds, runs' scores and metrics)
    unsized: int = 0
    bound: bool = False

    def add(self, p: PlannedJob) -> None:
        self.jobs += 1
        self.runs += len(p.job.runs) or p.job.is_run  # a tuning's job trains several runs
        proj = p.projection
        if proj is None:
            return
        if not proj.complete:
            self.unsized += len(p.job.runs) or p.job.is_run or proj.unsized is None
            return
        self.seconds += proj.seconds or 0.0
        self.peak_host = max(self.peak_host, proj.host_bytes or 0)
        self.peak_gpu = max(self.peak_gpu, proj.gpu_bytes or 0)
        self.disk += proj.disk_bytes or 0
        self.bound = self.bound or proj.bound
        self.steps += proj.steps
        self.rounds += proj.rounds


TUNING_ROW = "of which tuning"  # the summary row of what equal-budget tuning adds (bench.config.tuning)
TUNING_RULES = ("tune", "tuning_summary")


def is_tuning(job: Job) -> bool:
    """Whether a job is what tuning adds to the study: a tuning (every configuration's runs on the
    tuning fold, configuration 1 among them, and the choice) and a tuned table's summary; the
    chosen configuration's runs (rule ``tuned_runs``) stand where the untuned method's would."""
    return job.rule in TUNING_RULES


def summaries(planned: list[PlannedJob]) -> list[Summary]:
    """One row per target (a job shared by targets counts in each), the total (each job once) and,
    when the study tunes, the total's tuning part (:func:`is_tuning`)."""
    rows: dict[str, Summary] = {}
    total, tuned = Summary("total (each job once)"), Summary(TUNING_ROW)
    for p in planned:
        total.add(p)
        if is_tuning(p.job):
            tuned.add(p)
        for target in p.job.targets:
            rows.setdefault(target, Summary(target)).add(p)
    return [*rows.values(), total, *([tuned] if tuned.jobs else [])]


def device_hours(s: Summary) -> str:
    """A row's device-hours cell: ``unknown`` when none of its runs could be projected (a 0.0
    there would read as free), else the hours, ``*`` marking an upper bound.

    >>> device_hours(Summary("t", jobs=3, runs=2, unsized=2))
    'unknown '
    >>> device_hours(Summary("t", jobs=3, runs=2, seconds=5400.0, bound=True))
    '1.5*'
    """
    if unknown(s):
        return "unknown "
    return f"{s.seconds / 3600:,.1f}{'*' if s.bound else ' '}"


def unknown(s: Summary) -> bool:
    """Whether none of a row's runs could be projected (its hours and peak are then unknown)."""
    return bool(s.runs) and s.unsized >= s.runs and s.seconds == 0


def job_count(n: int, targets: list[str]) -> str:
    """The jobs counted, and the count ``snakemake -n`` prints for the same targets: one more per
    target, each named target being a rule of its own whose job only gathers its inputs.

    >>> job_count(204, ["all"])
    '204 jobs (`snakemake -n all` counts 205: one more per target, its own rule)'
    """
    named = targets or ["all"]
    return f"{n:,} jobs (`snakemake -n {' '.join(named)}` counts {n + len(named):,}: one more per target, its own rule)"


def device_line(calibration: Calibration, config: dict[str, Any]) -> str:
    """Which device and calibration file the projections are on; and, for a ``gpu: true`` study
    projected on a CPU, that its jobs are projected where they run on this machine."""
    dev = calibration.device
    line = (f"device: {dev.kind} {dev.name}" + (f", {dev.threads} thread(s) per job" if dev.kind == "cpu" else "")
            + f"; calibration: {calibration.path}" + ("" if calibration.entries else " (nothing measured yet)"))
    if config.get("gpu") and dev.kind == "cpu":
        line += ("\n`gpu: true` requests a GPU per training job on a cluster; this machine has none, so the jobs "
                 "are projected on its CPU, where they run here (--calibration FILE projects on a GPU node's)")
    return line


def render(planned: list[PlannedJob], calibration: Calibration, *, title: str, config: dict[str, Any]) -> str:
    """The plan as text: per target and total, the largest jobs, what is not projected."""
    dev = calibration.device
    lines = [title, device_line(calibration, config), ""]
    header = f"{'target':<22} {'jobs':>6} {'runs':>6} {'steps':>13} {'GBDT rounds':>12} {'device-hours':>13} " \
             f"{'peak/job':>10}{' GPU/job' if dev.kind == 'cuda' else ''} {'disk':>9} {'not projected':>14}"
    lines += [header, "-" * len(header)]
    for s in summaries(planned):
        gpu = f" {gib(s.peak_gpu):>8}" if dev.kind == "cuda" else ""
        lines.append(f"{s.name:<22} {s.jobs:>6,} {s.runs:>6,} {s.steps:>13,} {s.rounds:>12,} "
                     f"{device_hours(s):>13} {'unknown' if unknown(s) else gib(s.peak_host):>10}{gpu} "
                     f"{'unknown' if unknown(s) else size_text(s.disk):>9} {s.unsized:>14,}")
    rows = summaries(planned)
    if rows[-1].name == TUNING_ROW and rows[-2].seconds > 0:
        lines.append(f"{TUNING_ROW}: {rows[-1].seconds / rows[-2].seconds:.0%} of the device-hours (every tuned method's "
                     "configurations 2..B on the tuning fold, and the choosing steps)")
    lines += ["", "* an upper bound: early stopping (patience, GBDT early_stopping_rounds) may end runs sooner, or a "
              "fold's shape is an estimate or a bound before it is prepared.",
              "disk: what the projected jobs leave under results/ (prepared folds; each run's test scores and "
              "per-query metrics, a bound); downloads and the raw archives not included.", ""]
    projected = [p for p in planned if p.projection is not None and p.projection.complete]
    for label, key in (("longest jobs", lambda p: p.projection.seconds),
                       ("largest jobs (host memory)", lambda p: p.projection.host_bytes or 0)):
        lines.append(f"{label}:")
        for p in sorted(projected, key=key, reverse=True)[:5]:
            pr = p.projection
            lines.append(f"  {hours(pr.seconds):>8} {gib(pr.host_bytes):>9}  {p.job.rule:<8} {p.job.output}  "
                         f"({pr.work}{'; ' + pr.note if pr.note else ''})")
    unsized: dict[str, int] = {}
    for p in planned:
        pr = p.projection
        reason = None if pr is None else pr.unsized or ("measurements missing (without --no-calibrate they "
                                                         "are taken)" if pr.missing else None)
        if reason:
            unsized[f"{p.job.rule}: {reason}"] = unsized.get(f"{p.job.rule}: {reason}", 0) + 1
    if unsized:
        lines += ["", "not projected (on a cluster these jobs get the default profile's static sizes; "
                  "run ltr-bench plan again once their folds are prepared):"]
        lines += [f"  {n:>5,} x {reason}" for reason, n in sorted(unsized.items())]
    return "\n".join(lines) + "\n"


def plan_json(planned: list[PlannedJob], calibration: Calibration) -> dict[str, Any]:
    """The per-job list (``--json``): rule, output, device, projected seconds and peak MB."""
    jobs = []
    for p in planned:
        pr = p.projection
        jobs.append({
            "rule": p.job.rule, "output": p.job.output, "targets": p.job.targets, "wildcards": p.job.wildcards,
            "device": calibration.device.kind if pr is not None else None,
            "projected_seconds": None if pr is None or not pr.complete else round(pr.seconds, 1),
            "projected_peak_mb": None if pr is None or pr.host_bytes is None or not pr.complete
            else round(pr.host_bytes / 2**20),
            "projected_gpu_peak_mb": None if pr is None or pr.gpu_bytes is None else round(pr.gpu_bytes / 2**20),
            "projected_disk_mb": None if pr is None or pr.disk_bytes is None else round(pr.disk_bytes / 2**20, 3),
            "work": None if pr is None else pr.work, "upper_bound": None if pr is None else pr.bound,
            "note": None if pr is None else (pr.unsized or pr.note or None)})
    dev = calibration.device
    return {"device": dev.as_dict(), "calibration": str(calibration.path),
            "clock": "cpu" if cpu_timed(dev.kind, dev.threads) else "wall",
            "summaries": [s.__dict__ for s in summaries(planned)], "jobs": jobs}


def compare(planned: list[PlannedJob], other: dict[str, Any], *, label: str) -> str:
    """This plan's projections against ``other``'s (a ``--json`` plan of the same jobs): per rule,
    the jobs projected in both and the ratio this / other of their seconds and peak memory
    (min, median, max), as text."""
    theirs = {j["output"]: j for j in other.get("jobs", [])}
    ratios: dict[str, dict[str, list[float]]] = {}
    for p in planned:
        pr, them = p.projection, theirs.get(p.job.output)
        if pr is None or not pr.complete or them is None or not them.get("projected_seconds"):
            continue
        row = ratios.setdefault(p.job.rule, {"seconds": [], "peak": []})
        if pr.seconds:
            row["seconds"].append(pr.seconds / them["projected_seconds"])
        if pr.host_bytes and them.get("projected_peak_mb"):
            row["peak"].append(pr.host_bytes / 2**20 / them["projected_peak_mb"])
    lines = [f"this plan / {label}, per rule (jobs projected in both; min, median, max):"]
    for rule, row in sorted(ratios.items()):
        lines.append(f"  {rule:<10} {len(row['seconds']):>6,} jobs  time {_spread(row['seconds'])}  "
                     f"peak {_spread(row['peak'])}")
    if len(lines) == 1:
        lines.append("  no job is projected in both plans")
    return "\n".join(lines) + "\n"


def _spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    v = sorted(values)
    return f"{v[0]:.2f} {v[len(v) // 2]:.2f} {v[-1]:.2f}"

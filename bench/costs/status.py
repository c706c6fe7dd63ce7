"""How far a study is: done, running, interrupted and remaining jobs per target, and the time left.

``ltr-bench status`` reads only files: the jobs of the targets (:func:`bench.config.jobs.
target_jobs`), their outputs, and for runs the progress record a running trainer rewrites
at least once a minute (:mod:`bench.training.progress`). A job is

- **done** when its output exists (a run: ``run.json``; a prepared fold: ``meta.json``);
- **running** when its progress record was updated within ``stale_s`` (default 10 minutes:
  ten times the trainers' longest interval between two records);
- **interrupted** when a record stayed behind longer (the process was killed or failed; the
  next ``snakemake`` reruns it, resuming a neural run from its last checkpoint);
- **remaining** otherwise (not started; a summarising step that runs in seconds is never
  seen running).

Time left = the running runs' own ETA (their record's, less the time since it was written)
+ the projections (:mod:`bench.costs.model`) of the interrupted and remaining jobs, each rule's
projections scaled by how its finished runs compared with theirs (``run.json`` wall time /
projection, when any finished), on the calibration of the device the jobs run on
(:func:`bench.costs.calibration.find_calibration`). In device-hours: ``--cores N`` jobs side
by side take at least that divided by N.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.config.jobs import Job, target_jobs
from bench.costs.calibration import find_calibration
from bench.costs.model import Context, project
from bench.costs.sizing import device_kind
from bench.errors import IntegrityError
from bench.results import read_run_info

STATES = ("done", "running", "interrupted", "remaining")
STALE_S = 600.0


def done_marker(job: Job) -> Path:
    """The file whose presence means ``job`` finished."""
    if job.is_run:
        return Path(job.output) / "run.json"
    if job.rule == "prepare":
        return Path(job.output) / "meta.json"
    return Path(job.output)


@dataclass
class JobState:
    job: Job
    state: str
    eta_s: float | None = None  # running: the record's ETA now
    progress: str = ""  # running/interrupted: "step 1,200/100,000 (epoch 2/85)"
    wall_s: float | None = None  # done runs: run.json's wall time


def job_state(job: Job, now: float, stale_s: float) -> JobState:
    from bench.training.progress import read_progress

    if done_marker(job).exists():
        wall = None
        if job.is_run:
            try:
                wall = float(read_run_info(job.output)["wall_time_s"])
            except IntegrityError:  # checked against the run's digests: a damaged file stops with one line naming it
                raise
            except (OSError, ValueError, KeyError, TypeError):  # unreadable JSON or no wall time: not projected from
                wall = None
        return JobState(job, "done", wall_s=wall)
    record = read_progress(job.output) if job.is_run else None
    if record is None:
        return JobState(job, "remaining")
    age = now - float(record.get("updated", 0))
    where = f"{record.get('unit', 'step')} {record.get('done', 0):,}/{record.get('total', 0):,}"
    if record.get("epochs"):
        where += f" (epoch {record.get('epoch')}/{record['epochs']})"
    if age > stale_s:
        return JobState(job, "interrupted", progress=f"{where}, last record {age / 60:.0f} min ago")
    eta = record.get("eta_s")
    return JobState(job, "running", eta_s=None if eta is None else max(0.0, float(eta) - age), progress=where)


@dataclass
class TargetStatus:
    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    seconds_left: float = 0.0
    unknown: int = 0  # jobs left whose time cannot be projected


def study_status(config: dict[str, Any], targets: list[str], *, now: float | None = None,
                 stale_s: float = STALE_S) -> tuple[list[JobState], list[TargetStatus], dict[str, float]]:
    """States of every job, per-target rows (+ total) and each rule's measured/projected ratio."""
    now = time.time() if now is None else now
    states = [job_state(job, now, stale_s) for job in target_jobs(config, targets)]
    contexts: dict[str, Context | None] = {}

    def projected(job: Job) -> float | None:
        kind = device_kind(config, job.rule)
        if kind not in contexts:
            cal = find_calibration(kind, int(config["threads"]))
            contexts[kind] = None if cal is None else Context(config, cal)
        ctx = contexts[kind]
        proj = None if ctx is None else project(ctx, job)
        return proj.seconds if proj is not None and proj.complete else None

    ratios = _ratios(states, projected)
    rows: dict[str, TargetStatus] = {}
    total = TargetStatus("total (each job once)")
    for st in states:
        left = _left(st, projected, ratios)
        for row in [total, *(rows.setdefault(t, TargetStatus(t)) for t in st.job.targets)]:
            row.counts[st.state] += 1
            if left is None:
                row.unknown += st.state != "done" and (st.job.is_run or st.job.rule == "prepare")
            else:
                row.seconds_left += left
    return states, [*rows.values(), total], ratios


def _ratios(states: list[JobState], projected) -> dict[str, float]:
    """Per run rule: the finished runs' wall time / their projection (when any finished)."""
    sums: dict[str, list[float]] = {}
    for st in states:
        if st.state == "done" and st.wall_s is not None:
            p = projected(st.job)
            if p:
                acc = sums.setdefault(st.job.rule, [0.0, 0.0])
                acc[0] += st.wall_s
                acc[1] += p
    return {rule: measured / proj for rule, (measured, proj) in sums.items() if proj > 0}


def _left(st: JobState, projected, ratios: dict[str, float]) -> float | None:
    if st.state == "done":
        return 0.0
    if st.state == "running" and st.eta_s is not None:
        return st.eta_s
    p = projected(st.job)
    return None if p is None else p * ratios.get(st.job.rule, 1.0)


def render(states: list[JobState], rows: list[TargetStatus], ratios: dict[str, float], *, title: str,
           cores: int | None = None) -> str:
    from bench.costs.model import hours

    lines = [title, ""]
    header = f"{'target':<22} {'done':>6} {'running':>8} {'interrupted':>12} {'remaining':>10} {'time left':>10}"
    lines += [header, "-" * len(header)]
    for r in rows:
        left = hours(r.seconds_left) + ("+" if r.unknown else "")
        lines.append(f"{r.name:<22} {r.counts['done']:>6,} {r.counts['running']:>8,} {r.counts['interrupted']:>12,} "
                     f"{r.counts['remaining']:>10,} {left:>10}")
    total = rows[-1]
    lines.append("")
    if total.unknown:
        lines.append(f"+ {total.unknown} job(s) left without a projection (no calibration for them: `ltr-bench plan`)")
    if ratios:
        lines.append("finished runs took " + ", ".join(f"{rule} {r:.2f}x" for rule, r in sorted(ratios.items()))
                     + " their projection; the remaining ones are scaled by it")
    if cores:
        lines.append(f"at {cores} job(s) side by side: at least {hours(total.seconds_left / cores)} of wall-clock time")
    for label in ("running", "interrupted"):
        items = [s for s in states if s.state == label]
        if items:
            lines += ["", f"{label}:"]
            for s in items:
                eta = f", ETA {hours(s.eta_s)}" if s.eta_s is not None else ""
                lines.append(f"  {s.job.output}: {s.progress}{eta}")
    return "\n".join(lines) + "\n"

"""How far a study is: done, running, interrupted and remaining jobs per target, and the time left.

``ltr-bench status`` reads only files: the jobs of the targets (:func:`bench.config.jobs.
target_jobs`), their outputs, and for runs the progress record a running trainer rewrites
at least once a minute (:mod:`bench.atomic.progress`). A job is

- **done** when its output is this study's and up to date (:func:`up_to_date`), as Snakemake
  would find it: the output exists (a run: ``run.json``; a prepared fold: ``meta.json``),
  every job it needs is done and none is newer, and where the output records the settings it
  was made with, they are this config's (a run's run config digest, a prepared fold's options). So
  another profile's outputs at the same paths (the default study's tables, the scale profile's
  statistics) do not count: the runs they were made from are not this profile's;
- **running** when its progress record was updated within ``stale_s`` (default 10 minutes:
  ten times the trainers' longest interval between two records);
- **interrupted** when a record stayed behind longer (the process was killed or failed; the
  next ``snakemake`` reruns it, resuming a neural run from its last checkpoint);
- **remaining** otherwise.

A summarising job's own settings (a table's caption, a figure's spec) are not compared:
Snakemake reruns it when they change, in seconds; so a summary that needs no other job of the
study and records nothing of its settings (the toy sorting table, the coverage page) counts as
done when it exists.

Time left, in device time (one job at a time; ``--cores N`` side by side take at least that
divided by N) = the running runs' own ETA (their record's, less the time since it was
written) + the projection (:mod:`bench.costs.model`, the plan's model) of every other job not
done, each rule's projections scaled by how its finished runs compared with theirs
(``run.json`` wall time / projection, when any finished). The projections are on the
calibration ``ltr-bench plan`` projects with on this machine (``ltr-bench status`` passes it:
the config's ``device`` resolved here and its ``threads``, or ``--calibration FILE``), so that
before anything ran the total is the plan's; without one (a library call) on the calibration
of the device each rule runs on (:func:`bench.costs.calibration.find_calibration`, as the
cluster requests are sized). A target with a job that has no
projection (no calibration yet, a fold whose shape is unknown until prepared, a run kind
without a cost model) shows its time left as unknown, with the reasons, never the sum of the
others alone. Local steps (:data:`bench.costs.model.LOCAL_RULES`: the report,
downloads) are not device time and count 0.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.config import kinds, plan
from bench.config.jobs import Job, target_jobs
from bench.config.run import run_config_digest
from bench.costs.calibration import Calibration, find_calibration
from bench.costs.model import LOCAL_RULES, Context, Projection, project
from bench.costs.sizing import device_kind
from bench.errors import ConfigError, IntegrityError
from bench.results import read_record, read_run_info

STATES = ("done", "running", "interrupted", "remaining")
STALE_S = 600.0
NO_CALIBRATION = "no calibration for its device yet"


def done_marker(job: Job) -> Path:
    """The file whose presence means ``job`` finished."""
    if job.is_run:
        return Path(job.output) / "run.json"
    if job.rule == "prepare":
        return Path(job.output) / "meta.json"
    return Path(job.output)


def _run_is_this_studys(config: dict[str, Any], job: Job) -> bool:
    """The run was made with this study's run config: the digest its ``run.json`` records
    (``run_config_sha256``) is that of the planned run config. A run of the same name made under
    another profile's settings (or before runs recorded the digest) is not this study's. (A tuned
    method's runs are its tuning's jobs', whose records say when they are done.)"""
    w = job.wildcards
    try:
        recorded = read_run_info(job.output).get("run_config_sha256")
        wanted = plan.run_config_digest(config, w["experiment"], w["dataset"], w["method"])
    except IntegrityError:  # checked against the run's digests: a damaged file stops with one line naming it
        raise
    except (OSError, ValueError, ConfigError):  # unreadable: not this study's until rerun
        return False
    return recorded == wanted


def _tuning_is_this_studys(config: dict[str, Any], job: Job) -> bool:
    """A tuning's record is this study's when it compared this study's configurations (names and
    settings); a chosen configuration's record when it names this study's runs and the run config
    its tuning chose. (Snakemake compares the jobs' params, which carry every run config; a record
    written under another budget, space or table is not this study's.)"""
    w = job.wildcards
    try:
        record = read_record(job.output)
        if job.rule == "tune":
            spec = plan.tune_spec(config, w["experiment"], w["dataset"], w["method"])
            wanted = [(p["name"], p["settings"]) for p in spec["methods"][w["method"]]["points"]]
            return [(p["name"], p["settings"]) for p in record["methods"][w["method"]]["points"]] == wanted
        spec = plan.tuned_runs_spec(config, w["experiment"], w["dataset"], w["method"])
        return record["runs"] == [r["dir"] for r in spec["runs"]] and \
            record["run_config_sha256"] == run_config_digest(spec["configs"][record["chosen"]])
    except IntegrityError:
        raise
    except (OSError, ValueError, KeyError, TypeError, ConfigError):  # unreadable or another study's: not done
        return False


def _prepared_is_this_studys(config: dict[str, Any], job: Job) -> bool:
    from bench.data.prepare import resolve_options
    from bench.data.registry import REGISTRY

    spec = config["datasets"][job.wildcards["dataset"]]
    entry = REGISTRY.get(spec["source"])
    try:
        meta = json.loads(done_marker(job).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    wanted = json.loads(json.dumps(resolve_options(spec.get("options"), bool(entry is not None and entry.synthetic))))
    return meta.get("options") == wanted and meta.get("fold") == job.wildcards["fold"]


def _scaling_is_this_studys(config: dict[str, Any], job: Job) -> bool:
    """The scaling timings' CSV rows name their batch, features, steps and list size."""
    import csv

    spec = config["figures"]["scaling_figure"]
    try:
        with open(job.output, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        return bool(rows) and all(
            int(r["batch"]) == spec["batch_lists"] and int(r["n_features"]) == spec["n_features"]
            and int(r["steps"]) == spec["steps"] and int(r["L"]) in spec["sizes"] for r in rows)
    except (OSError, KeyError, ValueError):
        return False


#: rule -> whether an existing output records this config's settings (the others are compared
#: by their inputs only)
RECORDS = {**dict.fromkeys(kinds.rules(), _run_is_this_studys), "prepare": _prepared_is_this_studys,
           **dict.fromkeys(("tune", "tuned_runs"), _tuning_is_this_studys),
           "perf_scaling": _scaling_is_this_studys}


def up_to_date(config: dict[str, Any], jobs: list[Job]) -> dict[str, float]:
    """Output -> its marker's mtime, for every job whose output is this study's and up to date
    (module docstring). ``jobs`` in :func:`~bench.config.jobs.target_jobs`' order (every job
    after those it needs)."""
    done: dict[str, float] = {}
    for job in jobs:
        try:
            mtime = done_marker(job).stat().st_mtime
        except OSError:
            continue
        inputs = [done.get(n) for n in job.needs]
        if any(t is None or t > mtime for t in inputs):
            continue
        check = RECORDS.get(job.rule)
        if check is None or check(config, job):
            done[job.output] = mtime
    return done


@dataclass
class JobState:
    job: Job
    state: str
    eta_s: float | None = None  # running: the record's ETA now
    progress: str = ""  # running/interrupted: "step 1,200/100,000 (epoch 2/85)"
    wall_s: float | None = None  # done runs: run.json's wall time


def job_state(job: Job, now: float, stale_s: float, *, done: bool) -> JobState:
    from bench.atomic.progress import read_progress

    if done:
        wall = None
        if job.is_run:
            try:
                wall = float(read_run_info(job.output)["wall_time_s"])
            except IntegrityError:  # checked against the run's digests: a damaged file stops with one line naming it
                raise
            except (OSError, ValueError, KeyError, TypeError):  # unreadable JSON or no wall time: not projected from
                wall = None
        return JobState(job, "done", wall_s=wall)
    record, where = read_progress(job.output) if job.is_run else None, ""
    if job.runs:  # a tuning's job: the run in progress is the one with a record (a finished run clears its own)
        found = [(i, r) for i, r in enumerate(map(read_progress, job.runs)) if r is not None]
        if found:
            index, record = max(found, key=lambda item: float(item[1].get("updated", 0)))
            where = f"run {index + 1}/{len(job.runs)}, "
    if record is None:
        return JobState(job, "remaining")
    age = now - float(record.get("updated", 0))
    where += f"{record.get('unit', 'step')} {record.get('done', 0):,}/{record.get('total', 0):,}"
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
    seconds_left: float = 0.0  # of the jobs left that are projected
    projected: int = 0  # jobs left (not local) with a projection
    bound: bool = False  # some of it is an upper bound (early stopping)
    unknown: Counter = field(default_factory=Counter)  # "rule: why" -> jobs left without a projection


class _Projector:
    """Projections of jobs on ``calibration`` (the plan's: every job on one device), or without it
    on the calibration of each job's device (one context per device kind)."""

    def __init__(self, config: dict[str, Any], calibration: Calibration | None = None) -> None:
        self.config = config
        self.contexts: dict[str, Context | None] = {}
        self.cache: dict[str, Projection | None] = {}
        self.calibration = calibration

    def kind(self, job: Job) -> str:
        return "plan" if self.calibration is not None else device_kind(self.config, job.rule, job.wildcards)

    def __call__(self, job: Job) -> Projection | None:
        if job.output not in self.cache:
            kind = self.kind(job)
            if kind == "plan" and kind not in self.contexts:
                assert self.calibration is not None
                self.contexts[kind] = Context(self.config, self.calibration) if self.calibration.entries else None
            if kind not in self.contexts:
                cal = find_calibration(kind, int(self.config["threads"]))
                self.contexts[kind] = None if cal is None else Context(self.config, cal)
            ctx = self.contexts[kind]
            self.cache[job.output] = None if ctx is None else project(ctx, job)
        return self.cache[job.output]

    def why_not(self, job: Job) -> str | None:
        """None when ``job`` is projected (or local), else why not."""
        if job.rule in LOCAL_RULES:
            return None
        proj = self(job)
        if self.contexts[self.kind(job)] is None:
            return NO_CALIBRATION
        if proj is None:
            return "no cost model"
        if proj.unsized:
            return proj.unsized
        return None if proj.complete else "measurements missing from the calibration"


def study_status(config: dict[str, Any], targets: list[str], *, now: float | None = None,
                 stale_s: float = STALE_S, calibration: Calibration | None = None,
                 ) -> tuple[list[JobState], list[TargetStatus], dict[str, float]]:
    """States of every job, per-target rows (+ total) and each rule's measured/projected ratio;
    projections on ``calibration`` when given (an empty one: none yet), else on each rule's
    device's (module docstring)."""
    now = time.time() if now is None else now
    jobs = target_jobs(config, targets)
    done = up_to_date(config, jobs)
    states = [job_state(job, now, stale_s, done=job.output in done) for job in jobs]
    projector = _Projector(config, calibration)
    ratios = _ratios(states, projector)
    rows: dict[str, TargetStatus] = {}
    total = TargetStatus("total (each job once)")
    for st in states:
        left, bound, why = _left(st, projector, ratios)
        for row in [total, *(rows.setdefault(t, TargetStatus(t)) for t in st.job.targets)]:
            row.counts[st.state] += 1
            if why is not None:
                row.unknown[f"{st.job.rule}: {why}"] += 1
            else:
                row.seconds_left += left
                row.bound = row.bound or bound
                row.projected += st.state != "done" and st.job.rule not in LOCAL_RULES
    return states, [*rows.values(), total], ratios


def _ratios(states: list[JobState], projector: _Projector) -> dict[str, float]:
    """Per run rule: the finished runs' wall time / their projection (when any finished)."""
    sums: dict[str, list[float]] = {}
    for st in states:
        if st.state == "done" and st.wall_s is not None:
            p = projector(st.job)
            if p is not None and p.complete and p.seconds:
                acc = sums.setdefault(st.job.rule, [0.0, 0.0])
                acc[0] += st.wall_s
                acc[1] += p.seconds
    return {rule: measured / proj for rule, (measured, proj) in sums.items() if proj > 0}


def _left(st: JobState, projector: _Projector, ratios: dict[str, float]) -> tuple[float, bool, str | None]:
    """``(seconds left, an upper bound?, why there is no projection or None)`` of one job."""
    if st.state == "done" or st.job.rule in LOCAL_RULES:
        return 0.0, False, None
    if st.state == "running" and st.eta_s is not None:
        return st.eta_s, False, None
    why = projector.why_not(st.job)
    if why is not None:
        return 0.0, False, why
    p = projector(st.job)
    assert p is not None and p.seconds is not None
    return p.seconds * ratios.get(st.job.rule, 1.0), p.bound, None


def render(states: list[JobState], rows: list[TargetStatus], ratios: dict[str, float], *, title: str,
           cores: int | None = None, device: str = "") -> str:
    """The status as text; ``device``: the line naming the calibration projected on (as the plan's)."""
    from bench.costs.model import hours

    lines = [title, *([device] if device else []), ""]
    header = f"{'target':<22} {'done':>6} {'running':>8} {'interrupted':>12} {'remaining':>10} {'time left':>10}"
    lines += [header, "-" * len(header)]
    for r in rows:
        left = "unknown" if r.unknown else hours(r.seconds_left) + ("*" if r.bound else "")
        lines.append(f"{r.name:<22} {r.counts['done']:>6,} {r.counts['running']:>8,} {r.counts['interrupted']:>12,} "
                     f"{r.counts['remaining']:>10,} {left:>10}")
    total = rows[-1]
    lines += ["", "time left: device time of the jobs not done, one at a time"
              + (" (* an upper bound: early stopping may end runs sooner)" if any(r.bound for r in rows) else "")
              + "; downloads and local steps not included"]
    if total.unknown:
        n = sum(total.unknown.values())
        lines.append(f"unknown: {n:,} job(s) left have no projection, so their targets' time left is unknown "
                     f"(the {total.projected:,} projected job(s) left: {hours(total.seconds_left)}):")
        lines += [f"  {k:>5,} x {why}" for why, k in sorted(total.unknown.items())]
        if any(NO_CALIBRATION in why for why in total.unknown):
            lines.append("  `ltr-bench plan <the same targets and config files>` calibrates this machine (minutes)")
    if ratios:
        lines.append("finished runs took " + ", ".join(f"{rule} {r:.2f}x" for rule, r in sorted(ratios.items()))
                     + " their projection; the remaining ones are scaled by it")
    if cores and not total.unknown:
        lines.append(f"at {cores} job(s) side by side: at least {hours(total.seconds_left / cores)} of wall-clock time")
    for label in ("running", "interrupted"):
        items = [s for s in states if s.state == label]
        if items:
            lines += ["", f"{label}:"]
            for s in items:
                eta = f", ETA {hours(s.eta_s)}" if s.eta_s is not None else ""
                lines.append(f"  {s.job.output}: {s.progress}{eta}")
    return "\n".join(lines) + "\n"

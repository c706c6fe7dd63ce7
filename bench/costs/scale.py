"""``ltr-bench plan-check``: a finished study's jobs, measured, beside their projection and request.

The scale profile (``config/scale.yaml``) runs the paper study's code paths on an MSLR-sized
fold in minutes; this suite reads what that run left and writes ``reports/perf/scale.md``:

- per job: measured wall time, CPU seconds and peak memory, from the job server's log (``job
  server: pid N: exit 0, W s, peak P MB, cpu C s``, :mod:`bench.jobserver`; a run without the
  server falls back to its ``run.json``, without CPU seconds), beside the projection of
  ``ltr-bench plan --json`` (``--plan``) and the memory and time the workflow requests for it
  (:func:`bench.costs.sizing.request`, with the fold prepared, as Snakemake sizes a job before
  it schedules it);
- the goals, printed as met or MISSED (never asserted here; ``tests/test_scale_profile.py``
  asserts them): projections within :data:`RATIO_BOUNDS` of the measurement (times of jobs
  projected at 10 s or more: shorter ones are start-up; the job's CPU seconds when the plan
  timed CPU seconds, :func:`bench.costs.measure.clock_for`, else its wall time: the wall
  time of a job on a shared machine is longer by the share of a core it got, which the report
  shows beside it with the load average), every memory request between
  the measured peak and twice it, a training peak <= 1.5 x (prepared fold + model state: float32
  weights, gradients, Adam's two moments and the best epoch's copy, 5 x 4 bytes a parameter),
  a GBDT peak <= 2 x the prepared fold;
- with ``--sacct FILE`` (``sacct -P -n -o JobID,JobName,Comment,State,MaxRSS,ReqMem,Elapsed,TimelimitRaw``
  of a cluster run), the cluster's own accounting of each job;
- with ``--paper-plan FILE`` (``ltr-bench plan all --configfile config/paper.yaml --json``), the
  projected cost of the whole paper study on the calibrated device.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from bench.atomic import write_text
from bench.errors import UsageError
from bench.perf.common import SuiteResult, Target, loadavg, md_table, now_utc, targets_section
from bench.results import RUN_JSON_FILE, read_run_info

#: the command-line option naming each rule's main output (to match a log line to a job)
OUTPUT_OPTIONS = {"prepare": "--out", "train": "--out", "gbdt": "--out", "linear": "--out", "evaluate": "--out",
                  "stats": "--out", "table": "--md", "figure": "--png", "loss-curves": "--out"}
COMMAND_RULES = {"loss-curves": "loss_curves"}
RATIO_BOUNDS = (0.67, 1.5)
#: a job projected to take less than this is start-up (imports, reading a file) more than its
#: work: its time is printed but not held to RATIO_BOUNDS
MIN_TIMED_S = 10.0
TRAIN_PEAK_GOAL, GBDT_PEAK_GOAL = 1.5, 2.0
STATE_BYTES_PER_PARAMETER = 5 * 4


def job_server_records(paths: list[Path]) -> dict[str, dict[str, float]]:
    """Main output -> ``{"seconds", "peak_mb", "cpu_s"}`` of every job the servers ran and reaped
    (``cpu_s`` None in a log written before the server logged it)."""
    started: dict[str, str] = {}
    out: dict[str, dict[str, float]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            m = re.match(r"job server: pid (\d+): ltr-bench (.*)$", line)
            if m and not m.group(2).startswith("exit "):
                argv = m.group(2).split()  # options with spaces (JSON) come after the output's
                option = OUTPUT_OPTIONS.get(argv[0] if argv else "")
                if option and option in argv:
                    started[m.group(1)] = argv[argv.index(option) + 1]
                continue
            m = re.match(r"job server: pid (\d+): exit (-?\d+), ([\d.]+) s, peak (\d+) MB(?:, cpu ([\d.]+) s)?", line)
            if m and m.group(1) in started and m.group(2) == "0":
                out[started.pop(m.group(1))] = {"seconds": float(m.group(3)), "peak_mb": float(m.group(4)),
                                                "cpu_s": None if m.group(5) is None else float(m.group(5))}
    return out


def _match(job: dict[str, Any], records: dict[str, dict[str, float]]) -> dict[str, float] | None:
    output = job["output"]  # a table's is its .md, as the log's --md
    if output in records:
        return records[output]
    if job["rule"] in ("train", "gbdt", "linear") and (Path(output) / RUN_JSON_FILE).exists():
        info = read_run_info(output)  # checked against the run's digests
        return {"seconds": float(info["wall_time_s"]), "peak_mb": info["peak_memory"]["host_max_rss_bytes"] / 2**20,
                "cpu_s": None}
    return None


def _fold_bytes(job: dict[str, Any]) -> int | None:
    w = job.get("wildcards") or {}
    if "dataset" not in w or "fold" not in w:
        return None
    folder = Path("results/prepared") / w["dataset"] / w["fold"]
    files = list(folder.glob("*/*.npy"))
    return sum(f.stat().st_size for f in files) if files else None


def _n_params(job: dict[str, Any]) -> int | None:
    if job["rule"] != "train" or not (Path(job["output"]) / RUN_JSON_FILE).exists():
        return None
    return read_run_info(job["output"])["result"].get("n_parameters")


def _ratio(measured: float | None, projected: float | None) -> float | None:
    return None if not measured or projected is None or projected <= 0 else measured / projected


def report_scale(args: argparse.Namespace) -> SuiteResult:
    from bench.config.validate import load_config
    from bench.costs import sizing

    plan = json.loads(Path(args.plan).read_text(encoding="utf-8"))
    config = load_config(*args.configfile)
    logs = [Path(p) for p in args.job_log] if args.job_log else sorted(Path("results/logs").glob("job-server*.log"))
    records = job_server_records(logs)
    rows, targets, missed = [], [], []
    for job in plan["jobs"]:
        if job["projected_peak_mb"] is None and job["rule"] not in sizing.OUTPUTS:
            continue
        measured = _match(job, records)
        if measured is None:
            continue
        req = sizing.request(config, job["rule"], job["wildcards"], 1, strict=False)
        wall_ratio = _ratio(measured["seconds"], job["projected_seconds"])
        cpu_ratio = _ratio(measured["cpu_s"], job["projected_seconds"])
        t_ratio = cpu_ratio if plan.get("clock") == "cpu" and measured["cpu_s"] is not None else wall_ratio
        m_ratio = _ratio(measured["peak_mb"], job["projected_peak_mb"])
        req_ratio = req["mem_mb"] / measured["peak_mb"]
        fold = _fold_bytes(job)
        goal = ""
        if fold and job["rule"] == "train" and _n_params(job) is not None:
            limit = TRAIN_PEAK_GOAL * (fold + STATE_BYTES_PER_PARAMETER * _n_params(job)) / 2**20
            goal = f"{measured['peak_mb'] / limit * TRAIN_PEAK_GOAL:.2f}x (fold+state) <= {TRAIN_PEAK_GOAL}"
            _check(missed, measured["peak_mb"] <= limit, f"{job['output']}: training peak {goal}")
        elif fold and job["rule"] == "gbdt":
            ratio = measured["peak_mb"] * 2**20 / fold
            goal = f"{ratio:.2f}x fold <= {GBDT_PEAK_GOAL}"
            _check(missed, ratio <= GBDT_PEAK_GOAL, f"{job['output']}: GBDT peak {goal}")
        for name, r in (("time", t_ratio if (job["projected_seconds"] or 0) >= MIN_TIMED_S else None),
                        ("peak", m_ratio)):
            if r is not None:
                _check(missed, RATIO_BOUNDS[0] <= r <= RATIO_BOUNDS[1], f"{job['output']}: measured/projected {name} {r:.2f}")
        _check(missed, 1.0 <= req_ratio <= 2.0, f"{job['output']}: memory request / peak {req_ratio:.2f}")
        _check(missed, req["runtime"] * 60 >= measured["seconds"], f"{job['output']}: time request below the job's time")
        rows.append([job["rule"], job["output"].replace("results/", ""), f"{measured['seconds']:.1f}",
                     _num(measured["cpu_s"], ".1f"), _num(job["projected_seconds"], ".1f"), _r(wall_ratio),
                     _r(cpu_ratio), f"{measured['peak_mb']:.0f}",
                     _num(job["projected_peak_mb"], ".0f"), _r(m_ratio), str(req["mem_mb"]), f"{req_ratio:.2f}",
                     str(req["runtime"]), goal])
    if not rows:
        raise UsageError(f"no job of {args.plan} was found in {[str(p) for p in logs]} or in run.json files: "
                         "run the study first (see the module docstring)")
    targets.append(Target("every goal of the scale profile", f"{len(rows)} jobs, {len(missed)} missed",
                          "none missed", not missed))
    md = _markdown(plan, rows, missed, targets, args)
    write_text(args.out, md)
    print(md)
    return SuiteResult("scale", md, targets, 0, [Path(args.out)])


def _check(missed: list[str], ok: bool, what: str) -> None:
    if not ok:
        missed.append(what)


def _num(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def _r(r: float | None) -> str:
    return "" if r is None else f"{r:.2f}"


def _markdown(plan: dict[str, Any], rows: list[list[str]], missed: list[str], targets: list[Target],
              args: argparse.Namespace) -> str:
    dev = plan["device"]
    lines = ["# The scale profile: measured vs projected vs requested", "",
             f"- {now_utc()}; device {dev['kind']} {dev['name']}, {dev['threads']} thread(s) per job; load average "
             f"{loadavg()}; calibration {plan['calibration']}",
             "- measured: the job server's record of each job (wall time, CPU seconds and peak RSS of the job's "
             "process); projected: `ltr-bench plan --json` before the run, in "
             + ("CPU seconds (the time on an idle core; a job's wall time on a shared machine is longer by the "
                "share of a core it got: wall / CPU)" if plan.get("clock") == "cpu" else "wall-clock seconds")
             + "; request: what the workflow asks a cluster for (`bench.costs.sizing`), memory in MB, time in minutes",
             "",
             md_table(["rule", "job", "wall s", "CPU s", "projected s", "wall/proj.", "CPU/proj.", "peak MB",
                       "projected MB", "ratio", "request MB", "request/peak", "request min", "peak goal"], rows)]
    if missed:
        lines += ["", "## Missed", "", *(f"- {m}" for m in missed)]
    if args.sacct:
        lines += ["", "## The same study through SLURM (sacct)", "", *_sacct_section(Path(args.sacct),
                                                                                    Path(args.slurm_logs))]
    if args.paper_plan:
        lines += ["", "## The paper study's projected cost on this device", "", *_paper_section(Path(args.paper_plan))]
    return "\n".join(lines + targets_section(targets)) + "\n"


def _sacct_section(path: Path, logs: Path) -> list[str]:
    """One row per SLURM job: what it ran (from its job server's log), state, request, the
    largest step's MaxRSS (PSS on the local cluster), elapsed time and limit."""
    lines = [line.split("|") for line in path.read_text(encoding="utf-8").splitlines() if line.count("|") >= 8]
    steps: dict[str, float] = {}
    for parts in lines:
        if "." in parts[0] and parts[4]:
            steps[parts[0].split(".")[0]] = max(steps.get(parts[0].split(".")[0], 0.0), _mb(parts[4]))
    rows = []
    for parts in lines:
        if "." in parts[0]:
            continue
        log = logs / f"job-server-slurm{parts[0]}.log"
        # a job the server ran, or one it told to run itself (PYTHONPATH names another checkout)
        ran = re.findall(r"(?:pid \d+|not served \(.*?\)): ltr-bench (\S+)", log.read_text(encoding="utf-8")) \
            if log.exists() else []
        rows.append([parts[0], " + ".join(ran) or "?", parts[3], parts[5], _num(steps.get(parts[0]), ".0f"),
                     parts[6], parts[7]])
    return ["Each job as the scheduler accounted it: the memory it asked for (from its projection), the "
            "largest MaxRSS of its steps (on the local cluster of scripts/slurm-local.sh the sum of the job's "
            "processes' proportional set sizes) and its time limit.", "",
            md_table(["SLURM job", "commands", "state", "requested", "MaxRSS MB (largest step)", "elapsed",
                      "time limit (min)"], rows)]


def _mb(text: str) -> float:
    m = re.match(r"([\d.]+)([KMGT]?)", text)
    if not m:
        return 0.0
    scale = {"": 1 / 2**20, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 2**20}[m.group(2)]
    return float(m.group(1)) * scale


def _paper_section(path: Path) -> list[str]:
    paper = json.loads(path.read_text(encoding="utf-8"))
    rows = [[s["name"], f"{s['jobs']:,}", f"{s['runs']:,}", f"{s['steps']:,}", f"{s['rounds']:,}",
             f"{s['seconds'] / 3600:,.0f}" + ("*" if s["bound"] else ""), f"{s['peak_host'] / 2**30:.1f}",
             f"{s['unsized']:,}"] for s in paper["summaries"]]
    return [md_table(["target", "jobs", "runs", "steps", "GBDT rounds", "device-hours", "peak GiB/job",
                      "not projected"], rows),
            "", "\\* an upper bound (early stopping may end runs sooner; a fold's shape estimated before it is prepared)."]

"""``ltr-bench plan`` (a study's cost before launch) and ``ltr-bench status`` (how far it is, :mod:`bench.costs.status`).

Both read the study config as the workflow does: ``config/default.yaml``, then each
``--configfile`` merged over it, then ``--config KEY=VALUE`` (the value read as YAML, as
Snakemake reads it), validated against the schema.

``ltr-bench plan TARGET... [--configfile F...] [--device auto|cpu|cuda] [--threads N]
[--calibration FILE] [--no-calibrate] [--exact] [--json FILE] [--compare FILE]`` prints per
target and in total the runs, steps, GBDT rounds, projected device-hours and the largest
per-job peak memory, the longest and largest jobs, and what cannot be projected and why;
``--json`` writes every job with its projection. Projections come from measurements on this
machine's device (:mod:`bench.costs.measure`), cached in ``results/calibration/``; what is
missing is measured first (:mod:`bench.costs.calibrate`: a few minutes for the paper study,
one progress line with an ETA per measurement; Ctrl-C stops it with one line and keeps what
was measured; ``--no-calibrate`` leaves those jobs unprojected). ``--calibration FILE``
projects with another machine's measurements (e.g. a GPU node's, copied here): then nothing
is measured. ``--exact`` measures every job at its own shape (the slow calibration the fast
one is checked against); ``--compare FILE`` prints this plan's projections over another's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.errors import UsageError


def read_config(configfiles: list[str], overrides: list[str]) -> dict[str, Any]:
    """The study config as the workflow reads it (module docstring)."""
    import yaml

    from bench.config.validate import load_config

    extra: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--config: expected KEY=VALUE, got {item!r}")
        extra[key] = yaml.safe_load(value)
    for path in configfiles:
        if not Path(path).is_file():
            raise UsageError(f"--configfile: {path}: not found")
    return load_config(*configfiles, overrides=extra or None)


def this_device(requested: str, threads: int):
    """The calibration device of this machine for ``--device`` (the suite's --device policy)."""
    from bench.costs.calibration import Device
    from bench.provenance import cpu_name
    from bench.training.device import resolve_device

    dev = resolve_device(requested, on_missing_cuda=None)
    if dev.type == "cuda":
        import torch

        return Device("cuda", torch.cuda.get_device_name(dev), threads)
    return Device("cpu", cpu_name(), threads)


def _cli_plan(args) -> int:
    """``ltr-bench plan``; an interrupt (Ctrl-C, or SIGTERM from ``kill`` or a scheduler) stops it
    with one line, the measurement under way killed and the measurements taken kept."""
    import signal

    held: list = []  # the calibration being filled, named by the interrupt's line
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _plan(args, held)
    except KeyboardInterrupt:
        # name the cache only once a measurement was saved in it (an interrupt before that wrote nothing)
        saved = held and held[0].path is not None and held[0].path.exists()
        kept = f"; {len(held[0].entries)} measurement(s) kept in {held[0].path}, the same command resumes" \
            if saved else "; nothing was measured yet, so nothing was written"
        print(f"ltr-bench plan: interrupted{kept}", file=sys.stderr, flush=True)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _plan(args, held: list) -> int:
    import functools
    import json
    import time

    from bench.atomic import write_json
    from bench.costs import plan as planning
    from bench.costs.model import Context

    started = time.monotonic()
    say = functools.partial(print, file=sys.stderr, flush=True)  # progress: never silent for long
    say(f"ltr-bench plan: reading the config and listing the jobs of {' '.join(args.targets)} ...")
    config = read_config(args.configfile, args.config)
    calibration = plan_calibration(args, config)
    held.append(calibration)
    planned = planning.build_plan(config, args.targets, calibration, Context(config, calibration, exact=args.exact))
    needed = planning.missing(planned)
    say(f"ltr-bench plan: {len(planned):,} jobs listed in {time.monotonic() - started:.0f} s; "
        + (f"{len(needed)} measurement(s) missing" if needed else "every measurement cached")
        + f" ({planning.device_line(calibration, config).splitlines()[0]})")
    if needed and not args.no_calibrate and not args.calibration:
        from bench.costs import calibrate, measure

        say(f"calibrating {len(needed)} measurement(s) on {calibration.device.kind} "
            f"({calibration.device.name}) into {calibration.path} ...")
        measure.preload()
        done = calibrate.calibrate(calibration, needed, log=lambda m: print(m, file=sys.stderr, flush=True))
        print(f"calibrated {done.done} measurement(s) in {calibrate.clock_text(done.elapsed())}",
              file=sys.stderr, flush=True)
        planned = planning.build_plan(config, args.targets, calibration, Context(config, calibration, exact=args.exact))
    title = (f"Plan of {' '.join(args.targets)} (profile {config['profile']}"
             + (f"; {' '.join(args.configfile)}" if args.configfile else "")
             + ("; exact calibration" if args.exact else "") + f"): {planning.job_count(len(planned), args.targets)}")
    sys.stdout.write(planning.render(planned, calibration, title=title, config=config))
    if args.compare:
        try:
            other = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--compare: {args.compare}: {exc}") from exc
        sys.stdout.write("\n" + planning.compare(planned, other, label=args.compare))
    if args.json:
        write_json(args.json, planning.plan_json(planned, calibration))
    return 0


def plan_calibration(args, config: dict[str, Any]):
    """The calibration ``ltr-bench plan`` projects with for ``args`` (``--calibration FILE``, else
    this machine's device for the config's ``device`` and ``threads``; empty when not measured yet)."""
    from bench.costs.calibration import load_calibration, open_calibration

    if args.calibration:
        return load_calibration(args.calibration)
    threads = getattr(args, "threads", 0) or config["threads"]
    return open_calibration(this_device(getattr(args, "device", None) or config["device"], threads),
                            args.calibration_dir)


def _cli_status(args) -> int:
    import os

    from bench.costs import plan as planning
    from bench.costs import status
    from bench.costs.calibration import ENV_FILE

    config = read_config(args.configfile, args.config)
    # the plan's calibration, unless the workflow's own choice is forced ($LTR_BENCH_CALIBRATION)
    calibration = None if os.environ.get(ENV_FILE) and not args.calibration else plan_calibration(args, config)
    states, rows, ratios = status.study_status(config, args.targets, stale_s=args.stale_minutes * 60,
                                               calibration=calibration)
    title = (f"Status of {' '.join(args.targets)} (profile {config['profile']}"
             + (f"; {' '.join(args.configfile)}" if args.configfile else "") + f"): "
             f"{planning.job_count(len(states), args.targets)}")
    sys.stdout.write(status.render(states, rows, ratios, title=title, cores=args.cores,
                                   device="" if calibration is None else planning.device_line(calibration, config)))
    return 0


def _cli_plan_check(args) -> int:
    from bench.costs.scale import report_scale

    return report_scale(args).rc


def _add_config_arguments(p) -> None:
    p.add_argument("targets", nargs="*", default=["all"], metavar="TARGET",
                   help="all (default), a table or figure name, freeze, compare")
    p.add_argument("--configfile", nargs="+", default=[], metavar="FILE",
                   help="config files merged over config/default.yaml, as snakemake --configfile")
    p.add_argument("--config", nargs="+", default=[], metavar="KEY=VALUE", help="as snakemake --config")


def register_cli(subparsers) -> None:
    """Add ``ltr-bench plan`` and ``ltr-bench status``."""
    p = subparsers.add_parser("plan", help="a study's cost before launch: runs, device-hours, peak memory per job",
                              description="Print, per target and in total, the runs, optimiser steps, GBDT "
                              "rounds, projected device-hours and the largest per-job peak memory; the longest "
                              "and largest jobs; what cannot be projected and why. Projections come from "
                              "measurements on this machine's device, cached in results/calibration/ (missing "
                              "ones are measured first). --calibration FILE projects with another machine's "
                              "measurements, e.g. a GPU node's.")
    _add_config_arguments(p)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="device to calibrate and project for (default: the config's `device`)")
    p.add_argument("--threads", type=int, default=0, help="compute threads per job (default: the config's `threads`)")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="project with this calibration file (e.g. measured on a GPU node); measure nothing")
    p.add_argument("--calibration-dir", default="results/calibration", metavar="DIR",
                   help="where measurements are cached (default: results/calibration)")
    p.add_argument("--no-calibrate", action="store_true", help="measure nothing; jobs lacking measurements are not projected")
    p.add_argument("--json", default=None, metavar="FILE", help="write every job with its projection as JSON")
    p.add_argument("--exact", action="store_true",
                   help="measure every job at its own shape (5 %% and 10 %% of each fold, each model with each "
                   "loss): the slow calibration the default one is checked against")
    p.add_argument("--compare", default=None, metavar="FILE",
                   help="also print this plan's projections / those of FILE (a --json plan), per rule")
    p.set_defaults(func=_cli_plan)
    s = subparsers.add_parser("status", help="how far a study is: done/running/remaining jobs, time left",
                              description="Done, running, interrupted and remaining jobs per target and the "
                              "projected time left, from the outputs, the running runs' progress records and "
                              "the calibration (bench/costs/status.py).")
    _add_config_arguments(s)
    s.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="device to project for, as `ltr-bench plan --device` (default: the config's `device`)")
    s.add_argument("--calibration", default=None, metavar="FILE",
                   help="project with this calibration file (e.g. a GPU node's), as `ltr-bench plan --calibration`")
    s.add_argument("--calibration-dir", default="results/calibration", metavar="DIR",
                   help="where `ltr-bench plan` cached its measurements (default: results/calibration)")
    s.add_argument("--stale-minutes", type=float, default=10.0,
                   help="a progress record older than this marks an interrupted run (default 10)")
    s.add_argument("--cores", type=int, default=None, help="also print the wall-clock time left at N jobs side by side")
    s.set_defaults(func=_cli_status)
    c = subparsers.add_parser("plan-check", help="a finished study's jobs: measured time and peak vs projection and request",
                              description="Read the job server's log (or run.json) of a finished study and set "
                              "each job's measured wall time and peak memory beside the projection of `ltr-bench "
                              "plan --json` and the cluster request; writes markdown (bench/costs/scale.py).")
    c.add_argument("--plan", required=True, help="ltr-bench plan --json of the run's targets and config")
    c.add_argument("--configfile", nargs="+", default=[], help="the run's config files (for the requests)")
    c.add_argument("--job-log", nargs="+", default=None, help="job server logs (default: results/logs/job-server*.log)")
    c.add_argument("--sacct", default=None, help="sacct output of a cluster run of the same study")
    c.add_argument("--slurm-logs", default="results/logs",
                   help="the cluster run's results/logs (its job-server-slurm<jobid>.log files name each job's commands)")
    c.add_argument("--paper-plan", default=None, help="ltr-bench plan --json of the full paper study")
    c.add_argument("--out", default="reports/perf/scale.md", help="the markdown written (default: reports/perf/scale.md)")
    c.set_defaults(func=_cli_plan_check)

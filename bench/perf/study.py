"""``ltr-bench perf study``: where a Snakemake run spent its time.

Reads every Snakemake ``benchmark:`` file under ``--root`` (default
``results/benchmarks``; tab-separated, columns ``s``, ``h:m:s``, ``max_rss`` (MB),
``max_vms``, ..., ``mean_load``, ``cpu_time``; one row per repeat, the first is used) and
prints the slowest ``--top`` jobs (job = the file's path below the root, without
``.tsv``), the sum of job seconds, and the wall-clock span of the run: Snakemake writes a
benchmark file when its job ends, so the span is ``max(mtime) - min(mtime - s)`` over the
files, an estimate that assumes the files come from one invocation (the markdown says so).
A missing root or an empty one is reported as such (exit status 0: nothing to summarise
is not a failure of this suite).

Under the workflow's warm job server (:mod:`bench.jobserver`) Snakemake times the client
process: ``seconds`` is the job's wall-clock time, but ``max RSS`` and ``CPU time`` are the
client's (a few MB, a fraction of a second); each run's own peak memory is in its
``run.json``. The markdown says so.

The workflow's own overhead -- CPU seconds of the Snakemake main process itself, which no
benchmark file holds -- is reported when the run recorded it (``snakemake-main.json`` under
``--root``, written by ``workflows/lifecycle.smk`` through :mod:`bench.overhead`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from bench import overhead
from bench.atomic import write_text
from bench.errors import UsageError
from bench.perf.common import SuiteResult, fmt, md_table, now_utc


def read_benchmarks(root: Path) -> pd.DataFrame:
    """One row per benchmark file: job, seconds, max_rss (MB), cpu_time, end (mtime, s)."""
    rows = []
    for path in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        try:
            frame = pd.read_csv(path, sep="\t")
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: not a Snakemake benchmark file ({exc})") from exc
        if "s" not in frame.columns or frame.empty:
            raise UsageError(f"{path}: not a Snakemake benchmark file (no 's' column or no row)")
        first = frame.iloc[0]
        rows.append({"job": path.relative_to(root).with_suffix("").as_posix(), "seconds": float(first["s"]),
                     "max_rss_mb": float(first["max_rss"]) if "max_rss" in frame and pd.notna(first["max_rss"]) else None,
                     "cpu_time": float(first["cpu_time"]) if "cpu_time" in frame and pd.notna(first["cpu_time"]) else None,
                     "end": path.stat().st_mtime})
    return pd.DataFrame(rows, columns=["job", "seconds", "max_rss_mb", "cpu_time", "end"])


def summarise(frame: pd.DataFrame, top: int) -> tuple[pd.DataFrame, float, float]:
    """The ``top`` slowest jobs, the sum of job seconds, and the estimated wall-clock span."""
    slowest = frame.sort_values(["seconds", "job"], ascending=[False, True]).head(top)
    span = float(frame["end"].max() - (frame["end"] - frame["seconds"]).min()) if len(frame) else 0.0
    return slowest, float(frame["seconds"].sum()), span


def report_study(args: argparse.Namespace) -> SuiteResult:
    if args.top < 1:
        raise UsageError("--top must be >= 1")
    root = Path(args.root)
    frame = read_benchmarks(root)
    lines = ["# Workflow time (Snakemake benchmark files)", "", f"- generated {now_utc()} by `ltr-bench perf study` "
             f"from `{root}`"]
    if frame.empty:
        lines.append(f"- no benchmark files found under `{root}` (run the workflow first)")
    else:
        slowest, total, span = summarise(frame, args.top)
        lines += [
            f"- {len(frame)} jobs; sum of job wall-clock {total:.1f} s; run span {span:.1f} s (first job start to "
            "last job end, estimated from file mtimes minus the job's seconds; assumes one invocation)",
            "",
            f"Slowest {len(slowest)} jobs:",
            "",
            "With the warm job server (`results/logs/job-server.log`), max RSS and CPU time are the waiting "
            "client's, not the job's: see each run's `run.json` for its peak memory.",
            "",
            md_table(["job", "seconds", "max RSS (MB)", "CPU time (s)", "share of job time"],
                     [[r.job, f"{r.seconds:.2f}", fmt(r.max_rss_mb), fmt(r.cpu_time), f"{100 * r.seconds / total:.1f}%"]
                      for r in slowest.itertuples()]),
        ]
    lines += overhead_lines(overhead.read(root / overhead.FILE_NAME))
    text = "\n".join(lines) + "\n"
    write_text(args.out, text)
    print(text)
    print(f"wrote {args.out}")
    return SuiteResult("study", text, [], 0, [Path(args.out)])


def overhead_lines(main: dict | None) -> list[str]:
    """The Snakemake main process's own CPU (a :func:`bench.overhead.read` record), or nothing."""
    if main is None:
        return []
    wall = "unknown" if main["wall_s"] is None else f"{main['wall_s']:.1f} s"
    return ["", "## The Snakemake main process (the workflow's own overhead)", "",
            f"- CPU {main['cpu_s']:.1f} s (user {main['user_s']:.1f} s + system {main['system_s']:.1f} s) over "
            f"{wall} of wall-clock, {main['jobs']} jobs, run ended {main['ended']}: `{' '.join(main['argv'])}`",
            "- its own threads only (scheduling, input functions, benchmark sampling); its jobs and the job "
            "server are other processes"]


def add_study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=Path("results/benchmarks"), help="Snakemake benchmark directory")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--out", type=Path, default=Path("reports/perf/study.md"))


__all__ = ["add_study_arguments", "overhead_lines", "read_benchmarks", "report_study", "summarise"]

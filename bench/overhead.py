"""The workflow's own overhead: CPU time of the Snakemake main process itself.

Snakemake's ``benchmark:`` files time each job; nothing times the process that parses the
Snakefile, builds the DAG, schedules the jobs, runs their input functions and samples their
benchmarks. ``workflows/lifecycle.smk`` calls :func:`record` when a run ends (``onsuccess`` /
``onerror``, main process only, not for dry runs: Snakemake runs no hooks there) and writes
``results/benchmarks/snakemake-main.json``: the process's user and system CPU seconds from
``getrusage(RUSAGE_SELF)`` (its own threads included, its jobs and the job server, which are
child processes, not), its wall-clock seconds since the process started, the number of jobs it
ran and its command line. ``ltr-bench perf study`` reads it back (:func:`read`).

Measured at the hook, which Snakemake calls after the last job and before it prints the log
file's name and exits: what comes after is a few milliseconds. Linux only for the wall clock
(process start time from ``/proc``, None elsewhere). The Snakefile imports this module: it
imports nothing heavy (Snakemake itself only inside :func:`coalesce_scheduler_wakeups`).

Where the main process's CPU went (docs/performance.md, its section on the workflow's own
overhead): mostly into Snakemake's scheduler loop waking up far more often than jobs start or
end, then into sampling the jobs for their ``benchmark:`` files every half second.
:func:`coalesce_scheduler_wakeups` removes the first, :func:`sample_benchmarks_every` spaces
out the second (the workflow calls both while the Snakefile is parsed).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

from bench.atomic import write_text
from bench.errors import UsageError

__all__ = ["BENCHMARK_SAMPLE_S", "FILE_NAME", "coalesce_scheduler_wakeups", "read", "record", "sample_benchmarks_every",
           "wall_seconds"]

FILE_NAME = "snakemake-main.json"  # under the benchmark root (results/benchmarks)
# seconds between two samples of a job for its benchmark file, over a job's first 30 samples
# (Snakemake: 0.5 s; 30 s after that, unchanged)
BENCHMARK_SAMPLE_S = 2.0
FIELDS = ("user_s", "system_s", "cpu_s", "wall_s", "jobs", "argv", "ended")


def wall_seconds(pid: int | None = None) -> float | None:
    """Seconds since process ``pid`` (default: this one) started; None without ``/proc``."""
    try:
        stat = Path(f"/proc/{pid or os.getpid()}/stat").read_text()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name may contain spaces
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return max(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


def record(path: str | os.PathLike, jobs: int, argv: list[str] | None = None) -> dict:
    """Write this process's CPU and wall-clock seconds to ``path`` (JSON); return the record."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall = wall_seconds()
    out = {"user_s": round(usage.ru_utime, 3), "system_s": round(usage.ru_stime, 3),
           "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
           "wall_s": None if wall is None else round(wall, 3), "jobs": int(jobs),
           "argv": list(sys.argv if argv is None else argv),
           "ended": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    write_text(path, json.dumps(out, indent=2, sort_keys=True) + "\n")
    return out


def read(path: str | os.PathLike) -> dict | None:
    """The record at ``path``; None when there is none. A malformed file is a UsageError."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        out = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a record of the Snakemake main process ({exc})") from exc
    if not isinstance(out, dict) or any(k not in out for k in FIELDS):
        raise UsageError(f"{path}: not a record of the Snakemake main process (fields {', '.join(FIELDS)})")
    return out


def _coalesced(original):
    """``JobScheduler._schedule_reevalutation`` with at most one wake-up pending per scheduler."""

    def schedule_reevaluation(self, delay):
        if not hasattr(self, "_open_jobs"):  # not the scheduler this was written for: leave it be
            return original(self, delay)
        lock = self.__dict__.setdefault("_ltr_bench_wakeup_lock", threading.Lock())
        with lock:
            if self.__dict__.get("_ltr_bench_wakeup_pending"):
                return None  # the pending one re-runs the loop within `delay`; that run re-arms if needed
            self._ltr_bench_wakeup_pending = True

        def wake():
            with lock:
                self._ltr_bench_wakeup_pending = False
            self._open_jobs.release()

        timer = threading.Timer(delay, wake)
        timer.daemon = True  # a pending wake-up never holds the finished process back
        timer.start()
        return None

    schedule_reevaluation.ltr_bench_coalesced = True
    return schedule_reevaluation


def coalesce_scheduler_wakeups() -> bool:
    """Keep at most one of the job scheduler's timed wake-ups pending; True when in place.

    Snakemake (9.27.1, as measured; the rate limiter dates from 8.17) limits job submissions
    per timespan (default ``--max-jobs-per-timespan 100/1s``) and so, after every pass of its
    scheduling loop that leaves ready jobs waiting, starts a timer thread that runs the loop
    again one timespan later. Each such pass starts another timer, and every finished job adds
    a pass: timers pile up (45-115 threads alive at a time in the default study), and each
    second the loop runs that many times -- re-reading every ready job's input sizes, with no
    core free to start one -- for most of the main process's CPU time. One pending timer gives
    the same re-evaluation (a pass within one timespan of any that asked for it; the pass it
    runs asks again if it still has to) at a fraction of the cost. Jobs still start the moment
    a core frees up: a finished job wakes the loop itself. A Snakemake without this method is
    left untouched (False).
    """
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    original = getattr(JobScheduler, "_schedule_reevalutation", None)  # sic: Snakemake's spelling
    if original is None:
        return False
    if not getattr(original, "ltr_bench_coalesced", False):
        JobScheduler._schedule_reevalutation = _coalesced(original)
    return True


def sample_benchmarks_every(seconds: float = BENCHMARK_SAMPLE_S) -> bool:
    """Sample running jobs for their ``benchmark:`` files every ``seconds`` (Snakemake: 0.5 s).

    For a job with a ``benchmark:`` file, Snakemake's main process starts a thread that, every
    half second over the job's first 30 samples (every 30 s after that), lists the job's
    processes -- psutil scans every process of the machine for that -- and reads their memory,
    I/O and CPU counters; each sample starts a new thread. On the 2-core machine that was most
    of the main process's CPU once the scheduler's wake-ups were coalesced. The file's wall-clock
    seconds (``s``, ``h:m:s``: what ``ltr-bench perf study`` ranks jobs by) do not depend on
    sampling; its sampled columns (``max_rss``, ``cpu_time``, ``mean_load``, I/O) are those of
    the job server's waiting client during local runs anyway, each run's own peak memory is in
    its ``run.json``, and no table or figure reads them. True when in place; False (nothing
    changed) for a Snakemake without the setting.
    """
    if seconds <= 0:
        raise ValueError(f"benchmark sampling interval must be positive, got {seconds}")
    try:
        from snakemake import benchmark
    except ImportError:
        return False
    if not hasattr(benchmark, "BENCHMARK_INTERVAL_SHORT"):
        return False
    benchmark.BENCHMARK_INTERVAL_SHORT = float(seconds)
    return True

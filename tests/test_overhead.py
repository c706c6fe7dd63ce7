"""The workflow's own overhead (bench/overhead.py): the Snakemake main process's CPU record,
its report in ``ltr-bench perf study``, and the scheduler's coalesced wake-ups. No CPU or
wall-time thresholds: the record is checked against ``getrusage`` around it, the wake-ups by
counting them.
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time

import pytest

from bench import overhead
from bench.errors import UsageError
from bench.perf import study as perf_study


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def test_record_is_this_process_cpu_and_reads_back(tmp_path):
    path = tmp_path / "benchmarks" / overhead.FILE_NAME
    before = _cpu()
    out = overhead.record(path, jobs=7, argv=["snakemake", "--cores", "2", "all"])
    after = _cpu()
    assert before - 0.001 <= out["cpu_s"] <= after + 0.001
    assert out["cpu_s"] == pytest.approx(out["user_s"] + out["system_s"], abs=0.002)
    assert out["wall_s"] is not None and out["wall_s"] > 0
    assert overhead.read(path) == out == json.loads(path.read_text())
    assert overhead.read(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text('{"cpu_s": 1}')
    with pytest.raises(UsageError, match="bad.json: not a record of the Snakemake main process"):
        overhead.read(tmp_path / "bad.json")


def test_wall_seconds_of_a_process_that_does_not_exist():
    assert overhead.wall_seconds(2**22 + 12345) is None  # above Linux's pid_max


def _study(root, tmp_path) -> str:
    out = tmp_path / "study.md"
    perf_study.report_study(argparse.Namespace(root=root, top=5, out=out))
    return out.read_text()


def test_perf_study_reports_the_main_process_when_recorded(tmp_path):
    root = tmp_path / "benchmarks"
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "a.tsv").write_text("s\tmax_rss\tcpu_time\n2.5\t10\t0.2\n")
    assert "Snakemake main process" not in _study(root, tmp_path)
    (root / overhead.FILE_NAME).write_text(json.dumps(
        {"user_s": 11.25, "system_s": 2.5, "cpu_s": 13.75, "wall_s": 180.0, "jobs": 252,
         "argv": ["snakemake", "--cores", "2", "all"], "ended": "2026-11-25 15:00:00 UTC"}))
    text = _study(root, tmp_path)
    assert "## The Snakemake main process" in text
    assert "CPU 13.8 s (user 11.2 s + system 2.5 s) over 180.0 s of wall-clock, 252 jobs" in text
    assert "`snakemake --cores 2 all`" in text
    assert "1 jobs; sum of job wall-clock 2.5 s" in text  # the JSON is not taken for a benchmark file


class _Scheduler:
    """What the coalesced method touches of Snakemake's JobScheduler: its semaphore."""

    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def _wakeups(sem: threading.Semaphore) -> int:
    n = 0
    while sem.acquire(blocking=False):
        n += 1
    return n


def test_coalesced_wakeups_keep_one_pending_and_re_arm_after_it_fires():
    calls = []
    schedule = overhead._coalesced(lambda self, delay: calls.append(delay))
    sched = _Scheduler()
    for _ in range(50):
        schedule(sched, 0.05)
    time.sleep(0.4)
    assert _wakeups(sched._open_jobs) == 1 and calls == []
    schedule(sched, 0.05)  # the loop pass the wake-up ran asks again: it gets one
    time.sleep(0.4)
    assert _wakeups(sched._open_jobs) == 1
    schedule(object(), 0.05)  # not a scheduler with that semaphore: Snakemake's own method runs
    assert calls == [0.05]


def test_snakemake_scheduler_is_patched_once():
    from snakemake.scheduling.job_scheduler import JobScheduler

    assert overhead.coalesce_scheduler_wakeups() is True
    patched = JobScheduler._schedule_reevalutation
    assert getattr(patched, "ltr_bench_coalesced", False)
    assert overhead.coalesce_scheduler_wakeups() is True and JobScheduler._schedule_reevalutation is patched
    sched = JobScheduler.__new__(JobScheduler)  # no workflow needed: the method touches only the semaphore
    sched._open_jobs = threading.Semaphore(0)
    for _ in range(20):
        sched._schedule_reevalutation(0.05)
    time.sleep(0.4)
    assert _wakeups(sched._open_jobs) == 1


def test_benchmark_sampling_interval_is_what_snakemake_uses():
    from snakemake import benchmark

    class Counting(benchmark.ScheduledPeriodicTimer):
        def __init__(self):
            super().__init__(benchmark.BENCHMARK_INTERVAL)
            self.samples = 0

        def work(self):
            self.samples += 1

    default = benchmark.BENCHMARK_INTERVAL_SHORT
    try:
        assert overhead.sample_benchmarks_every(10.0) is True and benchmark.BENCHMARK_INTERVAL_SHORT == 10.0
        timer = Counting()
        timer.start()  # samples once at once, then every BENCHMARK_INTERVAL_SHORT
        time.sleep(1.2)  # Snakemake's 0.5 s would have sampled 3 times by now
        timer.cancel()
        assert timer.samples == 1
        with pytest.raises(ValueError, match="must be positive"):
            overhead.sample_benchmarks_every(0)
    finally:
        benchmark.BENCHMARK_INTERVAL_SHORT = default

"""bench.resume: a lock is released only when the run that took it is provably gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.resume import forget_run, process_start, record_run, release_stale_lock

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "locks").mkdir()
    return tmp_path


def _lock(workdir: Path, name: str = "0.output.lock", age: float = 10.0) -> Path:
    path = workdir / "locks" / name
    path.write_text("results/x\n")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def _dead_pid() -> tuple[int, int]:
    """(pid, start) of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    start = process_start(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, start


def test_the_lock_of_a_killed_run_is_released(workdir):
    locks = [_lock(workdir, "0.input.lock"), _lock(workdir, "0.output.lock")]
    pid, start = _dead_pid()
    (workdir / "run.json").write_text(json.dumps({"pid": pid, "start": start}))
    assert release_stale_lock(workdir / "run.json", workdir / "locks") == pid
    assert not any(lock.exists() for lock in locks)
    assert not (workdir / "run.json").exists()


def test_the_lock_of_a_live_run_is_kept(workdir):
    lock = _lock(workdir)
    record_run(workdir / "run.json")  # this very process owns it
    assert release_stale_lock(workdir / "run.json", workdir / "locks") is None
    assert lock.exists()
    forget_run(workdir / "run.json")
    assert not (workdir / "run.json").exists()


def test_a_reused_pid_does_not_keep_a_dead_runs_lock(workdir):
    lock = _lock(workdir)
    own = process_start(os.getpid())
    (workdir / "run.json").write_text(json.dumps({"pid": os.getpid(), "start": own - 1}))  # same pid, other process
    assert release_stale_lock(workdir / "run.json", workdir / "locks") == os.getpid()
    assert not lock.exists()


def test_a_lock_newer_than_the_record_belongs_to_another_run(workdir):
    pid, start = _dead_pid()
    record = workdir / "run.json"
    record.write_text(json.dumps({"pid": pid, "start": start}))
    then = time.time() - 20
    os.utime(record, (then, then))
    lock = _lock(workdir, age=1.0)  # taken after the killed run recorded itself
    assert release_stale_lock(record, workdir / "locks") is None
    assert lock.exists() and record.exists()


@pytest.mark.parametrize("text", ["not json", "{}", '{"pid": "x", "start": 1}'])
def test_an_unreadable_record_leaves_the_decision_to_snakemake(workdir, text):
    lock = _lock(workdir)
    (workdir / "run.json").write_text(text)
    assert release_stale_lock(workdir / "run.json", workdir / "locks") is None
    assert lock.exists()


def test_no_record_no_release(workdir):
    lock = _lock(workdir)
    assert release_stale_lock(workdir / "run.json", workdir / "locks") is None
    assert lock.exists()

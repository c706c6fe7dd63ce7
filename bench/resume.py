"""Resume after ``kill -9``: release the Snakemake lock that a killed run left behind.

Snakemake locks the working directory for the length of a run and removes the lock when the
run ends, fails or is interrupted -- but a process killed with SIGKILL (or a power cut) gets
no chance to, and the next run stops with "Directory cannot be locked ... use --unlock".
Snakemake's lock files name the locked outputs, not their owner, so the workflow keeps its
own record of the run that took them (``workflows/lifecycle.smk``):

- ``record_run(record)`` when a run starts its jobs (after Snakemake took the lock): the
  process id and its start time (a pid alone may be reused by an unrelated process);
- ``forget_run(record)`` when it ends;
- ``release_stale_lock(record, locks)`` when the next run parses the Snakefile, before
  Snakemake checks the lock: the lock files are removed -- what ``snakemake --unlock`` does --
  only when the recorded process no longer exists **and** no lock file is newer than the
  record (a newer lock belongs to a run that started after the killed one and has not
  recorded itself yet). Anything else is left to Snakemake's own check.

Linux only (process start times come from ``/proc``); elsewhere nothing is released and the
README's ``snakemake --unlock`` applies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.atomic import write_text

__all__ = ["forget_run", "process_start", "record_run", "release_stale_lock"]


def process_start(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks after boot; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name may contain spaces
    except (OSError, IndexError, ValueError):
        return None


def record_run(record: Path) -> None:
    """Record this process as the owner of the run's lock."""
    record.parent.mkdir(parents=True, exist_ok=True)
    write_text(record, json.dumps({"pid": os.getpid(), "start": process_start(os.getpid())}) + "\n")


def forget_run(record: Path) -> None:
    record.unlink(missing_ok=True)


def release_stale_lock(record: Path, locks: Path) -> int | None:
    """Remove the lock files of a run that was killed; the killed run's pid, or None if none was released."""
    if not record.exists() or process_start(os.getpid()) is None:  # nothing recorded, or no /proc
        return None
    try:
        owner = json.loads(record.read_text())
        pid, start = int(owner["pid"]), owner["start"]
    except (ValueError, KeyError, TypeError):
        return None  # not ours to interpret: Snakemake's check decides
    if process_start(pid) == start:
        return None  # that run is alive
    lock_files = sorted(locks.glob("*.lock"))
    if any(lock.stat().st_mtime > record.stat().st_mtime for lock in lock_files):
        return None
    for lock in lock_files:
        lock.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    return pid if lock_files else None

"""Cluster faults tried for real on the local cluster of scripts/slurm-local.sh (issue 21): a job
requeued by ``scontrol requeue``, its node set DOWN and back, pre-emption by a job of the
``urgent`` partition (``PreemptMode=REQUEUE``), and a job over its time limit.

Each runs ``listsize_table3`` through the profile as shipped (the requeue, node and pre-emption
faults hit its one group job; the time limit one of the four training jobs, ungrouped by
``--config gpu=True``), checks what SLURM accounted, and then that the run either ends with the
tables of a local run byte for byte, or stops with one line naming the job and the command to
type, which then completes with those tables. In every case no file under ``results/`` fails
its digest and no temporary of an interrupted write is left where a result belongs.

Slow (a requeued job waits 121 s, SLURM's credential lifetime, before it starts again: about
4 minutes per fault on 2 cores) and needs root plus Debian's SLURM packages; skipped with the
reason otherwise:

    python -m pytest -m slow tests/test_slurm_faults.py
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from test_slurm_cluster import ENV, ROOT, SLURM_MARKS, TABLE, _first_running_job, _snakemake, _tables

from bench.atomic.integrity import DIGESTS_FILE, SIDECAR_SUFFIX, verify, verify_dir
from helpers import copy_checkout

HOST = socket.gethostname().split(".")[0]
PROFILE = ("--profile", "workflows/profiles/slurm")

# the cluster tests' marks: slow, and skipped without root or the SLURM packages
pytestmark = SLURM_MARKS


@pytest.fixture(scope="module")
def expected(tmp_path_factory) -> dict[str, bytes]:
    """The cluster (brought up by the script) and the tables of a local run."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "slurm-local.sh"), "up"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "partitions cpu* gpu urgent" in proc.stdout, proc.stdout + proc.stderr
    local = copy_checkout(tmp_path_factory.mktemp("faults") / "local")
    _snakemake(local, "--cores", "2", TABLE)
    return _tables(local)


class Run:
    """``snakemake --profile workflows/profiles/slurm TABLE ...`` in the background."""

    def __init__(self, root: Path, log: Path, *args: str):
        self.root, self.log = root, log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(["snakemake", *PROFILE, TABLE, *args], cwd=root, env=ENV, stdout=out,
                                         stderr=subprocess.STDOUT)

    def wait(self, timeout: float = 900) -> tuple[int, str]:
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return code, self.log.read_text()


def _records(job: str, final: str = "COMPLETED") -> list[str]:
    """sacct's states of every run of ``job`` (-D: a requeued job has one record per start)."""
    for _ in range(40):  # slurmdbd may lag the controller
        out = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-j", job, "-o", "State"], capture_output=True,
                             text=True, check=True).stdout.split("\n")
        states = [s.split()[0] for s in out if s.strip()]
        if states and states[-1] == final:
            return states
        time.sleep(0.5)
    return states


def _intact(root: Path) -> None:
    """Every digest under results/ matches, and no temporary of an atomic write is left."""
    left = [p for p in (root / "results").rglob("*.tmp")] + [p for p in (root / "reports").rglob("*.tmp")]
    assert left == [], left
    cwd = os.getcwd()
    os.chdir(root)  # the rebuild commands in a failure message are relative to the workflow
    try:
        for listing in Path("results").rglob(DIGESTS_FILE):
            verify_dir(listing.parent, list(json.loads(listing.read_text())["files"]))
        for side in Path("results").rglob(f"*{SIDECAR_SUFFIX}"):
            verify(side.with_name(side.name[: -len(SIDECAR_SUFFIX)]))
    finally:
        os.chdir(cwd)


def test_a_requeued_job_is_followed_to_its_end(expected, tmp_path):
    root = copy_checkout(tmp_path / "requeue")
    run = Run(root, tmp_path / "requeue.log")
    job = _first_running_job(run.log)
    subprocess.run(["scontrol", "requeue", job], check=True)
    code, log = run.wait()
    assert code == 0, log[-5000:]
    assert _records(job) == ["REQUEUED", "COMPLETED"]  # the same job ID, started twice; no resubmission
    assert len(re.findall(r"submitted with SLURM jobid", log)) == 1 and "Trying to restart" not in log
    assert _tables(root) == expected
    _intact(root)


def test_a_node_set_down_under_a_running_job(expected, tmp_path):
    root = copy_checkout(tmp_path / "down")
    run = Run(root, tmp_path / "down.log")
    job = _first_running_job(run.log)
    try:
        subprocess.run(["scontrol", "update", f"nodename={HOST}", "state=down", "reason=ltr-bench fault test"],
                       check=True)
        time.sleep(15)
        node = subprocess.run(["sinfo", "-h", "-n", HOST, "-o", "%T"], capture_output=True, text=True).stdout
        assert "down" in node, node  # it stays down (ReturnToService=1) until resumed
        queued = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout
        assert queued.strip() == "PENDING", queued
    finally:
        subprocess.run(["scontrol", "update", f"nodename={HOST}", "state=resume"], check=False)
    code, log = run.wait()
    assert code == 0, log[-5000:]
    assert _records(job) == ["NODE_FAIL", "COMPLETED"]  # SLURM requeued it; the plugin followed it
    assert len(re.findall(r"submitted with SLURM jobid", log)) == 1
    assert _tables(root) == expected
    _intact(root)


def test_a_preempted_job_is_requeued_and_completes(expected, tmp_path):
    root = copy_checkout(tmp_path / "preempt")
    run = Run(root, tmp_path / "preempt.log")
    job = _first_running_job(run.log)
    urgent = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "--exclusive", "-J", "ltr-bench-urgent",
                             "-o", "/dev/null", "--wrap", "sleep 5"], capture_output=True, text=True, check=True)
    code, log = run.wait()
    assert code == 0, log[-5000:]
    assert _records(job) == ["PREEMPTED", "COMPLETED"]
    assert _records(urgent.stdout.strip()) == ["COMPLETED"]
    assert len(re.findall(r"submitted with SLURM jobid", log)) == 1
    assert _tables(root) == expected
    _intact(root)


def _train_job(root: Path, log: Path, exclude: set[str], timeout: float = 300) -> tuple[str, Path]:
    """A training job of the run that has started, not in ``exclude``; with its SLURM log folder."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in sorted((root / ".snakemake" / "slurm_logs" / "rule_train").glob("*/*.log")):
            if path.stem not in exclude:
                return path.stem, path.parent
        time.sleep(0.5)
    raise AssertionError(f"no training job submitted within {timeout} s: {log.read_text()[-3000:]}")


def _hang(job: str, timeout: float = 300) -> None:
    """Stop every process of ``job``'s job step once its training command runs (a job that hangs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["scontrol", "listpids", job], capture_output=True, text=True).stdout.splitlines()[1:]
        pids = [line.split()[0] for line in out if len(line.split()) > 2 and line.split()[2] == "0"]
        cmdlines = []
        for pid in pids:
            try:
                cmdlines.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                pass
        if any("ltr-bench train" in c for c in cmdlines):
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGSTOP)
                except ProcessLookupError:
                    pass
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not start training within {timeout} s")


def test_a_job_over_its_time_limit_stops_the_run_with_one_line_then_the_printed_command_completes(expected, tmp_path):
    root = copy_checkout(tmp_path / "timeout")
    args = ("--config", "gpu=True", "--set-resources", "train:runtime=1")  # training jobs on their own, 1 min each
    run = Run(root, tmp_path / "timeout.log", *args)
    first, folder = _train_job(root, run.log, set())
    _hang(first)  # over its 1-minute limit: SLURM kills it (TIMEOUT), Snakemake resubmits it (retries: 1) ...
    second = None
    deadline = time.monotonic() + 600
    while second is None and time.monotonic() < deadline:
        again = [p.stem for p in folder.glob("*.log") if p.stem != first]
        second = again[0] if again else None
        time.sleep(0.5)
    assert second, run.log.read_text()[-3000:]
    _hang(second)  # ... and it hangs again: the run stops
    code, log = run.wait()
    assert code != 0
    assert _records(first, "TIMEOUT") == ["TIMEOUT"] and _records(second, "TIMEOUT") == ["TIMEOUT"]
    lines = [line for line in log.splitlines() if line.startswith("ltr-bench: SLURM job")]
    assert len(lines) == 1, log[-5000:]
    assert lines[0].startswith(f"ltr-bench: SLURM job {second} (rule_train/") and "ended TIMEOUT, attempt 2" in lines[0]
    command = re.search(r"`(snakemake [^`]+)`$", lines[0]).group(1)
    assert command == shlex.join(["snakemake", *PROFILE, TABLE, "--config", "gpu=True", "--set-resources",
                                  "train:runtime=2"]), lines[0]
    _intact(root)  # the killed attempts left nothing that could be read as a result
    log = _snakemake(root, *shlex.split(command)[1:])  # what the line says to type
    assert _tables(root) == expected
    _intact(root)

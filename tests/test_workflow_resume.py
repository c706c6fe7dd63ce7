"""Resuming after a crash, as the README promises: `kill -9` the whole study mid-run, type the
same command again, and get the tables of an uninterrupted run, byte for byte.

Slow (two runs of `unified_table`, about 2-4 minutes on 2 cores): `python -m pytest -m slow`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import copy_checkout

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
TARGET = "unified_table"
COMMAND = ["snakemake", "--cores", "2", TARGET]  # what the README tells the user to type


def _tables(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "reports" / "tables").glob(f"{TARGET}.*"))}


@pytest.mark.slow
def test_kill_9_mid_study_then_the_same_command_resumes_to_identical_tables(tmp_path):
    reference = copy_checkout(tmp_path / "uninterrupted")
    done = subprocess.run(COMMAND, cwd=reference, env=ENV, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]

    study = copy_checkout(tmp_path / "killed")
    log = (tmp_path / "first.log").open("w")
    first = subprocess.Popen(COMMAND, cwd=study, env=ENV, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)  # its own process group: kill it whole
    deadline = time.monotonic() + 900
    while len(list((study / "results" / "runs").glob("**/run.json"))) < 6:
        assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)  # Snakemake, the job server and every running job
    first.wait()
    assert not (study / "reports" / "tables" / f"{TARGET}.md").exists(), "killed too late to test resuming"

    resumed = subprocess.run(COMMAND, cwd=study, env=ENV, capture_output=True, text=True, timeout=1800)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert _tables(study) == _tables(reference) and _tables(study)

"""The scale profile end to end (issue 19): plan, run, watch, compare (slow: about 10 minutes on 2 cores).

In a copy of the checkout, as a user would: ``ltr-bench plan all --configfile config/paper.yaml
config/scale.yaml --json`` (calibrates this machine), then ``snakemake --cores 2 all`` with
the same files; while it runs, ``ltr-bench status`` must see a training run running with an
ETA; afterwards every job is done, and ``ltr-bench plan-check`` holds every job to the goals:
measured time (CPU seconds) and peak within 0.67x-1.5x of the projection, each memory request
between the peak and twice it, training peaks <= 1.5 x (fold + model state), GBDT peaks <= 2 x
the fold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from helpers import copy_checkout

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="calibration forks: Linux only")]

CONFIG = ["--configfile", "config/paper.yaml", "config/scale.yaml"]
# progress records every 5 s instead of 60, so that status sees a running run early
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "LTR_BENCH_PROGRESS_SECONDS": "5"}


def _run(root, *args: str, timeout: float = 900) -> str:
    proc = subprocess.run(list(args), cwd=root, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout


def test_scale_profile_runs_within_its_projections_and_requests(tmp_path):
    root = copy_checkout(tmp_path / "scale")
    _run(root, "ltr-bench", "plan", "all", *CONFIG, "--json", "plan.json")
    jobs = json.loads((root / "plan.json").read_text())["jobs"]
    sized = [j for j in jobs if j["rule"] in ("prepare", "train", "gbdt", "evaluate", "stats")]
    assert len(sized) == 10 and all(j["projected_seconds"] is not None and j["projected_peak_mb"] for j in sized)
    study = subprocess.Popen(["snakemake", "--cores", "2", "all", *CONFIG], cwd=root, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    seen_running = ""
    try:
        while study.poll() is None:
            status = _run(root, "ltr-bench", "status", "all", *CONFIG)
            if "running:" in status and "ETA" in status:
                seen_running = status
            time.sleep(10)
    finally:
        if study.poll() is None:
            study.kill()
    assert study.returncode == 0
    assert "running:" in seen_running and "results/runs/" in seen_running.split("running:")[1], seen_running
    final = _run(root, "ltr-bench", "status", "all", *CONFIG)
    total = [line for line in final.splitlines() if line.startswith("total")][0].split()
    assert total[4] == str(len(jobs)) and total[5:8] == ["0", "0", "0"], final  # done; running, interrupted, left
    report = _run(root, "ltr-bench", "plan-check", "--plan", "plan.json", *CONFIG, "--out", "scale.md")
    missed = report.split("## Missed")[1].split("##")[0].strip().splitlines() if "## Missed" in report else []
    assert missed == [], report

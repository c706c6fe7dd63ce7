"""Results do not depend on where a job was scheduled (issue 14).

A training or GBDT job computes with the study config's ``threads`` (recorded in run.json),
never with Snakemake's ``{threads}``: that one is capped at ``--cores`` locally and set by the
profile's ``set-threads`` / the SLURM CPU grant on a cluster, and CPU results of torch and
LightGBM depend on their thread count. Two runs of the same jobs, one on 1 core and one
granted 2 threads and 2 CPUs per task, must write the same bytes; a run whose *config* asks for
2 threads must differ (else this test could not fail).

About 30 s on 2 cores (three small runs): marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "LTR_BENCH_JOB_SERVER": "off"}
COPIED = ("Snakefile", "environment.yml", "workflows", "config", "bench/report/paper_numbers.yaml")
NEURAL = "results/runs/pirank_ablation/syn-web/Fold1/pirank_ndcg_L40/seed0"
GBDT = "results/runs/unified/syn-web/Fold1/lightgbm_lambdarank/seed0"
COMPARED = ("scores.npy", "metrics.parquet")  # curve.csv has wall-clock seconds


def _run(root: Path, *extra: str) -> dict[str, bytes]:
    """Copy the workflow to ``root``, build the two runs with ``extra`` options, return their files."""
    for rel in COPIED:
        src, dst = ROOT / rel, root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    targets = [f"{run}/scores.npy" for run in (NEURAL, GBDT)]
    proc = subprocess.run(["snakemake", *targets, *extra], cwd=root, env=ENV, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = {f"{run}/{name}": (root / run / name).read_bytes() for run in (NEURAL, GBDT) for name in COMPARED}
    out["torch_threads"] = json.loads((root / NEURAL / "run.json").read_text())
    return out


def _torch_threads(run_json: dict) -> int:
    found = [v for k, v in _walk(run_json) if k == "torch_threads"]
    assert len(found) == 1, run_json
    return found[0]


def _walk(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from _walk(v)


@pytest.mark.slow
def test_scheduler_thread_grant_does_not_change_results(tmp_path):
    one = _run(tmp_path / "one", "--cores", "1")
    granted = _run(tmp_path / "granted", "--cores", "2", "--set-threads", "train=2", "gbdt=2",
                   "--set-resources", "train:cpus_per_task=2", "gbdt:cpus_per_task=2")
    assert _torch_threads(one.pop("torch_threads")) == _torch_threads(granted.pop("torch_threads")) == 1
    assert one == granted
    # sensitivity: the config's threads really are what the jobs compute with
    two = _run(tmp_path / "two", "--cores", "2", "--config", "threads=2")
    assert _torch_threads(two.pop("torch_threads")) == 2
    assert two[f"{NEURAL}/scores.npy"] != one[f"{NEURAL}/scores.npy"]

"""scripts/gpu-check.sh and the GPU goals, without a GPU: the script is known to start before a
GPU machine is lent (its dry run resolves every part), and the GPU-only pieces it calls are
exercised on the CPU where they can be."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bench.cli import main
from bench.perf.all_suites import DEVICE_SUITES, GPU_PLANS
from bench.perf.losses import GPU_NEURALNDCG_GOAL_S, gpu_loss_targets
from bench.perf.train import GPU_EPOCH_GOAL_S, MSLR_TRAIN_QUERIES, gpu_epoch_targets

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
PARTS = ["facts", "install", "cuda_tests", "perf", "xgboost", "plan", "study"]
CUDA_PARTS = {"cuda_tests", "perf", "xgboost", "plan", "study"}


def _temp_dir(tmp_path: Path) -> dict[str, str]:
    """An environment whose temporary directory is a fresh folder, to see what the script leaves there."""
    (tmp_path / "tmp").mkdir()
    return {**os.environ, "TMPDIR": str(tmp_path / "tmp")}


def test_the_dry_run_resolves_every_part_and_skips_the_cuda_ones(tmp_path):
    env = _temp_dir(tmp_path)
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=1200, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert list((tmp_path / "tmp").glob("gpu-check.*")) == []  # its work folder removed
    summary = (tmp_path / "summary.md").read_text()
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in summary.splitlines()
            if line.startswith("| ") and not line.startswith("| part")}
    assert list(rows) == PARTS
    for part, status in rows.items():
        assert status == ("resolved; skipped (needs CUDA)" if part in CUDA_PARTS else "resolved"), (part, status)
    log = (tmp_path / "gpu-check.log").read_text()
    for part in CUDA_PARTS:
        assert f"{part}: skipped, needs CUDA (dry run)" in log
    assert "tests collected" in log  # the CUDA tests import and collect
    assert "the plans of losses, scaling, train parse" in log
    with tarfile.open(tmp_path / "gpu-check.tar.gz") as tar:
        assert "./summary.md" in tar.getnames()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_a_real_run_without_cuda_stops_with_one_line(tmp_path):
    env = _temp_dir(tmp_path)
    done = subprocess.run(["bash", str(SCRIPT), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu-check: no CUDA device here (torch.cuda.is_available() is False); on a CPU machine use --dry-run"]
    assert not (tmp_path / "out").exists()
    assert list((tmp_path / "tmp").glob("gpu-check.*")) == []  # no empty gpu-check.* folder left behind


def test_the_gpu_plans_differ_from_the_cpu_ones_only_in_the_trainer():
    from bench.perf.all_suites import PLANS

    assert set(GPU_PLANS) == set(PLANS) and set(DEVICE_SUITES) <= set(GPU_PLANS)
    assert {n for n in PLANS if GPU_PLANS[n] != PLANS[n]} == {"train"}
    train = GPU_PLANS["train"]
    assert int(train[train.index("--queries") + 1]) == MSLR_TRAIN_QUERIES


def test_the_gpu_goals_are_judged_on_cuda_only():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    fast, slow = {(1000, "neuralndcg"): {"ours": 0.004}}, {(1000, "neuralndcg"): {"ours": 0.006}}
    assert gpu_loss_targets(fast, 16, cpu) == [] and gpu_loss_targets(fast, 8, cuda) == []
    assert [t.met for t in gpu_loss_targets(fast, 16, cuda) + gpu_loss_targets(slow, 16, cuda)] == [True, False]
    assert GPU_NEURALNDCG_GOAL_S == 0.005 and GPU_EPOCH_GOAL_S == 2.0

    def case(docs_per_s):
        return SimpleNamespace(docs=2_000_000, docs_per_s=lambda side: docs_per_s)

    quick, sluggish = {("mslr-like", "ranknet", "fp32"): case(1.5e6)}, {("mslr-like", "ranknet", "fp32"): case(0.5e6)}
    assert gpu_epoch_targets(quick, cpu, MSLR_TRAIN_QUERIES) == []
    assert gpu_epoch_targets(quick, cuda, MSLR_TRAIN_QUERIES - 1) == []  # not an MSLR-sized epoch
    met = gpu_epoch_targets(quick, cuda, MSLR_TRAIN_QUERIES) + gpu_epoch_targets(sluggish, cuda, MSLR_TRAIN_QUERIES)
    assert [t.met for t in met] == [True, False] and met[0].measured.startswith("1.33 s")


def test_gbdt_devices_on_the_cpu_compares_two_identical_runs(tmp_path, capsys):
    out = tmp_path / "gbdt-devices.md"
    rc = main(["perf", "gbdt-devices", "--device", "cpu", "--queries", "40", "--vali-queries", "12",
               "--test-queries", "16", "--trees", "3", "--early-stopping", "2", "--objectives", "rank:ndcg",
               "--threads", "1", "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    assert "| ndcg@10 |" in text and "XGBoost rank:ndcg ran on cpu: cpu (target cpu): met" in text
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ndcg") or line.startswith("| mrr")]
    assert len(rows) == 4 and all(r[4].strip() == "0.00e+00" and r[6].strip() == "100.0%" for r in rows)


def test_gbdt_devices_without_a_cuda_build_says_so_and_trains_nothing(tmp_path, monkeypatch):
    from bench.perf import gbdt_devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gbdt_devices, "xgboost_cuda_build", lambda: ("9.9", False))
    monkeypatch.setattr(gbdt_devices, "machine_line", lambda device: "a pretend GPU")
    monkeypatch.setattr(gbdt_devices, "make_fold", lambda *a: pytest.fail("must not train"))
    out = tmp_path / "g.md"
    assert main(["perf", "gbdt-devices", "--device", "cuda", "--out", str(out)]) == 1
    assert "no CUDA support" in out.read_text()


def test_gbdt_devices_with_cuda_asked_and_no_gpu_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["perf", "gbdt-devices", "--device", "cuda", "--out", str(tmp_path / "g.md")]) == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err

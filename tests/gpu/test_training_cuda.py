"""The trainer on CUDA: determinism, bfloat16 autocast (``train.amp``), resume after a kill.

The same tiny fold and configs as the CPU trainer tests (``tests/training/test_neural.py``),
with ``--device cuda``. What each test holds the GPU to:

- two CUDA runs of the same seed are bit-identical (scores and per-query metrics): the run
  sets deterministic kernels and ``CUBLAS_WORKSPACE_CONFIG`` (:func:`bench.training.device.
  deterministic`), in warn-only mode, so a kernel without a deterministic variant would show
  up here as differing bytes;
- ``train.amp`` really autocasts (its scores differ from float32's), stays finite, and its
  test NDCG@10 lands within 0.05 of the float32 run's on this toy fold (two epochs of a tiny
  MLP: bfloat16's 8-bit mantissa moves single queries, not the mean by more than that);
- a run killed right after epoch 1's checkpoint and resumed ends with exactly the metrics and
  curve of an uninterrupted CUDA run (the checkpoint carries the CUDA generator states).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from bench.training.cli import run_job
from bench.training.loop import EXIT_ENV, EXIT_STATUS
from helpers import TOY_METRICS, make_prepared, merge_train_and_vali, toy_neural_config

METRICS = TOY_METRICS


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


def _config(**train) -> dict:
    return toy_neural_config("neuralndcg", **train)


@pytest.mark.parametrize("method", ["ranknet", "neuralndcg", "cae"])
def test_two_cuda_runs_are_bit_identical(prepared, tmp_path, method):
    runs = [run_job(_config(), prepared, tmp_path / f"r{i}", method=method, seed=7, device="cuda", quiet=True)
            for i in range(2)]
    assert json.loads((runs[0] / "run.json").read_text())["device"] == "cuda"
    m0, m1 = (pd.read_parquet(r / "metrics.parquet") for r in runs)
    pd.testing.assert_frame_equal(m0, m1, check_exact=True)
    assert np.load(runs[0] / "scores.npy").tobytes() == np.load(runs[1] / "scores.npy").tobytes()


def test_amp_autocasts_and_stays_close_to_float32(prepared, tmp_path):
    fp32 = run_job(_config(), prepared, tmp_path / "fp32", method="ranknet", seed=3, device="cuda", quiet=True)
    bf16 = run_job(_config(amp=True), prepared, tmp_path / "bf16", method="ranknet", seed=3, device="cuda", quiet=True)
    s32, s16 = np.load(fp32 / "scores.npy"), np.load(bf16 / "scores.npy")
    assert np.isfinite(s16).all() and s16.tobytes() != s32.tobytes()
    n32 = pd.read_parquet(fp32 / "metrics.parquet")["ndcg@10"].mean()
    n16 = pd.read_parquet(bf16 / "metrics.parquet")["ndcg@10"].mean()
    assert abs(n16 - n32) <= 0.05, (n16, n32)


def _cli(prepared: Path, out: Path, cfg_path: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    cmd = [sys.executable, "-m", "bench.cli", "train", "--prepared", str(prepared), "--out", str(out),
           "--method", "ranknet", "--seed", "1", "--config", str(cfg_path), "--device", "cuda", "--quiet",
           "--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_resume_after_kill_on_cuda_equals_uninterrupted(prepared, tmp_path):
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(epochs=2)))
    full = _cli(prepared, tmp_path / "full", cfg_path)
    assert full.returncode == 0, full.stderr
    killed = _cli(prepared, tmp_path / "resumed", cfg_path, {EXIT_ENV: "1"})
    assert killed.returncode == EXIT_STATUS, killed.stderr
    resumed = _cli(prepared, tmp_path / "resumed", cfg_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    info = json.loads((tmp_path / "resumed" / "run.json").read_text())
    assert info["device"] == "cuda" and info["result"]["resumed_from_epoch"] == 1
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "full" / "metrics.parquet"),
                                  pd.read_parquet(tmp_path / "resumed" / "metrics.parquet"), check_exact=True)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "full" / "curve.csv").drop(columns="seconds"),
                                  pd.read_csv(tmp_path / "resumed" / "curve.csv").drop(columns="seconds"),
                                  check_exact=True)


def test_the_cuda_generator_state_is_in_the_checkpoint(prepared, tmp_path):
    """What the resume above relies on, read directly: the checkpoint holds a CUDA generator."""
    from bench.training.state import default_checkpoint_dir

    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(epochs=2)))
    killed = _cli(prepared, tmp_path / "run", cfg_path, {EXIT_ENV: "1"})
    assert killed.returncode == EXIT_STATUS, killed.stderr
    state = torch.load(default_checkpoint_dir(tmp_path / "run") / "last.pt", weights_only=True)
    assert state["epoch"] == 1
    rng = state["rng"]
    assert len(rng["cuda"]) == torch.cuda.device_count() and all(s.numel() > 0 for s in rng["cuda"])
    assert rng["loss"].numel() > 0  # the loss generator lives on the GPU: its state is saved too


def test_a_refit_on_cuda_is_a_plain_cuda_run_on_train_and_validation(prepared, tmp_path):
    """`train.refit` on CUDA (issue 41's NeuralNDCG protocol): the refit model equals, bit for bit,
    a plain CUDA run on a fold whose training split is train + validation (the CPU oracle of
    tests/training/test_refit.py, here with CUDA's deterministic kernels), and not the first fit."""
    merged = merge_train_and_vali(prepared, tmp_path / "merged" / "toy" / "fold1")
    runs = {name: run_job(toy_neural_config("softmax", checkpoint="last", **extra), fold, tmp_path / name,
                          method="ranknet", seed=0, device="cuda", quiet=True)
            for name, fold, extra in (("refit", prepared, {"refit": True}), ("plain", prepared, {}),
                                      ("direct", merged, {}))}
    scores = {name: np.load(run / "scores.npy").tobytes() for name, run in runs.items()}
    assert scores["refit"] == scores["direct"] != scores["plain"]
    info = json.loads((runs["refit"] / "run.json").read_text())
    assert info["device"] == "cuda" and info["result"]["refit"]["epochs"] == info["result"]["tested_epoch"]

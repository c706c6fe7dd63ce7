"""The one ``--device`` policy (bench.training.device): runs fall back, measurements refuse."""

from __future__ import annotations

import pytest
import torch

from bench.cli import main
from bench.errors import UsageError
from bench.training.device import NO_CUDA, resolve_device


def test_cpu_and_auto_resolve_the_same_for_runs_and_measurements():
    for on_missing in (None, print):
        assert resolve_device("cpu", on_missing_cuda=on_missing) == torch.device("cpu")
        want = "cuda" if torch.cuda.is_available() else "cpu"
        assert resolve_device("auto", on_missing_cuda=on_missing).type == want


def test_cuda_without_cuda_falls_back_for_a_run_and_fails_clearly_for_a_measurement(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    notes: list[str] = []
    assert resolve_device("cuda", on_missing_cuda=notes.append) == torch.device("cpu")
    assert notes == [NO_CUDA]
    with pytest.raises(UsageError, match="torch.cuda.is_available"):
        resolve_device("cuda", on_missing_cuda=None)


def test_an_unknown_device_is_a_usage_error():
    with pytest.raises(UsageError, match="--device: must be auto, cpu or cuda, got 'gpu'"):
        resolve_device("gpu", on_missing_cuda=print)


def test_perf_losses_with_cuda_but_without_cuda_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = main(["perf", "losses", "--device", "cuda", "--lengths", "5", "--batch", "1", "--repeats", "1",
               "--out", str(tmp_path / "x.md")])
    assert rc == 2 and "torch.cuda.is_available() is False" in capsys.readouterr().err
    assert not (tmp_path / "x.md").exists()

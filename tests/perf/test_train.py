"""``ltr-bench perf train`` at tiny sizes: the trainer pass is the real loop's and counts real
documents only, the bare pass trains the same documents, the tables are consistent, bf16 is a
measured column and never a silent default. No wall-time assertions."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from bench.cli import main
from bench.perf import train as perf_train
from bench.training.device import autocast, deterministic
from helpers import md_tables

TINY = {"hidden": (16, 8), "batch": 4, "list_size": 150}  # mslr-like: mean length ~120, some pad, some cut



def _real_docs(fold, list_size: int) -> int:
    return int(np.minimum(np.diff(fold.splits["train"].offsets), list_size).sum())


@pytest.fixture(scope="module")
def fold():
    return perf_train.kind_fold("mslr-like", 14, 6, TINY["list_size"])


def test_equal_lists_have_exactly_l_train_documents_and_mslr_like_lists_vary():
    equal = perf_train.kind_fold("equal", 5, 3, 7)
    assert np.diff(equal.splits["train"].offsets).tolist() == [7] * 5
    mslr = perf_train.kind_fold("mslr-like", 30, 3, 7)
    assert len(set(np.diff(mslr.splits["train"].offsets).tolist())) > 1


def test_trainer_and_bare_pass_train_the_same_real_documents(fold):
    with deterministic(torch.device("cpu")):
        case = perf_train.Case(fold, "mslr-like", "ranknet", "fp32", device=torch.device("cpu"), **TINY)
        expected = _real_docs(fold, TINY["list_size"])
        lengths = np.diff(fold.splits["train"].offsets)
        assert (lengths < 150).any() and (lengths > 150).any()  # both padding and sub-sampling happen
        assert case.docs == expected < case.slots == 14 * TINY["list_size"]  # every query once, padded
        before = [p.detach().clone() for p in case.trainer.params]
        case.time_trainer()
        case.time_bare()
    assert case.state.step == case.trainer.budget.steps_per_epoch  # one whole epoch, the real loop's steps
    assert any(not torch.equal(b, p) for b, p in zip(before, case.trainer.params))
    assert len(case.rounds["trainer"]) == len(case.rounds["bare"]) == 1
    t, b = case.rounds["trainer"][0], case.rounds["bare"][0]
    assert t > 0 and b > 0 and case.ratio() == pytest.approx(t / b)


def test_bf16_case_differs_in_values_but_not_by_much(fold):
    with deterministic(torch.device("cpu")):
        case = perf_train.Case(fold, "mslr-like", "approxndcg", "fp32", device=torch.device("cpu"), **TINY)
        diff = perf_train.loss_difference(case)
        bf = perf_train.Case(fold, "mslr-like", "approxndcg", "bf16", device=torch.device("cpu"), **TINY)
    assert 0 < diff < 0.05  # bfloat16 keeps 8 bits of mantissa: a difference, a small one
    assert bf.trainer.amp_on_cpu and bf.trainer.tc["amp"] and not case.trainer.amp_on_cpu


def test_autocast_on_cpu_only_when_asked():
    cpu = torch.device("cpu")
    assert isinstance(autocast(cpu, True), contextlib.nullcontext)  # train.amp alone: CUDA only
    assert isinstance(autocast(cpu, False, on_cpu=True), contextlib.nullcontext)
    with autocast(cpu, True, on_cpu=True):
        out = torch.nn.Linear(4, 2)(torch.randn(3, 4))
    assert out.dtype == torch.bfloat16


def test_suite_tables_are_consistent(tmp_path):
    out = tmp_path / "train.md"
    rc = main(["perf", "train", "--device", "cpu", "--queries", "10", "--vali-queries", "4", "--rounds", "1",
               "--batch", "4", "--list-size", "16", "--hidden", "16,8", "--trees", "0", "--losses", "ranknet",
               "--out", str(out)])
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    fp32, bf16 = md_tables(text)[:2]
    assert [r[:2] for r in fp32[2:]] == [["equal", "ranknet"], ["mslr-like", "ranknet"]]
    equal = perf_train.kind_fold("equal", 10, 4, 16)
    mslr = perf_train.kind_fold("mslr-like", 10, 4, 16)
    assert [int(r[2]) for r in fp32[2:]] == [_real_docs(equal, 16), _real_docs(mslr, 16)]
    assert fp32[2][3] == "0.0%"
    for r in fp32[2:]:  # one round: the ratio is trainer / bare docs/s (integers in the table)
        assert float(r[6].rstrip("x")) == pytest.approx(float(r[4]) / float(r[5]), rel=0.02, abs=2e-3)
        assert r[7] == ("met" if float(r[6].rstrip("x")) >= 0.9 else "MISSED")
    for r in bf16[2:]:
        assert float(r[4].rstrip("x")) == pytest.approx(float(r[3]) / float(r[2]), rel=0.02, abs=1e-2)
        assert float(r[9]) > 0
        assert float(r[12]) == pytest.approx(float(r[11]) - float(r[10]), abs=2e-4)
    assert "torch CPU capability" in text and "bfloat16 autocast on the CPU" in text
    assert "GBDT" not in text  # --trees 0


@pytest.mark.parametrize("argv, message", [
    (["--precisions", "bf16"], "--precisions"),
    (["--hidden", "8,x"], "--hidden"),
    (["--losses", "nope"], "--losses"),
])
def test_bad_arguments(tmp_path, capsys, argv, message):
    rc = main(["perf", "train", "--device", "cpu", *argv, "--out", str(tmp_path / "t.md")])
    assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "t.md").exists()

"""Progress of a running job: the record's reader and writer, the neural and GBDT lines and
records (tiny interval), their removal after success; one optimiser step via ``train_step``.

The ETA tests replace the trainers' monotonic clock by one that advances 10 ms a reading, so
rates and ETAs are the same on every run whatever else the machine does.
"""

from __future__ import annotations

import json
import re
import threading
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bench.atomic import progress
from bench.atomic.progress import (
    INTERVAL_ENV,
    INTERVAL_S,
    Reporter,
    interval_seconds,
    progress_path,
    read_progress,
    write_progress,
)
from bench.training import gbdt, linear, loop, neural
from bench.training.cli import run_job
from helpers import make_prepared

RECORD_KEYS = {"kind", "pid", "host", "started", "updated", "unit", "done", "total", "epoch", "epochs", "elapsed_s",
               "eta_s", "eta_is_upper_bound", "docs_per_s", "vali", "phase"}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


class _Ticks:
    """A stand-in for the ``time`` module whose ``perf_counter`` advances 10 ms a reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.01
        return self.now


@pytest.fixture
def records(monkeypatch) -> list[dict]:
    """Every record written, as read back from its file at that moment; a line per step/round."""
    seen: list[dict] = []
    real = progress.write_progress

    def spy(run_dir, record):
        real(run_dir, record)
        seen.append(read_progress(run_dir))

    monkeypatch.setattr(progress, "write_progress", spy)
    monkeypatch.setenv(INTERVAL_ENV, "0")
    return seen


# ----------------------------------------------------------------------------- the record


def test_progress_path_is_a_hidden_sibling_of_the_run_directory(tmp_path):
    assert progress_path(tmp_path / "runs" / "seed0") == tmp_path / "runs" / ".seed0.progress.json"


def test_read_progress_missing_or_corrupt_is_none(tmp_path):
    run = tmp_path / "seed0"
    assert read_progress(run) is None
    progress_path(run).write_text('{"kind": "neural", "done"')  # truncated
    assert read_progress(run) is None
    progress_path(run).write_text("[1, 2]")  # JSON, but not a record
    assert read_progress(run) is None
    write_progress(run, {"kind": "gbdt", "done": 3})
    assert read_progress(run) == {"kind": "gbdt", "done": 3}
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


@pytest.mark.parametrize("raw, expected", [(None, INTERVAL_S), ("0.5", 0.5), ("0", 0.0), ("soon", INTERVAL_S),
                                           ("-3", INTERVAL_S), ("nan", INTERVAL_S)])
def test_interval_from_the_environment(monkeypatch, raw, expected):
    if raw is None:
        monkeypatch.delenv(INTERVAL_ENV, raising=False)
    else:
        monkeypatch.setenv(INTERVAL_ENV, raw)
    assert interval_seconds() == expected


# ----------------------------------------------------------------------------- neural runs


def _neural_config(**train) -> dict:
    return {
        "model": {"type": "mlp", "hidden": [8]},
        "train": {"epochs": 3, "batch_size": 8, "list_size": 12, **train},
        "metrics": ["ndcg@10"],
        "methods": {"ranknet": {"loss": "ranknet"}},
    }


def test_neural_lines_and_record_every_step_then_removed(prepared, tmp_path, records, monkeypatch, capsys):

    torch.set_num_threads(1)
    monkeypatch.setattr(loop, "time", _Ticks())
    out = run_job(_neural_config(), prepared, tmp_path / "run", method="ranknet", seed=0, device="cpu", quiet=True)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress")]
    # the job's start; 48 queries / 8 = 6 steps an epoch, 3 epochs, every step but the first (a warm-up);
    # 3 validations
    assert len(records) == len(lines) == 1 + 17 + 3
    assert all(set(r) == RECORD_KEYS and r["kind"] == "neural" and r["unit"] == "step" for r in records)
    opening = records.pop(0)
    assert opening["phase"] == "loading the fold" and opening["done"] == opening["total"] == 0
    assert lines.pop(0) == "progress ranknet/0: loading the fold, elapsed " + progress.format_duration(opening["elapsed_s"])
    assert all(r["phase"] is None for r in records)  # a counted line: steps, or the validation just done
    assert [r["done"] for r in records if r["vali"] is None] == list(range(2, 7))  # until the first validation
    assert {r["total"] for r in records} == {18} and {r["epochs"] for r in records} == {3}
    assert all(r["docs_per_s"] > 0 and r["eta_is_upper_bound"] is False for r in records)
    assert re.search(r"step 7/18 \(38.9%\), epoch 2/3, [\d.]+ s/step, [\d,]+ docs/s, elapsed \S+, ETA \S+, "
                     r"vali ndcg@10 [\d.]+ \(best [\d.]+ @ epoch 1\)$", lines[6]), lines[6]
    assert ["not timed yet" in ln for ln in lines] == [True] * 5 + [False] * 15  # until validation is timed
    validated = [r for r, ln in zip(records, lines) if "loss" in ln]
    assert [r["done"] for r in validated] == [6, 12, 18] and [r["epoch"] for r in validated] == [1, 2, 3]
    etas = [r["eta_s"] for r in validated]
    assert etas[0] > etas[1] > etas[2] and etas[2] < 0.05  # at the end: the test pass only
    curve = pd.read_csv(out / "curve.csv")
    best = int(curve["vali_ndcg@10"].idxmax()) + 1
    assert validated[-1]["vali"] == {"metric": "ndcg@10", "value": curve["vali_ndcg@10"].iloc[-1],
                                     "best": curve["vali_ndcg@10"].max(), "best_at": best}
    assert not progress_path(out).exists()  # removed once the run directory is written


def test_neural_patience_makes_the_eta_an_upper_bound(prepared, tmp_path, records, monkeypatch):
    """With patience the ETA is an upper bound; once patience stops the run (lr 0.1: validation
    NDCG drops after epoch 1 on this fold) only the test pass is left."""

    monkeypatch.setattr(loop, "time", _Ticks())
    out = run_job(_neural_config(epochs=6, patience=1, lr=0.1), prepared, tmp_path / "r", method="ranknet",
                    seed=0, device="cpu", quiet=True)
    assert records[0]["phase"] == "loading the fold" and records[0]["eta_s"] is None  # the job's start: nothing known
    assert records[1:] and all(r["eta_is_upper_bound"] for r in records[1:])
    result = json.loads((out / "run.json").read_text())["result"]
    assert records[-1]["done"] == result["steps"] and records[-1]["eta_s"] < 0.05
    assert result["stopped_early"] == (result["steps"] < records[-1]["total"])


def test_progress_does_not_change_results(prepared, tmp_path, monkeypatch):
    """A line every step (and its record) against the default interval: the same bytes."""

    runs = []
    for name, interval in (("quiet", "3600"), ("busy", "0")):
        monkeypatch.setenv(INTERVAL_ENV, interval)
        runs.append(run_job(_neural_config(epochs=2), prepared, tmp_path / name, method="ranknet", seed=5,
                              device="cpu", quiet=True))
    for name in ("scores.npy", "metrics.parquet"):
        assert (runs[0] / name).read_bytes() == (runs[1] / name).read_bytes()


def test_train_step_takes_one_optimiser_step(prepared):
    from bench.config.settings import resolve_neural
    from bench.data import load_prepared
    from bench.training.batches import epoch_lists
    from bench.training.loss import make_loss

    cfg = resolve_neural(_neural_config(), "ranknet")
    parts = ("toy", "fold1", "ranknet", 0)
    f = loop.setup(cfg, make_loss(cfg, "ranknet"), load_prepared(prepared), parts, torch.device("cpu"))
    lists, order = epoch_lists(f.splits["train"], f.list_size, f.trainables.list_gen)
    before = [p.detach().clone() for p in f.params]
    loss = loop.train_step(f, lists[order[:8]], lr=1e-2, tau=None)
    assert isinstance(loss, float) and np.isfinite(loss)
    assert any(not torch.equal(b, p) for b, p in zip(before, f.params))
    assert f.trainables.optimizer.param_groups[0]["lr"] == 1e-2


# ----------------------------------------------------------------------------- GBDT runs


@pytest.mark.parametrize("lib, objective", [("lightgbm", "lambdarank"), ("xgboost", "rank:pairwise")])
def test_gbdt_lines_and_record_every_round_then_removed(prepared, tmp_path, records, monkeypatch, capsys, lib,
                                                        objective):
    params = ({"num_leaves": 7, "min_sum_hessian_in_leaf": 1e-3, "min_data_in_leaf": 2, "num_threads": 1}
              if lib == "lightgbm" else {"max_depth": 3, "min_child_weight": 1e-3, "nthread": 1})
    cfg = {"metrics": ["ndcg@10"], "methods": {"m": {"gbdt": lib, "objective": objective, "params": params,
                                                     "num_trees": 12, "early_stopping_rounds": 50}}}
    monkeypatch.setattr(gbdt, "time", _Ticks())
    out = run_job(cfg, prepared, tmp_path / "run", method="m", seed=0, device="cpu", quiet=True)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress")]
    assert len(records) == len(lines) == 1 + 11  # the job's start; every round but the first (the library's set-up)
    assert all(set(r) == RECORD_KEYS and r["kind"] == "gbdt" and r["unit"] == "round" for r in records)
    opening = records.pop(0)
    assert (opening["phase"], opening["done"], opening["total"]) == ("loading the fold", 0, 12)
    assert lines.pop(0).startswith("progress m/0: loading the fold, elapsed ")
    assert all(r["phase"] is None for r in records)
    assert [r["done"] for r in records] == list(range(2, 13)) and {r["total"] for r in records} == {12}
    assert all(r["eta_is_upper_bound"] and r["epoch"] is None and r["docs_per_s"] is None for r in records)
    etas = [r["eta_s"] for r in records]
    assert all(a > b for a, b in pairwise(etas)) and etas[-1] == 0
    assert re.search(r"round 3/12 \(25.0%\), [\d.]+ s/round, elapsed \S+, ETA <= \S+ \(upper bound: early stopping "
                     r"may end sooner\), vali ndcg@10 [\d.]+ \(best [\d.]+ @ round \d+\)$", lines[1]), lines[1]
    history = pd.read_csv(out / "curve.csv")["vali_ndcg@10"].to_numpy()
    for r in records:  # the best so far: the first round with the best value
        seen = history[: r["done"]]
        assert r["vali"]["value"] == seen[-1] and r["vali"]["best"] == seen.max()
        assert r["vali"]["best_at"] == int(np.argmax(seen)) + 1
    assert not progress_path(out).exists()
    assert json.loads((out / "run.json").read_text())["result"]["rounds_trained"] == 12


# ----------------------------------------------------------------------------- the heartbeat


class _FakeClock:
    """A clock the test moves: ``wait(t)`` (the heartbeat's sleep) advances it by ``t`` and
    runs, at their times, what the trainer does meanwhile (``events``: time -> action)."""

    def __init__(self, events: dict[float, object], stop_at: float) -> None:
        self.now, self.events, self.stop_at, self.sleeps = 0.0, dict(events), stop_at, []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        end = self.now + seconds
        for at in sorted(t for t in self.events if self.now < t <= end):
            self.now = at
            self.events.pop(at)()
        self.now = end
        return self.now > self.stop_at


def test_heartbeat_writes_a_line_every_interval_from_the_start(monkeypatch, capsys):
    """On a fake clock (interval 30 s): a line at the start, then one whenever 30 s passed without
    one -- during a load that returns nothing, after a trainer's own line (counted from it), with
    the counts of the last line brought up to date and the phase of the moment."""
    monkeypatch.setenv(INTERVAL_ENV, "30")
    lines: list[tuple[float, dict]] = []

    def counted_line():  # the trainer's own line at t = 70 s: round 1 done, 10 s a round
        reporter.phase = None
        reporter.emit(unit_s=10.0, done=1, total=10, epoch=None, epochs=None, elapsed_s=70.0, eta_s=90.0,
                      eta_is_upper_bound=True, docs_per_s=None, vali=None)

    def later_phase():
        reporter.phase = "scoring the test split"

    clock = _FakeClock({70.0: counted_line, 140.0: later_phase}, stop_at=170.0)
    reporter = Reporter(None, kind="gbdt", unit="round", label="x", clock=clock, total=10, phase="loading the fold")
    real_emit = reporter.emit

    def spy(**kwargs):
        record = real_emit(**kwargs)
        lines.append((clock.now, record))
        return record

    reporter.emit = spy
    reporter.beat()  # what `with reporter:` does first
    reporter.heartbeat(clock.wait)
    times = [t for t, _ in lines]
    assert times == [0.0, 30.0, 60.0, 70.0, 100.0, 130.0, 160.0]
    assert max(b - a for a, b in pairwise(times)) <= 30.0
    assert clock.sleeps[:4] == [30.0, 30.0, 30.0, 10.0]  # woke at 90 (not due: 20 s since 70), slept the 10 s left
    assert [r["phase"] for _, r in lines] == ["loading the fold"] * 3 + [None, None, None, "scoring the test split"]
    assert [r["elapsed_s"] for _, r in lines] == [0.0, 30.0, 60.0, 70.0, 100.0, 130.0, 160.0]
    assert [r["eta_s"] for _, r in lines[3:]] == [90.0, 60.0, 30.0, 0.0]  # the last ETA less the time since
    err = capsys.readouterr().err.splitlines()
    assert err[1] == "progress x: loading the fold, elapsed 30.0s"
    assert err[-1].startswith("progress x: round 1/10 (10.0%), 10 s/round, elapsed 2m40s, ETA <= 0.0s") \
        and err[-1].endswith(", scoring the test split")


def test_heartbeat_is_off_with_a_zero_interval(monkeypatch):
    monkeypatch.setenv(INTERVAL_ENV, "0")
    with Reporter(None, kind="gbdt", unit="round", echo=False) as reporter:
        assert reporter._thread is None and reporter.last is not None  # the opening line only


def _slow_load_config(kind: str) -> dict:
    if kind == "neural":
        return _neural_config(epochs=1)
    if kind == "linear":
        return {"metrics": ["ndcg@10"], "methods": {"m": {"linear": "least_squares"}}}
    params = {"max_depth": 3, "min_child_weight": 1e-3, "nthread": 1} if kind == "xgboost" else \
        {"num_leaves": 7, "min_sum_hessian_in_leaf": 1e-3, "min_data_in_leaf": 2, "num_threads": 1}
    objective = "rank:pairwise" if kind == "xgboost" else "lambdarank"
    return {"metrics": ["ndcg@10"], "methods": {"m": {"gbdt": kind, "objective": objective, "params": params,
                                                     "num_trees": 3, "early_stopping_rounds": 50}}}


@pytest.mark.parametrize("kind, module", [("xgboost", gbdt), ("lightgbm", gbdt), ("neural", neural),
                                          ("linear", linear)])
def test_a_slow_load_is_reported_while_it_lasts(prepared, tmp_path, monkeypatch, capsys, kind, module):
    """A fold that takes long to load (here: until three heartbeat lines have come, counted, not
    timed) is reported while it loads, by the job's own lines, in every run kind."""
    monkeypatch.setenv(INTERVAL_ENV, "0.01")
    loading_records = threading.Semaphore(0)
    real_write, real_load = progress.write_progress, module.load_fold

    def counting_write(run_dir, record):
        real_write(run_dir, record)
        if record["phase"] == "loading the fold":
            loading_records.release()

    def slow_load(*args, **kwargs):
        for _ in range(4):  # the opening record and three heartbeat lines
            assert loading_records.acquire(timeout=120), "no progress line while the fold loads"
        return real_load(*args, **kwargs)

    monkeypatch.setattr(progress, "write_progress", counting_write)
    monkeypatch.setattr(module, "load_fold", slow_load)
    method = "ranknet" if kind == "neural" else "m"
    out = run_job(_slow_load_config(kind), prepared, tmp_path / "run", method=method, seed=0, device="cpu", quiet=True)
    err = capsys.readouterr().err.splitlines()
    loading = [ln for ln in err if ln.startswith(f"progress {method}/0: loading the fold, elapsed ")]
    assert len(loading) >= 4
    assert (out / "run.json").exists() and not progress_path(out).exists()


@pytest.mark.parametrize("command, module, name", [
    (["prepare", "synthetic", "--fold", "Fold1", "--options", '{"n_queries": 6, "list_length": 4, "n_features": 3}'],
     "bench.data.prepare", "prepare_fold"),
    (["fetch", "mslr-web10k"], "bench.data.fetch", "fetch"),
])
def test_fetch_and_prepare_report_while_they_run(tmp_path, monkeypatch, capsys, command, module, name):
    """The data jobs get the same heartbeat, without the opening line (a quick fetch or a one-line
    error stays as it was): a line every interval while the work (here held until three lines
    have come: counted, not timed) goes on."""
    import importlib

    from bench.cli import main as cli_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(INTERVAL_ENV, "0.01")
    lines = threading.Semaphore(0)
    real_format = progress.format_line

    def counting_format(*args, **kwargs):
        lines.release()
        return real_format(*args, **kwargs)

    def result(log):
        log("done")
        return tmp_path if name == "fetch" else type("Fold", (), {"fingerprint": "f"})()

    def slow(*args, log, **kwargs):
        for _ in range(3):  # three heartbeat lines
            assert lines.acquire(timeout=120), "no progress line while the job works"
        return result(log)

    monkeypatch.setattr(progress, "format_line", counting_format)
    monkeypatch.setattr(importlib.import_module(module), name, slow)
    assert cli_main([*command, *(["--out", "p"] if name == "prepare_fold" else [])]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress ")]
    assert len(err) >= 3
    monkeypatch.setenv(INTERVAL_ENV, "30")  # a quick job (the fake returns at once): nothing printed
    monkeypatch.setattr(importlib.import_module(module), name, lambda *a, log, **k: result(log))
    assert cli_main([*command, *(["--out", "p"] if name == "prepare_fold" else [])]) == 0
    assert not [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("progress ")]

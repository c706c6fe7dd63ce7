"""Neural trainer: outputs, determinism, resume after a kill, NaN guard, budgets, every loss.

All runs use a tiny prepared fold (48/16/16 queries, 8 features) and a tiny MLP, 1-3 epochs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from bench import losses
from bench.atomic.progress import read_progress
from bench.errors import ConfigError, TrainingDiverged
from bench.results import RUN_JSON_KEYS
from bench.training.batches import epoch_lists, split_to_tensors
from bench.training.cli import run_job
from bench.training.loop import EXIT_ENV, EXIT_STATUS
from bench.training.state import default_checkpoint_dir
from helpers import TOY_METRICS, make_prepared, toy_neural_config

METRICS = TOY_METRICS


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/training/conftest.py


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return make_prepared(tmp_path_factory.mktemp("prep") / "toy" / "fold1")


def _config(**train) -> dict:
    return toy_neural_config("softmax", **train)


def test_outputs_complete(prepared, tmp_path):
    out = run_job(_config(), prepared, tmp_path / "run", method="ranknet", seed=0, device="cpu", quiet=True)
    assert sorted(p.name for p in out.iterdir()) == ["curve.csv", "digests.json", "metrics.parquet", "run.json", "scores.npy"]
    info = json.loads((out / "run.json").read_text())
    assert set(RUN_JSON_KEYS) <= set(info)
    assert info["kind"] == "neural" and info["device"] == "cpu" and len(info["protocol_hash"]) == 64
    assert info["config"]["loss"] == "ranknet" and info["config"]["train"]["epochs"] == 2
    assert "loss" not in info["protocol"] and info["protocol"]["seed"] == 0
    assert info["wall_time_s"] > 0 and info["peak_memory"]["host_max_rss_bytes"] > 0
    test_labels = np.load(prepared / "test" / "labels.npy")
    scores = np.load(out / "scores.npy")
    assert scores.dtype == np.float32 and scores.shape == test_labels.shape and np.isfinite(scores).all()
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert list(metrics.columns[:5]) == ["dataset", "fold", "method", "seed", "query"]
    assert set(METRICS) <= set(metrics.columns) and "arp:dropped" in metrics
    assert metrics["query"].tolist() == np.load(prepared / "test" / "qids.npy").tolist()
    curve = pd.read_csv(out / "curve.csv")
    assert curve["epoch"].tolist() == [1, 2]
    assert {"train_loss", "lr", "tau", "vali_ndcg@10", "vali_arp"} <= set(curve.columns)
    assert not default_checkpoint_dir(out).exists()


def _real_docs(prepared: Path, list_size: int) -> int:
    """Real documents of one epoch's training lists: min(query length, list_size) per query."""
    offsets = np.load(prepared / "train" / "offsets.npy")
    return int(np.minimum(np.diff(offsets), list_size).sum())


def test_run_json_records_training_only_time_and_documents(prepared, tmp_path):
    """train_docs counts real documents (no padding), docs/s x seconds = documents, seconds
    per epoch x epochs = training seconds, and training is a part of the run's wall time."""
    out = run_job(_config(epochs=2), prepared, tmp_path / "run", method="ranknet", seed=0, device="cpu", quiet=True)
    info = json.loads((out / "run.json").read_text())
    assert info["train_docs"] == 2 * _real_docs(prepared, 12)
    assert 0 < info["train_seconds"] < info["wall_time_s"]
    assert info["train_docs_per_s"] * info["train_seconds"] == pytest.approx(info["train_docs"], rel=1e-9)
    assert info["seconds_per_epoch"] * 2 == pytest.approx(info["train_seconds"], rel=1e-9)
    curve = pd.read_csv(out / "curve.csv")
    assert "train_seconds" not in curve  # curve.csv's schema is unchanged
    assert info["train_seconds"] < curve["seconds"].sum()  # the epochs' seconds include validation


def test_run_json_training_time_under_a_step_budget(prepared, tmp_path):
    """A step budget that ends the last epoch early: seconds_per_epoch is per full epoch's steps."""
    out = run_job(_config(epochs=None, max_steps=8), prepared, tmp_path / "r", method="ranknet", seed=0,
                  device="cpu", quiet=True)
    info = json.loads((out / "run.json").read_text())
    assert info["result"]["steps"] == 8
    # 48 queries: 6 full batches of 8 lists, then 2 batches of the second epoch
    assert _real_docs(prepared, 12) < info["train_docs"] < 2 * _real_docs(prepared, 12)
    assert info["seconds_per_epoch"] == pytest.approx(info["train_seconds"] * 6 / 8, rel=1e-9)


def test_protocol_excludes_the_loss(prepared, tmp_path):
    cfg = _config()
    a = run_job(cfg, prepared, tmp_path / "a", method="ranknet", seed=3, device="cpu", quiet=True)
    b = run_job(cfg, prepared, tmp_path / "b", method="softmax", seed=3, device="cpu", quiet=True)
    c = run_job(cfg, prepared, tmp_path / "c", method="cae", seed=3, device="cpu", quiet=True)
    ha, hb, hc = (json.loads((p / "run.json").read_text())["protocol_hash"] for p in (a, b, c))
    assert ha == hb != hc  # same protocol for two losses; a different model is a different protocol


def test_two_cpu_runs_are_bit_identical(prepared, tmp_path):
    cfg = _config()
    runs = [
        run_job(cfg, prepared, tmp_path / f"r{i}", method="cae", seed=7, device="cpu", quiet=True) for i in range(2)
    ]
    assert json.loads((runs[0] / "run.json").read_text())["torch_threads"] == 1
    m0, m1 = (pd.read_parquet(r / "metrics.parquet") for r in runs)
    pd.testing.assert_frame_equal(m0, m1, check_exact=True)
    assert np.load(runs[0] / "scores.npy").tobytes() == np.load(runs[1] / "scores.npy").tobytes()
    other = run_job(_config(epochs=1), prepared, tmp_path / "s8", method="cae", seed=8, device="cpu", quiet=True)
    assert np.load(other / "scores.npy").tobytes() != np.load(runs[0] / "scores.npy").tobytes()


def _cli(prepared: Path, out: Path, cfg_path: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads()), **(env_extra or {})}
    cmd = [sys.executable, "-m", "bench.cli", "train", "--prepared", str(prepared), "--out", str(out),
           "--method", "ranknet", "--seed", "1", "--config", str(cfg_path), "--device", "cpu", "--quiet",
           "--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow  # about 15 s: two trainings and a kill (tests/test_resume.py covers the decision fast)
def test_resume_after_kill_equals_uninterrupted(prepared, tmp_path):
    """Process 1 exits hard right after epoch 1's checkpoint; process 2 resumes and must end
    with exactly the metrics and curve of an uninterrupted process (2 epochs each)."""
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(epochs=2)))
    full = _cli(prepared, tmp_path / "full", cfg_path)
    assert full.returncode == 0, full.stderr
    killed = _cli(prepared, tmp_path / "resumed", cfg_path, {EXIT_ENV: "1"})
    assert killed.returncode == EXIT_STATUS, killed.stderr
    assert not (tmp_path / "resumed").exists()
    ckpt = default_checkpoint_dir(tmp_path / "resumed") / "last.pt"
    state = torch.load(ckpt, weights_only=True)
    assert state["epoch"] == 1 and len(state["curve"]) == 1
    left = read_progress(tmp_path / "resumed")  # the killed run's record stays: it was interrupted
    assert left["kind"] == "neural" and left["done"] == 6 and left["vali"]["best_at"] == 1
    resumed = _cli(prepared, tmp_path / "resumed", cfg_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    assert read_progress(tmp_path / "resumed") is None and read_progress(tmp_path / "full") is None
    info = json.loads((tmp_path / "resumed" / "run.json").read_text())
    assert info["result"]["resumed_from_epoch"] == 1
    # the training time and documents of both process segments are counted
    assert info["train_docs"] == json.loads((tmp_path / "full" / "run.json").read_text())["train_docs"]
    assert info["train_docs"] == 2 * _real_docs(prepared, 12) and state["train_docs"] == _real_docs(prepared, 12)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "full" / "metrics.parquet"),
        pd.read_parquet(tmp_path / "resumed" / "metrics.parquet"),
        check_exact=True,
    )
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "full" / "curve.csv").drop(columns="seconds"),
        pd.read_csv(tmp_path / "resumed" / "curve.csv").drop(columns="seconds"),
        check_exact=True,
    )


@pytest.fixture
def user_losses(tmp_path, monkeypatch):
    """A user module with deliberately broken losses, importable as ``train_bad_losses:...``.

    The module name is unique to this file (and evicted from ``sys.modules``) so another
    test's user module of a similar name cannot shadow it.
    """
    monkeypatch.delitem(sys.modules, "train_bad_losses", raising=False)
    (tmp_path / "train_bad_losses.py").write_text(
        textwrap.dedent(
            '''
            import torch

            def nan_loss(scores, labels, mask):
                """Forward value NaN."""
                return scores.sum() * float("nan")

            def nan_grad_loss(scores, labels, mask):
                """Finite forward value (0), NaN gradient: d sqrt(|x|)/dx at x = 0."""
                return (scores - scores.detach()).abs().sqrt().sum()
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("loss, what", [("train_bad_losses:nan_loss", "loss"), ("train_bad_losses:nan_grad_loss", "gradient")])
def test_non_finite_loss_or_gradient_stops_without_results(prepared, tmp_path, user_losses, loss, what):
    cfg = _config()
    cfg["methods"]["bad"] = {"loss": loss}
    out = tmp_path / "bad_run"
    with pytest.raises(TrainingDiverged, match=rf"non-finite {what} in epoch 1, batch 1 \(step 1\)"):
        run_job(cfg, prepared, out, method="bad", seed=0, device="cpu", quiet=True)
    assert not out.exists()


def test_absurd_learning_rate_is_caught(prepared, tmp_path):
    cfg = _config(lr=1e30, epochs=3)
    with pytest.raises(TrainingDiverged, match="non-finite"):
        run_job(cfg, prepared, tmp_path / "r", method="ranknet", seed=0, device="cpu", quiet=True)
    assert not (tmp_path / "r").exists()


def test_patience_stops_and_restores_best(prepared, tmp_path):
    """Patience 1 stops one epoch after the best validation epoch ``b`` (or the budget ends);
    the restored weights are epoch ``b``'s, so the test metrics equal those of a run with an
    ``epochs: b`` budget (the first ``b`` epochs draw exactly the same random numbers).
    With lr 0.1 on this fold validation NDCG drops after epoch 1, so the restore is exercised."""
    stopped = run_job(_config(epochs=6, patience=1, lr=0.1), prepared, tmp_path / "a",
                        method="ranknet", seed=0, device="cpu", quiet=True)
    res = json.loads((stopped / "run.json").read_text())["result"]
    b = res["best_epoch"]
    assert res["checkpoint"] == "best" and res["tested_epoch"] == b and res["refit"] is None
    assert (res["stopped_early"] and res["epochs_run"] == b + 1) or (res["epochs_run"] == 6 and b == 6)
    curve = pd.read_csv(stopped / "curve.csv")
    assert curve["vali_ndcg@10"].iloc[b - 1] == curve["vali_ndcg@10"].max()
    short = run_job(_config(epochs=b, lr=0.1), prepared, tmp_path / "b",
                      method="ranknet", seed=0, device="cpu", quiet=True)
    pd.testing.assert_frame_equal(
        pd.read_parquet(stopped / "metrics.parquet"), pd.read_parquet(short / "metrics.parquet"), check_exact=True
    )


def test_step_budget_and_lr_decay(prepared, tmp_path):
    out = run_job(_config(epochs=None, max_steps=8, lr_step=1, lr_gamma=0.5), prepared, tmp_path / "r",
                    method="ranknet", seed=0, device="cpu", quiet=True)
    curve = pd.read_csv(out / "curve.csv")
    assert curve["step"].tolist() == [6, 8]  # 48 queries / 8 per batch = 6 steps per epoch
    assert curve["lr"].tolist() == [1e-3, 5e-4]


def test_tau_schedule_reaches_the_loss(prepared, tmp_path, monkeypatch):
    seen: list[float] = []
    real_get = losses.get

    def spy_get(name, **hyper):
        fn = real_get(name, **hyper)

        def wrapped(scores, labels, mask, *, tau=1.0):
            seen.append(tau)
            return fn(scores, labels, mask, tau=tau)

        return wrapped

    monkeypatch.setattr(losses, "get", spy_get)
    cfg = _config(epochs=3, tau_schedule={"kind": "exponential", "start": 4.0, "end": 0.25})
    cfg["methods"]["nn"] = {"loss": "neuralndcg"}
    out = run_job(cfg, prepared, tmp_path / "r", method="nn", seed=0, device="cpu", quiet=True)
    assert pd.read_csv(out / "curve.csv")["tau"].tolist() == [4.0, 1.0, 0.25]
    assert sorted(set(seen)) == [0.25, 1.0, 4.0] and len(seen) == 18


def test_test_list_size_subsamples_the_same_lists_for_every_method(prepared, tmp_path):
    cfg = _config(test_list_size=5, epochs=1)
    a = run_job(cfg, prepared, tmp_path / "a", method="ranknet", seed=0, device="cpu", quiet=True)
    b = run_job(cfg, prepared, tmp_path / "b", method="softmax", seed=4, device="cpu", quiet=True)
    sa, sb = np.load(a / "scores.npy"), np.load(b / "scores.npy")
    lengths = np.diff(np.load(prepared / "test" / "offsets.npy"))
    assert np.isfinite(sa).sum() == np.minimum(lengths, 5).sum()
    assert np.array_equal(np.isnan(sa), np.isnan(sb))


def test_split_tensors_share_the_mapped_arrays(prepared):
    """The features and labels tensors are the read-only mapping of the prepared files (no copy,
    no warning about it), and a batch gathered from them holds exactly the file's values."""
    import warnings

    from bench.data import load_prepared
    from bench.training.batches import gather

    split = load_prepared(prepared).splits["vali"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = split_to_tensors(split, torch.device("cpu"))
    assert np.shares_memory(data.features.numpy(), split.features)
    assert np.shares_memory(data.labels.numpy(), split.labels)
    rows = torch.tensor([[3, 0, -1], [7, 2, 5]])
    x, y, mask = gather(data, rows, torch.device("cpu"))
    assert x.numpy().tobytes() == np.asarray(split.features)[rows.clamp(min=0).numpy()].tobytes()
    assert mask.tolist() == [[True, True, False], [True, True, True]]
    assert y.tolist() == [[float(split.labels[3]), float(split.labels[0]), 0.0],
                          [float(split.labels[7]), float(split.labels[2]), float(split.labels[5])]]


def test_a_device_store_gets_its_own_copy_of_the_mapped_split(prepared):
    """The CUDA feature store's path (``split_to_tensors(split, store)`` with ``store`` not the
    CPU) copies the read-only mapping to that device; the meta device stands in for a GPU."""
    from bench.data import load_prepared

    split = load_prepared(prepared).splits["test"]
    data = split_to_tensors(split, torch.device("meta"))
    assert data.features.device.type == data.labels.device.type == data.qidx.device.type == "meta"
    assert tuple(data.features.shape) == split.features.shape and data.features.dtype == torch.float32
    assert data.labels_np.tobytes() == np.asarray(split.labels).tobytes()  # the host arrays stay


def test_releasing_a_split_drops_its_pages_and_keeps_its_values(tmp_path):
    """``release_pages`` takes a mapped split's pages out of the process's resident set (64 MB
    of features read whole: RSS falls by at least 56 MB) and a later read sees the same bytes."""
    from bench.data.prepared import Split
    from bench.perf.process import rss_bytes

    n, f = 1 << 16, 256
    np.save(tmp_path / "features.npy", np.random.default_rng(0).standard_normal((n, f), dtype=np.float32))
    features = np.load(tmp_path / "features.npy", mmap_mode="r")
    split = Split(features, np.zeros(n, np.float32), np.array([1], np.int64), np.array([0, n], np.int64))
    data = split_to_tensors(split, torch.device("cpu"))
    total = float(data.features.sum())  # every page read
    before = rss_bytes()
    data.release_pages()
    assert before - rss_bytes() >= 56 * 2**20
    assert float(data.features.sum()) == total
    assert data.features.numpy().tobytes() == np.load(tmp_path / "features.npy").tobytes()


def test_cuda_asked_without_a_gpu_trains_on_the_cpu_with_the_same_bytes(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = _config(epochs=1)
    cuda = run_job(cfg, prepared, tmp_path / "cuda", method="ranknet", seed=2, device="cuda", quiet=True)
    cpu = run_job(cfg, prepared, tmp_path / "cpu", method="ranknet", seed=2, device="cpu", quiet=True)
    info = json.loads((cuda / "run.json").read_text())
    assert info["device"] == "cpu" and info["data_on_device"] == "cpu"
    assert (cuda / "scores.npy").read_bytes() == (cpu / "scores.npy").read_bytes()


def test_list_size_never_exceeds_the_longest_training_query(prepared):
    """``L_train`` is ``train.list_size`` capped at the longest training query (null: that query)."""
    from types import SimpleNamespace

    from bench.training.loop import _list_size

    train = SimpleNamespace(offsets_np=np.array([0, 3, 10, 14]))  # queries of 3, 7 and 4 documents
    assert [_list_size({"list_size": size}, train) for size in (None, 2, 7, 60)] == [7, 2, 7, 7]


def test_padding_beyond_the_longest_query_trains_the_same_bytes(prepared, tmp_path):
    """A list size far above every training query trains exactly the run at the longest query's size
    (without the cap the extra padding changes the losses' rounding, and so the scores)."""
    longest = int(np.diff(np.load(prepared / "train" / "offsets.npy")).max())
    cfg = toy_neural_config("ranknet")
    runs = []
    for size in (longest, 10 * longest):
        cfg["train"]["list_size"] = size
        out = run_job(cfg, prepared, tmp_path / str(size), method="ranknet", seed=0, device="cpu", quiet=True)
        runs.append(np.load(out / "scores.npy"))
    assert np.array_equal(runs[0], runs[1])


def test_epoch_lists_subsample_and_pad(prepared):
    from bench.data import load_prepared

    split = load_prepared(prepared).splits["train"]
    data = split_to_tensors(split, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    lists, order = epoch_lists(data, 10, gen)
    offsets = np.asarray(split.offsets)
    lengths = np.diff(offsets)
    rows = lists.numpy()
    assert sorted(order.tolist()) == list(range(len(lengths)))
    real = rows >= 0
    assert np.array_equal(real.sum(1), np.minimum(lengths, 10))
    assert np.all(real[:, :-1] >= real[:, 1:])  # padding only at the end
    q = np.repeat(np.arange(len(lengths))[:, None], 10, axis=1)
    assert np.all((rows[real] >= offsets[q[real]]) & (rows[real] < offsets[q[real] + 1]))
    assert all(len(set(r[r >= 0])) == (r >= 0).sum() for r in rows)
    again, _ = epoch_lists(data, 10, gen)
    assert not torch.equal(again, lists)  # a fresh draw every epoch


def test_checkpoint_loads_weights_only(prepared, tmp_path):
    out = run_job(_config(epochs=1, keep_checkpoint=True), prepared, tmp_path / "r",
                    method="ranknet", seed=0, device="cpu", quiet=True)
    state = torch.load(default_checkpoint_dir(out) / "last.pt", weights_only=True)
    assert {"model", "optimizer", "loss", "rng", "best", "curve", "epoch"} <= set(state)
    assert isinstance(state["rng"]["lists"], torch.Tensor) and state["done"] is True


@pytest.mark.parametrize("every_s, saved_after", [(0.0, [1, 2, 3, 4]), (3600.0, [4])])
def test_checkpoints_are_written_after_an_epoch_once_enough_time_passed_and_after_the_last(
        prepared, tmp_path, monkeypatch, every_s, saved_after):
    from bench.training import loop

    saved = []
    real = loop.save_checkpoint
    monkeypatch.setattr(loop, "CHECKPOINT_SECONDS", every_s)
    monkeypatch.setattr(loop, "save_checkpoint", lambda path, state: (saved.append(state["epoch"]), real(path, state)))
    out = run_job(_config(epochs=4, keep_checkpoint=True), prepared, tmp_path / "r", method="ranknet", seed=0,
                  device="cpu", quiet=True)
    assert saved == saved_after
    assert torch.load(default_checkpoint_dir(out) / "last.pt", weights_only=True)["epoch"] == 4


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda c: c["train"].update(bach_size=3), "train.bach_size"),
        (lambda c: c["methods"]["ranknet"].update(params={"sigmaa": 1}), r"^methods\.ranknet\.params\.sigmaa: "),
        (lambda c: c["methods"]["ranknet"].update(loss="no_such_loss"), "methods.ranknet.loss"),
        (lambda c: c["methods"]["ranknet"].update(loss="no_such_module:fn"), r"^methods\.ranknet\.loss: .*no_such_module"),
        (lambda c: c["methods"]["ranknet"].update(loss="examples.my_loss:no_such_fn"), r"^methods\.ranknet\.loss: "),
        (lambda c: c["methods"]["ranknet"].update(train={"tau_schedule": {"kind": "constant", "value": 1}}),
         "methods.ranknet.train.tau_schedule"),
        (lambda c: c["methods"]["ranknet"].update(model={"hidden": 3}), "methods.ranknet.model.hidden"),
        (lambda c: c["train"].update(early_stopping_metric="ndcg10"), "train.early_stopping_metric"),
        (lambda c: c.update(metrics=["ndcg@10", "nope"]), r"metrics.names.1"),
    ],
)
def test_config_errors_name_the_key(prepared, tmp_path, mutate, match):
    cfg = _config()
    mutate(cfg)
    with pytest.raises(ConfigError, match=match):
        run_job(cfg, prepared, tmp_path / "r", method="ranknet", seed=0, device="cpu", quiet=True)
    assert not (tmp_path / "r").exists()


def test_cli_reports_config_errors(prepared, tmp_path):
    from bench.cli import main

    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(_config()))
    rc = main(["train", "--prepared", str(prepared), "--out", str(tmp_path / "r"), "--method", "nope",
               "--seed", "0", "--config", str(cfg_path), "--device", "cpu", "--quiet"])
    assert rc == 2 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("name", losses.names())
def test_every_registered_loss_trains_one_epoch(prepared, tmp_path, name):
    cfg = _config(epochs=1)
    cfg["methods"]["x"] = {"loss": name}
    out = run_job(cfg, prepared, tmp_path / "r", method="x", seed=0, device="cpu", quiet=True)
    curve = pd.read_csv(out / "curve.csv")
    assert len(curve) == 1 and np.isfinite(curve["train_loss"]).all()
    info = json.loads((out / "run.json").read_text())
    if losses.has_parameters(name):
        assert info["result"]["loss_parameters"]  # e.g. ARF's alpha is trained and recorded


def test_tau_schedule_sets_the_attribute_of_a_module_loss():
    """ARF's forward takes no ``tau``: the schedule sets the module's ``tau`` before each call,
    and its learnable alpha is handed to the optimiser."""
    from bench.config.settings import resolve_neural
    from bench.training.loss import make_loss

    cfg = _config(tau_schedule={"kind": "constant", "value": 0.5})
    cfg["methods"]["arf"] = {"loss": "arf", "params": {"m": 3, "k": 2}}
    call = make_loss(resolve_neural(cfg, "arf"), "arf")
    assert call.tau_mode == "attribute" and call.module is not None
    scores = torch.randn(2, 5, requires_grad=True)
    labels = torch.tensor([[3.0, 1, 0, 2, 0], [1.0, 0, 0, 1, 0]])
    value = call(scores, labels, torch.ones(2, 5, dtype=torch.bool), tau=0.5, gen=None)
    assert call.fn.tau == 0.5 and torch.isfinite(value)
    assert any(p.requires_grad for p in call.module.parameters())


def test_the_gradient_norm_without_clipping_is_clip_grad_norms_to_the_bit():
    """``train.grad_clip: null`` reads the norm with ``nn.utils.get_total_norm`` (foreach)
    instead of clipping at infinity (which multiplies every gradient by 1): the same value, bit
    for bit, as ``clip_grad_norm_(params, inf)`` over the parameters that have a gradient, and
    inf when a gradient is."""
    import math

    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 5), nn.ReLU(), nn.Linear(5, 1))
    unused = nn.Parameter(torch.ones(3))
    model(torch.randn(11, 7)).sum().backward()
    params = [*model.parameters(), unused]

    def norm(ps):  # as bench.training.loop.train_step reads it
        return nn.utils.get_total_norm([p.grad for p in ps if p.grad is not None], foreach=True)

    ours = norm(params)
    assert torch.equal(ours, nn.utils.clip_grad_norm_(params, math.inf))
    assert ours.item() > 0
    params[0].grad[0, 0] = math.inf
    assert norm(params).item() == math.inf
    assert norm([unused]).item() == 0.0

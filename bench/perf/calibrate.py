"""Calibration: short measurements of the study's jobs on the device at hand (``ltr-bench plan``).

A projection of a job's time and memory (:mod:`bench.costs`) multiplies measured rates by the
job's budget and extrapolates measured memory to the job's data. The measurements are the
real training, GBDT, least-squares, evaluation and prepare code run on generated data of the
planned shape (feature count, list lengths, list size, batch size, model, loss), small enough
to take seconds. Each measurement :data:`MEASURES` knows is one function ``spec -> dict``:

``neural_step``
    a few optimiser steps of the method's model and loss on ``[batch_size, list_size,
    n_features]`` batches (:func:`bench.training.loop.setup`, the loop's own step):
    ``step_s`` (median seconds per step), ``work_bytes`` (peak memory of the steps beyond what
    setup held: gradients, Adam's moments, activations, the loss's temporaries) and
    ``n_params`` (the model's parameters).
``neural_eval``
    scoring and grading a validation split of queries ``width`` long in evaluation batches
    (:func:`~bench.training.batches.score_lists` + the metrics): ``docs_per_s``, ``work_bytes``.
``summary``
    the statistics of a table at its planned size (methods x seeds x test queries): ``seconds``,
    ``peak_bytes``.
``process``
    the resident size a job starts from.
``neural_data``, ``gbdt``, ``linear``, ``evaluate``, ``prepare``
    the data-dependent part, measured at two sizes of the planned fold (see :data:`FRACTIONS`)
    so that time and peak memory can be fitted as ``a + b * documents`` and extrapolated:
    ``sizes`` (documents of the fold measured), ``peak_bytes`` and ``seconds`` per size (GBDT:
    also at two round counts, to separate the per-round time from the rest).

Every measurement runs in a child process forked from the calibrating process after it has
imported what the workflow's job server imports (:data:`bench.jobserver.PRELOAD`) and before
it has run any torch operation: the state every workflow job starts from. So its peak memory
(the kernel's ``VmHWM``, which starts at the child's resident size at fork, and can be reset
with ``/proc/self/clear_refs``) is what such a job would see, and one measurement cannot
inflate the next. Linux only (the fork, ``/proc``); elsewhere ``ltr-bench plan`` says so.

Generated data (:func:`fake_fold`): standard-normal features, grades 0-4 that depend on the
features (so trees and models have something to fit: a GBDT on random labels stops growing
early and would look cheaper than it is), list lengths subsampled from the planned split's own
lengths when they are known, else drawn lognormal with its mean (MSLR-like spread), the
longest planned list always included.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

SPLITS = ("train", "vali", "test")
#: the two fractions of the planned fold measured by the size-dependent measurements; the
#: smaller has at least MIN_DOCS documents (a small fold: half of it, then all of it)
FRACTIONS = (0.05, 0.1)
MIN_DOCS = 20_000
#: timed optimiser steps: at least MIN_STEPS, until STEP_SECONDS have passed, at most MAX_STEPS
MIN_STEPS, MAX_STEPS, STEP_SECONDS, WARMUP_STEPS = 3, 20, 3.0, 2
EVAL_DOCS = 40_000  # documents of the generated validation split of ``neural_eval``
GBDT_ROUNDS = (3, 9)  # boosting rounds of the two GBDT measurements at each size
#: generating synthetic data takes about a second per 100,000 documents, so at 5 % and 10 % of an
#: MSLR-sized fold the difference (1.3 s) drowned in start-up noise (projections 0.35-1.1x the
#: measured 31 s); at 10 % and 25 % it is 4 s
SYNTHETIC_PREPARE_FRACTIONS = (0.1, 0.25)


# ----------------------------------------------------------------------------- process memory


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def rss_bytes() -> int:
    """Resident size of this process now."""
    return _status_kb("VmRSS") * 1024


def peak_bytes() -> int:
    """Peak resident size of this process since it started or :func:`reset_peak`."""
    return _status_kb("VmHWM") * 1024


def reset_peak() -> None:
    """Reset the kernel's peak resident size (``VmHWM``) to the current resident size."""
    Path("/proc/self/clear_refs").write_text("5")


def preload() -> None:
    """Import what the job server imports (a job's starting state), without running anything."""
    from bench.jobserver import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)


_threads: list[int] = []  # the compute threads of the measurement under way (set by :func:`measure`)


def _set_threads() -> None:
    """In a child: the job's compute threads (environment for the libraries, torch's own)."""
    import sys

    if not _threads:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(_threads[-1])
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(_threads[-1])


def in_child(fn: Callable[[], dict[str, Any]], *, timeout: float = 3600.0) -> dict[str, Any]:
    """Run ``fn`` in a forked child; its JSON-able result, or RuntimeError with its traceback."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's stack
        os.close(r)
        quiet = os.open(os.devnull, os.O_WRONLY)  # the trainers' progress lines are not wanted here
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        try:
            _set_threads()
            payload = {"ok": fn()}
        except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
            payload = {"error": traceback.format_exc()}
        with os.fdopen(w, "w") as out:
            json.dump(payload, out)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        raise RuntimeError(f"calibration child died (wait status {status}) before reporting")
    payload = json.loads(text)
    if "error" in payload:
        raise RuntimeError("calibration failed in the child process:\n" + payload["error"])
    return payload["ok"]


# ----------------------------------------------------------------------------- generated data


def fake_lengths(split: dict[str, Any], n_docs: int, rng: np.random.Generator) -> np.ndarray:
    """About ``n_docs`` documents' worth of list lengths shaped like the planned ``split``.

    ``split``: ``n_queries``, ``n_docs``, ``max_list`` (or None) and ``lengths`` (a histogram
    ``{values, counts}`` of the planned per-query lengths, or None). The longest planned list is always included.
    """
    mean = split["n_docs"] / max(split["n_queries"], 1)
    n_q = max(1, int(round(n_docs / max(mean, 1.0))))
    if split.get("lengths") is not None:  # a histogram {values, counts} of the planned lengths
        pool = np.repeat(np.asarray(split["lengths"]["values"], dtype=np.int64), split["lengths"]["counts"])
        lengths = rng.choice(pool, size=n_q, replace=n_q > pool.size)
    else:
        sigma = 0.65
        mu = math.log(max(mean, 1.0)) - sigma**2 / 2
        cap = split.get("max_list") or int(10 * mean) + 1
        lengths = np.clip(np.rint(rng.lognormal(mu, sigma, n_q)), 1, cap).astype(np.int64)
    if split.get("max_list"):
        lengths[0] = int(split["max_list"])
    return lengths


def fake_split(lengths: np.ndarray, n_features: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A split's arrays (prepared layout) with grades 0-4 that depend on the features."""
    n = int(lengths.sum())
    features = rng.standard_normal((n, n_features), dtype=np.float32)
    k = min(4, n_features)
    score = features[:, :k].sum(axis=1) / math.sqrt(k) + 0.5 * rng.standard_normal(n)
    labels = np.searchsorted([0.0, 1.0, 1.6, 2.2], score).astype(np.float32)  # ~50/34/10/4/2 %
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    qids = np.arange(1, lengths.size + 1, dtype=np.int64)
    return {"features": features, "labels": labels, "qids": qids, "offsets": offsets}


def fake_fold(path: Path, shape: dict[str, Any], fraction: float, seed: int = 0) -> int:
    """Write a prepared fold of ``fraction`` of the planned ``shape`` at ``path``; its documents
    (:func:`fold_bytes` gives its size).

    ``shape``: ``n_features`` and ``splits`` (split -> ``n_queries``, ``n_docs``, ``max_list``,
    ``lengths``), as :func:`bench.costs.model.shape_spec` describes a planned fold.
    """
    from bench.data.prepared import FORMAT_VERSION, fingerprint, save_prepared

    rng = np.random.default_rng(seed)
    splits = {s: fake_split(fake_lengths(shape["splits"][s], max(1, int(shape["splits"][s]["n_docs"] * fraction)),
                                         rng), int(shape["n_features"]), rng) for s in SPLITS}
    meta = {"format_version": FORMAT_VERSION, "dataset": "calibration", "fold": "Fold1",
            "n_features": int(shape["n_features"]), "options": {}, "fingerprint": fingerprint(splits),
            "splits": {s: {"n_docs": int(sp["labels"].size), "n_queries": int(sp["qids"].size)}
                       for s, sp in splits.items()}}
    save_prepared(path, splits, meta)
    return sum(int(sp["labels"].size) for sp in splits.values())


def fold_bytes(path: Path) -> int:
    """Bytes of a prepared fold's arrays (what a job that reads the whole fold maps), or of one
    split's when ``path`` is the split's folder."""
    path = Path(path)
    return sum(f.stat().st_size for f in (path.glob("*.npy") if (path / "features.npy").exists()
                                          else path.glob("*/*.npy")))


def fractions(shape: dict[str, Any], base: tuple[float, float] = FRACTIONS) -> tuple[float, float]:
    """The two fractions of the planned fold to measure (``base``, the smaller at least MIN_DOCS)."""
    total = sum(s["n_docs"] for s in shape["splits"].values())
    small = max(base[0], min(0.5, MIN_DOCS / max(total, 1)))
    return (small, min(1.0, small * base[1] / base[0]))


# ----------------------------------------------------------------------------- neural


def _run_config(spec: dict[str, Any]) -> dict[str, Any]:
    """A one-method run config of the spec's model, loss and batch shapes (budgets irrelevant)."""
    train = {"batch_size": spec.get("batch_size", 16), "list_size": spec.get("list_size"),
             "test_list_size": spec.get("test_list_size"), "epochs": 1,
             "amp": bool(spec.get("amp", False)), "eval_batch_size": spec.get("eval_batch_size", 256),
             "grad_clip": spec.get("grad_clip")}
    method = {"loss": spec.get("loss", "ranknet"), "params": dict(spec.get("params") or {})}
    return {"model": spec["model"], "train": train, "metrics": list(spec.get("metrics") or ["ndcg@10"]),
            "methods": {"calibration": method}}


def _in_memory_fold(splits: dict[str, dict[str, np.ndarray]], n_features: int) -> SimpleNamespace:
    return SimpleNamespace(splits={s: SimpleNamespace(**a) for s, a in splits.items()},
                           meta={"n_features": n_features}, fingerprint="calibration")


def _fit(spec: dict[str, Any], prepared, device):
    """:func:`bench.training.loop.setup` of the spec's run on ``prepared`` (a prepared fold, or
    split -> arrays held in memory)."""
    from bench.config.settings import resolve_neural
    from bench.training.loop import setup
    from bench.training.loss import make_loss

    cfg = resolve_neural(_run_config(spec), "calibration")
    loss_call = make_loss(cfg, "calibration")
    if isinstance(prepared, dict):
        prepared = _in_memory_fold(prepared, spec["n_features"])
    return setup(cfg, loss_call, prepared, ("calibration", "Fold1", "m", 0), device)


def neural_step(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """Seconds per optimiser step and the steps' working memory (module docstring)."""
    import torch

    from bench.training.device import deterministic, resolve_device
    from bench.training.loop import train_step

    dev = resolve_device(device, on_missing_cuda=None)
    rng = np.random.default_rng(0)
    L, B = int(spec["list_size"]), int(spec["batch_size"])
    lengths = np.full(B * (WARMUP_STEPS + MAX_STEPS), L, dtype=np.int64)
    small = fake_split(np.full(B, L, dtype=np.int64), spec["n_features"], rng)
    splits = {"train": fake_split(lengths, spec["n_features"], rng), "vali": small, "test": small}
    with deterministic(dev):
        f = _fit(spec, splits, dev)
        rows = torch.arange(lengths.sum(), device=f.store).reshape(-1, L)
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(dev)
        base_host, base_dev = rss_bytes(), _cuda_allocated(dev)
        reset_peak()
        times = []
        for i in range(WARMUP_STEPS + MAX_STEPS):
            t = time.perf_counter()
            train_step(f, rows[i * B:(i + 1) * B], lr=1e-4, tau=None)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if i >= WARMUP_STEPS:
                times.append(time.perf_counter() - t)
                if len(times) >= MIN_STEPS and sum(times) >= STEP_SECONDS:
                    break
        n_params = sum(p.numel() for p in f.trainables.model.parameters())
        return {"step_s": statistics.median(times), "steps_timed": len(times),
                "work_bytes": peak_bytes() - base_host, "n_params": int(n_params),
                "device_work_bytes": _cuda_peak(dev) - base_dev if dev.type == "cuda" else None}


def neural_eval(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """Validation throughput (documents per second, scoring + metrics) and its working memory."""
    from bench.training.device import deterministic, resolve_device
    from bench.training.loop import _validate

    dev = resolve_device(device, on_missing_cuda=None)
    rng = np.random.default_rng(0)
    width = max(1, int(spec["width"]))
    n_q = max(1, EVAL_DOCS // width)
    vali = fake_split(np.full(n_q, width, dtype=np.int64), spec["n_features"], rng)
    small = fake_split(np.full(2, width, dtype=np.int64), spec["n_features"], rng)
    with deterministic(dev):
        f = _fit({**spec, "batch_size": 2, "list_size": width}, {"train": small, "vali": vali, "test": small}, dev)
        _validate(f, 0)  # warm-up: first-call allocations
        base = rss_bytes()
        reset_peak()
        t = time.perf_counter()
        _validate(f, 0)
        seconds = time.perf_counter() - t
    return {"docs_per_s": int(vali["labels"].size) / seconds, "work_bytes": peak_bytes() - base}


def _cuda_allocated(dev) -> int:
    import torch

    return int(torch.cuda.memory_allocated(dev)) if dev.type == "cuda" else 0


def _cuda_peak(dev) -> int:
    import torch

    return int(torch.cuda.max_memory_allocated(dev))


def neural_data(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """Peak memory of a run's data at two sizes: the split tensors, evaluation lists, one
    epoch's training lists (a tiny linear model) and the fold memory-mapped as a run maps it
    (training and validation splits read whole, then the training split released and the test
    split read); ``fold_bytes``: the fold's bytes mapped at once at the peak."""

    def one(fraction: float) -> Callable[[], dict[str, Any]]:
        def measure() -> dict[str, Any]:
            import torch

            from bench.data import load_prepared
            from bench.training.batches import epoch_lists, gather, score_lists
            from bench.training.device import deterministic, resolve_device

            dev = resolve_device(device, on_missing_cuda=None)
            with tempfile.TemporaryDirectory(prefix="ltr-calibration-") as tmp:
                n_docs = fake_fold(Path(tmp) / "fold", spec["shape"], fraction)
                gc.collect()
                reset_peak()  # what the generator held is not the job's
                start = time.perf_counter()
                with deterministic(dev):
                    run_spec = {**spec, "model": {"type": "mlp", "hidden": [], "batch_norm": False, "dropout": 0.0},
                                "n_features": spec["shape"]["n_features"], "loss": "ranknet"}
                    prepared = load_prepared(Path(tmp) / "fold")
                    f = _fit(run_spec, prepared, dev)
                    lists, _ = epoch_lists(f.splits["train"], f.list_size, torch.Generator().manual_seed(0))
                    for chunk in lists.split(f.tc["batch_size"]):  # an epoch's batches
                        gather(f.splits["train"], chunk, dev)
                    # every page of a split mapped, as in a run of many batches; the training
                    # split released before the test split is read, as the run does
                    for split in ("train", "vali"):
                        _read_whole(prepared.splits[split].features)
                    score_lists(f.trainables.model, f.splits["vali"], f.evals["vali"], dev, False)
                    f.splits["train"].release_pages()
                    _read_whole(prepared.splits["test"].features)
                    score_lists(f.trainables.model, f.splits["test"], f.evals["test"], dev, False)
                    sizes = {s: fold_bytes(Path(tmp) / "fold" / s) for s in SPLITS}
                return {"docs": n_docs, "peak_bytes": peak_bytes(), "seconds": time.perf_counter() - start,
                        "fold_bytes": sizes["vali"] + max(sizes["train"], sizes["test"])}

        return measure

    return _two_sizes(spec["shape"], one)


def _read_whole(features: np.ndarray) -> None:
    for i in range(0, features.shape[0], 1 << 16):
        float(features[i:i + (1 << 16)].sum())


def _two_sizes(shape: dict[str, Any], one: Callable[[float], Callable[[], dict]],
               base: tuple[float, float] = FRACTIONS) -> dict[str, Any]:
    points = [in_child(one(fr)) for fr in fractions(shape, base)]
    return {"sizes": [p["docs"] for p in points], "peak_bytes": [p["peak_bytes"] for p in points],
            "seconds": [p["seconds"] for p in points], "fold_bytes": [p.get("fold_bytes") for p in points],
            "points": points}


# ----------------------------------------------------------------------------- other run kinds


def gbdt(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """``ltr-bench gbdt`` of the method at two sizes and two round counts (wall and peak)."""

    def one(fraction: float, rounds: int) -> Callable[[], dict[str, Any]]:
        def measure() -> dict[str, Any]:
            from bench.config.settings import resolve_gbdt
            from bench.training.gbdt import gbdt_run

            entry = {**spec["method"], "num_trees": rounds, "early_stopping_rounds": rounds + 1}
            config = {"methods": {"m": entry}, "metrics": spec.get("metrics"), "train": {}}
            with tempfile.TemporaryDirectory(prefix="ltr-calibration-") as tmp:
                n_docs = fake_fold(Path(tmp) / "fold", spec["shape"], fraction)
                gc.collect()
                reset_peak()  # what the generator held is not the job's
                start = time.perf_counter()
                gbdt_run(resolve_gbdt(config, "m"), Path(tmp) / "fold", Path(tmp) / "run", method="m", seed=0, device=device,
                         quiet=True, threads=spec.get("threads"))
                return {"docs": n_docs, "rounds": rounds, "peak_bytes": peak_bytes(),
                        "fold_bytes": fold_bytes(Path(tmp) / "fold"), "seconds": time.perf_counter() - start}

        return measure

    points = [in_child(one(fr, r)) for fr in fractions(spec["shape"]) for r in GBDT_ROUNDS]
    return {"points": points}


def linear(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """``ltr-bench linear`` of the method at two sizes."""

    def one(fraction: float) -> Callable[[], dict[str, Any]]:
        def measure() -> dict[str, Any]:
            from bench.config.settings import resolve_linear
            from bench.training.linear import linear_run

            config = {"methods": {"m": spec["method"]}, "metrics": spec.get("metrics"), "train": {}}
            with tempfile.TemporaryDirectory(prefix="ltr-calibration-") as tmp:
                n_docs = fake_fold(Path(tmp) / "fold", spec["shape"], fraction)
                gc.collect()
                reset_peak()  # what the generator held is not the job's
                start = time.perf_counter()
                linear_run(resolve_linear(config, "m"), Path(tmp) / "fold", Path(tmp) / "run", method="m", seed=0, device="cpu",
                           quiet=True)
                return {"docs": n_docs, "peak_bytes": peak_bytes(), "seconds": time.perf_counter() - start,
                        "fold_bytes": fold_bytes(Path(tmp) / "fold")}

        return measure

    return _two_sizes(spec["shape"], one)


def evaluate(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """``ltr-bench evaluate`` of ``n_runs`` runs on the test split, at two sizes."""

    def one(fraction: float) -> Callable[[], dict[str, Any]]:
        def measure() -> dict[str, Any]:
            from bench.evaluate import evaluate_runs
            from bench.results import write_frame

            with tempfile.TemporaryDirectory(prefix="ltr-calibration-") as tmp:
                n_docs = fake_fold(Path(tmp) / "fold", spec["shape"], fraction)
                n_test = int(np.load(Path(tmp) / "fold" / "test" / "labels.npy", mmap_mode="r").shape[0])
                rng = np.random.default_rng(1)
                runs = []
                for k in range(int(spec["n_runs"])):
                    run_dir = Path(tmp) / f"run{k}"
                    run_dir.mkdir()
                    np.save(run_dir / "scores.npy", rng.standard_normal(n_test).astype(np.float32))
                    runs.append({"method": f"m{k}", "seed": 0, "dir": str(run_dir)})
                gc.collect()
                reset_peak()  # what the generator held is not the job's
                start = time.perf_counter()
                frame = evaluate_runs(Path(tmp) / "fold", runs, spec["metrics"], dataset="calibration",
                                      fold="Fold1", list_sizes=spec.get("list_sizes") or None,
                                      convention=spec.get("convention", "default"))
                write_frame(frame, Path(tmp) / "out.parquet")
                return {"docs": n_docs, "peak_bytes": peak_bytes(), "seconds": time.perf_counter() - start,
                        "fold_bytes": fold_bytes(Path(tmp) / "fold")}

        return measure

    return _two_sizes(spec["shape"], one)


def prepare(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """``ltr-bench prepare``: synthetic data generated at two sizes of the planned fold, or a
    dense SVMlight file of the planned shape parsed at two sizes (file-based datasets)."""

    def one(fraction: float) -> Callable[[], dict[str, Any]]:
        def measure() -> dict[str, Any]:
            from bench.data.prepare import prepare_fold

            options = dict(spec.get("options") or {})
            with tempfile.TemporaryDirectory(prefix="ltr-calibration-") as tmp:
                files = None
                if spec["synthetic"]:
                    splits = spec["shape"]["splits"]
                    options.update(n_queries=max(1, int(splits["train"]["n_queries"] * fraction)),
                                   vali_queries=max(1, int(splits["vali"]["n_queries"] * fraction)),
                                   test_queries=max(1, int(splits["test"]["n_queries"] * fraction)))
                else:
                    files = _svmlight_files(Path(tmp), spec["shape"], fraction)
                _warm_prepare(Path(tmp), spec)  # compiled code is compiled once per process: not per size
                gc.collect()
                reset_peak()
                start = time.perf_counter()
                fold = prepare_fold("synthetic" if spec["synthetic"] else "calibration", "Fold1", Path(tmp) / "out",
                                    options, files=files, log=lambda m: None)
                return {"docs": sum(s.n_docs for s in fold.splits.values()), "peak_bytes": peak_bytes(),
                        "seconds": time.perf_counter() - start}

        return measure

    return _two_sizes(spec["shape"], one, SYNTHETIC_PREPARE_FRACTIONS if spec["synthetic"] else FRACTIONS)


def _warm_prepare(folder: Path, spec: dict[str, Any]) -> None:
    """A tiny prepare of the same kind first, so the timed one does not include JIT compilation."""
    from bench.data.prepare import prepare_fold

    tiny = {"n_features": spec["shape"]["n_features"],
            "splits": {s: {"n_queries": 4, "n_docs": 40, "max_list": 10, "lengths": None} for s in SPLITS}}
    (folder / "warm").mkdir(exist_ok=True)
    files = None if spec["synthetic"] else _svmlight_files(folder / "warm", tiny, 1.0)
    options = {**(spec.get("options") or {}), "arf_filter": False}  # a tiny fold would be filtered empty
    if spec["synthetic"]:
        options.update(n_queries=4, vali_queries=2, test_queries=2)
    prepare_fold("synthetic" if spec["synthetic"] else "calibration", "Fold1", folder / "warm-out", options,
                 files=files, log=lambda m: None)


def _svmlight_files(folder: Path, shape: dict[str, Any], fraction: float) -> dict[str, Path]:
    """Dense SVMlight files (``label qid:q 1:v ...``) of ``fraction`` of the planned splits."""
    rng = np.random.default_rng(0)
    files = {}
    for split in shape["splits"]:
        sp = fake_split(fake_lengths(shape["splits"][split], max(1, int(shape["splits"][split]["n_docs"] * fraction)),
                                     rng), int(shape["n_features"]), rng)
        qid = np.repeat(sp["qids"], np.diff(sp["offsets"]))
        cols = " ".join(f"{j + 1}:%.6g" for j in range(sp["features"].shape[1]))
        path = folder / f"{split}.txt"
        np.savetxt(path, np.column_stack([sp["labels"], qid, sp["features"]]), fmt=f"%d qid:%d {cols}")
        files[split] = path
    return files


def summary(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """``ltr-bench stats`` at the planned size: the paired tests and bootstrap of a per-query
    frame of ``n_methods`` x ``n_seeds`` x ``n_queries`` rows and the table's metrics."""

    def measure() -> dict[str, Any]:
        import pandas as pd

        from bench.stats import significance

        rng = np.random.default_rng(0)
        n_q, keys = int(spec["n_queries"]), []
        for m in range(int(spec["n_methods"])):
            for seed in range(int(spec["n_seeds"])):
                keys.append(pd.DataFrame({"dataset": "d", "fold": "Fold1", "seed": seed, "query": np.arange(n_q),
                                          "method": f"m{m}"}))
        frame = pd.concat(keys, ignore_index=True)
        for metric in spec["metrics"]:
            frame[metric] = rng.random(len(frame))
        gc.collect()
        reset_peak()
        start = time.perf_counter()
        significance(frame, spec["metrics"], n_boot=int(spec["n_boot"]))
        return {"peak_bytes": peak_bytes(), "seconds": time.perf_counter() - start}

    return in_child(measure)


def process(spec: dict[str, Any], device: str) -> dict[str, Any]:
    """The resident size a job starts from (a child of the preloaded process; with CUDA
    initialised when the device is a GPU), and what a cluster job's step holds besides it
    (``step_bytes``): the Snakemake process that runs the job there (a fresh interpreter that
    imported Snakemake and the workflow's planning modules, measured) and the job server it
    forks from, less the pages it shares with the job (the preloaded process here, less what a
    child of it starts with)."""
    import subprocess
    import sys

    def measure() -> dict[str, Any]:
        out = {"peak_bytes": peak_bytes()}
        if device == "cuda":
            import torch

            torch.zeros(1, device="cuda")
            out["cuda_peak_bytes"] = peak_bytes()
        return out

    out = in_child(measure)

    def fresh_rss(code: str, field: str) -> int:
        """A fresh interpreter's VmHWM (peak) or VmRSS (now) after ``code``."""
        done = subprocess.run([sys.executable, "-c", code + "; from bench.perf.calibrate import _status_kb; "
                               f"print(_status_kb({field!r}) * 1024)"],
                              capture_output=True, text=True, check=True, timeout=300)
        return int(done.stdout.split()[-1])

    snakemake = fresh_rss("import snakemake.api, bench.config.validate, bench.costs.sizing", "VmHWM")
    server = fresh_rss("import importlib; from bench.jobserver import PRELOAD; "  # resident once it serves
                       "[importlib.import_module(m) for m in PRELOAD]", "VmRSS")
    out["step_bytes"] = snakemake + max(0, server - out["peak_bytes"])
    return out


#: measurement kind -> function(spec, device) (size-dependent kinds fork their own children)
MEASURES: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    "process": process, "neural_step": neural_step, "neural_eval": neural_eval, "neural_data": neural_data,
    "gbdt": gbdt, "linear": linear, "evaluate": evaluate, "prepare": prepare, "summary": summary,
}
#: kinds measured in one child here (the others fork their own, one per size)
SINGLE_CHILD = ("neural_step", "neural_eval")


def measure(kind: str, spec: dict[str, Any], *, device: str, threads: int) -> dict[str, Any]:
    """Run measurement ``kind`` on ``spec`` with ``threads`` compute threads on ``device``."""
    fn = MEASURES[kind]
    _threads.append(int(threads))  # read by the children; this process's environment is left alone
    try:
        if kind in SINGLE_CHILD:
            return in_child(lambda: fn(spec, device))
        return fn({**spec, "threads": threads}, device)
    finally:
        _threads.pop()

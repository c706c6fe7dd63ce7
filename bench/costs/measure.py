"""The calibration's measurements: the study's real code, timed on generated data of the planned shape.

A projection of a job's time and memory (:mod:`bench.costs.model`) combines measured rates
with the job's budget and its fold's size. Each measurement :data:`MEASURES` knows is one
function ``(spec, device, workspace) -> dict``, run on the device at hand in forked children
(:func:`bench.perf.process.in_child`) of a process that has imported what the workflow's job
server imports (:func:`preload`, :data:`bench.jobserver.PRELOAD`) and run no torch operation:
the state every workflow job starts from. So a child's peak memory (``VmHWM``, reset with
:func:`~bench.perf.process.reset_peak`) is what such a job would see, and one measurement
cannot inflate the next. Times are CPU seconds for a job of one thread on the CPU, else
wall-clock seconds (:func:`clock_for`). Linux only (``fork``, ``/proc``).

``model_step``
    a few optimiser steps of a model (the loop's own :func:`~bench.training.loop.train_step`)
    on ``[batch_size, list_size, n_features]`` batches of full lists with the spec's loss
    (the cost model asks for :data:`REFERENCE_LOSS`, the cheapest): ``step_s`` (median seconds
    per step), ``work_bytes`` (peak memory of the steps beyond what setup held: gradients,
    Adam's moments, activations, the loss's temporaries), ``n_params``.
``loss_step``
    the forward and backward pass of one loss on ``[batch_size, list_size]`` scores:
    ``seconds`` (median) and ``work_bytes``. Measured many at once (:data:`BATCHED`: every
    loss a plan needs in one child, a fraction of a second each): a step of model M with loss
    X costs ``model_step(M, reference) - loss_step(reference) + loss_step(X)``, so a study of
    m models and l losses needs m + l measurements instead of m x l.
``neural_eval``
    scoring and grading a validation split of queries ``width`` long in evaluation batches
    (:func:`~bench.training.batches.score_lists` + the metrics): ``docs_per_s``, ``work_bytes``.
``summary``
    the statistics of a table at its planned size (methods x seeds x test queries): ``seconds``,
    ``peak_bytes``.
``process``
    the resident size a job starts from, and what a cluster job's step holds besides it.
``neural_data``, ``gbdt``, ``linear``, ``evaluate``, ``prepare``
    the data-dependent part of a job, run on generated folds of the planned shape at the two
    sizes the spec names (``sizes``: documents over all splits; :func:`bench.costs.model.sizes`
    picks them) so that time and peak memory can be fitted as ``a + b * documents`` and
    extrapolated: ``sizes`` (documents measured), ``peak_bytes``, ``seconds`` and
    ``fold_bytes`` per size (GBDT: each size at two round counts, :data:`GBDT_ROUNDS`, to
    separate the per-round time from the rest). The folds come from a
    :class:`~bench.costs.fakedata.Workspace`, generated once per shape and size.
"""

from __future__ import annotations

import gc
import importlib
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from bench.costs.calibration import cpu_timed
from bench.costs.fakedata import SPLITS, Workspace, fake_split, fold_bytes
from bench.perf.process import in_child, peak_bytes, reset_peak, rss_bytes, trim_heap

#: the loss a ``model_step`` is measured with: point-wise, so its own cost is all but nothing
REFERENCE_LOSS = "rmse"
#: timed optimiser steps: after WARMUP_STEPS, at least MIN_STEPS, until STEP_SECONDS have
#: passed, at most MAX_STEPS (the median is taken)
WARMUP_STEPS, MIN_STEPS, MAX_STEPS, STEP_SECONDS = 1, 3, 20, 0.5
#: timed loss calls: after one warm-up call, until LOSS_SECONDS (at least one), at most MAX_STEPS
LOSS_SECONDS = 0.15
EVAL_DOCS = 10_000  # documents of the generated validation split of ``neural_eval``
# boosting rounds of the two GBDT measurements at each size: the per-round time is their difference
# over 15 rounds (over 3, a few hundredths of a second of noise at the small size made the line
# through the two sizes twice too steep: XGBoost on the MSLR-sized fold projected at 2.0x its time)
GBDT_ROUNDS = (1, 16)


def preload() -> None:
    """Import what the job server imports (a job's starting state), without running anything."""
    from bench.jobserver import PRELOAD

    for name in PRELOAD:
        importlib.import_module(name)


_threads: list[int] = []  # the compute threads of the measurement under way (set by :func:`measure_many`)
_clocks: list[Callable[[], float]] = []  # the clock of the measurement under way (:func:`clock_for`)


def clock_for(device: str, threads: int) -> Callable[[], float]:
    """What a measurement times with: the process's CPU seconds (every thread, user + system)
    for a job of one thread on the CPU, else wall-clock seconds.

    A job of one thread on an idle core takes its CPU time (plus reading its files, which are
    in the page cache). Wall-clock measurements of a few seconds on a shared machine swing with
    the other processes (2-10x at a load of 15-20 on 2 cores), CPU seconds hardly, so a
    calibration taken on a busy machine still projects what a job costs on an idle core; the
    workflow's job server logs each job's CPU seconds beside its wall time, which ``ltr-bench
    plan-check`` sets beside the projection. A multi-threaded job (and a GPU) is timed by the
    wall clock: its CPU seconds add up its threads. (Parsing SVMlight text uses numba's threads
    whatever the job's: timed in CPU seconds, a parse is projected at most ``threads`` times
    too long.)
    """
    return time.process_time if cpu_timed(device, threads) else time.perf_counter


def clock() -> float:
    """Now, on the clock of the measurement under way (:func:`clock_for`; wall-clock outside one)."""
    return (_clocks[-1] if _clocks else time.perf_counter)()


def _apply_threads() -> None:
    """In a child: the job's compute threads (environment for the libraries, torch's own)."""
    import sys

    if not _threads:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(_threads[-1])
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(_threads[-1])


def _child(fn: Callable[[], Any]) -> Any:
    """``fn`` in a forked child with the measurement's compute threads."""
    return in_child(fn, before=_apply_threads)


# ----------------------------------------------------------------------------- neural


def _run_config(spec: dict[str, Any]) -> dict[str, Any]:
    """A one-method run config of the spec's model, loss and batch shapes (budgets irrelevant)."""
    train = {"batch_size": spec.get("batch_size", 16), "list_size": spec.get("list_size"),
             "test_list_size": spec.get("test_list_size"), "epochs": 1,
             "amp": bool(spec.get("amp", False)), "eval_batch_size": spec.get("eval_batch_size", 256),
             "grad_clip": spec.get("grad_clip")}
    method = {"loss": spec.get("loss", REFERENCE_LOSS), "params": dict(spec.get("params") or {})}
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


def _timed(call: Callable[[], None], *, warmup: int, seconds: float, sync: Callable[[], None],
           least: int = MIN_STEPS) -> list[float]:
    """Times of ``call`` after ``warmup`` calls: at least ``least``, until ``seconds``, at most MAX_STEPS."""
    times: list[float] = []
    for i in range(warmup + MAX_STEPS):
        t = clock()
        call()
        sync()
        if i >= warmup:
            times.append(clock() - t)
            if len(times) >= least and sum(times) >= seconds:
                break
    return times


def _sync(dev) -> Callable[[], None]:
    import torch

    return (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)


def model_step(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """Seconds per optimiser step and the steps' working memory (module docstring)."""

    def measure() -> dict[str, Any]:
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
            batches = iter(range(WARMUP_STEPS + MAX_STEPS))

            def step() -> None:
                i = next(batches)
                train_step(f, rows[i * B:(i + 1) * B], lr=1e-4, tau=None)

            times = _timed(step, warmup=WARMUP_STEPS, seconds=STEP_SECONDS, sync=_sync(dev))
            n_params = sum(p.numel() for p in f.trainables.model.parameters())
            return {"step_s": statistics.median(times), "steps_timed": len(times),
                    "work_bytes": peak_bytes() - base_host, "n_params": int(n_params),
                    "device_work_bytes": _cuda_peak(dev) - base_dev if dev.type == "cuda" else None}

    return _child(measure)


def loss_steps(specs: list[dict[str, Any]], device: str, workspace: Workspace) -> list[dict[str, Any]]:
    """Forward + backward of each spec's loss on ``[batch_size, list_size]`` scores of full lists
    (grades 0-4; ``[batch_size, list_size, C]`` logits for a loss on one logit per grade), all in
    one child: ``seconds`` (median) and ``work_bytes`` each."""

    def measure() -> list[dict[str, Any]]:
        from bench.training.device import deterministic, resolve_device

        dev = resolve_device(device, on_missing_cuda=None)
        with deterministic(dev):
            return [_loss_step(spec, dev) for spec in specs]

    return _child(measure)


def _loss_step(spec: dict[str, Any], dev) -> dict[str, Any]:
    import torch

    from bench.training.loss import make_loss

    B, L = int(spec["batch_size"]), int(spec["list_size"])
    cfg = {"loss": spec["loss"], "params": dict(spec.get("params") or {}), "train": {"tau_schedule": None}}
    loss_call = make_loss(cfg, "calibration")
    if loss_call.module is not None:
        loss_call.module.to(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    rng = np.random.default_rng(0)
    # a loss on one logit per grade (ARF's point-wise Softmax) takes [B, L, C]: what its scorer hands it
    shape = (B, L) if loss_call.grades is None else (B, L, loss_call.grades)
    scores = torch.tensor(rng.standard_normal(shape), dtype=torch.float32, device=dev, requires_grad=True)
    labels = torch.tensor(rng.integers(0, 5, (B, L)), dtype=torch.float32, device=dev)
    mask = torch.ones(B, L, dtype=torch.bool, device=dev)

    def call() -> None:
        scores.grad = None
        loss_call(scores, labels, mask, tau=None, gen=gen).backward()

    call()  # warm-up: first-call allocations
    gc.collect()
    trim_heap()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(dev)
    base_host, base_dev = rss_bytes(), _cuda_allocated(dev)
    reset_peak()
    times = _timed(call, warmup=0, seconds=LOSS_SECONDS, sync=_sync(dev), least=1)  # a slow loss: one call
    return {"seconds": statistics.median(times), "work_bytes": max(0, peak_bytes() - base_host),
            "device_work_bytes": _cuda_peak(dev) - base_dev if dev.type == "cuda" else None}


def neural_eval(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """Validation throughput (documents per second, scoring + metrics) and its working memory."""

    def measure() -> dict[str, Any]:
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
            t = clock()
            _validate(f, 0)
            seconds = clock() - t
        return {"docs_per_s": int(vali["labels"].size) / seconds, "work_bytes": peak_bytes() - base}

    return _child(measure)


def _cuda_allocated(dev) -> int:
    import torch

    return int(torch.cuda.memory_allocated(dev)) if dev.type == "cuda" else 0


def _cuda_peak(dev) -> int:
    import torch

    return int(torch.cuda.max_memory_allocated(dev))


def neural_data(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """Peak memory of a run's data at two sizes: the split tensors, evaluation lists, one
    epoch's training lists (a tiny linear model) and the fold memory-mapped as a run maps it
    (training and validation splits read whole, then the training split released and the test
    split read); ``fold_bytes``: the fold's bytes mapped at once at the peak."""

    def measure(fold: Path, n_docs: int) -> dict[str, Any]:
        import torch

        from bench.data import load_prepared
        from bench.training.batches import epoch_lists, gather, score_lists
        from bench.training.device import deterministic, resolve_device

        dev = resolve_device(device, on_missing_cuda=None)
        reset_peak()
        start = clock()
        with deterministic(dev):
            run_spec = {**spec, "model": {"type": "mlp", "hidden": [], "batch_norm": False, "dropout": 0.0},
                        "n_features": spec["shape"]["n_features"], "loss": REFERENCE_LOSS}
            prepared = load_prepared(fold)
            f = _fit(run_spec, prepared, dev)
            lists, _ = epoch_lists(f.splits["train"], f.list_size, torch.Generator().manual_seed(0))
            for chunk in lists.split(f.tc["batch_size"]):  # an epoch's batches
                gather(f.splits["train"], chunk, dev)
            # every page of a split mapped, as in a run of many batches; the training split
            # released before the test split is read, as the run does
            for split in ("train", "vali"):
                _read_whole(prepared.splits[split].features)
            score_lists(f.trainables.model, f.splits["vali"], f.evals["vali"], dev, False)
            f.splits["train"].release_pages()
            _read_whole(prepared.splits["test"].features)
            score_lists(f.trainables.model, f.splits["test"], f.evals["test"], dev, False)
            sizes = {s: fold_bytes(fold / s) for s in SPLITS}
        return {"docs": n_docs, "peak_bytes": peak_bytes(), "seconds": clock() - start,
                "fold_bytes": sizes["vali"] + max(sizes["train"], sizes["test"])}

    return _two_sizes(spec, workspace, measure)


def _read_whole(features: np.ndarray) -> None:
    for i in range(0, features.shape[0], 1 << 16):
        float(features[i:i + (1 << 16)].sum())


def _two_sizes(spec: dict[str, Any], workspace: Workspace,
               measure: Callable[[Path, int], dict[str, Any]]) -> dict[str, Any]:
    """``measure(fold, documents)`` in a child on the workspace's fold of each of the spec's sizes."""
    points = []
    for size in spec["sizes"]:
        fold, n_docs = workspace.fold(spec["shape"], int(size))
        points.append(_child(lambda fold=fold, n_docs=n_docs: measure(fold, n_docs)))
    return _points(points)


def _points(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {"sizes": [p["docs"] for p in points], "peak_bytes": [p["peak_bytes"] for p in points],
            "seconds": [p["seconds"] for p in points], "fold_bytes": [p.get("fold_bytes") for p in points],
            "points": points}


# ----------------------------------------------------------------------------- other run kinds


def gbdt(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """``ltr-bench gbdt`` of the method at two sizes and two round counts (wall and peak)."""
    points = []
    for size in spec["sizes"]:
        fold, n_docs = workspace.fold(spec["shape"], int(size))
        for rounds in spec.get("rounds", GBDT_ROUNDS):
            def measure(rounds: int = rounds, fold: Path = fold, n_docs: int = n_docs) -> dict[str, Any]:
                from bench.config.settings import resolve_gbdt
                from bench.training.gbdt import gbdt_run

                entry = {**spec["method"], "num_trees": rounds, "early_stopping_rounds": rounds + 1}
                config = {"methods": {"m": entry}, "metrics": spec.get("metrics"), "train": {}}
                reset_peak()
                start = clock()
                gbdt_run(resolve_gbdt(config, "m"), fold, workspace.scratch() / "run", method="m", seed=0,
                         device=device, quiet=True, threads=spec.get("threads"))
                return {"docs": n_docs, "rounds": rounds, "peak_bytes": peak_bytes(), "fold_bytes": fold_bytes(fold),
                        "seconds": clock() - start}

            points.append(_child(measure))
    return {"points": points}


def linear(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """``ltr-bench linear`` of the method at two sizes."""

    def measure(fold: Path, n_docs: int) -> dict[str, Any]:
        from bench.config.settings import resolve_linear
        from bench.training.linear import linear_run

        config = {"methods": {"m": spec["method"]}, "metrics": spec.get("metrics"), "train": {}}
        reset_peak()
        start = clock()
        linear_run(resolve_linear(config, "m"), fold, workspace.scratch() / "run", method="m", seed=0, device="cpu",
                   quiet=True)
        return {"docs": n_docs, "peak_bytes": peak_bytes(), "seconds": clock() - start,
                "fold_bytes": fold_bytes(fold)}

    return _two_sizes(spec, workspace, measure)


def evaluate(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """``ltr-bench evaluate`` of ``n_runs`` runs on the test split, at two sizes."""

    def measure(fold: Path, n_docs: int) -> dict[str, Any]:
        from bench.evaluate import evaluate_runs
        from bench.results import write_frame

        n_test = int(np.load(fold / "test" / "labels.npy", mmap_mode="r").shape[0])
        rng = np.random.default_rng(1)
        runs, scratch = [], workspace.scratch()
        for k in range(int(spec["n_runs"])):
            run_dir = scratch / f"run{k}"
            run_dir.mkdir()
            np.save(run_dir / "scores.npy", rng.standard_normal(n_test).astype(np.float32))
            runs.append({"method": f"m{k}", "seed": 0, "dir": str(run_dir)})
        gc.collect()
        reset_peak()
        start = clock()
        frame = evaluate_runs(fold, runs, spec["metrics"], dataset="calibration", fold="Fold1",
                              list_sizes=spec.get("list_sizes") or None, convention=spec.get("convention", "default"))
        write_frame(frame, scratch / "out.parquet")
        return {"docs": n_docs, "peak_bytes": peak_bytes(), "seconds": clock() - start,
                "fold_bytes": fold_bytes(fold)}

    return _two_sizes(spec, workspace, measure)


def prepare(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """``ltr-bench prepare``: synthetic data generated at two sizes of the planned fold, or
    dense SVMlight files of the planned shape parsed at two sizes (file-based datasets)."""
    splits = spec["shape"]["splits"]
    total = sum(s["n_docs"] for s in splits.values())
    points = []
    for size in spec["sizes"]:
        files = None if spec["synthetic"] else workspace.svmlight(spec["shape"], int(size))

        def measure(size: int = int(size), files=files) -> dict[str, Any]:
            from bench.data.prepare import prepare_fold

            options = dict(spec.get("options") or {})
            if spec["synthetic"]:
                options.update({f"{k}queries": max(1, int(splits[s]["n_queries"] * size / total))
                                for k, s in (("n_", "train"), ("vali_", "vali"), ("test_", "test"))})
            _warm_prepare(workspace, spec)  # compiled code is compiled once per process: not per size
            gc.collect()
            reset_peak()
            start = clock()
            fold = prepare_fold("synthetic" if spec["synthetic"] else "calibration", "Fold1",
                                workspace.scratch() / "out", options, files=files, log=lambda m: None)
            return {"docs": sum(s.n_docs for s in fold.splits.values()), "peak_bytes": peak_bytes(),
                    "seconds": clock() - start}

        points.append(_child(measure))
    return _points(points)


def _warm_prepare(workspace: Workspace, spec: dict[str, Any]) -> None:
    """A tiny prepare of the same kind first, so the timed one does not include JIT compilation."""
    from bench.data.prepare import prepare_fold

    tiny = {"n_features": spec["shape"]["n_features"],
            "splits": {s: {"n_queries": 4, "n_docs": 40, "max_list": 10, "lengths": None} for s in SPLITS}}
    files = None if spec["synthetic"] else workspace.svmlight(tiny, 120)
    options = {**(spec.get("options") or {}), "arf_filter": False}  # a tiny fold would be filtered empty
    if spec["synthetic"]:
        options.update(n_queries=4, vali_queries=2, test_queries=2)
    prepare_fold("synthetic" if spec["synthetic"] else "calibration", "Fold1", workspace.scratch() / "warm", options,
                 files=files, log=lambda m: None)


def summary(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
    """``ltr-bench stats``: the paired tests and bootstrap of a per-query frame of ``n_methods``
    x ``n_seeds`` x ``n_queries`` rows and the table's metrics, at each of the spec's ``sizes``
    (test queries): ``sizes``, ``seconds`` and ``peak_bytes`` per size."""
    points = [_child(lambda n_q=n_q: _summary(spec, int(n_q))) for n_q in spec["sizes"]]
    return {"sizes": list(spec["sizes"]), "seconds": [p["seconds"] for p in points],
            "peak_bytes": [p["peak_bytes"] for p in points]}


def _summary(spec: dict[str, Any], n_q: int) -> dict[str, Any]:
    import pandas as pd

    from bench.stats import significance

    rng = np.random.default_rng(0)
    keys = [pd.DataFrame({"dataset": "d", "fold": "Fold1", "seed": seed, "query": np.arange(n_q), "method": f"m{m}"})
            for m in range(int(spec["n_methods"])) for seed in range(int(spec["n_seeds"]))]
    frame = pd.concat(keys, ignore_index=True)
    for metric in spec["metrics"]:
        frame[metric] = rng.random(len(frame))
    gc.collect()
    reset_peak()
    start = clock()
    significance(frame, spec["metrics"], n_boot=int(spec["n_boot"]))
    return {"peak_bytes": peak_bytes(), "seconds": clock() - start}


def process(spec: dict[str, Any], device: str, workspace: Workspace) -> dict[str, Any]:
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

    out = _child(measure)

    def fresh_rss(code: str, field: str) -> int:
        """A fresh interpreter's VmHWM (peak) or VmRSS (now) after ``code``."""
        done = subprocess.run([sys.executable, "-c", code + "; from bench.perf.process import status_kib; "
                               f"print(status_kib({field!r}) * 1024)"],
                              capture_output=True, text=True, check=True, timeout=300)
        return int(done.stdout.split()[-1])

    snakemake = fresh_rss("import snakemake.api, bench.config.validate, bench.costs.sizing", "VmHWM")
    server = fresh_rss("import importlib; from bench.jobserver import PRELOAD; "  # resident once it serves
                       "[importlib.import_module(m) for m in PRELOAD]", "VmRSS")
    out["step_bytes"] = snakemake + max(0, server - out["peak_bytes"])
    return out


#: measurement kind -> function(spec, device, workspace) (each forks its own children)
MEASURES: dict[str, Callable[[dict[str, Any], str, Workspace], dict[str, Any]]] = {
    "process": process, "model_step": model_step, "neural_eval": neural_eval, "neural_data": neural_data,
    "gbdt": gbdt, "linear": linear, "evaluate": evaluate, "prepare": prepare, "summary": summary,
}
#: kinds measured many specs at a time: kind -> function(specs, device, workspace) -> results
BATCHED: dict[str, Callable[[list[dict[str, Any]], str, Workspace], list[dict[str, Any]]]] = {
    "loss_step": loss_steps,
}
KINDS = (*MEASURES, *BATCHED)


def measure(kind: str, spec: dict[str, Any], *, device: str, threads: int,
            workspace: Workspace | None = None) -> dict[str, Any]:
    """Run measurement ``kind`` on ``spec`` with ``threads`` compute threads on ``device``."""
    return measure_many(kind, [spec], device=device, threads=threads, workspace=workspace)[0]


def measure_many(kind: str, specs: list[dict[str, Any]], *, device: str, threads: int,
                 workspace: Workspace | None = None) -> list[dict[str, Any]]:
    """Measure ``specs`` of ``kind`` (a batched kind in one child, the others one by one)."""
    if workspace is None:
        with Workspace() as ws:
            return measure_many(kind, specs, device=device, threads=threads, workspace=ws)
    threaded = [{**spec, "threads": threads} if kind == "gbdt" else spec for spec in specs]
    _threads.append(int(threads))  # read by the children; this process's environment is left alone
    _clocks.append(clock_for(device, int(threads)))
    try:
        if kind in BATCHED:
            return BATCHED[kind](threaded, device, workspace)
        return [MEASURES[kind](spec, device, workspace) for spec in threaded]
    finally:
        _threads.pop()
        _clocks.pop()


__all__ = ["BATCHED", "KINDS", "MEASURES", "REFERENCE_LOSS", "measure", "measure_many", "preload"]

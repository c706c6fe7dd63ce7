"""The neural trainer: one (prepared fold, method, seed) -> one run directory.

Python API: :func:`train_run` ``(settings, prepared_dir, out_dir, *, method, seed,
device="auto", quiet=False, checkpoint_dir=None, threads=None) -> Path``; CLI
(:mod:`bench.training.cli`)::

    ltr-bench train --prepared DIR --out RUN_DIR --method NAME --seed K --config CONFIG.yaml
                    [--device auto|cpu|cuda] [--quiet] [--checkpoint-dir DIR] [--threads N]

The configuration and its ``train`` keys are described in :mod:`bench.training.config`,
the loop (determinism, divergence, the simulated crash) in :mod:`bench.training.loop`, the
checkpoint in :mod:`bench.training.state`, the ``--device`` policy in
:mod:`bench.training.device`. The run executes with ``torch.use_deterministic_algorithms
(True)`` (``warn_only`` on CUDA) and the global torch RNG forked, so the caller's state is
untouched; a failed run (bad config, divergence) writes nothing to ``out_dir``.

Beside the common keys (:data:`bench.results.RUN_JSON_KEYS`; ``wall_time_s`` is the whole
run: data loading, training, validation, test pass, writing) a neural run's ``run.json``
records its training time alone (:meth:`bench.training.state.TrainState.training_facts`):
``train_seconds`` (the epochs' training passes, :func:`bench.training.loop.train_epoch`,
validation and checkpoints excluded; summed over resumed segments), ``train_docs`` (real
documents trained on, padding not counted), ``train_docs_per_s`` and ``seconds_per_epoch``
(training seconds per full epoch of steps). ``curve.csv``'s ``seconds`` stays the whole
epoch, validation included. With ``train.refit`` these facts and the curve stay the first
fit's; the refit's own are ``result.refit`` (:mod:`bench.training.refit`).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.atomic.progress import Reporter
from bench.provenance import cpu_name, host_peak_rss_bytes
from bench.training.common import RunFold, RunOutput, load_fold, log, write_result
from bench.training.config import NOT_PROTOCOL
from bench.training.device import deterministic, resolve_device, torch_threads
from bench.training.loop import fit, setup
from bench.training.loss import make_loss
from bench.training.state import checkpoint_key, default_checkpoint_dir

SEEDING = "bench.seeds.derive_seed(dataset, fold, method, seed, purpose)"


def train_run(
    settings: dict[str, Any],
    prepared_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    method: str,
    seed: int,
    device: str = "auto",
    quiet: bool = False,
    checkpoint_dir: str | os.PathLike | None = None,
    threads: int | None = None,
    run_config_sha256: str | None = None,
) -> Path:
    """Train ``method`` on a prepared fold with ``seed``; write the run directory; return it.

    ``settings``: the method's resolved settings (:func:`bench.config.settings.resolve_neural` of
    the job's config; the keys are described in :mod:`bench.training.config`).
    ``threads`` sets torch's intra-op threads for the run (None: leave as is); on a shared
    machine running several jobs, 1 per job is often several times faster than oversubscribing.
    Raises :class:`bench.errors.ConfigError` for a loss that refuses its settings and
    :class:`bench.errors.TrainingDiverged` for a non-finite loss or gradient; in both cases
    ``out_dir`` is not created. While it trains, the progress record
    ``.<out_dir name>.progress.json`` (:mod:`bench.atomic.progress`) sits next to
    ``out_dir``; it is removed once ``out_dir`` is written (a failed or killed run leaves it).
    The generic loop only: which run kind trains a run config (SinkProp's own protocol, say) is
    :func:`bench.training.cli.run_job`'s choice (:mod:`bench.config.kinds`).
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    cfg = settings
    loss_call = make_loss(cfg, method)
    reporter = Reporter(out_dir, kind="neural", unit="step", label=f"{method}/{seed}", echo=quiet,
                        phase="loading the fold")
    with reporter:  # a line at least every interval from here on (with --quiet)
        run = load_fold(prepared_dir, method=method, seed=seed)
        dev = resolve_device(device, on_missing_cuda=log)
        if cfg["train"]["amp"] and dev.type != "cuda":
            log("train.amp: mixed precision needs CUDA; training in float32 on CPU")
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        key = checkpoint_key(cfg, method, seed, run.prepared.fingerprint, dev)
        ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else default_checkpoint_dir(out_dir)
        parts = (run.dataset, run.fold, method, int(seed))
        reporter.label, reporter.phase = "/".join(map(str, parts)), "setting up (model, lists, data on the device)"
        with torch_threads(threads), deterministic(dev):
            result = fit(setup(cfg, loss_call, run.prepared, parts, dev), quiet=quiet,
                         ckpt_path=ckpt_dir / "last.pt", key=key, reporter=reporter)
            n_threads = torch.get_num_threads()
        protocol = run.protocol("neural", SEEDING, model=cfg["model"], metrics=cfg["metrics"],
                                schedule={k: v for k, v in cfg["train"].items() if k not in NOT_PROTOCOL})
        output = _output(run, result, dev, wall_time_s=result["elapsed_before"] + (time.perf_counter() - started))
        output.facts["torch_threads"] = n_threads
        reporter.phase = "writing the run directory"
        out = write_result(out_dir, run, output, kind="neural", config=cfg, device_requested=device, protocol=protocol,
                           run_config_sha256=run_config_sha256)
    reporter.clear()  # the run directory is written (and the heartbeat stopped): the record has served
    if not cfg["train"]["keep_checkpoint"]:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    return out


def _output(run: RunFold, result: dict[str, Any], dev: torch.device, *, wall_time_s: float) -> RunOutput:
    """Test scores in test-split order (NaN where not scored), frame, curve and run facts."""
    scores = np.full(run.prepared.splits["test"].labels.shape[0], np.nan, dtype=np.float32)
    scores[result["test_index"]] = result["test_scores"]
    cuda = dev.type == "cuda"
    facts = {
        "device": dev.type,
        "device_name": torch.cuda.get_device_name(dev) if cuda else cpu_name(),
        "data_on_device": result["store"],
        "wall_time_s": wall_time_s,
        **result["training"],  # train_seconds, train_docs, train_docs_per_s, seconds_per_epoch
        "peak_memory": {
            "host_max_rss_bytes": host_peak_rss_bytes(),
            "cuda_max_allocated_bytes": int(torch.cuda.max_memory_allocated(dev)) if cuda else None,
            "note": "of the last process segment when the run was resumed",
        },
        "result": result["summary"],
    }
    return RunOutput(scores, result["test_frame"], result["curve"], facts)

"""The training loop proper: seeded epochs, validation, early stopping, checkpoints.

:func:`fit` runs inside :func:`bench.training.device.deterministic`. Every draw comes from
generators seeded by ``bench.seeds.derive_seed(dataset, fold, method, seed, purpose)``
(purposes ``init``, ``dropout``, ``lists``, ``loss``), so two CPU runs with the same inputs
give bit-identical outputs, and a run resumed from its checkpoint
(:mod:`bench.training.state`) ends exactly as an uninterrupted one.

A non-finite loss, gradient norm or score raises :class:`~bench.errors.TrainingDiverged`
naming the epoch, batch, step and values. Setting the environment variable
``BENCH_TRAIN_EXIT_AFTER_EPOCH=N`` makes the process exit (status 75) right after epoch
``N``'s checkpoint: the tests use it to simulate a crash.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from bench.errors import TrainingDiverged
from bench.models import build_model
from bench.seeds import derive_seed
from bench.training.budget import Budget
from bench.training.batches import EvalLists, SplitData, epoch_lists, eval_lists, gather, score_lists, split_to_tensors
from bench.training.common import evaluate_split, log
from bench.training.config import lr_at, tau_at
from bench.training.device import autocast, feature_store
from bench.training.loss import LossCall
from bench.training.state import (CHECKPOINT_FORMAT, Trainables, TrainState, load_checkpoint,
                                  save_checkpoint)

EXIT_ENV = "BENCH_TRAIN_EXIT_AFTER_EPOCH"
EXIT_STATUS = 75


@dataclass
class Fit:
    """Everything fixed for one run's loop, built once by :func:`setup`."""

    cfg: dict[str, Any]
    loss_call: LossCall
    parts: tuple  # (dataset, fold, method, seed)
    device: torch.device
    store: torch.device  # where the features live
    splits: dict[str, SplitData]  # train, vali, test
    evals: dict[str, EvalLists]  # vali, test
    list_size: int
    trainables: Trainables
    params: list[nn.Parameter]
    budget: Budget

    @property
    def tc(self) -> dict[str, Any]:
        return self.cfg["train"]

    @property
    def stop_metric(self) -> str:
        return self.tc["early_stopping_metric"]

    @property
    def vali_names(self) -> list[str]:
        return list(dict.fromkeys([*self.cfg["metrics"]["names"], self.stop_metric]))


def setup(cfg: dict[str, Any], loss_call: LossCall, prepared, parts: tuple, device: torch.device) -> Fit:
    """Splits on their storage device, evaluation lists, seeded model and optimiser, budgets."""
    tc = cfg["train"]
    n_bytes = sum(int(prepared.splits[s].features.nbytes) for s in ("train", "vali", "test"))
    store = feature_store(device, n_bytes, log)
    splits = {s: split_to_tensors(prepared.splits[s], store) for s in ("train", "vali", "test")}
    lengths = splits["train"].offsets_np[1:] - splits["train"].offsets_np[:-1]
    list_size = tc["list_size"] or max(int(lengths.max()), 1)
    evals = {s: eval_lists(splits[s], device, list_size=tc["test_list_size"], batch_lists=tc["eval_batch_size"],
                           dataset=parts[0], fold=parts[1], split=s) for s in ("vali", "test")}
    trainables, params = _trainables(cfg, loss_call, parts, splits["train"].features.shape[1], device)
    budget = Budget.of(tc, splits["train"].n_queries)
    return Fit(cfg, loss_call, parts, device, store, splits, evals, list_size, trainables, params, budget)


def _trainables(cfg, loss_call: LossCall, parts: tuple, n_features: int, device: torch.device):
    """Model (seeded ``init``), loss parameters, Adam, then the ``dropout``/``lists``/``loss`` draws."""
    tc = cfg["train"]
    torch.manual_seed(derive_seed(*parts, "init"))
    model = build_model(cfg["model"], n_features).to(device)
    loss_module = loss_call.module.to(device) if loss_call.module is not None else None
    params = list(model.parameters()) + (list(loss_module.parameters()) if loss_module is not None else [])
    opt = torch.optim.Adam(params, lr=tc["lr"], weight_decay=tc["weight_decay"])
    torch.manual_seed(derive_seed(*parts, "dropout"))
    list_gen = torch.Generator().manual_seed(derive_seed(*parts, "lists"))
    loss_gen = torch.Generator(device=device).manual_seed(derive_seed(*parts, "loss"))
    return Trainables(model, opt, loss_module, list_gen, loss_gen, device), params


def fit(f: Fit, *, quiet: bool, ckpt_path: Path, key: str) -> dict[str, Any]:
    """Resume or start, run epochs until a budget or patience ends, score the test split."""
    state = TrainState()
    ck = load_checkpoint(ckpt_path, key, log)
    if ck is not None:
        f.trainables.restore(ck)
        state = TrainState.from_checkpoint(ck)
        log(f"resuming {'/'.join(map(str, f.parts))} from the checkpoint after epoch {state.epoch}")
    progress = _Progress(f.budget.max_steps, state.step, quiet, desc="/".join(map(str, f.parts)))
    segment_start = time.perf_counter()
    try:
        while not state.done:
            _epoch(f, state, progress)
            checkpoint = {"format": CHECKPOINT_FORMAT, "key": key, **state.checkpoint_fields(),
                          **f.trainables.checkpoint_fields(),
                          "elapsed_s": state.elapsed + (time.perf_counter() - segment_start)}
            save_checkpoint(ckpt_path, checkpoint)
            if os.environ.get(EXIT_ENV) == str(state.epoch):
                progress.close()
                os._exit(EXIT_STATUS)
    finally:
        progress.close()
    return finish(f, state)


def _epoch(f: Fit, state: TrainState, progress: _Progress) -> None:
    """One epoch: train on this epoch's lists, validate, update best/patience, log, curve row."""
    from bench.metrics import higher_is_better

    t_epoch = time.perf_counter()
    lr = lr_at(f.tc, state.epoch)
    for group in f.trainables.optimizer.param_groups:
        group["lr"] = lr
    tau = tau_at(f.tc["tau_schedule"], state.epoch, f.budget.n_epochs)
    total_loss, n_batches = _train_batches(f, state, progress, lr=lr, tau=tau)
    means = _validate(f, state.epoch)
    score = means[f.stop_metric]
    state.record(score, higher_is_better(f.stop_metric), f.trainables.model)
    row = {
        "epoch": state.epoch,
        "step": state.step,
        "lr": lr,
        "tau": math.nan if tau is None else tau,
        "train_loss": total_loss / max(n_batches, 1),
        "seconds": time.perf_counter() - t_epoch,
        **{f"vali_{m}": means[m] for m in f.vali_names},
    }
    state.curve.append(row)
    stop_patience = f.tc["patience"] is not None and state.bad >= f.tc["patience"]
    state.done = state.epoch >= f.budget.n_epochs or state.step >= f.budget.max_steps or stop_patience
    best = math.nan if state.best is None else state.best
    progress.epoch(
        f"epoch {state.epoch}/{f.budget.n_epochs} step {state.step} loss {row['train_loss']:.5g} "
        f"vali {f.stop_metric} {score:.5f} (best {best:.5f} @ {state.best_epoch})"
    )


def _train_batches(f: Fit, state: TrainState, progress: _Progress, *, lr: float, tau: float | None):
    """The epoch's optimiser steps; returns the summed loss and the number of batches."""
    tc, tr, train = f.tc, f.trainables, f.splits["train"]
    tr.model.train()
    lists, order = epoch_lists(train, f.list_size, tr.list_gen)
    clip = float(tc["grad_clip"]) if tc["grad_clip"] is not None else math.inf
    total_loss, n_batches = 0.0, 0
    for b in range(f.budget.steps_per_epoch):
        if state.step >= f.budget.max_steps:
            break
        rows = lists[order[b * tc["batch_size"] : (b + 1) * tc["batch_size"]]]
        x, y, mask = gather(train, rows, f.device)
        with autocast(f.device, tc["amp"]):
            s = tr.model(x, mask)
        loss = f.loss_call(s.float(), y, mask, tau=tau, gen=tr.loss_gen)
        tr.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = nn.utils.clip_grad_norm_(f.params, clip)
        loss_v, gnorm_v = torch.stack([loss.detach().float(), gnorm.float()]).tolist()
        if not (math.isfinite(loss_v) and math.isfinite(gnorm_v)):
            raise TrainingDiverged(
                f"non-finite {'loss' if not math.isfinite(loss_v) else 'gradient'} in epoch {state.epoch + 1}, "
                f"batch {b + 1} (step {state.step + 1}) of method {f.parts[2]!r}: loss={loss_v}, "
                f"grad_norm={gnorm_v}, lr={lr}; lower train.lr or set train.grad_clip"
            )
        tr.optimizer.step()
        state.step += 1
        total_loss += loss_v
        n_batches += 1
        progress.step(loss_v, state.best)
    return total_loss, n_batches


def _validate(f: Fit, epoch: int) -> dict[str, float]:
    """Mean validation metrics after 0-based ``epoch`` (the early-stopping metric included)."""
    from bench.metrics import summarize

    vali, ev = f.splits["vali"], f.evals["vali"]
    scores = score_lists(f.trainables.model, vali, ev, f.device, f.tc["amp"])
    if not np.isfinite(scores).all():
        raise TrainingDiverged(f"non-finite validation scores after epoch {epoch + 1} of method {f.parts[2]!r}")
    frame = evaluate_split(scores, vali.labels_np[ev.doc_index], ev.offsets, f.cfg["metrics"], names=f.vali_names)
    return summarize(frame, f.vali_names)


def finish(f: Fit, state: TrainState) -> dict[str, Any]:
    """Restore the best weights (``restore_best``), score and evaluate the test split."""
    from bench.metrics import summarize

    tc, model, test, ev = f.tc, f.trainables.model, f.splits["test"], f.evals["test"]
    if tc["restore_best"] and state.best_state is not None:
        model.load_state_dict(state.best_state)
    test_scores = score_lists(model, test, ev, f.device, tc["amp"])
    if not np.isfinite(test_scores).all():
        raise TrainingDiverged(f"non-finite test scores for method {f.parts[2]!r}")
    test_frame = evaluate_split(test_scores, test.labels_np[ev.doc_index], ev.offsets, f.cfg["metrics"],
                                query_ids=test.qids)
    loss_module = f.trainables.loss_module
    summary = {
        "best_epoch": state.best_epoch,
        "best_vali": state.best,
        "early_stopping_metric": f.stop_metric,
        "epochs_run": state.epoch,
        "steps": state.step,
        "epochs_budget": f.budget.n_epochs,
        "steps_budget": f.budget.max_steps,
        "stopped_early": tc["patience"] is not None and state.bad >= tc["patience"],
        "resumed_from_epoch": state.resumed_from,
        "restored_best": bool(tc["restore_best"] and state.best_state is not None),
        "loss_parameters": (
            {k: v.detach().cpu().tolist() for k, v in loss_module.state_dict().items()} if loss_module else {}
        ),
        "test_means": summarize(test_frame, f.cfg["metrics"]["names"]),
        "n_test_queries": int(test.n_queries),
        "n_test_docs_scored": int(ev.doc_index.size),
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
    }
    return {"test_index": ev.doc_index, "test_scores": test_scores, "test_frame": test_frame,
            "curve": pd.DataFrame(state.curve), "summary": summary, "store": f.store.type,
            "elapsed_before": state.elapsed}


class _Progress:
    """tqdm bar (interactive) or one plain line per epoch (``quiet``, for workflow logs)."""

    def __init__(self, total: int, initial: int, quiet: bool, desc: str) -> None:
        self.quiet = quiet
        self.bar = None
        if not quiet:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit="step", dynamic_ncols=True)

    def log(self, msg: str) -> None:
        if self.bar is not None:
            self.bar.write(msg, file=sys.stderr)
        else:
            print(msg, file=sys.stderr, flush=True)

    def step(self, loss: float, vali: float | None) -> None:
        if self.bar is not None:
            self.bar.update(1)
            post = {"loss": f"{loss:.4g}"}
            if vali is not None:
                post["vali"] = f"{vali:.4f}"
            self.bar.set_postfix(post, refresh=False)

    def epoch(self, msg: str) -> None:
        if self.quiet:
            self.log(msg)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

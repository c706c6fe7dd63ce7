"""The training loop proper: seeded epochs, validation, early stopping, checkpoints, the refit.

:func:`fit` runs inside :func:`bench.training.device.deterministic`. Every draw comes from
generators seeded by ``bench.seeds.derive_seed(dataset, fold, method, seed, purpose)``
(purposes ``init``, ``dropout``, ``lists``, ``loss``), so two CPU runs with the same inputs
give bit-identical outputs, and a run resumed from its checkpoint
(:mod:`bench.training.state`) ends exactly as an uninterrupted one.

A non-finite loss, gradient norm or score raises :class:`~bench.errors.TrainingDiverged`
naming the epoch, batch, step and values. Setting the environment variable
``BENCH_TRAIN_EXIT_AFTER_EPOCH=N`` makes the process exit (status 75) right after epoch
``N``'s checkpoint: the tests use it to simulate a crash. A run writes a checkpoint after an
epoch when :data:`CHECKPOINT_SECONDS` have passed since its last one, after its last epoch,
and after that epoch ``N``.

Every optimiser step goes through :func:`train_step` ``(f, rows, *, lr, tau, at=None) ->
float``, every epoch's training pass through :func:`train_epoch` (timed apart from
validation: the run's ``train_seconds`` and ``train_docs``,
:meth:`~bench.training.state.TrainState.training_facts`). Progress (:class:`_Progress`): a
tqdm bar when interactive, else a line at least every
:func:`bench.atomic.progress.interval_seconds` and after every validation (step, epoch,
docs/s, elapsed, ETA, the validation metric); the progress record
(:mod:`bench.atomic.progress`) is rewritten with every such line in both modes. None of it
draws a random number or touches the model, so it cannot change a run's results.

Which weights score the test split (``train.checkpoint``) and the refit on train + validation
(``train.refit``, :func:`refit`): :mod:`bench.training.refit`. The refit is a second loop of
:func:`train_epoch` passes on a :class:`Fit` of its own (:func:`refit_fit`), with no validation;
its progress lines name it (``refit on train + validation``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from bench.atomic.progress import Reporter
from bench.errors import TrainingDiverged
from bench.models import build_model
from bench.seeds import derive_seed
from bench.training.batches import EvalLists, SplitData, epoch_lists, eval_lists, gather, score_lists, split_to_tensors
from bench.training.budget import Budget
from bench.training.common import evaluate_split, log
from bench.training.config import lr_at, tau_at
from bench.training.device import autocast, feature_store
from bench.training.loss import LossCall, make_loss
from bench.training.refit import full_training_split, refit_length, refit_record
from bench.training.state import CHECKPOINT_FORMAT, Trainables, TrainState, load_checkpoint, save_checkpoint
from bench.training.vali_curve import curve_lists, curve_row

EXIT_ENV = "BENCH_TRAIN_EXIT_AFTER_EPOCH"
EXIT_STATUS = 75
#: the least training time between two checkpoints; the last epoch (and the crash test's) always
#: writes one. A checkpoint of a default-profile model takes about 20 ms, a tenth of an epoch of its
#: short runs: writing one per epoch cost the default study about 45 CPU-seconds. An epoch longer
#: than this (every paper-profile run) still checkpoints after each epoch; a kill -9 loses at most
#: this much training.
CHECKPOINT_SECONDS = 30.0


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
    # bfloat16 autocast of the model on the CPU too (with train.amp): only ``ltr-bench perf
    # train`` sets it, to measure it; no config key does (measured slower: docs/performance.md)
    amp_on_cpu: bool = False
    prepared: Any = None  # the prepared fold (bench.data.PreparedFold) the splits come from: the refit reads it

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
    list_size = _list_size(tc, splits["train"])
    evals = {s: eval_lists(splits[s], device, list_size=tc["test_list_size"], batch_lists=tc["eval_batch_size"],
                           dataset=parts[0], fold=parts[1], split=s) for s in ("vali", "test")}
    curve = curve_lists(splits["vali"], device, tc, dataset=parts[0], fold=parts[1])
    if curve is not None:  # PiRank Figs. 5, 8-12: the validation curve on cut lists (bench.training.vali_curve)
        evals["vali_curve"] = curve
    trainables, params = _trainables(cfg, loss_call, parts, splits["train"].features.shape[1], device)
    budget = Budget.of(tc, splits["train"].n_queries)
    return Fit(cfg, loss_call, parts, device, store, splits, evals, list_size, trainables, params, budget,
               prepared=prepared)


def _list_size(tc: dict[str, Any], train: SplitData) -> int:
    """``L_train``: ``train.list_size``, but never more than the longest training query (null:
    the longest training query).

    Slots beyond the longest query would be padding in every list of every batch: each loss
    gives the same value and gradient without them (up to rounding; ``tests/losses/test_contract.py`` checks
    every registered loss), the scorer never sees them, and the epoch's draws do not depend on
    the width (:func:`~bench.training.batches.epoch_lists`), so they would only cost time -- a
    list-wise loss's cost grows with the width, twice over for the ``L x L`` ones.
    """
    lengths = train.offsets_np[1:] - train.offsets_np[:-1]
    longest = max(int(lengths.max()), 1)
    return min(tc["list_size"], longest) if tc["list_size"] else longest


def _trainables(cfg, loss_call: LossCall, parts: tuple, n_features: int, device: torch.device):
    """Model (seeded ``init``), loss parameters, Adam, then the ``dropout``/``lists``/``loss`` draws."""
    tc = cfg["train"]
    torch.manual_seed(derive_seed(*parts, "init"))
    model = build_model(cfg["model"], n_features, grades=loss_call.grades).to(device)
    loss_module = loss_call.module.to(device) if loss_call.module is not None else None
    params = list(model.parameters()) + (list(loss_module.parameters()) if loss_module is not None else [])
    # fused: one kernel per step over every parameter (CPU and CUDA) instead of a dozen small
    # ops per tensor; about 4x faster on a small MLP, the same update up to rounding
    opt = torch.optim.Adam(params, lr=tc["lr"], weight_decay=tc["weight_decay"], fused=True)
    torch.manual_seed(derive_seed(*parts, "dropout"))
    list_gen = torch.Generator().manual_seed(derive_seed(*parts, "lists"))
    loss_gen = torch.Generator(device=device).manual_seed(derive_seed(*parts, "loss"))
    return Trainables(model, opt, loss_module, list_gen, loss_gen, device), params


def fit(f: Fit, *, quiet: bool, ckpt_path: Path, key: str, reporter: Reporter | None = None) -> dict[str, Any]:
    """Resume or start, run epochs until a budget or patience ends, score the test split.

    ``reporter``: the run's progress reporter, opened by the caller when the job started
    (:class:`bench.atomic.progress.Reporter`: its record names the run directory to be);
    None: lines only, no record.
    """
    state = TrainState()
    ck = load_checkpoint(ckpt_path, key, log)
    if ck is not None:
        f.trainables.restore(ck)
        state = TrainState.from_checkpoint(ck)
        log(f"resuming {'/'.join(map(str, f.parts))} from the checkpoint after epoch {state.epoch}")
    progress = _Progress(f, state, quiet=quiet, reporter=reporter)
    segment_start = last_saved = time.perf_counter()
    try:
        while not state.done:
            _epoch(f, state, progress)
            crash_test = os.environ.get(EXIT_ENV) == str(state.epoch)
            if state.done or crash_test or time.perf_counter() - last_saved >= CHECKPOINT_SECONDS:
                checkpoint = {"format": CHECKPOINT_FORMAT, "key": key, **state.checkpoint_fields(),
                              **f.trainables.checkpoint_fields(),
                              "elapsed_s": state.elapsed + (time.perf_counter() - segment_start)}
                save_checkpoint(ckpt_path, checkpoint)
                last_saved = time.perf_counter()
            if crash_test:
                progress.close()
                os._exit(EXIT_STATUS)
    finally:
        progress.close()
    refitted = refit(f, state, quiet=quiet, after=progress) if f.tc["refit"] else None
    progress.reporter.phase = "scoring the test split"
    return finish(f, state, refitted)


def _epoch(f: Fit, state: TrainState, progress: _Progress) -> None:
    """One epoch: train on this epoch's lists, validate, update best/patience, log, curve row."""
    from bench.metrics import higher_is_better

    t_epoch = time.perf_counter()
    lr = lr_at(f.tc, state.epoch)
    tau = tau_at(f.tc["tau_schedule"], state.epoch, f.budget.n_epochs)
    trained = train_epoch(f, state, progress, lr=lr, tau=tau)
    state.train_seconds += trained.seconds
    state.train_docs += trained.docs
    total_loss, n_batches = trained.loss_sum, trained.batches
    t_vali = time.perf_counter()
    progress.reporter.phase = f"validating after epoch {state.epoch + 1}"
    means = _validate(f, state.epoch)
    score = means[f.stop_metric]
    state.record(score, higher_is_better(f.stop_metric), f.trainables.model)
    curve = _curve_columns(f, tau)
    vali_seconds = time.perf_counter() - t_vali
    row = {
        "epoch": state.epoch,
        "step": state.step,
        "lr": lr,
        "tau": math.nan if tau is None else tau,
        "train_loss": total_loss / max(n_batches, 1),
        "seconds": time.perf_counter() - t_epoch,
        **{f"vali_{m}": means[m] for m in f.vali_names},
        **curve,
    }
    state.curve.append(row)
    stop_patience = f.tc["patience"] is not None and state.bad >= f.tc["patience"]
    state.done = state.epoch >= f.budget.n_epochs or state.step >= f.budget.max_steps or stop_patience
    progress.validated(state, score, vali_seconds, loss=row["train_loss"])


@dataclass(frozen=True)
class EpochTraining:
    """What one training pass (:func:`train_epoch`) did: summed loss, batches, real documents, seconds."""

    loss_sum: float
    batches: int
    docs: int  # real documents trained on (padding not counted)
    seconds: float  # wall-clock of the pass: list sampling, gathers, steps (no validation)


def train_epoch(f: Fit, state: TrainState, progress: _Progress | None = None, *, lr: float,
                tau: float | None) -> EpochTraining:
    """One epoch's training pass: this epoch's lists (:func:`epoch_lists`), then every
    optimiser step (:func:`train_step`) until the epoch or ``state``'s step budget ends.

    Advances ``state.step``; validation is not part of it. ``seconds`` is ``perf_counter``
    from before the list sampling to after the last step (CUDA synchronised), the time a run
    records as training time (``train_seconds`` in run.json) and ``ltr-bench perf train``
    times as the trainer; ``docs`` counts each list's real documents, ``min(query length,
    list_size)``, never padding. ``progress`` (None: no reporting) gets every step.
    """
    bs, train = f.tc["batch_size"], f.splits["train"]
    if progress is not None:
        progress.begin_steps()
    t0 = time.perf_counter()
    lists, order = epoch_lists(train, f.list_size, f.trainables.list_gen)
    # real documents per batch, for the progress line's docs/s: on the host, no device sync per step
    docs = np.minimum(np.diff(train.offsets_np), f.list_size)[order.cpu().numpy()]
    total_loss, n_batches, n_docs = 0.0, 0, 0
    for b in range(f.budget.steps_per_epoch):
        if state.step >= f.budget.max_steps:
            break
        rows = lists[order[b * bs : (b + 1) * bs]]
        loss_v = train_step(f, rows, lr=lr, tau=tau, at=(state.epoch + 1, b + 1, state.step + 1))
        state.step += 1
        total_loss += loss_v
        n_batches += 1
        batch_docs = int(docs[b * bs : (b + 1) * bs].sum())
        n_docs += batch_docs
        if progress is not None:
            progress.step(state, batch_docs, loss_v)
    if f.device.type == "cuda":
        torch.cuda.synchronize(f.device)
    return EpochTraining(total_loss, n_batches, n_docs, time.perf_counter() - t0)


def train_step(f: Fit, rows: Tensor, *, lr: float, tau: float | None,
               at: tuple[int, int, int] | None = None) -> float:
    """One optimiser step of ``f`` on the lists ``rows`` ``[B, L]``; returns the loss as a float.

    ``rows`` are row ids into the training split (``-1`` = padding), on the split's storage
    device (as :func:`bench.training.batches.epoch_lists` draws them). The step: training
    mode, ``lr`` on every parameter group, gather, forward (autocast with ``train.amp``),
    the loss in float32 at temperature ``tau`` (None: the loss's own), backward, clipping
    at ``train.grad_clip``, the divergence check (:class:`~bench.errors.TrainingDiverged`),
    the optimiser step. ``at`` = 1-based ``(epoch, batch, step)`` only names the step in
    that error. The loop takes every step through here; code that times single steps calls it.
    """
    tc, tr = f.tc, f.trainables
    if not tr.model.training:  # train() walks every submodule: only after validation switched it off
        tr.model.train()
    for group in tr.optimizer.param_groups:
        group["lr"] = lr
    x, y, mask = gather(f.splits["train"], rows, f.device)
    with autocast(f.device, tc["amp"], on_cpu=f.amp_on_cpu):
        s = f.loss_call.scorer_outputs(tr.model, x, mask)
    loss = f.loss_call(s.float(), y, mask, tau=tau, gen=tr.loss_gen)
    for p in f.params:  # Adam.zero_grad(set_to_none=True) without its hooks' overhead (f.params are Adam's)
        p.grad = None
    loss.backward()
    if tc["grad_clip"] is not None:
        gnorm = nn.utils.clip_grad_norm_(f.params, float(tc["grad_clip"]))
    else:  # the norm alone (for the divergence check): clipping at inf would multiply every gradient by 1
        gnorm = nn.utils.get_total_norm([p.grad for p in f.params if p.grad is not None], foreach=True)
    loss_v, gnorm_v = torch.stack([loss.detach().float(), gnorm.float()]).tolist()
    if not (math.isfinite(loss_v) and math.isfinite(gnorm_v)):
        where = f"epoch {at[0]}, batch {at[1]} (step {at[2]})" if at is not None else "a single step"
        raise TrainingDiverged(
            f"non-finite {'loss' if not math.isfinite(loss_v) else 'gradient'} in {where} of method "
            f"{f.parts[2]!r}: loss={loss_v}, grad_norm={gnorm_v}, lr={lr}; lower train.lr or set train.grad_clip"
        )
    tr.optimizer.step()
    return loss_v


def _validate(f: Fit, epoch: int) -> dict[str, float]:
    """Mean validation metrics after 0-based ``epoch`` (the early-stopping metric included)."""
    from bench.metrics import summarize

    vali, ev = f.splits["vali"], f.evals["vali"]
    scores = score_lists(f.trainables.model, vali, ev, f.device, f.tc["amp"], on_cpu=f.amp_on_cpu)
    if not np.isfinite(scores).all():
        raise TrainingDiverged(f"non-finite validation scores after epoch {epoch + 1} of method {f.parts[2]!r}")
    frame = evaluate_split(scores, vali.labels_np[ev.doc_index], ev.offsets, f.cfg["metrics"], names=f.vali_names)
    return summarize(frame, f.vali_names)


def _curve_columns(f: Fit, tau: float | None) -> dict[str, float]:
    """The epoch's columns of the validation curve on cut lists (none unless the run records it)."""
    ev = f.evals.get("vali_curve")
    if ev is None:
        return {}
    return curve_row(f.trainables.model, f.loss_call, f.splits["vali"], ev, device=f.device, amp=f.tc["amp"],
                     on_cpu=f.amp_on_cpu, tau=tau, parts=f.parts, list_size=f.tc["vali_curve_list_size"],
                     metrics=f.cfg["metrics"], names=f.vali_names)


def tested_checkpoint(tc: dict[str, Any], state: TrainState) -> str:
    """The checkpoint a run tests: ``train.checkpoint``, except that a run without a best epoch
    (no validation value ever improved: NaN every epoch) tests its last."""
    return "best" if tc["checkpoint"] == "best" and state.best_state is not None else "last"


def tested_epoch(tc: dict[str, Any], state: TrainState) -> int:
    """The 1-based epoch whose weights (or, with a refit, whose length) are tested."""
    return state.best_epoch if tested_checkpoint(tc, state) == "best" else state.epoch


@dataclass
class Refitted:
    """A finished refit (:func:`refit`): its :class:`Fit`, whose model scores the test split,
    and run.json's ``result.refit`` (:func:`bench.training.refit.refit_record`)."""

    fit: Fit
    record: dict[str, Any]


def refit(f: Fit, state: TrainState, *, quiet: bool, after: _Progress) -> Refitted:
    """Train the tested model again, from scratch, on train + validation (:mod:`bench.training.refit`).

    The full training fold is built from the prepared arrays, then the first fit's training and
    validation splits leave ``f`` (their mapped pages released, a device copy freed: nothing
    validates any more). :func:`train_epoch` passes follow until the refit's budget ends, epoch
    ``e`` with the first fit's learning rate and temperature of epoch ``e``; no validation, no
    checkpoint. ``after``: the first fit's progress (its reporter; its validation timing makes
    the ETA of the test pass).
    """
    t0 = time.perf_counter()
    epochs = tested_epoch(f.tc, state)
    length = refit_length(f.tc, f.budget.n_epochs, f.budget.steps_per_epoch, epochs=epochs,
                          steps=int(state.curve[epochs - 1]["step"]))
    after.reporter.phase = "refit: copying train + validation into one training split"
    full = full_training_split(f.prepared)
    for name in ("train", "vali"):
        f.splits.pop(name).release_pages()
    rf = refit_fit(f, full, length)
    rstate = TrainState()
    progress = _Progress(rf, rstate, quiet=quiet, reporter=after.reporter, after=after)
    try:
        while not rstate.done:
            e = rstate.epoch
            trained = train_epoch(rf, rstate, progress, lr=lr_at(rf.tc, e),
                                  tau=tau_at(rf.tc["tau_schedule"], e, f.budget.n_epochs))
            rstate.epoch += 1
            rstate.train_seconds += trained.seconds
            rstate.train_docs += trained.docs
            rstate.done = rstate.epoch >= rf.budget.n_epochs or rstate.step >= rf.budget.max_steps
    finally:
        progress.close()
    trained_length = {"unit": length.unit, "epochs": rstate.epoch, "steps": rstate.step}
    record = refit_record(full, trained_length, train_seconds=rstate.train_seconds, train_docs=rstate.train_docs,
                          epochs=rstate.step / rf.budget.steps_per_epoch, seconds=time.perf_counter() - t0)
    return Refitted(rf, record)


def refit_fit(f: Fit, full: Any, length: Any) -> Fit:
    """The refit's :class:`Fit`: the full training fold ``full`` (a :class:`bench.data.prepared.Split`)
    on the first fit's storage device, a fresh loss (trainable loss parameters start again) and
    trainables drawn from the run's seeds (:func:`_trainables`: the first fit's initial weights),
    the budget of ``length`` (:class:`bench.training.refit.RefitLength`); the test split and its
    lists are the first fit's."""
    cfg = {**f.cfg, "train": length.train_section(f.tc)}
    train = split_to_tensors(full, f.store)
    loss_call = make_loss(cfg, f.parts[2])
    trainables, params = _trainables(cfg, loss_call, f.parts, train.features.shape[1], f.device)
    return Fit(cfg, loss_call, f.parts, f.device, f.store, {"train": train, "test": f.splits["test"]},
               {"test": f.evals["test"]}, _list_size(cfg["train"], train), trainables, params,
               Budget.of(cfg["train"], train.n_queries), f.amp_on_cpu, f.prepared)


def finish(f: Fit, state: TrainState, refitted: Refitted | None = None) -> dict[str, Any]:
    """Score and evaluate the test split with the tested model: the refit's (``refitted``), else
    the first fit's, with the best epoch's weights restored unless it tests its last
    (:func:`tested_checkpoint`). The tested fit's training split releases its pages first
    (:meth:`~bench.training.batches.SplitData.release_pages`)."""
    tested = refitted.fit if refitted is not None else f
    model, test, ev = tested.trainables.model, tested.splits["test"], tested.evals["test"]
    if refitted is None and tested_checkpoint(f.tc, state) == "best":
        model.load_state_dict(state.best_state)
    tested.splits["train"].release_pages()  # read no more: the test split's pages take their place
    test_scores = score_lists(model, test, ev, f.device, f.tc["amp"], on_cpu=f.amp_on_cpu)
    if not np.isfinite(test_scores).all():
        raise TrainingDiverged(f"non-finite test scores for method {f.parts[2]!r}")
    test_frame = evaluate_split(test_scores, test.labels_np[ev.doc_index], ev.offsets, f.cfg["metrics"],
                                query_ids=test.qids)
    summary = _summary(f, tested, state, test_frame, refitted)
    return {"test_index": ev.doc_index, "test_scores": test_scores, "test_frame": test_frame,
            "curve": pd.DataFrame(state.curve), "summary": summary, "store": f.store.type,
            "elapsed_before": state.elapsed, "training": state.training_facts(f.budget.steps_per_epoch)}


def _summary(f: Fit, tested: Fit, state: TrainState, test_frame: pd.DataFrame,
             refitted: Refitted | None) -> dict[str, Any]:
    """run.json's ``result``: the first fit ``f``'s course (its budgets, best epoch, stop), which
    model was tested, and the ``tested`` fit's loss parameters, size and test means."""
    from bench.metrics import summarize

    loss_module, ev = tested.trainables.loss_module, tested.evals["test"]
    return {
        "best_epoch": state.best_epoch,
        "best_vali": state.best,
        "early_stopping_metric": f.stop_metric,
        "epochs_run": state.epoch,
        "steps": state.step,
        "epochs_budget": f.budget.n_epochs,
        "steps_budget": f.budget.max_steps,
        "stopped_early": f.tc["patience"] is not None and state.bad >= f.tc["patience"],
        "resumed_from_epoch": state.resumed_from,
        "checkpoint": tested_checkpoint(f.tc, state),
        "tested_epoch": tested_epoch(f.tc, state),
        "refit": refitted.record if refitted is not None else None,
        "loss_parameters": (
            {k: v.detach().cpu().tolist() for k, v in loss_module.state_dict().items()} if loss_module else {}
        ),
        "test_means": summarize(test_frame, f.cfg["metrics"]["names"]),
        "n_test_queries": int(tested.splits["test"].n_queries),
        "n_test_docs_scored": int(ev.doc_index.size),
        "n_parameters": int(sum(p.numel() for p in tested.trainables.model.parameters())),
    }


class _Progress:
    """The run's progress: tqdm bar (interactive) or lines (``quiet``), and the record either way.

    Lines and record (:mod:`bench.atomic.progress`) come at least every interval (counted
    from the process's second step: the first one warms up; the reporter's heartbeat covers
    loading, the first step, validation and the test pass, each a phase of the line) and after
    every validation. Rates are
    recent: seconds per step and documents per second (real documents, not padding) over the
    steps since the previous line, validation excluded. ETA = remaining steps x seconds per
    step + remaining validations x the last validation's seconds + the final test pass (that
    validation's seconds scaled by the test/validation document ratio); before the first
    validation, validations count 0 (the line says so); once patience has stopped the run,
    only the test pass is left. With ``patience`` the ETA is an upper bound.

    A refit's progress (``after``: the first fit's) counts the refit's steps from 0, names the
    phase on every line (``refit on train + validation``), validates nothing (its ETA: the
    steps left and the test pass, timed by the first fit's last validation) and is exact.
    """

    def __init__(self, f: Fit, state: TrainState, *, quiet: bool, reporter: Reporter | None,
                 after: _Progress | None = None) -> None:
        desc = "/".join(map(str, f.parts)) + ("" if after is None else " refit")
        self.budget, self.stop_metric = f.budget, f.stop_metric
        self.upper = after is None and f.tc["patience"] is not None
        self.validating = after is None
        self.counting = None if after is None else (
            f"refit on train + validation ({f.splits['train'].n_queries} queries, no validation)")
        self.test_ratio = after.test_ratio if after is not None else (
            f.evals["test"].doc_index.size / max(f.evals["vali"].doc_index.size, 1))
        self.reporter = reporter or Reporter(None, kind="neural", unit="step", label=desc, echo=quiet)
        self.reporter.total = f.budget.total_steps
        self.bar = None
        if not quiet:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=f.budget.total_steps, initial=state.step, desc=desc, unit="step", dynamic_ncols=True)
        self.elapsed_before, self.t0 = state.elapsed, time.perf_counter()
        if after is not None:  # the run's elapsed time goes on
            self.elapsed_before = after.elapsed_before + (self.t0 - after.t0)
        self.t_prev = self.t0
        self.window = [0, 0.0, 0]  # steps, seconds, documents since the last line
        self.first = True  # the next step is this process's first
        self.unit_s: float | None = None
        self.docs_per_s: float | None = None
        self.vali_s: float | None = None if after is None else after.vali_s
        self.vali: dict[str, Any] | None = None

    def begin_steps(self) -> None:
        """Steps start now (the time since the last step -- validation, checkpoint -- is not theirs)."""
        self.t_prev = time.perf_counter()
        self.reporter.phase = self.counting  # counting steps (a refit's say so)

    def step(self, state: TrainState, docs: int, loss: float) -> None:
        now = time.perf_counter()
        self.window = [self.window[0] + 1, self.window[1] + (now - self.t_prev), self.window[2] + docs]
        self.t_prev = now
        if self.bar is not None:
            self.bar.update(1)
            post = {"loss": f"{loss:.4g}"}
            if state.best is not None:
                post["vali"] = f"{state.best:.4f}"
            self.bar.set_postfix(post, refresh=False)
        if self.first:  # the process's first step also warms up (allocator, kernels): not a rate
            self.first, self.window = False, [0, 0.0, 0]
        elif self.reporter.due():
            self._line(state, epoch=state.epoch + 1)

    def validated(self, state: TrainState, score: float, seconds: float, *, loss: float) -> None:
        """After epoch ``state.epoch``'s validation (``seconds`` long): a line, whatever the interval."""
        self.vali_s = seconds
        self.reporter.phase = None  # the line reports the validation just done
        self.vali = {"metric": self.stop_metric, "value": float(score),
                     "best": math.nan if state.best is None else float(state.best), "best_at": int(state.best_epoch)}
        self._line(state, epoch=state.epoch, extra=f"loss {loss:.5g}")

    def _line(self, state: TrainState, *, epoch: int, extra: str = "") -> None:
        steps, seconds, docs = self.window
        if steps and seconds > 0:
            self.unit_s, self.docs_per_s = seconds / steps, docs / seconds
        self.window = [0, 0.0, 0]
        left = 0 if state.done else max(self.budget.total_steps - state.step, 0)
        validations = 0 if state.done or not self.validating else self.budget.n_epochs - state.epoch
        vali_s = self.vali_s or 0.0
        eta = None if (self.unit_s is None and left) else (
            left * (self.unit_s or 0.0) + validations * vali_s + self.test_ratio * vali_s)
        if self.vali_s is None:
            extra = "ETA without validation and test passes (not timed yet)"
        self.reporter.emit(
            unit_s=self.unit_s, extra=extra, done=state.step, total=self.budget.total_steps, epoch=epoch,
            epochs=self.budget.n_epochs, elapsed_s=self.elapsed_before + (time.perf_counter() - self.t0),
            eta_s=eta, eta_is_upper_bound=self.upper, docs_per_s=self.docs_per_s, vali=self.vali,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

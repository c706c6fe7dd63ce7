r"""The neural trainer: one (prepared fold, method, seed) -> one run directory.

Python API: :func:`train_run` ``(config, prepared_dir, out_dir, *, method, seed,
device="auto", quiet=False, checkpoint_dir=None, threads=None) -> Path``; CLI::

    ltr-bench train --prepared DIR --out RUN_DIR --method NAME --seed K --config CONFIG.yaml
                    [--device auto|cpu|cuda] [--quiet] [--checkpoint-dir DIR] [--threads N]

Configuration (YAML or JSON; other top-level keys are ignored)::

    model:   {...}            # shared defaults (bench.models: type mlp | context_aware)
    train:   {...}            # shared defaults, keys below
    metrics: [ndcg@10, ...]   # or {names: [...], empty_query: one|zero|drop, ties: stable|expected}
    methods:
      NAME: {loss: <registered name or pkg.mod:func>, params: {...}, model: {...}, train: {...},
             metrics: ...}    # method-level keys override the shared ones key by key

A method's ``model`` replaces the shared one wholesale when it names a different ``type``.
``train`` keys (defaults in :data:`TRAIN_DEFAULTS`):

- ``batch_size`` (16): lists per step. ``list_size`` (200): ``L_train``; every epoch each
  training query is sub-sampled (without replacement) or padded to it with the run's
  seeded generator; ``null`` pads to the longest training query. ``test_list_size`` (null):
  ``L_test``; null evaluates full lists, else a fixed seeded sub-sample per query of
  validation and test (drawn from ``(dataset, fold, split, "eval_lists", L_test)``, shared by
  every method and seed so paired tests stay paired).
- ``epochs`` (100) and ``max_steps`` (null): budgets; training stops at whichever comes
  first (PiRank: ``epochs: null, max_steps: 100000``; NeuralNDCG: ``epochs: 100``).
- ``lr`` (1e-3), ``weight_decay`` (0): Adam. ``lr_step`` (null) / ``lr_gamma`` (0.1): step
  decay, ``lr_e = lr * lr_gamma ** floor(e / lr_step)`` for 0-based epoch ``e``
  (NeuralNDCG: ``lr_step: 50``). ``grad_clip`` (null): max global L2 norm of the gradient.
- ``early_stopping_metric`` (``ndcg@10``): validation metric (via
  :func:`bench.metrics.evaluate`, lower is better for ``arp``); ``patience`` (null): stop
  after this many epochs without improvement (null: run the whole budget);
  ``restore_best`` (true): score the test split with the best validation epoch's weights.
- ``tau_schedule`` (null): for losses with a ``tau`` keyword, ``{kind: constant, value: T}``
  or ``{kind: exponential, start: T0, end: T1}``: per epoch ``tau_e = T0 (T1/T0)^(e/(E-1))``
  over the ``E`` budgeted epochs (null: the loss's own ``params.tau`` or default).
- ``amp`` (false): bfloat16 autocast of the model on CUDA (ignored on CPU, with a note);
  the loss is always computed in float32.
- ``eval_batch_size`` (256): lists per evaluation batch (capped at 65,536 padded slots).
- ``keep_checkpoint`` (false): keep the checkpoint directory after a successful run.

The **protocol** recorded in run.json (and hashed) holds dataset, fold, preprocessing
options, model, the ``train`` keys except ``tau_schedule``, ``eval_batch_size`` and
``keep_checkpoint``, the seed and the metric conventions -- not the loss, its ``params`` or
its temperature schedule.

Determinism: every draw comes from generators seeded by ``bench.seeds.derive_seed(dataset,
fold, method, seed, purpose)`` (purposes ``init``, ``dropout``, ``lists``, ``loss``), the run
executes with ``torch.use_deterministic_algorithms(True)`` (``warn_only`` on CUDA), and the
global torch RNG is forked so the caller's state is untouched. Two CPU runs with the same
inputs give bit-identical outputs.

Checkpoints: after every epoch ``<checkpoint_dir>/last.pt`` (default: the sibling
directory ``.<out_dir name>.ckpt``) is written atomically with the model, optimiser, loss
parameters (e.g. ARF's alpha), RNG states (as tensors), epoch, step, best score and weights,
and the curve so far; it loads with ``torch.load(..., weights_only=True)``. Re-running an
interrupted run resumes from it and ends with the same result as an uninterrupted run. A
checkpoint written for a different config, method, seed, dataset fingerprint or device type
is ignored (with a note) and training starts afresh. Setting the environment variable
``BENCH_TRAIN_EXIT_AFTER_EPOCH=N`` makes the process exit (status 75) right after epoch
``N``'s checkpoint: the tests use it to simulate a crash.

A non-finite loss or gradient norm raises :class:`TrainingDiverged` naming the epoch,
batch, step and values; nothing is written to ``out_dir``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from bench.atomic import atomic_path
from bench.models import build_model, resolve_model_config
from bench.runs import (
    ConfigError,
    add_run_arguments,
    canonical_json,
    cpu_name,
    evaluate_split,
    host_peak_rss_bytes,
    label_metrics,
    method_entry,
    provenance,
    resolve_metrics_config,
    run_from_cli,
    subsample_lists,
    write_run,
)
from bench.seeds import derive_seed, numpy_generator

TRAIN_DEFAULTS: dict[str, Any] = {
    "batch_size": 16,
    "list_size": 200,
    "test_list_size": None,
    "epochs": 100,
    "max_steps": None,
    "lr": 1e-3,
    "weight_decay": 0.0,
    "lr_step": None,
    "lr_gamma": 0.1,
    "grad_clip": None,
    "early_stopping_metric": "ndcg@10",
    "patience": None,
    "restore_best": True,
    "tau_schedule": None,
    "amp": False,
    "eval_batch_size": 256,
    "keep_checkpoint": False,
}
NOT_PROTOCOL = ("tau_schedule", "eval_batch_size", "keep_checkpoint")
METHOD_KEYS = ("loss", "params", "model", "train", "metrics")
EXIT_ENV = "BENCH_TRAIN_EXIT_AFTER_EPOCH"
EXIT_STATUS = 75
EVAL_MAX_SLOTS = 1 << 16
CHECKPOINT_FORMAT = 1


class TrainingDiverged(RuntimeError):
    """A non-finite loss or gradient; the message names epoch, batch, step and values."""


# ----------------------------------------------------------------------------------------
# configuration


def _check(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg}")


def _is_int(v: Any, lo: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def resolve_train_config(shared: dict | None, local: dict | None, *, method: str) -> dict[str, Any]:
    """Merge shared and method-level ``train`` sections, fill defaults, validate.

    Errors name the key where the offending value came from (``train.X`` or
    ``methods.<method>.train.X``).

    >>> resolve_train_config({"epochs": 3}, {"lr": 0.01}, method="m")["lr"]
    0.01
    >>> resolve_train_config(None, {"bach_size": 3}, method="m")
    Traceback (most recent call last):
    ...
    bench.runs.ConfigError: methods.m.train.bach_size: unknown key; known keys: amp, batch_size, early_stopping_metric, epochs, eval_batch_size, grad_clip, keep_checkpoint, list_size, lr, lr_gamma, lr_step, max_steps, patience, restore_best, tau_schedule, test_list_size, weight_decay
    """
    shared, local = dict(shared or {}), dict(local or {})

    def where(k: str) -> str:
        return f"methods.{method}.train.{k}" if k in local else f"train.{k}"

    for k in [*shared, *local]:
        _check(k in TRAIN_DEFAULTS, where(k), f"unknown key; known keys: {', '.join(sorted(TRAIN_DEFAULTS))}")
    c = {**TRAIN_DEFAULTS, **shared, **local}
    for k in ("batch_size", "eval_batch_size"):
        _check(_is_int(c[k]), where(k), f"must be a positive integer, got {c[k]!r}")
    for k in ("list_size", "test_list_size", "epochs", "max_steps", "lr_step", "patience"):
        _check(c[k] is None or _is_int(c[k]), where(k), f"must be a positive integer or null, got {c[k]!r}")
    _check(c["epochs"] is not None or c["max_steps"] is not None, where("epochs"), "set epochs or max_steps")
    _check(_is_num(c["lr"]) and c["lr"] > 0, where("lr"), f"must be a positive number, got {c['lr']!r}")
    _check(_is_num(c["lr_gamma"]) and c["lr_gamma"] > 0, where("lr_gamma"), "must be a positive number")
    _check(_is_num(c["weight_decay"]) and c["weight_decay"] >= 0, where("weight_decay"), "must be >= 0")
    _check(
        c["grad_clip"] is None or (_is_num(c["grad_clip"]) and c["grad_clip"] > 0),
        where("grad_clip"),
        f"must be a positive number or null, got {c['grad_clip']!r}",
    )
    for k in ("restore_best", "amp", "keep_checkpoint"):
        _check(isinstance(c[k], bool), where(k), f"must be true or false, got {c[k]!r}")
    from bench.metrics import parse_metric

    try:
        parse_metric(c["early_stopping_metric"])
    except ValueError as exc:
        raise ConfigError(f"{where('early_stopping_metric')}: {exc}") from exc
    c["tau_schedule"] = _resolve_tau_schedule(c["tau_schedule"], where("tau_schedule"))
    return c


def _resolve_tau_schedule(s: Any, key: str) -> dict[str, Any] | None:
    if s is None:
        return None
    _check(isinstance(s, dict), key, "must be a mapping {kind: constant|exponential, ...} or null")
    kind = s.get("kind")
    if kind == "constant":
        _check(set(s) == {"kind", "value"}, key, "constant schedule takes exactly {kind, value}")
        _check(_is_num(s["value"]) and s["value"] > 0, f"{key}.value", "must be a positive number")
    elif kind == "exponential":
        _check(set(s) == {"kind", "start", "end"}, key, "exponential schedule takes exactly {kind, start, end}")
        for k in ("start", "end"):
            _check(_is_num(s[k]) and s[k] > 0, f"{key}.{k}", "must be a positive number")
    else:
        raise ConfigError(f"{key}.kind: must be 'constant' or 'exponential', got {kind!r}")
    return dict(s)


def tau_at(schedule: dict[str, Any] | None, epoch: int, n_epochs: int) -> float | None:
    """Temperature for 0-based ``epoch`` of ``n_epochs`` (None when there is no schedule).

    >>> tau_at({"kind": "exponential", "start": 10.0, "end": 0.1}, 0, 3), tau_at({"kind": "exponential", "start": 10.0, "end": 0.1}, 2, 3)
    (10.0, 0.1)
    >>> round(tau_at({"kind": "exponential", "start": 10.0, "end": 0.1}, 1, 3), 6)
    1.0
    """
    if schedule is None:
        return None
    if schedule["kind"] == "constant":
        return float(schedule["value"])
    start, end = float(schedule["start"]), float(schedule["end"])
    frac = min(epoch, n_epochs - 1) / max(n_epochs - 1, 1)
    return end if frac >= 1.0 else start * (end / start) ** frac


def lr_at(train: dict[str, Any], epoch: int) -> float:
    """Step-decayed learning rate for 0-based ``epoch``.

    >>> lr_at({"lr": 1e-3, "lr_step": 50, "lr_gamma": 0.1}, 49), lr_at({"lr": 1e-3, "lr_step": 50, "lr_gamma": 0.1}, 50)
    (0.001, 0.0001)
    """
    if train["lr_step"] is None:
        return float(train["lr"])
    return float(train["lr"]) * float(train["lr_gamma"]) ** (epoch // train["lr_step"])


def _merge_model(shared: dict | None, local: dict | None) -> dict[str, Any]:
    shared, local = dict(shared or {}), dict(local or {})
    if "type" in local and local["type"] != shared.get("type", "mlp"):
        return local
    return {**shared, **local}


def resolve_run_config(config: dict[str, Any], method: str) -> dict[str, Any]:
    """The fully resolved config of one neural method: loss, params, model, train, metrics."""
    entry = method_entry(config, method)
    if "gbdt" in entry:
        raise ConfigError(f"methods.{method}: a GBDT method; train it with `ltr-bench gbdt`")
    for k in entry:
        _check(k in METHOD_KEYS, f"methods.{method}.{k}", f"unknown key; known keys: {', '.join(METHOD_KEYS)}")
    loss = entry.get("loss")
    _check(isinstance(loss, str) and bool(loss), f"methods.{method}.loss", "must name a loss (str)")
    params = entry.get("params") or {}
    _check(isinstance(params, dict), f"methods.{method}.params", "must be a mapping")
    for section in ("model", "train"):
        for src, key in ((config.get(section), section), (entry.get(section), f"methods.{method}.{section}")):
            _check(src is None or isinstance(src, dict), key, "must be a mapping")
    local_model = entry.get("model") or {}
    merged = _merge_model(config.get("model"), local_model)
    try:
        model = resolve_model_config(merged, key=f"methods.{method}.model" if local_model else "model")
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    train = resolve_train_config(config.get("train"), entry.get("train"), method=method)
    if "metrics" in entry:
        metrics = resolve_metrics_config(entry["metrics"], key=f"methods.{method}.metrics")
    else:
        metrics = resolve_metrics_config(config.get("metrics"))
    return {"loss": loss, "params": dict(params), "model": model, "train": train, "metrics": metrics}


# ----------------------------------------------------------------------------------------
# the loss


@dataclass
class LossCall:
    """A loss callable (hyperparameters already bound by the registry) plus per-call extras.

    The temperature of a ``tau_schedule`` is passed as the ``tau`` keyword when the
    callable takes one; for an ``nn.Module`` loss whose ``forward`` does not, it is set as
    the module's ``tau`` attribute before the call.
    """

    fn: Callable[..., Tensor]
    tau_mode: str  # "kwarg", "attribute" or "none"
    takes_generator: bool
    module: nn.Module | None  # set when the loss has trainable parameters

    def __call__(self, scores: Tensor, labels: Tensor, mask: Tensor, *, tau: float | None, gen) -> Tensor:
        extra: dict[str, Any] = {}
        if tau is not None:
            if self.tau_mode == "kwarg":
                extra["tau"] = tau
            else:
                self.fn.tau = tau
        if self.takes_generator:
            extra["generator"] = gen
        return self.fn(scores, labels, mask, **extra)


def make_loss(cfg: dict[str, Any], method: str) -> LossCall:
    """Build the loss through :func:`bench.losses.get` (which checks ``params``)."""
    from bench import losses

    name = cfg["loss"]
    try:
        losses.info(name)
    except ValueError as exc:
        raise ConfigError(f"methods.{method}.loss: {exc}") from exc
    try:
        fn = losses.get(name, **cfg["params"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"methods.{method}.params: {exc}") from exc
    module = fn if isinstance(fn, nn.Module) else None
    sig = inspect.signature(fn.forward if module is not None else fn)
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    tau_mode = "kwarg" if (var_kw or "tau" in sig.parameters) else "none"
    if tau_mode == "none" and module is not None and isinstance(getattr(module, "tau", None), (int, float)):
        tau_mode = "attribute"
    if cfg["train"]["tau_schedule"] is not None:
        _check(tau_mode != "none", f"methods.{method}.train.tau_schedule", f"loss {name!r} has no 'tau' hyperparameter")
        _check("tau" not in cfg["params"], f"methods.{method}.params.tau", "set either params.tau or train.tau_schedule")
    takes_gen = "generator" in sig.parameters and "generator" not in cfg["params"]
    has_params = module is not None and bool(losses.has_parameters(name))
    return LossCall(fn, tau_mode, takes_gen, module if has_params else None)


# ----------------------------------------------------------------------------------------
# data: device-resident arrays, training lists, evaluation lists


@dataclass
class SplitData:
    """One split's arrays as tensors on the storage device (GPU when it fits)."""

    features: Tensor  # [N, F] float32
    labels: Tensor  # [N] float32
    offsets: Tensor  # [Q+1] int64
    qidx: Tensor  # [N] int64, the query of each row
    pos_in_query: Tensor  # [N] int64, the row's position within its query
    labels_np: np.ndarray
    offsets_np: np.ndarray
    qids: np.ndarray

    @property
    def n_queries(self) -> int:
        return self.offsets.numel() - 1


def split_to_tensors(split: Any, store: torch.device) -> SplitData:
    """Copy a prepared split (memory-mapped numpy) into tensors on ``store``."""
    feats = torch.from_numpy(np.array(split.features, dtype=np.float32, copy=True))
    labels_np = np.array(split.labels, dtype=np.float32, copy=True)
    offsets_np = np.array(split.offsets, dtype=np.int64, copy=True)
    lengths = torch.from_numpy(np.diff(offsets_np))
    offsets = torch.from_numpy(offsets_np)
    qidx = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
    pos = torch.arange(qidx.numel()) - offsets[qidx]
    return SplitData(
        feats.to(store),
        torch.from_numpy(labels_np).to(store),
        offsets.to(store),
        qidx.to(store),
        pos.to(store),
        labels_np,
        offsets_np,
        np.array(split.qids, dtype=np.int64, copy=True),
    )


def epoch_lists(data: SplitData, list_size: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """This epoch's training lists and query order, from ``gen`` (a CPU generator).

    Returns ``rows [Q, list_size]`` (row ids into the split, -1 for padding; a query longer
    than ``list_size`` keeps a uniformly random subset, every query's items in random order)
    and ``order [Q]`` (a random permutation of queries). Vectorised: one random permutation
    of all rows, one stable sort by query, one scatter.
    """
    store = data.features.device
    n = data.qidx.numel()
    shuffled = torch.randperm(n, generator=gen).to(store)
    by_query = torch.argsort(data.qidx[shuffled], stable=True)
    rows = shuffled[by_query]  # grouped by query (ascending), random within each query
    keep = data.pos_in_query < list_size
    lists = torch.full((data.n_queries, list_size), -1, dtype=torch.int64, device=store)
    lists[data.qidx[keep], data.pos_in_query[keep]] = rows[keep]
    order = torch.randperm(data.n_queries, generator=gen).to(store)
    return lists, order


def gather(data: SplitData, rows: Tensor, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Features ``[B, L, F]``, labels ``[B, L]`` (0 on padding) and mask for row ids ``[B, L]``."""
    mask = rows >= 0
    safe = rows.clamp(min=0)
    x = data.features[safe]
    y = torch.where(mask, data.labels[safe], torch.zeros((), dtype=data.labels.dtype, device=rows.device))
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True), mask.to(device, non_blocking=True)


@dataclass
class EvalLists:
    """Fixed evaluation lists of a split: full queries or an ``L_test`` sub-sample."""

    doc_index: np.ndarray  # [M] rows of the split that are evaluated, grouped by query
    offsets: np.ndarray  # [Q+1] over doc_index
    batches: list[tuple[Tensor, Tensor]]  # (rows [b, Lmax] on store, positions [b, Lmax] on device)


def eval_lists(
    data: SplitData, list_size: int | None, batch_lists: int, seed_parts: tuple, device: torch.device
) -> EvalLists:
    """Build the evaluation batches once: queries sorted by length to limit padding."""
    if list_size is None:
        doc_index = np.arange(data.labels_np.size, dtype=np.int64)
        offsets = data.offsets_np
    else:
        doc_index, offsets = subsample_lists(data.offsets_np, list_size, numpy_generator(*seed_parts))
    lengths = np.diff(offsets)
    by_len = np.argsort(lengths, kind="stable")
    doc_t = torch.from_numpy(doc_index)
    batches = []
    start, n_q = 0, lengths.size
    while start < n_q:  # one iteration per batch
        stop = min(start + batch_lists, n_q)
        width = max(int(lengths[by_len[stop - 1]]), 1)
        stop = start + max(1, min(stop - start, EVAL_MAX_SLOTS // width))
        qs = by_len[start:stop]
        width = max(int(lengths[qs].max()), 1)
        ar = np.arange(width)
        valid = ar[None, :] < lengths[qs][:, None]
        pos = np.where(valid, offsets[qs][:, None] + ar[None, :], -1)
        pos_t = torch.from_numpy(pos)
        rows = torch.where(pos_t >= 0, doc_t[pos_t.clamp(min=0)], -1)
        batches.append((rows.to(data.features.device), pos_t.to(device)))
        start = stop
    return EvalLists(doc_index, offsets, batches)


@torch.no_grad()
def score_lists(model: nn.Module, data: SplitData, ev: EvalLists, device: torch.device, amp: bool) -> np.ndarray:
    """Scores of the evaluated documents ``[M]`` (``ev.doc_index`` order), float32."""
    model.eval()
    out = torch.zeros(ev.doc_index.size, dtype=torch.float32, device=device)
    for rows, pos in ev.batches:
        x, _, mask = gather(data, rows, device)
        with _autocast(device, amp):
            s = model(x, mask).float()
        out[pos[mask]] = s[mask]
    return out.cpu().numpy()


def _autocast(device: torch.device, amp: bool):
    if amp and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------------------
# device, determinism, checkpoints


def pick_device(requested: str, log: Callable[[str], None]) -> torch.device:
    """``auto`` -> CUDA when available else CPU; ``cuda`` without CUDA falls back with a note."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"--device: must be auto, cpu or cuda, got {requested!r}")
    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if requested == "cuda":
        log("CUDA requested but not available (torch built without CUDA or no GPU); using CPU")
    return torch.device("cpu")


def _set_deterministic_kernels(mode: bool, warn_only: bool) -> None:
    """Switch torch's deterministic-kernel flag without importing the compiler stack.

    ``torch.use_deterministic_algorithms`` sets two flags: the kernel flag
    (``torch._C._set_deterministic_algorithms``, the one eager kernels read) and
    ``torch._inductor.config.deterministic`` (read only by ``torch.compile``). Importing
    the latter pulls in ``torch._dynamo``: 1.3-1.8 s per process on the 2-core reference
    machine, about a fifth of a default-profile training job. The suite never compiles, so
    unless inductor is already loaded (then the public function is called, which keeps both
    flags in step) only the kernel flag is set; ``torch.are_deterministic_algorithms_enabled``
    reads it either way.
    """
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)


@contextlib.contextmanager
def deterministic(device: torch.device):
    """Deterministic kernels and a forked global RNG for the duration of a run."""
    if device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    prev = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    prev_bench = torch.backends.cudnn.benchmark
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        _set_deterministic_kernels(True, warn_only=device.type == "cuda")
        torch.backends.cudnn.benchmark = False
        try:
            yield
        finally:
            _set_deterministic_kernels(prev, warn_only=prev_warn)
            torch.backends.cudnn.benchmark = prev_bench


def default_checkpoint_dir(out_dir: Path) -> Path:
    """``.<name>.ckpt`` next to the run directory (outside it: the run dir is atomic)."""
    return out_dir.with_name(f".{out_dir.name}.ckpt")


def _clone_state(module: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _load_checkpoint(path: Path, key: str, log: Callable[[str], None]) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: start afresh rather than fail
        log(f"ignoring unreadable checkpoint {path} ({type(exc).__name__}: {exc}); starting afresh")
        return None
    if state.get("format") != CHECKPOINT_FORMAT or state.get("key") != key:
        log(f"ignoring checkpoint {path}: written for a different config/data/seed/device; starting afresh")
        return None
    return state


# ----------------------------------------------------------------------------------------
# the run


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


def _better(a: float, b: float | None, higher: bool) -> bool:
    if math.isnan(a):
        return False
    return b is None or (a > b if higher else a < b)


def train_run(
    config: dict[str, Any],
    prepared_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    method: str,
    seed: int,
    device: str = "auto",
    quiet: bool = False,
    checkpoint_dir: str | os.PathLike | None = None,
    threads: int | None = None,
) -> Path:
    """Train ``method`` on a prepared fold with ``seed``; write the run directory; return it.

    ``config`` is the whole configuration (with ``methods``; see the module docstring).
    ``threads`` sets torch's intra-op threads for the run (None: leave as is); on a shared
    machine running several jobs, 1 per job is often several times faster than oversubscribing.
    Raises :class:`bench.runs.ConfigError` for a bad config and :class:`TrainingDiverged`
    for a non-finite loss or gradient; in both cases ``out_dir`` is not created.
    """
    started = time.perf_counter()
    out_dir = Path(out_dir)
    cfg = resolve_run_config(config, method)
    loss_call = make_loss(cfg, method)
    from bench.data import load_prepared

    try:
        prepared = load_prepared(prepared_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(f"--prepared: {exc}") from exc
    meta = prepared.meta
    dataset, fold = str(meta["dataset"]), str(meta["fold"])
    progress_log: list[Callable[[str], None]] = [lambda m: print(m, file=sys.stderr, flush=True)]
    dev = pick_device(device, progress_log[0])
    if cfg["train"]["amp"] and dev.type != "cuda":
        progress_log[0]("train.amp: mixed precision needs CUDA; training in float32 on CPU")
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    train_cfg = cfg["train"]
    protocol = {
        "kind": "neural",
        "dataset": dataset,
        "fold": fold,
        "preprocessing": meta.get("options"),
        "model": cfg["model"],
        "schedule": {k: v for k, v in train_cfg.items() if k not in NOT_PROTOCOL},
        "metrics": cfg["metrics"],
        "seed": int(seed),
        "seeding": "bench.seeds.derive_seed(dataset, fold, method, seed, purpose)",
    }
    key = hashlib.sha256(
        canonical_json(
            {"config": cfg, "method": method, "seed": int(seed), "data": prepared.fingerprint, "device": dev.type}
        ).encode()
    ).hexdigest()
    ckpt_dir = Path(checkpoint_dir) if checkpoint_dir is not None else default_checkpoint_dir(out_dir)
    ckpt_path = ckpt_dir / "last.pt"
    parts = (dataset, fold, method, int(seed))

    threads_before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    try:
        with deterministic(dev):
            result = _fit(cfg, loss_call, prepared, parts, dev, quiet, ckpt_path, key, progress_log)
        n_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads_before)

    scores_full = np.full(prepared.splits["test"].labels.shape[0], np.nan, dtype=np.float32)
    scores_full[result["test_index"]] = result["test_scores"]
    metrics = label_metrics(result["test_frame"], dataset=dataset, fold=fold, method=method, seed=int(seed))
    run_info = {
        **provenance(kind="neural", dataset=dataset, fold=fold, method=method, seed=seed, config=cfg,
                     device_requested=device, protocol=protocol, fingerprint=prepared.fingerprint,
                     prepared_dir=prepared_dir),
        "device": dev.type,
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else cpu_name(),
        "data_on_device": result["store"],
        "torch_threads": n_threads,
        "wall_time_s": result["elapsed_before"] + (time.perf_counter() - started),
        "peak_memory": {
            "host_max_rss_bytes": host_peak_rss_bytes(),
            "cuda_max_allocated_bytes": int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None,
            "note": "of the last process segment when the run was resumed",
        },
        "result": result["summary"],
    }
    out = write_run(out_dir, scores=scores_full, metrics=metrics, curve=result["curve"], run_info=run_info)
    if not train_cfg["keep_checkpoint"]:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    return out


def _fit(cfg, loss_call, prepared, parts, dev, quiet, ckpt_path, key, progress_log) -> dict[str, Any]:
    """The training loop proper (inside :func:`deterministic`); returns test scores & summary."""
    tc = cfg["train"]
    metrics_cfg = cfg["metrics"]
    from bench.metrics import higher_is_better, summarize

    stop_metric = tc["early_stopping_metric"]
    higher = higher_is_better(stop_metric)
    vali_names = list(dict.fromkeys([*metrics_cfg["names"], stop_metric]))

    train_split = prepared.splits["train"]
    n_bytes = int(train_split.features.nbytes) + sum(
        int(prepared.splits[s].features.nbytes) for s in ("vali", "test")
    )
    store = dev
    if dev.type == "cuda" and n_bytes > 0.6 * torch.cuda.mem_get_info(dev)[0]:
        store = torch.device("cpu")
        progress_log[0](f"features ({n_bytes / 2**30:.1f} GiB) do not fit on the GPU; gathering batches on the host")
    train = split_to_tensors(train_split, store)
    vali = split_to_tensors(prepared.splits["vali"], store)
    test = split_to_tensors(prepared.splits["test"], store)
    n_features = train.features.shape[1]
    lengths = train.offsets_np[1:] - train.offsets_np[:-1]
    list_size = tc["list_size"] or max(int(lengths.max()), 1)
    dataset, fold = parts[0], parts[1]
    vali_ev = eval_lists(vali, tc["test_list_size"], tc["eval_batch_size"], (dataset, fold, "vali", "eval_lists", tc["test_list_size"]), dev)
    test_ev = eval_lists(test, tc["test_list_size"], tc["eval_batch_size"], (dataset, fold, "test", "eval_lists", tc["test_list_size"]), dev)

    torch.manual_seed(derive_seed(*parts, "init"))
    model = build_model(cfg["model"], n_features).to(dev)
    loss_module = loss_call.module.to(dev) if loss_call.module is not None else None
    params = list(model.parameters()) + (list(loss_module.parameters()) if loss_module is not None else [])
    opt = torch.optim.Adam(params, lr=tc["lr"], weight_decay=tc["weight_decay"])
    torch.manual_seed(derive_seed(*parts, "dropout"))
    list_gen = torch.Generator().manual_seed(derive_seed(*parts, "lists"))
    loss_gen = torch.Generator(device=dev).manual_seed(derive_seed(*parts, "loss"))

    steps_per_epoch = math.ceil(train.n_queries / tc["batch_size"])
    n_epochs = tc["epochs"] if tc["epochs"] is not None else math.ceil(tc["max_steps"] / steps_per_epoch)
    if tc["max_steps"] is not None:
        n_epochs = min(n_epochs, math.ceil(tc["max_steps"] / steps_per_epoch))
    max_steps = tc["max_steps"] if tc["max_steps"] is not None else n_epochs * steps_per_epoch

    epoch, step, best, best_epoch, best_state, bad, curve, done, elapsed = 0, 0, None, 0, None, 0, [], False, 0.0
    resumed_from = None
    ck = _load_checkpoint(ckpt_path, key, progress_log[0])
    if ck is not None:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        if loss_module is not None:
            loss_module.load_state_dict(ck["loss"])
        list_gen.set_state(ck["rng"]["lists"])
        loss_gen.set_state(ck["rng"]["loss"])
        torch.set_rng_state(ck["rng"]["torch"])
        if dev.type == "cuda" and ck["rng"]["cuda"]:
            torch.cuda.set_rng_state_all(ck["rng"]["cuda"])
        epoch, step, done, elapsed = ck["epoch"], ck["step"], ck["done"], ck["elapsed_s"]
        best, best_epoch, bad, curve = ck["best"]["score"], ck["best"]["epoch"], ck["bad_epochs"], ck["curve"]
        best_state = ck["best"]["model"]
        resumed_from = epoch
        progress_log[0](f"resuming {'/'.join(map(str, parts))} from the checkpoint after epoch {epoch}")

    progress = _Progress(max_steps, step, quiet, desc="/".join(map(str, parts)))
    progress_log[0] = progress.log
    segment_start = time.perf_counter()
    try:
        while not done:
            t_epoch = time.perf_counter()
            lr = lr_at(tc, epoch)
            for group in opt.param_groups:
                group["lr"] = lr
            tau = tau_at(tc["tau_schedule"], epoch, n_epochs)
            model.train()
            lists, order = epoch_lists(train, list_size, list_gen)
            total_loss, n_batches = 0.0, 0
            for b in range(steps_per_epoch):
                if step >= max_steps:
                    break
                rows = lists[order[b * tc["batch_size"] : (b + 1) * tc["batch_size"]]]
                x, y, mask = gather(train, rows, dev)
                with _autocast(dev, tc["amp"]):
                    s = model(x, mask)
                loss = loss_call(s.float(), y, mask, tau=tau, gen=loss_gen)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                clip = float(tc["grad_clip"]) if tc["grad_clip"] is not None else math.inf
                gnorm = nn.utils.clip_grad_norm_(params, clip)
                loss_v, gnorm_v = torch.stack([loss.detach().float(), gnorm.float()]).tolist()
                if not (math.isfinite(loss_v) and math.isfinite(gnorm_v)):
                    raise TrainingDiverged(
                        f"non-finite {'loss' if not math.isfinite(loss_v) else 'gradient'} in epoch {epoch + 1}, "
                        f"batch {b + 1} (step {step + 1}) of method {parts[2]!r}: loss={loss_v}, "
                        f"grad_norm={gnorm_v}, lr={lr}; lower train.lr or set train.grad_clip"
                    )
                opt.step()
                step += 1
                total_loss += loss_v
                n_batches += 1
                progress.step(loss_v, best)
            vali_scores = score_lists(model, vali, vali_ev, dev, tc["amp"])
            if not np.isfinite(vali_scores).all():
                raise TrainingDiverged(f"non-finite validation scores after epoch {epoch + 1} of method {parts[2]!r}")
            frame = evaluate_split(
                vali_scores, vali.labels_np[vali_ev.doc_index], vali_ev.offsets, metrics_cfg, names=vali_names
            )
            means = summarize(frame, vali_names)
            score = means[stop_metric]
            epoch += 1
            if _better(score, best, higher):
                best, best_epoch, bad = score, epoch, 0
                best_state = _clone_state(model)
            else:
                bad += 1
            row = {
                "epoch": epoch,
                "step": step,
                "lr": lr,
                "tau": math.nan if tau is None else tau,
                "train_loss": total_loss / max(n_batches, 1),
                "seconds": time.perf_counter() - t_epoch,
                **{f"vali_{m}": means[m] for m in vali_names},
            }
            curve.append(row)
            stop_patience = tc["patience"] is not None and bad >= tc["patience"]
            done = epoch >= n_epochs or step >= max_steps or stop_patience
            progress.epoch(
                f"epoch {epoch}/{n_epochs} step {step} loss {row['train_loss']:.5g} "
                f"vali {stop_metric} {score:.5f} (best {math.nan if best is None else best:.5f} @ {best_epoch})"
            )
            _save_checkpoint(
                ckpt_path,
                {
                    "format": CHECKPOINT_FORMAT,
                    "key": key,
                    "epoch": epoch,
                    "step": step,
                    "done": done,
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "loss": loss_module.state_dict() if loss_module is not None else {},
                    "best": {"score": best, "epoch": best_epoch, "model": best_state},
                    "bad_epochs": bad,
                    "curve": curve,
                    "rng": {
                        "lists": list_gen.get_state(),
                        "loss": loss_gen.get_state(),
                        "torch": torch.get_rng_state(),
                        "cuda": torch.cuda.get_rng_state_all() if dev.type == "cuda" else [],
                    },
                    "elapsed_s": elapsed + (time.perf_counter() - segment_start),
                },
            )
            if os.environ.get(EXIT_ENV) == str(epoch):
                progress.close()
                os._exit(EXIT_STATUS)
    finally:
        progress.close()

    if tc["restore_best"] and best_state is not None:
        model.load_state_dict(best_state)
    test_scores = score_lists(model, test, test_ev, dev, tc["amp"])
    if not np.isfinite(test_scores).all():
        raise TrainingDiverged(f"non-finite test scores for method {parts[2]!r}")
    test_frame = evaluate_split(
        test_scores, test.labels_np[test_ev.doc_index], test_ev.offsets, metrics_cfg, query_ids=test.qids
    )
    stopped_early = tc["patience"] is not None and bad >= tc["patience"]
    summary = {
        "best_epoch": best_epoch,
        "best_vali": best,
        "early_stopping_metric": stop_metric,
        "epochs_run": epoch,
        "steps": step,
        "epochs_budget": n_epochs,
        "steps_budget": max_steps,
        "stopped_early": stopped_early,
        "resumed_from_epoch": resumed_from,
        "restored_best": bool(tc["restore_best"] and best_state is not None),
        "loss_parameters": (
            {k: v.detach().cpu().tolist() for k, v in loss_module.state_dict().items()} if loss_module else {}
        ),
        "test_means": summarize(test_frame, metrics_cfg["names"]),
        "n_test_queries": int(test.n_queries),
        "n_test_docs_scored": int(test_ev.doc_index.size),
        "n_parameters": int(sum(p.numel() for p in model.parameters())),
    }
    return {
        "test_index": test_ev.doc_index,
        "test_scores": test_scores,
        "test_frame": test_frame,
        "curve": pd.DataFrame(curve),
        "summary": summary,
        "store": store.type,
        "elapsed_before": elapsed,
    }


# ----------------------------------------------------------------------------------------
# CLI


def _cli_train(args) -> int:
    return run_from_cli(train_run, args, user_errors=(TrainingDiverged,), checkpoint_dir=args.checkpoint_dir)


def register_cli(subparsers) -> None:
    """Add ``ltr-bench train``."""
    p = subparsers.add_parser("train", help="train one neural method on one prepared fold with one seed")
    add_run_arguments(
        p,
        method_help="key under methods: in the config",
        config_help="YAML or JSON config with methods/model/train/metrics",
        quiet_help="no progress bar; one log line per epoch",
        threads_help="torch intra-op threads (0: torch's default)",
    )
    p.add_argument("--checkpoint-dir", default=None, help="default: .<out name>.ckpt next to --out")
    p.set_defaults(func=_cli_train)

r"""The neural method's resolved configuration and its schedules.

Configuration (YAML or JSON, read by :func:`bench.config.run.read_run_config`; other
top-level keys are ignored)::

    model:   {...}            # shared defaults (bench.models: type mlp | context_aware)
    train:   {...}            # shared defaults, keys below
    metrics: [ndcg@10, ...]   # or {names: [...], empty_query: one|zero|drop, ties: stable|expected}
    methods:
      NAME: {loss: <registered name or pkg.mod:func>, params: {...}, model: {...}, train: {...},
             metrics: ...}    # method-level keys override the shared ones key by key

A method's ``model`` replaces the shared one wholesale when it names a different ``type``
(:func:`bench.config.plan.merged_model`). ``train`` keys (defaults in :data:`TRAIN_DEFAULTS`):

- ``batch_size`` (16): lists per step. ``list_size`` (200): ``L_train``; every epoch each
  training query is sub-sampled (without replacement) or padded to it with the run's
  seeded generator; ``null`` pads to the longest training query. ``test_list_size`` (null):
  ``L_test``; null evaluates full lists, else a fixed seeded sub-sample per query of
  validation and test (:func:`bench.data.sublists.seeded_sublists`, drawn from
  ``(dataset, fold, split, "eval_lists", L_test)``, shared by every method and seed so
  paired tests stay paired).
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
options, model, the ``train`` keys except :data:`NOT_PROTOCOL`, the seed and the metric
conventions -- not the loss, its ``params`` or its temperature schedule.
"""

from __future__ import annotations

import math
from typing import Any

from bench.config.plan import merged_model
from bench.config.run import method_entry, resolve_metrics_config
from bench.errors import ConfigError

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


def check(cond: bool, key: str, msg: str) -> None:
    """Raise :class:`ConfigError` ``"<key>: <msg>"`` unless ``cond``."""
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
    bench.errors.ConfigError: methods.m.train.bach_size: unknown key; known keys: amp, batch_size, early_stopping_metric, epochs, eval_batch_size, grad_clip, keep_checkpoint, list_size, lr, lr_gamma, lr_step, max_steps, patience, restore_best, tau_schedule, test_list_size, weight_decay
    """
    shared, local = dict(shared or {}), dict(local or {})

    def where(k: str) -> str:
        return f"methods.{method}.train.{k}" if k in local else f"train.{k}"

    for k in [*shared, *local]:
        check(k in TRAIN_DEFAULTS, where(k), f"unknown key; known keys: {', '.join(sorted(TRAIN_DEFAULTS))}")
    c = {**TRAIN_DEFAULTS, **shared, **local}
    for k in ("batch_size", "eval_batch_size"):
        check(_is_int(c[k]), where(k), f"must be a positive integer, got {c[k]!r}")
    for k in ("list_size", "test_list_size", "epochs", "max_steps", "lr_step", "patience"):
        check(c[k] is None or _is_int(c[k]), where(k), f"must be a positive integer or null, got {c[k]!r}")
    check(c["epochs"] is not None or c["max_steps"] is not None, where("epochs"), "set epochs or max_steps")
    check(_is_num(c["lr"]) and c["lr"] > 0, where("lr"), f"must be a positive number, got {c['lr']!r}")
    check(_is_num(c["lr_gamma"]) and c["lr_gamma"] > 0, where("lr_gamma"), "must be a positive number")
    check(_is_num(c["weight_decay"]) and c["weight_decay"] >= 0, where("weight_decay"), "must be >= 0")
    check(
        c["grad_clip"] is None or (_is_num(c["grad_clip"]) and c["grad_clip"] > 0),
        where("grad_clip"),
        f"must be a positive number or null, got {c['grad_clip']!r}",
    )
    for k in ("restore_best", "amp", "keep_checkpoint"):
        check(isinstance(c[k], bool), where(k), f"must be true or false, got {c[k]!r}")
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
    check(isinstance(s, dict), key, "must be a mapping {kind: constant|exponential, ...} or null")
    kind = s.get("kind")
    if kind == "constant":
        check(set(s) == {"kind", "value"}, key, "constant schedule takes exactly {kind, value}")
        check(_is_num(s["value"]) and s["value"] > 0, f"{key}.value", "must be a positive number")
    elif kind == "exponential":
        check(set(s) == {"kind", "start", "end"}, key, "exponential schedule takes exactly {kind, start, end}")
        for k in ("start", "end"):
            check(_is_num(s[k]) and s[k] > 0, f"{key}.{k}", "must be a positive number")
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


def resolve_run_config(config: dict[str, Any], method: str) -> dict[str, Any]:
    """The fully resolved config of one neural method: loss, params, model, train, metrics."""
    entry = method_entry(config, method)
    if "gbdt" in entry:
        raise ConfigError(f"methods.{method}: a GBDT method; train it with `ltr-bench gbdt`")
    if "linear" in entry:
        raise ConfigError(f"methods.{method}: a linear method; fit it with `ltr-bench linear`")
    for k in entry:
        check(k in METHOD_KEYS, f"methods.{method}.{k}", f"unknown key; known keys: {', '.join(METHOD_KEYS)}")
    loss = entry.get("loss")
    check(isinstance(loss, str) and bool(loss), f"methods.{method}.loss", "must name a loss (str)")
    params = entry.get("params") or {}
    check(isinstance(params, dict), f"methods.{method}.params", "must be a mapping")
    for section in ("model", "train"):
        for src, key in ((config.get(section), section), (entry.get(section), f"methods.{method}.{section}")):
            check(src is None or isinstance(src, dict), key, "must be a mapping")
    from bench.models import resolve_model_config  # torch: the rest of this module is torch-free

    local_model = entry.get("model") or {}
    merged = merged_model(config.get("model"), local_model)
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

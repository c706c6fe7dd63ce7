r"""The neural method's configuration, what it means, and its schedules.

Configuration (YAML or JSON, read by :func:`bench.config.run.read_run_config`; other
top-level keys are ignored)::

    model:   {...}            # shared defaults (bench.models: type mlp | context_aware)
    train:   {...}            # shared defaults, keys below
    metrics: [ndcg@10, ...]   # or {names: [...], empty_query: one|zero|drop, ties: stable|expected}
    methods:
      NAME: {loss: <registered name or pkg.mod:func>, params: {...}, model: {...}, train: {...},
             metrics: ...}    # method-level keys override the shared ones key by key

The settings a neural run receives are resolved from it by
:func:`bench.config.settings.resolve_neural`. A method's ``model`` replaces the shared one
wholesale when it names a different ``type`` (:func:`bench.config.plan.merged_model`).
``train`` keys (types, bounds and defaults: the
schema's ``$defs/train``, ``workflows/schemas/config.schema.yaml``, read by
:func:`bench.config.run.resolve_train`; the defaults are given in brackets below):

- ``batch_size`` (16): lists per step. ``list_size`` (200): ``L_train``; every epoch each
  training query is sub-sampled (without replacement) or padded to it with the run's
  seeded generator; ``null``, or a value above the longest training query, pads to the
  longest training query (wider padding changes no loss, only the time it takes). ``test_list_size`` (null):
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
  after this many epochs without improvement (null: run the whole budget).
- ``checkpoint`` (``best``): score the test split with the best validation epoch's weights
  (``last``: the last epoch's, allRank's choice); it replaces ``restore_best`` (true: ``best``,
  false: ``last``). ``refit`` (false): then train a new model from scratch on train +
  validation for that epoch's length and test it instead (NeuralNDCG's protocol). Both:
  :mod:`bench.training.refit`.
- ``tau_schedule`` (null): for losses with a ``tau`` keyword, ``{kind: constant, value: T}``
  or ``{kind: exponential, start: T0, end: T1}``: per epoch ``tau_e = T0 (T1/T0)^(e/(E-1))``
  over the ``E`` budgeted epochs (null: the loss's own ``params.tau`` or default).
- ``amp`` (false): bfloat16 autocast of the model on CUDA (ignored on CPU, with a note);
  the loss is always computed in float32.
- ``eval_batch_size`` (256): lists per evaluation batch (capped at 65,536 padded slots).
- ``vali_curve_list_size`` (null): ``L``: also record, every epoch, the loss and the validation
  metrics on the validation queries cut to ``L`` documents (``curve.csv`` columns
  ``vali_L<L>_loss``, ``vali_L<L>_<metric>``; :mod:`bench.training.vali_curve`). What PiRank's
  Fig. 5 plots; the workflow sets it for the temperature figure's runs only. It changes no
  other output of the run, and is not part of the protocol.
- ``keep_checkpoint`` (false): keep the checkpoint directory after a successful run.

The **protocol** recorded in run.json (and hashed) holds dataset, fold, preprocessing
options, model, the ``train`` keys except :data:`NOT_PROTOCOL`, the seed and the metric
conventions -- not the loss, its ``params`` or its temperature schedule.
"""

from __future__ import annotations

from typing import Any

from bench.errors import ConfigError

NOT_PROTOCOL = ("tau_schedule", "eval_batch_size", "keep_checkpoint", "vali_curve_list_size")


def check(cond: bool, key: str, msg: str) -> None:
    """Raise :class:`ConfigError` ``"<key>: <msg>"`` unless ``cond``."""
    if not cond:
        raise ConfigError(f"{key}: {msg}")


def tau_at(schedule: dict[str, Any] | None, epoch: int, n_epochs: int) -> float | None:
    """Temperature for 0-based ``epoch`` of ``n_epochs`` (None when there is no schedule).

    >>> exp = {"kind": "exponential", "start": 10.0, "end": 0.1}
    >>> tau_at(exp, 0, 3), tau_at(exp, 2, 3)
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

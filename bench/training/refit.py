r"""Which model a run tests (``train.checkpoint``), and the refit on the full training fold (``train.refit``).

**``checkpoint``** (``best``, the default, or ``last``): ``best`` scores the test split with the
weights of the best validation epoch (a GBDT run: its best round, ``best_iteration``); ``last``
with the last epoch's (round's) weights, as allRank, the NeuralNDCG authors' tool, does. A
neural run whose validation metric never improved (NaN every epoch) has no best epoch and tests
its last. run.json's ``result.checkpoint`` says which one was tested and ``result.tested_epoch``
(neural) or ``result.tested_iteration`` (GBDT, 1-based) which epoch or round that is.
(``checkpoint`` replaces ``restore_best``: true is ``best``, false ``last``; a config that still
says ``restore_best`` is refused naming the replacement, by the schema.)

**``refit``** (false by default): NeuralNDCG's protocol, "We tune the hyperparameters of our
models on the validation data and report performance on the test set, having trained the best
models on the full training fold". With ``refit: true`` the run first fits exactly as without
it -- validating every epoch (round), stopping early, recording ``curve.csv`` and ``best_vali``
-- so every choice made on validation (early stopping, a selected grid point, a tuned
configuration) is the same; then it trains a second model **from scratch** on train +
validation (:func:`full_training_split`) and scores the test split with that model only:

- the same seeds (:func:`bench.seeds.derive_seed` of the same run: the same initial weights),
  the same schedule (epoch :math:`e`'s learning rate, and its temperature on the first fit's
  epoch budget), the same library parameters;
- for the length the checkpoint names (:func:`refit_length`): the best epoch's number of epochs
  :math:`E^*` (``best``) or the epochs run (``last``). When a step budget is what ends the first
  fit's schedule (``max_steps`` set and reached before ``epochs``: PiRank's 100,000 steps) the
  length is in steps instead, the steps taken by the end of that epoch: an epoch of the full
  fold has more steps than one of the training split, so :math:`E^*` epochs would be more
  updates than validation chose. A GBDT refit boosts ``best_iteration`` (``best``) or
  ``rounds_trained`` (``last``) rounds;
- no validation and no early stopping (the validation queries are training data now), and no
  checkpoint: a run killed during its refit resumes after the first fit and refits again.

run.json's ``result.refit`` is null without refit, else :func:`refit_record`: the length trained
(``unit`` and ``epochs`` + ``steps``, or ``rounds``), the full fold's ``queries`` and
``documents``, the refit's training timing (:func:`bench.results.training_timing`:
``train_seconds``, ``train_docs`` ...) and ``seconds`` (the whole refit: building the fold,
training). The top-level timing facts (``train_seconds`` ...) and ``curve.csv`` stay the first
fit's; ``wall_time_s`` includes the refit; ``test_means`` and the scores are the refit model's.

**Run kinds.** Neural and GBDT runs refit (:data:`REFIT_KINDS`); every other kind -- the linear
fit, SinkProp's own protocol -- refuses ``refit: true`` with a :class:`~bench.errors.ConfigError`
naming the key and the method (:func:`job_settings`, which :func:`bench.training.cli.run_job`
calls). A GBDT method has no ``train`` of its own: it takes both keys from the job's shared
``train`` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.config import schema
from bench.data.prepared import Split
from bench.errors import ConfigError
from bench.results import training_timing

REFIT_KINDS = ("neural", "gbdt")  # the run kinds whose run function refits


def job_settings(kind: str, settings: dict[str, Any], config: dict[str, Any], method: str) -> dict[str, Any]:
    """A job's resolved ``settings`` with its ``checkpoint`` and ``refit`` where its run reads them.

    A neural kind's settings hold them in their ``train`` (the method's own over the
    protocol's); a GBDT run gets them as settings keys, from the job's shared ``train`` section
    (validated by the schema, defaults filled). A kind outside :data:`REFIT_KINDS` given
    ``refit: true`` is refused, naming the key and the method.

    >>> cfg = {"train": {"refit": True}, "methods": {"g": {"gbdt": "lightgbm"}, "l": {"linear": "least_squares"}}}
    >>> job_settings("gbdt", {"gbdt": "lightgbm"}, cfg, "g")
    {'gbdt': 'lightgbm', 'checkpoint': 'best', 'refit': True}
    >>> job_settings("linear", {"linear": "least_squares"}, cfg, "l")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bench.errors.ConfigError: train.refit: methods.l is a linear run, which cannot refit ...
    """
    train = settings.get("train")
    own = train is not None and "refit" in ((config.get("methods") or {}).get(method, {}).get("train") or {})
    if train is None:
        train = schema.resolve("train", (config.get("train"), "train"))
    if train["refit"] and kind not in REFIT_KINDS:
        key = f"methods.{method}.train.refit" if own else "train.refit"
        raise ConfigError(
            f"{key}: methods.{method} is a {kind} run, which cannot refit on train + validation "
            f"(only {' and '.join(REFIT_KINDS)} runs do); set it to false for this method's protocol"
        )
    if "train" in settings or kind not in REFIT_KINDS:
        return settings
    return {**settings, "checkpoint": train["checkpoint"], "refit": bool(train["refit"])}


def tested_model(settings: dict[str, Any]) -> tuple[str, bool]:
    """``(checkpoint, refit)`` of a GBDT run's settings; the schema's defaults where absent
    (a caller that resolved them without :func:`job_settings`, e.g. the perf and cost suites)."""
    defaults = schema.defaults("train")
    return settings.get("checkpoint", defaults["checkpoint"]), bool(settings.get("refit", defaults["refit"]))


@dataclass(frozen=True)
class RefitLength:
    """How long a neural refit trains: ``count`` epochs or steps (``unit``)."""

    unit: str  # "epochs" | "steps"
    count: int

    def train_section(self, train: dict[str, Any]) -> dict[str, Any]:
        """``train`` with the refit's budget: ``count`` epochs and no step budget, or the reverse."""
        if self.unit == "epochs":
            return {**train, "epochs": self.count, "max_steps": None}
        return {**train, "epochs": None, "max_steps": self.count}


def refit_length(train: dict[str, Any], epochs_per_budget: int, steps_per_epoch: int, *, epochs: int, steps: int) -> RefitLength:
    """The refit's length (module docstring): ``epochs`` (the tested epoch, 1-based) unless the
    first fit's step budget binds (``max_steps`` below ``train.epochs`` epochs of
    ``steps_per_epoch`` steps, or no epoch budget), then ``steps`` (the steps after that epoch).
    ``epochs_per_budget``: the first fit's epoch budget (:class:`bench.training.budget.Budget`).

    >>> refit_length({"epochs": 100, "max_steps": None}, 100, 296, epochs=40, steps=11840)
    RefitLength(unit='epochs', count=40)
    >>> refit_length({"epochs": None, "max_steps": 100_000}, 85, 1183, epochs=12, steps=14196)
    RefitLength(unit='steps', count=14196)
    >>> refit_length({"epochs": 100, "max_steps": 500}, 5, 100, epochs=3, steps=300).unit  # 500 steps end it
    'steps'
    """
    by_steps = train["max_steps"] is not None and (
        train["epochs"] is None or train["max_steps"] < train["epochs"] * steps_per_epoch
    )
    if epochs < 1 or epochs > epochs_per_budget:
        raise ValueError(f"tested epoch {epochs} outside the budget of {epochs_per_budget}")
    return RefitLength("steps", int(steps)) if by_steps else RefitLength("epochs", int(epochs))


def full_training_split(prepared: Any) -> Split:
    """The full training fold: the prepared fold's ``train`` split followed by its ``vali`` split.

    A copy: the two splits are separate memory-mapped files, and each trainer reads one array
    per split (the neural gather indexes one tensor, the libraries bin one matrix), so the
    features are concatenated into one private array, (n_train + n_vali) x F float32 (1.6 GB on
    an MSLR-WEB30K fold; the caller drops it when the refit ends). Queries keep their order and
    ids; the validation offsets are shifted by the training documents.
    """
    train, vali = prepared.splits["train"], prepared.splits["vali"]
    n_train = int(np.asarray(train.offsets)[-1])
    return Split(
        features=np.concatenate([np.asarray(train.features), np.asarray(vali.features)]),
        labels=np.concatenate([np.asarray(train.labels), np.asarray(vali.labels)]),
        qids=np.concatenate([np.asarray(train.qids), np.asarray(vali.qids)]),
        offsets=np.concatenate([np.asarray(train.offsets), np.asarray(vali.offsets)[1:] + n_train]),
    )


def refit_record(
    full: Split, length: dict[str, Any], *, train_seconds: float, train_docs: int, epochs: float, seconds: float
) -> dict[str, Any]:
    """run.json's ``result.refit`` (module docstring): ``length`` (``unit`` and what was trained),
    the full fold's queries and documents, the refit's training timing over ``epochs`` (one
    epoch: what ``curve.csv`` counts, a pass or a round), and ``seconds`` (the whole refit)."""
    return {
        **length,
        "queries": full.n_queries,
        "documents": full.n_docs,
        **training_timing(train_seconds, train_docs, epochs),
        "seconds": float(seconds),
    }

"""Run kinds: one table that knows every way a run is trained.

A *run kind* is one way to turn ``(run config, prepared fold, method, seed)`` into a run
directory. :data:`RUN_KINDS` maps each kind to

- ``rule``: the Snakemake rule (``workflows/train.smk``) and the ``ltr-bench`` command that run
  it; the cost models (``bench.costs.model.COST_MODELS``) and cluster sizes know rules, not kinds;
- ``method_key``: the key of a method entry that makes a method of this kind (the schema's
  ``method`` has one branch per key);
- ``protocol_key`` (optional): a protocol section with ``methods`` that hands the methods it
  lists to this kind instead (``sinkprop_protocol``); :func:`bench.config.plan.run_config`
  copies it into their run config, so the kind of a run is read from its config alone;
- ``resolve`` and ``run``: ``"module:function"`` of its config resolver ``(run config, method)
  -> settings`` (:mod:`bench.config.settings`: torch-free, validates everything) and of its
  run function ``(settings, prepared_dir, out_dir, *, method, seed, device, quiet, threads)
  -> Path``, which receives the resolved settings and validates nothing; imported only when a
  run needs them (nothing here imports torch; the Snakefile imports this module).

Adding a kind = one module with its resolver and run function + one line here (+ its
section or method keys in ``workflows/schemas/config.schema.yaml``); a kind with a rule of its
own also adds one ``use rule run as <rule> with:`` in ``workflows/train.smk``.

>>> method_kind({"gbdt": "lightgbm"}), method_kind({"linear": "least_squares"}), method_kind({"loss": "ranknet"})
('gbdt', 'linear', 'neural')
>>> run_kind({"sinkprop_protocol": {}, "methods": {"m": {"loss": "sinkprop"}}}, "m")
'sinkprop_protocol'
>>> rules()
('train', 'gbdt', 'linear')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.errors import ConfigError


@dataclass(frozen=True)
class RunKind:
    """One run kind (see the module docstring)."""

    rule: str
    method_key: str
    resolve: str
    run: str
    protocol_key: str | None = None
    help: str = ""


RUN_KINDS: dict[str, RunKind] = {
    # checked in this order: a protocol's section before the method key it shares
    "sinkprop_protocol": RunKind("train", "loss", "bench.config.settings:resolve_sinkprop",
                                 "bench.training.sinkprop_run:protocol_run", protocol_key="sinkprop_protocol"),
    "gbdt": RunKind("gbdt", "gbdt", "bench.config.settings:resolve_gbdt", "bench.training.gbdt:gbdt_run",
                    help="train one LightGBM/XGBoost baseline on one prepared fold"),
    "linear": RunKind("linear", "linear", "bench.config.settings:resolve_linear",
                      "bench.training.linear:linear_run",
                      help="fit one least-squares linear regression (ridge grid) on one prepared fold"),
    "neural": RunKind("train", "loss", "bench.config.settings:resolve_neural", "bench.training.neural:train_run",
                      help="train one neural method on one prepared fold with one seed"),
}


def method_kind(method_spec: dict[str, Any]) -> str:
    """The kind a method entry makes (the first kind without a ``protocol_key`` whose key it has)."""
    for name, kind in RUN_KINDS.items():
        if kind.protocol_key is None and kind.method_key in method_spec:
            return name
    keys = ", ".join(sorted({k.method_key for k in RUN_KINDS.values()}))
    raise ConfigError(f"a method entry needs one of the keys {keys}, got {sorted(method_spec)}")


def run_kind(run_config: dict[str, Any], method: str, rule: str | None = None) -> str:
    """The kind that trains ``method`` under ``run_config`` (a protocol's section, else the method's
    key). Without a method entry to read: the first kind of ``rule`` chosen by a method key (its
    resolver then names what is missing)."""
    methods = run_config.get("methods")
    entry = methods.get(method) if isinstance(methods, dict) else None
    if not isinstance(entry, dict):
        if rule is None:
            return method_kind({})  # raises
        return next(n for n, k in RUN_KINDS.items() if k.rule == rule and k.protocol_key is None)
    for name, kind in RUN_KINDS.items():
        if kind.method_key in entry and (kind.protocol_key is None or run_config.get(kind.protocol_key) is not None):
            return name
    return method_kind(entry)


def rules() -> tuple[str, ...]:
    """The rules (and ``ltr-bench`` commands) that run a kind, each once, in registry order."""
    return tuple(dict.fromkeys(kind.rule for kind in RUN_KINDS.values()))


#: a tuned method's two jobs (``workflows/tune.smk``): each trains several of its runs, one after
#: another, on the device the method's run kind uses
TUNING_RULES = ("tune", "tuned_runs")


def training_rules() -> tuple[str, ...]:
    """Every rule whose jobs train runs: the run kinds' (:func:`rules`) and a tuning's (:data:`TUNING_RULES`)."""
    return rules() + TUNING_RULES


def rule_help(rule: str) -> str:
    """The line of ``ltr-bench --help`` for a rule's command: the first of its kinds' ``help``.

    >>> rule_help("gbdt")
    'train one LightGBM/XGBoost baseline on one prepared fold'
    """
    return next((kind.help for kind in RUN_KINDS.values() if kind.rule == rule and kind.help),
                f"run one method on one prepared fold with one seed ({rule})")


def rule_of(method_spec: dict[str, Any]) -> str:
    """The rule that runs a method (a protocol's kind shares the rule of its method key's kind)."""
    return RUN_KINDS[method_kind(method_spec)].rule


def protocol_kinds() -> dict[str, str]:
    """``protocol_key -> kind`` of the kinds a protocol section chooses."""
    return {kind.protocol_key: name for name, kind in RUN_KINDS.items() if kind.protocol_key is not None}


def load(ref: str) -> Callable[..., Any]:
    """The function ``"package.module:function"`` names (imported now)."""
    module, _, function = ref.partition(":")
    return getattr(importlib.import_module(module), function)

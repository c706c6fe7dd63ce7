"""The settings of one run, resolved from its job's config before anything runs.

One resolver per run kind (:data:`bench.config.kinds.RUN_KINDS` names it): ``(run config,
method) -> settings``. Each reads the method entry and the shared sections of the job's
config (:mod:`bench.config.run`), validates them against the config schema's definitions
(keys, types, bounds and defaults live there only: :mod:`bench.config.schema`) and keeps
here only the checks that span several fields. The run functions of :mod:`bench.training`
receive these settings and validate nothing themselves; :func:`bench.training.cli.run_job`
calls the resolver, then the run function.

>>> cfg = resolve_gbdt({"methods": {"x": {"gbdt": "xgboost", "objective": "rank:ndcg"}}}, "x")
>>> cfg["num_trees"], cfg["early_stopping_metric"], cfg["params"]["max_depth"]
(500, 'ndcg@10', 8)
>>> cfg = resolve_linear({"methods": {"lr": {"linear": "least_squares"}}}, "lr")
>>> cfg["penalties"][:3], cfg["early_stopping_metric"]
([0.0, 0.01, 0.1], 'ndcg@10')
>>> resolve_linear({"methods": {"lr": {"linear": "least_squares", "penalties": [-1]}}}, "lr")
Traceback (most recent call last):
...
bench.errors.ConfigError: config key 'methods.lr.penalties.0': -1 is less than the minimum of 0
"""

from __future__ import annotations

from typing import Any

from bench.config import schema
from bench.config.plan import merged_model
from bench.config.run import (
    check_method,
    method_default,
    method_entry,
    resolve_metrics_config,
    resolve_model,
    resolve_section,
    resolve_train,
    stopping_metric,
)
from bench.errors import ConfigError


def _metrics(config: dict[str, Any], entry: dict[str, Any], key: str) -> dict[str, Any]:
    """The method's own ``metrics``, else the shared section's."""
    if "metrics" in entry:
        return resolve_metrics_config(entry["metrics"], key=f"{key}.metrics")
    return resolve_metrics_config(config.get("metrics"))


def _require_kind(entry: dict[str, Any], key: str, method_key: str, what: str, command: str) -> None:
    """A resolver given a method of another kind names the command that runs it."""
    if method_key not in entry:
        raise ConfigError(f"{key}: not a {what} method (no '{method_key}' key); run it with `{command}`")


# ----------------------------------------------------------------------------- neural


def resolve_neural(config: dict[str, Any], method: str) -> dict[str, Any]:
    """A neural method: ``loss``, ``params``, ``model`` (the shared model with the method's merged
    over it, :func:`bench.config.run.resolve_model`), ``train`` (the shared section with the
    method's over it, :func:`bench.config.run.resolve_train`) and ``metrics``.

    >>> s = resolve_neural({"methods": {"m": {"loss": "ranknet"}}, "model": {"hidden": [8]}}, "m")
    >>> s["model"]["hidden"], s["train"]["batch_size"], s["metrics"]["ties"]
    ([8], 16, 'stable')
    """
    entry, key = method_entry(config, method), f"methods.{method}"
    _require_kind(entry, key, "loss", "neural", "ltr-bench gbdt` or `ltr-bench linear")
    check_method(entry, key)
    for section in ("model", "train"):
        if config.get(section) is not None and not isinstance(config[section], dict):
            raise ConfigError(f"config key '{section}': must be a mapping")
    local_model = entry.get("model") or {}
    model = resolve_model(merged_model(config.get("model"), local_model), f"{key}.model" if local_model else "model")
    train = resolve_train(config.get("train"), entry.get("train"), method=method)
    return {"loss": entry["loss"], "params": dict(entry.get("params") or {}), "model": model, "train": train,
            "metrics": _metrics(config, entry, key)}


# ----------------------------------------------------------------------------- gbdt


def gbdt_library(lib: str) -> tuple[tuple[str, ...], dict[str, Any], tuple[str, ...]]:
    """``(objectives, default params, reserved params)`` of a GBDT library: the schema's
    ``gbdt_<lib>`` definition."""
    props = schema.definition(f"gbdt_{lib}")["properties"]
    params = props["params"]
    return tuple(props["objective"]["enum"]), params["default"], tuple(params["propertyNames"]["not"]["enum"])


def resolve_gbdt(config: dict[str, Any], method: str) -> dict[str, Any]:
    """A GBDT method: library, objective, ``params`` (the library's defaults with the method's
    over them, key by key), ``num_trees``, ``early_stopping_rounds``, the validation metric and
    ``metrics``. Checked here, across fields: the objective is one of the library's, and
    ``params`` names no parameter that the method's own keys set."""
    entry, key = method_entry(config, method), f"methods.{method}"
    _require_kind(entry, key, "gbdt", "GBDT", "ltr-bench train")
    check_method(entry, key)
    lib, objective = entry["gbdt"], entry.get("objective")
    objectives, defaults, reserved = gbdt_library(lib)
    if objective not in objectives:
        raise ConfigError(f"{key}.objective: {lib} ranking objectives are {objectives}, got {objective!r}")
    params = entry.get("params") or {}
    for p in params:
        if p in reserved:
            raise ConfigError(f"{key}.params.{p}: set via {key}.num_trees / early_stopping_rounds / objective / "
                              "early_stopping_metric instead")
    out: dict[str, Any] = {"gbdt": lib, "objective": objective, "params": {**defaults, **params}}
    for name in ("num_trees", "early_stopping_rounds"):
        out[name] = entry.get(name, method_default(name))
    out["early_stopping_metric"] = stopping_metric(config, entry, key)
    out["metrics"] = _metrics(config, entry, key)
    return out


# ----------------------------------------------------------------------------- linear


def resolve_linear(config: dict[str, Any], method: str) -> dict[str, Any]:
    """A linear method: kind, the ridge penalty grid (floats), the selection metric, ``metrics``."""
    entry, key = method_entry(config, method), f"methods.{method}"
    _require_kind(entry, key, "linear", "linear", "ltr-bench train")
    check_method(entry, key)
    if entry.get("params"):
        raise ConfigError(f"{key}.params: a linear method takes no params (set {key}.penalties)")
    penalties = entry.get("penalties", method_default("penalties"))
    return {"linear": entry["linear"], "penalties": [float(p) for p in penalties],
            "early_stopping_metric": stopping_metric(config, entry, key), "metrics": _metrics(config, entry, key)}


# ----------------------------------------------------------------------------- SinkProp's own protocol


def check_linear_scorer(model: dict[str, Any] | None, key: str) -> None:
    """SinkProp's protocol trains a linear scorer: the model, its defaults filled, is an MLP with
    no hidden layer (``hidden: []``, so batch norm and dropout have no layer to act on) and no
    output activation. The one statement of this rule: the study config's check
    (:func:`bench.config.validate.check_sinkprop_protocol`) and a job's resolver both call it.

    >>> check_linear_scorer({"type": "mlp", "hidden": []}, "model")
    >>> check_linear_scorer({"hidden": [8]}, "protocols.p.model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bench.errors.ConfigError: config key 'protocols.p.model': the SinkProp protocol trains a linear scorer ...hidden [8]...
    """
    m = resolve_model(model, key)
    if m["type"] != "mlp" or m["hidden"] != [] or m["output_activation"] is not None:
        raise ConfigError(f"config key '{key}': the SinkProp protocol trains a linear scorer ({{type: mlp, hidden: "
                          f"[]}}, no output_activation); got type {m['type']}, hidden {m.get('hidden')}, "
                          f"output_activation {m['output_activation']}")


def resolve_sinkprop_section(spec: dict[str, Any] | None, key: str = "sinkprop_protocol") -> dict[str, Any]:
    """A job's ``sinkprop_protocol`` section: the schema's ``$defs/sinkprop_protocol`` with its
    defaults filled (``methods`` dropped: the job already is one of them), the penalty grids as floats.

    >>> resolve_sinkprop_section({"stages": 3})["stages"], resolve_sinkprop_section({})["derived_queries"]
    (3, 20)
    >>> resolve_sinkprop_section({"sigma_factor": 1.0})
    Traceback (most recent call last):
    ...
    bench.errors.ConfigError: config key 'sinkprop_protocol.sigma_factor': 1.0 is less than or equal to the minimum of 1
    """
    c = resolve_section("sinkprop_protocol", spec, key)
    c.pop("methods", None)
    for k in ("init_penalties", "penalties"):
        c[k] = [float(p) for p in c[k]]
    return c


def resolve_sinkprop(config: dict[str, Any], method: str) -> dict[str, Any]:
    """A neural method trained by SinkProp's own protocol: :func:`resolve_neural`'s settings, the
    scorer linear (:func:`check_linear_scorer`), and the protocol's section under ``sinkprop_protocol``."""
    settings = resolve_neural(config, method)
    check_linear_scorer(settings["model"], f"methods.{method}.model" if "model" in config["methods"][method]
                        else "model")
    return {**settings, "sinkprop_protocol": resolve_sinkprop_section(config.get("sinkprop_protocol"))}

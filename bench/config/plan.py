"""Planning: every decision the workflow makes from the validated config, unit-tested.

The Snakefile's ``workflows/common.smk`` only maps wildcards to these functions and writes
their results as JSON (per-job config files and ``--spec`` arguments); nothing here knows
about Snakemake. Every function takes the validated config (:func:`bench.config.validate.
validate_config`) first.

- which tables and figures are enabled (:data:`TABLES`, :data:`FIGURES`: the names, defined
  once) and which files they need;
- the runs: one ``(experiment, dataset, fold, method, seed)`` per job; :func:`run_config` is
  the self-contained config one job reads (``ltr-bench train|gbdt --config``);
- what each evaluation, statistics table, table rendering and figure is given;
- the frozen comparison's protocol (:func:`study_protocol`).

>>> merged_model({"type": "mlp", "hidden": [8]}, {"dropout": 0.1})
{'type': 'mlp', 'hidden': [8], 'dropout': 0.1}
>>> merged_model({"type": "mlp", "hidden": [8]}, {"type": "context_aware"})
{'type': 'context_aware'}
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

from bench.errors import ConfigError

TABLES = (
    "pirank_table1",
    "neuralndcg_table3",
    "arf_table2",
    "listsize_table3",
    "sinkprop_letor",
    "unified_table",
)
# what each table reproduces (None: this suite's own table)
TABLE_SOURCES = {
    "pirank_table1": "PiRank (Swezey et al., NeurIPS 2021) Table 1",
    "neuralndcg_table3": "NeuralNDCG (Pobrotyn & Bialobrzeski 2021) Table 3",
    "arf_table2": "ARF (Wang et al. 2024) Table 2",
    "listsize_table3": "PiRank (Swezey et al., NeurIPS 2021) Appendix Table 3",
    "sinkprop_letor": "SinkProp (Adams & Zemel 2011) Fig. 2",
    "unified_table": None,
}
FIGURES = ("scaling_figure", "temperature_figure", "listsize_figure", "recall_heatmap", "neuralndcg_curves")
COMPARE_EXPERIMENT = "compare"


# ----------------------------------------------------------------------------- methods and roles


def merged_model(shared: dict[str, Any] | None, local: dict[str, Any] | None) -> dict[str, Any]:
    """A method's model as the trainer builds it: a different ``type`` replaces the protocol's."""
    shared, local = dict(shared or {}), dict(local or {})
    if "type" in local and local["type"] != shared.get("type", "mlp"):
        return local
    return {**shared, **local}


def resolve_role(config: dict[str, Any], role: str, table_spec: dict[str, Any] | None = None) -> str:
    """Dataset name for a paper role (table override, then global ``roles``, else the name)."""
    if table_spec and role in table_spec.get("roles", {}):
        return table_spec["roles"][role]
    return config.get("roles", {}).get(role, role)


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def enabled_datasets(config: dict[str, Any]) -> list[str]:
    return [name for name, spec in config["datasets"].items() if spec.get("enabled", True)]


def table_datasets(config: dict[str, Any], table: str) -> list[str]:
    """Configured datasets of a table, in order, roles resolved, duplicates dropped."""
    spec = config["tables"][table]
    if spec["datasets"] == "all":
        return enabled_datasets(config)
    return _dedupe(resolve_role(config, role, spec) for role in spec["datasets"])


def table_roles(config: dict[str, Any], table: str) -> dict[str, str]:
    """Dataset name -> the paper role it stands in for, when that role is its real source."""
    spec = config["tables"][table]
    roles = [] if spec["datasets"] == "all" else spec["datasets"]
    out: dict[str, str] = {}
    for role in roles:
        name = resolve_role(config, role, spec)
        if config["datasets"][name]["source"] == role and name not in out:
            out[name] = role
    return out


def table_methods(config: dict[str, Any], table: str) -> list[str]:
    spec = config["tables"][table]
    return list(config["methods"]) if spec["methods"] == "all" else list(spec["methods"])


def table_seeds(config: dict[str, Any], table: str) -> list[int]:
    spec = config["tables"][table]
    return list(spec.get("seeds") or config["protocols"][spec["protocol"]]["seeds"])


def table_folds(config: dict[str, Any], table: str, dataset: str) -> list[str]:
    spec = config["tables"][table]
    return list(spec.get("folds") or config["datasets"][dataset]["folds"])


def enabled_tables(config: dict[str, Any]) -> list[str]:
    return [t for t in TABLES if t in config.get("tables", {}) and config["tables"][t].get("enabled", True)]


def enabled_figures(config: dict[str, Any]) -> list[str]:
    figs = config.get("figures", {})
    return [f for f in FIGURES if f in figs and figs[f].get("enabled", True)]


def is_gbdt(method_spec: dict[str, Any]) -> bool:
    return "gbdt" in method_spec


def compare_method_name(entry: str | dict[str, Any]) -> str:
    """Method name of a ``compare.losses`` entry: its ``name``, or the loss reference made path-safe.

    >>> compare_method_name("examples.listwise_hinge:listwise_hinge")
    'examples.listwise_hinge.listwise_hinge'
    """
    if isinstance(entry, dict):
        return entry["name"]
    return entry.replace(":", ".")


def compare_methods(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``compare.losses`` entries as method specs."""
    out = {}
    for entry in config.get("compare", {}).get("losses", []):
        if isinstance(entry, str):
            out[compare_method_name(entry)] = {"loss": entry, "params": {}}
        else:
            spec = {"loss": entry["loss"], "params": dict(entry.get("params", {}))}
            if "label" in entry:
                spec["label"] = entry["label"]
            out[entry["name"]] = spec
    return out


def method_spec(config: dict[str, Any], experiment: str, method: str) -> dict[str, Any]:
    """A method's spec; under the ``compare`` experiment also the user's new losses."""
    if experiment == COMPARE_EXPERIMENT:
        extra = compare_methods(config)
        if method in extra:
            return extra[method]
    if method not in config["methods"]:
        raise ConfigError(f"unknown method '{method}' (config key 'methods')")
    return config["methods"][method]


def experiment_protocol(config: dict[str, Any], experiment: str) -> str:
    """Protocol name of an experiment: itself, or the frozen protocol for ``compare``."""
    if experiment == COMPARE_EXPERIMENT:
        if "freeze" not in config:
            raise ConfigError("config key 'freeze': missing; the compare experiment uses the frozen protocol")
        return config["freeze"]["protocol"]
    if experiment not in config["protocols"]:
        raise ConfigError(f"unknown protocol '{experiment}' (config key 'protocols')")
    return experiment


def protocol_for_dataset(config: dict[str, Any], protocol: str, dataset: str) -> tuple[dict, dict]:
    """The protocol's ``(model, train)`` with its override for ``dataset`` (by name, else source)."""
    proto = config["protocols"][protocol]
    model, train = copy.deepcopy(proto["model"]), copy.deepcopy(proto["train"])
    overrides = proto.get("overrides", {})
    source = config["datasets"][dataset]["source"] if dataset in config["datasets"] else None
    extra = overrides.get(dataset, overrides.get(source, {}))
    return merged_model(model, extra.get("model")), {**train, **extra.get("train", {})}


def run_config(config: dict[str, Any], experiment: str, dataset: str, method: str) -> dict[str, Any]:
    """The self-contained config one run reads (``ltr-bench train|gbdt --config``).

    Top level: the protocol's ``model`` and ``train`` for this dataset (shared defaults the
    trainer merges with the method's own ``model``/``train`` overrides), the metric
    conventions, and a one-entry ``methods`` mapping; display-only keys (``label``) are dropped.
    ``dataset_recipe`` (the dataset's ``source`` and ``options``; the trainer ignores it) is
    here so that changing a dataset's options changes every run config on it, and Snakemake
    re-runs those runs (and the prepare step they need) instead of keeping stale results.
    """
    protocol_name = experiment_protocol(config, experiment)
    protocol = config["protocols"][protocol_name]
    spec = {k: copy.deepcopy(v) for k, v in method_spec(config, experiment, method).items() if k != "label"}
    metrics = dict(config["evaluation"])
    if "metrics" in protocol:
        metrics["names"] = list(protocol["metrics"])
    model, train = protocol_for_dataset(config, protocol_name, dataset)
    return {
        "experiment": experiment,
        "protocol_name": protocol_name,
        "dataset": dataset,
        "dataset_recipe": {k: copy.deepcopy(config["datasets"][dataset].get(k)) for k in ("source", "options")},
        "model": model,
        "train": train,
        "metrics": metrics,
        "methods": {method: spec},
    }


def freeze_datasets(config: dict[str, Any]) -> list[str]:
    freeze = config["freeze"]
    if freeze["datasets"] == "all":
        return enabled_datasets(config)
    return _dedupe(resolve_role(config, role) for role in freeze["datasets"])


def freeze_methods(config: dict[str, Any]) -> list[str]:
    freeze = config["freeze"]
    return list(config["methods"]) if freeze["methods"] == "all" else list(freeze["methods"])


def compare_datasets(config: dict[str, Any]) -> list[str]:
    chosen = config.get("compare", {}).get("datasets", "all")
    frozen = freeze_datasets(config)
    if chosen == "all":
        return frozen
    out = _dedupe(resolve_role(config, role) for role in chosen)
    for name in out:
        if name not in frozen:
            raise ConfigError(f"config key 'compare.datasets': '{name}' has no frozen baselines (frozen: {frozen})")
    return out


def study_protocol(config: dict[str, Any], protocol: str, dataset: str) -> dict[str, Any]:
    """What a frozen comparison must share: data recipe, folds, model, schedule, seeds, metrics.

    Method-independent by construction; :func:`bench.frozen.protocol_hash` hashes it.
    """
    ds = config["datasets"][dataset]
    model, train = protocol_for_dataset(config, protocol, dataset)
    return {
        "dataset": {"name": dataset, "source": ds["source"], "folds": list(ds["folds"]), "options": ds["options"]},
        "model": model,
        "train": train,
        "seeds": list(config["protocols"][protocol]["seeds"]),
        "evaluation": dict(config["evaluation"]),
        "metrics": list(config["freeze"]["metrics"]),
    }

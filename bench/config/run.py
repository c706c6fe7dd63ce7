"""One job's configuration: read the JSON (or YAML) a run command is given, pick its method.

``workflows/common.smk`` writes one file per ``(experiment, dataset, method)`` with
:func:`bench.config.plan.run_config`; ``ltr-bench train|gbdt|linear --config FILE`` reads it
with :func:`read_run_config`. A hand-written YAML file works too (JSON is valid YAML), so a
job resolves what it reads against the config schema's definitions
(:mod:`bench.config.schema`: keys, types, bounds and defaults live there only): its method
entry (:func:`method_entry`, :func:`check_method`), the merged ``train`` section
(:func:`resolve_train`), a protocol section such as ``sinkprop_protocol``
(:func:`resolve_section`), the metric conventions (:func:`resolve_metrics_config`). Only the
checks that span several fields are written here; the trainers receive resolved settings.

>>> resolve_metrics_config(["ndcg@10", "mrr"])
{'names': ['ndcg@10', 'mrr'], 'empty_query': 'one', 'ties': 'stable'}
>>> resolve_metrics_config({"names": ["ndcg@10"], "ties": "random"})
Traceback (most recent call last):
...
bench.errors.ConfigError: config key 'metrics.ties': must be one of stable, expected; got 'random'

"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.choices import CHOICES, CONVENTIONS, STABLE_TIES_CONVENTIONS, TIES_CHOICES
from bench.config import schema
from bench.errors import ConfigError


def read_run_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML or JSON run configuration into a dict.

    A ``.json`` file (what the workflow writes) is read as JSON: YAML 1.1 would read a JSON number
    written without a decimal point, such as ``1e-05`` (Python's ``json`` writes a learning rate
    of 0.00001 so), as a string.
    """
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file ({exc.strerror})") from exc
    if p.suffix.lower() == ".json":
        return parse_run_config_json(text, str(p))
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: not valid YAML/JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{p}: the config must be a mapping with a 'methods' key")
    return cfg


def parse_run_config_json(text: str, source: str) -> dict[str, Any]:
    """A run configuration from JSON text: a file's, or the workflow's ``--config-json`` (the
    run config of a planned method, passed on the command line rather than written to a file
    by a job of its own). ``source`` names where the text came from in errors.

    >>> parse_run_config_json('{"methods": {}}', "--config-json")
    {'methods': {}}
    >>> parse_run_config_json('{"methods": ', "--config-json")
    Traceback (most recent call last):
    ...
    bench.errors.ConfigError: --config-json, line 1: not valid JSON (Expecting value)
    """
    import json

    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{source}: the config must be a mapping with a 'methods' key")
    return cfg


def run_config_text(cfg: dict[str, Any]) -> str:
    """A run configuration as canonical text: sorted keys, indented JSON, one final newline
    (the file ``ltr-bench tuned-runs`` writes, the ``--config-json`` a planned run is given)."""
    import json

    return json.dumps(cfg, indent=2, sort_keys=True) + "\n"


def run_config_digest(cfg: dict[str, Any]) -> str:
    """SHA-256 of :func:`run_config_text`: what a run records in ``run.json`` as
    ``run_config_sha256``, so that ``ltr-bench status`` can tell whether a finished run was made
    with this study's run config (two runs of the same name under two profiles' settings differ
    here). Key order and indentation do not change it; any value does.

    >>> run_config_digest({"b": 1, "a": [1e-05]}) == run_config_digest({"a": [0.00001], "b": 1})
    True
    """
    import hashlib

    return hashlib.sha256(run_config_text(cfg).encode("utf-8")).hexdigest()


def method_entry(config: dict[str, Any], method: str) -> dict[str, Any]:
    """``config['methods'][method]``, or a :class:`ConfigError` listing the known methods."""
    methods = config.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise ConfigError("methods: the config has no 'methods' mapping")
    if method not in methods:
        raise ConfigError(f"methods.{method}: {schema.unknown_name(method, methods, 'method')}")
    entry = methods[method]
    if not isinstance(entry, dict):
        raise ConfigError(f"methods.{method}: expected a mapping, got {type(entry).__name__}")
    return entry


def resolve_metrics_config(cfg: Any, *, key: str = "metrics") -> dict[str, Any]:
    """``metrics`` of a job: a list of names, or ``{names, empty_query, ties[, convention]}``,
    resolved against the schema's ``run_metrics`` (its defaults filled); each name parsed by
    :func:`bench.metrics.parse_metric`, each convention one of :mod:`bench.choices`'
    choices. ``convention`` absent means ``default``.
    """
    if isinstance(cfg, (list, tuple)):
        cfg = {"names": list(cfg)}
    out = schema.resolve("run_metrics", (cfg, key))
    for i, name in enumerate(out["names"]):
        check_metric(name, f"{key}.names.{i}")
    for name, value in out.items():
        check_choice(value, f"{key}.{name}")
    convention = out.get("convention", CONVENTIONS[0])
    if convention in STABLE_TIES_CONVENTIONS and out["ties"] != TIES_CHOICES[0]:  # spans two fields
        raise ConfigError(f"{key}.ties: convention {convention!r} keeps score ties in file order; ties must be "
                          f"{TIES_CHOICES[0]!r}, got {out['ties']!r}")
    out["names"] = list(dict.fromkeys(out["names"]))
    return out


def check_choice(value: Any, key: str, *extra: str) -> None:
    """``value`` one of :mod:`bench.choices`' choices for the last part of ``key`` (``ties``,
    ``empty_query``, ``convention``; other keys pass), or one of ``extra``."""
    choices = CHOICES.get(key.rpartition(".")[2])
    if choices is not None and value not in (*choices, *extra):
        raise ConfigError(f"config key '{key}': must be one of {', '.join((*choices, *extra))}; got {value!r}")


def model_type(model: dict[str, Any] | None) -> str:
    """A model's ``type``, or the schema's default when it names none."""
    return (model or {}).get("type", schema.definition("model")["properties"]["type"]["default"])


def resolve_model(model: dict[str, Any] | None, key: str = "model") -> dict[str, Any]:
    """A whole scorer (:mod:`bench.models`): validated against the schema's ``<type>_model`` (that
    type's keys only, typed and bounded) with its defaults filled. The one check that spans two
    fields is written here: a context-aware model's ``input_proj`` must be divisible by ``heads``.

    >>> resolve_model({"hidden": [8]})
    {'type': 'mlp', 'hidden': [8], 'batch_norm': True, 'dropout': 0.3, 'output_activation': None}
    >>> resolve_model({"type": "context_aware", "input_proj": 10, "heads": 3}, "methods.m.model")
    Traceback (most recent call last):
    ...
    bench.errors.ConfigError: config key 'methods.m.model.heads': input_proj (10) must be divisible by heads (3)
    """
    kind = model_type(model)
    schema.check("model", model or {}, key)  # names an unknown type before its definition is looked up
    out = schema.resolve(f"{kind}_model", ({**(model or {}), "type": kind}, key))
    if kind == "context_aware" and out["input_proj"] % out["heads"]:
        raise ConfigError(f"config key '{key}.heads': input_proj ({out['input_proj']}) must be divisible by heads "
                          f"({out['heads']})")
    return out


def check_metric(name: Any, key: str) -> str:
    """``name`` parsed by :func:`bench.metrics.parse_metric` (the schema's pattern admits a few
    names the parser refuses); the error names ``key``."""
    from bench.metrics import parse_metric

    try:
        parse_metric(name)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from exc
    return name


def resolve_train(shared: dict | None, local: dict | None, *, method: str) -> dict[str, Any]:
    """A neural method's ``train``: the shared section, the method's own over it, the schema's
    defaults filled (:func:`bench.config.schema.resolve`); errors name the section the value
    came from (``train.X`` or ``methods.<method>.train.X``).

    >>> resolve_train({"epochs": 3}, {"lr": 0.01}, method="m")["lr"], resolve_train(None, None, method="m")["batch_size"]
    (0.01, 16)
    >>> resolve_train({"epochs": None}, None, method="m")
    Traceback (most recent call last):
    ...
    bench.errors.ConfigError: train.epochs: set epochs or max_steps
    """
    c = schema.resolve("train", (shared, "train"), (local, f"methods.{method}.train"))

    def where(k: str) -> str:
        return f"methods.{method}.train.{k}" if k in (local or {}) else f"train.{k}"

    if c["epochs"] is None and c["max_steps"] is None:  # spans two fields: not the schema's
        raise ConfigError(f"{where('epochs')}: set epochs or max_steps")
    check_metric(c["early_stopping_metric"], where("early_stopping_metric"))
    return c


def stopping_metric(config: dict[str, Any], entry: dict[str, Any], key: str) -> str:
    """A GBDT or linear method's validation metric: its own ``early_stopping_metric``, else the
    shared ``train`` section's, else the schema's ``train`` default."""
    if "early_stopping_metric" in entry:
        return check_metric(entry["early_stopping_metric"], f"{key}.early_stopping_metric")
    shared = config.get("train") or {}
    metric = shared.get("early_stopping_metric", schema.defaults("train")["early_stopping_metric"])
    return check_metric(metric, f"{key}.early_stopping_metric")


def check_method(entry: dict[str, Any], key: str) -> dict[str, Any]:
    """A job's method entry validated against the schema's ``method`` (its kind's keys only, each
    typed and bounded; nothing filled); ``metrics``, which a run config may set per method, is
    checked by :func:`resolve_metrics_config`."""
    schema.check("method", {k: v for k, v in entry.items() if k != "metrics"}, key)
    return entry


def method_default(name: str) -> Any:
    """The schema's default of a method key that a job fills (``num_trees``, ``penalties``, ...)."""
    return schema.defaults("method")[name]


def resolve_section(name: str, section: Any, key: str) -> dict[str, Any]:
    """A section of a run config (e.g. ``sinkprop_protocol``) resolved against ``$defs/<name>``."""
    return schema.resolve(name, (section, key))

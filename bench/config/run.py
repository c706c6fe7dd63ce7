"""One job's configuration: read the JSON (or YAML) a run command is given, pick its method.

``workflows/common.smk`` writes one file per ``(experiment, dataset, method)`` with
:func:`bench.config.plan.run_config`; ``ltr-bench train|gbdt --config FILE`` reads it with
:func:`read_run_config`. A hand-written YAML file works too (JSON is valid YAML), so the
trainers validate what they read (:mod:`bench.training.config`): the method entry
(:func:`method_entry`) and the metric conventions (:func:`resolve_metrics_config`) here,
the ``train`` and ``model`` sections there.

>>> resolve_metrics_config(["ndcg@10", "mrr"])
{'names': ['ndcg@10', 'mrr'], 'empty_query': 'one', 'ties': 'stable'}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bench.errors import ConfigError

DEFAULT_METRICS = [
    "ndcg@1",
    "ndcg@3",
    "ndcg@5",
    "ndcg@10",
    "ndcg@15",
    "ndcg@max",
    "mrr",
    "opa",
    "arp",
    "recall@30@15",
]
METRIC_DEFAULTS: dict[str, Any] = {"names": DEFAULT_METRICS, "empty_query": "one", "ties": "stable"}


def read_run_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a YAML or JSON run configuration (JSON is valid YAML) into a dict."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file ({exc.strerror})") from exc
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: not valid YAML/JSON ({exc})") from exc
    if not isinstance(cfg, dict):
        raise ConfigError(f"{p}: the config must be a mapping with a 'methods' key")
    return cfg


def method_entry(config: dict[str, Any], method: str) -> dict[str, Any]:
    """``config['methods'][method]``, or a :class:`ConfigError` listing the known methods."""
    methods = config.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise ConfigError("methods: the config has no 'methods' mapping")
    if method not in methods:
        raise ConfigError(f"methods.{method}: unknown method; known methods: {', '.join(sorted(methods))}")
    entry = methods[method]
    if not isinstance(entry, dict):
        raise ConfigError(f"methods.{method}: expected a mapping, got {type(entry).__name__}")
    return entry


def resolve_metrics_config(cfg: Any, *, key: str = "metrics") -> dict[str, Any]:
    """``metrics`` config: a list of names, or ``{names, empty_query, ties[, convention]}``; defaults filled.

    ``convention`` (``default``, ``letor3``, ``letor4``; absent means ``default``) is the
    dataset's evaluation convention (:func:`bench.metrics.metric_convention` per metric).
    """
    if cfg is None:
        cfg = {}
    if isinstance(cfg, (list, tuple)):
        cfg = {"names": list(cfg)}
    if not isinstance(cfg, dict):
        raise ConfigError(f"{key}: expected a list of metric names or a mapping, got {type(cfg).__name__}")
    known = (*METRIC_DEFAULTS, "convention")
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key; known keys: {', '.join(known)}")
    out = {**METRIC_DEFAULTS, **cfg}
    names = out["names"]
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{key}.names: expected a non-empty list of metric names, got {names!r}")
    from bench.metrics import CONVENTIONS, EMPTY_QUERY_CHOICES, TIES_CHOICES, parse_metric

    for i, name in enumerate(names):
        try:
            parse_metric(name)
        except ValueError as exc:
            raise ConfigError(f"{key}.names[{i}]: {exc}") from exc
    if out["empty_query"] not in EMPTY_QUERY_CHOICES:
        raise ConfigError(f"{key}.empty_query: must be one of {EMPTY_QUERY_CHOICES}, got {out['empty_query']!r}")
    if out["ties"] not in TIES_CHOICES:
        raise ConfigError(f"{key}.ties: must be one of {TIES_CHOICES}, got {out['ties']!r}")
    convention = out.get("convention", "default")
    if convention not in CONVENTIONS:
        raise ConfigError(f"{key}.convention: must be one of {CONVENTIONS}, got {convention!r}")
    if convention != "default" and out["ties"] != "stable":
        raise ConfigError(f"{key}.ties: convention {convention!r} keeps score ties in file order; ties must be "
                          f"'stable', got {out['ties']!r}")
    out["names"] = list(dict.fromkeys(names))
    return out

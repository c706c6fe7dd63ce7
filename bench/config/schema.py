"""The config JSON schema: the one home of every key, type, bound and default of the config.

``workflows/schemas/config.schema.yaml`` describes the study config (validated by
:mod:`bench.config.validate`) and, through the same ``$defs``, the sections one job resolves
(``train``, ``sinkprop_protocol``, a ``method`` entry). Python reads the facts from here and
never writes them again:

- :func:`check` validates one section against a definition (errors name the key at fault);
- :func:`defaults` reads a definition's ``default`` values;
- :func:`resolve` validates the layers of a section (a protocol's ``train`` and a method's
  own ``train``, say), merges them and fills the definition's defaults.

Two places fill defaults, and the schema says which: the study config is filled when it is
validated (``properties`` that carry a ``default``), except where a definition or a property
is annotated ``x-defaults: job``: those are filled only when a job resolves its section, so
that the study config, the per-job JSON and the frozen protocol hashes hold what the user
wrote (a protocol's ``train`` lists its own keys, not every default).

>>> defaults("train")["early_stopping_metric"]
'ndcg@10'
>>> resolve("train", ({"epochs": 3}, "train"), ({"lr": 0.01}, "methods.m.train"))["lr"]
0.01
>>> resolve("train", ({"bach_size": 3}, "methods.m.train"))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
bench.errors.ConfigError: config key 'methods.m.train.bach_size': unknown key 'bach_size' (known keys here: ...)...
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from bench.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "workflows" / "schemas" / "config.schema.yaml"
#: the annotation (on a definition or one property) whose defaults a job fills, not the study config
JOB_DEFAULTS = "x-defaults"


@lru_cache(maxsize=8)
def _read(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config schema not found at {p}")
    # libyaml's parser when PyYAML has it (the same safe constructors): the schema is 2,500
    # nodes, about 0.3 s for the pure-Python parser, paid by every job that checks a config
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(p.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader


def warm_up() -> None:
    """Read the schema now, so that processes forked from this one (the job server's,
    :data:`bench.jobserver.WARM_UP`) find it read."""
    _read(str(SCHEMA_PATH))


def load_schema(path: str | Path | None = None) -> dict[str, Any]:
    """The config JSON schema (YAML on disk; a fresh copy, safe to change)."""
    return copy.deepcopy(_read(str(Path(path) if path is not None else SCHEMA_PATH)))


def _filled_by_job(schema: dict[str, Any], sub: Any) -> bool:
    return schema.get(JOB_DEFAULTS) == "job" or (isinstance(sub, dict) and sub.get(JOB_DEFAULTS) == "job")


def _with_defaults(validator_class: Any, *, job: bool) -> Any:
    """Extend a jsonschema validator so that ``properties`` also fills ``default`` values.

    ``job=False`` (the study config) skips what the schema marks ``x-defaults: job``;
    ``job=True`` fills every default.
    """
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and key not in instance \
                        and (job or not _filled_by_job(schema, sub)):
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


StudyValidator = _with_defaults(jsonschema.Draft202012Validator, job=False)
JobValidator = _with_defaults(jsonschema.Draft202012Validator, job=True)


def _key(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def describe(error: jsonschema.ValidationError, prefix: Iterable[Any] = ()) -> str:
    """One line naming the key: unknown keys by name, wrong values with their path."""
    prefix = list(prefix)
    path = prefix + list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            where = _key(path + [extra[0]])
            known = ", ".join(sorted(allowed)) or "none"
            close = difflib.get_close_matches(str(extra[0]), sorted(allowed), n=3, cutoff=0.6)
            guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            return f"config key '{where}': unknown key '{extra[0]}' (known keys here: {known}){guess}"
    if error.validator == "required":
        return f"config key '{_key(path)}': {error.message}"
    if error.validator in ("oneOf", "anyOf") and error.context:
        best = jsonschema.exceptions.best_match(error.context)
        if list(best.absolute_path) != list(error.absolute_path):
            return describe(best, prefix)
        return f"config key '{_key(path)}': {best.message}"
    return f"config key '{_key(path)}': {error.message}"


LISTED_AT_MOST = 12  # a longer list of names is not read on one line: the closest ones are named instead


def unknown_name(name: str, known: Iterable[str], what: str) -> str:
    """``unknown <what> '<name>'`` with the closest known names (difflib's ratio >= 0.6, at most
    three) as "did you mean", and every known name when there are at most :data:`LISTED_AT_MOST`,
    else their number.

    >>> unknown_name("pirank_ndgc", ["pirank_ndcg", "pirank_arp", "ranknet"], "method")
    "unknown method 'pirank_ndgc'; did you mean 'pirank_ndcg' or 'pirank_arp'? (defined: pirank_arp, pirank_ndcg, ranknet)"
    >>> unknown_name("zzz", [f"m{i}" for i in range(75)], "method")
    "unknown method 'zzz' (75 defined, none close to it; see the config's methods)"
    """
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    guess = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    if len(names) <= LISTED_AT_MOST:
        listing = f"defined: {', '.join(names) or 'none'}"
    else:
        listing = f"{len(names)} defined" + ("" if close else f", none close to it; see the config's {what}s")
    return f"unknown {what} {name!r}{guess} ({listing})"


def deepest_error(validator: jsonschema.protocols.Validator, instance: Any) -> jsonschema.ValidationError | None:
    """The error deepest in ``instance`` (the most specific key), or None when it is valid."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: (len(list(e.absolute_path)), str(e.path)))
    return max(errors, key=lambda e: len(list(e.absolute_path))) if errors else None


def _definition_schema(name: str) -> dict[str, Any]:
    schema = _read(str(SCHEMA_PATH))
    if name not in schema["$defs"]:
        raise KeyError(f"no definition {name!r} in {SCHEMA_PATH}")
    return {"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}


def definition(name: str) -> dict[str, Any]:
    """``$defs/<name>`` of the schema (a copy)."""
    return copy.deepcopy(_read(str(SCHEMA_PATH))["$defs"][name])


def check(name: str, instance: Any, key: str) -> None:
    """Validate ``instance`` against ``$defs/<name>`` (nothing filled); errors name ``<key>.<path>``."""
    instance = copy.deepcopy(instance)
    error = deepest_error(jsonschema.Draft202012Validator(_definition_schema(name)), instance)
    if error is not None:
        raise ConfigError(describe(error, key.split(".") if key else []))


def defaults(name: str) -> dict[str, Any]:
    """The ``default`` of every property of ``$defs/<name>`` that has one, in the schema's order."""
    props = _read(str(SCHEMA_PATH))["$defs"][name].get("properties", {})
    return {k: copy.deepcopy(sub["default"]) for k, sub in props.items() if isinstance(sub, dict) and "default" in sub}


def resolve(name: str, *layers: tuple[dict[str, Any] | None, str]) -> dict[str, Any]:
    """Each ``(section, key)`` layer validated against ``$defs/<name>``, merged (later layers win
    key by key), every default of the definition filled; keys in the schema's order."""
    merged: dict[str, Any] = {}
    for section, key in layers:
        if section is None:
            continue
        check(name, section, key)
        merged.update(copy.deepcopy(section))
    JobValidator(_definition_schema(name)).validate(merged)  # valid: fills the defaults
    order = list(_read(str(SCHEMA_PATH))["$defs"][name].get("properties", {}))
    return {**{k: merged[k] for k in order if k in merged}, **{k: v for k, v in merged.items() if k not in order}}

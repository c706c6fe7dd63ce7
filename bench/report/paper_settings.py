"""What each paper states about its experiments, and which of the paper profile's values are ours.

``paper_settings.yaml`` (next to this file) records, per protocol of ``config/paper.yaml``, the
values the paper states, each with where it states it. The config marks every value the paper does
not give, or that the suite sets differently, once, where the value is set: a ``choices`` mapping
``key -> short reason`` in the protocol (its ``model.*``, ``train.*``, ``seeds`` and run-kind
section keys, and ``methods.<name>.<path>`` for a method read the paper's way), and in a dataset
(its ``options.*``). Several keys may share one reason: ``"train.patience, train.checkpoint"``.

:func:`check_paper_profile` holds the two together. For every protocol with stated settings and
every dataset its tables read (roles resolved), it reports:

- a checked key (:func:`bench.config.paper_choices.protocol_settings`,
  :func:`~bench.config.paper_choices.dataset_settings`) whose value differs from the
  paper's stated one, or that the paper does not state, and that no ``choices`` lists;
- a protocol ``choices`` key the paper states with the configured value (not a choice);
- a stated method setting the config does not write as stated, unless the protocol lists it.

:func:`table_differences` turns the listed choices of one table (as :func:`bench.config.plan.
table_spec` passes them) into the caption's "Differences from the paper", dropping a dataset's or
method's entry the table's paper states as configured (a dataset is shared by several papers).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from bench.config.paper_choices import dataset_settings, expand_keys, protocol_settings
from bench.config.plan import protocol_for_dataset

PAPER_SETTINGS = Path(__file__).with_name("paper_settings.yaml")
@cache
def load_paper_settings(path: str | Path = PAPER_SETTINGS) -> dict[str, dict[str, Any]]:
    """``protocol -> {paper, stated: {key: {value, where[, roles]}}}`` (see the YAML's header)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    for protocol, spec in data.items():
        for key, entry in spec["stated"].items():
            if not isinstance(entry, dict) or "value" not in entry or "where" not in entry:
                raise ValueError(f"{path}: {protocol}.stated.{key}: needs a value and where the paper states it")
    return data


def stated(entry_set: dict[str, Any], key: str, role: str | None = None) -> tuple[bool, Any, str]:
    """``(found, value, where)`` of ``key`` for a dataset role (its own value, else the key's)."""
    entry = entry_set.get(key)
    if entry is None and role is not None and key.startswith(f"datasets.{role}."):
        entry = entry_set.get("datasets.*." + key[len(f"datasets.{role}."):])
    if entry is None:
        return False, None, ""
    value = (entry.get("roles") or {}).get(role, entry["value"])
    return True, value, entry["where"]


def protocol_datasets(config: dict[str, Any], protocol: str) -> list[tuple[str, str]]:
    """``(role, dataset)`` of every enabled table of ``protocol`` (a table on ``all`` names none)."""
    from bench.config.plan import enabled_tables, resolve_role

    out: dict[tuple[str, str], None] = {}
    for table in enabled_tables(config):
        spec = config["tables"][table]
        if spec["protocol"] == protocol and spec["datasets"] != "all":
            out.update({(role, resolve_role(config, role, spec)): None for role in spec["datasets"]})
    return list(out)


def _show(value: Any) -> str:
    return "none" if value is None else str(value)


def _method_value(config: dict[str, Any], path: str) -> tuple[bool, Any]:
    """The written value at ``methods.<name>.<a>.<b>`` of the config (found, value)."""
    _, name, *parts = path.split(".")
    node: Any = config["methods"].get(name)
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def check_paper_profile(config: dict[str, Any], settings: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Every value of ``config`` that differs from or is not stated by its paper without being listed
    in a ``choices`` (module docstring), one line per key with the datasets it applies to; ``[]``
    when the config marks them all."""
    settings = load_paper_settings() if settings is None else settings
    found_on: dict[str, list[str]] = {}
    for protocol, spec in settings.items():
        if protocol in config["protocols"]:
            for line, dataset in _protocol_problems(config, protocol, spec):
                found_on.setdefault(line, []).append(dataset)
    return [line.replace("{on}", ", ".join(dict.fromkeys(on))) for line, on in found_on.items()]


def _protocol_problems(config: dict[str, Any], protocol: str, spec: dict[str, Any]) -> list[tuple[str, str]]:
    """``(problem, dataset)`` pairs of one protocol (``{on}`` in a problem: where it applies)."""
    paper, said = spec["paper"], spec["stated"]
    choices = expand_keys(config["protocols"][protocol].get("choices"))
    where = f"protocols.{protocol}"
    out: list[tuple[str, str]] = []
    equal_everywhere: dict[str, bool] = {}

    def why(found: bool, want: Any, at: str) -> str:
        return f"{paper} states {_show(want)} ({at})" if found else f"{paper} does not state it"

    for role, dataset in protocol_datasets(config, protocol):
        model, train = protocol_for_dataset(config, protocol, dataset)
        for key, value in protocol_settings(config, protocol, model, train).items():
            found, want, at = stated(said, key, role)
            if found:
                equal_everywhere[key] = equal_everywhere.get(key, True) and value == want
            if key not in choices and not (found and value == want):
                out.append((f"{where}: {key} = {_show(value)} (on {{on}}): {why(found, want, at)}; "
                            f"list it in {where}.choices", dataset))
        ds_choices = expand_keys(config["datasets"][dataset].get("choices"))
        prefix = f"datasets.{role}."
        extra = tuple(k.rsplit(".", 1)[1] for k in said if k.startswith(("datasets.*.options.", prefix + "options.")))
        for key, value in dataset_settings(config, dataset, extra).items():
            found, want, at = stated(said, prefix + key, role)
            if key not in ds_choices and not (found and value == want):
                out.append((f"datasets.{dataset}: {key} = {_show(value)} (the {role} of {where}): "
                            f"{why(found, want, at)}; list it in datasets.{dataset}.choices", dataset))
    checked = {k for _, d in protocol_datasets(config, protocol)
               for k in protocol_settings(config, protocol, *protocol_for_dataset(config, protocol, d))}
    for key in said:
        if not key.startswith(("datasets.", "methods.")) and key not in checked:
            out.append((f"{where}: {paper} states {key}, which is not a checked setting of the protocol "
                        f"({', '.join(sorted(checked))})", protocol))
    for key in choices:
        if equal_everywhere.get(key):
            out.append((f"{where}.choices: {key}: {paper} states the configured value ({said[key]['where']}): "
                        "not a choice", protocol))
    for key, entry in said.items():
        if key.startswith("methods.") and key not in choices:
            written, value = _method_value(config, key)
            if not written or value != entry["value"]:
                out.append((f"{where}: {key} = {_show(value) if written else 'not written'}: {paper} states "
                            f"{_show(entry['value'])} ({entry['where']}); write it, or list it in {where}.choices",
                            protocol))
    return out


def table_differences(spec: dict[str, Any], settings: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The entries of ``spec["choices"]`` (:func:`bench.config.plan.table_spec`) the caption lists:
    all of the protocol's, and a dataset's unless the table's paper states that value (a dataset is
    shared by the papers whose tables read it, its ``choices`` by them all)."""
    settings = load_paper_settings() if settings is None else settings
    said = settings.get(spec.get("protocol") or "", {}).get("stated", {})
    out = []
    for item in spec.get("choices") or []:
        if item["scope"] == "dataset":
            found, want, _ = stated(said, f"datasets.{item['role']}.{item['key']}", item["role"])
            if found and want == item["value"]:
                continue
        out.append(item)
    return out

"""Every loss a study names, resolved when the workflow builds its DAG: before anything trains.

A neural method (``methods.<name>``) or a compared new loss (``compare.losses.<i>``) names its
loss by a registry name or ``package.module:function`` and gives hyperparameters in
``params``. :func:`check_losses` resolves each one the way its training job will, without
importing torch into the Snakefile's process (:mod:`bench.losses.hyperparameters`: the module's
source is found on the job's search path and read with :mod:`ast`; what the source cannot
show is read by one child process that imports it), and refuses the first problem with one
line naming the key at fault:

- ``config key 'methods.mine.loss': module 'mylosses' not found ...``;
- ``config key 'methods.mine.loss': module 'mylosses' (...) has no function or class 'no_such_fn'``;
- ``config key 'compare.losses.0.loss' (method 'mine'): importing module 'mylosses' failed: RuntimeError: ... (mylosses.py:3)``;
- ``config key 'methods.mine.params.margn': loss 'mylosses:hinge' has no hyperparameter 'margn' (accepted: margin)``;
- ``config key 'methods.mine.params.margin': loss 'mylosses:hinge' requires hyperparameter 'margin' ...``.

A compared loss is named by where it is written: ``compare.losses.<i>.loss`` (method ``<name>``).

The signature also types ``params``: a string Snakemake's ``--config`` left there is read back
by the loss's literal default (:mod:`bench.config.strings`: ``tau: "100.0"`` -> 100.0 where
``tau`` defaults to a number, ``sigmoid: "cauchy"`` stays a string).

**A user's module is imported** (a ``package.module:function`` reference, not a registered
name), in that same child process, even when its source shows the signature: only an import
tells that the module loads (a top level that raises, a package it imports that is missing),
and otherwise the dry run passes and every training job of the loss fails, under the method's
name rather than the key the user wrote. The price is that import (torch's, for most losses: a
few seconds) each time a config naming a user loss is validated; the registered losses are the
package's own, imported by its tests, and are read from source only.

>>> check_losses({"methods": {"m": {"loss": "ranknet", "params": {"sigma": 2.0}}}})
>>> check_losses({"methods": {"m": {"loss": "ranknet", "params": {"sigam": 2.0}}}})
Traceback (most recent call last):
...
bench.errors.ConfigError: config key 'methods.m.params.sigam': loss 'ranknet' has no hyperparameter 'sigam' (accepted: sigma, k)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config.kinds import method_kind
from bench.config.plan import compare_method_name
from bench.config.strings import type_strings
from bench.errors import ConfigError
from bench.losses import registry
from bench.losses.hyperparameters import LossNotFound, LossSignature, from_imports, from_source, search_path, supplied_by_trainer


def _entries(config: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``(key of the entry, key of its loss, method name, spec)`` of every neural method and
    every compared loss (a compared loss given as a bare string is its own loss key)."""
    out = [(f"methods.{name}", f"methods.{name}.loss", name, spec) for name, spec in config.get("methods", {}).items()
           if method_kind(spec) == "neural"]
    for i, entry in enumerate(config.get("compare", {}).get("losses", [])):
        where = f"compare.losses.{i}"
        if isinstance(entry, str):
            out.append((where, where, compare_method_name(entry), {"loss": entry, "params": {}}))
        else:
            out.append((where, f"{where}.loss", entry["name"], entry))
    return out


def _target(loss: str, where: str) -> str:
    try:
        return registry.info(loss).target
    except ValueError as exc:
        raise ConfigError(f"config key '{where}': {exc}") from None


def _signatures(targets: list[str], users: set[str],
                cwd: str | Path | None) -> dict[str, LossSignature | LossNotFound]:
    """Each target's signature (or why it cannot be used): from source; by import where the source
    cannot show it, and for a user's target (``users``) that its source shows, to know it loads."""
    search = search_path(cwd)
    out: dict[str, LossSignature | LossNotFound] = {}
    for target in dict.fromkeys(targets):
        try:
            found = from_source(target, search)
        except LossNotFound as exc:
            out[target] = exc
            continue
        if found is not None:
            out[target] = found
    imported = from_imports([t for t in dict.fromkeys(targets) if t not in out or t in users
                             and not isinstance(out[t], LossNotFound)], cwd)
    for target, by_import in imported.items():
        if target not in out or isinstance(by_import, LossNotFound):  # the source's reading, unless it fails to load
            out[target] = by_import
    return out


def check_losses(config: dict[str, Any], cwd: str | Path | None = None) -> None:
    """Resolve every neural method's and compared loss's target and hyperparameters, and type the
    strings of its ``params`` by the loss's defaults, in place (module docstring)."""
    entries = [(*entry, _target(entry[3]["loss"], entry[1])) for entry in _entries(config)]
    registered = set(registry.names())
    users = {target for _, _, _, spec, target in entries if spec["loss"] not in registered}
    signatures = _signatures([target for *_, target in entries], users, cwd)
    for where, loss_key, name, spec, target in entries:
        label = "" if where.startswith("methods.") else f" (method '{name}')"
        found = signatures[target]
        if isinstance(found, LossNotFound):
            raise ConfigError(f"config key '{loss_key}'{label}: {found}")
        if isinstance(spec.get("params"), dict):
            type_strings(spec["params"], found.defaults())
        tau_schedule = (spec.get("train") or {}).get("tau_schedule") is not None
        problems = found.problems(spec["loss"], spec.get("params") or {}, supplied_by_trainer(tau_schedule=tau_schedule))
        if problems:
            key, message = problems[0]
            raise ConfigError(f"config key '{where}.params.{key}'{label}: {message}")
        searched = [path.partition(".")[2] for path, dim in (spec.get("search") or {}).items()
                    if path.startswith("params.") and dim is not None]
        for key, message in found.problems(spec["loss"], searched):
            if key in searched:  # a tuned hyperparameter the loss does not take (bench.config.tuning)
                raise ConfigError(f"config key '{where}.search.params.{key}'{label}: {message}")

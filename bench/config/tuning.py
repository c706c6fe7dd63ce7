r"""Equal-budget tuning on validation: every method of a tuned protocol tries the same number of configurations.

A study config's ``tuning`` section names the protocols whose methods are tuned
(``tuning.protocols``: every table, the frozen baselines and the compared losses trained
under them) and the **budget**: ``tuning.budget`` configurations per method, the same number
for every method, neural or GBDT. A method's configurations are

- configuration 1: the method as the catalogue configures it (its *default*; its runs are the
  untuned method's runs, named by the method itself);
- configurations 2..B: the first :math:`B - 1` points of the scrambled Halton sequence
  seeded by ``(tuning.seed, method)`` (:func:`bench.search_space.draw`), mapped through the
  method's search space (:func:`method_space`), named ``<method>+cfg<i>``.

So a method's configurations are a pure function of its space, the budget and the seed: the
workflow knows every one before anything runs (its cost planned; one job per method and
dataset trains them one after another, each run written whole; a job started again after a
kill keeps the runs it had finished),
two studies draw the same ones, and a larger budget keeps the smaller one's configurations and runs.

**The search space** of a method (:func:`method_space`) is, in this order, the study's shared
dimensions of its kind (``tuning.space.neural`` for every neural method, ``tuning.space.<library>``
for a GBDT method), the loss's own dimensions declared in the registry beside the loss
(``LossInfo.search``, as ``params.<name>``), and the method entry's ``search`` (a key path ->
a dimension, or null to drop one). A method without dimensions (least squares, which picks
its ridge penalty on validation itself) has nothing to tune and trains once; so does a
compared loss without ``search`` (the compare page says it was not tuned).

**The choice** (the ``tune`` stage, :mod:`bench.selection.tuning`): every configuration trains on the
tuning fold (``tuning.fold``, default each dataset's first) with the tuning seeds
(``tuning.seeds``, default the protocol's); the one with the best mean over those seeds of
the validation value its runs' early stopping kept (the protocol's ``early_stopping_metric``,
graded by the dataset's rules, as every validation split is) is the method's; equal means go
to the lower configuration number, so the default wins a tie. Only validation is read. The
chosen configuration then trains on every other fold and seed of the protocol under the name
``<method>+tuned`` (one job, ``ltr-bench tuned-runs``, writes its run config from the record and
trains its runs), and tables, the frozen baselines and the compare page read the chosen
configuration's runs.

>>> cfg = {"tuning": {"protocols": ["p"], "budget": 3, "seed": 0, "fold": None, "seeds": None,
...        "space": {"neural": {"train.lr": {"low": 1e-4, "high": 1e-2, "scale": "log"}}}}}
>>> [c.name for c in configurations(cfg, "ranknet", {"loss": "ranknet"})]
['ranknet', 'ranknet+cfg2', 'ranknet+cfg3']
>>> configurations(cfg, "ranknet", {"loss": "ranknet"})[1].label
'lr = 0.0001, sigma = 7.24'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench import search_space
from bench.config import kinds, selection
from bench.errors import ConfigError
from bench.seeds import derive_seed

CONFIG_MARK = "+cfg"  # <method>+cfg<i>: configuration i > 1 of a tuned method
TUNED_SUFFIX = "+tuned"  # <method>+tuned: the chosen configuration on the folds and seeds the tuning did not train
_CONFIG_NAME = re.compile(r"^(?P<base>.+)\+cfg(?P<index>[0-9]+)$")


@dataclass(frozen=True)
class Configuration:
    """Configuration ``index`` (1-based) of method ``base``: its ``(key path, value)`` settings
    (none for configuration 1, the method as configured)."""

    base: str
    index: int
    settings: tuple[tuple[str, Any], ...]

    @property
    def name(self) -> str:
        return self.base if self.index == 1 else f"{self.base}{CONFIG_MARK}{self.index}"

    @property
    def label(self) -> str:
        if self.index == 1:
            return "default"
        short = selection.short_keys([k for k, _ in self.settings])
        return ", ".join(f"{k} = {selection.value_text(v)}" for k, (_, v) in zip(short, self.settings))

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.settings)


def section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tuning`` section (empty when the config has none: nothing is tuned)."""
    return dict(config.get("tuning") or {})


def tuned_protocols(config: Mapping[str, Any]) -> list[str]:
    return list(section(config).get("protocols") or [])


def budget(config: Mapping[str, Any]) -> int:
    return int(section(config).get("budget") or 1)


def space_key(entry: Mapping[str, Any]) -> str | None:
    """The ``tuning.space`` key whose dimensions a method entry shares: ``neural``, its GBDT
    library, or None (a kind with nothing to tune: least squares chooses its own penalty)."""
    kind = kinds.method_kind(dict(entry))
    if kind == "neural":
        return "neural"
    if kind == "gbdt":
        return str(entry["gbdt"])
    return None


def _loss_dimensions(entry: Mapping[str, Any]) -> dict[str, search_space.Dimension]:
    from bench.losses import registry  # torch-free: the registry imports no loss module until one is used

    try:
        info = registry.info(str(entry["loss"]))
    except ValueError:
        return {}  # an unknown loss is refused, naming its key, by bench.config.losses
    return {f"params.{name}": dim for name, dim in info.search.items()}


def method_space(config: Mapping[str, Any], entry: Mapping[str, Any],
                 where: str = "methods.<name>") -> dict[str, search_space.Dimension]:
    """The search space of a method entry (see the module docstring), key path -> dimension, in
    the order: shared dimensions, the loss's own, the entry's ``search`` (which may drop one);
    ``where`` is the entry's config key, for errors."""
    key = space_key(entry)
    if key is None:
        return {}
    shared = (section(config).get("space") or {}).get(key) or {}
    out = {path: search_space.parse(dim, f"tuning.space.{key}.{path}") for path, dim in shared.items()}
    if "loss" in entry:
        out.update(_loss_dimensions(entry))
    for path, dim in (entry.get("search") or {}).items():
        if dim is None:
            out.pop(path, None)
        else:
            out[path] = search_space.parse(dim, f"{where}.search.{path}")
    return out


def configurations(config: Mapping[str, Any], base: str, entry: Mapping[str, Any],
                   where: str | None = None) -> list[Configuration]:
    """Every configuration of method ``base`` (entry ``entry``, at config key ``where``, default
    ``methods.<base>``) under the study's budget: the default first, then the drawn ones; only
    the default when the space is empty."""
    space = method_space(config, entry, where or f"methods.{base}")
    first = Configuration(base, 1, ())
    drawn = search_space.draw(space, budget(config) - 1, derive_seed("tuning", int(section(config).get("seed") or 0), base))
    return [first, *(Configuration(base, i + 2, tuple(point.items())) for i, point in enumerate(drawn))]


def configuration_spec(entry: Mapping[str, Any], configuration: Configuration) -> dict[str, Any]:
    """The method entry configuration trains: the entry with its settings set; no label, no ``search``."""
    return selection.point_spec({k: v for k, v in entry.items() if k != "search"}, _as_point(configuration), None)


def _as_point(configuration: Configuration) -> selection.Point:
    keys = [k for k, _ in configuration.settings]
    return selection.Point(configuration.name, configuration.settings, selection.short_keys(keys))


def parse_name(name: str) -> tuple[str, int] | None:
    """``(method, index)`` of a configuration's run name ``<method>+cfg<i>``, else None.

    >>> parse_name("arf+cfg12"), parse_name("arf"), parse_name("arf+tuned")
    (('arf', 12), None, None)
    """
    match = _CONFIG_NAME.match(name)
    return (match["base"], int(match["index"])) if match else None


def tuned_name(base: str) -> str:
    return base + TUNED_SUFFIX


def base_of_tuned(name: str) -> str | None:
    """The method whose chosen configuration ``<method>+tuned`` trains, else None."""
    return name[: -len(TUNED_SUFFIX)] if name.endswith(TUNED_SUFFIX) else None


def describe_space(space: Mapping[str, search_space.Dimension]) -> str:
    """The space as one line for captions and records.

    >>> describe_space({"train.lr": search_space.log_uniform(1e-4, 1e-2)})
    'train.lr log-uniform 0.0001-0.01'
    """
    return "; ".join(f"{path} {dim.describe()}" for path, dim in space.items()) or "nothing to tune"


def check_space(config: Mapping[str, Any], name: str, entry: Mapping[str, Any], where: str) -> list[Configuration]:
    """A tuned method's space makes sense: each key a path its kind may set (a selection grid's
    keys, :data:`bench.config.selection.GRID_KEYS`), never the early-stopping metric (the
    configurations are compared by it), and each drawn configuration a valid method entry;
    returns the configurations."""
    from bench.config import schema

    kind = kinds.method_kind(dict(entry))
    allowed = selection.GRID_KEYS[kind]
    space = method_space(config, entry, where)
    for path in space:
        section_key = path.partition(".")[0] + "." if "." in path else path
        origin = f"{where}.search.{path}" if path in (entry.get("search") or {}) else f"tuning.space.{space_key(entry)}.{path}"
        if section_key not in allowed or path.endswith("."):
            shown = ", ".join(f"{k}<key>" if k.endswith(".") else k for k in allowed) or "nothing"
            raise ConfigError(f"config key '{origin}': a {kind} method's space sets {shown}; got '{path}'")
        if path == selection.STOP_METRIC_KEY[kind]:
            raise ConfigError(f"config key '{origin}': configurations are compared by the early-stopping metric; "
                              "it cannot be tuned")
    out = configurations(config, name, entry, where)
    for configuration in out[1:]:
        trial = configuration_spec(entry, configuration)
        try:
            schema.check("method", trial, "")
        except ConfigError as exc:
            reason = str(exc).partition(": ")[2] or str(exc)
            raise ConfigError(f"config key '{where}': configuration {configuration.index} ({configuration.label}) "
                              f"is not a valid method entry ({reason}); narrow the space") from None
    return out

r"""Hyperparameter selection on validation: a table's method trained at every point of a grid.

A table may give some of its methods a grid (``tables.<t>.select.<method>.grid``: a mapping
from a *key path* into the method's entry to the values it takes). Every point of the grid
(the Cartesian product, the first key varying slowest) is one method of its own, trained
like any other (same protocol, datasets, folds and seeds as the table); the ``select`` stage
(:mod:`bench.selection`) then keeps, per dataset and fold, the point with the best mean over
seeds of the validation value its runs' early stopping used, and the table reports that
point's test results in the method's row. Everything here is a pure function of the config;
:mod:`bench.config.plan` places the points in the workflow.

Key paths say where a value goes in the method entry: ``params.<name>`` (a loss's or a GBDT
library's parameter), ``train.<key>`` and ``model.<key>`` (neural methods: the protocol's
``train`` and ``model`` overridden for this method), ``num_trees`` and
``early_stopping_rounds`` (GBDT). The values are scalars (numbers, strings, booleans, null).
The selection metric (``metric``, default: the run's own early-stopping metric, i.e. the
protocol's unless the method sets one) is written into every point as its early-stopping
metric, so the validation value a run records (``run.json`` ``result.best_vali``) is the one
the points are compared by; a grid may therefore not vary the early-stopping metric itself.

A point's name is its method's, ``+``, and ``key=value`` per grid key (the key's last part
when that is unique in the grid, else the whole path): readable, and a valid file name.

>>> points = grid_points("arf", {"params.tau": [0.8, 1.0], "train.lr": [0.01, 1e-05]})
>>> [p.name for p in points]
['arf+tau=0.8+lr=0.01', 'arf+tau=0.8+lr=1e-05', 'arf+tau=1+lr=0.01', 'arf+tau=1+lr=1e-05']
>>> points[0].label
'tau = 0.8, lr = 0.01'
>>> point_spec({"loss": "arf", "params": {"m": 30}}, points[1], None)
{'loss': 'arf', 'params': {'m': 30, 'tau': 0.8}, 'train': {'lr': 1e-05}}
>>> best_point([[0.25, 0.75], [0.5, 0.5], [0.125, 0.625]], higher_is_better=True)  # a tie: the first
0
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.config import schema
from bench.errors import ConfigError

#: method kind (bench.config.kinds) -> the key paths its grid may set: a ``section.`` prefix (any
#: key under that mapping of the method entry) or a whole top-level key
GRID_KEYS: dict[str, tuple[str, ...]] = {
    "neural": ("params.", "train.", "model."),
    "gbdt": ("params.", "num_trees", "early_stopping_rounds"),
    "linear": (),  # least squares chooses its ridge penalty on validation itself (`penalties`)
}
#: where a method kind keeps its early-stopping metric (the selection metric is written there)
STOP_METRIC_KEY = {"neural": "train.early_stopping_metric", "gbdt": "early_stopping_metric",
                   "linear": "early_stopping_metric"}
_VALUE_TEXT = re.compile(r"^[A-Za-z0-9_.-]+$")  # a string value, as it appears in a point's name


@dataclass(frozen=True)
class Point:
    """One grid point of method ``base``: its ``(key path, value)`` settings in grid order."""

    base: str
    settings: tuple[tuple[str, Any], ...]
    short: tuple[str, ...]  # the key names the point's name and label use

    @property
    def name(self) -> str:
        return "+".join([self.base, *(f"{k}={value_text(v)}" for k, (_, v) in zip(self.short, self.settings))])

    @property
    def label(self) -> str:
        return ", ".join(f"{k} = {value_text(v)}" for k, (_, v) in zip(self.short, self.settings))

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.settings)


def value_text(value: Any) -> str:
    """A grid value as a point's name shows it: shortest float repr, no trailing ``.0``.

    >>> value_text(0.001), value_text(1e-4), value_text(1000.0), value_text(True), value_text(None)
    ('0.001', '0.0001', '1000', 'true', 'null')
    """
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def short_keys(keys: Sequence[str]) -> tuple[str, ...]:
    """Each key's last part where no other key of the grid ends the same, else the whole path.

    >>> short_keys(["params.tau", "train.lr"]), short_keys(["params.k", "model.k", "num_trees"])
    (('tau', 'lr'), ('params.k', 'model.k', 'num_trees'))
    """
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return tuple(part if last.count(part) == 1 else key for key, part in zip(keys, last))


def grid_points(base: str, grid: dict[str, list[Any]]) -> list[Point]:
    """Every point of ``grid`` (the product of its value lists, the first key slowest)."""
    keys = list(grid)
    short = short_keys(keys)
    return [Point(base, tuple(zip(keys, combo)), short) for combo in itertools.product(*(grid[k] for k in keys))]


def _set(entry: dict[str, Any], path: str, value: Any) -> None:
    section, _, key = path.partition(".")
    if key:
        entry[section] = {**(entry.get(section) or {}), key: copy.deepcopy(value)}
    else:
        entry[section] = copy.deepcopy(value)


def point_spec(base_spec: dict[str, Any], point: Point, metric: str | None, kind: str = "neural") -> dict[str, Any]:
    """The method entry of ``point``: the base's with its settings (and, when given, the
    selection ``metric`` as the early-stopping metric of its ``kind``) set; no label."""
    spec = {k: copy.deepcopy(v) for k, v in base_spec.items() if k != "label"}
    for path, value in point.settings:
        _set(spec, path, value)
    if metric is not None:
        _set(spec, STOP_METRIC_KEY[kind], metric)
    return spec


def best_point(values: Sequence[Sequence[float]], *, higher_is_better: bool) -> int:
    """Index of the point with the best mean over its runs' validation ``values``.

    Ties (equal means) go to the first point in grid order; a mean that is not a number
    (no finite value) never wins unless no point has one, and then the first point is kept.

    >>> best_point([[0.5], [0.7], [0.7]], higher_is_better=True), best_point([[3.0], [2.0]], higher_is_better=False)
    (1, 1)
    """
    means = [math.fsum(v) / len(v) if v else math.nan for v in values]
    best = 0
    for i, mean in enumerate(means):
        cur = means[best]
        if math.isnan(mean):
            continue
        if math.isnan(cur) or (mean > cur if higher_is_better else mean < cur):
            best = i
    return best


def keep_chosen(runs: list[dict[str, Any]], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs a table reads once selection is done: every run without a ``point`` (a method
    not selected), and of a selected method's runs only those of the point its record chose
    (``records``: the ``select`` stage's, :mod:`bench.selection`, one per dataset and fold, each
    listing every point's run directories). A grid point's run that no record lists is an
    error: the record is missing or stale.

    >>> rec = {"methods": {"m": {"chosen": "m+x=1", "points": [{"name": "m+x=1", "dirs": ["a"]},
    ...                                                     {"name": "m+x=2", "dirs": ["b"]}]}}}
    >>> keep_chosen([{"method": "m", "point": "m+x=1", "dir": "a"}, {"method": "m", "point": "m+x=2", "dir": "b"},
    ...              {"method": "n", "dir": "c"}], [rec])
    [{'method': 'm', 'point': 'm+x=1', 'dir': 'a'}, {'method': 'n', 'dir': 'c'}]
    """
    listed: dict[tuple[str, str, str], bool] = {}
    for record in records:
        for method, entry in record["methods"].items():
            for point in entry["points"]:
                for d in point["dirs"]:
                    listed[(method, point["name"], d)] = point["name"] == entry["chosen"]
    out = []
    for run in runs:
        if run.get("point") is None:
            out.append(run)
            continue
        key = (run["method"], run["point"], run["dir"])
        if key not in listed:
            raise ValueError(f"run {run['dir']} (grid point {run['point']} of {run['method']}) is in no selection "
                             "record given: the selection is missing or was made for other runs; rebuild it")
        if listed[key]:
            out.append(run)
    return out


# ----------------------------------------------------------------------------- validation


def check_grid(name: str, entry: dict[str, Any], kind: str, select: dict[str, Any], where: str) -> list[Point]:
    """``select``'s grid for method ``name`` (of ``kind``) makes sense; return its points.

    Each key is one :data:`GRID_KEYS` allows for the kind (never the early-stopping metric:
    that is ``metric``), each value list is non-empty scalars without repeats, and each value
    fits the method entry's schema (``train.lr: 0`` is refused here, naming the key)."""
    grid = select["grid"]
    allowed = GRID_KEYS[kind]
    if not allowed:
        raise ConfigError(f"config key '{where}': '{name}' is a {kind} method; it has nothing to select on "
                          "a grid here (least squares picks its ridge penalty from `penalties` on validation)")
    for key, values in grid.items():
        at = f"{where}.grid.{key}"
        section = key.partition(".")[0] + "." if "." in key else key
        if section not in allowed or key.endswith("."):
            raise ConfigError(f"config key '{at}': a {kind} method's grid sets {', '.join(_shown(allowed))}; "
                              f"got '{key}'")
        if key == STOP_METRIC_KEY[kind]:
            raise ConfigError(f"config key '{at}': the points are compared by one validation metric; "
                              f"set it with '{where}.metric' instead of varying it")
        if section == "train." and key.partition(".")[2] not in schema.definition("train")["properties"]:
            known = ", ".join(schema.definition("train")["properties"])
            raise ConfigError(f"config key '{at}': unknown train key '{key.partition('.')[2]}' (known: {known})")
        seen: list[str] = []
        for i, value in enumerate(values):
            if isinstance(value, (dict, list)):
                raise ConfigError(f"config key '{at}.{i}': a grid value is a number, string, boolean or null; "
                                  f"got {value!r}")
            if isinstance(value, str) and not _VALUE_TEXT.match(value):
                raise ConfigError(f"config key '{at}.{i}': {value!r} would not make a file name; use letters, "
                                  "digits, '_', '.' and '-'")
            text = value_text(value)
            if text in seen:
                raise ConfigError(f"config key '{at}.{i}': {value!r} is listed twice")
            seen.append(text)
            trial: dict[str, Any] = {k: copy.deepcopy(v) for k, v in entry.items() if k != "label"}
            _set(trial, key, value)
            try:
                schema.check("method", trial, "")
            except ConfigError as exc:
                reason = str(exc).partition(": ")[2] or str(exc)
                raise ConfigError(f"config key '{at}.{i}': {value!r} is not a valid {key} ({reason})") from None
    return grid_points(name, grid)


def _shown(allowed: tuple[str, ...]) -> list[str]:
    return [f"{k}<key>" if k.endswith(".") else k for k in allowed]

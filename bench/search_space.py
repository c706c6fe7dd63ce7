r"""Search spaces: a method's tunable hyperparameters, and the configurations drawn from them.

A **dimension** is one hyperparameter's range: real numbers between ``low`` and ``high`` on a
linear or a log scale, integers the same way, or a finite list of choices. A **search space**
maps *key paths* of a method entry (``params.tau``, ``train.lr``, ``model.dropout``,
``params.num_leaves``: the paths of :mod:`bench.config.selection`) to dimensions. The loss
registry declares each loss's own dimensions beside the loss (``LossInfo.search``), the study
config the ones a protocol shares by run kind (``tuning.space``: the learning rate and
dropout of every neural method, the tree parameters of each GBDT library), and a method entry
may override either (``search``).

Each dimension maps a coordinate :math:`u \in [0, 1)` of the unit cube to a value:

.. math::

   x = \begin{cases}
     \ell + u\,(h - \ell) & \text{linear}\\
     \exp\big(\ln \ell + u\,(\ln h - \ln \ell)\big) & \text{log}
   \end{cases}

rounded to three significant digits (a configuration is read by people and written into
file names and JSON; three digits lose nothing a search of a few dozen points resolves) and
clipped to :math:`[\ell, h]`. Integers take :math:`\lfloor\cdot\rfloor` of the same map over
:math:`[\ell, h + 1)`, choices the :math:`\lfloor u\,n\rfloor`-th of :math:`n`.

**The sampler** (:func:`draw`) is a scrambled Halton sequence (``scipy.stats.qmc.Halton``),
seeded: a low-discrepancy design covers a box more evenly than independent uniform draws at
the small budgets a study affords, it needs no feedback from finished runs (so every
configuration is known when the workflow builds its DAG: each one a job of its own, resumable,
run in any order or on a cluster, and the same study always draws the same configurations),
and a longer budget extends a shorter one (the first :math:`n` points of the sequence do not
depend on how many are drawn), so raising the budget reuses every finished run. A sequential
sampler (TPE, Gaussian processes) would need the finished runs to place the next point: a
dynamic DAG, and a result that depends on the order jobs finish in. SciPy is already a
dependency and is what Optuna's own QMC sampler calls.

>>> lr = log_uniform(1e-4, 1e-2)
>>> lr.value(0.0), lr.value(0.5), lr.value(0.999999)
(0.0001, 0.001, 0.01)
>>> integers(4, 64, log=True).value(0.5), uniform(0.0, 0.5).value(0.3), choice("a", "b").value(0.6)
(16, 0.15, 'b')
>>> draw({"train.lr": lr}, 3, seed=0) == draw({"train.lr": lr}, 5, seed=0)[:3]  # budgets nest
True
>>> parse({"low": 0.1, "high": 10, "scale": "log"}, "tuning.space.neural.params.tau")
Dimension(low=0.1, high=10.0, scale='log', integer=False, choices=())
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench.errors import ConfigError

SCALES = ("linear", "log")
#: significant digits a drawn real value keeps
DIGITS = 3


@dataclass(frozen=True)
class Dimension:
    """One hyperparameter's range (see the module docstring); ``choices`` non-empty: a list."""

    low: float | None = None
    high: float | None = None
    scale: str = "linear"
    integer: bool = False
    choices: tuple[Any, ...] = ()

    def value(self, u: float) -> Any:
        """The value at unit-cube coordinate ``u`` in [0, 1)."""
        if self.choices:
            return self.choices[min(int(u * len(self.choices)), len(self.choices) - 1)]
        assert self.low is not None and self.high is not None
        high = self.high + 1 if self.integer else self.high
        if self.scale == "log":
            x = math.exp(math.log(self.low) + u * (math.log(high) - math.log(self.low)))
        else:
            x = self.low + u * (high - self.low)
        if self.integer:
            return int(min(max(math.floor(x), self.low), self.high))
        return min(max(float(f"{x:.{DIGITS}g}"), self.low), self.high)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` lies in the dimension (a default outside it is still tried: it is configuration 1)."""
        if self.choices:
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        assert self.low is not None and self.high is not None
        return self.low <= value <= self.high and (not self.integer or float(value).is_integer())

    def describe(self) -> str:
        """One line for captions and the selection table.

        >>> log_uniform(0.1, 10).describe(), integers(4, 64).describe(), choice(1, 2).describe()
        ('log-uniform 0.1-10', 'integer 4-64', 'one of 1, 2')
        """
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        kind = "integer" if self.integer else "uniform"
        if self.scale == "log":
            kind = "log-integer" if self.integer else "log-uniform"
        return f"{kind} {_num(self.low)}-{_num(self.high)}"

    def as_config(self) -> dict[str, Any]:
        """The dimension as the config writes it (what a tuning record and the frozen manifest store)."""
        if self.choices:
            return {"choices": list(self.choices)}
        out: dict[str, Any] = {"low": self.low, "high": self.high, "scale": self.scale}
        return {**out, "type": "int"} if self.integer else out


def _num(x: float | None) -> str:
    return f"{x:g}"


def uniform(low: float, high: float) -> Dimension:
    return _checked(Dimension(float(low), float(high), "linear"), "uniform")


def log_uniform(low: float, high: float) -> Dimension:
    return _checked(Dimension(float(low), float(high), "log"), "log_uniform")


def integers(low: int, high: int, *, log: bool = False) -> Dimension:
    return _checked(Dimension(int(low), int(high), "log" if log else "linear", integer=True), "integers")


def choice(*values: Any) -> Dimension:
    return _checked(Dimension(choices=tuple(values)), "choice")


def _checked(dim: Dimension, where: str) -> Dimension:
    problem = _problem(dim)
    if problem:
        raise ValueError(f"{where}: {problem}")
    return dim


def _problem(dim: Dimension) -> str:
    if dim.choices:
        if len(set(map(repr, dim.choices))) != len(dim.choices):
            return "choices repeat a value"
        return ""
    if dim.low is None or dim.high is None:
        return "needs low and high (or choices)"
    if dim.scale not in SCALES:
        return f"scale must be one of {', '.join(SCALES)}, got {dim.scale!r}"
    if not dim.low < dim.high:
        return f"low ({dim.low}) must be below high ({dim.high})"
    if dim.scale == "log" and dim.low <= 0:
        return f"a log scale needs low > 0, got {dim.low}"
    if dim.integer and not (float(dim.low).is_integer() and float(dim.high).is_integer()):
        return "an integer dimension needs integer low and high"
    return ""


def parse(spec: Any, where: str) -> Dimension:
    """A dimension from its config form (``{low, high, scale?, type?}`` or ``{choices}``); a
    :class:`~bench.errors.ConfigError` naming ``where`` (the config key) when it makes no sense."""
    if isinstance(spec, Dimension):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(f"config key '{where}': a dimension is {{low, high, scale, type}} or {{choices}}, got {spec!r}")
    unknown = sorted(set(spec) - {"low", "high", "scale", "type", "choices"})
    if unknown:
        raise ConfigError(f"config key '{where}.{unknown[0]}': unknown key (a dimension takes low, high, scale, type "
                          "or choices)")
    if "choices" in spec:
        if set(spec) != {"choices"} or not isinstance(spec["choices"], list) or not spec["choices"]:
            raise ConfigError(f"config key '{where}.choices': a non-empty list, alone (no low, high or scale)")
        dim = Dimension(choices=tuple(spec["choices"]))
    else:
        kind = spec.get("type", "float")
        if kind not in ("float", "int"):
            raise ConfigError(f"config key '{where}.type': float or int, got {kind!r}")
        low, high = spec.get("low"), spec.get("high")
        for key, value in (("low", low), ("high", high)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"config key '{where}.{key}': a number is required, got {value!r}")
        dim = Dimension(low if kind == "int" else float(low), high if kind == "int" else float(high),
                        spec.get("scale", "linear"), integer=kind == "int")
    problem = _problem(dim)
    if problem:
        raise ConfigError(f"config key '{where}': {problem}")
    return dim


def draw(dimensions: Mapping[str, Dimension], n: int, seed: int) -> list[dict[str, Any]]:
    """The first ``n`` points of the scrambled Halton sequence seeded by ``seed``, each mapped
    through the dimensions (in the mapping's order) to ``{key path: value}``; none without dimensions."""
    if n <= 0 or not dimensions:
        return []
    import numpy as np
    from scipy.stats import qmc

    keys = list(dimensions)
    sampler = qmc.Halton(len(keys), scramble=True, rng=np.random.default_rng(seed))
    return [{k: dimensions[k].value(float(u)) for k, u in zip(keys, row)} for row in sampler.random(n)]

"""The evaluation conventions: who defines each one, which metrics it grades its own way, and how.

One :class:`Convention` per name of :data:`bench.choices.CONVENTIONS`:

- ``default``: the suite's definitions (:mod:`bench.metrics.default`), with the caller's
  ``ties`` and ``empty_query``;
- ``letor3``, ``letor4``: LETOR's official scripts for the metrics they compute
  (:mod:`bench.metrics.letor`); the others are graded by ``default`` (:func:`metric_convention`);
- ``tfranking``: TF-Ranking's metrics (:mod:`bench.metrics.tfranking`), the evaluation code of
  PiRank and ARF; ``allrank``: allRank's (:mod:`bench.metrics.allrank`), NeuralNDCG's. A tool's
  convention fixes the tie rule and the empty-query value for every metric of the frame
  (the caller's ``ties`` and ``empty_query`` do not apply) and grades the metrics the tool does
  not define by the suite's definitions under those rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bench.choices import CONVENTIONS  # the names; tests/test_metrics_conventions.py checks they are REGISTRY's
from bench.metrics import allrank, default, letor, tfranking
from bench.metrics.names import MetricSpec, parse_metric


@dataclass(frozen=True)
class Convention:
    """How one convention grades: ``compute`` (metric kind -> function of the sorted layout),
    the kinds its tool defines itself (``own``), and the rules it fixes (None: the caller's)."""

    name: str
    tool: str
    compute: Mapping[str, Callable]
    own: tuple[str, ...]
    ties: str | None = None
    empty_query: str | None = None
    used_by: str = ""
    source: str = ""
    pooled: tuple[str, ...] = field(default=())  # kinds whose frames carry per-query weights
    # a tool's caption: its tie rule, its empty-query value, the metrics it defines differently
    caption_ties: str = ""
    caption_empty: str = ""
    captions: Mapping[str, str] = field(default_factory=dict)
    caption_pooled: str = ""

    @property
    def fixes_rules(self) -> bool:
        """A tool's convention: its tie rule and empty-query value hold for every metric it grades."""
        return self.ties is not None


def _letor_compute(convention: str) -> dict[str, Callable]:
    def graded(fn: Callable) -> Callable:
        return lambda r, spec, _empty: fn(letor.LetorTables.of(r, convention), spec)

    return {kind: graded(fn) for kind, fn in letor.LETOR_COMPUTE.items() if kind in letor.LETOR_KINDS[convention]}


def _tool(module, name: str) -> Convention:
    return Convention(name, module.TOOL, MappingProxyType({**default.COMPUTE, **module.OWN}), tuple(module.OWN),
                      ties=module.TIES, empty_query=module.EMPTY_QUERY, used_by=module.USED_BY,
                      source=module.SOURCE, pooled=module.POOLED, caption_ties=module.CAPTION_TIES,
                      caption_empty=module.CAPTION_EMPTY, captions=MappingProxyType(module.CAPTIONS),
                      caption_pooled=module.CAPTION_POOLED)


REGISTRY: dict[str, Convention] = {
    "default": Convention("default", "ltr-bench", MappingProxyType(default.COMPUTE), tuple(default.COMPUTE)),
    **{name: Convention(name, f"LETOR's {script}", MappingProxyType(_letor_compute(name)), letor.LETOR_KINDS[name],
                        source=script)
       for name, script in letor.LETOR_SCRIPTS.items()},
    "tfranking": _tool(tfranking, "tfranking"),
    "allrank": _tool(allrank, "allrank"),
}


def convention(name: str) -> Convention:
    if name not in REGISTRY:
        raise ValueError(f"convention={name!r} is not one of {list(CONVENTIONS)}")
    return REGISTRY[name]


def is_letor(name: str) -> bool:
    return name in letor.LETOR_SCRIPTS


def defines(name: str, spec: MetricSpec) -> bool:
    """Whether convention ``name`` grades ``spec`` itself (else :func:`metric_convention` hands it
    to ``default``): a LETOR script only its metrics, any other convention every metric it computes."""
    if is_letor(name):
        return letor.defines(name, spec)
    return spec.kind in convention(name).compute


def metric_convention(metric: str, convention_name: str) -> str:
    """The convention ``metric`` is computed under when a frame's convention is ``convention_name``.

    A LETOR convention grades the metrics its official script defines (NDCG@k, P@k, MAP and,
    for 4.0, MeanNDCG); the others (MRR, OPA, ARP, recall, ...) keep the default definitions.
    ``tfranking`` and ``allrank`` grade every metric (their own or the suite's under their rules).

    >>> metric_convention("ndcg@10", "letor4"), metric_convention("mrr", "letor4")
    ('letor4', 'default')
    >>> metric_convention("recall_arf@30@15", "tfranking")
    'tfranking'
    """
    convention(convention_name)
    if not is_letor(convention_name):
        return convention_name
    return convention_name if letor.defines(convention_name, parse_metric(metric)) else "default"

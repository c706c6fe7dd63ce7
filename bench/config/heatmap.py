r"""The recall heatmaps (ARF Figs. 2-6): one model per training cut-off, graded at every cut-off.

ARF asks whether a surrogate of Recall@m@k is *consistent* with the metric: a loss trained
with cut-offs ``(m, k)`` should score best on Recall@m@k at that same ``(m, k)``. So the
figure ``recall_heatmap`` trains each of its methods once per point of its ``grid`` (a list
of ``[m, k]`` pairs) and grades every model at every pair: rows are the training cut-offs,
columns the metric's, and the diagonal pairs a model with the metric it was trained for.

A method's cut-offs are the ``m`` and ``k`` among its ``params``: a method with both
(``arf_relax``, ``lambda_recall``) is trained once per grid pair; a method with ``k`` only
(LambdaLoss@k, ARF's :math:`L^\lambda_{NDCG@k}`) once per distinct ``k`` of the grid, its
row matching every column with that ``k``. Each model keeps the checkpoint with the best
validation Recall@m@k at its own training point (:func:`selection_metric`).

Everything here is a pure function of the figure's section and the method catalogue;
:mod:`bench.config.plan` decides per dataset which rows reuse a run another table already
trains (:func:`shares_base`).

>>> rows = training_rows("lambda_recall", {"m": 30, "k": 15}, [[10, 5], [30, 15]])
>>> [(r.name, r.m, r.k, r.selection) for r in rows]
[('lambda_recall.m10.k5', 10, 5, 'recall_arf@10@5'), ('lambda_recall.m30.k15', 30, 15, 'recall_arf@30@15')]
>>> [(r.name, r.m, r.k) for r in training_rows("lambdaloss_k15", {"k": 15}, [[10, 5], [20, 5], [30, 15]])]
[('lambdaloss_k15.k5', None, 5), ('lambdaloss_k15.k15', None, 15)]
>>> matches(rows[0], 10, 5), matches(rows[0], 30, 15)
(True, False)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from bench.errors import ConfigError

FIGURE = "recall_heatmap"
#: the recall the heatmaps grade with: ARF's eq. 4 (``bench.metrics``: divides by k)
RECALL = "recall_arf"
CUTOFFS = ("m", "k")
#: (paper dataset role, registered loss) -> the ARF figure that draws it
PAPER_FIGURES = {
    ("istella", "lambda_recall"): 2,
    ("istella", "arf_relax"): 2,
    ("mslr-web30k", "lambda_recall"): 3,
    ("mslr-web30k", "arf_relax"): 4,
    ("mslr-web30k", "lambdaloss"): 5,
    ("istella", "lambdaloss"): 6,
}


#: registered loss -> its name in ARF's figures, for a method with no params besides its cut-offs
LOSS_TITLES = {
    "arf_relax": "L_Relax (ARF-relax)",
    "lambda_recall": "Lambda Recall@m@k",
    "lambdaloss": "LambdaLoss@k (Lambda NDCG@k)",
}


@dataclass(frozen=True)
class Row:
    """One heatmap row: ``base`` trained at ``(m, k)`` (``m`` None: the loss has ``k`` only)."""

    base: str
    name: str
    m: int | None
    k: int | None
    selection: str

    @property
    def params(self) -> dict[str, int]:
        return {key: v for key, v in (("m", self.m), ("k", self.k)) if v is not None}

    @property
    def title(self) -> str:
        return ", ".join(f"{key}={v}" for key, v in self.params.items())


def panel_title(name: str, entry: dict[str, Any]) -> str:
    """A panel's loss: ARF's name for it (:data:`LOSS_TITLES`), else the method's label.

    >>> panel_title("lambdaloss_k15", {"loss": "lambdaloss", "params": {"k": 15}, "label": "LambdaLoss@15"})
    'LambdaLoss@k (Lambda NDCG@k)'
    >>> panel_title("lr", {"loss": "lambdaloss", "params": {"k": 5, "scheme": "lambdarank"}, "label": "LambdaRank@5"})
    'LambdaRank@5'
    """
    if entry["loss"] in LOSS_TITLES and set(entry.get("params", {})) <= set(CUTOFFS):
        return LOSS_TITLES[entry["loss"]]
    return entry.get("label", name)


def grid_pairs(spec: dict[str, Any]) -> list[tuple[int, int]]:
    """The figure's ``grid`` as ``(m, k)`` tuples, in the config's order."""
    return [(int(m), int(k)) for m, k in spec["grid"]]


def metric_names(spec: dict[str, Any]) -> list[str]:
    """The columns: ``recall_arf@m@k`` at every grid pair.

    >>> metric_names({"grid": [[10, 5], [30, 15]]})
    ['recall_arf@10@5', 'recall_arf@30@15']
    """
    return [f"{RECALL}@{m}@{k}" for m, k in grid_pairs(spec)]


def selection_metric(m: int | None, k: int | None, grid: list[tuple[int, int]]) -> str:
    """Validation metric of a model trained at ``(m, k)``: Recall@m@k there; a cut-off the loss
    does not have is taken from the first grid pair with the other one.

    >>> selection_metric(None, 15, [(20, 10), (30, 15), (40, 15)])
    'recall_arf@30@15'
    """
    m_sel, k_sel = next((gm, gk) for gm, gk in grid if (m is None or gm == m) and (k is None or gk == k))
    return f"{RECALL}@{m_sel}@{k_sel}"


def training_rows(base: str, params: dict[str, Any], grid: list[list[int]] | list[tuple[int, int]]) -> list[Row]:
    """The models of one method: one per distinct value of its cut-offs over the grid."""
    pairs = [(int(m), int(k)) for m, k in grid]
    has = [key for key in CUTOFFS if key in params]
    points = list(dict.fromkeys(tuple(v if key in has else None for key, v in zip(CUTOFFS, pair)) for pair in pairs))
    rows = []
    for m, k in points:
        suffix = "".join(f".{key}{v}" for key, v in (("m", m), ("k", k)) if v is not None)
        rows.append(Row(base, f"{base}{suffix}", m, k, selection_metric(m, k, pairs)))
    return rows


def matches(row: Row, m: int, k: int) -> bool:
    """Whether column ``(m, k)`` grades the metric ``row`` was trained for (its own cut-offs agree)."""
    return all(v == {"m": m, "k": k}[key] for key, v in row.params.items())


def derived_spec(base_spec: dict[str, Any], row: Row) -> dict[str, Any]:
    """The method entry of ``row``: the base's, its cut-offs set, selection on its own Recall@m@k."""
    spec = copy.deepcopy(base_spec)
    spec["params"] = {**spec.get("params", {}), **row.params}
    spec["train"] = {**spec.get("train", {}), "early_stopping_metric": row.selection}
    spec["label"] = f"{base_spec.get('label', row.base)} trained at {row.title}"
    return spec


def shares_base(row: Row, base_spec: dict[str, Any], selection: str) -> bool:
    """Whether ``row``'s model is the base method's own run: same cut-offs, and the base's
    effective validation metric on the dataset (``selection``) is ``row``'s."""
    params = base_spec.get("params", {})
    return all(params.get(key) == v for key, v in row.params.items()) and selection == row.selection


def check_methods(methods: dict[str, dict[str, Any]], spec: dict[str, Any], where: str) -> None:
    """Each method of the figure is a neural loss with ``m`` or ``k`` among its params, each grid
    pair has ``k <= m`` and none repeats; a derived name never shadows a catalogue method."""
    pairs = grid_pairs(spec)
    for i, (m, k) in enumerate(pairs):
        if k > m:
            raise ConfigError(f"config key '{where}.grid.{i}': k = {k} > m = {m}; Recall@m@k asks how much "
                              "of the true top k the predicted top m holds, so k <= m")
        if (m, k) in pairs[:i]:
            raise ConfigError(f"config key '{where}.grid.{i}': [{m}, {k}] is listed twice")
    for i, name in enumerate(spec["methods"]):
        entry = methods[name]
        if "loss" not in entry or not any(key in entry.get("params", {}) for key in CUTOFFS):
            raise ConfigError(f"config key '{where}.methods.{i}': '{name}' is not a loss with cut-off params "
                              f"(m and/or k in its params): the heatmap trains it once per (m, k) of the grid")
        for row in training_rows(name, entry["params"], pairs):
            if row.name in methods:
                raise ConfigError(f"config key '{where}.methods.{i}': the model '{row.name}' it trains has the "
                                  "name of a method of the catalogue; rename that method")


def derived_methods(methods: dict[str, dict[str, Any]], spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every model the heatmap trains, by name, as a method entry (:func:`derived_spec`)."""
    return {row.name: derived_spec(methods[base], row)
            for base in spec["methods"] for row in training_rows(base, methods[base]["params"], spec["grid"])}

"""Grade a split: :func:`evaluate` (one convention), :func:`evaluate_with_convention` (a frame's
convention, metric by metric) and :func:`summarize` (the mean over queries)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.choices import CONVENTIONS, EMPTY_QUERY_CHOICES, TIES_CHOICES
from bench.metrics.conventions import convention as convention_spec
from bench.metrics.conventions import is_letor, metric_convention
from bench.metrics.letor import check_letor
from bench.metrics.names import dropped_column, is_metric_column, parse_metric, weight_column
from bench.metrics.ranking import Ranking


def evaluate(
    scores: np.ndarray,
    labels: np.ndarray,
    query_offsets: np.ndarray,
    metrics: Sequence[str],
    empty_query: str = "one",
    ties: str = "stable",
    query_ids: np.ndarray | None = None,
    convention: str = "default",
) -> pd.DataFrame:
    """Per-query metric values for a whole split; see :mod:`bench.metrics` for definitions.

    Returns a DataFrame with one row per query: ``query`` (int64; ``query_ids`` if given,
    else ``0..Q-1``), one float64 column per requested metric (named exactly as requested),
    one bool column ``"<metric>:dropped"`` per metric (value 0.0 where dropped) and, for a
    metric the convention pools over queries (``tfranking``'s OPA and ARP), a float64 column
    ``"<metric>:weight"`` (0 where dropped). ``convention`` (:data:`bench.choices.CONVENTIONS`)
    selects the evaluation convention; a LETOR convention fixes ``empty_query`` (ignored) and
    requires ``ties="stable"``; ``tfranking`` and ``allrank`` fix both (the arguments are
    ignored) and rank the scores as float32, as those tools do.

    >>> import numpy as np
    >>> df = evaluate(np.array([1.0, 1.0]), np.array([0.0, 1.0]), np.array([0, 2]),
    ...               ["opa"], ties="expected")
    >>> float(df["opa"][0])
    0.5
    >>> tf = evaluate(np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 0.0]), np.array([0, 3]),
    ...               ["opa"], convention="tfranking")  # the tied pair counts as wrong
    >>> float(tf["opa"][0]), float(tf["opa:weight"][0])
    (0.5, 2.0)
    """
    _check_choice("empty_query", empty_query, EMPTY_QUERY_CHOICES)
    _check_choice("ties", ties, TIES_CHOICES)
    if isinstance(metrics, str):
        metrics = [metrics]
    specs = [parse_metric(m) for m in metrics]
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"metric(s) requested twice: {duplicates}")
    _check_choice("convention", convention, CONVENTIONS)
    conv = convention_spec(convention)
    scores, labels, offsets = _validate(scores, labels, query_offsets)
    if is_letor(convention):
        check_letor(convention, specs, ties, labels, offsets)
    elif any(s.kind == "mean_ndcg" for s in specs):
        raise ValueError("metric 'mean_ndcg' (Eval-Score-4.0.pl's MeanNDCG) is defined only under "
                         "convention 'letor4'")
    if conv.fixes_rules:  # a tool's convention: its own rules, its float32 scores
        ties, empty_query = str(conv.ties), conv.empty_query or empty_query
        scores = scores.astype(np.float32).astype(np.float64)
    qids = _query_ids(query_ids, len(offsets) - 1)
    ranking = Ranking(scores, labels, offsets, ties)
    values: dict[str, np.ndarray] = {}
    dropped: dict[str, np.ndarray] = {}
    weights: dict[str, np.ndarray] = {}
    for spec in specs:
        value, drop, *weight = conv.compute[spec.kind](ranking, spec, empty_query)
        values[spec.name] = np.where(drop, 0.0, value).astype(np.float64)
        dropped[dropped_column(spec.name)] = drop.astype(bool)
        if weight:
            weights[weight_column(spec.name)] = np.where(drop, 0.0, weight[0]).astype(np.float64)
    return pd.DataFrame({"query": qids, **values, **dropped, **weights})


def _query_ids(query_ids: np.ndarray | None, n_queries: int) -> np.ndarray:
    if query_ids is None:
        return np.arange(n_queries, dtype=np.int64)
    qids = np.asarray(query_ids)
    if qids.shape != (n_queries,) or not np.issubdtype(qids.dtype, np.integer):
        raise ValueError(
            f"query_ids must be {n_queries} integers (one per query), got shape "
            f"{qids.shape} and dtype {qids.dtype}"
        )
    return qids.astype(np.int64)


def evaluate_with_convention(
    scores: np.ndarray,
    labels: np.ndarray,
    query_offsets: np.ndarray,
    metrics: Sequence[str],
    convention: str = "default",
    *,
    empty_query: str = "one",
    ties: str = "stable",
    query_ids: np.ndarray | None = None,
) -> pd.DataFrame:
    """:func:`evaluate` with a frame's convention: each metric under :func:`metric_convention`.

    Same frame as :func:`evaluate` (columns in the requested order); with ``convention =
    "default"`` it is exactly ``evaluate(...)``.

    >>> import numpy as np
    >>> df = evaluate_with_convention(np.array([0.0, 1.0]), np.array([1.0, 0.0]), np.array([0, 2]),
    ...                               ["ndcg@1", "mrr"], "letor4")
    >>> float(df["ndcg@1"][0]), float(df["mrr"][0])
    (0.0, 0.5)
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    groups: dict[str, list[str]] = {}
    for name in metrics:
        groups.setdefault(metric_convention(name, convention), []).append(name)
    frames = [evaluate(scores, labels, query_offsets, names, empty_query=empty_query, ties=ties,
                       query_ids=query_ids, convention=conv) for conv, names in groups.items()]
    if len(frames) == 1:
        return frames[0]
    merged = pd.concat([frames[0]] + [f.drop(columns="query") for f in frames[1:]], axis=1)
    weights = [weight_column(m) for m in metrics if weight_column(m) in merged.columns]
    return merged[["query", *metrics, *(dropped_column(m) for m in metrics), *weights]]


def summarize(frame: pd.DataFrame, metrics: Sequence[str] | None = None) -> dict[str, float]:
    """Mean of each metric over the queries it did not drop (NaN if it dropped all); a pooled
    metric (a ``<metric>:weight`` column) is the weighted mean ``sum(w v) / sum(w)``.

    >>> import numpy as np
    >>> df = evaluate(np.array([2.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0]),
    ...               np.array([0, 2, 3]), ["mrr", "arp"])
    >>> summarize(df)
    {'mrr': 0.5, 'arp': 1.0}
    """
    if metrics is None:
        metrics = [c for c in frame.columns if c != "query" and is_metric_column(c)]
    out = {}
    for name in metrics:
        keep = ~frame[dropped_column(name)].to_numpy(bool)
        values = frame[name].to_numpy()[keep]
        weights = frame[weight_column(name)].to_numpy()[keep] if weight_column(name) in frame else np.ones(len(values))
        out[name] = float(np.sum(weights * values) / np.sum(weights)) if keep.any() else float("nan")
    return out


# ----------------------------------------------------------------------------------------
# input validation


def _check_choice(key: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{key}={value!r} is not one of {list(choices)}")


def _validate(scores, labels, query_offsets):
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(query_offsets)
    if scores.ndim != 1 or labels.shape != scores.shape:
        raise ValueError(
            f"scores and labels must be 1-D of equal length, got {scores.shape} and "
            f"{labels.shape}"
        )
    if offsets.ndim != 1 or len(offsets) < 1 or not np.issubdtype(offsets.dtype, np.integer):
        raise ValueError("query_offsets must be a 1-D integer array [Q+1] starting at 0")
    offsets = offsets.astype(np.int64)
    if offsets[0] != 0 or offsets[-1] != len(scores) or np.any(np.diff(offsets) < 0):
        raise ValueError(
            f"query_offsets must start at 0, never decrease and end at the number of "
            f"documents ({len(scores)}); got first={offsets[0]}, last={offsets[-1]}"
        )
    bad = np.flatnonzero(np.isnan(scores))
    if bad.size:
        q = int(np.searchsorted(offsets, bad[0], side="right") - 1)
        raise ValueError(
            f"scores contain NaN ({bad.size} values; first at row {bad[0]}, query {q})"
        )
    bad = np.flatnonzero(~np.isfinite(labels) | (labels < 0))
    if bad.size:
        raise ValueError(
            f"labels must be finite and >= 0; row {bad[0]} has {labels[bad[0]]!r} "
            f"({bad.size} bad values)"
        )
    return scores, labels, offsets

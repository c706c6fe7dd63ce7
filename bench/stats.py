r"""Paired significance tests against the best method (bold best + "not significantly worse") and
of a method against each reference (:func:`versus`: the compare page).

:func:`significance` turns a tidy per-query table (columns ``dataset, fold, seed, method,
query``, one column per metric, optional ``<metric>:dropped`` columns) into the tidy
statistics table the renderer reads. For every dataset and metric:

1. **Dropped queries.** A ``(fold, query)`` is excluded from a metric, for *every* method,
   when any of its rows marks it dropped (``<metric>:dropped``). Drops depend on the
   labels only (e.g. OPA without two different labels), so in practice all rows agree;
   excluding the union keeps the pairing exact even if they do not.
2. **Seeds, folds.** A method's per-query value is its mean over its seeds; queries of all
   test folds are concatenated, keyed by ``(fold, query)``. Every method must cover exactly
   the same keys (else ``ValueError`` naming the method and the missing keys -- never a
   silent inner join), and within a method every seed must cover them all.
3. **Best** = the largest mean (smallest for metrics where lower is better, i.e. ARP);
   equal means go to the method listed first in the input.
4. **Test** of the best against each other method on the paired per-query values, one-sided
   with H1 "the best is better": ``t`` = ``scipy.stats.ttest_rel(best, other,
   alternative="greater")`` (``"less"`` for ARP); ``wilcoxon`` =
   ``scipy.stats.wilcoxon(best, other, ...)``; ``permutation`` = paired sign-flip test of the
   mean difference (exact over all :math:`2^n` flips when :math:`2^n \le` ``n_permutations``,
   else ``n_permutations`` seeded random flips with :math:`p = (1 + \#\{T^* \ge T\})/(1 + B)`).
   When every paired difference is zero the p-value is **1** (scipy would give NaN); with a
   non-zero constant difference (spread <= 1e-12) the t statistic is infinite and ``p`` is
   0 or 1 by its sign; with fewer than two queries no test is possible and ``p = 1``.
5. **Correction** over the other methods: Holm-Bonferroni (``holm``) or ``none``:
   :math:`\tilde p_{(i)} = \max_{j \le i} \min(1, (m - j + 1)\, p_{(j)})`.
6. **Marks.** ``is_best``; ``not_worse`` = best or ``p_adjusted >= alpha``. The best row
   carries ``p_value = p_adjusted = 1`` (a comparison with itself), a zero CI and all ties.
7. **Effect.** ``ci_low, ci_high``: seeded paired bootstrap percentile CI (``confidence``,
   default 95 %) of ``mean(method - best)`` in metric units (``scipy.stats.bootstrap``,
   ``paired=True``; NaN when ``n_boot=0``); ``wins/ties/losses``: queries where the method is
   better than / equal to (within 1e-12) / worse than the best.

**References** (``references``): methods shown beside the family, not in it (a paper's row at
its best-on-test point, shown for a like-with-like comparison with the paper). They are never
the best, take no part in the correction, and carry the raw one-sided p-value against the best
(``p_adjusted`` NaN, ``not_worse`` false: never bold), with their CI and wins/ties/losses.

``mean`` is the mean over the kept queries of the seed-averaged values; ``std_over_seeds`` is
the sample standard deviation (ddof 1; 0 with one seed) over seeds of the per-seed mean
metric. Extra columns: ``n_seeds``, ``test``, ``correction``, ``alpha``.

**Pooled metrics.** A metric whose frame has a ``<metric>:weight`` column (TF-Ranking's OPA
and ARP, :mod:`bench.metrics.tfranking`) is a weighted mean, :math:`\sum_q w_q v_q / \sum_q w_q`,
not a mean of per-query values. Its weights depend on the labels only (OPA: the query's pairs
with different labels; ARP: its label sum), so every method and seed must carry the same
weight for a query (else ``ValueError``). Then ``mean`` and each seed's mean are weighted
means; the paired test of step 4 acts on the per-query units :math:`u_q = w_q v_q / \bar w`,
whose plain mean is the pooled value, so it tests the difference of the pooled values (the
sign-flip test is exact for it; the t-test treats the weights as fixed, which they are: they
come from the labels); the bootstrap CI of step 7 resamples queries with their weights and
recomputes the ratio :math:`\sum w (v - v_{best}) / \sum w` on each resample.
``wins/ties/losses`` still count queries.

:func:`versus` reuses steps 1-2 and the same test, bootstrap and Holm for another question,
the compare page's: is *this* method better or worse than *that* reference, by how much? One
row per pair, the test two-sided (:func:`two_sided_test`: twice the smaller one-sided p-value;
the sign of the difference gives the direction), Holm over the references of one method (or
over the pairs of a set of methods).

CLI::

    ltr-bench stats --inputs 'results/runs/exp/*/*/*/seed*/metrics.parquet' \
        --metrics ndcg@10 mrr --out results/stats/table.parquet \
        [--test t|wilcoxon|permutation] [--correction holm|none] [--alpha 0.05] \
        [--n-boot 1000] [--seed 0]
"""

from __future__ import annotations

import glob as _glob
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from bench.atomic.integrity import verify
from bench.choices import CORRECTIONS, TESTS
from bench.errors import UsageError
from bench.metrics import higher_is_better as metric_direction
from bench.metrics import is_metric_column
from bench.results import INFO_COLUMNS, KEY_COLUMNS, parse_spec, read_frames, read_record, std_over_seeds, write_frame
from bench.results import TIE_TOL as _TIE_TOL
from bench.results import check_design as _check_design
from bench.results import paired_values as _paired_values
from bench.seeds import derive_seed

RESULT_COLUMNS = (
    "dataset", "metric", "method", "mean", "std_over_seeds", "n_queries", "p_value",
    "p_adjusted", "ci_low", "ci_high", "is_best", "not_worse", "wins", "ties", "losses",
    "n_seeds", "test", "correction", "alpha",
)


# ------------------------------------------------------------------------------------------
# building blocks (each checked against an independent oracle in tests/test_stats.py)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values (same order as the input).

    >>> holm([0.01, 0.04, 0.03]).round(4).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted


def paired_test(best: np.ndarray, other: np.ndarray, *, test: str = "t",
                higher_is_better: bool = True, n_permutations: int = 10_000,
                seed: int = 0) -> float:
    """One-sided p-value of H1 "``best`` is better than ``other``" on paired values.

    >>> round(paired_test(np.array([0.9, 0.8, 0.7, 0.9]), np.array([0.5, 0.6, 0.6, 0.4])), 4)
    0.0231
    >>> paired_test(np.ones(5), np.ones(5))  # identical methods: p = 1, not NaN
    1.0
    """
    if test not in TESTS:
        raise ValueError(f"test={test!r} is not one of {list(TESTS)}")
    best, other = np.asarray(best, np.float64), np.asarray(other, np.float64)
    diff = (best - other) if higher_is_better else (other - best)  # > 0: best is better
    if len(diff) < 2 or np.all(np.abs(diff) <= _TIE_TOL):
        return 1.0
    alternative = "greater" if higher_is_better else "less"
    if test == "t":
        if np.ptp(diff) <= _TIE_TOL * max(1.0, float(np.abs(diff).max())):
            return 0.0 if diff.mean() > 0 else 1.0  # constant difference: t = +-inf
        return float(sps.ttest_rel(best, other, alternative=alternative).pvalue)
    if test == "wilcoxon":
        return float(sps.wilcoxon(best, other, alternative=alternative).pvalue)
    return permutation_test(diff, n_permutations=n_permutations, seed=seed)


def permutation_test(diff: np.ndarray, *, n_permutations: int = 10_000, seed: int = 0,
                     batch: int = 512) -> float:
    r"""Paired sign-flip test of H1 ``mean(diff) > 0``.

    Exact (all :math:`2^n` sign vectors, identity included) when :math:`2^n \le`
    ``n_permutations`` and ``n <= 20``; otherwise ``n_permutations`` random sign vectors
    from a seeded generator and :math:`p = (1 + \#\{T^* \ge T\}) / (1 + B)` (never 0).
    Flipped sums equal to the observed one within a relative 1e-9 count as ``>=``.

    >>> permutation_test(np.array([1.0, 2.0, 3.0]))  # only the identity is as large: 1/8
    0.125
    """
    d = np.asarray(diff, dtype=np.float64)
    n = len(d)
    observed = d.sum()
    tol = 1e-9 * max(np.abs(d).sum(), 1e-300)
    if n <= 20 and 2**n <= n_permutations:
        rows = np.array(list(itertools.product((1.0, -1.0), repeat=n))) if n else np.ones((1, 0))
        count = int(np.count_nonzero(rows @ d >= observed - tol))
        return count / len(rows)
    rng = np.random.default_rng(seed)
    rows = max(1, min(batch, 4_000_000 // n))  # bounded memory: rows x n float64
    count = done = 0
    while done < n_permutations:
        size = min(rows, n_permutations - done)
        # one random bit per item and flip: flipping a set F changes the sum by -2 sum(d[F])
        flips = np.unpackbits(rng.integers(0, 256, size=(size, (n + 7) // 8), dtype=np.uint8),
                              axis=1, count=n).astype(np.float64)
        count += int(np.count_nonzero(flips @ d <= tol / 2))
        done += size
    return (1 + count) / (1 + n_permutations)


def two_sided_test(a: np.ndarray, b: np.ndarray, *, test: str = "t", n_permutations: int = 10_000,
                   seed: int = 0) -> float:
    """Two-sided p-value of H1 "``a`` and ``b`` differ" on paired values: twice the smaller of
    :func:`paired_test`'s one-sided p-values (``a`` better, ``b`` better), capped at 1.

    For the t-test this is exactly ``scipy.stats.ttest_rel``'s two-sided p-value; the sign of
    ``mean(a - b)`` says which way a small p points.

    >>> a, b = np.array([0.9, 0.8, 0.7, 0.9]), np.array([0.5, 0.6, 0.6, 0.4])
    >>> round(two_sided_test(a, b), 4), round(two_sided_test(b, a), 4)
    (0.0462, 0.0462)
    """
    greater = paired_test(a, b, test=test, higher_is_better=True, n_permutations=n_permutations, seed=seed)
    less = paired_test(a, b, test=test, higher_is_better=False, n_permutations=n_permutations, seed=seed)
    return min(1.0, 2.0 * min(greater, less))


def bootstrap_ci(method: np.ndarray, best: np.ndarray, *, n_boot: int = 1000, seed: int = 0,
                 confidence: float = 0.95, weights: np.ndarray | None = None) -> tuple[float, float]:
    """Paired percentile bootstrap CI of ``mean(method - best)`` (``scipy.stats.bootstrap``).

    With ``weights`` (a pooled metric) the statistic is the weighted mean difference
    ``sum(w (method - best)) / sum(w)``, recomputed on each resample of queries with their
    weights (the ratio estimator's bootstrap). Constant differences give the degenerate
    interval ``(d, d)``; ``n_boot=0`` gives NaNs.
    """
    diff = np.asarray(method, np.float64) - np.asarray(best, np.float64)
    if n_boot == 0 or len(diff) == 0:
        return float("nan"), float("nan")
    if np.ptp(diff) == 0.0:
        return float(diff[0]), float(diff[0])
    samples = (np.asarray(method, np.float64), np.asarray(best, np.float64))
    if weights is None:
        def statistic(x, y, axis):
            return np.mean(x - y, axis=axis)
    else:
        samples += (np.asarray(weights, np.float64),)

        def statistic(x, y, w, axis):
            return np.sum(w * (x - y), axis=axis) / np.sum(w, axis=axis)
    res = sps.bootstrap(
        samples, statistic, paired=True, vectorized=True, n_resamples=n_boot, confidence_level=confidence,
        method="percentile", batch=max(1, min(n_boot, 2_000_000 // max(len(diff), 1))),
        random_state=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


# ------------------------------------------------------------------------------------------
# the table


def significance(
    per_query: pd.DataFrame,
    metrics: Sequence[str],
    *,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
    higher_is_better: bool | Mapping[str, bool] | None = None,
    n_permutations: int = 10_000,
    confidence: float = 0.95,
    references: Sequence[str] = (),
) -> pd.DataFrame:
    """The statistics table; see the module docstring for every rule (``references``: methods
    shown beside the family, never in it).

    ``higher_is_better``: None (from :func:`bench.metrics.higher_is_better`, so ARP is
    lower-is-better), one bool for all metrics, or a ``{metric: bool}`` mapping.

    >>> pq = pd.DataFrame({"dataset": "d", "fold": 1, "seed": 0, "query": [0, 1, 2] * 2,
    ...                    "method": ["a"] * 3 + ["b"] * 3, "mrr": [1, 1, .5, .5, 1, .5]})
    >>> significance(pq, ["mrr"])[["method", "mean", "is_best", "p_value"]].round(3)
      method   mean  is_best  p_value
    0      a  0.833     True    1.000
    1      b  0.667    False    0.211
    """
    metrics = _check_options(per_query, metrics, test, correction, alpha)
    rows: list[dict] = []
    for dataset, frame in per_query.groupby("dataset", sort=False):
        _check_design(frame, dataset)
        methods = list(pd.unique(frame["method"]))
        for metric in metrics:
            hib = _direction(metric, higher_is_better)
            rows.extend(_one_table(frame, dataset, metric, methods, hib, test=test,
                                   correction=correction, alpha=alpha, n_boot=n_boot,
                                   seed=seed, n_permutations=n_permutations,
                                   confidence=confidence, references=set(references)))
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def _check_options(per_query: pd.DataFrame, metrics: Sequence[str] | str, test: str, correction: str,
                   alpha: float) -> list[str]:
    if test not in TESTS:
        raise ValueError(f"test={test!r} is not one of {list(TESTS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction={correction!r} is not one of {list(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie strictly between 0 and 1")
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    missing = [c for c in (*KEY_COLUMNS, *metrics) if c not in per_query.columns]
    if missing:
        raise ValueError(f"per-query table lacks columns {missing} (has {list(per_query.columns)})")
    return metrics


def _direction(metric: str, higher_is_better) -> bool:
    if higher_is_better is None:
        return metric_direction(metric)
    if isinstance(higher_is_better, Mapping):
        if metric not in higher_is_better:
            raise ValueError(f"higher_is_better has no entry for metric {metric!r}")
        return bool(higher_is_better[metric])
    return bool(higher_is_better)


def _record(diff: np.ndarray) -> dict[str, int]:
    """Per-query wins, ties (within 1e-12) and losses of a difference oriented so that > 0 is better."""
    return {"wins": int(np.count_nonzero(diff > _TIE_TOL)), "ties": int(np.count_nonzero(np.abs(diff) <= _TIE_TOL)),
            "losses": int(np.count_nonzero(diff < -_TIE_TOL))}


def _one_table(frame, dataset, metric, methods, hib, *, test, correction, alpha, n_boot,
               seed, n_permutations, confidence, references=frozenset()) -> list[dict]:
    wide, per_seed, weights = _paired_values(frame, dataset, metric, methods)
    w = np.ones(len(wide)) if weights is None else weights
    means = wide.mul(w, axis=0).sum(axis=0) / w.sum() if weights is not None else wide.mean(axis=0)
    family = means[[m for m in methods if m not in references]]
    best = (family.idxmax() if hib else family.idxmin()) if len(family) else None
    # equal means: the first listed method wins (idxmax returns the first maximum)
    best_values = wide[best].to_numpy()
    units = w / w.mean()  # a pooled metric's test units: their plain mean is the pooled mean

    def p_against_best(method: str) -> float:
        cmp_seed = derive_seed("permutation", seed, dataset, metric, method)
        return paired_test(best_values * units, wide[method].to_numpy() * units, test=test,
                           higher_is_better=hib, n_permutations=n_permutations, seed=cmp_seed)

    others = [m for m in family.index if m != best]
    p_raw = [p_against_best(m) for m in others]
    p_adj = holm(p_raw) if correction == "holm" else np.asarray(p_raw, dtype=np.float64)
    p_of = {m: (p, pa) for m, p, pa in zip(others, p_raw, p_adj)}
    p_of.update({m: (p_against_best(m), float("nan")) for m in methods if m in references})
    rows = []
    for method in methods:
        vals = wide[method].to_numpy()
        std, n_seeds = std_over_seeds(per_seed, method)
        is_best = method == best
        if is_best:
            p, pa, lo, hi = 1.0, 1.0, 0.0, 0.0
            if n_boot == 0:
                lo = hi = float("nan")
        else:
            p, pa = p_of[method]
            lo, hi = bootstrap_ci(vals, best_values, n_boot=n_boot, confidence=confidence, weights=weights,
                                  seed=derive_seed("bootstrap", seed, dataset, metric, method))
        diff = (vals - best_values) if hib else (best_values - vals)  # > 0: method better
        rows.append({
            "dataset": dataset, "metric": metric, "method": method,
            "mean": float(means[method]), "std_over_seeds": std, "n_queries": len(vals),
            "p_value": float(p), "p_adjusted": float(pa), "ci_low": lo, "ci_high": hi,
            "is_best": is_best, "not_worse": bool(is_best or (method not in references and pa >= alpha)),
            **_record(diff),
            "n_seeds": n_seeds, "test": test, "correction": correction, "alpha": alpha,
        })
    return rows


# ------------------------------------------------------------------------------------------
# each method against each reference (the compare page)

VERSUS_COLUMNS = (
    "dataset", "metric", "method", "reference", "family", "mean", "std_over_seeds", "ref_mean",
    "ref_std_over_seeds", "diff", "ci_low", "ci_high", "n_queries", "p_value", "p_adjusted", "significant",
    "wins", "ties", "losses", "n_seeds", "test", "correction", "alpha", "confidence",
)


def versus(
    per_query: pd.DataFrame,
    metrics: Sequence[str],
    methods: Sequence[str],
    references: Sequence[str] | None = None,
    *,
    family: str = "references",
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
    higher_is_better: bool | Mapping[str, bool] | None = None,
    n_permutations: int = 10_000,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Methods against references: one row per ``(dataset, metric, method, reference)``, from
    the building blocks of :func:`significance`.

    Two designs: with ``references``, every method against every reference (other than
    itself), Holm-Bonferroni (``correction="holm"``) over the references of one method and
    metric -- e.g. a new loss against each frozen baseline; without, every unordered pair of
    ``methods`` once (the earlier one as ``method``), Holm over all the pairs of a metric.

    Steps 1-2 of the module docstring pair the queries (drops, seed averages, the same keys
    for every method). Per row: ``mean``/``std_over_seeds`` of the method and ``ref_mean``/
    ``ref_std_over_seeds`` of the reference (as in :func:`significance`); ``diff`` =
    mean(method) - mean(reference) in metric units (negative is better for ARP) with its paired
    bootstrap CI ``ci_low, ci_high`` (:func:`bootstrap_ci`); ``p_value``: the **two-sided**
    paired test (:func:`two_sided_test`), whose direction is the sign of ``diff``;
    ``p_adjusted`` as above, its family named by ``family``; ``significant`` = ``p_adjusted <
    alpha``; ``wins/ties/losses``: queries where the method is better than / equal to (within
    1e-12) / worse than the reference, by the metric's direction. A pooled metric is treated as
    in :func:`significance` (weighted means, the test on the per-query units, the ratio bootstrap).

    >>> pq = pd.DataFrame({"dataset": "d", "fold": 1, "seed": 0, "query": [0, 1, 2] * 3,
    ...                    "method": ["new"] * 3 + ["a"] * 3 + ["b"] * 3,
    ...                    "mrr": [1, 1, 1, .5, 1, .5, 1, 1, .5]})
    >>> versus(pq, ["mrr"], ["new"], ["a", "b"], n_boot=0)[["reference", "diff", "wins", "ties", "losses"]]
      reference      diff  wins  ties  losses
    0         a  0.333333     2     1       0
    1         b  0.166667     1     2       0
    """
    metrics = _check_options(per_query, metrics, test, correction, alpha)
    if references is None:
        pairs = [(m, r) for i, m in enumerate(methods) for r in methods[i + 1:]]
    else:
        pairs = [(m, r) for m in methods for r in references if r != m]
    rows: list[dict] = []
    for dataset, frame in per_query.groupby("dataset", sort=False):
        _check_design(frame, dataset)
        present = set(pd.unique(frame["method"]))
        every = list(dict.fromkeys(name for pair in pairs for name in pair))
        absent = [m for m in every if m not in present]
        if absent:
            raise ValueError(f"dataset {dataset!r}: no per-query rows of {absent}")
        for metric in metrics:
            hib = _direction(metric, higher_is_better)
            wide, per_seed, weights = _paired_values(frame, dataset, metric, every)
            block = [_versus_row(wide, per_seed, weights, dataset, metric, m, r, hib, test=test, n_boot=n_boot,
                                 seed=seed, n_permutations=n_permutations, confidence=confidence) for m, r in pairs]
            groups = ([[i for i, (m, _) in enumerate(pairs) if m == method] for method in methods]
                      if references is not None else [list(range(len(pairs)))])
            for group in groups:
                p_raw = [block[i]["p_value"] for i in group]
                p_adj = holm(p_raw) if correction == "holm" else np.asarray(p_raw, dtype=np.float64)
                for i, pa in zip(group, p_adj):
                    block[i].update(p_adjusted=float(pa), significant=bool(pa < alpha))
            for row in block:
                row.update(family=family, test=test, correction=correction, alpha=alpha, confidence=confidence)
            rows.extend(block)
    return pd.DataFrame(rows, columns=list(VERSUS_COLUMNS))


def _versus_row(wide, per_seed, weights, dataset, metric, method, ref, hib, *, test, n_boot, seed, n_permutations,
                confidence) -> dict[str, Any]:
    vals, ref_vals = wide[method].to_numpy(), wide[ref].to_numpy()
    w = np.ones(len(vals)) if weights is None else weights
    units = w / w.mean()  # a pooled metric's test units, as in significance
    p = two_sided_test(vals * units, ref_vals * units, test=test, n_permutations=n_permutations,
                       seed=derive_seed("permutation", seed, dataset, metric, method, ref))
    lo, hi = bootstrap_ci(vals, ref_vals, n_boot=n_boot, confidence=confidence, weights=weights,
                          seed=derive_seed("bootstrap", seed, dataset, metric, method, ref))
    std, n_seeds = std_over_seeds(per_seed, method)
    ref_std, _ = std_over_seeds(per_seed, ref)
    mean, ref_mean = float(np.sum(w * vals) / w.sum()), float(np.sum(w * ref_vals) / w.sum())
    return {
        "dataset": dataset, "metric": metric, "method": method, "reference": ref,
        "mean": mean, "std_over_seeds": std, "ref_mean": ref_mean,
        "ref_std_over_seeds": ref_std, "diff": mean - ref_mean, "ci_low": lo, "ci_high": hi,
        "n_queries": len(vals), "p_value": float(p), **_record((vals - ref_vals) if hib else (ref_vals - vals)),
        "n_seeds": n_seeds,
    }


# ------------------------------------------------------------------------------------------
# what tuning bought (ltr-bench tuning-summary; the tuning itself: bench.selection.tuning)

DEFAULT_MARK = "+default"  # the default's rows in the summary's paired comparison


def _bought(chosen: pd.DataFrame, defaults: pd.DataFrame, method: str, seeds: list[int], metrics: list[str],
            n_boot: int, seed: int) -> dict[str, Any]:
    """Chosen minus default on the tuning fold (per metric: mean difference and paired bootstrap CI)."""
    mine = chosen[(chosen["method"] == method) & chosen["seed"].isin(seeds)]
    ref = defaults[defaults["method"] == method].assign(method=method + DEFAULT_MARK)
    if mine.empty or ref.empty:
        raise UsageError(f"no test rows of {method!r} on the tuning fold with seeds {seeds} (chosen: {len(mine)}, "
                         f"default: {len(ref)}); rebuild the evaluations")
    rows = versus(pd.concat([mine, ref], ignore_index=True), metrics, [method], [method + DEFAULT_MARK],
                  correction="none", n_boot=n_boot, seed=seed)
    out: dict[str, Any] = {}
    for row in rows.itertuples():
        out[f"test:{row.metric}"] = row.mean
        out[f"default:{row.metric}"] = row.ref_mean
        out[f"delta:{row.metric}"] = row.diff
        out[f"ci_low:{row.metric}"], out[f"ci_high:{row.metric}"] = row.ci_low, row.ci_high
    return out


def summarize(spec: dict[str, Any], *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The tuning summary of a table (module docstring) from ``spec``
    (:func:`bench.config.plan.tuning_summary_spec`): one row per (dataset, tuned method)."""
    rows = []
    for ds in spec["datasets"]:
        chosen, defaults = read_frames([ds["chosen"]]), read_frames([ds["defaults"]])
        for path in ds["records"]:
            record = read_record(path)
            (method, entry), = record["methods"].items()
            points = {p["name"]: p for p in entry["points"]}
            default = entry["points"][0]
            picked = points[entry["chosen"]]
            same = entry["chosen"] == default["name"]
            bought = {} if same else _bought(chosen, defaults, method, ds["seeds"], spec["metrics"], n_boot, seed)
            if same:  # the default chosen: the very same runs, nothing bought
                for metric in spec["metrics"]:
                    bought.update({f"delta:{metric}": 0.0, f"ci_low:{metric}": 0.0, f"ci_high:{metric}": 0.0})
            rows.append({
                "dataset": ds["dataset"], "fold": record["fold"], "method": method, "budget": record["budget"],
                "n_seeds": len(record["seeds"]), "metric": entry["metric"], "chosen": entry["chosen"],
                "chosen_label": entry["chosen_label"], "chosen_index": list(points).index(entry["chosen"]) + 1,
                "chosen_settings": json.dumps(picked["settings"], sort_keys=True),
                "vali_chosen": picked["mean"], "vali_default": default["mean"],
                "cpu_seconds": float(record["seconds"].get("cpu", 0.0)),
                "gpu_seconds": float(sum(v for k, v in record["seconds"].items() if k != "cpu")),
                "space": record["tuning"]["space_text"], **bought,
            })
    if not rows:
        raise UsageError("--spec: no tuned method on any dataset of the table")
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        if column.startswith(("delta:", "ci_low:", "ci_high:", "test:", "default:")):
            frame[column] = frame[column].astype(float)
    return frame


def _cli_summary(args) -> int:
    frame = summarize(parse_spec(args.spec), n_boot=args.n_boot, seed=args.seed)
    write_frame(frame, args.out)
    print(f"{args.out}: {len(frame)} tuned methods")
    return 0


# ------------------------------------------------------------------------------------------
# CLI


def load_per_query(inputs: Sequence[str]) -> pd.DataFrame:
    """Concatenate per-run ``metrics.parquet`` files given as paths or glob patterns."""
    paths: list[str] = []
    for pattern in inputs:
        found = sorted(_glob.glob(pattern)) if any(ch in pattern for ch in "*?[") else [pattern]
        if not found:
            raise UsageError(f"--inputs pattern {pattern!r} matches no file")
        paths.extend(found)
    frames = []
    for path in dict.fromkeys(paths):  # keep order, drop repeats
        if not Path(path).is_file():
            raise UsageError(f"--inputs file {path} does not exist")
        verify(path)  # its digest first: a changed byte is named as such, with the rebuild command
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for a broken file
            raise UsageError(f"{path}: cannot read as parquet ({exc})") from exc
        missing = [c for c in KEY_COLUMNS if c not in df.columns]
        if missing:
            raise UsageError(f"{path}: lacks columns {missing}; a run's metrics.parquet has the "
                           "evaluate frame plus dataset, fold, method, seed")
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def _cli_stats(args) -> int:
    per_query = load_per_query(args.inputs)
    metrics = args.metrics or [
        c for c in per_query.columns
        if c not in KEY_COLUMNS and c not in INFO_COLUMNS and is_metric_column(c)
    ]
    absent = [m for m in metrics if m not in per_query.columns]
    if absent:
        raise UsageError(f"--metrics {absent} not found in the inputs (they have "
                       f"{[c for c in per_query.columns if c not in KEY_COLUMNS]})")
    try:
        unknown = sorted(set(args.references) - set(per_query["method"]))
        if unknown:
            raise ValueError(f"--references {unknown} are not methods of the inputs")
        table = significance(per_query, metrics, test=args.test, correction=args.correction,
                             alpha=args.alpha, n_boot=args.n_boot, seed=args.seed, references=args.references)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    write_frame(table, args.out)
    print(f"ltr-bench stats: {len(table)} rows ({table['dataset'].nunique()} datasets, "
          f"{len(metrics)} metrics) -> {args.out}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench stats`` and ``tuning-summary``."""
    p = subparsers.add_parser("stats", help="paired significance tests of per-query metrics")
    p.add_argument("--inputs", nargs="+", required=True,
                   help="metrics.parquet files or glob patterns (quote them)")
    p.add_argument("--metrics", nargs="+", default=None,
                   help="metric columns to test (default: every metric column)")
    p.add_argument("--out", required=True, help="statistics parquet to write")
    p.add_argument("--test", choices=TESTS, default="t")
    p.add_argument("--correction", choices=CORRECTIONS, default="holm")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--n-boot", type=int, default=1000, dest="n_boot")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--references", nargs="+", default=[],
                   help="methods shown beside the tested family, never in it (never best, not corrected)")
    p.set_defaults(func=_cli_stats)
    s = subparsers.add_parser("tuning-summary", help="a tuned table's budgets, choices and what tuning bought")
    s.add_argument("--spec", required=True, help="JSON (bench.config.plan.tuning_summary_spec)")
    s.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of the CI of what tuning bought")
    s.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    s.add_argument("--out", required=True, help="results/tuning/<table>.parquet")
    s.set_defaults(func=_cli_summary)

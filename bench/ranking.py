r"""One ranking of methods across datasets and folds: mean ranks, the Friedman test, the Nemenyi
post-hoc test and the critical difference (Demšar, "Statistical comparisons of classifiers over
multiple data sets", JMLR 7, 2006, Sec. 3.2.2).

The paired tests of :mod:`bench.stats` compare methods on the test queries of one dataset. Whether
methods are distinguishable *across* datasets is another question: a metric's scale differs from
one dataset to the next, so means are not averaged across them; each dataset-fold ranks the
methods and the ranks are compared.

A **block** is one ``(dataset, fold)`` of the per-query frames (``ltr-bench evaluate``'s output for
a statistics table; a test-list-size variant ``<dataset>@Ltest=<L>`` is a dataset of its own). With
:math:`N` blocks and :math:`k` methods, for each metric:

1. **Block values.** Each seed's mean of the metric over the block's test queries, exactly as the
   statistics step averages them (:func:`bench.results.seed_means`: every method and seed on the
   same queries, a query dropped for any row dropped for every method, a pooled metric's weighted
   mean); then :math:`x_{bj}` = their mean over the seeds and :math:`s_{bj}` = their sample
   standard deviation (ddof 1; 0 with one seed), the seed-to-seed spread of method :math:`j` on
   block :math:`b`.
2. **Ranks.** In each block, :math:`r_{bj} = 1` is the best method: the largest :math:`x_{bj}`,
   the smallest for a lower-is-better metric (ARP; :func:`bench.metrics.higher_is_better`). Means
   equal to :data:`TIE_DECIMALS` decimals are ties and share the average of the ranks they span
   (``scipy.stats.rankdata(method="average")``).
3. **Mean ranks** :math:`R_j = \frac1N \sum_b r_{bj}`.
4. **Friedman test** of H0 "every method is equivalent" (``scipy.stats.friedmanchisquare``, which
   corrects for ties):

   .. math:: \chi^2_F = \frac{1}{C}\,\frac{12N}{k(k+1)}\Big[\sum_j R_j^2 - \frac{k(k+1)^2}{4}\Big],
             \qquad C = 1 - \frac{\sum_b \sum_{\text{ties}} (t^3 - t)}{N k (k^2 - 1)},

   ``df`` :math:`= k - 1`, :math:`p = P(\chi^2_{k-1} \ge \chi^2_F)`. Without ties :math:`C = 1`
   and this is Demšar's :math:`\chi^2_F`. When every block ties every method (a metric no method
   moves) the statistic is 0 and :math:`p = 1`.
5. **Nemenyi post-hoc test** of every pair (``scikit_posthocs.posthoc_nemenyi_friedman``):
   :math:`p_{ij} = P\big(Q_{k,\infty} \ge \sqrt2\,|R_i - R_j| / \sqrt{k(k+1)/(6N)}\big)`,
   :math:`Q` the studentized range (``scipy.stats.studentized_range``).
6. **Critical difference** :math:`CD = q_\alpha \sqrt{k(k+1)/(6N)}` with
   :math:`q_\alpha = Q^{-1}_{k,\infty}(1 - \alpha) / \sqrt2` (:func:`q_alpha`; Demšar's Table 5,
   e.g. 2.569 for :math:`k = 4` at :math:`\alpha = 0.05`), so that :math:`|R_i - R_j| > CD`
   exactly when :math:`p_{ij} < \alpha`.
7. **Marks** of each method:

   - ``is_best``: the smallest mean rank (equal mean ranks: the method listed first);
   - ``distinguishable``: the Friedman test rejects H0 (:math:`p < \alpha`; Demšar proceeds to the
     post-hoc test only then) and the method's Nemenyi p-value against the best is below
     :math:`\alpha` (:math:`|R_j - R_{best}| > CD`); a method that is not is "not distinguishable
     from the best";
   - ``within_seed_spread``: with :math:`m_j = \frac1N \sum_b x_{bj}` (the mean over blocks) and
     :math:`\bar s_j = \frac1N \sum_b s_{bj}` (the mean seed-to-seed standard deviation), the
     method differs from the best by less than the seed spread of either,
     :math:`|m_j - m_{best}| < \max(\bar s_j, \bar s_{best})`: another draw of seeds could as well
     swap them. Never with one seed (no spread is measured); the best is not marked.

With few blocks the test has little power: :math:`CD` shrinks as :math:`1/\sqrt N` and grows
with :math:`k`; with 3 blocks and 28 methods :math:`CD \approx 23` ranks, so hardly any pair can
differ. A method missing from a block is an error (the Friedman test needs complete blocks), as
are fewer than :data:`MIN_BLOCKS` blocks or :data:`MIN_METHODS` methods (``ConfigError`` naming the
config key that chose the table).

The result (:func:`ranking`) is one tidy frame, :data:`COLUMNS`, with three kinds of rows
(``part``): ``block`` (metric, dataset, fold, method: ``mean``, ``seed_std``, ``n_seeds``, ``rank``),
``method`` (metric, method: ``mean_rank``, ``position`` (1 = best), ``mean`` and ``seed_std`` over
blocks, the marks) and ``pair`` (metric, method, other: ``p_value``, ``delta_rank`` = rank of
``method`` minus rank of ``other``). Every row also carries its metric's test: ``n_blocks``,
``n_methods``, ``friedman_chi2``, ``friedman_df``, ``friedman_p``, ``friedman_rejects``, ``q_alpha``,
``cd``, ``alpha``, ``higher_is_better``.

CLI::

    ltr-bench ranking --inputs results/evaluated/unified_table/*/*.parquet \
        --spec '{"table": "unified_table", "metrics": ["ndcg@10"], "alpha": 0.05}' \
        --out results/tables/ranking_table.parquet
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench.config.plan import RANKING_KEY, RANKING_MIN_BLOCKS, RANKING_MIN_METHODS
from bench.errors import ConfigError, UsageError
from bench.metrics import higher_is_better as metric_direction
from bench.results import parse_spec, read_frames, seed_means, std_over_seeds, write_frame

#: the config key whose table is ranked (named by the errors of a design too small to rank)
CONFIG_KEY = f"{RANKING_KEY}.table"
#: block means equal to this many decimals are ties (float noise never breaks a tie)
TIE_DECIMALS = 12
#: the smallest design (the planning decision's: :data:`bench.config.plan.RANKING_MIN_BLOCKS`): the
#: Friedman test compares 3 or more methods (scipy refuses fewer) on 2 or more blocks
MIN_BLOCKS, MIN_METHODS = RANKING_MIN_BLOCKS, RANKING_MIN_METHODS
PARTS = ("block", "method", "pair")
COLUMNS = (
    "part", "metric", "dataset", "fold", "method", "other", "mean", "seed_std", "n_seeds", "rank", "mean_rank",
    "position", "is_best", "distinguishable", "within_seed_spread", "p_value", "delta_rank", "n_blocks",
    "n_methods", "friedman_chi2", "friedman_df", "friedman_p", "friedman_rejects", "q_alpha", "cd", "alpha",
    "higher_is_better",
)
_DTYPES = {"part": "string", "metric": "string", "dataset": "string", "fold": "string", "method": "string",
           "other": "string", "n_seeds": "Int64", "position": "Int64", "is_best": "boolean",
           "distinguishable": "boolean", "within_seed_spread": "boolean", "n_blocks": "Int64",
           "n_methods": "Int64", "friedman_df": "Int64", "friedman_rejects": "boolean",
           "higher_is_better": "boolean"}


# ------------------------------------------------------------------------------------------
# building blocks (each checked against Demšar's worked example in tests/test_ranking.py)


def q_alpha(k: int, alpha: float = 0.05) -> float:
    r"""Demšar's :math:`q_\alpha` for :math:`k` methods: the studentized range quantile
    :math:`Q^{-1}_{k,\infty}(1 - \alpha)` over :math:`\sqrt 2` (``scipy.stats.studentized_range``).

    >>> round(q_alpha(4), 3), round(q_alpha(10), 3)  # Demšar's Table 5: 2.569, 3.164
    (2.569, 3.164)
    """
    from scipy.stats import studentized_range

    if k < 2:
        raise ValueError(f"q_alpha needs at least 2 methods, got k={k}")
    return float(studentized_range.ppf(1.0 - alpha, k, np.inf)) / math.sqrt(2.0)


def critical_difference(k: int, n_blocks: int, alpha: float = 0.05) -> float:
    r""":math:`CD = q_\alpha \sqrt{k(k+1)/(6N)}`: two mean ranks further apart differ at level alpha.

    >>> round(critical_difference(4, 14), 2)  # Demšar's Sec. 3.2.2 example
    1.25
    """
    return q_alpha(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n_blocks))


def block_ranks(values: np.ndarray, *, higher_is_better: bool = True) -> np.ndarray:
    """Ranks of the methods (columns) in each block (row): 1 = best, ties averaged.

    >>> block_ranks(np.array([[0.5, 0.7, 0.5], [0.1, 0.2, 0.3]])).tolist()
    [[2.5, 1.0, 2.5], [3.0, 2.0, 1.0]]
    >>> block_ranks(np.array([[12.0, 10.0, 11.0]]), higher_is_better=False).tolist()  # ARP
    [[3.0, 1.0, 2.0]]
    """
    from scipy.stats import rankdata

    return rankdata(_oriented(values, higher_is_better), axis=1, method="average")


def _oriented(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Block values rounded to :data:`TIE_DECIMALS`, signed so that smaller is better."""
    rounded = np.round(np.asarray(values, dtype=np.float64), TIE_DECIMALS)
    return -rounded if higher_is_better else rounded


def friedman(values: np.ndarray, *, higher_is_better: bool = True) -> tuple[float, int, float]:
    """``(chi2, df, p)`` of the Friedman test on a blocks x methods matrix
    (``scipy.stats.friedmanchisquare``, tie-corrected); ``(0, k - 1, 1)`` when every block ties
    every method (scipy would divide 0 by 0).

    >>> chi2, df, p = friedman(np.array([[3, 2, 1], [3, 1, 2], [3, 2, 1]]))
    >>> round(chi2, 4), df, round(p, 4)
    (4.6667, 2, 0.097)
    """
    from scipy.stats import friedmanchisquare

    oriented = _oriented(values, higher_is_better)
    df = oriented.shape[1] - 1
    if np.all(oriented == oriented[:, :1]):
        return 0.0, df, 1.0
    result = friedmanchisquare(*oriented.T)
    return float(result.statistic), df, float(result.pvalue)


def nemenyi(values: np.ndarray, methods: Sequence[str], *, higher_is_better: bool = True) -> pd.DataFrame:
    """Nemenyi p-values of every pair of methods (``scikit_posthocs.posthoc_nemenyi_friedman``),
    a symmetric methods x methods frame with ones on the diagonal.

    >>> p = nemenyi(np.array([[3, 2, 1], [3, 1, 2], [3, 2, 1]]), ["a", "b", "c"])
    >>> round(float(p.loc["a", "c"]), 4), float(p.loc["b", "b"])
    (0.1025, 1.0)
    """
    import scikit_posthocs

    oriented = _oriented(values, higher_is_better)
    k = oriented.shape[1]
    with warnings.catch_warnings():  # all-tied blocks: a 0/0 the p-values do not use
        warnings.simplefilter("ignore", RuntimeWarning)
        p = scikit_posthocs.posthoc_nemenyi_friedman(oriented)  # a matrix: groups by column position
    values = p.loc[list(range(k)), list(range(k))].to_numpy(np.float64)
    return pd.DataFrame(values, index=list(methods), columns=list(methods))


# ------------------------------------------------------------------------------------------
# the ranking


def block_values(per_query: pd.DataFrame, metric: str, methods: Sequence[str]) -> pd.DataFrame:
    """Step 1: per block (dataset, fold) and method, ``mean`` and ``seed_std`` over the seeds of the
    per-seed means (:func:`bench.results.seed_means`) and ``n_seeds``, blocks in first-seen order.

    >>> pq = pd.DataFrame({"dataset": "d", "fold": "F1", "query": [0, 1] * 4, "seed": [0, 0, 1, 1] * 2,
    ...                    "method": ["a"] * 4 + ["b"] * 4, "mrr": [1, .5, .5, .5, 1, 1, 1, .5]})
    >>> block_values(pq, "mrr", ["a", "b"])[["method", "mean", "seed_std", "n_seeds"]].round(4)
      method   mean  seed_std  n_seeds
    0      a  0.625    0.1768        2
    1      b  0.875    0.1768        2
    """
    rows = []
    for (dataset, fold), block in per_query.groupby(["dataset", "fold"], sort=False):
        present = set(block["method"].unique())  # once per block: iterating the column is slow
        absent = [m for m in methods if m not in present]
        if absent:
            raise ValueError(f"block dataset {dataset!r} fold {fold!r}: no per-query rows of {absent}; "
                             "the Friedman test needs every method evaluated on every block")
        per_seed = seed_means(block, dataset, metric, methods)
        for method in methods:
            std, n_seeds = std_over_seeds(per_seed, method)
            rows.append({"dataset": str(dataset), "fold": str(fold), "method": method,
                         "mean": float(per_seed.loc[method].mean()), "seed_std": std, "n_seeds": n_seeds})
    return pd.DataFrame(rows, columns=["dataset", "fold", "method", "mean", "seed_std", "n_seeds"])


def check_size(n_blocks: int, n_methods: int, *, what: str = "", config_key: str = CONFIG_KEY) -> None:
    """A ``ConfigError`` naming ``config_key`` unless there are :data:`MIN_BLOCKS` blocks and
    :data:`MIN_METHODS` methods (``what``: which table's frames, for the message)."""
    of = f" {what}" if what else ""
    if n_blocks < MIN_BLOCKS:
        raise ConfigError(
            f"config key '{config_key}': ranking across datasets and folds needs at least {MIN_BLOCKS} "
            f"dataset-fold blocks, the table{of} has {n_blocks}; rank a table evaluated on more "
            "datasets or folds (its `datasets`, `folds`)")
    if n_methods < MIN_METHODS:
        raise ConfigError(
            f"config key '{config_key}': the Friedman test needs at least {MIN_METHODS} methods, the "
            f"table{of} has {n_methods}; with two, read the table's own paired tests")


def ranking(per_query: pd.DataFrame, metrics: Sequence[str], *, methods: Sequence[str] | None = None,
            alpha: float = 0.05, higher_is_better: dict[str, bool] | None = None,
            config_key: str = CONFIG_KEY, what: str = "") -> pd.DataFrame:
    """The ranking frame (:data:`COLUMNS`; every rule in the module docstring).

    ``methods``: the methods ranked, in order (equal mean ranks go to the first; default: as first
    seen); ``higher_is_better``: per metric, default :func:`bench.metrics.higher_is_better`.

    >>> pq = pd.DataFrame({"dataset": "d", "fold": ["F1"] * 3 + ["F2"] * 3, "seed": 0, "query": 0,
    ...                    "method": ["a", "b", "c"] * 2, "mrr": [1, .5, .2, 1, .2, .5]})
    >>> r = ranking(pq, ["mrr"])
    >>> r[r.part == "method"][["method", "mean_rank", "position", "is_best"]]
      method  mean_rank  position  is_best
    6      a        1.0         1     True
    7      b        2.5         2    False
    8      c        2.5         3    False
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie strictly between 0 and 1")
    missing = [c for c in ("dataset", "fold", "seed", "method", "query", *metrics) if c not in per_query.columns]
    if missing:
        raise ValueError(f"per-query frames lack columns {missing} (they have {list(per_query.columns)})")
    methods = list(pd.unique(per_query["method"])) if methods is None else list(methods)
    n_blocks = len(per_query[["dataset", "fold"]].drop_duplicates())
    check_size(n_blocks, len(methods), what=what, config_key=config_key)
    frames = []
    for metric in metrics:
        hib = metric_direction(metric) if higher_is_better is None else bool(higher_is_better[metric])
        frames.append(_one_metric(block_values(per_query, metric, methods), metric, methods, hib, alpha))
    out = pd.concat(frames, ignore_index=True)[list(COLUMNS)]
    return out.astype(_DTYPES)


def _one_metric(values: pd.DataFrame, metric: str, methods: list[str], hib: bool, alpha: float) -> pd.DataFrame:
    """Steps 2-7 for one metric from its block values."""
    wide = values.pivot_table(index=["dataset", "fold"], columns="method", values="mean", sort=False)[methods]
    matrix = wide.to_numpy(np.float64)
    n, k = matrix.shape
    ranks = pd.DataFrame(block_ranks(matrix, higher_is_better=hib), index=wide.index, columns=methods)
    mean_rank = ranks.mean(axis=0)
    chi2, df, p_friedman = friedman(matrix, higher_is_better=hib)
    p_pairs = nemenyi(matrix, methods, higher_is_better=hib)
    q, cd = q_alpha(k, alpha), critical_difference(k, n, alpha)
    rejects = bool(p_friedman < alpha)
    test = {"metric": metric, "n_blocks": n, "n_methods": k, "friedman_chi2": chi2, "friedman_df": df,
            "friedman_p": p_friedman, "friedman_rejects": rejects, "q_alpha": q, "cd": cd, "alpha": alpha,
            "higher_is_better": hib}
    order = sorted(methods, key=lambda m: (mean_rank[m], methods.index(m)))  # a tie: the first listed
    best = order[0]
    over = values.groupby("method", sort=False)[["mean", "seed_std"]].mean()
    seeds = values.groupby("method", sort=False)["n_seeds"].max()
    spread = max(over.loc[best, "seed_std"], 0.0)
    rows = [{"part": "block", **test, **rec, "rank": float(ranks.loc[(rec["dataset"], rec["fold"]), rec["method"]])}
            for rec in values.to_dict("records")]
    for position, method in enumerate(order, start=1):
        gap = abs(over.loc[method, "mean"] - over.loc[best, "mean"])
        rows.append({"part": "method", **test, "method": method, "mean_rank": float(mean_rank[method]),
                     "position": position, "mean": float(over.loc[method, "mean"]),
                     "seed_std": float(over.loc[method, "seed_std"]), "n_seeds": int(seeds[method]),
                     "is_best": method == best,
                     "distinguishable": bool(method != best and rejects and p_pairs.loc[method, best] < alpha),
                     "within_seed_spread": bool(method != best and gap < max(over.loc[method, "seed_std"], spread)),
                     "p_value": float(p_pairs.loc[method, best]),
                     "delta_rank": float(mean_rank[method] - mean_rank[best])})
    rows += [{"part": "pair", **test, "method": a, "other": b, "p_value": float(p_pairs.loc[a, b]),
              "delta_rank": float(mean_rank[a] - mean_rank[b])} for a in order for b in order if a != b]
    return pd.DataFrame(rows, columns=list(COLUMNS))


# ------------------------------------------------------------------------------------------
# CLI


def _cli_ranking(args) -> int:
    spec = parse_spec(args.spec)
    per_query = read_frames(args.inputs)  # digests checked
    metrics = list(spec.get("metrics") or [])
    if not metrics:
        raise UsageError("--spec: names no metrics to rank (\"metrics\": [...])")
    absent = [m for m in metrics if m not in per_query.columns]
    if absent:
        raise UsageError(f"--spec metrics {absent} are not columns of the --inputs frames")
    try:
        frame = ranking(per_query, metrics, methods=spec.get("methods"), alpha=float(spec.get("alpha", 0.05)),
                        config_key=spec.get("key", CONFIG_KEY),
                        what=f"{spec['table']}" if spec.get("table") else "")
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    write_frame(frame, args.out)
    tests = frame[frame.part == "method"].drop_duplicates("metric")
    for t in tests.itertuples():
        print(f"ltr-bench ranking: {t.metric}: {t.n_blocks} blocks x {t.n_methods} methods, Friedman chi2 = "
              f"{t.friedman_chi2:.3f} (df {t.friedman_df}), p = {t.friedman_p:.3g}, CD = {t.cd:.3f} at alpha {t.alpha}")
    print(f"ltr-bench ranking: {len(metrics)} metrics -> {args.out}")
    return 0


def register_cli(subparsers) -> None:
    """Add ``ltr-bench ranking``."""
    p = subparsers.add_parser("ranking", help="rank methods across datasets and folds: mean ranks, Friedman, "
                              "Nemenyi, critical difference (Demšar 2006)")
    p.add_argument("--inputs", nargs="+", required=True,
                   help="evaluated per-query parquet files (results/evaluated/<table>/<dataset>/<fold>.parquet)")
    p.add_argument("--spec", required=True,
                   help='JSON: {"metrics": [...], "alpha": 0.05, "methods": [...], "table": NAME, "key": CONFIG_KEY} '
                        "(built by the workflow: bench.config.plan.ranking_spec)")
    p.add_argument("--out", required=True, help="the ranking parquet to write (with its digest)")
    p.set_defaults(func=_cli_ranking)

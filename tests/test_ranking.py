"""Tests of ``bench.ranking``: Demšar's (2006) worked example and Table 5 as independent oracles,
the Nemenyi p-values against the critical difference, the direction of a metric, ties, dropped
queries and pooled weights averaged as the statistics step averages them, the seed spread, the
design checks and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from bench import ranking as R
from bench import stats as S
from bench.cli import main as cli_main
from bench.errors import ConfigError
from bench.results import read_frame, write_frame

# Demšar (2006), Sec. 3.2.2: four classifiers (C4.5 and three variants) on 14 data sets, rank
# sums 44, 28, 40.5, 27.5 (mean ranks 3.143, 2.000, 2.893, 1.964); the one row with a tie (2.5, 2.5)
# gives the half ranks. Each row is a permutation of the ranks 1..4 (1 = best).
DEMSAR_RANKS = np.array([
    [1, 3, 4, 2], [1, 3, 4, 2], [2, 3, 4, 1], [3, 1, 2, 4], [3, 2, 4, 1], [3, 2, 4, 1], [3, 2, 4, 1],
    [4, 1, 2, 3], [4, 1, 3, 2], [4, 2, 1, 3], [4, 2, 1, 3], [4, 2, 3, 1], [4, 3, 2, 1], [4, 1, 2.5, 2.5],
], dtype=float)
# Demšar's Table 5 (a): q_0.05 of the two-tailed Nemenyi test for k = 2..10 classifiers
DEMSAR_Q05 = {2: 1.960, 3: 2.343, 4: 2.569, 5: 2.728, 6: 2.850, 7: 2.949, 8: 3.031, 9: 3.102, 10: 3.164}


def _frame(block_values: dict[tuple[str, str], dict[str, list[float]]], metric: str = "ndcg@10",
           seeds: int = 1) -> pd.DataFrame:
    """Per-query rows: ``block_values[(dataset, fold)][method]`` = one value per query, the same
    for every seed unless ``seeds`` lists per-seed offsets."""
    rows = []
    for (dataset, fold), methods in block_values.items():
        for method, values in methods.items():
            for seed in range(seeds):
                rows.append(pd.DataFrame({"dataset": dataset, "fold": fold, "seed": seed, "method": method,
                                          "query": np.arange(len(values)), metric: np.asarray(values, float),
                                          f"{metric}:dropped": False}))
    return pd.concat(rows, ignore_index=True)


def _demsar_frame() -> pd.DataFrame:
    """Demšar's rank matrix as per-query frames: one query per data set, value = 5 - rank (higher is better)."""
    methods = ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"]
    return _frame({(f"data{i}", "Fold1"): {m: [5.0 - r] for m, r in zip(methods, row)}
                   for i, row in enumerate(DEMSAR_RANKS)})


def _methods(table: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    rows = table[table["part"] == "method"]
    if metric is not None:
        rows = rows[rows["metric"] == metric]
    return rows.set_index("method")


# ------------------------------------------------------------------------------------------ oracles


def test_demsar_worked_example_mean_ranks_friedman_statistic_and_critical_difference():
    """Mean ranks 3.143, 2.000, 2.893, 1.964; chi2_F = 9.28; CD = 1.25 at alpha = 0.05 (q = 2.569).
    Demšar's chi2_F has no tie correction; scipy's (which the ranking reports) divides it by
    C = 1 - sum(t^3 - t) / (N k (k^2 - 1)), here one tie of two: C = 1 - 6/840."""
    assert DEMSAR_RANKS.sum(axis=0).tolist() == [44, 28, 40.5, 27.5]
    table = R.ranking(_demsar_frame(), ["ndcg@10"])
    rows = _methods(table)
    assert rows["mean_rank"].round(3).to_dict() == {"C4.5": 3.143, "C4.5+m": 2.0, "C4.5+cf": 2.893, "C4.5+m+cf": 1.964}
    n, k = DEMSAR_RANKS.shape
    chi2 = float(rows["friedman_chi2"].iloc[0])
    tie_correction = 1 - 6 / (n * k * (k * k - 1))
    assert round(chi2 * tie_correction, 2) == 9.28
    mean_ranks = DEMSAR_RANKS.mean(axis=0)  # Demšar's eq. for chi2_F, by hand
    assert round(12 * n / (k * (k + 1)) * (np.sum(mean_ranks**2) - k * (k + 1) ** 2 / 4), 2) == 9.28
    assert chi2 == pytest.approx(sps.friedmanchisquare(*DEMSAR_RANKS.T).statistic, rel=1e-12)
    assert int(rows["friedman_df"].iloc[0]) == 3 and int(rows["n_blocks"].iloc[0]) == 14
    assert round(float(rows["cd"].iloc[0]), 2) == 1.25 and round(float(rows["q_alpha"].iloc[0]), 3) == 2.569
    # Demšar: C4.5+m+cf (1.964) and C4.5+m (2.000) differ from C4.5 (3.143) by more than CD? 1.179, 1.143: no
    assert rows.loc["C4.5+m+cf", "is_best"] and not rows["distinguishable"].any()


@pytest.mark.parametrize(("k", "printed"), sorted(DEMSAR_Q05.items()))
def test_q_alpha_equals_demsars_table_5(k, printed):
    """Demšar prints q_0.05 to three decimals; the exact quantile lies within one unit of the last
    digit (k = 3 and k = 7: 2.3437 and 2.9483 against the printed 2.343 and 2.949)."""
    assert R.q_alpha(k, 0.05) == pytest.approx(printed, abs=1e-3)
    assert R.critical_difference(k, 14, 0.05) == pytest.approx(R.q_alpha(k) * math.sqrt(k * (k + 1) / 84))


def test_nemenyi_p_values_agree_with_the_critical_difference(rng):
    """|R_i - R_j| > CD exactly when p_ij < alpha, for every pair of several random designs."""
    for n, k, alpha in ((10, 6, 0.05), (25, 8, 0.1), (5, 12, 0.05), (40, 4, 0.01)):
        values = rng.normal(size=(n, k)) + np.linspace(0, 2.5, k)
        methods = [f"m{j}" for j in range(k)]
        p = R.nemenyi(values, methods)
        mean_ranks = R.block_ranks(values).mean(axis=0)
        cd = R.critical_difference(k, n, alpha)
        q = np.sqrt(2) * np.abs(mean_ranks[:, None] - mean_ranks[None, :]) / np.sqrt(k * (k + 1) / (6 * n))
        assert np.allclose(p.to_numpy()[~np.eye(k, dtype=bool)], sps.studentized_range.sf(q, k, np.inf)[~np.eye(k, dtype=bool)])
        for i in range(k):
            for j in range(i + 1, k):
                gap = abs(mean_ranks[i] - mean_ranks[j])
                if abs(gap - cd) > 1e-9:
                    assert (gap > cd) == (p.iloc[i, j] < alpha), (n, k, i, j, gap, cd, p.iloc[i, j])


def test_a_clear_winner_is_distinguishable_and_the_marks_follow_the_p_values(rng):
    values = {(f"d{b}", "F1"): {"good": [0.9 + 0.01 * b], "mid": [0.5], "bad": [0.1], "worse": [0.05]}
              for b in range(12)}
    table = R.ranking(_frame(values), ["ndcg@10"], alpha=0.05)
    rows = _methods(table)
    assert bool(rows["friedman_rejects"].iloc[0])
    assert rows.loc["good", "is_best"] and rows.loc["good", "position"] == 1
    assert list(rows.sort_values("position").index) == ["good", "mid", "bad", "worse"]
    assert rows["distinguishable"].to_dict() == {m: bool(p < 0.05) and m != "good"
                                                for m, p in rows["p_value"].items()}
    assert rows.loc["worse", "distinguishable"] and not rows.loc["mid", "distinguishable"]
    pairs = table[(table["part"] == "pair")]
    assert len(pairs) == 4 * 3 and set(pairs["method"]) == set(pairs["other"])


# ------------------------------------------------------------------------------------------ rules


def test_arp_is_ranked_lower_is_better():
    values = {("d", f"F{i}"): {"a": [10.0 + i], "b": [12.0 + i], "c": [14.0 + i]} for i in range(3)}
    table = R.ranking(_frame(values, "arp"), ["arp"])
    rows = _methods(table)
    assert rows["mean_rank"].to_dict() == {"a": 1.0, "b": 2.0, "c": 3.0} and rows.loc["a", "is_best"]
    assert not bool(rows["higher_is_better"].iloc[0])
    same = R.ranking(_frame(values, "ndcg@10"), ["ndcg@10"])  # the same numbers as a gain: reversed
    assert _methods(same)["mean_rank"].to_dict() == {"a": 3.0, "b": 2.0, "c": 1.0}


def test_ties_share_the_average_rank_and_float_noise_is_a_tie():
    values = {("d", f"F{i}"): {"a": [0.5], "b": [0.5 + 1e-15], "c": [0.2]} for i in range(2)}
    table = R.ranking(_frame(values), ["ndcg@10"])
    blocks = table[table["part"] == "block"]
    assert blocks.set_index(["fold", "method"])["rank"].to_dict() == {
        ("F0", "a"): 1.5, ("F0", "b"): 1.5, ("F0", "c"): 3.0, ("F1", "a"): 1.5, ("F1", "b"): 1.5, ("F1", "c"): 3.0}
    assert _methods(table).loc["a", "is_best"]  # equal mean ranks: the method listed first


def test_a_metric_no_method_moves_has_chi2_zero_and_p_one():
    values = {("d", f"F{i}"): {"a": [0.3], "b": [0.3], "c": [0.3]} for i in range(3)}
    rows = _methods(R.ranking(_frame(values, "rbp_residual@0.8"), ["rbp_residual@0.8"]))
    assert float(rows["friedman_chi2"].iloc[0]) == 0.0 and float(rows["friedman_p"].iloc[0]) == 1.0
    assert not rows["distinguishable"].any() and (rows["mean_rank"] == 2.0).all()


def test_block_means_are_the_statistics_steps_means_dropped_queries_excluded(rng):
    """A block's mean is :func:`bench.stats.significance`'s mean of that dataset and fold: a query
    dropped by any row is excluded for every method and seed."""
    n = 30
    rows = []
    for fold in ("F1", "F2"):
        dropped = rng.random(n) < 0.2
        for method in ("a", "b", "c"):
            for seed in (0, 1, 2):
                frame = pd.DataFrame({"dataset": "d", "fold": fold, "seed": seed, "method": method,
                                      "query": np.arange(n), "mrr": rng.random(n), "mrr:dropped": False})
                frame.loc[dropped, "mrr:dropped"] = method == "b"  # one method marks them: dropped for all
                rows.append(frame)
    pq = pd.concat(rows, ignore_index=True)
    blocks = R.ranking(pq, ["mrr"]).query("part == 'block'").set_index(["fold", "method"])
    for fold in ("F1", "F2"):
        one = pq[pq["fold"] == fold]
        stats = S.significance(one, ["mrr"], n_boot=0).set_index("method")
        for method in ("a", "b", "c"):
            assert blocks.loc[(fold, method), "mean"] == pytest.approx(stats.loc[method, "mean"], rel=1e-12)
            assert blocks.loc[(fold, method), "seed_std"] == pytest.approx(stats.loc[method, "std_over_seeds"],
                                                                          rel=1e-12)
            kept = one[(one["method"] == method) & ~one["query"].isin(
                one.loc[one["mrr:dropped"], "query"])]
            per_seed = kept.groupby("seed")["mrr"].mean()
            assert blocks.loc[(fold, method), "mean"] == pytest.approx(per_seed.mean(), rel=1e-12)
            assert blocks.loc[(fold, method), "seed_std"] == pytest.approx(per_seed.std(ddof=1), rel=1e-12)
            assert blocks.loc[(fold, method), "n_seeds"] == 3


def test_a_pooled_metric_is_averaged_with_its_weights(rng):
    """TF-Ranking's OPA: each seed's block mean is sum(w v) / sum(w), as the statistics step pools it."""
    n = 20
    w = rng.integers(1, 30, n).astype(float)
    rows = []
    for fold in ("F1", "F2"):
        for method in ("a", "b", "c"):
            for seed in (0, 1):
                rows.append(pd.DataFrame({"dataset": "d", "fold": fold, "seed": seed, "method": method,
                                          "query": np.arange(n), "opa": rng.random(n), "opa:weight": w,
                                          "opa:dropped": False}))
    pq = pd.concat(rows, ignore_index=True)
    blocks = R.ranking(pq, ["opa"]).query("part == 'block'").set_index(["fold", "method"])
    for (fold, method), group in pq.groupby(["fold", "method"]):
        per_seed = group.groupby("seed").apply(lambda g: np.sum(g["opa"] * g["opa:weight"]) / g["opa:weight"].sum())
        assert blocks.loc[(fold, method), "mean"] == pytest.approx(per_seed.mean(), rel=1e-12)
        stats = S.significance(pq[pq["fold"] == fold], ["opa"], n_boot=0).set_index("method")
        assert blocks.loc[(fold, method), "mean"] == pytest.approx(stats.loc[method, "mean"], rel=1e-12)


def test_within_seed_spread_compares_the_mean_over_blocks_with_the_seed_std():
    """b differs from the best by 0.01 with a seed std of 0.05: within the spread; c by 0.3: not."""
    rows = []
    for fold in ("F1", "F2", "F3"):
        for method, base in (("a", 0.80), ("b", 0.79), ("c", 0.50)):
            for seed, offset in ((0, -0.05), (1, 0.0), (2, 0.05)):
                rows.append(pd.DataFrame({"dataset": "d", "fold": fold, "seed": seed, "method": method,
                                          "query": [0], "mrr": [base + offset]}))
    rows_ = _methods(R.ranking(pd.concat(rows, ignore_index=True), ["mrr"]))
    assert rows_["seed_std"].round(6).to_dict() == {"a": 0.05, "b": 0.05, "c": 0.05}
    assert rows_["within_seed_spread"].to_dict() == {"a": False, "b": True, "c": False}
    one_seed = pd.concat(rows, ignore_index=True).query("seed == 1")
    assert not _methods(R.ranking(one_seed, ["mrr"]))["within_seed_spread"].any()  # no spread measured


# ------------------------------------------------------------------------------------------ errors


def test_too_few_blocks_or_methods_is_a_config_error_naming_the_key():
    one_block = _frame({("d", "F1"): {"a": [0.5], "b": [0.4], "c": [0.3]}})
    with pytest.raises(ConfigError, match=r"computed_tables\.ranking_table\.table.*at least 2 dataset-fold blocks"):
        R.ranking(one_block, ["ndcg@10"])
    two_methods = _frame({("d", f"F{i}"): {"a": [0.5], "b": [0.4]} for i in range(3)})
    with pytest.raises(ConfigError, match=r"computed_tables\.ranking_table\.table.*at least 3 methods"):
        R.ranking(two_methods, ["ndcg@10"])


def test_a_method_missing_from_a_block_is_refused():
    frame = _frame({("d", "F1"): {"a": [0.5], "b": [0.4], "c": [0.3]}, ("d", "F2"): {"a": [0.5], "b": [0.4]}})
    with pytest.raises(ValueError, match=r"fold 'F2'.*\['c'\].*every method evaluated on every block"):
        R.ranking(frame, ["ndcg@10"], methods=["a", "b", "c"])


# ------------------------------------------------------------------------------------------ CLI


def test_cli_writes_a_digest_checked_parquet(tmp_path):
    inputs = []
    frame = _demsar_frame()
    for (dataset, fold), block in frame.groupby(["dataset", "fold"]):
        path = tmp_path / "evaluated" / dataset / f"{fold}.parquet"
        write_frame(block, path)
        inputs.append(str(path))
    out = tmp_path / "tables" / "ranking_table.parquet"
    spec = {"table": "t", "metrics": ["ndcg@10"], "alpha": 0.05, "methods": ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"]}
    assert cli_main(["ranking", "--inputs", *inputs, "--spec", json.dumps(spec), "--out", str(out)]) == 0
    table = read_frame(out)  # checks the sidecar digest
    assert (out.parent / "ranking_table.parquet.digest").exists()
    assert list(table.columns) == list(R.COLUMNS) and set(table["part"]) == set(R.PARTS)
    assert round(float(_methods(table)["cd"].iloc[0]), 2) == 1.25
    # a design too small: one line naming the key, exit status 2
    assert cli_main(["ranking", "--inputs", inputs[0], "--spec", json.dumps(spec), "--out", str(out)]) == 2
    bad = {**spec, "metrics": ["mrr"]}
    assert cli_main(["ranking", "--inputs", *inputs, "--spec", json.dumps(bad), "--out", str(out)]) == 2


def test_cli_error_names_the_config_key(tmp_path, capsys):
    path = tmp_path / "one.parquet"
    write_frame(_frame({("d", "F1"): {"a": [0.5], "b": [0.4], "c": [0.3]}}), path)
    spec = {"table": "unified_table", "metrics": ["ndcg@10"], "key": "computed_tables.ranking_table.table"}
    assert cli_main(["ranking", "--inputs", str(path), "--spec", json.dumps(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ltr-bench ranking: error: config key "
                                               "'computed_tables.ranking_table.table'")
    assert "the table unified_table has 1" in err[0]

"""Tests of ``bench.stats``: p-values equal scipy's, Holm by hand, known "not worse" sets,
the permutation test against full enumeration, seed/fold aggregation and the CLI."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from bench import stats as S
from bench.choices import TESTS
from bench.cli import main as cli_main


def _table(values: dict[str, np.ndarray], metric="ndcg@10", dataset="d", folds=None, seeds=(0,),
           noise=0.0, rng=None, dropped=None):
    """Tidy per-query rows: ``values[method]`` holds one value per query (per seed + noise)."""
    rows = []
    for method, vals in values.items():
        n = len(vals)
        fold = folds if folds is not None else np.zeros(n, dtype=int)
        for s in seeds:
            v = vals + (rng.normal(scale=noise, size=n) if noise else 0.0)
            df = pd.DataFrame({"dataset": dataset, "fold": fold, "seed": s, "method": method,
                               "query": np.arange(n), metric: v})
            if dropped is not None:
                df[metric + ":dropped"] = dropped
            rows.append(df)
    return pd.concat(rows, ignore_index=True)


def test_t_and_wilcoxon_p_values_equal_scipy(rng):
    a = rng.normal(0.6, 0.1, 80)
    b = a - rng.normal(0.02, 0.05, 80)
    c = a - rng.normal(0.05, 0.05, 80)
    pq = _table({"a": a, "b": b, "c": c})
    for test, fn in [("t", sps.ttest_rel), ("wilcoxon", sps.wilcoxon)]:
        out = S.significance(pq, ["ndcg@10"], test=test, correction="none").set_index("method")
        assert out.loc["a", "is_best"]
        for m, v in [("b", b), ("c", c)]:
            ref = fn(a, v, alternative="greater").pvalue
            assert out.loc[m, "p_value"] == pytest.approx(ref, rel=1e-12, abs=1e-300)
            assert out.loc[m, "p_adjusted"] == out.loc[m, "p_value"]  # correction none


def test_arp_direction_uses_less(rng):
    a = rng.uniform(5, 20, 60)
    b = a + rng.normal(0.5, 1.0, 60)  # larger ARP = worse
    pq = _table({"b": b, "a": a}, metric="arp")
    out = S.significance(pq, ["arp"]).set_index("method")
    assert out.loc["a", "is_best"] and not out.loc["b", "is_best"]
    assert out.loc["b", "p_value"] == pytest.approx(
        sps.ttest_rel(a, b, alternative="less").pvalue, rel=1e-12)
    assert out.loc["b", "ci_low"] > 0  # method - best: positive for a worse ARP


def test_holm_by_hand():
    p = [0.01, 0.04, 0.03, 0.20]
    # sorted 0.01, 0.03, 0.04, 0.20 -> x4, x3, x2, x1 = 0.04, 0.09, 0.08, 0.20
    # running max -> 0.04, 0.09, 0.09, 0.20
    np.testing.assert_allclose(S.holm(p), [0.04, 0.09, 0.09, 0.20], atol=1e-15)
    np.testing.assert_allclose(S.holm([0.5, 0.9]), [1.0, 1.0])
    assert S.holm([]).size == 0


def test_holm_applied_over_other_methods(rng):
    a = rng.normal(0.6, 0.1, 50)
    others = {f"m{i}": a - rng.normal(0.01 * i, 0.05, 50) for i in range(1, 5)}
    pq = _table({"a": a, **others})
    out = S.significance(pq, ["ndcg@10"]).set_index("method")
    raw = [sps.ttest_rel(a, v, alternative="greater").pvalue for v in others.values()]
    np.testing.assert_allclose(out.loc[list(others), "p_adjusted"], S.holm(raw), rtol=1e-12)


def test_not_worse_set_on_constructed_data(rng):
    n = 300
    base = rng.uniform(0.2, 0.9, n)
    pq = _table({
        "best": base + 0.05,
        "twin": base + 0.05 + rng.choice([-1e-3, 1e-3], n),  # same up to symmetric noise
        "worse": base,
        "much_worse": base - 0.2,
    })
    out = S.significance(pq, ["ndcg@10"]).set_index("method")
    assert set(out.index[out["not_worse"]]) == {"best", "twin"}
    assert out["is_best"].sum() == 1 and out.index[out["is_best"]][0] in {"best", "twin"}
    assert not out.loc["worse", "not_worse"] and not out.loc["much_worse", "not_worse"]
    assert out.loc["much_worse", "losses"] == n and out.loc["much_worse", "wins"] == 0
    assert out.loc["worse", "ci_high"] < 0
    assert out.loc["twin", "ci_low"] < 0 < out.loc["twin", "ci_high"]


def test_identical_and_single_methods_give_p_one(rng):
    a = rng.normal(0.5, 0.1, 40)
    out = S.significance(_table({"x": a, "y": a.copy()}), ["ndcg@10"]).set_index("method")
    assert out.loc["x", "is_best"]  # equal means: first listed wins
    assert out.loc["y", "p_value"] == 1.0 and out.loc["y", "p_adjusted"] == 1.0
    assert out.loc["y", "not_worse"] and out.loc["y", "ties"] == 40
    assert (out.loc["y", "ci_low"], out.loc["y", "ci_high"]) == (0.0, 0.0)
    for test in TESTS:
        assert S.paired_test(a, a, test=test) == 1.0
    single = S.significance(_table({"only": a}), ["ndcg@10"])
    assert len(single) == 1 and single["is_best"][0] and single["p_value"][0] == 1.0
    assert not single.drop(columns=["ci_low", "ci_high"]).isna().any().any()


def test_permutation_exact_and_converging_to_enumeration(rng):
    d = rng.normal(0.3, 1.0, 14)
    signs = np.array(list(itertools.product((1, -1), repeat=len(d))))
    exact = np.mean(signs @ d >= d.sum() - 1e-12)
    # 2^14 = 16384 <= n_permutations: full enumeration, equal to ours to float precision
    assert S.permutation_test(d, n_permutations=20_000) == pytest.approx(exact, abs=1e-15)
    # fewer random flips: converges to the exact value (binomial sd ~ 0.0015 at 50k)
    approx = S.permutation_test(d, n_permutations=50_000, seed=3)
    assert abs(approx - exact) < 0.01
    small = S.permutation_test(d, n_permutations=500, seed=3)
    assert abs(small - exact) < 0.1 and small >= 1 / 501
    # through significance(): same numbers as the stand-alone test
    a = rng.normal(0.5, 0.1, 12)
    pq = _table({"a": a + 0.05, "b": a + rng.normal(0, 0.05, 12)})
    out = S.significance(pq, ["ndcg@10"], test="permutation").set_index("method")
    other = "b" if out.loc["a", "is_best"] else "a"
    best = "a" if other == "b" else "b"
    values = {m: pq[pq.method == m]["ndcg@10"].to_numpy() for m in (best, other)}
    diff = values[best] - values[other]
    signs12 = np.array(list(itertools.product((1, -1), repeat=12)))
    assert out.loc[other, "p_value"] == pytest.approx(np.mean(signs12 @ diff >= diff.sum() - 1e-12))


def test_seed_and_fold_aggregation(rng):
    # two folds reusing query ids 0..9: keyed by (fold, query), so 20 paired queries
    n = 10
    rows = []
    truth = {}
    for method, shift in [("a", 0.1), ("b", 0.0)]:
        for fold in ["f1", "f2"]:
            for seed in [0, 1, 2]:
                v = rng.uniform(0, 1, n) + shift
                truth[(method, fold, seed)] = v
                rows.append(pd.DataFrame({"dataset": "d", "fold": fold, "seed": seed,
                                          "method": method, "query": np.arange(n), "mrr": v}))
    pq = pd.concat(rows, ignore_index=True).sample(frac=1.0, random_state=1)  # order-free
    out = S.significance(pq, ["mrr"], correction="none").set_index("method")
    per_query = {m: np.concatenate([np.mean([truth[(m, f, s)] for s in range(3)], axis=0)
                                    for f in ["f1", "f2"]]) for m in "ab"}
    per_seed = {m: [np.mean(np.concatenate([truth[(m, f, s)] for f in ["f1", "f2"]]))
                    for s in range(3)] for m in "ab"}
    for m in "ab":
        assert out.loc[m, "n_queries"] == 2 * n and out.loc[m, "n_seeds"] == 3
        assert out.loc[m, "mean"] == pytest.approx(per_query[m].mean(), abs=1e-12)
        assert out.loc[m, "std_over_seeds"] == pytest.approx(np.std(per_seed[m], ddof=1), abs=1e-12)
    best, other = ("a", "b") if out.loc["a", "is_best"] else ("b", "a")
    assert out.loc[other, "p_value"] == pytest.approx(
        sps.ttest_rel(per_query[best], per_query[other], alternative="greater").pvalue, rel=1e-10)


def test_dropped_queries_excluded_for_every_method(rng):
    n = 30
    a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    pq = _table({"a": a, "b": b}, metric="opa", dropped=np.zeros(n, dtype=bool))
    # one method's row marks query 3 dropped, and the value there is garbage
    sel = (pq.method == "b") & (pq["query"] == 3)
    pq.loc[sel, "opa:dropped"] = True
    pq.loc[sel, "opa"] = 0.0
    out = S.significance(pq, ["opa"], correction="none").set_index("method")
    keep = np.arange(n) != 3
    assert (out["n_queries"] == n - 1).all()
    assert out.loc["a", "mean"] == pytest.approx(a[keep].mean())
    assert out.loc["b", "mean"] == pytest.approx(b[keep].mean())


def test_missing_queries_and_seeds_raise_with_names(rng):
    pq = _table({"a": rng.uniform(size=20), "b": rng.uniform(size=20)})
    broken = pq[~((pq.method == "b") & pq["query"].isin([4, 7]))]
    with pytest.raises(ValueError, match=r"method 'b' lacks 2 of the 20.*query 4.*query 7"):
        S.significance(broken, ["ndcg@10"])
    seeds = _table({"a": rng.uniform(size=5)}, seeds=(0, 1))
    seeds = seeds[~((seeds.seed == 1) & (seeds["query"] == 2))]
    with pytest.raises(ValueError, match=r"method 'a' seed 1 lacks queries \(fold 0, query 2\)"):
        S.significance(seeds, ["ndcg@10"])
    with pytest.raises(ValueError, match="duplicate rows"):
        S.significance(pd.concat([pq, pq.iloc[:1]]), ["ndcg@10"])
    with pytest.raises(ValueError, match="lacks columns"):
        S.significance(pq.drop(columns="seed"), ["ndcg@10"])
    with pytest.raises(ValueError, match="test="):
        S.significance(pq, ["ndcg@10"], test="z")


def test_bootstrap_is_seeded_and_matches_scipy(rng):
    a, b = rng.normal(0.5, 0.1, 100), rng.normal(0.45, 0.1, 100)
    one = S.bootstrap_ci(b, a, n_boot=500, seed=7)
    assert one == S.bootstrap_ci(b, a, n_boot=500, seed=7)
    ref = sps.bootstrap((b, a), lambda x, y, axis: np.mean(x - y, axis=axis), paired=True,
                        vectorized=True, n_resamples=500, method="percentile",
                        random_state=np.random.default_rng(7)).confidence_interval
    assert one == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert one[0] < np.mean(b - a) < one[1]
    assert all(np.isnan(S.bootstrap_ci(b, a, n_boot=0)))


def test_cli_writes_table_atomically(tmp_path, rng):
    n = 25
    a = rng.uniform(size=n)
    for method, vals in [("a", a + 0.1), ("b", a)]:
        run = tmp_path / "runs" / method / "seed0"
        run.mkdir(parents=True)
        pd.DataFrame({"query": np.arange(n), "mrr": vals, "mrr:dropped": False,
                      "dataset": "d", "fold": "fold1", "method": method, "seed": 0}
                     ).to_parquet(run / "metrics.parquet")
    out = tmp_path / "stats" / "t.parquet"
    rc = cli_main(["stats", "--inputs", str(tmp_path / "runs/*/seed*/metrics.parquet"),
                   "--metrics", "mrr", "--out", str(out), "--n-boot", "200"])
    assert rc == 0 and out.exists()
    table = pd.read_parquet(out)
    assert list(table.columns) == list(S.RESULT_COLUMNS)
    assert table.set_index("method").loc["a", "is_best"]
    assert not list(out.parent.glob(".*tmp"))  # no temporary left behind
    rc = cli_main(["stats", "--inputs", str(tmp_path / "nothing*.parquet"), "--out", str(out)])
    assert rc == 2


def _pooled(values: dict[str, np.ndarray], weights: np.ndarray, seeds=(0,), metric="opa", noise=None):
    frame = _table(values, metric=metric, seeds=seeds)
    frame[metric + ":weight"] = np.tile(weights, len(values) * len(seeds))
    if noise is not None:  # per-seed values differ, weights do not
        frame[metric] = frame[metric] + noise
    return frame


def test_a_pooled_metric_is_tested_as_a_weighted_mean(rng):
    """TF-Ranking's OPA: the mean is sum(w v) / sum(w); the tests act on the units w v / mean(w),
    whose plain mean is that pooled value; the bootstrap recomputes the ratio on each resample."""
    n = 60
    w = rng.integers(1, 40, n).astype(float)  # pairs per query
    a = rng.uniform(0.5, 0.9, n)
    b = np.clip(a - rng.normal(0.03, 0.05, n), 0, 1)
    out = S.significance(_pooled({"a": a, "b": b}, w), ["opa"], n_boot=400).set_index("method")
    assert out.loc["a", "mean"] == pytest.approx(np.sum(w * a) / np.sum(w), rel=1e-12)
    assert out.loc["b", "mean"] == pytest.approx(np.sum(w * b) / np.sum(w), rel=1e-12)
    units = w / w.mean()
    assert np.mean(units * a) == pytest.approx(out.loc["a", "mean"], rel=1e-12)
    ref = sps.ttest_rel(units * a, units * b, alternative="greater").pvalue
    assert out.loc["b", "p_value"] == pytest.approx(ref, rel=1e-12)
    # the CI brackets the pooled difference and comes from the weighted statistic
    pooled_diff = out.loc["b", "mean"] - out.loc["a", "mean"]
    assert out.loc["b", "ci_low"] < pooled_diff < out.loc["b", "ci_high"]
    lo, hi = S.bootstrap_ci(b, a, n_boot=400, weights=w, seed=0)
    boot = sps.bootstrap((b, a, w), lambda x, y, v, axis: np.sum(v * (x - y), axis=axis) / np.sum(v, axis=axis),
                         paired=True, vectorized=True, n_resamples=400, method="percentile",
                         random_state=np.random.default_rng(0))
    assert (lo, hi) == pytest.approx((boot.confidence_interval.low, boot.confidence_interval.high), rel=1e-12)
    # unit weights: exactly the unweighted table
    plain = S.significance(_table({"a": a, "b": b}, metric="opa"), ["opa"], n_boot=200)
    unit = S.significance(_pooled({"a": a, "b": b}, np.ones(n)), ["opa"], n_boot=200)
    pd.testing.assert_frame_equal(plain, unit, check_exact=False, rtol=1e-12)


def test_a_pooled_metrics_seed_means_and_the_permutation_test_are_weighted(rng):
    n = 8
    w = np.array([1.0, 30.0, 2.0, 1.0, 25.0, 3.0, 1.0, 2.0])
    a = rng.uniform(0.4, 0.9, n)
    b = rng.uniform(0.4, 0.9, n)
    noise = np.concatenate([np.zeros(n), np.full(n, 0.05), np.zeros(2 * n)])  # rows a0, a1, b0, b1: a's seed 1 +0.05
    frame = _pooled({"a": a, "b": b}, w, seeds=(0, 1), noise=noise)
    out = S.significance(frame, ["opa"], test="permutation").set_index("method")
    seed_means = [np.sum(w * a) / np.sum(w), np.sum(w * (a + 0.05)) / np.sum(w)]
    assert out.loc["a", "std_over_seeds"] == pytest.approx(np.std(seed_means, ddof=1), rel=1e-12)
    best, other = ("a", "b") if out.loc["a", "is_best"] else ("b", "a")
    va, vb = a + 0.025, b  # seed means
    vals = {"a": va, "b": vb}
    diff = (vals[best] - vals[other]) * w / w.mean()
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    exact = np.mean(flips @ diff >= diff.sum() - 1e-9 * np.abs(diff).sum())
    assert out.loc[other, "p_value"] == pytest.approx(exact, abs=1e-12)


def test_pooling_weights_must_agree_across_methods():
    frame = _pooled({"a": np.array([0.5, 0.6, 0.7]), "b": np.array([0.4, 0.6, 0.8])}, np.array([2.0, 3.0, 4.0]))
    frame.loc[(frame.method == "b") & (frame["query"] == 1), "opa:weight"] = 5.0
    with pytest.raises(ValueError, match=r"pooling weight \(opa:weight\) differs.*query 1"):
        S.significance(frame, ["opa"])


# ----------------------------------------------------------------------------- versus (the compare page)


def test_two_sided_test_equals_scipy_and_is_symmetric(rng):
    a = rng.normal(0.6, 0.1, 80)
    b = a - rng.normal(0.02, 0.05, 80)
    for test, fn in [("t", sps.ttest_rel), ("wilcoxon", sps.wilcoxon)]:
        ref = fn(a, b, alternative="two-sided").pvalue
        assert S.two_sided_test(a, b, test=test) == pytest.approx(ref, rel=1e-12)
        assert S.two_sided_test(b, a, test=test) == pytest.approx(ref, rel=1e-12)
    # the exact sign-flip test: two-sided by enumeration of all 2^n flips, |T*| >= |T|
    d = rng.normal(0.1, 0.3, 12)
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=12))) @ d
    exact = np.mean(np.abs(flips) >= abs(d.sum()) - 1e-9)
    assert S.two_sided_test(d, np.zeros(12), test="permutation") == pytest.approx(exact, rel=1e-12)
    assert S.two_sided_test(a, a) == 1.0


def test_versus_against_a_brute_force_oracle(rng):
    """Every number of a versus row recomputed by hand: means, std over seeds, difference,
    two-sided p (scipy), Holm over the references of one method, CI (scipy's bootstrap), W/T/L."""
    n = 60
    base = rng.uniform(0, 1, n)
    values = {"new": base + 0.05, "a": base + rng.normal(0, 0.05, n), "b": base - 0.1, "c": base.copy()}
    values["c"][:10] += 0.05  # ties with new on 10 queries
    pq = _table(values, seeds=(0, 1), noise=0.01, rng=rng)
    out = S.versus(pq, ["ndcg@10"], ["new"], ["a", "b", "c"], n_boot=500, seed=3).set_index("reference")
    wide = pq.groupby(["query", "method"])["ndcg@10"].mean().unstack()
    per_seed = pq.groupby(["method", "seed"])["ndcg@10"].mean()
    raw = {r: sps.ttest_rel(wide["new"], wide[r]).pvalue for r in "abc"}
    order = sorted(raw, key=raw.get)
    holm, running = {}, 0.0
    for i, r in enumerate(order):
        running = max(running, min(1.0, (3 - i) * raw[r]))
        holm[r] = running
    for r in "abc":
        row = out.loc[r]
        assert row["mean"] == pytest.approx(wide["new"].mean(), rel=1e-12)
        assert row["ref_mean"] == pytest.approx(wide[r].mean(), rel=1e-12)
        assert row["diff"] == pytest.approx(wide["new"].mean() - wide[r].mean(), rel=1e-12)
        assert row["ref_std_over_seeds"] == pytest.approx(per_seed.loc[r].std(ddof=1), rel=1e-12)
        assert row["p_value"] == pytest.approx(raw[r], rel=1e-10)
        assert row["p_adjusted"] == pytest.approx(holm[r], rel=1e-10)
        assert row["significant"] == (holm[r] < 0.05)
        d = wide["new"] - wide[r]
        assert (row["wins"], row["ties"], row["losses"]) == ((d > 1e-12).sum(), (d.abs() <= 1e-12).sum(),
                                                            (d < -1e-12).sum())
        ref_ci = sps.bootstrap((wide["new"].to_numpy(), wide[r].to_numpy()), lambda x, y, axis: np.mean(x - y, axis=axis),
                               paired=True, vectorized=True, n_resamples=500, method="percentile",
                               random_state=np.random.default_rng(S.derive_seed("bootstrap", 3, "d", "ndcg@10", "new", r)))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(
            (ref_ci.confidence_interval.low, ref_ci.confidence_interval.high), rel=1e-12)
    assert out.loc["b", "significant"] and out.loc["b", "diff"] > 0


def test_versus_orients_wins_by_the_metric_direction(rng):
    a = rng.uniform(5, 20, 40)
    pq = _table({"new": a - 1.0, "old": a}, metric="arp")  # smaller ARP: new is better on every query
    row = S.versus(pq, ["arp"], ["new"], ["old"], n_boot=0).iloc[0]
    assert row["diff"] == pytest.approx(-1.0) and (row["wins"], row["ties"], row["losses"]) == (40, 0, 0)
    with pytest.raises(ValueError, match=r"no per-query rows of \['gone'\]"):
        S.versus(pq, ["arp"], ["new"], ["gone"])


def test_versus_without_references_tests_each_pair_once_with_holm_over_the_pairs(rng):
    n = 50
    base = rng.uniform(0, 1, n)
    values = {"x": base + 0.03 + rng.normal(0, 0.02, n), "y": base + rng.normal(0, 0.05, n), "z": base}
    out = S.versus(_table(values), ["ndcg@10"], ["x", "y", "z"], n_boot=0)
    assert list(zip(out.method, out.reference)) == [("x", "y"), ("x", "z"), ("y", "z")]
    wide = pd.DataFrame(values)
    raw = [sps.ttest_rel(wide[m], wide[r]).pvalue for m, r in [("x", "y"), ("x", "z"), ("y", "z")]]
    assert out.p_adjusted.to_numpy() == pytest.approx(S.holm(raw), rel=1e-10)


def test_versus_treats_a_pooled_metric_as_significance_does(rng):
    """Oracle: the pooled means by hand, the two-sided t-test (scipy) on the per-query units w v / mean(w)."""
    n = 50
    w = rng.integers(1, 20, n).astype(float)
    a, b = rng.uniform(0.4, 0.9, n), rng.uniform(0.3, 0.9, n)
    row = S.versus(_pooled({"new": a, "old": b}, w), ["opa"], ["new"], ["old"], n_boot=0).iloc[0]
    assert row["mean"] == pytest.approx(np.sum(w * a) / w.sum(), rel=1e-12)
    assert row["diff"] == pytest.approx(np.sum(w * (a - b)) / w.sum(), rel=1e-12)
    units = w / w.mean()
    assert row["p_value"] == pytest.approx(sps.ttest_rel(a * units, b * units).pvalue, rel=1e-10)

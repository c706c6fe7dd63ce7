"""The quality-cost figure's table and drawing (bench/report/quality_cost.py) on constructed inputs.

Oracles: the Pareto front against its definition checked pair by pair; the seed interval
against scipy's t interval computed from the per-seed means of a per-query frame that went
through the real statistics step; the run records as written.
"""

from __future__ import annotations

import itertools

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from bench.report.quality_cost import COLUMNS, pareto_front, quality_cost_figure, quality_cost_table, seed_interval
from bench.results import RUN_JSON_KEYS, write_record, write_run
from bench.stats import significance


@pytest.mark.parametrize("higher", [True, False])
def test_pareto_front_is_the_set_of_points_no_other_point_dominates(higher):
    rng = np.random.default_rng(0)
    for _ in range(50):
        cost = rng.choice([0.5, 1.0, 2.0, 4.0, np.nan], size=9)
        quality = rng.choice([0.1, 0.2, 0.3, np.nan], size=9)
        got = pareto_front(cost, quality, higher_is_better=higher)
        better = (lambda a, b: a > b) if higher else (lambda a, b: a < b)
        for i in range(9):
            if np.isnan(cost[i]) or np.isnan(quality[i]):
                assert not got[i]
                continue
            dominated = any(j != i and not np.isnan(cost[j]) and not np.isnan(quality[j]) and cost[j] <= cost[i]
                            and (quality[j] == quality[i] or better(quality[j], quality[i]))
                            and (cost[j] < cost[i] or better(quality[j], quality[i])) for j in range(9))
            assert got[i] == (not dominated)


def _per_query(n_seeds: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for method, level in (("a", 0.6), ("b", 0.7), ("c", 0.5)):
        for seed, q in itertools.product(range(n_seeds), range(30)):
            rows.append({"dataset": "ds", "fold": "Fold1", "seed": seed, "method": method, "query": q,
                         "ndcg@10": float(np.clip(level + 0.05 * seed * (method == "b") + rng.normal(0, 0.1), 0, 1)),
                         "ndcg@10:dropped": q == 7})  # one query dropped for every method
    return pd.DataFrame(rows)


def _run(path, method, seconds_per_epoch, host, cuda):
    info = dict.fromkeys(RUN_JSON_KEYS, None)
    info.update(method=method, device="cuda" if cuda else "cpu", device_name="Test device",
                seconds_per_epoch=seconds_per_epoch,
                peak_memory={"host_max_rss_bytes": host, "cuda_max_allocated_bytes": cuda})
    write_run(path, scores=np.zeros(1), metrics=pd.DataFrame({"q": [0]}), curve=pd.DataFrame({"epoch": [1]}),
              run_info=info)
    return {"method": method, "seed": 0, "dir": str(path)}


def _spec(runs):
    return {"table": "t", "dataset": "ds", "metric": "ndcg@10", "runs": runs,
            "methods": [{"name": "a", "label": "A", "kind": "neural"}, {"name": "b", "label": "B", "kind": "neural"},
                        {"name": "c", "label": "C", "kind": "gbdt"}]}


def test_the_table_gives_the_statistics_mean_a_t_interval_over_seeds_and_the_runs_records(tmp_path):
    per_query = _per_query(3)
    stats = significance(per_query, ["ndcg@10"], n_boot=0)
    runs = [_run(tmp_path / "a0", "a", 2.0, 2e9, None), _run(tmp_path / "a1", "a", 4.0, 3e9, None),
            _run(tmp_path / "b0", "b", 10.0, 1e9, None), _run(tmp_path / "c0", "c", 0.5, 5e9, None)]
    table = quality_cost_table(stats, _spec(runs))
    assert list(table.columns) == list(COLUMNS)
    kept = per_query[per_query["query"] != 7]
    for method in "abc":
        seed_means = kept[kept.method == method].groupby("seed")["ndcg@10"].mean().to_numpy()
        low, high = sps.t.interval(0.95, len(seed_means) - 1, loc=seed_means.mean(), scale=sps.sem(seed_means))
        row = table.set_index("method").loc[method]
        assert row["mean"] == pytest.approx(seed_means.mean(), rel=1e-12)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-10)
        assert row["n_seeds"] == 3
    by = table.set_index("method")
    assert by.loc["a", "seconds_per_epoch"] == 3.0 and by.loc["a", "memory_gb"] == 3.0  # mean time, largest memory
    assert set(table["memory"]) == {"host"} and by.loc["a", "device"] == "cpu: Test device"
    # b is the best and slowest, c the fastest and worst: both on the time front, a too (between them)
    assert by["front_time"].to_dict() == {"a": True, "b": True, "c": True}
    assert by["front_memory"].to_dict() == {"a": False, "b": True, "c": False}  # b: least memory and best


def test_gpu_records_are_used_when_any_run_has_one_and_the_others_leave_that_panel(tmp_path):
    stats = significance(_per_query(2), ["ndcg@10"], n_boot=0)
    runs = [_run(tmp_path / "a0", "a", 2.0, 2e9, 4e8), _run(tmp_path / "b0", "b", 3.0, 1e9, 6e8),
            _run(tmp_path / "c0", "c", None, 5e9, None)]
    table = quality_cost_table(stats, _spec(runs)).set_index("method")
    assert set(table["memory"]) == {"gpu"}
    assert table.loc["a", "memory_gb"] == pytest.approx(0.4) and np.isnan(table.loc["c", "memory_gb"])
    assert np.isnan(table.loc["c", "seconds_per_epoch"]) and not table.loc["c", "front_time"]


def test_a_method_selected_on_validation_is_costed_by_its_chosen_points_runs(tmp_path):
    stats = significance(_per_query(1), ["ndcg@10"], n_boot=0)
    runs = [{**_run(tmp_path / "a1", "a", 1.0, 1e9, None), "point": "a+x=1"},
            {**_run(tmp_path / "a2", "a", 9.0, 9e9, None), "point": "a+x=2"},
            _run(tmp_path / "b", "b", 2.0, 2e9, None), _run(tmp_path / "c", "c", 3.0, 3e9, None)]
    record = {"methods": {"a": {"chosen": "a+x=2", "points": [{"name": "a+x=1", "dirs": [str(tmp_path / "a1")]},
                                                              {"name": "a+x=2", "dirs": [str(tmp_path / "a2")]}]}}}
    write_record(record, tmp_path / "selection.json")
    table = quality_cost_table(stats, {**_spec(runs), "selection": [str(tmp_path / "selection.json")]})
    assert table.set_index("method").loc["a", ["seconds_per_epoch", "memory_gb"]].tolist() == [9.0, 9.0]


def test_one_seed_has_no_interval_and_a_missing_method_is_named(tmp_path):
    assert all(np.isnan(seed_interval(0.5, 0.0, 1)))
    stats = significance(_per_query(1), ["ndcg@10"], n_boot=0)
    runs = [_run(tmp_path / m, m, 1.0, 1e9, None) for m in "abc"]
    assert quality_cost_table(stats, _spec(runs))["ci_low"].isna().all()
    with pytest.raises(ValueError, match=r"lack ndcg@10 on ds for \['c'\]"):
        quality_cost_table(stats[stats.method != "c"], _spec(runs))


def test_the_figure_has_two_log_cost_panels_sharing_the_quality_axis_and_marks_the_fronts(tmp_path):
    stats = significance(_per_query(3), ["ndcg@10"], n_boot=0)
    runs = [_run(tmp_path / "a0", "a", 2.0, 2e9, None), _run(tmp_path / "b0", "b", 10.0, 1e9, None),
            _run(tmp_path / "c0", "c", 0.5, 5e9, None)]
    table = quality_cost_table(stats, _spec(runs))
    fig = quality_cost_figure(table, {"metric": "ndcg@10", "dataset_label": "DS", "table": "t", "profile": "test"})
    ax_t, ax_m = fig.axes
    assert ax_t.get_xscale() == ax_m.get_xscale() == "log"
    assert ax_t.get_shared_y_axes().joined(ax_t, ax_m)
    assert "95% CI over 3 seeds" in ax_t.get_ylabel() and "max RSS" in ax_m.get_xlabel()
    fronts = [line for line in ax_t.get_lines() if line.get_label().startswith("Pareto front")]
    assert len(fronts) == 1 and list(fronts[0].get_xdata()) == [0.5, 2.0, 10.0]
    assert [t.get_text() for t in fig.texts] == ["1  A", "2  B", "3  C"]  # the key of the numbered points
    assert [t.get_text() for t in ax_t.texts] == ["1", "2", "3"]
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match="lacks columns"):
        quality_cost_figure(table.drop(columns=["front_time"]), {"metric": "ndcg@10"})

"""Computed tables (bench.report.computed) from constructed inputs: the NeuralSort toy sort, the
dataset statistics of prepared folds, and the runs' time and memory records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.curves import neuralsort_toy_data
from bench.report import computed as C
from bench.report.paper import PAPER_NUMBERS, load_paper_numbers
from bench.report.tables import to_markdown
from bench.results import RUN_JSON_KEYS, write_frame, write_run
from helpers import make_prepared


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def test_the_suites_neuralsort_gives_neuralndcg_table1_to_the_printed_digits():
    """Every quasi-sorted label of the paper's Table 1, at the precision it is printed with."""
    ours = neuralsort_toy_data([0.01, 0.1, 1.0])
    paper = load_paper_numbers()
    paper = paper[(paper.table == "neuralndcg_table1") & (paper.metric != "sum")]
    typed = yaml.load(PAPER_NUMBERS.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    rows = typed["neuralndcg_table1"]["blocks"][0]["rows"]
    checked = 0
    for key, texts in rows.items():
        tau = 0.0 if key == "exact" else float(key)
        mine = ours[ours.tau == tau].sort_values("rank").value.to_numpy()
        for value, text in zip(mine, texts[:6]):
            assert round(float(value), _decimals(text)) == pytest.approx(float(text), abs=1e-12), (key, text, value)
            checked += 1
    assert checked == 24 and len(paper) == 24


def test_toy_sort_table_sets_the_paper_row_under_ours(tmp_path):
    path = tmp_path / "toy.parquet"
    write_frame(neuralsort_toy_data([0.01, 0.1, 1.0]), path)
    spec = {"name": "neuralndcg_table1", "kind": "toy_sort", "title": "T1", "source": "NeuralNDCG Table 1",
            "paper": "neuralndcg_table1"}
    md = to_markdown(C.build([str(path)], spec, load_paper_numbers()))
    assert "| tau = 1 (ours) | 3.3892826 |" in md
    assert "| tau = 1 (paper) | 3.3893 | 2.982 |" in md and "| 10.388 |" in md
    assert "| lim tau -> 0 (exact sort) (ours) | 4 | 4 | 3 | 2 | 1 | 0 | 14 | 0.00e+00 |" in md


def test_dataset_table_counts_queries_documents_and_empty_queries_of_each_split(tmp_path):
    fold = make_prepared(tmp_path / "ds" / "Fold1", empty_fraction=0.25)
    meta = json.loads((fold / "meta.json").read_text())
    counts = C.fold_counts(str(fold))
    for split in C.SPLITS:
        assert counts["queries"][split] == meta["splits"][split]["n_queries"]
        assert counts["documents"][split] == meta["splits"][split]["n_docs"]
        assert counts["empty"][split] == meta["splits"][split]["n_empty_queries"]
    assert sum(counts["empty"].values()) > 0 and counts["features"] == meta["n_features"]
    paper = pd.DataFrame({"table": "t2", "role": "r", "method": "printed",
                          "metric": ["features", "queries_train_vali", "empty_queries"],
                          "printed": [8.0, 60.0, 3.0], "source": "Paper, Table 2"})
    spec = {"name": "t2", "kind": "datasets", "title": "T2", "source": "NeuralNDCG Table 2", "profile": "test",
            "paper": "t2", "datasets": [{"name": "ds", "label": "DS", "role": "r", "folds": [str(fold)]}]}
    table = C.build([str(fold)], spec, paper)
    main, beside = table.blocks
    assert [c.text for c in main.rows[0][:5]] == ["DS", "Fold1", str(meta["n_features"]),
                                                  *[str(meta["splits"][s]["n_queries"]) for s in ("train", "vali")]]
    train_vali = counts["queries"]["train"] + counts["queries"]["vali"]
    assert [[c.text for c in row] for row in beside.rows] == [
        ["features", "8", str(counts["features"]), f"{counts['features'] - 8:+d}"],
        ["queries in training (train + vali splits)", "60", str(train_vali), f"{train_vali - 60:+d}"],
        ["empty queries (all splits)", "3", str(sum(counts["empty"].values())),
         f"{sum(counts['empty'].values()) - 3:+d}"]]
    assert "Paper, Table 2" in table.caption


def _fake_run(path, method, seconds, host, cuda):
    info = dict.fromkeys(RUN_JSON_KEYS, None)
    info.update(method=method, device="cuda" if cuda else "cpu", device_name="Test device",
                peak_memory={"host_max_rss_bytes": host, "cuda_max_allocated_bytes": cuda})
    curve = pd.DataFrame({"epoch": range(len(seconds)), "seconds": seconds})
    write_run(path, scores=np.zeros(1), metrics=pd.DataFrame({"q": [0]}), curve=curve, run_info=info)
    return {"method": method, "seed": 0, "dir": str(path)}


def test_run_cost_table_reads_seconds_per_epoch_and_peak_memory_from_the_runs(tmp_path):
    runs = [_fake_run(tmp_path / "a0", "a", [2.0, 4.0], 2e9, None), _fake_run(tmp_path / "a1", "a", [3.0], 3e9, None),
            _fake_run(tmp_path / "b0", "b", [6.0, 6.0], 1e9, None)]
    spec = {"name": "t9", "kind": "run_costs", "title": "T9", "source": "ARF Table 9", "profile": "test",
            "paper": "t9", "role": "r", "label": "DS", "runs": runs, "batch_size": 16, "list_size": None,
            "methods": [{"name": "a", "label": "A"}, {"name": "b", "label": "B"}]}
    paper = pd.DataFrame({"table": "t9", "role": "r", "method": ["a", "a", "b", "b"],
                          "metric": ["seconds_per_epoch", "gpu_memory_gb"] * 2, "printed": [200.0, 1.18, 220.0, 1.68],
                          "source": "Paper, Table 9"})
    table = C.build([], spec, paper)
    rows = [[c.text for c in row] for row in table.blocks[0].rows]
    # a: mean of the per-run means (3.0, 3.0); host peak: the larger run's; no GPU: '–'
    assert rows == [["A", "3.00", "1.00", "1.5", "3.00", "–", "200", "1.00", "1.18"],
                    ["B", "6.00", "2.00", "2", "1.00", "–", "220", "1.10", "1.68"]]
    assert "Device: cpu: Test device" in table.caption and "batch size of 20,000" in table.caption


def test_arf_sensitivity_tables_show_the_paper_column_in_the_paper_profile():
    from bench.config import plan
    from bench.config import validate as cv
    from bench.report.tables import build_table
    from helpers import ROOT

    cfg = cv.load_config(ROOT / "config" / "paper.yaml")
    spec = plan.table_spec(cfg, "arf_table7")
    methods = [m["name"] for m in spec["methods"]]
    stats = pd.DataFrame([{"dataset": ds, "metric": metric, "method": m, "mean": 0.5, "std_over_seeds": 0.0,
                           "n_queries": 10, "is_best": False, "not_worse": False}
                          for ds in ("mslr-web30k-arf", "istella-arf") for metric in spec["metrics"] for m in methods])
    md = to_markdown(build_table(stats, spec, load_paper_numbers()))
    assert md.count(" paper (Δ) |") == 2 * 3 and "| tau=0.2 | 0.5000 ± 0.0000 | 0.4250 (+0.0750) |" in md

"""PiRank Fig. 13 and SinkProp Fig. 2 (bench.report.paper_figures) from constructed tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.report import paper_figures as PF
from bench.results import RUN_JSON_KEYS, write_frame, write_run


def _legend(fig):
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_letor_curves_draw_the_published_baselines_of_a_cited_collection_only(tmp_path):
    rows = []
    for ds in ("td2003", "mq2007"):
        for q in range(4):
            rows.append({"dataset": ds, "fold": "Fold1", "seed": 0, "method": "sinkprop", "query": q,
                         **{f"ndcg@{k}": (q + k) / 20 for k in range(1, 11)}})
    write_frame(pd.DataFrame(rows), tmp_path / "e.parquet")
    spec = {"metrics": [f"ndcg@{k}" for k in range(1, 11)], "paper": "letor_published",
            "datasets": [{"name": "td2003", "label": "TD2003", "role": "td2003"},
                         {"name": "mq2007", "label": "MQ2007", "role": "mq2007"}],
            "methods": [{"name": "sinkprop", "label": "SinkProp"}]}
    data = PF.letor_curve_data(pd.DataFrame(rows), spec)
    assert data[(data.dataset == "td2003") & (data.k == 10)].value.item() == np.mean([(q + 10) / 20 for q in range(4)])
    fig = PF.letor_curves(spec, [str(tmp_path / "e.parquet")])
    td, mq = (ax for ax in fig.axes if ax.get_visible())
    assert [t.get_text() for t in td.get_legend().get_texts()] == [
        "SinkProp", "AdaRank (LETOR published)", "ListNet (LETOR published)", "Regression (LETOR published)"]
    # the book's MQ2007 table has no Regression row
    assert [t.get_text() for t in mq.get_legend().get_texts()] == [
        "SinkProp", "AdaRank (LETOR published)", "ListNet (LETOR published)"]
    assert "Table 11.1" in td.get_title()


def test_annealing_figure_highlights_the_annealed_and_high_tau_runs(tmp_path):
    runs = []
    for label, tau in (("tau=1", [np.nan] * 3), ("annealed", [10.0, 1.0, 0.1]), ("tau=1e12", [np.nan] * 3)):
        info = dict.fromkeys(RUN_JSON_KEYS, None)
        curve = pd.DataFrame({"epoch": [0, 1, 2], "tau": tau, "vali_ndcg@10": [0.1, 0.2, 0.3], "seconds": 1.0})
        write_run(tmp_path / label, scores=np.zeros(1), metrics=pd.DataFrame({"q": [0]}), curve=curve, run_info=info)
        runs.append([label, [str(tmp_path / label)]])
    spec = {"runs": runs, "metric": "ndcg@10", "annealed": "annealed", "high_tau": "tau=1e12",
            "taus": {"tau=1": 1.0, "annealed": None, "tau=1e12": 1e12}}
    fig = PF.annealing_figure(spec, [])
    left, right = fig.axes
    colors = {line.get_label(): line.get_color() for line in left.get_lines()}
    assert colors["annealed"] == PF.ANNEALED_COLOR and colors["tau=1e12"] == PF.HIGH_TAU_COLOR
    taus = {line.get_label(): list(line.get_ydata()) for line in right.get_lines()}
    assert taus == {"tau=1": [1.0] * 3, "annealed": [10.0, 1.0, 0.1], "tau=1e12": [1e12] * 3}

"""bench.report.selection: the selection table and the caption sentence, from hand-made records."""

from __future__ import annotations

import pandas as pd

from bench.report.selection import caption_sentence, selection_table
from bench.report.tables import build_table, to_html, to_latex, to_markdown


def md_tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of ``text`` as rows of stripped cells, the separator row dropped."""
    tables: list[list[list[str]]] = [[]]
    for line in text.splitlines():
        if line.startswith("|"):
            tables[-1].append([c.strip() for c in line.strip()[1:-1].split("|")])
        elif tables[-1]:
            tables.append([])
    return [[row for row in t if not set("".join(row)) <= set("-:")] for t in tables if t]  # no "|" in cells here


def record(dataset, fold, chosen, means, seeds=(0, 1)):
    """A select record of method ``arf`` over tau x lr with the given per-point means."""
    points = []
    for (tau, lr), mean in zip([(0.2, 0.01), (0.2, 0.001), (0.8, 0.01), (0.8, 0.001)], means):
        name = f"arf+tau={tau}+lr={lr}"
        points.append({"name": name, "label": f"tau = {tau}, lr = {lr}", "settings": {"params.tau": tau, "train.lr": lr},
                       "run": "arf_tau0.8" if (tau, lr) == (0.8, 0.001) else name, "dirs": [f"r/{name}/seed{s}" for s in seeds],
                       "values": [mean - 0.25, mean + 0.25][:len(seeds)] if len(seeds) == 2 else [mean], "mean": mean})
    pick = points[chosen]
    return {"table": "arf_table2", "dataset": dataset, "fold": fold, "seeds": list(seeds),
            "methods": {"arf": {"metric": "recall_arf@30@15", "higher_is_better": True, "chosen": pick["name"],
                                "chosen_label": pick["label"], "chosen_settings": pick["settings"], "points": points}}}


SPEC = {"name": "arf_table2_selection", "table": "arf_table2", "profile": "default", "title": "ARF Table 2: selected",
        "source": "ARF (Wang et al. 2024) Table 2",
        "datasets": [{"name": "syn-web", "label": "syn-web", "role": None, "stands_for": ["mslr-web30k", "istella"]},
                     {"name": "ist", "label": "Istella", "role": "istella", "stands_for": []}],
        "methods": [{"name": "arf", "label": "ARF", "keys": ["params.tau", "train.lr"],
                     "paper": {"mslr-web30k": {"params.tau": 0.8}, "istella": {"params.tau": 0.6}}}]}


def test_every_point_with_its_validation_mean_the_chosen_one_and_the_papers_marked():
    records = [record("syn-web", "Fold1", 2, [0.5, 0.625, 0.75, 0.625]), record("ist", "Fold1", 1, [0.5, 0.75, 0.25, 0.5])]
    table = selection_table(records, SPEC)
    text = to_markdown(table)
    first, second = md_tables(text)
    assert first[0] == ["tau", "lr", "validation Recall@30@15 (ARF)", "per seed", "runs", "chosen",
                        "paper (mslr-web30k)", "paper (istella)"]
    assert first[1:] == [  # the points in grid order
        ["0.2", "0.01", "0.5000", "0.2500 / 0.7500", "own", "", "", ""],
        ["0.2", "0.001", "0.6250", "0.3750 / 0.8750", "own", "", "", ""],
        ["0.8", "0.01", "**0.7500**", "0.5000 / 1.0000", "own", "**✓**", "✓", ""],
        ["0.8", "0.001", "0.6250", "0.3750 / 0.8750", "arf_tau0.8", "", "✓", ""]]
    # a real dataset gets its own role's column only; the paper's tau 0.6 is not in the grid
    assert second[0][-1] == "paper (istella)" and [r[5] for r in second[1:]] == ["", "**✓**", "", ""]
    assert "#### ARF on Istella: validation Recall@30@15 (ARF), mean over 2 seeds; chosen tau = 0.2, lr = 0.001; " \
           "the paper's on istella: tau = 0.6 (not in this grid)" in text
    assert "#### ARF on syn-web: validation Recall@30@15 (ARF), mean over 2 seeds; chosen tau = 0.8, lr = 0.01; " \
           "the paper's on mslr-web30k: tau = 0.8; the paper's on istella: tau = 0.6 (not in this grid)" in text
    assert "Synthetic stand-ins replace the paper's datasets" in table.caption and "never read" in table.caption
    assert "ARF on syn-web" in to_html(table) and r"\toprule" in to_latex(table)


def test_the_caption_names_the_chosen_points_per_dataset_and_per_fold_where_they_differ():
    spec = {"methods": [{"name": "arf", "label": "ARF"}, {"name": "x", "label": "X"}],
            "datasets": [{"name": "syn-web", "label": "syn-web"}, {"name": "l", "label": "LETOR"}]}
    one = caption_sentence([record("syn-web", "Fold1", 2, [0.5, 0.625, 0.75, 0.625])], spec)
    # the search is asymmetric (X trained at one setting), and the caption says so
    asymmetric = (" The table's 1 other method trained at one setting each, as the paper's protocol does: an "
                  "asymmetric search, so compare them with the selected ones with care (the unified table tunes every "
                  "method with the same budget).")
    assert one == ("Selected on validation (mean over seeds of each run's kept validation value): "
                   "ARF: tau = 0.8, lr = 0.01 (syn-web, by Recall@30@15 (ARF))." + asymmetric)
    folds = caption_sentence([record("l", "Fold1", 0, [0.75, 0.5, 0.5, 0.5]), record("l", "Fold2", 3, [0.5, 0.5, 0.5, 0.75]),
                              record("l", "Fold3", 0, [0.75, 0.5, 0.5, 0.5])], spec)
    assert folds.endswith("ARF: tau = 0.2, lr = 0.01 (LETOR Fold1, LETOR Fold3, by Recall@30@15 (ARF)); "
                          "tau = 0.8, lr = 0.001 (LETOR Fold2, by Recall@30@15 (ARF))." + asymmetric)
    assert caption_sentence([], spec) == ""


def test_a_tables_caption_carries_the_sentence():
    stats = pd.DataFrame({"dataset": ["d"], "metric": ["mrr"], "method": ["arf"], "mean": [0.5],
                          "std_over_seeds": [0.0], "n_queries": [3], "is_best": [True], "not_worse": [False]})
    spec = {"name": "t", "datasets": [{"name": "d"}], "methods": [{"name": "arf", "label": "ARF"}],
            "metrics": ["mrr"], "seeds": [0]}
    plain = build_table(stats, spec).caption
    selected = build_table(stats, {**spec, "selected": "Selected on validation: ARF: tau = 1."}).caption
    assert "Selected on validation" not in plain and "Selected on validation: ARF: tau = 1." in selected
    assert selected.replace("Selected on validation: ARF: tau = 1. ", "") == plain  # only the sentence added

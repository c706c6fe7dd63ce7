"""LETOR's published baselines: the transcription against its stored source, and the table.

The oracle for the transcription is the stored copy of each cited page: its table cells, one
per line, in tests/fixtures/published/ (a file per page, headed by the page's address). Every
number of ``letor_published`` in bench/report/paper_numbers.yaml is compared, *as typed* (the
YAML read with floats kept as their text, so ``0.320`` is not ``0.32``), with the cell at its
row and column there; every row of a cited table is transcribed and no row is invented.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.config import plan
from bench.config import validate as cv
from bench.report import tables as T
from bench.report.paper import PAPER_NUMBERS, load_paper_numbers
from helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "published"
HEADER = {"NDCG@1": "ndcg@1", "NDCG@3": "ndcg@3", "NDCG@10": "ndcg@10", "P@1": "precision@1",
          "P@3": "precision@3", "P@10": "precision@10", "MAP": "map"}


class _Typed(yaml.SafeLoader):
    """YAML floats kept as the text typed in the file."""


_Typed.add_constructor("tag:yaml.org,2002:float", lambda loader, node: loader.construct_scalar(node))


def _stored_table(path: Path) -> dict:
    """url, table, caption, columns and rows (name -> cell texts) of a stored page's table."""
    lines = path.read_text(encoding="utf-8").splitlines()
    url = next(line.split("url:", 1)[1].strip() for line in lines if line.startswith("# url:"))
    cells = [line for line in lines if not line.startswith("#")]
    table, caption, first = cells[0], cells[1], cells[2]
    assert first == "Algorithm", path
    width = next(i for i, c in enumerate(cells[3:]) if c not in HEADER)
    columns = [HEADER[c] for c in cells[3:3 + width]]
    body = cells[3 + width:]
    assert len(body) % (width + 1) == 0, path
    rows = {body[i]: body[i + 1:i + 1 + width] for i in range(0, len(body), width + 1)}
    return {"url": url, "table": table, "caption": caption, "columns": columns, "rows": rows}


STORED = {t["url"]: t for t in map(_stored_table, sorted(FIXTURES.glob("*.txt")))}


def _typed_blocks():
    data = yaml.load(PAPER_NUMBERS.read_text(encoding="utf-8"), Loader=_Typed)
    return data["letor_published"]


def test_every_published_number_equals_its_stored_cell_as_typed():
    spec = _typed_blocks()
    assert spec["source"].startswith("T.-Y. Liu, Learning to Rank for Information Retrieval")
    checked = 0
    for block in spec["blocks"]:
        stored = STORED[block["url"]]  # no number without its stored source
        assert block["table"] == stored["table"]
        assert block["where"] == f"{stored['table']} ({stored['caption']})"
        assert set(block["rows"]) == set(stored["rows"]), "every published row, none invented"
        for name, typed in block["rows"].items():
            assert len(typed) == len(block["metrics"]), name
            for metric, text in zip(block["metrics"], typed):
                column = stored["columns"].index(metric)
                assert text == stored["rows"][name][column], (block["table"], name, metric)
                checked += 1
    assert checked == 7 * 7 + 4 * 7


def test_the_loaded_frame_names_source_table_row_and_column_of_every_number():
    frame = load_paper_numbers()
    letor = frame[frame.table == "letor_published"]
    assert (letor.source.str.contains("Learning to Rank for Information Retrieval")).all()
    assert set(letor[letor.role == "td2003"].source) == {
        "T.-Y. Liu, Learning to Rank for Information Retrieval (Springer, 2011), ch. 11; "
        "Table 11.1 (Results on the TD2003 dataset)"}
    assert (letor.published != "").all() and letor.metric.isin(HEADER.values()).all()
    # our rows take the published rows they reproduce; every other published row keeps its name
    assert set(letor[letor.method == "linear_regression"].published) == {"Regression"}
    assert set(letor[letor.method == "listnet"].published) == {"ListNet"}
    assert set(letor.role) == {"td2003", "mq2007"}
    cfg = cv.load_config(ROOT / "config" / "paper.yaml")
    assert {"linear_regression", "listnet"} <= set(cfg["tables"]["sinkprop_letor"]["methods"])


# ----------------------------------------------------------------------------- the table


def _stats(rows):
    cols = ["dataset", "metric", "method", "mean", "std_over_seeds", "n_queries", "is_best", "not_worse"]
    return pd.DataFrame(rows, columns=cols)


@pytest.fixture
def letor_spec():
    cfg = cv.load_config(ROOT / "config" / "paper.yaml")
    cfg["tables"]["sinkprop_letor"]["datasets"] = ["td2003", "ohsumed"]
    return plan.table_spec(cfg, "sinkprop_letor")


def test_paper_profile_letor_table_shows_map_ndcg_and_no_sigmoid_rmse(letor_spec):
    assert letor_spec["metrics"] == ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"]
    assert "rmse" not in [m["name"] for m in letor_spec["methods"]]
    assert letor_spec["paper"] == "letor_published"


def test_letor_table_puts_ours_beside_the_published_baseline_and_the_range(letor_spec):
    rows = []
    for ds, base in (("td2003", 0.3), ("ohsumed", 0.5)):
        for i, m in enumerate(["sinkprop", "listnet", "ranknet", "linear_regression", "lambdamart"]):
            for metric in letor_spec["metrics"]:
                rows.append((ds, metric, m, base + i / 100, 0.0, 50, i == 0, False))
    table = T.build_table(_stats(rows), letor_spec, load_paper_numbers())
    td, oh = table.blocks
    assert td.header == ["Method", "NDCG@1", "published (Δ)", "NDCG@3", "published (Δ)", "NDCG@5",
                         "published (Δ)", "NDCG@10", "published (Δ)", "MAP", "published (Δ)"]
    cells = {row[0].text: [c.text for c in row[1:]] for row in td.rows}
    # Table 11.1: Regression NDCG@1 0.320, MAP 0.241; ListNet NDCG@1 0.400; NDCG@5 is not printed
    assert cells["Linear regression (least squares)"][:2] == ["0.3300", "0.3200 (+0.0100)"]
    assert cells["Linear regression (least squares)"][9] == "0.2410 (+0.0890)"
    assert cells["ListNet"][1] == "0.4000 (-0.0900)" and cells["ListNet"][5] == "–"
    assert cells["SinkProp"][1] == "–"
    # the range over all seven published baselines: NDCG@1 AdaRank 0.260 .. ListNet 0.400
    assert cells["LETOR published range (7 baselines)"] == [
        "", "0.2600–0.4000", "", "0.2670–0.3440", "", "–", "", "0.2690–0.3480", "", "0.2030–0.2750"]
    assert oh.header == ["Method", "NDCG@1", "NDCG@3", "NDCG@5", "NDCG@10", "MAP"]  # no stored source
    assert len(oh.rows) == 5
    cap = table.caption
    assert "Table 11.1 (Results on the TD2003 dataset)" in cap and "Learning to Rank for Information" in cap
    assert "(Linear regression (least squares) as Regression; ListNet as ListNet)" in cap
    assert "RankSVM, Regression, SVM map" in cap
    assert "No stored source has LETOR's published numbers for OHSUMED" in cap
    assert "paper (Δ)" not in cap
    md = T.to_markdown(table)
    assert "| LETOR published range (7 baselines) |  | 0.2600–0.4000 |" in md


def test_synthetic_letor_stand_in_keeps_the_default_profile_table_as_it_was():
    cfg = cv.load_config(ROOT / "config" / "default.yaml")
    spec = plan.table_spec(cfg, "sinkprop_letor")
    assert spec["paper"] == "letor_published" and all(ds["role"] is None for ds in spec["datasets"])
    stats = _stats([(spec["datasets"][0]["name"], "ndcg@1", "listnet", 0.5, 0.0, 10, True, False)])
    with_source = T.build_table(stats, spec, load_paper_numbers())
    without = T.build_table(stats, {**spec, "paper": None}, load_paper_numbers())
    assert T.to_markdown(with_source) == T.to_markdown(without)

"""The transcriptions of ARF Tables 6-9 and NeuralNDCG Tables 1-2 against the papers' own lines.

The oracle is the papers' text in tests/fixtures/papers/ (each table's caption, header and rows,
one line per row, as extracted from the paper). Every number of those tables in
bench/report/paper_numbers.yaml is compared, *as typed* (the YAML read with numbers kept as their
text, so ``0.500`` is not ``0.5``), with the cell at its row and column there; every row of each
table is transcribed and none is invented.
"""

from __future__ import annotations

import pytest
import yaml

from bench.report.paper import PAPER_NUMBERS, load_paper_numbers
from helpers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "papers"
TAUS = ["0.2", "0.4", "0.6", "0.8", "1.0", "2.0", "4.0", "6.0", "8.0"]


class _Typed(yaml.SafeLoader):
    """YAML numbers kept as the text typed in the file."""


for _tag in ("tag:yaml.org,2002:float", "tag:yaml.org,2002:int"):
    _Typed.add_constructor(_tag, lambda loader, node: loader.construct_scalar(node))


@pytest.fixture(scope="module")
def typed() -> dict:
    return yaml.load(PAPER_NUMBERS.read_text(encoding="utf-8"), Loader=_Typed)


def _lines(name: str) -> list[str]:
    return [line for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]


def _table_rows(lines: list[str], caption: str, skip: int, n: int) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(caption))
    return lines[start + skip:start + skip + n]


@pytest.mark.parametrize(("table", "loss", "what"), [(6, "arf", "ARF"), (7, "arf_relax", "L_Relax"),
                                                     (8, "neuralsort_ce", "NeuralSort")])
def test_arf_sensitivity_tables_equal_the_papers_cells_as_typed(typed, table, loss, what):
    spec = typed[f"arf_table{table}"]
    assert spec["source"].startswith(f"Wang et al., ARF (2024), Appendix Table {table}") and what in spec["source"]
    printed = _table_rows(_lines("arf-tables-6-9.txt"), f"Table {table}.", 3, 9)
    assert [row.split()[0] for row in printed] == TAUS
    columns = {"mslr-web30k": slice(1, 4), "istella": slice(4, 7)}
    assert [b["role"] for b in spec["blocks"]] == list(columns)
    for block in spec["blocks"]:
        assert block["metrics"] == ["recall_arf@30@15", "ndcg@15", "ndcg@max"]
        assert list(block["rows"]) == [f"{loss}_tau{t}" for t in TAUS], "every row, none invented"
        for row in printed:
            cells = row.split()
            assert block["rows"][f"{loss}_tau{cells[0]}"] == cells[columns[block["role"]]], (table, row)


def test_arf_table9_equals_the_papers_time_and_memory_cells_as_typed(typed):
    block, = typed["arf_table9"]["blocks"]
    printed = _table_rows(_lines("arf-tables-6-9.txt"), "Table 9.", 2, 9)
    names = ["Softmax", "Ranknet", "ApproxNDCG", "NeuralSort", "LNDCGλ", "LNDCG@kλ", "LRecall@m@kλ", "LRelax", "ARF"]
    ours = ["softmax_pointwise", "ranknet", "approxndcg", "neuralsort_ce", "lambdaloss", "lambdaloss_k15", "lambda_recall",
            "arf_relax", "arf"]
    assert [row.split()[0][:len(n)] for row, n in zip(printed, names)] == names
    assert block["metrics"] == ["seconds_per_epoch", "gpu_memory_gb"]
    assert list(block["rows"]) == ours
    for method, row in zip(ours, printed):
        assert block["rows"][method] == row.split()[-2:], method


def test_neuralndcg_table1_equals_the_papers_cells_as_typed(typed):
    block, = typed["neuralndcg_table1"]["blocks"]
    printed = [line for line in _lines("neuralndcg-tables-1-2.txt") if line.startswith("$")]
    assert [line.split("\t")[0] for line in printed] == [r"$\lim_{\tau \rightarrow 0}$", r"$\tau = 0.01$",
                                                         r"$\tau = 0.1$", r"$\tau = 1$"]
    assert list(block["rows"]) == ["exact", "0.01", "0.1", "1"]
    for key, line in zip(block["rows"], printed):
        assert block["rows"][key] == line.split("\t")[1:], key


def test_neuralndcg_table2_equals_the_papers_cells_as_typed(typed):
    blocks = typed["neuralndcg_table2"]["blocks"]
    lines = _lines("neuralndcg-tables-1-2.txt")
    header = next(line for line in lines if line.startswith("Dataset\t")).split("\t")
    assert header == ["Dataset", "Features", "Queries in training", "Queries in test", "Empty queries"]
    printed = {line.split("\t")[0]: line.split("\t")[1:] for line in lines if line.startswith(("Web30K", "Istella"))}
    assert {b["role"]: b["rows"]["printed"] for b in blocks} == {"mslr-web30k": printed["Web30K"],
                                                                  "istella": printed["Istella"]}
    # "Queries in training" is the training split on Web30K, the training file (train + vali) on Istella
    assert [b["metrics"][1] for b in blocks] == ["queries_train", "queries_train_vali"]


def test_every_new_number_names_its_table_row_and_column():
    frame = load_paper_numbers()
    new = frame[frame.table.isin(["arf_table6", "arf_table7", "arf_table8", "arf_table9", "neuralndcg_table1",
                                  "neuralndcg_table2"])]
    assert len(new) == 3 * 54 + 18 + 28 + 8
    assert new.source.str.contains("Table").all() and (new.method != "").all() and (new.metric != "").all()

"""The numbers the source papers printed, as a tidy frame for the tables' "paper" column.

``paper_numbers.yaml`` (next to this file) stores each paper table as printed: blocks of
rows (method -> values in the block's metric order) with the table's ``scale`` to this
suite's convention (NeuralNDCG prints percentages, ``scale: 0.01``). The loader checks the
shape of every row, so a transcription slip (a missing value) fails loudly with the row.

A table of *published baselines* (``letor_published``) keys its rows by the algorithm as the
source names it, not by our method: its ``reproduced_by`` maps the published algorithms that
one of our methods reproduces to that method. Such rows keep the published name in
``published`` and take our method's name in ``method`` (every other published row keeps its
own name there), so the table finds "our row beside the algorithm it reproduces" the same way
it finds a paper's row, and the published range of a block is its rows' minimum and maximum.

>>> frame = load_paper_numbers()
>>> row = frame[(frame.table == "neuralndcg_table3") & (frame.method == "neuralndcg_max")
...             & (frame.role == "mslr-web30k") & (frame.metric == "ndcg@5")]
>>> round(float(row.value.iloc[0]), 4), float(row.printed.iloc[0])
(0.5156, 51.56)
>>> ours = frame[(frame.table == "letor_published") & (frame.method == "linear_regression")]
>>> sorted(set(ours.published)), sorted(set(ours.role))
(['Regression'], ['td2003'])
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

PAPER_NUMBERS = Path(__file__).with_name("paper_numbers.yaml")
COLUMNS = ["table", "role", "l_test", "method", "metric", "value", "printed", "source", "published"]


def load_paper_numbers(path: str | Path = PAPER_NUMBERS) -> pd.DataFrame:
    """Columns: table, role, l_test (0 = full lists), method, metric, value, printed, source,
    published (the source's own row name in a table of published baselines, else "")."""
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    records = []
    for table, spec in data.items():
        scale = float(spec.get("scale", 1.0))
        reproduced_by = spec.get("reproduced_by")
        for b, block in enumerate(spec["blocks"]):
            metrics = block["metrics"]
            for method, values in block["rows"].items():
                if len(values) != len(metrics):
                    raise ValueError(
                        f"{path}: {table} block {b} row {method}: {len(values)} values for {len(metrics)} metrics"
                    )
                for metric, printed in zip(metrics, values):
                    records.append(
                        {
                            "table": table,
                            "role": block["role"],
                            "l_test": int(block.get("l_test", 0)),
                            "method": (reproduced_by or {}).get(method, method),
                            "metric": metric,
                            "value": float(printed) * scale,
                            "printed": float(printed),
                            "source": f"{spec['source']}; {block['where']}",
                            "published": method if reproduced_by is not None else "",
                        }
                    )
    return pd.DataFrame.from_records(records, columns=COLUMNS)

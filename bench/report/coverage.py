"""The coverage list (``docs/coverage.md``): every table and figure of the four papers, its status
and target, read from the document's Markdown table and rendered as a page of the report.

The document is the one home of the list; :func:`read_coverage` parses its table (columns
paper, item, status, target, what; a target cell may name several, comma-separated) and
:func:`to_html` renders it with, for each target, whether the study's profile builds it
(``enabled``: the names of the profile's enabled tables and figures).

>>> rows = parse_coverage("| paper | item | status | target | what, or why not |\\n|---|---|---|---|---|\\n"
...                       "| ARF | Table 4 | not reproducible | | a live A/B test |")
>>> rows[0]["status"], rows[0]["targets"], rows[0]["what"]
('not reproducible', [], 'a live A/B test')
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

COLUMNS = ("paper", "item", "status", "target", "what")
STATUSES = ("reproduced", "partly", "configured", "illustration", "not reproducible")


def parse_coverage(text: str) -> list[dict[str, Any]]:
    """The rows of the first Markdown table whose header starts ``| paper | item | status``."""
    rows: list[dict[str, Any]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("| paper | item | status"):
            inside = True
            continue
        if inside and line.startswith("|---"):
            continue
        if inside and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != len(COLUMNS):
                raise ValueError(f"coverage row has {len(cells)} cells, expected {len(COLUMNS)}: {line}")
            row: dict[str, Any] = dict(zip(COLUMNS, cells))
            row["targets"] = [t.strip().strip("`") for t in row["target"].split(",") if t.strip()]
            rows.append(row)
        elif inside:
            break
    if not rows:
        raise ValueError("no coverage table (header '| paper | item | status | target | what, or why not |')")
    return rows


def read_coverage(path: str | Path) -> list[dict[str, Any]]:
    return parse_coverage(Path(path).read_text(encoding="utf-8"))


def to_html(rows: list[dict[str, Any]], enabled: list[str], profile: str) -> str:
    """A standalone page: the list, each target marked built or not in this profile."""
    counts = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>Coverage</title>',
             "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
             "th,td{padding:.25em .6em;text-align:left;border-bottom:1px solid #ddd}</style></head><body>",
             "<h2>Every table and figure of the four papers</h2>",
             f"<p>{len(rows)} items: {html.escape(summary)}. Profile: {html.escape(profile)}; a target is marked "
             "when this profile builds it. Source: docs/coverage.md.</p>",
             "<table><thead><tr><th>paper</th><th>item</th><th>status</th><th>target</th><th>what, or why not</th>"
             "</tr></thead><tbody>"]
    for r in rows:
        targets = ", ".join(f"{t} ({'built here' if t in enabled else 'not in this profile'})" for t in r["targets"])
        cells: list[Any] = [r["paper"], r["item"], r["status"], targets, r["what"].replace("`", "")]
        parts.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    parts += ["</tbody></table>", "</body></html>"]
    return "\n".join(parts) + "\n"

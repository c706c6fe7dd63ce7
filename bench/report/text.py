"""The HTML report's text: every table's title and full caption, every figure's title, readable
without JavaScript.

Snakemake's report is a JavaScript application: its captions come from the ``.rst`` files of
``workflows/report/``, which are the same for every table, and a browser without JavaScript
shows nothing but a warning. So the report rule (``workflows/report.smk``) calls
``ltr-bench report-text`` twice around ``snakemake --report``:

1. ``--captions DIR``, before: for each table and figure of the report, one HTML fragment
   ``DIR/<name>.html`` (``<name>`` the output's file stem: ``arf_table2``,
   ``arf_table2_selection``, ``scaling_figure``) with its title and, for a table, its full caption.
   The ``.rst`` captions include that fragment (docutils' ``raw`` directive, ``:file:``), so each
   entry of the application carries its own title and caption;
2. ``--embed REPORT``, after: a ``<noscript>`` section right after ``<body>`` holding, for every
   table, its title, full caption and its tables, and for every figure its title, so a reader
   without JavaScript (or a text browser, or a search of the file) gets every word.

Where the words come from: a table's own HTML page (:func:`bench.report.tables.to_html` writes
``<h2>title</h2><p class="caption">...</p>`` and its blocks, already escaped), and a figure's
PNG, whose ``Title`` text chunk :func:`bench.report.figures.save` writes from the figure's own
title (its suptitle, else its panels' titles).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from bench.atomic import write_text
from bench.errors import UsageError

NOSCRIPT_ID = "ltr-bench-text"  # the embedded section's id: embedding again replaces it
_H2 = re.compile(r"<h2>(.*?)</h2>", re.S)
_CAPTION = re.compile(r'<p class="caption">(.*?)</p>', re.S)
_BODY = re.compile(r"<body>(.*)</body>", re.S)
_EMBEDDED = re.compile(rf'<noscript id="{NOSCRIPT_ID}">.*?</noscript>\n?', re.S)


@dataclass(frozen=True)
class Entry:
    """One table or figure of the report: its name, title and (tables) caption and body, as HTML."""

    name: str
    kind: str  # "table" or "figure"
    title: str
    caption: str = ""
    body: str = ""

    def fragment(self) -> str:
        """The fragment an entry's ``.rst`` caption includes: title, then the full caption."""
        parts = [f"<p><strong>{self.title}</strong></p>"]
        if self.caption:
            parts.append(f"<p>{self.caption}</p>")
        return "\n".join(parts) + "\n"


def table_entry(page: str | Path) -> Entry:
    """A table's entry from its HTML page (the ``.html`` beside a table's ``.md``)."""
    page = Path(page)
    try:
        text = page.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{page}: cannot read the table's HTML page ({exc.strerror})") from exc
    title, caption, body = _H2.search(text), _CAPTION.search(text), _BODY.search(text)
    if title is None or caption is None or body is None:
        raise UsageError(f"{page}: not a table page of `ltr-bench table` (no <h2> title, caption or body)")
    return Entry(page.stem, "table", title.group(1).strip(), caption.group(1).strip(), body.group(1).strip())


def figure_entry(png: str | Path) -> Entry:
    """A figure's entry from its PNG's ``Title`` text chunk (escaped here: it is plain text); a PNG
    without one (drawn by an older version) gets its name and how to draw it again."""
    from PIL import Image

    png = Path(png)
    try:
        with Image.open(png) as image:
            title = image.info.get("Title")
    except OSError as exc:
        raise UsageError(f"{png}: cannot read the figure ({exc})") from exc
    if not title:  # drawn before figures carried their title: say so rather than stop the report
        return Entry(png.stem, "figure", f"{png.stem} (drawn without a title: `snakemake --cores 2 {png.stem} --forcerun "
                     "figure` draws it again with one)")
    return Entry(png.stem, "figure", html.escape(str(title)))


def entries(outputs: list[str]) -> list[Entry]:
    """The report's tables (each ``.md`` output, read from the ``.html`` beside it) and figures
    (each ``.png``), in the order given; other outputs (the coverage page, PDFs) have none."""
    out = []
    for name in outputs:
        path = Path(name)
        if path.suffix == ".md":
            out.append(table_entry(path.with_suffix(".html")))
        elif path.suffix == ".png":
            out.append(figure_entry(path))
    return out


def write_captions(found: list[Entry], folder: str | Path) -> list[Path]:
    """One fragment per entry, ``folder/<name>.html`` (module docstring, step 1)."""
    written = []
    for entry in found:
        path = Path(folder) / f"{entry.name}.html"
        write_text(path, entry.fragment())
        written.append(path)
    return written


def noscript_section(found: list[Entry]) -> str:
    """Every entry's words as one ``<noscript>`` section (module docstring, step 2)."""
    parts = [f'<noscript id="{NOSCRIPT_ID}"><div style="font-family:sans-serif;margin:1.5em;max-width:70em">',
             "<h1>ltr-bench report (text)</h1>",
             "<p>This page's figures and interactive views need JavaScript; every table with its full "
             "caption and every figure's title follow as text. The files are in the tables/ and figures/ "
             "folders beside this page.</p>"]
    tables = [e for e in found if e.kind == "table"]
    figures = [e for e in found if e.kind == "figure"]
    if tables:
        parts.append("<h2>Tables</h2>")
        parts += [f'<section id="text-{e.name}">{e.body}</section>' for e in tables]
    if figures:
        parts.append("<h2>Figures</h2><ul>")
        parts += [f"<li><code>{e.name}</code>: {e.title}</li>" for e in figures]
        parts.append("</ul>")
    parts.append("</div></noscript>")
    return "\n".join(parts) + "\n"


def embed(report: str | Path, found: list[Entry]) -> None:
    """Put :func:`noscript_section` right after the report's ``<body>`` (replacing an earlier one)."""
    report = Path(report)
    try:
        text = report.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{report}: cannot read the report ({exc.strerror})") from exc
    text = _EMBEDDED.sub("", text)
    at = re.search(r"<body[^>]*>", text)
    if at is None:
        raise UsageError(f"{report}: no <body> tag; not an HTML report")
    write_text(report, text[:at.end()] + "\n" + noscript_section(found) + text[at.end():])

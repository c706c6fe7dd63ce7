"""The HTML report's words (bench/report/text.py): every table's title and full caption and every
figure's title, in the entries' captions and in a section readable without JavaScript (issue 42:
the report had no text without JavaScript, arf_table2_selection carried arf_table2's caption and
no title, and every table's caption said "the full caption is printed with the table")."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bench.config.plan import REPORT_CAPTIONS  # noqa: E402
from bench.errors import UsageError  # noqa: E402
from bench.report import figures as F  # noqa: E402
from bench.report import text as T  # noqa: E402
from bench.report.tables import Block, Cell, Table, to_html, to_markdown  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RST = ROOT / "workflows" / "report"


def _table(folder: Path, name: str, title: str, caption: str) -> Path:
    block = Block("syn-web; 300 test queries", ["Method", "NDCG@10"], [[Cell("RankNet"), Cell("0.5")]])
    table = Table(name, title, caption, [block])
    (folder / f"{name}.md").write_text(to_markdown(table))
    (folder / f"{name}.html").write_text(to_html(table))
    return folder / f"{name}.md"


def _figure(folder: Path, name: str, *, suptitle: str | None, panels: tuple[str, ...] = ()) -> Path:
    fig, axes = plt.subplots(1, max(1, len(panels)))
    for ax, title in zip(list(getattr(axes, "flat", [axes])), panels):
        ax.set_title(title)
    if suptitle:
        fig.suptitle(suptitle)
    F.save(fig, folder / f"{name}.png", folder / f"{name}.pdf")
    return folder / f"{name}.png"


def test_entries_read_each_tables_title_caption_and_each_figures_title(tmp_path):
    md = _table(tmp_path, "arf_table2", "ARF Table 2: x & y", "Reproduces ARF <Table 2>. Bold: the best.")
    sel = _table(tmp_path, "arf_table2_selection", "ARF Table 2: hyperparameters selected", "Hyperparameter selection.")
    png = _figure(tmp_path, "cd_diagram", suptitle="Critical-difference diagram: unified")
    panels = _figure(tmp_path, "scaling_figure", suptitle=None, panels=("Time vs list size", "Peak memory"))
    found = T.entries([str(md), str(md.with_suffix(".tex")), str(sel), str(png), str(png.with_suffix(".pdf")),
                       str(panels), "reports/coverage.html"])
    assert [(e.name, e.kind) for e in found] == [("arf_table2", "table"), ("arf_table2_selection", "table"),
                                                 ("cd_diagram", "figure"), ("scaling_figure", "figure")]
    assert found[0].title == "ARF Table 2: x &amp; y" and found[0].caption == "Reproduces ARF &lt;Table 2&gt;. Bold: the best."
    assert found[1].caption == "Hyperparameter selection."  # its own, not arf_table2's
    assert found[2].title == "Critical-difference diagram: unified"
    assert found[3].title == "Time vs list size | Peak memory"  # no suptitle: the panels' titles


def test_a_figure_drawn_without_a_title_says_how_to_draw_it_again(tmp_path):
    from PIL import Image

    Image.new("RGB", (4, 4)).save(tmp_path / "old_figure.png")
    assert "--forcerun figure" in T.figure_entry(tmp_path / "old_figure.png").title
    (tmp_path / "bad.html").write_text("<html><body>no table</body></html>")
    with pytest.raises(UsageError, match="bad.html: not a table page"):
        T.table_entry(tmp_path / "bad.html")


def test_embed_puts_every_word_in_a_noscript_section_once(tmp_path):
    md = _table(tmp_path, "pirank_table1", "PiRank Table 1", "Graded as TF-Ranking grades.")
    png = _figure(tmp_path, "temperature_figure", suptitle="Temperature: PiRank-NDCG@10")
    report = tmp_path / "report.html"
    report.write_text("<!doctype html><html><head></head><body>\n<div id='app'></div></body></html>")
    found = T.entries([str(md), str(png)])
    T.embed(report, found)
    T.embed(report, found)  # the report rule may run again: the section is replaced, not doubled
    text = report.read_text()
    assert text.count(f'<noscript id="{T.NOSCRIPT_ID}">') == 1
    section = text[text.index("<noscript"):text.index("</noscript>")]
    for words in ("PiRank Table 1", "Graded as TF-Ranking grades.", "<td>RankNet</td>", "Temperature: PiRank-NDCG@10"):
        assert words in section
    assert text.index("<body>") < text.index("<noscript") < text.index("<div id='app'>")
    (tmp_path / "not.html").write_text("plain text")
    with pytest.raises(UsageError, match="no <body> tag"):
        T.embed(tmp_path / "not.html", found)


def _render_caption(rst: Path, **wildcards: str) -> str:
    """A report caption as Snakemake renders it: Jinja with `snakemake`, then docutils to HTML."""
    from docutils.core import publish_parts
    from jinja2 import Environment

    snakemake = SimpleNamespace(wildcards=SimpleNamespace(**wildcards), config={"profile": "default"})
    text = Environment(trim_blocks=True, lstrip_blocks=True).from_string(rst.read_text()).render(snakemake=snakemake)
    return publish_parts(text, writer="html")["body"]


def test_every_report_caption_carries_its_own_title_and_full_caption(tmp_path, monkeypatch):
    """Rendered as Snakemake renders them, from the fragments `ltr-bench report-text --captions`
    writes: a statistics table, its selection table (the bug: arf_table2's caption, no title), a
    computed table and a figure each show their own words."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "reports"
    folder.mkdir()
    outputs = [_table(folder, "arf_table2", "ARF Table 2", "Reproduces ARF Table 2, in full."),
               _table(folder, "arf_table2_selection", "ARF Table 2: selected on validation", "Every grid point."),
               _table(folder, "arf_table9", "ARF Table 9: seconds per epoch", "From the records of the runs."),
               _figure(folder, "recall_heatmap", suptitle="ARF Figs. 2-6: Recall@m@k")]
    T.write_captions(T.entries([str(p) for p in outputs]), REPORT_CAPTIONS)
    table = _render_caption(RST / "tables.rst", table="arf_table2")
    assert "<strong>ARF Table 2</strong>" in table and "Reproduces ARF Table 2, in full." in table
    assert "printed with the table" not in table
    selection = _render_caption(RST / "selection.rst", table="arf_table2")
    assert "ARF Table 2: selected on validation" in selection and "Every grid point." in selection
    assert "Reproduces ARF Table 2" not in selection
    computed = _render_caption(RST / "computed_tables.rst", table="arf_table9")
    assert "ARF Table 9: seconds per epoch" in computed and "From the records of the runs." in computed
    figure = _render_caption(RST / "figures.rst", figure="recall_heatmap")
    assert "ARF Figs. 2-6: Recall@m@k" in figure and "Recall&#64;m&#64;k of L_Relax" in figure
    assert all("system-message" not in html for html in (table, selection, computed, figure))


def test_the_workflow_wires_the_selection_caption_and_both_report_text_steps():
    select = (ROOT / "workflows" / "select.smk").read_text()
    assert select.count('caption="report/selection.rst"') == 2 and "report/tables.rst" not in select
    report = (ROOT / "workflows" / "report.smk").read_text()
    assert "--captions {params.captions}" in report and "--embed {output}" in report
    for rst in ("tables.rst", "selection.rst", "computed_tables.rst", "figures.rst"):
        assert f":file: {REPORT_CAPTIONS}/" in (RST / rst).read_text()
    assert os.sep == "/"  # the .rst paths are POSIX paths

"""The repo explains itself: every document that code, tests, configs or docs cite is in the repo.

A citation is a path ``docs/<name>.md`` (optionally followed by a quoted section, e.g.
``docs/losses.md, "Common contract"``) or a relative Markdown link between documents. Each
named file must exist, and each quoted section must be a heading (or a bold paragraph label,
``**Label.**``) of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ["Snakefile", "README.md", "bench", "tests", "config", "workflows", "docs", "examples", "scripts", ".ci"]
SUFFIXES = {".py", ".yaml", ".yml", ".smk", ".md", ".rst", ".toml", ".sh", ""}
# the quoted section follows a comma or a space (a possessive "md's" is not a section)
DOC = re.compile(r"""docs/([\w-]+\.md)`{0,2}(?:(?:,\s*|\s+)\(?\s*(?:section\s+)?["']([^"'\n]+)["'])?""")
LINK = re.compile(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)")


def _files() -> list[Path]:
    out = []
    for name in SOURCES:
        path = ROOT / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += [p for p in path.rglob("*")
                    if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts]
    return out


def _sections(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    heads = {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", text, flags=re.M)}
    labels = {m.group(1).strip().rstrip(".") for m in re.finditer(r"\*\*([^*\n]+?)\*\*", text)}
    return heads | labels


def _citations() -> list[tuple[str, str, str | None]]:
    found = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = str(path.relative_to(ROOT))
        for m in DOC.finditer(text):
            found.append((rel, f"docs/{m.group(1)}", m.group(2)))
        if path.suffix == ".md":
            for m in LINK.finditer(text):
                target = (path.parent / m.group(1)).resolve()
                inside = target.is_relative_to(ROOT)
                found.append((rel, str(target.relative_to(ROOT)) if inside else m.group(1), None))
    return found


def test_there_are_citations_to_check():
    assert len(_citations()) > 20


@pytest.mark.parametrize("where, doc, section", _citations(), ids=lambda v: str(v))
def test_every_cited_document_and_section_exists(where, doc, section):
    path = ROOT / doc
    assert path.is_file(), f"{where} cites {doc}, which is not in the repo"
    if section is not None:
        assert section.rstrip(".") in _sections(path), \
            f"{where} cites {doc}, section {section!r}, which it does not have"

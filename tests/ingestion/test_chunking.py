from __future__ import annotations

import pytest

from ingestion.chunking import ChunkSettings, chunk_page, split_text
from ingestion.parsers.base import Block, ParsedPage
from ingestion.parsers.formats import parser_for
from tests.ingestion.files import handbook_pdf

SENTENCE = "公司的差旅报销政策规定，员工出差期间的交通、住宿和餐饮费用可以凭发票报销。"


def test_it_cuts_chinese_at_sentence_ends_with_overlap():
    text = SENTENCE * 12
    spans = split_text(text, 100, 20)
    assert all(end - start <= 100 for start, end in spans)
    assert all(text[start:end].endswith("。") for start, end in spans)
    assert all(spans[i][1] - spans[i + 1][0] == 20 for i in range(len(spans) - 1))
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)


def test_it_falls_back_to_clauses_spaces_and_characters():
    clauses = "，".join(["住宿标准按城市分级执行"] * 30)
    assert all(end - start <= 60 for start, end in split_text(clauses, 60, 10))
    assert all(clauses[s:e].endswith("，") for s, e in split_text(clauses, 60, 10)[:-1])
    unbroken = "x" * 250
    assert [e - s for s, e in split_text(unbroken, 100, 0)] == [100, 100, 50]


def test_it_keeps_headings_tables_and_image_captions_with_locations(tmp_path):
    first, scan = parser_for("application/pdf").pages(handbook_pdf(tmp_path / "h.pdf"))
    chunks = chunk_page(first)
    assert [c.kind for c in chunks] == ["text", "table", "image", "text"]
    body, table, image, _caption = chunks
    assert body.heading_path == ("Travel policy 差旅政策",)
    assert body.bbox is not None
    assert body.location == {"page": 1, "bbox": list(body.bbox), "heading_path": ["Travel policy 差旅政策"]}
    assert table.text.count("|") >= 9
    assert table.bbox is not None
    assert image.text == "Figure 1: the reimbursement flow."
    assert image.image is not None
    assert chunk_page(scan) == []  # nothing to index until OCR reads it


def test_it_follows_markdown_heading_paths(tmp_path):
    path = tmp_path / "g.md"
    path.write_text("# 报销指南\n\n## 住宿\n\n" + SENTENCE * 20, encoding="utf-8")
    pages = list(parser_for("text/markdown").pages(path))
    chunks = [chunk for page in pages for chunk in chunk_page(page, ChunkSettings(size=200, overlap=30))]
    assert len(chunks) >= 4
    assert {c.heading_path for c in chunks} == {("报销指南", "住宿")}
    assert all(len(c.text) <= 200 for c in chunks)


def test_it_splits_a_long_table_by_rows_repeating_the_header():
    rows = (("城市", "标准"), *tuple((f"城市{n}", str(n * 10)) for n in range(80)))
    table = Block("table", "\n".join("|" + "|".join(r) + "|" for r in rows), bbox=(0, 0, 10, 10), cells=rows)
    page = ParsedPage(number=3, kind="pdf_page", blocks=(table,))
    chunks = chunk_page(page, ChunkSettings(size=200, overlap=20))
    assert len(chunks) > 2
    assert all(c.text.startswith("|城市|标准|\n|---|---|") for c in chunks)
    assert all(c.page == 3 and c.kind == "table" for c in chunks)
    assert all(len(c.text) <= 600 for c in chunks)  # tables with their rows' sentences: three times
    markdown = [c.text.split("\n\n")[0] for c in chunks]  # the row sentences follow a blank line
    assert sum(m.count("\n") - 1 for m in markdown) == 80  # every row once
    # The embedder reads each cell once: the rows' sentences, not the Markdown as well.
    for chunk in chunks:
        sentences = chunk.text.split("\n\n", 1)[1]
        assert chunk.embed == sentences
        assert "|" not in sentences
    assert sum(c.embed.count("\n") + 1 for c in chunks if c.embed) == 80  # "城市7 — 标准: 70", each row once


def test_it_gives_the_same_chunk_the_same_hash():
    page = ParsedPage(number=1, kind="section", blocks=(Block("text", SENTENCE * 3),), heading_path=("A",))
    assert [c.content_sha256 for c in chunk_page(page)] == [c.content_sha256 for c in chunk_page(page)]


def test_it_refuses_unworkable_settings():
    with pytest.raises(ValueError, match="at least 50"):
        ChunkSettings(size=10, overlap=0)

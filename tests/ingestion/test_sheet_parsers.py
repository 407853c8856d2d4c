from __future__ import annotations

import zipfile

import pytest

from ingestion.chunking import chunk_page
from ingestion.parsers import sheets
from ingestion.parsers.base import ParseError
from ingestion.parsers.formats import parser_for
from ingestion.parsers.sheets import CsvParser, XlsxParser
from ingestion.sniff import CSV, XLSX, sniff
from tests.ingestion.sheet_files import (
    BUDGET_HEADER,
    budget_xlsx,
    empty_xlsx,
    gbk_semicolon_csv,
    long_csv,
    long_xlsx,
    mixed_cells_csv,
    mixed_rows_csv,
)

LONG_HEADER = ("编号", "城市", "说明")


@pytest.fixture
def budget(tmp_path):
    return budget_xlsx(tmp_path / "budget.xlsx")


def csv_file(tmp_path, text: str, name: str = "data.csv", encoding: str = "utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_it_sniffs_workbooks_and_csv_by_content_and_name(budget, tmp_path):
    assert sniff(budget, "budget.xlsx") == XLSX
    gbk = gbk_semicolon_csv(tmp_path / "x.csv")
    assert sniff(gbk, "x.csv") == CSV
    assert sniff(gbk, "x.tsv") == CSV
    assert sniff(gbk, "x.txt") == "text/plain"
    assert isinstance(parser_for(XLSX), XlsxParser)
    assert isinstance(parser_for(CSV), CsvParser)


def test_it_reads_each_sheet_as_a_heading_and_a_table(budget):
    pages = list(XlsxParser().pages(budget))
    assert [page.number for page in pages] == [1, 2]  # the empty third sheet is skipped
    first, notes = pages
    assert first.kind == "text_block"
    assert first.heading_path == ("预算",)
    heading, table = first.blocks
    assert (heading.kind, heading.text, heading.level) == ("heading", "预算", 1)
    assert table.kind == "table"
    assert table.cells == (
        BUDGET_HEADER,
        ("差旅", "2024-03-01", "1234.5", "3", "15%", "3703.5", "北京|上海\n往返"),
        ("培训", "2024-03-02 14:30:00", "0.3", "2", "50%", "0.6", ""),
    )
    assert first.meta == {"sheet": "预算", "rows": 2}
    assert notes.heading_path == ("Notes",)
    assert notes.blocks[-1].cells == (
        ("Note",),
        ("Receipts are kept for 5 years.",),
        ("Ask finance about exceptions.",),
    )
    assert notes.meta == {"sheet": "Notes", "rows": 2}


def test_it_writes_tables_as_markdown_with_pipes_and_line_breaks_escaped(budget):
    table = next(XlsxParser().pages(budget)).blocks[-1]
    lines = table.text.split("\n")
    assert lines[0] == "|项目|日期|金额|数量|占比|合计|备注|"
    assert lines[1] == "|---|---|---|---|---|---|---|"
    assert lines[2] == "|差旅|2024-03-01|1234.5|3|15%|3703.5|北京\\|上海 往返|"
    assert lines[3] == "|培训|2024-03-02 14:30:00|0.3|2|50%|0.6||"
    assert len(lines) == 4
    assert "C2*D2" not in table.text  # formulas give their values, never their source


def test_it_reads_a_formula_without_a_cached_value_as_empty(tmp_path):
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.active.append(("a", "double"))
    workbook.active.append((2, "=A2*2"))  # openpyxl, unlike Excel, stores no result
    workbook.save(tmp_path / "formula.xlsx")
    page = next(XlsxParser().pages(tmp_path / "formula.xlsx"))
    assert page.blocks[-1].cells == (("a", "double"), ("2", ""))


def test_it_gives_the_same_hashes_for_the_same_workbook(budget, tmp_path):
    again = budget_xlsx(tmp_path / "again.xlsx")
    first = [page.content_sha256 for page in XlsxParser().pages(budget)]
    assert first == [page.content_sha256 for page in XlsxParser().pages(again)]
    assert len(set(first)) == 2


def test_it_cuts_a_long_sheet_into_pages_that_each_repeat_the_header(tmp_path):
    pages = list(XlsxParser().pages(long_xlsx(tmp_path / "long.xlsx", rows=450)))
    assert [page.number for page in pages] == [1, 2, 3]
    assert [page.heading_path for page in pages] == [
        ("明细", "rows 2–201"),
        ("明细", "rows 202–401"),
        ("明细", "rows 402–451"),
    ]
    assert [page.meta for page in pages] == [
        {"sheet": "明细", "rows": 200},
        {"sheet": "明细", "rows": 200},
        {"sheet": "明细", "rows": 50},
    ]
    for page in pages:
        *headings, table = page.blocks
        assert [(block.text, block.level) for block in headings] == [
            (page.heading_path[0], 1),
            (page.heading_path[1], 2),
        ]
        assert table.cells[0] == LONG_HEADER
        assert table.text.startswith("|编号|城市|说明|\n|---|---|---|\n")
    numbers = [int(row[0]) for page in pages for row in page.blocks[-1].cells[1:]]
    assert numbers == list(range(1, 451))


def test_it_keeps_a_sheet_of_exactly_one_page_unsplit(tmp_path):
    pages = list(XlsxParser().pages(long_xlsx(tmp_path / "full.xlsx", rows=sheets.ROWS_PER_PAGE)))
    assert [page.heading_path for page in pages] == [("明细",)]
    assert len(pages[0].blocks[-1].cells) == sheets.ROWS_PER_PAGE + 1


def test_it_chunks_a_long_page_into_tables_that_each_start_with_the_header(tmp_path):
    second = list(XlsxParser().pages(long_xlsx(tmp_path / "long.xlsx", rows=450)))[1]
    chunks = chunk_page(second)
    assert len(chunks) > 3
    assert all(chunk.kind == "table" for chunk in chunks)
    assert all(chunk.text.startswith("|编号|城市|说明|\n|---|---|---|\n") for chunk in chunks)
    assert all(chunk.heading_path == ("明细", "rows 202–401") for chunk in chunks)
    rows = [line for chunk in chunks for line in chunk.text.split("\n\n")[0].split("\n")[2:]]
    assert [line.split("|")[1] for line in rows] == [str(number) for number in range(201, 401)]


def test_it_refuses_a_workbook_without_data(tmp_path):
    with pytest.raises(ParseError, match="no data"):
        list(XlsxParser().pages(empty_xlsx(tmp_path / "empty.xlsx")))


def test_it_refuses_files_that_are_not_workbooks(tmp_path):
    fake = tmp_path / "fake.xlsx"
    fake.write_bytes(b"name,amount\nAlice,100\n")
    with pytest.raises(ParseError, match="not a readable Office document"):
        list(XlsxParser().pages(fake))
    other_zip = tmp_path / "other.xlsx"
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("word/document.xml", "<document/>")
    with pytest.raises(ParseError, match=r"xl/workbook\.xml is missing"):
        list(XlsxParser().pages(other_zip))


def test_it_refuses_a_workbook_over_the_cell_limit_before_any_page(tmp_path, monkeypatch):
    monkeypatch.setattr(sheets, "MAX_CELLS", 1000)
    pages = XlsxParser().pages(long_xlsx(tmp_path / "long.xlsx", rows=450))
    with pytest.raises(ParseError, match=r"more than 1,000 cells\. Split it"):
        next(pages)


def test_it_counts_cells_as_it_reads_when_the_workbook_does_not_declare_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(sheets, "_declared_cells", lambda sheet: 0)
    monkeypatch.setattr(sheets, "MAX_CELLS", 1000)
    with pytest.raises(ParseError, match="Split it"):
        list(XlsxParser().pages(long_xlsx(tmp_path / "long.xlsx", rows=450)))


def test_it_reads_a_gbk_csv_with_semicolons_and_decimal_commas(tmp_path):
    (page,) = CsvParser().pages(gbk_semicolon_csv(tmp_path / "预算.csv"))
    assert page.heading_path == ()
    (table,) = page.blocks
    assert table.cells == (
        ("项目", "金额", "备注"),
        ("差旅", "1234,5", "北京出差"),
        ("培训", "800", "内部培训"),
        ("办公用品", "56,25", "笔、纸"),
    )
    assert table.text.startswith("|项目|金额|备注|\n|---|---|---|\n|差旅|1234,5|北京出差|")
    assert page.meta == {"rows": 3}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\tb\n1\t2, 3\n", (("a", "b"), ("1", "2, 3"))),
        ("a|b\n1|2\n", (("a", "b"), ("1", "2"))),
        ('a,b\n"x;y",2\n"z;w",3\n', (("a", "b"), ("x;y", "2"), ("z;w", "3"))),
        ('a,b\n"two\nlines",2\n', (("a", "b"), ("two\nlines", "2"))),
        ("sep=;\na;b\n1,5;2\n", (("a", "b"), ("1,5", "2"))),
        ("name\nAlice\nBob\n", (("name",), ("Alice",), ("Bob",))),
        ("a,b,c,,\n1,2,,,\n\n,,,,\n3,,,,\n", (("a", "b", "c"), ("1", "2", ""), ("3", "", ""))),
    ],
    ids=["tab", "pipe", "quoted-semicolons", "quoted-newline", "excel-sep-line", "one-column", "trailing-blanks"],
)
def test_it_finds_the_delimiter_and_keeps_quoted_values(tmp_path, text, expected):
    (page,) = CsvParser().pages(csv_file(tmp_path, text))
    assert page.blocks[-1].cells == expected


def test_it_refuses_a_csv_that_mixes_delimiters(tmp_path):
    for path in (mixed_rows_csv(tmp_path / "rows.csv"), mixed_cells_csv(tmp_path / "cells.csv")):
        with pytest.raises(ParseError, match="mixes delimiters: both “,” and “;”"):
            list(CsvParser().pages(path))


def test_it_refuses_a_csv_without_consistent_columns(tmp_path):
    prose = "Dear team,\nthe budget, as agreed, is final.\nThanks, see you, Monday, at ten\nBest\n"
    with pytest.raises(ParseError, match="no consistent columns"):
        list(CsvParser().pages(csv_file(tmp_path, prose)))


def test_it_refuses_a_csv_without_data(tmp_path):
    with pytest.raises(ParseError, match="no data"):
        list(CsvParser().pages(csv_file(tmp_path, ",,,\n , , ,\n\n")))


def test_it_cuts_a_long_csv_into_pages_named_by_their_rows(tmp_path):
    pages = list(CsvParser().pages(long_csv(tmp_path / "long.csv", rows=450)))
    assert [page.heading_path for page in pages] == [("rows 2–201",), ("rows 202–401",), ("rows 402–451",)]
    assert all(page.blocks[-1].cells[0] == ("id", "city") for page in pages)
    assert [(block.kind, block.text, block.level) for block in pages[1].blocks[:-1]] == [("heading", "rows 202–401", 1)]
    assert [page.meta["rows"] for page in pages] == [200, 200, 50]
    assert chunk_page(pages[2])[0].heading_path == ("rows 402–451",)

"""Tables cell by cell: real statistical tables (single pages of R vignettes shipped by Debian,
tests/files/tables/manifest.jsonl), their multi-level headers, row sentences and drawn marks."""

from __future__ import annotations

import functools
from pathlib import Path

from ingestion import tables
from ingestion.chunking import ChunkSettings, chunk_page
from ingestion.parsers.base import Block, ParsedPage, markdown_table
from ingestion.parsers.formats import parser_for

FILES = Path(__file__).resolve().parent.parent / "files" / "tables"


@functools.cache
def page(name: str) -> ParsedPage:
    (parsed,) = parser_for("application/pdf").pages(FILES / name)
    return parsed


def table_blocks(name: str) -> list[Block]:
    return [block for block in page(name).blocks if block.kind == "table"]


def table_text(name: str) -> str:
    return "\n".join(chunk.text for chunk in chunk_page(page(name)) if chunk.kind == "table")


def test_it_reads_every_cell_of_a_table_without_inner_rules():
    # pscl's Table 2 rules only its groups: PyMuPDF's cells held a whole column ("1 029\n. . .").
    (table,) = table_blocks("countreg-p17.pdf")
    assert ("AIC", "35959.2", "", "", "24359.1", "24210.1", "24211.4") in table.cells
    assert ("hosp", "0.165", "0.165", "0.165", "0.218", "0.212", "0.201") in table.cells


def test_it_keeps_both_levels_of_a_two_level_header():
    (table,) = table_blocks("countreg-p17.pdf")
    assert table.cells[0] == ("Type", "GLM", "GLM", "GLM", "GLM", "zero-augmented", "zero-augmented")
    assert table.cells[1] == ("Distribution", "Poisson", "Poisson", "Poisson", "NB", "Hurdle-NB", "ZINB")
    assert table.cells[3][4] == "fm_nbin"


def test_it_says_each_row_with_its_row_header_and_full_column_path():
    text = table_text("countreg-p17.pdf")
    assert "AIC — GLM, Poisson, ML, fm_pois: 35959.2; GLM, NB, ML, fm_nbin: 24359.1;" in text
    assert "zero-augmented, ZINB, ML, fm_zinb: 24307.3" in text
    assert "|AIC|35959.2|||24359.1|24210.1|24211.4|" in text  # the Markdown table beside them


def test_it_spreads_an_ftable_label_over_the_columns_after_it():
    # R's ftable sets "D.DM" over the first of its two columns (M, F), with no rules at all.
    text = table_text("yll-p9.pdf")
    assert "(73,84] — D.nD, sex M: 158365; D.nD, F: 156678; D.DM, M: 34510; D.DM, F: 28834;" in text
    assert "Sum — D.nD, sex M: 466227; D.nD, F: 499416;" in text


def test_it_names_stacked_blocks_and_titles_in_the_row_header():
    text = table_text("MAXtest-p8.pdf")
    assert "IL1B_511 locus, Male, CC — Control: 75; Early Onset: 54; Late Onset: 29; Total: 158" in text
    assert "Female, GG — Control: 146; Early Onset: 43; Late Onset: 24; Total: 213" in text


def test_it_carries_row_groups_into_the_row_header():
    text = table_text("chfls1-p3.pdf")
    assert "Correct calculations, BIC — Step 1: 3947.8" not in text  # columns stay apart
    assert "Correct calculations, BIC — Start: 3947.8; Step 1: 3943.4; Step 2: 3939.2" in text
    assert "Calculations by Pollet and Nettle (2009), AIC — Start: 1872.1" in text


def test_it_flags_cells_whose_marks_are_drawn(tmp_path):
    """A ruled table whose check marks are strokes, not characters: the cells say so."""
    import pymupdf

    document = pymupdf.open()
    sheet = document.new_page(width=400, height=300)
    xs, ys = [50, 170, 250, 330], [50, 75, 100, 125]
    for x in xs:
        sheet.draw_line((x, ys[0]), (x, ys[-1]))
    for y in ys:
        sheet.draw_line((xs[0], y), (xs[-1], y))
    for x, text in zip(xs, ["Feature", "Free", "Pro"], strict=False):
        sheet.insert_text((x + 5, 67), text, fontsize=10)
    for y, text in zip(ys[1:], ["Search", "Export"], strict=False):
        sheet.insert_text((55, y + 17), text, fontsize=10)
    for x, y in [(200, 82), (280, 82), (280, 107)]:  # a tick drawn as two strokes
        sheet.draw_polyline([(x, y + 5), (x + 4, y + 10), (x + 12, y)], width=1.5)
    path = tmp_path / "drawn.pdf"
    document.save(path)
    (parsed,) = parser_for("application/pdf").pages(path)
    (table,) = [block for block in parsed.blocks if block.kind == "table"]
    assert table.cells[1:] == (("Search", tables.DRAWING, tables.DRAWING), ("Export", "", tables.DRAWING))
    text = "\n".join(chunk.text for chunk in chunk_page(parsed))
    assert "Export — Pro: [drawing]" in text
    assert "3 cells hold a drawn mark, not text" in text


def test_it_reads_row_groups_and_continuations_in_any_table():
    rows = [
        ["Offence", "Male, Under 18 years", "Male, 18 years and over"],
        ["Violent crime", "", ""],
        ["Robbery", "12", "40"],
        ["", "(3)", "(9)"],
    ]
    assert tables.row_sentences(rows) == [
        "Violent crime, Robbery — Male, Under 18 years: 12; Male, 18 years and over: 40",
        "Violent crime, Robbery — Male, Under 18 years: (3); Male, 18 years and over: (9)",
    ]


def test_it_keeps_two_header_rows_of_a_sheet_table_in_the_path():
    rows = [
        ["", "Male", "Male", "Female"],
        ["Offence", "Under 18", "18 and over", "Under 18"],
        ["Robbery", "5", "7", "1"],
    ]
    assert tables.header_depth(rows) == 2
    assert tables.row_sentences(rows) == ["Robbery — Male, Under 18: 5; Male, 18 and over: 7; Female, Under 18: 1"]


def test_it_repeats_every_header_row_and_the_group_in_each_piece_of_a_long_table():
    rows = [("", "Year 2023", "Year 2023"), ("City", "Q1", "Q2"), ("Group A", "", "")]
    rows += [(f"City {n}", str(n), str(n * 2)) for n in range(60)]
    table = Block("table", markdown_table(rows), bbox=(0, 0, 10, 10), cells=tuple(rows))
    chunks = chunk_page(ParsedPage(number=1, kind="pdf_page", blocks=(table,)), ChunkSettings(size=200, overlap=20))
    assert len(chunks) > 3
    assert all(chunk.text.startswith("||Year 2023|Year 2023|\n|---|---|---|\n|City|Q1|Q2|\n") for chunk in chunks)
    assert "Group A, City 59 — Year 2023, Q1: 59; Year 2023, Q2: 118" in chunks[-1].text
    assert all(len(chunk.text) <= 600 for chunk in chunks)

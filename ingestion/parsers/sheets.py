"""Spreadsheets: XLSX with openpyxl (read-only, so memory stays bounded, and the values Excel
cached for formulas) and CSV/TSV with the csv module, in whatever encoding and delimiter.

A sheet becomes pages of at most ROWS_PER_PAGE data rows. Each page is its headings and one
Markdown table that starts with the sheet's header row (its first non-empty row), so that every
page, and every chunk the chunker cuts from a long table, reads on its own.

- XLSX: heading_path is (sheet title,), one page per sheet; empty sheets are skipped.
- CSV: the file is one untitled sheet, so heading_path is (). Its delimiter (, ; tab |) is the
  one on which its rows agree on a number of columns; a file that mixes two is refused with a
  ParseError rather than indexed with a guess.
- A sheet longer than one page adds "rows 2–201" (the rows as a spreadsheet program numbers
  them) to each of its pages' heading_path, and as a heading block, so chunks keep it too.

Empty rows are dropped and trailing empty cells trimmed; `meta` holds the sheet's title (XLSX)
and the number of data rows on the page.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time, timedelta
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

from django.conf import settings
from django.utils.translation import gettext as _

from ingestion.encoding import decode_text
from ingestion.parsers.archive import check_archive
from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser, markdown_table
from ingestion.sniff import CSV, XLSX

ROWS_PER_PAGE = 200
MAX_CELLS = 2_000_000  # in one file, after trimming; more takes too long to index and search usefully
DELIMITERS = (",", ";", "\t", "|")
DELIMITER_NAMES = {",": ",", ";": ";", "\t": "tab", "|": "|"}
SAMPLE_CHARS = 32 * 1024  # the start of a CSV that decides its delimiter
SNIFF_CHARS = 8 * 1024  # csv.Sniffer's regexes get slow on long samples
# Share of sample rows that must hold the same number of values: a few ragged rows are fine.
MIN_AGREEMENT = 0.8
EXCEL_SEP_LINE = re.compile(r"\Asep=(.)\n")  # Excel's hint, written by some exports

Row = tuple[str, ...]
NumberedRow = tuple[int, Row]  # the row's number as a spreadsheet program shows it, its cells


class XlsxParser(Parser):
    mime_types = (XLSX,)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        check_archive(path, required=("xl/workbook.xml",))
        from openpyxl import load_workbook

        # A file object: openpyxl refuses a path whose name does not end in .xlsx, and stored
        # originals are named by their hash.
        handle = path.open("rb")
        try:
            workbook = load_workbook(handle, read_only=True, data_only=True)
        except Exception as exc:  # openpyxl raises KeyError, ValueError, XML errors... for a damaged file
            handle.close()
            raise ParseError(
                _("The spreadsheet cannot be opened: it is damaged or not really XLSX (%s).") % exc
            ) from exc
        try:
            _refuse_missing_sheets(path)
            sheets = workbook.worksheets
            # Refuse a huge workbook before indexing any of it, where it declares its size.
            if sum(_declared_cells(sheet) for sheet in sheets) > MAX_CELLS:
                raise _too_many_cells()
            budget = _Budget()
            number = 0
            for sheet in sheets:
                rows = _xlsx_rows(sheet)
                for page in _sheet_pages(rows, (sheet.title,), number + 1, {"sheet": sheet.title}, budget):
                    number = page.number
                    yield page
        finally:
            workbook.close()  # read-only mode keeps the archive open until then
            handle.close()
        if number == 0:
            raise ParseError(_("The spreadsheet has no data."))


def _refuse_missing_sheets(path: Path) -> None:
    """openpyxl skips a sheet whose part is missing from the archive without a word: the
    workbook would be indexed without it. A damaged workbook is refused instead."""
    from openpyxl.reader.workbook import WorkbookParser

    with zipfile.ZipFile(path) as archive:
        present = set(archive.namelist())
        parser = WorkbookParser(archive, "xl/workbook.xml")
        parser.parse()
        for sheet, rel in parser.find_sheets():
            if rel.target not in present:
                raise ParseError(
                    _(
                        "The spreadsheet is incomplete: the sheet “%(sheet)s” (part %(part)s) is missing. "
                        "Save it again from its program."
                    )
                    % {"sheet": sheet.name, "part": rel.target}
                )


def _declared_cells(sheet: Any) -> int:
    if not (sheet.max_row and sheet.max_column):
        return 0
    return int((sheet.max_row - sheet.min_row + 1) * (sheet.max_column - sheet.min_column + 1))


def _xlsx_rows(sheet: Any) -> Iterator[NumberedRow]:
    # Read what the sheet holds, not what its <dimension> claims: some programs write a wrong
    # one, and openpyxl would then cut rows and columns off.
    sheet.reset_dimensions()
    try:
        for number, cells in enumerate(sheet.iter_rows(), start=1):  # openpyxl fills missing rows
            yield number, tuple(_cell_text(cell) for cell in cells)
    except Exception as exc:
        raise ParseError(
            _("The sheet “%(sheet)s” cannot be read: %(error)s") % {"sheet": sheet.title, "error": exc}
        ) from exc


def _cell_text(cell: Any) -> str:
    value = cell.value
    if value is None:
        return ""
    if isinstance(value, str):  # the usual case first: a sheet has up to MAX_CELLS of these
        return _text(value)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        if "%" in (getattr(cell, "number_format", None) or ""):
            return _number(value * 100) + "%"
        return _number(value)
    if isinstance(value, datetime):
        if value.time() == time(0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return _text(str(value))


def _number(value: float) -> str:
    # 15 significant digits is what Excel shows: 0.1 + 0.2 reads 0.3, and 3.0 reads 3.
    return str(value) if isinstance(value, int) else format(value, ".15g")


def _text(value: str) -> str:
    return value.replace("\r\n", "\n").replace("\r", "\n").strip()


class CsvParser(Parser):
    mime_types = (CSV,)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        text, _encoding = decode_text(path.read_bytes())
        hint = EXCEL_SEP_LINE.match(text)
        if hint:
            text = text[hint.end() :]
        delimiter = hint.group(1) if hint else _delimiter(text)
        number = 0
        for page in _sheet_pages(_csv_rows(text, delimiter), (), 1, {}, _Budget()):
            number = page.number
            yield page
        if number == 0:
            raise ParseError(_("The CSV file has no data."))


def _csv_rows(text: str, delimiter: str) -> Iterator[NumberedRow]:
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    number = 0
    try:
        for number, cells in enumerate(reader, start=1):
            yield number, tuple(_text(cell) for cell in cells)
    except csv.Error as exc:
        raise ParseError(
            _("The CSV file cannot be read after row %(row)s: %(error)s") % {"row": number, "error": exc}
        ) from exc


class _Shape(NamedTuple):
    agreement: float  # the share of rows that hold `columns` values
    columns: int  # the most common number of values in a row


def _delimiter(text: str) -> str:
    """The delimiter whose rows agree best on a number of columns; csv.Sniffer breaks ties.
    A file whose rows only agree when two delimiters both count is refused: guessing one of
    them would index a table with the wrong columns."""
    sample = _sample(text, SAMPLE_CHARS)
    shapes = {delimiter: _shape(sample, delimiter) for delimiter in DELIMITERS}
    sniffed = _sniffed(_sample(text, SNIFF_CHARS))
    tabular = [delimiter for delimiter in DELIMITERS if shapes[delimiter].columns > 1]
    if not tabular:  # one column: split on whatever splits least
        return max(DELIMITERS, key=lambda delimiter: (shapes[delimiter].agreement, delimiter == sniffed))
    best = max(tabular, key=lambda delimiter: (*shapes[delimiter], delimiter == sniffed))
    _refuse_mixed(sample, best, shapes[best])
    if shapes[best].agreement < MIN_AGREEMENT:
        raise ParseError(
            _(
                "The CSV file has no consistent columns: its rows hold different numbers of values with any "
                "delimiter (comma, semicolon, tab or |). Check it in a spreadsheet program and save it as CSV again."
            )
        )
    return best


def _refuse_mixed(sample: str, best: str, shape: _Shape) -> None:
    """Raise when the rows agree better with `best` and another delimiter both counting."""
    for other in DELIMITERS:
        if other == best:
            continue
        merged = _shape(sample.replace(other, best), best)  # quoted values keep `other` as text
        if merged.agreement >= MIN_AGREEMENT and _better(merged, shape):
            first, second = sorted((best, other), key=DELIMITERS.index)
            raise ParseError(
                _(
                    "The CSV file mixes delimiters: both “%(first)s” and “%(second)s” separate its values. "
                    "Use one delimiter throughout and upload it again."
                )
                % {"first": DELIMITER_NAMES[first], "second": DELIMITER_NAMES[second]}
            )


def _sample(text: str, size: int) -> str:
    if len(text) <= size:
        return text
    cut = text.rfind("\n", 0, size)  # whole lines only
    return text[: cut + 1] if cut > 0 else text[:size]


def _shape(sample: str, delimiter: str) -> _Shape:
    try:
        reader = csv.reader(io.StringIO(sample), delimiter=delimiter)
        counts = [len(row) for row in reader if row]  # blank lines hold no row
    except csv.Error:
        return _Shape(0.0, 0)
    if not counts:
        return _Shape(0.0, 0)
    columns, agreeing = Counter(counts).most_common(1)[0]
    return _Shape(agreeing / len(counts), columns)


def _better(merged: _Shape, alone: _Shape) -> bool:
    return merged.agreement >= alone.agreement and merged.columns >= alone.columns and merged != alone


def _sniffed(sample: str) -> str | None:
    try:
        return csv.Sniffer().sniff(sample, delimiters="".join(DELIMITERS)).delimiter
    except csv.Error:
        return None


class _Budget:
    """Counts the cells read from one file (after trimming) and refuses it past MAX_CELLS."""

    def __init__(self) -> None:
        self.cells = 0

    def add(self, cells: int) -> None:
        self.cells += cells
        if self.cells > MAX_CELLS:
            raise _too_many_cells()


def _too_many_cells() -> ParseError:
    return ParseError(
        _("The spreadsheet has more than %(limit)s cells. Split it into smaller files and upload them.")
        % {"limit": f"{MAX_CELLS:,}"}
    )


def _sheet_pages(
    rows: Iterable[NumberedRow], path: tuple[str, ...], number: int, meta: dict[str, object], budget: _Budget
) -> Iterator[ParsedPage]:
    """Pages numbered from `number` for one sheet; nothing for a sheet without data."""
    filled = _filled(rows, budget)
    first = next(filled, None)
    if first is None:
        return
    header = first[1]
    batches = iter(lambda: list(islice(filled, ROWS_PER_PAGE)), [])
    pending = next(batches, [])
    split = False  # whether this sheet takes more than one page; known once a second batch exists
    for following in batches:
        split = True
        yield _page(number, path, header, pending, split, meta)
        number += 1
        pending = following
    yield _page(number, path, header, pending, split, meta)


def _filled(rows: Iterable[NumberedRow], budget: _Budget) -> Iterator[NumberedRow]:
    for number, cells in rows:
        end = len(cells)
        while end and not cells[end - 1]:
            end -= 1
        if end:
            budget.add(end)
            yield number, cells[:end]


def _page(
    number: int, path: tuple[str, ...], header: Row, rows: list[NumberedRow], split: bool, meta: dict[str, object]
) -> ParsedPage:
    if number > settings.MAX_PAGES:
        raise ParseError(
            _("The spreadsheet makes more than %(limit)s pages (PORTAL_MAX_PAGES). Split it into smaller files.")
            % {"limit": f"{settings.MAX_PAGES:,}"}
        )
    if split:
        path = (*path, f"rows {rows[0][0]}–{rows[-1][0]}")
    lines = (header, *(cells for _row, cells in rows))
    width = max(len(cells) for cells in lines)
    table = tuple(_padded(cells, width) for cells in lines)
    headings = tuple(Block("heading", title, level=level) for level, title in enumerate(path, start=1))
    return ParsedPage(
        number=number,
        kind="text_block",
        blocks=(*headings, Block("table", markdown_table(table), cells=table)),
        heading_path=path,
        meta={**meta, "rows": len(rows)},
    )


def _padded(cells: Row, width: int) -> Row:
    return cells + ("",) * (width - len(cells))

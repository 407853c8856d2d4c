"""Tables cell by cell: a table's grid rebuilt from the words inside its box, its column
headers kept at every level, and each row said as a sentence that carries its row header and
its full column path ("AIC — GLM, NB, ML, fm_nbin: 24359.1"), so a question about one cell
finds the row that holds it.

Why words rather than the ruling lines: statistical tables (booktabs, R's ftable, the U.S.
Census's dotted leaders) draw few or no lines between cells, so a grid from lines merges a
whole column into one cell, and a grid from text edges splits words into letters. Words keep
their glyphs whole; rows are the lines they sit on, columns the gaps that no row crosses.
bench/tables.py measures each strategy on hand-checked cells (docs/tables.md).
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# A cell that holds a drawn mark (a check mark or a symbol drawn as vector graphics or an
# image) and no text: said so in the chunk, so an empty-looking cell is not read as empty.
DRAWING = "[drawing]"
NUMBER = re.compile(r"^[\[(<>≤≥~±+\-−–]*[$€£¥]?\d[\d.,:/ ]*%?[\])*†‡a-z]?$")
WORD_GAP = 0.6  # words closer than this share of the line height belong to one cell
MAX_HEADER_ROWS = 6
CENTRED = 2.5  # points: a header label whose middle is this close to a run of columns' spans them
LEADERS = re.compile(r"(?:\s*[.·…]){3,}\s*$")  # dotted leaders after a row label

Word = tuple[float, float, float, float, str]  # x0, y0, x1, y1, text
Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Grid:
    rows: tuple[tuple[str, ...], ...]  # header rows first
    header_rows: int
    boxes: tuple[tuple[Box, ...], ...]  # each cell's area, row by row


@dataclass(frozen=True)
class Row:
    index: int  # the row's position in the table's rows
    label: str  # the row header, with its group's label before it
    values: tuple[tuple[str, str], ...]  # (column path, cell text) of the row's filled cells

    @property
    def sentence(self) -> str:
        said = "; ".join(f"{path}: {text}" if path else text for path, text in self.values)
        return f"{self.label} — {said}" if self.label else said


# Cells that are values though not numbers: marks of yes, no and not applicable.
MARKS = {"√", "✓", "✔", "✗", "✘", "×", "—", "–", "-", "•", "●", "○", DRAWING}


def is_number(text: str) -> bool:
    return bool(NUMBER.match(text.strip().replace("\u2009", "").replace("\xa0", "")))


def is_value(text: str) -> bool:
    """A number, or a mark standing for one ("√", "—"; a superscript note mark may follow)."""
    text = text.strip()
    return is_number(text) or text in MARKS or (text[:-1] in MARKS and text[-1:].isdigit())


# -- the grid from words ---------------------------------------------------------------------


def grid_from_words(words: Sequence[Word], area: Box, rules: Sequence[Box] = ()) -> Grid | None:
    """The table that `words` (those inside one table's box, `area`) form, or None when they
    do not form one (fewer than two rows or columns). `rules` are the ruling lines drawn in the box:
    vertical ones bound the spans of header labels, horizontal ones end the header."""
    lines = _lines(words)
    if len(lines) < 2:
        return None
    segments = [_segments(line) for line in lines]
    columns = _columns(segments)
    if len(columns) < 2:
        return None
    raw = [_place(line_segments, columns) for line_segments in segments]
    tops = [statistics.median(w[1] for w in line) for line in lines]  # a tall glyph's top is not the line's
    bottoms = [max(w[3] for w in line) for line in lines]
    rows, spans = _merge_wrapped(raw, list(zip(tops, bottoms, strict=True)))
    depth = _header_rows(rows, spans, rules)
    verticals = sorted((r[0] + r[2]) / 2 for r in rules if abs(r[2] - r[0]) < 1.5 and abs(r[3] - r[1]) > 1.5)
    framed = _framed(columns, segments[:depth])
    for index in range(max(depth - 1, 0)):
        filled = [cell for cell in rows[index] if cell]
        if len(filled) == 1:  # a title over the table ("IL1B_511 locus"): it names every row
            rows[index] = [filled[0]] + [""] * (len(columns) - 1)
        else:
            rows[index] = _spread(rows[index], _centres(segments[index], columns), framed, verticals)
    boxes = tuple(
        tuple((x0, top, x1, bottom) for x0, x1 in _between(columns, area[0], area[2]))
        for top, bottom in _between(spans, area[1], area[3])
    )
    return Grid(tuple(tuple(row) for row in rows), depth, boxes)


def _between(bands: Sequence[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """Bands widened to meet halfway across the gaps between them, the outer ones to the
    table's edges: a cell's area, where a drawn mark may sit off its column's text."""
    cuts = [start, *((a[1] + b[0]) / 2 for a, b in itertools.pairwise(bands)), end]
    return [(min(cuts[i], band[0]), max(cuts[i + 1], band[1])) for i, band in enumerate(bands)]


def _lines(words: Sequence[Word]) -> list[list[Word]]:
    """Words grouped into the lines they sit on: a word joins a line that ends where it ends,
    or whose height it overlaps by half (a subscript, a raised decimal point). A tall glyph
    (a radical sign used as a check mark) reaches into the line above, so it joins by its
    foot only."""
    usual = statistics.median([w[3] - w[1] for w in words]) if words else 0.0
    lines: list[list[Word]] = []
    bounds: list[tuple[float, float, float]] = []  # top, bottom, the first word's bottom
    for word in sorted(words, key=lambda w: ((w[1] + w[3]) / 2, w[0])):
        if not word[4].strip():
            continue
        top, bottom = word[1], word[3]
        tall = bottom - top > 1.3 * usual
        for index, (line_top, line_bottom, foot) in enumerate(bounds):
            overlap = min(bottom, line_bottom) - max(top, line_top)
            level = abs(bottom - foot) <= 0.3 * usual
            if level or (not tall and overlap >= 0.5 * min(bottom - top, line_bottom - line_top)):
                lines[index].append(word)
                bounds[index] = (min(top, line_top) if not tall else line_top, max(bottom, line_bottom), foot)
                break
        else:
            lines.append([word])
            bounds.append((top if not tall else bottom - usual, bottom, bottom))
    order = sorted(range(len(lines)), key=lambda i: bounds[i][0])
    return [sorted(lines[i], key=lambda w: w[0]) for i in order]


def _segments(line: list[Word]) -> list[Word]:
    """Neighbouring words of a line joined into the cells they make ("Early Onset")."""
    height = statistics.median(w[3] - w[1] for w in line)
    joined: list[Word] = []
    for word in line:
        # Two numbers are two cells however close: R prints its columns one space apart.
        apart = is_number(word[4]) and is_number(joined[-1][4].rsplit(" ", 1)[-1]) if joined else True
        if joined and not apart and word[0] - joined[-1][2] < WORD_GAP * height:
            x0, y0, x1, y1, text = joined[-1]
            joined[-1] = (x0, min(y0, word[1]), max(x1, word[2]), max(y1, word[3]), f"{text} {word[4]}")
        else:
            joined.append(word)
    return joined


def _columns(segments: list[list[Word]]) -> list[tuple[float, float]]:
    """Column intervals: the x-ranges that the cells of the fuller lines cover, merged where
    they overlap; the lines with numbers only, where there are such. Lines with fewer cells
    than most (a spanning header, a group label) would bridge columns, so they do not shape
    them."""
    numeric = [line for line in segments if sum(1 for s in line if is_number(s[4])) >= 2]
    if len(numeric) >= 2:  # the body's numbers shape the columns; header labels are placed on them
        segments = numeric
    counts = [len(line) for line in segments]
    enough = max(2, int(statistics.median(counts)))
    intervals = sorted((s[0], s[2]) for line in segments if len(line) >= enough for s in line)
    columns: list[tuple[float, float]] = []
    for x0, x1 in intervals:
        if columns and x0 <= columns[-1][1]:
            columns[-1] = (columns[-1][0], max(columns[-1][1], x1))
        else:
            columns.append((x0, x1))
    return columns


def _place(line: list[Word], columns: list[tuple[float, float]]) -> list[str]:
    """A line's cells in their columns: each by the column it overlaps most; one that overlaps
    none continues the cell before it, or else goes to the nearest column."""
    cells = [""] * len(columns)
    for (_x0, _y0, _x1, _y1, text), index in zip(line, _columns_of(line, columns), strict=True):
        cells[index] = f"{cells[index]} {text}".strip()
    return [LEADERS.sub("", cell) for cell in cells]


def _columns_of(line: list[Word], columns: list[tuple[float, float]]) -> list[int]:
    found: list[int] = []
    for x0, _y0, x1, _y1, _text in line:

        def fit(index: int, x0: float = x0, x1: float = x1) -> float:
            c0, c1 = columns[index]
            overlap = min(x1, c1) - max(x0, c0)
            return overlap if overlap > 0 else -min(abs(c0 - x1), abs(x0 - c1))

        best = max(range(len(columns)), key=fit)
        if fit(best) <= 0 and found:  # in no column: the rest of the cell before it
            best = found[-1]
        found.append(best)
    return found


def _centres(line: list[Word], columns: list[tuple[float, float]]) -> dict[int, float]:
    """Where each column's label in a header line is centred."""
    centres: dict[int, float] = {}
    for (x0, _y0, x1, _y1, _text), index in zip(line, _columns_of(line, columns), strict=True):
        centres.setdefault(index, (x0 + x1) / 2)
    return centres


def _merge_wrapped(
    rows: list[list[str]], spans: list[tuple[float, float]]
) -> tuple[list[list[str]], list[tuple[float, float]]]:
    """A line with an empty first cell and no number continues the row above it when that
    row's own text wrapped (a long description in a two-column list)."""
    merged: list[list[str]] = []
    bounds: list[tuple[float, float]] = []
    numeric = any(is_number(cell) for row in rows for cell in row if cell)
    for row, span in zip(rows, spans, strict=True):
        wraps = merged and not row[0] and not numeric and sum(1 for cell in row if cell) == 1
        if wraps:
            merged[-1] = [f"{a} {b}".strip() for a, b in zip(merged[-1], row, strict=True)]
            bounds[-1] = (bounds[-1][0], span[1])
        else:
            merged.append(list(row))
            bounds.append(span)
    return merged, bounds


def _header_rows(rows: list[list[str]], spans: list[tuple[float, float]], rules: Sequence[Box]) -> int:
    """How many rows head the table: those above the first full-width rule under the first
    row, else the leading rows without a number when the rows below them hold numbers."""
    width = max((r[2] - r[0] for r in rules), default=0.0)
    horizontals = sorted(r[1] for r in rules if abs(r[3] - r[1]) < 1.5 and r[2] - r[0] >= 0.5 * width)
    below_first = [y for y in horizontals if y > spans[0][1] - 1]
    if below_first:
        above = sum(1 for _top, bottom in spans if bottom <= below_first[0] + 1)
        if 1 <= above <= MAX_HEADER_ROWS and above < len(rows):
            return above
    return header_depth(rows)


def header_depth(rows: Sequence[Sequence[str]]) -> int:
    """Header rows of a table as cells alone tell: the leading rows with no number in their
    value cells, up to a row with a label alone (a group), when a later row has a number (at
    most MAX_HEADER_ROWS); else the first row. A header of bare years reads as numbers: one row."""

    def numeric(row: Sequence[str]) -> bool:
        return any(is_value(cell) for cell in row[1:] if cell)

    def group(row: Sequence[str]) -> bool:  # a label alone starts the body: "Violent crime"
        return bool(row) and bool(row[0].strip()) and not any(cell.strip() for cell in row[1:])

    if not any(numeric(row) for row in rows[1:]):
        return 1
    depth = 1 if rows and not numeric(rows[0]) else 0
    while depth < min(len(rows) - 1, MAX_HEADER_ROWS) and not numeric(rows[depth]) and not group(rows[depth]):
        depth += 1
    return max(depth, 1)


def _framed(columns: list[tuple[float, float]], header: list[list[Word]]) -> list[tuple[float, float]]:
    """Columns widened to their own header labels (a label over one column only): the body's
    numbers alone, right-aligned, do not show where a column's box starts."""
    framed = list(columns)
    for line in header:
        for x0, _y0, x1, _y1, _text in line:
            over = [i for i, (c0, c1) in enumerate(columns) if min(x1, c1) > max(x0, c0)]
            if len(over) == 1:
                c0, c1 = framed[over[0]]
                framed[over[0]] = (min(c0, x0), max(c1, x1))
    return framed


def _spread(
    row: list[str], labels: dict[int, float], columns: list[tuple[float, float]], verticals: Sequence[float]
) -> list[str]:
    """An upper header row with each label over every column it spans. A label is centred
    over its span (LaTeX's multicolumn): it takes the widest run of columns, between the same
    vertical rules and free of other labels, whose middle is within a few points of its own;
    columns still without a label take the nearest one to their left (R's ftable sets a label
    over the first of its columns). The first column, the row headers' own, keeps its cell."""
    spread = list(row)
    centres = [(x0 + x1) / 2 for x0, x1 in columns]
    labelled = [i for i in range(1, len(row)) if row[i]]

    def region(index: int) -> int:
        return sum(1 for v in verticals if v < centres[index])

    for own in labelled:
        others = set(labelled) - {own}
        centre = labels.get(own, centres[own])
        best, best_width = (own, own), 0
        for first in range(own, 0, -1):
            if first in others or region(first) != region(own):
                break
            for last in range(own, len(row)):
                if last in others or region(last) != region(own):
                    break
                middle = (columns[first][0] + columns[last][1]) / 2
                if (
                    abs(middle - centre) <= CENTRED
                    and last - first > best_width
                    and not any(spread[i] and i != own for i in range(first, last + 1))
                ):
                    best, best_width = (first, last), last - first
        for index in range(best[0], best[1] + 1):
            spread[index] = row[own]
    for index in range(2, len(row)):
        if not spread[index] and spread[index - 1] and region(index) == region(index - 1):
            spread[index] = spread[index - 1]
    return spread


# -- rows as sentences -----------------------------------------------------------------------


def column_paths(rows: Sequence[Sequence[str]], depth: int, *, inferred: bool = False) -> list[str]:
    """Each column's headers from the top, repeats dropped: "GLM, Poisson, ML, fm_pois".
    `inferred`: the header rows were guessed from the cells, so only the last one and those
    above it that span columns (a label repeated over its columns, as merged cells read) make
    the path; notes written above a sheet's header do not."""
    width = max((len(row) for row in rows), default=0)
    levels = [row for index, row in enumerate(rows[:depth]) if not inferred or index == depth - 1 or _spans(row)]
    paths = []
    for column in range(width):
        parts: list[str] = []
        for row in levels:
            text = row[column].strip() if column < len(row) else ""
            if text and (not parts or parts[-1] != text):
                parts.append(text)
        paths.append(", ".join(parts))
    return paths


def _spans(row: Sequence[str]) -> bool:
    values = [cell.strip() for cell in row[1:]]
    return any(a and a == b for a, b in itertools.pairwise(values))


def table_rows(rows: Sequence[Sequence[str]], depth: int | None = None) -> list[Row]:
    """The body rows of a table as (row header, column path: value) rows.

    A header row with only its first cell filled is a title and names every row.
    The row header is the row's leading cells up to its first value; a row with a label and
    nothing else labels the rows under it (a group: "Correct calculations:"); a row with no
    label continues the one above (standard errors under estimates); a row that repeats the
    header's column labels starts a new block, its first cell heading the rows below it
    (R's ftable and census tables stack "Male" and "Female" blocks that way)."""
    if not rows:
        return []
    inferred = depth is None
    depth = header_depth(rows) if depth is None else depth
    header = [list(row) for row in rows[:depth]]
    paths = column_paths(header, depth, inferred=inferred)
    group, previous = "", ""
    titles = [row[0].strip() for row in header[:-1] if row[0].strip() and not any(c.strip() for c in row[1:])]
    # Stacked blocks: the header's first cell names the first block, each repeat the next one.
    stacked = any(_repeats_header([c.strip() for c in row], header) for row in rows[depth:])
    block = header[-1][0].strip() if stacked and header and header[-1] else ""
    found: list[Row] = []
    for index in range(depth, len(rows)):
        cells = [cell.strip() for cell in rows[index]]
        if _repeats_header(cells, header):
            header[-1], group, block = cells, "", cells[0]
            continue
        filled = [i for i, cell in enumerate(cells) if cell]
        if not filled:
            continue
        lead = _lead(cells)
        if len(filled) == 1 and filled[0] < max(len(cells) - 1, 1) and lead:
            group = cells[filled[0]].rstrip(":：")
            continue
        label = ", ".join(cells[:lead]).strip(", ") or previous
        previous = label
        values = tuple((paths[i] if i < len(paths) else "", cells[i]) for i in range(lead, len(cells)) if cells[i])
        if values:
            above = _block_label(header[-1], cells, lead) or block
            full = ", ".join(part for part in (*titles, above, group, label) if part)
            found.append(Row(index, full, values))
    return found


def row_sentences(rows: Sequence[Sequence[str]]) -> list[str]:
    """Each body row of a table as one sentence (see table_rows)."""
    return [row.sentence for row in table_rows(rows)]


def _lead(cells: list[str]) -> int:
    """How many leading cells label the row: those before the first number, at least the
    first cell. Empty leading cells count (a block's first column)."""
    for index, cell in enumerate(cells):
        if cell and is_number(cell):
            return max(index, 1)  # a number in the first column labels its row: "(40,51]", "2019"
    return 1


def _block_label(header: list[str], cells: list[str], lead: int) -> str:
    """A label in the header over an empty label column left of the row's own label ("Male"
    over the column left of the genotypes) names the rows under it."""
    own = max((i for i in range(min(lead, len(cells))) if cells[i]), default=-1)
    return ", ".join(header[i] for i in range(min(own, len(header))) if header[i] and not cells[i])


def _repeats_header(cells: list[str], header: list[list[str]]) -> bool:
    if not header:
        return False
    last = [cell.strip() for cell in header[-1]]
    tail = [cell for cell in last[1:] if cell]
    return len(tail) >= 2 and [cell for cell in cells[1:] if cell] == tail and cells != last


# -- drawn cells -------------------------------------------------------------------------------


def drawn_cells(grid: Grid, marks: Sequence[Box]) -> set[tuple[int, int]]:
    """Empty cells with a drawn mark inside (the centre of a small drawing or image)."""
    found = set()
    for r, (row, boxes) in enumerate(zip(grid.rows, grid.boxes, strict=True)):
        for c, (text, (x0, y0, x1, y1)) in enumerate(zip(row, boxes, strict=True)):
            if text:
                continue
            if any(x0 <= (m[0] + m[2]) / 2 <= x1 and y0 - 2 <= (m[1] + m[3]) / 2 <= y1 + 2 for m in marks):
                found.add((r, c))
    return found

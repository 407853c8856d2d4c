"""The order to read OCR lines in, and the lines whose direction the pixels do not settle.

The OCR returns lines top to bottom. That is right for one column of text and for tables,
wrong for a page set in columns (it reads across the gutter, a line from each column in
turn) and for vertical CJK text (columns read right to left). `order` fixes both and keeps
every other page as the OCR returned it. `readings` adds, after a short CJK line on a sign
(a plaque written right to left reads backwards to an OCR that reads left to right), the
same line reversed, so search finds either order. docs/ocr.md has the figures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from statistics import median

from common.text import CJK, CJK_CHARS
from ingestion.parsers.base import BBox

Line = tuple[str, BBox]

TALL = 1.5  # height / width from which a line of CJK text is a vertical column (RapidOCR's own)
WIDE = 0.55  # a line wider than this share of the text is a heading or a one-column passage
SIDE = 0.3  # each column of running text is at least this share of the text's width
MIN_COLUMN_LINES = 3
SIGN_LINES = 6  # a picture with at most this many lines is a sign, not a page of text
SHORT = 6  # a CJK line of at most this many characters can be read either way

IDEOGRAPHS = re.compile(rf"[{CJK_CHARS}]{{2,{SHORT}}}")


def order(lines: Sequence[Line]) -> list[Line]:
    """The lines in reading order: columns of horizontal text left to right, each top to
    bottom; vertical CJK columns right to left, each top to bottom."""
    vertical = [line for line in lines if is_vertical(line)]
    horizontal = _columns([line for line in lines if not is_vertical(line)])
    if not vertical:
        return horizontal
    block = _right_to_left(vertical)
    top = min(box[1] for _text, box in vertical)
    at = next((n for n, (_text, box) in enumerate(horizontal) if box[1] > top), len(horizontal))
    return horizontal[:at] + block + horizontal[at:]


def is_vertical(line: Line) -> bool:
    text, (x0, y0, x1, y1) = line
    return len(text.strip()) >= 2 and (y1 - y0) >= TALL * (x1 - x0) and bool(CJK.search(text))


def ambiguous(text: str) -> bool:
    """A short run of CJK characters and nothing else (no punctuation, digits or Latin
    letters to show which way it runs)."""
    return IDEOGRAPHS.fullmatch(text.strip()) is not None


def is_sign(lines: Sequence[Line]) -> bool:
    """A picture of a few lines (a sign, a plaque, a label), not a page of text: on a page,
    the lines around a short one settle which way the text runs."""
    return 0 < len(lines) <= SIGN_LINES


def readings(line: Line, *, sign: bool) -> list[str]:
    """The line's text and, for an ambiguous horizontal line on a sign, the same characters
    reversed: "寺林少" read off a plaque written right to left also gives "少林寺"."""
    if sign and not is_vertical(line) and ambiguous(line[0]):
        return [line[0], line[0].strip()[::-1]]
    return [line[0]]


def _right_to_left(lines: Sequence[Line]) -> list[Line]:
    """Vertical lines grouped into columns by the x they share, right to left."""
    columns: list[tuple[float, float, list[Line]]] = []
    for line in sorted(lines, key=lambda line: -(line[1][0] + line[1][2])):
        x0, x1 = line[1][0], line[1][2]
        if columns:
            c0, c1, members = columns[-1]
            if min(x1, c1) - max(x0, c0) > 0.5 * min(x1 - x0, c1 - c0):
                columns[-1] = (min(x0, c0), max(x1, c1), [*members, line])
                continue
        columns.append((x0, x1, [line]))
    return [line for _c0, _c1, members in columns for line in sorted(members, key=lambda line: line[1][1])]


def _columns(lines: list[Line]) -> list[Line]:
    """Lines set in columns read column by column; anything else as given."""
    if len(lines) < 2 * MIN_COLUMN_LINES:
        return lines
    left_edge, right_edge = min(box[0] for _t, box in lines), max(box[2] for _t, box in lines)
    width = right_edge - left_edge
    wide = {n for n, (_t, box) in enumerate(lines) if box[2] - box[0] > WIDE * width}
    narrow = [line for n, line in enumerate(lines) if n not in wide]
    gutter = _gutter(narrow, left_edge, right_edge)
    if gutter is None:
        return lines
    left = [line for line in narrow if _centre(line) < gutter]
    right = [line for line in narrow if _centre(line) >= gutter]
    if not all(_one_column(side, gutter, width, side=name) for name, side in (("left", left), ("right", right))):
        return lines
    # Headings and passages across the whole width cut the page into bands; within a band,
    # the left column, then the right.
    out: list[Line] = []
    band: list[Line] = []
    for n, line in sorted(enumerate(lines), key=lambda item: item[1][1][1]):
        if n in wide:
            out.extend(_flush(band, gutter))
            band = []
            out.append(line)
        else:
            band.append(line)
    out.extend(_flush(band, gutter))
    return out


def _flush(band: list[Line], gutter: float) -> list[Line]:
    left = [line for line in band if _centre(line) < gutter]
    right = [line for line in band if _centre(line) >= gutter]
    return _top_down(left) + _top_down(right)


def _gutter(lines: Sequence[Line], left_edge: float, right_edge: float) -> float | None:
    """The x in the middle 60 % of the text that the fewest lines cross, where almost none
    do (the OCR joins a line now and then across a narrow gutter)."""
    width = right_edge - left_edge
    start, end = int(left_edge + 0.2 * width), int(right_edge - 0.2 * width)
    if end <= start:
        return None
    crossing = [0] * (end - start + 1)
    for _text, (x0, _y0, x1, _y1) in lines:
        for x in range(max(start, int(x0)), min(end, int(x1)) + 1):
            crossing[x - start] += 1
    fewest = min(crossing)
    if fewest > max(1, len(lines) // 20):
        return None
    # The middle of the widest run of x that so few lines cross.
    best, run_start, best_span = None, None, 0
    for x, count in enumerate([*crossing, fewest + 1]):
        if count == fewest and run_start is None:
            run_start = x
        elif count != fewest and run_start is not None:
            if x - run_start > best_span:
                best, best_span = start + (run_start + x - 1) / 2, x - run_start
            run_start = None
    return best


def _one_column(column: Sequence[Line], gutter: float, width: float, *, side: str) -> bool:
    """A column of text, not cells of a table: a good share of the text's width, and no
    gutter of its own (a table of three or more columns has one on one side or the other;
    a page of three or more columns is left as it was for that reason)."""
    inside = [box for _t, box in column if (box[2] <= gutter if side == "left" else box[0] >= gutter)]
    if len(inside) < MIN_COLUMN_LINES:
        return False
    x0, x1 = min(box[0] for box in inside), max(box[2] for box in inside)
    return x1 - x0 >= SIDE * width and _gutter(column, x0, x1) is None


def _centre(line: Line) -> float:
    return (line[1][0] + line[1][2]) / 2


def _top_down(lines: Sequence[Line]) -> list[Line]:
    """Top to bottom; lines on one row (their middles within half a line) left to right."""
    if not lines:
        return []
    half = median(box[3] - box[1] for _t, box in lines) / 2
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda line: (line[1][1] + line[1][3]) / 2):
        middle = (line[1][1] + line[1][3]) / 2
        if rows and abs(middle - (rows[-1][0][1][1] + rows[-1][0][1][3]) / 2) <= half:
            rows[-1].append(line)
        else:
            rows.append([line])
    return [line for row in rows for line in sorted(row, key=lambda line: line[1][0])]

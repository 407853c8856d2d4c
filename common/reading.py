"""Chunk text as a person reads it: the start it repeats from the chunk before trimmed, and
a PDF's hard line breaks reflowed into paragraphs (a word hyphenated across lines joined).
For showing only: the stored and indexed text stays as it was cut.

Chunks overlap (ingestion.chunking.split_text starts each one up to the collection's
overlap before the previous one ends, at any character), so a page's chunk list read in
order would say each overlap twice, the second time often from the middle of a word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from common.text import is_cjk

# The fewest repeated characters taken for an overlap wherever they start. A shorter match
# counts only when it starts inside a word of the chunk before ("su|ch" then "ch things"):
# a short match at a word's start ("… in the" then "the end") may be the text itself.
MIN_OVERLAP = 8

# A line at most this share of the chunk's longest line ends its paragraph (or is a line
# of code, a heading or a table row): its break is kept.
SHORT_LINE = 0.6

# A line starting a list item, a shell prompt or a quote keeps the break before it.
LINE_START = re.compile(r"(?:[•·▪‣◦●○■□\-*–—>$#]|\d{1,3}[.)、]|\(?[a-zA-Z\d]\)|[（(][一二三四五六七八九十\d]+[)）])\s?")
# Punctuation that takes no space before or after it when lines are joined (Chinese).
CJK_MARKS = "，。、；：！？（）《》「」『』“”‘’【】…—"


def readable(texts: Sequence[str], reflow: bool = False) -> list[str]:
    """Each of a page's chunk texts, in order, without what it repeats from the one before;
    with `reflow`, its lines joined into paragraphs (for PDF pages)."""
    shown = []
    previous = ""
    for text in texts:
        part = text[repeated(previous, text) :].lstrip()
        shown.append(reflowed(part) if reflow else part)
        previous = text
    return shown


def repeated(previous: str, text: str) -> int:
    """How many characters at the start of `text` repeat the end of `previous` (0 if none).
    Of the repeats possible, the shortest of at least MIN_OVERLAP characters: a text that
    repeats itself (a rule of dots, a refrain) matches at several lengths, and showing a
    few words twice is better than leaving some out."""
    if not previous or not text:
        return 0
    short = 0
    start = previous.rfind(text[0])
    while start >= 0 and len(previous) - start <= len(text):
        size = len(previous) - start
        if text.startswith(previous[start:]):
            if size >= MIN_OVERLAP:
                return size
            if _inside_word(previous, start):
                short = size
        start = previous.rfind(text[0], 0, start)
    return short


def _inside_word(text: str, index: int) -> bool:
    """Whether `text[index]` continues a word begun before it (not for Chinese: each
    character is a boundary)."""
    return 0 < index < len(text) and _word_char(text[index - 1]) and _word_char(text[index])


def _word_char(char: str) -> bool:
    return char.isalnum() and not is_cjk(char)


def reflowed(text: str) -> str:
    """`text` with each paragraph's lines joined: by a space, by nothing between Chinese
    characters, and a word hyphenated at a line's end made whole again. Blank lines, short
    lines and lines that start a list item or a prompt keep their breaks."""
    paragraphs = []
    for number, paragraph in enumerate(text.split("\n\n")):
        lines = [line.strip() for line in paragraph.split("\n")]
        widest = max(len(line) for line in lines)
        joined = lines[0]
        for index, line in enumerate(lines[1:]):
            before = lines[index]
            # The chunk's first line may begin mid-line: its length says nothing.
            short = len(before) <= SHORT_LINE * widest and not (number == 0 and index == 0)
            if not line or not before or short or LINE_START.match(line):
                joined += "\n" + line
            elif before.endswith("-") and len(before) > 1 and before[-2].isalpha():
                # "in-" "stalled" is one word; "Debian-" "Policy" a compound that keeps its dash.
                joined = (joined[:-1] if line[0].islower() else joined) + line
            elif _no_space(before[-1]) or _no_space(line[0]):
                joined += line
            else:
                joined += " " + line
        paragraphs.append(joined)
    return "\n\n".join(paragraphs)


def _no_space(char: str) -> bool:
    return is_cjk(char) or char in CJK_MARKS

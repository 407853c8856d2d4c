"""Values as the portal compares them: an answer's number against a page's, a question's
name against a passage's, whatever the width, case or digit grouping each was written in."""

from __future__ import annotations

import re
import unicodedata

# Digits grouped by thousands: "1,234,567" and "1 234" read as "1234567" and "1234".
THOUSANDS = re.compile(r"(?<=\d)[,\u00a0\u202f ](?=\d{3}(?!\d))")


def normalise(text: str) -> str:
    """For comparing values: half-width and ungrouped (`plain`), case-folded, whitespace
    collapsed."""
    return " ".join(plain(text).casefold().split())


def plain(text: str) -> str:
    """NFKC (full-width letters, digits and punctuation become half-width), thousands
    separators dropped: "１０，０８１" is "10081"."""
    return THOUSANDS.sub("", unicodedata.normalize("NFKC", text))


NUMBER = re.compile(r"\d+(?:[.,:/\-]\d+)*")
# Between a number's parts: a dash may be any dash or a tilde (70-79, 70–79, 70~79).
SEPARATORS = {"-": "[-\u2010-\u2015~～]", ".": r"\.", ":": ":", "/": "/", ",": ","}


def number_in(number: str, text: str) -> bool:
    """Whether `text` (normalised) holds `number` (normalised) as a whole number: 3.7 is not
    in 13.75 nor in 3.75; 4.6 is in 4.6.0 (a version and its first release)."""
    pattern = "".join(SEPARATORS.get(char, re.escape(char)) for char in number)
    return re.search(rf"(?<![\d.]){pattern}(?!\d)", text) is not None

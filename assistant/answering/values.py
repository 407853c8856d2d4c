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

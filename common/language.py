"""Which language a question is in: answers and prompts follow it."""

from __future__ import annotations

from typing import Literal

from common.text import cjk_count

Language = Literal["zh", "en"]


def language_of(text: str) -> Language:
    """Chinese when CJK characters make up a real part of the text (a Chinese question with
    an English product name is still Chinese)."""
    sample = text[:2000]
    cjk = cjk_count(sample)
    letters = sum(char.isalpha() for char in sample)
    return "zh" if cjk and cjk * 4 >= letters else "en"

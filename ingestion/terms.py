"""Terms for the lexical index: jieba's search-mode segmentation (rjieba), lower-cased, with
punctuation and spaces dropped. Digits are kept as their own terms ("14号" gives "14" and
"号"), so numbers and dates match literally."""

from __future__ import annotations

import unicodedata
from collections import Counter


def terms(text: str) -> Counter[str]:
    import rjieba

    counts: Counter[str] = Counter()
    for token in rjieba.cut_for_search(text):
        token = token.strip().lower()
        if token and any(_is_word_char(char) for char in token):
            counts[token] += 1
    return counts


def _is_word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"

"""Terms for the lexical index: jieba's search-mode segmentation (rjieba) of NFKC-folded text, lower-cased, with
punctuation and spaces dropped. Digits are kept as their own terms ("14号" gives "14" and
"号"), so numbers and dates match literally."""

from __future__ import annotations

import unicodedata
from collections import Counter


def terms(text: str) -> Counter[str]:
    import rjieba

    counts: Counter[str] = Counter()
    # NFKC: PDFs often carry CJK compatibility characters (北 as U+F963) and full-width
    # digits; folded, "北京" and "１４号" match what people type.
    for token in rjieba.cut_for_search(unicodedata.normalize("NFKC", text)):
        token = token.strip().lower()
        if token and any(_is_word_char(char) for char in token):
            counts[token] += 1
    return counts


def _is_word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"

"""Terms for the lexical index: jieba's search-mode segmentation (rjieba) of NFKC-folded
text, lower-cased, with punctuation, spaces and common function words (STOPWORDS) dropped.
Digits are kept as their own terms ("14号" gives "14" and "号"), so numbers and dates match
literally."""

from __future__ import annotations

import unicodedata
from collections import Counter

# Function words in most chunks and most questions: they cost the lexical channel the most
# work (every chunk holding "the" or "的" is a candidate) and add almost nothing to a score.
STOPWORDS = frozenset(
    (  # noqa: SIM905 (two readable lines, not 120 quoted words)
        "a an the and or of to in on at by for from with as is are was were be been being it its this that "
        "these those i you he she we they my your our their me us them do does did what which who whom how "
        "can could will would shall should may might there here then than so if not no "
        "的 地 得 了 着 过 是 在 和 与 及 或 也 都 就 而 之 被 把 对 从 向 吗 呢 吧 啊 呀 哦 嘛 "
        "我 你 他 她 它 我们 你们 他们 这 那 这个 那个 这些 那些 一个 什么 怎么 怎样 如何 哪些 哪个 请问"
    ).split()
)


def terms(text: str) -> Counter[str]:
    import rjieba

    counts: Counter[str] = Counter()
    # NFKC: PDFs often carry CJK compatibility characters (北 as U+F963) and full-width
    # digits; folded, "北京" and "１４号" match what people type.
    for token in rjieba.cut_for_search(unicodedata.normalize("NFKC", text)):
        token = token.strip().lower()
        if token and token not in STOPWORDS and any(_is_word_char(char) for char in token):
            counts[token] += 1
    return counts


def words(text: str) -> list[str]:
    """The words of `text` as jieba's precise mode cuts them (one cut, no sub-words), NFKC-
    folded and lower-cased, punctuation and spaces dropped: a question's words, to check
    against a passage (not for the index, which `terms` fills)."""
    import rjieba

    tokens = (token.strip().lower() for token in rjieba.cut(unicodedata.normalize("NFKC", text)))
    return [token for token in tokens if token and any(_is_word_char(char) for char in token)]


def _is_word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN"


# jieba's part-of-speech tags of names: people, places, organisations, other proper nouns.
NAME_TAGS = frozenset({"nr", "ns", "nt", "nz"})


def names(text: str) -> list[str]:
    """The Chinese names in `text` (of two characters or more), as jieba tags them: 鲁迅,
    台北市. Latin names are told by their capitals (assistant.answering.evidence)."""
    import rjieba

    tagged = rjieba.tag(unicodedata.normalize("NFKC", text))
    return [
        word for word, tag in tagged if tag in NAME_TAGS and len(word) >= 2 and word.isalpha() and not word.isascii()
    ]

"""Text helpers shared by ingestion and answering: Chinese characters and their pairs, the
tokens a question's anchors and an answer's claims are made of, numerals, and a Markdown
source read for comparing (its emphasis and escapes left out).

Chinese characters are one class everywhere: CJK Unified Ideographs (U+4E00–U+9FFF),
Extension A (U+3400–U+4DBF: rarer characters, in names and places) and the compatibility
ideographs (U+F900–U+FAFF: PDFs map fonts to them, 北 as U+F963, before NFKC folds them).
Not U+4DC0–U+4DFF: the Yijing hexagram symbols between Extension A and the Unified block
are signs, not characters of a word. The other extensions (U+20000 and up) are left out:
a question or a page of the portal's languages does not use them, and a count of them
would only ever be zero.
"""

from __future__ import annotations

import re
from collections.abc import Collection

CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # for a character class: [{CJK_CHARS}]
CJK = re.compile(f"[{CJK_CHARS}]")
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")

# A token a person would not paraphrase, as a question or an answer writes it: a word,
# number, version or identifier, with its leading dashes or backslash (`-9`, `--best`,
# `\hline`) and its inner dots, dashes, slashes and underscores (`package.cron.yearly`,
# `foo_bar`, `v1.2.3`). It stops at a Chinese character: "gzip的-9选项" is gzip, then -9.
TOKEN = re.compile(rf"[\\\-]*[A-Za-z0-9\u00c0-\u024f](?:[^\W{CJK_CHARS}]|[.+\-/\\'\u00c0-\u024f])*")
# A digit or a Chinese numeral: "十天" states a number by itself.
NUMERAL = re.compile(r"[\d零〇一二两三四五六七八九十百千万亿]")
# Any dash a document may print for an option's "-" (hyphen, en and em dash, minus sign).
DASH = "[-\u2010-\u2015\u2212]"

# Markdown: ASCII punctuation escaped with a backslash (`\-9`, `\[`, `foo\_bar`), and the
# asterisks and underscores of emphasis (`**-9**`, `_word_`); an underscore inside a word
# (`foo_bar`) is no emphasis.
ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
EMPHASIS = re.compile(r"(?<!\\)\*+|(?<![\w\\])_+|(?<!\\)_+(?!\w)")
# Dotted leaders, four dots or more (". . . . . ." between a contents or index entry and its
# page): noise to the embedder, and dear, a token for every dot or two. The public evaluation's
# chunks hold 346k characters of them, a fifth of their tokens (bench/README.md, 2026-12-06).
LEADERS = re.compile(r"(?:[ \t]*[.·…]){4,}[ \t]*")


def without_leaders(text: str) -> str:
    """`text` with each run of dotted leaders said as one ellipsis: what the embedder reads."""
    return LEADERS.sub(" … ", text)


def is_cjk(char: str) -> bool:
    """Whether one character is a Chinese character (see the module for which)."""
    return CJK.match(char) is not None


def cjk_count(text: str) -> int:
    """How many Chinese characters `text` holds."""
    return len(CJK.findall(text))


def cjk_pairs(text: str, skip: Collection[str] = ()) -> list[str]:
    """Each pair of neighbouring Chinese characters in `text`, in order (runs are not joined
    across other characters); a pair of two characters both in `skip` is left out."""
    return [
        run[i : i + 2]
        for run in CJK_RUN.findall(text)
        for i in range(len(run) - 1)
        if not (run[i] in skip and run[i + 1] in skip)
    ]


def romanised(name: str) -> tuple[str, ...]:
    """A Chinese name as an English text writes it in pinyin, without tones, lower-cased: its
    syllables joined and apart (祝福: "zhufu", "zhu fu"; 鲁迅: "luxun", "lu xun"); nothing for
    a name with other characters than Chinese ones or of one character (a syllable alone
    matches too much). pypinyin (its phrase dictionary: about 0.4 s and 60 MB the first time)
    is imported only when a name is romanised."""
    if len(name) < 2 or CJK_RUN.fullmatch(name) is None:
        return ()
    from pypinyin import Style, lazy_pinyin

    syllables = lazy_pinyin(name, style=Style.NORMAL, errors="ignore")
    if len(syllables) != len(name):
        return ()
    return ("".join(syllables), " ".join(syllables))


def unmarked(text: str) -> str:
    """A Markdown source as its reader sees the words, for comparing (never for showing):
    emphasis markers left out, escaped characters as themselves. `**\\-9** 及 **\\-\\-best**`
    reads `-9 及 --best`. Text without either comes back as it was."""
    if "\\" not in text and "*" not in text and "_" not in text:
        return text
    return ESCAPED.sub(r"\1", EMPHASIS.sub("", text))


# A NUL character or a lone UTF-16 surrogate (half of a pair; JSON's "\u0000" and "\ud800"
# escapes make them): PostgreSQL stores neither, in text or in JSON, and UTF-8 has no form
# for a surrogate. Text from outside is checked with `storable` before it is written.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> bool:
    """Whether PostgreSQL can store the text (no NUL, no lone surrogate)."""
    return not UNSTORABLE.search(text)

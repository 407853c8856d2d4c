"""The text helpers every layer shares (common.text): one class of Chinese characters, their
pairs, tokens, and a Markdown source read for comparing. Pure functions, no database."""

from __future__ import annotations

import pytest

from common.language import language_of
from common.text import CJK, TOKEN, cjk_count, cjk_pairs, is_cjk, unmarked, without_leaders


@pytest.mark.parametrize(
    ("char", "expected"),
    [
        ("中", True),  # U+4E2D, CJK Unified Ideographs
        ("㐀", True),  # U+3400, Extension A
        ("䶵", True),  # U+4DB5, Extension A
        ("\uf963", True),  # 北 as a compatibility ideograph, as fonts map it
        ("\u4dc0", False),  # ䷀ a Yijing hexagram symbol, between Extension A and the Unified block
        ("。", False),
        ("あ", False),  # kana
        ("한", False),  # hangul
        ("a", False),
    ],
)
def test_one_class_of_chinese_characters(char, expected):
    assert is_cjk(char) is expected
    assert (CJK.search(f"x{char}x") is not None) is expected


def test_it_counts_chinese_characters_and_pairs_them_within_runs():
    assert cjk_count("gzip 的 -9 选项") == 3
    assert cjk_pairs("年度报告 2020 的人口") == ["年度", "度报", "报告", "的人", "人口"]
    assert cjk_pairs("是什么的报告", skip=set("是什么的")) == ["的报", "报告"]


def test_language_counts_extension_a_and_compatibility_characters_as_chinese():
    assert language_of("\uf963京 where?") == "zh"  # before: 京 alone, one character in seven letters
    assert language_of("䶮 is") == "zh"  # U+4DAE, Extension A: before, no Chinese at all
    assert language_of("gzip 的 -9 选项是什么意思？") == "zh"
    assert language_of("What does gzip -9 do?") == "en"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("gzip的-9选项", ["gzip", "-9"]),
        ("--best 与 \\hline", ["--best", "\\hline"]),
        ("foo_bar in v1.2.3.", ["foo_bar", "in", "v1.2.3."]),  # the end mark is stripped by its users
        ("ls -acdfhlLnNrtvV19", ["ls", "-acdfhlLnNrtvV19"]),
        ("Ångström's café", ["Ångström's", "café"]),
    ],
)
def test_a_token_keeps_its_dashes_and_stops_at_a_chinese_character(text, tokens):
    assert [match.group() for match in TOKEN.finditer(text)] == tokens


@pytest.mark.parametrize(
    ("markdown", "seen"),
    [
        ("**\\-9** 及 **\\-\\-best**", "-9 及 --best"),
        ("set *foo\\_bar* to \\[1\\]", "set foo_bar to [1]"),
        ("\\\\hline and __init__ and _word_", "\\hline and init and word"),
        ("foo_bar stays", "foo_bar stays"),
        ("no marks at all: 3.7", "no marks at all: 3.7"),
    ],
)
def test_a_markdown_source_is_read_without_its_emphasis_and_escapes(markdown, seen):
    assert unmarked(markdown) == seen


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("1.1 Introduction . . . . . . . . . . 3", "1.1 Introduction … 3"),
        ("\\rmfamily ......................... 55, 79, 80", "\\rmfamily … 55, 79, 80"),
        ("第一章 安装 ·········· 12", "第一章 安装 … 12"),
        ("and so on... v1.2.3.4 at 3.14", "and so on... v1.2.3.4 at 3.14"),  # three dots and versions stay
    ],
)
def test_dotted_leaders_are_said_as_one_ellipsis(text, read):
    assert without_leaders(text) == read

"""Anchors: what a question names that the documents must hold before the model may answer."""

from __future__ import annotations

import pytest

from assistant.answering import evidence, router
from assistant.answering.types import Source, Turn
from assistant.answering.values import normalise
from assistant.retrieval.types import Hit
from common.text import romanised
from ingestion import actions
from knowledge.models import Document, Page


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the default mouse double-click resolution in gnuplot 6.0?", ["6.0"]),  # a compound is a word
        ("How old was Gene Wilder when he died?", ["Gene", "Wilder"]),
        ("What is gnuplot 4.6's default lambda-factor for fit?", ["4.6"]),
        ("Which CVE made readxl 1.4.2 embed libxls?", ["CVE", "1.4.2"]),
        ("Where does package.cron.yearly go, and what does --output do?", ["package.cron.yearly", "--output"]),
        ("In TeXworks, which preference hides the output panel?", ["TeXworks"]),
        ("How far do the whiskers of a box plot reach by default?", []),
        ("SnowNLP 的情感分析准确率是多少？", ["SnowNLP"]),
        ("2006 年版《TeX Live 指南》是谁翻译的？", ["《TeX Live 指南》", "2006", "TeX", "Live"]),
        ("三沙市的常住人口是多少？", []),
        ("What is the Junior value on 8 March 2005?", ["Junior", "2005-03-08"]),  # one date, in any form
        ("2020年3月5日发布了什么？", ["2020-03-05"]),
        ("What happened on March 11th, 2005 and in 2006?", ["2005-03-11", "2006"]),
        # a quoted term is meant as written; a quoted line of a poster is not one anchor
        ("ctex 中文字号表里的“小八号”是多少 bp？", ["小八号", "ctex", "bp"]),
        ("海报印着“落霞与孤鹜齐飞，秋水共长天一色”，作者是谁？", []),
        ('What does the "sync now" button do?', ["sync now"]),
        ('What does the sentence "the whiskers reach far into the data" mean?', []),
    ],
)
def test_a_question_anchors_its_names_numbers_and_identifiers(question, expected):
    assert evidence.anchors(question) == expected


def test_a_quoted_term_is_not_the_term_it_contains():
    table = "ctex 字号表 |8|5|5.018|74|八号| 大小 (bp): 36; 意义: 小初号"
    assert evidence.missing("ctex 字号表里的“小八号”是多少 bp？", [table]) == ["小八号"]
    assert evidence.missing("ctex 字号表里的“小初号”是多少 bp？", [table]) == []


def test_an_anchor_is_found_whatever_its_width_case_or_dash():
    text = normalise("Subjects aged ７０–７９ in the FLC group; see Texworks and GNUPLOT 5.4")
    assert evidence.present("70-79", text)
    assert evidence.present("texworks", text)
    assert evidence.present("5.4", text)
    assert not evidence.present("6.0", text)
    assert not evidence.present("TeXstudio", text)


def test_a_date_is_found_in_any_form_but_not_as_its_day_and_year_apart():
    table = normalise("Nifty Junior 2005-02-11 43.79 2082.05 2005-03-10 44.01 2101.40")
    assert evidence.missing("What is the Junior value on 11 March 2005?", [table]) == ["2005-03-11"]
    assert evidence.missing("What is the Junior value on 10 March 2005?", [table]) == []
    assert evidence.missing("What is the Junior value on March 10, 2005?", [table]) == []
    assert evidence.present("2005-03-10", normalise("发布于 2005 年 3 月 10 日"))
    assert evidence.present("2005-03-10", normalise("released 10 Mar. 2005, then 2005/3/11"))
    assert evidence.present("2005-03-11", normalise("released 10 Mar. 2005, then 2005/3/11"))
    assert not evidence.present("2005-03-01", normalise("version 2005.03.10 of 2005-03-10"))


def test_words_joined_by_a_slash_may_be_joined_otherwise_in_the_document():
    text = normalise("R> merge(inrusd, lag(inrusd, -1)) and the TCP-IP stack")
    assert evidence.present("INR/USD", text)
    assert evidence.present("TCP/IP", text)
    assert not evidence.present("EUR/USD", text)
    assert not evidence.present("INR/EUR", text)


def test_a_chinese_name_may_be_written_in_pinyin_in_an_english_document():
    table = normalise("zhlipsum: Name | Paragraphs | Description\nzhufu — 110 — Zhufu by Lu Xun; xiangyu — 45")
    assert evidence.missing("zhlipsum 预置的假文中，取自鲁迅《祝福》的那一份一共有多少段？", [table]) == []
    assert evidence.missing("取自《故乡》的那一份一共有多少段？", [table]) == ["《故乡》"]
    # a Chinese title is there as a title (in 《》 or quotes, or in pinyin), not inside a sentence
    poem = "\\newzhlipsum{jingyesi}{{床前明月光，}, {疑是地上霜。}, {举头望明月，}, {低头思故乡。}}"
    assert evidence.missing("取自《故乡》的那一份一共有多少段？", [poem]) == ["《故乡》"]
    assert evidence.missing("《通用规范汉字表》增补了什么？", ["包含《通用规范汉字表》汉字"]) == []
    assert evidence.missing("“故乡”一共有多少段？", [poem]) == []  # a quoted term is a term, not a title
    assert evidence.present("项羽", table)  # apart from its description's word: "xiangyu"
    assert not evidence.present("祝福", normalise("the zhufuture module"))  # a word of its own
    assert not evidence.present("福", table)  # one syllable matches too much
    assert romanised("鲁迅") == ("luxun", "lu xun")
    assert romanised("Lu 迅") == ()


def test_a_row_named_by_its_label_must_be_a_row_of_a_table_in_the_passages():
    # ingestion.tables.Row says each row as "label — column: value; …"
    table = "Header 1 Header 2\nA — Header 1: 12.23; Header 2: blah blah\nB — Header 1: 1.23; Header 2: Salut"
    asked = "In the table on the first slide, what is the Header 2 value for row {}?"
    assert evidence.anchors(asked.format("D")) == ["row D", "Header", "2"]
    assert evidence.missing(asked.format("A"), [table]) == []
    assert evidence.missing(asked.format("D"), [table]) == ["row D"]  # the d of "Header" is no row
    assert evidence.missing("表格里 D 行的 Header 2 是多少？", [table]) == ["row D"]
    assert evidence.missing("表格里 B 行的 Header 2 是多少？", [table]) == []
    assert evidence.numbered("row D")  # read from a table's chunk, not anywhere in the document
    assert evidence.missing("What is in row 12 of the table?", ["see row 12 of the table"]) == []


def test_missing_lists_the_anchors_no_passage_holds():
    passages = ["gnuplot 5.4 manual: the mouse double-click resolution defaults to 300 ms."]
    assert evidence.missing("What is the double-click resolution in gnuplot 6.0?", passages) == ["6.0"]
    assert evidence.missing("What is the double-click resolution in gnuplot 5.4?", passages) == []


def source(document: Document, page: Page, text: str) -> Source:
    hit = Hit(
        chunk_id=1,
        collection_id=document.collection_id,
        document_id=document.pk,
        document_name=document.name,
        rel_path=document.rel_path,
        page_id=page.pk,
        page_number=page.number,
        page_kind=page.kind,
        kind="text",
        text=text,
        location={},
    )
    return Source(1, hit)


@pytest.mark.django_db
def test_a_name_may_be_anywhere_in_the_document_a_number_only_in_the_passage(private_collection, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    document, _run = actions.do_add_document(private_collection, "manual.md", b"# Manual", enqueue=False)
    Page.objects.create(document=document, number=1, kind="pdf_page", text="The TeXworks manual, version 0.6")
    page = Page.objects.create(document=document, number=9, kind="pdf_page", text="Auto-hide the output panel.")
    passage = [source(document, page, page.text)]
    assert evidence.unsupported("In TeXworks, which setting hides the output panel?", passage) == []
    assert evidence.unsupported("In TeXstudio, which setting hides the output panel?", passage) == ["TeXstudio"]
    assert evidence.unsupported("Which setting hides the panel in TeXworks 0.6?", passage) == ["0.6"]
    assert evidence.unsupported("Which setting of manual.md hides the panel?", passage) == []  # its own name
    remembered = ["The user works on the Falcon router."]
    assert evidence.unsupported("Is Falcon's panel hidden?", passage, remembered) == []
    Page.objects.create(document=document, number=3, kind="pdf_page", text="R> merge(inrusd, lag(inrusd, -1))")
    assert evidence.unsupported("What is the INR/USD rate on the last date?", passage) == []  # page 3's inrusd
    assert evidence.unsupported("What is the EUR/USD rate on the last date?", passage) == ["EUR/USD"]
    Page.objects.create(document=document, number=4, kind="pdf_page", text="zhufu: 110 paragraphs (Lu Xun)")
    assert evidence.unsupported("《祝福》一共有多少段？", passage) == []  # page 4's zhufu
    assert evidence.unsupported("《故乡》一共有多少段？", passage) == ["《故乡》"]
    assert evidence.unsupported("《祝》一共有多少段？", passage) == ["《祝》"]
    Page.objects.create(document=document, number=5, kind="pdf_page", text="低头思故乡。《呐喊》收录了它。")
    assert evidence.unsupported("《故乡》一共有多少段？", passage) == ["《故乡》"]  # not as a title
    assert evidence.unsupported("《呐喊》一共有多少段？", passage) == []


def test_a_rewrite_that_lost_the_topic_searches_both_questions():
    history = (Turn("What does gnuplot write its fit log to?", "fit.log [1]"),)
    assert router.keeps_topic("Where does gnuplot write the fit log on VMS?", history)
    assert not router.keeps_topic("Where is the log written on VMS?", history)
    leave = (Turn("How long is the annual leave?", "ten days"),)  # no anchors: half its terms
    assert router.keeps_topic("Can the annual leave be carried over?", leave)
    assert not router.keeps_topic("Can it be carried over?", leave)
    assert router.keeps_topic("Can it be carried over?", (Turn("And?", "Yes."),))  # nothing to keep
    assert router.with_topic("And on VMS?", history) == "What does gnuplot write its fit log to? And on VMS?"


def test_a_version_or_year_must_be_there_whole_while_a_day_may_be_part_of_a_date():
    text = normalise("gnuplot 5.4 on Ubuntu 16.04: set 6 windows, 0 margins; releases 4.6.0, 2007 and 2020")
    assert not evidence.present("6.0", text)  # a 6 and a 0 on the page are not version 6.0
    assert not evidence.present("16.0", text)
    assert evidence.present("4.6", text)  # 4.6.0 is a release of 4.6
    assert not evidence.present("2006", text)
    assert evidence.present("2020", text)
    assert evidence.present("8", normalise("2005-03-08 4666.7"))


# Options and identifiers as written: with their dash or backslash, in plain text and in a
# Markdown source (emphasis and escapes: `**\-9**`, `\-\-best`, `foo\_bar`).

MAN_PAGE = "gzip: **\\-9** 及 **\\-\\-best**：最好的压缩。 **\\-1** 及 **\\-\\-fast**：最快的压缩。"
WRITTEN = {  # anchor → a plain text and a Markdown source that hold it
    "-9": ("gzip -9 compresses best", MAN_PAGE),
    "--best": ("gzip --best compresses best", MAN_PAGE),
    "\\hline": ("end each row with \\hline.", "end each row with \\\\hline."),
    "-acdfhlLnNrtvV19": ("Options: -acdfhlLnNrtvV19 (see below)", "Options: **\\-acdfhlLnNrtvV19**"),
    "foo_bar": ("set foo_bar to 1", "set *foo\\_bar* to 1"),
    "v1.2.3": ("released as v1.2.3 in May", "released as **v1.2.3** in May"),
}


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("gzip 的 -9 选项是什么意思？", ["gzip", "-9"]),
        ("gzip的-9选项是什么意思？", ["gzip", "-9"]),  # a token stops at a Chinese character
        ("What does gzip -9 do?", ["-9"]),
        ("--best 和 -9 有什么区别？", ["--best", "-9"]),
        ("What does gzip --best do?", ["--best"]),
        ("\\hline 命令画什么线？", ["\\hline"]),
        ("Where does \\hline draw its rule?", ["\\hline"]),
        ("ls 的 -acdfhlLnNrtvV19 是哪些选项？", ["ls", "-acdfhlLnNrtvV19"]),
        ("Which of -acdfhlLnNrtvV19 lists hidden files?", ["-acdfhlLnNrtvV19"]),
        ("foo_bar 在 v1.2.3 中的默认值是多少？", ["foo_bar", "v1.2.3"]),
        ("What is the default of foo_bar in v1.2.3?", ["foo_bar", "v1.2.3"]),
    ],
)
def test_a_question_anchors_options_and_identifiers_as_written(question, expected):
    assert evidence.anchors(question) == expected


@pytest.mark.parametrize("anchor", list(WRITTEN))
def test_an_option_or_identifier_is_found_as_written_in_plain_text_and_in_markdown(anchor):
    plain_text, markdown = WRITTEN[anchor]
    assert evidence.present(anchor, normalise(plain_text))
    assert evidence.present(anchor, normalise(markdown))


@pytest.mark.parametrize(
    ("question", "passage"),
    [
        ("gzip 的 -9 选项是什么意思？", MAN_PAGE),
        ("What does gzip's --best option do?", MAN_PAGE),
        ("\\hline 命令画什么线？", "Each row ends with \\\\hline in the source."),
        ("Which options does -acdfhlLnNrtvV19 combine?", "ls \\-acdfhlLnNrtvV19 lists everything"),
        ("foo_bar 的默认值是什么？", "*foo\\_bar* defaults to 1"),
        ("What changed in v1.2.3?", "## Changes in **v1.2.3**"),
    ],
)
def test_a_question_about_an_option_is_not_declined_when_the_passage_writes_it(question, passage):
    assert evidence.missing(question, [passage]) == []


def test_an_option_really_absent_is_still_missing():
    assert evidence.missing("gzip 的 -8 选项是什么意思？", [MAN_PAGE]) == ["-8"]
    assert evidence.missing("What does gzip --fastest do?", [MAN_PAGE]) == ["--fastest"]
    assert evidence.missing("\\toprule 命令画什么线？", ["Each row ends with \\\\hline."]) == ["\\toprule"]
    assert evidence.missing("What is foo_baz?", ["*foo\\_bar* defaults to 1"]) == ["foo_baz"]
    assert evidence.missing("What changed in v1.2.4?", ["## Changes in **v1.2.3**"]) == ["v1.2.4"]


@pytest.mark.parametrize("text", ["gzip -90 is no level", "pages 2-9 of the manual", "see --9", "a-9 b9 9"])
def test_an_option_is_not_part_of_a_longer_number_or_a_range(text):
    assert not evidence.present("-9", normalise(text))
    assert evidence.missing("gzip 的 -9 选项是什么意思？", [f"gzip {text}"]) == ["-9"]
    assert evidence.missing("What does gzip -9 do?", [text]) == ["-9"]


def test_an_option_or_command_is_a_whole_token_its_dashes_as_printed():
    assert evidence.present("-9", normalise("gzip \u22129 or \u20139"))  # a minus sign, an en dash
    assert evidence.present("--best", normalise("gzip \u2013best"))  # "--" typeset as one en dash
    assert not evidence.present("--best", normalise("gzip -best"))
    assert not evidence.present("--best", normalise("gzip --bestest"))
    assert evidence.present("\\hline", normalise("\\toprule\\hline"))  # a command after another
    assert not evidence.present("\\hline", normalise("\\hlines"))


@pytest.mark.django_db
def test_a_name_escaped_in_a_markdown_page_is_found_in_its_document(private_collection, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    document, _run = actions.do_add_document(private_collection, "gzip.md", b"# gzip", enqueue=False)
    Page.objects.create(document=document, number=1, kind="text", text="**\\-\\-best** and foo\\_bar")
    page = Page.objects.create(document=document, number=2, kind="text", text="Compression levels.")
    passage = [source(document, page, page.text)]
    assert evidence.unsupported("What does --best do?", passage) == []
    assert evidence.unsupported("What is foo_bar?", passage) == []
    assert evidence.unsupported("What does --fast do?", passage) == ["--fast"]

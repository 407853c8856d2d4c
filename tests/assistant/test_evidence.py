"""Anchors: what a question names that the documents must hold before the model may answer."""

from __future__ import annotations

import pytest

from assistant.answering import evidence, router
from assistant.answering.types import Source, Turn
from assistant.answering.values import normalise
from assistant.retrieval.types import Hit
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
        ("2006 年版《TeX Live 指南》是谁翻译的？", ["TeX Live 指南", "2006", "TeX", "Live"]),
        ("三沙市的常住人口是多少？", []),
        ("What is the Junior value on 8 March 2005?", ["Junior", "8", "2005"]),  # 2005-03-08 in the table
    ],
)
def test_a_question_anchors_its_names_numbers_and_identifiers(question, expected):
    assert evidence.anchors(question) == expected


def test_an_anchor_is_found_whatever_its_width_case_or_dash():
    text = normalise("Subjects aged ７０–７９ in the FLC group; see Texworks and GNUPLOT 5.4")
    assert evidence.present("70-79", text)
    assert evidence.present("texworks", text)
    assert evidence.present("5.4", text)
    assert not evidence.present("6.0", text)
    assert not evidence.present("TeXstudio", text)


def test_words_joined_by_a_slash_may_be_joined_otherwise_in_the_document():
    text = normalise("R> merge(inrusd, lag(inrusd, -1)) and the TCP-IP stack")
    assert evidence.present("INR/USD", text)
    assert evidence.present("TCP/IP", text)
    assert not evidence.present("EUR/USD", text)
    assert not evidence.present("INR/EUR", text)


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

"""Chunk text as shown: overlaps said once, PDF lines joined into paragraphs."""

from __future__ import annotations

from itertools import pairwise

from common.reading import readable, reflowed, repeated
from ingestion.chunking import split_text

PARAGRAPH = (
    "Much of the work of installing a package is done by its maintainer scripts, and such "
    "things are taken care of by dpkg itself. A package that needs a user of its own asks "
    "for one in its postinst script, and removes it again in postrm when it is purged. "
)


def test_the_chunk_list_reads_the_text_once_and_never_from_mid_word():
    text = PARAGRAPH * 6
    for size, overlap in ((120, 50), (200, 30), (80, 39), (400, 150)):
        chunks = [text[start:end] for start, end in split_text(text, size, overlap)]
        assert any(repeated(a, b) for a, b in pairwise(chunks))  # they do overlap
        shown = readable(chunks)
        assert " ".join(shown).split() == text.split(), (size, overlap)


def test_a_short_repeat_counts_only_from_inside_a_word():
    assert repeated("things are done as such", "ch things are") == 2  # the cut fell mid-word
    assert repeated("the package is in the", "the end of it") == 0  # a word may start both
    assert repeated("see section 2.", "2. Installing") == 0
    assert repeated("and it is done as such things are", "such things are taken care of") == 15
    assert repeated("", "text") == repeated("text", "") == 0


def test_chinese_overlaps_are_trimmed_at_any_character():
    text = "软件包的维护脚本完成了安装的大部分工作。这些事情由 dpkg 自己处理。" * 4 + "需要用户的软件包申请一个。" * 4
    chunks = [text[start:end] for start, end in split_text(text, 60, 20)]
    assert "".join(readable(chunks)).replace(" ", "") == text.replace(" ", "")


def test_pdf_lines_join_into_paragraphs():
    page = (
        "The package manager keeps a database of every file it in-\n"
        "stalled, so that removing a package removes exactly those\n"
        "files and nothing else that an administrator put there.\n"
        "\n"
        "Options:\n"
        "• -9 compresses best\n"
        "• -1 compresses fastest\n"
        "$ gzip -9 notes.txt"
    )
    assert reflowed(page) == (
        "The package manager keeps a database of every file it installed, so that removing a "
        "package removes exactly those files and nothing else that an administrator put there.\n"
        "\n"
        "Options:\n"
        "• -9 compresses best\n"
        "• -1 compresses fastest\n"
        "$ gzip -9 notes.txt"
    )


def test_chinese_lines_join_without_a_space():
    lines = "软件包管理器记录它安装的每一个文件，以便删除软件包时\n只删除这些文件，而不删除管理员放的其他文件。"
    assert reflowed(lines) == lines.replace("\n", "")


def test_a_short_line_ends_its_paragraph_and_a_compound_keeps_its_hyphen():
    text = (
        "The first paragraph of the chunk, which may start in the middle of a line.\n"
        "\n"
        "A heading of its own\n"
        "Then a line long enough to be the body of a paragraph in the manual of the Debian-\n"
        "Policy, which says so, and more text here and there to make a long line of it."
    )
    assert reflowed(text) == (
        "The first paragraph of the chunk, which may start in the middle of a line.\n"
        "\n"
        "A heading of its own\n"
        "Then a line long enough to be the body of a paragraph in the manual of the Debian-"
        "Policy, which says so, and more text here and there to make a long line of it."
    )

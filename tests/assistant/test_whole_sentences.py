"""Passages read and quoted as whole sentences (answering.whole, verify.cut): a chunk cut in
the middle of a word or a sentence gets the rest of it from its neighbours on the page."""

from __future__ import annotations

import re

import pytest

from assistant.answering.verify import cut
from assistant.answering.whole import REACH, completed, whole
from assistant.retrieval.types import Hit
from knowledge.models import Chunk
from tests.ingestion.files import ingest

SENTENCES = [
    f"Step {n}: the {word} setting is read from the configuration file before the service starts."
    for n, word in enumerate(["proxy", "cache", "timeout", "locale", "backup", "mirror", "archive", "keyring"] * 4)
]
ZH = "第一步先打开设置页面。第二步在代理一栏填写服务器的地址和端口，然后保存。第三步重新启动服务，新的设置才会生效。"


def test_a_chunk_starting_inside_a_word_gets_its_sentence_from_the_chunk_before():
    page = "Set the PATH first. Then set the TEXINPUTS environment variable before running the editor. It reads it."
    before, text = page[:55], page[35:]  # the chunk starts in the middle of "TEXINPUTS"
    assert text.startswith("XINPUTS")
    assert completed(before, text, "") == page[page.index("Then") :]


def test_a_chunk_ending_inside_a_sentence_gets_its_end_from_the_chunk_after():
    page = "One. Two is a long sentence that runs on past the chunk's end and stops here. Three."
    text, after = page[:40], page[30:]
    assert completed("", text, after) == page[: page.index(" Three")]


def test_a_chinese_chunk_is_completed_the_same_way():
    before, text, after = ZH[:24], ZH[12:40], ZH[32:]  # overlaps of 12 and 8 characters
    third = ZH.index("第三步")
    assert completed(before, text, after) == ZH[ZH.index("第二步") : ZH.index("。", third) + 1]


def test_a_neighbour_that_does_not_overlap_is_another_block_and_is_left_alone():
    assert completed("# Install\n\nRun the", "Configuration is kept in one file", "") == (
        "Configuration is kept in one file"
    )


def test_a_sentence_longer_than_the_reach_is_cut_at_a_words_edge():
    words = " ".join(f"word{n}" for n in range(200))  # no end mark anywhere
    before, text = words[:600], words[550:]
    made = completed(before, text, "")
    assert len(made) - len(text) <= REACH
    assert re.match(r"word\d+ ", made)  # whole words: it starts at one


def test_a_quote_cut_for_length_ends_after_a_sentence_or_a_word_never_inside_one():
    text = " ".join(SENTENCES)
    quoted = cut(text, 320)
    assert len(quoted) <= 320
    assert quoted.endswith("starts. …")
    unbroken = "configuration " * 40
    assert cut(unbroken, 100).endswith("configuration …")
    assert cut("short enough.", 100) == "short enough."


@pytest.mark.usefixtures("media")
def test_every_chunk_of_a_real_page_reads_as_whole_sentences(db, private_collection):
    document = ingest(private_collection, "setup.md", ("# Setup\n\n" + " ".join(SENTENCES) + "\n").encode())
    chunks = list(Chunk.objects.filter(document=document, kind="text").select_related("page").order_by("ordinal"))
    assert len(chunks) >= 3  # the paragraph is cut into overlapping chunks
    cut_inside = [chunk for chunk in chunks if not chunk.text.startswith(("Step", "# Setup", "Setup"))]
    assert cut_inside  # what the fix is for: chunks that start inside a sentence
    hits = [
        Hit(
            chunk_id=chunk.pk,
            collection_id=private_collection.pk,
            document_id=document.pk,
            document_name=document.name,
            rel_path=document.rel_path,
            page_id=chunk.page_id,
            page_number=chunk.page.number,
            page_kind=chunk.page.kind,
            kind=chunk.kind,
            text=chunk.text,
            location=chunk.location,
        )
        for chunk in chunks
    ]
    page = " ".join(chunks[0].page.text.split())
    for made in whole(hits):
        said = " ".join(made.text.split())
        assert said in page
        assert said.startswith(("Step", "# Setup", "Setup")), said[:40]
        assert said.endswith("starts."), said[-40:]

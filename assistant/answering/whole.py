"""Passages as whole sentences, so that what the reader weighs and what a quote shows start
and end where a sentence does.

A chunk is cut at a character count (ingestion.chunking.split_text): each one starts up to
the collection's overlap before the previous one ends, at any character, so its first words
are often the tail of a sentence from the middle of a word ("TH environment variable before
running …"), and a long sentence may run on into the next chunk. `whole` gives each text
passage the sentence it cuts, whole, from its neighbours on the same page: the chunk before
(when the passage starts inside the text that chunk ends with) and the chunk after (when it
starts with the text this one ends with). A neighbour that does not overlap is another block
(a heading, a table) and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from django.db.models import Q

from assistant.retrieval.types import Hit
from common.reading import repeated
from common.text import is_cjk
from knowledge.models import Chunk

# Chunks of running text; tables, pictures and frames are cut at rows and lines already.
TEXT_KINDS = ("text", "notes", "transcript", "summary")
# The most characters taken from a neighbour to finish a sentence: a longer one is cut at a
# word's edge instead (a paragraph without punctuation, a list run together).
REACH = 240
# Where a sentence ends: Chinese and Latin end marks (a Latin one before a space), a line's end.
CJK_ENDS = "。！？；"
LATIN_ENDS = ".!?;"
SENTENCE_END = re.compile(r"[。！？；]|[.!?;](?=\s)|\n")


def whole(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` with each text passage's cut sentences made whole from its neighbours (two
    queries for all of them); other hits as they are."""
    textual = [hit.chunk_id for hit in hits if hit.kind in TEXT_KINDS]
    if not textual:
        return list(hits)
    places = {
        pk: (page, version, ordinal)
        for pk, page, version, ordinal in Chunk.objects.filter(pk__in=textual).values_list(
            "pk", "page_id", "index_version_id", "ordinal"
        )
    }
    if not places:
        return list(hits)
    near = Q()
    for page, version, ordinal in places.values():
        near |= Q(page_id=page, index_version_id=version, ordinal__in=(ordinal - 1, ordinal + 1))
    texts = {
        (page, version, ordinal): text
        for page, version, ordinal, text in Chunk.objects.filter(near).values_list(
            "page_id", "index_version_id", "ordinal", "text"
        )
    }
    made = []
    for hit in hits:
        place = places.get(hit.chunk_id)
        if place is None:
            made.append(hit)
            continue
        page, version, ordinal = place
        before = texts.get((page, version, ordinal - 1), "")
        after = texts.get((page, version, ordinal + 1), "")
        text = completed(before, hit.text, after)
        made.append(hit if text == hit.text else replace(hit, text=text))
    return made


def completed(before: str, text: str, after: str) -> str:
    """`text` with the start of its first sentence from `before` and the end of its last one
    from `after`, where those chunks overlap it (at most REACH characters each way)."""
    head = ""
    overlap = repeated(before, text)
    if overlap and not _starts_sentence(before, len(before) - overlap):
        lead = before[: len(before) - overlap]
        head = _tail_sentence(lead)
    tail = ""
    carried = repeated(text, after)
    if carried and not _ends_sentence(text):
        tail = _head_sentence(after[carried:])
    return head + text + tail


def _starts_sentence(text: str, index: int) -> bool:
    """Whether a sentence starts at `text[index]`: at the start, after a line's end, after a
    Chinese end mark, or after a Latin one and a space."""
    before = text[:index]
    stripped = before.rstrip()
    if not stripped or "\n" in before[len(stripped) :]:
        return True
    return stripped[-1] in CJK_ENDS or (stripped[-1] in LATIN_ENDS and len(stripped) < len(before))


def _ends_sentence(text: str) -> bool:
    stripped = text.rstrip()
    return not stripped or stripped[-1] in CJK_ENDS + LATIN_ENDS or text.endswith("\n")


def _tail_sentence(lead: str) -> str:
    """The end of `lead` from the start of its last sentence; past REACH, from a word's start."""
    window = lead[-REACH:]
    ends = [match.end() for match in SENTENCE_END.finditer(window)]
    if ends:
        return window[ends[-1] :].lstrip()
    if len(lead) <= REACH:
        return lead.lstrip()
    space = window.find(" ")
    if space >= 0 and not is_cjk(window[0]):
        return window[space + 1 :]
    return window


def _head_sentence(rest: str) -> str:
    """The start of `rest` to the end of its first sentence; past REACH, to a word's end."""
    window = rest[:REACH]
    found = SENTENCE_END.search(window)
    if found:
        return window[: found.end()].rstrip("\n")
    if len(rest) <= REACH:
        return rest.rstrip()
    space = window.rfind(" ")
    if space >= 0 and not is_cjk(window[-1]):
        return window[:space]
    return window

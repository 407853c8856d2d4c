"""Pictures an answer attaches are cited (answering.writing.shown, cite_pictures): plain
drafts, no database, no model."""

from __future__ import annotations

from types import SimpleNamespace

from assistant.answering import writing
from assistant.answering.decisions import DECLINE
from assistant.answering.events import AnswerDelta
from assistant.answering.session import Draft
from assistant.answering.types import Source
from assistant.retrieval.types import Hit


def hit(number: int, name: str, kind: str = "image", promoted: bool = False) -> Hit:
    page_kind = "image" if kind == "image" else "pdf_page"
    return Hit(
        number, 1, number, name, name, number, 1, page_kind, kind, f"Photo. Shows: {name}.", {}, promoted=promoted
    )


def draft_with(text: str, sources: list[Hit], media: list[Hit], language: str = "en") -> Draft:
    session = SimpleNamespace(question="Do we have a photo of a pagoda by a lake?")
    draft = Draft(session=session, language=language)  # type: ignore[arg-type]
    draft.sources = tuple(Source(number, found) for number, found in enumerate(sources, start=1))
    draft.media = list(media)
    draft.text = text
    return draft


def test_each_attached_picture_is_cited_after_the_passages():
    """The reader quoted photo-11's description; the search also attached photo-21 (a passage,
    [2]) and dune.jpg (beyond the passages): both are named and cited, dune.jpg as [4]."""
    photo_11, photo_21, manual, dune = (
        hit(1, "photo-11.png"),
        hit(2, "photo-21.jpg"),
        hit(3, "gnuplot.pdf", "text"),
        hit(4, "dune.jpg"),
    )
    draft = draft_with(
        '"photo-11.png", part 1: “Photo. Shows: mosque.” [1]', [photo_11, photo_21, manual], [photo_11, photo_21, dune]
    )
    pictures = writing.shown(draft, 4)
    events = list(writing.cite_pictures(draft, pictures))
    assert [source.hit.document_name for source in draft.sources] == [
        "photo-11.png",
        "photo-21.jpg",
        "gnuplot.pdf",
        "dune.jpg",
    ]
    assert draft.text.endswith('\n\nPictures found: "photo-21.jpg" [2], "dune.jpg" [4]')
    assert events == [AnswerDelta('\n\nPictures found: "photo-21.jpg" [2], "dune.jpg" [4]')]
    assert [(d.stage, d.outcome, d.figures) for d in draft.trail.decisions] == [("attach", "cited", {"count": 2})]


def test_the_line_is_in_the_questions_language_and_nothing_is_added_when_all_are_cited():
    first, second = hit(1, "photo-07.jpg"), hit(2, "photo-08.jpg")
    chinese = draft_with("资料原文：[1]", [first], [first, second], language="zh")
    list(writing.cite_pictures(chinese, writing.shown(chinese, 4)))
    assert chinese.text.endswith("找到的图片：《photo-08.jpg》[2]")
    cited = draft_with("Both: [1] and [2].", [first, second], [first, second])
    assert list(writing.cite_pictures(cited, writing.shown(cited, 4))) == []
    assert cited.text == "Both: [1] and [2]."


def test_a_declined_answer_cites_no_picture_and_keeps_only_matching_ones():
    """A decline (a near miss, or the decision) adds no citation; its attachments are only the
    pictures whose description matched (promoted), and none at all for a near miss."""
    matched, nearby = hit(1, "photo-07.jpg", promoted=True), hit(2, "photo-08.jpg")
    declined = draft_with("", [matched, nearby], [matched, nearby])
    declined.trail.add("decide", DECLINE, "low_evidence", final=True)
    assert writing.shown(declined, 4) == [matched]
    assert list(writing.cite_pictures(declined, writing.shown(declined, 4))) == []
    assert declined.text == ""
    near_miss = draft_with("", [matched], [matched])
    near_miss.lacking = ["giraffe"]
    assert writing.shown(near_miss, 4) == []


def test_a_refusal_is_not_turned_into_an_answer_by_the_pictures():
    picture = hit(1, "photo-08.jpg")
    refused = draft_with("The documents do not contain the answer.", [picture], [picture])
    assert list(writing.cite_pictures(refused, writing.shown(refused, 4))) == []
    assert refused.text == "The documents do not contain the answer."


def test_at_most_the_limit_of_pictures_each_once():
    pictures = [hit(number, f"photo-{number:02d}.jpg") for number in range(1, 7)]
    draft = draft_with("[1]", pictures[:1], pictures + pictures[:2])
    assert [found.document_name for found in writing.shown(draft, 4)] == [f"photo-0{n}.jpg" for n in range(1, 5)]

"""A plan's evidence answer (answering.modes.steps_answer) quotes each step as a direct
answer is quoted (reader.Reading.quotes): plain drafts and readings, no database, no model."""

from __future__ import annotations

from types import SimpleNamespace

from assistant.answering import modes
from assistant.answering.reader import Candidate, Reading
from assistant.answering.session import Draft
from assistant.answering.types import Source, StepEvidence
from assistant.retrieval.types import Hit


def source(number: int, page: int, step: int) -> Source:
    hit = Hit(number, 1, 1, "zhlineskip.pdf", "zhlineskip.pdf", page, page, "pdf_page", "text", "", {})
    return Source(number, hit, step)


def candidate(found: Source, text: str, score: float) -> Candidate:
    return Candidate(found, 0, text, text, score, {"relevance": 1.0})


def draft_for(readings: dict[int, Reading]) -> Draft:
    session = SimpleNamespace(timings={}, mark=lambda name: None)
    draft = Draft(session=session, language="zh", query="多倍行距的倍数缺省取多少？字号的多少倍？")  # type: ignore[arg-type]
    draft.steps = [StepEvidence(1, "多倍行距的倍数缺省取多少？", ()), StepEvidence(2, "字号的多少倍？", ())]
    draft.step_readings = readings
    return draft


def test_a_step_quotes_a_second_passage_that_scores_nearly_as_well_and_not_one_far_below():
    page_3, page_4, table = source(1, 3, 1), source(2, 4, 1), source(3, 7, 2)
    first = Reading(
        (
            candidate(page_3, "用户可以指定“多倍行距”的“倍数”。", 2.0),
            candidate(page_3, "硬要用 TeX 模仿 Word 是没有太大意义的。", 1.9),
            candidate(page_4, "MSWordLineSpacingMultiple 缺省值是 1.15。", 1.6),
        ),
        (),
        language="zh",
    )
    second = Reading(
        (candidate(table, "微软雅黑 Regular/Bold 3513/2048 = 1.715", 3.0), candidate(page_4, "缺省值是 1.48。", 1.0)),
        (),
        language="zh",
    )
    draft = draft_for({1: first, 2: second})
    list(modes.steps_answer(draft))
    assert draft.text == (
        "- “用户可以指定“多倍行距”的“倍数”。” [1]；"
        + "“MSWordLineSpacingMultiple 缺省值是 1.15。” [2]"
        + "\n- “微软雅黑 Regular/Bold 3513/2048 = 1.715” [3]"
    )
    assert set(draft.quotes) == {1, 2, 3}
    assert [(d.stage, d.outcome, d.figures) for d in draft.trail.decisions] == [
        ("decide", "answer", {"steps": 2, "answered": 2})
    ]

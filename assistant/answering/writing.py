"""Writing the answer from its passages: the model's streamed text, and the portal's checks
around it. The judge may decline before the model writes; a refusal is retried on the best
passage, or overruled by a quote of it; the answer is verified sentence by sentence against
its passages; a plan's summary gains the steps it left out; a matching picture is shown when
the model would not answer from its few words; a question whose names the passages lack is
declined with the closest passages.

Each function reads and changes the `Draft` and yields the events that tell the client."""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Sequence

from django.conf import settings

from assistant.answering import answer as answers
from assistant.answering import evidence, passages, policy, prompts, verify
from assistant.answering.decisions import DECLINE
from assistant.answering.events import AnswerDelta, AnswerReplaced, Event
from assistant.answering.prompts import NO_ANSWER
from assistant.answering.session import Draft
from assistant.answering.types import Source
from assistant.retrieval.types import Hit
from common.language import language_of
from common.logs import with_content
from providers.base import ChatModel

log = logging.getLogger(__name__)

MAX_PICTURE_WORDS = 300  # characters of a picture's description an answer shows


def refused(draft: Draft) -> bool:
    """Whether the answer so far cites nothing and says the documents do not hold it."""
    return answers.abstains(draft.text, answers.cited(draft.text, len(draft.sources)))


def generate(draft: Draft, model: ChatModel) -> Iterator[Event]:
    """The model's answer from the passages (and the steps and memories), streamed."""
    session = draft.session
    if not draft.sources and not draft.memories:  # nothing to read: say so without asking the model to guess
        draft.text = NO_ANSWER[draft.language]
        session.mark("first_token")
        yield AnswerDelta(draft.text)
        return
    prompt = answers.messages(draft.query, draft.sources, draft.language, draft.steps, draft.remembered)
    parts: list[str] = []
    stream = model.stream(prompt, max_tokens=settings.ANSWER_MAX_TOKENS, temperature=0.2)
    try:
        for delta in stream:
            if not parts:
                session.mark("first_token")
            parts.append(delta)
            draft.text = "".join(parts)
            yield AnswerDelta(delta)
            session.check()
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()  # stops the model's generation (and frees its lock) on cancel or timeout
    session.mark("answer")


def judge(draft: Draft, model: ChatModel) -> float | None:
    """P(yes) - P(no) of the model asked whether the passages state the answer, when the
    judge is on (PORTAL_ANSWER_JUDGE) and the model can be asked so (the local one). Its
    prompt is the answer's up to the question, so the answer reads only its last line."""
    asked = getattr(model, "yes_minus_no", None)
    if settings.ANSWER_JUDGE is None or asked is None:
        return None
    prompt = answers.messages(
        draft.query, draft.sources, draft.language, (), draft.remembered, prompts.JUDGE[draft.language]
    )
    score = float(asked(prompt))
    draft.session.mark("judge")
    return round(score, 4)


def judged_unanswered(draft: Draft) -> bool:
    """The judge says the passages do not state the answer (PORTAL_ANSWER_JUDGE)."""
    return draft.judge is not None and settings.ANSWER_JUDGE is not None and draft.judge < settings.ANSWER_JUDGE


def written(draft: Draft, model: ChatModel) -> Iterator[Event]:
    """The model's answer, a refusal retried or quoted away, then verified."""
    yield from generate(draft, model)
    if draft.sources:
        yield from retry_refusal(draft, model)
        yield from quote_refusal(draft)
        draft.quotes = yield from verified(draft)


def retry_refusal(draft: Draft, model: ChatModel) -> Iterator[Event]:
    """The passages name everything the question asks about (the evidence check passed), yet
    the model said the documents do not hold the answer: it is asked once more, on the best
    passage alone, where the answer is easiest to see. Its answer replaces the refusal unless
    it refuses again."""
    if not refused(draft):
        return
    session = draft.session
    best = draft.sources[:1]
    prompt = answers.messages(draft.query, best, draft.language, (), draft.remembered)
    retried = model.complete(prompt, max_tokens=settings.ANSWER_MAX_TOKENS, temperature=0.2).text.strip()
    session.mark("retry")
    if retried and not answers.abstains(retried, answers.cited(retried, len(best))):
        with_content(
            log,
            logging.INFO,
            "Answered on the best passage after a refusal (%s)",
            session.ids,
            question=session.question,
        )
        draft.checks["retried"] = 1
        draft.text = retried
        yield AnswerReplaced(draft.text)


def quote_refusal(draft: Draft) -> Iterator[Event]:
    """The evidence check found everything the question names and the judge found the answer
    stated, yet the model refused twice: the portal answers with the best passage's own
    words, quoted and cited (on the public evaluation the local model's refusals were nearly
    all wrong: 11 of the 12 it made after the evidence check were answerable questions)."""
    if draft.judge is None or draft.judge < policy.QUOTE_AFTER_REFUSAL or not refused(draft):
        return
    session = draft.session
    quoted = verify.quoted(session.question, draft.sources, draft.sources[0].number, draft.language)
    if quoted:
        with_content(
            log, logging.INFO, "Quoted the best passage after two refusals (%s)", session.ids, question=session.question
        )
        draft.checks["quoted_refusal"] = 1
        draft.text = quoted
        yield AnswerReplaced(draft.text)


def show_picture(draft: Draft) -> Iterator[Event]:
    """A picture whose description matches what the question asks to see leads the passages
    (retrieval.pictures); when the model (or the judge) would not answer from its few words,
    the portal shows it: the picture, cited, and what its description says, in the question's
    language. "Show me the photo of a ladybug" has no other answer than the picture."""
    if not refused(draft):
        return
    picture = next((source for source in draft.sources if source.hit.promoted), None)
    if picture is None:
        return
    lines = [line.strip() for line in picture.hit.text.splitlines() if line.strip()]
    chinese = [line for line in lines if language_of(line) == "zh"]
    english = [line for line in lines if line not in chinese]
    words = " ".join((chinese if draft.language == "zh" else english) or lines)[:MAX_PICTURE_WORDS]
    with_content(
        log,
        logging.INFO,
        "Showed the matching picture of document %s instead of a refusal (%s)",
        picture.hit.document_id,
        draft.session.ids,
        question=draft.session.question,
    )
    draft.checks["picture_shown"] = 1
    draft.trail.add(
        "attach", "answer", "a picture matches what the question asks to see", final=True, source=picture.number
    )
    draft.text = prompts.picture_found(draft.language, picture.hit.document_name, picture.number, words)
    yield AnswerReplaced(draft.text)


def verified(draft: Draft) -> Generator[Event, None, dict[int, str]]:
    """The answer checked against its passages (answering.verify): a changed answer replaces
    the streamed one (`answer.replace`). Returns the span of each cited passage it rests on."""
    if refused(draft):
        return {}
    session = draft.session
    checked = verify.check(
        draft.text, session.question, draft.sources, draft.language, [draft.query, *draft.remembered]
    )
    session.mark("verify")
    if checked.removed:
        with_content(
            log,
            logging.INFO,
            "Removed %d sentences from an answer, not in its passages (%s)",
            len(checked.removed),
            session.ids,
            removed=checked.removed,
        )
        draft.checks["removed"] = len(checked.removed)
    if checked.quoted:
        draft.checks["quoted"] = 1
    if checked.text != draft.text:
        draft.text = checked.text
        yield AnswerReplaced(draft.text)
    return checked.quotes


def every_step_heard(draft: Draft) -> Generator[Event, None, dict[int, str]]:
    """A multi-step answer cites every step that found evidence: a step whose passages the
    summary left out (small models answer the first half of a comparison and stop) adds
    its best passage's own words, cited. A step found evidence when its best passage holds
    all the step's anchors and shares words with it. A summary that refused although steps
    found evidence (the local model refused 3 of 13 planned questions whose pages it had) is
    replaced by those steps' words. Returns the quotes added, by number."""
    used = set(answers.cited(draft.text, len(draft.sources)))
    summary_refused = answers.abstains(draft.text, list(used))
    if summary_refused:
        used = set()
    added: dict[int, str] = {}
    language = draft.language
    text = prompts.STEPS_INTRO[language] if summary_refused else draft.text
    for step in draft.steps:
        own = [source for source in draft.sources if source.step == step.number]
        if not own or any(source.number in used for source in own):
            continue
        best = own[0]
        span = passages.quote(best.hit.text, passages.terms(step.query))
        if span and not evidence.missing(step.query, [evidence.said(best.hit)]):
            added[best.number] = span
            text += f"\n- {step.query}{'：' if language == 'zh' else ': '}“{verify.shorten(span)}” [{best.number}]"
    if added:
        draft.checks["steps_quoted" if summary_refused else "steps_added"] = len(added)
        draft.text = text
        yield AnswerReplaced(draft.text)
    return added


def decline(draft: Draft, lacking: Sequence[str]) -> Iterator[Event]:
    """The portal's own answer when the passages lack what the question names: no answer,
    what was not found, and the closest passages (not citations: they do not answer), which
    the `closest` event gives as links to their pages."""
    if lacking:  # a near miss: the passages are about something else; no model guesses from them
        with_content(
            log,
            logging.INFO,
            "Not in the documents: %d name(s) the question gives (%s)",
            len(lacking),
            draft.session.ids,
            lacking=list(lacking),
            question=draft.session.question,
        )
    draft.closest = answers.closest(draft.sources, draft.language, policy.CLOSEST_PASSAGES)
    places = [(passage["file"], passage["place"]) for passage in draft.closest]
    draft.text = prompts.declined(draft.language, lacking, places)
    draft.session.mark("first_token")
    yield AnswerDelta(draft.text)


def shown(draft: Draft, limit: int) -> list[Hit]:
    """The pictures and videos an answer attaches: what the search found, each chunk once; a
    declined answer keeps only those whose description matched what the question asks to see
    (retrieval.pictures), not those of a near miss; none when the question names what its
    passages lack."""
    if draft.lacking is not None:
        return []
    declined = _declined(draft)
    unique = {hit.chunk_id: hit for hit in draft.media if not declined or hit.promoted}
    return list(unique.values())[:limit]


def cite_pictures(draft: Draft, pictures: Sequence[Hit]) -> Iterator[Event]:
    """An answer that attaches pictures cites each of them: the search found them for what
    their descriptions say, so each is a source like a passage, numbered after the passages
    (a picture among them keeps its number), and one line names those the text has not cited
    yet. "Do we have a photo of a pagoda by a lake?" is answered by the pictures, whichever
    sentence the reader quoted."""
    if not pictures or _declined(draft) or refused(draft):
        return
    numbers = {source.hit.chunk_id: source.number for source in draft.sources}
    sources = list(draft.sources)
    for hit in pictures:
        if hit.chunk_id not in numbers:
            numbers[hit.chunk_id] = len(sources) + 1
            sources.append(Source(len(sources) + 1, hit))
    draft.sources = tuple(sources)
    used = answers.cited(draft.text, len(sources))
    listed = [(hit.document_name, numbers[hit.chunk_id]) for hit in pictures if numbers[hit.chunk_id] not in used]
    if not listed:
        return
    line = prompts.pictures_listed(draft.language, listed)
    addition = f"\n\n{line}" if draft.text.strip() else line
    draft.text += addition
    draft.trail.add("attach", "cited", "the pictures the search found, each cited", count=len(listed))
    yield AnswerDelta(addition)


def _declined(draft: Draft) -> bool:
    """Whether the decision that settled the answer so far declined it."""
    final = draft.trail.final()
    return final is not None and final.outcome == DECLINE

"""How each route answers (answering.router picks one): a strategy gathers the passages and
writes the answer from them. One class per strategy, registered under the router's name:

- `direct`: one search; a table cell the question names is read from its table
  (answering.cells); the judge may decline before the model writes;
- `rewrite`: the same, after the follow-up question is made self-contained;
- `multi_step`: the planner's steps, one search each; the summary cites every step that found
  evidence.

Before anything is written, a question whose names (products, numbers, identifiers) the
passages lack is declined: the passages are about something else (answering.evidence)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, ClassVar

from django.conf import settings

from assistant.answering import answer as answers
from assistant.answering import cells, evidence, planner, prompts, router, writing
from assistant.answering.events import AnswerDelta, Event, Planned, Retrieved, Rewritten, StepFound, StepStarted
from assistant.answering.session import Draft
from assistant.answering.types import Source, StepEvidence, Strategy
from assistant.retrieval.fusion import media_intent
from assistant.retrieval.search import search
from assistant.retrieval.types import Hit
from common.language import Language
from providers.base import ChatModel

log = logging.getLogger(__name__)


class AnswerStrategy:
    """prepare (before memories are recalled), gather, write: each reads and changes the
    draft and yields the events that tell the client."""

    name: ClassVar[Strategy]

    def prepare(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        draft.query = draft.session.question
        return iter(())

    def gather(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        raise NotImplementedError

    def write(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        raise NotImplementedError

    def lacking(self, draft: Draft) -> list[str]:
        """What the question names that no passage (nor memory) says."""
        if not draft.sources:
            return []
        return evidence.unsupported(draft.session.question, draft.sources, draft.remembered)


REGISTERED: dict[str, AnswerStrategy] = {}  # by the router's names (types.STRATEGIES)


def register(cls: type[AnswerStrategy]) -> type[AnswerStrategy]:
    REGISTERED[cls.name] = cls()
    return cls


def for_route(strategy: str) -> AnswerStrategy:
    return REGISTERED[strategy]


@register
class Direct(AnswerStrategy):
    name: ClassVar[Strategy] = "direct"

    def gather(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        session = draft.session
        wants_media = media_intent(session.question)
        draft.results, draft.sources, draft.cell = cells.search_with_cell(
            session.user, draft.query, session.scope, media=wants_media
        )
        draft.media.extend(draft.results.attachments)
        session.mark("retrieval")
        yield Retrieved([preview(source.hit, draft.language, source) for source in draft.sources])

    def write(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        session = draft.session
        lacking = self.lacking(draft)
        if draft.cell is not None and lacking and draft.results is not None:
            # the question names more than the cell's table holds: as without it
            draft.cell, plain = None, answers.sources_of(draft.results.hits)
            if plain != draft.sources:  # the cell's chunk was brought in: the passages as they were
                draft.sources = plain
                lacking = self.lacking(draft)
        if not lacking and draft.sources and draft.cell is None:
            draft.judge = writing.judge(draft, model)
        if lacking:
            yield from writing.decline(draft, lacking)
        elif draft.cell is not None:
            yield from self._cell(draft, draft.cell)
        elif writing.judged_unanswered(draft):
            question = session.question[:100]
            log.info("The judge says the passages do not answer (%.3f): question %r", draft.judge, question)
            yield from writing.decline(draft, [])
        else:
            yield from writing.written(draft, model)
        if not lacking:
            yield from writing.show_picture(draft)

    def _cell(self, draft: Draft, cell: cells.Cell) -> Iterator[Event]:
        session = draft.session
        log.info("Answered with a table cell (%s; %s): question %r", cell.row, cell.column, session.question[:100])
        draft.checks["table_cell"] = 1
        draft.text = prompts.table_cell(draft.language, cell.value, cell.row, cell.column, cell.source.number)
        session.mark("first_token")
        yield AnswerDelta(draft.text)
        draft.quotes = {cell.source.number: cell.sentence}


@register
class Rewrite(Direct):
    """A follow-up that leans on an earlier turn, searched as one self-contained question."""

    name: ClassVar[Strategy] = "rewrite"

    def prepare(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        session = draft.session
        draft.query = router.rewrite(model, session.question, session.history)
        session.mark("rewrite")
        yield Rewritten(question=session.question, query=draft.query)


@register
class MultiStep(AnswerStrategy):
    name: ClassVar[Strategy] = "multi_step"

    def gather(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        session = draft.session
        wants_media = media_intent(session.question)
        plan = planner.plan(model, draft.query)
        draft.plan = plan.steps
        session.mark("plan")
        yield Planned(steps=list(plan.steps), by=plan.by)
        for number, step in enumerate(plan.steps, start=1):
            session.check()
            yield StepStarted(step=number, query=step)
            results = search(session.user, step, scope=session.scope, k=settings.ANSWER_SOURCES, media=wants_media)
            draft.steps.append(StepEvidence(number, step, results.hits))
            draft.media.extend(results.attachments)
            yield StepFound(step=number, hits=[preview(hit, draft.language) for hit in results.hits])
        session.mark("retrieval")
        draft.sources = answers.sources_of_steps(draft.steps)

    def write(self, draft: Draft, model: ChatModel) -> Iterator[Event]:
        lacking = self.lacking(draft)
        if lacking:
            yield from writing.decline(draft, lacking)
            return
        yield from writing.written(draft, model)
        if draft.sources:
            draft.quotes |= yield from writing.every_step_heard(draft)


def preview(hit: Hit, language: Language, source: Source | None = None) -> dict[str, Any]:
    """A passage as the `retrieval` and `step.result` events show it."""
    return {
        "n": source.number if source else None,
        "chunk_id": hit.chunk_id,
        "file": hit.document_name,
        "page": hit.page_number,
        "place": answers.place(hit, language),
        "score": round(hit.score, 6),
        "snippet": " ".join(hit.text.split())[:160],
    }

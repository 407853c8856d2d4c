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
from functools import partial
from typing import Any, ClassVar

from django.conf import settings

from assistant.answering import answer as answers
from assistant.answering import cells, evidence, modes, planner, prompts, reader, router, writing
from assistant.answering.events import AnswerDelta, Event, Planned, Retrieved, Rewritten, StepFound, StepStarted
from assistant.answering.session import Draft
from assistant.answering.types import Source, StepEvidence, Strategy
from assistant.retrieval.fusion import media_intent
from assistant.retrieval.search import search
from assistant.retrieval.types import Hit
from common.language import Language
from common.logs import with_content
from providers.base import ChatModel

log = logging.getLogger(__name__)


class AnswerStrategy:
    """prepare (before memories are recalled), gather, write: each reads and changes the
    draft and yields the events that tell the client."""

    name: ClassVar[Strategy]

    def prepare(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        draft.query = draft.session.question
        return iter(())

    def gather(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        raise NotImplementedError

    def write(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        raise NotImplementedError

    def lacking_in(self, draft: Draft) -> list[str]:
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

    def gather(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        session = draft.session
        wants_media = media_intent(session.question)
        yield modes.stage(draft, "search", count=len(session.scope.versions))
        draft.results, draft.sources, draft.cell = cells.search_with_cell(
            session.user, draft.query, session.scope, media=wants_media
        )
        draft.media.extend(draft.results.attachments)
        session.mark("retrieval")
        draft.trail.add(
            "retrieve",
            "found" if draft.sources else "nothing",
            "the search's best passages",
            passages=len(draft.sources),
            media=len(draft.media),
        )
        draft.lacking = self._check_anchors(draft)  # may bring in a chunk of a passage's page
        yield Retrieved([preview(source.hit, draft.language, source) for source in draft.sources])
        yield modes.stage(draft, "found", count=len(draft.sources))
        if draft.lacking is not None:
            return
        if draft.cell is not None:
            cell = draft.cell
            draft.trail.add(
                "cells", "found", "the question names one cell of a table", row=cell.row, column=cell.column
            )
            yield modes.cell_evidence(draft, cell)
        elif draft.sources:
            yield modes.stage(draft, "read")
            draft.reading = modes.read(draft, draft.sources)
            if draft.reading.best is not None:
                yield modes.evidence_event(draft, draft.reading.best, draft.reading.confidence)
        session.mark("evidence")

    def _check_anchors(self, draft: Draft) -> list[str] | None:
        """What the question names that the passages lack (None when they hold it all); a
        table cell whose table lacks it gives way to the plain passages first, and a chunk
        on a passage's page, or of another document where they lack only names, that holds
        what they lack comes in as the last passage (evidence.checked)."""
        lacking = self.lacking_in(draft)
        if draft.cell is not None and lacking and draft.results is not None:
            # the question names more than the cell's table holds: as without it
            draft.cell, plain = None, answers.sources_of(draft.results.hits)
            if plain != draft.sources:  # the cell's chunk was brought in: the passages as they were
                draft.sources = plain
                lacking = self.lacking_in(draft)
        named = len(evidence.anchors(draft.session.question))
        question = draft.session.question
        draft.sources, lacking, nearby = evidence.checked(
            question, draft.sources, draft.session.scope, lacking, draft.remembered, partial(reader.about, question)
        )
        if nearby is not None:
            draft.trail.add(
                "anchors",
                "found",
                "a chunk of their pages or of another document holds what the passages lack",
                page=nearby.hit.page_number,
                file=nearby.hit.document_name,
            )
            if nearby.hit.kind == "table" and settings.ANSWER_TABLE_CELLS:
                draft.cell = cells.read(draft.session.question, draft.sources)
        if lacking:
            draft.trail.add("anchors", "decline", "near_miss", final=True, missing=", ".join(lacking), named=named)
            return lacking
        draft.trail.add("anchors", "held", "the passages hold every anchor", named=named)
        return None

    def write(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        lacking = draft.lacking
        if lacking is not None:
            yield from writing.decline(draft, lacking)
            return
        if draft.cell is not None:
            draft.trail.add("decide", "answer", "the table cell", final=True)
            yield from self._cell(draft, draft.cell)
        elif draft.mode == "passages" or not draft.sources:
            yield from self._passages(draft, model)
        else:
            yield from modes.answer(draft, model)
        yield from writing.show_picture(draft)

    def _passages(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        """The model reads whole passages and writes (a remote model's way; or with memories only)."""
        session = draft.session
        if model is None:
            yield from draft.take_turn()
            model = draft.model
        assert model is not None
        if draft.sources:
            draft.judge = writing.judge(draft, model)
        if writing.judged_unanswered(draft):
            with_content(
                log,
                logging.INFO,
                "The judge says the passages do not answer (%.3f; %s)",
                draft.judge,
                session.ids,
                question=session.question,
            )
            draft.trail.add("decide", "decline", "judge", final=True, judge=draft.judge)
            yield from writing.decline(draft, [])
            return
        yield modes.stage(draft, "write")
        yield from writing.written(draft, model)
        refused = writing.refused(draft)
        draft.trail.add(
            "write",
            "decline" if refused else "answer",
            "model_refused" if refused else "the model wrote from the passages",
            final=True,
            judge=draft.judge,
            **{key: value for key, value in draft.checks.items()},
        )

    def _cell(self, draft: Draft, cell: cells.Cell) -> Iterator[Event]:
        session = draft.session
        with_content(
            log,
            logging.INFO,
            "Answered with a table cell of document %s, chunk %s (%s)",
            cell.source.hit.document_id,
            cell.source.hit.chunk_id,
            session.ids,
            row=cell.row,
            column=cell.column,
            value=cell.value,
            question=session.question,
        )
        draft.checks["table_cell"] = 1
        draft.text = prompts.table_cell(draft.language, cell.value, cell.row, cell.column, cell.source.number)
        session.mark("first_token")
        yield AnswerDelta(draft.text)
        draft.quotes = {cell.source.number: cell.sentence}


@register
class Rewrite(Direct):
    """A follow-up that leans on an earlier turn, searched as one self-contained question:
    the model's rewrite, or (with no model to ask: answers made from the evidence) the
    earlier question and this one together."""

    name: ClassVar[Strategy] = "rewrite"

    def prepare(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        session = draft.session
        if model is None:
            draft.query = router.with_topic(session.question, session.history)
        else:
            draft.query = router.rewrite(model, session.question, session.history)
        session.mark("rewrite")
        yield Rewritten(question=session.question, query=draft.query)


@register
class MultiStep(AnswerStrategy):
    name: ClassVar[Strategy] = "multi_step"

    def gather(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        session = draft.session
        wants_media = media_intent(session.question)
        plan = planner.plan(model, draft.query)
        draft.plan = plan.steps
        session.mark("plan")
        yield Planned(steps=list(plan.steps), by=plan.by)
        yield modes.stage(draft, "search", count=len(session.scope.versions))
        for number, step in enumerate(plan.steps, start=1):
            session.check()
            yield StepStarted(step=number, query=step)
            results = search(session.user, step, scope=session.scope, k=settings.ANSWER_SOURCES, media=wants_media)
            draft.steps.append(StepEvidence(number, step, results.hits))
            draft.media.extend(results.attachments)
            yield StepFound(step=number, hits=[preview(hit, draft.language) for hit in results.hits])
        session.mark("retrieval")
        draft.sources = answers.sources_of_steps(draft.steps)
        yield modes.stage(draft, "found", count=len(draft.sources))
        draft.trail.add(
            "retrieve",
            "found" if draft.sources else "nothing",
            "each step's best passages",
            passages=len(draft.sources),
            steps=len(draft.steps),
        )
        self._rows_beside(draft)
        lacking = self.lacking_in(draft)
        if lacking:
            draft.lacking = lacking
            draft.trail.add("anchors", "decline", "near_miss", final=True, missing=", ".join(lacking))
            return
        draft.trail.add("anchors", "held", "the passages hold every anchor")
        if draft.sources:
            yield modes.stage(draft, "read")
        for found in draft.steps:
            own = [source for source in draft.sources if source.step == found.number]
            if not own:
                continue
            reading = modes.read(draft, own, step_query=found.query)
            draft.step_readings[found.number] = reading
            if reading.best is not None:
                yield modes.evidence_event(draft, reading.best, reading.confidence, step=found.number)
        session.mark("evidence")

    def _rows_beside(self, draft: Draft) -> None:
        """Each step's passages checked as a direct question's are (evidence.checked): where
        they lack what the step names ("aged 70-74" in a table's row that ranks under its
        page's prose), a chunk on one of their pages that holds it takes the place of the
        step's last passage, keeping its number."""
        sources = list(draft.sources)
        for found in draft.steps:
            own = [source for source in sources if source.step == found.number]
            lacking = evidence.unsupported(found.query, own, draft.remembered) if own else []
            if not lacking:
                continue
            _, _, nearby = evidence.checked(
                found.query, own, draft.session.scope, lacking, draft.remembered, partial(reader.about, found.query)
            )
            if nearby is None:
                continue
            last = own[-1]
            sources[sources.index(last)] = Source(last.number, nearby.hit, found.number)
            draft.trail.add(
                "anchors",
                "found",
                "a chunk of their pages or of another document holds what a step's passages lack",
                step=found.number,
                page=nearby.hit.page_number,
                file=nearby.hit.document_name,
            )
        draft.sources = tuple(sources)

    def write(self, draft: Draft, model: ChatModel | None) -> Iterator[Event]:
        if draft.lacking:
            yield from writing.decline(draft, draft.lacking)
            return
        if draft.mode != "passages" and draft.sources:
            yield from modes.steps_answer(draft)
            return
        if model is None:
            yield from draft.take_turn()
            model = draft.model
        assert model is not None
        yield modes.stage(draft, "write")
        yield from writing.written(draft, model)
        if draft.sources:
            draft.quotes |= yield from writing.every_step_heard(draft)
        refused = writing.refused(draft)
        draft.trail.add(
            "write",
            "decline" if refused else "answer",
            "model_refused" if refused else "the model summarised the steps' passages",
            final=True,
            **{key: value for key, value in draft.checks.items()},
        )


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

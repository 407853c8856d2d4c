"""One question, start to finish: the answer's run. The question is checked and recorded
first (answering.session.start); then `run` takes the local model's turn, routes the question
(answering.router), lets the route's strategy gather passages and write (answering.strategies,
answering.writing), adds citations and attachments, stores the answer, and queues what the
user said about themselves for memory. A generator of protocol events (answering.events),
read by the websocket consumer, the HTTP view (JSON or Server-Sent Events) and
`manage.py chat` alike.

    session = start(user, "年假可以累积吗？", collection_ids=[3])   # AskError: nothing to run
    for event in run(session, cancelled=lambda: False): ...

Every way an answer can end is handled in `_run`: done, cancelled (done, with what was said
stored), the client gone (stored, no event), or failed (`failure`: one error event, which the
websocket also sends when its own stream fails)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from assistant.answering import answer as answers
from assistant.answering import modes, router, strategies, writing
from assistant.answering.bridge import events_in_thread
from assistant.answering.decisions import DECLINE
from assistant.answering.events import (
    Attachments,
    Citations,
    Closest,
    Done,
    Event,
    Failed,
    MemoryUsed,
    Queued,
    StrategyChosen,
)
from assistant.answering.events import collect as collect
from assistant.answering.session import AskError as AskError
from assistant.answering.session import Draft, Session, searched_collections, started
from assistant.answering.session import start as start
from assistant.busy import Answering
from assistant.memory.gate import gate
from assistant.memory.service import MemoryItem, MemoryUnavailable, memories
from assistant.models import Message
from common import metrics
from common.cancelled import Cancelled
from common.language import language_of
from common.runs import send_now
from knowledge.principal import is_limited
from providers import registry
from providers.base import ChatModel, ProviderError, Role

log = logging.getLogger(__name__)

MAX_ATTACHMENTS = 4


def answer_events(
    session: Session, *, cancelled: Callable[[], bool] = lambda: False, model: ChatModel | None = None
) -> Generator[Event, None, None]:
    """`started`, then the answer's events: for callers that read it all in one thread."""
    yield started(session)
    yield from run(session, cancelled=cancelled, model=model)


async def streamed_events(session: Session) -> AsyncIterator[Event]:
    """`started`, then the answer's events as they come, the pipeline run in a thread of its
    own (bridge.events_in_thread): for async callers (the API's event stream, the MCP tool,
    the OpenAI-compatible stream); a caller that stops reading stops the answer."""
    yield started(session)
    async for event in events_in_thread(lambda cancelled: run(session, cancelled=cancelled), threading.Event()):
        yield event


# The local model answers one question at a time (one llama.cpp context per process): an
# answer takes its turn for all its model calls, so the first to ask is the first answered
# instead of twenty answers interleaving their calls and all finishing late.
_LOCAL_MODEL = threading.Semaphore(1)


def run(
    session: Session, *, cancelled: Callable[[], bool] = lambda: False, model: ChatModel | None = None
) -> Iterator[Event]:
    """The events of one answer after `started`, ending with `done` or `error`; the answer is
    stored either way."""
    session.cancelled = cancelled
    held: list[Callable[[], None]] = []  # what to release when the answer ends
    try:
        yield from _run(session, model, held)
    finally:
        for release in held:
            release()


def _wait_turn(session: Session, held: list[Callable[[], None]]) -> Iterator[Event]:
    if not _LOCAL_MODEL.acquire(blocking=False):
        yield Queued()
        while not _LOCAL_MODEL.acquire(timeout=0.5):
            if session.cancelled():
                raise Cancelled
    held.append(_LOCAL_MODEL.release)
    session.progress = time.perf_counter()  # waiting in the queue is not a stall
    session.mark("queued")


def _run(session: Session, model: ChatModel | None, held: list[Callable[[], None]]) -> Iterator[Event]:
    draft = Draft(session, language=language_of(session.question))
    draft.mode = modes.mode_for(model)
    marks: list[Answering] = []
    local = model is None and registry.role_config("chat").provider == "local"

    def take_turn() -> Iterator[Event]:
        """The chat model for this answer: with the local one, after waiting for its turn."""
        if draft.model is not None:
            return
        if local:
            # Memory extraction (another process, the same cores) waits while this is marked.
            marks.append(Answering())
            held.append(marks[-1].end)
            yield from _wait_turn(session, held)
        draft.model = model or registry.chat_model()

    draft.take_turn = take_turn
    try:
        if draft.mode == "passages":  # the model routes, plans and writes: its turn first
            yield from take_turn()
        for event in _answer(draft, draft.model):
            session.progress = time.perf_counter()
            for mark in marks:
                mark.touch()
            yield event
    except Cancelled:
        draft.error = "cancelled"
        stopped = _save(draft)
        _count(draft, "cancelled")
        yield Done(cancelled=True, conversation=session.conversation.pk, message=stopped.pk, timings=session.timings)
        return
    except GeneratorExit:  # the reader went away (socket closed): keep what was said
        draft.error = "disconnected"
        _save(draft)
        _count(draft, "disconnected")
        raise
    except Exception as exc:
        draft.error, failed = failure(exc)
        _save(draft)
        _count(draft, "failed")
        metrics.ERRORS.labels("answer", failed.code).inc()
        yield failed
        return
    message = _save(draft)
    session.mark("total")
    message.timings = session.timings
    message.save(update_fields=["timings"])
    _count(draft, "abstained" if draft.abstain else "answered")
    _remember_later(session, message)
    yield Done(
        cancelled=False,
        conversation=session.conversation.pk,
        message=message.pk,
        timings=session.timings,
        strategy=draft.route.strategy if draft.route else "",
        abstain=draft.abstain,
        checks=draft.checks,
        judge=draft.judge,
        mode=draft.mode,
        decisions=draft.trail.to_json(),
    )


def _count(draft: Draft, outcome: str) -> None:
    """For /metrics: how the answer ended, and when each of its stages did."""
    strategy = draft.route.strategy if draft.route else ""
    metrics.answer_ended(strategy, draft.mode, outcome, draft.session.timings)


def failure(exc: Exception) -> tuple[str, Failed]:
    """What an answer that failed stores as its error, and the event that tells the client."""
    if isinstance(exc, ProviderError):
        log.warning("Answer failed: %s", exc)
        return str(exc), Failed("model", _("The chat model failed: %(error)s") % {"error": exc})
    if isinstance(exc, TimeoutError):
        message = _("The answer made no progress for %(seconds)d seconds and was stopped.") % {
            "seconds": settings.ANSWER_TIMEOUT
        }
        return "timeout", Failed("timeout", message)
    log.error("Answer failed", exc_info=exc)
    message = _("Something went wrong while answering; the error is in the portal's log.")
    return "internal error", Failed("internal", message)


def _answer(draft: Draft, model: ChatModel | None) -> Iterator[Event]:
    """The answer's stages; `model` None: the model is taken only where the mode needs it
    (answering.modes), and the router and the planner use their rules."""
    session = draft.session
    draft.route = router.route(model, session.question, session.history)
    session.mark("route")
    yield StrategyChosen(strategy=draft.route.strategy, reason=draft.route.reason, by=draft.route.by)
    session.check()
    strategy = strategies.for_route(draft.route.strategy)
    yield from strategy.prepare(draft, model)
    session.check()
    recalled = _recall(session, draft.query)
    if recalled is not None:
        draft.memories = recalled
        session.mark("memory")
        yield MemoryUsed([{"id": item.id, "text": item.text, "score": item.score} for item in recalled])
        session.check()
    yield from strategy.gather(draft, model)
    session.check()
    yield from strategy.write(draft, model)
    pictures = writing.shown(draft, MAX_ATTACHMENTS)
    yield from writing.cite_pictures(draft, pictures)
    sources = draft.sources
    used = answers.cited(draft.text, len(sources))
    final = draft.trail.final()
    if final is not None:
        draft.abstain = final.outcome == DECLINE
    else:
        draft.abstain = not (sources or draft.memories) or answers.abstains(draft.text, used)
    inferred = () if draft.abstain else answers.attributed(draft.text, sources, used)
    by_number = {source.number: source for source in sources}
    draft.citations = answers.citations(
        [(by_number[number], False) for number in used] + [(by_number[number], True) for number in inferred],
        draft.language,
        draft.quotes,
    )
    if draft.abstain and draft.closest:  # declined by the portal, not answered after all (a picture shown)
        yield Closest(draft.closest)
    yield Citations(draft.citations)
    if draft.abstain:  # declined after all: only the pictures that match what it asks to see
        pictures = [hit for hit in pictures if hit.promoted]
    draft.attachments = answers.attachments(pictures)
    if draft.attachments:
        draft.trail.add("attach", "attached", "the pictures or videos the search found", count=len(draft.attachments))
    yield Attachments(draft.attachments)


def _recall(session: Session, query: str) -> list[MemoryItem] | None:
    """The user's memories about the question; None when memory is off or failing (the
    answer goes on without them). The memory is the account's: an answer to a token limited
    to some collections neither reads it (it may hold what the others said) nor adds to it."""
    if not settings.MEMORY_ENABLED or is_limited(session.user):
        return None
    try:
        return memories().search(session.user, query)
    except MemoryUnavailable as exc:
        log.warning("Answering without memories: %s", exc)
    except Exception:
        log.exception("Answering without memories: the memory search failed")
    return None


def _remember_later(session: Session, message: Message) -> None:
    """What the user said about themselves becomes memories in a Celery task, once the answer
    is stored; a question that says nothing about the user (the gate) queues nothing."""
    if (
        not settings.MEMORY_ENABLED
        or is_limited(session.user)
        or not message.content
        or not gate(session.question).keep
    ):
        return

    def queue() -> None:
        try:
            send_now("assistant.remember_turn", message.pk)
        except Exception:  # a broker outage costs a memory, not the answer
            log.warning("Could not queue the memories of message %s", message.pk, exc_info=True)

    transaction.on_commit(queue)


def _save(draft: Draft) -> Message:
    session, route = draft.session, draft.route
    return Message.objects.create(
        conversation=session.conversation,
        role=Message.Role.ASSISTANT,
        content=draft.text,
        strategy=route.strategy if route else "",
        rewrite=draft.query if route and route.strategy == "rewrite" else "",
        plan=list(draft.plan),
        citations=draft.citations,
        attachments=draft.attachments,
        timings=session.timings,
        abstain=draft.abstain,
        error=draft.error,
        mode=draft.mode,
        decisions=draft.trail.to_json(),
        evidence=draft.evidence,
        closest=draft.closest,
        searched=searched_collections(session),
        models_used=models_used(),
    )


def models_used() -> dict[str, str]:
    """The models that an answer is made with now, by role: "provider:model" of the chat
    model, the text embedder and the reranker where one is configured."""
    used: dict[str, str] = {}
    for role in ANSWER_ROLES:
        if registry.available(role):
            config = registry.role_config(role)
            used[role] = f"{config.provider}:{config.model}"
    return used


ANSWER_ROLES: tuple[Role, ...] = ("chat", "embedding", "rerank")

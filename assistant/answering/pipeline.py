"""One question, start to finish: access checks, the conversation, routing, retrieval (per
plan step in multi-step answers), the streamed answer, citations, attachments, and the
stored messages. A generator of protocol events, read by the websocket consumer, the HTTP
view (JSON or Server-Sent Events) and `manage.py chat` alike.

    session = start(user, "年假可以累积吗？", collection_ids=[3])   # AskError: nothing to run
    for event in run(session, cancelled=lambda: False): ...
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from assistant.answering import answer as answers
from assistant.answering import cells, evidence, passages, planner, prompts, router, verify
from assistant.answering.language import Language, language_of
from assistant.answering.prompts import NO_ANSWER
from assistant.answering.types import Event, Route, Source, StepEvidence, Turn
from assistant.busy import Answering
from assistant.memory.gate import gate
from assistant.memory.service import MemoryItem, MemoryUnavailable, memories
from assistant.models import Conversation, Message
from assistant.providers import registry
from assistant.providers.base import ChatModel, ProviderError
from assistant.retrieval.fusion import media_intent
from assistant.retrieval.scope import Scope, scope_for
from assistant.retrieval.search import search
from assistant.retrieval.types import Hit
from knowledge.models import Collection
from portal.typing import AnyUser

log = logging.getLogger(__name__)

MAX_ATTACHMENTS = 4
CLOSEST_PASSAGES = 3  # listed when the portal declines
MAX_PICTURE_WORDS = 300  # characters of a picture's description an answer shows
# The judge's P(yes) - P(no) from which a refusal of the model is overruled by a quote of the
# best passage (_quote_refusal): above the declining threshold, so that a doubtful judgement
# (a photo with no text, whose passages are about something else) still lets the model refuse.
QUOTE_AFTER_REFUSAL = 0.0


class AskError(Exception):
    """A question that cannot start: the message says what to change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Cancelled(Exception):  # noqa: N818 (a state, not a fault)
    pass


@dataclass
class Session:
    user: AnyUser
    question: str
    conversation: Conversation
    question_message: Message
    scope: Scope
    history: tuple[Turn, ...]
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    progress: float = field(default_factory=time.perf_counter)  # when the last event went out

    def mark(self, name: str) -> None:
        self.timings[name] = round((time.perf_counter() - self.started) * 1000, 1)


def start(
    user: AnyUser,
    question: str,
    *,
    collection_ids: Sequence[int] | None = None,
    conversation_id: int | None = None,
) -> Session:
    """Check the question and what it may read, and record it; raises AskError."""
    started = time.perf_counter()
    question = " ".join(str(question or "").split())
    if not question:
        raise AskError("invalid", _("Ask a question first."))
    if len(question) > settings.MAX_QUERY_CHARS:
        raise AskError(
            "invalid",
            _("The question is too long: at most %(count)d characters.") % {"count": settings.MAX_QUERY_CHARS},
        )
    collection_ids = list(collection_ids) if collection_ids else None  # none named: all the user may see
    conversation = None
    if conversation_id is not None:
        conversation = Conversation.objects.visible_to(user).filter(pk=conversation_id).first()
        if conversation is None:
            raise AskError("not_found", _("That conversation does not exist."))
        if collection_ids is None:
            collection_ids = list(conversation.collections.values_list("pk", flat=True)) or None
    if collection_ids:  # one query for all of them: what the user cannot see does not exist
        visible = set(Collection.objects.visible_to(user).filter(pk__in=collection_ids).values_list("pk", flat=True))
        for collection_id in collection_ids:
            if collection_id not in visible:
                raise AskError(
                    "not_found", _("Collection %(id)s does not exist or you cannot see it.") % {"id": collection_id}
                )
    scope = scope_for(user, collection_ids)
    with transaction.atomic():
        if conversation is None:  # few queries: the first event waits for these
            conversation = Conversation.objects.create(user=user, title=question[:80])  # type: ignore[misc]
            conversation.collections.add(*(collection_ids or []))
            history: tuple[Turn, ...] = ()
        else:
            history = _history(conversation)
            conversation.collections.set(collection_ids or [])
            conversation.save(update_fields=["updated_at"])
        message = Message.objects.create(conversation=conversation, role=Message.Role.USER, content=question)
    return Session(user, question, conversation, message, scope, history, started=started)


def _history(conversation: Conversation) -> tuple[Turn, ...]:
    """The last turns: each question with the answer that followed it. An answer cut by an
    error is no answer: its part would be taken as what was said."""
    if not settings.HISTORY_TURNS:
        return ()
    recent = list(conversation.messages.order_by("-pk")[: settings.HISTORY_TURNS * 2])[::-1]
    turns: list[Turn] = []
    for message in recent:
        if message.role == Message.Role.USER:
            turns.append(Turn(message.content, ""))
        elif turns and not turns[-1].answer and not message.error:
            turns[-1] = Turn(turns[-1].question, message.content)
    return tuple(turn for turn in turns if turn.answer)


def started(session: Session) -> Event:
    """The first event, sent as soon as the question is recorded (before any model work, so
    that a client knows its conversation at once, however busy the models are)."""
    session.mark("first_event")
    return {"type": "started", "conversation": session.conversation.pk, "message": session.question_message.pk}


def answer_events(session: Session, **options: Any) -> Generator[Event, None, None]:
    """`started`, then the answer's events: for callers that read it all in one thread."""
    yield started(session)
    yield from run(session, **options)


# The local model answers one question at a time (one llama.cpp context per process): an
# answer takes its turn for all its model calls, so the first to ask is the first answered
# instead of twenty answers interleaving their calls and all finishing late.
_LOCAL_MODEL = threading.Semaphore(1)


def run(
    session: Session, *, cancelled: Callable[[], bool] = lambda: False, model: ChatModel | None = None
) -> Iterator[Event]:
    """The events of one answer after `started`, ending with `done` or `error`; the answer is
    stored either way."""
    held: list[Callable[[], None]] = []  # what to release when the answer ends
    try:
        yield from _run(session, cancelled, model, held)
    finally:
        for release in held:
            release()


def _wait_turn(session: Session, cancelled: Callable[[], bool], held: list[Callable[[], None]]) -> Iterator[Event]:
    if not _LOCAL_MODEL.acquire(blocking=False):
        yield {"type": "queued"}
        while not _LOCAL_MODEL.acquire(timeout=0.5):
            if cancelled():
                raise Cancelled
    held.append(_LOCAL_MODEL.release)
    session.progress = time.perf_counter()  # waiting in the queue is not a stall
    session.mark("queued")


def _run(
    session: Session, cancelled: Callable[[], bool], model: ChatModel | None, held: list[Callable[[], None]]
) -> Iterator[Event]:
    state = _State(session)
    mark: Answering | None = None
    try:
        if model is None and registry.role_config("chat").provider == "local":
            # Memory extraction (another process, the same cores) waits while this is marked.
            mark = Answering()
            held.append(mark.end)
            yield from _wait_turn(session, cancelled, held)
        model = model or registry.chat_model()
        for event in _answer(session, state, model, cancelled):
            session.progress = time.perf_counter()
            if mark:
                mark.touch()
            yield event
    except Cancelled:
        state.error = "cancelled"
        stopped = _save(session, state)
        yield {"type": "done", "cancelled": True, **state.ids(stopped), "timings": session.timings}
        return
    except ProviderError as exc:
        log.warning("Answer failed: %s", exc)
        state.error = str(exc)
        _save(session, state)
        yield {"type": "error", "code": "model", "message": _("The chat model failed: %(error)s") % {"error": exc}}
        return
    except GeneratorExit:  # the reader went away (socket closed): keep what was said
        state.error = "disconnected"
        _save(session, state)
        raise
    except TimeoutError:
        state.error = "timeout"
        _save(session, state)
        yield {
            "type": "error",
            "code": "timeout",
            "message": _("The answer made no progress for %(seconds)d seconds and was stopped.")
            % {"seconds": settings.ANSWER_TIMEOUT},
        }
        return
    except Exception:
        log.exception("Answer failed")
        state.error = "internal error"
        _save(session, state)
        yield {
            "type": "error",
            "code": "internal",
            "message": _("Something went wrong while answering; the error is in the portal's log."),
        }
        return
    message = _save(session, state)
    session.mark("total")
    message.timings = session.timings
    message.save(update_fields=["timings"])
    _remember_later(session, message)
    yield {
        "type": "done",
        "cancelled": False,
        **state.ids(message),
        "strategy": state.route.strategy if state.route else "",
        "abstain": state.abstain,
        "checks": state.checks,
        "judge": state.judge,
        "timings": session.timings,
    }


@dataclass
class _State:
    session: Session
    route: Route | None = None
    query: str = ""
    plan: tuple[str, ...] = ()
    text: str = ""
    abstain: bool = False
    citations: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    memories: list[MemoryItem] = field(default_factory=list)
    error: str = ""
    # What the portal did to the model's answer: retried a refusal, removed unsupported
    # sentences, quoted a passage, added the steps the summary left out.
    checks: dict[str, int] = field(default_factory=dict)
    judge: float | None = None  # P(yes) - P(no) that the passages state the answer, when judged

    def ids(self, message: Message | None = None) -> dict[str, Any]:
        return {"conversation": self.session.conversation.pk, "message": message.pk if message else None}


def _answer(session: Session, state: _State, model: ChatModel, cancelled: Callable[[], bool]) -> Iterator[Event]:
    question = session.question

    def check() -> None:
        if cancelled():
            raise Cancelled
        # Stalled, not slow: a queue of answers waiting for one local model still moves.
        if time.perf_counter() - session.progress > settings.ANSWER_TIMEOUT:
            raise TimeoutError

    state.route = router.route(model, question, session.history)
    session.mark("route")
    yield {"type": "strategy", "strategy": state.route.strategy, "reason": state.route.reason, "by": state.route.by}
    check()
    state.query = question
    if state.route.strategy == "rewrite":
        state.query = router.rewrite(model, question, session.history)
        session.mark("rewrite")
        yield {"type": "rewrite", "question": question, "query": state.query}
        check()
    recalled = _recall(session, state.query)
    if recalled is not None:
        state.memories = recalled
        session.mark("memory")
        yield {"type": "memory.used", "memories": [_memory(item) for item in recalled]}
        check()
    language = language_of(question)
    wants_media = media_intent(question)
    media_hits: list[Hit] = []
    steps: list[StepEvidence] = []
    cell: cells.Cell | None = None  # the one table cell the question names (answering.cells)
    if state.route.strategy == "multi_step":
        plan = planner.plan(model, state.query)
        state.plan = plan.steps
        session.mark("plan")
        yield {"type": "plan", "steps": list(plan.steps), "by": plan.by}
        for number, step in enumerate(plan.steps, start=1):
            check()
            yield {"type": "step.start", "step": number, "query": step}
            results = search(session.user, step, scope=session.scope, k=settings.ANSWER_SOURCES, media=wants_media)
            steps.append(StepEvidence(number, step, results.hits))
            media_hits.extend(results.attachments)
            yield {"type": "step.result", "step": number, "hits": [_preview(hit, language) for hit in results.hits]}
        session.mark("retrieval")
        sources = answers.sources_of_steps(steps)
    else:
        results, sources, cell = cells.search_with_cell(session.user, state.query, session.scope, media=wants_media)
        media_hits.extend(results.attachments)
        session.mark("retrieval")
        yield {"type": "retrieval", "sources": [_preview(source.hit, language, source) for source in sources]}
    check()
    remembered = [item.text for item in state.memories]
    lacking = evidence.unsupported(session.question, sources, remembered) if sources else []
    quotes: dict[int, str] = {}
    if cell is not None and lacking:  # the question names more than the cell's table holds: as without it
        cell, plain = None, answers.sources_of(results.hits)
        if plain != sources:  # the cell's chunk was brought in: the passages as they were
            sources, lacking = plain, evidence.unsupported(session.question, plain, remembered)
    if not lacking and sources and not steps and cell is None:
        state.judge = _judge(session, state, model, sources, language)
    if lacking:  # a near miss: the passages are about something else; no model guesses from them
        log.info("Not in the documents: %s (question %r)", ", ".join(lacking), session.question[:100])
        yield from _decline(session, state, sources, language, lacking)
    elif cell is not None:
        log.info("Answered with a table cell (%s; %s): question %r", cell.row, cell.column, session.question[:100])
        state.checks["table_cell"] = 1
        state.text = prompts.table_cell(language, cell.value, cell.row, cell.column, cell.source.number)
        session.mark("first_token")
        yield {"type": "answer.delta", "text": state.text}
        quotes = {cell.source.number: cell.sentence}
    elif state.judge is not None and settings.ANSWER_JUDGE is not None and state.judge < settings.ANSWER_JUDGE:
        log.info("The judge says the passages do not answer (%.3f): question %r", state.judge, session.question[:100])
        yield from _decline(session, state, sources, language, [])
    else:
        yield from _generate(session, state, model, sources, steps, language, check)
        if sources:
            yield from _retry_refusal(session, state, model, sources, language)
            yield from _quote_refusal(state, sources, language)
            quotes = yield from _verified(session, state, sources, language, remembered)
            if steps:
                quotes |= yield from _every_step_heard(state, sources, steps, language)
    if not lacking and not steps:
        yield from _show_picture(state, sources, language)
    used = answers.cited(state.text, len(sources))
    state.abstain = not (sources or state.memories) or answers.abstains(state.text, used)
    inferred = () if state.abstain else answers.attributed(state.text, sources, used)
    by_number = {source.number: source for source in sources}
    state.citations = answers.citations(
        [(by_number[number], False) for number in used] + [(by_number[number], True) for number in inferred],
        language,
        quotes,
    )
    yield {"type": "citations", "citations": state.citations}
    if not state.abstain:
        unique = {hit.chunk_id: hit for hit in media_hits}
        state.attachments = answers.attachments(list(unique.values())[:MAX_ATTACHMENTS])
    yield {"type": "attachments", "attachments": state.attachments}


def _generate(
    session: Session,
    state: _State,
    model: ChatModel,
    sources: Sequence[Source],
    steps: Sequence[StepEvidence],
    language: Language,
    check: Callable[[], None],
) -> Iterator[Event]:
    if not sources and not state.memories:  # nothing to read: say so without asking the model to guess
        state.text = NO_ANSWER[language]
        session.mark("first_token")
        yield {"type": "answer.delta", "text": state.text}
        return
    prompt = answers.messages(state.query, sources, language, steps, [item.text for item in state.memories])
    parts: list[str] = []
    stream = model.stream(prompt, max_tokens=settings.ANSWER_MAX_TOKENS, temperature=0.2)
    try:
        for delta in stream:
            if not parts:
                session.mark("first_token")
            parts.append(delta)
            state.text = "".join(parts)
            yield {"type": "answer.delta", "text": delta}
            check()
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()  # stops the model's generation (and frees its lock) on cancel or timeout
    session.mark("answer")


def _judge(
    session: Session, state: _State, model: ChatModel, sources: Sequence[Source], language: Language
) -> float | None:
    """P(yes) - P(no) of the model asked whether the passages state the answer, when the
    judge is on (PORTAL_ANSWER_JUDGE) and the model can be asked so (the local one). Its
    prompt is the answer's up to the question, so the answer reads only its last line."""
    judge = getattr(model, "yes_minus_no", None)
    if settings.ANSWER_JUDGE is None or judge is None:
        return None
    memories = [item.text for item in state.memories]
    score = float(judge(answers.messages(state.query, sources, language, (), memories, prompts.JUDGE[language])))
    session.mark("judge")
    return round(score, 4)


def _retry_refusal(
    session: Session, state: _State, model: ChatModel, sources: Sequence[Source], language: Language
) -> Iterator[Event]:
    """The passages name everything the question asks about (the evidence check passed), yet
    the model said the documents do not hold the answer: it is asked once more, on the best
    passage alone, where the answer is easiest to see. Its answer replaces the refusal unless
    it refuses again."""
    if not answers.abstains(state.text, answers.cited(state.text, len(sources))):
        return
    best = sources[:1]
    prompt = answers.messages(state.query, best, language, (), [item.text for item in state.memories])
    retried = model.complete(prompt, max_tokens=settings.ANSWER_MAX_TOKENS, temperature=0.2).text.strip()
    session.mark("retry")
    if retried and not answers.abstains(retried, answers.cited(retried, len(best))):
        log.info("Answered on the best passage after a refusal (question %r)", session.question[:100])
        state.checks["retried"] = 1
        state.text = retried
        yield {"type": "answer.replace", "text": state.text}


def _quote_refusal(state: _State, sources: Sequence[Source], language: Language) -> Iterator[Event]:
    """The evidence check found everything the question names and the judge found the answer
    stated, yet the model refused twice: the portal answers with the best passage's own
    words, quoted and cited (on the public evaluation the local model's refusals were nearly
    all wrong: 11 of the 12 it made after the evidence check were answerable questions)."""
    if state.judge is None or state.judge < QUOTE_AFTER_REFUSAL:
        return
    if not answers.abstains(state.text, answers.cited(state.text, len(sources))):
        return
    quoted = verify.quoted(state.session.question, sources, sources[0].number, language)
    if quoted:
        log.info("Quoted the best passage after two refusals (question %r)", state.session.question[:100])
        state.checks["quoted_refusal"] = 1
        state.text = quoted
        yield {"type": "answer.replace", "text": state.text}


def _show_picture(state: _State, sources: Sequence[Source], language: Language) -> Iterator[Event]:
    """A picture whose description matches what the question asks to see leads the passages
    (retrieval.pictures); when the model (or the judge) would not answer from its few words,
    the portal shows it: the picture, cited, and what its description says, in the question's
    language. "Show me the photo of a ladybug" has no other answer than the picture."""
    if not answers.abstains(state.text, answers.cited(state.text, len(sources))):
        return
    picture = next((source for source in sources if source.hit.promoted), None)
    if picture is None:
        return
    lines = [line.strip() for line in picture.hit.text.splitlines() if line.strip()]
    chinese = [line for line in lines if language_of(line) == "zh"]
    english = [line for line in lines if line not in chinese]
    words = " ".join((chinese if language == "zh" else english) or lines)[:MAX_PICTURE_WORDS]
    log.info("Showed the matching picture instead of a refusal (question %r)", state.session.question[:100])
    state.checks["picture_shown"] = 1
    state.text = prompts.picture_found(language, picture.hit.document_name, picture.number, words)
    yield {"type": "answer.replace", "text": state.text}


def _verified(
    session: Session, state: _State, sources: Sequence[Source], language: Language, remembered: Sequence[str]
) -> Generator[Event, None, dict[int, str]]:
    """The answer checked against its passages (answering.verify): a changed answer replaces
    the streamed one (`answer.replace`). Returns the span of each cited passage it rests on."""
    if answers.abstains(state.text, answers.cited(state.text, len(sources))):
        return {}
    checked = verify.check(state.text, session.question, sources, language, [state.query, *remembered])
    session.mark("verify")
    if checked.removed:
        log.info("Removed from an answer, not in its passages: %s", "; ".join(checked.removed)[:500])
        state.checks["removed"] = len(checked.removed)
    if checked.quoted:
        state.checks["quoted"] = 1
    if checked.text != state.text:
        state.text = checked.text
        yield {"type": "answer.replace", "text": state.text}
    return checked.quotes


def _every_step_heard(
    state: _State, sources: Sequence[Source], steps: Sequence[StepEvidence], language: Language
) -> Generator[Event, None, dict[int, str]]:
    """A multi-step answer cites every step that found evidence: a step whose passages the
    summary left out (small models answer the first half of a comparison and stop) adds
    its best passage's own words, cited. A step found evidence when its best passage holds
    all the step's anchors and shares words with it. A summary that refused although steps
    found evidence (the local model refused 3 of 13 planned questions whose pages it had) is
    replaced by those steps' words. Returns the quotes added, by number."""
    used = set(answers.cited(state.text, len(sources)))
    refused = answers.abstains(state.text, list(used))
    if refused:
        used = set()
    added: dict[int, str] = {}
    text = prompts.STEPS_INTRO[language] if refused else state.text
    for step in steps:
        own = [source for source in sources if source.step == step.number]
        if not own or any(source.number in used for source in own):
            continue
        best = own[0]
        span = passages.quote(best.hit.text, passages.terms(step.query))
        if span and not evidence.missing(step.query, [evidence.said(best.hit)]):
            added[best.number] = span
            text += f"\n- {step.query}{'：' if language == 'zh' else ': '}“{verify.shorten(span)}” [{best.number}]"
    if added:
        state.checks["steps_quoted" if refused else "steps_added"] = len(added)
        state.text = text
        yield {"type": "answer.replace", "text": state.text}
    return added


def _decline(
    session: Session, state: _State, sources: Sequence[Source], language: Language, lacking: Sequence[str]
) -> Iterator[Event]:
    """The portal's own answer when the passages lack what the question names: no answer,
    what was not found, and the closest passages (not citations: they do not answer)."""
    pages = list(dict.fromkeys((source.hit.document_name, answers.place(source.hit, language)) for source in sources))
    state.text = prompts.declined(language, lacking, pages[:CLOSEST_PASSAGES])
    session.mark("first_token")
    yield {"type": "answer.delta", "text": state.text}


def _recall(session: Session, query: str) -> list[MemoryItem] | None:
    """The user's memories about the question; None when memory is off or failing (the
    answer goes on without them)."""
    if not settings.MEMORY_ENABLED:
        return None
    try:
        return memories().search(session.user, query)
    except MemoryUnavailable as exc:
        log.warning("Answering without memories: %s", exc)
    except Exception:
        log.exception("Answering without memories: the memory search failed")
    return None


def _memory(item: MemoryItem) -> dict[str, Any]:
    return {"id": item.id, "text": item.text, "score": item.score}


def _remember_later(session: Session, message: Message) -> None:
    """What the user said about themselves becomes memories in a Celery task, once the answer
    is stored; a question that says nothing about the user (the gate) queues nothing."""
    if not settings.MEMORY_ENABLED or not message.content or not gate(session.question).keep:
        return

    def queue() -> None:
        from assistant.tasks import remember_turn

        try:
            remember_turn.delay(message.pk)
        except Exception:  # a broker outage costs a memory, not the answer
            log.warning("Could not queue the memories of message %s", message.pk, exc_info=True)

    transaction.on_commit(queue)


def _preview(hit: Hit, language: Language, source: Source | None = None) -> dict[str, Any]:
    return {
        "n": source.number if source else None,
        "chunk_id": hit.chunk_id,
        "file": hit.document_name,
        "page": hit.page_number,
        "place": answers.place(hit, language),
        "score": round(hit.score, 6),
        "snippet": " ".join(hit.text.split())[:160],
    }


def _save(session: Session, state: _State) -> Message:
    route = state.route
    return Message.objects.create(
        conversation=session.conversation,
        role=Message.Role.ASSISTANT,
        content=state.text,
        strategy=route.strategy if route else "",
        rewrite=state.query if route and route.strategy == "rewrite" else "",
        plan=list(state.plan),
        citations=state.citations,
        attachments=state.attachments,
        timings=session.timings,
        abstain=state.abstain,
        error=state.error,
    )


def collect(events: Iterator[Event]) -> dict[str, Any]:
    """The answer as one JSON object (POST /api/ask without streaming), from the same events."""
    result: dict[str, Any] = {
        "answer": "",
        "abstain": False,
        "strategy": "",
        "rewrite": None,
        "plan": [],
        "citations": [],
        "attachments": [],
        "checks": {},
        "judge": None,
        "timings": {},
        "conversation": None,
        "message": None,
        "error": None,
    }
    parts: list[str] = []
    for event in events:
        kind = event["type"]
        if kind == "started":
            result["conversation"] = event["conversation"]
        elif kind == "strategy":
            result["strategy"] = event["strategy"]
        elif kind == "rewrite":
            result["rewrite"] = event["query"]
        elif kind == "plan":
            result["plan"] = event["steps"]
        elif kind == "answer.delta":
            parts.append(event["text"])
        elif kind == "answer.replace":  # the checked answer, instead of what was streamed
            parts = [event["text"]]
        elif kind in ("citations", "attachments"):
            result[kind] = event[kind]
        elif kind == "done":
            result.update(
                abstain=event.get("abstain", False),
                checks=event.get("checks", {}),
                judge=event.get("judge"),
                timings=event["timings"],
                message=event["message"],
            )
        elif kind == "error":
            result["error"] = {"code": event["code"], "message": event["message"]}
    result["answer"] = "".join(parts)
    return result

"""A question, checked and recorded before any model work: what it may read (its scope), its
conversation and the turns before it, and the answer being written (`Draft`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.http import Http404
from django.utils.translation import gettext as _

from assistant.access import access_conversation
from assistant.answering.decisions import Trail
from assistant.answering.events import Started
from assistant.answering.types import Route, Source, StepEvidence, Turn
from assistant.memory.service import MemoryItem
from assistant.models import Conversation, Message
from assistant.retrieval.scope import Scope, scope_for
from assistant.retrieval.types import Hit, SearchResults
from common.cancelled import Cancelled
from common.language import Language
from common.text import storable
from knowledge.models import Collection
from portal.typing import AnyUser

if TYPE_CHECKING:
    from assistant.answering.cells import Cell
    from assistant.answering.events import Event
    from assistant.answering.reader import Reading
    from providers.base import ChatModel


class AskError(Exception):
    """A question that cannot start: the message says what to change."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


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
    cancelled: Callable[[], bool] = lambda: False

    @property
    def ids(self) -> str:
        """Which question a log line is about, by id: its text stays out of the log (common.logs)."""
        return f"message {self.question_message.pk} of conversation {self.conversation.pk}"

    def mark(self, name: str) -> None:
        self.timings[name] = round((time.perf_counter() - self.started) * 1000, 1)

    def check(self) -> None:
        """Between steps: raises Cancelled when the client cancelled, TimeoutError when the
        answer stalled (not slow: a queue of answers waiting for one local model still moves)."""
        if self.cancelled():
            raise Cancelled
        if time.perf_counter() - self.progress > settings.ANSWER_TIMEOUT:
            raise TimeoutError


@dataclass
class Draft:
    """The answer as it is being written, and what it is written from."""

    session: Session
    language: Language = "en"
    route: Route | None = None
    query: str = ""  # what is searched: the question, or its rewrite
    plan: tuple[str, ...] = ()
    memories: list[MemoryItem] = field(default_factory=list)
    results: SearchResults | None = None  # a direct search's results (not a plan's)
    sources: Sequence[Source] = ()  # the passages given to the model, as [n]
    steps: list[StepEvidence] = field(default_factory=list)
    media: list[Hit] = field(default_factory=list)  # the pictures and videos found
    cell: Cell | None = None  # the one table cell a direct question names (answering.cells)
    text: str = ""
    quotes: dict[int, str] = field(default_factory=dict)  # the span each cited passage rests on
    abstain: bool = False
    citations: list[dict[str, Any]] = field(default_factory=list)
    closest: list[dict[str, Any]] = field(default_factory=list)  # a decline's nearest passages (answer.closest)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    # What the portal did to the model's answer: retried a refusal, removed unsupported
    # sentences, quoted a passage, added the steps the summary left out.
    checks: dict[str, int] = field(default_factory=dict)
    judge: float | None = None  # P(yes) - P(no) that the passages state the answer, when judged
    mode: str = ""  # how the answer is made (answering.modes)
    trail: Trail = field(default_factory=Trail)  # every decision made (answering.decisions)
    evidence: list[dict[str, Any]] = field(default_factory=list)  # the `evidence` events sent
    reading: Reading | None = None  # the evidence reader's candidates (answering.reader)
    step_readings: dict[int, Reading] = field(default_factory=dict)  # a plan's, by step
    lacking: list[str] | None = None  # what the question names that the passages lack (a near miss)
    # The chat model, once this answer has its turn (answering.pipeline): a mode that needs
    # the model only to choose or phrase takes it then (`take_turn`), after the evidence.
    model: ChatModel | None = None
    take_turn: Callable[[], Iterator[Event]] = lambda: iter(())

    @property
    def remembered(self) -> list[str]:
        return [item.text for item in self.memories]


def start(
    user: AnyUser,
    question: str,
    *,
    collection_ids: Sequence[int] | None = None,
    conversation_id: int | None = None,
    history: Sequence[Turn] = (),
) -> Session:
    """Check the question and what it may read, and record it; raises AskError. `history`:
    the turns before it, for a new conversation whose client keeps its own (the
    OpenAI-compatible endpoint); a conversation of the portal's has its history stored."""
    started = time.perf_counter()
    question = " ".join(str(question or "").split())
    if not question:
        raise AskError("invalid", _("Ask a question first."))
    if not storable(question):  # a websocket's JSON may carry them; the database stores neither
        raise AskError("invalid", _("The question holds characters that are not text; type it again."))
    if len(question) > settings.MAX_QUERY_CHARS:
        raise AskError(
            "invalid",
            _("The question is too long: at most %(count)d characters.") % {"count": settings.MAX_QUERY_CHARS},
        )
    collection_ids = list(collection_ids) if collection_ids else None  # none named: all the user may see
    conversation = None
    if conversation_id is not None:
        try:
            conversation = access_conversation(user, conversation_id)
        except Http404:
            raise AskError("not_found", _("That conversation does not exist.")) from None
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
            turns = tuple(history)[-settings.HISTORY_TURNS :] if settings.HISTORY_TURNS else ()
        else:
            turns = history_of(conversation)
            conversation.collections.set(collection_ids or [])
            conversation.save(update_fields=["updated_at"])
        message = Message.objects.create(conversation=conversation, role=Message.Role.USER, content=question)
    return Session(user, question, conversation, message, scope, turns, started=started)


def history_of(conversation: Conversation) -> tuple[Turn, ...]:
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


def started(session: Session) -> Started:
    """The first event, sent as soon as the question is recorded (before any model work, so
    that a client knows its conversation at once, however busy the models are)."""
    session.mark("first_event")
    return Started(
        conversation=session.conversation.pk,
        message=session.question_message.pk,
        collections=searched_collections(session),
    )


def searched_collections(session: Session) -> list[dict[str, Any]]:
    """The collections the answer searches, by name, with the index version searched: the
    `started` event's, and the stored answer's (no query: the scope's versions come with their
    collections)."""
    searched = sorted(
        (version.collection.name, version.collection_id, version.number) for version in session.scope.versions
    )
    return [{"id": pk, "name": name, "version": number} for name, pk, number in searched]

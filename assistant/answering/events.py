"""The answer's protocol: every event an answer sends, as one frozen dataclass each.

The pipeline yields these; the websocket (assistant/consumers.py), Server-Sent Events and the
JSON answer (assistant/api/ask.py) and `manage.py chat` all read the same stream. On the wire
an event is its `to_json()`: {"type": <its type>, <its fields>}. In order:

    started  → queued? → stage* → strategy → rewrite? → memory.used? →
    (plan → (step.start → step.result → evidence?)*  |  retrieval → evidence?) →
    (answer.delta | answer.replace)* → closest? → citations → attachments → done | error

`stage` events may come between any two of the others: what the answer is doing now
(searching, found, reading, writing), for a client to show instead of one static line.

`error` may come at any point and ends the answer, as `done` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar


@dataclass(frozen=True)
class Event:
    type: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type} | {item.name: getattr(self, item.name) for item in fields(self)}


@dataclass(frozen=True)
class Started(Event):
    """The question is recorded: sent before any model work."""

    type: ClassVar[str] = "started"
    conversation: int
    message: int
    # The collections the answer searches: [{"id", "name"}], those named or, with none
    # named, every collection the user can see (their own and their teams') with an index.
    collections: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Queued(Event):
    """The local model is answering someone else's question first."""

    type: ClassVar[str] = "queued"


@dataclass(frozen=True)
class StrategyChosen(Event):
    type: ClassVar[str] = "strategy"
    strategy: str  # direct, rewrite or multi_step
    reason: str
    by: str  # model, or rules when the model was not asked or its output was unusable


@dataclass(frozen=True)
class Rewritten(Event):
    """A follow-up question made self-contained before the search."""

    type: ClassVar[str] = "rewrite"
    question: str
    query: str


@dataclass(frozen=True)
class MemoryUsed(Event):
    type: ClassVar[str] = "memory.used"
    memories: list[dict[str, Any]]  # id, text, score


@dataclass(frozen=True)
class Planned(Event):
    type: ClassVar[str] = "plan"
    steps: list[str]
    by: str


@dataclass(frozen=True)
class StepStarted(Event):
    type: ClassVar[str] = "step.start"
    step: int  # 1-based
    query: str


@dataclass(frozen=True)
class StepFound(Event):
    type: ClassVar[str] = "step.result"
    step: int
    hits: list[dict[str, Any]]  # previews: n, chunk_id, file, page, place, score, snippet


@dataclass(frozen=True)
class Retrieved(Event):
    """The passages the answer is written from, numbered as it cites them."""

    type: ClassVar[str] = "retrieval"
    sources: list[dict[str, Any]]


@dataclass(frozen=True)
class StageEntered(Event):
    """What the answer does now, as a person reads it ("Searching 2 collections…", "Found 4
    passages", "Reading…", "Writing…"), in the question's language."""

    type: ClassVar[str] = "stage"
    stage: str  # search, found, read, choose, write, verify
    text: str
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvidenceFound(Event):
    """The span of the passages that answers the question, picked by the evidence reader
    before any model work (answering.reader): the quote, its citation (as in `citations`,
    with the quote's box on the page), and how sure the reader is (0..1). In a multi-step
    answer, one per step that found evidence (`step`)."""

    type: ClassVar[str] = "evidence"
    quote: str
    confidence: float
    citation: dict[str, Any]
    step: int | None = None


@dataclass(frozen=True)
class AnswerDelta(Event):
    """The next part of the answer's text."""

    type: ClassVar[str] = "answer.delta"
    text: str


@dataclass(frozen=True)
class AnswerReplaced(Event):
    """The whole answer, checked against its passages, instead of what was streamed."""

    type: ClassVar[str] = "answer.replace"
    text: str


@dataclass(frozen=True)
class Closest(Event):
    """The portal declined: the passages nearest to an answer, each a link to its page (not
    citations: they do not answer). Only the user's own passages: they are what the answer's
    search, within the user's scope, returned."""

    type: ClassVar[str] = "closest"
    passages: list[dict[str, Any]]  # document_id, file, page, page_id, place, chunk_id, snippet, url


@dataclass(frozen=True)
class Citations(Event):
    type: ClassVar[str] = "citations"
    citations: list[dict[str, Any]]


@dataclass(frozen=True)
class Attachments(Event):
    type: ClassVar[str] = "attachments"
    attachments: list[dict[str, Any]]


@dataclass(frozen=True)
class Done(Event):
    """The answer is stored (also when it was cancelled: what was said is kept)."""

    type: ClassVar[str] = "done"
    cancelled: bool
    conversation: int
    message: int  # the stored answer
    timings: dict[str, float]
    strategy: str = ""
    abstain: bool = False
    checks: dict[str, int] = field(default_factory=dict)
    judge: float | None = None  # P(yes) - P(no) that the passages state the answer, when judged
    mode: str = ""  # how the answer was made: evidence, choose, phrase or passages (settings.ANSWER_MODE)
    # Every decision the answer made, stage by stage (answering.decisions).
    decisions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Failed(Event):
    """The answer stopped (or never started): `message` says why, in the user's language."""

    type: ClassVar[str] = "error"
    code: str  # invalid, not_found, rate_limited, busy, unavailable, model, timeout, internal
    message: str


E = TypeVar("E", bound=Event)


def only(events: Iterable[Event], kind: type[E]) -> list[E]:
    """The events of one kind, in order: only(events, Citations)."""
    return [event for event in events if isinstance(event, kind)]


def collect(events: Iterable[Event]) -> dict[str, Any]:
    """The answer as one JSON object (POST /api/ask without streaming), from the same events."""
    result: dict[str, Any] = {
        "answer": "",
        "abstain": False,
        "strategy": "",
        "rewrite": None,
        "plan": [],
        "citations": [],
        "closest": [],
        "evidence": [],
        "attachments": [],
        "checks": {},
        "judge": None,
        "mode": "",
        "decisions": [],
        "timings": {},
        "conversation": None,
        "message": None,
        "error": None,
    }
    parts: list[str] = []
    for event in events:
        match event:
            case Started():
                result["conversation"] = event.conversation
            case StrategyChosen():
                result["strategy"] = event.strategy
            case Rewritten():
                result["rewrite"] = event.query
            case Planned():
                result["plan"] = event.steps
            case AnswerDelta():
                parts.append(event.text)
            case AnswerReplaced():
                parts = [event.text]
            case Closest():
                result["closest"] = event.passages
            case EvidenceFound():
                result["evidence"].append(
                    {
                        "quote": event.quote,
                        "confidence": event.confidence,
                        "citation": event.citation,
                        "step": event.step,
                    }
                )
            case Citations():
                result["citations"] = event.citations
            case Attachments():
                result["attachments"] = event.attachments
            case Done():
                result.update(
                    abstain=event.abstain,
                    checks=event.checks,
                    judge=event.judge,
                    mode=event.mode,
                    decisions=event.decisions,
                    timings=event.timings,
                    message=event.message,
                )
            case Failed():
                result["error"] = {"code": event.code, "message": event.message}
    result["answer"] = "".join(parts)
    return result

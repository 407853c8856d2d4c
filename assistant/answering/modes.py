"""How an answer is made once the passages are found: the evidence first, the model only
where it adds value, on a budget (settings.ANSWER_MODE).

- `evidence`: the evidence reader's quotes (answering.reader) are the answer, with a lead
  line in the question's language and their citations; no chat model at all (the router and
  the planner use their rules, a follow-up is searched with the earlier question).
- `confirm`: the evidence answer, after the model, reading only its quotes and the question
  (within settings.ANSWER_MODEL_TOKENS: one forward pass, nothing generated), says whether
  they state the answer; below policy.CONFIRM_MIN it is declined instead. Local model only.
- `choose`: the model reads the reader's best candidates, numbered, within
  settings.ANSWER_MODEL_TOKENS, and names the one that answers, or 0 for none, by
  constrained decoding (one forward pass, only those tokens allowed: it cannot copy a value
  that no passage holds); the chosen candidate is quoted as in `evidence`. Local model only.
- `phrase`: the model writes the answer from the same few candidates in the question's
  language, within the token budget and settings.ANSWER_MODEL_SECONDS; the answer is
  verified as any written answer; past the time budget the evidence answer stands.
- `passages`: the model reads whole passages (settings.ANSWER_CONTEXT_TOKENS) and writes,
  judged and verified (answering.writing): a remote model's way.

Every mode first streams the reader's best quote as an `evidence` event, before any model
work, and records each decision on the draft's trail (answering.decisions).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from assistant.answering import answer as answers
from assistant.answering import cells, passages, policy, prompts, reader, verify, writing
from assistant.answering.decisions import Decision, Figure
from assistant.answering.events import AnswerDelta, AnswerReplaced, Event, EvidenceFound, StageEntered
from assistant.answering.session import Draft
from assistant.answering.types import Source
from assistant.answering.whole import whole
from assistant.retrieval import lexical
from assistant.retrieval.fusion import media_intent
from assistant.retrieval.scope import Scope
from common.language import Language
from ingestion.terms import names
from providers import registry
from providers.base import ChatMessage, ChatModel

log = logging.getLogger(__name__)

# The mode of "auto" with the local model: picked by the public evaluation's figures
# (bench/README.md, 2026-12-04).
LOCAL_DEFAULT = "evidence"
# What the model is asked in the modes that ask it without letting it write: constrained
# decoding over numbers, or one yes/no (the local model can be asked both).
ASKS = {"choose": "choice", "confirm": "yes_minus_no"}


def mode_for(model: ChatModel | None) -> str:
    """The answer mode of this answer: settings.ANSWER_MODE, where "auto" is LOCAL_DEFAULT
    with the local model (one that can be constrained: it reads prompts slowly on the
    portal's own cores) and `passages` with any other; `choose` and `confirm` need a model
    that can be constrained and are `passages` otherwise. `model` None: the configured chat
    model (made, not loaded)."""
    wanted = settings.ANSWER_MODE
    if wanted not in ("auto", *ASKS):
        return wanted
    chosen = model if model is not None else registry.chat_model()
    if wanted == "auto":
        return LOCAL_DEFAULT if hasattr(chosen, ASKS["choose"]) else "passages"
    return wanted if hasattr(chosen, ASKS[wanted]) else "passages"


def needs_model(mode: str) -> bool:
    return mode != "evidence"


# --- Stages a person sees ------------------------------------------------------------------


def stage(draft: Draft, name: str, **figures: int) -> StageEntered:
    """The `stage` event: what the answer does now, in the question's language."""
    with translation.override("zh-hans" if draft.language == "zh" else "en"):
        count = int(figures.get("count", 0))
        texts = {
            "search": ngettext("Searching %(count)d collection…", "Searching %(count)d collections…", count),
            "found": ngettext("Found %(count)d passage", "Found %(count)d passages", count),
            "read": _("Reading the passages…"),
            "choose": _("Checking which sentence answers…"),
            "write": _("Writing the answer…"),
            "verify": _("Checking the answer against the passages…"),
        }
        text = texts[name] % {"count": count} if "%(count)d" in texts[name] else texts[name]
    return StageEntered(stage=name, text=text, figures=dict(figures))


# --- Reading -------------------------------------------------------------------------------


def similarity(question: str, texts: Sequence[str]) -> list[float]:
    """The text embedder's cosine between the question (as a query) and each text (as a
    passage): e5 reads "query:" and "passage:" differently."""
    embedder = registry.text_embedder()
    wanted = embedder.embed_query(question)
    few = getattr(embedder, "embed_few", embedder.embed_documents)  # the local one: on one thread
    vectors = few(list(texts))
    norm = math.sqrt(sum(x * x for x in wanted)) or 1.0
    return [
        sum(a * b for a, b in zip(wanted, vector, strict=True)) / norm / (math.sqrt(sum(x * x for x in vector)) or 1.0)
        for vector in vectors
    ]


def read(draft: Draft, sources: Sequence[Source], step_query: str = "") -> reader.Reading:
    """The reader's candidates among `sources` (their sentences made whole: answering.whole),
    the decision recorded."""
    sources = [replace(source, hit=hit) for source, hit in zip(sources, whole([s.hit for s in sources]), strict=True)]
    try:
        reading = reader.read(draft.query, sources, similarity=similarity, step_query=step_query)
    except Exception:  # an embedder failure costs the similarity, not the answer
        log.warning("Reading without the embedder's similarity", exc_info=True)
        reading = reader.read(draft.query, sources, step_query=step_query)
    reading = replace(reading, unknown=tuple(unknown(draft.session.scope, step_query or draft.query, reading)))
    best = reading.best
    figures: dict[str, Figure] = {"confidence": reading.confidence, "candidates": len(reading.candidates)}
    if best is not None:
        figures |= {"score": round(best.score, 3), "source": best.source.number, **best.figures}
    figures |= {
        "absent": reading.absent,
        "unmentioned": ", ".join(reading.unmentioned),
        "unknown": ", ".join(reading.unknown),
    }
    outcome, reason = ("found", "the best sentence of the passages") if best else ("nothing", "no sentence to read")
    draft.trail.decisions.append(Decision("read", outcome, reason, figures))
    return reading


def unknown(scope: Scope, question: str, reading: reader.Reading) -> list[str]:
    """The Chinese names in the question (ingestion.terms.names: 鲁迅, 台北市) that no passage
    holds (the reading's unmentioned words) and that no document of the question's
    collections mentions either (their index terms): what it asks about is not in the
    documents at all. Latin names are anchors (answering.evidence); ordinary words are not
    checked so (a question words them otherwise than its documents: "坐标" for a table's
    latitude), nor a question about a picture (`reader.absent` lists no word of it)."""
    if not reading.unmentioned:
        return []
    named = set(names(question))
    return lexical.unknown(scope, [word for word in reading.unmentioned if word in named])


def evidence_event(
    draft: Draft, candidate: reader.Candidate, confidence: float, step: int | None = None
) -> EvidenceFound:
    """The `evidence` event of a candidate: its quote and its citation (with the quote's box
    on the page), stored with the answer."""
    quote = verify.shorten(candidate.window, passages.terms(draft.query))
    cited = answers.citations([(candidate.source, False)], draft.language, {candidate.source.number: quote})[0]
    event = EvidenceFound(quote=quote, confidence=confidence, citation=cited, step=step)
    draft.evidence.append({"quote": quote, "confidence": confidence, "citation": cited, "step": step})
    return event


# --- Answering from the evidence -------------------------------------------------------------


def evidence_text(language: Language, query: str, chosen: Sequence[reader.Candidate]) -> tuple[str, dict[int, str]]:
    """The answer made of the chosen candidates' quotes, each cited, and the quote of each
    cited passage (by number)."""
    wanted = passages.terms(query)
    quoted = [(verify.shorten(candidate.window, wanted), candidate) for candidate in chosen]
    text = prompts.evidence_lead(
        language,
        [
            (
                quote,
                candidate.source.number,
                candidate.source.hit.document_name,
                answers.place(candidate.source.hit, language),
            )
            for quote, candidate in quoted
        ],
    )
    return text, {candidate.source.number: quote for quote, candidate in quoted}


def evidence_answer(draft: Draft, chosen: Sequence[reader.Candidate], replace_text: bool = False) -> Iterator[Event]:
    """The answer made of the chosen candidates' quotes, each cited (`evidence_text`)."""
    draft.text, draft.quotes = evidence_text(draft.language, draft.query, chosen)
    if "first_token" not in draft.session.timings:
        draft.session.mark("first_token")
    yield AnswerReplaced(draft.text) if replace_text else AnswerDelta(draft.text)


def unanswered(reading: reader.Reading) -> str | None:
    """Why the passages do not answer, as a decline reason (answering.decisions.REASONS), or
    None: nothing to read, a name of the question in no document (`unknown`), a kind of
    quantity asked of passages that state none of its kind (a price, a median:
    `Reading.unmeasured`), most of the question's words mentioned nowhere in the passages
    (policy.READER_ABSENT_MAX) while no quote holds every number it names
    (`Reading.pinned`), or nothing close enough (policy.READER_ANSWER_MIN)."""
    if reading.best is None:
        return "low_evidence"
    if reading.unknown:
        return "unknown"
    if reading.unmeasured:
        return "no_measure"
    if reading.absent > policy.READER_ABSENT_MAX[reading.language] and not reading.pinned:
        return "unmentioned"
    if reading.relevance < policy.READER_ANSWER_MIN:
        return "low_evidence"
    return None


def confirmed(draft: Draft, model: ChatModel, reading: reader.Reading) -> bool:
    """Whether the model, reading only the quotes the evidence answer would show and the
    question (`confirm_messages`), says they state the answer: its first token's P(yes) -
    P(no) at least policy.CONFIRM_MIN. A model that cannot be asked so, or a question about a
    picture (`confirmable`), lets the evidence stand."""
    asked = getattr(model, "yes_minus_no", None)
    if asked is None:
        return True
    if not confirmable(draft.query):
        draft.trail.add("verify", "skipped", "a picture is found by what it shows, not by its description's words")
        return True
    score = round(float(asked(confirm_messages(draft.language, draft.query, reading.quotes()))), 3)
    draft.session.mark("confirm")
    read_tokens = int(getattr(model, "last_read", 0))
    if score < policy.CONFIRM_MIN:
        draft.trail.add("verify", "decline", "judge", final=True, p=score, read=read_tokens)
        return False
    draft.trail.add("verify", "held", "the model says the quotes state the answer", p=score, read=read_tokens)
    return True


def choose(draft: Draft, model: ChatModel, reading: reader.Reading) -> reader.Candidate | None:
    """The candidate the model names as the answer, or None when it names none (0) — by
    constrained decoding over the candidates' numbers within the token budget."""
    offered = within_budget(reading.candidates)
    options = ["0"] + [str(number) for number in range(1, len(offered) + 1)]
    lines = [f"{number}. {candidate.window}" for number, candidate in enumerate(offered, start=1)]
    question = f"{prompts.label(draft.language, 'question')}: {draft.query}"
    prompt = [
        ChatMessage("system", prompts.CHOOSE[draft.language]),
        ChatMessage("user", "\n".join([*lines, "", question])),
    ]
    probabilities = model.choice(prompt, options)  # type: ignore[attr-defined]
    draft.session.mark("choose")
    best = max(range(len(options)), key=lambda index: probabilities[index])
    none, picked = probabilities[0], max(probabilities[1:], default=0.0)
    read_tokens = int(getattr(model, "last_read", 0))
    if best == 0 and none - picked > policy.CHOICE_NONE_MARGIN:
        draft.trail.add(
            "choose",
            "decline",
            "model_none",
            final=True,
            p_none=round(none, 3),
            p_best=round(picked, 3),
            read=read_tokens,
        )
        return None
    index = 1 + max(range(len(offered)), key=lambda i: probabilities[i + 1])
    draft.trail.add(
        "choose",
        f"chose {index}",
        "the model named this candidate",
        final=True,
        p=round(probabilities[index], 3),
        p_none=round(none, 3),
        read=read_tokens,
    )
    return offered[index - 1]


def confirmable(question: str) -> bool:
    """Whether the short judge is asked about this question: not about a picture, whose
    description's few words ("Photo. Shows: ladybug.") the model reads as not answering
    (3 of the public evaluation's answerable picture questions), as `reader.absent` leaves
    them out too."""
    return not media_intent(question)


def confirm_messages(language: Language, query: str, quotes: Sequence[reader.Candidate]) -> list[ChatMessage]:
    """The short judge's prompt: the quotes the evidence answer would show (their windows,
    within settings.ANSWER_MODEL_TOKENS) and the question, then prompts.CONFIRM_ASK. Its system
    line is the same for every question, so the model reads it once per process."""
    shown = within_budget(quotes)
    lines = [f"{prompts.label(language, 'passages')}:", *(f"“{candidate.window}”" for candidate in shown)]
    question = f"{prompts.label(language, 'question')}: {query}"
    return [
        ChatMessage("system", prompts.CONFIRM[language]),
        ChatMessage("user", "\n".join([*lines, "", question, prompts.CONFIRM_ASK[language]])),
    ]


def within_budget(candidates: Sequence[reader.Candidate]) -> list[reader.Candidate]:
    """The best candidates whose quotes fit in settings.ANSWER_MODEL_TOKENS (at least one, cut)."""
    taken: list[reader.Candidate] = []
    used = 0
    seen: set[str] = set()
    for candidate in candidates:
        if candidate.window in seen:
            continue
        cost = passages.tokens(candidate.window) + 2
        if taken and used + cost > settings.ANSWER_MODEL_TOKENS:
            continue
        seen.add(candidate.window)
        taken.append(candidate)
        used += cost
    return taken


def phrase(draft: Draft, model: ChatModel, reading: reader.Reading) -> Iterator[Event]:
    """The model writes the answer from the best candidates only (their windows as the
    passages' text), within the token and time budgets; verified like any written answer.
    An answer that refuses, or that ran out of time, is replaced by the evidence answer."""
    offered = within_budget(reading.candidates)
    by_number: dict[int, list[str]] = {}
    for candidate in offered:
        by_number.setdefault(candidate.source.number, []).append(candidate.window)
    whole = draft.sources
    draft.sources = tuple(
        Source(source.number, replace(source.hit, text="\n".join(by_number[source.number])), source.step)
        for source in whole
        if source.number in by_number
    )
    prompt = answers.messages(draft.query, draft.sources, draft.language, (), draft.remembered)
    deadline = time.perf_counter() + settings.ANSWER_MODEL_SECONDS
    parts: list[str] = []
    out_of_time = False
    stream = model.stream(prompt, max_tokens=settings.ANSWER_MAX_TOKENS, temperature=0.2)
    try:
        for delta in stream:
            if not parts:
                draft.session.mark("first_token")
            parts.append(delta)
            draft.text = "".join(parts)
            yield AnswerDelta(delta)
            draft.session.check()
            if time.perf_counter() > deadline:
                out_of_time = True
                break
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()
    draft.session.mark("answer")
    if out_of_time or writing.refused(draft):
        why = "out of time" if out_of_time else "the model refused"
        draft.trail.add("phrase", "evidence", why, final=True, seconds=settings.ANSWER_MODEL_SECONDS)
        draft.sources = whole
        yield from evidence_answer(draft, reading.quotes(), replace_text=True)
        return
    draft.quotes = yield from writing.verified(draft)
    draft.trail.add(
        "phrase", "answer", "the model wrote from the chosen sentences", final=True, checks=len(draft.checks)
    )
    draft.sources = whole  # the citations show the whole passages


def cell_evidence(draft: Draft, cell: cells.Cell) -> EvidenceFound:
    """The `evidence` event of a table cell the question names: its row sentence, cited."""
    cited = answers.citations([(cell.source, False)], draft.language, {cell.source.number: cell.sentence})[0]
    draft.evidence.append({"quote": cell.sentence, "confidence": 1.0, "citation": cited, "step": None})
    return EvidenceFound(quote=cell.sentence, confidence=1.0, citation=cited)


def answer(draft: Draft, model: ChatModel | None) -> Iterator[Event]:
    """A direct question's answer in the draft's mode (not `passages`), from its reading."""
    reading = draft.reading
    assert reading is not None
    best = reading.best
    if draft.memories:
        yield from remembered_answer(draft, reading)
        if draft.trail.final() is not None:
            return
    why = unanswered(reading)
    if best is None or why is not None:
        draft.trail.add(
            "decide",
            "decline",
            why or "low_evidence",
            final=True,
            relevance=reading.relevance,
            absent=reading.absent,
            unmentioned=", ".join(reading.unmentioned),
            unknown=", ".join(reading.unknown),
            measure=reading.unmeasured,
        )
        yield from writing.decline(draft, list(reading.unknown) if why == "unknown" else [])
        return
    if draft.mode == "confirm":
        if model is None:
            yield from draft.take_turn()
            model = draft.model
        assert model is not None
        yield stage(draft, "verify")
        if not confirmed(draft, model, reading):
            yield from writing.decline(draft, [])
            return
    if draft.mode in ("evidence", "confirm"):
        draft.trail.add("decide", "answer", "the reader's quotes", final=True, quotes=len(reading.quotes()))
        yield from evidence_answer(draft, reading.quotes())
        return
    draft.trail.add(
        "decide",
        "continue",
        "evidence found; the model " + ("chooses" if draft.mode == "choose" else "phrases"),
        score=round(best.score, 3),
    )
    if model is None:
        yield from draft.take_turn()
        model = draft.model
    assert model is not None
    if draft.mode == "choose":
        yield stage(draft, "choose")
        chosen = choose(draft, model, reading)
        if chosen is None:
            yield from writing.decline(draft, [])
            return
        yield from evidence_answer(draft, [chosen])
        return
    yield stage(draft, "write")
    yield from phrase(draft, model, reading)


def remembered_answer(draft: Draft, reading: reader.Reading) -> Iterator[Event]:
    """The answer from what the user told the portal, when a remembered fact is more about
    the question than any sentence of the passages ("what form of answer do I like?"): the
    fact, quoted as remembered, with no citation. Nothing when the passages answer better."""
    texts = draft.remembered
    try:
        scores = reader.relevance(draft.query, texts, similarity)
    except Exception:  # an embedder failure: the terms alone
        log.warning("Weighing memories without the embedder's similarity", exc_info=True)
        scores = reader.relevance(draft.query, texts)
    index = max(range(len(texts)), key=lambda i: scores[i])
    if scores[index] <= reading.relevance or scores[index] < policy.READER_MEMORY_MIN:
        return
    draft.trail.add(
        "decide",
        "answer",
        "what the user told the portal",
        final=True,
        relevance=scores[index],
        passages=reading.relevance,
    )
    draft.text, draft.quotes = prompts.remembered_lead(draft.language, texts[index]), {}
    if "first_token" not in draft.session.timings:
        draft.session.mark("first_token")
    yield AnswerDelta(draft.text)


def steps_answer(draft: Draft) -> Iterator[Event]:
    """A plan's answer from its steps' evidence: one bullet per step that found some, its
    quotes cited as a direct answer's are (`Reading.quotes`: the best, and the best of
    another of the step's passages when it scores nearly as well); declined when no step
    found any."""
    lines: list[str] = []
    quotes: dict[int, str] = {}
    wanted = passages.terms(draft.query)
    between = "；" if draft.language == "zh" else "; "
    for step in draft.steps:
        reading = draft.step_readings.get(step.number)
        if reading is None or reading.best is None or unanswered(reading) is not None:
            continue
        cited: list[str] = []
        for candidate in reading.quotes():
            quote = verify.shorten(candidate.window, wanted)
            quotes[candidate.source.number] = quote
            cited.append(f"“{quote}” [{candidate.source.number}]")
        lines.append(f"- {between.join(cited)}")  # the quotes name what they answer; the step's words add nothing
    if not lines:
        draft.trail.add("decide", "decline", "low_evidence", final=True, steps=len(draft.steps))
        yield from writing.decline(draft, [])
        return
    draft.trail.add("decide", "answer", "each step's quote", final=True, steps=len(draft.steps), answered=len(lines))
    draft.text = "\n".join(lines)  # no preamble: each line leads with what its step found
    draft.quotes = quotes
    if "first_token" not in draft.session.timings:
        draft.session.mark("first_token")
    yield AnswerDelta(draft.text)

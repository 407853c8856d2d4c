"""Evaluating an index version on a collection's golden questions: the retrieval the answers
use (every channel, fused, reranked where a reranker is configured), searched in that version
alone, scored with the public evaluation's metrics (assistant.retrieval.evaluation), and on
demand the answers too (assistant.answering.evaluation).

A golden question whose expected file is no longer in the collection is stale: it is left
out and counted, not scored as a miss. A gold entry without a page (page 0) is any page of
its file."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.test.utils import override_settings

from assistant.answering import pipeline as answering
from assistant.answering.evaluation import answer_scores, answer_summary
from assistant.models import Conversation
from assistant.retrieval.evaluation import PageKey, Question, by_slice, first_rank, mean_scores, scores
from assistant.retrieval.scope import PINNED, Scope
from assistant.retrieval.search import search
from knowledge.models import Collection, Document, IndexVersion
from portal.typing import AnyUser
from providers.base import ChatModel
from quality.models import GoldenQuestion

DEPTH = 10  # hits per question: MRR's cut-off and nDCG@10's depth
# The retrieval metrics the gate compares (points: 100 × the mean).
GATED = ("hit@1", "hit@5", "mrr")
ANY_PAGE = 0

Progress = Callable[[int, int], object]


@dataclass(frozen=True)
class Questions:
    usable: list[Question]
    stale: list[str]  # keys of the questions whose expected file is gone


def questions_of(collection: Collection) -> Questions:
    """The collection's golden questions as the evaluation's Questions, the stale apart."""
    present = set(Document.objects.filter(collection=collection).values_list("name", flat=True))
    usable, stale = [], []
    for golden in GoldenQuestion.objects.filter(collection=collection).order_by("key", "pk"):
        if not golden.should_abstain and not golden.files() <= present:
            stale.append(golden.key)
            continue
        usable.append(as_question(golden))
    return Questions(usable, stale)


def as_question(golden: GoldenQuestion) -> Question:
    gold = frozenset((str(entry["file"]), int(entry.get("page") or ANY_PAGE)) for entry in golden.gold)
    keys = tuple((key,) if isinstance(key, str) else tuple(key) for key in golden.keys)
    history = tuple((str(turn["role"]), str(turn["content"])) for turn in golden.history)
    return Question(golden.key, golden.question, golden.lang, golden.kind, gold, keys=keys, history=history)


def pinned(version: IndexVersion) -> Scope:
    """Search one version, whatever is active: the caller has authorised its collection."""
    return Scope(sql=PINNED, params=([version.pk],), versions=(version,))


def as_ranked(pages: Iterable[PageKey], gold: frozenset[PageKey]) -> list[PageKey]:
    """Hits as (file, page); a hit on a file whose gold entry has no page counts as that entry."""
    any_page = {file for file, page in gold if page == ANY_PAGE}
    return [(file, ANY_PAGE) if file in any_page else (file, page) for file, page in pages]


def retrieval(
    user: AnyUser, version: IndexVersion, questions: Sequence[Question], progress: Progress | None = None
) -> dict[str, Any]:
    """Search every answerable question in `version`: the means overall, per language and per
    kind, and each question's rank of its first gold hit."""
    scope = pinned(version)
    answerable = [question for question in questions if question.answerable]
    rows, details, millis = [], [], []
    for number, question in enumerate(answerable, start=1):
        results = search(user, question.question, scope=scope, k=DEPTH)
        ranked = as_ranked(((hit.document_name, hit.page_number) for hit in results.hits), question.gold)
        rows.append(scores(ranked, question.gold, DEPTH))
        millis.append(results.timings.get("total", 0.0))
        details.append({"id": question.id, "rank": first_rank(ranked, question.gold), "top": ranked[:3]})
        if progress:
            progress(number, len(answerable))
    summary = by_slice(answerable, lambda picked: mean_scores([rows[i] for i in picked]))
    return {"summary": summary, "per_question": details, "mean_ms": sum(millis) / len(millis) if millis else 0.0}


def answers(
    user: AnyUser,
    version: IndexVersion,
    questions: Sequence[Question],
    progress: Progress | None = None,
    *,
    model: ChatModel | None = None,
) -> dict[str, Any]:
    """Ask every question through the answer pipeline, reading `version`, as `user` (with
    `model`, else the configured chat model); memory off, and the conversations made for it
    deleted afterwards (they are nobody's chat)."""
    scope = pinned(version)
    rows: list[dict[str, float | None]] = []
    seconds: list[float] = []
    details = []
    with override_settings(MEMORY_ENABLED=False):
        for number, question in enumerate(questions, start=1):
            started = time.perf_counter()
            conversation = (
                Conversation.with_history(user, version.collection, question.question, question.history)
                if question.history
                else None
            )
            session = answering.start(
                user,
                question.question,
                collection_ids=[version.collection_id],
                conversation_id=conversation.pk if conversation else None,
            )
            try:
                result = answering.collect(answering.answer_events(replace(session, scope=scope), model=model))
            finally:
                Conversation.objects.filter(pk=session.conversation.pk).delete()
            result["citations"] = [{**c, "page": _page(c, question)} for c in result["citations"]]
            row = answer_scores(question, result)
            rows.append(row)
            seconds.append(time.perf_counter() - started)
            details.append({"id": question.id, "abstain": result["abstain"], "answer": result["answer"][:500]})
            if progress:
                progress(number, len(questions))
    return {"summary": answer_summary(questions, rows, seconds), "per_question": details}


def _page(citation: dict[str, Any], question: Question) -> int:
    """A citation's page, or ANY_PAGE where the question's gold takes any page of its file."""
    return ANY_PAGE if (citation["file"], ANY_PAGE) in question.gold else int(citation["page"])


def drops(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, float]:
    """How many points each gated metric fell from the baseline to the candidate (negative:
    it rose), overall."""
    before, after = baseline["overall"], candidate["overall"]
    return {metric: round(100 * (before[metric] - after[metric]), 2) for metric in GATED}


def passes(dropped: dict[str, float], allowed: float) -> bool:
    """True when no gated metric fell by more than `allowed` points."""
    return all(value <= allowed for value in dropped.values())


def allowed_drop(collection: Collection) -> float:
    """The collection's setting "gate_points", else PORTAL_GATE_POINTS."""
    value = (collection.settings or {}).get("gate_points")
    return float(value) if isinstance(value, int | float) else float(settings.GATE_POINTS)

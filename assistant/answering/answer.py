"""The cited answer: which passages the model sees as [n], the prompt, which [n] the answer
used, whether it abstained, and the citations and attachments clients show."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.db.models import Q

from assistant.answering import passages, policy, prompts
from assistant.answering.quote_box import quote_boxes
from assistant.answering.types import Source, StepEvidence
from assistant.retrieval.types import Hit
from common.language import Language
from ingestion.sniff import MOV, MP4, SRT, VTT, WEBM
from knowledge.models import Document, Page
from providers.base import ChatMessage
from sources.links import source_of

SUBTITLES = (SRT, VTT)
VIDEOS = (MP4, WEBM, MOV)

# [1], [1, 2], [1][2], and the full-width 【1】 that Chinese models write.
CITATION = re.compile(r"[\[【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]】]")


def sources_of(hits: Sequence[Hit]) -> tuple[Source, ...]:
    """The best hits as [1], [2]...; search() returns each chunk once (fusion is by chunk id)."""
    return tuple(Source(number, hit) for number, hit in enumerate(hits[: settings.ANSWER_SOURCES], start=1))


def sources_of_steps(evidence: Sequence[StepEvidence]) -> tuple[Source, ...]:
    """The best few of every step, each step heard whatever its scores: taken round-robin by
    rank (every step's first hit, then every second one...), so a passage belongs to the step
    that ranks it highest; then numbered in step order."""
    per_step = max(2, settings.ANSWER_SOURCES // max(len(evidence), 1))
    taken: dict[int, list[Hit]] = {step.number: [] for step in evidence}
    seen: set[int] = set()
    for rank in range(max((len(step.hits) for step in evidence), default=0)):
        for step in evidence:
            if rank < len(step.hits) and len(taken[step.number]) < per_step:
                hit = step.hits[rank]
                if hit.chunk_id not in seen:
                    seen.add(hit.chunk_id)
                    taken[step.number].append(hit)
    ordered = [(number, hit) for number, hits in taken.items() for hit in hits]
    return tuple(Source(index, hit, number) for index, (number, hit) in enumerate(ordered, start=1))


def place(hit: Hit, language: Language) -> str:
    """Where a passage is, as a person would say it: page 3, slide 2, 01:05 in a video."""
    location = hit.location
    if hit.page_kind == "video_segment" or location.get("t_start") is not None:
        stamp = timestamp(float(location.get("t_start") or 0))  # type: ignore[arg-type]
        return f"{stamp}" if language == "en" else f"{stamp} 处"
    if hit.page_kind == "slide":
        return f"slide {hit.page_number}" if language == "en" else f"第 {hit.page_number} 张幻灯片"
    if hit.page_kind == "pdf_page":
        return f"page {hit.page_number}" if language == "en" else f"第 {hit.page_number} 页"
    headings = " > ".join(str(part) for part in location.get("heading_path") or [])  # type: ignore[attr-defined]
    if headings:
        return headings
    return f"part {hit.page_number}" if language == "en" else f"第 {hit.page_number} 部分"


def timestamp(seconds: float) -> str:
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def messages(
    question: str,
    sources: Sequence[Source],
    language: Language,
    steps: Sequence[StepEvidence] = (),
    memories: Sequence[str] = (),
    closing: str | None = None,
) -> list[ChatMessage]:
    """The answer prompt: what the portal remembers about the user, the passages as [n]
    (grouped by step in multi-step answers), then the question, then the reminder (or
    `closing`: the judge's question, on the same prompt up to there)."""
    budget = max(settings.ANSWER_CONTEXT_TOKENS // max(len(sources), 1), MIN_PASSAGE_TOKENS)
    wanted = passages.terms(question)
    lines = []
    if memories:
        lines.append(f"{prompts.label(language, 'memories')}:")
        lines.extend(f"- {' '.join(text.split())[:MEMORY_CHARS]}" for text in memories)
        lines.append("")
    lines.append(f"{prompts.label(language, 'passages')}:")
    for step in steps:
        lines.append(f"\n## {prompts.label(language, 'step')} {step.number}: {step.query}")
        here = passages.terms(question, step.query)
        lines.extend(_passage(source, language, budget, here) for source in sources if source.step == step.number)
    if not steps:
        lines.extend(_passage(source, language, budget, wanted) for source in sources)
    if not sources:
        lines.append(prompts.NO_PASSAGES[language])
    lines.append(f"\n{prompts.label(language, 'question')}: {question}")
    lines.append(closing or (prompts.REMINDER[language] if sources else prompts.MEMORY_REMINDER[language]))
    system = prompts.SUMMARIZE[language] if steps else prompts.ANSWER[language]
    if memories:
        system += "\n" + prompts.MEMORY_RULE[language]
    return [ChatMessage("system", system), ChatMessage("user", "\n".join(lines))]


def _passage(source: Source, language: Language, budget: int, wanted: passages.Terms) -> str:
    """Passage [n]: where it is, then its parts about the question within `budget` tokens."""
    hit = source.hit
    text = passages.focus(hit.text, wanted, budget)
    name = f"《{hit.document_name}》" if language == "zh" else f'"{hit.document_name}"'
    return f"[{source.number}] {name} {place(hit, language)}: {text}"


def cited(text: str, count: int) -> tuple[int, ...]:
    """The passage numbers `text` cites, in order of first use; numbers with no passage are ignored."""
    used: list[int] = []
    for match in CITATION.finditer(text):
        for part in re.split(r"[,，、]", match.group(1)):
            number = int(part)
            if 1 <= number <= count and number not in used:
                used.append(number)
    return tuple(used)


# Clause ends; a citation right after the punctuation stays with its clause ("五年。[3]").
CLAUSE_END = re.compile(r"(?<=[，。；！？,;!?\n])(?!\s*[\[【])")
MEMORY_CHARS = 300  # of one memory in the prompt
MIN_PASSAGE_TOKENS = 60
PASSAGE_CHARS = 4000  # of a cited passage kept with the citation, for its dialog


def attributed(text: str, sources: Sequence[Source], cited_numbers: Sequence[int]) -> tuple[int, ...]:
    """Passages the answer used without citing them. Small models cite one sentence of two,
    or put one [n] after two facts: a clause whose character pairs mostly come from one
    passage, and not from any passage the clause itself cites, is attributed to it."""
    inferred: list[int] = []
    passages = {source.number: _pairs(source.hit.text) for source in sources}
    for clause in CLAUSE_END.split(text):
        pairs = _pairs(CITATION.sub("", clause))
        if len(pairs) < 4 or not passages:
            continue
        shares = {number: len(pairs & found) / len(pairs) for number, found in passages.items()}
        if any(shares.get(number, 0.0) >= policy.INFERRED_MIN_SHARE for number in cited(clause, len(sources))):
            continue  # the clause's own citation holds it up
        best = max(shares, key=lambda number: shares[number])
        if shares[best] >= policy.INFERRED_MIN_SHARE and best not in cited_numbers and best not in inferred:
            inferred.append(best)
    return tuple(inferred)


def _pairs(text: str) -> set[str]:
    letters = re.sub(r"[\W_]+", "", text.lower())
    return {letters[i : i + 2] for i in range(len(letters) - 1)}


def abstains(text: str, used: Sequence[int]) -> bool:
    """An answer abstains when it cites nothing and says the documents do not hold the answer
    (or says nothing at all)."""
    if used:
        return False
    lowered = text.lower()
    markers = prompts.ABSTAIN_MARKERS["zh"] + prompts.ABSTAIN_MARKERS["en"]
    return not text.strip() or any(marker in lowered for marker in markers)


def citations(
    cited: Sequence[tuple[Source, bool]], language: Language, quotes: dict[int, str] | None = None
) -> list[dict[str, Any]]:
    """What a client shows for each [n], from (source, inferred) pairs and the span of each
    passage the answer rests on (`quotes`, by number: see answering.verify) and where that span
    is on its page (answering.quote_box); the pages' sizes are read in one query, the videos
    beside cited subtitles in another."""
    spans = [(quotes or {}).get(source.number, "") for source, _inferred in cited]
    pages = {source.hit.page_id for source, _inferred in cited}
    sizes = {
        pk: (width, height)
        for pk, width, height in Page.objects.filter(pk__in=pages).values_list("pk", "width", "height")
    }
    videos = sibling_videos(source.hit for source, _inferred in cited)
    origins = source_of(source.hit.document_id for source, _inferred in cited)
    boxes = quote_boxes((source.hit, span) for (source, _inferred), span in zip(cited, spans, strict=True))
    return [
        citation(
            source,
            language,
            inferred=inferred,
            size=sizes.get(source.hit.page_id),
            video=videos.get(source.hit.document_id),
            quote=span,
            quote_bbox=box,
            origin=origins.get(source.hit.document_id),
        )
        for (source, inferred), span, box in zip(cited, spans, boxes, strict=True)
    ]


def citation(
    source: Source,
    language: Language,
    *,
    inferred: bool = False,
    size: tuple[Any, Any] | None = None,
    video: int | None = None,
    quote: str = "",
    quote_bbox: list[float] | None = None,
    origin: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a client shows for [n]; `inferred` when the answer used the passage without writing [n];
    `quote`: the span of the passage the answer rests on, which the citation dialog highlights
    in `text` (the passage itself), and `quote_bbox`: that span's box on the page (the union
    of its lines, in the units of `location.bbox`), or None where it could not be placed.
    The page's size (points for PDF pages and slides, pixels for pictures: the units of
    `location.bbox`) lets a client scale the bbox onto the page's render. A timed passage
    (a video's minute, a subtitle cue) has a `video_url` at its moment: the video beside a
    subtitle file when there is one (`video`, from `sibling_videos`), else its own file.
    `origin`: where a source brought the file from (its name, the file's path there and a link
    back, sources.links), None for an uploaded file."""
    hit = source.hit
    width, height = size or (None, None)
    return {
        "inferred": inferred,
        "n": source.number,
        "chunk_id": hit.chunk_id,
        "document_id": hit.document_id,
        "collection_id": hit.collection_id,
        "file": hit.document_name,
        "path": hit.rel_path,
        "page": hit.page_number,
        "page_id": hit.page_id,
        "page_kind": hit.page_kind,
        "place": place(hit, language),
        "location": hit.location,
        "page_width": width,
        "page_height": height,
        "score": round(hit.score, 6),
        "step": source.step,
        "snippet": " ".join(hit.text.split())[:240],
        "text": " ".join(hit.text.split())[:PASSAGE_CHARS],
        "quote": quote,
        "quote_bbox": quote_bbox,
        "thumbnail_url": f"/api/pages/{hit.page_id}/render/",
        "video_url": _moment_url(hit, video) if _timed(hit) else None,
        "origin": origin,
    }


def closest(sources: Sequence[Source], language: Language, count: int) -> list[dict[str, Any]]:
    """The first `count` places among the passages (one per page, slide or moment, its best
    passage), as a declined answer lists them: each a link to its page with the chunk marked
    (`/documents/<id>/pages/<n>/?chunk=<id>`, as the chat's citations open it). They are the
    answer's own passages, so only ever what the user may read."""
    listed: dict[tuple[int, str], dict[str, Any]] = {}
    for source in sources:
        hit = source.hit
        where = (hit.document_id, place(hit, language))
        if where in listed:
            continue
        if len(listed) == count:
            break
        listed[where] = {
            "document_id": hit.document_id,
            "collection_id": hit.collection_id,
            "file": hit.document_name,
            "page": hit.page_number,
            "page_id": hit.page_id,
            "place": where[1],
            "chunk_id": hit.chunk_id,
            "snippet": " ".join(hit.text.split())[:240],
            "url": f"/documents/{hit.document_id}/pages/{hit.page_number}/?chunk={hit.chunk_id}",
        }
    return list(listed.values())


def attachments(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    """The attachments of these hits, the videos beside subtitles read in one query."""
    videos = sibling_videos(hits)
    return [attachment(hit, video=videos.get(hit.document_id)) for hit in hits]


def attachment(hit: Hit, *, video: int | None = None) -> dict[str, Any]:
    """An image or video that answers the question: a link to the picture, or to the video at
    its moment (the video beside a subtitle file when there is one: `video`)."""
    location = hit.location
    timed = _timed(hit)
    if timed:
        url = _moment_url(hit, video)
    elif location.get("image"):
        url = f"/api/pages/{hit.page_id}/images/{location['image']}/"
    else:
        url = f"/api/pages/{hit.page_id}/render/"
    return {
        "kind": "video" if timed else "image",
        "file": hit.document_name,
        "path": hit.rel_path,
        "page": hit.page_number,
        "page_id": hit.page_id,
        "chunk_id": hit.chunk_id,
        "url": url,
        "thumbnail_url": f"/api/pages/{hit.page_id}/render/",
        "t_start": location.get("t_start"),
        "score": round(hit.score, 6),
    }


def _timed(hit: Hit) -> bool:
    return hit.page_kind == "video_segment" or hit.location.get("t_start") is not None


def _moment_url(hit: Hit, video: int | None) -> str:
    t_start = float(hit.location.get("t_start") or 0)  # type: ignore[arg-type]
    return f"/api/documents/{video or hit.document_id}/original/#t={t_start:g}"


def sibling_videos(hits: Iterable[Hit]) -> dict[int, int]:
    """The video beside each subtitle document among the timed hits (talk.srt and talk.mp4 in
    one folder of one collection), by the subtitle document's id, in one query. The video is
    what a person wants to see at a cue's moment; the subtitle file is only its words. It is
    in the same collection, so whoever may read the subtitles may watch it."""
    timed = {hit.document_id: hit for hit in hits if _timed(hit)}
    if not timed:
        return {}
    stems = {(hit.collection_id, _stem(hit.rel_path)) for hit in timed.values()}
    beside = Q()
    for collection_id, stem in stems:
        beside |= Q(collection_id=collection_id, rel_path__startswith=f"{stem}.")
    rows = Document.objects.filter(
        Q(pk__in=timed, mime__in=SUBTITLES)
        | (beside & Q(mime__in=VIDEOS) & ~Q(status=Document.Status.FAILED))  # a failed video may not play
    ).order_by("rel_path")
    subtitles: set[int] = set()
    videos: dict[tuple[int, str], int] = {}
    for pk, collection_id, rel_path, mime in rows.values_list("pk", "collection_id", "rel_path", "mime"):
        if mime in SUBTITLES:
            subtitles.add(pk)
        else:  # "talk.part2.mp4" also starts with "talk.": only the same stem is its video
            videos.setdefault((collection_id, _stem(rel_path)), pk)
    found = {pk: videos.get((hit.collection_id, _stem(hit.rel_path))) for pk, hit in timed.items() if pk in subtitles}
    return {pk: video for pk, video in found.items() if video is not None}


def _stem(rel_path: str) -> str:
    return str(PurePosixPath(rel_path).with_suffix(""))

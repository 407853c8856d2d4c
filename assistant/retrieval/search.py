"""One search: the channels (each restricted in its SQL to what the user may see), Reciprocal
Rank Fusion, a bounded rerank, source weights, and the media intent.

    search(user, "差旅住宿标准", collection_ids=[3], k=10) -> SearchResults
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db.models import Q
from pgvector.django import CosineDistance

from assistant.retrieval.dense import search_dense, search_image
from assistant.retrieval.fusion import media_intent, rrf, source_weight, weighted
from assistant.retrieval.lexical import search_lexical
from assistant.retrieval.pictures import PictureRanking, search_pictures
from assistant.retrieval.scope import Scope, scope_for
from assistant.retrieval.types import CHANNELS, Channel, Hit, SearchResults, Stage
from knowledge.models import Chunk
from portal.typing import AnyUser
from providers import registry
from providers.base import ProviderError

log = logging.getLogger(__name__)


def search(
    user: AnyUser,
    query: str,
    *,
    collection_ids: Sequence[int] | None = None,
    k: int = 10,
    channels: Sequence[Channel] = CHANNELS,
    rerank: bool = True,
    media: bool | None = None,
    scope: Scope | None = None,
    beyond: int = 0,
) -> SearchResults:
    """The k best chunks for `query` among the collections `user` may see (and `collection_ids`
    names). `media` forces the media intent on or off; None reads it from the query. `scope`
    replaces the user's (scope_of: collections the caller authorised already). `beyond`: the
    next that many, ranked the same way, in `later` (they change nothing of the first k)."""
    query = " ".join(query.split())[: settings.MAX_QUERY_CHARS]
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    scope = scope or scope_for(user, collection_ids)
    wants_media = media_intent(query) if media is None else media
    ranked, pictures = _channels(scope, query, channels, max(k, settings.RETRIEVAL_DEPTH), timings, wants_media)
    fused = rrf({name: [pk for pk, _score in rows] for name, rows in ranked.items()}, settings.RETRIEVAL_WEIGHTS)
    order = sorted(fused, key=lambda pk: (-fused[pk], pk))[: max(k, settings.RERANK_CANDIDATES)]
    promoted = _promoted(pictures)
    order += [pk for pk in promoted if pk not in order]
    chunks = _load(order, scope)
    order = [pk for pk in order if pk in chunks]
    rules = {pk: _rules(chunk) for pk, chunk in chunks.items()}
    weights = {pk: source_weight(chunks[pk].document.rel_path, rules[pk]) for pk in order}
    stage = time.perf_counter()
    reranked, model_id = _rerank(query, order, chunks, ranked) if rerank else ({}, "")
    timings["rerank"] = (time.perf_counter() - stage) * 1000
    final_order, finals = _final(order, fused, reranked, weights)
    promoted = [pk for pk in promoted if pk in chunks]
    final_order = promoted + [pk for pk in final_order if pk not in promoted]
    stages = _stages(ranked)
    hits, later = (
        tuple(
            _hit(chunks[pk], stages.get(pk, {}), fused[pk], reranked.get(pk), weights[pk], finals[pk], pk in promoted)
            for pk in part
        )
        for part in (final_order[:k], final_order[k : k + beyond])
    )
    top_fused = max((hit.fused for hit in hits), default=0.0)
    # Pictures that their match put first are what the question asks to see: only they are
    # attached then, not every photo that the fusion ranked near them.
    attachments = tuple(hit for hit in hits if hit.promoted) or tuple(
        hit for hit in hits if wants_media and hit.is_media and hit.fused >= settings.MEDIA_MIN_SCORE * top_fused
    )
    timings["total"] = (time.perf_counter() - clock) * 1000
    return SearchResults(query, hits, attachments, wants_media, model_id, timings, later)


def _channels(
    scope: Scope, query: str, channels: Sequence[Channel], depth: int, timings: dict[str, float], media: bool
) -> tuple[dict[str, list[tuple[int, float]]], PictureRanking]:
    """Each channel's ranking; with the media intent, the pictures ranked among themselves
    too (retrieval.pictures), so that the best of them meet the text pages in the fusion,
    and their match, which may put them first (_promoted)."""
    ranked: dict[str, list[tuple[int, float]]] = {}
    pictures = PictureRanking()
    if not query:
        return ranked, pictures
    # The query embedding (CPU work in the model's C code, outside Python's lock) runs while
    # PostgreSQL computes the lexical channel: the two overlap instead of adding up.
    embedding = _EMBEDDERS.submit(_embed_query, query) if "dense" in channels else None
    if "lexical" in channels:
        started = time.perf_counter()
        ranked["lexical"] = search_lexical(scope, query, depth)
        timings["lexical"] = (time.perf_counter() - started) * 1000
    model_id, vector = "", None  # the query's embedding, which the picture channel reuses
    if embedding is not None:
        model_id, vector, embed_ms = embedding.result()
        timings["embed_query"] = embed_ms
        started = time.perf_counter()
        ranked["dense"] = search_dense(scope, vector, model_id, depth)
        timings["dense"] = embed_ms + (time.perf_counter() - started) * 1000  # the channel's own cost
    if media and "lexical" in channels:
        started = time.perf_counter()
        pictures = search_pictures(scope, query, vector, model_id, depth)
        ranked["pictures"] = pictures.ranked
        timings["pictures"] = (time.perf_counter() - started) * 1000
    if "image" in channels and registry.available("image_embedding"):
        started = time.perf_counter()
        embedder = registry.image_embedder()
        ranked["image"] = search_image(scope, embedder.embed_text(query), embedder.model_id, depth)
        timings["image"] = (time.perf_counter() - started) * 1000
    return ranked, pictures


def _promoted(pictures: PictureRanking) -> list[int]:
    """The pictures whose match says they are what the question asks to see, best first: they
    lead the results, whatever the text pages scored (retrieval.pictures)."""
    sure = [pk for pk, _score in pictures.ranked if pictures.match.get(pk, 0.0) >= settings.PICTURE_MATCH]
    return sorted(sure, key=lambda pk: -pictures.match[pk])[: settings.PICTURES_PROMOTED]


_EMBEDDERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embedding")


def _embed_query(query: str) -> tuple[str, list[float], float]:
    """The text embedder's id, the query's vector, and the milliseconds it took."""
    started = time.perf_counter()
    embedder = registry.text_embedder()
    vector = embedder.embed_query(query)
    return embedder.model_id, vector, (time.perf_counter() - started) * 1000


def _load(ids: list[int], scope: Scope) -> dict[int, Chunk]:
    versions = [version.pk for version in scope.versions]
    # Hits show none of the vectors or term counts: reading and parsing them cost ~2 of 8 ms.
    rows = (
        Chunk.objects.filter(pk__in=ids, index_version_id__in=versions)
        .select_related("document__collection", "page")
        .defer("embedding", "image_embedding", "terms")
    )
    return {chunk.pk: chunk for chunk in rows}


def _rules(chunk: Chunk) -> list[dict[str, object]]:
    rules = (chunk.document.collection.settings or {}).get("weights", [])
    return rules if isinstance(rules, list) else []


def _rerank(
    query: str, order: list[int], chunks: dict[int, Chunk], ranked: dict[str, list[tuple[int, float]]]
) -> tuple[dict[int, float], str]:
    """Rerank scores for the first RERANK_CANDIDATES candidates that text channels found;
    image-only hits have no text relevance to judge and keep their fused place."""
    if not registry.available("rerank"):
        return {}, ""
    by_text = {pk for name in ("lexical", "dense") for pk, _score in ranked.get(name, [])}
    candidates = [pk for pk in order[: settings.RERANK_CANDIDATES] if pk in by_text]
    if not candidates:
        return {}, ""
    model = registry.reranker()
    try:
        scores = model.score(query, [chunks[pk].text for pk in candidates])
    except ProviderError as exc:  # the fused order stands; the answer still comes
        log.warning("rerank by %s failed, keeping the fused order: %s", model.model_id, exc)
        return {}, ""
    return dict(zip(candidates, scores, strict=True)), model.model_id


def _final(
    order: list[int], fused: dict[int, float], reranked: dict[int, float], weights: dict[int, float]
) -> tuple[list[int], dict[int, float]]:
    """Reranked hits are ordered by their weighted rerank score in the slots they held; the
    others (image-only hits, candidates past the cap) keep their fused places."""
    if not reranked:
        finals = weighted({pk: fused[pk] for pk in order}, weights)
        return sorted(order, key=lambda pk: (-finals[pk], pk)), finals
    finals = weighted(reranked, weights)
    slots = [n for n, pk in enumerate(order) if pk in reranked]
    best = sorted(reranked, key=lambda pk: (-finals[pk], pk))
    result = list(order)
    for slot, pk in zip(slots, best, strict=True):
        result[slot] = pk
    others = weighted({pk: fused[pk] for pk in order if pk not in reranked}, weights)
    return result, {**others, **finals}


def _stages(ranked: dict[str, list[tuple[int, float]]]) -> dict[int, dict[str, Stage]]:
    """Each chunk's score and rank in every channel that found it."""
    stages: dict[int, dict[str, Stage]] = {}
    for name, rows in ranked.items():
        for rank, (pk, score) in enumerate(rows, start=1):
            stages.setdefault(pk, {})[name] = Stage(score=score, rank=rank)
    return stages


def on_pages(scope: Scope, page_ids: Sequence[int], exclude: Sequence[int] = ()) -> list[Hit]:
    """The searchable chunks of these pages in the scope's versions, other than `exclude`, in
    the order of `page_ids`, each page's tables first: what a passage's page says besides it
    (a table's rows under its page's prose). Not ranked: no channel found them."""
    if not page_ids or not scope.versions:
        return []
    chunks = (
        Chunk.objects.filter(
            page_id__in=list(page_ids),
            searchable=True,
            index_version_id__in=[version.pk for version in scope.versions],
        )
        .exclude(pk__in=list(exclude))
        .select_related("document", "page")
        .order_by("page_id", "ordinal")
    )
    place = {page: n for n, page in enumerate(dict.fromkeys(page_ids))}
    # Stable: a page's tables first, then the rest in the page's order.
    ordered = sorted(chunks, key=lambda chunk: (place[chunk.page_id], chunk.kind != Chunk.Kind.TABLE))
    return [_hit(chunk, {}, 0.0, None, chunk.weight, 0.0) for chunk in ordered]


def closest_holding(scope: Scope, query: str, held: Q, k: int = 1) -> list[Hit]:
    """The searchable chunks of the scope's versions that `held` (a filter on their text)
    selects, the closest in meaning to `query` first (the text embedder's cosine, over those
    chunks alone), at most k: the chunks that hold what a question names, whatever the
    channels made of its other words. Not ranked: no channel found them."""
    if not scope.versions:
        return []
    model_id, vector, _ms = _embed_query(" ".join(query.split())[: settings.MAX_QUERY_CHARS])
    versions = [version.pk for version in scope.versions if version.embedder_id == model_id]
    chunks = (
        Chunk.objects.filter(held, searchable=True, index_version_id__in=versions, embedding__isnull=False)
        .select_related("document", "page")
        .defer("embedding", "image_embedding", "terms")
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance", "pk")[:k]
    )
    return [_hit(chunk, {}, 0.0, None, chunk.weight, 0.0) for chunk in chunks]


def _hit(
    chunk: Chunk,
    stages: dict[str, Stage],
    fused: float,
    rerank_score: float | None,
    weight: float,
    final: float,
    promoted: bool = False,
) -> Hit:
    document, page = chunk.document, chunk.page
    return Hit(
        chunk_id=chunk.pk,
        collection_id=document.collection_id,
        document_id=document.pk,
        document_name=document.name,
        rel_path=document.rel_path,
        page_id=page.pk,
        page_number=page.number,
        page_kind=page.kind,
        kind=chunk.kind,
        text=chunk.text,
        location=dict(chunk.location),
        channels=stages,
        fused=fused,
        rerank=rerank_score,
        weight=weight,
        score=final,
        promoted=promoted,
    )

"""What retrieval returns: frozen dataclasses that carry every stage's score and rank, so the
UI, the API and the evaluation can show why a result is there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Channel = Literal["lexical", "dense", "image"]
CHANNELS: tuple[Channel, ...] = ("lexical", "dense", "image")


@dataclass(frozen=True)
class Stage:
    """One channel's opinion of a chunk: its raw score and 1-based rank there."""

    score: float
    rank: int


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    collection_id: int
    document_id: int
    document_name: str  # as uploaded, for citations
    rel_path: str
    page_id: int
    page_number: int
    page_kind: str
    kind: str  # chunk kind: text, table, image, frame, notes, transcript, summary
    text: str
    location: dict[str, object]  # page, bbox, heading_path, image, t_start, t_end
    channels: dict[str, Stage] = field(default_factory=dict)  # lexical / dense / image
    fused: float = 0.0  # Reciprocal Rank Fusion
    rerank: float | None = None  # None when not reranked (no reranker, or image-only)
    weight: float = 1.0  # the source weight of its path
    score: float = 0.0  # the final score the results are ordered by
    promoted: bool = False  # a picture put first by its match (retrieval.pictures)

    @property
    def is_media(self) -> bool:
        return self.kind in ("image", "picture", "frame") or self.page_kind in ("image", "video_segment")


@dataclass(frozen=True)
class SearchResults:
    query: str
    hits: tuple[Hit, ...]
    attachments: tuple[Hit, ...]  # image and video hits that the media intent lets through
    media_intent: bool
    reranker: str  # model id, or "" when none ran
    timings: dict[str, float]  # milliseconds per stage
    later: tuple[Hit, ...] = ()  # the hits after the k best, when asked for (search's `beyond`)

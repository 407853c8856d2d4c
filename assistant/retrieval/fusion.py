"""Combining channels and adjusting by source: Reciprocal Rank Fusion, source weights by
path, and the media intent that decides whether pictures and videos are attached."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

RRF_K = 60
# Asking to see something, or what a thing looks like: a picture, a scan, a video, a colour.
MEDIA_WORDS = re.compile(
    r"图片|图像|照片|相片|海报|截图|示意图|插图|配图|扫描|长什么样|什么样子|什么颜色|啥颜色|视频|录像|录屏|影片|画面"
    r"|[一那这]张[^，。？！,.?!]{0,24}图"
    r"|\b(?:photo(?:graph)?s?|pictures?|images?|posters?|screenshots?|diagrams?|portraits?|scanned|scans? of"
    r"|snapshots?|videos?|recordings?|clips?|footage|look(?:s)? like|show me|what colou?rs? (?:is|are|was|were))\b",
    re.IGNORECASE,
)


def rrf(
    rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float] | None = None, k: int = RRF_K
) -> dict[int, float]:
    """Σ over channels of weight / (k + rank), rank 1-based, by chunk id."""
    fused: dict[int, float] = {}
    for channel, ids in rankings.items():
        weight = (weights or {}).get(channel, 1.0)
        for rank, chunk_id in enumerate(ids, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (k + rank)
    return fused


def source_weight(rel_path: str, rules: Sequence[Mapping[str, object]]) -> float:
    """The weight of the first rule whose pattern matches the document's path, else 1.0.
    A pattern ending in "/" is a prefix; otherwise a glob where "**" crosses folders."""
    for rule in rules:
        pattern, weight = str(rule.get("pattern", "")), rule.get("weight", 1.0)
        if not pattern or not isinstance(weight, int | float):
            continue
        if pattern.endswith("/") and rel_path.startswith(pattern):
            return float(weight)
        if fnmatchcase(rel_path, pattern) or (pattern.endswith("/**") and rel_path.startswith(pattern[:-2])):
            return float(weight)
    return 1.0


def weighted(scores: Mapping[int, float], weights: Mapping[int, float]) -> dict[int, float]:
    """final = s · (1 + w), where s is the score rescaled to (0, 1] over the candidates
    (min-max, plus a floor so the lowest candidate keeps a little) and w the source weight
    (0 … 1, default 1). A 0.3 source needs a relevance 1.53× that of a 1.0 source to outrank
    it, so it stays findable when nothing better matches (seed 002's rerank × (1 + weight),
    made safe for rerankers whose scores can be negative)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {
        pk: ((score - low) / span * 0.9 + 0.1 if span else 1.0) * (1 + weights.get(pk, 1.0))
        for pk, score in scores.items()
    }


def media_intent(query: str) -> bool:
    """Whether the question asks to see something: a picture, a poster, a video."""
    return bool(MEDIA_WORDS.search(query))

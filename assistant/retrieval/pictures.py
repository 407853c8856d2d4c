"""The picture channel: when a question asks to see something (fusion.media_intent), the
pictures, their descriptions and video frames are ranked among themselves, and that ranking
joins the fusion as a channel of its own. A photo described in twenty words would otherwise
compete with every page of a 300-page manual for "the photo of the ladybug", and lose.

Both text channels, over media chunks only: terms weighted by how rare they are among the
scope's pictures ("photo" is in every description and counts for almost nothing there,
"ladybug" in one), and the dense channel restricted to the same chunks; the two lists are
fused by reciprocal rank like the main channels.

Rank fusion alone still buries a picture: its best is one channel's first place, 1/61, while
a page that both text channels find at rank 20 scores 2/80. So each picture also gets a
calibrated score, its **match**: the share of the question's weight that its words hold,
each of the question's terms weighted by its idf among the pictures, a term no picture has
by a quarter of the others' mean (ABSENT_WEIGHT). The words that only ask to see something
("show me", "photo", 照片) or that any question carries (多少, 里) are left out of that
weight, and a picture that holds only colour words has no match. A picture whose match
reaches PORTAL_PICTURE_MATCH is what the question asks for: search puts it first, ahead of
the text (search._promoted).

An everyday word of the question also finds the label or family a description uses for it
(picture_words.tsv: "kitten" finds "cat", "woman" "person", 鸭子 公鸭)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from django.db import connection

from assistant.retrieval.dense import search_statement, statement
from assistant.retrieval.fusion import rrf
from assistant.retrieval.lexical import query_terms
from assistant.retrieval.scope import Scope
from common.text import is_cjk
from ingestion.pictures import COLOURS

MEDIA_KINDS = ("image", "picture", "frame")
MEDIA_ONLY = " AND c.kind IN ('image', 'picture', 'frame')"

# Terms (as ingestion.terms cuts them) that ask to see a picture, or that any request or
# question carries, rather than say what the picture shows: they count for nothing in a
# picture's match.
REQUEST_TERMS = frozenset(
    (  # noqa: SIM905 (readable lines, not a hundred quoted words)
        "show find see look looks like give want need have has any some there please get display "
        "photo photos photograph photographs picture pictures image images pic pics screenshot screenshots "
        "poster posters portrait portraits scan scanned scans diagram diagrams video videos clip clips "
        "找 找找 一张 张 一幅 幅 有没有 没有 有 给 看 看看 看下 一下 显示 查找 搜索 那张 这张 "
        "照片 相片 图片 图像 图 截图 海报 扫描 示意图 视频 录像 画面 样子 长什么样 什么样 "
        # and the words of any question, which OCR text in screenshots also holds
        "多少 几 哪 哪个 哪里 什么 上 下 里 中 内 是 为 写 填 用 说 叫 其中 一个 一只 一些"
    ).split()
)

# The colour words of the descriptions (ingestion.pictures), as the terms of a question name them.
COLOUR_TERMS = frozenset(
    [
        *COLOURS,
        *COLOURS.values(),
        *(name[0] for name in COLOURS.values()),
        *("gray", "colour", "color", "colours", "colors", "dark", "light", "颜色", "深色", "浅色"),
    ]
)

# How many of the scope's media chunks hold each query term, how many there are, and the
# media chunks that hold any of the terms with the terms they hold, best first by the idf they
# hold. Media chunks are few (a picture has one or two), so they are read by version and tested
# one by one.
LEXICAL = """
WITH allowed AS MATERIALIZED ({scope}),
media AS MATERIALIZED (
    SELECT c.id, c.terms FROM knowledge_chunk c
    WHERE c.index_version_id IN (SELECT active_version_id FROM allowed)
      AND c.searchable AND c.kind IN ('image', 'picture', 'frame')
),
total AS (SELECT count(*) AS n FROM media),
df AS MATERIALIZED (
    SELECT w.term, count(m.id) AS n, ln(1 + (total.n - count(m.id) + 0.5) / (count(m.id) + 0.5)) AS idf
    FROM unnest(%s::text[]) AS w(term)
    CROSS JOIN total
    LEFT JOIN media m ON m.terms ? w.term
    GROUP BY w.term, total.n
)
SELECT m.id, array_agg(df.term) AS held, (SELECT json_object_agg(term, n) FROM df) AS counts,
    (SELECT n FROM total) AS total
FROM media m JOIN df ON m.terms ? df.term
GROUP BY m.id
ORDER BY sum(df.idf) DESC, m.id
LIMIT %s
"""
# In a picture's match, a term of the question that no picture holds weighs this share of the
# mean weight of the terms that some picture holds: descriptions say what a tagger can see
# ("ladybug", "green"), questions also what it cannot ("sitting on a stem"); a full weight
# would sink every true match, none would let "a ladybug on a tree trunk" match the ladybug on
# a stem fully. Calibrated by bench/picture_match.py.
ABSENT_WEIGHT = 0.25
WORDS_FILE = Path(__file__).resolve().parent / "picture_words.tsv"


@dataclass(frozen=True)
class PictureRanking:
    """The scope's media chunks for one question, best first: (chunk id, fused score), and each
    one's match (0 … 1; see the module's docstring)."""

    ranked: list[tuple[int, float]] = field(default_factory=list)
    match: dict[int, float] = field(default_factory=dict)


def search_pictures(scope: Scope, query: str, vector: Sequence[float] | None, model_id: str, k: int) -> PictureRanking:
    """The scope's media chunks for `query`, at most k, with their match."""
    wanted = query_terms(query)
    lists: dict[str, list[int]] = {}
    match: dict[int, float] = {}
    if wanted and scope.versions:
        rows, counts, total = held_terms(scope, with_forms(wanted), k)
        lists["lexical"] = [pk for pk, _held in rows]
        weighed = weights(wanted, counts, total)
        match = {pk: coverage(held, weighed) for pk, held in rows}
    if vector is not None:
        versions = [v for v in scope.versions if v.embedder_id == model_id and v.dims == len(vector)]
        if versions:
            dense = statement(scope, versions, "c.embedding", lambda v: v.dims, MEDIA_ONLY, vector, k)
            lists["dense"] = [pk for pk, _score in search_statement(dense, k)]
    fused = rrf(lists, {"lexical": 1.0, "dense": 1.0})
    ranked = sorted(fused.items(), key=lambda row: (-row[1], row[0]))[:k]
    return PictureRanking(ranked, {pk: match.get(pk, 0.0) for pk, _score in ranked})


def forms(term: str) -> list[str]:
    """The term, then the shorter forms a description may use for it: an English plural's
    singular ("boats": "boat", "buses": "bus", "puppies": "puppy"), and a Chinese word's
    endings, longest first, where its head noun is ("小狗": "狗", "红色公交车": "公交车", …),
    or the word without a place it ends in ("花上": "花"); then the labels and families that
    descriptions use for any of them (picture_words.tsv: "kittens": "cat")."""
    found = [term]
    if term.isascii() and term.isalpha() and len(term) > 3 and term.endswith("s") and not term.endswith("ss"):
        if term.endswith("ies"):
            found.append(term[:-3] + "y")
        elif term.endswith(("ses", "xes", "ches", "shes")):
            found.append(term[:-2])
        found.append(term[:-1])
    elif len(term) >= 2 and all(is_cjk(char) for char in term):
        found += [term[start:] for start in range(1, len(term))]
        if term[-1] in "上里中下前后旁边内外":
            found.append(term[:-1])
    named = description_words()
    found += [word for form in found for word in named.get(form, ())]
    return list(dict.fromkeys(found))


@cache
def description_words() -> dict[str, tuple[str, ...]]:
    """Everyday words and the words of the picture descriptions that name the same thing
    (picture_words.tsv, reviewed by hand): {"kitten": ("cat",), "鸭子": ("公鸭", "鸟"), …}."""
    with WORDS_FILE.open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        return {row["word"]: tuple(row["description_words"].split()) for row in rows}


def with_forms(wanted: Sequence[str]) -> list[str]:
    """The wanted terms and all their forms, each once."""
    return sorted({form for term in wanted for form in forms(term)})


def held_terms(scope: Scope, wanted: Sequence[str], k: int) -> tuple[list[tuple[int, list[str]]], dict[str, int], int]:
    """The k media chunks that hold the most of the `wanted` terms' idf, best first, each with
    the terms it holds; how many media chunks hold each wanted term; how many there are."""
    with connection.cursor() as cursor:
        cursor.execute(LEXICAL.format(scope=scope.sql), [*scope.params, list(wanted), k])
        rows = cursor.fetchall()
    if not rows:
        return [], {}, 0
    return [(int(pk), list(held)) for pk, held, _counts, _total in rows], _counts(rows[0][2]), int(rows[0][3])


def weights(
    wanted: Sequence[str], counts: dict[str, int], total: int, absent: float = ABSENT_WEIGHT
) -> dict[str, float]:
    """Each of the question's terms' weight in a match, the terms that only ask for a picture
    left out: the idf among the `total` media chunks of its first form (see forms) that some of
    them hold (`counts`); for a term none holds in any form, `absent` times the mean weight of
    those some hold (a weight relative to the others, so that it means the same among 5
    pictures as among 5,000)."""
    content = [term for term in dict.fromkeys(wanted) if term not in REQUEST_TERMS]
    held = {}
    for term in content:
        n = next((counts[form] for form in forms(term) if counts.get(form, 0) > 0), 0)
        if n:
            held[term] = math.log(1 + (total - n + 0.5) / (n + 0.5))
    mean = sum(held.values()) / len(held) if held else 0.0
    return {term: held.get(term, absent * mean) for term in content}


def coverage(held: Sequence[str], weights: dict[str, float]) -> float:
    """The share of the question's weight (see weights) that the terms `held` carry, in any of
    their forms; 0 when they name only colours: a red picture is no answer to "a red giraffe"."""
    holding = set(held)
    found = {term for term in weights if any(form in holding for form in forms(term))}
    total = sum(weights.values())
    if total <= 0 or found <= COLOUR_TERMS:
        return 0.0
    return sum(weights[term] for term in found) / total


def _counts(value: str | dict[str, int] | None) -> dict[str, int]:
    """json_object_agg's result: a dict from psycopg, a string from drivers that do not parse
    JSON."""
    parsed = json.loads(value) if isinstance(value, str) else value
    return {str(term): int(n) for term, n in (parsed or {}).items()}

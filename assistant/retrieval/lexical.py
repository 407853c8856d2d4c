"""The lexical channel: Okapi BM25 over jieba terms, computed in PostgreSQL.

Scores follow the Lucene variant of BM25 (as `bm25s` with method="lucene" computes it):

    score(d, q) = Σ_{t ∈ q} idf(t) · tf(t, d) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

over each index version's searchable chunks: N, avgdl and df come from the statistics that
ingestion keeps (ingestion/stats.py), tf and |d| from each chunk's stored terms. This idf is
never negative, so a term in most chunks still counts a little (the Robertson idf would make
it subtract). Query terms count once each. Terms are jieba's search-mode segmentation,
lower-cased, unstemmed (ingestion/terms.py): English stemming would merge "14th" forms and
names that must match literally, and jieba already splits compounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

from django.conf import settings
from django.db import connection, transaction

from assistant.retrieval.scope import Scope
from ingestion.terms import terms

QUERY = """
WITH versions AS MATERIALIZED (
    SELECT v.id, v.chunk_count::float AS n, v.total_length::float / v.chunk_count AS avgdl
    FROM knowledge_indexversion v
    WHERE v.id IN ({scope}) AND v.chunk_count > 0
),
-- One row per version: the idf of each query term, in the order of the terms (NULL where the
-- version has none), so that each candidate is joined to one row and scored by one
-- expression (a join to one row per term copied each candidate's terms once per term, and
-- the hash tables of a few thousand candidates spilled to disk).
idf AS MATERIALIZED (
    SELECT v.id AS index_version_id, array_agg(ln(1 + (v.n - s.df + 0.5) / (s.df + 0.5)) ORDER BY q.n) AS idfs
    FROM versions v
    CROSS JOIN unnest(%s::text[]) WITH ORDINALITY AS q(term, n)
    LEFT JOIN knowledge_termstat s ON s.index_version_id = v.id AND s.term = q.term
    GROUP BY v.id
),
-- `|| '{{}}'`: the stored terms are compressed; the candidates keep them decompressed once,
-- not once per query term read.
candidates AS MATERIALIZED (
    SELECT c.id, c.index_version_id, c.length, c.terms || '{{}}'::jsonb AS terms
    FROM knowledge_chunk c
    WHERE {match} AND c.searchable AND c.index_version_id = ANY(ARRAY(SELECT id FROM versions))
)
SELECT id, score FROM (
    SELECT c.id, {score} AS score
    FROM candidates c
    JOIN versions v ON v.id = c.index_version_id
    JOIN idf i ON i.index_version_id = c.index_version_id
    -- OFFSET 0: each term's count is read from the chunk's JSON once, not once per use.
    CROSS JOIN LATERAL (SELECT {counts}, %s * (1 - %s + %s * c.length / v.avgdl) AS norm OFFSET 0) t
) scored
WHERE score > 0
ORDER BY score DESC, id
LIMIT %s
"""
# Term j's part of the score (tf{j}: its count in the chunk, NULL where absent); a part is
# positive or NULL, so a chunk holding no term whose idf is known scores 0 and is left out.
PART = "coalesce(i.idfs[{j}] * t.tf{j} / (t.tf{j} + t.norm), 0)"
COUNT = "(c.terms ->> %s)::float AS tf{j}"


def query_terms(query: str) -> list[str]:
    return sorted(terms(query))


STATS = """
SELECT s.term, s.df, v.chunk_count, v.total_length, s.max_tf, s.max_tf_share,
    (SELECT sum(chunk_count) FROM knowledge_indexversion) AS indexed
FROM knowledge_termstat s
JOIN knowledge_indexversion v ON v.id = s.index_version_id
WHERE s.index_version_id IN ({scope}) AND v.chunk_count > 0 AND s.term = ANY(%s)
"""
MAX_SETS = 24  # more term sets than this to read: read the chunks holding any needed term
MAX_TERMS = 12  # and so with more query terms than this (2^n sets to try)
MARGIN = 1 + 1e-9  # bounds a little above the true ones, so that float rounding never prunes

# Candidates come from the GIN index on the terms, which lists matching chunks of every
# version in the database, or, for a small scope, from the scope's own chunks read by version
# with the same test as a function the planner cannot give to the GIN index: over one
# collection of 2,000 chunks in a 100k-chunk database that took p95 219 -> 38 ms, but five
# collections were slower than the GIN index (bench/retrieval.py). A candidate holds all the
# terms of one of the term sets asked for. The GIN path runs with index scans off: the planner
# cannot estimate the GIN lists' sizes and, with many term sets, would rather read every row
# of the scope through the version's b-tree and test each one's terms (decompressing them once
# per set): over 50 collections, "asset tag and loan form policy" at 100k chunks 500 -> 12 ms,
# "unit test and style guide policy" at 10k 91 -> 5 ms, as bitmap scans (GIN lists ANDed with
# the version's).
SCAN_CHUNKS = 5000
# The second read skips the term sets the first one covered, where the scope holds most of
# the indexed chunks (100k over 50 collections: lexical p95 63-80 -> 45-50 ms). In a smaller
# share the GIN lists must be ANDed with the versions' b-tree, and the planner (which cannot
# estimate the lists' sizes) does so only when the sets are many: skipping them made it read
# the lists' chunks of every version (10k of 110k, "北京投放负责人" 80 -> 160 ms).
WIDE_SHARE = 0.5
ANY_BY_INDEX, ANY_BY_VERSION = "c.terms ?| %s", "jsonb_exists_any(c.terms, %s)"
ALL_BY_INDEX, ALL_BY_VERSION = "c.terms ?& %s", "jsonb_exists_all(c.terms, %s)"

TermSets = list[frozenset[str]]


def search_lexical(scope: Scope, query: str, k: int) -> list[tuple[int, float]]:
    """(chunk id, BM25 score), best first, at most k.

    Exact top k, read cheaply (MaxScore): each term has an upper bound on what it adds to a
    chunk's score (its idf times the best tf part its counts and chunk lengths allow, from
    the statistics). Candidates are first the chunks holding every query term or the rarest
    one. A chunk whose terms' bounds sum to less than the k-th score found cannot be in the
    top k; if some other chunk could be, the search runs once more over the chunks holding
    one of the smallest term sets whose bounds reach that k-th score (a few GIN list
    intersections). More candidates can only raise the k-th score, so that second run is
    exact. Over 100k chunks and 50 collections (bench/retrieval.py): lexical p50/p95 119/510 ->
    82/175 ms; queries of common terms that always come together (负责人 and 负责, 责人) stay slow."""
    wanted = query_terms(query)
    if not wanted or not scope.versions:
        return []
    with connection.cursor() as cursor:
        cursor.execute(STATS.format(scope=scope.sql), [*scope.params, wanted])
        stats = cursor.fetchall()
    if not stats:
        return []
    k1, b = settings.BM25_K1, settings.BM25_B
    chunks = sum(version.chunk_count for version in scope.versions)
    df: dict[str, int] = {}
    bound: dict[str, float] = {}
    for term, count, n, length, max_tf, max_share, _indexed in stats:
        df[term] = df.get(term, 0) + count
        idf = math.log(1 + (n - count + 0.5) / (count + 0.5))
        bound[term] = max(bound.get(term, 0.0), idf * tf_bound(max_tf, max_share, length / n, k1, b) * MARGIN)
    order = sorted(df, key=lambda term: (df[term], term))  # rarest first
    small = chunks <= SCAN_CHUNKS
    # The chunks holding every term (few: the GIN lists intersected) or the rarest one give
    # a k-th score to start from.
    first = [frozenset(order), frozenset(order[:1])] if len(order) > 1 else [frozenset(order)]
    found = _run(scope, small, df, first, k)
    kth = found[-1][1] if len(found) == k else 0.0  # fewer than k: any chunk may enter
    needed = _needed(order, bound, kth)
    # A chunk holding a needed set that holds a set read first was a candidate then: it is in
    # the top k found or cannot be in the top k.
    second = [held for held in needed if not any(read <= held for read in first)]
    if not second:
        return found  # every chunk that could enter was read
    if chunks < WIDE_SHARE * stats[0][6]:
        second = needed  # see WIDE_SHARE
    scores = dict(found) | dict(_run(scope, small, df, second, k))
    return sorted(scores.items(), key=lambda row: (-row[1], row[0]))[:k]


def tf_bound(max_tf: int, max_share: float, avgdl: float, k1: float, b: float) -> float:
    """The largest tf / (tf + k1 · (1 − b + b · |d| / avgdl)) over chunks where the term's
    count is at most max_tf and count / |d| at most max_share; 1 where those are unknown."""
    if max_tf <= 0 or max_share <= 0:
        return 1.0
    return 1 / (1 + k1 * (1 - b) / max_tf + k1 * b / (max_share * avgdl))


def _needed(order: list[str], bound: dict[str, float], kth: float) -> TermSets:
    """The smallest sets of terms whose bounds reach `kth`: a chunk holding none of them
    scores less. With too many terms or sets, one set per term that must be read (the rarest
    first, until the bounds of those left out stay under `kth`)."""
    sets = _smallest_sets(order, bound, kth) if len(order) <= MAX_TERMS else None
    if sets is not None:
        return sets
    left_out = (n for n in range(1, len(order)) if sum(bound[term] for term in order[n:]) < kth)
    return [frozenset([term]) for term in order[: next(left_out, len(order))]]


def _smallest_sets(order: list[str], bound: dict[str, float], kth: float) -> TermSets | None:
    sets: TermSets = []
    for size in range(1, len(order) + 1):
        for terms_ in combinations(order, size):
            held = frozenset(terms_)
            if sum(bound[term] for term in held) >= kth and not any(known <= held for known in sets):
                sets.append(held)
                if len(sets) > MAX_SETS:
                    return None
    return sets


def _run(scope: Scope, small: bool, df: dict[str, int], candidates: TermSets, k: int) -> list[tuple[int, float]]:
    """The top k of the chunks holding every term of one of the `candidates` sets (the sets
    of one term in one test: each test reads each candidate's terms again). The tests most
    chunks pass come first: a chunk's terms are decompressed for each test tried until one
    passes (GIN results are rechecked), and chunks holding common terms are most of them."""
    single = sorted(term for held in candidates if len(held) == 1 for term in held)
    tests: list[tuple[int, str, list[str]]] = [
        (min(df[term] for term in held), ALL_BY_VERSION if small else ALL_BY_INDEX, sorted(held))
        for held in candidates
        if len(held) > 1
    ]
    if single:
        tests.append((max(df[term] for term in single), ANY_BY_VERSION if small else ANY_BY_INDEX, single))
    tests.sort(key=lambda test: (-test[0], test[2]))
    scored = sorted(df)
    k1, b = settings.BM25_K1, settings.BM25_B
    with transaction.atomic(), connection.cursor() as cursor:
        if not small:
            cursor.execute("SELECT set_config('enable_indexscan', 'off', true)")
        sql = QUERY.format(
            scope=scope.sql,
            match="(" + " OR ".join(test for _size, test, _terms in tests) + ")",
            score=" + ".join(PART.format(j=j) for j in range(1, len(scored) + 1)),
            counts=", ".join(COUNT.format(j=j) for j in range(1, len(scored) + 1)),
        )
        params = [*scope.params, scored, *(terms_ for _size, _test, terms_ in tests), *scored, k1, b, b, k]
        cursor.execute(sql, params)
        return [(int(pk), float(score)) for pk, score in cursor.fetchall()]


# A word is held by a chunk that holds every word jieba's search mode cuts it into (GIN index).
HELD_TOGETHER = """
SELECT EXISTS (
    SELECT 1 FROM knowledge_chunk c
    WHERE c.terms ?& %s AND c.searchable AND c.index_version_id IN ({scope})
)
"""


def unknown(scope: Scope, words: Sequence[str]) -> list[str]:
    """The words that no searchable chunk of the scope holds, in their order (one query
    each, on the chunks' index terms). A word is held where one chunk holds every word of two
    characters or more that jieba's search mode cuts it into, as the index holds a
    document's words (常住人口 by a chunk holding 常住, 人口 and 常住人口; 台北市 not by
    淮北市's 北市)."""
    if not scope.versions:
        return []
    lacking = []
    with connection.cursor() as cursor:
        for word in words:
            parts = sorted({term for term in terms(word) if len(term) >= 2} or {word.lower()})
            cursor.execute(HELD_TOGETHER.format(scope=scope.sql), [parts, *scope.params])
            if not cursor.fetchone()[0]:
                lacking.append(word)
    return lacking

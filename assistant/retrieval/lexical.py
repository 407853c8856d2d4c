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

from django.conf import settings
from django.db import connection

from assistant.retrieval.scope import Scope
from ingestion.terms import terms

QUERY = """
WITH versions AS MATERIALIZED (
    SELECT v.id, v.chunk_count::float AS n, v.total_length::float / v.chunk_count AS avgdl
    FROM knowledge_indexversion v
    WHERE v.id IN ({scope}) AND v.chunk_count > 0
),
idf AS MATERIALIZED (
    SELECT s.index_version_id, s.term, ln(1 + (v.n - s.df + 0.5) / (s.df + 0.5)) AS idf
    FROM knowledge_termstat s JOIN versions v ON v.id = s.index_version_id
    WHERE s.term = ANY(%s)
),
candidates AS MATERIALIZED (
    SELECT c.id, c.index_version_id, c.length, c.terms
    FROM knowledge_chunk c
    WHERE {match} AND c.searchable AND c.index_version_id = ANY(ARRAY(SELECT id FROM versions))
)
SELECT c.id, sum(i.idf * t.tf / (t.tf + %s * (1 - %s + %s * c.length / v.avgdl))) AS score
FROM candidates c
JOIN versions v ON v.id = c.index_version_id
JOIN idf i ON i.index_version_id = c.index_version_id
-- OFFSET 0: each term's count is read from the chunk's JSON once, not once per use.
CROSS JOIN LATERAL (SELECT (c.terms ->> i.term)::float AS tf OFFSET 0) t
WHERE t.tf IS NOT NULL
GROUP BY c.id
ORDER BY score DESC, c.id
LIMIT %s
"""


def query_terms(query: str) -> list[str]:
    return sorted(terms(query))


STATS = """
SELECT s.term, s.df, v.chunk_count FROM knowledge_termstat s
JOIN knowledge_indexversion v ON v.id = s.index_version_id
WHERE s.index_version_id IN ({scope}) AND v.chunk_count > 0 AND s.term = ANY(%s)
"""
COMMON_SHARE = 0.05  # a term in more than this share of the chunks searched is "common"

# Candidates come from the GIN index on the terms (`?|`), which lists matching chunks of every
# version in the database, or, for a small scope, from the scope's own chunks read by version
# with the same test as a function the planner cannot give to the GIN index: over one
# collection of 2,000 chunks in a 100k-chunk database that took p95 219 -> 38 ms, but five
# collections were slower than the GIN index (bench/retrieval.py).
SCAN_CHUNKS = 5000
BY_INDEX, BY_VERSION = "c.terms ?| %s", "jsonb_exists_any(c.terms, %s)"
ALL_BY_INDEX, ALL_BY_VERSION = "c.terms ?& %s", "jsonb_exists_all(c.terms, %s)"


def search_lexical(scope: Scope, query: str, k: int) -> list[tuple[int, float]]:
    """(chunk id, BM25 score), best first, at most k.

    Exact top k, read cheaply (MaxScore): candidates are first the chunks holding a rare
    query term. A chunk holding none of the terms left out scores less than the sum of their
    idfs (each term's tf part is below 1), so once the k-th candidate scores more than that,
    nothing was missed. Otherwise the search runs once more with as few of the left-out
    terms, rarest first, as that k-th score allows to leave out: more candidates can only
    raise the k-th score, so that second run is exact. With no rare term, the first run reads
    the chunks holding every query term instead."""
    wanted = query_terms(query)
    if not wanted or not scope.versions:
        return []
    with connection.cursor() as cursor:
        cursor.execute(STATS.format(scope=scope.sql), [*scope.params, wanted])
        stats = cursor.fetchall()
    if not stats:
        return []
    chunks = sum(version.chunk_count for version in scope.versions)
    df: dict[str, int] = {}
    bound: dict[str, float] = {}
    for term, count, n in stats:
        df[term] = df.get(term, 0) + count
        bound[term] = max(bound.get(term, 0.0), math.log(1 + (n - count + 0.5) / (count + 0.5)))
    order = sorted(df, key=lambda term: (df[term], term))  # rarest first
    rare = sum(df[term] <= COMMON_SHARE * max(chunks, 1) for term in order)
    small = chunks <= SCAN_CHUNKS
    match = BY_VERSION if small else BY_INDEX
    if rare == 0 and len(order) > 1:
        # Only common terms: the chunks holding all of them (few, and found by intersecting
        # the GIN lists) give a k-th score to start from, as the rare terms' chunks would.
        probe = _run(scope, ALL_BY_VERSION if small else ALL_BY_INDEX, sorted(df), order, k)
        return _rest(scope, match, sorted(df), order, bound, 0, probe, k)
    size = rare if 0 < rare < len(order) else len(order)
    found = _run(scope, match, sorted(df), order[:size], k)
    return _rest(scope, match, sorted(df), order, bound, size, found, k)


def _rest(
    scope: Scope,
    match: str,
    scored: list[str],
    order: list[str],
    bound: dict[str, float],
    size: int,
    found: list[tuple[int, float]],
    k: int,
) -> list[tuple[int, float]]:
    """The exact top k, given `found`: the top k of some chunks, holding the first `size`
    terms of `order` or more. The terms whose bounds together stay under its k-th score can
    be left out of the candidates; the others are read (once, and only when needed)."""
    if size == len(order):
        return found
    kth = found[-1][1] if len(found) == k else 0.0  # fewer than k: any chunk may enter
    left_out = (n for n in range(max(size, 1), len(order)) if sum(bound[term] for term in order[n:]) < kth)
    needed = next(left_out, len(order))
    if needed == size:
        return found
    return _run(scope, match, scored, order[:needed], k)


def _run(scope: Scope, match: str, scored: list[str], candidates: list[str], k: int) -> list[tuple[int, float]]:
    k1, b = settings.BM25_K1, settings.BM25_B
    with connection.cursor() as cursor:
        sql = QUERY.format(scope=scope.sql, match=match)
        cursor.execute(sql, [*scope.params, scored, candidates, k1, b, b, k])
        return [(int(pk), float(score)) for pk, score in cursor.fetchall()]

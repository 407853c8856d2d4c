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
    WHERE c.terms ?| %s AND c.searchable AND c.index_version_id = ANY(ARRAY(SELECT id FROM versions))
)
SELECT c.id, sum(i.idf * t.tf / (t.tf + %s * (1 - %s + %s * c.length / v.avgdl))) AS score
FROM candidates c
JOIN versions v ON v.id = c.index_version_id
JOIN idf i ON i.index_version_id = c.index_version_id
CROSS JOIN LATERAL (SELECT (c.terms ->> i.term)::float AS tf) t
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


def search_lexical(scope: Scope, query: str, k: int) -> list[tuple[int, float]]:
    """(chunk id, BM25 score), best first, at most k.

    Exact top k, read cheaply (MaxScore): candidates are first the chunks holding a rare
    query term. A chunk holding only common terms scores less than the sum of their idfs
    (each term's tf part is below 1), so when the k-th candidate already scores more than
    that, nothing was missed; otherwise the search runs again over every query term."""
    wanted = query_terms(query)
    if not wanted or not scope.versions:
        return []
    with connection.cursor() as cursor:
        cursor.execute(STATS.format(scope=scope.sql), [*scope.params, wanted])
        stats = cursor.fetchall()
    if not stats:
        return []
    chunks = {version.pk: version.chunk_count for version in scope.versions}
    total = sum(chunks.values()) or 1
    df: dict[str, int] = {}
    bound: dict[str, float] = {}
    for term, count, n in stats:
        df[term] = df.get(term, 0) + count
        bound[term] = max(bound.get(term, 0.0), math.log(1 + (n - count + 0.5) / (count + 0.5)))
    common = {term for term, count in df.items() if count > COMMON_SHARE * total}
    rare = sorted(set(df) - common)
    if rare and common:
        found = _run(scope, sorted(df), rare, k)
        if len(found) == k and found[-1][1] > sum(bound[term] for term in common):
            return found
    return _run(scope, sorted(df), sorted(df), k)


def _run(scope: Scope, scored: list[str], candidates: list[str], k: int) -> list[tuple[int, float]]:
    k1, b = settings.BM25_K1, settings.BM25_B
    with connection.cursor() as cursor:
        cursor.execute(QUERY.format(scope=scope.sql), [*scope.params, scored, candidates, k1, b, b, k])
        return [(int(pk), float(score)) for pk, score in cursor.fetchall()]

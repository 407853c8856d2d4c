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

from django.conf import settings
from django.db import connection

from assistant.retrieval.scope import Scope
from ingestion.terms import terms

QUERY = """
WITH versions AS (
    SELECT v.id, v.chunk_count::float AS n, v.total_length::float / v.chunk_count AS avgdl
    FROM knowledge_indexversion v
    WHERE v.id IN ({scope}) AND v.chunk_count > 0
),
idf AS (
    SELECT s.index_version_id, s.term, ln(1 + (v.n - s.df + 0.5) / (s.df + 0.5)) AS idf
    FROM knowledge_termstat s JOIN versions v ON v.id = s.index_version_id
    WHERE s.term = ANY(%s)
)
SELECT c.id, sum(
    i.idf * (c.terms ->> i.term)::float
    / ((c.terms ->> i.term)::float + %s * (1 - %s + %s * c.length / v.avgdl))
) AS score
FROM knowledge_chunk c
JOIN versions v ON v.id = c.index_version_id
JOIN idf i ON i.index_version_id = c.index_version_id AND c.terms ? i.term
WHERE c.terms ?| %s AND c.searchable
GROUP BY c.id
ORDER BY score DESC, c.id
LIMIT %s
"""


def query_terms(query: str) -> list[str]:
    return sorted(terms(query))


def search_lexical(scope: Scope, query: str, k: int) -> list[tuple[int, float]]:
    """(chunk id, BM25 score), best first, at most k."""
    wanted = query_terms(query)
    if not wanted or not scope.versions:
        return []
    k1, b = settings.BM25_K1, settings.BM25_B
    with connection.cursor() as cursor:
        cursor.execute(QUERY.format(scope=scope.sql), [*scope.params, wanted, k1, b, b, wanted, k])
        return [(int(pk), float(score)) for pk, score in cursor.fetchall()]

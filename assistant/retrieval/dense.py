"""The dense channels: cosine similarity on pgvector HNSW indexes, text embeddings (dense)
and, where an image embedder is configured, the query text in the image space against image
and frame chunks (image).

Each version has its own partial HNSW index (its dims are fixed there). A few versions are
searched each by its own query, with the version id as a constant the planner can match to
the index predicate (`index_version_id = v AND searchable`). The access check is a one-time
filter on the branch (the version must be one the user may see), so it does not disturb the
planner's choice of the graph. Iterative scans (pgvector 0.8) keep reading the graph until
k rows pass any remaining filter (`image_embedding IS NOT NULL`).

Several versions holding few chunks in all are not walked at all: their rows are read by
version (b-tree) and every distance computed, an exact scan that is faster than many small
graph walks and has recall 1.

Many versions are searched at once in the global index of their dims (every searchable
chunk with those dims, ingestion.index.vector_index_sql), filtered by version during an
iterative scan: one graph walk instead of one per version. It pays when the scope holds a
fair share of that index; a few small collections in a large database read their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum

from assistant.retrieval.scope import Scope
from knowledge.models import IndexVersion

# One branch per version, all in one statement (one round trip, one plan). The column and
# the cast's dims are spliced in: a vector type modifier cannot be a bound parameter. Both
# come from this module and from an integer column, never from input.
BRANCH = """
(SELECT c.id, 1 - ({column}::vector({dims}) <=> %s::vector({dims})) AS score
FROM knowledge_chunk c
WHERE c.index_version_id = %s AND c.searchable{extra}
  AND EXISTS (SELECT 1 FROM allowed WHERE active_version_id = %s)
ORDER BY {column}::vector({dims}) <=> %s::vector({dims})
LIMIT %s)
"""


@dataclass(frozen=True)
class Statement:
    sql: str
    params: list[Any]
    ef_search: int  # hnsw.ef_search for this statement


# The global index, filtered to the versions searched (`+ 0` keeps the planner from reading
# the version's b-tree instead of the graph). Same splicing rules as BRANCH.
GLOBAL = """
WITH allowed AS MATERIALIZED ({scope})
SELECT c.id, 1 - ({column}::vector({dims}) <=> %s::vector({dims})) AS score
FROM knowledge_chunk c
WHERE vector_dims({column}) = {dims} AND c.searchable{extra}
  AND c.index_version_id + 0 = ANY(ARRAY(SELECT active_version_id FROM allowed WHERE active_version_id = ANY(%s)))
ORDER BY {column}::vector({dims}) <=> %s::vector({dims})
LIMIT %s
"""
# Measured on 2 busy cores (bench/retrieval.py), 50 collections of 2,000 chunks each in a
# 110k-chunk index: one branch per version, p50 728 ms in all (the planner often sorts a
# version's rows rather than walk its small graph); the global index, ef_search 800, p50 63 ms
# at recall@10 0.963. A filtered walk needs a wider candidate list than a per-version one, and
# recall falls with the scope's share of the index: 0.911 where it held 9% (10k of 110k).
MANY_VERSIONS = 16
MIN_SHARE = 0.5  # of the global index's chunks, for the filtered walk to keep recall@10 >= 0.95
GLOBAL_EF_SEARCH = 800


def search_dense(scope: Scope, vector: Sequence[float], model_id: str, k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) over versions built with `model_id`, best first."""
    versions = [v for v in scope.versions if v.embedder_id == model_id and v.dims == len(vector)]
    if not versions:
        return []
    return search_statement(statement(scope, versions, "c.embedding", lambda v: v.dims, "", vector, k), k)


def search_image(scope: Scope, vector: Sequence[float], model_id: str, k: int) -> list[tuple[int, float]]:
    """The same over image embeddings of image and frame chunks."""
    versions = [v for v in scope.versions if v.image_embedder_id == model_id and v.image_dims == len(vector)]
    if not versions:
        return []
    extra = " AND c.image_embedding IS NOT NULL"
    query = statement(scope, versions, "c.image_embedding", lambda v: v.image_dims or 0, extra, vector, k)
    return search_statement(query, k)


def statement(
    scope: Scope,
    versions: list[IndexVersion],
    column: str,
    dims_of: Callable[[IndexVersion], int],
    extra: str,
    vector: Sequence[float],
    k: int,
) -> Statement:
    """One dense search over `versions`, all of one dims (EXPLAIN-able in tests)."""
    text = "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"
    dims = int(dims_of(versions[0]))
    use_global = _global(versions, column, dims)
    if _exact(versions, use_global):
        sql = EXACT.format(scope=scope.sql, column=column, dims=dims, extra=extra)
        params = [*scope.params, text, [version.pk for version in versions], k]
        return Statement(sql, params, settings.HNSW_EF_SEARCH)
    if use_global:
        sql = GLOBAL.format(scope=scope.sql, column=column, dims=dims, extra=extra)
        params = [*scope.params, text, [version.pk for version in versions], text, k]
        return Statement(sql, params, max(settings.HNSW_EF_SEARCH, GLOBAL_EF_SEARCH))
    branches, params = [], list(scope.params)
    for version in versions:
        branches.append(BRANCH.format(column=column, dims=dims, extra=extra))
        params += [text, version.pk, version.pk, text, k]
    sql = f"WITH allowed AS MATERIALIZED ({scope.sql}) " + " UNION ALL ".join(branches)
    return Statement(sql, params, settings.HNSW_EF_SEARCH)


# Every distance over the scope's rows, for several versions with few chunks in all. The
# distances are computed in a materialized CTE and ordered outside it, so the planner cannot
# turn the ORDER BY into an HNSW walk: the rows come from the version b-tree. Same splicing
# rules as BRANCH.
EXACT = """
WITH allowed AS MATERIALIZED ({scope}),
near AS MATERIALIZED (
    SELECT c.id, {column}::vector({dims}) <=> %s::vector({dims}) AS distance
    FROM knowledge_chunk c
    WHERE c.index_version_id = ANY(ARRAY(SELECT active_version_id FROM allowed WHERE active_version_id = ANY(%s)))
      AND c.searchable AND {column} IS NOT NULL{extra}
)
SELECT id, 1 - distance AS score FROM near ORDER BY distance, id LIMIT %s
"""
# Measured on 2 busy cores (bench/retrieval.py corpora, 20 queries, SQL p50 ms): the exact
# scan costs about 4.5 ms per 1,000 chunks (their vectors are TOASTed: three buffer reads a
# row); a walk of one version's graph about 2 ms for 200 chunks and 14 ms for 2,000; the
# global walk about 50 ms at ef_search 800. 50 versions of 200 chunks: exact 51, walks 82;
# 5 of 2,000: exact 42, walks 72; 20 of 2,000: exact 177, walks 268.
EXACT_CHUNKS = 10000  # below this the exact scan is cheaper than the global walk, too
EXACT_PER_VERSION = 3000  # and below this many chunks a version, cheaper than the walks


def _exact(versions: list[IndexVersion], use_global: bool) -> bool:
    """Whether to compute every distance: several versions (one has a single graph to walk)
    with few chunks in all, or with few each where the global index does not serve them."""
    if len(versions) < 2:
        return False
    chunks = sum(version.chunk_count for version in versions)
    return chunks <= EXACT_CHUNKS or (not use_global and chunks <= EXACT_PER_VERSION * len(versions))


def _global(versions: list[IndexVersion], column: str, dims: int) -> bool:
    """Whether to read the global index of `dims`: many versions holding a fair share of it."""
    if len(versions) < MANY_VERSIONS:
        return False
    same_dims = {"dims": dims} if column == "c.embedding" else {"image_dims": dims}
    indexed = IndexVersion.objects.filter(**same_dims).aggregate(n=Sum("chunk_count"))["n"] or 0
    return sum(version.chunk_count for version in versions) >= MIN_SHARE * indexed


def search_statement(query: Statement, k: int) -> list[tuple[int, float]]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(query.ef_search)])
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        cursor.execute(query.sql, query.params)
        found = [(int(pk), float(score)) for pk, score in cursor.fetchall()]
    # relaxed_order may return rows slightly out of order; several versions interleave.
    found.sort(key=lambda row: (-row[1], row[0]))
    return found[:k]

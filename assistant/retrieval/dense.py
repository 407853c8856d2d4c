"""The dense channels: cosine similarity on pgvector HNSW indexes, text embeddings (dense)
and, where an image embedder is configured, the query text in the image space against image
and frame chunks (image).

Each version has its own partial HNSW index (its dims are fixed there), so each version is
searched by its own query, with the version id as a constant the planner can match to the
index predicate (`index_version_id = v AND searchable`). The access check is a one-time
filter on the branch (the version must be one the user may see), so it does not disturb the
planner's choice of the graph. Iterative scans (pgvector 0.8) keep reading the graph until
k rows pass any remaining filter (`image_embedding IS NOT NULL`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.db import connection, transaction

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


def search_dense(scope: Scope, vector: Sequence[float], model_id: str, k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) over versions built with `model_id`, best first."""
    versions = [v for v in scope.versions if v.embedder_id == model_id and v.dims == len(vector)]
    if not versions:
        return []
    return _search(*statement(scope, versions, "c.embedding", lambda v: v.dims, "", vector, k), k)


def search_image(scope: Scope, vector: Sequence[float], model_id: str, k: int) -> list[tuple[int, float]]:
    """The same over image embeddings of image and frame chunks."""
    versions = [v for v in scope.versions if v.image_embedder_id == model_id and v.image_dims == len(vector)]
    if not versions:
        return []
    extra = " AND c.image_embedding IS NOT NULL"
    return _search(*statement(scope, versions, "c.image_embedding", lambda v: v.image_dims or 0, extra, vector, k), k)


def statement(
    scope: Scope,
    versions: list[IndexVersion],
    column: str,
    dims_of: Callable[[IndexVersion], int],
    extra: str,
    vector: Sequence[float],
    k: int,
) -> tuple[str, list[Any]]:
    """The SQL and parameters of one dense search over `versions` (EXPLAIN-able in tests)."""
    text = "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"
    branches, params = [], list(scope.params)
    for version in versions:
        branches.append(BRANCH.format(column=column, dims=int(dims_of(version)), extra=extra))
        params += [text, version.pk, version.pk, text, k]
    return f"WITH allowed AS MATERIALIZED ({scope.sql}) " + " UNION ALL ".join(branches), params


def _search(sql: str, params: list[Any], k: int) -> list[tuple[int, float]]:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(settings.HNSW_EF_SEARCH)])
        cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        cursor.execute(sql, params)
        found = [(int(pk), float(score)) for pk, score in cursor.fetchall()]
    # relaxed_order may return rows slightly out of order; several versions interleave.
    found.sort(key=lambda row: (-row[1], row[0]))
    return found[:k]

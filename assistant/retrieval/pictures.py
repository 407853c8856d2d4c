"""The picture channel: when a question asks to see something (fusion.media_intent), the
pictures, their descriptions and video frames are ranked among themselves, and that ranking
joins the fusion as a channel of its own. A photo described in twenty words would otherwise
compete with every page of a 300-page manual for "the photo of the ladybug", and lose.

Both text channels, over media chunks only: terms weighted by how rare they are among the
scope's pictures ("photo" is in every description and counts for almost nothing there,
"ladybug" in one), and the dense channel restricted to the same chunks; the two lists are
fused by reciprocal rank like the main channels."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from assistant.retrieval.dense import search_statement, statement
from assistant.retrieval.fusion import rrf
from assistant.retrieval.lexical import query_terms
from assistant.retrieval.scope import Scope

MEDIA_KINDS = ("image", "picture", "frame")
MEDIA_ONLY = " AND c.kind IN ('image', 'picture', 'frame')"

# Each query term's idf among the scope's media chunks, and each media chunk's sum of the idfs
# of the terms it holds. Media chunks are few (a picture has one or two), so they are read by
# version and tested one by one.
LEXICAL = """
WITH allowed AS MATERIALIZED ({scope}),
media AS MATERIALIZED (
    SELECT c.id, c.terms FROM knowledge_chunk c
    WHERE c.index_version_id IN (SELECT active_version_id FROM allowed)
      AND c.searchable AND c.kind IN ('image', 'picture', 'frame')
),
wanted AS (SELECT unnest(%s::text[]) AS term),
df AS (
    SELECT w.term, count(m.id) AS n FROM wanted w JOIN media m ON m.terms ? w.term GROUP BY w.term
),
total AS (SELECT count(*) AS n FROM media)
SELECT m.id, sum(ln(1 + (total.n - df.n + 0.5) / (df.n + 0.5))) AS score
FROM media m JOIN df ON m.terms ? df.term CROSS JOIN total
GROUP BY m.id
ORDER BY score DESC, m.id
LIMIT %s
"""


def search_pictures(
    scope: Scope, query: str, vector: Sequence[float] | None, model_id: str, k: int
) -> list[tuple[int, float]]:
    """(chunk id, fused score) of the scope's media chunks for `query`, best first, at most k."""
    wanted = query_terms(query)
    lists: dict[str, list[int]] = {}
    if wanted and scope.versions:
        with connection.cursor() as cursor:
            cursor.execute(LEXICAL.format(scope=scope.sql), [*scope.params, wanted, k])
            lists["lexical"] = [int(pk) for pk, _score in cursor.fetchall()]
    if vector is not None:
        versions = [v for v in scope.versions if v.embedder_id == model_id and v.dims == len(vector)]
        if versions:
            dense = statement(scope, versions, "c.embedding", lambda v: v.dims, MEDIA_ONLY, vector, k)
            lists["dense"] = [pk for pk, _score in search_statement(dense, k)]
    fused = rrf(lists, {"lexical": 1.0, "dense": 1.0})
    return sorted(fused.items(), key=lambda row: (-row[1], row[0]))[:k]

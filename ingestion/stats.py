"""BM25 corpus statistics per index version, over exactly the chunks queries can see, and
each chunk's `searchable` mark that the channels and the HNSW indexes filter on.

A document's chunks count once it becomes searchable in a version (its IndexedDocument row
is created) and stop counting when that row goes (re-ingestion, deletion, a pruned
version). Signals on IndexedDocument keep this true whichever path creates or deletes the
row, cascades included: Django sends every pre_delete before it deletes anything, so the
chunks are still there to be counted out. When the deletion starts at the version or its
collection, nothing is counted out: the statistics go with the version. Writes are single
upserts, safe with several workers on one version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import QuerySet

# Each term's highest count and count / length only grow (counting out leaves them as they
# are): upper bounds of its BM25 contribution, which is all the lexical channel needs.
ADD_TERMS = """
INSERT INTO knowledge_termstat (index_version_id, term, df, max_tf, max_tf_share)
SELECT c.index_version_id, t.term, %(sign)s * count(*), max(t.tf::int), max(t.tf::float / greatest(c.length, 1))
FROM knowledge_chunk c CROSS JOIN LATERAL jsonb_each_text(c.terms) AS t(term, tf)
WHERE c.index_version_id = %(version)s AND c.document_id = ANY(%(documents)s)
GROUP BY c.index_version_id, t.term
ON CONFLICT (index_version_id, term) DO UPDATE SET
    df = knowledge_termstat.df + EXCLUDED.df,
    max_tf = greatest(knowledge_termstat.max_tf, EXCLUDED.max_tf),
    max_tf_share = greatest(knowledge_termstat.max_tf_share, EXCLUDED.max_tf_share)
"""
ADD_TOTALS = """
UPDATE knowledge_indexversion v
SET chunk_count = v.chunk_count + %(sign)s * s.n, total_length = v.total_length + %(sign)s * s.length
FROM (
    SELECT count(*) AS n, coalesce(sum(length), 0) AS length FROM knowledge_chunk
    WHERE index_version_id = %(version)s AND document_id = ANY(%(documents)s)
) s
WHERE v.id = %(version)s
"""

DROP_UNUSED = """
DELETE FROM knowledge_termstat
WHERE index_version_id = %(version)s AND df <= 0 AND term IN (
    SELECT jsonb_object_keys(terms) FROM knowledge_chunk
    WHERE index_version_id = %(version)s AND document_id = ANY(%(documents)s)
)
"""


MARK = """
UPDATE knowledge_chunk SET searchable = %(searchable)s
WHERE index_version_id = %(version)s AND document_id = ANY(%(documents)s) AND searchable <> %(searchable)s
"""


def add_document(version_id: int, document_id: int, sign: int = 1) -> None:
    """Count a document's chunks in (sign 1) or out of (sign -1) the version's statistics,
    and mark them searchable or not."""
    add_documents(version_id, [document_id], sign)


def add_documents(version_id: int, document_ids: Sequence[int], sign: int = 1) -> None:
    """The same for several documents of one version in four statements (a bulk load)."""
    params: dict[str, Any] = {
        "sign": sign,
        "version": version_id,
        "documents": list(document_ids),
        "searchable": sign > 0,
    }
    with connection.cursor() as cursor:
        cursor.execute(MARK, params)
        cursor.execute(ADD_TERMS, params)
        cursor.execute(ADD_TOTALS, params)
        if sign < 0:
            cursor.execute(DROP_UNUSED, params)


def on_indexed(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        add_document(instance.index_version_id, instance.document_id, 1)


def on_unindexed(sender: Any, instance: Any, origin: Any = None, **kwargs: Any) -> None:
    if not _deletes_whole_versions(origin):
        add_document(instance.index_version_id, instance.document_id, -1)


def _deletes_whole_versions(origin: Any) -> bool:
    """Whether the deletion started at index versions or collections: their statistics and
    chunks go with them (cascade), so counting each document out first is wasted work (it
    took minutes for 100k chunks). Any other origin (a document, a user) counts out."""
    from knowledge.models import Collection, IndexVersion

    model = origin.model if isinstance(origin, QuerySet) else type(origin)
    return model in (IndexVersion, Collection)


def connect() -> None:
    from django.db.models.signals import post_save, pre_delete

    from knowledge.models import IndexedDocument

    post_save.connect(on_indexed, sender=IndexedDocument, dispatch_uid="bm25-stats-add")
    pre_delete.connect(on_unindexed, sender=IndexedDocument, dispatch_uid="bm25-stats-remove")

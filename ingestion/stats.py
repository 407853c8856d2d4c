"""BM25 corpus statistics per index version, over exactly the chunks queries can see, and
each chunk's `searchable` mark that the channels and the HNSW indexes filter on.

A chunk counts while it is searchable, and every write here marks and counts in one
statement only the chunks whose mark changes, so nothing is counted twice. While a document
is indexed, its pages become searchable batch by batch as they are written (add_pages); it
is whole once its IndexedDocument row is created, which counts in whatever is left. Its
chunks stop counting when that row goes (re-ingestion, a pruned version) or the document
does, even half-indexed. Signals on IndexedDocument and Document keep this true whichever
path deletes them, cascades included: Django sends every pre_delete before it deletes
anything, so the chunks are still there to be counted out. When the deletion starts at the
version or its collection, nothing is counted out: the statistics go with the version.
Writes are single upserts, safe with several workers on one version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import QuerySet

# One statement per call: mark the chunks that change state, and count exactly those in (sign
# 1) or out (sign -1), so that marking a page twice, or a document after some of its pages,
# counts nothing twice. Each term's highest count and count / length only grow (counting out
# leaves them as they are): upper bounds of its BM25 contribution, which is all the lexical
# channel needs. Terms are upserted in order, so that two workers never wait on each other
# in opposite orders.
COUNT = """
WITH changed AS (
    UPDATE knowledge_chunk SET searchable = %(searchable)s
    WHERE index_version_id = %(version)s AND document_id = ANY(%(documents)s){pages}
      AND searchable <> %(searchable)s
    RETURNING terms, length
), counted AS (
    INSERT INTO knowledge_termstat (index_version_id, term, df, max_tf, max_tf_share)
    SELECT %(version)s, t.term, %(sign)s * count(*), max(t.tf::int), max(t.tf::float / greatest(c.length, 1))
    FROM changed c CROSS JOIN LATERAL jsonb_each_text(c.terms) AS t(term, tf)
    GROUP BY t.term ORDER BY t.term
    ON CONFLICT (index_version_id, term) DO UPDATE SET
        df = knowledge_termstat.df + EXCLUDED.df,
        max_tf = greatest(knowledge_termstat.max_tf, EXCLUDED.max_tf),
        max_tf_share = greatest(knowledge_termstat.max_tf_share, EXCLUDED.max_tf_share)
)
UPDATE knowledge_indexversion v
SET chunk_count = v.chunk_count + %(sign)s * s.n, total_length = v.total_length + %(sign)s * s.length
FROM (SELECT count(*) AS n, coalesce(sum(length), 0) AS length FROM changed) s
WHERE v.id = %(version)s AND s.n > 0
"""

DROP_UNUSED = """
DELETE FROM knowledge_termstat
WHERE index_version_id = %(version)s AND df <= 0 AND term IN (
    SELECT jsonb_object_keys(terms) FROM knowledge_chunk
    WHERE index_version_id = %(version)s AND document_id = ANY(%(documents)s)
)
"""


def add_document(version_id: int, document_id: int, sign: int = 1) -> None:
    """Count a document's chunks in (sign 1) or out of (sign -1) the version's statistics,
    and mark them searchable or not."""
    add_documents(version_id, [document_id], sign)


def add_documents(version_id: int, document_ids: Sequence[int], sign: int = 1) -> None:
    """The same for several documents of one version in one statement (a bulk load)."""
    _count(version_id, document_ids, sign)


def add_pages(version_id: int, document_id: int, page_ids: Sequence[int]) -> None:
    """Make some pages of a document searchable in a version before the rest of it is
    indexed: a long document answers about its first pages while its last ones are parsed.
    Only pages valid in the version (IndexedPage matches their content) may be added."""
    if page_ids:
        _count(version_id, [document_id], 1, page_ids)


def _count(version_id: int, document_ids: Sequence[int], sign: int, page_ids: Sequence[int] | None = None) -> None:
    params: dict[str, Any] = {
        "sign": sign,
        "version": version_id,
        "documents": list(document_ids),
        "pages": list(page_ids or ()),
        "searchable": sign > 0,
    }
    with connection.cursor() as cursor:
        cursor.execute(COUNT.format(pages=" AND page_id = ANY(%(pages)s)" if page_ids is not None else ""), params)
        if sign < 0:
            cursor.execute(DROP_UNUSED, params)


def on_indexed(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        add_document(instance.index_version_id, instance.document_id, 1)


def on_unindexed(sender: Any, instance: Any, origin: Any = None, **kwargs: Any) -> None:
    if not _deletes_whole_versions(origin):
        add_document(instance.index_version_id, instance.document_id, -1)


def on_document_deleted(sender: Any, instance: Any, origin: Any = None, **kwargs: Any) -> None:
    """A document deleted while it was indexed has searchable pages and no IndexedDocument."""
    from knowledge.models import Chunk

    if _deletes_whole_versions(origin):
        return
    versions = Chunk.objects.filter(document_id=instance.pk, searchable=True).values_list("index_version_id", flat=True)
    for version_id in set(versions):
        add_document(version_id, instance.pk, -1)


def withdraw_unfinished(document_id: int) -> None:
    """Take a document's written pages out of search in every version where it is not whole:
    its run failed or was cancelled half-way."""
    from knowledge.models import Chunk, IndexedDocument

    whole = IndexedDocument.objects.filter(document_id=document_id).values("index_version_id")
    versions = (
        Chunk.objects.filter(document_id=document_id, searchable=True)
        .exclude(index_version_id__in=whole)
        .values_list("index_version_id", flat=True)
    )
    for version_id in set(versions):
        add_document(version_id, document_id, -1)


def _deletes_whole_versions(origin: Any) -> bool:
    """Whether the deletion started at index versions or collections: their statistics and
    chunks go with them (cascade), so counting each document out first is wasted work (it
    took minutes for 100k chunks). Any other origin (a document, a user) counts out."""
    from knowledge.models import Collection, IndexVersion

    model = origin.model if isinstance(origin, QuerySet) else type(origin)
    return model in (IndexVersion, Collection)


def connect() -> None:
    from django.db.models.signals import post_save, pre_delete

    from knowledge.models import Document, IndexedDocument

    post_save.connect(on_indexed, sender=IndexedDocument, dispatch_uid="bm25-stats-add")
    pre_delete.connect(on_unindexed, sender=IndexedDocument, dispatch_uid="bm25-stats-remove")
    pre_delete.connect(on_document_deleted, sender=Document, dispatch_uid="bm25-stats-remove-document")

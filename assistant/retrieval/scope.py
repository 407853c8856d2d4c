"""What a search may read: the active index versions of the collections the user may see
(and the request names), found in SQL once per search and embedded by every channel in its
own WHERE clause. Nothing is filtered in Python after ranking."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from knowledge.models import Collection, IndexVersion
from portal.typing import AnyUser


@dataclass(frozen=True)
class Scope:
    sql: str  # SELECT active_version_id …: the versions below, as SQL that channels embed
    params: tuple[Any, ...]
    versions: tuple[IndexVersion, ...]  # the same versions, loaded, for dims and embedder ids


def scope_for(user: AnyUser, collection_ids: Sequence[int] | None = None) -> Scope:
    collections = Collection.objects.visible_to(user)
    if collection_ids is not None:
        collections = collections.filter(pk__in=list(collection_ids))
    return scope_of(collections)


def scope_of(collections: QuerySet[Collection]) -> Scope:
    """The scope of collections the caller has already been authorised for (the admin's
    test search, where a superuser may test any collection)."""
    # No ORDER BY: Collection's default ordering would sort a subquery that is only matched.
    subquery = collections.filter(active_version__isnull=False).order_by().values("active_version_id")
    # With their collections: the answer's first event names them (no query there: it is sent
    # from the websocket's event loop).
    versions = tuple(IndexVersion.objects.filter(pk__in=subquery).select_related("collection").order_by("pk"))
    # The channels read the versions active when the scope was made, not whatever is active
    # when each of their statements runs: a reindex flipping between two statements would
    # otherwise leave them reading different versions, and _load keeping none of either.
    return Scope(sql=PINNED, params=([version.pk for version in versions],), versions=versions)


PINNED = "SELECT unnest(%s::bigint[]) AS active_version_id"

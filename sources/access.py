"""One permission-checked fetch of a source. Sources hold addresses and credentials, so only
the people who manage the collection see them: someone who cannot see the collection gets a
404 (nobody learns the source exists), someone who sees it without managing it a 403, as on
every manage-only route (knowledge.access)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import QuerySet

from knowledge.access import access_collection, get_or_404
from knowledge.models import Collection
from sources.models import Source

if TYPE_CHECKING:
    from portal.typing import AnyUser


def access_source(user: AnyUser, source_id: int | str) -> Source:
    """The source, when `user` manages its collection (404 unseen, 403 seen but not managed)."""
    visible = Collection.objects.visible_to(user).values("pk")
    source: Source = get_or_404(Source.objects.filter(collection__in=visible).select_related("collection"), source_id)
    access_collection(user, source.collection_id, manage=True)
    return source


def manageable_sources(user: AnyUser) -> QuerySet[Source]:
    """Every source whose collection `user` manages (the admin's list for staff)."""
    return Source.objects.filter(collection__in=Collection.objects.manageable_by(user).values("pk"))

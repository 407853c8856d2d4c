"""Index versions: a reindex builds a new version in the background while the active one
serves; when it covers everything the active one serves, it is evaluated on the collection's
golden questions where it has some (the gate, quality/gate.py) and flips (one UPDATE) or is
held back; rollback flips back to a kept version; retired versions beyond
PORTAL_KEEP_VERSIONS are removed."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.log import record
from audit.models import Action
from ingestion.index import create_version, image_embedder, version_config
from ingestion.models import IngestionRun
from ingestion.runs import enqueue_run
from knowledge import hooks
from knowledge.events import send_collection_event_on_commit
from knowledge.models import Collection, Document, IndexedDocument, IndexVersion
from providers.base import TextEmbedder


def start_reindex(collection: Collection, embedder: TextEmbedder, *, enqueue: bool = True) -> IndexVersion:
    """A new version with the current embedder and chunk settings, and a run per document;
    a version held back by its evaluation gives way to it."""
    with transaction.atomic():
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        if IndexVersion.objects.filter(collection=locked, status=IndexVersion.Status.BUILDING).exists():
            raise ValidationError(_("A new index version is already being built for this collection."))
        for held in IndexVersion.objects.filter(collection=locked, status=IndexVersion.Status.HELD):
            delete_version(held.pk)
        version = create_version(locked, embedder, status=IndexVersion.Status.BUILDING)
        record(Action.INDEX_REINDEX, version, label=_version_label(version), **locked.audit_scope())
        # A document whose run is still queued gets no second one: that run reads where
        # content goes when it starts, this version included, and two runs of one document
        # at once would write the same pages (indexed_page_unique) and count its chunks twice.
        # One already running may have read it before this version existed: it gets its
        # reindex run, which waits for it (ingestion.tasks.ingest_document).
        live = IngestionRun.objects.filter(
            collection=locked,
            kind__in=(IngestionRun.Kind.INGEST, IngestionRun.Kind.REINDEX),
            status=IngestionRun.Status.QUEUED,
            part_of__isnull=True,
            cancel_requested=False,
        ).values("document_id")
        waiting = Document.objects.filter(collection=locked).exclude(status=Document.Status.FAILED)
        for document in waiting.exclude(pk__in=live):
            run = IngestionRun.objects.create(
                collection=locked, document=document, index_version=version, kind=IngestionRun.Kind.REINDEX
            )
            if enqueue:
                enqueue_run(run)
    complete_build_if_done(version)  # an empty collection is built at once
    return version


def build_progress(version_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """(runs ended, runs in all) of each of these versions being built: the collection page's
    progress bars (registered in knowledge.hooks by ingestion/apps.py)."""
    ended = [IngestionRun.Status.SUCCEEDED, IngestionRun.Status.FAILED, IngestionRun.Status.CANCELLED]
    return {
        row["index_version_id"]: (row["done"], row["total"])
        for row in IngestionRun.objects.filter(index_version_id__in=version_ids)
        .values("index_version_id")
        .annotate(total=Count("pk"), done=Count("pk", filter=Q(status__in=ended)))
    }


def reindex_outdated(embedder: TextEmbedder) -> list[IndexVersion]:
    """A new version for each collection whose active one was built with another embedder or
    other chunking or parsing settings than it would get now; the old one serves meanwhile."""
    started = []
    outdated = Collection.objects.filter(active_version__isnull=False).exclude(
        index_versions__status=IndexVersion.Status.BUILDING
    )
    pictures = image_embedder()
    for collection in outdated.select_related("active_version"):
        active = collection.active_version
        assert active is not None
        wanted = (embedder.model_id, pictures.model_id if pictures else "", version_config(collection))
        held = IndexVersion.objects.filter(collection=collection, status=IndexVersion.Status.HELD)
        if any(_made_as(version) == wanted for version in [active, *held]):
            continue  # current, or built as it would be now and held back by its evaluation
        try:
            started.append(start_reindex(collection, embedder))
        except ValidationError:
            continue  # a build started meanwhile
    return started


def _made_as(version: IndexVersion) -> tuple[str, str, dict[str, object]]:
    return version.embedder_id, version.image_embedder_id, version.config


def complete_build_if_done(version: IndexVersion) -> bool:
    """Once `version` serves every document the active version serves, it is built: it flips
    now, or the gate (knowledge.hooks) evaluates it first. True when it flipped here."""
    collection = version.collection
    served = IndexedDocument.objects.filter(index_version_id=collection.active_version_id)
    covered = IndexedDocument.objects.filter(index_version=version)
    missing = served.exclude(document_id__in=covered.values("document_id"))
    if missing.exists():
        return False
    # Several runs may finish the last documents at once: the one that marks it built goes on.
    if not IndexVersion.objects.filter(pk=version.pk, built_at__isnull=True).update(built_at=timezone.now()):
        return False
    if hooks.gate_holds(version):
        return False
    flip(collection, version)
    return True


def flip(collection: Collection, version: IndexVersion, *, action: Action = Action.INDEX_FLIP) -> None:
    """Make `version` the one that answers queries, in one transaction (recorded as `action`:
    a finished build's flip, a person's activation or a rollback)."""
    if version.collection_id != collection.pk:
        raise ValidationError(_("That index version belongs to another collection."))
    with transaction.atomic():
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        previous = locked.active_version_id
        if previous == version.pk:
            return
        Collection.objects.filter(pk=locked.pk).update(active_version=version)
        IndexVersion.objects.filter(pk=version.pk).update(
            status=IndexVersion.Status.ACTIVE, activated_at=timezone.now()
        )
        before = None
        if previous is not None:
            IndexVersion.objects.filter(pk=previous).update(status=IndexVersion.Status.RETIRED)
            before = IndexVersion.objects.filter(pk=previous).values_list("number", flat=True).first()
        changes = {"active_version": (before, version.number)}
        record(action, version, label=_version_label(version), changes=changes, **locked.audit_scope())
        send_collection_event_on_commit(collection.pk, {"type": "index.flipped", "version": version.number})
    collection.active_version_id = version.pk
    prune(collection)


def rollback(collection: Collection) -> IndexVersion:
    """Back to the most recent retired version (kept with all its chunks, so it is instant)."""
    previous = (
        IndexVersion.objects.filter(collection=collection, status=IndexVersion.Status.RETIRED)
        .order_by("-activated_at", "-number")
        .first()
    )
    if previous is None:
        raise ValidationError(_("There is no earlier index version to go back to."))
    flip(collection, previous, action=Action.INDEX_ROLLBACK)
    return previous


def _version_label(version: IndexVersion) -> str:
    return f"{version.collection} v{version.number}"


def prune(collection: Collection, keep: int | None = None) -> list[int]:
    """Delete retired versions beyond the newest `keep` (PORTAL_KEEP_VERSIONS), with their chunks."""
    keep = settings.KEEP_VERSIONS if keep is None else keep
    retired = IndexVersion.objects.filter(collection=collection, status=IndexVersion.Status.RETIRED)
    # The most recently in service are kept: a rollback's target is the last one retired.
    doomed = list(retired.order_by("-activated_at", "-number").values_list("pk", flat=True)[keep:])
    for pk in doomed:
        delete_version(pk)
    return doomed


def delete_version(pk: int) -> None:
    """A version that serves nobody, with its chunks and its own vector indexes."""
    with transaction.atomic():
        IndexVersion.objects.filter(pk=pk).delete()  # chunks, indexed pages and documents cascade
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS chunk_hnsw_v{int(pk)}")
            cursor.execute(f"DROP INDEX IF EXISTS chunk_image_hnsw_v{int(pk)}")

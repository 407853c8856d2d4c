"""Writes that start or stop ingestion: adding or replacing a document (a file or a video
link), syncing a server folder, ingesting one again, cancelling a run, and a collection's
index versions (reindex, roll back, activate one). The pages, the API, the admin and the
commands call these; the caller checks permission first (knowledge.access: `manage=True` for
the index versions). The mechanics are versions.py's and pipeline.py's. Knowledge's own
writes (teams, collections, tokens, deleting a document) are in knowledge/actions.py, which
may not start ingestion: it is the layer below.

`check_*` validates and raises ValidationError with a readable message; `do_*` writes."""

from __future__ import annotations

import errno
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile, File
from django.core.validators import URLValidator
from django.db import transaction
from django.utils.translation import gettext as _

from audit.log import record
from audit.models import Action
from ingestion import versions
from ingestion.models import IngestionRun
from ingestion.parsers.base import ParseError
from ingestion.parsers.formats import check_indexable, parser_for
from ingestion.parsers.guard import guarded
from ingestion.runs import enqueue_run, new_ingest_run
from ingestion.sniff import VIDEO_LINK, name_mismatch, sniff_file
from knowledge.actions import check_upload_size, clean_document_path, file_sha256
from knowledge.models import Collection, Document, IndexVersion
from providers import registry

VIDEO_LINK_URL_MAX = 2000
VIDEO_LINK_TITLE_MAX = 150  # the document is named after it, and names stop at 200 characters
VIDEO_LINK_DESCRIPTION_MAX = 5000


def do_add_document(
    collection: Collection, name: str, data: bytes | File, *, enqueue: bool = True, mime: str | None = None
) -> tuple[Document, IngestionRun | None]:
    """Store a file as a document of the collection (replacing one at the same path) and queue
    its ingestion (`enqueue=False`: the caller runs it); an identical file at the same path
    changes nothing and queues no run. `mime` is for content that is no file type of its own
    (a video link); otherwise the type is sniffed from the content.

    `data` may be an uploaded or opened file: it is hashed, sniffed and stored in chunks, so
    a 200 MB upload never sits in memory whole."""
    rel_path = clean_document_path(name)
    content = data if isinstance(data, File) else ContentFile(data)
    check_upload_size(rel_path, content.size)
    sha256 = file_sha256(content)
    existing = Document.objects.filter(collection=collection, rel_path=rel_path).first()
    if existing is not None and existing.sha256 == sha256 and existing.status != Document.Status.FAILED:
        return existing, None
    try:
        mime = mime or _sniffed(content, rel_path)
        check_indexable(mime, rel_path)
    except ParseError as exc:
        raise ValidationError(f"{rel_path}: {exc}") from None
    if existing is not None and existing.status != Document.Status.FAILED:
        check_replacement(rel_path, content, mime)
    with transaction.atomic():
        document = existing or Document(collection=collection, rel_path=rel_path)
        document.name, document.sha256, document.size, document.mime = (
            rel_path.rsplit("/", 1)[-1],
            sha256,
            content.size,
            mime,
        )
        document.status, document.error = Document.Status.PENDING, ""
        content.seek(0)
        try:
            document.file.save(rel_path.rsplit("/", 1)[-1], content, save=False)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise ValidationError(
                _("“%(name)s” was not stored: the server's disk is full. Send it again once space is freed.")
                % {"name": rel_path}
            ) from None
        document.save()
        action = Action.DOCUMENT_REPLACE if existing is not None else Action.DOCUMENT_UPLOAD
        changes = {"sha256": (existing.sha256 if existing else None, sha256)}
        record(action, document, label=rel_path, changes=changes, **collection.audit_scope())
        run = IngestionRun.objects.create(collection=collection, document=document, kind=IngestionRun.Kind.INGEST)
        if enqueue:
            enqueue_run(run)
    return document, run


def _sniffed(content: File, rel_path: str) -> str:
    """The content's type; ValidationError when the name's extension announces another one
    (a web page named .pdf, a program named .docx): the name would mislead whoever opens it."""
    mime = sniff_file(content, rel_path)
    if wrong := name_mismatch(content, mime, rel_path):
        raise ValidationError(wrong)
    return mime


@dataclass(frozen=True)
class Added:
    """One uploaded file: its document and run, or why it was refused."""

    name: str
    document: Document | None = None
    run: IngestionRun | None = None  # None for a refused file, or an identical one (unchanged)
    error: str = ""


def do_add_documents(collection: Collection, uploads: Sequence[File]) -> list[Added]:
    """Each uploaded file added as do_add_document does it, in order; a file that cannot be
    stored is refused alone, with its reason, and the others are still added."""
    added = []
    for upload in uploads:
        name = upload.name or "upload"
        try:
            document, run = do_add_document(collection, name, upload)
        except ValidationError as exc:
            added.append(Added(name, error=" ".join(exc.messages)))
            continue
        added.append(Added(name, document, run))
    return added


def check_replacement(rel_path: str, content: File, mime: str) -> None:
    """Refuse a new version of a stored document that its parser cannot open: storing it would
    make the good version unsearchable and then fail, and nothing stored may be lost that way.
    (A new document is stored as it is, and its run says why it failed.)"""
    path = getattr(content, "temporary_file_path", None)  # a large upload is on disk already
    try:
        if path is not None:
            guarded(parser_for(mime)).check(Path(path()))
            return
        with tempfile.TemporaryDirectory(prefix="portal-check-") as folder:
            copy = Path(folder) / ("new" + PurePosixPath(rel_path).suffix[-10:])
            with copy.open("wb") as handle:
                content.seek(0)
                for piece in content.chunks():
                    handle.write(piece)
            guarded(parser_for(mime)).check(copy)
    except ParseError as exc:
        raise ValidationError(
            _("“%(name)s” was not stored: %(error)s The version stored before is kept.")
            % {"name": rel_path, "error": exc}
        ) from None


def do_add_video_link(
    collection: Collection, url: str, title: str, description: str = "", *, enqueue: bool = True
) -> tuple[Document, IngestionRun | None]:
    """A link to a video kept elsewhere, stored as a small JSON document named after its
    title (adding the same title again replaces it) and ingested like a file."""
    url, title, description = check_video_link(url, title, description)
    data = json.dumps({"url": url, "title": title, "description": description}, ensure_ascii=False).encode()
    name = title.replace("/", "-").replace("\\", "-") + ".link"
    return do_add_document(collection, name, data, enqueue=enqueue, mime=VIDEO_LINK)


def check_video_link(url: str, title: str, description: str) -> tuple[str, str, str]:
    """The link's URL, title and description, tidied; ValidationError when one is unusable."""
    url, title, description = (url or "").strip(), " ".join((title or "").split()), (description or "").strip()
    if len(url) > VIDEO_LINK_URL_MAX:
        raise ValidationError(_("The link can be at most %(limit)s characters long.") % {"limit": VIDEO_LINK_URL_MAX})
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise ValidationError(_("Enter the video's web address, starting with http:// or https://.")) from None
    if not title:
        raise ValidationError(_("A title is required."))
    if len(title) > VIDEO_LINK_TITLE_MAX:
        raise ValidationError(_("Titles can be at most %(limit)s characters long.") % {"limit": VIDEO_LINK_TITLE_MAX})
    if len(description) > VIDEO_LINK_DESCRIPTION_MAX:
        raise ValidationError(
            _("Descriptions can be at most %(limit)s characters long.") % {"limit": VIDEO_LINK_DESCRIPTION_MAX}
        )
    return url, title, description


class AlreadyIndexingError(Exception):
    """The document is already queued or being indexed (`run`), so it was not queued again."""

    def __init__(self, run: IngestionRun) -> None:
        super().__init__(run.pk)
        self.run = run


def do_rerun_document(document: Document, *, enqueue: bool = True, if_idle: bool = False) -> IngestionRun:
    """Ingest the document again (after a failure or a killed worker): pages still valid are
    kept, the rest redone. `if_idle` (the page's button, the API): a document already queued or
    being indexed is not queued twice, AlreadyIndexingError names its run; the admin and operators
    may start another (a run whose worker died is also queued again by beat: common.runs)."""
    with transaction.atomic():
        if if_idle:
            # Two clicks at once wait for each other here, so the second finds the first's run.
            Document.objects.select_for_update(no_key=True).filter(pk=document.pk).exists()
            busy = active_ingest_run(document)
            if busy is not None:
                raise AlreadyIndexingError(busy)
        record(Action.DOCUMENT_RERUN, document, label=document.rel_path, **document.collection.audit_scope())
        return new_ingest_run(document, enqueue=enqueue)


def active_ingest_run(document: Document) -> IngestionRun | None:
    """The document's queued or running ingestion that was not asked to stop, if any (for a
    split document its first run, while any of its parts still works)."""
    active = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
    runs = IngestionRun.objects.filter(
        document=document, kind=IngestionRun.Kind.INGEST, status__in=active, cancel_requested=False
    )
    running = runs.select_related("part_of").order_by("created_at", "pk").first()
    if running is None:
        return None
    return running.part_of or running


def do_cancel_run(run: IngestionRun) -> bool:
    """Ask a queued or running run to stop between pages; False when it has already ended."""
    active = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
    asked = IngestionRun.objects.filter(pk=run.pk, status__in=active).update(cancel_requested=True) == 1
    # The parts of a split document stop with it (a part's own cancel stops that part only).
    IngestionRun.objects.filter(part_of=run, status__in=active).update(cancel_requested=True)
    return asked


# Index versions


def do_reindex(collection: Collection, *, enqueue: bool = True) -> IndexVersion:
    """Build a new index version with the current embedder and settings, in the background;
    the active one keeps answering until the new one covers everything, then it flips."""
    return versions.start_reindex(collection, registry.text_embedder(), enqueue=enqueue)


def do_roll_back(collection: Collection) -> IndexVersion:
    """Back to the most recent retired version, at once (its chunks were kept)."""
    return versions.rollback(collection)


def do_activate_version(version: IndexVersion) -> IndexVersion:
    """Make a kept version the active one; one still being built becomes active by itself, one
    held back by its evaluation is flipped anyway (recorded as such)."""
    if version.status == IndexVersion.Status.BUILDING:
        raise ValidationError(_("That version is still being built; it becomes active by itself when done."))
    anyway = version.status == IndexVersion.Status.HELD
    versions.flip(version.collection, version, action=Action.INDEX_FLIP_ANYWAY if anyway else Action.INDEX_ACTIVATE)
    version.refresh_from_db()
    return version

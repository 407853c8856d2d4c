"""Writes that start or stop ingestion: adding or replacing a document (a file or a video
link), ingesting one again, cancelling a run. The pages, the API, the admin and the commands
call these; knowledge's own writes (teams, collections, tokens, deleting a document) are in
knowledge/actions.py, which may not start ingestion: it is the layer below.

`check_*` validates and raises ValidationError with a readable message; `do_*` writes."""

from __future__ import annotations

import errno
import json
import tempfile
from pathlib import Path, PurePosixPath

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile, File
from django.core.validators import URLValidator
from django.db import transaction
from django.utils.translation import gettext as _

from ingestion.models import IngestionRun
from ingestion.parsers.base import ParseError, parser_for
from ingestion.sniff import VIDEO_LINK, check_indexable, sniff_file
from knowledge.actions import check_upload_size, clean_document_path, file_sha256
from knowledge.models import Collection, Document

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
        mime = mime or sniff_file(content, rel_path)
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
        run = IngestionRun.objects.create(collection=collection, document=document, kind=IngestionRun.Kind.INGEST)
        if enqueue:
            enqueue_run(run)
    return document, run


def check_replacement(rel_path: str, content: File, mime: str) -> None:
    """Refuse a new version of a stored document that its parser cannot open: storing it would
    make the good version unsearchable and then fail, and nothing stored may be lost that way.
    (A new document is stored as it is, and its run says why it failed.)"""
    path = getattr(content, "temporary_file_path", None)  # a large upload is on disk already
    try:
        if path is not None:
            parser_for(mime).check(Path(path()))
            return
        with tempfile.TemporaryDirectory(prefix="portal-check-") as folder:
            copy = Path(folder) / ("new" + PurePosixPath(rel_path).suffix[-10:])
            with copy.open("wb") as handle:
                content.seek(0)
                for piece in content.chunks():
                    handle.write(piece)
            parser_for(mime).check(copy)
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


def enqueue_run(run: IngestionRun) -> None:
    """Queue the run's task once the transaction that created it commits."""
    from ingestion.tasks import ingest_document

    transaction.on_commit(lambda: ingest_document.delay(run.pk))


def do_rerun_document(document: Document, *, enqueue: bool = True) -> IngestionRun:
    """Ingest the document again (after a failure or a killed worker): pages still valid are
    kept, the rest redone."""
    with transaction.atomic():
        run = IngestionRun.objects.create(
            collection=document.collection, document=document, kind=IngestionRun.Kind.INGEST
        )
        if enqueue:
            enqueue_run(run)
    return run


def do_cancel_run(run: IngestionRun) -> bool:
    """Ask a queued or running run to stop between pages; False when it has already ended."""
    active = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
    return IngestionRun.objects.filter(pk=run.pk, status__in=active).update(cancel_requested=True) == 1

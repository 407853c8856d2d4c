"""Writes that touch several rows or have side effects (Zulip's `zerver/actions/`).

`check_*` validates and raises ValidationError with a readable message; `do_*` writes.
Views, serializers, admin and API call these and never repeat their rules.
"""

from __future__ import annotations

import errno
import hashlib
import json
import tempfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import ContentFile, File
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from ingestion.models import IngestionRun
from knowledge.models import ApiToken, Collection, Document, Membership, PageImage, Role, Team
from knowledge.models.tokens import hash_key, new_key

if TYPE_CHECKING:
    from portal.models import User

VIDEO_LINK_URL_MAX = 2000
VIDEO_LINK_TITLE_MAX = 150  # the document is named after it, and names stop at 200 characters
VIDEO_LINK_DESCRIPTION_MAX = 5000


# Teams and members


def do_create_team(user: User, name: str, description: str = "") -> Team:
    """A new team, with its creator as its first admin."""
    name = _clean_name(name)
    if Team.objects.filter(name__iexact=name).exists():
        raise ValidationError(_("A team named “%(name)s” already exists.") % {"name": name})
    with transaction.atomic():
        team = Team.objects.create(name=name, description=description)
        Membership.objects.create(team=team, user=user, role=Role.ADMIN)
    return team


def check_member_email(email: str) -> User:
    user = get_user_model().objects.filter(email__iexact=email.strip(), is_active=True).first()
    if user is None:
        raise ValidationError(_("No active user has the email address “%(email)s”.") % {"email": email})
    return user


def do_add_member(team: Team, user: User, role: Role) -> Membership:
    membership, created = Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
    if not created:
        raise ValidationError(_("%(user)s is already a member of this team.") % {"user": user})
    return membership


def do_change_role(membership: Membership, role: Role) -> Membership:
    with transaction.atomic():
        _lock_team(membership.team_id)
        if membership.role == Role.ADMIN and role != Role.ADMIN:
            _check_not_last_admin(membership)
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def do_remove_member(membership: Membership) -> None:
    with transaction.atomic():
        _lock_team(membership.team_id)
        if membership.role == Role.ADMIN:
            _check_not_last_admin(membership)
        membership.delete()


def _lock_team(team_id: int) -> None:
    # Two admins demoting each other at once must not leave the team without one.
    Team.objects.select_for_update().filter(pk=team_id).first()


def _check_not_last_admin(membership: Membership) -> None:
    others = Membership.objects.filter(team_id=membership.team_id, role=Role.ADMIN).exclude(pk=membership.pk)
    if not others.exists():
        raise ValidationError(_("A team needs at least one admin: make someone else admin first."))


# Collections


def do_create_collection(user: User, name: str, *, team: Team | None = None, description: str = "") -> Collection:
    name = _clean_name(name)
    if team is not None and not Team.objects.with_role_at_least(user, Role.EDITOR).filter(pk=team.pk).exists():
        raise PermissionDenied(_("Only editors and admins of the team can create its collections."))
    owner_user = user if team is None else None
    try:
        with transaction.atomic():
            return Collection.objects.create(
                name=name, description=description, created_by=user, owner_user=owner_user, owner_team=team
            )
    except IntegrityError:
        raise ValidationError(_("A collection named “%(name)s” already exists here.") % {"name": name}) from None


def do_rename_collection(collection: Collection, name: str, description: str | None = None) -> Collection:
    collection.name = _clean_name(name)
    fields = ["name", "updated_at"]
    if description is not None:
        collection.description = description
        fields.append("description")
    try:
        with transaction.atomic():
            collection.save(update_fields=fields)
    except IntegrityError:
        raise ValidationError(
            _("A collection named “%(name)s” already exists here.") % {"name": collection.name}
        ) from None
    return collection


def do_delete_collection(collection: Collection) -> None:
    collection.delete()


# API tokens


def do_create_token(user: User, name: str) -> tuple[ApiToken, str]:
    """The new token and its key, which is shown once and never stored."""
    key = new_key()
    token = ApiToken.objects.create(user=user, name=_clean_name(name), prefix=key[:10], key_hash=hash_key(key))
    return token, key


def do_revoke_token(token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def _clean_name(name: str) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError(_("A name is required."))
    if len(name) > 100:
        raise ValidationError(_("Names can be at most 100 characters long."))
    return name


# Documents


def clean_document_path(name: str) -> str:
    """A display path safe to store: no control characters, no `..` or absolute parts,
    each part at most 200 characters. Unicode names are kept as they are."""
    name = "".join(char for char in name if char.isprintable() or char == "/").replace("\\", "/")
    parts = [part.strip() for part in name.split("/") if part.strip() not in ("", ".", "..")]
    parts = [_shorten(part, 200) for part in parts]
    if not parts:
        raise ValidationError(_("The file needs a name."))
    return "/".join(parts)[-1024:]


def _shorten(part: str, limit: int) -> str:
    """At most `limit` characters, keeping the extension (it tells Markdown from text)."""
    if len(part) <= limit:
        return part
    stem, dot, extension = part.rpartition(".")
    if dot and stem and len(extension) <= 10:
        return stem[: limit - len(extension) - 1].rstrip() + "." + extension
    return part[:limit]


def do_add_document(
    collection: Collection, name: str, data: bytes | File, *, enqueue: bool = True, mime: str | None = None
) -> tuple[Document, IngestionRun | None]:
    """Store a file as a document of the collection (replacing one at the same path) and queue
    its ingestion (`enqueue=False`: the caller runs it); an identical file at the same path
    changes nothing and queues no run. `mime` is for content that is no file type of its own
    (a video link); otherwise the type is sniffed from the content.

    `data` may be an uploaded or opened file: it is hashed, sniffed and stored in chunks, so
    a 200 MB upload never sits in memory whole."""
    from ingestion.parsers.base import ParseError
    from ingestion.sniff import check_indexable, sniff_file

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
    from ingestion.parsers.base import ParseError, parser_for

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


def check_upload_size(name: str, size: int) -> None:
    """Refuse a file over PORTAL_MAX_UPLOAD_MB before reading it."""
    from django.conf import settings

    if size > settings.MAX_UPLOAD_MB * 1024 * 1024:
        raise ValidationError(
            _("“%(name)s” is larger than the %(limit)s MB upload limit.")
            % {"name": name, "limit": settings.MAX_UPLOAD_MB}
        )


def file_sha256(content: File) -> str:
    digest = hashlib.sha256()
    content.seek(0)
    for piece in content.chunks():
        digest.update(piece)
    return digest.hexdigest()


def do_add_video_link(
    collection: Collection, url: str, title: str, description: str = "", *, enqueue: bool = True
) -> tuple[Document, IngestionRun | None]:
    """A link to a video kept elsewhere, stored as a small JSON document named after its
    title (adding the same title again replaces it) and ingested like a file."""
    from ingestion.sniff import VIDEO_LINK

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


def do_delete_document(document: Document) -> None:
    """The document, its pages, chunks and files; queued runs for it go with it."""
    files = [
        document.file.name,
        *(name for name in document.pages.values_list("render", flat=True) if name),
        *PageImage.objects.filter(page__document=document).values_list("file", flat=True),
    ]
    storage = document.file.storage
    collection_id, pk = document.collection_id, document.pk
    with transaction.atomic():
        document.delete()
        transaction.on_commit(lambda: [storage.delete(name) for name in files if name])
    from knowledge.events import send_collection_event_on_commit

    send_collection_event_on_commit(collection_id, {"type": "document.deleted", "document": pk})


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

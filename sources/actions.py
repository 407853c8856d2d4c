"""Writes on sources: adding, changing and removing one, and starting a sync. Pages, the API
and the admin call these after checking that the user manages the collection
(knowledge.access, `manage=True`). `check_source` raises ValidationError naming the field."""

from __future__ import annotations

import shutil
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.log import record
from audit.models import Action
from knowledge.actions import clean_document_path, clean_name, do_delete_document
from sources import schedule
from sources.hosts import check_host
from sources.models import Source, SyncRun
from sources.remotes import Credentials, RemoteError
from sources.remotes.folder import check_local_path

# The fields a person sets (credentials apart), in the order forms show them.
FIELDS: tuple[str, ...] = ("name", "kind", "url", "branch", "bucket", "region", "prefix", "target")
FIELDS += ("include", "exclude", "schedule", "link_template", "enabled")


def check_source(source: Source) -> None:
    """Every field of the source usable for its kind, or ValidationError({field: message})."""
    errors: dict[str, str] = {}
    try:
        source.name = clean_name(source.name)
    except ValidationError as exc:
        errors["name"] = " ".join(exc.messages)
    else:
        if Source.objects.filter(collection=source.collection, name=source.name).exclude(pk=source.pk).exists():
            errors["name"] = _("The collection already has a source with this name.")
    url = source.url = source.url.strip()
    if source.kind in (Source.Kind.FOLDER,) or (source.kind == Source.Kind.GIT and url and "://" not in url):
        if not url:
            errors["url"] = _("Enter the folder's path on the server.")
        else:
            try:
                check_local_path(url)
            except RemoteError as exc:
                errors["url"] = str(exc)
    elif source.kind in (Source.Kind.GIT, Source.Kind.WEBDAV) or url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors["url"] = _("Enter an address starting with https:// (or http://).")
        elif parts.username or parts.password:
            errors["url"] = _("Leave the user name and password out of the address: enter them under Credentials.")
        else:
            try:
                check_host(source.location(), resolve=False)
            except RemoteError as exc:
                errors["url"] = str(exc)
    if source.kind == Source.Kind.S3 and not source.bucket.strip():
        errors["bucket"] = _("Enter the bucket's name.")
    source.prefix = source.prefix.strip().strip("/")
    if ".." in source.prefix.split("/"):
        errors["prefix"] = _("The folder cannot contain “..”.")
    target = source.target.strip().strip("/")
    if ".." in target.split("/"):
        errors["target"] = _("The folder cannot contain “..”.")
    else:
        source.target = clean_document_path(target) if target else ""
    try:
        source.schedule = schedule.check(source.schedule)
    except ValidationError as exc:
        errors["schedule"] = " ".join(exc.messages)
    template = source.link_template = source.link_template.strip()
    if template:
        try:
            filled = template.format(path="a", branch="b")
        except (KeyError, IndexError, ValueError):
            errors["link_template"] = _("A link template may use only {path} and {branch}.")
        else:
            if urlsplit(filled).scheme not in ("http", "https") or "{path}" not in template:
                errors["link_template"] = _("Write a web address with {path} in it, starting with https://.")
    if errors:
        raise ValidationError(errors)


def do_save_source(
    source: Source, *, credentials: Credentials | None = None, actor: Any = None, clear_credentials: bool = False
) -> Source:
    """Create or change the source (`credentials` None: keep the stored ones). The schedule's
    next sync is worked out again."""
    check_source(source)
    created = source.pk is None
    before = {} if created else Source.objects.filter(pk=source.pk).values(*FIELDS).first() or {}
    if clear_credentials:
        source.credentials_token = ""
    if credentials is not None and (credentials.username or credentials.password):
        source.set_credentials(credentials)
    source.next_sync_at = schedule.next_after(source.schedule, timezone.now()) if source.enabled else None
    with transaction.atomic():
        if created:
            source.created_by = actor if getattr(actor, "is_authenticated", False) else None
        source.save()
        changes = {f: (before.get(f), getattr(source, f)) for f in FIELDS if before.get(f) != getattr(source, f)}
        if (credentials is not None and (credentials.username or credentials.password)) or clear_credentials:
            changes["credentials"] = ("***", "***")  # that they changed, never what they are
        action = Action.SOURCE_CREATE if created else Action.SOURCE_UPDATE
        if created or changes:
            scope = source.collection.audit_scope()
            record(action, source, label=source.name, changes={} if created else changes, **scope)
    return source


def do_delete_source(source: Source) -> int:
    """The source and every document it brought in; the Git clone kept for it goes too.
    Returns how many documents were removed."""
    removed = 0
    for file in source.files.select_related("document"):
        do_delete_document(file.document)
        removed += 1
    with transaction.atomic():
        record(Action.SOURCE_DELETE, source, label=source.name, **source.collection.audit_scope())
        workdir = settings.SOURCE_WORKDIR / str(source.pk)
        source.delete()
        transaction.on_commit(lambda: shutil.rmtree(workdir, ignore_errors=True))
    return removed


def do_start_sync(source: Source, *, trigger: str = SyncRun.Trigger.MANUAL, actor: Any = None) -> SyncRun:
    """A sync run for the source, queued when the transaction commits; a source already
    queued or syncing gets that run back rather than a second one."""
    with transaction.atomic():
        Source.objects.select_for_update().filter(pk=source.pk).first()
        active = source.runs.filter(status__in=(SyncRun.Status.QUEUED, SyncRun.Status.RUNNING)).first()
        if active is not None:
            return active
        user = actor if getattr(actor, "is_authenticated", False) else None
        run = SyncRun.objects.create(source=source, trigger=trigger, requested_by=user)
        if trigger == SyncRun.Trigger.MANUAL:
            record(Action.SOURCE_SYNC, source, label=source.name, **source.collection.audit_scope())
        transaction.on_commit(lambda: _send(run.pk))
    return run


def _send(run_id: int) -> None:
    from sources.tasks import sync_source

    sync_source.delay(run_id)

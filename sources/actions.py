"""Writes on sources: adding, changing and removing one, and starting a sync. Pages, the API
and the admin call these after checking that the user manages the collection
(knowledge.access, `manage=True`). `check_source` raises ValidationError naming the field."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.log import record
from audit.models import Action
from common.runs import claim
from knowledge.actions import clean_document_path, clean_name, do_delete_document
from knowledge.models import Collection
from sources import schedule, sync
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
    if source.kind == Source.Kind.FOLDER or (url and source.location().on_this_server):
        if not url:
            errors["url"] = _("Enter the folder's path on the server.")
        else:
            try:
                check_local_path(url)
            except RemoteError as exc:
                errors["url"] = str(exc)
    elif source.kind in (Source.Kind.GIT, Source.Kind.WEBDAV) or url:
        problem = _address_problem(url)
        if problem:
            errors["url"] = problem
        else:
            try:
                check_host(source.location(), resolve=False)
            except RemoteError as exc:
                errors["url"] = str(exc)
    if source.kind == Source.Kind.S3 and not source.bucket.strip():
        errors["bucket"] = _("Enter the bucket's name.")
    branch = source.branch = source.branch.strip()
    if branch and not branch_allowed(branch):
        errors["branch"] = _(
            "A branch name cannot start with “-”, contain spaces, control characters, “..”, “@{” or any of "
            "~ ^ : ? * [ \\, or end with “/”, “.” or “.lock”."
        )
    source.prefix = source.prefix.strip().strip("/")
    if ".." in source.prefix.split("/"):
        errors["prefix"] = _("The folder cannot contain “..”.")
    elif source.kind == Source.Kind.FOLDER and source.prefix and "url" not in errors:
        try:
            check_local_path(str(Path(url) / source.prefix))
        except RemoteError:
            errors["prefix"] = _("The folder in the source leads outside the folders PORTAL_SOURCE_ROOTS allows.")
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
            if _scheme(filled) not in ("http", "https") or "{path}" not in template:
                errors["link_template"] = _("Write a web address with {path} in it, starting with https://.")
    if errors:
        raise ValidationError(errors)


def _address_problem(url: str) -> str:
    """Why the remote address cannot be used ("" when it can; its host is check_host's).
    urlsplit raises ValueError on some malformed ones (an unclosed or IPv4-in-brackets host,
    a port out of range): a 400 on the field, not a 500."""
    if any(char.isspace() or not char.isprintable() for char in url):
        return _("The address cannot contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return _(
            "This address is not valid: check the host (an IPv6 address goes in brackets, an IPv4 address "
            "without) and the port (1 to 65535)."
        )
    if parts.scheme not in ("http", "https") or not host:
        return _("Enter an address starting with https:// (or http://).")
    if port == 0:
        return _("The port must be between 1 and 65535.")
    if parts.username or parts.password:
        return _("Leave the user name and password out of the address: enter them under Credentials.")
    return ""


def _scheme(url: str) -> str:
    try:
        return urlsplit(url).scheme
    except ValueError:
        return ""


# git check-ref-format's rules for a branch, plus a leading "-" (an option to git).
BRANCH_FORBIDDEN = re.compile(r"^[-/.]|\.\.|@\{|[\x00-\x20\x7f~^:?*\[\\]|//|/\.|\.lock(/|$)|[/.]$")


def branch_allowed(branch: str) -> bool:
    """Whether `branch` is a branch name git accepts and cannot take for an option."""
    return branch != "@" and not BRANCH_FORBIDDEN.search(branch)


def credentials_scope(kind: str, url: str, bucket: str) -> tuple[object, ...]:
    """What stored credentials were given for: the kind, the address's scheme, host and port
    (the scheme's default when none is written), and the bucket. A path on the server (a
    folder, a local Git repository) sends no credentials anywhere: its path is not part of it."""
    url = url.strip()
    if "://" not in url:
        return (kind, "", "", None, bucket.strip())
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        return (kind, parts.scheme.lower(), (parts.hostname or "").lower(), port, bucket.strip())
    except ValueError:  # stored before addresses were checked this closely: compare it whole
        return (kind, url, "", None, bucket.strip())


def address_changed(source: Source) -> bool:
    """Whether the source, as changed in memory, points elsewhere than the stored one:
    credentials stored for the old address must not go to the new one."""
    if source.pk is None:
        return False
    stored = Source.objects.filter(pk=source.pk).values("kind", "url", "bucket").first()
    if stored is None:
        return False
    return credentials_scope(**stored) != credentials_scope(source.kind, source.url, source.bucket)


def do_save_source(
    source: Source, *, credentials: Credentials | None = None, actor: Any = None, clear_credentials: bool = False
) -> Source:
    """Create or change the source (`credentials` None: keep the stored ones). The schedule's
    next sync is worked out again.

    A change of kind, scheme, host, port or bucket (credentials_scope) removes the stored
    credentials unless new ones come with it, and marks them removed (credentials_cleared)
    until credentials are entered again or removed on purpose (`clear_credentials`); the
    audit entry says "cleared"."""
    check_source(source)
    created = source.pk is None
    before = {} if created else Source.objects.filter(pk=source.pk).values(*FIELDS).first() or {}
    typed = credentials is not None and bool(credentials.username or credentials.password)
    moved = bool(before) and credentials_scope(before["kind"], before["url"], before["bucket"]) != credentials_scope(
        source.kind, source.url, source.bucket
    )
    had = source.has_credentials
    dropped = moved and had and not typed and not clear_credentials
    if clear_credentials or dropped:
        source.credentials_token = ""
    if typed and credentials is not None:
        source.set_credentials(credentials)
    source.credentials_cleared = dropped or (source.credentials_cleared and not typed and not clear_credentials)
    # A source waiting for its credentials is not started by the schedule: each run would only
    # fail saying so. Entering them (or removing them on purpose) schedules it again.
    waiting = source.credentials_cleared
    source.next_sync_at = (
        schedule.next_after(source.schedule, timezone.now()) if source.enabled and not waiting else None
    )
    with transaction.atomic():
        if created:
            source.created_by = actor if getattr(actor, "is_authenticated", False) else None
        source.save()
        changes = {f: (before.get(f), getattr(source, f)) for f in FIELDS if before.get(f) != getattr(source, f)}
        # That they changed or went, never what they are.
        if typed:
            changes["credentials"] = ("***", "***")
        elif (clear_credentials and had) or dropped:
            changes["credentials"] = ("***", "cleared")
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
        run.send()
    return run


def do_folder_source(collection: Collection, folder: str, *, actor: Any = None) -> Source:
    """The collection's source for this server folder (`manage.py ingest`): the one it has for
    the folder already, or a new one synced only by hand, named after the folder. The folder
    must be under PORTAL_SOURCE_ROOTS, as every folder source's (ValidationError otherwise)."""
    try:
        path = str(check_local_path(folder))
    except RemoteError as exc:
        raise ValidationError({"url": str(exc)}) from None
    found = Source.objects.filter(collection=collection, kind=Source.Kind.FOLDER, url=path, prefix="", target="")
    source = found.order_by("pk").first()
    if source is not None:
        return source
    base = clean_name(Path(path).name or path)[:90]
    taken = set(Source.objects.filter(collection=collection, name__startswith=base).values_list("name", flat=True))
    name = next(n for n in (base, *(f"{base} {i}" for i in range(2, len(taken) + 3))) if n not in taken)
    return do_save_source(Source(collection=collection, name=name, kind=Source.Kind.FOLDER, url=path), actor=actor)


def do_sync_here(source: Source, *, keep_missing: bool = False, actor: Any = None) -> SyncRun:
    """Sync the source in this process, indexing each file here rather than in the workers
    (`manage.py sources --sync --inline`, `manage.py ingest --inline`); a manual sync in the
    audit log. `keep_missing`: documents of files gone from the source stay."""
    with transaction.atomic():
        user = actor if getattr(actor, "is_authenticated", False) else None
        run = SyncRun.objects.create(source=source, trigger=SyncRun.Trigger.MANUAL, requested_by=user)
        record(Action.SOURCE_SYNC, source, label=source.name, **source.collection.audit_scope())
    if not claim(run):
        raise RemoteError(_("The sync was taken by a worker before it could start here."))
    return sync.execute(run, inline=True, keep_missing=keep_missing)

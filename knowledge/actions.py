"""Writes that touch several rows or have side effects (Zulip's `zerver/actions/`).

`check_*` validates and raises ValidationError with a readable message; `do_*` writes.
Views, serializers, admin and API call these and never repeat their rules. Writes that start
ingestion (adding a document, ingesting one again) are in ingestion/actions.py: knowledge is
the layer below ingestion and does not import it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import File
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from knowledge.models import ApiToken, Collection, Document, Membership, PageImage, Role, Team
from knowledge.models.tokens import hash_key, new_key

if TYPE_CHECKING:
    from portal.models import User


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

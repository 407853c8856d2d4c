"""Writes that touch several rows or have side effects (Zulip's `zerver/actions/`).

`check_*` validates and raises ValidationError with a readable message; `do_*` writes.
Views, serializers, admin and API call these and never repeat their rules. Writes that start
ingestion (adding a document, ingesting one again) are in ingestion/actions.py: knowledge is
the layer below ingestion and does not import it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from smtplib import SMTPException
from typing import TYPE_CHECKING, Any

from django.conf import settings as conf
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.log import record
from audit.models import Action
from knowledge.models import ApiToken, Collection, Document, Invitation, Membership, Page, PageImage, Role, Team
from knowledge.models.tokens import hash_key, new_key
from knowledge.revocation import access_changed

if TYPE_CHECKING:
    from portal.models import User

log = logging.getLogger(__name__)


# Teams and members


def do_create_team(user: User, name: str, description: str = "") -> Team:
    """A new team, with its creator as its first admin."""
    name = check_team_name(name)
    with transaction.atomic():
        team = Team.objects.create(name=name, description=description)
        Membership.objects.create(team=team, user=user, role=Role.ADMIN)
        record(Action.TEAM_CREATE, team, team_id=team.pk, actor=user)
    return team


def check_team_name(name: str, team: Team | None = None) -> str:
    """`name` cleaned (clean_name), refused when another team than `team` has it in any case."""
    name = clean_name(name)
    others = Team.objects.filter(name__iexact=name)
    if team is not None:
        others = others.exclude(pk=team.pk)
    if others.exists():
        raise ValidationError(_("A team named “%(name)s” already exists.") % {"name": name})
    return name


def do_update_team(team: Team, *, name: str | None = None, description: str | None = None) -> Team:
    """A new name or description (None keeps it); an entry only when something changed."""
    after = {
        "name": team.name if name is None else check_team_name(name, team),
        "description": team.description if description is None else description,
    }
    changes = {key: (getattr(team, key), value) for key, value in after.items() if getattr(team, key) != value}
    if not changes:
        return team
    for key, (_old, new) in changes.items():
        setattr(team, key, new)
    try:
        with transaction.atomic():
            team.save(update_fields=list(changes))
            record(Action.TEAM_UPDATE, team, team_id=team.pk, changes=changes)
    except IntegrityError:  # the same name taken by a rename or creation running at once
        for key, (old, _new) in changes.items():
            setattr(team, key, old)
        raise ValidationError(_("A team named “%(name)s” already exists.") % {"name": after["name"]}) from None
    return team


def do_delete_team(team: Team) -> None:
    """The team with its collections, each deleted as do_delete_collection deletes one (its
    entry, its stored files, its watchers told), its memberships and invitations; every
    member's open sockets check again."""
    with transaction.atomic():
        # Locked first: a collection created for the team now waits (its foreign key needs a
        # share lock on the team's row) instead of being deleted by the cascade unrecorded.
        _lock_team(team.pk)
        members = list(team.memberships.values_list("user_id", flat=True))
        for collection in team.collections.order_by("pk"):
            do_delete_collection(collection)
        record(Action.TEAM_DELETE, team, team_id=team.pk)
        team.delete()
        access_changed(members)


def do_add_member(team: Team, user: User, role: Role) -> Membership:
    """Make `user` a member at once: for operators (the Django admin, commands). People are
    added by invitation (do_invite), which they accept."""
    with transaction.atomic():
        membership, created = Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
        if not created:
            raise ValidationError(_("%(user)s is already a member of this team.") % {"user": user})
        record_membership(membership, before=None, after=role.value)
    return membership


def do_change_role(membership: Membership, role: Role) -> Membership:
    with transaction.atomic():
        _lock_team(membership.team_id)
        if membership.role == Role.ADMIN and role != Role.ADMIN:
            _check_not_last_admin(membership)
        before = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        record_membership(membership, before=before, after=role.value)
    return membership


def do_remove_member(membership: Membership) -> None:
    with transaction.atomic():
        _lock_team(membership.team_id)
        if membership.role == Role.ADMIN:
            _check_not_last_admin(membership)
        record_membership(membership, before=membership.role, after=None)
        membership.delete()


def record_membership(membership: Membership, *, before: str | None, after: str | None) -> None:
    """The audit entry of a membership added (`before` None), changed or removed (`after`
    None), and, when it existed before, the re-check of its user's open sockets. Call it in
    the change's transaction: the actions above, and the admin, which edits memberships as
    rows."""
    action = Action.MEMBER_ADD if before is None else Action.MEMBER_REMOVE if after is None else Action.MEMBER_ROLE
    record(action, membership, team_id=membership.team_id, changes={"role": (before, after)})
    if before is not None:
        access_changed([membership.user_id])


def _lock_team(team_id: int) -> None:
    # Two admins demoting each other at once must not leave the team without one.
    Team.objects.select_for_update().filter(pk=team_id).first()


def _check_not_last_admin(membership: Membership) -> None:
    others = Membership.objects.filter(team_id=membership.team_id, role=Role.ADMIN).exclude(pk=membership.pk)
    if not others.exists():
        raise ValidationError(_("A team needs at least one admin: make someone else admin first."))


# Invitations: the only way a person joins a team. The answer to an invitation does not
# depend on whether the address has an account, so nobody learns which addresses do.


def do_invite(team: Team, email: str, role: Role, inviter: User) -> Invitation:
    """Invite `email` to the team with `role`: mailed (Django's email backend), and waiting
    on the invitee's invitations page once they log in or sign up with that address."""
    email = check_invitation_email(email)
    if Membership.objects.filter(team=team, user__email__iexact=email).exists():
        raise ValidationError(_("%(email)s is already a member of this team.") % {"email": email})
    with transaction.atomic():
        _lock_team(team.pk)
        # An expired invitation makes way for the new one.
        Invitation.objects.filter(team=team, email=email, status=Invitation.Status.PENDING).exclude(
            pk__in=Invitation.objects.pending().values("pk")
        ).update(status=Invitation.Status.REVOKED)
        if Invitation.objects.pending().filter(team=team, email=email).exists():
            raise ValidationError(
                _("%(email)s already has an invitation to this team; send it again from the list.") % {"email": email}
            )
        invitation = Invitation.objects.create(
            team=team, email=email, role=role, invited_by=inviter, expires_at=_invitation_expiry()
        )
        changes = {"role": (None, role.value)}
        record(Action.INVITATION_CREATE, invitation, team_id=team.pk, changes=changes, actor=inviter)
        transaction.on_commit(lambda: _mail_invitation(invitation))
    return invitation


def check_invitation_email(email: str) -> str:
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError(_("“%(email)s” is not an email address.") % {"email": email}) from None
    return email


def do_resend_invitation(invitation: Invitation) -> Invitation:
    """Mail a pending (or expired) invitation again, with a new expiry date."""
    if invitation.status != Invitation.Status.PENDING:
        raise ValidationError(_("Only a pending invitation can be sent again."))
    with transaction.atomic():
        invitation.sent_at, invitation.expires_at = timezone.now(), _invitation_expiry()
        invitation.save(update_fields=["sent_at", "expires_at"])
        record(Action.INVITATION_RESEND, invitation, team_id=invitation.team_id)
        transaction.on_commit(lambda: _mail_invitation(invitation))
    return invitation


def do_revoke_invitation(invitation: Invitation) -> Invitation:
    return _answer(invitation, Invitation.Status.REVOKED, Action.INVITATION_REVOKE)


def do_decline_invitation(invitation: Invitation) -> Invitation:
    return _answer(invitation, Invitation.Status.DECLINED, Action.INVITATION_DECLINE)


def do_accept_invitation(invitation: Invitation, user: User) -> Membership:
    """The invitee joins the team with the invited role (a member already keeps the higher of
    the two roles)."""
    with transaction.atomic():
        _answer(invitation, Invitation.Status.ACCEPTED, Action.INVITATION_ACCEPT, user=user)
        role = Role(invitation.role)
        membership, created = Membership.objects.get_or_create(team=invitation.team, user=user, defaults={"role": role})
        if not created and role.rank > membership.role_enum.rank:
            membership.role = role
            membership.save(update_fields=["role"])
    return membership


def _answer(invitation: Invitation, status: str, action: Action, user: User | None = None) -> Invitation:
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.status != Invitation.Status.PENDING:
            raise ValidationError(_("This invitation was already answered or revoked."))
        if locked.expired and status == Invitation.Status.ACCEPTED:
            raise ValidationError(_("This invitation has expired; ask a team admin to send it again."))
        locked.status, locked.answered_at = status, timezone.now()
        locked.save(update_fields=["status", "answered_at"])
        record(action, locked, team_id=locked.team_id, actor=user, changes={"status": ("pending", status)})
    invitation.status, invitation.answered_at = locked.status, locked.answered_at
    return invitation


def _invitation_expiry() -> datetime:
    return timezone.now() + timedelta(days=conf.INVITATION_DAYS)


def _mail_invitation(invitation: Invitation) -> None:
    """The same mail whether or not the address has an account: it says how to do both."""
    inviter = invitation.invited_by.email if invitation.invited_by else conf.DEFAULT_FROM_EMAIL
    context = {
        "team": invitation.team.name,
        "inviter": inviter,
        "role": Role(invitation.role).label,
        "url": conf.PORTAL_URL.rstrip("/") + reverse("invitations"),
        "expires": invitation.expires_at.date().isoformat(),
    }
    subject = _("Invitation to the team %(team)s") % context
    body = (
        _(
            "%(inviter)s invites you to the team “%(team)s” as %(role)s.\n\n"
            "Log in, or sign up with this email address, and accept or decline the invitation at\n"
            "%(url)s\n\nThe invitation expires on %(expires)s."
        )
        % context
    )
    try:
        send_mail(subject, body, None, [invitation.email])
    except (OSError, SMTPException):
        # The invitation stands: it waits on the invitee's page, and an admin can send it again.
        log.warning("Invitation %s: the mail to its address was not sent", invitation.pk, exc_info=True)


# Collections


def do_create_collection(user: User, name: str, *, team: Team | None = None, description: str = "") -> Collection:
    name = clean_name(name)
    if team is not None and not Team.objects.with_role_at_least(user, Role.EDITOR).filter(pk=team.pk).exists():
        raise PermissionDenied(_("Only editors and admins of the team can create its collections."))
    owner_user = user if team is None else None
    try:
        with transaction.atomic():
            collection = Collection.objects.create(
                name=name, description=description, created_by=user, owner_user=owner_user, owner_team=team
            )
            record(Action.COLLECTION_CREATE, collection, actor=user, **collection.audit_scope())
    except IntegrityError:
        raise ValidationError(_("A collection named “%(name)s” already exists here.") % {"name": name}) from None
    return collection


def do_rename_collection(collection: Collection, name: str, description: str | None = None) -> Collection:
    before = {"name": collection.name, "description": collection.description}
    collection.name = clean_name(name)
    fields = ["name", "updated_at"]
    if description is not None:
        collection.description = description
        fields.append("description")
    changes = {
        key: (value, getattr(collection, key)) for key, value in before.items() if value != getattr(collection, key)
    }
    try:
        with transaction.atomic():
            collection.save(update_fields=fields)
            record(Action.COLLECTION_RENAME, collection, changes=changes, **collection.audit_scope())
    except IntegrityError:
        collection.name = before["name"]
        raise ValidationError(_("A collection named “%(name)s” already exists here.") % {"name": name}) from None
    return collection


def do_change_collection_settings(collection: Collection, settings: dict[str, Any]) -> Collection:
    """New settings (chunking, summaries, source weights); changed chunking makes beat build
    a new index version (ingestion.versions.reindex_outdated)."""
    before = collection.settings or {}
    changes = {key: (before.get(key), settings.get(key)) for key in before.keys() | settings.keys()}
    with transaction.atomic():
        collection.settings = settings
        collection.save(update_fields=["settings", "updated_at"])
        changed = {key: pair for key, pair in changes.items() if pair[0] != pair[1]}
        record(Action.COLLECTION_SETTINGS, collection, changes=changed, **collection.audit_scope())
    return collection


def do_delete_collection(collection: Collection) -> None:
    """The collection and all in it; its documents' stored files go once the delete commits."""
    with transaction.atomic():
        # Its documents locked first: a worker still indexing one cannot add a page under it
        # while they are deleted (the delete failed at commit on the page's foreign key); the
        # worker's write waits, then fails on a document that is gone, and its run ends.
        list(Document.objects.filter(collection=collection).select_for_update().values_list("pk", flat=True))
        viewers = collection.viewer_ids()
        files = stored_files(Document.objects.filter(collection=collection))
        record(Action.COLLECTION_DELETE, collection, **collection.audit_scope())
        collection.delete()
        access_changed(viewers)
        transaction.on_commit(lambda: _delete_stored(files))


# API tokens


def do_create_token(
    user: User, name: str, *, read_only: bool = False, collections: Sequence[Collection] | None = None
) -> tuple[ApiToken, str]:
    """The new token and its key, which is shown once and never stored. `read_only`: it may
    read, search and ask, never change anything; `collections`: it sees only these (each
    must be one the user may see; None: every collection the user may see)."""
    key = new_key()
    chosen = list(collections) if collections is not None else None
    if chosen is not None:
        visible = set(Collection.objects.visible_to(user).values_list("pk", flat=True))
        if not chosen or any(collection.pk not in visible for collection in chosen):
            raise ValidationError({"collections": _("Choose one or more of your collections.")})
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=clean_name(name),
            prefix=key[:10],
            key_hash=hash_key(key),
            read_only=read_only,
            limited=chosen is not None,
        )
        scope: dict[str, tuple[Any, Any]] = {}
        if read_only:
            scope["read_only"] = (False, True)
        if chosen is not None:
            token.collections.set(chosen)
            scope["collections"] = (None, sorted(collection.pk for collection in chosen))
        record(Action.TOKEN_CREATE, token, owner_id=user.pk, actor=user, changes=scope)
    return token, key


def do_revoke_token(token: ApiToken) -> None:
    if token.revoked_at is not None:
        return
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        record(Action.TOKEN_REVOKE, token, owner_id=token.user_id)
        access_changed([token.user_id], token_ids=[token.pk])


# Characters that reorder the text around them (U+202A-U+202E, U+2066-U+2069, U+200E/F,
# U+061C): "a\u202egpj.exe" shows as "aexe.jpg". Refused in names rather than removed, so a
# person sees why.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def clean_name(name: str, limit: int = 100) -> str:
    """A name of a team, collection, source or token: whitespace runs made one space, at
    most `limit` characters; ValidationError when nothing visible is left (only spaces or
    invisible characters such as U+200B) or when it holds a bidirectional control."""
    name = " ".join((name or "").split())
    if any(char in BIDI_CONTROLS for char in name):
        raise ValidationError(_("Names cannot contain characters that change the direction of the text."))
    if not any(char.isprintable() and not char.isspace() for char in name):
        raise ValidationError(_("A name is required."))
    if len(name) > limit:
        raise ValidationError(_("Names can be at most %(limit)s characters long.") % {"limit": limit})
    return name


# Documents


def clean_document_path(name: str) -> str:
    """A display path safe to store: no control characters, no `..` or absolute parts,
    each part at most 200 characters. Unicode names are kept as they are. Refused, as
    clean_name refuses them, when it holds a bidirectional control (removing one would rename
    the file behind the person's back) or when the file's own name has nothing visible."""
    name = name.replace("\\", "/")
    if found := sorted({f"U+{ord(char):04X}" for char in name if char in BIDI_CONTROLS}):
        shown = "".join(char for char in name if char not in BIDI_CONTROLS)
        raise ValidationError(
            _("“%(name)s”: names cannot contain characters that change the direction of the text (%(found)s).")
            % {"name": shown, "found": ", ".join(found)}
        )
    own = name.rsplit("/", 1)[-1]
    if own and not _visible(own):  # only U+200B or spaces: the folder's name would become the file's
        raise ValidationError(_("The file needs a name."))
    name = "".join(char for char in name if char.isprintable() or char == "/")
    parts = [part.strip() for part in name.split("/") if part.strip() not in ("", ".", "..")]
    parts = [_shorten(part, 200) for part in parts]
    if not parts:
        raise ValidationError(_("The file needs a name."))
    return "/".join(parts)[-1024:]


def _visible(text: str) -> bool:
    return any(char.isprintable() and not char.isspace() for char in text)


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
    if size > conf.MAX_UPLOAD_MB * 1024 * 1024:
        raise ValidationError(
            _("“%(name)s” is larger than the %(limit)s MB upload limit.") % {"name": name, "limit": conf.MAX_UPLOAD_MB}
        )


def file_sha256(content: File) -> str:
    digest = hashlib.sha256()
    content.seek(0)
    for piece in content.chunks():
        digest.update(piece)
    return digest.hexdigest()


def stored_files(documents: QuerySet[Document]) -> list[str]:
    """The storage names of the documents' originals, page renders and page pictures."""
    names = [
        *documents.values_list("file", flat=True),
        *Page.objects.filter(document__in=documents).values_list("render", flat=True),
        *PageImage.objects.filter(page__document__in=documents).values_list("file", flat=True),
    ]
    return [name for name in names if name]


def _delete_stored(names: list[str]) -> None:
    # The storage of Document.file, PageImage.file and Page.render: all three use the default.
    for name in names:
        default_storage.delete(name)


def do_delete_document(document: Document) -> None:
    """The document, its pages, chunks and files; queued runs for it go with it."""
    files = stored_files(Document.objects.filter(pk=document.pk))
    collection_id, pk = document.collection_id, document.pk
    with transaction.atomic():
        record(Action.DOCUMENT_DELETE, document, **document.collection.audit_scope())
        document.delete()
        transaction.on_commit(lambda: _delete_stored(files))
    from knowledge.events import send_collection_event_on_commit

    send_collection_event_on_commit(collection_id, {"type": "document.deleted", "document": pk})

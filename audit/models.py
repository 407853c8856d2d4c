from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Action(models.TextChoices):
    """Every action that leaves an entry. The value is what the API and CSV export carry."""

    TEAM_CREATE = "team.create", _("Team created")
    TEAM_UPDATE = "team.update", _("Team changed")
    TEAM_DELETE = "team.delete", _("Team deleted")
    MEMBER_ADD = "member.add", _("Member added")
    MEMBER_ROLE = "member.role", _("Role changed")
    MEMBER_REMOVE = "member.remove", _("Member removed")
    INVITATION_CREATE = "invitation.create", _("Invitation sent")
    INVITATION_RESEND = "invitation.resend", _("Invitation sent again")
    INVITATION_REVOKE = "invitation.revoke", _("Invitation revoked")
    INVITATION_ACCEPT = "invitation.accept", _("Invitation accepted")
    INVITATION_DECLINE = "invitation.decline", _("Invitation declined")
    COLLECTION_CREATE = "collection.create", _("Collection created")
    COLLECTION_RENAME = "collection.rename", _("Collection renamed")
    COLLECTION_SETTINGS = "collection.settings", _("Collection settings changed")
    COLLECTION_DELETE = "collection.delete", _("Collection deleted")
    DOCUMENT_UPLOAD = "document.upload", _("Document uploaded")
    DOCUMENT_REPLACE = "document.replace", _("Document replaced")
    DOCUMENT_DELETE = "document.delete", _("Document deleted")
    DOCUMENT_MOVE = "document.move", _("Document moved")
    DOCUMENT_RERUN = "document.rerun", _("Document indexed again")
    SOURCE_CREATE = "source.create", _("Source added")
    SOURCE_UPDATE = "source.update", _("Source changed")
    SOURCE_DELETE = "source.delete", _("Source removed")
    SOURCE_SYNC = "source.sync", _("Source sync started")
    INDEX_REINDEX = "index.reindex", _("Reindex started")
    INDEX_FLIP = "index.flip", _("Index version flipped")
    INDEX_ACTIVATE = "index.activate", _("Index version activated")
    INDEX_ROLLBACK = "index.rollback", _("Index rolled back")
    INDEX_HELD = "index.held", _("Index version held back by evaluation")
    INDEX_FLIP_ANYWAY = "index.flip_anyway", _("Held index version flipped anyway")
    GOLDEN_CREATE = "golden.create", _("Golden question added")
    GOLDEN_UPDATE = "golden.update", _("Golden question changed")
    GOLDEN_DELETE = "golden.delete", _("Golden question deleted")
    GOLDEN_IMPORT = "golden.import", _("Golden questions imported")
    GOLDEN_FROM_FEEDBACK = "golden.from_feedback", _("Feedback turned into a golden question")
    EVALUATION_START = "evaluation.start", _("Evaluation started")
    TOKEN_CREATE = "token.create", _("API token created")
    TOKEN_REVOKE = "token.revoke", _("API token revoked")
    MEMORY_PURGE = "memory.purge", _("Memories deleted")
    ADMIN_LOGIN = "admin.login", _("Admin login")
    LOGIN_LOCKED = "login.locked", _("Login locked out")
    BACKUP_CREATE = "backup.create", _("Backup made")
    BACKUP_RESTORE = "backup.restore", _("Backup restored")


class Entry(models.Model):
    """One action. Teams, collections and their objects are named by id and a label taken
    when the entry was written, without foreign keys: the entry outlives what it is about."""

    at = models.DateTimeField(_("time"), default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("actor"),
    )
    # The actor's email when the entry was written: kept when the account is deleted. Empty:
    # the portal itself (a worker, beat, a command run without a user).
    actor_label = models.CharField(_("actor"), max_length=254, blank=True)
    action = models.CharField(_("action"), max_length=40, choices=Action.choices, db_index=True)
    object_type = models.CharField(_("object type"), max_length=40)
    object_id = models.CharField(_("object id"), max_length=64, blank=True)
    object_label = models.CharField(_("object"), max_length=300, blank=True)
    # Who may read the entry: a team's admins (team_id), a personal collection's or token's
    # owner (owner_id), superusers all of them.
    team_id = models.BigIntegerField(_("team"), null=True, blank=True, db_index=True)
    collection_id = models.BigIntegerField(_("collection"), null=True, blank=True, db_index=True)
    owner_id = models.BigIntegerField(_("owner"), null=True, blank=True, db_index=True)
    # {"field": [before, after]} where the action changed values.
    changes = models.JSONField(_("changes"), default=dict, blank=True)
    ip = models.GenericIPAddressField(_("client address"), null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit entries")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_label or '-'} {self.action} {self.object_label}"

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

TOKEN_PREFIX = "kp_"  # noqa: S105 (a public marker, not a secret)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True, user__is_active=True)


class ApiToken(models.Model):
    """A named key for integrations. Only its SHA-256 is stored: the key is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens", verbose_name=_("user")
    )
    name = models.CharField(_("name"), max_length=100)
    prefix = models.CharField(_("prefix"), max_length=12, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)
    # What an integration may do with it: only read (no upload, delete or setting changed;
    # searching and asking are reading), and only in the chosen collections when `limited`
    # (a limited token whose collections were all deleted sees none). Applied by
    # Collection.objects.visible_to and the API's authentication (knowledge.api.authentication).
    read_only = models.BooleanField(_("read only"), default=False)
    limited = models.BooleanField(_("limited to chosen collections"), default=False)
    collections = models.ManyToManyField(
        "knowledge.Collection", blank=True, related_name="+", verbose_name=_("collections")
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def collection_ids(self) -> list[int] | None:
        """The ids of the collections it is limited to; None when it is not limited."""
        return sorted(self.collections.values_list("pk", flat=True)) if self.limited else None

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

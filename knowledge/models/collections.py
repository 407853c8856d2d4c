from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings as conf
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from audit.log import Where
from knowledge.models.teams import Membership, Role, Team
from knowledge.principal import limited_collections

if TYPE_CHECKING:
    from portal.models import User
    from portal.typing import AnyUser


class CollectionQuerySet(models.QuerySet["Collection"]):
    """Every portal query over collections starts from one of these, so the SQL itself
    carries the access rule (NetBox's `RestrictedQuerySet.restrict()`)."""

    def visible_to(self, user: AnyUser) -> CollectionQuerySet:
        if not user.is_authenticated:
            return self.none()
        found = self.filter(Q(owner_user=user) | Q(owner_team__in=Team.objects.visible_to(user).values("pk")))
        return found._within_token(user)

    def editable_by(self, user: AnyUser) -> CollectionQuerySet:
        return self._with_role(user, Role.EDITOR)

    def manageable_by(self, user: AnyUser) -> CollectionQuerySet:
        return self._with_role(user, Role.ADMIN)

    def _with_role(self, user: AnyUser, role: Role) -> CollectionQuerySet:
        if not user.is_authenticated:
            return self.none()
        teams = Team.objects.with_role_at_least(user, role).values("pk")
        return self.filter(Q(owner_user=user) | Q(owner_team__in=teams))._within_token(user)

    def _within_token(self, user: AnyUser) -> CollectionQuerySet:
        """Only the collections an API token limited to chosen ones names, when the request
        came with such a token (knowledge/principal.py)."""
        allowed = limited_collections(user)
        return self if allowed is None else self.filter(pk__in=allowed)


class Collection(models.Model):
    """A set of documents, owned by one user or by one team (never both)."""

    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    owner_user = models.ForeignKey(
        conf.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="collections",
        verbose_name=_("owner (user)"),
    )
    owner_team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="collections",
        verbose_name=_("owner (team)"),
    )
    # Per-collection options: chunking ({"chunk_size", "chunk_overlap"}), later source weights, summaries.
    settings = models.JSONField(_("settings"), default=dict, blank=True)
    # The index version that answers queries; switching it is the atomic "flip".
    active_version = models.ForeignKey(
        "knowledge.IndexVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("active index version"),
    )
    created_by = models.ForeignKey(
        conf.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("created by"),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = CollectionQuerySet.as_manager()

    class Meta:
        ordering = ["name", "pk"]
        verbose_name = _("collection")
        verbose_name_plural = _("collections")
        constraints = [
            models.CheckConstraint(
                condition=Q(owner_user__isnull=False, owner_team__isnull=True)
                | Q(owner_user__isnull=True, owner_team__isnull=False),
                name="collection_exactly_one_owner",
            ),
            models.UniqueConstraint(
                fields=["owner_user", "name"],
                condition=Q(owner_user__isnull=False),
                name="collection_unique_name_per_user",
            ),
            models.UniqueConstraint(
                fields=["owner_team", "name"],
                condition=Q(owner_team__isnull=False),
                name="collection_unique_name_per_team",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def audit_scope(self) -> Where:
        """Who may read audit entries about the collection and what is in it."""
        return Where(team_id=self.owner_team_id, collection_id=self.pk, owner_id=self.owner_user_id)

    def viewer_ids(self) -> list[int]:
        """The users who can see the collection now: its owner, or its team's members."""
        if self.owner_team_id is None:
            return [self.owner_user_id] if self.owner_user_id is not None else []
        return list(Membership.objects.filter(team_id=self.owner_team_id).values_list("user_id", flat=True))

    def first_admin(self) -> User | None:
        """Who stands for the collection where nobody asked: its owner, or its team's first
        admin (None for a team without one)."""
        if self.owner_user_id is not None:
            return self.owner_user
        admin = Membership.objects.filter(team=self.owner_team, role=Role.ADMIN).select_related("user")
        membership = admin.order_by("pk").first()
        return membership.user if membership else None

    @property
    def owner_label(self) -> str:
        return str(self.owner_team) if self.owner_team_id else str(self.owner_user)

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from portal.typing import AnyUser


class Role(models.TextChoices):
    VIEWER = "viewer", _("Viewer")
    EDITOR = "editor", _("Editor")
    ADMIN = "admin", _("Admin")

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def at_least(self, other: Role) -> bool:
        return self.rank >= other.rank


_RANKS = {Role.VIEWER: 1, Role.EDITOR: 2, Role.ADMIN: 3}


class TeamQuerySet(models.QuerySet["Team"]):
    def visible_to(self, user: AnyUser) -> TeamQuerySet:
        """Teams the user belongs to, with any role."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(memberships__user=user)

    def with_role_at_least(self, user: AnyUser, role: Role) -> TeamQuerySet:
        if not user.is_authenticated:
            return self.none()
        roles = [r for r in Role if Role(r).at_least(role)]
        return self.filter(memberships__user=user, memberships__role__in=roles)


class Team(models.Model):
    name = models.CharField(_("name"), max_length=100, unique=True)
    description = models.TextField(_("description"), blank=True)
    members = models.ManyToManyField(  # type: ignore[var-annotated]
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams", verbose_name=_("members")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        verbose_name = _("team")
        verbose_name_plural = _("teams")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("team"))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("user")
    )
    role = models.CharField(_("role"), max_length=10, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(_("joined"), auto_now_add=True)

    class Meta:
        ordering = ["team__name", "user__email"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_unique_team_user")]
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def role_enum(self) -> Role:
        return Role(self.role)

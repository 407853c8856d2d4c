from __future__ import annotations

from typing import TYPE_CHECKING

from allauth.account.models import EmailAddress
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from knowledge.models.teams import Role, Team

if TYPE_CHECKING:
    from portal.typing import AnyUser


class InvitationQuerySet(models.QuerySet["Invitation"]):
    def pending(self) -> InvitationQuerySet:
        """Not answered, not revoked, not expired."""
        return self.filter(status=Invitation.Status.PENDING, expires_at__gt=timezone.now())

    def for_user(self, user: AnyUser) -> InvitationQuerySet:
        """Invitations addressed to the user's email address (any status). Where the portal
        verifies addresses (PORTAL_EMAIL_VERIFICATION), only once this one is verified: an
        address typed at sign-up or changed in the account settings proves nothing before."""
        if not user.is_authenticated or not user.email:
            return self.none()
        email = user.email.strip().lower()
        if settings.ACCOUNT_EMAIL_VERIFICATION != "none":
            verified = EmailAddress.objects.filter(user=user, email__iexact=email, verified=True)
            if not verified.exists():
                return self.none()
        return self.filter(email=email)


class Invitation(models.Model):
    """A team admin's offer of a role; the person becomes a member only by accepting it, so
    nobody can be put into a team (and its documents into their answers) without consent."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        ACCEPTED = "accepted", _("Accepted")
        DECLINED = "declined", _("Declined")
        REVOKED = "revoked", _("Revoked")

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations", verbose_name=_("team"))
    email = models.EmailField(_("email address"))  # lower-cased: it is matched to the invitee's address
    role = models.CharField(_("role"), max_length=10, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("invited by"),
    )
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    sent_at = models.DateTimeField(_("sent"), default=timezone.now)
    expires_at = models.DateTimeField(_("expires"))
    answered_at = models.DateTimeField(_("answered"), null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                "team",
                Lower("email"),
                condition=Q(status="pending"),
                name="invitation_one_pending_per_address",
            )
        ]
        verbose_name = _("invitation")
        verbose_name_plural = _("invitations")

    def __str__(self) -> str:
        return f"{self.email} to {self.team} ({self.role})"

    @property
    def expired(self) -> bool:
        return self.status == self.Status.PENDING and self.expires_at <= timezone.now()

    @property
    def state(self) -> str:
        """The status, with `expired` for a pending invitation past its date."""
        return "expired" if self.expired else self.status

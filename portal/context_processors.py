from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from knowledge.models import Invitation


def portal(request: HttpRequest) -> dict[str, object]:
    return {
        "signup_enabled": settings.SIGNUP_ENABLED,
        "oidc_enabled": bool(settings.OIDC_SERVER_URL),
        "pending_invitations": _pending_invitations(request),
    }


def _pending_invitations(request: HttpRequest) -> int:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return 0
    return Invitation.objects.for_user(user).pending().count()

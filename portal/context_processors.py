from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def portal(request: HttpRequest) -> dict[str, object]:
    return {"signup_enabled": settings.SIGNUP_ENABLED, "oidc_enabled": bool(settings.OIDC_SERVER_URL)}

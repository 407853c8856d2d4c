"""Questions per user per minute (websocket and HTTP together)."""

from __future__ import annotations

from django.conf import settings

from portal.limits import allow


def allow_question(user_id: int) -> bool:
    """Count one question; False when the user is over PORTAL_ASK_RATE_PER_MINUTE this minute."""
    return allow("asks", user_id, settings.ASK_RATE_PER_MINUTE)

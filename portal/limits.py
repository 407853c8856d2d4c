"""Per-user rates, counted in Redis so that every web process shares the count: questions
(websocket and HTTP together) and uploaded files (page and API together)."""

from __future__ import annotations

import time
from functools import cache

import redis
from django.conf import settings
from django.utils.translation import gettext as _


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2)


def _minute() -> int:
    return int(time.time() // 60)


def allow(kind: str, user_id: int, per_minute: int, amount: int = 1) -> bool:
    """Count `amount` of `kind` for the user this minute; False when that goes over `per_minute`."""
    key = f"portal:{kind}:{user_id}:{_minute()}"
    pipe = _client(settings.REDIS_URL).pipeline()
    pipe.incrby(key, amount)
    pipe.expire(key, 120)
    count, _ = pipe.execute()
    return int(count) <= per_minute


def upload_refused(user_id: int, files: int) -> str | None:
    """Count `files` uploaded files; the message to show when that is over
    PORTAL_UPLOAD_FILES_PER_MINUTE (page and API alike), else None."""
    if allow("uploads", user_id, settings.UPLOAD_FILES_PER_MINUTE, files):
        return None
    return _("Too many files uploaded this minute (at most %(count)d a minute): wait and send them again.") % {
        "count": settings.UPLOAD_FILES_PER_MINUTE
    }

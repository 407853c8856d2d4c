"""Per-user rates, counted in Redis so that every web process shares the count: questions
(websocket and HTTP together) and uploaded files (page and API together)."""

from __future__ import annotations

import time
import uuid
from functools import cache

import redis
from django.conf import settings
from django.utils.translation import gettext as _


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2)


PREFIX = "portal:rate"  # tests give themselves a prefix of their own
WINDOW = 60.0  # seconds


def allow(kind: str, user_id: int, per_minute: int, amount: int = 1) -> bool:
    """Count `amount` of `kind` for the user; False when that makes more than `per_minute` in the
    last 60 seconds. A sliding window (one sorted-set member per unit, scored by its time), so
    that a burst is not allowed twice across the turn of a clock minute."""
    key = f"{PREFIX}:{kind}:{user_id}"
    now = time.time()
    stamp = uuid.uuid4().hex
    pipe = _client(settings.REDIS_URL).pipeline()
    pipe.zremrangebyscore(key, "-inf", now - WINDOW)
    pipe.zadd(key, {f"{stamp}:{n}": now for n in range(amount)})
    pipe.zcard(key)
    pipe.expire(key, int(WINDOW) + 1)
    _removed, _added, count, _expiry = pipe.execute()
    return int(count) <= per_minute


def allow_question(user_id: int) -> bool:
    """Count one question (websocket and HTTP together); False when the user is over
    PORTAL_ASK_RATE_PER_MINUTE in the last minute."""
    return allow("asks", user_id, settings.ASK_RATE_PER_MINUTE)


def upload_refused(user_id: int, files: int) -> str | None:
    """Count `files` uploaded files; the message to show when that is over
    PORTAL_UPLOAD_FILES_PER_MINUTE (page and API alike), else None."""
    if allow("uploads", user_id, settings.UPLOAD_FILES_PER_MINUTE, files):
        return None
    return _("Too many files uploaded this minute (at most %(count)d a minute): wait and send them again.") % {
        "count": settings.UPLOAD_FILES_PER_MINUTE
    }

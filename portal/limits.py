"""Per-user rates, counted in Redis so that every web process shares the count: questions
(websocket and HTTP together) and uploaded files (page and API together)."""

from __future__ import annotations

import time
from functools import cache

import redis
from django.conf import settings


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
